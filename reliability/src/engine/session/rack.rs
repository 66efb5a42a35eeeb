//! Time-based loss detection, RACK (RFC 8985; PROTOCOL.md §5.3): a packet
//! is lost when a packet sent after it was delivered and more than a
//! reordering window has passed since it was sent, relative to that packet.
//! Sprayed over paths of different delay, datagrams arrive reordered by as
//! much as the paths' skew: counting later packets selectively acked (RFC
//! 5681's three duplicate acks) would take that for loss, time does not.

use crate::time::{Instant, Nanos};
use crate::wire::seq_diff;

/// Widened windows fall back to one quarter of the minimum RTT after this
/// many loss recoveries without new evidence (RFC 8985 §6.2.4: 16); a
/// recovery here is a detection pass that found loss, and one counts only
/// when no packet arrived out of order since the last.
const REO_WND_PERSIST: u8 = 16;
/// The window grows to at most this many quarters of the minimum RTT (and
/// never beyond SRTT + 4·RTTVAR, see [`Rack::reo_wnd`]).
const REO_WND_MULT_MAX: u32 = 64;

/// The RACK state of a session's sending half.
#[derive(Clone, Copy, Debug)]
pub(super) struct Rack {
    /// Send time of the most recently sent packet delivered (RACK.xmit_ts);
    /// `Instant::NEVER`: none yet.
    xmit_ts: Instant,
    /// Its sequence number (RACK.end_seq): breaks ties between packets
    /// sent at one instant.
    end_seq: u32,
    /// Its round-trip time, ns (RACK.rtt).
    rtt: u64,
    /// The reordering window in quarters of the minimum RTT (RACK.reo_wnd_mult).
    mult: u32,
    /// The window grows once per round trip (by the most any spurious
    /// retransmission of the round asks): the round ends when `una`
    /// passes this (RACK.dsack_round) ...
    widen_round: Option<u32>,
    /// ... and `mult` was this when it began.
    round_mult: u32,
    /// Loss recoveries left before a widened window falls back (RACK.reo_wnd_persist).
    persist: u8,
    /// A packet sent once was delivered after one sent later than it
    /// (RACK.reordering_seen), since the last loss recovery.
    reordering_seen: bool,
}

impl Default for Rack {
    fn default() -> Self {
        Rack {
            xmit_ts: Instant::NEVER,
            end_seq: 0,
            rtt: 0,
            mult: 1,
            widen_round: None,
            round_mult: 1,
            persist: 0,
            reordering_seen: false,
        }
    }
}

/// Whether packet (`t1`, `s1`) was sent after packet (`t2`, `s2`) (RFC 8985
/// §6.2, RACK_sent_after): later, or at the same instant with a later
/// sequence number.
#[inline]
fn sent_after(t1: Instant, s1: u32, t2: Instant, s2: u32) -> bool {
    t1 > t2 || (t1 == t2 && seq_diff(s1, s2) > 0)
}

/// RACK's verdict on a packet not delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Sent after the most recently delivered packet: nothing known yet;
    /// nor of anything after it in the window, when it was sent once.
    After,
    /// Lost now.
    Lost,
    /// Lost at this time unless delivered first.
    LostAt(Instant),
}

impl Rack {
    /// Packet `seq`, sent (last) at `sent_at`, was delivered (cumulatively
    /// or selectively acknowledged) at `now` (RFC 8985 §6.2 step 2).
    /// Returns how late the original was, when this shows its
    /// retransmission was spurious: a retransmitted packet acknowledged
    /// sooner than `min_rtt` after it was resent — the acknowledgement is
    /// the original's, only delayed, and arrived that long after the packet
    /// was judged lost (the protocol carries no timestamps or DSACK; this is
    /// the test RFC 8985 §6.2 step 2 itself makes).
    #[inline]
    pub(super) fn delivered(
        &mut self,
        seq: u32,
        sent_at: Instant,
        retransmitted: bool,
        now: Instant,
        min_rtt: u64,
    ) -> Option<u64> {
        let rtt = now.since(sent_at).0;
        if retransmitted && rtt < min_rtt {
            return Some(rtt);
        }
        if self.xmit_ts == Instant::NEVER || sent_after(sent_at, seq, self.xmit_ts, self.end_seq) {
            self.xmit_ts = sent_at;
            self.end_seq = seq;
            self.rtt = rtt;
        } else if !retransmitted {
            self.reordering_seen = true;
        }
        None
    }

