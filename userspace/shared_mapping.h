// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// SharedMapping: one MAP_SHARED, read-write mmap() of the uverbs command fd
// (a ring, a direct window, a loan), owned: unmapped by reset(), by
// assignment of another mapping, or by its destructor.
#ifndef SRNIC_SHARED_MAPPING_H
#define SRNIC_SHARED_MAPPING_H

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <sys/mman.h>
#include <sys/types.h>
#include <utility>

namespace srnic
{

class SharedMapping
{
    public:
	SharedMapping() noexcept = default;
	SharedMapping(const SharedMapping &) = delete;
	SharedMapping &operator=(const SharedMapping &) = delete;
	SharedMapping(SharedMapping &&other) noexcept
	    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0))
	{
	}
	SharedMapping &operator=(SharedMapping &&other) noexcept
	{
		if (this != &other) {
			reset();
			data_ = std::exchange(other.data_, nullptr);
			size_ = std::exchange(other.size_, 0);
		}
		return *this;
	}
	~SharedMapping() { reset(); }

	// Maps size bytes of fd at offset, replacing any earlier mapping.
	// Returns 0 or mmap()'s errno.
	[[nodiscard]] int map(int fd, uint64_t offset, size_t size) noexcept
	{
		reset();
		void *addr = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
				  static_cast<off_t>(offset));
		if (addr == MAP_FAILED)
			return errno;
		data_ = static_cast<std::byte *>(addr);
		size_ = size;
		return 0;
	}

	void reset() noexcept
	{
		if (data_)
			munmap(data_, size_);
		data_ = nullptr;
		size_ = 0;
	}

	[[nodiscard]] bool mapped() const noexcept { return data_ != nullptr; }
	[[nodiscard]] std::byte *data() const noexcept { return data_; }
	[[nodiscard]] size_t size() const noexcept { return size_; }

    private:
	std::byte *data_ = nullptr;
	size_t size_ = 0;
};

} // namespace srnic

#endif // SRNIC_SHARED_MAPPING_H
