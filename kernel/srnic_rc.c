// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: a QP's engine task and the requester's common part (fetching
 * and completing send WQEs, RNR waits), for RC, UC and XRC QPs.
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
	clear_bit(SRNIC_TASK_POLL_RINGS, &qp->task.flags);
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

	/* No RQ of its own (an SRQ's QP has none): any receive queue's. */
	if (qp->ibqp.srq || qp->ibqp.qp_type == IB_QPT_XRC_TGT || !recv_sge)
		recv_sge = SRNIC_MAX_SGE;
	err = srnic_sgl_alloc(&qp->req.sgl, qp->sq.max_sge);
	if (!err)
		err = srnic_sgl_alloc(&qp->req.read_sgl, qp->sq.max_sge);
	if (!err)
		err = srnic_sgl_alloc(&qp->req.rsgl, SRNIC_MAX_SGE);
	if (!err)
		err = srnic_sgl_alloc(&qp->resp.sgl, recv_sge);
	return err;
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
	/* Any responder's receive WQE fits: they are bounded by the ABI. */
	qp->req.rwqe = kmalloc(SRNIC_MAX_RQ_ENTRY_SIZE, GFP_KERNEL);
	if (!qp->req.wqe || !qp->req.rwqe) {
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
