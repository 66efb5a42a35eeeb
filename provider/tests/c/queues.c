/* Completion queues, event queues and counters without traffic: opening
 * with each format and wait object, the empty-queue return codes of
 * fi_cq(3)/fi_eq(3)/fi_cntr(3), blocking reads with timeouts, fi_cq_signal
 * and POSIX signals, strerror, and bad arguments. */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include "xt.h"

static void on_signal(int sig)
{
	(void)sig;
}

/* Set once the blocking read that the signals are for has returned. */
static volatile sig_atomic_t read_returned;

/* Signals sent to the reader. */
static volatile sig_atomic_t signals_sent;

/* One SIGUSR1 to the reader after 100 ms. The provider holds signals while
 * it runs a progress pass between two waits and waits with the thread's
 * own mask, so that one signal ends the read wherever it lands; if the
 * read has still not returned after 2 s, more follow (so a regression
 * fails the check on signals_sent instead of hanging the suite). */
static void *signal_after_100ms(void *arg)
{
	usleep(100 * 1000);
	for (int i = 0; i < 20 && !read_returned; i++) {
		pthread_kill(*(pthread_t *)arg, SIGUSR1);
		signals_sent++;
		for (int t = 0; t < 20 && !read_returned; t++)
			usleep(100 * 1000);
	}
	return NULL;
}

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void cq_tests(struct xt_res *r)
{
	struct fid_cq *cq;
	struct fi_cq_attr attr = {0};
	struct fi_cq_tagged_entry ent[4];
	struct fi_cq_err_entry err = {0};
	fi_addr_t src[4];
	int formats[] = {FI_CQ_FORMAT_UNSPEC, FI_CQ_FORMAT_CONTEXT, FI_CQ_FORMAT_MSG,
			 FI_CQ_FORMAT_DATA, FI_CQ_FORMAT_TAGGED};
	for (unsigned i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
		attr.format = formats[i];
		CHECK_RET(fi_cq_open(r->domain, &attr, &cq, NULL), 0);
		CHECK_RET(fi_cq_read(cq, ent, 4), -FI_EAGAIN);
		CHECK_RET(fi_cq_readfrom(cq, ent, 4, src), -FI_EAGAIN);
		CHECK_RET(fi_cq_readerr(cq, &err, 0), -FI_EAGAIN);
		/* count 0 only drives progress; an empty CQ still says so. */
		CHECK_RET(fi_cq_read(cq, NULL, 0), -FI_EAGAIN);
		CHECK_RET(fi_cq_read(cq, NULL, 1), -FI_EINVAL);
		/* readfrom with no address array reads like fi_cq_read. */
		CHECK_RET(fi_cq_readfrom(cq, ent, 1, NULL), -FI_EAGAIN);
		CHECK_RET(fi_cq_readerr(cq, NULL, 0), -FI_EINVAL);
		/* fi_cq(3) defines no readerr flags: ignored. */
		CHECK_RET(fi_cq_readerr(cq, &err, FI_PEEK), -FI_EAGAIN);
		/* FI_WAIT_NONE (default): no blocking reads, no signal, nothing
		 * fi_trywait could make safe to block on. */
		CHECK_RET(fi_cq_sread(cq, ent, 1, NULL, 0), -FI_EINVAL);
		CHECK_RET(fi_cq_signal(cq), -FI_EINVAL);
		struct fid *none[1] = {&cq->fid};
		CHECK_RET(fi_trywait(r->fabric, none, 1), -FI_EINVAL);
		int wo = -1;
		CHECK_RET(fi_control(&cq->fid, FI_GETWAITOBJ, &wo), 0);
		CHECK(wo == FI_WAIT_NONE);
		CHECK_RET(fi_close(&cq->fid), 0);
	}

	/* Blocking reads time out with -FI_EAGAIN, a signal wakes them. */
	attr.format = FI_CQ_FORMAT_CONTEXT;
	attr.wait_obj = FI_WAIT_UNSPEC;
	CHECK_RET(fi_cq_open(r->domain, &attr, &cq, NULL), 0);
	/* Nowhere to put an entry: refused at once, not after the wait. */
	CHECK_RET(fi_cq_sread(cq, NULL, 1, NULL, -1), -FI_EINVAL);
	CHECK_RET(fi_cq_sreadfrom(cq, NULL, 1, src, NULL, -1), -FI_EINVAL);
	double t0 = now_ms();
	CHECK_RET(fi_cq_sread(cq, ent, 1, NULL, 50), -FI_EAGAIN);
	double dt = now_ms() - t0;
	CHECK(dt >= 45 && dt < 1000);
	CHECK_RET(fi_cq_signal(cq), 0);
	t0 = now_ms();
	CHECK_RET(fi_cq_sreadfrom(cq, ent, 1, src, NULL, 5000), -FI_EAGAIN);
	CHECK(now_ms() - t0 < 1000);
	/* So does a POSIX signal, even with no timeout: "Threads blocking in
	 * this function will return to the caller if they are signaled by some
	 * external source" (fi_cq(3)). */
	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	pthread_t killer;
	pthread_t self = pthread_self();
	REQUIRE(pthread_create(&killer, NULL, signal_after_100ms, &self) == 0);
	t0 = now_ms();
	CHECK_RET(fi_cq_sread(cq, ent, 1, NULL, -1), -FI_EAGAIN);
	read_returned = 1;
	dt = now_ms() - t0;
	CHECK(dt >= 90 && dt < 1900);
	pthread_join(killer, NULL);
	CHECK(signals_sent == 1);
	void *wait;
	CHECK_RET(fi_control(&cq->fid, FI_GETWAIT, &wait), -FI_ENOSYS);
	char buf[64];
	CHECK(fi_cq_strerror(cq, FI_ETRUNC, NULL, buf, sizeof(buf)) == buf);
	CHECK(!strcmp(buf, fi_strerror(FI_ETRUNC)));
	CHECK(fi_cq_strerror(cq, FI_ETRUNC, NULL, NULL, 0) != NULL);
	CHECK(fi_cq_strerror(cq, FI_ETRUNC, NULL, buf, 4) == buf && strlen(buf) == 3);
	CHECK_RET(fi_close(&cq->fid), 0);
	attr.wait_obj = FI_WAIT_YIELD;
	attr.wait_cond = FI_CQ_COND_THRESHOLD;
	CHECK_RET(fi_cq_open(r->domain, &attr, &cq, NULL), 0);
	/* fi_cq(3): "the cond field is interpreted as a size_t threshold
	 * value" - the value itself, not a pointer to one. */
	CHECK_RET(fi_cq_sread(cq, ent, 4, (void *)(uintptr_t)2, 10), -FI_EAGAIN);
	CHECK_RET(fi_cq_sread(cq, ent, 4, (void *)(uintptr_t)SIZE_MAX, 10), -FI_EAGAIN);
	CHECK_RET(fi_cq_sread(cq, ent, 4, NULL, 10), -FI_EAGAIN);
	CHECK_RET(fi_close(&cq->fid), 0);

	/* Open errors. */
	memset(&attr, 0, sizeof(attr));
	CHECK_RET(fi_cq_open(r->domain, NULL, &cq, NULL), -FI_EINVAL);
	attr.format = 42;
	CHECK_RET(fi_cq_open(r->domain, &attr, &cq, NULL), -FI_EINVAL);
	attr.format = FI_CQ_FORMAT_MSG;
	attr.flags = FI_SEND;
	CHECK_RET(fi_cq_open(r->domain, &attr, &cq, NULL), -FI_EBADFLAGS);
	attr.flags = FI_AFFINITY;
	CHECK_RET(fi_cq_open(r->domain, &attr, &cq, NULL), 0);
	CHECK_RET(fi_close(&cq->fid), 0);
	attr.flags = 0;
	attr.wait_obj = FI_WAIT_FD;
	CHECK_RET(fi_cq_open(r->domain, &attr, &cq, NULL), 0);
	int fd = -1;
	CHECK_RET(fi_control(&cq->fid, FI_GETWAIT, &fd), 0);
	CHECK(fd >= 0);
	/* Nothing queued: fi_trywait says blocking is safe; fi_cq_signal makes
	 * the fd readable. */
	struct fid *fids[1] = {&cq->fid};
	CHECK_RET(fi_trywait(r->fabric, fids, 1), 0);
	struct pollfd p = {.fd = fd, .events = POLLIN};
	CHECK_RET(poll(&p, 1, 0), 0);
	CHECK_RET(fi_cq_signal(cq), 0);
	CHECK_RET(poll(&p, 1, 1000), 1);
	CHECK_RET(fi_trywait(r->fabric, fids, 1), 0);
	CHECK_RET(poll(&p, 1, 0), 0);
	CHECK_RET(fi_close(&cq->fid), 0);
	CHECK_RET(fi_trywait(r->fabric, fids, 0), 0);
	/* FI_WAIT_MUTEX_COND: FI_GETWAIT hands out the mutex and condition;
	 * with manual progress blocking on them directly is never safe. */
	attr.wait_obj = FI_WAIT_MUTEX_COND;
	CHECK_RET(fi_cq_open(r->domain, &attr, &cq, NULL), 0);
	struct fi_mutex_cond mc = {0};
	CHECK_RET(fi_control(&cq->fid, FI_GETWAIT, &mc), 0);
	CHECK(mc.mutex && mc.cond);
	CHECK_RET(fi_trywait(r->fabric, fids, 0), 0);
	fids[0] = &cq->fid;
	CHECK_RET(fi_trywait(r->fabric, fids, 1), -FI_EAGAIN);
	t0 = now_ms();
	CHECK_RET(fi_cq_sread(cq, ent, 1, NULL, 30), -FI_EAGAIN);
	CHECK(now_ms() - t0 >= 25);
	CHECK_RET(fi_close(&cq->fid), 0);
	/* FI_WAIT_SET needs the set; POLLFD is not offered. */
	attr.wait_obj = FI_WAIT_SET;
	CHECK_RET(fi_cq_open(r->domain, &attr, &cq, NULL), -FI_EINVAL);
	attr.wait_obj = FI_WAIT_POLLFD;
	CHECK_RET(fi_cq_open(r->domain, &attr, &cq, NULL), -FI_ENOSYS);
	attr.wait_obj = 99;
	CHECK_RET(fi_cq_open(r->domain, &attr, &cq, NULL), -FI_EINVAL);
	/* wait_cond is "ignored if wait_obj is set to FI_WAIT_NONE". */
	attr.wait_obj = FI_WAIT_NONE;
	attr.wait_cond = 7;
	CHECK_RET(fi_cq_open(r->domain, &attr, &cq, NULL), 0);
	CHECK_RET(fi_close(&cq->fid), 0);
	attr.wait_obj = FI_WAIT_UNSPEC;
	CHECK_RET(fi_cq_open(r->domain, &attr, &cq, NULL), -FI_EINVAL);
}

