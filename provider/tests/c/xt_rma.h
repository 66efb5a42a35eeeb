/* Shared set-up of the RMA and atomic C tests (rma.c, atomic.c): one RDM
 * endpoint with FI_RMA | FI_ATOMIC that targets itself (its own address in
 * its AV: the provider feeds its datagrams back to its own engine, so the
 * target side runs in the same progress), CQs, FI_READ / FI_WRITE counters,
 * and helpers that wait for one completion. The mr_mode is the program's
 * argument: "prov" (the application supports FI_MR_PROV_KEY and
 * FI_MR_VIRT_ADDR: provider keys, offsets), "basic" (FI_MR_BASIC: provider
 * keys, virtual addresses) or "requested" (no bit: requested keys,
 * offsets). */
#ifndef XT_RMA_H
#define XT_RMA_H

#include "xt.h"

struct xt_rma {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_ep *ep;
	struct fid_av *av;
	struct fid_cq *txcq, *rxcq;
	struct fid_cntr *rcntr, *wcntr;
	/* FI_RMA_EVENT: peers' reads and writes on this endpoint's memory. */
	struct fid_cntr *remote_r, *remote_w;
	fi_addr_t self;
	int virt; /* FI_MR_VIRT_ADDR in force */
	int prov_key;
};

/* The capabilities xt_rma_open asks for, and the flags it binds the
 * transmit CQ with (a program may change them before the call). */
static uint64_t xt_rma_caps = FI_MSG | FI_RMA | FI_ATOMIC | FI_RMA_EVENT;
static uint64_t xt_rma_tx_bind = FI_TRANSMIT;

static void xt_rma_open(struct xt_rma *t, int mr_mode)
{
	memset(t, 0, sizeof(*t));
	struct fi_info *h = xt_hints(FI_EP_RDM);
	h->caps = xt_rma_caps;
	h->domain_attr->name = strdup(xt_iface);
	h->domain_attr->mr_mode = mr_mode;
	int ret = fi_getinfo(XT_VERSION, NULL, NULL, 0, h, &t->info);
	fi_freeinfo(h);
	if (mr_mode == FI_MR_BASIC && XT_VERSION >= FI_VERSION(2, 0)) {
		/* From API 2.0 FI_MR_BASIC is no registration mode, only a
		 * deprecated bit, not granted (fi_xdp(7)): check that much;
		 * the mode's transfers cannot be asked for. */
		CHECK(ret == -FI_ENODATA ||
		      (ret == 0 && !(t->info->domain_attr->mr_mode & FI_MR_BASIC)));
		printf("FI_MR_BASIC under API %d.%d: not granted, transfers not run\n",
		       FI_MAJOR(XT_VERSION), FI_MINOR(XT_VERSION));
		fi_freeinfo(t->info);
		exit(xt_done("basic registration"));
	}
	REQUIRE(ret == 0 && t->info);
	t->virt = !!(t->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR);
	t->prov_key = !!(t->info->domain_attr->mr_mode & FI_MR_PROV_KEY);
	if (mr_mode == FI_MR_BASIC) {
		CHECK(t->info->domain_attr->mr_mode == FI_MR_BASIC);
		t->virt = t->prov_key = 1;
	} else {
		CHECK(t->info->domain_attr->mr_mode == (mr_mode & FI_MR_PROV_KEY));
	}
	REQUIRE(fi_fabric(t->info->fabric_attr, &t->fabric, NULL) == 0);
	REQUIRE(fi_domain(t->fabric, t->info, &t->domain, NULL) == 0);
	REQUIRE(fi_endpoint(t->domain, t->info, &t->ep, NULL) == 0);
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	REQUIRE(fi_av_open(t->domain, &av_attr, &t->av, NULL) == 0);
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_DATA};
	REQUIRE(fi_cq_open(t->domain, &cq_attr, &t->txcq, NULL) == 0);
	REQUIRE(fi_cq_open(t->domain, &cq_attr, &t->rxcq, NULL) == 0);
	struct fi_cntr_attr cntr_attr = {.events = FI_CNTR_EVENTS_COMP};
	REQUIRE(fi_cntr_open(t->domain, &cntr_attr, &t->rcntr, NULL) == 0);
	REQUIRE(fi_cntr_open(t->domain, &cntr_attr, &t->wcntr, NULL) == 0);
	REQUIRE(fi_cntr_open(t->domain, &cntr_attr, &t->remote_r, NULL) == 0);
	REQUIRE(fi_cntr_open(t->domain, &cntr_attr, &t->remote_w, NULL) == 0);
	REQUIRE(fi_ep_bind(t->ep, &t->av->fid, 0) == 0);
	REQUIRE(fi_ep_bind(t->ep, &t->txcq->fid, xt_rma_tx_bind) == 0);
	REQUIRE(fi_ep_bind(t->ep, &t->rxcq->fid, FI_RECV) == 0);
	CHECK_RET(fi_ep_bind(t->ep, &t->rcntr->fid, FI_READ), 0);
	CHECK_RET(fi_ep_bind(t->ep, &t->wcntr->fid, FI_WRITE), 0);
	CHECK_RET(fi_ep_bind(t->ep, &t->remote_r->fid, FI_REMOTE_READ), 0);
	CHECK_RET(fi_ep_bind(t->ep, &t->remote_w->fid, FI_REMOTE_WRITE), 0);
	CHECK_RET(fi_ep_bind(t->ep, &t->remote_w->fid, FI_REMOTE_WRITE), -FI_EINVAL);
	REQUIRE(fi_enable(t->ep) == 0);
	char me[64];
	size_t len = sizeof(me);
	REQUIRE(fi_getname(&t->ep->fid, me, &len) == 0);
	REQUIRE(fi_av_insert(t->av, me, 1, &t->self, 0, NULL) == 1);
}

