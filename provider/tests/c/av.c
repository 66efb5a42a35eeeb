/* Address vectors (fi_av(3)): FI_AV_TABLE and FI_AV_MAP, our address format
 * and struct sockaddr_in/in6, insert/insertsvc/insertsym/remove/lookup/
 * straddr, FI_SYNC_ERR, asynchronous insertion through an EQ, bad arguments. */
#include "xt.h"

static void one_av(struct xt_res *r, int type)
{
	struct fi_av_attr attr = {.type = type};
	struct fid_av *av;
	struct fid_ep *ep;
	uint8_t me[XDP_ADDR_LEN], got[64];
	size_t len = sizeof(me);
	fi_addr_t fa[4];

	CHECK_RET(fi_av_open(r->domain, &attr, &av, NULL), 0);
	CHECK_RET(fi_endpoint(r->domain, r->info, &ep, NULL), 0);
	CHECK_RET(fi_getname(&ep->fid, me, &len), 0);

	/* Our own format round-trips exactly. */
	CHECK_RET(fi_av_insert(av, me, 1, &fa[0], 0, NULL), 1);
	CHECK(fa[0] != FI_ADDR_NOTAVAIL);
	len = sizeof(got);
	CHECK_RET(fi_av_lookup(av, fa[0], got, &len), 0);
	CHECK(len == XDP_ADDR_LEN && !memcmp(got, me, XDP_ADDR_LEN));
	/* Too-small buffer: truncated, size reported, still 0 (fi_av(3)). */
	len = 4;
	memset(got, 0, sizeof(got));
	CHECK_RET(fi_av_lookup(av, fa[0], got, &len), 0);
	CHECK(len == XDP_ADDR_LEN && !memcmp(got, me, 4) && got[4] == 0);

	/* sockaddr_in and sockaddr_in6 are accepted (MAC resolved later). */
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(5000)};
	inet_pton(AF_INET, xt_peer_ip, &sin.sin_addr);
	CHECK_RET(fi_av_insert(av, &sin, 1, &fa[1], 0, NULL), 1);
	len = sizeof(got);
	CHECK_RET(fi_av_lookup(av, fa[1], got, &len), 0);
	CHECK(len == XDP_ADDR_LEN && got[4] == (5000 >> 8) && got[5] == (5000 & 0xff));
	CHECK(!memcmp(got + 16, &sin.sin_addr, 4));
	struct sockaddr_in6 sin6 = {.sin6_family = AF_INET6, .sin6_port = htons(5001)};
	inet_pton(AF_INET6, "fd6f:6678:6470::2", &sin6.sin6_addr);
	CHECK_RET(fi_av_insert(av, &sin6, 1, &fa[2], 0, NULL), 1);

	/* straddr: printable, truncated to the buffer, size reported. */
	char s[128];
	len = sizeof(s);
	CHECK(fi_av_straddr(av, me, s, &len) == s);
	CHECK(!strncmp(s, "fi_addr_xdp://", 14) && strstr(s, xt_local_ip));
	CHECK(len == strlen(s) + 1);
	size_t full = len;
	len = 10;
	CHECK(fi_av_straddr(av, me, s, &len) == s);
	CHECK(strlen(s) == 9 && len == full);

	/* insertsvc: IP + UDP port strings. */
	CHECK_RET(fi_av_insertsvc(av, xt_peer_ip, "6000", &fa[3], 0, NULL), 1);
	len = sizeof(got);
	CHECK_RET(fi_av_lookup(av, fa[3], got, &len), 0);
	CHECK(got[4] == (6000 >> 8) && got[5] == (6000 & 0xff));
	CHECK_RET(fi_av_insertsvc(av, NULL, "6000", &fa[3], 0, NULL), -FI_EINVAL);
	fi_addr_t bad1 = 0;
	CHECK_RET(fi_av_insertsvc(av, xt_peer_ip, "port", &bad1, 0, NULL), 0);
	CHECK(bad1 == FI_ADDR_NOTAVAIL);

	/* insertsym: 2 nodes x 3 services. */
	fi_addr_t sym[6];
	CHECK_RET(fi_av_insertsym(av, xt_peer_ip, 2, "7000", 3, sym, 0, NULL), 6);
	for (int i = 0; i < 6; i++)
		CHECK(sym[i] != FI_ADDR_NOTAVAIL);
	/* Names that cannot exist: nodes past the last address, a product
	 * that overflows, more than an AV holds. Refused at once. */
	CHECK_RET(fi_av_insertsym(av, "255.255.255.254", 3, "7000", 1, sym, 0, NULL), -FI_EINVAL);
	CHECK_RET(fi_av_insertsym(av, xt_peer_ip, SIZE_MAX, "7000", 2, NULL, 0, NULL), -FI_EINVAL);
	CHECK_RET(fi_av_insertsym(av, xt_peer_ip, (size_t)1 << 40, "7000", 1, NULL, 0, NULL),
		  -FI_EINVAL);

	/* Garbage is refused per address; FI_SYNC_ERR reports which. */
	uint8_t junk[2 * XDP_ADDR_LEN];
	memcpy(junk, me, XDP_ADDR_LEN);
	memset(junk + XDP_ADDR_LEN, 0xee, XDP_ADDR_LEN);
	fi_addr_t two[2];
	int errs[2] = {-1, -1};
	CHECK_RET(fi_av_insert(av, junk, 2, two, FI_SYNC_ERR, errs), 1);
	CHECK(two[0] != FI_ADDR_NOTAVAIL && two[1] == FI_ADDR_NOTAVAIL);
	CHECK(errs[0] == 0 && errs[1] == FI_EINVAL);

	/* remove, then the address is gone; unknown fi_addr is invalid. */
	CHECK_RET(fi_av_remove(av, &fa[1], 1, 0), 0);
	len = sizeof(got);
	CHECK_RET(fi_av_lookup(av, fa[1], got, &len), -FI_EINVAL);
	CHECK_RET(fi_av_remove(av, &fa[1], 1, 0), -FI_EINVAL);
	CHECK_RET(fi_av_lookup(av, 123456, got, &len), -FI_EINVAL);
	CHECK_RET(fi_av_lookup(av, fa[0], got, NULL), -FI_EINVAL);
	CHECK_RET(fi_av_remove(av, &fa[0], 1, FI_MORE), -FI_EBADFLAGS);

	/* Bad arguments. */
	CHECK_RET(fi_av_insert(av, NULL, 1, fa, 0, NULL), -FI_EINVAL);
	CHECK_RET(fi_av_insert(av, me, 1, fa, FI_PEEK, NULL), -FI_EBADFLAGS);
	CHECK_RET(fi_av_insert(av, me, 0, fa, 0, NULL), 0);
	/* FI_MORE is only a hint. */
	CHECK_RET(fi_av_insert(av, me, 1, fa, FI_MORE, NULL), 1);
	struct fid_av_set *set;
	struct fi_av_set_attr sattr = {0};
	CHECK_RET(fi_av_set(av, &sattr, &set, NULL), -FI_ENOSYS);

	CHECK_RET(fi_close(&ep->fid), 0);
	CHECK_RET(fi_close(&av->fid), 0);
}

