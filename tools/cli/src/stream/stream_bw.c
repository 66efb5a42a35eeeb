/*
 * ofi-xdp-stream: streaming bandwidth and message rate over any libfabric provider, with the
 * semantics of libfabric's own fabtests bandwidth programs (fi_rdm_tagged_bw): the sender posts
 * a window of tagged sends, waits for their send completions, then for a 4-byte
 * acknowledgement the receiver sends once it has counted the window's receive completions; the
 * receiver posts a window of receives, waits for them, acknowledges. The sender's clock runs
 * from the first message after warm-up to the last window's acknowledgement, so the figure is
 * delivered data, not data handed to the provider. Messages below the provider's inject_size go
 * through fi_tinject, as fabtests does.
 *
 * Written for the `ofi-xdp stream-bench` tool (tools/cli/src/stream/mod.rs), which compiles it
 * against the installed libfabric and runs one process per test host. Endpoint names are swapped
 * over a TCP control connection, as fi_pingpong does, so any provider works.
 *
 * usage: ofi-xdp-stream -p PROV -S BYTES -W WINDOW -I ITERS [-w WARMUP] [-P PORT] [-c] [SERVER]
 *   without SERVER: receiver (listens on PORT); with SERVER: sender, prints one RESULT line:
 *   RESULT bytes=B window=W iters=I secs=S mb_per_s=M msgs_per_s=R
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#define DATA_TAG 0x5ull
#define ACK_TAG 0x6ull
#define ACK_LEN 4
/* A run with no completion for this long has stalled: fail instead of hanging the benchmark. */
#define STALL_NS (30ull * 1000000000ull)

struct opts {
	const char *prov;
	const char *server;
	size_t size;
	int window;
	long iters;
	long warmup;
	int port;
	int check;
};

struct fab {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *txcq, *rxcq;
	struct fid_ep *ep;
	fi_addr_t peer;
	char *buf; /* window receive slots, window send slots, then two ack slots */
	size_t buf_len;
	struct fid_mr *mr;
	void *desc;
	struct fi_context *ctx; /* one per window slot (FI_CONTEXT mode) */
	struct fi_context ack_ctx[2];
	long tx_posted, tx_done, rx_done;
	int acks;
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define CHECK(call)                                                                     \
	do {                                                                            \
		int rc_ = (int)(call);                                                  \
		if (rc_) {                                                              \
			fprintf(stderr, "%s:%d %s: %s (%d)\n", __FILE__, __LINE__, #call, \
				fi_strerror(-rc_), rc_);                                \
			exit(2);                                                        \
		}                                                                       \
	} while (0)

static void die(const char *what)
{
	fprintf(stderr, "ofi-xdp-stream: %s\n", what);
	exit(2);
}

static void usage(void)
{
	die("usage: ofi-xdp-stream -p PROV -S BYTES -W WINDOW -I ITERS [-w WARMUP] [-P PORT] [-c] "
	    "[SERVER]");
}

static struct opts parse(int argc, char **argv)
{
	struct opts o = {.window = 16, .iters = 1000, .warmup = -1, .port = 47610, .size = 65536};
	int c;
	while ((c = getopt(argc, argv, "p:S:W:I:w:P:c")) != -1) {
		switch (c) {
		case 'p': o.prov = optarg; break;
		case 'S': o.size = strtoull(optarg, NULL, 0); break;
		case 'W': o.window = atoi(optarg); break;
		case 'I': o.iters = atol(optarg); break;
		case 'w': o.warmup = atol(optarg); break;
		case 'P': o.port = atoi(optarg); break;
		case 'c': o.check = 1; break;
		default: usage();
		}
	}
	if (optind < argc)
		o.server = argv[optind];
	if (!o.prov || o.window < 1 || o.iters < 1 || o.port < 1 || o.port > 65535)
		usage();
	if (o.warmup < 0)
		o.warmup = o.window * 4 < o.iters / 10 ? o.iters / 10 : o.window * 4;
	/* Whole windows only: both sides must agree on the number of acknowledgements. */
	o.iters = (o.iters + o.window - 1) / o.window * o.window;
	o.warmup = (o.warmup + o.window - 1) / o.window * o.window;
	return o;
}

/* --- control connection: endpoint names, as fi_pingpong swaps them ---------------------- */

static int control_connect(const struct opts *o)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
	if (inet_pton(AF_INET, o->server, &sa.sin_addr) != 1)
		die("SERVER must be an IPv4 address");
	/* The receiver may still be opening its endpoint: retry for a while. */
	for (int attempt = 0; attempt < 200; attempt++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0)
			die("socket");
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return fd;
		close(fd);
		usleep(50000);
	}
	die("cannot reach the receiver's control port");
	return -1;
}

