// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The extended post API (qp_ex.cpp) over fake rings: which builders a QP type
// gets, WQEs byte-for-byte equal to what post_send writes for the same work
// requests, batches published only by wr_complete, wr_abort and every error
// discarding the whole batch. No doorbell is rung: the fake rings never set
// NEED_WAKEUP.
#include "fake_ring.h"
#include "qp.h"
#include "qp_ex.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace srnic::test
{
namespace
{

constexpr uint32_t kSqEntries = 8;
constexpr uint32_t kSqEntrySize = 128; // 64-byte header + 4 SGEs / 64 inline

constexpr uint64_t kRcOps = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
			    IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
			    IBV_QP_EX_WITH_RDMA_READ;
constexpr uint64_t kUdOps = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
constexpr uint64_t kAtomicOps = IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
				IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_ATOMIC_WRITE;
constexpr uint64_t kMwOps =
	IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV;
// FLUSH (RC and XRC) where libibverbs has it (rdma-core 45 on).
#if SRNIC_RDMA_CORE_MAJOR >= 45
constexpr uint64_t kFlushOps = IBV_QP_EX_WITH_FLUSH;
#else
constexpr uint64_t kFlushOps = 0;
#endif

// A QP with its SQ on fake ring memory, ready to send.
struct FakeQp {
	explicit FakeQp(ibv_qp_type type)
	{
		EXPECT_TRUE(mem.valid());
		qp = std::make_unique<Qp>();
		qp->sq.emplace(mem.view());
		qp->sq_max_sge = 4;
		qp->max_inline = 64;
		qp->state = IBV_QPS_RTS;
		qp->type = type;
	}

	[[nodiscard]] const std::byte *slot(uint32_t i) const { return mem.view().entry(i); }
	[[nodiscard]] const srnic_send_wqe &wqe(uint32_t i) const
	{
		return *reinterpret_cast<const srnic_send_wqe *>(slot(i));
	}
	[[nodiscard]] uint32_t published() const { return load_acquire(mem.ctrl().producer); }

	FakeRingMemory mem{kSqEntries, kSqEntrySize};
	std::unique_ptr<Qp> qp;
};

class QpExTest : public ::testing::Test
{
    protected:
	void make(ibv_qp_type type, uint64_t ops)
	{
		ex_ = std::make_unique<FakeQp>(type);
		ref_ = std::make_unique<FakeQp>(type);
		install_send_ops(*ex_->qp, ops);
		qpx_ = ibv_qp_to_qp_ex(&ex_->qp->vqp.qp);
		ASSERT_NE(qpx_, nullptr);
	}

	// Posts wr through post_send on the reference QP.
	void post_reference(ibv_send_wr &wr)
	{
		ibv_send_wr *bad = nullptr;
		ASSERT_EQ(post_send(&ref_->qp->vqp.qp, &wr, &bad), 0);
	}

	// Slot i of both QPs holds the same WQE: header and `payload` bytes.
	void expect_same_wqe(uint32_t i, size_t payload)
	{
		EXPECT_EQ(std::memcmp(ex_->slot(i), ref_->slot(i), sizeof(srnic_send_wqe) + payload),
			  0)
			<< "WQE " << i;
	}

	std::unique_ptr<FakeQp> ex_, ref_;
	ibv_qp_ex *qpx_ = nullptr;
};

TEST(QpExSupport, FlagsFollowTheOpcodeTables)
{
	EXPECT_EQ(supported_send_ops_flags(IBV_QPT_RC), kRcOps | kAtomicOps | kMwOps | kFlushOps);
	EXPECT_EQ(supported_send_ops_flags(IBV_QPT_UD), kUdOps);
	EXPECT_EQ(supported_send_ops_flags(IBV_QPT_UC), 0u);
	EXPECT_EQ(supported_send_ops_flags(IBV_QPT_XRC_SEND), kRcOps | kAtomicOps | kFlushOps);
	EXPECT_EQ(supported_send_ops_flags(IBV_QPT_XRC_RECV), 0u);
	// What srnic has no builder for is never offered.
	EXPECT_EQ(supported_send_ops_flags(IBV_QPT_RC) & IBV_QP_EX_WITH_TSO, 0u);
}

TEST(QpExSupport, InstallsOnlyWhatWasAskedFor)
{
	FakeQp f(IBV_QPT_RC);
	EXPECT_EQ(ibv_qp_to_qp_ex(&f.qp->vqp.qp), nullptr) << "no qp_ex before install";
	install_send_ops(*f.qp, IBV_QP_EX_WITH_RDMA_WRITE);
	ibv_qp_ex *qpx = ibv_qp_to_qp_ex(&f.qp->vqp.qp);
	ASSERT_EQ(qpx, &f.qp->vqp.qp_ex);
	EXPECT_NE(qpx->wr_rdma_write, nullptr);
	EXPECT_EQ(qpx->wr_send, nullptr);
	EXPECT_EQ(qpx->wr_rdma_read, nullptr);
	EXPECT_EQ(qpx->wr_atomic_cmp_swp, nullptr);
	EXPECT_EQ(qpx->wr_bind_mw, nullptr);
	EXPECT_EQ(qpx->wr_set_xrc_srqn, nullptr);
	for (auto *fn : {reinterpret_cast<void *>(qpx->wr_start),
			 reinterpret_cast<void *>(qpx->wr_complete),
			 reinterpret_cast<void *>(qpx->wr_abort),
			 reinterpret_cast<void *>(qpx->wr_set_sge),
			 reinterpret_cast<void *>(qpx->wr_set_sge_list),
			 reinterpret_cast<void *>(qpx->wr_set_inline_data),
			 reinterpret_cast<void *>(qpx->wr_set_inline_data_list),
			 reinterpret_cast<void *>(qpx->wr_set_ud_addr)})
		EXPECT_NE(fn, nullptr);
}

TEST_F(QpExTest, RcBuildersWriteWhatPostSendWrites)
{
	make(IBV_QPT_RC, kRcOps);
	ibv_sge sges[3] = {{0x1000, 10, 7}, {0x2000, 20, 8}, {0x3000, 30, 9}};
	char a[] = "inline", b[] = "-list";
	ibv_data_buf bufs[2] = {{a, 6}, {b, 5}};
	ibv_sge inline_sges[2] = {{reinterpret_cast<uintptr_t>(a), 6, 0},
				  {reinterpret_cast<uintptr_t>(b), 5, 0}};

	ibv_wr_start(qpx_);
	qpx_->wr_id = 1;
	qpx_->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qpx_);
	ibv_wr_set_sge(qpx_, 7, 0x1000, 10);
	qpx_->wr_id = 2;
	qpx_->wr_flags = IBV_SEND_SOLICITED;
	ibv_wr_send_imm(qpx_, htobe32(0xabcd));
	ibv_wr_set_inline_data_list(qpx_, 2, bufs);
	qpx_->wr_id = 3;
	qpx_->wr_flags = IBV_SEND_FENCE | IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(qpx_, 99, 0xdead000);
	ibv_wr_set_sge_list(qpx_, 3, sges);
	qpx_->wr_id = 4;
	qpx_->wr_flags = 0;
	ibv_wr_rdma_write_imm(qpx_, 98, 0xbeef000, htobe32(0x1234));
	ibv_wr_set_inline_data(qpx_, a, 6);
	qpx_->wr_id = 5;
	ibv_wr_rdma_read(qpx_, 97, 0xf00d000);
	ibv_wr_set_sge_list(qpx_, 2, sges);
	EXPECT_EQ(ex_->published(), 0u) << "nothing visible before wr_complete";
	ASSERT_EQ(ibv_wr_complete(qpx_), 0);
	EXPECT_EQ(ex_->published(), 5u);

	ibv_send_wr wr = {};
	wr.wr_id = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.opcode = IBV_WR_SEND;
	wr.sg_list = sges;
	wr.num_sge = 1;
	post_reference(wr);
	wr = {};
	wr.wr_id = 2;
	wr.send_flags = IBV_SEND_SOLICITED | IBV_SEND_INLINE;
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	wr.imm_data = htobe32(0xabcd);
	wr.sg_list = inline_sges;
	wr.num_sge = 2;
	post_reference(wr);
	wr = {};
	wr.wr_id = 3;
	wr.send_flags = IBV_SEND_FENCE | IBV_SEND_SIGNALED;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.wr.rdma = {0xdead000, 99};
	wr.sg_list = sges;
	wr.num_sge = 3;
	post_reference(wr);
	wr = {};
	wr.wr_id = 4;
	wr.send_flags = IBV_SEND_INLINE;
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.imm_data = htobe32(0x1234);
	wr.wr.rdma = {0xbeef000, 98};
	wr.sg_list = inline_sges;
	wr.num_sge = 1;
	post_reference(wr);
	wr = {};
	wr.wr_id = 5;
	wr.opcode = IBV_WR_RDMA_READ;
	wr.wr.rdma = {0xf00d000, 97};
	wr.sg_list = sges;
	wr.num_sge = 2;
	post_reference(wr);

	expect_same_wqe(0, sizeof(srnic_sge));
	expect_same_wqe(1, 11);
	expect_same_wqe(2, 3 * sizeof(srnic_sge));
	expect_same_wqe(3, 6);
	expect_same_wqe(4, 2 * sizeof(srnic_sge));
	// And what they hold, in case both paths went wrong the same way.
	EXPECT_EQ(ex_->wqe(1).opcode, IBV_WR_SEND_WITH_IMM);
	EXPECT_EQ(ex_->wqe(1).flags, SRNIC_WQE_SOLICITED | SRNIC_WQE_INLINE);
	EXPECT_EQ(ex_->wqe(1).inline_len, 11u);
	EXPECT_EQ(std::memcmp(&ex_->wqe(1) + 1, "inline-list", 11), 0);
	EXPECT_EQ(ex_->wqe(2).rdma.rkey, 99u);
	EXPECT_EQ(ex_->wqe(2).num_sge, 3);
	EXPECT_EQ(ex_->wqe(4).opcode, IBV_WR_RDMA_READ);
	EXPECT_EQ(ex_->wqe(4).rdma.remote_addr, 0xf00d000u);
}

TEST_F(QpExTest, XrcSrqnGoesIntoTheWqeAsPostSendPutsIt)
{
	make(IBV_QPT_XRC_SEND, kRcOps);
	ASSERT_NE(qpx_->wr_set_xrc_srqn, nullptr);
	ibv_sge sge = {0x1000, 10, 7};
	ibv_wr_start(qpx_);
	qpx_->wr_id = 5;
	qpx_->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qpx_);
	ibv_wr_set_xrc_srqn(qpx_, 0x1234);
	ibv_wr_set_sge(qpx_, sge.lkey, sge.addr, sge.length);
	ASSERT_EQ(ibv_wr_complete(qpx_), 0);
	EXPECT_EQ(ex_->wqe(0).xrc_remote_srqn, 0x1234u);

	ibv_send_wr wr = {};
	wr.wr_id = 5;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.qp_type.xrc.remote_srqn = 0x1234;
	post_reference(wr);
	expect_same_wqe(0, sizeof(srnic_sge));
}

