/* SPDX-License-Identifier: GPL-2.0 */
/*
 * srnic: the objects shared by the module's files (included by srnic.h).
 * Every srnic object embeds its ib_core object first and has a
 * to_srnic_*() converter.
 */
#ifndef SRNIC_OBJECTS_H
#define SRNIC_OBJECTS_H

#include <linux/completion.h>
#include <linux/device.h>
#include <linux/iosys-map.h>
#include <linux/idr.h>
#include <linux/in6.h>
#include <linux/list.h>
#include <linux/llist.h>
#include <linux/mutex.h>
#include <linux/netdevice.h>
#include <linux/prandom.h>
#include <linux/rcupdate.h>
#include <linux/refcount.h>
#include <linux/spinlock.h>
#include <linux/xarray.h>
#include <net/dst_cache.h>
#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>

#include "srnic_compat.h"
#include "uapi/rdma/srnic-abi.h"
#include "srnic_limits.h"

/**
 * struct srnic_port - the device's single RoCEv2 port
 * @state: IB_PORT_ACTIVE or IB_PORT_DOWN, following the netdev's
 *	   admin state and carrier
 * @active_mtu: path MTU the netdev's MTU leaves room for
 *
 * Written from the netdev notifier (under RTNL) and read by query_port,
 * hence the READ_ONCE/WRITE_ONCE accessors.
 */
struct srnic_port {
	enum ib_port_state state;
	enum ib_mtu active_mtu;
};

/* Per-device packet counters (srnic_counters.c names them). */
enum srnic_counter {
	SRNIC_CNT_RX_PACKETS,		/* valid packets received */
	SRNIC_CNT_RX_DROP_BAD_IP,	/* IPv4 options, not UDP over IPv6 */
	SRNIC_CNT_RX_DROP_TOO_SHORT,	/* truncated UDP or headers */
	SRNIC_CNT_RX_DROP_BAD_TVER,	/* BTH transport version not 0 */
	SRNIC_CNT_RX_DROP_BAD_OPCODE,	/* opcode srnic does not accept */
	SRNIC_CNT_RX_DROP_BAD_PAD,	/* pad count impossible here */
	SRNIC_CNT_RX_DROP_BAD_PAYLOAD,	/* payload on an opcode without */
	SRNIC_CNT_RX_DROP_BAD_PKEY,	/* P_Key not the default */
	SRNIC_CNT_RX_DROP_BAD_ICRC,	/* invariant CRC mismatch */
	SRNIC_CNT_RX_DROP_NO_QP,	/* destination QP does not exist */
	SRNIC_CNT_RX_DROP_BAD_QP,	/* QP type, state or peer address */
	SRNIC_CNT_RX_DROP_QUEUE_FULL,	/* the QP's receive backlog is full */
	SRNIC_CNT_RX_DROP_UNEXPECTED,	/* stale or bogus response, dropped */
	SRNIC_CNT_RX_DUPLICATE,		/* duplicate requests answered */
	SRNIC_CNT_RX_OUT_OF_SEQUENCE,	/* requests ahead of the expected PSN */
	SRNIC_CNT_RX_DROP_STALE,	/* work dropped for a READ retry */
	SRNIC_CNT_TX_PACKETS,		/* packets handed to the IP layer */
	SRNIC_CNT_TX_ERRORS,		/* packets the IP layer refused */
	SRNIC_CNT_TX_NAK_SEQ,		/* PSN sequence error NAKs sent */
	SRNIC_CNT_TX_NAK_RNR,		/* RNR NAKs sent */
	SRNIC_CNT_TX_NAK_OTHER,		/* invalid request/access/op NAKs */
	SRNIC_CNT_RETRANSMITS,		/* requests sent again (go-back-N) */
	SRNIC_CNT_TIMEOUTS,		/* local ACK timeouts */
	SRNIC_CNT_RNR_NAKS_RECEIVED,	/* RNR NAKs the requester received */
	SRNIC_CNT_RX_DROP_BAD_QKEY,	/* UD: Q_Key not the QP's */
	SRNIC_CNT_RX_DROP_NO_RECV_WQE,	/* UD, UC: no receive WQE posted */
	SRNIC_CNT_RX_DROP_UC,		/* UC: packets of messages dropped */
	SRNIC_CNT_DIRECT_WINDOWS,	/* direct windows granted */
	SRNIC_CNT_DIRECT_LOANS,		/* direct loans granted */
	SRNIC_CNT_TX_BATCHES,		/* UDP GSO skbs of several packets */
	SRNIC_CNT_NP_ECN_MARKED,	/* received with ECN CE, for a QP */
	SRNIC_CNT_NP_CNP_SENT,		/* CNPs sent for them */
	SRNIC_CNT_RP_CNP_HANDLED,	/* CNPs received for a QP, ECN on */
	SRNIC_CNT_RP_CNP_IGNORED,	/* CNPs received, ECN off or no QP */
	SRNIC_CNT_RP_RATE_DECREASES,	/* requesters' rate cuts for CNPs */
	SRNIC_CNT_RP_RATE_INCREASES,	/* their recovery stages */
	SRNIC_CNT_RP_RATE_WAITS,	/* paced requesters stopped to wait */
	SRNIC_CNT_TX_PACING_WAITS,	/* packet pacing: sends that waited */
	SRNIC_CNT_RX_OOO_KEPT,		/* requests ahead kept (selective) */
	SRNIC_CNT_TX_NAK_SELECTIVE,	/* selective NAKs sent */
	SRNIC_CNT_RX_NAK_SELECTIVE,	/* selective NAKs received */
	SRNIC_CNT_SELECTIVE_RETRANSMITS, /* packets sent again selectively */
	SRNIC_CNT_RX_READ_KEPT,		/* READ responses ahead kept */
	SRNIC_CNT_RAW_TX_FRAMES,	/* raw packet QPs: frames sent */
	SRNIC_CNT_RAW_RX_FRAMES,	/* raw packet QPs: frames received */
	SRNIC_CNT_TM_MATCHED,		/* tagged messages a posted tag took */
	SRNIC_CNT_TM_UNEXPECTED,	/* tagged messages no posted tag took */
	SRNIC_CNT_TM_RNDV_READS,	/* rendezvous whose data was read */
	SRNIC_NUM_COUNTERS,
};

/**
 * struct srnic_qp_counter - the counts of a counter ib_core binds QPs to
 * @rcu: frees it once no counting QP can still see it
 * @value: indexed by enum srnic_counter, as the port's counters
 *
 * `rdma statistic qp set link DEV/1 auto type on` (or `rdma statistic qp
 * bind`) has ib_core allocate a struct rdma_counter and bind QPs to it; its
 * id (srnic's choice) names one of these in srnic_dev.qp_counters. A bound
 * QP's events count here instead of in its device's counters, and ib_core
 * adds every counter of the port (and those released) to the port's
 * figures in `rdma statistic show link`, as for hardware QP counters
 * (srnic_counters.c).
 */
struct srnic_qp_counter {
	struct rcu_head rcu;
	atomic64_t value[SRNIC_NUM_COUNTERS];
};

/* The most engine threads srnic runs (one per online CPU). */
#define SRNIC_MAX_ENGINES 64

/**
 * struct srnic_engine - one NIC engine thread (srnic_engine.c)
 * @thread: the kthread
 * @cpu: the CPU it is bound to
 * @runnable: tasks with work, queued once each (SRNIC_TASK_QUEUED)
 * @control: attach/detach requests for the thread to carry out
 * @polled: tasks whose rings the thread polls; only the thread uses it
 * @window_ns: how long the thread polls after work before it sleeps
 *	       (adaptive); only the thread uses it
 * @stream_gap_ns: the gap between doorbells of the last stream handed to
 *		   the thread (srnic_engine_task_poll()), 0 once the thread
 *		   has taken it into @window_ns
 */
struct srnic_engine {
	struct task_struct *thread;
	unsigned int cpu;
	struct llist_head runnable;
	struct llist_head control;
	struct list_head polled;
	u64 window_ns;
	u64 stream_gap_ns;
};

struct srnic_engine_task;

/**
 * struct srnic_engine_task_ops - what an engine does with a task
 * @run: do a budget of work; return true if work remains. Never runs
 *	 concurrently with itself; called by the engine thread, or by a
 *	 doorbell syscall (srnic_engine_task_run_here()), in process context;
 *	 or by a post or a received packet (srnic_engine_task_kick()) with
 *	 bottom halves disabled, where srnic_engine_task_may_sleep() is false
 *	 and work that would sleep is left to the engine
 *	 (srnic_engine_task_defer()).
 * @has_work: while the engine polls the task's rings (SRNIC_TASK_POLL_RINGS):
 *	      is new work visible (e.g. a ring's producer index moved)?
 *	      Optional.
 * @prepare_sleep: the engine is about to sleep: ask producers for
 *		   doorbells (set need-wakeup, full barrier; clear
 *		   SRNIC_TASK_POLL_RINGS, unless something else will run the
 *		   task) and return true if work arrived meanwhile. Optional.
 * @woken: the engine polls the task's rings again: doorbells may stop.
 *	   Optional.
 */
