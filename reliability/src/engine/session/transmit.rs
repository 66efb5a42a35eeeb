//! What a session sends, in priority order (PROTOCOL.md §4–6): HELLO,
//! HELLO_ACK, a receiver-not-ready ACK, retransmissions, new packets
//! (control, rendezvous data, segments of messages) while the window
//! allows, and a bare ACK when one is due. Every packet built here carries
//! our acknowledgement of the peer's stream (§5.1).

use super::super::oneshot::handshake_datagram;
use super::super::pull::write_offer;
use super::super::seam::Control;
use super::super::shared::Shared;
use super::Session;
use super::sender::{PktKind, SentPkt};
use crate::api::{Config, SendBuffers};
use crate::time::{Instant, Nanos};
use crate::wire::{self, CtrlExt, DataExt, HandshakeExt, Header, PacketType, flags as wf};

impl<P: Copy> Session<P> {
    /// Whether [`Session::emit`] could produce a packet now. It may say yes
    /// when emit then finds nothing (stale retransmission entries), never no
    /// when emit has something: a session taken off the ready list is put
    /// back by whatever gives it output again.
    pub(crate) fn may_emit(&self, now: Instant, cfg: &Config) -> bool {
        if self.send_hello {
            return true;
        }
        if !self.is_established() {
            return false;
        }
        if self.send_hello_ack || self.rnr_pending || self.ack_now || self.ack_at <= now {
            return true;
        }
        self.rnr_until == Instant::NEVER
            && self
                .q
                .as_ref()
                .is_some_and(|q| q.has_output(self.send_window(cfg)))
    }

    /// Build the next packet into `buf` (at most `cfg.mtu` long), if there is one.
    pub(crate) fn emit(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        bufs: &mut impl SendBuffers,
        sh: &mut Shared<P>,
    ) -> Option<usize> {
        // HELLO and HELLO_ACK state the largest datagram we accept (§2.3).
        let hello = CtrlExt {
            a: sh.cfg.incarnation,
            b: sh.cfg.mtu as u32,
        };
        // ... and in `sack` what else we accept (§4.1).
        let features = self.features(&sh.cfg);
        if self.send_hello {
            self.send_hello = false;
            let h = Header {
                ty: PacketType::Hello as u8,
                src_sess: self.local_sess,
                sack: features,
                ..Default::default()
            };
            // Authenticated: bound to the incarnation we know the peer by,
            // echoing its CHALLENGE's cookie if it sent one (§11.4, §11.5).
            let hs = HandshakeExt {
                dst_inc: self.remote_inc,
                reserved: 0,
                cookie: self.cookie,
            };
            return Some(handshake_datagram(buf, h, &hello, &hs, sh.auth.as_mut()));
        }
        if !self.is_established() {
            return None;
        }
        if self.send_hello_ack {
            self.send_hello_ack = false;
            let h = Header {
                ty: PacketType::HelloAck as u8,
                src_sess: self.local_sess,
                dst_sess: self.remote_sess,
                sack: features,
                ..Default::default()
            };
            let hs = HandshakeExt {
                dst_inc: self.remote_inc,
                ..HandshakeExt::default()
            };
            return Some(handshake_datagram(buf, h, &hello, &hs, sh.auth.as_mut()));
        }
        if self.rnr_pending {
            return Some(self.emit_ack(now, buf, sh));
        }
        if sh.cfg.paths > 1
            && let Some(q) = self.q.as_mut()
        {
            // Each datagram by the next entropy value not passed over (§4.6).
            self.tx_path = q.paths.next(sh.cfg.paths, now);
        }
        if self.rnr_until == Instant::NEVER {
            if let Some(len) = self.emit_retransmit(now, buf, bufs, sh) {
                return Some(len);
            }
            if let Some(len) = self.emit_new(now, buf, bufs, sh) {
                return Some(len);
            }
        }
        if self.ack_now || self.ack_at <= now {
            return Some(self.emit_ack(now, buf, sh));
        }
        None
    }

