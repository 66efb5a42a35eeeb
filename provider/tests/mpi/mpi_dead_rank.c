/* A rank killed mid-run (SIGKILL, as by the OOM killer or a node agent), run
 * by tests/mpi.rs with three or more ranks. The last rank is the victim: it
 * exchanges messages with everyone, then kills itself. Rank 0 then sends to
 * it and must get an error back (MPI_ERRORS_RETURN), not wait for ever; the
 * ranks in between keep exchanging verified messages among themselves (at
 * least two of them; with one, it exchanges with rank 0). Every survivor
 * prints one line and leaves with _exit: MPI_Finalize's fence would wait
 * for the dead rank. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BIG (4u << 20)

static int failures;

#define CHECK(c)                                                                \
	do {                                                                    \
		if (!(c)) {                                                     \
			fprintf(stderr, "check failed at line %d: %s\n", __LINE__, #c); \
			failures++;                                             \
		}                                                               \
	} while (0)

static unsigned char pattern(size_t i, int seed)
{
	return (unsigned char)(i * 7 + (size_t)seed * 13 + (i >> 9));
}

/* Every survivor sends `len` verified bytes to the next survivor (0 .. size-2,
 * in a ring) and receives from the previous one, `rounds` times. */
static void survivors_ring(int rank, int size, size_t len, int rounds)
{
	int n = size - 1;
	int next = (rank + 1) % n, prev = (rank + n - 1) % n;
	unsigned char *out = malloc(len), *in = malloc(len);
	for (int r = 0; r < rounds; r++) {
		for (size_t i = 0; i < len; i++)
			out[i] = pattern(i, rank * 100 + r);
		memset(in, 0, len);
		int rc = MPI_Sendrecv(out, (int)len, MPI_BYTE, next, 7, in, (int)len, MPI_BYTE, prev,
				      7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		CHECK(rc == MPI_SUCCESS);
		for (size_t i = 0; i < len && rc == MPI_SUCCESS; i++) {
			if (in[i] != pattern(i, prev * 100 + r)) {
				CHECK(in[i] == pattern(i, prev * 100 + r));
				break;
			}
		}
	}
	free(out);
	free(in);
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size < 3) {
		fprintf(stderr, "needs at least 3 ranks\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	int victim = size - 1;
	/* Sessions with the victim exist before it dies. */
	int token = rank;
	if (rank == victim) {
		for (int r = 0; r < victim; r++)
			CHECK(MPI_Send(&token, 1, MPI_INT, r, 1, MPI_COMM_WORLD) == MPI_SUCCESS);
	} else {
		int got = -1;
		CHECK(MPI_Recv(&got, 1, MPI_INT, victim, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE) ==
		      MPI_SUCCESS);
		CHECK(got == victim);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == victim) {
		fflush(stdout);
		raise(SIGKILL);
	}
	sleep(1);
	if (rank == 0) {
		/* A rendezvous-sized message: its sender waits for the victim's
		 * answer, which never comes. */
		unsigned char *big = calloc(1, BIG);
		int rc = MPI_Send(big, (int)BIG, MPI_BYTE, victim, 2, MPI_COMM_WORLD);
		int cls = MPI_SUCCESS;
		if (rc != MPI_SUCCESS)
			MPI_Error_class(rc, &cls);
		printf("mpi_dead_rank rank 0: send to the killed rank returned %s (class %d)\n",
		       rc == MPI_SUCCESS ? "success" : "an error", cls);
		CHECK(rc != MPI_SUCCESS);
		free(big);
	}
	survivors_ring(rank, size, 64, 100);
	survivors_ring(rank, size, 1u << 20, 4);
	printf("mpi_dead_rank rank %d of %d: %d failures\n", rank, size, failures);
	fflush(stdout);
	fflush(stderr);
	_exit(failures ? 1 : 0);
}
