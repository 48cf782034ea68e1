// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Memory regions: reg_mr, reg_dmabuf_mr, rereg_mr, dereg_mr, advise_mr,
// import_mr/unimport_mr.
// The kernel pins the pages (or, for IBV_ACCESS_ON_DEMAND, faults them in when
// the engine touches them) and owns the keys; the provider keeps only what
// libibverbs needs.
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

// The reg_dmabuf_mr verb: length bytes of the dma-buf fd from offset, used at
// iova. The kernel reaches the buffer through its exporter's CPU mapping; the
// process has no mapping of it, so the direct path never serves this MR (the
// registry does not know it) and the engine does. nullptr with errno set on
// failure (EBADF for an fd that is no dma-buf, EINVAL for a range outside it,
// EOPNOTSUPP for a buffer in I/O memory).
[[nodiscard]] ibv_mr *reg_dmabuf_mr(ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova,
				    int fd, int access) noexcept;

// The rereg_mr verb (IBV_REREG_MR_CHANGE_TRANSLATION, _PD, _ACCESS; no
// srnic data either way): lkey and rkey stay the same. Returns 0 or a
// positive errno, also set in errno.
int rereg_mr(verbs_mr *vmr, int flags, ibv_pd *pd, void *addr, size_t length,
	     int access) noexcept;

// The import_mr verb: an MR of the context's user context by handle, its
// keys and length queried from the kernel (its address is unknown: NULL).
// nullptr with errno set on failure.
[[nodiscard]] ibv_mr *import_mr(ibv_pd *pd, uint32_t mr_handle) noexcept;

// The unimport_mr verb: forgets an imported MR without deregistering it.
void unimport_mr(ibv_mr *ibmr) noexcept;

// The dereg_mr verb; the MR stays valid if the kernel refuses.
int dereg_mr(verbs_mr *vmr) noexcept;

// The advise_mr verb (prefetch of ODP MRs): passed to the kernel as is. Returns
// 0 or an errno (EINVAL for an SGE outside any ODP MR of pd, EOPNOTSUPP for an
// unknown advice, EFAULT when a synchronous prefetch hits an unmapped page).
int advise_mr(ibv_pd *pd, ibv_advise_mr_advice advice, uint32_t flags, ibv_sge *sg_list,
	      uint32_t num_sge) noexcept;

} // namespace srnic

#endif // SRNIC_MR_H
