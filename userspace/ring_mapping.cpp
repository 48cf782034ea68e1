// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "ring_mapping.h"

#include <cerrno>

namespace srnic
{

int RingMapping::map(RingMaps &maps, int cmd_fd, const srnic_queue_desc &desc,
		     uint32_t ctrl_size, uint32_t min_entry_size) noexcept
{
	reset();
	if (!ring_placement_is_valid(desc) ||
	    !ring_geometry_is_valid(desc.mmap_size - desc.ring_offset, ctrl_size, desc.num_entries,
				    desc.entry_size, min_entry_size))
		return EPROTO;
	std::byte *base;
	if (desc.flags & SRNIC_QUEUE_DESC_SHARED) {
		const int err = maps.acquire(cmd_fd, desc.mmap_offset, desc.mmap_size, shared_);
		if (err)
			return err;
		base = shared_.data();
	} else {
		const int err = own_.map(cmd_fd, desc.mmap_offset, desc.mmap_size);
		if (err)
			return err;
		base = own_.data();
	}
	ring_ = base + desc.ring_offset;
	desc_ = desc;
	ctrl_size_ = ctrl_size;
	return 0;
}

} // namespace srnic
