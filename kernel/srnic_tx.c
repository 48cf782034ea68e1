// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: the packet builder, transport-neutral: one RoCEv2 transport
 * packet of a QP (BTH and the extension headers the opcode has: RETH,
 * AtomicETH, AETH, AtomicAckETH, ImmDt, IETH, DETH, XRCETH) with its
 * payload, copied from an SGL or an MR or attached as page fragments,
 * handed to srnic_net.c's transmit (srnic_tx_send() or a batch). RC, UC
 * and XRC requesters and responders, and UD, all send through
 * srnic_tx_build().
 */

#include <linux/skbuff.h>

#include "srnic.h"
#include "srnic_trace.h"
#include "srnic_wire.h"

/**
 * srnic_qp_mtu() - payload bytes of one packet of the QP
 * @qp: a QP past RTR
 */
u32 srnic_qp_mtu(struct srnic_qp *qp)
{
	return ib_mtu_enum_to_int(qp->attrs.mtu ? qp->attrs.mtu : IB_MTU_256);
}

/**
 * srnic_tx_flush_feth() - the FETH of a FLUSH WQE's request
 * @wqe: the WQE (SRNIC_WR_FLUSH)
 */
u32 srnic_tx_flush_feth(const struct srnic_send_wqe *wqe)
{
	return (wqe->flush.type & SRNIC_FETH_PLT_MASK) |
	       ((wqe->flush.level << SRNIC_FETH_SEL_SHIFT) &
		SRNIC_FETH_SEL_MASK);
}

/**
 * srnic_tx_req_opcode() - the BTH opcode of a request packet (RC's
 * transport bits are 0)
 * @wr_opcode: its WQE's opcode (enum ib_wr_opcode, SRNIC_WR_ATOMIC_WRITE,
 *	       SRNIC_WR_FLUSH)
 * @first: the packet is its message's first
 * @last: and its last
 */
u8 srnic_tx_req_opcode(unsigned int wr_opcode, bool first, bool last)
{
	bool imm = wr_opcode == IB_WR_SEND_WITH_IMM ||
		   wr_opcode == IB_WR_RDMA_WRITE_WITH_IMM;
	bool inv = wr_opcode == IB_WR_SEND_WITH_INV;

	if (wr_opcode == IB_WR_RDMA_READ)
		return SRNIC_OP_READ_REQUEST;
	if (wr_opcode == SRNIC_WR_FLUSH)
		return SRNIC_OP_FLUSH;
	if (wr_opcode == IB_WR_ATOMIC_CMP_AND_SWP)
		return SRNIC_OP_CMP_SWAP;
	if (wr_opcode == IB_WR_ATOMIC_FETCH_AND_ADD)
		return SRNIC_OP_FETCH_ADD;
	/* One packet: its 8 bytes are the WQE's inline data. */
	if (wr_opcode == SRNIC_WR_ATOMIC_WRITE)
		return SRNIC_OP_ATOMIC_WRITE;
	if (wr_opcode == IB_WR_SEND || wr_opcode == IB_WR_SEND_WITH_IMM ||
	    inv) {
		if (first && last)
			return imm ? SRNIC_OP_SEND_ONLY_IMM :
			       inv ? SRNIC_OP_SEND_ONLY_INV : SRNIC_OP_SEND_ONLY;
		if (first)
			return SRNIC_OP_SEND_FIRST;
		if (last)
			return imm ? SRNIC_OP_SEND_LAST_IMM :
			       inv ? SRNIC_OP_SEND_LAST_INV : SRNIC_OP_SEND_LAST;
		return SRNIC_OP_SEND_MIDDLE;
	}
	if (first && last)
		return imm ? SRNIC_OP_WRITE_ONLY_IMM : SRNIC_OP_WRITE_ONLY;
	if (first)
		return SRNIC_OP_WRITE_FIRST;
	if (last)
		return imm ? SRNIC_OP_WRITE_LAST_IMM : SRNIC_OP_WRITE_LAST;
	return SRNIC_OP_WRITE_MIDDLE;
}

/**
 * srnic_tx_atomic_txd() - the target and operands of an atomic's request
 * @wqe: the atomic's WQE (compare & swap or fetch & add)
 * @txd: its packet's description, filled in
 */
void srnic_tx_atomic_txd(const struct srnic_send_wqe *wqe,
			 struct srnic_txd *txd)
{
	bool cmp_swap = wqe->opcode == IB_WR_ATOMIC_CMP_AND_SWP;

	txd->va = wqe->atomic.remote_addr;
	txd->rkey = wqe->atomic.rkey;
	/* compare_add is the compare value, or the addend. */
	txd->swap_add = cmp_swap ? wqe->atomic.swap : wqe->atomic.compare_add;
	txd->compare = cmp_swap ? wqe->atomic.compare_add : 0;
	txd->ack_req = true;
}

/*
 * Payloads this long or longer, of a multiple of 4 bytes (no pad), leave
 * as fragments of their own pages (srnic_tx_attach()) rather than copied
 * into the packet.
 */
