// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The layouts verbs_driver_abi.h relies on, per rdma-core version (x86_64):
// the size and offsets libibverbs itself uses for every struct it shares
// with the provider. Included at the end of verbs_driver_abi.h; read
// without its includes by scripts/rdma-core-layout.py, which compiles each
// "EXPR == NUMBER" against an rdma-core source tree and reports any
// number that does not hold there. The numbers below were checked so
// against the sources of rdma-core v44.0, v56.1 and 65.0.
#ifndef SRNIC_ABI_LAYOUTS_H
#define SRNIC_ABI_LAYOUTS_H

#if SRNIC_RDMA_CORE_MAJOR != 44 && SRNIC_RDMA_CORE_MAJOR != 56 && SRNIC_RDMA_CORE_MAJOR != 65
#error "no measured layouts for this rdma-core: a port to make (Documentation/platforms.rst)"
#endif
#ifndef SRNIC_LAYOUT_CHECK
static_assert(sizeof(void *) == 8, "the numbers below are x86_64's");
#endif

// ---- The same in every supported version ---------------------------------

static_assert(sizeof(struct verbs_match_ent) == 24);
static_assert(offsetof(struct verbs_match_ent, u) == 8);
static_assert(offsetof(struct verbs_match_ent, kind) == 20);
static_assert(sizeof(struct verbs_sysfs_dev) == 992);
static_assert(offsetof(struct verbs_sysfs_dev, ibdev_name) == 112);
static_assert(offsetof(struct verbs_sysfs_dev, ibdev_path) == 176);
static_assert(offsetof(struct verbs_sysfs_dev, driver_id) == 952);
static_assert(offsetof(struct verbs_sysfs_dev, abi_ver) == 968);
static_assert(sizeof(struct verbs_device_ops) == 72);
static_assert(offsetof(struct verbs_device_ops, match_min_abi_version) == 8);
static_assert(offsetof(struct verbs_device_ops, match_table) == 16);
static_assert(offsetof(struct verbs_device_ops, match_device) == 32);
static_assert(offsetof(struct verbs_device_ops, alloc_context) == 40);
static_assert(offsetof(struct verbs_device_ops, alloc_device) == 56);
static_assert(offsetof(struct verbs_device_ops, uninit_device) == 64);
static_assert(sizeof(struct ibv_device) == 664);
static_assert(offsetof(struct verbs_device, device) == 0);
static_assert(offsetof(struct verbs_device, ops) == 664);
static_assert(offsetof(struct verbs_device, refcount) == 672);
static_assert(offsetof(struct verbs_device, sysfs) == 696);
static_assert(sizeof(struct verbs_device) == 712);
static_assert(sizeof(struct ibv_xrcd) == 8);
static_assert(offsetof(struct verbs_xrcd, handle) == 12);
static_assert(sizeof(struct verbs_xrcd) == 16);
static_assert(sizeof(struct ibv_open_xrcd) ==
	      sizeof(struct ib_uverbs_cmd_hdr) + sizeof(struct ib_uverbs_open_xrcd));
static_assert(sizeof(struct ibv_open_qp) ==
	      sizeof(struct ib_uverbs_cmd_hdr) + sizeof(struct ib_uverbs_open_qp));
static_assert(sizeof(struct ibv_srq) == 128);
static_assert(offsetof(struct verbs_srq, srq) == 0);
static_assert(offsetof(struct verbs_srq, srq_type) == 128);
static_assert(offsetof(struct verbs_srq, xrcd) == 136);
static_assert(offsetof(struct verbs_srq, srq_num) == 152);
static_assert(sizeof(struct verbs_srq) == 160);
static_assert(sizeof(struct ibv_create_xsrq) ==
	      sizeof(struct ib_uverbs_cmd_hdr) + sizeof(struct ib_uverbs_create_xsrq));
static_assert(sizeof(struct ibv_modify_srq) ==
	      sizeof(struct ib_uverbs_cmd_hdr) + sizeof(struct ib_uverbs_modify_srq));
static_assert(sizeof(struct ibv_query_srq) ==
	      sizeof(struct ib_uverbs_cmd_hdr) + sizeof(struct ib_uverbs_query_srq));
static_assert(sizeof(struct ibv_create_srq_resp_core) ==
	      sizeof(struct ib_uverbs_create_srq_resp));
static_assert(alignof(struct ibv_create_srq_resp_core) ==
	      alignof(struct ib_uverbs_create_srq_resp));
