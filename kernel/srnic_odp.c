// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: on-demand paging (ODP) memory regions.
 *
 * An ODP MR (reg_user_mr with IB_ACCESS_ON_DEMAND) pins nothing. Its
 * translation table is the ib_umem_odp's page list, which ib_core fills
 * when the engine asks for a page (ib_umem_odp_map_dma_and_lock(), which
 * faults the page in through hmm_range_fault()) and which srnic's
 * interval notifier empties when the kernel takes pages away from the
 * process (munmap, mremap, COW, migration, reclaim, exit). srnic registers
 * with no DMA device (ib_uses_virt_dma()), so an entry names the page
 * itself with its access bits: a kernel virtual address with
 * ODP_*_ALLOWED_BIT in the dma_list before 6.15, an HMM PFN in
 * map.pfn_list since (srnic_odp_page() in srnic_compat.h reads either).
 *
 * Every access to an ODP MR goes through srnic_odp_map_page(), which
 * returns the page with the umem's umem_mutex held; the copy runs under
 * it and srnic_mr_unmap_page() drops it. The notifier takes the same
 * mutex before clearing entries, so a page is never accessed after the
 * notifier told srnic to forget it: the next access faults the new page
 * in. Nothing is ever mapped for two umems at once (srnic_mr_copy()
 * bounces between two ODP MRs), so umem mutexes never nest.
 *
 * An implicit MR (address 0, length U64_MAX) covers the process's whole
 * address space. Its root umem only anchors the mm; the engine creates
 * 2 MiB child umems (ib_umem_odp_alloc_child()) the first time it touches
 * an address, and they live until the MR is freed.
 *
 * ibv_advise_mr() prefetches: PREFETCH and PREFETCH_WRITE fault the
 * range in (readable, or writable too), PREFETCH_NO_FAULT maps only the
 * pages the process has already; with IB_UVERBS_ADVISE_MR_FLAG_FLUSH now,
 * otherwise from a work item that holds references on the MRs (a
 * dereg_mr waits for it, as for any access).
 */

#include <linux/mmu_notifier.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/workqueue.h>
#include <rdma/ib_umem_odp.h>
#include <rdma/uverbs_ioctl.h>

#include "srnic.h"

#define SRNIC_ODP_CHILD_SIZE BIT(SRNIC_ODP_CHILD_SHIFT)

/* The unbound workqueue of asynchronous prefetches. */
static struct workqueue_struct *srnic_odp_wq;

/*
 * The interval notifier: the kernel is about to change the process's
 * mapping of [range->start, range->end). Forget every page of it under
 * umem_mutex (ib_umem_odp_unmap_dma_pages() clears the page list's entries
 * and dirties pages that were writable; srnic_odp_forget() those it
 * misses on 6.15+); srnic holds no other reference to them.
 */
static bool srnic_odp_invalidate(struct mmu_interval_notifier *mni,
				 const struct mmu_notifier_range *range,
				 unsigned long cur_seq)
{
	struct ib_umem_odp *odp = container_of(mni, struct ib_umem_odp,
					       notifier);
	unsigned long start, end;

	if (!mmu_notifier_range_blockable(range))
		return false;

	mutex_lock(&odp->umem_mutex);
	mmu_interval_set_seq(mni, cur_seq);
	/*
	 * ib_umem_odp_unmap_dma_pages() steps by the umem's page size from
	 * its start argument: start on a page boundary, so the last
	 * (huge) page a range ends in is not skipped.
	 */
	start = ALIGN_DOWN(max(ib_umem_start(odp), range->start),
			   BIT(odp->page_shift));
	end = min(ib_umem_end(odp), range->end);
	if (start < end) {
		ib_umem_odp_unmap_dma_pages(odp, start, end);
		srnic_odp_forget(odp, start, end);
	}
	mutex_unlock(&odp->umem_mutex);
	return true;
}

