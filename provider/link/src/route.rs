//! Which interface and next hop the kernel would send a datagram to a
//! destination through: one `RTM_GETROUTE` request for that address, as
//! `ip route get` makes (rtnetlink(7)), in the calling thread's network
//! namespace. A frame we build ourselves is addressed to the next hop's MAC
//! (the gateway's, or the destination's own when it is on the link), read
//! from the neighbour table; its IP header keeps the destination's address.

use std::io;
use std::net::IpAddr;

use netlink_packet_core::{NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteMessage, RouteType, RouteVia,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::protocols::NETLINK_ROUTE;

/// The kernel's route to one destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// The output interface's index.
    pub oif: u32,
    /// The router the datagram is handed to; `None` when the destination is
    /// on the link (or is this host).
    pub gateway: Option<IpAddr>,
    /// The source address the kernel would pick, if it said.
    pub pref_src: Option<IpAddr>,
}

impl Route {
    /// Whose MAC a frame to `dst` carries: the gateway's, else `dst`'s own.
    pub fn next_hop(&self, dst: IpAddr) -> IpAddr {
        self.gateway.unwrap_or(dst)
    }
}

/// The route to `dst` (`ip route get <dst>`). A destination the kernel
/// cannot route to is an error: `ENETUNREACH` / `EHOSTUNREACH` (no route,
/// an `unreachable` route), `EINVAL` / `EACCES` for `blackhole` /
/// `prohibit` routes — the kernel's own answers, as `ip` shows them.
pub fn route_get(dst: IpAddr) -> io::Result<Route> {
    let sock = netlink_sys::Socket::new(NETLINK_ROUTE)?;
    let mut query = RouteMessage::default();
    let (family, bits) = match dst {
        IpAddr::V4(_) => (AddressFamily::Inet, 32),
        IpAddr::V6(_) => (AddressFamily::Inet6, 128),
    };
    query.header.address_family = family;
    query.header.destination_prefix_length = bits;
    query
        .attributes
        .push(RouteAttribute::Destination(RouteAddress::from(dst)));
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST;
    header.sequence_number = 1;
    let mut req = NetlinkMessage::new(
        header,
        NetlinkPayload::from(RouteNetlinkMessage::GetRoute(query)),
    );
    req.finalize();
    let mut out = vec![0u8; req.buffer_len()];
    req.serialize(&mut out);
    sock.send(&out, 0)?;

    let mut buf = vec![0u8; 8 * 1024];
    loop {
        let n = sock.recv(&mut &mut buf[..], 0)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "RTM_GETROUTE: no answer",
            ));
        }
        let msg = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&buf[..n])
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        match msg.payload {
            NetlinkPayload::Error(e) => return Err(e.to_io()),
            NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewRoute(m)) => {
                return route_of(&m).ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("RTM_GETROUTE for {dst}: an answer without an output interface"),
                    )
                });
            }
            _ => {}
        }
    }
}

/// What a route answer says about the way out; `None` when it names no
/// output interface. An IPv4 route through an IPv6 router (`via inet6`,
/// RFC 5549) names the router in `RTA_VIA`.
fn route_of(m: &RouteMessage) -> Option<Route> {
    if !matches!(m.header.kind, RouteType::Unicast | RouteType::Local) {
        return None;
    }
    let mut oif = None;
    let mut gateway = None;
    let mut pref_src = None;
    for a in &m.attributes {
        match a {
            RouteAttribute::Oif(i) => oif = Some(*i),
            RouteAttribute::Gateway(g) => gateway = ip_of(g),
            RouteAttribute::Via(RouteVia::Inet(v4)) => gateway = Some((*v4).into()),
            RouteAttribute::Via(RouteVia::Inet6(v6)) => gateway = Some((*v6).into()),
            RouteAttribute::PrefSource(s) => pref_src = ip_of(s),
            _ => {}
        }
    }
    Some(Route {
        oif: oif?,
        gateway,
        pref_src,
    })
}

fn ip_of(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(v4) => Some((*v4).into()),
        RouteAddress::Inet6(v6) => Some((*v6).into()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(attrs: Vec<RouteAttribute>) -> RouteMessage {
        let mut m = RouteMessage::default();
        m.header.kind = RouteType::Unicast;
        m.attributes = attrs;
        m
    }

    #[test]
    fn on_link_answer_has_no_gateway() {
        let m = answer(vec![
            RouteAttribute::Destination(RouteAddress::Inet("10.0.0.2".parse().unwrap())),
            RouteAttribute::Oif(3),
            RouteAttribute::PrefSource(RouteAddress::Inet("10.0.0.1".parse().unwrap())),
        ]);
        let r = route_of(&m).unwrap();
        assert_eq!(r.oif, 3);
        assert_eq!(r.gateway, None);
        assert_eq!(r.pref_src, Some("10.0.0.1".parse().unwrap()));
        let dst: IpAddr = "10.0.0.2".parse().unwrap();
        assert_eq!(r.next_hop(dst), dst);
    }

    #[test]
    fn routed_answer_names_the_gateway_as_next_hop() {
        let gw: IpAddr = "fd00::1".parse().unwrap();
        let m = answer(vec![
            RouteAttribute::Gateway(RouteAddress::from(gw)),
            RouteAttribute::Oif(7),
        ]);
        let r = route_of(&m).unwrap();
        assert_eq!(r.next_hop("fd01::9".parse().unwrap()), gw);
        let via = answer(vec![
            RouteAttribute::Via(RouteVia::Inet6("fe80::1".parse().unwrap())),
            RouteAttribute::Oif(7),
        ]);
        assert_eq!(
            route_of(&via).unwrap().gateway,
            Some("fe80::1".parse().unwrap())
        );
    }

    #[test]
    fn answers_without_a_way_out_are_none() {
        assert_eq!(route_of(&answer(vec![])), None, "no output interface");
        let mut m = answer(vec![RouteAttribute::Oif(2)]);
        m.header.kind = RouteType::BlackHole;
        assert_eq!(route_of(&m), None);
    }

    #[test]
    fn loopback_destination_goes_out_of_lo() {
        // The real table: 127.0.0.1 is local in every namespace.
        let lo = crate::iface::iface_info("lo").unwrap();
        let r = route_get("127.0.0.1".parse().unwrap()).unwrap();
        assert_eq!(r.oif, lo.index);
        assert_eq!(r.gateway, None);
    }
}
