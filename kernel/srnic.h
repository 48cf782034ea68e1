/* SPDX-License-Identifier: GPL-2.0 */
/*
 * srnic: a software RoCEv2 RNIC.
 *
 * Core object definitions shared by the module's files. Every srnic
 * object embeds its ib_core object first and has a to_srnic_*() converter.
 */
#ifndef SRNIC_H
#define SRNIC_H

#include <linux/device.h>
#include <linux/idr.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/netdevice.h>
#include <linux/rcupdate.h>
#include <linux/refcount.h>
#include <linux/completion.h>
#include <linux/xarray.h>
#include <rdma/ib_verbs.h>

#include "uapi/rdma/srnic-abi.h"

#define SRNIC_DRIVER_NAME "srnic"
#define SRNIC_PORT 1		/* srnic devices have exactly one port */

/* Limits reported by query_device/query_port for what is implemented. */
#define SRNIC_MAX_PD BIT(16)
#define SRNIC_MAX_UCONTEXT 1024
#define SRNIC_GID_TABLE_LEN 128
#define SRNIC_PKEY_TABLE_LEN 1
#define SRNIC_DEFAULT_PKEY 0xffff
#define SRNIC_MAX_INLINE_DATA 0	/* no send queue yet */

/*
 * Memory regions. An MR key is (index << 8) | key byte, and the index
 * space [1, SRNIC_MAX_MR] fits the 24 bits left of the key byte. Page
 * arrays are kvcalloc()'d, which refuses more than INT_MAX bytes: 2^39
 * bytes of 4 KiB pages need a 1 GiB array.
 */
#define SRNIC_MAX_MR (BIT(20) - 1)
#define SRNIC_MAX_MR_SIZE BIT_ULL(39)
#define SRNIC_MAX_FAST_REG_PAGES 512

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
 * @list: entry in srnic_devices
 * @port: port state
 * @pd_ids: allocator of protection domain numbers
 * @mr_table: MR index (key >> 8) -> struct srnic_mr, read under RCU
 * @mr_next: next index xa_alloc_cyclic() tries, under @mr_table's lock
 * @mr_laps: times the cyclic allocation wrapped, under @mr_table's lock
 * @mr_key_seed: random start of the key bytes of this device
 * @debugfs: the device's debugfs directory (test hooks)
 * @link_index: number in the parent's name
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
	struct dentry *debugfs;
	int link_index;
};

/* The control record occupies the ring's whole first page. */
#define SRNIC_QUEUE_CTRL_SIZE PAGE_SIZE
/* Upper bound on one ring's memory (control page included). */
#define SRNIC_QUEUE_MAX_BYTES (64UL << 20)

/**
 * struct srnic_queue - one ring shared with the provider (or kernel-only)
 * @buf: vmalloc_user() memory: control page, then the entries
 * @size: bytes of @buf, page aligned
 * @ctrl: the control record at the start of @buf
 * @entries: first entry
 * @num_entries: power of two
 * @entry_size: power of two
 * @mmap_entry: for user rings, the entry that owns @buf
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
};

static inline void *srnic_queue_entry(struct srnic_queue *q, u32 index)
{
	return q->entries + (size_t)(index & (q->num_entries - 1)) * q->entry_size;
}

struct srnic_ucontext {
	struct ib_ucontext ibuc;
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
 *	 the engine will set it from IB_WR_REG_MR (ib_update_fast_reg_key())
 * @valid: lookups may succeed; false for a fast-reg MR until the engine
 *	   executes IB_WR_REG_MR (not implemented yet)
 * @index: slot in the device's mr_table
 * @iova: first address of the MR
 * @length: bytes from @iova the MR covers
 * @umem: pinned user memory (SRNIC_MR_USER)
 * @pages: one struct page per PAGE_SIZE of the MR (USER, FAST_REG)
 * @num_pages: valid entries of @pages
 * @max_pages: capacity of @pages
 * @page_offset: offset of @iova in @pages[0]
 * @users: one for the registration, one per in-flight access
 * @released: completed when @users drops to zero; dereg_mr waits for it
 * @rcu: the struct is freed after a grace period (lookups run under RCU)
 *
 * Everything but @users is written before the MR is published in
 * mr_table and never changes while it is there, except for fast-reg MRs,
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
	u32 index;
	u64 iova;
	u64 length;
	struct ib_umem *umem;
	struct page **pages;
	unsigned long num_pages;
	unsigned long max_pages;
	unsigned int page_offset;
	refcount_t users;
	struct completion released;
	struct rcu_head rcu;
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

static inline struct srnic_mr *to_srnic_mr(struct ib_mr *mr)
{
	return container_of(mr, struct srnic_mr, ibmr);
}

/* srnic_main.c: the device list and device creation/teardown */
struct srnic_dev *srnic_dev_find_by_netdev(struct net_device *ndev);
void srnic_dev_netdev_renamed(struct srnic_dev *sdev);
void srnic_dev_dealloc(struct ib_device *ibdev);