struct srnic_engine_task_ops {
	bool (*run)(struct srnic_engine_task *task);
	bool (*has_work)(struct srnic_engine_task *task);
	bool (*prepare_sleep)(struct srnic_engine_task *task);
	void (*woken)(struct srnic_engine_task *task);
};

enum srnic_engine_task_flags {
	SRNIC_TASK_QUEUED,	/* on the engine's runnable list */
	SRNIC_TASK_STOPPED,	/* srnic_engine_task_stop() was called */
	SRNIC_TASK_POLL_RINGS,	/* the engine polls its rings: no doorbells */
	SRNIC_TASK_RUNNING,	/* some context is in run() (a bit lock) */
	SRNIC_TASK_PENDING,	/* a context found it running: run it again */
	SRNIC_TASK_ATOMIC,	/* the run in progress may not sleep */
	SRNIC_TASK_ATOMIC_OK,	/* it may run where it may not sleep */
	SRNIC_TASK_DEFERRED,	/* a run left work to the engine */
};

/**
 * struct srnic_engine_task - work an engine runs: one per QP
 * @run_node: entry in the engine's runnable list
 * @flags: enum srnic_engine_task_flags bits
 * @engine: the engine the task belongs to, for life
 * @ops: callbacks
 * @polled: entry in the engine's polled list
 */
struct srnic_engine_task {
	struct llist_node run_node;
	unsigned long flags;
	struct srnic_engine *engine;
	const struct srnic_engine_task_ops *ops;
	struct list_head polled;
};

/**
 * srnic_engine_task_may_sleep() - may the task's run in progress sleep?
 * @task: the task, from its run()
 *
 * False in a run that a post or a received packet started in its own
 * context (srnic_engine_task_kick()): such a run allocates with GFP_ATOMIC
 * and leaves what would sleep to the engine (srnic_engine_task_defer()).
 */
static inline bool srnic_engine_task_may_sleep(const struct srnic_engine_task *task)
{
	return !test_bit(SRNIC_TASK_ATOMIC, &task->flags);
}

/* Fault injection (srnic_fault.c): directions and kinds. */
enum srnic_fault_dir {
	SRNIC_FAULT_TX,
	SRNIC_FAULT_RX,
	SRNIC_FAULT_NUM_DIRS,
};

enum srnic_fault_kind {
	SRNIC_FAULT_DROP,
	SRNIC_FAULT_CORRUPT,
	SRNIC_FAULT_DUPLICATE,
	SRNIC_FAULT_DELAY,
	SRNIC_FAULT_REORDER,
	SRNIC_FAULT_NUM_KINDS,
};

struct srnic_fault;
struct srnic_ring_chunk;
struct srnic_tm;

/* One probability file in debugfs. */
struct srnic_fault_knob {
	struct srnic_fault *fault;
	u32 *value;
};

/**
 * struct srnic_fault - a device's fault injection (srnic_fault.c)
 * @active: any probability is non-zero
 * @stopped: the device is going away: hold nothing more
 * @lock: protects @rnd and @seed
 * @rnd: the pseudo-random sequence
 * @seed: its last seed
 * @ppm: probabilities in parts per million, by direction and kind
 * @delay_us: hold time of delayed packets (bound for reordered ones)
 * @injected: faults injected, by direction and kind
 * @held: delayed and reordered packets by release time (skb->tstamp)
 * @timer: releases @held
 * @knobs: what the debugfs files of @ppm point to
 */
struct srnic_fault {
	bool active;
	bool stopped;
	spinlock_t lock;	/* @rnd, @seed */
	struct rnd_state rnd;
	u64 seed;
	u32 ppm[SRNIC_FAULT_NUM_DIRS][SRNIC_FAULT_NUM_KINDS];
	u32 delay_us;
	atomic64_t injected[SRNIC_FAULT_NUM_DIRS][SRNIC_FAULT_NUM_KINDS];
	struct sk_buff_head held[SRNIC_FAULT_NUM_DIRS];
	struct timer_list timer[SRNIC_FAULT_NUM_DIRS];
	struct srnic_fault_knob knobs[SRNIC_FAULT_NUM_DIRS][SRNIC_FAULT_NUM_KINDS];
};

/**
 * struct srnic_raw_steering - a device's flows to its raw packet QPs
 *			       (srnic_raw.c)
 * @lock: serialises changes of the lists and of the fields below, with
 *	  RTNL taken first
 * @flows: normal flows (struct srnic_flow), by priority; read under RCU
 * @defaults: ALL_DEFAULT and MC_DEFAULT flows; read under RCU
 * @sniffers: SNIFFER flows; read under RCU
 * @steering_flows: flows on @flows and @defaults
 * @sniffer_flows: flows on @sniffers
 * @rx_handler_on: srnic's receive handler is on the netdev
 * @tap_on: @tap is on the netdev
 * @tap: the sniffers' packet tap (ETH_P_ALL on the netdev)
 */
struct srnic_raw_steering {
	struct mutex lock;	/* see above */
	struct list_head flows;
	struct list_head defaults;
	struct list_head sniffers;
	unsigned int steering_flows;
	unsigned int sniffer_flows;
	bool rx_handler_on;
	bool tap_on;
	struct packet_type tap;
};

/**
 * struct srnic_dev - one srnic RDMA device, bound to one netdev
 * @ibdev: the ib_core device; freed by ib_core after dealloc_driver
 * @ndev: the netdev this device sends and receives on (reference held
 *	  from creation to dealloc_driver)
 * @ndev_tracker: reference tracker for @ndev
 * @parent: the device's sysfs parent, /sys/devices/srnic/link<N>, whose
 *	    net/ directory links to @ndev so tools find the netdev
 * @parent_net_dir: the net/ directory under @parent
 * @parent_net_link: name of the link to @ndev in @parent_net_dir
 * @list: entry in the device list (srnic_devices.c)
 * @port: port state
 * @pd_ids: allocator of protection domain numbers
 * @mr_table: MR index (key >> 8) -> struct srnic_mr, read under RCU
 * @mr_next: next index xa_alloc_cyclic() tries, under @mr_table's lock
 * @mr_laps: times the cyclic allocation wrapped, under @mr_table's lock
 * @mr_key_seed: random start of the key bytes of this device
 * @mw_table: MW index (rkey >> 8) -> struct srnic_mw, read under RCU
 * @mw_next: next index xa_alloc_cyclic() tries, under @mw_table's lock
 * @mw_laps: times the cyclic allocation wrapped, under @mw_table's lock
 * @debugfs: the device's debugfs directory (the fault injector's files)
 * @cq_ids: allocator of CQ numbers
 * @srq_ids: allocator of SRQ numbers
 * @wq_ids: allocator of WQ numbers (srnic_rss.c)
 * @rwq_ind_table_ids: allocator of indirection table numbers
 * @qps: QPN -> struct srnic_qp; entries are looked up under RCU
 * @next_qpn: cursor of the cyclic QPN allocation
 * @link_index: number in the parent's name
 * @net: namespace whose sockets the device uses (its netdev's at creation)
 * @counters: enum srnic_counter, updated from any context; a QP bound to
 *	      an ib_core counter counts in its struct srnic_qp_counter instead
 * @qp_counters: ib_core counter id -> struct srnic_qp_counter
 * @ah_table: AH number -> struct srnic_ah, for UD WQEs, under its own lock
 * @ah_next: next AH number xa_alloc_cyclic() tries
 * @fault: packet fault injection (debugfs)
 * @direct_lock: guards @direct_windows, @direct_dead, @direct_loan_ids and
 *		 the QPs' and CQs' direct_* counts (srnic_direct.c)
 * @direct_mutex: serialises the ending of direct loans
 * @direct_loan_ids: the last direct loan id handed out, under @direct_lock
 * @direct_windows: the device's granted direct windows and loans
 * @direct_dead: revoked windows waiting for @direct_reap
 * @direct_reap: frees @direct_dead outside the revoker's locks
 * @mcast_list: struct srnic_mcast, one per QP attached to a multicast group
 * @mcast_lock: with RTNL, guards changes of @mcast_list
 * @max_dm_size: device memory budget (module parameter max_dm_kib at
 *		 creation), bytes
 * @dm_used: device memory allocated, bytes, charged against @max_dm_size
 * @odp_mrs: ODP MRs of the device; while there is one, user QPs' tasks do
 *	     not run in a context that may not sleep (srnic_odp.c)
 * @odp_gate: serialises the first ODP MR's wait for such runs
 * @ecn: ECN is on (sysfs ``ecn``, on when the device is created):
 *	 connected QPs' packets are sent
 *	 ECN-capable, a CE mark on a packet a QP receives is answered with a
 *	 CNP to its peer QP, and CNPs received count as handled (srnic_net.c)
 * @selective_repeat: selective repeat is on (sysfs ``selective_repeat``,
 *		      on when the device is created): RC requesters offer
 *		      it, and responders keep requests ahead of the expected
 *		      PSN from requesters that offer it (srnic_resp.c)
 * @multipath: UDP source ports each RC requester spreads its requests
 *	       over (sysfs ``multipath``, 1 to SRNIC_MAX_MULTIPATH, 1 when
 *	       the device is created), when its peer does selective repeat
 * @ooo_held: requests kept by the device's responders, at most
 *	      SRNIC_OOO_MAX_HELD
 * @raw: flow steering to raw packet QPs
 * @capture: the capture netdev (sysfs ``capture``), or NULL; changed under
 *	     RTNL, read under RCU (srnic_capture.c)
 */
