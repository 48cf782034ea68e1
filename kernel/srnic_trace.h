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

#endif /* _SRNIC_TRACE_H */

/* Out of the kernel tree: define_trace.h finds this file through these. */
#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE srnic_trace
#include <trace/define_trace.h>
