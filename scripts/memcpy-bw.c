// SPDX-License-Identifier: GPL-2.0
/*
 * memcpy-bw: the machine's memory-copy bandwidth, the ceiling of any RDMA
 * transfer done by copying (srnic's local delivery copies each payload once,
 * from source to destination pages). Used by scripts/bench.sh inside the VM.
 *
 * Usage: memcpy-bw BLOCK_BYTES SECONDS
 *
 * Copies one BLOCK_BYTES buffer to another with the C library's memcpy,
 * again and again, for about SECONDS, and prints one line:
 *
 *   memcpy block=65536 copies=N bytes=B seconds=S GBps=X gbps=Y
 *
 * Both count the bytes copied (each once): GBps in 10^9 bytes per second,
 * gbps in 10^9 bits per second, the unit of the benchmark's table. A block that fits in the caches
 * (64 KiB, perftest's working set at that message size) gives the cache-hot
 * ceiling; a large one (64 MiB) the streaming one. A few warm-up copies
 * touch every page first, so page faults are not counted.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	size_t block, batch, i;
	double seconds, start, elapsed;
	uint64_t copies = 0;
	unsigned char *src, *dst;
	unsigned int sum = 0;

	if (argc != 3) {
		fprintf(stderr, "usage: %s BLOCK_BYTES SECONDS\n", argv[0]);
		return 2;
	}
	block = strtoull(argv[1], NULL, 0);
	seconds = strtod(argv[2], NULL);
	if (block == 0 || seconds <= 0) {
		fprintf(stderr, "%s: BLOCK_BYTES and SECONDS must be > 0\n",
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
		memcpy(dst, src, block);

	/* Read the clock about every 64 MiB copied: clock reads are
	 * syscalls under TCG (no vDSO clocksource) and would cost more than
	 * a small copy.
	 */
	batch = block >= (64u << 20) ? 1 : (64u << 20) / block;
	start = now();
	do {
		for (i = 0; i < batch; i++) {
			memcpy(dst, src, block);
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
	printf("memcpy block=%zu copies=%llu bytes=%llu seconds=%.3f GBps=%.3f gbps=%.3f check=%u\n",
	       block, (unsigned long long)copies,
	       (unsigned long long)(copies * block), elapsed,
	       copies * block / elapsed / 1e9,
	       copies * block * 8 / elapsed / 1e9, sum);
	free(src);
	free(dst);
	return 0;
}