static void eq_tests(struct xt_res *r)
{
	struct fid_eq *eq;
	struct fi_eq_attr attr = {.wait_obj = FI_WAIT_UNSPEC, .flags = FI_WRITE};
	struct fi_eq_entry in = {.context = (void *)0x1234, .data = 77}, out;
	struct fi_eq_err_entry err = {0};
	uint32_t event = 0;
	CHECK_RET(fi_eq_open(r->fabric, &attr, &eq, NULL), 0);
	CHECK_RET(fi_eq_read(eq, &event, &out, sizeof(out), 0), -FI_EAGAIN);
	CHECK_RET(fi_eq_readerr(eq, &err, 0), -FI_EAGAIN);
	double t0 = now_ms();
	CHECK_RET(fi_eq_sread(eq, &event, &out, sizeof(out), 30, 0), -FI_EAGAIN);
	CHECK(now_ms() - t0 >= 25);
	CHECK_RET(fi_eq_write(eq, FI_NOTIFY, &in, sizeof(in), 0), sizeof(in));
	/* Too small a buffer leaves the event queued. */
	CHECK_RET(fi_eq_read(eq, &event, &out, 4, 0), -FI_ETOOSMALL);
	CHECK_RET(fi_eq_read(eq, &event, &out, sizeof(out), FI_PEEK), sizeof(out));
	CHECK_RET(fi_eq_read(eq, &event, &out, sizeof(out), 0), sizeof(out));
	CHECK(event == FI_NOTIFY && out.context == (void *)0x1234 && out.data == 77);
	CHECK_RET(fi_eq_read(eq, &event, &out, sizeof(out), 0), -FI_EAGAIN);
	CHECK_RET(fi_eq_read(eq, &event, &out, sizeof(out), FI_SEND), -FI_EBADFLAGS);
	CHECK_RET(fi_eq_write(eq, FI_NOTIFY, NULL, 8, 0), -FI_EINVAL);
	CHECK_RET(fi_eq_write(eq, FI_NOTIFY, &in, (size_t)1 << 40, 0), -FI_EINVAL);
	/* Arguments no event can be read into fail at once, not after the wait. */
	CHECK_RET(fi_eq_sread(eq, NULL, &out, sizeof(out), -1, 0), -FI_EINVAL);
	CHECK_RET(fi_eq_sread(eq, &event, NULL, sizeof(out), -1, 0), -FI_EINVAL);
	char buf[64];
	CHECK(fi_eq_strerror(eq, FI_EAGAIN, NULL, buf, sizeof(buf)) == buf && buf[0]);
	CHECK_RET(fi_close(&eq->fid), 0);
	CHECK_RET(fi_eq_open(r->fabric, NULL, &eq, NULL), -FI_EINVAL);
	/* FI_WAIT_FD: an fd that is readable while an event is queued. */
	attr.wait_obj = FI_WAIT_FD;
	CHECK_RET(fi_eq_open(r->fabric, &attr, &eq, NULL), 0);
	int fd = -1;
	CHECK_RET(fi_control(&eq->fid, FI_GETWAIT, &fd), 0);
	struct pollfd p = {.fd = fd, .events = POLLIN};
	struct fid *fids[1] = {&eq->fid};
	CHECK_RET(fi_trywait(r->fabric, fids, 1), 0);
	CHECK_RET(poll(&p, 1, 0), 0);
	CHECK_RET(fi_eq_write(eq, FI_NOTIFY, &in, sizeof(in), 0), sizeof(in));
	CHECK_RET(poll(&p, 1, 1000), 1);
	CHECK_RET(fi_trywait(r->fabric, fids, 1), -FI_EAGAIN);
	CHECK_RET(fi_eq_read(eq, &event, &out, sizeof(out), 0), sizeof(out));
	CHECK_RET(poll(&p, 1, 0), 0);
	CHECK_RET(fi_close(&eq->fid), 0);
	/* No wait object: no blocking read. Without FI_WRITE the application
	 * may not write events (fi_eq(3)). */
	attr.wait_obj = FI_WAIT_NONE;
	attr.flags = 0;
	CHECK_RET(fi_eq_open(r->fabric, &attr, &eq, NULL), 0);
	CHECK_RET(fi_eq_sread(eq, &event, &out, sizeof(out), 10, 0), -FI_EINVAL);
	CHECK_RET(fi_eq_write(eq, FI_NOTIFY, &in, sizeof(in), 0), -FI_EINVAL);
	CHECK_RET(fi_close(&eq->fid), 0);
	attr.flags = FI_SEND;
	CHECK_RET(fi_eq_open(r->fabric, &attr, &eq, NULL), -FI_EBADFLAGS);
}

