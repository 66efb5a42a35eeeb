//! Next hops: whose MAC an AF_XDP frame to a remote IP carries (what a
//! peer's route, `route.rs`, is decided from). The kernel's
//! route to the IP (`Link::next_hop`, `RTM_GETROUTE`) names the gateway, or
//! the IP itself when it is on the link; the neighbour table gives that
//! hop's MAC. Resolved when a peer is first addressed (`Port::resolve`),
//! kept per IP, and re-checked a batch at a time ([`Hops::recheck`]): soon
//! after the engine's retransmission timer fired (the old way may be gone),
//! and every second otherwise — never per datagram.
//!
//! While every hop is the destination itself and none changed, a send uses
//! the MAC its address carries, as resolved (no lookup here per datagram);
//! once a hop is a router or changed, sends take the MAC from here
//! ([`Hops::steering`]).

use std::cell::Cell;
use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use ofi_xdp_link::{Link, LinkError};

use crate::sys::FI_LOG_EP_DATA;

/// Re-checks after a retransmission timeout are at least this far apart.
const URGENT_EVERY: Duration = Duration::from_millis(100);
/// Re-checks with no timeout seen are at least this far apart.
const PERIODIC_EVERY: Duration = Duration::from_secs(1);
/// Hops re-checked per re-check (two netlink requests each): a host with
/// many remote peers spreads them over several.
const BATCH: usize = 64;

/// How frames reach one remote IP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Hop {
    /// The next hop: a gateway, or the destination itself.
    pub via: IpAddr,
    /// Its MAC; `None` until the neighbour table has it (the kernel socket
    /// carries datagrams meanwhile and so makes the kernel resolve it).
    pub mac: Option<[u8; 6]>,
}

#[derive(Default)]
pub(super) struct Hops {
    by_ip: HashMap<IpAddr, Hop>,
    /// The last IP looked up and its hop: a send's lookup is then a
    /// comparison while traffic goes to one peer at a time (emptied when a
    /// hop changes).
    last: Cell<Option<(IpAddr, Hop)>>,
    /// Some hop is a router or changed since it was resolved: the MAC a
    /// peer's address carries may not be its frames' any more.
    steering: bool,
    last_check: Option<Instant>,
    /// Where the next batch of [`Hops::recheck`] starts.
    cursor: usize,
}

impl Hops {
    /// Whether sends must take their MAC from [`Hops::get`].
    #[inline]
    pub fn steering(&self) -> bool {
        self.steering
    }

    #[inline]
    pub fn get(&self, ip: &IpAddr) -> Option<Hop> {
        if let Some((last, hop)) = self.last.get()
            && last == *ip
        {
            return Some(hop);
        }
        let hop = self.by_ip.get(ip).copied()?;
        self.last.set(Some((*ip, hop)));
        Some(hop)
    }

    /// Records `ip`'s hop.
    pub fn set(&mut self, ip: IpAddr, hop: Hop) {
        if hop.via != ip {
            self.steering = true;
        }
        self.last.set(None);
        self.by_ip.insert(ip, hop);
    }

    /// The hop to `ip` as the kernel routes it now, and its MAC if the
    /// neighbour table has it (nothing waited for).
    pub fn look_up(link: &Link, ip: IpAddr) -> Result<Hop, LinkError> {
        let via = link.next_hop(ip)?;
        Ok(Hop {
            via,
            mac: link.neighbour(via)?,
        })
    }

    /// Whether a re-check is due: `urgent` after a retransmission timeout.
    pub fn due(&self, now: Instant, urgent: bool) -> bool {
        let every = if urgent { URGENT_EVERY } else { PERIODIC_EVERY };
        !self.by_ip.is_empty()
            && self
                .last_check
                .is_none_or(|t| now.duration_since(t) >= every)
    }

    /// Re-reads the route and the neighbour entry of the next batch of
    /// hops. A new next hop whose MAC is not known yet leaves the IP
    /// without one (kernel socket) until the table has it; an unchanged
    /// one keeps its MAC when the table lost the entry (aged out, or being
    /// re-resolved), since the kernel only drops entries it does not use.
    /// A routed IP whose route is gone goes through the kernel socket; an
    /// IP on the link keeps its MAC without one (as `Port::resolve` takes an
    /// IP without a route through our interface). Returns whether a hop
    /// changed (the routes decided from it are then out of date).
    pub fn recheck(&mut self, link: &Link, now: Instant) -> bool {
        let mut changed = false;
        self.last_check = Some(now);
        if self.cursor >= self.by_ip.len() {
            self.cursor = 0;
        }
        let ips: Vec<IpAddr> = self
            .by_ip
            .keys()
            .skip(self.cursor)
            .take(BATCH)
            .copied()
            .collect();
        self.cursor += ips.len();
        for ip in ips {
            let Some(old) = self.get(&ip) else { continue };
            let new = match Self::look_up(link, ip) {
                Ok(h) if h.via == old.via && h.mac.is_none() => old,
                Ok(h) => h,
                // Addressed as on the link from the start (`Port::resolve`).
                Err(_) if old.via == ip => old,
                Err(e) => {
                    if old.mac.is_some() {
                        crate::xdp_info!(FI_LOG_EP_DATA, "{ip}: {e}: through the kernel socket");
                    }
                    Hop { mac: None, ..old }
                }
            };
            if new != old {
                crate::xdp_info!(
                    FI_LOG_EP_DATA,
                    "{ip}: next hop {} {:?} (was {} {:?})",
                    new.via,
                    new.mac,
                    old.via,
                    old.mac
                );
                self.steering = true;
                self.last.set(None);
                self.by_ip.insert(ip, new);
                changed = true;
            }
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn on_link_hops_leave_sends_to_the_address_mac_a_router_does_not() {
        let mut h = Hops::default();
        let peer = ip("10.0.0.2");
        h.set(
            peer,
            Hop {
                via: peer,
                mac: Some([2, 0, 0, 0, 0, 2]),
            },
        );
        assert!(
            !h.steering(),
            "on the link: the address's MAC is the frame's"
        );
        let far = ip("10.9.0.2");
        let router = Hop {
            via: ip("10.0.0.1"),
            mac: Some([2, 0, 0, 0, 0, 1]),
        };
        h.set(far, router);
        assert!(h.steering());
        assert_eq!(h.get(&far), Some(router));
        assert_eq!(h.get(&ip("10.9.0.3")), None);
    }

    #[test]
    fn the_last_lookup_is_forgotten_when_a_hop_changes() {
        let mut h = Hops::default();
        let far = ip("fd00:9::2");
        let old = Hop {
            via: ip("fd00::1"),
            mac: Some([2, 0, 0, 0, 0, 1]),
        };
        h.set(far, old);
        assert_eq!(h.get(&far), Some(old));
        let new = Hop {
            via: ip("fd00::3"),
            mac: None,
        };
        h.set(far, new);
        assert_eq!(h.get(&far), Some(new));
    }

    #[test]
    fn rechecks_are_due_after_their_interval_and_only_with_hops() {
        let mut h = Hops::default();
        let t0 = Instant::now();
        assert!(!h.due(t0, true), "nothing to re-check");
        let peer = ip("10.0.0.2");
        h.set(
            peer,
            Hop {
                via: peer,
                mac: None,
            },
        );
        assert!(h.due(t0, false), "never checked");
        h.last_check = Some(t0);
        assert!(!h.due(t0 + URGENT_EVERY / 2, true));
        assert!(h.due(t0 + URGENT_EVERY, true));
        assert!(!h.due(t0 + URGENT_EVERY, false));
        assert!(h.due(t0 + PERIODIC_EVERY, false));
    }
}