static const struct mmu_interval_notifier_ops srnic_odp_ops = {
	.invalidate = srnic_odp_invalidate,
};

/**
 * srnic_odp_init() - the ODP umem of a new MR
 * @mr: the MR being registered (not published yet)
 * @start: user address; 0 with @length U64_MAX for an implicit MR
 * @length: bytes
 * @access: IB_ACCESS_* flags, IB_ACCESS_ON_DEMAND among them
 *
 * Called in the registering process (the umem takes its mm).
 *
 * Return: 0, or the errno of ib_umem_odp_get() /
 * ib_umem_odp_alloc_implicit() (-EINVAL for an implicit MR asking for
 * IB_ACCESS_HUGETLB).
 */
int srnic_odp_init(struct srnic_mr *mr, u64 start, u64 length, int access)
{
	struct srnic_dev *sdev = to_srnic_dev(mr->pd->ibpd.device);
	struct ib_umem_odp *odp;

	xa_init(&mr->odp_children);
	mutex_init(&mr->odp_child_lock);
	mutex_init(&mr->odp_map_lock);
	if (!start && length == U64_MAX)
		odp = ib_umem_odp_alloc_implicit(mr->pd->ibpd.device, access);
	else
		odp = ib_umem_odp_get(mr->pd->ibpd.device, start, length,
				      access, &srnic_odp_ops);
	if (IS_ERR(odp))
		return PTR_ERR(odp);
	odp->private = mr;
	mr->odp = odp;
	/*
	 * A run that may not sleep (a user QP's, in the receiving softirq)
	 * must not find the MR: it could not fault its pages in. Such runs
	 * look at the count first, with bottom halves disabled, which makes
	 * them RCU readers: once the first ODP MR has waited for those in
	 * progress, every run sees the count before it can see an ODP MR.
	 */
	mutex_lock(&sdev->odp_gate);
	if (atomic_inc_return(&sdev->odp_mrs) == 1)
		synchronize_rcu();
	mutex_unlock(&sdev->odp_gate);
	return 0;
}

/**
 * srnic_odp_release() - release an ODP MR's umems
 * @mr: the MR, out of the key table, with no users left
 *
 * Children first: each unmaps its pages and removes its notifier (which
 * waits for a running invalidation); then the root.
 */
void srnic_odp_release(struct srnic_mr *mr)
{
	struct ib_umem_odp *child;
	unsigned long index;

	xa_for_each(&mr->odp_children, index, child)
		ib_umem_odp_release(child);
	xa_destroy(&mr->odp_children);
	ib_umem_odp_release(mr->odp);
	mr->odp = NULL;
	atomic_dec(&to_srnic_dev(mr->pd->ibpd.device)->odp_mrs);
}

/* The user address behind @iova, which srnic_mr_lookup() checked. */
static u64 srnic_odp_va(const struct srnic_mr *mr, u64 iova)
{
	return mr->odp->umem.address + (iova - mr->iova);
}

/* The implicit MR's child umem covering @va, created on first use. */
static struct ib_umem_odp *srnic_odp_child(struct srnic_mr *mr, u64 va)
{
	unsigned long index = va >> SRNIC_ODP_CHILD_SHIFT;
	struct ib_umem_odp *child;
	void *old;

	child = xa_load(&mr->odp_children, index);
	if (child)
		return child;
	if (va >= TASK_SIZE)
		return ERR_PTR(-EFAULT);

	mutex_lock(&mr->odp_child_lock);
	child = xa_load(&mr->odp_children, index);
	if (!child) {
		child = ib_umem_odp_alloc_child(mr->odp,
						va & ~(SRNIC_ODP_CHILD_SIZE - 1),
						SRNIC_ODP_CHILD_SIZE,
						&srnic_odp_ops);
		if (!IS_ERR(child)) {
			child->private = mr;
			old = xa_store(&mr->odp_children, index, child,
				       GFP_KERNEL);
			if (xa_is_err(old)) {
				ib_umem_odp_release(child);
				child = ERR_PTR(xa_err(old));
			}
		}
	}
	mutex_unlock(&mr->odp_child_lock);
	return child;
}