#define SRNIC_TX_ATTACH_MIN 1024

/*
 * Attach the pages of [@iova, @iova + @len) of @mr to @skb as fragments,
 * each referenced for the skb (which may outlive the MR: the pages then
 * stay until the packet is freed); with @skb NULL only count them.
 * Returns the number of fragments, -EOPNOTSUPP for an MR that is not of
 * pinned user pages (ODP pages may go, a kernel MR's memory may be slab),
 * or -EFAULT.
 */
static int srnic_tx_attach_mr(struct srnic_mr *mr, u64 iova, u32 len,
			      struct sk_buff *skb)
{
	int frags = 0;

	if (!mr || mr->type != SRNIC_MR_USER)
		return -EOPNOTSUPP;
	while (len) {
		unsigned int off;
		struct page *page = srnic_mr_iova_to_page(mr, iova, &off);
		u32 n;

		if (!page)
			return -EFAULT;
		n = min_t(u32, len, PAGE_SIZE - off);
		if (skb) {
			get_page(page);
			skb_fill_page_desc(skb, skb_shinfo(skb)->nr_frags,
					   page, off, n);
			skb_len_add(skb, n);
		}
		frags++;
		iova += n;
		len -= n;
	}
	return frags;
}

/*
 * Attach the payload @txd describes to @skb as page fragments, without a
 * copy, or with @skb NULL count the fragments that takes. Returns the
 * count, or a negative errno when the payload cannot be attached (the
 * caller copies it then).
 *
 * User space can write the pages while the packet is on its way
 * (SKBFL_SHARED_FRAG tells the stack not to write them in place): that
 * breaks only the packet's ICRC, computed when it was built, and the
 * receiver drops it, as rewriting a buffer under a hardware NIC's DMA
 * only garbles the application's own message.
 */
static int srnic_tx_attach(const struct srnic_txd *txd, struct sk_buff *skb)
{
	u64 offset = txd->offset;
	u32 len = txd->len;
	unsigned int i;
	int frags = 0;

	if (!txd->sgl)
		return srnic_tx_attach_mr(txd->mr, offset, len, skb);
	for (i = 0; i < txd->sgl->num && len; i++) {
		const struct srnic_seg *seg = &txd->sgl->seg[i];
		u32 n;
		int err;

		if (offset >= seg->len) {
			offset -= seg->len;
			continue;
		}
		n = min_t(u64, seg->len - offset, len);
		err = srnic_tx_attach_mr(seg->mr, seg->iova + offset, n, skb);
		if (err < 0)
			return err;
		frags += err;
		len -= n;
		offset = 0;
	}
	return len ? -EFAULT : frags;
}

/**
 * srnic_tx_build() - build one packet of the QP (RC, UC, XRC with XRCETH, or
 * UD with DETH) and send it, or for a local delivery's capture
 * (@txd->capture_ifindex) only show it (srnic_tx_capture_local())
 * @qp: the sending QP, its path resolved
 * @txd: what the packet holds; the payload bytes must lie within @txd's
 *	 source (checked when the SGL or MR was resolved)
 * @batch: the sender's batch the packet may join (srnic_tx_send()), or
 *	   NULL to send it now
 *
 * Return: 0, or a negative errno (the packet is lost; the protocol
 * recovers as from any loss); -EFAULT if the payload could not be read
 * (an ODP page the process does not have): the READ responder answers
 * that with a remote access error, other senders leave it to the retries.
 */
int srnic_tx_build(struct srnic_qp *qp, const struct srnic_txd *txd,
		   struct srnic_tx_batch *batch)
{
	struct srnic_dev *sdev = to_srnic_dev(qp->ibqp.device);
	u32 flags = srnic_opcode_flags[txd->opcode];
	u32 hdr_len = srnic_opcode_hdr_len(flags);
	u32 pad = (4 - (txd->len & 3)) & 3;
	u32 dqpn = flags & SRNIC_HDR_DETH ? txd->dqpn : qp->attrs.dest_qp_num;
	u32 apsn;
	struct srnic_bth *bth;
	struct sk_buff *skb;
	bool attach = false;
	u8 *p;
	int err;

