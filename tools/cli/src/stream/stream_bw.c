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
 * With -o write or -o read the initiator (the side given SERVER) moves the data with RMA
 * instead, as fabtests' fi_rma_bw does: the target registers its buffer for remote access and
 * sends the buffer's address and key over the control connection; the initiator posts a window
 * of fi_write (fi_inject_write below inject_size) or fi_read, each of BYTES to its own slot of
 * the target's buffer, waits for the window's completions, and repeats. The last window's
 * writes ask for FI_DELIVERY_COMPLETE (fi_cq(3)), so their data is in the target's memory when
 * they complete; then one tagged message each way confirms the target is done, and the clock
 * stops there. With -c the target fills its slots with a pattern for read (the initiator checks
 * every window it read) and checks the last window's written pattern for write.
 *
 * Written for the `ofi-xdp stream-bench` tool (tools/cli/src/stream/mod.rs), which compiles it
 * against the installed libfabric and runs one process per test host. Endpoint names are swapped
 * over a TCP control connection, as fi_pingpong does, so any provider works.
 *
 * usage: ofi-xdp-stream -p PROV -S BYTES -W WINDOW -I ITERS [-w WARMUP] [-P PORT] [-c]
 *                       [-o tagged|write|read] [SERVER]
 *   without SERVER: receiver / RMA target (listens on PORT); with SERVER: sender / RMA
 *   initiator, prints one RESULT line:
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
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#define DATA_TAG 0x5ull
#define ACK_TAG 0x6ull
#define ACK_LEN 4
/* A run with no completion for this long has stalled: fail instead of hanging the benchmark. */
#define STALL_NS (30ull * 1000000000ull)
/* An RMA target sees no completion until the initiator's closing message; meanwhile it looks
 * this often whether the initiator has gone (its end of the control connection closed). */
#define TARGET_LOOK_NS (10ull * 1000000ull)
/* The key an RMA target asks for when the provider does not pick keys (no FI_MR_PROV_KEY). */
#define TARGET_MR_KEY 0x5844ull

enum op { OP_TAGGED, OP_WRITE, OP_READ };

struct opts {
	const char *prov;
	const char *server;
	size_t size;
	int window;
	long iters;
	long warmup;
	int port;
	int check;
	enum op op;
};

/* Where an RMA target's buffer is, as fi_rma(3) addresses it. */
struct remote {
	uint64_t addr; /* the buffer's virtual address with FI_MR_VIRT_ADDR, else 0 */
	uint64_t key;
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
	struct remote remote; /* RMA: the target's buffer (the initiator's copy) */
	int control;	      /* RMA: the control connection, open for the whole run; else -1 */
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
	    "[-o tagged|write|read] [SERVER]");
}

