// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: packet fault injection, so applications (and srnic's own tests)
 * can be run under loss, duplication, reordering, delay and corruption.
 *
 * Per device, in debugfs (/sys/kernel/debug/srnic/link<N>/fault/):
 *
 *   tx_drop tx_duplicate tx_reorder tx_delay tx_corrupt
 *   rx_drop rx_duplicate rx_reorder rx_delay rx_corrupt
 *	probability of the fault per packet, in parts per million (0: off)
 *   delay_us	how long a delayed packet is held (reordered: up to that)
 *   seed	writing it restarts the pseudo-random sequence from it
 *   injected	read-only: how many faults of each kind were injected
 *
 * Transmit faults apply to every RoCEv2 packet the device sends, after its
 * ICRC is computed; receive faults to every UDP/4791 datagram the device
 * receives, before it is validated. A corrupted packet has one bit flipped
 * after the UDP header, so its ICRC check drops it (rx_drop_bad_icrc). A
 * duplicated packet is sent or received twice. A delayed packet is held
 * for delay_us, a reordered one for a random time up to delay_us, so later
 * packets overtake it. Faults of one packet are drawn in the order drop,
 * corrupt, duplicate, delay, reorder; a dropped packet gets no other.
 *
 * All off (the default) costs one predictable branch per packet.
 */

#include <linux/debugfs.h>
#include <linux/ktime.h>
#include <linux/prandom.h>
#include <linux/skbuff.h>
#include <linux/slab.h>
#include <linux/udp.h>

#include "srnic.h"

/* Packets held for delay or reordering per direction, at most. */
#define SRNIC_FAULT_MAX_HELD 4096
#define SRNIC_FAULT_PPM 1000000

static const char * const srnic_fault_dir_names[SRNIC_FAULT_NUM_DIRS] = {
	[SRNIC_FAULT_TX] = "tx",
	[SRNIC_FAULT_RX] = "rx",
};

static const char * const srnic_fault_kind_names[SRNIC_FAULT_NUM_KINDS] = {
	[SRNIC_FAULT_DROP] = "drop",
	[SRNIC_FAULT_CORRUPT] = "corrupt",
	[SRNIC_FAULT_DUPLICATE] = "duplicate",
	[SRNIC_FAULT_DELAY] = "delay",
	[SRNIC_FAULT_REORDER] = "reorder",
};

/* Whether @kind hits this packet; draws from the device's sequence. */
static bool srnic_fault_hit(struct srnic_fault *f, enum srnic_fault_dir dir,
			    enum srnic_fault_kind kind, u32 *rnd)
{
	u32 ppm = READ_ONCE(f->ppm[dir][kind]);
	unsigned long flags;
	u32 r;

	if (!ppm)
		return false;
	spin_lock_irqsave(&f->lock, flags);
	r = prandom_u32_state(&f->rnd);
	if (rnd)
		*rnd = prandom_u32_state(&f->rnd);
	spin_unlock_irqrestore(&f->lock, flags);
	if (r % SRNIC_FAULT_PPM >= ppm)
		return false;
	atomic64_inc(&f->injected[dir][kind]);
	return true;
}

/* Flip one bit after the UDP header (at skb->data + @offset on). */
static void srnic_fault_corrupt(struct sk_buff *skb, unsigned int offset,
				u32 rnd)
{
	unsigned int at;

	if (skb->len <= offset || skb_ensure_writable(skb, skb->len))
		return;
	at = offset + rnd % (skb->len - offset);
	skb->data[at] ^= 1 << (rnd >> 29);
}

/*
 * Fire the direction's timer at @release_ns (at the next tick if that
 * passed already: a negative delay made unsigned would arm it for
 * centuries, and every packet held behind it would never leave).
 */
static void srnic_fault_arm(struct srnic_fault *f, enum srnic_fault_dir dir,
			    u64 release_ns)
{
	u64 now = ktime_get_ns();
	u64 wait = release_ns > now ? release_ns - now : 0;

	mod_timer(&f->timer[dir], jiffies + nsecs_to_jiffies(wait) + 1);
}

/* Hold @skb until @release_ns; false if too many are held (dropped). */
static bool srnic_fault_hold(struct srnic_fault *f, enum srnic_fault_dir dir,
			     struct sk_buff *skb, u64 release_ns)
{
	struct sk_buff_head *q = &f->held[dir];
	struct sk_buff *pos;
	unsigned long flags;

