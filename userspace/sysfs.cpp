// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "sysfs.h"

#include "verbs_driver_abi.h"

#include <rdma/srnic-abi.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <fcntl.h>
#include <unistd.h>

namespace srnic
{
namespace
{

// Owns a file descriptor for the length of a scope.
class UniqueFd
{
    public:
	explicit UniqueFd(int fd) noexcept : fd_(fd) {}
	UniqueFd(const UniqueFd &) = delete;
	UniqueFd &operator=(const UniqueFd &) = delete;
	~UniqueFd()
	{
		if (fd_ >= 0)
			close(fd_);
	}

	[[nodiscard]] int get() const noexcept { return fd_; }

    private:
	int fd_;
};

// Reads a small file whole. Returns its length, or -1 on error or when it does
// not fit (an ABI version attribute is a few digits; more is not one).
ssize_t read_small_file(const char *path, char *buf, size_t size) noexcept
{
	UniqueFd fd(open(path, O_RDONLY | O_CLOEXEC));
	if (fd.get() < 0)
		return -1;

	size_t len = 0;
	while (len < size) {
		const ssize_t n = read(fd.get(), buf + len, size - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			return static_cast<ssize_t>(len);
		len += static_cast<size_t>(n);
	}
	return -1; // filled the buffer without reaching the end
}

} // namespace

std::optional<uint32_t> parse_abi_version(std::string_view text) noexcept
{
	if (text.ends_with('\n'))
		text.remove_suffix(1);

	// For an unsigned type from_chars takes digits only (no sign, no blanks)
	// and reports overflow; insisting that it consumes everything rejects
	// trailing garbage and the empty string.
	uint32_t value = 0;
	const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
	if (ec != std::errc() || end != text.data() + text.size())
		return std::nullopt;
	return value;
}

std::optional<uint32_t> read_sysfs_abi_version(const char *ibdev_path) noexcept
{
	char path[IBV_SYSFS_PATH_MAX + sizeof("/" SRNIC_SYSFS_ABI_ATTR)];
	const int path_len =
		snprintf(path, sizeof(path), "%s/%s", ibdev_path, SRNIC_SYSFS_ABI_ATTR);
	if (path_len < 0 || static_cast<size_t>(path_len) >= sizeof(path))
		return std::nullopt;

	char text[32];
	const ssize_t len = read_small_file(path, text, sizeof(text));
	if (len < 0)
		return std::nullopt;
	return parse_abi_version(std::string_view(text, static_cast<size_t>(len)));
}

std::optional<srnic_alloc_ucontext_resp> parse_ucontext_attr(std::string_view text) noexcept
{
	if (text.ends_with('\n'))
		text.remove_suffix(1);
	uint32_t values[3];
	const char *p = text.data();
	const char *end = text.data() + text.size();
	for (size_t i = 0; i < 3; ++i) {
		if (i) {
			if (p == end || *p != ' ')
				return std::nullopt;
			++p;
		}
		const auto [next, ec] = std::from_chars(p, end, values[i]);
		if (ec != std::errc())
			return std::nullopt;
		p = next;
	}
	if (p != end)
		return std::nullopt;
	srnic_alloc_ucontext_resp resp = {};
	resp.abi_version = SRNIC_ABI_VERSION;
	resp.max_inline_data = values[0];
	resp.queue_ctrl_size = values[1];
	resp.page_size = values[2];
	return resp;
}

std::optional<srnic_alloc_ucontext_resp> read_sysfs_ucontext(const char *ibdev_path) noexcept
{
	char path[IBV_SYSFS_PATH_MAX + sizeof("/" SRNIC_SYSFS_UCONTEXT_ATTR)];
	const int path_len =
		snprintf(path, sizeof(path), "%s/%s", ibdev_path, SRNIC_SYSFS_UCONTEXT_ATTR);
	if (path_len < 0 || static_cast<size_t>(path_len) >= sizeof(path))
		return std::nullopt;

	char text[64];
	const ssize_t len = read_small_file(path, text, sizeof(text));
	if (len < 0)
		return std::nullopt;
	return parse_ucontext_attr(std::string_view(text, static_cast<size_t>(len)));
}

bool sysfs_dev_is_srnic(const verbs_sysfs_dev &sysfs_dev) noexcept
{
	const std::optional<uint32_t> version = read_sysfs_abi_version(sysfs_dev.ibdev_path);
	if (!version)
		return false;
	if (*version != SRNIC_ABI_VERSION) {
		fprintf(stderr,
			"srnic: Warning: device %s speaks srnic ABI %u, this provider speaks %u; "
			"rebuild the provider or the kernel module from one tree\n",
			sysfs_dev.ibdev_path, *version, SRNIC_ABI_VERSION);
		return false;
	}
	return true;
}

} // namespace srnic
