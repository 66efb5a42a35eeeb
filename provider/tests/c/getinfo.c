/* fi_getinfo through the real libfabric loader: entries, attributes, and
 * hints the provider must honour or refuse with -FI_ENODATA (fi_getinfo(3)). */
#include "xt.h"

static int count(struct fi_info *i)
{
	int n = 0;
	for (; i; i = i->next)
		n++;
	return n;
}

/* fi_getinfo with hints h (consumed), returning the status. */
static int gi(struct fi_info *h, const char *node, const char *service,
	      uint64_t flags, struct fi_info **out)
{
	*out = NULL;
	int ret = fi_getinfo(XT_VERSION, node, service, flags, h, out);
	fi_freeinfo(h);
	return ret;
}

static void no_hints(void)
{
	struct fi_info *info = NULL, *i;
	int ours = 0, rdm = 0, dgram = 0, msg = 0;
	CHECK_RET(fi_getinfo(XT_VERSION, NULL, NULL, 0, NULL, &info), 0);
	for (i = info; i; i = i->next) {
		if (strcmp(i->fabric_attr->prov_name, "xdp"))
			continue;
		ours++;
		CHECK(!strcmp(i->domain_attr->name, xt_iface));
		CHECK(!strcmp(i->fabric_attr->name, "xdp"));
		rdm += i->ep_attr->type == FI_EP_RDM;
		dgram += i->ep_attr->type == FI_EP_DGRAM;
		msg += i->ep_attr->type == FI_EP_MSG;
	}
	/* For the one usable interface: one RDM, two DGRAM (plain UDP and with
	 * our header) and one MSG entry. */
	CHECK(ours == 4 && rdm == 1 && dgram == 2 && msg == 1);
	fi_freeinfo(info);
}

