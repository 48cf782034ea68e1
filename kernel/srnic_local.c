// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: local delivery. A QP whose destination is a QP of an srnic device
 * of the same network namespace (the same device included) sends no
 * packets: its requester executes each WQE against the destination QP
 * directly (srnic_local_execute()), in posting order, copying the payload
 * once from source to destination pages, with the destination's receive
 * queue taken under its lock, and the responder's checks and completions
 * made as the wire responder (srnic_resp.c) makes them. The receive-queue
 * helpers here (srnic_rq_take*(), srnic_resp_rq_take()) serve the wire
 * responder and UD as well.
 */

#include <linux/overflow.h>
#include <rdma/ib_cache.h>

#include "srnic.h"
#include "srnic_wire.h"

/*
 * The destination QP of a local-delivery QP, referenced, or NULL when it
 * does not exist (any more).
 *
 * A QP of the device itself is found without its netdev's index: while the
 * netdev is being unregistered it is already unlisted, and until ib_core
 * has unregistered the device (which waits for the ULPs to tear their QPs
 * down) its QPs still deliver, as while the netdev is merely down, so
 * that in-flight work completes rather than waiting for timeouts.
 */
struct srnic_qp *srnic_local_dest_get(struct srnic_qp *qp)
{
	struct srnic_dev *sdev = to_srnic_dev(qp->ibqp.device);
	struct net *net = read_pnet(&sdev->net);
	struct srnic_qp *dest = NULL;
	struct net_device *ndev;
	struct srnic_dev *ddev;

	/* Given with local_ifindex (srnic_local_scratch_install()). */
	if (unlikely(!qp->req.rwqe))
		return NULL;
	if (qp->req.local_ifindex == READ_ONCE(sdev->ndev->ifindex))
		return srnic_qp_get_by_qpn(sdev, qp->attrs.dest_qp_num);
	rcu_read_lock();
	ndev = dev_get_by_index_rcu(net, qp->req.local_ifindex);
	ddev = ndev ? srnic_dev_get_by_netdev(ndev) : NULL;
	rcu_read_unlock();
	if (!ddev)
		return NULL;
	dest = srnic_qp_get_by_qpn(ddev, qp->attrs.dest_qp_num);
	ib_device_put(&ddev->ibdev);
	return dest;
}

/**
 * srnic_rq_take() - take the next receive WQE of a QP
 * @qp: the responder QP
 * @rwqe: where to copy it (SRNIC_MAX_RQ_ENTRY_SIZE bytes)
 *
 * The WQE comes from the QP's SRQ if it has one, else from its RQ. Its
 * num_sge is unchecked: compare it with srnic_qp_recv_wq(qp)->max_sge.
 *
 * Return: false when the queue is empty or the QP is in the error state.
 */
bool srnic_rq_take(struct srnic_qp *qp, struct srnic_recv_wqe *rwqe)
{
	return !srnic_rq_take_fit(qp, rwqe, 0);
}

/**
 * srnic_rq_take_fit() - srnic_rq_take() of a WQE whose buffers hold @len
 * @qp: the responder QP
 * @rwqe: where to copy it (SRNIC_MAX_RQ_ENTRY_SIZE bytes)
 * @len: the message's length; 0: whatever the WQE's buffers hold
 *
 * For a UC message too long for the next receive WQE, which IBTA's
 * unreliable services drop without consuming the WQE (rxe's error table:
 * RESPST_ERR_LENGTH for UC).
 *
 * Return: 0, -ENOENT when the queue is empty or the QP is in the error
 * state, -EMSGSIZE when the next WQE's SGEs add up to less than @len (the
 * WQE stays posted).
 */
int srnic_rq_take_fit(struct srnic_qp *qp, struct srnic_recv_wqe *rwqe,
		      u64 len)
{
	struct srnic_wq *rq = &qp->rq;
	unsigned long flags;
	int err = 0;

	if (qp->ibqp.srq)
		return READ_ONCE(qp->state) == IB_QPS_ERR ? -ENOENT :
		       srnic_srq_take(to_srnic_srq(qp->ibqp.srq), rwqe, len);
	spin_lock_irqsave(&rq->lock, flags);
	if (srnic_wq_read_producer(qp, rq) == rq->consumer ||
	    READ_ONCE(qp->state) == IB_QPS_ERR)
		err = -ENOENT;
	else if (!srnic_wq_pop_fit(rq, rwqe, len))
		err = -EMSGSIZE;
	spin_unlock_irqrestore(&rq->lock, flags);
	return err;
}

