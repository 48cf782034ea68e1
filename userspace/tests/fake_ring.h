// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Test helpers: ring memory laid out as the kernel maps it, and the kernel's
// side of a CQ, so queue.h can be exercised without a device.
#ifndef SRNIC_TESTS_FAKE_RING_H
#define SRNIC_TESTS_FAKE_RING_H

#include "queue.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <sys/mman.h>

namespace srnic::test
{

// When a two-thread test gives up: kStall without progress (not a fixed time:
// make check runs the unit tests at nice 19 beside two VMs, where the threads
// may get little CPU, while a broken protocol makes none at all).
class StallDeadline
{
public:
	static constexpr std::chrono::seconds kStall{30};

	void progress() noexcept { deadline_ = std::chrono::steady_clock::now() + kStall; }
	[[nodiscard]] bool passed() const noexcept
	{
		return std::chrono::steady_clock::now() > deadline_;
	}

private:
	std::chrono::steady_clock::time_point deadline_ = std::chrono::steady_clock::now() + kStall;
};

// Anonymous, zero-filled, page-aligned memory standing in for a ring the
// kernel maps: struct srnic_queue_ctrl, padding to ctrl_size, then entries.
class FakeRingMemory
{
    public:
	static constexpr uint32_t ctrl_size =
		256; // > sizeof(srnic_queue_ctrl), like a kernel might

	FakeRingMemory(uint32_t num_entries, uint32_t entry_size)
	    : num_entries_(num_entries), entry_size_(entry_size),
	      size_(ctrl_size + size_t{num_entries} * entry_size)
	{
		void *mem = mmap(nullptr, size_, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		EXPECT_NE(mem, MAP_FAILED);
		mem_ = mem == MAP_FAILED ? nullptr : mem;
	}
	FakeRingMemory(const FakeRingMemory &) = delete;
	FakeRingMemory &operator=(const FakeRingMemory &) = delete;
	~FakeRingMemory()
	{
		if (mem_)
			munmap(mem_, size_);
	}

	[[nodiscard]] bool valid() const
	{
		return mem_ &&
		       ring_geometry_is_valid(size_, ctrl_size, num_entries_, entry_size_, 1);
	}
	[[nodiscard]] RingView view() const
	{
		return RingView(mem_, ctrl_size, num_entries_, entry_size_);
	}
	[[nodiscard]] srnic_queue_ctrl &ctrl() const
	{
		return *static_cast<srnic_queue_ctrl *>(mem_);
	}

	// Pretends the ring has already carried `start` entries: both indexes
	// at start, as if created that way. Only for rings without owner bits.
	void start_indexes_at(uint32_t start) const
	{
		ctrl().producer = start;
		ctrl().consumer = start;
	}

    private:
	void *mem_ = nullptr;
	uint32_t num_entries_;
	uint32_t entry_size_;
	size_t size_;
};

// The kernel's side of a CQ: checks for room with the consumer index, writes
// the body, then (release) the owner byte for the current lap.
class FakeKernelCq
{
    public:
	explicit FakeKernelCq(RingView ring)
	    : ring_(ring), producer_(load_relaxed(ring.ctrl().producer))
	{
	}

	// Writes a completion for wr_id; false if that would overrun the CQ.
	bool complete(uint64_t wr_id, uint32_t byte_len = 0)
	{
		srnic_cqe body;
		// Garbage in the fields not set, as a kernel reusing the slot
		// might leave, so a reader that reads the body early sees it.
		std::memset(&body, 0xa5, sizeof(body));
		body.wr_id = wr_id;
		body.byte_len = byte_len;
		body.qp_num = 7;
		body.status = 0;
		return complete(body);
	}

	// Writes a completion with the body of `body` (its owner byte ignored);
	// false if that would overrun the CQ.
	bool complete(const srnic_cqe &body)
	{
		if (producer_ - load_acquire(ring_.ctrl().consumer) >= ring_.num_entries())
			return false;

		auto *cqe = reinterpret_cast<srnic_cqe *>(ring_.entry(producer_));
		// Everything but the owner byte, as srnic_cq_write_cqe() does.
		constexpr size_t owner = offsetof(srnic_cqe, owner);
		std::memcpy(cqe, &body, owner);
		std::memcpy(reinterpret_cast<std::byte *>(cqe) + owner + 1,
			    reinterpret_cast<const std::byte *>(&body) + owner + 1,
			    sizeof(body) - owner - 1);
		std::atomic_ref<__u8>(cqe->owner)
			.store(cqe_owner_phase(producer_, ring_.num_entries()),
			       std::memory_order_release);
		++producer_;
		store_release(ring_.ctrl().producer, producer_);
		return true;
	}

	// Makes a ring look as if `start` completions had already gone through
	// it and been consumed: indexes at start, every slot holding a CQE of the
	// lap before the one the reader now expects.
	static void fast_forward(RingView ring, uint32_t start)
	{
		ring.ctrl().producer = start;
		ring.ctrl().consumer = start;
		for (uint32_t i = 0; i < ring.num_entries(); ++i) {
			const uint32_t index = start + i;
			auto *cqe = reinterpret_cast<srnic_cqe *>(ring.entry(index));
			cqe->owner =
				cqe_owner_phase(index - ring.num_entries(), ring.num_entries());
		}
	}

    private:
	RingView ring_;
	uint32_t producer_;
};

} // namespace srnic::test

#endif // SRNIC_TESTS_FAKE_RING_H
