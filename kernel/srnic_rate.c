// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: the requester's rate limiter, a DCQCN reaction point (Zhu et al.,
 * "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015; what
 * ConnectX NICs run for RoCEv2).
 *
 * A QP sends at the rate of its requester's window until a CNP names it
 * (srnic_net.c counts CNPs in srnic_rate.cnps, from any notification point:
 * an srnic device or a hardware NIC). The first CNP limits it. DCQCN
 * starts from the line rate, which is what a hardware QP sends at; a
 * software one sends at what its CPU and path allow, so the rate starts
 * from what the QP was measured to send (a meter over at least
 * SRNIC_RATE_METER_MS, in jiffies, free to read), and each cut from that
 * measure when it is below the rate (which then held nothing back). Each
 * CNP (at most one per 50 us from a notification point) cuts the rate by
 * alpha / 2, where alpha, DCQCN's estimate of how congested the path is,
 * rises with each CNP and decays by 1/256 every alpha period without one.
 * Between CNPs the rate recovers in stages, one per stage period and one
 * per SRNIC_RATE_STAGE_BYTES sent: halfway back to the target rate for the
 * first SRNIC_RATE_FAST stages (fast recovery), then with the target
 * raised by SRNIC_RATE_AI_MBPS (additive increase), or by a growing
 * multiple of SRNIC_RATE_HAI_MBPS once both kinds of stage are past the
 * fast ones (hyper increase). Back at SRNIC_RATE_MAX_MBPS the QP is no
 * longer limited.
 *
 * DCQCN's periods (55 us for alpha, 300 us for a stage on ConnectX) were
 * set for fabrics whose round trip takes a few microseconds; a software
 * RNIC's takes from tens of microseconds to milliseconds (a loaded host,
 * an emulated one), and a rate that recovers within one round trip never
 * comes down. So the periods are at least SRNIC_RATE_ALPHA_RTTS and
 * SRNIC_RATE_STAGE_RTTS of the requester's smoothed round-trip time
 * (srnic_req.c), and never shorter than DCQCN's.
 *
 * A limited QP's packets are paced: each one, its payload and its headers,
 * moves the time the next may leave on by its length at the rate, and the
 * requester stops at a packet whose time has not come, with a
 * high-resolution timer to run its task then. Up to SRNIC_RATE_BURST_NS of
 * unused time is kept for a burst. Everything but @cnps runs in the QP's
 * task, so the state needs no lock; DCQCN's timers are applied lazily when
 * the requester runs, so an idle QP costs nothing.
 *
 * Packet pacing (IB_QP_RATE_LIMIT, which ib_core allows on raw packet QPs:
 * ibv_modify_qp(), ibv_modify_qp_rate_limit()) paces a QP's frames the same
 * way at a rate the consumer sets, in kbit/s, each frame by its own length
 * (so the typical packet size a consumer may name is not needed); after a
 * pause the QP may send its burst size at once (max_burst_sz; one frame when
 * 0). srnic_datagram_run() asks srnic_rate_pace() before each send and tells
 * srnic_rate_paced() what it sent.
 */

#include "srnic.h"
#include "srnic_trace.h"

/* The rate a QP is no longer limited at; the start when none was measured. */
#define SRNIC_RATE_MAX_MBPS	100000U
/* The meter of what a QP sends measures over at least this long. */
#define SRNIC_RATE_METER_MS	10
/* The floor a QP's rate is never cut below. */
#define SRNIC_RATE_MIN_MBPS	1U
/* Alpha is kept in 1/1024ths; it starts at 1 for the first cut. */
#define SRNIC_RATE_ALPHA_ONE	1024U
/* g = 1/256: alpha's gain */
#define SRNIC_RATE_ALPHA_SHIFT	8
/* Alpha decays by g once per period without a CNP: this long at least. */
#define SRNIC_RATE_ALPHA_NS	(55 * NSEC_PER_USEC)
#define SRNIC_RATE_ALPHA_RTTS	1
/* A recovery stage every period, and every this many bytes sent. */
#define SRNIC_RATE_STAGE_NS	(300 * NSEC_PER_USEC)
#define SRNIC_RATE_STAGE_RTTS	4
#define SRNIC_RATE_STAGE_BYTES	(2U << 20)
/* Stages of fast recovery before the target rate rises. */
#define SRNIC_RATE_FAST		5U
/* Additive and hyper increase steps of the target rate. */
#define SRNIC_RATE_AI_MBPS	40U
#define SRNIC_RATE_HAI_MBPS	400U
/* Unused sending time kept for a burst. */
#define SRNIC_RATE_BURST_NS	(50 * NSEC_PER_USEC)
/* Ethernet, IPv4, UDP, BTH and ICRC around each packet's payload. */
#define SRNIC_RATE_PKT_OVERHEAD	(14 + 20 + 8 + 12 + 4)
/* Missed stages applied at once at most: more reach the maximum anyway. */
#define SRNIC_RATE_MAX_CATCHUP	64U

