/* fi_atomic(3) through the real libfabric, on an RDM endpoint that targets
 * itself: fi_atomicvalid / fi_fetch_atomicvalid / fi_compare_atomicvalid
 * and fi_query_atomic for every (operation, datatype) pair against the
 * table of what is offered; every offered pair executed as plain, fetching
 * or compare atomic on 3-element vectors and checked against a reference;
 * the vector (ioc) and msg forms, fi_inject_atomic; completion flags
 * (FI_ATOMIC | FI_WRITE / FI_READ) and counters; refusals at the target
 * (FI_EKEYREJECTED, FI_EACCES) that leave memory untouched; invalid local
 * arguments. argv[4]: "prov" or "basic0" (xt_rma.h). */
#include "xt_rma.h"

#define N 3

static struct xt_rma t;
static uint64_t key, addr;
static unsigned char target[4096], ro_mem[64];

static int dt_size(int dt)
{
	switch (dt) {
	case FI_INT8: case FI_UINT8: return 1;
	case FI_INT16: case FI_UINT16: return 2;
	case FI_INT32: case FI_UINT32: case FI_FLOAT: return 4;
	case FI_INT64: case FI_UINT64: case FI_DOUBLE: return 8;
	default: return 0;
	}
}

static int is_float(int dt) { return dt == FI_FLOAT || dt == FI_DOUBLE; }

/* What the provider offers (fi_xdp(7)): form 0 plain, 1 fetch, 2 compare. */
static int offered(int form, int dt, int op)
{
	if (!dt_size(dt))
		return 0;
	switch (op) {
	case FI_MIN: case FI_MAX: case FI_SUM: case FI_PROD: case FI_ATOMIC_WRITE:
		return form != 2;
	case FI_LOR: case FI_LAND: case FI_BOR: case FI_BAND: case FI_LXOR: case FI_BXOR:
		return form != 2 && !is_float(dt);
	case FI_ATOMIC_READ:
		return form == 1;
	case FI_CSWAP: case FI_CSWAP_NE: case FI_CSWAP_LE: case FI_CSWAP_LT:
	case FI_CSWAP_GE: case FI_CSWAP_GT:
		return form == 2;
	case FI_MSWAP:
		return form == 2 && !is_float(dt);
	}
	return 0;
}

/* Values as doubles (exact for every element used here). */
static double get(int dt, const void *p, int i)
{
	switch (dt) {
	case FI_INT8: return ((int8_t *)p)[i];
	case FI_UINT8: return ((uint8_t *)p)[i];
	case FI_INT16: return ((int16_t *)p)[i];
	case FI_UINT16: return ((uint16_t *)p)[i];
	case FI_INT32: return ((int32_t *)p)[i];
	case FI_UINT32: return ((uint32_t *)p)[i];
	case FI_INT64: return (double)((int64_t *)p)[i];
	case FI_UINT64: return (double)((uint64_t *)p)[i];
	case FI_FLOAT: return ((float *)p)[i];
	default: return ((double *)p)[i];
	}
}

static void put(int dt, void *p, int i, double v)
{
	switch (dt) {
	case FI_INT8: ((int8_t *)p)[i] = (int8_t)v; break;
	case FI_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
	case FI_INT16: ((int16_t *)p)[i] = (int16_t)v; break;
	case FI_UINT16: ((uint16_t *)p)[i] = (uint16_t)v; break;
	case FI_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
	case FI_UINT32: ((uint32_t *)p)[i] = (uint32_t)v; break;
	case FI_INT64: ((int64_t *)p)[i] = (int64_t)v; break;
	case FI_UINT64: ((uint64_t *)p)[i] = (uint64_t)v; break;
	case FI_FLOAT: ((float *)p)[i] = (float)v; break;
	default: ((double *)p)[i] = v; break;
	}
}

/* The reference (fi_atomic(3) "Atomic Operations"), on small non-negative
 * integers held in doubles; bit operations on their integer values. */
