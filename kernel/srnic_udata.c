// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: checks of the driver data (udata) that follows a uverbs command.
 *
 * A provider newer than this kernel may send longer requests; a field the
 * kernel does not know must be zero, or the command fails, so that the
 * provider never believes it was honoured. Every object's create call
 * (srnic_ah.c, srnic_cq.c, srnic_mr.c, srnic_mw.c, srnic_qp.c,
 * srnic_srq.c) checks its request here.
 */

#include <rdma/ib_verbs.h>

#include "srnic.h"

/**
 * srnic_udata_check_tail() - refuse driver data this kernel does not know
 * @udata: a command's driver data
 * @known: bytes of it this kernel understands
 *
 * Driver data that follows a command must not carry fields this kernel
 * does not know: a newer provider must not believe they were honoured.
 *
 * Return: 0, or -EOPNOTSUPP if a byte past @known is not zero.
 */
int srnic_udata_check_tail(struct ib_udata *udata, size_t known)
{
	if (udata->inlen > known &&
	    !ib_is_udata_cleared(udata, known, udata->inlen - known))
		return -EOPNOTSUPP;
	return 0;
}

/**
 * srnic_udata_check_reserved_req() - check a request that is one reserved u64
 * @udata: driver data of create_cq, create_qp, create_srq or resize_cq
 *	   (struct srnic_create_cq_req, srnic_create_qp_req,
 *	   srnic_create_srq_req, srnic_resize_cq_req),
 *	   possibly shorter or longer
 *
 * Return: 0, -EINVAL for a non-zero reserved field (or a non-zero prefix of
 * it, from a request shorter than the field), -EOPNOTSUPP for unknown
 * non-zero trailing bytes, or a copy error.
 */
int srnic_udata_check_reserved_req(struct ib_udata *udata)
{
	u64 reserved = 0;
	int err;

	static_assert(sizeof(struct srnic_create_cq_req) == sizeof(reserved));
	static_assert(sizeof(struct srnic_create_qp_req) == sizeof(reserved));
	static_assert(sizeof(struct srnic_create_srq_req) == sizeof(reserved));
	static_assert(sizeof(struct srnic_resize_cq_req) == sizeof(reserved));
	if (udata->inlen < sizeof(reserved)) {
		/* A shorter request is a prefix of the reserved field. */
		if (udata->inlen &&
		    !ib_is_udata_cleared(udata, 0, udata->inlen))
			return -EINVAL;
		return 0;
	}
	err = ib_copy_from_udata(&reserved, udata, sizeof(reserved));
	if (err)
		return err;
	if (reserved)
		return -EINVAL;
	return srnic_udata_check_tail(udata, sizeof(reserved));
}
