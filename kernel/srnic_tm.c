// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: tag matching SRQs (IB_SRQT_TM), the offload MPI and UCX use.
 *
 * A tag-matching SRQ is an SRQ (its ring of receive WQEs, srnic_srq.c)
 * plus a list of tagged buffers the consumer posts with
 * ibv_post_srq_ops(): each holds a tag, a mask, SGEs and the wr_id its
 * receive completion carries. Every message sent to a QP of the SRQ
 * begins with a tag-matching header (struct srnic_tmh); the responder
 * hands its first bytes to srnic_tm_take(), which decides where the
 * message lands:
 *
 * - EAGER: the first posted buffer whose tag equals the message's under
 *   the buffer's mask takes the data after the header (IBV_WC_TM_RECV
 *   with TM_MATCH and TM_DATA_VALID, the tag and app_ctx in the CQE);
 * - RNDV: a rendezvous header (struct srnic_rvh) follows; a matching
 *   buffer is filled by READing the sender's buffer it names, then the
 *   sender gets a FIN message (a SEND of a header with SRNIC_TMH_FIN):
 *   IBV_WC_TM_RECV with TM_MATCH at the match, then with TM_DATA_VALID;
 * - a tagged message no buffer matches is unexpected: it lands whole in
 *   the SRQ's next receive WQE (IBV_WC_TM_RECV without TM_MATCH), for the
 *   consumer's own matching, and counts in hw_unexpected;
 * - NO_TAG (or a message too short for a header, or another opcode): the
 *   SRQ's next receive WQE, whole (IBV_WC_TM_NO_TAG).
 *
 * Phase synchronisation (ibv_post_srq_ops(3)): a buffer the consumer
 * posted before it saw an unexpected message must not take a later one in
 * its place. So matching stops at an unexpected message and starts again
 * when the consumer's count of unexpected messages it handled (passed
 * with IBV_OPS_TM_SYNC) reaches the device's; completions of list
 * operations made meanwhile carry IBV_WC_TM_SYNC_REQ. The verbs allow a
 * device to report any tagged message as unexpected; srnic does so for a
 * rendezvous that arrives over the wire (its requester cannot issue the
 * READ for the responder): the consumer's software protocol reads it, as
 * it does for every unexpected rendezvous. Between QPs of one namespace
 * (local delivery) the rendezvous is done here.
 *
 * List operations are commands (srnic_tm_op(), a modify_srq with driver
 * data): each takes effect, and a signaled one completes on the SRQ's CQ
 * (IBV_WC_TM_ADD, _DEL, _SYNC), before the command returns. Completions of
 * messages received through the SRQ go to the SRQ's CQ too (as an XRC
 * SRQ's, srnic_resp_cq()).
 */

#include <linux/slab.h>
#include <rdma/uverbs_ioctl.h>

#include "srnic.h"

/**
 * struct srnic_tm_tag - a tagged buffer of a tag-matching SRQ
 * @node: in srnic_tm.posted, in posting order
 * @tag: the tag, compared under @mask
 * @mask: the bits of @tag that must match
 * @recv_wr_id: the wr_id of the message's completions
 * @posted: on the list (its handle is in use)
 * @num_sge: entries of @sge
 * @sge: the buffer (SRNIC_TM_MAX_SGE entries)
 */
struct srnic_tm_tag {
	struct list_head node;
	u64 tag;
	u64 mask;
	u64 recv_wr_id;
	bool posted;
	u16 num_sge;
	struct srnic_sge sge[SRNIC_TM_MAX_SGE];
};

/**
 * struct srnic_tm - the tag list of a tag-matching SRQ
 * @lock: guards everything here; taken before the SRQ ring's lock, from
 *	  any context
 * @posted: the posted tags (struct srnic_tm_tag), oldest first
 * @hw_unexpected: messages reported unexpected so far
 * @sw_unexpected: the consumer's count of unexpected messages it handled,
 *		   as its last IBV_OPS_TM_SYNC operation gave it; tags match
 *		   only while it equals @hw_unexpected
 * @max_tags: entries of @tags (the handles are their indexes)
 * @tags: the tagged buffers
 */
struct srnic_tm {
	spinlock_t lock;	/* the list, the counts, the tags */
	struct list_head posted;
	u32 hw_unexpected;
	u32 sw_unexpected;
	u32 max_tags;
	struct srnic_tm_tag tags[];
};

/**
 * srnic_tm_create() - give a tag-matching SRQ its tag list
 * @srq: the SRQ being created
 * @max_num_tags: what the consumer asked for (1 to SRNIC_MAX_TM_TAGS)
 *
 * Return: 0, -EINVAL, -ENOMEM.
 */
