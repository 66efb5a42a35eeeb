/* Poll sets, wait sets and the wait objects of CQs, counters and EQs
 * (fi_poll(3), fi_cq(3), fi_cntr(3), fi_eq(3)), with manual progress: an
 * RDM endpoint sends to its own address, so every completion needs a
 * progress pass, which fi_poll / fi_wait / the blocking reads must drive.
 *
 *   - poll set: contexts of non-empty CQs and of counters that changed
 *     (once per change; fi_cntr_set resets), fi_poll_del, a member closed
 *     while in the set, bad arguments;
 *   - wait sets of each kind (UNSPEC, FD, MUTEX_COND, YIELD) with a CQ, a
 *     counter and an EQ: fi_wait times out (-FI_ETIMEDOUT), returns for a
 *     completion and for fi_eq_write; FD: FI_GETWAIT + fi_trywait +
 *     poll(2); MUTEX_COND: FI_GETWAIT gives the pthread objects; a set with
 *     members is busy;
 *   - a MUTEX_COND CQ: fi_cq_sread gets the completion;
 *   - a thread blocked in fi_cq_sread or fi_cntr_wait with nothing to
 *     receive sleeps (until a datagram, a timer or a notification), it
 *     does not wake every few hundred microseconds to run passes;
 *   - a completion or count that another thread queues (a send it posts)
 *     wakes a thread blocked in fi_cq_sread or fi_cntr_wait at once (a
 *     notification, not its next timer).
 *
 * argv: <iface> <local IP> <peer IP> */
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include <poll.h>
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include "xt.h"

static struct xt_res r;
static struct fid_av *av;
static fi_addr_t me;

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

struct ep {
	struct fid_ep *ep;
	struct fid_cq *cq;
	struct fid_cntr *cntr;
};

/* An endpoint with one CQ (both directions) and one counter (sends and
 * receives), opened with these wait attributes, with its own address in
 * the AV. */
static void ep_open(struct ep *e, int cq_wait, int cntr_wait, struct fid_wait *set)
{
	struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_CONTEXT, .wait_obj = cq_wait, .wait_set = set};
	struct fi_cntr_attr ka = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = cntr_wait, .wait_set = set};
	REQUIRE(fi_cq_open(r.domain, &ca, &e->cq, &e->cq) == 0);
	REQUIRE(fi_cntr_open(r.domain, &ka, &e->cntr, &e->cntr) == 0);
	REQUIRE(fi_endpoint(r.domain, r.info, &e->ep, NULL) == 0);
	REQUIRE(fi_ep_bind(e->ep, &av->fid, 0) == 0);
	REQUIRE(fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV) == 0);
	REQUIRE(fi_ep_bind(e->ep, &e->cntr->fid, FI_SEND | FI_RECV) == 0);
	REQUIRE(fi_enable(e->ep) == 0);
	char addr[64];
	size_t len = sizeof(addr);
	REQUIRE(fi_getname(&e->ep->fid, addr, &len) == 0);
	REQUIRE(fi_av_insert(av, addr, 1, &me, 0, NULL) == 1);
}

static void ep_close(struct ep *e)
{
	CHECK_RET(fi_close(&e->ep->fid), 0);
	CHECK_RET(fi_close(&e->cq->fid), 0);
	CHECK_RET(fi_close(&e->cntr->fid), 0);
}

/* A receive and a send to ourselves: two completions, two counts, all
 * waiting for a progress pass. */
static void send_self(struct ep *e, char *rx, char *tx)
{
	CHECK_RET(fi_recv(e->ep, rx, 8, NULL, FI_ADDR_UNSPEC, rx), 0);
	CHECK_RET(fi_send(e->ep, tx, 8, NULL, me, tx), 0);
}

