//! The sending half of a session's stream (PROTOCOL.md §5.1, §5.3, §5.4):
//! the window of packets in flight, acknowledgements (cumulative and
//! selective, RFC 2018), loss detection by time (RACK, RFC 8985: `rack.rs`),
//! the retransmission timeout (RFC 6298 §5) and the receiver-not-ready wait.

use super::super::seam::Control;
use super::super::shared::Shared;
use super::Session;
use super::congestion::AckSignal;
use super::rack::Verdict;
use super::rma_ops::{RespId, RmaId};
use super::send_ops::OpId;
use crate::api::OpError;
use crate::time::{Instant, Nanos};
use crate::wire::{self, Header, flags as wf};

/// What a sent packet carried, enough to rebuild it for retransmission.
#[derive(Clone, Copy, Debug)]
pub(super) enum PktKind {
    /// A segment (or the request-to-send) of a send operation; `rndv`:
    /// data sent after a CTS (flag RNDV).
    Data {
        op: OpId,
        offset: u32,
        len: u16,
        first: bool,
        rndv: bool,
    },
    /// A CTS or DONE.
    Ctrl(Control),
    /// A packet of an RMA operation we initiated (§8).
    Rma { op: RmaId, offset: u32, len: u16 },
    /// A packet of a response we owe as RMA target (§8).
    Resp { id: RespId, offset: u32, len: u16 },
}

/// A sequenced packet in flight.
#[derive(Clone, Copy, Debug)]
pub(super) struct SentPkt {
    pub(super) kind: PktKind,
    pub(super) sent_at: Instant,
    /// Timeouts of this packet (§5.3).
    pub(super) retries: u16,
    /// The receiver holds it (its latest SACK said so).
    pub(super) sacked: bool,
    /// Karn's algorithm: no RTT sample from retransmitted packets.
    pub(super) retransmitted: bool,
    /// Its sequence number is in the retransmission queue.
    pub(super) rtx_queued: bool,
    /// The entropy value it (last) left by (§4.6).
    pub(super) path: u16,
}

impl SentPkt {
    pub(super) fn new(kind: PktKind, now: Instant, path: u16) -> Self {
        SentPkt {
            kind,
            sent_at: now,
            retries: 0,
            sacked: false,
            retransmitted: false,
            rtx_queued: false,
            path,
        }
    }
}