int srnic_tm_create(struct srnic_srq *srq, u32 max_num_tags)
{
	struct srnic_tm *tm;

	if (!max_num_tags || max_num_tags > SRNIC_MAX_TM_TAGS)
		return -EINVAL;
	tm = kvzalloc(struct_size(tm, tags, max_num_tags), GFP_KERNEL);
	if (!tm)
		return -ENOMEM;
	spin_lock_init(&tm->lock);
	INIT_LIST_HEAD(&tm->posted);
	tm->max_tags = max_num_tags;
	srq->tm = tm;
	return 0;
}

/**
 * srnic_tm_destroy() - free a tag-matching SRQ's tag list
 * @srq: the SRQ, which no QP uses any more
 */
void srnic_tm_destroy(struct srnic_srq *srq)
{
	kvfree(srq->tm);
	srq->tm = NULL;
}

/* Post a list operation's completion on the SRQ's CQ. */
static int srnic_tm_op_complete(struct srnic_srq *srq,
				const struct srnic_tm_op *op, u8 wc_opcode,
				u8 status, bool sync_req)
{
	struct srnic_cqe cqe = {
		.wr_id = op->wr_id,
		.status = status,
		.opcode = wc_opcode,
		.wc_flags = sync_req ? SRNIC_CQE_TM_SYNC_REQ : 0,
	};

	return srnic_cq_post(to_srnic_cq(srq->ibsrq.ext.cq), &cqe, false);
}

/**
 * srnic_tm_op() - one operation on a tag-matching SRQ's list
 * @srq: the SRQ
 * @udata: the command's driver data: struct srnic_tm_op, then its SGEs
 *
 * Return: 0; -EINVAL for a malformed operation, a handle out of range or
 * too many SGEs; -EBUSY to ADD under a handle in use (the provider tries
 * another); -ENOSPC when the completion found the CQ full (the operation
 * took effect).
 */
int srnic_tm_op(struct srnic_srq *srq, struct ib_udata *udata)
{
	struct srnic_tm *tm = srq->tm;
	u8 status = IB_WC_SUCCESS;	/* or SRNIC_WC_TM_ERR: not ib_core's */
	struct srnic_sge sge[SRNIC_TM_MAX_SGE];
	struct srnic_tm_op op;
	struct srnic_tm_tag *t;
	unsigned long flags;
	bool sync_req;
	u8 wc_opcode;
	int err;

	if (udata->inlen < sizeof(op))
		return -EINVAL;
	err = ib_copy_from_udata(&op, udata, sizeof(op));
	if (err)
		return err;
	if (op.reserved || (op.flags & ~(SRNIC_TM_OP_SIGNALED |
					 SRNIC_TM_OP_SYNC_CNT)))
		return -EINVAL;
	switch (op.opcode) {
	case SRNIC_TM_OP_ADD:
		if (op.num_sge > SRNIC_TM_MAX_SGE ||
		    op.num_sge > srq->rq.max_sge ||
		    udata->inlen != sizeof(op) + op.num_sge * sizeof(sge[0]))
			return -EINVAL;
		if (copy_from_user(sge, (const u8 __user *)udata->inbuf +
				   sizeof(op), op.num_sge * sizeof(sge[0])))
			return -EFAULT;
		fallthrough;
	case SRNIC_TM_OP_DEL:
		if (op.handle >= tm->max_tags)
			return -EINVAL;
		break;
	case SRNIC_TM_OP_SYNC:
		break;
	default:
		return -EINVAL;
	}
	if (op.opcode != SRNIC_TM_OP_ADD && udata->inlen != sizeof(op))
		return -EINVAL;

	spin_lock_irqsave(&tm->lock, flags);
	t = op.opcode == SRNIC_TM_OP_SYNC ? NULL : &tm->tags[op.handle];
	switch (op.opcode) {
	case SRNIC_TM_OP_ADD:
		if (t->posted) {
			spin_unlock_irqrestore(&tm->lock, flags);
			return -EBUSY;
		}
		t->tag = op.tag;
		t->mask = op.mask;
		t->recv_wr_id = op.recv_wr_id;
		t->num_sge = op.num_sge;
		memcpy(t->sge, sge, op.num_sge * sizeof(sge[0]));
		t->posted = true;
		list_add_tail(&t->node, &tm->posted);
		wc_opcode = SRNIC_WC_TM_ADD;
		break;
	case SRNIC_TM_OP_DEL:
		/* A tag a message took meanwhile: IBV_WC_TM_ERR. */
		if (t->posted) {
			list_del(&t->node);
			t->posted = false;
		} else {
			status = SRNIC_WC_TM_ERR;
		}
		wc_opcode = SRNIC_WC_TM_DEL;
		break;
	default:
		wc_opcode = SRNIC_WC_TM_SYNC;
		break;
	}
	if (op.flags & SRNIC_TM_OP_SYNC_CNT)
		tm->sw_unexpected = op.unexpected_cnt;
	sync_req = tm->sw_unexpected != tm->hw_unexpected;
	spin_unlock_irqrestore(&tm->lock, flags);

	if (!(op.flags & SRNIC_TM_OP_SIGNALED))
		return 0;
	return srnic_tm_op_complete(srq, &op, wc_opcode, status, sync_req) ?
	       -ENOSPC : 0;
}

