/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause) */
/*
 * srnic user/kernel ABI: the one header shared by the kernel module
 * (kernel/) and the userspace provider (userspace/). Never copy it.
 *
 * It holds three kinds of things:
 *  - the ABI version, checked by libibverbs (uverbs_abi_ver) and again by
 *    the kernel when a provider opens a context;
 *  - the driver-private request/response payloads that follow the core
 *    uverbs structs in each verb command;
 *  - the formats of the rings and control records the kernel maps into the
 *    process: queue control record, send/receive WQEs, CQEs.
 *
 * Every struct has a fixed size asserted at the bottom; all multi-byte
 * fields are in host byte order except those typed __be (wire values such
 * as immediate data, passed through unchanged).
 */
#ifndef SRNIC_ABI_USER_H
#define SRNIC_ABI_USER_H

#include <linux/types.h>
#include <rdma/ib_user_ioctl_cmds.h>

/*
 * Bumped on every incompatible change of anything in this file. The kernel
 * reports it as the device's uverbs ABI version, and libibverbs refuses to
 * bind a provider built for another one.
 */
#define SRNIC_ABI_VERSION 4

/*
 * The sysfs attribute (/sys/class/infiniband/<dev>/srnic_abi_version) that
 * marks a device as srnic's whatever name it was given; the provider binds
 * to devices that have it.
 */
#define SRNIC_SYSFS_ABI_ATTR "srnic_abi_version"

/*
 * The sysfs attribute (/sys/class/infiniband/<dev>/srnic_ucontext) holding
 * what alloc_ucontext answers in struct srnic_alloc_ucontext_resp, as
 * "<max_inline_data> <queue_ctrl_size> <page_size>\n" in decimal. A
 * provider that imports a context (ibv_import_device(): the context was
 * allocated by another process's provider) reads it there.
 */
#define SRNIC_SYSFS_UCONTEXT_ATTR "srnic_ucontext"

/* Cache line size the shared records are laid out for. */
#define SRNIC_CACHELINE_SIZE 64

/* ---- Per-verb driver data ------------------------------------------ */

struct srnic_alloc_ucontext_req {
	__u32 abi_version;	/* SRNIC_ABI_VERSION the provider was built with */
	__u32 reserved;
};

struct srnic_alloc_ucontext_resp {
	__u32 abi_version;	/* SRNIC_ABI_VERSION of the kernel */
	__u32 max_inline_data;	/* bytes of inline data a send WQE may carry */
	__u32 queue_ctrl_size;	/* bytes reserved for struct srnic_queue_ctrl */
	__u32 page_size;	/* granularity of every ring mapping */
};

struct srnic_alloc_pd_resp {
	__u32 pdn;
	__u32 reserved;
};

/*
 * Where one ring lives in the process: in the mapping mmap(fd = context
 * fd, offset = mmap_offset, length = mmap_size), from byte ring_offset
 * (a multiple of SRNIC_CACHELINE_SIZE): a struct srnic_queue_ctrl padded
 * to queue_ctrl_size, followed by num_entries entries of entry_size bytes
 * (both powers of two).
 *
 * With SRNIC_QUEUE_DESC_SHARED in flags the mapping is shared: other
 * rings of the context (small SQs, from one chunk of the kernel's ring
 * arena) live in it at their own ring_offset. The provider maps each such
 * mmap_offset once and unmaps it when the last of its rings is destroyed.
 * Without it the mapping is the ring's alone and ring_offset is 0.
 */
enum srnic_queue_desc_flags {
	SRNIC_QUEUE_DESC_SHARED = 1 << 0,
};

struct srnic_queue_desc {
	__aligned_u64 mmap_offset;
	__u32 mmap_size;
	__u32 num_entries;
	__u32 entry_size;
	__u32 ring_offset;
	__u32 flags;		/* enum srnic_queue_desc_flags */
	__u32 reserved;
};

struct srnic_create_cq_req {
	__aligned_u64 reserved;
};

