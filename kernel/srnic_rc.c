// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: a QP's engine task, local delivery and the requester's common
 * part (fetching and completing send WQEs, RNR waits).
 *
 * The task (srnic_qp_task_ops) runs on the NIC engine that owns the QP:
 * received packets go to the responder (srnic_resp.c) or, for responses,
 * to the requester; then the requester takes send WQEs from the SQ (a
 * snapshot: the ring is shared with the process and untrusted).
 *
 * Destinations: a QP whose destination GID belongs to an srnic device of
 * the same network namespace (the same device included) is served by
 * local delivery: the requester executes each WQE against the destination
 * QP directly, in posting order, copying the payload once from source to
 * destination pages, with the destination's receive queue taken under its
 * lock. Other destinations are reached over the RoCEv2 wire by the
 * requester in srnic_req.c, with packets built by srnic_tx_build()
 * (srnic_tx.c). Payload moves through srnic_sgl.c.
 */

#include <linux/jiffies.h>
#include <linux/overflow.h>
#include <linux/slab.h>
#include <rdma/ib_cache.h>

#include "srnic.h"
#include "srnic_wire.h"

/* IBTA 9.7.5.2.8: RNR NAK timer field -> microseconds. */
static const u32 srnic_rnr_timer_usecs[32] = {
	655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960,
	1280, 1920, 2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720,
	40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
};

/**
 * srnic_rnr_timer_usecs_of() - the delay an RNR NAK timer code asks for
 * @code: the 5-bit code (min_rnr_timer)
 */
u32 srnic_rnr_timer_usecs_of(u8 code)
{
	return srnic_rnr_timer_usecs[code & 31];
}

#define SRNIC_RNR_RETRY_INFINITE 7

/* The outcome of executing one WQE. */
enum srnic_exec {
	SRNIC_EXEC_DONE,	/* complete the WQE with @status */
	SRNIC_EXEC_RNR,		/* no receive WQE at the responder: retry */
	SRNIC_EXEC_NO_ANSWER,	/* no responder (yet): retry on timeout */
};

