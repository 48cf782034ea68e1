// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "cq_ex.h"

#include "pd.h"

#include <cerrno>
#include <memory>
#include <new>

namespace srnic
{
namespace
{

[[nodiscard]] Cq &cq_of(ibv_cq_ex *cqx) noexcept
{
	// cq_ex shares its first bytes with cq (verbs_cq's union), which starts Cq.
	static_assert(offsetof(Cq, vcq) == 0 && offsetof(verbs_cq, cq_ex) == 0);
	return *reinterpret_cast<Cq *>(cqx);
}

// The completion the readers read (only called between a successful
// start_poll/next_poll and the next poll call, as libibverbs requires).
[[nodiscard]] const srnic_cqe &current(ibv_cq_ex *cqx) noexcept
{
	return *cq_of(cqx).ex_cqe;
}

// Makes the next completion current if there is one, the direct path's
// first (as poll_cq): 0, or ENOENT.
int take_next(Cq &cq) noexcept
{
	const srnic_cqe *cqe = cq.direct.front();
	cq.ex_cqe_direct = cqe != nullptr;
	if (!cqe)
		cqe = cq.reader->check_owner_then_acquire_cqe();
	cq.ex_cqe = cqe;
	if (!cqe)
		return ENOENT;
	cq.vcq.cq_ex.status = cqe_status(*cqe);
	cq.vcq.cq_ex.wr_id = cqe->wr_id;
	return 0;
}

void consume_current(Cq &cq) noexcept
{
	if (!cq.ex_cqe)
		return;
	if (cq.ex_cqe_direct)
		cq.direct.pop();
	else
		cq.reader->consume_cqe();
	cq.ex_cqe = nullptr;
}

int start_poll(ibv_cq_ex *cqx, ibv_poll_cq_attr *attr) noexcept
{
	if (attr->comp_mask)
		return EINVAL;
	Cq &cq = cq_of(cqx);
	cq.lock.lock();
	const int err = take_next(cq);
	if (err)
		cq.lock.unlock(); // no end_poll follows a failed start_poll
	return err;
}

int next_poll(ibv_cq_ex *cqx) noexcept
{
	Cq &cq = cq_of(cqx);
	consume_current(cq);
	return take_next(cq);
}

void end_poll(ibv_cq_ex *cqx) noexcept
{
	Cq &cq = cq_of(cqx);
	consume_current(cq);
	cq.reader->release_consumed();
	cq.lock.unlock();
}

ibv_wc_opcode read_opcode(ibv_cq_ex *cqx) noexcept
{
	return cqe_opcode(current(cqx));
}

uint32_t read_vendor_err(ibv_cq_ex *cqx) noexcept
{
	return current(cqx).vendor_err;
}

unsigned int read_wc_flags(ibv_cq_ex *cqx) noexcept
{
	return cqe_wc_flags(current(cqx));
}

uint32_t read_byte_len(ibv_cq_ex *cqx) noexcept
{
	return current(cqx).byte_len;
}

// The tag and the header's app_ctx of a completion with IBV_WC_TM_MATCH
// (0 otherwise).
void read_tm_info(ibv_cq_ex *cqx, ibv_wc_tm_info *tm_info) noexcept
{
	const srnic_cqe &cqe = current(cqx);
	tm_info->tag = cqe.tm_tag;
	tm_info->priv = cqe.tm_priv;
}

// Also what ibv_wc_read_invalidated_rkey() reads, as is (no byte swap): the
// invalidated rkey in host order for a completion with IBV_WC_WITH_INV.
__be32 read_imm_data(ibv_cq_ex *cqx) noexcept
{
	const srnic_cqe &cqe = current(cqx);
	return cqe_has_inv(cqe) ? static_cast<__be32>(cqe_invalidated_rkey(cqe))
				: cqe_imm_data(cqe);
}

uint32_t read_qp_num(ibv_cq_ex *cqx) noexcept
{
	return current(cqx).qp_num;
}

uint32_t read_src_qp(ibv_cq_ex *cqx) noexcept
{
	return current(cqx).src_qp;
}

uint32_t read_slid(ibv_cq_ex *cqx) noexcept
{
	return current(cqx).slid;
}

uint8_t read_sl(ibv_cq_ex *cqx) noexcept
{
	return current(cqx).sl;
}

uint8_t read_dlid_path_bits(ibv_cq_ex *cqx) noexcept
{
	return current(cqx).dlid_path_bits;
}

struct CreateCqExCmd {
	struct ibv_create_cq_ex ibv_cmd;
	srnic_create_cq_req driver;
};
static_assert(sizeof(CreateCqExCmd) == sizeof(struct ibv_create_cq_ex) + sizeof(srnic_create_cq_req));

struct CreateCqExResp {
	ibv_create_cq_ex_resp_core ibv_resp;
	srnic_create_cq_resp driver;
};
static_assert(sizeof(CreateCqExResp) ==
	      sizeof(ibv_create_cq_ex_resp_core) + sizeof(srnic_create_cq_resp));

// Whether srnic can honour attr: standard wc_flags and tag matching's, and of the
// creation flags only the single-threaded hint (the CQ locks anyway); a CQ
// that may overrun unnoticed is not offered. A parent domain is accepted
// (IBV_CQ_INIT_ATTR_MASK_PD; checked by create_cq_ex): its allocators have
// no buffer to allocate (pd.h).
[[nodiscard]] bool cq_init_attr_supported(const ibv_cq_init_attr_ex &attr) noexcept
{
	if (attr.wc_flags & ~supported_wc_flags)
		return false;
	if (attr.comp_mask & ~uint32_t{IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD})
		return false;
	return !(attr.comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) ||
	       !(attr.flags & ~uint32_t{IBV_CREATE_CQ_ATTR_SINGLE_THREADED});
}

} // namespace

void install_cq_ex_readers(Cq &cq, uint64_t wc_flags) noexcept
{
	ibv_cq_ex &cqx = cq.vcq.cq_ex;
	cqx.start_poll = start_poll;
	cqx.next_poll = next_poll;
	cqx.end_poll = end_poll;
	cqx.read_opcode = read_opcode;
	cqx.read_vendor_err = read_vendor_err;
	cqx.read_wc_flags = read_wc_flags;
	if (wc_flags & IBV_WC_EX_WITH_BYTE_LEN)
		cqx.read_byte_len = read_byte_len;
	if (wc_flags & IBV_WC_EX_WITH_IMM)
		cqx.read_imm_data = read_imm_data;
	if (wc_flags & IBV_WC_EX_WITH_QP_NUM)
		cqx.read_qp_num = read_qp_num;
	if (wc_flags & IBV_WC_EX_WITH_SRC_QP)
		cqx.read_src_qp = read_src_qp;
	if (wc_flags & IBV_WC_EX_WITH_SLID)
		cqx.read_slid = read_slid;
	if (wc_flags & IBV_WC_EX_WITH_SL)
		cqx.read_sl = read_sl;
	if (wc_flags & IBV_WC_EX_WITH_DLID_PATH_BITS)
		cqx.read_dlid_path_bits = read_dlid_path_bits;
	if (wc_flags & IBV_WC_EX_WITH_TM_INFO)
		cqx.read_tm_info = read_tm_info;
}

ibv_cq_ex *create_cq_ex(ibv_context *ibctx, ibv_cq_init_attr_ex *attr) noexcept
{
	if (!cq_init_attr_supported(*attr)) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) &&
	    (!attr->parent_domain || attr->parent_domain->context != ibctx ||
	     !to_srnic_pd(attr->parent_domain)->is_parent_domain())) {
		errno = EINVAL;
		return nullptr;
	}
	std::unique_ptr<Cq> cq(new (std::nothrow) Cq{});
	if (!cq) {
		errno = ENOMEM;
		return nullptr;
	}

	CreateCqExCmd cmd = {};
	CreateCqExResp resp = {};
	// As in create_cq: ibv_create_cq_ex_resp_core stands for the kernel's
	// response struct (size and alignment asserted in verbs_driver_abi.h).
	int err = srnic_cmd_create_cq_ex(ibctx, attr, &cq->vcq, &cmd.ibv_cmd, sizeof(cmd),
					 reinterpret_cast<ib_uverbs_ex_create_cq_resp *>(&resp),
					 sizeof(resp));
	if (!err)
		err = map_created_cq(*cq, ibctx, resp.driver);
	if (err) {
		errno = err;
		return nullptr;
	}
	install_cq_ex_readers(*cq, attr->wc_flags);
	// As create_cq's: perftest 25 makes its CQs here.
	cq->direct_ok = !attr->channel;
	return &cq.release()->vcq.cq_ex;
}

} // namespace srnic
