//! The target's side of RMA (PROTOCOL.md §8): an in-order WRITE, READ_REQ
//! or ATOMIC is executed here, in the target's progress, against the
//! caller's registered memory (the RMA methods of [`RecvBuffers`]), after
//! its key, range and access were checked; the response is queued on this
//! session's stream. The stream delivers each sequenced packet once and in
//! order, so an atomic runs exactly once however often its packet arrives,
//! and a write or read runs after everything the initiator posted before it.
//! Answers to our own operations go to [`super::rma_ops::RmaOps::on_answer`].

use super::super::shared::Shared;
use super::Session;
use super::reorder::InOrder;
use super::rma_ops::RespKind;
use crate::api::{Completion, Flags, RecvBuffers};
use crate::rma::{Access, RmaStatus};
use crate::wire::{PacketType, flags as wf, status};

impl<P: Copy> Session<P> {
    /// An in-order RMA packet of this session.
    pub(super) fn on_rma(
        &mut self,
        pkt: &InOrder<'_>,
        sh: &mut Shared<P>,
        bufs: &mut impl RecvBuffers,
    ) {
        let r = pkt.rma;
        match pkt.ty {
            PacketType::Write => {
                // The whole range is checked once, at the first segment (in
                // a region from NULL that probes every page); later segments
                // take that verdict, and each copy still checks its own piece.
                let earlier = self.q.as_ref().and_then(|q| q.rma.write_verdict(r.msg_id));
                let mut checked = match earlier {
                    Some(verdict) => verdict,
                    None => bufs.rma_check(r.key, r.addr, u64::from(r.total_len), Access::WRITE),
                };
                if checked.is_ok() {
                    let at = r.addr.wrapping_add(u64::from(r.offset));
                    pkt.payload.for_each(0, pkt.payload.len(), |off, piece| {
                        if checked.is_ok() {
                            // A segment that cannot be copied fails the whole
                            // write (fi_rma(3): the initiator's completion
                            // reports the error).
                            checked = bufs.rma_write(r.key, at.wrapping_add(off as u64), piece);
                        }
                    });
                }
                let last = u64::from(r.offset) + pkt.payload.len() as u64 >= u64::from(r.total_len);
                if !last {
                    self.q().rma.set_write_verdict(r.msg_id, checked);
                    return;
                }
                if earlier.is_some() {
                    self.q().rma.write_done(r.msg_id);
                }
                if checked.is_ok() {
                    bufs.rma_remote_done(r.key, Access::WRITE);
                    if pkt.flags & wf::CQ_DATA != 0 {
                        // fi_rma(3) FI_REMOTE_CQ_DATA: the target's receive
                        // side reports the write with its data.
                        sh.events.complete(Completion {
                            token: 0,
                            flags: Flags::RMA | Flags::REMOTE_WRITE | Flags::REMOTE_CQ_DATA,
                            len: r.total_len as usize,
                            buf_offset: 0,
                            data: r.data,
                            tag: 0,
                            src: Some(self.key),
                            error: None,
                            olen: 0,
                        });
                    }
                }
                let code = RmaStatus::code(checked);
                self.q().rma.respond(r.msg_id, code, 0, RespKind::Write);
            }
            PacketType::ReadReq => {
                let checked = bufs.rma_check(r.key, r.addr, u64::from(r.total_len), Access::READ);
                if checked.is_ok() {
                    bufs.rma_remote_done(r.key, Access::READ);
                }
                let len = if checked.is_ok() { r.total_len } else { 0 };
                let kind = RespKind::Read {
                    key: r.key,
                    addr: r.addr,
                };
                self.q()
                    .rma
                    .respond(r.msg_id, RmaStatus::code(checked), len, kind);
            }
            PacketType::Atomic => {
                let operands = pkt.payload.to_vec();
                let mut result = vec![0u8; r.total_len as usize];
                let done = bufs.rma_atomic(r.key, r.addr, r.op, r.datatype, &operands, &mut result);
                let code = RmaStatus::code(done);
                if code == status::OK {
                    let access = if result.is_empty() {
                        Access::WRITE
                    } else {
                        Access::READ | Access::WRITE
                    };
                    bufs.rma_remote_done(r.key, access);
                } else {
                    result.clear();
                }
                let len = r.total_len;
                self.q()
                    .rma
                    .respond(r.msg_id, code, len, RespKind::Atomic { result });
            }
            PacketType::ReadResp | PacketType::AtomicResp | PacketType::RmaResp => {
                let Some(q) = self.q.as_mut() else { return };
                q.rma.on_answer(pkt.ty, &r, pkt.payload, bufs, sh);
                // A fenced operation may wait for nothing more (§8.6); the
                // answer's acknowledgement was taken before, when it still did.
                let window = self.send_window(&sh.cfg);
                if !self.q.as_ref().is_some_and(|q| q.has_output(window)) {
                    return;
                }
            }
            _ => return,
        }
        self.mark_ready(&mut sh.schedule);
    }
}