struct srnic_create_cq_resp {
	struct srnic_queue_desc ring;
	__u32 cqn;
	__u32 reserved;
};

struct srnic_create_qp_req {
	__aligned_u64 reserved;
};

/*
 * modify_qp (the extended command, which carries IBV_QP_RATE_LIMIT): with
 * IBV_QP_RATE_LIMIT, how many bytes a paced QP may send at once after a
 * pause (ibv_qp_rate_limit_attr.max_burst_sz; 0: one packet). Zero
 * otherwise.
 */
struct srnic_modify_qp_req {
	__u32 burst_bytes;
	__u32 reserved;
};

/*
 * query_device's answer beyond uverbs' (ibv_query_device_ex()), which does
 * not carry packet pacing: the rates IBV_QP_RATE_LIMIT takes, in kbit/s,
 * and the QP types it applies to (1 << IBV_QPT_*).
 */
struct srnic_query_device_resp {
	__u32 qp_rate_limit_min;
	__u32 qp_rate_limit_max;
	__u32 packet_pacing_qpts;
	__u32 reserved;
};

struct srnic_create_qp_resp {
	struct srnic_queue_desc sq;
	struct srnic_queue_desc rq;	/* all zero when the QP uses an SRQ */
	__u32 qpn;
	__u32 reserved;
};

/*
 * The longest RSS hash key (ibv_rx_hash_conf.rx_hash_key_len): Toeplitz
 * over an IPv6 4-tuple needs 40 bytes.
 */
#define SRNIC_RX_HASH_KEY_MAX 40

/* The hash function and fields of a hash QP: libibverbs' IBV_RX_HASH_*. */
enum srnic_rx_hash_function {
	SRNIC_RX_HASH_FUNC_TOEPLITZ = 1 << 0,
};

enum srnic_rx_hash_fields {
	SRNIC_RX_HASH_SRC_IPV4 = 1 << 0,
	SRNIC_RX_HASH_DST_IPV4 = 1 << 1,
	SRNIC_RX_HASH_SRC_IPV6 = 1 << 2,
	SRNIC_RX_HASH_DST_IPV6 = 1 << 3,
	SRNIC_RX_HASH_SRC_PORT_TCP = 1 << 4,
	SRNIC_RX_HASH_DST_PORT_TCP = 1 << 5,
	SRNIC_RX_HASH_SRC_PORT_UDP = 1 << 6,
	SRNIC_RX_HASH_DST_PORT_UDP = 1 << 7,
};

/*
 * The request of a raw packet QP created with an indirection table
 * (IBV_QP_INIT_ATTR_IND_TABLE and IBV_QP_INIT_ATTR_RX_HASH, a "hash QP":
 * RSS), in place of struct srnic_create_qp_req, whose one field it starts
 * with: ibv_rx_hash_conf, which uverbs' command does not carry.
 */
struct srnic_create_rss_qp_req {
	__aligned_u64 reserved;
	__aligned_u64 rx_hash_fields_mask;	/* IBV_RX_HASH_* */
	__u8 rx_hash_function;			/* IBV_RX_HASH_FUNC_TOEPLITZ */
	__u8 rx_hash_key_len;			/* at most SRNIC_RX_HASH_KEY_MAX */
	__u8 reserved2[6];
	__u8 rx_hash_key[SRNIC_RX_HASH_KEY_MAX];
};

struct srnic_create_srq_req {
	__aligned_u64 reserved;
};

struct srnic_create_srq_resp {
	struct srnic_queue_desc rq;
	__u32 srqn;
	__u32 reserved;
};

/*
 * modify_srq with IBV_SRQ_MAX_WR (resizing): its command has no response,
 * so the kernel writes the new ring's descriptor to ring_desc_addr, a
 * struct srnic_queue_desc of the caller's (rxe's modify_srq does the
 * same). The new ring holds the WQEs posted and not taken, at the same
 * indexes; the provider maps it and posts there from then on.
 */