static void xt_rma_close(struct xt_rma *t)
{
	CHECK_RET(fi_close(&t->ep->fid), 0);
	CHECK_RET(fi_close(&t->rcntr->fid), 0);
	CHECK_RET(fi_close(&t->wcntr->fid), 0);
	CHECK_RET(fi_close(&t->remote_r->fid), 0);
	CHECK_RET(fi_close(&t->remote_w->fid), 0);
	CHECK_RET(fi_close(&t->txcq->fid), 0);
	CHECK_RET(fi_close(&t->rxcq->fid), 0);
	CHECK_RET(fi_close(&t->av->fid), 0);
	CHECK_RET(fi_close(&t->domain->fid), 0);
	CHECK_RET(fi_close(&t->fabric->fid), 0);
	fi_freeinfo(t->info);
}

/* Register `len` bytes at `buf` with `access`; the key and the address a
 * peer names its first byte with (virtual address or offset 0). */
static struct fid_mr *xt_reg(struct xt_rma *t, void *buf, size_t len, uint64_t access,
			     uint64_t want_key, uint64_t *key, uint64_t *addr)
{
	struct fid_mr *mr = NULL;
	CHECK_RET(fi_mr_reg(t->domain, buf, len, access, 0, want_key, 0, &mr, NULL), 0);
	REQUIRE(mr);
	*key = fi_mr_key(mr);
	if (!t->prov_key)
		CHECK(*key == want_key);
	CHECK(fi_mr_desc(mr) != NULL);
	*addr = t->virt ? (uint64_t)(uintptr_t)buf : 0;
	return mr;
}

/* Wait (progressing) for one entry on `cq`: 0 and the entry, or the
 * positive error of an error entry (read with fi_cq_readerr). */
static int xt_wait(struct fid_cq *cq, struct fi_cq_data_entry *e)
{
	for (long i = 0; i < 20000000; i++) {
		ssize_t n = fi_cq_read(cq, e, 1);
		if (n == 1)
			return 0;
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};
			REQUIRE(fi_cq_readerr(cq, &err, 0) == 1);
			e->op_context = err.op_context;
			e->flags = err.flags;
			return err.err;
		}
		REQUIRE(n == -FI_EAGAIN);
	}
	fprintf(stderr, "no completion\n");
	exit(2);
}

/* Expect one successful completion of `ctx` with `flags`. */
static void xt_ok(struct xt_rma *t, void *ctx, uint64_t flags)
{
	struct fi_cq_data_entry e = {0};
	CHECK_RET(xt_wait(t->txcq, &e), 0);
	CHECK(e.op_context == ctx);
	CHECK(e.flags == flags);
	if (e.flags != flags)
		fprintf(stderr, "  flags %#llx, want %#llx\n", (unsigned long long)e.flags,
			(unsigned long long)flags);
}

/* Expect one failed completion of `ctx` with error `err`. */
static void xt_fails(struct xt_rma *t, void *ctx, int err)
{
	struct fi_cq_data_entry e = {0};
	CHECK_RET(xt_wait(t->txcq, &e), err);
	CHECK(e.op_context == ctx);
}

/* Progress until `cntr` reaches `n` (inject operations report nothing). */
static void xt_cntr_wait(struct xt_rma *t, struct fid_cntr *cntr, uint64_t n)
{
	for (long i = 0; i < 20000000 && fi_cntr_read(cntr) < n; i++)
		fi_cq_read(t->txcq, NULL, 0);
	CHECK(fi_cntr_read(cntr) == n);
}

static int xt_mr_mode_arg(int argc, char **argv)
{
	if (argc > 4 && !strcmp(argv[4], "requested"))
		return 0;
	if (argc > 4 && !strcmp(argv[4], "basic"))
		return FI_MR_BASIC;
	return FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED | FI_MR_LOCAL;
}

#endif
