// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: RoCEv2 transport header parsing and the invariant CRC.
 *
 * Everything a received packet is checked against before srnic trusts any
 * of its fields lives here, in code that also builds in userspace so the
 * same source is unit tested and fuzzed (userspace/tests).
 */

#include "srnic_wire.h"

/* Shorthands for the opcode table below. */
#define REQ SRNIC_OPF_REQUEST
#define RESP SRNIC_OPF_RESPONSE
#define FIRST SRNIC_OPF_FIRST
#define LAST SRNIC_OPF_LAST
#define ONLY (SRNIC_OPF_FIRST | SRNIC_OPF_LAST)
#define RETH SRNIC_HDR_RETH
#define AETH SRNIC_HDR_AETH
#define IMM (SRNIC_HDR_IMMDT | SRNIC_OPF_RECV_WQE)
#define SEND (REQ | SRNIC_OPF_PAYLOAD | SRNIC_OPF_SEND | SRNIC_OPF_RECV_WQE)
#define WRITE_REQ (REQ | SRNIC_OPF_PAYLOAD | SRNIC_OPF_WRITE)
#define READ_RESP (RESP | SRNIC_OPF_PAYLOAD | SRNIC_OPF_READ)
#define XRC_REQ SRNIC_HDR_XRCETH
#define ATOMIC SRNIC_OPF_ATOMIC
#define READ_REQ SRNIC_OPF_READ
#define ATMETH SRNIC_HDR_ATMETH
#define ATMACK SRNIC_HDR_ATMACK
#define IETH SRNIC_HDR_IETH
#define DETH SRNIC_HDR_DETH
#define FETH SRNIC_HDR_FETH
#define RC(op) SRNIC_OPCODE(SRNIC_TRANSPORT_RC, SRNIC_OP_##op)
#define UC(op) SRNIC_OPCODE(SRNIC_TRANSPORT_UC, SRNIC_OP_##op)
#define UD(op) SRNIC_OPCODE(SRNIC_TRANSPORT_UD, SRNIC_OP_##op)
#define XRC(op) SRNIC_OPCODE(SRNIC_TRANSPORT_XRC, SRNIC_OP_##op)

/*
 * Every opcode srnic accepts, by enum srnic_opcode_flags; all others are 0
 * and dropped. XRC requests carry an XRCETH; XRC responses are RC's.
 */
