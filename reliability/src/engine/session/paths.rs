//! The session's view of its paths (PROTOCOL.md §4.6, §5.3): with
//! [`crate::Config::paths`] entropy values, each datagram leaves by the
//! next value in turn, passing over values that lost a packet lately, so
//! a path that drops or dies stops carrying the session's datagrams within
//! a retransmission timeout or two. A value is tried again after one RTO,
//! after two if that loses too, and so on up to 32 (a dead path costs ever
//! fewer datagrams); a packet of it delivered forgives it.

use crate::time::{Instant, Nanos};

/// A value that keeps losing is passed over for at most 2^5 RTOs.
const MAX_STRIKES: u8 = 6;

/// Which entropy value the next datagram takes, and which to pass over.
#[derive(Clone, Debug, Default)]
pub(super) struct PathView {
    /// The value the last datagram took.
    turn: u16,
    /// Per value: something sent by it was lost, so it is passed over
    /// until then. Empty until a loss.
    avoid_until: Vec<Instant>,
    /// Per value: losses since a packet of it was last delivered.
    strikes: Vec<u8>,
}

impl PathView {
    /// The value of the next datagram, of `n`: the next in turn that is
    /// not passed over; if all are, simply the next.
    pub(super) fn next(&mut self, n: u16, now: Instant) -> u16 {
        let n = n.max(1);
        for k in 1..=n {
            let p = (self.turn + k) % n;
            if self
                .avoid_until
                .get(usize::from(p))
                .is_none_or(|&t| t <= now)
            {
                self.turn = p;
                return p;
            }
        }
        self.turn = (self.turn + 1) % n;
        self.turn
    }

    /// A packet that left by value `p` (of `n`) was lost at `now`: pass
    /// over `p` for `rto`, doubled for each loss of it since one of its
    /// packets was last delivered.
    pub(super) fn lost(&mut self, p: u16, n: u16, now: Instant, rto: Nanos) {
        if n <= 1 {
            return;
        }
        let n = usize::from(n);
        if self.avoid_until.len() < n {
            self.avoid_until.resize(n, Instant(0));
            self.strikes.resize(n, 0);
        }
        let p = usize::from(p);
        if let (Some(t), Some(k)) = (self.avoid_until.get_mut(p), self.strikes.get_mut(p)) {
            *k = (*k + 1).min(MAX_STRIKES);
            *t = now + Nanos(rto.0.saturating_mul(1 << (*k - 1)));
        }
    }

    /// A packet that left by value `p` was delivered: its losses are forgiven.
    #[inline]
    pub(super) fn delivered(&mut self, p: u16) {
        if let Some(k) = self.strikes.get_mut(usize::from(p)) {
            *k = 0;
        }
    }
}
