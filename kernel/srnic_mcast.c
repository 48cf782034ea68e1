// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: multicast groups of UD QPs (attach_mcast, detach_mcast) and the
 * delivery of multicast datagrams to every attached QP.
 *
 * A RoCE v2 multicast GID is an IP multicast address (IPv4-mapped for
 * IPv4). Each attachment (group, QP) is an entry on the device's list;
 * the list is changed under RTNL and mcast_lock, and read under RCU by the
 * receive path. Attaching also joins the IP group on the device's netdev
 * (ip_mc_inc_group() or ipv6_dev_mc_inc(), one membership reference per
 * attachment), so that the IP layer accepts the group's datagrams and
 * loops back those srnic sends itself; detaching leaves it.
 *
 * Receive: a datagram whose BTH destination QP is 0xFFFFFF is looked up by
 * its IP destination address; every attached QP that takes it (a UD QP
 * from RTR on) gets a clone on its receive queue, and its engine task
 * delivers it as any UD datagram (Q_Key check, receive WQE, GRH).
 */

#include <linux/igmp.h>
#include <linux/inetdevice.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/rtnetlink.h>
#include <net/addrconf.h>
#include <net/ipv6.h>
#include <rdma/ib_addr.h>

#include "srnic.h"
#include "srnic_wire.h"

/**
 * struct srnic_mcast - one QP attached to one multicast group
 * @node: on srnic_dev.mcast_list
 * @rcu: frees the entry after the receive path's readers
 * @mgid: the group's GID
 * @qp: the attached QP; valid while the entry is listed (a QP is detached
 *	from everything before destroy_qp frees it)
 */
struct srnic_mcast {
	struct list_head node;
	struct rcu_head rcu;
	union ib_gid mgid;
	struct srnic_qp *qp;
};

void srnic_mcast_init(struct srnic_dev *sdev)
{
	INIT_LIST_HEAD(&sdev->mcast_list);
	spin_lock_init(&sdev->mcast_lock);
}

static bool srnic_mgid_v4(const union ib_gid *mgid)
{
	return ipv6_addr_v4mapped((const struct in6_addr *)mgid->raw);
}

static __be32 srnic_mgid_to_v4(const union ib_gid *mgid)
{
	__be32 addr;

	memcpy(&addr, mgid->raw + 12, sizeof(addr));
	return addr;
}

/* Join (@join) or leave the IP group of @mgid on the netdev. RTNL held. */
static int srnic_mcast_ip(struct srnic_dev *sdev, const union ib_gid *mgid,
			  bool join)
{
	struct in_device *in_dev;

	ASSERT_RTNL();
	if (srnic_mgid_v4(mgid)) {
		in_dev = __in_dev_get_rtnl(sdev->ndev);
		if (!in_dev)
			return -ENODEV;
		if (join)
			ip_mc_inc_group(in_dev, srnic_mgid_to_v4(mgid));
		else
			ip_mc_dec_group(in_dev, srnic_mgid_to_v4(mgid));
		return 0;
	}
	if (!IS_ENABLED(CONFIG_IPV6))
		return -EAFNOSUPPORT;
	if (join)
		return ipv6_dev_mc_inc(sdev->ndev,
				       (const struct in6_addr *)mgid->raw);
	return ipv6_dev_mc_dec(sdev->ndev, (const struct in6_addr *)mgid->raw);
}

/*
 * Whether @qp may attach to @mgid under the device's limits; -EEXIST when
 * it already is. mcast_lock held.
 */
static int srnic_mcast_check(struct srnic_dev *sdev, struct srnic_qp *qp,
			     const union ib_gid *mgid)
{
	unsigned int total = 0, in_group = 0, groups = 0;
	struct srnic_mcast *m, *prev;
	bool new_group;

	list_for_each_entry(m, &sdev->mcast_list, node) {
		total++;
		if (!memcmp(&m->mgid, mgid, sizeof(*mgid))) {
			if (m->qp == qp)
				return -EEXIST;
			in_group++;
		}
		/* Count each group once: at its first entry. */
		new_group = true;
		list_for_each_entry(prev, &sdev->mcast_list, node) {
			if (prev == m)
				break;
			if (!memcmp(&prev->mgid, &m->mgid, sizeof(m->mgid))) {
				new_group = false;
				break;
			}
		}
		groups += new_group;
	}
	if (total >= SRNIC_MAX_TOTAL_MCAST_QP_ATTACH ||
	    in_group >= SRNIC_MAX_MCAST_QP_ATTACH ||
	    (!in_group && groups >= SRNIC_MAX_MCAST_GRP))
		return -ENOMEM;
	return 0;
}

/**
 * srnic_attach_mcast() - ib_device_ops.attach_mcast
 * @ibqp: a UD QP (ib_core checks the type and that @gid is multicast)
 * @gid: the group's GID, an IP multicast address
 * @lid: ignored on RoCE
 *
 * Attaching a QP twice to one group is a no-op, as in rxe.
 *
 * Return: 0, -EINVAL for a GSI QP or a GID that is not multicast, -ENOMEM
 * beyond max_mcast_grp, max_mcast_qp_attach or max_total_mcast_qp_attach.
 */
