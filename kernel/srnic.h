/* SPDX-License-Identifier: GPL-2.0 */
/*
 * srnic: a software RoCEv2 RNIC.
 *
 * What the module's files call in each other, by file: each heading names
 * the file that defines what follows it (scripts/kernel-header-check.py
 * checks). The limits are in srnic_limits.h, the objects in
 * srnic_objects.h.
 */
#ifndef SRNIC_H
#define SRNIC_H

#include "srnic_objects.h"

/* srnic_devices.c: the device list */
void srnic_dev_list_add(struct srnic_dev *sdev);
void srnic_dev_list_del(struct srnic_dev *sdev);
struct srnic_dev *srnic_dev_find_by_netdev(struct net_device *ndev);
void srnic_dev_note_neighbours(struct srnic_dev *sdev);
struct srnic_dev *srnic_dev_get_by_netdev(struct net_device *ndev);
int srnic_local_gid_ifindex(struct net *net, const union ib_gid *gid);
void srnic_unregister_devices(struct net *net);

/* srnic_main.c: device creation and teardown */
void srnic_dev_netdev_renamed(struct srnic_dev *sdev);
void srnic_dev_dealloc(struct ib_device *ibdev);

/* srnic_net.c: per-namespace UDP sockets, receive and transmit */
struct srnic_pkt;
int srnic_net_register(void);
void srnic_net_unregister(void);
int srnic_net_get(struct net *net);
void srnic_net_put(struct net *net);
void srnic_rx_packet(struct srnic_dev *sdev, struct sk_buff *skb,
		     const struct srnic_pkt *pkt);
enum srnic_counter srnic_rx_enqueue(struct srnic_qp *qp, struct sk_buff *skb,
				    const struct srnic_pkt *pkt,
				    bool icrc_checked);
bool srnic_rx_icrc_checked(struct srnic_qp *qp, struct sk_buff *skb);
struct sk_buff *srnic_rx_dequeue(struct srnic_qp *qp);
struct sk_buff *srnic_tx_alloc(struct srnic_dev *sdev,
			       unsigned int transport_len, gfp_t gfp);

/**
 * struct srnic_tx_batch - consecutive packets of one sender that go to the
 * IP layer together, as one UDP GSO skb (srnic_tx_send())
 * @head: the first packet; NULL while the batch is empty
 * @tail: the last packet on @head's frag_list
 * @path: their destination
 * @sport: their UDP source port
 * @count: packets in the batch
 * @lost_psn: after a batch the IP layer refused, its first packet's PSN:
 *	      that and the packets after it never left
 * @qp: the QP they come from (whose counters count them), or NULL
 *
 * A sender keeps one on its stack for a run of packets and hands the rest
 * to srnic_tx_batch_flush() at the end; srnic_tx_send() flushes earlier
 * when the next packet does not fit.
 */
struct srnic_tx_batch {
	struct sk_buff *head;
	struct sk_buff *tail;
	const struct srnic_path *path;
	__be16 sport;
	unsigned int count;
	u32 lost_psn;
	struct srnic_qp *qp;
};

int srnic_tx_send(struct srnic_dev *sdev, struct srnic_qp *qp,
		  struct sk_buff *skb, const struct srnic_path *path,
		  __be16 sport, u32 transport_hdr_len,
		  struct srnic_tx_batch *batch);
void srnic_tx_capture_local(struct srnic_dev *sdev, struct sk_buff *skb,
			    const struct srnic_path *path, __be16 sport,
			    u32 transport_hdr_len, int ifindex);
int srnic_tx_batch_flush(struct srnic_dev *sdev, struct srnic_tx_batch *batch);
int srnic_tx_output(struct srnic_dev *sdev, struct srnic_qp *qp,
		    struct sk_buff *skb);
void srnic_rx_deliver(struct srnic_dev *sdev, struct sk_buff *skb);

/* srnic_fault.c: packet fault injection */
void srnic_fault_init(struct srnic_dev *sdev);
void srnic_fault_stop(struct srnic_dev *sdev);
bool srnic_fault_inject(struct srnic_dev *sdev, enum srnic_fault_dir dir,
			struct sk_buff *skb);

/* srnic_capture.c: every packet of a device, on a netdev of its own */
int srnic_capture_start(struct srnic_dev *sdev);
void srnic_capture_stop(struct srnic_dev *sdev);
ssize_t srnic_capture_netdev_name(struct srnic_dev *sdev, char *buf);
void srnic_capture_packet(struct srnic_dev *sdev, const struct sk_buff *skb,
			  bool sent);

extern atomic_t srnic_captures;

/* Whether any srnic device has a capture netdev. */
static inline bool srnic_capture_any(void)
{
	return unlikely(atomic_read(&srnic_captures));
}

/* A packet @sdev sends or receives, to its capture netdev if it has one. */
static inline void srnic_capture(struct srnic_dev *sdev,
				 const struct sk_buff *skb, bool sent)
{
	if (unlikely(rcu_access_pointer(sdev->capture)))
		srnic_capture_packet(sdev, skb, sent);
}

/* srnic_counters.c: `rdma statistic` */
void srnic_count(struct srnic_dev *sdev, enum srnic_counter counter);
void srnic_count_add(struct srnic_dev *sdev, enum srnic_counter counter,
		     unsigned int n);
