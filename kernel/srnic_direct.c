// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: direct windows, the kernel's half of the provider's direct path.
 *
 * An RDMA WRITE between two QPs of one device needs no engine: the
 * provider of the posting process can copy the payload into the
 * destination MR itself, if the destination's pages are mapped into it.
 * A direct window is that mapping: one MR of the destination (found by
 * the R_Key the poster presents) mapped into the poster's process, for
 * one posting QP. The provider asks for it with
 * SRNIC_METHOD_QP_DIRECT_WINDOW on first use of an R_Key, maps it with
 * mmap() and from then on executes a WRITE to that R_Key with one copy and
 * no syscall (userspace/direct_path.h). Everything else (READ, atomics,
 * SEND, errors) still goes through the engine.
 *
 * A window is granted only where the engine would execute the WRITE: an
 * RC poster in RTS served by local delivery from a destination QP of the
 * same device that is ready to respond and allows remote writes, and an
 * R_Key of a pinned user MR of the destination's PD that grants
 * IB_ACCESS_REMOTE_WRITE. Because a mapping also allows reading, the
 * poster must moreover be allowed to read the MR owner's memory by the
 * test of ptrace's first rule (same user and group ids, a dumpable owner,
 * or CAP_SYS_PTRACE over the owner's namespace), the rule
 * process_vm_writev() applies.
 *
 * Any change that could make the engine refuse such a WRITE revokes the
 * windows it concerns: the poster or destination changing state or
 * attributes, being destroyed, the MR being deregistered or reregistered.
 * Revoking bumps the poster's srnic_queue_ctrl.direct_gen, which the
 * provider reads before and after each copy (a copy that saw it change is
 * done again by the engine), then zaps the mapping. The zap is immediate
 * for a deregistered MR (dereg_mr waits for it before it unpins the pages)
 * and a destroyed QP, deferred to a work item for a state change (which
 * may happen in the engine). A revoked window's pages fault in as one
 * shared sink page, so a copy racing the revocation lands there, never in
 * a page that has gone back to its owner.
 */

#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mount.h>
#include <linux/pseudo_fs.h>
#include <linux/sched/coredump.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <rdma/ib_umem.h>
#include <rdma/uverbs_ioctl.h>
#include <rdma/uverbs_std_types.h>

#include "srnic.h"

#define UVERBS_MODULE_NAME srnic
#include <rdma/uverbs_named_ioctl.h>

static bool direct_path = true;
module_param(direct_path, bool, 0644);
MODULE_PARM_DESC(direct_path,
		 "grant direct windows: the provider copies RDMA WRITEs between QPs of one device itself (default: on)");

static bool direct_send = true;
module_param(direct_send, bool, 0644);
MODULE_PARM_DESC(direct_send,
		 "grant direct loans (with direct_path): the provider delivers SENDs between QPs of one device itself (default: on)");

/* Windows one posting QP may hold; the provider falls back beyond. */
#define SRNIC_DIRECT_MAX_WINDOWS_PER_QP 16

/*
 * Each window is a file of its own on this pseudo filesystem, so that
 * unmap_mapping_range() of its inode zaps every mapping of it, in any
 * process, without tracking the VMAs.
 */
#define SRNIC_DIRECT_FS_MAGIC 0x73726e64	/* "srnd" */
static struct vfsmount *srnic_direct_mnt;
/* What a revoked window's pages map to. */
static struct page *srnic_direct_sink;

/**
 * struct srnic_direct_window - one MR of a destination mapped for a poster
 * @ref: the device list (until revoked), @file and the mmap entry
 * @link: in srnic_dev.direct_windows, then on a list of windows to revoke
 * @sdev: the device
 * @poster: the posting QP (no reference: it revokes its windows when it
 *	    is destroyed, before it is freed)
 * @dest: the destination QP (likewise)
 * @mr: the MR, referenced until the window is revoked; NULL for a loan
 * @pages: the pages mapped: @mr's, or a loan's own array of the
 *	   destination's RQ ring pages followed by its receive CQ's
 * @own_pages: @pages is the window's own array (a loan's), freed with it
 * @loan_cq: a loan: the destination's receive CQ; NULL for an MR window
 * @loan_id: a loan: its id (srnic_queue_ctrl.loan_live)
 * @npages: pages of the mapping
 * @pgoff: the page offset the mapping starts at (its mmap offset)
 * @file: the window's file; the window holds a reference until revoked,
 *	  each mapping of it another
 * @entry: how the poster's process finds it (mmap offset)
 * @rwsem: @revoked against the fault handler
 * @revoked: pages fault in as the sink page; @mr is gone
 */
struct srnic_direct_window {
	struct kref ref;
	struct list_head link;
	struct srnic_dev *sdev;
	struct srnic_qp *poster;
	struct srnic_qp *dest;
	struct srnic_mr *mr;
	struct page **pages;
	bool own_pages;
	struct srnic_cq *loan_cq;
	u32 loan_id;
	unsigned long npages;
	unsigned long pgoff;
	struct file *file;
	struct rdma_user_mmap_entry *entry;
	struct rw_semaphore rwsem;
	bool revoked;
};

