// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "srq.h"

#include "context.h"
#include "log.h"

#include <cerrno>
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
	// A basic SRQ in a PD, or an XRC SRQ (in a PD, an XRC domain, with its
	// own CQ); tag-matching SRQs (and their TM attributes) are not
	// implemented.
	const bool xrc = (comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && attr->srq_type == IBV_SRQT_XRC;
	if ((comp_mask & ~(IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE |
			   IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ)) ||
	    ((comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && attr->srq_type != IBV_SRQT_BASIC && !xrc)) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	if (!(comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd ||
	    (xrc && (!(comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd ||
		     !(comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq))) {
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
	struct ibv_modify_srq cmd = {};
	return ibv_cmd_modify_srq(ibsrq, attr, attr_mask, &cmd, sizeof(cmd));
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
