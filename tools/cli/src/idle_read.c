/* The cost of a progress call that finds nothing: an RDM endpoint bound to
 * a TX and an RX CQ (as fi_pingpong binds them), one tagged receive
 * posted, then `fi_cq_read` on the two CQs in turn with nothing arriving —
 * what an application polling for a reply, or an MPI rank in MPI_Test,
 * repeats. For `ofi-xdp local-bench`, which compiles this file with cc.
 *
 *   idle_read <provider> <local ip> <port> <reads>
 *     prints "ns_per_read <x>": CPU time of this thread per read, the best
 *     of five runs of <reads> reads (the least disturbed by other work).
 *
 * Exit status 0 = done, 2 = a libfabric error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#define TRY(call)                                                              \
	do {                                                                   \
		int _r = (int)(call);                                          \
		if (_r) {                                                      \
			fprintf(stderr, "idle_read: %s: %d %s\n", #call, _r,   \
				fi_strerror(-_r));                             \
			exit(2);                                               \
		}                                                              \
	} while (0)

static double thread_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: idle_read provider ip port reads\n");
		return 2;
	}
	long reads = atol(argv[4]);
	struct fi_info *hints = fi_allocinfo(), *info;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_TAGGED | FI_MSG;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->fabric_attr->prov_name = strdup(argv[1]); /* fi_freeinfo frees it */
	TRY(fi_getinfo(FI_VERSION(1, 17), argv[2], argv[3], FI_SOURCE, hints,
		       &info));
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *tx, *rx;
	struct fid_ep *ep;
	TRY(fi_fabric(info->fabric_attr, &fabric, NULL));
	TRY(fi_domain(fabric, info, &domain, NULL));
	struct fi_av_attr av_attr = {.type = FI_AV_MAP};
	TRY(fi_av_open(domain, &av_attr, &av, NULL));
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .size = 128};
	TRY(fi_cq_open(domain, &cq_attr, &tx, NULL));
	TRY(fi_cq_open(domain, &cq_attr, &rx, NULL));
	TRY(fi_endpoint(domain, info, &ep, NULL));
	TRY(fi_ep_bind(ep, &av->fid, 0));
	TRY(fi_ep_bind(ep, &tx->fid, FI_TRANSMIT));
	TRY(fi_ep_bind(ep, &rx->fid, FI_RECV));
	TRY(fi_enable(ep));
	static char buf[64];
	static struct fi_context2 ctx;
	TRY(fi_trecv(ep, buf, sizeof buf, NULL, FI_ADDR_UNSPEC, 1, 0, &ctx));
	struct fi_cq_tagged_entry e;
	double best = -1;
	for (int run = 0; run < 5; run++) {
		double start = thread_ns();
		for (long i = 0; i < reads; i++) {
			ssize_t n = fi_cq_read((i & 1) ? tx : rx, &e, 1);
			if (n != -FI_EAGAIN) {
				fprintf(stderr, "idle_read: fi_cq_read %zd\n", n);
				return 2;
			}
		}
		double ns = (thread_ns() - start) / (double)reads;
		if (best < 0 || ns < best)
			best = ns;
	}
	printf("ns_per_read %.1f\n", best);
	fi_close(&ep->fid);
	fi_close(&tx->fid);
	fi_close(&rx->fid);
	fi_close(&av->fid);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return 0;
}