struct srnic_modify_srq_req {
	__aligned_u64 ring_desc_addr;
};

/* A work queue (ibv_create_wq, IBV_WQT_RQ): an RQ of its own, for RSS. */
struct srnic_create_wq_req {
	__aligned_u64 reserved;
};

struct srnic_create_wq_resp {
	struct srnic_queue_desc rq;	/* the RQ's format */
};

/*
 * create_ah has no request data. The response names the AH to the kernel:
 * a UD send WQE carries ah_num as its ud.ah_handle. It follows the 4-byte
 * struct ib_uverbs_create_ah_resp, hence no 64-bit member.
 */
struct srnic_create_ah_resp {
	__u32 ah_num;
	__u32 reserved;
};

/*
 * resize_cq: the request is one reserved u64 like create_cq's. The
 * response describes the CQ's new ring, which replaces the old one: it holds
 * the CQEs the provider had not polled, in order, from index 0 (producer and
 * consumer restart at 0; notify and notify_seq carry over). The provider
 * maps it and unmaps the old ring. It follows the 8-byte struct
 * ib_uverbs_resize_cq_resp.
 */
struct srnic_resize_cq_req {
	__aligned_u64 reserved;
};

struct srnic_resize_cq_resp {
	struct srnic_queue_desc ring;
};

/*
 * Device memory. UVERBS_METHOD_DM_ALLOC (an ioctl method without udata)
 * carries one srnic attribute, SRNIC_ATTR_ALLOC_DM_RESP, a mandatory
 * output into which the kernel writes struct srnic_alloc_dm_resp: where
 * the provider maps the whole allocation (mmap() of the uverbs fd, length
 * mmap_size, a multiple of the page size) for ibv_memcpy_to/from_dm().
 * Driver attribute ids live in the driver namespace of the method.
 */
enum srnic_alloc_dm_attrs {
	SRNIC_ATTR_ALLOC_DM_RESP = (1U << UVERBS_ID_NS_SHIFT),
};

struct srnic_alloc_dm_resp {
	__aligned_u64 mmap_offset;
	__aligned_u64 mmap_size;
};

/*
 * SRNIC_METHOD_DM_QUERY, srnic's method of the DM object, answers for a DM
 * handle of the context (ibv_import_dm() in a context sharing the uverbs
 * file) with struct srnic_query_dm_resp: its mapping and the length the
 * allocation asked for.
 */
enum srnic_dm_methods {
	SRNIC_METHOD_DM_QUERY = (1U << UVERBS_ID_NS_SHIFT),
};

enum srnic_query_dm_attrs {
	SRNIC_ATTR_QUERY_DM_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
	SRNIC_ATTR_QUERY_DM_RESP,
};

struct srnic_query_dm_resp {
	__aligned_u64 mmap_offset;
	__aligned_u64 mmap_size;
	__aligned_u64 length;
};

/*
 * The direct path (Documentation/design.rst, "Direct path"). On first use
 * of an R_Key in an RDMA WRITE of an RC QP connected to a QP of the same
 * device, the provider asks SRNIC_METHOD_QP_DIRECT_WINDOW, a method of the
 * QP object, for a window: the destination MR mapped into the process
 * (mmap() of the uverbs fd at mmap_offset, mmap_size bytes, MAP_SHARED;
 * byte iova of the MR is at page_offset of the mapping), and copies the
 * payload of such WRITEs itself. The window serves only while the
 * direct_gen of the QP's send queue control record equals gen: the kernel
 * bumps it before it revokes any window of the QP (a state or attribute
 * change of either QP, the MR deregistered or reregistered), and the
 * pages of a revoked window then read and write a scratch page. The
 * provider reads direct_gen before a copy and again after it (a full
 * fence between the copy and that read); a copy that saw it change is
 * posted to the engine instead, which writes the data again or fails.
 * Errors: EOPNOTSUPP (never on this QP: not RC, not local delivery to
 * the same device, disabled by the direct_path module parameter),
 * EAGAIN (not now: a QP not ready), ENOENT/EPERM/EACCES (this R_Key: no
 * such MR, not of the destination's PD or the caller may not access the
 * owner's memory, no remote write or not an MR of pinned user memory),
 * ENOSPC (too many windows on the QP).
 */