static enum hrtimer_restart srnic_rate_timer_fn(struct hrtimer *t)
{
	struct srnic_qp *qp = container_of(t, struct srnic_qp,
					   req.rate.timer);

	srnic_engine_task_schedule(&qp->task);
	return HRTIMER_NORESTART;
}

/*
 * Whole periods since *@since, which moves on by as many: a period is
 * DCQCN's @floor_ns, or @rtts round trips of the QP if longer.
 */
static u64 srnic_rate_periods(struct srnic_qp *qp, u64 *since, u64 floor_ns,
			      u32 rtts)
{
	u64 period = max_t(u64, floor_ns, qp->req.srtt_ns * rtts);
	u64 periods = div64_u64(qp->req.rate.now - *since, period);

	*since += periods * period;
	return periods;
}

/*
 * What the QP sent over the meter's last whole window, or over the one in
 * progress if longer than a jiffy; in Mbit/s, 0 when nothing was measured.
 */
static u32 srnic_rate_measured(struct srnic_rate *rate)
{
	unsigned long elapsed = jiffies - rate->meter_start;
	u64 mbps;

	if (!elapsed)
		return rate->meter_mbps;
	mbps = div64_u64(rate->meter_bytes * BITS_PER_BYTE,
			 jiffies_to_usecs(elapsed));
	return max_t(u64, rate->meter_mbps, min_t(u64, mbps, U32_MAX));
}

/* Close the meter's window once it is long enough; a stale one is void. */
static void srnic_rate_meter(struct srnic_rate *rate)
{
	unsigned long window = msecs_to_jiffies(SRNIC_RATE_METER_MS);
	unsigned long elapsed = jiffies - rate->meter_start;

	if (elapsed < window)
		return;
	rate->meter_mbps = elapsed < 2 * window ?
			   srnic_rate_measured(rate) : 0;
	rate->meter_bytes = 0;
	rate->meter_start = jiffies;
}

/* The rate changed: a cut for CNPs, or a recovery stage. */
static void srnic_rate_trace(struct srnic_qp *qp, bool cut)
{
	struct srnic_rate *rate = &qp->req.rate;

	trace_srnic_rate_change(&qp->ibqp, rate->mbps, rate->target_mbps,
				rate->alpha,
				div_u64(qp->req.srtt_ns, NSEC_PER_USEC), cut);
}

/* Alpha decays by g for each whole alpha period since its update. */
static void srnic_rate_decay_alpha(struct srnic_qp *qp)
{
	struct srnic_rate *rate = &qp->req.rate;
	u64 periods = srnic_rate_periods(qp, &rate->alpha_ns,
					 SRNIC_RATE_ALPHA_NS,
					 SRNIC_RATE_ALPHA_RTTS);

	while (periods-- && rate->alpha)
		rate->alpha -= DIV_ROUND_UP(rate->alpha,
					    1U << SRNIC_RATE_ALPHA_SHIFT);
}

/* A CNP came: cut the rate by alpha / 2 and make alpha rise. */
static void srnic_rate_cut(struct srnic_qp *qp)
{
	struct srnic_rate *rate = &qp->req.rate;
	u32 mbps;

	if (!rate->mbps) {
		/* The first CNP of an unlimited QP: DCQCN's starting point. */
		mbps = srnic_rate_measured(rate);
		rate->mbps = clamp(mbps ? mbps : SRNIC_RATE_MAX_MBPS,
				   SRNIC_RATE_MIN_MBPS, SRNIC_RATE_MAX_MBPS);
		rate->alpha = SRNIC_RATE_ALPHA_ONE;
		rate->next_ns = rate->now;
	} else {
		srnic_rate_decay_alpha(qp);
		/* A rate the QP does not reach holds nothing back. */
		mbps = srnic_rate_measured(rate);
		if (mbps && mbps < rate->mbps)
			rate->mbps = max(mbps, SRNIC_RATE_MIN_MBPS);
	}
	rate->target_mbps = rate->mbps;
	mbps = rate->mbps - (u32)(((u64)rate->mbps * rate->alpha) /
				  (2 * SRNIC_RATE_ALPHA_ONE));
	rate->mbps = max(mbps, SRNIC_RATE_MIN_MBPS);
	rate->alpha += (SRNIC_RATE_ALPHA_ONE - rate->alpha) >>
		       SRNIC_RATE_ALPHA_SHIFT;
	rate->alpha_ns = rate->now;
	rate->timer_stage = 0;
	rate->byte_stage = 0;
	rate->bytes = 0;
	rate->stage_ns = rate->now;
	srnic_qp_count(qp, SRNIC_CNT_RP_RATE_DECREASES);
	srnic_rate_trace(qp, true);
}