static void drain(struct ep *e, int want)
{
	struct fi_cq_entry c;
	double t0 = now_ms();
	while (want > 0 && now_ms() - t0 < 5000) {
		ssize_t n = fi_cq_read(e->cq, &c, 1);
		if (n == 1)
			want--;
		else
			CHECK(n == -FI_EAGAIN);
	}
	CHECK(want == 0);
}

static void poll_sets(void)
{
	struct ep e;
	ep_open(&e, FI_WAIT_NONE, FI_WAIT_NONE, NULL);
	struct fi_poll_attr pa = {0};
	struct fid_poll *ps;
	REQUIRE(fi_poll_open(r.domain, &pa, &ps) == 0);
	CHECK_RET(fi_poll_add(ps, &e.cq->fid, 0), 0);
	CHECK_RET(fi_poll_add(ps, &e.cntr->fid, 0), 0);
	CHECK_RET(fi_poll_add(ps, &av->fid, 0), -FI_EINVAL);
	CHECK_RET(fi_poll_add(ps, &e.cq->fid, 1), -FI_EBADFLAGS);
	void *ctx[4];
	CHECK_RET(fi_poll(ps, ctx, 4), 0);
	CHECK_RET(fi_poll(ps, NULL, 4), -FI_EINVAL);
	char rx[8], tx[8] = "polling";
	send_self(&e, rx, tx);
	/* fi_poll drives progress: both the CQ and the counter have events. */
	int cq_seen = 0, cntr_seen = 0;
	double t0 = now_ms();
	while ((!cq_seen || !cntr_seen) && now_ms() - t0 < 5000) {
		int n = fi_poll(ps, ctx, 4);
		CHECK(n >= 0 && n <= 2);
		for (int i = 0; i < n; i++) {
			cq_seen |= ctx[i] == &e.cq;
			cntr_seen |= ctx[i] == &e.cntr;
		}
	}
	CHECK(cq_seen && cntr_seen);
	drain(&e, 2);
	CHECK(!memcmp(rx, "polling", 8));
	/* Reported once: the counter has not changed since. */
	CHECK_RET(fi_poll(ps, ctx, 4), 0);
	CHECK(fi_cntr_read(e.cntr) == 2);
	/* Room for one context: one is returned. */
	send_self(&e, rx, tx);
	t0 = now_ms();
	int n = 0;
	while (n == 0 && now_ms() - t0 < 5000)
		n = fi_poll(ps, ctx, 1);
	CHECK(n == 1);
	drain(&e, 2);
	CHECK_RET(fi_poll_del(ps, &e.cntr->fid, 0), 0);
	CHECK_RET(fi_poll_del(ps, &e.cntr->fid, 0), -FI_EINVAL);
	CHECK_RET(fi_poll(ps, ctx, 4), 0);
	/* A member may close while in the set; it just leaves. */
	ep_close(&e);
	CHECK_RET(fi_poll(ps, ctx, 4), 0);
	CHECK_RET(fi_close(&ps->fid), 0);
}

struct writer {
	struct fid_eq *eq;
	int delay_ms;
};

static void *eq_writer(void *arg)
{
	struct writer *w = arg;
	usleep(w->delay_ms * 1000);
	struct fi_eq_entry in = {.data = 9};
	fi_eq_write(w->eq, FI_NOTIFY, &in, sizeof(in), 0);
	return NULL;
}