enum srnic_qp_methods {
	SRNIC_METHOD_QP_DIRECT_WINDOW = (1U << UVERBS_ID_NS_SHIFT),
	SRNIC_METHOD_QP_DIRECT_LOAN,
};

enum srnic_direct_window_attrs {
	SRNIC_ATTR_DIRECT_WINDOW_QP_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
	SRNIC_ATTR_DIRECT_WINDOW_RKEY,		/* __u32, in */
	SRNIC_ATTR_DIRECT_WINDOW_RESP,		/* struct srnic_direct_window_resp */
	SRNIC_ATTR_DIRECT_WINDOW_FLAGS,		/* __u32, in, optional */
};

/* SRNIC_ATTR_DIRECT_WINDOW_FLAGS */
enum srnic_direct_window_flags {
	/*
	 * The key is an L_Key of the destination QP's PD in one of its
	 * receive WQEs (a loan, below), whose MR must grant local write:
	 * the window serves SENDs the provider delivers itself.
	 */
	SRNIC_DIRECT_WINDOW_RECV = 1 << 0,
};

struct srnic_direct_window_resp {
	__aligned_u64 mmap_offset;
	__aligned_u64 mmap_size;
	__aligned_u64 iova;	/* first address of the MR */
	__aligned_u64 length;	/* bytes of the MR */
	__u32 page_offset;	/* where iova is in the mapping */
	__u32 gen;		/* the direct_gen the window serves under */
};

/*
 * The SEND half of the direct path: a loan (Documentation/design.rst,
 * "Direct path"). SRNIC_METHOD_QP_DIRECT_LOAN, a method of the QP object,
 * lends an RC QP connected to a QP of the same device the destination's
 * receive queue and receive CQ: one mapping (mmap() of the uverbs fd at
 * mmap_offset, mmap_size bytes, MAP_SHARED) holding the destination's RQ
 * ring at rq_offset and its receive CQ's ring at cq_offset, each starting
 * with its struct srnic_queue_ctrl (queue_ctrl_size bytes). While the
 * poster's SQ control record says loan_live == loan_id, the provider may
 * deliver a SEND itself: take the receive WQE at the RQ's consumer index,
 * copy the payload through receive windows (SRNIC_DIRECT_WINDOW_RECV),
 * write the receive CQE at the CQ's producer index but its owner byte,
 * move the RQ's consumer index past the WQE (the commit: release after the
 * CQE's body), then store the owner byte and publish the CQ's producer
 * index. The kernel ends a loan (loan_live changes) before anything else
 * touches that RQ or CQ, zaps the mapping, takes one CQE (storing its owner
 * byte) for each WQE the consumer index moved past and takes the indexes
 * over; then it writes loan_end (the CQ's producer index it took over)
 * and loan_done = loan_id. A provider that saw loan_live change after its
 * commit waits for loan_done and knows from loan_end whether its CQE
 * counted. The destination's own engine work (the poster's SENDs that the
 * engine executes) takes the indexes over without ending the loan.
 * Granted only when the destination has no SRQ, a receive CQ of its own
 * (no other QP or SRQ, not its send CQ) without a completion channel, and
 * the caller may access the destination owner's memory (as for windows).
 * Errors as for windows; EBUSY: another QP holds a loan on the
 * destination.
 */
enum srnic_direct_loan_attrs {
	SRNIC_ATTR_DIRECT_LOAN_QP_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
	SRNIC_ATTR_DIRECT_LOAN_RESP,		/* struct srnic_direct_loan_resp */
};

