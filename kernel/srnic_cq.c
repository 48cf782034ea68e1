// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: completion queues.
 *
 * A CQ is one ring of struct srnic_cqe (see srnic-abi.h). The kernel is
 * its only producer: srnic_cq_post() writes a CQE body, then its owner
 * byte with release ordering, checks for an overrun against the consumer
 * index the provider publishes, and raises a completion event when the
 * provider armed the CQ through its shared control record. User CQs are
 * polled and armed by the provider without syscalls; kernel CQs are polled
 * and armed by srnic_poll_cq() and srnic_req_notify_cq() below, which play
 * the provider's part of the same protocol on a ring that is not mapped.
 */

#include <linux/log2.h>
#include <rdma/uverbs_ioctl.h>

#include "srnic.h"
#include "srnic_trace.h"

/*
 * The CQE carries libibverbs' values; ib_core's are the same numbers
 * for status and opcode (both come from ib_user_verbs.h), but not for
 * the flags, which go through this table.
 */
static const struct {
	u8 cqe_flag;
	int wc_flag;
} srnic_cqe_wc_flags[] = {
	{ SRNIC_CQE_GRH, IB_WC_GRH },
	{ SRNIC_CQE_WITH_IMM, IB_WC_WITH_IMM },
	{ SRNIC_CQE_WITH_INV, IB_WC_WITH_INVALIDATE },
};

static_assert(IB_WC_SUCCESS == 0 && IB_WC_WR_FLUSH_ERR == 5 &&
	      IB_WC_GENERAL_ERR == 21);
static_assert((int)IB_WC_SEND == (int)IB_UVERBS_WC_SEND &&
	      (int)IB_WC_RDMA_READ == (int)IB_UVERBS_WC_RDMA_READ &&
	      (int)IB_WC_LOCAL_INV == (int)IB_UVERBS_WC_LOCAL_INV &&
	      IB_WC_RECV == 128 && IB_WC_RECV_RDMA_WITH_IMM == 129);

/* Phase of the lap containing free-running index @index (srnic-abi.h). */
static inline u8 srnic_cqe_phase(u32 index, u32 num_entries)
{
	return (index & num_entries) ? 2 : 1;
}

/*
 * A kernel CQ that ib_core polls from a bound work queue (IB_POLL_WORKQUEUE:
 * the targets, nvmet-rdma, isert, ib_srpt, svcrdma) has its completion
 * events raised on its completion vector's CPU, as a NIC's MSI-X vector
 * interrupts the CPU it is affine to: the poller's work item runs on the
 * CPU that raised the event, and the targets spread their queues over the
 * vectors so that each queue's work has a CPU of its own. Raised where the
 * CQE is posted, on one device that is the initiator's CPU, and the whole
 * chain of an I/O ran on the submitter's CPU (NVMe read: 150-230 MiB/s
 * by where fio landed, 240-350 with this; performance.rst). Vector i is
 * the i-th possible CPU. The event comes in an IPI to that CPU, in hard
 * interrupt context like a NIC's, unless the CQE was posted there.
 *
 * Every other CQ's event is raised where the CQE is posted: a user CQ's
 * wakes a process wherever it waits; a softirq-polled CQ (the initiators'
 * receive CQs: nvme-rdma, iSER, SRP) is polled right there on the way out
 * of the poster's bottom half, which is as early as an IPI would; and
 * open-iscsi's iscsiadm (2.1.8, and its master in 2026) loses a discovery
 * response that reaches it before the reply to the netlink request that
 * sent the request: it polls its socket for a PDU that it has already
 * read. An IPI to the initiator's CPU in the middle of that request did it
 * (a 30 s discovery timeout after which the session fails).
 */
static void srnic_cq_event_ipi(void *arg)
{
	struct srnic_cq *cq = arg;

	cq->ibcq.comp_handler(&cq->ibcq, cq->ibcq.cq_context);
	/* The handler is done with the CQ: destroy_cq may go on. */
	atomic_dec_return_release(&cq->events_in_flight);
}

