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
 * (ib_uses_virt_dma()) and its page is virt_to_page(). A DM MR's page array
 * lists (and references) the pages of the device memory allocation
 * (srnic_dm.c) it was registered on.
 */

#include <linux/highmem.h>
#include <linux/mm.h>
#include <linux/random.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <rdma/ib_umem.h>

#include "srnic.h"

/* The access flags srnic implements; no memory windows, no ODP yet. */
#define SRNIC_MR_ACCESS (IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE | \
			 IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_ATOMIC)
#define SRNIC_MR_REMOTE_ACCESS (IB_ACCESS_REMOTE_WRITE | \
				IB_ACCESS_REMOTE_READ | \
				IB_ACCESS_REMOTE_ATOMIC)

/**
 * srnic_mr_table_init() - prepare a new device's key table
 * @sdev: the device, not yet registered
 */
void srnic_mr_table_init(struct srnic_dev *sdev)
{
	xa_init_flags(&sdev->mr_table, XA_FLAGS_ALLOC);
	sdev->mr_next = 1;
	sdev->mr_laps = 0;
	/* Keys of different devices (and module loads) start apart. */
	sdev->mr_key_seed = get_random_u8();
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

/*
 * The rules of ib_check_mr_access(), which uverbs applies before
 * reg_user_mr but nobody applies to kernel callers; flags srnic does not
 * implement (memory windows, ODP, zero-based) are refused with EOPNOTSUPP,
 * so callers can tell "not here" from "never valid".
 */
static int srnic_mr_check_access(int access)
{
	if ((access & (IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IB_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	if (access & ~(SRNIC_MR_ACCESS | SRNIC_MR_IGNORED_ACCESS))
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
	refcount_set(&mr->users, 1);
	init_completion(&mr->released);
	return mr;
}

/* Frees an MR that is no longer in the key table and has no users. */
static void srnic_mr_free(struct srnic_mr *mr)
{
	unsigned long i;

	if (mr->umem)
		ib_umem_release(mr->umem);
	if (mr->type == SRNIC_MR_DM)
		for (i = 0; i < mr->num_pages; i++)
			put_page(mr->pages[i]);
	kvfree(mr->pages);
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

/**
 * srnic_reg_user_mr() - the reg_user_mr verb
 * @ibpd: PD to register in
 * @start: user address of the memory
 * @length: bytes
 * @iova: address the MR's users give for @start (same offset in a page)
 * @access: IB_ACCESS_* flags
 * @udata: no srnic data in either direction
 *
 * Pins the pages (ib_umem_get()) and records them in a page array.
 *
 * Return: the MR, or ERR_PTR(-EINVAL) for a zero, too large or wrapping
 * range or an invalid flag combination, -EOPNOTSUPP for flags srnic does
 * not implement (memory windows, ODP, zero-based), -ENOMEM, or what
 * ib_umem_get() returns.
 */
struct ib_mr *srnic_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
				u64 iova, int access, struct ib_udata *udata)
{
	struct srnic_dev *sdev = to_srnic_dev(ibpd->device);
	struct ib_umem *umem;
	struct srnic_mr *mr;
	int err;

	err = srnic_mr_check_access(access);
	if (err)
		return ERR_PTR(err);
	if (udata) {
		err = srnic_udata_check_tail(udata, 0);
		if (err)
			return ERR_PTR(err);
	}
	err = srnic_mr_check_range(start, length);
	if (!err)
		err = srnic_mr_check_range(iova, length);
	if (err)
		return ERR_PTR(err);
	if (offset_in_page(start) != offset_in_page(iova))
		return ERR_PTR(-EINVAL);

	mr = srnic_mr_alloc(ibpd, SRNIC_MR_USER, access);
	if (!mr)
		return ERR_PTR(-ENOMEM);

	umem = ib_umem_get(ibpd->device, start, length, access);
	if (IS_ERR(umem)) {
		err = PTR_ERR(umem);
		goto err_free_mr;
	}
	mr->umem = umem;

	mr->max_pages = ib_umem_num_pages(umem);
	mr->pages = kvcalloc(mr->max_pages, sizeof(*mr->pages),
			     GFP_KERNEL | __GFP_NOWARN);
	if (!mr->pages) {
		err = -ENOMEM;
		goto err_free_mr;
	}
	err = srnic_mr_fill_user_pages(mr);
	if (err)
		goto err_free_mr;

	mr->iova = iova;
	mr->length = length;
	mr->page_offset = ib_umem_offset(umem);
	mr->valid = true;

	err = srnic_mr_publish(sdev, mr);
	if (err)
		goto err_free_mr;
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

	err = srnic_mr_check_access(access);
	if (err)
		return ERR_PTR(err);

	mr = srnic_mr_alloc(ibpd, SRNIC_MR_DMA, access);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	mr->iova = 0;
	mr->length = U64_MAX;
	mr->valid = true;

	err = srnic_mr_publish(to_srnic_dev(ibpd->device), mr);
	if (err) {
		srnic_mr_free(mr);
		return ERR_PTR(err);
	}
	return &mr->ibmr;
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
	unsigned long first, i;
	struct srnic_mr *mr;
	int access;
	int err;

	if (!(attr->access_flags & IB_ZERO_BASED))
		return ERR_PTR(-EINVAL);
	access = attr->access_flags & ~IB_ZERO_BASED;
	err = srnic_mr_check_access(access);
	if (err)
		return ERR_PTR(err);
	if (attr->offset > ibdm->length || attr->length > ibdm->length ||
	    attr->length > ibdm->length - attr->offset)
		return ERR_PTR(-EINVAL);

	mr = srnic_mr_alloc(ibpd, SRNIC_MR_DM, access);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	first = attr->offset >> PAGE_SHIFT;
	mr->page_offset = offset_in_page(attr->offset);
	if (attr->length) {
		mr->max_pages = DIV_ROUND_UP(mr->page_offset + attr->length,
					     PAGE_SIZE);
		mr->pages = kvcalloc(mr->max_pages, sizeof(*mr->pages),
				     GFP_KERNEL);
		if (!mr->pages) {
			err = -ENOMEM;
			goto err_free_mr;
		}
	}
	for (i = 0; i < mr->max_pages; i++) {
		struct page *page =
			vmalloc_to_page(dm->buf + ((first + i) << PAGE_SHIFT));

		get_page(page);
		mr->pages[mr->num_pages++] = page;
	}

	mr->iova = 0;
	mr->length = attr->length;
	mr->valid = true;

	err = srnic_mr_publish(to_srnic_dev(ibpd->device), mr);
	if (err)
		goto err_free_mr;
	return &mr->ibmr;

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
 * engine executes an IB_WR_REG_MR for it.
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
	mr->max_pages = max_num_sg;
	mr->pages = kvcalloc(mr->max_pages, sizeof(*mr->pages), GFP_KERNEL);
	if (!mr->pages) {
		err = -ENOMEM;
		goto err_free_mr;
	}

	err = srnic_mr_publish(to_srnic_dev(ibpd->device), mr);
	if (err)
		goto err_free_mr;
	return &mr->ibmr;

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

/*
 * Longer than any access can last (see srnic_dereg_mr()); only a leaked
 * reference, a bug, makes a dereg_mr wait this long.
 */
#define SRNIC_MR_DEREG_TIMEOUT_SECS 60

/**
 * srnic_dereg_mr() - the dereg_mr verb
 * @ibmr: the MR
 * @udata: unused
 *
 * Removes the key (new lookups miss), drops the registration's reference
 * and waits until the in-flight accesses have dropped theirs, so an MR
 * deregistered while the engine copies into it stays valid until the copy
 * ends. The pages are unpinned before returning; the struct is freed after
 * an RCU grace period.
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
 *
 * Return: 0.
 */
int srnic_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata)
{
	struct srnic_dev *sdev = to_srnic_dev(ibmr->device);
	struct srnic_mr *mr = to_srnic_mr(ibmr);

	xa_erase(&sdev->mr_table, mr->index);
	srnic_mr_put(mr);
	if (WARN(!wait_for_completion_timeout(&mr->released,
					      SRNIC_MR_DEREG_TIMEOUT_SECS * HZ),
		 "srnic: MR key 0x%x still referenced %d s after dereg_mr: leaked\n",
		 mr->key, SRNIC_MR_DEREG_TIMEOUT_SECS))
		return 0;
	srnic_mr_free(mr);
	return 0;
}

/* Overflow-safe: is [iova, iova + len) inside the MR? */
static bool srnic_mr_covers(const struct srnic_mr *mr, u64 iova, u64 len)
{
	return iova >= mr->iova && len <= mr->length &&
	       iova - mr->iova <= mr->length - len;
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
	struct srnic_mr *mr;
	int err;

	rcu_read_lock();
	mr = xa_load(&sdev->mr_table, key >> 8);
	if (mr && (READ_ONCE(mr->key) != key || !READ_ONCE(mr->valid) ||
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
	else if (!srnic_mr_covers(mr, iova, length))
		err = -ERANGE;
	else
		return mr;

	srnic_mr_put(mr);
	return ERR_PTR(err);
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

/**
 * srnic_mr_iova_to_page() - the page holding one address of an MR
 * @mr: a referenced MR
 * @iova: address inside the MR (checked by srnic_mr_lookup())
 * @offset: set to the offset of @iova in the page
 *
 * For the wire path, which attaches MR pages to skbs as fragments.
 *
 * Return: the page, or NULL (with a warning) if @iova is outside the MR.
 */
struct page *srnic_mr_iova_to_page(struct srnic_mr *mr, u64 iova,
				   unsigned int *offset)
{
	unsigned long index;
	u64 off;

	if (WARN_ON_ONCE(!srnic_mr_covers(mr, iova, 1)))
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

/* Copies len bytes between buf and the MR at iova, page by page. */
static int srnic_mr_xfer(struct srnic_mr *mr, u64 iova, void *buf, u64 len,
			 bool to_mr)
{
	if (WARN_ON_ONCE(!srnic_mr_covers(mr, iova, len)))
		return -EFAULT;

	while (len) {
		unsigned int offset;
		struct page *page = srnic_mr_iova_to_page(mr, iova, &offset);
		size_t chunk = min_t(u64, len, PAGE_SIZE - offset);
		void *va;

		if (!page)
			return -EFAULT;
		va = kmap_local_page(page);
		if (to_mr)
			memcpy(va + offset, buf, chunk);
		else
			memcpy(buf, va + offset, chunk);
		kunmap_local(va);

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
 * Does not sleep; callers in a loop over large messages reschedule
 * between calls themselves.
 *
 * Return: 0, or -EFAULT (with a warning: a caller bug) if the range is not
 * inside the MR, in which case nothing outside the MR was touched.
 */
int srnic_mr_copy_to(struct srnic_mr *mr, u64 iova, const void *src, u64 len)
{
	return srnic_mr_xfer(mr, iova, (void *)src, len, true);
}

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

/**
 * srnic_mr_copy() - copy between two MRs, page to page (local delivery)
 * @dst: referenced destination MR
 * @dst_iova: destination address
 * @src: referenced source MR (may be @dst)
 * @src_iova: source address
 * @len: bytes
 *
 * One copy, no bounce buffer. Overlapping ranges of one MR leave the
 * destination's content unspecified, never memory outside the MRs.
 *
 * Return: 0, or -EFAULT (with a warning) if a range is outside its MR.
 */
int srnic_mr_copy(struct srnic_mr *dst, u64 dst_iova, struct srnic_mr *src,
		  u64 src_iova, u64 len)
{
	if (WARN_ON_ONCE(!srnic_mr_covers(dst, dst_iova, len) ||
			 !srnic_mr_covers(src, src_iova, len)))
		return -EFAULT;

	while (len) {
		unsigned int doff, soff;
		struct page *dpage = srnic_mr_iova_to_page(dst, dst_iova, &doff);
		struct page *spage = srnic_mr_iova_to_page(src, src_iova, &soff);
		size_t chunk;
		void *dva, *sva;

		if (!dpage || !spage)
			return -EFAULT;
		chunk = min_t(u64, len, min(PAGE_SIZE - doff, PAGE_SIZE - soff));

		dva = kmap_local_page(dpage);
		sva = kmap_local_page(spage);
		memcpy(dva + doff, sva + soff, chunk);
		/* kmap_local mappings are released in reverse order. */
		kunmap_local(sva);
		kunmap_local(dva);

		dst_iova += chunk;
		src_iova += chunk;
		len -= chunk;
	}
	return 0;
}