static void wait_set(int kind)
{
	struct fi_wait_attr wa = {.wait_obj = kind};
	struct fid_wait *ws;
	REQUIRE(fi_wait_open(r.fabric, &wa, &ws) == 0);
	int obj = -1;
	CHECK_RET(fi_control(&ws->fid, FI_GETWAITOBJ, &obj), 0);
	CHECK(obj == kind);
	int fd = -1;
	struct fi_mutex_cond mc = {0};
	if (kind == FI_WAIT_FD) {
		CHECK_RET(fi_control(&ws->fid, FI_GETWAIT, &fd), 0);
		CHECK(fd >= 0);
	} else if (kind == FI_WAIT_MUTEX_COND) {
		CHECK_RET(fi_control(&ws->fid, FI_GETWAIT, &mc), 0);
		CHECK(mc.mutex && mc.cond);
	} else {
		CHECK_RET(fi_control(&ws->fid, FI_GETWAIT, &fd), -FI_ENOSYS);
	}
	struct ep e;
	ep_open(&e, FI_WAIT_SET, FI_WAIT_SET, ws);
	struct fi_eq_attr ea = {.wait_obj = FI_WAIT_SET, .wait_set = ws, .flags = FI_WRITE};
	struct fid_eq *eq;
	REQUIRE(fi_eq_open(r.fabric, &ea, &eq, NULL) == 0);
	/* Busy while queues use it. */
	CHECK_RET(fi_close(&ws->fid), -FI_EBUSY);
	/* Nothing happens: the wait times out. */
	double t0 = now_ms();
	CHECK_RET(fi_wait(ws, 30), -FI_ETIMEDOUT);
	CHECK(now_ms() - t0 >= 25);
	struct fid *fids[1] = {&ws->fid};
	if (kind == FI_WAIT_FD) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		CHECK_RET(fi_trywait(r.fabric, fids, 1), 0);
		CHECK_RET(poll(&p, 1, 0), 0);
	}
	if (kind == FI_WAIT_MUTEX_COND) /* manual progress: never safe */
		CHECK_RET(fi_trywait(r.fabric, fids, 1), -FI_EAGAIN);
	/* A completion needs progress, which fi_wait drives. */
	char rx[8], tx[8] = "waitset";
	send_self(&e, rx, tx);
	t0 = now_ms();
	CHECK_RET(fi_wait(ws, 5000), 0);
	CHECK(now_ms() - t0 < 4000);
	drain(&e, 2);
	CHECK(!memcmp(rx, "waitset", 8));
	/* A change is reported once: soon nothing is left to wait for (the
	 * counter may have moved again after the first fi_wait returned). */
	int again = fi_wait(ws, 10);
	if (again == 0)
		again = fi_wait(ws, 10);
	CHECK_RET(again, -FI_ETIMEDOUT);
	if (kind == FI_WAIT_FD) {
		/* Something queued makes the fd readable, and trywait refuses. */
		struct fi_eq_entry in = {.data = 1}, out;
		uint32_t ev;
		struct pollfd p = {.fd = fd, .events = POLLIN};
		CHECK_RET(fi_trywait(r.fabric, fids, 1), 0);
		CHECK_RET(fi_eq_write(eq, FI_NOTIFY, &in, sizeof(in), 0), sizeof(in));
		CHECK_RET(poll(&p, 1, 1000), 1);
		CHECK_RET(fi_trywait(r.fabric, fids, 1), -FI_EAGAIN);
		CHECK_RET(fi_eq_read(eq, &ev, &out, sizeof(out), 0), sizeof(out));
	}
	/* Another thread's fi_eq_write ends a wait. */
	struct writer w = {.eq = eq, .delay_ms = 50};
	pthread_t t;
	REQUIRE(pthread_create(&t, NULL, eq_writer, &w) == 0);
	t0 = now_ms();
	CHECK_RET(fi_wait(ws, 5000), 0);
	CHECK(now_ms() - t0 >= 40 && now_ms() - t0 < 4000);
	pthread_join(t, NULL);
	struct fi_eq_entry out;
	uint32_t ev;
	CHECK_RET(fi_eq_read(eq, &ev, &out, sizeof(out), 0), sizeof(out));
	CHECK(ev == FI_NOTIFY && out.data == 9);
	ep_close(&e);
	CHECK_RET(fi_close(&ws->fid), -FI_EBUSY); /* the EQ */
	CHECK_RET(fi_close(&eq->fid), 0);
	CHECK_RET(fi_close(&ws->fid), 0);
}