	skb->tstamp = ns_to_ktime(release_ns);
	spin_lock_irqsave(&q->lock, flags);
	if (skb_queue_len(q) >= SRNIC_FAULT_MAX_HELD || f->stopped) {
		spin_unlock_irqrestore(&q->lock, flags);
		return false;
	}
	/* Keep the queue sorted by release time. */
	skb_queue_reverse_walk(q, pos)
		if (ktime_to_ns(pos->tstamp) <= release_ns)
			break;
	__skb_queue_after(q, pos, skb);
	if (!timer_pending(&f->timer[dir]) || skb_peek(q) == skb)
		srnic_fault_arm(f, dir, release_ns);
	spin_unlock_irqrestore(&q->lock, flags);
	return true;
}

static void srnic_fault_pass(struct srnic_dev *sdev, enum srnic_fault_dir dir,
			     struct sk_buff *skb)
{
	if (dir == SRNIC_FAULT_TX) {
		skb->tstamp = 0;
		if (srnic_tx_output(sdev, NULL, skb))
			srnic_count(sdev, SRNIC_CNT_TX_ERRORS);
	} else {
		srnic_rx_deliver(sdev, skb);
	}
}

static void srnic_fault_release(struct srnic_fault *f,
				enum srnic_fault_dir dir)
{
	struct srnic_dev *sdev = container_of(f, struct srnic_dev, fault);
	struct sk_buff_head *q = &f->held[dir];
	struct sk_buff_head due;
	struct sk_buff *skb;
	unsigned long flags;
	u64 now = ktime_get_ns();

	__skb_queue_head_init(&due);
	spin_lock_irqsave(&q->lock, flags);
	while ((skb = skb_peek(q)) && ktime_to_ns(skb->tstamp) <= now) {
		__skb_unlink(skb, q);
		__skb_queue_tail(&due, skb);
	}
	if (skb && !f->stopped)
		srnic_fault_arm(f, dir, ktime_to_ns(skb->tstamp));
	spin_unlock_irqrestore(&q->lock, flags);

	while ((skb = __skb_dequeue(&due)))
		srnic_fault_pass(sdev, dir, skb);
}

static void srnic_fault_tx_timer(struct timer_list *t)
{
	struct srnic_fault *f = container_of(t, struct srnic_fault,
					     timer[SRNIC_FAULT_TX]);

	srnic_fault_release(f, SRNIC_FAULT_TX);
}

static void srnic_fault_rx_timer(struct timer_list *t)
{
	struct srnic_fault *f = container_of(t, struct srnic_fault,
					     timer[SRNIC_FAULT_RX]);

	srnic_fault_release(f, SRNIC_FAULT_RX);
}

/**
 * srnic_fault_inject() - apply the device's faults to one packet
 * @sdev: the device, with fault injection active
 * @dir: transmit (after the ICRC) or receive (before validation)
 * @skb: the packet; skb->data at the IP header (transmit) or the UDP
 *	 header (receive)
 *
 * Return: true if the packet was consumed (dropped or held); false if the
 * caller goes on with it (possibly corrupted, possibly after a copy of it
 * went ahead).
 */
bool srnic_fault_inject(struct srnic_dev *sdev, enum srnic_fault_dir dir,
			struct sk_buff *skb)
{
	struct srnic_fault *f = &sdev->fault;
	unsigned int l4 = dir == SRNIC_FAULT_TX ?
			  skb_transport_offset(skb) + sizeof(struct udphdr) :
			  sizeof(struct udphdr);
	u32 delay_ns = READ_ONCE(f->delay_us) * NSEC_PER_USEC;
	u32 rnd;

	if (srnic_fault_hit(f, dir, SRNIC_FAULT_DROP, NULL)) {
		kfree_skb(skb);
		return true;
	}
	if (srnic_fault_hit(f, dir, SRNIC_FAULT_CORRUPT, &rnd))
		srnic_fault_corrupt(skb, l4, rnd);
	if (srnic_fault_hit(f, dir, SRNIC_FAULT_DUPLICATE, NULL)) {
		struct sk_buff *copy = skb_copy(skb, GFP_ATOMIC);

		if (copy)
			srnic_fault_pass(sdev, dir, copy);
	}
	if (srnic_fault_hit(f, dir, SRNIC_FAULT_DELAY, NULL)) {
		if (!srnic_fault_hold(f, dir, skb, ktime_get_ns() + delay_ns))
			kfree_skb(skb);
		return true;
	}
	if (srnic_fault_hit(f, dir, SRNIC_FAULT_REORDER, &rnd)) {
		u64 hold = delay_ns ? rnd % delay_ns : 0;

		if (!srnic_fault_hold(f, dir, skb, ktime_get_ns() + hold))
			kfree_skb(skb);
		return true;
	}
	return false;
}

/* ---- debugfs ---------------------------------------------------------- */

