// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Checks srnic applies to the kernel's alloc_ucontext response.
#include "context.h"

#include <rdma/srnic-abi.h>

#include <gtest/gtest.h>

namespace srnic::test
{
namespace
{

constexpr uint32_t kPageSize = 4096;

srnic_alloc_ucontext_resp good_resp()
{
	return {
		.abi_version = SRNIC_ABI_VERSION,
		.max_inline_data = 64,
		.queue_ctrl_size = sizeof(srnic_queue_ctrl),
		.page_size = kPageSize,
	};
}

TEST(UcontextResp, AcceptsAConsistentResponse)
{
	EXPECT_EQ(ucontext_resp_problem(good_resp(), kPageSize), nullptr);

	srnic_alloc_ucontext_resp resp = good_resp();
	resp.queue_ctrl_size = kPageSize; // a whole page for the record is fine
	resp.max_inline_data = 0;	  // so is no inline data
	EXPECT_EQ(ucontext_resp_problem(resp, kPageSize), nullptr);

	resp.page_size = 65536;
	EXPECT_EQ(ucontext_resp_problem(resp, 65536), nullptr);
}

TEST(UcontextResp, RejectsAnotherAbiVersion)
{
	srnic_alloc_ucontext_resp resp = good_resp();
	resp.abi_version = SRNIC_ABI_VERSION + 1;
	EXPECT_NE(ucontext_resp_problem(resp, kPageSize), nullptr);
	resp.abi_version = 0; // a kernel that left the response unset
	EXPECT_NE(ucontext_resp_problem(resp, kPageSize), nullptr);
}

TEST(UcontextResp, RejectsAPageSizeOtherThanTheProcesss)
{
	srnic_alloc_ucontext_resp resp = good_resp();
	resp.page_size = 8192;
	EXPECT_NE(ucontext_resp_problem(resp, kPageSize), nullptr);
	resp.page_size = 0;
	EXPECT_NE(ucontext_resp_problem(resp, kPageSize), nullptr);
}

TEST(UcontextResp, RejectsABadQueueControlRecordSize)
{
	srnic_alloc_ucontext_resp resp = good_resp();
	for (uint32_t size : {0u, 64u, 128u, 200u, 2 * kPageSize}) {
		resp.queue_ctrl_size = size;
		EXPECT_NE(ucontext_resp_problem(resp, kPageSize), nullptr) << size;
	}
}

} // namespace
} // namespace srnic::test
