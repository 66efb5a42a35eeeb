/* FI_PROGRESS_AUTO (fi_domain(3)): a domain opened with automatic data
 * progress moves data while its application does not call libfabric.
 *
 *   - getinfo reports FI_PROGRESS_AUTO when asked (and manual otherwise);
 *   - the server posts a 1 MiB receive and then sleeps 3 s without any
 *     libfabric call; the client (manual progress) sends it with
 *     FI_TRANSMIT_COMPLETE: the rendezvous needs the server's answer and
 *     the end needs its acknowledgement, so the send completes during the
 *     sleep only if the server's progress thread runs (< 2.5 s);
 *   - the server's receive CQ is FI_WAIT_MUTEX_COND: with automatic
 *     progress fi_trywait allows blocking on its condition variable, and
 *     the thread's completion wakes the waiter before its timeout.
 *
 * argv: <iface> <local IP> <peer IP> <server|client> <rendezvous dir> */
#include <pthread.h>
#include <unistd.h>

#include "xt.h"

#define BIG (1 << 20)

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	xt_init(argc, argv);
	REQUIRE(argc >= 6);
	xt_dir = argv[5];
	int server = !strcmp(argv[4], "server");
	struct fi_info *h = xt_hints(FI_EP_RDM), *info = NULL;
	h->caps = FI_MSG;
	h->domain_attr->name = strdup(xt_iface);
	if (server)
		h->domain_attr->data_progress = FI_PROGRESS_AUTO;
	REQUIRE(fi_getinfo(XT_VERSION, NULL, NULL, 0, h, &info) == 0);
	fi_freeinfo(h);
	CHECK(info->domain_attr->data_progress == (server ? FI_PROGRESS_AUTO : FI_PROGRESS_MANUAL));
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *txcq, *rxcq;
	struct fid_ep *ep;
	REQUIRE(fi_fabric(info->fabric_attr, &fabric, NULL) == 0);
	REQUIRE(fi_domain(fabric, info, &domain, NULL) == 0);
	struct fi_av_attr aa = {0};
	struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE};
	REQUIRE(fi_av_open(domain, &aa, &av, NULL) == 0);
	REQUIRE(fi_cq_open(domain, &ca, &txcq, NULL) == 0);
	if (server)
		ca.wait_obj = FI_WAIT_MUTEX_COND;
	REQUIRE(fi_cq_open(domain, &ca, &rxcq, NULL) == 0);
	REQUIRE(fi_endpoint(domain, info, &ep, NULL) == 0);
	REQUIRE(fi_ep_bind(ep, &av->fid, 0) == 0);
	REQUIRE(fi_ep_bind(ep, &txcq->fid, FI_TRANSMIT) == 0);
	REQUIRE(fi_ep_bind(ep, &rxcq->fid, FI_RECV) == 0);
	REQUIRE(fi_enable(ep) == 0);
	char name[64];
	size_t len = sizeof(name);
	REQUIRE(fi_getname(&ep->fid, name, &len) == 0);
	xt_put_file(server ? "server.addr" : "client.addr", name, len);
	char peer_name[64];
	xt_get_file(server ? "client.addr" : "server.addr", peer_name, sizeof(peer_name));
	fi_addr_t peer;
	REQUIRE(fi_av_insert(av, peer_name, 1, &peer, 0, NULL) == 1);
	uint8_t *buf = calloc(1, BIG);
	REQUIRE(buf);
	struct fi_cq_entry e;
	if (server) {
		CHECK_RET(fi_recv(ep, buf, BIG, NULL, FI_ADDR_UNSPEC, buf), 0);
		xt_put_file("ready", "1", 1);
		/* No libfabric call at all for 3 s. */
		sleep(3);
		CHECK_RET(fi_cq_read(rxcq, &e, 1), 1);
		int ok = 1;
		for (size_t i = 0; i < BIG; i++)
			ok &= buf[i] == (uint8_t)(i * 7);
		CHECK(ok);
		char took[32] = {0};
		xt_get_file("took", took, sizeof(took) - 1);
		printf("client's transmit-complete 1 MiB send took %s s while we slept\n", took);
		/* Block on the CQ's condition variable; the thread wakes us. */
		struct fi_mutex_cond mc;
		CHECK_RET(fi_control(&rxcq->fid, FI_GETWAIT, &mc), 0);
		CHECK_RET(fi_recv(ep, buf, 8, NULL, FI_ADDR_UNSPEC, buf), 0);
		xt_put_file("ready2", "1", 1);
		struct fid *fids[1] = {&rxcq->fid};
		double t0 = now_s();
		int woken_early = 0;
		pthread_mutex_lock(mc.mutex);
		for (;;) {
			ssize_t n = fi_cq_read(rxcq, &e, 1);
			if (n == 1)
				break;
			CHECK(n == -FI_EAGAIN);
			if (fi_trywait(fabric, fids, 1) == FI_SUCCESS) {
				struct timespec dl;
				clock_gettime(CLOCK_REALTIME, &dl);
				dl.tv_sec += 10;
				int rc = pthread_cond_timedwait(mc.cond, mc.mutex, &dl);
				woken_early |= rc == 0;
			}
			if (now_s() - t0 > 20)
				break;
		}
		pthread_mutex_unlock(mc.mutex);
		CHECK(woken_early && now_s() - t0 < 9);
		CHECK(!memcmp(buf, "wake up", 8));
		xt_put_file("done", "1", 1);
	} else {
		for (size_t i = 0; i < BIG; i++)
			buf[i] = (uint8_t)(i * 7);
		char ready[2];
		xt_get_file("ready", ready, 1);
		usleep(200000); /* well inside the server's sleep */
		double t0 = now_s();
		struct iovec iov = {buf, BIG};
		struct fi_msg m = {.msg_iov = &iov, .iov_count = 1, .addr = peer, .context = buf};
		CHECK_RET(fi_sendmsg(ep, &m, FI_TRANSMIT_COMPLETE | FI_COMPLETION), 0);
		ssize_t n;
		while ((n = fi_cq_read(txcq, &e, 1)) == -FI_EAGAIN && now_s() - t0 < 10)
			;
		CHECK_RET(n, 1);
		double took = now_s() - t0;
		char s[32];
		snprintf(s, sizeof(s), "%.3f", took);
		xt_put_file("took", s, strlen(s));
		CHECK(took < 2.5);
		xt_get_file("ready2", ready, 1);
		usleep(300000); /* the server is blocked on its condition by now */
		CHECK_RET(fi_send(ep, "wake up", 8, NULL, peer, NULL), 0);
		while ((n = fi_cq_read(txcq, &e, 1)) == -FI_EAGAIN)
			;
		xt_get_file("done", ready, 1);
	}
	free(buf);
	CHECK_RET(fi_close(&ep->fid), 0);
	CHECK_RET(fi_close(&txcq->fid), 0);
	CHECK_RET(fi_close(&rxcq->fid), 0);
	CHECK_RET(fi_close(&av->fid), 0);
	CHECK_RET(fi_close(&domain->fid), 0);
	CHECK_RET(fi_close(&fabric->fid), 0);
	fi_freeinfo(info);
	return xt_done(argv[4]);
}
