// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: the RC requester over the wire (RoCEv2, IBTA chapter 9).
 *
 * Runs in the QP's engine task, so its state needs no lock. Send WQEs are
 * taken from the SQ in order and given PSNs: one per packet of a SEND or
 * WRITE, one per expected response packet of a READ, one for an atomic
 * (compare & swap, fetch & add), which is like a one-packet READ: it takes
 * one of max_rd_atomic outstanding slots, and its ATOMIC_ACKNOWLEDGE
 * carries the 8-byte original value into its one local SGE. An ATOMIC
 * WRITE is a one-packet WRITE of its 8 inline bytes that takes such a slot
 * too, and completes on an ACK. The WQEs between the
 * SQ's consumer index and req.next_index are outstanding; req.send_index
 * and req.send_psn say which packet goes out next. Packets of up to
 * SRNIC_REQ_WINDOW PSNs beyond the oldest unacknowledged one are in
 * flight.
 *
 * Acknowledgements (ACK, READ responses, ATOMIC_ACKNOWLEDGE) complete WQEs
 * in order. A NAK for
 * a PSN sequence error, a gap in READ responses, a local ACK timeout or
 * the end of an RNR wait sends everything again from the first PSN not
 * acknowledged (go-back-N); the responder discards what it already has.
 * Timeouts count against retry_cnt, RNR NAKs against rnr_retry; their
 * exhaustion completes the oldest WQE with IB_WC_RETRY_EXC_ERR or
 * IB_WC_RNR_RETRY_EXC_ERR. Other NAKs complete it with the matching remote
 * error. Any error completion moves the QP to the error state, which
 * flushes the WQEs behind it.
 *
 * Selective repeat (with srnic's responders: the SR bit on each request
 * offers it, srnic_resp.c keeps what arrives beyond a loss and reports it
 * in selective NAKs): the requester notes the PSNs reported kept
 * (req.sacked) and sends again only the ones missing below the highest
 * (srnic_req_resend()), beside new packets, and again when a packet sent
 * after them arrives first (a later resend, or a new packet); the window
 * halves once per loss episode. A timeout in an episode sends again what
 * was not reported kept; any other timeout to such a responder sends the
 * oldest packet alone first and goes back N from what its answer
 * acknowledges (req.probing). An RNR NAK, a gap in READ responses and a
 * timeout at an unanswered READ or atomic still go back N, and an IBTA
 * responder's NAKs and timeouts are always go-back-N.
 *
 * A UC QP (srnic_qp_acked() false) sends the same packets with UC opcodes
 * and without AckReq, and expects no answer: each packet handed off counts
 * as acknowledged (the window never closes), and a WQE completes once its
 * last packet is handed off. Nothing is sent again; no timer runs.
 */

#include <linux/jiffies.h>
#include <linux/slab.h>

#include "srnic.h"
#include "srnic_trace.h"
#include "srnic_wire.h"

/*
 * PSNs in flight beyond the oldest unacknowledged one: the window
 * (req.cwnd) halves on every loss, down to SRNIC_REQ_MIN_WINDOW, and grows
 * by what each ACK acknowledges, up to SRNIC_REQ_WINDOW, so go-back-N
 * does not resend a whole large window for each lost packet.
 */
#define SRNIC_REQ_WINDOW SRNIC_SR_WINDOW
#define SRNIC_REQ_MIN_WINDOW 8
/*
 * Selective repeat: a PSN missing below this many reported kept is lost
 * (RFC 6675's DupThresh); fewer may be a packet overtaken on the way.
 */
#define SRNIC_REQ_SACK_THRESHOLD 3
/*
 * After a local ACK timeout in an episode, passes that may follow at once
 * when the responder still misses the oldest PSN (srnic_req_sack()).
 */
#define SRNIC_REQ_PROBE_PASSES 4
/*
 * Multipath: consecutive PSNs that share a UDP source port (one UDP GSO
 * batch's worth), so that spraying keeps the batches.
 */
#define SRNIC_REQ_SPRAY_CHUNK 16
/* Ask for an ACK at least this often within a long message. */
#define SRNIC_REQ_ACK_EVERY 64
/* Local ACK timeouts shorter than this are rounded up (slow hosts). */
#define SRNIC_REQ_MIN_TIMEOUT_MS 10
/* Consecutive timeouts double the timeout up to 2^this times. */
#define SRNIC_REQ_MAX_BACKOFF 6
#define SRNIC_RNR_RETRY_INFINITE 7

static struct srnic_req_wqe *srnic_req_wqe_at(struct srnic_qp *qp, u32 index)
{
	return &qp->req.wqes[index & (qp->sq.ring.num_entries - 1)];
}

/* The SQ's consumer index: only this task and flushes (in ERR) move it. */
static u32 srnic_req_head(struct srnic_qp *qp)
{
	return READ_ONCE(qp->sq.consumer);
}

static bool srnic_req_outstanding(struct srnic_qp *qp)
{
	return srnic_req_head(qp) != qp->req.next_index;
}

static u32 srnic_req_npkts(struct srnic_qp *qp, u64 len)
{
	u32 mtu = srnic_qp_mtu(qp);

	return len ? DIV_ROUND_UP_ULL(len, mtu) : 1;
}

/* ---- Timers ----------------------------------------------------------- */

static void srnic_req_timer_fn(struct timer_list *t)
{
	struct srnic_qp *qp = timer_container_of(qp, t, req.timer);

	WRITE_ONCE(qp->req.timed_out, true);
	srnic_engine_task_schedule(&qp->task);
}

/*
 * (Re)start the local ACK timer: 4.096 us * 2^timeout (0 is infinite),
 * doubled for each timeout since the last progress, as TCP backs off its
 * RTO: a peer that is slow rather than gone gets time to catch up on the
 * requests sent again.
 */
static void srnic_req_arm_timer(struct srnic_qp *qp)
{
	if (!qp->attrs.timeout)
		return;
	mod_timer(&qp->req.timer, jiffies + srnic_req_ack_timeout(qp));
}

/**
 * srnic_req_ack_timeout() - the QP's current local ACK timeout
 * @qp: an RC or XRC_INI QP
 *
 * 4.096 us * 2^timeout, or the path's retransmission timeout (srtt + 4 *
 * rttvar, as TCP's) if longer: IBTA's timeout is the least time the
 * requester waits, and a queue on the path can hold a packet longer. At
 * least SRNIC_REQ_MIN_TIMEOUT_MS, doubled for each timeout since the last
 * progress (up to SRNIC_REQ_MAX_BACKOFF times). Timeout 0 (infinite)
 * gives the floor: the caller decides.
 *
 * Return: jiffies.
 */
unsigned long srnic_req_ack_timeout(struct srnic_qp *qp)
{
	u32 backoff = qp->attrs.retry_cnt - qp->req.retries_left;
	u64 nsecs = 4096ULL << qp->attrs.timeout;
	u64 delay;

	/* A path whose round trips take longer gets as long (RFC 6298). */
	nsecs = max(nsecs, qp->req.srtt_ns + 4 * qp->req.rttvar_ns);
	delay = max_t(u64, nsecs_to_jiffies64(nsecs),
		      msecs_to_jiffies(SRNIC_REQ_MIN_TIMEOUT_MS));
	delay <<= min_t(u32, backoff, SRNIC_REQ_MAX_BACKOFF);
	return min_t(u64, delay, MAX_JIFFY_OFFSET);
}

/* ---- Round-trip time ---------------------------------------------------- */

/*
 * One packet at a time is timed, from its send to the ACK that covers it,
 * and only a packet sent for the first time (Karn's rule: an ACK after a
 * resend does not say which copy it answers). The estimate and its
 * variation are smoothed as TCP's (RFC 6298: srtt += (rtt - srtt) / 8,
 * rttvar += (|srtt - rtt| - rttvar) / 4). The local ACK timer waits at
 * least srtt + 4 * rttvar (srnic_req_ack_timeout()), and the rate limiter
 * sizes its periods by srtt (srnic_rate.c).
 */
static void srnic_req_rtt_start(struct srnic_qp *qp, u32 psn)
{
	struct srnic_req *req = &qp->req;

	if (srnic_psn_cmp(psn, req->high_psn) >= 0)
		req->high_psn = srnic_psn_add(psn, 1);
	else
		return;		/* sent before */
	if (req->rtt_sampling)
		return;
	req->rtt_psn = psn;
	req->rtt_sent_ns = ktime_get_ns();
	req->rtt_sampling = true;
}

/* Everything up to @psn is acknowledged: the timed packet's RTT, if in. */
static void srnic_req_rtt_end(struct srnic_qp *qp, u32 psn)
{
	struct srnic_req *req = &qp->req;
	u64 rtt, dev;

	if (!req->rtt_sampling || srnic_psn_cmp(psn, req->rtt_psn) < 0)
		return;
	req->rtt_sampling = false;
	rtt = ktime_get_ns() - req->rtt_sent_ns;
	if (!req->srtt_ns) {
		req->srtt_ns = rtt;
		req->rttvar_ns = rtt / 2;
		return;
	}
	dev = rtt > req->srtt_ns ? rtt - req->srtt_ns : req->srtt_ns - rtt;
	req->rttvar_ns = req->rttvar_ns - (req->rttvar_ns >> 2) + (dev >> 2);
	req->srtt_ns = req->srtt_ns - (req->srtt_ns >> 3) + (rtt >> 3);
}

/* ---- Taking WQEs ------------------------------------------------------ */

/*
 * Copy the SQ entry at @index into req.wqe, if it is still posted and not
 * flushed. Returns false otherwise.
 */
static bool srnic_req_snapshot(struct srnic_qp *qp, u32 index)
{
	struct srnic_wq *sq = &qp->sq;
	unsigned long flags;
	bool ok = false;

	spin_lock_irqsave(&sq->lock, flags);
	if (index - sq->consumer < srnic_wq_read_producer(qp, sq) - sq->consumer) {
		memcpy(qp->req.wqe, srnic_queue_entry(&sq->ring, index),
		       sq->ring.entry_size);
		ok = true;
	}
	spin_unlock_irqrestore(&sq->lock, flags);
	return ok;
}