/* The CPU of completion vector @vector (< num_possible_cpus()). */
static int srnic_comp_vector_cpu(u32 vector)
{
	int cpu;

	for_each_possible_cpu(cpu)
		if (!vector--)
			return cpu;
	return -1;
}

/**
 * srnic_cq_wait_events() - wait for the CQ's events raised on other CPUs
 * @cq: the CQ
 *
 * An event raised by an IPI (srnic_cq_event()) may still be on its way when
 * the CQE that raised it has been polled. ib_free_cq() stops a CQ's poller
 * (cancel_work_sync(), irq_poll_disable()) before it destroys the CQ, and
 * a late event would queue the poller again: so the QPs and XRC SRQs that
 * complete into the CQ wait here when they are destroyed, which ib_core
 * requires before the CQ goes, and so does the CQ's own destroy.
 */
void srnic_cq_wait_events(struct srnic_cq *cq)
{
	while (atomic_read_acquire(&cq->events_in_flight))
		cpu_relax();
}

/* Raise the CQ's completion event; under its lock, interrupts disabled. */
static void srnic_cq_event(struct srnic_cq *cq)
{
	int cpu = cq->event_cpu;

	/* Interrupts are off: the CPU cannot go offline under us. */
	if (cpu < 0 || cpu == smp_processor_id() || !cpu_online(cpu)) {
		cq->ibcq.comp_handler(&cq->ibcq, cq->ibcq.cq_context);
		return;
	}
	atomic_inc(&cq->events_in_flight);
	/* -EBUSY: the IPI queued earlier has not run yet; it raises this one. */
	if (smp_call_function_single_async(cpu, &cq->event_csd))
		atomic_dec(&cq->events_in_flight);
}

/**
 * srnic_create_cq() - ib_device_ops.create_cq
 * @ibcq: the CQ ib_core allocated
 * @attr: requested size, completion vector, flags
 * @udata: driver data of a user CQ; NULL for a kernel CQ
 *
 * The ring has a power-of-two number of entries, at least @attr->cqe + 1;
 * the CQ reports one less than that as its size.
 */
int srnic_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		    struct ib_udata *udata)
{
	struct srnic_dev *sdev = to_srnic_dev(ibcq->device);
	struct srnic_cq *cq = to_srnic_cq(ibcq);
	struct srnic_create_cq_resp resp = {};
	u32 num_entries;
	int id, err;

	if (attr->flags)
		return -EOPNOTSUPP;
	if (attr->cqe < 1 || attr->cqe > SRNIC_MAX_CQE)
		return -EINVAL;
	if (attr->comp_vector >= ibcq->device->num_comp_vectors)
		return -EINVAL;
	if (udata) {
		err = srnic_udata_check_reserved_req(udata);
		if (err)
			return err;
	}

	spin_lock_init(&cq->lock);
	spin_lock_init(&cq->poll_lock);
	INIT_CSD(&cq->event_csd, srnic_cq_event_ipi, cq);
	atomic_set(&cq->events_in_flight, 0);
	cq->event_cpu = !udata && ibcq->poll_ctx == IB_POLL_WORKQUEUE ?
			srnic_comp_vector_cpu(attr->comp_vector) : -1;
	num_entries = roundup_pow_of_two(attr->cqe + 1);

	id = ida_alloc_max(&sdev->cq_ids, SRNIC_MAX_CQ - 1, GFP_KERNEL);
	if (id < 0)
		return id == -ENOSPC ? -ENOMEM : id;
	cq->cqn = id;

	err = srnic_queue_init(&cq->ring, num_entries, sizeof(struct srnic_cqe));
	if (err)
		goto err_free_id;

	if (udata) {
		struct srnic_ucontext *uctx = rdma_udata_to_drv_context(udata,
					struct srnic_ucontext, ibuc);

		err = srnic_queue_map(&cq->ring, &uctx->ibuc, &resp.ring);
		if (err)
			goto err_destroy_ring;
		resp.cqn = cq->cqn;
		err = ib_copy_to_udata(udata, &resp,
				       min_t(size_t, udata->outlen,
					     sizeof(resp)));
		if (err)
			goto err_destroy_ring;
	}
	ibcq->cqe = num_entries - 1;
	return 0;

err_destroy_ring:
	srnic_queue_destroy(&cq->ring);
err_free_id:
	ida_free(&sdev->cq_ids, cq->cqn);
	return err;
}

