// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// A minimal spinlock for the fast path. libibverbs requires a provider's
// post_send, post_recv and poll_cq to be safe when several threads use the
// same QP or CQ; the critical sections are a few stores into a ring, so an
// uncontended lock is one atomic exchange and never a syscall.
#ifndef SRNIC_SPINLOCK_H
#define SRNIC_SPINLOCK_H

#include <atomic>

namespace srnic
{

class SpinLock
{
    public:
	void lock() noexcept
	{
		while (locked_.exchange(true, std::memory_order_acquire))
			while (locked_.load(std::memory_order_relaxed))
				cpu_relax();
	}
	void unlock() noexcept { locked_.store(false, std::memory_order_release); }

    private:
	static void cpu_relax() noexcept
	{
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
	}

	std::atomic<bool> locked_{false};
};

// Holds a SpinLock for a scope (std::lock_guard works too; this one is
// noexcept by construction).
class SpinGuard
{
    public:
	explicit SpinGuard(SpinLock &lock) noexcept : lock_(lock) { lock_.lock(); }
	~SpinGuard() { lock_.unlock(); }
	SpinGuard(const SpinGuard &) = delete;
	SpinGuard &operator=(const SpinGuard &) = delete;

    private:
	SpinLock &lock_;
};

} // namespace srnic

#endif // SRNIC_SPINLOCK_H
