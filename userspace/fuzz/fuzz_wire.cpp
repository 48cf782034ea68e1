// SPDX-License-Identifier: GPL-2.0
// libFuzzer target for kernel/srnic_wire.c, built from the kernel source
// itself (as userspace/tests/wire_test.cpp is): arbitrary bytes are a RoCEv2
// transport packet, BTH to ICRC, as srnic_rx_validate() in srnic_net.c hands
// it to srnic_parse_transport(). Every invariant the kernel relies on is
// checked here, and a violated one aborts, so libFuzzer reports it:
//
//  - the parser reads nothing past the first SRNIC_MAX_HDR_LEN bytes (all
//    the receive path pulls into the skb's linear area), nor past the end;
//  - its verdict is the one a model written from its kernel-doc gives, is a
//    valid index of the drop counters, and does not depend on payload bytes;
//  - an accepted packet's fields are the bytes on the wire, its flags are
//    srnic_opcode_flags[opcode], hdr_len + payload_len + pad + ICRC is the
//    input length, and each extension header the flags name lies inside
//    hdr_len, in wire order, back to back;
//  - the ICRC over the packet behind a plausible IPv4 and IPv6 + UDP header
//    (made from input bytes) equals an independent bitwise CRC-32 over the
//    masked headers, whether the payload comes in one piece or two (skb
//    fragments);
//  - the AtomicETH and AtomicAckETH helpers decode the wire bytes and
//    encode them back unchanged.
//
//   make fuzz                       # build/fuzz/fuzz_wire, 60 s on the corpus
//   make fuzz FUZZ_SECONDS=3600     # longer
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

extern "C" {
#include "srnic_wire.h"
}

