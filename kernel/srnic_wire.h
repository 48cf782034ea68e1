/* SPDX-License-Identifier: GPL-2.0 */
/*
 * srnic: the RoCEv2 wire format (IBTA transport headers inside UDP/4791)
 * and nothing else.
 *
 * The headers are __packed big-endian structs; fields narrower than their
 * word are reached only through the SRNIC_<HDR>_<FIELD>_MASK masks with
 * FIELD_GET/FIELD_PREP. Every struct's size is asserted below.
 *
 * This header and srnic_wire.c also build in userspace (unit tests and the
 * packet fuzzer), so they use only what srnic_wire_compat.h provides.
 */
#ifndef SRNIC_WIRE_H
#define SRNIC_WIRE_H

#include "srnic_wire_compat.h"

#define SRNIC_ROCE_V2_UDP_PORT 4791
#define SRNIC_ICRC_SIZE 4
/* At least the longest BTH + extension header chain of any opcode. */
#define SRNIC_MAX_HDR_LEN 64
#define SRNIC_DEFAULT_PKEY_FULL 0xffff

/* ---- Base Transport Header ------------------------------------------ */

struct srnic_bth {
	u8 opcode;
	u8 flags;		/* SE, M, PadCnt, TVer */
	__be16 pkey;
	__be32 dqpn;		/* resv8a (FECN/BECN on IB), destination QP */
	__be32 apsn;		/* AckReq, resv7, PSN */
} __packed;

#define SRNIC_BTH_FLAGS_SE_MASK		0x80
#define SRNIC_BTH_FLAGS_MIG_MASK	0x40
#define SRNIC_BTH_FLAGS_PAD_MASK	0x30
#define SRNIC_BTH_FLAGS_TVER_MASK	0x0f
#define SRNIC_BTH_DQPN_RESV8A_MASK	GENMASK(31, 24)
#define SRNIC_BTH_DQPN_QPN_MASK		GENMASK(23, 0)
/* BECN, set in a CNP (RoCEv2 annex); FECN is bit 31, unused by RoCE. */
#define SRNIC_BTH_DQPN_BECN		BIT(30)
#define SRNIC_BTH_APSN_ACKREQ_MASK	BIT(31)
/*
 * srnic's selective repeat, in two of resv7's bits, which IBTA peers
 * ignore on receipt (rxe does; the ICRC covers them). On a request:
 * its requester takes selective NAKs. On a PSN sequence error NAK:
 * selective, the AETH's MSN field holds the first PSN of a run of
 * requests the responder kept beyond the expected PSN, and
 * SRNIC_BTH_APSN_SR_RUN the run's length less one (srnic_resp.c).
 */
#define SRNIC_BTH_APSN_SR		BIT(30)
#define SRNIC_BTH_APSN_SR_RUN_MASK	GENMASK(29, 24)
/*
 * On a READ request with SRNIC_BTH_APSN_SR, a run field of 1 (sr_run 2):
 * it asks again for a range of an earlier READ's responses, the others of
 * which the requester holds (selective repeat, srnic_req.c). The
 * responder answers it after the READ it is answering, and drops nothing
 * for it (srnic_resp_went_back()). On an atomic request: it asks again
 * for the ATOMIC_ACKNOWLEDGE alone (the responder replays it).
 */
#define SRNIC_SR_RUN_READ_RANGE		2
#define SRNIC_SR_RUN_MAX		64
#define SRNIC_BTH_APSN_PSN_MASK		GENMASK(23, 0)

#define SRNIC_PSN_MASK SRNIC_BTH_APSN_PSN_MASK
#define SRNIC_QPN_MASK SRNIC_BTH_DQPN_QPN_MASK

static inline u32 srnic_bth_psn(const struct srnic_bth *bth)
{
	return be32_to_cpu(bth->apsn) & SRNIC_PSN_MASK;
}

/* ---- Extended transport headers ------------------------------------- */

/*
 * FLUSH Extended Transport Header (IBTA 1.5 Memory Placement Extensions):
 * before the RETH of a FLUSH request; its placement type (bits 3:0, the
 * IBV_FLUSH_GLOBAL and _PERSISTENT bits) and selectivity level (bits 5:4:
 * 0 the RETH's range, 1 the whole memory region).
 */
struct srnic_feth {
	__be32 bits;
} __packed;

