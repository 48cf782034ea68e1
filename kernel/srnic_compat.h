/* SPDX-License-Identifier: GPL-2.0 */
/*
 * srnic: the kernel interfaces that differ between the kernels srnic builds
 * for (Debian 12's 6.1, Debian 13's 6.12, sid's 7.x), in one place.
 *
 * srnic's code is written against the newest kernel's interfaces. Where an
 * older kernel lacks one, this header supplies it under the same name (a
 * backfill); where the newer interface cannot be given to an older kernel
 * under its own name (a changed prototype), srnic calls an srnic_*()
 * wrapper defined here. Which interfaces a kernel has is decided from its
 * headers, never from its version number: kernel/compat-probe.sh greps
 * them and Kbuild passes one -DSRNIC_HAVE_<NAME> per interface found
 * (`make compat-report` lists them), or, where the interface is a macro,
 * the macro's own presence is the test. No other file tests these flags
 * or a kernel version.
 */
#ifndef SRNIC_COMPAT_H
#define SRNIC_COMPAT_H

#include <linux/dma-buf.h>
#include <linux/hrtimer.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/netdevice.h>
#include <linux/pid.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/sched/coredump.h>
#include <linux/timer.h>
#include <net/ipv6.h>
#include <net/udp_tunnel.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_umem_odp.h>

#ifdef SRNIC_HAVE_LINUX_UNALIGNED_H
#include <linux/unaligned.h>
#else
#include <asm/unaligned.h>
#endif
#ifdef SRNIC_HAVE_IPV6_STUBS
#include <net/ipv6_stubs.h>
#else
#include <net/addrconf.h>
#endif
#ifdef SRNIC_HAVE_TASK_EXEC_STATE
#include <linux/sched/exec_state.h>
#endif
#ifdef SRNIC_HAVE_ODP_HMM_DMA_MAP
#include <linux/hmm.h>
#endif

/* ---- Backfills: newer interfaces under their own names ------------------ */

/* 6.15: ODP capability bits for ATOMIC WRITE and FLUSH; none before. */
#ifdef SRNIC_HAVE_ODP_SUPPORT_ATOMIC_WRITE
#define SRNIC_ODP_SUPPORT_ATOMIC_WRITE IB_ODP_SUPPORT_ATOMIC_WRITE
#else
#define SRNIC_ODP_SUPPORT_ATOMIC_WRITE 0
#endif
#ifdef SRNIC_HAVE_ODP_SUPPORT_FLUSH
#define SRNIC_ODP_SUPPORT_FLUSH IB_ODP_SUPPORT_FLUSH
#else
#define SRNIC_ODP_SUPPORT_FLUSH 0
#endif

/*
 * 6.2: FLUSH. Before, uverbs refuses an MR asking for it, so the device
 * must not announce it (0 there).
 */
#ifdef SRNIC_HAVE_ACCESS_FLUSH_GLOBAL
#define SRNIC_DEVICE_FLUSH SRNIC_DEVICE_FLUSH_GLOBAL
#else
#define SRNIC_DEVICE_FLUSH 0
#endif

#ifndef SRNIC_HAVE_VM_FLAGS_SET
/* 6.3 made vma->vm_flags read-only behind these two. */
static inline void vm_flags_set(struct vm_area_struct *vma, vm_flags_t flags)
{
	vma->vm_flags |= flags;
}

static inline void vm_flags_clear(struct vm_area_struct *vma,
				  vm_flags_t flags)
{
	vma->vm_flags &= ~flags;
}
#endif

#ifndef timer_container_of
/* 6.16 renamed from_timer(). */
#define timer_container_of(var, callback_timer, timer_fieldname) \
	from_timer(var, callback_timer, timer_fieldname)
#endif

#ifndef SRNIC_HAVE_HRTIMER_SETUP
/* 6.13: hrtimer_setup() replaced hrtimer_init() + setting ->function. */
static inline void hrtimer_setup(struct hrtimer *timer,
				 enum hrtimer_restart (*function)(struct hrtimer *),
				 clockid_t clock_id, enum hrtimer_mode mode)
{
	hrtimer_init(timer, clock_id, mode);
	timer->function = function;
}
#endif