/* srnic_netdev.c: port state that follows the netdev */
int srnic_netdev_notifier_register(void);
void srnic_netdev_notifier_unregister(void);
void srnic_port_init(struct srnic_dev *sdev);
void srnic_port_update_state(struct srnic_dev *sdev);
void srnic_port_update_mtu(struct srnic_dev *sdev);

/* srnic_queue.c: rings shared with the provider */
int srnic_queue_init(struct srnic_queue *q, u32 num_entries, u32 entry_size);
int srnic_queue_map(struct srnic_queue *q, struct ib_ucontext *uctx,
		    struct srnic_queue_desc *desc);
void srnic_queue_destroy(struct srnic_queue *q);
int srnic_mmap(struct ib_ucontext *uctx, struct vm_area_struct *vma);
void srnic_mmap_free(struct rdma_user_mmap_entry *rdma_entry);

/* srnic_mr.c: memory registration, keys, lookup and copies */
void srnic_mr_table_init(struct srnic_dev *sdev);
void srnic_mr_table_destroy(struct srnic_dev *sdev);
struct ib_mr *srnic_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
				u64 iova, int access, struct ib_udata *udata);
struct ib_mr *srnic_get_dma_mr(struct ib_pd *ibpd, int access);
struct ib_mr *srnic_alloc_mr(struct ib_pd *ibpd, enum ib_mr_type mr_type,
			     u32 max_num_sg);
int srnic_map_mr_sg(struct ib_mr *ibmr, struct scatterlist *sg, int sg_nents,
		    unsigned int *sg_offset);
int srnic_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata);
struct srnic_mr *srnic_mr_lookup(struct srnic_dev *sdev, u32 key,
				 enum srnic_key_kind kind, struct srnic_pd *pd,
				 int required_access, u64 iova, u64 length);
void srnic_mr_put(struct srnic_mr *mr);
struct page *srnic_mr_iova_to_page(struct srnic_mr *mr, u64 iova,
				   unsigned int *offset);
int srnic_mr_copy_to(struct srnic_mr *mr, u64 iova, const void *src, u64 len);
int srnic_mr_copy_from(struct srnic_mr *mr, u64 iova, void *dst, u64 len);
int srnic_mr_copy(struct srnic_mr *dst, u64 dst_iova, struct srnic_mr *src,
		  u64 src_iova, u64 len);

/* srnic_debugfs.c: test hooks */
void srnic_debugfs_init(void);
void srnic_debugfs_exit(void);
void srnic_debugfs_add_dev(struct srnic_dev *sdev);
void srnic_debugfs_remove_dev(struct srnic_dev *sdev);

/* srnic_verbs.c: the ib_device_ops table */
int srnic_udata_check_tail(struct ib_udata *udata, size_t known);
extern const struct ib_device_ops srnic_dev_ops;

#endif /* SRNIC_H */
