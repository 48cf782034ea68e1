// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: a QP's states as the data path sees them.
 *
 * Entering a state publishes the queue flags it implies in the rings the
 * provider reads and does what the state means for posted WQEs (RESET
 * discards them, SQE and ERR flush them with IB_WC_WR_FLUSH_ERR).
 * modify_qp (srnic_qp.c) enters states on the consumer's request; the
 * engine's paths (srnic_rc.c, srnic_req.c, srnic_resp.c, srnic_ud.c,
 * srnic_local.c) enter the error state from here on a fatal WQE, retry
 * exhaustion or a lost CQE, and flush what is posted afterwards.
 */

#include "srnic.h"
#include "srnic_trace.h"

/*
 * Shared-ring flags each state implies for the SQ and the RQ. Receive WQEs
 * are consumed when messages arrive, never by a doorbell, so posting them
 * needs no syscall, except in the error state, where the doorbell flushes
 * them.
 */
static const struct {
	u32 sq_flags;
	u32 rq_flags;
} srnic_qp_state_flags[] = {
	[IB_QPS_RESET] = { SRNIC_QUEUE_NEED_WAKEUP, SRNIC_QUEUE_NEED_WAKEUP },
	[IB_QPS_INIT] = { SRNIC_QUEUE_NEED_WAKEUP, 0 },
	[IB_QPS_RTR] = { SRNIC_QUEUE_NEED_WAKEUP, 0 },
	[IB_QPS_RTS] = { SRNIC_QUEUE_NEED_WAKEUP, 0 },
	[IB_QPS_SQD] = { SRNIC_QUEUE_NEED_WAKEUP, 0 },
	[IB_QPS_SQE] = { SRNIC_QUEUE_NEED_WAKEUP | SRNIC_QUEUE_ERROR, 0 },
	[IB_QPS_ERR] = { SRNIC_QUEUE_NEED_WAKEUP | SRNIC_QUEUE_ERROR,
			 SRNIC_QUEUE_NEED_WAKEUP | SRNIC_QUEUE_ERROR },
};

/* Publish the flags @state implies. Kernel memory is the truth. */
static void srnic_qp_set_queue_flags(struct srnic_qp *qp,
				     enum ib_qp_state state)
{
	WRITE_ONCE(qp->sq.ring.ctrl->flags,
		   srnic_qp_state_flags[state].sq_flags);
	if (qp->rq.ring.ctrl)	/* none with an SRQ */
		WRITE_ONCE(qp->rq.ring.ctrl->flags,
			   srnic_qp_state_flags[state].rq_flags);
	/*
	 * The flags are visible before the flush reads the producer
	 * indexes; pairs with the provider's fence between publishing its
	 * producer index and loading the flags, so every WQE is flushed
	 * either by us now or after the doorbell it then rings.
	 */
	smp_mb();
}

/*
 * Complete every posted, unconsumed WQE of @wq with IB_WC_WR_FLUSH_ERR.
 * Each WQE header is copied once from the ring before use. CQEs lost to
 * a CQ overrun are lost; the CQ reports it (IB_EVENT_CQ_ERR). A QP with
 * an SRQ has no RQ to flush: the SRQ's WQEs stay for the other QPs.
 */
void srnic_wq_flush(struct srnic_qp *qp, struct srnic_wq *wq, bool is_sq)
{
	struct srnic_cq *cq = to_srnic_cq(is_sq ? qp->ibqp.send_cq :
					  qp->ibqp.recv_cq);
	enum ib_qp_state state;
	unsigned long flags;
	u32 producer;

	if (!wq->ring.ctrl)
		return;
	spin_lock_irqsave(&wq->lock, flags);
	/*
	 * The caller saw the error state, perhaps long ago: the task that
	 * read it before a RESET must not flush the new connection's WQEs.
	 * RESET stores the state before it takes this lock to discard.
	 */
	state = READ_ONCE(qp->state);
	if (state != IB_QPS_ERR && !(is_sq && state == IB_QPS_SQE)) {
		spin_unlock_irqrestore(&wq->lock, flags);
		return;
	}
	producer = srnic_wq_read_producer(qp, wq);
	for (; wq->consumer != producer; wq->consumer++) {
		void *entry = srnic_queue_entry(&wq->ring, wq->consumer);
		u8 wc_opcode = IB_WC_RECV;
		u64 wr_id;

		if (is_sq) {
			struct srnic_send_wqe wqe;

			memcpy(&wqe, entry, sizeof(wqe));
			wr_id = wqe.wr_id;
			wc_opcode = srnic_wqe_wc_opcode(wqe.opcode);
		} else {
			struct srnic_recv_wqe wqe;

			memcpy(&wqe, entry, sizeof(wqe));
			wr_id = wqe.wr_id;
		}
		srnic_cq_post_flush(cq, wr_id, qp->ibqp.qp_num, wc_opcode);
	}
	/* Our reads of the slots complete before the producer reuses them. */
	smp_store_release(&wq->ring.ctrl->consumer, wq->consumer);
	if (is_sq) {
		/* After the flush completions (srnic_sq_publish_completed()). */
		smp_store_release(&wq->ring.ctrl->completed, wq->consumer);
	}
	spin_unlock_irqrestore(&wq->lock, flags);
}

