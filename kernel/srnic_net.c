// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: RoCEv2 over UDP, one socket pair per network namespace.
 *
 * The first srnic device of a namespace opens an IPv4 and an IPv6 UDP
 * socket on port 4791 with an encap_rcv hook; the last one to go closes
 * them. rxe binds its socket in init_net only; per-namespace sockets let an
 * srnic device live in any namespace, e.g. facing an rxe device across a
 * veth pair.
 *
 * Receive: every packet is checked before any of its fields is trusted
 * (IP and UDP lengths, srnic_parse_transport(), P_Key, ICRC), and each
 * drop is counted per device and reason (`rdma statistic`).
 *
 * Transmit: the caller builds the transport packet (BTH to payload) in an
 * skb from srnic_tx_alloc(); srnic_tx_send() adds the ICRC, UDP and IP
 * headers and hands it to the IP output path, which resolves the
 * neighbour, as for any locally generated datagram.
 */

#include <linux/if_vlan.h>
#include <linux/inetdevice.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/skbuff.h>
#include <linux/udp.h>
#include <net/inet_ecn.h>
#include <net/ip.h>
#include <net/ipv6.h>
#include <net/net_namespace.h>
#include <net/netns/generic.h>
#include <net/route.h>
#include <net/udp.h>
#include <net/udp_tunnel.h>

#include "srnic.h"
#include "srnic_trace.h"
#include "srnic_wire.h"

/**
 * struct srnic_net - srnic's state in one network namespace
 * @lock: protects the fields below
 * @users: srnic devices in the namespace
 * @sock4: IPv4 UDP socket on port 4791, while @users > 0
 * @sock6: IPv6 (v6only) UDP socket on port 4791, while @users > 0
 */
struct srnic_net {
	struct mutex lock;	/* serialises socket setup and teardown */
	unsigned int users;
	struct socket *sock4;
	struct socket *sock6;
};

static unsigned int srnic_net_id;

static struct srnic_net *srnic_net(struct net *net)
{
	return net_generic(net, srnic_net_id);
}

/* ---- Receive -------------------------------------------------------- */

static const enum srnic_counter srnic_parse_drop_counter[] = {
	[SRNIC_PARSE_TOO_SHORT] = SRNIC_CNT_RX_DROP_TOO_SHORT,
	[SRNIC_PARSE_BAD_TVER] = SRNIC_CNT_RX_DROP_BAD_TVER,
	[SRNIC_PARSE_BAD_OPCODE] = SRNIC_CNT_RX_DROP_BAD_OPCODE,
	[SRNIC_PARSE_BAD_PAD] = SRNIC_CNT_RX_DROP_BAD_PAD,
	[SRNIC_PARSE_UNEXPECTED_PAYLOAD] = SRNIC_CNT_RX_DROP_BAD_PAYLOAD,
};

/**
 * srnic_skb_crc32() - continue the ICRC's CRC-32 over bytes of an skb
 * @skb: the packet; its linear part, page fragments and frag list count
 * @offset: first byte, from skb->data
 * @len: bytes; @offset + @len is at most skb->len
 * @crc: the CRC so far
 *
 * One running CRC through every piece, without a copy. Not
 * __skb_checksum(): it starts each fragment's CRC from zero and joins it
 * to the rest with crc32_le_combine(), a polynomial multiplication (eleven
 * 32-step products for a 4 KiB fragment) that cost under TCG 1.2 us of the
 * sender's 4 per 4 KiB packet and 1.5 of the receiver's 4.8.
 *
 * Return: the CRC after those bytes.
 */
static u32 srnic_skb_crc32(const struct sk_buff *skb, int offset, int len,
			   u32 crc)
{
	int start = skb_headlen(skb), i, n;
	const struct sk_buff *frag_iter;

	n = min(start - offset, len);
	if (n > 0) {
		crc = srnic_payload_crc32(crc, skb->data + offset, n);
		offset += n;
		len -= n;
	}
	for (i = 0; len > 0 && i < skb_shinfo(skb)->nr_frags; i++) {
		const skb_frag_t *frag = &skb_shinfo(skb)->frags[i];
		int end = start + skb_frag_size(frag);
		u32 p_off, p_len, done;
		struct page *p;

		n = min(end - offset, len);
		if (n > 0) {
			skb_frag_foreach_page(frag, skb_frag_off(frag) +
					      offset - start, n, p, p_off,
					      p_len, done) {
				u8 *vaddr = kmap_local_page(p);

				crc = srnic_payload_crc32(crc, vaddr + p_off,
							  p_len);
				kunmap_local(vaddr);
			}
			offset += n;
			len -= n;
		}
		start = end;
	}
	skb_walk_frags(skb, frag_iter) {
		int end = start + frag_iter->len;

		if (len <= 0)
			break;
		n = min(end - offset, len);
		if (n > 0) {
			crc = srnic_skb_crc32(frag_iter, offset - start, n, crc);
			offset += n;
			len -= n;
		}
		start = end;
	}
	return crc;
}

/*
 * The ICRC of the packet at skb->data (its BTH; headers parsed into @pkt
 * and already in the linear part), over its IP header too.
 */
static bool srnic_icrc_ok(struct sk_buff *skb, const struct srnic_pkt *pkt)
{
	const u8 *l3 = skb_network_header(skb);
	int body = pkt->payload_len + pkt->pad;
	__le32 icrc;
	u32 crc;

	crc = srnic_icrc_headers(l3, skb->protocol == htons(ETH_P_IPV6),
				 skb->data, pkt->hdr_len);
	crc = srnic_skb_crc32(skb, pkt->hdr_len, body, crc);
	if (skb_copy_bits(skb, pkt->hdr_len + body, &icrc, sizeof(icrc)))
		return false;
	return srnic_icrc_finish(crc) == icrc;
}

/*
 * The IP header must be one the ICRC is defined over: IPv4 without
 * options, or IPv6 with UDP as the next header.
 */
static bool srnic_ip_ok(struct sk_buff *skb)
{
	if (skb->protocol == htons(ETH_P_IP))
		return ip_hdr(skb)->ihl == SRNIC_IPV4_HDR_LEN / 4;
	if (skb->protocol == htons(ETH_P_IPV6))
		return ipv6_hdr(skb)->nexthdr == IPPROTO_UDP;
	return false;
}

/*
 * Validate one packet for @sdev, all but its ICRC (srnic_rx_packet()); on
 * success the transport packet starts at skb->data. Returns the counter
 * explaining a drop, or SRNIC_CNT_RX_PACKETS when the packet is good.
 */
static enum srnic_counter srnic_rx_validate(struct srnic_dev *sdev,
					    struct sk_buff *skb,
					    struct srnic_pkt *pkt)
{
	enum srnic_parse_error perr;
	unsigned int len;

