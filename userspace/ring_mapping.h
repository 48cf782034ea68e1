// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// RingMapping: one ring the kernel described with a struct srnic_queue_desc,
// mmap()ed from the context fd, validated once and unmapped by its destructor.
#ifndef SRNIC_RING_MAPPING_H
#define SRNIC_RING_MAPPING_H

#include "queue.h"
#include "shared_mapping.h"

#include <rdma/srnic-abi.h>

#include <cstdint>

namespace srnic
{

class RingMapping
{
    public:
	// Checks the geometry (entries of at least min_entry_size bytes, all
	// inside the mapping) and maps it. Returns 0 or a positive errno:
	// EPROTO for a geometry that cannot be trusted.
	[[nodiscard]] int map(int cmd_fd, const srnic_queue_desc &desc, uint32_t ctrl_size,
			      uint32_t min_entry_size) noexcept;

	void reset() noexcept { mapping_.reset(); }

	[[nodiscard]] bool mapped() const noexcept { return mapping_.mapped(); }
	[[nodiscard]] RingView view() const noexcept
	{
		return RingView(mapping_.data(), ctrl_size_, desc_.num_entries, desc_.entry_size);
	}

    private:
	SharedMapping mapping_;
	srnic_queue_desc desc_ = {};
	uint32_t ctrl_size_ = 0;
};

} // namespace srnic

#endif // SRNIC_RING_MAPPING_H
