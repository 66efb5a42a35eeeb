/* Memory registration (fi_mr(3)): reg/regv/regattr, application keys
 * unique per domain, descriptors, bad arguments. */
#include <sys/mman.h>

#include "xt.h"

int main(int argc, char **argv)
{
	struct xt_res r;
	struct fid_mr *mr, *mr2, *mr3;
	static char buf[4096];
	xt_init(argc, argv);
	xt_open(&r, FI_EP_RDM, 0);

	CHECK_RET(fi_mr_reg(r.domain, buf, sizeof(buf), FI_SEND | FI_RECV, 0, 42, 0, &mr, NULL), 0);
	CHECK(fi_mr_key(mr) == 42);
	CHECK(fi_mr_desc(mr) != NULL);
	/* Keys are unique in a domain. */
	CHECK_RET(fi_mr_reg(r.domain, buf, 16, FI_SEND, 0, 42, 0, &mr2, NULL), -FI_ENOKEY);
	struct iovec iov[2] = {{buf, 100}, {buf + 200, 100}};
	CHECK_RET(fi_mr_regv(r.domain, iov, 2, FI_RECV, 0, 43, 0, &mr2, NULL), 0);
	CHECK(fi_mr_key(mr2) == 43);
	struct fi_mr_attr attr = {.mr_iov = iov, .iov_count = 1, .access = FI_SEND, .requested_key = 44};
	CHECK_RET(fi_mr_regattr(r.domain, &attr, 0, &mr3), 0);
	CHECK(fi_mr_key(mr3) == 44);
	/* The domain is busy while MRs exist. */
	CHECK_RET(fi_close(&r.domain->fid), -FI_EBUSY);
	CHECK_RET(fi_close(&mr->fid), 0);
	/* Key 42 is free again. */
	CHECK_RET(fi_mr_reg(r.domain, buf, sizeof(buf), FI_SEND, 0, 42, 0, &mr, NULL), 0);

	/* Bad arguments. */
	struct fid_mr *bad;
	/* NULL is the address space (MPICH's dynamic windows; rma.c), alone:
	 * a NULL range among others is refused. */
	CHECK_RET(fi_mr_reg(r.domain, NULL, 16, FI_SEND, 0, 50, 0, &bad, NULL), 0);
	CHECK_RET(fi_close(&bad->fid), 0);
	struct iovec with_null[2] = {{buf, 1}, {NULL, 1}};
	CHECK_RET(fi_mr_regv(r.domain, with_null, 2, FI_SEND, 0, 50, 0, &bad, NULL), -FI_EINVAL);
	CHECK_RET(fi_mr_reg(r.domain, buf, 16, FI_SEND, 0, 50, 0, NULL, NULL), -FI_EINVAL);
	CHECK_RET(fi_mr_reg(r.domain, buf, 16, 1ULL << 40, 0, 50, 0, &bad, NULL), -FI_EINVAL);
	CHECK_RET(fi_mr_reg(r.domain, buf, 16, FI_SEND, 0, 50, FI_RMA_EVENT, &bad, NULL), -FI_EBADFLAGS);
	CHECK_RET(fi_mr_regv(r.domain, NULL, 1, FI_SEND, 0, 50, 0, &bad, NULL), -FI_EINVAL);
	CHECK_RET(fi_mr_regv(r.domain, iov, 0, FI_SEND, 0, 50, 0, &bad, NULL), -FI_EINVAL);
	struct iovec many[5] = {{buf, 1}, {buf, 1}, {buf, 1}, {buf, 1}, {buf, 1}};
	CHECK_RET(fi_mr_regv(r.domain, many, 5, FI_SEND, 0, 50, 0, &bad, NULL), -FI_EINVAL);
	CHECK_RET(fi_mr_regattr(r.domain, NULL, 0, &bad), -FI_EINVAL);
	/* Counts and ranges that cannot be: refused before anything is read. */
	CHECK_RET(fi_mr_regv(r.domain, iov, SIZE_MAX, FI_SEND, 0, 50, 0, &bad, NULL), -FI_EINVAL);
	struct fi_mr_attr huge = {.mr_iov = iov, .iov_count = SIZE_MAX, .access = FI_SEND};
	CHECK_RET(fi_mr_regattr(r.domain, &huge, 0, &bad), -FI_EINVAL);
	CHECK_RET(fi_mr_reg(r.domain, (void *)(uintptr_t)-4096, 8192, FI_SEND, 0, 50, 0, &bad, NULL),
		  -FI_EINVAL);
	CHECK_RET(fi_mr_reg(r.domain, buf, SIZE_MAX, FI_SEND, 0, 50, 0, &bad, NULL), -FI_EINVAL);
	/* Memory a peer may access must be mapped so (a peer's write to a
	 * read-only page would fault this process): -FI_EFAULT, as an RDMA
	 * NIC's registration fails; for local access only, no such check. */
	char *pages = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(pages != MAP_FAILED);
	REQUIRE(mprotect(pages + 4096, 4096, PROT_READ) == 0);
	REQUIRE(munmap(pages + 2 * 4096, 4096) == 0);
	CHECK_RET(fi_mr_reg(r.domain, pages + 4096, 4096, FI_REMOTE_WRITE, 0, 50, 0, &bad, NULL),
		  -FI_EFAULT);
	CHECK_RET(fi_mr_reg(r.domain, pages, 2 * 4096, FI_REMOTE_WRITE, 0, 50, 0, &bad, NULL),
		  -FI_EFAULT);
	CHECK_RET(fi_mr_reg(r.domain, pages + 4096, 2 * 4096, FI_REMOTE_READ, 0, 50, 0, &bad, NULL),
		  -FI_EFAULT);
	struct iovec ro_part[2] = {{pages, 16}, {pages + 4096, 16}};
	CHECK_RET(fi_mr_regv(r.domain, ro_part, 2, FI_REMOTE_WRITE, 0, 50, 0, &bad, NULL), -FI_EFAULT);
	CHECK_RET(fi_mr_reg(r.domain, pages, 2 * 4096, FI_REMOTE_READ, 0, 50, 0, &bad, NULL), 0);
	CHECK_RET(fi_close(&bad->fid), 0);
	CHECK_RET(fi_mr_reg(r.domain, pages + 4096, 4096, FI_SEND, 0, 50, 0, &bad, NULL), 0);
	CHECK_RET(fi_close(&bad->fid), 0);
	REQUIRE(munmap(pages, 2 * 4096) == 0);
	attr.requested_key = 51;
	attr.iface = FI_HMEM_CUDA;
	CHECK_RET(fi_mr_regattr(r.domain, &attr, 0, &bad), -FI_ENOSYS);
	/* No FI_MR_ENDPOINT, no FI_RMA_EVENT: nothing to bind. A registration
	 * is usable at once and pins nothing: enable and refresh succeed. */
	CHECK_RET(fi_mr_bind(mr, &r.domain->fid, 0), -FI_ENOSYS);
	CHECK_RET(fi_mr_enable(mr), 0);
	CHECK_RET(fi_mr_refresh(mr, iov, 1, 0), 0);
	CHECK_RET(fi_mr_refresh(mr, NULL, 1, 0), -FI_EINVAL);
	CHECK_RET(fi_mr_refresh(mr, iov, SIZE_MAX, 0), -FI_EINVAL);

	CHECK_RET(fi_close(&mr->fid), 0);
	CHECK_RET(fi_close(&mr2->fid), 0);
	CHECK_RET(fi_close(&mr3->fid), 0);
	xt_close(&r);
	return xt_done("mr");
}
