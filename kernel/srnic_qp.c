// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: queue pairs: creation, modify and query, kernel posts, doorbells.
 *
 * An RC, UC or UD QP is two rings (srnic-abi.h): the SQ of 64-byte struct
 * srnic_send_wqe headers followed by SGEs or inline data, and the RQ of
 * struct srnic_recv_wqe followed by SGEs (none for a QP attached to an SRQ,
 * srnic_srq.c, whose ring has the RQ's format, nor for XRC QPs: XRC_INI
 * only sends, XRC_TGT receives into the XRC SRQs its requests name). For
 * user QPs the provider fills them and publishes the producer index;
 * post_send/post_recv with no work requests are its doorbell. For kernel QPs srnic_post_send() and
 * srnic_post_recv() below write the same formats into kernel-only rings.
 *
 * modify_qp runs the IBTA state machine: ib_modify_qp_is_ok() validates the
 * transition and attribute mask, and srnic_qp_state.c enters the new state
 * (the queue flags it implies; RESET discards the posted WQEs, SQE and ERR
 * flush them with IB_WC_WR_FLUSH_ERR). A doorbell hands the SQ to the QP's
 * engine task (srnic_wq_doorbell()).
 */

#include <linux/log2.h>
#include <rdma/ib_cache.h>
#include <rdma/uverbs_ioctl.h>

#include "srnic.h"
#include "srnic_trace.h"

static_assert((int)IB_WR_RDMA_WRITE == (int)IB_UVERBS_WR_RDMA_WRITE &&
	      (int)IB_WR_SEND_WITH_INV == (int)IB_UVERBS_WR_SEND_WITH_INV);

/*
 * Send opcodes kernel RC QPs may post (UC: not READ, atomics and SEND with
 * invalidate; the provider has its own list). Fast registration and
 * invalidation are what the kernel ULPs build on (srnic_mr.c).
 */
static const bool srnic_kernel_send_opcode_ok[] = {
	[IB_WR_RDMA_WRITE] = true,
	[IB_WR_RDMA_WRITE_WITH_IMM] = true,
	[IB_WR_SEND] = true,
	[IB_WR_SEND_WITH_IMM] = true,
	[IB_WR_RDMA_READ] = true,
	[IB_WR_ATOMIC_CMP_AND_SWP] = true,
	[IB_WR_ATOMIC_FETCH_AND_ADD] = true,
	[IB_WR_LOCAL_INV] = true,
	[IB_WR_SEND_WITH_INV] = true,
	[IB_WR_REG_MR] = true,
};

/* Whether a kernel QP of @qp_type may post @opcode. */
static bool srnic_kernel_send_opcode_valid(enum ib_qp_type qp_type,
					   enum ib_wr_opcode opcode)
{
	if (qp_type == IB_QPT_UD || qp_type == IB_QPT_GSI)
		return opcode == IB_WR_SEND || opcode == IB_WR_SEND_WITH_IMM;
	if (opcode >= ARRAY_SIZE(srnic_kernel_send_opcode_ok) ||
	    !srnic_kernel_send_opcode_ok[opcode])
		return false;
	return qp_type != IB_QPT_UC ||
	       (!srnic_wr_is_rd_atomic(opcode) && opcode != IB_WR_SEND_WITH_INV);
}

/* The WQE of an IB_WR_REG_MR: which MR, and what it becomes. */
static int srnic_sq_write_reg_wqe(struct srnic_qp *qp,
				  struct srnic_send_wqe *wqe,
				  const struct ib_reg_wr *wr)
{
	struct ib_mr *ibmr = wr->mr;

	if (!ibmr || ibmr->device != qp->ibqp.device ||
	    ibmr->type != IB_MR_TYPE_MEM_REG)
		return -EINVAL;
	wqe->reg.iova = ibmr->iova;
	wqe->reg.length = ibmr->length;
	wqe->reg.mr_index = to_srnic_mr(ibmr)->index;
	wqe->reg.key = wr->key;
	wqe->reg.access = wr->access;
	return 0;
}

/* ---- Rings ------------------------------------------------------------ */

/* The receive capabilities do not matter to a QP with an SRQ. */
static int srnic_qp_check_caps(const struct ib_qp_cap *cap, bool has_srq)
{
	if (cap->max_send_wr > SRNIC_MAX_QP_WR ||
	    cap->max_send_sge > SRNIC_MAX_SGE ||
	    cap->max_inline_data > SRNIC_MAX_INLINE_DATA)
		return -EINVAL;
	if (!has_srq && (cap->max_recv_wr > SRNIC_MAX_QP_WR ||
			 cap->max_recv_sge > SRNIC_MAX_SGE))
		return -EINVAL;
	return 0;
}

/*
 * Doorbells in a row, each close to the one before with nothing received
 * in between, that make a stream. One would take a ping-pong whose every
 * turn posts two or three WQEs (UCX's UD transport sends its ACK beside
 * the reply; a ULP posts a READ and then a SEND) for a stream, and hand
 * its SQ to the engine's polling naps: 2 ms per round trip.
 */
