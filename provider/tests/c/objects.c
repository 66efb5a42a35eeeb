/* Every object opened and closed in order and out of order; closing a busy
 * object returns -FI_EBUSY (fi_domain(3), fi_cq(3), fi_av(3), fi_cntr(3),
 * fi_eq(3)); every ops-table slot we do not support returns -FI_ENOSYS. */
#include "xt.h"

struct all {
	struct xt_res r;
	struct fid_eq *eq;
	struct fid_av *av;
	struct fid_cq *txcq, *rxcq;
	struct fid_cntr *cntr;
	struct fid_mr *mr;
	struct fid_ep *ep;
	char buf[64];
};

static void open_all(struct all *a, int ep_type)
{
	struct fi_eq_attr eq_attr = {0};
	struct fi_av_attr av_attr = {0};
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED};
	struct fi_cntr_attr cntr_attr = {.events = FI_CNTR_EVENTS_COMP};
	memset(a, 0, sizeof(*a));
	xt_open(&a->r, ep_type, 0);
	CHECK_RET(fi_eq_open(a->r.fabric, &eq_attr, &a->eq, NULL), 0);
	CHECK_RET(fi_av_open(a->r.domain, &av_attr, &a->av, NULL), 0);
	CHECK_RET(fi_cq_open(a->r.domain, &cq_attr, &a->txcq, NULL), 0);
	CHECK_RET(fi_cq_open(a->r.domain, &cq_attr, &a->rxcq, NULL), 0);
	CHECK_RET(fi_cntr_open(a->r.domain, &cntr_attr, &a->cntr, NULL), 0);
	CHECK_RET(fi_mr_reg(a->r.domain, a->buf, sizeof(a->buf), FI_SEND | FI_RECV, 0, 1, 0, &a->mr, NULL), 0);
	CHECK_RET(fi_endpoint(a->r.domain, a->r.info, &a->ep, NULL), 0);
	CHECK_RET(fi_ep_bind(a->ep, &a->eq->fid, 0), 0);
	CHECK_RET(fi_ep_bind(a->ep, &a->av->fid, 0), 0);
	CHECK_RET(fi_ep_bind(a->ep, &a->txcq->fid, FI_TRANSMIT), 0);
	CHECK_RET(fi_ep_bind(a->ep, &a->rxcq->fid, FI_RECV | FI_SELECTIVE_COMPLETION), 0);
	CHECK_RET(fi_ep_bind(a->ep, &a->cntr->fid, FI_SEND | FI_RECV), 0);
}

static void close_in_order(struct all *a)
{
	CHECK_RET(fi_close(&a->ep->fid), 0);
	CHECK_RET(fi_close(&a->mr->fid), 0);
	CHECK_RET(fi_close(&a->cntr->fid), 0);
	CHECK_RET(fi_close(&a->rxcq->fid), 0);
	CHECK_RET(fi_close(&a->txcq->fid), 0);
	CHECK_RET(fi_close(&a->av->fid), 0);
	CHECK_RET(fi_close(&a->eq->fid), 0);
	xt_close(&a->r);
}

static void busy_and_out_of_order(struct all *a)
{
	/* Parents with children, and objects bound to an open endpoint. */
	CHECK_RET(fi_close(&a->r.fabric->fid), -FI_EBUSY);
	CHECK_RET(fi_close(&a->r.domain->fid), -FI_EBUSY);
	CHECK_RET(fi_close(&a->txcq->fid), -FI_EBUSY);
	CHECK_RET(fi_close(&a->rxcq->fid), -FI_EBUSY);
	CHECK_RET(fi_close(&a->av->fid), -FI_EBUSY);
	CHECK_RET(fi_close(&a->cntr->fid), -FI_EBUSY);
	CHECK_RET(fi_close(&a->eq->fid), -FI_EBUSY);
	/* An MR is never busy; the domain still is (EP, CQs, …). */
	CHECK_RET(fi_close(&a->mr->fid), 0);
	CHECK_RET(fi_close(&a->r.domain->fid), -FI_EBUSY);
	/* Closing the endpoint frees everything bound to it, in any order. */
	CHECK_RET(fi_close(&a->ep->fid), 0);
	CHECK_RET(fi_close(&a->eq->fid), 0);
	CHECK_RET(fi_close(&a->rxcq->fid), 0);
	CHECK_RET(fi_close(&a->r.domain->fid), -FI_EBUSY); /* txcq, av, cntr */
	CHECK_RET(fi_close(&a->av->fid), 0);
	CHECK_RET(fi_close(&a->cntr->fid), 0);
	CHECK_RET(fi_close(&a->r.fabric->fid), -FI_EBUSY);
	CHECK_RET(fi_close(&a->txcq->fid), 0);
	xt_close(&a->r);
}

