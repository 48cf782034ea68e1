// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Queue pairs: create/modify/query/destroy (commands, ring mappings, the
// state the post checks need), and the fast path: post_send and post_recv
// write WQEs into the mapped rings through ProducerView and ring the doorbell
// (a syscall) only when the kernel asked for it with NEED_WAKEUP.
#ifndef SRNIC_QP_H
#define SRNIC_QP_H

#include "ah.h"
#include "direct_path.h"
#include "queue.h"
#include "ring_mapping.h"
#include "spinlock.h"
#include "verbs_driver_abi.h"

#include <rdma/srnic-abi.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <type_traits>

namespace srnic
{

struct Qp {
	verbs_qp vqp; // first: libibverbs hands back &vqp.qp
	RingMapping sq_ring;
	RingMapping rq_ring;
	std::optional<ProducerView> sq; // set once the rings are mapped
	std::optional<ProducerView> rq; // never set for a QP with an SRQ
	// libibverbs lets several threads post to one QP: each queue has a
	// small lock, uncontended in the usual one-thread-per-QP case.
	SpinLock sq_lock;
	SpinLock rq_lock;
	// As last set by modify_qp (the kernel may move the QP to the error
	// state on its own; the rings' ERROR flag covers that).
	std::atomic<ibv_qp_state> state{IBV_QPS_RESET};
	ibv_qp_type type = IBV_QPT_RC; // RC, UC, UD, RAW_PACKET, XRC_SEND or XRC_RECV
	uint32_t sq_max_sge = 0;
	uint32_t rq_max_sge = 0;
	uint32_t max_inline = 0;
	bool sq_sig_all = false;
	// The extended post API (qp_ex.h). From wr_start to wr_complete or
	// wr_abort the caller holds sq_lock; ex_wqe is the WQE the ibv_wr_set_*
	// calls fill (nullptr before the first builder), ex_err the first error
	// of the batch, and ex_wqe_needs_ud_addr says a UD WQE still lacks its
	// wr_set_ud_addr.
	srnic_send_wqe *ex_wqe = nullptr;
	int ex_err = 0;
	bool ex_wqe_needs_ud_addr = false;
	DirectPath direct; // under sq_lock
};

[[nodiscard]] inline Qp *to_srnic_qp(ibv_qp *ibqp) noexcept
{
	static_assert(offsetof(Qp, vqp) == 0);
	return reinterpret_cast<Qp *>(ibqp);
}

struct CreateQpCmd {
	struct ibv_create_qp ibv_cmd;
	srnic_create_qp_req driver;
};
static_assert(sizeof(CreateQpCmd) == sizeof(struct ibv_create_qp) + sizeof(srnic_create_qp_req));

struct CreateQpResp {
	ibv_create_qp_resp_core ibv_resp;
	srnic_create_qp_resp driver;
};
static_assert(sizeof(CreateQpResp) ==
	      sizeof(ibv_create_qp_resp_core) + sizeof(srnic_create_qp_resp));

// IBV_WR_FLUSH (rdma-core 45 on; srnic-abi.h's flush WQE), 14 in every
// version. Only the extended API posts it (wr_flush): an ibv_send_wr has no
// fields for its type and level, so the opcode tables below leave it out.
inline constexpr auto srnic_wr_flush = static_cast<ibv_wr_opcode>(14);
#if SRNIC_RDMA_CORE_MAJOR >= 45
static_assert(srnic_wr_flush == IBV_WR_FLUSH);
#endif

// The send opcode tables' size: every IBV_WR_* up to IBV_WR_ATOMIC_WRITE
// (15, after IBV_WR_DRIVER1).
inline constexpr size_t send_opcode_count = IBV_WR_ATOMIC_WRITE + 1;
static_assert(send_opcode_count > IBV_WR_DRIVER1);
using SendOpcodeTable = std::array<bool, send_opcode_count>;

// Send opcodes an RC QP accepts today, indexed by IBV_WR_*.
inline constexpr SendOpcodeTable rc_send_opcode_supported = [] {
	SendOpcodeTable ok{};
	ok[IBV_WR_SEND] = ok[IBV_WR_SEND_WITH_IMM] = ok[IBV_WR_SEND_WITH_INV] = true;
	ok[IBV_WR_RDMA_WRITE] = ok[IBV_WR_RDMA_WRITE_WITH_IMM] = true;
	ok[IBV_WR_RDMA_READ] = true;
	ok[IBV_WR_ATOMIC_CMP_AND_SWP] = ok[IBV_WR_ATOMIC_FETCH_AND_ADD] = true;
	ok[IBV_WR_BIND_MW] = ok[IBV_WR_LOCAL_INV] = true;
	ok[IBV_WR_ATOMIC_WRITE] = true;
	return ok;
}();

// Send opcodes an XRC_SEND QP accepts: RC's but the memory-window ones (the
// XRC responder does not invalidate, and windows are bound through RC QPs).
// ATOMIC WRITE stays: the XRC_RECV responder is RC's.
inline constexpr SendOpcodeTable xrc_send_opcode_supported = [] {
	SendOpcodeTable ok = rc_send_opcode_supported;
	ok[IBV_WR_SEND_WITH_INV] = ok[IBV_WR_BIND_MW] = ok[IBV_WR_LOCAL_INV] = false;
	return ok;
}();

// Send opcodes a raw packet QP accepts: SEND, of one Ethernet frame.
inline constexpr SendOpcodeTable raw_send_opcode_supported = [] {
	SendOpcodeTable ok{};
	ok[IBV_WR_SEND] = true;
	return ok;
}();

// Send opcodes a UD QP accepts, indexed by IBV_WR_*.
inline constexpr SendOpcodeTable ud_send_opcode_supported = [] {
	SendOpcodeTable ok{};
	ok[IBV_WR_SEND] = ok[IBV_WR_SEND_WITH_IMM] = true;
	return ok;
}();

// Send opcodes a UC QP accepts (no READ, no atomics or ATOMIC WRITE, no SEND
// with invalidate: UC has no such packet), indexed by IBV_WR_*.
inline constexpr SendOpcodeTable uc_send_opcode_supported = [] {
	SendOpcodeTable ok{};
	ok[IBV_WR_SEND] = ok[IBV_WR_SEND_WITH_IMM] = true;
	ok[IBV_WR_RDMA_WRITE] = ok[IBV_WR_RDMA_WRITE_WITH_IMM] = true;
	ok[IBV_WR_BIND_MW] = ok[IBV_WR_LOCAL_INV] = true;
	return ok;
}();

// Bytes of a compare & swap or fetch & add: its one SGE receives the
// remote original value.
inline constexpr uint32_t atomic_size = 8;

[[nodiscard]] constexpr bool is_atomic(unsigned int opcode) noexcept
{
	return opcode == IBV_WR_ATOMIC_CMP_AND_SWP || opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

// Operations the requester executes locally, sending nothing: no payload.
[[nodiscard]] constexpr bool is_local_op(unsigned int opcode) noexcept
{
	return opcode == IBV_WR_BIND_MW || opcode == IBV_WR_LOCAL_INV;
}

[[nodiscard]] constexpr bool send_state_ok(ibv_qp_state s) noexcept
{
	return s != IBV_QPS_RESET && s != IBV_QPS_INIT && s != IBV_QPS_RTR;
}

// ---- The send WQE encoder ---------------------------------------------------
//
// post_send (write_send_wqe, from an ibv_send_wr) and the extended builders
// (qp_ex.cpp, one ibv_wr_* call at a time) fill SQ slots through these
// functions alone, so a WQE means the same whichever API posted it.

// Starts a send WQE in slot: header zeroed, then wr_id, opcode (IBV_WR_*)
// and the WQE flags of the IBV_SEND_* send_flags (inline is the payload
// encoders' business). The payload after the header is left as it is.
inline srnic_send_wqe &encode_send_wqe_header(const Qp &qp, std::byte *slot, uint64_t wr_id,
					      uint8_t opcode, unsigned int send_flags) noexcept
{
	auto *wqe = reinterpret_cast<srnic_send_wqe *>(slot);
	std::memset(wqe, 0, sizeof(*wqe));
	wqe->wr_id = wr_id;
	wqe->opcode = opcode;
	if ((send_flags & IBV_SEND_SIGNALED) || qp.sq_sig_all)
		wqe->flags |= SRNIC_WQE_SIGNALED;
	if (send_flags & IBV_SEND_FENCE)
		wqe->flags |= SRNIC_WQE_FENCE;
	if (send_flags & IBV_SEND_SOLICITED)
		wqe->flags |= SRNIC_WQE_SOLICITED;
	return *wqe;
}

// The remote buffer of an RDMA WRITE or READ (or ATOMIC WRITE).
inline void encode_send_wqe_rdma(srnic_send_wqe &wqe, uint64_t remote_addr, uint32_t rkey) noexcept
{
	wqe.rdma.remote_addr = remote_addr;
	wqe.rdma.rkey = rkey;
}

// The remote word and operands of an atomic: compare_add is the compare
// value of a compare-and-swap or the addend of a fetch-and-add.
inline void encode_send_wqe_atomic(srnic_send_wqe &wqe, uint64_t remote_addr, uint32_t rkey,
				   uint64_t compare_add, uint64_t swap) noexcept
{
	wqe.atomic.remote_addr = remote_addr;
	wqe.atomic.rkey = rkey;
	wqe.atomic.compare_add = compare_add;
	wqe.atomic.swap = swap;
}

// An ATOMIC WRITE: the remote 8-byte word and the 8 bytes stored there, as
// they are in memory at value, carried as inline data whatever the QP's
// max_inline_data. Returns 0, or EINVAL if the SQ's entries have no room
// for them (a QP created with no send SGE and no inline data).
inline int encode_send_wqe_atomic_write(const Qp &qp, srnic_send_wqe &wqe, uint64_t remote_addr,
					uint32_t rkey, const void *value) noexcept
{
	if (qp.sq->ring().entry_size() - sizeof(wqe) < atomic_size)
		return EINVAL;
	encode_send_wqe_rdma(wqe, remote_addr, rkey);
	std::memcpy(&wqe + 1, value, atomic_size);
	wqe.flags |= SRNIC_WQE_INLINE;
	wqe.inline_len = atomic_size;
	wqe.num_sge = 0;
	return 0;
}

// A window binding (IBV_WR_BIND_MW, ibv_bind_mw, ibv_wr_bind_mw): the MW by
// its current rkey, the key it is to have, and the MR range and rights.
inline void encode_send_wqe_bind(srnic_send_wqe &wqe, const ibv_mw *mw, uint32_t new_rkey,
				 const ibv_mw_bind_info &info) noexcept
{
	wqe.bind.addr = info.addr;
	wqe.bind.length = info.length;
	wqe.bind.mr_lkey = info.mr ? info.mr->lkey : 0;
	wqe.bind.mw_rkey = mw->rkey;
	wqe.bind.new_rkey = new_rkey;
	wqe.bind.access = info.mw_access_flags;
}

// The destination of a UD send.
inline void encode_send_wqe_ud(srnic_send_wqe &wqe, ibv_ah *ah, uint32_t remote_qpn,
			       uint32_t remote_qkey) noexcept
{
	wqe.ud.ah_handle = to_srnic_ah(ah)->ah_num;
	wqe.ud.remote_qpn = remote_qpn;
	wqe.ud.remote_qkey = remote_qkey;
}

// The payload as a gather list of at most qp.sq_max_sge entries (replacing
// any inline payload). Returns 0 or EINVAL.
inline int encode_send_wqe_sges(const Qp &qp, srnic_send_wqe &wqe, const ibv_sge *sg_list,
				size_t num_sge) noexcept
{
	if (num_sge > qp.sq_max_sge)
		return EINVAL;
	wqe.flags &= ~SRNIC_WQE_INLINE;
	wqe.inline_len = 0;
	wqe.num_sge = static_cast<__u16>(num_sge);
	if (num_sge) // sg_list may be NULL without SGEs
		std::memcpy(&wqe + 1, sg_list, sizeof(srnic_sge) * num_sge);
	return 0;
}

// One buffer of inline data, whichever struct describes it.
struct InlineBuf {
	const void *addr;
	size_t length;
};
[[nodiscard]] inline InlineBuf inline_buf(const ibv_sge &sge) noexcept
{
	return {reinterpret_cast<const void *>(sge.addr), sge.length};
}
[[nodiscard]] inline InlineBuf inline_buf(const ibv_data_buf &buf) noexcept
{
	return {buf.addr, buf.length};
}

// The payload as inline data, the buffers copied one after the other into
// the WQE (replacing any gather list): at most qp.max_inline bytes in all.
// Returns 0 or EINVAL.
template <typename Buf>
inline int encode_send_wqe_inline(const Qp &qp, srnic_send_wqe &wqe, const Buf *bufs,
				  size_t num_bufs) noexcept
{
	auto *payload = reinterpret_cast<std::byte *>(&wqe + 1);
	uint32_t len = 0;
	for (size_t i = 0; i < num_bufs; ++i) {
		const InlineBuf buf = inline_buf(bufs[i]);
		if (buf.length > qp.max_inline - len)
			return EINVAL;
		if (buf.length)
			std::memcpy(payload + len, buf.addr, buf.length);
		len += static_cast<uint32_t>(buf.length);
	}
	wqe.flags |= SRNIC_WQE_INLINE;
	wqe.inline_len = len;
	wqe.num_sge = 0;
	return 0;
}

[[nodiscard]] constexpr bool send_opcode_has_imm(unsigned int opcode) noexcept
{
	return opcode == IBV_WR_SEND_WITH_IMM || opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
}

// Whether a QP of this type accepts this IBV_WR_* opcode, any value.
[[nodiscard]] constexpr bool send_opcode_supported(ibv_qp_type type, unsigned int opcode) noexcept
{
	if (type == IBV_QPT_XRC_RECV)
		return false; // it only receives
	const auto &supported = type == IBV_QPT_UD	   ? ud_send_opcode_supported
				: type == IBV_QPT_RAW_PACKET ? raw_send_opcode_supported
				: type == IBV_QPT_UC	   ? uc_send_opcode_supported
				: type == IBV_QPT_XRC_SEND ? xrc_send_opcode_supported
							   : rc_send_opcode_supported;
	return opcode < supported.size() && supported[opcode];
}

// Fill one SQ slot from wr. Returns 0 or EINVAL; the slot may be scribbled
// on either way (it is published only after a 0). An atomic needs exactly
// one SGE of 8 bytes (its result); IBV_SEND_INLINE is ignored for READs and
// atomics, whose SGEs are written to. An ATOMIC WRITE (wr.wr.rdma names the
// target) stores the 8 bytes its one 8-byte SGE points at, read now, as
// IBV_SEND_INLINE data is (its lkey is not used). A misaligned remote
// address is the responder's to refuse (IBV_WC_REM_INV_REQ_ERR), as IBTA
// has it.
inline int write_send_wqe(const Qp &qp, std::byte *slot, const ibv_send_wr &wr) noexcept
{
	// The caller's bits, not an enum load: any value may arrive here.
	std::underlying_type_t<ibv_wr_opcode> opcode;
	static_assert(sizeof(opcode) == sizeof(wr.opcode));
	std::memcpy(&opcode, &wr.opcode, sizeof(opcode));
	const bool ud = qp.type == IBV_QPT_UD;
	if (!send_opcode_supported(qp.type, opcode) || wr.num_sge < 0)
		return EINVAL;
	if (ud && !wr.wr.ud.ah)
		return EINVAL;
	if ((is_atomic(opcode) || opcode == IBV_WR_ATOMIC_WRITE) &&
	    (wr.num_sge != 1 || wr.sg_list[0].length != atomic_size))
		return EINVAL;
	// A type 1 window is bound by ibv_bind_mw() alone (IBTA 10.6.7.2.2).
	if (opcode == IBV_WR_BIND_MW &&
	    (!wr.bind_mw.mw || wr.bind_mw.mw->type != IBV_MW_TYPE_2 ||
	     (wr.bind_mw.bind_info.mw_access_flags & IBV_ACCESS_ZERO_BASED)))
		return EINVAL;

	srnic_send_wqe &wqe = encode_send_wqe_header(qp, slot, wr.wr_id,
						     static_cast<__u8>(opcode), wr.send_flags);
	if (is_local_op(opcode)) {
		if (opcode == IBV_WR_BIND_MW)
			encode_send_wqe_bind(wqe, wr.bind_mw.mw, wr.bind_mw.rkey,
					     wr.bind_mw.bind_info);
		else
			wqe.invalidate_rkey = wr.invalidate_rkey;
		return 0; // no payload: any SGEs are ignored
	}
	if (send_opcode_has_imm(opcode))
		wqe.imm_data = wr.imm_data;
	if (qp.type == IBV_QPT_XRC_SEND)
		wqe.xrc_remote_srqn = wr.qp_type.xrc.remote_srqn;
	if (opcode == IBV_WR_SEND_WITH_INV)
		wqe.invalidate_rkey = wr.invalidate_rkey;
	if (ud)
		encode_send_wqe_ud(wqe, wr.wr.ud.ah, wr.wr.ud.remote_qpn, wr.wr.ud.remote_qkey);
	else if (is_atomic(opcode))
		encode_send_wqe_atomic(wqe, wr.wr.atomic.remote_addr, wr.wr.atomic.rkey,
				       wr.wr.atomic.compare_add, wr.wr.atomic.swap);
	else if (opcode != IBV_WR_SEND && opcode != IBV_WR_SEND_WITH_IMM &&
		 opcode != IBV_WR_SEND_WITH_INV)
		encode_send_wqe_rdma(wqe, wr.wr.rdma.remote_addr, wr.wr.rdma.rkey);

	if (opcode == IBV_WR_ATOMIC_WRITE)
		return encode_send_wqe_atomic_write(
			qp, wqe, wr.wr.rdma.remote_addr, wr.wr.rdma.rkey,
			reinterpret_cast<const void *>(wr.sg_list[0].addr));
	if ((wr.send_flags & IBV_SEND_INLINE) && opcode != IBV_WR_RDMA_READ &&
	    !is_atomic(opcode))
		return encode_send_wqe_inline(qp, wqe, wr.sg_list, wr.num_sge);
	return encode_send_wqe_sges(qp, wqe, wr.sg_list, wr.num_sge);
}

// ibv_sge and srnic_sge are the same 16 bytes, so SGEs are copied whole.
static_assert(sizeof(ibv_sge) == sizeof(srnic_sge) &&
	      offsetof(ibv_sge, addr) == offsetof(srnic_sge, addr) &&
	      offsetof(ibv_sge, length) == offsetof(srnic_sge, length) &&
	      offsetof(ibv_sge, lkey) == offsetof(srnic_sge, lkey));

// Fill one RQ or SRQ slot from wr, with at most max_sge SGEs. Returns 0 or
// EINVAL.
inline int write_recv_wqe(uint32_t max_sge, std::byte *slot, const ibv_recv_wr &wr) noexcept
{
	if (wr.num_sge < 0 || static_cast<uint32_t>(wr.num_sge) > max_sge)
		return EINVAL;
	auto *wqe = reinterpret_cast<srnic_recv_wqe *>(slot);
	*wqe = {};
	wqe->wr_id = wr.wr_id;
	wqe->num_sge = static_cast<__u16>(wr.num_sge);
	if (wr.num_sge) // sg_list may be NULL without SGEs
		std::memcpy(slot + sizeof(*wqe), wr.sg_list, sizeof(srnic_sge) * wr.num_sge);
	return 0;
}

// The doorbells: empty POST_SEND / POST_RECV commands (out of line: a syscall).
void ring_send_doorbell(ibv_qp *ibqp) noexcept;
void ring_recv_doorbell(ibv_qp *ibqp) noexcept;

// Post a chain of work requests into view under lock: write each into the
// next free slot, publish once, and report whether the kernel wants a
// doorbell. ENOMEM when the ring is full, EINVAL from write.
template <typename Wr, typename Write>
inline int post_chain(ProducerView &view, SpinLock &lock, Wr *wr, Wr **bad_wr, Write write,
		      bool &doorbell) noexcept
{
	SpinGuard guard(lock);
	uint32_t posted = 0;
	int err = 0;

	for (; wr; wr = wr->next) {
		std::byte *slot = view.next_free_entry();
		err = slot ? write(slot, *wr) : ENOMEM;
		if (err) {
			*bad_wr = wr;
			break;
		}
		view.commit_entry();
		++posted;
	}
	doorbell = posted && view.publish_then_check_need_wakeup();
	return err;
}

// The post_send verb.
inline int post_send(ibv_qp *ibqp, ibv_send_wr *wr, ibv_send_wr **bad_wr) noexcept
{
	Qp &qp = *to_srnic_qp(ibqp);
	// An XRC_RECV QP has no SQ.
	if (!qp.sq || !send_state_ok(qp.state.load(std::memory_order_relaxed))) {
		*bad_wr = wr;
		return EINVAL;
	}
	// Leading WRITEs the provider can do itself; the rest, in order, to
	// the engine.
	while (wr && post_send_direct(qp, *wr))
		wr = wr->next;
	if (!wr)
		return 0;
	bool doorbell;
	const int err = post_chain(
		*qp.sq, qp.sq_lock, wr, bad_wr,
		[&qp](std::byte *slot, const ibv_send_wr &w) { return write_send_wqe(qp, slot, w); },
		doorbell);
	if (doorbell)
		ring_send_doorbell(ibqp);
	return err;
}

// The post_recv verb. A QP with an SRQ has no RQ: EINVAL.
inline int post_recv(ibv_qp *ibqp, ibv_recv_wr *wr, ibv_recv_wr **bad_wr) noexcept
{
	Qp &qp = *to_srnic_qp(ibqp);
	if (!qp.rq || qp.state.load(std::memory_order_relaxed) == IBV_QPS_RESET) {
		*bad_wr = wr;
		return EINVAL;
	}
	bool doorbell;
	const int err = post_chain(
		*qp.rq, qp.rq_lock, wr, bad_wr,
		[&qp](std::byte *slot, const ibv_recv_wr &w) {
			return write_recv_wqe(qp.rq_max_sge, slot, w);
		},
		doorbell);
	if (doorbell)
		ring_recv_doorbell(ibqp);
	return err;
}

// Whether the caps the kernel reported fit the rings it described. With
// has_rq false (a QP with an SRQ), rq must be all zero and so the receive caps.
[[nodiscard]] bool qp_caps_fit_rings(const ibv_qp_cap &cap, const srnic_queue_desc &sq,
				     const srnic_queue_desc &rq, bool has_rq = true) noexcept;

// Whether max_wr receive WQEs of max_sge SGEs fit a receive ring (RQ or SRQ).
[[nodiscard]] bool recv_caps_fit_ring(uint32_t max_wr, uint32_t max_sge,
				      const srnic_queue_desc &ring) noexcept;

// The create_flow and destroy_flow verbs (raw packet QPs' steering rules,
// kept by the kernel: srnic_raw.c). create_flow: nullptr with errno set on
// failure; destroy_flow: 0 or an errno.
[[nodiscard]] ibv_flow *create_flow(ibv_qp *qp, ibv_flow_attr *attr) noexcept;
int destroy_flow(ibv_flow *flow) noexcept;

// The create_qp and create_qp_ex verbs; nullptr with errno set on failure.
[[nodiscard]] ibv_qp *create_qp(ibv_pd *pd, ibv_qp_init_attr *attr) noexcept;
[[nodiscard]] ibv_qp *create_qp_ex(ibv_context *ibctx, ibv_qp_init_attr_ex *attr) noexcept;
// The open_qp verb: a handle on an XRC_RECV QP of an XRC domain (created by
// this or another process); nullptr with errno set on failure.
[[nodiscard]] ibv_qp *open_qp(ibv_context *ibctx, ibv_qp_open_attr *attr) noexcept;

int modify_qp(ibv_qp *ibqp, ibv_qp_attr *attr, int attr_mask) noexcept;
// The modify_qp_rate_limit verb: IBV_QP_RATE_LIMIT with a burst size (packet
// pacing of raw packet QPs). srnic paces each packet by its own length, so
// typical_pkt_sz is not needed.
int modify_qp_rate_limit(ibv_qp *ibqp, ibv_qp_rate_limit_attr *attr) noexcept;
int query_qp(ibv_qp *ibqp, ibv_qp_attr *attr, int attr_mask,
	     ibv_qp_init_attr *init_attr) noexcept;
int destroy_qp(ibv_qp *ibqp) noexcept;

} // namespace srnic

#endif // SRNIC_QP_H