TEST_F(QpExTest, XrcSrqnOnlyOnXrcSend)
{
	make(IBV_QPT_RC, kRcOps);
	EXPECT_EQ(qpx_->wr_set_xrc_srqn, nullptr);
}

TEST_F(QpExTest, SignalAllAndLaterSetterWins)
{
	make(IBV_QPT_RC, kRcOps);
	ex_->qp->sq_sig_all = true;
	char data[] = "abc";
	ibv_wr_start(qpx_);
	qpx_->wr_flags = 0;
	ibv_wr_send(qpx_);
	ibv_wr_set_inline_data(qpx_, data, 3);
	ibv_wr_set_sge(qpx_, 5, 0x4000, 40); // replaces the inline payload
	ASSERT_EQ(ibv_wr_complete(qpx_), 0);
	const srnic_send_wqe &wqe = ex_->wqe(0);
	EXPECT_EQ(wqe.flags, SRNIC_WQE_SIGNALED);
	EXPECT_EQ(wqe.inline_len, 0u);
	ASSERT_EQ(wqe.num_sge, 1);
	const auto *sge = reinterpret_cast<const srnic_sge *>(&wqe + 1);
	EXPECT_EQ(sge->addr, 0x4000u);
	EXPECT_EQ(sge->length, 40u);
	EXPECT_EQ(sge->lkey, 5u);
}

