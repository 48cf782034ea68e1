// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Parent domains (pd.cpp) without a kernel: what alloc_parent_domain accepts
// and refuses, that the parent domain stands for its protection domain's
// kernel handle, and the order dealloc_pd enforces between the two.
#include "pd.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace srnic::test
{
namespace
{

void *never_alloc(ibv_pd *, void *, size_t, size_t, uint64_t)
{
	return nullptr;
}

void never_free(ibv_pd *, void *, void *, uint64_t) {}

struct ParentDomainTest : ::testing::Test {
	ibv_context ctx = {};
	Pd pd = {};

	void SetUp() override
	{
		pd.ibpd.context = &ctx;
		pd.ibpd.handle = 42;
		pd.pdn = 7;
	}
};

TEST_F(ParentDomainTest, WrapsTheProtectionDomainsHandle)
{
	int user_data = 0;
	ibv_parent_domain_init_attr attr = {};
	attr.pd = &pd.ibpd;
	attr.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
			 IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
	attr.alloc = never_alloc;
	attr.free = never_free;
	attr.pd_context = &user_data;
	ibv_pd *parent = alloc_parent_domain(&ctx, &attr);
	ASSERT_NE(parent, nullptr);
	EXPECT_EQ(parent->context, &ctx);
	EXPECT_EQ(parent->handle, 42u);
	Pd *p = to_srnic_pd(parent);
	EXPECT_TRUE(p->is_parent_domain());
	EXPECT_FALSE(pd.is_parent_domain());
	EXPECT_EQ(p->protection_domain, &pd);
	EXPECT_EQ(p->pdn, 7u);
	EXPECT_EQ(p->alloc, never_alloc);
	EXPECT_EQ(p->free, never_free);
	EXPECT_EQ(p->pd_context, &user_data);

	// The protection domain outlives its parent domains.
	EXPECT_EQ(dealloc_pd(&pd.ibpd), EBUSY);
	EXPECT_EQ(dealloc_pd(parent), 0);
	EXPECT_EQ(pd.parent_domains.load(), 0u);
}

TEST_F(ParentDomainTest, RefusesWhatSrnicCannotHonour)
{
	ibv_parent_domain_init_attr attr = {};
	errno = 0;
	EXPECT_EQ(alloc_parent_domain(&ctx, &attr), nullptr); // no PD
	EXPECT_EQ(errno, EINVAL);

	ibv_context other = {};
	attr.pd = &pd.ibpd;
	errno = 0;
	EXPECT_EQ(alloc_parent_domain(&other, &attr), nullptr); // another context's PD
	EXPECT_EQ(errno, EINVAL);

	ibv_td td = {};
	attr.td = &td;
	errno = 0;
	EXPECT_EQ(alloc_parent_domain(&ctx, &attr), nullptr); // no thread domains
	EXPECT_EQ(errno, EOPNOTSUPP);

	attr.td = nullptr;
	attr.comp_mask = 1u << 7;
	errno = 0;
	EXPECT_EQ(alloc_parent_domain(&ctx, &attr), nullptr);
	EXPECT_EQ(errno, EOPNOTSUPP);

	attr.comp_mask = 0;
	ibv_pd *parent = alloc_parent_domain(&ctx, &attr);
	ASSERT_NE(parent, nullptr);
	attr.pd = parent; // a parent domain of a parent domain
	errno = 0;
	EXPECT_EQ(alloc_parent_domain(&ctx, &attr), nullptr);
	EXPECT_EQ(errno, EINVAL);
	EXPECT_EQ(pd.parent_domains.load(), 1u);
	EXPECT_EQ(dealloc_pd(parent), 0);
}

} // namespace
} // namespace srnic::test
