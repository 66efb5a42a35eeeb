/* Incast: many senders stream messages to one receiver over a libfabric
 * provider (FI_EP_RDM, FI_MSG), for `ofi-xdp incast`, which compiles this
 * file with cc and runs one process per test host.
 *
 *   incast -s <provider> <local ip> <port> <total messages> <size>
 *     the receiver: prints "ready" once it listens and reads the start
 *     (CLOCK_REALTIME ns) from stdin; when every message has arrived, prints
 *     "server bytes <n> usec <t>" (t from the start).
 *   incast -c <provider> <server ip> <port> <messages> <size>
 *     a sender: prints "ready" once its endpoint is set up, reads the start
 *     from stdin and waits for it, keeps 8 sends outstanding, prints
 *     "client bytes <n> usec <t>" when all completed.
 *
 * The start is given once every process is ready, so every sender starts
 * at the same instant and each one's time is its share of the same
 * contended run, not of another's set-up. Exit status 0 = done, 2 = a
 * libfabric error or no start time. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#define WINDOW 8
#define NBUF 16

#define TRY(call)                                                              \
	do {                                                                   \
		int _r = (int)(call);                                          \
		if (_r) {                                                      \
			fprintf(stderr, "incast: %s: %d %s\n", #call, _r,      \
				fi_strerror(-_r));                             \
			exit(2);                                               \
		}                                                              \
	} while (0)

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

struct res {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	char *buf;
	struct fid_mr *mr;
	void *desc;
};

static void open_all(struct res *r, const char *prov, const char *node,
		     const char *port, int server, size_t size)
{
	struct fi_info *h = fi_allocinfo();
	h->fabric_attr->prov_name = strdup(prov);
	h->ep_attr->type = FI_EP_RDM;
	h->caps = FI_MSG;
	h->mode = FI_CONTEXT;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
				  FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	TRY(fi_getinfo(FI_VERSION(1, 17), node, port, server ? FI_SOURCE : 0, h,
		       &r->info));
	fi_freeinfo(h);
	TRY(fi_fabric(r->info->fabric_attr, &r->fabric, NULL));
	TRY(fi_domain(r->fabric, r->info, &r->domain, NULL));
	/* Waiting (sread) rather than spinning: here many processes share a
	 * few cores, and a spinning sender would take the receiver's. */
	struct fi_cq_attr cq = {.format = FI_CQ_FORMAT_CONTEXT,
				.size = 1024,
				.wait_obj = FI_WAIT_UNSPEC};
	TRY(fi_cq_open(r->domain, &cq, &r->cq, NULL));
	struct fi_av_attr av = {.type = FI_AV_TABLE};
	TRY(fi_av_open(r->domain, &av, &r->av, NULL));
	TRY(fi_endpoint(r->domain, r->info, &r->ep, NULL));
	TRY(fi_ep_bind(r->ep, &r->cq->fid, FI_TRANSMIT | FI_RECV));
	TRY(fi_ep_bind(r->ep, &r->av->fid, 0));
	TRY(fi_enable(r->ep));
	r->buf = calloc(NBUF, size);
	if (!r->buf)
		exit(2);
	if (r->info->domain_attr->mr_mode & FI_MR_LOCAL) {
		TRY(fi_mr_reg(r->domain, r->buf, NBUF * size,
			      FI_SEND | FI_RECV, 0, 0, 0, &r->mr, NULL));
		r->desc = fi_mr_desc(r->mr);
	}
}

/* One completion (waiting for it); its context. */
static void *wait_one(struct res *r)
{
	struct fi_cq_entry e;
	for (;;) {
		ssize_t n = fi_cq_sread(r->cq, &e, 1, NULL, 100);
		if (n == 1)
			return e.op_context;
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};
			fi_cq_readerr(r->cq, &err, 0);
			fprintf(stderr, "incast: completion error %d %s\n",
				err.err, fi_strerror(err.err));
			exit(2);
		}
		if (n != -FI_EAGAIN) {
			fprintf(stderr, "incast: fi_cq_read %zd\n", n);
			exit(2);
		}
	}
}

static void wait_start(uint64_t start)
{
	while (now_ns() < start) {
		uint64_t left = start - now_ns();
		if (left > 2000000) {
			struct timespec t = {0, (long)(left - 1000000)};
			nanosleep(&t, NULL);
		}
	}
}

/* Says we are set up, and returns the start time the runner then sends. */
static uint64_t ready_then_start(void)
{
	printf("ready\n");
	fflush(stdout);
	char line[64];
	if (!fgets(line, sizeof(line), stdin)) {
		fprintf(stderr, "incast: no start time on stdin\n");
		exit(2);
	}
	return strtoull(line, NULL, 10);
}

int main(int argc, char **argv)
{
	if (argc != 7) {
		fprintf(stderr, "usage: incast -s|-c provider ip port messages "
				"size (the start time comes on stdin)\n");
		return 2;
	}
	int server = strcmp(argv[1], "-s") == 0;
	long msgs = atol(argv[5]);
	size_t size = (size_t)atol(argv[6]);
	uint64_t start = 0;
	struct res r = {0};
	open_all(&r, argv[2], argv[3], argv[4], server, size);
	static struct fi_context ctx[NBUF];
	uint64_t last = 0;
	if (server) {
		for (int i = 0; i < NBUF; i++)
			TRY(fi_recv(r.ep, r.buf + i * size, size, r.desc,
				    FI_ADDR_UNSPEC, &ctx[i]));
		start = ready_then_start();
		for (long got = 0; got < msgs; got++) {
			struct fi_context *c = wait_one(&r);
			int i = (int)(c - ctx);
			last = now_ns();
			if (got + NBUF < msgs)
				TRY(fi_recv(r.ep, r.buf + i * size, size,
					    r.desc, FI_ADDR_UNSPEC, &ctx[i]));
		}
		printf("server bytes %" PRIu64 " usec %.1f\n",
		       (uint64_t)msgs * size, (double)(last - start) / 1e3);
	} else {
		fi_addr_t srv;
		if (fi_av_insert(r.av, r.info->dest_addr, 1, &srv, 0, NULL) != 1) {
			fprintf(stderr, "incast: fi_av_insert failed\n");
			return 2;
		}
		start = ready_then_start();
		wait_start(start);
		long posted = 0, done = 0;
		while (done < msgs) {
			while (posted < msgs && posted - done < WINDOW) {
				int i = (int)(posted % WINDOW);
				ssize_t ret = fi_send(r.ep, r.buf + i * size, size,
						      r.desc, srv, &ctx[i]);
				if (ret == -FI_EAGAIN)
					break;
				TRY(ret);
				posted++;
			}
			if (posted == done) {
				/* Nothing in flight (the provider said EAGAIN,
				 * e.g. while connecting): drive progress. */
				struct fi_cq_entry e;
				fi_cq_read(r.cq, &e, 0);
				continue;
			}
			wait_one(&r);
			done++;
		}
		last = now_ns();
		printf("client bytes %" PRIu64 " usec %.1f\n",
		       (uint64_t)msgs * size, (double)(last - start) / 1e3);
	}
	fflush(stdout);
	if (r.mr)
		fi_close(&r.mr->fid);
	fi_close(&r.ep->fid);
	fi_close(&r.av->fid);
	fi_close(&r.cq->fid);
	fi_close(&r.domain->fid);
	fi_close(&r.fabric->fid);
	fi_freeinfo(r.info);
	return 0;
}
