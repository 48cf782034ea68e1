/* SPDX-License-Identifier: GPL-2.0 */
/*
 * srnic: tracepoints (events/srnic/ in tracefs).
 *
 * trace-cmd record -e srnic; perf trace -e 'srnic:*'. Each event names its
 * device and QP. They are exported, so that a module can attach a probe
 * (kernel/test/srnic_test.c does, for the VM suites).
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM srnic

#if !defined(_SRNIC_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _SRNIC_TRACE_H

#include <linux/tracepoint.h>
#include <rdma/ib_verbs.h>

TRACE_DEFINE_ENUM(IB_QPS_RESET);
TRACE_DEFINE_ENUM(IB_QPS_INIT);
TRACE_DEFINE_ENUM(IB_QPS_RTR);
TRACE_DEFINE_ENUM(IB_QPS_RTS);
TRACE_DEFINE_ENUM(IB_QPS_SQD);
TRACE_DEFINE_ENUM(IB_QPS_SQE);
TRACE_DEFINE_ENUM(IB_QPS_ERR);

#define srnic_show_qp_state(state)					\
	__print_symbolic(state, { IB_QPS_RESET, "RESET" },		\
			 { IB_QPS_INIT, "INIT" }, { IB_QPS_RTR, "RTR" },	\
			 { IB_QPS_RTS, "RTS" }, { IB_QPS_SQD, "SQD" },	\
			 { IB_QPS_SQE, "SQE" }, { IB_QPS_ERR, "ERR" })

/**
 * srnic_nak_send - the RC responder sends a NAK
 * @ibqp: the responder QP
 * @psn: the PSN the NAK carries
 * @type: the AETH syndrome's type (1 RNR NAK, 3 NAK)
 * @value: the syndrome's value (an RNR timer code or a NAK code: 0 PSN
 *	sequence error, 1 invalid request, 2 remote access error, 3 remote
 *	operational error)
 *
 * A fatal NAK (type 3, value 1-3) fires with the QP's state lock held and
 * the QP already in the error state.
 */
TRACE_EVENT(srnic_nak_send,
	TP_PROTO(struct ib_qp *ibqp, u32 psn, u8 type, u8 value),
	TP_ARGS(ibqp, psn, type, value),
	TP_STRUCT__entry(
		__array(char, dev, IB_DEVICE_NAME_MAX)
		__field(u32, qpn)
		__field(u32, psn)
		__field(u8, type)
		__field(u8, value)
	),
	TP_fast_assign(
		strscpy(__entry->dev, dev_name(&ibqp->device->dev),
			IB_DEVICE_NAME_MAX);
		__entry->qpn = ibqp->qp_num;
		__entry->psn = psn;
		__entry->type = type;
		__entry->value = value;
	),
	TP_printk("%s qpn=%u psn=%u %s %u", __entry->dev, __entry->qpn,
		  __entry->psn, __entry->type == 1 ? "rnr-nak" : "nak",
		  __entry->value)
);

/**
 * srnic_rate_change - a requester's rate limiter changes its rate
 * @ibqp: the requester's QP
 * @mbps: the new rate, Mbit/s; 0: no longer limited
 * @target_mbps: the rate it recovers towards
 * @alpha: DCQCN's congestion estimate, in 1/1024ths
 * @srtt_us: the requester's smoothed round-trip time, microseconds
 * @cut: a cut for CNPs (else a recovery stage)
 */
TRACE_EVENT(srnic_rate_change,
	TP_PROTO(struct ib_qp *ibqp, u32 mbps, u32 target_mbps, u32 alpha,
		 u32 srtt_us, bool cut),
	TP_ARGS(ibqp, mbps, target_mbps, alpha, srtt_us, cut),
	TP_STRUCT__entry(
		__array(char, dev, IB_DEVICE_NAME_MAX)
		__field(u32, qpn)
		__field(u32, mbps)
		__field(u32, target_mbps)
		__field(u32, alpha)
		__field(u32, srtt_us)
		__field(bool, cut)
	),
	TP_fast_assign(
		strscpy(__entry->dev, dev_name(&ibqp->device->dev),
			IB_DEVICE_NAME_MAX);
		__entry->qpn = ibqp->qp_num;
		__entry->mbps = mbps;
		__entry->target_mbps = target_mbps;
		__entry->alpha = alpha;
		__entry->srtt_us = srtt_us;
		__entry->cut = cut;
	),
	TP_printk("%s qpn=%u %s rate=%u target=%u alpha=%u srtt=%u",
		  __entry->dev, __entry->qpn,
		  __entry->cut ? "cut" : "increase", __entry->mbps,
		  __entry->target_mbps, __entry->alpha, __entry->srtt_us)
);

