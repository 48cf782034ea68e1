// SPDX-License-Identifier: GPL-2.0
/*
 * srnic_test.ko: the VM suites' hooks into srnic.ko, built beside it for
 * the tests only (`make module`; neither `make install` nor the packages
 * install it). Loading it (modprobe srnic_test, after srnic) adds, for
 * every srnic device, /sys/kernel/debug/srnic_test/<device>/mr_test, and a
 * probe on the srnic_nak_send tracepoint.
 *
 * mr_test drives the MR lookup and copy API the data path uses
 * (srnic_mr.c) against MRs that a process registered, before any QP
 * exists. One command per write(); the write fails with the errno of the
 * lookup or copy:
 *
 *   lookup l|r KEY PDN ACCESS IOVA LEN   look up and release at once
 *   fill KEY PDN IOVA LEN SEED           rkey, REMOTE_WRITE; write pattern
 *   crc KEY PDN IOVA LEN [ROUTINE]       rkey, REMOTE_READ; CRC-32 of range
 *                                        by the payload ICRC routine in
 *                                        use or the one named (crc32_le,
 *                                        fold, crypto), at IOVA's alignment
 *   copy DKEY DPDN DIOVA SKEY SPDN SIOVA LEN
 *                                        lkeys; dst needs LOCAL_WRITE
 *   hold KEY PDN IOVA                    keep a reference (one at a time)
 *   release                              drop it
 *   kernel                               self-test of kernel MRs (below)
 *
 * KEY, IOVA in hex; PDN, ACCESS (IB_ACCESS_* bits), LEN, SEED in decimal.
 * The pattern byte at offset i of a fill is (SEED + i + (i >> 12)) & 0xff.
 * Reading the file returns the last CRC as 8 hex digits.
 *
 * The module parameter fatal_nak_delay_ms makes the responder pause that
 * long (at most 1000 ms) after each NAK of a fatal error, with the QP's
 * state lock held: it widens the window in which the requester acts on
 * the NAK, so tests/test_rc_traffic.py can check that nothing of the
 * error state was left for after it. The probe runs in the tracepoint's
 * atomic context, so it busy-waits.
 */

#include <linux/crc32.h>
#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/gfp.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "../srnic.h"
#include "../srnic_trace.h"
#include "../srnic_wire.h"

#define SRNIC_TEST_MAX_LEN (64UL << 20)
#define SRNIC_TEST_CMD_MAX 160

static struct ib_client srnic_test_client;

/* Serialises commands; protects the fields below. */
static DEFINE_MUTEX(srnic_test_lock);
static struct srnic_mr *srnic_test_held;
static u32 srnic_test_crc;

/* Matches no MR: stands for a PD number no MR of the key has. */
static struct srnic_pd srnic_test_no_pd;

/*
 * The PD a lookup for @key should present: the MR's own if its number is
 * @pdn (the number `rdma resource show` gives it, ib_core's restrack id,
 * which is all a test can see), else one no MR belongs to. The MR is held while its PD is read, so
 * the PD cannot go away (it outlives its MRs).
 */
static struct srnic_pd *srnic_test_pd(struct srnic_dev *sdev, u32 key,
				      u32 pdn)
{
	struct srnic_pd *pd = &srnic_test_no_pd;
	struct srnic_mr *mr;

	rcu_read_lock();
	mr = xa_load(&sdev->mr_table, key >> 8);
	if (mr && !refcount_inc_not_zero(&mr->users))
		mr = NULL;
	rcu_read_unlock();
	if (mr) {
		if (mr->pd->ibpd.res.id == pdn)
			pd = mr->pd;
		srnic_mr_put(mr);
	}
	return pd;
}

static struct srnic_mr *srnic_test_lookup(struct srnic_dev *sdev, u32 key,
					  enum srnic_key_kind kind, u32 pdn,
					  int access, u64 iova, u64 len)
{
	return srnic_mr_lookup(sdev, key, kind, srnic_test_pd(sdev, key, pdn),
			       access, iova, len);
}

