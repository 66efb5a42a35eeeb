/* Connected endpoints (FI_EP_MSG) in the style of the libfabric
 * programmer's guide's first example: a passive endpoint listens, the
 * client connects, the server accepts, and the two ping-pong messages with
 * data checks; then the connection-management error paths:
 *
 *   A  a rejected request: FI_ECONNREFUSED with fi_reject's data;
 *   B  accept + ping-pong (untagged and tagged, 0 B .. 1 MiB, remote CQ
 *      data), fi_getpeer, RMA and atomics over the connection (the client
 *      reads, writes, adds and writes with CQ data into a registration of
 *      the server's), then the client's fi_shutdown: its posted
 *      receive completes FI_ECANCELED, both sides see FI_SHUTDOWN, sends
 *      fail with -FI_ENOTCONN;
 *   C  a connect to a port nobody listens on: FI_ECONNREFUSED (ICMP);
 *   D  the client closes a connected endpoint without fi_shutdown: the
 *      server sees FI_SHUTDOWN;
 *   E  a connect nobody answers (a plain UDP socket that ignores it) with
 *      FI_XDP_PEER_TIMEOUT=2: FI_ETIMEDOUT within seconds.
 *
 * argv: <iface> <local IP> <peer IP> <server|client> <rendezvous dir>
 * The server writes its passive endpoint's address and the silent port to
 * files in the rendezvous dir; the client says when it is done there. */
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>

#include "xt.h"

static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_eq *eq;

static struct fi_info *msg_hints(void)
{
	struct fi_info *h = xt_hints(FI_EP_MSG);
	h->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_FENCE;
	h->domain_attr->name = strdup(xt_iface);
	h->addr_format = FI_SOCKADDR_IN;
	return h;
}

/* Read one CM event (blocking, 20 s at most); returns fi_eq_sread's value. */
static ssize_t cm_event(uint32_t *event, struct fi_eq_cm_entry *entry, size_t len)
{
	memset(entry, 0, len);
	return fi_eq_sread(eq, event, entry, len, 20000, 0);
}

/* An error entry is at the head: read it (err_data into our buffer). */
static void cm_error(struct fi_eq_err_entry *err, void *data, size_t n)
{
	memset(err, 0, sizeof(*err));
	err->err_data = data;
	err->err_data_size = n;
	CHECK_RET(fi_eq_readerr(eq, err, 0), sizeof(*err));
}

struct conn {
	struct fid_ep *ep;
	struct fid_cq *txcq, *rxcq;
};

static void conn_open(struct conn *c, struct fi_info *fi)
{
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_UNSPEC};
	REQUIRE(fi_cq_open(domain, &cq_attr, &c->txcq, NULL) == 0);
	REQUIRE(fi_cq_open(domain, &cq_attr, &c->rxcq, NULL) == 0);
	REQUIRE(fi_endpoint(domain, fi, &c->ep, NULL) == 0);
	/* No AV on a connected endpoint; no enable without an EQ. */
	struct fid_av *av;
	struct fi_av_attr av_attr = {0};
	REQUIRE(fi_av_open(domain, &av_attr, &av, NULL) == 0);
	CHECK_RET(fi_ep_bind(c->ep, &av->fid, 0), -FI_EINVAL);
	CHECK_RET(fi_close(&av->fid), 0);
	REQUIRE(fi_ep_bind(c->ep, &c->txcq->fid, FI_TRANSMIT) == 0);
	REQUIRE(fi_ep_bind(c->ep, &c->rxcq->fid, FI_RECV) == 0);
	CHECK_RET(fi_enable(c->ep), -FI_ENOEQ);
	REQUIRE(fi_ep_bind(c->ep, &eq->fid, 0) == 0);
	REQUIRE(fi_enable(c->ep) == 0);
	size_t sz = 0, szlen = sizeof(sz);
	CHECK_RET(fi_getopt(&c->ep->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &sz, &szlen), 0);
	CHECK(sz == 256);
}

static void conn_close(struct conn *c)
{
	CHECK_RET(fi_close(&c->ep->fid), 0);
	CHECK_RET(fi_close(&c->txcq->fid), 0);
	CHECK_RET(fi_close(&c->rxcq->fid), 0);
}

