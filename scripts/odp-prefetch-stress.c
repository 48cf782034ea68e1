// SPDX-License-Identifier: GPL-2.0
/*
 * odp-prefetch-stress: on-demand-paging MRs whose buffer is half unmapped
 * and mapped again while asynchronous ibv_advise_mr() prefetches
 * (PREFETCH_WRITE, PREFETCH_NO_FAULT) are queued. It made the kernel warn
 * in ib_umem_odp_map_dma_and_lock() ("WARNING: ... umem_odp.c:429", from
 * srnic_prefetch_work_fn), a prefetch finding a page mapped in the umem
 * that the process no longer had, for two causes, both fixed:
 *  - concurrent calls on one umem (hmm_range_fault() fills the umem's own
 *    PFN list outside umem_mutex), so one mapped the other's older
 *    snapshot: srnic serialises them per MR (srnic_mr.odp_map_lock);
 *  - 6.1's munmap() lets readers of the mm see the hole before the
 *    notifiers run, and a no-fault walk there warned about every page the
 *    umem still mapped: srnic's no-fault prefetch asks only about pages the
 *    umem does not map (srnic_odp_map_present()).
 * With transparent huge pages "always", 100 rounds: an MR over the buffer
 * 57 warnings on trixie's 6.12 and 10 on bookworm's 6.1 before the first
 * fix; an implicit MR 59 on 6.1 and 57 on 6.12 before the second; none
 * after. tests/test_odp.py runs it.
 *
 *   cc -O2 -o /tmp/odp-stress scripts/odp-prefetch-stress.c -libverbs
 *   (in a VM, with an srnic device) /tmp/odp-stress 100 1 4; dmesg | grep umem_odp
 *
 * Arguments: rounds, implicit MR (1) or one over the buffer (0), a mask of
 * what happens between prefetches (1: MADV_DONTNEED of the first half,
 * 2: fork, 4: the second half unmapped and mapped again), "sync" for
 * synchronous prefetches (IBV_ADVISE_MR_FLAG_FLUSH) or "async" (the
 * default), the device (default: the first).
 */
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define BUF_LEN (4UL << 20)

static void prefetch(struct ibv_pd *pd, int advice, uint32_t flags,
		     struct ibv_sge *sge)
{
	if (ibv_advise_mr(pd, advice, flags, sge, 1) && flags)
		perror("ibv_advise_mr");
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 100;
	int implicit = argc > 2 && atoi(argv[2]);
	int mode = argc > 3 ? atoi(argv[3]) : 4;
	uint32_t flags = argc > 4 && !strcmp(argv[4], "sync") ?
			 IBV_ADVISE_MR_FLAG_FLUSH : 0;
	const char *name = argc > 5 ? argv[5] : NULL;
	int access = IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE |
		     IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_device *dev = list ? list[0] : NULL;
	struct ibv_context *ctx;
	struct ibv_pd *pd;

	for (int i = 0; name && list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			dev = list[i];
	if (name && dev && strcmp(ibv_get_device_name(dev), name))
		dev = NULL;
	ctx = dev ? ibv_open_device(dev) : NULL;
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;

	if (!pd) {
		fprintf(stderr, "odp-prefetch-stress: no RDMA device to use\n");
		return 1;
	}
	for (int round = 0; round < rounds; round++) {
		char *buf = mmap(NULL, BUF_LEN, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		struct ibv_mr *mr = implicit ?
			ibv_reg_mr(pd, NULL, SIZE_MAX, access) :
			ibv_reg_mr(pd, buf, BUF_LEN, access);

		if (buf == MAP_FAILED || !mr) {
			perror("odp-prefetch-stress: mmap or ibv_reg_mr");
			return 1;
		}
		for (int k = 0; k < 8; k++) {
			struct ibv_sge sge = { .addr = (uintptr_t)buf,
					       .length = BUF_LEN,
					       .lkey = mr->lkey };

			memset(buf, k, BUF_LEN);
			prefetch(pd, k & 1 ? IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT :
				 IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, flags, &sge);
			if ((mode & 1) && k % 3 == 0)
				madvise(buf, BUF_LEN / 2, MADV_DONTNEED);
			if ((mode & 2) && k % 4 == 1) {
				pid_t child = fork();

				if (!child)
					_exit(0);
				waitpid(child, NULL, 0);
			}
			prefetch(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT,
				 flags, &sge);
			if ((mode & 4) && k == 5) {
				struct ibv_sge half = sge;

				/* Walks for munmap() to race. */
				half.addr += BUF_LEN / 2;
				half.length = BUF_LEN / 2;
				for (int i = 0; i < 4; i++)
					prefetch(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT,
						 flags, &half);
				munmap(buf + BUF_LEN / 2, BUF_LEN / 2);
				mmap(buf + BUF_LEN / 2, BUF_LEN / 2,
				     PROT_READ | PROT_WRITE,
				     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
			}
		}
		ibv_dereg_mr(mr);
		munmap(buf, BUF_LEN);
	}
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