static void srnic_direct_window_release(struct kref *ref)
{
	struct srnic_direct_window *w =
		container_of(ref, struct srnic_direct_window, ref);

	if (w->own_pages)
		kvfree(w->pages);
	kfree(w);
}

static void srnic_direct_window_put(struct srnic_direct_window *w)
{
	kref_put(&w->ref, srnic_direct_window_release);
}

/* ---- The mapping -------------------------------------------------------- */

static vm_fault_t srnic_direct_fault(struct vm_fault *vmf)
{
	struct srnic_direct_window *w = vmf->vma->vm_private_data;
	unsigned long i = vmf->pgoff - w->pgoff;
	struct page *page = srnic_direct_sink;
	vm_fault_t ret;

	down_read(&w->rwsem);
	if (!w->revoked && i < w->npages)
		page = w->pages[i];
	ret = vmf_insert_pfn(vmf->vma, vmf->address, page_to_pfn(page));
	up_read(&w->rwsem);
	return ret;
}

static const struct vm_operations_struct srnic_direct_vm_ops = {
	.fault = srnic_direct_fault,
};

static int srnic_direct_file_release(struct inode *inode, struct file *file)
{
	srnic_direct_window_put(file->private_data);
	return 0;
}

static const struct file_operations srnic_direct_fops = {
	.owner = THIS_MODULE,
	.release = srnic_direct_file_release,
};

/**
 * srnic_direct_mmap() - map a window (from srnic_mmap())
 * @w: the window of the mmap entry
 * @vma: the whole window, shared
 *
 * The VMA becomes a mapping of the window's own file; pages fault in one
 * by one.
 *
 * Return: 0, -EINVAL for a partial or private mapping, -EPERM for an
 * executable one, -ENOENT for a revoked window.
 */
int srnic_direct_mmap(struct srnic_direct_window *w, struct vm_area_struct *vma)
{
	int err = 0;

	if (!(vma->vm_flags & VM_SHARED) || vma_pages(vma) != w->npages ||
	    vma->vm_pgoff != w->pgoff)
		return -EINVAL;
	/* Another process's data: never code. */
	if (vma->vm_flags & VM_EXEC)
		return -EPERM;
	down_read(&w->rwsem);
	if (w->revoked) {
		err = -ENOENT;
	} else {
		vm_flags_set(vma, VM_PFNMAP | VM_DONTEXPAND | VM_DONTDUMP |
			     VM_DONTCOPY);
		vm_flags_clear(vma, VM_MAYEXEC);
		vma->vm_ops = &srnic_direct_vm_ops;
		vma->vm_private_data = w;
		vma_set_file(vma, w->file);
	}
	up_read(&w->rwsem);
	return err;
}

/* The mmap entry's last reference is gone (from srnic_mmap_free()). */
void srnic_direct_entry_free(struct srnic_direct_window *w)
{
	srnic_direct_window_put(w);
}

/* ---- Revocation ----------------------------------------------------------- */

/* The provider's copies through the poster's windows stop trusting them. */
static void srnic_direct_bump_gen(struct srnic_qp *poster)
{
	struct srnic_queue_ctrl *ctrl = poster->sq.ring.ctrl;

	WRITE_ONCE(ctrl->direct_gen, READ_ONCE(ctrl->direct_gen) + 1);
	/* Before any zap: a copy that did not see the bump came first. */
	smp_mb();
}

/*
 * End loan @w: its poster stops delivering (loan_live), the destination's
 * engine work stops asking for it. Under direct_lock.
 */
static void srnic_direct_end_loan(struct srnic_direct_window *w)
{
	WRITE_ONCE(w->dest->direct_loaned, false);
	WRITE_ONCE(w->poster->sq.ring.ctrl->loan_live, 0);
	srnic_direct_bump_gen(w->poster);
}

/*
 * Move the windows of @qp (as poster or destination), of @mr or lending
 * @cq (each given filter must match) to @dead (a list of the caller's, or
 * the device's direct_dead), bumping their posters' generation; loans go
 * to @loans instead, ended, or stay when @loans is NULL. Any context; the
 * caller of one that may move loans holds direct_mutex. Returns whether it
 * moved any.
 */
static bool srnic_direct_unlink(struct srnic_dev *sdev,
				const struct srnic_qp *qp,
				const struct srnic_mr *mr,
				const struct srnic_cq *cq,
				struct list_head *dead,
				struct list_head *loans)
{
	struct srnic_direct_window *w, *tmp;
	unsigned long flags;
	bool moved = false;

	spin_lock_irqsave(&sdev->direct_lock, flags);
	list_for_each_entry_safe(w, tmp, &sdev->direct_windows, link) {
		if ((qp && w->poster != qp && w->dest != qp) ||
		    (mr && w->mr != mr) || (cq && w->loan_cq != cq))
			continue;
		if (w->loan_cq) {
			if (!loans)
				continue;
			srnic_direct_end_loan(w);
			list_move_tail(&w->link, loans);
		} else {
			srnic_direct_bump_gen(w->poster);
			w->poster->direct_windows--;
			list_move_tail(&w->link, dead);
		}
		moved = true;
	}
	spin_unlock_irqrestore(&sdev->direct_lock, flags);
	return moved;
}