/* The umem translating @va: the MR's own, or an implicit MR's child. */
static struct ib_umem_odp *srnic_odp_umem(struct srnic_mr *mr, u64 va)
{
	if (mr->odp->is_implicit_odp)
		return srnic_odp_child(mr, va);
	return mr->odp;
}

static u64 srnic_odp_access_bits(bool write)
{
	return SRNIC_ODP_READABLE | (write ? SRNIC_ODP_WRITABLE : 0);
}

/**
 * srnic_odp_map_page() - the page of one address of an ODP MR, locked
 * @mr: a referenced ODP MR
 * @iova: an address inside it (checked by srnic_mr_lookup())
 * @write: the access writes (the page must be mapped writable)
 * @map: filled in; @map->locked is the umem whose umem_mutex is held
 *
 * If the page is mapped with the access the caller needs, it is returned
 * at once; otherwise it is faulted in (ib_umem_odp_map_dma_and_lock(),
 * which may sleep: the caller is the engine thread or a process, never in
 * atomic context). The caller copies and calls srnic_mr_unmap_page().
 *
 * Return: 0 with the umem locked, or a negative errno with nothing held
 * (-EFAULT: the process has no such page, e.g. after munmap; -EINVAL:
 * its mm is gone).
 */
int srnic_odp_map_page(struct srnic_mr *mr, u64 iova, bool write,
		       struct srnic_mr_map *map)
{
	u64 need = srnic_odp_access_bits(write);
	u64 va = srnic_odp_va(mr, iova);
	struct ib_umem_odp *odp;
	struct page *page;
	int ret;

	odp = srnic_odp_umem(mr, va);
	if (IS_ERR(odp))
		return PTR_ERR(odp);

	mutex_lock(&odp->umem_mutex);
	page = srnic_odp_page(odp, va, need);
	if (!page) {
		mutex_unlock(&odp->umem_mutex);
		mutex_lock(&mr->odp_map_lock);
		atomic_inc(&mr->odp_faults);
		ret = ib_umem_odp_map_dma_and_lock(odp, va, 1, need, true);
		mutex_unlock(&mr->odp_map_lock);
		if (ret < 0)
			return ret;
		/* umem_mutex is held again from here. */
		page = srnic_odp_page(odp, va, need);
		if (!page) {
			mutex_unlock(&odp->umem_mutex);
			return -EFAULT;
		}
	}
	map->page = page;
	map->offset = offset_in_page(va);
	map->locked = odp;
	return 0;
}

/* From aligned @va on, the first page @odp does not map if @mapped, or maps. */
static u64 srnic_odp_skip(struct ib_umem_odp *odp, u64 va, u64 end,
			  bool mapped)
{
	while (va < end &&
	       !!srnic_odp_page(odp, va, SRNIC_ODP_READABLE) == mapped)
		va += BIT(odp->page_shift);
	return va;
}

/*
 * Map the pages of [@va, @va + @len) in @odp that the process has and
 * the umem does not, faulting nothing; @mr->odp_map_lock held.
 *
 * Pages the umem maps already are left out. ib_umem_odp_map_dma_and_lock()
 * without fault warns about an entry still mapped where hmm_range_fault()
 * found no page, and 6.1's munmap() detaches the VMAs, lets readers of the
 * mm in, and only then calls the notifiers: a walk in that window sees a
 * hole where the umem still maps pages the notifier is about to take away
 * (an implicit MR's children hit it often: a child's notifier gets no
 * earlier call that would make the walk retry). Under odp_map_lock only
 * the notifier changes which pages are mapped, and it only takes them
 * away, so a run found unmapped stays unmapped.
 */