#define SRNIC_SQ_STREAM_DOORBELLS 4U

/*
 * The doorbell syscall of a user QP's SQ. The requester's work is done in
 * the caller's context (srnic_engine_task_run_here()), as rxe does it in
 * the poster's system call: a ping-pong or an occasional post costs one
 * syscall and no thread's wake-up. A stream would cost a syscall per post
 * that way, so doorbells in a row (SRNIC_SQ_STREAM_DOORBELLS) that each
 * come within the engine's longest polling window of the previous one,
 * with no request received in between (nothing the poster waited for),
 * hand the SQ to the engine instead, which polls it: later posts need no
 * syscall while the stream lasts.
 * Received requests (@rx_msgs) tell the two apart: a bidirectional stream
 * is served like a ping-pong, a syscall per post, as by rxe.
 */
static void srnic_sq_doorbell(struct srnic_qp *qp)
{
	u32 rx = atomic_read(&qp->rx_msgs);
	u64 now = ktime_get_ns();
	u64 gap = now - READ_ONCE(qp->doorbell_ns);
	u32 streak = 0;

	/* Racy between threads posting to one QP: a hint, either way right. */
	if (gap < srnic_engine_stream_ns() &&
	    rx == READ_ONCE(qp->doorbell_rx_msgs))
		streak = min(READ_ONCE(qp->doorbell_streak) + 1,
			     SRNIC_SQ_STREAM_DOORBELLS);
	WRITE_ONCE(qp->doorbell_ns, now);
	WRITE_ONCE(qp->doorbell_rx_msgs, rx);
	WRITE_ONCE(qp->doorbell_streak, streak);
	if (streak >= SRNIC_SQ_STREAM_DOORBELLS) {
		srnic_sq_stream_begin(qp);
		srnic_engine_task_poll(&qp->task, gap);
	} else {
		srnic_engine_task_run_here(&qp->task);
	}
}

/*
 * A doorbell, or new kernel WQEs. In the error state the WQEs are flushed
 * right here, so they have completed when the post returns (as before the
 * engine existed, and as the tests rely on). Otherwise the QP's task
 * processes the SQ: a user QP's doorbell syscall runs it in the caller's
 * context unless another context is running it already (the engine wakes
 * only for what one budget leaves); a kernel RC, UC or XRC QP's post runs
 * it in the caller's context too, which may be atomic
 * (srnic_engine_task_kick()), so that a ULP's request and its answer
 * between two QPs of one host wake no thread; so does a kernel UD or GSI
 * QP's (ib_mad posts with interrupts disabled: the engine runs those). A
 * user RQ's doorbell runs the task the same way, once the QP may run
 * without sleeping. A kernel QP's receive WQEs need no
 * run: nothing waits for them (an RC message that finds the RQ empty is
 * answered with an RNR NAK, locally or on the wire, and its requester
 * retries on its own timer; a UC or UD one is dropped), and the responder
 * takes them as messages arrive.
 */
static void srnic_wq_doorbell(struct srnic_qp *qp, bool is_sq)
{
	enum ib_qp_state state = READ_ONCE(qp->state);

	trace_srnic_doorbell(&qp->ibqp, is_sq);
	/* An answer: the requests received are not a stream (net.c). */
	if (is_sq)
		atomic_set(&qp->rx_unanswered, 0);
	if (state == IB_QPS_ERR || (is_sq && state == IB_QPS_SQE))
		srnic_wq_flush(qp, is_sq ? &qp->sq : &qp->rq, is_sq);
	else if (is_sq && qp->ibqp.uobject)
		srnic_sq_doorbell(qp);
	else if (is_sq || qp->ibqp.uobject)
		srnic_engine_task_kick(&qp->task);
}

/* ---- create / destroy ------------------------------------------------- */

static int srnic_qp_map_rings(struct srnic_qp *qp, struct ib_udata *udata)
{
	struct srnic_ucontext *uctx =
		rdma_udata_to_drv_context(udata, struct srnic_ucontext, ibuc);
	struct srnic_create_qp_resp resp = {};
	int err;

	err = srnic_queue_map(&qp->sq.ring, &uctx->ibuc, &resp.sq);
	if (err)
		return err;
	if (qp->rq.ring.buf) {	/* resp.rq stays zero with an SRQ */
		err = srnic_queue_map(&qp->rq.ring, &uctx->ibuc, &resp.rq);
		if (err)
			return err;
	}
	resp.qpn = qp->ibqp.qp_num;
	return ib_copy_to_udata(udata, &resp,
				min_t(size_t, udata->outlen, sizeof(resp)));
}

