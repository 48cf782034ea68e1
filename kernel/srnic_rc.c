// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: a QP's engine task for RC, UC and XRC QPs, and the requester of
 * local delivery (the send queue's common part is srnic_sq.c).
 *
 * The task (srnic_qp_task_ops) runs on the NIC engine that owns the QP:
 * received packets go to the responder (srnic_resp.c) or, for responses,
 * to the requester; then the requester takes send WQEs from the SQ (a
 * snapshot: the ring is shared with the process and untrusted).
 *
 * Destinations: a QP whose destination GID belongs to an srnic device of
 * the same network namespace (the same device included) is served by
 * local delivery (srnic_local.c). Other destinations are reached over the
 * RoCEv2 wire by the requester in srnic_req.c, with packets built by
 * srnic_tx_build() (srnic_tx.c). Payload moves through srnic_sgl.c.
 */

#include <linux/jiffies.h>
#include <linux/overflow.h>
#include <linux/slab.h>
#include <rdma/ib_cache.h>

#include "srnic.h"
#include "srnic_trace.h"
#include "srnic_wire.h"

#define SRNIC_RNR_RETRY_INFINITE 7

/* ---- The requester ---------------------------------------------------- */

/*
 * Wait before retrying a WQE no local responder answered: the local ACK
 * timeout, backing off as the wire requester's does (timeout 0, infinite
 * over the wire, retries at the timeout's floor for ever).
 */
static void srnic_req_no_answer_wait(struct srnic_qp *qp)
{
	srnic_req_wait_ns(qp, jiffies_to_nsecs(srnic_req_ack_timeout(qp)));
}

/*
 * Bytes of payload a run that may not sleep moves at most
 * (srnic_engine_task_kick()), about what a NIC's interrupt handler would
 * do: a longer WQE, and what follows it, go to the engine, whose thread
 * the scheduler can preempt.
 */
#define SRNIC_REQ_ATOMIC_BYTES (256 * 1024)

/*
 * Process one WQE; @bytes is what the run may still move (a run that may
 * not sleep has a budget). Returns false when the requester must stop:
 * nothing to do, waiting for RNR, the QP left RTS, or the rest of the
 * work is left to the engine.
 */
static bool srnic_req_step(struct srnic_qp *qp, u64 *bytes)
{
	struct srnic_send_wqe *wqe = qp->req.wqe;
	struct srnic_sgl *local = &qp->req.sgl;
	enum ib_wc_status status;
	enum srnic_exec exec;
	bool ok;
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
	if (status == IB_WC_SUCCESS) {
		if (local->len > *bytes) {
			srnic_sgl_put(local);
			srnic_engine_task_defer(&qp->task);
			return false;
		}
		*bytes -= local->len;
	}
	trace_srnic_wqe_start(&qp->ibqp, wqe->wr_id, wqe->opcode, local->len,
			      0, 0);
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

	if (exec == SRNIC_EXEC_DEFER) {
		srnic_engine_task_defer(&qp->task);
		return false;
	}
	if (exec == SRNIC_EXEC_RNR) {
		/* What the local responder answered, as over the wire. */
		srnic_qp_count(qp, SRNIC_CNT_RNR_NAKS_RECEIVED);
		if (qp->attrs.rnr_retry == SRNIC_RNR_RETRY_INFINITE ||
		    qp->req.rnr_retries_left--) {
			srnic_req_rnr_wait(qp, qp->req.rnr_timer);
			return false;
		}
		status = IB_WC_RNR_RETRY_EXC_ERR;
	} else if (exec == SRNIC_EXEC_NO_ANSWER) {
		srnic_qp_count(qp, SRNIC_CNT_TIMEOUTS);
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

	ok = srnic_req_finish(qp, status, len);
	/* A rendezvous the SEND matched reads its data now (srnic_tm.c). */
	if (unlikely(qp->req.tm_rndv.rndv))
		srnic_local_tm_rndv(qp);
	return ok;
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
		/* Requests kept for selective repeat, once epsn is theirs. */
		skb = srnic_resp_ooo_next(qp);
		if (!skb)
			skb = srnic_rx_dequeue(qp);
		if (!skb)
			break;
		if (srnic_skb_pkt(skb)->flags & SRNIC_OPF_REQUEST)
			srnic_resp_rx_request(qp, skb);
		else
			srnic_req_rx_response(qp, skb);
	}
	srnic_resp_flush_ack(qp);
	return !skb_queue_empty_lockless(&qp->rxq) || srnic_resp_ooo_ready(qp);
}

/* What a run of an RC QP's task does; see srnic_qp_run(). */
static bool srnic_qp_work(struct srnic_qp *qp)
{
	unsigned int budget = SRNIC_REQ_BUDGET;
	u64 bytes = srnic_engine_task_may_sleep(&qp->task) ?
		    U64_MAX : SRNIC_REQ_ATOMIC_BYTES;
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
	/* READ responses in progress, requests and responses, new READs. */
	srnic_resp_run(qp, SRNIC_RX_BUDGET);
	more = srnic_qp_rx(qp);
	more |= srnic_resp_run(qp, SRNIC_RX_BUDGET);
	if (!qp->req.local_ifindex)
		return srnic_req_wire_run(qp, SRNIC_RX_BUDGET) || more;
	while (budget--)
		if (!srnic_req_step(qp, &bytes))
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

	/* A polled SQ whose posts follow received requests: doorbells. */
	if (test_bit(SRNIC_TASK_POLL_RINGS, &task->flags))
		srnic_sq_stream_check(qp);
	if (srnic_task_defer_if_faulting(qp))
		return false;
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

/*
 * Room for the pieces of the messages the QP handles, sized by the queues
 * their SGEs come from: its SQ's WQEs (sent, and READ and atomic results),
 * its RQ's or any SRQ's receive WQEs (an XRC_TGT QP receives into the SRQs
 * its requests name), and for local delivery the destination's.
 */
static int srnic_rc_alloc_sgls(struct srnic_qp *qp)
{
	unsigned int recv_sge = qp->rq.max_sge;
	int err;

	/* An SRQ's QP takes its SRQ's WQEs; XRC_TGT any XRC SRQ's. */
	if (qp->ibqp.srq && qp->ibqp.qp_type != IB_QPT_XRC_TGT)
		recv_sge = to_srnic_srq(qp->ibqp.srq)->rq.max_sge;
	else if (qp->ibqp.qp_type == IB_QPT_XRC_TGT || !recv_sge)
		recv_sge = SRNIC_MAX_SGE;
	err = srnic_sgl_alloc(&qp->req.sgl, qp->sq.max_sge);
	if (!err)
		err = srnic_sgl_alloc(&qp->req.read_sgl, qp->sq.max_sge);
	if (!err)
		err = srnic_sgl_alloc(&qp->resp.sgl, recv_sge);
	return err;
}

/**
 * srnic_local_scratch_alloc() - room for local delivery
 * @s: filled in: a copy of the destination's receive WQE (any RQ's or
 *     SRQ's, so the largest the ABI allows) and the pieces of its SGEs
 *
 * Only a QP whose destination is a device of this host delivers locally,
 * and it learns so at RTR: modify_qp allocates this before taking the
 * QP's state lock, srnic_local_scratch_install() gives it to the QP (a QP
 * to a peer over the wire never pays for it).
 *
 * Return: 0 or -ENOMEM (@s then holds nothing).
 */
int srnic_local_scratch_alloc(struct srnic_local_scratch *s)
{
	memset(s, 0, sizeof(*s));
	s->rwqe = kmalloc(SRNIC_MAX_RQ_ENTRY_SIZE, GFP_KERNEL);
	if (s->rwqe && !srnic_sgl_alloc(&s->rsgl, SRNIC_MAX_SGE))
		return 0;
	kfree(s->rwqe);
	s->rwqe = NULL;
	return -ENOMEM;
}

/**
 * srnic_local_scratch_install() - give @s to @qp unless it has its own
 * @qp: an RC, UC or XRC_INI QP entering RTR, its state lock held
 * @s: from srnic_local_scratch_alloc(); emptied if taken
 */
void srnic_local_scratch_install(struct srnic_qp *qp,
				 struct srnic_local_scratch *s)
{
	if (qp->req.rwqe)
		return;
	qp->req.rwqe = s->rwqe;
	qp->req.rsgl = s->rsgl;
	memset(s, 0, sizeof(*s));
}

/**
 * srnic_local_scratch_free() - free what srnic_local_scratch_install()
 *	did not take
 * @s: the scratch
 */
void srnic_local_scratch_free(struct srnic_local_scratch *s)
{
	kfree(s->rwqe);
	srnic_sgl_free(&s->rsgl);
}

static void srnic_rc_free_sgls(struct srnic_qp *qp)
{
	srnic_sgl_free(&qp->req.sgl);
	srnic_sgl_free(&qp->req.read_sgl);
	srnic_sgl_free(&qp->req.rsgl);
	srnic_sgl_free(&qp->resp.sgl);
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
	/*
	 * A UD or raw packet QP copies its own receive WQEs there; the others, for local
	 * delivery only, get it at RTR (srnic_local_scratch_alloc()).
	 */
	if (srnic_qp_is_datagram(qp))
		qp->req.rwqe = kmalloc(srnic_resp_rwqe_size(qp), GFP_KERNEL);
	if (!qp->req.wqe || (srnic_qp_is_datagram(qp) && !qp->req.rwqe)) {
		err = -ENOMEM;
		goto err;
	}
	err = srnic_rc_alloc_sgls(qp);
	if (err)
		goto err;
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
	srnic_rc_free_sgls(qp);
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
 * srnic_rc_resolve_dest() - record how to reach the QP's destination
 * @qp: a QP entering RTR, its AV set
 * @local_ifindex: srnic_local_gid_ifindex() of the AV's destination GID
 *		   in the QP's namespace, looked up before state_lock
 *
 * A destination GID owned by an srnic device in the QP's namespace is
 * served by local delivery (its netdev's @local_ifindex is recorded); any
 * other (@local_ifindex 0) by the wire. Either way the path is recorded:
 * received packets are checked against it. Context: state_lock held,
 * before the QP's state changes.
 *
 * Return: 0, or -EINVAL when the address vector mixes IPv4 and IPv6.
 */
int srnic_rc_resolve_dest(struct srnic_qp *qp, int local_ifindex)
{
	int err;

	err = srnic_rc_resolve_path(qp);
	if (err)
		return err;
	qp->req.local_ifindex = local_ifindex;
	qp->req.rnr_retries_left = qp->attrs.rnr_retry;
	qp->req.rnr_waiting = false;
	qp->resp.epsn = qp->attrs.rq_psn;
	qp->resp.msn = 0;
	return 0;
}