static int control_accept(const struct opts *o)
{
	int one = 1;
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)o->port),
				 .sin_addr.s_addr = htonl(INADDR_ANY)};
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0)
		die("socket");
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1))
		die("cannot listen on the control port");
	int fd = accept(lfd, NULL, NULL);
	close(lfd);
	if (fd < 0)
		die("accept");
	return fd;
}

static void write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		ssize_t w = write(fd, c, n);
		if (w <= 0)
			die("control connection: write");
		c += w;
		n -= (size_t)w;
	}
}

static void read_all(int fd, void *p, size_t n)
{
	char *c = p;
	while (n) {
		ssize_t r = read(fd, c, n);
		if (r <= 0)
			die("control connection: read");
		c += r;
		n -= (size_t)r;
	}
}

/* --- libfabric objects ----------------------------------------------------------------- */

static void open_fabric(struct fab *f, const struct opts *o)
{
	struct fi_info *hints = fi_allocinfo();
	if (!hints)
		die("fi_allocinfo");
	hints->caps = FI_TAGGED;
	hints->ep_attr->type = FI_EP_RDM;
	hints->mode = FI_CONTEXT;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->fabric_attr->prov_name = strdup(o->prov);
	CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &f->info));
	fi_freeinfo(hints);

	CHECK(fi_fabric(f->info->fabric_attr, &f->fabric, NULL));
	CHECK(fi_domain(f->fabric, f->info, &f->domain, NULL));
	struct fi_cq_attr cq = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
	cq.size = (size_t)o->window * 2 + 16;
	CHECK(fi_cq_open(f->domain, &cq, &f->txcq, NULL));
	CHECK(fi_cq_open(f->domain, &cq, &f->rxcq, NULL));
	struct fi_av_attr av = {.type = FI_AV_TABLE, .count = 2};
	CHECK(fi_av_open(f->domain, &av, &f->av, NULL));
	CHECK(fi_endpoint(f->domain, f->info, &f->ep, NULL));
	CHECK(fi_ep_bind(f->ep, &f->av->fid, 0));
	CHECK(fi_ep_bind(f->ep, &f->txcq->fid, FI_TRANSMIT));
	CHECK(fi_ep_bind(f->ep, &f->rxcq->fid, FI_RECV));
	CHECK(fi_enable(f->ep));

	f->buf_len = o->size * 2 * (size_t)o->window + 2 * ACK_LEN;
	f->buf = aligned_alloc(4096, (f->buf_len + 4095) / 4096 * 4096);
	f->ctx = calloc((size_t)o->window, sizeof(*f->ctx));
	if (!f->buf || !f->ctx)
		die("out of memory");
	memset(f->buf, 0, f->buf_len);
	if (f->info->domain_attr->mr_mode & FI_MR_LOCAL) {
		CHECK(fi_mr_reg(f->domain, f->buf, f->buf_len, FI_SEND | FI_RECV, 0, 0, 0, &f->mr,
				NULL));
		f->desc = fi_mr_desc(f->mr);
	}
}

static void close_fabric(struct fab *f)
{
	fi_close(&f->ep->fid);
	if (f->mr)
		fi_close(&f->mr->fid);
	fi_close(&f->av->fid);
	fi_close(&f->rxcq->fid);
	fi_close(&f->txcq->fid);
	fi_close(&f->domain->fid);
	fi_close(&f->fabric->fid);
	fi_freeinfo(f->info);
	free(f->buf);
	free(f->ctx);
}