static void async_av(struct xt_res *r)
{
	struct fi_av_attr attr = {.type = FI_AV_TABLE, .flags = FI_EVENT};
	struct fi_eq_attr eattr = {.wait_obj = FI_WAIT_UNSPEC};
	struct fid_av *av;
	struct fid_eq *eq;
	struct sockaddr_in sin[3] = {0};
	fi_addr_t fa[3];
	for (int i = 0; i < 3; i++) {
		sin[i].sin_family = AF_INET;
		sin[i].sin_port = htons(8000 + i);
		inet_pton(AF_INET, xt_peer_ip, &sin[i].sin_addr);
	}
	CHECK_RET(fi_av_open(r->domain, &attr, &av, NULL), 0);
	CHECK_RET(fi_av_insert(av, sin, 3, fa, 0, NULL), -FI_ENOEQ);
	CHECK_RET(fi_eq_open(r->fabric, &eattr, &eq, NULL), 0);
	CHECK_RET(fi_av_bind(av, &eq->fid, 0), 0);
	CHECK_RET(fi_close(&eq->fid), -FI_EBUSY);
	int ctx;
	CHECK_RET(fi_av_insert(av, sin, 3, fa, 0, &ctx), 0);
	uint32_t event;
	struct fi_eq_entry e;
	CHECK_RET(fi_eq_sread(eq, &event, &e, sizeof(e), 1000, 0), sizeof(e));
	CHECK(event == FI_AV_COMPLETE && e.data == 3 && e.context == &ctx && e.fid == &av->fid);
	/* A bad address in the middle: one error entry with its index, then
	 * the completion counting the two inserted (fi_av(3) FI_EVENT). */
	uint8_t nat[3][64];
	size_t nlen = sizeof(nat[0]);
	CHECK_RET(fi_av_lookup(av, fa[0], nat[0], &nlen), 0);
	REQUIRE(nlen <= sizeof(nat[0]));
	size_t n2 = nlen;
	CHECK_RET(fi_av_lookup(av, fa[2], nat[1], &n2), 0);
	memcpy(nat[2], nat[1], nlen);
	memset(nat[1], 0xff, nlen);
	/* the three native addresses back to back */
	memmove(nat[0] + nlen, nat[1], nlen);
	memmove(nat[0] + 2 * nlen, nat[2], nlen);
	CHECK_RET(fi_av_insert(av, nat, 3, fa, 0, &ctx), 0);
	CHECK_RET(fi_eq_sread(eq, &event, &e, sizeof(e), 1000, 0), -FI_EAVAIL);
	struct fi_eq_err_entry err = {0};
	CHECK_RET(fi_eq_readerr(eq, &err, 0), sizeof(err));
	CHECK(err.fid == &av->fid && err.context == &ctx && err.data == 1 && err.err > 0);
	CHECK_RET(fi_eq_sread(eq, &event, &e, sizeof(e), 1000, 0), sizeof(e));
	CHECK(event == FI_AV_COMPLETE && e.data == 2 && e.context == &ctx);
	CHECK(fa[1] == FI_ADDR_NOTAVAIL && fa[0] != FI_ADDR_NOTAVAIL && fa[2] != FI_ADDR_NOTAVAIL);
	CHECK_RET(fi_close(&av->fid), 0);
	CHECK_RET(fi_close(&eq->fid), 0);
}

