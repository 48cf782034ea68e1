// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: raw packet QPs and flow steering.
 *
 * A raw packet QP (IB_QPT_RAW_PACKET; uverbs requires CAP_NET_RAW) sends
 * and receives whole Ethernet frames on the device's netdev, with the same
 * rings and doorbells as every other QP.
 *
 * Send: each SEND WQE's buffers hold one frame, Ethernet header first
 * (14 bytes at least, at most the netdev's MTU plus an Ethernet and a
 * VLAN header). The frame is first offered to the device's own flows, as
 * a NIC's embedded switch loops a frame back to its port's receive
 * steering, then handed to the netdev's transmit queue (dev_queue_xmit()).
 * As for UD, the WQE completes once the frame is handed over.
 *
 * Receive: flows (ibv_create_flow(): struct srnic_flow) steer received
 * frames to the RQs of raw packet QPs. A flow matches on the Ethernet
 * header (MACs, EtherType, VLAN tag), the IPv4 or IPv6 header (addresses,
 * protocol, TOS or traffic class, TTL or hop limit) and the TCP or UDP
 * ports, each field under the flow's mask. Of the normal flows that match
 * a frame, those of the best (lowest) priority get it; a frame no normal
 * flow matches goes to the MC_DEFAULT flows if its destination is
 * multicast, else to the ALL_DEFAULT flows. A flow takes its frames away
 * from the kernel's stack ("trap") unless it is IBV_FLOW_ATTR_FLAGS_DONT_TRAP.
 * Frames from the wire reach the flows through an rx_handler on the netdev
 * (netdev_rx_handler_register(), held while the device has a flow: a
 * netdev already a bridge port or a bond slave has one, and then flows are
 * refused with EBUSY). SNIFFER flows get a copy of every frame the netdev
 * receives and sends, the kernel's own included, through a packet tap
 * (dev_add_pack()), and take nothing away.
 *
 * A frame for a QP is a clone of the received skb with its Ethernet header
 * (and VLAN tag) back in front; the QP's task copies it to the next
 * receive WQE and completes it with its length.
 */

#include <linux/etherdevice.h>
#include <linux/if_vlan.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/netdevice.h>
#include <linux/rtnetlink.h>
#include <net/dsfield.h>
#include <net/ipv6.h>

#include "srnic.h"
#include "srnic_trace.h"
#include "srnic_wire.h"

#define SRNIC_RAW_RX_BUDGET 64
/* Distinct QPs one frame is delivered to at most (one priority's flows). */
#define SRNIC_RAW_MAX_DEST 16

/* Which specs a flow has: a bit per kind. */
enum {
	SRNIC_FLOW_ETH = BIT(0),
	SRNIC_FLOW_IPV4 = BIT(1),
	SRNIC_FLOW_IPV6 = BIT(2),
	SRNIC_FLOW_L4 = BIT(3),
};

/**
 * struct srnic_flow_match - what a flow matches, each value already masked
 * @specs: SRNIC_FLOW_* of the specs the flow has
 * @l4_proto: IPPROTO_TCP or IPPROTO_UDP, with SRNIC_FLOW_L4
 * @eth: the Ethernet spec's value; @eth_mask its mask
 * @ip4: the IPv4 spec's value; @ip4_mask its mask
 * @ip6: the IPv6 spec's value; @ip6_mask its mask
 * @l4: the TCP or UDP spec's ports; @l4_mask their mask
 * @eth_mask: see @eth
 * @ip4_mask: see @ip4
 * @ip6_mask: see @ip6
 * @l4_mask: see @l4
 */
struct srnic_flow_match {
	u32 specs;
	u8 l4_proto;
	struct ib_flow_eth_filter eth, eth_mask;
	struct ib_flow_ipv4_filter ip4, ip4_mask;
	struct ib_flow_ipv6_filter ip6, ip6_mask;
	struct ib_flow_tcp_udp_filter l4, l4_mask;
};