struct srnic_dev {
	struct ib_device ibdev;
	struct net_device *ndev;
	netdevice_tracker ndev_tracker;
	struct device *parent;
	struct kobject *parent_net_dir;
	char parent_net_link[IFNAMSIZ];
	struct list_head list;
	struct srnic_port port;
	struct ida pd_ids;
	struct xarray mr_table;
	u32 mr_next;
	u32 mr_laps;
	u8 mr_key_seed;
	struct xarray mw_table;
	u32 mw_next;
	u32 mw_laps;
	struct dentry *debugfs;
	struct ida cq_ids;
	struct ida srq_ids;
	struct ida wq_ids;
	struct ida rwq_ind_table_ids;
	struct xarray qps;
	u32 next_qpn;
	int link_index;
	possible_net_t net;
	atomic64_t counters[SRNIC_NUM_COUNTERS];
	struct xarray qp_counters;
	struct xarray ah_table;
	u32 ah_next;
	struct srnic_fault fault;
	spinlock_t direct_lock;		/* the two lists below */
	struct mutex direct_mutex;	/* ending loans */
	u32 direct_loan_ids;		/* the last loan id; direct_lock */
	struct list_head direct_windows;
	struct list_head direct_dead;
	struct work_struct direct_reap;
	struct list_head mcast_list;
	spinlock_t mcast_lock;	/* with RTNL, guards changes of mcast_list */
	u64 max_dm_size;
	atomic64_t dm_used;
	atomic_t odp_mrs;
	struct mutex odp_gate;		/* the first ODP MR's wait */
	bool ecn;
	bool selective_repeat;
	u8 multipath;
	atomic_t ooo_held;
	struct srnic_raw_steering raw;
	struct net_device __rcu *capture;
};

/*
 * The control record comes first, in whole cache lines; the entries follow
 * (a ring of up to 3904 bytes of entries takes one page).
 */
#define SRNIC_QUEUE_CTRL_SIZE ALIGN(sizeof(struct srnic_queue_ctrl), \
				    SRNIC_CACHELINE_SIZE)
/* Upper bound on one ring's memory (control record included). */
#define SRNIC_QUEUE_MAX_BYTES (64UL << 20)

/**
 * struct srnic_queue - one ring shared with the provider (or kernel-only)
 * @buf: the ring's memory: control record, then the entries; its own
 *	 vmalloc_user() buffer, or a part of a ring chunk's (@chunk)
 * @size: bytes of @buf: page aligned in its own buffer, a multiple of
 *	  SRNIC_RING_UNIT in a chunk
 * @ctrl: the control record at the start of @buf
 * @entries: first entry
 * @num_entries: power of two
 * @entry_size: power of two
 * @mmap_entry: for user rings in their own buffer, the entry that owns @buf
 * @chunk: for rings in a user context's ring arena, the chunk holding @buf
 * @offset: where @buf starts in @chunk's buffer
 *
 * Fields of @ctrl written by the provider are untrusted: read them once
 * (READ_ONCE) and validate before use.
 */
struct srnic_queue {
	void *buf;
	size_t size;
	struct srnic_queue_ctrl *ctrl;
	void *entries;
	u32 num_entries;
	u32 entry_size;
	struct rdma_user_mmap_entry *mmap_entry;
	struct srnic_ring_chunk *chunk;
	u32 offset;
};

static inline void *srnic_queue_entry(struct srnic_queue *q, u32 index)
{
	return q->entries + (size_t)(index & (q->num_entries - 1)) * q->entry_size;
}

/**
 * struct srnic_ring_arena - a user context's memory for small rings
 * @lock: guards @chunks and every chunk's allocation map
 * @chunks: struct srnic_ring_chunk, each one vmalloc_user() buffer behind
 *	    one mmap entry, holding rings of SRNIC_RING_UNIT granules
 * @next_chunk_size: bytes of the next chunk made: each new one doubles
 *		     it, up to SRNIC_RING_CHUNK_MAX
 *
 * A ring of a few WQEs in its own buffer would take a whole page, and a
 * mapping of its own in the process: at 100 000 idle QPs the SQs' unused
 * page tails were a quarter of their memory. The SQs of a context share
 * chunks instead (srnic_queue_init_shared()); the provider maps each chunk
 * once (struct srnic_queue_desc's ring_offset says where a ring starts).
 * RQs and CQs keep buffers of their own: a direct-path loan maps them
 * page by page into another process (srnic_direct.c).
 */
struct srnic_ring_arena {
	struct mutex lock;		/* @chunks, each chunk's map */
	struct list_head chunks;
	u32 next_chunk_size;
};

struct srnic_ucontext {
	struct ib_ucontext ibuc;
	struct srnic_ring_arena ring_arena;
};

struct srnic_pd {
	struct ib_pd ibpd;
	u32 pdn;
};

/* What an MR translates and how it came to be. */
enum srnic_mr_type {
	SRNIC_MR_USER,		/* reg_user_mr: pinned user pages */
	SRNIC_MR_DMA,		/* get_dma_mr: all kernel virtual memory */
	SRNIC_MR_FAST_REG,	/* alloc_mr: page list from map_mr_sg */
	SRNIC_MR_ODP,		/* reg_user_mr with IB_ACCESS_ON_DEMAND */
	SRNIC_MR_DM,		/* reg_dm_mr: referenced device memory pages */
	SRNIC_MR_DMABUF,	/* reg_user_mr_dmabuf: a dma-buf's CPU mapping */
};

/* Which key of an MR a lookup presents (srnic's are equal today). */
enum srnic_key_kind {
	SRNIC_LKEY,
	SRNIC_RKEY,
};

/**
 * struct srnic_mr - a memory region
 * @ibmr: the ib_core MR; lkey == rkey == (index << 8) | key byte
 * @pd: the PD the MR was registered in (ib_core sets ibmr.pd only after
 *	reg_user_mr returns, too late for lookups)
 * @type: what @pages describes
 * @access: IB_ACCESS_* flags granted
 * @key: the key lookups accept, as lkey and as rkey; for a fast-reg MR
 *	 the engine sets it from IB_WR_REG_MR (ib_update_fast_reg_key())
 * @valid: lookups may succeed; a fast-reg MR is valid from an
 *	   IB_WR_REG_MR to its invalidation (LOCAL_INV or a SEND with
 *	   invalidate), published with release semantics after the fields
 *	   it makes current
 * @fr_lock: a fast-reg MR's: serialises REG_MR and invalidation
 * @index: slot in the device's mr_table
 * @iova: first address of the MR
 * @length: bytes from @iova the MR covers
 * @umem: pinned user memory (SRNIC_MR_USER)
 * @dmabuf: the dma-buf of a DMABUF MR, referenced while the MR exists
 * @dmabuf_map: its exporter's CPU mapping (dma_buf_vmap()), which keeps the
 *		buffer in place until srnic unmaps it when the MR is freed
 * @pages: one struct page per PAGE_SIZE of the MR (USER, FAST_REG, DM,
 *	   DMABUF; the MR holds a reference on each page of a DM or DMABUF MR)
 * @num_pages: valid entries of @pages
 * @max_pages: capacity of @pages
 * @page_offset: offset of @iova in @pages[0]
 * @odp_faults: pages the engine faulted in for an access (SRNIC_MR_ODP;
 *	        rdma resource show mr's odp_faults)
 * @odp: the on-demand paging umem (SRNIC_MR_ODP): the MR's own range, or
 *	 for an implicit MR (all of the process's address space) the root
 *	 of @odp_children; see srnic_odp.c
 * @odp_children: an implicit MR's child umems, by user address >>
 *	 SRNIC_ODP_CHILD_SHIFT; created on first access, freed with the MR
 * @odp_child_lock: serialises the creation of children
 * @odp_map_lock: serialises srnic's calls of ib_umem_odp_map_dma_and_lock()
 *		  on the MR: each points hmm_range_fault() at the umem's own
 *		  PFN list, outside umem_mutex, so two at once would map the
 *		  other's snapshot (a page gone since, for one)
 * @users: one for the registration, one per in-flight access
 * @released: completed when @users drops to zero; dereg_mr waits for it
 * @rcu: the struct is freed after a grace period (lookups run under RCU)
 * @owner_cred: credentials of the registering process (direct windows)
 * @owner_tgid: that process (direct windows: whether it is dumpable)
 *
 * Everything but @users is written before the MR is published in
 * mr_table and never changes while it is there (rereg_mr publishes a
 * new struct under the same key instead), except for fast-reg MRs,
 * whose page list, @key, @iova, @length, @access and @valid follow
 * map_mr_sg and the REG_MR/LOCAL_INV work requests.
 */