TEST_F(QpExTest, UdSendsCarryTheirAddress)
{
	make(IBV_QPT_UD, kUdOps);
	Ah ah{};
	ah.ah_num = 77;
	ibv_sge sge = {0x3000, 30, 9};

	ibv_wr_start(qpx_);
	qpx_->wr_id = 5;
	qpx_->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_imm(qpx_, htobe32(0xfeed));
	ibv_wr_set_ud_addr(qpx_, &ah.ibah, 0x123456, 0x11111111);
	ibv_wr_set_sge(qpx_, 9, 0x3000, 30);
	ASSERT_EQ(ibv_wr_complete(qpx_), 0);

	ibv_send_wr wr = {};
	wr.wr_id = 5;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	wr.imm_data = htobe32(0xfeed);
	wr.wr.ud = {&ah.ibah, 0x123456, 0x11111111};
	wr.sg_list = &sge;
	wr.num_sge = 1;
	post_reference(wr);
	expect_same_wqe(0, sizeof(srnic_sge));
	EXPECT_EQ(ex_->wqe(0).ud.ah_handle, 77u);
	EXPECT_EQ(ex_->wqe(0).ud.remote_qpn, 0x123456u);
}

TEST_F(QpExTest, UdSendWithoutAddressFailsTheBatch)
{
	make(IBV_QPT_UD, kUdOps);
	Ah ah{};
	// The last WQE lacks its address.
	ibv_wr_start(qpx_);
	ibv_wr_send(qpx_);
	ibv_wr_set_ud_addr(qpx_, &ah.ibah, 1, 2);
	ibv_wr_send(qpx_);
	EXPECT_EQ(ibv_wr_complete(qpx_), EINVAL);
	EXPECT_EQ(ex_->published(), 0u);
	// A WQE that lacks it is followed by another one.
	ibv_wr_start(qpx_);
	ibv_wr_send(qpx_);
	ibv_wr_send(qpx_);
	ibv_wr_set_ud_addr(qpx_, &ah.ibah, 1, 2);
	EXPECT_EQ(ibv_wr_complete(qpx_), EINVAL);
	// No AH at all.
	ibv_wr_start(qpx_);
	ibv_wr_send(qpx_);
	ibv_wr_set_ud_addr(qpx_, nullptr, 1, 2);
	EXPECT_EQ(ibv_wr_complete(qpx_), EINVAL);
	EXPECT_EQ(ex_->published(), 0u);
	// The QP still works, from slot 0.
	ibv_wr_start(qpx_);
	qpx_->wr_id = 9;
	ibv_wr_send(qpx_);
	ibv_wr_set_ud_addr(qpx_, &ah.ibah, 1, 2);
	ASSERT_EQ(ibv_wr_complete(qpx_), 0);
	EXPECT_EQ(ex_->published(), 1u);
	EXPECT_EQ(ex_->wqe(0).wr_id, 9u);
}