void srnic_qp_count_add(struct srnic_qp *qp, enum srnic_counter counter,
			unsigned int n);
void srnic_qp_count(struct srnic_qp *qp, enum srnic_counter counter);
void srnic_count_for(struct srnic_dev *sdev, struct srnic_qp *qp,
		     enum srnic_counter counter, unsigned int n);
void srnic_qp_counters_init(struct srnic_dev *sdev);
void srnic_qp_counters_destroy(struct srnic_dev *sdev);
struct rdma_hw_stats *srnic_counter_alloc_stats(struct rdma_counter *counter);
int srnic_counter_bind_qp(struct rdma_counter *counter, struct ib_qp *ibqp);
int srnic_counter_unbind_qp(struct ib_qp *ibqp);
int srnic_counter_update_stats(struct rdma_counter *counter);
int srnic_counter_dealloc(struct rdma_counter *counter);
struct rdma_hw_stats *srnic_alloc_hw_port_stats(struct ib_device *ibdev,
						u32 port_num);
int srnic_get_hw_stats(struct ib_device *ibdev, struct rdma_hw_stats *stats,
		       u32 port_num, int index);

/* srnic_netdev.c: port state that follows the netdev */
int srnic_netdev_notifier_register(void);
void srnic_netdev_notifier_unregister(void);
void srnic_port_init(struct srnic_dev *sdev);
void srnic_port_update_state(struct srnic_dev *sdev);
void srnic_port_update_mtu(struct srnic_dev *sdev);

/* srnic_engine.c: NIC engine threads and their tasks */
int srnic_engines_start(struct srnic_dev *sdev);
void srnic_engines_stop(struct srnic_dev *sdev);
void srnic_engine_task_init(struct srnic_dev *sdev,
			    struct srnic_engine_task *task,
			    const struct srnic_engine_task_ops *ops, u32 key);
void srnic_engine_task_start(struct srnic_engine_task *task);
void srnic_engine_task_stop(struct srnic_engine_task *task);
void srnic_engine_task_schedule(struct srnic_engine_task *task);
void srnic_engine_task_run_here(struct srnic_engine_task *task);
void srnic_engine_task_kick(struct srnic_engine_task *task);
bool srnic_engine_in_atomic_run(void);
void srnic_engine_task_allow_atomic(struct srnic_engine_task *task);
void srnic_engine_task_forbid_atomic(struct srnic_engine_task *task);
void srnic_engine_task_defer(struct srnic_engine_task *task);
void srnic_engine_task_poll(struct srnic_engine_task *task, u64 gap_ns);
u64 srnic_engine_stream_ns(void);

/* srnic_verbs.c: ib_device.driver_def, srnic's uverbs ioctl additions */
extern const struct uapi_definition srnic_uapi_defs[];

/* srnic_dm.c: device memory */
void srnic_dm_init(struct srnic_dev *sdev);
struct ib_dm *srnic_alloc_dm(struct ib_device *ibdev,
			     struct ib_ucontext *uctx,
			     struct ib_dm_alloc_attr *attr,
			     struct uverbs_attr_bundle *attrs);
int srnic_dealloc_dm(struct ib_dm *ibdm, struct uverbs_attr_bundle *attrs);
extern const struct uapi_definition srnic_dm_uapi_defs[];

/* srnic_queue.c: rings shared with the provider */
int srnic_queue_init(struct srnic_queue *q, u32 num_entries, u32 entry_size);
int srnic_queue_init_shared(struct srnic_queue *q, struct srnic_ucontext *uctx,
			    u32 num_entries, u32 entry_size);
void srnic_ring_arena_init(struct srnic_ring_arena *arena);
void srnic_ring_arena_destroy(struct srnic_ring_arena *arena);
int srnic_queue_map(struct srnic_queue *q, struct ib_ucontext *uctx,
		    struct srnic_queue_desc *desc);
void srnic_queue_destroy(struct srnic_queue *q);
struct rdma_user_mmap_entry *
srnic_mmap_entry_insert(struct ib_ucontext *uctx, void *buf, size_t size);
struct srnic_direct_window *
srnic_mmap_entry_window(struct rdma_user_mmap_entry *rdma_entry);
int srnic_mmap_entry_map(struct rdma_user_mmap_entry *rdma_entry,
			 struct vm_area_struct *vma);
void srnic_mmap_entry_free(struct rdma_user_mmap_entry *rdma_entry);
struct srnic_direct_window;
struct rdma_user_mmap_entry *
srnic_mmap_window_insert(struct ib_ucontext *uctx,
			 struct srnic_direct_window *window, size_t size);