static void bind_errors(struct all *a)
{
	struct fid_cq *cq2;
	struct fi_cq_attr cq_attr = {0};
	CHECK_RET(fi_cq_open(a->r.domain, &cq_attr, &cq2, NULL), 0);
	/* Same direction twice, no direction, unknown flags, NULL, wrong class. */
	CHECK_RET(fi_ep_bind(a->ep, &cq2->fid, FI_TRANSMIT), -FI_EINVAL);
	CHECK_RET(fi_ep_bind(a->ep, &cq2->fid, 0), -FI_EBADFLAGS);
	CHECK_RET(fi_ep_bind(a->ep, &cq2->fid, FI_RECV | FI_REMOTE_WRITE), -FI_EBADFLAGS);
	CHECK_RET(fi_ep_bind(a->ep, NULL, 0), -FI_EINVAL);
	CHECK_RET(fi_ep_bind(a->ep, &a->mr->fid, 0), -FI_EINVAL);
	CHECK_RET(fi_ep_bind(a->ep, &a->av->fid, 0), -FI_EINVAL);
	CHECK_RET(fi_ep_bind(a->ep, &a->cntr->fid, FI_SEND | (1ULL << 50)), -FI_EBADFLAGS);
	CHECK_RET(fi_ep_bind(a->ep, &a->eq->fid, 0), -FI_EINVAL);
	CHECK_RET(fi_close(&cq2->fid), 0);
	/* A counter binds for every kind of event whatever the endpoint's
	 * capabilities (fi_endpoint(3) "fi_ep_bind" asks none; fi_ubertest binds
	 * FI_READ | FI_WRITE on message-only endpoints): on a DGRAM endpoint it
	 * can only ever count sends and receives. */
	struct fid_ep *ep3;
	struct fid_cntr *all_kinds;
	struct fi_cntr_attr cntr_attr = {.events = FI_CNTR_EVENTS_COMP};
	CHECK_RET(fi_endpoint(a->r.domain, a->r.info, &ep3, NULL), 0);
	CHECK_RET(fi_cntr_open(a->r.domain, &cntr_attr, &all_kinds, NULL), 0);
	CHECK_RET(fi_ep_bind(ep3, &all_kinds->fid,
			     FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ |
				     FI_REMOTE_WRITE),
		  0);
	CHECK_RET(fi_close(&ep3->fid), 0);
	CHECK_RET(fi_close(&all_kinds->fid), 0);
	/* A CQ from another domain. */
	struct xt_res other;
	struct fid_cq *ocq;
	xt_open(&other, FI_EP_RDM, 0);
	CHECK_RET(fi_cq_open(other.domain, &cq_attr, &ocq, NULL), 0);
	struct fid_ep *ep2;
	CHECK_RET(fi_endpoint(a->r.domain, a->r.info, &ep2, NULL), 0);
	CHECK_RET(fi_ep_bind(ep2, &ocq->fid, FI_TRANSMIT), -FI_EDOMAIN);
	CHECK_RET(fi_close(&ep2->fid), 0);
	CHECK_RET(fi_close(&ocq->fid), 0);
	xt_close(&other);
}

static void enable_requirements(struct all *a)
{
	struct fid_ep *ep;
	struct fid_av *av;
	struct fi_av_attr av_attr = {0};
	CHECK_RET(fi_endpoint(a->r.domain, a->r.info, &ep, NULL), 0);
	CHECK_RET(fi_enable(ep), -FI_ENOAV);
	CHECK_RET(fi_av_open(a->r.domain, &av_attr, &av, NULL), 0);
	CHECK_RET(fi_ep_bind(ep, &av->fid, 0), 0);
	CHECK_RET(fi_enable(ep), -FI_ENOCQ);
	CHECK_RET(fi_close(&ep->fid), 0);
	CHECK_RET(fi_close(&av->fid), 0);
	/* Fully bound: enabling starts the data path. Until the AF_XDP data
	 * path is built this reports -FI_ENOSYS; afterwards it must be 0 and
	 * binding after enable is refused. */
	int ret = fi_enable(a->ep);
	CHECK(ret == 0 || ret == -FI_ENOSYS);
	if (ret == 0)
		CHECK_RET(fi_ep_bind(a->ep, &a->cntr->fid, FI_SEND), -FI_EOPBADSTATE);
}