/**
 * struct srnic_flow - a steering rule of a raw packet QP
 * @ibflow: ib_core's flow object
 * @node: in srnic_raw_steering.flows (normal flows, by priority),
 *	  .defaults or .sniffers; RCU
 * @rcu: frees it after the receive paths' readers
 * @qp: the QP whose RQ gets the frames (ib_core holds it while the flow is)
 * @type: IB_FLOW_ATTR_NORMAL, _ALL_DEFAULT, _MC_DEFAULT or _SNIFFER
 * @priority: lower comes first, among normal flows
 * @dont_trap: the kernel's stack gets the frames too
 * @match: the fields matched
 */
struct srnic_flow {
	struct ib_flow ibflow;
	struct list_head node;
	struct rcu_head rcu;
	struct srnic_qp *qp;
	enum ib_flow_attr_type type;
	u16 priority;
	bool dont_trap;
	struct srnic_flow_match match;
};

static struct srnic_flow *to_srnic_flow(struct ib_flow *ibflow)
{
	return container_of(ibflow, struct srnic_flow, ibflow);
}

/* ---- Frames ----------------------------------------------------------- */

/*
 * A frame's fields that flows match on. @off is its Ethernet header's
 * offset from skb->data: negative in the receive path, where skb->data is
 * past the link-layer header already.
 */
struct srnic_frame {
	const struct sk_buff *skb;
	int off;
	struct ethhdr eth;
	__be16 vlan_tci;		/* 0 without a VLAN tag */
	__be16 proto;			/* EtherType after any VLAN tag */
	int l3;				/* from skb->data */
	bool has_ip4, has_ip6;
	struct iphdr ip4;
	struct ipv6hdr ip6;
	u8 l4_proto;
	__be16 sport, dport;
	bool has_ports;
};

static bool srnic_frame_parse(const struct sk_buff *skb, int off,
			      struct srnic_frame *f)
{
	const struct ethhdr *eth;
	struct vlan_hdr vbuf;
	const struct vlan_hdr *vh;
	__be16 pbuf[2];
	const __be16 *ports;
	int l4 = 0;

	memset(f, 0, sizeof(*f));
	f->skb = skb;
	f->off = off;
	eth = skb_header_pointer(skb, off, sizeof(f->eth), &f->eth);
	if (!eth)
		return false;
	f->eth = *eth;
	f->proto = eth->h_proto;
	f->l3 = off + ETH_HLEN;
	if (skb_vlan_tag_present(skb)) {
		f->vlan_tci = htons(skb_vlan_tag_get(skb));
	} else if (eth_type_vlan(f->proto)) {
		vh = skb_header_pointer(skb, f->l3, sizeof(vbuf), &vbuf);
		if (!vh)
			return true;
		f->vlan_tci = vh->h_vlan_TCI;
		f->proto = vh->h_vlan_encapsulated_proto;
		f->l3 += VLAN_HLEN;
	}
	if (f->proto == htons(ETH_P_IP)) {
		const struct iphdr *ip = skb_header_pointer(skb, f->l3,
							    sizeof(f->ip4),
							    &f->ip4);

		if (!ip || ip->ihl < 5)
			return true;
		f->ip4 = *ip;
		f->has_ip4 = true;
		f->l4_proto = ip->protocol;
		/* Only a first fragment carries the ports. */
		if (!(ip->frag_off & htons(IP_OFFSET)))
			l4 = f->l3 + ip->ihl * 4;
	} else if (f->proto == htons(ETH_P_IPV6)) {
		const struct ipv6hdr *ip6 = skb_header_pointer(skb, f->l3,
							       sizeof(f->ip6),
							       &f->ip6);

		if (!ip6)
			return true;
		f->ip6 = *ip6;
		f->has_ip6 = true;
		f->l4_proto = ip6->nexthdr;
		l4 = f->l3 + sizeof(*ip6);
	}
	if (l4 && (f->l4_proto == IPPROTO_TCP || f->l4_proto == IPPROTO_UDP)) {
		ports = skb_header_pointer(skb, l4, sizeof(pbuf), pbuf);
		if (ports) {
			f->sport = ports[0];
			f->dport = ports[1];
			f->has_ports = true;
		}
	}
	return true;
}

/* Whether @n bytes at @a, masked by @mask, equal @val (already masked). */
static bool srnic_masked_eq(const void *a, const void *val, const void *mask,
			    size_t n)
{
	const u8 *x = a, *v = val, *m = mask;
	size_t i;

	for (i = 0; i < n; i++)
		if ((x[i] & m[i]) != v[i])
			return false;
	return true;
}