struct srnic_mr {
	struct ib_mr ibmr;
	struct srnic_pd *pd;
	enum srnic_mr_type type;
	int access;
	u32 key;
	bool valid;
	spinlock_t fr_lock;	/* REG_MR and invalidation of a fast-reg MR */
	u32 index;
	u64 iova;
	u64 length;
	struct ib_umem *umem;
	struct dma_buf *dmabuf;
	struct iosys_map dmabuf_map;
	struct page **pages;
	unsigned long num_pages;
	unsigned long max_pages;
	unsigned int page_offset;
	atomic_t odp_faults;
	struct ib_umem_odp *odp;
	struct xarray odp_children;
	struct mutex odp_child_lock;	/* creation of @odp_children */
	struct mutex odp_map_lock;
	refcount_t users;
	struct completion released;
	struct rcu_head rcu;
	const struct cred *owner_cred;
	struct pid *owner_tgid;
};

/* The states of a memory window (IBTA 10.6.7). */
enum srnic_mw_state {
	SRNIC_MW_FREE,		/* type 2, not bound: no access */
	SRNIC_MW_VALID,		/* bound (type 1: allocated) */
};

/**
 * struct srnic_mw - a memory window (srnic_mw.c)
 * @ibmw: the ib_core MW; ibmw.rkey is the key the verbs reported last
 * @lock: guards everything below; taken in the engine and the verbs
 * @state: enum srnic_mw_state
 * @rkey: the key remote accesses must present: index << 8 | key byte
 * @index: slot in the device's mw_table
 * @mr_key: key of the MR the window is bound to; a lookup finds the MR
 *	    by it, so a deregistered MR's window gives access to nothing
 * @addr: first address of the window (an address of the MR)
 * @length: bytes of the window; 0 for a type 1 MW bound to nothing
 * @access: IB_ACCESS_REMOTE_* flags the window grants
 * @qpn: the QP a type 2 MW was bound through: the only one it serves
 *
 * The MW holds no reference on its MR or QP: each access looks the MR up
 * by @mr_key, for one access, as an MR rkey would be. ib_core frees the
 * struct when dealloc_mw returns, so srnic_dealloc_mw() waits for the
 * RCU readers of mw_table.
 */
struct srnic_mw {
	struct ib_mw ibmw;
	spinlock_t lock;		/* guards the binding */
	enum srnic_mw_state state;
	u32 rkey;
	u32 index;
	u32 mr_key;
	u64 addr;
	u64 length;
	int access;
	u32 qpn;
};

/**
 * struct srnic_dm - device memory (ibv_alloc_dm)
 * @ibdm: the ib_core DM; ibdm.length is the length asked for
 * @buf: zeroed vmalloc_user() memory, owned by @mmap_entry
 * @size: bytes of @buf (the length rounded up to pages), charged to the
 *	  device's dm_used
 * @mmap_entry: how the owning process maps @buf
 *
 * An MR on the memory (reg_dm_mr) references its pages, and ib_core
 * refuses dealloc_dm while such an MR exists.
 */
struct srnic_dm {
	struct ib_dm ibdm;
	void *buf;
	size_t size;
	struct rdma_user_mmap_entry *mmap_entry;
};

/**
 * struct srnic_cq - a completion queue
 * @ibcq: the ib_core CQ
 * @ring: CQE ring; mapped into the process for user CQs
 * @lock: serialises CQE producers and comp_handler calls
 * @producer: next CQE index to write (kernel memory, never read back
 *	      from @ring)
 * @notify_seq_seen: last arm sequence (ctrl->notify_seq) consumed
 * @overrun: an overrun happened; no more CQEs are written
 * @poll_lock: serialises kernel consumers (poll_cq, req_notify_cq)
 * @cqn: CQ number, reported to the provider
 * @direct_users: QPs and XRC SRQs whose direct path completes into the CQ,
 *		  under the device's direct_lock
 * @event_cpu: where the completion events of a kernel CQ polled from a
 *	       bound work queue are raised, its completion vector's CPU; -1
 *	       for the others (raised where the CQE is posted)
 * @event_csd: raises a completion event on @event_cpu (an IPI)
 * @events_in_flight: events @event_csd was queued for and has not raised
 *
 * For kernel CQs the ring's control record is kernel memory only, and
 * poll_cq/req_notify_cq play the provider's part of the protocol on it.
 */
struct srnic_cq {
	struct ib_cq ibcq;
	struct srnic_queue ring;
	spinlock_t lock;	/* CQE producers, comp_handler */
	u32 producer;
	u32 notify_seq_seen;
	bool overrun;
	spinlock_t poll_lock;	/* kernel consumers */
	u32 cqn;
	u32 direct_users;	/* QPs and XRC SRQs using it; direct_lock */
	int event_cpu;
	call_single_data_t event_csd;
	atomic_t events_in_flight;
};

/**
 * struct srnic_wq - one work queue of a QP (its SQ or its RQ)
 * @ring: WQE ring; mapped into the process for user QPs
 * @lock: serialises kernel posts and the consumer side (flush, engine)
 * @consumer: next WQE index the kernel will consume (kernel memory)
 * @max_wr: entries of @ring
 * @max_sge: SGEs a WQE may carry
 *
 * For kernel QPs @ring.ctrl->producer is written by srnic's post verbs;
 * for user QPs by the provider, and then untrusted.
 */
struct srnic_wq {
	struct srnic_queue ring;
	spinlock_t lock;	/* kernel posts, consumer side */
	u32 consumer;
	u32 max_wr;
	u32 max_sge;
};

/**
 * struct srnic_rwq - a work queue of type RQ (ibv_create_wq(), srnic_rss.c):
 *		      a receive queue of its own, which a hash QP's
 *		      indirection table spreads frames over
 * @ibwq: ib_core's WQ; @ibwq.wq_num is its number
 * @rq: its ring of receive WQEs (the RQ's format) with the consumer side
 * @consume: held while a frame is delivered to it and while its state
 *	     changes (hash QPs' tasks run in process context)
 * @state: IB_WQS_RESET, _RDY or _ERR; frames land only in RDY
 */
struct srnic_rwq {
	struct ib_wq ibwq;
	struct srnic_wq rq;
	struct mutex consume;	/* see above */
	enum ib_wq_state state;
};

/**
 * struct srnic_rwq_ind_table - an indirection table of WQs
 * @ibtbl: ib_core's, which holds the WQs and the table's size
 */
struct srnic_rwq_ind_table {
	struct ib_rwq_ind_table ibtbl;
};

/**
 * struct srnic_rss - a hash QP's receive side scaling (srnic_rss.c)
 * @fields: SRNIC_RX_HASH_* of the header fields hashed
 * @key_len: bytes of @key
 * @key: the Toeplitz key
 * @table: the indirection table the hash indexes
 */
struct srnic_rss {
	u64 fields;
	u8 key_len;
	u8 key[SRNIC_RX_HASH_KEY_MAX];
	struct ib_rwq_ind_table *table;
};

/**
 * struct srnic_srq - a shared receive queue
 * @ibsrq: the ib_core SRQ
 * @rq: its ring of receive WQEs (the RQ's format) with the consumer side:
 *	@rq.lock serialises kernel posts and every QP taking WQEs
 * @srqn: SRQ number, reported to the provider
 * @limit: armed srq_limit, 0 when disarmed; under @rq.lock
 * @xrcd: an XRC SRQ's domain, NULL for a basic SRQ
 * @ref: XRC SRQs: references; srnic_xrc_srq_get() takes one
 * @released: XRC SRQs: completed when @ref drops to zero
 * @tm: a tag-matching SRQ's tag list (srnic_tm.c), NULL for others
 */
struct srnic_srq {
	struct ib_srq ibsrq;
	struct srnic_wq rq;
	u32 srqn;
	u32 limit;
	struct srnic_xrcd *xrcd;
	refcount_t ref;
	struct completion released;
	struct srnic_tm *tm;
};