/*
 * Make req.wqe and req.sgl describe the WQE at @index (a cache: the WQE
 * just taken is usually the one sent). Returns the local status.
 */
static enum ib_wc_status srnic_req_load(struct srnic_qp *qp, u32 index)
{
	struct srnic_req *req = &qp->req;
	enum ib_wc_status status;

	if (req->sgl_index == index + 1)
		return IB_WC_SUCCESS;
	srnic_sgl_put(&req->sgl);
	req->sgl_index = 0;
	if (!srnic_req_snapshot(qp, index))
		return IB_WC_WR_FLUSH_ERR;
	if (!srnic_wqe_opcode_supported(qp, req->wqe->opcode))
		return IB_WC_LOC_QP_OP_ERR;
	status = srnic_req_local_sgl(qp, req->wqe, &req->sgl);
	if (status == IB_WC_SUCCESS)
		req->sgl_index = index + 1;
	return status;
}

/* Whether the next posted WQE may start now (READ limits, fences). */
static bool srnic_req_may_take(struct srnic_qp *qp)
{
	struct srnic_req *req = &qp->req;
	const struct srnic_send_wqe *entry;
	u8 opcode, flags;

	if (srnic_wq_read_producer(qp, &qp->sq) == req->next_index)
		return false;
	/* A failed WQE ends what is taken: the error state flushes the rest. */
	if (srnic_req_outstanding(qp) &&
	    srnic_req_wqe_at(qp, req->next_index - 1)->status != IB_WC_SUCCESS)
		return false;
	entry = srnic_queue_entry(&qp->sq.ring, req->next_index);
	opcode = READ_ONCE(entry->opcode);
	flags = READ_ONCE(entry->flags);
	if (srnic_wr_takes_rd_resource(opcode) &&
	    req->reads >= max_t(u8, qp->attrs.max_rd_atomic, 1))
		return false;
	return !(flags & SRNIC_WQE_FENCE) || !req->reads;
}

/* Take the next posted WQE and give it its PSNs. */
static bool srnic_req_take(struct srnic_qp *qp)
{
	struct srnic_req *req = &qp->req;
	u32 index = req->next_index;
	struct srnic_req_wqe *rw;
	enum ib_wc_status status;

	if (!srnic_req_may_take(qp))
		return false;
	status = srnic_req_load(qp, index);
	if (status == IB_WC_WR_FLUSH_ERR)
		return false;

	rw = srnic_req_wqe_at(qp, index);
	memset(rw, 0, sizeof(*rw));
	rw->wr_id = req->wqe->wr_id;
	rw->opcode = req->wqe->opcode;
	rw->flags = req->wqe->flags;
	rw->status = status;
	rw->first_psn = req->next_psn;
	rw->last_psn = req->next_psn;
	if (status == IB_WC_SUCCESS && srnic_wr_is_local(rw->opcode)) {
		/* Executed now, in order; it completes after its elders. */
		rw->status = srnic_local_op(qp, req->wqe);
		rw->local = true;
		rw->last_psn = srnic_psn_add(rw->first_psn, SRNIC_PSN_MASK);
	} else if (status == IB_WC_SUCCESS) {
		rw->len = req->sgl.len;
		rw->last_psn = srnic_psn_add(rw->first_psn,
					     srnic_req_npkts(qp, rw->len) - 1);
		req->next_psn = srnic_psn_add(rw->last_psn, 1);
		if (srnic_wr_takes_rd_resource(rw->opcode))
			req->reads++;
	}
	trace_srnic_wqe_start(&qp->ibqp, rw->wr_id, rw->opcode, rw->len,
			      rw->first_psn, rw->local ? 0 :
			      ((req->next_psn - rw->first_psn) &
			       SRNIC_PSN_MASK));
	req->next_index++;
	return true;
}

/* ---- Sending ---------------------------------------------------------- */

static void srnic_req_ack(struct srnic_qp *qp, u32 psn);
static bool srnic_req_rewind(struct srnic_qp *qp, u32 psn);
static bool srnic_req_read_sr(struct srnic_qp *qp);
static void srnic_req_ack_hold(struct srnic_req *req, u32 psn);
static void srnic_req_read_advance(struct srnic_qp *qp);

/*
 * How many UDP source ports (paths) the requester spreads its requests
 * over: the device's multipath setting where selective repeat is on and
 * the peer keeps what comes early (an srnic with selective repeat:
 * req.peer_sr); 1 otherwise. Sending, and telling loss from the
 * reordering spraying brings, both ask here.
 */
static u8 srnic_req_paths(struct srnic_qp *qp)
{
	struct srnic_dev *sdev = to_srnic_dev(qp->ibqp.device);

	if (qp->ibqp.qp_type != IB_QPT_RC || !qp->req.peer_sr ||
	    !READ_ONCE(sdev->selective_repeat))
		return 1;
	return READ_ONCE(sdev->multipath);
}

/*
 * Multipath (sysfs multipath > 1, the peer doing selective repeat): the
 * UDP source port of @psn, one of @paths next to the QP's own (in RoCEv2's
 * 0xc000-0xffff), in turn per SRNIC_REQ_SPRAY_CHUNK PSNs; ECMP hashes
 * each to its path, and the responder keeps what the faster ones bring
 * early.
 */
static __be16 srnic_req_sport(struct srnic_qp *qp, u32 psn, u8 paths)
{
	u16 base = ntohs(qp->path.sport);
	u16 path = (psn / SRNIC_REQ_SPRAY_CHUNK) % paths;

	return htons(0xc000 | ((base + path) & 0x3fff));
}

/*
 * Send packets of the WQE at req.send_index from req.send_psn, within
 * @budget and the window. Returns packets sent; moves to the next WQE
 * when this one is all sent.
 */
static unsigned int srnic_req_send_wqe(struct srnic_qp *qp,
				       unsigned int budget,
				       struct srnic_tx_batch *batch)
{
	struct srnic_req *req = &qp->req;
	struct srnic_req_wqe *rw = srnic_req_wqe_at(qp, req->send_index);
	/* A PSN sent again selectively was in the window when first sent. */
	u32 window_end = req->resending ? srnic_psn_add(req->send_psn, 1) :
			 srnic_psn_add(req->una_psn,
				       req->probing ? 1 : req->cwnd);
	struct srnic_dev *sdev = to_srnic_dev(qp->ibqp.device);
	bool sr = qp->ibqp.qp_type == IB_QPT_RC &&
		  READ_ONCE(sdev->selective_repeat);
	u8 paths = srnic_req_paths(qp);
	u32 mtu = srnic_qp_mtu(qp);
	const struct srnic_send_wqe *wqe;
	enum ib_wc_status status;
	unsigned int sent = 0;
	u32 psn;

	status = srnic_req_load(qp, req->send_index);
	if (status != IB_WC_SUCCESS) {
		/* E.g. its MR went away: it completes with the error. */
		if (rw->status == IB_WC_SUCCESS)
			rw->status = status == IB_WC_WR_FLUSH_ERR ?
				     IB_WC_LOC_QP_OP_ERR : status;
		req->send_index = req->next_index;
		return 0;
	}
	wqe = req->wqe;
	if (req->sgl.len != rw->len) {
		rw->status = IB_WC_LOC_QP_OP_ERR;	/* rewritten in flight */
		req->send_index = req->next_index;
		return 0;
	}

	while (sent < budget && srnic_psn_cmp(req->send_psn, window_end) < 0) {
		u32 n = (req->send_psn - rw->first_psn) & SRNIC_PSN_MASK;
		u64 offset = (u64)n * mtu;
		bool first = req->send_psn == rw->first_psn;
		bool last = req->send_psn == rw->last_psn;
		u32 inflight;
		struct srnic_txd txd = {
			.psn = req->send_psn,
			.rkey = wqe->rdma.rkey,
			.sr = sr,
		};

		if (paths > 1)
			txd.sport = srnic_req_sport(qp, req->send_psn, paths);

		txd.opcode = srnic_tx_req_opcode(rw->opcode, first, last);
		if (srnic_wr_is_read(rw->opcode)) {
			/* Responses so far may have had another size. */
			if (req->read_sgl_index == req->send_index + 1 &&
			    req->send_psn == req->read_psn)
				offset = req->read_offset;
			/* One request for all responses from send_psn on. */
			txd.va = wqe->rdma.remote_addr + offset;
			txd.dma_len = rw->len - offset;
			txd.ack_req = true;
			last = true;
			/* FLUSH: its range and kind; one empty response. */
			if (rw->opcode == SRNIC_WR_FLUSH) {
				txd.dma_len = wqe->flush.length;
				txd.feth = srnic_tx_flush_feth(wqe);
			}
		} else if (srnic_wr_is_atomic(rw->opcode)) {
			srnic_tx_atomic_txd(wqe, &txd);
		} else {
			txd.sgl = &req->sgl;
			txd.offset = offset;
			txd.len = min_t(u64, mtu, rw->len - offset);
			txd.va = wqe->rdma.remote_addr;
			txd.dma_len = rw->len;
			txd.imm = wqe->imm_data;
			txd.inv_rkey = wqe->invalidate_rkey;
			inflight = ((req->send_psn - req->una_psn) &
				    SRNIC_PSN_MASK) + 1;
			/*
			 * ACKs keep the window moving; a paced packet may be
			 * the last for a while, so each asks for one.
			 */
			txd.ack_req = last || !((n + 1) % SRNIC_REQ_ACK_EVERY) ||
				      inflight >= req->cwnd ||
				      inflight == req->cwnd / 2 || req->rate.mbps ||
				      req->resending || req->probing;
			txd.solicited = last && (wqe->flags & SRNIC_WQE_SOLICITED);
		}
		if (!srnic_qp_acked(qp)) {
			txd.opcode |= SRNIC_TRANSPORT_UC;
			txd.ack_req = false;
		}
		if (srnic_qp_is_xrc(qp)) {
			/* Every XRC request names the target's XRC SRQ. */
			txd.opcode |= SRNIC_TRANSPORT_XRC;
			txd.xrc_srqn = wqe->xrc_remote_srqn;
		}
		/* Under congestion, the packet waits for its time. */
		if (!srnic_rate_admit(qp, txd.len))
			break;
		/*
		 * A full queue on the way out (-ENOBUFS, e.g. a veth
		 * backlog): the packet never left, so it is not sent; like
		 * a NIC with a full TX ring, stop and send it when the
		 * task runs again (an ACK, a poll), instead of losing it
		 * and a timeout's worth of time. A batch that went first
		 * may have been refused instead: then from its first.
		 */
		if (srnic_tx_build(qp, &txd, batch) == -ENOBUFS &&
		    srnic_qp_acked(qp)) {
			srnic_req_rewind(qp, batch->lost_psn);
			req->tx_blocked = true;
			break;
		}
		sent++;
		psn = req->send_psn;
		if (txd.ack_req)
			srnic_req_rtt_start(qp, psn);
		if (last) {
			req->send_index++;
			req->send_psn = srnic_psn_add(rw->last_psn, 1);
		} else {
			req->send_psn = srnic_psn_add(req->send_psn, 1);
		}
		/* UC: handed off is as good as it gets (the last completes). */
		if (!srnic_qp_acked(qp))
			srnic_req_ack(qp, psn);
		if (last || READ_ONCE(qp->state) == IB_QPS_ERR)
			break;
	}
	return sent;
}