static int srnic_odp_map_present(struct ib_umem_odp *odp, u64 va, u64 len,
				 u64 need)
{
	u64 end = va + len, run;
	int ret;

	va = ALIGN_DOWN(va, BIT(odp->page_shift));
	while (va < end) {
		mutex_lock(&odp->umem_mutex);
		va = srnic_odp_skip(odp, va, end, true);
		run = srnic_odp_skip(odp, va, end, false);
		mutex_unlock(&odp->umem_mutex);
		if (run == va)
			break;
		ret = ib_umem_odp_map_dma_and_lock(odp, va, run - va, need,
						   false);
		if (ret < 0)
			return ret;
		mutex_unlock(&odp->umem_mutex);
		va = run;
	}
	return 0;
}

/*
 * Prefetch [@iova, @iova + @len) of a referenced ODP MR: fault it in
 * (@fault), or map only the pages the process has. One umem, and at most
 * one child's size, per call of ib_umem_odp_map_dma_and_lock().
 */
static int srnic_odp_prefetch(struct srnic_mr *mr, u64 iova, u64 len,
			      bool write, bool fault)
{
	u64 need = srnic_odp_access_bits(write);

	while (len) {
		u64 va = srnic_odp_va(mr, iova);
		struct ib_umem_odp *odp = srnic_odp_umem(mr, va);
		u64 n;
		int ret;

		if (IS_ERR(odp))
			return PTR_ERR(odp);
		n = min3(len, (u64)ib_umem_end(odp) - va,
			 (u64)SRNIC_ODP_CHILD_SIZE - (va & (SRNIC_ODP_CHILD_SIZE - 1)));
		mutex_lock(&mr->odp_map_lock);
		if (fault) {
			ret = ib_umem_odp_map_dma_and_lock(odp, va, n, need,
							   true);
			if (ret >= 0)
				mutex_unlock(&odp->umem_mutex);
		} else {
			ret = srnic_odp_map_present(odp, va, n, need);
		}
		mutex_unlock(&mr->odp_map_lock);
		if (ret < 0)
			return ret;
		iova += n;
		len -= n;
		cond_resched();
	}
	return 0;
}

/* One SGE of an asynchronous prefetch, its MR referenced. */
struct srnic_prefetch_sge {
	struct srnic_mr *mr;
	u64 iova;
	u64 len;
};

/**
 * struct srnic_prefetch_work - an asynchronous ibv_advise_mr()
 * @work: queued on srnic_odp_wq
 * @write: fault the pages in writable
 * @fault: fault (PREFETCH, PREFETCH_WRITE), or map present pages only
 * @num: entries of @sge
 * @sge: the ranges, each holding a reference on its MR
 */
struct srnic_prefetch_work {
	struct work_struct work;
	bool write;
	bool fault;
	u32 num;
	struct srnic_prefetch_sge sge[];
};

static void srnic_prefetch_work_put(struct srnic_prefetch_work *pw)
{
	u32 i;

	for (i = 0; i < pw->num; i++)
		srnic_mr_put(pw->sge[i].mr);
	kfree(pw);
}

/* A failed asynchronous prefetch is not reported: it was advice. */
static void srnic_prefetch_work_fn(struct work_struct *work)
{
	struct srnic_prefetch_work *pw =
		container_of(work, struct srnic_prefetch_work, work);
	u32 i;

	for (i = 0; i < pw->num; i++)
		srnic_odp_prefetch(pw->sge[i].mr, pw->sge[i].iova,
				   pw->sge[i].len, pw->write, pw->fault);
	srnic_prefetch_work_put(pw);
}

/*
 * The ODP MR an advice SGE names, referenced: the SGE's lkey, in @pd,
 * with LOCAL_WRITE for a write prefetch, the range inside the MR.
 */
