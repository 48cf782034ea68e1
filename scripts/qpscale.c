// SPDX-License-Identifier: GPL-2.0
/*
 * qpscale: many connected RC QPs on one device, and what each costs.
 *
 * PROCS processes each open DEVICES (one, or two joined by a comma) and
 * make on each one PD, one CQ, one SRQ, and PAIRS pairs of RC QPs (SQ of
 * SQ_DEPTH WQEs, one SGE, receives from the SRQ, max_dest_rd_atomic 1),
 * the two of a pair on the two devices (or both on the one), connected to
 * each other through the ports' RoCE v2 GIDs GID_INDEXES (one, or one
 * per device joined by a comma) (RESET, INIT, RTR, RTS). Two devices of
 * two network namespaces talk over the wire; QPs of one device deliver
 * locally. Several processes, as many applications would be (small SQs
 * share their context's mappings, so vm.max_map_count, 65530 mappings per
 * process, no longer bounds the QPs of one). Every 1000th pair moves 64
 * bytes each way (RDMA WRITE, checked) so that the QPs are known to work.
 *
 * The parent reads /proc/meminfo before and after (all QPs created and
 * connected, the children waiting; caches dropped each time when root),
 * the children's anonymous memory (the provider's part), the guest's busy
 * CPU over IDLE_S seconds with every QP idle, and prints one line of
 * key=value pairs: qps, create_s, memfree_per_qp, slab_per_qp,
 * vmalloc_per_qp, pagetables_per_qp, rssanon_per_qp, idle_cpu_percent (of
 * one CPU), and destroy_s (the processes' exit, which destroys every QP). Exit status 0 if every QP was made
 * and every checked pair moved its data.
 *
 *   cc -O2 -o /tmp/qpscale scripts/qpscale.c -libverbs
 *   /tmp/qpscale DEVICES GID_INDEXES PROCS PAIRS [SQ_DEPTH [IDLE_S]]
 *
 * make bench runs it (scripts/bench.py, sections qpscale and
 * qpscale_many); so does tests/test_qp_scale.py with fewer QPs.
 */
#include <infiniband/verbs.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHECK_EVERY 1000
#define MSG 64

static int die(const char *what)
{
	fprintf(stderr, "qpscale[%d]: %s: %s\n", getpid(), what,
		strerror(errno));
	return 1;
}

static struct ibv_context *open_device(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;

	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	return ctx;
}

static int to_rts(struct ibv_qp *qp, uint32_t dest, union ibv_gid *gid,
		  int gid_index)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ,
	};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.rq_psn = dest & 0xffffff;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.sgid_index = gid_index;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = qp->qp_num & 0xffffff;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* A 64-byte RDMA WRITE of @src (in @smr) to @dst (in @dmr); checked. */
static int write_check(struct ibv_qp *from, struct ibv_cq *cq,
		       struct ibv_mr *smr, char *src, struct ibv_mr *dmr,
		       char *dst, int seed)
{
	struct ibv_sge sge = { (uintptr_t)src, MSG, smr->lkey };
	struct ibv_send_wr wr = {
		.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { (uintptr_t)dst, dmr->rkey },
	}, *bad;
	struct ibv_wc wc;
	time_t end = time(NULL) + 30;
	int n;

	for (int i = 0; i < MSG; i++)
		src[i] = (char)(seed + i);
	memset(dst, 0, MSG);
	if (ibv_post_send(from, &wr, &bad))
		return -1;
	while (!(n = ibv_poll_cq(cq, 1, &wc)) && time(NULL) < end)
		;
	if (n != 1 || wc.status != IBV_WC_SUCCESS)
		return -1;
	return memcmp(src, dst, MSG) ? -1 : 0;
}

/* One device's PD, CQ, SRQ and MR, and the QPs made on it. */
struct end {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	struct ibv_mr *mr;
	union ibv_gid gid;
	int gid_index;
	char buf[2 * MSG];
};

