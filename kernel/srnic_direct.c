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
 * @mr: the MR, referenced until the window is revoked
 * @npages: pages of the mapping (the MR's)
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
	unsigned long npages;
	unsigned long pgoff;
	struct file *file;
	struct rdma_user_mmap_entry *entry;
	struct rw_semaphore rwsem;
	bool revoked;
};

static void srnic_direct_window_release(struct kref *ref)
{
	kfree(container_of(ref, struct srnic_direct_window, ref));
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
		page = w->mr->pages[i];
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
		vma->vm_flags |= VM_PFNMAP | VM_DONTEXPAND | VM_DONTDUMP |
				 VM_DONTCOPY;
		vma->vm_flags &= ~VM_MAYEXEC;
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
 * Move the windows of @qp (as poster or destination) or of @mr to @dead
 * (a list of the caller's, or the device's direct_dead), bumping their
 * posters' generation. Any context. Returns whether it moved any.
 */
static bool srnic_direct_unlink(struct srnic_dev *sdev,
				const struct srnic_qp *qp,
				const struct srnic_mr *mr,
				struct list_head *dead)
{
	struct srnic_direct_window *w, *tmp;
	unsigned long flags;
	bool moved = false;

	spin_lock_irqsave(&sdev->direct_lock, flags);
	list_for_each_entry_safe(w, tmp, &sdev->direct_windows, link) {
		if ((qp && w->poster != qp && w->dest != qp) ||
		    (mr && w->mr != mr))
			continue;
		srnic_direct_bump_gen(w->poster);
		w->poster->direct_windows--;
		list_move_tail(&w->link, dead);
		moved = true;
	}
	spin_unlock_irqrestore(&sdev->direct_lock, flags);
	return moved;
}

/* Revoke the unlinked windows on @dead. Sleeps. */
static void srnic_direct_kill(struct list_head *dead)
{
	struct srnic_direct_window *w, *tmp;

	list_for_each_entry_safe(w, tmp, dead, link) {
		list_del(&w->link);
		down_write(&w->rwsem);
		w->revoked = true;
		up_write(&w->rwsem);
		/* Every process's pages of it; later faults get the sink. */
		unmap_mapping_range(w->file->f_mapping, 0, 0, 1);
		rdma_user_mmap_entry_remove(w->entry);
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
 * srnic_direct_qp_changed() - @qp changed state or attributes
 * @qp: a QP, as poster or destination
 *
 * Its windows stop serving at once (the generation bump) and are zapped by
 * a work item. Any context; state_lock may be held.
 */
void srnic_direct_qp_changed(struct srnic_qp *qp)
{
	struct srnic_dev *sdev = to_srnic_dev(qp->ibqp.device);

	/* Always under the lock: a grant in progress must see the change. */
	if (srnic_direct_unlink(sdev, qp, NULL, &sdev->direct_dead))
		schedule_work(&sdev->direct_reap);
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

	srnic_direct_unlink(sdev, qp, NULL, &dead);
	srnic_direct_kill(&dead);
	flush_work(&sdev->direct_reap);
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
	srnic_direct_unlink(sdev, NULL, mr, &dead);
	srnic_direct_kill(&dead);
}

/* ---- Granting a window ------------------------------------------------------ */

/*
 * May the calling process read and write the memory of the process that
 * registered @mr? ptrace's first rule (__ptrace_may_access(), which
 * modules cannot call): the same real, effective and saved ids, and a
 * dumpable owner; or CAP_SYS_PTRACE in the owner's user namespace.
 */
static bool srnic_direct_may_access(const struct srnic_mr *mr)
{
	const struct cred *me = current_cred();
	const struct cred *owner = mr->owner_cred;

	if (mr->umem->owning_mm == current->mm)
		return true;
	if (uid_eq(me->uid, owner->euid) && uid_eq(me->uid, owner->suid) &&
	    uid_eq(me->uid, owner->uid) && gid_eq(me->gid, owner->egid) &&
	    gid_eq(me->gid, owner->sgid) && gid_eq(me->gid, owner->gid) &&
	    get_dumpable(mr->umem->owning_mm) == SUID_DUMP_USER)
		return true;
	return ns_capable(owner->user_ns, CAP_SYS_PTRACE);
}

/*
 * Would the engine execute an RDMA WRITE of @poster against @dest now?
 * -EAGAIN when not at the moment, -EOPNOTSUPP when not on this connection.
 */
static int srnic_direct_check_qps(struct srnic_qp *poster,
				  struct srnic_qp *dest)
{
	/* Pairs with srnic_qp_enter_state(): the attributes are set. */
	if (smp_load_acquire(&poster->state) != IB_QPS_RTS)
		return -EAGAIN;
	if (!dest || dest->ibqp.device != poster->ibqp.device ||
	    dest->ibqp.qp_type != IB_QPT_RC)
		return -EOPNOTSUPP;
	if (!srnic_responder_ready(dest) ||
	    !(READ_ONCE(dest->attrs.access_flags) & IB_ACCESS_REMOTE_WRITE))
		return -EAGAIN;
	return 0;
}

static struct srnic_direct_window *
srnic_direct_window_alloc(struct ib_ucontext *uctx, struct srnic_mr *mr)
{
	struct srnic_direct_window *w;
	struct inode *inode;
	int err = -ENOMEM;

	w = kzalloc(sizeof(*w), GFP_KERNEL);
	if (!w)
		return ERR_PTR(-ENOMEM);
	kref_init(&w->ref);		/* the device list's */
	init_rwsem(&w->rwsem);
	INIT_LIST_HEAD(&w->link);
	w->mr = mr;
	w->npages = mr->num_pages;

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
 * Grant @poster a window on the MR behind @rkey; on success *@resp says
 * where it is. The window is linked first and everything checked after,
 * so a change racing the grant either is seen here or revokes the window
 * (each revocation takes direct_lock after making its change).
 */
static int srnic_direct_grant(struct ib_ucontext *uctx,
			      struct srnic_qp *poster, u32 rkey,
			      struct srnic_direct_window_resp *resp)
{
	struct srnic_dev *sdev = to_srnic_dev(poster->ibqp.device);
	struct srnic_direct_window *w;
	struct srnic_qp *dest;
	struct srnic_mr *mr;
	unsigned long flags;
	LIST_HEAD(dead);
	bool full;
	int err;

	if (!READ_ONCE(direct_path) || poster->ibqp.qp_type != IB_QPT_RC ||
	    !poster->sq.ring.ctrl || !READ_ONCE(poster->req.local_ifindex))
		return -EOPNOTSUPP;
	dest = srnic_local_dest_get(poster);
	err = srnic_direct_check_qps(poster, dest);
	if (err)
		goto out_dest;
	/* A memory window's R_Key: served by the engine. */
	if (srnic_key_is_mw(rkey)) {
		err = -EACCES;
		goto out_dest;
	}

	mr = srnic_mr_lookup_whole(sdev, rkey, to_srnic_pd(dest->ibqp.pd),
				   IB_ACCESS_REMOTE_WRITE);
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
	if (!srnic_direct_may_access(mr)) {
		err = -EPERM;
		goto out_mr;
	}

	/* From here on the window holds the MR reference. */
	w = srnic_direct_window_alloc(uctx, mr);
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

	spin_lock_irqsave(&sdev->direct_lock, flags);
	full = poster->direct_windows >= SRNIC_DIRECT_MAX_WINDOWS_PER_QP;
	if (!full) {
		poster->direct_windows++;
		list_add_tail(&w->link, &sdev->direct_windows);
		/* Any revocation from here on bumps past it. */
		resp->gen = READ_ONCE(poster->sq.ring.ctrl->direct_gen);
	} else {
		list_add(&w->link, &dead);
	}
	spin_unlock_irqrestore(&sdev->direct_lock, flags);
	if (full) {
		err = -ENOSPC;
		goto out_kill;
	}

	/* Checked again now that a change would revoke the window. */
	err = srnic_direct_check_qps(poster, dest);
	if (!err && !srnic_mr_is_current(sdev, mr))
		err = -ENOENT;
	if (err) {
		srnic_direct_unlink(sdev, poster, mr, &dead);
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

/*
 * SRNIC_METHOD_QP_DIRECT_WINDOW: a window on the destination MR of an
 * R_Key, for a QP of the caller (struct srnic_direct_window_resp).
 */
static int
UVERBS_HANDLER(SRNIC_METHOD_QP_DIRECT_WINDOW)(struct uverbs_attr_bundle *attrs)
{
	struct ib_qp *ibqp =
		uverbs_attr_get_obj(attrs, SRNIC_ATTR_DIRECT_WINDOW_QP_HANDLE);
	struct srnic_direct_window_resp resp = {};
	struct ib_ucontext *uctx;
	u32 rkey;
	int err;

	uctx = ib_uverbs_get_ucontext(attrs);
	if (IS_ERR(uctx))
		return PTR_ERR(uctx);
	err = uverbs_copy_from(&rkey, attrs, SRNIC_ATTR_DIRECT_WINDOW_RKEY);
	if (err)
		return err;
	err = srnic_direct_grant(uctx, to_srnic_qp(ibqp), rkey, &resp);
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
						UA_MANDATORY));

DECLARE_UVERBS_GLOBAL_METHODS(UVERBS_OBJECT_QP,
			      &UVERBS_METHOD(SRNIC_METHOD_QP_DIRECT_WINDOW));

/* srnic's additions to the QP object's uverbs ioctl methods. */
const struct uapi_definition srnic_direct_uapi_defs[] = {
	UAPI_DEF_CHAIN_OBJ_TREE_NAMED(UVERBS_OBJECT_QP),
	{},
};

/* ---- Device and module ------------------------------------------------------ */

void srnic_direct_dev_init(struct srnic_dev *sdev)
{
	spin_lock_init(&sdev->direct_lock);
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
