//! The window a receiver grants each peer (PROTOCOL.md §12.1): its receive
//! capacity (`Config::rx_capacity`, the datagrams its ring holds) shared
//! equally among the peers sending to it now, so that an incast of many
//! senders never has more in flight than the receiver can take — the
//! receiver-driven credit of EQDS (NSDI 2022), carried in the `window` field
//! every ack already has.
//!
//! "Now" is counted in epochs of [`EPOCH`]: a peer is active if DATA came
//! from it in this epoch or the last one. Epochs are long against a round
//! trip because a receiver sharing its CPU is descheduled for milliseconds:
//! with 1 ms epochs, a receiver coming back after a pause counted only the
//! peers of its first batch and granted them too much (8 senders through a
//! bridge on 2 cores: 1.9 % of datagrams retransmitted; 0.04–0.4 % with 5 ms).

use crate::time::{Instant, Nanos};

/// Length of an epoch of the active-sender count.
pub(crate) const EPOCH: Nanos = Nanos::from_millis(5);
/// The smallest window granted.
const MIN_GRANT: usize = 2;

/// Which peers send to this endpoint: counts per epoch.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RxShare {
    epoch: u32,
    started: Instant,
    current: u32,
    previous: u32,
}

impl RxShare {
    /// DATA arrived from a peer whose last epoch with data was `*seen`.
    #[inline]
    pub(crate) fn note(&mut self, now: Instant, seen: &mut u32) {
        if now.since(self.started) >= EPOCH {
            let two = now.since(self.started) >= Nanos(2 * EPOCH.0);
            self.previous = if two { 0 } else { self.current };
            self.current = 0;
            self.epoch = self.epoch.wrapping_add(1 + u32::from(two));
            self.started = now;
        }
        // Epoch numbers start at 1 for sessions (0: never seen).
        let e = self.epoch.wrapping_add(1);
        if *seen != e {
            *seen = e;
            self.current += 1;
        }
    }

    /// Peers sending now (at least 1).
    #[inline]
    pub(crate) fn active(&self) -> u32 {
        self.current.max(self.previous).max(1)
    }

    /// The window to grant each of them, out of `capacity` datagrams and
    /// at most `max`.
    #[inline]
    pub(crate) fn grant(&self, capacity: usize, max: u16) -> u16 {
        let share = capacity / self.active() as usize;
        share.clamp(MIN_GRANT, usize::from(max).max(MIN_GRANT)) as u16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_among_senders_of_the_last_two_epochs() {
        let mut s = RxShare::default();
        let mut seen = [0u32; 4];
        let e = EPOCH.0 / 1000;
        let t = |us| Instant(us * 1000);
        for (i, x) in seen.iter_mut().enumerate() {
            s.note(t(10 + i as u64), x);
        }
        assert_eq!(s.active(), 4);
        assert_eq!(s.grant(256, 256), 64);
        // Next epoch: only one still sends; the others count until the
        // epoch after.
        s.note(t(e + 100), &mut seen[0]);
        assert_eq!(s.active(), 4);
        s.note(t(2 * e + 200), &mut seen[0]);
        assert_eq!(s.active(), 1);
        assert_eq!(s.grant(256, 256), 256);
        assert_eq!(s.grant(256, 100), 100);
        // A long pause forgets everyone.
        s.note(t(9 * e), &mut seen[1]);
        assert_eq!(s.active(), 1);
    }
}