    /// A retransmission turned out spurious, the original `late` ns later
    /// than the window allowed (RFC 8985 §6.2.4): widen the window by that
    /// much in quarters of the minimum RTT — once per round trip, by the
    /// most any spurious retransmission of the round asks (`una`,
    /// `next_seq`: the sender's window now) — and keep it widened for the
    /// next 16 loss recoveries. RFC 8985 adds one quarter per round trip on
    /// DSACK, which says only that a retransmission was spurious; here the
    /// timing also says by how much, so sprayed paths of very different
    /// delay are learnt in a few round trips.
    pub(super) fn widen(&mut self, una: u32, next_seq: u32, late: u64, min_rtt: u64) {
        if self.widen_round.is_none_or(|r| seq_diff(una, r) >= 0) {
            self.widen_round = Some(next_seq);
            self.round_mult = self.mult;
        }
        let steps = late.div_ceil((min_rtt / 4).max(1)).max(1);
        let want = u64::from(self.round_mult) + steps;
        self.mult = self.mult.max(want.min(u64::from(REO_WND_MULT_MAX)) as u32);
        self.persist = REO_WND_PERSIST;
    }

    /// Losses were found: after 16 loss recoveries without a spurious
    /// retransmission or reordering the window falls back to a quarter of
    /// the minimum RTT (RFC 8985 §6.2.4). Reordering seen keeps it: over
    /// sprayed paths it never stops, and each fall back would cost
    /// spurious retransmissions to learn the skew again.
    pub(super) fn recovery(&mut self) {
        if core::mem::take(&mut self.reordering_seen) {
            return;
        }
        if self.persist > 0 {
            self.persist -= 1;
            if self.persist == 0 {
                self.mult = 1;
            }
        }
    }

    /// The reordering window (RFC 8985 §6.2.4): `mult` quarters of the
    /// minimum RTT, at most `cap` (SRTT + 4·RTTVAR). RFC 8985 caps it at
    /// SRTT; sprayed over paths whose round trips differ by more than the
    /// mean (1× and 4×: the slowest is 1.6× the mean) that cap would keep
    /// taking the slow path's packets for lost, while the RTO's own bound
    /// on a round trip still finds loss sooner than the RTO does. Before
    /// the first RTT sample (`min_rtt` and `cap` 0) the delivered packet's
    /// round trip stands in for both.
    #[inline]
    pub(super) fn reo_wnd(&self, min_rtt: u64, cap: u64) -> u64 {
        let (min_rtt, cap) = if cap == 0 {
            (self.rtt, self.rtt)
        } else {
            (min_rtt, cap)
        };
        (min_rtt / 4 * u64::from(self.mult)).min(cap)
    }

    /// The verdict on a packet not delivered, `seq` sent (last) at
    /// `sent_at`, given window `reo_wnd` (RFC 8985 §6.2 step 5).
    #[inline]
    pub(super) fn judge(&self, seq: u32, sent_at: Instant, reo_wnd: u64, now: Instant) -> Verdict {
        if self.xmit_ts == Instant::NEVER || !sent_after(self.xmit_ts, self.end_seq, sent_at, seq) {
            return Verdict::After;
        }
        let deadline = sent_at + Nanos(self.rtt + reo_wnd);
        if deadline <= now {
            Verdict::Lost
        } else {
            Verdict::LostAt(deadline)
        }
    }
}
