// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: the payload routines (ICRC and copy), chosen at load.
 *
 * Every payload byte that goes on or comes off the wire is covered by the
 * ICRC (a CRC-32): srnic_payload_crc32() runs it with the kernel's
 * crc32_le() (table-driven, lib/crc32.c), with srnic_crc32_fold() (shifts
 * and xors, no tables: the fastest under QEMU's TCG) or with the crypto
 * API's "crc32" (crc32-pclmul on x86: carry-less multiplication),
 * whichever is fastest here: like the kernel's RAID xor code
 * (crypto/xor.c), the module checks and times them once at load.
 * srnic.crc_method= forces one ("crc32_le", "fold" or "crypto"). The
 * headers' few bytes always use crc32_le().
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

#include "srnic.h"

static char *crc_method = "auto";
module_param(crc_method, charp, 0444);
MODULE_PARM_DESC(crc_method,
		 "Payload ICRC routine: auto (time them at load, keep the fastest), crc32_le, fold, crypto (the crypto API's crc32, e.g. crc32-pclmul)");

/* The payload ICRC routines; srnic_crc_routine_names[] spells them. */
enum srnic_crc_routine {
	SRNIC_CRC_LE,
	SRNIC_CRC_FOLD,
	SRNIC_CRC_CRYPTO,
	SRNIC_CRC_ROUTINES
};

static const char *const srnic_crc_routine_names[SRNIC_CRC_ROUTINES] = {
	[SRNIC_CRC_LE] = "crc32_le",
	[SRNIC_CRC_FOLD] = "fold",
	[SRNIC_CRC_CRYPTO] = "crypto",
};

static enum srnic_crc_routine srnic_crc_routine __read_mostly = SRNIC_CRC_LE;

/* CRCs shorter than this use crc32_le(): the crypto call costs more. */
#define SRNIC_CRC_CRYPTO_MIN 256

/* The crypto API's crc32, while SRNIC_CRC_CRYPTO is chosen; else NULL. */
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

/*
 * The fold: x^274 = x^93 + x^75 + x^19 + x^11 + 1 modulo the CRC-32
 * polynomial (found by a search of the multiples of the polynomial with six
 * terms; checked at load against crc32_le()). So a bit of degree d >= 274 can
 * be replaced by five bits of degree d - 181, d - 199, d - 255, d - 263 and
 * d - 274 without changing the remainder, which is all a CRC depends on.
 * SRNIC_FOLD_TAIL is 274 bits in bytes, rounded up: what is left unfolded.
 */
#define SRNIC_FOLD_TAIL 35
#define SRNIC_FOLD_MIN 64

/**
 * srnic_crc32_fold() - crc32_le() without table lookups in its main loop
 * @crc: the running CRC, as crc32_le() takes it
 * @data: the bytes
 * @len: how many
 *
 * The ICRC is a reflected CRC: the first byte holds the highest powers and
 * a byte's bit 0 the highest of its eight, so in a little-endian 64-bit word
 * a lower bit is a higher power, and a bit moved k powers down moves k bits
 * up, into the next word past bit 63. Each word of the message, with what
 * earlier words folded into it, is folded into the 2nd to 5th words after it
 * (every distance is at least 64 bits), which wait in five registers, until
 * fewer than 8 + SRNIC_FOLD_TAIL bytes remain; crc32_le() finishes over those
 * with the folded bits added. The running CRC enters as the first four
 * bytes' xor, as in crc32_le(). Per 8 bytes: one load, 11 shifts and
 * 12 xors, against slice-by-8's nine loads. Under QEMU's TCG, where every
 * load is a software TLB lookup, that is 3.6 times faster (1.9 against
 * 6.7 us per 4 KiB, timed in the bench VM); on hardware the tables or
 * PCLMUL win, and srnic_crc_pick() keeps those.
 *
 * Return: the running CRC, the same as crc32_le(@crc, @data, @len).
 */
static u32 srnic_crc32_fold(u32 crc, const void *data, size_t len)
{
	const u8 *p = data, *end = p + len;
	u64 cur = crc, next1 = 0, next2 = 0, next3 = 0, next4 = 0;
	u8 tail[48];
	size_t rest;

	if (len < SRNIC_FOLD_MIN)
		return crc32_le(crc, data, len);
	while (end - p >= 8 + SRNIC_FOLD_TAIL) {
		u64 v = get_unaligned_le64(p) ^ cur;

		cur = next1;
		next1 = next2 ^ (v << 53);				/* 181 */
		next2 = next3 ^ (v >> 11) ^ (v << 7) ^ (v << 63);	/* 181, 199, 255 */
		next3 = next4 ^ (v >> 57) ^ (v >> 1) ^ (v << 7) ^
			(v << 18);					/* 199, 255, 263, 274 */
		next4 = (v >> 57) ^ (v >> 46);				/* 263, 274 */
		p += 8;
	}
	/*
	 * 35 to 42 bytes are left, and no folded bit lies past the end: a
	 * bit moves down by 274 powers at most, and only bits 274 or more
	 * powers above the end were folded.
	 */
	rest = end - p;
	memset(tail, 0, sizeof(tail));
	memcpy(tail, p, rest);
	put_unaligned_le64(get_unaligned_le64(tail) ^ cur, tail);
	put_unaligned_le64(get_unaligned_le64(tail + 8) ^ next1, tail + 8);
	put_unaligned_le64(get_unaligned_le64(tail + 16) ^ next2, tail + 16);
	put_unaligned_le64(get_unaligned_le64(tail + 24) ^ next3, tail + 24);
	put_unaligned_le64(get_unaligned_le64(tail + 32) ^ next4, tail + 32);
	return crc32_le(0, tail, rest);
}

static u32 srnic_crc32_by(enum srnic_crc_routine routine,
			  struct crypto_shash *tfm, u32 crc,
			  const void *data, size_t len)
{
	switch (routine) {
	case SRNIC_CRC_FOLD:
		return srnic_crc32_fold(crc, data, len);
	case SRNIC_CRC_CRYPTO:
		if (len >= SRNIC_CRC_CRYPTO_MIN)
			return srnic_crc32_crypto(tfm, crc, data, len);
		fallthrough;
	default:
		return crc32_le(crc, data, len);
	}
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
	return srnic_crc32_by(srnic_crc_routine, srnic_crc_tfm, crc, data,
			      len);
}

/**
 * srnic_payload_crc32_named() - a CRC-32 by one named routine (for srnic_test.ko)
 * @name: "crc32_le", "fold", "crypto", or "" for the routine in use
 * @crc: the running CRC in, the new one out
 * @data: the bytes
 * @len: how many
 *
 * Return: 0; -EINVAL for an unknown name; -ENODEV for "crypto" when the
 * module did not choose the crypto API's crc32.
 */
int srnic_payload_crc32_named(const char *name, u32 *crc, const void *data,
			      size_t len)
{
	int routine = srnic_crc_routine;

	if (*name) {
		routine = match_string(srnic_crc_routine_names,
				       SRNIC_CRC_ROUTINES, name);
		if (routine < 0)
			return routine;
	}
	if (routine == SRNIC_CRC_CRYPTO && !srnic_crc_tfm)
		return -ENODEV;
	*crc = srnic_crc32_by(routine, srnic_crc_tfm, *crc, data, len);
	return 0;
}
EXPORT_SYMBOL_GPL(srnic_payload_crc32_named);

#define SRNIC_CRC_BENCH_ROUNDS 16

/* Nanoseconds for SRNIC_CRC_BENCH_ROUNDS CRCs of a page, the best of 3. */
static u64 srnic_crc_time(enum srnic_crc_routine routine,
			  struct crypto_shash *tfm, const void *buf)
{
	u64 best = U64_MAX;
	int i, j;

	for (i = 0; i < 3; i++) {
		u64 t0 = ktime_get_ns();
		u32 crc = ~0U;

		for (j = 0; j < SRNIC_CRC_BENCH_ROUNDS; j++)
			crc = srnic_crc32_by(routine, tfm, crc, buf, PAGE_SIZE);
		best = min(best, ktime_get_ns() - t0);
		/* Keeps the CRCs from being optimised away. */
		barrier_data(&crc);
	}
	return best;
}

/*
 * Whether @routine gives crc32_le()'s result for a few lengths around
 * SRNIC_FOLD_MIN and the tail, at an odd alignment, and a page's.
 */
static bool srnic_crc_agrees(enum srnic_crc_routine routine,
			     struct crypto_shash *tfm, const u8 *buf)
{
	static const u16 lens[] = { 0, 1, 63, 64, 65, 77, 78, 256, 1000,
				    PAGE_SIZE - 3 };
	int i;

	for (i = 0; i < ARRAY_SIZE(lens); i++) {
		u32 seed = 0x12345678 * (i + 1);

		if (srnic_crc32_by(routine, tfm, seed, buf + 3, lens[i]) !=
		    crc32_le(seed, buf + 3, lens[i]))
			return false;
	}
	return true;
}

static void srnic_crc_pick(void)
{
	enum srnic_crc_routine best = SRNIC_CRC_LE, r, forced;
	struct crypto_shash *tfm;
	u64 t[SRNIC_CRC_ROUTINES] = {};
	bool ok[SRNIC_CRC_ROUTINES] = {};
	int i;
	u8 *buf;

	i = match_string(srnic_crc_routine_names, SRNIC_CRC_ROUTINES,
			 crc_method);
	forced = i < 0 ? SRNIC_CRC_ROUTINES : i;
	if (i < 0 && strcmp(crc_method, "auto"))
		pr_warn("srnic: crc_method=%s unknown, timing the routines\n",
			crc_method);
	tfm = crypto_alloc_shash("crc32", 0, 0);
	if (IS_ERR(tfm)) {
		pr_info("srnic: no crypto crc32 (%ld)\n", PTR_ERR(tfm));
		tfm = NULL;
	} else if (crypto_shash_descsize(tfm) != sizeof(u32)) {
		crypto_free_shash(tfm);
		tfm = NULL;
	}
	buf = kmalloc(PAGE_SIZE, GFP_KERNEL);
	if (!buf)
		goto out;
	get_random_bytes(buf, PAGE_SIZE);
	for (r = SRNIC_CRC_LE; r < SRNIC_CRC_ROUTINES; r++) {
		if (r == SRNIC_CRC_CRYPTO && !tfm)
			continue;
		/* A routine that disagrees with crc32_le() is never used. */
		ok[r] = r == SRNIC_CRC_LE || srnic_crc_agrees(r, tfm, buf);
		if (!ok[r]) {
			pr_err("srnic: ICRC routine %s gives wrong results, not used\n",
			       srnic_crc_routine_names[r]);
			continue;
		}
		if (forced != SRNIC_CRC_ROUTINES)
			continue;
		t[r] = srnic_crc_time(r, tfm, buf);
		if (t[r] < t[best])
			best = r;
	}
	kfree(buf);
	if (forced != SRNIC_CRC_ROUTINES) {
		if (ok[forced])
			best = forced;
		else
			pr_warn("srnic: crc_method=%s not available, using crc32_le\n",
				crc_method);
	} else {
		char times[SRNIC_CRC_ROUTINES][24];

		/* A routine not timed (absent or wrong) shows as "-". */
		for (r = SRNIC_CRC_LE; r < SRNIC_CRC_ROUTINES; r++) {
			if (t[r])
				scnprintf(times[r], sizeof(times[r]), "%llu ns",
					  t[r]);
			else
				strscpy(times[r], "-", sizeof(times[r]));
		}
		pr_info("srnic: payload ICRC: crc32_le %s, fold %s, crypto %s %s per %lu KiB; using %s\n",
			times[SRNIC_CRC_LE], times[SRNIC_CRC_FOLD],
			tfm ? crypto_shash_driver_name(tfm) : "(none)",
			times[SRNIC_CRC_CRYPTO],
			SRNIC_CRC_BENCH_ROUNDS * PAGE_SIZE / 1024,
			srnic_crc_routine_names[best]);
	}
out:
	srnic_crc_routine = best;
	if (best == SRNIC_CRC_CRYPTO)
		srnic_crc_tfm = tfm;
	else if (tfm)
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
