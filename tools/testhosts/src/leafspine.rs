//! A leaf–spine fabric: two leaf routers, each with its hosts in subnets
//! of their own, and two spine routers joined to both leaves. A leaf
//! reaches the other leaf's hosts through either spine: one route with two
//! next hops (kernel ECMP), hashed per flow on addresses and UDP/TCP ports
//! (`fib_multipath_hash_policy=1`), so different flows between two hosts
//! may cross different spines. Host ↔ host: leaf, spine, leaf (TTL three
//! less).
//!
//! Namespaces `oxt-<pid>-<n>-h<i>` (hosts), `-l0`, `-l1` (leaves), `-s0`,
//! `-s1` (spines). Host `i` (under leaf `i / hosts_per_leaf`): veth
//! `ox<pid>.<n><a+i>` to its leaf's port `…<A+i>`; IPv4
//! `198.19.<x>.<32 i>/27` (the host `+1`, the leaf `+30`), IPv6
//! `fd6f:6678:6474:<x><i>::/64` (the host `::1`, the leaf `::fe`), default
//! routes through the leaf. Leaf `l` ↔ spine `s` (link `j = 2l + s`): veth
//! `…<e+j>` (leaf) / `…<E+j>` (spine), IPv4 `198.19.<x>.<128 + 4j>/30`
//! (leaf `+1`, spine `+2`), IPv6 `fd6f:6678:6474:<x><80+j>::/64` (leaf
//! `::1`, spine `::2`). Routers know only these subnets: nothing leaves.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::routed::{forward_in, no_dad_in, sysctls_in};
use crate::{Host, configure, delete_netns, new_netns, next_ids, topology_mac, veth_to};

/// The most hosts under one leaf.
pub const MAX_HOSTS_PER_LEAF: usize = 2;
const LEAVES: usize = 2;
const SPINES: usize = 2;

/// Hosts under two leaves joined by two spines. Removed on drop.
#[derive(Debug)]
pub struct LeafSpine {
    /// The hosts: those of leaf 0, then those of leaf 1.
    pub hosts: Vec<Host>,
    hosts_per_leaf: usize,
    /// Leaves, then spines.
    routers: Vec<String>,
}

/// Addresses of one topology (`x`: its byte in 198.19.x.0/24).
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
        if !(1..=MAX_HOSTS_PER_LEAF).contains(&hosts_per_leaf) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a leaf takes 1..={MAX_HOSTS_PER_LEAF} hosts here, not {hosts_per_leaf}"),
            ));
        }
        let (pid, k) = next_ids();
        let plan = Plan {
            x: (pid.wrapping_mul(43).wrapping_add(k) % 256) as u8,
        };
        let routers: Vec<String> = ["l0", "l1", "s0", "s1"]
            .iter()
            .map(|r| format!("oxt-{pid}-{k}-{r}"))
            .collect();
        let mut net = LeafSpine {
            hosts: Vec::new(),
            hosts_per_leaf,
            routers,
        };
        let mut created = Vec::new();
        let r = (|| {
            for (i, r) in net.routers.iter().enumerate() {
                new_netns(r)?;
                created.push(r.clone());
                forward_in(r)?;
                if i < LEAVES {
                    // Hash flows on their ports too (an L4 hash), so two
                    // flows between the same hosts can take both spines.
                    sysctls_in(
                        r,
                        &[
                            ("net/ipv4/fib_multipath_hash_policy", "1"),
                            ("net/ipv6/fib_multipath_hash_policy", "1"),
                        ],
                    )?;
                }
            }
            // Leaf–spine links.
            for l in 0..LEAVES {
                for s in 0..SPINES {
                    let j = 2 * l + s;
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
            // the other leaf through both spines.
            for i in 0..LEAVES * hosts_per_leaf {
                let home = i / hosts_per_leaf;
                let (v4, v6) = (
                    format!("{}/27", plan.host_v4(i, 0)),
                    format!("{}/64", plan.host_v6(i, 0)),
                );
                for s in 0..SPINES {
                    let j = 2 * home + s;
                    let spine = &net.routers[LEAVES + s];
                    ip_in(
                        spine,
                        &["route", "add", &v4, "via", &plan.link_v4(j, 1).to_string()],
                    )?;
                    ip_in(
                        spine,
                        &[
                            "-6",
                            "route",
                            "add",
                            &v6,
                            "via",
                            &plan.link_v6(j, 1).to_string(),
                        ],
                    )?;
                }
                for l in (0..LEAVES).filter(|&l| l != home) {
                    let hops4: Vec<String> = (0..SPINES)
                        .map(|s| plan.link_v4(2 * l + s, 2).to_string())
                        .collect();
                    let hops6: Vec<String> = (0..SPINES)
                        .map(|s| plan.link_v6(2 * l + s, 2).to_string())
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

    /// Spine `s`'s namespace (0 or 1).
    pub fn spine_netns(&self, s: usize) -> Option<&str> {
        (s < SPINES).then(|| self.routers.get(LEAVES + s).map(String::as_str))?
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
