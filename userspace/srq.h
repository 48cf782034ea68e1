// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Shared receive queues: create/modify/query/destroy (commands and the ring
// mapping), and the fast path: post_srq_recv writes receive WQEs into the
// mapped ring through ProducerView exactly as post_recv does for an RQ (the
// same format and the same post_chain), with no syscall: the kernel takes
// them when messages arrive and never asks for a doorbell.
#ifndef SRNIC_SRQ_H
#define SRNIC_SRQ_H

#include "qp.h"
#include "queue.h"
#include "ring_mapping.h"
#include "spinlock.h"
#include "verbs_driver_abi.h"

#include <rdma/srnic-abi.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace srnic
{

struct Srq {
	verbs_srq vsrq; // first: libibverbs hands back &vsrq.srq
	RingMapping ring;
	std::optional<ProducerView> rq; // set once the ring is mapped
	SpinLock lock;			// posting threads
	uint32_t max_sge = 0;
	uint32_t srqn = 0;
	// A tag-matching SRQ: its list's size (0 for others), and the handle
	// the next IBV_WR_TAG_ADD tries first (the kernel refuses one in use).
	uint32_t tm_max_tags = 0;
	std::atomic<uint32_t> tm_next_handle{0};
};

[[nodiscard]] inline Srq *to_srnic_srq(ibv_srq *ibsrq) noexcept
{
	static_assert(offsetof(Srq, vsrq) == 0);
	static_assert(offsetof(verbs_srq, srq) == 0);
	return reinterpret_cast<Srq *>(ibsrq);
}

struct CreateSrqCmd {
	struct ibv_create_xsrq ibv_cmd;
	srnic_create_srq_req driver;
};
static_assert(sizeof(CreateSrqCmd) == sizeof(struct ibv_create_xsrq) + sizeof(srnic_create_srq_req));

struct ModifySrqCmd {
	struct ibv_modify_srq ibv_cmd;
	srnic_modify_srq_req driver;
};
static_assert(sizeof(ModifySrqCmd) == sizeof(struct ibv_modify_srq) + sizeof(srnic_modify_srq_req));

struct CreateSrqResp {
	ibv_create_srq_resp_core ibv_resp;
	srnic_create_srq_resp driver;
};
static_assert(sizeof(CreateSrqResp) ==
	      sizeof(ibv_create_srq_resp_core) + sizeof(srnic_create_srq_resp));

// The doorbell: an empty POST_SRQ_RECV (out of line: a syscall). srnic's
// kernel never sets NEED_WAKEUP on an SRQ; this only keeps the protocol whole.
void ring_srq_doorbell(ibv_srq *ibsrq) noexcept;

// The post_srq_recv verb.
inline int post_srq_recv(ibv_srq *ibsrq, ibv_recv_wr *wr, ibv_recv_wr **bad_wr) noexcept
{
	Srq &srq = *to_srnic_srq(ibsrq);
	bool doorbell;
	const int err = post_chain(
		*srq.rq, srq.lock, wr, bad_wr,
		[&srq](std::byte *slot, const ibv_recv_wr &w) {
			return write_recv_wqe(srq.max_sge, slot, w);
		},
		doorbell);
	if (doorbell)
		ring_srq_doorbell(ibsrq);
	return err;
}

// The create_srq and create_srq_ex verbs (basic, XRC and tag-matching
// SRQs); nullptr with errno set on failure.
[[nodiscard]] ibv_srq *create_srq(ibv_pd *pd, ibv_srq_init_attr *attr) noexcept;
[[nodiscard]] ibv_srq *create_srq_ex(ibv_context *ibctx, ibv_srq_init_attr_ex *attr) noexcept;

// The get_srq_num verb: the number XRC senders put in their WQEs
// (EOPNOTSUPP for a basic SRQ).
int get_srq_num(ibv_srq *ibsrq, uint32_t *srq_num) noexcept;
int modify_srq(ibv_srq *ibsrq, ibv_srq_attr *attr, int attr_mask) noexcept;
int query_srq(ibv_srq *ibsrq, ibv_srq_attr *attr) noexcept;
int destroy_srq(ibv_srq *ibsrq) noexcept;

// The post_srq_ops verb of a tag-matching SRQ: each operation is one
// command (a modify_srq carrying struct srnic_tm_op), in order; an ADD
// picks a free handle. EINVAL for another SRQ or a malformed operation.
int post_srq_ops(ibv_srq *ibsrq, ibv_ops_wr *wr, ibv_ops_wr **bad_wr) noexcept;

} // namespace srnic

#endif // SRNIC_SRQ_H
