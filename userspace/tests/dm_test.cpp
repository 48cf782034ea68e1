// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "dm.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>

namespace srnic::test
{
namespace
{

TEST(DmAccessCheck, AcceptsAlignedRangesInside)
{
	EXPECT_EQ(dm_access_check(100, 0, 100), 0);
	EXPECT_EQ(dm_access_check(100, 96, 4), 0);
	EXPECT_EQ(dm_access_check(100, 100, 0), 0);
	EXPECT_EQ(dm_access_check(100, 0, 0), 0);
}

TEST(DmAccessCheck, RefusesUnalignedOffsetOrLength)
{
	EXPECT_EQ(dm_access_check(100, 3, 4), EINVAL);
	EXPECT_EQ(dm_access_check(100, 4, 3), EINVAL);
	EXPECT_EQ(dm_access_check(100, 1, 0), EINVAL);
}

TEST(DmAccessCheck, RefusesRangesBeyondTheLengthAskedFor)
{
	// 102 bytes asked for: the mapping has a whole page, copies get 102.
	EXPECT_EQ(dm_access_check(102, 100, 4), EINVAL);
	EXPECT_EQ(dm_access_check(100, 104, 4), EINVAL);
	EXPECT_EQ(dm_access_check(100, 0, 104), EINVAL);
	EXPECT_EQ(dm_access_check(100, 104, 0), EINVAL);
}

TEST(DmAccessCheck, RefusesWrappingRanges)
{
	const uint64_t huge_offset = UINT64_MAX - 3; // aligned, offset + 8 wraps
	EXPECT_EQ(dm_access_check(100, huge_offset, 8), EINVAL);
	EXPECT_EQ(dm_access_check(UINT64_MAX, huge_offset, 8), EINVAL);
}

TEST(DmAllocRespProblem, AcceptsTheLengthRoundedUpToPages)
{
	EXPECT_EQ(dm_alloc_resp_problem({.mmap_offset = 8192, .mmap_size = 4096}, 100, 4096),
		  nullptr);
	EXPECT_EQ(dm_alloc_resp_problem({.mmap_offset = 0, .mmap_size = 8192}, 4097, 4096),
		  nullptr);
	EXPECT_EQ(dm_alloc_resp_problem({.mmap_offset = 4096, .mmap_size = 4096}, 4096, 4096),
		  nullptr);
}

TEST(DmAllocRespProblem, RefusesOtherSizesAndUnalignedOffsets)
{
	EXPECT_NE(dm_alloc_resp_problem({.mmap_offset = 0, .mmap_size = 4096}, 4097, 4096),
		  nullptr);
	EXPECT_NE(dm_alloc_resp_problem({.mmap_offset = 0, .mmap_size = 8192}, 100, 4096),
		  nullptr);
	EXPECT_NE(dm_alloc_resp_problem({.mmap_offset = 100, .mmap_size = 4096}, 100, 4096),
		  nullptr);
	EXPECT_NE(dm_alloc_resp_problem({.mmap_offset = 0, .mmap_size = 4096}, 0, 4096), nullptr);
	EXPECT_NE(dm_alloc_resp_problem({.mmap_offset = 0, .mmap_size = 0}, UINT64_MAX, 4096),
		  nullptr);
}

} // namespace
} // namespace srnic::test
