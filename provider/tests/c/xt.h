/* Shared helpers for the xdp provider's C tests. Each test program is run
 * by tests/c_suite.rs inside a test-host network namespace holding one veth
 * end, with FI_PROVIDER_PATH pointing at a directory with libxdp-fi.so.
 * argv: <iface> <local IPv4> <peer IPv4>. Exit status 0 = all checks passed. */
#ifndef XT_H
#define XT_H

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_collective.h>

/* The API version asked for: 1.17 unless the build says otherwise (the
 * Debian 13 run, tests/trixie.rs, asks for its headers' own, 2.1). */
#ifndef XT_VERSION
#define XT_VERSION FI_VERSION(1, 17)
#endif
/* libfabric 2.x keeps the rule (provider-specific values set the top bit)
 * without the name. */
#ifndef FI_PROV_SPECIFIC
#define FI_PROV_SPECIFIC (1U << 31)
#endif
/* Our provider-specific address format (src/addr.rs). */
#define FI_ADDR_XDP (FI_PROV_SPECIFIC | 0x5844)
#define XDP_ADDR_LEN 32

static _Atomic int xt_failures; /* atomic: data.c checks from two threads */
static _Atomic int xt_checks;
static const char *xt_iface, *xt_local_ip, *xt_peer_ip;

#define CHECK(cond)                                                            \
	do {                                                                   \
		xt_checks++;                                                   \
		if (!(cond)) {                                                 \
			xt_failures++;                                         \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, \
				__LINE__, #cond);                              \
		}                                                              \
	} while (0)

/* Check an int-returning call's exact result, printing both on mismatch. */
#define CHECK_RET(call, want)                                                  \
	do {                                                                   \
		long long _got = (long long)(call);                            \
		long long _want = (long long)(want);                           \
		xt_checks++;                                                   \
		if (_got != _want) {                                           \
			xt_failures++;                                         \
			fprintf(stderr,                                        \
				"%s:%d: %s returned %lld (%s), want %lld "     \
				"(%s)\n",                                      \
				__FILE__, __LINE__, #call, _got,               \
				fi_strerror((int)-_got), _want,                \
				fi_strerror((int)-_want));                     \
		}                                                              \
	} while (0)

/* Abort the program: later checks depend on this one. */
#define REQUIRE(cond)                                                          \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: REQUIRE failed: %s\n",         \
				__FILE__, __LINE__, #cond);                    \
			exit(2);                                               \
		}                                                              \
	} while (0)

static void xt_init(int argc, char **argv)
{
	REQUIRE(argc >= 4);
	xt_iface = argv[1];
	xt_local_ip = argv[2];
	xt_peer_ip = argv[3];
}

/* Two-process tests exchange addresses and go-aheads through files in a
 * rendezvous directory (argv[5]); each file appears whole (rename). */
static const char *xt_dir;

static void xt_put_file(const char *name, const void *b, size_t n)
{
	char p[512], tmp[520];
	snprintf(p, sizeof(p), "%s/%s", xt_dir, name);
	snprintf(tmp, sizeof(tmp), "%s.tmp", p);
	FILE *f = fopen(tmp, "w");
	REQUIRE(f && fwrite(b, 1, n, f) == n);
	fclose(f);
	REQUIRE(rename(tmp, p) == 0);
}

/* Wait (up to 30 s) for `name`, then read up to `n` bytes of it. */
static size_t xt_get_file(const char *name, void *b, size_t n)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", xt_dir, name);
	for (int i = 0; i < 300; i++) {
		FILE *f = fopen(p, "r");
		if (f) {
			size_t got = fread(b, 1, n, f);
			fclose(f);
			return got;
		}
		usleep(100000);
	}
	fprintf(stderr, "%s did not appear\n", p);
	exit(2);
}

static int xt_done(const char *name)
{
	printf("%s: %d checks, %d failures\n", name, xt_checks, xt_failures);
	return xt_failures ? 1 : 0;
}

/* Hints that select the xdp provider (and nothing else). */
static struct fi_info *xt_hints(int ep_type)
{
	struct fi_info *h = fi_allocinfo();
	REQUIRE(h);
	h->fabric_attr->prov_name = strdup("xdp");
	h->ep_attr->type = ep_type;
	return h;
}

/* getinfo for our interface and ep type; REQUIREs success. */
static struct fi_info *xt_getinfo(int ep_type, uint64_t caps)
{
	struct fi_info *h = xt_hints(ep_type), *info = NULL;
	h->caps = caps;
	h->domain_attr->name = strdup(xt_iface);
	int ret = fi_getinfo(XT_VERSION, NULL, NULL, 0, h, &info);
	if (ret)
		fprintf(stderr, "fi_getinfo: %d %s\n", ret, fi_strerror(-ret));
	REQUIRE(ret == 0 && info);
	fi_freeinfo(h);
	return info;
}

/* The standard object set: fabric, domain (and optionally more). */
struct xt_res {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
};

static void xt_open(struct xt_res *r, int ep_type, uint64_t caps)
{
	memset(r, 0, sizeof(*r));
	r->info = xt_getinfo(ep_type, caps);
	REQUIRE(fi_fabric(r->info->fabric_attr, &r->fabric, NULL) == 0);
	REQUIRE(fi_domain(r->fabric, r->info, &r->domain, NULL) == 0);
}

/* An endpoint of `info` bound to `av` and to `cq` for both directions,
 * enabled: the set-up most tests of two processes share. */
static struct fid_ep *xt_enabled_ep(struct fid_domain *domain, struct fi_info *info,
				    struct fid_av *av, struct fid_cq *cq)
{
	struct fid_ep *ep;
	REQUIRE(fi_endpoint(domain, info, &ep, NULL) == 0);
	REQUIRE(fi_ep_bind(ep, &av->fid, 0) == 0);
	REQUIRE(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV) == 0);
	REQUIRE(fi_enable(ep) == 0);
	return ep;
}

static void xt_close(struct xt_res *r)
{
	CHECK_RET(fi_close(&r->domain->fid), 0);
	CHECK_RET(fi_close(&r->fabric->fid), 0);
	fi_freeinfo(r->info);
}

#endif
