// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: verb entry points and the ib_device_ops table.
 *
 * Device and port queries, user contexts and protection domains; memory
 * regions are in srnic_mr.c, address handles in srnic_ah.c. What is
 * not implemented yet is left out of the ops table, so ib_core and uverbs
 * answer EOPNOTSUPP for it, and query_device reports zero for it.
 */

#include <linux/module.h>
#include <linux/rtnetlink.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/restrack.h>
#include <rdma/uverbs_ioctl.h>

#include "srnic.h"
#include "srnic_trace.h"

static int srnic_query_device(struct ib_device *ibdev,
			      struct ib_device_attr *attr,
			      struct ib_udata *udata)
{
	/* Packet pacing's capabilities, which uverbs' answer does not carry. */
	struct srnic_query_device_resp resp = {
		.qp_rate_limit_min = SRNIC_RATE_LIMIT_MIN_KBPS,
		.qp_rate_limit_max = SRNIC_RATE_LIMIT_MAX_KBPS,
		.packet_pacing_qpts = BIT(IB_QPT_RAW_PACKET),
	};
	int err;

	if (udata) {
		err = srnic_udata_check_tail(udata, 0);
		if (err)
			return err;
		err = ib_copy_to_udata(udata, &resp,
				       min(udata->outlen, sizeof(resp)));
		if (err)
			return err;
	}

