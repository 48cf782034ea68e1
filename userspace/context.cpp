// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "context.h"

#include "log.h"
#include "ring_maps.h"
#include "sysfs.h"

#include <bit>
#include <cerrno>
#include <cstdlib>
#include <memory>
#include <new>
#include <optional>
#include <unistd.h>

namespace srnic
{
namespace
{

// Undoes _verbs_init_and_alloc_context: the verbs_context state (cmd_fd,
// async_fd, device reference) and the calloc()ed memory.
struct ContextDeleter {
	void operator()(Context *ctx) const noexcept
	{
		delete ctx->ring_maps;
		verbs_uninit_context(&ctx->ibv_ctx);
		free(ctx);
	}
};
using ContextPtr = std::unique_ptr<Context, ContextDeleter>;

ContextPtr alloc_verbs_context(ibv_device *device, int cmd_fd) noexcept
{
	// The context_offset argument is offsetof(Context, ibv_ctx) passed as a
	// pointer, as driver.h's verbs_init_and_alloc_context() macro does; that
	// offset is 0 (asserted in context.h), hence nullptr.
	void *mem = _verbs_init_and_alloc_context(device, cmd_fd, sizeof(Context), nullptr,
						  RDMA_DRIVER_UNKNOWN);
	ContextPtr ctx(static_cast<Context *>(mem));
	if (ctx) {
		ctx->ring_maps = new (std::nothrow) RingMaps();
		if (!ctx->ring_maps) {
			ctx.reset();
			errno = ENOMEM;
		}
	}
	return ctx;
}

// Releases a half-opened context and reports err the way alloc_context must:
// nullptr with errno set.
verbs_context *fail_open(ContextPtr ctx, int err) noexcept
{
	ctx.reset();
	errno = err;
	return nullptr;
}

uint32_t host_page_size() noexcept
{
	return static_cast<uint32_t>(sysconf(_SC_PAGESIZE));
}

} // namespace

const char *ucontext_resp_problem(const srnic_alloc_ucontext_resp &resp,
				  uint32_t host_page_size) noexcept
{
	if (resp.abi_version != SRNIC_ABI_VERSION)
		return "kernel speaks another srnic ABI version";
	// Ring mappings are mmap()ed by page; a different page size means the
	// offsets and sizes the kernel computes would not be the ones we map.
	if (resp.page_size != host_page_size || !std::has_single_bit(resp.page_size))
		return "page size differs from the process's";
	if (resp.queue_ctrl_size < sizeof(srnic_queue_ctrl) ||
	    resp.queue_ctrl_size % SRNIC_CACHELINE_SIZE != 0 ||
	    resp.queue_ctrl_size > resp.page_size)
		return "queue control record size is not whole cache lines within a page";
	return nullptr;
}

verbs_context *open_context(ibv_device *device, int cmd_fd, const verbs_context_ops &ops) noexcept
{
	ContextPtr ctx = alloc_verbs_context(device, cmd_fd);
	if (!ctx)
		return nullptr; // libibverbs closed cmd_fd and set errno

	GetContextCmd cmd = {};
	cmd.driver.abi_version = SRNIC_ABI_VERSION;
	GetContextResp resp = {};
	// libibverbs takes the kernel's response struct, whose flexible array
	// member GetContextResp cannot embed; ibv_get_context_resp_core has the
	// same size and alignment (asserted in verbs_driver_abi.h).
	const int err = srnic_cmd_get_context(&ctx->ibv_ctx, &cmd.ibv_cmd, sizeof(cmd),
					      reinterpret_cast<ib_uverbs_get_context_resp *>(&resp),
					      sizeof(resp));
	if (err) {
		srnic_err(&ctx->ibv_ctx, "alloc_ucontext failed: %d\n", err);
		return fail_open(std::move(ctx), err);
	}

	if (const char *problem = ucontext_resp_problem(resp.driver, host_page_size())) {
		srnic_err(&ctx->ibv_ctx, "unusable alloc_ucontext response: %s\n", problem);
		return fail_open(std::move(ctx), EPROTO);
	}

	ctx->limits = {
		.max_inline_data = resp.driver.max_inline_data,
		.queue_ctrl_size = resp.driver.queue_ctrl_size,
		.page_size = resp.driver.page_size,
	};
	verbs_set_ops(&ctx->ibv_ctx, &ops);
	return &ctx.release()->ibv_ctx;
}

verbs_context *import_context(ibv_device *device, int cmd_fd,
			      const verbs_context_ops &ops) noexcept
{
	ContextPtr ctx = alloc_verbs_context(device, cmd_fd);
	if (!ctx)
		return nullptr;

	// The fd's user context exists already: no alloc_ucontext, whose answer
	// the device publishes in sysfs instead.
	const int err = ibv_cmd_query_context(&ctx->ibv_ctx.context, nullptr);
	if (err) {
		srnic_err(&ctx->ibv_ctx, "query_context failed: %d\n", err);
		return fail_open(std::move(ctx), err);
	}
	const verbs_device *vdev = reinterpret_cast<const verbs_device *>(device);
	const std::optional<srnic_alloc_ucontext_resp> resp =
		read_sysfs_ucontext(vdev->sysfs->ibdev_path);
	const char *problem = resp ? ucontext_resp_problem(*resp, host_page_size())
				   : "no readable " SRNIC_SYSFS_UCONTEXT_ATTR " attribute";
	if (problem) {
		srnic_err(&ctx->ibv_ctx, "cannot import context: %s\n", problem);
		return fail_open(std::move(ctx), EPROTO);
	}
	ctx->limits = {
		.max_inline_data = resp->max_inline_data,
		.queue_ctrl_size = resp->queue_ctrl_size,
		.page_size = resp->page_size,
	};
	verbs_set_ops(&ctx->ibv_ctx, &ops);
	return &ctx.release()->ibv_ctx;
}

void close_context(ibv_context *ibctx) noexcept
{
	ContextDeleter{}(to_srnic_context(ibctx));
}

} // namespace srnic
