// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: receive side scaling: work queues, indirection tables, hash QPs.
 *
 * A work queue (ibv_create_wq(), IBV_WQT_RQ: struct srnic_rwq) is a
 * receive queue of its own, in the RQ's ring format, mapped into the
 * process like an SRQ's and filled the same way; it completes to its own
 * CQ. An indirection table (ibv_create_rwq_ind_table()) lists 2^n of them.
 * A hash QP is a raw packet QP created with a table and a hash
 * configuration (struct srnic_create_rss_qp_req: the Toeplitz key and the
 * header fields hashed); it has no SQ and no RQ of its own, and no states
 * (modify_qp refuses it, as mlx5's RSS QPs take none either). Its flows
 * steer frames to it (srnic_raw.c); its task hashes each frame's fields
 * (source then destination address, source then destination port) with
 * the key, and the hash modulo the table's size picks the WQ whose next
 * receive WQE gets the frame. A WQ not ready (IBV_WQS_RDY) drops it.
 */

#include <linux/if_vlan.h>
#include <linux/ip.h>
#include <linux/ipv6.h>

#include "srnic.h"
#include "srnic_wire.h"

/* The hash fields srnic computes Toeplitz over. */
#define SRNIC_RX_HASH_FIELDS						\
	(SRNIC_RX_HASH_SRC_IPV4 | SRNIC_RX_HASH_DST_IPV4 |		\
	 SRNIC_RX_HASH_SRC_IPV6 | SRNIC_RX_HASH_DST_IPV6 |		\
	 SRNIC_RX_HASH_SRC_PORT_TCP | SRNIC_RX_HASH_DST_PORT_TCP |	\
	 SRNIC_RX_HASH_SRC_PORT_UDP | SRNIC_RX_HASH_DST_PORT_UDP)

/* ---- Work queues ------------------------------------------------------ */

/**
 * srnic_create_wq() - ib_device_ops.create_wq
 * @ibpd: the PD of the WQEs' buffers
 * @init: the WQ's attributes: type RQ, sizes, CQ; no flags
 * @udata: struct srnic_create_wq_req in, srnic_create_wq_resp out
 *
 * Return: the WQ, in the RESET state, or an ERR_PTR: -EOPNOTSUPP for
 * another type or a creation flag, -EINVAL for sizes beyond the device's.
 */
struct ib_wq *srnic_create_wq(struct ib_pd *ibpd, struct ib_wq_init_attr *init,
			      struct ib_udata *udata)
{
	struct srnic_dev *sdev = to_srnic_dev(ibpd->device);
	struct srnic_create_wq_resp resp = {};
	struct srnic_ucontext *uctx;
	struct srnic_rwq *rwq;
	int id, err;

	if (!udata || init->wq_type != IB_WQT_RQ || init->create_flags)
		return ERR_PTR(-EOPNOTSUPP);
	if (!init->cq || !init->max_wr || init->max_wr > SRNIC_MAX_QP_WR ||
	    init->max_sge > SRNIC_MAX_SGE)
		return ERR_PTR(-EINVAL);
	err = srnic_udata_check_reserved_req(udata);
	if (err)
		return ERR_PTR(err);

	rwq = kzalloc(sizeof(*rwq), GFP_KERNEL);
	if (!rwq)
		return ERR_PTR(-ENOMEM);
	id = ida_alloc_max(&sdev->wq_ids, SRNIC_MAX_QPN, GFP_KERNEL);
	if (id < 0) {
		err = id == -ENOSPC ? -ENOMEM : id;
		goto err_free;
	}
	rwq->ibwq.wq_num = id;
	mutex_init(&rwq->consume);
	rwq->state = IB_WQS_RESET;
	err = srnic_wq_init(&rwq->rq, NULL, init->max_wr,
			    sizeof(struct srnic_recv_wqe),
			    init->max_sge * sizeof(struct srnic_sge));
	if (err)
		goto err_free_id;
	/* Taken when frames arrive: posting never needs a doorbell. */
	WRITE_ONCE(rwq->rq.ring.ctrl->flags, 0);
	uctx = rdma_udata_to_drv_context(udata, struct srnic_ucontext, ibuc);
	err = srnic_queue_map(&rwq->rq.ring, &uctx->ibuc, &resp.rq);
	if (err)
		goto err_destroy_ring;
	err = ib_copy_to_udata(udata, &resp,
			       min_t(size_t, udata->outlen, sizeof(resp)));
	if (err)
		goto err_destroy_ring;
	init->max_wr = rwq->rq.max_wr;
	init->max_sge = rwq->rq.max_sge;
	return &rwq->ibwq;

err_destroy_ring:
	srnic_queue_destroy(&rwq->rq.ring);
err_free_id:
	ida_free(&sdev->wq_ids, id);
err_free:
	kfree(rwq);
	return ERR_PTR(err);
}

/* Complete every posted WQE with a flush error. Under rwq->consume. */
static void srnic_rwq_flush(struct srnic_rwq *rwq)
{
	struct srnic_cq *cq = to_srnic_cq(rwq->ibwq.cq);
	struct srnic_recv_wqe rwqe;

	while (!srnic_rwq_take(rwq, &rwqe))
		srnic_cq_post_flush(cq, rwqe.wr_id, rwq->ibwq.wq_num,
				    IB_WC_RECV);
}

/**
 * srnic_modify_wq() - ib_device_ops.modify_wq
 * @ibwq: the WQ
 * @attr: the new state (IB_WQ_STATE) and the current one (IB_WQ_CUR_STATE)
 * @mask: which of @attr apply; flags (IB_WQ_FLAGS) are not supported
 * @udata: driver data; srnic defines none
 *
 * RESET, RDY and ERR, any of them from any: entering ERR completes what is
 * posted with flush errors, as frames find no WQE there after.
 *
 * Return: 0, -EINVAL for a wrong current state or an unknown state,
 * -EOPNOTSUPP for flags.
 */
int srnic_modify_wq(struct ib_wq *ibwq, struct ib_wq_attr *attr, u32 mask,
		    struct ib_udata *udata)
{
	struct srnic_rwq *rwq = to_srnic_rwq(ibwq);
	int err = 0;

	if (mask & ~(IB_WQ_STATE | IB_WQ_CUR_STATE))
		return -EOPNOTSUPP;
	if (udata && udata->inlen &&
	    !ib_is_udata_cleared(udata, 0, udata->inlen))
		return -EOPNOTSUPP;
	mutex_lock(&rwq->consume);
	if ((mask & IB_WQ_CUR_STATE) && attr->curr_wq_state != rwq->state) {
		err = -EINVAL;
	} else if (mask & IB_WQ_STATE) {
		if (attr->wq_state > IB_WQS_ERR) {
			err = -EINVAL;
		} else {
			WRITE_ONCE(rwq->state, attr->wq_state);
			ibwq->state = attr->wq_state;
			if (attr->wq_state == IB_WQS_ERR)
				srnic_rwq_flush(rwq);
		}
	}
	mutex_unlock(&rwq->consume);
	return err;
}

/**
 * srnic_destroy_wq() - ib_device_ops.destroy_wq
 * @ibwq: the WQ; no indirection table lists it any more (ib_core's count)
 * @udata: unused
 *
 * Return: 0.
 */
int srnic_destroy_wq(struct ib_wq *ibwq, struct ib_udata *udata)
{
	struct srnic_dev *sdev = to_srnic_dev(ibwq->device);
	struct srnic_rwq *rwq = to_srnic_rwq(ibwq);

	/* A hash QP's task in the middle of a delivery to it finishes first. */
	mutex_lock(&rwq->consume);
	mutex_unlock(&rwq->consume);
	srnic_cq_wait_events(to_srnic_cq(ibwq->cq));
	srnic_queue_destroy(&rwq->rq.ring);
	ida_free(&sdev->wq_ids, ibwq->wq_num);
	kfree(rwq);
	return 0;
}

/**
 * srnic_create_rwq_ind_table() - ib_device_ops.create_rwq_ind_table
 * @table: the table, its WQs filled in by ib_core
 * @init: its size (log2) and WQs
 * @udata: driver data; srnic defines none
 *
 * Return: 0, or -ENOMEM when the device's table numbers are used up.
 */
int srnic_create_rwq_ind_table(struct ib_rwq_ind_table *table,
			       struct ib_rwq_ind_table_init_attr *init,
			       struct ib_udata *udata)
{
	struct srnic_dev *sdev = to_srnic_dev(table->device);
	int id;

	if (init->log_ind_tbl_size > SRNIC_MAX_LOG_RWQ_IND_TABLE)
		return -EINVAL;
	id = ida_alloc_max(&sdev->rwq_ind_table_ids, SRNIC_MAX_QPN, GFP_KERNEL);
	if (id < 0)
		return id == -ENOSPC ? -ENOMEM : id;
	table->ind_tbl_num = id;
	return 0;
}

/**
 * srnic_destroy_rwq_ind_table() - ib_device_ops.destroy_rwq_ind_table
 * @table: the table; no hash QP uses it any more (ib_core's count)
 *
 * Return: 0.
 */
int srnic_destroy_rwq_ind_table(struct ib_rwq_ind_table *table)
{
	ida_free(&to_srnic_dev(table->device)->rwq_ind_table_ids,
		 table->ind_tbl_num);
	return 0;
}

/* ---- Hash QPs --------------------------------------------------------- */

/**
 * srnic_rss_qp_init() - a hash QP's RSS configuration, from its request
 * @qp: the QP being created, a raw packet QP with an indirection table
 * @init: its attributes
 * @udata: struct srnic_create_rss_qp_req
 *
 * Return: 0, -EINVAL for a short request, a non-zero reserved field, a
 * key too long or too short (4 bytes at least), or receive capabilities;
 * -EOPNOTSUPP for another hash function or fields srnic does not hash.
 */
int srnic_rss_qp_init(struct srnic_qp *qp, struct ib_qp_init_attr *init,
		      struct ib_udata *udata)
{
	struct srnic_create_rss_qp_req req;
	struct srnic_rss *rss;
	int err;

	if (init->qp_type != IB_QPT_RAW_PACKET || !udata)
		return -EOPNOTSUPP;
	if (init->srq || init->recv_cq || init->send_cq ||
	    init->cap.max_send_wr || init->cap.max_recv_wr)
		return -EINVAL;
	if (udata->inlen < sizeof(req))
		return -EINVAL;
	err = ib_copy_from_udata(&req, udata, sizeof(req));
	if (err)
		return err;
	if (req.reserved || memchr_inv(req.reserved2, 0, sizeof(req.reserved2)))
		return -EINVAL;
	err = srnic_udata_check_tail(udata, sizeof(req));
	if (err)
		return err;
	if (req.rx_hash_function != SRNIC_RX_HASH_FUNC_TOEPLITZ ||
	    req.rx_hash_fields_mask & ~(u64)SRNIC_RX_HASH_FIELDS)
		return -EOPNOTSUPP;
	if (req.rx_hash_key_len < 4 ||
	    req.rx_hash_key_len > SRNIC_RX_HASH_KEY_MAX)
		return -EINVAL;

	rss = kzalloc(sizeof(*rss), GFP_KERNEL);
	if (!rss)
		return -ENOMEM;
	rss->fields = req.rx_hash_fields_mask;
	rss->key_len = req.rx_hash_key_len;
	memcpy(rss->key, req.rx_hash_key, rss->key_len);
	rss->table = init->rwq_ind_tbl;
	qp->rss = rss;
	return 0;
}

/* Toeplitz over @len bytes of @data with @key (bits past it are zero). */
static u32 srnic_toeplitz(const u8 *key, unsigned int key_len, const u8 *data,
			  unsigned int len)
{
	u32 hash = 0, window;
	unsigned int i, bit;

	window = (u32)key[0] << 24 | key[1] << 16 | key[2] << 8 | key[3];
	for (i = 0; i < len; i++) {
		for (bit = 0; bit < 8; bit++) {
			if (data[i] & (0x80 >> bit))
				hash ^= window;
			window <<= 1;
			if (i + 4 < key_len && (key[i + 4] & (0x80 >> bit)))
				window |= 1;
		}
	}
	return hash;
}

/*
 * The hash of a frame (skb->data at its Ethernet header): the configured
 * fields it has, source before destination, addresses before ports.
 */
static u32 srnic_rss_hash(const struct srnic_rss *rss,
			  const struct sk_buff *skb)
{
	u8 data[2 * sizeof(struct in6_addr) + 4];
	unsigned int len = 0, l3 = ETH_HLEN, l4 = 0;
	u64 f = rss->fields;
	__be16 proto, vbuf[2];
	const __be16 *p;
	u8 l4_proto = 0;

	p = skb_header_pointer(skb, 12, sizeof(proto), vbuf);
	if (!p)
		return 0;
	proto = *p;
	if (eth_type_vlan(proto)) {
		p = skb_header_pointer(skb, 16, sizeof(proto), vbuf);
		if (!p)
			return 0;
		proto = *p;
		l3 += VLAN_HLEN;
	}
	if (proto == htons(ETH_P_IP)) {
		struct iphdr buf;
		const struct iphdr *ip = skb_header_pointer(skb, l3,
							    sizeof(buf), &buf);

		if (!ip)
			return 0;
		if (f & SRNIC_RX_HASH_SRC_IPV4) {
			memcpy(data + len, &ip->saddr, 4);
			len += 4;
		}
		if (f & SRNIC_RX_HASH_DST_IPV4) {
			memcpy(data + len, &ip->daddr, 4);
			len += 4;
		}
		l4_proto = ip->protocol;
		if (!(ip->frag_off & htons(IP_OFFSET)))
			l4 = l3 + ip->ihl * 4;
	} else if (proto == htons(ETH_P_IPV6)) {
		struct ipv6hdr buf;
		const struct ipv6hdr *ip6 = skb_header_pointer(skb, l3,
							       sizeof(buf),
							       &buf);

		if (!ip6)
			return 0;
		if (f & SRNIC_RX_HASH_SRC_IPV6) {
			memcpy(data + len, &ip6->saddr, 16);
			len += 16;
		}
		if (f & SRNIC_RX_HASH_DST_IPV6) {
			memcpy(data + len, &ip6->daddr, 16);
			len += 16;
		}
		l4_proto = ip6->nexthdr;
		l4 = l3 + sizeof(*ip6);
	}
	if (l4 && (l4_proto == IPPROTO_TCP || l4_proto == IPPROTO_UDP)) {
		bool tcp = l4_proto == IPPROTO_TCP;
		u64 src = tcp ? SRNIC_RX_HASH_SRC_PORT_TCP :
			  SRNIC_RX_HASH_SRC_PORT_UDP;
		u64 dst = tcp ? SRNIC_RX_HASH_DST_PORT_TCP :
			  SRNIC_RX_HASH_DST_PORT_UDP;

		p = skb_header_pointer(skb, l4, sizeof(vbuf), vbuf);
		if (p && (f & src)) {
			memcpy(data + len, &p[0], 2);
			len += 2;
		}
		if (p && (f & dst)) {
			memcpy(data + len, &p[1], 2);
			len += 2;
		}
	}
	return srnic_toeplitz(rss->key, rss->key_len, data, len);
}

/**
 * srnic_rwq_take() - take the next receive WQE a process posted on a WQ
 * @rwq: the WQ, its consume mutex held
 * @rwqe: where to copy it (SRNIC_MAX_RQ_ENTRY_SIZE bytes)
 *
 * Return: 0, or -ENOENT when the WQ is empty.
 */
int srnic_rwq_take(struct srnic_rwq *rwq, struct srnic_recv_wqe *rwqe)
{
	struct srnic_wq *rq = &rwq->rq;
	unsigned long flags;
	int err = 0;

	spin_lock_irqsave(&rq->lock, flags);
	if (srnic_wq_producer(rq, rwq->ibwq.device, "WQ", rwq->ibwq.wq_num) ==
	    rq->consumer)
		err = -ENOENT;
	else
		srnic_wq_pop_fit(rq, rwqe, 0);
	spin_unlock_irqrestore(&rq->lock, flags);
	return err;
}

/**
 * srnic_frame_to_rwqe() - land a received frame in a receive WQE and
 *			   complete it (raw packet QPs' RQs, WQs)
 * @qp: the QP whose counters count it
 * @pd: the PD of the WQE's buffers
 * @rwqe: the WQE, taken from its queue; its num_sge unchecked
 * @max_sge: the SGEs a WQE of that queue may have
 * @skb: the frame, skb->data at its Ethernet header, without a frag list
 * @cq: the queue's CQ
 * @qp_num: the number the completion names
 *
 * A buffer too small fails this frame alone (IB_WC_LOC_LEN_ERR), as for
 * UD; the completion's length is the frame's.
 *
 * Return: true when the queue must enter the error state: the WQE was bad
 * (its SGEs, or a page an ODP MR lacks) or the CQ had no room.
 */
bool srnic_frame_to_rwqe(struct srnic_qp *qp, struct srnic_pd *pd,
			 const struct srnic_recv_wqe *rwqe, u32 max_sge,
			 const struct sk_buff *skb, struct srnic_cq *cq,
			 u32 qp_num)
{
	struct srnic_dev *sdev = to_srnic_dev(qp->ibqp.device);
	const struct srnic_pkt frame = { .payload_len = skb->len };
	struct srnic_sgl *sgl = &qp->resp.sgl;
	enum ib_wc_status status;
	struct srnic_cqe cqe;

	if (rwqe->num_sge > max_sge)
		status = IB_WC_LOC_QP_OP_ERR;
	else
		status = srnic_sgl_get(sdev, pd,
				       (const struct srnic_sge *)(rwqe + 1),
				       rwqe->num_sge, IB_ACCESS_LOCAL_WRITE,
				       sgl);
	if (status == IB_WC_SUCCESS && sgl->len < skb->len) {
		srnic_sgl_put(sgl);
		status = IB_WC_LOC_LEN_ERR;
	}
	if (status == IB_WC_SUCCESS) {
		if (srnic_pkt_scatter(skb, &frame, sgl, 0))
			status = IB_WC_LOC_PROT_ERR;
		srnic_sgl_put(sgl);
	}
	if (status == IB_WC_SUCCESS)
		srnic_qp_count(qp, SRNIC_CNT_RAW_RX_FRAMES);
	cqe = (struct srnic_cqe) {
		.wr_id = rwqe->wr_id,
		.status = status,
		.opcode = IB_WC_RECV,
		.byte_len = status == IB_WC_SUCCESS ? skb->len : 0,
		.qp_num = qp_num,
	};
	return srnic_cq_post(cq, &cqe, false) ||
	       (status != IB_WC_SUCCESS && status != IB_WC_LOC_LEN_ERR);
}

/**
 * srnic_rss_rx() - deliver a frame a hash QP's flows steered to it
 * @qp: the hash QP; its task, in process context (a hash QP's task never
 *	runs in one that may not sleep: it is never past RESET)
 * @skb: the frame, skb->data at its Ethernet header, linear or paged
 *
 * The frame goes to the next receive WQE of the WQ its hash picks and
 * completes there, to the WQ's CQ, with the WQ's number as the QP number.
 */
void srnic_rss_rx(struct srnic_qp *qp, struct sk_buff *skb)
{
	const struct ib_rwq_ind_table *table = qp->rss->table;
	struct srnic_recv_wqe *rwqe = qp->req.rwqe;
	struct srnic_rwq *rwq;
	u32 index;

	index = srnic_rss_hash(qp->rss, skb) &
		((1U << table->log_ind_tbl_size) - 1);
	rwq = to_srnic_rwq(table->ind_tbl[index]);
	mutex_lock(&rwq->consume);
	if (READ_ONCE(rwq->state) != IB_WQS_RDY) {
		srnic_qp_count(qp, SRNIC_CNT_RX_DROP_BAD_QP);
	} else if (srnic_rwq_take(rwq, rwqe)) {
		srnic_qp_count(qp, SRNIC_CNT_RX_DROP_NO_RECV_WQE);
	} else if (srnic_frame_to_rwqe(qp, to_srnic_pd(rwq->ibwq.pd), rwqe,
				       rwq->rq.max_sge, skb,
				       to_srnic_cq(rwq->ibwq.cq),
				       rwq->ibwq.wq_num)) {
		/* A lost completion, or a WQE gone bad: the WQ is in error. */
		WRITE_ONCE(rwq->state, IB_WQS_ERR);
		srnic_rwq_flush(rwq);
	}
	mutex_unlock(&rwq->consume);
}
