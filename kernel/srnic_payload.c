// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: the payload routines (ICRC and copy), chosen at load.
 *
 * Every payload byte that goes on or comes off the wire is covered by the
 * ICRC (a CRC-32): srnic_payload_crc32() runs it with the kernel's
 * crc32_le() (table-driven, lib/crc32.c) or with the crypto API's "crc32"
 * (crc32-pclmul on x86: carry-less multiplication), whichever is faster
 * here: like the kernel's RAID xor code (crypto/xor.c), the module times
 * both once at load. srnic.crc_method= forces one ("crc32_le" or
 * "crypto"). The headers' few bytes always use crc32_le().
 *
 * Every payload byte is also copied, page by page (MR to MR for local
 * delivery, MR to skb, skb to MR): srnic_payload_copy() is the kernel's
 * memcpy() or a loop of 8-byte moves, again whichever the module times
 * faster at load, over page-sized copies between distinct pages as the
 * engine does them (srnic.copy_method= forces one). On CPUs with ERMS the
 * kernel's memcpy() is "rep movsb", the best choice on hardware; QEMU's
 * TCG emulates that a byte per step, and the word loop copies 64 KiB
 * messages ten times faster there (measured: ib_write_bw 64 KiB on one
 * device, 134 MB/s with memcpy(), 1302 MB/s with words). A copy of one
 * hot page over and over does not show the difference: the timing walks
 * 16 pages.
 */

#include <crypto/hash.h>
#include <linux/crc32.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/random.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/gfp.h>
#include <asm/unaligned.h>

#include "srnic.h"

static char *crc_method = "auto";
module_param(crc_method, charp, 0444);
MODULE_PARM_DESC(crc_method,
		 "Payload ICRC routine: auto (time them at load, keep the fastest), crc32_le, crypto (the crypto API's crc32, e.g. crc32-pclmul)");

/* CRCs shorter than this use crc32_le(): the crypto call costs more. */
#define SRNIC_CRC_CRYPTO_MIN 256

/* The crypto API's crc32, when it is the faster one; else NULL. */
static struct crypto_shash *srnic_crc_tfm;

/* The crypto API's crc32 continuing @crc, as crc32_le() would. */
static u32 srnic_crc32_crypto(struct crypto_shash *tfm, u32 crc,
			      const void *data, size_t len)
{
	SHASH_DESC_ON_STACK(desc, tfm);

	desc->tfm = tfm;
	/* Its state is the running CRC, like crc32_le()'s argument. */
	*(u32 *)shash_desc_ctx(desc) = crc;
	if (crypto_shash_update(desc, data, len))
		return crc32_le(crc, data, len);
	return *(u32 *)shash_desc_ctx(desc);
}

/**
 * srnic_payload_crc32() - continue a CRC-32 (the ICRC) over payload bytes
 * @crc: the running CRC, as crc32_le() takes it
 * @data: the bytes
 * @len: how many
 *
 * Any context; does not sleep. Same result as crc32_le().
 *
 * Return: the running CRC.
 */
u32 srnic_payload_crc32(u32 crc, const void *data, size_t len)
{
	if (srnic_crc_tfm && len >= SRNIC_CRC_CRYPTO_MIN)
		return srnic_crc32_crypto(srnic_crc_tfm, crc, data, len);
	return crc32_le(crc, data, len);
}

#define SRNIC_CRC_BENCH_ROUNDS 16

/* Nanoseconds for SRNIC_CRC_BENCH_ROUNDS CRCs of a page, the best of 3. */
static u64 srnic_crc_time(struct crypto_shash *tfm, const void *buf, u32 *out)
{
	u64 best = U64_MAX;
	int i, j;

	for (i = 0; i < 3; i++) {
		u64 t0 = ktime_get_ns();
		u32 crc = ~0U;

		for (j = 0; j < SRNIC_CRC_BENCH_ROUNDS; j++)
			crc = tfm ? srnic_crc32_crypto(tfm, crc, buf, PAGE_SIZE) :
				    crc32_le(crc, buf, PAGE_SIZE);
		best = min(best, ktime_get_ns() - t0);
		*out = crc;
	}
	return best;
}