const u32 srnic_opcode_flags[256] = {
	/* Reliable Connected */
	[RC(SEND_FIRST)] = SEND | FIRST,
	[RC(SEND_MIDDLE)] = SEND,
	[RC(SEND_LAST)] = SEND | LAST,
	[RC(SEND_LAST_IMM)] = SEND | LAST | IMM,
	[RC(SEND_ONLY)] = SEND | ONLY,
	[RC(SEND_ONLY_IMM)] = SEND | ONLY | IMM,
	[RC(WRITE_FIRST)] = WRITE_REQ | FIRST | RETH,
	[RC(WRITE_MIDDLE)] = WRITE_REQ,
	[RC(WRITE_LAST)] = WRITE_REQ | LAST,
	[RC(WRITE_LAST_IMM)] = WRITE_REQ | LAST | IMM,
	[RC(WRITE_ONLY)] = WRITE_REQ | ONLY | RETH,
	[RC(WRITE_ONLY_IMM)] = WRITE_REQ | ONLY | RETH | IMM,
	[RC(READ_REQUEST)] = REQ | ONLY | READ_REQ | RETH,
	[RC(CMP_SWAP)] = REQ | ONLY | ATOMIC | ATMETH,
	[RC(FETCH_ADD)] = REQ | ONLY | ATOMIC | ATMETH,
	[RC(SEND_LAST_INV)] = SEND | LAST | IETH,
	[RC(SEND_ONLY_INV)] = SEND | ONLY | IETH,
	[RC(ATOMIC_WRITE)] = WRITE_REQ | ONLY | ATOMIC | RETH,
	[RC(FLUSH)] = REQ | ONLY | READ_REQ | FETH | RETH,
	[RC(READ_RESPONSE_FIRST)] = READ_RESP | FIRST | AETH,
	[RC(READ_RESPONSE_MIDDLE)] = READ_RESP,
	[RC(READ_RESPONSE_LAST)] = READ_RESP | LAST | AETH,
	[RC(READ_RESPONSE_ONLY)] = READ_RESP | ONLY | AETH,
	[RC(ACK)] = RESP | ONLY | AETH,
	[RC(ATOMIC_ACK)] = RESP | ONLY | ATOMIC | AETH | ATMACK,
	/* Unreliable Connected */
	[UC(SEND_FIRST)] = SEND | FIRST,
	[UC(SEND_MIDDLE)] = SEND,
	[UC(SEND_LAST)] = SEND | LAST,
	[UC(SEND_LAST_IMM)] = SEND | LAST | IMM,
	[UC(SEND_ONLY)] = SEND | ONLY,
	[UC(SEND_ONLY_IMM)] = SEND | ONLY | IMM,
	[UC(WRITE_FIRST)] = WRITE_REQ | FIRST | RETH,
	[UC(WRITE_MIDDLE)] = WRITE_REQ,
	[UC(WRITE_LAST)] = WRITE_REQ | LAST,
	[UC(WRITE_LAST_IMM)] = WRITE_REQ | LAST | IMM,
	[UC(WRITE_ONLY)] = WRITE_REQ | ONLY | RETH,
	[UC(WRITE_ONLY_IMM)] = WRITE_REQ | ONLY | RETH | IMM,
	/* Unreliable Datagram */
	[UD(SEND_ONLY)] = SEND | ONLY | DETH,
	[UD(SEND_ONLY_IMM)] = SEND | ONLY | IMM | DETH,
	/* Extended Reliable Connected */
	[XRC(SEND_FIRST)] = XRC_REQ | SEND | FIRST,
	[XRC(SEND_MIDDLE)] = XRC_REQ | SEND,
	[XRC(SEND_LAST)] = XRC_REQ | SEND | LAST,
	[XRC(SEND_LAST_IMM)] = XRC_REQ | SEND | LAST | IMM,
	[XRC(SEND_ONLY)] = XRC_REQ | SEND | ONLY,
	[XRC(SEND_ONLY_IMM)] = XRC_REQ | SEND | ONLY | IMM,
	[XRC(WRITE_FIRST)] = XRC_REQ | WRITE_REQ | FIRST | RETH,
	[XRC(WRITE_MIDDLE)] = XRC_REQ | WRITE_REQ,
	[XRC(WRITE_LAST)] = XRC_REQ | WRITE_REQ | LAST,
	[XRC(WRITE_LAST_IMM)] = XRC_REQ | WRITE_REQ | LAST | IMM,
	[XRC(WRITE_ONLY)] = XRC_REQ | WRITE_REQ | ONLY | RETH,
	[XRC(WRITE_ONLY_IMM)] = XRC_REQ | WRITE_REQ | ONLY | RETH | IMM,
	[XRC(READ_REQUEST)] = XRC_REQ | REQ | ONLY | READ_REQ | RETH,
	[XRC(CMP_SWAP)] = XRC_REQ | REQ | ONLY | ATOMIC | ATMETH,
	[XRC(FETCH_ADD)] = XRC_REQ | REQ | ONLY | ATOMIC | ATMETH,
	[XRC(SEND_LAST_INV)] = XRC_REQ | SEND | LAST | IETH,
	[XRC(SEND_ONLY_INV)] = XRC_REQ | SEND | ONLY | IETH,
	[XRC(ATOMIC_WRITE)] = XRC_REQ | WRITE_REQ | ONLY | ATOMIC | RETH,
	[XRC(FLUSH)] = XRC_REQ | REQ | ONLY | READ_REQ | FETH | RETH,
	[XRC(READ_RESPONSE_FIRST)] = READ_RESP | FIRST | AETH,
	[XRC(READ_RESPONSE_MIDDLE)] = READ_RESP,
	[XRC(READ_RESPONSE_LAST)] = READ_RESP | LAST | AETH,
	[XRC(READ_RESPONSE_ONLY)] = READ_RESP | ONLY | AETH,
	[XRC(ACK)] = RESP | ONLY | AETH,
	[XRC(ATOMIC_ACK)] = RESP | ONLY | ATOMIC | AETH | ATMACK,
	/* RoCEv2 congestion notification: BTH and 16 reserved bytes */
	[SRNIC_OPCODE(SRNIC_TRANSPORT_CNP, SRNIC_OP_CNP)] = SRNIC_OPF_CNP,
};

