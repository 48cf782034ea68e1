// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: shared receive queues.
 *
 * An SRQ is one ring of receive WQEs in the RQ's format (struct
 * srnic_recv_wqe followed by SGEs), set up and mapped into the process
 * exactly like a QP's RQ: the provider writes WQEs and publishes the
 * producer index without a syscall; kernel SRQs are posted to by
 * srnic_post_srq_recv(). No doorbell is ever needed: WQEs are taken when
 * messages arrive, so the ring's flags stay 0.
 *
 * Any number of QPs, of any type, on any engine, take WQEs from one SRQ
 * with srnic_srq_take() (through srnic_rq_take()), serialised by the
 * ring's lock, which kernel posts take too. The completion of a WQE goes
 * to the CQ of the QP that took it. The SRQ limit, once armed by
 * modify_srq, fires IB_EVENT_SRQ_LIMIT_REACHED once, when a take leaves
 * fewer WQEs than the limit, and disarms.
 *
 * A QP attached to an SRQ has no RQ. When it enters the error state it
 * flushes nothing from the SRQ; it completes the WQE its responder held
 * with IB_WC_WR_FLUSH_ERR, then reports IB_EVENT_QP_LAST_WQE_REACHED
 * (srnic_srq_qp_error(), srnic_srq_qp_flushed()).
 *
 * XRC: an XRC domain (srnic_alloc_xrcd()) holds its XRC SRQs by number.
 * An XRC SRQ belongs to one domain and has its own CQ; an XRC_TGT QP of
 * the domain takes WQEs from the SRQ each request names in its XRCETH,
 * found with srnic_xrc_srq_get(), which only finds SRQs of the QP's own
 * domain. The receive completion goes to the SRQ's CQ, and the SRQ's PD
 * checks every key of the request. Those lookups hold a reference for one
 * packet (or one local delivery); destroy_srq unpublishes the SRQ and
 * waits for them.
 */

#include <rdma/uverbs_ioctl.h>

#include "srnic.h"

static void srnic_srq_event(struct srnic_srq *srq, enum ib_event_type type)
{
	struct ib_event event = {
		.device = srq->ibsrq.device,
		.element.srq = &srq->ibsrq,
		.event = type,
	};

	if (srq->ibsrq.event_handler)
		srq->ibsrq.event_handler(&event, srq->ibsrq.srq_context);
}

/**
 * srnic_create_srq() - ib_device_ops.create_srq
 * @ibsrq: the SRQ ib_core allocated
 * @init: type and attributes; max_wr and max_sge are updated to what the
 *	  ring holds, srq_limit is ignored (the limit starts disarmed)
 * @udata: driver data of a user SRQ (struct srnic_create_srq_req and
 *	   _resp); NULL for a kernel SRQ
 *
 * Basic, XRC and tag-matching SRQs (an XRC SRQ needs its domain and its
 * CQ, a tag-matching one its CQ and max_num_tags: srnic_tm.c).
 */
int srnic_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init,
		     struct ib_udata *udata)
{
	struct srnic_dev *sdev = to_srnic_dev(ibsrq->device);
	struct srnic_srq *srq = to_srnic_srq(ibsrq);
	struct ib_srq_attr *attr = &init->attr;
	struct srnic_create_srq_resp resp = {};
	int id, err;

	if (init->srq_type != IB_SRQT_BASIC && init->srq_type != IB_SRQT_XRC &&
	    init->srq_type != IB_SRQT_TM)
		return -EOPNOTSUPP;
	if ((init->srq_type == IB_SRQT_XRC &&
	     (!init->ext.xrc.xrcd || !init->ext.cq)) ||
	    (init->srq_type == IB_SRQT_TM && !init->ext.cq))
		return -EINVAL;
	if (!attr->max_wr || attr->max_wr > SRNIC_MAX_SRQ_WR ||
	    attr->max_sge > SRNIC_MAX_SGE)
		return -EINVAL;
	if (udata) {
		err = srnic_udata_check_reserved_req(udata);
		if (err)
			return err;
	}

	id = ida_alloc_max(&sdev->srq_ids, SRNIC_MAX_SRQ - 1, GFP_KERNEL);
	if (id < 0)
		return id == -ENOSPC ? -ENOMEM : id;
	srq->srqn = id;
	/* What ib_core reports as the XRC SRQ's number (ibv_get_srq_num()). */
	if (init->srq_type == IB_SRQT_XRC)
		ibsrq->ext.xrc.srq_num = id;
	srq->limit = 0;
	srq->tm = NULL;
	if (init->srq_type == IB_SRQT_TM) {
		err = srnic_tm_create(srq,
				      init->ext.tag_matching.max_num_tags);
		if (err)
			goto err_free_id;
	}

