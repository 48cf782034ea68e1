// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: per-device packet counters, exported to `rdma statistic` as the
 * port's hardware counters.
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
	/* srnic's own: selective repeat (srnic_resp.c, srnic_req.c) */
	[SRNIC_CNT_RX_OOO_KEPT] = { .name = "rx_out_of_sequence_kept" },
	[SRNIC_CNT_TX_NAK_SELECTIVE] = { .name = "tx_nak_selective" },
	[SRNIC_CNT_RX_NAK_SELECTIVE] = { .name = "rx_nak_selective" },
	[SRNIC_CNT_SELECTIVE_RETRANSMITS] = {
		.name = "selective_retransmits" },
	[SRNIC_CNT_RX_READ_KEPT] = { .name = "rx_read_responses_kept" },
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
