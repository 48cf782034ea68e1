// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The MRs a protection domain registered in this process, by lkey: what the
// direct path (direct_path.h) checks an SGE against before it reads the
// memory itself, as the engine checks it in the kernel. A miss only sends
// the work request to the engine, which then reports the error (or finds an
// MR registered elsewhere, e.g. through an imported PD), so the registry
// may forget an MR it had no memory to record.
#ifndef SRNIC_MR_REGISTRY_H
#define SRNIC_MR_REGISTRY_H

#include "spinlock.h"

#include <cstddef>
#include <cstdint>
#include <memory>

namespace srnic
{

class MrRegistry
{
    public:
	MrRegistry() noexcept = default;
	MrRegistry(const MrRegistry &) = delete;
	MrRegistry &operator=(const MrRegistry &) = delete;

	// Records an MR under lkey (replacing what was there): length bytes
	// from iova, the address SGEs use, at addr in this process.
	void add(uint32_t lkey, uint64_t iova, uint64_t length, const void *addr) noexcept;
	void remove(uint32_t lkey) noexcept;
	// Where [iova, iova + length) of the MR with lkey is in this process,
	// or nullptr when no MR of this domain with that lkey covers it.
	[[nodiscard]] const std::byte *translate(uint32_t lkey, uint64_t iova,
						 uint64_t length) const noexcept;

    private:
	struct Slot {
		uint32_t lkey;
		bool used;
		uint64_t iova;
		uint64_t length;
		const std::byte *addr;
	};

	// Open addressing, linear probing; capacity_ a power of two or 0.
	[[nodiscard]] size_t find(uint32_t lkey) const noexcept;
	[[nodiscard]] bool grow() noexcept;
	void insert(const Slot &slot) noexcept;

	mutable SpinLock lock_;
	std::unique_ptr<Slot[]> slots_;
	size_t capacity_ = 0;
	size_t count_ = 0;
};

} // namespace srnic

#endif // SRNIC_MR_REGISTRY_H