#define SRNIC_FETH_PLT_MASK 0xf
#define SRNIC_FETH_SEL_SHIFT 4
#define SRNIC_FETH_SEL_MASK 0x30
#define SRNIC_FLUSH_GLOBAL 1	/* IBV_FLUSH_GLOBAL */
#define SRNIC_FLUSH_PERSISTENT 2	/* IBV_FLUSH_PERSISTENT */
#define SRNIC_FLUSH_RANGE 0	/* IBV_FLUSH_RANGE */
#define SRNIC_FLUSH_MR 1	/* IBV_FLUSH_MR */

/* RDMA Extended Transport Header: WRITE first/only, READ request, FLUSH */
struct srnic_reth {
	__be64 va;
	__be32 rkey;
	__be32 dma_len;
} __packed;

/* ACK Extended Transport Header */
struct srnic_aeth {
	__be32 smsn;		/* syndrome, MSN */
} __packed;

#define SRNIC_AETH_SMSN_SYNDROME_MASK	GENMASK(31, 24)
#define SRNIC_AETH_SMSN_MSN_MASK	GENMASK(23, 0)

/* AETH syndrome: bits 6:5 select ACK/RNR NAK/NAK, bits 4:0 the value. */
#define SRNIC_AETH_SYNDROME_TYPE_MASK	0x60
#define SRNIC_AETH_SYNDROME_VALUE_MASK	0x1f
enum srnic_aeth_type {
	SRNIC_AETH_ACK = 0,	/* value: credit count */
	SRNIC_AETH_RNR_NAK = 1,	/* value: RNR timer code */
	SRNIC_AETH_NAK = 3,	/* value: enum srnic_nak_code */
};

enum srnic_nak_code {
	SRNIC_NAK_PSN_SEQUENCE_ERROR = 0,
	SRNIC_NAK_INVALID_REQUEST = 1,
	SRNIC_NAK_REMOTE_ACCESS_ERROR = 2,
	SRNIC_NAK_REMOTE_OPERATIONAL_ERROR = 3,
	SRNIC_NAK_INVALID_RD_REQUEST = 4,
};

/* AETH credit count meaning "no end-to-end flow control". */
#define SRNIC_AETH_CREDITS_UNLIMITED 0x1f

/* An AETH's syndrome and MSN field: @type (enum srnic_aeth_type), @value. */
static inline u32 srnic_aeth_smsn(u8 type, u8 value, u32 msn)
{
	u8 syndrome = FIELD_PREP(SRNIC_AETH_SYNDROME_TYPE_MASK, type) |
		      (value & SRNIC_AETH_SYNDROME_VALUE_MASK);

	return FIELD_PREP(SRNIC_AETH_SMSN_SYNDROME_MASK, syndrome) |
	       (msn & SRNIC_AETH_SMSN_MSN_MASK);
}

/* Atomic Extended Transport Header: compare & swap, fetch & add */
struct srnic_atmeth {
	__be64 va;
	__be32 rkey;
	__be64 swap_add;
	__be64 compare;
} __packed;

/* Atomic ACK Extended Transport Header */
struct srnic_atmack {
	__be64 orig;
} __packed;

/* Immediate data */
struct srnic_immdt {
	__be32 imm;
} __packed;

/* Invalidate Extended Transport Header: SEND with invalidate */
struct srnic_ieth {
	__be32 rkey;
} __packed;

/* Datagram Extended Transport Header: UD */
struct srnic_deth {
	__be32 qkey;
	__be32 sqpn;		/* resv8, source QP */
} __packed;

#define SRNIC_DETH_SQPN_QPN_MASK GENMASK(23, 0)

/* XRC Extended Transport Header: XRC requests */
struct srnic_xrceth {
	__be32 srqn;		/* resv8, XRC SRQ number */
} __packed;

#define SRNIC_XRCETH_SRQN_MASK GENMASK(23, 0)

static_assert(sizeof(struct srnic_bth) == 12, "BTH is 12 bytes");
static_assert(sizeof(struct srnic_reth) == 16, "RETH is 16 bytes");
static_assert(sizeof(struct srnic_aeth) == 4, "AETH is 4 bytes");
static_assert(sizeof(struct srnic_atmeth) == 28, "AtomicETH is 28 bytes");
static_assert(sizeof(struct srnic_atmack) == 8, "AtomicAckETH is 8 bytes");
static_assert(sizeof(struct srnic_immdt) == 4, "ImmDt is 4 bytes");
static_assert(sizeof(struct srnic_ieth) == 4, "IETH is 4 bytes");
static_assert(sizeof(struct srnic_deth) == 8, "DETH is 8 bytes");
static_assert(sizeof(struct srnic_xrceth) == 4, "XRCETH is 4 bytes");

