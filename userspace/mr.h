// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Memory regions: reg_mr and dereg_mr. The kernel pins the pages and owns
// the keys; the provider keeps only what libibverbs needs.
#ifndef SRNIC_MR_H
#define SRNIC_MR_H

#include "verbs_driver_abi.h"

#include <cstddef>
#include <cstdint>

namespace srnic
{

struct Mr {
	verbs_mr vmr; // first: libibverbs hands back &vmr and &vmr.ibv_mr
};

[[nodiscard]] inline Mr *to_srnic_mr(verbs_mr *vmr) noexcept
{
	static_assert(offsetof(Mr, vmr) == 0);
	return reinterpret_cast<Mr *>(vmr);
}

// reg_mr carries no srnic data in either direction: the kernel's udata is
// empty, so a kernel that learns MR driver data later sees inlen == 0.
using RegMrCmd = struct ibv_reg_mr; // "struct": ibv_reg_mr is also a function
using RegMrResp = ib_uverbs_reg_mr_resp;

// The reg_mr verb; nullptr with errno set on failure (EINVAL for a bad
// length or flag combination, EOPNOTSUPP for flags srnic lacks).
[[nodiscard]] ibv_mr *reg_mr(ibv_pd *pd, void *addr, size_t length, uint64_t hca_va,
			     int access) noexcept;

// The import_mr verb (a context from ibv_import_device()): the MR mr_handle
// of the shared uverbs file, its keys and length queried from the kernel
// (ibv_cmd_query_mr; addr stays NULL). nullptr with errno set on failure.
[[nodiscard]] ibv_mr *import_mr(ibv_pd *pd, uint32_t mr_handle) noexcept;

// The unimport_mr verb: forgets an imported MR, which stays its owner's.
void unimport_mr(ibv_mr *ibmr) noexcept;

// The dereg_mr verb; the MR stays valid if the kernel refuses.
int dereg_mr(verbs_mr *vmr) noexcept;

} // namespace srnic

#endif // SRNIC_MR_H