static void prov_hint_attrs(void)
{
	struct fi_info *info;
	CHECK_RET(gi(xt_hints(FI_EP_UNSPEC), NULL, NULL, 0, &info), 0);
	REQUIRE(info);
	CHECK(count(info) == 4);
	/* RDM first, then DGRAM (UDP, then with our header), then MSG;
	 * truthful attributes. */
	CHECK(info->ep_attr->type == FI_EP_RDM);
	CHECK((info->caps & (FI_MSG | FI_TAGGED | FI_SEND | FI_RECV)) ==
	      (FI_MSG | FI_TAGGED | FI_SEND | FI_RECV));
	const uint64_t rma = FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	CHECK((info->caps & rma) == rma);
	CHECK(info->caps & FI_RMA_EVENT);
	/* FI_FENCE on RMA and atomics (PROTOCOL.md §8.6); no triggered ops. */
	CHECK(info->caps & FI_FENCE);
	CHECK(info->tx_attr->caps & FI_FENCE);
	CHECK(!(info->caps & FI_TRIGGER));
	CHECK(info->tx_attr->rma_iov_limit == 1);
	/* The order one stream gives (PROTOCOL.md §8.6), not write-after-read. */
	CHECK((info->tx_attr->msg_order & (FI_ORDER_SAS | FI_ORDER_RAW | FI_ORDER_WAW |
					   FI_ORDER_RAR | FI_ORDER_SAW)) ==
	      (FI_ORDER_SAS | FI_ORDER_RAW | FI_ORDER_WAW | FI_ORDER_RAR | FI_ORDER_SAW));
	CHECK(!(info->tx_attr->msg_order & (FI_ORDER_WAR | FI_ORDER_RMA_WAR | FI_ORDER_WAS)));
	CHECK(info->ep_attr->max_order_raw_size == info->ep_attr->max_msg_size);
	CHECK(info->ep_attr->max_order_waw_size == info->ep_attr->max_msg_size);
	CHECK(info->ep_attr->max_order_war_size == 0);
	CHECK(info->domain_attr->mr_key_size == 8);
	CHECK(info->mode == 0);
	CHECK(info->addr_format == FI_ADDR_XDP);
	CHECK(info->src_addrlen == XDP_ADDR_LEN && info->src_addr);
	CHECK(info->domain_attr->data_progress == FI_PROGRESS_MANUAL);
	CHECK(info->domain_attr->threading == FI_THREAD_SAFE);
	CHECK(info->domain_attr->mr_mode == 0);
	CHECK(info->domain_attr->cq_data_size == 8);
	CHECK(info->tx_attr->inject_size > 0 && info->tx_attr->inject_size < 1500);
	CHECK(info->ep_attr->max_msg_size >= (16u << 20));
	CHECK(!strcmp(info->fabric_attr->prov_name, "xdp"));
	REQUIRE(info->next);
	struct fi_info *d = info->next;
	CHECK(d->ep_attr->type == FI_EP_DGRAM);
	CHECK(!(d->caps & (FI_TAGGED | FI_RMA | FI_ATOMIC)));
	CHECK(d->tx_attr->rma_iov_limit == 0);
	CHECK(d->ep_attr->max_msg_size == d->tx_attr->inject_size);
	CHECK(d->ep_attr->protocol == FI_PROTO_UDP);
	CHECK(d->domain_attr->cq_data_size == 0);
	REQUIRE(d->next);
	struct fi_info *dh = d->next;
	CHECK(dh->ep_attr->type == FI_EP_DGRAM);
	CHECK(dh->ep_attr->protocol != FI_PROTO_UDP);
	CHECK(dh->domain_attr->cq_data_size == 8);
	/* FI_MSG_PREFIX only when the hints' mode offers it (dgram_prefix.c). */
	CHECK(dh->mode == 0 && dh->ep_attr->msg_prefix_size == 0);
	CHECK(dh->ep_attr->max_msg_size == d->ep_attr->max_msg_size);
	REQUIRE(dh->next);
	struct fi_info *m = dh->next;
	CHECK(m->ep_attr->type == FI_EP_MSG);
	CHECK((m->caps & (FI_MSG | FI_TAGGED | FI_SEND | FI_RECV | FI_MULTI_RECV)) ==
	      (FI_MSG | FI_TAGGED | FI_SEND | FI_RECV | FI_MULTI_RECV));
	/* Source addressing and directed receives are for connectionless ones. */
	CHECK(!(m->caps & (FI_SOURCE | FI_DIRECTED_RECV)));
	/* The connection is an RDM session: RDM's RMA, atomics and order. */
	CHECK((m->caps & rma) == rma && (m->caps & FI_RMA_EVENT));
	CHECK(m->tx_attr->rma_iov_limit == 1);
	CHECK(m->tx_attr->msg_order == info->tx_attr->msg_order);
	CHECK(m->rx_attr->msg_order == info->rx_attr->msg_order);
	CHECK(m->ep_attr->max_order_waw_size == info->ep_attr->max_order_waw_size);
	CHECK(m->ep_attr->max_msg_size == info->ep_attr->max_msg_size);
	CHECK(m->ep_attr->protocol != FI_PROTO_UDP && m->ep_attr->protocol != info->ep_attr->protocol);
	CHECK(m->domain_attr->cq_data_size == 8);
	/* Connections progress inside the application's calls, as data does. */
	CHECK(m->domain_attr->control_progress == FI_PROGRESS_MANUAL);
	CHECK(m->domain_attr->data_progress == FI_PROGRESS_MANUAL);
	CHECK(!m->next);
	fi_freeinfo(info);
}

static void ep_type_hints(void)
{
	struct fi_info *info, *i;
	CHECK_RET(gi(xt_hints(FI_EP_RDM), NULL, NULL, 0, &info), 0);
	for (i = info; i; i = i->next)
		CHECK(i->ep_attr->type == FI_EP_RDM);
	CHECK(count(info) == 1);
	fi_freeinfo(info);
	CHECK_RET(gi(xt_hints(FI_EP_DGRAM), NULL, NULL, 0, &info), 0);
	for (i = info; i; i = i->next)
		CHECK(i->ep_attr->type == FI_EP_DGRAM);
	CHECK(count(info) == 2);
	fi_freeinfo(info);
	CHECK_RET(gi(xt_hints(FI_EP_MSG), NULL, NULL, 0, &info), 0);
	for (i = info; i; i = i->next)
		CHECK(i->ep_attr->type == FI_EP_MSG);
	CHECK(count(info) == 1);
	fi_freeinfo(info);
	/* Connectionless capabilities are refused for MSG. */
	struct fi_info *h = xt_hints(FI_EP_MSG);
	h->caps = FI_MSG | FI_SOURCE;
	CHECK_RET(gi(h, NULL, NULL, 0, &info), -FI_ENODATA);
}