/* ---- Local delivery: the responder's side ---------------------------- */

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
			       u32 src_qp)
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
	return srnic_cq_post(srnic_resp_cq(dest, xsrq), &cqe, solicited);
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
	enum ib_wc_status rstatus;
	int err;

	/* Only taking the WQE is serialised; the copy runs unlocked. */
	err = srnic_resp_rq_take(dest, xsrq, rwqe, deliver_payload &&
				 !srnic_qp_acked(qp) ? src->len : 0);
	if (err == -EMSGSIZE)
		return IB_WC_REM_INV_REQ_ERR;
	if (err) {
		*rnr = true;
		return IB_WC_SUCCESS;
	}

	rstatus = IB_WC_SUCCESS;
	if (rwqe->num_sge > rq->max_sge) {
		rstatus = IB_WC_LOC_QP_OP_ERR;
	} else if (deliver_payload) {
		rstatus = srnic_sgl_get(ddev, srnic_resp_pd(dest, xsrq), sge,
					rwqe->num_sge, IB_ACCESS_LOCAL_WRITE,
					dst);
		if (rstatus == IB_WC_SUCCESS && dst->len < src->len) {
			srnic_sgl_put(dst);
			rstatus = IB_WC_LOC_LEN_ERR;
		}
		if (rstatus == IB_WC_SUCCESS) {
			/* An ODP page either side the process lacks. */
			if (srnic_sgl_copy(dst, src))
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
				rstatus == IB_WC_SUCCESS ? src->len : 0, wqe,
				qp->ibqp.qp_num))
		*dest_fatal = true;

	if (rstatus == IB_WC_SUCCESS)
		return IB_WC_SUCCESS;
	*dest_fatal = true;
	return rstatus == IB_WC_LOC_LEN_ERR ||
	       rstatus == IB_WC_REM_INV_REQ_ERR ? IB_WC_REM_INV_REQ_ERR :
						  IB_WC_REM_OP_ERR;
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
	if (!(READ_ONCE(dest->attrs.access_flags) & access))
		return IB_WC_REM_INV_REQ_ERR;
	if (!len)
		return IB_WC_SUCCESS;
	mr = srnic_rkey_lookup(dest, srnic_resp_pd(dest, xsrq), wqe->rdma.rkey,
			       access, wqe->rdma.remote_addr, len);
	if (IS_ERR(mr))
		return IB_WC_REM_ACCESS_ERR;
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
	u64 orig;
	int err;

	if (!(READ_ONCE(dest->attrs.access_flags) & IB_ACCESS_REMOTE_ATOMIC))
		return IB_WC_REM_INV_REQ_ERR;
	if (!READ_ONCE(dest->attrs.max_dest_rd_atomic))
		return IB_WC_REM_INV_REQ_ERR;
	mr = srnic_rkey_lookup(dest, srnic_resp_pd(dest, xsrq),
			       wqe->atomic.rkey, IB_ACCESS_REMOTE_ATOMIC,
			       wqe->atomic.remote_addr, SRNIC_ATOMIC_SIZE);
	if (IS_ERR(mr))
		return IB_WC_REM_ACCESS_ERR;
	/* compare_add is the compare value, or the addend. */
	err = srnic_atomic_execute(mr, wqe->atomic.remote_addr, cmp_swap,
				   cmp_swap ? wqe->atomic.swap :
					      wqe->atomic.compare_add,
				   cmp_swap ? wqe->atomic.compare_add : 0,
				   &orig);
	srnic_mr_put(mr);
	if (err)
		return err == -EINVAL ? IB_WC_REM_INV_REQ_ERR :
					IB_WC_REM_ACCESS_ERR;
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
	u64 value;
	int err;

	if (!(READ_ONCE(dest->attrs.access_flags) & IB_ACCESS_REMOTE_WRITE) ||
	    !READ_ONCE(dest->attrs.max_dest_rd_atomic) ||
	    local->len != SRNIC_ATOMIC_SIZE)
		return IB_WC_REM_INV_REQ_ERR;
	mr = srnic_rkey_lookup(dest, srnic_resp_pd(dest, xsrq), wqe->rdma.rkey,
			       IB_ACCESS_REMOTE_WRITE, wqe->rdma.remote_addr,
			       SRNIC_ATOMIC_SIZE);
	if (IS_ERR(mr))
		return IB_WC_REM_ACCESS_ERR;
	if (srnic_sgl_xfer(local, 0, (u8 *)&value, sizeof(value), false)) {
		srnic_mr_put(mr);
		return IB_WC_LOC_PROT_ERR;
	}
	err = srnic_atomic_write_execute(mr, wqe->rdma.remote_addr, value);
	srnic_mr_put(mr);
	if (err)
		return err == -EINVAL ? IB_WC_REM_INV_REQ_ERR :
					IB_WC_REM_ACCESS_ERR;
	return IB_WC_SUCCESS;
}

/*
 * Execute one WQE against a local destination QP. @local holds the
 * requester's own side of the message (source for SEND/WRITE, target for
 * READ, result for an atomic). Returns the requester's completion status
 * in @status.
 */
static enum srnic_exec srnic_local_execute(struct srnic_qp *qp,
					   const struct srnic_send_wqe *wqe,
					   struct srnic_sgl *local,
					   enum ib_wc_status *status)
{
	struct srnic_qp *dest = srnic_local_dest_get(qp);
	struct srnic_sgl *remote = &qp->req.rsgl;
	bool rnr = false, dest_fatal = false, no_answer = false;
	struct srnic_srq *xsrq = NULL;
	bool to_tgt = dest && dest->ibqp.qp_type == IB_QPT_XRC_TGT;

	*status = IB_WC_SUCCESS;
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
		    !srnic_wq_has_work(dest, srnic_resp_wq(dest, xsrq))) {
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
	default:
		*status = IB_WC_REM_INV_REQ_ERR;
		break;
	}
	srnic_sgl_put(remote);
executed:

	/* The responder's RNR NAK carries its timer. */
	if (rnr)
		qp->req.rnr_timer = READ_ONCE(dest->attrs.min_rnr_timer);
	/*
	 * A responder that detected an error goes to the error state. A UC
	 * responder drops a message with a remote error (bad R_Key, no
	 * receive WQE, a SEND too long for the receive WQE, which stays)
	 * silently, and a UC requester learns of nothing.
	 */
	if (!srnic_qp_acked(qp)) {
		if (rnr || (*status != IB_WC_SUCCESS && !dest_fatal))
			srnic_count(to_srnic_dev(dest->ibqp.device),
				    rnr ? SRNIC_CNT_RX_DROP_NO_RECV_WQE :
					  SRNIC_CNT_RX_DROP_UC);
		rnr = false;
		*status = IB_WC_SUCCESS;
	} else if (*status == IB_WC_REM_ACCESS_ERR ||
		   *status == IB_WC_REM_INV_REQ_ERR) {
		dest_fatal = true;
	}
	if (dest_fatal)
		srnic_qp_to_error(dest, IB_EVENT_QP_REQ_ERR);