static double ref(int op, double t0, double o, double c)
{
	long long a = (long long)t0, b = (long long)o, m = (long long)c;
	switch (op) {
	case FI_MIN: return o < t0 ? o : t0;
	case FI_MAX: return o > t0 ? o : t0;
	case FI_SUM: return t0 + o;
	case FI_PROD: return t0 * o;
	case FI_LOR: return (a || b) ? 1 : 0;
	case FI_LAND: return (a && b) ? 1 : 0;
	case FI_LXOR: return (!a != !b) ? 1 : 0;
	case FI_BOR: return (double)(a | b);
	case FI_BAND: return (double)(a & b);
	case FI_BXOR: return (double)(a ^ b);
	case FI_ATOMIC_READ: return t0;
	case FI_ATOMIC_WRITE: return o;
	case FI_CSWAP: return c == t0 ? o : t0;
	case FI_CSWAP_NE: return c != t0 ? o : t0;
	case FI_CSWAP_LE: return c <= t0 ? o : t0;
	case FI_CSWAP_LT: return c < t0 ? o : t0;
	case FI_CSWAP_GE: return c >= t0 ? o : t0;
	case FI_CSWAP_GT: return c > t0 ? o : t0;
	case FI_MSWAP: return (double)((b & m) | (a & ~m));
	}
	return t0;
}

static void validity(void)
{
	for (int form = 0; form < 3; form++)
		for (int dt = FI_INT8; dt <= FI_UINT128; dt++)
			for (int op = FI_MIN; op <= FI_MSWAP; op++) {
				size_t count = 0;
				int ret = form == 0   ? fi_atomicvalid(t.ep, dt, op, &count)
					  : form == 1 ? fi_fetch_atomicvalid(t.ep, dt, op, &count)
						      : fi_compare_atomicvalid(t.ep, dt, op, &count);
				struct fi_atomic_attr attr = {0};
				uint64_t qflags = form == 0 ? 0 : form == 1 ? FI_FETCH_ATOMIC : FI_COMPARE_ATOMIC;
				int q = fi_query_atomic(t.domain, dt, op, &attr, qflags);
				if (offered(form, dt, op)) {
					CHECK_RET(ret, 0);
					CHECK_RET(q, 0);
					size_t want = 1024 / dt_size(dt) / (form == 2 ? 2 : 1);
					CHECK(count == want && attr.count == want);
					CHECK(attr.size == (size_t)dt_size(dt));
				} else {
					CHECK_RET(ret, -FI_EOPNOTSUPP);
					CHECK_RET(q, -FI_EOPNOTSUPP);
				}
			}
	size_t c;
	CHECK_RET(fi_atomicvalid(t.ep, FI_INT32, FI_SUM, NULL), -FI_EINVAL);
	CHECK_RET(fi_query_atomic(t.domain, FI_INT32, FI_SUM, NULL, 0), -FI_EINVAL);
	struct fi_atomic_attr attr;
	CHECK_RET(fi_query_atomic(t.domain, FI_INT32, FI_SUM, &attr, 1ULL << 40), -FI_EBADFLAGS);
	CHECK_RET(fi_atomicvalid(t.ep, 99, FI_SUM, &c), -FI_EOPNOTSUPP);
}

