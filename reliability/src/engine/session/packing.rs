//! Packing several whole small eager messages into one PACK datagram
//! (PROTOCOL.md §6.8), and unpacking them.
//!
//! Each record stands for the DATA packet its message would have been
//! alone, with its own sequence number: the sender keeps one in-flight
//! entry per record (so acks, SACK, retransmission, congestion and flow
//! control count messages exactly as before, and a retransmission resends
//! the record as an ordinary DATA packet), and the receiver processes the
//! records one by one as in-order, held, duplicate or refused packets.
//! Only the per-datagram work is shared: one header with one set of ack
//! fields, one CRC or seal, one frame, one transmission.

use super::super::matcher::Matcher;
use super::super::shared::Shared;
use super::Session;
use super::receiver::Refused;
use super::sender::{PktKind, SentPkt};
use crate::api::{Config, RecvBuffers, SendBuffers};
use crate::time::{Instant, Nanos};
use crate::wire::pack::{self, RECORD_LEN, Record, Records};
use crate::wire::{self, Header, Packet, PacketType, flags as wf};

impl<P: Copy> Session<P> {
    /// Packets in flight to the peer, if we pack to it (§6.8).
    pub(crate) fn packing_in_flight(&self, cfg: &Config) -> Option<usize> {
        let packs = cfg.pack && self.peer_packs && self.is_established();
        packs.then(|| self.q.as_ref().map_or(0, |q| q.inflight.len()))
    }

    /// What our HELLO and HELLO_ACK say we accept besides DATA (§4.1).
    pub(super) fn features(&self, cfg: &Config) -> u64 {
        let pack = if cfg.pack { pack::features::PACK } else { 0 };
        let any_port = if cfg.any_port {
            crate::wire::ANY_PORT
        } else {
            0
        };
        pack | any_port | crate::wire::bulk::features::encode(cfg.bulk_port)
    }

    /// A PACK of the messages at the head of the send queue, if at least
    /// two whole eager messages wait, fit one datagram and the window
    /// (`window` packets in flight at most), and nothing has to go before
    /// them (control packets, RMA, rendezvous data). Returns its length.
    pub(super) fn emit_packed(
        &mut self,
        now: Instant,
        window: usize,
        buf: &mut [u8],
        bufs: &mut impl SendBuffers,
        sh: &mut Shared<P>,
    ) -> Option<usize> {
        if !(sh.cfg.pack && self.peer_packs) {
            return None;
        }
        // The cheapest test first: a second message waits at all (a
        // ping-pong has one at a time, and pays for no more than this).
        self.q.as_ref()?.ops.packable_len(1, u32::MAX)?;
        let trailer = sh.data_overhead - wire::DATA_HDR_LEN;
        let room = (buf.len().min(self.peer_mtu as usize))
            .checked_sub(wire::COMMON_LEN + trailer)?
            .min(usize::from(u16::MAX));
        let q = self.q.as_mut()?;
        let slots = window.saturating_sub(q.inflight.len());
        if slots < 2 || !q.ctrl.is_empty() || q.rma.has_data() || q.fence_holds().is_some() {
            return None;
        }
        // Two records must fit, else an ordinary DATA packet goes.
        let max = room.saturating_sub(RECORD_LEN) as u32;
        let a = usize::from(q.ops.packable_len(0, max)?);
        let b = usize::from(q.ops.packable_len(1, max)?);
        if 2 * RECORD_LEN + a + b > room {
            return None;
        }
        let encrypt = self.keys.is_some() && sh.auth.as_ref().is_some_and(|a| a.encrypt);
        let first_seq = self.next_seq;
        let mut at = wire::COMMON_LEN;
        let mut count = 0;
        while count < slots {
            // What is left for this record's message, after its header.
            let Some(left) = (wire::COMMON_LEN + room).checked_sub(at + RECORD_LEN) else {
                break;
            };
            let Some(len) = q.ops.packable_len(0, left as u32) else {
                break;
            };
            let Some(kind) = q.ops.next_segment(u32::from(len), &mut sh.events) else {
                break;
            };
            let PktKind::Data { op, .. } = kind else {
                break;
            };
            let Some(st) = q.ops.get(op) else { break };
            let rec = Record {
                flags: wf::FIRST | (st.hflags & pack::RECORD_FLAGS),
                len,
                msg_id: st.msg_id,
                tag: st.tag,
                data: st.data,
            };
            rec.encode(&mut buf[at..at + RECORD_LEN]);
            at += RECORD_LEN;
            let n = usize::from(len);
            st.read_payload(0, &mut buf[at..at + n], bufs);
            at += n;
            q.inflight.push_back(SentPkt::new(kind, now, self.tx_path));
            self.next_seq = self.next_seq.wrapping_add(1);
            count += 1;
        }
        if count == 0 {
            return None;
        }
        if self.rto_at == Instant::NEVER {
            self.rto_at = now + Nanos(self.rtt.rto());
            self.arm_timers(&mut sh.schedule);
        }
        let mut h = self.acking_header(PacketType::Pack, sh.grant());
        h.seq = first_seq;
        h.payload_len = (at - wire::COMMON_LEN) as u16;
        if encrypt {
            h.flags |= wf::ENC;
        }
        self.clear_ack_state();
        wire::encode_header(buf, &h);
        sh.stats.packs_sent += 1;
        sh.stats.packed_sent += count as u64;
        Some(self.seal(buf, at))
    }
}

impl<P: Copy + Eq> Session<P> {
    /// A PACK of this session (its ack fields already applied): each
    /// record in turn as the DATA packet it stands for, with sequence
    /// numbers from the header's. A malformed record drops the whole
    /// datagram before any record is used; a refused record (§5.4) drops
    /// the rest, which the sender resends after the refusal.
    pub(crate) fn on_pack(
        &mut self,
        now: Instant,
        pkt: &Packet<'_>,
        sh: &mut Shared<P>,
        matcher: &mut Matcher<P>,
        bufs: &mut impl RecvBuffers,
    ) {
        let Ok(n) = pack::validate(pkt.payload) else {
            sh.stats.corrupt += 1;
            return;
        };
        sh.stats.packs_received += 1;
        sh.stats.packed_received += n as u64;
        let seal = pkt.hdr.flags & (wf::AUTH | wf::ENC);
        for (i, rec) in Records::new(pkt.payload).enumerate() {
            let Ok((rec, payload)) = rec else { return };
            let one = Packet {
                ty: PacketType::Data,
                hdr: Header {
                    ty: PacketType::Data as u8,
                    flags: seal | rec.flags,
                    seq: pkt.hdr.seq.wrapping_add(i as u32),
                    payload_len: rec.len,
                    ..pkt.hdr
                },
                data: rec.data_ext(),
                payload,
                ..*pkt
            };
            if self.on_sequenced(now, &one, sh, matcher, bufs) == Refused(true) {
                return;
            }
        }
    }
}