struct srnic_direct_loan_resp {
	__aligned_u64 mmap_offset;
	__aligned_u64 mmap_size;
	__u32 rq_offset;
	__u32 rq_num_entries;
	__u32 rq_entry_size;
	__u32 rq_max_sge;
	__u32 cq_offset;
	__u32 cq_num_entries;
	__u32 dest_qpn;
	__u32 loan_id;		/* never 0 */
};

/* ---- Shared queue control record ----------------------------------- */

/* srnic_queue_ctrl.flags, written by the kernel engine */
enum srnic_queue_flags {
	/*
	 * The engine stopped watching this queue: the producer must ring the
	 * doorbell (a syscall) after publishing new entries.
	 */
	SRNIC_QUEUE_NEED_WAKEUP = 1 << 0,
	/* The queue's owner is in the error state; new entries are flushed. */
	SRNIC_QUEUE_ERROR = 1 << 1,
};

/* srnic_queue_ctrl.notify (CQs only), written by the provider */
enum srnic_cq_notify {
	SRNIC_CQ_NOTIFY_NONE = 0,
	SRNIC_CQ_NOTIFY_NEXT = 1,	/* event on the next completion */
	SRNIC_CQ_NOTIFY_SOLICITED = 2,	/* event on the next solicited one */
};

/*
 * The first bytes of every ring mapping. Producer and consumer indexes are
 * free-running 32-bit counters (entry = index & (num_entries - 1)), each on
 * its own cache line so the two sides never write the same line.
 *
 * Producer side: write entry, release barrier, store producer.
 * Consumer side: load producer (acquire), read entry, store consumer.
 * CQEs additionally carry an owner bit (see struct srnic_cqe) so the
 * provider can poll without reading the producer line at all.
 */
struct srnic_queue_ctrl {
	__u32 producer;
	__u32 reserved0[15];
	__u32 consumer;
	__u32 reserved1[15];
	__u32 flags;		/* enum srnic_queue_flags */
	__u32 notify;		/* enum srnic_cq_notify, CQs only */
	__u32 notify_seq;	/* bumped by the provider on each arm */
	__u32 direct_gen;	/* SQs: see SRNIC_METHOD_QP_DIRECT_WINDOW */
	__u32 completed;	/* SQs: consumer as of the last completion written */
	__u32 loan_live;	/* SQs: the loan in force, 0 for none */
	__u32 loan_done;	/* SQs: the last loan ended and settled */
	__u32 loan_end;		/* SQs: its CQ producer index at the end */
	__u32 reserved2[8];
};

/* ---- Work queue elements ------------------------------------------- */

struct srnic_sge {
	__aligned_u64 addr;
	__u32 length;
	__u32 lkey;
};

/* srnic_send_wqe.opcode: the IBV_WR_* value of the work request */
enum srnic_send_wqe_flags {
	SRNIC_WQE_SIGNALED = 1 << 0,
	SRNIC_WQE_FENCE = 1 << 1,
	SRNIC_WQE_SOLICITED = 1 << 2,
	SRNIC_WQE_INLINE = 1 << 3,	/* payload follows the header */
};

/*
 * A send queue entry: this 64-byte header, then num_sge struct srnic_sge
 * or, with SRNIC_WQE_INLINE, inline_len bytes of payload. The SQ entry
 * size bounds both.
 */