/**
 * srnic_resp_rq_take() - take the next receive WQE of a responder
 * @qp: the responder QP
 * @xsrq: for an XRC_TGT QP, the XRC SRQ the request names; NULL for others
 * @rwqe: as for srnic_rq_take()
 * @len: as for srnic_rq_take_fit()
 *
 * Return: as srnic_rq_take_fit().
 */
int srnic_resp_rq_take(struct srnic_qp *qp, struct srnic_srq *xsrq,
		       struct srnic_recv_wqe *rwqe, u64 len)
{
	if (!xsrq)
		return srnic_rq_take_fit(qp, rwqe, len);
	if (READ_ONCE(qp->state) == IB_QPS_ERR)
		return -ENOENT;
	return srnic_srq_take(xsrq, rwqe, len);
}

/* Would @dest answer a request now (local delivery, direct windows)? */
bool srnic_responder_ready(struct srnic_qp *dest)
{
	enum ib_qp_state state = READ_ONCE(dest->state);

	return state == IB_QPS_RTR || state == IB_QPS_RTS ||
	       state == IB_QPS_SQD || state == IB_QPS_SQE;
}

static int srnic_post_recv_cqe(struct srnic_qp *dest, struct srnic_srq *xsrq,
			       u64 wr_id, enum ib_wc_status status, u8 opcode,
			       u32 byte_len, const struct srnic_send_wqe *wqe,
			       u32 src_qp, const struct srnic_tm_match *tm)
{
	struct srnic_cqe cqe = {
		.wr_id = wr_id,
		.status = status,
		.opcode = opcode,
		.byte_len = byte_len,
		.qp_num = dest->ibqp.qp_num,
		.src_qp = src_qp,
	};
	bool solicited = wqe->flags & SRNIC_WQE_SOLICITED;

	if (wqe->opcode == IB_WR_SEND_WITH_IMM ||
	    wqe->opcode == IB_WR_RDMA_WRITE_WITH_IMM) {
		cqe.imm_data = wqe->imm_data;
		cqe.wc_flags = SRNIC_CQE_WITH_IMM;
	} else if (wqe->opcode == IB_WR_SEND_WITH_INV &&
		   status == IB_WC_SUCCESS) {
		cqe.invalidated_rkey = wqe->invalidate_rkey;
		cqe.wc_flags = SRNIC_CQE_WITH_INV;
	}
	if (tm && tm->wc_opcode)
		srnic_tm_fill_cqe(tm, &cqe);
	return srnic_cq_post(srnic_resp_cq(dest, xsrq), &cqe, solicited);
}

/*
 * Where a SEND to @dest, a QP of the tag-matching SRQ @srq, lands
 * (srnic_tm_take(), with the rendezvous done here: srnic_local_tm_rndv()).
 * A rendezvous needs a receive WQE of the sender @qp for its FIN: without
 * one it is an RNR before anything is taken. Returns as srnic_tm_take().
 */
static int srnic_local_take_tm(struct srnic_qp *qp, struct srnic_qp *dest,
			       struct srnic_srq *srq,
			       const struct srnic_sgl *src,
			       struct srnic_recv_wqe *rwqe,
			       struct srnic_tm_match *m)
{
	u8 hdr[sizeof(struct srnic_tmh) + sizeof(struct srnic_rvh)];
	u32 len = min_t(u64, src->len, sizeof(hdr));

	if (READ_ONCE(dest->state) == IB_QPS_ERR)
		return -ENOENT;
	if (srnic_sgl_xfer(src, 0, hdr, len, false))
		len = 0;
	if (len == sizeof(hdr) &&
	    ((struct srnic_tmh *)hdr)->opcode == SRNIC_TMH_RNDV &&
	    !srnic_recv_wq_has_work(qp, srnic_qp_recv_wq(qp)))
		return -ENOENT;
	return srnic_tm_take(dest, srq, hdr, len, true, rwqe, m);
}

/*
 * The FIN of a rendezvous: @qp, which sent its header, receives a SEND of
 * a header with SRNIC_TMH_FIN and the tag, in its next receive WQE, from
 * @dest. Returns false when it has none or the WQE is bad (the FIN is
 * lost; the consumer's protocol times out, as after a lost FIN packet).
 */
