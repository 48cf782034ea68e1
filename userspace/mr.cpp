// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "mr.h"

#include "pd.h"
#include "uverbs_ioctl.h"

#include <array>
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

// UVERBS_METHOD_REG_DMABUF_MR, issued here rather than through
// ibv_cmd_reg_dmabuf_mr(): rdma-core 54 added a parameter to that helper
// without changing the private ABI (34) that a provider built on 44 also
// loads into, while the ioctl is stable uapi. Fills vmr as the helper would.
static int reg_dmabuf_mr_ioctl(ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova, int fd,
			       int access, verbs_mr &vmr) noexcept
{
	uint32_t lkey = 0;
	uint32_t rkey = 0;
	std::array<ib_uverbs_attr, 9> attrs = {
		uverbs_attr_obj(UVERBS_ATTR_REG_DMABUF_MR_HANDLE, 0), // new: the kernel writes it
		uverbs_attr_obj(UVERBS_ATTR_REG_DMABUF_MR_PD_HANDLE, pd->handle),
		uverbs_attr_in_inline(UVERBS_ATTR_REG_DMABUF_MR_OFFSET, offset, sizeof(uint64_t)),
		uverbs_attr_in_inline(UVERBS_ATTR_REG_DMABUF_MR_LENGTH, length, sizeof(uint64_t)),
		uverbs_attr_in_inline(UVERBS_ATTR_REG_DMABUF_MR_IOVA, iova, sizeof(uint64_t)),
		uverbs_attr_in_inline(UVERBS_ATTR_REG_DMABUF_MR_FD, static_cast<uint32_t>(fd),
				      sizeof(int32_t)),
		uverbs_attr_in_inline(UVERBS_ATTR_REG_DMABUF_MR_ACCESS_FLAGS,
				      static_cast<uint32_t>(access), sizeof(uint32_t)),
		uverbs_attr_out(UVERBS_ATTR_REG_DMABUF_MR_RESP_LKEY, lkey),
		uverbs_attr_out(UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY, rkey),
	};
	if (const int err = uverbs_ioctl(pd->context->cmd_fd, UVERBS_OBJECT_MR,
					 UVERBS_METHOD_REG_DMABUF_MR, attrs))
		return err;
	ibv_mr &mr = vmr.ibv_mr;
	mr.context = pd->context;
	mr.pd = pd;
	mr.handle = static_cast<uint32_t>(attrs[0].data);
	mr.lkey = lkey;
	mr.rkey = rkey;
	mr.addr = reinterpret_cast<void *>(static_cast<uintptr_t>(offset));
	mr.length = length;
	vmr.mr_type = IBV_MR_TYPE_DMABUF_MR;
	return 0;
}

ibv_mr *reg_dmabuf_mr(ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova, int fd,
		      int access) noexcept
{
	std::unique_ptr<Mr> mr(new (std::nothrow) Mr{});
	if (!mr) {
		errno = ENOMEM;
		return nullptr;
	}
	if (const int err = reg_dmabuf_mr_ioctl(pd, offset, length, iova, fd, access, mr->vmr)) {
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
