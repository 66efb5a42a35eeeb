//! Congestion control of a session's sending half (PROTOCOL.md §12.2): a
//! congestion window, in packets, that the window the receiver grants
//! (§12.1) caps. It grows by slow start, then by one packet per round trip
//! (RFC 5681 §3.1), and shrinks at most once per round trip on each of:
//!
//! - loss, found by selective acks (×0.7, as CUBIC's β, RFC 9438 §4.6) or
//!   by a retransmission timeout (to the minimum, RFC 5681 §3.1);
//! - ECN marks echoed by the receiver (DCTCP, RFC 8257: by α/2, where α is
//!   the moving fraction of marked packets);
//! - delay: an RTT sample above `min_rtt + max(min_rtt, floor)` shrinks it
//!   in proportion to the excess, at most by half (Swift, SIGCOMM 2020).
//!
//! The window is kept in 1/256 packets so that one-packet-per-round-trip
//! growth adds up from per-ack increments.

use crate::wire::seq_diff;

/// Fixed-point scale of the window.
const FP: u64 = 256;
/// The window never shrinks below this many packets.
pub(super) const MIN_CWND: u64 = 2;
/// Packets a new session may send before its first ack (jumbo frames: ≈ 72
/// KB). Measured in the simulated incast (`tests/congestion.rs`): with 16,
/// eight senders' first bursts overflow a 256 KB switch buffer, time out
/// and end up 5× apart; with 8 they stay within 1.3×, and one sender alone
/// reaches the link rate one round trip later.
const INITIAL_CWND: u64 = 8;
/// Loss: the window is multiplied by this (in 1/1024).
const LOSS_BETA: u64 = 717;
/// DCTCP's gain g = 1/16 (RFC 8257 §3.3), α in 1/1024.
const DCTCP_G_SHIFT: u32 = 4;
/// Swift's β: the window shrinks by β × (excess delay / delay), in 1/1024.
const DELAY_BETA: u64 = 820;
/// A delay decrease is at most half the window.
const DELAY_MAX_CUT: u64 = 512;

/// What an ack told the congestion controller.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct AckSignal {
    /// Packets newly acknowledged (cumulatively).
    pub(super) acked: u32,
    /// The ack carried ECE.
    pub(super) ece: bool,
    /// An RTT sample, ns (packets sent once only).
    pub(super) rtt: Option<u64>,
    /// The cumulative ack after this one, and the next sequence number.
    pub(super) una: u32,
    pub(super) next_seq: u32,
    /// Packets in flight before this ack.
    pub(super) inflight: usize,
    /// The largest window, packets (`Config::window`).
    pub(super) max: u16,
    /// Delay floor of the target, ns (`Config::cc_delay_floor`; 0: no delay signal).
    pub(super) floor: u64,
}

/// The congestion state of one session.
#[derive(Clone, Debug)]
pub(super) struct Congestion {
    cwnd: u64,
    ssthresh: u64,
    /// Loss reduces the window once until `una` passes `recover`.
    recover: u32,
    recovering: bool,
    /// The current round trip ends when `una` passes `round_end`.
    round_end: u32,
    acked: u32,
    marked: u32,
    /// DCTCP α in 1/1024.
    alpha: u64,
    /// A delay decrease happened this round.
    delay_cut: bool,
    min_rtt: u64,
}

impl Default for Congestion {
    fn default() -> Self {
        Congestion {
            cwnd: INITIAL_CWND * FP,
            ssthresh: u64::MAX,
            recover: 0,
            recovering: false,
            round_end: 0,
            acked: 0,
            marked: 0,
            alpha: 0,
            delay_cut: false,
            min_rtt: u64::MAX,
        }
    }
}

impl Congestion {
    /// The congestion window, packets.
    #[inline]
    pub(super) fn window(&self) -> usize {
        (self.cwnd / FP).max(MIN_CWND) as usize
    }

    fn cut(&mut self, per_1024: u64) {
        self.cwnd = (self.cwnd * per_1024 / 1024).max(MIN_CWND * FP);
        self.ssthresh = self.cwnd;
    }

