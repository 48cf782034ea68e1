// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "cq.h"

#include "context.h"
#include "log.h"

#include <cerrno>
#include <memory>
#include <new>

namespace srnic
{

int map_created_cq(Cq &cq, ibv_context *ibctx, const srnic_create_cq_resp &resp) noexcept
{
	Context *ctx = to_srnic_context(ibctx);
	int err = cq.ring.map(*ctx->ring_maps, ibctx->cmd_fd, resp.ring, ctx->limits.queue_ctrl_size,
			      sizeof(srnic_cqe));
	if (!err && resp.ring.num_entries <= static_cast<uint32_t>(cq.vcq.cq.cqe))
		err = EPROTO; // the ring must hold every CQE the CQ promises
	if (err) {
		srnic_err(&ctx->ibv_ctx, "cannot map CQ %u: %d\n", resp.cqn, err);
		ibv_cmd_destroy_cq(&cq.vcq.cq);
		return err;
	}
	cq.reader.emplace(cq.ring.view());
	cq.cqn = resp.cqn;
	return 0;
}

ibv_cq *create_cq(ibv_context *ibctx, int cqe, ibv_comp_channel *channel,
		  int comp_vector) noexcept
{
	std::unique_ptr<Cq> cq(new (std::nothrow) Cq{});
	if (!cq) {
		errno = ENOMEM;
		return nullptr;
	}

	CreateCqCmd cmd = {};
	CreateCqResp resp = {};
	// libibverbs takes the kernel's response struct, whose flexible array
	// member CreateCqResp cannot embed; ibv_create_cq_resp_core has the
	// same size and alignment (asserted in verbs_driver_abi.h).
	int err = ibv_cmd_create_cq(ibctx, cqe, channel, comp_vector, &cq->vcq.cq, &cmd.ibv_cmd,
				    sizeof(cmd),
				    reinterpret_cast<ib_uverbs_create_cq_resp *>(&resp),
				    sizeof(resp));
	if (!err)
		err = map_created_cq(*cq, ibctx, resp.driver);
	if (err) {
		errno = err;
		return nullptr;
	}
	cq->direct_ok = !channel;
	return &cq.release()->vcq.cq;
}

int resize_cq(ibv_cq *ibcq, int cqe) noexcept
{
	Cq &cq = *to_srnic_cq(ibcq);
	Context *ctx = to_srnic_context(ibcq->context);
	// No poll or arm while the ring changes under them.
	SpinGuard guard(cq.lock);
	ResizeCqCmd cmd = {};
	ResizeCqResp resp = {};
	// As in create_cq: ibv_resize_cq_resp_core stands for the kernel's
	// response struct, flexible array member and all.
	int err = ibv_cmd_resize_cq(ibcq, cqe, &cmd.ibv_cmd, sizeof(cmd),
				    reinterpret_cast<ib_uverbs_resize_cq_resp *>(&resp),
				    sizeof(resp));
	if (err)
		return err;

	RingMapping ring;
	err = ring.map(*ctx->ring_maps, ibcq->context->cmd_fd, resp.driver.ring, ctx->limits.queue_ctrl_size,
		       sizeof(srnic_cqe));
	if (!err && resp.driver.ring.num_entries <= static_cast<uint32_t>(ibcq->cqe))
		err = EPROTO;
	if (err) {
		// The kernel already posts to the new ring: this CQ is lost.
		srnic_err(&ctx->ibv_ctx, "cannot map resized CQ %u: %d\n", cq.cqn, err);
		return err;
	}
	cq.ring = std::move(ring); // unmaps the old ring
	cq.reader.emplace(cq.ring.view());
	cq.ex_cqe = nullptr;
	return 0;
}

int destroy_cq(ibv_cq *ibcq) noexcept
{
	const int err = ibv_cmd_destroy_cq(ibcq);
	if (err)
		return err;

	delete to_srnic_cq(ibcq); // unmaps the ring
	return 0;
}

} // namespace srnic