impl<P: Copy> Session<P> {
    /// The acknowledgement fields of a valid packet (§5.1, §5.3, §5.4).
    pub(crate) fn on_ack(&mut self, now: Instant, hdr: &Header, sh: &mut Shared<P>) {
        self.peer_window = hdr.window.max(1);
        let Some(q) = self.q.as_mut() else { return };
        let d = wire::seq_diff(hdr.ack, self.una);
        // HOLD: the peer may still tell us it deferred a message this ack
        // covers; such sends complete on an ack without HOLD (§6.5).
        let hold = hdr.flags & wf::HOLD != 0;
        let inflight = q.inflight.len();
        let mut progressed = false;
        let min_rtt = self.rtt.min();
        // How late the original of a spurious retransmission was (§5.3).
        let mut late = None;
        if d > 0 && (d as usize) <= q.inflight.len() {
            // Packets left in flight are judged against the most recently
            // sent packet delivered; with none left, nothing is (every
            // later packet is sent after these), and only a spurious
            // retransmission among these has something to say.
            let judging = (d as usize) < q.inflight.len();
            let mut sample = None;
            for i in 0..d as u32 {
                let Some(s) = q.inflight.pop_front() else {
                    break;
                };
                if !s.retransmitted {
                    sample = Some(now.since(s.sent_at).0);
                }
                if sh.cfg.paths > 1 {
                    q.paths.delivered(s.path);
                }
                if !s.sacked && (judging || s.retransmitted) {
                    let seq = self.una.wrapping_add(i);
                    let l = q
                        .rack
                        .delivered(seq, s.sent_at, s.retransmitted, now, min_rtt);
                    late = late.max(l);
                }
                match s.kind {
                    PktKind::Data { op, .. } => q.ops.packet_acked(op, hold, sh),
                    PktKind::Rma { op, .. } => q.rma.op_acked(op, sh),
                    PktKind::Resp { id, .. } => q.rma.resp_acked(id),
                    PktKind::Ctrl(Control::Defer { .. }) => {
                        self.defers_unacked = self.defers_unacked.saturating_sub(1);
                    }
                    PktKind::Ctrl(_) => {}
                }
            }
            let cfg = &sh.cfg;
            self.una = hdr.ack;
            if let Some(r) = sample {
                self.rtt.sample(r, cfg);
            } else {
                // RFC 6298 §5.7 keeps the backed-off RTO until a valid sample.
            }
            if cfg.congestion {
                let signal = AckSignal {
                    acked: d as u32,
                    ece: hdr.flags & wf::ECE != 0,
                    rtt: sample,
                    una: self.una,
                    next_seq: self.next_seq,
                    inflight,
                    max: cfg.window,
                    floor: cfg.cc_delay_floor.0,
                };
                if q.cc.on_ack(signal) {
                    sh.stats.cwnd_reductions += 1;
                }
            }
            self.rto_at = if q.inflight.is_empty() {
                Instant::NEVER
            } else {
                now + Nanos(self.rtt.rto())
            };
            if self.rnr_probe {
                // The probe got through: resend the rest of the window.
                self.rnr_probe = false;
                let una = self.una;
                for (i, s) in q.inflight.iter_mut().enumerate() {
                    if !s.sacked && !s.rtx_queued {
                        s.rtx_queued = true;
                        q.rtx.push_back(una.wrapping_add(i as u32));
                    }
                }
            }
            if q.inflight.is_empty() {
                self.idle_at = now + cfg.idle_release;
            }
            progressed = true;
        }
        if !hold && wire::seq_diff(hdr.ack, self.una) == 0 {
            // A current ack without HOLD: no DEFER of the peer is pending,
            // so the sends held back were kept (§6.5).
            q.ops.release_held(sh);
        }
        let cfg = &sh.cfg;
        // Selective acks add up: acks sprayed over paths arrive reordered,
        // and an older one's bitmap says less, not that the receiver dropped
        // anything. A receiver drops what it held only with a refusal (RNR,
        // §5.4), which clears the marks below; the timeout forgets them too
        // (RFC 2018 §8).
        if wire::seq_diff(hdr.ack, self.una) == 0 {
            let una = self.una;
            for (pos, s) in q.inflight.iter_mut().take(65).enumerate() {
                // Position 0 is `ack` itself: not held, whatever was said before.
                let held = pos > 0 && (s.sacked || hdr.sack & (1 << (pos - 1)) != 0);
                if held && !s.sacked {
                    q.paths.delivered(s.path);
                    let seq = una.wrapping_add(pos as u32);
                    let l = q
                        .rack
                        .delivered(seq, s.sent_at, s.retransmitted, now, min_rtt);
                    late = late.max(l);
                }
                s.sacked = held;
            }
        }
        if let Some(late) = late {
            // The original was only delayed: the window of reordering
            // we tolerate was too small (RFC 8985 §6.2.4).
            q.rack.widen(self.una, self.next_seq, late, min_rtt);
        }
        if hdr.flags & wf::RNR != 0
            && wire::seq_diff(hdr.ack, self.una) == 0
            && !q.inflight.is_empty()
        {
            // Receiver-not-ready: it refused packet `ack` and dropped what it
            // held after it. Wait, then go back to `una`.
            sh.stats.rnr_received += 1;
            // The refusal proves the peer alive: it does not count towards
            // the retry limit, and the back-off restarts.
            self.rtt.reset_backoff(cfg);
            for s in q.inflight.iter_mut() {
                s.retries = 0;
                s.sacked = false;
                s.rtx_queued = false;
            }
            q.rtx.clear();
            self.rnr_until = now + cfg.rnr_delay;
            self.rto_at = Instant::NEVER;
        }
        if self.lost_at != Instant::NEVER || self.q.as_ref().is_some_and(|q| !q.inflight.is_empty())
        {
            progressed |= self.detect_losses(now, sh);
        }
        // An ack that moved the window lets waiting packets go; with none
        // waiting the session has nothing to send (and stays off the ready
        // list, so the caller's transmit pass costs nothing).
        let cfg = &sh.cfg;
        if progressed
            && self
                .q
                .as_ref()
                .is_some_and(|q| q.has_output(self.send_window(cfg)))
        {
            self.mark_ready(&mut sh.schedule);
        }
        self.arm_timers(&mut sh.schedule);
    }

    /// Time-based loss detection (RACK, RFC 8985 §6.2 step 5; §5.3): every
    /// packet not delivered that was sent before the most recently sent
    /// packet delivered, longer ago than that packet's RTT and the
    /// reordering window, is lost and queued for retransmission; the
    /// earliest time another of them will be is armed as `lost_at`.
    /// Returns whether any was found lost. Not during a receiver-not-ready
    /// wait or its probe (§5.4): the receiver dropped what it held, its
    /// refusal, not time, says what to resend.
    fn detect_losses(&mut self, now: Instant, sh: &mut Shared<P>) -> bool {
        self.lost_at = Instant::NEVER;
        if self.rnr_until != Instant::NEVER || self.rnr_probe {
            return false;
        }
        let Some(q) = self.q.as_mut().filter(|q| !q.inflight.is_empty()) else {
            return false;
        };
        let reo_wnd = q.rack.reo_wnd(self.rtt.min(), self.rtt.upper());
        let una = self.una;
        // The value a lost packet took is passed over for a while (§4.6).
        let rto = Nanos(self.rtt.rto());
        let mut lost = false;
        for (i, s) in q.inflight.iter_mut().enumerate() {
            let seq = una.wrapping_add(i as u32);
            match q.rack.judge(seq, s.sent_at, reo_wnd, now) {
                // Packets are first sent in sequence order and resent
                // later still: after one sent once, all are after.
                Verdict::After if !s.retransmitted => break,
                Verdict::After => {}
                _ if s.sacked || s.rtx_queued => {}
                Verdict::LostAt(t) => self.lost_at = self.lost_at.min(t),
                Verdict::Lost => {
                    s.rtx_queued = true;
                    q.rtx.push_back(seq);
                    q.paths.lost(s.path, sh.cfg.paths, now, rto);
                    sh.stats.fast_retransmits += 1;
                    lost = true;
                    // Once per window (§12.2): a burst of losses is one
                    // congestion signal.
                    if sh.cfg.congestion && q.cc.on_loss(self.next_seq) {
                        sh.stats.cwnd_reductions += 1;
                    }
                }
            }
        }
        if lost {
            q.rack.recovery();
        }
        lost
    }