static void caps_hints(void)
{
	struct fi_info *h, *info;
	h = xt_hints(FI_EP_RDM);
	h->caps = FI_TAGGED;
	CHECK_RET(gi(h, NULL, NULL, 0, &info), 0);
	if (info) {
		CHECK(info->caps & FI_TAGGED);
		CHECK(!(info->caps & FI_MSG));
		fi_freeinfo(info);
	}
	/* RMA and atomics are offered on RDM; what remains unsupported is not. */
	h = xt_hints(FI_EP_RDM);
	h->caps = FI_MSG | FI_RMA;
	CHECK_RET(gi(h, NULL, NULL, 0, &info), 0);
	if (info) {
		CHECK((info->caps & (FI_MSG | FI_RMA)) == (FI_MSG | FI_RMA));
		CHECK(!(info->caps & FI_ATOMIC));
		fi_freeinfo(info);
	}
	h = xt_hints(FI_EP_RDM);
	h->caps = FI_ATOMIC | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	CHECK_RET(gi(h, NULL, NULL, 0, &info), 0);
	fi_freeinfo(info);
	h = xt_hints(FI_EP_RDM);
	h->caps = FI_RMA | FI_RMA_EVENT;
	CHECK_RET(gi(h, NULL, NULL, 0, &info), 0);
	fi_freeinfo(info);
	/* FI_FENCE: RDM and MSG entries (their transfers honour it), never
	 * DGRAM; a secondary capability, reported even when not asked for. */
	h = xt_hints(FI_EP_RDM);
	h->caps = FI_RMA | FI_FENCE;
	CHECK_RET(gi(h, NULL, NULL, 0, &info), 0);
	REQUIRE(info);
	CHECK((info->caps & FI_FENCE) && (info->tx_attr->caps & FI_FENCE));
	fi_freeinfo(info);
	h = xt_hints(FI_EP_RDM);
	h->caps = FI_RMA;
	CHECK_RET(gi(h, NULL, NULL, 0, &info), 0);
	REQUIRE(info);
	CHECK(info->caps & FI_FENCE);
	fi_freeinfo(info);
	h = xt_hints(FI_EP_MSG);
	h->caps = FI_MSG | FI_RMA | FI_FENCE;
	CHECK_RET(gi(h, NULL, NULL, 0, &info), 0);
	REQUIRE(info);
	CHECK(info->caps & FI_FENCE);
	fi_freeinfo(info);
	h = xt_hints(FI_EP_DGRAM);
	h->caps = FI_MSG | FI_FENCE;
	CHECK_RET(gi(h, NULL, NULL, 0, &info), -FI_ENODATA);
	h = xt_hints(FI_EP_RDM);
	h->caps = FI_RMA | FI_TRIGGER;
	CHECK_RET(gi(h, NULL, NULL, 0, &info), -FI_ENODATA);
	h = xt_hints(FI_EP_DGRAM);
	h->caps = FI_RMA;
	CHECK_RET(gi(h, NULL, NULL, 0, &info), -FI_ENODATA);
	/* Ordering and segments beyond what the stream gives. */
	h = xt_hints(FI_EP_RDM);
	h->tx_attr->msg_order = FI_ORDER_RAW | FI_ORDER_WAW | FI_ORDER_SAS;
	CHECK_RET(gi(h, NULL, NULL, 0, &info), 0);
	fi_freeinfo(info);
	h = xt_hints(FI_EP_RDM);
	h->tx_attr->msg_order = FI_ORDER_WAR;
	CHECK_RET(gi(h, NULL, NULL, 0, &info), -FI_ENODATA);
	h = xt_hints(FI_EP_RDM);
	h->tx_attr->rma_iov_limit = 2;
	CHECK_RET(gi(h, NULL, NULL, 0, &info), -FI_ENODATA);
	h = xt_hints(FI_EP_RDM);
	h->ep_attr->max_order_war_size = 8;
	CHECK_RET(gi(h, NULL, NULL, 0, &info), -FI_ENODATA);
	h = xt_hints(FI_EP_DGRAM);
	h->caps = FI_TAGGED;
	CHECK_RET(gi(h, NULL, NULL, 0, &info), -FI_ENODATA);
	/* Mode bits the application supports are fine; we require none. */
	h = xt_hints(FI_EP_RDM);
	h->mode = FI_CONTEXT | FI_CONTEXT2;
	CHECK_RET(gi(h, NULL, NULL, 0, &info), 0);
	if (info) {
		CHECK(info->mode == 0);
		fi_freeinfo(info);
	}
}