/* Execute every offered pair in `form` and check memory and results. */
static void execute_all(int form)
{
	static int ctx;
	for (int dt = FI_INT8; dt <= FI_DOUBLE; dt++)
		for (int op = FI_MIN; op <= FI_MSWAP; op++) {
			if (!offered(form, dt, op))
				continue;
			unsigned char opnd[64], cmp[64], res[64], before[64];
			double t0[N] = {6, 0, 5}, o[N] = {3, 7, 5}, c[N] = {6, 2, 4};
			for (int i = 0; i < N; i++) {
				put(dt, target, i, t0[i]);
				put(dt, opnd, i, o[i]);
				put(dt, cmp, i, c[i]);
			}
			memcpy(before, target, sizeof(before));
			memset(res, 0xAB, sizeof(res));
			int ret;
			if (form == 0)
				ret = fi_atomic(t.ep, opnd, N, NULL, t.self, addr, key, dt, op, &ctx);
			else if (form == 1)
				ret = fi_fetch_atomic(t.ep, op == FI_ATOMIC_READ ? NULL : opnd, N, NULL,
						      res, NULL, t.self, addr, key, dt, op, &ctx);
			else
				ret = fi_compare_atomic(t.ep, opnd, N, NULL, cmp, NULL, res, NULL,
							t.self, addr, key, dt, op, &ctx);
			CHECK_RET(ret, 0);
			xt_ok(&t, &ctx, FI_ATOMIC | (form == 0 ? FI_WRITE : FI_READ));
			for (int i = 0; i < N; i++) {
				double want = ref(op, t0[i], o[i], c[i]);
				double got = get(dt, target, i);
				/* Compare in the datatype: store the reference the same way. */
				unsigned char w[8];
				put(dt, w, 0, want);
				if (get(dt, w, 0) != got) {
					fprintf(stderr, "dt %d op %d form %d elem %d: %g, want %g\n", dt,
						op, form, i, got, get(dt, w, 0));
					CHECK(0);
				}
				if (form != 0 && get(dt, res, i) != get(dt, before, i)) {
					fprintf(stderr, "dt %d op %d form %d elem %d: fetched %g, want %g\n",
						dt, op, form, i, get(dt, res, i), get(dt, before, i));
					CHECK(0);
				}
			}
		}
}

static void vector_and_msg_forms(void)
{
	uint64_t *tv = (uint64_t *)target;
	tv[0] = 1, tv[1] = 2, tv[2] = 3;
	uint64_t a[2] = {10, 20}, b[1] = {30}, r[3] = {0};
	struct fi_ioc ioc[2] = {{a, 2}, {b, 1}};
	CHECK_RET(fi_atomicv(t.ep, ioc, NULL, 2, t.self, addr, key, FI_UINT64, FI_SUM, ioc), 0);
	xt_ok(&t, ioc, FI_ATOMIC | FI_WRITE);
	CHECK(tv[0] == 11 && tv[1] == 22 && tv[2] == 33);
	struct fi_ioc rioc[2] = {{r, 1}, {r + 1, 2}};
	CHECK_RET(fi_fetch_atomicv(t.ep, ioc, NULL, 2, rioc, NULL, 2, t.self, addr, key, FI_UINT64,
				   FI_SUM, rioc), 0);
	xt_ok(&t, rioc, FI_ATOMIC | FI_READ);
	CHECK(r[0] == 11 && r[1] == 22 && r[2] == 33 && tv[2] == 63);
	uint64_t cmpv[2] = {21, 42};
	struct fi_ioc one[1] = {{a, 2}};
	struct fi_ioc cone[1] = {{cmpv, 2}};
	struct fi_ioc rone[1] = {{r, 2}};
	CHECK_RET(fi_compare_atomicv(t.ep, one, NULL, 1, cone, NULL, 1, rone, NULL, 1, t.self, addr,
				     key, FI_UINT64, FI_CSWAP, one), 0);
	xt_ok(&t, one, FI_ATOMIC | FI_READ);
	CHECK(tv[0] == 10 && tv[1] == 20 && r[0] == 21 && r[1] == 42);

	struct fi_rma_ioc rma = {.addr = addr + 8, .count = 1, .key = key};
	uint64_t v = 5;
	struct fi_ioc vi = {&v, 1};
	struct fi_msg_atomic msg = {.msg_iov = &vi, .iov_count = 1, .addr = t.self, .rma_iov = &rma,
				    .rma_iov_count = 1, .datatype = FI_UINT64, .op = FI_MAX,
				    .context = &msg};
	CHECK_RET(fi_atomicmsg(t.ep, &msg, FI_DELIVERY_COMPLETE), 0);
	xt_ok(&t, &msg, FI_ATOMIC | FI_WRITE);
	CHECK(tv[1] == 20);
	msg.op = FI_ATOMIC_WRITE;
	uint64_t old = 0;
	struct fi_ioc oi = {&old, 1};
	CHECK_RET(fi_fetch_atomicmsg(t.ep, &msg, &oi, NULL, 1, 0), 0);
	xt_ok(&t, &msg, FI_ATOMIC | FI_READ);
	CHECK(old == 20 && tv[1] == 5);
	msg.op = FI_CSWAP_NE;
	uint64_t cv = 9;
	struct fi_ioc ci = {&cv, 1};
	v = 77;
	CHECK_RET(fi_compare_atomicmsg(t.ep, &msg, &ci, NULL, 1, &oi, NULL, 1, 0), 0);
	xt_ok(&t, &msg, FI_ATOMIC | FI_READ);
	CHECK(old == 5 && tv[1] == 77);

	uint64_t w = fi_cntr_read(t.wcntr);
	uint32_t inc = 1;
	uint32_t *t32 = (uint32_t *)(target + 64);
	*t32 = 0;
	for (int i = 0; i < 50; i++)
		CHECK_RET(fi_inject_atomic(t.ep, &inc, 1, t.self, addr + 64, key, FI_UINT32, FI_SUM), 0);
	xt_cntr_wait(&t, t.wcntr, w + 50);
	CHECK(*t32 == 50);
	struct fi_cq_data_entry e;
	CHECK_RET(fi_cq_read(t.txcq, &e, 1), -FI_EAGAIN);
}

