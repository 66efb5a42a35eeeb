/* fi_rma(3) through the real libfabric: every RMA call (read, readv,
 * readmsg, write, writev, writemsg, inject_write, writedata,
 * inject_writedata) on an RDM endpoint that targets itself, data verified
 * from 0 B to 4 MiB; completion flags (FI_RMA | FI_READ / FI_WRITE),
 * FI_READ / FI_WRITE counters, remote CQ data at the target (FI_RMA |
 * FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA on the receive CQ); operations the
 * target refuses — unknown or closed key (FI_EKEYREJECTED), outside the
 * registration or without the access right (FI_EACCES) — fail at the
 * initiator and leave the target's memory untouched; invalid local
 * arguments fail at the call. argv[4]: "prov" or "basic0" (xt_rma.h). */
#include <sys/mman.h>

#include "xt_rma.h"

#define BIG (4u << 20)

static struct xt_rma t;
static char *target, *local, *ro, *wo;
static uint64_t key, addr, ro_key, ro_addr, wo_key, wo_addr;
static uint64_t writes, reads;

static void fill(char *p, size_t n, unsigned salt)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (char)(i * 31 + salt + (i >> 9));
}

static int same(const char *p, size_t n, unsigned salt)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (char)(i * 31 + salt + (i >> 9)))
			return 0;
	return 1;
}

static void writes_and_reads(void)
{
	size_t sizes[] = {0, 1, 1000, 1500, 70000, 1u << 20, BIG};
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		memset(target, 0, BIG);
		fill(local, n, i);
		CHECK_RET(fi_write(t.ep, local, n, NULL, t.self, addr, key, &sizes[i]), 0);
		xt_ok(&t, &sizes[i], FI_RMA | FI_WRITE);
		CHECK(same(target, n, i));
		writes++;
		memset(local, 0, BIG);
		CHECK_RET(fi_read(t.ep, local, n, NULL, t.self, addr, key, &sizes[i]), 0);
		xt_ok(&t, &sizes[i], FI_RMA | FI_READ);
		CHECK(same(local, n, i));
		reads++;
	}
	/* At an offset into the registration. */
	fill(local, 100, 7);
	CHECK_RET(fi_write(t.ep, local, 100, NULL, t.self, addr + 12345, key, &t), 0);
	xt_ok(&t, &t, FI_RMA | FI_WRITE);
	CHECK(same(target + 12345, 100, 7));
	writes++;
}

static void vectors_and_msgs(void)
{
	struct iovec iov[3] = {{local, 10}, {local + 100, 3000}, {local + 5000, 1}};
	fill(local, 6000, 3);
	memset(target, 0, 8192);
	CHECK_RET(fi_writev(t.ep, iov, NULL, 3, t.self, addr, key, iov), 0);
	xt_ok(&t, iov, FI_RMA | FI_WRITE);
	CHECK(!memcmp(target, local, 10) && !memcmp(target + 10, local + 100, 3000) &&
	      target[3010] == local[5000]);
	writes++;
	char back[3011];
	struct iovec riov[2] = {{back, 11}, {back + 11, 3000}};
	CHECK_RET(fi_readv(t.ep, riov, NULL, 2, t.self, addr, key, riov), 0);
	xt_ok(&t, riov, FI_RMA | FI_READ);
	CHECK(!memcmp(back, target, 3011));
	reads++;

	struct fi_rma_iov rma = {.addr = addr + 64, .len = 500, .key = key};
	struct iovec one = {local, 500};
	struct fi_msg_rma msg = {.msg_iov = &one, .iov_count = 1, .addr = t.self,
				 .rma_iov = &rma, .rma_iov_count = 1, .context = &msg, .data = 77};
	CHECK_RET(fi_writemsg(t.ep, &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE), 0);
	xt_ok(&t, &msg, FI_RMA | FI_WRITE);
	CHECK(!memcmp(target + 64, local, 500));
	writes++;
	/* With FI_REMOTE_CQ_DATA the target's receive CQ reports the data. */
	fill(local, 500, 9);
	CHECK_RET(fi_writemsg(t.ep, &msg, FI_COMPLETION | FI_REMOTE_CQ_DATA | FI_TRANSMIT_COMPLETE), 0);
	xt_ok(&t, &msg, FI_RMA | FI_WRITE);
	struct fi_cq_data_entry e = {0};
	CHECK_RET(xt_wait(t.rxcq, &e), 0);
	CHECK(e.flags == (FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA));
	CHECK(e.data == 77 && e.op_context == NULL && e.len == 500);
	CHECK(same(target + 64, 500, 9));
	writes++;
	char rb[500];
	one.iov_base = rb;
	msg.context = rb;
	CHECK_RET(fi_readmsg(t.ep, &msg, FI_COMPLETION), 0);
	xt_ok(&t, rb, FI_RMA | FI_READ);
	CHECK(same(rb, 500, 9));
	reads++;

	CHECK_RET(fi_writedata(t.ep, local, 200, NULL, 0xDA7A, t.self, addr, key, &e), 0);
	xt_ok(&t, &e, FI_RMA | FI_WRITE);
	CHECK_RET(xt_wait(t.rxcq, &e), 0);
	CHECK(e.data == 0xDA7A && e.flags == (FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA));
	writes++;
}