/* ---- Selective repeat ------------------------------------------------- */

static void srnic_req_recovery_end(struct srnic_qp *qp)
{
	struct srnic_req *req = &qp->req;

	if (!req->recovering)
		return;
	req->recovering = false;
	req->resend_all = false;
	req->resend_partial = false;
	bitmap_zero(req->sacked, SRNIC_SR_WINDOW);
}

/*
 * A pass over the PSNs missing from the oldest unacknowledged one on;
 * @all: every one not reported kept, however few are kept above it
 * (after a timeout).
 */
static void srnic_req_pass_from_una(struct srnic_req *req, bool all)
{
	req->resend_psn = req->una_psn;
	req->lost_mark = req->una_psn;
	req->resend_partial = false;
	if (all)
		req->resend_all = true;
}

/* The oldest unacknowledged PSN moves from @old to @una. */
static void srnic_req_recovery_acked(struct srnic_qp *qp, u32 old, u32 una)
{
	struct srnic_req *req = &qp->req;
	u32 n = (una - old) & SRNIC_PSN_MASK;

	if (srnic_psn_cmp(una, req->sack_high) >= 0 || n >= SRNIC_SR_WINDOW) {
		srnic_req_recovery_end(qp);
		return;
	}
	while (n--) {
		__clear_bit(old & (SRNIC_SR_WINDOW - 1), req->sacked);
		old = srnic_psn_add(old, 1);
	}
}

/*
 * A selective NAK: the responder expects @epsn (everything before is
 * acknowledged, by the caller) and keeps @n requests from @start on.
 */
static void srnic_req_sack(struct srnic_qp *qp, u32 epsn, u32 start, u8 n)
{
	struct srnic_req *req = &qp->req;
	u8 paths = srnic_req_paths(qp);
	u32 sent_to = req->resend_psn;
	u32 lost_below = 0;
	bool lost_again = false;

	srnic_qp_count(qp, SRNIC_CNT_RX_NAK_SELECTIVE);
	if (srnic_psn_cmp(epsn, req->una_psn) < 0)
		return;		/* an old one, overtaken */
	if (!req->recovering) {
		/* A loss episode: the window halves once for it. */
		req->recovering = true;
		req->resent = false;
		req->sack_high = req->una_psn;
		srnic_req_pass_from_una(req, false);
		req->cwnd = max_t(u32, req->cwnd / 2, SRNIC_REQ_MIN_WINDOW);
		req->rtt_sampling = false;	/* Karn's rule */
	}
	/* The highest PSN the round has sent again so far. */
	if (req->resend_partial &&
	    srnic_psn_cmp(req->resend_resume, sent_to) > 0)
		sent_to = req->resend_resume;
	for (; n; n--, start = srnic_psn_add(start, 1)) {
		if (srnic_psn_cmp(start, req->una_psn) < 0)
			continue;
		if (srnic_psn_cmp(start, req->next_psn) >= 0 ||
		    ((start - req->una_psn) & SRNIC_PSN_MASK) >= SRNIC_SR_WINDOW)
			break;
		if (srnic_psn_cmp(start, req->sack_high) >= 0)
			req->sack_high = srnic_psn_add(start, 1);
		if (__test_and_set_bit(start & (SRNIC_SR_WINDOW - 1),
				       req->sacked) ||
		    srnic_psn_cmp(start, epsn) <= 0)
			continue;
		/*
		 * One path keeps packets in order: a PSN sent after @epsn's
		 * last copy arrives first, so that copy was lost. Either one
		 * sent again after it (from lost_mark on, they go in order),
		 * or a new one sent after the last copy sent again (from
		 * resend_fence on; with several paths only one of @epsn's,
		 * and it proves only @epsn lost). A time limit would also
		 * take copies queued behind the window for lost.
		 */
		if (srnic_psn_cmp(start, req->lost_mark) >= 0 &&
		    srnic_psn_cmp(start, req->resend_psn) < 0) {
			lost_again = true;
			lost_below = start;
		} else if (req->resent &&
			   srnic_psn_cmp(start, req->resend_fence) >= 0 &&
			   srnic_psn_cmp(sent_to, epsn) > 0 &&
			   (paths == 1 || srnic_req_sport(qp, start, paths) ==
					  srnic_req_sport(qp, epsn, paths))) {
			lost_again = true;
			lost_below = paths == 1 ? sent_to :
				     srnic_psn_add(epsn, 1);
		}
	}
	if (req->probe_passes && epsn == req->una_psn &&
	    srnic_psn_cmp(req->resend_psn, req->sack_high) >= 0) {
		/*
		 * The pass after a timeout is over, and its probe tells the
		 * oldest PSN is still missing: its copy was lost, another
		 * pass goes now rather than after the next, longer timeout.
		 */
		req->probe_passes--;
		srnic_req_pass_from_una(req, true);
		lost_again = false;
	}
	if (lost_again) {
		/*
		 * What was sent again before @lost_below and is still missing
		 * is lost: those go once more, then the round goes on where
		 * it was.
		 */
		if (!req->resend_partial) {
			req->resend_partial = true;
			req->resend_resume = req->resend_psn;
			req->resend_stop = lost_below;
		} else if (srnic_psn_cmp(lost_below, req->resend_stop) > 0) {
			req->resend_stop = lost_below;
		}
		/* Only what goes after this pass tells of its loss. */
		req->lost_mark = req->resend_resume;
		req->resend_psn = req->una_psn;
		req->resent = false;
	}
	/* Perhaps a PSN missing below enough kept: srnic_req_resend() looks. */
	req->resend_ready = true;
}

/*
 * How many PSNs of [@from, @to) were reported kept (within the window);
 * 0 when @from is at or beyond @to (a READ or atomic sent again whole may
 * end beyond the highest kept).
 */
static u32 srnic_req_sacked_between(struct srnic_req *req, u32 from, u32 to)
{
	u32 i = from & (SRNIC_SR_WINDOW - 1);
	u32 end;

	if (srnic_psn_cmp(from, to) >= 0)
		return 0;
	end = i + min_t(u32, (to - from) & SRNIC_PSN_MASK, SRNIC_SR_WINDOW);
	if (end <= SRNIC_SR_WINDOW)
		return bitmap_weight(req->sacked, end) -
		       bitmap_weight(req->sacked, i);
	return bitmap_weight(req->sacked, SRNIC_SR_WINDOW) -
	       bitmap_weight(req->sacked, i) +
	       bitmap_weight(req->sacked, end - SRNIC_SR_WINDOW);
}

/* Is a PSN missing below the highest kept, not sent again yet? */
static bool srnic_req_resend_pending(struct srnic_qp *qp)
{
	struct srnic_req *req = &qp->req;

	return req->recovering && req->resend_ready &&
	       srnic_psn_cmp(req->resend_psn, req->sack_high) < 0;
}

/*
 * Send again, within @budget, the PSNs missing below at least
 * SRNIC_REQ_SACK_THRESHOLD the responder reported kept: one packet each,
 * or a READ's or atomic's request once (its responses recover on their
 * own: srnic_req_read_keep()). Returns packets sent. The resends go in a
 * batch of their own: one the way out refused never left, and the round
 * starts over at the next run.
 */
