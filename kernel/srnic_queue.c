// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: ring memory shared with the provider.
 *
 * (Device memory, srnic_dm.c, is shared the same way: one vmalloc_user()
 * buffer per allocation behind an rdma_user_mmap_entry.)
 *
 * Every SQ, RQ, SRQ and CQ is one vmalloc_user() buffer: a control record
 * (struct srnic_queue_ctrl) followed by a power-of-two array of fixed-size
 * entries. For user objects the buffer is exposed through an
 * rdma_user_mmap_entry, which then owns it: the buffer is freed in
 * srnic_mmap_free() once the object is destroyed and no mmap() of it is in
 * progress, while pages still mapped by the process stay alive through the
 * references remap_vmalloc_range() took on them.
 */

#include <linux/log2.h>
#include <linux/overflow.h>
#include <linux/vmalloc.h>
#include <rdma/uverbs_ioctl.h>

#include "srnic.h"

/*
 * What an mmap offset of a context stands for: a vmalloc_user() buffer
 * (a ring, device memory) or a direct window (srnic_direct.c).
 */
struct srnic_mmap_entry {
	struct rdma_user_mmap_entry rdma_entry;
	void *buf;
	struct srnic_direct_window *window;
};

static struct srnic_mmap_entry *
to_srnic_mmap_entry(struct rdma_user_mmap_entry *rdma_entry)
{
	return container_of(rdma_entry, struct srnic_mmap_entry, rdma_entry);
}

/**
 * srnic_queue_init() - allocate a ring
 * @q: the queue to set up
 * @num_entries: entries, a power of two
 * @entry_size: bytes per entry, a power of two
 *
 * The memory is zeroed, so a CQ ring holds no valid CQE (see struct
 * srnic_cqe) and all indexes start at 0.
 *
 * Return: 0, -EINVAL for a bad geometry, -ENOMEM.
 */
int srnic_queue_init(struct srnic_queue *q, u32 num_entries, u32 entry_size)
{
	size_t bytes;

	if (!is_power_of_2(num_entries) || !is_power_of_2(entry_size))
		return -EINVAL;
	if (check_mul_overflow((size_t)num_entries, (size_t)entry_size, &bytes) ||
	    check_add_overflow(bytes, (size_t)SRNIC_QUEUE_CTRL_SIZE, &bytes) ||
	    bytes > SRNIC_QUEUE_MAX_BYTES)
		return -EINVAL;

	memset(q, 0, sizeof(*q));
	q->size = PAGE_ALIGN(bytes);
	q->buf = vmalloc_user(q->size);
	if (!q->buf)
		return -ENOMEM;
	q->ctrl = q->buf;
	q->entries = q->buf + SRNIC_QUEUE_CTRL_SIZE;
	q->num_entries = num_entries;
	q->entry_size = entry_size;
	return 0;
}

static struct rdma_user_mmap_entry *
srnic_mmap_insert(struct ib_ucontext *uctx, void *buf,
		  struct srnic_direct_window *window, size_t size)
{
	struct srnic_mmap_entry *entry;
	int err;

	entry = kzalloc(sizeof(*entry), GFP_KERNEL);
	if (!entry)
		return ERR_PTR(-ENOMEM);
	entry->buf = buf;
	entry->window = window;
	err = rdma_user_mmap_entry_insert(uctx, &entry->rdma_entry, size);
	if (err) {
		kfree(entry);
		return ERR_PTR(err);
	}
	return &entry->rdma_entry;
}

/**
 * srnic_mmap_window_insert() - make a direct window mappable
 * @uctx: the poster's user context
 * @window: the window; the entry's last reference calls
 *	    srnic_direct_entry_free() for it
 * @size: bytes of the window, page aligned
 *
 * Return: the entry, or an ERR_PTR.
 */
struct rdma_user_mmap_entry *
srnic_mmap_window_insert(struct ib_ucontext *uctx,
			 struct srnic_direct_window *window, size_t size)
{
	return srnic_mmap_insert(uctx, NULL, window, size);
}

