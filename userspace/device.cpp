// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "device.h"

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
	ib_uverbs_ex_query_device_resp resp = {};
	size_t resp_size = sizeof(resp);
	const int err = ibv_cmd_query_device_any(ibctx, input, attr, attr_size, &resp, &resp_size);
	if (err)
		return err;

	format_fw_ver(resp.base.fw_ver, attr->orig_attr.fw_ver, sizeof(attr->orig_attr.fw_ver));
	return 0;
}

int query_port(ibv_context *ibctx, uint8_t port_num, ibv_port_attr *port_attr) noexcept
{
	struct ibv_query_port cmd = {};
	return ibv_cmd_query_port(ibctx, port_num, port_attr, &cmd, sizeof(cmd));
}

} // namespace srnic