static void injects(void)
{
	uint64_t w = fi_cntr_read(t.wcntr);
	char small[64];
	memset(small, 0x5C, sizeof(small));
	CHECK_RET(fi_inject_write(t.ep, small, sizeof(small), t.self, addr + 1000, key), 0);
	memset(small, 0, sizeof(small)); /* reusable at once */
	xt_cntr_wait(&t, t.wcntr, w + 1);
	CHECK(target[1000] == 0x5C && target[1063] == 0x5C);
	memset(small, 0x6D, sizeof(small));
	CHECK_RET(fi_inject_writedata(t.ep, small, 8, 42, t.self, addr + 2000, key), 0);
	struct fi_cq_data_entry e = {0};
	CHECK_RET(xt_wait(t.rxcq, &e), 0);
	CHECK(e.data == 42 && e.len == 8 && target[2007] == 0x6D);
	xt_cntr_wait(&t, t.wcntr, w + 2);
	/* Nothing reported for injects on the transmit CQ. */
	CHECK_RET(fi_cq_read(t.txcq, &e, 1), -FI_EAGAIN);
	writes += 2;
}

static void refusals(void)
{
	char snapshot[256];
	memcpy(snapshot, target, sizeof(snapshot));
	memset(local, 0xEE, 4096);
	uint64_t bad_key = key + 1000;
	while (bad_key == ro_key || bad_key == wo_key)
		bad_key++;
	/* Unknown key. */
	CHECK_RET(fi_write(t.ep, local, 16, NULL, t.self, addr, bad_key, &t), 0);
	xt_fails(&t, &t, FI_EKEYREJECTED);
	CHECK_RET(fi_read(t.ep, local, 16, NULL, t.self, addr, bad_key, &t), 0);
	xt_fails(&t, &t, FI_EKEYREJECTED);
	/* Beyond the end (a large write whose first segments would fit),
	 * before the start, wrapping around. */
	CHECK_RET(fi_write(t.ep, local, 100000, NULL, t.self, addr + BIG - 4096, key, &t), 0);
	xt_fails(&t, &t, FI_EACCES);
	CHECK_RET(fi_write(t.ep, local, 16, NULL, t.self, addr - 1, key, &t), 0);
	xt_fails(&t, &t, FI_EACCES);
	CHECK_RET(fi_read(t.ep, local, 16, NULL, t.self, UINT64_MAX - 4, key, &t), 0);
	xt_fails(&t, &t, FI_EACCES);
	/* No write right; no read right. */
	memset(ro, 0x11, 4096);
	CHECK_RET(fi_write(t.ep, local, 16, NULL, t.self, ro_addr, ro_key, &t), 0);
	xt_fails(&t, &t, FI_EACCES);
	CHECK(ro[0] == 0x11 && ro[15] == 0x11);
	CHECK_RET(fi_read(t.ep, local, 16, NULL, t.self, wo_addr, wo_key, &t), 0);
	xt_fails(&t, &t, FI_EACCES);
	/* Remote CQ data of a refused write is never reported. */
	CHECK_RET(fi_writedata(t.ep, local, 16, NULL, 5, t.self, ro_addr, ro_key, &t), 0);
	xt_fails(&t, &t, FI_EACCES);
	struct fi_cq_data_entry e;
	CHECK_RET(fi_cq_read(t.rxcq, &e, 1), -FI_EAGAIN);
	CHECK(!memcmp(snapshot, target, sizeof(snapshot)));
	/* Failures count as errors on the counters. */
	CHECK(fi_cntr_readerr(t.wcntr) == 5);
	CHECK(fi_cntr_readerr(t.rcntr) == 3);
	/* The endpoint is still good. */
	CHECK_RET(fi_read(t.ep, local, 256, NULL, t.self, addr, key, &t), 0);
	xt_ok(&t, &t, FI_RMA | FI_READ);
	CHECK(!memcmp(local, snapshot, 256));
	reads++;
}

