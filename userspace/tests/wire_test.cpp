// SPDX-License-Identifier: GPL-2.0
// White-box tests of kernel/srnic_wire.c (RoCEv2 parsing and ICRC), built
// from the kernel source itself.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

extern "C" {
#include "srnic_wire.h"
}

namespace
{

constexpr uint8_t rc(uint8_t op)
{
	return SRNIC_OPCODE(SRNIC_TRANSPORT_RC, op);
}

std::vector<uint8_t> make_packet(uint8_t opcode, size_t payload, uint8_t pad = 0,
				 uint32_t dqpn = 0x123456, uint32_t psn = 0xabcdef,
				 bool ack_req = true, bool se = true)
{
	uint32_t flags = srnic_opcode_flags[opcode];
	size_t hdr = srnic_opcode_hdr_len(flags);
	std::vector<uint8_t> p(hdr + payload + pad + SRNIC_ICRC_SIZE, 0x5a);
	auto *bth = reinterpret_cast<srnic_bth *>(p.data());
	bth->opcode = opcode;
	bth->flags = FIELD_PREP(SRNIC_BTH_FLAGS_PAD_MASK, pad) | (se ? SRNIC_BTH_FLAGS_SE_MASK : 0);
	bth->pkey = cpu_to_be16(0xffff);
	bth->dqpn = cpu_to_be32(dqpn);
	bth->apsn = cpu_to_be32(psn | (ack_req ? SRNIC_BTH_APSN_ACKREQ_MASK : 0));
	return p;
}

TEST(WireOpcodes, HeaderLengthsMatchIbta)
{
	auto len = [](uint8_t opcode) { return srnic_opcode_hdr_len(srnic_opcode_flags[opcode]); };
	EXPECT_EQ(len(rc(SRNIC_OP_SEND_ONLY)), 12u);
	EXPECT_EQ(len(rc(SRNIC_OP_SEND_ONLY_IMM)), 16u);
	EXPECT_EQ(len(rc(SRNIC_OP_WRITE_ONLY)), 28u);
	EXPECT_EQ(len(rc(SRNIC_OP_WRITE_ONLY_IMM)), 32u);
	EXPECT_EQ(len(rc(SRNIC_OP_READ_REQUEST)), 28u);
	EXPECT_EQ(len(rc(SRNIC_OP_READ_RESPONSE_MIDDLE)), 12u);
	EXPECT_EQ(len(rc(SRNIC_OP_READ_RESPONSE_FIRST)), 16u);
	EXPECT_EQ(len(rc(SRNIC_OP_CMP_SWAP)), 40u);
	EXPECT_EQ(len(rc(SRNIC_OP_ACK)), 16u);
	EXPECT_EQ(len(rc(SRNIC_OP_ATOMIC_ACK)), 24u);
	EXPECT_EQ(len(rc(SRNIC_OP_SEND_ONLY_INV)), 16u);
	EXPECT_EQ(len(SRNIC_OPCODE(SRNIC_TRANSPORT_UD, SRNIC_OP_SEND_ONLY_IMM)), 24u);
	EXPECT_EQ(len(SRNIC_OPCODE(SRNIC_TRANSPORT_XRC, SRNIC_OP_WRITE_ONLY_IMM)), 36u);
	EXPECT_EQ(len(0x81), 28u); // CNP
}

TEST(WireOpcodes, ReservedAndUnsupportedOpcodesAreRejected)
{
	for (uint8_t op : {0x15, 0x18, 0x1f, 0x40, 0x41, 0x60, 0x6c, 0x2c, 0x80, 0xe0, 0xff})
		EXPECT_EQ(srnic_opcode_flags[op], 0u) << "opcode " << int(op);
	// Every accepted opcode is exactly one of request, response or CNP, and
	// its headers fit what the receive path pulls into the linear area.
	for (int op = 0; op < 256; op++) {
		uint32_t f = srnic_opcode_flags[op];
		if (!f)
			continue;
		EXPECT_LE(srnic_opcode_hdr_len(f), uint32_t(SRNIC_MAX_HDR_LEN)) << "opcode " << op;
		int kinds = !!(f & SRNIC_OPF_REQUEST) + !!(f & SRNIC_OPF_RESPONSE) +
			    !!(f & SRNIC_OPF_CNP);
		EXPECT_EQ(kinds, 1) << "opcode " << op;
	}
}

TEST(WireParse, DecodesEveryField)
{
	auto p = make_packet(rc(SRNIC_OP_WRITE_ONLY_IMM), 1021, 3);
	srnic_pkt pkt;
	ASSERT_EQ(srnic_parse_transport(p.data(), p.size(), &pkt), SRNIC_PARSE_OK);
	EXPECT_EQ(pkt.opcode, rc(SRNIC_OP_WRITE_ONLY_IMM));
	EXPECT_EQ(pkt.dqpn, 0x123456u);
	EXPECT_EQ(pkt.psn, 0xabcdefu);
	EXPECT_TRUE(pkt.ack_req);
	EXPECT_TRUE(pkt.solicited);
	EXPECT_EQ(pkt.pkey, 0xffff);
	EXPECT_EQ(pkt.pad, 3);
	EXPECT_EQ(pkt.hdr_len, 32u);
	EXPECT_EQ(pkt.payload_len, 1021u);
	EXPECT_EQ(pkt.reth, 12);
	EXPECT_EQ(pkt.immdt, 28);
	EXPECT_EQ(pkt.aeth, 0);
	EXPECT_TRUE(pkt.flags & SRNIC_OPF_RECV_WQE);
}

TEST(WireParse, ExtensionHeadersInWireOrder)
{
	srnic_pkt pkt;
	auto atomic_ack = make_packet(rc(SRNIC_OP_ATOMIC_ACK), 0);
	ASSERT_EQ(srnic_parse_transport(atomic_ack.data(), atomic_ack.size(), &pkt),
		  SRNIC_PARSE_OK);
	EXPECT_EQ(pkt.aeth, 12);
	EXPECT_EQ(pkt.atmack, 16);

	auto xrc = make_packet(SRNIC_OPCODE(SRNIC_TRANSPORT_XRC, SRNIC_OP_WRITE_ONLY_IMM), 8);
	ASSERT_EQ(srnic_parse_transport(xrc.data(), xrc.size(), &pkt), SRNIC_PARSE_OK);
	EXPECT_EQ(pkt.xrceth, 12);
	EXPECT_EQ(pkt.reth, 16);
	EXPECT_EQ(pkt.immdt, 32);

	auto ud = make_packet(SRNIC_OPCODE(SRNIC_TRANSPORT_UD, SRNIC_OP_SEND_ONLY_IMM), 8);
	ASSERT_EQ(srnic_parse_transport(ud.data(), ud.size(), &pkt), SRNIC_PARSE_OK);
	EXPECT_EQ(pkt.deth, 12);
	EXPECT_EQ(pkt.immdt, 20);
}

TEST(WireXrc, XrcEthIsTheSrqNumberBigEndianAfterAReservedByte)
{
	auto req = make_packet(SRNIC_OPCODE(SRNIC_TRANSPORT_XRC, SRNIC_OP_SEND_ONLY), 4);
	srnic_pkt pkt;
	ASSERT_EQ(srnic_parse_transport(req.data(), req.size(), &pkt), SRNIC_PARSE_OK);
	ASSERT_EQ(pkt.xrceth, 12);
	auto *h = reinterpret_cast<srnic_xrceth *>(req.data() + pkt.xrceth);
	srnic_xrceth_put(h, 0x123456);
	const uint8_t want[4] = {0x00, 0x12, 0x34, 0x56};
	EXPECT_EQ(std::memcmp(h, want, sizeof(want)), 0);
	EXPECT_EQ(srnic_xrceth_get(h), 0x123456u);
	// The reserved byte is ignored on receipt; bits beyond 24 are not sent.
	reinterpret_cast<uint8_t *>(h)[0] = 0xff;
	EXPECT_EQ(srnic_xrceth_get(h), 0x123456u);
	srnic_xrceth_put(h, 0xab000001);
	EXPECT_EQ(srnic_xrceth_get(h), 1u);
	EXPECT_EQ(reinterpret_cast<uint8_t *>(h)[0], 0);
}

TEST(WireAtomic, AtomicEthFieldsAreBigEndianInIbtaOrder)
{
	auto req = make_packet(rc(SRNIC_OP_CMP_SWAP), 0);
	srnic_pkt pkt;
	ASSERT_EQ(srnic_parse_transport(req.data(), req.size(), &pkt), SRNIC_PARSE_OK);
	ASSERT_EQ(pkt.atmeth, 12);
	ASSERT_EQ(pkt.hdr_len, 12u + 28u);

	const srnic_atomic_fields in = {
		.va = 0x0102030405060708ull,
		.rkey = 0x090a0b0c,
		.swap_add = 0x1112131415161718ull,
		.compare = 0x2122232425262728ull,
	};
	srnic_atmeth_put(reinterpret_cast<srnic_atmeth *>(req.data() + pkt.atmeth), &in);
	// VA (8), R_Key (4), swap or add data (8), compare data (8).
	const std::array<uint8_t, 28> wire = {
		0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a,
		0x0b, 0x0c, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18,
		0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28,
	};
	EXPECT_TRUE(std::equal(wire.begin(), wire.end(), req.begin() + pkt.atmeth));

	srnic_atomic_fields out = {};
	srnic_atmeth_get(reinterpret_cast<const srnic_atmeth *>(req.data() + pkt.atmeth), &out);
	EXPECT_EQ(out.va, in.va);
	EXPECT_EQ(out.rkey, in.rkey);
	EXPECT_EQ(out.swap_add, in.swap_add);
	EXPECT_EQ(out.compare, in.compare);

	auto faa = make_packet(rc(SRNIC_OP_FETCH_ADD), 0);
	ASSERT_EQ(srnic_parse_transport(faa.data(), faa.size(), &pkt), SRNIC_PARSE_OK);
	EXPECT_EQ(pkt.atmeth, 12);
	EXPECT_TRUE(pkt.flags & SRNIC_OPF_ATOMIC);
	EXPECT_TRUE(pkt.flags & SRNIC_OPF_REQUEST);
	// Atomic requests carry no payload.
	auto faa_payload = make_packet(rc(SRNIC_OP_FETCH_ADD), 8);
	EXPECT_EQ(srnic_parse_transport(faa_payload.data(), faa_payload.size(), &pkt),
		  SRNIC_PARSE_UNEXPECTED_PAYLOAD);
}

TEST(WireAtomic, AtomicAckCarriesTheOriginalValueAfterTheAeth)
{
	auto ack = make_packet(rc(SRNIC_OP_ATOMIC_ACK), 0);
	srnic_pkt pkt;
	ASSERT_EQ(srnic_parse_transport(ack.data(), ack.size(), &pkt), SRNIC_PARSE_OK);
	ASSERT_EQ(pkt.hdr_len, 12u + 4u + 8u);
	srnic_atmack_put(reinterpret_cast<srnic_atmack *>(ack.data() + pkt.atmack),
			 0xfedcba9876543210ull);
	const std::array<uint8_t, 8> wire = {0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10};
	EXPECT_TRUE(std::equal(wire.begin(), wire.end(), ack.begin() + 16));
	EXPECT_EQ(srnic_atmack_get(reinterpret_cast<const srnic_atmack *>(ack.data() +
									  pkt.atmack)),
		  0xfedcba9876543210ull);
	EXPECT_TRUE(pkt.flags & SRNIC_OPF_RESPONSE);
}

TEST(WireInvalidate, IethFollowsTheBthOfSendWithInvalidate)
{
	for (uint8_t op : {SRNIC_OP_SEND_ONLY_INV, SRNIC_OP_SEND_LAST_INV}) {
		auto send = make_packet(rc(op), 8);
		srnic_pkt pkt;
		ASSERT_EQ(srnic_parse_transport(send.data(), send.size(), &pkt), SRNIC_PARSE_OK);
		ASSERT_EQ(pkt.ieth, 12);
		EXPECT_EQ(pkt.hdr_len, 16u);
		EXPECT_EQ(pkt.payload_len, 8u);
		EXPECT_TRUE(pkt.flags & SRNIC_OPF_SEND);
		EXPECT_TRUE(pkt.flags & SRNIC_OPF_LAST);
		srnic_ieth_put(reinterpret_cast<srnic_ieth *>(send.data() + pkt.ieth), 0x12345678u);
		const std::array<uint8_t, 4> wire = {0x12, 0x34, 0x56, 0x78};
		EXPECT_TRUE(std::equal(wire.begin(), wire.end(), send.begin() + 12));
		EXPECT_EQ(srnic_ieth_get(reinterpret_cast<const srnic_ieth *>(send.data() +
									      pkt.ieth)),
			  0x12345678u);
	}
	// UC has no SEND with invalidate.
	auto uc = make_packet(SRNIC_OPCODE(SRNIC_TRANSPORT_UC, SRNIC_OP_SEND_ONLY_INV), 8);
	srnic_pkt pkt;
	EXPECT_EQ(srnic_parse_transport(uc.data(), uc.size(), &pkt), SRNIC_PARSE_BAD_OPCODE);
}

TEST(WireParse, RejectsMalformedPackets)
{
	srnic_pkt pkt;
	auto ok = make_packet(rc(SRNIC_OP_SEND_ONLY), 8);
	EXPECT_EQ(srnic_parse_transport(ok.data(), 15, &pkt), SRNIC_PARSE_TOO_SHORT);

	auto tver = ok;
	tver[1] |= 1;
	EXPECT_EQ(srnic_parse_transport(tver.data(), tver.size(), &pkt), SRNIC_PARSE_BAD_TVER);

	auto rd = make_packet(rc(SRNIC_OP_SEND_ONLY), 8);
	rd[0] = 0x44; // RD SEND ONLY: no RD support
	EXPECT_EQ(srnic_parse_transport(rd.data(), rd.size(), &pkt), SRNIC_PARSE_BAD_OPCODE);

	auto truncated_reth = make_packet(rc(SRNIC_OP_WRITE_ONLY), 0);
	EXPECT_EQ(srnic_parse_transport(truncated_reth.data(), truncated_reth.size() - 1, &pkt),
		  SRNIC_PARSE_TOO_SHORT);

	auto ack_with_payload = make_packet(rc(SRNIC_OP_ACK), 4);
	EXPECT_EQ(srnic_parse_transport(ack_with_payload.data(), ack_with_payload.size(), &pkt),
		  SRNIC_PARSE_UNEXPECTED_PAYLOAD);

	auto pad_in_middle = make_packet(rc(SRNIC_OP_SEND_MIDDLE), 1020, 4 - 1020 % 4 + 3);
	EXPECT_EQ(srnic_parse_transport(pad_in_middle.data(), pad_in_middle.size(), &pkt),
		  SRNIC_PARSE_BAD_PAD);

	auto pad_too_big = make_packet(rc(SRNIC_OP_SEND_ONLY), 0, 0);
	pad_too_big[1] |= FIELD_PREP(SRNIC_BTH_FLAGS_PAD_MASK, 2);
	EXPECT_EQ(srnic_parse_transport(pad_too_big.data(), pad_too_big.size(), &pkt),
		  SRNIC_PARSE_BAD_PAD);
}

// Arbitrary bytes of every length: the parser never reads outside the
// buffer (ASan watches the exact-size allocation) and what it accepts adds up.
TEST(WireParse, ArbitraryInputStaysInBounds)
{
	std::mt19937 rng(4791);
	for (int round = 0; round < 20000; round++) {
		size_t len = rng() % 96;
		std::vector<uint8_t> buf(len);
		for (auto &b : buf)
			b = rng();
		if (len && round % 2)
			buf[0] = round / 2 % 256; // cover every opcode
		if (len > 1)
			buf[1] &= 0xf0; // mostly valid TVer
		srnic_pkt pkt;
		if (srnic_parse_transport(buf.data(), buf.size(), &pkt) != SRNIC_PARSE_OK)
			continue;
		EXPECT_EQ(size_t(pkt.hdr_len) + pkt.payload_len + pkt.pad + SRNIC_ICRC_SIZE, len);
	}
}

// An oracle for the ICRC written independently of the code under test: the
// standard CRC-32 (bitwise) over a masked copy of the whole packet.
uint32_t crc32_bitwise(const std::vector<uint8_t> &data)
{
	uint32_t crc = ~0u;
	for (uint8_t b : data) {
		crc ^= b;
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0xedb88320u & -(crc & 1));
	}
	return ~crc;
}