TEST_F(QpExTest, UdAddressOnRcIsAnError)
{
	make(IBV_QPT_RC, kRcOps);
	Ah ah{};
	ibv_wr_start(qpx_);
	ibv_wr_send(qpx_);
	ibv_wr_set_ud_addr(qpx_, &ah.ibah, 1, 2);
	EXPECT_EQ(ibv_wr_complete(qpx_), EINVAL);
	EXPECT_EQ(ex_->published(), 0u);
}

TEST_F(QpExTest, AbortDiscardsTheBatch)
{
	make(IBV_QPT_RC, kRcOps);
	ibv_wr_start(qpx_);
	qpx_->wr_id = 1;
	ibv_wr_send(qpx_);
	ibv_wr_set_sge(qpx_, 1, 0x1000, 1);
	ibv_wr_send(qpx_);
	ibv_wr_abort(qpx_);
	EXPECT_EQ(ex_->published(), 0u);
	EXPECT_EQ(ex_->qp->sq->unpublished(), 0u);

	// The next batch starts where the aborted one did, and the lock was
	// released (or this would spin forever).
	ibv_wr_start(qpx_);
	qpx_->wr_id = 2;
	ibv_wr_rdma_write(qpx_, 1, 2);
	ASSERT_EQ(ibv_wr_complete(qpx_), 0);
	EXPECT_EQ(ex_->published(), 1u);
	EXPECT_EQ(ex_->wqe(0).wr_id, 2u);
	EXPECT_EQ(ex_->wqe(0).opcode, IBV_WR_RDMA_WRITE);
}