/*
 * Take over the receive WQEs the poster of loan @w took and their CQEs:
 * *@end is the CQ's producer index after them. The poster is quiescent:
 * the loan ended and its mapping is zapped, or it has posted to the
 * engine the work the caller is about to do. Under direct_mutex.
 */
static void srnic_direct_loan_adopt(struct srnic_direct_window *w, u32 *end)
{
	struct srnic_qp *dest = w->dest;
	struct srnic_wq *rq = &dest->rq;
	unsigned long flags;
	u32 taken;

	lockdep_assert_held(&w->sdev->direct_mutex);
	spin_lock_irqsave(&rq->lock, flags);
	/*
	 * The consumer index the poster published counts what it took (with
	 * the CQE bodies written: pairs with its release). An untrusted
	 * value: beyond the raw producer index, or with CQEs that do not fit
	 * the CQ, nothing is taken.
	 */
	taken = smp_load_acquire(&rq->ring.ctrl->consumer) - rq->consumer;
	if (taken > READ_ONCE(rq->ring.ctrl->producer) - rq->consumer)
		taken = 0;
	if (!srnic_cq_adopt_lent(w->loan_cq, taken, end))
		taken = 0;
	rq->consumer += taken;
	/* As srnic_wq_pop_fit(); also puts a bogus index right. */
	smp_store_release(&rq->ring.ctrl->consumer, rq->consumer);
	spin_unlock_irqrestore(&rq->lock, flags);
}

/*
 * Revoke the unlinked windows on @dead. A loan's committed work is taken
 * over once its mapping is gone, then its poster told where it ended.
 * Sleeps; direct_mutex is held if there are loans.
 */
static void srnic_direct_kill(struct list_head *dead)
{
	struct srnic_direct_window *w, *tmp;
	u32 end;

	list_for_each_entry_safe(w, tmp, dead, link) {
		list_del(&w->link);
		down_write(&w->rwsem);
		w->revoked = true;
		up_write(&w->rwsem);
		/* Every process's pages of it; later faults get the sink. */
		unmap_mapping_range(w->file->f_mapping, 0, 0, 1);
		if (w->loan_cq) {
			struct srnic_queue_ctrl *ctrl = w->poster->sq.ring.ctrl;

			srnic_direct_loan_adopt(w, &end);
			WRITE_ONCE(ctrl->loan_end, end);
			/* Pairs with the provider's acquire of loan_done. */
			smp_store_release(&ctrl->loan_done, w->loan_id);
		}
		rdma_user_mmap_entry_remove(w->entry);
		if (w->mr)
			srnic_mr_put(w->mr);
		w->mr = NULL;
		fput(w->file);
		srnic_direct_window_put(w);
	}
}

static void srnic_direct_reap(struct work_struct *work)
{
	struct srnic_dev *sdev = container_of(work, struct srnic_dev,
					      direct_reap);
	unsigned long flags;
	LIST_HEAD(dead);

	spin_lock_irqsave(&sdev->direct_lock, flags);
	list_splice_init(&sdev->direct_dead, &dead);
	spin_unlock_irqrestore(&sdev->direct_lock, flags);
	srnic_direct_kill(&dead);
}

/**
 * srnic_direct_qp_change_begin() - @qp is about to change state or
 *	attributes
 * @qp: a user QP, as poster or destination
 *
 * Its windows stop serving at once (the generation bump) and are zapped by
 * a work item; its loans end before this returns, so the caller may touch
 * the destination's RQ and CQ (a flush); and no grant is made until
 * srnic_direct_qp_change_end() (direct_mutex stays held), so none is made
 * on the state or attributes being left. Sleeps; before state_lock.
 */
void srnic_direct_qp_change_begin(struct srnic_qp *qp)
{
	struct srnic_dev *sdev = to_srnic_dev(qp->ibqp.device);
	LIST_HEAD(loans);

	mutex_lock(&sdev->direct_mutex);
	if (srnic_direct_unlink(sdev, qp, NULL, NULL, &sdev->direct_dead,
				&loans))
		schedule_work(&sdev->direct_reap);
	srnic_direct_kill(&loans);
}

/**
 * srnic_direct_qp_change_end() - @qp's change is made: grants may resume
 * @qp: the QP of srnic_direct_qp_change_begin(), state_lock dropped
 */
void srnic_direct_qp_change_end(struct srnic_qp *qp)
{
	mutex_unlock(&to_srnic_dev(qp->ibqp.device)->direct_mutex);
}

/**
 * srnic_direct_loan_settle() - the engine is about to use @dest's RQ
 * @dest: a QP whose RQ and receive CQ are lent (direct_loaned)
 * @poster: the QP whose WQE the engine executes against @dest, or NULL
 *
 * The loan's poster, quiescent while the engine executes its WQEs (the
 * provider lends itself nothing while its SQ holds work), keeps the loan:
 * its committed work is only taken over. Anything else ends the loan
 * first. Sleeps.
 */
