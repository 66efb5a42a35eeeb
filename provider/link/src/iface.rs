//! Interface facts (index, MAC, MTU, addresses) and the kernel neighbour
//! table (peer MACs), read through the calling thread's network namespace.
//!
//! Everything here goes through sockets and ioctls rather than `/sys` or
//! `/proc`: those show the namespace of whoever mounted them, not the
//! namespace of the thread asking.

use std::ffi::CString;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use netlink_packet_core::{
    NLM_F_DUMP, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload,
};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::protocols::NETLINK_ROUTE;

use crate::wire::MacAddr;

/// What we need to know about the local interface.
#[derive(Clone, Debug)]
pub struct IfaceInfo {
    /// Interface name.
    pub name: String,
    /// Kernel interface index.
    pub index: u32,
    /// Hardware address.
    pub mac: MacAddr,
    /// MTU (IP packet size limit, Ethernet header excluded).
    pub mtu: u32,
    /// Addresses configured on it (IPv4 first, then IPv6 global, then
    /// IPv6 link-local).
    pub addrs: Vec<IpAddr>,
}

const SIOCGIFMTU: libc::c_ulong = 0x8921;
const SIOCGIFHWADDR: libc::c_ulong = 0x8927;

/// `struct ifreq`: a 16-byte name and a 24-byte union (linux/if.h).
#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    data: [u8; 24],
}

pub(crate) fn dgram_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket call, result checked.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn ifreq_ioctl(name: &str, req: libc::c_ulong) -> io::Result<[u8; 24]> {
    let sock = dgram_socket()?;
    let mut ifr = IfReq {
        name: [0; libc::IFNAMSIZ],
        data: [0; 24],
    };
    let bytes = name.as_bytes();
    if bytes.len() >= libc::IFNAMSIZ {
        return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
    }
    ifr.name[..bytes.len()].copy_from_slice(bytes);
    // SAFETY: `ifr` is a properly sized ifreq for these two requests.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), req, &mut ifr as *mut IfReq) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(ifr.data)
}

/// Reads index, MAC, MTU and addresses of `name` in the current namespace.
pub fn iface_info(name: &str) -> io::Result<IfaceInfo> {
    let cname = CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: valid C string.
    let index = unsafe { libc::if_nametoindex(cname.as_ptr()) };
    if index == 0 {
        return Err(io::Error::last_os_error());
    }
    // SIOCGIFHWADDR fills a `struct sockaddr`: family (2 bytes), then the MAC.
    let hw = ifreq_ioctl(name, SIOCGIFHWADDR)?;
    let mut mac = [0u8; 6];
    mac.copy_from_slice(&hw[2..8]);
    let m = ifreq_ioctl(name, SIOCGIFMTU)?;
    let mtu = u32::from_ne_bytes([m[0], m[1], m[2], m[3]]);
    let addrs = iface_addrs(name)?;
    Ok(IfaceInfo {
        name: name.to_owned(),
        index,
        mac,
        mtu,
        addrs,
    })
}

/// One entry of getifaddrs(3), decoded. An interface appears once with its link-layer entry
/// (`AF_PACKET`) and once per IP address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IfAddr {
    /// Interface name.
    pub name: String,
    /// `IFF_*` flags of the interface.
    pub flags: u32,
    /// What this entry says about it.
    pub kind: IfAddrKind,
}

/// The payload of one [`IfAddr`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IfAddrKind {
    /// The link-layer entry: interface index and, for Ethernet, the MAC.
    Link { index: u32, mac: Option<MacAddr> },
    /// An IPv4/IPv6 address with the prefix length of its netmask.
    Ip { addr: IpAddr, prefix: u8 },
    /// No address, or a family we do not use.
    Other,
}

