/* FI_SOURCE_ERR (fi_getinfo(3), fi_cq(3) "FI_EADDRNOTAVAIL"): a receive
 * from a source not in the AV completes as an error entry whose err_data is
 * the source's address, in the domain's format, with the data received;
 * inserted into the AV, that address names the peer in later completions.
 *
 *   - getinfo: FI_SOURCE_ERR needs FI_SOURCE (-FI_ENODATA alone); granted
 *     when asked for, and never to hints that name no capabilities;
 *   - the server (its AV empty) gets the client's first message as
 *     -FI_EAVAIL / FI_EADDRNOTAVAIL with the message's context, length,
 *     tag and data in place; fi_cq_readerr's err_data inserted, the next
 *     message is an ordinary completion from that fi_addr_t; its answer
 *     reaches the client. RDM (tagged), then DGRAM.
 *
 * argv: <iface> <local IP> <peer IP> <server|client> <rendezvous dir> */
#include "xt.h"

static struct fi_info *source_err_info(int ep_type)
{
	struct fi_info *h = xt_hints(ep_type), *info = NULL;
	h->caps = FI_MSG | FI_SOURCE_ERR;
	if (ep_type == FI_EP_RDM)
		h->caps |= FI_TAGGED;
	h->domain_attr->name = strdup(xt_iface);
	CHECK_RET(fi_getinfo(XT_VERSION, NULL, NULL, 0, h, &info), -FI_ENODATA);
	h->caps |= FI_SOURCE;
	REQUIRE(fi_getinfo(XT_VERSION, NULL, NULL, 0, h, &info) == 0 && info);
	CHECK(info->caps & FI_SOURCE_ERR);
	fi_freeinfo(h);
	/* Not granted unasked, not even to hints without capabilities. */
	struct fi_info *h0 = xt_hints(ep_type), *i0 = NULL;
	h0->domain_attr->name = strdup(xt_iface);
	REQUIRE(fi_getinfo(XT_VERSION, NULL, NULL, 0, h0, &i0) == 0 && i0);
	for (struct fi_info *i = i0; i; i = i->next)
		CHECK(!(i->caps & FI_SOURCE_ERR));
	fi_freeinfo(h0);
	fi_freeinfo(i0);
	return info;
}

struct side {
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
};

static void open_side(struct side *s, struct fi_info *info)
{
	struct fi_av_attr aa = {0};
	struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_TAGGED};
	REQUIRE(fi_fabric(info->fabric_attr, &s->fabric, NULL) == 0);
	REQUIRE(fi_domain(s->fabric, info, &s->domain, NULL) == 0);
	REQUIRE(fi_av_open(s->domain, &aa, &s->av, NULL) == 0);
	REQUIRE(fi_cq_open(s->domain, &ca, &s->cq, NULL) == 0);
	s->ep = xt_enabled_ep(s->domain, info, s->av, s->cq);
}

static void close_side(struct side *s)
{
	CHECK_RET(fi_close(&s->ep->fid), 0);
	CHECK_RET(fi_close(&s->cq->fid), 0);
	CHECK_RET(fi_close(&s->av->fid), 0);
	CHECK_RET(fi_close(&s->domain->fid), 0);
	CHECK_RET(fi_close(&s->fabric->fid), 0);
}

/* The next entry within 20 s: 1 with *e and *from filled, or 0 with *err
 * filled (its err_data in `data`). */
static int next(struct side *s, struct fi_cq_tagged_entry *e, fi_addr_t *from,
		struct fi_cq_err_entry *err, void *data, size_t n)
{
	for (int i = 0; i < 2000000; i++) {
		ssize_t r = fi_cq_readfrom(s->cq, e, 1, from);
		if (r == 1)
			return 1;
		if (r == -FI_EAVAIL) {
			memset(err, 0, sizeof(*err));
			err->err_data = data;
			err->err_data_size = n;
			REQUIRE(fi_cq_readerr(s->cq, err, 0) == 1);
			return 0;
		}
		REQUIRE(r == -FI_EAGAIN);
		if (i > 1000)
			usleep(10);
	}
	fprintf(stderr, "no completion\n");
	exit(2);
}

static int tx_done(struct side *s)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	fi_addr_t from;
	uint8_t data[64];
	return next(s, &e, &from, &err, data, sizeof(data)) && (e.flags & FI_SEND);
}

static ssize_t send_one(struct side *s, int tagged, const char *msg, uint64_t tag, fi_addr_t to)
{
	size_t n = strlen(msg) + 1;
	ssize_t r;
	do {
		r = tagged ? fi_tsend(s->ep, msg, n, NULL, to, tag, NULL)
			   : fi_send(s->ep, msg, n, NULL, to, NULL);
		if (r == -FI_EAGAIN)
			fi_cq_read(s->cq, NULL, 0);
	} while (r == -FI_EAGAIN);
	return r;
}