TEST_F(QpExTest, ErrorsDiscardTheBatch)
{
	make(IBV_QPT_RC, kRcOps);
	ibv_sge sges[5] = {};
	char big[65] = {};
	ibv_data_buf halves[2] = {{big, 32}, {big, 33}};

	struct Case {
		const char *what;
		void (*build)(ibv_qp_ex *, ibv_sge *, char *, ibv_data_buf *);
	};
	const Case cases[] = {
		{"setter before any builder",
		 [](ibv_qp_ex *q, ibv_sge *, char *, ibv_data_buf *) {
			 ibv_wr_set_sge(q, 1, 2, 3);
			 ibv_wr_send(q);
		 }},
		{"five SGEs where four fit, after a good WQE",
		 [](ibv_qp_ex *q, ibv_sge *s, char *, ibv_data_buf *) {
			 ibv_wr_send(q);
			 ibv_wr_send(q);
			 ibv_wr_set_sge_list(q, 5, s);
		 }},
		{"65 bytes inline where 64 fit",
		 [](ibv_qp_ex *q, ibv_sge *, char *b, ibv_data_buf *) {
			 ibv_wr_send(q);
			 ibv_wr_set_inline_data(q, b, 65);
		 }},
		{"65 bytes inline in two buffers",
		 [](ibv_qp_ex *q, ibv_sge *, char *, ibv_data_buf *h) {
			 ibv_wr_rdma_write(q, 1, 2);
			 ibv_wr_set_inline_data_list(q, 2, h);
		 }},
		{"inline data for an RDMA READ",
		 [](ibv_qp_ex *q, ibv_sge *, char *b, ibv_data_buf *) {
			 ibv_wr_rdma_read(q, 1, 2);
			 ibv_wr_set_inline_data(q, b, 1);
		 }},
		{"a good WQE after a bad one",
		 [](ibv_qp_ex *q, ibv_sge *s, char *, ibv_data_buf *) {
			 ibv_wr_send(q);
			 ibv_wr_set_sge_list(q, 5, s);
			 ibv_wr_send(q);
			 ibv_wr_set_sge(q, 1, 2, 3);
		 }},
	};
	for (const Case &c : cases) {
		ibv_wr_start(qpx_);
		c.build(qpx_, sges, big, halves);
		EXPECT_EQ(ibv_wr_complete(qpx_), EINVAL) << c.what;
		EXPECT_EQ(ex_->published(), 0u) << c.what;
		EXPECT_EQ(ex_->qp->sq->unpublished(), 0u) << c.what;
	}
	// 64 bytes inline fit.
	ibv_wr_start(qpx_);
	ibv_wr_send(qpx_);
	ibv_wr_set_inline_data(qpx_, big, 64);
	EXPECT_EQ(ibv_wr_complete(qpx_), 0);
	EXPECT_EQ(ex_->published(), 1u);
}

TEST_F(QpExTest, FullRingIsEnomemAndPostsNothing)
{
	make(IBV_QPT_RC, kRcOps);
	ibv_wr_start(qpx_);
	for (uint32_t i = 0; i < kSqEntries + 1; ++i) {
		qpx_->wr_id = i;
		ibv_wr_send(qpx_);
	}
	EXPECT_EQ(ibv_wr_complete(qpx_), ENOMEM);
	EXPECT_EQ(ex_->published(), 0u);

	// Exactly a ring's worth fits.
	ibv_wr_start(qpx_);
	for (uint32_t i = 0; i < kSqEntries; ++i)
		ibv_wr_send(qpx_);
	EXPECT_EQ(ibv_wr_complete(qpx_), 0);
	EXPECT_EQ(ex_->published(), kSqEntries);
}

TEST_F(QpExTest, QpNotReadyToSendIsEinval)
{
	make(IBV_QPT_RC, kRcOps);
	for (ibv_qp_state s : {IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR}) {
		ex_->qp->state = s;
		ibv_wr_start(qpx_);
		ibv_wr_send(qpx_);
		EXPECT_EQ(ibv_wr_complete(qpx_), EINVAL) << s;
		EXPECT_EQ(ex_->published(), 0u);
	}
	// An empty batch publishes nothing and succeeds.
	ex_->qp->state = IBV_QPS_RTS;
	ibv_wr_start(qpx_);
	EXPECT_EQ(ibv_wr_complete(qpx_), 0);
	EXPECT_EQ(ex_->published(), 0u);
}