	err = srnic_wq_init(&srq->rq, NULL, attr->max_wr,
			    sizeof(struct srnic_recv_wqe),
			    attr->max_sge * sizeof(struct srnic_sge));
	if (err)
		goto err_free_id;
	/* Taken when messages arrive: posting never needs a doorbell. */
	WRITE_ONCE(srq->rq.ring.ctrl->flags, 0);

	if (udata) {
		struct srnic_ucontext *uctx =
			rdma_udata_to_drv_context(udata, struct srnic_ucontext,
						  ibuc);

		err = srnic_queue_map(&srq->rq.ring, &uctx->ibuc, &resp.rq);
		if (err)
			goto err_destroy_ring;
		resp.srqn = srq->srqn;
		err = ib_copy_to_udata(udata, &resp,
				       min_t(size_t, udata->outlen,
					     sizeof(resp)));
		if (err)
			goto err_destroy_ring;
	}

	attr->max_wr = srq->rq.max_wr;
	attr->max_sge = srq->rq.max_sge;
	attr->srq_limit = 0;

	/* Its receive and list completions end any loan of the CQ. */
	if (srq->tm)
		srnic_direct_cq_user_add(to_srnic_cq(init->ext.cq));

	if (init->srq_type == IB_SRQT_XRC) {
		refcount_set(&srq->ref, 1);
		init_completion(&srq->released);
		srq->xrcd = to_srnic_xrcd(init->ext.xrc.xrcd);
		/* Its completions end any loan of the CQ (srnic_direct.c). */
		srnic_direct_cq_user_add(to_srnic_cq(init->ext.cq));
		/* Published last: XRC_TGT QPs find it from now on. */
		err = xa_insert(&srq->xrcd->srqs, srq->srqn, srq, GFP_KERNEL);
		if (err) {
			srnic_direct_cq_user_del(to_srnic_cq(init->ext.cq));
			srq->xrcd = NULL;
			goto err_destroy_ring;
		}
	}
	return 0;

err_destroy_ring:
	srnic_queue_destroy(&srq->rq.ring);
err_free_id:
	srnic_tm_destroy(srq);
	ida_free(&sdev->srq_ids, srq->srqn);
	return err;
}

/*
 * Replace the ring of @srq with one of @max_wr entries (rounded up to a
 * power of two) holding the WQEs posted and not taken, at their indexes.
 * A user SRQ's new ring is mapped and its descriptor written to the
 * address the command names (struct srnic_modify_srq_req). The swap is
 * under the ring's lock, which every taker and kernel poster holds; the
 * few lockless readers of an SRQ's ring go through
 * srnic_recv_wq_has_work(), which takes it too.
 */
static int srnic_srq_resize(struct srnic_srq *srq, u32 max_wr,
			    struct ib_udata *udata)
{
	struct srnic_modify_srq_req req = {};
	struct srnic_wq *rq = &srq->rq;
	struct srnic_queue_desc desc;
	struct srnic_queue ring;
	unsigned long flags;
	u32 producer, i;
	int err;

	if (!max_wr || max_wr > SRNIC_MAX_SRQ_WR)
		return -EINVAL;
	if (udata) {
		if (udata->inlen < sizeof(req))
			return -EOPNOTSUPP;	/* a provider that cannot map it */
		err = ib_copy_from_udata(&req, udata, sizeof(req));
		if (err)
			return err;
	}
	err = srnic_queue_init(&ring, roundup_pow_of_two(max_wr),
			       rq->ring.entry_size);
	if (err)
		return err;
	if (udata) {
		struct srnic_ucontext *uctx =
			rdma_udata_to_drv_context(udata, struct srnic_ucontext,
						  ibuc);

		err = srnic_queue_map(&ring, &uctx->ibuc, &desc);
		if (!err && copy_to_user(u64_to_user_ptr(req.ring_desc_addr),
					 &desc, sizeof(desc)))
			err = -EFAULT;
		if (err)
			goto out;
	}

	spin_lock_irqsave(&rq->lock, flags);
	producer = srnic_wq_producer(rq, srq->ibsrq.device, "SRQ", srq->srqn);
	if (producer - rq->consumer > ring.num_entries) {
		spin_unlock_irqrestore(&rq->lock, flags);
		err = -EINVAL;	/* the posted WQEs do not fit */
		goto out;
	}
	for (i = rq->consumer; i != producer; i++)
		memcpy(srnic_queue_entry(&ring, i),
		       srnic_queue_entry(&rq->ring, i), ring.entry_size);
	ring.ctrl->producer = producer;
	ring.ctrl->consumer = rq->consumer;
	ring.ctrl->flags = 0;
	swap(rq->ring, ring);
	rq->max_wr = rq->ring.num_entries;
	spin_unlock_irqrestore(&rq->lock, flags);
out:
	srnic_queue_destroy(&ring);	/* the old one, or the unused new one */
	return err;
}

