// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: memory windows (IBTA 10.6.7), type 1 and type 2B.
 *
 * alloc_mw/dealloc_mw, the BIND_MW and LOCAL_INV work requests (executed
 * by the requester, srnic_local_op(), which also hands REG_MR and the
 * invalidation of fast-reg MR keys to srnic_mr.c), the invalidation a
 * SEND with invalidate asks of the responder, and srnic_rkey_lookup(), which every
 * responder-side rkey check goes through: it finds an MR by its own rkey
 * or through a window.
 *
 * An MW's rkey is index << 8 | key byte, its index taken cyclically from
 * [SRNIC_MW_FIRST_INDEX, SRNIC_MW_FIRST_INDEX + SRNIC_MAX_MW), so it never
 * collides with an MR key. A type 1 MW is valid from allocation and bound
 * with ibv_bind_mw(), which the provider turns into a BIND_MW WQE with the
 * next key byte; binding it with length 0 unbinds it. A type 2 MW starts
 * free, is bound by a BIND_MW WQE (the consumer picks the key byte), and
 * becomes free again by LOCAL_INV or a SEND with invalidate of its rkey.
 *
 * Lifetime: a window keeps the key of its MR and the QPN of its type 2 QP,
 * never a pointer or a reference, so neither dereg_mr nor destroy_qp has
 * to know about windows. An access through a window copies the binding
 * under the MW's lock (within RCU, which keeps the MW itself alive: see
 * srnic_dealloc_mw()), then looks the MR up by key exactly as an MR rkey
 * would be, and gets one MR reference for one access, which the caller
 * drops within one run of its QP task as with any MR. A deregistered MR's
 * key misses, so its windows give access to nothing.
 */

#include <linux/random.h>

#include "srnic.h"

/* What a window may grant. */
#define SRNIC_MW_ACCESS (IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_WRITE | \
			 IB_ACCESS_REMOTE_ATOMIC)

/**
 * srnic_mw_table_init() - prepare a new device's MW table
 * @sdev: the device, not yet registered
 */
void srnic_mw_table_init(struct srnic_dev *sdev)
{
	xa_init_flags(&sdev->mw_table, XA_FLAGS_ALLOC);
	sdev->mw_next = SRNIC_MW_FIRST_INDEX;
	sdev->mw_laps = 0;
}

/**
 * srnic_mw_table_destroy() - release the MW table of a dead device
 * @sdev: the device; ib_core deallocated all its MWs already
 */
void srnic_mw_table_destroy(struct srnic_dev *sdev)
{
	WARN_ON(!xa_empty(&sdev->mw_table));
	xa_destroy(&sdev->mw_table);
}

/**
 * srnic_alloc_mw() - the alloc_mw verb
 * @ibmw: the MW ib_core allocated; ibmw->type is IB_MW_TYPE_1 or _2
 *	  (uverbs refuses other types with EINVAL)
 * @udata: no srnic data in either direction
 *
 * Gives the MW its index and first rkey (key byte from the lap count and
 * the device's seed, as MR keys) and publishes it. A type 1 MW is valid
 * (bound to nothing), a type 2 MW free.
 *
 * Return: 0, -EINVAL for another type, -ENOMEM when the device has
 * SRNIC_MAX_MW MWs or no memory.
 */
int srnic_alloc_mw(struct ib_mw *ibmw, struct ib_udata *udata)
{
	struct srnic_dev *sdev = to_srnic_dev(ibmw->device);
	struct srnic_mw *mw = to_srnic_mw(ibmw);
	u32 index;
	void *old;
	int err;

	if (ibmw->type != IB_MW_TYPE_1 && ibmw->type != IB_MW_TYPE_2)
		return -EINVAL;
	if (udata) {
		err = srnic_udata_check_tail(udata, 0);
		if (err)
			return err;
	}
	spin_lock_init(&mw->lock);
	mw->state = ibmw->type == IB_MW_TYPE_1 ? SRNIC_MW_VALID : SRNIC_MW_FREE;

	xa_lock(&sdev->mw_table);
	err = __xa_alloc_cyclic(&sdev->mw_table, &index, NULL,
				XA_LIMIT(SRNIC_MW_FIRST_INDEX,
					 SRNIC_MW_FIRST_INDEX + SRNIC_MAX_MW - 1),
				&sdev->mw_next, GFP_KERNEL);
	if (err < 0)
		goto out_unlock;
	if (err == 1)
		sdev->mw_laps++;
	mw->index = index;
	mw->rkey = index << 8 | (u8)(sdev->mw_laps + sdev->mr_key_seed);
	ibmw->rkey = mw->rkey;
	/* Replaces the reservation: allocates nothing, publishes mw. */
	old = __xa_store(&sdev->mw_table, index, mw, GFP_KERNEL);
	err = xa_err(old);
	if (err)
		__xa_erase(&sdev->mw_table, index);
out_unlock:
	xa_unlock(&sdev->mw_table);
	return err == -EBUSY ? -ENOMEM : err;
}

