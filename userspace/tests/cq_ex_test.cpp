// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The extended poll API (cq_ex.cpp) over a fake CQ ring: every reader against
// the CQE the fake kernel wrote and against poll_cq's ibv_wc of the same CQE,
// the start/next/end protocol (ENOENT, the lock, when the consumer index is
// handed back), which readers are installed, and the attributes refused
// before any command is sent.
#include "cq_ex.h"
#include "fake_ring.h"
#include "pd.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <memory>

namespace srnic::test
{
namespace
{

constexpr uint32_t kCqEntries = 4;

srnic_cqe full_cqe(uint64_t wr_id)
{
	srnic_cqe c = {};
	c.wr_id = wr_id;
	c.byte_len = 4096 + wr_id;
	c.imm_data = htobe32(0xc0ffee00 + wr_id);
	c.qp_num = 0x11;
	c.src_qp = 0x22;
	c.vendor_err = 0x33;
	c.pkey_index = 0;
	c.slid = 0x44;
	c.status = IBV_WC_SUCCESS;
	c.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
	c.wc_flags = SRNIC_CQE_WITH_IMM | SRNIC_CQE_GRH;
	c.sl = 5;
	c.dlid_path_bits = 6;
	return c;
}

class CqExTest : public ::testing::Test
{
    protected:
	void SetUp() override
	{
		ASSERT_TRUE(mem_.valid());
		cq_ = std::make_unique<Cq>();
		cq_->reader.emplace(mem_.view());
		install_cq_ex_readers(*cq_, supported_wc_flags);
		cqx_ = &cq_->vcq.cq_ex;
	}

	[[nodiscard]] uint32_t released() const { return load_acquire(mem_.ctrl().consumer); }