/**
 * srnic_modify_srq() - ib_device_ops.modify_srq
 * @ibsrq: the SRQ
 * @attr: new attributes
 * @mask: IB_SRQ_LIMIT arms the limit (0 disarms it); IB_SRQ_MAX_WR
 *	  resizes the ring (srnic_srq_resize())
 * @udata: driver data: none; with IB_SRQ_MAX_WR, struct
 *	   srnic_modify_srq_req; for a tag-matching SRQ with @mask 0, one
 *	   operation on its tag list (struct srnic_tm_op: srnic_tm_op())
 */
int srnic_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
		     enum ib_srq_attr_mask mask, struct ib_udata *udata)
{
	struct srnic_srq *srq = to_srnic_srq(ibsrq);
	unsigned long flags;
	int err;

	if (mask & ~(IB_SRQ_MAX_WR | IB_SRQ_LIMIT))
		return -EINVAL;
	if (srq->tm && !mask && udata && udata->inlen)
		return srnic_tm_op(srq, udata);
	if (mask & IB_SRQ_MAX_WR) {
		err = srnic_srq_resize(srq, attr->max_wr, udata);
		if (err)
			return err;
	} else if (udata && udata->inlen &&
		   !ib_is_udata_cleared(udata, 0, udata->inlen)) {
		return -EOPNOTSUPP;
	}
	if (!(mask & IB_SRQ_LIMIT))
		return 0;
	if (attr->srq_limit > srq->rq.max_wr)
		return -EINVAL;

	spin_lock_irqsave(&srq->rq.lock, flags);
	srq->limit = attr->srq_limit;
	spin_unlock_irqrestore(&srq->rq.lock, flags);
	return 0;
}

/**
 * srnic_query_srq() - ib_device_ops.query_srq
 * @ibsrq: the SRQ
 * @attr: its size and its limit (0 once fired or never armed)
 */
int srnic_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr)
{
	struct srnic_srq *srq = to_srnic_srq(ibsrq);

	attr->max_wr = srq->rq.max_wr;
	attr->max_sge = srq->rq.max_sge;
	attr->srq_limit = READ_ONCE(srq->limit);
	return 0;
}

/**
 * srnic_destroy_srq() - ib_device_ops.destroy_srq
 * @ibsrq: the SRQ; ib_core refuses to destroy it while QPs use it
 *	   (usecnt), and a QP's destroy waits for every user of the QP, so
 *	   nobody takes WQEs from it any more; an XRC SRQ is unpublished
 *	   from its domain first and waits for the XRC_TGT QPs' lookups
 * @udata: unused
 */
int srnic_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata)
{
	struct srnic_dev *sdev = to_srnic_dev(ibsrq->device);
	struct srnic_srq *srq = to_srnic_srq(ibsrq);

	if (srq->xrcd) {
		/* XRC_TGT QPs hold no usecnt: wait for their lookups. */
		xa_erase(&srq->xrcd->srqs, srq->srqn);
		synchronize_rcu();
		srnic_srq_put(srq);
		wait_for_completion(&srq->released);
		srnic_direct_cq_user_del(to_srnic_cq(ibsrq->ext.cq));
		srnic_cq_wait_events(to_srnic_cq(ibsrq->ext.cq));
	}
	if (srq->tm) {
		srnic_direct_cq_user_del(to_srnic_cq(ibsrq->ext.cq));
		srnic_tm_destroy(srq);
	}
	srnic_queue_destroy(&srq->rq.ring);
	ida_free(&sdev->srq_ids, srq->srqn);
	return 0;
}

/**
 * srnic_post_srq_recv() - ib_device_ops.post_srq_recv
 * @ibsrq: the SRQ
 * @wr: work requests; for a user SRQ, none (the provider writes the ring
 *	and needs no doorbell)
 * @bad_wr: the first request not posted, on error
 */
int srnic_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
			const struct ib_recv_wr **bad_wr)
{
	if (ibsrq->uobject) {
		/* User WQEs travel through the ring only. */
		if (wr) {
			*bad_wr = wr;
			return -EINVAL;
		}
		return 0;
	}
	return srnic_wq_post_recv(&to_srnic_srq(ibsrq)->rq, wr, bad_wr);
}

/**
 * srnic_srq_take() - take the next receive WQE of an SRQ
 * @srq: the SRQ
 * @rwqe: where to copy it (SRNIC_MAX_RQ_ENTRY_SIZE bytes); its num_sge is
 *	  unchecked (compare it with @srq->rq.max_sge)
 * @len: take it only if its buffers hold @len bytes (srnic_wq_pop_fit());
 *	 0: whatever they hold
 *
 * For any QP type, from any context. Fires the armed limit.
 *
 * Return: 0, -ENOENT when the SRQ is empty, -EMSGSIZE when the next WQE's
 * buffers are too small for @len (it stays posted).
 */
