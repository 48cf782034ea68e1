// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// XRC domains: open_xrcd and close_xrcd. The kernel keeps the domain (and
// shares it between processes that open the same file); the provider only
// holds libibverbs' handle. XRC SRQs are in srq.*, XRC QPs in qp.*.
#ifndef SRNIC_XRCD_H
#define SRNIC_XRCD_H

#include "verbs_driver_abi.h"

namespace srnic
{

// The open_xrcd verb; nullptr with errno set on failure.
[[nodiscard]] ibv_xrcd *open_xrcd(ibv_context *ibctx, ibv_xrcd_init_attr *attr) noexcept;

// The close_xrcd verb; the domain stays open if the kernel refuses (EBUSY
// while SRQs or QPs use it).
int close_xrcd(ibv_xrcd *ibxrcd) noexcept;

} // namespace srnic

#endif // SRNIC_XRCD_H
