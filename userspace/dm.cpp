// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "dm.h"

#include "context.h"
#include "log.h"
#include "mr.h"

#include "uverbs_ioctl.h"

#include <rdma/ib_user_ioctl_cmds.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <memory>
#include <new>
#include <sys/mman.h>

namespace srnic
{
namespace
{

// Handle and mapping of a DM the kernel allocated (alloc_dm_ioctl()).
struct DmAllocation {
	uint32_t handle;
	srnic_alloc_dm_resp resp;
};

// UVERBS_METHOD_DM_ALLOC, with srnic's SRNIC_ATTR_ALLOC_DM_RESP output.
int alloc_dm_ioctl(int cmd_fd, const ibv_alloc_dm_attr &attr, DmAllocation &out) noexcept
{
	out = {};
	std::array<ib_uverbs_attr, 4> attrs = {
		uverbs_attr_obj(UVERBS_ATTR_ALLOC_DM_HANDLE, 0), // new: the kernel writes it
		uverbs_attr_in_inline(UVERBS_ATTR_ALLOC_DM_LENGTH, attr.length, sizeof(uint64_t)),
		uverbs_attr_in_inline(UVERBS_ATTR_ALLOC_DM_ALIGNMENT, attr.log_align_req,
				      sizeof(uint32_t)),
		uverbs_attr_out(SRNIC_ATTR_ALLOC_DM_RESP, out.resp),
	};
	if (const int err = uverbs_ioctl(cmd_fd, UVERBS_OBJECT_DM, UVERBS_METHOD_DM_ALLOC, attrs))
		return err;
	out.handle = static_cast<uint32_t>(attrs[0].data);
	return 0;
}

// SRNIC_METHOD_DM_QUERY: the mapping and length of an existing DM.
int query_dm_ioctl(int cmd_fd, uint32_t handle, srnic_query_dm_resp &out) noexcept
{
	out = {};
	std::array<ib_uverbs_attr, 2> attrs = {
		uverbs_attr_obj(SRNIC_ATTR_QUERY_DM_HANDLE, handle),
		uverbs_attr_out(SRNIC_ATTR_QUERY_DM_RESP, out),
	};
	return uverbs_ioctl(cmd_fd, UVERBS_OBJECT_DM, SRNIC_METHOD_DM_QUERY, attrs);
}

// Releases a DM whose allocation failed after the kernel made it.
void abandon_dm(Dm &dm) noexcept
{
	const int saved_errno = errno;
	(void)ibv_cmd_free_dm(&dm.vdm);
	errno = saved_errno;
}

int memcpy_to_dm(ibv_dm *ibdm, uint64_t dm_offset, const void *host_addr, size_t length) noexcept
{
	Dm *dm = to_srnic_dm(ibdm);
	if (const int err = dm_access_check(dm->length, dm_offset, length))
		return err;
	std::memcpy(static_cast<char *>(dm->addr) + dm_offset, host_addr, length);
	return 0;
}

int memcpy_from_dm(void *host_addr, ibv_dm *ibdm, uint64_t dm_offset, size_t length) noexcept
{
	Dm *dm = to_srnic_dm(ibdm);
	if (const int err = dm_access_check(dm->length, dm_offset, length))
		return err;
	std::memcpy(host_addr, static_cast<const char *>(dm->addr) + dm_offset, length);
	return 0;
}

// Everything of a DM but its mapping.
void init_dm(Dm &dm, ibv_context *ibctx, uint32_t handle, uint64_t length) noexcept
{
	dm.vdm.handle = handle;
	dm.vdm.dm.handle = handle;
	dm.vdm.dm.comp_mask = IBV_DM_MASK_HANDLE;
	dm.vdm.dm.context = ibctx;
	dm.vdm.dm.memcpy_to_dm = memcpy_to_dm;
	dm.vdm.dm.memcpy_from_dm = memcpy_from_dm;
	dm.length = length;
}

// Maps the memory the kernel described. Returns 0 or a positive errno
// (EPROTO for a description that does not fit dm.length).
int map_dm(Dm &dm, Context *ctx, const srnic_alloc_dm_resp &resp) noexcept
{
	if (const char *problem = dm_alloc_resp_problem(resp, dm.length, ctx->limits.page_size)) {
		srnic_err(&ctx->ibv_ctx, "unusable device memory description: %s\n", problem);
		return EPROTO;
	}
	void *addr = mmap(nullptr, resp.mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED,
			  ctx->ibv_ctx.context.cmd_fd, static_cast<off_t>(resp.mmap_offset));
	if (addr == MAP_FAILED) {
		const int err = errno;
		srnic_err(&ctx->ibv_ctx, "mmap of device memory failed: %d\n", err);
		return err;
	}
	dm.addr = addr;
	dm.map_size = resp.mmap_size;
	return 0;
}

} // namespace

int dm_access_check(uint64_t dm_length, uint64_t offset, size_t length) noexcept
{
	if (offset % kDmAccessAlignment != 0 || length % kDmAccessAlignment != 0)
		return EINVAL;
	if (offset > dm_length || length > dm_length - offset)
		return EINVAL;
	return 0;
}

const char *dm_alloc_resp_problem(const srnic_alloc_dm_resp &resp, uint64_t length,
				  uint32_t page_size) noexcept
{
	if (page_size == 0 || length == 0 || length > UINT64_MAX - page_size)
		return "unusable length or page size";
	const uint64_t expected = (length + page_size - 1) / page_size * page_size;
	if (resp.mmap_size != expected)
		return "mapping size is not the length rounded up to pages";
	if (resp.mmap_offset % page_size != 0)
		return "mapping offset is not page aligned";
	return nullptr;
}

ibv_dm *alloc_dm(ibv_context *ibctx, ibv_alloc_dm_attr *attr) noexcept
{
	Context *ctx = to_srnic_context(ibctx);
	if (attr->comp_mask != 0 || attr->length == 0) {
		errno = EINVAL;
		return nullptr;
	}

	std::unique_ptr<Dm> dm(new (std::nothrow) Dm{});
	if (!dm) {
		errno = ENOMEM;
		return nullptr;
	}

	DmAllocation alloc;
	if (const int err = alloc_dm_ioctl(ibctx->cmd_fd, *attr, alloc)) {
		errno = err;
		return nullptr;
	}
	init_dm(*dm, ibctx, alloc.handle, attr->length);
	if (const int err = map_dm(*dm, ctx, alloc.resp)) {
		errno = err;
		abandon_dm(*dm);
		return nullptr;
	}
	return &dm.release()->vdm.dm;
}

ibv_dm *import_dm(ibv_context *ibctx, uint32_t dm_handle) noexcept
{
	Context *ctx = to_srnic_context(ibctx);
	std::unique_ptr<Dm> dm(new (std::nothrow) Dm{});
	if (!dm) {
		errno = ENOMEM;
		return nullptr;
	}

	srnic_query_dm_resp resp;
	if (const int err = query_dm_ioctl(ibctx->cmd_fd, dm_handle, resp)) {
		errno = err;
		return nullptr;
	}
	init_dm(*dm, ibctx, dm_handle, resp.length);
	if (const int err = map_dm(*dm, ctx, {.mmap_offset = resp.mmap_offset,
					      .mmap_size = resp.mmap_size})) {
		errno = err;
		return nullptr;
	}
	return &dm.release()->vdm.dm;
}

void unimport_dm(ibv_dm *ibdm) noexcept
{
	Dm *dm = to_srnic_dm(ibdm);
	munmap(dm->addr, dm->map_size);
	delete dm;
}

int free_dm(ibv_dm *ibdm) noexcept
{
	Dm *dm = to_srnic_dm(ibdm);
	const int err = ibv_cmd_free_dm(&dm->vdm);
	if (err)
		return err;
	munmap(dm->addr, dm->map_size);
	delete dm;
	return 0;
}

ibv_mr *reg_dm_mr(ibv_pd *pd, ibv_dm *ibdm, uint64_t dm_offset, size_t length,
		  unsigned int access) noexcept
{
	std::unique_ptr<Mr> mr(new (std::nothrow) Mr{});
	if (!mr) {
		errno = ENOMEM;
		return nullptr;
	}
	const int err = ibv_cmd_reg_dm_mr(pd, &to_srnic_dm(ibdm)->vdm, dm_offset, length, access,
					  &mr->vmr, nullptr);
	if (err) {
		errno = err;
		return nullptr;
	}
	return &mr.release()->vmr.ibv_mr;
}

} // namespace srnic
