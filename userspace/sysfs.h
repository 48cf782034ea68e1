// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Recognising an srnic device from sysfs. srnic registers with driver id
// RDMA_DRIVER_UNKNOWN (it is out of tree and has none), so libibverbs cannot
// route devices to it by driver id, and matching by device name would break as
// soon as a device is renamed. Instead the kernel module gives every srnic
// device the attribute SRNIC_SYSFS_ABI_ATTR, holding its ABI version.
#ifndef SRNIC_SYSFS_H
#define SRNIC_SYSFS_H

#include <rdma/srnic-abi.h>

#include <cstdint>
#include <optional>
#include <string_view>

struct verbs_sysfs_dev;

namespace srnic
{

// The number in an ABI version attribute's text: decimal digits, optionally
// followed by one newline (as sysfs prints it). Anything else is not a version.
[[nodiscard]] std::optional<uint32_t> parse_abi_version(std::string_view text) noexcept;

// The ABI version an RDMA device directory (/sys/class/infiniband/<name>)
// advertises, or nullopt when it has no readable, well-formed srnic attribute.
[[nodiscard]] std::optional<uint32_t> read_sysfs_abi_version(const char *ibdev_path) noexcept;

// True iff the device is an srnic device speaking SRNIC_ABI_VERSION. Prints a
// warning when it is an srnic device of another ABI, so that a version skew
// between module and provider does not look like a missing device.
[[nodiscard]] bool sysfs_dev_is_srnic(const verbs_sysfs_dev &sysfs_dev) noexcept;

// The alloc_ucontext answer a device publishes in SRNIC_SYSFS_UCONTEXT_ATTR:
// "<max_inline_data> <queue_ctrl_size> <page_size>" and one optional newline;
// nullopt for anything else. abi_version is set to SRNIC_ABI_VERSION (the
// device matched with it).
[[nodiscard]] std::optional<srnic_alloc_ucontext_resp>
parse_ucontext_attr(std::string_view text) noexcept;

// The same, read from an RDMA device directory (/sys/class/infiniband/<name>).
[[nodiscard]] std::optional<srnic_alloc_ucontext_resp>
read_sysfs_ucontext(const char *ibdev_path) noexcept;

} // namespace srnic

#endif // SRNIC_SYSFS_H