/* srnic_direct.c */
extern const struct uapi_definition srnic_direct_uapi_defs[];
int srnic_direct_mmap(struct srnic_direct_window *w, struct vm_area_struct *vma);
void srnic_direct_entry_free(struct srnic_direct_window *w);
void srnic_direct_qp_change_begin(struct srnic_qp *qp);
void srnic_direct_qp_change_end(struct srnic_qp *qp);
void srnic_direct_qp_destroyed(struct srnic_qp *qp);
void srnic_direct_revoke_all(struct srnic_dev *sdev);
void srnic_direct_mr_deregistered(struct srnic_mr *mr);
void srnic_direct_loan_settle(struct srnic_qp *dest, struct srnic_qp *poster);
void srnic_direct_cq_user_add(struct srnic_cq *cq);
void srnic_direct_cq_user_del(struct srnic_cq *cq);
void srnic_direct_cq_resize_begin(struct srnic_cq *cq);
void srnic_direct_cq_resize_end(struct srnic_cq *cq);
void srnic_direct_dev_init(struct srnic_dev *sdev);
void srnic_direct_dev_cleanup(struct srnic_dev *sdev);
int srnic_direct_init(void);
void srnic_direct_exit(void);

/* srnic_mr.c: memory registration, keys, lookup and copies */
void srnic_mr_table_init(struct srnic_dev *sdev);
void srnic_mr_table_destroy(struct srnic_dev *sdev);
struct ib_mr *srnic_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
				u64 iova, int access, struct ib_udata *udata);
struct ib_mr *srnic_get_dma_mr(struct ib_pd *ibpd, int access);
struct ib_mr *srnic_reg_dm_mr(struct ib_pd *ibpd, struct ib_dm *ibdm,
			      struct ib_dm_mr_attr *attr,
			      struct uverbs_attr_bundle *attrs);
struct ib_mr *srnic_reg_dmabuf_mr(struct ib_pd *ibpd, u64 offset, u64 length,
				  u64 iova, int fd, int access,
				  struct ib_udata *udata);
struct ib_mr *srnic_alloc_mr(struct ib_pd *ibpd, enum ib_mr_type mr_type,
			     u32 max_num_sg);
int srnic_map_mr_sg(struct ib_mr *ibmr, struct scatterlist *sg, int sg_nents,
		    unsigned int *sg_offset);
void srnic_mr_unpublish(struct srnic_mr *mr);
void srnic_mr_release(struct srnic_mr *mr);
struct ib_mr *srnic_rereg_user_mr(struct ib_mr *ibmr, int flags, u64 start,
				  u64 length, u64 iova, int access,
				  struct ib_pd *ibpd, struct ib_udata *udata);
struct srnic_mr *srnic_mr_lookup(struct srnic_dev *sdev, u32 key,
				 enum srnic_key_kind kind, struct srnic_pd *pd,
				 int required_access, u64 iova, u64 length);
void srnic_mr_put(struct srnic_mr *mr);
struct srnic_mr *srnic_mr_lookup_whole(struct srnic_dev *sdev, u32 key,
				       enum srnic_key_kind kind,
				       struct srnic_pd *pd, int required_access);
bool srnic_mr_is_current(struct srnic_dev *sdev, const struct srnic_mr *mr);
int srnic_mr_fast_reg(struct srnic_qp *qp, const struct srnic_send_wqe *wqe);
int srnic_mr_invalidate(struct srnic_qp *qp, u32 key);
struct page *srnic_mr_iova_to_page(struct srnic_mr *mr, u64 iova,
				   unsigned int *offset);

/**
 * struct srnic_mr_map - one page of an MR, made accessible for one copy
 * @page: the page holding the address
 * @offset: offset of the address in @page
 * @locked: for an ODP MR, the umem whose umem_mutex is held until
 *	    srnic_mr_unmap_page() (the notifier cannot take the page away
 *	    meanwhile); NULL otherwise
 */
struct srnic_mr_map {
	struct page *page;
	unsigned int offset;
	struct ib_umem_odp *locked;
};

int srnic_mr_map_page(struct srnic_mr *mr, u64 iova, bool write,
		      struct srnic_mr_map *map);
void srnic_mr_unmap_page(struct srnic_mr_map *map);
int srnic_mr_copy_to(struct srnic_mr *mr, u64 iova, const void *src, u64 len);
int srnic_mr_copy_from(struct srnic_mr *mr, u64 iova, void *dst, u64 len);
int srnic_mr_copy(struct srnic_mr *dst, u64 dst_iova, struct srnic_mr *src,
		  u64 src_iova, u64 len);

/* srnic_mw.c: memory windows, rkey lookup, local and remote invalidation */
void srnic_mw_table_init(struct srnic_dev *sdev);
void srnic_mw_table_destroy(struct srnic_dev *sdev);
int srnic_alloc_mw(struct ib_mw *ibmw, struct ib_udata *udata);
int srnic_dealloc_mw(struct ib_mw *ibmw);
struct srnic_mr *srnic_rkey_lookup(struct srnic_qp *qp, struct srnic_pd *pd,
				   u32 rkey,
				   int required_access, u64 iova, u64 length);
enum ib_wc_status srnic_local_op(struct srnic_qp *qp,
				 const struct srnic_send_wqe *wqe);
int srnic_invalidate_key(struct srnic_qp *qp, u32 key, bool remote);
/* srnic_payload.c: the payload ICRC and copy routines */
u32 srnic_payload_crc32(u32 crc, const void *data, size_t len);
int srnic_payload_crc32_named(const char *name, u32 *crc, const void *data,
			      size_t len);
void srnic_payload_copy(void *dst, const void *src, size_t len);
void srnic_payload_init(void);
void srnic_payload_exit(void);