static void srnic_crc_pick(void)
{
	struct crypto_shash *tfm;
	u64 t_le, t_crypto;
	u32 crc_le, crc_crypto;
	void *buf;

	if (!strcmp(crc_method, "crc32_le"))
		return;
	tfm = crypto_alloc_shash("crc32", 0, 0);
	if (IS_ERR(tfm)) {
		pr_info("srnic: no crypto crc32 (%ld), ICRC by crc32_le\n",
			PTR_ERR(tfm));
		return;
	}
	if (crypto_shash_descsize(tfm) != sizeof(u32)) {
		crypto_free_shash(tfm);
		return;
	}
	if (!strcmp(crc_method, "crypto")) {
		srnic_crc_tfm = tfm;
		return;
	}
	if (strcmp(crc_method, "auto"))
		pr_warn("srnic: crc_method=%s unknown, timing the routines\n",
			crc_method);
	buf = kmalloc(PAGE_SIZE, GFP_KERNEL);
	if (!buf) {
		crypto_free_shash(tfm);
		return;
	}
	memset(buf, 0xa5, PAGE_SIZE);
	t_le = srnic_crc_time(NULL, buf, &crc_le);
	t_crypto = srnic_crc_time(tfm, buf, &crc_crypto);
	kfree(buf);
	/* A driver that disagrees with crc32_le() is not used at all. */
	if (crc_crypto == crc_le && t_crypto < t_le)
		srnic_crc_tfm = tfm;
	pr_info("srnic: payload ICRC: crc32_le %llu ns, crypto %s %llu ns%s per %lu KiB; using %s\n",
		t_le, crypto_shash_driver_name(tfm), t_crypto,
		crc_crypto == crc_le ? "" : " (WRONG RESULT)",
		SRNIC_CRC_BENCH_ROUNDS * PAGE_SIZE / 1024,
		srnic_crc_tfm ? "crypto" : "crc32_le");
	if (!srnic_crc_tfm)
		crypto_free_shash(tfm);
}

static char *copy_method = "auto";
module_param(copy_method, charp, 0444);
MODULE_PARM_DESC(copy_method,
		 "Payload copy routine: auto (time them at load, keep the fastest), memcpy (the kernel's), words (8-byte moves)");

/* Which routine srnic_payload_copy() runs. */
static bool srnic_copy_by_words;

/*
 * Copy by 8-byte loads and stores, 32 bytes per step, then the tail.
 * The file is built with -fno-tree-loop-distribute-patterns, so that the
 * compiler does not turn this loop back into a memcpy() call.
 */
static void srnic_copy_words(void *dst, const void *src, size_t len)
{
	u8 *d = dst;
	const u8 *s = src;

	while (len >= 32) {
		u64 w0 = get_unaligned((const u64 *)s);
		u64 w1 = get_unaligned((const u64 *)(s + 8));
		u64 w2 = get_unaligned((const u64 *)(s + 16));
		u64 w3 = get_unaligned((const u64 *)(s + 24));

		put_unaligned(w0, (u64 *)d);
		put_unaligned(w1, (u64 *)(d + 8));
		put_unaligned(w2, (u64 *)(d + 16));
		put_unaligned(w3, (u64 *)(d + 24));
		d += 32;
		s += 32;
		len -= 32;
	}
	while (len >= 8) {
		put_unaligned(get_unaligned((const u64 *)s), (u64 *)d);
		d += 8;
		s += 8;
		len -= 8;
	}
	while (len--)
		*d++ = *s++;
}

/**
 * srnic_payload_copy() - copy payload bytes between non-overlapping buffers
 * @dst: destination
 * @src: source
 * @len: bytes
 *
 * Any context; does not sleep. The same result as memcpy().
 */
