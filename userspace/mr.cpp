// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "mr.h"

#include <cerrno>
#include <memory>
#include <new>

namespace srnic
{

ibv_mr *reg_mr(ibv_pd *pd, void *addr, size_t length, uint64_t hca_va, int access) noexcept
{
	std::unique_ptr<Mr> mr(new (std::nothrow) Mr{});
	if (!mr) {
		errno = ENOMEM;
		return nullptr;
	}

	RegMrCmd cmd = {};
	RegMrResp resp = {};
	const int err = ibv_cmd_reg_mr(pd, addr, length, hca_va, access, &mr->vmr, &cmd,
				       sizeof(cmd), &resp, sizeof(resp));
	if (err) {
		errno = err;
		return nullptr;
	}
	return &mr.release()->vmr.ibv_mr;
}

ibv_mr *import_mr(ibv_pd *pd, uint32_t mr_handle) noexcept
{
	std::unique_ptr<Mr> mr(new (std::nothrow) Mr{});
	if (!mr) {
		errno = ENOMEM;
		return nullptr;
	}
	const int err = ibv_cmd_query_mr(pd, &mr->vmr, mr_handle);
	if (err) {
		errno = err;
		return nullptr;
	}
	return &mr.release()->vmr.ibv_mr;
}

void unimport_mr(ibv_mr *ibmr) noexcept
{
	delete to_srnic_mr(reinterpret_cast<verbs_mr *>(ibmr));
}

int dereg_mr(verbs_mr *vmr) noexcept
{
	const int err = ibv_cmd_dereg_mr(vmr);
	if (err)
		return err;

	delete to_srnic_mr(vmr);
	return 0;
}

} // namespace srnic