    /// An ack. Returns whether the window shrank.
    pub(super) fn on_ack(&mut self, a: AckSignal) -> bool {
        if self.recovering && seq_diff(a.una, self.recover) >= 0 {
            self.recovering = false;
        }
        let mut cut = false;
        self.acked = self.acked.saturating_add(a.acked);
        if a.ece {
            self.marked = self.marked.saturating_add(a.acked.max(1));
        }
        if let Some(r) = a.rtt {
            self.min_rtt = self.min_rtt.min(r);
            let target = self.min_rtt + self.min_rtt.max(a.floor);
            if a.floor > 0 && r > target && !self.delay_cut {
                // Swift: shrink in proportion to how far past the target.
                let excess = (r - target) * 1024 / r;
                let by = (DELAY_BETA * excess / 1024).min(DELAY_MAX_CUT);
                self.cut(1024 - by);
                self.delay_cut = true;
                cut = true;
            }
        }
        if seq_diff(a.una, self.round_end) >= 0 {
            // One round trip: DCTCP's α, and its decrease if anything was marked.
            if self.acked > 0 {
                let f = u64::from(self.marked.min(self.acked)) * 1024 / u64::from(self.acked);
                self.alpha = self.alpha - (self.alpha >> DCTCP_G_SHIFT) + (f >> DCTCP_G_SHIFT);
            }
            if self.marked > 0 {
                self.cut(1024 - self.alpha / 2);
                cut = true;
            }
            self.round_end = a.next_seq;
            self.acked = 0;
            self.marked = 0;
            self.delay_cut = false;
        }
        // Grow only while the window is what limits sending (RFC 7661).
        let limited = a.inflight + 1 >= self.window();
        if !cut && !a.ece && !self.recovering && limited && a.acked > 0 {
            let n = u64::from(a.acked);
            if self.cwnd < self.ssthresh {
                self.cwnd += n * FP;
            } else {
                self.cwnd += n * FP * FP / self.cwnd.max(FP);
            }
            self.cwnd = self.cwnd.min(u64::from(a.max).max(MIN_CWND) * FP);
        }
        cut
    }

    /// Selective acks show a loss. Returns whether the window shrank (once
    /// per round trip of losses, RFC 6582 §3.2's `recover`).
    pub(super) fn on_loss(&mut self, next_seq: u32) -> bool {
        if self.recovering {
            return false;
        }
        self.cut(LOSS_BETA);
        self.recovering = true;
        self.recover = next_seq;
        true
    }

    /// A retransmission timeout: back to the minimum (RFC 5681 §3.1).
    pub(super) fn on_timeout(&mut self, next_seq: u32) {
        self.ssthresh = (self.cwnd / 2).max(MIN_CWND * FP);
        self.cwnd = MIN_CWND * FP;
        self.recovering = true;
        self.recover = next_seq;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(acked: u32, una: u32, inflight: usize) -> AckSignal {
        AckSignal {
            acked,
            ece: false,
            rtt: Some(10_000),
            una,
            next_seq: una + 100,
            inflight,
            max: 256,
            floor: 100_000,
        }
    }

    #[test]
    fn slow_start_then_halving_on_loss_and_marks() {
        let mut c = Congestion::default();
        assert_eq!(c.window(), 8);
        c.on_ack(ack(8, 8, 8));
        assert_eq!(c.window(), 16);
        c.on_ack(ack(16, 24, 16));
        assert_eq!(c.window(), 32);
        assert!(c.on_loss(200));
        assert_eq!(c.window(), 22);
        assert!(!c.on_loss(201), "once per round trip");
        // Marks on every packet for a while: α → 1, the window halves per round.
        for i in 0..40 {
            let w = c.window();
            let una = 300 + i * 100;
            c.on_ack(AckSignal {
                ece: true,
                ..ack(w as u32, una, w)
            });
        }
        assert_eq!(c.window(), MIN_CWND as usize);
    }

    #[test]
    fn delay_above_target_shrinks_at_most_half() {
        let mut c = Congestion::default();
        c.on_ack(ack(1, 1, 8));
        let before = c.window();
        c.on_ack(AckSignal {
            rtt: Some(10_000_000),
            ..ack(1, 2, 16)
        });
        assert!(c.window() >= before / 2 && c.window() < before);
    }

    #[test]
    fn application_limited_does_not_grow() {
        let mut c = Congestion::default();
        for i in 0..100 {
            c.on_ack(AckSignal {
                floor: 0,
                ..ack(1, i, 1)
            });
        }
        assert_eq!(c.window(), 8);
    }
}