/**
 * srnic_qp_task_flush() - a QP task's work in the error state
 * @qp: the QP, in IB_QPS_ERR; called by its task
 *
 * Completes what the provider still posts with IB_WC_WR_FLUSH_ERR and,
 * for a QP on an SRQ, reports IB_EVENT_QP_LAST_WQE_REACHED once.
 */
void srnic_qp_task_flush(struct srnic_qp *qp)
{
	srnic_wq_flush(qp, &qp->sq, true);
	srnic_wq_flush(qp, &qp->rq, false);
	if (qp->ibqp.srq)
		srnic_srq_qp_flushed(qp);
}

/* Discard posted WQEs without completions, as entering RESET does. */
static void srnic_wq_discard(struct srnic_qp *qp, struct srnic_wq *wq)
{
	unsigned long flags;

	if (!wq->ring.ctrl)	/* a QP with an SRQ */
		return;
	spin_lock_irqsave(&wq->lock, flags);
	wq->consumer = READ_ONCE(wq->ring.ctrl->producer);
	/* Slots are handed back only after any read of them. */
	smp_store_release(&wq->ring.ctrl->consumer, wq->consumer);
	/* Nothing discarded completes (an RQ's is unused). */
	smp_store_release(&wq->ring.ctrl->completed, wq->consumer);
	spin_unlock_irqrestore(&wq->lock, flags);
}

/**
 * srnic_qp_enter_state() - move a QP to a state
 * @qp: the QP; the caller began a change (srnic_qp_change_begin()) and
 *	checked the transition (srnic_modify_qp(), srnic_qp_to_error_locked())
 * @state: the new state
 *
 * Publishes the queue flags @state implies, then does what entering it
 * means for WQEs already posted: RESET discards them, SQE and ERR flush
 * them with IB_WC_WR_FLUSH_ERR, SQD reports the drained SQ. Does not
 * sleep.
 */
void srnic_qp_enter_state(struct srnic_qp *qp, enum ib_qp_state state)
{
	trace_srnic_qp_state(&qp->ibqp, READ_ONCE(qp->state), state);
	/* Pairs with the receive path's acquire: attributes are set. */
	smp_store_release(&qp->state, state);
	srnic_qp_set_queue_flags(qp, state);

	switch (state) {
	case IB_QPS_RESET:
		srnic_wq_discard(qp, &qp->sq);
		srnic_wq_discard(qp, &qp->rq);
		atomic_set(&qp->last_wqe_pending, 0);
		/*
		 * The old connection's packets go now (the receive path queues
		 * none in RESET); its wire state goes at the task's next run,
		 * which may come only after the QP is back in RTS.
		 */
		skb_queue_purge(&qp->rxq);
		atomic_set(&qp->wire_reset, 1);
		rdma_destroy_ah_attr(&qp->attrs.ah_attr);
		memset(&qp->attrs, 0, sizeof(qp->attrs));
		break;
	case IB_QPS_SQD:
		/*
		 * Nothing is in flight without the engine: the SQ is drained
		 * at once. The engine will report it when its outstanding
		 * requests are acknowledged.
		 */
		if (qp->attrs.en_sqd_async_notify)
			srnic_qp_event(qp, IB_EVENT_SQ_DRAINED);
		break;
	case IB_QPS_SQE:
		srnic_wq_flush(qp, &qp->sq, true);
		break;
	case IB_QPS_ERR:
		srnic_wq_flush(qp, &qp->sq, true);
		srnic_wq_flush(qp, &qp->rq, false);
		if (qp->ibqp.srq)
			srnic_srq_qp_error(qp);
		/*
		 * The task forgets the wire state (queued packets, timers,
		 * held WQE) now, not at the next post or modify.
		 */
		srnic_engine_task_schedule(&qp->task);
		break;
	default:
		break;
	}
}

