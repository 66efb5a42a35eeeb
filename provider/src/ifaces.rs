//! Which network interfaces the provider can use, and whether this process
//! has the privileges AF_XDP needs. A domain is one interface.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ofi_xdp_link::{IfAddrKind, addr_rank, if_addrs};

/// One usable (or candidate) interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Iface {
    pub name: String,
    pub index: u32,
    pub mac: Option<[u8; 6]>,
    pub mtu: usize,
    pub up: bool,
    pub loopback: bool,
    /// Addresses with their prefix length; link-local IPv6 last.
    pub addrs: Vec<(IpAddr, u8)>,
    /// Number of RX queues (one AF_XDP socket per queue).
    pub queues: usize,
}

impl Iface {
    /// up, not loopback, has an Ethernet address and an IP address.
    pub fn usable(&self) -> bool {
        self.up && !self.loopback && self.mac.is_some() && !self.addrs.is_empty()
    }

    /// Preferred local IP for `family` (4 or 6), global before link-local.
    pub fn ip(&self, want_v6: Option<bool>) -> Option<IpAddr> {
        self.addrs
            .iter()
            .map(|(a, _)| *a)
            .find(|a| want_v6.is_none_or(|v6| a.is_ipv6() == v6))
    }

    pub fn has_ip(&self, ip: &IpAddr) -> bool {
        self.addrs.iter().any(|(a, _)| a == ip)
    }

    /// Is `ip` on one of this interface's subnets (reachable without a router)?
    pub fn on_link(&self, ip: &IpAddr) -> bool {
        self.addrs.iter().any(|(a, p)| same_subnet(a, ip, *p))
    }
}

fn same_subnet(a: &IpAddr, b: &IpAddr, prefix: u8) -> bool {
    match (a, b) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            let m = if prefix == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(prefix.min(32)))
            };
            u32::from(*a) & m == u32::from(*b) & m
        }
        (IpAddr::V6(a), IpAddr::V6(b)) => {
            let m = if prefix == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(prefix.min(128)))
            };
            u128::from(*a) & m == u128::from(*b) & m
        }
        _ => false,
    }
}

fn read_sys(name: &str, file: &str) -> Option<String> {
    std::fs::read_to_string(format!("/sys/class/net/{name}/{file}"))
        .ok()
        .map(|s| s.trim().to_owned())
}

/// Receive queues, as the driver reports them (`ETHTOOL_GCHANNELS`, in the
/// calling thread's network namespace: `/sys` shows whoever mounted it).
fn count_queues(name: &str) -> usize {
    ofi_xdp_link::ethtool::rx_queue_count(name).map_or(1, |n| n as usize)
}

/// Every interface of this network namespace (getifaddrs(3), through the link crate's one
/// walk of it), sorted by name.
pub fn list() -> std::io::Result<Vec<Iface>> {
    let mut map: BTreeMap<String, Iface> = BTreeMap::new();
    for entry in if_addrs()? {
        let name = entry.name;
        let e = map.entry(name.clone()).or_insert_with(|| Iface {
            index: 0,
            mac: None,
            mtu: read_sys(&name, "mtu")
                .and_then(|s| s.parse().ok())
                .unwrap_or(1500),
            up: false,
            loopback: false,
            addrs: Vec::new(),
            queues: count_queues(&name),
            name: name.clone(),
        });
        let flags = entry.flags as i32;
        // Administratively up is what counts, as for libfabric's tcp/udp providers (util's
        // ofi_get_list_of_addr): carrier (IFF_RUNNING) comes and goes with the cable, and a
        // new veth gets it a linkwatch round after `up` — an application starting then would
        // otherwise find no xdp interface at all.
        e.up |= flags & libc::IFF_UP != 0;
        e.loopback |= flags & libc::IFF_LOOPBACK != 0;
        match entry.kind {
            IfAddrKind::Link { index, mac } => {
                e.index = index;
                e.mac = mac;
            }
            IfAddrKind::Ip { addr, prefix } => e.addrs.push((addr, prefix)),
            IfAddrKind::Other => {}
        }
    }
    let mut v: Vec<Iface> = map.into_values().collect();
    for i in &mut v {
        i.addrs.sort_by_key(|(a, _)| addr_rank(a));
        if i.index == 0 {
            let c = crate::params::cstring(&i.name);
            // SAFETY: valid NUL-terminated name.
            i.index = unsafe { libc::if_nametoindex(c.as_ptr()) };
        }
    }
    Ok(v)
}

const CAP_NET_ADMIN: u32 = 12;
const CAP_NET_RAW: u32 = 13;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_BPF: u32 = 39;

/// AF_XDP needs CAP_NET_RAW (the socket), CAP_NET_ADMIN (attaching XDP)
/// and CAP_BPF or CAP_SYS_ADMIN (loading the program). `Err` says what is
/// missing, for the log line getinfo prints when it returns nothing.
pub fn check_privileges() -> Result<(), String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("cannot read /proc/self/status: {e}"))?;
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        .ok_or("no CapEff line in /proc/self/status")?;
    let has = |c: u32| eff & (1u64 << c) != 0;
    let mut missing = Vec::new();
    if !has(CAP_NET_RAW) {
        missing.push("CAP_NET_RAW");
    }
    if !has(CAP_NET_ADMIN) {
        missing.push("CAP_NET_ADMIN");
    }
    if !has(CAP_BPF) && !has(CAP_SYS_ADMIN) {
        missing.push("CAP_BPF (or CAP_SYS_ADMIN)");
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("missing capabilities: {}", missing.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subnets() {
        let a: IpAddr = "10.1.0.1".parse().unwrap();
        assert!(same_subnet(&a, &"10.1.255.3".parse().unwrap(), 16));
        assert!(!same_subnet(&a, &"10.2.0.1".parse().unwrap(), 16));
        let b: IpAddr = "fd00::1".parse().unwrap();
        assert!(same_subnet(&b, &"fd00::ffff".parse().unwrap(), 64));
        assert!(!same_subnet(&a, &b, 0));
    }

    #[test]
    fn lists_loopback_as_unusable() {
        let l = list().unwrap();
        if let Some(lo) = l.iter().find(|i| i.name == "lo") {
            assert!(lo.loopback && !lo.usable());
        }
    }
}
