// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Completion queues: create/destroy (commands and the ring mapping), and the
// fast path: poll_cq over CqReader and req_notify_cq in shared memory.
#ifndef SRNIC_CQ_H
#define SRNIC_CQ_H

#include "queue.h"
#include "ring_mapping.h"
#include "spinlock.h"
#include "verbs_driver_abi.h"

#include <rdma/srnic-abi.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace srnic
{

// Completions the provider made itself (the direct path, direct_path.h), in
// order; poll_cq returns them before the ring's. Few: the direct path only
// completes into a CQ whose ring is empty.
class DirectCompletions
{
    public:
	static constexpr uint32_t capacity = 16;

	[[nodiscard]] bool full() const noexcept { return tail_ - head_ == capacity; }
	[[nodiscard]] const srnic_cqe *front() const noexcept
	{
		return head_ == tail_ ? nullptr : &cqes_[head_ % capacity];
	}
	void pop() noexcept { ++head_; }
	void push(const srnic_cqe &cqe) noexcept { cqes_[tail_++ % capacity] = cqe; }
	// Drops those of QP qpn, keeping the others in order.
	void discard_qp(uint32_t qpn) noexcept
	{
		uint32_t kept = head_;
		for (uint32_t i = head_; i != tail_; ++i)
			if (cqes_[i % capacity].qp_num != qpn)
				cqes_[kept++ % capacity] = cqes_[i % capacity];
		tail_ = kept;
	}

    private:
	std::array<srnic_cqe, capacity> cqes_{};
	uint32_t head_ = 0;
	uint32_t tail_ = 0;
};

struct Cq {
	verbs_cq vcq; // first: libibverbs hands back &vcq.cq
	RingMapping ring;
	std::optional<CqReader> reader; // set once the ring is mapped
	SpinLock lock;			// pollers and arming threads of this CQ
	uint32_t cqn = 0;
	// The direct path's completions, under lock. direct_ok: it may
	// complete into this CQ (one that raises no events; poll_cq and the
	// extended poll API both return them before the ring's).
	DirectCompletions direct;
	bool direct_ok = false;
	// The extended poll API (cq_ex.h): the completion the ibv_wc_read_*
	// calls read, from a successful start_poll/next_poll to the next call,
	// and whether it is direct's front; lock is held from a successful
	// start_poll to end_poll.
	const srnic_cqe *ex_cqe = nullptr;
	bool ex_cqe_direct = false;
};

[[nodiscard]] inline Cq *to_srnic_cq(ibv_cq *ibcq) noexcept
{
	static_assert(offsetof(Cq, vcq) == 0);
	return reinterpret_cast<Cq *>(ibcq);
}

struct CreateCqCmd {
	struct ibv_create_cq ibv_cmd;
	srnic_create_cq_req driver;
};
static_assert(sizeof(CreateCqCmd) == sizeof(struct ibv_create_cq) + sizeof(srnic_create_cq_req));

struct CreateCqResp {
	ibv_create_cq_resp_core ibv_resp;
	srnic_create_cq_resp driver;
};
static_assert(sizeof(CreateCqResp) ==
	      sizeof(ibv_create_cq_resp_core) + sizeof(srnic_create_cq_resp));

struct ResizeCqCmd {
	struct ibv_resize_cq ibv_cmd;
	srnic_resize_cq_req driver;
};
static_assert(sizeof(ResizeCqCmd) == sizeof(struct ibv_resize_cq) + sizeof(srnic_resize_cq_req));

struct ResizeCqResp {
	ibv_resize_cq_resp_core ibv_resp;
	srnic_resize_cq_resp driver;
};
static_assert(sizeof(ResizeCqResp) ==
	      sizeof(ibv_resize_cq_resp_core) + sizeof(srnic_resize_cq_resp));

// The CQE flag values are libibverbs' own (srnic-abi.h says so).
static_assert(int{SRNIC_CQE_GRH} == int{IBV_WC_GRH} &&
	      int{SRNIC_CQE_WITH_IMM} == int{IBV_WC_WITH_IMM} &&
	      int{SRNIC_CQE_WITH_INV} == int{IBV_WC_WITH_INV} &&
	      int{SRNIC_CQE_TM_SYNC_REQ} == int{IBV_WC_TM_SYNC_REQ} &&
	      int{SRNIC_CQE_TM_MATCH} == int{IBV_WC_TM_MATCH} &&
	      int{SRNIC_CQE_TM_DATA_VALID} == int{IBV_WC_TM_DATA_VALID});
// And so are tag matching's opcodes and statuses.
static_assert(int{SRNIC_WC_TM_ERR} == int{IBV_WC_TM_ERR} &&
	      int{SRNIC_WC_TM_RNDV_INCOMPLETE} == int{IBV_WC_TM_RNDV_INCOMPLETE} &&
	      int{SRNIC_WC_TM_ADD} == int{IBV_WC_TM_ADD} &&
	      int{SRNIC_WC_TM_DEL} == int{IBV_WC_TM_DEL} &&
	      int{SRNIC_WC_TM_SYNC} == int{IBV_WC_TM_SYNC} &&
	      int{SRNIC_WC_TM_RECV} == int{IBV_WC_TM_RECV} &&
	      int{SRNIC_WC_TM_NO_TAG} == int{IBV_WC_TM_NO_TAG});

// ---- CQE decoding ------------------------------------------------------------
//
// poll_cq (cqe_to_wc) and the extended readers (cq_ex.cpp) read a CQE's
// fields only through these.

[[nodiscard]] inline ibv_wc_status cqe_status(const srnic_cqe &cqe) noexcept
{
	return static_cast<ibv_wc_status>(cqe.status);
}

[[nodiscard]] inline ibv_wc_opcode cqe_opcode(const srnic_cqe &cqe) noexcept
{
	return static_cast<ibv_wc_opcode>(cqe.opcode);
}

// IBV_WC_* flags (the CQE's are the same values).
[[nodiscard]] inline unsigned int cqe_wc_flags(const srnic_cqe &cqe) noexcept
{
	return cqe.wc_flags;
}

[[nodiscard]] inline bool cqe_has_inv(const srnic_cqe &cqe) noexcept
{
	return cqe.wc_flags & SRNIC_CQE_WITH_INV;
}

// Immediate data, as received (big endian); valid with IBV_WC_WITH_IMM.
[[nodiscard]] inline __be32 cqe_imm_data(const srnic_cqe &cqe) noexcept
{
	return cqe.imm_data;
}

// The rkey a SEND with invalidate invalidated; valid with IBV_WC_WITH_INV.
[[nodiscard]] inline uint32_t cqe_invalidated_rkey(const srnic_cqe &cqe) noexcept
{
	return cqe.invalidated_rkey;
}

// A completion as ibv_wc.
inline void cqe_to_wc(const srnic_cqe &cqe, ibv_wc &wc) noexcept
{
	wc.wr_id = cqe.wr_id;
	wc.status = cqe_status(cqe);
	wc.opcode = cqe_opcode(cqe);
	wc.vendor_err = cqe.vendor_err;
	wc.byte_len = cqe.byte_len;
	if (cqe_has_inv(cqe))
		wc.invalidated_rkey = cqe_invalidated_rkey(cqe);
	else
		wc.imm_data = cqe_imm_data(cqe);
	wc.qp_num = cqe.qp_num;
	wc.src_qp = cqe.src_qp;
	wc.wc_flags = cqe_wc_flags(cqe);
	wc.pkey_index = cqe.pkey_index;
	wc.slid = cqe.slid;
	wc.sl = cqe.sl;
	wc.dlid_path_bits = cqe.dlid_path_bits;
}

// The poll_cq verb: up to num_entries completions, in order.
inline int poll_cq(ibv_cq *ibcq, int num_entries, ibv_wc *wc) noexcept
{
	Cq &cq = *to_srnic_cq(ibcq);
	SpinGuard guard(cq.lock);
	CqReader &reader = *cq.reader;
	int n = 0;

	for (; n < num_entries; ++n) {
		const srnic_cqe *cqe = cq.direct.front();
		if (!cqe)
			break;
		cqe_to_wc(*cqe, wc[n]);
		cq.direct.pop();
	}
	const int direct = n;
	for (; n < num_entries; ++n) {
		const srnic_cqe *cqe = reader.check_owner_then_acquire_cqe();
		if (!cqe)
			break;
		cqe_to_wc(*cqe, wc[n]);
		reader.consume_cqe();
	}
	if (n > direct)
		reader.release_consumed();
	return n;
}

// The req_notify_cq verb, without a syscall: write notify, then publish it
// with a release store of notify_seq + 1, then a full fence that orders the
// arm before the caller's next poll; it pairs with the kernel's smp_mb()
// between writing a CQE and reading the arm, so either that poll sees the
// CQE or the kernel sees the arm and raises the event.
inline int req_notify_cq(ibv_cq *ibcq, int solicited_only) noexcept
{
	Cq &cq = *to_srnic_cq(ibcq);
	SpinGuard guard(cq.lock);
	srnic_queue_ctrl &ctrl = cq.reader->ring().ctrl();

	std::atomic_ref<__u32>(ctrl.notify)
		.store(solicited_only ? SRNIC_CQ_NOTIFY_SOLICITED : SRNIC_CQ_NOTIFY_NEXT,
		       std::memory_order_relaxed);
	store_release(ctrl.notify_seq, load_relaxed(ctrl.notify_seq) + 1);
	std::atomic_thread_fence(std::memory_order_seq_cst);
	return 0;
}

// The create_cq verb; nullptr with errno set on failure.
[[nodiscard]] ibv_cq *create_cq(ibv_context *ibctx, int cqe, ibv_comp_channel *channel,
				int comp_vector) noexcept;

// Maps the ring of a CQ the kernel just created, described by resp; on
// failure destroys the kernel's CQ and returns the errno.
[[nodiscard]] int map_created_cq(Cq &cq, ibv_context *ibctx,
				 const srnic_create_cq_resp &resp) noexcept;

// The resize_cq verb: the kernel moves the unpolled CQEs to a new ring,
// which replaces the mapping of the old one; returns 0 or a positive errno
// (EINVAL: more CQEs wait to be polled than cqe).
int resize_cq(ibv_cq *ibcq, int cqe) noexcept;

// The destroy_cq verb; the CQ stays valid if the kernel refuses.
int destroy_cq(ibv_cq *ibcq) noexcept;

} // namespace srnic

#endif // SRNIC_CQ_H