/* The first posted tag @tag matches, or NULL. Under tm->lock. */
static struct srnic_tm_tag *srnic_tm_find(struct srnic_tm *tm, u64 tag)
{
	struct srnic_tm_tag *t;

	list_for_each_entry(t, &tm->posted, node)
		if (!((t->tag ^ tag) & t->mask))
			return t;
	return NULL;
}

/**
 * srnic_tm_take() - where a message to a tag-matching SRQ lands
 * @qp: the receiving QP (its counters)
 * @srq: the QP's SRQ (srnic_qp_tm_srq())
 * @hdr: the message's first bytes
 * @len: how many (up to sizeof(struct srnic_tmh) + sizeof(struct
 *	 srnic_rvh))
 * @rndv: whether the caller can perform a rendezvous (local delivery)
 * @rwqe: where to copy the receive WQE the message fills: the SRQ's next
 *	  one, or one made from the matching tag (its wr_id the tag's
 *	  recv_wr_id)
 * @m: what the completions carry and how much of the message to skip
 *
 * Return: 0, or -ENOENT when the message needs the SRQ's next receive WQE
 * and there is none (an RNR: nothing changed).
 */
int srnic_tm_take(struct srnic_qp *qp, struct srnic_srq *srq, const u8 *hdr,
		  u32 len, bool rndv, struct srnic_recv_wqe *rwqe,
		  struct srnic_tm_match *m)
{
	const struct srnic_tmh *tmh = (const struct srnic_tmh *)hdr;
	const struct srnic_rvh *rvh = (const struct srnic_rvh *)(tmh + 1);
	struct srnic_tm *tm = srq->tm;
	struct srnic_tm_tag *t = NULL;
	unsigned long flags;
	bool tagged;
	u64 tag;
	int err;

	memset(m, 0, sizeof(*m));
	tagged = len >= sizeof(*tmh) &&
		 (tmh->opcode == SRNIC_TMH_EAGER ||
		  (tmh->opcode == SRNIC_TMH_RNDV &&
		   len >= sizeof(*tmh) + sizeof(*rvh)));
	if (!tagged) {
		m->wc_opcode = SRNIC_WC_TM_NO_TAG;
		return srnic_srq_take(srq, rwqe, 0);
	}
	tag = be64_to_cpu(tmh->tag);
	m->wc_opcode = SRNIC_WC_TM_RECV;

	spin_lock_irqsave(&tm->lock, flags);
	if (tm->sw_unexpected == tm->hw_unexpected &&
	    (tmh->opcode == SRNIC_TMH_EAGER || rndv))
		t = srnic_tm_find(tm, tag);
	if (!t) {
		err = srnic_srq_take(srq, rwqe, 0);
		if (!err)
			tm->hw_unexpected++;
		spin_unlock_irqrestore(&tm->lock, flags);
		if (!err)
			srnic_qp_count(qp, SRNIC_CNT_TM_UNEXPECTED);
		return err;
	}
	list_del(&t->node);
	t->posted = false;
	rwqe->wr_id = t->recv_wr_id;
	rwqe->num_sge = t->num_sge;
	memcpy(rwqe + 1, t->sge, t->num_sge * sizeof(t->sge[0]));
	spin_unlock_irqrestore(&tm->lock, flags);
	srnic_qp_count(qp, SRNIC_CNT_TM_MATCHED);

	m->tag = tag;
	m->priv = be32_to_cpu(tmh->app_ctx);
	if (tmh->opcode == SRNIC_TMH_EAGER) {
		m->wc_flags = SRNIC_CQE_TM_MATCH | SRNIC_CQE_TM_DATA_VALID;
		m->skip = sizeof(*tmh);
	} else {
		m->wc_flags = SRNIC_CQE_TM_MATCH;
		m->rndv = true;
		m->rndv_va = be64_to_cpu(rvh->va);
		m->rndv_rkey = be32_to_cpu(rvh->rkey);
		m->rndv_len = be32_to_cpu(rvh->len);
	}
	return 0;
}

/**
 * srnic_tm_fill_cqe() - the tag-matching fields of a receive completion
 * @m: srnic_tm_take()'s answer for the message
 * @cqe: the completion, its status set
 */
void srnic_tm_fill_cqe(const struct srnic_tm_match *m, struct srnic_cqe *cqe)
{
	cqe->opcode = m->wc_opcode;
	cqe->wc_flags |= m->wc_flags;
	if (m->wc_flags & SRNIC_CQE_TM_MATCH) {
		cqe->tm_tag = m->tag;
		cqe->tm_priv = m->priv;
	}
}