/* One completion from cq within 20 s: 1, or 0 with *err filled. */
static int comp(struct fid_cq *cq, struct fi_cq_tagged_entry *e, struct fi_cq_err_entry *err)
{
	for (;;) {
		ssize_t n = fi_cq_sread(cq, e, 1, NULL, 20000);
		if (n == 1)
			return 1;
		if (n == -FI_EAVAIL) {
			memset(err, 0, sizeof(*err));
			REQUIRE(fi_cq_readerr(cq, err, 0) == 1);
			return 0;
		}
		fprintf(stderr, "fi_cq_sread: %zd %s\n", n, fi_strerror((int)-n));
		exit(2);
	}
}

static void comp_ok(struct fid_cq *cq, struct fi_cq_tagged_entry *e)
{
	struct fi_cq_err_entry err;
	if (!comp(cq, e, &err)) {
		fprintf(stderr, "error completion: %s\n", fi_strerror(err.err));
		xt_failures++;
	}
}

static void fill(uint8_t *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(seed * 97 + i * 13 + (i >> 9));
}

static int check(const uint8_t *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != (uint8_t)(seed * 97 + i * 13 + (i >> 9)))
			return 0;
	return 1;
}

/* The ping-pong: the client sends first; each side checks what it gets
 * and answers with the same size. Untagged, then tagged with remote CQ
 * data. */
static void ping_pong(struct conn *c, int client)
{
	static const size_t sizes[] = {0, 1, 64, 1000, 4096, 65536, 1 << 20};
	size_t max = 1 << 20;
	uint8_t *tx = malloc(max), *rx = malloc(max);
	REQUIRE(tx && rx);
	for (int tagged = 0; tagged < 2; tagged++) {
		for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			size_t n = sizes[i];
			unsigned seed = i + 10 * tagged;
			struct fi_cq_tagged_entry e;
			for (int turn = 0; turn < 2; turn++) {
				int sending = (turn == 0) == client;
				if (sending) {
					fill(tx, n, seed + turn);
					ssize_t r;
					do {
						r = tagged ? fi_tsenddata(c->ep, tx, n, NULL, 0x77 + i, 0,
									  0x500 + i, tx)
							   : fi_send(c->ep, tx, n, NULL, 0, tx);
						if (r == -FI_EAGAIN)
							fi_cq_read(c->txcq, NULL, 0);
					} while (r == -FI_EAGAIN);
					CHECK_RET(r, 0);
					comp_ok(c->txcq, &e);
					CHECK(e.op_context == tx);
				} else {
					memset(rx, 0, n);
					CHECK_RET(tagged ? fi_trecv(c->ep, rx, max, NULL, 0, 0x500 + i, 0, rx)
							 : fi_recv(c->ep, rx, max, NULL, 0, rx),
						  0);
					comp_ok(c->rxcq, &e);
					CHECK(e.op_context == rx && e.len == n);
					CHECK(check(rx, n, seed + turn));
					CHECK(!!(e.flags & FI_TAGGED) == tagged);
					if (tagged) {
						CHECK(e.tag == 0x500 + i);
						CHECK((e.flags & FI_REMOTE_CQ_DATA) && e.data == 0x77 + i);
					}
				}
			}
		}
	}
	free(tx);
	free(rx);
}

/* RMA over the connection: the server registers RMA_BYTES, tells the
 * client where (a message), and checks what the client did once told. */
enum { RMA_BYTES = 65536, RMA_WORDS = RMA_BYTES / 8 };
struct where {
	uint64_t addr, key;
};