namespace
{

[[noreturn]] void violated(const char *what, int line)
{
	fprintf(stderr, "fuzz_wire: invariant violated at line %d: %s\n", line, what);
	abort();
}

#define CHECK(cond)                               \
	do {                                      \
		if (!(cond))                      \
			violated(#cond, __LINE__); \
	} while (0)

// The receive path pulls min(len, SRNIC_MAX_HDR_LEN) bytes (BTH and the
// longest extension header chain) before parsing; what lies beyond may be in
// page fragments the parser must not touch.
size_t linear_len(size_t len)
{
	return len < SRNIC_MAX_HDR_LEN ? len : SRNIC_MAX_HDR_LEN;
}

// The parser's contract, from its kernel-doc, written without looking at how
// it is implemented.
enum srnic_parse_error model_verdict(const uint8_t *p, size_t len)
{
	if (len < 12 + SRNIC_ICRC_SIZE)
		return SRNIC_PARSE_TOO_SHORT;
	if (p[1] & 0x0f)
		return SRNIC_PARSE_BAD_TVER;
	uint32_t flags = srnic_opcode_flags[p[0]];
	if (!flags)
		return SRNIC_PARSE_BAD_OPCODE;
	size_t hdr = srnic_opcode_hdr_len(flags);
	if (len < hdr + SRNIC_ICRC_SIZE)
		return SRNIC_PARSE_TOO_SHORT;
	size_t payload = len - hdr - SRNIC_ICRC_SIZE;
	unsigned int pad = (p[1] >> 4) & 3;
	if (!(flags & SRNIC_OPF_PAYLOAD))
		return payload || pad ? SRNIC_PARSE_UNEXPECTED_PAYLOAD : SRNIC_PARSE_OK;
	if (pad && (!(flags & SRNIC_OPF_LAST) || pad > payload))
		return SRNIC_PARSE_BAD_PAD;
	return SRNIC_PARSE_OK;
}

uint32_t get_be32(const uint8_t *p)
{
	return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}

// Extension headers in wire order, with their sizes, as IBTA lays them out.
struct ext_hdr {
	uint32_t flag;
	size_t size;
	uint8_t srnic_pkt::*offset;
};

const ext_hdr ext_hdrs[] = {
	{SRNIC_HDR_XRCETH, sizeof(srnic_xrceth), &srnic_pkt::xrceth},
	{SRNIC_HDR_DETH, sizeof(srnic_deth), &srnic_pkt::deth},
	{SRNIC_HDR_FETH, sizeof(srnic_feth), &srnic_pkt::feth},
	{SRNIC_HDR_RETH, sizeof(srnic_reth), &srnic_pkt::reth},
	{SRNIC_HDR_ATMETH, sizeof(srnic_atmeth), &srnic_pkt::atmeth},
	{SRNIC_HDR_AETH, sizeof(srnic_aeth), &srnic_pkt::aeth},
	{SRNIC_HDR_ATMACK, sizeof(srnic_atmack), &srnic_pkt::atmack},
	{SRNIC_HDR_IMMDT, sizeof(srnic_immdt), &srnic_pkt::immdt},
	{SRNIC_HDR_IETH, sizeof(srnic_ieth), &srnic_pkt::ieth},
};

volatile uint64_t sink;

// What the transport code does with an accepted packet's headers: read them
// through the offsets, from the linear area only.
void read_headers(const uint8_t *lin, const srnic_pkt &pkt)
{
	uint64_t acc = 0;

	if (pkt.feth)
		acc += be32_to_cpu(reinterpret_cast<const srnic_feth *>(lin + pkt.feth)->bits);
	if (pkt.reth) {
		auto *h = reinterpret_cast<const srnic_reth *>(lin + pkt.reth);
		acc += be64_to_cpu(h->va) + be32_to_cpu(h->rkey) + be32_to_cpu(h->dma_len);
	}
	if (pkt.aeth)
		acc += be32_to_cpu(reinterpret_cast<const srnic_aeth *>(lin + pkt.aeth)->smsn);
	if (pkt.atmeth) {
		// The responder decodes with srnic_atmeth_get(), the requester
		// encodes with srnic_atmeth_put(): they must round-trip the bytes.
		auto *h = reinterpret_cast<const srnic_atmeth *>(lin + pkt.atmeth);
		srnic_atomic_fields f;
		srnic_atmeth_get(h, &f);
		CHECK(f.va == be64_to_cpu(h->va) && f.rkey == be32_to_cpu(h->rkey) &&
		      f.swap_add == be64_to_cpu(h->swap_add) &&
		      f.compare == be64_to_cpu(h->compare));
		srnic_atmeth copy;
		srnic_atmeth_put(&copy, &f);
		CHECK(memcmp(&copy, h, sizeof(copy)) == 0);
		acc += f.va + f.rkey + f.swap_add + f.compare;
	}
	if (pkt.atmack) {
		auto *h = reinterpret_cast<const srnic_atmack *>(lin + pkt.atmack);
		uint64_t orig = srnic_atmack_get(h);
		CHECK(orig == be64_to_cpu(h->orig));
		srnic_atmack copy;
		srnic_atmack_put(&copy, orig);
		CHECK(memcmp(&copy, h, sizeof(copy)) == 0);
		acc += orig;
	}
	if (pkt.immdt)
		acc += be32_to_cpu(reinterpret_cast<const srnic_immdt *>(lin + pkt.immdt)->imm);
	if (pkt.ieth)
		acc += be32_to_cpu(reinterpret_cast<const srnic_ieth *>(lin + pkt.ieth)->rkey);
	if (pkt.deth) {
		auto *h = reinterpret_cast<const srnic_deth *>(lin + pkt.deth);
		acc += be32_to_cpu(h->qkey) + be32_to_cpu(h->sqpn);
	}
	if (pkt.xrceth)
		acc += be32_to_cpu(reinterpret_cast<const srnic_xrceth *>(lin + pkt.xrceth)->srqn);
	sink = acc;
}

void check_accepted(const uint8_t *data, size_t len, const srnic_pkt &pkt)
{
	uint32_t flags = srnic_opcode_flags[data[0]];

	CHECK(pkt.opcode == data[0]);
	CHECK(flags != 0);
	CHECK(pkt.flags == flags);
	CHECK(pkt.hdr_len == srnic_opcode_hdr_len(flags));
	CHECK(pkt.hdr_len >= sizeof(srnic_bth));
	CHECK(pkt.hdr_len <= SRNIC_MAX_HDR_LEN);
	CHECK(size_t(pkt.hdr_len) + pkt.payload_len + pkt.pad + SRNIC_ICRC_SIZE == len);
	CHECK(pkt.pad <= 3);
	CHECK(pkt.pad == ((data[1] >> 4) & 3));
	if (!(flags & SRNIC_OPF_PAYLOAD))
		CHECK(pkt.payload_len == 0 && pkt.pad == 0);
	if (pkt.pad)
		CHECK(flags & SRNIC_OPF_LAST);
	CHECK(!!(flags & SRNIC_OPF_REQUEST) + !!(flags & SRNIC_OPF_RESPONSE) +
		      !!(flags & SRNIC_OPF_CNP) ==
	      1);

	// The decoded fields are the bytes on the wire.
	CHECK(pkt.solicited == !!(data[1] & 0x80));
	CHECK(pkt.pkey == (uint16_t(data[2]) << 8 | data[3]));
	CHECK(pkt.dqpn == (get_be32(data + 4) & 0xffffff));
	CHECK(pkt.psn == (get_be32(data + 8) & 0xffffff));
	CHECK(pkt.ack_req == !!(data[8] & 0x80));

	// Extension headers: present exactly when the flags say so, inside
	// hdr_len, in wire order right after the BTH and each other.
	size_t at = sizeof(srnic_bth);
	for (const ext_hdr &e : ext_hdrs) {
		size_t off = pkt.*e.offset;
		if (!(flags & e.flag)) {
			CHECK(off == 0);
			continue;
		}
		CHECK(off == at);
		CHECK(off + e.size <= pkt.hdr_len);
		at = off + e.size;
	}
	if (flags & SRNIC_OPF_CNP)
		at += 16;
	CHECK(at == pkt.hdr_len);
}

bool same_pkt(const srnic_pkt &a, const srnic_pkt &b)
{
	return a.opcode == b.opcode && a.flags == b.flags && a.pad == b.pad &&
	       a.solicited == b.solicited && a.ack_req == b.ack_req && a.pkey == b.pkey &&
	       a.dqpn == b.dqpn && a.psn == b.psn && a.hdr_len == b.hdr_len &&
	       a.payload_len == b.payload_len && a.reth == b.reth && a.aeth == b.aeth &&
	       a.atmeth == b.atmeth && a.atmack == b.atmack && a.immdt == b.immdt &&
	       a.ieth == b.ieth && a.deth == b.deth && a.xrceth == b.xrceth;
}

uint32_t crc32_bitwise(uint32_t crc, const uint8_t *p, size_t n)
{
	while (n--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0xedb88320u & -(crc & 1));
	}
	return crc;
}

// IBTA A17.3.3, written out independently of srnic_icrc_headers(): ones for
// the LRH, IP and UDP with the mutable fields set to ones, BTH with resv8a
// set to ones, then everything up to the ICRC.
uint32_t model_icrc(const uint8_t *l3, bool ipv6, const uint8_t *pkt, size_t len)
{
	size_t ip_len = ipv6 ? SRNIC_IPV6_HDR_LEN : SRNIC_IPV4_HDR_LEN;
	std::vector<uint8_t> m(8, 0xff);

	m.insert(m.end(), l3, l3 + ip_len + SRNIC_UDP_HDR_LEN);
	m.insert(m.end(), pkt, pkt + len - SRNIC_ICRC_SIZE);
	uint8_t *ip = m.data() + 8;
	if (ipv6) {
		ip[0] |= 0x0f;
		ip[1] = ip[2] = ip[3] = 0xff;
		ip[7] = 0xff;
	} else {
		ip[1] = ip[8] = ip[10] = ip[11] = 0xff;
	}
	ip[ip_len + 6] = ip[ip_len + 7] = 0xff;
	ip[ip_len + SRNIC_UDP_HDR_LEN + 4] = 0xff;
	return ~crc32_bitwise(~0u, m.data(), m.size());
}

// A plausible IPv4 or IPv6 + UDP header for a @len byte transport packet;
// the fields the ICRC masks, the addresses and the source port come from
// @salt, the input's own bytes.
void fill_l3(uint8_t *l3, bool ipv6, size_t len, const uint8_t *salt, size_t salt_len)
{
	size_t ip_len = ipv6 ? SRNIC_IPV6_HDR_LEN : SRNIC_IPV4_HDR_LEN;
	size_t udp_len = SRNIC_UDP_HDR_LEN + len;

	for (size_t i = 0; i < ip_len + SRNIC_UDP_HDR_LEN; i++)
		l3[i] = salt_len ? uint8_t(salt[(i * 7) % salt_len] + i) : uint8_t(i);
	if (ipv6) {
		l3[0] = uint8_t(0x60 | (l3[0] & 0x0f)); // version 6, TC high
		l3[4] = uint8_t(udp_len >> 8);		 // payload length
		l3[5] = uint8_t(udp_len);
		l3[6] = 17;				 // next header: UDP
	} else {
		size_t tot = SRNIC_IPV4_HDR_LEN + udp_len;
		l3[0] = 0x45; // version 4, no options
		l3[2] = uint8_t(tot >> 8);
		l3[3] = uint8_t(tot);
		l3[6] = 0x40; // DF
		l3[7] = 0;
		l3[9] = 17;
	}
	uint8_t *udp = l3 + ip_len;
	udp[2] = SRNIC_ROCE_V2_UDP_PORT >> 8;
	udp[3] = SRNIC_ROCE_V2_UDP_PORT & 0xff;
	udp[4] = uint8_t(udp_len >> 8);
	udp[5] = uint8_t(udp_len);
}

void check_icrc(const uint8_t *data, size_t len, const srnic_pkt &pkt, bool ipv6)
{
	size_t ip_len = ipv6 ? SRNIC_IPV6_HDR_LEN : SRNIC_IPV4_HDR_LEN;
	size_t lin = linear_len(len);
	size_t head = ip_len + SRNIC_UDP_HDR_LEN + lin;

	// The skb's linear area, exactly: IP, UDP and the pulled transport
	// bytes. The rest of the packet is a separate exact-size buffer, like
	// the page fragments srnic_skb_crc32() walks.
	uint8_t *frame = static_cast<uint8_t *>(malloc(head));
	CHECK(frame);
	fill_l3(frame, ipv6, len, data, len);
	memcpy(frame + ip_len + SRNIC_UDP_HDR_LEN, data, lin);
	const uint8_t *bth = frame + ip_len + SRNIC_UDP_HDR_LEN;

	uint8_t *body = static_cast<uint8_t *>(malloc(len));
	CHECK(body);
	memcpy(body, data, len);

	size_t body_len = pkt.payload_len + pkt.pad;
	CHECK(pkt.hdr_len <= lin);
	uint32_t start = srnic_icrc_headers(frame, ipv6, bth, pkt.hdr_len);

	uint32_t whole = srnic_icrc_update(start, body + pkt.hdr_len, body_len);
	// Two fragments, split where the input says.
	size_t cut = body_len ? data[len - 1] % (body_len + 1) : 0;
	uint32_t split = srnic_icrc_update(start, body + pkt.hdr_len, cut);
	split = srnic_icrc_update(split, body + pkt.hdr_len + cut, body_len - cut);
	CHECK(whole == split);

	uint32_t icrc = le32_to_cpu(srnic_icrc_finish(whole));
	CHECK(icrc == model_icrc(frame, ipv6, data, len));

	free(body);
	free(frame);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	// Only the linear area is readable by the parser: an exact-size copy
	// of min(len, SRNIC_MAX_HDR_LEN) bytes, though it is told the whole
	// length.
	size_t lin_len = linear_len(len);
	uint8_t *lin = static_cast<uint8_t *>(malloc(lin_len ? lin_len : 1));
	CHECK(lin);
	memcpy(lin, data, lin_len);

	srnic_pkt pkt;
	memset(&pkt, 0xa5, sizeof(pkt));
	enum srnic_parse_error err = srnic_parse_transport(lin, len, &pkt);

	CHECK(err >= SRNIC_PARSE_OK && err < SRNIC_PARSE_NUM_ERRORS);
	CHECK(err == model_verdict(data, len));

	// The verdict is the same on the whole packet, whatever its payload.
	srnic_pkt again;
	memset(&again, 0x5a, sizeof(again));
	CHECK(srnic_parse_transport(data, len, &again) == err);
	if (err == SRNIC_PARSE_OK)
		CHECK(same_pkt(pkt, again));

	if (err == SRNIC_PARSE_OK) {
		check_accepted(data, len, pkt);
		read_headers(lin, pkt);
		check_icrc(data, len, pkt, false);
		check_icrc(data, len, pkt, true);
	}
	free(lin);
	return 0;
}