/**
 * struct srnic_tm_match - where a message to a tag-matching SRQ landed
 *			   (srnic_tm_take())
 * @wc_opcode: its receive completion's opcode (SRNIC_WC_TM_RECV or
 *	       SRNIC_WC_TM_NO_TAG); 0 for a QP without a tag-matching SRQ
 * @wc_flags: SRNIC_CQE_TM_MATCH, SRNIC_CQE_TM_DATA_VALID
 * @skip: bytes of the message's start not placed (an eager header)
 * @rndv: a matched rendezvous: the data is READ from @rndv_va
 * @tag: the matched tag (with SRNIC_CQE_TM_MATCH)
 * @priv: the header's app_ctx (with SRNIC_CQE_TM_MATCH)
 * @rndv_va: the rendezvous' remote buffer
 * @rndv_rkey: its R_Key
 * @rndv_len: its length
 */
struct srnic_tm_match {
	u8 wc_opcode;
	u8 wc_flags;
	u8 skip;
	bool rndv;
	u64 tag;
	u32 priv;
	u64 rndv_va;
	u32 rndv_rkey;
	u32 rndv_len;
};

/**
 * struct srnic_xrcd - an XRC domain (srnic_srq.c)
 * @ibxrcd: the ib_core XRC domain
 * @srqs: SRQ number -> its XRC SRQs (struct srnic_srq), looked up under
 *	  RCU by the XRC_TGT QPs of the domain (srnic_xrc_srq_get())
 */
struct srnic_xrcd {
	struct ib_xrcd ibxrcd;
	struct xarray srqs;
};

/**
 * struct srnic_qp_attrs - attributes set by modify_qp, as query_qp reports
 * @ah_attr: primary path; holds a reference on its sgid_attr
 * @path_mtu: as requested
 * @mtu: path MTU in effect (capped at the port's active MTU at RTR)
 * @qkey: as in struct ib_qp_attr (not used by RC)
 * @rq_psn: expected PSN of the first incoming request (24 bits)
 * @sq_psn: PSN of the first outgoing request (24 bits)
 * @dest_qp_num: the remote QP
 * @access_flags: remote access the responder allows (IB_ACCESS_*)
 * @pkey_index: index in the one-entry P_Key table
 * @timeout: local ACK timeout exponent (4.096 us * 2^timeout)
 * @retry_cnt: transport retries before IB_WC_RETRY_EXC_ERR
 * @rnr_retry: RNR retries (7 = infinite)
 * @min_rnr_timer: RNR NAK timer code the responder sends
 * @max_rd_atomic: outstanding RDMA READ/atomic as requester
 * @max_dest_rd_atomic: responder resources for RDMA READ/atomic
 * @en_sqd_async_notify: report IB_EVENT_SQ_DRAINED on entering SQD
 */
struct srnic_qp_attrs {
	struct rdma_ah_attr ah_attr;
	enum ib_mtu path_mtu;
	enum ib_mtu mtu;
	u32 qkey;
	u32 rq_psn;
	u32 sq_psn;
	u32 dest_qp_num;
	int access_flags;
	u16 pkey_index;
	u8 timeout;
	u8 retry_cnt;
	u8 rnr_retry;
	u8 min_rnr_timer;
	u8 max_rd_atomic;
	u8 max_dest_rd_atomic;
	u8 en_sqd_async_notify;
};

/* The largest receive WQE: header and SRNIC_MAX_SGE SGEs, a power of two. */
#define SRNIC_MAX_RQ_ENTRY_SIZE 1024
static_assert(sizeof(struct srnic_recv_wqe) +
	      SRNIC_MAX_SGE * sizeof(struct srnic_sge) <= SRNIC_MAX_RQ_ENTRY_SIZE);

/**
 * struct srnic_seg - one contiguous piece of a message
 * @mr: the MR it lies in, referenced; NULL for kernel memory at @buf
 * @buf: inline data (when @mr is NULL)
 * @iova: address in @mr
 * @len: bytes
 */
struct srnic_seg {
	struct srnic_mr *mr;
	const u8 *buf;
	u64 iova;
	u32 len;
};

/**
 * struct srnic_sgl - a message's pieces, at most one per SGE
 * @seg: @max pieces, allocated for the queue the SGEs come from
 *	 (srnic_sgl_alloc())
 * @max: room in @seg
 * @num: pieces in use
 * @len: their total length
 */
struct srnic_sgl {
	struct srnic_seg *seg;
	unsigned int max;
	unsigned int num;
	u64 len;
};

/**
 * struct srnic_local_scratch - what local delivery needs of a requester:
 *	given at the RTR that makes a QP's destination local
 * @rwqe: the destination's receive WQE (SRNIC_MAX_RQ_ENTRY_SIZE bytes)
 * @rsgl: the destination's pieces (SRNIC_MAX_SGE)
 */
struct srnic_local_scratch {
	struct srnic_recv_wqe *rwqe;
	struct srnic_sgl rsgl;
};

/**
 * struct srnic_req_wqe - the requester's record of one send WQE it took
 * from the SQ for the wire, kept until the WQE completes (srnic_req.c)
 * @wr_id: the WQE's, for its completion
 * @len: message length
 * @first_psn: PSN of its first packet
 * @last_psn: PSN of its last packet; for a READ, of its last response
 * @opcode: IB_WR_* opcode
 * @flags: SRNIC_WQE_* flags
 * @status: IB_WC_SUCCESS, or the local error it completes with when its
 *	    turn comes (it is then never sent)
 * @read_done: a READ's last response, or an atomic's ATOMIC_ACKNOWLEDGE,
 *	       arrived
 * @local: a local operation (BIND_MW, LOCAL_INV), executed when taken:
 *	   it sends nothing, takes no PSN (@last_psn is the PSN before
 *	   @first_psn) and completes once every WQE before it has
 */
struct srnic_req_wqe {
	u64 wr_id;
	u64 len;
	u32 first_psn;
	u32 last_psn;
	u8 opcode;
	u8 flags;
	u8 status;
	bool read_done;
	bool local;
};

/**
 * struct srnic_rate - a requester's rate limiter, a DCQCN reaction point
 * (srnic_rate.c); owned by the QP's task but for @cnps
 * @cnps: CNPs received for the QP (counted by the receive softirq)
 * @cnps_seen: @cnps when the requester last looked
 * @mbps: the rate the QP sends at, Mbit/s; 0 while it is not limited
 * @target_mbps: the rate it recovers towards
 * @alpha: DCQCN's estimate of the path's congestion, in 1/1024ths
 * @timer_stage: recovery stages of time since the last cut
 * @byte_stage: recovery stages of bytes sent since the last cut
 * @bytes: bytes sent since the last byte stage
 * @now: ktime_get_ns() when the requester's run began
 * @next_ns: when the QP's next packet may leave
 * @alpha_ns: when @alpha was last brought up to date
 * @stage_ns: when the current stage of time began
 * @waiting: the requester waits for @next_ns; @timer runs its task then
 * @timer: that timer
 * @meter_bytes: bytes sent (headers counted) in the meter's window
 * @meter_start: when that window began (jiffies)
 * @meter_mbps: the rate measured over the last whole window, or 0
 * @limit_kbps: packet pacing (IB_QP_RATE_LIMIT of a raw packet QP), kbit/s;
 *		0: none. Written by modify_qp, read by the task.
 * @burst_bytes: how many bytes a paced QP may send at once after a pause
 *		 (ibv_qp_rate_limit_attr.max_burst_sz; 0: one packet)
 */
struct srnic_rate {
	atomic_t cnps;
	u32 cnps_seen;
	u32 mbps;
	u32 target_mbps;
	u32 alpha;
	u32 timer_stage;
	u32 byte_stage;
	u32 bytes;
	u64 now;
	u64 next_ns;
	u64 alpha_ns;
	u64 stage_ns;
	bool waiting;
	struct hrtimer timer;
	u64 meter_bytes;
	unsigned long meter_start;
	u32 meter_mbps;
	u32 limit_kbps;
	u32 burst_bytes;
};