/**
 * srnic_dealloc_mw() - the dealloc_mw verb
 * @ibmw: the MW, bound or not
 *
 * Removes the MW from its table and waits for the lookups that may still
 * read it (under RCU): ib_core frees it as soon as this returns. A bound
 * window needs no unbinding: it holds no reference.
 *
 * Return: 0.
 */
int srnic_dealloc_mw(struct ib_mw *ibmw)
{
	struct srnic_dev *sdev = to_srnic_dev(ibmw->device);
	struct srnic_mw *mw = to_srnic_mw(ibmw);
	unsigned long flags;

	spin_lock_irqsave(&mw->lock, flags);
	mw->state = SRNIC_MW_FREE;
	mw->length = 0;
	spin_unlock_irqrestore(&mw->lock, flags);
	xa_erase(&sdev->mw_table, mw->index);
	synchronize_rcu();
	return 0;
}

/*
 * A copy of an MW's binding, taken under its lock so that one access sees
 * one binding.
 */
struct srnic_mw_binding {
	enum ib_mw_type type;
	enum srnic_mw_state state;
	struct srnic_pd *pd;
	u32 mr_key;
	u64 addr;
	u64 length;
	int access;
	u32 qpn;
};

/* The binding of the MW whose rkey is @rkey; false if there is none. */
static bool srnic_mw_get_binding(struct srnic_dev *sdev, u32 rkey,
				 struct srnic_mw_binding *b)
{
	struct srnic_mw *mw;
	unsigned long flags;
	bool found = false;

	rcu_read_lock();
	mw = xa_load(&sdev->mw_table, rkey >> 8);
	if (mw) {
		spin_lock_irqsave(&mw->lock, flags);
		if (mw->rkey == rkey) {
			*b = (struct srnic_mw_binding) {
				.type = mw->ibmw.type,
				.state = mw->state,
				.pd = to_srnic_pd(mw->ibmw.pd),
				.mr_key = mw->mr_key,
				.addr = mw->addr,
				.length = mw->length,
				.access = mw->access,
				.qpn = mw->qpn,
			};
			found = true;
		}
		spin_unlock_irqrestore(&mw->lock, flags);
	}
	rcu_read_unlock();
	return found;
}

/* Overflow-safe: is [iova, iova + len) inside the window? */
static bool srnic_mw_covers(const struct srnic_mw_binding *b, u64 iova,
			    u64 len)
{
	return iova >= b->addr && len <= b->length &&
	       iova - b->addr <= b->length - len;
}

/**
 * srnic_rkey_lookup() - the MR a remote access of @qp may use, by R_Key
 * @qp: the responder QP (wire or local delivery), from its task
 * @pd: the PD the access is checked against: @qp's, or for an XRC_TGT QP
 *	the XRC SRQ's (srnic_resp_pd())
 * @rkey: R_Key of the request
 * @required_access: IB_ACCESS_REMOTE_READ, _WRITE or _ATOMIC
 * @iova: first address accessed
 * @length: bytes accessed
 *
 * An MR's own rkey is checked by srnic_mr_lookup() against @pd.
 * A window's rkey must name a bound window (type 2: bound through @qp) of
 * @pd that grants @required_access and covers the range; then
 * its MR is looked up by key, its PD and bounds checked again (the MR may
 * have gone, or another MR taken its index: the key byte then differs).
 *
 * Return: a referenced MR (release with srnic_mr_put()), or an ERR_PTR as
 * srnic_mr_lookup() returns them (-ENOENT for an unknown, stale, free or
 * unbound window).
 */