#undef REQ
#undef RESP
#undef FIRST
#undef LAST
#undef ONLY
#undef RETH
#undef AETH
#undef IMM
#undef SEND
#undef WRITE_REQ
#undef READ_RESP
#undef XRC_REQ
#undef ATOMIC
#undef READ_REQ
#undef ATMETH
#undef ATMACK
#undef IETH
#undef DETH
#undef FETH
#undef RC
#undef UC
#undef UD
#undef XRC

#define SRNIC_CNP_RESERVED_LEN 16

/**
 * srnic_opcode_hdr_len() - bytes of BTH and extension headers
 * @flags: an opcode's enum srnic_opcode_flags
 */
u32 srnic_opcode_hdr_len(u32 flags)
{
	u32 len = sizeof(struct srnic_bth);

	if (flags & SRNIC_HDR_XRCETH)
		len += sizeof(struct srnic_xrceth);
	if (flags & SRNIC_HDR_DETH)
		len += sizeof(struct srnic_deth);
	if (flags & SRNIC_HDR_FETH)
		len += sizeof(struct srnic_feth);
	if (flags & SRNIC_HDR_RETH)
		len += sizeof(struct srnic_reth);
	if (flags & SRNIC_HDR_ATMETH)
		len += sizeof(struct srnic_atmeth);
	if (flags & SRNIC_HDR_AETH)
		len += sizeof(struct srnic_aeth);
	if (flags & SRNIC_HDR_ATMACK)
		len += sizeof(struct srnic_atmack);
	if (flags & SRNIC_HDR_IMMDT)
		len += sizeof(struct srnic_immdt);
	if (flags & SRNIC_HDR_IETH)
		len += sizeof(struct srnic_ieth);
	if (flags & SRNIC_OPF_CNP)
		len += SRNIC_CNP_RESERVED_LEN;
	return len;
}

/* Offsets of the extension headers, in wire order. */
static void srnic_pkt_set_offsets(struct srnic_pkt *pkt, u32 flags)
{
	/* Each header's offset is the length of those before it. */
	if (flags & SRNIC_HDR_XRCETH)
		pkt->xrceth = srnic_opcode_hdr_len(flags & (SRNIC_HDR_XRCETH - 1));
	if (flags & SRNIC_HDR_DETH)
		pkt->deth = srnic_opcode_hdr_len(flags & (SRNIC_HDR_DETH - 1));
	if (flags & SRNIC_HDR_FETH)
		pkt->feth = srnic_opcode_hdr_len(flags & (SRNIC_HDR_FETH - 1));
	if (flags & SRNIC_HDR_RETH)
		pkt->reth = srnic_opcode_hdr_len(flags & (SRNIC_HDR_RETH - 1));
	if (flags & SRNIC_HDR_ATMETH)
		pkt->atmeth = srnic_opcode_hdr_len(flags & (SRNIC_HDR_ATMETH - 1));
	if (flags & SRNIC_HDR_AETH)
		pkt->aeth = srnic_opcode_hdr_len(flags & (SRNIC_HDR_AETH - 1));
	if (flags & SRNIC_HDR_ATMACK)
		pkt->atmack = srnic_opcode_hdr_len(flags & (SRNIC_HDR_ATMACK - 1));
	if (flags & SRNIC_HDR_IMMDT)
		pkt->immdt = srnic_opcode_hdr_len(flags & (SRNIC_HDR_IMMDT - 1));
	if (flags & SRNIC_HDR_IETH)
		pkt->ieth = srnic_opcode_hdr_len(flags & (SRNIC_HDR_IETH - 1));
}

/**
 * srnic_parse_transport() - validate and decode a transport packet
 * @buf: the packet from the BTH to the end of the ICRC, contiguous
 * @len: its length
 * @pkt: filled on success
 *
 * Checks only what the packet says about itself: transport version, a
 * known opcode, room for its headers and ICRC, a pad count that fits and
 * is only used where payload may end, and no payload where the opcode has
 * none. The ICRC, P_Key and everything needing QP state are checked by
 * the caller.
 *
 * Return: SRNIC_PARSE_OK or the reason to drop the packet.
 */
enum srnic_parse_error srnic_parse_transport(const u8 *buf, size_t len,
					     struct srnic_pkt *pkt)
{
	const struct srnic_bth *bth = (const struct srnic_bth *)buf;
	u32 flags, hdr_len, dqpn, apsn;
	size_t payload;

