//! A leaf–spine fabric: two leaf routers, each with its hosts in subnets
//! of their own, and two (or four) spine routers joined to both leaves. A
//! leaf reaches the other leaf's hosts through any spine: one route with a
//! next hop per spine (kernel ECMP), hashed per flow on addresses and
//! UDP/TCP ports (`fib_multipath_hash_policy=1`), so different flows
//! between two hosts may cross different spines. Host ↔ host: leaf, spine,
//! leaf (TTL three less).
//!
//! Namespaces `oxt-<pid>-<n>-h<i>` (hosts), `-l0`, `-l1` (leaves), `-s0`,
//! `-s1`, … (spines). Host `i` (under leaf `i / hosts_per_leaf`): veth
//! `ox<pid>.<n><a+i>` to its leaf's port `…<A+i>`; IPv4
//! `198.19.<x>.<32 i>/27` (the host `+1`, the leaf `+30`), IPv6
//! `fd6f:6678:6474:<x><i>::/64` (the host `::1`, the leaf `::fe`), default
//! routes through the leaf. Leaf `l` ↔ spine `s` (link `j = S l + s`, `S`
//! the number of spines): veth `…<e+j>` (leaf) / `…<E+j>` (spine), IPv4
//! `198.19.<x>.<128 + 4j>/30` (leaf `+1`, spine `+2`), IPv6
//! `fd6f:6678:6474:<x><80+j>::/64` (leaf `::1`, spine `::2`). Routers know
//! only these subnets: nothing leaves.
//!
//! [`LeafSpine::shape`] limits every leaf ↔ spine link to a rate, both
//! ways (a `tbf` qdisc on the egress of both ends: the leaf's uplink and
//! the spine's downlink), so the fabric, not the hosts' CPUs, bounds what
//! crosses it. [`LeafSpine::spine_down`] fails a spine: its ports go down,
//! the leaves' ends of its links lose their carrier, and the leaves'
//! kernels leave those next hops out of their ECMP routes
//! (`ignore_routes_with_linkdown=1`, both families) until
//! [`LeafSpine::spine_up`].

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use crate::routed::{forward_in, no_dad_in, sysctls_in};
use crate::{Host, configure, delete_netns, new_netns, next_ids, topology_mac, veth_to};

/// The most hosts under one leaf.
pub const MAX_HOSTS_PER_LEAF: usize = 2;
const LEAVES: usize = 2;
/// The numbers of spines a fabric may have.
pub const SPINE_COUNTS: [usize; 2] = [2, 4];

/// Hosts under two leaves joined by two or four spines. Removed on drop.
#[derive(Debug)]
pub struct LeafSpine {
    /// The hosts: those of leaf 0, then those of leaf 1.
    pub hosts: Vec<Host>,
    hosts_per_leaf: usize,
    spines: usize,
    /// The fabric's byte in 198.19.x.0/24 ([`Plan`]).
    x: u8,
    /// Leaves, then spines.
    routers: Vec<String>,
    /// Per leaf ↔ spine link `j`: the leaf's interface, the spine's.
    links: Vec<(String, String)>,
}

/// Addresses of one topology (`x`: its byte in 198.19.x.0/24).
#[derive(Clone, Copy)]
struct Plan {
    x: u8,
}

impl Plan {
    fn host_v4(&self, i: usize, end: u8) -> Ipv4Addr {
        Ipv4Addr::new(198, 19, self.x, 32 * i as u8 + end)
    }
    fn host_v6(&self, i: usize, end: u16) -> Ipv6Addr {
        let group = u16::from(self.x) << 8 | i as u16;
        Ipv6Addr::new(0xfd6f, 0x6678, 0x6474, group, 0, 0, 0, end)
    }
    fn link_v4(&self, j: usize, end: u8) -> Ipv4Addr {
        Ipv4Addr::new(198, 19, self.x, 128 + 4 * j as u8 + end)
    }
    fn link_v6(&self, j: usize, end: u16) -> Ipv6Addr {
        let group = u16::from(self.x) << 8 | 0x80 | j as u16;
        Ipv6Addr::new(0xfd6f, 0x6678, 0x6474, group, 0, 0, 0, end)
    }
}