#ifndef SRNIC_HAVE_NETIF_GET_FLAGS
/* 7.x renamed dev_get_flags(). */
static inline unsigned int netif_get_flags(const struct net_device *dev)
{
	return dev_get_flags(dev);
}
#endif

#ifndef SRNIC_HAVE_IB_UMEM_GET_VA
/* 7.x: ib_umem_get() of a user address became ib_umem_get_va(). */
static inline struct ib_umem *ib_umem_get_va(struct ib_device *device,
					     unsigned long addr, size_t size,
					     int access)
{
	return ib_umem_get(device, addr, size, access);
}
#endif

/* ---- Wrappers: interfaces whose prototype changed ----------------------- */

/*
 * ib_device_ops entries whose prototype changed. srnic's verbs keep the 6.1
 * prototypes; the ops table points at these adapters (srnic_compat.c)
 * instead, and at the member the kernel has.
 */
struct ib_cq;
struct ib_cq_init_attr;
struct ib_pd;
#ifdef SRNIC_HAVE_CREATE_CQ_ATTRS
int srnic_compat_create_cq(struct ib_cq *ibcq,
			   const struct ib_cq_init_attr *attr,
			   struct uverbs_attr_bundle *attrs);
#else
#define srnic_compat_create_cq srnic_create_cq
#endif
#ifdef SRNIC_HAVE_RESIZE_USER_CQ
#define SRNIC_OP_RESIZE_CQ resize_user_cq
int srnic_compat_resize_cq(struct ib_cq *ibcq, unsigned int cqe,
			   struct ib_udata *udata);
#else
#define SRNIC_OP_RESIZE_CQ resize_cq
#define srnic_compat_resize_cq srnic_resize_cq
#endif
/* Verbs only newer kernels have: their entries, or nothing. */
#ifdef SRNIC_HAVE_QUERY_PORT_SPEED
int srnic_query_port_speed(struct ib_device *ibdev, u32 port_num, u64 *speed);
#define SRNIC_NEWER_DEVICE_OPS .query_port_speed = srnic_query_port_speed,
#else
#define SRNIC_NEWER_DEVICE_OPS
#endif
/* 6.10: reg_user_mr_dmabuf's uverbs attribute bundle; 6.17: its DMA handle. */
#if defined(SRNIC_HAVE_REG_DMABUF_MR_DMAH)
struct ib_mr *srnic_compat_reg_dmabuf_mr(struct ib_pd *ibpd, u64 offset,
					 u64 length, u64 virt_addr, int fd,
					 int access, struct ib_dmah *dmah,
					 struct uverbs_attr_bundle *attrs);
#elif defined(SRNIC_HAVE_REG_DMABUF_MR_ATTRS)
struct ib_mr *srnic_compat_reg_dmabuf_mr(struct ib_pd *ibpd, u64 offset,
					 u64 length, u64 virt_addr, int fd,
					 int access,
					 struct uverbs_attr_bundle *attrs);
#else
#define srnic_compat_reg_dmabuf_mr srnic_reg_dmabuf_mr
#endif
/* Before 6.2 dma_buf_vmap() took the lock that its _unlocked form takes now. */
#ifndef SRNIC_HAVE_DMA_BUF_VMAP_UNLOCKED
#define dma_buf_vmap_unlocked dma_buf_vmap
#define dma_buf_vunmap_unlocked dma_buf_vunmap
#endif
/* Before 6.13 MODULE_IMPORT_NS() took a bare name and made it a string. */
#ifndef SRNIC_HAVE_MODULE_IMPORT_NS_STRING
#undef MODULE_IMPORT_NS
#define MODULE_IMPORT_NS(ns) MODULE_INFO(import_ns, ns)
#endif
#ifdef SRNIC_HAVE_REG_USER_MR_DMAH
struct ib_mr *srnic_compat_reg_user_mr(struct ib_pd *ibpd, u64 start,
				       u64 length, u64 virt_addr, int access,
				       struct ib_dmah *dmah,
				       struct ib_udata *udata);
#else
#define srnic_compat_reg_user_mr srnic_reg_user_mr
#endif