static void refusals_and_errors(void)
{
	uint64_t ro_key, ro_addr;
	struct fid_mr *ro = xt_reg(&t, ro_mem, sizeof(ro_mem), FI_REMOTE_READ, 201, &ro_key, &ro_addr);
	memset(ro_mem, 0x22, sizeof(ro_mem));
	unsigned char snap[64];
	memcpy(snap, target, sizeof(snap));
	uint64_t one = 1, res;
	/* Unknown key; beyond the end; no write right; a fetch needs read too. */
	CHECK_RET(fi_atomic(t.ep, &one, 1, NULL, t.self, addr, key + 999, FI_UINT64, FI_SUM, &t), 0);
	xt_fails(&t, &t, FI_EKEYREJECTED);
	CHECK_RET(fi_atomic(t.ep, &one, 1, NULL, t.self, addr + sizeof(target) - 4, key, FI_UINT64,
			    FI_SUM, &t), 0);
	xt_fails(&t, &t, FI_EACCES);
	CHECK_RET(fi_atomic(t.ep, &one, 1, NULL, t.self, ro_addr, ro_key, FI_UINT64, FI_SUM, &t), 0);
	xt_fails(&t, &t, FI_EACCES);
	CHECK_RET(fi_fetch_atomic(t.ep, &one, 1, NULL, &res, NULL, t.self, ro_addr, ro_key, FI_UINT64,
				  FI_SUM, &t), 0);
	xt_fails(&t, &t, FI_EACCES);
	/* Reading needs only the read right. */
	CHECK_RET(fi_fetch_atomic(t.ep, NULL, 1, NULL, &res, NULL, t.self, ro_addr, ro_key, FI_UINT64,
				  FI_ATOMIC_READ, &t), 0);
	xt_ok(&t, &t, FI_ATOMIC | FI_READ);
	CHECK(res == 0x2222222222222222ULL);
	CHECK(!memcmp(snap, target, sizeof(snap)));
	CHECK(ro_mem[0] == 0x22 && ro_mem[7] == 0x22);

	/* Local errors: nothing is posted. */
	uint64_t big[200] = {0};
	CHECK_RET(fi_atomic(t.ep, &one, 0, NULL, t.self, addr, key, FI_UINT64, FI_SUM, NULL), -FI_EINVAL);
	CHECK_RET(fi_atomic(t.ep, big, 129, NULL, t.self, addr, key, FI_UINT64, FI_SUM, NULL), -FI_EINVAL);
	CHECK_RET(fi_compare_atomic(t.ep, big, 65, NULL, big, NULL, big, NULL, t.self, addr, key,
				    FI_UINT64, FI_CSWAP, NULL), -FI_EINVAL);
	CHECK_RET(fi_atomic(t.ep, NULL, 1, NULL, t.self, addr, key, FI_UINT64, FI_SUM, NULL), -FI_EINVAL);
	CHECK_RET(fi_fetch_atomic(t.ep, &one, 1, NULL, NULL, NULL, t.self, addr, key, FI_UINT64, FI_SUM,
				  NULL), -FI_EINVAL);
	CHECK_RET(fi_atomic(t.ep, &one, 1, NULL, t.self, addr, key, FI_UINT64, FI_CSWAP, NULL),
		  -FI_EOPNOTSUPP);
	CHECK_RET(fi_atomic(t.ep, &one, 1, NULL, t.self, addr, key, FI_DOUBLE_COMPLEX, FI_SUM, NULL),
		  -FI_EOPNOTSUPP);
	CHECK_RET(fi_atomic(t.ep, &one, 1, NULL, t.self, addr, key, FI_FLOAT, FI_BXOR, NULL),
		  -FI_EOPNOTSUPP);
	CHECK_RET(fi_atomic(t.ep, &one, 1, NULL, t.self, addr, key, FI_UINT64, 77, NULL),
		  -FI_EOPNOTSUPP);
	CHECK_RET(fi_atomic(t.ep, &one, 1, NULL, 4242, addr, key, FI_UINT64, FI_SUM, NULL), -FI_EINVAL);
	CHECK_RET(fi_atomicmsg(t.ep, NULL, 0), -FI_EINVAL);
	struct fi_rma_ioc rma[2] = {{addr, 1, key}, {addr, 1, key}};
	struct fi_ioc vi = {&one, 1};
	struct fi_msg_atomic msg = {.msg_iov = &vi, .iov_count = 1, .addr = t.self, .rma_iov = rma,
				    .rma_iov_count = 2, .datatype = FI_UINT64, .op = FI_SUM};
	CHECK_RET(fi_atomicmsg(t.ep, &msg, 0), -FI_EINVAL);
	msg.rma_iov_count = 1;
	rma[0].count = 2;
	CHECK_RET(fi_atomicmsg(t.ep, &msg, 0), -FI_EINVAL);
	rma[0].count = 1;
	CHECK_RET(fi_atomicmsg(t.ep, &msg, FI_REMOTE_CQ_DATA), -FI_EBADFLAGS);
	CHECK_RET(fi_fetch_atomicmsg(t.ep, &msg, &vi, NULL, 1, FI_TAGGED), -FI_EBADFLAGS);
	struct fi_cq_data_entry e;
	CHECK_RET(fi_cq_read(t.txcq, &e, 1), -FI_EAGAIN);
	CHECK_RET(fi_close(&ro->fid), 0);
}

int main(int argc, char **argv)
{
	xt_init(argc, argv);
	xt_rma_open(&t, xt_mr_mode_arg(argc, argv));
	struct fid_mr *mr =
		xt_reg(&t, target, sizeof(target), FI_REMOTE_READ | FI_REMOTE_WRITE, 200, &key, &addr);
	validity();
	for (int form = 0; form < 3; form++)
		execute_all(form);
	vector_and_msg_forms();
	refusals_and_errors();
	CHECK_RET(fi_close(&mr->fid), 0);
	xt_rma_close(&t);
	return xt_done("atomic");
}
