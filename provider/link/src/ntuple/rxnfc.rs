//! `struct ethtool_rxnfc` and `struct ethtool_rx_flow_spec`
//! (include/uapi/linux/ethtool.h), mirrored, and the one kind of rule we
//! write in them: UDP to one (IP, port) → one receive queue.
//!
//! Field semantics (ethtool.h, "struct ethtool_rx_flow_spec"): `h_u` holds
//! the values to match, `m_u` the mask — set bits are compared, clear bits
//! ignored; `ring_cookie` is the queue (low 32 bits; the VF in bits
//! 32..39, zero for the device itself); `location` is the rule's index in
//! the driver's table, or one of the special `RX_CLS_LOC_*` values on
//! insertion when the driver offers them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// `ETHTOOL_GRXCLSRLCNT`: rule count and table size.
pub(crate) const ETHTOOL_GRXCLSRLCNT: u32 = 0x2e;
/// `ETHTOOL_GRXCLSRULE`: the rule at `fs.location`.
pub(crate) const ETHTOOL_GRXCLSRULE: u32 = 0x2f;
/// `ETHTOOL_GRXCLSRLALL`: the locations of every rule.
pub(crate) const ETHTOOL_GRXCLSRLALL: u32 = 0x30;
/// `ETHTOOL_SRXCLSRLDEL`: delete the rule at `fs.location`.
pub(crate) const ETHTOOL_SRXCLSRLDEL: u32 = 0x31;
/// `ETHTOOL_SRXCLSRLINS`: insert `fs` (at `fs.location`).
pub(crate) const ETHTOOL_SRXCLSRLINS: u32 = 0x32;

/// `UDP_V4_FLOW` / `UDP_V6_FLOW` flow types.
pub(crate) const UDP_V4_FLOW: u32 = 0x02;
pub(crate) const UDP_V6_FLOW: u32 = 0x06;
/// Flags a driver may add to a flow type: `FLOW_EXT`, `FLOW_MAC_EXT`,
/// `FLOW_RSS`.
const FLOW_TYPE_FLAGS: u32 = 0x8000_0000 | 0x4000_0000 | 0x2000_0000;

/// `RX_CLS_LOC_SPECIAL`: in GRXCLSRLCNT's `data`, the driver picks
/// locations itself when asked with `RX_CLS_LOC_ANY`.
pub(crate) const RX_CLS_LOC_SPECIAL: u64 = 0x8000_0000;
/// `RX_CLS_LOC_ANY`: "put it wherever you like" (drivers with
/// `RX_CLS_LOC_SPECIAL` only); the kernel writes back the location chosen.
pub(crate) const RX_CLS_LOC_ANY: u32 = 0xffff_ffff;

/// `struct ethtool_flow_ext` (20 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FlowExt {
    padding: [u8; 2],
    h_dest: [u8; 6],
    vlan_etype: u16,
    vlan_tci: u16,
    data: [u32; 2],
}

/// `union ethtool_flow_union`: 52 bytes; we use its `udp_ip4_spec`
/// (`struct ethtool_tcpip4_spec`) and `udp_ip6_spec`
/// (`struct ethtool_tcpip6_spec`) views, laid out by [`TcpIp`].
pub(crate) type FlowUnion = [u8; 52];

/// `struct ethtool_rx_flow_spec` (168 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FlowSpec {
    pub flow_type: u32,
    pub h_u: FlowUnion,
    pub h_ext: FlowExt,
    pub m_u: FlowUnion,
    pub m_ext: FlowExt,
    pub ring_cookie: u64,
    pub location: u32,
}

impl Default for FlowSpec {
    fn default() -> Self {
        FlowSpec {
            flow_type: 0,
            h_u: [0; 52],
            h_ext: FlowExt::default(),
            m_u: [0; 52],
            m_ext: FlowExt::default(),
            ring_cookie: 0,
            location: 0,
        }
    }
}

