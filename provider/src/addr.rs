//! Endpoint addresses.
//!
//! The native format, [`FI_ADDR_XDP`], is what `fi_getname` returns and what
//! a peer needs to reach an endpoint without any lookup: IP address, UDP
//! port, Ethernet MAC and an incarnation number (a fresh random value per
//! endpoint, so a restarted process on the same port is told apart from its
//! predecessor). It is 32 bytes, byte-exact and endian-fixed:
//!
//! ```text
//! 0  u16 LE magic 0x5844 ("DX")   2  u8 version (1)   3  u8 IP version (4|6)
//! 4  u16 BE UDP port              6  [u8; 6] MAC (all zero: resolve via neighbour table)
//! 12 u32 LE incarnation (0: any)  16 [u8; 16] IP (IPv4 in the first 4 bytes)
//! ```
//!
//! `struct sockaddr_in` / `sockaddr_in6` are accepted too (the magic cannot
//! collide with AF_INET = 2 / AF_INET6 = 10 in the first two bytes); their
//! MAC is resolved through the neighbour table when first sending.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::sys::{
    FI_FORMAT_UNSPEC, FI_PROV_SPECIFIC, FI_SOCKADDR, FI_SOCKADDR_IN, FI_SOCKADDR_IN6,
};

/// Provider-specific address format code (FI_PROV_SPECIFIC | "XD").
pub const FI_ADDR_XDP: u32 = FI_PROV_SPECIFIC | 0x5844;
/// Size of an [`XdpAddr`] on the wire and in `fi_getname`.
pub const XDP_ADDR_LEN: usize = 32;
const MAGIC: u16 = 0x5844;
const VERSION: u8 = 1;
const SOCKADDR_IN_LEN: usize = size_of::<libc::sockaddr_in>();
const SOCKADDR_IN6_LEN: usize = size_of::<libc::sockaddr_in6>();

/// A decoded endpoint address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct XdpAddr {
    pub ip: IpAddr,
    pub port: u16,
    /// `None` until known (sockaddr input): resolve via the neighbour table.
    pub mac: Option<[u8; 6]>,
    /// 0 = unknown (sockaddr input): matches any incarnation.
    pub incarnation: u32,
}

impl XdpAddr {
    pub fn from_socket(sa: SocketAddr) -> XdpAddr {
        XdpAddr {
            ip: sa.ip(),
            port: sa.port(),
            mac: None,
            incarnation: 0,
        }
    }

    pub fn socket_addr(&self) -> SocketAddr {
        SocketAddr::new(self.ip, self.port)
    }

    pub fn to_bytes(&self) -> [u8; XDP_ADDR_LEN] {
        let mut b = [0u8; XDP_ADDR_LEN];
        b[0..2].copy_from_slice(&MAGIC.to_le_bytes());
        b[2] = VERSION;
        b[4..6].copy_from_slice(&self.port.to_be_bytes());
        b[6..12].copy_from_slice(&self.mac.unwrap_or([0; 6]));
        b[12..16].copy_from_slice(&self.incarnation.to_le_bytes());
        match self.ip {
            IpAddr::V4(v4) => {
                b[3] = 4;
                b[16..20].copy_from_slice(&v4.octets());
            }
            IpAddr::V6(v6) => {
                b[3] = 6;
                b[16..32].copy_from_slice(&v6.octets());
            }
        }
        b
    }

    /// Decode the native format; `None` if `b` is not one.
    pub fn from_bytes(b: &[u8]) -> Option<XdpAddr> {
        if b.len() < XDP_ADDR_LEN || u16::from_le_bytes([b[0], b[1]]) != MAGIC || b[2] != VERSION {
            return None;
        }
        let ip = match b[3] {
            4 => IpAddr::V4(Ipv4Addr::new(b[16], b[17], b[18], b[19])),
            6 => {
                let mut o = [0u8; 16];
                o.copy_from_slice(&b[16..32]);
                IpAddr::V6(Ipv6Addr::from(o))
            }
            _ => return None,
        };
        let mut mac = [0u8; 6];
        mac.copy_from_slice(&b[6..12]);
        Some(XdpAddr {
            ip,
            port: u16::from_be_bytes([b[4], b[5]]),
            mac: (mac != [0; 6]).then_some(mac),
            incarnation: u32::from_le_bytes([b[12], b[13], b[14], b[15]]),
        })
    }
}

