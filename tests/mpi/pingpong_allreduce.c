// SPDX-License-Identifier: GPL-2.0
/*
 * An MPI job for tests/test_mpi_two_kernels.py: rank 0 and rank 1 ping-pong
 * messages of several sizes, every byte of every message checked (each
 * iteration's payload differs), then every rank allreduces vectors of
 * doubles and checks the sums. Prints one line per step; a wrong byte
 * aborts the job (the other rank would wait for a reply), a wrong sum
 * makes it exit 1.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char pattern(int size, int iter, int from, size_t i)
{
	return (unsigned char)(i * 31 + (size_t)size * 7 + iter * 13 + from);
}

static void check(const unsigned char *buf, int size, int iter, int from)
{
	for (size_t i = 0; i < (size_t)size; i++) {
		if (buf[i] != pattern(size, iter, from, i)) {
			printf("pingpong %d bytes: byte %zu of iteration %d from rank %d WRONG\n",
			       size, i, iter, from);
			fflush(stdout);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
	}
}

static void fill(unsigned char *buf, int size, int iter, int from)
{
	for (size_t i = 0; i < (size_t)size; i++)
		buf[i] = pattern(size, iter, from, i);
}

static void pingpong(int rank, int size, int iters, unsigned char *buf)
{
	int peer = !rank;
	double t0 = MPI_Wtime();

	for (int it = 0; it < iters; it++) {
		if (rank == 0) {
			fill(buf, size, it, 0);
			MPI_Send(buf, size, MPI_BYTE, peer, it, MPI_COMM_WORLD);
			MPI_Recv(buf, size, MPI_BYTE, peer, it, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
			check(buf, size, it, 1);
		} else {
			MPI_Recv(buf, size, MPI_BYTE, peer, it, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
			check(buf, size, it, 0);
			fill(buf, size, it, 1);
			MPI_Send(buf, size, MPI_BYTE, peer, it, MPI_COMM_WORLD);
		}
	}
	if (rank == 0)
		printf("pingpong %d bytes x %d: %.1f us per round trip, all checked\n",
		       size, iters, (MPI_Wtime() - t0) / iters * 1e6);
}

static int allreduce(int rank, int ranks, int count)
{
	double *in = malloc(count * sizeof(*in));
	double *out = malloc(count * sizeof(*out));
	int ok = in && out;

	for (int i = 0; ok && i < count; i++)
		in[i] = (rank + 1) * 1000.0 + i;
	if (ok)
		MPI_Allreduce(in, out, count, MPI_DOUBLE, MPI_SUM,
			      MPI_COMM_WORLD);
	/* Sum over ranks r of (r + 1) * 1000 + i: exact in doubles. */
	for (int i = 0; ok && i < count; i++)
		ok = out[i] == ranks * (ranks + 1) / 2 * 1000.0 +
			       (double)ranks * i;
	if (rank == 0)
		printf("allreduce %d doubles over %d ranks: %s\n", count,
		       ranks, ok ? "sums right" : "WRONG SUMS");
	free(in);
	free(out);
	return ok;
}

int main(int argc, char **argv)
{
	static const int sizes[] = { 1, 4096, 65536, 1 << 20 };
	static const int counts[] = { 1, 1024, 262144 };
	int rank, ranks, ok = 1;
	unsigned char *buf;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &ranks);
	buf = malloc(1 << 20);
	if (!buf || ranks < 2)
		MPI_Abort(MPI_COMM_WORLD, 2);
	for (size_t k = 0; k < sizeof(sizes) / sizeof(*sizes); k++)
		if (rank < 2)
			pingpong(rank, sizes[k], sizes[k] > 65536 ? 10 : 50, buf);
	for (size_t k = 0; ok && k < sizeof(counts) / sizeof(*counts); k++) {
		ok = allreduce(rank, ranks, counts[k]);
		MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND,
			      MPI_COMM_WORLD);
	}
	if (rank == 0)
		printf("%s\n", ok ? "mpi job: every check passed" :
				    "mpi job: a check FAILED");
	free(buf);
	MPI_Finalize();
	return ok ? 0 : 1;
}