static void mutex_cond_cq(void)
{
	struct ep e;
	ep_open(&e, FI_WAIT_MUTEX_COND, FI_WAIT_MUTEX_COND, NULL);
	struct fi_mutex_cond mc = {0};
	CHECK_RET(fi_control(&e.cq->fid, FI_GETWAIT, &mc), 0);
	CHECK(mc.mutex && mc.cond);
	CHECK_RET(fi_control(&e.cntr->fid, FI_GETWAIT, &mc), 0);
	char rx[8], tx[8] = "mcond";
	send_self(&e, rx, tx);
	struct fi_cq_entry c[2];
	int got = 0;
	double t0 = now_ms();
	while (got < 2 && now_ms() - t0 < 5000) {
		ssize_t n = fi_cq_sread(e.cq, c, 2, NULL, 1000);
		if (n > 0)
			got += n;
		else
			CHECK(n == -FI_EAGAIN);
	}
	CHECK(got == 2);
	CHECK_RET(fi_cntr_wait(e.cntr, 2, 1000), 0);
	/* Holding the (recursive) mutex while reading does not deadlock. */
	pthread_mutex_lock(mc.mutex);
	send_self(&e, rx, tx);
	CHECK_RET(fi_cntr_wait(e.cntr, 4, 1000), 0);
	pthread_mutex_unlock(mc.mutex);
	drain(&e, 2);
	ep_close(&e);
}

static long thread_wakeups(void)
{
	struct rusage u;
	getrusage(RUSAGE_THREAD, &u);
	return u.ru_nvcsw;
}

/* One second blocked with nothing to receive: a sleep until something can
 * happen (the endpoint's sockets, its protocol timers, at most every 50
 * ms), not a wake-up every 200 us to run a pass (that was ~5000 wake-ups
 * and 5 % of a core per blocked thread). */
static void idle_blocking_reads(int kind)
{
	struct ep e;
	ep_open(&e, kind, kind, NULL);
	struct fi_cq_entry c;
	long w0 = thread_wakeups();
	CHECK_RET(fi_cq_sread(e.cq, &c, 1, NULL, 1000), -FI_EAGAIN);
	long cq = thread_wakeups() - w0;
	w0 = thread_wakeups();
	CHECK_RET(fi_cntr_wait(e.cntr, 1, 1000), -FI_ETIMEDOUT);
	long cntr = thread_wakeups() - w0;
	printf("wait kind %d: wake-ups in 1 s blocked: fi_cq_sread %ld, fi_cntr_wait %ld\n", kind,
	       cq, cntr);
	CHECK(cq < 400 && cntr < 400);
	/* And it still wakes for a message. */
	char rx[8], tx[8] = "idle";
	send_self(&e, rx, tx);
	int got = 0;
	double t0 = now_ms();
	while (got < 2 && now_ms() - t0 < 5000) {
		ssize_t n = fi_cq_sread(e.cq, &c, 1, NULL, 1000);
		if (n > 0)
			got += n;
		else
			CHECK(n == -FI_EAGAIN);
	}
	CHECK(got == 2);
	ep_close(&e);
}

/* The same for fi_wait on a wait set holding an endpoint's CQ and counter:
 * it sleeps until their endpoint's sockets or timers need it. */
static void idle_wait_set(int kind)
{
	struct fi_wait_attr wa = {.wait_obj = kind};
	struct fid_wait *ws;
	REQUIRE(fi_wait_open(r.fabric, &wa, &ws) == 0);
	struct ep e;
	ep_open(&e, FI_WAIT_SET, FI_WAIT_SET, ws);
	long w0 = thread_wakeups();
	CHECK_RET(fi_wait(ws, 1000), -FI_ETIMEDOUT);
	long n = thread_wakeups() - w0;
	printf("wait set kind %d: wake-ups in 1 s blocked in fi_wait: %ld\n", kind, n);
	CHECK(n < 400);
	/* A message still ends the wait at once. */
	char rx[8], tx[8] = "idleset";
	send_self(&e, rx, tx);
	double t0 = now_ms();
	CHECK_RET(fi_wait(ws, 5000), 0);
	CHECK(now_ms() - t0 < 1000);
	drain(&e, 2);
	CHECK(!memcmp(rx, "idleset", 8));
	ep_close(&e);
	CHECK_RET(fi_close(&ws->fid), 0);
}

