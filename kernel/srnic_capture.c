// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: packet capture. Traffic between QPs of one device, or of two srnic
 * devices of one namespace, never touches a netdev (srnic_tx_local() hands
 * it to the receiving device), and the netdev a device is bound to shows
 * only what crosses it. A device's capture netdev, made on demand (sysfs
 * ``capture``), shows every RoCEv2 packet the device sends and every one it
 * receives, each as the Ethernet frame it would be on a wire: `tcpdump -i
 * srnic0cap -w roce.pcap`, opened in Wireshark, whose RoCE dissector reads
 * UDP port 4791.
 *
 * A frame is a copy, made only while something listens on the capture
 * netdev (dev_nit_active()), of the packet as srnic built it (sent: IP, UDP,
 * BTH and the rest, payload, ICRC; its IPv4 header checksum filled in, as
 * the IP layer does after) or as it arrived (received: from the IP header
 * on), behind an Ethernet header with the device's MAC on its side: a
 * received frame's other MAC is its sender's when it came over Ethernet,
 * else zero, as is a sent frame's destination MAC (the neighbour the IP
 * layer picks later). Packets the fault injector loses after sending show;
 * packets it loses before receiving do not.
 */

#include <linux/etherdevice.h>
#include <linux/if_arp.h>
#include <net/addrconf.h>
#include <net/ip.h>

#include "srnic.h"

/* Capture netdevs of every srnic device (srnic_capture_any()). */
atomic_t srnic_captures = ATOMIC_INIT(0);

/* The stack sends nothing through a capture netdev: dropped. */
static netdev_tx_t srnic_capture_xmit(struct sk_buff *skb,
				      struct net_device *dev)
{
	kfree_skb(skb);
	return NETDEV_TX_OK;
}

static const struct net_device_ops srnic_capture_netdev_ops = {
	.ndo_start_xmit = srnic_capture_xmit,
};

static void srnic_capture_setup(struct net_device *dev)
{
	ether_setup(dev);
	dev->netdev_ops = &srnic_capture_netdev_ops;
	dev->needs_free_netdev = true;
	dev->priv_flags |= IFF_NO_QUEUE;
	dev->flags |= IFF_NOARP;
	dev->flags &= ~IFF_MULTICAST;
	dev->max_mtu = ETH_MAX_MTU;
}

/*
 * Register @cap, named @name, in @sdev's namespace with @sdev's netdev's
 * MAC. Context: RTNL held.
 */
static int srnic_capture_register(struct srnic_dev *sdev, const char *name,
				  struct net_device **cap)
{
	int err;

	*cap = alloc_netdev(0, name, NET_NAME_USER, srnic_capture_setup);
	if (!*cap)
		return -ENOMEM;
	dev_net_set(*cap, read_pnet(&sdev->net));
	eth_hw_addr_set(*cap, sdev->ndev->dev_addr);
	err = register_netdevice(*cap);
	if (err)
		free_netdev(*cap);
	return err;
}

/**
 * srnic_capture_start() - make and bring up @sdev's capture netdev
 * @sdev: the device
 *
 * Named after the device (srnic0: srnic0cap) when that fits a netdev name
 * and is free, else srniccapN; sysfs ``capture_netdev`` says which. IPv6
 * is off on it, so that the capture holds srnic's packets only (no
 * neighbour discovery of its own). Nothing if it exists.
 *
 * Return: 0, or a negative errno from the netdev's creation.
 */