struct RoceFrame {
	std::vector<uint8_t> bytes; // IP + UDP + transport packet (with ICRC)
	size_t ip_len;
};

RoceFrame make_frame(bool ipv6, const std::vector<uint8_t> &transport)
{
	RoceFrame f{{}, ipv6 ? size_t(SRNIC_IPV6_HDR_LEN) : size_t(SRNIC_IPV4_HDR_LEN)};
	f.bytes.resize(f.ip_len + SRNIC_UDP_HDR_LEN);
	for (size_t i = 0; i < f.bytes.size(); i++)
		f.bytes[i] = uint8_t(17 * i + 3);
	f.bytes[0] = ipv6 ? 0x60 : 0x45;
	f.bytes.insert(f.bytes.end(), transport.begin(), transport.end());
	return f;
}

uint32_t expected_icrc(const RoceFrame &f, bool ipv6)
{
	// 8 bytes of ones, then the packet less its ICRC (one allocation: GCC 16
	// takes an insert() after an 8-byte vector for an overflow of it).
	std::vector<uint8_t> m(8 + f.bytes.size() - SRNIC_ICRC_SIZE, 0xff);
	std::copy(f.bytes.begin(), f.bytes.end() - SRNIC_ICRC_SIZE, m.begin() + 8);
	uint8_t *ip = m.data() + 8;
	if (ipv6) {
		ip[0] |= 0x0f;
		ip[1] = ip[2] = ip[3] = 0xff;
		ip[7] = 0xff;
	} else {
		ip[1] = ip[8] = ip[10] = ip[11] = 0xff;
	}
	ip[f.ip_len + 6] = ip[f.ip_len + 7] = 0xff;
	ip[f.ip_len + SRNIC_UDP_HDR_LEN + 4] = 0xff;
	return crc32_bitwise(m);
}