static void cntr_tests(struct xt_res *r)
{
	struct fid_cntr *c;
	struct fi_cntr_attr attr = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC};
	CHECK_RET(fi_cntr_open(r->domain, &attr, &c, NULL), 0);
	CHECK(fi_cntr_read(c) == 0 && fi_cntr_readerr(c) == 0);
	CHECK_RET(fi_cntr_add(c, 5), 0);
	CHECK_RET(fi_cntr_add(c, 2), 0);
	CHECK(fi_cntr_read(c) == 7);
	CHECK_RET(fi_cntr_set(c, 100), 0);
	CHECK(fi_cntr_read(c) == 100);
	CHECK_RET(fi_cntr_adderr(c, 3), 0);
	CHECK(fi_cntr_readerr(c) == 3);
	CHECK_RET(fi_cntr_seterr(c, 0), 0);
	CHECK(fi_cntr_readerr(c) == 0);
	CHECK_RET(fi_cntr_wait(c, 100, 10), 0);
	double t0 = now_ms();
	CHECK_RET(fi_cntr_wait(c, 101, 30), -FI_ETIMEDOUT);
	CHECK(now_ms() - t0 >= 25);
	CHECK_RET(fi_close(&c->fid), 0);
	/* NULL attr means defaults (FI_WAIT_NONE: no fi_cntr_wait). */
	CHECK_RET(fi_cntr_open(r->domain, NULL, &c, NULL), 0);
	CHECK_RET(fi_cntr_wait(c, 1, 0), -FI_EINVAL);
	CHECK_RET(fi_close(&c->fid), 0);
	attr.events = 9;
	CHECK_RET(fi_cntr_open(r->domain, &attr, &c, NULL), -FI_EINVAL);
	attr.events = FI_CNTR_EVENTS_COMP;
	attr.flags = 1;
	CHECK_RET(fi_cntr_open(r->domain, &attr, &c, NULL), -FI_EBADFLAGS);
	attr.flags = 0;
	/* FI_WAIT_FD: readable when the counter changes. */
	attr.wait_obj = FI_WAIT_FD;
	CHECK_RET(fi_cntr_open(r->domain, &attr, &c, NULL), 0);
	int fd = -1;
	CHECK_RET(fi_control(&c->fid, FI_GETWAIT, &fd), 0);
	struct pollfd p = {.fd = fd, .events = POLLIN};
	struct fid *fids[1] = {&c->fid};
	CHECK_RET(fi_trywait(r->fabric, fids, 1), 0);
	CHECK_RET(poll(&p, 1, 0), 0);
	CHECK_RET(fi_cntr_add(c, 1), 0);
	CHECK_RET(poll(&p, 1, 1000), 1);
	CHECK_RET(fi_trywait(r->fabric, fids, 1), 0);
	CHECK_RET(poll(&p, 1, 0), 0);
	CHECK_RET(fi_close(&c->fid), 0);
	attr.wait_obj = FI_WAIT_POLLFD;
	CHECK_RET(fi_cntr_open(r->domain, &attr, &c, NULL), -FI_ENOSYS);
}