/**
 * srnic_create_qp() - ib_device_ops.create_qp
 * @ibqp: the QP ib_core allocated
 * @init: type, CQs and capabilities; the capabilities are updated to
 *	  what the rings actually hold
 * @udata: driver data of a user QP; NULL for a kernel QP
 *
 * RC, UC, UD, XRC_INI and XRC_TGT; for kernel consumers also GSI (QP1, see
 * srnic_qp_is_ud()), for user ones also RAW_PACKET (srnic_raw.c). A QP
 * with an SRQ (@init->srq) and an XRC_INI QP have no RQ: their receive
 * capabilities are ignored and reported as zero. An
 * XRC_TGT QP (always a kernel object: ib_core shares it between
 * processes) has no CQ, no RQ and only a one-entry SQ that nothing may
 * post to; its requests name the XRC SRQs of @init->xrcd that receive
 * them.
 */
int srnic_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init,
		    struct ib_udata *udata)
{
	struct srnic_dev *sdev = to_srnic_dev(ibqp->device);
	struct srnic_qp *qp = to_srnic_qp(ibqp);
	struct srnic_ucontext *uctx = rdma_udata_to_drv_context(udata,
			struct srnic_ucontext, ibuc);
	bool xrc_tgt = init->qp_type == IB_QPT_XRC_TGT;
	/* A hash QP (RSS): no SQ or RQ, frames go to its table's WQs. */
	bool hash = init->rwq_ind_tbl;
	struct ib_qp_cap *cap = &init->cap;
	u32 qpn, sq_payload;
	bool has_rq;
	int err;

	if ((init->qp_type != IB_QPT_RC && init->qp_type != IB_QPT_UC &&
	     init->qp_type != IB_QPT_UD && init->qp_type != IB_QPT_XRC_INI &&
	     !xrc_tgt && (init->qp_type != IB_QPT_GSI || udata) &&
	     (init->qp_type != IB_QPT_RAW_PACKET || !udata)) ||
	    init->create_flags ||
	    (init->srq && init->srq->srq_type != IB_SRQT_BASIC &&
	     /* Tag matching is for RC (IB_TM_CAP_RNDV_RC). */
	     (init->srq->srq_type != IB_SRQT_TM ||
	      init->qp_type != IB_QPT_RC)))
		return -EOPNOTSUPP;
	if (hash) {
		err = srnic_rss_qp_init(qp, init, udata);
		if (err)
			return err;
		memset(cap, 0, sizeof(*cap));
	} else if (xrc_tgt) {
		if (!init->xrcd)
			return -EINVAL;
		memset(cap, 0, sizeof(*cap));
	} else if (!init->send_cq ||
		   (!init->recv_cq && init->qp_type != IB_QPT_XRC_INI)) {
		return -EINVAL;
	}
	has_rq = !init->srq && !xrc_tgt && !hash &&
		 init->qp_type != IB_QPT_XRC_INI;
	err = srnic_qp_check_caps(cap, !has_rq);
	if (err)
		goto err_free_rss;
	if (udata && !hash) {
		err = srnic_udata_check_reserved_req(udata);
		if (err)
			goto err_free_rss;
	}

	spin_lock_init(&qp->state_lock);
	refcount_set(&qp->ref, 1);
	init_completion(&qp->released);
	qp->state = IB_QPS_RESET;
	qp->sq_sig_all = init->sq_sig_type == IB_SIGNAL_ALL_WR;
	qp->xrcd = xrc_tgt ? to_srnic_xrcd(init->xrcd) : NULL;

	sq_payload = max_t(u32, cap->max_send_sge * sizeof(struct srnic_sge),
			   cap->max_inline_data);
	err = srnic_wq_init(&qp->sq, uctx, cap->max_send_wr,
			    sizeof(struct srnic_send_wqe), sq_payload);
	if (err)
		goto err_free_rss;
	if (has_rq) {
		err = srnic_wq_init(&qp->rq, NULL, cap->max_recv_wr,
				    sizeof(struct srnic_recv_wqe),
				    cap->max_recv_sge * sizeof(struct srnic_sge));
		if (err)
			goto err_destroy_sq;
	}
	qp->max_inline = min_t(u32, qp->sq.ring.entry_size -
			       sizeof(struct srnic_send_wqe),
			       SRNIC_MAX_INLINE_DATA);

	/* Reserve the number; the QP is published once complete. */
	if (init->qp_type == IB_QPT_GSI) {
		/* ib_mad's QP1, one per device (srnic has one port). */
		qpn = SRNIC_GSI_QPN;
		err = xa_insert(&sdev->qps, qpn, NULL, GFP_KERNEL);
	} else {
		err = xa_alloc_cyclic(&sdev->qps, &qpn, NULL,
				      XA_LIMIT(SRNIC_MIN_QPN, SRNIC_MAX_QPN),
				      &sdev->next_qpn, GFP_KERNEL);
		if (err == -EBUSY)
			err = -ENOMEM;
	}
	if (err < 0)
		goto err_destroy_rq;
	ibqp->qp_num = qpn;