	if (!txd->capture_ifindex)
		trace_srnic_packet_tx(qp->ibqp.device, qp->ibqp.qp_num, dqpn,
				      txd->opcode, txd->psn, txd->len);
	/* One fragment stays free for the ICRC (srnic_tx_send()). */
	if (txd->len >= SRNIC_TX_ATTACH_MIN && !pad && !txd->capture_ifindex) {
		err = srnic_tx_attach(txd, NULL);
		attach = err > 0 && err < MAX_SKB_FRAGS;
	}
	/*
	 * A run in a kernel consumer's atomic context may not sleep, nor may
	 * the fatal NAK, sent under state_lock: packets without payload (ACKs,
	 * NAKs) need no reclaim either. A capture's answer of a local
	 * destination is built in its requester's run, not the @qp's.
	 */
	skb = srnic_tx_alloc(sdev, hdr_len + (attach ? 0 : txd->len + pad),
			     txd->len && !txd->capture_ifindex &&
			     srnic_engine_task_may_sleep(&qp->task) ?
			     GFP_KERNEL : GFP_ATOMIC);
	if (!skb) {
		srnic_qp_count(qp, SRNIC_CNT_TX_ERRORS);
		return -ENOMEM;
	}
	bth = (struct srnic_bth *)skb->data;
	bth->opcode = txd->opcode;
	bth->flags = FIELD_PREP(SRNIC_BTH_FLAGS_PAD_MASK, pad) |
		     (txd->solicited ? SRNIC_BTH_FLAGS_SE_MASK : 0);
	bth->pkey = cpu_to_be16(SRNIC_DEFAULT_PKEY_FULL);
	bth->dqpn = cpu_to_be32(dqpn & SRNIC_QPN_MASK);
	apsn = (txd->psn & SRNIC_PSN_MASK) |
	       (txd->ack_req ? SRNIC_BTH_APSN_ACKREQ_MASK : 0);
	if (txd->sr)
		apsn |= SRNIC_BTH_APSN_SR |
			FIELD_PREP(SRNIC_BTH_APSN_SR_RUN_MASK,
				   txd->sr_run ? txd->sr_run - 1 : 0);
	bth->apsn = cpu_to_be32(apsn);
	p = skb->data + sizeof(*bth);
	if (flags & SRNIC_HDR_XRCETH) {
		srnic_xrceth_put((struct srnic_xrceth *)p, txd->xrc_srqn);
		p += sizeof(struct srnic_xrceth);
	}
	if (flags & SRNIC_HDR_DETH) {
		struct srnic_deth *deth = (struct srnic_deth *)p;

		deth->qkey = cpu_to_be32(txd->qkey);
		deth->sqpn = cpu_to_be32(qp->ibqp.qp_num &
					 SRNIC_DETH_SQPN_QPN_MASK);
		p += sizeof(*deth);
	}
	if (flags & SRNIC_HDR_FETH) {
		((struct srnic_feth *)p)->bits = cpu_to_be32(txd->feth);
		p += sizeof(struct srnic_feth);
	}
	if (flags & SRNIC_HDR_RETH) {
		struct srnic_reth *reth = (struct srnic_reth *)p;

		reth->va = cpu_to_be64(txd->va);
		reth->rkey = cpu_to_be32(txd->rkey);
		reth->dma_len = cpu_to_be32(txd->dma_len);
		p += sizeof(*reth);
	}
	if (flags & SRNIC_HDR_ATMETH) {
		const struct srnic_atomic_fields f = {
			.va = txd->va,
			.rkey = txd->rkey,
			.swap_add = txd->swap_add,
			.compare = txd->compare,
		};

		srnic_atmeth_put((struct srnic_atmeth *)p, &f);
		p += sizeof(struct srnic_atmeth);
	}
	if (flags & SRNIC_HDR_AETH) {
		((struct srnic_aeth *)p)->smsn = cpu_to_be32(txd->aeth);
		p += sizeof(struct srnic_aeth);
	}
	if (flags & SRNIC_HDR_ATMACK) {
		srnic_atmack_put((struct srnic_atmack *)p, txd->orig);
		p += sizeof(struct srnic_atmack);
	}
	if (flags & SRNIC_HDR_IMMDT) {
		((struct srnic_immdt *)p)->imm = txd->imm;
		p += sizeof(struct srnic_immdt);
	}
	if (flags & SRNIC_HDR_IETH) {
		srnic_ieth_put((struct srnic_ieth *)p, txd->inv_rkey);
		p += sizeof(struct srnic_ieth);
	}
	if (attach) {
		srnic_tx_attach(txd, skb);	/* counted above: cannot fail */
		skb_shinfo(skb)->flags |= SKBFL_SHARED_FRAG;
	} else if (txd->len) {
		if (txd->sgl)
			err = srnic_sgl_xfer(txd->sgl, txd->offset, p,
					     txd->len, false);
		else
			err = srnic_mr_copy_from(txd->mr, txd->offset, p,
						 txd->len);
		/* An ODP page the process does not have: no packet. */
		if (err) {
			kfree_skb(skb);
			srnic_qp_count(qp, SRNIC_CNT_TX_ERRORS);
			return -EFAULT;
		}
		memset(p + txd->len, 0, pad);
	}

	if (txd->capture_ifindex) {
		srnic_tx_capture_local(sdev, skb, &qp->path, txd->sport,
				       hdr_len, txd->capture_ifindex);
		return 0;
	}
	err = srnic_tx_send(sdev, qp, skb, txd->path ? txd->path : &qp->path,
			    txd->sport, hdr_len, batch);
	if (err)
		srnic_qp_count(qp, SRNIC_CNT_TX_ERRORS);
	return err;
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