impl fmt::Display for XdpAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fi_addr_xdp://{}", self.socket_addr())?;
        if let Some(m) = self.mac {
            write!(
                f,
                "/{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
                m[0], m[1], m[2], m[3], m[4], m[5]
            )?;
        } else {
            write!(f, "/-")?;
        }
        write!(f, "/{:08x}", self.incarnation)
    }
}

/// The address formats an endpoint/AV can be opened with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddrFormat {
    Xdp,
    SockaddrIn,
    SockaddrIn6,
    /// FI_SOCKADDR: `struct sockaddr` of either family.
    Sockaddr,
}

impl AddrFormat {
    pub fn from_code(code: u32) -> Option<AddrFormat> {
        match code {
            FI_ADDR_XDP => Some(AddrFormat::Xdp),
            FI_SOCKADDR_IN => Some(AddrFormat::SockaddrIn),
            FI_SOCKADDR_IN6 => Some(AddrFormat::SockaddrIn6),
            FI_SOCKADDR => Some(AddrFormat::Sockaddr),
            _ => None,
        }
    }

    pub fn code(self) -> u32 {
        match self {
            AddrFormat::Xdp => FI_ADDR_XDP,
            AddrFormat::SockaddrIn => FI_SOCKADDR_IN,
            AddrFormat::SockaddrIn6 => FI_SOCKADDR_IN6,
            AddrFormat::Sockaddr => FI_SOCKADDR,
        }
    }

    /// Can an address of this IP family be expressed in this format?
    pub fn fits(self, ip: &IpAddr) -> bool {
        match self {
            AddrFormat::SockaddrIn => ip.is_ipv4(),
            AddrFormat::SockaddrIn6 => ip.is_ipv6(),
            AddrFormat::Xdp | AddrFormat::Sockaddr => true,
        }
    }

    /// Encode `a` in this format (the caller checked [`AddrFormat::fits`]).
    pub fn encode(self, a: &XdpAddr) -> Vec<u8> {
        match self {
            AddrFormat::Xdp => a.to_bytes().to_vec(),
            AddrFormat::SockaddrIn | AddrFormat::SockaddrIn6 | AddrFormat::Sockaddr => {
                encode_sockaddr(&a.socket_addr())
            }
        }
    }
}

/// FI_FORMAT_UNSPEC from hints means "provider's choice": ours.
pub fn format_for_hint(code: u32) -> Option<AddrFormat> {
    if code == FI_FORMAT_UNSPEC {
        Some(AddrFormat::Xdp)
    } else {
        AddrFormat::from_code(code)
    }
}

pub fn encode_sockaddr(sa: &SocketAddr) -> Vec<u8> {
    match sa {
        SocketAddr::V4(v4) => {
            let mut s: libc::sockaddr_in = unsafe_zeroed_in();
            s.sin_family = libc::AF_INET as libc::sa_family_t;
            s.sin_port = v4.port().to_be();
            s.sin_addr.s_addr = u32::from_ne_bytes(v4.ip().octets());
            // SAFETY: sockaddr_in is plain old data.
            unsafe {
                std::slice::from_raw_parts(
                    (&s as *const libc::sockaddr_in).cast::<u8>(),
                    SOCKADDR_IN_LEN,
                )
            }
            .to_vec()
        }
        SocketAddr::V6(v6) => {
            let mut s: libc::sockaddr_in6 = unsafe_zeroed_in6();
            s.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            s.sin6_port = v6.port().to_be();
            s.sin6_addr.s6_addr = v6.ip().octets();
            s.sin6_flowinfo = v6.flowinfo();
            s.sin6_scope_id = v6.scope_id();
            // SAFETY: sockaddr_in6 is plain old data.
            unsafe {
                std::slice::from_raw_parts(
                    (&s as *const libc::sockaddr_in6).cast::<u8>(),
                    SOCKADDR_IN6_LEN,
                )
            }
            .to_vec()
        }
    }
}

fn unsafe_zeroed_in() -> libc::sockaddr_in {
    // SAFETY: all-zero is a valid sockaddr_in.
    unsafe { std::mem::zeroed() }
}
fn unsafe_zeroed_in6() -> libc::sockaddr_in6 {
    // SAFETY: all-zero is a valid sockaddr_in6.
    unsafe { std::mem::zeroed() }
}