static bool srnic_local_tm_fin(struct srnic_qp *qp, struct srnic_qp *dest,
			       u64 tag)
{
	struct srnic_dev *sdev = to_srnic_dev(qp->ibqp.device);
	struct srnic_recv_wqe *rwqe = qp->req.rwqe;
	struct srnic_sgl *dst = &qp->req.rsgl;
	struct srnic_tmh fin = {
		.opcode = SRNIC_TMH_FIN,
		.tag = cpu_to_be64(tag),
	};
	struct srnic_cqe cqe = {
		.opcode = IB_WC_RECV,
		.qp_num = qp->ibqp.qp_num,
		.src_qp = dest->ibqp.qp_num,
		.byte_len = sizeof(fin),
	};

	if (!srnic_rq_take(qp, rwqe)) {
		srnic_qp_count(qp, SRNIC_CNT_RX_DROP_NO_RECV_WQE);
		return false;
	}
	cqe.wr_id = rwqe->wr_id;
	if (rwqe->num_sge > srnic_qp_recv_wq(qp)->max_sge ||
	    srnic_sgl_get(sdev, srnic_resp_pd(qp, NULL),
			  (const struct srnic_sge *)(rwqe + 1), rwqe->num_sge,
			  IB_ACCESS_LOCAL_WRITE, dst) != IB_WC_SUCCESS) {
		cqe.status = IB_WC_LOC_PROT_ERR;
	} else {
		if (dst->len < sizeof(fin))
			cqe.status = IB_WC_LOC_LEN_ERR;
		else if (srnic_sgl_scatter(dst, 0, (const u8 *)&fin,
					   sizeof(fin)))
			cqe.status = IB_WC_LOC_PROT_ERR;
		srnic_sgl_put(dst);
	}
	if (cqe.status != IB_WC_SUCCESS)
		cqe.byte_len = 0;
	if (srnic_cq_post(srnic_resp_cq(qp, NULL), &cqe, false) ||
	    cqe.status != IB_WC_SUCCESS)
		srnic_qp_to_error(qp, 0);
	return cqe.status == IB_WC_SUCCESS;
}

/**
 * srnic_local_tm_rndv() - finish a rendezvous matched by local delivery
 * @qp: the requester whose SEND carried the rendezvous header to a
 *	tagged buffer (@qp->req.tm_rndv), once that SEND completed
 *
 * The tagged buffer (the receive WQE in @qp->req.rwqe) is filled by a
 * READ of the buffer the header named, checked as @qp's responder checks
 * a READ; @qp then receives the FIN (srnic_local_tm_fin()), and the
 * buffer's second completion (IBV_WC_TM_RECV with TM_DATA_VALID) says the
 * data is there, or the READ's error. As a NIC orders them: the sender's
 * SEND completion, the data, the FIN, the data's completion.
 */
void srnic_local_tm_rndv(struct srnic_qp *qp)
{
	struct srnic_tm_match *m = &qp->req.tm_rndv;
	struct srnic_qp *dest = srnic_local_dest_get(qp);
	struct srnic_recv_wqe *rwqe = qp->req.rwqe;
	struct srnic_sgl *dst = &qp->req.rsgl;
	struct srnic_mr *mr = NULL;
	struct srnic_seg seg = {};
	struct srnic_sgl src = { .seg = &seg, .max = 1 };
	struct srnic_cqe cqe = {
		.wr_id = rwqe->wr_id,
		.opcode = SRNIC_WC_TM_RECV,
		.wc_flags = SRNIC_CQE_TM_DATA_VALID,
		.qp_num = qp->attrs.dest_qp_num,
		.src_qp = qp->ibqp.qp_num,
	};

	m->rndv = false;
	if (!dest)
		return;
	if (!srnic_resp_op_allowed(qp, IB_ACCESS_REMOTE_READ, NULL)) {
		cqe.status = IB_WC_REM_INV_REQ_ERR;
		goto complete;
	}
	if (m->rndv_len) {
		mr = srnic_rkey_lookup(qp, srnic_resp_pd(qp, NULL),
				       m->rndv_rkey, IB_ACCESS_REMOTE_READ,
				       m->rndv_va, m->rndv_len);
		if (IS_ERR(mr)) {
			cqe.status = IB_WC_REM_ACCESS_ERR;
			goto complete;
		}
		seg = (struct srnic_seg) {
			.mr = mr, .iova = m->rndv_va, .len = m->rndv_len,
		};
		src.num = 1;
		src.len = m->rndv_len;
	}
	cqe.status = srnic_sgl_get(to_srnic_dev(dest->ibqp.device),
				   srnic_resp_pd(dest, NULL),
				   (const struct srnic_sge *)(rwqe + 1),
				   rwqe->num_sge, IB_ACCESS_LOCAL_WRITE, dst);
	if (cqe.status == IB_WC_SUCCESS) {
		if (dst->len < src.len)
			cqe.status = IB_WC_LOC_LEN_ERR;
		else if (srnic_sgl_copy(dst, &src))
			cqe.status = IB_WC_REM_ACCESS_ERR;
		srnic_sgl_put(dst);
	}
	if (mr)
		srnic_mr_put(mr);
	if (cqe.status == IB_WC_SUCCESS) {
		srnic_qp_count(dest, SRNIC_CNT_TM_RNDV_READS);
		cqe.byte_len = src.len;
		if (!srnic_local_tm_fin(qp, dest, m->tag))
			cqe.status = SRNIC_WC_TM_RNDV_INCOMPLETE;
	}
complete:
	if (srnic_cq_post(srnic_resp_cq(dest, NULL), &cqe, false))
		srnic_qp_to_error(dest, 0);
	srnic_qp_put(dest);
}

