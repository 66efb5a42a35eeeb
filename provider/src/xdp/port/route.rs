//! Per-peer routes: which way a peer's datagrams go — its ring in shared
//! memory, AF_XDP frames to its next hop's MAC, or the kernel UDP socket,
//! and whether large transfers may take the bulk path — decided once
//! ([`Port::route`]) and kept with the peer (an RDM endpoint keeps them in
//! `xdp/peers.rs`), so a send reads its route instead of deciding again.
//!
//! A kept route holds until something it was decided from changes: a next
//! hop re-checked to another router or MAC (`hops.rs`), a hop or MAC
//! resolved for a newly addressed peer ([`Port::resolve`]), a MAC learnt
//! from a frame ([`Port::learn`]) or found in the neighbour table for a
//! peer that had none, or (the keeper's part) the MAC its address carries.
//! Each change here moves the port's route epoch on, and a route of an
//! older epoch is decided again when it is next used
//! ([`Port::route_current`]). A shared-memory route keeps where its ring
//! is in our table of local peers, found at its first send (a hint the
//! table checks by address). What can change per datagram is checked by
//! what the route points to: the shared-memory path sends through the
//! kernel socket while a local peer's area is not open (not yet, or gone
//! with a restarted peer, reopened by name), and a peer awaiting its MAC
//! asks the neighbour table every [`NEIGHBOUR_RETRY`] sends.

use std::time::{Duration, Instant};

use ofi_xdp_link::LinkError;

use super::Port;
use super::hops::{Hop, Hops};
use crate::abi::{Errno, Result};
use crate::addr::XdpAddr;
use crate::sys::*;
use crate::xdp_warn;

/// Sends through the kernel socket to a peer without a known MAC, each
/// this many, look the neighbour table up again (a netlink dump).
const NEIGHBOUR_RETRY: u32 = 64;

/// The way a peer's datagrams go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Way {
    /// A peer on this host, through its ring in our shared-memory path;
    /// `ring`: where its entry in our table of local peers was last found
    /// (`local/peers.rs`; checked by address, looked up when wrong).
    SharedMemory { ring: usize },
    /// Another host, through AF_XDP, in frames to `mac`: its next hop's.
    Xsk { mac: [u8; 6] },
    /// Through the kernel UDP socket: a peer on this host without the
    /// shared-memory path, any peer without AF_XDP, or (`awaiting_mac`)
    /// one on another host whose next hop's MAC is not known yet (the
    /// kernel resolves it meanwhile).
    Kernel { awaiting_mac: bool },
}

/// A peer's route as decided in one epoch of its port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    pub way: Way,
    /// Segments of large transfers may go to the peer's bulk port
    /// (`bulk.rs`): it is on another host and we have the bulk path.
    pub bulk: bool,
    epoch: u32,
}

impl Route {
    /// Not decided yet: current in no epoch (the port's start at 1).
    pub const UNDECIDED: Route = Route {
        way: Way::Kernel {
            awaiting_mac: false,
        },
        bulk: false,
        epoch: 0,
    };

    /// Whether the peer is reached through shared memory (whether its area
    /// is open yet or not).
    #[inline]
    pub fn by_shm(&self) -> bool {
        matches!(self.way, Way::SharedMemory { .. })
    }
}

/// The epoch after `e`: never 0, which no port is in
/// ([`Route::UNDECIDED`]'s).
fn next_epoch(e: u32) -> u32 {
    e.wrapping_add(1).max(1)
}

impl Port {
    /// Decides how datagrams reach `to` now.
    pub fn route(&self, to: &XdpAddr) -> Route {
        let local = self.is_local(&to.ip);
        let way = if local && self.local.is_some() {
            Way::SharedMemory { ring: usize::MAX }
        } else if local || self.xsk.is_none() {
            Way::Kernel {
                awaiting_mac: false,
            }
        } else {
            match self.frame_mac(to) {
                Some(mac) => Way::Xsk { mac },
                None => Way::Kernel { awaiting_mac: true },
            }
        };
        Route {
            way,
            bulk: !local && self.bulk.is_some(),
            epoch: self.route_epoch,
        }
    }

    /// Whether `r` is still what [`Port::route`] would decide (nothing it
    /// was decided from changed since).
    #[inline]
    pub fn route_current(&self, r: &Route) -> bool {
        r.epoch == self.route_epoch
    }

    /// The port's route epoch: it moves on whenever a route may have changed.
    #[inline]
    pub fn route_epoch(&self) -> u32 {
        self.route_epoch
    }

    /// Something routes are decided from changed: every kept route is
    /// decided again at its next use.
    fn routes_changed(&mut self) {
        self.route_epoch = next_epoch(self.route_epoch);
    }

