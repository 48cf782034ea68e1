// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "device.h"

#include <rdma/srnic-abi.h>

#include <cstddef>
#include <cstdio>

namespace srnic
{

void format_fw_ver(uint64_t raw_fw_ver, char *buf, size_t size) noexcept
{
	const unsigned major = (raw_fw_ver >> 32) & 0xffff;
	const unsigned minor = (raw_fw_ver >> 16) & 0xffff;
	const unsigned sub_minor = raw_fw_ver & 0xffff;
	snprintf(buf, size, "%u.%u.%u", major, minor, sub_minor);
}

int query_device_ex(ibv_context *ibctx, const ibv_query_device_ex_input *input,
		    ibv_device_attr_ex *attr, size_t attr_size) noexcept
{
	// uverbs' answer, then srnic's (the extended command's driver data).
	struct {
		ib_uverbs_ex_query_device_resp core;
		srnic_query_device_resp driver;
	} resp = {};
	static_assert(offsetof(decltype(resp), driver) == sizeof(resp.core));
	size_t resp_size = sizeof(resp);
	const int err =
		ibv_cmd_query_device_any(ibctx, input, attr, attr_size, &resp.core, &resp_size);
	if (err)
		return err;

	format_fw_ver(resp.core.base.fw_ver, attr->orig_attr.fw_ver,
		      sizeof(attr->orig_attr.fw_ver));
	if (attr_size >= offsetof(ibv_device_attr_ex, packet_pacing_caps) +
				 sizeof(attr->packet_pacing_caps)) {
		attr->packet_pacing_caps.qp_rate_limit_min = resp.driver.qp_rate_limit_min;
		attr->packet_pacing_caps.qp_rate_limit_max = resp.driver.qp_rate_limit_max;
		attr->packet_pacing_caps.supported_qpts = resp.driver.packet_pacing_qpts;
	}
	return 0;
}

int query_port(ibv_context *ibctx, uint8_t port_num, ibv_port_attr *port_attr) noexcept
{
	struct ibv_query_port cmd = {};
	return ibv_cmd_query_port(ibctx, port_num, port_attr, &cmd, sizeof(cmd));
}

} // namespace srnic