/**
 * struct srnic_req - the requester's state (srnic_rc.c, srnic_req.c),
 * owned by the QP's engine task
 * @wqe: snapshot of the send WQE being executed (an SQ entry's size)
 * @index: SQ index @wqe was taken from
 * @sgl: the requester's side of the message
 * @rwqe: snapshot of a local responder's receive WQE
 * @rsgl: the responder's side of the message (local delivery)
 * @local_ifindex: netdev of the srnic device owning the destination GID
 *		   (local delivery), 0 for a remote destination
 * @rnr_timer: the responder's RNR timer code, from its last RNR NAK
 * @rnr_retries_left: RNR retries left for the current WQE
 * @rnr_waiting: waiting for @rnr_until before retrying the WQE (after
 *		 an RNR NAK, or in local delivery after the local ACK
 *		 timeout of a destination that did not answer)
 * @rnr_until: ktime_get_ns() time the RNR wait ends
 * @rnr_hrtimer: reschedules the task at @rnr_until (a high-resolution
 *		 timer: RNR timers go down to 10 us, a jiffy is 4 ms)
 * @fatal: a completion was lost (CQ overrun): go to the error state
 * @tm_rndv: local delivery: the rendezvous the last SEND matched in its
 *	     destination's tag-matching SRQ (its tagged buffer in @rwqe),
 *	     done once the SEND completed (srnic_local_tm_rndv())
 *
 * Over the wire, the WQEs between the SQ's consumer index and @next_index
 * are outstanding (sent or being sent), oldest first:
 * @wqes: one record per SQ slot
 * @next_index: SQ index of the next WQE to take
 * @send_index: SQ index of the WQE whose packets go out next
 * @send_psn: PSN of the next packet of @send_index to send
 * @next_psn: first PSN of the next WQE taken
 * @capture_psn: local delivery: the first PSN of the next message's packets
 *		 as a capture shows them (srnic_local_capture())
 * @una_psn: oldest PSN not acknowledged
 * @cwnd: PSNs that may be in flight beyond @una_psn (adapts to loss)
 * @reads: READs and atomics outstanding (at most max_rd_atomic)
 * @read_sgl: local SGL of the oldest outstanding READ, which its responses
 *	      fill; valid while @read_sgl_index is that READ's SQ index + 1
 *	      and its length is the READ's (srnic_req_put_mrs() empties it
 *	      after each run of the task: it is resolved again)
 * @read_sgl_index: SQ index + 1 of the READ that @read_psn and
 *		    @read_offset follow; 0 when unset
 * @read_psn: PSN of the next response the oldest READ expects
 * @read_offset: its byte offset in the READ's message
 * @sgl_index: SQ index + 1 of the WQE whose snapshot is in @wqe and whose
 *	       local SGL is in @sgl, for sending; 0 when unset (after each
 *	       run of the task)
 * @retries_left: transport retries left before IB_WC_RETRY_EXC_ERR (also
 *		  in local delivery: a destination that does not answer)
 * @timer: local ACK timeout
 * @timed_out: @timer fired; the task retransmits
 * @went_back: already went back for a gap in READ responses; set until
 *	       progress is made, so one gap causes one retransmission
 * @tx_blocked: a packet could not leave (a full queue on the way): the
 *		requester stops until its task runs again
 * @high_psn: the PSN after the highest one sent
 * @rtt_sampling: a packet is being timed (srnic_req.c's round-trip time)
 * @rtt_psn: its PSN
 * @rtt_sent_ns: when it was sent (ktime_get_ns())
 * @srtt_ns: the smoothed round-trip time, 0 until the first sample
 * @rttvar_ns: its smoothed variation
 * @rate: the rate it may send at, under congestion (ECN's CNPs)
 * @recovering: selective repeat: a selective NAK reported requests the
 *		responder kept beyond a loss; until @una_psn passes
 *		@sack_high, the PSNs missing below it are sent again
 * @resending: srnic_req_send_wqe() sends one of them, beyond the window
 * @probing: a local ACK timeout with nothing reported kept, to a responder
 *	     that does selective repeat: only the oldest unacknowledged PSN
 *	     goes (asking for an ACK) until the responder answers, then
 *	     the requester goes back N from what that answer acknowledges
 *	     (a responder ACKs only every so often: what was sent after
 *	     the last ACK may have arrived)
 * @resend_ready: a PSN may be missing below enough reported kept; cleared
 *		  when srnic_req_resend() finds none
 * @resend_all: after a local ACK timeout, every PSN not reported kept up to
 *		@sack_high is lost, however few are kept above it
 * @resend_partial: PSNs sent again before @resend_stop were lost again
 *		    (a PSN sent again after them arrived first): the
 *		    recovery sends them once more, then goes on from
 *		    @resend_resume
 * @resend_stop: see @resend_partial
 * @probe_passes: passes left that may follow a timeout's at once
 *		  (srnic_req.c, SRNIC_REQ_PROBE_PASSES)
 * @lost_mark: a PSN sent again from here on that arrives while the
 *	       responder still misses an older one tells that one's last
 *	       copy was lost (@resend_partial)
 * @resend_resume: see @resend_partial
 * @sack_high: the PSN after the highest one reported kept
 * @resend_psn: the next PSN the recovery looks at to send again
 * @peer_sr: the responder does selective repeat (its ACKs carry the SR
 *	     bit): the requester may spray its requests over paths
 * @resent: a PSN went again in this loss episode
 * @resend_fence: the next new PSN when the last one went again: a PSN
 *		  from here on reported kept (on the same path) was sent
 *		  after every copy sent again so far, and proves those still
 *		  missing lost (@resend_partial)
 * @sacked: the PSNs reported kept, from @una_psn, each at its PSN modulo
 *	    SRNIC_SR_WINDOW; all clear while not @recovering
 * @read_kept_count: responses @read_kept holds
 * @read_kept_high: the PSN after the highest READ response kept
 * @read_asked_to: the responses missing from @read_psn were asked for
 *		   again up to (not including) this PSN
 * @read_kept: selective repeat: the READ responses that came beyond the
 *	       one the oldest READ expects (its own, or a later READ's) and
 *	       were placed, each at its PSN modulo SRNIC_SR_WINDOW
 *	       (srnic_req_read_keep())
 * @ack_held: selective repeat: an ACK came beyond the responses the
 *	      oldest READ misses, which were asked for again; it
 *	      acknowledges up to @ack_held_psn once the READ completes
 * @ack_held_psn: see @ack_held
 */
struct srnic_req {
	struct srnic_send_wqe *wqe;
	u32 index;
	struct srnic_sgl sgl;
	struct srnic_recv_wqe *rwqe;
	struct srnic_sgl rsgl;
	int local_ifindex;
	u8 rnr_timer;
	u8 rnr_retries_left;
	bool rnr_waiting;
	u64 rnr_until;
	struct hrtimer rnr_hrtimer;
	bool fatal;
	struct srnic_tm_match tm_rndv;

	struct srnic_req_wqe *wqes;
	u32 next_index;
	u32 send_index;
	u32 send_psn;
	u32 next_psn;
	u32 capture_psn;
	u32 una_psn;
	u32 cwnd;
	unsigned int reads;
	struct srnic_sgl read_sgl;
	u32 read_sgl_index;
	u32 read_psn;
	u64 read_offset;
	u32 sgl_index;
	u8 retries_left;
	struct timer_list timer;
	bool timed_out;
	bool went_back;
	bool tx_blocked;
	u32 high_psn;
	bool rtt_sampling;
	u32 rtt_psn;
	u64 rtt_sent_ns;
	u64 srtt_ns;
	u64 rttvar_ns;
	struct srnic_rate rate;
	bool recovering;
	bool resending;
	bool probing;
	bool peer_sr;
	bool resend_ready;
	bool resend_all;
	bool resend_partial;
	bool resent;
	u32 resend_stop;
	u32 resend_resume;
	u32 lost_mark;
	u8 probe_passes;
	u32 sack_high;
	u32 resend_psn;
	u32 resend_fence;
	DECLARE_BITMAP(sacked, SRNIC_SR_WINDOW);
	u32 read_kept_count;
	u32 read_kept_high;
	u32 read_asked_to;
	DECLARE_BITMAP(read_kept, SRNIC_SR_WINDOW);
	bool ack_held;
	u32 ack_held_psn;
};

/**
 * struct srnic_atomic_replay - an atomic the wire responder executed, kept
 * to answer a duplicate of it without executing it again (IBTA 9.7.5.1.3.2)
 * @orig: the value the target held before; the ATOMIC_ACKNOWLEDGE's
 * @psn: the request's PSN
 * @valid: the slot holds an atomic
 */
struct srnic_atomic_replay {
	u64 orig;
	u32 psn;
	bool valid;
};

/**
 * struct srnic_atomic_replays - a responder's atomic replay slots
 * @retired: the smaller array this one replaced (a later modify_qp asked
 *	     for more responder resources), kept until the QP is freed: a
 *	     responder run may still be reading it
 * @slots: entries of @slot
 * @slot: the last atomics executed, used in turn
 */
struct srnic_atomic_replays {
	struct srnic_atomic_replays *retired;
	u32 slots;
	struct srnic_atomic_replay slot[];
};

/* What the responder is in the middle of receiving. */
enum srnic_resp_msg {
	SRNIC_RESP_IDLE,
	SRNIC_RESP_SEND,
	SRNIC_RESP_WRITE,
};

