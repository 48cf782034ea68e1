// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: module entry, the "srnic" rdma link type, and the life cycle of
 * srnic devices.
 *
 * A device is created by `rdma link add NAME type srnic netdev DEV` and
 * destroyed by `rdma link delete NAME`, by the netdev going away (or
 * leaving its network namespace), or by module unload. ib_core owns the
 * memory of struct srnic_dev; srnic_dev_dealloc() releases what srnic
 * added to it.
 */

#include <linux/if_arp.h>
#include <linux/module.h>
#include <linux/rtnetlink.h>
#include <net/addrconf.h>
#include <rdma/ib_cache.h>
#include <rdma/rdma_netlink.h>

#include "srnic.h"

/* Serialises device creation: held from the EEXIST check to publication. */
static DEFINE_MUTEX(srnic_create_lock);

static DEFINE_IDA(srnic_link_ids);
static struct device *srnic_root;	/* /sys/devices/srnic */

static void srnic_parent_release(struct device *dev)
{
	kfree(dev);
}

/*
 * The ib_device's sysfs parent. rdma-core and its tests find a device's
 * netdev in /sys/class/infiniband/NAME/device/net/; virtual netdevs (veth)
 * have no parent device to offer, so srnic makes one per device with a
 * net/ directory holding a link to the netdev.
 */
static int srnic_parent_create(struct srnic_dev *sdev)
{
	struct device *parent;
	int err;

	sdev->link_index = ida_alloc(&srnic_link_ids, GFP_KERNEL);
	if (sdev->link_index < 0)
		return sdev->link_index;

	parent = kzalloc(sizeof(*parent), GFP_KERNEL);
	if (!parent) {
		err = -ENOMEM;
		goto err_free_index;
	}
	device_initialize(parent);
	parent->parent = srnic_root;
	parent->release = srnic_parent_release;
	err = dev_set_name(parent, "link%d", sdev->link_index);
	if (err)
		goto err_put_parent;
	err = device_add(parent);
	if (err)
		goto err_put_parent;

	sdev->parent_net_dir = kobject_create_and_add("net", &parent->kobj);
	if (!sdev->parent_net_dir) {
		err = -ENOMEM;
		goto err_del_parent;
	}
	strscpy(sdev->parent_net_link, sdev->ndev->name,
		sizeof(sdev->parent_net_link));
	err = sysfs_create_link(sdev->parent_net_dir, &sdev->ndev->dev.kobj,
				sdev->parent_net_link);
	if (err)
		goto err_put_net_dir;

	sdev->parent = parent;
	return 0;

err_put_net_dir:
	kobject_put(sdev->parent_net_dir);
	sdev->parent_net_dir = NULL;
err_del_parent:
	device_del(parent);
err_put_parent:
	put_device(parent);
err_free_index:
	ida_free(&srnic_link_ids, sdev->link_index);
	return err;
}

static void srnic_parent_destroy(struct srnic_dev *sdev)
{
	if (!sdev->parent)
		return;
	sysfs_remove_link(sdev->parent_net_dir, sdev->parent_net_link);
	kobject_put(sdev->parent_net_dir);
	device_unregister(sdev->parent);	/* ib_device may still hold it */
	sdev->parent = NULL;
	ida_free(&srnic_link_ids, sdev->link_index);
}

/**
 * srnic_dev_netdev_renamed() - follow a netdev rename in the parent's net/
 * @sdev: device whose netdev was renamed (called under RTNL)
 */
void srnic_dev_netdev_renamed(struct srnic_dev *sdev)
{
	sysfs_remove_link(sdev->parent_net_dir, sdev->parent_net_link);
	strscpy(sdev->parent_net_link, sdev->ndev->name,
		sizeof(sdev->parent_net_link));
	if (sysfs_create_link(sdev->parent_net_dir, &sdev->ndev->dev.kobj,
			      sdev->parent_net_link))
		dev_warn(sdev->parent, "cannot link renamed netdev %s\n",
			 sdev->ndev->name);
}

/**
 * srnic_dev_dealloc() - ib_core's dealloc_driver callback
 * @ibdev: the device, already unregistered
 *
 * Runs once, after the device is unregistered and no verbs can reach it.
 */
void srnic_dev_dealloc(struct ib_device *ibdev)
{
	struct srnic_dev *sdev = to_srnic_dev(ibdev);

	srnic_dev_list_del(sdev);	/* on it unless set_netdev failed */

	srnic_debugfs_remove_dev(sdev);
	srnic_capture_stop(sdev);
	srnic_fault_stop(sdev);
	/* ib_core destroyed every QP, so every engine task is stopped. */
	srnic_engines_stop(sdev);
	srnic_direct_dev_cleanup(sdev);
	srnic_parent_destroy(sdev);
	srnic_net_put(read_pnet(&sdev->net));
	srnic_mr_table_destroy(sdev);
	srnic_mw_table_destroy(sdev);
	srnic_ah_table_destroy(sdev);
	ida_destroy(&sdev->pd_ids);
	ida_destroy(&sdev->cq_ids);
	ida_destroy(&sdev->srq_ids);
	ida_destroy(&sdev->wq_ids);
	ida_destroy(&sdev->rwq_ind_table_ids);
	WARN_ON(!xa_empty(&sdev->qps));
	xa_destroy(&sdev->qps);
	srnic_qp_counters_destroy(sdev);
	netdev_put(sdev->ndev, &sdev->ndev_tracker);
}