/// `struct ethtool_rxnfc` without its trailing `rule_locs[]` (192 bytes;
/// `rule_locs` starts at [`RULE_LOCS_OFFSET`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Rxnfc {
    pub cmd: u32,
    pub flow_type: u32,
    pub data: u64,
    pub fs: FlowSpec,
    /// `rule_cnt` (also `rss_context`: a union).
    pub rule_cnt: u32,
}

/// `offsetof(struct ethtool_rxnfc, rule_locs)`: right after `rule_cnt`,
/// before the struct's tail padding.
pub(crate) const RULE_LOCS_OFFSET: usize = 188;

/// Offsets inside `struct ethtool_tcpip4_spec` / `ethtool_tcpip6_spec`.
struct TcpIp {
    dst_ip: std::ops::Range<usize>,
    dst_port: std::ops::Range<usize>,
}

const TCPIP4: TcpIp = TcpIp {
    // ip4src 0..4, ip4dst 4..8, psrc 8..10, pdst 10..12, tos 12.
    dst_ip: 4..8,
    dst_port: 10..12,
};
const TCPIP6: TcpIp = TcpIp {
    // ip6src 0..16, ip6dst 16..32, psrc 32..34, pdst 34..36, tclass 36.
    dst_ip: 16..32,
    dst_port: 34..36,
};

/// The rule we install: UDP datagrams to `dst` (IP and port) go to receive
/// queue `queue`. Every other field is left unmatched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowRule {
    pub dst: SocketAddr,
    pub queue: u32,
}

impl FlowRule {
    /// The flow spec for this rule at `location`.
    pub(crate) fn to_spec(self, location: u32) -> FlowSpec {
        let mut fs = FlowSpec {
            ring_cookie: u64::from(self.queue),
            location,
            ..FlowSpec::default()
        };
        let (layout, ip): (&TcpIp, Vec<u8>) = match self.dst.ip() {
            IpAddr::V4(a) => {
                fs.flow_type = UDP_V4_FLOW;
                (&TCPIP4, a.octets().to_vec())
            }
            IpAddr::V6(a) => {
                fs.flow_type = UDP_V6_FLOW;
                (&TCPIP6, a.octets().to_vec())
            }
        };
        // Network byte order, as the __be32/__be16 fields are.
        fs.h_u[layout.dst_ip.clone()].copy_from_slice(&ip);
        fs.h_u[layout.dst_port.clone()].copy_from_slice(&self.dst.port().to_be_bytes());
        fs.m_u[layout.dst_ip.clone()].fill(0xff);
        fs.m_u[layout.dst_port.clone()].fill(0xff);
        fs
    }

    /// The rule a spec read back from a driver expresses, when it is one of
    /// ours in shape: UDP over IPv4 or IPv6, the destination IP and port
    /// matched in full, a plain queue as action (no VF, not "drop").
    pub(crate) fn from_spec(fs: &FlowSpec) -> Option<FlowRule> {
        let layout = match fs.flow_type & !FLOW_TYPE_FLAGS {
            UDP_V4_FLOW => &TCPIP4,
            UDP_V6_FLOW => &TCPIP6,
            _ => return None,
        };
        let full = |r: &std::ops::Range<usize>| fs.m_u[r.clone()].iter().all(|b| *b == 0xff);
        if !full(&layout.dst_ip) || !full(&layout.dst_port) {
            return None;
        }
        let queue = u32::try_from(fs.ring_cookie).ok()?;
        let ip_bytes = &fs.h_u[layout.dst_ip.clone()];
        let ip = if fs.flow_type & !FLOW_TYPE_FLAGS == UDP_V4_FLOW {
            let mut a = [0u8; 4];
            a.copy_from_slice(ip_bytes);
            IpAddr::V4(Ipv4Addr::from(a))
        } else {
            let mut a = [0u8; 16];
            a.copy_from_slice(ip_bytes);
            IpAddr::V6(Ipv6Addr::from(a))
        };
        let p = &fs.h_u[layout.dst_port.clone()];
        let port = u16::from_be_bytes([p[0], p[1]]);
        Some(FlowRule {
            dst: SocketAddr::new(ip, port),
            queue,
        })
    }
}