	if (udata) {
		err = srnic_qp_map_rings(qp, udata);
		if (err)
			goto err_erase;
	}
	err = srnic_rc_init(qp);
	if (err)
		goto err_erase;
	srnic_engine_task_init(sdev, &qp->task,
			       srnic_qp_is_ud(qp) ? &srnic_ud_task_ops :
			       srnic_qp_is_raw(qp) ? &srnic_raw_task_ops :
			       &srnic_qp_task_ops, qpn);
	/*
	 * A kernel RC, UC, UD or XRC_INI QP's work never needs to sleep: its
	 * posts and received packets run it where they come from.
	 */
	if (!udata && !xrc_tgt)
		srnic_engine_task_allow_atomic(&qp->task);
	srnic_engine_task_start(&qp->task);

	if (!xrc_tgt && !hash) {
		cap->max_send_wr = qp->sq.max_wr;
		cap->max_recv_wr = qp->rq.max_wr;
		cap->max_send_sge = qp->sq.max_sge;
		cap->max_recv_sge = qp->rq.max_sge;
		cap->max_inline_data = qp->max_inline;
	}

	/* Whose memory a loan of its rings exposes (srnic_direct.c). */
	if (udata) {
		qp->owner_cred = get_current_cred();
		qp->owner_mm = current->mm;
		mmgrab(qp->owner_mm);
		qp->owner_tgid = get_task_pid(current, PIDTYPE_TGID);
	}
	/* Its completions end any loan of its CQs. */
	if (init->send_cq)
		srnic_direct_cq_user_add(to_srnic_cq(init->send_cq));
	if (init->recv_cq)
		srnic_direct_cq_user_add(to_srnic_cq(init->recv_cq));

	xa_store(&sdev->qps, qpn, qp, GFP_KERNEL);	/* reserved: no alloc */
	return 0;

err_erase:
	xa_erase(&sdev->qps, qpn);
err_destroy_rq:
	srnic_queue_destroy(&qp->rq.ring);
err_destroy_sq:
	srnic_queue_destroy(&qp->sq.ring);
err_free_rss:
	kfree(qp->rss);
	qp->rss = NULL;
	return err;
}

/**
 * srnic_destroy_qp() - ib_device_ops.destroy_qp
 * @ibqp: the QP
 * @udata: unused
 *
 * Lets a UD QP in RTS send what was posted (srnic_ud_drain_sq()),
 * detaches it from its multicast groups, unpublishes it, waits for lookups
 * in progress (RCU) and for the references they took, then frees the rings
 * and waits for its CQs' completion events in flight.
 */
int srnic_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata)
{
	struct srnic_dev *sdev = to_srnic_dev(ibqp->device);
	struct srnic_qp *qp = to_srnic_qp(ibqp);

	srnic_ud_drain_sq(qp);
	xa_erase(&sdev->qps, ibqp->qp_num);
	srnic_mcast_detach_qp(qp);
	/*
	 * ib_core frees @qp when we return: no lookup may still see it. An
	 * expedited grace period: a normal one takes milliseconds (16 ms per
	 * QP measured in the VM), and a process that exits with 100 000 QPs
	 * destroys them one after the other.
	 */
	synchronize_rcu_expedited();
	srnic_qp_put(qp);
	wait_for_completion(&qp->released);
	/* No grant can find it now: revoke its direct windows. */
	srnic_direct_qp_destroyed(qp);
	/* No requester of another QP can reach it: stop its own. */
	srnic_engine_task_stop(&qp->task);
	srnic_rc_cleanup(qp);

	srnic_queue_destroy(&qp->rq.ring);
	srnic_queue_destroy(&qp->sq.ring);
	kfree(qp->rss);
	rdma_destroy_ah_attr(&qp->attrs.ah_attr);
	if (ibqp->send_cq) {
		srnic_direct_cq_user_del(to_srnic_cq(ibqp->send_cq));
		srnic_cq_wait_events(to_srnic_cq(ibqp->send_cq));
	}
	if (ibqp->recv_cq) {
		srnic_direct_cq_user_del(to_srnic_cq(ibqp->recv_cq));
		srnic_cq_wait_events(to_srnic_cq(ibqp->recv_cq));
	}
	if (qp->owner_cred) {
		put_cred(qp->owner_cred);
		mmdrop(qp->owner_mm);
		put_pid(qp->owner_tgid);
	}
	return 0;
}

/* ---- modify / query --------------------------------------------------- */

/* The primary path: RoCE v2 only, with a resolved source GID. */
static int srnic_qp_check_av(const struct rdma_ah_attr *ah)
{
	const struct ib_gid_attr *sgid_attr = ah->grh.sgid_attr;

	if (ah->type != RDMA_AH_ATTR_TYPE_ROCE ||
	    !(rdma_ah_get_ah_flags(ah) & IB_AH_GRH) ||
	    rdma_ah_get_port_num(ah) != SRNIC_PORT)
		return -EINVAL;
	if (!sgid_attr || sgid_attr->gid_type != IB_GID_TYPE_ROCE_UDP_ENCAP)
		return -EINVAL;
	return 0;
}