/// Every entry of getifaddrs(3) in the calling thread's network namespace, in the kernel's
/// order. The one walk of that list: `iface_info` and the provider's interface listing
/// both read it from here.
pub fn if_addrs() -> io::Result<Vec<IfAddr>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates a list we free below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: NUL-terminated name from the kernel.
        let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: addr/netmask are NULL or sockaddrs of the family they declare.
        let kind = unsafe { decode_entry(ifa.ifa_addr, ifa.ifa_netmask) };
        out.push(IfAddr {
            name,
            flags: ifa.ifa_flags,
            kind,
        });
    }
    // SAFETY: frees the list allocated above exactly once.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

/// # Safety
/// `addr` and `mask` must each be NULL or point to a sockaddr of the size its family implies.
unsafe fn decode_entry(addr: *const libc::sockaddr, mask: *const libc::sockaddr) -> IfAddrKind {
    if addr.is_null() {
        return IfAddrKind::Other;
    }
    // SAFETY: non-NULL per the caller; the family selects the real type.
    unsafe {
        if i32::from((*addr).sa_family) == libc::AF_PACKET {
            let ll = &*addr.cast::<libc::sockaddr_ll>();
            let mac = (ll.sll_halen == 6).then(|| {
                let mut m = [0u8; 6];
                m.copy_from_slice(&ll.sll_addr[..6]);
                m
            });
            return IfAddrKind::Link {
                index: ll.sll_ifindex as u32,
                mac,
            };
        }
        match sockaddr_ip(addr) {
            Some(ip) => IfAddrKind::Ip {
                addr: ip,
                prefix: sockaddr_ip(mask).map_or(0, |m| prefix_len(&m)),
            },
            None => IfAddrKind::Other,
        }
    }
}

/// Read an IP address out of a `struct sockaddr *` (NULL or another family → None).
///
/// # Safety
/// `sa` must be NULL or point to a sockaddr of the size its family implies.
unsafe fn sockaddr_ip(sa: *const libc::sockaddr) -> Option<IpAddr> {
    if sa.is_null() {
        return None;
    }
    // SAFETY: non-NULL sockaddr per the caller; the family selects the real type.
    unsafe {
        match i32::from((*sa).sa_family) {
            libc::AF_INET => {
                let s = &*sa.cast::<libc::sockaddr_in>();
                Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr))))
            }
            libc::AF_INET6 => {
                let s = &*sa.cast::<libc::sockaddr_in6>();
                Some(IpAddr::V6(Ipv6Addr::from(s.sin6_addr.s6_addr)))
            }
            _ => None,
        }
    }
}

/// Prefix length of a netmask (its set bits).
fn prefix_len(mask: &IpAddr) -> u8 {
    match mask {
        IpAddr::V4(m) => u32::from(*m).count_ones() as u8,
        IpAddr::V6(m) => u128::from(*m).count_ones() as u8,
    }
}

/// Preference of a local address as a source: IPv4 first, then global IPv6, then link-local
/// IPv6 last (it needs a scope id). Sort by this key, stably.
pub fn addr_rank(ip: &IpAddr) -> u8 {
    match ip {
        IpAddr::V4(_) => 0,
        IpAddr::V6(v6) if v6.is_unicast_link_local() => 2,
        IpAddr::V6(_) => 1,
    }
}

/// The addresses of interface `name`, in [`addr_rank`] order.
fn iface_addrs(name: &str) -> io::Result<Vec<IpAddr>> {
    let mut addrs: Vec<IpAddr> = if_addrs()?
        .into_iter()
        .filter(|e| e.name == name)
        .filter_map(|e| match e.kind {
            IfAddrKind::Ip { addr, .. } => Some(addr),
            _ => None,
        })
        .collect();
    addrs.sort_by_key(addr_rank);
    Ok(addrs)
}

// ---- neighbour table over rtnetlink (rtnetlink(7), RTM_GETNEIGH) ----