    fn emit_ack(&mut self, now: Instant, buf: &mut [u8], sh: &mut Shared<P>) -> usize {
        let mut h = self.acking_header(PacketType::Ack, sh.grant());
        if self.rnr_pending {
            h.flags |= wf::RNR;
            self.rnr_pending = false;
        }
        self.clear_ack_state();
        if self.idle_at == Instant::NEVER && self.q.as_ref().is_none_or(|q| q.quiescent()) {
            self.idle_at = now + sh.cfg.idle_release;
            self.arm_timers(&mut sh.schedule);
        }
        wire::encode_header(buf, &h);
        self.seal(buf, wire::COMMON_LEN)
    }

    fn emit_retransmit(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        bufs: &mut impl SendBuffers,
        sh: &mut Shared<P>,
    ) -> Option<usize> {
        loop {
            let una = self.una;
            let q = self.q.as_mut()?;
            let seq = q.rtx.pop_front()?;
            let pos = wire::seq_diff(seq, una);
            if pos < 0 {
                continue;
            }
            let Some(s) = q.inflight.get_mut(pos as usize) else {
                continue;
            };
            s.rtx_queued = false;
            if s.sacked {
                continue;
            }
            s.sent_at = now;
            s.retransmitted = true;
            s.path = self.tx_path;
            let kind = s.kind;
            sh.stats.retransmits += 1;
            return Some(self.build(seq, kind, buf, bufs, sh));
        }
    }

    /// A new sequenced packet, if the window allows: queued control first,
    /// then data (segmentation: [`super::send_ops::SendOps::next_segment`]).
    fn emit_new(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        bufs: &mut impl SendBuffers,
        sh: &mut Shared<P>,
    ) -> Option<usize> {
        let max_payload =
            (buf.len().min(self.peer_mtu as usize) - sh.data_overhead).min(usize::from(u16::MAX));
        let window = self.send_window(&sh.cfg);
        let q = self.q.as_mut()?;
        if q.inflight.len() >= window {
            return None;
        }
        // RMA's extension replaces DATA's; the trailer (CRC, or nonce and
        // tag when authenticated) is the same.
        let rma_overhead = sh.data_overhead - wire::DATA_HDR_LEN + wire::RMA_HDR_LEN;
        let rma_payload = (buf.len().min(self.peer_mtu as usize) - rma_overhead)
            .min(usize::from(u16::MAX)) as u32;
        if let Some(len) = self.emit_packed(now, window, buf, bufs, sh) {
            return Some(len);
        }
        let q = self.q.as_mut()?;
        let kind = match q.ctrl.pop_front() {
            Some(c) => PktKind::Ctrl(c),
            // Responses we owe as RMA target first (§8), then our own
            // messages and RMA operations in posting order.
            None => match q.rma.next_response(rma_payload) {
                Some(k) => k,
                // A fenced operation next in line holds back everything
                // queued until what went before it completes (§8.6).
                None if q.fence_holds().is_some() => return None,
                None => match (q.rma.next_msg_id(), q.ops.next_msg_id()) {
                    (Some(r), m) if m.is_none_or(|m| wire::seq_diff(r, m) < 0) => {
                        q.rma.next_op_packet(rma_payload)?
                    }
                    _ => q.ops.next_segment(max_payload as u32, &mut sh.events)?,
                },
            },
        };
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        q.inflight.push_back(SentPkt::new(kind, now, self.tx_path));
        if self.rto_at == Instant::NEVER {
            self.rto_at = now + Nanos(self.rtt.rto());
            self.arm_timers(&mut sh.schedule);
        }
        Some(self.build(seq, kind, buf, bufs, sh))
    }