/* ---- Opcodes -------------------------------------------------------- */

/* The transport class in bits 7:5 of the opcode. */
enum srnic_transport {
	SRNIC_TRANSPORT_RC = 0x00,
	SRNIC_TRANSPORT_UC = 0x20,
	SRNIC_TRANSPORT_RD = 0x40,
	SRNIC_TRANSPORT_UD = 0x60,
	SRNIC_TRANSPORT_CNP = 0x80,
	SRNIC_TRANSPORT_XRC = 0xa0,
};

#define SRNIC_OPCODE_TRANSPORT_MASK 0xe0
#define SRNIC_OPCODE_OP_MASK 0x1f

/* The operation in bits 4:0, combined with a transport class. */
enum srnic_op {
	SRNIC_OP_SEND_FIRST = 0x00,
	SRNIC_OP_SEND_MIDDLE = 0x01,
	SRNIC_OP_SEND_LAST = 0x02,
	SRNIC_OP_SEND_LAST_IMM = 0x03,
	SRNIC_OP_SEND_ONLY = 0x04,
	SRNIC_OP_SEND_ONLY_IMM = 0x05,
	SRNIC_OP_WRITE_FIRST = 0x06,
	SRNIC_OP_WRITE_MIDDLE = 0x07,
	SRNIC_OP_WRITE_LAST = 0x08,
	SRNIC_OP_WRITE_LAST_IMM = 0x09,
	SRNIC_OP_WRITE_ONLY = 0x0a,
	SRNIC_OP_WRITE_ONLY_IMM = 0x0b,
	SRNIC_OP_READ_REQUEST = 0x0c,
	SRNIC_OP_READ_RESPONSE_FIRST = 0x0d,
	SRNIC_OP_READ_RESPONSE_MIDDLE = 0x0e,
	SRNIC_OP_READ_RESPONSE_LAST = 0x0f,
	SRNIC_OP_READ_RESPONSE_ONLY = 0x10,
	SRNIC_OP_ACK = 0x11,
	SRNIC_OP_ATOMIC_ACK = 0x12,
	SRNIC_OP_CMP_SWAP = 0x13,
	SRNIC_OP_FETCH_ADD = 0x14,
	SRNIC_OP_SEND_LAST_INV = 0x16,
	SRNIC_OP_SEND_ONLY_INV = 0x17,
	SRNIC_OP_FLUSH = 0x1c,
	SRNIC_OP_ATOMIC_WRITE = 0x1d,
	SRNIC_OP_CNP = 0x01,	/* with SRNIC_TRANSPORT_CNP: opcode 0x81 */
};

#define SRNIC_OPCODE(transport, op) ((u8)((unsigned int)(transport) | (unsigned int)(op)))

/* Which extension headers follow the BTH, and what kind of packet it is. */
enum srnic_opcode_flags {
	SRNIC_HDR_XRCETH = BIT(0),
	SRNIC_HDR_DETH = BIT(1),
	SRNIC_HDR_FETH = BIT(2),
	SRNIC_HDR_RETH = BIT(3),
	SRNIC_HDR_ATMETH = BIT(4),
	SRNIC_HDR_AETH = BIT(5),
	SRNIC_HDR_ATMACK = BIT(6),
	SRNIC_HDR_IMMDT = BIT(7),
	SRNIC_HDR_IETH = BIT(8),
	SRNIC_OPF_REQUEST = BIT(9),	/* requester to responder */
	SRNIC_OPF_RESPONSE = BIT(10),	/* responder to requester */
	SRNIC_OPF_FIRST = BIT(11),	/* starts a message */
	SRNIC_OPF_LAST = BIT(12),	/* ends a message */
	SRNIC_OPF_PAYLOAD = BIT(13),	/* may carry payload */
	SRNIC_OPF_SEND = BIT(14),	/* consumes a receive WQE */
	SRNIC_OPF_WRITE = BIT(15),
	SRNIC_OPF_READ = BIT(16),	/* answered by READ responses */
	SRNIC_OPF_ATOMIC = BIT(17),
	SRNIC_OPF_RECV_WQE = BIT(18),	/* consumes a receive WQE */
	SRNIC_OPF_CNP = BIT(19),	/* congestion notification */
};