/* srnic_odp.c: on-demand paging MRs */
#define SRNIC_ODP_CHILD_SHIFT 21	/* 2 MiB children of an implicit MR */
int srnic_odp_init(struct srnic_mr *mr, u64 start, u64 length, int access);
void srnic_odp_release(struct srnic_mr *mr);
int srnic_odp_map_page(struct srnic_mr *mr, u64 iova, bool write,
		       struct srnic_mr_map *map);
int srnic_advise_mr(struct ib_pd *ibpd,
		    enum ib_uverbs_advise_mr_advice advice, u32 flags,
		    struct ib_sge *sg_list, u32 num_sge,
		    struct uverbs_attr_bundle *attrs);
int srnic_odp_wq_init(void);
void srnic_odp_wq_exit(void);

/* srnic_debugfs.c: the per-device debugfs directory */
void srnic_debugfs_init(void);
void srnic_debugfs_exit(void);
void srnic_debugfs_add_dev(struct srnic_dev *sdev);
void srnic_debugfs_remove_dev(struct srnic_dev *sdev);
/* srnic_cq.c: completion queues */
int srnic_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		    struct ib_udata *udata);
int srnic_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata);
int srnic_cq_resize_prepare(struct srnic_cq *cq, int cqe,
			    struct ib_udata *udata, struct srnic_queue *ring);
int srnic_cq_resize_commit(struct srnic_cq *cq, struct srnic_queue *ring,
			   int cqe);
int srnic_poll_cq(struct ib_cq *ibcq, int num_entries, struct ib_wc *wc);
int srnic_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags);
int srnic_cq_post(struct srnic_cq *cq, const struct srnic_cqe *cqe,
		  bool solicited);
int srnic_cq_post_flush(struct srnic_cq *cq, u64 wr_id, u32 qp_num,
			u8 wc_opcode);
bool srnic_cq_adopt_lent(struct srnic_cq *cq, u32 n, u32 *producer);
void srnic_cq_wait_events(struct srnic_cq *cq);

/* srnic_udata.c: checks of the driver data of uverbs commands */
int srnic_udata_check_tail(struct ib_udata *udata, size_t known);
int srnic_udata_check_reserved_req(struct ib_udata *udata);

/* srnic_wq.c: work queue rings (SQ, RQ, SRQ) */
int srnic_wq_init(struct srnic_wq *wq, struct srnic_ucontext *uctx, u32 max_wr,
		  u32 header, u32 payload);
u32 srnic_wq_producer(struct srnic_wq *wq, struct ib_device *ibdev,
		      const char *what, u32 num);
u32 srnic_wq_read_producer(struct srnic_qp *qp, struct srnic_wq *wq);
void srnic_wq_pop(struct srnic_wq *rq, void *wqe);
bool srnic_wq_pop_fit(struct srnic_wq *rq, void *wqe, u64 len);
int srnic_wq_post_recv(struct srnic_wq *wq, const struct ib_recv_wr *wr,
		       const struct ib_recv_wr **bad_wr);
u8 srnic_wqe_wc_opcode(u8 wr_opcode);

/* srnic_qp_state.c: entering QP states, flushing, the error state */
void srnic_qp_enter_state(struct srnic_qp *qp, enum ib_qp_state state);
void srnic_qp_change_begin(struct srnic_qp *qp);
void srnic_qp_change_end(struct srnic_qp *qp);
void srnic_qp_to_error(struct srnic_qp *qp, enum ib_event_type event);
void srnic_qp_to_error_locked(struct srnic_qp *qp);
void srnic_qp_complete_to_error(struct srnic_qp *qp, struct srnic_cq *cq,
				const struct srnic_cqe *cqe);
void srnic_wq_flush(struct srnic_qp *qp, struct srnic_wq *wq, bool is_sq);
void srnic_qp_task_flush(struct srnic_qp *qp);

/* srnic_qp.c: queue pairs */
int srnic_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init,
		    struct ib_udata *udata);
int srnic_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr,
		    int mask, struct ib_udata *udata);
int srnic_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		   struct ib_qp_init_attr *init);
int srnic_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata);
int srnic_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		    const struct ib_send_wr **bad_wr);
int srnic_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		    const struct ib_recv_wr **bad_wr);

/* srnic_srq.c: shared receive queues */
int srnic_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init,
		     struct ib_udata *udata);
int srnic_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
		     enum ib_srq_attr_mask mask, struct ib_udata *udata);
int srnic_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr);
int srnic_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata);
int srnic_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
			const struct ib_recv_wr **bad_wr);
int srnic_srq_take(struct srnic_srq *srq, struct srnic_recv_wqe *rwqe,
		   u64 len);
struct srnic_srq *srnic_xrc_srq_get(struct srnic_qp *qp, u32 srqn);
void srnic_srq_put(struct srnic_srq *srq);
int srnic_alloc_xrcd(struct ib_xrcd *ibxrcd, struct ib_udata *udata);
int srnic_dealloc_xrcd(struct ib_xrcd *ibxrcd, struct ib_udata *udata);
void srnic_srq_qp_error(struct srnic_qp *qp);
void srnic_srq_qp_flushed(struct srnic_qp *qp);