static int srnic_qp_check_attrs(const struct ib_qp_attr *attr, int mask)
{
	if ((mask & IB_QP_PORT) && attr->port_num != SRNIC_PORT)
		return -EINVAL;
	if ((mask & IB_QP_PKEY_INDEX) &&
	    attr->pkey_index >= SRNIC_PKEY_TABLE_LEN)
		return -EINVAL;
	if ((mask & IB_QP_PATH_MTU) &&
	    (attr->path_mtu < IB_MTU_256 || attr->path_mtu > IB_MTU_4096))
		return -EINVAL;
	if ((mask & IB_QP_MAX_QP_RD_ATOMIC) &&
	    attr->max_rd_atomic > SRNIC_MAX_RD_ATOMIC)
		return -EINVAL;
	if ((mask & IB_QP_MAX_DEST_RD_ATOMIC) &&
	    attr->max_dest_rd_atomic > SRNIC_MAX_RD_ATOMIC)
		return -EINVAL;
	if ((mask & IB_QP_TIMEOUT) && attr->timeout > 31)
		return -EINVAL;
	if ((mask & IB_QP_RETRY_CNT) && attr->retry_cnt > 7)
		return -EINVAL;
	if ((mask & IB_QP_RNR_RETRY) && attr->rnr_retry > 7)
		return -EINVAL;
	if ((mask & IB_QP_MIN_RNR_TIMER) && attr->min_rnr_timer > 31)
		return -EINVAL;
	if ((mask & IB_QP_RATE_LIMIT) &&
	    srnic_rate_check_limit(attr->rate_limit))
		return -EINVAL;
	if (mask & IB_QP_AV)
		return srnic_qp_check_av(&attr->ah_attr);
	return 0;
}

static void srnic_qp_store_attrs(struct srnic_qp *qp,
				 const struct ib_qp_attr *attr, int mask)
{
	struct srnic_dev *sdev = to_srnic_dev(qp->ibqp.device);
	struct srnic_qp_attrs *a = &qp->attrs;

	if (mask & IB_QP_PKEY_INDEX)
		a->pkey_index = attr->pkey_index;
	if (mask & IB_QP_QKEY)
		a->qkey = attr->qkey;
	if (mask & IB_QP_ACCESS_FLAGS)
		a->access_flags = attr->qp_access_flags;
	if (mask & IB_QP_PATH_MTU) {
		a->path_mtu = attr->path_mtu;
		a->mtu = min(attr->path_mtu, READ_ONCE(sdev->port.active_mtu));
	}
	if (mask & IB_QP_DEST_QPN)
		a->dest_qp_num = attr->dest_qp_num;
	if (mask & IB_QP_RQ_PSN)
		a->rq_psn = attr->rq_psn & 0xffffff;
	if (mask & IB_QP_SQ_PSN)
		a->sq_psn = attr->sq_psn & 0xffffff;
	if (mask & IB_QP_TIMEOUT)
		a->timeout = attr->timeout;
	if (mask & IB_QP_RETRY_CNT)
		a->retry_cnt = attr->retry_cnt;
	if (mask & IB_QP_RNR_RETRY)
		a->rnr_retry = attr->rnr_retry;
	if (mask & IB_QP_MIN_RNR_TIMER)
		a->min_rnr_timer = attr->min_rnr_timer;
	if (mask & IB_QP_MAX_QP_RD_ATOMIC)
		a->max_rd_atomic = attr->max_rd_atomic;
	if (mask & IB_QP_MAX_DEST_RD_ATOMIC)
		a->max_dest_rd_atomic = attr->max_dest_rd_atomic;
	if (mask & IB_QP_EN_SQD_ASYNC_NOTIFY)
		a->en_sqd_async_notify = attr->en_sqd_async_notify;
	if (mask & IB_QP_AV)
		rdma_replace_ah_attr(&a->ah_attr, &attr->ah_attr);
}

/*
 * Whether a user QP's work may run where it may not sleep (its received
 * packets then run it in the receiving softirq): past INIT, and for an RC,
 * UC or XRC_INI QP while its destination is over the wire. Local
 * delivery's destinations, and the direct windows and loans between QPs
 * of one device, may need to sleep. A UD QP names a destination per WQE
 * and hands even a local one a packet (srnic_ud.c): it may always. Called
 * by modify_qp, direct_mutex held, state_lock not: a run forbidden to go
 * on may be waiting for it.
 */
static void srnic_qp_update_atomic(struct srnic_qp *qp)
{
	enum ib_qp_state state = READ_ONCE(qp->state);

	if (!qp->ibqp.uobject)
		return;
	if (state != IB_QPS_RESET && state != IB_QPS_INIT &&
	    !qp->req.local_ifindex)
		srnic_engine_task_allow_atomic(&qp->task);
	else
		srnic_engine_task_forbid_atomic(&qp->task);
}

