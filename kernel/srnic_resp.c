// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: the RC responder for requests from the wire (IBTA 9.7.4 and
 * 9.7.5), run in the QP's engine task.
 *
 * Requests are executed in PSN order: the one at the expected PSN (epsn)
 * is checked (opcode sequence, lengths, access, R_Key and bounds through
 * srnic_mr_lookup()) and executed; one ahead of it gets a PSN sequence
 * error NAK (once until epsn arrives) and is dropped, or, from a requester
 * that offers selective repeat, is kept and executed when epsn arrives
 * (see "Selective repeat" below); one behind it is a
 * duplicate: SENDs and WRITEs are acknowledged again without being
 * executed again, READs are executed again from the PSN asked for (a READ
 * has no side effect), atomics are answered with the original value saved
 * when they executed, never executed twice (an ATOMIC WRITE, answered by
 * an ACK, is ACKed again as a WRITE is). A SEND or WRITE with immediate
 * data that finds the receive queue empty gets an RNR NAK with the QP's
 * min_rnr_timer, before any byte is written. Errors that IBTA makes fatal
 * (invalid request, remote access, remote operational error) move the QP
 * to the error state and are then NAKed (srnic_resp_to_error()).
 *
 * ACKs are coalesced: a request with AckReq only marks an ACK as owed, and
 * one ACK of the last PSN executed goes out when the batch of received
 * packets ends, or before anything else the responder sends.
 *
 * A UC QP (srnic_qp_acked() false) receives SENDs and WRITEs the same way
 * but never answers (IBTA 9.7.6, rxe's check_psn for UC): a packet that is
 * not the expected PSN, or out of the message's opcode sequence, drops the
 * message in progress (its receive WQE stays for the next message, without
 * a completion) and everything up to the next FIRST or ONLY, where the PSN
 * resynchronises. A message with a remote error (R_Key, length, a SEND
 * longer than its receive WQE) or no receive WQE is dropped the same way,
 * counted, and the QP carries on; errors of the receive WQE itself (SGEs,
 * MRs) move the QP to the error state as on RC.
 *
 * An XRC_TGT QP responds as RC does, with XRC opcodes, but has no receive
 * queue, PD or CQ of its own: each request's XRCETH names an XRC SRQ of
 * the QP's XRC domain (looked up for that packet, resp->xsrq), whose WQEs
 * receive SENDs, whose PD checks every key and whose CQ gets the receive
 * completions. A request naming no SRQ of the domain, or another SRQ than
 * the message it continues, is an invalid request.
 */

#include <linux/highmem.h>
#include <linux/module.h>

#include "srnic.h"
#include "srnic_trace.h"
#include "srnic_wire.h"

enum srnic_resp_verdict {
	SRNIC_RESP_OK,		/* executed: epsn moves on */
	SRNIC_RESP_RNR,		/* RNR NAK sent: the requester retries */
	SRNIC_RESP_FATAL,	/* in the error state, NAK sent */
	SRNIC_RESP_DROP,	/* UC: the message is dropped, the QP goes on */
};

/* ---- The responder's rules, for the wire and local delivery ------------ */

/**
 * srnic_resp_op_allowed() - does a responder QP enable an operation?
 * @qp: the responder
 * @access: what the operation needs of the QP's access flags
 *	    (IB_QP_ACCESS_FLAGS): IB_ACCESS_REMOTE_WRITE, _READ or _ATOMIC
 * @slots: for an operation that needs a responder resource (atomics, ATOMIC
 *	   WRITE), set to the QP's max_dest_rd_atomic, read once; NULL for
 *	   one that needs none
 *
 * A request for an operation the QP does not enable, or an atomic with no
 * responder resource to remember it by, is an invalid request
 * (SRNIC_NAK_INVALID_REQUEST, IB_WC_REM_INV_REQ_ERR at the requester; UC
 * drops the message), as rxe's check_op_valid() treats it; a remote
 * access error is the MR's and the R_Key's (srnic_rkey_lookup(): the
 * memory's access rights, bounds, protection domain). The wire responder
 * and local delivery both ask here.
 */
bool srnic_resp_op_allowed(struct srnic_qp *qp, int access, u8 *slots)
{
	if (!(READ_ONCE(qp->attrs.access_flags) & access))
		return false;
	if (!slots)
		return true;
	*slots = READ_ONCE(qp->attrs.max_dest_rd_atomic);
	return *slots;
}

/**
 * srnic_atomic_nak() - the NAK of an atomic the memory refused
 * @err: the error of srnic_atomic_execute() or srnic_atomic_write_execute()
 *
 * -EINVAL (an address not 8-byte aligned, or not in the MR's pages) is an
 * invalid request, an ODP fault a remote access error.
 */
u8 srnic_atomic_nak(int err)
{
	return err == -EINVAL ? SRNIC_NAK_INVALID_REQUEST :
				SRNIC_NAK_REMOTE_ACCESS_ERROR;
}

/**
 * srnic_nak_wc_status() - the requester's completion status for a NAK
 * @nak: the responder's NAK code (enum srnic_nak_code), not a PSN sequence
 *	 error (the requester retransmits for that)
 *
 * The wire requester completes a WQE NAKed with @nak so, and local
 * delivery reports its responder's refusals the same way.
 */
enum ib_wc_status srnic_nak_wc_status(u8 nak)
{
	switch (nak) {
	case SRNIC_NAK_REMOTE_ACCESS_ERROR:
		return IB_WC_REM_ACCESS_ERR;
	case SRNIC_NAK_REMOTE_OPERATIONAL_ERROR:
		return IB_WC_REM_OP_ERR;
	default:
		return IB_WC_REM_INV_REQ_ERR;
	}
}

/**
 * srnic_resp_error_event() - the affiliated event of a responder that
 *	entered the error state for a request
 * @qp: the responder
 * @status: the requester's completion status for the request
 *	    (srnic_nak_wc_status() of the NAK)
 *
 * IBTA 11.6.3.1: an R_Key or range violation is a local access violation
 * (IB_EVENT_QP_ACCESS_ERR), an invalid request an invalid request error
 * (IB_EVENT_QP_REQ_ERR), the rest (the receive WQE's own errors) a
 * catastrophic error (IB_EVENT_QP_FATAL), which is also what a UC
 * responder reports, since it NAKs nothing.
 */
enum ib_event_type srnic_resp_error_event(struct srnic_qp *qp,
					  enum ib_wc_status status)
{
	if (!srnic_qp_acked(qp))
		return IB_EVENT_QP_FATAL;
	switch (status) {
	case IB_WC_REM_ACCESS_ERR:
		return IB_EVENT_QP_ACCESS_ERR;
	case IB_WC_REM_INV_REQ_ERR:
		return IB_EVENT_QP_REQ_ERR;
	default:
		return IB_EVENT_QP_FATAL;
	}
}

/* A response opcode of the QP's transport (XRC_TGT: XRC, else RC). */
static u8 srnic_resp_opcode(struct srnic_qp *qp, u8 op)
{
	return SRNIC_OPCODE(srnic_qp_is_xrc(qp) ? SRNIC_TRANSPORT_XRC :
			    SRNIC_TRANSPORT_RC, op);
}

/*
 * An ACK or NAK; @sr_run, if not 0, makes it a selective NAK's. An ACK
 * to a requester that offers selective repeat says this responder does it
 * too (the requester may then spray, srnic_req.c).
 */
static void srnic_resp_send_aeth(struct srnic_qp *qp, u32 psn, u32 aeth,
				 u8 sr_run)
{
	bool ack = FIELD_GET(SRNIC_AETH_SYNDROME_TYPE_MASK,
			     FIELD_GET(SRNIC_AETH_SMSN_SYNDROME_MASK, aeth)) ==
		   SRNIC_AETH_ACK;
	struct srnic_txd txd = {
		.opcode = srnic_resp_opcode(qp, SRNIC_OP_ACK),
		.psn = psn,
		.aeth = aeth,
		.sr = sr_run || (ack && qp->resp.sr_peer),
		.sr_run = sr_run,
	};

	srnic_tx_build(qp, &txd, NULL);
}

/* ---- Selective repeat -------------------------------------------------- */

/*
 * A requester that sets SRNIC_BTH_APSN_SR on its requests (srnic's, with
 * selective repeat on) takes selective NAKs. Its requests that arrive
 * beyond epsn, within SRNIC_SR_WINDOW, are kept instead of dropped, and
 * reported in runs of consecutive PSNs: a selective NAK is a PSN sequence
 * error NAK of epsn (so an ACK of what is before it) whose AETH MSN field
 * holds the run's first PSN and whose BTH holds its length
 * (SRNIC_BTH_APSN_SR_RUN_MASK). The requester sends again only the PSNs
 * missing below the highest reported (srnic_req.c). When epsn arrives,
 * the kept requests behind it are executed in order, as if they arrived
 * then (srnic_resp_ooo_next()): execution stays in PSN order, so nothing
 * else in the responder knows of them. Requests from other requesters
 * (rxe, hardware) get IBTA's go-back-N, as do those beyond the window or
 * the device's SRNIC_OOO_MAX_HELD.
 */

/* Send the selective NAK owed for the run kept since the last one. */
static void srnic_resp_flush_sack(struct srnic_qp *qp)
{
	struct srnic_resp *resp = &qp->resp;

	if (!resp->sack_len)
		return;
	/* Executed meanwhile: the ACK of the drain tells (ooo_next()). */
	if (srnic_psn_cmp(srnic_psn_add(resp->sack_start, resp->sack_len),
			  resp->epsn) <= 0) {
		resp->sack_len = 0;
		return;
	}
	srnic_qp_count(qp, SRNIC_CNT_TX_NAK_SELECTIVE);
	srnic_resp_send_aeth(qp, resp->epsn,
			     srnic_aeth_smsn(SRNIC_AETH_NAK,
					     SRNIC_NAK_PSN_SEQUENCE_ERROR,
					     resp->sack_start), resp->sack_len);
	resp->sack_len = 0;
}

/* Take a kept request out of its slot. */
static struct sk_buff *srnic_resp_ooo_take(struct srnic_qp *qp,
					   struct sk_buff **slot)
{
	struct sk_buff *skb = *slot;

	*slot = NULL;
	qp->resp.ooo_count--;
	atomic_dec(&to_srnic_dev(qp->ibqp.device)->ooo_held);
	return skb;
}

/* Drop one kept request. */
static void srnic_resp_ooo_free(struct srnic_qp *qp, struct sk_buff **slot)
{
	kfree_skb(srnic_resp_ooo_take(qp, slot));
}

/* Drop every kept request (the QP resets, or goes to error). */
static void srnic_resp_ooo_purge(struct srnic_qp *qp)
{
	struct srnic_resp *resp = &qp->resp;
	unsigned int i;

	resp->sack_len = 0;
	if (!resp->ooo)
		return;
	for (i = 0; i < SRNIC_SR_WINDOW && resp->ooo_count; i++)
		if (resp->ooo[i])
			srnic_resp_ooo_free(qp, &resp->ooo[i]);
	kfree(resp->ooo);
	resp->ooo = NULL;
}

/*
 * Keep @skb, a request beyond epsn from a requester that offers selective
 * repeat (resp.sr_peer), for when epsn comes. Returns false if it cannot
 * be kept (go-back-N then); true if it was kept, or dropped as a copy of
 * one kept.
 */
static bool srnic_resp_ooo_keep(struct srnic_qp *qp, struct sk_buff *skb,
				const struct srnic_pkt *pkt)
{
	struct srnic_dev *sdev = to_srnic_dev(qp->ibqp.device);
	struct srnic_resp *resp = &qp->resp;
	struct sk_buff **slot;
	bool copy = false;

	if (((pkt->psn - resp->epsn) & SRNIC_PSN_MASK) >= SRNIC_SR_WINDOW)
		return false;
	if (!resp->ooo) {
		resp->ooo = kcalloc(SRNIC_SR_WINDOW, sizeof(*resp->ooo),
				    GFP_ATOMIC | __GFP_NOWARN);
		if (!resp->ooo)
			return false;
	}
	slot = &resp->ooo[pkt->psn & (SRNIC_SR_WINDOW - 1)];
	if (*slot) {
		if (srnic_skb_pkt(*slot)->psn == pkt->psn) {
			/*
			 * A copy of one kept, reported again: the requester
			 * sends one after a timeout to learn that the
			 * expected PSN is still missing.
			 */
			srnic_qp_count(qp, SRNIC_CNT_RX_DUPLICATE);
			kfree_skb(skb);
			copy = true;
		} else {
			srnic_resp_ooo_free(qp, slot);	/* stale */
		}
	}
	if (!copy) {
		if (atomic_inc_return(&sdev->ooo_held) > SRNIC_OOO_MAX_HELD) {
			atomic_dec(&sdev->ooo_held);
			return false;
		}
		*slot = skb;
		resp->ooo_count++;
		srnic_qp_count(qp, SRNIC_CNT_RX_OOO_KEPT);
	}
	if (resp->sack_len && resp->sack_len < SRNIC_SR_RUN_MAX &&
	    pkt->psn == srnic_psn_add(resp->sack_start, resp->sack_len)) {
		resp->sack_len++;
		return true;
	}
	srnic_resp_flush_sack(qp);
	resp->sack_start = pkt->psn;
	resp->sack_len = 1;
	return true;
}

/**
 * srnic_resp_ooo_next() - the kept request at the expected PSN, if any
 * @qp: the QP, from its task
 *
 * Return: the request, to execute now (srnic_resp_rx_request()), or NULL.
 */
struct sk_buff *srnic_resp_ooo_next(struct srnic_qp *qp)
{
	struct srnic_resp *resp = &qp->resp;
	struct sk_buff **slot;
	struct sk_buff *skb;

	if (!resp->ooo_count)
		return NULL;
	slot = &resp->ooo[resp->epsn & (SRNIC_SR_WINDOW - 1)];
	skb = *slot;
	if (!skb)
		return NULL;
	if (srnic_skb_pkt(skb)->psn != resp->epsn) {
		srnic_resp_ooo_free(qp, slot);	/* stale: behind epsn */
		return NULL;
	}
	srnic_resp_ooo_take(qp, slot);
	/*
	 * The requester waits for this progress, whether or not the request
	 * asks for an ACK (one per batch, coalesced as any).
	 */
	resp->ack_pending = true;
	if (!resp->ooo_count) {
		kfree(resp->ooo);
		resp->ooo = NULL;
	}
	return skb;
}

/**
 * srnic_resp_ooo_ready() - is the request at the expected PSN kept?
 * @qp: the QP, from its task
 */
bool srnic_resp_ooo_ready(struct srnic_qp *qp)
{
	struct srnic_resp *resp = &qp->resp;

	return resp->ooo_count &&
	       resp->ooo[resp->epsn & (SRNIC_SR_WINDOW - 1)];
}

/**
 * srnic_resp_flush_ack() - send the ACK and the selective NAK owed, if any
 * @qp: the QP, from its task
 */
void srnic_resp_flush_ack(struct srnic_qp *qp)
{
	struct srnic_resp *resp = &qp->resp;

	if (resp->ack_pending) {
		resp->ack_pending = false;
		srnic_resp_send_aeth(qp,
				     srnic_psn_add(resp->epsn, SRNIC_PSN_MASK),
				     srnic_aeth_smsn(SRNIC_AETH_ACK,
						     SRNIC_AETH_CREDITS_UNLIMITED,
						     resp->msn), 0);
	}
	srnic_resp_flush_sack(qp);
}

static void srnic_resp_nak(struct srnic_qp *qp, u32 psn, u8 type, u8 value)
{
	srnic_resp_flush_ack(qp);
	srnic_qp_count(qp, type == SRNIC_AETH_RNR_NAK ? SRNIC_CNT_TX_NAK_RNR :
		       value == SRNIC_NAK_PSN_SEQUENCE_ERROR ?
		       SRNIC_CNT_TX_NAK_SEQ : SRNIC_CNT_TX_NAK_OTHER);
	srnic_resp_send_aeth(qp, psn, srnic_aeth_smsn(type, value, qp->resp.msn), 0);
	trace_srnic_nak_send(&qp->ibqp, psn, type, value);
}

/*
 * The XRC SRQ the receive WQE held came from (XRC_TGT), referenced, or NULL
 * (other QPs, or the SRQ is gone: its CQ may be too).
 */
static struct srnic_srq *srnic_resp_rwqe_srq(struct srnic_qp *qp)
{
	struct srnic_resp *resp = &qp->resp;

	if (qp->ibqp.qp_type != IB_QPT_XRC_TGT)
		return NULL;
	return srnic_xrc_srq_get(qp, resp->xsrqn);
}

/*
 * Give up the current receive WQE for a completion: fill @cqe's fields
 * that come from the WQE and the QP, and return the CQ it goes to, with
 * *@xsrq the XRC SRQ the WQE came from (referenced; the caller puts it),
 * or NULL when the WQE's XRC SRQ was destroyed meanwhile (its CQ may be
 * gone with it: the completion is dropped).
 */
static struct srnic_cq *srnic_resp_rwqe_done(struct srnic_qp *qp,
					     struct srnic_cqe *cqe,
					     struct srnic_srq **xsrq)
{
	struct srnic_resp *resp = &qp->resp;

	resp->have_rwqe = false;
	cqe->wr_id = resp->rwqe->wr_id;
	cqe->qp_num = qp->ibqp.qp_num;
	cqe->src_qp = qp->attrs.dest_qp_num;
	*xsrq = srnic_resp_rwqe_srq(qp);
	if (qp->ibqp.qp_type == IB_QPT_XRC_TGT && !*xsrq)
		return NULL;
	return srnic_resp_cq(qp, *xsrq);
}

/* Post the receive completion of the current receive WQE. */
static void srnic_resp_complete(struct srnic_qp *qp, enum ib_wc_status status,
				u8 opcode, u32 byte_len,
				const struct srnic_pkt *pkt,
				const struct sk_buff *skb)
{
	struct srnic_srq *xsrq;
	struct srnic_cq *cq;
	int err;
	struct srnic_cqe cqe = {
		.status = status,
		.opcode = opcode,
		.byte_len = status == IB_WC_SUCCESS ? byte_len : 0,
	};

	lockdep_assert_not_held(&qp->state_lock);

	cq = srnic_resp_rwqe_done(qp, &cqe, &xsrq);
	if (!cq)
		return;
	if (pkt && pkt->immdt) {
		cqe.imm_data = ((const struct srnic_immdt *)
				(skb->data + pkt->immdt))->imm;
		cqe.wc_flags = SRNIC_CQE_WITH_IMM;
	} else if (pkt && pkt->ieth) {
		cqe.invalidated_rkey = srnic_ieth_get((const struct srnic_ieth *)
						      (skb->data + pkt->ieth));
		cqe.wc_flags = SRNIC_CQE_WITH_INV;
	}
	if (qp->resp.tm.wc_opcode)
		srnic_tm_fill_cqe(&qp->resp.tm, &cqe);
	err = srnic_cq_post(cq, &cqe, pkt && pkt->solicited);
	if (xsrq)
		srnic_srq_put(xsrq);
	if (err)
		srnic_qp_to_error(qp, 0);	/* a lost completion */
}

/* End the current message, whatever happened to it. */
static void srnic_resp_end_message(struct srnic_qp *qp)
{
	struct srnic_resp *resp = &qp->resp;

	atomic_inc(&qp->rx_msgs);
	srnic_sgl_put(&resp->sgl);
	if (resp->write_mr)
		srnic_mr_put(resp->write_mr);
	resp->write_mr = NULL;
	resp->msg = SRNIC_RESP_IDLE;
	resp->offset = 0;
	resp->tm.wc_opcode = 0;
}

/*
 * Enter the error state, then send the NAK of @value for @psn (with @nak),
 * as one step under state_lock: the receive WQE held completes with
 * @recv_status first (if its CQ is still there; with IB_WC_SUCCESS it
 * stays held, for srnic_resp_reset()'s flush). A requester that sees the
 * NAK's error completion and then queries or modifies this QP finds it in
 * the error state (not in RTS, about to be moved to error behind its back,
 * undoing a RESET made meanwhile); and no request is taken after the NAK
 * (the receive path takes none in the error state). A QP reset meanwhile
 * (its attributes cleared, its WQEs discarded) does neither. Nothing is
 * left for the caller but the affiliated event: a QP the consumer reset
 * and connected again once it saw the error is not touched again.
 *
 * Return: false when the QP was reset meanwhile (no event to report).
 */
static bool srnic_resp_to_error(struct srnic_qp *qp,
				enum ib_wc_status recv_status, bool nak,
				u32 psn, u8 value)
{
	struct srnic_srq *xsrq = NULL;
	struct srnic_cq *cq = NULL;
	struct srnic_cqe cqe = {
		.status = recv_status,
		.opcode = IB_WC_RECV,
	};
	bool reset;

	if (qp->resp.have_rwqe && recv_status != IB_WC_SUCCESS)
		cq = srnic_resp_rwqe_done(qp, &cqe, &xsrq);
	srnic_qp_change_begin(qp);
	reset = qp->state == IB_QPS_RESET;
	if (!reset) {
		/* A lost completion: the QP goes to error all the same. */
		if (cq)
			srnic_cq_post(cq, &cqe, false);
		srnic_qp_to_error_locked(qp);
	}
	if (!reset && nak)
		srnic_resp_nak(qp, psn, SRNIC_AETH_NAK, value);
	srnic_qp_change_end(qp);
	if (xsrq)
		srnic_srq_put(xsrq);
	return !reset;
}

/*
 * A fatal error: fail the receive WQE held, go to the error state, NAK
 * (srnic_resp_to_error()). The caller reports resp->fatal_event unless it
 * is 0 (the QP was reset meanwhile).
 */
static enum srnic_resp_verdict srnic_resp_fatal(struct srnic_qp *qp,
						const struct srnic_pkt *pkt,
						u8 nak,
						enum ib_wc_status recv_status)
{
	struct srnic_resp *resp = &qp->resp;

	/*
	 * UC: a remote error drops the message silently, and so does a SEND
	 * longer than its receive WQE (IBTA's unreliable services, rxe's
	 * RESPST_ERR_LENGTH: the WQE stays for the next message, the QP
	 * carries on); the receive WQE's own errors (bad SGEs, an MR that is
	 * gone) are fatal as on RC, without the NAK (and with
	 * IB_EVENT_QP_FATAL: srnic_resp_error_event()).
	 */
	if (!srnic_qp_acked(qp) && nak != SRNIC_NAK_REMOTE_OPERATIONAL_ERROR)
		return SRNIC_RESP_DROP;
	resp->fatal_event = srnic_resp_error_event(qp, srnic_nak_wc_status(nak));
	if (!srnic_resp_to_error(qp, recv_status, srnic_qp_acked(qp), pkt->psn,
				 nak))
		resp->fatal_event = 0;
	srnic_resp_end_message(qp);
	return SRNIC_RESP_FATAL;
}

/*
 * Where the SEND beginning with @pkt lands, for a QP of a tag-matching
 * SRQ: its next receive WQE or a tagged buffer, after the header in the
 * packet's first bytes (srnic_tm_take(); a rendezvous over the wire is
 * for the consumer's software). Returns as srnic_srq_take().
 */
static int srnic_resp_take_tm(struct srnic_qp *qp, struct srnic_srq *srq,
			      const struct sk_buff *skb,
			      const struct srnic_pkt *pkt)
{
	u8 hdr[sizeof(struct srnic_tmh) + sizeof(struct srnic_rvh)];
	u32 len = min_t(u32, pkt->payload_len, sizeof(hdr));

	if (READ_ONCE(qp->state) == IB_QPS_ERR)
		return -ENOENT;
	if (skb_copy_bits(skb, pkt->hdr_len, hdr, len))
		len = 0;
	return srnic_tm_take(qp, srq, hdr, len, false, qp->resp.rwqe,
			     &qp->resp.tm);
}

/*
 * Take a receive WQE for a SEND (@skb: its first packet) or a WRITE with
 * immediate data (@skb NULL).
 */
static enum srnic_resp_verdict srnic_resp_take_rwqe(struct srnic_qp *qp,
						    const struct sk_buff *skb,
						    const struct srnic_pkt *pkt)
{
	struct srnic_srq *tm_srq = skb ? srnic_qp_tm_srq(qp) : NULL;
	struct srnic_resp *resp = &qp->resp;

	if (resp->have_rwqe)
		return SRNIC_RESP_OK;
	if (tm_srq ? srnic_resp_take_tm(qp, tm_srq, skb, pkt) :
	    srnic_resp_rq_take(qp, resp->xsrq, resp->rwqe, 0)) {
		if (!srnic_qp_acked(qp)) {
			srnic_qp_count(qp, SRNIC_CNT_RX_DROP_NO_RECV_WQE);
			return SRNIC_RESP_DROP;
		}
		srnic_resp_nak(qp, pkt->psn, SRNIC_AETH_RNR_NAK,
			       READ_ONCE(qp->attrs.min_rnr_timer));
		/* Its followers are expected to be out of sequence. */
		resp->nak_seq_sent = true;
		return SRNIC_RESP_RNR;
	}
	resp->have_rwqe = true;
	if (resp->rwqe->num_sge > srnic_resp_wq(qp, resp->xsrq)->max_sge)
		return srnic_resp_fatal(qp, pkt,
					SRNIC_NAK_REMOTE_OPERATIONAL_ERROR,
					IB_WC_LOC_QP_OP_ERR);
	return SRNIC_RESP_OK;
}

static enum srnic_resp_verdict srnic_resp_send(struct srnic_qp *qp,
					       struct sk_buff *skb,
					       const struct srnic_pkt *pkt)
{
	struct srnic_dev *sdev = to_srnic_dev(qp->ibqp.device);
	struct srnic_resp *resp = &qp->resp;
	enum srnic_resp_verdict v;
	struct srnic_pkt body;
	u8 skip = 0;

	if (pkt->flags & SRNIC_OPF_FIRST) {
		v = srnic_resp_take_rwqe(qp, skb, pkt);
		if (v != SRNIC_RESP_OK)
			return v;
		resp->msg = SRNIC_RESP_SEND;
		resp->offset = 0;
		/* A tagged buffer takes what follows the eager header. */
		skip = resp->tm.skip;
	}
	if (skip) {
		body = *pkt;
		body.hdr_len += skip;
		body.payload_len -= skip;
		pkt = &body;
	}
	/* Resolved for the first packet, again after srnic_resp_put_mrs(). */
	if (!resp->sgl.len &&
	    srnic_sgl_get(sdev, srnic_resp_pd(qp, resp->xsrq),
			  (const struct srnic_sge *)(resp->rwqe + 1),
			  resp->rwqe->num_sge, IB_ACCESS_LOCAL_WRITE,
			  &resp->sgl) != IB_WC_SUCCESS)
		return srnic_resp_fatal(qp, pkt,
					SRNIC_NAK_REMOTE_OPERATIONAL_ERROR,
					IB_WC_LOC_PROT_ERR);
	if (resp->offset + pkt->payload_len > resp->sgl.len)
		return srnic_resp_fatal(qp, pkt, SRNIC_NAK_INVALID_REQUEST,
					IB_WC_LOC_LEN_ERR);
	if (srnic_pkt_scatter(skb, pkt, &resp->sgl, resp->offset))
		/* An ODP page of the receive buffers the process lacks. */
		return srnic_resp_fatal(qp, pkt,
					SRNIC_NAK_REMOTE_OPERATIONAL_ERROR,
					IB_WC_LOC_PROT_ERR);
	resp->offset += pkt->payload_len;
	/*
	 * SEND with invalidate (IBTA 9.4.1.1.1): the R_Key is invalidated
	 * once the data is placed; one that may not be is an invalid
	 * request (class J, as rxe has it).
	 */
	if (pkt->ieth &&
	    srnic_invalidate_key(qp, srnic_ieth_get((const struct srnic_ieth *)
						   (skb->data + pkt->ieth)),
				true))
		return srnic_resp_fatal(qp, pkt, SRNIC_NAK_INVALID_REQUEST,
					IB_WC_REM_INV_REQ_ERR);
	if (pkt->flags & SRNIC_OPF_LAST) {
		srnic_resp_complete(qp, IB_WC_SUCCESS, IB_WC_RECV,
				    resp->offset, pkt, skb);
		srnic_resp_end_message(qp);
		resp->msn++;
	}
	return SRNIC_RESP_OK;
}

static enum srnic_resp_verdict srnic_resp_write(struct srnic_qp *qp,
						struct sk_buff *skb,
						const struct srnic_pkt *pkt)
{
	struct srnic_resp *resp = &qp->resp;
	enum srnic_resp_verdict v;

	/* An operation the QP does not allow (srnic_resp_op_allowed()). */
	if (!srnic_resp_op_allowed(qp, IB_ACCESS_REMOTE_WRITE, NULL))
		return srnic_resp_fatal(qp, pkt, SRNIC_NAK_INVALID_REQUEST,
					IB_WC_REM_INV_REQ_ERR);
	if (pkt->flags & SRNIC_OPF_FIRST) {
		const struct srnic_reth *reth =
			(const struct srnic_reth *)(skb->data + pkt->reth);
		u64 va = be64_to_cpu(reth->va);
		u32 len = be32_to_cpu(reth->dma_len);

		/* An RNR must come before any byte is written. */
		if (pkt->immdt &&
		    !srnic_recv_wq_has_work(qp, srnic_resp_wq(qp, resp->xsrq))) {
			v = srnic_resp_take_rwqe(qp, NULL, pkt);
			if (v != SRNIC_RESP_OK)
				return v;
		}
		resp->write_mr = NULL;
		resp->write_rkey = be32_to_cpu(reth->rkey);
		resp->write_va = va;
		resp->write_len = len;
		resp->offset = 0;
		resp->msg = SRNIC_RESP_WRITE;
	}
	/* Looked up for the first packet, again after srnic_resp_put_mrs(). */
	if (resp->write_len && !resp->write_mr) {
		struct srnic_mr *mr;

		mr = srnic_rkey_lookup(qp, srnic_resp_pd(qp, resp->xsrq),
				       resp->write_rkey, IB_ACCESS_REMOTE_WRITE,
				       resp->write_va, resp->write_len);
		if (IS_ERR(mr))
			return srnic_resp_fatal(qp, pkt,
						SRNIC_NAK_REMOTE_ACCESS_ERROR,
						IB_WC_REM_ACCESS_ERR);
		resp->write_mr = mr;
	}
	if (resp->offset + pkt->payload_len > resp->write_len ||
	    ((pkt->flags & SRNIC_OPF_LAST) &&
	     resp->offset + pkt->payload_len != resp->write_len))
		return srnic_resp_fatal(qp, pkt, SRNIC_NAK_INVALID_REQUEST,
					IB_WC_LOC_LEN_ERR);
	if (pkt->immdt) {
		v = srnic_resp_take_rwqe(qp, NULL, pkt);
		if (v != SRNIC_RESP_OK)
			return v;	/* nothing of this packet written */
	}
	/* An ODP page the process lacks: as for a bad R_Key. */
	if (pkt->payload_len &&
	    srnic_pkt_copy_to_mr(skb, pkt, resp->write_mr,
				 resp->write_va + resp->offset))
		return srnic_resp_fatal(qp, pkt, SRNIC_NAK_REMOTE_ACCESS_ERROR,
					IB_WC_REM_ACCESS_ERR);
	resp->offset += pkt->payload_len;
	if (pkt->flags & SRNIC_OPF_LAST) {
		if (pkt->immdt)
			srnic_resp_complete(qp, IB_WC_SUCCESS,
					    IB_WC_RECV_RDMA_WITH_IMM,
					    resp->write_len, pkt, skb);
		srnic_resp_end_message(qp);
		resp->msn++;
	}
	return SRNIC_RESP_OK;
}

/*
 * Start the responses of a READ request (a new one, or a duplicate asking
 * again from its PSN). Returns false if it may not be served.
 */
static bool srnic_resp_start_read(struct srnic_qp *qp, struct sk_buff *skb,
				  const struct srnic_pkt *pkt)
{
	const struct srnic_reth *reth =
		(const struct srnic_reth *)(skb->data + pkt->reth);
	struct srnic_resp *resp = &qp->resp;
	u64 va = be64_to_cpu(reth->va);
	u32 len = be32_to_cpu(reth->dma_len);
	u32 mtu = srnic_qp_mtu(qp);
	struct srnic_pd *pd = srnic_resp_pd(qp, resp->xsrq);
	struct srnic_mr *mr = NULL;

	/* A FLUSH: its R_Key checked, answered by one empty response. */
	if (pkt->feth) {
		if (!srnic_flush_check(qp, pd, be32_to_cpu(reth->rkey), va,
				       len,
				       be32_to_cpu(((const struct srnic_feth *)
						    (skb->data +
						     pkt->feth))->bits)))
			return false;
		len = 0;
	} else if (!srnic_resp_op_allowed(qp, IB_ACCESS_REMOTE_READ, NULL)) {
		return false;
	}
	if (len) {
		mr = srnic_rkey_lookup(qp, pd, be32_to_cpu(reth->rkey),
				       IB_ACCESS_REMOTE_READ, va, len);
		if (IS_ERR(mr))
			return false;
	}
	/* ACKs owed go out before the responses. */
	srnic_resp_flush_ack(qp);
	resp->read_mr = mr;
	resp->read_pd = pd;
	resp->read_rkey = be32_to_cpu(reth->rkey);
	resp->read_va = va;
	resp->read_left = len;
	resp->read_psn = pkt->psn;
	resp->read_last_psn = srnic_psn_add(pkt->psn,
					    (len ? DIV_ROUND_UP(len, mtu) : 1) -
					    1);
	resp->read_first = true;
	resp->reading = true;
	return true;
}

/**
 * srnic_flush_check() - may a FLUSH request be answered?
 * @qp: the responder
 * @pd: the PD its keys are checked against
 * @rkey: the request's R_Key
 * @va: the start of its range (level IBV_FLUSH_RANGE)
 * @len: the range's length
 * @feth: its FETH bits: the placement type, the selectivity level
 *
 * The MR must grant the placement type asked for (IB_ACCESS_FLUSH_GLOBAL,
 * _PERSISTENT) over the range, or over any of it for level IBV_FLUSH_MR.
 * What srnic places is globally visible once written, by the CPU's own
 * stores: a global flush has nothing left to do but order them (a full
 * barrier). No MR is persistent (srnic announces no
 * IB_DEVICE_FLUSH_PERSISTENT), so a persistent one is refused.
 *
 * Return: true if it may (answered by one empty READ response), false for
 * a remote access error.
 */
bool srnic_flush_check(struct srnic_qp *qp, struct srnic_pd *pd, u32 rkey,
		       u64 va, u32 len, u32 feth)
{
	u32 type = feth & SRNIC_FETH_PLT_MASK;
	u32 level = (feth & SRNIC_FETH_SEL_MASK) >> SRNIC_FETH_SEL_SHIFT;
	struct srnic_mr *mr;
	int access = 0;

	if (!type || (type & ~(SRNIC_FLUSH_GLOBAL | SRNIC_FLUSH_PERSISTENT)) ||
	    level > SRNIC_FLUSH_MR)
		return false;
	if (type & SRNIC_FLUSH_GLOBAL)
		access |= SRNIC_ACCESS_FLUSH_GLOBAL;
	if (type & SRNIC_FLUSH_PERSISTENT)
		access |= SRNIC_ACCESS_FLUSH_PERSISTENT;
	if (level == SRNIC_FLUSH_MR)
		mr = srnic_mr_lookup_whole(to_srnic_dev(qp->ibqp.device), rkey,
					   SRNIC_RKEY, pd, access);
	else
		mr = srnic_rkey_lookup(qp, pd, rkey, access, va, len);
	if (IS_ERR(mr))
		return false;
	srnic_mr_put(mr);
	smp_mb();	/* what was placed before, before the answer */
	return true;
}

static enum srnic_resp_verdict srnic_resp_read(struct srnic_qp *qp,
					       struct sk_buff *skb,
					       const struct srnic_pkt *pkt)
{
	struct srnic_resp *resp = &qp->resp;

	/* A FLUSH needs no QP access but its MR's (srnic_flush_check()). */
	if (!pkt->feth &&
	    !srnic_resp_op_allowed(qp, IB_ACCESS_REMOTE_READ, NULL))
		return srnic_resp_fatal(qp, pkt, SRNIC_NAK_INVALID_REQUEST,
					IB_WC_REM_INV_REQ_ERR);
	resp->msn++;
	if (!srnic_resp_start_read(qp, skb, pkt)) {
		resp->msn--;
		return srnic_resp_fatal(qp, pkt, SRNIC_NAK_REMOTE_ACCESS_ERROR,
					IB_WC_REM_ACCESS_ERR);
	}
	resp->epsn = srnic_psn_add(resp->read_last_psn, 1);
	return SRNIC_RESP_OK;
}

/*
 * Every srnic atomic, on any device, engine or QP, runs under this lock, so
 * they are atomic with respect to each other (IB_ATOMIC_HCA), as rxe's
 * atomic_ops_lock makes its own. The CPU's own accesses to the memory are
 * not ordered by it.
 */
static DEFINE_SPINLOCK(srnic_atomic_lock);

/*
 * The page of an 8-byte atomic target, mapped for writing: 0, -EINVAL for
 * an address not 8-byte aligned (in the MR's address space or in its
 * pages) or outside the MR's pages, or the errno of a failed ODP fault.
 */
static int srnic_atomic_map(struct srnic_mr *mr, u64 iova,
			    struct srnic_mr_map *map)
{
	int err;

	if (!IS_ALIGNED(iova, SRNIC_ATOMIC_SIZE))
		return -EINVAL;
	err = srnic_mr_map_page(mr, iova, true, map);
	if (err)
		return mr->type == SRNIC_MR_ODP ? err : -EINVAL;
	if (!IS_ALIGNED(map->offset, SRNIC_ATOMIC_SIZE)) {
		srnic_mr_unmap_page(map);
		return -EINVAL;
	}
	return 0;
}

enum srnic_atomic_op {
	SRNIC_ATOMIC_FETCH_ADD,
	SRNIC_ATOMIC_CMP_SWAP,
	SRNIC_ATOMIC_WRITE,
};

/*
 * One atomic operation on the 8 bytes at @iova of @mr, under
 * srnic_atomic_lock: fetch & add @operand, compare with @compare and swap
 * in @operand, or store @operand. *@orig gets the value found there.
 */
static int srnic_atomic_apply(struct srnic_mr *mr, u64 iova,
			      enum srnic_atomic_op op, u64 operand,
			      u64 compare, u64 *orig)
{
	struct srnic_mr_map map;
	u64 *target, val;
	void *va;
	int err;

	err = srnic_atomic_map(mr, iova, &map);
	if (err)
		return err;
	va = kmap_local_page(map.page);
	target = va + map.offset;
	spin_lock(&srnic_atomic_lock);
	val = READ_ONCE(*target);
	if (op == SRNIC_ATOMIC_FETCH_ADD)
		WRITE_ONCE(*target, val + operand);
	else if (op == SRNIC_ATOMIC_WRITE ||
		 (op == SRNIC_ATOMIC_CMP_SWAP && val == compare))
		WRITE_ONCE(*target, operand);
	spin_unlock(&srnic_atomic_lock);
	kunmap_local(va);
	srnic_mr_unmap_page(&map);
	*orig = val;
	return 0;
}

/**
 * srnic_atomic_execute() - compare & swap or fetch & add on 8 bytes of an MR
 * @mr: the target MR, referenced, its R_Key, access and bounds checked for
 *	SRNIC_ATOMIC_SIZE bytes at @iova
 * @iova: the target address
 * @cmp_swap: compare & swap (else fetch & add)
 * @swap_add: the value swapped in, or added (modulo 2^64)
 * @compare: the value compare & swap compares with
 * @orig: set to the value the target held before
 *
 * Used by the wire responder and by local delivery. The value is a native
 * 64-bit integer in the target's memory, as verbs define it.
 *
 * Return: 0, or -EINVAL if @iova is not 8-byte aligned, in the MR's
 * address space or in its pages (invalid request), or the errno of a
 * failed ODP fault (-EFAULT: the process has no page there, an access
 * error); nothing is written then.
 */
int srnic_atomic_execute(struct srnic_mr *mr, u64 iova, bool cmp_swap,
			 u64 swap_add, u64 compare, u64 *orig)
{
	return srnic_atomic_apply(mr, iova, cmp_swap ? SRNIC_ATOMIC_CMP_SWAP :
				  SRNIC_ATOMIC_FETCH_ADD, swap_add, compare,
				  orig);
}

/**
 * srnic_atomic_write_execute() - ATOMIC WRITE of 8 bytes into an MR
 * @mr: the target MR, referenced, its R_Key, access (REMOTE_WRITE) and
 *	bounds checked for SRNIC_ATOMIC_SIZE bytes at @iova
 * @iova: the target address
 * @value: the 8 bytes, as they came (a raw copy, no byte order applied)
 *
 * One 64-bit store under srnic_atomic_lock: no reader sees half of it,
 * and it is atomic with respect to srnic's compare & swap and fetch & add.
 * Used by the wire responder and by local delivery.
 *
 * Return: as srnic_atomic_execute(): 0, -EINVAL for an address not 8-byte
 * aligned (invalid request), or the errno of a failed ODP fault.
 */
int srnic_atomic_write_execute(struct srnic_mr *mr, u64 iova, u64 value)
{
	u64 orig;

	return srnic_atomic_apply(mr, iova, SRNIC_ATOMIC_WRITE, value, 0, &orig);
}

/* Answer an atomic request: AETH (ACK) and the original value. */
static void srnic_resp_send_atomic_ack(struct srnic_qp *qp, u32 psn, u64 orig)
{
	struct srnic_txd txd = {
		.opcode = srnic_resp_opcode(qp, SRNIC_OP_ATOMIC_ACK),
		.psn = psn,
		.aeth = srnic_aeth_smsn(SRNIC_AETH_ACK, SRNIC_AETH_CREDITS_UNLIMITED,
					qp->resp.msn),
		.orig = orig,
	};

	/* ACKs of earlier requests go out first. */
	srnic_resp_flush_ack(qp);
	srnic_tx_build(qp, &txd, NULL);
}

/* The NAK of an atomic or ATOMIC WRITE the memory refused (srnic_atomic_nak()). */
static enum srnic_resp_verdict srnic_resp_atomic_failed(struct srnic_qp *qp,
							const struct srnic_pkt *pkt,
							int err)
{
	u8 nak = srnic_atomic_nak(err);

	return srnic_resp_fatal(qp, pkt, nak, srnic_nak_wc_status(nak));
}

/*
 * A compare & swap or fetch & add (IBTA 9.4.5): checked like rxe checks
 * it (QP access, a responder resource, R_Key and bounds, then alignment),
 * executed once, its original value saved in the next responder resource
 * slot for duplicates, and answered with an ATOMIC_ACKNOWLEDGE.
 */
static enum srnic_resp_verdict srnic_resp_atomic(struct srnic_qp *qp,
						 struct sk_buff *skb,
						 const struct srnic_pkt *pkt)
{
	struct srnic_resp *resp = &qp->resp;
	struct srnic_atomic_replays *replays;
	struct srnic_atomic_replay *replay;
	struct srnic_atomic_fields f;
	struct srnic_mr *mr;
	u8 slots;
	u64 orig;
	int err;

	if (!srnic_resp_op_allowed(qp, IB_ACCESS_REMOTE_ATOMIC, &slots))
		return srnic_resp_fatal(qp, pkt, SRNIC_NAK_INVALID_REQUEST,
					IB_WC_REM_INV_REQ_ERR);
	srnic_atmeth_get((const struct srnic_atmeth *)(skb->data + pkt->atmeth),
			 &f);
	mr = srnic_rkey_lookup(qp, srnic_resp_pd(qp, resp->xsrq), f.rkey,
			       IB_ACCESS_REMOTE_ATOMIC, f.va, SRNIC_ATOMIC_SIZE);
	if (IS_ERR(mr))
		return srnic_resp_fatal(qp, pkt, SRNIC_NAK_REMOTE_ACCESS_ERROR,
					IB_WC_REM_ACCESS_ERR);
	err = srnic_atomic_execute(mr, f.va,
				   (pkt->opcode & SRNIC_OPCODE_OP_MASK) ==
				   SRNIC_OP_CMP_SWAP,
				   f.swap_add, f.compare, &orig);
	srnic_mr_put(mr);
	if (err)
		return srnic_resp_atomic_failed(qp, pkt, err);

	/* Installed before max_dest_rd_atomic was set (modify_qp). */
	replays = READ_ONCE(resp->atomics);
	if (!replays)
		return srnic_resp_fatal(qp, pkt, SRNIC_NAK_INVALID_REQUEST,
					IB_WC_REM_INV_REQ_ERR);
	slots = min_t(u32, slots, replays->slots);
	replay = &replays->slot[resp->atomic_next % slots];
	resp->atomic_next = (resp->atomic_next + 1) % slots;
	*replay = (struct srnic_atomic_replay) {
		.orig = orig, .psn = pkt->psn, .valid = true,
	};
	resp->msn++;
	srnic_resp_send_atomic_ack(qp, pkt->psn, orig);
	return SRNIC_RESP_OK;
}

/*
 * An ATOMIC WRITE (IBTA 1.5 Atomic Write annex; rxe's atomic_write_reply()
 * in Linux >= 6.2): a RETH with a DMA length of 8 and 8 bytes of payload,
 * stored at once (srnic_atomic_write_execute()) and answered with an ACK.
 * Checked as a WRITE is (the QP's REMOTE_WRITE, else an invalid request;
 * the R_Key with REMOTE_WRITE, else a remote access error), plus what is
 * its own: a responder resource (max_dest_rd_atomic, as atomics), the
 * lengths, and an 8-byte aligned address (invalid request). It is
 * executed once: a duplicate is ACKed again (srnic_resp_duplicate()).
 */
static enum srnic_resp_verdict srnic_resp_atomic_write(struct srnic_qp *qp,
						       struct sk_buff *skb,
						       const struct srnic_pkt *pkt)
{
	const struct srnic_reth *reth =
		(const struct srnic_reth *)(skb->data + pkt->reth);
	struct srnic_resp *resp = &qp->resp;
	u64 va = be64_to_cpu(reth->va);
	struct srnic_mr *mr;
	u8 slots;
	u64 value;
	int err;

	if (!srnic_resp_op_allowed(qp, IB_ACCESS_REMOTE_WRITE, &slots) ||
	    be32_to_cpu(reth->dma_len) != SRNIC_ATOMIC_SIZE ||
	    pkt->payload_len != SRNIC_ATOMIC_SIZE)
		return srnic_resp_fatal(qp, pkt, SRNIC_NAK_INVALID_REQUEST,
					IB_WC_REM_INV_REQ_ERR);
	mr = srnic_rkey_lookup(qp, srnic_resp_pd(qp, resp->xsrq),
			       be32_to_cpu(reth->rkey), IB_ACCESS_REMOTE_WRITE,
			       va, SRNIC_ATOMIC_SIZE);
	if (IS_ERR(mr))
		return srnic_resp_fatal(qp, pkt, SRNIC_NAK_REMOTE_ACCESS_ERROR,
					IB_WC_REM_ACCESS_ERR);
	if (skb_copy_bits(skb, pkt->hdr_len, &value, sizeof(value)))
		return srnic_resp_fatal(qp, pkt, SRNIC_NAK_INVALID_REQUEST,
					IB_WC_REM_INV_REQ_ERR);
	err = srnic_atomic_write_execute(mr, va, value);
	srnic_mr_put(mr);
	if (err)
		return srnic_resp_atomic_failed(qp, pkt, err);
	resp->msn++;
	return SRNIC_RESP_OK;
}

/* A duplicate atomic: its saved result, if a resource still holds it. */
static void srnic_resp_atomic_duplicate(struct srnic_qp *qp,
					const struct srnic_pkt *pkt)
{
	const struct srnic_atomic_replays *replays = READ_ONCE(qp->resp.atomics);
	unsigned int i;

	for (i = 0; replays && i < replays->slots; i++) {
		const struct srnic_atomic_replay *replay = &replays->slot[i];

		if (replay->valid && replay->psn == pkt->psn) {
			srnic_resp_send_atomic_ack(qp, pkt->psn, replay->orig);
			return;
		}
	}
	/* Too old to be asked for again (class D): dropped. */
	srnic_qp_count(qp, SRNIC_CNT_RX_DROP_UNEXPECTED);
}

/* Is @pkt a valid next packet given the message being received? */
static bool srnic_resp_sequence_ok(struct srnic_qp *qp,
				   const struct srnic_pkt *pkt)
{
	u32 flags = pkt->flags;

	switch (qp->resp.msg) {
	case SRNIC_RESP_SEND:
		return (flags & SRNIC_OPF_SEND) && !(flags & SRNIC_OPF_FIRST);
	case SRNIC_RESP_WRITE:
		return (flags & SRNIC_OPF_WRITE) && !(flags & SRNIC_OPF_FIRST);
	default:
		return flags & SRNIC_OPF_FIRST;
	}
}

static enum srnic_resp_verdict srnic_resp_execute(struct srnic_qp *qp,
						  struct sk_buff *skb,
						  const struct srnic_pkt *pkt)
{
	u32 mtu = srnic_qp_mtu(qp);

	if (!srnic_resp_sequence_ok(qp, pkt) ||
	    pkt->payload_len > mtu ||
	    (!(pkt->flags & SRNIC_OPF_LAST) && !pkt->payload_len))
		return srnic_resp_fatal(qp, pkt, SRNIC_NAK_INVALID_REQUEST,
					IB_WC_REM_INV_REQ_ERR);
	/* UC has no IETH. */
	if (pkt->ieth && !srnic_qp_acked(qp))
		return srnic_resp_fatal(qp, pkt, SRNIC_NAK_INVALID_REQUEST,
					IB_WC_REM_INV_REQ_ERR);
	if (pkt->atmeth)
		return srnic_resp_atomic(qp, skb, pkt);
	/* The atomic with a RETH and no AtomicETH: ATOMIC_WRITE (RC, XRC). */
	if (pkt->flags & SRNIC_OPF_ATOMIC)
		return srnic_resp_atomic_write(qp, skb, pkt);
	if (pkt->flags & SRNIC_OPF_SEND)
		return srnic_resp_send(qp, skb, pkt);
	if (pkt->flags & SRNIC_OPF_WRITE)
		return srnic_resp_write(qp, skb, pkt);
	return srnic_resp_read(qp, skb, pkt);
}

/* A request behind epsn: answer it again, execute nothing again. */
static void srnic_resp_duplicate(struct srnic_qp *qp, struct sk_buff *skb,
				 const struct srnic_pkt *pkt)
{
	srnic_qp_count(qp, SRNIC_CNT_RX_DUPLICATE);
	if (pkt->flags & SRNIC_OPF_READ) {
		srnic_resp_start_read(qp, skb, pkt);
		return;
	}
	if (pkt->atmeth) {
		srnic_resp_atomic_duplicate(qp, pkt);
		return;
	}
	qp->resp.ack_pending = true;
}

/*
 * A READ request asking again for a range of an earlier READ's responses,
 * the rest of which its requester holds, or an atomic asking again for its
 * ATOMIC_ACKNOWLEDGE (selective repeat): no going back.
 */
static bool srnic_resp_asks_range(const struct srnic_pkt *pkt)
{
	return pkt->sr && pkt->sr_run == SRNIC_SR_RUN_READ_RANGE &&
	       ((pkt->flags & SRNIC_OPF_READ) || pkt->atmeth);
}

/**
 * srnic_resp_went_back() - did the requester go back to an earlier READ
 * or atomic?
 * @qp: the QP, from its task
 *
 * A READ or atomic request behind epsn in the receive queue means the
 * requester missed responses and asks again from there (go-back-N); it
 * will send everything after that PSN again too. READ responses in
 * progress and the requests queued before the duplicate are then wasted
 * work that would delay the answer past the requester's ACK timeout: drop
 * them, so the duplicate is served next. (A duplicate atomic must not be
 * among the dropped: only its ATOMIC_ACKNOWLEDGE completes it, so it is
 * where the walk stops too.) A READ asking for a range again
 * (srnic_resp_asks_range()) is no going back: it waits its turn.
 *
 * Return: true if something was dropped.
 */
bool srnic_resp_went_back(struct srnic_qp *qp)
{
	struct srnic_resp *resp = &qp->resp;
	struct sk_buff_head *q = &qp->rxq;
	struct sk_buff *skb, *next, *dup = NULL;
	struct sk_buff_head stale, bad;
	unsigned long flags;

	__skb_queue_head_init(&stale);
	__skb_queue_head_init(&bad);
	spin_lock_irqsave(&q->lock, flags);
	skb_queue_walk_safe(q, skb, next) {
		const struct srnic_pkt *pkt = srnic_skb_pkt(skb);

		if (((pkt->flags & SRNIC_OPF_READ) || pkt->atmeth) &&
		    (pkt->flags & SRNIC_OPF_REQUEST) &&
		    srnic_psn_cmp(pkt->psn, resp->epsn) < 0 &&
		    !srnic_resp_asks_range(pkt)) {
			/* Only a packet whose ICRC is right is believed. */
			if (!srnic_rx_icrc_checked(qp, skb)) {
				__skb_unlink(skb, q);
				__skb_queue_tail(&bad, skb);
				continue;
			}
			dup = skb;
			break;
		}
	}
	/* Requests before it go; responses (for our requester) stay. */
	if (dup) {
		skb_queue_walk_safe(q, skb, next) {
			if (skb == dup)
				break;
			if (srnic_skb_pkt(skb)->flags & SRNIC_OPF_REQUEST) {
				__skb_unlink(skb, q);
				__skb_queue_tail(&stale, skb);
			}
		}
	}
	spin_unlock_irqrestore(&q->lock, flags);
	__skb_queue_purge(&bad);
	if (!dup || (skb_queue_empty(&stale) && !resp->reading))
		return false;

	srnic_qp_count(qp, SRNIC_CNT_RX_DROP_STALE);
	/* Each was received, good or not: count it so. */
	skb_queue_walk(&stale, skb)
		srnic_rx_icrc_checked(qp, skb);
	__skb_queue_purge(&stale);
	if (resp->read_mr)
		srnic_mr_put(resp->read_mr);
	resp->read_mr = NULL;
	resp->reading = false;
	return true;
}

/*
 * UC: drop the packet @pkt and the rest of its message (none after a
 * LAST or ONLY). The message in progress ends without a completion; a
 * receive WQE it took stays for the next message.
 */
static void srnic_resp_uc_drop(struct srnic_qp *qp,
			       const struct srnic_pkt *pkt)
{
	struct srnic_resp *resp = &qp->resp;

	srnic_qp_count(qp, SRNIC_CNT_RX_DROP_UC);
	srnic_resp_end_message(qp);
	resp->drop_msg = !(pkt->flags & SRNIC_OPF_LAST);
	resp->epsn = srnic_psn_add(pkt->psn, 1);
}

/*
 * UC: may @pkt be executed? A PSN ahead of epsn means packets were lost,
 * and a packet out of the opcode sequence cannot continue the message: the
 * message in progress is dropped, and a FIRST or ONLY starts the next one
 * at its PSN. A PSN behind epsn (within half the PSN space) is a duplicate
 * or a packet overtaken on the way: it is dropped and changes nothing, so
 * messages are delivered in order and at most once (rxe would resync on
 * it).
 */
static bool srnic_resp_uc_accept(struct srnic_qp *qp,
				 const struct srnic_pkt *pkt)
{
	struct srnic_resp *resp = &qp->resp;
	int cmp = srnic_psn_cmp(pkt->psn, resp->epsn);

	if (cmp < 0) {
		srnic_qp_count(qp, SRNIC_CNT_RX_DUPLICATE);
		return false;
	}
	if (cmp > 0)
		srnic_qp_count(qp, SRNIC_CNT_RX_OUT_OF_SEQUENCE);
	else if (!resp->drop_msg && srnic_resp_sequence_ok(qp, pkt))
		return true;
	if (!(pkt->flags & SRNIC_OPF_FIRST)) {
		srnic_resp_uc_drop(qp, pkt);
		return false;
	}
	if (resp->msg != SRNIC_RESP_IDLE)
		srnic_qp_count(qp, SRNIC_CNT_RX_DROP_UC);
	srnic_resp_end_message(qp);
	resp->drop_msg = false;
	resp->epsn = pkt->psn;
	return true;
}

/*
 * XRC_TGT: may the request at epsn, naming XRC SRQ @xsrqn, be executed?
 * The SRQ must be of the QP's XRC domain, and a message's packets must all
 * name the SRQ its first one named (whose WQE it fills).
 */
static bool srnic_resp_xrc_ok(struct srnic_qp *qp, const struct srnic_pkt *pkt,
			      u32 xsrqn)
{
	struct srnic_resp *resp = &qp->resp;

	if (!resp->xsrq)
		return false;
	if (resp->msg != SRNIC_RESP_IDLE || resp->have_rwqe)
		return xsrqn == resp->xsrqn;
	resp->xsrqn = xsrqn;
	return true;
}

/**
 * srnic_resp_rx_request() - a request packet for the QP's responder
 * @qp: the QP, called from its task
 * @skb: the packet (srnic_skb_pkt() holds its headers); consumed
 */
void srnic_resp_rx_request(struct srnic_qp *qp, struct sk_buff *skb)
{
	const struct srnic_pkt *pkt = srnic_skb_pkt(skb);
	struct srnic_resp *resp = &qp->resp;
	enum ib_qp_state state = READ_ONCE(qp->state);
	u32 xsrqn = 0;
	int cmp;

	if (state == IB_QPS_RESET || state == IB_QPS_INIT ||
	    state == IB_QPS_ERR)
		goto out;
	/* A packet from the wire for a QP whose RQ a local peer borrows. */
	if (unlikely(READ_ONCE(qp->direct_loaned)))
		srnic_direct_loan_settle(qp, NULL);
	if (qp->ibqp.qp_type == IB_QPT_XRC_TGT) {
		/* XRC opcodes all have an XRCETH (srnic_rx_packet()). */
		xsrqn = srnic_xrceth_get((const struct srnic_xrceth *)
					 (skb->data + pkt->xrceth));
		resp->xsrq = srnic_xrc_srq_get(qp, xsrqn);
	}
	if (!srnic_qp_acked(qp)) {
		if (srnic_resp_uc_accept(qp, pkt))
			goto execute;
		goto out;
	}
	resp->sr_peer = pkt->sr && qp->ibqp.qp_type == IB_QPT_RC &&
			READ_ONCE(to_srnic_dev(qp->ibqp.device)->selective_repeat);
	cmp = srnic_psn_cmp(pkt->psn, resp->epsn);
	if (cmp > 0) {
		srnic_qp_count(qp, SRNIC_CNT_RX_OUT_OF_SEQUENCE);
		if (resp->sr_peer && srnic_resp_ooo_keep(qp, skb, pkt))
			return;		/* the requester is srnic's (RC) */
		if (!resp->nak_seq_sent) {
			srnic_resp_nak(qp, resp->epsn, SRNIC_AETH_NAK,
				       SRNIC_NAK_PSN_SEQUENCE_ERROR);
			resp->nak_seq_sent = true;
		}
		goto out;
	}
	if (cmp < 0) {
		srnic_resp_duplicate(qp, skb, pkt);
		goto out;
	}

execute:
	if (qp->ibqp.qp_type == IB_QPT_XRC_TGT &&
	    !srnic_resp_xrc_ok(qp, pkt, xsrqn)) {
		srnic_resp_fatal(qp, pkt, SRNIC_NAK_INVALID_REQUEST,
				 IB_WC_REM_INV_REQ_ERR);
		if (resp->fatal_event)
			srnic_qp_event(qp, resp->fatal_event);
		goto out;
	}
	switch (srnic_resp_execute(qp, skb, pkt)) {
	case SRNIC_RESP_OK:
		resp->nak_seq_sent = false;
		if (!(pkt->flags & SRNIC_OPF_READ)) {
			resp->epsn = srnic_psn_add(resp->epsn, 1);
			/* An atomic was answered by its ATOMIC_ACKNOWLEDGE. */
			if (pkt->ack_req && !pkt->atmeth && srnic_qp_acked(qp))
				resp->ack_pending = true;
		}
		break;
	case SRNIC_RESP_RNR:
		break;
	case SRNIC_RESP_DROP:
		srnic_resp_uc_drop(qp, pkt);
		break;
	case SRNIC_RESP_FATAL:
		/* Already in the error state (or reset since). */
		if (resp->fatal_event)
			srnic_qp_event(qp, resp->fatal_event);
		break;
	}
out:
	if (resp->xsrq)
		srnic_srq_put(resp->xsrq);
	resp->xsrq = NULL;
	consume_skb(skb);
}

/* End the READ being answered with a remote access error NAK. */
static void srnic_resp_read_fail(struct srnic_qp *qp)
{
	struct srnic_resp *resp = &qp->resp;

	if (resp->read_mr)
		srnic_mr_put(resp->read_mr);
	resp->read_mr = NULL;
	resp->reading = false;
	if (srnic_resp_to_error(qp, IB_WC_SUCCESS, true, resp->read_psn,
				SRNIC_NAK_REMOTE_ACCESS_ERROR))
		srnic_qp_event(qp, IB_EVENT_QP_ACCESS_ERR);
}

/*
 * Look the MR of the READ being answered up again, for its remaining
 * bytes. If it went meanwhile (deregistered, invalidated), the READ ends
 * with a remote access error NAK, as its request would have got, and the
 * QP goes to the error state. Returns whether the responses go on.
 */
static bool srnic_resp_read_mr(struct srnic_qp *qp)
{
	struct srnic_resp *resp = &qp->resp;
	struct srnic_mr *mr;

	mr = srnic_rkey_lookup(qp, resp->read_pd, resp->read_rkey,
			       IB_ACCESS_REMOTE_READ, resp->read_va,
			       resp->read_left);
	if (!IS_ERR(mr)) {
		resp->read_mr = mr;
		return true;
	}
	srnic_resp_read_fail(qp);
	return false;
}

/**
 * srnic_resp_run() - send READ responses
 * @qp: the QP, from its task
 * @budget: packets to send at most
 *
 * Return: true if responses remain to be sent.
 */
bool srnic_resp_run(struct srnic_qp *qp, unsigned int budget)
{
	struct srnic_dev *sdev = to_srnic_dev(qp->ibqp.device);
	struct srnic_resp *resp = &qp->resp;
	struct srnic_tx_batch batch = {};
	u32 mtu = srnic_qp_mtu(qp);

	while (resp->reading && budget--) {
		bool last = resp->read_psn == resp->read_last_psn;
		struct srnic_txd txd;

		/*
		 * Released by srnic_resp_put_mrs() after the last run, so
		 * looked up in the first pass here only: nothing is batched
		 * yet for a NAK to overtake.
		 */
		if (resp->read_left && !resp->read_mr &&
		    !srnic_resp_read_mr(qp))
			break;
		txd = (struct srnic_txd) {
			.psn = resp->read_psn,
			.aeth = srnic_aeth_smsn(SRNIC_AETH_ACK,
						SRNIC_AETH_CREDITS_UNLIMITED,
						resp->msn),
			.mr = resp->read_mr,
			.offset = resp->read_va,
			.len = min(mtu, resp->read_left),
			/* The requester may keep responses that come early. */
			.sr = resp->sr_peer,
		};
		u8 op;

		if (resp->read_first)
			op = last ? SRNIC_OP_READ_RESPONSE_ONLY :
				    SRNIC_OP_READ_RESPONSE_FIRST;
		else
			op = last ? SRNIC_OP_READ_RESPONSE_LAST :
				    SRNIC_OP_READ_RESPONSE_MIDDLE;
		txd.opcode = srnic_resp_opcode(qp, op);
		/* The ODP page to send from is not the process's any more. */
		if (srnic_tx_build(qp, &txd, &batch) == -EFAULT) {
			srnic_tx_batch_flush(sdev, &batch);
			srnic_resp_read_fail(qp);
			break;
		}
		resp->read_va += txd.len;
		resp->read_left -= txd.len;
		resp->read_first = false;
		resp->read_psn = srnic_psn_add(resp->read_psn, 1);
		if (last) {
			if (resp->read_mr)
				srnic_mr_put(resp->read_mr);
			resp->read_mr = NULL;
			resp->reading = false;
		}
	}
	/* Refused responses are lost: the requester reads them again. */
	srnic_tx_batch_flush(sdev, &batch);
	return resp->reading;
}

/**
 * srnic_resp_reset() - drop the responder's state (error or reset)
 * @qp: the QP; its task, or the task stopped
 *
 * A receive WQE taken for a message cut short completes with
 * IB_WC_WR_FLUSH_ERR in the error state (after the WQEs the error state
 * flushed from the RQ), and is discarded in RESET like the RQ's.
 */
void srnic_resp_reset(struct srnic_qp *qp)
{
	struct srnic_resp *resp = &qp->resp;

	if (resp->have_rwqe && READ_ONCE(qp->state) == IB_QPS_ERR) {
		struct srnic_srq *xsrq = srnic_resp_rwqe_srq(qp);

		if (xsrq || qp->ibqp.qp_type != IB_QPT_XRC_TGT)
			srnic_cq_post_flush(srnic_resp_cq(qp, xsrq),
					    resp->rwqe->wr_id, qp->ibqp.qp_num,
					    IB_WC_RECV);
		if (xsrq)
			srnic_srq_put(xsrq);
	}
	srnic_resp_end_message(qp);
	if (resp->read_mr)
		srnic_mr_put(resp->read_mr);
	resp->read_mr = NULL;
	resp->reading = false;
	resp->have_rwqe = false;
	resp->ack_pending = false;
	srnic_resp_ooo_purge(qp);
	resp->nak_seq_sent = false;
	resp->drop_msg = false;
	/* A new connection starts with no atomic to replay. */
	if (resp->atomics)
		memset(resp->atomics->slot, 0,
		       resp->atomics->slots * sizeof(resp->atomics->slot[0]));
	resp->atomic_next = 0;
}

/**
 * srnic_resp_put_mrs() - drop the MR references the responder caches
 * @qp: the QP, from its task at the end of a run, or the task stopped
 *
 * The receive WQE's SGL of a SEND, the MR of a WRITE and of a READ being
 * answered are looked up again by the message's next packet: a peer that
 * stops in the middle of a message holds no MR (see srnic_dereg_mr()).
 */
void srnic_resp_put_mrs(struct srnic_qp *qp)
{
	struct srnic_resp *resp = &qp->resp;

	srnic_sgl_put(&resp->sgl);
	if (resp->write_mr)
		srnic_mr_put(resp->write_mr);
	resp->write_mr = NULL;
	if (resp->read_mr)
		srnic_mr_put(resp->read_mr);
	resp->read_mr = NULL;
}

/**
 * srnic_resp_rwqe_size() - the largest receive WQE @qp takes
 * @qp: a new QP, its RQ set up
 *
 * An entry of its RQ or its SRQ; an XRC_TGT QP takes from any XRC SRQ of
 * its domain, so from one of the largest entries the ABI allows.
 */
u32 srnic_resp_rwqe_size(const struct srnic_qp *qp)
{
	/* Any XRC SRQ's WQEs; a hash QP's, any of its WQs'. */
	if (qp->ibqp.qp_type == IB_QPT_XRC_TGT || qp->rss)
		return SRNIC_MAX_RQ_ENTRY_SIZE;
	if (qp->ibqp.srq)
		return to_srnic_srq(qp->ibqp.srq)->rq.ring.entry_size;
	return max_t(u32, qp->rq.ring.entry_size,
		     sizeof(struct srnic_recv_wqe));
}

/**
 * srnic_resp_init() - responder state of a new QP
 * @qp: the QP
 */
int srnic_resp_init(struct srnic_qp *qp)
{
	qp->resp.rwqe = kmalloc(srnic_resp_rwqe_size(qp), GFP_KERNEL);
	return qp->resp.rwqe ? 0 : -ENOMEM;
}

/**
 * srnic_resp_atomics_alloc() - replay slots for @max_dest_rd_atomic
 *	responder resources, if @qp has fewer
 * @qp: the QP being modified
 * @max_dest_rd_atomic: the value modify_qp was asked for (checked)
 *
 * Called before modify_qp takes the QP's state lock (it may sleep); the
 * result goes to srnic_resp_atomics_install() under it.
 *
 * Return: the new slots, NULL if none are needed, or an ERR_PTR.
 */
struct srnic_atomic_replays *srnic_resp_atomics_alloc(struct srnic_qp *qp,
						      u8 max_dest_rd_atomic)
{
	const struct srnic_atomic_replays *cur = READ_ONCE(qp->resp.atomics);
	struct srnic_atomic_replays *replays;

	if (!max_dest_rd_atomic || (cur && cur->slots >= max_dest_rd_atomic))
		return NULL;
	replays = kzalloc(struct_size(replays, slot, max_dest_rd_atomic),
			  GFP_KERNEL);
	if (!replays)
		return ERR_PTR(-ENOMEM);
	replays->slots = max_dest_rd_atomic;
	return replays;
}

/**
 * srnic_resp_atomics_install() - make @replays the QP's replay slots
 * @qp: the QP, its state lock held
 * @replays: from srnic_resp_atomics_alloc(); freed here if the QP has as
 *	     many slots already (another modify_qp was first)
 *
 * The slots in use are carried over, so duplicates of the atomics they
 * hold are still answered; the old array is retired, not freed: a
 * responder run (max_dest_rd_atomic may grow in SQD) may be reading it.
 */
void srnic_resp_atomics_install(struct srnic_qp *qp,
				struct srnic_atomic_replays *replays)
{
	struct srnic_atomic_replays *old = qp->resp.atomics;

	if (old && old->slots >= replays->slots) {
		kfree(replays);
		return;
	}
	if (old) {
		memcpy(replays->slot, old->slot,
		       old->slots * sizeof(old->slot[0]));
		qp->resp.atomic_next %= old->slots;
	}
	replays->retired = old;
	/* Its slots' contents before the pointer. */
	smp_store_release(&qp->resp.atomics, replays);
}

static void srnic_resp_atomics_free(struct srnic_qp *qp)
{
	struct srnic_atomic_replays *replays = qp->resp.atomics, *next;

	for (; replays; replays = next) {
		next = replays->retired;
		kfree(replays);
	}
	qp->resp.atomics = NULL;
}

/**
 * srnic_resp_cleanup() - undo srnic_resp_init(); the task is stopped
 * @qp: the QP
 */
void srnic_resp_cleanup(struct srnic_qp *qp)
{
	srnic_resp_reset(qp);
	kfree(qp->resp.rwqe);
	qp->resp.rwqe = NULL;
	srnic_resp_atomics_free(qp);
}