/*
 * srnic_sgl.c: scatter/gather lists: SGEs resolved to MRs, copies between
 * SGLs, kernel buffers, packets and MRs
 */
void srnic_sgl_put(struct srnic_sgl *sgl);
int srnic_sgl_alloc(struct srnic_sgl *sgl, unsigned int max);
void srnic_sgl_free(struct srnic_sgl *sgl);
enum ib_wc_status srnic_sgl_get(struct srnic_dev *sdev, struct srnic_pd *pd,
				const struct srnic_sge *sge, unsigned int num,
				int access, struct srnic_sgl *sgl);
int srnic_sgl_copy(const struct srnic_sgl *dst, const struct srnic_sgl *src);
int srnic_sgl_copy_from(const struct srnic_sgl *dst,
			const struct srnic_sgl *src, u64 from);
int srnic_sgl_xfer(const struct srnic_sgl *sgl, u64 offset, u8 *buf, u32 len,
		   bool into_sgl);
int srnic_sgl_scatter(const struct srnic_sgl *sgl, u64 offset, const u8 *src,
		      u32 len);
int srnic_pkt_scatter(const struct sk_buff *skb, const struct srnic_pkt *pkt,
		      const struct srnic_sgl *sgl, u64 offset);
int srnic_pkt_copy_to_mr(const struct sk_buff *skb,
			 const struct srnic_pkt *pkt, struct srnic_mr *mr,
			 u64 iova);

/* srnic_tx.c: the packet builder */
u32 srnic_qp_mtu(struct srnic_qp *qp);
int srnic_path_init(struct srnic_path *path, const union ib_gid *sgid,
		    const struct ib_global_route *grh, u32 lqpn, u32 rqpn);

/**
 * struct srnic_txd - one packet to build (srnic_tx_build())
 * @opcode: BTH opcode
 * @psn: BTH PSN
 * @ack_req: BTH AckReq
 * @sr: srnic's selective repeat bit (SRNIC_BTH_APSN_SR): on a request, its
 *	requester takes selective NAKs; on a NAK, it is one
 * @sr_run: a selective NAK's run of kept PSNs, 1 to SRNIC_SR_RUN_MAX; on
 *	    a READ or atomic request, SRNIC_SR_RUN_READ_RANGE or 0
 * @sport: the UDP source port, or 0 for the path's (multipath spraying)
 * @solicited: BTH SE
 * @va: RETH or AtomicETH virtual address
 * @rkey: RETH or AtomicETH R_Key
 * @dma_len: RETH DMA length
 * @feth: FETH bits (FLUSH: placement type, selectivity level)
 * @swap_add: AtomicETH swap (compare & swap) or add (fetch & add) data
 * @compare: AtomicETH compare data
 * @orig: AtomicAckETH original remote data
 * @aeth: AETH syndrome << 24 | MSN
 * @imm: immediate data, big-endian as on the wire
 * @inv_rkey: IETH R_Key to invalidate (SEND with invalidate)
 * @sgl: payload source (requester's SGL) or NULL
 * @mr: payload source MR (READ responses) when @sgl is NULL
 * @offset: byte offset in @sgl, or address in @mr
 * @len: payload bytes
 * @dqpn: destination QP of a DETH packet (UD); others go to the QP's
 *	  dest_qp_num
 * @qkey: DETH Q_Key
 * @xrc_srqn: XRCETH: the XRC SRQ at the target (XRC requests)
 * @path: where the packet goes; NULL for the QP's path
 * @capture_ifindex: 0, or a packet of a local delivery, shown on capture
 *		     netdevs only, its destination's srnic device on this
 *		     netdev (srnic_local_capture())
 */
struct srnic_txd {
	u8 opcode;
	u32 psn;
	bool ack_req;
	bool solicited;
	bool sr;
	u8 sr_run;
	__be16 sport;
	u64 va;
	u32 rkey;
	u32 dma_len;
	u32 feth;
	u64 swap_add;
	u64 compare;
	u64 orig;
	u32 aeth;
	__be32 imm;
	u32 inv_rkey;
	const struct srnic_sgl *sgl;
	struct srnic_mr *mr;
	u64 offset;
	u32 len;
	u32 dqpn;
	u32 qkey;
	u32 xrc_srqn;
	const struct srnic_path *path;
	int capture_ifindex;
};

u8 srnic_tx_req_opcode(unsigned int wr_opcode, bool first, bool last);
u32 srnic_tx_flush_feth(const struct srnic_send_wqe *wqe);
void srnic_tx_atomic_txd(const struct srnic_send_wqe *wqe,
			 struct srnic_txd *txd);
int srnic_tx_build(struct srnic_qp *qp, const struct srnic_txd *txd,
		   struct srnic_tx_batch *batch);

/* srnic_local.c: local delivery, and taking receive WQEs */
/* The outcome of executing one WQE. */
enum srnic_exec {
	SRNIC_EXEC_DONE,	/* complete the WQE with @status */
	SRNIC_EXEC_RNR,		/* no receive WQE at the responder: retry */
	SRNIC_EXEC_NO_ANSWER,	/* no responder (yet): retry on timeout */
	SRNIC_EXEC_DEFER,	/* not executed: it may sleep, the run may not */
};