static void local_errors(void)
{
	char b[16];
	CHECK_RET(fi_write(t.ep, NULL, 16, NULL, t.self, addr, key, NULL), -FI_EINVAL);
	CHECK_RET(fi_read(t.ep, NULL, 16, NULL, t.self, addr, key, NULL), -FI_EINVAL);
	CHECK_RET(fi_write(t.ep, b, 16, NULL, 12345, addr, key, NULL), -FI_EINVAL);
	CHECK_RET(fi_inject_write(t.ep, local, t.info->tx_attr->inject_size + 1, t.self, addr, key),
		  -FI_EINVAL);
	CHECK_RET(fi_write(t.ep, b, t.info->ep_attr->max_msg_size + 1, NULL, t.self, addr, key, NULL),
		  -FI_EINVAL);
	struct iovec many[5] = {{b, 1}, {b, 1}, {b, 1}, {b, 1}, {b, 1}};
	CHECK_RET(fi_writev(t.ep, many, NULL, 5, t.self, addr, key, NULL), -FI_EINVAL);
	CHECK_RET(fi_writemsg(t.ep, NULL, 0), -FI_EINVAL);
	struct fi_rma_iov rma[2] = {{addr, 8, key}, {addr + 8, 8, key}};
	struct iovec one = {b, 16};
	struct fi_msg_rma msg = {.msg_iov = &one, .iov_count = 1, .addr = t.self,
				 .rma_iov = rma, .rma_iov_count = 2};
	/* rma_iov_limit is 1. */
	CHECK_RET(fi_writemsg(t.ep, &msg, 0), -FI_EINVAL);
	msg.rma_iov_count = 0;
	CHECK_RET(fi_readmsg(t.ep, &msg, 0), -FI_EINVAL);
	/* Local and remote lengths differ. */
	msg.rma_iov_count = 1;
	CHECK_RET(fi_writemsg(t.ep, &msg, 0), -FI_EINVAL);
	rma[0].len = 16;
	CHECK_RET(fi_readmsg(t.ep, &msg, FI_COMMIT_COMPLETE), -FI_EBADFLAGS);
	CHECK_RET(fi_readmsg(t.ep, &msg, FI_REMOTE_CQ_DATA), -FI_EBADFLAGS);
	CHECK_RET(fi_writemsg(t.ep, &msg, FI_MULTICAST), -FI_EBADFLAGS);
	CHECK_RET(fi_writemsg(t.ep, &msg, 1ULL << 50), -FI_EBADFLAGS);
	/* Nothing was posted. */
	struct fi_cq_data_entry e;
	CHECK_RET(fi_cq_read(t.txcq, &e, 1), -FI_EAGAIN);
}

/* NULL and UINTPTR_MAX bytes: the address space itself, as MPICH registers
 * a dynamic window (MPI_Win_create_dynamic) before it names attached memory
 * by its address. Writes, reads and an atomic reach memory by address; an
 * address nothing is mapped at fails at the initiator, and the target lives
 * on. (Runs after the counters are checked: it adds to them.) */