struct srnic_mr *srnic_rkey_lookup(struct srnic_qp *qp, struct srnic_pd *pd,
				   u32 rkey, int required_access, u64 iova,
				   u64 length)
{
	struct srnic_dev *sdev = to_srnic_dev(qp->ibqp.device);
	struct srnic_mw_binding b;

	if (!srnic_key_is_mw(rkey))
		return srnic_mr_lookup(sdev, rkey, SRNIC_RKEY, pd,
				       required_access, iova, length);

	if (!srnic_mw_get_binding(sdev, rkey, &b) ||
	    b.state != SRNIC_MW_VALID || !b.length)
		return ERR_PTR(-ENOENT);
	if (b.pd != pd ||
	    (b.type == IB_MW_TYPE_2 && b.qpn != qp->ibqp.qp_num))
		return ERR_PTR(-EPERM);
	if ((b.access & required_access) != required_access)
		return ERR_PTR(-EACCES);
	if (!srnic_mw_covers(&b, iova, length))
		return ERR_PTR(-ERANGE);
	/* The MR's own rights were checked at bind time. */
	return srnic_mr_lookup(sdev, b.mr_key, SRNIC_LKEY, b.pd, 0, iova,
			       length);
}

/*
 * The checks of a bind (IBTA 10.6.7.2, C10-72..75, as rxe_check_bind_mw()
 * makes them) that need the MR: bind access, local write under a writable
 * window, and the window inside the MR (srnic_mr_lookup() checked it).
 */
static bool srnic_mw_mr_bindable(const struct srnic_mr *mr, int access)
{
	if (!(mr->access & IB_ACCESS_MW_BIND))
		return false;
	if ((access & (IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_ATOMIC)) &&
	    !(mr->access & IB_ACCESS_LOCAL_WRITE))
		return false;
	return true;
}

/*
 * Execute a BIND_MW WQE of @qp. Returns IB_WC_SUCCESS or
 * IB_WC_MW_BIND_ERR (rxe's status for every failed bind).
 */
static enum ib_wc_status srnic_mw_bind(struct srnic_qp *qp,
				       const struct srnic_send_wqe *wqe)
{
	struct srnic_dev *sdev = to_srnic_dev(qp->ibqp.device);
	struct srnic_pd *pd = to_srnic_pd(qp->ibqp.pd);
	u32 mw_rkey = wqe->bind.mw_rkey;
	u64 addr = wqe->bind.addr;
	u64 length = wqe->bind.length;
	int access = wqe->bind.access;
	struct srnic_mr *mr = NULL;
	enum ib_wc_status status = IB_WC_MW_BIND_ERR;
	struct srnic_mw *mw;
	unsigned long flags;

	/* Zero-based windows are not implemented; unknown bits are bad. */
	if (!srnic_key_is_mw(mw_rkey) ||
	    (access & ~(SRNIC_MW_ACCESS | IB_ACCESS_LOCAL_WRITE)))
		return IB_WC_MW_BIND_ERR;
	if (length) {
		mr = srnic_mr_lookup(sdev, wqe->bind.mr_lkey, SRNIC_LKEY, pd,
				     0, addr, length);
		if (IS_ERR(mr))
			return IB_WC_MW_BIND_ERR;
		if (!srnic_mw_mr_bindable(mr, access))
			goto out_put;
	}

	rcu_read_lock();
	mw = xa_load(&sdev->mw_table, mw_rkey >> 8);
	if (!mw)
		goto out_unlock_rcu;
	spin_lock_irqsave(&mw->lock, flags);
	/*
	 * The WQE names the MW by ibv_mw.rkey, which ibv_bind_mw() keeps
	 * current for a type 1 MW but nothing updates for a type 2 one (the
	 * consumer tracks the keys it binds with): a type 2 MW is named by
	 * its index alone.
	 */
	if ((mw->ibmw.type == IB_MW_TYPE_1 && mw->rkey != mw_rkey) ||
	    to_srnic_pd(mw->ibmw.pd) != pd)
		goto out_unlock;
	if (mw->ibmw.type == IB_MW_TYPE_2) {
		/* o10-37.2.30: bound once; o10-37.2.40: to something. */
		if (mw->state != SRNIC_MW_FREE || !length)
			goto out_unlock;
		mw->qpn = qp->ibqp.qp_num;
	} else if (mw->state != SRNIC_MW_VALID) {
		goto out_unlock;
	}
	mw->rkey = (mw->rkey & ~0xffU) | (wqe->bind.new_rkey & 0xff);
	mw->ibmw.rkey = mw->rkey;
	mw->mr_key = mr ? mr->key : 0;
	mw->addr = addr;
	mw->length = length;
	mw->access = access & SRNIC_MW_ACCESS;
	mw->state = SRNIC_MW_VALID;
	status = IB_WC_SUCCESS;
out_unlock:
	spin_unlock_irqrestore(&mw->lock, flags);
out_unlock_rcu:
	rcu_read_unlock();
out_put:
	if (mr)
		srnic_mr_put(mr);
	return status;
}