    /// `lost_at` passed: packets judged lost at that time unless delivered
    /// first were not (RACK's reordering timer, RFC 8985 §6.3).
    pub(super) fn on_lost_timer(&mut self, now: Instant, sh: &mut Shared<P>) {
        if self.detect_losses(now, sh) {
            self.mark_ready(&mut sh.schedule);
        }
    }

    /// The receiver-not-ready wait is over: probe with the refused packet
    /// alone; the rest follows once it is acknowledged (§5.4).
    pub(super) fn end_rnr_wait(&mut self, now: Instant, sh: &mut Shared<P>) {
        self.rnr_until = Instant::NEVER;
        self.rnr_probe = true;
        let una = self.una;
        let q = self.q();
        q.rtx.clear();
        for s in q.inflight.iter_mut() {
            s.rtx_queued = false;
        }
        if let Some(s) = q.inflight.front_mut() {
            s.rtx_queued = true;
            q.rtx.push_back(una);
        }
        self.rto_at = now + Nanos(self.rtt.rto());
        self.mark_ready(&mut sh.schedule);
    }

    /// Retransmission timeout (RFC 6298 §5.4–5.7; §5.3): resend HELLO, or
    /// the oldest packet and every packet outstanding for a whole RTO, and
    /// back off. Returns the error to fail the session with when the retry
    /// limit is passed.
    pub(super) fn on_rto(&mut self, now: Instant, sh: &mut Shared<P>) -> Option<OpError> {
        self.rto_at = Instant::NEVER;
        sh.stats.timeouts += 1;
        if self.silent_rtos == 0 {
            self.silent_since = now;
        }
        self.silent_rtos = self.silent_rtos.saturating_add(1);
        let max_retries = sh.cfg.max_retries;
        if self.is_idle() {
            return None;
        }
        if !self.is_established() {
            self.hello_retries += 1;
            if self.hello_retries > max_retries {
                return Some(OpError::PeerUnreachable);
            }
            self.rtt.backoff(&sh.cfg);
            self.send_hello = true;
            self.rto_at = now + Nanos(self.rtt.rto());
            self.mark_ready(&mut sh.schedule);
            return None;
        }
        let rto = Nanos(self.rtt.rto());
        let una = self.una;
        let next_seq = self.next_seq;
        let congestion = sh.cfg.congestion;
        let q = self.q();
        if congestion && !q.inflight.is_empty() {
            q.cc.on_timeout(next_seq);
            sh.stats.cwnd_reductions += 1;
        }
        let front = q.inflight.front_mut()?;
        front.retries = front.retries.saturating_add(1);
        // Its value is passed over for a while (§4.6).
        q.paths.lost(front.path, sh.cfg.paths, now, rto);
        if u32::from(front.retries) > max_retries {
            if !q.ops.only_reported() {
                return Some(OpError::PeerUnreachable);
            }
            // Nobody waits on this peer: everything outstanding to it was
            // reported complete (inject complete), so giving up would lose
            // it silently. Keep retrying every rto_max until it answers,
            // closes, or is reported unreachable (a peer may compute for a
            // long time without calling us, as manual progress allows).
            sh.stats.patient_retries += 1;
        }
        // Selective acks are forgotten: the receiver may have reneged
        // (RFC 2018 §8; RFC 6675 §5.1 does the same).
        for (i, s) in q.inflight.iter_mut().enumerate() {
            s.sacked = false;
            if s.rtx_queued {
                continue;
            }
            if i == 0 || s.sent_at + rto <= now {
                s.rtx_queued = true;
                q.rtx.push_back(una.wrapping_add(i as u32));
            }
        }
        self.rtt.backoff(&sh.cfg);
        self.rto_at = now + Nanos(self.rtt.rto());
        self.mark_ready(&mut sh.schedule);
        None
    }
}