/*
 * The events of a QP's life, in the order a message meets them: doorbell,
 * WQE start, packets out and in, ACK/NAK, retransmission, completion.
 * Every one names the device and the QP number (qpn); packet events the
 * BTH opcode (as Wireshark numbers it), PSN and payload bytes.
 */

/**
 * srnic_doorbell - a doorbell (a post's system call, or a kernel post)
 * @ibqp: the QP
 * @sq: the send queue's (else the receive queue's)
 */
TRACE_EVENT(srnic_doorbell,
	TP_PROTO(const struct ib_qp *ibqp, bool sq),
	TP_ARGS(ibqp, sq),
	TP_STRUCT__entry(
		__array(char, dev, IB_DEVICE_NAME_MAX)
		__field(u32, qpn)
		__field(bool, sq)
	),
	TP_fast_assign(
		strscpy(__entry->dev, dev_name(&ibqp->device->dev),
			IB_DEVICE_NAME_MAX);
		__entry->qpn = ibqp->qp_num;
		__entry->sq = sq;
	),
	TP_printk("%s qpn=%u %s", __entry->dev, __entry->qpn,
		  __entry->sq ? "sq" : "rq")
);

/**
 * srnic_wqe_start - the requester takes a send WQE and gives it its PSNs
 * @ibqp: the QP
 * @wr_id: the WQE's wr_id
 * @opcode: its IB_WR_* opcode
 * @len: bytes it moves
 * @first_psn: its first PSN
 * @npsn: PSNs it takes (0: a local operation)
 */
TRACE_EVENT(srnic_wqe_start,
	TP_PROTO(const struct ib_qp *ibqp, u64 wr_id, u8 opcode, u32 len,
		 u32 first_psn, u32 npsn),
	TP_ARGS(ibqp, wr_id, opcode, len, first_psn, npsn),
	TP_STRUCT__entry(
		__array(char, dev, IB_DEVICE_NAME_MAX)
		__field(u32, qpn)
		__field(u64, wr_id)
		__field(u8, opcode)
		__field(u32, len)
		__field(u32, first_psn)
		__field(u32, npsn)
	),
	TP_fast_assign(
		strscpy(__entry->dev, dev_name(&ibqp->device->dev),
			IB_DEVICE_NAME_MAX);
		__entry->qpn = ibqp->qp_num;
		__entry->wr_id = wr_id;
		__entry->opcode = opcode;
		__entry->len = len;
		__entry->first_psn = first_psn;
		__entry->npsn = npsn;
	),
	TP_printk("%s qpn=%u wr_id=%#llx wr_opcode=%u len=%u psn=%u npsn=%u",
		  __entry->dev, __entry->qpn, __entry->wr_id, __entry->opcode,
		  __entry->len, __entry->first_psn, __entry->npsn)
);

/**
 * srnic_cqe - a completion is posted to a CQ
 * @ibcq: the CQ
 * @qpn: the QP it reports on
 * @wr_id: the work request's
 * @opcode: its IB_WC_* opcode
 * @status: its IB_WC_* status (0: success)
 * @byte_len: bytes received or read
 */
TRACE_EVENT(srnic_cqe,
	TP_PROTO(const struct ib_cq *ibcq, u32 qpn, u64 wr_id, u8 opcode,
		 u8 status, u32 byte_len),
	TP_ARGS(ibcq, qpn, wr_id, opcode, status, byte_len),
	TP_STRUCT__entry(
		__array(char, dev, IB_DEVICE_NAME_MAX)
		__field(u32, qpn)
		__field(u64, wr_id)
		__field(u8, opcode)
		__field(u8, status)
		__field(u32, byte_len)
	),
	TP_fast_assign(
		strscpy(__entry->dev, dev_name(&ibcq->device->dev),
			IB_DEVICE_NAME_MAX);
		__entry->qpn = qpn;
		__entry->wr_id = wr_id;
		__entry->opcode = opcode;
		__entry->status = status;
		__entry->byte_len = byte_len;
	),
	TP_printk("%s qpn=%u wr_id=%#llx wc_opcode=%u status=%u byte_len=%u",
		  __entry->dev, __entry->qpn, __entry->wr_id, __entry->opcode,
		  __entry->status, __entry->byte_len)
);

DECLARE_EVENT_CLASS(srnic_packet,
	TP_PROTO(const struct ib_device *ibdev, u32 qpn, u32 dqpn, u8 opcode,
		 u32 psn, u32 len),
	TP_ARGS(ibdev, qpn, dqpn, opcode, psn, len),
	TP_STRUCT__entry(
		__array(char, dev, IB_DEVICE_NAME_MAX)
		__field(u32, qpn)
		__field(u32, dqpn)
		__field(u8, opcode)
		__field(u32, psn)
		__field(u32, len)
	),
	TP_fast_assign(
		strscpy(__entry->dev, dev_name(&ibdev->dev),
			IB_DEVICE_NAME_MAX);
		__entry->qpn = qpn;
		__entry->dqpn = dqpn;
		__entry->opcode = opcode;
		__entry->psn = psn;
		__entry->len = len;
	),
	TP_printk("%s qpn=%u dqpn=%u opcode=%#x psn=%u len=%u", __entry->dev,
		  __entry->qpn, __entry->dqpn, __entry->opcode, __entry->psn,
		  __entry->len)
);