int srnic_capture_start(struct srnic_dev *sdev)
{
	char name[IFNAMSIZ];
	struct net_device *cap;
	struct inet6_dev *idev;
	int err = 0;

	rtnl_lock();
	if (rtnl_dereference(sdev->capture))
		goto out;
	if (snprintf(name, sizeof(name), "%scap", dev_name(&sdev->ibdev.dev)) <
	    sizeof(name)) {
		err = srnic_capture_register(sdev, name, &cap);
		if (err == -EEXIST)
			err = srnic_capture_register(sdev, "srniccap%d", &cap);
	} else {
		err = srnic_capture_register(sdev, "srniccap%d", &cap);
	}
	if (err)
		goto out;
	idev = __in6_dev_get(cap);
	if (idev)
		WRITE_ONCE(idev->cnf.disable_ipv6, 1);
	err = dev_open(cap, NULL);
	if (err) {
		unregister_netdevice(cap);
		goto out;
	}
	rcu_assign_pointer(sdev->capture, cap);
	atomic_inc(&srnic_captures);
	dev_info(&sdev->ibdev.dev, "capturing its packets on %s\n", cap->name);
out:
	rtnl_unlock();
	return err;
}

/**
 * srnic_capture_stop() - remove @sdev's capture netdev, if it has one
 * @sdev: the device
 *
 * Context: process, RTNL not held.
 */
void srnic_capture_stop(struct srnic_dev *sdev)
{
	struct net_device *cap;

	rtnl_lock();
	cap = rtnl_dereference(sdev->capture);
	if (cap) {
		RCU_INIT_POINTER(sdev->capture, NULL);
		atomic_dec(&srnic_captures);
		/* Waits for the readers of the pointer (RCU) before freeing. */
		unregister_netdevice(cap);
	}
	rtnl_unlock();
}

/**
 * srnic_capture_netdev_name() - print the capture netdev's name
 * @sdev: the device
 * @buf: a sysfs buffer
 *
 * Return: bytes printed: the name and a newline, or only a newline.
 */
ssize_t srnic_capture_netdev_name(struct srnic_dev *sdev, char *buf)
{
	struct net_device *cap;
	ssize_t len;

	rtnl_lock();
	cap = rtnl_dereference(sdev->capture);
	len = sysfs_emit(buf, "%s\n", cap ? cap->name : "");
	rtnl_unlock();
	return len;
}

/**
 * srnic_capture_packet() - show a packet on the capture netdev
 * @sdev: the device that sends or receives it
 * @skb: the packet: sent, skb->data at its IP header; received, at its UDP
 *	 header, with its network header set
 * @sent: which of the two
 *
 * Call through srnic_capture() only. Context: any.
 */
void srnic_capture_packet(struct srnic_dev *sdev, const struct sk_buff *skb,
			  bool sent)
{
	int hdr = -skb_network_offset(skb);
	struct net_device *cap;
	struct sk_buff *frame;
	struct ethhdr *eth;

	rcu_read_lock();
	cap = rcu_dereference(sdev->capture);
	if (!cap || !dev_nit_active(cap) || !(cap->flags & IFF_UP) ||
	    hdr < 0 || hdr > skb_headroom(skb))
		goto out;
	frame = skb_copy_expand(skb, hdr + ETH_HLEN, 0, GFP_ATOMIC);
	if (!frame)
		goto out;
	__skb_push(frame, hdr);
	skb_reset_network_header(frame);
	eth = skb_push(frame, ETH_HLEN);
	skb_reset_mac_header(frame);
	eth->h_proto = ip_hdr(frame)->version == 4 ? htons(ETH_P_IP) :
						     htons(ETH_P_IPV6);
	if (sent) {
		eth_zero_addr(eth->h_dest);
		ether_addr_copy(eth->h_source, sdev->ndev->dev_addr);
	} else {
		ether_addr_copy(eth->h_dest, sdev->ndev->dev_addr);
		if (skb_mac_header_was_set(skb) &&
		    skb_network_header(skb) - skb_mac_header(skb) == ETH_HLEN)
			ether_addr_copy(eth->h_source, eth_hdr(skb)->h_source);
		else
			eth_zero_addr(eth->h_source);
	}
	if (eth->h_proto == htons(ETH_P_IP))
		ip_send_check(ip_hdr(frame));
	frame->protocol = eth->h_proto;
	frame->dev = cap;
	local_bh_disable();
	dev_queue_xmit_nit(frame, cap);
	local_bh_enable();
	consume_skb(frame);
out:
	rcu_read_unlock();
}
