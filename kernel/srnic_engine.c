// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: the NIC engines, srnic's equivalent of a NIC's processing units,
 * and the rules of who runs a QP's work where.
 *
 * Work is organised in tasks (one per QP). A task's run() is never
 * concurrent with itself (a bit lock, SRNIC_TASK_RUNNING), so per-QP state
 * needs no lock; a context that finds the task running marks it PENDING
 * and the runner has it run again. Five contexts run tasks:
 *
 * - The doorbell syscall of a user SQ runs the requester in the caller's
 *   context (srnic_engine_task_run_here()), as rxe does: a ping-pong or an
 *   occasional post wakes no thread, and an idle device costs nothing.
 * - A kernel consumer's post (ib_post_send(), ib_post_recv()), which may
 *   come from atomic context, runs the task in the caller's context with
 *   bottom halves disabled (srnic_engine_task_kick()), as rxe runs a
 *   kernel QP's work in a tasklet: such a run may not sleep
 *   (srnic_engine_task_may_sleep()) and leaves what would to the engine
 *   (srnic_engine_task_defer()).
 * - The receive softirq runs the task of the QP a packet is for the same
 *   way, when the QP may run there (srnic_engine_task_allow_atomic()).
 * - The engine threads (one per CPU, bound to it, shared by every device,
 *   running while a device exists) run what other contexts hand them:
 *   received packets of the other QPs, timers, work a run that may not
 *   sleep deferred, and the rest of a budget a post, packet or doorbell
 *   left.
 * - Streams: a task whose doorbells come faster than the longest polling
 *   window, with nothing received in between (srnic_sq_doorbell()), is
 *   handed to its engine to poll (srnic_engine_task_poll()), so a steady
 *   stream of posts needs no syscall per post.
 *
 * A polling engine keeps looking at its polled tasks' rings for a window
 * after work; then each asks for doorbells again ("need wakeup" in its
 * rings), the engine re-checks once (the provider may have published just
 * before seeing the flag) and sleeps. The window adapts: it starts at
 * srnic.poll_usecs, doubles whenever work woke the engine soon after it
 * went to sleep (a steady stream with gaps longer than the window), up to
 * srnic.poll_max_usecs, and falls back once the engine slept longer than
 * that. Between looks the engine naps (idle time / 16, 50 us to 1 ms): it
 * does not spin unless srnic.spin_usecs asks it to, for that long at the
 * start of the window and only while no other task wants its CPU
 * (single_task_running(), as KVM's halt polling). Spinning is for hosts
 * that give the NIC a CPU of its own; by default an engine with no work
 * sleeps, and a device with no traffic has no thread awake and no timer.
 *
 * The threads run at nice srnic.engine_nice (-10 by default), the way a
 * NIC's own processors do not queue behind the applications they serve:
 * rxe does its work in softirq context, ahead of every task, and at nice 0
 * an engine shared a CPU evenly with each perftest end spinning on a CQ,
 * so on the two vCPUs of the bench VM two engines and their network
 * softirq got one vCPU between them. At -10 (weight 9548 against 1024)
 * an engine with work takes about 90 % of a CPU it shares with one such
 * spinner, which keeps the rest (measured on the veth wire, 64 KiB,
 * alternating in one boot, three rounds: ib_write_bw 146 to 257 MB/s,
 * ib_read_bw 161 to 219, ib_send_bw 111 to 154). Not -20, kworker's
 * high-priority pools' value: an engine kept busy by a remote peer would
 * leave a local application about 1 %.
 *
 * srnic.realtime=1 makes the threads SCHED_FIFO: a nap's end then
 * preempts a spinning application at once (lower latency when every CPU
 * runs a spinner), and an engine busy for 500 us naps once when others
 * wait for its CPU. Off by default: a busy real-time engine delays the
 * NET_RX softirq work deferred to ksoftirqd on its CPU, and a veth
 * backlog overflows (measured: drops, timeouts, a third of the wire
 * bandwidth).
 */

#include <linux/delay.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/sched/stat.h>
#include <linux/slab.h>

#include "srnic.h"

static unsigned int poll_usecs = 200;
module_param(poll_usecs, uint, 0644);
MODULE_PARM_DESC(poll_usecs,
		 "Microseconds an engine keeps polling a stream's rings after work before it sleeps, at least (0: never poll, every doorbell does its work in the syscall)");

static unsigned int poll_max_usecs = 100000;
module_param(poll_max_usecs, uint, 0644);
MODULE_PARM_DESC(poll_max_usecs,
		 "Longest polling window the engine adapts to under a steady stream of work");

static unsigned int spin_usecs;
module_param(spin_usecs, uint, 0644);
MODULE_PARM_DESC(spin_usecs,
		 "Microseconds a polling engine spins on an otherwise idle CPU before it naps between looks (default 0: never spin; for hosts that give the NIC a CPU)");

static int engine_nice = -10;
module_param(engine_nice, int, 0444);
MODULE_PARM_DESC(engine_nice,
		 "Nice value of the engine threads, -20 to 19 (default -10: an engine with work takes most of a CPU it shares with an application spinning on its CQ)");

static bool realtime;
module_param(realtime, bool, 0444);
MODULE_PARM_DESC(realtime,
		 "Run engine threads SCHED_FIFO (lowest RT priority), so a polling engine's look at the rings preempts a spinning application at once instead of at its next time slice (default off: it can starve ksoftirqd)");

/*
 * The engines, one per CPU online when the first device came, shared by
 * every device and bound to their CPUs; started with the first device and
 * stopped with the last, so that srnic loaded with no device runs no
 * thread.
 */
static struct srnic_engine *srnic_engines;
static unsigned int srnic_num_engines;
static unsigned int srnic_engine_users;		/* devices; srnic_engines_lock */
static DEFINE_MUTEX(srnic_engines_lock);

/* A polling engine's naps: idle time / 16, within these bounds. */
#define SRNIC_ENGINE_NAP_MIN_USECS 50
#define SRNIC_ENGINE_NAP_MAX_USECS 1000

/*
 * A real-time engine with work for this long without a break, while other
 * threads wait for its CPU, naps once so they get a turn (cond_resched()
 * does not yield to them): the applications feeding it are among them.
 */
#define SRNIC_ENGINE_BUSY_SLICE_NSECS (500 * NSEC_PER_USEC)
#define SRNIC_ENGINE_BUSY_NAP_USECS 20

/* Upper bound on run() calls of one pass, so control requests get a turn. */
#define SRNIC_ENGINE_PASS_BUDGET 64

enum srnic_engine_ctrl_op {
	SRNIC_ENGINE_ATTACH,	/* start polling the task */
	SRNIC_ENGINE_DETACH,	/* stop running and polling the task */
};

/*
 * A request only the engine thread may carry out, because it changes what
 * the thread is iterating over; the requester waits for it.
 */
struct srnic_engine_ctrl {
	struct llist_node node;
	enum srnic_engine_ctrl_op op;
	struct srnic_engine_task *task;
	struct completion done;
};

static void srnic_engine_submit(struct srnic_engine *engine,
				enum srnic_engine_ctrl_op op,
				struct srnic_engine_task *task)
{
	struct srnic_engine_ctrl ctrl = { .op = op, .task = task };

	init_completion(&ctrl.done);
	llist_add(&ctrl.node, &engine->control);
	wake_up_process(engine->thread);
	wait_for_completion(&ctrl.done);
}

/**
 * srnic_engine_task_init() - bind a task to an engine
 * @sdev: the device, which holds the engines (srnic_engines_start())
 * @task: the task, embedded in its owner (a QP)
 * @ops: its callbacks
 * @key: spreads tasks over engines (the QPN)
 *
 * The task is neither polled nor runnable until srnic_engine_task_start().
 */
void srnic_engine_task_init(struct srnic_dev *sdev,
			    struct srnic_engine_task *task,
			    const struct srnic_engine_task_ops *ops, u32 key)
{
	memset(task, 0, sizeof(*task));
	task->ops = ops;
	task->engine = &srnic_engines[key % srnic_num_engines];
	INIT_LIST_HEAD(&task->polled);
}

/**
 * srnic_engine_task_start() - let the engine poll and run the task
 * @task: an initialised task
 */
void srnic_engine_task_start(struct srnic_engine_task *task)
{
	srnic_engine_submit(task->engine, SRNIC_ENGINE_ATTACH, task);
}

/**
 * srnic_engine_task_stop() - stop and forget a task
 * @task: a started task
 *
 * When this returns, run() is not executing and will not be called again
 * (later srnic_engine_task_schedule() calls are ignored); the owner may
 * then be freed.
 */
void srnic_engine_task_stop(struct srnic_engine_task *task)
{
	set_bit(SRNIC_TASK_STOPPED, &task->flags);
	/* STOPPED before RUNNING is read; pairs with the claim's barrier. */
	smp_mb__after_atomic();
	srnic_engine_submit(task->engine, SRNIC_ENGINE_DETACH, task);
	/* A doorbell syscall may still be in run(). */
	wait_on_bit(&task->flags, SRNIC_TASK_RUNNING, TASK_UNINTERRUPTIBLE);
}

/*
 * Claim a task for one run() in this context. If another context is in
 * run(), it is told to have the task run again (PENDING) and this one
 * backs off: the work the caller saw is not lost.
 */
static bool srnic_engine_task_claim(struct srnic_engine_task *task)
{
	set_bit(SRNIC_TASK_PENDING, &task->flags);
	/* PENDING before RUNNING is read; pairs with the release. */
	smp_mb__after_atomic();
	if (test_and_set_bit_lock(SRNIC_TASK_RUNNING, &task->flags))
		return false;
	clear_bit(SRNIC_TASK_PENDING, &task->flags);
	/*
	 * Order the clear before run() reads the task's work, and the claim
	 * before STOPPED is read.
	 */
	smp_mb__after_atomic();
	if (test_bit(SRNIC_TASK_STOPPED, &task->flags)) {
		clear_and_wake_up_bit(SRNIC_TASK_RUNNING, &task->flags);
		return false;
	}
	return true;
}

/*
 * End a run(). The engine runs the task next if work remains or if
 * another context wanted to run it meanwhile.
 */
static void srnic_engine_task_release(struct srnic_engine_task *task,
				      bool more)
{
	/* A run that may not sleep left the rest to the engine. */
	if (test_and_clear_bit(SRNIC_TASK_DEFERRED, &task->flags))
		more = true;
	/* Unlock, full barrier, wake srnic_engine_task_stop(). */
	clear_and_wake_up_bit(SRNIC_TASK_RUNNING, &task->flags);
	if (more || test_bit(SRNIC_TASK_PENDING, &task->flags))
		srnic_engine_task_schedule(task);
}

/*
 * Runs of a task a doorbell, post or packet context makes in a row, before
 * what remains goes to the engine.
 */
#define SRNIC_ENGINE_LOCAL_RUNS 4

/*
 * Run a task claimed in a doorbell's, post's or packet's context; returns
 * whether work remains. Work another context brought while it ran,
 * typically the ACK or the answer that its own send brought back through
 * a softirq nested in this very run (which found the task running and set
 * PENDING), is done here too, a few runs at most, rather than by waking
 * the engine for it.
 */
static bool srnic_engine_task_run_local(struct srnic_engine_task *task)
{
	unsigned int runs = SRNIC_ENGINE_LOCAL_RUNS;
	bool more = task->ops->run(task);

	/* test_and_clear_bit() orders the clear before run() reads work. */
	while (!more && --runs &&
	       !test_bit(SRNIC_TASK_DEFERRED, &task->flags) &&
	       test_and_clear_bit(SRNIC_TASK_PENDING, &task->flags) &&
	       !test_bit(SRNIC_TASK_STOPPED, &task->flags))
		more = task->ops->run(task);
	return more;
}

/**
 * srnic_engine_task_poll() - let the engine serve a task's rings by polling
 * @task: the task, whose producers publish work faster than doorbells pay
 * @gap_ns: the time between the stream's last two doorbells: the engine
 *	    polls at least twice as long after work (within the longest
 *	    window), so that the stream's next posts find it polling
 *
 * Sets SRNIC_TASK_POLL_RINGS and wakes the engine, which then asks the
 * producers for no doorbells (@woken) while it polls the rings (@has_work)
 * for its window, until the task's @prepare_sleep asks for them again.
 * Any context.
 */
void srnic_engine_task_poll(struct srnic_engine_task *task, u64 gap_ns)
{
	struct srnic_engine *engine = task->engine;

	/* A hint, racy between posters: the largest recent gap wins mostly. */
	if (gap_ns > READ_ONCE(engine->stream_gap_ns))
		WRITE_ONCE(engine->stream_gap_ns, gap_ns);
	set_bit(SRNIC_TASK_POLL_RINGS, &task->flags);
	srnic_engine_task_schedule(task);
}

/**
 * srnic_engine_stream_ns() - how close doorbells of a stream come
 *
 * Return: the longest polling window, in ns: a task whose doorbells come
 * closer than this is worth polling; 0 when the engines never poll
 * (srnic.poll_usecs=0).
 */
u64 srnic_engine_stream_ns(void)
{
	if (!READ_ONCE(poll_usecs))
		return 0;
	return max(READ_ONCE(poll_max_usecs), READ_ONCE(poll_usecs)) *
	       (u64)NSEC_PER_USEC;
}

/**
 * srnic_engine_task_run_here() - run a task in the caller's context
 * @task: the task
 *
 * A doorbell syscall calls this instead of waking the engine, as rxe does
 * the requester's work in the poster's system call: when no other context
 * is serving the task, one budget of its work is done here and the engine
 * is woken only if work remains; when one is, that context runs the task
 * again. The task's "need wakeup" flags stay as they are: the engine is
 * not polling the rings because of this.
 *
 * Context: process, may sleep (run() may).
 */
void srnic_engine_task_run_here(struct srnic_engine_task *task)
{
	might_sleep();
	if (test_bit(SRNIC_TASK_STOPPED, &task->flags) ||
	    !srnic_engine_task_claim(task))
		return;
	srnic_engine_task_release(task, srnic_engine_task_run_local(task));
}

/* Runs of srnic_engine_task_run_atomic() in progress on this CPU. */
static DEFINE_PER_CPU(unsigned int, srnic_engine_atomic_runs);

/*
 * Run a task in the caller's context, which may not sleep (from
 * srnic_engine_task_kick()): a post or a received packet then costs no
 * thread's wake-up, as rxe runs a kernel QP's work in a tasklet and its
 * responder in the receiving softirq. When no other context is serving
 * the task, one budget of its work is done here with bottom halves
 * disabled (the completion handlers it calls run as behind a NIC's
 * interrupt); work that would sleep, and whatever the budget leaves, goes
 * to the engine. With interrupts disabled, inside another such run on
 * this CPU (a completion handler that posts), or for a task no longer
 * allowed to (srnic_engine_task_forbid_atomic()), the engine runs it.
 */
static void srnic_engine_task_run_atomic(struct srnic_engine_task *task)
{
	bool more;

	if (irqs_disabled() || in_hardirq() || in_nmi()) {
		srnic_engine_task_schedule(task);
		return;
	}
	local_bh_disable();
	if (__this_cpu_read(srnic_engine_atomic_runs)) {
		srnic_engine_task_schedule(task);
		goto out;
	}
	if (test_bit(SRNIC_TASK_STOPPED, &task->flags) ||
	    !srnic_engine_task_claim(task))
		goto out;
	set_bit(SRNIC_TASK_ATOMIC, &task->flags);
	/* ATOMIC before ATOMIC_OK is read; pairs with _forbid_atomic(). */
	smp_mb__after_atomic();
	if (!test_bit(SRNIC_TASK_ATOMIC_OK, &task->flags)) {
		clear_bit(SRNIC_TASK_ATOMIC, &task->flags);
		srnic_engine_task_release(task, true);
		goto out;
	}
	__this_cpu_inc(srnic_engine_atomic_runs);
	more = srnic_engine_task_run_local(task);
	__this_cpu_dec(srnic_engine_atomic_runs);
	clear_bit_unlock(SRNIC_TASK_ATOMIC, &task->flags);
	srnic_engine_task_release(task, more);
out:
	local_bh_enable();
}

/**
 * srnic_engine_in_atomic_run() - is the caller in a run that may not sleep?
 *
 * True inside srnic_engine_task_run_atomic()'s run() (any task's). The
 * per-CPU count is stable for the caller either way: such a run keeps its
 * CPU (bottom halves are disabled), so a caller that reads it while not in
 * one is on a CPU that is not in one.
 */
bool srnic_engine_in_atomic_run(void)
{
	return raw_cpu_read(srnic_engine_atomic_runs);
}

/**
 * srnic_engine_task_allow_atomic() - let the task run where it may not sleep
 * @task: a task whose run() honours srnic_engine_task_may_sleep()
 *
 * Its posts and received packets then run it in their own context
 * (srnic_engine_task_kick()).
 */
void srnic_engine_task_allow_atomic(struct srnic_engine_task *task)
{
	set_bit(SRNIC_TASK_ATOMIC_OK, &task->flags);
}

/**
 * srnic_engine_task_forbid_atomic() - the task's runs may sleep from now on
 * @task: the task
 *
 * Returns once no run that may not sleep is in progress: the caller may
 * then let the task's work come to need sleeping.
 *
 * Context: process, not from the task's run().
 */
void srnic_engine_task_forbid_atomic(struct srnic_engine_task *task)
{
	clear_bit(SRNIC_TASK_ATOMIC_OK, &task->flags);
	/* ATOMIC_OK cleared before ATOMIC is read; pairs with the run's. */
	smp_mb__after_atomic();
	while (test_bit(SRNIC_TASK_ATOMIC, &task->flags))
		cpu_relax();
}

/**
 * srnic_engine_task_kick() - work arrived, in a context that may not sleep
 * @task: the task
 *
 * A kernel consumer's post, or a packet the receive softirq queued: a task
 * allowed to run without sleeping (srnic_engine_task_allow_atomic()) runs
 * here (srnic_engine_task_run_atomic()); the engine runs any other, and a
 * task whose rings it polls (SRNIC_TASK_POLL_RINGS): their producers ring
 * no doorbell, and a requester waiting for ACKs keeps them polled while
 * the engine sleeps (its prepare_sleep), counting on the ACK's run to be
 * the engine's, which polls them again after it.
 *
 * Context: any but hard interrupt or NMI.
 */
void srnic_engine_task_kick(struct srnic_engine_task *task)
{
	if (test_bit(SRNIC_TASK_ATOMIC_OK, &task->flags) &&
	    !test_bit(SRNIC_TASK_POLL_RINGS, &task->flags))
		srnic_engine_task_run_atomic(task);
	else
		srnic_engine_task_schedule(task);
}

/**
 * srnic_engine_task_defer() - leave the rest of this run to the engine
 * @task: the task, from its run() (typically one that may not sleep and
 *	  met work that would)
 *
 * The engine runs the task again after this run ends, in its thread.
 */
void srnic_engine_task_defer(struct srnic_engine_task *task)
{
	set_bit(SRNIC_TASK_DEFERRED, &task->flags);
}

/**
 * srnic_engine_task_schedule() - the task has work: run it soon
 * @task: the task
 *
 * Any context. Queues the task at most once; the engine clears the queued
 * bit before it calls run(), so work arriving during run() is not lost.
 */
void srnic_engine_task_schedule(struct srnic_engine_task *task)
{
	struct srnic_engine *engine = task->engine;

	if (test_bit(SRNIC_TASK_STOPPED, &task->flags) ||
	    test_and_set_bit(SRNIC_TASK_QUEUED, &task->flags))
		return;
	llist_add(&task->run_node, &engine->runnable);
	wake_up_process(engine->thread);
}

static bool srnic_engine_run_control(struct srnic_engine *engine)
{
	struct srnic_engine_ctrl *ctrl, *next;
	struct llist_node *reqs;

	reqs = llist_del_all(&engine->control);
	if (!reqs)
		return false;
	llist_for_each_entry_safe(ctrl, next, llist_reverse_order(reqs), node) {
		struct srnic_engine_task *task = ctrl->task;

		if (ctrl->op == SRNIC_ENGINE_ATTACH)
			list_add_tail(&task->polled, &engine->polled);
		else
			list_del_init(&task->polled);
		complete(&ctrl->done);
	}
	return true;
}

/*
 * Run every queued task once. A stopped task is skipped: its DETACH
 * request is behind it and nobody else will touch its node.
 */
static bool srnic_engine_run_tasks(struct srnic_engine *engine)
{
	struct srnic_engine_task *task, *next;
	struct llist_node *queued;
	unsigned int budget = SRNIC_ENGINE_PASS_BUDGET;
	bool worked = false;

	queued = llist_del_all(&engine->runnable);
	if (!queued)
		return false;
	llist_for_each_entry_safe(task, next, llist_reverse_order(queued),
				  run_node) {
		clear_bit(SRNIC_TASK_QUEUED, &task->flags);
		/*
		 * Order the clear before run() reads the task's work; pairs
		 * with test_and_set_bit() in srnic_engine_task_schedule(),
		 * which follows the publication of new work.
		 */
		smp_mb__after_atomic();
		if (test_bit(SRNIC_TASK_STOPPED, &task->flags))
			continue;
		worked = true;
		if (!budget) {
			srnic_engine_task_schedule(task);	/* next pass */
			continue;
		}
		budget--;
		/* In run() in a doorbell syscall: that one runs it again. */
		if (!srnic_engine_task_claim(task))
			continue;
		/*
		 * The engine polls the task's rings until it sleeps again:
		 * producers need no doorbell, whatever asked for them (a
		 * sleep, a state change).
		 */
		if (test_bit(SRNIC_TASK_POLL_RINGS, &task->flags) &&
		    task->ops->woken)
			task->ops->woken(task);
		srnic_engine_task_release(task, task->ops->run(task));
	}
	return worked;
}

/* Polling: schedule the tasks whose rings hold new entries. */
static void srnic_engine_poll(struct srnic_engine *engine)
{
	struct srnic_engine_task *task;

	list_for_each_entry(task, &engine->polled, polled)
		if (test_bit(SRNIC_TASK_POLL_RINGS, &task->flags) &&
		    task->ops->has_work && task->ops->has_work(task))
			srnic_engine_task_schedule(task);
}

/*
 * Before sleeping: every polled task asks its producers for doorbells
 * again. Returns true if one found work that raced with that request.
 */
static bool srnic_engine_prepare_sleep(struct srnic_engine *engine)
{
	struct srnic_engine_task *task;
	bool raced = false;

	list_for_each_entry(task, &engine->polled, polled) {
		if (!test_bit(SRNIC_TASK_POLL_RINGS, &task->flags))
			continue;
		if (task->ops->prepare_sleep && task->ops->prepare_sleep(task)) {
			srnic_engine_task_schedule(task);
			raced = true;
		}
	}
	return raced;
}

static void srnic_engine_woken(struct srnic_engine *engine)
{
	struct srnic_engine_task *task;

	list_for_each_entry(task, &engine->polled, polled)
		if (test_bit(SRNIC_TASK_POLL_RINGS, &task->flags) &&
		    task->ops->woken)
			task->ops->woken(task);
}

static bool srnic_engine_has_requests(struct srnic_engine *engine)
{
	return !llist_empty(&engine->runnable) ||
	       !llist_empty(&engine->control) || kthread_should_stop();
}

/*
 * The polling window after a sleep of @slept ns: twice as long if work
 * came back within the longest window (polling longer would have caught
 * it without a doorbell), the shortest one after a long idle period.
 */
static void srnic_engine_adapt_window(struct srnic_engine *engine, u64 slept)
{
	u64 base = (u64)READ_ONCE(poll_usecs) * NSEC_PER_USEC;
	u64 max = max_t(u64, (u64)READ_ONCE(poll_max_usecs) * NSEC_PER_USEC,
			base);

	if (!base)
		engine->window_ns = 0;
	else if (slept < max)
		engine->window_ns = clamp(engine->window_ns * 2, base, max);
	else
		engine->window_ns = base;
}

/*
 * A stream handed over (srnic_engine_task_poll()): poll twice its gap
 * between doorbells at least, within the longest window.
 */
static void srnic_engine_take_stream_gap(struct srnic_engine *engine)
{
	u64 gap = xchg(&engine->stream_gap_ns, 0);
	u64 max = (u64)READ_ONCE(poll_max_usecs) * NSEC_PER_USEC;

	if (engine->window_ns && 2 * gap > engine->window_ns)
		engine->window_ns = max(min(2 * gap, max), engine->window_ns);
}

/* Sleep a little between looks at the rings; wake-ups cut it short. */
static void srnic_engine_nap(u64 idle_ns)
{
	unsigned long us = clamp_t(u64, idle_ns / NSEC_PER_USEC / 16,
				   SRNIC_ENGINE_NAP_MIN_USECS,
				   SRNIC_ENGINE_NAP_MAX_USECS);

	usleep_range(us, us + us / 2);
}

static int srnic_engine_thread(void *arg)
{
	struct srnic_engine *engine = arg;
	u64 last_work = ktime_get_ns();
	u64 busy_since = 0, sleep_start, idle;

	/*
	 * Bound to its CPU, as siw's threads are, but by itself rather than
	 * with kthread_bind(): the scheduler still moves it if the CPU goes
	 * offline, and an administrator may move it. Before its first run
	 * it cannot be: since Linux 6.14 kthread() gives a new kthread its
	 * node's housekeeping CPUs, undoing an affinity set by its creator.
	 */
	set_cpus_allowed_ptr(current, cpumask_of(engine->cpu));
	srnic_engine_adapt_window(engine, U64_MAX);
	while (!kthread_should_stop()) {
		bool worked = srnic_engine_run_control(engine);

		worked |= srnic_engine_run_tasks(engine);
		if (worked) {
			if (READ_ONCE(engine->stream_gap_ns))
				srnic_engine_take_stream_gap(engine);
			last_work = ktime_get_ns();
			if (!busy_since) {
				busy_since = last_work;
			} else if (last_work - busy_since >
				   SRNIC_ENGINE_BUSY_SLICE_NSECS &&
				   !single_task_running()) {
				usleep_range(SRNIC_ENGINE_BUSY_NAP_USECS,
					     2 * SRNIC_ENGINE_BUSY_NAP_USECS);
				busy_since = 0;
			}
			cond_resched();
			continue;
		}
		busy_since = 0;

		idle = ktime_get_ns() - last_work;
		if (idle < engine->window_ns) {
			srnic_engine_poll(engine);
			/*
			 * Spin for the first spin_usecs if asked to, and only
			 * on a CPU nobody else wants: spinning while an
			 * application waits for the CPU costs it a time
			 * slice. Otherwise nap, longer the longer the engine
			 * is idle, and look again, still without asking for
			 * doorbells.
			 */
			if (idle < (u64)READ_ONCE(spin_usecs) * NSEC_PER_USEC &&
			    single_task_running() && !need_resched())
				cpu_relax();
			else
				srnic_engine_nap(idle);
			continue;
		}

		/*
		 * Sleep. The state is set before the last checks, so a
		 * wake_up_process() after them finds the thread sleeping
		 * and wakes it: no lost wakeup.
		 */
		set_current_state(TASK_INTERRUPTIBLE);
		if (srnic_engine_prepare_sleep(engine) ||
		    srnic_engine_has_requests(engine)) {
			/* Not sleeping after all: producers need no doorbell. */
			__set_current_state(TASK_RUNNING);
			srnic_engine_woken(engine);
			continue;
		}
		sleep_start = ktime_get_ns();
		schedule();
		srnic_engine_woken(engine);
		last_work = ktime_get_ns();
		srnic_engine_adapt_window(engine, last_work - sleep_start);
	}
	return 0;
}

static void srnic_engines_destroy(void)
{
	unsigned int i;

	for (i = 0; i < srnic_num_engines; i++) {
		WARN_ON(!list_empty(&srnic_engines[i].polled));
		kthread_stop(srnic_engines[i].thread);
	}
	kfree(srnic_engines);
	srnic_engines = NULL;
	srnic_num_engines = 0;
}

static int srnic_engines_create(void)
{
	unsigned int max = min_t(unsigned int, num_online_cpus(),
				 SRNIC_MAX_ENGINES);
	unsigned int n = 0, cpu;
	int err = 0;

	srnic_engines = kcalloc(max, sizeof(*srnic_engines), GFP_KERNEL);
	if (!srnic_engines)
		return -ENOMEM;
	for_each_online_cpu(cpu) {
		struct srnic_engine *engine = &srnic_engines[n];
		struct task_struct *thread;

		/* A CPU that came online since the count gets no engine. */
		if (n == max)
			break;
		init_llist_head(&engine->runnable);
		init_llist_head(&engine->control);
		INIT_LIST_HEAD(&engine->polled);
		engine->cpu = cpu;
		thread = kthread_create(srnic_engine_thread, engine,
					"srnic/%u", cpu);
		if (IS_ERR(thread)) {
			err = PTR_ERR(thread);
			break;
		}
		if (realtime)
			sched_set_fifo_low(thread);
		else
			set_user_nice(thread, clamp(engine_nice, MIN_NICE,
						    MAX_NICE));
		engine->thread = thread;
		wake_up_process(thread);
		srnic_num_engines = ++n;
	}
	if (err)
		srnic_engines_destroy();
	return err;
}

/**
 * srnic_engines_start() - a device is coming: make sure the engines run
 * @sdev: the device
 *
 * Return: 0, or a negative errno when the first device's engines could not
 * be started.
 */
int srnic_engines_start(struct srnic_dev *sdev)
{
	int err = 0;

	mutex_lock(&srnic_engines_lock);
	if (!srnic_engine_users)
		err = srnic_engines_create();
	if (!err)
		srnic_engine_users++;
	mutex_unlock(&srnic_engines_lock);
	return err;
}

/**
 * srnic_engines_stop() - a device is gone: the last one stops the engines
 * @sdev: the device; all its tasks must have been stopped
 */
void srnic_engines_stop(struct srnic_dev *sdev)
{
	mutex_lock(&srnic_engines_lock);
	if (!WARN_ON(!srnic_engine_users) && !--srnic_engine_users)
		srnic_engines_destroy();
	mutex_unlock(&srnic_engines_lock);
}