impl std::fmt::Display for FlowRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UDP to {} -> queue {}", self.dst, self.queue)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;

    #[test]
    fn layouts_match_ethtool_h() {
        assert_eq!(size_of::<FlowExt>(), 20);
        assert_eq!(offset_of!(FlowSpec, h_u), 4);
        assert_eq!(offset_of!(FlowSpec, h_ext), 56);
        assert_eq!(offset_of!(FlowSpec, m_u), 76);
        assert_eq!(offset_of!(FlowSpec, m_ext), 128);
        assert_eq!(offset_of!(FlowSpec, ring_cookie), 152);
        assert_eq!(offset_of!(FlowSpec, location), 160);
        assert_eq!(size_of::<FlowSpec>(), 168);
        assert_eq!(offset_of!(Rxnfc, data), 8);
        assert_eq!(offset_of!(Rxnfc, fs), 16);
        assert_eq!(offset_of!(Rxnfc, rule_cnt), 184);
        assert_eq!(RULE_LOCS_OFFSET, offset_of!(Rxnfc, rule_cnt) + 4);
        assert_eq!(size_of::<Rxnfc>(), 192);
    }

    /// The bytes `ethtool -N IF flow-type udp4 dst-ip 198.18.0.1 dst-port
    /// 40213 action 3 loc 1023` hands the kernel, field by field.
    #[test]
    fn ipv4_rule_encodes_as_ethtool_does() {
        let rule = FlowRule {
            dst: "198.18.0.1:40213".parse().unwrap(),
            queue: 3,
        };
        let fs = rule.to_spec(1023);
        assert_eq!(fs.flow_type, UDP_V4_FLOW);
        let mut h = [0u8; 52];
        h[4..8].copy_from_slice(&[198, 18, 0, 1]);
        h[10..12].copy_from_slice(&[0x9d, 0x15]); // 40213 big-endian
        assert_eq!(fs.h_u, h);
        let mut m = [0u8; 52];
        m[4..8].fill(0xff);
        m[10..12].fill(0xff);
        assert_eq!(fs.m_u, m);
        assert_eq!(fs.ring_cookie, 3);
        assert_eq!(fs.location, 1023);
        assert_eq!(fs.h_ext, FlowExt::default());
        assert_eq!(fs.m_ext, FlowExt::default());
        assert_eq!(FlowRule::from_spec(&fs), Some(rule));
    }

    #[test]
    fn ipv6_rule_round_trips() {
        let rule = FlowRule {
            dst: "[fd6f:6678:6470:1::2]:5000".parse().unwrap(),
            queue: 7,
        };
        let fs = rule.to_spec(RX_CLS_LOC_ANY);
        assert_eq!(fs.flow_type, UDP_V6_FLOW);
        assert_eq!(&fs.h_u[16..18], &[0xfd, 0x6f]);
        assert_eq!(&fs.h_u[34..36], &5000u16.to_be_bytes());
        assert!(fs.m_u[..16].iter().all(|b| *b == 0), "source unmatched");
        assert_eq!(FlowRule::from_spec(&fs), Some(rule));
    }

    #[test]
    fn foreign_rules_are_not_ours_in_shape() {
        let rule = FlowRule {
            dst: "10.0.0.1:9".parse().unwrap(),
            queue: 1,
        };
        let mut tcp = rule.to_spec(0);
        tcp.flow_type = 0x01; // TCP_V4_FLOW
        assert_eq!(FlowRule::from_spec(&tcp), None);
        let mut drop = rule.to_spec(0);
        drop.ring_cookie = u64::MAX; // RX_CLS_FLOW_DISC
        assert_eq!(FlowRule::from_spec(&drop), None);
        let mut partial = rule.to_spec(0);
        partial.m_u[11] = 0; // port only partly matched
        assert_eq!(FlowRule::from_spec(&partial), None);
        let mut with_ext = rule.to_spec(0);
        with_ext.flow_type |= 0x8000_0000; // FLOW_EXT set by a driver
        assert_eq!(FlowRule::from_spec(&with_ext), Some(rule));
    }
}