	if (!srnic_ip_ok(skb))
		return SRNIC_CNT_RX_DROP_BAD_IP;
	if (!pskb_may_pull(skb, sizeof(struct udphdr)))
		return SRNIC_CNT_RX_DROP_TOO_SHORT;
	len = be16_to_cpu(udp_hdr(skb)->len);
	if (len < sizeof(struct udphdr) || len > skb->len)
		return SRNIC_CNT_RX_DROP_TOO_SHORT;
	len -= sizeof(struct udphdr);

	/* Bring BTH and the longest extension header chain into reach. */
	if (!pskb_may_pull(skb, sizeof(struct udphdr) +
			   min_t(unsigned int, len, SRNIC_MAX_HDR_LEN)))
		return SRNIC_CNT_RX_DROP_TOO_SHORT;

	perr = srnic_parse_transport(skb->data + sizeof(struct udphdr), len,
				     pkt);
	if (perr != SRNIC_PARSE_OK)
		return srnic_parse_drop_counter[perr];
	if (pkt->pkey != SRNIC_DEFAULT_PKEY_FULL)
		return SRNIC_CNT_RX_DROP_BAD_PKEY;

	__skb_pull(skb, sizeof(struct udphdr));
	return SRNIC_CNT_RX_PACKETS;
}

/* The srnic device of @ndev or, for a VLAN netdev, of its real device. */
static struct srnic_dev *srnic_rx_netdev_dev(struct net_device *ndev)
{
	struct srnic_dev *sdev = srnic_dev_get_by_netdev(ndev);

	if (!sdev && is_vlan_dev(ndev))
		sdev = srnic_dev_get_by_netdev(vlan_dev_real_dev(ndev));
	return sdev;
}

/*
 * The srnic device a received datagram is for, referenced, or NULL: the
 * one of the netdev it came in on. A datagram from one local address to
 * another (a process, or another RoCE stack of the namespace, sending to
 * an srnic device's address) never reaches that netdev: IP routes it over
 * lo. It is for the device whose netdev owns its destination address, as
 * if it had come in there. (srnic's own traffic between its devices takes
 * local delivery instead, see srnic_tx_local().)
 */
static struct srnic_dev *srnic_rx_dev(struct sk_buff *skb)
{
	struct net_device *ndev = skb->dev;
	struct srnic_dev *sdev = srnic_rx_netdev_dev(ndev);

	if (sdev || !(ndev->flags & IFF_LOOPBACK))
		return sdev;
	rcu_read_lock();
	if (skb->protocol == htons(ETH_P_IP))
		ndev = __ip_dev_find(dev_net(ndev), ip_hdr(skb)->daddr, false);
	else if (skb->protocol == htons(ETH_P_IPV6))
		ndev = srnic_ipv6_dev_find(dev_net(ndev), &ipv6_hdr(skb)->daddr);
	else
		ndev = NULL;
	if (ndev && !(ndev->flags & IFF_LOOPBACK))
		sdev = srnic_rx_netdev_dev(ndev);
	rcu_read_unlock();
	return sdev;
}

/* encap_rcv: every UDP datagram to port 4791 in the namespace. */
static int srnic_udp_encap_recv(struct sock *sk, struct sk_buff *skb)
{
	struct srnic_dev *sdev;

	sdev = srnic_rx_dev(skb);
	if (!sdev) {
		kfree_skb(skb);
		return 0;
	}
	if (!unlikely(READ_ONCE(sdev->fault.active)) ||
	    !srnic_fault_inject(sdev, SRNIC_FAULT_RX, skb))
		srnic_rx_deliver(sdev, skb);
	ib_device_put(&sdev->ibdev);
	return 0;
}

/* What a received packet queued to a QP carries in skb->cb. */
struct srnic_rx_cb {
	struct srnic_pkt pkt;		/* its parsed headers: srnic_skb_pkt() */
	bool icrc_unchecked;		/* see srnic_rx_icrc_checked() */
};

static_assert(sizeof(struct srnic_rx_cb) <= sizeof_field(struct sk_buff, cb));
static_assert(offsetof(struct srnic_rx_cb, pkt) == 0);

static struct srnic_rx_cb *srnic_skb_rx_cb(struct sk_buff *skb)
{
	return (struct srnic_rx_cb *)skb->cb;
}

/**
 * srnic_rx_deliver() - validate a received datagram and dispatch it
 * @sdev: the receiving device
 * @skb: the datagram, skb->data at the UDP header; consumed
 *
 * Context: softirq.
 */
void srnic_rx_deliver(struct srnic_dev *sdev, struct sk_buff *skb)
{
	enum srnic_counter verdict;
	struct srnic_pkt pkt;

	srnic_capture(sdev, skb, false);
	verdict = srnic_rx_validate(sdev, skb, &pkt);
	if (verdict != SRNIC_CNT_RX_PACKETS) {
		srnic_count(sdev, verdict);
		kfree_skb(skb);
		return;
	}
	srnic_rx_packet(sdev, skb, &pkt);	/* consumes skb */
}

/*
 * Check the ICRC of a packet not queued to a QP, and count it, as @qp's if
 * it names one: good (SRNIC_CNT_RX_PACKETS, then @verdict if that is a drop)
 * or not.
 */
static bool srnic_rx_count_checked(struct srnic_dev *sdev,
				   struct srnic_qp *qp, struct sk_buff *skb,
				   const struct srnic_pkt *pkt,
				   enum srnic_counter verdict)
{
	if (!srnic_icrc_ok(skb, pkt)) {
		srnic_count_for(sdev, qp, SRNIC_CNT_RX_DROP_BAD_ICRC, 1);
		return false;
	}
	srnic_count_for(sdev, qp, SRNIC_CNT_RX_PACKETS, 1);
	if (verdict != SRNIC_CNT_RX_PACKETS)
		srnic_count_for(sdev, qp, verdict, 1);
	return verdict == SRNIC_CNT_RX_PACKETS;
}

/**
 * srnic_rx_icrc_checked() - check the ICRC of a packet from a QP's queue
 * @qp: the QP
 * @skb: a packet srnic_rx_enqueue() queued to it
 *
 * A packet is queued before its ICRC is checked: the check, a pass over
 * the whole packet, runs in the QP's task, whoever runs it (for a QP whose
 * task may run in the receiving softirq, that softirq). Checked once;
 * counted then, as received or as dropped for its ICRC.
 *
 * Return: whether the packet is good; the caller frees a bad one.
 * Context: @qp's task, or under its receive queue's lock.
 */
bool srnic_rx_icrc_checked(struct srnic_qp *qp, struct sk_buff *skb)
{
	struct srnic_rx_cb *cb = srnic_skb_rx_cb(skb);

	if (!cb->icrc_unchecked)
		return true;
	cb->icrc_unchecked = false;
	if (!srnic_icrc_ok(skb, &cb->pkt)) {
		srnic_qp_count(qp, SRNIC_CNT_RX_DROP_BAD_ICRC);
		return false;
	}
	srnic_qp_count(qp, SRNIC_CNT_RX_PACKETS);
	return true;
}

/**
 * srnic_rx_dequeue() - the next good packet of a QP's receive queue
 * @qp: the QP
 *
 * Packets whose ICRC is wrong are counted and freed on the way.
 *
 * Return: the packet, or NULL when the queue is empty. Context: @qp's task.
 */
