// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "direct_path.h"

#include "context.h"
#include "cq.h"
#include "pd.h"
#include "qp.h"
#include "uverbs_ioctl.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <sched.h>
#include <type_traits>

namespace srnic
{

// ---- DirectWindow ---------------------------------------------------------

int DirectWindow::map(int cmd_fd, uint32_t key, bool recv,
		      const srnic_direct_window_resp &resp) noexcept
{
	reset();
	// The MR must lie inside the mapping the kernel describes.
	if (!resp.mmap_size || resp.page_offset > resp.mmap_size ||
	    resp.length > resp.mmap_size - resp.page_offset)
		return EPROTO;
	const int err = mapping_.map(cmd_fd, resp.mmap_offset, resp.mmap_size);
	if (err)
		return err;
	key_ = key;
	recv_ = recv;
	gen_ = resp.gen;
	iova_ = resp.iova;
	length_ = resp.length;
	page_offset_ = resp.page_offset;
	return 0;
}

std::byte *DirectWindow::at(uint64_t iova, uint64_t length) const noexcept
{
	if (iova < iova_ || length > length_ || iova - iova_ > length_ - length)
		return nullptr;
	return mapping_.data() + page_offset_ + (iova - iova_);
}

// ---- DirectLoan -----------------------------------------------------------

int DirectLoan::map(int cmd_fd, uint32_t ctrl_size, const srnic_direct_loan_resp &resp) noexcept
{
	reset();
	// Both rings inside the mapping, their geometry what the fast path
	// assumes: a receive WQE with rq_max_sge SGEs fits an RQ entry.
	const uint64_t size = resp.mmap_size;
	if (!resp.loan_id || resp.rq_offset > size || resp.cq_offset > size ||
	    !ring_geometry_is_valid(size - resp.rq_offset, ctrl_size, resp.rq_num_entries,
				    resp.rq_entry_size,
				    sizeof(srnic_recv_wqe) +
					    uint64_t{resp.rq_max_sge} * sizeof(srnic_sge)) ||
	    !ring_geometry_is_valid(size - resp.cq_offset, ctrl_size, resp.cq_num_entries,
				    sizeof(srnic_cqe), sizeof(srnic_cqe)) ||
	    resp.rq_offset % SRNIC_CACHELINE_SIZE || resp.cq_offset % SRNIC_CACHELINE_SIZE ||
	    resp.rq_max_sge > 32)
		return EPROTO;
	const int err = mapping_.map(cmd_fd, resp.mmap_offset, size);
	if (err)
		return err;
	id_ = resp.loan_id;
	dest_qpn_ = resp.dest_qpn;
	ctrl_size_ = ctrl_size;
	rq_offset_ = resp.rq_offset;
	rq_num_entries_ = resp.rq_num_entries;
	rq_entry_size_ = resp.rq_entry_size;
	rq_max_sge_ = resp.rq_max_sge;
	cq_offset_ = resp.cq_offset;
	cq_num_entries_ = resp.cq_num_entries;
	return 0;
}

void DirectLoan::reset() noexcept
{
	mapping_.reset();
	id_ = 0;
}

// ---- DirectPath -----------------------------------------------------------

void DirectPath::reset() noexcept
{
	for (DirectWindow &w : windows())
		w.reset();
	loan_.reset();
	next_victim_ = 0;
	disabled_ = false;
	loan_disabled_ = false;
	qp_backoff_ = 0;
	key_backoff_ = 0;
	loan_backoff_ = 0;
}

bool DirectPath::refused_recently(uint32_t key) noexcept
{
	if (qp_backoff_) {
		--qp_backoff_;
		return true;
	}
	if (key_backoff_ && key == refused_key_) {
		--key_backoff_;
		return true;
	}
	return false;
}

void DirectPath::refuse(uint32_t key, int err) noexcept
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
		refused_key_ = key;
		key_backoff_ = retry_after_posts;
		break;
	default:
		// EOPNOTSUPP, or a kernel without the method.
		disabled_ = true;
		break;
	}
}

