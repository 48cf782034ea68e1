// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: device memory (ibv_alloc_dm, ibv_reg_dm_mr).
 *
 * A hardware RNIC's device memory is on-chip memory the process reaches
 * through a BAR mapping. srnic's is ordinary kernel memory: each
 * allocation is one zeroed vmalloc_user() buffer that the provider maps
 * (the same rdma_user_mmap_entry scheme as the rings, srnic_queue.c) and
 * copies to and from for ibv_memcpy_to_dm()/ibv_memcpy_from_dm(). What
 * makes it device memory is the budget: a device hands out at most
 * max_dm_size bytes (pages, rounded up) in all, the max_dm_kib module
 * parameter when the device was created, reported by query_device.
 *
 * An MR on device memory (reg_dm_mr, srnic_mr.c) is zero based and
 * translates through the allocation's pages like any other MR, so the
 * engine serves its lkey and rkey like a user MR's.
 *
 * The budget is released by dealloc_dm. A process that keeps its mapping
 * after ibv_free_dm() keeps those pages alive until it unmaps them, as it
 * would a ring of a destroyed queue; the provider unmaps first.
 */

#include <linux/module.h>
#include <linux/vmalloc.h>
#include <rdma/uverbs_ioctl.h>
#include <rdma/uverbs_std_types.h>

#include "srnic.h"

#define UVERBS_MODULE_NAME srnic
#include <rdma/uverbs_named_ioctl.h>

static unsigned int max_dm_kib = 4096;
module_param(max_dm_kib, uint, 0644);
MODULE_PARM_DESC(max_dm_kib,
		 "Device memory (ibv_alloc_dm) budget of each new device, KiB; 0 disables it (default 4096)");

/**
 * srnic_dm_init() - give a new device its device memory budget
 * @sdev: the device, not yet registered
 */
void srnic_dm_init(struct srnic_dev *sdev)
{
	u64 size = (u64)READ_ONCE(max_dm_kib) << 10;

	sdev->max_dm_size = min_t(u64, size & PAGE_MASK,
				  SRNIC_MAX_DM_SIZE);
	atomic64_set(&sdev->dm_used, 0);
}

/* Takes @size bytes of the device's budget, or fails with -ENOMEM. */
static int srnic_dm_charge(struct srnic_dev *sdev, size_t size)
{
	if (atomic64_add_return(size, &sdev->dm_used) > sdev->max_dm_size) {
		atomic64_sub(size, &sdev->dm_used);
		return -ENOMEM;
	}
	return 0;
}

/**
 * srnic_alloc_dm() - the alloc_dm verb
 * @ibdev: the device
 * @uctx: the user context the memory is mapped into
 * @attr: length (bytes) and alignment (log2) asked for
 * @attrs: carries the SRNIC_ATTR_ALLOC_DM_RESP output
 *
 * The memory is zeroed and page aligned, whatever alignment up to
 * SRNIC_DM_MAX_LOG_ALIGN was asked for. ib_core sets ibdm.length.
 *
 * Return: the DM, or ERR_PTR(-EINVAL) for a zero length, one beyond
 * max_dm_size or a larger alignment, -EOPNOTSUPP for allocation flags,
 * -ENOMEM when the device's budget or the kernel's memory is exhausted,
 * or what copying the response out returns.
 */
struct ib_dm *srnic_alloc_dm(struct ib_device *ibdev,
			     struct ib_ucontext *uctx,
			     struct ib_dm_alloc_attr *attr,
			     struct uverbs_attr_bundle *attrs)
{
	struct srnic_dev *sdev = to_srnic_dev(ibdev);
	struct srnic_alloc_dm_resp resp = {};
	struct srnic_dm *dm;
	int err;

	if (attr->flags)
		return ERR_PTR(-EOPNOTSUPP);
	if (!attr->length || attr->length > sdev->max_dm_size ||
	    attr->alignment > SRNIC_DM_MAX_LOG_ALIGN)
		return ERR_PTR(-EINVAL);

	dm = kzalloc(sizeof(*dm), GFP_KERNEL);
	if (!dm)
		return ERR_PTR(-ENOMEM);
	dm->size = PAGE_ALIGN(attr->length);
	err = srnic_dm_charge(sdev, dm->size);
	if (err)
		goto err_free_dm;