struct sk_buff *srnic_rx_dequeue(struct srnic_qp *qp)
{
	struct sk_buff *skb;

	while ((skb = skb_dequeue(&qp->rxq))) {
		if (srnic_rx_icrc_checked(qp, skb))
			return skb;
		kfree_skb(skb);
	}
	return NULL;
}

/*
 * Whether @qp takes @pkt: an opcode of the QP's type (XRC QPs: XRC
 * opcodes; requests for XRC_TGT, responses for XRC_INI), a state that
 * receives it, and for RC, UC and XRC the addresses of the QP's connection
 * (connected peers are identified by them). A UD QP takes datagrams from
 * anyone from RTR on; its task checks the Q_Key.
 */
static bool srnic_rx_qp_accepts(struct srnic_qp *qp, struct sk_buff *skb,
				const struct srnic_pkt *pkt)
{
	/* Pairs with the release in srnic_qp_enter_state(). */
	enum ib_qp_state state = smp_load_acquire(&qp->state);
	const struct srnic_path *path = &qp->path;
	enum ib_qp_type type = qp->ibqp.qp_type;
	u8 transport = type == IB_QPT_UC ? SRNIC_TRANSPORT_UC :
		       srnic_qp_is_xrc(qp) ? SRNIC_TRANSPORT_XRC :
		       SRNIC_TRANSPORT_RC;

	/* An XRC_INI QP only sends requests, an XRC_TGT QP only gets them. */
	if ((type == IB_QPT_XRC_INI && (pkt->flags & SRNIC_OPF_REQUEST)) ||
	    (type == IB_QPT_XRC_TGT && !(pkt->flags & SRNIC_OPF_REQUEST)))
		return false;
	if (srnic_qp_is_raw(qp))
		return false;	/* it gets frames, through flows */
	if (srnic_qp_is_ud(qp))
		return (pkt->opcode & SRNIC_OPCODE_TRANSPORT_MASK) ==
		       SRNIC_TRANSPORT_UD &&
		       (state == IB_QPS_RTR || state == IB_QPS_RTS ||
			state == IB_QPS_SQD || state == IB_QPS_SQE);
	if ((pkt->opcode & SRNIC_OPCODE_TRANSPORT_MASK) != transport)
		return false;
	if (state != IB_QPS_RTS && state != IB_QPS_SQD &&
	    state != IB_QPS_SQE &&
	    !(state == IB_QPS_RTR && (pkt->flags & SRNIC_OPF_REQUEST)))
		return false;
	if (path->ipv6)
		return skb->protocol == htons(ETH_P_IPV6) &&
		       ipv6_addr_equal(&ipv6_hdr(skb)->saddr, &path->daddr.v6) &&
		       ipv6_addr_equal(&ipv6_hdr(skb)->daddr, &path->saddr.v6);
	return skb->protocol == htons(ETH_P_IP) &&
	       ip_hdr(skb)->saddr == path->daddr.v4 &&
	       ip_hdr(skb)->daddr == path->saddr.v4;
}

/* Whether the IP header of @skb carries ECN's Congestion Experienced. */
static bool srnic_rx_ce(const struct sk_buff *skb)
{
	if (skb->protocol == htons(ETH_P_IP))
		return INET_ECN_is_ce(ipv4_get_dsfield(ip_hdr(skb)));
	return INET_ECN_is_ce(ipv6_get_dsfield(ipv6_hdr(skb)));
}

/* At most one CNP per QP in this long (DCQCN's notification period). */
#define SRNIC_CNP_INTERVAL_NS	(50 * NSEC_PER_USEC)

/*
 * A packet @qp took came with ECN's Congestion Experienced mark: a queue
 * on the way from its peer is filling. With ECN on, @qp answers as a DCQCN
 * notification point: a CNP to its peer QP (RoCEv2's opcode 0x81: BTH
 * with BECN set, PSN 0, 16 reserved bytes), at most one per
 * SRNIC_CNP_INTERVAL_NS, on @qp's path and not ECN-capable itself. A UD QP
 * has no peer to tell. Context: softirq.
 */
static void srnic_rx_congestion(struct srnic_dev *sdev, struct srnic_qp *qp)
{
	u32 len = srnic_opcode_hdr_len(SRNIC_OPF_CNP);
	struct srnic_bth *bth;
	struct sk_buff *skb;
	u64 now, last;

	srnic_qp_count(qp, SRNIC_CNT_NP_ECN_MARKED);
	if (!READ_ONCE(sdev->ecn) || srnic_qp_is_ud(qp))
		return;
	now = ktime_get_ns();
	last = READ_ONCE(qp->cnp_sent_ns);
	if ((last && now - last < SRNIC_CNP_INTERVAL_NS) ||
	    cmpxchg64(&qp->cnp_sent_ns, last, now) != last)
		return;
	skb = srnic_tx_alloc(sdev, len, GFP_ATOMIC);
	if (!skb) {
		srnic_qp_count(qp, SRNIC_CNT_TX_ERRORS);
		return;
	}
	memset(skb->data, 0, len);
	bth = (struct srnic_bth *)skb->data;
	bth->opcode = SRNIC_OPCODE(SRNIC_TRANSPORT_CNP, SRNIC_OP_CNP);
	bth->pkey = cpu_to_be16(SRNIC_DEFAULT_PKEY_FULL);
	bth->dqpn = cpu_to_be32(SRNIC_BTH_DQPN_BECN |
				(qp->attrs.dest_qp_num & SRNIC_QPN_MASK));
	if (srnic_tx_send(sdev, qp, skb, &qp->path, 0, len, NULL)) {
		srnic_qp_count(qp, SRNIC_CNT_TX_ERRORS);
	} else {
		trace_srnic_cnp(&sdev->ibdev, qp->ibqp.qp_num, true);
		srnic_qp_count(qp, SRNIC_CNT_NP_CNP_SENT);
	}
}

/*
 * A CNP: a notification point tells the QP it names that its packets met
 * congestion. Counted as handled when ECN is on and the QP is a connected
 * one of this device, whose requester then cuts its rate (srnic_rate.c),
 * else as ignored.
 */
static void srnic_rx_cnp(struct srnic_dev *sdev, struct sk_buff *skb,
			 const struct srnic_pkt *pkt)
{
	struct srnic_qp *qp;

	qp = READ_ONCE(sdev->ecn) ? srnic_qp_get_by_qpn(sdev, pkt->dqpn) : NULL;
	if (qp && srnic_qp_is_ud(qp)) {
		srnic_qp_put(qp);
		qp = NULL;
	}
	if (srnic_rx_count_checked(sdev, qp, skb, pkt, SRNIC_CNT_RX_PACKETS)) {
		trace_srnic_cnp(&sdev->ibdev, pkt->dqpn, false);
		/* The requester cuts its rate when it next runs. */
		if (qp)
			atomic_inc(&qp->req.rate.cnps);
		srnic_count_for(sdev, qp, qp ? SRNIC_CNT_RP_CNP_HANDLED :
					       SRNIC_CNT_RP_CNP_IGNORED, 1);
	}
	if (qp)
		srnic_qp_put(qp);
	kfree_skb(skb);
}