static_assert(sizeof(struct verbs_cq) == sizeof(struct ibv_cq_ex));
static_assert(offsetof(struct verbs_qp, comp_mask) == sizeof(struct ibv_qp_ex));
static_assert(sizeof(struct ibv_create_cq) == 40);
static_assert(sizeof(struct ibv_create_cq) ==
	      sizeof(struct ib_uverbs_cmd_hdr) + sizeof(struct ib_uverbs_create_cq));
static_assert(sizeof(struct ibv_create_cq_ex) == 56);
static_assert(sizeof(struct ibv_create_cq_ex) == sizeof(struct ib_uverbs_cmd_hdr) +
							 sizeof(struct ib_uverbs_ex_cmd_hdr) +
							 sizeof(struct ib_uverbs_ex_create_cq));
static_assert(sizeof(struct ibv_create_cq_ex_resp_core) ==
	      sizeof(struct ib_uverbs_ex_create_cq_resp));
static_assert(alignof(struct ibv_create_cq_ex_resp_core) ==
	      alignof(struct ib_uverbs_ex_create_cq_resp));
static_assert(offsetof(struct ibv_qp_ex, wr_id) == 168);
static_assert(offsetof(struct ibv_qp_ex, wr_start) == 320);
static_assert(offsetof(struct ibv_cq_ex, status) == 132);
static_assert(offsetof(struct ibv_cq_ex, start_poll) == 144);
static_assert(sizeof(struct ibv_create_qp) == 64);
static_assert(sizeof(struct ibv_create_qp) ==
	      sizeof(struct ib_uverbs_cmd_hdr) + sizeof(struct ib_uverbs_create_qp));
static_assert(sizeof(struct ibv_modify_qp) ==
	      sizeof(struct ib_uverbs_cmd_hdr) + sizeof(struct ib_uverbs_modify_qp));
static_assert(sizeof(struct ibv_modify_qp_ex) == sizeof(struct ib_uverbs_cmd_hdr) +
							 sizeof(struct ib_uverbs_ex_cmd_hdr) +
							 sizeof(struct ib_uverbs_ex_modify_qp));
static_assert(sizeof(struct ibv_create_qp_ex) == 88);
static_assert(sizeof(struct ibv_create_qp_ex) == sizeof(struct ib_uverbs_cmd_hdr) +
							 sizeof(struct ib_uverbs_ex_cmd_hdr) +
							 sizeof(struct ib_uverbs_ex_create_qp));
static_assert(sizeof(struct ibv_create_wq) == 64);
static_assert(sizeof(struct ibv_create_wq) == sizeof(struct ib_uverbs_cmd_hdr) +
						      sizeof(struct ib_uverbs_ex_cmd_hdr) +
						      sizeof(struct ib_uverbs_ex_create_wq));
static_assert(sizeof(struct ibv_modify_wq) == 48);
static_assert(sizeof(struct ibv_modify_wq) == sizeof(struct ib_uverbs_cmd_hdr) +
						      sizeof(struct ib_uverbs_ex_cmd_hdr) +
						      sizeof(struct ib_uverbs_ex_modify_wq));
static_assert(sizeof(struct ibv_query_qp) ==
	      sizeof(struct ib_uverbs_cmd_hdr) + sizeof(struct ib_uverbs_query_qp));
static_assert(sizeof(struct ibv_create_cq_resp_core) == sizeof(struct ib_uverbs_create_cq_resp));
static_assert(alignof(struct ibv_create_cq_resp_core) ==
	      alignof(struct ib_uverbs_create_cq_resp));
static_assert(sizeof(struct ibv_create_qp_resp_core) == sizeof(struct ib_uverbs_create_qp_resp));
static_assert(alignof(struct ibv_create_qp_resp_core) ==
	      alignof(struct ib_uverbs_create_qp_resp));
static_assert(sizeof(struct ibv_mr) == 48);
static_assert(offsetof(struct verbs_mr, ibv_mr) == 0);
static_assert(offsetof(struct verbs_mr, mr_type) == 48);
static_assert(offsetof(struct verbs_mr, access) == 52);
static_assert(sizeof(struct verbs_mr) == 56);
static_assert(sizeof(enum ibv_mr_type) == 4);
static_assert(sizeof(struct ibv_dm) == 32);
static_assert(offsetof(struct ibv_dm, comp_mask) == 24);
static_assert(offsetof(struct ibv_dm, handle) == 28);
static_assert(offsetof(struct verbs_dm, dm) == 0);
static_assert(offsetof(struct verbs_dm, handle) == 32);
static_assert(sizeof(struct verbs_dm) == 40);
static_assert(sizeof(struct ibv_get_context) ==
	      sizeof(struct ib_uverbs_cmd_hdr) + sizeof(struct ib_uverbs_get_context));