void srnic_direct_loan_settle(struct srnic_qp *dest, struct srnic_qp *poster)
{
	struct srnic_dev *sdev = to_srnic_dev(dest->ibqp.device);
	struct srnic_direct_window *w, *loan = NULL;
	unsigned long flags;
	LIST_HEAD(loans);
	u32 end;

	mutex_lock(&sdev->direct_mutex);
	spin_lock_irqsave(&sdev->direct_lock, flags);
	list_for_each_entry(w, &sdev->direct_windows, link) {
		if (w->loan_cq && w->dest == dest) {
			loan = w;
			break;
		}
	}
	if (loan && loan->poster != poster) {
		srnic_direct_end_loan(loan);
		list_move_tail(&loan->link, &loans);
		loan = NULL;
	}
	spin_unlock_irqrestore(&sdev->direct_lock, flags);
	if (loan)
		srnic_direct_loan_adopt(loan, &end);
	srnic_direct_kill(&loans);
	mutex_unlock(&sdev->direct_mutex);
}

/* End the loans of @cq and hold direct_mutex. */
static void srnic_direct_cq_end_loans(struct srnic_cq *cq)
{
	struct srnic_dev *sdev = to_srnic_dev(cq->ibcq.device);
	LIST_HEAD(loans);

	mutex_lock(&sdev->direct_mutex);
	srnic_direct_unlink(sdev, NULL, NULL, cq, &loans, &loans);
	srnic_direct_kill(&loans);
}

/**
 * srnic_direct_cq_user_add() - a QP or XRC SRQ completes to @cq from now on
 * @cq: the CQ
 *
 * A loan of @cq ends: its completions would not be the destination's
 * alone. Sleeps.
 */
void srnic_direct_cq_user_add(struct srnic_cq *cq)
{
	struct srnic_dev *sdev = to_srnic_dev(cq->ibcq.device);
	unsigned long flags;

	spin_lock_irqsave(&sdev->direct_lock, flags);
	cq->direct_users++;
	spin_unlock_irqrestore(&sdev->direct_lock, flags);
	srnic_direct_cq_end_loans(cq);
	mutex_unlock(&sdev->direct_mutex);
}

/* srnic_direct_cq_user_add()'s undoing, at destruction. */
void srnic_direct_cq_user_del(struct srnic_cq *cq)
{
	struct srnic_dev *sdev = to_srnic_dev(cq->ibcq.device);
	unsigned long flags;

	spin_lock_irqsave(&sdev->direct_lock, flags);
	cq->direct_users--;
	spin_unlock_irqrestore(&sdev->direct_lock, flags);
}

/**
 * srnic_direct_cq_resize_begin() - @cq's ring is about to be replaced
 * @cq: the CQ
 *
 * Its loan ends, and none is granted until srnic_direct_cq_resize_end().
 * Sleeps.
 */
void srnic_direct_cq_resize_begin(struct srnic_cq *cq)
{
	srnic_direct_cq_end_loans(cq);
}

void srnic_direct_cq_resize_end(struct srnic_cq *cq)
{
	mutex_unlock(&to_srnic_dev(cq->ibcq.device)->direct_mutex);
}

/**
 * srnic_direct_qp_destroyed() - revoke @qp's windows before it is freed
 * @qp: a QP being destroyed
 *
 * Also waits for windows revoked earlier and not yet zapped: their mmap
 * entries live in the poster's user context, which may go next. Sleeps.
 */
void srnic_direct_qp_destroyed(struct srnic_qp *qp)
{
	struct srnic_dev *sdev = to_srnic_dev(qp->ibqp.device);
	LIST_HEAD(dead);

	mutex_lock(&sdev->direct_mutex);
	srnic_direct_unlink(sdev, qp, NULL, NULL, &dead, &dead);
	srnic_direct_kill(&dead);
	mutex_unlock(&sdev->direct_mutex);
	flush_work(&sdev->direct_reap);
}

/**
 * srnic_direct_revoke_all() - revoke every window and loan of a device
 * @sdev: the device, whose every message its engine is to carry from now on
 *	  (a capture netdev shows them, srnic_capture.c)
 *
 * Sleeps.
 */
void srnic_direct_revoke_all(struct srnic_dev *sdev)
{
	LIST_HEAD(dead);

	mutex_lock(&sdev->direct_mutex);
	srnic_direct_unlink(sdev, NULL, NULL, NULL, &dead, &dead);
	srnic_direct_kill(&dead);
	mutex_unlock(&sdev->direct_mutex);
}

/**
 * srnic_direct_mr_deregistered() - revoke the windows of @mr
 * @mr: an MR already out of the key table, about to wait for its users
 *
 * Before it returns, no process maps a page of @mr through a window. Sleeps.
 */
void srnic_direct_mr_deregistered(struct srnic_mr *mr)
{
	struct srnic_dev *sdev = to_srnic_dev(mr->ibmr.device);
	LIST_HEAD(dead);

	if (mr->type != SRNIC_MR_USER)
		return;
	srnic_direct_unlink(sdev, NULL, mr, NULL, &dead, NULL);
	srnic_direct_kill(&dead);
}

/* ---- Granting a window ------------------------------------------------------ */

/*
 * May the calling process read and write the memory of the process @tgid
 * with credentials @owner and memory @mm (which registered an MR, or
 * created a QP)? ptrace's first rule (__ptrace_may_access(), which modules
 * cannot call): the same real, effective and saved ids, and a dumpable
 * owner; or CAP_SYS_PTRACE in the owner's user namespace.
 */
static bool srnic_direct_may_access(const struct cred *owner,
				    struct mm_struct *mm, struct pid *tgid)
{
	const struct cred *me = current_cred();

