/* An MPI program over the xdp provider (Open MPI, pml cm + mtl ofi), run by
 * tests/mpi.rs with two or more ranks. It checks what MPI applications lean
 * on: blocking ping-pong with data verification from 1 B to 4 MiB (eager and
 * rendezvous), many non-blocking messages in flight with MPI_ANY_SOURCE and
 * MPI_ANY_TAG, 10,000 receives posted ahead of their sends, 10,000 messages
 * arriving before any receive for them, and collectives.
 * Prints one line per rank; exit status 0 only when every check passed. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define CHECK(c)                                                               \
	do {                                                                   \
		if (!(c)) {                                                    \
			fprintf(stderr, "check failed at line %d: %s\n", __LINE__, #c); \
			failures++;                                            \
		}                                                              \
	} while (0)

static unsigned char pattern(size_t i, int seed)
{
	return (unsigned char)(i * 7 + (size_t)seed * 13 + (i >> 9));
}

/* Rank 0 sends, rank 1 checks and echoes each byte + 1, rank 0 checks. */
static void pingpong(int rank)
{
	for (size_t n = 1; n <= (4u << 20); n *= 4) {
		unsigned char *b = malloc(n);
		CHECK(b != NULL);
		if (!b)
			return;
		for (int it = 0; it < 10; it++) {
			int seed = (int)n + it;
			if (rank == 0) {
				for (size_t i = 0; i < n; i++)
					b[i] = pattern(i, seed);
				MPI_Send(b, (int)n, MPI_BYTE, 1, it, MPI_COMM_WORLD);
				MPI_Recv(b, (int)n, MPI_BYTE, 1, it, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				for (size_t i = 0; i < n; i++)
					if (b[i] != (unsigned char)(pattern(i, seed) + 1)) {
						CHECK(!"echo differs");
						break;
					}
			} else if (rank == 1) {
				MPI_Status st;
				MPI_Recv(b, (int)n, MPI_BYTE, 0, it, MPI_COMM_WORLD, &st);
				int count = 0;
				MPI_Get_count(&st, MPI_BYTE, &count);
				CHECK((size_t)count == n);
				for (size_t i = 0; i < n; i++) {
					if (b[i] != pattern(i, seed)) {
						CHECK(!"received data differs");
						break;
					}
				}
				for (size_t i = 0; i < n; i++)
					b[i]++;
				MPI_Send(b, (int)n, MPI_BYTE, 0, it, MPI_COMM_WORLD);
			}
		}
		free(b);
	}
}

/* Every rank sends 64 small messages to every other rank at once; receives
 * use MPI_ANY_SOURCE / MPI_ANY_TAG and check sender and payload. */
static void all_to_all_nonblocking(int rank, int size)
{
	enum { N = 64 };
	int peers = size - 1;
	int *out = calloc((size_t)(peers * N), sizeof(int));
	int *in = calloc((size_t)(peers * N), sizeof(int));
	MPI_Request *req = calloc((size_t)(2 * peers * N), sizeof(MPI_Request));
	CHECK(out && in && req);
	if (!out || !in || !req)
		return;
	int k = 0;
	for (int i = 0; i < peers * N; i++)
		MPI_Irecv(&in[i], 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &req[k++]);
	int j = 0;
	for (int p = 0; p < size; p++) {
		if (p == rank)
			continue;
		for (int m = 0; m < N; m++, j++) {
			out[j] = rank * 1000 + m;
			MPI_Isend(&out[j], 1, MPI_INT, p, m, MPI_COMM_WORLD, &req[k++]);
		}
	}
	MPI_Status *st = calloc((size_t)k, sizeof(MPI_Status));
	CHECK(st != NULL);
	MPI_Waitall(k, req, st ? st : MPI_STATUSES_IGNORE);
	/* Per sender, messages arrive in order (MPI's non-overtaking rule). */
	int *next = calloc((size_t)size, sizeof(int));
	for (int i = 0; st && next && i < peers * N; i++) {
		int src = st[i].MPI_SOURCE;
		CHECK(src >= 0 && src < size && src != rank);
		if (src < 0 || src >= size)
			continue;
		CHECK(in[i] == src * 1000 + next[src]);
		CHECK(st[i].MPI_TAG == next[src]);
		next[src]++;
	}
	free(next);
	free(st);
	free(req);
	free(in);
	free(out);
}

static void collectives(int rank, int size)
{
	long v = rank + 1, sum = 0;
	MPI_Allreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	CHECK(sum == (long)size * (size + 1) / 2);
	int big[4096];
	for (int i = 0; i < 4096; i++)
		big[i] = rank == 0 ? i * 3 : -1;
	MPI_Bcast(big, 4096, MPI_INT, 0, MPI_COMM_WORLD);
	for (int i = 0; i < 4096; i++)
		if (big[i] != i * 3) {
			CHECK(!"broadcast differs");
			break;
		}
	MPI_Barrier(MPI_COMM_WORLD);
}

/* Ranks 0 and 1 each post 10,000 receives before either sends. MPI retries
 * a refused receive with progress but never gets to its sends, so an
 * endpoint that accepted fewer posted receives (say 4,096) would leave both
 * ranks waiting for ever. */
#define PREPOSTED 10000
static void preposted_receives(int rank)
{
	if (rank > 1) {
		MPI_Barrier(MPI_COMM_WORLD);
		return;
	}
	int peer = 1 - rank;
	int *in = malloc(sizeof(int) * PREPOSTED), *out = malloc(sizeof(int) * PREPOSTED);
	MPI_Request *r = malloc(sizeof(MPI_Request) * 2 * PREPOSTED);
	CHECK(in && out && r);
	if (!in || !out || !r)
		MPI_Abort(MPI_COMM_WORLD, 2);
	for (int i = 0; i < PREPOSTED; i++) {
		in[i] = -1;
		MPI_Irecv(&in[i], 1, MPI_INT, peer, i, MPI_COMM_WORLD, &r[i]);
	}
	for (int i = 0; i < PREPOSTED; i++) {
		out[i] = rank * 1000000 + i;
		MPI_Isend(&out[i], 1, MPI_INT, peer, i, MPI_COMM_WORLD, &r[PREPOSTED + i]);
	}
	MPI_Waitall(2 * PREPOSTED, r, MPI_STATUSES_IGNORE);
	int bad = 0;
	for (int i = 0; i < PREPOSTED; i++)
		bad += in[i] != peer * 1000000 + i;
	CHECK(bad == 0);
	free(in);
	free(out);
	free(r);
	MPI_Barrier(MPI_COMM_WORLD);
}

/* Rank 1 sends 10,000 messages (20 MB) that rank 0 has no receive for,
 * then a "ready" message on another tag; rank 0 waits for "ready" before it
 * receives the rest. Messages from one sender arrive in order, so the
 * provider must buffer them all: with a lower limit (say 8,192 messages or
 * 16 MiB) "ready" would wait behind the refused ones for ever. */
#define STORM 10000
static size_t storm_len(int i)
{
	return i % 4 == 0 ? 8000 : 8;
}

static void unexpected_storm(int rank)
{
	if (rank == 1) {
		unsigned char *b = malloc(8000 * (size_t)STORM);
		MPI_Request *r = malloc(sizeof(MPI_Request) * STORM);
		CHECK(b && r);
		if (!b || !r)
			MPI_Abort(MPI_COMM_WORLD, 2);
		for (int i = 0; i < STORM; i++) {
			unsigned char *m = b + 8000 * (size_t)i;
			for (size_t k = 0; k < storm_len(i); k++)
				m[k] = pattern(k, i);
			MPI_Isend(m, (int)storm_len(i), MPI_BYTE, 0, i, MPI_COMM_WORLD, &r[i]);
		}
		int ready = 1;
		MPI_Send(&ready, 1, MPI_INT, 0, STORM + 1, MPI_COMM_WORLD);
		MPI_Waitall(STORM, r, MPI_STATUSES_IGNORE);
		free(b);
		free(r);
	} else if (rank == 0) {
		int ready = 0, bad = 0;
		unsigned char m[8000];
		MPI_Recv(&ready, 1, MPI_INT, 1, STORM + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		for (int i = STORM - 1; i >= 0; i--) {
			MPI_Status st;
			int n = -1;
			MPI_Recv(m, (int)sizeof(m), MPI_BYTE, 1, i, MPI_COMM_WORLD, &st);
			MPI_Get_count(&st, MPI_BYTE, &n);
			bad += n != (int)storm_len(i);
			for (size_t k = 0; n == (int)storm_len(i) && k < storm_len(i); k++)
				bad += m[k] != pattern(k, i);
		}
		CHECK(ready == 1 && bad == 0);
	}
	MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size < 2) {
		fprintf(stderr, "needs at least 2 ranks\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	pingpong(rank);
	all_to_all_nonblocking(rank, size);
	preposted_receives(rank);
	unexpected_storm(rank);
	collectives(rank, size);
	printf("mpi_check rank %d of %d: %d failures\n", rank, size, failures);
	fflush(stdout);
	MPI_Finalize();
	return failures ? 1 : 0;
}
