//! An RDM endpoint's peers: the table between the addresses datagrams come
//! from or go to and the engine's peer keys (`u32` indices, stable for the
//! endpoint's lifetime), bounded so forged source addresses cannot grow it
//! without limit.

use std::collections::HashMap;
use std::net::SocketAddr;

use crate::addr::XdpAddr;

#[derive(Default)]
pub(super) struct Peers {
    pub(super) addrs: Vec<XdpAddr>,
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
                {
                    e.mac = a.mac;
                }
                k
            }
            None => {
                let k = self.addrs.len() as u32;
                self.addrs.push(*a);
                self.by_sock.insert(sa, k);
                k
            }
        };
        self.last = Some((sa, k));
        k
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
