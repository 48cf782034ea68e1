// SPDX-License-Identifier: GPL-2.0
/*
 * dmabuf_mr: RDMA on memory registered as a dma-buf (ibv_reg_dmabuf_mr),
 * for tests/test_dmabuf_mr.py.
 *
 *   dmabuf_mr EXPORTER DEV_A GID_A DEV_B GID_B [hold]
 *
 * EXPORTER is udmabuf (a memfd turned into a dma-buf by /dev/udmabuf) or
 * vgem (a dumb buffer of the virtual GEM driver, exported by PRIME). One RC
 * QP on each device, connected to each other (RoCE v2 GID indexes GID_A and
 * GID_B). b registers a dma-buf at an offset as the target of remote
 * access; a registers another as the local side of its work requests.
 *
 *   1. a WRITEs a pattern from its dma-buf MR into b's; the bytes are
 *      checked through b's own CPU mapping of the buffer (mmap of the
 *      memfd or of the dma-buf), the bytes around the MR untouched;
 *   2. b's process writes a second pattern into its buffer, a READs it
 *      into a's dma-buf MR, checked through a's mapping;
 *   3. a SENDs from its dma-buf MR into a receive that b posted on its own;
 *   4. registrations that must fail: an fd that is no dma-buf (EBADF or
 *      EINVAL: ib_core's dma_buf_get() answer), a range past the buffer
 *      (EINVAL), with IBV_ACCESS_ON_DEMAND (EINVAL or EOPNOTSUPP);
 *   5. a remote access past b's MR is refused (remote access error) and
 *      touches nothing.
 *
 * With "hold", once both MRs are registered it prints "registered" and waits
 * for a line on stdin (the suite looks at them with `rdma resource` then).
 * Prints "ok" and exits 0, or prints what failed and exits 1 (2: the
 * exporter is missing, which the suite turns into a skip).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <linux/udmabuf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/*
 * The two DRM ioctls vgem needs (<drm/drm.h>, <drm/drm_mode.h>; Debian has
 * them in libdrm-dev, which the VM roots do not install).
 */
struct drm_mode_create_dumb {
	uint32_t height, width, bpp, flags;
	uint32_t handle, pitch;		/* out */
	uint64_t size;			/* out */
};

struct drm_prime_handle {
	uint32_t handle, flags;
	int32_t fd;			/* out */
};

#define DRM_IOCTL_MODE_CREATE_DUMB _IOWR('d', 0xB2, struct drm_mode_create_dumb)
#define DRM_IOCTL_PRIME_HANDLE_TO_FD _IOWR('d', 0x2d, struct drm_prime_handle)
#define DRM_CLOEXEC O_CLOEXEC
#define DRM_RDWR O_RDWR

#define BUF_SIZE (1u << 20)	/* each dma-buf */
#define MR_OFFSET 8192u		/* the MRs start here in their buffer */
#define MR_LEN (256u * 1024)	/* and cover this much */
#define MSG_LEN (96u * 1024)	/* what each operation moves */
#define IOVA 0x7000000000ull	/* the MRs' iova: no address of the process */

#define FAIL(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)
#define CHECK(cond, ...) do { if (!(cond)) FAIL(__VA_ARGS__); } while (0)

struct dmabuf {
	int fd;			/* the dma-buf */
	unsigned char *cpu;	/* the process's mapping of the same memory */
};

