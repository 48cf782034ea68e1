// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The provider's post_srq_recv over a fake ring: the RQ's WQE format, the
// SGE check, bad_wr, a full ring and slots handed back by the kernel, and no
// doorbell; a QP attached to an SRQ refuses post_recv and maps no RQ.
#include "fake_ring.h"
#include "qp.h"
#include "srq.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <iterator>
#include <memory>

namespace srnic::test
{
namespace
{

constexpr uint32_t kSrqEntries = 4;
constexpr uint32_t kSrqEntrySize = 64; // 16-byte header + 3 SGEs

class SrqPostTest : public ::testing::Test
{
    protected:
	void SetUp() override
	{
		ASSERT_TRUE(mem_.valid());
		srq_ = std::make_unique<Srq>();
		srq_->rq.emplace(mem_.view());
		srq_->max_sge = 3;
	}

	ibv_srq *ibsrq() { return &srq_->vsrq.srq; }

	const srnic_recv_wqe &wqe(uint32_t i) const
	{
		return *reinterpret_cast<const srnic_recv_wqe *>(mem_.view().entry(i));
	}

	FakeRingMemory mem_{kSrqEntries, kSrqEntrySize};
	std::unique_ptr<Srq> srq_;
};

TEST_F(SrqPostTest, WritesRecvWqeAndPublishes)
{
	ibv_sge sge[3] = {{0x1000, 10, 7}, {0x2000, 20, 8}, {0x3000, 30, 9}};
	ibv_recv_wr wr = {};
	wr.wr_id = 77;
	wr.sg_list = sge;
	wr.num_sge = 3;
	ibv_recv_wr *bad = nullptr;

	ASSERT_EQ(post_srq_recv(ibsrq(), &wr, &bad), 0);
	EXPECT_EQ(bad, nullptr);
	EXPECT_EQ(load_acquire(mem_.ctrl().producer), 1u);
	EXPECT_EQ(wqe(0).wr_id, 77u);
	EXPECT_EQ(wqe(0).num_sge, 3);
	const auto *wsge = reinterpret_cast<const srnic_sge *>(&wqe(0) + 1);
	for (int i = 0; i < 3; ++i) {
		EXPECT_EQ(wsge[i].addr, sge[i].addr);
		EXPECT_EQ(wsge[i].length, sge[i].length);
		EXPECT_EQ(wsge[i].lkey, sge[i].lkey);
	}

	// No SGE at all is a valid receive (zero-length messages).
	wr.wr_id = 78;
	wr.num_sge = 0;
	wr.sg_list = nullptr;
	ASSERT_EQ(post_srq_recv(ibsrq(), &wr, &bad), 0);
	EXPECT_EQ(wqe(1).wr_id, 78u);
	EXPECT_EQ(wqe(1).num_sge, 0);
	EXPECT_EQ(load_acquire(mem_.ctrl().producer), 2u);
}

TEST_F(SrqPostTest, TooManySgesIsEinvalAndPublishesThoseBefore)
{
	ibv_sge sge[4] = {};
	ibv_recv_wr wrs[3] = {};
	for (size_t i = 0; i < std::size(wrs); ++i) {
		wrs[i].wr_id = i;
		wrs[i].sg_list = sge;
		wrs[i].num_sge = 1;
		wrs[i].next = i + 1 < std::size(wrs) ? &wrs[i + 1] : nullptr;
	}
	wrs[1].num_sge = 4;
	ibv_recv_wr *bad = nullptr;
	EXPECT_EQ(post_srq_recv(ibsrq(), wrs, &bad), EINVAL);
	EXPECT_EQ(bad, &wrs[1]);
	EXPECT_EQ(load_acquire(mem_.ctrl().producer), 1u);

	wrs[1].num_sge = -1;
	EXPECT_EQ(post_srq_recv(ibsrq(), &wrs[1], &bad), EINVAL);
	EXPECT_EQ(bad, &wrs[1]);
	EXPECT_EQ(load_acquire(mem_.ctrl().producer), 1u);
}

TEST_F(SrqPostTest, FullRingIsEnomemUntilTheKernelConsumes)
{
	ibv_recv_wr wrs[kSrqEntries + 1] = {};
	for (size_t i = 0; i < std::size(wrs); ++i) {
		wrs[i].wr_id = 100 + i;
		wrs[i].next = i + 1 < std::size(wrs) ? &wrs[i + 1] : nullptr;
	}
	ibv_recv_wr *bad = nullptr;
	EXPECT_EQ(post_srq_recv(ibsrq(), wrs, &bad), ENOMEM);
	EXPECT_EQ(bad, &wrs[kSrqEntries]);
	EXPECT_EQ(load_acquire(mem_.ctrl().producer), kSrqEntries);

	// The kernel (any QP of the SRQ) took one: one more fits, in slot 0.
	store_release(mem_.ctrl().consumer, 1);
	bad = nullptr;
	EXPECT_EQ(post_srq_recv(ibsrq(), &wrs[kSrqEntries], &bad), 0);
	EXPECT_EQ(wqe(kSrqEntries).wr_id, 100u + kSrqEntries);
	EXPECT_EQ(load_acquire(mem_.ctrl().producer), kSrqEntries + 1);
}

TEST(SrqQpTest, QpWithSrqHasNoRqAndRefusesPostRecv)
{
	auto qp = std::make_unique<Qp>();
	qp->state = IBV_QPS_RTS;
	ibv_recv_wr wr = {};
	ibv_recv_wr *bad = nullptr;
	EXPECT_EQ(post_recv(&qp->vqp.qp, &wr, &bad), EINVAL);
	EXPECT_EQ(bad, &wr);
}

TEST(SrqCapsTest, RecvCapsMustFitRing)
{
	srnic_queue_desc ring = {.mmap_offset = 0, .mmap_size = 8192, .num_entries = 8,
				 .entry_size = 64, .ring_offset = 0, .flags = 0, .reserved = 0};
	EXPECT_TRUE(recv_caps_fit_ring(8, 3, ring));
	EXPECT_FALSE(recv_caps_fit_ring(9, 3, ring));
	EXPECT_FALSE(recv_caps_fit_ring(8, 4, ring));
	ring.entry_size = 8; // smaller than a WQE header
	EXPECT_FALSE(recv_caps_fit_ring(0, 0, ring));
}

TEST(SrqCapsTest, QpWithSrqMustGetNoRq)
{
	srnic_queue_desc sq = {.mmap_offset = 0, .mmap_size = 8192, .num_entries = 8,
			       .entry_size = 128, .ring_offset = 0, .flags = 0, .reserved = 0};
	srnic_queue_desc rq = {};
	ibv_qp_cap cap = {.max_send_wr = 8, .max_recv_wr = 0, .max_send_sge = 4,
			  .max_recv_sge = 0, .max_inline_data = 64};
	EXPECT_TRUE(qp_caps_fit_rings(cap, sq, rq, false));
	// Without an SRQ an all-zero RQ is no RQ.
	EXPECT_FALSE(qp_caps_fit_rings(cap, sq, rq, true));
	cap.max_recv_wr = 1;
	EXPECT_FALSE(qp_caps_fit_rings(cap, sq, rq, false));
	cap.max_recv_wr = 0;
	rq.num_entries = 8;
	rq.entry_size = 64;
	EXPECT_FALSE(qp_caps_fit_rings(cap, sq, rq, false));
}

} // namespace
} // namespace srnic::test
