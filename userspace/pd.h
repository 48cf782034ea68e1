// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Protection domains: alloc_pd and dealloc_pd.
#ifndef SRNIC_PD_H
#define SRNIC_PD_H

#include "verbs_driver_abi.h"

#include <rdma/srnic-abi.h>

#include <cstddef>
#include <cstdint>

namespace srnic
{

struct Pd {
	ibv_pd ibpd;  // first: libibverbs hands back &ibpd
	uint32_t pdn; // the kernel's PD number, for WQEs and debugging
};

[[nodiscard]] inline Pd *to_srnic_pd(ibv_pd *ibpd) noexcept
{
	static_assert(offsetof(Pd, ibpd) == 0);
	return reinterpret_cast<Pd *>(ibpd);
}

// alloc_pd carries no srnic request data, only a response.
struct AllocPdResp {
	ibv_alloc_pd_resp_core ibv_resp;
	srnic_alloc_pd_resp driver;
};
static_assert(sizeof(AllocPdResp) == sizeof(ibv_alloc_pd_resp_core) + sizeof(srnic_alloc_pd_resp),
	      "no padding between core and driver data");

// The alloc_pd verb; nullptr with errno set on failure.
[[nodiscard]] ibv_pd *alloc_pd(ibv_context *ibctx) noexcept;

// The import_pd verb (a context from ibv_import_device()): the PD pd_handle
// of the shared uverbs file. The kernel has no query for a PD, so the handle
// is taken as given (a wrong one fails where it is used) and pdn, which the
// provider never needs, is 0. nullptr with errno set on failure.
[[nodiscard]] ibv_pd *import_pd(ibv_context *ibctx, uint32_t pd_handle) noexcept;

// The unimport_pd verb: forgets an imported PD, which stays its owner's.
void unimport_pd(ibv_pd *ibpd) noexcept;

// The dealloc_pd verb; the PD stays valid if the kernel refuses.
int dealloc_pd(ibv_pd *ibpd) noexcept;

} // namespace srnic

#endif // SRNIC_PD_H