/* 6.15: counter_bind_qp and counter_unbind_qp name the port. */
#ifdef SRNIC_HAVE_COUNTER_BIND_QP_PORT
int srnic_compat_counter_bind_qp(struct rdma_counter *counter,
				 struct ib_qp *ibqp, u32 port);
int srnic_compat_counter_unbind_qp(struct ib_qp *ibqp, u32 port);
#else
#define srnic_compat_counter_bind_qp srnic_counter_bind_qp
#define srnic_compat_counter_unbind_qp srnic_counter_unbind_qp
#endif
/*
 * 6.15: ib_core allocates a struct rdma_counter at the driver's size and
 * calls counter_init on it; srnic keeps its counts apart (struct
 * srnic_qp_counter) and adds nothing to it.
 */
#ifdef SRNIC_HAVE_COUNTER_INIT
struct srnic_rdma_counter {
	struct rdma_counter ibcounter;
};

void srnic_counter_init(struct rdma_counter *counter);
#define SRNIC_COUNTER_INIT_OPS \
	.counter_init = srnic_counter_init, \
	INIT_RDMA_OBJ_SIZE(rdma_counter, srnic_rdma_counter, ibcounter),
#else
#define SRNIC_COUNTER_INIT_OPS
#endif

/* The UDP tunnel helpers take the struct sock since 7.x. */
static inline void srnic_udp_tunnel_setup(struct net *net,
					  struct socket *sock,
					  struct udp_tunnel_sock_cfg *cfg)
{
#ifdef SRNIC_HAVE_UDP_TUNNEL_SK
	setup_udp_tunnel_sock(net, sock->sk, cfg);
#else
	setup_udp_tunnel_sock(net, sock, cfg);
#endif
}

static inline void srnic_udp_tunnel_release(struct socket *sock)
{
#ifdef SRNIC_HAVE_UDP_TUNNEL_SK
	udp_tunnel_sock_release(sock->sk);
#else
	udp_tunnel_sock_release(sock);
#endif
}

/*
 * IPv6 from a module: through ipv6_stub where the kernel has it (IPv6 could
 * be a module, or disabled at boot: the stub's entries are then absent or
 * fail), directly where 7.x removed it (IPv6 is then built in or absent).
 */
static inline struct net_device *srnic_ipv6_dev_find(struct net *net,
						     const struct in6_addr *addr)
{
#ifdef SRNIC_HAVE_IPV6_STUBS
	if (!ipv6_stub->ipv6_dev_find)
		return NULL;
	return ipv6_stub->ipv6_dev_find(net, addr, NULL);
#elif IS_ENABLED(CONFIG_IPV6)
	return ipv6_mod_enabled() ? ipv6_dev_find(net, addr, NULL) : NULL;
#else
	return NULL;
#endif
}

/* Callers check ipv6_mod_enabled() first. */
static inline struct dst_entry *srnic_ip6_dst_lookup_flow(struct net *net,
							  struct flowi6 *fl)
{
#ifdef SRNIC_HAVE_IPV6_STUBS
	return ipv6_stub->ipv6_dst_lookup_flow(net, NULL, fl, NULL);
#elif IS_ENABLED(CONFIG_IPV6)
	return ip6_dst_lookup_flow(net, NULL, fl, NULL);
#else
	return ERR_PTR(-EAFNOSUPPORT);
#endif
}

/**
 * srnic_owner_dumpable() - whether a process is dumpable by its own user
 * @mm: the process's memory
 * @tgid: its thread group (get_task_pid(current, PIDTYPE_TGID) when it
 *	  made the object)
 *
 * ptrace's test of the target (SUID_DUMP_USER). Until 7.x the mm's flags
 * hold it; 7.x moved it to the task's exec state, whose getter is not
 * exported: it is read here as that getter reads it, from the task that
 * still has @mm (a process that exec'ed since is not the owner any more).
 */
static inline bool srnic_owner_dumpable(struct mm_struct *mm, struct pid *tgid)
{
#ifdef SRNIC_HAVE_TASK_EXEC_STATE
	struct task_struct *task;
	bool dumpable = false;

	rcu_read_lock();
	task = pid_task(tgid, PIDTYPE_TGID);
	if (task && READ_ONCE(task->mm) == mm)
		dumpable = READ_ONCE(rcu_dereference(task->exec_state)->dumpable) ==
			   TASK_DUMPABLE_OWNER;
	rcu_read_unlock();
	return dumpable;
#else
	return get_dumpable(mm) == SUID_DUMP_USER;
#endif
}