struct srnic_send_wqe {
	__aligned_u64 wr_id;
	__u8 opcode;
	__u8 flags;		/* enum srnic_send_wqe_flags */
	__u16 num_sge;
	__u32 inline_len;
	union {
		__be32 imm_data;
		__u32 invalidate_rkey;
	};
	__u32 xrc_remote_srqn;	/* XRC_INI: the target's XRC SRQ (XRCETH) */
	union {
		struct {
			__aligned_u64 remote_addr;
			__u32 rkey;
			__u32 reserved;
		} rdma;
		struct {
			__aligned_u64 remote_addr;
			__aligned_u64 compare_add;
			__aligned_u64 swap;
			__u32 rkey;
			__u32 reserved;
		} atomic;
		struct {
			__u32 ah_handle;
			__u32 remote_qpn;
			__u32 remote_qkey;
			__u32 reserved;
		} ud;
		/*
		 * IBV_WR_FLUSH (14): make [remote_addr, remote_addr +
		 * length) of the MR rkey names (level IBV_FLUSH_RANGE), or
		 * all of it (IBV_FLUSH_MR), globally visible (type
		 * IBV_FLUSH_GLOBAL) or persistent (IBV_FLUSH_PERSISTENT).
		 */
		struct {
			__aligned_u64 remote_addr;
			__u32 rkey;
			__u32 length;
			__u8 type;
			__u8 level;
			__u8 reserved[6];
		} flush;
		/*
		 * IBV_WR_BIND_MW (type 2, or a type 1 ibv_bind_mw()): bind
		 * the MW whose current rkey is mw_rkey to [addr, addr +
		 * length) of the MR mr_lkey, with IBV_ACCESS_* flags
		 * access; the MW's rkey becomes its index with the low
		 * byte of new_rkey.
		 */
		struct {
			__aligned_u64 addr;
			__aligned_u64 length;
			__u32 mr_lkey;
			__u32 mw_rkey;
			__u32 new_rkey;
			__u32 access;
		} bind;
		/*
		 * IB_WR_REG_MR (0x20), kernel QPs only: make the fast-reg
		 * MR of index mr_index valid over its page list (map_mr_sg)
		 * under a new key (that index, a new low byte), with the
		 * IB_ACCESS_* flags access and [iova, iova + length) as the
		 * ULP had them when posting. A user QP's WQE of this opcode
		 * completes with a local QP operation error.
		 */
		struct {
			__aligned_u64 iova;
			__aligned_u64 length;
			__u32 mr_index;
			__u32 key;
			__u32 access;
			__u32 reserved;
		} reg;
	};
	__aligned_u64 reserved1;
};

/* A receive queue entry: this header, then num_sge struct srnic_sge. */
struct srnic_recv_wqe {
	__aligned_u64 wr_id;
	__u16 num_sge;
	__u16 reserved0;
	__u32 reserved1;
};

/* ---- Tag matching --------------------------------------------------- */

/*
 * The tag-matching header (IBTA has none: the layout rdma-core's
 * struct ibv_tmh and mlx5 give it) that begins every message sent to a QP
 * of a tag-matching SRQ, and the rendezvous header after it in a
 * SRNIC_TMH_RNDV message (struct ibv_rvh). Big endian on the wire.
 */
enum srnic_tmh_opcode {
	SRNIC_TMH_NO_TAG = 0,	/* IBV_TMH_NO_TAG: not tag matched */
	SRNIC_TMH_RNDV = 1,	/* IBV_TMH_RNDV: data to READ, then a FIN */
	SRNIC_TMH_FIN = 2,	/* IBV_TMH_FIN: a rendezvous' data is read */
	SRNIC_TMH_EAGER = 3,	/* IBV_TMH_EAGER: the data follows */
};

struct srnic_tmh {
	__u8 opcode;		/* enum srnic_tmh_opcode */
	__u8 reserved[3];
	__be32 app_ctx;
	__be64 tag;
};

struct srnic_rvh {
	__be64 va;
	__be32 rkey;
	__be32 len;
};

/* srnic_tm_op.opcode: the values of libibverbs' enum ibv_ops_wr_opcode */
enum srnic_tm_opcode {
	SRNIC_TM_OP_ADD = 0,	/* IBV_WR_TAG_ADD */
	SRNIC_TM_OP_DEL = 1,	/* IBV_WR_TAG_DEL */
	SRNIC_TM_OP_SYNC = 2,	/* IBV_WR_TAG_SYNC */
};

/* srnic_tm_op.flags: the values of libibverbs' enum ibv_ops_flags */
enum srnic_tm_op_flags {
	SRNIC_TM_OP_SIGNALED = 1 << 0,	/* IBV_OPS_SIGNALED */
	SRNIC_TM_OP_SYNC_CNT = 1 << 1,	/* IBV_OPS_TM_SYNC */
};