/**
 * srnic_destroy_cq() - ib_device_ops.destroy_cq
 * @ibcq: the CQ; ib_core guarantees no QP uses it any more
 * @udata: unused
 */
int srnic_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata)
{
	struct srnic_cq *cq = to_srnic_cq(ibcq);

	srnic_cq_wait_events(cq);
	srnic_queue_destroy(&cq->ring);
	ida_free(&to_srnic_dev(ibcq->device)->cq_ids, cq->cqn);
	return 0;
}

static void srnic_cq_overrun(struct srnic_cq *cq)
{
	struct ib_event event = {
		.device = cq->ibcq.device,
		.element.cq = &cq->ibcq,
		.event = IB_EVENT_CQ_ERR,
	};

	ibdev_dbg(cq->ibcq.device, "CQ %u overrun\n", cq->cqn);
	if (cq->ibcq.event_handler)
		cq->ibcq.event_handler(&event, cq->ibcq.cq_context);
}

/*
 * Write @cqe into slot @index, owner byte last: the release store pairs
 * with the provider's acquire load of owner (CqReader), so a reader that
 * sees the new phase sees the whole body.
 */
static void srnic_cq_write_cqe(struct srnic_queue *ring, u32 index,
			       const struct srnic_cqe *cqe)
{
	struct srnic_cqe *slot = srnic_queue_entry(ring, index);
	const size_t owner = offsetof(struct srnic_cqe, owner);

	memcpy(slot, cqe, owner);
	memcpy((u8 *)slot + owner + 1, (const u8 *)cqe + owner + 1,
	       sizeof(*cqe) - owner - 1);
	/* Body before owner; pairs with the reader's acquire of owner. */
	smp_store_release(&slot->owner,
			  srnic_cqe_phase(index, ring->num_entries));
}

/*
 * Whether the provider armed the CQ for this completion. Called after the
 * CQE is written; the smp_mb() orders that write before the loads of the
 * arm and pairs with the full fence the arming side issues after bumping
 * notify_seq: either it sees our CQE when it polls, or we see its arm.
 * The arm is consumed by remembering its sequence in kernel memory; the
 * kernel never writes notify or notify_seq.
 */
static bool srnic_cq_consume_arm(struct srnic_cq *cq, bool solicited,
				 u8 status)
{
	struct srnic_queue_ctrl *ctrl = cq->ring.ctrl;
	u32 seq, notify;

	/* CQE writes before arm loads: pairs with the arming side's fence. */
	smp_mb();
	/* The sequence before the notify value it publishes. */
	seq = smp_load_acquire(&ctrl->notify_seq);
	if (seq == cq->notify_seq_seen)
		return false;
	notify = READ_ONCE(ctrl->notify);
	if (notify == SRNIC_CQ_NOTIFY_NEXT ||
	    (notify == SRNIC_CQ_NOTIFY_SOLICITED &&
	     (solicited || status != IB_WC_SUCCESS))) {
		cq->notify_seq_seen = seq;
		return true;
	}
	return false;
}

/*
 * Completions @cq may still receive for work already posted: the send
 * WQEs, posted and not yet completed, of the QPs whose send CQ it is
 * (counted whether signaled or not: the engine may not have read them
 * yet). Receive WQEs wait for the peer and are not counted. A user QP's
 * producer index is untrusted: its count is capped at the ring size.
 */