out:
	if (xsrq)
		srnic_srq_put(xsrq);
	if (dest)
		srnic_qp_put(dest);
	if (no_answer)
		return SRNIC_EXEC_NO_ANSWER;
	return rnr ? SRNIC_EXEC_RNR : SRNIC_EXEC_DONE;
}

/* ---- The requester ---------------------------------------------------- */

/**
 * srnic_wqe_opcode_supported() - may a send WQE of @qp carry @opcode?
 * @qp: an RC or UC QP
 * @opcode: the WQE's opcode (IB_WR_*), from the ring: untrusted
 *
 * A WQE that may not completes with IB_WC_LOC_QP_OP_ERR.
 */
bool srnic_wqe_opcode_supported(struct srnic_qp *qp, u8 opcode)
{
	switch (opcode) {
	case IB_WR_SEND:
	case IB_WR_SEND_WITH_IMM:
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_WRITE_WITH_IMM:
		return true;
	case IB_WR_BIND_MW:
	case IB_WR_LOCAL_INV:
		return true;
	case IB_WR_REG_MR:	/* names a kernel MR: kernel QPs only */
		return !qp->ibqp.uobject;
	case IB_WR_RDMA_READ:
	case IB_WR_ATOMIC_CMP_AND_SWP:
	case IB_WR_ATOMIC_FETCH_AND_ADD:
	case IB_WR_SEND_WITH_INV:
	case SRNIC_WR_ATOMIC_WRITE:
		return srnic_qp_acked(qp);	/* not on UC */
	default:
		return false;
	}
}

/**
 * srnic_req_local_sgl() - the requester's side of a message
 * @qp: the requester
 * @wqe: a snapshot of the send WQE
 * @sgl: its SGEs, resolved with the access the operation needs, or its
 *	 inline data
 *
 * An atomic's result goes to exactly one SGE of SRNIC_ATOMIC_SIZE bytes,
 * and an ATOMIC WRITE's value is exactly SRNIC_ATOMIC_SIZE bytes of inline
 * data, whatever the QP's max_inline_data (the provider refuses anything
 * else with EINVAL; a ring scribbled on completes with a local error).
 *
 * Return: IB_WC_SUCCESS or the local error to complete the WQE with.
 */
enum ib_wc_status srnic_req_local_sgl(struct srnic_qp *qp,
				      const struct srnic_send_wqe *wqe,
				      struct srnic_sgl *sgl)
{
	struct srnic_dev *sdev = to_srnic_dev(qp->ibqp.device);
	const struct srnic_sge *sge = (const struct srnic_sge *)(wqe + 1);
	u32 room = qp->sq.ring.entry_size - sizeof(*wqe);

	if (wqe->opcode == SRNIC_WR_ATOMIC_WRITE &&
	    (!(wqe->flags & SRNIC_WQE_INLINE) ||
	     wqe->inline_len != SRNIC_ATOMIC_SIZE))
		return IB_WC_LOC_QP_OP_ERR;
	if (wqe->flags & SRNIC_WQE_INLINE) {
		u32 max_inline = wqe->opcode == SRNIC_WR_ATOMIC_WRITE ?
				 SRNIC_ATOMIC_SIZE : qp->max_inline;

		if (srnic_wr_is_rd_atomic(wqe->opcode) ||
		    wqe->inline_len > min(room, max_inline))
			return IB_WC_LOC_QP_OP_ERR;
		sgl->num = 0;
		sgl->len = wqe->inline_len;
		if (wqe->inline_len)
			sgl->seg[sgl->num++] = (struct srnic_seg) {
				.buf = (const u8 *)(wqe + 1),
				.len = wqe->inline_len,
			};
		return IB_WC_SUCCESS;
	}
	if (wqe->num_sge > qp->sq.max_sge)
		return IB_WC_LOC_QP_OP_ERR;
	if (srnic_wr_is_atomic(wqe->opcode) &&
	    (wqe->num_sge != 1 || sge->length != SRNIC_ATOMIC_SIZE))
		return IB_WC_LOC_LEN_ERR;
	return srnic_sgl_get(sdev, to_srnic_pd(qp->ibqp.pd), sge, wqe->num_sge,
			     srnic_wr_is_rd_atomic(wqe->opcode) ?
			     IB_ACCESS_LOCAL_WRITE : 0, sgl);
}