struct srnic_qp *srnic_local_dest_get(struct srnic_qp *qp);
bool srnic_rq_take(struct srnic_qp *qp, struct srnic_recv_wqe *rwqe);
int srnic_rq_take_fit(struct srnic_qp *qp, struct srnic_recv_wqe *rwqe,
		      u64 len);
int srnic_resp_rq_take(struct srnic_qp *qp, struct srnic_srq *xsrq,
		       struct srnic_recv_wqe *rwqe, u64 len);
bool srnic_responder_ready(struct srnic_qp *dest);
enum srnic_exec srnic_local_execute(struct srnic_qp *qp,
				    const struct srnic_send_wqe *wqe,
				    struct srnic_sgl *local,
				    enum ib_wc_status *status);
void srnic_local_tm_rndv(struct srnic_qp *qp);

/* srnic_sq.c: the send queue of every requester */
bool srnic_wqe_opcode_supported(struct srnic_qp *qp, u8 opcode);
enum ib_wc_status srnic_req_local_sgl(struct srnic_qp *qp,
				      const struct srnic_send_wqe *wqe,
				      struct srnic_sgl *sgl);
bool srnic_req_fetch(struct srnic_qp *qp);
bool srnic_req_finish(struct srnic_qp *qp, enum ib_wc_status status, u64 len);
void srnic_sq_publish_completed(struct srnic_qp *qp);
void srnic_req_wait_ns(struct srnic_qp *qp, u64 delay);
void srnic_req_rnr_wait(struct srnic_qp *qp, u8 code);
bool srnic_req_rnr_wait_over(struct srnic_qp *qp);
void srnic_qp_ask_doorbells(struct srnic_qp *qp);
void srnic_qp_woken(struct srnic_engine_task *task);
bool srnic_task_defer_if_faulting(struct srnic_qp *qp);
void srnic_sq_stream_begin(struct srnic_qp *qp);
void srnic_sq_stream_check(struct srnic_qp *qp);

/* srnic_rc.c: the QP engine task, the local-delivery requester */
extern const struct srnic_engine_task_ops srnic_qp_task_ops;
int srnic_rc_init(struct srnic_qp *qp);
void srnic_rc_cleanup(struct srnic_qp *qp);
int srnic_rc_resolve_dest(struct srnic_qp *qp, int local_ifindex);
int srnic_local_scratch_alloc(struct srnic_local_scratch *s);
void srnic_local_scratch_install(struct srnic_qp *qp,
				 struct srnic_local_scratch *s);
void srnic_local_scratch_free(struct srnic_local_scratch *s);
void srnic_rc_reset(struct srnic_qp *qp);

/* Is a send WQE's IB_WR_* opcode compare & swap or fetch & add? */
static inline bool srnic_wr_is_atomic(u8 opcode)
{
	return opcode == IB_WR_ATOMIC_CMP_AND_SWP ||
	       opcode == IB_WR_ATOMIC_FETCH_AND_ADD;
}

/* Is it executed by the requester alone, sending nothing? */
static inline bool srnic_wr_is_local(u8 opcode)
{
	return opcode == IB_WR_BIND_MW || opcode == IB_WR_LOCAL_INV ||
	       opcode == IB_WR_REG_MR;
}

/*
 * ATOMIC WRITE (IBTA 1.5 Atomic Write annex, Linux >= 6.2's
 * IB_WR_ATOMIC_WRITE and IB_WC_ATOMIC_WRITE): Linux 6.1's ib_verbs.h has
 * no names for it, so srnic has its own, the uverbs values
 * (IB_UVERBS_WR_ATOMIC_WRITE, IB_UVERBS_WC_ATOMIC_WRITE,
 * IB_UVERBS_DEVICE_ATOMIC_WRITE) that libibverbs' IBV_WR_ATOMIC_WRITE,
 * IBV_WC_ATOMIC_WRITE and IBV_DEVICE_ATOMIC_WRITE also have. Only user
 * QPs post it (6.1's kernel ULPs cannot); 9 is IB_WC_MASKED_COMP_SWAP to
 * a 6.1 kernel consumer, which srnic never reports.
 */
#define SRNIC_WR_ATOMIC_WRITE 15
#define SRNIC_WC_ATOMIC_WRITE 9
#define SRNIC_DEVICE_ATOMIC_WRITE BIT_ULL(40)

/*
 * FLUSH (IBTA 1.5 Memory Placement Extensions; Linux >= 6.2's IB_WR_FLUSH,
 * IB_WC_FLUSH, IB_ACCESS_FLUSH_GLOBAL and IB_DEVICE_FLUSH_GLOBAL), under
 * srnic's own names for the same reason, with the uverbs values. User QPs
 * only; answered, as a READ of nothing, by one empty READ response.
 */
#define SRNIC_WR_FLUSH 14
#define SRNIC_WC_FLUSH 8
#define SRNIC_ACCESS_FLUSH_GLOBAL BIT(8)
#define SRNIC_ACCESS_FLUSH_PERSISTENT BIT(9)
#define SRNIC_DEVICE_FLUSH_GLOBAL BIT_ULL(38)

/* Is it answered by READ responses (a READ, a FLUSH)? */
static inline bool srnic_wr_is_read(u8 opcode)
{
	return opcode == IB_WR_RDMA_READ || opcode == SRNIC_WR_FLUSH;
}