static u32 srnic_cq_sends_in_flight(struct srnic_cq *cq)
{
	struct srnic_dev *sdev = to_srnic_dev(cq->ibcq.device);
	struct srnic_qp *qp;
	unsigned long qpn;
	u32 n = 0;

	xa_for_each(&sdev->qps, qpn, qp) {
		struct srnic_wq *sq;

		qp = srnic_qp_get_by_qpn(sdev, qpn);
		if (!qp)
			continue;
		sq = &qp->sq;
		if (qp->ibqp.send_cq == &cq->ibcq && sq->ring.ctrl)
			n += min(READ_ONCE(sq->ring.ctrl->producer) -
				 READ_ONCE(sq->consumer), sq->ring.num_entries);
		srnic_qp_put(qp);
	}
	return n;
}

/*
 * Move the CQEs not yet polled from @cq's ring into @ring (fresh, zeroed)
 * from index 0, carry the arm state over and make @ring the CQ's; @ring is
 * left holding the old ring for the caller to destroy. Called with both CQ
 * locks held. The consumer index is the provider's, untrusted: a value
 * that claims more CQEs than the ring holds fails like an overrun.
 */
static int srnic_cq_swap_ring(struct srnic_cq *cq, struct srnic_queue *ring,
			      int cqe, u32 in_flight)
{
	struct srnic_queue_ctrl *old_ctrl = cq->ring.ctrl;
	struct srnic_queue old;
	u32 consumer, unpolled, i;

	if (cq->overrun)
		return -EINVAL;
	/* Pairs with the consumer's release: it is done reading the slots. */
	consumer = smp_load_acquire(&old_ctrl->consumer);
	unpolled = cq->producer - consumer;
	if (unpolled > cq->ring.num_entries ||
	    (u64)unpolled + in_flight > cqe)
		return -EINVAL;
	for (i = 0; i < unpolled; i++)
		srnic_cq_write_cqe(ring, i,
				   srnic_queue_entry(&cq->ring, consumer + i));
	ring->ctrl->notify = READ_ONCE(old_ctrl->notify);
	ring->ctrl->notify_seq = READ_ONCE(old_ctrl->notify_seq);
	ring->ctrl->producer = unpolled;
	old = cq->ring;
	cq->ring = *ring;
	*ring = old;
	cq->producer = unpolled;
	cq->ibcq.cqe = cq->ring.num_entries - 1;
	return 0;
}

/**
 * srnic_cq_resize_prepare() - the new ring of a resize_cq
 * @cq: the CQ
 * @cqe: the size asked for
 * @udata: driver data of a user CQ (struct srnic_resize_cq_req/resp);
 *	   NULL for a kernel CQ
 * @ring: set up here: for a user CQ mapped, its offset in the response
 *
 * Return: 0; -EINVAL for a size out of range; -ENOMEM; a copy error. On
 * error @ring is not set up.
 */
int srnic_cq_resize_prepare(struct srnic_cq *cq, int cqe,
			    struct ib_udata *udata, struct srnic_queue *ring)
{
	struct srnic_resize_cq_resp resp = {};
	int err;

	if (cqe < 1 || cqe > SRNIC_MAX_CQE)
		return -EINVAL;
	if (udata) {
		err = srnic_udata_check_reserved_req(udata);
		if (err)
			return err;
	}
	err = srnic_queue_init(ring, roundup_pow_of_two(cqe + 1),
			       sizeof(struct srnic_cqe));
	if (err)
		return err;
	if (udata) {
		struct srnic_ucontext *uctx = rdma_udata_to_drv_context(udata,
					struct srnic_ucontext, ibuc);

		err = srnic_queue_map(ring, &uctx->ibuc, &resp.ring);
		if (!err)
			err = ib_copy_to_udata(udata, &resp,
					       min_t(size_t, udata->outlen,
						     sizeof(resp)));
		if (err)
			srnic_queue_destroy(ring);
	}
	return err;
}