/*
 * Consume the responder's next receive WQE for the message of @wqe (from
 * @xsrq for an XRC_TGT responder) and, with @deliver_payload, scatter @src
 * into it. Sets *@rnr when the RQ is empty, *@dest_fatal when the
 * responder must enter the error state. Returns the requester's status. A
 * UC SEND longer than the WQE's buffers leaves the WQE posted and returns
 * IB_WC_REM_INV_REQ_ERR without *@dest_fatal: srnic_local_execute() drops
 * it as the wire responder does.
 */
static enum ib_wc_status srnic_local_receive(struct srnic_qp *qp,
					     struct srnic_qp *dest,
					     struct srnic_srq *xsrq,
					     const struct srnic_send_wqe *wqe,
					     const struct srnic_sgl *src,
					     bool deliver_payload, bool *rnr,
					     bool *dest_fatal)
{
	struct srnic_dev *ddev = to_srnic_dev(dest->ibqp.device);
	struct srnic_recv_wqe *rwqe = qp->req.rwqe;
	struct srnic_sge *sge = (struct srnic_sge *)(rwqe + 1);
	struct srnic_sgl *dst = &qp->req.rsgl;
	u8 opcode = deliver_payload ? IB_WC_RECV : IB_WC_RECV_RDMA_WITH_IMM;
	struct srnic_wq *rq = srnic_resp_wq(dest, xsrq);
	struct srnic_srq *tm_srq = deliver_payload ? srnic_qp_tm_srq(dest) :
						     NULL;
	struct srnic_tm_match tm = {};
	enum ib_wc_status rstatus;
	int err;

	/* Only taking the WQE is serialised; the copy runs unlocked. */
	if (tm_srq)
		err = srnic_local_take_tm(qp, dest, tm_srq, src, rwqe, &tm);
	else
		err = srnic_resp_rq_take(dest, xsrq, rwqe, deliver_payload &&
					 !srnic_qp_acked(qp) ? src->len : 0);
	if (err == -EMSGSIZE)
		return srnic_nak_wc_status(SRNIC_NAK_INVALID_REQUEST);
	if (err) {
		*rnr = true;
		return IB_WC_SUCCESS;
	}
	/* A rendezvous: its data once the SEND completed. */
	if (tm.rndv && rwqe->num_sge <= rq->max_sge) {
		qp->req.tm_rndv = tm;
		if (srnic_post_recv_cqe(dest, xsrq, rwqe->wr_id, IB_WC_SUCCESS,
					opcode, tm.rndv_len, wqe,
					qp->ibqp.qp_num, &tm))
			*dest_fatal = true;
		return IB_WC_SUCCESS;
	}

	rstatus = IB_WC_SUCCESS;
	if (rwqe->num_sge > rq->max_sge) {
		rstatus = IB_WC_LOC_QP_OP_ERR;
	} else if (deliver_payload) {
		rstatus = srnic_sgl_get(ddev, srnic_resp_pd(dest, xsrq), sge,
					rwqe->num_sge, IB_ACCESS_LOCAL_WRITE,
					dst);
		if (rstatus == IB_WC_SUCCESS && dst->len < src->len - tm.skip) {
			srnic_sgl_put(dst);
			rstatus = IB_WC_LOC_LEN_ERR;
		}
		if (rstatus == IB_WC_SUCCESS) {
			/* An ODP page either side the process lacks. */
			if (srnic_sgl_copy_from(dst, src, tm.skip))
				rstatus = IB_WC_LOC_PROT_ERR;
			srnic_sgl_put(dst);
		}
	}
	/* A SEND with invalidate invalidates once its data is placed. */
	if (rstatus == IB_WC_SUCCESS && wqe->opcode == IB_WR_SEND_WITH_INV &&
	    srnic_invalidate_key(dest, wqe->invalidate_rkey, true))
		rstatus = IB_WC_REM_INV_REQ_ERR;
	/* The receive completion goes out before the requester's. */
	if (srnic_post_recv_cqe(dest, xsrq, rwqe->wr_id, rstatus, opcode,
				rstatus == IB_WC_SUCCESS ? src->len - tm.skip :
				0, wqe, qp->ibqp.qp_num, &tm))
		*dest_fatal = true;

	if (rstatus == IB_WC_SUCCESS)
		return IB_WC_SUCCESS;
	*dest_fatal = true;
	/* The NAK the wire responder sends for it (srnic_resp_send()). */
	return srnic_nak_wc_status(rstatus == IB_WC_LOC_LEN_ERR ||
				   rstatus == IB_WC_REM_INV_REQ_ERR ?
				   SRNIC_NAK_INVALID_REQUEST :
				   SRNIC_NAK_REMOTE_OPERATIONAL_ERROR);
}