	if (len < sizeof(*bth) + SRNIC_ICRC_SIZE)
		return SRNIC_PARSE_TOO_SHORT;
	if (FIELD_GET(SRNIC_BTH_FLAGS_TVER_MASK, bth->flags) != 0)
		return SRNIC_PARSE_BAD_TVER;
	flags = srnic_opcode_flags[bth->opcode];
	if (!flags)
		return SRNIC_PARSE_BAD_OPCODE;
	hdr_len = srnic_opcode_hdr_len(flags);
	if (len < (size_t)hdr_len + SRNIC_ICRC_SIZE)
		return SRNIC_PARSE_TOO_SHORT;

	memset(pkt, 0, sizeof(*pkt));
	pkt->opcode = bth->opcode;
	pkt->flags = flags;
	pkt->hdr_len = hdr_len;
	pkt->pad = FIELD_GET(SRNIC_BTH_FLAGS_PAD_MASK, bth->flags);

	payload = len - hdr_len - SRNIC_ICRC_SIZE;
	if (!(flags & SRNIC_OPF_PAYLOAD)) {
		if (payload || pkt->pad)
			return SRNIC_PARSE_UNEXPECTED_PAYLOAD;
	} else if (pkt->pad) {
		/* Only the last packet of a message may end unaligned. */
		if (!(flags & SRNIC_OPF_LAST) || pkt->pad > payload)
			return SRNIC_PARSE_BAD_PAD;
	}
	pkt->payload_len = payload - pkt->pad;

	dqpn = be32_to_cpu(bth->dqpn);
	apsn = be32_to_cpu(bth->apsn);
	pkt->solicited = FIELD_GET(SRNIC_BTH_FLAGS_SE_MASK, bth->flags);
	pkt->ack_req = FIELD_GET(SRNIC_BTH_APSN_ACKREQ_MASK, apsn);
	pkt->sr = FIELD_GET(SRNIC_BTH_APSN_SR, apsn);
	pkt->sr_run = FIELD_GET(SRNIC_BTH_APSN_SR_RUN_MASK, apsn) + 1;
	pkt->pkey = be16_to_cpu(bth->pkey);
	pkt->dqpn = FIELD_GET(SRNIC_BTH_DQPN_QPN_MASK, dqpn);
	pkt->psn = FIELD_GET(SRNIC_BTH_APSN_PSN_MASK, apsn);
	srnic_pkt_set_offsets(pkt, flags);
	return SRNIC_PARSE_OK;
}

/**
 * srnic_atmeth_get() - decode an AtomicETH (CMP_SWAP, FETCH_ADD requests)
 * @h: the header, inside a packet srnic_parse_transport() accepted
 * @f: its fields in host byte order
 */
void srnic_atmeth_get(const struct srnic_atmeth *h,
		      struct srnic_atomic_fields *f)
{
	f->va = be64_to_cpu(h->va);
	f->rkey = be32_to_cpu(h->rkey);
	f->swap_add = be64_to_cpu(h->swap_add);
	f->compare = be64_to_cpu(h->compare);
}

/**
 * srnic_atmeth_put() - encode an AtomicETH
 * @h: where it goes in the packet being built
 * @f: its fields in host byte order
 */
void srnic_atmeth_put(struct srnic_atmeth *h,
		      const struct srnic_atomic_fields *f)
{
	h->va = cpu_to_be64(f->va);
	h->rkey = cpu_to_be32(f->rkey);
	h->swap_add = cpu_to_be64(f->swap_add);
	h->compare = cpu_to_be64(f->compare);
}

/**
 * srnic_atmack_get() - the original value an AtomicAckETH carries
 * @h: the header, inside an accepted ATOMIC_ACKNOWLEDGE
 */
u64 srnic_atmack_get(const struct srnic_atmack *h)
{
	return be64_to_cpu(h->orig);
}

/**
 * srnic_atmack_put() - encode an AtomicAckETH
 * @h: where it goes in the ATOMIC_ACKNOWLEDGE being built
 * @orig: the value the target held before the atomic operation
 */
void srnic_atmack_put(struct srnic_atmack *h, u64 orig)
{
	h->orig = cpu_to_be64(orig);
}

/**
 * srnic_xrceth_get() - the XRC SRQ number an XRCETH names
 * @h: the header, inside an accepted XRC request; its reserved byte is
 *     ignored
 */
