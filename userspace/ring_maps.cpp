// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "ring_maps.h"

#include <cerrno>
#include <new>

namespace srnic
{

RingMaps::~RingMaps()
{
	for (size_t i = 0; i < capacity_; i++)
		delete slots_[i];
}

size_t RingMaps::home(uint64_t offset) const noexcept
{
	// Fibonacci hashing: offsets are consecutive multiples of the page size.
	return static_cast<size_t>((offset * 0x9e3779b97f4a7c15ULL) >> (64 - capacity_bits_));
}

// The slot holding offset, or the empty slot where it would go.
size_t RingMaps::find(uint64_t offset) const noexcept
{
	size_t i = home(offset);
	while (slots_[i] && slots_[i]->offset != offset)
		i = (i + 1) & (capacity_ - 1);
	return i;
}

bool RingMaps::grow() noexcept
{
	const unsigned int bits = capacity_bits_ ? capacity_bits_ + 1 : 4;
	std::unique_ptr<Chunk *[]> slots(new (std::nothrow) Chunk *[size_t{1} << bits]());
	if (!slots)
		return false;
	std::unique_ptr<Chunk *[]> old = std::exchange(slots_, std::move(slots));
	const size_t old_capacity = std::exchange(capacity_, size_t{1} << bits);
	capacity_bits_ = bits;
	for (size_t i = 0; i < old_capacity; i++)
		if (old[i])
			slots_[find(old[i]->offset)] = old[i];
	return true;
}

// Empties slot and moves back the entries probing passed it on the way to
// theirs, so that every entry stays reachable from its home slot.
void RingMaps::erase(size_t slot) noexcept
{
	const size_t mask = capacity_ - 1;
	slots_[slot] = nullptr;
	for (size_t j = (slot + 1) & mask; slots_[j]; j = (j + 1) & mask) {
		const size_t h = home(slots_[j]->offset);
		// Whether h lies cyclically in (slot, j]: then j's entry stays.
		const bool stays = slot <= j ? (slot < h && h <= j) : (slot < h || h <= j);
		if (!stays) {
			slots_[slot] = std::exchange(slots_[j], nullptr);
			slot = j;
		}
	}
	count_--;
}

int RingMaps::acquire(int cmd_fd, uint64_t offset, size_t size, Ref &ref) noexcept
{
	ref.reset();
	std::lock_guard guard(lock_);
	if (Chunk *chunk = capacity_ ? slots_[find(offset)] : nullptr) {
		if (chunk->mapping.size() != size)
			return EPROTO;
		chunk->refs++;
		ref.maps_ = this;
		ref.chunk_ = chunk;
		return 0;
	}
	if ((count_ + 1) * 2 > capacity_ && !grow())
		return ENOMEM;
	std::unique_ptr<Chunk> chunk(new (std::nothrow) Chunk{});
	if (!chunk)
		return ENOMEM;
	const int err = chunk->mapping.map(cmd_fd, offset, size);
	if (err)
		return err;
	chunk->offset = offset;
	chunk->refs = 1;
	slots_[find(offset)] = chunk.get();
	count_++;
	ref.maps_ = this;
	ref.chunk_ = chunk.release();
	return 0;
}

void RingMaps::release(Chunk *chunk) noexcept
{
	std::lock_guard guard(lock_);
	if (--chunk->refs)
		return;
	erase(find(chunk->offset));
	delete chunk; // unmaps, under the lock
}

size_t RingMaps::count() const noexcept
{
	std::lock_guard guard(lock_);
	return count_;
}

} // namespace srnic