static bool srnic_flow_matches_eth(const struct srnic_flow_match *m,
				   const struct srnic_frame *f)
{
	return srnic_masked_eq(f->eth.h_dest, m->eth.dst_mac,
			       m->eth_mask.dst_mac, ETH_ALEN) &&
	       srnic_masked_eq(f->eth.h_source, m->eth.src_mac,
			       m->eth_mask.src_mac, ETH_ALEN) &&
	       (f->proto & m->eth_mask.ether_type) == m->eth.ether_type &&
	       (f->vlan_tci & m->eth_mask.vlan_tag) == m->eth.vlan_tag;
}

static bool srnic_flow_matches_ipv4(const struct srnic_flow_match *m,
				    const struct srnic_frame *f)
{
	const struct ib_flow_ipv4_filter *v = &m->ip4, *k = &m->ip4_mask;
	u8 flags = ntohs(f->ip4.frag_off) >> 13;

	return f->has_ip4 &&
	       (f->ip4.saddr & k->src_ip) == v->src_ip &&
	       (f->ip4.daddr & k->dst_ip) == v->dst_ip &&
	       (f->ip4.protocol & k->proto) == v->proto &&
	       (f->ip4.tos & k->tos) == v->tos &&
	       (f->ip4.ttl & k->ttl) == v->ttl &&
	       (flags & k->flags) == v->flags;
}

static bool srnic_flow_matches_ipv6(const struct srnic_flow_match *m,
				    const struct srnic_frame *f)
{
	const struct ib_flow_ipv6_filter *v = &m->ip6, *k = &m->ip6_mask;
	__be32 label = ip6_flowlabel(&f->ip6);	/* the label, in place */
	u8 tclass = ipv6_get_dsfield(&f->ip6);

	return f->has_ip6 &&
	       srnic_masked_eq(&f->ip6.saddr, v->src_ip, k->src_ip, 16) &&
	       srnic_masked_eq(&f->ip6.daddr, v->dst_ip, k->dst_ip, 16) &&
	       (label & k->flow_label) == v->flow_label &&
	       (f->ip6.nexthdr & k->next_hdr) == v->next_hdr &&
	       (tclass & k->traffic_class) == v->traffic_class &&
	       (f->ip6.hop_limit & k->hop_limit) == v->hop_limit;
}

static bool srnic_flow_matches(const struct srnic_flow *flow,
			       const struct srnic_frame *f)
{
	const struct srnic_flow_match *m = &flow->match;

	if ((m->specs & SRNIC_FLOW_ETH) && !srnic_flow_matches_eth(m, f))
		return false;
	if ((m->specs & SRNIC_FLOW_IPV4) && !srnic_flow_matches_ipv4(m, f))
		return false;
	if ((m->specs & SRNIC_FLOW_IPV6) && !srnic_flow_matches_ipv6(m, f))
		return false;
	if (m->specs & SRNIC_FLOW_L4)
		return f->has_ports && f->l4_proto == m->l4_proto &&
		       (f->sport & m->l4_mask.src_port) == m->l4.src_port &&
		       (f->dport & m->l4_mask.dst_port) == m->l4.dst_port;
	return true;
}

/* ---- Delivery --------------------------------------------------------- */

/*
 * Queue a copy of the frame @f for @qp's task: a clone whose data starts
 * at the Ethernet header, with a stripped VLAN tag put back. Context: any,
 * under RCU (the QP outlives the flows that lead to it).
 */
