// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Registration of the srnic provider with libibverbs, and nothing else: how
// devices are matched, the table of verbs srnic implements, device and context
// allocation. The verbs themselves live in files named for their objects.
#include "ah.h"
#include "context.h"
#include "cq.h"
#include "cq_ex.h"
#include "device.h"
#include "dm.h"
#include "mr.h"
#include "mw.h"
#include "pd.h"
#include "qp.h"
#include "srq.h"
#include "sysfs.h"
#include "xrcd.h"
#include "verbs_driver_abi.h"
#include "wq.h"

#include <rdma/srnic-abi.h>

#include <new>

namespace
{

// srnic matches with srnic_match_device() alone, yet the table must exist:
// whenever some device reports a driver id (rxe does), libibverbs scans every
// provider's table without checking for NULL. Sentinel only.
constexpr verbs_match_ent srnic_match_table[] = {
	{},
};

bool srnic_match_device(verbs_sysfs_dev *sysfs_dev) noexcept
{
	return srnic::sysfs_dev_is_srnic(*sysfs_dev);
}

verbs_device *srnic_alloc_device(verbs_sysfs_dev * /*sysfs_dev*/) noexcept
{
	// Zeroed, as libibverbs expects of a fresh verbs_device.
	srnic::Device *dev = new (std::nothrow) srnic::Device{};
	return dev ? &dev->vdev : nullptr;
}

void srnic_uninit_device(verbs_device *vdev) noexcept
{
	delete srnic::to_srnic_device(vdev);
}

void srnic_free_context(ibv_context *ibctx) noexcept
{
	srnic::close_context(ibctx);
}

// The verbs srnic implements, in verbs_context_ops' (alphabetical) order. The
// others keep libibverbs' defaults, which fail with EOPNOTSUPP.
constinit const verbs_context_ops srnic_context_ops = {
	.advise_mr = srnic::advise_mr,
	.alloc_dm = srnic::alloc_dm,
	.alloc_mw = srnic::alloc_mw,
	.alloc_parent_domain = srnic::alloc_parent_domain,
	.alloc_pd = srnic::alloc_pd,
	.attach_mcast = ibv_cmd_attach_mcast,
	.bind_mw = srnic::bind_mw,
	.close_xrcd = srnic::close_xrcd,
	.create_ah = srnic::create_ah,
	.create_cq = srnic::create_cq,
	.create_cq_ex = srnic::create_cq_ex,
	.create_flow = srnic::create_flow,
	.create_qp = srnic::create_qp,
	.create_qp_ex = srnic::create_qp_ex,
	.create_rwq_ind_table = srnic::create_rwq_ind_table,
	.create_srq = srnic::create_srq,
	.create_srq_ex = srnic::create_srq_ex,
	.create_wq = srnic::create_wq,
	.dealloc_mw = srnic::dealloc_mw,
	.dealloc_pd = srnic::dealloc_pd,
	.dereg_mr = srnic::dereg_mr,
	.destroy_ah = srnic::destroy_ah,
	.destroy_cq = srnic::destroy_cq,
	.destroy_flow = srnic::destroy_flow,
	.destroy_qp = srnic::destroy_qp,
	.destroy_rwq_ind_table = srnic::destroy_rwq_ind_table,
	.destroy_srq = srnic::destroy_srq,
	.destroy_wq = srnic::destroy_wq,
	.detach_mcast = ibv_cmd_detach_mcast,
	.free_context = srnic_free_context,
	.free_dm = srnic::free_dm,
	.get_srq_num = srnic::get_srq_num,
	.import_dm = srnic::import_dm,
	.import_mr = srnic::import_mr,
	.import_pd = srnic::import_pd,
	.modify_qp = srnic::modify_qp,
	.modify_qp_rate_limit = srnic::modify_qp_rate_limit,
	.modify_srq = srnic::modify_srq,
	.modify_wq = srnic::modify_wq,
	.open_qp = srnic::open_qp,
	.open_xrcd = srnic::open_xrcd,
	.poll_cq = srnic::poll_cq,
	.post_recv = srnic::post_recv,
	.post_send = srnic::post_send,
	.post_srq_ops = srnic::post_srq_ops,
	.post_srq_recv = srnic::post_srq_recv,
	.query_device_ex = srnic::query_device_ex,
	.query_port = srnic::query_port,
#if SRNIC_IBVERBS_PABI >= 65
	// The kernel answers it from the netdev's link (srnic_query_port_speed()).
	.query_port_speed = ibv_cmd_query_port_speed,
#endif
	.query_qp = srnic::query_qp,
	.query_srq = srnic::query_srq,
	.reg_dm_mr = srnic::reg_dm_mr,
	.reg_dmabuf_mr = srnic::reg_dmabuf_mr,
	.reg_mr = srnic::reg_mr,
	.req_notify_cq = srnic::req_notify_cq,
	.rereg_mr = srnic::rereg_mr,
	.resize_cq = srnic::resize_cq,
	.unimport_dm = srnic::unimport_dm,
	.unimport_mr = srnic::unimport_mr,
	.unimport_pd = srnic::unimport_pd,
};

verbs_context *srnic_alloc_context(ibv_device *device, int cmd_fd, void * /*private_data*/) noexcept
{
	return srnic::open_context(device, cmd_fd, srnic_context_ops);
}

// ibv_import_device(): a context over a command fd whose user context
// exists already.
verbs_context *srnic_import_context(ibv_device *device, int cmd_fd) noexcept
{
	return srnic::import_context(device, cmd_fd, srnic_context_ops);
}

constinit const verbs_device_ops srnic_device_ops = {
	.name = "srnic",
	// libibverbs compares these with the device's uverbs ABI version, which
	// the kernel sets to SRNIC_ABI_VERSION.
	.match_min_abi_version = SRNIC_ABI_VERSION,
	.match_max_abi_version = SRNIC_ABI_VERSION,
	.match_table = srnic_match_table,
	.match_device = srnic_match_device,
	.alloc_context = srnic_alloc_context,
	.import_context = srnic_import_context,
	.alloc_device = srnic_alloc_device,
	.uninit_device = srnic_uninit_device,
};

// libibverbs dlopen()s the provider; registering from a constructor is how it
// learns about us (rdma-core's PROVIDER_DRIVER macro). The ops are constant-
// initialised, so they are ready before any constructor runs.
__attribute__((constructor)) void srnic_register_driver() noexcept
{
	srnic_verbs_register_driver(&srnic_device_ops);
}

} // namespace
