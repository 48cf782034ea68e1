// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// One uverbs ioctl (RDMA_VERBS_IOCTL) built by hand, for the methods that
// carry srnic's own attributes: libibverbs' command helpers take driver
// attributes only through their private command buffer type, which
// distributions do not install, while the ioctl itself is stable uapi.
#ifndef SRNIC_UVERBS_IOCTL_H
#define SRNIC_UVERBS_IOCTL_H

#include <rdma/ib_user_ioctl_verbs.h>
#include <rdma/rdma_user_ioctl_cmds.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <sys/ioctl.h>

namespace srnic
{

// Runs method_id of object_id with attrs, every one made mandatory (a kernel
// that lacks one fails rather than ignoring it). The attributes are copied
// back afterwards: the kernel writes the handles of new objects into them.
// Returns 0 or a positive errno.
template <size_t N>
[[nodiscard]] int uverbs_ioctl(int cmd_fd, uint16_t object_id, uint16_t method_id,
			       std::array<ib_uverbs_attr, N> &attrs) noexcept
{
	for (ib_uverbs_attr &a : attrs)
		a.flags = UVERBS_ATTR_F_MANDATORY;

	// ib_uverbs_ioctl_hdr ends in a flexible array of attributes: build the
	// command in 8-byte words, header then attributes.
	constexpr size_t kCmdBytes = sizeof(ib_uverbs_ioctl_hdr) + sizeof(attrs);
	static_assert(sizeof(ib_uverbs_ioctl_hdr) % 8 == 0 && sizeof(ib_uverbs_attr) == 16);
	std::array<uint64_t, kCmdBytes / 8> cmd = {};
	auto *hdr = reinterpret_cast<ib_uverbs_ioctl_hdr *>(cmd.data());
	hdr->length = kCmdBytes;
	hdr->object_id = object_id;
	hdr->method_id = method_id;
	hdr->num_attrs = N;
	hdr->driver_id = RDMA_DRIVER_UNKNOWN;
	std::memcpy(hdr->attrs, attrs.data(), sizeof(attrs));

	if (ioctl(cmd_fd, RDMA_VERBS_IOCTL, hdr) != 0)
		return errno;
	std::memcpy(attrs.data(), hdr->attrs, sizeof(attrs));
	return 0;
}

// An output attribute: the kernel writes up to sizeof(T) bytes into out.
template <typename T>
[[nodiscard]] ib_uverbs_attr uverbs_attr_out(uint16_t attr_id, T &out) noexcept
{
	static_assert(sizeof(T) <= UINT16_MAX);
	ib_uverbs_attr a = {};
	a.attr_id = attr_id;
	a.len = sizeof(T);
	a.data = reinterpret_cast<uintptr_t>(&out);
	return a;
}

// An input attribute of at most 8 bytes, passed inline.
[[nodiscard]] inline ib_uverbs_attr uverbs_attr_in_inline(uint16_t attr_id, uint64_t value,
							  uint16_t len) noexcept
{
	ib_uverbs_attr a = {};
	a.attr_id = attr_id;
	a.len = len;
	a.data = value;
	return a;
}

// An object handle attribute (in, or out for a new object).
[[nodiscard]] inline ib_uverbs_attr uverbs_attr_obj(uint16_t attr_id, uint32_t handle) noexcept
{
	ib_uverbs_attr a = {};
	a.attr_id = attr_id;
	a.data = handle;
	return a;
}

} // namespace srnic

#endif // SRNIC_UVERBS_IOCTL_H