static void domain_hints(void)
{
	struct fi_info *h, *info;
	/* FI_PROGRESS_AUTO is granted when asked (a progress thread per
	 * domain, auto_progress.c); manual stays the default. */
	h = xt_hints(FI_EP_RDM);
	h->domain_attr->data_progress = FI_PROGRESS_AUTO;
	CHECK_RET(gi(h, NULL, NULL, 0, &info), 0);
	if (info) {
		CHECK(info->domain_attr->data_progress == FI_PROGRESS_AUTO);
		fi_freeinfo(info);
	}
	h = xt_hints(FI_EP_RDM);
	h->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	h->domain_attr->threading = FI_THREAD_DOMAIN;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	h->domain_attr->av_type = FI_AV_MAP;
	CHECK_RET(gi(h, NULL, NULL, 0, &info), 0);
	if (info) {
		CHECK(info->domain_attr->threading == FI_THREAD_DOMAIN);
		/* Provider keys, of what the application supports; offsets,
		 * not virtual addresses (fi_xdp(7)). */
		CHECK(info->domain_attr->mr_mode == FI_MR_PROV_KEY);
		CHECK(info->domain_attr->av_type == FI_AV_MAP);
		fi_freeinfo(info);
	}
	h = xt_hints(FI_EP_RDM);
	h->domain_attr->name = strdup(xt_iface);
	CHECK_RET(gi(h, NULL, NULL, 0, &info), 0);
	fi_freeinfo(info);
	h = xt_hints(FI_EP_RDM);
	h->domain_attr->name = strdup("nosuchif0");
	CHECK_RET(gi(h, NULL, NULL, 0, &info), -FI_ENODATA);
	h = xt_hints(FI_EP_RDM);
	h->fabric_attr->name = strdup("xdp");
	CHECK_RET(gi(h, NULL, NULL, 0, &info), 0);
	fi_freeinfo(info);
	h = xt_hints(FI_EP_RDM);
	h->fabric_attr->name = strdup("other");
	CHECK_RET(gi(h, NULL, NULL, 0, &info), -FI_ENODATA);
	h = xt_hints(FI_EP_RDM);
	h->domain_attr->cq_data_size = 16;
	CHECK_RET(gi(h, NULL, NULL, 0, &info), -FI_ENODATA);
	h = xt_hints(FI_EP_RDM);
	h->domain_attr->max_ep_srx_ctx = 1;
	CHECK_RET(gi(h, NULL, NULL, 0, &info), -FI_ENODATA);
}