static int srnic_check_netdev(struct net_device *ndev)
{
	if (ndev->flags & IFF_LOOPBACK) {
		pr_err("%s: cannot bind to loopback device %s\n",
		       SRNIC_DRIVER_NAME, ndev->name);
		return -EINVAL;
	}
	if (ndev->type != ARPHRD_ETHER) {
		pr_err("%s: %s is not an Ethernet device\n", SRNIC_DRIVER_NAME,
		       ndev->name);
		return -EINVAL;
	}
	return 0;
}

static void srnic_dev_init_attributes(struct srnic_dev *sdev)
{
	struct ib_device *ibdev = &sdev->ibdev;

	strscpy(ibdev->node_desc, "srnic", sizeof(ibdev->node_desc));
	ibdev->node_type = RDMA_NODE_IB_CA;
	ibdev->phys_port_cnt = 1;
	ibdev->num_comp_vectors = num_possible_cpus();
	/*
	 * Not enabled by default: the provider's doorbells are POST_SEND and
	 * POST_RECV commands carrying no work request.
	 */
	ibdev->uverbs_cmd_mask |= BIT_ULL(IB_USER_VERBS_CMD_POST_SEND) |
				  BIT_ULL(IB_USER_VERBS_CMD_POST_RECV);
	ibdev->local_dma_lkey = 0;
	addrconf_addr_eui48((unsigned char *)&ibdev->node_guid,
			    sdev->ndev->dev_addr);
	ibdev->dev.parent = sdev->parent;
}

/*
 * Catch up with the netdev after registration: events that arrived while
 * the device was registering were not delivered to it (the notifier skips
 * devices it cannot take a reference on), and the netdev may even have
 * started unregistering, in which case the device goes with it.
 */
static void srnic_dev_sync_with_netdev(struct srnic_dev *sdev)
{
	bool netdev_gone;

	rtnl_lock();
	netdev_gone = sdev->ndev->reg_state != NETREG_REGISTERED;
	if (!netdev_gone) {
		srnic_port_update_state(sdev);
		srnic_port_update_mtu(sdev);
		if (strcmp(sdev->parent_net_link, sdev->ndev->name))
			srnic_dev_netdev_renamed(sdev);
	}
	rtnl_unlock();

	if (netdev_gone)
		ib_unregister_device_queued(&sdev->ibdev);
}

/*
 * The device's own lifetime; the verbs are srnic_dev_ops (srnic_verbs.c).
 * ib_set_device_ops() merges the two.
 */
static const struct ib_device_ops srnic_dev_lifetime_ops = {
	.dealloc_driver = srnic_dev_dealloc,
};

/**
 * srnic_newlink() - `rdma link add NAME type srnic netdev DEV`
 * @ibdev_name: NAME
 * @ndev: DEV; ib_core holds a reference for the duration of the call
 */