/* One recovery stage passed: the rate climbs back towards the target. */
static void srnic_rate_increase(struct srnic_qp *qp)
{
	struct srnic_rate *rate = &qp->req.rate;
	u32 most = max(rate->timer_stage, rate->byte_stage);
	u32 least = min(rate->timer_stage, rate->byte_stage);

	if (least > SRNIC_RATE_FAST)
		rate->target_mbps += (least - SRNIC_RATE_FAST) *
				     SRNIC_RATE_HAI_MBPS;
	else if (most > SRNIC_RATE_FAST)
		rate->target_mbps += SRNIC_RATE_AI_MBPS;
	rate->target_mbps = min(rate->target_mbps, SRNIC_RATE_MAX_MBPS);
	rate->mbps = DIV_ROUND_UP(rate->mbps + rate->target_mbps, 2);
	srnic_qp_count(qp, SRNIC_CNT_RP_RATE_INCREASES);
	if (rate->mbps >= SRNIC_RATE_MAX_MBPS) {
		rate->mbps = 0;		/* no longer limited */
		rate->waiting = false;
	}
	srnic_rate_trace(qp, false);
}

/* The recovery stages of the time since the last one. */
static void srnic_rate_time_stages(struct srnic_qp *qp)
{
	struct srnic_rate *rate = &qp->req.rate;
	u64 stages = srnic_rate_periods(qp, &rate->stage_ns,
					SRNIC_RATE_STAGE_NS,
					SRNIC_RATE_STAGE_RTTS);

	stages = min_t(u64, stages, SRNIC_RATE_MAX_CATCHUP);
	while (stages-- && rate->mbps) {
		rate->timer_stage++;
		srnic_rate_increase(qp);
	}
}

/**
 * srnic_rate_begin_run() - bring the QP's rate up to date for a run
 * @qp: a QP with a wire destination, from its task, before it sends
 *
 * Applies the CNPs received since the last run (one cut for any number:
 * notification points space them already) and the recovery stages of
 * the time since. A QP that was never limited, or is no longer, reads no
 * clock but jiffies, for its meter.
 *
 * Return: false while the QP waits for its next packet's time (its timer
 * runs the task then).
 */
bool srnic_rate_begin_run(struct srnic_qp *qp)
{
	struct srnic_rate *rate = &qp->req.rate;
	u32 cnps = atomic_read(&rate->cnps);

	srnic_rate_meter(rate);
	if (likely(!rate->mbps && cnps == rate->cnps_seen))
		return true;
	rate->now = ktime_get_ns();
	if (cnps != rate->cnps_seen) {
		rate->cnps_seen = cnps;
		srnic_rate_cut(qp);
	} else {
		srnic_rate_time_stages(qp);
		if (!rate->mbps)
			return true;
	}
	if (rate->waiting && rate->now < rate->next_ns)
		return false;
	rate->waiting = false;
	/* Time left unused is kept for a burst, up to a limit. */
	if (rate->next_ns + SRNIC_RATE_BURST_NS < rate->now)
		rate->next_ns = rate->now - SRNIC_RATE_BURST_NS;
	return true;
}

/* The next packet's time has not come: its timer runs the task then. */
static void srnic_rate_wait(struct srnic_qp *qp, enum srnic_counter counter)
{
	struct srnic_rate *rate = &qp->req.rate;

	rate->waiting = true;
	hrtimer_start(&rate->timer, ns_to_ktime(rate->next_ns - rate->now),
		      HRTIMER_MODE_REL);
	srnic_qp_count(qp, counter);
}

/**
 * srnic_rate_admit() - may the requester send a packet now?
 * @qp: the QP, from its task, in a run begun by srnic_rate_begin_run()
 * @len: the packet's payload bytes
 *
 * An unlimited QP may. A limited one may if the packet's time has come;
 * then the next packet's time moves on by this one's length at the rate.
 * Otherwise the requester must stop: its timer runs the task when the
 * time comes.
 */
bool srnic_rate_admit(struct srnic_qp *qp, u32 len)
{
	struct srnic_rate *rate = &qp->req.rate;

	if (rate->mbps && rate->next_ns > rate->now) {
		srnic_rate_wait(qp, SRNIC_CNT_RP_RATE_WAITS);
		return false;
	}
	/* The meter counts what is sent: a refused packet comes again. */
	rate->meter_bytes += len + SRNIC_RATE_PKT_OVERHEAD;
	if (likely(!rate->mbps))
		return true;
	rate->next_ns += div_u64((u64)(len + SRNIC_RATE_PKT_OVERHEAD) *
				 BITS_PER_BYTE * NSEC_PER_USEC, rate->mbps);
	rate->bytes += len;
	if (rate->bytes >= SRNIC_RATE_STAGE_BYTES) {
		rate->bytes -= SRNIC_RATE_STAGE_BYTES;
		rate->byte_stage++;
		srnic_rate_increase(qp);
	}
	return true;
}