/// Looks up `ip` on interface `ifindex` in the kernel neighbour table: one
/// RTM_GETNEIGH dump of the address family, messages built and parsed by
/// `netlink-packet-route`. Called when a peer's MAC is first needed, not per
/// datagram (the provider keeps the MACs it learns).
pub(crate) fn neighbour_lookup(ifindex: u32, ip: IpAddr) -> io::Result<Option<MacAddr>> {
    let sock = netlink_sys::Socket::new(NETLINK_ROUTE)?;
    let mut query = NeighbourMessage::default();
    query.header.family = if ip.is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    };
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | NLM_F_DUMP;
    header.sequence_number = 1;
    let mut req = NetlinkMessage::new(
        header,
        NetlinkPayload::from(RouteNetlinkMessage::GetNeighbour(query)),
    );
    req.finalize();
    let mut out = vec![0u8; req.buffer_len()];
    req.serialize(&mut out);
    sock.send(&out, 0)?;

    let mut buf = vec![0u8; 32 * 1024];
    let mut found = None;
    loop {
        let n = sock.recv(&mut &mut buf[..], 0)?;
        if n == 0 {
            return Ok(found);
        }
        let mut msgs = &buf[..n];
        while !msgs.is_empty() {
            let msg = NetlinkMessage::<RouteNetlinkMessage>::deserialize(msgs)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
            let len = msg.header.length as usize;
            match msg.payload {
                NetlinkPayload::Done(_) => return Ok(found),
                NetlinkPayload::Error(e) => return Err(e.to_io()),
                NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewNeighbour(m))
                    if found.is_none() =>
                {
                    found = usable_entry(&m, ifindex, ip);
                }
                _ => {}
            }
            // Messages are 4-byte aligned (NLMSG_ALIGN); a zero length
            // would never advance.
            let next = len.next_multiple_of(4);
            if len == 0 || next >= msgs.len() {
                break;
            }
            msgs = &msgs[next..];
        }
    }
}

/// The MAC of a neighbour entry for `ip` on `ifindex` whose state says the
/// link address is valid (linux/neighbour.h: REACHABLE, STALE, DELAY, PROBE,
/// NOARP, PERMANENT).
fn usable_entry(m: &NeighbourMessage, ifindex: u32, ip: IpAddr) -> Option<MacAddr> {
    let valid = matches!(
        m.header.state,
        NeighbourState::Reachable
            | NeighbourState::Stale
            | NeighbourState::Delay
            | NeighbourState::Probe
            | NeighbourState::Noarp
            | NeighbourState::Permanent
    );
    if m.header.ifindex != ifindex || !valid {
        return None;
    }
    let mut dst = None;
    let mut mac = None;
    for a in &m.attributes {
        match a {
            NeighbourAttribute::Destination(NeighbourAddress::Inet(v4)) => dst = Some((*v4).into()),
            NeighbourAttribute::Destination(NeighbourAddress::Inet6(v6)) => {
                dst = Some((*v6).into())
            }
            NeighbourAttribute::LinkLayerAddress(b) => mac = MacAddr::try_from(&b[..]).ok(),
            _ => {}
        }
    }
    if dst == Some(ip) { mac } else { None }
}

/// Returns the MAC of `ip` on `iface`, asking the kernel to resolve it when
/// the neighbour table has no usable entry: a one-byte kernel UDP datagram
/// to the peer's discard port (9) makes the kernel send ARP / neighbour
/// solicitation; then the table is re-read until `timeout`.
pub fn resolve_mac(iface: &IfaceInfo, ip: IpAddr, timeout: Duration) -> io::Result<MacAddr> {
    if let Some(mac) = neighbour_lookup(iface.index, ip)? {
        return Ok(mac);
    }
    let deadline = Instant::now() + timeout;
    let mut next_probe = Instant::now();
    loop {
        let now = Instant::now();
        if now >= next_probe {
            probe(iface, ip)?;
            next_probe = now + Duration::from_millis(200);
        }
        std::thread::sleep(Duration::from_millis(2));
        if let Some(mac) = neighbour_lookup(iface.index, ip)? {
            return Ok(mac);
        }
        if Instant::now() >= deadline {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "no neighbour entry for {ip} on {} after {timeout:?}: is the peer up and \
                     reachable on that interface?",
                    iface.name
                ),
            ));
        }
    }
}