/* A thread blocked on a send's completion (or count) while another thread
 * posts the send. */
struct blocked {
	struct fid_cq *cq;
	struct fid_cntr *cntr;
	double returned_ms;
	int ok;
	int returned;
};

static void *block_on_send(void *arg)
{
	struct blocked *b = arg;
	if (b->cq) {
		struct fi_cq_entry c;
		b->ok = fi_cq_sread(b->cq, &c, 1, NULL, 3000) == 1;
	} else {
		b->ok = fi_cntr_wait(b->cntr, 2, 3000) == 0;
	}
	b->returned_ms = now_ms();
	__atomic_store_n(&b->returned, 1, __ATOMIC_RELEASE);
	return NULL;
}

static fi_addr_t ep_on_av(struct fid_ep *ep)
{
	char addr[64];
	size_t len = sizeof(addr);
	fi_addr_t a;
	REQUIRE(fi_getname(&ep->fid, addr, &len) == 0);
	REQUIRE(fi_av_insert(av, addr, 1, &a, 0, NULL) == 1);
	return a;
}

/* A small send on a session that is up completes when it is sent (inject
 * complete); the posting thread's next pass queues that completion (here:
 * its reads of the sender's receive CQ). Nothing arrives for the sender's
 * endpoint (its peer, another endpoint, is not progressed meanwhile, so no
 * ack comes): only the notification of its send CQ or counter can wake a
 * thread blocked on it; without one it would wake at its next timer (20 ms
 * later, measured with the notification removed; 0.1-0.2 ms with it here,
 * 0.4-12 ms in the VM suite's emulated guest on a busy host, and up to
 * 25 ms on a busier one). Five tries; most must wake within 15 ms: before
 * that timer (not asserted in the VM suite's guest). */
