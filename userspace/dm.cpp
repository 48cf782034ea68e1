// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "dm.h"

#include "context.h"
#include "log.h"
#include "mr.h"

#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/rdma_user_ioctl_cmds.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <memory>
#include <new>
#include <sys/ioctl.h>
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
// libibverbs' ibv_cmd_alloc_dm() would take that attribute through its
// private command buffer type, which distributions do not install, so the
// provider issues the (stable, uapi) ioctl itself. Returns 0 or a positive
// errno.
int alloc_dm_ioctl(int cmd_fd, const ibv_alloc_dm_attr &attr, DmAllocation &out) noexcept
{
	constexpr size_t kNumAttrs = 4;
	std::array<ib_uverbs_attr, kNumAttrs> attrs = {};
	// All mandatory: a kernel that lacks one fails rather than ignoring it.
	attrs[0].attr_id = UVERBS_ATTR_ALLOC_DM_HANDLE; // IDR, new: the kernel writes the handle
	attrs[1].attr_id = UVERBS_ATTR_ALLOC_DM_LENGTH; // u64 inline
	attrs[1].len = sizeof(uint64_t);
	attrs[1].data = attr.length;
	attrs[2].attr_id = UVERBS_ATTR_ALLOC_DM_ALIGNMENT; // u32 inline
	attrs[2].len = sizeof(uint32_t);
	attrs[2].data = attr.log_align_req;
	attrs[3].attr_id = SRNIC_ATTR_ALLOC_DM_RESP; // output
	attrs[3].len = sizeof(out.resp);
	attrs[3].data = reinterpret_cast<uintptr_t>(&out.resp);
	for (ib_uverbs_attr &a : attrs)
		a.flags = UVERBS_ATTR_F_MANDATORY;

	// ib_uverbs_ioctl_hdr ends in a flexible array of attributes: build the
	// command in 8-byte words, header then attributes.
	constexpr size_t kCmdBytes = sizeof(ib_uverbs_ioctl_hdr) + sizeof(attrs);
	static_assert(sizeof(ib_uverbs_ioctl_hdr) % 8 == 0 && sizeof(ib_uverbs_attr) == 16);
	std::array<uint64_t, kCmdBytes / 8> cmd = {};
	auto *hdr = reinterpret_cast<ib_uverbs_ioctl_hdr *>(cmd.data());
	hdr->length = kCmdBytes;
	hdr->object_id = UVERBS_OBJECT_DM;
	hdr->method_id = UVERBS_METHOD_DM_ALLOC;
	hdr->num_attrs = kNumAttrs;
	hdr->driver_id = RDMA_DRIVER_UNKNOWN;
	std::memcpy(hdr->attrs, attrs.data(), sizeof(attrs));

	out = {};
	if (ioctl(cmd_fd, RDMA_VERBS_IOCTL, hdr) != 0)
		return errno;
	std::memcpy(attrs.data(), hdr->attrs, sizeof(attrs));
	out.handle = static_cast<uint32_t>(attrs[0].data);
	return 0;
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
	dm->vdm.handle = alloc.handle;
	dm->vdm.dm.handle = alloc.handle;
	dm->vdm.dm.comp_mask = IBV_DM_MASK_HANDLE;
	dm->vdm.dm.context = ibctx;
	dm->vdm.dm.memcpy_to_dm = memcpy_to_dm;
	dm->vdm.dm.memcpy_from_dm = memcpy_from_dm;
	dm->length = attr->length;

	if (const char *problem =
		    dm_alloc_resp_problem(alloc.resp, attr->length, ctx->limits.page_size)) {
		srnic_err(&ctx->ibv_ctx, "unusable alloc_dm response: %s\n", problem);
		errno = EPROTO;
		abandon_dm(*dm);
		return nullptr;
	}
	void *addr = mmap(nullptr, alloc.resp.mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED,
			  ibctx->cmd_fd, static_cast<off_t>(alloc.resp.mmap_offset));
	if (addr == MAP_FAILED) {
		srnic_err(&ctx->ibv_ctx, "mmap of device memory failed: %d\n", errno);
		abandon_dm(*dm);
		return nullptr;
	}
	dm->addr = addr;
	dm->map_size = alloc.resp.mmap_size;
	return &dm.release()->vdm.dm;
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