/**
 * srnic_packet_tx - a RoCEv2 packet is built for the wire
 * @ibdev: the sending device
 * @qpn: the sending QP
 * @dqpn: the BTH's destination QP
 * @opcode: the BTH opcode
 * @psn: the BTH PSN
 * @len: payload bytes
 */
DEFINE_EVENT(srnic_packet, srnic_packet_tx,
	TP_PROTO(const struct ib_device *ibdev, u32 qpn, u32 dqpn, u8 opcode,
		 u32 psn, u32 len),
	TP_ARGS(ibdev, qpn, dqpn, opcode, psn, len));

/**
 * srnic_packet_rx - a RoCEv2 packet from the wire is given to its QP
 * @ibdev: the receiving device
 * @qpn: 0 (the sender's QP is not in the BTH)
 * @dqpn: the BTH's destination QP, this device's
 * @opcode: the BTH opcode
 * @psn: the BTH PSN
 * @len: payload bytes
 */
DEFINE_EVENT(srnic_packet, srnic_packet_rx,
	TP_PROTO(const struct ib_device *ibdev, u32 qpn, u32 dqpn, u8 opcode,
		 u32 psn, u32 len),
	TP_ARGS(ibdev, qpn, dqpn, opcode, psn, len));

DECLARE_EVENT_CLASS(srnic_qp_psn,
	TP_PROTO(const struct ib_qp *ibqp, u32 psn, u32 value),
	TP_ARGS(ibqp, psn, value),
	TP_STRUCT__entry(
		__array(char, dev, IB_DEVICE_NAME_MAX)
		__field(u32, qpn)
		__field(u32, psn)
		__field(u32, value)
	),
	TP_fast_assign(
		strscpy(__entry->dev, dev_name(&ibqp->device->dev),
			IB_DEVICE_NAME_MAX);
		__entry->qpn = ibqp->qp_num;
		__entry->psn = psn;
		__entry->value = value;
	),
	TP_printk("%s qpn=%u psn=%u retries_left=%u", __entry->dev,
		  __entry->qpn, __entry->psn, __entry->value)
);

/*
 * srnic_aeth_rx - the requester receives an ACK, RNR NAK or NAK
 * @ibqp: the requester's QP
 * @psn: the PSN it carries
 * @value: the AETH syndrome (type in bits 6-5: 0 ACK, 1 RNR NAK, 3 NAK)
 */
DEFINE_EVENT_PRINT(srnic_qp_psn, srnic_aeth_rx,
	TP_PROTO(const struct ib_qp *ibqp, u32 psn, u32 value),
	TP_ARGS(ibqp, psn, value),
	TP_printk("%s qpn=%u psn=%u %s %u", __entry->dev, __entry->qpn,
		  __entry->psn,
		  __print_symbolic((__entry->value >> 5) & 3,
				   { 0, "ack" }, { 1, "rnr-nak" },
				   { 2, "reserved" }, { 3, "nak" }),
		  __entry->value & 0x1f));

/*
 * srnic_retransmit - the requester sends PSNs again
 * @ibqp: the requester's QP
 * @psn: the first PSN sent again
 * @value: how: 0 going back N from @psn, 1 that PSN alone (selective
 *	repeat), 2 a READ's range or an atomic asked for again
 */
DEFINE_EVENT_PRINT(srnic_qp_psn, srnic_retransmit,
	TP_PROTO(const struct ib_qp *ibqp, u32 psn, u32 value),
	TP_ARGS(ibqp, psn, value),
	TP_printk("%s qpn=%u psn=%u %s", __entry->dev, __entry->qpn,
		  __entry->psn,
		  __print_symbolic(__entry->value, { 0, "go-back-n" },
				   { 1, "selective" }, { 2, "asked" })));

/**
 * srnic_ack_timeout - the requester's local ACK timer expires
 * @ibqp: the requester's QP
 * @psn: the oldest PSN not acknowledged
 * @value: retries left (the QP's retry_cnt counts down; 7 never ends)
 */
DEFINE_EVENT(srnic_qp_psn, srnic_ack_timeout,
	TP_PROTO(const struct ib_qp *ibqp, u32 psn, u32 value),
	TP_ARGS(ibqp, psn, value));