/**
 * srnic_modify_qp() - ib_device_ops.modify_qp
 * @ibqp: the QP
 * @attr: new attributes
 * @mask: which of @attr to apply (enum ib_qp_attr_mask)
 * @udata: driver data: struct srnic_modify_qp_req, or none
 *
 * IB_QP_RATE_LIMIT (packet pacing), which ib_core allows on raw packet
 * QPs in RTS, sets the rate srnic_rate_pace() paces their frames at.
 */
int srnic_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		    struct ib_udata *udata)
{
	struct srnic_qp *qp = to_srnic_qp(ibqp);
	struct net *net = read_pnet(&to_srnic_dev(ibqp->device)->net);
	struct srnic_atomic_replays *replays = NULL;
	struct srnic_local_scratch scratch = {};
	struct srnic_modify_qp_req req = {};
	enum ib_qp_state cur, new;
	int local_ifindex = 0;
	int err;

	/* A hash QP has no states: it receives once it exists (as mlx5's). */
	if ((mask & ~(IB_QP_ATTR_STANDARD_BITS | IB_QP_RATE_LIMIT)) || qp->rss)
		return -EOPNOTSUPP;
	/*
	 * Packet pacing is raw packet QPs' (query_device's packet_pacing_qpts),
	 * whatever QP types the kernel's state table lets carry the rate.
	 */
	if ((mask & IB_QP_RATE_LIMIT) && ibqp->qp_type != IB_QPT_RAW_PACKET)
		return -EINVAL;
	if (udata && udata->inlen) {
		err = ib_copy_from_udata(&req, udata,
					 min(udata->inlen, sizeof(req)));
		if (err)
			return err;
		err = srnic_udata_check_tail(udata, sizeof(req));
		if (err)
			return err;
		/* A burst size is a rate's. */
		if (req.reserved ||
		    (req.burst_bytes && !(mask & IB_QP_RATE_LIMIT)))
			return -EINVAL;
	}
	/* Atomic replay slots for the responder resources, if more. */
	if ((mask & IB_QP_MAX_DEST_RD_ATOMIC) && !srnic_qp_is_datagram(qp) &&
	    attr->max_dest_rd_atomic <= SRNIC_MAX_RD_ATOMIC) {
		replays = srnic_resp_atomics_alloc(qp, attr->max_dest_rd_atomic);
		if (IS_ERR(replays))
			return PTR_ERR(replays);
	}

	/*
	 * Whether the destination is an srnic device of this namespace is
	 * looked up under the RTNL, before state_lock: entering RTR comes
	 * with the address vector (ib_modify_qp_is_ok() requires it).
	 */
	if ((mask & IB_QP_STATE) && attr->qp_state == IB_QPS_RTR &&
	    (mask & IB_QP_AV) && !srnic_qp_is_datagram(qp))
		local_ifindex = srnic_local_gid_ifindex(net,
							&attr->ah_attr.grh.dgid);
	if (local_ifindex && !qp->req.rwqe) {
		err = srnic_local_scratch_alloc(&scratch);
		if (err) {
			kfree(replays);
			return err;
		}
	}

	srnic_qp_change_begin(qp);
	cur = qp->state;
	new = (mask & IB_QP_STATE) ? attr->qp_state : cur;
	/* A consumer's idea of the current state must be the truth. */
	if (((mask & IB_QP_CUR_STATE) && attr->cur_qp_state != cur) ||
	    new > IB_QPS_ERR ||
	    !ib_modify_qp_is_ok(cur, new, ibqp->qp_type, mask)) {
		err = -EINVAL;
		goto out_unlock;
	}
	err = srnic_qp_check_attrs(attr, mask);
	if (err)
		goto out_unlock;

	if (replays) {
		srnic_resp_atomics_install(qp, replays);
		replays = NULL;
	}
	srnic_qp_store_attrs(qp, attr, mask);
	if (mask & IB_QP_RATE_LIMIT)
		srnic_rate_set_limit(qp, attr->rate_limit, req.burst_bytes);
	if (mask & IB_QP_STATE) {
		if (new == IB_QPS_RTR && cur != IB_QPS_RTR &&
		    !srnic_qp_is_datagram(qp)) {
			err = srnic_rc_resolve_dest(qp, local_ifindex);
			if (err)
				goto out_unlock;
			if (local_ifindex)
				srnic_local_scratch_install(qp, &scratch);
		}
		if (new == IB_QPS_RTS && cur == IB_QPS_RTR)
			srnic_req_start(qp);
		srnic_qp_enter_state(qp, new);
		/* Entering RTS may release posted WQEs; ERR flushes. */
		srnic_engine_task_schedule(&qp->task);
	}
out_unlock:
	/*
	 * srnic_qp_change_end(), with the QP's runs allowed or forbidden
	 * to be atomic in between: before a grant can be made for it.
	 */
	spin_unlock_bh(&qp->state_lock);
	kfree(replays);
	srnic_local_scratch_free(&scratch);
	if (!err)
		srnic_qp_update_atomic(qp);
	if (qp->ibqp.uobject)
		srnic_direct_qp_change_end(qp);
	return err;
}

