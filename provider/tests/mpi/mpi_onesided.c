/* One-sided MPI over the provider (Open MPI's osc rdma on btl ofi, which
 * maps MPI_Put / MPI_Get / MPI_Accumulate / MPI_Fetch_and_op /
 * MPI_Compare_and_swap onto fi_write / fi_read / fi_atomic /
 * fi_fetch_atomic / fi_compare_atomic): every rank exposes a window and
 * works on every other rank's under the three kinds of epoch — fence
 * (active target), post-start-complete-wait (PSCW), and lock / unlock and
 * lock_all with flush (passive target) — checking the data each time.
 * Prints "mpi_onesided rank R of N: F failures". */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WORDS 4096

static int rank, size, failures;

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			failures++;                                            \
			fprintf(stderr, "rank %d: %s:%d: ", rank, __FILE__,    \
				__LINE__);                                     \
			fprintf(stderr, __VA_ARGS__);                          \
			fprintf(stderr, "\n");                                 \
		}                                                              \
	} while (0)

static int64_t value(int from, int to, int i, int round)
{
	return ((int64_t)from << 40) ^ ((int64_t)to << 32) ^ ((int64_t)round << 24) ^ i;
}

/* Fence: every rank puts a block into each other rank's window, reads one
 * back with MPI_Get, and accumulates into a shared counter word. */
static void fence_epochs(MPI_Win win, int64_t *base)
{
	int64_t *get = calloc(WORDS, sizeof(int64_t));
	int64_t *put = calloc(WORDS, sizeof(int64_t));
	int block = WORDS / 2 / size; /* words [0, WORDS/2): one block per origin */
	for (int round = 0; round < 3; round++) {
		memset(base, 0, WORDS * sizeof(int64_t));
		MPI_Win_fence(0, win);
		for (int t = 0; t < size; t++) {
			for (int i = 0; i < block; i++)
				put[t * block + i] = value(rank, t, i, round);
			MPI_Put(&put[t * block], block, MPI_INT64_T, t, rank * block, block,
				MPI_INT64_T, win);
			int64_t one = rank + 1;
			MPI_Accumulate(&one, 1, MPI_INT64_T, t, WORDS - 1, 1, MPI_INT64_T, MPI_SUM,
				       win);
		}
		MPI_Win_fence(0, win);
		for (int o = 0; o < size; o++)
			for (int i = 0; i < block; i++)
				CHECK(base[o * block + i] == value(o, rank, i, round),
				      "fence round %d: word %d from %d", round, i, o);
		CHECK(base[WORDS - 1] == (int64_t)size * (size + 1) / 2,
		      "fence accumulate %lld", (long long)base[WORDS - 1]);
		/* Read back what we wrote at the next rank. */
		int t = (rank + 1) % size;
		MPI_Get(get, block, MPI_INT64_T, t, rank * block, block, MPI_INT64_T, win);
		MPI_Win_fence(0, win);
		for (int i = 0; i < block; i++)
			CHECK(get[i] == value(rank, t, i, round), "fence get %d", i);
	}
	free(get);
	free(put);
}

/* PSCW: rank r exposes its window to its left neighbour, which puts and
 * accumulates into it. */
static void pscw_epochs(MPI_Win win, int64_t *base)
{
	MPI_Group world, from, to;
	MPI_Comm_group(MPI_COMM_WORLD, &world);
	int left = (rank + size - 1) % size, right = (rank + 1) % size;
	MPI_Group_incl(world, 1, &left, &from);
	MPI_Group_incl(world, 1, &right, &to);
	for (int round = 0; round < 3; round++) {
		memset(base, 0, WORDS * sizeof(int64_t));
		MPI_Barrier(MPI_COMM_WORLD);
		int64_t src[64];
		for (int i = 0; i < 64; i++)
			src[i] = value(rank, right, i, round);
		MPI_Win_post(from, 0, win);
		MPI_Win_start(to, 0, win);
		MPI_Put(src, 64, MPI_INT64_T, right, 100, 64, MPI_INT64_T, win);
		int64_t add = 7;
		MPI_Accumulate(&add, 1, MPI_INT64_T, right, 0, 1, MPI_INT64_T, MPI_SUM, win);
		MPI_Win_complete(win);
		MPI_Win_wait(win);
		for (int i = 0; i < 64; i++)
			CHECK(base[100 + i] == value(left, rank, i, round), "pscw word %d", i);
		CHECK(base[0] == 7, "pscw accumulate %lld", (long long)base[0]);
	}
	MPI_Group_free(&from);
	MPI_Group_free(&to);
	MPI_Group_free(&world);
}

/* Passive target: rank 0's window holds a counter every rank increments
 * with MPI_Fetch_and_op, and a lock word taken with MPI_Compare_and_swap;
 * MPI_Put / MPI_Get under exclusive locks; lock_all with flush. */