// RC QPs offer the atomic builders because the opcode table has the
// atomics (supported_send_ops_flags); they encode the atomic union the way
// the ABI header describes it.
TEST_F(QpExTest, AtomicBuildersEncodeTheAtomicUnion)
{
	EXPECT_EQ(supported_send_ops_flags(IBV_QPT_RC) & kAtomicOps, kAtomicOps);
	EXPECT_EQ(supported_send_ops_flags(IBV_QPT_UD) & kAtomicOps, 0u);
	make(IBV_QPT_RC, kAtomicOps);
	ibv_wr_start(qpx_);
	ibv_wr_atomic_cmp_swp(qpx_, 11, 0x8000, 1, 2);
	ibv_wr_set_sge(qpx_, 3, 0x9000, 8);
	ibv_wr_atomic_fetch_add(qpx_, 12, 0x8008, 5);
	ibv_wr_set_sge(qpx_, 3, 0x9008, 8);
	ASSERT_EQ(ibv_wr_complete(qpx_), 0);
	const srnic_send_wqe &cas = ex_->wqe(0);
	EXPECT_EQ(cas.opcode, IBV_WR_ATOMIC_CMP_AND_SWP);
	EXPECT_EQ(cas.atomic.remote_addr, 0x8000u);
	EXPECT_EQ(cas.atomic.rkey, 11u);
	EXPECT_EQ(cas.atomic.compare_add, 1u);
	EXPECT_EQ(cas.atomic.swap, 2u);
	EXPECT_EQ(cas.num_sge, 1);
	const srnic_send_wqe &fadd = ex_->wqe(1);
	EXPECT_EQ(fadd.opcode, IBV_WR_ATOMIC_FETCH_AND_ADD);
	EXPECT_EQ(fadd.atomic.remote_addr, 0x8008u);
	EXPECT_EQ(fadd.atomic.rkey, 12u);
	EXPECT_EQ(fadd.atomic.compare_add, 5u);
	EXPECT_EQ(fadd.atomic.swap, 0u);
}

// ATOMIC WRITE: the builder and post_send (the 8 bytes its one SGE points
// at) both carry the value inline, whatever max_inline; setters that would
// add a payload, a wrong SGE and a NULL value fail the batch.
TEST_F(QpExTest, AtomicWriteCarriesItsEightBytesInline)
{
	make(IBV_QPT_RC, kAtomicOps);
	ex_->qp->max_inline = 0;
	ref_->qp->max_inline = 0;
	const uint64_t value = 0x0123456789abcdefULL;
	ibv_wr_start(qpx_);
	qpx_->wr_id = 77;
	qpx_->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_write(qpx_, 13, 0x8010, &value);
	ASSERT_EQ(ibv_wr_complete(qpx_), 0);
	const srnic_send_wqe &w = ex_->wqe(0);
	EXPECT_EQ(w.opcode, IBV_WR_ATOMIC_WRITE);
	EXPECT_EQ(w.rdma.remote_addr, 0x8010u);
	EXPECT_EQ(w.rdma.rkey, 13u);
	EXPECT_TRUE(w.flags & SRNIC_WQE_INLINE);
	EXPECT_EQ(w.inline_len, 8u);
	EXPECT_EQ(w.num_sge, 0);
	EXPECT_EQ(std::memcmp(ex_->slot(0) + sizeof(srnic_send_wqe), &value, 8), 0);

	ibv_sge sge = {reinterpret_cast<uintptr_t>(&value), 8, 5};
	ibv_send_wr wr{};
	wr.wr_id = 77;
	wr.opcode = IBV_WR_ATOMIC_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.wr.rdma.remote_addr = 0x8010;
	wr.wr.rdma.rkey = 13;
	post_reference(wr);
	expect_same_wqe(0, 8);

	ibv_send_wr *bad = nullptr;
	sge.length = 4;
	EXPECT_EQ(post_send(&ref_->qp->vqp.qp, &wr, &bad), EINVAL);
	sge.length = 8;
	wr.num_sge = 0;
	EXPECT_EQ(post_send(&ref_->qp->vqp.qp, &wr, &bad), EINVAL);

	for (int setter = 0; setter < 3; ++setter) {
		ibv_wr_start(qpx_);
		ibv_wr_atomic_write(qpx_, 13, 0x8010, &value);
		if (setter == 0)
			ibv_wr_set_sge(qpx_, 5, 0x9000, 8);
		else if (setter == 1)
			ibv_wr_set_inline_data(qpx_, const_cast<uint64_t *>(&value), 8);
		else
			ibv_wr_atomic_write(qpx_, 13, 0x8010, nullptr);
		EXPECT_EQ(ibv_wr_complete(qpx_), EINVAL) << setter;
	}
	// Neither UC nor UD has it.
	EXPECT_EQ(supported_send_ops_flags(IBV_QPT_UD) & IBV_QP_EX_WITH_ATOMIC_WRITE, 0u);
	EXPECT_EQ(supported_send_ops_flags(IBV_QPT_UC) & IBV_QP_EX_WITH_ATOMIC_WRITE, 0u);
	EXPECT_FALSE(send_opcode_supported(IBV_QPT_UC, IBV_WR_ATOMIC_WRITE));
	EXPECT_TRUE(send_opcode_supported(IBV_QPT_XRC_SEND, IBV_WR_ATOMIC_WRITE));
}