/* Swaps endpoint names over the control connection and inserts the peer's. */
static void exchange_names(struct fab *f, const struct opts *o)
{
	char mine[256], theirs[256];
	size_t len = sizeof(mine);
	uint32_t n, their_len;
	CHECK(fi_getname(&f->ep->fid, mine, &len));
	int fd = o->server ? control_connect(o) : control_accept(o);
	n = htonl((uint32_t)len);
	write_all(fd, &n, sizeof(n));
	write_all(fd, mine, len);
	read_all(fd, &their_len, sizeof(their_len));
	their_len = ntohl(their_len);
	if (their_len > sizeof(theirs))
		die("peer's endpoint name is too long");
	read_all(fd, theirs, their_len);
	close(fd);
	if (fi_av_insert(f->av, theirs, 1, &f->peer, 0, NULL) != 1)
		die("fi_av_insert of the peer's name failed");
}

/* --- completions ----------------------------------------------------------------------- */

static void cq_failed(struct fid_cq *cq, const char *which)
{
	struct fi_cq_err_entry err = {0};
	if (fi_cq_readerr(cq, &err, 0) == 1)
		fprintf(stderr, "ofi-xdp-stream: %s completion error: %s (%d), prov_errno %d\n", which,
			fi_strerror(err.err), err.err, err.prov_errno);
	exit(2);
}

/* Reads what both CQs hold; counts send completions, data receives and acknowledgements. */
static void poll_cqs(struct fab *f)
{
	struct fi_cq_tagged_entry e[64];
	ssize_t n = fi_cq_read(f->txcq, e, 64);
	if (n > 0)
		f->tx_done += n;
	else if (n == -FI_EAVAIL)
		cq_failed(f->txcq, "send");
	else if (n != -FI_EAGAIN)
		CHECK(n);
	n = fi_cq_read(f->rxcq, e, 64);
	if (n == -FI_EAVAIL)
		cq_failed(f->rxcq, "receive");
	else if (n < 0 && n != -FI_EAGAIN)
		CHECK(n);
	for (ssize_t i = 0; i < n; i++) {
		if (e[i].tag == ACK_TAG)
			f->acks++;
		else
			f->rx_done++;
	}
}

/* Polls until `done()` holds or `limit_ns` passes with no completion; says which. */
static int wait_for(struct fab *f, int (*done)(const struct fab *, long), long arg,
		    uint64_t limit_ns)
{
	uint64_t last = now_ns();
	long seen = f->tx_done + f->rx_done + f->acks;
	while (!done(f, arg)) {
		poll_cqs(f);
		long now_seen = f->tx_done + f->rx_done + f->acks;
		if (now_seen != seen) {
			seen = now_seen;
			last = now_ns();
		} else if (now_ns() - last > limit_ns) {
			return 0;
		}
	}
	return 1;
}

/* Polls until `done()` holds; fails when nothing completes for STALL_NS. */
static void wait_until(struct fab *f, int (*done)(const struct fab *, long), long arg)
{
	if (!wait_for(f, done, arg, STALL_NS))
		die("no completion for 30 s: the run stalled");
}

static int sends_done(const struct fab *f, long unused)
{
	(void)unused;
	return f->tx_done == f->tx_posted;
}

static int recvs_done(const struct fab *f, long target)
{
	return f->rx_done >= target;
}

static int acked(const struct fab *f, long unused)
{
	(void)unused;
	return f->acks > 0;
}

/* Retries a post while the provider asks for progress first (-FI_EAGAIN, fi_msg(3)). */
#define POST(f, call)                                   \
	do {                                            \
		ssize_t post_rc_;                            \
		while ((post_rc_ = (call)) == -FI_EAGAIN)    \
			poll_cqs(f);                    \
		CHECK(post_rc_);                        \
	} while (0)

static char *ack_slot(struct fab *f, const struct opts *o, int i)
{
	return f->buf + o->size * 2 * (size_t)o->window + (size_t)i * ACK_LEN;
}

static void post_ack_recv(struct fab *f, const struct opts *o)
{
	POST(f, fi_trecv(f->ep, ack_slot(f, o, 0), ACK_LEN, f->desc, f->peer, ACK_TAG, 0,
			 &f->ack_ctx[0]));
}

