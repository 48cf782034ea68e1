// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: ring memory shared with the provider.
 *
 * (Device memory, srnic_dm.c, is shared the same way: one vmalloc_user()
 * buffer per allocation behind an rdma_user_mmap_entry.)
 *
 * Every RQ, SRQ and CQ is one vmalloc_user() buffer: a control record
 * (struct srnic_queue_ctrl) followed by a power-of-two array of fixed-size
 * entries. For user objects the buffer is exposed through an
 * rdma_user_mmap_entry, which then owns it: the buffer is freed in
 * srnic_mmap_free() once the object is destroyed and no mmap() of it is in
 * progress, while pages still mapped by the process stay alive through the
 * references remap_vmalloc_range() took on them.
 *
 * A user SQ of up to SRNIC_RING_ARENA_MAX_RING bytes lives in its
 * context's ring arena instead (struct srnic_ring_arena): a part of a
 * chunk, which is one such buffer and mmap entry shared by many SQs. The
 * chunk's entry is removed, as a ring's own is, when its last ring goes.
 */

#include <linux/bitmap.h>
#include <linux/log2.h>
#include <linux/sizes.h>
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

/* Allocation granule of a ring arena: rings never share a cache line. */
#define SRNIC_RING_UNIT SRNIC_CACHELINE_SIZE
/* The largest ring a ring arena takes. */
#define SRNIC_RING_ARENA_MAX_RING SZ_16K
/* The first chunk of a context, and the size the doubling stops at. */
#define SRNIC_RING_CHUNK_MIN max_t(u32, SZ_32K, PAGE_SIZE)
#define SRNIC_RING_CHUNK_MAX max_t(u32, SZ_256K, PAGE_SIZE)

/**
 * struct srnic_ring_chunk - one buffer of a ring arena
 * @node: in the arena's chunks
 * @arena: the arena
 * @entry: the mmap entry that owns @buf
 * @buf: vmalloc_user() memory
 * @units: SRNIC_RING_UNIT granules in @buf
 * @free_units: granules not in a ring
 * @used: a bit per granule, set while a ring holds it
 *
 * All but @entry, @buf and @units are guarded by the arena's lock.
 */
struct srnic_ring_chunk {
	struct list_head node;
	struct srnic_ring_arena *arena;
	struct rdma_user_mmap_entry *entry;
	void *buf;
	u32 units;
	u32 free_units;
	unsigned long used[];
};

/* Bytes of a ring of this geometry, or -EINVAL. */
static ssize_t srnic_queue_bytes(u32 num_entries, u32 entry_size)
{
	size_t bytes;

	if (!is_power_of_2(num_entries) || !is_power_of_2(entry_size))
		return -EINVAL;
	if (check_mul_overflow((size_t)num_entries, (size_t)entry_size, &bytes) ||
	    check_add_overflow(bytes, (size_t)SRNIC_QUEUE_CTRL_SIZE, &bytes) ||
	    bytes > SRNIC_QUEUE_MAX_BYTES)
		return -EINVAL;
	return bytes;
}

static void srnic_queue_set(struct srnic_queue *q, u32 num_entries,
			    u32 entry_size)
{
	q->ctrl = q->buf;
	q->entries = q->buf + SRNIC_QUEUE_CTRL_SIZE;
	q->num_entries = num_entries;
	q->entry_size = entry_size;
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
	ssize_t bytes = srnic_queue_bytes(num_entries, entry_size);

	if (bytes < 0)
		return bytes;
	memset(q, 0, sizeof(*q));
	q->size = PAGE_ALIGN(bytes);
	q->buf = vmalloc_user(q->size);
	if (!q->buf)
		return -ENOMEM;
	srnic_queue_set(q, num_entries, entry_size);
	return 0;
}

/**
 * srnic_ring_arena_init() - set up a user context's ring arena
 * @arena: the arena, in the context
 */
void srnic_ring_arena_init(struct srnic_ring_arena *arena)
{
	mutex_init(&arena->lock);
	INIT_LIST_HEAD(&arena->chunks);
	arena->next_chunk_size = SRNIC_RING_CHUNK_MIN;
}

/**
 * srnic_ring_arena_destroy() - tear down a user context's ring arena
 * @arena: the arena; uverbs destroyed the context's QPs before, so their
 *	   rings, and with the last of them every chunk, are gone
 */
void srnic_ring_arena_destroy(struct srnic_ring_arena *arena)
{
	WARN_ON_ONCE(!list_empty(&arena->chunks));
	mutex_destroy(&arena->lock);
}