/* The most SGEs a tagged buffer has (ibv_tm_caps.max_sge). */
#define SRNIC_TM_OP_MAX_SGE 4

/*
 * One operation on a tag-matching SRQ's tag list (ibv_post_srq_ops()),
 * the driver data of a modify_srq command whose attr_mask is 0, followed
 * by num_sge (at most SRNIC_TM_OP_MAX_SGE) struct srnic_sge (ADD). The provider picks the handle of an
 * ADD (a free one: the kernel refuses one in use with EBUSY); DEL names
 * it. A signaled operation completes on the SRQ's CQ (IBV_WC_TM_ADD,
 * _DEL, _SYNC) before the command returns.
 */
struct srnic_tm_op {
	__u8 opcode;		/* enum srnic_tm_opcode */
	__u8 flags;		/* enum srnic_tm_op_flags */
	__u16 num_sge;
	__u32 handle;
	__u32 unexpected_cnt;
	__u32 reserved;
	__aligned_u64 wr_id;
	__aligned_u64 recv_wr_id;
	__aligned_u64 tag;
	__aligned_u64 mask;
};

/* ---- Completion queue entries -------------------------------------- */

/* srnic_cqe.wc_flags: the values of libibverbs' IBV_WC_* flags */
enum srnic_cqe_flags {
	SRNIC_CQE_GRH = 1 << 0,		/* IBV_WC_GRH */
	SRNIC_CQE_WITH_IMM = 1 << 1,	/* IBV_WC_WITH_IMM */
	SRNIC_CQE_WITH_INV = 1 << 3,	/* IBV_WC_WITH_INV */
	SRNIC_CQE_TM_SYNC_REQ = 1 << 4,	/* IBV_WC_TM_SYNC_REQ */
	SRNIC_CQE_TM_MATCH = 1 << 5,	/* IBV_WC_TM_MATCH */
	SRNIC_CQE_TM_DATA_VALID = 1 << 6, /* IBV_WC_TM_DATA_VALID */
};

/*
 * srnic_cqe.opcode of tag matching (the values of libibverbs' enum
 * ibv_wc_opcode), and srnic_cqe.status of its errors (enum ibv_wc_status)
 */
enum srnic_cqe_tm {
	SRNIC_WC_TM_ERR = 22,		/* IBV_WC_TM_ERR */
	SRNIC_WC_TM_RNDV_INCOMPLETE = 23, /* IBV_WC_TM_RNDV_INCOMPLETE */
	SRNIC_WC_TM_ADD = 130,		/* IBV_WC_TM_ADD */
	SRNIC_WC_TM_DEL = 131,		/* IBV_WC_TM_DEL */
	SRNIC_WC_TM_SYNC = 132,		/* IBV_WC_TM_SYNC */
	SRNIC_WC_TM_RECV = 133,		/* IBV_WC_TM_RECV */
	SRNIC_WC_TM_NO_TAG = 134,	/* IBV_WC_TM_NO_TAG */
};

/*
 * A completion. The kernel writes every field, then (after a release
 * barrier) owner = the phase of the lap it is writing: lap n of the ring
 * (index / num_entries) has phase 1 when n is even, 2 when n is odd, never
 * 0, so a zero-filled ring (new, or a mapping replaced by the zero page
 * after the device went away) holds no valid entry. The provider checks owner, then an acquire barrier, then
 * reads the body.
 */
