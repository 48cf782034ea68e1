// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Receive side scaling: work queues (ibv_create_wq, IBV_WQT_RQ), their
// indirection tables, and the hash QPs that spread received frames over
// them (the kernel's srnic_rss.c does the spreading). A WQ is an RQ of its
// own: its ring is mapped as an SRQ's is, and post_wq_recv writes receive
// WQEs into it exactly as post_recv does for an RQ, with no syscall.
#ifndef SRNIC_WQ_H
#define SRNIC_WQ_H

#include "queue.h"
#include "ring_mapping.h"
#include "spinlock.h"
#include "verbs_driver_abi.h"

#include <rdma/srnic-abi.h>

#include <cstddef>
#include <cstdint>
#include <optional>

namespace srnic
{

struct Wq {
	ibv_wq wq; // first: libibverbs hands back &wq
	RingMapping ring;
	std::optional<ProducerView> rq; // set once the ring is mapped
	SpinLock lock;			// posting threads
	uint32_t max_sge = 0;
};

[[nodiscard]] inline Wq *to_srnic_wq(ibv_wq *ibwq) noexcept
{
	static_assert(offsetof(Wq, wq) == 0);
	return reinterpret_cast<Wq *>(ibwq);
}

struct CreateWqCmd {
	struct ibv_create_wq ibv_cmd;
	srnic_create_wq_req driver;
};
static_assert(sizeof(CreateWqCmd) == sizeof(struct ibv_create_wq) + sizeof(srnic_create_wq_req));

struct CreateWqResp {
	ib_uverbs_ex_create_wq_resp ibv_resp;
	srnic_create_wq_resp driver;
};
static_assert(sizeof(CreateWqResp) ==
	      sizeof(ib_uverbs_ex_create_wq_resp) + sizeof(srnic_create_wq_resp));

// The work queue verbs; create_wq: nullptr with errno set on failure, the
// others 0 or an errno.
[[nodiscard]] ibv_wq *create_wq(ibv_context *ibctx, ibv_wq_init_attr *attr) noexcept;
int modify_wq(ibv_wq *ibwq, ibv_wq_attr *attr) noexcept;
int destroy_wq(ibv_wq *ibwq) noexcept;

// The indirection table verbs, likewise.
[[nodiscard]] ibv_rwq_ind_table *create_rwq_ind_table(ibv_context *ibctx,
						      ibv_rwq_ind_table_init_attr *attr) noexcept;
int destroy_rwq_ind_table(ibv_rwq_ind_table *table) noexcept;

// A hash QP (create_qp_ex with IBV_QP_INIT_ATTR_IND_TABLE and _RX_HASH): a
// raw packet QP with no SQ or RQ of its own. nullptr with errno set.
[[nodiscard]] ibv_qp *create_hash_qp(ibv_context *ibctx, ibv_qp_init_attr_ex *attr) noexcept;

} // namespace srnic

#endif // SRNIC_WQ_H