static unsigned int srnic_req_resend(struct srnic_qp *qp, unsigned int budget)
{
	struct srnic_dev *sdev = to_srnic_dev(qp->ibqp.device);
	struct srnic_req *req = &qp->req;
	u32 save_index = req->send_index, save_psn = req->send_psn;
	u32 index = srnic_req_head(qp);
	struct srnic_tx_batch batch = {};
	unsigned int sent = 0;
	bool probe = req->resend_all &&
		     srnic_psn_cmp(req->resend_psn, req->una_psn) <= 0;
	u32 threshold = SRNIC_REQ_SACK_THRESHOLD;
	u32 above;

	/*
	 * Sprayed, a chunk on a slower path is overtaken by the other
	 * paths' chunks of its turn: that much is reordering, not loss.
	 */
	threshold += (srnic_req_paths(qp) - 1) * SRNIC_REQ_SPRAY_CHUNK;

	if (srnic_psn_cmp(req->resend_psn, req->una_psn) < 0)
		req->resend_psn = req->una_psn;
	above = srnic_req_sacked_between(req, req->resend_psn, req->sack_high);
	req->resending = true;
	while (sent < budget && srnic_req_resend_pending(qp)) {
		u32 psn = req->resend_psn;
		struct srnic_req_wqe *rw = NULL;
		bool whole;

		if (req->resend_partial &&
		    srnic_psn_cmp(psn, req->resend_stop) >= 0) {
			/* The lost again went: on where the round was. */
			req->resend_partial = false;
			if (srnic_psn_cmp(req->resend_resume, psn) > 0)
				req->resend_psn = req->resend_resume;
			above = srnic_req_sacked_between(req, req->resend_psn,
							 req->sack_high);
			continue;
		}

		/*
		 * After a timeout the oldest goes in any case (if only its
		 * ACK was lost, the duplicate brings another), and the PSN
		 * after it as a probe: the responder reports a copy of one it
		 * keeps, and so whether the oldest is still missing.
		 */
		if (test_bit(psn & (SRNIC_SR_WINDOW - 1), req->sacked) &&
		    !(req->resend_all && (psn == req->una_psn || probe))) {
			req->resend_psn = srnic_psn_add(psn, 1);
			above--;
			continue;
		}
		if (req->resend_all && psn != req->una_psn)
			probe = false;
		if (above < threshold && !req->resend_all) {
			req->resend_ready = false;	/* until more are kept */
			break;		/* perhaps only overtaken */
		}
		for (; index != req->next_index; index++) {
			rw = srnic_req_wqe_at(qp, index);
			if (srnic_psn_cmp(psn, rw->last_psn) <= 0)
				break;
		}
		if (index == req->next_index)
			break;
		whole = srnic_wr_is_rd_atomic(rw->opcode);
		req->resend_psn = srnic_psn_add(whole ? rw->last_psn : psn, 1);
		if (whole)
			above = srnic_req_sacked_between(req, req->resend_psn,
							 req->sack_high);
		if (rw->status != IB_WC_SUCCESS || rw->local ||
		    (whole && psn != rw->first_psn))
			continue;
		req->send_index = index;
		req->send_psn = psn;
		if (!srnic_req_send_wqe(qp, 1, &batch)) {
			req->resend_psn = psn;	/* paced, or refused */
			break;
		}
		sent++;
		req->resent = true;
		req->resend_fence = save_psn;
		trace_srnic_retransmit(&qp->ibqp, psn, 1);
		srnic_qp_count(qp, SRNIC_CNT_SELECTIVE_RETRANSMITS);
	}
	req->resending = false;
	if (srnic_psn_cmp(req->resend_psn, req->sack_high) >= 0)
		req->resend_all = false;
	req->send_index = save_index;
	req->send_psn = save_psn;
	if (srnic_tx_batch_flush(sdev, &batch) == -ENOBUFS || req->tx_blocked) {
		srnic_qp_count(qp, SRNIC_CNT_TX_ERRORS);
		req->resend_psn = req->una_psn;
		req->tx_blocked = true;
	}
	return sent;
}

/*
 * Make @psn the next to send: the WQE holding it, and all after it.
 * Return whether packets sent before are sent again.
 */
static bool srnic_req_rewind(struct srnic_qp *qp, u32 psn)
{
	struct srnic_req *req = &qp->req;
	u32 index;

	for (index = srnic_req_head(qp); index != req->next_index; index++) {
		struct srnic_req_wqe *rw = srnic_req_wqe_at(qp, index);

		if (rw->status != IB_WC_SUCCESS)
			break;
		if (srnic_psn_cmp(psn, rw->last_psn) <= 0) {
			if (srnic_psn_cmp(psn, rw->first_psn) < 0)
				psn = rw->first_psn;
			break;
		}
	}
	if (index == req->next_index)
		psn = req->next_psn;
	if (index == req->send_index && psn == req->send_psn)
		return false;
	req->send_index = index;
	req->send_psn = psn;
	return true;
}

/* Send from @psn again: the WQE holding it, and all after it. */
static void srnic_req_go_back(struct srnic_qp *qp, u32 psn)
{
	srnic_req_recovery_end(qp);
	if (srnic_req_rewind(qp, psn)) {
		trace_srnic_retransmit(&qp->ibqp, psn, 0);
		srnic_qp_count(qp, SRNIC_CNT_RETRANSMITS);
		qp->req.rtt_sampling = false;	/* Karn's rule */
	}
}

/*
 * Hand what a run batched to the IP layer. Packets it refused never left:
 * the requester stops and sends them when its task runs again, as for a
 * refused packet in srnic_req_send_wqe().
 */
static void srnic_req_flush(struct srnic_qp *qp, struct srnic_tx_batch *batch)
{
	struct srnic_dev *sdev = to_srnic_dev(qp->ibqp.device);

	if (srnic_tx_batch_flush(sdev, batch) == -ENOBUFS &&
	    srnic_qp_acked(qp)) {
		srnic_qp_count(qp, SRNIC_CNT_TX_ERRORS);
		srnic_req_rewind(qp, batch->lost_psn);
		qp->req.tx_blocked = true;
	}
}

/* A packet was lost: send from @psn again with half the window. */
static void srnic_req_lost(struct srnic_qp *qp, u32 psn)
{
	struct srnic_req *req = &qp->req;

	req->cwnd = max_t(u32, req->cwnd / 2, SRNIC_REQ_MIN_WINDOW);
	srnic_req_go_back(qp, psn);
	req->went_back = true;
}

/* ---- Completing ------------------------------------------------------- */

/*
 * Retire the oldest WQE with @status. Returns false if the QP went to
 * the error state (by this completion or by a flush meanwhile).
 */
static bool srnic_req_retire_head(struct srnic_qp *qp,
				  enum ib_wc_status status)
{
	struct srnic_req *req = &qp->req;
	u32 index = srnic_req_head(qp);
	struct srnic_req_wqe *rw = srnic_req_wqe_at(qp, index);
	struct srnic_wq *sq = &qp->sq;
	struct srnic_cqe cqe = {
		.wr_id = rw->wr_id,
		.status = status,
		.opcode = srnic_wqe_wc_opcode(rw->opcode),
		.byte_len = srnic_wr_is_rd_atomic(rw->opcode) ? rw->len : 0,
		.qp_num = qp->ibqp.qp_num,
	};
	unsigned long flags;
	bool retired = false;
	bool ok = true;

	spin_lock_irqsave(&sq->lock, flags);
	if (sq->consumer == index) {
		sq->consumer++;
		/* Done with the slot: the provider may reuse it. */
		smp_store_release(&sq->ring.ctrl->consumer, sq->consumer);
		retired = true;
	}
	spin_unlock_irqrestore(&sq->lock, flags);
	if (!retired)
		return false;

	if (srnic_wr_takes_rd_resource(rw->opcode) &&
	    rw->status == IB_WC_SUCCESS)
		req->reads--;
	if (req->read_sgl_index == index + 1) {
		srnic_sgl_put(&req->read_sgl);
		req->read_sgl_index = 0;
	}
	if (req->sgl_index == index + 1) {
		srnic_sgl_put(&req->sgl);
		req->sgl_index = 0;
	}
	if (req->send_index == index)
		req->send_index++;

	if (status != IB_WC_SUCCESS) {
		srnic_qp_complete_to_error(qp, to_srnic_cq(qp->ibqp.send_cq),
					   &cqe);
		ok = false;
	} else if (((rw->flags & SRNIC_WQE_SIGNALED) || qp->sq_sig_all) &&
		   srnic_cq_post(to_srnic_cq(qp->ibqp.send_cq), &cqe, false)) {
		srnic_qp_to_error(qp, 0);	/* CQ overrun */
		ok = false;
	}
	srnic_sq_publish_completed(qp);
	return ok;
}

/* Progress was made: retries start over, the timer restarts or stops. */
static void srnic_req_progress(struct srnic_qp *qp)
{
	struct srnic_req *req = &qp->req;

	req->retries_left = qp->attrs.retry_cnt;
	req->rnr_retries_left = qp->attrs.rnr_retry;
	req->went_back = false;
	req->probe_passes = 0;
	if (srnic_req_outstanding(qp))
		srnic_req_arm_timer(qp);
	else
		timer_delete(&req->timer);
}

/*
 * Everything up to and including @psn is acknowledged: complete the WQEs
 * it covers. A READ completes only with its last response, an atomic with
 * its ATOMIC_ACKNOWLEDGE; an ACK beyond the responses a READ or atomic
 * still expects means they were lost, and it is sent again from there
 * (once, until progress is made).
 */
static void srnic_req_ack(struct srnic_qp *qp, u32 psn)
{
	struct srnic_req *req = &qp->req;
	bool progress = false, lost = false, held = false;
	u32 expect = 0;

	while (srnic_req_outstanding(qp)) {
		u32 head = srnic_req_head(qp);
		struct srnic_req_wqe *rw = srnic_req_wqe_at(qp, head);

		if (rw->status != IB_WC_SUCCESS)
			break;
		if (srnic_wr_is_rd_atomic(rw->opcode) && !rw->read_done) {
			expect = srnic_wr_is_read(rw->opcode) &&
				 req->read_sgl_index == head + 1 ?
				 req->read_psn : rw->first_psn;
			if (srnic_psn_cmp(psn, expect) >= 0) {
				if (srnic_req_read_sr(qp)) {
					srnic_req_ack_hold(req, psn);
					held = true;
				} else {
					lost = true;
				}
				psn = srnic_psn_add(expect, SRNIC_PSN_MASK);
			}
			break;
		}
		if (srnic_psn_cmp(rw->last_psn, psn) > 0)
			break;
		if (!srnic_req_retire_head(qp, IB_WC_SUCCESS))
			return;
		progress = true;
	}
	if (srnic_psn_cmp(psn, req->una_psn) >= 0) {
		u32 acked = ((psn - req->una_psn) & SRNIC_PSN_MASK) + 1;

		req->cwnd = min_t(u32, req->cwnd + acked, SRNIC_REQ_WINDOW);
		if (req->recovering)
			srnic_req_recovery_acked(qp, req->una_psn,
						 srnic_psn_add(psn, 1));
		req->una_psn = srnic_psn_add(psn, 1);
		srnic_req_rtt_end(qp, psn);
		progress = true;
		if (req->probing) {
			/* The probe's answer: what arrived is not sent again. */
			req->probing = false;
			if (srnic_psn_cmp(req->send_psn, req->una_psn) < 0)
				srnic_req_rewind(qp, req->una_psn);
		}
	}
	if (progress)
		srnic_req_progress(qp);
	if (lost && !req->went_back)
		srnic_req_lost(qp, expect);
	else if (held)
		srnic_req_read_advance(qp);
}