#if SRNIC_RDMA_CORE_MAJOR >= 45
// ibv_wr_flush writes the range, key, type and level and no SGE; a bad type
// or level, or a payload setter, fails the batch; RC and XRC have it, UD not.
TEST_F(QpExTest, FlushCarriesRangeTypeAndLevel)
{
	make(IBV_QPT_RC, IBV_QP_EX_WITH_FLUSH);
	ibv_wr_start(qpx_);
	qpx_->wr_id = 78;
	qpx_->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_flush(qpx_, 13, 0x8010, 4096, IBV_FLUSH_GLOBAL, IBV_FLUSH_MR);
	ASSERT_EQ(ibv_wr_complete(qpx_), 0);
	const srnic_send_wqe &w = ex_->wqe(0);
	EXPECT_EQ(w.opcode, IBV_WR_FLUSH);
	EXPECT_EQ(w.wr_id, 78u);
	EXPECT_EQ(w.flush.remote_addr, 0x8010u);
	EXPECT_EQ(w.flush.rkey, 13u);
	EXPECT_EQ(w.flush.length, 4096u);
	EXPECT_EQ(w.flush.type, IBV_FLUSH_GLOBAL);
	EXPECT_EQ(w.flush.level, IBV_FLUSH_MR);
	EXPECT_EQ(w.num_sge, 0);
	for (int bad = 0; bad < 4; ++bad) {
		ibv_wr_start(qpx_);
		if (bad == 0)
			ibv_wr_flush(qpx_, 13, 0x8010, 8, 0, IBV_FLUSH_RANGE);
		else if (bad == 1)
			ibv_wr_flush(qpx_, 13, 0x8010, 8, 4, IBV_FLUSH_RANGE);
		else if (bad == 2)
			ibv_wr_flush(qpx_, 13, 0x8010, 8, IBV_FLUSH_GLOBAL, 2);
		else {
			ibv_wr_flush(qpx_, 13, 0x8010, 8, IBV_FLUSH_GLOBAL, IBV_FLUSH_RANGE);
			ibv_wr_set_sge(qpx_, 5, 0x9000, 8);
		}
		EXPECT_EQ(ibv_wr_complete(qpx_), EINVAL) << bad;
	}
	EXPECT_EQ(supported_send_ops_flags(IBV_QPT_UD) & IBV_QP_EX_WITH_FLUSH, 0u);
	EXPECT_NE(supported_send_ops_flags(IBV_QPT_RC) & IBV_QP_EX_WITH_FLUSH, 0u);
	EXPECT_NE(supported_send_ops_flags(IBV_QPT_XRC_SEND) & IBV_QP_EX_WITH_FLUSH, 0u);
	// An ibv_send_wr cannot say its type and level.
	EXPECT_FALSE(send_opcode_supported(IBV_QPT_RC, IBV_WR_FLUSH));
}
#endif

