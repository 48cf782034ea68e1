// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "direct_path.h"

#include "cq.h"
#include "pd.h"
#include "qp.h"
#include "uverbs_ioctl.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <sys/mman.h>
#include <type_traits>

namespace srnic
{

// ---- DirectWindow ---------------------------------------------------------

DirectWindow &DirectWindow::operator=(DirectWindow &&other) noexcept
{
	if (this != &other) {
		reset();
		base_ = std::exchange(other.base_, nullptr);
		size_ = std::exchange(other.size_, 0);
		rkey_ = other.rkey_;
		gen_ = other.gen_;
		iova_ = other.iova_;
		length_ = other.length_;
		page_offset_ = other.page_offset_;
	}
	return *this;
}

int DirectWindow::map(int cmd_fd, uint32_t rkey, const srnic_direct_window_resp &resp) noexcept
{
	reset();
	// The MR must lie inside the mapping the kernel describes.
	if (!resp.mmap_size || resp.page_offset > resp.mmap_size ||
	    resp.length > resp.mmap_size - resp.page_offset)
		return EPROTO;
	void *addr = mmap(nullptr, resp.mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, cmd_fd,
			  static_cast<off_t>(resp.mmap_offset));
	if (addr == MAP_FAILED)
		return errno;
	base_ = static_cast<std::byte *>(addr);
	size_ = resp.mmap_size;
	rkey_ = rkey;
	gen_ = resp.gen;
	iova_ = resp.iova;
	length_ = resp.length;
	page_offset_ = resp.page_offset;
	return 0;
}

void DirectWindow::reset() noexcept
{
	if (base_)
		munmap(base_, size_);
	base_ = nullptr;
	size_ = 0;
}

std::byte *DirectWindow::at(uint64_t iova, uint64_t length) const noexcept
{
	if (iova < iova_ || length > length_ || iova - iova_ > length_ - length)
		return nullptr;
	return base_ + page_offset_ + (iova - iova_);
}

// ---- DirectPath -----------------------------------------------------------

void DirectPath::reset() noexcept
{
	for (DirectWindow &w : windows_)
		w.reset();
	next_victim_ = 0;
	disabled_ = false;
	qp_backoff_ = 0;
	rkey_backoff_ = 0;
}

bool DirectPath::refused_recently(uint32_t rkey) noexcept
{
	if (qp_backoff_) {
		--qp_backoff_;
		return true;
	}
	if (rkey_backoff_ && rkey == refused_rkey_) {
		--rkey_backoff_;
		return true;
	}
	return false;
}

void DirectPath::refuse(uint32_t rkey, int err) noexcept
{
	switch (err) {
	case EAGAIN:
		qp_backoff_ = retry_after_posts;
		break;
	case ENOENT:
	case EPERM:
	case EACCES:
	case ERANGE:
	case ENOSPC:
	case ENOMEM:
	case EPROTO:
		refused_rkey_ = rkey;
		rkey_backoff_ = retry_after_posts;
		break;
	default:
		// EOPNOTSUPP, or a kernel without the method.
		disabled_ = true;
		break;
	}
}

const DirectWindow *DirectPath::window(int cmd_fd, uint32_t qp_handle, uint32_t rkey,
				       uint32_t gen) noexcept
{
	for (const DirectWindow &w : windows_)
		if (w.serves(rkey, gen))
			return &w;
	if (refused_recently(rkey))
		return nullptr;

	srnic_direct_window_resp resp = {};
	std::array<ib_uverbs_attr, 3> attrs = {
		uverbs_attr_obj(SRNIC_ATTR_DIRECT_WINDOW_QP_HANDLE, qp_handle),
		uverbs_attr_in_inline(SRNIC_ATTR_DIRECT_WINDOW_RKEY, rkey, sizeof(uint32_t)),
		uverbs_attr_out(SRNIC_ATTR_DIRECT_WINDOW_RESP, resp),
	};
	int err = uverbs_ioctl(cmd_fd, UVERBS_OBJECT_QP, SRNIC_METHOD_QP_DIRECT_WINDOW, attrs);
	// A free slot, or a revoked window's, goes first.
	DirectWindow *slot = nullptr;
	for (DirectWindow &w : windows_)
		if (w.stale(gen))
			slot = &w;
	if (!slot) {
		slot = &windows_[next_victim_];
		next_victim_ = (next_victim_ + 1) % max_windows;
	}
	if (!err)
		err = slot->map(cmd_fd, rkey, resp);
	if (err) {
		refuse(rkey, err);
		return nullptr;
	}
	// Granted under a newer generation than the caller read: the caller's
	// view is stale, it goes to the engine this time.
	return slot->serves(rkey, gen) ? slot : nullptr;
}

// ---- The WRITE ------------------------------------------------------------

namespace
{

// The payload's pieces in this process, checked: nullptr entries mean no.
struct Gather {
	std::array<const std::byte *, 32> src;
	std::array<uint32_t, 32> len;
	size_t num = 0;
	uint64_t total = 0;
};

// Resolves the SGEs (or inline buffers) of wr against the QP's PD.
[[nodiscard]] bool gather_payload(const Qp &qp, const ibv_send_wr &wr, Gather &g) noexcept
{
	if (wr.num_sge < 0 || static_cast<size_t>(wr.num_sge) > g.src.size() ||
	    static_cast<uint32_t>(wr.num_sge) > qp.sq_max_sge)
		return false;
	const bool inline_data = wr.send_flags & IBV_SEND_INLINE;
	const MrRegistry &mrs = protection_domain_of(qp.vqp.qp.pd).mrs;
	for (int i = 0; i < wr.num_sge; ++i) {
		const ibv_sge &sge = wr.sg_list[i];
		if (!sge.length)
			continue;
		g.total += sge.length;
		if (g.total > direct_max_bytes)
			return false;
		const std::byte *src =
			inline_data ? reinterpret_cast<const std::byte *>(sge.addr)
				    : mrs.translate(sge.lkey, sge.addr, sge.length);
		if (!src)
			return false;
		g.src[g.num] = src;
		g.len[g.num++] = sge.length;
	}
	return !inline_data || g.total <= qp.max_inline;
}

// Copies the pieces to dst, the last byte last (after a release fence), so a
// peer polling the last byte of the buffer finds the rest already there.
void copy_payload(std::byte *dst, const Gather &g) noexcept
{
	if (!g.total)
		return;
	uint64_t done = 0;
	for (size_t i = 0; i < g.num; ++i) {
		const uint32_t n = i + 1 == g.num ? g.len[i] - 1 : g.len[i];
		std::memcpy(dst + done, g.src[i], n);
		done += n;
	}
	std::atomic_thread_fence(std::memory_order_release);
	const std::byte last = g.src[g.num - 1][g.len[g.num - 1] - 1];
	std::atomic_ref<std::byte>(dst[done]).store(last, std::memory_order_relaxed);
}

} // namespace

bool post_send_direct(Qp &qp, const ibv_send_wr &wr) noexcept
{
	constexpr unsigned int direct_send_flags =
		IBV_SEND_SIGNALED | IBV_SEND_INLINE | IBV_SEND_FENCE | IBV_SEND_SOLICITED;
	// Read as its underlying type: the caller's value may be no enumerator.
	std::underlying_type_t<ibv_wr_opcode> opcode;
	static_assert(sizeof(opcode) == sizeof(wr.opcode));
	std::memcpy(&opcode, &wr.opcode, sizeof(opcode));
	if (opcode != IBV_WR_RDMA_WRITE || qp.type != IBV_QPT_RC ||
	    (wr.send_flags & ~direct_send_flags) ||
	    qp.state.load(std::memory_order_relaxed) != IBV_QPS_RTS)
		return false;
	if (!qp.vqp.qp.send_cq)
		return false;
	Cq &cq = *to_srnic_cq(qp.vqp.qp.send_cq);
	if (!cq.direct_ok)
		return false;

	SpinGuard sq_guard(qp.sq_lock);
	if (qp.direct.disabled())
		return false;
	Gather g;
	if (!gather_payload(qp, wr, g))
		return false;
	// Nothing of the QP in flight: the engine has completed (CQE written,
	// error state entered) every WQE posted.
	srnic_queue_ctrl &ctrl = qp.sq->ring().ctrl();
	if ((load_acquire(ctrl.flags) & SRNIC_QUEUE_ERROR) ||
	    load_acquire(ctrl.completed) != load_relaxed(ctrl.producer))
		return false;
	const uint32_t gen = load_acquire(ctrl.direct_gen);
	const DirectWindow *w = qp.direct.window(qp.vqp.qp.context->cmd_fd, qp.vqp.qp.handle,
						  wr.wr.rdma.rkey, gen);
	if (!w)
		return false;
	std::byte *dst = w->at(wr.wr.rdma.remote_addr, g.total);
	if (!dst)
		return false; // out of the MR: the engine reports it

	SpinGuard cq_guard(cq.lock);
	// Every earlier completion of the QP polled: ours comes after them.
	if (cq.direct.full() || cq.reader->check_owner_then_acquire_cqe())
		return false;
	copy_payload(dst, g);
	// The copy is visible before direct_gen is read again: if the kernel
	// had not revoked the window by then, the copy went to the MR.
	std::atomic_thread_fence(std::memory_order_seq_cst);
	if (load_relaxed(ctrl.direct_gen) != gen)
		return false; // the engine writes it again, or fails
	if ((wr.send_flags & IBV_SEND_SIGNALED) || qp.sq_sig_all) {
		srnic_cqe cqe = {};
		cqe.wr_id = wr.wr_id;
		cqe.status = IBV_WC_SUCCESS;
		cqe.opcode = IBV_WC_RDMA_WRITE;
		cqe.qp_num = qp.vqp.qp.qp_num;
		cq.direct.push(cqe);
	}
	return true;
}

} // namespace srnic
