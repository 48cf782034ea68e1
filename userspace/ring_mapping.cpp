// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "ring_mapping.h"

#include <cerrno>
#include <sys/mman.h>

namespace srnic
{

int RingMapping::map(int cmd_fd, const srnic_queue_desc &desc, uint32_t ctrl_size,
		     uint32_t min_entry_size) noexcept
{
	reset();
	if (!ring_geometry_is_valid(desc.mmap_size, ctrl_size, desc.num_entries, desc.entry_size,
				    min_entry_size))
		return EPROTO;

	void *addr = mmap(nullptr, desc.mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, cmd_fd,
			  static_cast<off_t>(desc.mmap_offset));
	if (addr == MAP_FAILED)
		return errno;

	addr_ = addr;
	size_ = desc.mmap_size;
	desc_ = desc;
	ctrl_size_ = ctrl_size;
	return 0;
}

void RingMapping::reset() noexcept
{
	if (addr_)
		munmap(addr_, size_);
	addr_ = nullptr;
	size_ = 0;
}

} // namespace srnic