/**
 * srnic_cq_resize_commit() - replace a CQ's ring with a bigger or smaller one
 * @cq: the CQ; no loan of its ring may start meanwhile (srnic_direct.c)
 * @ring: from srnic_cq_resize_prepare(); on return the ring to destroy (the
 *	  old one, or on error the unused new one)
 * @cqe: the size asked for
 *
 * Return: 0, or -EINVAL if the new size cannot hold the completions
 * waiting to be polled and those its QPs' posted sends will still produce.
 */
int srnic_cq_resize_commit(struct srnic_cq *cq, struct srnic_queue *ring,
			   int cqe)
{
	unsigned long flags;
	u32 in_flight;
	int err;

	/* Growing needs no count: what fits the old ring fits the new one. */
	in_flight = cqe < cq->ibcq.cqe ? srnic_cq_sends_in_flight(cq) : 0;
	/*
	 * lock before poll_lock, the order of a comp_handler (run under lock)
	 * that polls or arms.
	 */
	spin_lock_irqsave(&cq->lock, flags);
	spin_lock(&cq->poll_lock);
	err = srnic_cq_swap_ring(cq, ring, cqe, in_flight);
	spin_unlock(&cq->poll_lock);
	spin_unlock_irqrestore(&cq->lock, flags);
	if (!err)
		ibdev_dbg(cq->ibcq.device, "CQ %u resized to %d\n", cq->cqn,
			  cq->ibcq.cqe);
	return err;
}

/**
 * srnic_cq_post() - produce one completion
 * @cq: the CQ
 * @cqe: the completion; its owner byte is ignored
 * @solicited: the completion is for a solicited event (or an error),
 *	       which an arm for solicited completions waits for
 *
 * Called by the engine (and by the flush of a QP in the error state) in
 * any context. The consumer index comes from the shared control record,
 * read once: a value that leaves fewer than one free slot, whether the
 * ring is full or the value is bogus, is an overrun. The CQ then gets
 * SRNIC_QUEUE_ERROR, IB_EVENT_CQ_ERR is dispatched and every later post
 * fails; the caller must move the QP that lost the completion to the
 * error state. comp_handler runs under the CQ lock with bottom halves
 * disabled (when interrupts are enabled), as behind a hardware interrupt.
 *
 * Return: 0, or -EOVERFLOW if the CQE was not written.
 */
int srnic_cq_post(struct srnic_cq *cq, const struct srnic_cqe *cqe,
		  bool solicited)
{
	struct srnic_queue_ctrl *ctrl;
	bool bh = !irqs_disabled();
	bool overrun = false;
	unsigned long flags;
	u32 p, consumer;
	int err = 0;

	if (bh)
		local_bh_disable();
	spin_lock_irqsave(&cq->lock, flags);
	ctrl = cq->ring.ctrl;	/* srnic_resize_cq() swaps rings under lock */
	if (cq->overrun) {
		err = -EOVERFLOW;
		goto out_unlock;
	}

	p = cq->producer;
	/* Pairs with the consumer's release: it is done reading the slot. */
	consumer = smp_load_acquire(&ctrl->consumer);
	if (p - consumer >= cq->ring.num_entries) {
		cq->overrun = true;
		WRITE_ONCE(ctrl->flags,
			   SRNIC_QUEUE_ERROR | SRNIC_QUEUE_NEED_WAKEUP);
		overrun = true;
		err = -EOVERFLOW;
		goto out_unlock;
	}

	srnic_cq_write_cqe(&cq->ring, p, cqe);
	trace_srnic_cqe(&cq->ibcq, cqe->qp_num, cqe->wr_id, cqe->opcode,
			cqe->status, cqe->byte_len);
	cq->producer = p + 1;
	WRITE_ONCE(ctrl->producer, p + 1);	/* informational, for tools */

	if (srnic_cq_consume_arm(cq, solicited, cqe->status) &&
	    cq->ibcq.comp_handler)
		srnic_cq_event(cq);

out_unlock:
	spin_unlock_irqrestore(&cq->lock, flags);
	if (overrun)
		srnic_cq_overrun(cq);
	if (bh)
		local_bh_enable();
	return err;
}

