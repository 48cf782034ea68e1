// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Memory windows: alloc_mw, dealloc_mw and the type 1 bind_mw verb, which
// posts a BIND_MW WQE (a type 2 MW is bound by IBV_WR_BIND_MW work requests
// and ibv_wr_bind_mw, through the SQ encoder in qp.h). The kernel owns the
// window's binding and checks every bind; the provider keeps only the
// ibv_mw libibverbs hands out.
#ifndef SRNIC_MW_H
#define SRNIC_MW_H

#include "verbs_driver_abi.h"

#include <cstdint>

namespace srnic
{

// alloc_mw carries no srnic data in either direction.
using AllocMwCmd = struct ibv_alloc_mw; // "struct": ibv_alloc_mw is also a function
using AllocMwResp = ib_uverbs_alloc_mw_resp;

// The key byte the next bind gives a window, the index kept (rdma-core's
// ibv_inc_rkey(), which is not exported).
[[nodiscard]] constexpr uint32_t next_mw_rkey(uint32_t rkey) noexcept
{
	return (rkey & 0xffffff00u) | ((rkey + 1) & 0xffu);
}

// The alloc_mw verb; nullptr with errno set (EINVAL for an unknown type).
[[nodiscard]] ibv_mw *alloc_mw(ibv_pd *pd, ibv_mw_type type) noexcept;

// The dealloc_mw verb; the MW stays valid if the kernel refuses.
int dealloc_mw(ibv_mw *mw) noexcept;

// The bind_mw verb (type 1 windows; libibverbs checked the type, the MR's
// PD and the range's consistency). Posts a BIND_MW WQE with the next key
// byte and, once posted, sets mw->rkey to the key the window will have: an
// error completion means the window kept its old key (IBTA 10.6.7.2.3).
int bind_mw(ibv_qp *qp, ibv_mw *mw, ibv_mw_bind *mw_bind) noexcept;

} // namespace srnic

#endif // SRNIC_MW_H