// The memory window builders write what post_send writes; a type 1 window
// (bound by ibv_bind_mw() alone) and payload on a bind fail the batch.
TEST_F(QpExTest, WindowBuildersWriteWhatPostSendWrites)
{
	make(IBV_QPT_RC, kMwOps | IBV_QP_EX_WITH_SEND);
	ibv_mr mr = {};
	mr.lkey = 0x1234;
	ibv_mw mw2 = {};
	mw2.type = IBV_MW_TYPE_2;
	mw2.rkey = 0x200107;
	const ibv_mw_bind_info info = {.mr = &mr,
				       .addr = 0x5000,
				       .length = 300,
				       .mw_access_flags = IBV_ACCESS_REMOTE_WRITE};
	ibv_wr_start(qpx_);
	qpx_->wr_id = 1;
	qpx_->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(qpx_, &mw2, 0x200108, &info);
	qpx_->wr_id = 2;
	ibv_wr_local_inv(qpx_, 0x200108);
	qpx_->wr_id = 3;
	ibv_wr_send_inv(qpx_, 0x300009);
	ibv_wr_set_sge(qpx_, 3, 0x9000, 40);
	ASSERT_EQ(ibv_wr_complete(qpx_), 0);
	EXPECT_EQ(ex_->published(), 3u);

	const srnic_send_wqe &bind = ex_->wqe(0);
	EXPECT_EQ(bind.opcode, IBV_WR_BIND_MW);
	EXPECT_EQ(bind.bind.addr, 0x5000u);
	EXPECT_EQ(bind.bind.length, 300u);
	EXPECT_EQ(bind.bind.mr_lkey, 0x1234u);
	EXPECT_EQ(bind.bind.mw_rkey, 0x200107u);
	EXPECT_EQ(bind.bind.new_rkey, 0x200108u);
	EXPECT_EQ(bind.bind.access, unsigned{IBV_ACCESS_REMOTE_WRITE});
	EXPECT_EQ(bind.num_sge, 0);
	EXPECT_EQ(ex_->wqe(1).opcode, IBV_WR_LOCAL_INV);
	EXPECT_EQ(ex_->wqe(1).invalidate_rkey, 0x200108u);
	EXPECT_EQ(ex_->wqe(2).opcode, IBV_WR_SEND_WITH_INV);
	EXPECT_EQ(ex_->wqe(2).invalidate_rkey, 0x300009u);
	EXPECT_EQ(ex_->wqe(2).num_sge, 1);

	ibv_send_wr wr = {};
	wr.wr_id = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.opcode = IBV_WR_BIND_MW;
	wr.bind_mw.mw = &mw2;
	wr.bind_mw.rkey = 0x200108;
	wr.bind_mw.bind_info = info;
	post_reference(wr);
	wr = {};
	wr.wr_id = 2;
	wr.send_flags = IBV_SEND_SIGNALED; // wr_flags stay for the batch
	wr.opcode = IBV_WR_LOCAL_INV;
	wr.invalidate_rkey = 0x200108;
	post_reference(wr);
	ibv_sge sge = {.addr = 0x9000, .length = 40, .lkey = 3};
	wr = {};
	wr.wr_id = 3;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.opcode = IBV_WR_SEND_WITH_INV;
	wr.invalidate_rkey = 0x300009;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	post_reference(wr);
	for (uint32_t i = 0; i < 3; ++i)
		expect_same_wqe(i, i == 2 ? sizeof(srnic_sge) : 0);

	ibv_mw mw1 = mw2;
	mw1.type = IBV_MW_TYPE_1;
	ibv_wr_start(qpx_);
	ibv_wr_bind_mw(qpx_, &mw1, 0x200108, &info);
	EXPECT_EQ(ibv_wr_complete(qpx_), EINVAL);
	ibv_wr_start(qpx_);
	ibv_wr_bind_mw(qpx_, &mw2, 0x200108, &info);
	ibv_wr_set_sge(qpx_, 3, 0x9000, 8);
	EXPECT_EQ(ibv_wr_complete(qpx_), EINVAL);
	EXPECT_EQ(ex_->published(), 3u) << "failed batches publish nothing";
}

} // namespace
} // namespace srnic::test