static struct opts parse(int argc, char **argv)
{
	struct opts o = {.window = 16, .iters = 1000, .warmup = -1, .port = 47610, .size = 65536};
	int c;
	while ((c = getopt(argc, argv, "p:S:W:I:w:P:co:")) != -1) {
		switch (c) {
		case 'p': o.prov = optarg; break;
		case 'S': o.size = strtoull(optarg, NULL, 0); break;
		case 'W': o.window = atoi(optarg); break;
		case 'I': o.iters = atol(optarg); break;
		case 'w': o.warmup = atol(optarg); break;
		case 'P': o.port = atoi(optarg); break;
		case 'c': o.check = 1; break;
		case 'o':
			if (!strcmp(optarg, "tagged"))
				o.op = OP_TAGGED;
			else if (!strcmp(optarg, "write"))
				o.op = OP_WRITE;
			else if (!strcmp(optarg, "read"))
				o.op = OP_READ;
			else
				usage();
			break;
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

/* RMA: registers the whole buffer as fi_mr(3) asks for the domain's mr_mode, as fabtests'
 * ft_reg_mr does. The target always registers (remote access needs a key); the initiator only
 * with FI_MR_LOCAL, for the descriptors of its local buffers. */
static void register_rma(struct fab *f, const struct opts *o)
{
	uint64_t mode = f->info->domain_attr->mr_mode;
	int target = !o->server;
	if (!target && !(mode & FI_MR_LOCAL))
		return;
	uint64_t access = FI_SEND | FI_RECV;
	if (target)
		access |= o->op == OP_WRITE ? FI_REMOTE_WRITE : FI_REMOTE_READ;
	else
		access |= o->op == OP_WRITE ? FI_WRITE : FI_READ;
	/* Without FI_MR_PROV_KEY the application picks the key. */
	uint64_t requested_key = mode & FI_MR_PROV_KEY ? 0 : TARGET_MR_KEY;
	CHECK(fi_mr_reg(f->domain, f->buf, f->buf_len, access, 0, requested_key, 0, &f->mr, NULL));
	if (mode & FI_MR_ENDPOINT) {
		/* FI_MR_ENDPOINT: the registration is bound to the endpoint, then enabled. */
		CHECK(fi_mr_bind(f->mr, &f->ep->fid, 0));
		CHECK(fi_mr_enable(f->mr));
	}
	if (mode & FI_MR_LOCAL)
		f->desc = fi_mr_desc(f->mr);
	/* FI_MR_VIRT_ADDR: remote addresses are virtual addresses; otherwise offsets into the
	 * registration (fi_mr(3) "FI_MR_VIRT_ADDR"). */
	f->remote.addr = mode & FI_MR_VIRT_ADDR ? (uint64_t)(uintptr_t)f->buf : 0;
	f->remote.key = fi_mr_key(f->mr);
	if (target && f->remote.key == FI_KEY_NOTAVAIL)
		die("the provider has no key for the target's registration (FI_MR_RAW?)");
}

static void open_fabric(struct fab *f, const struct opts *o)
{
	struct fi_info *hints = fi_allocinfo();
	if (!hints)
		die("fi_allocinfo");
	hints->caps = FI_TAGGED;
	hints->ep_attr->type = FI_EP_RDM;
	hints->mode = FI_CONTEXT;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	if (o->op != OP_TAGGED) {
		/* The modifiers restrict what they name (fi_getinfo(3) "CAPABILITIES"): the
		 * tagged acknowledgements keep FI_SEND | FI_RECV. */
		hints->caps |= FI_RMA | FI_SEND | FI_RECV;
		hints->caps |= o->op == OP_WRITE ? FI_WRITE | FI_REMOTE_WRITE
						 : FI_READ | FI_REMOTE_READ;
		hints->domain_attr->mr_mode |= FI_MR_ENDPOINT;
	}
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
	if (o->op != OP_TAGGED)
		register_rma(f, o);
	else if (f->info->domain_attr->mr_mode & FI_MR_LOCAL) {
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
	if (f->control >= 0)
		close(f->control);
	free(f->buf);
	free(f->ctx);
}

/* RMA: the target sends its buffer's address and key (network byte order) to the initiator. */
static void exchange_remote(struct fab *f, const struct opts *o, int fd)
{
	uint32_t words[4];
	if (!o->server) {
		words[0] = htonl((uint32_t)(f->remote.addr >> 32));
		words[1] = htonl((uint32_t)f->remote.addr);
		words[2] = htonl((uint32_t)(f->remote.key >> 32));
		words[3] = htonl((uint32_t)f->remote.key);
		write_all(fd, words, sizeof(words));
	} else {
		read_all(fd, words, sizeof(words));
		f->remote.addr = (uint64_t)ntohl(words[0]) << 32 | ntohl(words[1]);
		f->remote.key = (uint64_t)ntohl(words[2]) << 32 | ntohl(words[3]);
	}
}

/* Swaps endpoint names over the control connection and inserts the peer's; in RMA mode the
 * target's buffer goes the same way. */
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
	if (o->op != OP_TAGGED) {
		exchange_remote(f, o, fd);
		f->control = fd;
	} else {
		close(fd);
	}
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

/* RMA: the initiator's local slot and the target's slot `slot` (fi_rma(3) addresses). */
static char *local_slot(struct fab *f, const struct opts *o, int slot)
{
	return f->buf + o->size * ((size_t)o->window + (size_t)slot);
}

static uint64_t remote_slot(const struct fab *f, const struct opts *o, int slot)
{
	return f->remote.addr + o->size * (uint64_t)slot;
}

/* Posts one RMA write of slot `slot`; the run's last window asks for FI_DELIVERY_COMPLETE so
 * its completions mean the data is in the target's memory (fi_cq(3) "COMPLETION FLAGS"). */
static void post_write(struct fab *f, const struct opts *o, int slot, int last_window)
{
	char *src = local_slot(f, o, slot);
	uint64_t dst = remote_slot(f, o, slot);
	if (last_window) {
		struct iovec iov = {.iov_base = src, .iov_len = o->size};
		struct fi_rma_iov rma = {.addr = dst, .len = o->size, .key = f->remote.key};
		void *desc = f->desc;
		struct fi_msg_rma msg = {.msg_iov = &iov,
					 .desc = &desc,
					 .iov_count = 1,
					 .addr = f->peer,
					 .rma_iov = &rma,
					 .rma_iov_count = 1,
					 .context = &f->ctx[slot]};
		POST(f, fi_writemsg(f->ep, &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE));
		f->tx_posted++;
	} else if (o->size < f->info->tx_attr->inject_size) {
		POST(f, fi_inject_write(f->ep, src, o->size, f->peer, dst, f->remote.key));
	} else {
		POST(f, fi_write(f->ep, src, o->size, f->desc, f->peer, dst, f->remote.key,
				 &f->ctx[slot]));
		f->tx_posted++;
	}
}

/* The initiator's part: windows of writes or reads, each window's completions awaited. With
 * -c, the target's slot s holds sequence s throughout a read run (main fills it). */
static void rma_initiator(struct fab *f, const struct opts *o)
{
	long total = o->warmup + o->iters;
	uint64_t start = 0;
	for (long i = 0; i < total; i++) {
		int slot = (int)(i % o->window);
		char *local = local_slot(f, o, slot);
		if (i == o->warmup)
			start = now_ns();
		if (o->op == OP_WRITE) {
			if (o->check)
				fill(local, o->size, i);
			post_write(f, o, slot, i >= total - o->window);
		} else {
			/* A read that lands nothing must not pass the check on old data. */
			if (o->check)
				memset(local, 0, o->size);
			POST(f, fi_read(f->ep, local, o->size, f->desc, f->peer, remote_slot(f, o, slot),
					f->remote.key, &f->ctx[slot]));
			f->tx_posted++;
		}
		if (slot == o->window - 1) {
			wait_until(f, sends_done, 0);
			if (o->check && o->op == OP_READ)
				for (int s = 0; s < o->window; s++)
					if (!verify(local_slot(f, o, s), o->size, s))
						die("data check failed: read");
		}
	}
	/* The target confirms it is done (and, with -c, that the written data checked out). */
	send_ack(f, o);
	await_ack(f, o);
	double secs = (double)(now_ns() - start) / 1e9;
	double bytes = (double)o->size * (double)o->iters;
	printf("RESULT bytes=%zu window=%d iters=%ld secs=%.6f mb_per_s=%.2f msgs_per_s=%.0f\n",
	       o->size, o->window, o->iters, secs, bytes / secs / 1e6, (double)o->iters / secs);
	fflush(stdout);
}

/* Whether the other end of the control connection has closed it (it sends nothing more). */
static int peer_gone(int fd)
{
	char c;
	ssize_t r = recv(fd, &c, 1, MSG_DONTWAIT | MSG_PEEK);
	return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* The RMA target's part: its progress (polling) while the initiator moves the data, then the
 * closing exchange. The initiator's last window wrote sequence total - window + s to slot s. */
static void rma_target(struct fab *f, const struct opts *o)
{
	uint64_t looked = now_ns();
	while (!f->acks) {
		poll_cqs(f);
		if (now_ns() - looked > TARGET_LOOK_NS) {
			if (peer_gone(f->control))
				die("the initiator has gone before the closing message");
			looked = now_ns();
		}
	}
	f->acks--;
	post_ack_recv(f, o);
	if (o->check && o->op == OP_WRITE) {
		long last = o->warmup + o->iters - o->window;
		for (int s = 0; s < o->window; s++)
			if (!verify(f->buf + o->size * (size_t)s, o->size, last + s))
				die("data check failed: write");
	}
	send_ack(f, o);
}

int main(int argc, char **argv)
{
	struct opts o = parse(argc, argv);
	struct fab f = {.control = -1};
	open_fabric(&f, &o);
	if (o.op == OP_READ && o.check && !o.server)
		for (int s = 0; s < o.window; s++)
			fill(f.buf + o.size * (size_t)s, o.size, s);
	exchange_names(&f, &o);
	post_ack_recv(&f, &o);
	/* Start together: one acknowledgement each way before the clock may start. */
	if (o.server) {
		send_ack(&f, &o);
		await_ack(&f, &o);
		if (o.op == OP_TAGGED)
			sender(&f, &o);
		else
			rma_initiator(&f, &o);
	} else {
		await_ack(&f, &o);
		send_ack(&f, &o);
		if (o.op == OP_TAGGED)
			receiver(&f, &o);
		else
			rma_target(&f, &o);
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