const DirectWindow *DirectPath::window(int cmd_fd, uint32_t qp_handle, uint32_t key, bool recv,
				       uint32_t gen) noexcept
{
	for (const DirectWindow &w : windows())
		if (w.serves(key, recv, gen))
			return &w;
	if (refused_recently(key))
		return nullptr;
	if (!windows_) {
		windows_.reset(new (std::nothrow) Windows());
		if (!windows_)
			return nullptr;
	}

	srnic_direct_window_resp resp = {};
	std::array<ib_uverbs_attr, 3> attrs = {
		uverbs_attr_obj(SRNIC_ATTR_DIRECT_WINDOW_QP_HANDLE, qp_handle),
		uverbs_attr_in_inline(SRNIC_ATTR_DIRECT_WINDOW_RKEY, key, sizeof(uint32_t)),
		uverbs_attr_out(SRNIC_ATTR_DIRECT_WINDOW_RESP, resp),
	};
	int err;
	if (recv) {
		std::array<ib_uverbs_attr, 4> recv_attrs = {
			attrs[0], attrs[1], attrs[2],
			uverbs_attr_in_inline(SRNIC_ATTR_DIRECT_WINDOW_FLAGS,
					      SRNIC_DIRECT_WINDOW_RECV, sizeof(uint32_t)),
		};
		err = uverbs_ioctl(cmd_fd, UVERBS_OBJECT_QP, SRNIC_METHOD_QP_DIRECT_WINDOW,
				   recv_attrs);
	} else {
		err = uverbs_ioctl(cmd_fd, UVERBS_OBJECT_QP, SRNIC_METHOD_QP_DIRECT_WINDOW, attrs);
	}
	// A free slot, or a revoked window's, goes first.
	DirectWindow *slot = nullptr;
	for (DirectWindow &w : windows())
		if (w.stale(gen))
			slot = &w;
	if (!slot) {
		slot = &(*windows_)[next_victim_];
		next_victim_ = (next_victim_ + 1) % max_windows;
	}
	if (!err)
		err = slot->map(cmd_fd, key, recv, resp);
	if (err) {
		refuse(key, err);
		return nullptr;
	}
	// Granted under a newer generation than the caller read: the caller's
	// view is stale, it goes to the engine this time.
	return slot->serves(key, recv, gen) ? slot : nullptr;
}

