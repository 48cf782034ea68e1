// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: unreliable datagram QPs, run by the NIC engine that owns the QP.
 *
 * Send: each SEND or SEND with immediate WQE is one packet, BTH
 * (UD_SEND_ONLY[_WITH_IMMEDIATE]) + DETH (Q_Key, source QPN) [+ ImmDt],
 * to the address vector of the AH the WQE names by number (ud.ah_handle,
 * looked up in the device's AH table and checked against the QP's PD). The
 * payload must fit the port's active MTU. There are no ACKs: the WQE
 * completes once the packet is handed to the IP layer (or, for a GID of an
 * srnic device in the namespace, to that device's receive path).
 *
 * Receive: srnic_rx_packet() queues UD packets for a UD QP in RTR or later;
 * the task checks the Q_Key, takes the next receive WQE and writes the
 * 40-byte GRH area, then the payload. RoCE v2 carries no GRH: for IPv6 the
 * area holds the IPv6 header, for IPv4 20 zero bytes and the IPv4 header,
 * as rxe and mlx5 do. Datagrams with the wrong Q_Key, or without a receive
 * WQE (UD has no RNR), are dropped and counted.
 *
 * Everything reuses the requesters' pieces (srnic_sq.c): WQE fetch, retire
 * and completion, SGL resolution; and packet building (srnic_tx_build()).
 */

#include <linux/inetdevice.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <net/addrconf.h>
#include <rdma/ib_cache.h>

#include "srnic.h"
#include "srnic_trace.h"
#include "srnic_wire.h"

#define SRNIC_UD_SEND_BUDGET 16
#define SRNIC_UD_RX_BUDGET 64

/* The GRH area at the start of every UD receive buffer. */
#define SRNIC_GRH_SIZE 40

/* IBTA 10.2.4.3: a send WR's Q_Key with the high bit set means the QP's. */
#define SRNIC_QKEY_USE_QP_QKEY BIT(31)

/* ---- Send ------------------------------------------------------------- */

/*
 * The srnic device in @sdev's namespace that owns @dgid as a RoCE v2 GID
 * (@sdev itself included): the ifindex of its netdev, or 0. Any context:
 * the address owner is looked up under RCU, then its GID table.
 */
static int srnic_ud_local_ifindex(struct srnic_dev *sdev,
				  const union ib_gid *dgid)
{
	struct net *net = read_pnet(&sdev->net);
	const struct ib_gid_attr *attr;
	struct net_device *ndev = NULL;
	struct srnic_dev *ddev;
	int ifindex = 0;

	rcu_read_lock();
	if (ipv6_addr_v4mapped((const struct in6_addr *)dgid->raw)) {
		__be32 addr;

		memcpy(&addr, dgid->raw + 12, sizeof(addr));
		ndev = __ip_dev_find(net, addr, false);
	} else if (IS_ENABLED(CONFIG_IPV6)) {
		ndev = ipv6_dev_find(net, (const struct in6_addr *)dgid->raw,
				     NULL);
	}
	ddev = ndev ? srnic_dev_get_by_netdev(ndev) : NULL;
	rcu_read_unlock();
	if (!ddev)
		return 0;
	attr = rdma_find_gid_by_port(&ddev->ibdev, dgid,
				     IB_GID_TYPE_ROCE_UDP_ENCAP, SRNIC_PORT,
				     NULL);
	if (!IS_ERR(attr)) {
		rdma_put_gid_attr(attr);
		ifindex = ddev->ndev->ifindex;
	}
	ib_device_put(&ddev->ibdev);
	return ifindex;
}

/*
 * The path to the destination of a UD WQE, from the AH numbered @ah_num.
 * ib_core frees an AH as soon as destroy_ah returns, so the vector is
 * copied under the table's lock, which destroy_ah takes too.
 */
static enum ib_wc_status srnic_ud_resolve_ah(struct srnic_qp *qp, u32 ah_num,
					     u32 rqpn, struct srnic_path *path)
{
	struct srnic_dev *sdev = to_srnic_dev(qp->ibqp.device);
	struct ib_global_route grh;
	union ib_gid sgid;
	struct srnic_ah *ah;
	unsigned long flags;
	bool found = false;

	xa_lock_irqsave(&sdev->ah_table, flags);
	ah = xa_load(&sdev->ah_table, ah_num);
	/* AH numbers are per device: the AH must be in the QP's PD. */
	if (ah && ah->ibah.pd == qp->ibqp.pd && ah->ibah.sgid_attr) {
		grh = ah->attr.grh;
		sgid = ah->ibah.sgid_attr->gid;
		found = true;
	}
	xa_unlock_irqrestore(&sdev->ah_table, flags);
	if (!found ||
	    srnic_path_init(path, &sgid, &grh, qp->ibqp.qp_num, rqpn))
		return IB_WC_LOC_QP_OP_ERR;
	path->local_ifindex = srnic_ud_local_ifindex(sdev, &grh.dgid);
	return IB_WC_SUCCESS;
}

/* Payload bytes a UD message may carry: the port's active MTU. */
static u32 srnic_ud_mtu(struct srnic_qp *qp)
{
	struct srnic_dev *sdev = to_srnic_dev(qp->ibqp.device);

	return ib_mtu_enum_to_int(READ_ONCE(sdev->port.active_mtu));
}

/* Send the WQE fetched into qp->req.wqe; returns its completion status. */
static enum ib_wc_status srnic_ud_send(struct srnic_qp *qp, u64 *len)
{
	const struct srnic_send_wqe *wqe = qp->req.wqe;
	struct srnic_sgl *sgl = &qp->req.sgl;
	enum ib_wc_status status;
	struct srnic_path path;
	struct srnic_txd txd;

	*len = 0;
	if (wqe->opcode != IB_WR_SEND && wqe->opcode != IB_WR_SEND_WITH_IMM)
		return IB_WC_LOC_QP_OP_ERR;
	status = srnic_req_local_sgl(qp, wqe, sgl);
	trace_srnic_wqe_start(&qp->ibqp, wqe->wr_id, wqe->opcode, sgl->len, 0,
			      0);
	if (status != IB_WC_SUCCESS)
		return status;
	*len = sgl->len;
	if (sgl->len > srnic_ud_mtu(qp))
		status = IB_WC_LOC_LEN_ERR;
	else
		status = srnic_ud_resolve_ah(qp, wqe->ud.ah_handle,
					     wqe->ud.remote_qpn, &path);
	if (status == IB_WC_SUCCESS) {
		txd = (struct srnic_txd) {
			.opcode = SRNIC_OPCODE(SRNIC_TRANSPORT_UD,
					       wqe->opcode == IB_WR_SEND ?
					       SRNIC_OP_SEND_ONLY :
					       SRNIC_OP_SEND_ONLY_IMM),
			.psn = qp->req.next_psn,
			.solicited = wqe->flags & SRNIC_WQE_SOLICITED,
			.imm = wqe->imm_data,
			.sgl = sgl,
			.len = sgl->len,
			.dqpn = wqe->ud.remote_qpn,
			.qkey = wqe->ud.remote_qkey & SRNIC_QKEY_USE_QP_QKEY ?
				READ_ONCE(qp->attrs.qkey) :
				wqe->ud.remote_qkey,
			.path = &path,
		};
		qp->req.next_psn = srnic_psn_add(qp->req.next_psn, 1);
		/* A datagram lost on the way is no error of the sender. */
		srnic_tx_build(qp, &txd, NULL);
	}
	srnic_sgl_put(sgl);
	return status;
}

/* ---- Receive ---------------------------------------------------------- */

/* The GRH area of a received datagram: what verbs consumers expect. */
static void srnic_ud_grh(const struct sk_buff *skb, u8 *grh)
{
	memset(grh, 0, SRNIC_GRH_SIZE);
	if (skb->protocol == htons(ETH_P_IPV6))
		memcpy(grh, ipv6_hdr(skb), sizeof(struct ipv6hdr));
	else
		memcpy(grh + SRNIC_GRH_SIZE - sizeof(struct iphdr), ip_hdr(skb),
		       sizeof(struct iphdr));
}

static void srnic_ud_rx(struct srnic_qp *qp, struct sk_buff *skb)
{
	struct srnic_dev *sdev = to_srnic_dev(qp->ibqp.device);
	const struct srnic_pkt *pkt = srnic_skb_pkt(skb);
	const struct srnic_deth *deth =
		(const struct srnic_deth *)(skb->data + pkt->deth);
	struct srnic_recv_wqe *rwqe = qp->req.rwqe;
	u32 len = SRNIC_GRH_SIZE + pkt->payload_len;
	struct srnic_sgl *sgl = &qp->resp.sgl;
	enum ib_wc_status status;
	u8 grh[SRNIC_GRH_SIZE];
	struct srnic_cqe cqe;

	if (be32_to_cpu(deth->qkey) != READ_ONCE(qp->attrs.qkey)) {
		srnic_qp_count(qp, SRNIC_CNT_RX_DROP_BAD_QKEY);
		return;
	}
	if (!srnic_rq_take(qp, rwqe)) {
		srnic_qp_count(qp, SRNIC_CNT_RX_DROP_NO_RECV_WQE);
		return;
	}
	/* A datagram a ping-pong answers: its doorbells are no stream. */
	atomic_inc(&qp->rx_msgs);

	if (rwqe->num_sge > srnic_qp_recv_wq(qp)->max_sge)
		status = IB_WC_LOC_QP_OP_ERR;
	else
		status = srnic_sgl_get(sdev, to_srnic_pd(qp->ibqp.pd),
				       (const struct srnic_sge *)(rwqe + 1),
				       rwqe->num_sge, IB_ACCESS_LOCAL_WRITE,
				       sgl);
	if (status == IB_WC_SUCCESS && sgl->len < len) {
		srnic_sgl_put(sgl);
		status = IB_WC_LOC_LEN_ERR;
	}
	if (status == IB_WC_SUCCESS) {
		srnic_ud_grh(skb, grh);
		/* An ODP page the process lacks fails the receive. */
		if (srnic_sgl_scatter(sgl, 0, grh, SRNIC_GRH_SIZE) ||
		    srnic_pkt_scatter(skb, pkt, sgl, SRNIC_GRH_SIZE))
			status = IB_WC_LOC_PROT_ERR;
		srnic_sgl_put(sgl);
	}

	cqe = (struct srnic_cqe) {
		.wr_id = rwqe->wr_id,
		.status = status,
		.opcode = IB_WC_RECV,
		.byte_len = status == IB_WC_SUCCESS ? len : 0,
		.qp_num = qp->ibqp.qp_num,
		.src_qp = be32_to_cpu(deth->sqpn) & SRNIC_DETH_SQPN_QPN_MASK,
		.wc_flags = SRNIC_CQE_GRH,
	};
	if (pkt->immdt) {
		cqe.imm_data = ((const struct srnic_immdt *)
				(skb->data + pkt->immdt))->imm;
		cqe.wc_flags |= SRNIC_CQE_WITH_IMM;
	}
	/*
	 * A buffer too small fails this datagram only (IBTA class D1: the
	 * QP is unaffected); a bad WQE or a lost completion is fatal.
	 */
	if (srnic_cq_post(to_srnic_cq(qp->ibqp.recv_cq), &cqe,
			  pkt->solicited) ||
	    (status != IB_WC_SUCCESS && status != IB_WC_LOC_LEN_ERR))
		srnic_qp_to_error(qp, 0);
}

/* ---- Draining ---------------------------------------------------------- */

/* Longest a drain waits for the engine, in milliseconds. */
#define SRNIC_UD_DRAIN_MS 200

/* Whether a UD QP in RTS has posted sends its engine has not taken yet. */
static bool srnic_ud_sq_busy(struct srnic_qp *qp)
{
	return qp->ibqp.qp_type == IB_QPT_UD &&
	       READ_ONCE(qp->state) == IB_QPS_RTS &&
	       srnic_wq_has_work(qp, &qp->sq);
}

/**
 * srnic_ud_drain_sq() - let a UD QP send what was posted, before destroy
 * @qp: the QP
 *
 * UD sends need no peer, and consumers treat them as done once posted:
 * mckey destroys its AH and QP right after posting (rxe sends within
 * post_send, hardware within microseconds). The engine, which still runs
 * the QP, gets a bounded moment to send them; a bogus user producer index
 * only costs the wait. Context: process.
 */
void srnic_ud_drain_sq(struct srnic_qp *qp)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(SRNIC_UD_DRAIN_MS);

	while (srnic_ud_sq_busy(qp) && time_before(jiffies, deadline)) {
		srnic_engine_task_schedule(&qp->task);
		usleep_range(100, 200);
	}
}