/**
 * srnic_req_complete() - complete a send WQE, if signaled or failed
 * @qp: the requester
 * @wqe: a snapshot of the WQE
 * @status: its completion status
 * @len: message length (reported for READs)
 *
 * A lost completion (CQ overrun) sets @qp->req.fatal.
 */
void srnic_req_complete(struct srnic_qp *qp, const struct srnic_send_wqe *wqe,
			enum ib_wc_status status, u64 len)
{
	struct srnic_cqe cqe = {
		.wr_id = wqe->wr_id,
		.status = status,
		.opcode = srnic_wqe_wc_opcode(wqe->opcode),
		.byte_len = srnic_wr_is_rd_atomic(wqe->opcode) ? len : 0,
		.qp_num = qp->ibqp.qp_num,
	};

	if (status == IB_WC_SUCCESS && !(wqe->flags & SRNIC_WQE_SIGNALED) &&
	    !qp->sq_sig_all)
		return;
	if (srnic_cq_post(to_srnic_cq(qp->ibqp.send_cq), &cqe, false))
		qp->req.fatal = true;
}

/*
 * Stop the requester for @delay ns: srnic_req_rnr_wait_over() says when
 * it is over, and a timer schedules the task then. The RNR wait and the
 * wait for a local responder that did not answer both use it.
 */
static void srnic_req_wait_ns(struct srnic_qp *qp, u64 delay)
{
	qp->req.rnr_until = ktime_get_ns() + delay;
	qp->req.rnr_waiting = true;
	hrtimer_start(&qp->req.rnr_hrtimer, ns_to_ktime(delay),
		      HRTIMER_MODE_REL);
}

/**
 * srnic_req_rnr_wait() - wait before retrying, as an RNR NAK asks
 * @qp: the QP, from its task
 * @code: the responder's RNR timer code (its min_rnr_timer)
 *
 * The requester stops until the delay @code stands for has passed (not
 * rounded up to a jiffy): then a timer schedules the task again.
 */
void srnic_req_rnr_wait(struct srnic_qp *qp, u8 code)
{
	srnic_req_wait_ns(qp, (u64)srnic_rnr_timer_usecs_of(code) *
			  NSEC_PER_USEC);
}

/**
 * srnic_req_rnr_wait_over() - may the requester go on after an RNR wait?
 * @qp: the QP, from its task
 *
 * Return: true if no RNR wait is in progress (any more).
 */
bool srnic_req_rnr_wait_over(struct srnic_qp *qp)
{
	if (!qp->req.rnr_waiting)
		return true;
	if (ktime_get_ns() < qp->req.rnr_until)
		return false;
	qp->req.rnr_waiting = false;
	return true;
}

/*
 * Wait before retrying a WQE no local responder answered: the local ACK
 * timeout, backing off as the wire requester's does (timeout 0, infinite
 * over the wire, retries at the timeout's floor for ever).
 */
static void srnic_req_no_answer_wait(struct srnic_qp *qp)
{
	srnic_req_wait_ns(qp, jiffies_to_nsecs(srnic_req_ack_timeout(qp)));
}

/**
 * srnic_req_fetch() - snapshot the WQE at the SQ's consumer index
 * @qp: the QP, from its task
 *
 * The copy goes to @qp->req.wqe, its index to @qp->req.index.
 *
 * Return: false if the SQ is empty.
 */
bool srnic_req_fetch(struct srnic_qp *qp)
{
	struct srnic_wq *sq = &qp->sq;
	unsigned long flags;
	bool fetched = false;

	spin_lock_irqsave(&sq->lock, flags);
	if (srnic_wq_read_producer(qp, sq) != sq->consumer) {
		memcpy(qp->req.wqe, srnic_queue_entry(&sq->ring, sq->consumer),
		       sq->ring.entry_size);
		qp->req.index = sq->consumer;
		fetched = true;
	}
	spin_unlock_irqrestore(&sq->lock, flags);
	return fetched;
}

/**
 * srnic_sq_publish_completed() - say that the retired WQEs are complete
 * @qp: the QP
 *
 * Once their completions are in the CQ and a failed one has put the QP in
 * the error state. The consumer index goes back to the provider earlier,
 * at retirement, as a NIC frees a slot before its completion shows: a
 * consumer that polled a completion may fill the slot at once. The
 * provider's direct path takes an SQ whose completed index caught up with
 * its producer index to mean that nothing posted is still to complete.
 */
