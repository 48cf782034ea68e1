// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: per-device packet counters, exported to `rdma statistic` as the
 * port's hardware counters, and per-QP counters through ib_core's counter
 * API (`rdma statistic qp set link DEV/1 auto type on`, `rdma statistic qp
 * bind`): the same names, for the QPs bound to each counter.
 */

#include "srnic.h"

/* Names as `rdma statistic show link DEV/1` prints them. */
static const struct rdma_stat_desc srnic_counter_descs[] = {
	[SRNIC_CNT_RX_PACKETS] = { .name = "rx_packets" },
	[SRNIC_CNT_RX_DROP_BAD_IP] = { .name = "rx_drop_bad_ip" },
	[SRNIC_CNT_RX_DROP_TOO_SHORT] = { .name = "rx_drop_too_short" },
	[SRNIC_CNT_RX_DROP_BAD_TVER] = { .name = "rx_drop_bad_tver" },
	[SRNIC_CNT_RX_DROP_BAD_OPCODE] = { .name = "rx_drop_bad_opcode" },
	[SRNIC_CNT_RX_DROP_BAD_PAD] = { .name = "rx_drop_bad_pad" },
	[SRNIC_CNT_RX_DROP_BAD_PAYLOAD] = { .name = "rx_drop_bad_payload" },
	[SRNIC_CNT_RX_DROP_BAD_PKEY] = { .name = "rx_drop_bad_pkey" },
	[SRNIC_CNT_RX_DROP_BAD_ICRC] = { .name = "rx_drop_bad_icrc" },
	[SRNIC_CNT_RX_DROP_NO_QP] = { .name = "rx_drop_no_qp" },
	[SRNIC_CNT_RX_DROP_BAD_QP] = { .name = "rx_drop_bad_qp" },
	[SRNIC_CNT_RX_DROP_QUEUE_FULL] = { .name = "rx_drop_queue_full" },
	[SRNIC_CNT_RX_DROP_UNEXPECTED] = { .name = "rx_drop_unexpected" },
	[SRNIC_CNT_RX_DUPLICATE] = { .name = "rx_duplicate_requests" },
	[SRNIC_CNT_RX_OUT_OF_SEQUENCE] = { .name = "rx_out_of_sequence" },
	[SRNIC_CNT_RX_DROP_STALE] = { .name = "rx_stale_requests" },
	[SRNIC_CNT_TX_PACKETS] = { .name = "tx_packets" },
	[SRNIC_CNT_TX_ERRORS] = { .name = "tx_errors" },
	[SRNIC_CNT_TX_NAK_SEQ] = { .name = "tx_nak_psn_sequence" },
	[SRNIC_CNT_TX_NAK_RNR] = { .name = "tx_nak_rnr" },
	[SRNIC_CNT_TX_NAK_OTHER] = { .name = "tx_nak_other" },
	[SRNIC_CNT_RETRANSMITS] = { .name = "retransmits" },
	[SRNIC_CNT_TIMEOUTS] = { .name = "local_ack_timeouts" },
	[SRNIC_CNT_RNR_NAKS_RECEIVED] = { .name = "rnr_naks_received" },
	[SRNIC_CNT_RX_DROP_BAD_QKEY] = { .name = "rx_drop_bad_qkey" },
	[SRNIC_CNT_RX_DROP_NO_RECV_WQE] = { .name = "rx_drop_no_recv_wqe" },
	[SRNIC_CNT_RX_DROP_UC] = { .name = "rx_drop_uc_message" },
	[SRNIC_CNT_DIRECT_WINDOWS] = { .name = "direct_windows" },
	[SRNIC_CNT_DIRECT_LOANS] = { .name = "direct_loans" },
	[SRNIC_CNT_TX_BATCHES] = { .name = "tx_batches" },
	/* mlx5's names, for the same events */
	[SRNIC_CNT_NP_ECN_MARKED] = { .name = "np_ecn_marked_roce_packets" },
	[SRNIC_CNT_NP_CNP_SENT] = { .name = "np_cnp_sent" },
	[SRNIC_CNT_RP_CNP_HANDLED] = { .name = "rp_cnp_handled" },
	[SRNIC_CNT_RP_CNP_IGNORED] = { .name = "rp_cnp_ignored" },
	/* srnic's own: the rate limiter's changes (srnic_rate.c) */
	[SRNIC_CNT_RP_RATE_DECREASES] = { .name = "rp_rate_decreases" },
	[SRNIC_CNT_RP_RATE_INCREASES] = { .name = "rp_rate_increases" },
	[SRNIC_CNT_RP_RATE_WAITS] = { .name = "rp_rate_waits" },
	/* srnic's own: packet pacing (IB_QP_RATE_LIMIT, srnic_rate.c) */
	[SRNIC_CNT_TX_PACING_WAITS] = { .name = "tx_pacing_waits" },
	/* srnic's own: selective repeat (srnic_resp.c, srnic_req.c) */
	[SRNIC_CNT_RX_OOO_KEPT] = { .name = "rx_out_of_sequence_kept" },
	[SRNIC_CNT_TX_NAK_SELECTIVE] = { .name = "tx_nak_selective" },
	[SRNIC_CNT_RX_NAK_SELECTIVE] = { .name = "rx_nak_selective" },
	[SRNIC_CNT_SELECTIVE_RETRANSMITS] = {
		.name = "selective_retransmits" },
	[SRNIC_CNT_RX_READ_KEPT] = { .name = "rx_read_responses_kept" },
	/* srnic's own: raw packet QPs (srnic_raw.c) */
	[SRNIC_CNT_RAW_TX_FRAMES] = { .name = "raw_tx_frames" },
	[SRNIC_CNT_RAW_RX_FRAMES] = { .name = "raw_rx_frames" },
	/* srnic's own: tag-matching SRQs (srnic_tm.c) */
	[SRNIC_CNT_TM_MATCHED] = { .name = "tm_matched_msgs" },
	[SRNIC_CNT_TM_UNEXPECTED] = { .name = "tm_unexpected_msgs" },
	[SRNIC_CNT_TM_RNDV_READS] = { .name = "tm_rndv_reads" },
};