/* Complete the oldest WQE with a remote error (the QP goes to error). */
static void srnic_req_fail_head(struct srnic_qp *qp, enum ib_wc_status status)
{
	if (srnic_req_outstanding(qp))
		srnic_req_retire_head(qp, status);
	else
		srnic_qp_to_error(qp, 0);
}

static void srnic_req_rnr_nak(struct srnic_qp *qp, u32 psn, u8 timer)
{
	struct srnic_req *req = &qp->req;

	trace_srnic_rnr_wait(&qp->ibqp, psn, timer);
	srnic_qp_count(qp, SRNIC_CNT_RNR_NAKS_RECEIVED);
	if (qp->attrs.rnr_retry != SRNIC_RNR_RETRY_INFINITE &&
	    !req->rnr_retries_left--) {
		srnic_req_fail_head(qp, IB_WC_RNR_RETRY_EXC_ERR);
		return;
	}
	srnic_req_go_back(qp, psn);
	srnic_req_rnr_wait(qp, timer);
	/* The RNR wait is not an ACK timeout. */
	timer_delete(&req->timer);
}

/* An ACK, RNR NAK or NAK for @psn; @sr_run not 0: a selective NAK. */
static void srnic_req_aeth(struct srnic_qp *qp, u32 psn, u32 smsn,
			   u8 sr_run)
{
	u8 syndrome = FIELD_GET(SRNIC_AETH_SMSN_SYNDROME_MASK, smsn);
	u8 value = syndrome & SRNIC_AETH_SYNDROME_VALUE_MASK;
	u8 type = FIELD_GET(SRNIC_AETH_SYNDROME_TYPE_MASK, syndrome);

	trace_srnic_aeth_rx(&qp->ibqp, psn, syndrome);
	if (sr_run)
		qp->req.peer_sr = true;		/* srnic's, selective repeat on */
	if (type != SRNIC_AETH_ACK)
		qp->req.probing = false;	/* answered: the NAK decides */
	switch (type) {
	case SRNIC_AETH_ACK:
		srnic_req_ack(qp, psn);
		return;
	case SRNIC_AETH_RNR_NAK:
		srnic_req_ack(qp, srnic_psn_add(psn, SRNIC_PSN_MASK));
		if (READ_ONCE(qp->state) != IB_QPS_ERR)
			srnic_req_rnr_nak(qp, psn, value);
		return;
	case SRNIC_AETH_NAK:
		srnic_req_ack(qp, srnic_psn_add(psn, SRNIC_PSN_MASK));
		if (READ_ONCE(qp->state) == IB_QPS_ERR)
			return;
		if (value == SRNIC_NAK_PSN_SEQUENCE_ERROR && sr_run) {
			srnic_req_sack(qp, psn, smsn & SRNIC_AETH_SMSN_MSN_MASK,
				       sr_run);
			srnic_req_arm_timer(qp);
			return;
		}
		if (value == SRNIC_NAK_PSN_SEQUENCE_ERROR) {
			srnic_req_lost(qp, psn);
			srnic_req_arm_timer(qp);
			return;
		}
		srnic_req_fail_head(qp, srnic_nak_wc_status(value));
		return;
	default:
		srnic_qp_count(qp, SRNIC_CNT_RX_DROP_UNEXPECTED);
	}
}

/* ---- READ responses ---------------------------------------------------- */

/*
 * Selective repeat of READ responses, with a responder that does it
 * (req.peer_sr): a response beyond the one the oldest READ expects, of that
 * READ or of a later one, is placed at its offset right away and kept in
 * @read_kept (every response of a READ but its last carries one path MTU).
 * Once a few are kept (SRNIC_REQ_SACK_THRESHOLD: fewer may be reordering),
 * the responses the oldest READ misses below the first one kept are asked
 * for again with a READ of just their range (srnic_req_read_ask()); the
 * responder answers a READ behind its epsn from the request's PSN, for the
 * request's length, as IBTA has it for a duplicate READ, after the READ it
 * is answering. The responses in order then pass over what is kept, and a
 * READ completed so makes way for the next, whose kept responses count at
 * once (srnic_req_read_advance()). A range asked for and lost again waits
 * for the ACK timeout, which goes back N as without it.
 *
 * WRITEs and SENDs may stand between the READs: a response tells that the
 * responder executed every request before its READ, so the ones ahead of
 * the oldest READ are acknowledged by it (srnic_req_read_acks_before()),
 * and those between READs by a response kept of a READ after them. An ACK
 * of a request after the oldest READ, which misses responses, tells them
 * lost (one path keeps the responder's order): they are asked for again,
 * and the ACK is held (req.ack_held) until the READ completes. An atomic
 * whose ATOMIC_ACKNOWLEDGE was lost so is asked for again alone
 * (srnic_req_atomic_ask()); the responses of READs behind it are not kept,
 * but asked for again once it completes, as the ACK held tells.
 */

/* Whether READ responses may be kept (see above). */
static bool srnic_req_read_sr(struct srnic_qp *qp)
{
	return qp->ibqp.qp_type == IB_QPT_RC && qp->req.peer_sr &&
	       READ_ONCE(to_srnic_dev(qp->ibqp.device)->selective_repeat);
}

/* Everything kept is forgotten (the QP was reset). */
static void srnic_req_read_kept_clear(struct srnic_req *req)
{
	if (req->read_kept_count)
		bitmap_zero(req->read_kept, SRNIC_SR_WINDOW);
	req->read_kept_count = 0;
	req->read_kept_high = req->read_psn;
	req->read_asked_to = req->read_psn;
	req->ack_held = false;
}

/*
 * An ACK up to @psn came while the oldest READ misses responses before
 * it: kept until the READ completes (the requests it covers after the
 * READ complete after it).
 */
static void srnic_req_ack_hold(struct srnic_req *req, u32 psn)
{
	if (!req->ack_held || srnic_psn_cmp(psn, req->ack_held_psn) > 0)
		req->ack_held_psn = psn;
	req->ack_held = true;
}

/*
 * A READ response for @psn: the WRITEs and SENDs ahead of the first READ
 * or atomic still outstanding are acknowledged if @psn is at or beyond
 * that one's first PSN (the responder executed everything before it).
 */
static void srnic_req_read_acks_before(struct srnic_qp *qp, u32 psn)
{
	u32 head = srnic_req_head(qp), i;

	for (i = head; i != qp->req.send_index; i++) {
		const struct srnic_req_wqe *rw = srnic_req_wqe_at(qp, i);

		if (rw->status != IB_WC_SUCCESS)
			return;
		if (srnic_wr_is_rd_atomic(rw->opcode) && !rw->read_done) {
			if (i != head && srnic_psn_cmp(psn, rw->first_psn) >= 0)
				srnic_req_ack(qp, srnic_psn_add(rw->first_psn,
								SRNIC_PSN_MASK));
			return;
		}
	}
}

/* Is the response of @psn kept? */
static bool srnic_req_read_is_kept(struct srnic_req *req, u32 psn)
{
	return req->read_kept_count &&
	       test_bit(psn & (SRNIC_SR_WINDOW - 1), req->read_kept);
}

/*
 * Send @txd, a READ or atomic asking again for what the oldest WQE misses
 * from its PSN on, up to (not including) @asked_to.
 */
static void srnic_req_ask_send(struct srnic_qp *qp,
			       const struct srnic_txd *txd, u32 asked_to)
{
	srnic_tx_build(qp, txd, NULL);
	trace_srnic_retransmit(&qp->ibqp, txd->psn, 2);
	qp->req.read_asked_to = asked_to;
	qp->req.rtt_sampling = false;	/* Karn's rule */
	srnic_qp_count(qp, SRNIC_CNT_SELECTIVE_RETRANSMITS);
}

/*
 * Ask again for the responses the oldest READ (@rw, at @index) misses from
 * @from on, up to the first one kept or its last, with a READ of their
 * range.
 */
static void srnic_req_read_ask(struct srnic_qp *qp, u32 index,
			       const struct srnic_req_wqe *rw, u32 from)
{
	struct srnic_req *req = &qp->req;
	u32 mtu = srnic_qp_mtu(qp);
	u64 offset = (u64)((from - rw->first_psn) & SRNIC_PSN_MASK) * mtu;
	u32 end = from, n = 0;
	struct srnic_txd txd;

	while (srnic_psn_cmp(end, rw->last_psn) <= 0 &&
	       !srnic_req_read_is_kept(req, end)) {
		end = srnic_psn_add(end, 1);
		n++;
	}
	if (!n || offset >= rw->len || !srnic_req_snapshot(qp, index))
		return;
	req->sgl_index = 0;	/* req.wqe was overwritten */
	txd = (struct srnic_txd) {
		.opcode = srnic_tx_req_opcode(rw->opcode, true, true),
		.psn = from,
		.ack_req = true,
		.sr = true,
		.sr_run = SRNIC_SR_RUN_READ_RANGE,
		.rkey = req->wqe->rdma.rkey,
		.va = req->wqe->rdma.remote_addr + offset,
		/* All but the READ's last response carry one path MTU. */
		.dma_len = min_t(u64, (u64)n * mtu, rw->len - offset),
	};
	srnic_req_ask_send(qp, &txd, end);
}

/*
 * Ask again for the ATOMIC_ACKNOWLEDGE of the oldest WQE, an atomic (@rw,
 * at @index) the responder executed (a later request was answered): its
 * request again, marked as asked (the responder replays the result, IBTA
 * 9.7.5.1.3.2, and drops nothing for it).
 */
