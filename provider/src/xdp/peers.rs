//! An RDM endpoint's peers: the table between the addresses datagrams come
//! from or go to and the engine's peer keys (`u32` indices, stable for the
//! endpoint's lifetime), bounded so forged source addresses cannot grow it
//! without limit. With each peer its route (`port/route.rs`): decided at
//! its first send and again after the port's routes changed, not per
//! datagram.

use std::collections::HashMap;
use std::net::SocketAddr;

use ofi_xdp_reliability::Engine;
use ofi_xdp_reliability::wire::named_session;

use super::port::{Port, Route};
use crate::abi::Result;
use crate::addr::XdpAddr;

#[derive(Default)]
pub(super) struct Peers {
    pub(super) addrs: Vec<XdpAddr>,
    /// By key: how each peer's datagrams go, as last decided.
    routes: Vec<Route>,
    /// By key: the port's route epoch when the peer's next hop was last
    /// resolved ([`Peers::resolve`]), 0 for never.
    resolved: Vec<u32>,
    /// Keyed by what the network sends us, so the default (keyed SipHash)
    /// hasher: a forged flood cannot pile up in one bucket.
    pub(super) by_sock: HashMap<SocketAddr, u32>,
    /// The last address looked up and its key: traffic comes in runs from
    /// one peer, and a ping-pong has only one; this skips the hashing.
    last: Option<(SocketAddr, u32)>,
}

/// Most source addresses an endpoint remembers: as many peers as the engine
/// takes. Past it, datagrams from new sources are dropped (and counted), so
/// a flood of forged source addresses cannot grow memory without bound.
const MAX_PEER_ADDRS: usize = 1 << 20;

impl Peers {
    /// The key of a datagram's source, or `None` when it is new and the
    /// table is full.
    pub(super) fn key_of_source(&mut self, a: &XdpAddr) -> Option<u32> {
        self.key_within(a, MAX_PEER_ADDRS)
    }

    fn key_within(&mut self, a: &XdpAddr, cap: usize) -> Option<u32> {
        if self.addrs.len() >= cap && !self.by_sock.contains_key(&a.socket_addr()) {
            return None;
        }
        Some(self.key(a))
    }

    pub(super) fn key(&mut self, a: &XdpAddr) -> u32 {
        let sa = a.socket_addr();
        let known = match self.last {
            Some((s, k)) if s == sa => Some(k),
            _ => self.by_sock.get(&sa).copied(),
        };
        let k = match known {
            Some(k) => {
                if let Some(e) = self.addrs.get_mut(k as usize)
                    && e.mac.is_none()
                    && a.mac.is_some()
                {
                    e.mac = a.mac;
                    self.forget_route(k);
                }
                k
            }
            None => {
                let k = self.addrs.len() as u32;
                self.addrs.push(*a);
                self.routes.push(Route::UNDECIDED);
                self.resolved.push(0);
                self.by_sock.insert(sa, k);
                k
            }
        };
        self.last = Some((sa, k));
        k
    }
}

impl Peers {
    /// How datagrams reach peer `k` (`None`: no such peer): its kept route
    /// while that is current, else decided now and kept. Sends update what
    /// the route keeps of where its ring is.
    #[inline]
    pub(super) fn route(&mut self, k: u32, port: &Port) -> Option<&mut Route> {
        let r = self.routes.get_mut(k as usize)?;
        if !port.route_current(r) {
            *r = port.route(self.addrs.get(k as usize)?);
        }
        Some(r)
    }

    /// The MAC its address carries changed: its route is decided again.
    fn forget_route(&mut self, k: u32) {
        if let Some(r) = self.routes.get_mut(k as usize) {
            *r = Route::UNDECIDED;
        }
    }

    /// Makes sure peer `k` can be sent to ([`Port::resolve`]: its next
    /// hop's MAC, resolved the first time, which may wait), and records
    /// the MAC in its address. Done again only once the port's routes
    /// changed since (a send to a known peer costs no lookup here).
    pub(super) fn resolve(&mut self, k: u32, port: &mut Port) -> Result<()> {
        let i = k as usize;
        if self.resolved.get(i) == Some(&port.route_epoch()) {
            return Ok(());
        }
        let Some(a) = self.addrs.get(i).copied() else {
            return Ok(());
        };
        if let Some(mac) = port.resolve(&a)?
            && a.mac != Some(mac)
        {
            self.addrs[i].mac = Some(mac);
            self.forget_route(k);
        }
        self.resolved[i] = port.route_epoch();
        Ok(())
    }
}

/// Who sent a datagram, by the session its header names (PROTOCOL.md
/// §4.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Named {
    /// One of our sessions, with the peer of this key, at the datagram's
    /// source IP address: whatever its source port, the datagram is that
    /// peer's (path entropy varies the port, §4.6).
    Peer(u32),
    /// One of our sessions, but its peer is at another IP address: not
    /// that peer's, and no other peer's session either. Dropped.
    OtherSource,
    /// No session of ours (a HELLO, a stale or unknown id, connection
    /// management): the sender is known by its source address.
    None,
}

