// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "pd.h"

#include <cerrno>
#include <memory>
#include <new>

namespace srnic
{

ibv_pd *alloc_pd(ibv_context *ibctx) noexcept
{
	std::unique_ptr<Pd> pd(new (std::nothrow) Pd{});
	if (!pd) {
		errno = ENOMEM;
		return nullptr;
	}

	struct ibv_alloc_pd cmd = {};
	AllocPdResp resp = {};
	// libibverbs takes the kernel's response struct, whose flexible array
	// member AllocPdResp cannot embed; ibv_alloc_pd_resp_core has the same
	// size (asserted in verbs_driver_abi.h).
	const int err =
		ibv_cmd_alloc_pd(ibctx, &pd->ibpd, &cmd, sizeof(cmd),
				 reinterpret_cast<ib_uverbs_alloc_pd_resp *>(&resp), sizeof(resp));
	if (err) {
		errno = err;
		return nullptr;
	}

	pd->pdn = resp.driver.pdn;
	return &pd.release()->ibpd;
}

ibv_pd *alloc_parent_domain(ibv_context *ibctx, ibv_parent_domain_init_attr *attr) noexcept
{
	constexpr uint32_t known =
		IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
	if (!attr->pd || attr->pd->context != ibctx || to_srnic_pd(attr->pd)->is_parent_domain()) {
		errno = EINVAL;
		return nullptr;
	}
	if (attr->td || (attr->comp_mask & ~known)) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	std::unique_ptr<Pd> parent(new (std::nothrow) Pd{});
	if (!parent) {
		errno = ENOMEM;
		return nullptr;
	}
	Pd *pd = to_srnic_pd(attr->pd);
	// What libibverbs' ibv_initialize_parent_domain() does: to the core
	// the parent domain is interchangeable with the PD it wraps.
	parent->ibpd.context = pd->ibpd.context;
	parent->ibpd.handle = pd->ibpd.handle;
	parent->pdn = pd->pdn;
	parent->protection_domain = pd;
	if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) {
		parent->alloc = attr->alloc;
		parent->free = attr->free;
	}
	if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)
		parent->pd_context = attr->pd_context;
	pd->parent_domains.fetch_add(1, std::memory_order_relaxed);
	return &parent.release()->ibpd;
}

ibv_pd *import_pd(ibv_context *ibctx, uint32_t pd_handle) noexcept
{
	std::unique_ptr<Pd> pd(new (std::nothrow) Pd{});
	if (!pd) {
		errno = ENOMEM;
		return nullptr;
	}
	pd->ibpd.context = ibctx;
	pd->ibpd.handle = pd_handle;
	return &pd.release()->ibpd;
}

void unimport_pd(ibv_pd *ibpd) noexcept
{
	delete to_srnic_pd(ibpd);
}

int dealloc_pd(ibv_pd *ibpd) noexcept
{
	Pd *pd = to_srnic_pd(ibpd);
	if (pd->is_parent_domain()) {
		pd->protection_domain->parent_domains.fetch_sub(1, std::memory_order_relaxed);
		delete pd;
		return 0;
	}
	if (pd->parent_domains.load(std::memory_order_relaxed))
		return EBUSY;

	const int err = ibv_cmd_dealloc_pd(ibpd);
	if (err)
		return err;

	delete to_srnic_pd(ibpd);
	return 0;
}

} // namespace srnic