static void srnic_raw_deliver(struct srnic_qp *qp, const struct srnic_frame *f)
{
	enum ib_qp_state state = READ_ONCE(qp->state);
	struct sk_buff *skb;

	/* A hash QP has no states: its WQs' decide (srnic_rss_rx()). */
	if (!qp->rss && state != IB_QPS_RTR && state != IB_QPS_RTS) {
		srnic_qp_count(qp, SRNIC_CNT_RX_DROP_BAD_QP);
		return;
	}
	if (skb_queue_len_lockless(&qp->rxq) >= SRNIC_RXQ_MAX) {
		srnic_qp_count(qp, SRNIC_CNT_RX_DROP_QUEUE_FULL);
		return;
	}
	skb = skb_clone((struct sk_buff *)f->skb, GFP_ATOMIC);
	if (!skb) {
		srnic_qp_count(qp, SRNIC_CNT_RX_DROP_QUEUE_FULL);
		return;
	}
	if (f->off < 0)
		__skb_push(skb, -f->off);
	else
		__skb_pull(skb, f->off);
	skb_reset_mac_header(skb);
	if (skb_vlan_tag_present(skb)) {
		skb = __vlan_hwaccel_push_inside(skb);
		if (!skb) {
			srnic_qp_count(qp, SRNIC_CNT_RX_DROP_QUEUE_FULL);
			return;
		}
	}
	skb_queue_tail(&qp->rxq, skb);
	srnic_engine_task_kick(&qp->task);
}

/*
 * Offer the frame in @skb (Ethernet header at @off from skb->data) to the
 * device's normal and default flows. Returns whether one took it away from
 * the kernel's stack. Context: any, under RCU.
 */
static bool srnic_raw_steer(struct srnic_dev *sdev, const struct sk_buff *skb,
			    int off)
{
	struct srnic_qp *dest[SRNIC_RAW_MAX_DEST];
	unsigned int ndest = 0, i;
	struct srnic_flow *flow;
	struct srnic_frame f;
	bool trap = false;
	int best = -1;

	if (!srnic_frame_parse(skb, off, &f))
		return false;
	list_for_each_entry_rcu(flow, &sdev->raw.flows, node) {
		if (best >= 0 && flow->priority != best)
			break;
		if (!srnic_flow_matches(flow, &f))
			continue;
		best = flow->priority;
		trap |= !flow->dont_trap;
		for (i = 0; i < ndest && dest[i] != flow->qp; i++)
			;
		if (i < ndest || ndest == ARRAY_SIZE(dest))
			continue;
		dest[ndest++] = flow->qp;
		srnic_raw_deliver(flow->qp, &f);
	}
	if (best >= 0)
		return trap;
	list_for_each_entry_rcu(flow, &sdev->raw.defaults, node) {
		if (flow->type == IB_FLOW_ATTR_MC_DEFAULT &&
		    !is_multicast_ether_addr(f.eth.h_dest))
			continue;
		srnic_raw_deliver(flow->qp, &f);
		trap = true;
	}
	return trap;
}

/* Frames from the wire: what the flows trap, the kernel does not see. */
static rx_handler_result_t srnic_raw_rx_handler(struct sk_buff **pskb)
{
	struct sk_buff *skb = *pskb;
	struct srnic_dev *sdev = rcu_dereference(skb->dev->rx_handler_data);

	if (skb->pkt_type == PACKET_LOOPBACK || !skb_mac_header_was_set(skb))
		return RX_HANDLER_PASS;
	if (!srnic_raw_steer(sdev, skb, skb_mac_header(skb) - skb->data))
		return RX_HANDLER_PASS;
	consume_skb(skb);
	return RX_HANDLER_CONSUMED;
}

/* The sniffers' tap: every frame the netdev receives or sends. */
static int srnic_raw_tap_rcv(struct sk_buff *skb, struct net_device *ndev,
			     struct packet_type *pt,
			     struct net_device *orig_dev)
{
	struct srnic_dev *sdev = container_of(pt, struct srnic_dev, raw.tap);
	struct srnic_flow *flow;
	struct srnic_frame f;

	if (skb_mac_header_was_set(skb) &&
	    srnic_frame_parse(skb, skb_mac_header(skb) - skb->data, &f)) {
		rcu_read_lock();
		list_for_each_entry_rcu(flow, &sdev->raw.sniffers, node)
			srnic_raw_deliver(flow->qp, &f);
		rcu_read_unlock();
	}
	consume_skb(skb);
	return NET_RX_SUCCESS;
}

/* ---- Flows ------------------------------------------------------------ */