/**
 * srnic_rx_packet() - hand a validated packet to its QP
 * @sdev: the receiving device
 * @skb: the packet, skb->data at the BTH, all but its ICRC validated;
 *	 consumed
 * @pkt: its parsed headers
 *
 * The packet is queued to the destination QP, whose task checks
 * its ICRC (srnic_rx_icrc_checked()) and processes it; packets for no
 * QP, or one that cannot take them, have their ICRC checked here and are
 * counted and dropped. Multicast packets are checked before they are
 * copied to every member QP. Context: softirq.
 */
void srnic_rx_packet(struct srnic_dev *sdev, struct sk_buff *skb,
		     const struct srnic_pkt *pkt)
{
	enum srnic_counter verdict = SRNIC_CNT_RX_DROP_NO_QP;
	struct srnic_qp *qp;

	trace_srnic_packet_rx(&sdev->ibdev, 0, pkt->dqpn, pkt->opcode,
			      pkt->psn, pkt->payload_len);
	if (pkt->dqpn == SRNIC_MCAST_QPN) {
		if (srnic_rx_count_checked(sdev, NULL, skb, pkt,
					   SRNIC_CNT_RX_PACKETS))
			srnic_mcast_rx(sdev, skb, pkt);
		else
			kfree_skb(skb);
		return;
	}
	if (unlikely(pkt->flags & SRNIC_OPF_CNP)) {
		srnic_rx_cnp(sdev, skb, pkt);
		return;
	}
	qp = srnic_qp_get_by_qpn(sdev, pkt->dqpn);
	if (qp) {
		/* Read before the packet goes: its QP's task may free it. */
		bool ce = srnic_rx_ce(skb);

		verdict = srnic_rx_enqueue(qp, skb, pkt, false);
		if (verdict == SRNIC_CNT_RX_PACKETS) {
			if (unlikely(ce))
				srnic_rx_congestion(sdev, qp);
			srnic_qp_put(qp);
			return;
		}
	}
	srnic_rx_count_checked(sdev, qp, skb, pkt, verdict);
	kfree_skb(skb);
	if (qp)
		srnic_qp_put(qp);
}

/*
 * A request message that begins less than this after the QP's previous
 * request message ended, with nothing posted by the QP in between,
 * continues a stream; one that begins later stands alone. Not the
 * doorbells' stream window (srnic_engine_stream_ns(), the longest polling
 * window, up to milliseconds): that would take a ping-pong between hosts
 * for a stream.
 */
#define SRNIC_RX_STREAM_GAP_NS	(100 * NSEC_PER_USEC)

/*
 * Does @pkt, just queued on @qp, continue a stream of request messages the
 * QP does not answer? Then its engine takes the packets, on its own CPU,
 * rather than this softirq, which a veth runs on the sender's CPU. An
 * answered message (a ping-pong, a bidirectional stream), responses, and a
 * request that comes a round trip after the last (a READ or WRITE
 * ping-pong between hosts: the responder posts nothing) are processed
 * right here. Only the first and last packets of a request read the clock.
 */
static bool srnic_rx_continues_stream(struct srnic_qp *qp,
				      const struct srnic_pkt *pkt)
{
	bool stream = false;
	u64 now;

	if (!(pkt->flags & SRNIC_OPF_REQUEST) ||
	    !(pkt->flags & (SRNIC_OPF_FIRST | SRNIC_OPF_LAST)))
		return false;
	now = ktime_get_ns();
	if (pkt->flags & SRNIC_OPF_FIRST) {
		if (now - READ_ONCE(qp->rx_request_end_ns) >
		    SRNIC_RX_STREAM_GAP_NS)
			atomic_set(&qp->rx_unanswered, 0);
		stream = atomic_inc_return(&qp->rx_unanswered) > 1;
	}
	if (pkt->flags & SRNIC_OPF_LAST)
		WRITE_ONCE(qp->rx_request_end_ns, now);
	return stream;
}

/**
 * srnic_rx_enqueue() - queue a validated packet for a QP's task
 * @qp: the destination QP, referenced by the caller
 * @skb: the packet, skb->data at the BTH; queued on success, else left to
 *	 the caller
 * @pkt: its parsed headers
 * @icrc_checked: the ICRC is checked and the packet counted already, else
 *	the QP's task does both (srnic_rx_icrc_checked())
 *
 * The task runs right here when it may run without sleeping
 * (srnic_engine_task_kick(): a kernel QP's but XRC_TGT's, a user UD QP's,
 * a user RC, UC or XRC_INI one's reached over the wire), as rxe's
 * responder runs in the receiving softirq: one budget of the QP's work per
 * packet, within the budget NAPI gives the softirq; otherwise, and for a
 * stream of requests the QP does not answer, its engine runs it.
 *
 * Return: SRNIC_CNT_RX_PACKETS when queued, else the drop counter
 * (the QP does not take the packet, or its queue is full). Context: softirq.
 */
enum srnic_counter srnic_rx_enqueue(struct srnic_qp *qp, struct sk_buff *skb,
				    const struct srnic_pkt *pkt,
				    bool icrc_checked)
{
	struct srnic_rx_cb *cb = srnic_skb_rx_cb(skb);

	if (!srnic_rx_qp_accepts(qp, skb, pkt))
		return SRNIC_CNT_RX_DROP_BAD_QP;
	/*
	 * Payload in page fragments stays there (srnic's own packets carry
	 * the sender's pages: srnic_tx_attach(), srnic_pkt_scatter()); a
	 * frag list is made linear.
	 */
	if (skb_queue_len_lockless(&qp->rxq) >= SRNIC_RXQ_MAX ||
	    (skb_has_frag_list(skb) && skb_linearize(skb)))
		return SRNIC_CNT_RX_DROP_QUEUE_FULL;
	cb->pkt = *pkt;
	cb->icrc_unchecked = !icrc_checked;
	skb_queue_tail(&qp->rxq, skb);
	if (srnic_rx_continues_stream(qp, pkt))
		srnic_engine_task_schedule(&qp->task);
	else
		srnic_engine_task_kick(&qp->task);
	return SRNIC_CNT_RX_PACKETS;
}

/* ---- Transmit ------------------------------------------------------- */

/* Room in front of the transport headers: link layer, IP, UDP. */
static unsigned int srnic_tx_headroom(const struct srnic_dev *sdev)
{
	return LL_RESERVED_SPACE(sdev->ndev) + sizeof(struct ipv6hdr) +
	       sizeof(struct udphdr);
}

/*
 * The skb of one packet, its data in a page fragment of the per-CPU cache
 * drivers build received packets in (netdev_alloc_frag(), build_skb()):
 * a full 4 KiB-MTU packet does not fit an order-0 page with its
 * skb_shared_info, and kmalloc() of it (8 KiB objects, order-3 slabs,
 * mostly freed on the receiving CPU) cost more than everything else of a
 * packet's transmission together (measured under TCG: 132 us of 232).
 */