static int end_open(struct end *e, const char *dev, int gid_index)
{
	struct ibv_srq_init_attr sattr = { .attr = { .max_wr = 16,
						     .max_sge = 1 } };

	e->ctx = open_device(dev);
	e->pd = e->ctx ? ibv_alloc_pd(e->ctx) : NULL;
	e->cq = e->pd ? ibv_create_cq(e->ctx, 64, NULL, NULL, 0) : NULL;
	e->srq = e->cq ? ibv_create_srq(e->pd, &sattr) : NULL;
	e->mr = e->srq ? ibv_reg_mr(e->pd, e->buf, sizeof(e->buf),
				    IBV_ACCESS_LOCAL_WRITE |
				    IBV_ACCESS_REMOTE_WRITE) : NULL;
	e->gid_index = gid_index;
	if (!e->mr || ibv_query_gid(e->ctx, 1, gid_index, &e->gid))
		return die(dev);
	return 0;
}

static struct ibv_qp *end_qp(struct end *e, int depth)
{
	struct ibv_qp_init_attr qattr = {
		.send_cq = e->cq, .recv_cq = e->cq, .srq = e->srq,
		.cap = { .max_send_wr = depth, .max_send_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};

	return ibv_create_qp(e->pd, &qattr);
}

/*
 * One process's QPs (pairs between @a and @b, which may be one device);
 * reports on @ready, then waits for SIGTERM.
 */
static int child(struct end *a, struct end *b, long pairs, int depth,
		 int ready)
{
	struct ibv_qp **qp = calloc(2 * pairs, sizeof(*qp));
	sigset_t set;
	int sig;
	char ok = 1;

	if (!qp)
		return die("calloc");
	for (long i = 0; i < 2 * pairs; i++) {
		qp[i] = end_qp(i % 2 ? b : a, depth);
		if (!qp[i]) {
			fprintf(stderr, "qpscale[%d]: QP %ld of %ld: %s\n",
				getpid(), i, 2 * pairs, strerror(errno));
			return 1;
		}
	}
	for (long i = 0; i < pairs; i++) {
		struct ibv_qp *qa = qp[2 * i], *qb = qp[2 * i + 1];

		if (to_rts(qa, qb->qp_num, &b->gid, a->gid_index) ||
		    to_rts(qb, qa->qp_num, &a->gid, b->gid_index))
			return die("connect");
	}
	for (long i = 0; i < pairs; i += CHECK_EVERY)
		if (write_check(qp[2 * i], a->cq, a->mr, a->buf, b->mr,
				b->buf + MSG, (int)i) ||
		    write_check(qp[2 * i + 1], b->cq, b->mr, b->buf, a->mr,
				a->buf + MSG, (int)i + 1)) {
			fprintf(stderr, "qpscale[%d]: pair %ld moved no data\n",
				getpid(), i);
			return 1;
		}
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);
	if (write(ready, &ok, 1) != 1)
		return die("report");
	sigwait(&set, &sig);
	return 0;	/* exit() tears it all down */
}

static int run_child(const char *devs, const char *gids, long pairs,
		     int depth, int ready)
{
	static struct end a, b;
	char *second = strchr(devs, ','), *gid2 = strchr(gids, ',');
	char first[64];

	snprintf(first, sizeof(first), "%.*s",
		 (int)(second ? second - devs : (long)strlen(devs)), devs);
	if (end_open(&a, first, atoi(gids)) ||
	    (second && end_open(&b, second + 1, atoi(gid2 ? gid2 + 1 : gids))))
		return 1;
	return child(&a, second ? &b : &a, pairs, depth, ready);
}

/* A field of /proc/meminfo or /proc/PID/status, in KiB (-1: none). */
static long kib_field(const char *path, const char *key)
{
	FILE *f = fopen(path, "r");
	char line[256];
	long v = -1;

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, strlen(key)) &&
		    line[strlen(key)] == ':')
			v = atol(line + strlen(key) + 1);
	if (f)
		fclose(f);
	return v;
}

/* Page cache and reclaimable slab out of the way of the counts (root). */
static void drop_caches(void)
{
	FILE *f = fopen("/proc/sys/vm/drop_caches", "w");

	sync();
	if (f) {
		fputs("3\n", f);
		fclose(f);
	}
}

