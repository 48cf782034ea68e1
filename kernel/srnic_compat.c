// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: adapters from the ib_device_ops prototypes of newer kernels to
 * srnic's verbs, and the verbs only newer kernels have (see
 * srnic_compat.h). Empty where the kernel has the 6.1 prototypes.
 */

#include "srnic.h"

#ifdef SRNIC_HAVE_CREATE_CQ_ATTRS
/* 6.11: the uverbs attributes, NULL for a kernel CQ; the udata is in them. */
int srnic_compat_create_cq(struct ib_cq *ibcq,
			   const struct ib_cq_init_attr *attr,
			   struct uverbs_attr_bundle *attrs)
{
	return srnic_create_cq(ibcq, attr, attrs ? &attrs->driver_udata : NULL);
}
#endif

#ifdef SRNIC_HAVE_RESIZE_USER_CQ
/* 7.x: user CQs only, and an unsigned size. */
int srnic_compat_resize_cq(struct ib_cq *ibcq, unsigned int cqe,
			   struct ib_udata *udata)
{
	if (cqe > INT_MAX)
		return -EINVAL;
	return srnic_resize_cq(ibcq, cqe, udata);
}
#endif

#ifdef SRNIC_HAVE_REG_USER_MR_DMAH
/* 6.17: a DMA handle (TPH steering hints); srnic has no DMA to steer. */
struct ib_mr *srnic_compat_reg_user_mr(struct ib_pd *ibpd, u64 start,
				       u64 length, u64 virt_addr, int access,
				       struct ib_dmah *dmah,
				       struct ib_udata *udata)
{
	if (dmah)
		return ERR_PTR(-EOPNOTSUPP);
	return srnic_reg_user_mr(ibpd, start, length, virt_addr, access, udata);
}
#endif

#if defined(SRNIC_HAVE_REG_DMABUF_MR_DMAH)
/* 6.17: a DMA handle, as for reg_user_mr. */
struct ib_mr *srnic_compat_reg_dmabuf_mr(struct ib_pd *ibpd, u64 offset,
					 u64 length, u64 virt_addr, int fd,
					 int access, struct ib_dmah *dmah,
					 struct uverbs_attr_bundle *attrs)
{
	if (dmah)
		return ERR_PTR(-EOPNOTSUPP);
	return srnic_reg_dmabuf_mr(ibpd, offset, length, virt_addr, fd, access,
				   attrs ? &attrs->driver_udata : NULL);
}
#elif defined(SRNIC_HAVE_REG_DMABUF_MR_ATTRS)
/* 6.10: the udata comes in the uverbs attribute bundle. */
struct ib_mr *srnic_compat_reg_dmabuf_mr(struct ib_pd *ibpd, u64 offset,
					 u64 length, u64 virt_addr, int fd,
					 int access,
					 struct uverbs_attr_bundle *attrs)
{
	return srnic_reg_dmabuf_mr(ibpd, offset, length, virt_addr, fd, access,
				   attrs ? &attrs->driver_udata : NULL);
}
#endif

#ifdef SRNIC_HAVE_QUERY_PORT_SPEED
/*
 * 7.x: the port's rate in 100 Mb/s units (struct ib_port_speed_info's), from
 * the speed and width query_port reports for the netdev.
 */
int srnic_query_port_speed(struct ib_device *ibdev, u32 port_num, u64 *speed)
{
	struct ib_port_speed_info info;
	struct ib_port_attr attr;
	int err;

	err = ib_query_port(ibdev, port_num, &attr);
	if (err)
		return err;
	err = ib_port_attr_to_speed_info(&attr, &info);
	if (err)
		return err;
	*speed = info.rate;
	return 0;
}
#endif

#ifdef SRNIC_HAVE_COUNTER_BIND_QP_PORT
/* 6.15: the port, which srnic has one of. */
int srnic_compat_counter_bind_qp(struct rdma_counter *counter,
				 struct ib_qp *ibqp, u32 port)
{
	return srnic_counter_bind_qp(counter, ibqp);
}

int srnic_compat_counter_unbind_qp(struct ib_qp *ibqp, u32 port)
{
	return srnic_counter_unbind_qp(ibqp);
}
#endif

#ifdef SRNIC_HAVE_COUNTER_INIT
/* 6.15: nothing of srnic's lives in the counter itself. */
void srnic_counter_init(struct rdma_counter *counter)
{
}
#endif