static void names(struct all *a)
{
	uint8_t addr[64];
	size_t len = 0;
	CHECK_RET(fi_getname(&a->ep->fid, NULL, &len), -FI_ETOOSMALL);
	CHECK(len == XDP_ADDR_LEN);
	len = 8;
	CHECK_RET(fi_getname(&a->ep->fid, addr, &len), -FI_ETOOSMALL);
	CHECK(len == XDP_ADDR_LEN);
	CHECK_RET(fi_getname(&a->ep->fid, addr, NULL), -FI_EINVAL);
	len = sizeof(addr);
	CHECK_RET(fi_getname(&a->ep->fid, addr, &len), 0);
	CHECK(len == XDP_ADDR_LEN);
	/* magic "DX", version 1, IPv4, a real port, our IP, a MAC. */
	CHECK(addr[0] == 0x44 && addr[1] == 0x58 && addr[2] == 1 && addr[3] == 4);
	CHECK(addr[4] || addr[5]);
	struct in_addr ip;
	inet_pton(AF_INET, xt_local_ip, &ip);
	CHECK(!memcmp(addr + 16, &ip, 4));
	CHECK(addr[6] | addr[7] | addr[8] | addr[9] | addr[10] | addr[11]);
	/* Two endpoints never share a port. */
	struct fid_ep *ep2;
	uint8_t addr2[64];
	size_t len2 = sizeof(addr2);
	CHECK_RET(fi_endpoint(a->r.domain, a->r.info, &ep2, NULL), 0);
	CHECK_RET(fi_getname(&ep2->fid, addr2, &len2), 0);
	CHECK(memcmp(addr + 4, addr2 + 4, 2) != 0);
	/* setname to a fixed port, then getname reports it. */
	addr2[4] = 0x9c;
	addr2[5] = 0x41; /* 40001 */
	CHECK_RET(fi_setname(&ep2->fid, addr2, XDP_ADDR_LEN), 0);
	len2 = sizeof(addr2);
	CHECK_RET(fi_getname(&ep2->fid, addr2, &len2), 0);
	CHECK(addr2[4] == 0x9c && addr2[5] == 0x41);
	CHECK_RET(fi_setname(&ep2->fid, NULL, 0), -FI_EINVAL);
	/* Another endpoint cannot take a port in use. */
	struct fid_ep *ep3;
	CHECK_RET(fi_endpoint(a->r.domain, a->r.info, &ep3, NULL), 0);
	CHECK_RET(fi_setname(&ep3->fid, addr2, XDP_ADDR_LEN), -EADDRINUSE);
	CHECK_RET(fi_close(&ep3->fid), 0);
	CHECK_RET(fi_close(&ep2->fid), 0);
}

static void options(struct all *a)
{
	size_t v = 0, len = sizeof(v);
	CHECK_RET(fi_getopt(&a->ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v, &len), 0);
	CHECK(v > 0 && len == sizeof(size_t));
	v = 4096;
	CHECK_RET(fi_setopt(&a->ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v, sizeof(v)), 0);
	v = 0;
	len = sizeof(v);
	CHECK_RET(fi_getopt(&a->ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v, &len), 0);
	CHECK(v == 4096);
	len = 2;
	CHECK_RET(fi_getopt(&a->ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v, &len), -FI_ETOOSMALL);
	CHECK_RET(fi_getopt(&a->ep->fid, 7, FI_OPT_MIN_MULTI_RECV, &v, &len), -FI_ENOPROTOOPT);
	CHECK_RET(fi_setopt(&a->ep->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &v, sizeof(v)), -FI_ENOPROTOOPT);
	uint64_t flags = FI_TRANSMIT;
	CHECK_RET(fi_control(&a->ep->fid, FI_GETOPSFLAG, &flags), 0);
	flags = FI_TRANSMIT | FI_COMPLETION;
	CHECK_RET(fi_control(&a->ep->fid, FI_SETOPSFLAG, &flags), 0);
	flags = FI_TRANSMIT;
	CHECK_RET(fi_control(&a->ep->fid, FI_GETOPSFLAG, &flags), 0);
	CHECK(flags & FI_COMPLETION);
	flags = FI_TRANSMIT | FI_RECV;
	CHECK_RET(fi_control(&a->ep->fid, FI_GETOPSFLAG, &flags), -FI_EINVAL);
	flags = FI_RECV | FI_INJECT;
	CHECK_RET(fi_control(&a->ep->fid, FI_SETOPSFLAG, &flags), -FI_EBADFLAGS);
	CHECK_RET(fi_control(&a->ep->fid, FI_BACKLOG, NULL), -FI_ENOSYS);
}