static int make_udmabuf(struct dmabuf *b)
{
	struct udmabuf_create create = { .flags = UDMABUF_FLAGS_CLOEXEC, .size = BUF_SIZE };
	int dev = open("/dev/udmabuf", O_RDWR | O_CLOEXEC);
	int memfd;

	if (dev < 0)
		return -1;
	memfd = memfd_create("srnic-dmabuf", MFD_ALLOW_SEALING | MFD_CLOEXEC);
	CHECK(memfd >= 0, "memfd_create: %s", strerror(errno));
	CHECK(!ftruncate(memfd, BUF_SIZE), "ftruncate: %s", strerror(errno));
	CHECK(!fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK), "F_ADD_SEALS: %s", strerror(errno));
	create.memfd = memfd;
	b->fd = ioctl(dev, UDMABUF_CREATE, &create);
	CHECK(b->fd >= 0, "UDMABUF_CREATE: %s", strerror(errno));
	b->cpu = mmap(NULL, BUF_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	CHECK(b->cpu != MAP_FAILED, "mmap memfd: %s", strerror(errno));
	close(memfd);
	close(dev);
	return 0;
}

static int make_vgem(struct dmabuf *b)
{
	struct drm_mode_create_dumb dumb = { .height = BUF_SIZE / 4096, .width = 1024, .bpp = 32 };
	struct drm_prime_handle prime = { .flags = DRM_CLOEXEC | DRM_RDWR };
	char path[32];
	int dev = -1;

	/* vgem is the only DRM driver in the VM: its card is the first one. */
	for (int i = 0; i < 8 && dev < 0; i++) {
		snprintf(path, sizeof(path), "/dev/dri/card%d", i);
		dev = open(path, O_RDWR | O_CLOEXEC);
	}
	if (dev < 0)
		return -1;
	CHECK(!ioctl(dev, DRM_IOCTL_MODE_CREATE_DUMB, &dumb), "CREATE_DUMB: %s", strerror(errno));
	CHECK(dumb.size >= BUF_SIZE, "dumb buffer of %llu bytes", (unsigned long long)dumb.size);
	prime.handle = dumb.handle;
	CHECK(!ioctl(dev, DRM_IOCTL_PRIME_HANDLE_TO_FD, &prime), "PRIME_HANDLE_TO_FD: %s",
	      strerror(errno));
	b->fd = prime.fd;
	b->cpu = mmap(NULL, BUF_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, b->fd, 0);
	CHECK(b->cpu != MAP_FAILED, "mmap dma-buf: %s", strerror(errno));
	/* The GEM object lives on in the dma-buf. */
	return 0;
}

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	union ibv_gid gid;
	int gid_index;
	struct dmabuf buf;
	struct ibv_mr *mr;	/* on buf, MR_LEN bytes from MR_OFFSET */
};

static struct ibv_context *open_device(const char *name)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_context *ctx = NULL;

	CHECK(list, "ibv_get_device_list: %s", strerror(errno));
	for (int i = 0; i < n && !ctx; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	CHECK(ctx, "device %s not found", name);
	return ctx;
}

static void setup(struct side *s, const char *dev, int gid_index)
{
	struct ibv_qp_init_attr attr = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ;

	s->ctx = open_device(dev);
	s->gid_index = gid_index;
	CHECK(!ibv_query_gid(s->ctx, 1, gid_index, &s->gid), "query_gid");
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 32, NULL, NULL, 0);
	CHECK(s->pd && s->cq, "pd/cq: %s", strerror(errno));
	attr.send_cq = attr.recv_cq = s->cq;
	s->qp = ibv_create_qp(s->pd, &attr);
	CHECK(s->qp, "create_qp: %s", strerror(errno));
	s->mr = ibv_reg_dmabuf_mr(s->pd, MR_OFFSET, MR_LEN, IOVA, s->buf.fd, access);
	CHECK(s->mr, "ibv_reg_dmabuf_mr on %s: %s", dev, strerror(errno));
	CHECK(s->mr->lkey && s->mr->length == MR_LEN, "MR fields");
}

static void connect_qp(struct side *s, const struct side *peer)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
	};

	CHECK(!ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			     IBV_QP_ACCESS_FLAGS), "INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer->qp->qp_num;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.dgid = peer->gid;
	a.ah_attr.grh.sgid_index = s->gid_index;
	a.ah_attr.grh.hop_limit = 64;
	CHECK(!ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			     IBV_QP_MIN_RNR_TIMER), "RTR: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	CHECK(!ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC),
	      "RTS: %s", strerror(errno));
}