/// How long [`LeafSpine::spine_down`] and [`LeafSpine::spine_up`] wait for
/// the leaves' routes to follow.
const ROUTE_CHANGE_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether every next hop over `dev` in `ns`'s routes (both families) is
/// marked `linkdown` (`down`) or none is.
fn routes_show(ns: &str, dev: &str, down: bool) -> io::Result<bool> {
    let needle = format!("dev {dev} ");
    for fam in ["-4", "-6"] {
        let out = crate::ip(&["-n", ns, fam, "route", "show"])?;
        let over: Vec<&str> = out
            .lines()
            .filter(|l| format!("{l} ").contains(&needle))
            .collect();
        if over.iter().any(|l| l.contains("linkdown") != down) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// `tc -n <ns> args…` (iproute2's traffic control).
fn tc_in(ns: &str, args: &[&str]) -> io::Result<()> {
    let out = std::process::Command::new("tc")
        .args(["-n", ns])
        .args(args)
        .output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "tc -n {ns} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// `ip -n <ns> args…`.
fn ip_in(ns: &str, args: &[&str]) -> io::Result<()> {
    let mut all = vec!["-n", ns];
    all.extend_from_slice(args);
    crate::ip(&all).map(|_| ())
}

impl LeafSpine {
    /// `hosts_per_leaf` (1..=`MAX_HOSTS_PER_LEAF`) hosts under each of two
    /// leaves, two spines, links with MTU `mtu`.
    pub fn new(hosts_per_leaf: usize, mtu: u32) -> io::Result<LeafSpine> {
        LeafSpine::with_spines(hosts_per_leaf, 2, mtu)
    }

    /// Like [`LeafSpine::new`] with `spines` spines (one of
    /// [`SPINE_COUNTS`]).
    pub fn with_spines(hosts_per_leaf: usize, spines: usize, mtu: u32) -> io::Result<LeafSpine> {
        if !(1..=MAX_HOSTS_PER_LEAF).contains(&hosts_per_leaf) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a leaf takes 1..={MAX_HOSTS_PER_LEAF} hosts here, not {hosts_per_leaf}"),
            ));
        }
        if !SPINE_COUNTS.contains(&spines) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a fabric has {SPINE_COUNTS:?} spines here, not {spines}"),
            ));
        }
        let (pid, k) = next_ids();
        let x = (pid.wrapping_mul(43).wrapping_add(k) % 256) as u8;
        let plan = Plan { x };
        let routers: Vec<String> = (0..LEAVES)
            .map(|l| format!("oxt-{pid}-{k}-l{l}"))
            .chain((0..spines).map(|s| format!("oxt-{pid}-{k}-s{s}")))
            .collect();
        let mut net = LeafSpine {
            hosts: Vec::new(),
            hosts_per_leaf,
            spines,
            x,
            routers,
            links: Vec::new(),
        };
        let mut created = Vec::new();
        let r = (|| {
            for (i, r) in net.routers.iter().enumerate() {
                new_netns(r)?;
                created.push(r.clone());
                forward_in(r)?;
                if i >= LEAVES {
                    // A spine taken down keeps its IPv6 addresses (IPv4
                    // ones stay anyway), to route again once back up.
                    sysctls_in(
                        r,
                        &[
                            ("net/ipv6/conf/all/keep_addr_on_down", "1"),
                            ("net/ipv6/conf/default/keep_addr_on_down", "1"),
                        ],
                    )?;
                }
                if i < LEAVES {
                    // Hash flows on their ports too (an L4 hash), so two
                    // flows between the same hosts can take both spines;
                    // and leave a next hop whose link lost its carrier (a
                    // spine down) out of the ECMP routes. Set before the
                    // links exist, so theirs inherit `default`.
                    sysctls_in(
                        r,
                        &[
                            ("net/ipv4/fib_multipath_hash_policy", "1"),
                            ("net/ipv6/fib_multipath_hash_policy", "1"),
                            ("net/ipv4/conf/all/ignore_routes_with_linkdown", "1"),
                            ("net/ipv4/conf/default/ignore_routes_with_linkdown", "1"),
                            ("net/ipv6/conf/all/ignore_routes_with_linkdown", "1"),
                            ("net/ipv6/conf/default/ignore_routes_with_linkdown", "1"),
                        ],
                    )?;
                }
            }
            // Leaf–spine links.
            for l in 0..LEAVES {
                for s in 0..spines {
                    let j = spines * l + s;
                    let letter = (b'e' + j as u8) as char;
                    let mac = topology_mac((pid, k), plan.x, 0x48, j);
                    let (leaf_if, spine_if) = veth_to(
                        (pid, k),
                        letter,
                        (&net.routers[l], &net.routers[LEAVES + s]),
                        mac,
                        mtu,
                    )?;
                    for (ns, ifname, end) in [
                        (&net.routers[l], &leaf_if, 1),
                        (&net.routers[LEAVES + s], &spine_if, 2),
                    ] {
                        let v4 = format!("{}/30", plan.link_v4(j, end));
                        let v6 = format!("{}/64", plan.link_v6(j, u16::from(end)));
                        ip_in(ns, &["addr", "add", &v4, "dev", ifname])?;
                        ip_in(ns, &["-6", "addr", "add", &v6, "dev", ifname, "nodad"])?;
                        ip_in(ns, &["link", "set", ifname, "up"])?;
                    }
                    net.links.push((leaf_if, spine_if));
                }
            }
            // Hosts under their leaves.
            for i in 0..LEAVES * hosts_per_leaf {
                let l = i / hosts_per_leaf;
                let ns = format!("oxt-{pid}-{k}-h{i}");
                new_netns(&ns)?;
                created.push(ns.clone());
                no_dad_in(&ns)?;
                let letter = (b'a' + i as u8) as char;
                let mac = topology_mac((pid, k), plan.x, 0x40, i);
                let (ifname, port) = veth_to((pid, k), letter, (&ns, &net.routers[l]), mac, mtu)?;
                let leaf = &net.routers[l];
                let (gw4, gw6) = (plan.host_v4(i, 30), plan.host_v6(i, 0xfe));
                ip_in(leaf, &["addr", "add", &format!("{gw4}/27"), "dev", &port])?;
                ip_in(
                    leaf,
                    &[
                        "-6",
                        "addr",
                        "add",
                        &format!("{gw6}/64"),
                        "dev",
                        &port,
                        "nodad",
                    ],
                )?;
                ip_in(leaf, &["link", "set", &port, "up"])?;
                let mut host = Host::new(
                    ns,
                    ifname,
                    (plan.host_v4(i, 1), plan.host_v6(i, 1)),
                    mac,
                    mtu,
                );
                host.prefix4 = 27;
                configure(&host)?;
                host.ip(&["route", "add", "default", "via", &gw4.to_string()])?;
                host.ip(&["-6", "route", "add", "default", "via", &gw6.to_string()])?;
                net.hosts.push(host);
            }
            // Routes to every host's subnets: spines through its leaf,
            // the other leaf through every spine.
            for s in 0..spines {
                net.spine_routes(s)?;
            }
            for i in 0..LEAVES * hosts_per_leaf {
                let home = i / hosts_per_leaf;
                let (v4, v6) = (
                    format!("{}/27", plan.host_v4(i, 0)),
                    format!("{}/64", plan.host_v6(i, 0)),
                );
                for l in (0..LEAVES).filter(|&l| l != home) {
                    let hops4: Vec<String> = (0..spines)
                        .map(|s| plan.link_v4(spines * l + s, 2).to_string())
                        .collect();
                    let hops6: Vec<String> = (0..spines)
                        .map(|s| plan.link_v6(spines * l + s, 2).to_string())
                        .collect();
                    for (fam, dst, hops) in [("-4", &v4, &hops4), ("-6", &v6, &hops6)] {
                        let mut args = vec![fam, "route", "add", dst.as_str()];
                        for h in hops {
                            args.extend(["nexthop", "via", h.as_str()]);
                        }
                        ip_in(&net.routers[l], &args)?;
                    }
                }
            }
            for h in &net.hosts {
                crate::wait_running(h)?;
            }
            Ok(())
        })();
        if let Err(e) = r {
            delete_netns(&created);
            net.hosts.clear();
            net.routers.clear();
            return Err(e);
        }
        Ok(net)
    }

    /// The leaf host `i` is under (0 or 1).
    pub fn leaf_of(&self, i: usize) -> usize {
        i / self.hosts_per_leaf
    }

    /// The number of spines.
    pub fn spines(&self) -> usize {
        self.spines
    }

    /// Spine `s`'s namespace (`0..spines()`).
    pub fn spine_netns(&self, s: usize) -> Option<&str> {
        (s < self.spines).then(|| self.routers.get(LEAVES + s).map(String::as_str))?
    }

    /// Leaf `l`'s interface on its link to spine `s` (in
    /// [`LeafSpine::leaf_netns`]).
    pub fn uplink(&self, l: usize, s: usize) -> Option<&str> {
        self.link(l, s).map(|(leaf_if, _)| leaf_if.as_str())
    }

    /// The leaf ↔ spine link `(l, s)`: its leaf end, its spine end.
    fn link(&self, l: usize, s: usize) -> Option<&(String, String)> {
        (l < LEAVES && s < self.spines)
            .then(|| self.links.get(self.spines * l + s))
            .flatten()
    }

    /// Limits every leaf ↔ spine link to `rate_bit_s` bits per second each
    /// way, with room to queue `queue`'s worth of the rate (at least 16
    /// full frames) before dropping: a token bucket (`tc-tbf(8)`) on the
    /// egress of both ends, whose bucket holds a millisecond of the rate
    /// (at least two frames). Replaces a shaping set before.
    pub fn shape(&self, rate_bit_s: u64, queue: Duration) -> io::Result<()> {
        let bytes_per_s = rate_bit_s / 8;
        let frame = u64::from(self.hosts.first().map_or(1500, Host::mtu)) + 14;
        let burst = (bytes_per_s / 1000).max(2 * frame);
        let limit = ((bytes_per_s as f64 * queue.as_secs_f64()) as u64).max(16 * frame);
        let (rate, burst, limit) = (
            format!("{rate_bit_s}bit"),
            burst.to_string(),
            limit.to_string(),
        );
        for (j, (leaf_if, spine_if)) in self.links.iter().enumerate() {
            let (l, s) = (j / self.spines, j % self.spines);
            for (ns, dev) in [
                (&self.routers[l], leaf_if),
                (&self.routers[LEAVES + s], spine_if),
            ] {
                tc_in(
                    ns,
                    &[
                        "qdisc", "replace", "dev", dev, "root", "tbf", "rate", &rate, "burst",
                        &burst, "limit", &limit,
                    ],
                )?;
            }
        }
        Ok(())
    }

    /// Fails spine `s`: its ports go down, so both leaves' ends of its
    /// links lose their carrier and the leaves route around it (their ECMP
    /// routes skip next hops on links without carrier).
    pub fn spine_down(&self, s: usize) -> io::Result<()> {
        self.set_spine(s, "down")
    }

    /// Brings spine `s` back after [`LeafSpine::spine_down`]: its links'
    /// next hops rejoin the leaves' ECMP routes.
    pub fn spine_up(&self, s: usize) -> io::Result<()> {
        self.set_spine(s, "up")
    }

    /// Spine `s`'s routes to every host's subnets, through the host's
    /// leaf: set when the fabric is made, and again when the spine comes
    /// back up (a link going down takes the routes through it along).
    fn spine_routes(&self, s: usize) -> io::Result<()> {
        let plan = Plan { x: self.x };
        let spine = &self.routers[LEAVES + s];
        for i in 0..self.hosts.len() {
            let j = self.spines * self.leaf_of(i) + s;
            let (v4, v6) = (
                format!("{}/27", plan.host_v4(i, 0)),
                format!("{}/64", plan.host_v6(i, 0)),
            );
            let (via4, via6) = (
                plan.link_v4(j, 1).to_string(),
                plan.link_v6(j, 1).to_string(),
            );
            ip_in(spine, &["route", "replace", &v4, "via", &via4])?;
            ip_in(spine, &["-6", "route", "replace", &v6, "via", &via6])?;
        }
        Ok(())
    }

    fn set_spine(&self, s: usize, state: &str) -> io::Result<()> {
        let ns = self.spine_netns(s).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("no spine {s} of {}", self.spines),
            )
        })?;
        for l in 0..LEAVES {
            if let Some((_, spine_if)) = self.link(l, s) {
                ip_in(ns, &["link", "set", spine_if, state])?;
            }
        }
        if state == "up" {
            self.spine_routes(s)?;
        }
        // The leaves learn of the carrier change a linkwatch round later:
        // wait until their routes show it, so traffic sent after this
        // returns takes the new paths.
        let down = state == "down";
        let start = Instant::now();
        for l in 0..LEAVES {
            let (Some(leaf), Some(uplink)) = (self.leaf_netns(l), self.uplink(l, s)) else {
                continue;
            };
            while !routes_show(leaf, uplink, down)? {
                if start.elapsed() > ROUTE_CHANGE_TIMEOUT {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "{leaf}: routes over {uplink} not {state} after {ROUTE_CHANGE_TIMEOUT:?}"
                        ),
                    ));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        Ok(())
    }

    /// Packets leaf `l` sent so far on its link to each spine, in spine
    /// order: what its hosts sent across the fabric, by the spine the ECMP
    /// hash chose.
    pub fn uplink_tx_packets(&self, l: usize) -> io::Result<Vec<u64>> {
        let ns = self
            .leaf_netns(l)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("no leaf {l}")))?;
        // sysfs shows the namespace of whoever mounted it: `ip netns exec`
        // mounts the namespace's own.
        let paths: Vec<String> = (0..self.spines)
            .filter_map(|s| self.uplink(l, s))
            .map(|dev| format!("/sys/class/net/{dev}/statistics/tx_packets"))
            .collect();
        let out = std::process::Command::new(crate::ip_program())
            .args(["netns", "exec", ns, "cat"])
            .args(&paths)
            .output()?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "{ns}: cat tx_packets: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let counts: Vec<u64> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        if counts.len() != self.spines {
            return Err(io::Error::other(format!("{ns}: unreadable tx_packets")));
        }
        Ok(counts)
    }

    /// Leaf `l`'s namespace (0 or 1).
    pub fn leaf_netns(&self, l: usize) -> Option<&str> {
        (l < LEAVES).then(|| self.routers.get(l).map(String::as_str))?
    }

    /// Names of every namespace of the fabric, for checks that they are
    /// gone after drop.
    pub fn netns_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.hosts.iter().map(|h| h.netns().to_owned()).collect();
        v.extend(self.routers.iter().cloned());
        v
    }
}

impl Drop for LeafSpine {
    fn drop(&mut self) {
        if self.routers.is_empty() {
            return;
        }
        delete_netns(&self.netns_names());
    }
}
