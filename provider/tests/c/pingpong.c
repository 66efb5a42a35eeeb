/* Ping-pong of 64-byte RDM messages between a client and a server, for the
 * tests of several processes sharing one AF_XDP queue (tests/shared_queue.rs).
 * argv: <iface> <local IP> <peer IP> <server|client> <rendezvous dir> <name>
 *       <milliseconds>
 * The client pings for <milliseconds>, then sends a last message saying
 * so (first byte 1) and prints "pingpong <name>: <round trips> round trips,
 * <one-way us> us one way". The server answers every ping until that one.
 * Addresses are exchanged through <dir>/<name>.{server,client}.addr.
 * A ping left unanswered for 10 s fails the client (exit 3): it never
 * hangs.
 * With PINGPONG_ALL_OPEN=<n> in the environment, each process waits after the
 * exchange until <n> address files are in <dir> (every endpoint of the test
 * enabled, in its queue's group) before the first ping: on a loaded machine
 * processes start seconds apart, and pairs that must overlap would not. */
#include <dirent.h>

#include "xt.h"

#define SIZE 64

static struct xt_res r;
static struct fid_av *av;
static struct fid_cq *cq;
static struct fid_ep *ep;
static fi_addr_t peer;

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void exchange_names(const char *dir, const char *name, const char *role)
{
	uint8_t me[64], them[64];
	size_t len = sizeof(me), n = 0;
	char path[512], tmp[520];
	REQUIRE(fi_getname(&ep->fid, me, &len) == 0);
	snprintf(path, sizeof(path), "%s/%s.%s.addr", dir, name, role);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "wb");
	REQUIRE(f && fwrite(me, 1, len, f) == len);
	fclose(f);
	REQUIRE(rename(tmp, path) == 0);
	snprintf(path, sizeof(path), "%s/%s.%s.addr", dir, name,
		 strcmp(role, "server") ? "server" : "client");
	for (int i = 0; i < 3000 && n == 0; i++) {
		f = fopen(path, "rb");
		if (f) {
			n = fread(them, 1, sizeof(them), f);
			fclose(f);
		} else {
			usleep(10000);
		}
	}
	REQUIRE(n == len);
	REQUIRE(fi_av_insert(av, them, 1, &peer, 0, NULL) == 1);
}

/* Address files (<name>.<role>.addr) in dir. */
static int addr_files(const char *dir)
{
	DIR *d = opendir(dir);
	int n = 0;
	REQUIRE(d);
	for (struct dirent *e; (e = readdir(d));) {
		size_t len = strlen(e->d_name);
		n += len > 5 && !strcmp(e->d_name + len - 5, ".addr");
	}
	closedir(d);
	return n;
}

/* PINGPONG_ALL_OPEN: waits (driving progress) until that many endpoints
 * published their address in dir; at most 60 s, then fails (exit 3). */
static void wait_all_open(const char *dir)
{
	const char *want = getenv("PINGPONG_ALL_OPEN");
	if (!want)
		return;
	double deadline = now_us() + 60e6;
	while (addr_files(dir) < atoi(want)) {
		if (now_us() > deadline) {
			fprintf(stderr, "pingpong: fewer than %s endpoints open after 60 s\n", want);
			exit(3);
		}
		fi_cq_read(cq, NULL, 0);
		usleep(1000);
	}
}

/* Waits for one completion; 0 on success, -1 after 10 s without one. */
static int wait_one(void)
{
	struct fi_cq_entry e;
	double deadline = now_us() + 10e6;
	for (;;) {
		ssize_t n = fi_cq_read(cq, &e, 1);
		if (n == 1)
			return 0;
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};
			fi_cq_readerr(cq, &err, 0);
			fprintf(stderr, "completion error: %s\n", fi_strerror(err.err));
			return -1;
		}
		if (now_us() > deadline)
			return -1;
	}
}

int main(int argc, char **argv)
{
	xt_init(argc, argv);
	REQUIRE(argc >= 8);
	const char *role = argv[4], *dir = argv[5], *name = argv[6];
	double ms = atof(argv[7]);
	int client = !strcmp(role, "client");
	xt_open(&r, FI_EP_RDM, FI_MSG);
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_CONTEXT};
	REQUIRE(fi_av_open(r.domain, &av_attr, &av, NULL) == 0);
	REQUIRE(fi_cq_open(r.domain, &cq_attr, &cq, NULL) == 0);
	ep = xt_enabled_ep(r.domain, r.info, av, cq);
	exchange_names(dir, name, role);
	wait_all_open(dir);

	uint8_t out[SIZE] = {0}, in[SIZE];
	long trips = 0;
	double start = now_us(), end = start + ms * 1e3;
	for (;;) {
		REQUIRE(fi_recv(ep, in, SIZE, NULL, peer, NULL) == 0);
		if (client) {
			out[0] = now_us() >= end;
			while (fi_send(ep, out, SIZE, NULL, peer, NULL) == -FI_EAGAIN)
				fi_cq_read(cq, NULL, 0);
			/* The send's completion and the pong. */
			if (wait_one() || wait_one()) {
				fprintf(stderr, "pingpong %s: no answer\n", name);
				return 3;
			}
			if (out[0])
				break;
			trips++;
		} else {
			if (wait_one()) {
				/* Nothing for 10 s: the client is gone. */
				fprintf(stderr, "pingpong %s: client silent\n", name);
				return 3;
			}
			int last = in[0];
			while (fi_send(ep, in, SIZE, NULL, peer, NULL) == -FI_EAGAIN)
				fi_cq_read(cq, NULL, 0);
			if (wait_one())
				return 3;
			if (last)
				break;
			trips++;
		}
	}
	double took = now_us() - start;
	if (client)
		printf("pingpong %s: %ld round trips, %.2f us one way\n", name, trips,
		       trips ? took / trips / 2 : 0.0);
	/* Let the last message's acknowledgement go before closing. */
	for (double t = now_us(); now_us() < t + 20e3;)
		fi_cq_read(cq, NULL, 0);
	CHECK_RET(fi_close(&ep->fid), 0);
	CHECK_RET(fi_close(&cq->fid), 0);
	CHECK_RET(fi_close(&av->fid), 0);
	xt_close(&r);
	return xt_done("pingpong");
}