/**
 * srnic_ud_drain_pd() - let the UD QPs of a PD send what was posted,
 * before one of the PD's AHs is destroyed
 * @sdev: the device
 * @pd: the AH's PD
 *
 * A send WQE names its AH by number, resolved when the engine takes it, so
 * an AH destroyed right after the post would fail the send. As
 * srnic_ud_drain_sq(), bounded. Context: process (a sleepable destroy_ah).
 */
void srnic_ud_drain_pd(struct srnic_dev *sdev, struct ib_pd *pd)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(SRNIC_UD_DRAIN_MS);
	struct srnic_qp *qp;
	unsigned long qpn;
	bool busy;

	do {
		busy = false;
		/*
		 * destroy_qp erases a QP, then waits for RCU readers before
		 * stopping its task and freeing it: under the read lock every
		 * QP found is whole.
		 */
		rcu_read_lock();
		xa_for_each(&sdev->qps, qpn, qp) {
			if (qp->ibqp.pd != pd || !srnic_ud_sq_busy(qp))
				continue;
			busy = true;
			srnic_engine_task_schedule(&qp->task);
		}
		rcu_read_unlock();
		if (busy)
			usleep_range(100, 200);
	} while (busy && time_before(jiffies, deadline));
}

/* ---- Engine callbacks ------------------------------------------------- */

