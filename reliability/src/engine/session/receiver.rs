//! The receiving half of a session's stream (PROTOCOL.md §5.2, §5.4):
//! duplicates, the reordering window, in-order processing, the
//! acknowledgement policy and receiver-not-ready refusals. In-order packets
//! go up: a message's first packet and its segments to the matcher, CTS and
//! DONE to this session's own send operations.

use super::super::matcher::Matcher;
use super::super::seam::{Incoming, MsgInfo};
use super::super::shared::Shared;
use super::reorder::{Hold, InOrder};
use super::{OwnSession, Session};
use crate::api::RecvBuffers;
use crate::time::{Instant, Nanos};
use crate::wire::{self, Bytes, DataExt, Header, Packet, PacketType, flags as wf};

/// Whether [`Session::on_sequenced`] refused the packet (receiver not
/// ready, §5.4): what follows it in the same datagram is dropped too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Refused(pub(crate) bool);

impl<P: Copy + Eq> Session<P> {
    /// A sequenced packet (DATA, CTS, DONE) of this session.
    pub(crate) fn on_sequenced(
        &mut self,
        now: Instant,
        pkt: &Packet<'_>,
        sh: &mut Shared<P>,
        matcher: &mut Matcher<P>,
        bufs: &mut impl RecvBuffers,
    ) -> Refused {
        if pkt.ty == PacketType::Data && sh.cfg.congestion {
            // A peer sending to us now shares our capacity (§12.1).
            sh.rx_share.note(now, &mut self.rx_epoch);
        }
        let d = wire::seq_diff(pkt.hdr.seq, self.expected);
        if d < 0 {
            // Already processed: a duplicate. Re-ack so a lost ack is repaired.
            sh.stats.duplicates += 1;
            if sh.cfg.paths > 1 {
                // The peer resent what we acknowledged: our last ack was
                // probably lost, so its value is passed over for a while
                // (§4.6): a receiver finds no loss of its own otherwise.
                let rto = Nanos(self.rtt.rto());
                let (p, n) = (self.tx_path, sh.cfg.paths);
                self.q().paths.lost(p, n, now, rto);
            }
            self.ack_now = true;
            self.mark_ready(&mut sh.schedule);
            return Refused(false);
        }
        if d > 0 {
            if d as usize >= usize::from(sh.cfg.window) {
                sh.stats.dropped += 1;
                return Refused(false);
            }
            let budget = sh.cfg.reorder_budget;
            match self
                .q()
                .reorder
                .hold((d - 1) as usize, pkt, &mut sh.reorder_bytes, budget)
            {
                Hold::Held => {}
                Hold::Duplicate => sh.stats.duplicates += 1,
                Hold::NoRoom => sh.stats.dropped += 1,
            }
            // Out of order: acknowledge at once so the sender sees the SACK.
            self.ack_now = true;
            self.mark_ready(&mut sh.schedule);
            return Refused(false);
        }
        if !self.deliver(InOrder::of(pkt), sh, matcher, bufs) {
            self.refuse(sh);
            return Refused(true);
        }
        let mut drained = false;
        loop {
            self.expected = self.expected.wrapping_add(1);
            self.rx_unacked += 1;
            let Some(q) = self.q.as_mut() else { break };
            let Some(held) = q.reorder.advance(&mut sh.reorder_bytes) else {
                break;
            };
            drained = true;
            if !self.deliver(held.in_order(), sh, matcher, bufs) {
                self.refuse(sh);
                return Refused(true);
            }
        }
        // A DATA segment with more of its message to come (an RTS has no
        // payload and is not one), or such a segment of an RMA transfer.
        let (offset, total) = match pkt.ty {
            PacketType::Data => (pkt.data.offset, pkt.data.total_len),
            PacketType::Write | PacketType::ReadResp => (pkt.rma.offset, pkt.rma.total_len),
            _ => (0, 0),
        };
        let mid_message = !pkt.payload.is_empty()
            && (offset as usize).saturating_add(pkt.payload.len()) < total as usize;
        // Only a message whose sender waits for this ack to report its
        // completion (AR) needs it now; an injected one's ack can wait for
        // the reply to carry it, or for ack_delay.
        let awaited = pkt.ty != PacketType::Data || pkt.hdr.flags & wf::AR != 0;
        let cfg = &sh.cfg;
        let end_at_once = cfg.ack_message_end_at_once && !mid_message && awaited;
        // Every `ack_every` packets, and by half the window we grant the
        // peer (§12.1) where that is fewer: a sender that has used its grant
        // waits for this ack, and with many senders sharing our ring a
        // grant below `ack_every` would otherwise cost every window an
        // `ack_delay`.
        let ack_every = cfg.ack_every.min(u32::from(sh.grant() / 2).max(1));
        if drained || end_at_once || self.rx_unacked >= ack_every || cfg.ack_delay.0 == 0 {
            // With no ack delay the ack goes out with the next poll_transmit,
            // i.e. once per batch of received datagrams.
            self.ack_now = true;
            self.mark_ready(&mut sh.schedule);
        } else if self.ack_at == Instant::NEVER {
            self.ack_at = now + cfg.ack_delay;
            self.arm_timers(&mut sh.schedule);
        }
        Refused(false)
    }