	if (mm == current->mm)
		return true;
	if (uid_eq(me->uid, owner->euid) && uid_eq(me->uid, owner->suid) &&
	    uid_eq(me->uid, owner->uid) && gid_eq(me->gid, owner->egid) &&
	    gid_eq(me->gid, owner->sgid) && gid_eq(me->gid, owner->gid) &&
	    srnic_owner_dumpable(mm, tgid))
		return true;
	return ns_capable(owner->user_ns, CAP_SYS_PTRACE);
}

/*
 * Would the engine execute a request of @poster against @dest now, one
 * that needs @dest_access (IB_ACCESS_REMOTE_WRITE for an RDMA WRITE, 0
 * for a SEND)? -EAGAIN when not at the moment, -EOPNOTSUPP when not on
 * this connection.
 */
static int srnic_direct_check_qps(struct srnic_qp *poster,
				  struct srnic_qp *dest, int dest_access)
{
	/* Pairs with srnic_qp_enter_state(): the attributes are set. */
	if (smp_load_acquire(&poster->state) != IB_QPS_RTS)
		return -EAGAIN;
	if (!dest || dest->ibqp.device != poster->ibqp.device ||
	    dest->ibqp.qp_type != IB_QPT_RC)
		return -EOPNOTSUPP;
	/*
	 * A QP whose work may run where it may not sleep takes part in no
	 * window (its state changes would have to revoke them): a kernel QP,
	 * a user QP reached over the wire (srnic_qp_update_atomic()).
	 */
	if (test_bit(SRNIC_TASK_ATOMIC_OK, &poster->task.flags) ||
	    test_bit(SRNIC_TASK_ATOMIC_OK, &dest->task.flags))
		return -EOPNOTSUPP;
	if (!srnic_responder_ready(dest) ||
	    (READ_ONCE(dest->attrs.access_flags) & dest_access) != dest_access)
		return -EAGAIN;
	return 0;
}

/*
 * A window of @npages pages, @pages (owned: a loan's, freed with the window
 * even on failure) or, when NULL, @mr's (which the window then holds).
 */
static struct srnic_direct_window *
srnic_direct_window_alloc(struct ib_ucontext *uctx, struct srnic_mr *mr,
			  struct page **pages, unsigned long npages)
{
	struct srnic_direct_window *w;
	struct inode *inode;
	int err = -ENOMEM;

	w = kzalloc(sizeof(*w), GFP_KERNEL);
	if (!w) {
		kvfree(pages);
		return ERR_PTR(-ENOMEM);
	}
	kref_init(&w->ref);		/* the device list's */
	init_rwsem(&w->rwsem);
	INIT_LIST_HEAD(&w->link);
	w->mr = mr;
	w->pages = pages ? pages : mr->pages;
	w->own_pages = pages;
	w->npages = npages;

	inode = alloc_anon_inode(srnic_direct_mnt->mnt_sb);
	if (IS_ERR(inode)) {
		err = PTR_ERR(inode);
		goto err_free;
	}
	/* The file's reference on the module, which __fput() drops. */
	__module_get(THIS_MODULE);
	w->file = alloc_file_pseudo(inode, srnic_direct_mnt, "[srnic_direct]",
				    O_RDWR, &srnic_direct_fops);
	if (IS_ERR(w->file)) {
		err = PTR_ERR(w->file);
		module_put(THIS_MODULE);
		iput(inode);
		goto err_free;
	}
	kref_get(&w->ref);		/* the file's */
	w->file->private_data = w;

	w->entry = srnic_mmap_window_insert(uctx, w, w->npages << PAGE_SHIFT);
	if (IS_ERR(w->entry)) {
		err = PTR_ERR(w->entry);
		fput(w->file);		/* drops the file's reference */
		goto err_free;
	}
	kref_get(&w->ref);		/* the entry's */
	w->pgoff = rdma_user_mmap_get_offset(w->entry) >> PAGE_SHIFT;
	return w;

err_free:
	srnic_direct_window_put(w);
	return ERR_PTR(err);
}

/*
 * Grant @poster a window on the MR behind @key (an R_Key, or with
 * SRNIC_DIRECT_WINDOW_RECV in @flags an L_Key of the destination's receive
 * WQEs); on success *@resp says where it is. The window is linked first
 * and everything checked after, so a change racing the grant either is
 * seen here or revokes the window (each revocation takes direct_lock after
 * making its change).
 */
static int srnic_direct_grant(struct ib_ucontext *uctx,
			      struct srnic_qp *poster, u32 key, u32 flags,
			      struct srnic_direct_window_resp *resp)
{
	bool recv = flags & SRNIC_DIRECT_WINDOW_RECV;
	int dest_access = recv ? 0 : IB_ACCESS_REMOTE_WRITE;
	int mr_access = recv ? IB_ACCESS_LOCAL_WRITE : IB_ACCESS_REMOTE_WRITE;
	struct srnic_dev *sdev = to_srnic_dev(poster->ibqp.device);
	struct srnic_direct_window *w;
	unsigned long irqflags;
	struct srnic_qp *dest;
	struct srnic_mr *mr;
	LIST_HEAD(dead);
	bool full;
	int err;

