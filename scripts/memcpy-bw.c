// SPDX-License-Identifier: GPL-2.0
/*
 * memcpy-bw: the machine's memory-copy bandwidth, the ceiling of any RDMA
 * transfer done by copying (srnic's local delivery copies each payload once,
 * from source to destination pages). Used by scripts/bench.sh inside the VM.
 *
 * Usage: memcpy-bw BLOCK_BYTES SECONDS [METHOD]
 *
 * Copies one BLOCK_BYTES buffer to another, again and again, for about
 * SECONDS, with METHOD:
 *
 *   libc   the C library's memcpy (the default)
 *   movsb  `rep movsb`, which the kernel's memcpy is on CPUs with ERMS (as
 *          the VM's -cpu max): the copy srnic's NIC engine does
 *   sse2   a loop of 16-byte SSE2 loads and stores, 64 bytes per turn
 *
 * They differ under QEMU/TCG: glibc uses `rep movsb` for mid-sized copies
 * (64 KiB among them) on ERMS CPUs, and TCG emulates `rep movsb` several
 * times slower than vector loads and stores. And prints one line:
 *
 *   memcpy method=libc block=65536 copies=N bytes=B seconds=S GBps=X gbps=Y
 *
 * Both count the bytes copied (each once): GBps in 10^9 bytes per second,
 * gbps in 10^9 bits per second, the unit of the benchmark's table. A block
 * that fits in the caches (64 KiB, perftest's working set at that message
 * size) gives the cache-hot bandwidth; a large one (64 MiB) the streaming
 * one. A few warm-up copies touch every page first, so page faults are not
 * counted.
 *
 * Build with -fno-tree-loop-distribute-patterns, or GCC may turn the sse2
 * loop back into a call of memcpy.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __x86_64__
#include <emmintrin.h>
#endif

typedef void copy_fn(void *dst, const void *src, size_t len);

static void copy_libc(void *dst, const void *src, size_t len)
{
	memcpy(dst, src, len);
}

#ifdef __x86_64__
static void copy_movsb(void *dst, const void *src, size_t len)
{
	__asm__ __volatile__("rep movsb"
			     : "+D"(dst), "+S"(src), "+c"(len)
			     :
			     : "memory");
}

/* dst and src 16-byte aligned, len a multiple of 64. */
static void copy_sse2(void *dst, const void *src, size_t len)
{
	__m128i *d = dst;
	const __m128i *s = src;
	size_t i;

	for (i = 0; i < len / 64; i++, d += 4, s += 4) {
		__m128i a = _mm_load_si128(s), b = _mm_load_si128(s + 1);
		__m128i c = _mm_load_si128(s + 2), e = _mm_load_si128(s + 3);

		_mm_store_si128(d, a);
		_mm_store_si128(d + 1, b);
		_mm_store_si128(d + 2, c);
		_mm_store_si128(d + 3, e);
	}
}
#endif

static const struct {
	const char *name;
	copy_fn *copy;
} methods[] = {
	{ "libc", copy_libc },
#ifdef __x86_64__
	{ "movsb", copy_movsb },
	{ "sse2", copy_sse2 },
#endif
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	size_t block, batch, i;
	const char *method = argc > 3 ? argv[3] : "libc";
	copy_fn *copy = NULL;
	double seconds, start, elapsed;
	uint64_t copies = 0;
	unsigned char *src, *dst;
	unsigned int sum = 0;

	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: %s BLOCK_BYTES SECONDS [libc|movsb|sse2]\n",
			argv[0]);
		return 2;
	}
	for (i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		if (!strcmp(method, methods[i].name))
			copy = methods[i].copy;
	if (!copy) {
		fprintf(stderr, "%s: no copy method %s here\n", argv[0], method);
		return 2;
	}
	block = strtoull(argv[1], NULL, 0);
	seconds = strtod(argv[2], NULL);
	if (block == 0 || block % 64 || seconds <= 0) {
		fprintf(stderr,
			"%s: BLOCK_BYTES must be a multiple of 64, SECONDS > 0\n",
			argv[0]);
		return 2;
	}
	src = aligned_alloc(4096, (block + 4095) / 4096 * 4096);
	dst = aligned_alloc(4096, (block + 4095) / 4096 * 4096);
	if (!src || !dst) {
		perror("aligned_alloc");
		return 1;
	}
	for (i = 0; i < block; i++)
		src[i] = (unsigned char)(i * 7);
	for (i = 0; i < 4; i++)
		copy(dst, src, block);

	/* Read the clock about every 64 MiB copied: clock reads are
	 * syscalls under TCG (no vDSO clocksource) and would cost more than
	 * a small copy.
	 */
	batch = block >= (64u << 20) ? 1 : (64u << 20) / block;
	start = now();
	do {
		for (i = 0; i < batch; i++) {
			copy(dst, src, block);
			/* The copy must happen: dst is read below, and the
			 * compiler may not merge the iterations.
			 */
			__asm__ __volatile__("" : : "r"(dst) : "memory");
		}
		copies += batch;
		elapsed = now() - start;
	} while (elapsed < seconds);

	for (i = 0; i < block; i += 4099)
		sum += dst[i];
	printf("memcpy method=%s block=%zu copies=%llu bytes=%llu seconds=%.3f GBps=%.3f gbps=%.3f check=%u\n",
	       method, block, (unsigned long long)copies,
	       (unsigned long long)(copies * block), elapsed,
	       copies * block / elapsed / 1e9,
	       copies * block * 8 / elapsed / 1e9, sum);
	free(src);
	free(dst);
	return 0;
}