    /// Process one in-order packet. Returns false to refuse it (RNR).
    fn deliver(
        &mut self,
        pkt: InOrder<'_>,
        sh: &mut Shared<P>,
        matcher: &mut Matcher<P>,
        bufs: &mut impl RecvBuffers,
    ) -> bool {
        match pkt.ty {
            PacketType::Data if pkt.flags & wf::FIRST != 0 => {
                let info = MsgInfo {
                    peer: self.id,
                    from: self.key,
                    msg_id: pkt.data.msg_id,
                    total: pkt.data.total_len,
                    tag: pkt.data.tag,
                    data: pkt.data.data,
                    hflags: pkt.flags & (wf::TAGGED | wf::CQ_DATA | wf::DC | wf::RNDV),
                };
                let sess = self.remote_sess;
                let (mut own, events) = OwnSession::split(self, sh);
                matcher.message_start(info, sess, pkt.payload, events, &mut own, bufs)
            }
            PacketType::Data => {
                let rndv = pkt.flags & wf::RNDV != 0;
                self.on_segment(&pkt.data, rndv, pkt.payload, sh, matcher, bufs);
                true
            }
            PacketType::Cts => {
                let discard = pkt.flags & wf::DISCARD != 0;
                let pulled = pkt.flags & wf::PULLED != 0;
                self.on_cts(pkt.ctrl.a, pkt.ctrl.b, discard || pulled, sh);
                true
            }
            PacketType::Done => {
                self.on_done(pkt.ctrl.a, sh);
                true
            }
            PacketType::Defer => {
                self.on_defer(pkt.ctrl.a, sh);
                true
            }
            // RMA is never refused: its destination is registered memory (§8).
            ty if wire::is_rma(ty) => {
                self.on_rma(&pkt, sh, bufs);
                true
            }
            _ => true,
        }
    }

    /// A DATA packet without FIRST: more of a message already started
    /// (§6.1), or rendezvous data (§6.3, flag RNDV). The leftover eager
    /// segments of a deferred message find no record and are dropped (§6.5).
    fn on_segment(
        &mut self,
        data: &DataExt,
        rndv: bool,
        payload: Bytes,
        sh: &mut Shared<P>,
        matcher: &mut Matcher<P>,
        bufs: &mut impl RecvBuffers,
    ) {
        let Some(q) = self.q.as_mut() else { return };
        let Some(pos) = q
            .incoming
            .iter()
            .position(|m| m.info.msg_id == data.msg_id && m.rndv_data == rndv)
        else {
            sh.stats.dropped += 1;
            return;
        };
        let m = &mut q.incoming[pos];
        m.received += payload.len() as u32;
        let placement = m.placement;
        let complete: Option<Incoming<P>> = m.is_complete().then(|| q.incoming.swap_remove(pos));
        matcher.segment(placement, data.offset, payload, bufs);
        if let Some(m) = complete {
            let (mut own, events) = OwnSession::split(self, sh);
            matcher.message_received(m, events, &mut own, bufs);
        }
    }

    /// A DATA packet of this session arrived marked CE: acknowledge at once
    /// with ECE, so the sender slows down within one round trip (§12.3).
    pub(crate) fn echo_ce(&mut self, sh: &mut Shared<P>) {
        self.ce_echo = true;
        self.ack_now = true;
        self.mark_ready(&mut sh.schedule);
    }

    /// Receiver-not-ready (§5.4): refuse packet `expected`, drop what was
    /// held after it.
    fn refuse(&mut self, sh: &mut Shared<P>) {
        if let Some(q) = self.q.as_mut() {
            q.reorder.clear(&mut sh.reorder_bytes);
        }
        self.rnr_pending = true;
        self.ack_now = true;
        sh.stats.rnr_sent += 1;
        self.mark_ready(&mut sh.schedule);
    }
}

impl<P> Session<P> {
    /// An unsequenced packet of type `ty` in this session carrying our
    /// acknowledgement (ACK, CLOSE).
    pub(crate) fn acking_header(&self, ty: PacketType, window: u16) -> Header {
        let (ack, window, sack) = self.ack_fields(window);
        Header {
            ty: ty as u8,
            flags: wf::ACK | self.auth_flag() | self.ack_flags(),
            src_sess: self.local_sess,
            dst_sess: self.remote_sess,
            ack,
            window,
            sack,
            ..Default::default()
        }
    }

    /// `ack`, `window` and `sack` of every packet we send (§5.2).
    pub(super) fn ack_fields(&self, window: u16) -> (u32, u16, u64) {
        let sack = self.q.as_ref().map_or(0, |q| q.reorder.sack());
        (self.expected, window, sack)
    }

    /// Flags of our ack fields: ECE (§12.3) and HOLD (§6.5).
    pub(super) fn ack_flags(&self) -> u16 {
        let mut f = 0;
        if self.ce_echo {
            f |= wf::ECE;
        }
        if self.defers_unacked > 0 {
            f |= wf::HOLD;
        }
        f
    }

    /// Our acknowledgement is on its way.
    pub(super) fn clear_ack_state(&mut self) {
        self.ce_echo = false;
        self.ack_now = false;
        self.ack_at = Instant::NEVER;
        self.rx_unacked = 0;
    }
}
