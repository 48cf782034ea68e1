// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: work queues, the rings of send and receive WQEs (SQs, RQs, SRQs).
 *
 * A work queue is a ring (srnic_queue.c) that the provider or a kernel
 * consumer fills and publishes with its producer index, plus the kernel's
 * consumer index, which only the kernel trusts. The helpers here read the
 * producer index with its sanity check, take receive WQEs for an arriving
 * message, and write a kernel consumer's receive work requests; they are
 * shared by QPs (srnic_qp.c), SRQs (srnic_srq.c) and the engine's paths
 * (srnic_rc.c, srnic_local.c, srnic_resp.c, srnic_ud.c), which call down
 * to them.
 */

#include <linux/log2.h>

#include "srnic.h"

/* Completion opcode of a send WQE's IB_WR_* (= IBV_WR_*) opcode. */
static const u8 srnic_send_wc_opcode[] = {
	[IB_WR_RDMA_WRITE] = IB_WC_RDMA_WRITE,
	[IB_WR_RDMA_WRITE_WITH_IMM] = IB_WC_RDMA_WRITE,
	[IB_WR_SEND] = IB_WC_SEND,
	[IB_WR_SEND_WITH_IMM] = IB_WC_SEND,
	[IB_WR_RDMA_READ] = IB_WC_RDMA_READ,
	[IB_WR_ATOMIC_CMP_AND_SWP] = IB_WC_COMP_SWAP,
	[IB_WR_ATOMIC_FETCH_AND_ADD] = IB_WC_FETCH_ADD,
	[IB_WR_LOCAL_INV] = IB_WC_LOCAL_INV,
	[IB_WR_BIND_MW] = IB_WC_BIND_MW,
	[IB_WR_SEND_WITH_INV] = IB_WC_SEND,
	[SRNIC_WR_ATOMIC_WRITE] = SRNIC_WC_ATOMIC_WRITE,
	[SRNIC_WR_FLUSH] = SRNIC_WC_FLUSH,
	[IB_WR_REG_MR] = IB_WC_REG_MR,
};

/**
 * srnic_wqe_wc_opcode() - the completion opcode of a send WQE
 * @wr_opcode: the WQE's IB_WR_* (= IBV_WR_*) opcode
 *
 * Return: its IB_WC_* opcode; IB_WC_SEND for an unknown one.
 */
u8 srnic_wqe_wc_opcode(u8 wr_opcode)
{
	if (wr_opcode < ARRAY_SIZE(srnic_send_wc_opcode))
		return srnic_send_wc_opcode[wr_opcode];
	return IB_WC_SEND;
}

/**
 * srnic_wq_init() - set up one work queue (SQ, RQ or SRQ)
 * @wq: the queue
 * @uctx: for a user SQ, its context: a small ring goes in the context's
 *	  ring arena; NULL for the others (a direct-path loan maps an RQ's
 *	  pages by themselves)
 * @max_wr: entries asked for, rounded up to a power of two
 * @header: bytes of an entry's header
 * @payload: bytes after the header (SGEs, inline data); header and
 *	     payload are rounded up to a power of two together
 *
 * The queue starts asking for doorbells (SRNIC_QUEUE_NEED_WAKEUP).
 */
int srnic_wq_init(struct srnic_wq *wq, struct srnic_ucontext *uctx, u32 max_wr,
		  u32 header, u32 payload)
{
	u32 num_entries = roundup_pow_of_two(max(max_wr, 1U));
	u32 entry_size = roundup_pow_of_two(header + payload);
	int err;

	spin_lock_init(&wq->lock);
	wq->consumer = 0;
	if (uctx)
		err = srnic_queue_init_shared(&wq->ring, uctx, num_entries,
					      entry_size);
	else
		err = srnic_queue_init(&wq->ring, num_entries, entry_size);
	if (err)
		return err;
	wq->max_wr = wq->ring.num_entries;
	wq->max_sge = min_t(u32, (entry_size - header) /
			    sizeof(struct srnic_sge), SRNIC_MAX_SGE);
	WRITE_ONCE(wq->ring.ctrl->flags, SRNIC_QUEUE_NEED_WAKEUP);
	return 0;
}

/**
 * srnic_wq_producer() - the producer index of a work queue, read once
 * @wq: the queue; the caller holds its lock
 * @ibdev: its device, for the debug message
 * @what: "QP" or "SRQ", for the debug message
 * @num: the QP or SRQ number, for the debug message
 *
 * Return: the index, validated against the kernel's consumer index: at
 * most a ring's worth of new WQEs, else none (the consumer index).
 */