static_assert(sizeof(struct ibv_get_context) == 16);
static_assert(sizeof(struct ibv_alloc_pd) ==
	      sizeof(struct ib_uverbs_cmd_hdr) + sizeof(struct ib_uverbs_alloc_pd));
static_assert(sizeof(struct ibv_alloc_pd) == 16);
static_assert(sizeof(struct ibv_query_port) ==
	      sizeof(struct ib_uverbs_cmd_hdr) + sizeof(struct ib_uverbs_query_port));
static_assert(offsetof(struct ibv_query_port, port_num) == 16);
static_assert(sizeof(struct ibv_query_port) == 24);
static_assert(sizeof(struct ibv_reg_mr) ==
	      sizeof(struct ib_uverbs_cmd_hdr) + sizeof(struct ib_uverbs_reg_mr));
static_assert(offsetof(struct ibv_reg_mr, pd_handle) == 40);
static_assert(sizeof(struct ibv_reg_mr) == 48);
static_assert(sizeof(struct ib_uverbs_reg_mr_resp) == 12);
static_assert(sizeof(struct ibv_alloc_mw) ==
	      sizeof(struct ib_uverbs_cmd_hdr) + sizeof(struct ib_uverbs_alloc_mw));
static_assert(offsetof(struct ibv_alloc_mw, mw_type) == 20);
static_assert(sizeof(struct ib_uverbs_alloc_mw_resp) == 8);
static_assert(sizeof(struct ibv_get_context_resp_core) ==
	      sizeof(struct ib_uverbs_get_context_resp));
static_assert(alignof(struct ibv_get_context_resp_core) ==
	      alignof(struct ib_uverbs_get_context_resp));
static_assert(sizeof(struct ibv_alloc_pd_resp_core) == sizeof(struct ib_uverbs_alloc_pd_resp));
static_assert(sizeof(struct ibv_create_ah_resp_core) == sizeof(struct ib_uverbs_create_ah_resp));
static_assert(alignof(struct ibv_create_ah_resp_core) ==
	      alignof(struct ib_uverbs_create_ah_resp));