/* One completion of @cq within 10 s; returns its status. */
static enum ibv_wc_status wait_wc(struct ibv_cq *cq, uint64_t wr_id)
{
	struct timespec t0, t;
	struct ibv_wc wc;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = ibv_poll_cq(cq, 1, &wc);

		CHECK(n >= 0, "poll_cq");
		if (n) {
			CHECK(wc.wr_id == wr_id, "wr_id %llu, expected %llu",
			      (unsigned long long)wc.wr_id, (unsigned long long)wr_id);
			return wc.status;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		CHECK(t.tv_sec - t0.tv_sec < 10, "no completion for wr %llu",
		      (unsigned long long)wr_id);
	}
}

static void post_rdma(struct side *a, enum ibv_wr_opcode op, uint64_t wr_id, uint32_t loff,
		      uint64_t raddr, uint32_t rkey, uint32_t len)
{
	struct ibv_sge sge = { .addr = IOVA + loff, .length = len, .lkey = a->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = raddr, .rkey = rkey },
	}, *bad;

	CHECK(!ibv_post_send(a->qp, &wr, &bad), "post_send: %s", strerror(errno));
}

static void fill(unsigned char *p, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(seed + i * 7 + (i >> 10));
}

static void expect_bytes(const unsigned char *p, const unsigned char *want, size_t n,
			 const char *what)
{
	for (size_t i = 0; i < n; i++)
		CHECK(p[i] == want[i], "%s: byte %zu is %#x, expected %#x", what, i, p[i], want[i]);
}

static void expect_fill(const unsigned char *p, size_t n, unsigned char v, const char *what)
{
	for (size_t i = 0; i < n; i++)
		CHECK(p[i] == v, "%s: byte %zu is %#x, expected %#x", what, i, p[i], v);
}

static void expect_reg_fails(struct ibv_pd *pd, uint64_t off, size_t len, int fd, int access,
			     int e1, int e2, const char *what)
{
	struct ibv_mr *mr = ibv_reg_dmabuf_mr(pd, off, len, 0x1000, fd, access);

	CHECK(!mr, "%s: registered", what);
	CHECK(errno == e1 || errno == e2, "%s: errno %d (%s)", what, errno, strerror(errno));
}