/*
 * ODP: the per-page state of an ODP umem. Until 6.15 it is dma_list, one
 * entry per umem page (odp->page_shift): the page's address (srnic has no
 * DMA device, ib_uses_virt_dma(), so a kernel virtual address) with
 * ODP_READ/WRITE_ALLOWED_BIT. Since 6.15 it is map.pfn_list, one HMM PFN
 * per PAGE_SIZE page with HMM_PFN_VALID/WRITE.
 */
#ifdef SRNIC_HAVE_ODP_HMM_DMA_MAP
#define SRNIC_ODP_READABLE ((u64)HMM_PFN_VALID)
#define SRNIC_ODP_WRITABLE ((u64)HMM_PFN_WRITE)
#else
#define SRNIC_ODP_READABLE ((u64)ODP_READ_ALLOWED_BIT)
#define SRNIC_ODP_WRITABLE ((u64)ODP_WRITE_ALLOWED_BIT)
#endif

/**
 * srnic_odp_page() - the page holding @va in an ODP umem, if mapped so
 * @odp: the umem, its umem_mutex held
 * @va: an address inside it
 * @need: SRNIC_ODP_READABLE, with SRNIC_ODP_WRITABLE for a write
 *
 * Return: the PAGE_SIZE page of @va, or NULL if it is not mapped with
 * @need (ib_umem_odp_map_dma_and_lock() with @need maps it).
 */
static inline struct page *srnic_odp_page(struct ib_umem_odp *odp, u64 va,
					  u64 need)
{
#ifdef SRNIC_HAVE_ODP_HMM_DMA_MAP
	unsigned long pfn = odp->map.pfn_list[(va - ib_umem_start(odp)) >>
					      PAGE_SHIFT];

	if ((pfn & need) != need)
		return NULL;
	return hmm_pfn_to_page(pfn);
#else
	u64 dma = odp->dma_list[(va - ib_umem_start(odp)) >> odp->page_shift];

	if ((dma & need) != need)
		return NULL;
	return virt_to_page((void *)(uintptr_t)((dma & ODP_DMA_ADDR_MASK) +
		(va & (BIT(odp->page_shift) - 1))));
#endif
}

/**
 * srnic_odp_forget() - after ib_umem_odp_unmap_dma_pages(), make sure no
 * page of [@start, @end) is still marked mapped
 * @odp: the umem, its umem_mutex held
 * @start: first address (inside the umem)
 * @end: end of the range (at most ib_umem_end())
 *
 * With HMM PFNs and a umem of huge pages, ib_umem_odp_unmap_dma_pages()
 * clears one entry per umem page, indexed by umem page, in a list that
 * ib_umem_odp_map_dma_and_lock() fills with one entry per PAGE_SIZE page:
 * most entries of an unmapped huge page would stay valid. Clear (and
 * dirty, where writable) every such entry here. Nothing to do with a
 * dma_list, or with PAGE_SIZE umem pages.
 */
static inline void srnic_odp_forget(struct ib_umem_odp *odp, u64 start,
				    u64 end)
{
#ifdef SRNIC_HAVE_ODP_HMM_DMA_MAP
	unsigned long idx, last;

	if (odp->page_shift == PAGE_SHIFT)
		return;
	idx = (start - ib_umem_start(odp)) >> PAGE_SHIFT;
	last = (end - 1 - ib_umem_start(odp)) >> PAGE_SHIFT;
	for (; idx <= last; idx++) {
		unsigned long pfn = odp->map.pfn_list[idx];

		if (!(pfn & HMM_PFN_VALID))
			continue;
		if (pfn & HMM_PFN_WRITE)
			set_page_dirty(compound_head(hmm_pfn_to_page(pfn)));
		odp->map.pfn_list[idx] &= ~HMM_PFN_FLAGS;
	}
#endif
}

#endif /* SRNIC_COMPAT_H */
