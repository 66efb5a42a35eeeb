/* FI_EP_DGRAM with our header (PROTO_XDP_DGRAM): FI_MSG_PREFIX and remote
 * CQ data between two hosts, as fabtests' `fi_dgram_pingpong -k` and
 * `fi_cq_data -e dgram` use them.
 *
 *   - getinfo: hints whose mode offers FI_MSG_PREFIX get the header entry
 *     first, in prefix mode (info, tx and rx mode; msg_prefix_size 16,
 *     a multiple of 8), with cq_data_size 8; the plain UDP entry follows,
 *     without the mode; cq_data_size hints leave only the header entry;
 *   - the client sends from its buffer's data part (after the prefix) with
 *     fi_senddata; the server's receive gets the data after its prefix,
 *     FI_REMOTE_CQ_DATA and the data, and a length that counts the prefix
 *     (fi_getinfo(3)); its answer (fi_send) carries no CQ data;
 *   - buffers shorter than the prefix are refused (-FI_EINVAL);
 *   - datagrams sent before the receiver posts receives wait for them.
 *
 * argv: <iface> <local IP> <peer IP> <server|client> <rendezvous dir> */
#include <unistd.h>

#include "xt.h"

#define PREFIX 16

static struct fid_ep *ep;
static struct fid_cq *cq;

static struct fi_info *prefix_info(void)
{
	struct fi_info *h = xt_hints(FI_EP_DGRAM), *info = NULL;
	h->caps = FI_MSG;
	h->mode = FI_MSG_PREFIX | FI_CONTEXT;
	h->domain_attr->name = strdup(xt_iface);
	REQUIRE(fi_getinfo(XT_VERSION, NULL, NULL, 0, h, &info) == 0 && info);
	fi_freeinfo(h);
	CHECK(info->mode & FI_MSG_PREFIX);
	CHECK((info->tx_attr->mode & FI_MSG_PREFIX) && (info->rx_attr->mode & FI_MSG_PREFIX));
	CHECK(info->ep_attr->msg_prefix_size == PREFIX);
	CHECK(info->ep_attr->protocol != FI_PROTO_UDP);
	CHECK(info->domain_attr->cq_data_size == 8);
	/* The plain UDP entry follows, without the mode. */
	CHECK(info->next && !(info->next->mode & FI_MSG_PREFIX));
	CHECK(info->next && info->next->ep_attr->protocol == FI_PROTO_UDP);
	CHECK(info->next && info->next->ep_attr->msg_prefix_size == 0);
	/* Remote CQ data leaves only the header entry. */
	struct fi_info *h2 = xt_hints(FI_EP_DGRAM), *i2 = NULL;
	h2->domain_attr->name = strdup(xt_iface);
	h2->domain_attr->cq_data_size = 4;
	CHECK_RET(fi_getinfo(XT_VERSION, NULL, NULL, 0, h2, &i2), 0);
	CHECK(i2 && !i2->next && i2->ep_attr->protocol == info->ep_attr->protocol);
	CHECK(i2 && !(i2->mode & FI_MSG_PREFIX));
	fi_freeinfo(h2);
	fi_freeinfo(i2);
	return info;
}

static int one(struct fi_cq_data_entry *e)
{
	for (int i = 0; i < 2000000; i++) {
		ssize_t n = fi_cq_read(cq, e, 1);
		if (n == 1)
			return 1;
		if (n != -FI_EAGAIN) {
			fprintf(stderr, "fi_cq_read: %zd\n", n);
			return 0;
		}
		if (i > 1000)
			usleep(10);
	}
	return 0;
}

/* Datagrams that come before their receives wait for them, in order (a
 * bounded backlog, as a kernel UDP socket's receive buffer keeps them). The
 * server reads its CQ for a while with no receive posted, so they are taken
 * off the ring before the receives come. */
enum { BURST = 8 };

static void backlog(int server, fi_addr_t peer)
{
	struct fi_cq_data_entry e;
	char ready[2];
	if (server) {
		static char rx[BURST][PREFIX + 16];
		xt_get_file("burst-sent", ready, 1);
		for (int i = 0; i < 1000; i++) {
			CHECK_RET(fi_cq_read(cq, &e, 1), -FI_EAGAIN);
			usleep(100);
		}
		for (int i = 0; i < BURST; i++)
			CHECK_RET(fi_recv(ep, rx[i], sizeof(rx[i]), NULL, FI_ADDR_UNSPEC, rx[i]), 0);
		for (int i = 0; i < BURST; i++) {
			REQUIRE(one(&e));
			CHECK(e.op_context == rx[i] && (e.flags & FI_RECV));
			CHECK(e.len == PREFIX + 2 && rx[i][PREFIX] == 'b' && rx[i][PREFIX + 1] == i);
		}
	} else {
		char buf[PREFIX + 2];
		for (int i = 0; i < BURST; i++) {
			buf[PREFIX] = 'b';
			buf[PREFIX + 1] = (char)i;
			CHECK_RET(fi_send(ep, buf, sizeof(buf), NULL, peer, buf), 0);
			REQUIRE(one(&e));
			CHECK(e.op_context == buf && (e.flags & FI_SEND));
		}
		xt_put_file("burst-sent", "1", 1);
	}
}