/* Does it read a response (READ responses, ATOMIC_ACKNOWLEDGE)? */
static inline bool srnic_wr_is_rd_atomic(u8 opcode)
{
	return srnic_wr_is_read(opcode) || srnic_wr_is_atomic(opcode);
}

/*
 * Does it take a responder resource (one of max_rd_atomic outstanding):
 * READ, atomics, and ATOMIC WRITE, which completes on a plain ACK.
 */
static inline bool srnic_wr_takes_rd_resource(u8 opcode)
{
	return srnic_wr_is_rd_atomic(opcode) ||
	       opcode == SRNIC_WR_ATOMIC_WRITE;
}

/* Bytes an atomic operates on, at an address aligned to as many. */
#define SRNIC_ATOMIC_SIZE 8

/*
 * The parsed headers of a received packet queued to a QP: skb->cb starts
 * with them (struct srnic_rx_cb, srnic_net.c).
 */
static inline struct srnic_pkt *srnic_skb_pkt(struct sk_buff *skb)
{
	return (struct srnic_pkt *)skb->cb;
}

/* 24-bit PSN arithmetic: < 0, 0, > 0 as @a is before, at, after @b. */
static inline int srnic_psn_cmp(u32 a, u32 b)
{
	return (s32)((a - b) << 8);
}

static inline u32 srnic_psn_add(u32 psn, u32 n)
{
	return (psn + n) & 0xffffff;
}

/* srnic_tm.c: tag-matching SRQs */
int srnic_tm_create(struct srnic_srq *srq, u32 max_num_tags);
void srnic_tm_destroy(struct srnic_srq *srq);
int srnic_tm_op(struct srnic_srq *srq, struct ib_udata *udata);
int srnic_tm_take(struct srnic_qp *qp, struct srnic_srq *srq, const u8 *hdr,
		  u32 len, bool rndv, struct srnic_recv_wqe *rwqe,
		  struct srnic_tm_match *m);
void srnic_tm_fill_cqe(const struct srnic_tm_match *m, struct srnic_cqe *cqe);

/* srnic_rss.c: work queues, indirection tables, hash QPs */
struct ib_wq *srnic_create_wq(struct ib_pd *ibpd, struct ib_wq_init_attr *init,
			      struct ib_udata *udata);
int srnic_modify_wq(struct ib_wq *ibwq, struct ib_wq_attr *attr, u32 mask,
		    struct ib_udata *udata);
int srnic_destroy_wq(struct ib_wq *ibwq, struct ib_udata *udata);
int srnic_create_rwq_ind_table(struct ib_rwq_ind_table *table,
			       struct ib_rwq_ind_table_init_attr *init,
			       struct ib_udata *udata);
int srnic_destroy_rwq_ind_table(struct ib_rwq_ind_table *table);
int srnic_rss_qp_init(struct srnic_qp *qp, struct ib_qp_init_attr *init,
		      struct ib_udata *udata);
int srnic_rwq_take(struct srnic_rwq *rwq, struct srnic_recv_wqe *rwqe);
bool srnic_frame_to_rwqe(struct srnic_qp *qp, struct srnic_pd *pd,
			 const struct srnic_recv_wqe *rwqe, u32 max_sge,
			 const struct sk_buff *skb, struct srnic_cq *cq,
			 u32 qp_num);
void srnic_rss_rx(struct srnic_qp *qp, struct sk_buff *skb);

/* srnic_raw.c: raw packet QPs and flow steering */
extern const struct srnic_engine_task_ops srnic_raw_task_ops;
struct ib_flow *srnic_create_flow(struct ib_qp *ibqp, struct ib_flow_attr *attr,
				  struct ib_udata *udata);
int srnic_destroy_flow(struct ib_flow *ibflow);
void srnic_raw_init(struct srnic_dev *sdev);
void srnic_raw_netdev_unregistering(struct srnic_dev *sdev);

/* srnic_ud.c: UD queue pairs' engine task */
extern const struct srnic_engine_task_ops srnic_ud_task_ops;
bool srnic_datagram_run(struct srnic_qp *qp,
			struct sk_buff *(*dequeue)(struct srnic_qp *qp),
			void (*rx)(struct srnic_qp *qp, struct sk_buff *skb),
			enum ib_wc_status (*send)(struct srnic_qp *qp, u64 *len));
bool srnic_datagram_has_work(struct srnic_engine_task *task);
bool srnic_datagram_prepare_sleep(struct srnic_engine_task *task);
void srnic_ud_drain_sq(struct srnic_qp *qp);
void srnic_ud_drain_pd(struct srnic_dev *sdev, struct ib_pd *pd);

/* srnic_rate.c: the requester's rate limiter (DCQCN's reaction point), packet pacing */
bool srnic_rate_begin_run(struct srnic_qp *qp);
bool srnic_rate_admit(struct srnic_qp *qp, u32 len);
void srnic_rate_start(struct srnic_qp *qp);
void srnic_rate_init(struct srnic_qp *qp);
void srnic_rate_cleanup(struct srnic_qp *qp);
int srnic_rate_check_limit(u32 kbps);
void srnic_rate_set_limit(struct srnic_qp *qp, u32 kbps, u32 burst_bytes);
bool srnic_rate_pace(struct srnic_qp *qp);
void srnic_rate_paced(struct srnic_qp *qp, u64 bytes);