/*
 * The responder's MR for an RDMA WRITE or READ, checked as the wire
 * responder checks it: an operation the QP does not enable is an invalid
 * request, a bad R_Key or range a remote access error.
 */
static enum ib_wc_status srnic_local_rkey(struct srnic_qp *dest,
					  struct srnic_srq *xsrq,
					  const struct srnic_send_wqe *wqe,
					  u64 len, int access,
					  struct srnic_sgl *sgl)
{
	struct srnic_mr *mr;

	sgl->num = 0;
	sgl->len = 0;
	if (!srnic_resp_op_allowed(dest, access, NULL))
		return srnic_nak_wc_status(SRNIC_NAK_INVALID_REQUEST);
	if (!len)
		return IB_WC_SUCCESS;
	mr = srnic_rkey_lookup(dest, srnic_resp_pd(dest, xsrq), wqe->rdma.rkey,
			       access, wqe->rdma.remote_addr, len);
	if (IS_ERR(mr))
		return srnic_nak_wc_status(SRNIC_NAK_REMOTE_ACCESS_ERROR);
	sgl->seg[0] = (struct srnic_seg) {
		.mr = mr, .iova = wqe->rdma.remote_addr, .len = len,
	};
	sgl->num = 1;
	sgl->len = len;
	return IB_WC_SUCCESS;
}

/*
 * An atomic against a local destination: checked as the wire responder
 * checks it (srnic_resp.c), executed by srnic_atomic_execute(), and the
 * original value written into the requester's 8-byte SGE @local.
 */
static enum ib_wc_status srnic_local_atomic(struct srnic_qp *dest,
					    struct srnic_srq *xsrq,
					    const struct srnic_send_wqe *wqe,
					    const struct srnic_sgl *local)
{
	bool cmp_swap = wqe->opcode == IB_WR_ATOMIC_CMP_AND_SWP;
	struct srnic_mr *mr;
	u8 slots;
	u64 orig;
	int err;

	if (!srnic_resp_op_allowed(dest, IB_ACCESS_REMOTE_ATOMIC, &slots))
		return srnic_nak_wc_status(SRNIC_NAK_INVALID_REQUEST);
	mr = srnic_rkey_lookup(dest, srnic_resp_pd(dest, xsrq),
			       wqe->atomic.rkey, IB_ACCESS_REMOTE_ATOMIC,
			       wqe->atomic.remote_addr, SRNIC_ATOMIC_SIZE);
	if (IS_ERR(mr))
		return srnic_nak_wc_status(SRNIC_NAK_REMOTE_ACCESS_ERROR);
	/* compare_add is the compare value, or the addend. */
	err = srnic_atomic_execute(mr, wqe->atomic.remote_addr, cmp_swap,
				   cmp_swap ? wqe->atomic.swap :
					      wqe->atomic.compare_add,
				   cmp_swap ? wqe->atomic.compare_add : 0,
				   &orig);
	srnic_mr_put(mr);
	if (err)
		return srnic_nak_wc_status(srnic_atomic_nak(err));
	if (srnic_sgl_scatter(local, 0, (const u8 *)&orig, sizeof(orig)))
		return IB_WC_LOC_PROT_ERR;
	return IB_WC_SUCCESS;
}

/*
 * An ATOMIC WRITE against a local destination: checked as the wire
 * responder checks it (srnic_resp_atomic_write()), the 8 bytes of @local
 * (the WQE's inline data) stored by srnic_atomic_write_execute().
 */