/**
 * srnic_datagram_run() - one run of a UD or raw packet QP's task
 * @qp: the QP, not faulting (srnic_task_defer_if_faulting())
 * @dequeue: takes the next packet (or frame) off @qp->rxq, or NULL
 * @rx: delivers one to the QP's receive queue; the caller frees it
 * @send: sends the send WQE fetched into qp->req.wqe; returns its
 *	  completion status and sets its length
 *
 * A QP in the error state completes what is still posted; in RESET or
 * INIT it drops what arrived. Otherwise a budget of receives, then one of
 * sends, each taken, sent and completed while the QP is in RTS and its
 * packet pacing lets it (srnic_rate_pace()); a failed WQE moves it to the
 * error state, as rxe does.
 *
 * Return: whether work is left for another run.
 */
bool srnic_datagram_run(struct srnic_qp *qp,
			struct sk_buff *(*dequeue)(struct srnic_qp *qp),
			void (*rx)(struct srnic_qp *qp, struct sk_buff *skb),
			enum ib_wc_status (*send)(struct srnic_qp *qp, u64 *len))
{
	enum ib_wc_status status;
	unsigned int budget;
	u64 len;
	struct sk_buff *skb;
	bool more;

	switch (READ_ONCE(qp->state)) {
	case IB_QPS_ERR:
		/* A QP in error completes what the provider still posts. */
		skb_queue_purge(&qp->rxq);
		srnic_qp_task_flush(qp);
		return false;
	case IB_QPS_RESET:
	case IB_QPS_INIT:
		skb_queue_purge(&qp->rxq);
		return false;
	default:
		break;
	}
	for (budget = SRNIC_UD_RX_BUDGET; budget; budget--) {
		skb = dequeue(qp);
		if (!skb)
			break;
		rx(qp, skb);
		consume_skb(skb);
	}
	more = !skb_queue_empty_lockless(&qp->rxq);