/* The guest's busy CPU time in clock ticks (all but idle and iowait). */
static long long busy_ticks(void)
{
	long long v[10] = { 0 }, sum = 0;
	FILE *f = fopen("/proc/stat", "r");

	if (!f || fscanf(f, "cpu %lld %lld %lld %lld %lld %lld %lld %lld",
			 &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
			 &v[7]) != 8) {
		if (f)
			fclose(f);
		return -1;
	}
	fclose(f);
	for (int i = 0; i < 8; i++)
		sum += v[i];
	return sum - v[3] - v[4];
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	static const char *const keys[] = {
		"MemFree", "Slab", "VmallocUsed", "PageTables",
	};
	long before[4], after[4];
	int procs, depth, idle, fds[2], status, failed = 0;
	long pairs, qps, rss = 0;
	long long busy;
	pid_t *pid;
	double t0;
	char c;

	if (argc < 5) {
		fprintf(stderr, "usage: qpscale DEVICES GID_INDEXES PROCS PAIRS "
			"[SQ_DEPTH [IDLE_S]]\n");
		return 2;
	}
	procs = atoi(argv[3]);
	pairs = atol(argv[4]);
	depth = argc > 5 ? atoi(argv[5]) : 16;
	idle = argc > 6 ? atoi(argv[6]) : 10;
	qps = 2L * procs * pairs;
	pid = calloc(procs, sizeof(*pid));
	if (procs < 1 || pairs < 1 || !pid || pipe(fds))
		return 2;
	sleep(1);
	drop_caches();
	for (int k = 0; k < 4; k++)
		before[k] = kib_field("/proc/meminfo", keys[k]);
	t0 = now();
	for (int p = 0; p < procs; p++) {
		pid[p] = fork();
		if (!pid[p]) {
			close(fds[0]);
			_exit(run_child(argv[1], argv[2], pairs, depth,
					 fds[1]));
		}
	}
	close(fds[1]);
	/* Every child ready, or one gone (it said why). */
	for (int got = 0; got < procs && !failed;) {
		struct pollfd pfd = { .fd = fds[0], .events = POLLIN };

		if (poll(&pfd, 1, 1000) == 1 && read(fds[0], &c, 1) == 1)
			got++;
		for (int p = 0; p < procs; p++)
			if (pid[p] > 0 && waitpid(pid[p], &status, WNOHANG) ==
			    pid[p]) {
				pid[p] = 0;
				failed = 1;
			}
	}
	if (!failed) {
		printf("qps=%ld create_s=%.1f", qps, now() - t0);
		sleep(2);
		drop_caches();
		for (int k = 0; k < 4; k++)
			after[k] = kib_field("/proc/meminfo", keys[k]);
		for (int p = 0; p < procs; p++) {
			char path[64];

			snprintf(path, sizeof(path), "/proc/%d/status", pid[p]);
			rss += kib_field(path, "RssAnon");
		}
		printf(" memfree_per_qp=%ld slab_per_qp=%ld vmalloc_per_qp=%ld"
		       " pagetables_per_qp=%ld rssanon_per_qp=%ld",
		       (before[0] - after[0]) * 1024 / qps,
		       (after[1] - before[1]) * 1024 / qps,
		       (after[2] - before[2]) * 1024 / qps,
		       (after[3] - before[3]) * 1024 / qps,
		       rss * 1024 / qps);
		fflush(stdout);
		busy = busy_ticks();
		sleep(idle);
		busy = busy_ticks() - busy;
		printf(" idle_cpu_percent=%.2f ",
		       100.0 * busy / sysconf(_SC_CLK_TCK) / idle);
		fflush(stdout);
	}
	t0 = now();
	for (int p = 0; p < procs; p++)
		if (pid[p] > 0)
			kill(pid[p], SIGTERM);
	for (int p = 0; p < procs; p++)
		if (pid[p] > 0 && (waitpid(pid[p], &status, 0) != pid[p] ||
				   !WIFEXITED(status) || WEXITSTATUS(status)))
			failed = 1;
	if (!failed)
		printf("destroy_s=%.1f\n", now() - t0);
	return failed;
}
