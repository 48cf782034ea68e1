// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "qp.h"

#include "context.h"
#include "cq.h"
#include "log.h"
#include "qp_ex.h"
#include "wq.h"

#include <cerrno>
#include <memory>
#include <new>

namespace srnic
{

// A failed doorbell leaves the WQEs posted (the post succeeded); the next
// doorbell covers them too. Only logged.
void ring_send_doorbell(ibv_qp *ibqp) noexcept
{
	ibv_send_wr *bad = nullptr;
	if (const int err = ibv_cmd_post_send(ibqp, nullptr, &bad))
		srnic_err(verbs_get_ctx(ibqp->context), "SQ doorbell of QP %u failed: %d\n",
			  ibqp->qp_num, err);
}

void ring_recv_doorbell(ibv_qp *ibqp) noexcept
{
	ibv_recv_wr *bad = nullptr;
	if (const int err = ibv_cmd_post_recv(ibqp, nullptr, &bad))
		srnic_err(verbs_get_ctx(ibqp->context), "RQ doorbell of QP %u failed: %d\n",
			  ibqp->qp_num, err);
}

bool qp_caps_fit_rings(const ibv_qp_cap &cap, const srnic_queue_desc &sq,
		       const srnic_queue_desc &rq, bool has_rq) noexcept
{
	const uint64_t sq_payload = uint64_t{sq.entry_size} - sizeof(srnic_send_wqe);
	const bool sq_ok = sq.entry_size >= sizeof(srnic_send_wqe) &&
			   cap.max_send_wr <= sq.num_entries &&
			   uint64_t{cap.max_send_sge} * sizeof(srnic_sge) <= sq_payload &&
			   cap.max_inline_data <= sq_payload;
	if (!has_rq)
		return sq_ok && rq.mmap_size == 0 && rq.num_entries == 0 && rq.entry_size == 0 &&
		       cap.max_recv_wr == 0 && cap.max_recv_sge == 0;
	return sq_ok && recv_caps_fit_ring(cap.max_recv_wr, cap.max_recv_sge, rq);
}

bool recv_caps_fit_ring(uint32_t max_wr, uint32_t max_sge, const srnic_queue_desc &ring) noexcept
{
	const uint64_t payload = uint64_t{ring.entry_size} - sizeof(srnic_recv_wqe);
	return ring.entry_size >= sizeof(srnic_recv_wqe) && max_wr <= ring.num_entries &&
	       uint64_t{max_sge} * sizeof(srnic_sge) <= payload;
}

namespace
{

// Undoes ibv_cmd_create_qp_ex for a QP whose rings turned out unusable.
ibv_qp *fail_created(Qp *qp, int err) noexcept
{
	ibv_cmd_destroy_qp(&qp->vqp.qp);
	delete qp;
	errno = err;
	return nullptr;
}

} // namespace

// An XRC_RECV (XRC_TGT) QP is a kernel object shared through its XRC domain:
// no ring is mapped, nothing is posted to it. The kernel's create and open
// responses carry no srnic data for it.
ibv_qp *create_xrc_recv_qp(ibv_context *ibctx, ibv_qp_init_attr_ex *attr) noexcept
{
	std::unique_ptr<Qp> qp(new (std::nothrow) Qp{});
	if (!qp) {
		errno = ENOMEM;
		return nullptr;
	}
	CreateQpCmd cmd = {};
	CreateQpResp resp = {};
	const int err = ibv_cmd_create_qp_ex(ibctx, &qp->vqp, attr, &cmd.ibv_cmd, sizeof(cmd),
					     reinterpret_cast<ib_uverbs_create_qp_resp *>(&resp),
					     sizeof(resp));
	if (err) {
		errno = err;
		return nullptr;
	}
	qp->type = IBV_QPT_XRC_RECV;
	return &qp.release()->vqp.qp;
}

ibv_qp *create_qp_ex(ibv_context *ibctx, ibv_qp_init_attr_ex *attr) noexcept
{
	Context *ctx = to_srnic_context(ibctx);
	// Only what srnic implements: a PD (an XRC domain for XRC_RECV), no
	// creation flags, and of the extended send ops those srnic has
	// builders and opcodes for. An empty set of creation flags is no
	// request; ibv_cmd_create_qp_ex() itself would refuse the bit.
	const uint32_t comp_mask = attr->comp_mask;
	const bool no_create_flags =
		!(comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) || !attr->create_flags;
	const bool send_ops = comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	if ((comp_mask & ~(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD |
			   IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |
			   IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH)) ||
	    !no_create_flags ||
	    (send_ops && (attr->send_ops_flags & ~supported_send_ops_flags(attr->qp_type)))) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	if (comp_mask & (IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH)) {
		if (send_ops || !(comp_mask & IBV_QP_INIT_ATTR_IND_TABLE)) {
			errno = EINVAL;
			return nullptr;
		}
		// The command carries its creation flags itself.
		attr->comp_mask = comp_mask & ~IBV_QP_INIT_ATTR_CREATE_FLAGS;
		ibv_qp *qp = create_hash_qp(ibctx, attr);
		attr->comp_mask = comp_mask;
		return qp;
	}
	if (attr->qp_type == IBV_QPT_XRC_RECV) {
		if (send_ops) {
			errno = EOPNOTSUPP; // it sends nothing
			return nullptr;
		}
		return create_xrc_recv_qp(ibctx, attr);
	}
	std::unique_ptr<Qp> qp(new (std::nothrow) Qp{});
	if (!qp) {
		errno = ENOMEM;
		return nullptr;
	}

	CreateQpCmd cmd = {};
	CreateQpResp resp = {};
	// libibverbs takes the kernel's response struct, whose flexible array
	// member CreateQpResp cannot embed; ibv_create_qp_resp_core has the
	// same size and alignment (asserted in verbs_driver_abi.h).
	attr->comp_mask = comp_mask & ~IBV_QP_INIT_ATTR_CREATE_FLAGS;
	int err = ibv_cmd_create_qp_ex(ibctx, &qp->vqp, attr, &cmd.ibv_cmd, sizeof(cmd),
				       reinterpret_cast<ib_uverbs_create_qp_resp *>(&resp),
				       sizeof(resp));
	attr->comp_mask = comp_mask;
	if (err) {
		errno = err;
		return nullptr;
	}

	// A QP with an SRQ takes its receives from there, an XRC_SEND QP
	// receives nothing: no RQ to map.
	const bool has_rq = !attr->srq && attr->qp_type != IBV_QPT_XRC_SEND;
	const uint32_t ctrl_size = ctx->limits.queue_ctrl_size;
	err = qp->sq_ring.map(*ctx->ring_maps, ibctx->cmd_fd, resp.driver.sq, ctrl_size, sizeof(srnic_send_wqe));
	if (!err && has_rq)
		err = qp->rq_ring.map(*ctx->ring_maps, ibctx->cmd_fd, resp.driver.rq, ctrl_size,
				      sizeof(srnic_recv_wqe));
	if (!err && !qp_caps_fit_rings(attr->cap, resp.driver.sq, resp.driver.rq, has_rq))
		err = EPROTO;
	if (err) {
		srnic_err(&ctx->ibv_ctx, "cannot map QP %u: %d\n", resp.driver.qpn, err);
		return fail_created(qp.release(), err);
	}

	qp->sq.emplace(qp->sq_ring.view());
	if (has_rq)
		qp->rq.emplace(qp->rq_ring.view());
	qp->sq_max_sge = attr->cap.max_send_sge;
	qp->rq_max_sge = attr->cap.max_recv_sge;
	qp->max_inline = attr->cap.max_inline_data;
	qp->sq_sig_all = attr->sq_sig_all;
	qp->type = attr->qp_type;
	if (send_ops)
		install_send_ops(*qp, attr->send_ops_flags);
	return &qp.release()->vqp.qp;
}

ibv_flow *create_flow(ibv_qp *qp, ibv_flow_attr *attr) noexcept
{
	std::unique_ptr<ibv_flow> flow(new (std::nothrow) ibv_flow{});
	if (!flow) {
		errno = ENOMEM;
		return nullptr;
	}
	const int err = ibv_cmd_create_flow(qp, flow.get(), attr, nullptr, 0);
	if (err) {
		errno = err;
		return nullptr;
	}
	return flow.release();
}

int destroy_flow(ibv_flow *flow) noexcept
{
	const int err = ibv_cmd_destroy_flow(flow);
	if (err)
		return err;
	delete flow;
	return 0;
}

ibv_qp *create_qp(ibv_pd *pd, ibv_qp_init_attr *attr) noexcept
{
	ibv_qp_init_attr_ex attr_ex = {};
	attr_ex.qp_context = attr->qp_context;
	attr_ex.send_cq = attr->send_cq;
	attr_ex.recv_cq = attr->recv_cq;
	attr_ex.srq = attr->srq;
	attr_ex.cap = attr->cap;
	attr_ex.qp_type = attr->qp_type;
	attr_ex.sq_sig_all = attr->sq_sig_all;
	attr_ex.comp_mask = IBV_QP_INIT_ATTR_PD;
	attr_ex.pd = pd;

	ibv_qp *qp = create_qp_ex(pd->context, &attr_ex);
	if (qp)
		attr->cap = attr_ex.cap;
	return qp;
}

namespace
{

void discard_qp_cqes(ibv_cq *ibcq, uint32_t qpn) noexcept
{
	if (!ibcq)
		return;
	Cq &cq = *to_srnic_cq(ibcq);
	SpinGuard guard(cq.lock);
	cq.direct.discard_qp(qpn);
	if (cq.reader)
		cq.reader->discard_qp_cqes(qpn);
}

// modify_qp's command: the legacy one, or with IBV_QP_RATE_LIMIT (which only
// the extended one carries) the extended one with srnic's burst size.
int modify_qp_cmd(ibv_qp *ibqp, ibv_qp_attr *attr, int attr_mask, uint32_t burst_bytes) noexcept
{
	if (!(attr_mask & IBV_QP_RATE_LIMIT)) {
		struct ibv_modify_qp cmd = {};
		return ibv_cmd_modify_qp(ibqp, attr, attr_mask, &cmd, sizeof(cmd));
	}
	struct {
		ibv_modify_qp_ex core;
		srnic_modify_qp_req driver;
	} cmd = {};
	static_assert(offsetof(decltype(cmd), driver) == sizeof(cmd.core));
	cmd.driver.burst_bytes = burst_bytes;
	ib_uverbs_ex_modify_qp_resp resp = {};
	return ibv_cmd_modify_qp_ex(ibqp, attr, attr_mask, &cmd.core, sizeof(cmd), &resp,
				    sizeof(resp));
}

int modify_qp_with_burst(ibv_qp *ibqp, ibv_qp_attr *attr, int attr_mask,
			 uint32_t burst_bytes) noexcept
{
	const int err = modify_qp_cmd(ibqp, attr, attr_mask, burst_bytes);
	if (err)
		return err;
	Qp &qp = *to_srnic_qp(ibqp);
	{
		// The kernel revoked the QP's direct windows; a new state or
		// destination may allow what it refused.
		SpinGuard guard(qp.sq_lock);
		qp.direct.reset();
	}
	if (attr_mask & IBV_QP_STATE) {
		qp.state.store(attr->qp_state, std::memory_order_relaxed);
		// A reset QP's completions not yet polled go with it (the kernel
		// writes no more of them): a QP restarted from RESET must not
		// poll its previous life's flushes.
		if (attr->qp_state == IBV_QPS_RESET) {
			discard_qp_cqes(ibqp->send_cq, ibqp->qp_num);
			if (ibqp->recv_cq != ibqp->send_cq)
				discard_qp_cqes(ibqp->recv_cq, ibqp->qp_num);
		}
	}
	return 0;
}

} // namespace

int modify_qp(ibv_qp *ibqp, ibv_qp_attr *attr, int attr_mask) noexcept
{
	return modify_qp_with_burst(ibqp, attr, attr_mask, 0);
}

int modify_qp_rate_limit(ibv_qp *ibqp, ibv_qp_rate_limit_attr *attr) noexcept
{
	if (attr->comp_mask)
		return EINVAL;
	ibv_qp_attr qp_attr = {};
	qp_attr.rate_limit = attr->rate_limit;
	return modify_qp_with_burst(ibqp, &qp_attr, IBV_QP_RATE_LIMIT, attr->max_burst_sz);
}

int query_qp(ibv_qp *ibqp, ibv_qp_attr *attr, int attr_mask, ibv_qp_init_attr *init_attr) noexcept
{
	struct ibv_query_qp cmd = {};
	return ibv_cmd_query_qp(ibqp, attr, attr_mask, init_attr, &cmd, sizeof(cmd));
}

ibv_qp *open_qp(ibv_context *ibctx, ibv_qp_open_attr *attr) noexcept
{
	std::unique_ptr<Qp> qp(new (std::nothrow) Qp{});
	if (!qp) {
		errno = ENOMEM;
		return nullptr;
	}
	struct ibv_open_qp cmd = {};
	ibv_create_qp_resp_core resp = {};
	// libibverbs checks the attributes; ib_core finds the XRC_TGT QP in
	// the domain (EINVAL if it is not there).
	const int err = ibv_cmd_open_qp(ibctx, &qp->vqp, sizeof(qp->vqp), attr, &cmd, sizeof(cmd),
					reinterpret_cast<ib_uverbs_create_qp_resp *>(&resp),
					sizeof(resp));
	if (err) {
		errno = err;
		return nullptr;
	}
	qp->type = attr->qp_type;
	return &qp.release()->vqp.qp;
}

int destroy_qp(ibv_qp *ibqp) noexcept
{
	const int err = ibv_cmd_destroy_qp(ibqp);
	if (err)
		return err;

	delete to_srnic_qp(ibqp); // unmaps the rings
	return 0;
}

} // namespace srnic
