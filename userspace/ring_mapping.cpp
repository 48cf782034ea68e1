// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "ring_mapping.h"

#include <cerrno>

namespace srnic
{

int RingMapping::map(int cmd_fd, const srnic_queue_desc &desc, uint32_t ctrl_size,
		     uint32_t min_entry_size) noexcept
{
	reset();
	if (!ring_geometry_is_valid(desc.mmap_size, ctrl_size, desc.num_entries, desc.entry_size,
				    min_entry_size))
		return EPROTO;
	const int err = mapping_.map(cmd_fd, desc.mmap_offset, desc.mmap_size);
	if (err)
		return err;
	desc_ = desc;
	ctrl_size_ = ctrl_size;
	return 0;
}

} // namespace srnic
