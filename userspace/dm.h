// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Device memory: alloc_dm, free_dm, ibv_memcpy_to_dm/ibv_memcpy_from_dm and
// reg_dm_mr. srnic's device memory is kernel memory with a per-device budget
// (kernel/srnic_dm.c) that the provider maps whole; copies are plain memcpy()
// over that mapping, bounded by the length the application asked for.
#ifndef SRNIC_DM_H
#define SRNIC_DM_H

#include "verbs_driver_abi.h"

#include <rdma/srnic-abi.h>

#include <cstddef>
#include <cstdint>

namespace srnic
{

// Copies to and from device memory move whole 4-byte words from a 4-byte
// aligned offset, as on hardware DM (and as rdma-core's tests expect).
inline constexpr uint64_t kDmAccessAlignment = 4;

struct Dm {
	verbs_dm vdm;	  // first: libibverbs hands back &vdm.dm
	void *addr;	  // the mapping of the whole allocation
	size_t map_size;  // bytes mapped (the length rounded up to pages)
	uint64_t length;  // bytes asked for: every copy stays inside them
};

[[nodiscard]] inline Dm *to_srnic_dm(ibv_dm *ibdm) noexcept
{
	static_assert(offsetof(Dm, vdm) == 0);
	return reinterpret_cast<Dm *>(ibdm);
}

// 0 if a copy of length bytes at offset fits a DM of dm_length bytes and is
// aligned to kDmAccessAlignment (offset and length), EINVAL otherwise.
[[nodiscard]] int dm_access_check(uint64_t dm_length, uint64_t offset, size_t length) noexcept;

// Why the kernel's alloc_dm answer cannot be mapped for a DM of length
// bytes, or nullptr if it can: the mapping must be the length rounded up to
// whole pages.
[[nodiscard]] const char *dm_alloc_resp_problem(const srnic_alloc_dm_resp &resp, uint64_t length,
						uint32_t page_size) noexcept;

// The alloc_dm verb: nullptr with errno set on failure (EINVAL for a
// comp_mask, a zero length, one beyond max_dm_size or an alignment beyond a
// page; ENOMEM when the device's budget is spent).
[[nodiscard]] ibv_dm *alloc_dm(ibv_context *ibctx, ibv_alloc_dm_attr *attr) noexcept;

// The free_dm verb; the DM stays valid (and mapped) if the kernel refuses,
// e.g. EBUSY while an MR is registered on it.
int free_dm(ibv_dm *ibdm) noexcept;

// The import_dm verb: the DM dm_handle of a context sharing this one's
// uverbs file (ibv_import_device() of a dup()ed command fd), mapped anew.
// nullptr with errno set on failure (ENOENT-like errnos from the kernel for
// an unknown handle).
[[nodiscard]] ibv_dm *import_dm(ibv_context *ibctx, uint32_t dm_handle) noexcept;

// The unimport_dm verb: unmaps and forgets an imported DM; the DM itself
// stays allocated for its owner.
void unimport_dm(ibv_dm *ibdm) noexcept;

// The reg_dm_mr verb: a zero-based MR (IBV_ACCESS_ZERO_BASED is required)
// on [dm_offset, dm_offset + length) of the DM. nullptr with errno set on
// failure; dereg_mr releases it.
[[nodiscard]] ibv_mr *reg_dm_mr(ibv_pd *pd, ibv_dm *ibdm, uint64_t dm_offset, size_t length,
				unsigned int access) noexcept;

} // namespace srnic

#endif // SRNIC_DM_H