static void size_and_order_hints(void)
{
	struct fi_info *h, *info;
	h = xt_hints(FI_EP_RDM);
	h->ep_attr->max_msg_size = 16u << 20;
	CHECK_RET(gi(h, NULL, NULL, 0, &info), 0);
	fi_freeinfo(info);
	h = xt_hints(FI_EP_DGRAM);
	h->ep_attr->max_msg_size = 16u << 20;
	CHECK_RET(gi(h, NULL, NULL, 0, &info), -FI_ENODATA);
	h = xt_hints(FI_EP_RDM);
	h->tx_attr->inject_size = 1 << 20;
	CHECK_RET(gi(h, NULL, NULL, 0, &info), -FI_ENODATA);
	h = xt_hints(FI_EP_RDM);
	h->tx_attr->msg_order = FI_ORDER_SAS;
	CHECK_RET(gi(h, NULL, NULL, 0, &info), 0);
	fi_freeinfo(info);
	h = xt_hints(FI_EP_RDM);
	h->tx_attr->msg_order = FI_ORDER_STRICT;
	CHECK_RET(gi(h, NULL, NULL, 0, &info), -FI_ENODATA);
	h = xt_hints(FI_EP_RDM);
	h->rx_attr->size = 1 << 20;
	CHECK_RET(gi(h, NULL, NULL, 0, &info), -FI_ENODATA);
	h = xt_hints(FI_EP_RDM);
	h->tx_attr->op_flags = FI_COMPLETION | FI_TRANSMIT_COMPLETE;
	CHECK_RET(gi(h, NULL, NULL, 0, &info), 0);
	if (info) {
		CHECK(info->tx_attr->op_flags == (FI_COMPLETION | FI_TRANSMIT_COMPLETE));
		fi_freeinfo(info);
	}
	h = xt_hints(FI_EP_RDM);
	h->ep_attr->auth_key_size = 4;
	h->ep_attr->auth_key = calloc(1, 4);
	CHECK_RET(gi(h, NULL, NULL, 0, &info), -FI_ENODATA);
	/* A job key of 16 bytes or more: packet authentication (RDM only),
	 * echoed in the entry. */
	h = xt_hints(FI_EP_RDM);
	h->ep_attr->auth_key_size = 16;
	h->ep_attr->auth_key = malloc(16);
	memset(h->ep_attr->auth_key, 0x5a, 16);
	CHECK_RET(gi(h, NULL, NULL, 0, &info), 0);
	if (info) {
		CHECK(info->ep_attr->auth_key_size == 16);
		CHECK(info->ep_attr->auth_key &&
		      info->ep_attr->auth_key[15] == 0x5a);
		fi_freeinfo(info);
	}
	h = xt_hints(FI_EP_DGRAM);
	h->domain_attr->auth_key_size = 16;
	h->domain_attr->auth_key = calloc(1, 16);
	CHECK_RET(gi(h, NULL, NULL, 0, &info), -FI_ENODATA);
}

static void addr_hints(void)
{
	struct fi_info *h, *info;
	struct sockaddr_in *sin;
	h = xt_hints(FI_EP_RDM);
	h->addr_format = FI_SOCKADDR_IN;
	CHECK_RET(gi(h, NULL, NULL, 0, &info), 0);
	if (info) {
		CHECK(info->addr_format == FI_SOCKADDR_IN);
		CHECK(info->src_addrlen == sizeof(struct sockaddr_in));
		sin = info->src_addr;
		char buf[64];
		inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf));
		CHECK(!strcmp(buf, xt_local_ip));
		fi_freeinfo(info);
	}
	h = xt_hints(FI_EP_RDM);
	h->addr_format = FI_SOCKADDR_IN6;
	CHECK_RET(gi(h, NULL, NULL, 0, &info), 0);
	if (info) {
		CHECK(info->addr_format == FI_SOCKADDR_IN6);
		CHECK(info->src_addrlen == sizeof(struct sockaddr_in6));
		fi_freeinfo(info);
	}
	h = xt_hints(FI_EP_RDM);
	h->addr_format = FI_SOCKADDR_IB;
	CHECK_RET(gi(h, NULL, NULL, 0, &info), -FI_ENODATA);

	/* node/service name the peer (udp/tcp convention). */
	h = xt_hints(FI_EP_RDM);
	h->addr_format = FI_SOCKADDR_IN;
	CHECK_RET(gi(h, xt_peer_ip, "4242", 0, &info), 0);
	if (info) {
		REQUIRE(info->dest_addr && info->dest_addrlen == sizeof(struct sockaddr_in));
		sin = info->dest_addr;
		CHECK(ntohs(sin->sin_port) == 4242);
		fi_freeinfo(info);
	}
	/* With FI_SOURCE they name our own address. */
	h = xt_hints(FI_EP_RDM);
	h->addr_format = FI_SOCKADDR_IN;
	CHECK_RET(gi(h, xt_local_ip, "4243", FI_SOURCE, &info), 0);
	if (info) {
		sin = info->src_addr;
		CHECK(ntohs(sin->sin_port) == 4243);
		CHECK(!info->dest_addr);
		fi_freeinfo(info);
	}
	/* Service alone: our port. */
	h = xt_hints(FI_EP_DGRAM);
	CHECK_RET(gi(h, NULL, "4244", 0, &info), 0);
	if (info) {
		uint8_t *b = info->src_addr;
		CHECK(info->src_addrlen == XDP_ADDR_LEN && b[4] == (4244 >> 8) && b[5] == (4244 & 0xff));
		fi_freeinfo(info);
	}
	/* A source address we do not have, a peer off our subnet, junk. */
	h = xt_hints(FI_EP_RDM);
	CHECK_RET(gi(h, "192.0.2.77", "1", FI_SOURCE, &info), -FI_ENODATA);
	h = xt_hints(FI_EP_RDM);
	CHECK_RET(gi(h, "203.0.113.9", "1", 0, &info), -FI_ENODATA);
	h = xt_hints(FI_EP_RDM);
	CHECK_RET(gi(h, xt_peer_ip, "notaport", 0, &info), -FI_ENODATA);

	/* hints->dest_addr in our format (what fi_pingpong's client passes). */
	struct fi_info *srv;
	CHECK_RET(gi(xt_hints(FI_EP_RDM), NULL, NULL, 0, &srv), 0);
	if (srv) {
		h = xt_hints(FI_EP_RDM);
		h->addr_format = srv->addr_format;
		h->dest_addr = malloc(srv->src_addrlen);
		memcpy(h->dest_addr, srv->src_addr, srv->src_addrlen);
		h->dest_addrlen = srv->src_addrlen;
		CHECK_RET(gi(h, NULL, NULL, 0, &info), 0);
		if (info) {
			CHECK(info->dest_addrlen == XDP_ADDR_LEN);
			fi_freeinfo(info);
		}
		fi_freeinfo(srv);
	}
}