void srnic_sq_publish_completed(struct srnic_qp *qp)
{
	struct srnic_wq *sq = &qp->sq;
	unsigned long flags;

	spin_lock_irqsave(&sq->lock, flags);
	/* The completions and the error state come first. */
	smp_store_release(&sq->ring.ctrl->completed, sq->consumer);
	spin_unlock_irqrestore(&sq->lock, flags);
}

/*
 * Take the fetched WQE off the SQ, unless a flush (the QP entered the
 * error state meanwhile) already completed it. Returns whether it was
 * retired here (and must be completed).
 */
static bool srnic_req_retire(struct srnic_qp *qp)
{
	struct srnic_wq *sq = &qp->sq;
	unsigned long flags;
	bool retired = false;

	spin_lock_irqsave(&sq->lock, flags);
	if (sq->consumer == qp->req.index) {
		sq->consumer++;
		/* Done with the slot: the provider may reuse it. */
		smp_store_release(&sq->ring.ctrl->consumer, sq->consumer);
		retired = true;
	}
	spin_unlock_irqrestore(&sq->lock, flags);
	return retired;
}

/**
 * srnic_req_finish() - retire the fetched WQE and complete it
 * @qp: the QP, from its task
 * @status: the WQE's outcome
 * @len: bytes it moved (for the completion of a READ or atomic)
 *
 * A failed WQE, or a completion the CQ had no room for, puts the QP in
 * the error state; then the WQE counts as completed.
 *
 * Return: whether the requester may go on (false: flushed meanwhile, or
 * the QP is now in the error state).
 */
bool srnic_req_finish(struct srnic_qp *qp, enum ib_wc_status status, u64 len)
{
	bool ok;

	if (!srnic_req_retire(qp))
		return false;	/* flushed: the QP is in the error state */
	srnic_req_complete(qp, qp->req.wqe, status, len);
	ok = status == IB_WC_SUCCESS && !qp->req.fatal;
	if (!ok) {
		qp->req.fatal = false;
		srnic_qp_to_error(qp, 0);
	}
	srnic_sq_publish_completed(qp);
	return ok;
}

/*
 * Process one WQE. Returns false when the requester must stop: nothing
 * to do, waiting for RNR, or the QP left RTS.
 */
static bool srnic_req_step(struct srnic_qp *qp)
{
	struct srnic_send_wqe *wqe = qp->req.wqe;
	struct srnic_sgl *local = &qp->req.sgl;
	enum ib_wc_status status;
	enum srnic_exec exec;
	u64 len;

	if (READ_ONCE(qp->state) != IB_QPS_RTS)
		return false;
	if (!srnic_req_rnr_wait_over(qp))
		return false;
	if (!srnic_req_fetch(qp))
		return false;

	if (!srnic_wqe_opcode_supported(qp, wqe->opcode))
		status = IB_WC_LOC_QP_OP_ERR;
	else
		status = srnic_req_local_sgl(qp, wqe, local);
	exec = SRNIC_EXEC_DONE;
	if (status == IB_WC_SUCCESS && srnic_wr_is_local(wqe->opcode)) {
		status = srnic_local_op(qp, wqe);
	} else if (status == IB_WC_SUCCESS) {
		if (qp->req.local_ifindex)
			exec = srnic_local_execute(qp, wqe, local, &status);
		else
			status = IB_WC_RETRY_EXC_ERR;	/* no wire path yet */
	}
	len = local->len;
	srnic_sgl_put(local);

	if (exec == SRNIC_EXEC_RNR) {
		/* What the local responder answered, as over the wire. */
		srnic_count(to_srnic_dev(qp->ibqp.device),
			    SRNIC_CNT_RNR_NAKS_RECEIVED);
		if (qp->attrs.rnr_retry == SRNIC_RNR_RETRY_INFINITE ||
		    qp->req.rnr_retries_left--) {
			srnic_req_rnr_wait(qp, qp->req.rnr_timer);
			return false;
		}
		status = IB_WC_RNR_RETRY_EXC_ERR;
	} else if (exec == SRNIC_EXEC_NO_ANSWER) {
		srnic_count(to_srnic_dev(qp->ibqp.device), SRNIC_CNT_TIMEOUTS);
		if (!qp->attrs.timeout || qp->req.retries_left) {
			srnic_req_no_answer_wait(qp);
			if (qp->attrs.timeout)
				qp->req.retries_left--;
			return false;
		}
		status = IB_WC_RETRY_EXC_ERR;
	}
	qp->req.rnr_retries_left = qp->attrs.rnr_retry;
	qp->req.retries_left = qp->attrs.retry_cnt;

	return srnic_req_finish(qp, status, len);
}