DirectLoan *DirectPath::loan(int cmd_fd, uint32_t qp_handle, uint32_t ctrl_size,
			     srnic_queue_ctrl &sq_ctrl) noexcept
{
	if (loan_.mapped() && load_acquire(sq_ctrl.loan_live) == loan_.id())
		return &loan_;
	loan_.reset();
	if (loan_disabled_)
		return nullptr;
	if (loan_backoff_) {
		--loan_backoff_;
		return nullptr;
	}
	srnic_direct_loan_resp resp = {};
	std::array<ib_uverbs_attr, 2> attrs = {
		uverbs_attr_obj(SRNIC_ATTR_DIRECT_LOAN_QP_HANDLE, qp_handle),
		uverbs_attr_out(SRNIC_ATTR_DIRECT_LOAN_RESP, resp),
	};
	int err = uverbs_ioctl(cmd_fd, UVERBS_OBJECT_QP, SRNIC_METHOD_QP_DIRECT_LOAN, attrs);
	if (!err)
		err = loan_.map(cmd_fd, ctrl_size, resp);
	// Never on this connection (until modify_qp): the destination's queues
	// are not lendable, or the caller may not access its owner's memory.
	if (err == EOPNOTSUPP || err == EPERM || err == ENOTTY || err == EPROTONOSUPPORT) {
		loan_disabled_ = true;
		return nullptr;
	}
	if (err) {
		loan_backoff_ = retry_after_posts;
		return nullptr;
	}
	// Ended already (the loan_live read orders the mapping's reads).
	return load_acquire(sq_ctrl.loan_live) == loan_.id() ? &loan_ : nullptr;
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

namespace
{

// The payload's destinations through receive windows: nullptr entries mean no.
struct Scatter {
	std::array<std::byte *, 32> dst;
	std::array<uint32_t, 32> len;
	size_t num = 0;
	uint64_t capacity = 0;
};

// Copies the pieces in g into the pieces of s (which hold at least g.total
// bytes), in order.
void scatter_payload(const Scatter &s, const Gather &g) noexcept
{
	size_t si = 0;
	uint32_t soff = 0;
	for (size_t gi = 0; gi < g.num; ++gi) {
		const std::byte *src = g.src[gi];
		uint32_t left = g.len[gi];
		while (left) {
			const uint32_t n = std::min(left, s.len[si] - soff);
			std::memcpy(s.dst[si] + soff, src, n);
			src += n;
			left -= n;
			soff += n;
			if (soff == s.len[si]) {
				++si;
				soff = 0;
			}
		}
	}
}

// Queues the successful completion of wr, if it is signaled, in the send CQ
// object (its lock held), ahead of the ring.
void complete_direct(const Qp &qp, Cq &cq, const ibv_send_wr &wr, ibv_wc_opcode opcode) noexcept
{
	if (!(wr.send_flags & IBV_SEND_SIGNALED) && !qp.sq_sig_all)
		return;
	srnic_cqe cqe = {};
	cqe.wr_id = wr.wr_id;
	cqe.status = IBV_WC_SUCCESS;
	cqe.opcode = opcode;
	cqe.qp_num = qp.vqp.qp.qp_num;
	cq.direct.push(cqe);
}

// The WRITE: one copy into the window of its R_Key. Called with sq_lock held
// and the QP idle.
[[nodiscard]] bool write_direct(Qp &qp, Cq &cq, const ibv_send_wr &wr, const Gather &g,
				srnic_queue_ctrl &ctrl) noexcept
{
	const uint32_t gen = load_acquire(ctrl.direct_gen);
	const DirectWindow *w = qp.direct.window(qp.vqp.qp.context->cmd_fd, qp.vqp.qp.handle,
						  wr.wr.rdma.rkey, false, gen);
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
	complete_direct(qp, cq, wr, IBV_WC_RDMA_WRITE);
	return true;
}

// Whether a CQE written at producer index p of a loan that ended counted:
// waits for the kernel to settle the loan (it has ended it already; it zaps
// the mapping and counts the committed CQEs before it says so).
[[nodiscard]] bool loan_settled_with(srnic_queue_ctrl &ctrl, uint32_t id, uint32_t p) noexcept
{
	while (load_acquire(ctrl.loan_done) != id)
		sched_yield();
	return static_cast<int32_t>(load_relaxed(ctrl.loan_end) - p) > 0;
}

// The SEND: through the loan of the destination's RQ and receive CQ. Called
// with sq_lock held and the QP idle.
[[nodiscard]] bool send_direct(Qp &qp, Cq &cq, const ibv_send_wr &wr, const Gather &g,
			       srnic_queue_ctrl &ctrl) noexcept
{
	const int cmd_fd = qp.vqp.qp.context->cmd_fd;
	const uint32_t handle = qp.vqp.qp.handle;
	const uint32_t gen = load_acquire(ctrl.direct_gen);
	DirectLoan *loan = qp.direct.loan(cmd_fd, handle,
					  to_srnic_context(qp.vqp.qp.context)->limits.queue_ctrl_size,
					  ctrl);
	if (!loan)
		return false;
	const uint32_t id = loan->id();
	const RingView rq = loan->rq();
	const RingView rcq = loan->cq();

	// The destination's next receive WQE, if any (else the engine: RNR).
	if ((rq.flags() | rcq.flags()) & SRNIC_QUEUE_ERROR)
		return false;
	const uint32_t c = load_acquire(rq.ctrl().consumer);
	const uint32_t posted = load_acquire(rq.ctrl().producer) - c;
	if (!posted || posted > rq.num_entries())
		return false;
	srnic_recv_wqe rwqe;
	std::array<srnic_sge, 32> sges;
	std::memcpy(&rwqe, rq.entry(c), sizeof(rwqe));
	if (rwqe.num_sge > loan->rq_max_sge())
		return false;
	std::memcpy(sges.data(), rq.entry(c) + sizeof(rwqe), rwqe.num_sge * sizeof(srnic_sge));
	// Room for the receive CQE, and its slot not written yet.
	const uint32_t p = load_acquire(rcq.ctrl().producer);
	if (p - load_acquire(rcq.ctrl().consumer) >= rcq.num_entries())
		return false;
	auto *rcqe = reinterpret_cast<srnic_cqe *>(rcq.entry(p));
	if (std::atomic_ref<__u8>(rcqe->owner).load(std::memory_order_acquire) ==
	    cqe_owner_phase(p, rcq.num_entries()))
		return false;
	// All of that was read from the destination's rings, not from the
	// page a revoked loan leaves: the loan was live after those reads.
	std::atomic_thread_fence(std::memory_order_acquire);
	if (load_relaxed(ctrl.loan_live) != id)
		return false;

	Scatter sc;
	for (uint16_t i = 0; i < rwqe.num_sge && sc.capacity < g.total; ++i) {
		if (!sges[i].length)
			continue;
		const DirectWindow *w = qp.direct.window(cmd_fd, handle, sges[i].lkey, true, gen);
		std::byte *dst = w ? w->at(sges[i].addr, sges[i].length) : nullptr;
		if (!dst)
			return false; // the engine checks it and reports
		sc.dst[sc.num] = dst;
		sc.len[sc.num++] = sges[i].length;
		sc.capacity += sges[i].length;
	}
	if (sc.capacity < g.total)
		return false; // too long for the buffers: the engine reports it

	SpinGuard cq_guard(cq.lock);
	if (cq.direct.full() || cq.reader->check_owner_then_acquire_cqe())
		return false;
	scatter_payload(sc, g);
	srnic_cqe body = {};
	body.wr_id = rwqe.wr_id;
	body.byte_len = static_cast<uint32_t>(g.total);
	body.qp_num = loan->dest_qpn();
	body.src_qp = qp.vqp.qp.qp_num;
	body.status = IBV_WC_SUCCESS;
	body.opcode = IBV_WC_RECV;
	if (wr.opcode == IBV_WR_SEND_WITH_IMM) {
		body.imm_data = wr.imm_data;
		body.wc_flags = SRNIC_CQE_WITH_IMM;
	}
	constexpr size_t owner = offsetof(srnic_cqe, owner);
	std::memcpy(rcqe, &body, owner);
	std::memcpy(reinterpret_cast<std::byte *>(rcqe) + owner + 1,
		    reinterpret_cast<const std::byte *>(&body) + owner + 1,
		    sizeof(body) - owner - 1);
	// Payload and body before the checks: with the windows and the loan
	// still in force after them, they went to the destination's pages.
	std::atomic_thread_fence(std::memory_order_seq_cst);
	if (load_relaxed(ctrl.direct_gen) != gen || load_relaxed(ctrl.loan_live) != id)
		return false; // not committed: the engine delivers it
	// The commit: the WQE taken (release: body first). As with the
	// engine, the consumer index moves before the CQE shows, so the
	// destination that polls it finds the slot free to post again. A
	// loan that ends from here on counts the CQE and stores its owner.
	store_release(rq.ctrl().consumer, c + 1);
	// The destination polls this byte.
	std::atomic_ref<__u8>(rcqe->owner)
		.store(cqe_owner_phase(p, rcq.num_entries()), std::memory_order_release);
	std::atomic_thread_fence(std::memory_order_seq_cst);
	if (load_relaxed(ctrl.loan_live) == id) {
		// The producer index for the next SEND.
		store_release(rcq.ctrl().producer, p + 1);
	} else {
		const bool counted = loan_settled_with(ctrl, id, p);
		qp.direct.drop_loan();
		if (!counted)
			return false;
	}
	complete_direct(qp, cq, wr, IBV_WC_SEND);
	return true;
}

} // namespace

namespace
{

// The send CQ of a work request the direct path could take (an RC WRITE or
// SEND with no flag it does not know, the QP in RTS), or nullptr.
[[nodiscard]] Cq *direct_candidate(const Qp &qp, const ibv_send_wr &wr, bool &is_write) noexcept
{
	constexpr unsigned int direct_send_flags =
		IBV_SEND_SIGNALED | IBV_SEND_INLINE | IBV_SEND_FENCE | IBV_SEND_SOLICITED;
	// Read as its underlying type: the caller's value may be no enumerator.
	std::underlying_type_t<ibv_wr_opcode> opcode;
	static_assert(sizeof(opcode) == sizeof(wr.opcode));
	std::memcpy(&opcode, &wr.opcode, sizeof(opcode));
	is_write = opcode == IBV_WR_RDMA_WRITE;
	const bool is_send = opcode == IBV_WR_SEND || opcode == IBV_WR_SEND_WITH_IMM;
	if ((!is_write && !is_send) || qp.type != IBV_QPT_RC ||
	    (wr.send_flags & ~direct_send_flags) ||
	    qp.state.load(std::memory_order_relaxed) != IBV_QPS_RTS)
		return nullptr;
	if (!qp.vqp.qp.send_cq)
		return nullptr;
	Cq *cq = to_srnic_cq(qp.vqp.qp.send_cq);
	return cq->direct_ok ? cq : nullptr;
}

// The rest of post_send_direct(), with sq_lock held.
[[nodiscard]] bool post_direct_locked(Qp &qp, Cq &cq, const ibv_send_wr &wr, bool is_write) noexcept
{
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
	return is_write ? write_direct(qp, cq, wr, g, ctrl) : send_direct(qp, cq, wr, g, ctrl);
}

} // namespace

bool post_send_direct(Qp &qp, const ibv_send_wr &wr) noexcept
{
	bool is_write;
	Cq *cq = direct_candidate(qp, wr, is_write);
	if (!cq)
		return false;
	SpinGuard sq_guard(qp.sq_lock);
	return post_direct_locked(qp, *cq, wr, is_write);
}

bool post_wqe_direct_locked(Qp &qp, const srnic_send_wqe &wqe) noexcept
{
	ibv_send_wr wr = {};
	ibv_sge inline_sge = {};
	wr.wr_id = wqe.wr_id;
	wr.opcode = static_cast<ibv_wr_opcode>(wqe.opcode);
	// SIGNALED already has the QP's sq_sig_all folded in: the same answer.
	wr.send_flags = ((wqe.flags & SRNIC_WQE_SIGNALED) ? IBV_SEND_SIGNALED : 0) |
			((wqe.flags & SRNIC_WQE_FENCE) ? IBV_SEND_FENCE : 0) |
			((wqe.flags & SRNIC_WQE_SOLICITED) ? IBV_SEND_SOLICITED : 0) |
			((wqe.flags & SRNIC_WQE_INLINE) ? IBV_SEND_INLINE : 0);
	wr.imm_data = wqe.imm_data;
	wr.wr.rdma.remote_addr = wqe.rdma.remote_addr;
	wr.wr.rdma.rkey = wqe.rdma.rkey;
	if (wqe.flags & SRNIC_WQE_INLINE) {
		// The payload is in the slot, after the header.
		inline_sge.addr = reinterpret_cast<uintptr_t>(&wqe + 1);
		inline_sge.length = wqe.inline_len;
		wr.sg_list = &inline_sge;
		wr.num_sge = wqe.inline_len ? 1 : 0;
	} else {
		// ibv_sge and srnic_sge are the same 16 bytes (qp.h).
		wr.sg_list = const_cast<ibv_sge *>(reinterpret_cast<const ibv_sge *>(&wqe + 1));
		wr.num_sge = wqe.num_sge;
	}
	bool is_write;
	Cq *cq = direct_candidate(qp, wr, is_write);
	return cq && post_direct_locked(qp, *cq, wr, is_write);
}

} // namespace srnic
