// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: memory regions.
 *
 * Registration (user, kernel DMA and fast-reg MRs), the per-device key
 * table, the key/PD/access/bounds checks the data path makes on every
 * access, and the copies between MRs and kernel buffers.
 *
 * Every MR is translated by PAGE_SIZE pages: a user MR's pinned pages and a
 * fast-reg MR's page list are walked once into an array of struct page
 * pointers, so finding the page of an address is one subtraction and one
 * shift. A DMA MR covers all kernel memory: srnic registers with no DMA
 * device, so a kernel "DMA address" is a kernel virtual address
 * (ib_uses_virt_dma()) and its page is virt_to_page(). An on-demand
 * paging MR pins nothing: its pages are found, and faulted in, at each
 * access (srnic_odp.c), under a lock that srnic_mr_unmap_page() drops.
 * A DM MR's page array lists (and references) the pages of the device
 * memory allocation (srnic_dm.c) it was registered on, and a dma-buf MR the
 * pages behind its exporter's CPU mapping of the buffer.
 */

#include <linux/dma-buf.h>
#include <linux/highmem.h>
#include <linux/mm.h>
#include <linux/random.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_umem_odp.h>

#include "srnic.h"
#include "srnic_trace.h"

/* dma_buf_get() and the CPU mapping of a dma-buf MR (srnic_reg_dmabuf_mr()). */
MODULE_IMPORT_NS("DMA_BUF");

/*
 * The access flags srnic implements (MW_BIND: srnic_mw.c; FLUSH_GLOBAL:
 * srnic_flush_check(), where ib_core knows the flag).
 */
#define SRNIC_MR_ACCESS (IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE | \
			 IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_ATOMIC | \
			 IB_ACCESS_MW_BIND | SRNIC_ACCESS_FLUSH_GLOBAL)
#define SRNIC_MR_REMOTE_ACCESS (IB_ACCESS_REMOTE_WRITE | \
				IB_ACCESS_REMOTE_READ | \
				IB_ACCESS_REMOTE_ATOMIC)

/**
 * srnic_mr_table_init() - prepare a new device's key table (and its count
 *	of ODP MRs)
 * @sdev: the device, not yet registered
 */
void srnic_mr_table_init(struct srnic_dev *sdev)
{
	xa_init_flags(&sdev->mr_table, XA_FLAGS_ALLOC);
	sdev->mr_next = 1;
	sdev->mr_laps = 0;
	/* Keys of different devices (and module loads) start apart. */
	sdev->mr_key_seed = get_random_u8();
	atomic_set(&sdev->odp_mrs, 0);
	mutex_init(&sdev->odp_gate);
}

/**
 * srnic_mr_table_destroy() - release the key table of a dead device
 * @sdev: the device; ib_core destroyed all its MRs already
 */
void srnic_mr_table_destroy(struct srnic_dev *sdev)
{
	WARN_ON(!xa_empty(&sdev->mr_table));
	xa_destroy(&sdev->mr_table);
}

/*
 * Hints srnic may ignore: the optional range (relaxed ordering), and
 * HUGETLB, which only tells ODP that the range is backed by huge pages.
 */
#define SRNIC_MR_IGNORED_ACCESS (IB_ACCESS_OPTIONAL | IB_ACCESS_HUGETLB)

/* ON_DEMAND where the kernel has ODP (ib_umem_odp). */
#define SRNIC_MR_ODP_ACCESS \
	(IS_ENABLED(CONFIG_INFINIBAND_ON_DEMAND_PAGING) ? IB_ACCESS_ON_DEMAND : 0)

/*
 * The rules of ib_check_mr_access(), which uverbs applies before
 * reg_user_mr but nobody applies to kernel callers; flags srnic does not
 * implement (zero-based) are refused with EOPNOTSUPP, so callers can
 * tell "not here" from "never valid". IB_ACCESS_ON_DEMAND is for
 * reg_user_mr only.
 */
