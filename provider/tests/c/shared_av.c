/* Named address vectors shared by two processes on one host (fi_av(3)
 * `name`, `map_addr`, FI_READ; FI_SHARED_AV), as fabtests' rdm_shared_av
 * uses them: the parent creates the AV and inserts its endpoint's address;
 * the child attaches read-only, finds that address's fi_addr_t through
 * map_addr, and sends to it; the parent receives. Then: a removal is seen
 * by the other process, a read-only AV refuses inserts and removals, the
 * table is mode 0600 in /dev/shm and disappears when its creator closes it,
 * and bad names, a read-only open of a missing name and a mismatched type
 * are refused.
 *
 * argv: <iface> <local IP> <peer IP> */
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "xt.h"

static char name[64], shm_path[128];

static int pipe_up[2], pipe_down[2];

static void say(int fd)
{
	REQUIRE(write(fd, "x", 1) == 1);
}

static void hear(int fd)
{
	char c;
	REQUIRE(read(fd, &c, 1) == 1);
}

struct side {
	struct xt_res r;
	struct fid_av *av;
	struct fid_ep *ep;
	struct fid_cq *cq;
};

static void open_side(struct side *s, uint64_t av_flags, void **map_addr)
{
	xt_open(&s->r, FI_EP_RDM, FI_MSG | FI_SHARED_AV);
	CHECK(s->r.info->caps & FI_SHARED_AV);
	struct fi_av_attr aa = {.type = FI_AV_MAP, .name = name, .flags = av_flags};
	REQUIRE(fi_av_open(s->r.domain, &aa, &s->av, NULL) == 0);
	*map_addr = aa.map_addr;
	struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_CONTEXT};
	REQUIRE(fi_cq_open(s->r.domain, &ca, &s->cq, NULL) == 0);
	s->ep = xt_enabled_ep(s->r.domain, s->r.info, s->av, s->cq);
}

static void close_side(struct side *s)
{
	CHECK_RET(fi_close(&s->ep->fid), 0);
	CHECK_RET(fi_close(&s->cq->fid), 0);
	CHECK_RET(fi_close(&s->av->fid), 0);
	xt_close(&s->r);
}

static int one(struct fid_cq *cq)
{
	struct fi_cq_entry e;
	for (int i = 0; i < 2000000; i++) {
		ssize_t n = fi_cq_read(cq, &e, 1);
		if (n == 1)
			return 1;
		if (n != -FI_EAGAIN)
			return 0;
		if (i > 1000)
			usleep(10);
	}
	return 0;
}

static int child(void)
{
	struct side s;
	void *map = NULL;
	hear(pipe_down[0]);
	open_side(&s, FI_READ, &map);
	CHECK(map != NULL);
	/* The parent inserted its own address first: map_addr[0]. */
	fi_addr_t parent = map ? ((fi_addr_t *)map)[0] : FI_ADDR_NOTAVAIL;
	CHECK(parent == 0);
	char addr[64];
	size_t len = sizeof(addr);
	CHECK_RET(fi_av_lookup(s.av, parent, addr, &len), 0);
	/* Read-only: no inserts, no removals. */
	fi_addr_t x;
	CHECK_RET(fi_av_insert(s.av, addr, 1, &x, 0, NULL), -FI_EOPNOTSUPP);
	CHECK_RET(fi_av_remove(s.av, &parent, 1, 0), -FI_EOPNOTSUPP);
	char msg[16] = "from the child";
	CHECK_RET(fi_send(s.ep, msg, sizeof(msg), NULL, parent, msg), 0);
	CHECK(one(s.cq));
	say(pipe_up[1]);
	/* The parent removes slot 1; we see it gone. */
	hear(pipe_down[0]);
	fi_addr_t second = 1;
	len = sizeof(addr);
	CHECK_RET(fi_av_lookup(s.av, second, addr, &len), -FI_EINVAL);
	CHECK(((fi_addr_t *)map)[1] == FI_ADDR_NOTAVAIL);
	close_side(&s);
	say(pipe_up[1]);
	return xt_done("shared_av child");
}

static int parent_side(pid_t pid)
{
	struct side s;
	void *map = NULL;
	open_side(&s, 0, &map);
	CHECK(map != NULL);
	char addr[64];
	size_t len = sizeof(addr);
	REQUIRE(fi_getname(&s.ep->fid, addr, &len) == 0);
	fi_addr_t me = FI_ADDR_NOTAVAIL, other;
	CHECK_RET(fi_av_insert(s.av, addr, 1, &me, 0, NULL), 1);
	CHECK(me == 0);
	CHECK_RET(fi_av_insert(s.av, addr, 1, &other, 0, NULL), 1);
	CHECK(other == 1);
	struct stat st;
	CHECK(stat(shm_path, &st) == 0 && (st.st_mode & 0777) == 0600);
	char buf[16] = {0};
	CHECK_RET(fi_recv(s.ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, buf), 0);
	say(pipe_down[1]);
	CHECK(one(s.cq));
	CHECK(!strcmp(buf, "from the child"));
	hear(pipe_up[0]);
	CHECK_RET(fi_av_remove(s.av, &other, 1, 0), 0);
	say(pipe_down[1]);
	hear(pipe_up[0]);
	int status = 0;
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	/* Refusals. */
	struct fid_av *av2;
	struct fi_av_attr aa = {.type = FI_AV_TABLE, .name = name};
	CHECK_RET(fi_av_open(s.r.domain, &aa, &av2, NULL), -FI_EINVAL); /* type differs */
	aa.type = FI_AV_MAP;
	aa.name = ""; /* empty */
	CHECK_RET(fi_av_open(s.r.domain, &aa, &av2, NULL), -FI_EINVAL);
	aa.name = "xt-never-created";
	aa.flags = FI_READ;
	CHECK_RET(fi_av_open(s.r.domain, &aa, &av2, NULL), -FI_EINVAL);
	aa.name = NULL;
	CHECK_RET(fi_av_open(s.r.domain, &aa, &av2, NULL), -FI_EINVAL); /* FI_READ unnamed */
	close_side(&s);
	/* Its creator closed it: the name is gone. */
	CHECK(stat(shm_path, &st) != 0);
	return xt_done("shared_av parent");
}

int main(int argc, char **argv)
{
	xt_init(argc, argv);
	snprintf(name, sizeof(name), "xt-%d", (int)getpid());
	snprintf(shm_path, sizeof(shm_path), "/dev/shm/ofi-xdp-av.%s", name);
	REQUIRE(pipe(pipe_up) == 0 && pipe(pipe_down) == 0);
	/* Fork before either side touches libfabric. */
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0)
		return child();
	return parent_side(pid);
}