/**
 * srnic_cq_post_flush() - complete a work request with IB_WC_WR_FLUSH_ERR
 * @cq: the CQ of the work queue
 * @wr_id: the work request's id
 * @qp_num: its QP
 * @wc_opcode: IB_WC_* opcode of the work request
 *
 * Return: as srnic_cq_post().
 */
int srnic_cq_post_flush(struct srnic_cq *cq, u64 wr_id, u32 qp_num,
			u8 wc_opcode)
{
	struct srnic_cqe cqe = {
		.wr_id = wr_id,
		.qp_num = qp_num,
		.status = IB_WC_WR_FLUSH_ERR,
		.opcode = wc_opcode,
	};

	return srnic_cq_post(cq, &cqe, false);
}

/**
 * srnic_cq_adopt_lent() - take over the CQEs a direct loan's poster wrote
 * @cq: a user CQ whose loan just ended (or whose poster is quiescent)
 * @n: how many: the receive WQEs the poster took since the kernel's
 *     consumer index last moved
 * @producer: set to the producer index after them
 *
 * The poster takes a receive WQE (moves the RQ's consumer index) only
 * once the CQE for it is written but for its owner byte, which it stores
 * after (as the engine, whose consumer index moves before its CQE). The
 * loan may have ended in between: the owner bytes of all @n are stored
 * here, the last one perhaps for the first time. @n CQEs that do not fit
 * the ring (a bogus index) are not taken.
 *
 * Return: whether the producer index moved by @n (else it did not move).
 */
bool srnic_cq_adopt_lent(struct srnic_cq *cq, u32 n, u32 *producer)
{
	u32 num = cq->ring.num_entries;
	unsigned long flags;
	u32 p, i, consumer;
	bool fits;

	spin_lock_irqsave(&cq->lock, flags);
	p = cq->producer;
	/*
	 * As srnic_cq_post(): the consumer is done reading those slots. It
	 * may have polled some of the poster's CQEs already: anywhere from
	 * p + n - num to p + n.
	 */
	consumer = smp_load_acquire(&cq->ring.ctrl->consumer);
	fits = p + n - consumer <= num;
	if (fits) {
		for (i = 0; i < n; i++) {
			struct srnic_cqe *slot = srnic_queue_entry(&cq->ring,
								   p + i);

			/* As srnic_cq_write_cqe(): the body, then the owner. */
			smp_store_release(&slot->owner,
					  srnic_cqe_phase(p + i, num));
		}
		p += n;
	}
	cq->producer = p;
	WRITE_ONCE(cq->ring.ctrl->producer, p);
	*producer = p;
	spin_unlock_irqrestore(&cq->lock, flags);
	return fits;
}

static int srnic_cqe_to_wc_flags(u8 cqe_flags)
{
	int i, wc_flags = 0;

	for (i = 0; i < ARRAY_SIZE(srnic_cqe_wc_flags); i++)
		if (cqe_flags & srnic_cqe_wc_flags[i].cqe_flag)
			wc_flags |= srnic_cqe_wc_flags[i].wc_flag;
	return wc_flags;
}

static void srnic_cqe_to_wc(struct srnic_dev *sdev,
			    const struct srnic_cqe *cqe, struct ib_wc *wc)
{
	memset(wc, 0, sizeof(*wc));
	wc->wr_id = cqe->wr_id;
	wc->status = cqe->status;
	wc->opcode = cqe->opcode;
	wc->vendor_err = cqe->vendor_err;
	wc->byte_len = cqe->byte_len;
	/* A kernel ULP polls its CQs before destroying their QPs. */
	wc->qp = xa_load(&sdev->qps, cqe->qp_num);
	if (cqe->wc_flags & SRNIC_CQE_WITH_INV)
		wc->ex.invalidate_rkey = cqe->invalidated_rkey;
	else
		wc->ex.imm_data = cqe->imm_data;
	wc->src_qp = cqe->src_qp;
	wc->wc_flags = srnic_cqe_to_wc_flags(cqe->wc_flags);
	wc->pkey_index = cqe->pkey_index;
	wc->slid = cqe->slid;
	wc->sl = cqe->sl;
	wc->dlid_path_bits = cqe->dlid_path_bits;
	wc->port_num = SRNIC_PORT;
}

