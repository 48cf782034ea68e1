// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The provider's post_send/post_recv/poll_cq fast path over fake rings: WQE
// layout, the checks (state, SGEs, inline size, opcode, full ring), bad_wr,
// and completions read back through poll_cq. No doorbell is rung: the fake
// rings never set NEED_WAKEUP.
#include "cq.h"
#include "fake_ring.h"
#include "qp.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace srnic::test
{
namespace
{

constexpr uint32_t kSqEntries = 4;
constexpr uint32_t kSqEntrySize = 128; // 64-byte header + 4 SGEs / 64 inline
constexpr uint32_t kRqEntries = 4;
constexpr uint32_t kRqEntrySize = 64; // 16-byte header + 3 SGEs

class QpPostTest : public ::testing::Test
{
    protected:
	void SetUp() override
	{
		ASSERT_TRUE(sq_mem_.valid());
		ASSERT_TRUE(rq_mem_.valid());
		qp_ = std::make_unique<Qp>();
		qp_->sq.emplace(sq_mem_.view());
		qp_->rq.emplace(rq_mem_.view());
		qp_->sq_max_sge = 4;
		qp_->rq_max_sge = 3;
		qp_->max_inline = 64;
		qp_->state = IBV_QPS_RTS;
	}

	ibv_qp *ibqp() { return &qp_->vqp.qp; }

	const srnic_send_wqe &sq_wqe(uint32_t i) const
	{
		return *reinterpret_cast<const srnic_send_wqe *>(sq_mem_.view().entry(i));
	}

	FakeRingMemory sq_mem_{kSqEntries, kSqEntrySize};
	FakeRingMemory rq_mem_{kRqEntries, kRqEntrySize};
	std::unique_ptr<Qp> qp_;
};

TEST_F(QpPostTest, SendWritesWqeAndPublishes)
{
	ibv_sge sge[2] = {{0x1000, 10, 7}, {0x2000, 20, 8}};
	ibv_send_wr wr = {};
	wr.wr_id = 42;
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | IBV_SEND_FENCE;
	wr.sg_list = sge;
	wr.num_sge = 2;
	wr.imm_data = htobe32(0x1234);
	wr.wr.rdma.remote_addr = 0xabcd000;
	wr.wr.rdma.rkey = 99;
	ibv_send_wr *bad = nullptr;

	ASSERT_EQ(post_send(ibqp(), &wr, &bad), 0);
	EXPECT_EQ(bad, nullptr);
	EXPECT_EQ(load_acquire(sq_mem_.ctrl().producer), 1u);
	const srnic_send_wqe &wqe = sq_wqe(0);
	EXPECT_EQ(wqe.wr_id, 42u);
	EXPECT_EQ(wqe.opcode, IBV_WR_RDMA_WRITE_WITH_IMM);
	EXPECT_EQ(wqe.flags, SRNIC_WQE_SIGNALED | SRNIC_WQE_SOLICITED | SRNIC_WQE_FENCE);
	EXPECT_EQ(wqe.num_sge, 2);
	EXPECT_EQ(wqe.imm_data, htobe32(0x1234));
	EXPECT_EQ(wqe.rdma.remote_addr, 0xabcd000u);
	EXPECT_EQ(wqe.rdma.rkey, 99u);
	const auto *wsge = reinterpret_cast<const srnic_sge *>(&wqe + 1);
	EXPECT_EQ(wsge[1].addr, 0x2000u);
	EXPECT_EQ(wsge[1].length, 20u);
	EXPECT_EQ(wsge[1].lkey, 8u);
}

TEST_F(QpPostTest, SignalAllMarksEveryWqe)
{
	qp_->sq_sig_all = true;
	ibv_send_wr wr = {};
	wr.opcode = IBV_WR_SEND;
	ibv_send_wr *bad = nullptr;
	ASSERT_EQ(post_send(ibqp(), &wr, &bad), 0);
	EXPECT_EQ(sq_wqe(0).flags, SRNIC_WQE_SIGNALED);
}

TEST_F(QpPostTest, InlineCopiesPayload)
{
	char a[5] = "abcd", b[4] = "xyz";
	ibv_sge sge[2] = {{reinterpret_cast<uintptr_t>(a), 4, 0},
			  {reinterpret_cast<uintptr_t>(b), 3, 0}};
	ibv_send_wr wr = {};
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_INLINE;
	wr.sg_list = sge;
	wr.num_sge = 2;
	ibv_send_wr *bad = nullptr;
	ASSERT_EQ(post_send(ibqp(), &wr, &bad), 0);
	const srnic_send_wqe &wqe = sq_wqe(0);
	EXPECT_EQ(wqe.flags, SRNIC_WQE_INLINE);
	EXPECT_EQ(wqe.inline_len, 7u);
	EXPECT_EQ(wqe.num_sge, 0);
	EXPECT_EQ(std::memcmp(&wqe + 1, "abcdxyz", 7), 0);
}

TEST_F(QpPostTest, SendChecks)
{
	ibv_sge sge[5] = {};
	ibv_send_wr wr = {};
	wr.opcode = IBV_WR_SEND;
	wr.sg_list = sge;
	ibv_send_wr *bad = nullptr;

	for (ibv_qp_state s : {IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR}) {
		qp_->state = s;
		EXPECT_EQ(post_send(ibqp(), &wr, &bad), EINVAL);
		EXPECT_EQ(bad, &wr);
	}
	qp_->state = IBV_QPS_RTS;

	wr.num_sge = 5; // one too many
	bad = nullptr;
	EXPECT_EQ(post_send(ibqp(), &wr, &bad), EINVAL);
	EXPECT_EQ(bad, &wr);

	wr.num_sge = 1;
	sge[0].length = 65; // one byte more than max_inline
	wr.send_flags = IBV_SEND_INLINE;
	EXPECT_EQ(post_send(ibqp(), &wr, &bad), EINVAL);

	wr.send_flags = 0;
	wr.opcode = IBV_WR_TSO; // not implemented
	EXPECT_EQ(post_send(ibqp(), &wr, &bad), EINVAL);
	wr.opcode = IBV_WR_BIND_MW; // without a window
	EXPECT_EQ(post_send(ibqp(), &wr, &bad), EINVAL);
	ibv_mw mw1 = {};
	mw1.type = IBV_MW_TYPE_1; // bound by ibv_bind_mw() alone
	wr.bind_mw.mw = &mw1;
	EXPECT_EQ(post_send(ibqp(), &wr, &bad), EINVAL);
	const unsigned bogus = 200; // not an ibv_wr_opcode: set its bits
	std::memcpy(&wr.opcode, &bogus, sizeof(bogus));
	EXPECT_EQ(post_send(ibqp(), &wr, &bad), EINVAL);
	EXPECT_EQ(load_acquire(sq_mem_.ctrl().producer), 0u) << "nothing published";
}

TEST_F(QpPostTest, UdSendCarriesAhQpnAndQkey)
{
	qp_->type = IBV_QPT_UD;
	Ah ah{};
	ah.ah_num = 77;
	ibv_sge sge = {0x3000, 30, 9};
	ibv_send_wr wr = {};
	wr.wr_id = 5;
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.imm_data = htobe32(0xfeed);
	wr.wr.ud.ah = &ah.ibah;
	wr.wr.ud.remote_qpn = 0x123456;
	wr.wr.ud.remote_qkey = 0x80000000; // "the QP's own Q_Key": the kernel's call
	ibv_send_wr *bad = nullptr;

	ASSERT_EQ(post_send(ibqp(), &wr, &bad), 0);
	const srnic_send_wqe &wqe = sq_wqe(0);
	EXPECT_EQ(wqe.opcode, IBV_WR_SEND_WITH_IMM);
	EXPECT_EQ(wqe.imm_data, htobe32(0xfeed));
	EXPECT_EQ(wqe.ud.ah_handle, 77u);
	EXPECT_EQ(wqe.ud.remote_qpn, 0x123456u);
	EXPECT_EQ(wqe.ud.remote_qkey, 0x80000000u);
	EXPECT_EQ(wqe.num_sge, 1);

	// Inline data works for UD as for RC.
	char data[5] = "abcd";
	ibv_sge isge = {reinterpret_cast<uint64_t>(data), 4, 0};
	wr.opcode = IBV_WR_SEND;
	wr.sg_list = &isge;
	wr.send_flags = IBV_SEND_INLINE;
	ASSERT_EQ(post_send(ibqp(), &wr, &bad), 0);
	const srnic_send_wqe &iwqe = sq_wqe(1);
	EXPECT_EQ(iwqe.flags & SRNIC_WQE_INLINE, SRNIC_WQE_INLINE);
	EXPECT_EQ(iwqe.inline_len, 4u);
	EXPECT_EQ(iwqe.ud.ah_handle, 77u);
	EXPECT_EQ(std::memcmp(&iwqe + 1, "abcd", 4), 0);
	EXPECT_EQ(load_acquire(sq_mem_.ctrl().producer), 2u);
}

TEST_F(QpPostTest, UdSendChecks)
{
	qp_->type = IBV_QPT_UD;
	Ah ah{};
	ibv_sge sge = {0x3000, 30, 9};
	ibv_send_wr wr = {};
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.wr.ud.ah = &ah.ibah;
	ibv_send_wr *bad = nullptr;

	// Only SEND and SEND with immediate exist on UD.
	for (ibv_wr_opcode op : {IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_READ,
				 IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD,
				 IBV_WR_SEND_WITH_INV, IBV_WR_BIND_MW, IBV_WR_LOCAL_INV}) {
		wr.opcode = op;
		bad = nullptr;
		EXPECT_EQ(post_send(ibqp(), &wr, &bad), EINVAL) << op;
		EXPECT_EQ(bad, &wr);
	}
	// A UD send needs an AH.
	wr.opcode = IBV_WR_SEND;
	wr.wr.ud.ah = nullptr;
	EXPECT_EQ(post_send(ibqp(), &wr, &bad), EINVAL);
	EXPECT_EQ(load_acquire(sq_mem_.ctrl().producer), 0u) << "nothing published";
}

TEST_F(QpPostTest, UcSendChecks)
{
	qp_->type = IBV_QPT_UC;
	ibv_sge sge = {0x3000, 30, 9};
	ibv_send_wr wr = {};
	wr.sg_list = &sge;
	wr.num_sge = 1;
	ibv_send_wr *bad = nullptr;

	// UC has no READ and no atomics.
	for (ibv_wr_opcode op : {IBV_WR_RDMA_READ, IBV_WR_ATOMIC_CMP_AND_SWP,
				 IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_SEND_WITH_INV}) {
		wr.opcode = op;
		bad = nullptr;
		EXPECT_EQ(post_send(ibqp(), &wr, &bad), EINVAL) << op;
		EXPECT_EQ(bad, &wr);
	}
	EXPECT_EQ(load_acquire(sq_mem_.ctrl().producer), 0u) << "nothing published";

	// SEND, SEND with immediate, WRITE and WRITE with immediate are posted.
	uint32_t posted = 0;
	for (ibv_wr_opcode op : {IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE,
				 IBV_WR_RDMA_WRITE_WITH_IMM}) {
		wr.opcode = op;
		wr.wr.rdma.remote_addr = 0x7f0000001000;
		wr.wr.rdma.rkey = 0x4321;
		bad = nullptr;
		EXPECT_EQ(post_send(ibqp(), &wr, &bad), 0) << op;
		EXPECT_EQ(load_acquire(sq_mem_.ctrl().producer), ++posted);
	}
}

TEST_F(QpPostTest, AtomicsFillTheAtomicUnion)
{
	ibv_sge sge = {0x3000, 8, 11};
	ibv_send_wr wr[2] = {};
	wr[0].wr_id = 5;
	wr[0].opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	wr[0].send_flags = IBV_SEND_SIGNALED | IBV_SEND_FENCE;
	wr[0].sg_list = &sge;
	wr[0].num_sge = 1;
	wr[0].wr.atomic.remote_addr = 0x7f0000001008;
	wr[0].wr.atomic.compare_add = 0x1111222233334444;
	wr[0].wr.atomic.swap = 0x5555666677778888;
	wr[0].wr.atomic.rkey = 0x1234;
	wr[0].next = &wr[1];
	wr[1] = wr[0];
	wr[1].wr_id = 6;
	wr[1].opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr[1].send_flags = IBV_SEND_INLINE; // ignored: the SGE is written to
	wr[1].wr.atomic.compare_add = 3;
	wr[1].wr.atomic.swap = 0;
	wr[1].next = nullptr;
	ibv_send_wr *bad = nullptr;

	ASSERT_EQ(post_send(ibqp(), wr, &bad), 0);
	EXPECT_EQ(load_acquire(sq_mem_.ctrl().producer), 2u);
	for (uint32_t i = 0; i < 2; i++) {
		const srnic_send_wqe &wqe = sq_wqe(i);
		EXPECT_EQ(wqe.wr_id, wr[i].wr_id);
		EXPECT_EQ(wqe.opcode, wr[i].opcode);
		EXPECT_EQ(wqe.atomic.remote_addr, 0x7f0000001008u);
		EXPECT_EQ(wqe.atomic.compare_add, wr[i].wr.atomic.compare_add);
		EXPECT_EQ(wqe.atomic.swap, wr[i].wr.atomic.swap);
		EXPECT_EQ(wqe.atomic.rkey, 0x1234u);
		EXPECT_EQ(wqe.num_sge, 1);
		EXPECT_EQ(wqe.inline_len, 0u);
		const auto *wsge = reinterpret_cast<const srnic_sge *>(&wqe + 1);
		EXPECT_EQ(wsge[0].addr, 0x3000u);
		EXPECT_EQ(wsge[0].length, 8u);
		EXPECT_EQ(wsge[0].lkey, 11u);
	}
	EXPECT_EQ(sq_wqe(0).flags, SRNIC_WQE_SIGNALED | SRNIC_WQE_FENCE);
	EXPECT_EQ(sq_wqe(1).flags, 0) << "no inline flag on an atomic";
}

TEST_F(QpPostTest, AtomicNeedsOneEightByteSge)
{
	ibv_sge sge[2] = {{0x3000, 8, 11}, {0x4000, 8, 11}};
	ibv_send_wr wr = {};
	wr.sg_list = sge;
	wr.wr.atomic.remote_addr = 0x7f0000001000;
	ibv_send_wr *bad = nullptr;

	for (ibv_wr_opcode op : {IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD}) {
		wr.opcode = op;
		wr.num_sge = 0;
		EXPECT_EQ(post_send(ibqp(), &wr, &bad), EINVAL);
		wr.num_sge = 2; // 16 bytes over two SGEs
		EXPECT_EQ(post_send(ibqp(), &wr, &bad), EINVAL);
		wr.num_sge = 1;
		for (uint32_t len : {0u, 4u, 7u, 9u, 16u}) {
			sge[0].length = len;
			bad = nullptr;
			EXPECT_EQ(post_send(ibqp(), &wr, &bad), EINVAL) << len;
			EXPECT_EQ(bad, &wr);
		}
		sge[0].length = 8;
	}
	EXPECT_EQ(load_acquire(sq_mem_.ctrl().producer), 0u) << "nothing published";

	// A misaligned remote address is posted: the responder refuses it.
	wr.wr.atomic.remote_addr = 0x7f0000001001;
	EXPECT_EQ(post_send(ibqp(), &wr, &bad), 0);
	EXPECT_EQ(sq_wqe(0).atomic.remote_addr, 0x7f0000001001u);
}

TEST_F(QpPostTest, ChainStopsAtFullRingWithBadWr)
{
	ibv_send_wr wrs[kSqEntries + 2] = {};
	for (size_t i = 0; i < std::size(wrs); ++i) {
		wrs[i].wr_id = i;
		wrs[i].opcode = IBV_WR_SEND;
		wrs[i].next = i + 1 < std::size(wrs) ? &wrs[i + 1] : nullptr;
	}
	ibv_send_wr *bad = nullptr;
	EXPECT_EQ(post_send(ibqp(), wrs, &bad), ENOMEM);
	EXPECT_EQ(bad, &wrs[kSqEntries]);
	// The ones before bad_wr are posted and published.
	EXPECT_EQ(load_acquire(sq_mem_.ctrl().producer), kSqEntries);
	EXPECT_EQ(sq_wqe(kSqEntries - 1).wr_id, kSqEntries - 1);

	// The kernel hands two slots back: two more fit.
	store_release(sq_mem_.ctrl().consumer, 2);
	wrs[kSqEntries + 1].next = &wrs[0];
	wrs[0].next = nullptr;
	bad = nullptr;
	EXPECT_EQ(post_send(ibqp(), &wrs[kSqEntries], &bad), ENOMEM);
	EXPECT_EQ(bad, &wrs[0]);
	EXPECT_EQ(load_acquire(sq_mem_.ctrl().producer), kSqEntries + 2);
}

TEST_F(QpPostTest, RecvWritesWqeAndChecks)
{
	ibv_sge sge[4] = {{0x1000, 10, 7}, {0x2000, 20, 8}, {0x3000, 30, 9}, {}};
	ibv_recv_wr wr = {};
	wr.wr_id = 5;
	wr.sg_list = sge;
	wr.num_sge = 3;
	ibv_recv_wr *bad = nullptr;
	ASSERT_EQ(post_recv(ibqp(), &wr, &bad), 0);
	const auto *wqe = reinterpret_cast<const srnic_recv_wqe *>(rq_mem_.view().entry(0));
	EXPECT_EQ(wqe->wr_id, 5u);
	EXPECT_EQ(wqe->num_sge, 3);
	EXPECT_EQ(reinterpret_cast<const srnic_sge *>(wqe + 1)[2].lkey, 9u);

	wr.num_sge = 4;
	EXPECT_EQ(post_recv(ibqp(), &wr, &bad), EINVAL);
	EXPECT_EQ(bad, &wr);

	qp_->state = IBV_QPS_RESET;
	wr.num_sge = 1;
	EXPECT_EQ(post_recv(ibqp(), &wr, &bad), EINVAL);
	qp_->state = IBV_QPS_INIT; // receives may be posted from INIT on
	EXPECT_EQ(post_recv(ibqp(), &wr, &bad), 0);
}

TEST(QpCapsTest, CapsMustFitRings)
{
	srnic_queue_desc sq = {.mmap_offset = 0, .mmap_size = 0, .num_entries = 8,
			       .entry_size = 128, .ring_offset = 0, .flags = 0, .reserved = 0};
	srnic_queue_desc rq = {.mmap_offset = 0, .mmap_size = 0, .num_entries = 8,
			       .entry_size = 64, .ring_offset = 0, .flags = 0, .reserved = 0};
	ibv_qp_cap cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 4,
			  .max_recv_sge = 3, .max_inline_data = 64};
	EXPECT_TRUE(qp_caps_fit_rings(cap, sq, rq));
	cap.max_send_sge = 5;
	EXPECT_FALSE(qp_caps_fit_rings(cap, sq, rq));
	cap.max_send_sge = 4;
	cap.max_inline_data = 65;
	EXPECT_FALSE(qp_caps_fit_rings(cap, sq, rq));
	cap.max_inline_data = 64;
	cap.max_recv_wr = 9;
	EXPECT_FALSE(qp_caps_fit_rings(cap, sq, rq));
}

TEST(CqPollTest, PollFillsWcAndReleasesConsumer)
{
	FakeRingMemory mem{4, sizeof(srnic_cqe)};
	ASSERT_TRUE(mem.valid());
	auto cq = std::make_unique<Cq>();
	cq->reader.emplace(mem.view());
	FakeKernelCq kernel(mem.view());
	ASSERT_TRUE(kernel.complete(11, 100));
	ASSERT_TRUE(kernel.complete(12, 200));

	ibv_wc wc[4] = {};
	EXPECT_EQ(poll_cq(&cq->vcq.cq, 4, wc), 2);
	EXPECT_EQ(wc[0].wr_id, 11u);
	EXPECT_EQ(wc[0].byte_len, 100u);
	EXPECT_EQ(wc[0].qp_num, 7u);
	EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
	EXPECT_EQ(wc[1].wr_id, 12u);
	EXPECT_EQ(load_acquire(mem.ctrl().consumer), 2u);
	EXPECT_EQ(poll_cq(&cq->vcq.cq, 4, wc), 0);
}

TEST(CqPollTest, ArmWritesNotifyAndBumpsSequence)
{
	FakeRingMemory mem{4, sizeof(srnic_cqe)};
	ASSERT_TRUE(mem.valid());
	auto cq = std::make_unique<Cq>();
	cq->reader.emplace(mem.view());
	EXPECT_EQ(req_notify_cq(&cq->vcq.cq, 0), 0);
	EXPECT_EQ(mem.ctrl().notify, SRNIC_CQ_NOTIFY_NEXT);
	EXPECT_EQ(mem.ctrl().notify_seq, 1u);
	EXPECT_EQ(req_notify_cq(&cq->vcq.cq, 1), 0);
	EXPECT_EQ(mem.ctrl().notify, SRNIC_CQ_NOTIFY_SOLICITED);
	EXPECT_EQ(mem.ctrl().notify_seq, 2u);
}

} // namespace
} // namespace srnic::test