static void passive_epochs(MPI_Win win, int64_t *base)
{
	const int n = 50;
	memset(base, 0, WORDS * sizeof(int64_t));
	MPI_Barrier(MPI_COMM_WORLD);
	int64_t one = 1, seen = -1, seen_max = -1;
	for (int i = 0; i < n; i++) {
		MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
		MPI_Fetch_and_op(&one, &seen, MPI_INT64_T, 0, 10, MPI_SUM, win);
		MPI_Win_unlock(0, win);
		CHECK(seen >= 0 && seen < (int64_t)n * size, "fetch_and_op saw %lld",
		      (long long)seen);
		if (seen > seen_max)
			seen_max = seen;
	}
	/* A spin lock in rank 0's word 20: acquire with compare-and-swap, then
	 * a read-modify-write of word 21 that only the holder does. Rank 0
	 * does not take part: Open MPI 4.1's osc rdma hands the ofi BTL a
	 * compare-and-swap on the calling rank's own window without its
	 * registration handle, which the BTL dereferences (a crash in
	 * mca_btl_ofi_acswap, before the provider is called). */
	for (int i = 0; i < 20 && rank != 0; i++) {
		int64_t unlocked = 0, me = rank + 1, old = -1;
		MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
		do {
			MPI_Compare_and_swap(&me, &unlocked, &old, MPI_INT64_T, 0, 20, win);
			MPI_Win_flush(0, win);
		} while (old != 0);
		int64_t v;
		MPI_Get(&v, 1, MPI_INT64_T, 0, 21, 1, MPI_INT64_T, win);
		MPI_Win_flush(0, win);
		v += 1;
		MPI_Put(&v, 1, MPI_INT64_T, 0, 21, 1, MPI_INT64_T, win);
		MPI_Win_flush(0, win);
		MPI_Compare_and_swap(&unlocked, &me, &old, MPI_INT64_T, 0, 20, win);
		MPI_Win_unlock(0, win);
		CHECK(old == me, "lock word held by %lld", (long long)old);
	}
	/* Rank 0 swaps rank 1's word 40 from 0 to 99, then fails to swap it
	 * from 0 again. */
	if (rank == 0) {
		int64_t zero = 0, v = 99, old = -1;
		MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
		MPI_Compare_and_swap(&v, &zero, &old, MPI_INT64_T, 1, 40, win);
		MPI_Win_flush(1, win);
		CHECK(old == 0, "cas old %lld", (long long)old);
		v = 5;
		MPI_Compare_and_swap(&v, &zero, &old, MPI_INT64_T, 1, 40, win);
		MPI_Win_unlock(1, win);
		CHECK(old == 99, "failed cas old %lld", (long long)old);
	}
	/* Exclusive lock: a block to the next rank, read back. */
	int t = (rank + 1) % size;
	int64_t blk[256], back[256];
	for (int i = 0; i < 256; i++)
		blk[i] = value(rank, t, i, 9);
	MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, win);
	MPI_Put(blk, 256, MPI_INT64_T, t, 1000, 256, MPI_INT64_T, win);
	MPI_Win_flush(t, win);
	MPI_Get(back, 256, MPI_INT64_T, t, 1000, 256, MPI_INT64_T, win);
	MPI_Win_unlock(t, win);
	CHECK(!memcmp(blk, back, sizeof(blk)), "exclusive put/get");
	/* lock_all: a sum into every rank's word 30, and a swap (MPI_REPLACE,
	 * fi_fetch_atomic FI_ATOMIC_WRITE) of the next rank's word 50. The
	 * accumulates use SUM and REPLACE only: Open MPI 4.1's ofi BTL maps no
	 * other operation (it aborts in to_fi_op on MPI_MAX and the rest). */
	MPI_Win_lock_all(0, win);
	for (int r = 0; r < size; r++) {
		int64_t v = rank * 10;
		MPI_Accumulate(&v, 1, MPI_INT64_T, r, 30, 1, MPI_INT64_T, MPI_SUM, win);
	}
	int64_t mine = 1000 + rank, prev = -1;
	MPI_Fetch_and_op(&mine, &prev, MPI_INT64_T, t, 50, MPI_REPLACE, win);
	MPI_Win_flush_all(win);
	MPI_Win_unlock_all(win);
	CHECK(prev == 0, "swap saw %lld", (long long)prev);
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0) {
		CHECK(base[10] == (int64_t)n * size, "fetch_and_op total %lld", (long long)base[10]);
		CHECK(base[20] == 0, "lock word left %lld", (long long)base[20]);
		CHECK(base[21] == 20 * (size - 1), "locked increments %lld", (long long)base[21]);
	}
	if (rank == 1)
		CHECK(base[40] == 99, "cas target %lld", (long long)base[40]);
	int l = (rank + size - 1) % size;
	for (int i = 0; i < 256; i++)
		CHECK(base[1000 + i] == value(l, rank, i, 9), "exclusive word %d", i);
	CHECK(base[30] == (int64_t)size * (size - 1) / 2 * 10, "sum %lld", (long long)base[30]);
	CHECK(base[50] == 1000 + l, "swapped in %lld", (long long)base[50]);
	(void)seen_max;
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	/* MPI_Win_create on the application's memory: the osc registers it
	 * with the BTL, so every access goes through the network (ranks in
	 * test hosts share a host name, and MPI_Win_allocate would place
	 * "same-node" windows in shared memory instead). */
	int64_t *base = calloc(WORDS, sizeof(int64_t));
	MPI_Win win;
	MPI_Win_create(base, WORDS * sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL,
		       MPI_COMM_WORLD, &win);
	fence_epochs(win, base);
	pscw_epochs(win, base);
	passive_epochs(win, base);
	MPI_Win_free(&win);
	free(base);
	int all = 0;
	MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	printf("mpi_onesided rank %d of %d: %d failures\n", rank, size, failures);
	MPI_Finalize();
	return all ? 1 : 0;
}