/* An application of API 1.4 has the 1.0 error entries, which end before
 * err_data_size: fi_cq_readerr must not write past them. The error is a
 * cancelled receive. */
static void old_api_readerr(void)
{
	struct fi_info *h = xt_hints(FI_EP_RDM), *info = NULL;
	h->domain_attr->name = strdup(xt_iface);
	CHECK_RET(fi_getinfo(FI_VERSION(1, 4), NULL, NULL, 0, h, &info), 0);
	fi_freeinfo(h);
	if (!info)
		return;
	struct fid_fabric *fab;
	struct fid_domain *dom;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_CONTEXT};
	REQUIRE(fi_fabric(info->fabric_attr, &fab, NULL) == 0);
	REQUIRE(fi_domain(fab, info, &dom, NULL) == 0);
	REQUIRE(fi_av_open(dom, &av_attr, &av, NULL) == 0);
	REQUIRE(fi_cq_open(dom, &cq_attr, &cq, NULL) == 0);
	ep = xt_enabled_ep(dom, info, av, cq);
	char buf[16];
	CHECK_RET(fi_recv(ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, (void *)0x51), 0);
	CHECK_RET(fi_cancel(&ep->fid, (void *)0x51), 0);
	struct fi_cq_err_entry err;
	memset(&err, 0, sizeof(err));
	err.err_data_size = 0x5a5a5a5a; /* past the 1.0 struct: must stay */
	ssize_t n;
	while ((n = fi_cq_readerr(cq, &err, 0)) == -FI_EAGAIN)
		fi_cq_read(cq, NULL, 0);
	CHECK_RET(n, 1);
	CHECK(err.err == FI_ECANCELED && err.op_context == (void *)0x51);
	CHECK(err.err_data_size == 0x5a5a5a5a);
	CHECK_RET(fi_close(&ep->fid), 0);
	CHECK_RET(fi_close(&cq->fid), 0);
	CHECK_RET(fi_close(&av->fid), 0);
	CHECK_RET(fi_close(&dom->fid), 0);
	CHECK_RET(fi_close(&fab->fid), 0);
	fi_freeinfo(info);
}

int main(int argc, char **argv)
{
	struct xt_res r;
	xt_init(argc, argv);
	xt_open(&r, FI_EP_RDM, 0);
	cq_tests(&r);
	eq_tests(&r);
	cntr_tests(&r);
	xt_close(&r);
	old_api_readerr();
	return xt_done("queues");
}