static_assert(ARRAY_SIZE(srnic_counter_descs) == SRNIC_NUM_COUNTERS);

/**
 * srnic_count() - count one event
 * @sdev: the device
 * @counter: which
 *
 * Context: any.
 */
void srnic_count(struct srnic_dev *sdev, enum srnic_counter counter)
{
	atomic64_inc(&sdev->counters[counter]);
}

/**
 * srnic_count_add() - count @n events at once
 * @sdev: the device
 * @counter: which
 * @n: how many
 *
 * Context: any.
 */
void srnic_count_add(struct srnic_dev *sdev, enum srnic_counter counter,
		     unsigned int n)
{
	atomic64_add(n, &sdev->counters[counter]);
}

/**
 * srnic_qp_count_add() - count @n events of a QP
 * @qp: the QP
 * @counter: which
 * @n: how many
 *
 * In the counter ib_core bound @qp to, if any, else in its device's.
 *
 * Context: any.
 */
void srnic_qp_count_add(struct srnic_qp *qp, enum srnic_counter counter,
			unsigned int n)
{
	struct srnic_qp_counter *set;

	rcu_read_lock();
	set = rcu_dereference(qp->counter);
	if (set)
		atomic64_add(n, &set->value[counter]);
	else
		srnic_count_add(to_srnic_dev(qp->ibqp.device), counter, n);
	rcu_read_unlock();
}

/**
 * srnic_qp_count() - count one event of a QP
 * @qp: the QP
 * @counter: which
 *
 * Context: any.
 */
void srnic_qp_count(struct srnic_qp *qp, enum srnic_counter counter)
{
	srnic_qp_count_add(qp, counter, 1);
}

/**
 * srnic_count_for() - count @n events of a device, of @qp if known
 * @sdev: the device
 * @qp: the QP they belong to, or NULL
 * @counter: which
 * @n: how many
 *
 * Context: any.
 */
void srnic_count_for(struct srnic_dev *sdev, struct srnic_qp *qp,
		     enum srnic_counter counter, unsigned int n)
{
	if (qp)
		srnic_qp_count_add(qp, counter, n);
	else
		srnic_count_add(sdev, counter, n);
}

/**
 * srnic_qp_counters_init() - a device's table of QP counters, empty
 * @sdev: the device
 */
void srnic_qp_counters_init(struct srnic_dev *sdev)
{
	xa_init_flags(&sdev->qp_counters, XA_FLAGS_ALLOC1);
}

/**
 * srnic_qp_counters_destroy() - free the table; ib_core released every
 * counter when it destroyed the QPs
 * @sdev: the device
 */