fn probe(iface: &IfaceInfo, ip: IpAddr) -> io::Result<()> {
    let bind: SocketAddr = match ip {
        IpAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        IpAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let sock = UdpSocket::bind(bind)?;
    let name = iface.name.as_bytes();
    // SAFETY: SO_BINDTODEVICE with the interface name bytes.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_BINDTODEVICE,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let to: SocketAddr = match ip {
        IpAddr::V4(v4) => (v4, 9).into(),
        IpAddr::V6(v6) => std::net::SocketAddrV6::new(v6, 9, 0, iface.index).into(),
    };
    // An error here (e.g. EHOSTUNREACH from an earlier failed resolution) is
    // not fatal: the table read after it decides.
    let _ = sock.send_to(&[0], to);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_info() {
        let lo = iface_info("lo").unwrap();
        assert_eq!(lo.mac, [0; 6]);
        assert!(lo.mtu >= 1500);
        assert!(lo.index > 0);
    }

    #[test]
    fn if_addrs_decodes_loopback_with_prefix() {
        let lo: Vec<IfAddr> = if_addrs()
            .unwrap()
            .into_iter()
            .filter(|e| e.name == "lo")
            .collect();
        assert!(lo.iter().all(|e| e.flags & libc::IFF_LOOPBACK as u32 != 0));
        assert!(
            lo.iter()
                .any(|e| matches!(e.kind, IfAddrKind::Link { index, .. } if index > 0))
        );
        let v4 = IfAddrKind::Ip {
            addr: IpAddr::V4(Ipv4Addr::LOCALHOST),
            prefix: 8,
        };
        assert!(lo.iter().any(|e| e.kind == v4), "{lo:?}");
    }

    #[test]
    fn addresses_rank_v4_then_global_v6_then_link_local() {
        let mut addrs: Vec<IpAddr> = ["fe80::1", "fd00::1", "10.0.0.1", "fe80::2", "10.0.0.2"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        addrs.sort_by_key(addr_rank);
        let want: Vec<IpAddr> = ["10.0.0.1", "10.0.0.2", "fd00::1", "fe80::1", "fe80::2"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        assert_eq!(addrs, want);
    }

    #[test]
    fn missing_interface_is_an_error() {
        let e = iface_info("no-such-if0").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENODEV));
    }

    #[test]
    fn neighbour_entries_need_interface_address_and_a_valid_state() {
        let ip: IpAddr = "10.0.0.2".parse().unwrap();
        let mut m = NeighbourMessage::default();
        m.header.ifindex = 3;
        m.header.state = NeighbourState::Stale;
        m.attributes = vec![
            NeighbourAttribute::Destination(NeighbourAddress::Inet("10.0.0.2".parse().unwrap())),
            NeighbourAttribute::LinkLayerAddress(vec![2, 0, 0, 0, 0, 9]),
        ];
        assert_eq!(usable_entry(&m, 3, ip), Some([2, 0, 0, 0, 0, 9]));
        assert_eq!(usable_entry(&m, 4, ip), None, "another interface");
        assert_eq!(usable_entry(&m, 3, "10.0.0.3".parse().unwrap()), None);
        m.header.state = NeighbourState::Failed;
        assert_eq!(usable_entry(&m, 3, ip), None, "no valid link address");
    }

    #[test]
    fn neighbour_dump_parses() {
        // Reads the real table; absence of an entry must be Ok(None).
        let lo = iface_info("lo").unwrap();
        assert_eq!(
            neighbour_lookup(lo.index, "192.0.2.77".parse().unwrap()).unwrap(),
            None
        );
    }
}