    /// Remember a peer's MAC (from a received frame).
    pub fn learn(&mut self, a: &XdpAddr) {
        if let Some(mac) = a.mac {
            let sa = a.socket_addr();
            let new = !self.macs.contains_key(&sa);
            self.macs.entry(sa).or_insert(mac);
            self.unresolved.remove(&sa);
            if new {
                self.routes_changed();
            }
        }
    }

    /// Make sure `a` can be sent to: a same-host peer (kernel path) needs
    /// nothing; others need their next hop's MAC (`port/hops.rs`): the
    /// route to `a` is looked up the first time its IP is addressed, and
    /// the MAC is the router's, or on the link `a`'s own — given, learnt,
    /// or the neighbour table's (resolving it, which may take up to a
    /// second). Returns the MAC when one is known.
    pub fn resolve(&mut self, a: &XdpAddr) -> Result<Option<[u8; 6]>> {
        if self.xsk.is_none() || self.is_local(&a.ip) {
            return Ok(None);
        }
        if let Some(hop) = self.hops.get(&a.ip) {
            return Ok(self.frame_mac(a).or(hop.mac));
        }
        let sa = a.socket_addr();
        let Some(x) = self.xsk.as_mut() else {
            return Ok(None);
        };
        let unreachable = |e: LinkError| {
            xdp_warn!(FI_LOG_EP_DATA, "no MAC for {sa}: {e}");
            Errno(FI_EHOSTUNREACH)
        };
        // No route through our interface: taken to be on the link, as
        // before routes were asked (its frames go to its own MAC).
        let via = x.link.next_hop(a.ip).unwrap_or_else(|e| {
            crate::xdp_info!(FI_LOG_EP_DATA, "{sa}: {e}: addressed as on the link");
            a.ip
        });
        let known = if via == a.ip {
            a.mac.or_else(|| self.macs.get(&sa).copied())
        } else {
            None
        };
        let mac = match known {
            Some(mac) => mac,
            None => x
                .link
                .resolve_neighbour(via, Duration::from_secs(1))
                .map_err(unreachable)?,
        };
        if via == a.ip {
            self.macs.insert(sa, mac);
        }
        self.hops.set(
            a.ip,
            Hop {
                via,
                mac: Some(mac),
            },
        );
        self.routes_changed();
        Ok(Some(mac))
    }

    /// For a peer awaiting its MAC ([`Way::Kernel`] `awaiting_mac`): the
    /// MAC if the neighbour table has it by now (route and table asked
    /// every [`NEIGHBOUR_RETRY`] sends, never waited for), and the route
    /// moves to AF_XDP.
    pub(super) fn mac_found(&mut self, to: &XdpAddr) -> Option<[u8; 6]> {
        let sa = to.socket_addr();
        let tries = self.unresolved.entry(sa).or_insert(0);
        *tries = tries.wrapping_add(1);
        if *tries % NEIGHBOUR_RETRY != 1 {
            return None;
        }
        let found = self
            .xsk
            .as_ref()
            .and_then(|x| Hops::look_up(&x.link, to.ip).ok());
        match found {
            Some(hop @ Hop { mac: Some(mac), .. }) => {
                self.unresolved.remove(&sa);
                if hop.via == to.ip {
                    self.macs.insert(sa, mac);
                }
                self.hops.set(to.ip, hop);
                self.routes_changed();
                self.frame_mac(to)
            }
            _ => None,
        }
    }

    /// The MAC an AF_XDP frame to `to` carries: its next hop's once some
    /// hop is a router or changed ([`Hops::steering`]), else the one its
    /// address carries or a learnt one (on one segment: the peer's own).
    fn frame_mac(&self, to: &XdpAddr) -> Option<[u8; 6]> {
        if self.hops.steering()
            && let Some(hop) = self.hops.get(&to.ip)
        {
            return hop.mac;
        }
        to.mac.or_else(|| self.macs.get(&to.socket_addr()).copied())
    }

    /// Re-check a batch of next hops (`port/hops.rs`) if one is due:
    /// `urgent` when a retransmission timer fired (the way to a peer may
    /// have changed), else at most once a second.
    pub fn recheck_routes(&mut self, urgent: bool) {
        let now = Instant::now();
        let changed = match &self.xsk {
            Some(x) if self.hops.due(now, urgent) => self.hops.recheck(&x.link, now),
            _ => false,
        };
        if changed {
            self.routes_changed();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_move_on_and_never_come_back_to_undecided() {
        assert_eq!(next_epoch(1), 2);
        assert_eq!(next_epoch(u32::MAX), 1, "0 is no port's epoch");
        assert_ne!(next_epoch(u32::MAX), Route::UNDECIDED.epoch);
        assert!(!Route::UNDECIDED.by_shm());
        let shm = Route {
            way: Way::SharedMemory { ring: 0 },
            bulk: false,
            epoch: 1,
        };
        assert!(shm.by_shm());
    }
}