/*
 * What each opcode implies (enum srnic_opcode_flags); 0 for an opcode srnic
 * does not accept. The header flags are in wire order, lowest bit first.
 */
extern const u32 srnic_opcode_flags[256];

u32 srnic_opcode_hdr_len(u32 flags);

/* ---- Parsing -------------------------------------------------------- */

/**
 * struct srnic_pkt - a validated transport packet (BTH to ICRC)
 * @opcode: BTH opcode
 * @flags: srnic_opcode_flags[opcode]
 * @pad: pad bytes before the ICRC
 * @solicited: SE bit
 * @ack_req: AckReq bit
 * @sr: srnic's selective repeat bit (SRNIC_BTH_APSN_SR)
 * @sr_run: with @sr on a NAK, the run of kept PSNs it reports (1 or more)
 * @pkey: P_Key
 * @dqpn: destination QP
 * @psn: packet sequence number
 * @hdr_len: bytes from BTH to payload
 * @payload_len: payload bytes, pad excluded
 * @reth: offset of the RETH from the BTH, 0 when absent (so the others)
 * @aeth: offset of the AETH
 * @atmeth: offset of the AtomicETH
 * @atmack: offset of the AtomicAckETH
 * @immdt: offset of the ImmDt
 * @ieth: offset of the IETH
 * @deth: offset of the DETH
 * @xrceth: offset of the XRCETH
 * @feth: offset of the FETH
 */
struct srnic_pkt {
	u8 opcode;
	u32 flags;
	u8 pad;
	bool solicited;
	bool ack_req;
	bool sr;
	u8 sr_run;
	u16 pkey;
	u32 dqpn;
	u32 psn;
	u32 hdr_len;
	u32 payload_len;
	u8 reth, aeth, atmeth, atmack, immdt, ieth, deth, xrceth, feth;
};

/* Why srnic_parse_transport() rejected a packet (counted per reason). */
enum srnic_parse_error {
	SRNIC_PARSE_OK = 0,
	SRNIC_PARSE_TOO_SHORT,
	SRNIC_PARSE_BAD_TVER,
	SRNIC_PARSE_BAD_OPCODE,
	SRNIC_PARSE_BAD_PAD,
	SRNIC_PARSE_UNEXPECTED_PAYLOAD,
	SRNIC_PARSE_NUM_ERRORS,
};

enum srnic_parse_error srnic_parse_transport(const u8 *bth, size_t len,
					     struct srnic_pkt *pkt);

/* ---- Atomic headers ------------------------------------------------- */

/**
 * struct srnic_atomic_fields - an AtomicETH in host byte order
 * @va: remote address (8-byte aligned in a valid request)
 * @rkey: R_Key of the remote MR
 * @swap_add: the value to swap in (compare & swap) or to add (fetch & add)
 * @compare: the value compared (compare & swap; 0 in fetch & add)
 */
struct srnic_atomic_fields {
	u64 va;
	u32 rkey;
	u64 swap_add;
	u64 compare;
};

void srnic_atmeth_get(const struct srnic_atmeth *h,
		      struct srnic_atomic_fields *f);
void srnic_atmeth_put(struct srnic_atmeth *h,
		      const struct srnic_atomic_fields *f);
u64 srnic_atmack_get(const struct srnic_atmack *h);
u32 srnic_xrceth_get(const struct srnic_xrceth *h);
void srnic_xrceth_put(struct srnic_xrceth *h, u32 srqn);
void srnic_atmack_put(struct srnic_atmack *h, u64 orig);

/* ---- Invalidate header ---------------------------------------------- */

u32 srnic_ieth_get(const struct srnic_ieth *h);
void srnic_ieth_put(struct srnic_ieth *h, u32 rkey);

/* ---- Invariant CRC -------------------------------------------------- */

/* Bytes of IP + UDP header the ICRC covers: IPv4 without options, IPv6. */
#define SRNIC_IPV4_HDR_LEN 20
#define SRNIC_IPV6_HDR_LEN 40
#define SRNIC_UDP_HDR_LEN 8

u32 srnic_icrc_headers(const u8 *l3, bool ipv6, const u8 *bth,
		       size_t transport_hdr_len);
u32 srnic_icrc_update(u32 crc, const void *data, size_t len);
__le32 srnic_icrc_finish(u32 crc);

#endif /* SRNIC_WIRE_H */