/* The CQE at the consumer index, if the kernel has written it. */
static struct srnic_cqe *srnic_cq_next_cqe(struct srnic_cq *cq, u32 consumer)
{
	struct srnic_cqe *cqe = srnic_queue_entry(&cq->ring, consumer);

	/* Pairs with the release store of owner in srnic_cq_write_cqe(). */
	if (smp_load_acquire(&cqe->owner) !=
	    srnic_cqe_phase(consumer, cq->ring.num_entries))
		return NULL;
	return cqe;
}

/**
 * srnic_poll_cq() - ib_device_ops.poll_cq, for kernel CQs
 * @ibcq: the CQ
 * @num_entries: room in @wc
 * @wc: completions out
 *
 * Return: the number of completions polled.
 */
int srnic_poll_cq(struct ib_cq *ibcq, int num_entries, struct ib_wc *wc)
{
	struct srnic_cq *cq = to_srnic_cq(ibcq);
	struct srnic_dev *sdev = to_srnic_dev(ibcq->device);
	struct srnic_queue_ctrl *ctrl;
	struct srnic_cqe *cqe;
	unsigned long flags;
	u32 consumer;
	int n;

	spin_lock_irqsave(&cq->poll_lock, flags);
	ctrl = cq->ring.ctrl;	/* srnic_resize_cq() swaps rings under poll_lock */
	consumer = ctrl->consumer;
	rcu_read_lock();
	for (n = 0; n < num_entries; n++) {
		cqe = srnic_cq_next_cqe(cq, consumer);
		if (!cqe)
			break;
		srnic_cqe_to_wc(sdev, cqe, &wc[n]);
		consumer++;
	}
	rcu_read_unlock();
	/* Our reads of the CQEs complete before the producer reuses them. */
	smp_store_release(&ctrl->consumer, consumer);
	spin_unlock_irqrestore(&cq->poll_lock, flags);
	return n;
}

/**
 * srnic_req_notify_cq() - ib_device_ops.req_notify_cq, for kernel CQs
 * @ibcq: the CQ
 * @flags: IB_CQ_SOLICITED or IB_CQ_NEXT_COMP, optionally
 *	   IB_CQ_REPORT_MISSED_EVENTS
 *
 * Arms the CQ as the provider does for user CQs: write notify, bump
 * notify_seq with release ordering, full barrier.
 *
 * Return: 0, or with IB_CQ_REPORT_MISSED_EVENTS 1 if completions are
 * waiting to be polled.
 */
int srnic_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags)
{
	struct srnic_cq *cq = to_srnic_cq(ibcq);
	struct srnic_queue_ctrl *ctrl;
	unsigned long irq_flags;
	int missed = 0;

	spin_lock_irqsave(&cq->poll_lock, irq_flags);
	ctrl = cq->ring.ctrl;	/* srnic_resize_cq() swaps rings under poll_lock */
	WRITE_ONCE(ctrl->notify,
		   (flags & IB_CQ_SOLICITED_MASK) == IB_CQ_SOLICITED ?
		   SRNIC_CQ_NOTIFY_SOLICITED : SRNIC_CQ_NOTIFY_NEXT);
	/* notify is written before the sequence that publishes it. */
	smp_store_release(&ctrl->notify_seq, ctrl->notify_seq + 1);
	/*
	 * The arm is visible before we look for unpolled CQEs; pairs with
	 * the smp_mb() in srnic_cq_consume_arm().
	 */
	smp_mb();
	if ((flags & IB_CQ_REPORT_MISSED_EVENTS) &&
	    srnic_cq_next_cqe(cq, ctrl->consumer))
		missed = 1;
	spin_unlock_irqrestore(&cq->poll_lock, irq_flags);
	return missed;
}