static void woken_by_another_threads_completion(int use_cntr)
{
	int prompt = 0;
	for (int i = 0; i < 5; i++) {
		struct fid_cq *txcq, *rxcq, *srxcq;
		struct fid_cntr *txcntr;
		struct fi_cq_attr txa = {.format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_UNSPEC};
		struct fi_cq_attr rxa = {.format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE};
		struct fi_cntr_attr ka = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC};
		struct fid_ep *sender, *receiver;
		REQUIRE(fi_cq_open(r.domain, &txa, &txcq, NULL) == 0);
		REQUIRE(fi_cq_open(r.domain, &rxa, &rxcq, NULL) == 0);
		REQUIRE(fi_cq_open(r.domain, &rxa, &srxcq, NULL) == 0);
		REQUIRE(fi_cntr_open(r.domain, &ka, &txcntr, NULL) == 0);
		REQUIRE(fi_endpoint(r.domain, r.info, &sender, NULL) == 0);
		REQUIRE(fi_endpoint(r.domain, r.info, &receiver, NULL) == 0);
		REQUIRE(fi_ep_bind(sender, &av->fid, 0) == 0);
		REQUIRE(fi_ep_bind(receiver, &av->fid, 0) == 0);
		REQUIRE(fi_ep_bind(sender, &txcq->fid, FI_TRANSMIT) == 0);
		REQUIRE(fi_ep_bind(sender, &srxcq->fid, FI_RECV) == 0);
		REQUIRE(fi_ep_bind(sender, &txcntr->fid, FI_SEND) == 0);
		REQUIRE(fi_ep_bind(receiver, &rxcq->fid, FI_TRANSMIT | FI_RECV) == 0);
		REQUIRE(fi_enable(sender) == 0);
		REQUIRE(fi_enable(receiver) == 0);
		fi_addr_t to = ep_on_av(receiver);
		char rx[8], tx[8] = "woken";
		struct fi_cq_entry c;
		/* A first message sets the session up (both sides progressed). */
		CHECK_RET(fi_recv(receiver, rx, 8, NULL, FI_ADDR_UNSPEC, rx), 0);
		CHECK_RET(fi_send(sender, tx, 8, NULL, to, tx), 0);
		int done = 0;
		double t0 = now_ms();
		while (done < 2 && now_ms() - t0 < 3000)
			done += (fi_cq_read(txcq, &c, 1) == 1) + (fi_cq_read(rxcq, &c, 1) == 1);
		CHECK(done == 2);
		CHECK_RET(fi_recv(receiver, rx, 8, NULL, FI_ADDR_UNSPEC, rx), 0);
		struct blocked b = {.cq = use_cntr ? NULL : txcq, .cntr = txcntr};
		pthread_t t;
		REQUIRE(pthread_create(&t, NULL, block_on_send, &b) == 0);
		usleep(100 * 1000); /* long past its polling: asleep */
		double sent = now_ms();
		CHECK_RET(fi_send(sender, tx, 8, NULL, to, tx), 0);
		/* Our reads of the sender's receive CQ run its passes, which
		 * queue the send's completion for the blocked thread. */
		while (!__atomic_load_n(&b.returned, __ATOMIC_ACQUIRE) && now_ms() - sent < 3000)
			fi_cq_read(srxcq, &c, 1);
		pthread_join(t, NULL);
		CHECK(b.ok);
		double took = b.returned_ms - sent;
		if (took < 15)
			prompt++;
		printf("%s: woken %.2f ms after another thread's send completed\n",
		       use_cntr ? "fi_cntr_wait" : "fi_cq_sread", took);
		t0 = now_ms();
		while (fi_cq_read(rxcq, &c, 1) != 1 && now_ms() - t0 < 3000)
			;
		CHECK(!memcmp(rx, "woken", 6));
		CHECK_RET(fi_close(&sender->fid), 0);
		CHECK_RET(fi_close(&receiver->fid), 0);
		CHECK_RET(fi_close(&txcq->fid), 0);
		CHECK_RET(fi_close(&rxcq->fid), 0);
		CHECK_RET(fi_close(&srxcq->fid), 0);
		CHECK_RET(fi_close(&txcntr->fid), 0);
	}
	/* In the VM suite's guest a wake-up's latency is the host's scheduler's
	 * (0.4-25 ms seen there on a busy host): reported, not asserted. */
	const char *vm = getenv("OFI_XDP_TEST_IN_VM");
	if (vm && strcmp(vm, "1") == 0)
		printf("%s: %d of 5 woken within 15 ms (not asserted in a VM)\n",
		       use_cntr ? "fi_cntr_wait" : "fi_cq_sread", prompt);
	else
		CHECK(prompt >= 3);
}

int main(int argc, char **argv)
{
	xt_init(argc, argv);
	xt_open(&r, FI_EP_RDM, FI_MSG);
	struct fi_av_attr aa = {0};
	REQUIRE(fi_av_open(r.domain, &aa, &av, NULL) == 0);
	poll_sets();
	int kinds[] = {FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD};
	for (unsigned i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		wait_set(kinds[i]);
	mutex_cond_cq();
	idle_blocking_reads(FI_WAIT_UNSPEC);
	idle_blocking_reads(FI_WAIT_FD);
	idle_wait_set(FI_WAIT_UNSPEC);
	idle_wait_set(FI_WAIT_FD);
	woken_by_another_threads_completion(0);
	woken_by_another_threads_completion(1);
	CHECK_RET(fi_close(&av->fid), 0);
	xt_close(&r);
	return xt_done("waits");
}
