// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "mr.h"

#include "pd.h"

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
	protection_domain_of(pd).mrs.add(mr->vmr.ibv_mr.lkey, hca_va, length, addr);
	return &mr.release()->vmr.ibv_mr;
}

ibv_mr *reg_dmabuf_mr(ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova, int fd,
		      int access) noexcept
{
	std::unique_ptr<Mr> mr(new (std::nothrow) Mr{});
	if (!mr) {
		errno = ENOMEM;
		return nullptr;
	}
#if SRNIC_RDMA_CORE_MAJOR >= 54
	const int err = ibv_cmd_reg_dmabuf_mr(pd, offset, length, iova, fd, access, &mr->vmr,
					      nullptr);
#else
	const int err = ibv_cmd_reg_dmabuf_mr(pd, offset, length, iova, fd, access, &mr->vmr);
#endif
	if (err) {
		errno = err;
		return nullptr;
	}
	return &mr.release()->vmr.ibv_mr;
}

int rereg_mr(verbs_mr *vmr, int flags, ibv_pd *pd, void *addr, size_t length,
	     int access) noexcept
{
	struct ibv_rereg_mr cmd = {};
	ib_uverbs_rereg_mr_resp resp = {};
	const int err = ibv_cmd_rereg_mr(vmr, static_cast<uint32_t>(flags), addr, length,
					 reinterpret_cast<uintptr_t>(addr), access, pd, &cmd,
					 sizeof(cmd), &resp, sizeof(resp));
	// ibv_rereg_mr() returns its own IBV_REREG_MR_ERR_CMD code: the cause
	// reaches the caller only through errno.
	if (err) {
		errno = err;
		return err;
	}
	// libibverbs updates ibv_mr's pd, addr and length after we return. A
	// new translation is recorded (its iova is addr); an MR only moved to
	// another PD is forgotten, and served by the engine from then on.
	ibv_mr &ibmr = vmr->ibv_mr;
	if (flags & (IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD))
		protection_domain_of(ibmr.pd).mrs.remove(ibmr.lkey);
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION)
		protection_domain_of((flags & IBV_REREG_MR_CHANGE_PD) ? pd : ibmr.pd)
			.mrs.add(ibmr.lkey, reinterpret_cast<uintptr_t>(addr), length, addr);
	return 0;
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
	static_assert(offsetof(verbs_mr, ibv_mr) == 0);
	delete to_srnic_mr(reinterpret_cast<verbs_mr *>(ibmr));
}

int dereg_mr(verbs_mr *vmr) noexcept
{
	ibv_pd *pd = vmr->ibv_mr.pd;
	const uint32_t lkey = vmr->ibv_mr.lkey;
	const int err = ibv_cmd_dereg_mr(vmr);
	if (err)
		return err;
	// (A direct copy reading it meanwhile read the process's own memory.)
	protection_domain_of(pd).mrs.remove(lkey);

	delete to_srnic_mr(vmr);
	return 0;
}

int advise_mr(ibv_pd *pd, ibv_advise_mr_advice advice, uint32_t flags, ibv_sge *sg_list,
	      uint32_t num_sge) noexcept
{
	return ibv_cmd_advise_mr(pd, advice, flags, sg_list, num_sge);
}

} // namespace srnic
