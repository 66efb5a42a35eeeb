// SPDX-License-Identifier: (GPL-2.0 OR MIT)
/*
 * ofi-xdp steering program.
 *
 * Parses Ethernet (+ at most one 802.1Q / 802.1ad tag), IPv4 or IPv6, and UDP.
 * A frame whose UDP destination port is in `ports` is redirected into
 * `xsks[slot]` (an XSKMAP of AF_XDP sockets) when it arrived on the queue
 * that socket is bound to (`xsk_queues[slot]`); every other frame goes to the
 * kernel stack with XDP_PASS.  Nothing is ever dropped except by the
 * fault-injection knob, which is off unless userspace sets it.
 *
 * The kernel drops a redirect into a socket bound to another queue
 * (xsk_rcv_check: the socket's queue must be the frame's rxq), so a frame
 * of our port that arrived elsewhere (RSS hashed its flow to another queue)
 * is passed instead: the endpoint's kernel UDP socket on the same port
 * receives it, at kernel-socket cost, and it is counted as other_queue.
 *
 * Classification (each frame bumps exactly one counter):
 *   steered       port matched, socket present, bpf_redirect_map said REDIRECT
 *   other_queue   port matched, socket present but bound to another queue
 *                 than the one the frame arrived on; handed to the kernel
 *   no_socket     port matched but xsks[slot] is empty (or the redirect failed)
 *   fault_dropped port matched and the fault-injection roll said drop
 *   malformed     a header we must read is cut short or inconsistent:
 *                 truncated Ethernet / VLAN / IPv4 / IPv6 / UDP header,
 *                 IPv4 IHL < 5, IPv4 options (IHL > 5: our wire never has
 *                 them), IPv4 total length < 20 or beyond the frame,
 *                 IPv4 version != 4, IPv6 version != 6, IPv6 payload
 *                 length beyond the frame, UDP length < 8 or beyond the
 *                 IP payload.
 *   passed        everything else: non-IP ethertypes (ARP, LLDP, ...),
 *                 non-UDP protocols (ICMP, TCP, ...), IPv4 fragments (the
 *                 kernel reassembles them), IPv6 with extension headers
 *                 (we never send them), and UDP to a port not in the map.
 *   Malformed frames also get XDP_PASS (the kernel drops or answers them as
 *   it always would) but are counted only as malformed, never as passed.
 *
 * Only long-standing helpers and context fields are used
 * (bpf_map_lookup_elem, bpf_redirect_map, xdp_md.rx_queue_index).
 * Verified on Debian's 6.1 and 6.12 and on 6.18; see
 * load_be16_len for what the 6.1 verifier needs.  Attaching through a
 * bpf_link (done by the loader) needs Linux 5.9+.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/in.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* Must match MAX_SLOTS / MAX_PORTS / MAX_QUEUES in src/lib.rs. */
#define MAX_SLOTS 4096
#define MAX_PORTS 256
/* Receive queues counted one by one in `rx_queues`; higher ones share the
 * last entry. */
#define MAX_QUEUES 64

/* Counter indices; must match the COUNTER_* constants in src/lib.rs. */
enum counter {
	CNT_STEERED = 0,
	CNT_PASSED = 1,
	CNT_MALFORMED = 2,
	CNT_NO_SOCKET = 3,
	CNT_FAULT_DROPPED = 4,
	CNT_OTHER_QUEUE = 5,
	CNT_MAX = 6,
};

/* Config indices in `config`; must match CONFIG_* in src/lib.rs. */
enum config_key {
	CFG_DROP_ONE_IN = 0, /* 0 = fault injection off */
	CFG_MAX = 1,
};

struct vlan_tag {
	__be16 tci;
	__be16 encapsulated_proto;
};

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, MAX_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

/* XSKMAP slot -> the queue its socket is bound to (set with the socket). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} xsk_queues SEC(".maps");

/* Frames of our ports by the receive queue they arrived on: how RSS (or a
 * veth peer's transmit queue) spread the flows. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u64);
} rx_queues SEC(".maps");

/* UDP destination port (host order, widened to u32) -> XSKMAP slot. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PORTS);
	__type(key, __u32);
	__type(value, __u32);
} ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CFG_MAX);
	__type(key, __u32);
	__type(value, __u32);
} config SEC(".maps");

/* Per-CPU xorshift64 state for the fault-injection roll, seeded from
 * userspace so a run is reproducible (given the same CPU placement). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} rng SEC(".maps");

/*
 * Loads a big-endian 16-bit length field as a host-order u32 the verifier
 * knows to be <= 0xffff.  Verifiers before ~6.4 (Debian's 6.1 included) do
 * not track bounds through a byte swap, so `pkt + ntohs(len)` is rejected
 * there ("math between pkt pointer and register with unbounded min value").
 * The empty asm hides the value from clang so it keeps the (for it
 * redundant) mask that gives the verifier its bound.
 */
static __always_inline __u32 load_be16_len(const __be16 *field)
{
	__u32 v = bpf_ntohs(*field);

	asm volatile("" : "+r"(v));
	return v & 0xffff;
}

static __always_inline void count(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &idx);

	/* Per-CPU slot: no other CPU writes it, a plain add suffices. */
	if (c)
		*c += 1;
}

static __always_inline int pass(void)
{
	count(CNT_PASSED);
	return XDP_PASS;
}

static __always_inline int malformed(void)
{
	count(CNT_MALFORMED);
	return XDP_PASS;
}