static int srnic_flow_parse_spec(struct srnic_flow_match *m,
				 const union ib_flow_spec *spec)
{
	u32 bit;

	switch (spec->type) {
	case IB_FLOW_SPEC_ETH:
		if (spec->size != sizeof(spec->eth))
			return -EINVAL;
		bit = SRNIC_FLOW_ETH;
		m->eth_mask = spec->eth.mask;
		m->eth = spec->eth.val;
		m->eth.ether_type &= m->eth_mask.ether_type;
		m->eth.vlan_tag &= m->eth_mask.vlan_tag;
		for (int i = 0; i < ETH_ALEN; i++) {
			m->eth.dst_mac[i] &= m->eth_mask.dst_mac[i];
			m->eth.src_mac[i] &= m->eth_mask.src_mac[i];
		}
		break;
	case IB_FLOW_SPEC_IPV4:
		if (spec->size != sizeof(spec->ipv4))
			return -EINVAL;
		bit = SRNIC_FLOW_IPV4;
		m->ip4_mask = spec->ipv4.mask;
		m->ip4 = spec->ipv4.val;
		m->ip4.src_ip &= m->ip4_mask.src_ip;
		m->ip4.dst_ip &= m->ip4_mask.dst_ip;
		m->ip4.proto &= m->ip4_mask.proto;
		m->ip4.tos &= m->ip4_mask.tos;
		m->ip4.ttl &= m->ip4_mask.ttl;
		m->ip4.flags &= m->ip4_mask.flags;
		break;
	case IB_FLOW_SPEC_IPV6:
		if (spec->size != sizeof(spec->ipv6))
			return -EINVAL;
		bit = SRNIC_FLOW_IPV6;
		m->ip6_mask = spec->ipv6.mask;
		m->ip6 = spec->ipv6.val;
		for (int i = 0; i < 16; i++) {
			m->ip6.src_ip[i] &= m->ip6_mask.src_ip[i];
			m->ip6.dst_ip[i] &= m->ip6_mask.dst_ip[i];
		}
		m->ip6.flow_label &= m->ip6_mask.flow_label;
		m->ip6.next_hdr &= m->ip6_mask.next_hdr;
		m->ip6.traffic_class &= m->ip6_mask.traffic_class;
		m->ip6.hop_limit &= m->ip6_mask.hop_limit;
		break;
	case IB_FLOW_SPEC_TCP:
	case IB_FLOW_SPEC_UDP:
		if (spec->size != sizeof(spec->tcp_udp))
			return -EINVAL;
		bit = SRNIC_FLOW_L4;
		m->l4_proto = spec->type == IB_FLOW_SPEC_TCP ? IPPROTO_TCP :
			      IPPROTO_UDP;
		m->l4_mask = spec->tcp_udp.mask;
		m->l4 = spec->tcp_udp.val;
		m->l4.src_port &= m->l4_mask.src_port;
		m->l4.dst_port &= m->l4_mask.dst_port;
		break;
	default:
		/* InfiniBand, tunnels, inner headers, actions. */
		return -EOPNOTSUPP;
	}
	if (m->specs & bit)
		return -EINVAL;
	m->specs |= bit;
	return 0;
}

static int srnic_flow_parse(struct srnic_flow *flow,
			    const struct ib_flow_attr *attr)
{
	const u8 *p = (const u8 *)(attr + 1);
	struct srnic_flow_match *m = &flow->match;
	unsigned int i;
	int err;

	for (i = 0; i < attr->num_of_specs; i++) {
		const union ib_flow_spec *spec = (const union ib_flow_spec *)p;

		err = srnic_flow_parse_spec(m, spec);
		if (err)
			return err;
		p += spec->size;
	}
	/* An address of one IP version, ports of TCP or UDP over IP. */
	if ((m->specs & SRNIC_FLOW_IPV4) && (m->specs & SRNIC_FLOW_IPV6))
		return -EINVAL;
	if ((m->specs & SRNIC_FLOW_IPV4) && m->ip4_mask.proto &&
	    (m->specs & SRNIC_FLOW_L4) && m->ip4.proto != m->l4_proto)
		return -EINVAL;
	if ((m->specs & SRNIC_FLOW_IPV6) && m->ip6_mask.next_hdr &&
	    (m->specs & SRNIC_FLOW_L4) && m->ip6.next_hdr != m->l4_proto)
		return -EINVAL;
	return 0;
}

/*
 * Hold the netdev's receive handler for one more normal or default flow;
 * the first registers it. RTNL and the steering lock held.
 */