	memset(attr, 0, sizeof(*attr));
	/* major.minor.sub in bits 63:32, 31:16, 15:0, as ibv_devinfo decodes */
	attr->fw_ver = (u64)SRNIC_ABI_VERSION << 32;
	attr->sys_image_guid = ibdev->node_guid;
	attr->max_mr_size = SRNIC_MAX_MR_SIZE;
	attr->page_size_cap = PAGE_SIZE;
	attr->max_mr = SRNIC_MAX_MR;
	/*
	 * Type 1 and type 2B windows (srnic_mw.c); XRC domains, SRQs and QPs
	 * (srnic_srq.c, srnic_qp.c).
	 */
	attr->max_mw = SRNIC_MAX_MW;
	attr->device_cap_flags = IB_DEVICE_MEM_WINDOW |
				 IB_DEVICE_MEM_WINDOW_TYPE_2B | IB_DEVICE_XRC;
	/* modify_srq's IB_SRQ_MAX_WR (srnic_srq_resize()). */
	attr->device_cap_flags |= IB_DEVICE_SRQ_RESIZE;
	/*
	 * Fast registration for kernel QPs (IB_WR_REG_MR, LOCAL_INV and SEND
	 * with invalidate of MR keys: srnic_mr_fast_reg()), which the kernel
	 * ULPs need. No IB_DEVICE_SG_GAPS_REG: map_mr_sg takes page lists.
	 */
	attr->device_cap_flags |= IB_DEVICE_MEM_MGT_EXTENSIONS;
	attr->max_fast_reg_page_list_len = SRNIC_MAX_FAST_REG_PAGES;
	/*
	 * ATOMIC WRITE (RC and XRC, srnic_resp_atomic_write()): 6.1's
	 * uverbs passes device_cap_flags to device_cap_flags_ex whole.
	 */
	attr->device_cap_flags |= SRNIC_DEVICE_ATOMIC_WRITE;
	/*
	 * FLUSH of global visibility (srnic_flush_check()), where uverbs
	 * takes MRs that grant it; not persistence: no MR is persistent.
	 */
	attr->device_cap_flags |= SRNIC_DEVICE_FLUSH;
	/*
	 * Raw packet QPs steered by flows (srnic_raw.c), and RSS: WQs,
	 * indirection tables and hash QPs (srnic_rss.c).
	 */
	attr->device_cap_flags |= IB_DEVICE_MANAGED_FLOW_STEERING;
	attr->max_wq_type_rq = SRNIC_MAX_QP;
	attr->rss_caps.supported_qpts = BIT(IB_QPT_RAW_PACKET);
	attr->rss_caps.max_rwq_indirection_tables = SRNIC_MAX_QP;
	attr->rss_caps.max_rwq_indirection_table_size =
		BIT(SRNIC_MAX_LOG_RWQ_IND_TABLE);
	/* Tag-matching SRQs (srnic_tm.c); list operations never wait. */
	attr->tm_caps.max_rndv_hdr_size = SRNIC_TM_MAX_RNDV_HDR;
	attr->tm_caps.max_num_tags = SRNIC_MAX_TM_TAGS;
	attr->tm_caps.flags = IB_TM_CAP_RNDV_RC;
	attr->tm_caps.max_ops = SRNIC_MAX_TM_TAGS;
	attr->tm_caps.max_sge = SRNIC_TM_MAX_SGE;
	attr->vendor_id = SRNIC_VENDOR_ID;
	attr->vendor_part_id = SRNIC_VENDOR_PART_ID;
	attr->hw_ver = SRNIC_ABI_VERSION;
	attr->max_pd = SRNIC_MAX_PD;
	attr->max_ah = SRNIC_MAX_AH;
	attr->max_mcast_grp = SRNIC_MAX_MCAST_GRP;
	attr->max_mcast_qp_attach = SRNIC_MAX_MCAST_QP_ATTACH;
	attr->max_total_mcast_qp_attach = SRNIC_MAX_TOTAL_MCAST_QP_ATTACH;
	attr->max_cq = SRNIC_MAX_CQ;
	attr->max_cqe = SRNIC_MAX_CQE;
	attr->max_qp = SRNIC_MAX_QP;
	attr->max_dm_size = to_srnic_dev(ibdev)->max_dm_size;
	attr->max_qp_wr = SRNIC_MAX_QP_WR;
	attr->max_srq = SRNIC_MAX_SRQ;
	attr->max_srq_wr = SRNIC_MAX_SRQ_WR;
	attr->max_srq_sge = SRNIC_MAX_SGE;
	attr->max_send_sge = SRNIC_MAX_SGE;
	attr->max_recv_sge = SRNIC_MAX_SGE;
	attr->max_sge_rd = SRNIC_MAX_SGE;
	attr->max_qp_rd_atom = SRNIC_MAX_RD_ATOMIC;
	attr->max_qp_init_rd_atom = SRNIC_MAX_RD_ATOMIC;
	attr->max_res_rd_atom = SRNIC_MAX_QP * SRNIC_MAX_RD_ATOMIC;
	attr->max_pkeys = SRNIC_PKEY_TABLE_LEN;
	attr->local_ca_ack_delay = 15;
	/*
	 * Compare & swap and fetch & add, atomic with respect to each other
	 * (one lock for all srnic atomics), not to the CPU's accesses.
	 * Masked atomics are not implemented.
	 */
	attr->atomic_cap = IB_ATOMIC_HCA;
	attr->masked_atomic_cap = IB_ATOMIC_NONE;
	/* `rdma link delete` may remove the device it created. */
	attr->kernel_cap_flags = IBK_ALLOW_USER_UNREG;
	/*
	 * On-demand paging (srnic_odp.c): explicit and implicit ODP MRs work
	 * for every operation of every QP type srnic has, since all of them
	 * reach memory through the same MR copies (ATOMIC WRITE through the
	 * atomics' srnic_atomic_apply(); its bit where the kernel has one).
	 */
	if (IS_ENABLED(CONFIG_INFINIBAND_ON_DEMAND_PAGING)) {
		u32 caps = IB_ODP_SUPPORT_SEND | IB_ODP_SUPPORT_RECV |
			   IB_ODP_SUPPORT_WRITE | IB_ODP_SUPPORT_READ |
			   IB_ODP_SUPPORT_ATOMIC | IB_ODP_SUPPORT_SRQ_RECV |
			   SRNIC_ODP_SUPPORT_ATOMIC_WRITE |
			   SRNIC_ODP_SUPPORT_FLUSH;

		attr->kernel_cap_flags |= IBK_ON_DEMAND_PAGING;
		attr->odp_caps.general_caps = IB_ODP_SUPPORT |
					      IB_ODP_SUPPORT_IMPLICIT;
		attr->odp_caps.per_transport_caps.rc_odp_caps = caps;
		attr->odp_caps.per_transport_caps.uc_odp_caps =
			caps & (IB_ODP_SUPPORT_SEND | IB_ODP_SUPPORT_RECV |
				IB_ODP_SUPPORT_WRITE | IB_ODP_SUPPORT_SRQ_RECV);
		attr->odp_caps.per_transport_caps.ud_odp_caps =
			caps & (IB_ODP_SUPPORT_SEND | IB_ODP_SUPPORT_RECV |
				IB_ODP_SUPPORT_SRQ_RECV);
		/*
		 * XRC: the XRC_SEND requester and the XRC_RECV responder
		 * run RC's code (SEND, WRITE, READ, atomics); receives land
		 * in XRC SRQs only, so SRQ_RECV but not RECV.
		 */
		attr->odp_caps.per_transport_caps.xrc_odp_caps =
			caps & ~IB_ODP_SUPPORT_RECV;
	}
	return 0;
}

static int srnic_query_port(struct ib_device *ibdev, u32 port_num,
			    struct ib_port_attr *attr)
{
	struct srnic_dev *sdev = to_srnic_dev(ibdev);
	enum ib_port_state state = READ_ONCE(sdev->port.state);
	int err;