static void rma_target(struct conn *c)
{
	static uint64_t mem[RMA_WORDS];
	for (unsigned i = 0; i < RMA_WORDS; i++)
		mem[i] = 0xa000000000000000ull + i;
	struct fid_mr *mr;
	REQUIRE(fi_mr_reg(domain, mem, sizeof(mem), FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0x4d53,
			  0, &mr, NULL) == 0);
	int virt = !!(info->domain_attr->mr_mode & FI_MR_VIRT_ADDR);
	struct where w = {virt ? (uintptr_t)mem : 0, fi_mr_key(mr)};
	char done[8];
	CHECK_RET(fi_recv(c->ep, done, sizeof(done), NULL, 0, done), 0);
	struct fi_cq_tagged_entry e;
	CHECK_RET(fi_send(c->ep, &w, sizeof(w), NULL, 0, &w), 0);
	comp_ok(c->txcq, &e);
	/* The write with CQ data, then "done" (sends after writes: in order). */
	comp_ok(c->rxcq, &e);
	CHECK((e.flags & (FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA)) ==
	      (FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA));
	CHECK(e.data == 0xabc);
	comp_ok(c->rxcq, &e);
	CHECK(e.op_context == done && e.len == 5 && !memcmp(done, "done", 5));
	CHECK(mem[0] == 0xb000000000000000ull + 5);
	int same = 1;
	for (unsigned i = 1; i < RMA_WORDS - 1; i++)
		same &= mem[i] == 0xb000000000000000ull + i;
	CHECK(same);
	CHECK(mem[RMA_WORDS - 1] == 0xc0ffee);
	CHECK_RET(fi_close(&mr->fid), 0);
}

static void rma_initiator(struct conn *c)
{
	static uint64_t local[RMA_WORDS];
	struct where w;
	struct fi_cq_tagged_entry e;
	CHECK_RET(fi_recv(c->ep, &w, sizeof(w), NULL, 0, &w), 0);
	comp_ok(c->rxcq, &e);
	REQUIRE(e.op_context == &w && e.len == sizeof(w));
	/* The address argument of a connected endpoint's call is ignored. */
	CHECK_RET(fi_read(c->ep, local, sizeof(local), NULL, 0, w.addr, w.key, local), 0);
	comp_ok(c->txcq, &e);
	CHECK(e.op_context == local && (e.flags & (FI_RMA | FI_READ)) == (FI_RMA | FI_READ));
	int same = 1;
	for (unsigned i = 0; i < RMA_WORDS; i++)
		same &= local[i] == 0xa000000000000000ull + i;
	CHECK(same);
	for (unsigned i = 0; i < RMA_WORDS; i++)
		local[i] = 0xb000000000000000ull + i;
	CHECK_RET(fi_write(c->ep, local, sizeof(local), NULL, 0, w.addr, w.key, local), 0);
	/* A fenced fetching add posted at once (FI_FENCE on a connected
	 * endpoint): it starts once the write has completed, and sees it;
	 * FI_INJECT: its operand is the caller's again on return. */
	uint64_t add = 5, old = 0;
	struct fi_ioc v = {&add, 1}, rv = {&old, 1};
	struct fi_rma_ioc r = {w.addr, 1, w.key};
	struct fi_msg_atomic m = {.msg_iov = &v, .iov_count = 1, .rma_iov = &r,
				  .rma_iov_count = 1, .datatype = FI_UINT64, .op = FI_SUM,
				  .context = &add};
	CHECK_RET(fi_fetch_atomicmsg(c->ep, &m, &rv, NULL, 1, FI_FENCE | FI_INJECT), 0);
	add = 1000;
	comp_ok(c->txcq, &e);
	CHECK(e.op_context == local && (e.flags & (FI_RMA | FI_WRITE)) == (FI_RMA | FI_WRITE));
	comp_ok(c->txcq, &e);
	CHECK(e.op_context == &add && old == 0xb000000000000000ull);
	uint64_t last = 0xc0ffee;
	CHECK_RET(fi_writedata(c->ep, &last, 8, NULL, 0xabc, 0, w.addr + RMA_BYTES - 8, w.key,
			       &last),
		  0);
	comp_ok(c->txcq, &e);
	CHECK(e.op_context == &last);
	CHECK_RET(fi_send(c->ep, "done", 5, NULL, 0, NULL), 0);
	comp_ok(c->txcq, &e);
}

static void expect_shutdown(struct conn *c)
{
	uint32_t event = 0;
	struct fi_eq_cm_entry entry;
	CHECK_RET(cm_event(&event, &entry, sizeof(entry)), sizeof(entry));
	CHECK(event == FI_SHUTDOWN && entry.fid == &c->ep->fid);
}