static int srnic_newlink(const char *ibdev_name, struct net_device *ndev)
{
	struct srnic_dev *sdev, *exists;
	int err;

	err = srnic_check_netdev(ndev);
	if (err)
		return err;

	/*
	 * Two concurrent `rdma link add` on one netdev must not both pass
	 * the check: creation is serialised until the device is published.
	 */
	mutex_lock(&srnic_create_lock);
	rtnl_lock();
	exists = srnic_dev_find_by_netdev(ndev);
	rtnl_unlock();
	if (exists) {
		pr_err("%s: %s already has an srnic device\n",
		       SRNIC_DRIVER_NAME, ndev->name);
		err = -EEXIST;
		goto err_unlock;
	}

	sdev = ib_alloc_device(srnic_dev, ibdev);
	if (!sdev) {
		err = -ENOMEM;
		goto err_unlock;
	}
	sdev->ndev = ndev;
	netdev_hold(ndev, &sdev->ndev_tracker, GFP_KERNEL);
	INIT_LIST_HEAD(&sdev->list);
	ida_init(&sdev->pd_ids);
	srnic_mr_table_init(sdev);
	srnic_mw_table_init(sdev);
	srnic_dm_init(sdev);
	sdev->selective_repeat = true;
	sdev->ecn = true;
	sdev->multipath = 1;
	srnic_ah_table_init(sdev);
	srnic_mcast_init(sdev);
	srnic_raw_init(sdev);
	srnic_direct_dev_init(sdev);
	ida_init(&sdev->cq_ids);
	ida_init(&sdev->wq_ids);
	ida_init(&sdev->rwq_ind_table_ids);
	ida_init(&sdev->srq_ids);
	xa_init_flags(&sdev->qps, XA_FLAGS_ALLOC);
	srnic_qp_counters_init(sdev);
	srnic_port_init(sdev);

	write_pnet(&sdev->net, dev_net(ndev));
	err = srnic_net_get(read_pnet(&sdev->net));
	if (err)
		goto err_dealloc;
	err = srnic_parent_create(sdev);
	if (err)
		goto err_net;
	err = srnic_engines_start(sdev);
	if (err)
		goto err_parent;
	srnic_debugfs_add_dev(sdev);
	srnic_fault_init(sdev);
	srnic_dev_init_attributes(sdev);
	ib_set_device_ops(&sdev->ibdev, &srnic_dev_ops);
	ib_set_device_ops(&sdev->ibdev, &srnic_dev_lifetime_ops);
	sdev->ibdev.driver_def = srnic_uapi_defs;

	/*
	 * From here on the device is whole and its dealloc_driver callback,
	 * srnic_dev_dealloc(), undoes all of it: ib_dealloc_device() calls it
	 * (also after ib_register_device() failed), so the error paths below
	 * must not tear anything down themselves.
	 */
	err = ib_device_set_netdev(&sdev->ibdev, ndev, SRNIC_PORT);
	if (err)
		goto err_dealloc_driver;

	/*
	 * On the list before registration, so that a netdev event or a
	 * `rdma link delete` racing with it finds a device srnic_dev_dealloc()
	 * can unlink; the extra reference keeps the memory valid until the
	 * catch-up below, whatever unregistered the device meanwhile.
	 */
	srnic_dev_list_add(sdev);
	get_device(&sdev->ibdev.dev);

	/* Registration takes RTNL itself (to scan addresses for GIDs). */
	err = ib_register_device(&sdev->ibdev, ibdev_name, NULL);
	if (err)
		goto err_unregistered;

	if (ib_device_try_get(&sdev->ibdev)) {
		srnic_dev_sync_with_netdev(sdev);
		srnic_dev_note_neighbours(sdev);
		ib_device_put(&sdev->ibdev);
	}
	put_device(&sdev->ibdev.dev);
	mutex_unlock(&srnic_create_lock);
	return 0;

err_unregistered:
	put_device(&sdev->ibdev.dev);
err_dealloc_driver:
	ib_dealloc_device(&sdev->ibdev);	/* srnic_dev_dealloc() */
	mutex_unlock(&srnic_create_lock);
	return err;

err_parent:
	srnic_parent_destroy(sdev);
err_net:
	srnic_net_put(read_pnet(&sdev->net));
err_dealloc:
	srnic_mr_table_destroy(sdev);
	srnic_mw_table_destroy(sdev);
	srnic_ah_table_destroy(sdev);
	ida_destroy(&sdev->pd_ids);
	ida_destroy(&sdev->cq_ids);
	ida_destroy(&sdev->srq_ids);
	xa_destroy(&sdev->qps);
	srnic_qp_counters_destroy(sdev);
	netdev_put(ndev, &sdev->ndev_tracker);
	ib_dealloc_device(&sdev->ibdev);
err_unlock:
	mutex_unlock(&srnic_create_lock);
	return err;
}

static struct rdma_link_ops srnic_link_ops = {
	.type = SRNIC_DRIVER_NAME,
	.newlink = srnic_newlink,
};

static int __init srnic_init(void)
{
	int err;

	srnic_root = root_device_register(SRNIC_DRIVER_NAME);
	if (IS_ERR(srnic_root))
		return PTR_ERR(srnic_root);
	srnic_debugfs_init();
	srnic_payload_init();

	err = srnic_odp_wq_init();
	if (err)
		goto err_root;
	err = srnic_direct_init();
	if (err)
		goto err_odp;
	err = srnic_net_register();
	if (err)
		goto err_direct;
	err = srnic_netdev_notifier_register();
	if (err)
		goto err_net;

	rdma_link_register(&srnic_link_ops);
	return 0;

err_net:
	srnic_net_unregister();
err_direct:
	srnic_direct_exit();
err_odp:
	srnic_odp_wq_exit();
err_root:
	srnic_payload_exit();
	srnic_debugfs_exit();
	root_device_unregister(srnic_root);
	return err;
}

static void __exit srnic_exit(void)
{
	/* No new devices from here on, then remove the existing ones. */
	rdma_link_unregister(&srnic_link_ops);
	srnic_unregister_devices(NULL);
	srnic_netdev_notifier_unregister();
	srnic_net_unregister();
	srnic_direct_exit();
	srnic_odp_wq_exit();
	srnic_payload_exit();
	srnic_debugfs_exit();
	root_device_unregister(srnic_root);
	ida_destroy(&srnic_link_ids);
}

module_init(srnic_init);
module_exit(srnic_exit);

MODULE_AUTHOR("The srnic developers");
MODULE_DESCRIPTION("srnic: software RoCEv2 RDMA NIC");
MODULE_LICENSE("GPL");
MODULE_ALIAS_RDMA_LINK(SRNIC_DRIVER_NAME);