	/* ib_core zeroed *attr. */
	attr->state = state;
	attr->max_mtu = IB_MTU_4096;
	attr->active_mtu = READ_ONCE(sdev->port.active_mtu);
	attr->gid_tbl_len = SRNIC_GID_TABLE_LEN;
	attr->port_cap_flags = IB_PORT_CM_SUP;
	attr->max_msg_sz = SRNIC_MAX_MSG_SIZE;
	attr->pkey_tbl_len = SRNIC_PKEY_TABLE_LEN;
	attr->max_vl_num = 1;
	attr->lid = 0;
	attr->sm_lid = 0;

	err = ib_get_eth_speed(ibdev, port_num, &attr->active_speed,
			       &attr->active_width);

	if (state == IB_PORT_ACTIVE)
		attr->phys_state = IB_PORT_PHYS_STATE_LINK_UP;
	else if (netif_get_flags(sdev->ndev) & IFF_UP)
		attr->phys_state = IB_PORT_PHYS_STATE_POLLING;
	else
		attr->phys_state = IB_PORT_PHYS_STATE_DISABLED;
	return err;
}

static int srnic_get_port_immutable(struct ib_device *ibdev, u32 port_num,
				    struct ib_port_immutable *immutable)
{
	immutable->core_cap_flags = RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;
	immutable->pkey_tbl_len = SRNIC_PKEY_TABLE_LEN;
	immutable->gid_tbl_len = SRNIC_GID_TABLE_LEN;
	immutable->max_mad_size = IB_MGMT_MAD_SIZE;
	return 0;
}

static enum rdma_link_layer srnic_get_link_layer(struct ib_device *ibdev,
						 u32 port_num)
{
	return IB_LINK_LAYER_ETHERNET;
}

static int srnic_query_pkey(struct ib_device *ibdev, u32 port_num, u16 index,
			    u16 *pkey)
{
	if (index >= SRNIC_PKEY_TABLE_LEN)
		return -EINVAL;
	*pkey = SRNIC_DEFAULT_PKEY;
	return 0;
}

static int srnic_modify_device(struct ib_device *ibdev, int mask,
			       struct ib_device_modify *props)
{
	if (mask & ~(IB_DEVICE_MODIFY_SYS_IMAGE_GUID |
		     IB_DEVICE_MODIFY_NODE_DESC))
		return -EOPNOTSUPP;

	/* Both fields are only read by ib_core's sysfs and query paths. */
	if (mask & IB_DEVICE_MODIFY_NODE_DESC)
		memcpy(ibdev->node_desc, props->node_desc,
		       sizeof(ibdev->node_desc));
	if (mask & IB_DEVICE_MODIFY_SYS_IMAGE_GUID)
		return -EOPNOTSUPP;	/* derived from the MAC, fixed */
	return 0;
}

static void srnic_get_dev_fw_str(struct ib_device *ibdev, char *str)
{
	snprintf(str, IB_FW_VERSION_NAME_MAX, "%d.0.0", SRNIC_ABI_VERSION);
}

/* What every user context is told (alloc_ucontext, sysfs). */
static const struct srnic_alloc_ucontext_resp srnic_ucontext_resp = {
	.abi_version = SRNIC_ABI_VERSION,
	.max_inline_data = SRNIC_MAX_INLINE_DATA,
	.queue_ctrl_size = SRNIC_QUEUE_CTRL_SIZE,
	.page_size = PAGE_SIZE,
};

static int srnic_alloc_ucontext(struct ib_ucontext *ibuc,
				struct ib_udata *udata)
{
	struct srnic_alloc_ucontext_req req = {};
	struct srnic_alloc_ucontext_resp resp = srnic_ucontext_resp;
	int err;

	/* The provider must say which ABI it speaks. */
	if (udata->inlen < sizeof(req))
		return -EINVAL;
	err = ib_copy_from_udata(&req, udata, sizeof(req));
	if (err)
		return err;
	if (req.abi_version != SRNIC_ABI_VERSION || req.reserved) {
		ibdev_dbg(ibuc->device,
			  "provider ABI %u, kernel ABI %u: refusing context\n",
			  req.abi_version, SRNIC_ABI_VERSION);
		return -EINVAL;
	}
	err = srnic_udata_check_tail(udata, sizeof(req));
	if (err)
		return err;
	err = ib_copy_to_udata(udata, &resp,
			       min_t(size_t, udata->outlen, sizeof(resp)));
	if (err)
		return err;
	srnic_ring_arena_init(&to_srnic_ucontext(ibuc)->ring_arena);
	return 0;
}

/*
 * UVERBS_METHOD_QUERY_CONTEXT, which ibv_import_device() sends (and which
 * uverbs refuses without this op): the core attributes are all; a provider
 * importing a context reads srnic's from sysfs (SRNIC_SYSFS_UCONTEXT_ATTR).
 */
static int srnic_query_ucontext(struct ib_ucontext *ibuc,
				struct uverbs_attr_bundle *attrs)
{
	return 0;
}