static void unsupported_slots(struct all *a, int dgram)
{
	char b[8];
	CHECK_RET(fi_connect(a->ep, b, NULL, 0), -FI_ENOSYS);
	CHECK_RET(fi_accept(a->ep, NULL, 0), -FI_ENOSYS);
	CHECK_RET(fi_shutdown(a->ep, 0), -FI_ENOSYS);
	size_t len = sizeof(b);
	CHECK_RET(fi_getpeer(a->ep, b, &len), -FI_ENOSYS);
	CHECK_RET(fi_rx_size_left(a->ep), -FI_ENOSYS);
	CHECK_RET(fi_tx_size_left(a->ep), -FI_ENOSYS);
	size_t cnt;
	CHECK_RET(fi_query_atomic(a->r.domain, FI_INT32, FI_SUM, NULL, 0), -FI_EINVAL);
	struct fid_ep *sep;
	CHECK_RET(fi_scalable_ep(a->r.domain, a->r.info, &sep, NULL), -FI_ENOSYS);
	/* Passive endpoints are FI_EP_MSG's. */
	struct fid_pep *pep;
	CHECK_RET(fi_passive_ep(a->r.fabric, a->r.info, &pep, NULL), -FI_EINVAL);
	/* Connection management is for connected endpoints. */
	CHECK_RET(fi_listen((struct fid_pep *)a->ep), -FI_ENOSYS);
	CHECK_RET(fi_reject((struct fid_pep *)a->ep, &a->ep->fid, NULL, 0), -FI_ENOSYS);
	size_t sz = 0, szlen = sizeof(sz);
	CHECK_RET(fi_getopt(&a->ep->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &sz, &szlen),
		  -FI_ENOPROTOOPT);
	/* POLLFD wait objects are not offered. */
	struct fi_wait_attr wa = {.wait_obj = FI_WAIT_POLLFD};
	struct fid_wait *w;
	CHECK_RET(fi_wait_open(a->r.fabric, &wa, &w), -FI_ENOSYS);
	struct fid_ep *rx;
	CHECK_RET(fi_srx_context(a->r.domain, NULL, &rx, NULL), -FI_ENOSYS);
	CHECK_RET(fi_domain_bind(a->r.domain, &a->av->fid, 0), -FI_EINVAL);
	CHECK_RET(fi_open_ops(&a->ep->fid, "x", 0, NULL, NULL), -FI_ENOSYS);
	/* No FI_COLLECTIVE: libfabric's inline calls reach a table that says so
	 * instead of a NULL one. */
	uint64_t one = 1, sum = 0;
	CHECK_RET(fi_barrier(a->ep, 0, NULL), -FI_ENOSYS);
	CHECK_RET(fi_barrier2(a->ep, 0, 0, NULL), -FI_ENOSYS);
	CHECK_RET(fi_broadcast(a->ep, &one, 1, NULL, 0, 0, FI_UINT64, 0, NULL), -FI_ENOSYS);
	CHECK_RET(fi_allreduce(a->ep, &one, 1, NULL, &sum, NULL, 0, FI_UINT64, FI_SUM, 0, NULL),
		  -FI_ENOSYS);
	CHECK_RET(fi_allgather(a->ep, &one, 1, NULL, &sum, NULL, 0, FI_UINT64, 0, NULL), -FI_ENOSYS);
	CHECK_RET(fi_alltoall(a->ep, &one, 1, NULL, &sum, NULL, 0, FI_UINT64, 0, NULL), -FI_ENOSYS);
	CHECK_RET(fi_reduce_scatter(a->ep, &one, 1, NULL, &sum, NULL, 0, FI_UINT64, FI_SUM, 0, NULL),
		  -FI_ENOSYS);
	CHECK_RET(fi_reduce(a->ep, &one, 1, NULL, &sum, NULL, 0, 0, FI_UINT64, FI_SUM, 0, NULL),
		  -FI_ENOSYS);
	CHECK_RET(fi_scatter(a->ep, &one, 1, NULL, &sum, NULL, 0, 0, FI_UINT64, 0, NULL), -FI_ENOSYS);
	CHECK_RET(fi_gather(a->ep, &one, 1, NULL, &sum, NULL, 0, 0, FI_UINT64, 0, NULL), -FI_ENOSYS);
	if (dgram) {
		CHECK_RET(fi_tsend(a->ep, b, 1, NULL, 0, 1, NULL), -FI_ENOSYS);
		CHECK_RET(fi_trecv(a->ep, b, 1, NULL, 0, 1, 0, NULL), -FI_ENOSYS);
		CHECK_RET(fi_senddata(a->ep, b, 1, NULL, 5, 0, NULL), -FI_ENOSYS);
		CHECK_RET(fi_injectdata(a->ep, b, 1, 5, 0), -FI_ENOSYS);
		/* No FI_RMA or FI_ATOMIC on DGRAM (rma.c, atomic.c test RDM). */
		CHECK_RET(fi_write(a->ep, b, 1, NULL, 0, 0, 0, NULL), -FI_ENOSYS);
		CHECK_RET(fi_read(a->ep, b, 1, NULL, 0, 0, 0, NULL), -FI_ENOSYS);
		CHECK_RET(fi_inject_write(a->ep, b, 1, 0, 0, 0), -FI_ENOSYS);
		CHECK_RET(fi_atomic(a->ep, b, 1, NULL, 0, 0, 0, FI_INT32, FI_SUM, NULL), -FI_ENOSYS);
		CHECK_RET(fi_atomicvalid(a->ep, FI_INT32, FI_SUM, &cnt), -FI_ENOSYS);
	}
}

