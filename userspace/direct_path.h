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
#ifndef SRNIC_DIRECT_PATH_H
#define SRNIC_DIRECT_PATH_H

#include "verbs_driver_abi.h"

#include <rdma/srnic-abi.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

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
	DirectWindow() noexcept = default;
	DirectWindow(const DirectWindow &) = delete;
	DirectWindow &operator=(const DirectWindow &) = delete;
	DirectWindow(DirectWindow &&other) noexcept { *this = std::move(other); }
	DirectWindow &operator=(DirectWindow &&other) noexcept;
	~DirectWindow() { reset(); }

	// Maps what the kernel granted. Returns 0 or a positive errno.
	[[nodiscard]] int map(int cmd_fd, uint32_t rkey, const srnic_direct_window_resp &resp) noexcept;
	void reset() noexcept;

	[[nodiscard]] bool serves(uint32_t rkey, uint32_t gen) const noexcept
	{
		return base_ && rkey_ == rkey && gen_ == gen;
	}
	// Unmapped, or revoked (granted under another generation).
	[[nodiscard]] bool stale(uint32_t gen) const noexcept { return !base_ || gen_ != gen; }
	// Where [iova, iova + length) of the MR is mapped, or nullptr outside it.
	[[nodiscard]] std::byte *at(uint64_t iova, uint64_t length) const noexcept;

    private:
	std::byte *base_ = nullptr;
	size_t size_ = 0;
	uint32_t rkey_ = 0;
	uint32_t gen_ = 0;
	uint64_t iova_ = 0;
	uint64_t length_ = 0;
	uint32_t page_offset_ = 0;
};

// A QP's windows and what the kernel refused it. Guarded by the QP's sq_lock.
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

	// The window serving rkey under gen, asking the kernel for one if
	// there is none and no recent refusal: nullptr if none.
	[[nodiscard]] const DirectWindow *window(int cmd_fd, uint32_t qp_handle, uint32_t rkey,
						 uint32_t gen) noexcept;

    private:
	[[nodiscard]] bool refused_recently(uint32_t rkey) noexcept;
	void refuse(uint32_t rkey, int err) noexcept;

	std::array<DirectWindow, max_windows> windows_;
	size_t next_victim_ = 0;
	bool disabled_ = false;		// EOPNOTSUPP: never on this connection
	uint32_t qp_backoff_ = 0;	// EAGAIN: posts left before asking again
	uint32_t refused_rkey_ = 0;	// the last R_Key refused
	uint32_t rkey_backoff_ = 0;	// posts left before asking for it again
};

// Executes wr on the direct path if it can: true when the WRITE is done (and
// its completion queued, if signaled). false sends it to the engine.
[[nodiscard]] bool post_send_direct(Qp &qp, const ibv_send_wr &wr) noexcept;

} // namespace srnic

#endif // SRNIC_DIRECT_PATH_H