uint32_t srnic_icrc_of(const RoceFrame &f, bool ipv6)
{
	const uint8_t *bth = f.bytes.data() + f.ip_len + SRNIC_UDP_HDR_LEN;
	srnic_pkt pkt;
	size_t transport_len = f.bytes.size() - f.ip_len - SRNIC_UDP_HDR_LEN;
	EXPECT_EQ(srnic_parse_transport(bth, transport_len, &pkt), SRNIC_PARSE_OK);
	uint32_t crc = srnic_icrc_headers(f.bytes.data(), ipv6, bth, pkt.hdr_len);
	crc = srnic_icrc_update(crc, bth + pkt.hdr_len, pkt.payload_len + pkt.pad);
	return le32_to_cpu(srnic_icrc_finish(crc));
}

TEST(WireIcrc, SeedIsTheMaskedLrh)
{
	const std::array<uint8_t, 8> ones{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	// The constant rxe starts from.
	EXPECT_EQ(crc32_le(~0u, ones.data(), ones.size()), 0xdebb20e3u);
}

TEST(WireIcrc, MatchesIndependentCrcAndIgnoresMutableFields)
{
	for (bool ipv6 : {false, true}) {
		auto f = make_frame(ipv6, make_packet(rc(SRNIC_OP_WRITE_ONLY_IMM), 37, 3));
		uint32_t icrc = srnic_icrc_of(f, ipv6);
		EXPECT_EQ(icrc, expected_icrc(f, ipv6)) << "ipv6=" << ipv6;

		// Fields routers rewrite, and BTH resv8a, are outside the ICRC.
		auto g = f;
		size_t udp = f.ip_len;
		if (ipv6) {
			g.bytes[1] ^= 0x5a; // flow label
			g.bytes[7] ^= 0x01; // hop limit
		} else {
			g.bytes[1] ^= 0x10;  // TOS
			g.bytes[8] ^= 0x01;  // TTL
			g.bytes[10] ^= 0x77; // checksum
		}
		g.bytes[udp + 6] ^= 0x42;		      // UDP checksum
		g.bytes[udp + SRNIC_UDP_HDR_LEN + 4] ^= 0x80; // resv8a
		EXPECT_EQ(srnic_icrc_of(g, ipv6), icrc);

		// Everything else is covered.
		for (size_t at :
		     {size_t(4), udp + 2, udp + SRNIC_UDP_HDR_LEN + 5, f.bytes.size() - 6}) {
			auto h = f;
			h.bytes[at] ^= 0x01;
			EXPECT_NE(srnic_icrc_of(h, ipv6), icrc) << "byte " << at;
		}
	}
}

} // namespace
