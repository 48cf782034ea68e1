// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "qp_ex.h"

#include <cerrno>

namespace srnic
{
namespace
{

[[nodiscard]] Qp &qp_of(ibv_qp_ex *qpx) noexcept
{
	// qp_ex shares its first bytes with qp (verbs_qp's union), which starts Qp.
	static_assert(offsetof(Qp, vqp) == 0 && offsetof(verbs_qp, qp_ex) == 0);
	return *reinterpret_cast<Qp *>(qpx);
}

void fail(Qp &qp, int err) noexcept
{
	if (!qp.ex_err)
		qp.ex_err = err;
}

// Starts the next WQE of the batch in the next free SQ slot, or returns
// nullptr after recording why not. The slot is committed at once (still
// unpublished), so the setters that follow fill a WQE that stays put.
srnic_send_wqe *begin_wqe(Qp &qp, ibv_wr_opcode opcode) noexcept
{
	if (qp.ex_wqe_needs_ud_addr)
		fail(qp, EINVAL); // the previous UD WQE never got its address
	if (qp.ex_err)
		return nullptr;
	std::byte *slot = qp.sq->next_free_entry();
	if (!slot) {
		fail(qp, ENOMEM);
		return nullptr;
	}
	qp.sq->commit_entry();
	const ibv_qp_ex &qpx = qp.vqp.qp_ex;
	srnic_send_wqe &wqe = encode_send_wqe_header(qp, slot, qpx.wr_id,
						     static_cast<__u8>(opcode), qpx.wr_flags);
	qp.ex_wqe = &wqe;
	qp.ex_wqe_needs_ud_addr = qp.type == IBV_QPT_UD;
	return &wqe;
}

// The WQE the setters apply to, or nullptr after recording why there is none.
srnic_send_wqe *current_wqe(Qp &qp) noexcept
{
	if (!qp.ex_wqe)
		fail(qp, EINVAL);
	return qp.ex_err ? nullptr : qp.ex_wqe;
}

// WQEs that take no SGE or inline data from the setters: local operations,
// an ATOMIC WRITE (its builder carries its 8 bytes) and a FLUSH (none).
[[nodiscard]] bool has_no_payload_setter(unsigned int opcode) noexcept
{
	return is_local_op(opcode) || opcode == IBV_WR_ATOMIC_WRITE || opcode == srnic_wr_flush;
}

void end_batch(Qp &qp) noexcept
{
	qp.ex_wqe = nullptr;
	qp.ex_err = 0;
	qp.ex_wqe_needs_ud_addr = false;
	qp.sq_lock.unlock();
}

// ---- ibv_qp_ex entry points ---------------------------------------------

void wr_start(ibv_qp_ex *qpx) noexcept
{
	Qp &qp = qp_of(qpx);
	qp.sq_lock.lock();
	qp.ex_wqe = nullptr;
	qp.ex_err = 0;
	qp.ex_wqe_needs_ud_addr = false;
}

int wr_complete(ibv_qp_ex *qpx) noexcept
{
	Qp &qp = qp_of(qpx);
	if (qp.ex_wqe_needs_ud_addr)
		fail(qp, EINVAL);
	if (!send_state_ok(qp.state.load(std::memory_order_relaxed)))
		fail(qp, EINVAL);
	const int err = qp.ex_err;
	bool doorbell = false;
	if (err)
		qp.sq->discard_unpublished();
	else if (qp.sq->unpublished() == 1 && qp.ex_wqe &&
		 post_wqe_direct_locked(qp, *qp.ex_wqe))
		qp.sq->discard_unpublished(); // done by the direct path, as post_send does
	else
		doorbell = qp.sq->unpublished() && qp.sq->publish_then_check_need_wakeup();
	end_batch(qp);
	if (doorbell)
		ring_send_doorbell(&qp.vqp.qp);
	return err;
}

void wr_abort(ibv_qp_ex *qpx) noexcept
{
	Qp &qp = qp_of(qpx);
	qp.sq->discard_unpublished();
	end_batch(qp);
}

void wr_send(ibv_qp_ex *qpx) noexcept
{
	begin_wqe(qp_of(qpx), IBV_WR_SEND);
}

void wr_send_imm(ibv_qp_ex *qpx, __be32 imm_data) noexcept
{
	if (srnic_send_wqe *wqe = begin_wqe(qp_of(qpx), IBV_WR_SEND_WITH_IMM))
		wqe->imm_data = imm_data;
}

void wr_send_inv(ibv_qp_ex *qpx, uint32_t invalidate_rkey) noexcept
{
	if (srnic_send_wqe *wqe = begin_wqe(qp_of(qpx), IBV_WR_SEND_WITH_INV))
		wqe->invalidate_rkey = invalidate_rkey;
}

// Binds a type 2 window (a type 1 one is bound by ibv_bind_mw() alone).
void wr_bind_mw(ibv_qp_ex *qpx, ibv_mw *mw, uint32_t rkey, const ibv_mw_bind_info *info) noexcept
{
	Qp &qp = qp_of(qpx);
	srnic_send_wqe *wqe = begin_wqe(qp, IBV_WR_BIND_MW);
	if (!wqe)
		return;
	if (!mw || mw->type != IBV_MW_TYPE_2 || !info ||
	    (info->mw_access_flags & IBV_ACCESS_ZERO_BASED)) {
		fail(qp, EINVAL);
		return;
	}
	encode_send_wqe_bind(*wqe, mw, rkey, *info);
}

void wr_local_inv(ibv_qp_ex *qpx, uint32_t invalidate_rkey) noexcept
{
	if (srnic_send_wqe *wqe = begin_wqe(qp_of(qpx), IBV_WR_LOCAL_INV))
		wqe->invalidate_rkey = invalidate_rkey;
}

void wr_rdma_write(ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr) noexcept
{
	if (srnic_send_wqe *wqe = begin_wqe(qp_of(qpx), IBV_WR_RDMA_WRITE))
		encode_send_wqe_rdma(*wqe, remote_addr, rkey);
}

void wr_rdma_write_imm(ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr,
		       __be32 imm_data) noexcept
{
	if (srnic_send_wqe *wqe = begin_wqe(qp_of(qpx), IBV_WR_RDMA_WRITE_WITH_IMM)) {
		encode_send_wqe_rdma(*wqe, remote_addr, rkey);
		wqe->imm_data = imm_data;
	}
}

void wr_rdma_read(ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr) noexcept
{
	if (srnic_send_wqe *wqe = begin_wqe(qp_of(qpx), IBV_WR_RDMA_READ))
		encode_send_wqe_rdma(*wqe, remote_addr, rkey);
}

void wr_atomic_cmp_swp(ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr, uint64_t compare,
		       uint64_t swap) noexcept
{
	if (srnic_send_wqe *wqe = begin_wqe(qp_of(qpx), IBV_WR_ATOMIC_CMP_AND_SWP))
		encode_send_wqe_atomic(*wqe, remote_addr, rkey, compare, swap);
}

void wr_atomic_fetch_add(ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr,
			 uint64_t add) noexcept
{
	if (srnic_send_wqe *wqe = begin_wqe(qp_of(qpx), IBV_WR_ATOMIC_FETCH_AND_ADD))
		encode_send_wqe_atomic(*wqe, remote_addr, rkey, add, 0);
}

// The 8 bytes at atomic_wr go into the WQE now; no SGE or inline data
// follows (the setters refuse to add any).
void wr_atomic_write(ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr,
		     const void *atomic_wr) noexcept
{
	Qp &qp = qp_of(qpx);
	if (srnic_send_wqe *wqe = begin_wqe(qp, IBV_WR_ATOMIC_WRITE))
		fail(qp, atomic_wr ? encode_send_wqe_atomic_write(qp, *wqe, remote_addr, rkey,
								   atomic_wr)
				   : EINVAL);
}

#if SRNIC_RDMA_CORE_MAJOR >= 45
// A FLUSH of [remote_addr, remote_addr + len) (level IBV_FLUSH_RANGE) or of
// the whole MR (IBV_FLUSH_MR), of the placement type asked for; RC and XRC
// only, no SGE. The kernel checks the rest (srnic_flush_check()).
void wr_flush(ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr, size_t len, uint8_t type,
	      uint8_t level) noexcept
{
	Qp &qp = qp_of(qpx);
	srnic_send_wqe *wqe = begin_wqe(qp, srnic_wr_flush);
	if (!wqe)
		return;
	if (len > UINT32_MAX || !type || (type & ~(IBV_FLUSH_GLOBAL | IBV_FLUSH_PERSISTENT)) ||
	    level > IBV_FLUSH_MR) {
		fail(qp, EINVAL);
		return;
	}
	wqe->flush.remote_addr = remote_addr;
	wqe->flush.rkey = rkey;
	wqe->flush.length = static_cast<uint32_t>(len);
	wqe->flush.type = type;
	wqe->flush.level = level;
	wqe->num_sge = 0;
}
#endif

void wr_set_ud_addr(ibv_qp_ex *qpx, ibv_ah *ah, uint32_t remote_qpn,
		    uint32_t remote_qkey) noexcept
{
	Qp &qp = qp_of(qpx);
	srnic_send_wqe *wqe = current_wqe(qp);
	if (!wqe)
		return;
	if (qp.type != IBV_QPT_UD || !ah) {
		fail(qp, EINVAL);
		return;
	}
	encode_send_wqe_ud(*wqe, ah, remote_qpn, remote_qkey);
	qp.ex_wqe_needs_ud_addr = false;
}

// The XRC SRQ at the target that receives the WQE (XRC_SEND QPs).
void wr_set_xrc_srqn(ibv_qp_ex *qpx, uint32_t remote_srqn) noexcept
{
	Qp &qp = qp_of(qpx);
	srnic_send_wqe *wqe = current_wqe(qp);
	if (!wqe)
		return;
	if (qp.type != IBV_QPT_XRC_SEND) {
		fail(qp, EINVAL);
		return;
	}
	wqe->xrc_remote_srqn = remote_srqn;
}

void wr_set_sge(ibv_qp_ex *qpx, uint32_t lkey, uint64_t addr, uint32_t length) noexcept
{
	const ibv_sge sge = {.addr = addr, .length = length, .lkey = lkey};
	Qp &qp = qp_of(qpx);
	if (srnic_send_wqe *wqe = current_wqe(qp))
		fail(qp, has_no_payload_setter(wqe->opcode)
				 ? EINVAL
				 : encode_send_wqe_sges(qp, *wqe, &sge, 1));
}

void wr_set_sge_list(ibv_qp_ex *qpx, size_t num_sge, const ibv_sge *sg_list) noexcept
{
	Qp &qp = qp_of(qpx);
	if (srnic_send_wqe *wqe = current_wqe(qp))
		fail(qp, has_no_payload_setter(wqe->opcode)
				 ? EINVAL
				 : encode_send_wqe_sges(qp, *wqe, sg_list, num_sge));
}

// An RDMA READ has nothing to send: its SGEs are where the data lands; a
// bind or local invalidate has no payload at all; an ATOMIC WRITE has its
// 8 bytes from wr_atomic_write.
template <typename Buf>
void set_inline(Qp &qp, const Buf *bufs, size_t num_bufs) noexcept
{
	srnic_send_wqe *wqe = current_wqe(qp);
	if (!wqe)
		return;
	if (wqe->opcode == IBV_WR_RDMA_READ || has_no_payload_setter(wqe->opcode)) {
		fail(qp, EINVAL);
		return;
	}
	fail(qp, encode_send_wqe_inline(qp, *wqe, bufs, num_bufs));
}

void wr_set_inline_data(ibv_qp_ex *qpx, void *addr, size_t length) noexcept
{
	const ibv_data_buf buf = {.addr = addr, .length = length};
	set_inline(qp_of(qpx), &buf, 1);
}

void wr_set_inline_data_list(ibv_qp_ex *qpx, size_t num_buf,
			     const ibv_data_buf *buf_list) noexcept
{
	set_inline(qp_of(qpx), buf_list, num_buf);
}

// ---- Which builders exist ------------------------------------------------

// One builder: the send_ops flag asking for it, the opcode it posts, and how
// it is installed. A QP type offers it only when its send opcode table
// accepts the opcode, so the extended API never posts what post_send would
// refuse: the atomic rows become live with the opcode table's atomics.
struct SendOpBuilder {
	uint64_t send_ops_flag;
	ibv_wr_opcode opcode;
	void (*install)(ibv_qp_ex &qpx) noexcept;
};

constexpr SendOpBuilder send_op_builders[] = {
	{IBV_QP_EX_WITH_SEND, IBV_WR_SEND, [](ibv_qp_ex &x) noexcept { x.wr_send = wr_send; }},
	{IBV_QP_EX_WITH_SEND_WITH_IMM, IBV_WR_SEND_WITH_IMM,
	 [](ibv_qp_ex &x) noexcept { x.wr_send_imm = wr_send_imm; }},
	{IBV_QP_EX_WITH_RDMA_WRITE, IBV_WR_RDMA_WRITE,
	 [](ibv_qp_ex &x) noexcept { x.wr_rdma_write = wr_rdma_write; }},
	{IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_WRITE_WITH_IMM,
	 [](ibv_qp_ex &x) noexcept { x.wr_rdma_write_imm = wr_rdma_write_imm; }},
	{IBV_QP_EX_WITH_RDMA_READ, IBV_WR_RDMA_READ,
	 [](ibv_qp_ex &x) noexcept { x.wr_rdma_read = wr_rdma_read; }},
	{IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_CMP_AND_SWP,
	 [](ibv_qp_ex &x) noexcept { x.wr_atomic_cmp_swp = wr_atomic_cmp_swp; }},
	{IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD, IBV_WR_ATOMIC_FETCH_AND_ADD,
	 [](ibv_qp_ex &x) noexcept { x.wr_atomic_fetch_add = wr_atomic_fetch_add; }},
	{IBV_QP_EX_WITH_SEND_WITH_INV, IBV_WR_SEND_WITH_INV,
	 [](ibv_qp_ex &x) noexcept { x.wr_send_inv = wr_send_inv; }},
	{IBV_QP_EX_WITH_BIND_MW, IBV_WR_BIND_MW,
	 [](ibv_qp_ex &x) noexcept { x.wr_bind_mw = wr_bind_mw; }},
	{IBV_QP_EX_WITH_LOCAL_INV, IBV_WR_LOCAL_INV,
	 [](ibv_qp_ex &x) noexcept { x.wr_local_inv = wr_local_inv; }},
	{IBV_QP_EX_WITH_ATOMIC_WRITE, IBV_WR_ATOMIC_WRITE,
	 [](ibv_qp_ex &x) noexcept { x.wr_atomic_write = wr_atomic_write; }},
#if SRNIC_RDMA_CORE_MAJOR >= 45
	{IBV_QP_EX_WITH_FLUSH, srnic_wr_flush, [](ibv_qp_ex &x) noexcept { x.wr_flush = wr_flush; }},
#endif
};

} // namespace

uint64_t supported_send_ops_flags(ibv_qp_type type) noexcept
{
	if (type != IBV_QPT_RC && type != IBV_QPT_UD && type != IBV_QPT_XRC_SEND)
		return 0; // srnic creates no other type
	uint64_t flags = 0;
	for (const SendOpBuilder &b : send_op_builders)
		if (b.opcode == srnic_wr_flush ? type != IBV_QPT_UD
					       : send_opcode_supported(type, b.opcode))
			flags |= b.send_ops_flag;
	return flags;
}

void install_send_ops(Qp &qp, uint64_t send_ops_flags) noexcept
{
	ibv_qp_ex &qpx = qp.vqp.qp_ex;
	for (const SendOpBuilder &b : send_op_builders)
		if (send_ops_flags & b.send_ops_flag)
			b.install(qpx);
	qpx.wr_set_ud_addr = wr_set_ud_addr;
	if (qp.type == IBV_QPT_XRC_SEND)
		qpx.wr_set_xrc_srqn = wr_set_xrc_srqn;
	qpx.wr_set_sge = wr_set_sge;
	qpx.wr_set_sge_list = wr_set_sge_list;
	qpx.wr_set_inline_data = wr_set_inline_data;
	qpx.wr_set_inline_data_list = wr_set_inline_data_list;
	qpx.wr_start = wr_start;
	qpx.wr_complete = wr_complete;
	qpx.wr_abort = wr_abort;
	qp.vqp.comp_mask |= VERBS_QP_EX;
}

} // namespace srnic
