/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The kernel facilities kernel/srnic_wire.[ch] use, for building that same
 * source in userspace (unit tests, fuzzer). See kernel/srnic_wire_compat.h.
 */
#ifndef SRNIC_KSHIM_H
#define SRNIC_KSHIM_H

#include <assert.h>
#include <endian.h>
#include <linux/types.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;

#define __packed __attribute__((__packed__))
#ifndef __cplusplus
#define static_assert _Static_assert
#endif

#define BIT(n) (1UL << (n))
#define GENMASK(h, l) ((~0U >> (31 - (h))) & (~0U << (l)))

/* Mask-driven field access, as <linux/bitfield.h>. */
#define FIELD_GET(mask, reg) \
	((__typeof__(mask))(((reg) & (mask)) >> __builtin_ctzll(mask)))
#define FIELD_PREP(mask, val) \
	((__typeof__(mask))(((val) << __builtin_ctzll(mask)) & (mask)))

#define be16_to_cpu(x) be16toh((uint16_t)(x))
#define be32_to_cpu(x) be32toh((uint32_t)(x))
#define be64_to_cpu(x) be64toh((uint64_t)(x))
#define cpu_to_be16(x) ((__be16)htobe16(x))
#define cpu_to_be32(x) ((__be32)htobe32(x))
#define cpu_to_be64(x) ((__be64)htobe64(x))
#define cpu_to_le32(x) ((__le32)htole32(x))
#define le32_to_cpu(x) le32toh((uint32_t)(x))

/* The kernel's crc32_le(): reflected CRC-32 (0xedb88320), no inversions. */
uint32_t crc32_le(uint32_t crc, const void *data, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* SRNIC_KSHIM_H */