static enum ib_wc_status srnic_local_atomic_write(struct srnic_qp *dest,
						  struct srnic_srq *xsrq,
						  const struct srnic_send_wqe *wqe,
						  const struct srnic_sgl *local)
{
	struct srnic_mr *mr;
	u8 slots;
	u64 value;
	int err;

	if (!srnic_resp_op_allowed(dest, IB_ACCESS_REMOTE_WRITE, &slots) ||
	    local->len != SRNIC_ATOMIC_SIZE)
		return srnic_nak_wc_status(SRNIC_NAK_INVALID_REQUEST);
	mr = srnic_rkey_lookup(dest, srnic_resp_pd(dest, xsrq), wqe->rdma.rkey,
			       IB_ACCESS_REMOTE_WRITE, wqe->rdma.remote_addr,
			       SRNIC_ATOMIC_SIZE);
	if (IS_ERR(mr))
		return srnic_nak_wc_status(SRNIC_NAK_REMOTE_ACCESS_ERROR);
	if (srnic_sgl_xfer(local, 0, (u8 *)&value, sizeof(value), false)) {
		srnic_mr_put(mr);
		return IB_WC_LOC_PROT_ERR;
	}
	err = srnic_atomic_write_execute(mr, wqe->rdma.remote_addr, value);
	srnic_mr_put(mr);
	if (err)
		return srnic_nak_wc_status(srnic_atomic_nak(err));
	return IB_WC_SUCCESS;
}

/* The NAK code a wire responder sends for a completion status. */
static u8 srnic_local_nak_code(enum ib_wc_status status)
{
	switch (status) {
	case IB_WC_REM_ACCESS_ERR:
		return SRNIC_NAK_REMOTE_ACCESS_ERROR;
	case IB_WC_REM_INV_REQ_ERR:
		return SRNIC_NAK_INVALID_REQUEST;
	default:
		return SRNIC_NAK_REMOTE_OPERATIONAL_ERROR;
	}
}

/*
 * The answer @dest's responder would have sent to the requests of
 * srnic_local_capture(), starting at @psn, @n PSNs.
 */
static void srnic_local_capture_answer(struct srnic_qp *qp,
				       struct srnic_qp *dest,
				       const struct srnic_send_wqe *wqe,
				       const struct srnic_sgl *local,
				       enum ib_wc_status status, bool rnr,
				       u32 psn, u32 n)
{
	u8 transport = srnic_qp_is_xrc(qp) ? SRNIC_TRANSPORT_XRC :
					     SRNIC_TRANSPORT_RC;
	u32 msn = atomic_read(&dest->rx_msgs), mtu = srnic_qp_mtu(qp), i;
	struct srnic_txd txd = {
		.capture_ifindex = dest->req.local_ifindex,
		.opcode = SRNIC_OPCODE(transport, SRNIC_OP_ACK),
		.psn = psn,
	};
	u64 orig = 0;

	if (!txd.capture_ifindex)
		return;
	if (rnr) {
		txd.aeth = srnic_aeth_smsn(SRNIC_AETH_RNR_NAK,
					   READ_ONCE(dest->attrs.min_rnr_timer),
					   msn);
	} else if (status != IB_WC_SUCCESS) {
		txd.aeth = srnic_aeth_smsn(SRNIC_AETH_NAK,
					   srnic_local_nak_code(status), msn);
	} else if (srnic_wr_is_read(wqe->opcode)) {
		for (i = 0; i < n; i++) {
			u8 op = n == 1 ? SRNIC_OP_READ_RESPONSE_ONLY :
				!i ? SRNIC_OP_READ_RESPONSE_FIRST :
				i == n - 1 ? SRNIC_OP_READ_RESPONSE_LAST :
				SRNIC_OP_READ_RESPONSE_MIDDLE;

			txd.opcode = SRNIC_OPCODE(transport, op);
			txd.psn = srnic_psn_add(psn, i);
			txd.aeth = srnic_aeth_smsn(SRNIC_AETH_ACK,
						   SRNIC_AETH_CREDITS_UNLIMITED,
						   msn);
			txd.sgl = local;
			txd.offset = (u64)i * mtu;
			txd.len = min_t(u32, mtu, local->len - i * mtu);
			srnic_tx_build(dest, &txd, NULL);
		}
		return;
	} else if (srnic_wr_is_atomic(wqe->opcode)) {
		txd.opcode = SRNIC_OPCODE(transport, SRNIC_OP_ATOMIC_ACK);
		/* The value the atomic found, written to the requester. */
		srnic_sgl_xfer(local, 0, (u8 *)&orig, sizeof(orig), false);
		txd.orig = orig;
	}
	if (!txd.aeth)
		txd.aeth = srnic_aeth_smsn(SRNIC_AETH_ACK,
					   SRNIC_AETH_CREDITS_UNLIMITED, msn);
	if (status == IB_WC_SUCCESS && !rnr)
		txd.psn = srnic_psn_add(psn, n - 1);
	srnic_tx_build(dest, &txd, NULL);
}

/*
 * While a capture netdev listens (srnic_capture_any()), the packets a
 * locally delivered message would have been on a wire, shown on the
 * capture netdevs of its two devices (srnic_tx_capture_local()): its
 * requests, split at the path MTU, with the PSNs its requester's would
 * have taken from sq_psn on, and its responder's answer (ACK, READ
 * responses, atomic acknowledgment, RNR NAK or NAK). A message nobody
 * answered (no destination QP ready) shows nothing.
 */
