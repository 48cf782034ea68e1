// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The direct path: an RDMA WRITE of an RC QP whose destination is a QP of the
// same device is copied by the provider itself, straight into the
// destination MR, which the kernel maps into this process as a "direct
// window" (SRNIC_METHOD_QP_DIRECT_WINDOW, srnic-abi.h; kernel/srnic_direct.c).
// No engine, no syscall after the first WRITE to an R_Key; the completion is
// queued in the CQ object (Cq::direct), ahead of the ring.
//
// Only when nothing can tell the difference: the QP in RTS with nothing of
// it in flight (its SQ drained by the engine) and its send CQ's ring polled
// empty, so the completion comes after every earlier one of the QP; every
// local SGE inside an MR of the QP's PD registered in this process
// (MrRegistry); a payload of at most direct_max_bytes. Anything else, and a
// copy during which the kernel revoked the QP's windows (direct_gen moved),
// goes to the engine as before.
//
// SENDs the same way, through a loan (SRNIC_METHOD_QP_DIRECT_LOAN): the
// destination's RQ and receive CQ mapped here. The provider takes the
// receive WQE, copies the payload through receive windows (the destination's
// MRs by L_Key), writes the receive CQE but its owner byte, then moves the
// RQ's consumer index (the commit), stores the owner byte and publishes the
// CQ's producer index, all while the kernel says the loan is live
// (srnic_queue_ctrl.loan_live); a loan that ended around the commit is
// settled by the kernel's loan_done/loan_end.
#ifndef SRNIC_DIRECT_PATH_H
#define SRNIC_DIRECT_PATH_H

#include "queue.h"
#include "shared_mapping.h"
#include "verbs_driver_abi.h"

#include <rdma/srnic-abi.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <span>

namespace srnic
{

struct Qp;

// The largest WRITE the provider copies itself; longer ones go to the
// engine, whose kernel copy is faster than this process's under emulation.
inline constexpr uint64_t direct_max_bytes = 4096;

// One mapped window: the MR of rkey, valid while the QP's direct_gen is gen.
class DirectWindow
{
    public:
	// Maps what the kernel granted for key (an R_Key, or an L_Key of the
	// destination's receive WQEs with recv). Returns 0 or a positive errno.
	[[nodiscard]] int map(int cmd_fd, uint32_t key, bool recv,
			      const srnic_direct_window_resp &resp) noexcept;
	void reset() noexcept { mapping_.reset(); }

	[[nodiscard]] bool serves(uint32_t key, bool recv, uint32_t gen) const noexcept
	{
		return mapping_.mapped() && key_ == key && recv_ == recv && gen_ == gen;
	}
	// Unmapped, or revoked (granted under another generation).
	[[nodiscard]] bool stale(uint32_t gen) const noexcept
	{
		return !mapping_.mapped() || gen_ != gen;
	}
	// Where [iova, iova + length) of the MR is mapped, or nullptr outside it.
	[[nodiscard]] std::byte *at(uint64_t iova, uint64_t length) const noexcept;

    private:
	SharedMapping mapping_;
	uint32_t key_ = 0;
	bool recv_ = false;
	uint32_t gen_ = 0;
	uint64_t iova_ = 0;
	uint64_t length_ = 0;
	uint32_t page_offset_ = 0;
};

// A loan: the destination's RQ and receive CQ rings, mapped, for as long as
// the poster's SQ control record says loan_live == id().
class DirectLoan
{
    public:
	// Maps what the kernel granted, its rings' control records ctrl_size
	// bytes. Returns 0 or a positive errno (EPROTO: a geometry that cannot
	// be trusted).
	[[nodiscard]] int map(int cmd_fd, uint32_t ctrl_size,
			      const srnic_direct_loan_resp &resp) noexcept;
	void reset() noexcept;

