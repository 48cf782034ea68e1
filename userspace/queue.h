// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Fast-path views over the rings the kernel maps into the process (format in
// <rdma/srnic-abi.h>): header-only, allocation-free, lock-free, no virtual
// calls. One thread drives each view; the kernel engine is the other side.
//
//  - ProducerView: the provider fills entries (send and receive queues),
//    "record, then barrier, then doorbell".
//  - ConsumerView: entries flow the other way, tracked by the producer index
//    alone (also what the kernel does on a send queue; tests use it as such).
//  - CqReader: completions, "owner bit, then acquire barrier, then body".
//
// Shared fields are only touched through std::atomic_ref, so every access to
// memory the kernel also writes is explicit about its ordering.
#ifndef SRNIC_QUEUE_H
#define SRNIC_QUEUE_H

#include <rdma/srnic-abi.h>

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace srnic
{

// ---- Invariants of the ring format -----------------------------------------

static_assert(std::has_single_bit(unsigned{SRNIC_CACHELINE_SIZE}));
static_assert(offsetof(srnic_queue_ctrl, producer) == 0);
static_assert(offsetof(srnic_queue_ctrl, consumer) == SRNIC_CACHELINE_SIZE,
	      "producer and consumer must not share a cache line");
static_assert(offsetof(srnic_queue_ctrl, flags) == 2 * SRNIC_CACHELINE_SIZE);
static_assert(std::has_single_bit(sizeof(srnic_cqe)), "CQ entries are indexed by shifting");
static_assert(std::has_single_bit(sizeof(srnic_send_wqe)));
static_assert(std::has_single_bit(sizeof(srnic_recv_wqe)));
static_assert(std::has_single_bit(sizeof(srnic_sge)));
// The kernel sees these fields as plain aligned words: atomic_ref must not need
// more alignment than the ABI gives them, nor fall back to a lock.
static_assert(std::atomic_ref<__u32>::required_alignment <= alignof(__u32));
static_assert(std::atomic_ref<__u32>::is_always_lock_free);
static_assert(std::atomic_ref<__u8>::is_always_lock_free);

// Phase a CQE's owner byte holds once the kernel has written it for the lap
// containing free-running index `index`: lap n = index / num_entries has phase
// 1 when n is even and 2 when it is odd, never 0, so no zero-filled page (a new
// ring, or the zero page that replaces a ring's mapping once the device is
// gone) ever holds a valid entry. Because num_entries
// is a power of two, lap parity is just the num_entries bit of the index, and
// it stays right across the 2^32 wrap (2^32 / num_entries is even).
[[nodiscard]] constexpr __u8 cqe_owner_phase(uint32_t index, uint32_t num_entries) noexcept
{
	return (index & num_entries) ? 2 : 1;
}

static_assert(cqe_owner_phase(0, 4) == 1 && cqe_owner_phase(3, 4) == 1);
static_assert(cqe_owner_phase(4, 4) == 2 && cqe_owner_phase(7, 4) == 2);
static_assert(cqe_owner_phase(8, 4) == 1);
static_assert(cqe_owner_phase(0xffffffffu, 4) == 2 && cqe_owner_phase(0, 4) == 1);

// Whether a ring described by the kernel can be used safely: control record
// large enough and cache-line sized, power-of-two count and entry size, entries
// big enough for what the caller will put there, and everything inside the
// mapping. Checked once at creation so the fast path can trust the geometry.
[[nodiscard]] constexpr bool ring_geometry_is_valid(uint64_t mmap_size, uint32_t ctrl_size,
						    uint32_t num_entries, uint32_t entry_size,
						    uint32_t min_entry_size) noexcept
{
	if (ctrl_size < sizeof(srnic_queue_ctrl) || ctrl_size % SRNIC_CACHELINE_SIZE != 0)
		return false;
	if (!std::has_single_bit(num_entries) || !std::has_single_bit(entry_size))
		return false;
	if (entry_size < min_entry_size)
		return false;
	// 64-bit arithmetic: 2^31 entries of 2^31 bytes cannot overflow it.
	return uint64_t{ctrl_size} + uint64_t{num_entries} * entry_size <= mmap_size;
}

static_assert(ring_geometry_is_valid(4096 + 64 * 64, 192, 64, 64, sizeof(srnic_cqe)));
static_assert(!ring_geometry_is_valid(4096, 192, 64, 64, sizeof(srnic_cqe)));
static_assert(!ring_geometry_is_valid(1 << 20, 192, 48, 64, sizeof(srnic_cqe)));

// ---- Shared-memory accessors ------------------------------------------------

[[nodiscard]] inline uint32_t load_acquire(__u32 &shared) noexcept
{
	return std::atomic_ref<__u32>(shared).load(std::memory_order_acquire);
}

[[nodiscard]] inline uint32_t load_relaxed(__u32 &shared) noexcept
{
	return std::atomic_ref<__u32>(shared).load(std::memory_order_relaxed);
}

inline void store_release(__u32 &shared, uint32_t value) noexcept
{
	std::atomic_ref<__u32>(shared).store(value, std::memory_order_release);
}

// ---- RingView: addressing one mapped ring ---------------------------------

// A non-owning view of one ring mapping: the control record, then the entries.
// The geometry must have passed ring_geometry_is_valid().
class RingView
{
    public:
	RingView(void *mapping, uint32_t ctrl_size, uint32_t num_entries,
		 uint32_t entry_size) noexcept
	    : ctrl_(static_cast<srnic_queue_ctrl *>(mapping)),
	      entries_(static_cast<std::byte *>(mapping) + ctrl_size), mask_(num_entries - 1),
	      entry_shift_(std::countr_zero(entry_size))
	{
	}

	[[nodiscard]] srnic_queue_ctrl &ctrl() const noexcept { return *ctrl_; }
	[[nodiscard]] uint32_t num_entries() const noexcept { return mask_ + 1; }
	[[nodiscard]] uint32_t entry_size() const noexcept { return uint32_t{1} << entry_shift_; }

	// The slot a free-running index maps to.
	[[nodiscard]] std::byte *entry(uint32_t index) const noexcept
	{
		return entries_ + (size_t{index & mask_} << entry_shift_);
	}

	// enum srnic_queue_flags, as last written by the kernel.
	[[nodiscard]] uint32_t flags() const noexcept { return load_acquire(ctrl_->flags); }

    private:
	srnic_queue_ctrl *ctrl_;
	std::byte *entries_;
	uint32_t mask_;
	int entry_shift_;
};

// ---- ProducerView: the provider fills entries --------------------------------

// Posting is: next_free_entry(), write it, commit_entry(), repeat for a batch,
// then one publish_then_check_need_wakeup() and, if that says so, a doorbell.
class ProducerView
{
    public:
	explicit ProducerView(RingView ring) noexcept
	    : ring_(ring), producer_(load_relaxed(ring.ctrl().producer)),
	      cached_consumer_(load_acquire(ring.ctrl().consumer))
	{
	}

	// The slot to write next, or nullptr when the ring is full. Refreshes the
	// consumer index only when the cached one says full, so posting into a
	// ring with room never touches the consumer's cache line. The acquire
	// load orders the kernel's last reads of a slot before our rewrite.
	[[nodiscard]] std::byte *next_free_entry() noexcept
	{
		if (producer_ - cached_consumer_ >= ring_.num_entries()) {
			cached_consumer_ = load_acquire(ring_.ctrl().consumer);
			// A consumer index ahead of ours (a kernel bug) makes the
			// difference huge: reported as full, never overwritten.
			if (producer_ - cached_consumer_ >= ring_.num_entries())
				return nullptr;
		}
		return ring_.entry(producer_);
	}

	// The entry from next_free_entry() is written; it stays invisible to the
	// kernel until the next publish.
	void commit_entry() noexcept { ++producer_; }

	// Record, then barrier, then doorbell. The release store makes every
	// committed entry visible before the new producer index. The full fence
	// then orders that store before the load of the flags: it pairs with the
	// kernel engine's "set NEED_WAKEUP, smp_mb(), re-read producer" before it
	// sleeps, so either the engine sees our entries or we see its flag.
	// Returns true when the caller must ring the doorbell (a syscall).
	[[nodiscard]] bool publish_then_check_need_wakeup() noexcept
	{
		store_release(ring_.ctrl().producer, producer_);
		std::atomic_thread_fence(std::memory_order_seq_cst);
		return load_relaxed(ring_.ctrl().flags) & SRNIC_QUEUE_NEED_WAKEUP;
	}

	// Forget the committed entries not yet published: the next one goes
	// where the first of them was.
	void discard_unpublished() noexcept { producer_ = load_relaxed(ring_.ctrl().producer); }

	// Committed entries not yet published.
	[[nodiscard]] uint32_t unpublished() const noexcept
	{
		return producer_ - load_relaxed(ring_.ctrl().producer);
	}

	[[nodiscard]] const RingView &ring() const noexcept { return ring_; }

    private:
	RingView ring_;
	uint32_t producer_;	   // our next index; only we write the shared copy
	uint32_t cached_consumer_; // the kernel's consumer index, as last read
};

// ---- ConsumerView: entries produced by the other side ----------------------

class ConsumerView
{
    public:
	explicit ConsumerView(RingView ring) noexcept
	    : ring_(ring), consumer_(load_relaxed(ring.ctrl().consumer)),
	      cached_producer_(consumer_)
	{
	}

	// The oldest unconsumed entry, or nullptr when there is none. The
	// acquire load of the producer index orders the producer's writes of the
	// entry before our reads of it.
	[[nodiscard]] const std::byte *next_entry() noexcept
	{
		if (cached_producer_ == consumer_) {
			cached_producer_ = load_acquire(ring_.ctrl().producer);
			// More than a ring's worth (a buggy producer): read nothing.
			if (cached_producer_ - consumer_ > ring_.num_entries())
				cached_producer_ = consumer_;
			if (cached_producer_ == consumer_)
				return nullptr;
		}
		return ring_.entry(consumer_);
	}

	// The entry from next_entry() has been read.
	void consume_entry() noexcept { ++consumer_; }

	// Hand consumed slots back to the producer. Release: our reads of them
	// complete before the producer can see the slots free and rewrite them.
	void release_consumed() noexcept { store_release(ring_.ctrl().consumer, consumer_); }

	[[nodiscard]] const RingView &ring() const noexcept { return ring_; }

    private:
	RingView ring_;
	uint32_t consumer_;	   // our next index; only we write the shared copy
	uint32_t cached_producer_; // the producer index, as last read
};

// ---- CqReader: completions, by owner bit --------------------------------------

// Polling reads only the CQE lines, never the kernel's producer line: whether
// the next slot holds a new completion is told by its owner byte.
class CqReader
{
    public:
	explicit CqReader(RingView ring) noexcept
	    : ring_(ring), consumer_(load_relaxed(ring.ctrl().consumer))
	{
	}

	// Owner bit, then acquire barrier, then body. Returns the next
	// completion once its owner byte holds the phase of the current lap, or
	// nullptr. The acquire load pairs with the kernel's release before it
	// writes owner, so the body the caller reads through the returned pointer
	// is complete; the kernel leaves it alone until release_consumed().
	[[nodiscard]] const srnic_cqe *check_owner_then_acquire_cqe() noexcept
	{
		auto *cqe = reinterpret_cast<srnic_cqe *>(ring_.entry(consumer_));
		const __u8 owner =
			std::atomic_ref<__u8>(cqe->owner).load(std::memory_order_acquire);
		if (owner != cqe_owner_phase(consumer_, ring_.num_entries()))
			return nullptr;
		return cqe;
	}

	// The completion from check_owner_then_acquire_cqe() has been read.
	void consume_cqe() noexcept { ++consumer_; }

	// Give consumed slots back to the kernel (it checks the consumer index
	// to detect CQ overrun). Release: our reads of those CQEs complete first.
	void release_consumed() noexcept { store_release(ring_.ctrl().consumer, consumer_); }

	[[nodiscard]] const RingView &ring() const noexcept { return ring_; }

	// Drops the unpolled completions of QP qpn and keeps the others in
	// order (as mlx5 does when a QP is reset): the kept CQEs move towards
	// the newest one, and the consumer index advances past the slots freed.
	// Only slots the kernel has written and not been given back are
	// touched; it writes new CQEs beyond them meanwhile. A moved CQE keeps
	// its destination slot's owner byte, which already holds that slot's
	// phase. Returns how many were dropped.
	uint32_t discard_qp_cqes(uint32_t qpn) noexcept
	{
		uint32_t valid = 0;
		while (valid < ring_.num_entries() && cqe_at_if_written(consumer_ + valid))
			++valid;
		constexpr size_t owner = offsetof(srnic_cqe, owner);
		uint32_t dropped = 0;
		for (uint32_t k = valid; k-- > 0;) {
			auto *cqe = reinterpret_cast<srnic_cqe *>(ring_.entry(consumer_ + k));
			if (cqe->qp_num == qpn) {
				++dropped;
			} else if (dropped) {
				auto *dst = reinterpret_cast<std::byte *>(
					ring_.entry(consumer_ + k + dropped));
				auto *src = reinterpret_cast<const std::byte *>(cqe);
				std::memcpy(dst, src, owner);
				std::memcpy(dst + owner + 1, src + owner + 1,
					    sizeof(srnic_cqe) - owner - 1);
			}
		}
		if (dropped) {
			consumer_ += dropped;
			release_consumed();
		}
		return dropped;
	}

    private:
	// The CQE at free-running index, if the kernel has written it.
	[[nodiscard]] const srnic_cqe *cqe_at_if_written(uint32_t index) const noexcept
	{
		auto *cqe = reinterpret_cast<srnic_cqe *>(ring_.entry(index));
		const __u8 owner =
			std::atomic_ref<__u8>(cqe->owner).load(std::memory_order_acquire);
		return owner == cqe_owner_phase(index, ring_.num_entries()) ? cqe : nullptr;
	}

	RingView ring_;
	uint32_t consumer_; // our next index; only we write the shared copy
};

} // namespace srnic

#endif // SRNIC_QUEUE_H