/* A new chunk of @size bytes in @arena, or an ERR_PTR. Under the lock. */
static struct srnic_ring_chunk *
srnic_ring_chunk_add(struct srnic_ucontext *uctx, u32 size)
{
	struct srnic_ring_arena *arena = &uctx->ring_arena;
	u32 units = size / SRNIC_RING_UNIT;
	struct srnic_ring_chunk *chunk;

	chunk = kzalloc(struct_size(chunk, used, BITS_TO_LONGS(units)),
			GFP_KERNEL);
	if (!chunk)
		return ERR_PTR(-ENOMEM);
	chunk->buf = vmalloc_user(size);
	if (!chunk->buf) {
		kfree(chunk);
		return ERR_PTR(-ENOMEM);
	}
	chunk->entry = srnic_mmap_entry_insert(&uctx->ibuc, chunk->buf, size);
	if (IS_ERR(chunk->entry)) {
		long err = PTR_ERR(chunk->entry);

		vfree(chunk->buf);
		kfree(chunk);
		return ERR_PTR(err);
	}
	chunk->arena = arena;
	chunk->units = units;
	chunk->free_units = units;
	list_add_tail(&chunk->node, &arena->chunks);
	return chunk;
}

/**
 * srnic_queue_init_shared() - allocate a ring of a user context
 * @q: the queue to set up
 * @uctx: the context whose process maps it
 * @num_entries: entries, a power of two
 * @entry_size: bytes per entry, a power of two
 *
 * A ring of up to SRNIC_RING_ARENA_MAX_RING bytes takes the first free
 * run of granules in a chunk of the context's ring arena, zeroed; a larger
 * one gets a buffer of its own as with srnic_queue_init(). Either way,
 * srnic_queue_map() then tells the provider where it is.
 *
 * Return: 0, -EINVAL for a bad geometry, -ENOMEM.
 */
int srnic_queue_init_shared(struct srnic_queue *q, struct srnic_ucontext *uctx,
			    u32 num_entries, u32 entry_size)
{
	struct srnic_ring_arena *arena = &uctx->ring_arena;
	ssize_t bytes = srnic_queue_bytes(num_entries, entry_size);
	struct srnic_ring_chunk *chunk;
	unsigned long start;
	u32 units;

	if (bytes < 0)
		return bytes;
	if (bytes > SRNIC_RING_ARENA_MAX_RING)
		return srnic_queue_init(q, num_entries, entry_size);

	units = DIV_ROUND_UP(bytes, SRNIC_RING_UNIT);
	mutex_lock(&arena->lock);
	list_for_each_entry(chunk, &arena->chunks, node) {
		if (chunk->free_units < units)
			continue;
		start = bitmap_find_next_zero_area(chunk->used, chunk->units,
						   0, units, 0);
		if (start < chunk->units)
			goto found;
	}
	chunk = srnic_ring_chunk_add(uctx, arena->next_chunk_size);
	if (IS_ERR(chunk)) {
		mutex_unlock(&arena->lock);
		return PTR_ERR(chunk);
	}
	arena->next_chunk_size = min_t(u32, arena->next_chunk_size * 2,
				       SRNIC_RING_CHUNK_MAX);
	start = 0;
found:
	bitmap_set(chunk->used, start, units);
	chunk->free_units -= units;
	mutex_unlock(&arena->lock);

	memset(q, 0, sizeof(*q));
	q->chunk = chunk;
	q->offset = start * SRNIC_RING_UNIT;
	q->size = units * SRNIC_RING_UNIT;
	q->buf = chunk->buf + q->offset;
	/* Granules an earlier ring left: the provider may still write them. */
	memset(q->buf, 0, q->size);
	srnic_queue_set(q, num_entries, entry_size);
	return 0;
}

/* Give a ring's granules back; the chunk goes with its last ring. */
static void srnic_ring_arena_free(struct srnic_queue *q)
{
	struct srnic_ring_chunk *chunk = q->chunk;
	struct srnic_ring_arena *arena = chunk->arena;
	u32 units = q->size / SRNIC_RING_UNIT;
	bool empty;

	mutex_lock(&arena->lock);
	bitmap_clear(chunk->used, q->offset / SRNIC_RING_UNIT, units);
	chunk->free_units += units;
	empty = chunk->free_units == chunk->units;
	if (empty)
		list_del(&chunk->node);
	mutex_unlock(&arena->lock);
	if (empty) {
		rdma_user_mmap_entry_remove(chunk->entry);	/* frees buf */
		kfree(chunk);
	}
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
 * @q: a queue set up by srnic_queue_init() or srnic_queue_init_shared()
 * @uctx: the user context
 * @desc: filled with where and how the provider maps it
 *
 * From here on the mmap entry owns the buffer.
 */
int srnic_queue_map(struct srnic_queue *q, struct ib_ucontext *uctx,
		    struct srnic_queue_desc *desc)
{
	struct rdma_user_mmap_entry *entry;

	memset(desc, 0, sizeof(*desc));
	if (q->chunk) {
		entry = q->chunk->entry;
		desc->mmap_size = q->chunk->units * SRNIC_RING_UNIT;
		desc->ring_offset = q->offset;
		desc->flags = SRNIC_QUEUE_DESC_SHARED;
	} else {
		entry = srnic_mmap_entry_insert(uctx, q->buf, q->size);
		if (IS_ERR(entry))
			return PTR_ERR(entry);
		q->mmap_entry = entry;
		desc->mmap_size = q->size;
	}
	desc->mmap_offset = rdma_user_mmap_get_offset(entry);
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
	if (q->chunk)
		srnic_ring_arena_free(q);
	else if (q->mmap_entry)
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
