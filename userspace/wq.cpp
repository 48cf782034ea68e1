// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "wq.h"

#include "context.h"
#include "log.h"
#include "qp.h"

#include <cerrno>
#include <cstring>
#include <memory>
#include <new>

namespace srnic
{

namespace
{

// The post_recv of a WQ (ibv_post_wq_recv). The kernel never asks for a
// doorbell on a WQ: it takes the WQEs when frames arrive.
int post_wq_recv(ibv_wq *ibwq, ibv_recv_wr *wr, ibv_recv_wr **bad_wr) noexcept
{
	Wq &wq = *to_srnic_wq(ibwq);
	bool doorbell;
	return post_chain(
		*wq.rq, wq.lock, wr, bad_wr,
		[&wq](std::byte *slot, const ibv_recv_wr &w) {
			return write_recv_wqe(wq.max_sge, slot, w);
		},
		doorbell);
}

// libibverbs' IBV_RX_HASH_* and the kernel's (the ABI's) are one set.
constexpr bool same(long ibv, long srnic) noexcept
{
	return ibv == srnic;
}
static_assert(same(IBV_RX_HASH_FUNC_TOEPLITZ, SRNIC_RX_HASH_FUNC_TOEPLITZ));
static_assert(same(IBV_RX_HASH_SRC_IPV4, SRNIC_RX_HASH_SRC_IPV4) &&
	      same(IBV_RX_HASH_DST_IPV4, SRNIC_RX_HASH_DST_IPV4) &&
	      same(IBV_RX_HASH_SRC_IPV6, SRNIC_RX_HASH_SRC_IPV6) &&
	      same(IBV_RX_HASH_DST_IPV6, SRNIC_RX_HASH_DST_IPV6) &&
	      same(IBV_RX_HASH_SRC_PORT_TCP, SRNIC_RX_HASH_SRC_PORT_TCP) &&
	      same(IBV_RX_HASH_DST_PORT_TCP, SRNIC_RX_HASH_DST_PORT_TCP) &&
	      same(IBV_RX_HASH_SRC_PORT_UDP, SRNIC_RX_HASH_SRC_PORT_UDP) &&
	      same(IBV_RX_HASH_DST_PORT_UDP, SRNIC_RX_HASH_DST_PORT_UDP));

struct CreateHashQpCmd {
	struct ibv_create_qp_ex ibv_cmd;
	srnic_create_rss_qp_req driver;
};
static_assert(sizeof(CreateHashQpCmd) ==
	      sizeof(struct ibv_create_qp_ex) + sizeof(srnic_create_rss_qp_req));

struct CreateHashQpResp {
	ib_uverbs_ex_create_qp_resp ibv_resp;
	srnic_create_qp_resp driver;
};
static_assert(sizeof(CreateHashQpResp) ==
	      sizeof(ib_uverbs_ex_create_qp_resp) + sizeof(srnic_create_qp_resp));

} // namespace

ibv_wq *create_wq(ibv_context *ibctx, ibv_wq_init_attr *attr) noexcept
{
	Context *ctx = to_srnic_context(ibctx);
	if (attr->wq_type != IBV_WQT_RQ ||
	    ((attr->comp_mask & IBV_WQ_INIT_ATTR_FLAGS) && attr->create_flags)) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	std::unique_ptr<Wq> wq(new (std::nothrow) Wq{});
	if (!wq) {
		errno = ENOMEM;
		return nullptr;
	}
	CreateWqCmd cmd = {};
	CreateWqResp resp = {};
	int err = ibv_cmd_create_wq(ibctx, attr, &wq->wq, &cmd.ibv_cmd, sizeof(cmd), &resp.ibv_resp,
				    sizeof(resp));
	if (err) {
		errno = err;
		return nullptr;
	}
	err = wq->ring.map(*ctx->ring_maps, ibctx->cmd_fd, resp.driver.rq, ctx->limits.queue_ctrl_size,
			   sizeof(srnic_recv_wqe));
	if (!err && !recv_caps_fit_ring(attr->max_wr, attr->max_sge, resp.driver.rq))
		err = EPROTO;
	if (err) {
		srnic_err(&ctx->ibv_ctx, "cannot map WQ %u: %d\n", wq->wq.wq_num, err);
		ibv_cmd_destroy_wq(&wq->wq);
		errno = err;
		return nullptr;
	}
	wq->rq.emplace(wq->ring.view());
	wq->max_sge = attr->max_sge;
	wq->wq.post_recv = post_wq_recv;
	wq->wq.state = IBV_WQS_RESET;
	return &wq.release()->wq;
}

int modify_wq(ibv_wq *ibwq, ibv_wq_attr *attr) noexcept
{
	struct ibv_modify_wq cmd = {};
	return ibv_cmd_modify_wq(ibwq, attr, &cmd, sizeof(cmd));
}

int destroy_wq(ibv_wq *ibwq) noexcept
{
	if (const int err = ibv_cmd_destroy_wq(ibwq))
		return err;
	delete to_srnic_wq(ibwq);
	return 0;
}

ibv_rwq_ind_table *create_rwq_ind_table(ibv_context *ibctx,
					ibv_rwq_ind_table_init_attr *attr) noexcept
{
	std::unique_ptr<ibv_rwq_ind_table> table(new (std::nothrow) ibv_rwq_ind_table{});
	if (!table) {
		errno = ENOMEM;
		return nullptr;
	}
	ib_uverbs_ex_create_rwq_ind_table_resp resp = {};
	const int err = ibv_cmd_create_rwq_ind_table(ibctx, attr, table.get(), &resp, sizeof(resp));
	if (err) {
		errno = err;
		return nullptr;
	}
	return table.release();
}

int destroy_rwq_ind_table(ibv_rwq_ind_table *table) noexcept
{
	if (const int err = ibv_cmd_destroy_rwq_ind_table(table))
		return err;
	delete table;
	return 0;
}

ibv_qp *create_hash_qp(ibv_context *ibctx, ibv_qp_init_attr_ex *attr) noexcept
{
	Context *ctx = to_srnic_context(ibctx);
	const ibv_rx_hash_conf &conf = attr->rx_hash_conf;
	if (attr->qp_type != IBV_QPT_RAW_PACKET || !(attr->comp_mask & IBV_QP_INIT_ATTR_RX_HASH) ||
	    !attr->rwq_ind_tbl || attr->srq || attr->recv_cq || attr->send_cq ||
	    conf.rx_hash_key_len > SRNIC_RX_HASH_KEY_MAX || (conf.rx_hash_key_len && !conf.rx_hash_key)) {
		errno = EINVAL;
		return nullptr;
	}
	std::unique_ptr<Qp> qp(new (std::nothrow) Qp{});
	if (!qp) {
		errno = ENOMEM;
		return nullptr;
	}
	CreateHashQpCmd cmd = {};
	CreateHashQpResp resp = {};
	cmd.driver.rx_hash_fields_mask = conf.rx_hash_fields_mask;
	cmd.driver.rx_hash_function = conf.rx_hash_function;
	cmd.driver.rx_hash_key_len = conf.rx_hash_key_len;
	if (conf.rx_hash_key_len)
		std::memcpy(cmd.driver.rx_hash_key, conf.rx_hash_key, conf.rx_hash_key_len);
	int err = ibv_cmd_create_qp_ex2(ibctx, &qp->vqp, attr, &cmd.ibv_cmd, sizeof(cmd),
					&resp.ibv_resp, sizeof(resp)
#if SRNIC_IBVERBS_PABI >= 65
					,
					nullptr
#endif
	);
	if (err) {
		errno = err;
		return nullptr;
	}
	// Its SQ is one entry nothing is posted to (the kernel's hash QPs
	// send nothing), mapped so that the QP is whole like any other.
	err = qp->sq_ring.map(*ctx->ring_maps, ibctx->cmd_fd, resp.driver.sq,
			      ctx->limits.queue_ctrl_size, sizeof(srnic_send_wqe));
	if (err) {
		srnic_err(&ctx->ibv_ctx, "cannot map hash QP %u: %d\n", resp.driver.qpn, err);
		ibv_cmd_destroy_qp(&qp->vqp.qp);
		errno = err;
		return nullptr;
	}
	qp->sq.emplace(qp->sq_ring.view());
	qp->type = IBV_QPT_RAW_PACKET;
	return &qp.release()->vqp.qp;
}

} // namespace srnic