u32 srnic_wq_producer(struct srnic_wq *wq, struct ib_device *ibdev,
		      const char *what, u32 num)
{
	/* Pairs with the producer's release: WQE contents are visible. */
	u32 producer = smp_load_acquire(&wq->ring.ctrl->producer);

	if (producer - wq->consumer > wq->ring.num_entries) {
		ibdev_dbg(ibdev, "%s %u: bogus producer index %u\n", what, num,
			  producer);
		return wq->consumer;
	}
	return producer;
}

/**
 * srnic_wq_pop() - copy out the entry at a receive queue's consumer index
 * @rq: an RQ or SRQ holding at least one entry, its lock held
 * @wqe: where to copy it (the ring's entry size)
 *
 * The slot goes back to the producer.
 */
void srnic_wq_pop(struct srnic_wq *rq, void *wqe)
{
	srnic_wq_pop_fit(rq, wqe, 0);
}

/**
 * srnic_wq_pop_fit() - srnic_wq_pop() if the entry's buffers hold @len bytes
 * @rq: an RQ or SRQ holding at least one entry, its lock held
 * @wqe: where to copy it (the ring's entry size); copied in any case
 * @len: the message's length; 0 takes the entry whatever its SGEs
 *
 * The sum of the copy's SGE lengths is what srnic_sgl_get() makes of them
 * when their MRs are good. An entry with more SGEs than the queue allows is
 * taken: it is the WQE's own error, which the caller reports.
 *
 * Return: whether the entry was taken; if not, it stays at the consumer
 * index for the next message.
 */
bool srnic_wq_pop_fit(struct srnic_wq *rq, void *wqe, u64 len)
{
	const struct srnic_recv_wqe *rwqe = wqe;
	const struct srnic_sge *sge = (const struct srnic_sge *)(rwqe + 1);
	u64 room = 0;
	unsigned int i;

	memcpy(wqe, srnic_queue_entry(&rq->ring, rq->consumer),
	       rq->ring.entry_size);
	if (len && rwqe->num_sge <= rq->max_sge) {
		for (i = 0; i < rwqe->num_sge; i++)
			room += sge[i].length;
		if (room < len)
			return false;
	}
	rq->consumer++;
	/* Done reading the slot: the producer may reuse it. */
	smp_store_release(&rq->ring.ctrl->consumer, rq->consumer);
	return true;
}

/* srnic_wq_producer() of a QP's SQ or RQ. */
u32 srnic_wq_read_producer(struct srnic_qp *qp, struct srnic_wq *wq)
{
	return srnic_wq_producer(wq, qp->ibqp.device, "QP", qp->ibqp.qp_num);
}

/**
 * srnic_wq_post_recv() - write kernel receive WRs into an RQ or SRQ
 * @wq: the queue, a kernel-only ring
 * @wr: work requests
 * @bad_wr: the first request not posted, on error
 *
 * Return: 0, -ENOMEM when the ring is full, -EINVAL for too many SGEs.
 */
int srnic_wq_post_recv(struct srnic_wq *wq, const struct ib_recv_wr *wr,
		       const struct ib_recv_wr **bad_wr)
{
	unsigned long flags;
	u32 producer, i;
	int err = 0;

	spin_lock_irqsave(&wq->lock, flags);
	producer = wq->ring.ctrl->producer;
	for (; wr; wr = wr->next) {
		struct srnic_recv_wqe *wqe;
		struct srnic_sge *sge;

		if (srnic_wq_full(wq, producer) || wr->num_sge < 0 ||
		    wr->num_sge > wq->max_sge) {
			err = srnic_wq_full(wq, producer) ? -ENOMEM : -EINVAL;
			*bad_wr = wr;
			break;
		}
		wqe = srnic_queue_entry(&wq->ring, producer);
		sge = (struct srnic_sge *)(wqe + 1);
		memset(wqe, 0, sizeof(*wqe));
		wqe->wr_id = wr->wr_id;
		wqe->num_sge = wr->num_sge;
		for (i = 0; i < wr->num_sge; i++) {
			sge[i].addr = wr->sg_list[i].addr;
			sge[i].length = wr->sg_list[i].length;
			sge[i].lkey = wr->sg_list[i].lkey;
		}
		producer++;
	}
	/* WQE contents before the index that publishes them. */
	smp_store_release(&wq->ring.ctrl->producer, producer);
	spin_unlock_irqrestore(&wq->lock, flags);
	return err;
}