static void whole_address_space(void)
{
	uint64_t k, a;
	struct fid_mr *mr = xt_reg(&t, NULL, UINTPTR_MAX, FI_REMOTE_READ | FI_REMOTE_WRITE,
				   600, &k, &a);
	char *mem = calloc(1, 3 * 4096);
	REQUIRE(mem);
	uint64_t at = a + (uint64_t)(uintptr_t)(mem + 100);
	fill(local, 9000, 21);
	CHECK_RET(fi_write(t.ep, local, 9000, NULL, t.self, at, k, &t), 0);
	xt_ok(&t, &t, FI_RMA | FI_WRITE);
	CHECK(same(mem + 100, 9000, 21));
	memset(local, 0, 9000);
	CHECK_RET(fi_read(t.ep, local, 9000, NULL, t.self, at, k, &t), 0);
	xt_ok(&t, &t, FI_RMA | FI_READ);
	CHECK(same(local, 9000, 21));
	uint64_t one = 1, old = 0, *word = (uint64_t *)(void *)(mem + 8192);
	*word = 41;
	CHECK_RET(fi_fetch_atomic(t.ep, &one, 1, NULL, &old, NULL, t.self,
				  a + (uint64_t)(uintptr_t)word, k, FI_UINT64, FI_SUM, &t), 0);
	xt_ok(&t, &t, FI_ATOMIC | FI_READ);
	CHECK(old == 41 && *word == 42);
	/* A page nothing is mapped at any more. */
	char *gone = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(gone != MAP_FAILED);
	REQUIRE(munmap(gone, 4096) == 0);
	uint64_t hole = a + (uint64_t)(uintptr_t)gone;
	CHECK_RET(fi_write(t.ep, local, 16, NULL, t.self, hole, k, &t), 0);
	xt_fails(&t, &t, FI_EACCES);
	CHECK_RET(fi_read(t.ep, local, 16, NULL, t.self, hole, k, &t), 0);
	xt_fails(&t, &t, FI_EACCES);
	CHECK_RET(fi_fetch_atomic(t.ep, &one, 1, NULL, &old, NULL, t.self, hole, k, FI_UINT64,
				  FI_SUM, &t), 0);
	xt_fails(&t, &t, FI_EACCES);
	/* A page mapped read-only: it reads (as zeros), but a write to it, or
	 * one running into it from the page before, fails at the initiator. */
	char *two = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
			 0);
	REQUIRE(two != MAP_FAILED);
	REQUIRE(mprotect(two + 4096, 4096, PROT_READ) == 0);
	uint64_t ro_page = a + (uint64_t)(uintptr_t)(two + 4096);
	CHECK_RET(fi_write(t.ep, local, 16, NULL, t.self, ro_page, k, &t), 0);
	xt_fails(&t, &t, FI_EACCES);
	CHECK_RET(fi_write(t.ep, local, 9000, NULL, t.self, ro_page - 4096, k, &t), 0);
	xt_fails(&t, &t, FI_EACCES);
	memset(local, 0xFF, 16);
	CHECK_RET(fi_read(t.ep, local, 16, NULL, t.self, ro_page, k, &t), 0);
	xt_ok(&t, &t, FI_RMA | FI_READ);
	for (int i = 0; i < 16; i++)
		CHECK(local[i] == 0);
	CHECK_RET(fi_fetch_atomic(t.ep, &one, 1, NULL, &old, NULL, t.self, ro_page, k, FI_UINT64,
				  FI_SUM, &t), 0);
	xt_fails(&t, &t, FI_EACCES);
	REQUIRE(munmap(two, 2 * 4096) == 0);
	/* Memory still answers. */
	CHECK_RET(fi_read(t.ep, local, 16, NULL, t.self, at, k, &t), 0);
	xt_ok(&t, &t, FI_RMA | FI_READ);
	CHECK(same(local, 16, 21));
	CHECK_RET(fi_close(&mr->fid), 0);
	free(mem);
}

static void closed_key(void)
{
	char *mem = calloc(1, 4096);
	uint64_t k, a;
	struct fid_mr *mr = xt_reg(&t, mem, 4096, FI_REMOTE_WRITE | FI_REMOTE_READ, 500, &k, &a);
	CHECK_RET(fi_write(t.ep, local, 16, NULL, t.self, a, k, &t), 0);
	xt_ok(&t, &t, FI_RMA | FI_WRITE);
	writes++;
	CHECK_RET(fi_close(&mr->fid), 0);
	CHECK_RET(fi_write(t.ep, local, 16, NULL, t.self, a, k, &t), 0);
	xt_fails(&t, &t, FI_EKEYREJECTED);
	free(mem);
}

