/* Data operations with bad arguments return the documented errno
 * (fi_msg(3)/fi_tagged(3) ERRORS: -FI_EINVAL for invalid arguments;
 * -FI_EBADFLAGS for unsupported flags) before the endpoint state matters;
 * well-formed operations on an endpoint that is not enabled return
 * -FI_EOPBADSTATE, and without an AV -FI_ENOAV. */
#include "xt.h"

static void run(int ep_type)
{
	struct xt_res r;
	struct fid_ep *ep;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fi_av_attr av_attr = {0};
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED};
	char buf[64];
	uint8_t me[XDP_ADDR_LEN];
	size_t len = sizeof(me);
	fi_addr_t peer;
	int rdm = ep_type == FI_EP_RDM;

	xt_open(&r, ep_type, 0);
	size_t inject = r.info->tx_attr->inject_size;
	char *big = calloc(1, inject + 1);
	CHECK_RET(fi_endpoint(r.domain, r.info, &ep, NULL), 0);
	/* No AV bound yet. */
	CHECK_RET(fi_send(ep, buf, 8, NULL, 0, NULL), -FI_ENOAV);
	CHECK_RET(fi_av_open(r.domain, &av_attr, &av, NULL), 0);
	CHECK_RET(fi_cq_open(r.domain, &cq_attr, &cq, NULL), 0);
	CHECK_RET(fi_ep_bind(ep, &av->fid, 0), 0);
	CHECK_RET(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
	CHECK_RET(fi_getname(&ep->fid, me, &len), 0);
	CHECK_RET(fi_av_insert(av, me, 1, &peer, 0, NULL), 1);

	/* NULL buffer with a length; too many iovs; NULL iov/msg. */
	CHECK_RET(fi_send(ep, NULL, 8, NULL, peer, NULL), -FI_EINVAL);
	CHECK_RET(fi_recv(ep, NULL, 8, NULL, FI_ADDR_UNSPEC, NULL), -FI_EINVAL);
	struct iovec iov[5] = {{buf, 1}, {buf, 1}, {buf, 1}, {buf, 1}, {buf, 1}};
	CHECK_RET(fi_sendv(ep, iov, NULL, 5, peer, NULL), -FI_EINVAL);
	CHECK_RET(fi_recvv(ep, iov, NULL, 5, FI_ADDR_UNSPEC, NULL), -FI_EINVAL);
	CHECK_RET(fi_sendv(ep, NULL, NULL, 1, peer, NULL), -FI_EINVAL);
	CHECK_RET(fi_sendmsg(ep, NULL, 0), -FI_EINVAL);
	CHECK_RET(fi_recvmsg(ep, NULL, 0), -FI_EINVAL);
	/* Unknown destination. */
	CHECK_RET(fi_send(ep, buf, 8, NULL, peer + 1000, NULL), -FI_EINVAL);
	CHECK_RET(fi_inject(ep, buf, 8, 9999), -FI_EINVAL);
	/* Inject larger than inject_size. */
	CHECK_RET(fi_inject(ep, big, inject + 1, peer), -FI_EINVAL);
	/* Unsupported flags. */
	struct iovec one = {buf, 8};
	struct fi_msg m = {.msg_iov = &one, .iov_count = 1, .addr = peer};
	CHECK_RET(fi_sendmsg(ep, &m, FI_PEEK), -FI_EBADFLAGS);
	CHECK_RET(fi_recvmsg(ep, &m, FI_CLAIM), -FI_EBADFLAGS);
	/* FI_MULTI_RECV needs exactly one buffer. */
	struct fi_msg m2 = {.msg_iov = iov, .iov_count = 2, .addr = FI_ADDR_UNSPEC};
	if (rdm)
		CHECK_RET(fi_recvmsg(ep, &m2, FI_MULTI_RECV), -FI_EINVAL);
	if (rdm) {
		/* Tagged: same rules; FI_PEEK|FI_CLAIM|FI_DISCARD together is invalid. */
		CHECK_RET(fi_tsend(ep, NULL, 8, NULL, peer, 1, NULL), -FI_EINVAL);
		CHECK_RET(fi_tsend(ep, buf, 8, NULL, peer + 1000, 1, NULL), -FI_EINVAL);
		CHECK_RET(fi_tinject(ep, big, inject + 1, peer, 1), -FI_EINVAL);
		struct fi_msg_tagged tm = {.msg_iov = &one, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .tag = 1};
		CHECK_RET(fi_trecvmsg(ep, &tm, FI_PEEK | FI_CLAIM | FI_DISCARD), -FI_EBADFLAGS);
		/* FI_CLAIM goes through the application's fi_context: none, refused. */
		CHECK_RET(fi_trecvmsg(ep, &tm, FI_PEEK | FI_CLAIM), -FI_EINVAL);
		CHECK_RET(fi_trecvmsg(ep, &tm, FI_CLAIM), -FI_EINVAL);
		CHECK_RET(fi_trecvmsg(ep, NULL, 0), -FI_EINVAL);
		/* Directed receive from an unknown source. */
		CHECK_RET(fi_trecv(ep, buf, 8, NULL, peer + 1000, 1, 0, NULL), -FI_EINVAL);
	} else {
		/* DGRAM: no remote CQ data; no FI_FENCE (unreliable). */
		m.data = 5;
		CHECK_RET(fi_sendmsg(ep, &m, FI_REMOTE_CQ_DATA), -FI_EBADFLAGS);
		CHECK_RET(fi_sendmsg(ep, &m, FI_FENCE), -FI_EBADFLAGS);
	}
	/* Well-formed operations before fi_enable. */
	int enabled = fi_enable(ep) == 0;
	if (!enabled) {
		CHECK_RET(fi_send(ep, buf, 8, NULL, peer, NULL), -FI_EOPBADSTATE);
		CHECK_RET(fi_recv(ep, buf, 8, NULL, FI_ADDR_UNSPEC, NULL), -FI_EOPBADSTATE);
		CHECK_RET(fi_inject(ep, buf, 8, peer), -FI_EOPBADSTATE);
		CHECK_RET(fi_sendmsg(ep, &m, FI_COMPLETION | FI_TRANSMIT_COMPLETE), -FI_EOPBADSTATE);
		if (rdm) {
			CHECK_RET(fi_tsend(ep, buf, 8, NULL, peer, 1, NULL), -FI_EOPBADSTATE);
			CHECK_RET(fi_senddata(ep, buf, 8, NULL, 7, peer, NULL), -FI_EOPBADSTATE);
			CHECK_RET(fi_tinjectdata(ep, buf, 8, 7, peer, 1), -FI_EOPBADSTATE);
		}
		CHECK_RET(fi_cancel(&ep->fid, buf), -FI_ENOENT);
	}
	free(big);
	CHECK_RET(fi_close(&ep->fid), 0);
	CHECK_RET(fi_close(&cq->fid), 0);
	CHECK_RET(fi_close(&av->fid), 0);
	xt_close(&r);
}

int main(int argc, char **argv)
{
	xt_init(argc, argv);
	run(FI_EP_RDM);
	run(FI_EP_DGRAM);
	return xt_done("msg_args");
}
