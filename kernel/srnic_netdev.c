// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: the port follows its netdev.
 *
 * Port state is ACTIVE while the netdev is up with carrier and DOWN
 * otherwise, with IB_EVENT_PORT_ACTIVE / IB_EVENT_PORT_ERR on every change;
 * the active MTU follows the netdev's MTU. The GID table is not kept here:
 * ib_core's RoCE GID management fills it from the netdev's addresses.
 */

#include <linux/netdevice.h>
#include <linux/rtnetlink.h>
#include <rdma/ib_addr.h>

#include "srnic.h"

static void srnic_port_dispatch_event(struct srnic_dev *sdev,
				      enum ib_event_type type)
{
	struct ib_event event = {
		.device = &sdev->ibdev,
		.element.port_num = SRNIC_PORT,
		.event = type,
	};

	ib_dispatch_event(&event);
}

/**
 * srnic_port_init() - port state of a device not yet registered
 * @sdev: the device
 */
void srnic_port_init(struct srnic_dev *sdev)
{
	sdev->port.state = IB_PORT_DOWN;
	sdev->port.active_mtu = iboe_get_mtu(sdev->ndev->mtu);
}

/**
 * srnic_port_update_state() - recompute the port state from the netdev
 * @sdev: the device
 *
 * Context: RTNL held, so netdev events for one device are serialised.
 */
void srnic_port_update_state(struct srnic_dev *sdev)
{
	enum ib_port_state new_state;

	ASSERT_RTNL();
	if (netif_running(sdev->ndev) && netif_carrier_ok(sdev->ndev))
		new_state = IB_PORT_ACTIVE;
	else
		new_state = IB_PORT_DOWN;

	if (new_state == READ_ONCE(sdev->port.state))
		return;
	WRITE_ONCE(sdev->port.state, new_state);
	srnic_port_dispatch_event(sdev, new_state == IB_PORT_ACTIVE ?
				  IB_EVENT_PORT_ACTIVE : IB_EVENT_PORT_ERR);
}

/**
 * srnic_port_update_mtu() - follow a change of the netdev's MTU
 * @sdev: the device
 */
void srnic_port_update_mtu(struct srnic_dev *sdev)
{
	WRITE_ONCE(sdev->port.active_mtu, iboe_get_mtu(sdev->ndev->mtu));
}

static int srnic_netdev_event(struct notifier_block *nb, unsigned long event,
			      void *ptr)
{
	struct net_device *ndev = netdev_notifier_info_to_dev(ptr);
	struct srnic_dev *sdev = srnic_dev_find_by_netdev(ndev);

	/* A device already being unregistered takes no more events. */
	if (!sdev || !ib_device_try_get(&sdev->ibdev))
		return NOTIFY_DONE;

	switch (event) {
	case NETDEV_UNREGISTER:
		/*
		 * Also sent when the netdev moves to another network
		 * namespace: the device goes away with it (ib_core's GID
		 * and rdma_cm state are per namespace).
		 */
		srnic_raw_netdev_unregistering(sdev);
		ib_unregister_device_queued(&sdev->ibdev);
		break;
	case NETDEV_UP:
	case NETDEV_DOWN:
	case NETDEV_CHANGE:
		srnic_port_update_state(sdev);
		break;
	case NETDEV_CHANGEMTU:
		srnic_port_update_mtu(sdev);
		break;
	case NETDEV_CHANGENAME:
		srnic_dev_netdev_renamed(sdev);
		break;
	default:
		break;
	}
	ib_device_put(&sdev->ibdev);
	return NOTIFY_OK;
}

static struct notifier_block srnic_netdev_notifier = {
	.notifier_call = srnic_netdev_event,
};

int srnic_netdev_notifier_register(void)
{
	return register_netdevice_notifier(&srnic_netdev_notifier);
}

void srnic_netdev_notifier_unregister(void)
{
	unregister_netdevice_notifier(&srnic_netdev_notifier);
}