static struct sk_buff *srnic_tx_alloc_frag(unsigned int size)
{
	unsigned int truesize = SKB_DATA_ALIGN(size) +
				SKB_DATA_ALIGN(sizeof(struct skb_shared_info));
	struct sk_buff *skb;
	void *data;

	/* The most the fragment cache hands out (its compound page). */
	if (truesize > PAGE_FRAG_CACHE_MAX_SIZE)
		return NULL;
	data = netdev_alloc_frag(truesize);
	if (!data)
		return NULL;
	skb = build_skb(data, truesize);
	if (!skb)
		skb_free_frag(data);
	return skb;
}

/**
 * srnic_tx_alloc() - an skb for one outgoing packet
 * @sdev: the sending device
 * @transport_len: bytes of transport headers and payload the caller will
 *		   write at skb->data (skb_put() already done for them)
 * @gfp: allocation context, for the fallback when no page fragment is
 *	 free (fragments are taken without sleeping)
 *
 * Return: the skb, linear, or NULL.
 */
struct sk_buff *srnic_tx_alloc(struct srnic_dev *sdev,
			       unsigned int transport_len, gfp_t gfp)
{
	unsigned int headroom = srnic_tx_headroom(sdev);
	unsigned int size = headroom + transport_len + SRNIC_ICRC_SIZE;
	struct sk_buff *skb;

	skb = srnic_tx_alloc_frag(size);
	if (!skb)
		skb = alloc_skb(size, gfp);
	if (!skb)
		return NULL;
	skb_reserve(skb, headroom);
	skb_put(skb, transport_len);
	return skb;
}

static struct dst_entry *srnic_route4(struct srnic_dev *sdev,
				      const struct srnic_path *path)
{
	struct flowi4 fl = {
		.flowi4_oif = sdev->ndev->ifindex,
		.flowi4_proto = IPPROTO_UDP,
		.saddr = path->saddr.v4,
		.daddr = path->daddr.v4,
	};
	struct rtable *rt;

	rt = ip_route_output_key(read_pnet(&sdev->net), &fl);
	return IS_ERR(rt) ? ERR_CAST(rt) : &rt->dst;
}

static struct dst_entry *srnic_route6(struct srnic_dev *sdev,
				      const struct srnic_path *path)
{
	struct net *net = read_pnet(&sdev->net);
	struct flowi6 fl = {
		.flowi6_oif = sdev->ndev->ifindex,
		.flowi6_proto = IPPROTO_UDP,
		.saddr = path->saddr.v6,
		.daddr = path->daddr.v6,
	};
	struct dst_entry *dst;

	if (!IS_ENABLED(CONFIG_IPV6) || !ipv6_mod_enabled())
		return ERR_PTR(-EAFNOSUPPORT);
	dst = srnic_ip6_dst_lookup_flow(net, &fl);
	if (!IS_ERR(dst) && dst->error) {
		int err = dst->error;

		dst_release(dst);
		return ERR_PTR(err);
	}
	return dst;
}

/*
 * The route of @path: from its route cache, if it has one (per CPU; the
 * cache's dst_check() drops a route that routing changes made stale),
 * else looked up, and then kept there.
 */
static struct dst_entry *srnic_route(struct srnic_dev *sdev,
				     const struct srnic_path *path)
{
	struct dst_cache *cache = path->route_cache;
	struct dst_entry *dst;

	if (cache) {
		/* The cache is per CPU: no softirq may use it meanwhile. */
		local_bh_disable();
		dst = dst_cache_get(cache);
		local_bh_enable();
		if (dst)
			return dst;
	}
	dst = path->ipv6 ? srnic_route6(sdev, path) : srnic_route4(sdev, path);
	if (!cache || IS_ERR(dst))
		return dst;
	local_bh_disable();
	if (!path->ipv6)
		dst_cache_set_ip4(cache, dst, path->saddr.v4);
#if IS_ENABLED(CONFIG_IPV6)
	else
		dst_cache_set_ip6(cache, dst, &path->saddr.v6);
#endif
	local_bh_enable();
	return dst;
}

static void srnic_push_udp(struct sk_buff *skb, const struct srnic_path *path,
			   __be16 sport)
{
	struct udphdr *udph;

	__skb_push(skb, sizeof(*udph));
	skb_reset_transport_header(skb);
	udph = udp_hdr(skb);
	udph->source = sport;
	udph->dest = htons(SRNIC_ROCE_V2_UDP_PORT);
	udph->len = htons(skb->len);
	udph->check = 0;	/* the ICRC protects the datagram */
}

/*
 * @batch: the batch @skb joins (its IPv4 ID is then the one the batch's
 * segmentation will give it), or NULL
 */
static void srnic_push_ipv4(struct sk_buff *skb, struct net *net,
			    const struct srnic_path *path, u8 tclass,
			    const struct srnic_tx_batch *batch)
{
	struct iphdr *iph;

	memset(IPCB(skb), 0, sizeof(*IPCB(skb)));
	__skb_push(skb, sizeof(*iph));
	skb_reset_network_header(skb);
	iph = ip_hdr(skb);
	iph->version = IPVERSION;
	iph->ihl = sizeof(*iph) / 4;
	iph->tos = tclass;
	iph->tot_len = htons(skb->len);
	iph->frag_off = htons(IP_DF);
	iph->ttl = path->hop_limit;
	iph->protocol = IPPROTO_UDP;
	iph->saddr = path->saddr.v4;
	iph->daddr = path->daddr.v4;
	if (batch)
		iph->id = htons(ntohs(ip_hdr(batch->head)->id) + batch->count);
	else
		__ip_select_ident(net, iph, 1);
	skb->protocol = htons(ETH_P_IP);
}

static void srnic_push_ipv6(struct sk_buff *skb, const struct srnic_path *path,
			    u8 tclass)
{
	struct ipv6hdr *ip6h;

	memset(IP6CB(skb), 0, sizeof(*IP6CB(skb)));
	__skb_push(skb, sizeof(*ip6h));
	skb_reset_network_header(skb);
	ip6h = ipv6_hdr(skb);
	ip6_flow_hdr(ip6h, tclass, htonl(path->flow_label));
	ip6h->payload_len = htons(skb->len - sizeof(*ip6h));
	ip6h->nexthdr = IPPROTO_UDP;
	ip6h->hop_limit = path->hop_limit;
	ip6h->saddr = path->saddr.v6;
	ip6h->daddr = path->daddr.v6;
	skb->protocol = htons(ETH_P_IPV6);
}

/*
 * Hand a packet built for a destination GID of another srnic device of the
 * namespace (or of @sdev itself) to that device's receive path, as the
 * wire would: IP routing between two local addresses goes over lo, whose
 * packets name no srnic device.
 */
static int srnic_tx_local(struct srnic_dev *sdev, struct srnic_qp *qp,
			  struct sk_buff *skb, int ifindex)
{
	struct net_device *ndev;
	struct srnic_dev *ddev;

