// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Protection domains: alloc_pd and dealloc_pd; parent domains
// (alloc_parent_domain), which dealloc_pd also frees.
//
// A parent domain wraps a protection domain: it carries that PD's kernel
// handle, so every command given the parent domain (create_qp, create_srq,
// reg_mr, create_ah) acts on the protection domain, and the kernel never
// learns of it. srnic has no thread domains (alloc_td is EOPNOTSUPP). The
// custom allocators are kept but never called: the only buffers srnic's
// objects have are their rings, which are kernel memory (the engine reads
// and writes them without pinning) mapped into the process, and the
// provider allocates no other per-object buffer an allocator could supply.
#ifndef SRNIC_PD_H
#define SRNIC_PD_H

#include "mr_registry.h"
#include "verbs_driver_abi.h"

#include <rdma/srnic-abi.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace srnic
{

struct Pd {
	ibv_pd ibpd;  // first: libibverbs hands back &ibpd
	uint32_t pdn; // the kernel's PD number, for WQEs and debugging
	// Parent domains only: the protection domain wrapped, and the
	// allocators and their context as given (see above).
	Pd *protection_domain = nullptr;
	void *(*alloc)(ibv_pd *pd, void *pd_context, size_t size, size_t alignment,
		       uint64_t resource_type) = nullptr;
	void (*free)(ibv_pd *pd, void *pd_context, void *ptr, uint64_t resource_type) = nullptr;
	void *pd_context = nullptr;
	// Protection domains only: parent domains wrapping this one (it cannot
	// be deallocated before them).
	std::atomic<uint32_t> parent_domains{0};
	// Protection domains only: their MRs registered in this process.
	MrRegistry mrs;

	[[nodiscard]] bool is_parent_domain() const noexcept { return protection_domain; }
};

[[nodiscard]] inline Pd *to_srnic_pd(ibv_pd *ibpd) noexcept
{
	static_assert(offsetof(Pd, ibpd) == 0);
	return reinterpret_cast<Pd *>(ibpd);
}

// The protection domain of a PD or of a parent domain.
[[nodiscard]] inline Pd &protection_domain_of(ibv_pd *ibpd) noexcept
{
	Pd *pd = to_srnic_pd(ibpd);
	return pd->is_parent_domain() ? *pd->protection_domain : *pd;
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

// The alloc_parent_domain verb: attr->pd must be a protection domain of
// this context (EINVAL otherwise), attr->td NULL (EOPNOTSUPP otherwise);
// nullptr with errno set on failure.
[[nodiscard]] ibv_pd *alloc_parent_domain(ibv_context *ibctx,
					  ibv_parent_domain_init_attr *attr) noexcept;

// The import_pd verb: a PD of the context's user context by handle (another
// ibv_context on the same command fd allocated it). srnic has no PD query:
// the kernel checks the handle when a command uses it. The PD number is
// unknown (0). nullptr with errno set on failure.
[[nodiscard]] ibv_pd *import_pd(ibv_context *ibctx, uint32_t pd_handle) noexcept;

// The unimport_pd verb: forgets an imported PD without deallocating it.
void unimport_pd(ibv_pd *ibpd) noexcept;

// The dealloc_pd verb, for protection and parent domains: EBUSY for a
// protection domain some parent domain still wraps; the PD stays valid if
// the kernel refuses.
int dealloc_pd(ibv_pd *ibpd) noexcept;

} // namespace srnic

#endif // SRNIC_PD_H