/*
 * srnic_rnr_wait - the requester received an RNR NAK: it waits, then
 * sends again
 * @ibqp: the requester's QP
 * @psn: the PSN it sends again
 * @value: the NAK's RNR timer code (IBTA table 45: 0 is 655.36 ms, 1 to
 *	31 are 0.01 to 491.52 ms)
 */
DEFINE_EVENT_PRINT(srnic_qp_psn, srnic_rnr_wait,
	TP_PROTO(const struct ib_qp *ibqp, u32 psn, u32 value),
	TP_ARGS(ibqp, psn, value),
	TP_printk("%s qpn=%u psn=%u rnr_timer=%u", __entry->dev,
		  __entry->qpn, __entry->psn, __entry->value));

/**
 * srnic_cnp - a CNP is sent (for a packet marked Congestion Experienced)
 * or received
 * @ibdev: the device
 * @qpn: the QP that sends it, or the one it names
 * @sent: sent (else received)
 */
TRACE_EVENT(srnic_cnp,
	TP_PROTO(const struct ib_device *ibdev, u32 qpn, bool sent),
	TP_ARGS(ibdev, qpn, sent),
	TP_STRUCT__entry(
		__array(char, dev, IB_DEVICE_NAME_MAX)
		__field(u32, qpn)
		__field(bool, sent)
	),
	TP_fast_assign(
		strscpy(__entry->dev, dev_name(&ibdev->dev),
			IB_DEVICE_NAME_MAX);
		__entry->qpn = qpn;
		__entry->sent = sent;
	),
	TP_printk("%s qpn=%u %s", __entry->dev, __entry->qpn,
		  __entry->sent ? "sent" : "received")
);

/**
 * srnic_qp_state - a QP enters a state
 * @ibqp: the QP
 * @from: the state it was in (IB_QPS_*)
 * @to: the state it enters
 */
TRACE_EVENT(srnic_qp_state,
	TP_PROTO(const struct ib_qp *ibqp, u8 from, u8 to),
	TP_ARGS(ibqp, from, to),
	TP_STRUCT__entry(
		__array(char, dev, IB_DEVICE_NAME_MAX)
		__field(u32, qpn)
		__field(u8, from)
		__field(u8, to)
	),
	TP_fast_assign(
		strscpy(__entry->dev, dev_name(&ibqp->device->dev),
			IB_DEVICE_NAME_MAX);
		__entry->qpn = ibqp->qp_num;
		__entry->from = from;
		__entry->to = to;
	),
	TP_printk("%s qpn=%u %s -> %s", __entry->dev, __entry->qpn,
		  srnic_show_qp_state(__entry->from),
		  srnic_show_qp_state(__entry->to))
);

/**
 * srnic_mr_reg - a memory region is registered, or a fast registration
 * work request (IB_WR_REG_MR) maps one
 * @ibdev: the device
 * @key: its key (srnic's lkey and rkey are one)
 * @iova: its first address
 * @length: its bytes
 * @access: its IB_ACCESS_* flags
 * @pages: pages it holds (0 for a DMA MR and device memory)
 */
TRACE_EVENT(srnic_mr_reg,
	TP_PROTO(const struct ib_device *ibdev, u32 key, u64 iova, u64 length,
		 int access, u32 pages),
	TP_ARGS(ibdev, key, iova, length, access, pages),
	TP_STRUCT__entry(
		__array(char, dev, IB_DEVICE_NAME_MAX)
		__field(u32, key)
		__field(u64, iova)
		__field(u64, length)
		__field(int, access)
		__field(u32, pages)
	),
	TP_fast_assign(
		strscpy(__entry->dev, dev_name(&ibdev->dev),
			IB_DEVICE_NAME_MAX);
		__entry->key = key;
		__entry->iova = iova;
		__entry->length = length;
		__entry->access = access;
		__entry->pages = pages;
	),
	TP_printk("%s key=%#x iova=%#llx length=%llu access=%#x pages=%u",
		  __entry->dev, __entry->key, __entry->iova, __entry->length,
		  __entry->access, __entry->pages)
);

/**
 * srnic_mr_dereg - a memory region is deregistered
 * @ibdev: the device
 * @key: its key
 */
TRACE_EVENT(srnic_mr_dereg,
	TP_PROTO(const struct ib_device *ibdev, u32 key),
	TP_ARGS(ibdev, key),
	TP_STRUCT__entry(
		__array(char, dev, IB_DEVICE_NAME_MAX)
		__field(u32, key)
	),
	TP_fast_assign(
		strscpy(__entry->dev, dev_name(&ibdev->dev),
			IB_DEVICE_NAME_MAX);
		__entry->key = key;
	),
	TP_printk("%s key=%#x", __entry->dev, __entry->key)
);

#endif /* _SRNIC_TRACE_H */

/* Out of the kernel tree: define_trace.h finds this file through these. */
#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE srnic_trace
#include <trace/define_trace.h>