/* ---- Engine callbacks ------------------------------------------------- */

#define SRNIC_REQ_BUDGET 16
#define SRNIC_RX_BUDGET 64

/* Hand the received packets to the responder or the requester. */
static bool srnic_qp_rx(struct srnic_qp *qp)
{
	unsigned int budget = SRNIC_RX_BUDGET;
	struct sk_buff *skb;

	/* Work the requester's retries made stale goes first. */
	if (qp->resp.reading || skb_queue_len_lockless(&qp->rxq) > 1)
		srnic_resp_went_back(qp);
	while (budget--) {
		/* READ responses go out before later requests are served. */
		if (qp->resp.reading)
			break;
		skb = srnic_rx_dequeue(qp);
		if (!skb)
			break;
		if (srnic_skb_pkt(skb)->flags & SRNIC_OPF_REQUEST)
			srnic_resp_rx_request(qp, skb);
		else
			srnic_req_rx_response(qp, skb);
	}
	srnic_resp_flush_ack(qp);
	return !skb_queue_empty_lockless(&qp->rxq);
}

/**
 * srnic_queue_set_need_wakeup() - ask for doorbells on a queue, or not
 * @q: the queue
 * @on: set SRNIC_QUEUE_NEED_WAKEUP, or clear it (not on a queue in error)
 */
void srnic_queue_set_need_wakeup(struct srnic_queue *q, bool on)
{
	u32 old, new;

	do {
		old = READ_ONCE(q->ctrl->flags);
		/* A queue in error keeps asking for doorbells. */
		if (!on && (old & SRNIC_QUEUE_ERROR))
			return;
		new = on ? old | SRNIC_QUEUE_NEED_WAKEUP :
			   old & ~SRNIC_QUEUE_NEED_WAKEUP;
	} while (new != old && cmpxchg(&q->ctrl->flags, old, new) != old);
}

/* What a run of an RC QP's task does; see srnic_qp_run(). */
static bool srnic_qp_work(struct srnic_qp *qp)
{
	unsigned int budget = SRNIC_REQ_BUDGET;
	bool more;

	switch (READ_ONCE(qp->state)) {
	case IB_QPS_ERR:
		/* A QP in error completes what the provider still posts. */
		srnic_rc_reset(qp);
		srnic_qp_task_flush(qp);
		return false;
	case IB_QPS_RESET:
	case IB_QPS_INIT:
		srnic_rc_reset(qp);
		return false;
	default:
		break;
	}
	/*
	 * The engine is awake and polls this SQ until it sleeps again: posts
	 * need no doorbell, whatever set the flag (a state change, a sleep).
	 */
	srnic_queue_set_need_wakeup(&qp->sq.ring, false);
	/* READ responses in progress, requests and responses, new READs. */
	srnic_resp_run(qp, SRNIC_RX_BUDGET);
	more = srnic_qp_rx(qp);
	more |= srnic_resp_run(qp, SRNIC_RX_BUDGET);
	if (!qp->req.local_ifindex)
		return srnic_req_wire_run(qp, SRNIC_RX_BUDGET) || more;
	while (budget--)
		if (!srnic_req_step(qp))
			return more;
	return true;
}

/*
 * One run of an RC QP's task. The MR references it took are all dropped
 * before it returns, whatever state the QP is left in: the requester's
 * and responder's caches are looked up again by the next run. So a
 * reference lasts one bounded run, never a retry, an RNR wait, a peer
 * that stopped mid-message or a QP in the error state nobody touches any
 * more: srnic_dereg_mr() relies on it.
 */