struct srnic_cqe {
	__aligned_u64 wr_id;
	__u32 byte_len;
	union {
		__be32 imm_data;
		__u32 invalidated_rkey;
	};
	__u32 qp_num;
	__u32 src_qp;
	__u32 vendor_err;
	__u16 pkey_index;
	__u16 slid;
	__u8 status;		/* enum ibv_wc_status */
	__u8 opcode;		/* enum ibv_wc_opcode */
	__u8 wc_flags;		/* enum srnic_cqe_flags */
	__u8 sl;
	__u8 dlid_path_bits;
	__u8 reserved0[2];
	__u8 owner;
	__aligned_u64 timestamp;
	/*
	 * Tag matching (srnic_tm_op): the tag and the TMH's app_ctx of a
	 * message that matched a posted tag (SRNIC_CQE_TM_MATCH), else 0.
	 */
	__aligned_u64 tm_tag;
	__u32 tm_priv;
	__u32 reserved1;
};

#ifdef __cplusplus
#define SRNIC_ABI_ASSERT_SIZE(type, size) \
	static_assert(sizeof(type) == (size), #type " changed size")
#else
#define SRNIC_ABI_ASSERT_SIZE(type, size) \
	_Static_assert(sizeof(type) == (size), #type " changed size")
#endif

SRNIC_ABI_ASSERT_SIZE(struct srnic_alloc_ucontext_req, 8);
SRNIC_ABI_ASSERT_SIZE(struct srnic_direct_loan_resp, 48);
SRNIC_ABI_ASSERT_SIZE(struct srnic_alloc_ucontext_resp, 16);
SRNIC_ABI_ASSERT_SIZE(struct srnic_alloc_pd_resp, 8);
SRNIC_ABI_ASSERT_SIZE(struct srnic_queue_desc, 32);
SRNIC_ABI_ASSERT_SIZE(struct srnic_create_cq_req, 8);
SRNIC_ABI_ASSERT_SIZE(struct srnic_create_cq_resp, 40);
SRNIC_ABI_ASSERT_SIZE(struct srnic_create_qp_req, 8);
SRNIC_ABI_ASSERT_SIZE(struct srnic_create_qp_resp, 72);
SRNIC_ABI_ASSERT_SIZE(struct srnic_modify_qp_req, 8);
SRNIC_ABI_ASSERT_SIZE(struct srnic_query_device_resp, 16);
SRNIC_ABI_ASSERT_SIZE(struct srnic_create_rss_qp_req, 64);
SRNIC_ABI_ASSERT_SIZE(struct srnic_create_srq_req, 8);
SRNIC_ABI_ASSERT_SIZE(struct srnic_modify_srq_req, 8);
SRNIC_ABI_ASSERT_SIZE(struct srnic_tmh, 16);
SRNIC_ABI_ASSERT_SIZE(struct srnic_rvh, 16);
SRNIC_ABI_ASSERT_SIZE(struct srnic_tm_op, 48);
SRNIC_ABI_ASSERT_SIZE(struct srnic_create_wq_req, 8);
SRNIC_ABI_ASSERT_SIZE(struct srnic_create_wq_resp, 32);
SRNIC_ABI_ASSERT_SIZE(struct srnic_create_srq_resp, 40);
SRNIC_ABI_ASSERT_SIZE(struct srnic_create_ah_resp, 8);
SRNIC_ABI_ASSERT_SIZE(struct srnic_resize_cq_req, 8);
SRNIC_ABI_ASSERT_SIZE(struct srnic_resize_cq_resp, 32);
SRNIC_ABI_ASSERT_SIZE(struct srnic_queue_ctrl, 3 * SRNIC_CACHELINE_SIZE);
SRNIC_ABI_ASSERT_SIZE(struct srnic_sge, 16);
SRNIC_ABI_ASSERT_SIZE(struct srnic_send_wqe, 64);
SRNIC_ABI_ASSERT_SIZE(struct srnic_recv_wqe, 16);
SRNIC_ABI_ASSERT_SIZE(struct srnic_cqe, 64);
SRNIC_ABI_ASSERT_SIZE(struct srnic_alloc_dm_resp, 16);
SRNIC_ABI_ASSERT_SIZE(struct srnic_query_dm_resp, 24);
SRNIC_ABI_ASSERT_SIZE(struct srnic_direct_window_resp, 40);

#endif /* SRNIC_ABI_USER_H */