/* ib_device.driver_def: srnic's additions to the uverbs ioctl methods. */
const struct uapi_definition srnic_uapi_defs[] = {
	UAPI_DEF_CHAIN(srnic_dm_uapi_defs),
	UAPI_DEF_CHAIN(srnic_direct_uapi_defs),
	{},
};

static void srnic_dealloc_ucontext(struct ib_ucontext *ibuc)
{
	srnic_ring_arena_destroy(&to_srnic_ucontext(ibuc)->ring_arena);
}

/*
 * Called when the device is unregistered while processes hold it open:
 * uverbs destroys their objects and zaps their mappings itself, so
 * unregistration (netdev removal, rmmod) does not wait for them to exit.
 */
static void srnic_disassociate_ucontext(struct ib_ucontext *ibuc)
{
}

static int srnic_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct srnic_dev *sdev = to_srnic_dev(ibpd->device);
	struct srnic_pd *pd = to_srnic_pd(ibpd);
	struct srnic_alloc_pd_resp resp = {};
	int id, err;

	if (udata) {
		err = srnic_udata_check_tail(udata, 0);
		if (err)
			return err;
	}

	id = ida_alloc_max(&sdev->pd_ids, SRNIC_MAX_PD - 1, GFP_KERNEL);
	if (id < 0)
		return id == -ENOSPC ? -ENOMEM : id;
	pd->pdn = id;

	if (udata) {
		resp.pdn = pd->pdn;
		err = ib_copy_to_udata(udata, &resp,
				       min_t(size_t, udata->outlen,
					     sizeof(resp)));
		if (err) {
			ida_free(&sdev->pd_ids, pd->pdn);
			return err;
		}
	}
	return 0;
}

static int srnic_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct srnic_dev *sdev = to_srnic_dev(ibpd->device);

	ida_free(&sdev->pd_ids, to_srnic_pd(ibpd)->pdn);
	return 0;
}

/**
 * srnic_resize_cq() - ib_device_ops.resize_cq
 * @ibcq: the CQ
 * @cqe: the size asked for; the CQ gets at least that many
 * @udata: driver data of a user CQ (struct srnic_resize_cq_req/resp);
 *	   NULL for a kernel CQ
 *
 * A new ring replaces the old one; the completions not yet polled move to
 * it, in order. A user CQ's provider maps the new ring from the response
 * and unmaps the old one; it holds its CQ lock throughout, so no poll runs
 * meanwhile. The old ring's pages stay alive while the process maps them.
 *
 * A CQ shrinks only to a size that holds the completions waiting to be
 * polled plus those its QPs' posted sends will still produce
 * (srnic_cq_sends_in_flight()), so that a shrink cannot set up an overrun.
 *
 * Return: 0; -EINVAL for a size out of range or smaller than that (the CQ
 * is unchanged); -ENOMEM.
 */
int srnic_resize_cq(struct ib_cq *ibcq, int cqe, struct ib_udata *udata)
{
	struct srnic_cq *cq = to_srnic_cq(ibcq);
	struct srnic_queue ring;
	int err;

	err = srnic_cq_resize_prepare(cq, cqe, udata, &ring);
	if (err)
		return err;
	/* A loan of the old ring ends first; none starts meanwhile. */
	srnic_direct_cq_resize_begin(cq);
	err = srnic_cq_resize_commit(cq, &ring, cqe);
	srnic_direct_cq_resize_end(cq);
	srnic_queue_destroy(&ring);	/* the old ring, or the unused new one */
	return err;
}

/**
 * srnic_dereg_mr() - ib_device_ops.dereg_mr
 * @ibmr: the MR
 * @udata: unused
 *
 * Removes the key (new lookups miss), revokes the direct windows onto the
 * MR, then waits until the in-flight accesses are done and frees it
 * (srnic_mr_release()).
 *
 * Return: 0.
 */
static int srnic_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata)
{
	struct srnic_mr *mr = to_srnic_mr(ibmr);

	trace_srnic_mr_dereg(ibmr->device, mr->key);
	srnic_mr_unpublish(mr);
	/* No process maps its pages any more (they hold references). */
	srnic_direct_mr_deregistered(mr);
	srnic_mr_release(mr);
	return 0;
}

/*
 * ib_device_ops.mmap: map a ring, a device memory allocation or a direct
 * window the context was given the offset of.
 */
static int srnic_mmap(struct ib_ucontext *uctx, struct vm_area_struct *vma)
{
	struct rdma_user_mmap_entry *rdma_entry;
	struct srnic_direct_window *window;
	int err;

	rdma_entry = rdma_user_mmap_entry_get(uctx, vma);
	if (!rdma_entry)
		return -EINVAL;
	window = srnic_mmap_entry_window(rdma_entry);
	if (window)
		err = srnic_direct_mmap(window, vma);
	else
		err = srnic_mmap_entry_map(rdma_entry, vma);
	rdma_user_mmap_entry_put(rdma_entry);
	return err;
}

