// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: the list of srnic devices, and finding a device by its netdev or
 * by a GID it owns.
 *
 * A device is on the list from just before its registration
 * (srnic_main.c's newlink) until its dealloc_driver callback; the receive
 * path, local delivery and the netdev notifier find devices here.
 */

#include <linux/inetdevice.h>
#include <linux/module.h>
#include <linux/rtnetlink.h>
#include <rdma/ib_cache.h>

#include "srnic.h"

/*
 * All srnic devices, from registration until srnic_dev_dealloc(). The list
 * is protected by RTNL: the netdev notifier, which reads it, runs under
 * RTNL, and ib_register_device() takes RTNL itself, so no srnic lock may be
 * held around RTNL in the other order.
 */
static LIST_HEAD(srnic_devices);

/**
 * srnic_dev_list_add() - put a device being registered on the list
 * @sdev: the device
 */
void srnic_dev_list_add(struct srnic_dev *sdev)
{
	rtnl_lock();
	list_add_tail(&sdev->list, &srnic_devices);
	rtnl_unlock();
}

/**
 * srnic_dev_list_del() - take a device off the list, if it is on it
 * @sdev: the device, being deallocated
 */
void srnic_dev_list_del(struct srnic_dev *sdev)
{
	rtnl_lock();
	list_del_init(&sdev->list);
	rtnl_unlock();
}

/**
 * srnic_dev_find_by_netdev() - the srnic device bound to @ndev, if any
 * @ndev: a netdev
 *
 * Context: RTNL held; the result stays valid while it is.
 */
struct srnic_dev *srnic_dev_find_by_netdev(struct net_device *ndev)
{
	struct srnic_dev *sdev;

	ASSERT_RTNL();

	list_for_each_entry(sdev, &srnic_devices, list)
		if (sdev->ndev == ndev)
			return sdev;
	return NULL;
}

/**
 * srnic_dev_get_by_netdev() - the srnic device of @ndev, referenced
 * @ndev: a netdev
 *
 * Callable from any context (the receive path uses it); drop the reference
 * with ib_device_put().
 */
struct srnic_dev *srnic_dev_get_by_netdev(struct net_device *ndev)
{
	struct ib_device *ibdev;

	ibdev = ib_device_get_by_netdev(ndev, RDMA_DRIVER_UNKNOWN);
	if (!ibdev)
		return NULL;
	/* Other drivers may report RDMA_DRIVER_UNKNOWN too. */
	if (ibdev->ops.owner != THIS_MODULE) {
		ib_device_put(ibdev);
		return NULL;
	}
	return to_srnic_dev(ibdev);
}

/**
 * srnic_local_gid_ifindex() - is @gid an srnic device's, in @net?
 * @net: the namespace of the asking device
 * @gid: a destination GID
 *
 * Return: the ifindex of the netdev of the srnic device owning @gid as a
 * RoCE v2 GID in @net (local delivery), or 0.
 */
int srnic_local_gid_ifindex(struct net *net, const union ib_gid *gid)
{
	const struct ib_gid_attr *attr;
	struct srnic_dev *sdev;
	int ifindex = 0;

	rtnl_lock();
	list_for_each_entry(sdev, &srnic_devices, list) {
		if (!net_eq(read_pnet(&sdev->net), net))
			continue;
		attr = rdma_find_gid_by_port(&sdev->ibdev, gid,
					     IB_GID_TYPE_ROCE_UDP_ENCAP,
					     SRNIC_PORT, NULL);
		if (!IS_ERR(attr)) {
			rdma_put_gid_attr(attr);
			ifindex = sdev->ndev->ifindex;
			break;
		}
	}
	rtnl_unlock();
	return ifindex;
}

/* Does @ndev accept packets from a local address (IPv4 accept_local)? */
static bool srnic_netdev_accepts_local(struct net_device *ndev)
{
	struct in_device *in_dev = __in_dev_get_rtnl(ndev);

	return in_dev && IN_DEV_ACCEPT_LOCAL(in_dev);
}

/**
 * srnic_dev_note_neighbours() - tell what two devices of a namespace need
 * @sdev: a device just registered
 *
 * Connections between two srnic devices of one namespace go through
 * ib_core's address resolution, which ARPs for the peer's MAC between two
 * local addresses: Linux drops such ARP as martian unless both netdevs
 * accept local sources, and the connection fails later, far from the
 * cause ("Failed to create AH", ETIMEDOUT at RTR). srnic cannot resolve
 * in ib_core's place, so it says so in the kernel log when such a pair is
 * made, naming the sysctls.
 */
void srnic_dev_note_neighbours(struct srnic_dev *sdev)
{
	struct net *net = read_pnet(&sdev->net);
	struct srnic_dev *other;

	rtnl_lock();
	list_for_each_entry(other, &srnic_devices, list) {
		if (other == sdev || !net_eq(read_pnet(&other->net), net) ||
		    (srnic_netdev_accepts_local(sdev->ndev) &&
		     srnic_netdev_accepts_local(other->ndev)))
			continue;
		pr_notice("%s: %s (%s) and %s (%s) share network namespace %u: connections between them need net.ipv4.conf.%s.accept_local=1 and net.ipv4.conf.%s.accept_local=1 (ib_core ARPs between two local addresses, which Linux drops otherwise)\n",
			  SRNIC_DRIVER_NAME, dev_name(&sdev->ibdev.dev),
			  sdev->ndev->name, dev_name(&other->ibdev.dev),
			  other->ndev->name, net->ns.inum, sdev->ndev->name,
			  other->ndev->name);
	}
	rtnl_unlock();
}

/**
 * srnic_unregister_devices() - remove every srnic device, or those of @net
 * @net: a namespace being dismantled, or NULL for every device (module
 *	 unload)
 *
 * Includes the devices whose unregistration a netdev event already queued:
 * ib_unregister_device() waits for (or performs) the unregistration, and
 * srnic_dev_dealloc() takes the device off the list before it returns.
 */
void srnic_unregister_devices(struct net *net)
{
	struct srnic_dev *sdev, *found;

	for (;;) {
		found = NULL;
		rtnl_lock();
		list_for_each_entry(sdev, &srnic_devices, list) {
			if (!net || net_eq(read_pnet(&sdev->net), net)) {
				found = sdev;
				get_device(&found->ibdev.dev);
				break;
			}
		}
		rtnl_unlock();
		if (!found)
			break;
		ib_unregister_device(&found->ibdev);
		put_device(&found->ibdev.dev);
	}
}