static void open_args(struct all *a)
{
	struct fid_fabric *fab;
	struct fid_domain *dom;
	struct fid_ep *ep;
	CHECK_RET(fi_fabric(NULL, &fab, NULL), -FI_EINVAL);
	CHECK_RET(fi_domain(a->r.fabric, NULL, &dom, NULL), -FI_EINVAL);
	CHECK_RET(fi_endpoint(a->r.domain, NULL, &ep, NULL), -FI_EINVAL);
	struct fi_info *bad = fi_dupinfo(a->r.info);
	bad->ep_attr->type = FI_EP_MSG;
	CHECK_RET(fi_endpoint(a->r.domain, bad, &ep, NULL), -FI_EINVAL);
	bad->ep_attr->type = a->r.info->ep_attr->type;
	bad->caps |= FI_TRIGGER;
	CHECK_RET(fi_endpoint(a->r.domain, bad, &ep, NULL), -FI_EINVAL);
	bad->caps = a->r.info->caps;
	/* A wire protocol this endpoint type does not speak; a source address
	 * no format has; a job key larger than any key. */
	bad->ep_attr->protocol = 999;
	CHECK_RET(fi_endpoint(a->r.domain, bad, &ep, NULL), -FI_EINVAL);
	bad->ep_attr->protocol = a->r.info->ep_attr->protocol;
	void *src = bad->src_addr;
	size_t srclen = bad->src_addrlen;
	uint8_t three[3] = {1, 2, 3};
	bad->src_addr = three;
	bad->src_addrlen = sizeof(three);
	CHECK_RET(fi_endpoint(a->r.domain, bad, &ep, NULL), -FI_EINVAL);
	bad->src_addr = src;
	bad->src_addrlen = srclen;
	uint8_t key[32] = {0};
	bad->ep_attr->auth_key = key;
	bad->ep_attr->auth_key_size = SIZE_MAX;
	CHECK_RET(fi_endpoint(a->r.domain, bad, &ep, NULL), -FI_EINVAL);
	bad->ep_attr->auth_key = NULL;
	bad->ep_attr->auth_key_size = 0;
	fi_freeinfo(bad);
	CHECK_RET(fi_domain2(a->r.fabric, a->r.info, &dom, 1, NULL), -FI_EBADFLAGS);
}

int main(int argc, char **argv)
{
	struct all a;
	xt_init(argc, argv);
	for (int t = 0; t < 2; t++) {
		int type = t ? FI_EP_DGRAM : FI_EP_RDM;
		open_all(&a, type);
		close_in_order(&a);
		open_all(&a, type);
		busy_and_out_of_order(&a);
		open_all(&a, type);
		bind_errors(&a);
		names(&a);
		options(&a);
		unsupported_slots(&a, t);
		open_args(&a);
		enable_requirements(&a);
		close_in_order(&a);
	}
	return xt_done("objects");
}
