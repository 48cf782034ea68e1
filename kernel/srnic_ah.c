// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: address handles.
 *
 * An AH is a RoCE v2 address vector: a GRH whose source GID ib_core has
 * resolved (ibah.sgid_attr, with its reference) and, for user AHs, the
 * destination MAC ib_core resolved too. srnic keeps a copy of the vector
 * and numbers the AH in a per-device table, so that a UD send WQE in a
 * user ring can name it (ud.ah_handle); whoever uses the number must check
 * that the AH is in the QP's PD.
 *
 * Kernel ULPs may create and destroy AHs in atomic context (the
 * RDMA_CREATE_AH_SLEEPABLE and RDMA_DESTROY_AH_SLEEPABLE flags clear), so
 * the table's lock disables interrupts and nothing here sleeps then.
 */

#include <rdma/ib_cache.h>
#include <rdma/ib_verbs.h>

#include "srnic.h"

/**
 * srnic_ah_table_init() - prepare a new device's AH table
 * @sdev: the device, not yet registered
 */
void srnic_ah_table_init(struct srnic_dev *sdev)
{
	xa_init_flags(&sdev->ah_table, XA_FLAGS_ALLOC1 | XA_FLAGS_LOCK_IRQ);
	sdev->ah_next = 1;
}

/**
 * srnic_ah_table_destroy() - release the AH table of a dead device
 * @sdev: the device; ib_core destroyed all its AHs already
 */
void srnic_ah_table_destroy(struct srnic_dev *sdev)
{
	WARN_ON(!xa_empty(&sdev->ah_table));
	xa_destroy(&sdev->ah_table);
}

/* RoCE v2 only: a GRH with a resolved RoCE v2 source GID on srnic's port. */
static int srnic_ah_check_attr(const struct ib_ah *ibah,
			       const struct rdma_ah_attr *attr)
{
	const struct ib_gid_attr *sgid_attr = ibah->sgid_attr;

	if (attr->type != RDMA_AH_ATTR_TYPE_ROCE ||
	    !(rdma_ah_get_ah_flags(attr) & IB_AH_GRH) ||
	    rdma_ah_get_port_num(attr) != SRNIC_PORT)
		return -EINVAL;
	if (!sgid_attr || sgid_attr->gid_type != IB_GID_TYPE_ROCE_UDP_ENCAP)
		return -EINVAL;
	return 0;
}

static int srnic_ah_insert(struct srnic_dev *sdev, struct srnic_ah *ah,
			   bool sleepable)
{
	struct xa_limit limit = XA_LIMIT(1, SRNIC_MAX_AH);
	unsigned long flags;
	int err;

	if (sleepable) {
		err = xa_alloc_cyclic_irq(&sdev->ah_table, &ah->ah_num, ah,
					  limit, &sdev->ah_next, GFP_KERNEL);
	} else {
		xa_lock_irqsave(&sdev->ah_table, flags);
		err = __xa_alloc_cyclic(&sdev->ah_table, &ah->ah_num, ah,
					limit, &sdev->ah_next, GFP_ATOMIC);
		xa_unlock_irqrestore(&sdev->ah_table, flags);
	}
	/* 1 means the cyclic allocator wrapped: a success. */
	if (err == -EBUSY)
		return -ENOMEM;
	return err < 0 ? err : 0;
}

static void srnic_ah_remove(struct srnic_dev *sdev, struct srnic_ah *ah)
{
	unsigned long flags;

	xa_lock_irqsave(&sdev->ah_table, flags);
	__xa_erase(&sdev->ah_table, ah->ah_num);
	xa_unlock_irqrestore(&sdev->ah_table, flags);
}

/**
 * srnic_create_ah() - create_ah and create_user_ah
 * @ibah: the AH ib_core allocated, with its sgid_attr reference taken
 * @init: the address vector (type ROCE, GRH resolved) and flags
 * @udata: the provider's data (none in, struct srnic_create_ah_resp out),
 *	   or NULL for a kernel AH
 *
 * Return: 0, -EINVAL for an address vector srnic cannot use, -EOPNOTSUPP
 * for unknown request data, -ENOMEM, or a copy error.
 */
int srnic_create_ah(struct ib_ah *ibah, struct rdma_ah_init_attr *init,
		    struct ib_udata *udata)
{
	struct srnic_dev *sdev = to_srnic_dev(ibah->device);
	struct srnic_ah *ah = to_srnic_ah(ibah);
	struct srnic_create_ah_resp resp = {};
	int err;

	if (udata) {
		err = srnic_udata_check_tail(udata, 0);
		if (err)
			return err;
	}
	err = srnic_ah_check_attr(ibah, init->ah_attr);
	if (err)
		return err;

	ah->attr = *init->ah_attr;
	/* The reference is ibah->sgid_attr's, which ib_core drops. */
	ah->attr.grh.sgid_attr = NULL;

	err = srnic_ah_insert(sdev, ah,
			      init->flags & RDMA_CREATE_AH_SLEEPABLE);
	if (err)
		return err;

	if (udata) {
		resp.ah_num = ah->ah_num;
		err = ib_copy_to_udata(udata, &resp,
				       min_t(size_t, udata->outlen,
					     sizeof(resp)));
		if (err) {
			srnic_ah_remove(sdev, ah);
			return err;
		}
	}
	return 0;
}

/**
 * srnic_query_ah() - the address vector an AH was created with
 * @ibah: the AH
 * @attr: filled in; its sgid_attr is NULL (rdma_query_ah() takes no
 *	  reference)
 *
 * Return: 0.
 */
int srnic_query_ah(struct ib_ah *ibah, struct rdma_ah_attr *attr)
{
	*attr = to_srnic_ah(ibah)->attr;
	return 0;
}

/**
 * srnic_destroy_ah() - destroy_ah, in any context
 * @ibah: the AH; ib_core frees it and drops its sgid_attr reference
 * @flags: RDMA_DESTROY_AH_SLEEPABLE or 0
 *
 * When sleepable, the PD's UD QPs first get a bounded moment to send what
 * they posted (srnic_ud_drain_pd()): those WQEs may name this AH.
 *
 * Return: 0.
 */
int srnic_destroy_ah(struct ib_ah *ibah, u32 flags)
{
	if (flags & RDMA_DESTROY_AH_SLEEPABLE)
		srnic_ud_drain_pd(to_srnic_dev(ibah->device), ibah->pd);
	srnic_ah_remove(to_srnic_dev(ibah->device), to_srnic_ah(ibah));
	return 0;
}