static int srnic_raw_rx_handler_get(struct srnic_dev *sdev)
{
	int err;

	if (!sdev->raw.rx_handler_on) {
		if (sdev->ndev->reg_state != NETREG_REGISTERED)
			return -ENODEV;
		err = netdev_rx_handler_register(sdev->ndev,
						 srnic_raw_rx_handler, sdev);
		if (err == -EBUSY)
			dev_warn_ratelimited(&sdev->ibdev.dev,
					     "%s has a receive handler already (a bridge port, bond slave or macvlan lower device?): flows need it, give srnic a netdev of its own\n",
					     netdev_name(sdev->ndev));
		if (err)
			return err;
		sdev->raw.rx_handler_on = true;
	}
	sdev->raw.steering_flows++;
	return 0;
}

/* The reverse; the last one unregisters it. The same locks held. */
static void srnic_raw_rx_handler_put(struct srnic_dev *sdev)
{
	if (--sdev->raw.steering_flows == 0 && sdev->raw.rx_handler_on) {
		netdev_rx_handler_unregister(sdev->ndev);
		sdev->raw.rx_handler_on = false;
	}
}

/* The same for the sniffers' tap. */
static int srnic_raw_tap_get(struct srnic_dev *sdev)
{
	if (!sdev->raw.tap_on) {
		if (sdev->ndev->reg_state != NETREG_REGISTERED)
			return -ENODEV;
		sdev->raw.tap.type = htons(ETH_P_ALL);
		sdev->raw.tap.dev = sdev->ndev;
		sdev->raw.tap.func = srnic_raw_tap_rcv;
		dev_add_pack(&sdev->raw.tap);
		sdev->raw.tap_on = true;
	}
	sdev->raw.sniffer_flows++;
	return 0;
}

/* Returns whether the tap came off (the caller waits with synchronize_net()). */
static bool srnic_raw_tap_put(struct srnic_dev *sdev)
{
	if (--sdev->raw.sniffer_flows || !sdev->raw.tap_on)
		return false;
	__dev_remove_pack(&sdev->raw.tap);
	sdev->raw.tap_on = false;
	return true;
}

/**
 * srnic_create_flow() - ib_device_ops.create_flow
 * @ibqp: the QP the flow steers to: a raw packet QP
 * @attr: the flow, its specs following it (ib_core checked their sizes)
 * @udata: driver data; srnic defines none
 *
 * Normal flows are kept in order of priority; equal priorities in order
 * of creation. Context: process; takes RTNL.
 *
 * Return: the flow, or an ERR_PTR: -EINVAL for a QP of another type or
 * contradictory specs, -EOPNOTSUPP for a spec kind, flag or type srnic
 * does not steer by, -EBUSY if the netdev has another receive handler.
 */
struct ib_flow *srnic_create_flow(struct ib_qp *ibqp, struct ib_flow_attr *attr,
				  struct ib_udata *udata)
{
	struct srnic_dev *sdev = to_srnic_dev(ibqp->device);
	struct srnic_flow *flow, *pos;
	struct list_head *where;
	int err;

	if (ibqp->qp_type != IB_QPT_RAW_PACKET)
		return ERR_PTR(-EINVAL);
	if (attr->flags & ~IB_FLOW_ATTR_FLAGS_DONT_TRAP ||
	    (attr->type != IB_FLOW_ATTR_NORMAL &&
	     attr->type != IB_FLOW_ATTR_ALL_DEFAULT &&
	     attr->type != IB_FLOW_ATTR_MC_DEFAULT &&
	     attr->type != IB_FLOW_ATTR_SNIFFER))
		return ERR_PTR(-EOPNOTSUPP);
	if (udata && udata->inlen &&
	    !ib_is_udata_cleared(udata, 0, udata->inlen))
		return ERR_PTR(-EOPNOTSUPP);

	flow = kzalloc(sizeof(*flow), GFP_KERNEL);
	if (!flow)
		return ERR_PTR(-ENOMEM);
	flow->qp = to_srnic_qp(ibqp);
	flow->type = attr->type;
	flow->priority = attr->priority;
	flow->dont_trap = attr->flags & IB_FLOW_ATTR_FLAGS_DONT_TRAP;
	err = srnic_flow_parse(flow, attr);
	if (err)
		goto err_free;
	/* Default and sniffer flows take every frame of their kind. */
	if (attr->type != IB_FLOW_ATTR_NORMAL && flow->match.specs) {
		err = -EINVAL;
		goto err_free;
	}