int main(int argc, char **argv)
{
	xt_init(argc, argv);
	xt_rma_open(&t, xt_mr_mode_arg(argc, argv));
	target = calloc(1, BIG);
	local = calloc(1, BIG);
	ro = calloc(1, 4096);
	wo = calloc(1, 4096);
	REQUIRE(target && local && ro && wo);
	struct fid_mr *mr = xt_reg(&t, target, BIG, FI_REMOTE_READ | FI_REMOTE_WRITE, 100, &key, &addr);
	/* FI_RMA_EVENT: a counter bound to the registration counts writes to it. */
	struct fid_cntr *mr_w;
	struct fi_cntr_attr cntr_attr = {.events = FI_CNTR_EVENTS_COMP};
	REQUIRE(fi_cntr_open(t.domain, &cntr_attr, &mr_w, NULL) == 0);
	CHECK_RET(fi_mr_bind(mr, &mr_w->fid, FI_REMOTE_WRITE), 0);
	CHECK_RET(fi_mr_bind(mr, &mr_w->fid, FI_SEND), -FI_EBADFLAGS);
	CHECK_RET(fi_mr_enable(mr), 0);
	/* The counter is referenced while bound. */
	CHECK_RET(fi_close(&mr_w->fid), -FI_EBUSY);
	struct fid_mr *mr_ro = xt_reg(&t, ro, 4096, FI_REMOTE_READ, 101, &ro_key, &ro_addr);
	struct fid_mr *mr_wo = xt_reg(&t, wo, 4096, FI_REMOTE_WRITE, 102, &wo_key, &wo_addr);
	/* Requested keys must be unique without FI_MR_PROV_KEY; with it the
	 * provider picks another when the requested one is taken. */
	struct fid_mr *dup;
	if (!t.prov_key) {
		CHECK_RET(fi_mr_reg(t.domain, ro, 16, FI_REMOTE_READ, 0, 100, 0, &dup, NULL),
			  -FI_ENOKEY);
	} else {
		CHECK(key == 100 && ro_key == 101 && wo_key == 102);
		CHECK_RET(fi_mr_reg(t.domain, ro, 16, FI_REMOTE_READ, 0, 100, 0, &dup, NULL), 0);
		CHECK(fi_mr_key(dup) != 100 && fi_mr_key(dup) != 101 && fi_mr_key(dup) != 102);
		CHECK_RET(fi_close(&dup->fid), 0);
	}

	/* A counter bound only to a registration progresses the domain's
	 * endpoints while it waits: the write executes without a CQ read. */
	struct fid_cntr *mr_wait;
	struct fi_cntr_attr wait_attr = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC};
	REQUIRE(fi_cntr_open(t.domain, &wait_attr, &mr_wait, NULL) == 0);
	CHECK_RET(fi_mr_bind(mr, &mr_wait->fid, FI_REMOTE_WRITE), 0);
	fill(local, 64, 1);
	CHECK_RET(fi_write(t.ep, local, 64, NULL, t.self, addr, key, &wait_attr), 0);
	CHECK_RET(fi_cntr_wait(mr_wait, 1, 5000), 0);
	CHECK(same(target, 64, 1));
	xt_ok(&t, &wait_attr, FI_RMA | FI_WRITE);
	writes++;

	writes_and_reads();
	vectors_and_msgs();
	injects();
	refusals();
	local_errors();
	closed_key();
	CHECK(fi_cntr_read(t.wcntr) == writes);
	CHECK(fi_cntr_read(t.rcntr) == reads);
	/* Every write and read this endpoint executed as target (refused ones
	 * not); the registration's counter only the writes to it (not the one
	 * to the registration closed_key made). */
	CHECK(fi_cntr_read(t.remote_w) == writes);
	CHECK(fi_cntr_read(t.remote_r) == reads);
	CHECK(fi_cntr_read(mr_w) == writes - 1);
	CHECK(fi_cntr_read(mr_wait) == writes - 1);
	if (fi_cntr_read(t.remote_w) != writes || fi_cntr_read(mr_w) != writes - 1)
		fprintf(stderr, "  remote writes %llu, mr %llu, want %llu\n",
			(unsigned long long)fi_cntr_read(t.remote_w),
			(unsigned long long)fi_cntr_read(mr_w), (unsigned long long)writes);
	whole_address_space();

	CHECK_RET(fi_close(&mr->fid), 0);
	CHECK_RET(fi_close(&mr_w->fid), 0);
	CHECK_RET(fi_close(&mr_wait->fid), 0);
	CHECK_RET(fi_close(&mr_ro->fid), 0);
	CHECK_RET(fi_close(&mr_wo->fid), 0);
	xt_rma_close(&t);
	free(target);
	free(local);
	free(ro);
	free(wo);
	return xt_done("rma");
}