static void srnic_req_atomic_ask(struct srnic_qp *qp, u32 index,
				 const struct srnic_req_wqe *rw)
{
	struct srnic_req *req = &qp->req;
	struct srnic_txd txd = {
		.opcode = srnic_tx_req_opcode(rw->opcode, true, true),
		.psn = rw->first_psn,
		.sr = true,
		.sr_run = SRNIC_SR_RUN_READ_RANGE,
	};

	if (!srnic_req_snapshot(qp, index))
		return;
	req->sgl_index = 0;	/* req.wqe was overwritten */
	srnic_tx_atomic_txd(req->wqe, &txd);
	srnic_req_ask_send(qp, &txd, srnic_psn_add(rw->first_psn, 1));
}

/*
 * The outstanding READ whose responses include @psn (at *@index), when no
 * atomic still waiting for its ATOMIC_ACKNOWLEDGE comes before it; else
 * NULL. Behind such an atomic the READs go back N, as without selective
 * repeat (the atomic is sent again, and the responder replays it).
 */
static struct srnic_req_wqe *srnic_req_read_of(struct srnic_qp *qp, u32 psn,
					       u32 *index)
{
	u32 i;

	for (i = srnic_req_head(qp); i != qp->req.send_index; i++) {
		struct srnic_req_wqe *rw = srnic_req_wqe_at(qp, i);

		if (rw->status != IB_WC_SUCCESS ||
		    srnic_psn_cmp(psn, rw->first_psn) < 0)
			break;
		if (!srnic_wr_is_read(rw->opcode)) {
			if (srnic_wr_is_atomic(rw->opcode) && !rw->read_done)
				break;
			continue;	/* acknowledged by this response */
		}
		if (srnic_psn_cmp(psn, rw->last_psn) <= 0) {
			*index = i;
			return rw;
		}
	}
	return NULL;
}

/*
 * Resolve the local buffers of the outstanding READ or atomic at @index
 * (@rw) into req.read_sgl, from its WQE (untrusted, so checked again).
 * Returns the local status; the WQE is not retired.
 */
static enum ib_wc_status srnic_req_read_sgl_get(struct srnic_qp *qp,
						u32 index,
						const struct srnic_req_wqe *rw)
{
	struct srnic_req *req = &qp->req;
	enum ib_wc_status status = IB_WC_WR_FLUSH_ERR;

	srnic_sgl_put(&req->read_sgl);
	req->read_sgl_index = 0;
	if (srnic_req_snapshot(qp, index))
		status = srnic_req_local_sgl(qp, req->wqe, &req->read_sgl);
	req->sgl_index = 0;	/* req.wqe was overwritten */
	if (status == IB_WC_SUCCESS && req->read_sgl.len != rw->len) {
		srnic_sgl_put(&req->read_sgl);
		status = IB_WC_LOC_QP_OP_ERR;
	}
	return status;
}

/*
 * Make the oldest WQE, a READ at @index, the one whose responses are
 * placed (req.read_sgl), from its first response on if it is new. Returns
 * false when its buffers are gone (it completed with the error).
 */
static bool srnic_req_read_load(struct srnic_qp *qp, u32 index,
				struct srnic_req_wqe *rw)
{
	struct srnic_req *req = &qp->req;
	enum ib_wc_status status;
	bool resume;

	/* Loaded, unless srnic_req_put_mrs() released its SGL. */
	if (req->read_sgl_index == index + 1 && req->read_sgl.len == rw->len)
		return true;
	resume = req->read_sgl_index == index + 1;
	status = srnic_req_read_sgl_get(qp, index, rw);
	if (status != IB_WC_SUCCESS) {
		srnic_req_retire_head(qp, status);
		return false;
	}
	req->read_sgl_index = index + 1;
	if (!resume) {
		req->read_psn = rw->first_psn;
		req->read_offset = 0;
		req->read_asked_to = rw->first_psn;
	}
	return true;
}

/*
 * Keep @pkt, a READ response beyond the one the oldest WQE (a READ)
 * expects: placed at its offset in its READ's buffers. Returns false when
 * it cannot be kept (then it goes as without selective repeat).
 */
static bool srnic_req_read_keep(struct srnic_qp *qp, struct sk_buff *skb,
				const struct srnic_pkt *pkt)
{
	struct srnic_req *req = &qp->req;
	u32 head = srnic_req_head(qp), index, expect, bit;
	struct srnic_req_wqe *hw = srnic_req_wqe_at(qp, head);
	const struct srnic_req_wqe *rw;
	u32 mtu = srnic_qp_mtu(qp);
	enum ib_wc_status status;
	bool loaded;
	u64 offset;
	int err;

	if (!srnic_wr_is_read(hw->opcode) || hw->read_done) {
		srnic_req_read_acks_before(qp, pkt->psn);
		if (!srnic_req_outstanding(qp) ||
		    READ_ONCE(qp->state) == IB_QPS_ERR)
			return false;
		head = srnic_req_head(qp);
		hw = srnic_req_wqe_at(qp, head);
	}
	if (!srnic_wr_is_read(hw->opcode) || hw->status != IB_WC_SUCCESS ||
	    hw->read_done)
		return false;
	/* The oldest READ's buffers, loaded again if a run released them. */
	if (!srnic_req_read_load(qp, head, hw))
		return true;	/* gone: it completed with the error */
	expect = req->read_psn;
	if (srnic_psn_cmp(pkt->psn, expect) <= 0 ||
	    ((pkt->psn - expect) & SRNIC_PSN_MASK) >= SRNIC_SR_WINDOW)
		return false;
	rw = srnic_req_read_of(qp, pkt->psn, &index);
	if (!rw)
		return false;
	offset = (u64)((pkt->psn - rw->first_psn) & SRNIC_PSN_MASK) * mtu;
	if (pkt->psn == rw->last_psn ?
	    !(pkt->flags & SRNIC_OPF_LAST) ||
	    offset + pkt->payload_len != rw->len :
	    pkt->payload_len != mtu || offset + mtu >= rw->len)
		return false;
	/* Responses in order of another size: the offsets would not hold. */
	loaded = index == head;
	if (loaded && req->read_offset !=
	    (u64)((req->read_psn - rw->first_psn) & SRNIC_PSN_MASK) * mtu)
		return false;
	bit = pkt->psn & (SRNIC_SR_WINDOW - 1);
	if (srnic_req_read_is_kept(req, pkt->psn))
		return true;	/* kept already */
	if (loaded) {
		err = srnic_pkt_scatter(skb, pkt, &req->read_sgl, offset);
	} else {
		/*
		 * A later READ: its buffers resolved for this response alone,
		 * in req.sgl, the send path's cache (the snapshot overwrites
		 * req.wqe, which that cache describes).
		 */
		srnic_sgl_put(&req->sgl);
		req->sgl_index = 0;
		if (!srnic_req_snapshot(qp, index))
			return false;
		status = srnic_req_local_sgl(qp, req->wqe, &req->sgl);
		err = status != IB_WC_SUCCESS || req->sgl.len != rw->len ||
		      srnic_pkt_scatter(skb, pkt, &req->sgl, offset);
		srnic_sgl_put(&req->sgl);
	}
	/* An ODP page the process lacks: the response in order tells. */
	if (err)
		return false;
	__set_bit(bit, req->read_kept);
	req->read_kept_count++;
	if (srnic_psn_cmp(pkt->psn, req->read_kept_high) >= 0)
		req->read_kept_high = srnic_psn_add(pkt->psn, 1);
	srnic_qp_count(qp, SRNIC_CNT_RX_READ_KEPT);
	if (req->read_kept_count >= SRNIC_REQ_SACK_THRESHOLD &&
	    srnic_psn_cmp(req->read_asked_to, expect) <= 0)
		srnic_req_read_ask(qp, head, hw, expect);
	return true;
}

/*
 * The responses from @read_psn on that were kept: passed over, the READ's
 * offset following. Returns whether the READ's last response was one.
 */
static bool srnic_req_read_pass_kept(struct srnic_qp *qp,
				     const struct srnic_req_wqe *rw)
{
	struct srnic_req *req = &qp->req;
	u32 mtu = srnic_qp_mtu(qp);

	while (req->read_kept_count &&
	       __test_and_clear_bit(req->read_psn & (SRNIC_SR_WINDOW - 1),
				    req->read_kept)) {
		req->read_kept_count--;
		if (req->read_psn == rw->last_psn) {
			req->read_offset = rw->len;
			req->read_psn = srnic_psn_add(req->read_psn, 1);
			return true;
		}
		req->read_offset += mtu;
		req->read_psn = srnic_psn_add(req->read_psn, 1);
	}
	return false;
}

/*
 * The oldest READ completed in order, or an ACK was held: the WQEs after
 * it that responses kept of later READs or the ACK held acknowledge
 * complete, READs whose responses were all kept among them, and the
 * first READ that misses some asks for them if it holds any kept beyond
 * them or the ACK held covers them (lost: one path keeps order).
 */
static void srnic_req_read_advance(struct srnic_qp *qp)
{
	struct srnic_req *req = &qp->req;

	while (srnic_req_outstanding(qp) &&
	       READ_ONCE(qp->state) != IB_QPS_ERR) {
		u32 index = srnic_req_head(qp);
		struct srnic_req_wqe *rw = srnic_req_wqe_at(qp, index);
		bool held;

		if (req->ack_held &&
		    srnic_psn_cmp(req->ack_held_psn, rw->first_psn) < 0)
			req->ack_held = false;	/* everything it covers done */
		held = req->ack_held;
		if ((!req->read_kept_count && !held) ||
		    rw->status != IB_WC_SUCCESS ||
		    srnic_psn_cmp(rw->first_psn, req->send_psn) >= 0)
			return;
		if (!srnic_wr_is_rd_atomic(rw->opcode) || rw->read_done) {
			/* A later READ was answered, or the ACK covers it. */
			u32 to = rw->last_psn;

			if (!req->read_kept_count &&
			    srnic_psn_cmp(to, req->ack_held_psn) > 0)
				to = req->ack_held_psn;
			srnic_req_ack(qp, to);
			if (srnic_req_head(qp) == index)
				return;
			continue;
		}
		if (!srnic_wr_is_read(rw->opcode)) {
			/* An atomic the ACK covers: its answer was lost. */
			if (held && srnic_psn_cmp(req->read_asked_to,
						  rw->first_psn) <= 0)
				srnic_req_atomic_ask(qp, index, rw);
			return;
		}
		if (!srnic_req_read_load(qp, index, rw))
			return;
		if (!srnic_req_read_pass_kept(qp, rw)) {
			req->una_psn = req->read_psn;
			if (srnic_psn_cmp(req->read_asked_to,
					  req->read_psn) <= 0 &&
			    (held || (req->read_kept_count &&
				      srnic_psn_cmp(req->read_kept_high,
						    req->read_psn) > 0)))
				srnic_req_read_ask(qp, index, rw,
						   req->read_psn);
			return;
		}
		rw->read_done = true;
		srnic_req_ack(qp, rw->last_psn);
	}
}

