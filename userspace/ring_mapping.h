// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// RingMapping: one ring the kernel described with a struct srnic_queue_desc,
// validated once and mapped: a mapping of its own, mmap()ed from the context
// fd and unmapped by its destructor, or a place in a mapping it shares with
// other rings of the context (SRNIC_QUEUE_DESC_SHARED, see RingMaps).
#ifndef SRNIC_RING_MAPPING_H
#define SRNIC_RING_MAPPING_H

#include "queue.h"
#include "ring_maps.h"
#include "shared_mapping.h"

#include <rdma/srnic-abi.h>

#include <cstdint>

namespace srnic
{

class RingMapping
{
    public:
	RingMapping() noexcept = default;
	RingMapping(RingMapping &&other) noexcept { *this = std::move(other); }
	RingMapping &operator=(RingMapping &&other) noexcept
	{
		if (this != &other) {
			own_ = std::move(other.own_);
			shared_ = std::move(other.shared_);
			ring_ = std::exchange(other.ring_, nullptr);
			desc_ = other.desc_;
			ctrl_size_ = other.ctrl_size_;
		}
		return *this;
	}

	// Checks the geometry (entries of at least min_entry_size bytes, all
	// inside the mapping) and maps it, through maps for a shared mapping.
	// Returns 0 or a positive errno: EPROTO for a geometry that cannot be
	// trusted.
	[[nodiscard]] int map(RingMaps &maps, int cmd_fd, const srnic_queue_desc &desc,
			      uint32_t ctrl_size, uint32_t min_entry_size) noexcept;

	void reset() noexcept
	{
		own_.reset();
		shared_.reset();
		ring_ = nullptr;
	}

	[[nodiscard]] bool mapped() const noexcept { return ring_ != nullptr; }
	[[nodiscard]] RingView view() const noexcept
	{
		return RingView(ring_, ctrl_size_, desc_.num_entries, desc_.entry_size);
	}

    private:
	SharedMapping own_;
	RingMaps::Ref shared_;
	std::byte *ring_ = nullptr; // the control record
	srnic_queue_desc desc_ = {};
	uint32_t ctrl_size_ = 0;
};

// Whether desc places a ring inside its mapping, at a cache-line boundary,
// shared (SRNIC_QUEUE_DESC_SHARED) or alone at offset 0, with no flag or
// reserved bit this provider does not know.
[[nodiscard]] constexpr bool ring_placement_is_valid(const srnic_queue_desc &desc) noexcept
{
	if (desc.reserved || (desc.flags & ~uint32_t{SRNIC_QUEUE_DESC_SHARED}))
		return false;
	if (!(desc.flags & SRNIC_QUEUE_DESC_SHARED) && desc.ring_offset)
		return false;
	return desc.ring_offset % SRNIC_CACHELINE_SIZE == 0 && desc.ring_offset < desc.mmap_size;
}

} // namespace srnic

#endif // SRNIC_RING_MAPPING_H