/**
 * srnic_rate_start() - the QP sends unlimited, CNPs received so far aside
 * @qp: the QP entering RTS; its requester not running
 */
void srnic_rate_start(struct srnic_qp *qp)
{
	struct srnic_rate *rate = &qp->req.rate;

	rate->cnps_seen = atomic_read(&rate->cnps);
	rate->mbps = 0;
	rate->waiting = false;
	rate->meter_bytes = 0;
	rate->meter_mbps = 0;
	rate->meter_start = jiffies;
}

/**
 * srnic_rate_init() - the rate limiter of a new QP
 * @qp: the QP
 */
void srnic_rate_init(struct srnic_qp *qp)
{
	hrtimer_setup(&qp->req.rate.timer, srnic_rate_timer_fn,
		      CLOCK_MONOTONIC, HRTIMER_MODE_REL);
}

/**
 * srnic_rate_cleanup() - stop the rate limiter's timer
 * @qp: the QP, its task stopped
 */
void srnic_rate_cleanup(struct srnic_qp *qp)
{
	hrtimer_cancel(&qp->req.rate.timer);
}

/**
 * srnic_rate_check_limit() - is @kbps a packet pacing rate srnic takes?
 * @kbps: IB_QP_RATE_LIMIT's rate_limit; 0 turns pacing off
 *
 * Return: 0, or -EINVAL outside query_device's qp_rate_limit_min..max.
 */
int srnic_rate_check_limit(u32 kbps)
{
	if (kbps && (kbps < SRNIC_RATE_LIMIT_MIN_KBPS ||
		     kbps > SRNIC_RATE_LIMIT_MAX_KBPS))
		return -EINVAL;
	return 0;
}

/**
 * srnic_rate_set_limit() - set a QP's packet pacing
 * @qp: a raw packet QP, from modify_qp (state_lock held)
 * @kbps: the rate, checked by srnic_rate_check_limit(); 0: unpaced
 * @burst_bytes: bytes it may send at once after a pause; 0: one frame
 *
 * The QP's task takes the new rate at its next send; a send waiting for
 * its time under the old rate is run now.
 */
void srnic_rate_set_limit(struct srnic_qp *qp, u32 kbps, u32 burst_bytes)
{
	struct srnic_rate *rate = &qp->req.rate;

	WRITE_ONCE(rate->burst_bytes, burst_bytes);
	WRITE_ONCE(rate->limit_kbps, kbps);
	srnic_engine_task_schedule(&qp->task);
}

/* Nanoseconds @bytes take at @kbps. */
static u64 srnic_rate_bytes_ns(u64 bytes, u32 kbps)
{
	return div_u64(bytes * BITS_PER_BYTE * USEC_PER_SEC, kbps);
}

/**
 * srnic_rate_pace() - may a paced QP send its next frame now?
 * @qp: a UD or raw packet QP, from its task
 *
 * An unpaced QP may. A paced one may when the time its last frame set has
 * come (time left unused counts up to the QP's burst size); otherwise the
 * QP waits, its timer running the task then.
 *
 * Return: whether the QP may send.
 */
bool srnic_rate_pace(struct srnic_qp *qp)
{
	struct srnic_rate *rate = &qp->req.rate;
	u32 kbps = READ_ONCE(rate->limit_kbps);
	u64 burst_ns;

	if (likely(!kbps)) {
		rate->waiting = false;
		return true;
	}
	rate->now = ktime_get_ns();
	if (rate->next_ns > rate->now) {
		srnic_rate_wait(qp, SRNIC_CNT_TX_PACING_WAITS);
		return false;
	}
	rate->waiting = false;
	burst_ns = srnic_rate_bytes_ns(READ_ONCE(rate->burst_bytes), kbps);
	if (rate->next_ns + burst_ns < rate->now)
		rate->next_ns = rate->now - burst_ns;
	return true;
}

/**
 * srnic_rate_paced() - a paced QP sent a frame
 * @qp: the QP, from its task, after srnic_rate_pace() let it send
 * @bytes: the frame's length
 *
 * The next frame's time moves on by @bytes at the QP's rate.
 */
void srnic_rate_paced(struct srnic_qp *qp, u64 bytes)
{
	struct srnic_rate *rate = &qp->req.rate;
	u32 kbps = READ_ONCE(rate->limit_kbps);

	if (kbps)
		rate->next_ns += srnic_rate_bytes_ns(bytes, kbps);
}