static bool srnic_qp_run(struct srnic_engine_task *task)
{
	struct srnic_qp *qp = container_of(task, struct srnic_qp, task);
	bool more;

	/*
	 * The QP went through RESET since the last run. Its task need not
	 * have run meanwhile (its engine was busy with another QP, or the
	 * consumer is quick): the QP may already be back in RTR or RTS, and
	 * a receive WQE, a message in progress, a READ being answered or
	 * atomics to replay of the old connection must not meet the new
	 * one's packets. Packets of the new one stay queued.
	 */
	if (atomic_xchg(&qp->wire_reset, 0)) {
		/* RESET discarded the receive WQE held: no flush completion. */
		qp->resp.have_rwqe = false;
		srnic_req_reset(qp);
		srnic_resp_reset(qp);
	}
	more = srnic_qp_work(qp);

	srnic_req_put_mrs(qp);
	srnic_resp_put_mrs(qp);
	return more;
}

static bool srnic_qp_has_work(struct srnic_engine_task *task)
{
	struct srnic_qp *qp = container_of(task, struct srnic_qp, task);

	if (!skb_queue_empty_lockless(&qp->rxq) || qp->resp.reading)
		return true;
	if (!qp->req.local_ifindex)
		return srnic_req_wire_has_work(qp);
	return !qp->req.rnr_waiting && srnic_wq_has_work(qp, &qp->sq);
}

static bool srnic_qp_prepare_sleep(struct srnic_engine_task *task)
{
	struct srnic_qp *qp = container_of(task, struct srnic_qp, task);

	/*
	 * A requester waiting for ACKs, or for the end of an RNR wait, runs
	 * again when they (or its timers) come, and looks at the SQ then:
	 * posts meanwhile need no doorbell.
	 */
	if (qp->req.local_ifindex ? qp->req.rnr_waiting :
				    srnic_req_wire_waiting(qp))
		return srnic_qp_has_work(task);
	srnic_qp_ask_doorbells(qp);
	return srnic_qp_has_work(task);
}

/**
 * srnic_qp_ask_doorbells() - the engine stops polling the QP's SQ
 * @qp: the QP; the caller re-reads the SQ's producer index afterwards
 */
void srnic_qp_ask_doorbells(struct srnic_qp *qp)
{
	srnic_queue_set_need_wakeup(&qp->sq.ring, true);
	/*
	 * Flag before the re-read of the producer index; pairs with the
	 * provider's fence between publishing an index and reading flags.
	 */
	smp_mb();
}

/**
 * srnic_qp_woken() - engine callback: polling again, no doorbells needed
 * @task: the QP's task (RC, UC or UD)
 */
void srnic_qp_woken(struct srnic_engine_task *task)
{
	struct srnic_qp *qp = container_of(task, struct srnic_qp, task);

	srnic_queue_set_need_wakeup(&qp->sq.ring, false);
}

const struct srnic_engine_task_ops srnic_qp_task_ops = {
	.run = srnic_qp_run,
	.has_work = srnic_qp_has_work,
	.prepare_sleep = srnic_qp_prepare_sleep,
	.woken = srnic_qp_woken,
};

static enum hrtimer_restart srnic_req_rnr_timer(struct hrtimer *t)
{
	struct srnic_qp *qp = container_of(t, struct srnic_qp,
					   req.rnr_hrtimer);

	srnic_engine_task_schedule(&qp->task);
	return HRTIMER_NORESTART;
}

/**
 * srnic_rc_init() - requester and responder state of a new QP
 * @qp: the QP, its rings set up
 */
int srnic_rc_init(struct srnic_qp *qp)
{
	int err;

	skb_queue_head_init(&qp->rxq);
	err = dst_cache_init(&qp->route_cache, GFP_KERNEL);
	if (err)
		return err;
	hrtimer_setup(&qp->req.rnr_hrtimer, srnic_req_rnr_timer, CLOCK_MONOTONIC,
		      HRTIMER_MODE_REL);
	qp->req.wqe = kmalloc(qp->sq.ring.entry_size, GFP_KERNEL);
	/* Any responder's receive WQE fits: they are bounded by the ABI. */
	qp->req.rwqe = kmalloc(SRNIC_MAX_RQ_ENTRY_SIZE, GFP_KERNEL);
	if (!qp->req.wqe || !qp->req.rwqe) {
		err = -ENOMEM;
		goto err;
	}
	err = srnic_req_init(qp);
	if (err)
		goto err;
	err = srnic_resp_init(qp);
	if (err)
		goto err;
	return 0;
err:
	srnic_rc_cleanup(qp);
	return err;
}

/**
 * srnic_rc_cleanup() - undo srnic_rc_init(), the QP's task stopped
 * @qp: the QP
 */
