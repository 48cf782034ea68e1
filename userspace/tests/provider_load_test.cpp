// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Loads the built provider the way libibverbs does: every undefined symbol
// must resolve against the installed libibverbs, the registration constructor
// must run cleanly, and nothing of ours may be exported.
#include <gtest/gtest.h>

#include <dlfcn.h>

namespace
{

void *open_provider()
{
	// Never dlclose()d: once registered, libibverbs keeps pointers into it.
	static void *const handle = dlopen(SRNIC_PROVIDER_PATH, RTLD_NOW | RTLD_LOCAL);
	return handle;
}

TEST(ProviderLoad, DlopensWithEverySymbolResolved)
{
	void *handle = open_provider();
	EXPECT_NE(handle, nullptr) << dlerror();
}

TEST(ProviderLoad, ExportsNothingOfItsOwn)
{
	void *handle = open_provider();
	ASSERT_NE(handle, nullptr) << dlerror();
	// Names a careless build would export: the registration hooks and
	// rdma-core's static-provider alias.
	for (const char *name :
	     {"verbs_provider_srnic", "srnic_register_driver", "_ZN5srnic8alloc_pdEP11ibv_context",
	      "_ZN5srnic12open_contextEP10ibv_deviceiRK17verbs_context_ops"}) {
		dlerror();
		void *sym = dlsym(handle, name);
		EXPECT_EQ(sym, nullptr) << name << " is exported";
	}
}

} // namespace