static int srnic_test_fill(struct srnic_dev *sdev, u32 key, u32 pdn, u64 iova,
			   u64 len, u32 seed)
{
	struct srnic_mr *mr;
	u8 *buf;
	u64 i;
	int err;

	if (len > SRNIC_TEST_MAX_LEN)
		return -E2BIG;
	buf = kvmalloc(len ?: 1, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	for (i = 0; i < len; i++)
		buf[i] = seed + i + (i >> 12);

	mr = srnic_test_lookup(sdev, key, SRNIC_RKEY, pdn,
			       IB_ACCESS_REMOTE_WRITE, iova, len);
	if (IS_ERR(mr)) {
		err = PTR_ERR(mr);
		goto out;
	}
	err = srnic_mr_copy_to(mr, iova, buf, len);
	srnic_mr_put(mr);
out:
	kvfree(buf);
	return err;
}

static int srnic_test_crc32(struct srnic_dev *sdev, u32 key, u32 pdn,
			    u64 iova, u64 len, const char *routine)
{
	struct srnic_mr *mr;
	u8 *buf, *data;
	u32 crc = ~0U;
	int err;

	if (len > SRNIC_TEST_MAX_LEN)
		return -E2BIG;
	buf = kvmalloc(len + 8, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	/* The bytes keep the alignment they have at @iova. */
	data = buf + (iova & 7);

	mr = srnic_test_lookup(sdev, key, SRNIC_RKEY, pdn,
			       IB_ACCESS_REMOTE_READ, iova, len);
	if (IS_ERR(mr)) {
		err = PTR_ERR(mr);
		goto out;
	}
	err = srnic_mr_copy_from(mr, iova, data, len);
	srnic_mr_put(mr);
	if (!err)
		err = srnic_payload_crc32_named(routine, &crc, data, len);
	if (!err)
		srnic_test_crc = crc ^ ~0U;
out:
	kvfree(buf);
	return err;
}

static int srnic_test_copy(struct srnic_dev *sdev, u32 dkey, u32 dpdn,
			   u64 diova, u32 skey, u32 spdn, u64 siova, u64 len)
{
	struct srnic_mr *dst, *src;
	int err;

	dst = srnic_test_lookup(sdev, dkey, SRNIC_LKEY, dpdn,
				IB_ACCESS_LOCAL_WRITE, diova, len);
	if (IS_ERR(dst))
		return PTR_ERR(dst);
	src = srnic_test_lookup(sdev, skey, SRNIC_LKEY, spdn, 0, siova, len);
	if (IS_ERR(src)) {
		err = PTR_ERR(src);
		goto out_dst;
	}
	err = srnic_mr_copy(dst, diova, src, siova, len);
	srnic_mr_put(src);
out_dst:
	srnic_mr_put(dst);
	return err;
}

/* Lookup of a kernel address through a DMA MR, then copies both ways. */
static int srnic_test_dma_mr(struct srnic_dev *sdev, struct ib_pd *ibpd,
			     u8 *buf, u8 *pattern, size_t len)
{
	u64 iova = (uintptr_t)buf;
	struct srnic_mr *mr;
	size_t i;
	int err;

	mr = srnic_mr_lookup(sdev, ibpd->local_dma_lkey, SRNIC_LKEY,
			     to_srnic_pd(ibpd), IB_ACCESS_LOCAL_WRITE, iova, len);
	if (IS_ERR(mr))
		return PTR_ERR(mr);
	for (i = 0; i < len; i++)
		pattern[i] = i + (i >> 12);
	err = srnic_mr_copy_to(mr, iova, pattern, len);
	if (!err && memcmp(buf, pattern, len))
		err = -EIO;
	memset(pattern, 0, len);
	if (!err)
		err = srnic_mr_copy_from(mr, iova, pattern, len);
	if (!err && memcmp(buf, pattern, len))
		err = -EIO;
	srnic_mr_put(mr);
	if (err)
		return err;

	/* ib_alloc_pd() asked for local access only: no rkey. */
	mr = srnic_mr_lookup(sdev, ibpd->local_dma_lkey, SRNIC_RKEY,
			     to_srnic_pd(ibpd), 0, iova, 1);
	if (!IS_ERR(mr)) {
		srnic_mr_put(mr);
		return -EIO;
	}
	return PTR_ERR(mr) == -ENOENT ? 0 : -EIO;
}

/* map_mr_sg fills the page list; the MR stays invisible to lookups. */
static int srnic_test_fast_reg_mr(struct srnic_dev *sdev, struct ib_pd *ibpd,
				  u8 *buf, size_t len)
{
	const unsigned int offset = 100;
	struct scatterlist sg;
	struct srnic_mr *mr;
	struct ib_mr *ibmr;
	unsigned long i;
	int err, n;

	ibmr = ib_alloc_mr(ibpd, IB_MR_TYPE_SG_GAPS, 4);
	if (!IS_ERR(ibmr)) {
		ib_dereg_mr(ibmr);
		return -EIO;
	}
	ibmr = ib_alloc_mr(ibpd, IB_MR_TYPE_MEM_REG,
			   SRNIC_MAX_FAST_REG_PAGES + 1);
	if (!IS_ERR(ibmr)) {
		ib_dereg_mr(ibmr);
		return -EIO;
	}

	ibmr = ib_alloc_mr(ibpd, IB_MR_TYPE_MEM_REG, len / PAGE_SIZE);
	if (IS_ERR(ibmr))
		return PTR_ERR(ibmr);
	mr = to_srnic_mr(ibmr);

	/* Starts mid-page: one page more than len / PAGE_SIZE. */
	sg_init_one(&sg, buf + offset, len - PAGE_SIZE);
	if (ib_dma_map_sg(ibpd->device, &sg, 1, DMA_BIDIRECTIONAL) != 1) {
		err = -EIO;
		goto out_dereg;
	}
	n = ib_map_mr_sg(ibmr, &sg, 1, NULL, PAGE_SIZE);
	err = n == 1 ? 0 : n < 0 ? n : -EIO;
	if (!err && (ibmr->iova != (uintptr_t)buf + offset ||
		     ibmr->length != len - PAGE_SIZE ||
		     mr->page_offset != offset ||
		     mr->num_pages != len / PAGE_SIZE))
		err = -EIO;
	for (i = 0; !err && i < mr->num_pages; i++)
		if (mr->pages[i] != virt_to_page(buf + i * PAGE_SIZE))
			err = -EIO;
	ib_dma_unmap_sg(ibpd->device, &sg, 1, DMA_BIDIRECTIONAL);

	/* Not registered by an IB_WR_REG_MR: its key misses. */
	if (!err && PTR_ERR(srnic_mr_lookup(sdev, ibmr->lkey, SRNIC_LKEY,
					    to_srnic_pd(ibpd), 0, ibmr->iova,
					    1)) != -ENOENT)
		err = -EIO;
out_dereg:
	ib_dereg_mr(ibmr);
	return err;
}

/*
 * Kernel MRs, which only kernel ULPs create and none can reach before srnic
 * is a kverbs provider: a PD, whose local_dma_lkey is a get_dma_mr MR, and
 * a fast-reg MR. Returns -EIO when a result is wrong.
 */
static int srnic_test_kernel_mrs(struct srnic_dev *sdev)
{
	const unsigned int order = 2;
	const size_t len = PAGE_SIZE << order;
	struct ib_pd *ibpd;
	u8 *buf, *pattern;
	int err = -ENOMEM;

	buf = (u8 *)__get_free_pages(GFP_KERNEL, order);
	pattern = kmalloc(len, GFP_KERNEL);
	if (!buf || !pattern)
		goto out_free;

	ibpd = ib_alloc_pd(&sdev->ibdev, 0);
	if (IS_ERR(ibpd)) {
		err = PTR_ERR(ibpd);
		goto out_free;
	}
	err = srnic_test_dma_mr(sdev, ibpd, buf, pattern, len);
	if (!err)
		err = srnic_test_fast_reg_mr(sdev, ibpd, buf, len);
	ib_dealloc_pd(ibpd);
out_free:
	kfree(pattern);
	free_pages((unsigned long)buf, order);
	return err;
}

static int srnic_test_command(struct srnic_dev *sdev, const char *cmd)
{
	u64 iova, iova2, len;
	u32 key, key2, pdn, pdn2, seed;
	struct srnic_mr *mr;
	char routine[16];
	int access;
	char kind;

	if (sscanf(cmd, "lookup %c %x %u %d %llx %llu", &kind, &key, &pdn,
		   &access, &iova, &len) == 6) {
		if (kind != 'l' && kind != 'r')
			return -EINVAL;
		mr = srnic_test_lookup(sdev, key,
				       kind == 'l' ? SRNIC_LKEY : SRNIC_RKEY,
				       pdn, access, iova, len);
		if (IS_ERR(mr))
			return PTR_ERR(mr);
		srnic_mr_put(mr);
		return 0;
	}
	if (sscanf(cmd, "fill %x %u %llx %llu %u", &key, &pdn, &iova, &len,
		   &seed) == 5)
		return srnic_test_fill(sdev, key, pdn, iova, len, seed);
	routine[0] = '\0';
	if (sscanf(cmd, "crc %x %u %llx %llu %15s", &key, &pdn, &iova, &len,
		   routine) >= 4)
		return srnic_test_crc32(sdev, key, pdn, iova, len, routine);
	if (sscanf(cmd, "copy %x %u %llx %x %u %llx %llu", &key, &pdn, &iova,
		   &key2, &pdn2, &iova2, &len) == 7)
		return srnic_test_copy(sdev, key, pdn, iova, key2, pdn2, iova2,
				       len);
	if (sscanf(cmd, "hold %x %u %llx", &key, &pdn, &iova) == 3) {
		if (srnic_test_held)
			return -EBUSY;
		mr = srnic_test_lookup(sdev, key, SRNIC_LKEY, pdn, 0, iova, 0);
		if (IS_ERR(mr))
			return PTR_ERR(mr);
		srnic_test_held = mr;
		return 0;
	}
	if (!strcmp(cmd, "kernel"))
		return srnic_test_kernel_mrs(sdev);
	if (!strcmp(cmd, "release")) {
		if (!srnic_test_held)
			return -ENOENT;
		srnic_mr_put(srnic_test_held);
		srnic_test_held = NULL;
		return 0;
	}
	return -EINVAL;
}

static ssize_t srnic_mr_test_write(struct file *file, const char __user *ubuf,
				   size_t count, loff_t *ppos)
{
	struct srnic_dev *sdev = file->private_data;
	char cmd[SRNIC_TEST_CMD_MAX];
	int err;

	if (!count || count >= sizeof(cmd))
		return -EINVAL;
	if (copy_from_user(cmd, ubuf, count))
		return -EFAULT;
	cmd[count] = '\0';
	strim(cmd);

	mutex_lock(&srnic_test_lock);
	err = srnic_test_command(sdev, cmd);
	mutex_unlock(&srnic_test_lock);
	return err ?: count;
}

static ssize_t srnic_mr_test_read(struct file *file, char __user *ubuf,
				  size_t count, loff_t *ppos)
{
	char text[16];
	int len;

	mutex_lock(&srnic_test_lock);
	len = scnprintf(text, sizeof(text), "%08x\n", srnic_test_crc);
	mutex_unlock(&srnic_test_lock);
	return simple_read_from_buffer(ubuf, count, ppos, text, len);
}

static const struct file_operations srnic_mr_test_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.read = srnic_mr_test_read,
	.write = srnic_mr_test_write,
	.llseek = default_llseek,
};

/* ---- Devices -------------------------------------------------------- */

static struct dentry *srnic_test_root;

static bool srnic_test_is_srnic(struct ib_device *ibdev)
{
	struct module *owner = ibdev->ops.owner;

	return owner && !strcmp(module_name(owner), SRNIC_DRIVER_NAME);
}

static int srnic_test_add_one(struct ib_device *ibdev)
{
	struct dentry *dir;

	if (!srnic_test_is_srnic(ibdev))
		return -EOPNOTSUPP;
	dir = debugfs_create_dir(dev_name(&ibdev->dev), srnic_test_root);
	debugfs_create_file("mr_test", 0600, dir, to_srnic_dev(ibdev),
			    &srnic_mr_test_fops);
	ib_set_client_data(ibdev, &srnic_test_client, dir);
	return 0;
}

static void srnic_test_remove_one(struct ib_device *ibdev, void *client_data)
{
	struct dentry *dir = client_data;

	/* Waits for commands in progress on the device. */
	debugfs_remove(dir);
	mutex_lock(&srnic_test_lock);
	if (srnic_test_held && srnic_test_held->ibmr.device == ibdev) {
		srnic_mr_put(srnic_test_held);
		srnic_test_held = NULL;
	}
	mutex_unlock(&srnic_test_lock);
}

static struct ib_client srnic_test_client = {
	.name = "srnic_test",
	.add = srnic_test_add_one,
	.remove = srnic_test_remove_one,
};

/* ---- The responder's pause after a fatal NAK ------------------------- */

static unsigned int fatal_nak_delay_ms;
module_param(fatal_nak_delay_ms, uint, 0644);
MODULE_PARM_DESC(fatal_nak_delay_ms,
		 "The responder pauses this long (at most 1000) after each NAK of a fatal error, its QP's state lock held (0: off)");

static void srnic_test_nak_probe(void *data, struct ib_qp *ibqp, u32 psn,
				 u8 type, u8 value)
{
	unsigned int ms = READ_ONCE(fatal_nak_delay_ms);

	if (ms && type == SRNIC_AETH_NAK &&
	    value != SRNIC_NAK_PSN_SEQUENCE_ERROR)
		mdelay(min(ms, 1000U));
}

static int __init srnic_test_init(void)
{
	int err;

	srnic_test_root = debugfs_create_dir("srnic_test", NULL);
	err = register_trace_srnic_nak_send(srnic_test_nak_probe, NULL);
	if (err)
		goto out_debugfs;
	err = ib_register_client(&srnic_test_client);
	if (err)
		goto out_trace;
	return 0;

out_trace:
	unregister_trace_srnic_nak_send(srnic_test_nak_probe, NULL);
	tracepoint_synchronize_unregister();
out_debugfs:
	debugfs_remove(srnic_test_root);
	return err;
}

static void __exit srnic_test_exit(void)
{
	ib_unregister_client(&srnic_test_client);
	unregister_trace_srnic_nak_send(srnic_test_nak_probe, NULL);
	tracepoint_synchronize_unregister();
	debugfs_remove(srnic_test_root);
}

module_init(srnic_test_init);
module_exit(srnic_test_exit);
MODULE_DESCRIPTION("srnic: hooks for the test suites (not for production)");
MODULE_LICENSE("GPL");