	rcu_read_lock();
	ndev = dev_get_by_index_rcu(read_pnet(&sdev->net), ifindex);
	ddev = ndev ? srnic_dev_get_by_netdev(ndev) : NULL;
	rcu_read_unlock();
	if (!ddev) {
		kfree_skb(skb);
		return -ENETUNREACH;
	}
	srnic_count_for(sdev, qp, SRNIC_CNT_TX_PACKETS, 1);
	skb->dev = ddev->ndev;
	skb->pkt_type = PACKET_HOST;
	/* What ip_local_out() would have filled in (UD GRHs show it). */
	if (skb->protocol == htons(ETH_P_IP))
		ip_send_check(ip_hdr(skb));
	/* As encap_rcv sees a datagram: data at the UDP header. */
	__skb_pull(skb, skb_transport_offset(skb));
	local_bh_disable();
	srnic_rx_deliver(ddev, skb);
	local_bh_enable();
	ib_device_put(&ddev->ibdev);
	return 0;
}

/*
 * Room for the ICRC after a payload attached as page fragments
 * (srnic_tx_attach()): a small fragment of its own, as nothing can follow
 * fragments in the linear part.
 */
static __le32 *srnic_tx_put_icrc_frag(struct sk_buff *skb)
{
	unsigned int i = skb_shinfo(skb)->nr_frags;
	struct page *page;
	void *data;

	if (i >= MAX_SKB_FRAGS)
		return NULL;
	data = netdev_alloc_frag(SMP_CACHE_BYTES);
	if (!data)
		return NULL;
	page = virt_to_head_page(data);
	skb_fill_page_desc(skb, i, page, data - page_address(page),
			   SRNIC_ICRC_SIZE);
	skb_len_add(skb, SRNIC_ICRC_SIZE);
	skb->truesize += SMP_CACHE_BYTES - SRNIC_ICRC_SIZE;
	return data;
}

static bool tx_batch = true;
module_param(tx_batch, bool, 0644);
MODULE_PARM_DESC(tx_batch,
		 "Hand consecutive packets of a QP to the IP layer as one UDP GSO skb (default on)");

/* Packets in one batch at most (and what the egress netdev takes). */
#define SRNIC_TX_BATCH_MAX_PACKETS 16

/*
 * Can a packet for @path of @transport_len bytes (BTH to payload) join
 * @batch? The batch must stay one IP datagram's length and within what
 * the egress netdev takes as one GSO skb.
 */
static bool srnic_tx_batch_fits(const struct srnic_tx_batch *batch,
				const struct srnic_path *path, __be16 sport,
				unsigned int transport_len)
{
	const struct sk_buff *head = batch->head;
	const struct net_device *dev = skb_dst(head)->dev;
	unsigned int len = skb_transport_offset(head) + sizeof(struct udphdr) +
			   transport_len + SRNIC_ICRC_SIZE;
	unsigned int max_len = min_t(unsigned int, IP_MAX_MTU,
				     READ_ONCE(dev->gso_max_size));
	unsigned int max_packets = min_t(unsigned int,
					 SRNIC_TX_BATCH_MAX_PACKETS,
					 READ_ONCE(dev->gso_max_segs));

	return path == batch->path && sport == batch->sport &&
	       batch->count < max_packets &&
	       head->len + len < max_len;
}

/* Put a complete packet at the end of @batch (its frag_list). */
static void srnic_tx_batch_add(struct srnic_tx_batch *batch,
			       struct sk_buff *skb)
{
	struct sk_buff *head = batch->head;

	if (batch->tail)
		batch->tail->next = skb;
	else
		skb_shinfo(head)->frag_list = skb;
	batch->tail = skb;
	batch->count++;
	head->len += skb->len;
	head->data_len += skb->len;
	head->truesize += skb->truesize;
}

/**
 * srnic_tx_batch_flush() - hand a batch's packets to the IP layer
 * @sdev: the sending device
 * @batch: the batch; empty afterwards
 *
 * Several packets go as one skb of type SKB_GSO_UDP_L4 | SKB_GSO_FRAGLIST,
 * as UDP's GRO builds one: the head is the first packet, the others hang
 * on its frag_list, each with its own IP and UDP headers and ICRC. The
 * stack segments it where needed (skb_segment_list(): no copy) and each
 * segment is then exactly the packet srnic built: inet_gso_segment()
 * numbers IPv4 IDs from the head's on, as srnic_push_ipv4() did, and
 * sets each segment's IP length, the head's UDP length is its own again
 * (gso_size), the others keep theirs. A veth passes the batch whole; the
 * receiving socket's stack splits it in front of encap_rcv
 * (udp_unexpected_gso()), srnic's as rxe's.
 *
 * Return: 0, or the IP layer's negative errno; then @batch->lost_psn is
 * the PSN of its first packet: none of them left.
 */
int srnic_tx_batch_flush(struct srnic_dev *sdev, struct srnic_tx_batch *batch)
{
	struct sk_buff *head = batch->head;
	struct udphdr *udph;

	if (!head)
		return 0;
	udph = udp_hdr(head);
	batch->lost_psn = srnic_bth_psn((const struct srnic_bth *)(udph + 1));
	if (batch->count > 1) {
		struct skb_shared_info *shinfo = skb_shinfo(head);

		shinfo->gso_size = ntohs(udph->len) - sizeof(*udph);
		shinfo->gso_type = SKB_GSO_UDP_L4 | SKB_GSO_FRAGLIST;
		shinfo->gso_segs = batch->count;
		udph->len = htons(head->len - skb_transport_offset(head));
		/*
		 * No checksum to offload (the UDP checksum is 0): on output
		 * that is CHECKSUM_NONE or CHECKSUM_UNNECESSARY, and GSO
		 * takes only the latter (netif_needs_gso()).
		 */
		head->ip_summed = CHECKSUM_UNNECESSARY;
	}
	batch->head = NULL;
	batch->tail = NULL;
	batch->count = 0;
	return srnic_tx_output(sdev, batch->qp, head);
}

/*
 * The traffic class a packet goes out with: its path's, and with ECN on
 * ECT(0) for the packets of a connected QP (RC, UC, XRC) whose class
 * leaves the ECN field to the transport, as RoCE NICs with ECN on send
 * them; CNPs and datagrams (whose GRH the receiver sees) as they are.
 */
static u8 srnic_tx_tclass(struct srnic_dev *sdev,
			  const struct srnic_path *path, u8 opcode)
{
	u8 transport = opcode & SRNIC_OPCODE_TRANSPORT_MASK;
	u8 tclass = path->traffic_class;

	if (READ_ONCE(sdev->ecn) && !(tclass & INET_ECN_MASK) &&
	    (transport == SRNIC_TRANSPORT_RC || transport == SRNIC_TRANSPORT_UC ||
	     transport == SRNIC_TRANSPORT_XRC))
		tclass |= INET_ECN_ECT_0;
	return tclass;
}