void srnic_rc_cleanup(struct srnic_qp *qp)
{
	hrtimer_cancel(&qp->req.rnr_hrtimer);
	srnic_resp_cleanup(qp);
	srnic_req_cleanup(qp);
	skb_queue_purge(&qp->rxq);
	kfree(qp->req.wqe);
	kfree(qp->req.rwqe);
	qp->req.wqe = NULL;
	qp->req.rwqe = NULL;
	dst_cache_destroy(&qp->route_cache);
}

/**
 * srnic_rc_reset() - forget the wire state of a QP in error or reset
 * @qp: the QP; called by its task, or with the task not running
 *
 * Outstanding WQEs are flushed from the SQ by the caller; packets still
 * queued are dropped.
 */
void srnic_rc_reset(struct srnic_qp *qp)
{
	skb_queue_purge(&qp->rxq);
	srnic_req_reset(qp);
	srnic_resp_reset(qp);
}

/**
 * srnic_path_init() - the path to a destination, from an address vector
 * @path: the result
 * @sgid: the source GID (RoCE v2)
 * @grh: the destination's global route
 * @lqpn: the sending QP
 * @rqpn: the destination QP (with @lqpn, the UDP source port's entropy
 *	  when the flow label is 0)
 *
 * Return: 0, or -EINVAL when the GIDs mix IPv4 and IPv6.
 */
int srnic_path_init(struct srnic_path *path, const union ib_gid *sgid,
		    const struct ib_global_route *grh, u32 lqpn, u32 rqpn)
{
	u32 fl = grh->flow_label;

	memset(path, 0, sizeof(*path));
	path->ipv6 = !ipv6_addr_v4mapped((struct in6_addr *)sgid->raw);
	if (path->ipv6 != !ipv6_addr_v4mapped((struct in6_addr *)grh->dgid.raw))
		return -EINVAL;
	if (path->ipv6) {
		memcpy(&path->saddr.v6, sgid->raw, 16);
		memcpy(&path->daddr.v6, grh->dgid.raw, 16);
	} else {
		memcpy(&path->saddr.v4, sgid->raw + 12, 4);
		memcpy(&path->daddr.v4, grh->dgid.raw + 12, 4);
	}
	path->traffic_class = grh->traffic_class;
	path->hop_limit = grh->hop_limit ? grh->hop_limit : 64;
	if (!fl)
		fl = rdma_calc_flow_label(lqpn, rqpn);
	path->flow_label = fl;
	path->sport = htons(rdma_get_udp_sport(fl, lqpn, rqpn));
	return 0;
}

/* The path of a wire destination, from the QP's address vector. */
static int srnic_rc_resolve_path(struct srnic_qp *qp)
{
	const struct ib_global_route *grh = &qp->attrs.ah_attr.grh;
	int err;

	memset(&qp->path, 0, sizeof(qp->path));
	if (!grh->sgid_attr)
		return -EINVAL;
	err = srnic_path_init(&qp->path, &grh->sgid_attr->gid, grh,
			      qp->ibqp.qp_num, qp->attrs.dest_qp_num);
	if (err)
		return err;
	/* Routes cached for an earlier destination are stale. */
	dst_cache_reset(&qp->route_cache);
	qp->path.route_cache = &qp->route_cache;
	return 0;
}

/**
 * srnic_rc_resolve_dest() - find out how to reach the QP's destination
 * @qp: a QP entering RTR, its AV set
 *
 * A destination GID owned by an srnic device in the QP's namespace is
 * served by local delivery (its netdev's ifindex is recorded); any other
 * by the wire. Either way the path is recorded: received packets are
 * checked against it. Context: process, state_lock held, before the QP's
 * state changes.
 *
 * Return: 0, or -EINVAL when the address vector mixes IPv4 and IPv6.
 */
int srnic_rc_resolve_dest(struct srnic_qp *qp)
{
	struct srnic_dev *sdev = to_srnic_dev(qp->ibqp.device);
	const union ib_gid *dgid = &qp->attrs.ah_attr.grh.dgid;
	struct net *net = read_pnet(&sdev->net);
	int err;

	err = srnic_rc_resolve_path(qp);
	if (err)
		return err;
	qp->req.local_ifindex = srnic_local_gid_ifindex(net, dgid);
	qp->req.rnr_retries_left = qp->attrs.rnr_retry;
	qp->req.rnr_waiting = false;
	qp->resp.epsn = qp->attrs.rq_psn;
	qp->resp.msn = 0;
	return 0;
}