static struct srnic_mr *srnic_prefetch_mr(struct ib_pd *ibpd,
					  const struct ib_sge *sge, bool write)
{
	struct srnic_mr *mr;

	mr = srnic_mr_lookup(to_srnic_dev(ibpd->device), sge->lkey,
			     SRNIC_LKEY, to_srnic_pd(ibpd),
			     write ? IB_ACCESS_LOCAL_WRITE : 0, sge->addr,
			     sge->length);
	if (IS_ERR(mr))
		return ERR_PTR(-EINVAL);
	if (mr->type != SRNIC_MR_ODP) {
		srnic_mr_put(mr);
		return ERR_PTR(-EINVAL);
	}
	return mr;
}

/**
 * srnic_advise_mr() - the advise_mr verb (ibv_advise_mr())
 * @ibpd: the PD of the MRs
 * @advice: IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH, _PREFETCH_WRITE or
 *	    _PREFETCH_NO_FAULT
 * @flags: IB_UVERBS_ADVISE_MR_FLAG_FLUSH: prefetch before returning;
 *	   otherwise queue the prefetch and return
 * @sg_list: the ranges, each in an ODP MR of @ibpd (by lkey)
 * @num_sge: entries of @sg_list (uverbs checked that there is one)
 * @attrs: unused
 *
 * Return: 0; -EOPNOTSUPP for another advice; -EINVAL if an SGE names no
 * ODP MR of @ibpd, lies outside it or asks a write prefetch of an MR
 * without LOCAL_WRITE; -ENOMEM; for a synchronous prefetch, the fault's
 * errno (-EFAULT for an unmapped range).
 */
int srnic_advise_mr(struct ib_pd *ibpd,
		    enum ib_uverbs_advise_mr_advice advice, u32 flags,
		    struct ib_sge *sg_list, u32 num_sge,
		    struct uverbs_attr_bundle *attrs)
{
	struct srnic_prefetch_work *pw;
	bool write, fault = true;
	struct srnic_mr *mr;
	u32 i;
	int err;

	switch (advice) {
	case IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH:
		write = false;
		break;
	case IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE:
		write = true;
		break;
	case IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT:
		write = false;
		fault = false;
		break;
	default:
		return -EOPNOTSUPP;
	}

	if (flags & IB_UVERBS_ADVISE_MR_FLAG_FLUSH) {
		for (i = 0; i < num_sge; i++) {
			mr = srnic_prefetch_mr(ibpd, &sg_list[i], write);
			if (IS_ERR(mr))
				return PTR_ERR(mr);
			err = srnic_odp_prefetch(mr, sg_list[i].addr,
						 sg_list[i].length, write,
						 fault);
			srnic_mr_put(mr);
			if (err)
				return err;
		}
		return 0;
	}

	pw = kzalloc(struct_size(pw, sge, num_sge), GFP_KERNEL);
	if (!pw)
		return -ENOMEM;
	INIT_WORK(&pw->work, srnic_prefetch_work_fn);
	pw->write = write;
	pw->fault = fault;
	for (i = 0; i < num_sge; i++) {
		mr = srnic_prefetch_mr(ibpd, &sg_list[i], write);
		if (IS_ERR(mr)) {
			srnic_prefetch_work_put(pw);
			return PTR_ERR(mr);
		}
		pw->sge[pw->num++] = (struct srnic_prefetch_sge) {
			.mr = mr,
			.iova = sg_list[i].addr,
			.len = sg_list[i].length,
		};
	}
	queue_work(srnic_odp_wq, &pw->work);
	return 0;
}

/**
 * srnic_odp_wq_init() - create the asynchronous prefetch workqueue
 *
 * Return: 0 or -ENOMEM.
 */
int srnic_odp_wq_init(void)
{
	srnic_odp_wq = alloc_workqueue("srnic_odp", WQ_UNBOUND, 0);
	return srnic_odp_wq ? 0 : -ENOMEM;
}

/**
 * srnic_odp_wq_exit() - run the queued prefetches and destroy the queue
 */
void srnic_odp_wq_exit(void)
{
	destroy_workqueue(srnic_odp_wq);
}