/* Sends the acknowledgement and waits for its send completion. */
static void send_ack(struct fab *f, const struct opts *o)
{
	POST(f, fi_tsend(f->ep, ack_slot(f, o, 1), ACK_LEN, f->desc, f->peer, ACK_TAG,
			 &f->ack_ctx[1]));
	f->tx_posted++;
	wait_until(f, sends_done, 0);
}

static void await_ack(struct fab *f, const struct opts *o)
{
	wait_until(f, acked, 0);
	f->acks--;
	post_ack_recv(f, o);
}

static void fill(char *p, size_t n, long seq)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (char)(seq + (long)i * 7);
}

static int verify(const char *p, size_t n, long seq)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (char)(seq + (long)i * 7))
			return 0;
	return 1;
}

/* --- the two roles --------------------------------------------------------------------- */

static void sender(struct fab *f, const struct opts *o)
{
	size_t inject = f->info->tx_attr->inject_size;
	long total = o->warmup + o->iters;
	uint64_t start = 0;
	for (long i = 0; i < total; i++) {
		int slot = (int)(i % o->window);
		/* A slot is refilled only after the previous window's sends completed. */
		char *tx = f->buf + o->size * ((size_t)o->window + (size_t)slot);
		if (i == o->warmup)
			start = now_ns();
		if (o->check)
			fill(tx, o->size, i);
		if (o->size < inject) {
			POST(f, fi_tinject(f->ep, tx, o->size, f->peer, DATA_TAG));
		} else {
			POST(f, fi_tsend(f->ep, tx, o->size, f->desc, f->peer, DATA_TAG,
					 &f->ctx[slot]));
			f->tx_posted++;
		}
		if (slot == o->window - 1) {
			wait_until(f, sends_done, 0);
			await_ack(f, o);
		}
	}
	double secs = (double)(now_ns() - start) / 1e9;
	double bytes = (double)o->size * (double)o->iters;
	printf("RESULT bytes=%zu window=%d iters=%ld secs=%.6f mb_per_s=%.2f msgs_per_s=%.0f\n",
	       o->size, o->window, o->iters, secs, bytes / secs / 1e6, (double)o->iters / secs);
	fflush(stdout);
}

static void receiver(struct fab *f, const struct opts *o)
{
	long total = o->warmup + o->iters;
	for (long i = 0; i < total; i++) {
		int slot = (int)(i % o->window);
		POST(f, fi_trecv(f->ep, f->buf + o->size * (size_t)slot, o->size, f->desc, f->peer,
				 DATA_TAG, 0, &f->ctx[slot]));
		if (slot == o->window - 1) {
			wait_until(f, recvs_done, i + 1);
			if (o->check) {
				/* FI_ORDER_SAS: the window's messages land in posting order. */
				for (int s = 0; s < o->window; s++)
					if (!verify(f->buf + o->size * (size_t)s, o->size,
						    i + 1 - o->window + s))
						die("data check failed");
			}
			send_ack(f, o);
		}
	}
}

int main(int argc, char **argv)
{
	struct opts o = parse(argc, argv);
	struct fab f = {0};
	open_fabric(&f, &o);
	exchange_names(&f, &o);
	post_ack_recv(&f, &o);
	/* Start together: one acknowledgement each way before the clock may start. */
	if (o.server) {
		send_ack(&f, &o);
		await_ack(&f, &o);
		sender(&f, &o);
	} else {
		await_ack(&f, &o);
		send_ack(&f, &o);
		receiver(&f, &o);
	}
	/* Goodbye: the sender tells the receiver it has everything, so the receiver does not
	 * close while its last acknowledgement may still need a retransmission. The sender may
	 * itself be gone before the goodbye's own delivery is confirmed, so the receiver waits
	 * for it only a little. */
	if (o.server)
		send_ack(&f, &o);
	else
		wait_for(&f, acked, 0, 2000000000ull);
	fi_cancel(&f.ep->fid, &f.ack_ctx[0]);
	close_fabric(&f);
	return 0;
}
