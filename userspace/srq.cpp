// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "srq.h"

#include "context.h"
#include "log.h"

#include <infiniband/tm_types.h>

#include <cerrno>
#include <cstddef>
#include <memory>
#include <new>

namespace srnic
{

void ring_srq_doorbell(ibv_srq *ibsrq) noexcept
{
	ibv_recv_wr *bad = nullptr;
	if (const int err = ibv_cmd_post_srq_recv(ibsrq, nullptr, &bad))
		srnic_err(verbs_get_ctx(ibsrq->context), "SRQ doorbell failed: %d\n", err);
}

ibv_srq *create_srq_ex(ibv_context *ibctx, ibv_srq_init_attr_ex *attr) noexcept
{
	Context *ctx = to_srnic_context(ibctx);
	const uint32_t comp_mask = attr->comp_mask;
	// A basic SRQ in a PD, an XRC SRQ (in a PD, an XRC domain, with its own
	// CQ) or a tag-matching SRQ (in a PD, with its own CQ and a tag list).
	const bool typed = comp_mask & IBV_SRQ_INIT_ATTR_TYPE;
	const bool xrc = typed && attr->srq_type == IBV_SRQT_XRC;
	const bool tm = typed && attr->srq_type == IBV_SRQT_TM;
	if ((comp_mask & ~(IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD |
			   IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM)) ||
	    (typed && attr->srq_type != IBV_SRQT_BASIC && !xrc && !tm)) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	if (!(comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd ||
	    (xrc && (!(comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd)) ||
	    ((xrc || tm) && (!(comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq)) ||
	    (tm && (!(comp_mask & IBV_SRQ_INIT_ATTR_TM) || !attr->tm_cap.max_num_tags))) {
		errno = EINVAL;
		return nullptr;
	}
	std::unique_ptr<Srq> srq(new (std::nothrow) Srq{});
	if (!srq) {
		errno = ENOMEM;
		return nullptr;
	}

	CreateSrqCmd cmd = {};
	CreateSrqResp resp = {};
	// As for QPs: the response struct ends in a flexible array member;
	// ibv_create_srq_resp_core has its size and alignment.
	int err = ibv_cmd_create_srq_ex(ibctx, &srq->vsrq, attr, &cmd.ibv_cmd, sizeof(cmd),
					reinterpret_cast<ib_uverbs_create_srq_resp *>(&resp),
					sizeof(resp));
	if (err) {
		errno = err;
		return nullptr;
	}

	err = srq->ring.map(*ctx->ring_maps, ibctx->cmd_fd, resp.driver.rq, ctx->limits.queue_ctrl_size,
			    sizeof(srnic_recv_wqe));
	if (!err && !recv_caps_fit_ring(attr->attr.max_wr, attr->attr.max_sge, resp.driver.rq))
		err = EPROTO;
	if (err) {
		srnic_err(&ctx->ibv_ctx, "cannot map SRQ %u: %d\n", resp.driver.srqn, err);
		ibv_cmd_destroy_srq(&srq->vsrq.srq);
		errno = err;
		return nullptr;
	}

	srq->rq.emplace(srq->ring.view());
	srq->max_sge = attr->attr.max_sge;
	srq->srqn = resp.driver.srqn;
	if (tm)
		srq->tm_max_tags = attr->tm_cap.max_num_tags;
	ibv_srq &ibsrq = srq->vsrq.srq;
	// What libibverbs' ibv_create_srq() also sets, for the _ex path.
	ibsrq.srq_context = attr->srq_context;
	ibsrq.pd = attr->pd;
	ibsrq.events_completed = 0;
	return &srq.release()->vsrq.srq;
}

ibv_srq *create_srq(ibv_pd *pd, ibv_srq_init_attr *attr) noexcept
{
	ibv_srq_init_attr_ex attr_ex = {};
	attr_ex.srq_context = attr->srq_context;
	attr_ex.attr = attr->attr;
	attr_ex.comp_mask = IBV_SRQ_INIT_ATTR_PD;
	attr_ex.pd = pd;

	ibv_srq *srq = create_srq_ex(pd->context, &attr_ex);
	if (srq) {
		attr->attr.max_wr = attr_ex.attr.max_wr;
		attr->attr.max_sge = attr_ex.attr.max_sge;
	}
	return srq;
}

int get_srq_num(ibv_srq *ibsrq, uint32_t *srq_num) noexcept
{
	const Srq &srq = *to_srnic_srq(ibsrq);
	// Only XRC SRQs have a number XRC senders name.
	if (srq.vsrq.srq_type != IBV_SRQT_XRC)
		return EOPNOTSUPP;
	*srq_num = srq.srqn;
	return 0;
}

int modify_srq(ibv_srq *ibsrq, ibv_srq_attr *attr, int attr_mask) noexcept
{
	if (!(attr_mask & IBV_SRQ_MAX_WR)) {
		struct ibv_modify_srq cmd = {};
		return ibv_cmd_modify_srq(ibsrq, attr, attr_mask, &cmd, sizeof(cmd));
	}

	// Resizing: the kernel moves what is posted to a new ring and says
	// where it is mapped; no post may run meanwhile.
	Srq &srq = *to_srnic_srq(ibsrq);
	Context *ctx = to_srnic_context(ibsrq->context);
	SpinGuard guard(srq.lock);
	ModifySrqCmd cmd = {};
	srnic_queue_desc desc = {};
	cmd.driver.ring_desc_addr = reinterpret_cast<uintptr_t>(&desc);
	int err = ibv_cmd_modify_srq(ibsrq, attr, attr_mask, &cmd.ibv_cmd, sizeof(cmd));
	if (err)
		return err;

	RingMapping ring;
	err = ring.map(*ctx->ring_maps, ibsrq->context->cmd_fd, desc, ctx->limits.queue_ctrl_size,
		       sizeof(srnic_recv_wqe));
	if (!err && !recv_caps_fit_ring(attr->max_wr, srq.max_sge, desc))
		err = EPROTO;
	if (err) {
		// The kernel takes WQEs from the new ring already: this SRQ is lost.
		srnic_err(&ctx->ibv_ctx, "cannot map resized SRQ %u: %d\n", srq.srqn, err);
		return err;
	}
	srq.ring = std::move(ring); // unmaps the old ring
	srq.rq.emplace(srq.ring.view());
	return 0;
}

namespace
{

// The tag-matching values are libibverbs' own (srnic-abi.h says so).
static_assert(int{SRNIC_TMH_NO_TAG} == int{IBV_TMH_NO_TAG} && int{SRNIC_TMH_RNDV} == int{IBV_TMH_RNDV} &&
	      int{SRNIC_TMH_FIN} == int{IBV_TMH_FIN} && int{SRNIC_TMH_EAGER} == int{IBV_TMH_EAGER} &&
	      int{SRNIC_TM_OP_ADD} == int{IBV_WR_TAG_ADD} && int{SRNIC_TM_OP_DEL} == int{IBV_WR_TAG_DEL} &&
	      int{SRNIC_TM_OP_SYNC} == int{IBV_WR_TAG_SYNC} &&
	      int{SRNIC_TM_OP_SIGNALED} == int{IBV_OPS_SIGNALED} &&
	      int{SRNIC_TM_OP_SYNC_CNT} == int{IBV_OPS_TM_SYNC});
static_assert(sizeof(srnic_tmh) == sizeof(ibv_tmh) && sizeof(srnic_rvh) == sizeof(ibv_rvh));

// A modify_srq command carrying one tag-list operation and its SGEs.
struct TmOpCmd {
	struct ibv_modify_srq ibv_cmd;
	srnic_tm_op op;
	srnic_sge sge[SRNIC_TM_OP_MAX_SGE];
};

// Sends one operation; returns the command's errno (EBUSY: the ADD's
// handle is in use).
[[nodiscard]] int send_tm_op(ibv_srq *ibsrq, TmOpCmd &cmd) noexcept
{
	ibv_srq_attr attr = {};
	const size_t size = offsetof(TmOpCmd, sge) + cmd.op.num_sge * sizeof(srnic_sge);
	return ibv_cmd_modify_srq(ibsrq, &attr, 0, &cmd.ibv_cmd, size);
}

// An ADD under the first free handle from tm_next_handle on; the handle
// goes back in wr.tm.handle.
[[nodiscard]] int add_tag(Srq &srq, ibv_ops_wr &wr, TmOpCmd &cmd) noexcept
{
	if (wr.tm.add.num_sge < 0 || static_cast<uint32_t>(wr.tm.add.num_sge) > SRNIC_TM_OP_MAX_SGE ||
	    static_cast<uint32_t>(wr.tm.add.num_sge) > srq.max_sge ||
	    (wr.tm.add.num_sge && !wr.tm.add.sg_list))
		return EINVAL;
	cmd.op.num_sge = static_cast<uint16_t>(wr.tm.add.num_sge);
	cmd.op.recv_wr_id = wr.tm.add.recv_wr_id;
	cmd.op.tag = wr.tm.add.tag;
	cmd.op.mask = wr.tm.add.mask;
	for (int i = 0; i < wr.tm.add.num_sge; i++)
		cmd.sge[i] = srnic_sge{.addr = wr.tm.add.sg_list[i].addr,
				       .length = wr.tm.add.sg_list[i].length,
				       .lkey = wr.tm.add.sg_list[i].lkey};
	for (uint32_t tries = 0; tries < srq.tm_max_tags; tries++) {
		const uint32_t handle =
			srq.tm_next_handle.fetch_add(1, std::memory_order_relaxed) % srq.tm_max_tags;
		cmd.op.handle = handle;
		const int err = send_tm_op(&srq.vsrq.srq, cmd);
		if (err != EBUSY) {
			if (!err)
				wr.tm.handle = handle;
			return err;
		}
	}
	return ENOMEM; // every handle is in use: the list is full
}

} // namespace

int post_srq_ops(ibv_srq *ibsrq, ibv_ops_wr *wr, ibv_ops_wr **bad_wr) noexcept
{
	Srq &srq = *to_srnic_srq(ibsrq);
	for (; wr; wr = wr->next) {
		int err = EINVAL;
		TmOpCmd cmd = {};
		cmd.op.flags = static_cast<uint8_t>(wr->flags);
		cmd.op.unexpected_cnt = wr->tm.unexpected_cnt;
		cmd.op.wr_id = wr->wr_id;
		if (!srq.tm_max_tags || (wr->flags & ~(IBV_OPS_SIGNALED | IBV_OPS_TM_SYNC))) {
			err = EINVAL;
		} else if (wr->opcode == IBV_WR_TAG_ADD) {
			cmd.op.opcode = SRNIC_TM_OP_ADD;
			err = add_tag(srq, *wr, cmd);
		} else if (wr->opcode == IBV_WR_TAG_DEL || wr->opcode == IBV_WR_TAG_SYNC) {
			cmd.op.opcode = wr->opcode == IBV_WR_TAG_DEL ? SRNIC_TM_OP_DEL : SRNIC_TM_OP_SYNC;
			cmd.op.handle = wr->opcode == IBV_WR_TAG_DEL ? wr->tm.handle : 0;
			err = send_tm_op(ibsrq, cmd);
		}
		if (err) {
			*bad_wr = wr;
			return err;
		}
	}
	return 0;
}

int query_srq(ibv_srq *ibsrq, ibv_srq_attr *attr) noexcept
{
	struct ibv_query_srq cmd = {};
	return ibv_cmd_query_srq(ibsrq, attr, &cmd, sizeof(cmd));
}

int destroy_srq(ibv_srq *ibsrq) noexcept
{
	const int err = ibv_cmd_destroy_srq(ibsrq);
	if (err)
		return err;

	delete to_srnic_srq(ibsrq); // unmaps the ring
	return 0;
}

} // namespace srnic