// ---- verbs_context_ops: one entry per verb, alphabetical -------------------
#if SRNIC_IBVERBS_PABI == 34
static_assert(sizeof(struct verbs_context_ops) == 608);
static_assert(offsetof(struct verbs_context_ops, alloc_pd) == 40);
static_assert(offsetof(struct verbs_context_ops, dealloc_pd) == 208);
static_assert(offsetof(struct verbs_context_ops, dereg_mr) == 224);
static_assert(offsetof(struct verbs_context_ops, free_context) == 312);
static_assert(offsetof(struct verbs_context_ops, query_device_ex) == 464);
static_assert(offsetof(struct verbs_context_ops, query_port) == 480);
static_assert(offsetof(struct verbs_context_ops, reg_mr) == 544);
static_assert(offsetof(struct verbs_context_ops, unimport_pd) == 600);
static_assert(offsetof(struct verbs_context_ops, create_ah) == 104);
static_assert(offsetof(struct verbs_context_ops, create_cq) == 120);
static_assert(offsetof(struct verbs_context_ops, create_qp) == 152);
static_assert(offsetof(struct verbs_context_ops, create_qp_ex) == 160);
static_assert(offsetof(struct verbs_context_ops, destroy_ah) == 232);
static_assert(offsetof(struct verbs_context_ops, destroy_cq) == 248);
static_assert(offsetof(struct verbs_context_ops, destroy_qp) == 272);
static_assert(offsetof(struct verbs_context_ops, modify_qp) == 376);
static_assert(offsetof(struct verbs_context_ops, poll_cq) == 424);
static_assert(offsetof(struct verbs_context_ops, post_recv) == 432);
static_assert(offsetof(struct verbs_context_ops, post_send) == 440);
static_assert(offsetof(struct verbs_context_ops, query_qp) == 488);
static_assert(offsetof(struct verbs_context_ops, req_notify_cq) == 552);
static_assert(offsetof(struct verbs_context_ops, create_srq) == 176);
static_assert(offsetof(struct verbs_context_ops, create_srq_ex) == 184);
static_assert(offsetof(struct verbs_context_ops, destroy_srq) == 288);
static_assert(offsetof(struct verbs_context_ops, modify_srq) == 392);
static_assert(offsetof(struct verbs_context_ops, post_srq_recv) == 456);
static_assert(offsetof(struct verbs_context_ops, query_srq) == 512);
static_assert(offsetof(struct verbs_context_ops, close_xrcd) == 88);
static_assert(offsetof(struct verbs_context_ops, get_srq_num) == 328);
static_assert(offsetof(struct verbs_context_ops, open_qp) == 408);
static_assert(offsetof(struct verbs_context_ops, open_xrcd) == 416);
static_assert(offsetof(struct verbs_context_ops, create_cq_ex) == 128);
static_assert(offsetof(struct verbs_context_ops, alloc_dm) == 8);
static_assert(offsetof(struct verbs_context_ops, free_dm) == 320);
static_assert(offsetof(struct verbs_context_ops, reg_dm_mr) == 528);
static_assert(offsetof(struct verbs_context_ops, import_dm) == 336);
static_assert(offsetof(struct verbs_context_ops, unimport_dm) == 584);
#else // ABI 65: 17 more entries
static_assert(sizeof(struct verbs_context_ops)  == 744);
static_assert(offsetof(struct verbs_context_ops, alloc_pd)  == 56);
static_assert(offsetof(struct verbs_context_ops, dealloc_pd)  == 240);
static_assert(offsetof(struct verbs_context_ops, dereg_mr)  == 256);
static_assert(offsetof(struct verbs_context_ops, free_context)  == 368);
static_assert(offsetof(struct verbs_context_ops, query_device_ex)  == 552);
static_assert(offsetof(struct verbs_context_ops, query_port)  == 568);
static_assert(offsetof(struct verbs_context_ops, reg_mr)  == 656);
static_assert(offsetof(struct verbs_context_ops, unimport_pd)  == 736);
static_assert(offsetof(struct verbs_context_ops, create_ah)  == 120);
static_assert(offsetof(struct verbs_context_ops, create_cq)  == 144);
static_assert(offsetof(struct verbs_context_ops, create_qp)  == 176);
static_assert(offsetof(struct verbs_context_ops, create_qp_ex)  == 184);
static_assert(offsetof(struct verbs_context_ops, destroy_ah)  == 264);
static_assert(offsetof(struct verbs_context_ops, destroy_cq)  == 288);
static_assert(offsetof(struct verbs_context_ops, destroy_qp)  == 312);
static_assert(offsetof(struct verbs_context_ops, modify_qp)  == 448);
static_assert(offsetof(struct verbs_context_ops, poll_cq)  == 496);
static_assert(offsetof(struct verbs_context_ops, post_recv)  == 504);
static_assert(offsetof(struct verbs_context_ops, post_send)  == 512);
static_assert(offsetof(struct verbs_context_ops, query_qp)  == 584);
static_assert(offsetof(struct verbs_context_ops, req_notify_cq)  == 672);
static_assert(offsetof(struct verbs_context_ops, create_srq)  == 200);
static_assert(offsetof(struct verbs_context_ops, create_srq_ex)  == 208);
static_assert(offsetof(struct verbs_context_ops, destroy_srq)  == 328);
static_assert(offsetof(struct verbs_context_ops, modify_srq)  == 464);
static_assert(offsetof(struct verbs_context_ops, post_srq_recv)  == 528);
static_assert(offsetof(struct verbs_context_ops, query_srq)  == 608);
static_assert(offsetof(struct verbs_context_ops, close_xrcd)  == 104);
static_assert(offsetof(struct verbs_context_ops, get_srq_num)  == 384);
static_assert(offsetof(struct verbs_context_ops, open_qp)  == 480);
static_assert(offsetof(struct verbs_context_ops, open_xrcd)  == 488);
static_assert(offsetof(struct verbs_context_ops, create_cq_ex)  == 152);
static_assert(offsetof(struct verbs_context_ops, alloc_dm)  == 16);
static_assert(offsetof(struct verbs_context_ops, free_dm)  == 376);
static_assert(offsetof(struct verbs_context_ops, reg_dm_mr)  == 640);
static_assert(offsetof(struct verbs_context_ops, import_dm)  == 392);
static_assert(offsetof(struct verbs_context_ops, unimport_dm)  == 720);
#endif

// ---- Public structs that grew (their size is part of what srnic embeds) ---
#if SRNIC_RDMA_CORE_MAJOR == 44
static_assert(sizeof(struct ibv_qp_ex) == 352);
static_assert(sizeof(struct verbs_context) == 648);
#elif SRNIC_RDMA_CORE_MAJOR == 56
// ibv_qp_ex gained wr_flush (56), at its end.
static_assert(sizeof(struct ibv_qp_ex) == 360);
static_assert(sizeof(struct verbs_context) == 648);
#else
static_assert(sizeof(struct ibv_qp_ex) == 360);
static_assert(sizeof(struct verbs_context) == 696);
#endif

#endif // SRNIC_ABI_LAYOUTS_H
