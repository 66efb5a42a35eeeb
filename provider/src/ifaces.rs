//! Which network interfaces the provider can use, and whether this process
//! has the privileges AF_XDP needs. A domain is one interface.

use std::collections::BTreeMap;
use std::ffi::CStr;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

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

fn prefix_len(mask: &IpAddr) -> u8 {
    match mask {
        IpAddr::V4(m) => u32::from(*m).count_ones() as u8,
        IpAddr::V6(m) => u128::from(*m).count_ones() as u8,
    }
}

/// Read an IP address out of a `struct sockaddr *` (NULL or other family → None).
///
/// # Safety
/// `sa` must be NULL or point to a sockaddr of the size its family implies.
unsafe fn sockaddr_ip(sa: *const libc::sockaddr) -> Option<IpAddr> {
    if sa.is_null() {
        return None;
    }
    // SAFETY: non-NULL sockaddr per caller; family selects the real type.
    unsafe {
        match i32::from((*sa).sa_family) {
            libc::AF_INET => {
                let s = &*(sa as *const libc::sockaddr_in);
                Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr))))
            }
            libc::AF_INET6 => {
                let s = &*(sa as *const libc::sockaddr_in6);
                Some(IpAddr::V6(Ipv6Addr::from(s.sin6_addr.s6_addr)))
            }
            _ => None,
        }
    }
}

fn read_sys(name: &str, file: &str) -> Option<String> {
    std::fs::read_to_string(format!("/sys/class/net/{name}/{file}"))
        .ok()
        .map(|s| s.trim().to_owned())
}

fn count_queues(name: &str) -> usize {
    std::fs::read_dir(format!("/sys/class/net/{name}/queues"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                .count()
        })
        .unwrap_or(1)
        .max(1)
}

/// Every interface of this network namespace (getifaddrs(3)), sorted by name.
pub fn list() -> std::io::Result<Vec<Iface>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head we free below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut map: BTreeMap<String, Iface> = BTreeMap::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` walks the list getifaddrs returned.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string.
        let name = unsafe { CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
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
        let flags = ifa.ifa_flags as i32;
        // Administratively up is what counts, as for libfabric's tcp/udp providers (util's
        // ofi_get_list_of_addr): carrier (IFF_RUNNING) comes and goes with the cable, and a
        // new veth gets it a linkwatch round after `up` — an application starting then would
        // otherwise find no xdp interface at all.
        e.up |= flags & libc::IFF_UP != 0;
        e.loopback |= flags & libc::IFF_LOOPBACK != 0;
        if ifa.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: non-NULL sockaddr from getifaddrs.
        let family = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
        if family == libc::AF_PACKET {
            // SAFETY: AF_PACKET entries carry a sockaddr_ll.
            let ll = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_ll) };
            e.index = ll.sll_ifindex as u32;
            if ll.sll_halen == 6 {
                let mut m = [0u8; 6];
                m.copy_from_slice(&ll.sll_addr[..6]);
                e.mac = Some(m);
            }
        } else {
            // SAFETY: addr/netmask are sockaddrs of the entry's family.
            let (ip, mask) = unsafe { (sockaddr_ip(ifa.ifa_addr), sockaddr_ip(ifa.ifa_netmask)) };
            if let Some(ip) = ip {
                e.addrs
                    .push((ip, mask.as_ref().map(prefix_len).unwrap_or(0)));
            }
        }
    }
    // SAFETY: head came from getifaddrs.
    unsafe { libc::freeifaddrs(head) };
    let mut v: Vec<Iface> = map.into_values().collect();
    for i in &mut v {
        // Global addresses first, IPv4 before IPv6, link-local IPv6 last.
        i.addrs.sort_by_key(|(a, _)| match a {
            IpAddr::V4(_) => 0,
            IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80 => 2,
            IpAddr::V6(_) => 1,
        });
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
