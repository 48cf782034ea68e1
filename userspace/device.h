// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// An srnic device as libibverbs sees it, and the verbs that query it.
#ifndef SRNIC_DEVICE_H
#define SRNIC_DEVICE_H

#include "verbs_driver_abi.h"

#include <cstddef>
#include <cstdint>

namespace srnic
{

struct Device {
	verbs_device vdev; // first: libibverbs hands back &vdev and &vdev.device
};

[[nodiscard]] inline Device *to_srnic_device(verbs_device *vdev) noexcept
{
	static_assert(offsetof(Device, vdev) == 0);
	return reinterpret_cast<Device *>(vdev);
}

// The query_device_ex verb: everything comes from the kernel (packet pacing's
// capabilities in srnic's driver data); only the firmware version string is
// ours to format.
int query_device_ex(ibv_context *ibctx, const ibv_query_device_ex_input *input,
		    ibv_device_attr_ex *attr, size_t attr_size) noexcept;

// The query_port verb.
int query_port(ibv_context *ibctx, uint8_t port_num, ibv_port_attr *port_attr) noexcept;

// Formats the kernel's 64-bit firmware version (major << 32 | minor << 16 |
// sub_minor, as rxe encodes it) into ibv_device_attr::fw_ver.
void format_fw_ver(uint64_t raw_fw_ver, char *buf, size_t size) noexcept;

} // namespace srnic

#endif // SRNIC_DEVICE_H
