// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: the payload ICRC, with the routine chosen at load.
 *
 * Every payload byte that goes on or comes off the wire is covered by the
 * ICRC (a CRC-32): srnic_payload_crc32() runs it with the kernel's
 * crc32_le() (table-driven, lib/crc32.c) or with the crypto API's "crc32"
 * (crc32-pclmul on x86: carry-less multiplication), whichever is faster
 * here: like the kernel's RAID xor code (crypto/xor.c), the module times
 * both once at load. srnic.crc_method= forces one ("crc32_le" or
 * "crypto"). The headers' few bytes always use crc32_le().
 */

#include <crypto/hash.h>
#include <linux/crc32.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/string.h>

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

/**
 * srnic_payload_init() - choose the payload routines (module load)
 */
void srnic_payload_init(void)
{
	srnic_crc_pick();
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