static int srnic_mr_check_access(int access, int odp)
{
	if ((access & (IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IB_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	if (access & ~(SRNIC_MR_ACCESS | SRNIC_MR_IGNORED_ACCESS | odp))
		return -EOPNOTSUPP;
	return 0;
}

static struct srnic_mr *srnic_mr_alloc(struct ib_pd *ibpd,
				       enum srnic_mr_type type, int access)
{
	struct srnic_mr *mr;

	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return NULL;
	mr->pd = to_srnic_pd(ibpd);
	mr->type = type;
	mr->access = access & SRNIC_MR_ACCESS;
	if (type == SRNIC_MR_USER) {
		mr->owner_cred = get_current_cred();
		mr->owner_tgid = get_task_pid(current, PIDTYPE_TGID);
	}
	refcount_set(&mr->users, 1);
	init_completion(&mr->released);
	return mr;
}

/* Frees an MR that is no longer in the key table and has no users. */
static void srnic_mr_free(struct srnic_mr *mr)
{
	unsigned long i;

	if (mr->odp)
		srnic_odp_release(mr);
	if (mr->umem)
		ib_umem_release(mr->umem);
	if (mr->type == SRNIC_MR_DM || mr->type == SRNIC_MR_DMABUF)
		for (i = 0; i < mr->num_pages; i++)
			put_page(mr->pages[i]);
	kvfree(mr->pages);
	if (mr->dmabuf) {
		if (!iosys_map_is_null(&mr->dmabuf_map))
			dma_buf_vunmap_unlocked(mr->dmabuf, &mr->dmabuf_map);
		dma_buf_put(mr->dmabuf);
	}
	if (mr->owner_cred) {
		put_cred(mr->owner_cred);
		put_pid(mr->owner_tgid);
	}
	/* A lookup may still be reading the struct under RCU. */
	kfree_rcu(mr, rcu);
}

/**
 * srnic_mr_publish() - give an MR its keys and make it visible to lookups
 * @sdev: the device
 * @mr: fully initialised MR
 *
 * The index comes from a cyclic allocation, so a freed index is reused only
 * after the allocator has gone once round the whole index space. Within one
 * lap an index is handed out at most once, so the key byte, derived from
 * the lap count, differs between two consecutive uses of an index: a stale
 * key misses unless 256 laps passed in between. The index is reserved
 * first and the MR stored only once its key is set, so a lookup never sees
 * an MR with a half-written key.
 *
 * Return: 0, or -ENOMEM when the device has SRNIC_MAX_MR MRs or no memory.
 */
static int srnic_mr_publish(struct srnic_dev *sdev, struct srnic_mr *mr)
{
	u32 index;
	void *old;
	int err;

	xa_lock(&sdev->mr_table);
	err = __xa_alloc_cyclic(&sdev->mr_table, &index, NULL,
				XA_LIMIT(1, SRNIC_MAX_MR), &sdev->mr_next,
				GFP_KERNEL);
	if (err < 0)
		goto out_unlock;
	if (err == 1)
		sdev->mr_laps++;

	mr->index = index;
	mr->key = index << 8 | (u8)(sdev->mr_laps + sdev->mr_key_seed);
	mr->ibmr.lkey = mr->key;
	mr->ibmr.rkey = mr->key;

	/* Replaces the reservation: allocates nothing, publishes mr. */
	old = __xa_store(&sdev->mr_table, index, mr, GFP_KERNEL);
	err = xa_err(old);
	if (err)
		__xa_erase(&sdev->mr_table, index);
out_unlock:
	xa_unlock(&sdev->mr_table);
	return err == -EBUSY ? -ENOMEM : err;
}

/*
 * The end of every MR constructor: publish @mr and return it, or free it
 * and return the error.
 */
static struct ib_mr *srnic_mr_publish_or_free(struct srnic_dev *sdev,
					      struct srnic_mr *mr)
{
	int err = srnic_mr_publish(sdev, mr);

	if (err) {
		srnic_mr_free(mr);
		return ERR_PTR(err);
	}
	trace_srnic_mr_reg(&sdev->ibdev, mr->key, mr->iova, mr->length,
			   mr->access, mr->num_pages);
	return &mr->ibmr;
}

static int srnic_mr_check_range(u64 iova, u64 length)
{
	if (!length || length > SRNIC_MAX_MR_SIZE)
		return -EINVAL;
	/* The last byte must be addressable: iova + length - 1 <= U64_MAX. */
	if (length - 1 > U64_MAX - iova)
		return -EINVAL;
	return 0;
}

/* One struct page per PAGE_SIZE of the pinned range, in order. */
static int srnic_mr_fill_user_pages(struct srnic_mr *mr)
{
	struct sg_page_iter sg_iter;
	unsigned long i = 0;

	for_each_sgtable_page(&mr->umem->sgt_append.sgt, &sg_iter, 0) {
		if (i == mr->max_pages)
			break;
		mr->pages[i++] = sg_page_iter_page(&sg_iter);
	}
	mr->num_pages = i;
	return WARN_ON_ONCE(i != mr->max_pages) ? -EFAULT : 0;
}

/*
 * An on-demand paging MR: [@start, @start + @length) of the process, or
 * with @start 0 and @length U64_MAX (and @iova 0) an implicit MR, all of
 * its address space, iova = user address. Nothing is pinned or mapped now.
 */
static struct ib_mr *srnic_reg_odp_mr(struct ib_pd *ibpd, u64 start,
				      u64 length, u64 iova, int access)
{
	bool implicit = !start && length == U64_MAX;
	struct srnic_mr *mr;
	int err;

	if (implicit) {
		if (iova)
			return ERR_PTR(-EINVAL);
	} else {
		err = srnic_mr_check_range(start, length);
		if (!err)
			err = srnic_mr_check_range(iova, length);
		if (err)
			return ERR_PTR(err);
		if (offset_in_page(start) != offset_in_page(iova))
			return ERR_PTR(-EINVAL);
	}

	mr = srnic_mr_alloc(ibpd, SRNIC_MR_ODP, access);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	err = srnic_odp_init(mr, start, length, access);
	if (err)
		goto err_free_mr;
	mr->iova = iova;
	mr->length = length;
	mr->valid = true;

	return srnic_mr_publish_or_free(to_srnic_dev(ibpd->device), mr);

err_free_mr:
	srnic_mr_free(mr);
	return ERR_PTR(err);
}

/*
 * Pin [@start, @start + @length) for @mr (not yet published) and record its
 * pages; @mr then translates [@iova, @iova + @length).
 */
static int srnic_mr_pin(struct srnic_mr *mr, u64 start, u64 length, u64 iova,
			int access)
{
	struct ib_umem *umem;
	int err;

	err = srnic_mr_check_range(start, length);
	if (!err)
		err = srnic_mr_check_range(iova, length);
	if (err)
		return err;
	if (offset_in_page(start) != offset_in_page(iova))
		return -EINVAL;

	umem = ib_umem_get_va(mr->pd->ibpd.device, start, length, access);
	if (IS_ERR(umem))
		return PTR_ERR(umem);
	mr->umem = umem;

	mr->max_pages = ib_umem_num_pages(umem);
	mr->pages = kvcalloc(mr->max_pages, sizeof(*mr->pages),
			     GFP_KERNEL | __GFP_NOWARN);
	if (!mr->pages)
		return -ENOMEM;
	err = srnic_mr_fill_user_pages(mr);
	if (err)
		return err;

	mr->iova = iova;
	mr->length = length;
	mr->page_offset = ib_umem_offset(umem);
	mr->valid = true;
	return 0;
}

/**
 * srnic_reg_user_mr() - the reg_user_mr verb
 * @ibpd: PD to register in
 * @start: user address of the memory
 * @length: bytes
 * @iova: address the MR's users give for @start (same offset in a page)
 * @access: IB_ACCESS_* flags
 * @udata: no srnic data in either direction
 *
 * Pins the pages (ib_umem_get_va()) and records them in a page array; with
 * IB_ACCESS_ON_DEMAND pins nothing (srnic_odp.c), and start 0 with length
 * U64_MAX registers an implicit ODP MR.
 *
 * Return: the MR, or ERR_PTR(-EINVAL) for a zero, too large or wrapping
 * range or an invalid flag combination, -EOPNOTSUPP for flags srnic does
 * not implement (zero-based), -ENOMEM, or what ib_umem_get_va() or
 * ib_umem_odp_get() returns.
 */
struct ib_mr *srnic_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
				u64 iova, int access, struct ib_udata *udata)
{
	struct srnic_dev *sdev = to_srnic_dev(ibpd->device);
	struct srnic_mr *mr;
	int err;

	err = srnic_mr_check_access(access, SRNIC_MR_ODP_ACCESS);
	if (err)
		return ERR_PTR(err);
	if (udata) {
		err = srnic_udata_check_tail(udata, 0);
		if (err)
			return ERR_PTR(err);
	}
	if (access & IB_ACCESS_ON_DEMAND)
		return srnic_reg_odp_mr(ibpd, start, length, iova, access);

	mr = srnic_mr_alloc(ibpd, SRNIC_MR_USER, access);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	err = srnic_mr_pin(mr, start, length, iova, access);
	if (err)
		goto err_free_mr;

	return srnic_mr_publish_or_free(sdev, mr);

err_free_mr:
	srnic_mr_free(mr);
	return ERR_PTR(err);
}

/**
 * srnic_rereg_user_mr() - the rereg_user_mr verb
 * @ibmr: a user MR
 * @flags: IB_MR_REREG_TRANS, IB_MR_REREG_PD, IB_MR_REREG_ACCESS
 * @start: new user address (IB_MR_REREG_TRANS)
 * @length: new length (IB_MR_REREG_TRANS)
 * @iova: new iova (IB_MR_REREG_TRANS)
 * @access: new IB_ACCESS_* flags (IB_MR_REREG_ACCESS)
 * @ibpd: the PD the MR is to be in (its own when the PD does not change)
 * @udata: no srnic data in either direction
 *
 * The fields of a published MR never change (lookups read them without
 * locks), so the new registration is a new struct srnic_mr with the old
 * one's index and key: lkey and rkey stay what the peers already know.
 * Its pages are pinned again (the new range, or the old one), it replaces
 * the old MR in the key table in one store, and ib_core then deregisters
 * the old MR, whose dereg waits for the accesses still using it.
 *
 * Return: the new MR, NULL when @flags asks for nothing, ERR_PTR(-EOPNOTSUPP)
 * for an ODP or DM MR, or an ERR_PTR as srnic_reg_user_mr() (the old MR is
 * then unchanged).
 */
struct ib_mr *srnic_rereg_user_mr(struct ib_mr *ibmr, int flags, u64 start,
				  u64 length, u64 iova, int access,
				  struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct srnic_dev *sdev = to_srnic_dev(ibmr->device);
	struct srnic_mr *old = to_srnic_mr(ibmr);
	struct srnic_mr *mr;
	void *prev;
	int err;

	if (flags & ~(IB_MR_REREG_TRANS | IB_MR_REREG_PD | IB_MR_REREG_ACCESS))
		return ERR_PTR(-EOPNOTSUPP);
	if (!flags)
		return NULL;
	/*
	 * ODP MRs are registered anew (dereg, reg) instead; a DM or dma-buf
	 * MR's memory is not the process's to re-pin.
	 */
	if (old->type == SRNIC_MR_ODP || old->type == SRNIC_MR_DM ||
	    old->type == SRNIC_MR_DMABUF)
		return ERR_PTR(-EOPNOTSUPP);
	if (old->type != SRNIC_MR_USER)
		return ERR_PTR(-EINVAL);
	if (!(flags & IB_MR_REREG_ACCESS))
		access = old->access;
	err = srnic_mr_check_access(access, 0);
	if (!err && udata)
		err = srnic_udata_check_tail(udata, 0);
	if (err)
		return ERR_PTR(err);
	if (!(flags & IB_MR_REREG_TRANS)) {
		start = old->umem->address;
		length = old->length;
		iova = old->iova;
	}

	mr = srnic_mr_alloc(ibpd, SRNIC_MR_USER, access);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	err = srnic_mr_pin(mr, start, length, iova, access);
	if (err)
		goto err_free_mr;
	mr->index = old->index;
	mr->key = old->key;
	mr->ibmr.lkey = old->ibmr.lkey;
	mr->ibmr.rkey = old->ibmr.rkey;
	mr->ibmr.iova = iova;
	mr->ibmr.length = length;

	/* The index holds old: replacing it allocates nothing. */
	prev = xa_store(&sdev->mr_table, mr->index, mr, GFP_KERNEL);
	err = xa_err(prev);
	if (err)
		goto err_free_mr;
	WARN_ON_ONCE(prev != old);
	trace_srnic_mr_reg(ibmr->device, mr->key, iova, length, mr->access,
			   mr->num_pages);
	ibdev_dbg(ibmr->device, "MR key 0x%x reregistered (flags 0x%x)\n",
		  mr->key, flags);
	return &mr->ibmr;

err_free_mr:
	srnic_mr_free(mr);
	return ERR_PTR(err);
}

/**
 * srnic_get_dma_mr() - the get_dma_mr verb: an MR over all kernel memory
 * @ibpd: PD to register in
 * @access: IB_ACCESS_* flags; ib_alloc_pd() asks for LOCAL_WRITE (srnic
 *	    has no local_dma_lkey), plus remote access for
 *	    IB_PD_UNSAFE_GLOBAL_RKEY
 *
 * Addresses are kernel virtual addresses (ib_uses_virt_dma()).
 *
 * Return: the MR or an ERR_PTR.
 */
struct ib_mr *srnic_get_dma_mr(struct ib_pd *ibpd, int access)
{
	struct srnic_mr *mr;
	int err;

	err = srnic_mr_check_access(access, 0);
	if (err)
		return ERR_PTR(err);

	mr = srnic_mr_alloc(ibpd, SRNIC_MR_DMA, access);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	mr->iova = 0;
	mr->length = U64_MAX;
	mr->valid = true;

	return srnic_mr_publish_or_free(to_srnic_dev(ibpd->device), mr);
}

/*
 * The page behind @addr of a kernel mapping: vmap()ed memory (a DM buffer,
 * most dma-buf exporters' CPU mappings) or the linear map; anything else
 * (I/O memory, a PFN map without pages) is NULL.
 */
static struct page *srnic_kernel_addr_page(void *addr)
{
	if (is_vmalloc_addr(addr))
		return vmalloc_to_page(addr);
	if (virt_addr_valid(addr))
		return virt_to_page(addr);
	return NULL;
}

/*
 * Give a DM or dma-buf MR [@offset, @offset + @length) of the kernel
 * mapping at @base: its page array, a reference on each page (dropped by
 * srnic_mr_free()), its iova (@iova) and length, valid. uverbs fills
 * ibmr.iova and ibmr.length for reg_user_mr only, so they are set here too
 * (rdma resource, QUERY_MR). Return: 0, -ENOMEM, or -EOPNOTSUPP for an
 * address without a struct page.
 */
static int srnic_mr_take_kernel_pages(struct srnic_mr *mr, void *base,
				      u64 offset, u64 length, u64 iova)
{
	unsigned long first = offset >> PAGE_SHIFT, i;

	mr->page_offset = offset_in_page(offset);
	if (length) {
		mr->max_pages = DIV_ROUND_UP(mr->page_offset + length,
					     PAGE_SIZE);
		mr->pages = kvcalloc(mr->max_pages, sizeof(*mr->pages),
				     GFP_KERNEL);
		if (!mr->pages)
			return -ENOMEM;
	}
	for (i = 0; i < mr->max_pages; i++) {
		struct page *page =
			srnic_kernel_addr_page(base + ((first + i) << PAGE_SHIFT));

		if (!page)
			return -EOPNOTSUPP;
		get_page(page);
		mr->pages[mr->num_pages++] = page;
	}
	mr->iova = iova;
	mr->length = length;
	mr->valid = true;
	mr->ibmr.iova = iova;
	mr->ibmr.length = length;
	return 0;
}

/**
 * srnic_reg_dm_mr() - the reg_dm_mr verb: an MR on device memory
 * @ibpd: PD to register in
 * @ibdm: the device memory
 * @attr: offset into @ibdm, length (0 is allowed) and access flags, which
 *	  include IB_ZERO_BASED (uverbs checked that, and that the range is
 *	  inside @ibdm)
 * @attrs: unused
 *
 * The MR is zero based: address 0 is byte @attr->offset of the memory.
 * It holds a reference on each page it covers, so its pages outlive the
 * allocation should the MR outlive it (ib_core does not let it).
 *
 * Return: the MR, or ERR_PTR(-EINVAL) for a range outside @ibdm or an
 * invalid flag combination, -EOPNOTSUPP for flags srnic does not
 * implement, -ENOMEM.
 */
struct ib_mr *srnic_reg_dm_mr(struct ib_pd *ibpd, struct ib_dm *ibdm,
			      struct ib_dm_mr_attr *attr,
			      struct uverbs_attr_bundle *attrs)
{
	struct srnic_dm *dm = to_srnic_dm(ibdm);
	struct srnic_mr *mr;
	int access;
	int err;

	if (!(attr->access_flags & IB_ZERO_BASED))
		return ERR_PTR(-EINVAL);
	access = attr->access_flags & ~IB_ZERO_BASED;
	err = srnic_mr_check_access(access, 0);
	if (err)
		return ERR_PTR(err);
	if (attr->offset > ibdm->length || attr->length > ibdm->length ||
	    attr->length > ibdm->length - attr->offset)
		return ERR_PTR(-EINVAL);

	mr = srnic_mr_alloc(ibpd, SRNIC_MR_DM, access);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	err = srnic_mr_take_kernel_pages(mr, dm->buf, attr->offset,
					 attr->length, 0);
	if (err)
		goto err_free_mr;

	return srnic_mr_publish_or_free(to_srnic_dev(ibpd->device), mr);

err_free_mr:
	srnic_mr_free(mr);
	return ERR_PTR(err);
}

/**
 * srnic_reg_dmabuf_mr() - the reg_user_mr_dmabuf verb: an MR on a dma-buf
 * @ibpd: PD to register in
 * @offset: first byte of the buffer the MR covers
 * @length: bytes
 * @iova: address the MR's users give for @offset
 * @fd: the dma-buf's file descriptor, in the caller's file table
 * @access: IB_ACCESS_* flags (no on-demand paging)
 * @udata: no srnic data in either direction
 *
 * srnic is a CPU: it reaches the buffer as a CPU does, through the
 * exporter's kernel mapping (dma_buf_vmap()), not through a DMA attachment
 * (it has no DMA device). A mapped buffer stays where it is until it is
 * unmapped, so the MR needs no move notifications: it holds the mapping,
 * a reference on the dma-buf and one on each page behind the mapping until
 * it is freed, and copies through those pages as for any other MR (udmabuf,
 * the dma-buf heaps, vgem and GEM shmem objects are system memory). A
 * buffer in I/O memory (a GPU's VRAM) has no pages and is refused.
 *
 * Return: the MR, or ERR_PTR(-EINVAL) for a range outside the buffer, a
 * zero, too large or wrapping one, or an invalid flag combination; -EBADF
 * (or -EINVAL) for an @fd that is no dma-buf; -EOPNOTSUPP for flags srnic
 * does not implement or a buffer the CPU cannot reach by pages; -ENOMEM,
 * or the exporter's error from dma_buf_vmap().
 */
struct ib_mr *srnic_reg_dmabuf_mr(struct ib_pd *ibpd, u64 offset, u64 length,
				  u64 iova, int fd, int access,
				  struct ib_udata *udata)
{
	struct ib_device *ibdev = ibpd->device;
	struct dma_buf *dmabuf;
	struct srnic_mr *mr;
	int err;

	err = srnic_mr_check_access(access, 0);
	if (!err && udata)
		err = srnic_udata_check_tail(udata, 0);
	if (!err)
		err = srnic_mr_check_range(iova, length);
	if (err)
		return ERR_PTR(err);

	dmabuf = dma_buf_get(fd);
	if (IS_ERR(dmabuf))
		return ERR_CAST(dmabuf);
	if (offset > dmabuf->size || length > dmabuf->size - offset) {
		dma_buf_put(dmabuf);
		return ERR_PTR(-EINVAL);
	}
	mr = srnic_mr_alloc(ibpd, SRNIC_MR_DMABUF, access);
	if (!mr) {
		dma_buf_put(dmabuf);
		return ERR_PTR(-ENOMEM);
	}
	mr->dmabuf = dmabuf;	/* srnic_mr_free() puts it */

	if (!dmabuf->ops->vmap) {
		ibdev_dbg(ibdev, "dma-buf of %s has no CPU mapping\n",
			  dmabuf->exp_name);
		err = -EOPNOTSUPP;
		goto err_free_mr;
	}
	err = dma_buf_vmap_unlocked(dmabuf, &mr->dmabuf_map);
	if (err)
		goto err_free_mr;
	if (mr->dmabuf_map.is_iomem) {
		ibdev_dbg(ibdev, "dma-buf of %s is I/O memory\n",
			  dmabuf->exp_name);
		err = -EOPNOTSUPP;
		goto err_free_mr;
	}

	err = srnic_mr_take_kernel_pages(mr, mr->dmabuf_map.vaddr, offset,
					 length, iova);
	if (err)
		goto err_free_mr;

	return srnic_mr_publish_or_free(to_srnic_dev(ibdev), mr);

err_free_mr:
	srnic_mr_free(mr);
	return ERR_PTR(err);
}

/**
 * srnic_alloc_mr() - the alloc_mr verb: an MR for fast registration
 * @ibpd: PD to register in
 * @mr_type: only IB_MR_TYPE_MEM_REG
 * @max_num_sg: capacity of the page list, at most SRNIC_MAX_FAST_REG_PAGES
 *
 * The MR gets its keys now but stays invalid (lookups miss) until the
 * engine executes an IB_WR_REG_MR for it (srnic_mr_fast_reg()).
 *
 * Return: the MR or an ERR_PTR.
 */
struct ib_mr *srnic_alloc_mr(struct ib_pd *ibpd, enum ib_mr_type mr_type,
			     u32 max_num_sg)
{
	struct srnic_mr *mr;
	int err;

	if (mr_type != IB_MR_TYPE_MEM_REG)
		return ERR_PTR(-EINVAL);
	if (!max_num_sg || max_num_sg > SRNIC_MAX_FAST_REG_PAGES)
		return ERR_PTR(-EINVAL);

	mr = srnic_mr_alloc(ibpd, SRNIC_MR_FAST_REG, 0);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	spin_lock_init(&mr->fr_lock);
	mr->max_pages = max_num_sg;
	mr->pages = kvcalloc(mr->max_pages, sizeof(*mr->pages), GFP_KERNEL);
	if (!mr->pages) {
		err = -ENOMEM;
		goto err_free_mr;
	}

	return srnic_mr_publish_or_free(to_srnic_dev(ibpd->device), mr);

err_free_mr:
	srnic_mr_free(mr);
	return ERR_PTR(err);
}

/* ib_sg_to_pages() callback: addr is a kernel virtual address. */
static int srnic_mr_set_page(struct ib_mr *ibmr, u64 addr)
{
	struct srnic_mr *mr = to_srnic_mr(ibmr);

	if (unlikely(mr->num_pages == mr->max_pages))
		return -ENOMEM;
	mr->pages[mr->num_pages++] = virt_to_page((void *)(uintptr_t)addr);
	return 0;
}

/**
 * srnic_map_mr_sg() - the map_mr_sg verb: fill a fast-reg MR's page list
 * @ibmr: an MR from srnic_alloc_mr(), not valid (registered) now
 * @sg: scatterlist mapped with ib_dma_map_sg() (kernel virtual addresses)
 * @sg_nents: entries of @sg
 * @sg_offset: offset into the first entry, updated by ib_sg_to_pages()
 *
 * ib_sg_to_pages() sets ibmr->iova and ibmr->length. Only PAGE_SIZE pages
 * are supported (page_size_cap). The offset of iova in the first page is
 * kept apart, because a ULP may change ibmr->iova afterwards (zero-based
 * registration).
 *
 * Return: the number of @sg entries mapped, or a negative errno.
 */
int srnic_map_mr_sg(struct ib_mr *ibmr, struct scatterlist *sg, int sg_nents,
		    unsigned int *sg_offset)
{
	struct srnic_mr *mr = to_srnic_mr(ibmr);
	int n;

	if (ibmr->page_size != PAGE_SIZE)
		return -EINVAL;

	mr->num_pages = 0;
	n = ib_sg_to_pages(ibmr, sg, sg_nents, sg_offset, srnic_mr_set_page);
	mr->page_offset = offset_in_page(ibmr->iova);
	return n;
}

/* A fast-reg MR of @qp's device and PD by its index; under RCU. */
static struct srnic_mr *srnic_fast_reg_mr(struct srnic_qp *qp, u32 index)
{
	struct srnic_dev *sdev = to_srnic_dev(qp->ibqp.device);
	struct srnic_mr *mr = xa_load(&sdev->mr_table, index);

	if (!mr || mr->type != SRNIC_MR_FAST_REG ||
	    mr->pd != to_srnic_pd(qp->ibqp.pd))
		return NULL;
	return mr;
}

/**
 * srnic_mr_fast_reg() - execute an IB_WR_REG_MR
 * @qp: the kernel QP whose requester takes the WQE
 * @wqe: its snapshot: the MR's index, the new key, access, iova, length
 *
 * The MR must be a fast-reg MR of @qp's PD in the free state (never
 * registered, or invalidated since: IBTA 10.6.3.3, as rxe checks), the
 * key must keep its index, the access flags must be valid ones, and the
 * range must fit the page list map_mr_sg gave the MR. The fields are
 * written before @valid, which lookups read first (acquire).
 *
 * Return: 0, or -EINVAL when the registration may not be made.
 */
int srnic_mr_fast_reg(struct srnic_qp *qp, const struct srnic_send_wqe *wqe)
{
	u64 iova = wqe->reg.iova, length = wqe->reg.length;
	u32 key = wqe->reg.key;
	int access = wqe->reg.access;
	struct srnic_mr *mr;
	unsigned long flags;
	int err = -EINVAL;

	if (srnic_mr_check_access(access, 0) || srnic_mr_check_range(iova, length))
		return -EINVAL;
	rcu_read_lock();
	mr = srnic_fast_reg_mr(qp, wqe->reg.mr_index);
	if (!mr || key >> 8 != mr->index)
		goto out;
	spin_lock_irqsave(&mr->fr_lock, flags);
	if (!mr->valid && mr->num_pages &&
	    length <= (u64)mr->num_pages * PAGE_SIZE - mr->page_offset) {
		mr->access = access & SRNIC_MR_ACCESS;
		mr->iova = iova;
		mr->length = length;
		WRITE_ONCE(mr->key, key);
		/* After the fields: pairs with srnic_mr_lookup_range(). */
		smp_store_release(&mr->valid, true);
		err = 0;
	}
	spin_unlock_irqrestore(&mr->fr_lock, flags);
	if (!err)
		trace_srnic_mr_reg(qp->ibqp.device, key, iova, length,
				   access, mr->num_pages);
out:
	rcu_read_unlock();
	return err;
}

/**
 * srnic_mr_invalidate() - invalidate a fast-reg MR by its key
 * @qp: the QP executing a LOCAL_INV, or receiving a SEND with invalidate
 * @key: the MR's current key (its lkey and rkey are one)
 *
 * The MR must be a valid fast-reg MR of @qp's PD with this key. An access
 * that looked it up before keeps its reference to the end of its copy
 * (one SGE or one packet, srnic_mr_lookup()); every later lookup misses.
 *
 * Return: 0, or -EINVAL.
 */
int srnic_mr_invalidate(struct srnic_qp *qp, u32 key)
{
	struct srnic_mr *mr;
	unsigned long flags;
	int err = -EINVAL;

	rcu_read_lock();
	mr = srnic_fast_reg_mr(qp, key >> 8);
	if (mr) {
		spin_lock_irqsave(&mr->fr_lock, flags);
		if (mr->valid && mr->key == key) {
			WRITE_ONCE(mr->valid, false);
			err = 0;
		}
		spin_unlock_irqrestore(&mr->fr_lock, flags);
	}
	rcu_read_unlock();
	return err;
}

/*
 * Longer than any access can last (see srnic_mr_release()); only a leaked
 * reference, a bug, makes a dereg_mr wait this long.
 */
#define SRNIC_MR_DEREG_TIMEOUT_SECS 60

/**
 * srnic_mr_unpublish() - take an MR's key out of the key table
 * @mr: the MR, being deregistered
 *
 * New lookups of the key miss; accesses that found it earlier still hold
 * their references (srnic_mr_release() waits for them).
 */
void srnic_mr_unpublish(struct srnic_mr *mr)
{
	struct srnic_dev *sdev = to_srnic_dev(mr->ibmr.device);

	/* Unless srnic_rereg_user_mr() put a successor there. */
	xa_cmpxchg(&sdev->mr_table, mr->index, mr, NULL, GFP_KERNEL);
}

/**
 * srnic_mr_release() - drop the registration's reference to an MR and free
 *	it when the in-flight accesses have dropped theirs
 * @mr: an MR srnic_mr_unpublish() took out of the key table
 *
 * An MR deregistered while the engine copies into it stays valid until the
 * copy ends. The pages are unpinned before this returns; the struct is
 * freed after an RCU grace period.
 *
 * The wait is bounded by construction: a reference from srnic_mr_lookup()
 * lasts one access that never waits for anything outside the host. The
 * QP tasks hold theirs for one run at most (srnic_qp_run() drops the
 * requester's and responder's cached SGLs and MRs before it returns, and
 * looks them up again in the next run), local delivery and UD for one
 * WQE or datagram, the debugfs hooks for one command (or until "release").
 * None is kept across a retransmission timeout, an RNR wait, a message
 * the peer never finishes, or a QP in the error state; so the wait lasts
 * one copy, never the peer's goodwill. Should a reference leak anyway,
 * the dereg does not hang: after SRNIC_MR_DEREG_TIMEOUT_SECS it warns and
 * leaves the MR (pinned pages, struct) allocated for the holder, which may
 * still copy into it.
 */
void srnic_mr_release(struct srnic_mr *mr)
{
	srnic_mr_put(mr);
	if (WARN(!wait_for_completion_timeout(&mr->released,
					      SRNIC_MR_DEREG_TIMEOUT_SECS * HZ),
		 "srnic: MR key 0x%x still referenced %d s after dereg_mr: leaked\n",
		 mr->key, SRNIC_MR_DEREG_TIMEOUT_SECS))
		return;
	srnic_mr_free(mr);
}

/* Overflow-safe: is [iova, iova + len) inside the MR? */
static bool srnic_mr_covers(const struct srnic_mr *mr, u64 iova, u64 len)
{
	return iova >= mr->iova && len <= mr->length &&
	       iova - mr->iova <= mr->length - len;
}

/* srnic_mr_lookup(), with or without the range check. */
static struct srnic_mr *
srnic_mr_lookup_range(struct srnic_dev *sdev, u32 key, enum srnic_key_kind kind,
		      struct srnic_pd *pd, int required_access, bool in_range,
		      u64 iova, u64 length)
{
	struct srnic_mr *mr;
	int err;

	rcu_read_lock();
	mr = xa_load(&sdev->mr_table, key >> 8);
	/* valid first: it orders the fields a REG_MR made current. */
	if (mr && (!smp_load_acquire(&mr->valid) ||
		   READ_ONCE(mr->key) != key ||
		   !refcount_inc_not_zero(&mr->users)))
		mr = NULL;
	rcu_read_unlock();
	if (!mr)
		return ERR_PTR(-ENOENT);

	if (kind == SRNIC_RKEY && !(mr->access & SRNIC_MR_REMOTE_ACCESS))
		err = -ENOENT;
	else if (mr->pd != pd)
		err = -EPERM;
	else if ((mr->access & required_access) != required_access)
		err = -EACCES;
	else if (in_range && !srnic_mr_covers(mr, iova, length))
		err = -ERANGE;
	else
		return mr;

	srnic_mr_put(mr);
	return ERR_PTR(err);
}

/**
 * srnic_mr_lookup() - find and check the MR of an access; take a reference
 * @sdev: the device the key was presented to
 * @key: lkey of an SGE, or rkey of an incoming request
 * @kind: SRNIC_LKEY or SRNIC_RKEY; an rkey only finds an MR that grants
 *	  some remote access
 * @pd: the PD of the QP making the access
 * @required_access: IB_ACCESS_* flags the access needs (0 for a local
 *	  read; LOCAL_WRITE for receive buffers, READ response targets and
 *	  atomic results; REMOTE_READ/WRITE/ATOMIC for remote requests)
 * @iova: first address accessed
 * @length: bytes accessed (0 is allowed and checks @iova alone)
 *
 * Safe in any context, softirq included: the key table is read under RCU
 * and the reference taken with refcount_inc_not_zero(), so an MR being
 * deregistered is never returned. The reference is meant to last one
 * access (one SGE, one incoming request): srnic_dereg_mr() waits for it.
 *
 * Return: the MR, to be released with srnic_mr_put(), or
 * ERR_PTR(-ENOENT) if no valid MR has this key (unknown or stale key,
 * invalidated fast-reg MR, rkey of a local-only MR), ERR_PTR(-EPERM) if the
 * MR belongs to another PD, ERR_PTR(-EACCES) if it lacks @required_access,
 * or ERR_PTR(-ERANGE) if [@iova, @iova + @length) is not inside it.
 */
struct srnic_mr *srnic_mr_lookup(struct srnic_dev *sdev, u32 key,
				 enum srnic_key_kind kind, struct srnic_pd *pd,
				 int required_access, u64 iova, u64 length)
{
	return srnic_mr_lookup_range(sdev, key, kind, pd, required_access,
				     true, iova, length);
}
EXPORT_SYMBOL_GPL(srnic_mr_lookup);

/**
 * srnic_mr_lookup_whole() - srnic_mr_lookup() of a key for all of its MR
 * @sdev: the device
 * @key: the rkey (of an MR, not a memory window) or lkey
 * @kind: which of the two @key is
 * @pd: the PD of the QP it is presented to
 * @required_access: IB_ACCESS_* flags the accesses need
 *
 * For a direct window (srnic_direct.c), which covers the whole MR.
 *
 * Return: as srnic_mr_lookup(), never -ERANGE.
 */
struct srnic_mr *srnic_mr_lookup_whole(struct srnic_dev *sdev, u32 key,
				       enum srnic_key_kind kind,
				       struct srnic_pd *pd, int required_access)
{
	return srnic_mr_lookup_range(sdev, key, kind, pd, required_access,
				     false, 0, 0);
}

/**
 * srnic_mr_is_current() - is @mr still the valid MR of its key?
 * @sdev: its device
 * @mr: an MR the caller holds a reference on
 *
 * False once dereg_mr or rereg_mr took it out of the key table.
 */
bool srnic_mr_is_current(struct srnic_dev *sdev, const struct srnic_mr *mr)
{
	bool current_mr;

	rcu_read_lock();
	current_mr = xa_load(&sdev->mr_table, mr->index) == mr &&
		     READ_ONCE(mr->valid);
	rcu_read_unlock();
	return current_mr;
}

/**
 * srnic_mr_put() - release a reference from srnic_mr_lookup()
 * @mr: the MR
 *
 * Any context. The last reference wakes a dereg_mr waiting for it.
 */
void srnic_mr_put(struct srnic_mr *mr)
{
	if (refcount_dec_and_test(&mr->users))
		complete(&mr->released);
}
EXPORT_SYMBOL_GPL(srnic_mr_put);

/**
 * srnic_mr_iova_to_page() - the page holding one address of an MR
 * @mr: a referenced MR
 * @iova: address inside the MR (checked by srnic_mr_lookup())
 * @offset: set to the offset of @iova in the page
 *
 * Not for ODP MRs, whose pages may go away: use srnic_mr_map_page().
 *
 * Return: the page, or NULL (with a warning) if @iova is outside the MR
 * or the MR is an ODP MR.
 */
struct page *srnic_mr_iova_to_page(struct srnic_mr *mr, u64 iova,
				   unsigned int *offset)
{
	unsigned long index;
	u64 off;

	if (WARN_ON_ONCE(!srnic_mr_covers(mr, iova, 1) ||
			 mr->type == SRNIC_MR_ODP))
		return NULL;

	if (mr->type == SRNIC_MR_DMA) {
		*offset = offset_in_page(iova);
		return virt_to_page((void *)(uintptr_t)iova);
	}

	off = iova - mr->iova + mr->page_offset;
	index = off >> PAGE_SHIFT;
	if (WARN_ON_ONCE(index >= mr->num_pages))
		return NULL;
	*offset = off & ~PAGE_MASK;
	return mr->pages[index];
}

/**
 * srnic_mr_map_page() - make the page of one address of an MR accessible
 * @mr: a referenced MR
 * @iova: address inside the MR (checked by srnic_mr_lookup())
 * @write: the access writes
 * @map: the page and offset; release with srnic_mr_unmap_page()
 *
 * For an ODP MR the page is faulted in if needed (this may sleep) and
 * stays the MR's until srnic_mr_unmap_page(): map one page at a time,
 * copy, unmap. Other MRs' pages are pinned or kernel memory.
 *
 * Return: 0, or -EFAULT (an address outside the MR, with a warning; or an
 * ODP page the process does not have) or another errno of
 * srnic_odp_map_page(); nothing is held then.
 */
int srnic_mr_map_page(struct srnic_mr *mr, u64 iova, bool write,
		      struct srnic_mr_map *map)
{
	if (mr->type == SRNIC_MR_ODP) {
		if (WARN_ON_ONCE(!srnic_mr_covers(mr, iova, 1)))
			return -EFAULT;
		return srnic_odp_map_page(mr, iova, write, map);
	}
	map->locked = NULL;
	map->page = srnic_mr_iova_to_page(mr, iova, &map->offset);
	return map->page ? 0 : -EFAULT;
}

/**
 * srnic_mr_unmap_page() - end an access begun by srnic_mr_map_page()
 * @map: the mapping
 */
void srnic_mr_unmap_page(struct srnic_mr_map *map)
{
	if (map->locked)
		mutex_unlock(&map->locked->umem_mutex);
	map->locked = NULL;
}

/* Copies len bytes between buf and the MR at iova, page by page. */
static int srnic_mr_xfer(struct srnic_mr *mr, u64 iova, void *buf, u64 len,
			 bool to_mr)
{
	if (WARN_ON_ONCE(!srnic_mr_covers(mr, iova, len)))
		return -EFAULT;

	while (len) {
		struct srnic_mr_map map;
		size_t chunk;
		void *va;
		int err;

		err = srnic_mr_map_page(mr, iova, to_mr, &map);
		if (err)
			return err;
		chunk = min_t(u64, len, PAGE_SIZE - map.offset);
		va = kmap_local_page(map.page);
		if (to_mr)
			srnic_payload_copy(va + map.offset, buf, chunk);
		else
			srnic_payload_copy(buf, va + map.offset, chunk);
		kunmap_local(va);
		srnic_mr_unmap_page(&map);

		buf += chunk;
		iova += chunk;
		len -= chunk;
	}
	return 0;
}

/**
 * srnic_mr_copy_to() - copy a kernel buffer into an MR
 * @mr: a referenced MR
 * @iova: destination address, [@iova, @iova + @len) checked at lookup
 * @src: source
 * @len: bytes
 *
 * Does not sleep, except to fault in the pages of an ODP MR; callers in
 * a loop over large messages reschedule between calls themselves.
 *
 * Return: 0, or -EFAULT (with a warning: a caller bug) if the range is not
 * inside the MR, in which case nothing outside the MR was touched; for an
 * ODP MR, the errno of a fault that failed (-EFAULT: the process has no
 * page there), the bytes before it copied.
 */
int srnic_mr_copy_to(struct srnic_mr *mr, u64 iova, const void *src, u64 len)
{
	return srnic_mr_xfer(mr, iova, (void *)src, len, true);
}
EXPORT_SYMBOL_GPL(srnic_mr_copy_to);

/**
 * srnic_mr_copy_from() - copy from an MR into a kernel buffer
 * @mr: a referenced MR
 * @iova: source address, [@iova, @iova + @len) checked at lookup
 * @dst: destination
 * @len: bytes
 *
 * Return: as srnic_mr_copy_to().
 */
int srnic_mr_copy_from(struct srnic_mr *mr, u64 iova, void *dst, u64 len)
{
	return srnic_mr_xfer(mr, iova, dst, len, false);
}
EXPORT_SYMBOL_GPL(srnic_mr_copy_from);

/* Bytes of srnic_mr_copy_bounced()'s stack buffer. */
#define SRNIC_MR_BOUNCE_SIZE 256

/*
 * srnic_mr_copy() between two ODP MRs (perhaps the same umem): through a
 * small buffer, one umem locked at a time.
 */
static int srnic_mr_copy_bounced(struct srnic_mr *dst, u64 dst_iova,
				 struct srnic_mr *src, u64 src_iova, u64 len)
{
	u8 buf[SRNIC_MR_BOUNCE_SIZE];

	while (len) {
		u32 chunk = min_t(u64, len, sizeof(buf));
		int err;

		err = srnic_mr_xfer(src, src_iova, buf, chunk, false);
		if (!err)
			err = srnic_mr_xfer(dst, dst_iova, buf, chunk, true);
		if (err)
			return err;
		dst_iova += chunk;
		src_iova += chunk;
		len -= chunk;
	}
	return 0;
}
EXPORT_SYMBOL_GPL(srnic_mr_copy);

/**
 * srnic_mr_copy() - copy between two MRs, page to page (local delivery)
 * @dst: referenced destination MR
 * @dst_iova: destination address
 * @src: referenced source MR (may be @dst)
 * @src_iova: source address
 * @len: bytes
 *
 * One copy, no bounce buffer, unless both MRs are ODP MRs: then each
 * piece goes through a buffer on the stack, so that only one umem is
 * locked at a time. Overlapping ranges of one MR leave the destination's
 * content unspecified, never memory outside the MRs.
 *
 * Return: 0, or -EFAULT (with a warning) if a range is outside its MR,
 * or the errno of a failed ODP fault as srnic_mr_copy_to().
 */
int srnic_mr_copy(struct srnic_mr *dst, u64 dst_iova, struct srnic_mr *src,
		  u64 src_iova, u64 len)
{
	if (WARN_ON_ONCE(!srnic_mr_covers(dst, dst_iova, len) ||
			 !srnic_mr_covers(src, src_iova, len)))
		return -EFAULT;

	if (dst->type == SRNIC_MR_ODP && src->type == SRNIC_MR_ODP)
		return srnic_mr_copy_bounced(dst, dst_iova, src, src_iova, len);

	while (len) {
		struct srnic_mr_map dmap, smap;
		size_t chunk;
		void *dva, *sva;
		int err;

		err = srnic_mr_map_page(dst, dst_iova, true, &dmap);
		if (err)
			return err;
		err = srnic_mr_map_page(src, src_iova, false, &smap);
		if (err) {
			srnic_mr_unmap_page(&dmap);
			return err;
		}
		chunk = min_t(u64, len, min(PAGE_SIZE - dmap.offset,
					    PAGE_SIZE - smap.offset));

		dva = kmap_local_page(dmap.page);
		sva = kmap_local_page(smap.page);
		srnic_payload_copy(dva + dmap.offset, sva + smap.offset, chunk);
		/* kmap_local mappings are released in reverse order. */
		kunmap_local(sva);
		kunmap_local(dva);
		srnic_mr_unmap_page(&smap);
		srnic_mr_unmap_page(&dmap);

		dst_iova += chunk;
		src_iova += chunk;
		len -= chunk;
	}
	return 0;
}