    /// Encode sequenced packet `seq` (first transmission or retransmission).
    fn build(
        &mut self,
        seq: u32,
        kind: PktKind,
        buf: &mut [u8],
        bufs: &mut impl SendBuffers,
        sh: &Shared<P>,
    ) -> usize {
        let (ack, window, sack) = self.ack_fields(sh.grant());
        let mut h = Header {
            ty: 0,
            flags: wf::ACK | self.auth_flag() | self.ack_flags(),
            src_sess: self.local_sess,
            dst_sess: self.remote_sess,
            seq,
            ack,
            window,
            payload_len: 0,
            sack,
        };
        self.clear_ack_state();
        match kind {
            PktKind::Ctrl(c) => {
                let mut ext = CtrlExt::default();
                match c {
                    Control::Cts {
                        msg_id,
                        max_len,
                        discard,
                        pulled,
                    } => {
                        h.ty = PacketType::Cts as u8;
                        if discard {
                            h.flags |= wf::DISCARD;
                        }
                        if pulled {
                            h.flags |= wf::PULLED;
                        }
                        ext.a = msg_id;
                        ext.b = max_len;
                    }
                    Control::Done { msg_id } => {
                        h.ty = PacketType::Done as u8;
                        ext.a = msg_id;
                    }
                    Control::Defer { msg_id } => {
                        h.ty = PacketType::Defer as u8;
                        ext.a = msg_id;
                    }
                }
                let n = wire::ctrl_body(buf, &h, &ext);
                self.seal(buf, n)
            }
            PktKind::Rma { .. } | PktKind::Resp { .. } => {
                let encoded = self
                    .q
                    .as_ref()
                    .and_then(|q| q.rma.encode(kind, h, buf, bufs));
                encoded.map(|n| self.seal(buf, n)).unwrap_or_else(|| {
                    // Cannot happen: state outlives its unacked packets.
                    h.ty = PacketType::Ack as u8;
                    h.seq = 0;
                    wire::encode_ack(buf, &h)
                })
            }
            PktKind::Data {
                op,
                offset,
                len,
                first,
                rndv,
            } => {
                h.ty = PacketType::Data as u8;
                let Some(st) = self.q.as_ref().and_then(|q| q.ops.get(op)) else {
                    // Cannot happen: an op outlives its unacked packets. Send an
                    // empty ack rather than panic.
                    h.ty = PacketType::Ack as u8;
                    h.seq = 0;
                    wire::encode_header(buf, &h);
                    return self.seal(buf, wire::COMMON_LEN);
                };
                h.flags |= st.hflags;
                if self.keys.is_some() && sh.auth.as_ref().is_some_and(|a| a.encrypt) {
                    h.flags |= wf::ENC;
                }
                if first {
                    h.flags |= wf::FIRST;
                }
                if rndv {
                    // Data sent after a CTS: rendezvous, or the fetch of a
                    // deferred eager message (§6.5).
                    h.flags |= wf::RNDV;
                }
                // A request-to-send carries the pull offer, if any (§6.7).
                let rts = first && st.hflags & wf::RNDV != 0;
                let room = buf.len().min(self.peer_mtu as usize) - sh.data_overhead;
                let offer = match buf.get_mut(wire::DATA_HDR_LEN..wire::DATA_HDR_LEN + room) {
                    Some(dst) if rts => write_offer(bufs, st.token, dst),
                    _ => 0,
                };
                let len = if rts { offer as u16 } else { len };
                h.payload_len = len;
                let ext = DataExt {
                    msg_id: st.msg_id,
                    total_len: st.len,
                    offset,
                    tag: st.tag,
                    data: st.data,
                };
                wire::encode_header(buf, &h);
                wire::encode_data_ext(buf, &ext);
                let n = usize::from(len);
                if !rts {
                    let dst = &mut buf[wire::DATA_HDR_LEN..wire::DATA_HDR_LEN + n];
                    st.read_payload(offset as usize, dst, bufs);
                }
                self.seal(buf, wire::DATA_HDR_LEN + n)
            }
        }
    }
}