/*
 * Whether a change of @qp must go through the direct path. A user QP's
 * must, unless it is made by a run that may not sleep, which is the QP's
 * own (local delivery leaves a user destination to the engine) and which
 * only a QP allowed to run so has (srnic_qp_update_atomic()): such a QP
 * takes part in no window or loan (srnic_direct_check_qps() refuses it),
 * and modify_qp, which alone forbids it (under direct_mutex), waits for
 * that run to end before any grant can be made.
 */
static bool srnic_qp_change_is_direct(struct srnic_qp *qp)
{
	return qp->ibqp.uobject && !srnic_engine_in_atomic_run();
}

/**
 * srnic_qp_change_begin() - begin a change of a QP's state or attributes
 * @qp: the QP
 *
 * Takes state_lock, with bottom halves disabled. For a user QP the direct
 * path first ends the windows and loans the QP takes part in and makes no
 * grant until srnic_qp_change_end() (srnic_direct_qp_change_begin(), which
 * sleeps): entering a state flushes the RQ into the receive CQ a loan
 * lends to a poster, and no window may outlive the state that allowed it.
 * A kernel QP takes part in none (windows and loans are a user poster's,
 * of a user destination's memory and rings), nor does a user QP whose
 * work runs where it may not sleep (srnic_qp_change_is_direct()): such
 * runs make their changes without sleeping.
 */
void srnic_qp_change_begin(struct srnic_qp *qp)
{
	if (srnic_qp_change_is_direct(qp))
		srnic_direct_qp_change_begin(qp);
	spin_lock_bh(&qp->state_lock);
}

/**
 * srnic_qp_change_end() - end what srnic_qp_change_begin() began
 * @qp: the QP
 */
void srnic_qp_change_end(struct srnic_qp *qp)
{
	spin_unlock_bh(&qp->state_lock);
	if (srnic_qp_change_is_direct(qp))
		srnic_direct_qp_change_end(qp);
}

/**
 * srnic_qp_to_error() - move a QP to the error state from the data path
 * @qp: the QP
 * @event: the affiliated asynchronous event to report (e.g.
 *	   IB_EVENT_QP_FATAL), or 0 for none
 *
 * For the engine: a fatal WQE, retry exhaustion, a lost CQE. Sleeps for a
 * user QP only (srnic_qp_change_begin()).
 */
void srnic_qp_to_error(struct srnic_qp *qp, enum ib_event_type event)
{
	srnic_qp_change_begin(qp);
	srnic_qp_to_error_locked(qp);
	srnic_qp_change_end(qp);
	if (event)
		srnic_qp_event(qp, event);
}

/**
 * srnic_qp_to_error_locked() - srnic_qp_to_error() without the event, for
 *	a caller holding state_lock
 * @qp: the QP; left as it is in the error or reset state
 *
 * For the engine, to do more before the consumer can see or change the new
 * state: the responder enters the error state, then sends its NAK. The
 * caller began the change with srnic_qp_change_begin().
 */
void srnic_qp_to_error_locked(struct srnic_qp *qp)
{
	lockdep_assert_held(&qp->state_lock);
	if (qp->state != IB_QPS_ERR && qp->state != IB_QPS_RESET)
		srnic_qp_enter_state(qp, IB_QPS_ERR);
}

/**
 * srnic_qp_complete_to_error() - post an error completion and enter the
 *	error state as one step
 * @qp: the QP
 * @cq: the CQ of the work queue the completion is for
 * @cqe: the error completion
 *
 * For the engine. The completion is posted under state_lock and the QP is
 * in the error state before the lock is dropped, so a modify_qp the
 * consumer makes after polling the completion (to RESET, to start over)
 * waits for the transition and is not undone by it. Sleeps for a user QP
 * only.
 */
void srnic_qp_complete_to_error(struct srnic_qp *qp, struct srnic_cq *cq,
				const struct srnic_cqe *cqe)
{
	srnic_qp_change_begin(qp);
	srnic_cq_post(cq, cqe, false);
	srnic_qp_to_error_locked(qp);
	srnic_qp_change_end(qp);
}