/* ib_device_ops.mmap_free: the last reference to an entry is gone. */
static void srnic_mmap_free(struct rdma_user_mmap_entry *rdma_entry)
{
	struct srnic_direct_window *window = srnic_mmap_entry_window(rdma_entry);

	if (window)
		srnic_direct_entry_free(window);
	srnic_mmap_entry_free(rdma_entry);
}

static ssize_t srnic_abi_version_show(struct device *device,
				      struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%d\n", SRNIC_ABI_VERSION);
}

/* Named SRNIC_SYSFS_ABI_ATTR in the ABI header: the provider looks for it. */
static DEVICE_ATTR_RO(srnic_abi_version);

static ssize_t netdev_show(struct device *device,
			   struct device_attribute *attr, char *buf)
{
	struct srnic_dev *sdev =
		rdma_device_to_drv_device(device, struct srnic_dev, ibdev);
	ssize_t len;

	rtnl_lock();
	len = sysfs_emit(buf, "%s\n", sdev->ndev->name);
	rtnl_unlock();
	return len;
}
static DEVICE_ATTR_RO(netdev);

/*
 * Named SRNIC_SYSFS_UCONTEXT_ATTR in the ABI header: an imported context's
 * provider reads the alloc_ucontext answer it never got here.
 */
static ssize_t srnic_ucontext_show(struct device *device,
				   struct device_attribute *attr, char *buf)
{
	const struct srnic_alloc_ucontext_resp *r = &srnic_ucontext_resp;

	return sysfs_emit(buf, "%u %u %u\n", r->max_inline_data,
			  r->queue_ctrl_size, r->page_size);
}
static DEVICE_ATTR_RO(srnic_ucontext);

/* A device's switch in sysfs, 0 or 1 (srnic_dev.ecn, .selective_repeat). */
static ssize_t srnic_switch_show(const bool *on, char *buf)
{
	return sysfs_emit(buf, "%d\n", READ_ONCE(*on));
}

static ssize_t srnic_switch_store(bool *on, const char *buf, size_t count)
{
	bool value;
	int err;

	err = kstrtobool(buf, &value);
	if (err)
		return err;
	WRITE_ONCE(*on, value);
	return count;
}

static struct srnic_dev *srnic_attr_dev(struct device *device)
{
	return rdma_device_to_drv_device(device, struct srnic_dev, ibdev);
}

/* ECN on this device; on when it is created. */
static ssize_t ecn_show(struct device *device, struct device_attribute *attr,
			char *buf)
{
	return srnic_switch_show(&srnic_attr_dev(device)->ecn, buf);
}

static ssize_t ecn_store(struct device *device, struct device_attribute *attr,
			 const char *buf, size_t count)
{
	return srnic_switch_store(&srnic_attr_dev(device)->ecn, buf, count);
}
static DEVICE_ATTR_RW(ecn);

/*
 * Selective repeat on this device; on when it is created. Off, its
 * requesters and responders are IBTA's go-back-N only.
 */
static ssize_t selective_repeat_show(struct device *device,
				     struct device_attribute *attr, char *buf)
{
	return srnic_switch_show(&srnic_attr_dev(device)->selective_repeat,
				 buf);
}

static ssize_t selective_repeat_store(struct device *device,
				      struct device_attribute *attr,
				      const char *buf, size_t count)
{
	return srnic_switch_store(&srnic_attr_dev(device)->selective_repeat,
				  buf, count);
}
static DEVICE_ATTR_RW(selective_repeat);

/*
 * UDP source ports (ECMP paths) each RC requester spreads its requests
 * over, 1 to SRNIC_MAX_MULTIPATH, when its peer does selective repeat
 * (which takes the reordering); 1 when the device is created.
 */
static ssize_t multipath_show(struct device *device,
			      struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n",
			  READ_ONCE(srnic_attr_dev(device)->multipath));
}

static ssize_t multipath_store(struct device *device,
			       struct device_attribute *attr,
			       const char *buf, size_t count)
{
	u8 paths;
	int err;

	err = kstrtou8(buf, 0, &paths);
	if (err)
		return err;
	if (!paths || paths > SRNIC_MAX_MULTIPATH)
		return -EINVAL;
	WRITE_ONCE(srnic_attr_dev(device)->multipath, paths);
	return count;
}
static DEVICE_ATTR_RW(multipath);

/*
 * The capture netdev (srnic_capture.c): 1 makes it, 0 removes it; 0 when
 * the device is created.
 */
static ssize_t capture_show(struct device *device,
			    struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%d\n",
			  !!rcu_access_pointer(srnic_attr_dev(device)->capture));
}