static void srnic_local_capture(struct srnic_qp *qp, struct srnic_qp *dest,
				const struct srnic_send_wqe *wqe,
				const struct srnic_sgl *local,
				enum ib_wc_status status, bool rnr)
{
	u8 transport = srnic_qp_is_xrc(qp) ? SRNIC_TRANSPORT_XRC :
		       srnic_qp_acked(qp) ? SRNIC_TRANSPORT_RC :
					    SRNIC_TRANSPORT_UC;
	bool read = srnic_wr_is_read(wqe->opcode);
	bool atomic = srnic_wr_is_atomic(wqe->opcode);
	u32 mtu = srnic_qp_mtu(qp), len = local->len;
	u32 n = len ? DIV_ROUND_UP(len, mtu) : 1;
	u32 psn = qp->req.capture_psn, i;
	struct srnic_txd txd = {
		.capture_ifindex = qp->req.local_ifindex,
		.xrc_srqn = wqe->xrc_remote_srqn,
		.imm = wqe->imm_data,
		.inv_rkey = wqe->invalidate_rkey,
		.sgl = local,
	};

	if (atomic) {
		n = 1;
		srnic_tx_atomic_txd(wqe, &txd);
	} else {
		txd.va = wqe->rdma.remote_addr;
		txd.rkey = wqe->rdma.rkey;
		txd.dma_len = len;
	}
	if (wqe->opcode == SRNIC_WR_FLUSH) {
		txd.dma_len = wqe->flush.length;
		txd.feth = srnic_tx_flush_feth(wqe);
	}
	/* A READ is one request; its responses take its n PSNs. */
	for (i = 0; i < ((read || atomic) ? 1 : n); i++) {
		bool last = read || atomic || i == n - 1;

		txd.opcode = SRNIC_OPCODE(transport,
					  srnic_tx_req_opcode(wqe->opcode,
							      !i, last));
		txd.psn = srnic_psn_add(psn, i);
		txd.ack_req = last;
		txd.offset = (u64)i * mtu;
		txd.len = (read || atomic) ? 0 : min_t(u32, mtu, len - i * mtu);
		srnic_tx_build(qp, &txd, NULL);
	}
	qp->req.capture_psn = srnic_psn_add(psn, n);
	if (srnic_qp_acked(qp))
		srnic_local_capture_answer(qp, dest, wqe, local, status, rnr,
					   psn, n);
}

/*
 * Execute one WQE against a local destination QP. @local holds the
 * requester's own side of the message (source for SEND/WRITE, target for
 * READ, result for an atomic). Returns the requester's completion status
 * in @status.
 */
enum srnic_exec srnic_local_execute(struct srnic_qp *qp,
				    const struct srnic_send_wqe *wqe,
				    struct srnic_sgl *local,
				    enum ib_wc_status *status)
{
	struct srnic_qp *dest = srnic_local_dest_get(qp);
	struct srnic_sgl *remote = &qp->req.rsgl;
	bool rnr = false, dest_fatal = false, no_answer = false;
	enum ib_event_type dest_event = 0;
	struct srnic_srq *xsrq = NULL;
	bool to_tgt = dest && dest->ibqp.qp_type == IB_QPT_XRC_TGT;

	*status = IB_WC_SUCCESS;
	/*
	 * A process's memory may have to be faulted in (ODP), a user QP's RQ
	 * taken back from a direct loan, its windows revoked: all of which
	 * sleep. An XRC_TGT QP, which ib_core creates for a process, receives
	 * into the process's XRC SRQs and MRs. A run in a kernel consumer's
	 * atomic context leaves such a destination to the engine before
	 * touching anything.
	 */
	if (dest && (dest->ibqp.uobject || to_tgt) &&
	    !srnic_engine_task_may_sleep(&qp->task)) {
		srnic_qp_put(dest);
		return SRNIC_EXEC_DEFER;
	}
	/*
	 * XRC_INI talks to XRC_TGT only, as its XRC opcodes would. Nobody
	 * answers, as a wire responder drops a request it cannot take: an RC
	 * requester tries again when its local ACK timer would fire (the
	 * destination may be on its way to RTR: a peer that posts as soon as
	 * it is connected races the other side's modify_qp), a UC message is
	 * lost.
	 */
	if (!dest || !srnic_responder_ready(dest) ||
	    srnic_qp_is_xrc(qp) != to_tgt) {
		if (srnic_qp_acked(qp))
			no_answer = true;
		goto out;
	}