/**
 * srnic_mmap_entry_insert() - make a vmalloc_user() buffer mappable
 * @uctx: the user context whose process may map it
 * @buf: vmalloc_user() memory
 * @size: bytes of @buf, page aligned
 *
 * On success the entry owns @buf: rdma_user_mmap_entry_remove() of the
 * entry frees it (srnic_mmap_free()), once no mmap() of it is in progress.
 * The provider finds the buffer at rdma_user_mmap_get_offset() of the
 * entry and must map all of it.
 *
 * Return: the entry, or an ERR_PTR (then @buf is still the caller's).
 */
struct rdma_user_mmap_entry *
srnic_mmap_entry_insert(struct ib_ucontext *uctx, void *buf, size_t size)
{
	return srnic_mmap_insert(uctx, buf, NULL, size);
}

/**
 * srnic_queue_map() - make a ring mappable by the process owning @uctx
 * @q: a queue set up by srnic_queue_init()
 * @uctx: the user context
 * @desc: filled with where and how the provider maps it
 *
 * From here on the mmap entry owns the buffer.
 */
int srnic_queue_map(struct srnic_queue *q, struct ib_ucontext *uctx,
		    struct srnic_queue_desc *desc)
{
	struct rdma_user_mmap_entry *entry;

	entry = srnic_mmap_entry_insert(uctx, q->buf, q->size);
	if (IS_ERR(entry))
		return PTR_ERR(entry);
	q->mmap_entry = entry;

	memset(desc, 0, sizeof(*desc));
	desc->mmap_offset = rdma_user_mmap_get_offset(q->mmap_entry);
	desc->mmap_size = q->size;
	desc->num_entries = q->num_entries;
	desc->entry_size = q->entry_size;
	return 0;
}

/**
 * srnic_queue_destroy() - release a ring
 * @q: the queue; may be one whose srnic_queue_init() failed or never ran
 */
void srnic_queue_destroy(struct srnic_queue *q)
{
	if (q->mmap_entry)
		rdma_user_mmap_entry_remove(q->mmap_entry);	/* frees buf */
	else
		vfree(q->buf);
	memset(q, 0, sizeof(*q));
}

/**
 * srnic_mmap_entry_window() - the direct window an mmap entry stands for
 * @rdma_entry: an entry of srnic_queue_map(), srnic_mmap_insert() or
 *		srnic_mmap_window_insert()
 *
 * Return: the window, or NULL for an entry of a buffer.
 */
struct srnic_direct_window *
srnic_mmap_entry_window(struct rdma_user_mmap_entry *rdma_entry)
{
	return to_srnic_mmap_entry(rdma_entry)->window;
}

/**
 * srnic_mmap_entry_map() - map the buffer of an mmap entry (a ring, device
 *	memory) into @vma
 * @rdma_entry: an entry that is not a window's
 * @vma: the mapping asked for
 *
 * Return: 0, -EINVAL for a mapping of part of the buffer (it would hide
 * entries), or remap_vmalloc_range()'s error.
 */
int srnic_mmap_entry_map(struct rdma_user_mmap_entry *rdma_entry,
			 struct vm_area_struct *vma)
{
	struct srnic_mmap_entry *entry = to_srnic_mmap_entry(rdma_entry);

	if (vma->vm_end - vma->vm_start != rdma_entry->npages << PAGE_SHIFT)
		return -EINVAL;
	return remap_vmalloc_range(vma, entry->buf, 0);
}

/**
 * srnic_mmap_entry_free() - free an mmap entry and its buffer
 * @rdma_entry: the entry, whose last reference is gone (its window, if it
 *		has one, already released)
 */
void srnic_mmap_entry_free(struct rdma_user_mmap_entry *rdma_entry)
{
	struct srnic_mmap_entry *entry = to_srnic_mmap_entry(rdma_entry);

	vfree(entry->buf);
	kfree(entry);
}