/*
 * A READ response for @pkt->psn. Returns false when it is not the one the
 * oldest READ expects (dropped), nor one beyond it that is kept.
 */
static bool srnic_req_read_response(struct srnic_qp *qp, struct sk_buff *skb,
				    const struct srnic_pkt *pkt)
{
	struct srnic_req *req = &qp->req;
	struct srnic_req_wqe *rw;
	bool first, last, range_end;
	u32 index;

	/* Responses of a responder that does selective repeat say so. */
	if (pkt->sr && qp->ibqp.qp_type == IB_QPT_RC)
		req->peer_sr = true;
	if (srnic_req_read_sr(qp) && srnic_req_outstanding(qp) &&
	    READ_ONCE(qp->state) != IB_QPS_ERR &&
	    srnic_req_read_keep(qp, skb, pkt))
		return true;

	/* A response acknowledges every request before its READ. */
	srnic_req_ack(qp, srnic_psn_add(pkt->psn, SRNIC_PSN_MASK));
	/*
	 * Held for an older READ or atomic that misses its answer: this
	 * response's READ, whose responses are not kept, is asked for again
	 * after it.
	 */
	if (req->ack_held)
		srnic_req_ack_hold(req, pkt->psn);
	if (!srnic_req_outstanding(qp) || READ_ONCE(qp->state) == IB_QPS_ERR)
		return false;
	index = srnic_req_head(qp);
	rw = srnic_req_wqe_at(qp, index);
	if (!srnic_wr_is_read(rw->opcode) || rw->status != IB_WC_SUCCESS ||
	    srnic_psn_cmp(pkt->psn, rw->first_psn) < 0 ||
	    srnic_psn_cmp(pkt->psn, rw->last_psn) > 0)
		return false;
	if (!srnic_req_read_load(qp, index, rw))
		return true;

	if (srnic_psn_cmp(pkt->psn, req->read_psn) < 0)
		return false;	/* a duplicate */
	if (pkt->psn != req->read_psn) {
		/* A gap: the responses before this one were lost. */
		if (!req->went_back)
			srnic_req_lost(qp, req->read_psn);
		return false;
	}
	/*
	 * A READ sent again from the middle is answered from FIRST (or ONLY)
	 * again, so only the first response must be a FIRST or ONLY; a range
	 * asked for again ends with a LAST (or ONLY) before the READ's last.
	 */
	first = pkt->psn == rw->first_psn;
	last = pkt->psn == rw->last_psn;
	range_end = !last && srnic_psn_add(pkt->psn, 1) == req->read_asked_to;
	if ((first && !(pkt->flags & SRNIC_OPF_FIRST)) ||
	    (!!(pkt->flags & SRNIC_OPF_LAST) != last && !range_end) ||
	    (range_end && pkt->payload_len != srnic_qp_mtu(qp)) ||
	    req->read_offset + pkt->payload_len > rw->len ||
	    (last && req->read_offset + pkt->payload_len != rw->len) ||
	    (!last && !pkt->payload_len))
		return false;

	if (srnic_pkt_scatter(skb, pkt, &req->read_sgl, req->read_offset)) {
		/* An ODP page of the READ's buffers the process lacks. */
		srnic_sgl_put(&req->read_sgl);
		req->read_sgl_index = 0;
		srnic_req_retire_head(qp, IB_WC_LOC_PROT_ERR);
		return true;
	}
	/*
	 * A response kept while its READ was not the oldest, now come again
	 * in order (sent again by going back N): no longer kept, or its bit
	 * would stand for the PSN SRNIC_SR_WINDOW later.
	 */
	if (req->read_kept_count &&
	    __test_and_clear_bit(pkt->psn & (SRNIC_SR_WINDOW - 1),
				 req->read_kept))
		req->read_kept_count--;
	req->read_offset += pkt->payload_len;
	req->read_psn = srnic_psn_add(req->read_psn, 1);
	if (!last && req->read_kept_count)
		last = srnic_req_read_pass_kept(qp, rw);
	req->una_psn = req->read_psn;
	srnic_req_rtt_end(qp, pkt->psn);
	if (last) {
		rw->read_done = true;
		srnic_req_ack(qp, rw->last_psn);
		srnic_req_read_advance(qp);
		return true;
	}
	/* A range asked for came whole, and more is missing above. */
	if (req->read_kept_count &&
	    srnic_psn_cmp(req->read_asked_to, req->read_psn) <= 0 &&
	    srnic_psn_cmp(req->read_kept_high, req->read_psn) > 0)
		srnic_req_read_ask(qp, index, rw, req->read_psn);
	srnic_req_progress(qp);
	return true;
}

/*
 * The ATOMIC_ACKNOWLEDGE of the oldest WQE, an atomic: its original value
 * goes into the atomic's local SGE. Returns false when it answers no
 * atomic outstanding (dropped).
 */
static bool srnic_req_atomic_response(struct srnic_qp *qp,
				      struct sk_buff *skb,
				      const struct srnic_pkt *pkt)
{
	const struct srnic_aeth *aeth =
		(const struct srnic_aeth *)(skb->data + pkt->aeth);
	u8 syndrome = FIELD_GET(SRNIC_AETH_SMSN_SYNDROME_MASK,
				be32_to_cpu(aeth->smsn));
	struct srnic_req *req = &qp->req;
	struct srnic_req_wqe *rw;
	enum ib_wc_status status;
	u32 index;
	u64 orig;

	/* NAKs come as ACK packets; an ATOMIC_ACKNOWLEDGE is an ACK. */
	if (FIELD_GET(SRNIC_AETH_SYNDROME_TYPE_MASK, syndrome) !=
	    SRNIC_AETH_ACK)
		return false;
	/* It acknowledges every request before its atomic. */
	srnic_req_ack(qp, srnic_psn_add(pkt->psn, SRNIC_PSN_MASK));
	if (!srnic_req_outstanding(qp) || READ_ONCE(qp->state) == IB_QPS_ERR)
		return false;
	index = srnic_req_head(qp);
	rw = srnic_req_wqe_at(qp, index);
	if (!srnic_wr_is_atomic(rw->opcode) || rw->status != IB_WC_SUCCESS ||
	    rw->read_done || pkt->psn != rw->first_psn)
		return false;

	/*
	 * The local SGE again, from the WQE (untrusted, so checked again):
	 * in read_sgl, free while an atomic is the oldest WQE.
	 */
	status = srnic_req_read_sgl_get(qp, index, rw);
	if (status != IB_WC_SUCCESS) {
		srnic_req_retire_head(qp, status);
		return true;
	}
	/* The original value lands in host byte order, as verbs define it. */
	orig = srnic_atmack_get((const struct srnic_atmack *)
				(skb->data + pkt->atmack));
	status = srnic_sgl_scatter(&req->read_sgl, 0, (const u8 *)&orig,
				   sizeof(orig)) ? IB_WC_LOC_PROT_ERR :
						   IB_WC_SUCCESS;
	srnic_sgl_put(&req->read_sgl);
	if (status != IB_WC_SUCCESS) {
		srnic_req_retire_head(qp, status);
		return true;
	}
	rw->read_done = true;
	srnic_req_ack(qp, pkt->psn);
	srnic_req_read_advance(qp);
	return true;
}

/**
 * srnic_req_rx_response() - a response packet for the QP's requester
 * @qp: the QP, called from its task
 * @skb: the packet (srnic_skb_pkt() holds its headers); consumed
 */
void srnic_req_rx_response(struct srnic_qp *qp, struct sk_buff *skb)
{
	const struct srnic_pkt *pkt = srnic_skb_pkt(skb);
	struct srnic_req *req = &qp->req;
	enum ib_qp_state state = READ_ONCE(qp->state);
	bool ok = false;

	if (state != IB_QPS_RTS && state != IB_QPS_SQD)
		goto out;
	/* Only PSNs of outstanding requests can be answered. */
	if (srnic_psn_cmp(pkt->psn, srnic_psn_add(req->una_psn,
						  SRNIC_PSN_MASK)) < 0 ||
	    srnic_psn_cmp(pkt->psn, req->next_psn) >= 0)
		goto out;

	if (pkt->flags & SRNIC_OPF_READ) {
		ok = srnic_req_read_response(qp, skb, pkt);
	} else if ((pkt->opcode & SRNIC_OPCODE_OP_MASK) ==
		   SRNIC_OP_ATOMIC_ACK) {
		/* The transport (RC or XRC) is the QP's: srnic_rx_packet(). */
		ok = srnic_req_atomic_response(qp, skb, pkt);
	} else if ((pkt->opcode & SRNIC_OPCODE_OP_MASK) == SRNIC_OP_ACK) {
		const struct srnic_aeth *aeth =
			(const struct srnic_aeth *)(skb->data + pkt->aeth);

		srnic_req_aeth(qp, pkt->psn, be32_to_cpu(aeth->smsn),
			       pkt->sr ? pkt->sr_run : 0);
		ok = true;
	}
out:
	if (!ok)
		srnic_qp_count(qp, SRNIC_CNT_RX_DROP_UNEXPECTED);
	consume_skb(skb);
}