static ssize_t capture_store(struct device *device,
			     struct device_attribute *attr, const char *buf,
			     size_t count)
{
	struct srnic_dev *sdev = srnic_attr_dev(device);
	bool on;
	int err;

	err = kstrtobool(buf, &on);
	if (err)
		return err;
	if (!on) {
		srnic_capture_stop(sdev);
		return count;
	}
	err = srnic_capture_start(sdev);
	if (err)
		return err;
	/* The provider's direct path would carry messages unseen. */
	srnic_direct_revoke_all(sdev);
	return count;
}
static DEVICE_ATTR_RW(capture);

/* The capture netdev's name; empty while there is none. */
static ssize_t capture_netdev_show(struct device *device,
				   struct device_attribute *attr, char *buf)
{
	return srnic_capture_netdev_name(srnic_attr_dev(device), buf);
}
static DEVICE_ATTR_RO(capture_netdev);

static struct attribute *srnic_dev_attributes[] = {
	&dev_attr_srnic_abi_version.attr,
	&dev_attr_srnic_ucontext.attr,
	&dev_attr_netdev.attr,
	&dev_attr_ecn.attr,
	&dev_attr_selective_repeat.attr,
	&dev_attr_multipath.attr,
	&dev_attr_capture.attr,
	&dev_attr_capture_netdev.attr,
	NULL,
};

static const struct attribute_group srnic_dev_attr_group = {
	.attrs = srnic_dev_attributes,
};

/* ---- rdma resource show: driver details (rdma -d) ---------------------- */

/* A work queue's WQEs posted and not yet taken, and its size. */
static int srnic_fill_res_wq(struct sk_buff *msg, struct srnic_qp *qp,
			     struct srnic_wq *wq, const char *posted,
			     const char *size)
{
	u32 producer = srnic_wq_read_producer(qp, wq);

	if (rdma_nl_put_driver_u32(msg, posted,
				   producer - READ_ONCE(wq->consumer)) ||
	    rdma_nl_put_driver_u32(msg, size, wq->max_wr))
		return -EMSGSIZE;
	return 0;
}

/* "yes" or "no", as rdma prints flags. */
static const char *srnic_yes_no(bool on)
{
	return on ? "yes" : "no";
}

/**
 * srnic_res_qp_attrs() - srnic's attributes of a QP (rdma -dd resource)
 * @msg: the netlink message
 * @ibqp: the QP
 *
 * Ring occupancy, the engine serving the QP, the requester's and the
 * responder's PSNs and the requester's retry and recovery state. Read
 * without the QP's task: a snapshot, each field as it was when read.
 *
 * Return: 0, or -EMSGSIZE.
 */
static int srnic_res_qp_attrs(struct sk_buff *msg, struct ib_qp *ibqp)
{
	struct srnic_qp *qp = to_srnic_qp(ibqp);
	struct srnic_req *req = &qp->req;
	const char *recovering = READ_ONCE(req->recovering) ? "selective" :
				 READ_ONCE(req->went_back) ? "go-back-n" :
							     "no";

	if (srnic_fill_res_wq(msg, qp, &qp->sq, "sq_posted", "sq_size") ||
	    (qp->rq.ring.buf &&
	     srnic_fill_res_wq(msg, qp, &qp->rq, "rq_posted", "rq_size")) ||
	    (qp->task.engine &&
	     rdma_nl_put_driver_u32(msg, "engine_cpu", qp->task.engine->cpu)) ||
	    rdma_nl_put_driver_string(msg, "engine_polls",
				      srnic_yes_no(test_bit(SRNIC_TASK_POLL_RINGS,
							    &qp->task.flags))))
		return -EMSGSIZE;
	if (!srnic_qp_acked(qp) && ibqp->qp_type != IB_QPT_UC)
		return 0;	/* UD, GSI: no PSN state */
	if (rdma_nl_put_driver_u32(msg, "next_psn", READ_ONCE(req->next_psn)) ||
	    rdma_nl_put_driver_u32(msg, "una_psn", READ_ONCE(req->una_psn)) ||
	    rdma_nl_put_driver_u32(msg, "epsn", READ_ONCE(qp->resp.epsn)) ||
	    rdma_nl_put_driver_u32(msg, "cwnd", READ_ONCE(req->cwnd)) ||
	    rdma_nl_put_driver_u32(msg, "reads_outstanding",
				   READ_ONCE(req->reads)) ||
	    rdma_nl_put_driver_u32(msg, "retries_left",
				   READ_ONCE(req->retries_left)) ||
	    rdma_nl_put_driver_u32(msg, "rnr_retries_left",
				   READ_ONCE(req->rnr_retries_left)) ||
	    rdma_nl_put_driver_string(msg, "rnr_waiting",
				      srnic_yes_no(READ_ONCE(req->rnr_waiting))) ||
	    rdma_nl_put_driver_string(msg, "recovering", recovering) ||
	    rdma_nl_put_driver_string(msg, "peer_selective_repeat",
				      srnic_yes_no(READ_ONCE(req->peer_sr))))
		return -EMSGSIZE;
	return 0;
}

