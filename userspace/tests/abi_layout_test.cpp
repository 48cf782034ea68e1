// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Layouts the kernel and the provider must agree on: the shared rings of
// srnic-abi.h, and the driver data each verb command carries (the kernel sees
// it as udata; its lengths are listed here so the kernel side can check them).
#include "ah.h"
#include "context.h"
#include "cq.h"
#include "mr.h"
#include "pd.h"
#include "verbs_driver_abi.h"

#include <rdma/srnic-abi.h>

#include <gtest/gtest.h>

#include <cstddef>

namespace srnic::test
{
namespace
{

// The kernel's udata.inlen for a command: what follows the core request.
template <typename Cmd, typename Core>
constexpr size_t udata_inlen()
{
	return sizeof(Cmd) - sizeof(Core);
}

TEST(SrnicAbi, QueueControlRecordKeepsEachSideOnItsOwnCacheLine)
{
	EXPECT_EQ(offsetof(srnic_queue_ctrl, producer), 0u);
	EXPECT_EQ(offsetof(srnic_queue_ctrl, consumer), 64u);
	EXPECT_EQ(offsetof(srnic_queue_ctrl, flags), 128u);
	EXPECT_EQ(offsetof(srnic_queue_ctrl, notify), 132u);
	EXPECT_EQ(offsetof(srnic_queue_ctrl, notify_seq), 136u);
	EXPECT_EQ(offsetof(srnic_queue_ctrl, direct_gen), 140u);
	EXPECT_EQ(offsetof(srnic_queue_ctrl, completed), 144u);
	EXPECT_EQ(offsetof(srnic_queue_ctrl, loan_live), 148u);
	EXPECT_EQ(offsetof(srnic_queue_ctrl, loan_done), 152u);
	EXPECT_EQ(offsetof(srnic_queue_ctrl, loan_end), 156u);
	EXPECT_EQ(sizeof(srnic_queue_ctrl), 192u);
}

TEST(SrnicAbi, DirectLoanResponse)
{
	EXPECT_EQ(offsetof(srnic_direct_loan_resp, mmap_offset), 0u);
	EXPECT_EQ(offsetof(srnic_direct_loan_resp, mmap_size), 8u);
	EXPECT_EQ(offsetof(srnic_direct_loan_resp, rq_offset), 16u);
	EXPECT_EQ(offsetof(srnic_direct_loan_resp, cq_offset), 32u);
	EXPECT_EQ(offsetof(srnic_direct_loan_resp, loan_id), 44u);
	EXPECT_EQ(sizeof(srnic_direct_loan_resp), 48u);
}

TEST(SrnicAbi, CqeLayout)
{
	EXPECT_EQ(offsetof(srnic_cqe, wr_id), 0u);
	EXPECT_EQ(offsetof(srnic_cqe, byte_len), 8u);
	EXPECT_EQ(offsetof(srnic_cqe, imm_data), 12u);
	EXPECT_EQ(offsetof(srnic_cqe, qp_num), 16u);
	EXPECT_EQ(offsetof(srnic_cqe, status), 32u);
	EXPECT_EQ(offsetof(srnic_cqe, owner), 39u);
	EXPECT_EQ(offsetof(srnic_cqe, timestamp), 40u);
	EXPECT_EQ(sizeof(srnic_cqe), 64u);
}

TEST(SrnicAbi, SendWqeLayout)
{
	EXPECT_EQ(offsetof(srnic_send_wqe, opcode), 8u);
	EXPECT_EQ(offsetof(srnic_send_wqe, flags), 9u);
	EXPECT_EQ(offsetof(srnic_send_wqe, num_sge), 10u);
	EXPECT_EQ(offsetof(srnic_send_wqe, inline_len), 12u);
	EXPECT_EQ(offsetof(srnic_send_wqe, imm_data), 16u);
	EXPECT_EQ(offsetof(srnic_send_wqe, rdma.remote_addr), 24u);
	EXPECT_EQ(offsetof(srnic_send_wqe, atomic.rkey), 48u);
	EXPECT_EQ(offsetof(srnic_send_wqe, ud.remote_qkey), 32u);
	EXPECT_EQ(sizeof(srnic_send_wqe), 64u);
	EXPECT_EQ(sizeof(srnic_recv_wqe), 16u);
	EXPECT_EQ(sizeof(srnic_sge), 16u);
}

TEST(VerbsCommands, AllocUcontextCarriesTheSrnicRequestAndResponse)
{
	EXPECT_EQ((udata_inlen<GetContextCmd, ibv_get_context>()), 8u);
	EXPECT_EQ(offsetof(GetContextCmd, driver), sizeof(ibv_get_context));
	EXPECT_EQ(sizeof(GetContextResp) - sizeof(ib_uverbs_get_context_resp), 16u);
	EXPECT_EQ(offsetof(GetContextResp, driver), sizeof(ib_uverbs_get_context_resp));
}

TEST(VerbsCommands, AllocPdCarriesOnlyTheSrnicResponse)
{
	EXPECT_EQ(sizeof(AllocPdResp) - sizeof(ib_uverbs_alloc_pd_resp), 8u);
	EXPECT_EQ(offsetof(AllocPdResp, driver), sizeof(ib_uverbs_alloc_pd_resp));
}

TEST(VerbsCommands, CreateAhCarriesOnlyTheSrnicResponse)
{
	// ibv_cmd_create_ah sends the core request alone (udata.inlen == 0);
	// the kernel writes struct srnic_create_ah_resp right after the 4-byte
	// core response.
	EXPECT_EQ(sizeof(CreateAhResp) - sizeof(ib_uverbs_create_ah_resp), 8u);
	EXPECT_EQ(offsetof(CreateAhResp, driver), sizeof(ib_uverbs_create_ah_resp));
	EXPECT_EQ(offsetof(CreateAhResp, driver.ah_num), 4u);
}

TEST(VerbsCommands, RegMrCarriesNoSrnicData)
{
	// The kernel sees udata.inlen == 0 and udata.outlen == 0 and refuses
	// driver data it does not know: growing either is an ABI change.
	EXPECT_EQ((udata_inlen<RegMrCmd, struct ibv_reg_mr>()), 0u);
	EXPECT_EQ(sizeof(RegMrCmd) - sizeof(ib_uverbs_cmd_hdr), sizeof(ib_uverbs_reg_mr));
	EXPECT_EQ(sizeof(RegMrResp), sizeof(ib_uverbs_reg_mr_resp));
	EXPECT_EQ(offsetof(RegMrCmd, access_flags) - sizeof(ib_uverbs_cmd_hdr),
		  offsetof(ib_uverbs_reg_mr, access_flags));
}

TEST(VerbsCommands, ResizeCqCarriesTheSrnicRequestAndResponse)
{
	// The core request is ib_uverbs_resize_cq (response, cq_handle, cqe);
	// the kernel's udata starts right after it, and its response after the
	// 8-byte ib_uverbs_resize_cq_resp.
	EXPECT_EQ(sizeof(struct ibv_resize_cq), sizeof(ib_uverbs_cmd_hdr) + sizeof(ib_uverbs_resize_cq));
	EXPECT_EQ((udata_inlen<ResizeCqCmd, struct ibv_resize_cq>()), 8u);
	EXPECT_EQ(offsetof(ResizeCqCmd, driver), sizeof(struct ibv_resize_cq));
	EXPECT_EQ(sizeof(ibv_resize_cq_resp_core), sizeof(ib_uverbs_resize_cq_resp));
	EXPECT_EQ(offsetof(ResizeCqResp, driver), sizeof(ib_uverbs_resize_cq_resp));
	EXPECT_EQ(sizeof(ResizeCqResp) - sizeof(ib_uverbs_resize_cq_resp), 32u);
}

TEST(VerbsCommands, ReregMrCarriesNoSrnicData)
{
	EXPECT_EQ(sizeof(struct ibv_rereg_mr), sizeof(ib_uverbs_cmd_hdr) + sizeof(ib_uverbs_rereg_mr));
}

TEST(VerbsDriverAbi, SentinelMatchEntryIsAllZero)
{
	const verbs_match_ent sentinel = {};
	EXPECT_EQ(sentinel.kind, VERBS_MATCH_SENTINEL);
}

TEST(VerbsDriverAbi, ContextEmbedsVerbsContextFirst)
{
	Context ctx = {};
	ctx.ibv_ctx.context.abi_compat = __VERBS_ABI_IS_EXTENDED;
	EXPECT_EQ(to_srnic_context(&ctx.ibv_ctx.context), &ctx);
	Pd pd = {};
	EXPECT_EQ(to_srnic_pd(&pd.ibpd), &pd);
}

TEST(VerbsDriverAbi, MrEmbedsVerbsMrFirst)
{
	Mr mr = {};
	EXPECT_EQ(to_srnic_mr(&mr.vmr), &mr);
	// libibverbs' verbs_get_mr() relies on ibv_mr starting verbs_mr.
	EXPECT_EQ(static_cast<void *>(&mr.vmr.ibv_mr), static_cast<void *>(&mr));
}

} // namespace
} // namespace srnic::test