/* True when this steered frame should be dropped by fault injection. */
static __always_inline int fault_roll(void)
{
	__u32 key = CFG_DROP_ONE_IN;
	__u32 *n = bpf_map_lookup_elem(&config, &key);
	__u64 *state;
	__u64 x;

	if (!n || *n == 0)
		return 0;
	key = 0;
	state = bpf_map_lookup_elem(&rng, &key);
	if (!state)
		return 0;
	x = *state;
	if (x == 0)
		x = 0x9E3779B97F4A7C15ULL; /* xorshift must not sit at 0 */
	/* xorshift64 (Marsaglia 2003, shifts 13/7/17). */
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*state = x;
	return (x % *n) == 0;
}

/* Counts a frame of one of our ports under the queue it arrived on. */
static __always_inline void count_queue(__u32 queue)
{
	__u32 key = queue < MAX_QUEUES ? queue : MAX_QUEUES - 1;
	__u64 *c = bpf_map_lookup_elem(&rx_queues, &key);

	if (c)
		*c += 1;
}

static __always_inline int steer(struct xdp_md *ctx, __u16 dport)
{
	__u32 key = dport;
	__u32 *slot = bpf_map_lookup_elem(&ports, &key);
	__u32 *queue;
	__u32 s;

	if (!slot)
		return pass();
	s = *slot;
	count_queue(ctx->rx_queue_index);
	/* Fault injection models loss on the wire, so it applies before the
	 * socket lookup: a dropped frame is counted even with no socket. */
	if (fault_roll()) {
		count(CNT_FAULT_DROPPED);
		return XDP_DROP;
	}
	/* Lookup on an XSKMAP returns the socket since Linux 5.3. */
	if (!bpf_map_lookup_elem(&xsks, &s)) {
		count(CNT_NO_SOCKET);
		return XDP_PASS;
	}
	/* A redirect into a socket of another queue would be dropped by the
	 * kernel: the kernel UDP socket on the same port takes the frame. */
	queue = bpf_map_lookup_elem(&xsk_queues, &s);
	if (!queue || *queue != ctx->rx_queue_index) {
		count(CNT_OTHER_QUEUE);
		return XDP_PASS;
	}
	/* Low bits of flags = action when the slot is empty (Linux >= 5.6
	 * honours it; older ones return XDP_ABORTED, which we never reach
	 * because of the lookup above). */
	if (bpf_redirect_map(&xsks, s, XDP_PASS) == XDP_REDIRECT) {
		count(CNT_STEERED);
		return XDP_REDIRECT;
	}
	count(CNT_NO_SOCKET);
	return XDP_PASS;
}

static __always_inline int udp(struct xdp_md *ctx, void *l4, void *data_end,
			       __u32 ip_payload_len)
{
	struct udphdr *uh = l4;
	__u32 ulen;

	if ((void *)(uh + 1) > data_end)
		return malformed();
	ulen = load_be16_len(&uh->len);
	/* RFC 768: length counts the 8-byte header and the data.  The IP layer
	 * already checked that its payload lies inside the frame, so bounding
	 * ulen by the IP payload length bounds it by the frame too. */
	if (ulen < sizeof(*uh) || ulen > ip_payload_len)
		return malformed();
	return steer(ctx, bpf_ntohs(uh->dest));
}

static __always_inline int ipv4(struct xdp_md *ctx, void *l3, void *data_end)
{
	struct iphdr *iph = l3;
	__u32 tot_len;

	if ((void *)(iph + 1) > data_end)
		return malformed();
	/* RFC 791: IHL counts 32-bit words, minimum 5. */
	if (iph->version != 4 || iph->ihl < 5)
		return malformed();
	if (iph->ihl > 5)
		return malformed(); /* options: never on our wire */
	tot_len = load_be16_len(&iph->tot_len);
	if (tot_len < sizeof(*iph) || l3 + tot_len > data_end)
		return malformed();
	/* More-fragments flag or a non-zero offset: leave to the kernel. */
	if (iph->frag_off & bpf_htons(0x3FFF))
		return pass();
	if (iph->protocol != IPPROTO_UDP)
		return pass();
	return udp(ctx, (void *)(iph + 1), data_end, tot_len - sizeof(*iph));
}

static __always_inline int ipv6(struct xdp_md *ctx, void *l3, void *data_end)
{
	struct ipv6hdr *ip6h = l3;
	__u32 plen;

	if ((void *)(ip6h + 1) > data_end)
		return malformed();
	if (ip6h->version != 6)
		return malformed();
	plen = load_be16_len(&ip6h->payload_len);
	if ((void *)(ip6h + 1) + plen > data_end)
		return malformed();
	/* Extension headers (fragments included) are never on our wire. */
	if (ip6h->nexthdr != IPPROTO_UDP)
		return pass();
	return udp(ctx, (void *)(ip6h + 1), data_end, plen);
}

SEC("xdp")
int ofi_xdp_steer(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	void *l3;
	__u16 proto;

	if ((void *)(eth + 1) > data_end)
		return malformed();
	proto = eth->h_proto;
	l3 = eth + 1;
	if (proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD)) {
		struct vlan_tag *vt = l3;

		if ((void *)(vt + 1) > data_end)
			return malformed();
		proto = vt->encapsulated_proto;
		l3 = vt + 1;
	}
	if (proto == bpf_htons(ETH_P_IP))
		return ipv4(ctx, l3, data_end);
	if (proto == bpf_htons(ETH_P_IPV6))
		return ipv6(ctx, l3, data_end);
	return pass();
}

char _license[] SEC("license") = "Dual MIT/GPL";