/* Accept the next request (whose data must be `want`) with `reply`. */
static void accept_next(struct conn *c, const char *want, const char *reply)
{
	uint8_t buf[sizeof(struct fi_eq_cm_entry) + 256];
	struct fi_eq_cm_entry *entry = (void *)buf;
	uint32_t event = 0;
	ssize_t n = cm_event(&event, entry, sizeof(buf));
	REQUIRE(n == (ssize_t)(sizeof(*entry) + strlen(want)) && event == FI_CONNREQ);
	CHECK(!memcmp(entry->data, want, strlen(want)));
	struct fi_info *fi = entry->info;
	REQUIRE(fi && fi->handle && fi->handle->fclass == FI_CLASS_CONNREQ);
	CHECK(fi->ep_attr->type == FI_EP_MSG && fi->dest_addr);
	conn_open(c, fi);
	/* Receives may be posted before the connection is set up; sends not. */
	uint8_t b[8];
	CHECK_RET(fi_send(c->ep, b, 1, NULL, 0, NULL), -FI_ENOTCONN);
	CHECK_RET(fi_accept(c->ep, reply, strlen(reply)), 0);
	CHECK_RET(fi_accept(c->ep, NULL, 0), -FI_EINVAL);
	/* The local FI_CONNECTED carries no data. */
	struct fi_eq_cm_entry e;
	CHECK_RET(cm_event(&event, &e, sizeof(e)), sizeof(e));
	CHECK(event == FI_CONNECTED && e.fid == &c->ep->fid);
	fi_freeinfo(fi);
}

static void server(void)
{
	struct fid_pep *pep;
	struct fi_eq_attr eq_attr = {.wait_obj = FI_WAIT_UNSPEC};
	struct fi_info *h = msg_hints();
	REQUIRE(fi_getinfo(XT_VERSION, xt_local_ip, "0", FI_SOURCE, h, &info) == 0);
	fi_freeinfo(h);
	REQUIRE(fi_fabric(info->fabric_attr, &fabric, NULL) == 0);
	REQUIRE(fi_eq_open(fabric, &eq_attr, &eq, NULL) == 0);
	REQUIRE(fi_passive_ep(fabric, info, &pep, NULL) == 0);
	CHECK_RET(fi_listen(pep), -FI_ENOEQ);
	REQUIRE(fi_pep_bind(pep, &eq->fid, 0) == 0);
	int backlog = 8;
	CHECK_RET(fi_control(&pep->fid, FI_BACKLOG, &backlog), 0);
	size_t sz = 0, szlen = sizeof(sz);
	CHECK_RET(fi_getopt(&pep->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &sz, &szlen), 0);
	CHECK(sz == 256);
	REQUIRE(fi_listen(pep) == 0);
	struct sockaddr_in sa;
	size_t salen = sizeof(sa);
	REQUIRE(fi_getname(&pep->fid, &sa, &salen) == 0 && salen == sizeof(sa));
	CHECK(sa.sin_port != 0);
	/* A socket that never answers, for the client's timeout (E). */
	int silent = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in ss = {.sin_family = AF_INET};
	inet_pton(AF_INET, xt_local_ip, &ss.sin_addr);
	socklen_t sslen = sizeof(ss);
	REQUIRE(bind(silent, (void *)&ss, sizeof(ss)) == 0);
	REQUIRE(getsockname(silent, (void *)&ss, &sslen) == 0);
	xt_put_file("silent.port", &ss.sin_port, sizeof(ss.sin_port));
	xt_put_file("server.addr", &sa, sizeof(sa));
	REQUIRE(fi_domain(fabric, info, &domain, NULL) == 0);

	/* A: reject with data. */
	{
		uint8_t buf[sizeof(struct fi_eq_cm_entry) + 256];
		struct fi_eq_cm_entry *entry = (void *)buf;
		uint32_t event = 0;
		ssize_t n = cm_event(&event, entry, sizeof(buf));
		REQUIRE(n == (ssize_t)(sizeof(*entry) + 9) && event == FI_CONNREQ);
		CHECK(!memcmp(entry->data, "reject me", 9));
		CHECK_RET(fi_reject(pep, entry->info->handle, "no", 2), 0);
		/* The handle is consumed. */
		CHECK_RET(fi_reject(pep, entry->info->handle, NULL, 0), -FI_EINVAL);
		fi_freeinfo(entry->info);
	}
	/* B: accept, ping-pong, the client shuts down. */
	struct conn c;
	accept_next(&c, "hello", "welcome");
	struct sockaddr_in peer;
	size_t plen = sizeof(peer);
	CHECK_RET(fi_getpeer(c.ep, &peer, &plen), 0);
	CHECK(plen == sizeof(peer) && peer.sin_family == AF_INET);
	/* The first message lands in the receive the client posted before it
	 * connected. */
	struct fi_cq_tagged_entry e;
	CHECK_RET(fi_send(c.ep, "!", 1, NULL, 0, NULL), 0);
	comp_ok(c.txcq, &e);
	/* A receive no message will match (a tag never sent). */
	uint8_t rx[16];
	CHECK_RET(fi_trecv(c.ep, rx, sizeof(rx), NULL, 0, 0xdead, 0, rx), 0);
	ping_pong(&c, 0);
	rma_target(&c);
	expect_shutdown(&c);
	/* The receive still posted when the connection ended is canceled. */
	struct fi_cq_err_entry err;
	CHECK(comp(c.rxcq, &e, &err) == 0 && err.err == FI_ECANCELED && err.op_context == rx);
	CHECK_RET(fi_send(c.ep, rx, 1, NULL, 0, NULL), -FI_ENOTCONN);
	CHECK_RET(fi_recv(c.ep, rx, 1, NULL, 0, NULL), -FI_ENOTCONN);
	conn_close(&c);
	/* D: the client closes without fi_shutdown. */
	accept_next(&c, "D", "");
	expect_shutdown(&c);
	conn_close(&c);
	/* The silent socket stays until the client's timeout test is over. */
	char done[2];
	xt_get_file("client.done", done, 1);
	close(silent);
	CHECK_RET(fi_close(&domain->fid), 0);
	CHECK_RET(fi_close(&pep->fid), 0);
	CHECK_RET(fi_close(&eq->fid), 0);
	CHECK_RET(fi_close(&fabric->fid), 0);
	fi_freeinfo(info);
}