	rtnl_lock();
	mutex_lock(&sdev->raw.lock);
	if (attr->type == IB_FLOW_ATTR_SNIFFER) {
		err = srnic_raw_tap_get(sdev);
		if (err)
			goto err_unlock;
		list_add_tail_rcu(&flow->node, &sdev->raw.sniffers);
	} else {
		err = srnic_raw_rx_handler_get(sdev);
		if (err)
			goto err_unlock;
		if (attr->type == IB_FLOW_ATTR_NORMAL) {
			where = &sdev->raw.flows;
			list_for_each_entry(pos, &sdev->raw.flows, node) {
				if (pos->priority > flow->priority) {
					where = &pos->node;
					break;
				}
			}
			list_add_tail_rcu(&flow->node, where);
		} else {
			list_add_tail_rcu(&flow->node, &sdev->raw.defaults);
		}
	}
	mutex_unlock(&sdev->raw.lock);
	rtnl_unlock();
	return &flow->ibflow;

err_unlock:
	mutex_unlock(&sdev->raw.lock);
	rtnl_unlock();
err_free:
	kfree(flow);
	return ERR_PTR(err);
}

/**
 * srnic_destroy_flow() - ib_device_ops.destroy_flow
 * @ibflow: the flow
 *
 * The last flow takes the netdev's receive handler or tap away. Context:
 * process; takes RTNL.
 *
 * Return: 0.
 */
int srnic_destroy_flow(struct ib_flow *ibflow)
{
	struct srnic_flow *flow = to_srnic_flow(ibflow);
	struct srnic_dev *sdev = to_srnic_dev(flow->qp->ibqp.device);
	bool untap = false;

	rtnl_lock();
	mutex_lock(&sdev->raw.lock);
	list_del_rcu(&flow->node);
	if (flow->type == IB_FLOW_ATTR_SNIFFER)
		untap = srnic_raw_tap_put(sdev);
	else
		srnic_raw_rx_handler_put(sdev);
	mutex_unlock(&sdev->raw.lock);
	rtnl_unlock();
	if (untap)
		synchronize_net();
	kfree_rcu(flow, rcu);
	return 0;
}

/**
 * srnic_raw_init() - a new device's steering state
 * @sdev: the device
 */
void srnic_raw_init(struct srnic_dev *sdev)
{
	mutex_init(&sdev->raw.lock);
	INIT_LIST_HEAD(&sdev->raw.flows);
	INIT_LIST_HEAD(&sdev->raw.defaults);
	INIT_LIST_HEAD(&sdev->raw.sniffers);
}

/**
 * srnic_raw_netdev_unregistering() - the netdev goes: let go of it
 * @sdev: the device, whose flows ib_core destroys later
 *
 * The receive handler and the tap leave the netdev now; the flows left
 * get nothing more. Context: RTNL held (the netdev notifier).
 */
void srnic_raw_netdev_unregistering(struct srnic_dev *sdev)
{
	ASSERT_RTNL();
	mutex_lock(&sdev->raw.lock);
	if (sdev->raw.rx_handler_on)
		netdev_rx_handler_unregister(sdev->ndev);
	sdev->raw.rx_handler_on = false;
	if (sdev->raw.tap_on)
		dev_remove_pack(&sdev->raw.tap);
	sdev->raw.tap_on = false;
	mutex_unlock(&sdev->raw.lock);
}

/* ---- The QP's task ---------------------------------------------------- */

/* Send the WQE fetched into qp->req.wqe; returns its completion status. */
static enum ib_wc_status srnic_raw_send(struct srnic_qp *qp, u64 *len)
{
	struct srnic_dev *sdev = to_srnic_dev(qp->ibqp.device);
	const struct srnic_send_wqe *wqe = qp->req.wqe;
	struct net_device *ndev = sdev->ndev;
	struct srnic_sgl *sgl = &qp->req.sgl;
	enum ib_wc_status status;
	struct sk_buff *skb;

