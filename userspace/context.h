// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// A verbs context on an srnic device: opening one (the alloc_ucontext command
// and its checks), its state, and closing it.
#ifndef SRNIC_CONTEXT_H
#define SRNIC_CONTEXT_H

#include "verbs_driver_abi.h"

#include <rdma/srnic-abi.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace srnic
{

// What the kernel told us when the context was opened.
struct ContextLimits {
	uint32_t max_inline_data; // bytes of inline data a send WQE may carry
	uint32_t queue_ctrl_size; // bytes before the entries of every ring mapping
	uint32_t page_size;	  // granularity of every ring mapping
};

class RingMaps;

struct Context {
	verbs_context ibv_ctx; // first: libibverbs allocates and frees us through it
	ContextLimits limits;
	RingMaps *ring_maps; // the mappings its small rings share; owned
};

// libibverbs allocates a Context with calloc() (_verbs_init_and_alloc_context)
// and srnic frees it with free(): that is only valid for a type whose objects
// calloc creates implicitly and that needs no destructor.
static_assert(std::is_standard_layout_v<Context>);
static_assert(std::is_trivially_default_constructible_v<Context>);
static_assert(std::is_trivially_destructible_v<Context>);
static_assert(offsetof(Context, ibv_ctx) == 0);

[[nodiscard]] inline Context *to_srnic_context(ibv_context *ibctx) noexcept
{
	// ibv_context is the last member of verbs_context, which starts a Context.
	return reinterpret_cast<Context *>(verbs_get_ctx(ibctx));
}

// The alloc_ucontext command as libibverbs sends it: core request, then the
// srnic request, which the kernel receives as udata input.
struct GetContextCmd {
	struct ibv_get_context ibv_cmd;
	srnic_alloc_ucontext_req driver;
};
static_assert(sizeof(GetContextCmd) == sizeof(ibv_get_context) + sizeof(srnic_alloc_ucontext_req),
	      "no padding between core and driver data");

struct GetContextResp {
	ibv_get_context_resp_core ibv_resp;
	srnic_alloc_ucontext_resp driver;
};
static_assert(sizeof(GetContextResp) ==
		      sizeof(ibv_get_context_resp_core) + sizeof(srnic_alloc_ucontext_resp),
	      "no padding between core and driver data");

// Why the kernel's alloc_ucontext response cannot be used, or nullptr if it
// can. host_page_size is the process's page size (the kernel's, on Linux).
[[nodiscard]] const char *ucontext_resp_problem(const srnic_alloc_ucontext_resp &resp,
						uint32_t host_page_size) noexcept;

// Opens a context: the alloc_context verb. Owns cmd_fd from the call on, and
// closes it on failure too, as libibverbs expects. Returns nullptr with errno
// set on failure.
[[nodiscard]] verbs_context *open_context(ibv_device *device, int cmd_fd,
					  const verbs_context_ops &ops) noexcept;

// Imports the context another process (or another ibv_context) allocated on
// cmd_fd: the import_context device op behind ibv_import_device(). The
// limits come from the device's SRNIC_SYSFS_UCONTEXT_ATTR. Closes cmd_fd on
// failure, as libibverbs' context teardown does; nullptr with errno set.
[[nodiscard]] verbs_context *import_context(ibv_device *device, int cmd_fd,
					    const verbs_context_ops &ops) noexcept;

// Releases everything open_context or import_context acquired: the
// free_context verb.
void close_context(ibv_context *ibctx) noexcept;

} // namespace srnic

#endif // SRNIC_CONTEXT_H
