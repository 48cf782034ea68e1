// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "mr_registry.h"

#include <new>
#include <utility>

namespace srnic
{
namespace
{

[[nodiscard]] size_t hash_lkey(uint32_t lkey) noexcept
{
	return static_cast<size_t>(lkey) * 0x9e3779b97f4a7c15ull;
}

} // namespace

size_t MrRegistry::find(uint32_t lkey) const noexcept
{
	if (!capacity_)
		return SIZE_MAX;
	const size_t mask = capacity_ - 1;
	for (size_t i = hash_lkey(lkey) & mask;; i = (i + 1) & mask) {
		if (!slots_[i].used)
			return SIZE_MAX;
		if (slots_[i].lkey == lkey)
			return i;
	}
}

void MrRegistry::insert(const Slot &slot) noexcept
{
	const size_t mask = capacity_ - 1;
	size_t i = hash_lkey(slot.lkey) & mask;
	while (slots_[i].used)
		i = (i + 1) & mask;
	slots_[i] = slot;
	++count_;
}

bool MrRegistry::grow() noexcept
{
	const size_t capacity = capacity_ ? capacity_ * 2 : 16;
	std::unique_ptr<Slot[]> slots(new (std::nothrow) Slot[capacity]());
	if (!slots)
		return false;
	std::unique_ptr<Slot[]> old = std::exchange(slots_, std::move(slots));
	const size_t old_capacity = std::exchange(capacity_, capacity);
	count_ = 0;
	for (size_t i = 0; i < old_capacity; ++i)
		if (old[i].used)
			insert(old[i]);
	return true;
}

void MrRegistry::add(uint32_t lkey, uint64_t iova, uint64_t length, const void *addr) noexcept
{
	const Slot slot = {lkey, true, iova, length, static_cast<const std::byte *>(addr)};
	SpinGuard guard(lock_);
	if (const size_t i = find(lkey); i != SIZE_MAX) {
		slots_[i] = slot;
		return;
	}
	// At most half full, so that probes stay short and always end.
	if (2 * (count_ + 1) > capacity_ && !grow())
		return;
	insert(slot);
}

void MrRegistry::remove(uint32_t lkey) noexcept
{
	SpinGuard guard(lock_);
	size_t i = find(lkey);
	if (i == SIZE_MAX)
		return;
	// Backward-shift deletion: move later members of the probe run into
	// the hole when their home slot does not lie between hole and them.
	const size_t mask = capacity_ - 1;
	slots_[i].used = false;
	--count_;
	for (size_t j = (i + 1) & mask; slots_[j].used; j = (j + 1) & mask) {
		const size_t home = hash_lkey(slots_[j].lkey) & mask;
		const bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
		if (stays)
			continue;
		slots_[i] = slots_[j];
		slots_[j].used = false;
		i = j;
	}
}

const std::byte *MrRegistry::translate(uint32_t lkey, uint64_t iova,
				       uint64_t length) const noexcept
{
	SpinGuard guard(lock_);
	const size_t i = find(lkey);
	if (i == SIZE_MAX)
		return nullptr;
	const Slot &s = slots_[i];
	if (iova < s.iova || length > s.length || iova - s.iova > s.length - length)
		return nullptr;
	return s.addr + (iova - s.iova);
}

} // namespace srnic