/// [`Named`] for a datagram whose first bytes are `first`, from `src`.
/// `addrs` are the peers' addresses by key. O(1): a header read and one
/// lookup of the engine's session index.
#[inline]
pub(super) fn of_session(
    engine: &Engine<u32>,
    addrs: &[XdpAddr],
    first: &[u8],
    src: &XdpAddr,
) -> Named {
    let Some(key) = named_session(first).and_then(|s| engine.peer_of_session(s)) else {
        return Named::None;
    };
    match addrs.get(key as usize) {
        Some(a) if a.ip == src.ip => Named::Peer(key),
        _ => Named::OtherSource,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> XdpAddr {
        XdpAddr {
            ip: std::net::Ipv4Addr::new(10, 0, 0, 1).into(),
            port,
            mac: None,
            incarnation: 0,
        }
    }

    /// Engines A (key 0 for B) and B (key 0 for A) with a session, and
    /// the last datagram A sent B in it (an ACK or DATA naming B's session).
    fn session() -> (Engine<u32>, Vec<u8>) {
        use ofi_xdp_reliability::{
            CompletionLevel, Config, Instant, Payload, RecvBuffers, SendBuffers, SendOp,
        };
        /// Sends read sevens; received bytes go nowhere.
        struct Bytes;
        impl SendBuffers for Bytes {
            fn read(&mut self, _: u64, _: usize, dst: &mut [u8]) {
                dst.fill(7);
            }
        }
        impl RecvBuffers for Bytes {
            fn write(&mut self, _: u64, _: usize, _: &[u8]) {}
        }
        let cfg = |i: u32| Config {
            incarnation: 10 + i,
            seed: u64::from(i),
            any_port: true,
            ..Config::default()
        };
        let (mut a, mut b) = (Engine::<u32>::new(cfg(0)), Engine::<u32>::new(cfg(1)));
        let now = Instant(0);
        let op = SendOp {
            token: 1,
            dst: 0,
            payload: Payload::Buffer { len: 100 },
            tag: None,
            data: None,
            level: CompletionLevel::Transmit,
            fence: false,
        };
        a.post_send(now, op).unwrap();
        let mut frame = vec![0u8; 2048];
        let mut last = Vec::new();
        for _ in 0..4 {
            while let Some(t) = a.poll_transmit(now, &mut frame, &mut Bytes) {
                last = frame[..t.len].to_vec();
                b.handle_datagram(now, 0, &last, &mut Bytes);
            }
            while let Some(t) = b.poll_transmit(now, &mut frame, &mut Bytes) {
                let d = frame[..t.len].to_vec();
                a.handle_datagram(now, 0, &d, &mut Bytes);
            }
        }
        assert!(b.peer_takes_any_port(0), "established");
        (b, last)
    }

    #[test]
    fn a_datagram_naming_a_session_is_its_peers_from_any_port_of_its_ip() {
        let (b, dgram) = session();
        let addrs = [addr(5000)];
        assert_eq!(of_session(&b, &addrs, &dgram, &addr(5000)), Named::Peer(0));
        assert_eq!(of_session(&b, &addrs, &dgram, &addr(50123)), Named::Peer(0));
        let elsewhere = XdpAddr {
            ip: std::net::Ipv4Addr::new(10, 0, 0, 2).into(),
            ..addr(5000)
        };
        assert_eq!(
            of_session(&b, &addrs, &dgram, &elsewhere),
            Named::OtherSource,
            "another IP naming the session is not its peer's"
        );
        // An id that is no session of ours, and a HELLO: by address.
        let mut stale = dgram.clone();
        stale[8..12].copy_from_slice(
            &(u32::from_le_bytes([dgram[8], dgram[9], dgram[10], dgram[11]]) ^ 1).to_le_bytes(),
        );
        assert_eq!(of_session(&b, &addrs, &stale, &addr(5000)), Named::None);
        let mut hello = dgram.clone();
        hello[1] = 1;
        hello[8..12].fill(0);
        assert_eq!(of_session(&b, &addrs, &hello, &addr(5000)), Named::None);
        // Connection management's ids are connections'.
        let mut cm = dgram;
        cm[1] = 24;
        assert_eq!(of_session(&b, &addrs, &cm, &addr(5000)), Named::None);
    }

    #[test]
    fn a_full_address_table_drops_new_sources_only() {
        let mut p = Peers::default();
        assert_eq!(p.key_within(&addr(1), 2), Some(0));
        assert_eq!(p.key_within(&addr(2), 2), Some(1));
        assert_eq!(p.key_within(&addr(3), 2), None, "a new source past the cap");
        assert_eq!(
            p.key_within(&addr(1), 2),
            Some(0),
            "known sources still map"
        );
        assert_eq!(p.addrs.len(), 2);
    }
}