static void server(struct side *s, int tagged, const char *tagname)
{
	char rx[64];
	uint8_t addr[64];
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	fi_addr_t from = 0;
	/* First message: from a source the AV does not hold. */
	CHECK_RET(tagged ? fi_trecv(s->ep, rx, sizeof(rx), NULL, FI_ADDR_UNSPEC, 7, 0, rx)
			 : fi_recv(s->ep, rx, sizeof(rx), NULL, FI_ADDR_UNSPEC, rx),
		  0);
	xt_put_file(tagname, "1", 1);
	REQUIRE(next(s, &e, &from, &err, addr, sizeof(addr)) == 0);
	CHECK(err.err == FI_EADDRNOTAVAIL);
	CHECK(err.op_context == rx && err.len == 6 && !strcmp(rx, "first"));
	CHECK(err.flags & FI_RECV);
	CHECK(!tagged || err.tag == 7);
	REQUIRE(err.err_data_size > 0 && err.err_data_size <= sizeof(addr));
	fi_addr_t peer;
	CHECK_RET(fi_av_insert(s->av, addr, 1, &peer, 0, NULL), 1);
	/* Second message: an ordinary completion from that address. */
	CHECK_RET(tagged ? fi_trecv(s->ep, rx, sizeof(rx), NULL, FI_ADDR_UNSPEC, 8, 0, rx)
			 : fi_recv(s->ep, rx, sizeof(rx), NULL, FI_ADDR_UNSPEC, rx),
		  0);
	char name[64];
	snprintf(name, sizeof(name), "%s-2", tagname);
	xt_put_file(name, "1", 1);
	REQUIRE(next(s, &e, &from, &err, addr, sizeof(addr)) == 1);
	CHECK(e.op_context == rx && !strcmp(rx, "second") && from == peer);
	/* The address works for sending too. */
	CHECK_RET(send_one(s, tagged, "answer", 9, peer), 0);
	CHECK(tx_done(s));
}

static void client(struct side *s, int tagged, const char *tagname, fi_addr_t srv)
{
	char ready[2], rx[64];
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	fi_addr_t from;
	uint8_t addr[64];
	CHECK_RET(tagged ? fi_trecv(s->ep, rx, sizeof(rx), NULL, FI_ADDR_UNSPEC, 9, 0, rx)
			 : fi_recv(s->ep, rx, sizeof(rx), NULL, FI_ADDR_UNSPEC, rx),
		  0);
	xt_get_file(tagname, ready, 1);
	CHECK_RET(send_one(s, tagged, "first", 7, srv), 0);
	CHECK(tx_done(s));
	char name[64];
	snprintf(name, sizeof(name), "%s-2", tagname);
	xt_get_file(name, ready, 1);
	CHECK_RET(send_one(s, tagged, "second", 8, srv), 0);
	CHECK(tx_done(s));
	/* The server is in this AV: an ordinary completion. */
	REQUIRE(next(s, &e, &from, &err, addr, sizeof(addr)) == 1);
	CHECK(e.op_context == rx && !strcmp(rx, "answer") && from == srv);
}

static void run(int ep_type, int is_server, const char *tagname)
{
	struct fi_info *info = source_err_info(ep_type);
	struct side s;
	open_side(&s, info);
	char name[64], peer_name[64];
	size_t len = sizeof(name);
	REQUIRE(fi_getname(&s.ep->fid, name, &len) == 0);
	char file[64];
	snprintf(file, sizeof(file), "%s.addr", tagname);
	if (is_server) {
		xt_put_file(file, name, len);
		server(&s, ep_type == FI_EP_RDM, tagname);
		snprintf(file, sizeof(file), "%s.done", tagname);
		char done[2];
		xt_get_file(file, done, 1);
	} else {
		size_t plen = xt_get_file(file, peer_name, sizeof(peer_name));
		fi_addr_t srv;
		REQUIRE(plen > 0 && fi_av_insert(s.av, peer_name, 1, &srv, 0, NULL) == 1);
		client(&s, ep_type == FI_EP_RDM, tagname, srv);
		snprintf(file, sizeof(file), "%s.done", tagname);
		xt_put_file(file, "1", 1);
	}
	close_side(&s);
	fi_freeinfo(info);
}

int main(int argc, char **argv)
{
	xt_init(argc, argv);
	REQUIRE(argc >= 6);
	xt_dir = argv[5];
	int is_server = !strcmp(argv[4], "server");
	run(FI_EP_RDM, is_server, "rdm");
	run(FI_EP_DGRAM, is_server, "dgram");
	return xt_done(argv[4]);
}