static void iface_param(void)
{
	struct fi_info *info;
	setenv("FI_XDP_IFACE", "nosuchif0", 1);
	CHECK_RET(gi(xt_hints(FI_EP_RDM), NULL, NULL, 0, &info), -FI_ENODATA);
	setenv("FI_XDP_IFACE", xt_iface, 1);
	CHECK_RET(gi(xt_hints(FI_EP_RDM), NULL, NULL, 0, &info), 0);
	fi_freeinfo(info);
	unsetenv("FI_XDP_IFACE");
}

static void bad_args(void)
{
	/* (info == NULL is dereferenced by the 1.17 core itself before any
	 * provider is asked, so it cannot be tested here.) */
	struct fi_info *info;
	/* A future API version the provider (and core) do not know: the next
	 * major release after the headers built against (2.0 for 1.17's). */
	CHECK(fi_getinfo(FI_VERSION(FI_MAJOR_VERSION + 1, 0), NULL, NULL, 0,
			 xt_hints(FI_EP_RDM), &info) != 0);
}

/* Version 0, which no release had: MPICH 4's first fi_getinfo lists the
 * providers with it (no hints) and picks one by name. We answer as for the
 * oldest API (1.0: mr_mode is one of the two old modes), as libfabric's own
 * providers answer. */
static void version_zero(void)
{
	struct fi_info *info = NULL, *i;
	int ours = 0;
	CHECK_RET(fi_getinfo(0, NULL, NULL, 0, NULL, &info), 0);
	for (i = info; i; i = i->next) {
		if (strcmp(i->fabric_attr->prov_name, "xdp"))
			continue;
		ours++;
		CHECK(i->domain_attr->mr_mode == FI_MR_SCALABLE);
	}
	CHECK(ours > 0);
	fi_freeinfo(info);
}

int main(int argc, char **argv)
{
	xt_init(argc, argv);
	if (argc > 4 && !strcmp(argv[4], "expect-none")) {
		/* No usable interface / no privileges: no entries, no crash. */
		struct fi_info *info;
		CHECK_RET(gi(xt_hints(FI_EP_UNSPEC), NULL, NULL, 0, &info), -FI_ENODATA);
		return xt_done("getinfo(expect-none)");
	}
	no_hints();
	prov_hint_attrs();
	ep_type_hints();
	caps_hints();
	domain_hints();
	size_and_order_hints();
	addr_hints();
	iface_param();
	version_zero();
	bad_args();
	return xt_done("getinfo");
}