static void open_errors(struct xt_res *r)
{
	struct fi_av_attr attr = {0};
	struct fid_av *av;
	CHECK_RET(fi_av_open(r->domain, NULL, &av, NULL), -FI_EINVAL);
	attr.type = 77;
	CHECK_RET(fi_av_open(r->domain, &attr, &av, NULL), -FI_EINVAL);
	attr.type = FI_AV_TABLE;
	attr.rx_ctx_bits = 2;
	CHECK_RET(fi_av_open(r->domain, &attr, &av, NULL), -FI_EINVAL);
	attr.rx_ctx_bits = 0;
	/* Named AVs are shared (shared_av.c). Any bytes make a name
	 * (fi_av(3)): the table's file escapes them, so this one stays in
	 * /dev/shm. Too long a name is refused, and a read-only open needs a
	 * name that exists. */
	attr.name = "../escape";
	CHECK_RET(fi_av_open(r->domain, &attr, &av, NULL), 0);
	CHECK(access("/dev/shm/ofi-xdp-av...%2Fescape", F_OK) == 0);
	CHECK_RET(fi_close(&av->fid), 0);
	char long_name[256];
	memset(long_name, 'x', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = 0;
	attr.name = long_name;
	CHECK_RET(fi_av_open(r->domain, &attr, &av, NULL), -FI_EINVAL);
	attr.name = NULL;
	attr.flags = FI_READ;
	CHECK_RET(fi_av_open(r->domain, &attr, &av, NULL), -FI_EINVAL);
	attr.flags = FI_WRITE;
	CHECK_RET(fi_av_open(r->domain, &attr, &av, NULL), -FI_EBADFLAGS);
}

int main(int argc, char **argv)
{
	struct xt_res r;
	xt_init(argc, argv);
	xt_open(&r, FI_EP_RDM, 0);
	one_av(&r, FI_AV_TABLE);
	one_av(&r, FI_AV_MAP);
	one_av(&r, FI_AV_UNSPEC);
	async_av(&r);
	open_errors(&r);
	xt_close(&r);
	return xt_done("av");
}