/*
 * Put the ICRC and the UDP and IP headers around the transport packet at
 * @skb->data (@transport_hdr_len bytes of BTH and extension headers, then
 * the payload): skb->data ends at the IP header. @join: the batch it joins,
 * or NULL. Returns 0, or -ENOMEM when there is no room for the ICRC.
 */
static int srnic_tx_encap(struct srnic_dev *sdev, struct sk_buff *skb,
			  const struct srnic_path *path, __be16 sport,
			  u32 transport_hdr_len,
			  const struct srnic_tx_batch *join)
{
	unsigned int transport_len = skb->len;
	__le32 *icrc;
	u8 tclass;
	u32 crc;

	icrc = skb_is_nonlinear(skb) ? srnic_tx_put_icrc_frag(skb) :
				       skb_put(skb, SRNIC_ICRC_SIZE);
	if (!icrc)
		return -ENOMEM;
	tclass = srnic_tx_tclass(sdev, path, skb->data[0]);
	srnic_push_udp(skb, path, sport);
	if (path->ipv6)
		srnic_push_ipv6(skb, path, tclass);
	else
		srnic_push_ipv4(skb, read_pnet(&sdev->net), path, tclass, join);

	/* The ICRC covers the IP and UDP headers just built. */
	crc = srnic_icrc_headers(skb_network_header(skb), path->ipv6,
				 skb_transport_header(skb) +
				 sizeof(struct udphdr), transport_hdr_len);
	crc = srnic_skb_crc32(skb, skb_transport_offset(skb) +
			      sizeof(struct udphdr) + transport_hdr_len,
			      transport_len - transport_hdr_len, crc);
	*icrc = srnic_icrc_finish(crc);
	return 0;
}

/**
 * srnic_tx_capture_local() - show a packet of a local delivery
 * @sdev: the sending device
 * @skb: a transport packet built as srnic_tx_send() takes it: consumed,
 *	 never sent
 * @path: its path's addresses
 * @sport: its UDP source port, or 0 for @path's
 * @transport_hdr_len: bytes of BTH and extension headers at skb->data
 * @ifindex: the netdev of the destination's srnic device
 *
 * Local delivery executes a message without packets (srnic_local.c); while
 * a capture netdev listens, its requester builds the packets the message
 * would have been, and this shows each as sent on @sdev's capture netdev
 * and as received on the destination device's.
 */
void srnic_tx_capture_local(struct srnic_dev *sdev, struct sk_buff *skb,
			    const struct srnic_path *path, __be16 sport,
			    u32 transport_hdr_len, int ifindex)
{
	struct net_device *ndev;
	struct srnic_dev *ddev;

	if (srnic_tx_encap(sdev, skb, path, sport ? sport : path->sport,
			   transport_hdr_len, NULL))
		goto out;
	if (skb->protocol == htons(ETH_P_IP))
		ip_send_check(ip_hdr(skb));
	srnic_capture(sdev, skb, true);
	rcu_read_lock();
	ndev = dev_get_by_index_rcu(read_pnet(&sdev->net), ifindex);
	ddev = ndev ? srnic_dev_get_by_netdev(ndev) : NULL;
	rcu_read_unlock();
	if (ddev) {
		__skb_pull(skb, skb_transport_offset(skb));
		srnic_capture(ddev, skb, false);
		ib_device_put(&ddev->ibdev);
	}
out:
	consume_skb(skb);
}

/**
 * srnic_tx_send() - checksum, encapsulate and send one packet
 * @sdev: the sending device
 * @qp: the QP it comes from (whose counters count it), or NULL
 * @skb: from srnic_tx_alloc(), skb->data at the BTH; consumed
 * @path: addresses and header fields of the destination; with
 *	  local_ifindex set, the packet goes to that srnic device's receive
 *	  path directly
 * @sport: UDP source port, or 0 for @path's (a requester spraying its
 *	   packets over paths, srnic_req.c)
 * @transport_hdr_len: bytes of BTH and extension headers at skb->data
 * @batch: NULL to hand the packet to the IP layer now; else the batch it
 *	   joins, or starts after the batch went (when it does not fit).
 *	   Packets to a local srnic device and packets under fault
 *	   injection are not batched: the batch goes first.
 *
 * Return: 0, or a negative errno when no route exists or the IP layer
 * refused the packet (the caller treats either as loss). With @batch, an
 * error may be the batch's that went first (see @batch->lost_psn); the
 * packet is then lost too.
 */
int srnic_tx_send(struct srnic_dev *sdev, struct srnic_qp *qp,
		  struct sk_buff *skb, const struct srnic_path *path,
		  __be16 sport, u32 transport_hdr_len,
		  struct srnic_tx_batch *batch)
{
	u32 psn = srnic_bth_psn((const struct srnic_bth *)skb->data);
	unsigned int transport_len = skb->len;
	struct srnic_tx_batch *join = NULL;
	struct dst_entry *dst = NULL;
	bool batched;
	int err;

	if (!sport)
		sport = path->sport;
	batched = batch && READ_ONCE(tx_batch) && !path->local_ifindex &&
		  !unlikely(READ_ONCE(sdev->fault.active));
	if (batched && batch->head &&
	    srnic_tx_batch_fits(batch, path, sport, transport_len)) {
		join = batch;
	} else if (batch && batch->head) {
		err = srnic_tx_batch_flush(sdev, batch);
		if (err) {
			kfree_skb(skb);
			return err;
		}
	}

	if (!path->local_ifindex && !join) {
		dst = srnic_route(sdev, path);
		if (IS_ERR(dst)) {
			kfree_skb(skb);
			return PTR_ERR(dst);
		}
	}

	if (srnic_tx_encap(sdev, skb, path, sport, transport_hdr_len, join)) {
		if (dst)
			dst_release(dst);
		kfree_skb(skb);
		return -ENOMEM;
	}
	srnic_capture(sdev, skb, true);

	if (join) {
		srnic_tx_batch_add(join, skb);
		return 0;
	}
	if (!dst)
		return srnic_tx_local(sdev, qp, skb, path->local_ifindex);
	skb_dst_set(skb, dst);
	skb->dev = dst->dev;
	if (batched) {
		batch->head = skb;
		batch->path = path;
		batch->sport = sport;
		batch->count = 1;
		batch->qp = qp;
		return 0;
	}
	if (unlikely(READ_ONCE(sdev->fault.active)) &&
	    srnic_fault_inject(sdev, SRNIC_FAULT_TX, skb))
		return 0;	/* lost or held, as on a real wire */
	err = srnic_tx_output(sdev, qp, skb);
	if (err && batch)
		batch->lost_psn = psn;
	return err;
}

/**
 * srnic_tx_output() - hand a complete packet to the IP layer
 * @sdev: the sending device
 * @qp: the QP it comes from (whose counters count it), or NULL
 * @skb: from srnic_tx_send(), its route set; consumed
 *
 * Return: 0, or the IP layer's negative errno (-ENOBUFS: a queue on the
 * way was full and dropped it).
 */