/// Decode one address at the start of `b`, in any accepted format.
/// Returns the address and how many bytes it occupied.
pub fn decode_any(b: &[u8]) -> Option<(XdpAddr, usize)> {
    if let Some(a) = XdpAddr::from_bytes(b) {
        return Some((a, XDP_ADDR_LEN));
    }
    if b.len() < 2 {
        return None;
    }
    let family = i32::from(u16::from_ne_bytes([b[0], b[1]]));
    if family == libc::AF_INET && b.len() >= SOCKADDR_IN_LEN {
        let port = u16::from_be_bytes([b[2], b[3]]);
        let ip = Ipv4Addr::new(b[4], b[5], b[6], b[7]);
        return Some((
            XdpAddr::from_socket(SocketAddr::new(IpAddr::V4(ip), port)),
            SOCKADDR_IN_LEN,
        ));
    }
    if family == libc::AF_INET6 && b.len() >= SOCKADDR_IN6_LEN {
        let port = u16::from_be_bytes([b[2], b[3]]);
        let mut o = [0u8; 16];
        o.copy_from_slice(&b[8..24]);
        return Some((
            XdpAddr::from_socket(SocketAddr::new(IpAddr::V6(Ipv6Addr::from(o)), port)),
            SOCKADDR_IN6_LEN,
        ));
    }
    None
}

/// The size of one address of format `fmt` as stored at `b` (for walking
/// an array passed to fi_av_insert), or `None` if `b` is not decodable.
pub fn addr_len_hint(fmt: AddrFormat) -> usize {
    match fmt {
        AddrFormat::Xdp => XDP_ADDR_LEN,
        AddrFormat::SockaddrIn => SOCKADDR_IN_LEN,
        AddrFormat::SockaddrIn6 | AddrFormat::Sockaddr => SOCKADDR_IN6_LEN,
    }
}

/// Parse `node`/`service` the way the udp and tcp providers do: `node` an
/// IP literal or host name, `service` a decimal UDP port.
pub fn resolve(
    node: Option<&str>,
    service: Option<&str>,
    numeric_only: bool,
) -> Option<SocketAddr> {
    let port = match service {
        Some(s) => s.trim().parse::<u16>().ok()?,
        None => 0,
    };
    let Some(node) = node else {
        return Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port));
    };
    if let Ok(ip) = node.parse::<IpAddr>() {
        return Some(SocketAddr::new(ip, port));
    }
    if numeric_only {
        return None;
    }
    use std::net::ToSocketAddrs;
    (node, port).to_socket_addrs().ok()?.next()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_roundtrip_v4_and_v6() {
        for ip in [
            "10.1.2.3".parse::<IpAddr>().unwrap(),
            "fd00::7".parse().unwrap(),
        ] {
            let a = XdpAddr {
                ip,
                port: 4791,
                mac: Some([2, 0, 0, 0, 0, 9]),
                incarnation: 0xdead_beef,
            };
            let b = a.to_bytes();
            assert_eq!(XdpAddr::from_bytes(&b), Some(a));
            assert_eq!(decode_any(&b), Some((a, XDP_ADDR_LEN)));
        }
    }

    #[test]
    fn sockaddr_roundtrip() {
        for s in ["10.0.0.1:5000", "[fd00::1]:6000"] {
            let sa: SocketAddr = s.parse().unwrap();
            let bytes = encode_sockaddr(&sa);
            let (a, n) = decode_any(&bytes).unwrap();
            assert_eq!(n, bytes.len());
            assert_eq!(a.socket_addr(), sa);
            assert_eq!(a.mac, None);
        }
    }

    #[test]
    fn garbage_is_refused() {
        assert_eq!(decode_any(&[0xff; 40]), None);
        assert_eq!(decode_any(&[1]), None);
        assert_eq!(XdpAddr::from_bytes(&[0x44, 0x58, 1, 5, 0, 0]), None);
    }

    #[test]
    fn resolve_numeric() {
        assert_eq!(
            resolve(Some("10.0.0.2"), Some("77"), true),
            Some("10.0.0.2:77".parse().unwrap())
        );
        assert_eq!(
            resolve(None, Some("9"), true),
            Some("0.0.0.0:9".parse().unwrap())
        );
        assert_eq!(resolve(Some("not-an-ip"), None, true), None);
        assert_eq!(resolve(Some("10.0.0.2"), Some("port"), true), None);
    }
}