void srnic_qp_counters_destroy(struct srnic_dev *sdev)
{
	WARN_ON(!xa_empty(&sdev->qp_counters));
	xa_destroy(&sdev->qp_counters);
}

/**
 * srnic_counter_alloc_stats() - ib_device_ops.counter_alloc_stats
 * @counter: a counter ib_core is making
 *
 * Return: its statistics, named as the port's.
 */
struct rdma_hw_stats *srnic_counter_alloc_stats(struct rdma_counter *counter)
{
	return srnic_alloc_hw_port_stats(counter->device, counter->port);
}

/**
 * srnic_counter_bind_qp() - ib_device_ops.counter_bind_qp
 * @counter: the counter; on its first QP (id 0) srnic gives it its counts
 *	     and an id, which ib_core's restrack then files it under
 * @ibqp: the QP, not bound to another
 *
 * From now on the QP's events count in @counter. Context: process, under
 * @counter's lock.
 *
 * Return: 0, or -ENOMEM, -EBUSY (no id left).
 */
int srnic_counter_bind_qp(struct rdma_counter *counter, struct ib_qp *ibqp)
{
	struct srnic_dev *sdev = to_srnic_dev(counter->device);
	struct srnic_qp_counter *set;
	u32 id;
	int err;

	if (counter->id) {
		set = xa_load(&sdev->qp_counters, counter->id);
		if (!set)
			return -EINVAL;
	} else {
		set = kzalloc(sizeof(*set), GFP_KERNEL);
		if (!set)
			return -ENOMEM;
		err = xa_alloc(&sdev->qp_counters, &id, set, xa_limit_31b,
			       GFP_KERNEL);
		if (err) {
			kfree(set);
			return err;
		}
		counter->id = id;
	}
	rcu_assign_pointer(to_srnic_qp(ibqp)->counter, set);
	ibqp->counter = counter;
	return 0;
}

/**
 * srnic_counter_unbind_qp() - ib_device_ops.counter_unbind_qp
 * @ibqp: a QP bound to a counter
 *
 * Its events count in its device's counters again. Context: process.
 *
 * Return: 0.
 */
int srnic_counter_unbind_qp(struct ib_qp *ibqp)
{
	RCU_INIT_POINTER(to_srnic_qp(ibqp)->counter, NULL);
	ibqp->counter = NULL;
	return 0;
}

/**
 * srnic_counter_update_stats() - ib_device_ops.counter_update_stats
 * @counter: the counter
 *
 * Return: 0, or -EINVAL for a counter srnic never bound a QP to.
 */
int srnic_counter_update_stats(struct rdma_counter *counter)
{
	struct srnic_dev *sdev = to_srnic_dev(counter->device);
	struct srnic_qp_counter *set;
	int i;

	set = xa_load(&sdev->qp_counters, counter->id);
	if (!set)
		return -EINVAL;
	for (i = 0; i < SRNIC_NUM_COUNTERS; i++)
		counter->stats->value[i] = atomic64_read(&set->value[i]);
	return 0;
}

/**
 * srnic_counter_dealloc() - ib_device_ops.counter_dealloc
 * @counter: a counter with no QP left; ib_core has added its counts to the
 *	     port's history
 *
 * Return: 0.
 */
int srnic_counter_dealloc(struct rdma_counter *counter)
{
	struct srnic_dev *sdev = to_srnic_dev(counter->device);
	struct srnic_qp_counter *set;

	set = counter->id ? xa_erase(&sdev->qp_counters, counter->id) : NULL;
	if (set)
		kfree_rcu(set, rcu);	/* a QP may be counting in it still */
	return 0;
}

struct rdma_hw_stats *srnic_alloc_hw_port_stats(struct ib_device *ibdev,
						u32 port_num)
{
	return rdma_alloc_hw_stats_struct(srnic_counter_descs,
					  ARRAY_SIZE(srnic_counter_descs),
					  RDMA_HW_STATS_DEFAULT_LIFESPAN);
}

int srnic_get_hw_stats(struct ib_device *ibdev, struct rdma_hw_stats *stats,
		       u32 port_num, int index)
{
	struct srnic_dev *sdev = to_srnic_dev(ibdev);
	int i;

	for (i = 0; i < SRNIC_NUM_COUNTERS; i++)
		stats->value[i] = atomic64_read(&sdev->counters[i]);
	return SRNIC_NUM_COUNTERS;
}