int main(int argc, char **argv)
{
	xt_init(argc, argv);
	REQUIRE(argc >= 6);
	xt_dir = argv[5];
	int server = !strcmp(argv[4], "server");
	struct fi_info *info = prefix_info();
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	REQUIRE(fi_fabric(info->fabric_attr, &fabric, NULL) == 0);
	REQUIRE(fi_domain(fabric, info, &domain, NULL) == 0);
	struct fi_av_attr aa = {0};
	struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_DATA};
	REQUIRE(fi_av_open(domain, &aa, &av, NULL) == 0);
	REQUIRE(fi_cq_open(domain, &ca, &cq, NULL) == 0);
	ep = xt_enabled_ep(domain, info, av, cq);
	char name[64];
	size_t len = sizeof(name);
	REQUIRE(fi_getname(&ep->fid, name, &len) == 0);
	xt_put_file(server ? "server.addr" : "client.addr", name, len);
	char peer_name[64];
	size_t plen = xt_get_file(server ? "client.addr" : "server.addr", peer_name, sizeof(peer_name));
	fi_addr_t peer;
	REQUIRE(fi_av_insert(av, peer_name, 1, &peer, 0, NULL) == 1);

	char buf[PREFIX + 64];
	struct fi_cq_data_entry e;
	/* No room for the prefix: refused. */
	CHECK_RET(fi_recv(ep, buf, PREFIX - 1, NULL, FI_ADDR_UNSPEC, NULL), -FI_EINVAL);
	CHECK_RET(fi_send(ep, buf, PREFIX - 8, NULL, peer, NULL), -FI_EINVAL);
	if (server) {
		memset(buf, 0, sizeof(buf));
		CHECK_RET(fi_recv(ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, buf), 0);
		xt_put_file("server-ready", "1", 1);
		REQUIRE(one(&e));
		CHECK(e.op_context == buf && (e.flags & FI_RECV));
		CHECK(e.len == PREFIX + 9);
		CHECK(!memcmp(buf + PREFIX, "prefixed", 9));
		CHECK((e.flags & FI_REMOTE_CQ_DATA) && e.data == 0x1234);
		/* The answer: a plain send, no CQ data. */
		memcpy(buf + PREFIX, "answer!", 8);
		CHECK_RET(fi_send(ep, buf, PREFIX + 8, NULL, peer, buf), 0);
		REQUIRE(one(&e));
		CHECK(e.op_context == buf && (e.flags & FI_SEND));
	} else {
		char rx[PREFIX + 64];
		CHECK_RET(fi_recv(ep, rx, sizeof(rx), NULL, FI_ADDR_UNSPEC, rx), 0);
		char ready[2];
		xt_get_file("server-ready", ready, 1);
		memset(buf, 0xEE, PREFIX);
		memcpy(buf + PREFIX, "prefixed", 9);
		CHECK_RET(fi_senddata(ep, buf, PREFIX + 9, NULL, 0x1234, peer, buf), 0);
		int got_rx = 0, got_tx = 0;
		while (got_rx + got_tx < 2) {
			if (!one(&e))
				break;
			if (e.flags & FI_RECV) {
				got_rx++;
				CHECK(e.len == PREFIX + 8 && !memcmp(rx + PREFIX, "answer!", 8));
				CHECK(!(e.flags & FI_REMOTE_CQ_DATA));
			} else {
				got_tx++;
			}
		}
		CHECK(got_rx == 1 && got_tx == 1);
	}
	backlog(server, peer);
	(void)plen;
	CHECK_RET(fi_close(&ep->fid), 0);
	CHECK_RET(fi_close(&cq->fid), 0);
	CHECK_RET(fi_close(&av->fid), 0);
	CHECK_RET(fi_close(&domain->fid), 0);
	CHECK_RET(fi_close(&fabric->fid), 0);
	fi_freeinfo(info);
	return xt_done(argv[4]);
}