/**
 * srnic_res_cq_attrs() - srnic's attributes of a CQ (rdma -dd resource)
 * @msg: the netlink message
 * @ibcq: the CQ
 *
 * Return: 0, or -EMSGSIZE.
 */
static int srnic_res_cq_attrs(struct sk_buff *msg, struct ib_cq *ibcq)
{
	struct srnic_cq *cq = to_srnic_cq(ibcq);
	u32 pending = READ_ONCE(cq->producer) -
		      READ_ONCE(cq->ring.ctrl->consumer);

	if (rdma_nl_put_driver_u32(msg, "cqn", cq->cqn) ||
	    rdma_nl_put_driver_u32(msg, "cqe_pending", pending) ||
	    rdma_nl_put_driver_string(msg, "overrun",
				      srnic_yes_no(READ_ONCE(cq->overrun))))
		return -EMSGSIZE;
	return 0;
}

static const char * const srnic_mr_type_names[] = {
	[SRNIC_MR_USER] = "user",
	[SRNIC_MR_DMA] = "dma",
	[SRNIC_MR_FAST_REG] = "fast_reg",
	[SRNIC_MR_ODP] = "odp",
	[SRNIC_MR_DM] = "device_memory",
	[SRNIC_MR_DMABUF] = "dmabuf",
};

/**
 * srnic_res_mr_attrs() - srnic's attributes of an MR (rdma -dd resource)
 * @msg: the netlink message
 * @ibmr: the MR
 *
 * Return: 0, or -EMSGSIZE.
 */
static int srnic_res_mr_attrs(struct sk_buff *msg, struct ib_mr *ibmr)
{
	struct srnic_mr *mr = to_srnic_mr(ibmr);
	const char *type = "unknown";

	if (mr->type < ARRAY_SIZE(srnic_mr_type_names) &&
	    srnic_mr_type_names[mr->type])
		type = srnic_mr_type_names[mr->type];
	if (rdma_nl_put_driver_string(msg, "type", type) ||
	    rdma_nl_put_driver_u64(msg, "pages", mr->num_pages) ||
	    rdma_nl_put_driver_u32_hex(msg, "access", mr->access) ||
	    (mr->type == SRNIC_MR_FAST_REG &&
	     rdma_nl_put_driver_string(msg, "valid",
				       srnic_yes_no(READ_ONCE(mr->valid)))) ||
	    (mr->type == SRNIC_MR_ODP &&
	     rdma_nl_put_driver_u32(msg, "odp_faults",
				    atomic_read(&mr->odp_faults))))
		return -EMSGSIZE;
	return 0;
}

/*
 * The end of a fill_res_*_entry callback: srnic's attributes go in the
 * message's driver table (RDMA_NLDEV_ATTR_DRIVER, which rdma -dd prints),
 * whole or not at all.
 */
static int srnic_res_table_end(struct sk_buff *msg, struct nlattr *table,
			       int err)
{
	if (err) {
		nla_nest_cancel(msg, table);
		return -EMSGSIZE;
	}
	nla_nest_end(msg, table);
	return 0;
}

/* ib_device_ops.fill_res_qp_entry */
static int srnic_fill_res_qp_entry(struct sk_buff *msg, struct ib_qp *ibqp)
{
	struct nlattr *table = nla_nest_start(msg, RDMA_NLDEV_ATTR_DRIVER);

	if (!table)
		return -EMSGSIZE;
	return srnic_res_table_end(msg, table, srnic_res_qp_attrs(msg, ibqp));
}

/* ib_device_ops.fill_res_cq_entry */
static int srnic_fill_res_cq_entry(struct sk_buff *msg, struct ib_cq *ibcq)
{
	struct nlattr *table = nla_nest_start(msg, RDMA_NLDEV_ATTR_DRIVER);

	if (!table)
		return -EMSGSIZE;
	return srnic_res_table_end(msg, table, srnic_res_cq_attrs(msg, ibcq));
}

/* ib_device_ops.fill_res_mr_entry */
static int srnic_fill_res_mr_entry(struct sk_buff *msg, struct ib_mr *ibmr)
{
	struct nlattr *table = nla_nest_start(msg, RDMA_NLDEV_ATTR_DRIVER);

	if (!table)
		return -EMSGSIZE;
	return srnic_res_table_end(msg, table, srnic_res_mr_attrs(msg, ibmr));
}