	dm->buf = vmalloc_user(dm->size);
	if (!dm->buf) {
		err = -ENOMEM;
		goto err_uncharge;
	}
	dm->mmap_entry = srnic_mmap_entry_insert(uctx, dm->buf, dm->size);
	if (IS_ERR(dm->mmap_entry)) {
		err = PTR_ERR(dm->mmap_entry);
		vfree(dm->buf);
		goto err_uncharge;
	}

	resp.mmap_offset = rdma_user_mmap_get_offset(dm->mmap_entry);
	resp.mmap_size = dm->size;
	err = uverbs_copy_to(attrs, SRNIC_ATTR_ALLOC_DM_RESP, &resp,
			     sizeof(resp));
	if (err)
		goto err_remove_entry;
	return &dm->ibdm;

err_remove_entry:
	rdma_user_mmap_entry_remove(dm->mmap_entry);	/* frees buf */
err_uncharge:
	atomic64_sub(dm->size, &sdev->dm_used);
err_free_dm:
	kfree(dm);
	return ERR_PTR(err);
}

/**
 * srnic_dealloc_dm() - the dealloc_dm verb
 * @ibdm: the DM; ib_core calls this only when no MR uses it
 * @attrs: unused
 *
 * Return: 0.
 */
int srnic_dealloc_dm(struct ib_dm *ibdm, struct uverbs_attr_bundle *attrs)
{
	struct srnic_dev *sdev = to_srnic_dev(ibdm->device);
	struct srnic_dm *dm = to_srnic_dm(ibdm);

	rdma_user_mmap_entry_remove(dm->mmap_entry);	/* frees buf */
	atomic64_sub(dm->size, &sdev->dm_used);
	kfree(dm);
	return 0;
}

/*
 * srnic's attribute of UVERBS_METHOD_DM_ALLOC: where to map the memory
 * (struct srnic_alloc_dm_resp in srnic-abi.h).
 */
ADD_UVERBS_ATTRIBUTES_SIMPLE(srnic_dm_alloc_attrs, UVERBS_OBJECT_DM,
			     UVERBS_METHOD_DM_ALLOC,
			     UVERBS_ATTR_PTR_OUT(SRNIC_ATTR_ALLOC_DM_RESP,
						 UVERBS_ATTR_TYPE(struct srnic_alloc_dm_resp),
						 UA_MANDATORY));

/*
 * SRNIC_METHOD_DM_QUERY: the mapping and length of a DM of the context, for
 * ibv_import_dm() in another verbs context on the same uverbs file.
 */
static int UVERBS_HANDLER(SRNIC_METHOD_DM_QUERY)(struct uverbs_attr_bundle *attrs)
{
	struct ib_dm *ibdm =
		uverbs_attr_get_obj(attrs, SRNIC_ATTR_QUERY_DM_HANDLE);
	struct srnic_dm *dm = to_srnic_dm(ibdm);
	struct srnic_query_dm_resp resp = {
		.mmap_offset = rdma_user_mmap_get_offset(dm->mmap_entry),
		.mmap_size = dm->size,
		.length = ibdm->length,
	};

	return uverbs_copy_to(attrs, SRNIC_ATTR_QUERY_DM_RESP, &resp,
			      sizeof(resp));
}

DECLARE_UVERBS_NAMED_METHOD(SRNIC_METHOD_DM_QUERY,
			    UVERBS_ATTR_IDR(SRNIC_ATTR_QUERY_DM_HANDLE,
					    UVERBS_OBJECT_DM,
					    UVERBS_ACCESS_READ, UA_MANDATORY),
			    UVERBS_ATTR_PTR_OUT(SRNIC_ATTR_QUERY_DM_RESP,
						UVERBS_ATTR_TYPE(struct srnic_query_dm_resp),
						UA_MANDATORY));

DECLARE_UVERBS_GLOBAL_METHODS(UVERBS_OBJECT_DM,
			      &UVERBS_METHOD(SRNIC_METHOD_DM_QUERY));

/* srnic's additions to the DM object's uverbs ioctl methods. */
const struct uapi_definition srnic_dm_uapi_defs[] = {
	UAPI_DEF_CHAIN_OBJ_TREE(UVERBS_OBJECT_DM, &srnic_dm_alloc_attrs),
	UAPI_DEF_CHAIN_OBJ_TREE_NAMED(UVERBS_OBJECT_DM),
	{},
};