int main(int argc, char **argv)
{
	static unsigned char want[MSG_LEN];
	struct side a = {}, b = {};
	uint32_t boff = 4096;	/* where in b's MR the WRITE and READ land */
	int (*make)(struct dmabuf *);

	if (argc != 6 && argc != 7)
		FAIL("usage: dmabuf_mr udmabuf|vgem DEV_A GID_A DEV_B GID_B [hold]");
	make = !strcmp(argv[1], "vgem") ? make_vgem : make_udmabuf;
	if (make(&a.buf) || make(&b.buf)) {
		printf("no %s exporter: %s\n", argv[1], strerror(errno));
		return 2;
	}
	memset(a.buf.cpu, 0xa5, BUF_SIZE);
	memset(b.buf.cpu, 0x5a, BUF_SIZE);
	setup(&a, argv[2], atoi(argv[3]));
	setup(&b, argv[4], atoi(argv[5]));
	connect_qp(&a, &b);
	connect_qp(&b, &a);
	if (argc == 7) {
		char line[8];

		printf("registered\n");
		fflush(stdout);
		CHECK(fgets(line, sizeof(line), stdin), "no line on stdin");
	}

	/* 1: WRITE from a's dma-buf MR into b's. */
	fill(a.buf.cpu + MR_OFFSET, MSG_LEN, 1);
	memcpy(want, a.buf.cpu + MR_OFFSET, MSG_LEN);
	post_rdma(&a, IBV_WR_RDMA_WRITE, 1, 0, IOVA + boff, b.mr->rkey, MSG_LEN);
	CHECK(wait_wc(a.cq, 1) == IBV_WC_SUCCESS, "WRITE failed");
	expect_bytes(b.buf.cpu + MR_OFFSET + boff, want, MSG_LEN, "WRITE target");
	expect_fill(b.buf.cpu + MR_OFFSET, boff, 0x5a, "before the WRITE");
	expect_fill(b.buf.cpu + MR_OFFSET + boff + MSG_LEN, BUF_SIZE - MR_OFFSET - boff - MSG_LEN,
		    0x5a, "after the WRITE");

	/* 2: READ b's dma-buf (written by its process) into a's. */
	fill(b.buf.cpu + MR_OFFSET + boff, MSG_LEN, 77);
	memcpy(want, b.buf.cpu + MR_OFFSET + boff, MSG_LEN);
	post_rdma(&a, IBV_WR_RDMA_READ, 2, MSG_LEN, IOVA + boff, b.mr->rkey, MSG_LEN);
	CHECK(wait_wc(a.cq, 2) == IBV_WC_SUCCESS, "READ failed");
	expect_bytes(a.buf.cpu + MR_OFFSET + MSG_LEN, want, MSG_LEN, "READ target");

	/* 3: SEND from a's dma-buf MR into a receive in b's. */
	{
		struct ibv_sge rsge = { .addr = IOVA, .length = 4096, .lkey = b.mr->lkey };
		struct ibv_recv_wr rwr = { .wr_id = 3, .sg_list = &rsge, .num_sge = 1 }, *rbad;
		struct ibv_sge sge = { .addr = IOVA, .length = 4000, .lkey = a.mr->lkey };
		struct ibv_send_wr wr = { .wr_id = 4, .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;

		fill(a.buf.cpu + MR_OFFSET, 4000, 200);
		CHECK(!ibv_post_recv(b.qp, &rwr, &rbad), "post_recv");
		CHECK(!ibv_post_send(a.qp, &wr, &bad), "post_send");
		CHECK(wait_wc(a.cq, 4) == IBV_WC_SUCCESS, "SEND failed");
		CHECK(wait_wc(b.cq, 3) == IBV_WC_SUCCESS, "RECV failed");
		expect_bytes(b.buf.cpu + MR_OFFSET, a.buf.cpu + MR_OFFSET, 4000, "SEND target");
	}

	/* 4: registrations that must fail. */
	expect_reg_fails(a.pd, 0, 4096, 0, IBV_ACCESS_LOCAL_WRITE, EBADF, EINVAL, "stdin as dma-buf");
	expect_reg_fails(a.pd, BUF_SIZE - 4096, 8192, a.buf.fd, IBV_ACCESS_LOCAL_WRITE, EINVAL,
			 EINVAL, "past the buffer");
	expect_reg_fails(a.pd, 0, 4096, a.buf.fd, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND,
			 EINVAL, EOPNOTSUPP, "on-demand paging");

	/* 5: a WRITE that would end past b's MR touches nothing. */
	memset(b.buf.cpu, 0x5a, BUF_SIZE);
	post_rdma(&a, IBV_WR_RDMA_WRITE, 5, 0, IOVA + MR_LEN - 4096, b.mr->rkey, 8192);
	CHECK(wait_wc(a.cq, 5) == IBV_WC_REM_ACCESS_ERR, "WRITE past the MR not refused");
	expect_fill(b.buf.cpu, BUF_SIZE, 0x5a, "after the refused WRITE");

	ibv_destroy_qp(a.qp);
	ibv_destroy_qp(b.qp);
	CHECK(!ibv_dereg_mr(a.mr) && !ibv_dereg_mr(b.mr), "dereg_mr: %s", strerror(errno));
	ibv_destroy_cq(a.cq);
	ibv_destroy_cq(b.cq);
	ibv_dealloc_pd(a.pd);
	ibv_dealloc_pd(b.pd);
	ibv_close_device(a.ctx);
	ibv_close_device(b.ctx);
	puts("ok");
	return 0;
}