	if (flags & ~SRNIC_DIRECT_WINDOW_RECV)
		return -EINVAL;
	/* Under capture every message goes through the engine, seen. */
	if (!READ_ONCE(direct_path) || poster->ibqp.qp_type != IB_QPT_RC ||
	    !poster->sq.ring.ctrl || !READ_ONCE(poster->req.local_ifindex) ||
	    (recv && !READ_ONCE(direct_send)) || srnic_capture_any())
		return -EOPNOTSUPP;
	dest = srnic_local_dest_get(poster);
	err = srnic_direct_check_qps(poster, dest, dest_access);
	if (err)
		goto out_dest;
	/* A memory window's R_Key: served by the engine. */
	if (srnic_key_is_mw(key)) {
		err = -EACCES;
		goto out_dest;
	}

	mr = srnic_mr_lookup_whole(sdev, key, recv ? SRNIC_LKEY : SRNIC_RKEY,
				   to_srnic_pd(dest->ibqp.pd), mr_access);
	if (IS_ERR(mr)) {
		err = PTR_ERR(mr);
		goto out_dest;
	}
	/* Only pinned user memory is mapped (not ODP, DM or kernel MRs). */
	if (mr->type != SRNIC_MR_USER || !mr->umem || !mr->owner_cred ||
	    !mr->num_pages) {
		err = -EACCES;
		goto out_mr;
	}
	if (!srnic_direct_may_access(mr->owner_cred, mr->umem->owning_mm,
				     mr->owner_tgid)) {
		err = -EPERM;
		goto out_mr;
	}

	/* From here on the window holds the MR reference. */
	w = srnic_direct_window_alloc(uctx, mr, NULL, mr->num_pages);
	if (IS_ERR(w)) {
		err = PTR_ERR(w);
		goto out_mr;
	}
	w->sdev = sdev;
	w->poster = poster;
	w->dest = dest;
	/* Read now: once linked, a revocation may free the MR. */
	resp->mmap_offset = (u64)w->pgoff << PAGE_SHIFT;
	resp->mmap_size = (u64)w->npages << PAGE_SHIFT;
	resp->iova = mr->iova;
	resp->length = mr->length;
	resp->page_offset = mr->page_offset;

	spin_lock_irqsave(&sdev->direct_lock, irqflags);
	full = poster->direct_windows >= SRNIC_DIRECT_MAX_WINDOWS_PER_QP;
	if (!full) {
		poster->direct_windows++;
		list_add_tail(&w->link, &sdev->direct_windows);
		/* Any revocation from here on bumps past it. */
		resp->gen = READ_ONCE(poster->sq.ring.ctrl->direct_gen);
	} else {
		list_add(&w->link, &dead);
	}
	spin_unlock_irqrestore(&sdev->direct_lock, irqflags);
	if (full) {
		err = -ENOSPC;
		goto out_kill;
	}

	/* Checked again now that a change would revoke the window. */
	err = srnic_direct_check_qps(poster, dest, dest_access);
	if (!err && !srnic_mr_is_current(sdev, mr))
		err = -ENOENT;
	if (err) {
		srnic_direct_unlink(sdev, poster, mr, NULL, &dead, NULL);
		goto out_kill;
	}
	srnic_count(sdev, SRNIC_CNT_DIRECT_WINDOWS);
	srnic_qp_put(dest);
	return 0;

out_kill:
	srnic_direct_kill(&dead);
	srnic_qp_put(dest);
	return err;
out_mr:
	srnic_mr_put(mr);
out_dest:
	if (dest)
		srnic_qp_put(dest);
	return err;
}

/* The pages of @dest's RQ ring, then those of @cq's ring, or NULL. */
static struct page **srnic_direct_loan_pages(struct srnic_qp *dest,
					     struct srnic_cq *cq,
					     unsigned long *npages)
{
	unsigned long rq_pages = dest->rq.ring.size >> PAGE_SHIFT;
	unsigned long cq_pages = cq->ring.size >> PAGE_SHIFT;
	struct page **pages;
	unsigned long i;

	*npages = rq_pages + cq_pages;
	pages = kvcalloc(*npages, sizeof(*pages), GFP_KERNEL);
	if (!pages)
		return NULL;
	for (i = 0; i < rq_pages; i++)
		pages[i] = vmalloc_to_page(dest->rq.ring.buf + i * PAGE_SIZE);
	for (i = 0; i < cq_pages; i++)
		pages[rq_pages + i] = vmalloc_to_page(cq->ring.buf +
						      i * PAGE_SIZE);
	return pages;
}

/*
 * May @poster borrow @dest's RQ and receive CQ? -EOPNOTSUPP when never on
 * this connection: a destination with an SRQ, or whose receive CQ is
 * shared (with its send side, another QP or an XRC SRQ) or has a
 * completion channel (its events would need the engine); -EPERM when the
 * caller may not access the destination owner's memory.
 */