u32 srnic_xrceth_get(const struct srnic_xrceth *h)
{
	return FIELD_GET(SRNIC_XRCETH_SRQN_MASK, be32_to_cpu(h->srqn));
}

/**
 * srnic_xrceth_put() - encode an XRCETH
 * @h: where it goes in the XRC request being built
 * @srqn: the XRC SRQ at the target (24 bits; higher bits are dropped)
 */
void srnic_xrceth_put(struct srnic_xrceth *h, u32 srqn)
{
	h->srqn = cpu_to_be32(FIELD_PREP(SRNIC_XRCETH_SRQN_MASK,
					 srqn & SRNIC_XRCETH_SRQN_MASK));
}

/**
 * srnic_ieth_get() - the R_Key an IETH asks the responder to invalidate
 * @h: the header, inside an accepted SEND_LAST/ONLY_WITH_INVALIDATE
 */
u32 srnic_ieth_get(const struct srnic_ieth *h)
{
	return be32_to_cpu(h->rkey);
}

/**
 * srnic_ieth_put() - encode an IETH
 * @h: where it goes in the SEND with invalidate being built
 * @rkey: the R_Key the responder is to invalidate
 */
void srnic_ieth_put(struct srnic_ieth *h, u32 rkey)
{
	h->rkey = cpu_to_be32(rkey);
}

/**
 * srnic_icrc_headers() - start the invariant CRC of a RoCEv2 packet
 * @l3: the IP header (IPv4 without options, or IPv6), followed by UDP
 * @ipv6: whether @l3 is IPv6
 * @bth: the transport headers, contiguous
 * @transport_hdr_len: bytes of them (BTH and extension headers)
 *
 * The ICRC covers a masked LRH (8 bytes of ones), the IP and UDP headers
 * with the fields routers may change replaced by ones (IPv4 TOS, TTL and
 * checksum; IPv6 traffic class, flow label and hop limit; UDP checksum),
 * the BTH with its resv8a byte replaced by ones, the other headers and
 * the payload with its pad (IBTA annex A17.3.3, as rxe computes it).
 * Continue with srnic_icrc_update() over payload and pad, then
 * srnic_icrc_finish().
 *
 * Return: the running CRC.
 */
u32 srnic_icrc_headers(const u8 *l3, bool ipv6, const u8 *bth,
		       size_t transport_hdr_len)
{
	static const u8 masked_lrh[8] = {
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	};
	u8 pseudo[SRNIC_IPV6_HDR_LEN + SRNIC_UDP_HDR_LEN +
		  sizeof(struct srnic_bth)];
	size_t ip_len = ipv6 ? SRNIC_IPV6_HDR_LEN : SRNIC_IPV4_HDR_LEN;
	u8 *udp = pseudo + ip_len;
	u8 *pbth = udp + SRNIC_UDP_HDR_LEN;
	u32 crc;

	memcpy(pseudo, l3, ip_len + SRNIC_UDP_HDR_LEN);
	if (ipv6) {
		pseudo[0] |= 0x0f;			/* traffic class ... */
		memset(&pseudo[1], 0xff, 3);		/* ... and flow label */
		pseudo[7] = 0xff;			/* hop limit */
	} else {
		pseudo[1] = 0xff;			/* TOS */
		pseudo[8] = 0xff;			/* TTL */
		pseudo[10] = 0xff;			/* header checksum */
		pseudo[11] = 0xff;
	}
	udp[6] = 0xff;					/* UDP checksum */
	udp[7] = 0xff;
	memcpy(pbth, bth, sizeof(struct srnic_bth));
	pbth[4] = 0xff;					/* BTH resv8a */

	crc = crc32_le(~0U, masked_lrh, sizeof(masked_lrh));
	crc = crc32_le(crc, pseudo, pbth + sizeof(struct srnic_bth) - pseudo);
	return crc32_le(crc, bth + sizeof(struct srnic_bth),
			transport_hdr_len - sizeof(struct srnic_bth));
}

/* Continue the ICRC over payload bytes (and pad). */
u32 srnic_icrc_update(u32 crc, const void *data, size_t len)
{
	return crc32_le(crc, data, len);
}

/* The ICRC as it goes on the wire. */
__le32 srnic_icrc_finish(u32 crc)
{
	return cpu_to_le32(~crc);
}