	/* The destination's RQ and CQ lent to us: take our work back. */
	if (unlikely(READ_ONCE(dest->direct_loaned)))
		srnic_direct_loan_settle(dest, qp);
	remote->num = 0;
	if (srnic_qp_is_xrc(qp)) {
		/* The XRC SRQ must be of the target's domain. */
		xsrq = srnic_xrc_srq_get(dest, wqe->xrc_remote_srqn);
		if (!xsrq) {
			*status = IB_WC_REM_INV_REQ_ERR;
			goto executed;
		}
	}
	switch (wqe->opcode) {
	case IB_WR_SEND:
	case IB_WR_SEND_WITH_IMM:
	case IB_WR_SEND_WITH_INV:
		*status = srnic_local_receive(qp, dest, xsrq, wqe, local, true,
					      &rnr, &dest_fatal);
		break;
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_WRITE_WITH_IMM:
		*status = srnic_local_rkey(dest, xsrq, wqe, local->len,
					   IB_ACCESS_REMOTE_WRITE, remote);
		if (*status != IB_WC_SUCCESS)
			break;
		/* An RNR must come before any byte is written. */
		if (wqe->opcode == IB_WR_RDMA_WRITE_WITH_IMM &&
		    !srnic_recv_wq_has_work(dest, srnic_resp_wq(dest, xsrq))) {
			rnr = true;
			break;
		}
		if (srnic_sgl_copy(remote, local)) {
			*status = IB_WC_REM_ACCESS_ERR;
			break;
		}
		srnic_sgl_put(remote);
		if (wqe->opcode == IB_WR_RDMA_WRITE_WITH_IMM)
			*status = srnic_local_receive(qp, dest, xsrq, wqe,
						      local, false, &rnr,
						      &dest_fatal);
		break;
	case IB_WR_RDMA_READ:
		*status = srnic_local_rkey(dest, xsrq, wqe, local->len,
					   IB_ACCESS_REMOTE_READ, remote);
		if (*status != IB_WC_SUCCESS)
			break;
		if (srnic_sgl_copy(local, remote))
			*status = IB_WC_REM_ACCESS_ERR;
		break;
	case IB_WR_ATOMIC_CMP_AND_SWP:
	case IB_WR_ATOMIC_FETCH_AND_ADD:
		*status = srnic_local_atomic(dest, xsrq, wqe, local);
		break;
	case SRNIC_WR_ATOMIC_WRITE:
		*status = srnic_local_atomic_write(dest, xsrq, wqe, local);
		break;
	case SRNIC_WR_FLUSH:
		if (!srnic_flush_check(dest, srnic_resp_pd(dest, xsrq),
				       wqe->flush.rkey, wqe->flush.remote_addr,
				       wqe->flush.length,
				       srnic_tx_flush_feth(wqe)))
			*status = IB_WC_REM_ACCESS_ERR;
		break;
	default:
		*status = IB_WC_REM_INV_REQ_ERR;
		break;
	}
	srnic_sgl_put(remote);
executed:
	atomic_inc(&dest->rx_msgs);

	/* The responder's RNR NAK carries its timer. */
	if (rnr)
		qp->req.rnr_timer = READ_ONCE(dest->attrs.min_rnr_timer);
	/*
	 * A responder that detected an error goes to the error state and
	 * reports the event the wire responder would (none for a completion
	 * its CQ had no room for). A UC responder drops a message with a
	 * remote error (bad R_Key, no receive WQE, a SEND too long for the
	 * receive WQE, which stays) silently, and a UC requester learns of
	 * nothing.
	 */
	if (*status != IB_WC_SUCCESS)
		dest_event = srnic_resp_error_event(dest, *status);
	if (!srnic_qp_acked(qp)) {
		if (rnr || (*status != IB_WC_SUCCESS && !dest_fatal))
			srnic_qp_count(dest,
				       rnr ? SRNIC_CNT_RX_DROP_NO_RECV_WQE :
					     SRNIC_CNT_RX_DROP_UC);
		rnr = false;
		*status = IB_WC_SUCCESS;
	} else if (*status == IB_WC_REM_ACCESS_ERR ||
		   *status == IB_WC_REM_INV_REQ_ERR) {
		dest_fatal = true;
	}
	if (dest_fatal)
		srnic_qp_to_error(dest, dest_event);
	if (srnic_capture_any())
		srnic_local_capture(qp, dest, wqe, local, *status, rnr);
out:
	if (xsrq)
		srnic_srq_put(xsrq);
	if (dest)
		srnic_qp_put(dest);
	if (no_answer)
		return SRNIC_EXEC_NO_ANSWER;
	return rnr ? SRNIC_EXEC_RNR : SRNIC_EXEC_DONE;
}