/**
 * struct srnic_resp - the wire responder's state (srnic_resp.c), owned by
 * the QP's engine task
 * @epsn: next PSN expected
 * @msn: messages completed, for AETHs
 * @nak_seq_sent: a PSN sequence error NAK went out for @epsn; no more
 *		  until it arrives
 * @ack_pending: an ACK of @epsn - 1 is owed (coalesced per batch)
 * @drop_msg: UC: the message being received lost a packet or failed; its
 *	      remaining packets are dropped up to the next FIRST or ONLY
 * @msg: the message being received
 * @rwqe: its receive WQE (SEND, WRITE with immediate)
 * @have_rwqe: @rwqe holds a WQE taken from the RQ for the current message
 * @sgl: @rwqe's scatter list (SEND), resolved while its length is not 0
 * @offset: payload bytes of the current message received so far
 * @write_mr: the MR a WRITE goes to, referenced, or NULL until looked up
 * @write_rkey: the WRITE's R_Key, to look @write_mr up again
 * @write_va: address of the WRITE's first byte
 * @write_len: bytes the WRITE's RETH announced
 * @read_mr: the MR a READ response comes from, referenced, or NULL until
 *	     looked up
 * @read_rkey: the READ's R_Key, to look @read_mr up again
 * @read_va: address of the next response byte
 * @read_left: response bytes still to send
 * @read_psn: PSN of the next response packet
 * @read_last_psn: PSN of the last response packet
 * @read_first: the next response packet is the first
 * @reading: READ response packets remain to be sent
 * @fatal_event: the async event of the fatal error just NAKed (0: the QP
 *		 was reset meanwhile, none)
 * @atomics: the last atomics executed, one per responder resource: as
 *	     many slots as the largest max_dest_rd_atomic the QP was given
 *	     (srnic_resp_atomics_alloc()), NULL before any
 * @atomic_next: the slot of @atomics the next atomic takes
 * @sr_peer: the last request came from a requester that offers selective
 *	     repeat, with it on here: ACKs say so (SRNIC_BTH_APSN_SR)
 * @ooo: selective repeat: the requests kept beyond @epsn, each at its PSN
 *	 modulo SRNIC_SR_WINDOW, or NULL while none is kept
 * @ooo_count: requests @ooo holds
 * @sack_start: the first PSN of a run kept and not yet reported
 * @sack_len: that run's length (0: nothing to report)
 * @xsrq: XRC_TGT: the XRC SRQ the request being executed names (its
 *	  XRCETH), referenced for that packet only, or NULL
 * @xsrqn: XRC_TGT: the XRC SRQ number of the message in progress (of
 *	   @rwqe while @have_rwqe)
 * @read_pd: the PD the READ being answered was checked against
 * @tm: a QP of a tag-matching SRQ: where the SEND being received lands
 *
 * @sgl, @write_mr and @read_mr hold MR references only during one run of
 * the QP's task: srnic_resp_put_mrs() drops them after each, and the next
 * packet of the message looks them up again (see srnic_dereg_mr()).
 */
struct srnic_resp {
	u32 epsn;
	u32 msn;
	bool nak_seq_sent;
	bool ack_pending;
	bool drop_msg;
	enum srnic_resp_msg msg;
	struct srnic_recv_wqe *rwqe;
	bool have_rwqe;
	struct srnic_sgl sgl;
	u64 offset;
	struct srnic_mr *write_mr;
	u32 write_rkey;
	u64 write_va;
	u32 write_len;
	struct srnic_mr *read_mr;
	u32 read_rkey;
	u64 read_va;
	u32 read_left;
	u32 read_psn;
	u32 read_last_psn;
	bool read_first;
	bool reading;
	enum ib_event_type fatal_event;
	struct srnic_atomic_replays *atomics;
	u32 atomic_next;
	bool sr_peer;
	struct sk_buff **ooo;
	u32 ooo_count;
	u32 sack_start;
	u32 sack_len;
	struct srnic_srq *xsrq;
	u32 xsrqn;
	struct srnic_pd *read_pd;
	struct srnic_tm_match tm;
};

/**
 * struct srnic_path - where a QP's (or an AH's) packets go
 * @ipv6: IPv6 rather than IPv4 (from the GID types)
 * @saddr: source address (the source GID's)
 * @daddr: destination address (the destination GID's)
 * @traffic_class: IPv4 TOS or IPv6 traffic class
 * @hop_limit: IPv4 TTL or IPv6 hop limit
 * @flow_label: IPv6 flow label
 * @sport: UDP source port (per QP pair, for ECMP entropy)
 * @local_ifindex: when not 0, the destination GID belongs to the srnic
 *		   device of this netdev in the sender's namespace: packets
 *		   are handed to its receive path instead of the IP layer
 *		   (srnic_tx_send(); UD)
 * @route_cache: where the route to @daddr is kept between packets (a
 *		 connected QP's), or NULL: looked up for each packet
 */
struct srnic_path {
	bool ipv6;
	union {
		__be32 v4;
		struct in6_addr v6;
	} saddr, daddr;
	u8 traffic_class;
	u8 hop_limit;
	u32 flow_label;
	__be16 sport;
	int local_ifindex;
	struct dst_cache *route_cache;
};

/**
 * struct srnic_qp - a queue pair
 * @ibqp: the ib_core QP
 * @sq: send queue
 * @rq: receive queue
 * @state_lock: serialises state changes (modify_qp's, and the data path's
 *	       entry into the error state) and query_qp; taken with bottom
 *	       halves disabled, never held across a sleep (a kernel QP's task
 *	       takes it in a post's atomic context)
 * @state: IB state; written under @state_lock, read locklessly by posts
 * @attrs: what modify_qp stored, under @state_lock
 * @max_inline: bytes of inline data an SQ entry carries
 * @sq_sig_all: every send WQE is signaled
 * @ref: references; lookups by QPN take one (srnic_qp_get_by_qpn())
 * @released: completed when @ref drops to zero
 * @task: the QP's work in its NIC engine
 * @req: requester state, used only by @task
 * @resp: wire responder state, used only by @task
 * @path: where the QP's packets go (set at RTR, for a wire destination)
 * @route_cache: @path's route, per CPU (srnic_tx_send())
 * @rxq: received packets waiting for @task
 * @last_wqe_pending: the QP, attached to an SRQ, entered the error state;
 *		      its task reports IB_EVENT_QP_LAST_WQE_REACHED once it
 *		      has flushed the receive WQE it held
 * @rss: a hash QP's (a raw packet QP with an indirection table) receive
 *	 side scaling; NULL for every other QP
 * @xrcd: XRC_TGT: the XRC domain whose SRQs the QP's requests may name
 * @wire_reset: the QP entered RESET since its task last ran: an RC or UC
 *		QP's task forgets the old connection's requester and
 *		responder state before anything else, whatever state the QP
 *		is in by then (it may be back in RTS: see srnic_qp_run()); a
 *		UD QP keeps none beyond its queued packets, purged at RESET
 * @direct_windows: direct windows the QP posts through, under the
 *		    device's direct_lock
 * @direct_loaned: the QP's RQ and receive CQ are lent to a direct poster,
 *		   under the device's direct_lock
 * @owner_cred: user QPs: the creating process's credentials
 * @owner_mm: user QPs: its mm (mmgrab()), for the direct path's access
 *	      check
 * @owner_tgid: user QPs: that process
 * @rx_msgs: request messages the QP's responder has taken, datagrams a
 *	     UD QP has received (a count that wraps), for
 *	     srnic_sq_doorbell()
 * @doorbell_ns: when the SQ's doorbell last rang (ktime_get_ns())
 * @doorbell_rx_msgs: @rx_msgs then
 * @doorbell_streak: doorbells in a row that came close to the one before,
 *		     with nothing received in between (srnic_sq_doorbell())
 * @stream_producer: the SQ's producer index the engine last saw new posts
 *		     at, while it polls the SQ (srnic_sq_stream_check())
 * @stream_rx_msgs: @rx_msgs then
 * @rx_unanswered: request messages received since the QP last posted to
 *		   its SQ, in a stream (srnic_rx_continues_stream())
 * @rx_request_end_ns: when the last request message received ended
 *		       (ktime_get_ns())
 * @cnp_sent_ns: when the QP last sent a CNP (srnic_rx_congestion())
 * @counter: while ib_core binds the QP to a counter, that counter's counts,
 *	     where the QP's events count (srnic_qp_count()); read under RCU
 */
struct srnic_qp {
	struct ib_qp ibqp;
	struct srnic_wq sq;
	struct srnic_wq rq;
	spinlock_t state_lock;		/* state changes, query */
	enum ib_qp_state state;
	struct srnic_qp_attrs attrs;
	u32 max_inline;
	bool sq_sig_all;
	refcount_t ref;
	struct completion released;
	struct srnic_engine_task task;
	struct srnic_req req;
	struct srnic_resp resp;
	struct srnic_path path;
	struct dst_cache route_cache;
	struct sk_buff_head rxq;
	atomic_t last_wqe_pending;
	struct srnic_rss *rss;
	struct srnic_xrcd *xrcd;
	atomic_t wire_reset;
	u32 direct_windows;	/* windows it posts through; direct_lock */
	bool direct_loaned;	/* its RQ and receive CQ are lent; direct_lock */
	const struct cred *owner_cred;	/* user QPs: the creating process's */
	struct mm_struct *owner_mm;	/* user QPs: its mm (mmgrab()) */
	struct pid *owner_tgid;		/* user QPs: that process */
	atomic_t rx_msgs;
	u64 doorbell_ns;
	u32 doorbell_rx_msgs;
	u32 doorbell_streak;
	u32 stream_producer;
	u32 stream_rx_msgs;
	atomic_t rx_unanswered;
	u64 rx_request_end_ns;
	u64 cnp_sent_ns;
	struct srnic_qp_counter __rcu *counter;
};