static int srnic_direct_check_loan(struct srnic_qp *dest)
{
	struct srnic_cq *cq;

	if (!dest->owner_cred || dest->ibqp.srq || !dest->rq.ring.ctrl ||
	    !dest->ibqp.recv_cq || dest->ibqp.recv_cq == dest->ibqp.send_cq)
		return -EOPNOTSUPP;
	cq = to_srnic_cq(dest->ibqp.recv_cq);
	if (cq->ibcq.cq_context || !cq->ring.ctrl ||
	    READ_ONCE(cq->direct_users) != 1)
		return -EOPNOTSUPP;
	if (!srnic_direct_may_access(dest->owner_cred, dest->owner_mm,
				     dest->owner_tgid))
		return -EPERM;
	return 0;
}

/*
 * Lend @poster its destination's RQ and receive CQ; on success *@resp says
 * where they are mapped. Under direct_mutex throughout: every change that
 * ends loans takes it, so none can slip between the checks and the link.
 */
static int srnic_direct_grant_loan(struct ib_ucontext *uctx,
				   struct srnic_qp *poster,
				   struct srnic_direct_loan_resp *resp)
{
	struct srnic_dev *sdev = to_srnic_dev(poster->ibqp.device);
	struct srnic_direct_window *w;
	unsigned long flags, npages;
	struct srnic_qp *dest;
	struct page **pages;
	struct srnic_cq *cq;
	LIST_HEAD(old);
	int err;

	if (!READ_ONCE(direct_path) || !READ_ONCE(direct_send) ||
	    poster->ibqp.qp_type != IB_QPT_RC || !poster->sq.ring.ctrl ||
	    !READ_ONCE(poster->req.local_ifindex) || srnic_capture_any())
		return -EOPNOTSUPP;
	dest = srnic_local_dest_get(poster);
	mutex_lock(&sdev->direct_mutex);
	err = srnic_direct_check_qps(poster, dest, 0);
	if (!err)
		err = srnic_direct_check_loan(dest);
	if (err)
		goto out;
	cq = to_srnic_cq(dest->ibqp.recv_cq);

	/* A loan the poster forgot (it asks again): ends first. */
	srnic_direct_unlink(sdev, NULL, NULL, cq, &old, &old);
	srnic_direct_kill(&old);

	pages = srnic_direct_loan_pages(dest, cq, &npages);
	if (!pages) {
		err = -ENOMEM;
		goto out;
	}
	w = srnic_direct_window_alloc(uctx, NULL, pages, npages);
	if (IS_ERR(w)) {
		err = PTR_ERR(w);
		goto out;
	}
	w->sdev = sdev;
	w->poster = poster;
	w->dest = dest;
	w->loan_cq = cq;

	resp->mmap_offset = (u64)w->pgoff << PAGE_SHIFT;
	resp->mmap_size = (u64)npages << PAGE_SHIFT;
	resp->rq_offset = 0;
	resp->rq_num_entries = dest->rq.ring.num_entries;
	resp->rq_entry_size = dest->rq.ring.entry_size;
	resp->rq_max_sge = dest->rq.max_sge;
	resp->cq_offset = dest->rq.ring.size;
	resp->cq_num_entries = cq->ring.num_entries;
	resp->dest_qpn = dest->ibqp.qp_num;

	spin_lock_irqsave(&sdev->direct_lock, flags);
	if (!++sdev->direct_loan_ids)
		sdev->direct_loan_ids = 1;
	w->loan_id = sdev->direct_loan_ids;
	resp->loan_id = w->loan_id;
	list_add_tail(&w->link, &sdev->direct_windows);
	WRITE_ONCE(dest->direct_loaned, true);
	WRITE_ONCE(poster->sq.ring.ctrl->loan_live, w->loan_id);
	spin_unlock_irqrestore(&sdev->direct_lock, flags);
	srnic_count(sdev, SRNIC_CNT_DIRECT_LOANS);
out:
	mutex_unlock(&sdev->direct_mutex);
	if (dest)
		srnic_qp_put(dest);
	return err;
}

/*
 * SRNIC_METHOD_QP_DIRECT_LOAN: lend a QP of the caller its destination's
 * RQ and receive CQ (struct srnic_direct_loan_resp).
 */
static int
UVERBS_HANDLER(SRNIC_METHOD_QP_DIRECT_LOAN)(struct uverbs_attr_bundle *attrs)
{
	struct ib_qp *ibqp =
		uverbs_attr_get_obj(attrs, SRNIC_ATTR_DIRECT_LOAN_QP_HANDLE);
	struct srnic_direct_loan_resp resp = {};
	struct ib_ucontext *uctx;
	int err;

	uctx = ib_uverbs_get_ucontext(attrs);
	if (IS_ERR(uctx))
		return PTR_ERR(uctx);
	err = srnic_direct_grant_loan(uctx, to_srnic_qp(ibqp), &resp);
	if (err)
		return err;
	/* A loan the caller never learns of ends with its QP. */
	return uverbs_copy_to(attrs, SRNIC_ATTR_DIRECT_LOAN_RESP, &resp,
			      sizeof(resp));
}

/*
 * SRNIC_METHOD_QP_DIRECT_WINDOW: a window on the destination MR of an
 * R_Key (or of an L_Key, for a loan), for a QP of the caller (struct
 * srnic_direct_window_resp).
 */