/**
 * srnic_mw_invalidate() - invalidate a type 2 MW by its rkey
 * @qp: the QP executing a LOCAL_INV, or receiving a SEND with invalidate
 * @rkey: the rkey to invalidate
 * @remote: a SEND with invalidate: the MW must have been bound through
 *	    @qp (a type 2B window serves its QP alone)
 *
 * The window must be a bound type 2 MW of @qp's PD (o10-37.2.26: a type 1
 * MW is never invalidated).
 *
 * Return: 0, or -EINVAL.
 */
static int srnic_mw_invalidate(struct srnic_qp *qp, u32 rkey, bool remote)
{
	struct srnic_dev *sdev = to_srnic_dev(qp->ibqp.device);
	struct srnic_mw *mw;
	unsigned long flags;
	int err = -EINVAL;

	if (!srnic_key_is_mw(rkey))
		return -EINVAL;
	rcu_read_lock();
	mw = xa_load(&sdev->mw_table, rkey >> 8);
	if (mw) {
		spin_lock_irqsave(&mw->lock, flags);
		if (mw->rkey == rkey && mw->ibmw.type == IB_MW_TYPE_2 &&
		    mw->state == SRNIC_MW_VALID &&
		    to_srnic_pd(mw->ibmw.pd) == to_srnic_pd(qp->ibqp.pd) &&
		    (!remote || mw->qpn == qp->ibqp.qp_num)) {
			mw->state = SRNIC_MW_FREE;
			mw->mr_key = 0;
			mw->addr = 0;
			mw->length = 0;
			mw->access = 0;
			err = 0;
		}
		spin_unlock_irqrestore(&mw->lock, flags);
	}
	rcu_read_unlock();
	return err;
}

/**
 * srnic_invalidate_key() - invalidate a memory window or a fast-reg MR
 * @qp: the QP executing a LOCAL_INV, or receiving a SEND with invalidate
 * @key: an MW's rkey or a fast-reg MR's key (srnic_mr_invalidate())
 * @remote: a SEND with invalidate
 *
 * Return: 0, or -EINVAL when @key may not be invalidated through @qp.
 */
int srnic_invalidate_key(struct srnic_qp *qp, u32 key, bool remote)
{
	if (srnic_key_is_mw(key))
		return srnic_mw_invalidate(qp, key, remote);
	return srnic_mr_invalidate(qp, key);
}

/**
 * srnic_local_op() - execute a BIND_MW, LOCAL_INV or REG_MR WQE
 * @qp: the requester, from its task
 * @wqe: a snapshot of the WQE (srnic_wr_is_local() opcode)
 *
 * Return: its completion status: IB_WC_SUCCESS, IB_WC_MW_BIND_ERR for a
 * bind that may not be made, IB_WC_LOC_QP_OP_ERR for an invalidation or
 * a fast registration that may not (rxe's statuses).
 */
enum ib_wc_status srnic_local_op(struct srnic_qp *qp,
				 const struct srnic_send_wqe *wqe)
{
	int err;

	if (wqe->opcode == IB_WR_BIND_MW)
		return srnic_mw_bind(qp, wqe);
	if (wqe->opcode == IB_WR_REG_MR)
		err = srnic_mr_fast_reg(qp, wqe);
	else
		err = srnic_invalidate_key(qp, wqe->invalidate_rkey, false);
	return err ? IB_WC_LOC_QP_OP_ERR : IB_WC_SUCCESS;
}