static inline struct srnic_dev *to_srnic_dev(struct ib_device *ibdev)
{
	return container_of(ibdev, struct srnic_dev, ibdev);
}

static inline struct srnic_ucontext *to_srnic_ucontext(struct ib_ucontext *uc)
{
	return container_of(uc, struct srnic_ucontext, ibuc);
}

static inline struct srnic_pd *to_srnic_pd(struct ib_pd *pd)
{
	return container_of(pd, struct srnic_pd, ibpd);
}

static inline struct srnic_dm *to_srnic_dm(struct ib_dm *dm)
{
	return container_of(dm, struct srnic_dm, ibdm);
}

static inline struct srnic_mr *to_srnic_mr(struct ib_mr *mr)
{
	return container_of(mr, struct srnic_mr, ibmr);
}

static inline struct srnic_mw *to_srnic_mw(struct ib_mw *mw)
{
	return container_of(mw, struct srnic_mw, ibmw);
}

static inline struct srnic_cq *to_srnic_cq(struct ib_cq *ibcq)
{
	return container_of(ibcq, struct srnic_cq, ibcq);
}

static inline struct srnic_qp *to_srnic_qp(struct ib_qp *ibqp)
{
	return container_of(ibqp, struct srnic_qp, ibqp);
}

static inline struct srnic_srq *to_srnic_srq(struct ib_srq *ibsrq)
{
	return container_of(ibsrq, struct srnic_srq, ibsrq);
}

static inline struct srnic_rwq *to_srnic_rwq(struct ib_wq *ibwq)
{
	return container_of(ibwq, struct srnic_rwq, ibwq);
}

static inline struct srnic_xrcd *to_srnic_xrcd(struct ib_xrcd *ibxrcd)
{
	return container_of(ibxrcd, struct srnic_xrcd, ibxrcd);
}

/*
 * Whether the QP is a datagram QP: UD, or the GSI QP (QP1), which is a UD
 * QP with QP number 1 that only kernel consumers (ib_mad) create.
 */
static inline bool srnic_qp_is_ud(const struct srnic_qp *qp)
{
	return qp->ibqp.qp_type == IB_QPT_UD || qp->ibqp.qp_type == IB_QPT_GSI;
}

/* Whether the QP sends and receives Ethernet frames (srnic_raw.c). */
static inline bool srnic_qp_is_raw(const struct srnic_qp *qp)
{
	return qp->ibqp.qp_type == IB_QPT_RAW_PACKET;
}

/*
 * Whether the QP has no connection (UD, GSI, raw packet): no destination,
 * PSNs or responder resources of its own, a receive WQE copied per message.
 */
static inline bool srnic_qp_is_datagram(const struct srnic_qp *qp)
{
	return srnic_qp_is_ud(qp) || srnic_qp_is_raw(qp);
}

/*
 * Whether the QP's transport acknowledges (RC): UC shares RC's requester
 * and responder, without ACKs, retransmission, timers, RNR, READ and
 * atomics.
 */
static inline bool srnic_qp_acked(const struct srnic_qp *qp)
{
	return qp->ibqp.qp_type == IB_QPT_RC ||
	       qp->ibqp.qp_type == IB_QPT_XRC_INI ||
	       qp->ibqp.qp_type == IB_QPT_XRC_TGT;
}

/* XRC_INI and XRC_TGT QPs use the XRC opcodes (transport 0xa0). */
static inline bool srnic_qp_is_xrc(const struct srnic_qp *qp)
{
	return qp->ibqp.qp_type == IB_QPT_XRC_INI ||
	       qp->ibqp.qp_type == IB_QPT_XRC_TGT;
}

/*
 * The queue a QP's receive WQEs come from: its SRQ's ring, or its own RQ.
 * Take WQEs with srnic_rq_take() only.
 */
static inline struct srnic_wq *srnic_qp_recv_wq(struct srnic_qp *qp)
{
	return qp->ibqp.srq ? &to_srnic_srq(qp->ibqp.srq)->rq : &qp->rq;
}

/*
 * Where a responder's receive side is: for an XRC_TGT QP, the XRC SRQ a
 * request names (@xsrq: its WQEs, its PD for every key, its CQ); for the
 * others (@xsrq NULL), the QP's own receive queue, PD and receive CQ.
 */
static inline struct srnic_wq *srnic_resp_wq(struct srnic_qp *qp,
					     struct srnic_srq *xsrq)
{
	return xsrq ? &xsrq->rq : srnic_qp_recv_wq(qp);
}

static inline struct srnic_pd *srnic_resp_pd(struct srnic_qp *qp,
					     struct srnic_srq *xsrq)
{
	return to_srnic_pd(xsrq ? xsrq->ibsrq.pd : qp->ibqp.pd);
}

/* The tag-matching SRQ of @qp, or NULL (srnic_tm.c). */
static inline struct srnic_srq *srnic_qp_tm_srq(struct srnic_qp *qp)
{
	struct ib_srq *srq = qp->ibqp.srq;

	return srq && srq->srq_type == IB_SRQT_TM ? to_srnic_srq(srq) : NULL;
}

/* An XRC or tag-matching SRQ's receive completions go to its own CQ. */
static inline struct srnic_cq *srnic_resp_cq(struct srnic_qp *qp,
					     struct srnic_srq *xsrq)
{
	if (!xsrq)
		xsrq = srnic_qp_tm_srq(qp);
	return to_srnic_cq(xsrq ? xsrq->ibsrq.ext.cq : qp->ibqp.recv_cq);
}

/**
 * srnic_wq_has_work() - does @wq hold WQEs not consumed yet?
 * @qp: its QP
 * @wq: the SQ or RQ
 *
 * Lockless and approximate (for polling and RNR checks); consumers read
 * the producer index again under the queue's lock.
 */
static inline bool srnic_wq_has_work(struct srnic_qp *qp, struct srnic_wq *wq)
{
	return READ_ONCE(wq->ring.ctrl->producer) != READ_ONCE(wq->consumer);
}

/*
 * srnic_wq_has_work() of the queue a QP's receive WQEs come from (@wq:
 * srnic_resp_wq() or srnic_qp_recv_wq()): an SRQ's under its lock, since
 * modify_srq may replace its ring meanwhile (srnic_srq_resize()).
 */
static inline bool srnic_recv_wq_has_work(struct srnic_qp *qp,
					  struct srnic_wq *wq)
{
	unsigned long flags;
	bool work;

	if (wq == &qp->rq)
		return srnic_wq_has_work(qp, wq);
	spin_lock_irqsave(&wq->lock, flags);
	work = srnic_wq_has_work(qp, wq);
	spin_unlock_irqrestore(&wq->lock, flags);
	return work;
}

/**
 * srnic_qp_get_by_qpn() - find a QP by number and take a reference
 * @sdev: the device
 * @qpn: the QP number
 *
 * For the engine and the receive path, in any context.
 *
 * Return: the QP, to be released with srnic_qp_put(), or NULL.
 */
static inline struct srnic_qp *
srnic_qp_get_by_qpn(struct srnic_dev *sdev, u32 qpn)
{
	struct srnic_qp *qp;

	rcu_read_lock();
	qp = xa_load(&sdev->qps, qpn);
	if (qp && !refcount_inc_not_zero(&qp->ref))
		qp = NULL;
	rcu_read_unlock();
	return qp;
}

/**
 * srnic_qp_put() - drop a reference taken by srnic_qp_get_by_qpn()
 * @qp: the QP
 */
static inline void srnic_qp_put(struct srnic_qp *qp)
{
	if (refcount_dec_and_test(&qp->ref))
		complete(&qp->released);
}

/**
 * srnic_qp_event() - report an affiliated asynchronous event of a QP
 * @qp: the QP
 * @type: the event
 */
static inline void srnic_qp_event(struct srnic_qp *qp, enum ib_event_type type)
{
	struct ib_event event = {
		.device = qp->ibqp.device,
		.element.qp = &qp->ibqp,
		.event = type,
	};

	if (qp->ibqp.event_handler)
		qp->ibqp.event_handler(&event, qp->ibqp.qp_context);
}

/* Would a WQE at @producer overrun @wq's consumer? */
static inline bool srnic_wq_full(struct srnic_wq *wq, u32 producer)
{
	return producer - wq->consumer >= wq->ring.num_entries;
}

#endif /* SRNIC_OBJECTS_H */