int srnic_srq_take(struct srnic_srq *srq, struct srnic_recv_wqe *rwqe,
		   u64 len)
{
	struct srnic_wq *rq = &srq->rq;
	bool limit_reached = false;
	unsigned long flags;
	u32 producer;

	spin_lock_irqsave(&rq->lock, flags);
	producer = srnic_wq_producer(rq, srq->ibsrq.device, "SRQ", srq->srqn);
	if (producer == rq->consumer) {
		spin_unlock_irqrestore(&rq->lock, flags);
		return -ENOENT;
	}
	if (!srnic_wq_pop_fit(rq, rwqe, len)) {
		spin_unlock_irqrestore(&rq->lock, flags);
		return -EMSGSIZE;
	}
	if (srq->limit && producer - rq->consumer < srq->limit) {
		WRITE_ONCE(srq->limit, 0);
		limit_reached = true;
	}
	spin_unlock_irqrestore(&rq->lock, flags);

	if (limit_reached)
		srnic_srq_event(srq, IB_EVENT_SRQ_LIMIT_REACHED);
	return 0;
}

/**
 * srnic_srq_qp_error() - a QP attached to an SRQ entered the error state
 * @qp: the QP, under its state_lock
 *
 * Its task completes the receive WQE its responder held, then reports
 * IB_EVENT_QP_LAST_WQE_REACHED (srnic_srq_qp_flushed()).
 */
void srnic_srq_qp_error(struct srnic_qp *qp)
{
	atomic_set(&qp->last_wqe_pending, 1);
	srnic_engine_task_schedule(&qp->task);
}

/**
 * srnic_srq_qp_flushed() - the task of a QP in error flushed what it held
 * @qp: the QP, attached to an SRQ; from its task
 *
 * The QP takes no more WQEs from the SRQ (srnic_rq_take() refuses in the
 * error state): report IB_EVENT_QP_LAST_WQE_REACHED, once per entry into
 * the error state.
 */
void srnic_srq_qp_flushed(struct srnic_qp *qp)
{
	if (atomic_xchg(&qp->last_wqe_pending, 0))
		srnic_qp_event(qp, IB_EVENT_QP_LAST_WQE_REACHED);
}

/**
 * srnic_xrc_srq_get() - the XRC SRQ an XRC request names, referenced
 * @qp: an XRC_TGT QP
 * @srqn: the SRQ number of the request's XRCETH (untrusted)
 *
 * Only SRQs of @qp's XRC domain are found. From any context.
 *
 * Return: the SRQ, to be released with srnic_srq_put(), or NULL.
 */
struct srnic_srq *srnic_xrc_srq_get(struct srnic_qp *qp, u32 srqn)
{
	struct srnic_srq *srq;

	if (!qp->xrcd)
		return NULL;
	rcu_read_lock();
	srq = xa_load(&qp->xrcd->srqs, srqn);
	if (srq && !refcount_inc_not_zero(&srq->ref))
		srq = NULL;
	rcu_read_unlock();
	return srq;
}

/**
 * srnic_srq_put() - drop a reference on an XRC SRQ
 * @srq: the SRQ
 */
void srnic_srq_put(struct srnic_srq *srq)
{
	if (refcount_dec_and_test(&srq->ref))
		complete(&srq->released);
}

/**
 * srnic_alloc_xrcd() - ib_device_ops.alloc_xrcd
 * @ibxrcd: the XRC domain ib_core allocated
 * @udata: driver data; srnic defines none (non-zero bytes: EOPNOTSUPP)
 */
int srnic_alloc_xrcd(struct ib_xrcd *ibxrcd, struct ib_udata *udata)
{
	struct srnic_xrcd *xrcd = to_srnic_xrcd(ibxrcd);

	if (udata) {
		int err = srnic_udata_check_tail(udata, 0);

		if (err)
			return err;
	}
	xa_init(&xrcd->srqs);
	return 0;
}

/**
 * srnic_dealloc_xrcd() - ib_device_ops.dealloc_xrcd
 * @ibxrcd: the XRC domain; ib_core deallocates it only when no SRQ or QP
 *	    uses it any more, so it holds no SRQ
 * @udata: unused
 */
int srnic_dealloc_xrcd(struct ib_xrcd *ibxrcd, struct ib_udata *udata)
{
	struct srnic_xrcd *xrcd = to_srnic_xrcd(ibxrcd);

	WARN_ON(!xa_empty(&xrcd->srqs));
	xa_destroy(&xrcd->srqs);
	return 0;
}
