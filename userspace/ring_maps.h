// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// RingMaps: a context's shared ring mappings. The kernel places the small
// rings of a context (SQs) side by side in chunks of its ring arena and
// describes each with SRNIC_QUEUE_DESC_SHARED: the chunk's mmap offset and
// size, and the ring's offset in it. The first ring of a chunk maps the
// chunk, the others take references on that mapping, and the last one
// released unmaps it.
//
// Mapping and unmapping happen under the lock, and an mmap offset is not
// reused by the kernel while it is mapped, so a cached mapping always
// stands for the chunk its offset names.
#ifndef SRNIC_RING_MAPS_H
#define SRNIC_RING_MAPS_H

#include "shared_mapping.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>

namespace srnic
{

class RingMaps
{
	struct Chunk {
		uint64_t offset = 0;
		SharedMapping mapping;
		unsigned long refs = 0;
	};

    public:
	// A reference on one shared mapping: released by reset(), by
	// assignment of another reference, or by its destructor.
	class Ref
	{
	    public:
		Ref() noexcept = default;
		Ref(const Ref &) = delete;
		Ref &operator=(const Ref &) = delete;
		Ref(Ref &&other) noexcept
		    : maps_(std::exchange(other.maps_, nullptr)),
		      chunk_(std::exchange(other.chunk_, nullptr))
		{
		}
		Ref &operator=(Ref &&other) noexcept
		{
			if (this != &other) {
				reset();
				maps_ = std::exchange(other.maps_, nullptr);
				chunk_ = std::exchange(other.chunk_, nullptr);
			}
			return *this;
		}
		~Ref() { reset(); }

		void reset() noexcept
		{
			if (chunk_)
				maps_->release(chunk_);
			maps_ = nullptr;
			chunk_ = nullptr;
		}

		[[nodiscard]] std::byte *data() const noexcept
		{
			return chunk_ ? chunk_->mapping.data() : nullptr;
		}
		[[nodiscard]] size_t size() const noexcept
		{
			return chunk_ ? chunk_->mapping.size() : 0;
		}

	    private:
		friend class RingMaps;
		RingMaps *maps_ = nullptr;
		Chunk *chunk_ = nullptr;
	};

	RingMaps() noexcept = default;
	RingMaps(const RingMaps &) = delete;
	RingMaps &operator=(const RingMaps &) = delete;
	// Unmaps what rings never released (an application that closed the
	// device with QPs left).
	~RingMaps();

	// Points ref at the mapping of size bytes of cmd_fd at offset: maps it
	// when no ring holds it yet. Returns 0, EPROTO when it is held with
	// another size (the kernel would contradict itself), ENOMEM, or
	// mmap()'s errno.
	[[nodiscard]] int acquire(int cmd_fd, uint64_t offset, size_t size, Ref &ref) noexcept;

	// Mappings held (for tests).
	[[nodiscard]] size_t count() const noexcept;

    private:
	void release(Chunk *chunk) noexcept;
	[[nodiscard]] size_t home(uint64_t offset) const noexcept;
	[[nodiscard]] size_t find(uint64_t offset) const noexcept;
	[[nodiscard]] bool grow() noexcept;
	void erase(size_t slot) noexcept;

	mutable std::mutex lock_;
	// Open addressing with linear probing, keyed by mmap offset; at most
	// half full.
	std::unique_ptr<Chunk *[]> slots_;
	size_t capacity_ = 0; // a power of two, or 0
	unsigned int capacity_bits_ = 0;
	size_t count_ = 0;
};

} // namespace srnic

#endif // SRNIC_RING_MAPS_H