	FakeRingMemory mem_{kCqEntries, sizeof(srnic_cqe)};
	FakeKernelCq kernel_{mem_.view()};
	std::unique_ptr<Cq> cq_;
	ibv_cq_ex *cqx_ = nullptr;
	ibv_poll_cq_attr attr_ = {};
};

TEST_F(CqExTest, EveryReaderReadsTheCqe)
{
	const srnic_cqe c = full_cqe(1);
	ASSERT_TRUE(kernel_.complete(c));
	ASSERT_EQ(ibv_start_poll(cqx_, &attr_), 0);
	EXPECT_EQ(cqx_->wr_id, 1u);
	EXPECT_EQ(cqx_->status, IBV_WC_SUCCESS);
	EXPECT_EQ(ibv_wc_read_opcode(cqx_), IBV_WC_RECV_RDMA_WITH_IMM);
	EXPECT_EQ(ibv_wc_read_vendor_err(cqx_), 0x33u);
	EXPECT_EQ(ibv_wc_read_byte_len(cqx_), 4097u);
	EXPECT_EQ(ibv_wc_read_imm_data(cqx_), htobe32(0xc0ffee01));
	EXPECT_EQ(ibv_wc_read_qp_num(cqx_), 0x11u);
	EXPECT_EQ(ibv_wc_read_src_qp(cqx_), 0x22u);
	EXPECT_EQ(ibv_wc_read_wc_flags(cqx_), unsigned{IBV_WC_WITH_IMM | IBV_WC_GRH});
	EXPECT_EQ(ibv_wc_read_slid(cqx_), 0x44u);
	EXPECT_EQ(ibv_wc_read_sl(cqx_), 5);
	EXPECT_EQ(ibv_wc_read_dlid_path_bits(cqx_), 6);
	ibv_end_poll(cqx_);
	EXPECT_EQ(released(), 1u);
}

// The readers and poll_cq decode a CQE the same way, error statuses too.
TEST_F(CqExTest, ReadersAgreeWithPollCq)
{
	srnic_cqe a = full_cqe(7);
	srnic_cqe b = full_cqe(8);
	b.status = IBV_WC_REM_ACCESS_ERR;
	b.opcode = IBV_WC_RDMA_WRITE;
	b.wc_flags = 0;
	for (const srnic_cqe &c : {a, b}) {
		// Once for the readers, once for poll_cq.
		ASSERT_TRUE(kernel_.complete(c));
		ASSERT_TRUE(kernel_.complete(c));
		ASSERT_EQ(ibv_start_poll(cqx_, &attr_), 0);
		const uint64_t wr_id = cqx_->wr_id;
		const ibv_wc_status status = cqx_->status;
		const ibv_wc_opcode opcode = ibv_wc_read_opcode(cqx_);
		const uint32_t byte_len = ibv_wc_read_byte_len(cqx_);
		const unsigned int flags = ibv_wc_read_wc_flags(cqx_);
		const __be32 imm = ibv_wc_read_imm_data(cqx_);
		const uint32_t vendor_err = ibv_wc_read_vendor_err(cqx_);
		ibv_end_poll(cqx_);

		ibv_wc wc = {};
		ASSERT_EQ(poll_cq(&cq_->vcq.cq, 1, &wc), 1);
		EXPECT_EQ(wc.wr_id, wr_id);
		EXPECT_EQ(wc.status, status);
		EXPECT_EQ(wc.opcode, opcode);
		EXPECT_EQ(wc.byte_len, byte_len);
		EXPECT_EQ(wc.wc_flags, flags);
		EXPECT_EQ(wc.imm_data, imm);
		EXPECT_EQ(wc.vendor_err, vendor_err);
	}
	EXPECT_EQ(released(), 4u);
}

TEST_F(CqExTest, InvalidatedRkeyReadsThroughImmData)
{
	srnic_cqe c = full_cqe(1);
	c.opcode = IBV_WC_RECV;
	c.wc_flags = SRNIC_CQE_WITH_INV;
	c.invalidated_rkey = 0x12345678;
	ASSERT_TRUE(kernel_.complete(c));
	ASSERT_EQ(ibv_start_poll(cqx_, &attr_), 0);
	EXPECT_EQ(ibv_wc_read_invalidated_rkey(cqx_), 0x12345678u);
	EXPECT_EQ(ibv_wc_read_wc_flags(cqx_), unsigned{IBV_WC_WITH_INV});
	ibv_end_poll(cqx_);
}

// A tag-matching receive: the opcode, the TM flags and the tag with its
// app_ctx as the kernel wrote them.
TEST_F(CqExTest, TagMatchingCompletionReadsTagAndFlags)
{
	srnic_cqe c = full_cqe(9);
	c.opcode = IBV_WC_TM_RECV;
	c.wc_flags = SRNIC_CQE_TM_MATCH | SRNIC_CQE_TM_DATA_VALID;
	c.tm_tag = 0x1122334455667788ull;
	c.tm_priv = 0xabcd;
	ASSERT_TRUE(kernel_.complete(c));
	ASSERT_EQ(ibv_start_poll(cqx_, &attr_), 0);
	EXPECT_EQ(ibv_wc_read_opcode(cqx_), IBV_WC_TM_RECV);
	EXPECT_EQ(ibv_wc_read_wc_flags(cqx_), unsigned{IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID});
	ibv_wc_tm_info info = {};
	ibv_wc_read_tm_info(cqx_, &info);
	EXPECT_EQ(info.tag, 0x1122334455667788ull);
	EXPECT_EQ(info.priv, 0xabcdu);
	ibv_end_poll(cqx_);
}

TEST_F(CqExTest, StartPollOnEmptyIsEnoentAndUnlocks)
{
	EXPECT_EQ(ibv_start_poll(cqx_, &attr_), ENOENT);
	// The lock was released: a second start_poll and poll_cq do not spin.
	EXPECT_EQ(ibv_start_poll(cqx_, &attr_), ENOENT);
	ibv_wc wc;
	EXPECT_EQ(poll_cq(&cq_->vcq.cq, 1, &wc), 0);
	EXPECT_EQ(released(), 0u);
}

TEST_F(CqExTest, AttrCompMaskIsEinval)
{
	ASSERT_TRUE(kernel_.complete(1));
	attr_.comp_mask = 1;
	EXPECT_EQ(ibv_start_poll(cqx_, &attr_), EINVAL);
	attr_.comp_mask = 0;
	ASSERT_EQ(ibv_start_poll(cqx_, &attr_), 0) << "the lock was not taken";
	ibv_end_poll(cqx_);
}

TEST_F(CqExTest, NextPollWalksAndWaitsWithoutLosingCompletions)
{
	ASSERT_TRUE(kernel_.complete(1, 10));
	ASSERT_TRUE(kernel_.complete(2, 20));
	ASSERT_EQ(ibv_start_poll(cqx_, &attr_), 0);
	EXPECT_EQ(cqx_->wr_id, 1u);
	ASSERT_EQ(ibv_next_poll(cqx_), 0);
	EXPECT_EQ(cqx_->wr_id, 2u);
	EXPECT_EQ(ibv_wc_read_byte_len(cqx_), 20u);
	// Nothing more yet: ENOENT, as often as asked, and the session goes on.
	EXPECT_EQ(ibv_next_poll(cqx_), ENOENT);
	EXPECT_EQ(ibv_next_poll(cqx_), ENOENT);
	EXPECT_EQ(released(), 0u) << "slots go back at end_poll";
	ASSERT_TRUE(kernel_.complete(3, 30));
	ASSERT_EQ(ibv_next_poll(cqx_), 0);
	EXPECT_EQ(cqx_->wr_id, 3u);
	EXPECT_EQ(ibv_wc_read_byte_len(cqx_), 30u);
	ibv_end_poll(cqx_);
	EXPECT_EQ(released(), 3u);

	// end_poll right after start_poll consumes that one completion only.
	ASSERT_TRUE(kernel_.complete(4));
	ASSERT_TRUE(kernel_.complete(5));
	ASSERT_EQ(ibv_start_poll(cqx_, &attr_), 0);
	EXPECT_EQ(cqx_->wr_id, 4u);
	ibv_end_poll(cqx_);
	EXPECT_EQ(released(), 4u);
	ASSERT_EQ(ibv_start_poll(cqx_, &attr_), 0);
	EXPECT_EQ(cqx_->wr_id, 5u);
	EXPECT_EQ(ibv_next_poll(cqx_), ENOENT);
	ibv_end_poll(cqx_);
	EXPECT_EQ(released(), 5u);
}

// The direct path's completions (Cq::direct) come first, then the ring's,
// each exactly once, as poll_cq returns them; a direct one read by the
// readers like any other and consumed without touching the ring.
TEST_F(CqExTest, DirectCompletionsComeBeforeTheRing)
{
	ASSERT_TRUE(kernel_.complete(3, 30));
	cq_->direct.push(full_cqe(1));
	cq_->direct.push(full_cqe(2));
	ASSERT_EQ(ibv_start_poll(cqx_, &attr_), 0);
	EXPECT_EQ(cqx_->wr_id, 1u);
	EXPECT_EQ(ibv_wc_read_byte_len(cqx_), 4097u);
	EXPECT_EQ(ibv_wc_read_qp_num(cqx_), 0x11u);
	ASSERT_EQ(ibv_next_poll(cqx_), 0);
	EXPECT_EQ(cqx_->wr_id, 2u);
	ASSERT_EQ(ibv_next_poll(cqx_), 0);
	EXPECT_EQ(cqx_->wr_id, 3u);
	EXPECT_EQ(ibv_wc_read_byte_len(cqx_), 30u);
	EXPECT_EQ(ibv_next_poll(cqx_), ENOENT);
	ibv_end_poll(cqx_);
	EXPECT_EQ(released(), 1u) << "only the ring's one is handed back";
	EXPECT_EQ(cq_->direct.front(), nullptr);

	// end_poll right after a direct one consumes it alone.
	cq_->direct.push(full_cqe(4));
	ASSERT_TRUE(kernel_.complete(5));
	ASSERT_EQ(ibv_start_poll(cqx_, &attr_), 0);
	EXPECT_EQ(cqx_->wr_id, 4u);
	ibv_end_poll(cqx_);
	EXPECT_EQ(released(), 1u);
	ASSERT_EQ(ibv_start_poll(cqx_, &attr_), 0);
	EXPECT_EQ(cqx_->wr_id, 5u);
	ibv_end_poll(cqx_);
	EXPECT_EQ(released(), 2u);
}

// Several laps of the ring: owner phases flip, nothing is read twice.
TEST_F(CqExTest, WrapsAroundTheRing)
{
	uint64_t next = 0;
	for (uint64_t wr_id = 0; wr_id < 5 * kCqEntries; ++wr_id) {
		ASSERT_TRUE(kernel_.complete(wr_id));
		if (wr_id % 3 != 2)
			continue;
		ASSERT_EQ(ibv_start_poll(cqx_, &attr_), 0);
		do
			EXPECT_EQ(cqx_->wr_id, next++);
		while (ibv_next_poll(cqx_) == 0);
		ibv_end_poll(cqx_);
	}
	EXPECT_EQ(next, 5u * kCqEntries - 5u * kCqEntries % 3);
}

TEST(CqExReaders, OnlyTheRequestedOnes)
{
	Cq cq{};
	install_cq_ex_readers(cq, IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_SL);
	const ibv_cq_ex &x = cq.vcq.cq_ex;
	EXPECT_NE(x.start_poll, nullptr);
	EXPECT_NE(x.next_poll, nullptr);
	EXPECT_NE(x.end_poll, nullptr);
	EXPECT_NE(x.read_opcode, nullptr);
	EXPECT_NE(x.read_vendor_err, nullptr);
	EXPECT_NE(x.read_wc_flags, nullptr);
	EXPECT_NE(x.read_byte_len, nullptr);
	EXPECT_NE(x.read_sl, nullptr);
	EXPECT_EQ(x.read_imm_data, nullptr);
	EXPECT_EQ(x.read_qp_num, nullptr);
	EXPECT_EQ(x.read_src_qp, nullptr);
	EXPECT_EQ(x.read_slid, nullptr);
	EXPECT_EQ(x.read_dlid_path_bits, nullptr);
	EXPECT_EQ(x.read_completion_ts, nullptr);
}

// Refused before any command: the context is never touched (nullptr here).
TEST(CqExCreate, UnsupportedAttributesAreEopnotsupp)
{
	EXPECT_EQ(supported_wc_flags,
		  uint64_t{IBV_WC_STANDARD_FLAGS} | uint64_t{IBV_WC_EX_WITH_TM_INFO});
	for (uint64_t flag : {uint64_t{IBV_WC_EX_WITH_COMPLETION_TIMESTAMP},
			      uint64_t{IBV_WC_EX_WITH_CVLAN}, uint64_t{IBV_WC_EX_WITH_FLOW_TAG},
			      uint64_t{IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK}}) {
		ibv_cq_init_attr_ex attr = {};
		attr.cqe = 4;
		attr.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | flag;
		errno = 0;
		EXPECT_EQ(create_cq_ex(nullptr, &attr), nullptr) << flag;
		EXPECT_EQ(errno, EOPNOTSUPP) << flag;
	}
	ibv_cq_init_attr_ex attr = {};
	attr.cqe = 4;
	attr.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
	attr.flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
	errno = 0;
	EXPECT_EQ(create_cq_ex(nullptr, &attr), nullptr);
	EXPECT_EQ(errno, EOPNOTSUPP);
}

TEST(CqExCreate, ParentDomainMustBeOneOfThisContext)
{
	ibv_context ctx = {};
	Pd pd = {};
	pd.ibpd.context = &ctx;
	ibv_cq_init_attr_ex attr = {};
	attr.cqe = 4;
	attr.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
	for (ibv_pd *given : {static_cast<ibv_pd *>(nullptr), &pd.ibpd}) {
		attr.parent_domain = given; // none, or a protection domain
		errno = 0;
		EXPECT_EQ(create_cq_ex(&ctx, &attr), nullptr);
		EXPECT_EQ(errno, EINVAL);
	}
}

} // namespace
} // namespace srnic::test