void srnic_payload_copy(void *dst, const void *src, size_t len)
{
	if (srnic_copy_by_words)
		srnic_copy_words(dst, src, len);
	else
		memcpy(dst, src, len);
}

/* Page pairs copied per timing round: a 64 KiB message on 4 KiB pages. */
#define SRNIC_COPY_BENCH_PAGES 16

/*
 * Nanoseconds to copy SRNIC_COPY_BENCH_PAGES pages, each to a page of its
 * own, through their direct-map addresses as the engine reaches MR pages,
 * the best of 3. The length is not a constant the compiler could inline
 * a fixed-size copy for: it comes from the caller, as in real use.
 */
static u64 srnic_copy_time(bool words, struct page **pages, size_t len)
{
	u64 best = U64_MAX;
	int i, j;

	for (i = 0; i < 3; i++) {
		u64 t0 = ktime_get_ns();

		for (j = 0; j < SRNIC_COPY_BENCH_PAGES; j++) {
			void *src = page_address(pages[2 * j]);
			void *dst = page_address(pages[2 * j + 1]);

			if (words)
				srnic_copy_words(dst, src, len);
			else
				memcpy(dst, src, len);
		}
		best = min(best, ktime_get_ns() - t0);
	}
	return best;
}

/* Did the last timing round copy every source page to its destination? */
static bool srnic_copy_check(struct page **pages)
{
	int j;

	for (j = 0; j < SRNIC_COPY_BENCH_PAGES; j++)
		if (memcmp(page_address(pages[2 * j]),
			   page_address(pages[2 * j + 1]), PAGE_SIZE))
			return false;
	return true;
}

static void srnic_copy_pick(void)
{
	struct page *pages[2 * SRNIC_COPY_BENCH_PAGES] = {};
	u64 t_memcpy, t_words;
	bool words_ok;
	int i;

	if (!strcmp(copy_method, "memcpy"))
		return;
	if (!strcmp(copy_method, "words")) {
		srnic_copy_by_words = true;
		return;
	}
	if (strcmp(copy_method, "auto"))
		pr_warn("srnic: copy_method=%s unknown, timing the routines\n",
			copy_method);
	for (i = 0; i < ARRAY_SIZE(pages); i++) {
		pages[i] = alloc_page(GFP_KERNEL);
		if (!pages[i])
			goto out;
		if (!(i & 1))
			get_random_bytes(page_address(pages[i]), PAGE_SIZE);
	}
	t_memcpy = srnic_copy_time(false, pages, PAGE_SIZE);
	for (i = 1; i < ARRAY_SIZE(pages); i += 2)
		clear_page(page_address(pages[i]));
	t_words = srnic_copy_time(true, pages, PAGE_SIZE);
	words_ok = srnic_copy_check(pages);
	/* A routine that does not copy right is not used at all. */
	srnic_copy_by_words = words_ok && t_words < t_memcpy;
	pr_info("srnic: payload copy: memcpy %llu ns, 8-byte words %llu ns%s per %lu KiB; using %s\n",
		t_memcpy, t_words, words_ok ? "" : " (WRONG RESULT)",
		SRNIC_COPY_BENCH_PAGES * PAGE_SIZE / 1024,
		srnic_copy_by_words ? "words" : "memcpy");
out:
	for (i = 0; i < ARRAY_SIZE(pages); i++)
		if (pages[i])
			__free_page(pages[i]);
}

/**
 * srnic_payload_init() - choose the payload routines (module load)
 */
void srnic_payload_init(void)
{
	srnic_crc_pick();
	srnic_copy_pick();
}

/**
 * srnic_payload_exit() - release what srnic_payload_init() took
 */
void srnic_payload_exit(void)
{
	if (srnic_crc_tfm)
		crypto_free_shash(srnic_crc_tfm);
	srnic_crc_tfm = NULL;
}
