/* SPDX-License-Identifier: GPL-2.0 */
/*
 * srnic: the device's limits and identity, what query_device and
 * query_port report and the verbs enforce (included by srnic.h).
 */
#ifndef SRNIC_LIMITS_H
#define SRNIC_LIMITS_H

#include <linux/bits.h>
#include <linux/types.h>
#include <asm/page.h>

#define SRNIC_DRIVER_NAME "srnic"
#define SRNIC_PORT 1		/* srnic devices have exactly one port */

/*
 * A software device has no IEEE OUI; like rxe (0xffffff) srnic reports a
 * value no vendor holds, so tools and tests that treat 0 as "unset" work.
 */
#define SRNIC_VENDOR_ID 0xfffffe
#define SRNIC_VENDOR_PART_ID 0x5352	/* "SR" */

/* Largest message: IBTA's 2^31 bytes (port max_msg_sz). */
#define SRNIC_MAX_MSG_SIZE BIT(31)

/* Limits reported by query_device/query_port for what is implemented. */
#define SRNIC_MAX_PD BIT(16)
#define SRNIC_MAX_UCONTEXT 1024
#define SRNIC_GID_TABLE_LEN 128
#define SRNIC_PKEY_TABLE_LEN 1
/*
 * Packet pacing (IB_QP_RATE_LIMIT of raw packet QPs), kbit/s: a
 * high-resolution timer paces down to a packet a second; 100 Gbit/s is more
 * than a software sender reaches.
 */
#define SRNIC_RATE_LIMIT_MIN_KBPS 1U
#define SRNIC_RATE_LIMIT_MAX_KBPS 100000000U
#define SRNIC_DEFAULT_PKEY 0xffff

/*
 * CQ and QP limits. They keep every ring within SRNIC_QUEUE_MAX_BYTES:
 * a CQ of SRNIC_MAX_CQE + 1 entries of 64 bytes is 32 MiB (libfabric's
 * ofi_rxm asks its verbs CQs for 65536 entries and fails below), an SQ of
 * SRNIC_MAX_QP_WR entries of at most 1 KiB (64-byte header and 32 SGEs or
 * 512 bytes of inline data, rounded up) is 16 MiB.
 */
#define SRNIC_MAX_CQ BIT(14)
#define SRNIC_MAX_CQE (BIT(19) - 1)
#define SRNIC_MAX_QP BIT(17)
#define SRNIC_MIN_QPN 2		/* QPN 0 and 1 are the special QPs */
#define SRNIC_GSI_QPN 1		/* QP1: ib_mad's GSI QP (CM, rdma_cm) */
#define SRNIC_MAX_QPN (SRNIC_MIN_QPN + SRNIC_MAX_QP - 1)
#define SRNIC_MAX_QP_WR BIT(14)
#define SRNIC_MAX_SGE 32
#define SRNIC_MAX_INLINE_DATA 512
#define SRNIC_MAX_RD_ATOMIC 128	/* as rxe: peers ask for its limit */
/*
 * Selective repeat: PSNs an RC requester has in flight beyond the oldest
 * unacknowledged, at most, and so those a responder keeps beyond the
 * expected PSN; requests its device's responders keep, at most.
 */
#define SRNIC_SR_WINDOW 512
#define SRNIC_OOO_MAX_HELD 16384
/* UDP source ports an RC requester may spray over (sysfs multipath). */
#define SRNIC_MAX_MULTIPATH 16

/* Shared receive queues (srnic_srq.c): rings of the RQ's format. */
#define SRNIC_MAX_SRQ BIT(14)
#define SRNIC_MAX_SRQ_WR SRNIC_MAX_QP_WR

/*
 * Tag matching (srnic_tm.c): tagged buffers per SRQ, SGEs per buffer, the
 * longest rendezvous header (TMH and RVH, and room for a protocol's own).
 */
#define SRNIC_MAX_TM_TAGS 1024
#define SRNIC_TM_MAX_SGE SRNIC_TM_OP_MAX_SGE
#define SRNIC_TM_MAX_RNDV_HDR 64

/*
 * Memory regions. An MR key is (index << 8) | key byte, and the index
 * space [1, SRNIC_MAX_MR] fits the 24 bits left of the key byte. Page
 * arrays are kvcalloc()'d, which refuses more than INT_MAX bytes: 2^39
 * bytes of 4 KiB pages need a 1 GiB array.
 */
#define SRNIC_MAX_MR (BIT(20) - 1)
#define SRNIC_MAX_MR_SIZE BIT_ULL(39)
#define SRNIC_MAX_FAST_REG_PAGES 512

/*
 * Memory windows (srnic_mw.c) share the key format and the 24-bit index
 * space with MRs: MW indexes start after the last MR index, so an rkey's
 * index alone says which table holds it.
 */
#define SRNIC_MW_FIRST_INDEX (SRNIC_MAX_MR + 1)
#define SRNIC_MAX_MW (BIT(20) - 1)

/* Is @key a memory window's (rather than an MR's)? */
static inline bool srnic_key_is_mw(u32 key)
{
	return key >> 8 >= SRNIC_MW_FIRST_INDEX;
}

/*
 * Device memory (srnic_dm.c): the largest budget the max_dm_kib module
 * parameter may give a device, and the largest alignment (log2) an
 * allocation may ask for: allocations are page aligned.
 */
#define SRNIC_MAX_DM_SIZE BIT_ULL(30)
#define SRNIC_DM_MAX_LOG_ALIGN PAGE_SHIFT

/* The largest RSS indirection table: 2^SRNIC_MAX_LOG_RWQ_IND_TABLE WQs. */
#define SRNIC_MAX_LOG_RWQ_IND_TABLE 8

/* Received packets (or frames) a QP may have waiting for its engine task. */
#define SRNIC_RXQ_MAX 4096

#endif /* SRNIC_LIMITS_H */