int srnic_tx_output(struct srnic_dev *sdev, struct srnic_qp *qp,
		    struct sk_buff *skb)
{
	struct net *net = read_pnet(&sdev->net);
	/* A batch (srnic_tx_batch_flush()) holds several packets. */
	unsigned int packets = skb_is_gso(skb) ? skb_shinfo(skb)->gso_segs : 1;
	int err;

	if (skb->protocol == htons(ETH_P_IPV6))
		err = ip6_local_out(net, NULL, skb);
	else
		err = ip_local_out(net, NULL, skb);
	err = net_xmit_eval(err);
	/* NET_XMIT_DROP: e.g. a veth peer's backlog is full. */
	if (err > 0)
		err = -ENOBUFS;
	if (err)
		return err;
	srnic_count_for(sdev, qp, SRNIC_CNT_TX_PACKETS, packets);
	if (packets > 1)
		srnic_count_for(sdev, qp, SRNIC_CNT_TX_BATCHES, 1);
	return 0;
}

/* ---- Sockets -------------------------------------------------------- */

static struct socket *srnic_udp_sock_open(struct net *net, bool ipv6)
{
	struct udp_tunnel_sock_cfg tunnel_cfg = {
		.encap_type = 1,
		.encap_rcv = srnic_udp_encap_recv,
	};
	struct udp_port_cfg port_cfg = {
		.family = ipv6 ? AF_INET6 : AF_INET,
		.ipv6_v6only = ipv6,
		.local_udp_port = htons(SRNIC_ROCE_V2_UDP_PORT),
	};
	struct socket *sock;
	int err;

	err = udp_sock_create(net, &port_cfg, &sock);
	if (err)
		return ERR_PTR(err);
	srnic_udp_tunnel_setup(net, sock, &tunnel_cfg);
	return sock;
}

static void srnic_net_close_sockets(struct srnic_net *snet)
{
	if (snet->sock6)
		srnic_udp_tunnel_release(snet->sock6);
	if (snet->sock4)
		srnic_udp_tunnel_release(snet->sock4);
	snet->sock4 = NULL;
	snet->sock6 = NULL;
}

/*
 * Say in the kernel log who holds UDP port 4791 in @net, where srnic could
 * not bind it (@err): "Address already in use" alone, all that `rdma link
 * add` prints, names neither the port nor the namespace nor the holder. A
 * kernel RoCE v2 stack's socket is known by its receive hook (rdma_rxe's
 * is rxe_udp_encap_recv), a process's has none.
 */
static void srnic_net_report_bind_error(struct net *net, bool ipv6, int err)
{
	const char *where = net_eq(net, &init_net) ? " (init_net)" : "";
	int (*hook)(struct sock *sk, struct sk_buff *skb) = NULL;
	struct sock *sk = NULL;

	if (err != -EADDRINUSE) {
		pr_err("%s: cannot open UDP port %u (RoCE v2, %s) in network namespace %u%s: error %d\n",
		       SRNIC_DRIVER_NAME, SRNIC_ROCE_V2_UDP_PORT, ipv6 ? "IPv6" : "IPv4",
		       net->ns.inum, where, err);
		return;
	}
	if (!ipv6) {
		rcu_read_lock();
		sk = udp4_lib_lookup(net, 0, 0, htonl(INADDR_ANY),
				     htons(SRNIC_ROCE_V2_UDP_PORT), 0);
		rcu_read_unlock();
	}
	if (sk) {
		hook = READ_ONCE(udp_sk(sk)->encap_rcv);
		sock_put(sk);
	}
	if (hook)
		pr_err("%s: UDP port %u (RoCE v2) is held in network namespace %u%s by another kernel RoCE v2 stack (its receive hook: %ps): unload it (rmmod rdma_rxe), or give srnic a netdev in another namespace\n",
		       SRNIC_DRIVER_NAME, SRNIC_ROCE_V2_UDP_PORT, net->ns.inum, where, hook);
	else
		pr_err("%s: UDP port %u (RoCE v2, %s) is held in network namespace %u%s by a socket of a process (ss -ulpn sport = :%u names it): close it, or give srnic a netdev in another namespace\n",
		       SRNIC_DRIVER_NAME, SRNIC_ROCE_V2_UDP_PORT, ipv6 ? "IPv6" : "IPv4",
		       net->ns.inum, where, SRNIC_ROCE_V2_UDP_PORT);
}

/**
 * srnic_net_get() - a device joins @net: open its sockets if first
 * @net: the namespace of the device's netdev
 *
 * Return: 0, or the error of opening a socket, e.g. -EADDRINUSE when
 * another RoCEv2 stack (rdma_rxe in init_net) holds port 4791.
 */
int srnic_net_get(struct net *net)
{
	struct srnic_net *snet = srnic_net(net);
	struct socket *sock;
	int err = 0;

	mutex_lock(&snet->lock);
	if (snet->users++)
		goto out;

	sock = srnic_udp_sock_open(net, false);
	if (IS_ERR(sock)) {
		err = PTR_ERR(sock);
		srnic_net_report_bind_error(net, false, err);
		goto err_undo;
	}
	snet->sock4 = sock;
	/* A namespace or kernel without IPv6 still gets IPv4. */
	if (IS_ENABLED(CONFIG_IPV6) && ipv6_mod_enabled()) {
		sock = srnic_udp_sock_open(net, true);
		if (IS_ERR(sock)) {
			err = PTR_ERR(sock);
			srnic_net_report_bind_error(net, true, err);
			goto err_undo;
		}
		snet->sock6 = sock;
	}
	goto out;

err_undo:
	srnic_net_close_sockets(snet);
	snet->users--;
out:
	mutex_unlock(&snet->lock);
	return err;
}

/**
 * srnic_net_put() - a device leaves @net: close its sockets if last
 * @net: the namespace passed to srnic_net_get()
 */
void srnic_net_put(struct net *net)
{
	struct srnic_net *snet = srnic_net(net);

	mutex_lock(&snet->lock);
	if (!WARN_ON(!snet->users) && !--snet->users)
		srnic_net_close_sockets(snet);
	mutex_unlock(&snet->lock);
}

static int __net_init srnic_net_init(struct net *net)
{
	mutex_init(&srnic_net(net)->lock);
	return 0;
}

/*
 * Namespace teardown runs device exits first: a deleted netdev (veth)
 * waited for its device's netdev reference, so that device is gone, but a
 * physical netdev moved back to init_net only queued its device's
 * unregistration. Finish those before the sockets and this state go.
 */
static void __net_exit srnic_net_exit(struct net *net)
{
	srnic_unregister_devices(net);
	WARN_ON(srnic_net(net)->users);
}

static struct pernet_operations srnic_net_ops = {
	.init = srnic_net_init,
	.exit = srnic_net_exit,
	.id = &srnic_net_id,
	.size = sizeof(struct srnic_net),
};

int srnic_net_register(void)
{
	return register_pernet_subsys(&srnic_net_ops);
}

void srnic_net_unregister(void)
{
	unregister_pernet_subsys(&srnic_net_ops);
}