const struct ib_device_ops srnic_dev_ops = {
	.owner = THIS_MODULE,
	.driver_id = RDMA_DRIVER_UNKNOWN,
	.uverbs_abi_ver = SRNIC_ABI_VERSION,

	.advise_mr = srnic_advise_mr,
	.alloc_dm = srnic_alloc_dm,
	.alloc_hw_port_stats = srnic_alloc_hw_port_stats,
	.alloc_mr = srnic_alloc_mr,
	.alloc_mw = srnic_alloc_mw,
	.alloc_pd = srnic_alloc_pd,
	.alloc_ucontext = srnic_alloc_ucontext,
	.alloc_xrcd = srnic_alloc_xrcd,
	.attach_mcast = srnic_attach_mcast,
	.counter_alloc_stats = srnic_counter_alloc_stats,
	.counter_bind_qp = srnic_compat_counter_bind_qp,
	.counter_dealloc = srnic_counter_dealloc,
	.counter_unbind_qp = srnic_compat_counter_unbind_qp,
	.counter_update_stats = srnic_counter_update_stats,
	.create_ah = srnic_create_ah,
	.create_cq = srnic_compat_create_cq,
	.create_flow = srnic_create_flow,
	.create_qp = srnic_create_qp,
	.create_rwq_ind_table = srnic_create_rwq_ind_table,
	.create_srq = srnic_create_srq,
	.create_user_ah = srnic_create_ah,
	.create_wq = srnic_create_wq,
	.dealloc_dm = srnic_dealloc_dm,
	.dealloc_mw = srnic_dealloc_mw,
	.dealloc_pd = srnic_dealloc_pd,
	.dealloc_ucontext = srnic_dealloc_ucontext,
	.dealloc_xrcd = srnic_dealloc_xrcd,
	.dereg_mr = srnic_dereg_mr,
	.destroy_ah = srnic_destroy_ah,
	.destroy_cq = srnic_destroy_cq,
	.destroy_flow = srnic_destroy_flow,
	.destroy_qp = srnic_destroy_qp,
	.destroy_rwq_ind_table = srnic_destroy_rwq_ind_table,
	.destroy_srq = srnic_destroy_srq,
	.destroy_wq = srnic_destroy_wq,
	.detach_mcast = srnic_detach_mcast,
	.device_group = &srnic_dev_attr_group,
	.fill_res_cq_entry = srnic_fill_res_cq_entry,
	.fill_res_mr_entry = srnic_fill_res_mr_entry,
	.fill_res_qp_entry = srnic_fill_res_qp_entry,
	.disassociate_ucontext = srnic_disassociate_ucontext,
	.get_dev_fw_str = srnic_get_dev_fw_str,
	.get_hw_stats = srnic_get_hw_stats,
	.get_dma_mr = srnic_get_dma_mr,
	.get_link_layer = srnic_get_link_layer,
	.get_port_immutable = srnic_get_port_immutable,
	.map_mr_sg = srnic_map_mr_sg,
	.mmap = srnic_mmap,
	.mmap_free = srnic_mmap_free,
	.modify_device = srnic_modify_device,
	.modify_qp = srnic_modify_qp,
	.modify_srq = srnic_modify_srq,
	.modify_wq = srnic_modify_wq,
	.poll_cq = srnic_poll_cq,
	.post_recv = srnic_post_recv,
	.post_send = srnic_post_send,
	.post_srq_recv = srnic_post_srq_recv,
	.query_ah = srnic_query_ah,
	.query_device = srnic_query_device,
	.query_pkey = srnic_query_pkey,
	.query_port = srnic_query_port,
	.query_qp = srnic_query_qp,
	.query_srq = srnic_query_srq,
	.query_ucontext = srnic_query_ucontext,
	.reg_dm_mr = srnic_reg_dm_mr,
	.reg_user_mr = srnic_compat_reg_user_mr,
	.reg_user_mr_dmabuf = srnic_compat_reg_dmabuf_mr,
	.req_notify_cq = srnic_req_notify_cq,
	.rereg_user_mr = srnic_rereg_user_mr,
	.SRNIC_OP_RESIZE_CQ = srnic_compat_resize_cq,
	SRNIC_NEWER_DEVICE_OPS
	SRNIC_COUNTER_INIT_OPS

	INIT_RDMA_OBJ_SIZE(ib_ah, srnic_ah, ibah),
	INIT_RDMA_OBJ_SIZE(ib_cq, srnic_cq, ibcq),
	INIT_RDMA_OBJ_SIZE(ib_mw, srnic_mw, ibmw),
	INIT_RDMA_OBJ_SIZE(ib_pd, srnic_pd, ibpd),
	INIT_RDMA_OBJ_SIZE(ib_qp, srnic_qp, ibqp),
	INIT_RDMA_OBJ_SIZE(ib_rwq_ind_table, srnic_rwq_ind_table, ibtbl),
	INIT_RDMA_OBJ_SIZE(ib_srq, srnic_srq, ibsrq),
	INIT_RDMA_OBJ_SIZE(ib_ucontext, srnic_ucontext, ibuc),
	INIT_RDMA_OBJ_SIZE(ib_xrcd, srnic_xrcd, ibxrcd),
};
