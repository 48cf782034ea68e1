// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "device.h"

#include <gtest/gtest.h>

#include <cstring>

namespace srnic::test
{
namespace
{

TEST(FormatFwVer, SplitsMajorMinorSubMinor)
{
	char buf[64];
	format_fw_ver((uint64_t{1} << 32) | (2 << 16) | 3, buf, sizeof(buf));
	EXPECT_STREQ(buf, "1.2.3");
	format_fw_ver(0, buf, sizeof(buf));
	EXPECT_STREQ(buf, "0.0.0");
	format_fw_ver(~uint64_t{0}, buf, sizeof(buf));
	EXPECT_STREQ(buf, "65535.65535.65535");
}

TEST(FormatFwVer, TruncatesToTheBuffer)
{
	char buf[4];
	std::memset(buf, 'x', sizeof(buf));
	format_fw_ver((uint64_t{10} << 32) | (20 << 16) | 30, buf, sizeof(buf));
	EXPECT_STREQ(buf, "10.");
}

TEST(FormatFwVer, FitsIbvDeviceAttr)
{
	ibv_device_attr attr = {};
	format_fw_ver(~uint64_t{0}, attr.fw_ver, sizeof(attr.fw_ver));
	EXPECT_STREQ(attr.fw_ver, "65535.65535.65535");
}

} // namespace
} // namespace srnic::test