	*len = 0;
	if (wqe->opcode != IB_WR_SEND)
		return IB_WC_LOC_QP_OP_ERR;
	status = srnic_req_local_sgl(qp, wqe, sgl);
	trace_srnic_wqe_start(&qp->ibqp, wqe->wr_id, wqe->opcode, sgl->len, 0,
			      0);
	if (status != IB_WC_SUCCESS)
		return status;
	*len = sgl->len;
	if (sgl->len < ETH_HLEN ||
	    sgl->len > READ_ONCE(ndev->mtu) + ETH_HLEN + VLAN_HLEN) {
		status = IB_WC_LOC_LEN_ERR;
		goto out;
	}
	skb = alloc_skb(LL_RESERVED_SPACE(ndev) + sgl->len, GFP_ATOMIC);
	if (!skb) {
		srnic_qp_count(qp, SRNIC_CNT_TX_ERRORS);
		goto out;	/* a frame lost on the way is no error */
	}
	skb_reserve(skb, LL_RESERVED_SPACE(ndev));
	if (srnic_sgl_xfer(sgl, 0, skb_put(skb, sgl->len), sgl->len, false)) {
		kfree_skb(skb);
		status = IB_WC_LOC_PROT_ERR;
		goto out;
	}
	skb_reset_mac_header(skb);
	skb->dev = ndev;
	skb->protocol = eth_hdr(skb)->h_proto;
	skb_set_network_header(skb, ETH_HLEN);
	/* The device's own flows see it first, as a NIC's switch loops it. */
	rcu_read_lock();
	srnic_raw_steer(sdev, skb, 0);
	rcu_read_unlock();
	srnic_qp_count(qp, SRNIC_CNT_RAW_TX_FRAMES);
	if (dev_queue_xmit(skb) != NET_XMIT_SUCCESS)
		srnic_qp_count(qp, SRNIC_CNT_TX_ERRORS);
out:
	srnic_sgl_put(sgl);
	return status;
}

/* The next queued frame: srnic_datagram_run()'s dequeue. */
static struct sk_buff *srnic_raw_dequeue(struct srnic_qp *qp)
{
	return skb_dequeue(&qp->rxq);
}

/* Copy a queued frame to the next receive WQE and complete it. */
static void srnic_raw_rx(struct srnic_qp *qp, struct sk_buff *skb)
{
	struct srnic_recv_wqe *rwqe = qp->req.rwqe;

	if (skb_has_frag_list(skb) && skb_linearize(skb)) {
		srnic_qp_count(qp, SRNIC_CNT_RX_DROP_QUEUE_FULL);
		return;
	}
	if (!srnic_rq_take(qp, rwqe)) {
		srnic_qp_count(qp, SRNIC_CNT_RX_DROP_NO_RECV_WQE);
		return;
	}
	atomic_inc(&qp->rx_msgs);
	if (srnic_frame_to_rwqe(qp, to_srnic_pd(qp->ibqp.pd), rwqe,
				srnic_qp_recv_wq(qp)->max_sge, skb,
				to_srnic_cq(qp->ibqp.recv_cq), qp->ibqp.qp_num))
		srnic_qp_to_error(qp, 0);
}

static bool srnic_raw_run(struct srnic_engine_task *task)
{
	struct srnic_qp *qp = container_of(task, struct srnic_qp, task);
	unsigned int budget;
	struct sk_buff *skb;

	if (srnic_task_defer_if_faulting(qp))
		return false;
	if (!qp->rss)
		return srnic_datagram_run(qp, srnic_raw_dequeue, srnic_raw_rx,
					  srnic_raw_send);
	/* A hash QP: frames only, whatever its state (it has none). */
	for (budget = SRNIC_RAW_RX_BUDGET; budget; budget--) {
		skb = skb_dequeue(&qp->rxq);
		if (!skb)
			return false;
		if (!skb_has_frag_list(skb) || !skb_linearize(skb))
			srnic_rss_rx(qp, skb);
		consume_skb(skb);
	}
	return true;
}

const struct srnic_engine_task_ops srnic_raw_task_ops = {
	.run = srnic_raw_run,
	.has_work = srnic_datagram_has_work,
	.prepare_sleep = srnic_datagram_prepare_sleep,
	.woken = srnic_qp_woken,
};
