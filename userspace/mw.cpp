// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "mw.h"

#include "qp.h"

#include <cerrno>
#include <memory>
#include <new>

namespace srnic
{

ibv_mw *alloc_mw(ibv_pd *pd, ibv_mw_type type) noexcept
{
	std::unique_ptr<ibv_mw> mw(new (std::nothrow) ibv_mw{});
	if (!mw) {
		errno = ENOMEM;
		return nullptr;
	}

	AllocMwCmd cmd = {};
	AllocMwResp resp = {};
	const int err =
		ibv_cmd_alloc_mw(pd, type, mw.get(), &cmd, sizeof(cmd), &resp, sizeof(resp));
	if (err) {
		errno = err;
		return nullptr;
	}
	return mw.release();
}

int dealloc_mw(ibv_mw *mw) noexcept
{
	const int err = ibv_cmd_dealloc_mw(mw);
	if (err)
		return err;
	delete mw;
	return 0;
}

int bind_mw(ibv_qp *ibqp, ibv_mw *mw, ibv_mw_bind *mw_bind) noexcept
{
	const ibv_mw_bind_info &info = mw_bind->bind_info;
	if (mw->type != IBV_MW_TYPE_1 || (info.mw_access_flags & IBV_ACCESS_ZERO_BASED))
		return EINVAL;
	Qp &qp = *to_srnic_qp(ibqp);
	if (qp.type == IBV_QPT_UD || !send_state_ok(qp.state.load(std::memory_order_relaxed)))
		return EINVAL;

	const uint32_t new_rkey = next_mw_rkey(mw->rkey);
	ibv_send_wr wr = {};
	wr.wr_id = mw_bind->wr_id;
	wr.send_flags = mw_bind->send_flags;
	ibv_send_wr *bad_wr = nullptr;
	bool doorbell = false;
	const int err = post_chain(
		*qp.sq, qp.sq_lock, &wr, &bad_wr,
		[&](std::byte *slot, const ibv_send_wr &w) noexcept {
			srnic_send_wqe &wqe = encode_send_wqe_header(qp, slot, w.wr_id,
								     IBV_WR_BIND_MW, w.send_flags);
			encode_send_wqe_bind(wqe, mw, new_rkey, info);
			return 0;
		},
		doorbell);
	if (doorbell)
		ring_send_doorbell(ibqp);
	if (err)
		return err;
	mw->rkey = new_rkey;
	return 0;
}

} // namespace srnic