static int
UVERBS_HANDLER(SRNIC_METHOD_QP_DIRECT_WINDOW)(struct uverbs_attr_bundle *attrs)
{
	struct ib_qp *ibqp =
		uverbs_attr_get_obj(attrs, SRNIC_ATTR_DIRECT_WINDOW_QP_HANDLE);
	struct srnic_direct_window_resp resp = {};
	struct ib_ucontext *uctx;
	u32 key, flags = 0;
	int err;

	uctx = ib_uverbs_get_ucontext(attrs);
	if (IS_ERR(uctx))
		return PTR_ERR(uctx);
	err = uverbs_copy_from(&key, attrs, SRNIC_ATTR_DIRECT_WINDOW_RKEY);
	if (err)
		return err;
	if (uverbs_attr_is_valid(attrs, SRNIC_ATTR_DIRECT_WINDOW_FLAGS)) {
		err = uverbs_copy_from(&flags, attrs,
				       SRNIC_ATTR_DIRECT_WINDOW_FLAGS);
		if (err)
			return err;
	}
	err = srnic_direct_grant(uctx, to_srnic_qp(ibqp), key, flags, &resp);
	if (err)
		return err;
	/* A window the caller never learns of goes with its QP. */
	return uverbs_copy_to(attrs, SRNIC_ATTR_DIRECT_WINDOW_RESP, &resp,
			      sizeof(resp));
}

DECLARE_UVERBS_NAMED_METHOD(SRNIC_METHOD_QP_DIRECT_WINDOW,
			    UVERBS_ATTR_IDR(SRNIC_ATTR_DIRECT_WINDOW_QP_HANDLE,
					    UVERBS_OBJECT_QP,
					    UVERBS_ACCESS_READ, UA_MANDATORY),
			    UVERBS_ATTR_PTR_IN(SRNIC_ATTR_DIRECT_WINDOW_RKEY,
					       UVERBS_ATTR_TYPE(u32),
					       UA_MANDATORY),
			    UVERBS_ATTR_PTR_OUT(SRNIC_ATTR_DIRECT_WINDOW_RESP,
						UVERBS_ATTR_TYPE(struct srnic_direct_window_resp),
						UA_MANDATORY),
			    UVERBS_ATTR_PTR_IN(SRNIC_ATTR_DIRECT_WINDOW_FLAGS,
					       UVERBS_ATTR_TYPE(u32),
					       UA_OPTIONAL));

DECLARE_UVERBS_NAMED_METHOD(SRNIC_METHOD_QP_DIRECT_LOAN,
			    UVERBS_ATTR_IDR(SRNIC_ATTR_DIRECT_LOAN_QP_HANDLE,
					    UVERBS_OBJECT_QP,
					    UVERBS_ACCESS_READ, UA_MANDATORY),
			    UVERBS_ATTR_PTR_OUT(SRNIC_ATTR_DIRECT_LOAN_RESP,
						UVERBS_ATTR_TYPE(struct srnic_direct_loan_resp),
						UA_MANDATORY));

DECLARE_UVERBS_GLOBAL_METHODS(UVERBS_OBJECT_QP,
			      &UVERBS_METHOD(SRNIC_METHOD_QP_DIRECT_WINDOW),
			      &UVERBS_METHOD(SRNIC_METHOD_QP_DIRECT_LOAN));

/* srnic's additions to the QP object's uverbs ioctl methods. */
const struct uapi_definition srnic_direct_uapi_defs[] = {
	UAPI_DEF_CHAIN_OBJ_TREE_NAMED(UVERBS_OBJECT_QP),
	{},
};

/* ---- Device and module ------------------------------------------------------ */

void srnic_direct_dev_init(struct srnic_dev *sdev)
{
	spin_lock_init(&sdev->direct_lock);
	mutex_init(&sdev->direct_mutex);
	INIT_LIST_HEAD(&sdev->direct_windows);
	INIT_LIST_HEAD(&sdev->direct_dead);
	INIT_WORK(&sdev->direct_reap, srnic_direct_reap);
}

/* Every QP is destroyed: nothing is linked, the last zaps may be queued. */
void srnic_direct_dev_cleanup(struct srnic_dev *sdev)
{
	flush_work(&sdev->direct_reap);
	WARN_ON(!list_empty(&sdev->direct_windows));
}

static int srnic_direct_init_fs_context(struct fs_context *fc)
{
	return init_pseudo(fc, SRNIC_DIRECT_FS_MAGIC) ? 0 : -ENOMEM;
}

/*
 * No .owner: the mount, which lives from load to unload, would pin the
 * module. Each window's file pins it instead (srnic_direct_window_alloc()).
 */
static struct file_system_type srnic_direct_fs_type = {
	.name = "srnic_direct",
	.init_fs_context = srnic_direct_init_fs_context,
	.kill_sb = kill_anon_super,
};

int srnic_direct_init(void)
{
	srnic_direct_sink = alloc_page(GFP_KERNEL | __GFP_ZERO);
	if (!srnic_direct_sink)
		return -ENOMEM;
	srnic_direct_mnt = kern_mount(&srnic_direct_fs_type);
	if (IS_ERR(srnic_direct_mnt)) {
		__free_page(srnic_direct_sink);
		return PTR_ERR(srnic_direct_mnt);
	}
	return 0;
}

void srnic_direct_exit(void)
{
	kern_unmount(srnic_direct_mnt);
	__free_page(srnic_direct_sink);
}
