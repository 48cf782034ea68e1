/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What srnic_wire.h and srnic_wire.c use from the kernel. In the kernel
 * these are the kernel's own headers; in userspace (unit tests, fuzzer)
 * userspace/tests/kshim/srnic_kshim.h provides equivalents.
 */
#ifndef SRNIC_WIRE_COMPAT_H
#define SRNIC_WIRE_COMPAT_H

#ifdef __KERNEL__
#include <linux/bitfield.h>
#include <linux/bits.h>
#include <linux/build_bug.h>
#include <linux/compiler_attributes.h>
#include <linux/crc32.h>
#include <linux/string.h>
#include <linux/types.h>
#include <asm/byteorder.h>
#else
#include <srnic_kshim.h>
#endif

#endif /* SRNIC_WIRE_COMPAT_H */