static void srnic_fault_update_active(struct srnic_fault *f)
{
	bool active = false;
	int d, k;

	for (d = 0; d < SRNIC_FAULT_NUM_DIRS; d++)
		for (k = 0; k < SRNIC_FAULT_NUM_KINDS; k++)
			active |= READ_ONCE(f->ppm[d][k]) != 0;
	WRITE_ONCE(f->active, active);
}

static int srnic_fault_knob_get(void *data, u64 *val)
{
	struct srnic_fault_knob *knob = data;

	*val = READ_ONCE(*knob->value);
	return 0;
}

static int srnic_fault_knob_set(void *data, u64 val)
{
	struct srnic_fault_knob *knob = data;

	if (val > SRNIC_FAULT_PPM)
		return -EINVAL;
	WRITE_ONCE(*knob->value, val);
	srnic_fault_update_active(knob->fault);
	return 0;
}

DEFINE_DEBUGFS_ATTRIBUTE(srnic_fault_knob_fops, srnic_fault_knob_get,
			 srnic_fault_knob_set, "%llu\n");

static int srnic_fault_seed_get(void *data, u64 *val)
{
	struct srnic_fault *f = data;

	*val = f->seed;
	return 0;
}

static int srnic_fault_seed_set(void *data, u64 val)
{
	struct srnic_fault *f = data;
	unsigned long flags;

	spin_lock_irqsave(&f->lock, flags);
	f->seed = val;
	prandom_seed_state(&f->rnd, val);
	spin_unlock_irqrestore(&f->lock, flags);
	return 0;
}

DEFINE_DEBUGFS_ATTRIBUTE(srnic_fault_seed_fops, srnic_fault_seed_get,
			 srnic_fault_seed_set, "%llu\n");

static int srnic_fault_injected_show(struct seq_file *m, void *unused)
{
	struct srnic_fault *f = m->private;
	int d, k;

	for (d = 0; d < SRNIC_FAULT_NUM_DIRS; d++)
		for (k = 0; k < SRNIC_FAULT_NUM_KINDS; k++)
			seq_printf(m, "%s_%s %lld\n", srnic_fault_dir_names[d],
				   srnic_fault_kind_names[k],
				   atomic64_read(&f->injected[d][k]));
	return 0;
}

DEFINE_SHOW_ATTRIBUTE(srnic_fault_injected);

/**
 * srnic_fault_init() - fault injection of a new device: all off
 * @sdev: the device, its debugfs directory created (or not)
 */
void srnic_fault_init(struct srnic_dev *sdev)
{
	struct srnic_fault *f = &sdev->fault;
	struct dentry *dir;
	int d, k;

	spin_lock_init(&f->lock);
	prandom_seed_state(&f->rnd, 0);
	f->delay_us = 1000;
	for (d = 0; d < SRNIC_FAULT_NUM_DIRS; d++)
		skb_queue_head_init(&f->held[d]);
	timer_setup(&f->timer[SRNIC_FAULT_TX], srnic_fault_tx_timer, 0);
	timer_setup(&f->timer[SRNIC_FAULT_RX], srnic_fault_rx_timer, 0);

	if (IS_ERR_OR_NULL(sdev->debugfs))
		return;
	dir = debugfs_create_dir("fault", sdev->debugfs);
	for (d = 0; d < SRNIC_FAULT_NUM_DIRS; d++) {
		for (k = 0; k < SRNIC_FAULT_NUM_KINDS; k++) {
			struct srnic_fault_knob *knob = &f->knobs[d][k];
			char name[32];

			knob->fault = f;
			knob->value = &f->ppm[d][k];
			snprintf(name, sizeof(name), "%s_%s",
				 srnic_fault_dir_names[d],
				 srnic_fault_kind_names[k]);
			debugfs_create_file_unsafe(name, 0600, dir, knob,
						   &srnic_fault_knob_fops);
		}
	}
	debugfs_create_u32("delay_us", 0600, dir, &f->delay_us);
	debugfs_create_file_unsafe("seed", 0600, dir, f,
				   &srnic_fault_seed_fops);
	debugfs_create_file("injected", 0400, dir, f,
			    &srnic_fault_injected_fops);
}

/**
 * srnic_fault_stop() - stop injecting and drop held packets
 * @sdev: the device; its debugfs files are gone, nothing sends or
 *	  receives on it any more
 */
void srnic_fault_stop(struct srnic_dev *sdev)
{
	struct srnic_fault *f = &sdev->fault;
	unsigned long flags;
	int d;

	WRITE_ONCE(f->active, false);
	for (d = 0; d < SRNIC_FAULT_NUM_DIRS; d++) {
		spin_lock_irqsave(&f->held[d].lock, flags);
		f->stopped = true;
		spin_unlock_irqrestore(&f->held[d].lock, flags);
		timer_delete_sync(&f->timer[d]);
		skb_queue_purge(&f->held[d]);
	}
}
