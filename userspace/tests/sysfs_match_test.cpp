// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Device matching against fake sysfs device directories in a temporary dir.
#include "sysfs.h"
#include "verbs_driver_abi.h"

#include <rdma/srnic-abi.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace srnic::test
{
namespace
{

namespace fs = std::filesystem;

// A temporary directory standing in for /sys/class/infiniband.
class FakeSysfs : public ::testing::Test
{
    protected:
	void SetUp() override
	{
		std::string templ = (fs::temp_directory_path() / "srnic-sysfs-XXXXXX").string();
		ASSERT_NE(mkdtemp(templ.data()), nullptr);
		root_ = templ;
	}

	void TearDown() override { fs::remove_all(root_); }

	// Creates the directory of an RDMA device, with an ABI attribute
	// holding `attribute` unless it is nullptr.
	fs::path add_device(const std::string &name, const char *attribute)
	{
		const fs::path dir = root_ / name;
		fs::create_directories(dir);
		std::ofstream(dir / "node_type") << "1: CA\n";
		if (attribute)
			std::ofstream(dir / SRNIC_SYSFS_ABI_ATTR) << attribute;
		return dir;
	}

	// What libibverbs would hand srnic_match_device for that directory.
	static bool matches(const fs::path &ibdev_path)
	{
		verbs_sysfs_dev sysfs_dev = {};
		const std::string path = ibdev_path.string();
		EXPECT_LT(path.size(), sizeof(sysfs_dev.ibdev_path));
		std::strncpy(sysfs_dev.ibdev_path, path.c_str(), sizeof(sysfs_dev.ibdev_path) - 1);
		return sysfs_dev_is_srnic(sysfs_dev);
	}

	static std::string current_version() { return std::to_string(SRNIC_ABI_VERSION); }

	fs::path root_;
};

TEST(ParseAbiVersion, AcceptsDecimalWithOptionalNewline)
{
	EXPECT_EQ(parse_abi_version("1\n"), 1u);
	EXPECT_EQ(parse_abi_version("1"), 1u);
	EXPECT_EQ(parse_abi_version("0"), 0u);
	EXPECT_EQ(parse_abi_version("4294967295\n"), 4294967295u);
}

TEST(ParseAbiVersion, RejectsEverythingElse)
{
	for (const char *text : {"", "\n", "abc", "1x", "1 ", " 1", "-1", "+1", "0x1", "1\n\n",
				 "1\n2", "4294967296", "99999999999999999999"})
		EXPECT_EQ(parse_abi_version(text), std::nullopt) << '"' << text << '"';
	EXPECT_EQ(parse_abi_version(std::string_view("1\0", 2)), std::nullopt);
}

TEST_F(FakeSysfs, MatchesADeviceWithTheCurrentVersion)
{
	EXPECT_TRUE(matches(add_device("srnic0", (current_version() + "\n").c_str())));
	EXPECT_TRUE(matches(add_device("srnic1", current_version().c_str())));
	EXPECT_EQ(read_sysfs_abi_version((root_ / "srnic0").c_str()), SRNIC_ABI_VERSION);
}

TEST_F(FakeSysfs, MatchDoesNotDependOnTheDeviceName)
{
	const std::string attribute = current_version() + "\n";
	EXPECT_TRUE(matches(add_device("my-roce_dev.7", attribute.c_str())));
	EXPECT_TRUE(matches(add_device("rxe0", attribute.c_str())));
	EXPECT_FALSE(matches(add_device("srnic9", nullptr)));
}

TEST_F(FakeSysfs, IgnoresDevicesWithoutTheAttribute)
{
	EXPECT_FALSE(matches(add_device("mlx5_0", nullptr)));
	EXPECT_EQ(read_sysfs_abi_version((root_ / "mlx5_0").c_str()), std::nullopt);
}

TEST_F(FakeSysfs, RejectsAnotherAbiVersion)
{
	const std::string other = std::to_string(SRNIC_ABI_VERSION + 1) + "\n";
	EXPECT_FALSE(matches(add_device("srnic0", other.c_str())));
	EXPECT_EQ(read_sysfs_abi_version((root_ / "srnic0").c_str()), SRNIC_ABI_VERSION + 1);
	EXPECT_FALSE(matches(add_device("srnic1", "0\n")));
}

TEST_F(FakeSysfs, RejectsGarbage)
{
	int n = 0;
	for (const char *garbage : {"", "\n", "srnic\n", "1.0\n", "-1\n", "0x1\n",
				    "000000000000000000000000000000000000001\n"}) {
		EXPECT_FALSE(matches(add_device("dev" + std::to_string(n++), garbage)))
			<< '"' << garbage << '"';
	}
}

TEST_F(FakeSysfs, RejectsUnreadableAttributes)
{
	// The attribute is a directory.
	const fs::path dir = add_device("srnic0", nullptr);
	fs::create_directory(dir / SRNIC_SYSFS_ABI_ATTR);
	EXPECT_FALSE(matches(dir));

	// The device directory itself is gone (hot-unplugged meanwhile).
	EXPECT_FALSE(matches(root_ / "vanished"));
}

TEST_F(FakeSysfs, SurvivesAMaximalPath)
{
	verbs_sysfs_dev sysfs_dev = {};
	std::memset(sysfs_dev.ibdev_path, 'a', sizeof(sysfs_dev.ibdev_path) - 1);
	EXPECT_FALSE(sysfs_dev_is_srnic(sysfs_dev));
}

} // namespace
} // namespace srnic::test

namespace srnic::test
{
namespace
{

TEST(UcontextAttr, ParsesWhatTheKernelPrints)
{
	const auto resp = parse_ucontext_attr("512 4096 4096\n");
	ASSERT_TRUE(resp);
	EXPECT_EQ(resp->abi_version, uint32_t{SRNIC_ABI_VERSION});
	EXPECT_EQ(resp->max_inline_data, 512u);
	EXPECT_EQ(resp->queue_ctrl_size, 4096u);
	EXPECT_EQ(resp->page_size, 4096u);
	EXPECT_TRUE(parse_ucontext_attr("0 64 65536"));
}

TEST(UcontextAttr, RejectsAnythingElse)
{
	for (const char *text : {"", "\n", "512 4096", "512 4096 4096 1", "512  4096 4096",
				 " 512 4096 4096", "512 4096 4096\n\n", "512 4096 -1",
				 "512 4096 99999999999", "a b c", "512,4096,4096"})
		EXPECT_FALSE(parse_ucontext_attr(text)) << '"' << text << '"';
}

} // namespace
} // namespace srnic::test