	[[nodiscard]] bool mapped() const noexcept { return mapping_.mapped(); }
	[[nodiscard]] uint32_t id() const noexcept { return id_; }
	[[nodiscard]] uint32_t dest_qpn() const noexcept { return dest_qpn_; }
	[[nodiscard]] uint32_t rq_max_sge() const noexcept { return rq_max_sge_; }
	[[nodiscard]] RingView rq() const noexcept
	{
		return RingView(mapping_.data() + rq_offset_, ctrl_size_, rq_num_entries_,
				rq_entry_size_);
	}
	[[nodiscard]] RingView cq() const noexcept
	{
		return RingView(mapping_.data() + cq_offset_, ctrl_size_, cq_num_entries_,
				sizeof(srnic_cqe));
	}

    private:
	SharedMapping mapping_;
	uint32_t id_ = 0;
	uint32_t dest_qpn_ = 0;
	uint32_t ctrl_size_ = 0;
	uint32_t rq_offset_ = 0;
	uint32_t rq_num_entries_ = 0;
	uint32_t rq_entry_size_ = 0;
	uint32_t rq_max_sge_ = 0;
	uint32_t cq_offset_ = 0;
	uint32_t cq_num_entries_ = 0;
};

// A QP's windows, its loan and what the kernel refused it. Guarded by the
// QP's sq_lock.
class DirectPath
{
    public:
	// Posts the QP's engine path takes before it asks the kernel again
	// after a refusal that may pass (EAGAIN, or one R_Key refused).
	static constexpr uint32_t retry_after_posts = 256;
	static constexpr size_t max_windows = 8;

	[[nodiscard]] bool disabled() const noexcept { return disabled_; }
	// Forgets windows and refusals: the QP was modified.
	void reset() noexcept;

	// The window serving key (an R_Key, or with recv a receive L_Key) under
	// gen, asking the kernel for one if there is none and no recent
	// refusal: nullptr if none.
	[[nodiscard]] const DirectWindow *window(int cmd_fd, uint32_t qp_handle, uint32_t key,
						 bool recv, uint32_t gen) noexcept;

	// The loan live by sq_ctrl, asking the kernel for one if there is none
	// and no recent refusal: nullptr if none.
	[[nodiscard]] DirectLoan *loan(int cmd_fd, uint32_t qp_handle, uint32_t ctrl_size,
				       srnic_queue_ctrl &sq_ctrl) noexcept;
	// The loan ended: forget it.
	void drop_loan() noexcept { loan_.reset(); }

    private:
	using Windows = std::array<DirectWindow, max_windows>;

	[[nodiscard]] bool refused_recently(uint32_t key) noexcept;
	void refuse(uint32_t key, int err) noexcept;
	// The windows, none before the first is asked for.
	[[nodiscard]] std::span<DirectWindow> windows() noexcept
	{
		return windows_ ? std::span<DirectWindow>(*windows_) : std::span<DirectWindow>();
	}

	// Allocated on first use: most QPs (any whose peer is over the wire)
	// never have a window, and a QP's memory counts at scale.
	std::unique_ptr<Windows> windows_;
	DirectLoan loan_;
	size_t next_victim_ = 0;
	bool disabled_ = false;		// EOPNOTSUPP: never on this connection
	bool loan_disabled_ = false;	// EOPNOTSUPP for a loan
	uint32_t qp_backoff_ = 0;	// EAGAIN: posts left before asking again
	uint32_t refused_key_ = 0;	// the last key refused
	uint32_t key_backoff_ = 0;	// posts left before asking for it again
	uint32_t loan_backoff_ = 0;	// posts left before asking for a loan again
};

// Executes wr on the direct path if it can: true when the WRITE or SEND is
// done (and its completion queued, if signaled). false sends it to the engine.
[[nodiscard]] bool post_send_direct(Qp &qp, const ibv_send_wr &wr) noexcept;
// The same for a WQE the ibv_wr_* builders wrote into the SQ and that is
// not published yet (wr_complete of a batch of one), with sq_lock held: true
// when it was executed here (the caller then discards the slot).
[[nodiscard]] bool post_wqe_direct_locked(Qp &qp, const srnic_send_wqe &wqe) noexcept;

} // namespace srnic

#endif // SRNIC_DIRECT_PATH_H