/* Connect `c` to `to` with `data`. */
static void connect_to(struct conn *c, const struct sockaddr_in *to, const char *data)
{
	conn_open(c, info);
	CHECK_RET(fi_connect(c->ep, to, data, strlen(data)), 0);
	CHECK_RET(fi_connect(c->ep, to, NULL, 0), -FI_EINVAL);
}

/* An error entry about `c` with `err` and, if `data`, that err_data. */
static void expect_failure(struct conn *c, int want, const char *data)
{
	uint32_t event = 0;
	struct fi_eq_cm_entry entry;
	CHECK_RET(cm_event(&event, &entry, sizeof(entry)), -FI_EAVAIL);
	struct fi_eq_err_entry err;
	char ed[64] = {0};
	cm_error(&err, ed, sizeof(ed));
	if (err.err != want)
		fprintf(stderr, "error entry %d (%s), want %d\n", err.err, fi_strerror(err.err), want);
	CHECK(err.err == want && err.fid == &c->ep->fid);
	if (data)
		CHECK(err.err_data_size == strlen(data) && !memcmp(ed, data, strlen(data)));
}

static void client(void)
{
	struct sockaddr_in srv;
	REQUIRE(xt_get_file("server.addr", &srv, sizeof(srv)) == sizeof(srv));
	uint16_t silent_port;
	REQUIRE(xt_get_file("silent.port", &silent_port, sizeof(silent_port)) == sizeof(silent_port));
	struct fi_eq_attr eq_attr = {.wait_obj = FI_WAIT_UNSPEC};
	struct fi_info *h = msg_hints();
	char port[16];
	snprintf(port, sizeof(port), "%u", ntohs(srv.sin_port));
	REQUIRE(fi_getinfo(XT_VERSION, xt_peer_ip, port, 0, h, &info) == 0);
	fi_freeinfo(h);
	REQUIRE(info->dest_addr && info->dest_addrlen == sizeof(srv));
	REQUIRE(fi_fabric(info->fabric_attr, &fabric, NULL) == 0);
	REQUIRE(fi_eq_open(fabric, &eq_attr, &eq, NULL) == 0);
	REQUIRE(fi_domain(fabric, info, &domain, NULL) == 0);
	struct conn c;
	char big[300] = {0};

	/* A: refused, with the server's data. */
	conn_open(&c, info);
	CHECK_RET(fi_connect(c.ep, info->dest_addr, big, 257), -FI_EINVAL);
	uint8_t b[8];
	CHECK_RET(fi_send(c.ep, b, 1, NULL, 0, NULL), -FI_ENOTCONN);
	CHECK_RET(fi_connect(c.ep, info->dest_addr, "reject me", 9), 0);
	expect_failure(&c, FI_ECONNREFUSED, "no");
	conn_close(&c);

	/* B: connected with the server's data; ping-pong; shutdown. */
	conn_open(&c, info);
	size_t plen = 8;
	CHECK_RET(fi_getpeer(c.ep, b, &plen), -FI_ENOTCONN);
	uint8_t rx[16];
	CHECK_RET(fi_recv(c.ep, rx, sizeof(rx), NULL, 0, rx), 0);
	CHECK_RET(fi_connect(c.ep, info->dest_addr, "hello", 5), 0);
	uint8_t buf[sizeof(struct fi_eq_cm_entry) + 256];
	struct fi_eq_cm_entry *entry = (void *)buf;
	uint32_t event = 0;
	CHECK_RET(cm_event(&event, entry, sizeof(buf)), sizeof(*entry) + 7);
	CHECK(event == FI_CONNECTED && entry->fid == &c.ep->fid && !entry->info);
	CHECK(!memcmp(entry->data, "welcome", 7));
	/* The receive posted before connecting takes the first message. */
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	comp_ok(c.rxcq, &e);
	CHECK(e.op_context == rx && e.len == 1 && rx[0] == '!');
	ping_pong(&c, 1);
	rma_initiator(&c);
	/* A receive the server never answers: canceled by fi_shutdown, whose
	 * canceled completions are written before it returns (fi_cm(3)). */
	CHECK_RET(fi_recv(c.ep, rx, sizeof(rx), NULL, 0, rx), 0);
	CHECK_RET(fi_shutdown(c.ep, 0), 0);
	CHECK(comp(c.rxcq, &e, &err) == 0 && err.err == FI_ECANCELED && err.op_context == rx);
	expect_shutdown(&c);
	CHECK_RET(fi_send(c.ep, b, 1, NULL, 0, NULL), -FI_ENOTCONN);
	conn_close(&c);

	/* C: nobody listens there (ICMP port unreachable). */
	struct sockaddr_in none = srv;
	none.sin_port = htons(9);
	connect_to(&c, &none, "");
	expect_failure(&c, FI_ECONNREFUSED, NULL);
	conn_close(&c);

	/* D: connected, then closed without fi_shutdown. */
	connect_to(&c, &srv, "D");
	ssize_t got = cm_event(&event, entry, sizeof(buf));
	if (got == -FI_EAVAIL)
		expect_failure(&c, 0, NULL);
	CHECK_RET(got, sizeof(*entry));
	CHECK(event == FI_CONNECTED);
	conn_close(&c);

	/* E: a socket that ignores the request; FI_XDP_PEER_TIMEOUT=2. */
	struct sockaddr_in quiet = srv;
	quiet.sin_port = silent_port;
	time_t t0 = time(NULL);
	connect_to(&c, &quiet, "anyone?");
	expect_failure(&c, FI_ETIMEDOUT, NULL);
	CHECK(time(NULL) - t0 <= 10);
	conn_close(&c);

	xt_put_file("client.done", "1", 1);
	CHECK_RET(fi_close(&domain->fid), 0);
	CHECK_RET(fi_close(&eq->fid), 0);
	CHECK_RET(fi_close(&fabric->fid), 0);
	fi_freeinfo(info);
}

int main(int argc, char **argv)
{
	xt_init(argc, argv);
	REQUIRE(argc >= 6);
	xt_dir = argv[5];
	if (!strcmp(argv[4], "server"))
		server();
	else
		client();
	return xt_done(argv[4]);
}