/**
 * srnic_query_qp() - ib_device_ops.query_qp
 * @ibqp: the QP
 * @attr: filled with its attributes
 * @mask: ignored, everything is reported
 * @init: filled with its creation attributes (actual capabilities)
 */
int srnic_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		   struct ib_qp_init_attr *init)
{
	struct srnic_qp *qp = to_srnic_qp(ibqp);
	const struct srnic_qp_attrs *a = &qp->attrs;

	memset(attr, 0, sizeof(*attr));
	memset(init, 0, sizeof(*init));

	spin_lock_bh(&qp->state_lock);
	attr->qp_state = qp->state;
	attr->cur_qp_state = qp->state;
	attr->path_mtu = a->path_mtu;
	attr->path_mig_state = IB_MIG_MIGRATED;
	attr->qkey = a->qkey;
	attr->rq_psn = a->rq_psn;
	attr->sq_psn = a->sq_psn;
	attr->dest_qp_num = a->dest_qp_num;
	attr->qp_access_flags = a->access_flags;
	attr->pkey_index = a->pkey_index;
	attr->en_sqd_async_notify = a->en_sqd_async_notify;
	attr->max_rd_atomic = a->max_rd_atomic;
	attr->max_dest_rd_atomic = a->max_dest_rd_atomic;
	attr->min_rnr_timer = a->min_rnr_timer;
	attr->port_num = SRNIC_PORT;
	attr->timeout = a->timeout;
	attr->retry_cnt = a->retry_cnt;
	attr->rnr_retry = a->rnr_retry;
	/* ib_query_qp()'s callers take no sgid_attr reference. */
	attr->ah_attr = a->ah_attr;
	attr->ah_attr.grh.sgid_attr = NULL;
	spin_unlock_bh(&qp->state_lock);

	if (ibqp->qp_type != IB_QPT_XRC_TGT) {	/* its SQ is no SQ */
		attr->cap.max_send_wr = qp->sq.max_wr;
		attr->cap.max_recv_wr = qp->rq.max_wr;
		attr->cap.max_send_sge = qp->sq.max_sge;
		attr->cap.max_recv_sge = qp->rq.max_sge;
		attr->cap.max_inline_data = qp->max_inline;
	}

	init->qp_type = ibqp->qp_type;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->srq = ibqp->srq;
	init->cap = attr->cap;
	init->sq_sig_type = qp->sq_sig_all ? IB_SIGNAL_ALL_WR :
					     IB_SIGNAL_REQ_WR;
	return 0;
}

/* ---- post ------------------------------------------------------------- */

/* Write one kernel send WR into the SQ slot of @producer. */
static int srnic_sq_write_wqe(struct srnic_qp *qp, u32 producer,
			      const struct ib_send_wr *wr)
{
	struct srnic_send_wqe *wqe = srnic_queue_entry(&qp->sq.ring, producer);
	struct srnic_sge *sge = (struct srnic_sge *)(wqe + 1);
	u32 i, len = 0;

	if (!srnic_kernel_send_opcode_valid(qp->ibqp.qp_type, wr->opcode) ||
	    wr->num_sge < 0 || wr->num_sge > qp->sq.max_sge)
		return -EINVAL;
	/* An atomic's result goes to exactly one 8-byte SGE. */
	if (srnic_wr_is_atomic(wr->opcode) &&
	    (wr->num_sge != 1 || wr->sg_list[0].length != SRNIC_ATOMIC_SIZE))
		return -EINVAL;

	memset(wqe, 0, sizeof(*wqe));
	wqe->wr_id = wr->wr_id;
	wqe->opcode = wr->opcode;
	if ((wr->send_flags & IB_SEND_SIGNALED) || qp->sq_sig_all)
		wqe->flags |= SRNIC_WQE_SIGNALED;
	if (wr->send_flags & IB_SEND_FENCE)
		wqe->flags |= SRNIC_WQE_FENCE;
	if (wr->send_flags & IB_SEND_SOLICITED)
		wqe->flags |= SRNIC_WQE_SOLICITED;
	if (wr->opcode == IB_WR_SEND_WITH_IMM ||
	    wr->opcode == IB_WR_RDMA_WRITE_WITH_IMM)
		wqe->imm_data = wr->ex.imm_data;
	if (wr->opcode == IB_WR_SEND_WITH_INV ||
	    wr->opcode == IB_WR_LOCAL_INV)
		wqe->invalidate_rkey = wr->ex.invalidate_rkey;
	/* Local operations: no SGEs, nothing inline. */
	if (wr->opcode == IB_WR_REG_MR)
		return srnic_sq_write_reg_wqe(qp, wqe, reg_wr(wr));
	if (wr->opcode == IB_WR_LOCAL_INV)
		return 0;
	if (srnic_qp_is_ud(qp)) {
		if (!ud_wr(wr)->ah)
			return -EINVAL;
		wqe->ud.ah_handle = to_srnic_ah(ud_wr(wr)->ah)->ah_num;
		wqe->ud.remote_qpn = ud_wr(wr)->remote_qpn;
		wqe->ud.remote_qkey = ud_wr(wr)->remote_qkey;
	} else if (wr->opcode == IB_WR_RDMA_WRITE ||
		   wr->opcode == IB_WR_RDMA_WRITE_WITH_IMM ||
		   wr->opcode == IB_WR_RDMA_READ) {
		wqe->rdma.remote_addr = rdma_wr(wr)->remote_addr;
		wqe->rdma.rkey = rdma_wr(wr)->rkey;
	}
	if (srnic_wr_is_atomic(wr->opcode)) {
		wqe->atomic.remote_addr = atomic_wr(wr)->remote_addr;
		wqe->atomic.compare_add = atomic_wr(wr)->compare_add;
		wqe->atomic.swap = atomic_wr(wr)->swap;
		wqe->atomic.rkey = atomic_wr(wr)->rkey;
	}

	if ((wr->send_flags & IB_SEND_INLINE) &&
	    !srnic_wr_is_rd_atomic(wr->opcode)) {
		/* Kernel "DMA addresses" are kernel virtual addresses. */
		for (i = 0; i < wr->num_sge; i++) {
			if (wr->sg_list[i].length > qp->max_inline - len)
				return -EINVAL;
			memcpy((u8 *)(wqe + 1) + len,
			       (void *)(uintptr_t)wr->sg_list[i].addr,
			       wr->sg_list[i].length);
			len += wr->sg_list[i].length;
		}
		wqe->flags |= SRNIC_WQE_INLINE;
		wqe->inline_len = len;
		return 0;
	}

	wqe->num_sge = wr->num_sge;
	for (i = 0; i < wr->num_sge; i++) {
		sge[i].addr = wr->sg_list[i].addr;
		sge[i].length = wr->sg_list[i].length;
		sge[i].lkey = wr->sg_list[i].lkey;
	}
	return 0;
}