	for (budget = SRNIC_UD_SEND_BUDGET; budget; budget--) {
		if (READ_ONCE(qp->state) != IB_QPS_RTS || !srnic_rate_pace(qp) ||
		    !srnic_req_fetch(qp))
			return more;
		status = send(qp, &len);
		if (status == IB_WC_SUCCESS)
			srnic_rate_paced(qp, len);
		if (!srnic_req_finish(qp, status, len))
			return more;
	}
	return true;
}

static bool srnic_ud_run(struct srnic_engine_task *task)
{
	struct srnic_qp *qp = container_of(task, struct srnic_qp, task);

	if (srnic_task_defer_if_faulting(qp))
		return false;
	return srnic_datagram_run(qp, srnic_rx_dequeue, srnic_ud_rx,
				  srnic_ud_send);
}

/**
 * srnic_datagram_has_work() - engine callback of UD and raw packet QPs:
 * packets (or frames) queued, or posted sends in RTS
 * @task: the QP's task
 *
 * Return: whether the task has work.
 */
bool srnic_datagram_has_work(struct srnic_engine_task *task)
{
	struct srnic_qp *qp = container_of(task, struct srnic_qp, task);

	return !skb_queue_empty_lockless(&qp->rxq) ||
	       (READ_ONCE(qp->state) == IB_QPS_RTS &&
		!READ_ONCE(qp->req.rate.waiting) &&
		srnic_wq_has_work(qp, &qp->sq));
}

/**
 * srnic_datagram_prepare_sleep() - engine callback of UD and raw packet
 * QPs: ask for doorbells again, then look once more
 * @task: the QP's task
 *
 * Return: whether the task has work after all.
 */
bool srnic_datagram_prepare_sleep(struct srnic_engine_task *task)
{
	struct srnic_qp *qp = container_of(task, struct srnic_qp, task);

	srnic_qp_ask_doorbells(qp);
	return srnic_datagram_has_work(task);
}

const struct srnic_engine_task_ops srnic_ud_task_ops = {
	.run = srnic_ud_run,
	.has_work = srnic_datagram_has_work,
	.prepare_sleep = srnic_datagram_prepare_sleep,
	.woken = srnic_qp_woken,
};