int srnic_attach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid)
{
	struct srnic_dev *sdev = to_srnic_dev(ibqp->device);
	struct srnic_qp *qp = to_srnic_qp(ibqp);
	struct srnic_mcast *m;
	int err;

	if (ibqp->qp_type != IB_QPT_UD ||
	    !rdma_is_multicast_addr((struct in6_addr *)gid->raw))
		return -EINVAL;
	m = kzalloc(sizeof(*m), GFP_KERNEL);
	if (!m)
		return -ENOMEM;
	m->mgid = *gid;
	m->qp = qp;

	rtnl_lock();
	spin_lock_bh(&sdev->mcast_lock);
	err = srnic_mcast_check(sdev, qp, gid);
	if (!err)
		list_add_tail_rcu(&m->node, &sdev->mcast_list);
	spin_unlock_bh(&sdev->mcast_lock);
	if (!err) {
		err = srnic_mcast_ip(sdev, gid, true);
		if (err) {
			spin_lock_bh(&sdev->mcast_lock);
			list_del_rcu(&m->node);
			spin_unlock_bh(&sdev->mcast_lock);
		}
	}
	rtnl_unlock();

	if (err) {
		kfree_rcu(m, rcu);
		return err == -EEXIST ? 0 : err;
	}
	return 0;
}

/* Unlist @m and leave its IP group. RTNL held. */
static void srnic_mcast_remove(struct srnic_dev *sdev, struct srnic_mcast *m)
{
	spin_lock_bh(&sdev->mcast_lock);
	list_del_rcu(&m->node);
	spin_unlock_bh(&sdev->mcast_lock);
	srnic_mcast_ip(sdev, &m->mgid, false);
	kfree_rcu(m, rcu);
}

/**
 * srnic_detach_mcast() - ib_device_ops.detach_mcast
 * @ibqp: the QP
 * @gid: the group's GID
 * @lid: ignored on RoCE
 *
 * Return: 0, or -EINVAL when the QP is not attached to the group.
 */
int srnic_detach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid)
{
	struct srnic_dev *sdev = to_srnic_dev(ibqp->device);
	struct srnic_qp *qp = to_srnic_qp(ibqp);
	struct srnic_mcast *m;
	int err = -EINVAL;

	rtnl_lock();
	/* RTNL serialises every change of the list. */
	list_for_each_entry(m, &sdev->mcast_list, node) {
		if (m->qp == qp && !memcmp(&m->mgid, gid, sizeof(*gid))) {
			srnic_mcast_remove(sdev, m);
			err = 0;
			break;
		}
	}
	rtnl_unlock();
	return err;
}

/**
 * srnic_mcast_detach_qp() - detach a QP that is being destroyed from all
 * its groups
 * @qp: the QP
 *
 * uverbs detaches a user QP's groups before destroying it; this covers a
 * kernel consumer that did not. Context: process, before the RCU grace
 * period of destroy_qp.
 */
void srnic_mcast_detach_qp(struct srnic_qp *qp)
{
	struct srnic_dev *sdev = to_srnic_dev(qp->ibqp.device);
	struct srnic_mcast *m, *next;

	bool attached = false;

	if (qp->ibqp.qp_type != IB_QPT_UD)
		return;
	spin_lock_bh(&sdev->mcast_lock);
	list_for_each_entry(m, &sdev->mcast_list, node)
		attached |= m->qp == qp;
	spin_unlock_bh(&sdev->mcast_lock);
	if (!attached)
		return;
	rtnl_lock();
	list_for_each_entry_safe(m, next, &sdev->mcast_list, node)
		if (m->qp == qp)
			srnic_mcast_remove(sdev, m);
	rtnl_unlock();
}

/**
 * srnic_mcast_rx() - deliver a multicast datagram to every attached QP
 * @sdev: the receiving device
 * @skb: the packet, skb->data at the BTH; consumed
 * @pkt: its parsed headers (BTH destination QP 0xFFFFFF)
 *
 * Context: softirq.
 */
void srnic_mcast_rx(struct srnic_dev *sdev, struct sk_buff *skb,
		    const struct srnic_pkt *pkt)
{
	enum srnic_counter drop = SRNIC_CNT_RX_DROP_NO_QP;
	struct srnic_mcast *m;
	struct sk_buff *clone;
	union ib_gid dgid;
	bool delivered = false;

	if (skb->protocol == htons(ETH_P_IP))
		ipv6_addr_set_v4mapped(ip_hdr(skb)->daddr,
				       (struct in6_addr *)dgid.raw);
	else
		memcpy(dgid.raw, &ipv6_hdr(skb)->daddr, sizeof(dgid.raw));
	/* Clones share the data: make it linear once, before cloning. */
	if (skb_linearize(skb)) {
		drop = SRNIC_CNT_RX_DROP_QUEUE_FULL;
		goto drop;
	}

	rcu_read_lock();
	list_for_each_entry_rcu(m, &sdev->mcast_list, node) {
		if (memcmp(&m->mgid, &dgid, sizeof(dgid)) ||
		    !refcount_inc_not_zero(&m->qp->ref))
			continue;
		clone = skb_clone(skb, GFP_ATOMIC);
		if (clone) {
			drop = srnic_rx_enqueue(m->qp, clone, pkt, true);
			if (drop == SRNIC_CNT_RX_PACKETS)
				delivered = true;
			else
				kfree_skb(clone);
		} else {
			drop = SRNIC_CNT_RX_DROP_QUEUE_FULL;
		}
		srnic_qp_put(m->qp);
	}
	rcu_read_unlock();
	if (delivered) {
		consume_skb(skb);
		return;
	}
drop:
	srnic_count(sdev, drop);
	kfree_skb(skb);
}