/**
 * srnic_post_send() - ib_device_ops.post_send
 * @ibqp: the QP
 * @wr: work requests; for a user QP, none: the provider's doorbell
 * @bad_wr: the first request not posted, on error
 */
int srnic_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		    const struct ib_send_wr **bad_wr)
{
	struct srnic_qp *qp = to_srnic_qp(ibqp);
	enum ib_qp_state state = READ_ONCE(qp->state);
	struct srnic_wq *sq = &qp->sq;
	unsigned long flags;
	u32 producer;
	int err = 0;

	if (ibqp->uobject) {
		/* User WQEs travel through the ring only. */
		if (wr) {
			*bad_wr = wr;
			return -EINVAL;
		}
		srnic_wq_doorbell(qp, true);
		return 0;
	}
	/* An XRC_TGT QP only receives. */
	if (state == IB_QPS_RESET || state == IB_QPS_INIT ||
	    state == IB_QPS_RTR || ibqp->qp_type == IB_QPT_XRC_TGT) {
		*bad_wr = wr;
		return -EINVAL;
	}

	spin_lock_irqsave(&sq->lock, flags);
	producer = sq->ring.ctrl->producer;
	for (; wr; wr = wr->next) {
		err = srnic_wq_full(sq, producer) ? -ENOMEM :
			srnic_sq_write_wqe(qp, producer, wr);
		if (err) {
			*bad_wr = wr;
			break;
		}
		producer++;
	}
	/* WQE contents before the index that publishes them. */
	smp_store_release(&sq->ring.ctrl->producer, producer);
	spin_unlock_irqrestore(&sq->lock, flags);

	srnic_wq_doorbell(qp, true);
	return err;
}

/**
 * srnic_post_recv() - ib_device_ops.post_recv
 * @ibqp: the QP
 * @wr: work requests; for a user QP, none: the provider's doorbell
 * @bad_wr: the first request not posted, on error
 *
 * A QP with an SRQ has no RQ: receives go to the SRQ (EINVAL here), as
 * has an XRC QP.
 */
int srnic_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		    const struct ib_recv_wr **bad_wr)
{
	struct srnic_qp *qp = to_srnic_qp(ibqp);
	int err;

	if (!qp->rq.ring.buf) {
		*bad_wr = wr;
		return -EINVAL;
	}
	if (ibqp->uobject) {
		if (wr) {
			*bad_wr = wr;
			return -EINVAL;
		}
		srnic_wq_doorbell(qp, false);
		return 0;
	}
	if (READ_ONCE(qp->state) == IB_QPS_RESET) {
		*bad_wr = wr;
		return -EINVAL;
	}

	err = srnic_wq_post_recv(&qp->rq, wr, bad_wr);
	srnic_wq_doorbell(qp, false);
	return err;
}