/* ---- The engine's entry points ---------------------------------------- */

/* The local ACK timer fired: send again from the oldest unacknowledged. */
static void srnic_req_timeout(struct srnic_qp *qp)
{
	struct srnic_req *req = &qp->req;
	struct srnic_req_wqe *head;

	WRITE_ONCE(req->timed_out, false);
	if (!srnic_req_outstanding(qp) || req->rnr_waiting)
		return;
	trace_srnic_ack_timeout(&qp->ibqp, req->una_psn, req->retries_left);
	srnic_qp_count(qp, SRNIC_CNT_TIMEOUTS);
	if (!req->retries_left) {
		srnic_req_fail_head(qp, IB_WC_RETRY_EXC_ERR);
		return;
	}
	req->retries_left--;
	head = srnic_req_wqe_at(qp, srnic_req_head(qp));
	if (req->recovering &&
	    !(srnic_wr_is_rd_atomic(head->opcode) && !head->read_done)) {
		/*
		 * Selective repeat: what the responder did not report kept,
		 * up to the last PSN sent, is lost; the rest it has. (READ
		 * responses missing at the head go back N.)
		 */
		if (srnic_psn_cmp(req->send_psn, req->sack_high) > 0)
			req->sack_high = req->send_psn;
		srnic_req_pass_from_una(req, true);
		req->resend_ready = true;
		req->probe_passes = SRNIC_REQ_PROBE_PASSES;
		req->rtt_sampling = false;	/* Karn's rule */
		req->cwnd = max_t(u32, req->cwnd / 2, SRNIC_REQ_MIN_WINDOW);
	} else {
		srnic_req_lost(qp, req->una_psn);
		/* The responder's answer to the oldest tells what arrived. */
		req->probing = req->peer_sr &&
			       !srnic_wr_is_rd_atomic(head->opcode);
	}
	srnic_req_arm_timer(qp);
}

/**
 * srnic_req_wire_run() - send what the requester may send
 * @qp: a QP with a wire destination, called from its task
 * @budget: packets to send at most
 *
 * Return: true if it stopped for the budget with more to send.
 */
bool srnic_req_wire_run(struct srnic_qp *qp, unsigned int budget)
{
	struct srnic_req *req = &qp->req;
	enum ib_qp_state state = READ_ONCE(qp->state);
	struct srnic_tx_batch batch = {};
	bool sent = false;

	if (state != IB_QPS_RTS && state != IB_QPS_SQD)
		return false;
	if (READ_ONCE(req->timed_out))
		srnic_req_timeout(qp);
	if (req->rnr_waiting) {
		if (!srnic_req_rnr_wait_over(qp))
			return false;
		srnic_req_arm_timer(qp);
	}
	if (!srnic_rate_begin_run(qp))
		return false;
	if (srnic_req_resend_pending(qp)) {
		unsigned int n = srnic_req_resend(qp, budget);

		budget -= n;
		sent |= n;
		if (req->tx_blocked || req->rate.waiting)
			goto flush;
	}

	while (budget && READ_ONCE(qp->state) == state) {
		struct srnic_req_wqe *rw;
		unsigned int n;

		/*
		 * A WQE that failed locally, or a local operation, completes
		 * when its turn comes.
		 */
		if (srnic_req_outstanding(qp)) {
			rw = srnic_req_wqe_at(qp, srnic_req_head(qp));
			if (rw->status != IB_WC_SUCCESS) {
				srnic_req_flush(qp, &batch);
				srnic_req_retire_head(qp, rw->status);
				return false;
			}
			if (rw->local) {
				if (!srnic_req_retire_head(qp, IB_WC_SUCCESS)) {
					srnic_req_flush(qp, &batch);
					return false;
				}
				continue;
			}
		}
		if (req->send_index == req->next_index &&
		    (state != IB_QPS_RTS || !srnic_req_take(qp)))
			break;
		rw = srnic_req_wqe_at(qp, req->send_index);
		if (rw->status != IB_WC_SUCCESS) {
			req->send_index = req->next_index;
			continue;
		}
		if (rw->local) {	/* nothing to send */
			req->send_index++;
			req->send_psn = srnic_psn_add(rw->last_psn, 1);
			continue;
		}
		n = srnic_req_send_wqe(qp, budget, &batch);
		budget -= n;
		sent |= n;
		if (req->tx_blocked || req->rate.waiting ||
		    (!n && rw->status == IB_WC_SUCCESS))
			break;	/* the way out or the window is full, or paced */
	}
flush:
	srnic_req_flush(qp, &batch);
	if (sent && !timer_pending(&req->timer))
		srnic_req_arm_timer(qp);
	if (req->tx_blocked) {
		/* Again at the next poll or response, not right now. */
		req->tx_blocked = false;
		return false;
	}
	return !budget;
}

/**
 * srnic_req_wire_has_work() - would srnic_req_wire_run() do anything?
 * @qp: a QP with a wire destination
 *
 * For the engine's polling: lockless, approximate.
 */
bool srnic_req_wire_has_work(struct srnic_qp *qp)
{
	struct srnic_req *req = &qp->req;
	enum ib_qp_state state = READ_ONCE(qp->state);

	if (state != IB_QPS_RTS && state != IB_QPS_SQD)
		return false;
	if (READ_ONCE(req->timed_out))
		return true;
	if (req->rnr_waiting || req->rate.waiting)
		return false;
	if (srnic_req_resend_pending(qp))
		return true;
	if (req->send_index != req->next_index)
		return srnic_psn_cmp(req->send_psn,
				     srnic_psn_add(req->una_psn, req->cwnd)) < 0;
	return state == IB_QPS_RTS && srnic_req_may_take(qp);
}

/**
 * srnic_req_wire_waiting() - will an ACK or a timer run the requester?
 * @qp: a QP with a wire destination, from its task
 *
 * True while requests are outstanding and a response or the local ACK
 * timer (or the RNR timer) is sure to come.
 */
bool srnic_req_wire_waiting(struct srnic_qp *qp)
{
	enum ib_qp_state state = READ_ONCE(qp->state);

	if (state != IB_QPS_RTS && state != IB_QPS_SQD)
		return false;
	if (qp->req.rnr_waiting || qp->req.rate.waiting)
		return true;
	return srnic_req_outstanding(qp) && qp->attrs.timeout &&
	       timer_pending(&qp->req.timer);
}

/**
 * srnic_req_start() - the QP enters RTS from RTR: start at sq_psn
 * @qp: the QP; state_lock held, the requester not running
 */
void srnic_req_start(struct srnic_qp *qp)
{
	struct srnic_req *req = &qp->req;

	req->next_psn = qp->attrs.sq_psn;
	req->capture_psn = qp->attrs.sq_psn;
	req->send_psn = qp->attrs.sq_psn;
	req->una_psn = qp->attrs.sq_psn;
	req->high_psn = qp->attrs.sq_psn;
	req->rtt_sampling = false;
	req->srtt_ns = 0;
	req->rttvar_ns = 0;
	req->cwnd = SRNIC_REQ_WINDOW;
	req->next_index = qp->sq.consumer;
	req->send_index = qp->sq.consumer;
	req->reads = 0;
	req->retries_left = qp->attrs.retry_cnt;
	req->rnr_retries_left = qp->attrs.rnr_retry;
	req->went_back = false;
	req->probing = false;
	req->peer_sr = false;
	srnic_req_recovery_end(qp);
	WRITE_ONCE(req->timed_out, false);
	srnic_rate_start(qp);
}

/**
 * srnic_req_reset() - drop the requester's wire state
 * @qp: the QP, in error or reset; its task or the task stopped
 */
void srnic_req_reset(struct srnic_qp *qp)
{
	struct srnic_req *req = &qp->req;

	timer_delete(&req->timer);
	srnic_sgl_put(&req->sgl);
	srnic_sgl_put(&req->read_sgl);
	req->sgl_index = 0;
	req->read_sgl_index = 0;
	req->reads = 0;
	req->next_index = READ_ONCE(qp->sq.consumer);
	req->send_index = req->next_index;
	srnic_req_recovery_end(qp);
	srnic_req_read_kept_clear(req);
	WRITE_ONCE(req->timed_out, false);
}

/**
 * srnic_req_put_mrs() - drop the MR references the requester caches
 * @qp: the QP, from its task at the end of a run, or the task stopped
 *
 * The local SGLs of the WQE being sent and of the oldest READ are looked
 * up again when next needed (a WQE whose MR went meanwhile completes with
 * IB_WC_LOC_PROT_ERR). No reference outlives the run that took it, so
 * srnic_dereg_mr() never waits for the peer: retries, RNR waits and a
 * QP left in the error state hold none.
 */
void srnic_req_put_mrs(struct srnic_qp *qp)
{
	struct srnic_req *req = &qp->req;

	srnic_sgl_put(&req->sgl);
	req->sgl_index = 0;
	/* read_sgl_index stays: it also says which READ read_psn follows. */
	srnic_sgl_put(&req->read_sgl);
}

/**
 * srnic_req_init() - requester state of a new QP
 * @qp: the QP, its SQ set up
 */
int srnic_req_init(struct srnic_qp *qp)
{
	timer_setup(&qp->req.timer, srnic_req_timer_fn, 0);
	srnic_rate_init(qp);
	qp->req.wqes = kvcalloc(qp->sq.ring.num_entries,
				sizeof(*qp->req.wqes), GFP_KERNEL);
	return qp->req.wqes ? 0 : -ENOMEM;
}

/**
 * srnic_req_cleanup() - undo srnic_req_init(); the task is stopped
 * @qp: the QP
 */
void srnic_req_cleanup(struct srnic_qp *qp)
{
	timer_delete_sync(&qp->req.timer);
	srnic_rate_cleanup(qp);
	srnic_req_reset(qp);
	kvfree(qp->req.wqes);
	qp->req.wqes = NULL;
}
