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

ibv_pd *import_pd(ibv_context *ibctx, uint32_t pd_handle) noexcept
{
	Pd *pd = new (std::nothrow) Pd{};
	if (!pd) {
		errno = ENOMEM;
		return nullptr;
	}
	pd->ibpd.context = ibctx;
	pd->ibpd.handle = pd_handle;
	return &pd->ibpd;
}

void unimport_pd(ibv_pd *ibpd) noexcept
{
	delete to_srnic_pd(ibpd);
}

int dealloc_pd(ibv_pd *ibpd) noexcept
{
	const int err = ibv_cmd_dealloc_pd(ibpd);
	if (err)
		return err;

	delete to_srnic_pd(ibpd);
	return 0;
}

} // namespace srnic