/* srnic_req.c: the RC requester over the wire */
int srnic_req_init(struct srnic_qp *qp);
void srnic_req_cleanup(struct srnic_qp *qp);
void srnic_req_reset(struct srnic_qp *qp);
unsigned long srnic_req_ack_timeout(struct srnic_qp *qp);
void srnic_req_put_mrs(struct srnic_qp *qp);
void srnic_req_start(struct srnic_qp *qp);
bool srnic_req_wire_run(struct srnic_qp *qp, unsigned int budget);
void srnic_req_rx_response(struct srnic_qp *qp, struct sk_buff *skb);
bool srnic_req_wire_has_work(struct srnic_qp *qp);
bool srnic_req_wire_waiting(struct srnic_qp *qp);

/* srnic_resp.c: the RC responder for requests from the wire, the rules of both responders */
bool srnic_resp_op_allowed(struct srnic_qp *qp, int access, u8 *slots);
u8 srnic_atomic_nak(int err);
enum ib_wc_status srnic_nak_wc_status(u8 nak);
enum ib_event_type srnic_resp_error_event(struct srnic_qp *qp,
					  enum ib_wc_status status);
u32 srnic_resp_rwqe_size(const struct srnic_qp *qp);
int srnic_resp_init(struct srnic_qp *qp);
void srnic_resp_cleanup(struct srnic_qp *qp);
struct srnic_atomic_replays *srnic_resp_atomics_alloc(struct srnic_qp *qp,
						      u8 max_dest_rd_atomic);
void srnic_resp_atomics_install(struct srnic_qp *qp,
				struct srnic_atomic_replays *replays);
void srnic_resp_reset(struct srnic_qp *qp);
void srnic_resp_put_mrs(struct srnic_qp *qp);
void srnic_resp_rx_request(struct srnic_qp *qp, struct sk_buff *skb);
bool srnic_resp_run(struct srnic_qp *qp, unsigned int budget);
void srnic_resp_flush_ack(struct srnic_qp *qp);
struct sk_buff *srnic_resp_ooo_next(struct srnic_qp *qp);
bool srnic_resp_ooo_ready(struct srnic_qp *qp);
bool srnic_resp_went_back(struct srnic_qp *qp);
int srnic_atomic_execute(struct srnic_mr *mr, u64 iova, bool cmp_swap,
			 u64 swap_add, u64 compare, u64 *orig);
bool srnic_flush_check(struct srnic_qp *qp, struct srnic_pd *pd, u32 rkey,
		       u64 va, u32 len, u32 feth);
int srnic_atomic_write_execute(struct srnic_mr *mr, u64 iova, u64 value);

/*
 * srnic_ah.c: address handles. An AH number is an index in [1, SRNIC_MAX_AH]
 * of the device's ah_table, so 0 never names an AH.
 */
#define SRNIC_MAX_AH (BIT(16) - 1)

/**
 * struct srnic_ah - an address handle
 * @ibah: ib_core's AH; @ibah.sgid_attr holds the source GID's reference
 * @attr: the address vector as created; @attr.grh.sgid_attr is NULL (the
 *	  reference is @ibah.sgid_attr's)
 * @ah_num: index in the device's ah_table, given to the provider
 */
struct srnic_ah {
	struct ib_ah ibah;
	struct rdma_ah_attr attr;
	u32 ah_num;
};

static inline struct srnic_ah *to_srnic_ah(struct ib_ah *ibah)
{
	return container_of(ibah, struct srnic_ah, ibah);
}

void srnic_ah_table_init(struct srnic_dev *sdev);
void srnic_ah_table_destroy(struct srnic_dev *sdev);
int srnic_create_ah(struct ib_ah *ibah, struct rdma_ah_init_attr *init,
		    struct ib_udata *udata);
int srnic_query_ah(struct ib_ah *ibah, struct rdma_ah_attr *attr);
int srnic_destroy_ah(struct ib_ah *ibah, u32 flags);

/* srnic_verbs.c: the ib_device_ops table */
int srnic_resize_cq(struct ib_cq *ibcq, int cqe, struct ib_udata *udata);
extern const struct ib_device_ops srnic_dev_ops;

/*
 * srnic_mcast.c: UD multicast groups. The limits are srnic's own; BTH
 * destination QP 0xFFFFFF addresses every QP attached to the group of the
 * datagram's IP destination.
 */
#define SRNIC_MCAST_QPN 0xffffff
#define SRNIC_MAX_MCAST_GRP 256
#define SRNIC_MAX_MCAST_QP_ATTACH 64
#define SRNIC_MAX_TOTAL_MCAST_QP_ATTACH 1024

void srnic_mcast_init(struct srnic_dev *sdev);
int srnic_attach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid);
int srnic_detach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid);
void srnic_mcast_detach_qp(struct srnic_qp *qp);
void srnic_mcast_rx(struct srnic_dev *sdev, struct sk_buff *skb,
		    const struct srnic_pkt *pkt);

#endif /* SRNIC_H */
