// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: the send queue as every requester sees it, for RC, UC, XRC and UD
 * QPs: which opcodes a WQE may carry, its local SGEs, fetching a snapshot
 * of the WQE at the consumer index, retiring and completing it, RNR waits,
 * and whether the engine polls the SQ or wants doorbells.
 *
 * The requesters call down to it: the local-delivery step and the QP task
 * (srnic_rc.c), the wire requester (srnic_req.c) and UD (srnic_ud.c).
 */

#include "srnic.h"

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
static u32 srnic_rnr_timer_usecs_of(u8 code)
{
	return srnic_rnr_timer_usecs[code & 31];
}

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
	case SRNIC_WR_FLUSH:
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
static void srnic_req_complete(struct srnic_qp *qp,
			       const struct srnic_send_wqe *wqe,
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

/**
 * srnic_req_wait_ns() - stop the requester for a while
 * @qp: the QP, from its task
 * @delay: nanoseconds
 *
 * srnic_req_rnr_wait_over() says when the wait is over, and a timer
 * schedules the task then. The RNR wait and the wait for a local responder
 * that did not answer (srnic_rc.c) both use it.
 */
void srnic_req_wait_ns(struct srnic_qp *qp, u64 delay)
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

/**
 * srnic_task_defer_if_faulting() - leave a user QP's run to the engine
 * while its memory may need faulting in
 * @qp: the QP whose task is running
 *
 * A process's ODP MR may need faulting in, which sleeps: while the device
 * has one, a run that may not sleep (a post's, a packet's) leaves a user
 * QP's work to the engine before touching anything.
 *
 * Return: true when the run was deferred and must return at once.
 */
bool srnic_task_defer_if_faulting(struct srnic_qp *qp)
{
	if (srnic_engine_task_may_sleep(&qp->task) || !qp->ibqp.uobject ||
	    !atomic_read(&to_srnic_dev(qp->ibqp.device)->odp_mrs))
		return false;
	srnic_engine_task_defer(&qp->task);
	return true;
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

/**
 * srnic_queue_set_need_wakeup() - ask for doorbells on a queue, or not
 * @q: the queue
 * @on: set SRNIC_QUEUE_NEED_WAKEUP, or clear it (not on a queue in error)
 */
static void srnic_queue_set_need_wakeup(struct srnic_queue *q, bool on)
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
 * srnic_sq_stream_begin() - the engine is about to poll the SQ
 * @qp: a QP whose doorbells came as a stream (srnic_sq_doorbell())
 */
void srnic_sq_stream_begin(struct srnic_qp *qp)
{
	WRITE_ONCE(qp->stream_producer, READ_ONCE(qp->sq.ring.ctrl->producer));
	WRITE_ONCE(qp->stream_rx_msgs, atomic_read(&qp->rx_msgs));
}

/**
 * srnic_sq_stream_check() - is the SQ the engine polls still a stream?
 * @qp: the QP, from its task run by the engine while it polls the SQ
 *
 * The doorbell rule (srnic_sq_doorbell()) handed the SQ to the engine
 * because its posts came without requests received between them. Posts
 * that follow received requests again (a ping-pong, a bidirectional
 * stream) are served by doorbells, as the rule would serve them: the SQ
 * asks for them again, and the QP's received packets are processed where
 * they arrive (srnic_engine_task_kick()) rather than by the engine.
 */
void srnic_sq_stream_check(struct srnic_qp *qp)
{
	u32 producer = READ_ONCE(qp->sq.ring.ctrl->producer);
	u32 rx = atomic_read(&qp->rx_msgs);

	if (producer == READ_ONCE(qp->stream_producer))
		return;
	if (rx != READ_ONCE(qp->stream_rx_msgs))
		srnic_qp_ask_doorbells(qp);
	WRITE_ONCE(qp->stream_producer, producer);
	WRITE_ONCE(qp->stream_rx_msgs, rx);
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

