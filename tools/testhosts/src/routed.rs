//! Hosts in subnets of their own joined by a router: every host's frames to
//! another host go to the router's MAC, and the router (the kernel's IP
//! forwarding, on in its namespace) forwards them, TTL one less.
//!
//! The router lives in namespace `oxt-<pid>-<n>-r`; host `i` is namespace
//! `oxt-<pid>-<n>-h<i>` with veth `ox<pid>.<n><a+i>`, whose peer
//! `ox<pid>.<n><A+i>` is the router's port for that subnet. Host `i`'s
//! subnets: IPv4 `198.19.<x>.<64 i>/26` (RFC 2544's range, as pairs), the
//! host `.64i+1`, the router `.64i+62`; IPv6
//! `fd6f:6678:6473:<x><i>::/64` (`<x><i>` one 16-bit group), the host
//! `::1`, the router `::fe`. Each host's default routes (both families) are
//! through its router address; the router has only its connected subnets,
//! so nothing leaves the topology.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::{Host, configure, delete_netns, new_netns, next_ids, topology_mac, veth_to};

/// The most hosts behind one router (four /26 subnets in one /24).
pub const MAX_ROUTED_HOSTS: usize = 4;

/// Hosts in their own subnets behind one router. Removed on drop.
#[derive(Debug)]
pub struct Routed {
    /// The hosts, in order; host `i` is alone in its subnets.
    pub hosts: Vec<Host>,
    /// The router's address in each host's subnets, in host order.
    gateways: Vec<(Ipv4Addr, Ipv6Addr)>,
    router_ns: String,
}

impl Routed {
    /// `n` hosts (2..=`MAX_ROUTED_HOSTS`) behind one router, links with
    /// MTU `mtu`.
    pub fn new(n: usize, mtu: u32) -> io::Result<Routed> {
        if !(2..=MAX_ROUTED_HOSTS).contains(&n) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a routed topology has 2..={MAX_ROUTED_HOSTS} hosts, not {n}"),
            ));
        }
        let (pid, k) = next_ids();
        let x = (pid.wrapping_mul(41).wrapping_add(k) % 256) as u8;
        let mut routed = Routed {
            hosts: Vec::new(),
            gateways: Vec::new(),
            router_ns: format!("oxt-{pid}-{k}-r"),
        };
        let mut created = vec![routed.router_ns.clone()];
        let r = (|| {
            new_netns(&routed.router_ns)?;
            let rns = routed.router_ns.clone();
            forward_in(&rns)?;
            for i in 0..n {
                let ns = format!("oxt-{pid}-{k}-h{i}");
                new_netns(&ns)?;
                created.push(ns.clone());
                no_dad_in(&ns)?;
                let letter = (b'a' + i as u8) as char;
                let mac = topology_mac((pid, k), x, 0x30, i);
                let (ifname, port) = veth_to((pid, k), letter, (&ns, &rns), mac, mtu)?;
                let base = 64 * i as u8;
                let group = u16::from(x) << 8 | i as u16;
                let v4 = Ipv4Addr::new(198, 19, x, base + 1);
                let v6 = Ipv6Addr::new(0xfd6f, 0x6678, 0x6473, group, 0, 0, 0, 1);
                let gw4 = Ipv4Addr::new(198, 19, x, base + 62);
                let gw6 = Ipv6Addr::new(0xfd6f, 0x6678, 0x6473, group, 0, 0, 0, 0xfe);
                let r = |args: &[&str]| {
                    let mut all = vec!["-n", rns.as_str()];
                    all.extend_from_slice(args);
                    crate::ip(&all).map(|_| ())
                };
                r(&["addr", "add", &format!("{gw4}/26"), "dev", &port])?;
                r(&[
                    "-6",
                    "addr",
                    "add",
                    &format!("{gw6}/64"),
                    "dev",
                    &port,
                    "nodad",
                ])?;
                r(&["link", "set", &port, "up"])?;
                let mut host = Host::new(ns, ifname, (v4, v6), mac, mtu);
                host.prefix4 = 26;
                configure(&host)?;
                host.ip(&["route", "add", "default", "via", &gw4.to_string()])?;
                host.ip(&["-6", "route", "add", "default", "via", &gw6.to_string()])?;
                routed.hosts.push(host);
                routed.gateways.push((gw4, gw6));
            }
            for h in &routed.hosts {
                crate::wait_running(h)?;
            }
            Ok(())
        })();
        if let Err(e) = r {
            delete_netns(&created);
            routed.hosts.clear();
            routed.router_ns.clear();
            return Err(e);
        }
        Ok(routed)
    }

    /// Host `i`'s router address in `i`'s subnet of `ip`'s family.
    pub fn gateway_of(&self, i: usize, v6: bool) -> Option<IpAddr> {
        self.gateways
            .get(i)
            .map(|&(g4, g6)| if v6 { g6.into() } else { g4.into() })
    }

    /// The router's interface on host `i`'s subnet (in [`Routed::router_netns`]).
    pub fn router_ifname(&self, i: usize) -> Option<String> {
        let h = self.hosts.get(i)?.ifname();
        let (base, letter) = h.split_at(h.len() - 1);
        Some(format!("{base}{}", letter.to_ascii_uppercase()))
    }

    /// The router's namespace.
    pub fn router_netns(&self) -> &str {
        &self.router_ns
    }

    /// Names of every namespace of the topology, for checks that they are
    /// gone after drop.
    pub fn netns_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.hosts.iter().map(|h| h.netns().to_owned()).collect();
        v.push(self.router_ns.clone());
        v
    }
}

impl Drop for Routed {
    fn drop(&mut self) {
        if self.router_ns.is_empty() {
            return;
        }
        delete_netns(&self.netns_names());
    }
}

/// IPv4 and IPv6 forwarding on in namespace `ns`, and [`no_dad_in`].
pub(crate) fn forward_in(ns: &str) -> io::Result<()> {
    no_dad_in(ns)?;
    sysctls_in(
        ns,
        &[
            ("net/ipv4/ip_forward", "1"),
            ("net/ipv6/conf/all/forwarding", "1"),
        ],
    )
}

/// No duplicate address detection on interfaces made in namespace `ns`
/// from now on: their link-local addresses, which neighbour discovery and
/// router answers are sent from, are usable at once (not ~1 s later, when
/// the first datagrams would be dropped); the global ones are added
/// `nodad` anyway.
pub(crate) fn no_dad_in(ns: &str) -> io::Result<()> {
    sysctls_in(
        ns,
        &[
            ("net/ipv6/conf/default/accept_dad", "0"),
            ("net/ipv6/conf/all/accept_dad", "0"),
        ],
    )
}

/// Writes `net.*` sysctls (paths under /proc/sys) of namespace `ns`, from a
/// thread that joined it: /proc/sys/net is the opener's namespace's.
pub(crate) fn sysctls_in(ns: &str, settings: &[(&str, &str)]) -> io::Result<()> {
    std::thread::scope(|s| {
        s.spawn(|| {
            crate::raw::enter_netns(ns)?;
            for (path, value) in settings {
                std::fs::write(format!("/proc/sys/{path}"), value).map_err(|e| {
                    io::Error::new(e.kind(), format!("{ns}: /proc/sys/{path} = {value}: {e}"))
                })?;
            }
            Ok(())
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("sysctl thread panicked")))
    })
}
