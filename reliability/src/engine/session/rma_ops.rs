//! A session's RMA and atomic operations (PROTOCOL.md §8), both ends:
//!
//! - as **initiator**, the operations posted to this peer: WRITE segments,
//!   READ_REQ, ATOMIC, each completing when the peer's response arrives
//!   (RMA_RESP, the last READ_RESP segment, ATOMIC_RESP) with the status
//!   the peer found;
//! - as **target**, the responses owed to this peer: a write's status, a
//!   read's data (segmented, re-read from registered memory at every
//!   transmission like a send's payload), an atomic's status and fetched
//!   values (kept until acknowledged: a retransmission resends them, the
//!   atomic never runs twice).
//!
//! Both travel on the session's stream, so they are retransmitted,
//! acknowledged and ordered like messages, and fail with the session.

use std::collections::VecDeque;

use super::super::events::{Events, local_completion};
use super::super::inject::InjectStore;
use super::super::shared::Shared;
use super::Session;
use super::sender::PktKind;
use crate::api::{Completion, Flags, OpError, Payload, RecvBuffers, SendBuffers};
use crate::rma::{RmaKind, RmaOp, RmaStatus};
use crate::slab::{Slab, slab_key};
use crate::time::Instant;
use crate::wire::{self, Bytes, Header, PacketType, RmaExt, flags as wf};

slab_key!(
    /// An initiator's operation in its session's [`RmaOps`].
    RmaId
);
slab_key!(
    /// A response owed by a target in its session's [`RmaOps`].
    RespId
);

/// An RMA operation this side initiated.
#[derive(Debug)]
pub(super) struct RmaState {
    token: u64,
    kind: RmaKind,
    key: u64,
    addr: u64,
    /// Write: bytes to send; read: bytes to receive; atomic: operand bytes.
    len: u32,
    data: Option<u64>,
    msg_id: u32,
    next_off: u32,
    unacked: u32,
    all_sent: bool,
    /// Read: bytes of the answer arrived.
    received: u32,
    /// The target's answer, once it arrived.
    outcome: Option<Result<(), RmaStatus>>,
    /// The engine's copy: an injected write's payload, an atomic's operands.
    copy: Option<Vec<u8>>,
    /// FI_FENCE: its first packet waits for every earlier operation (§8.6).
    fence: bool,
}

impl RmaState {
    fn completion<P>(&self, error: Option<OpError>) -> Completion<P> {
        let flags = match self.kind {
            RmaKind::Write => Flags::RMA | Flags::WRITE,
            RmaKind::Read => Flags::RMA | Flags::READ,
            RmaKind::Atomic { result_len: 0, .. } => Flags::ATOMIC | Flags::WRITE,
            RmaKind::Atomic { .. } => Flags::ATOMIC | Flags::READ,
        };
        local_completion(self.token, flags, self.len as usize, error)
    }

    /// Its answer arrived and no packet of it is unacknowledged (the answer
    /// carries the acknowledgement, so the second follows the first).
    fn is_done(&self) -> bool {
        self.outcome.is_some() && self.all_sent && self.unacked == 0
    }
}

/// What a target owes its initiator.
#[derive(Debug)]
pub(super) enum RespKind {
    /// A write's status (RMA_RESP).
    Write,
    /// A read's data, read from `key`/`addr` at each transmission (READ_RESP).
    Read { key: u64, addr: u64 },
    /// An atomic's fetched values (ATOMIC_RESP): the one copy that lets a
    /// retransmission answer without running the atomic again.
    Atomic { result: Vec<u8> },
}

/// A response in progress.
#[derive(Debug)]
pub(super) struct RespState {
    kind: RespKind,
    msg_id: u32,
    status: u8,
    /// READ_RESP: bytes to send (0 when refused); ATOMIC_RESP: result bytes asked.
    len: u32,
    next_off: u32,
    unacked: u32,
    all_sent: bool,
}

/// A session's RMA operations and owed responses.
#[derive(Debug, Default)]
pub(super) struct RmaOps {
    ops: Slab<RmaId, RmaState>,
    /// Ops with packets still to emit, in posting order.
    sendq: VecDeque<RmaId>,
    /// Ops waiting for their answer, in posting order.
    waiting: VecDeque<RmaId>,
    resps: Slab<RespId, RespState>,
    /// Responses with packets still to emit, in the order owed.
    respq: VecDeque<RespId>,
    /// The peer's writes whose first segment arrived and last did not
    /// (message id, verdict so far): the check of the first segment, then
    /// the first copy that failed (memory registered from NULL and mapped
    /// read-only). Answered with it at their last segment.
    writes: Vec<(u32, Result<(), RmaStatus>)>,
    /// Fenced operations in `ops`: while there are none, no fence is looked
    /// for (§8.6), so an operation without FI_FENCE pays nothing for it.
    fenced: usize,
}

impl RmaOps {
    pub(super) fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.resps.is_empty() && self.writes.is_empty()
    }

    /// The verdict so far on the peer's write `msg_id`, if its first
    /// segment came and its last has not.
    pub(super) fn write_verdict(&self, msg_id: u32) -> Option<Result<(), RmaStatus>> {
        self.writes
            .iter()
            .find(|(m, _)| *m == msg_id)
            .map(|(_, v)| *v)
    }

    /// Record `verdict` on the peer's write `msg_id`, which has segments to come.
    pub(super) fn set_write_verdict(&mut self, msg_id: u32, verdict: Result<(), RmaStatus>) {
        match self.writes.iter_mut().find(|(m, _)| *m == msg_id) {
            Some(w) => w.1 = verdict,
            None => self.writes.push((msg_id, verdict)),
        }
    }

    /// The peer's write `msg_id` has had its last segment: forget it.
    pub(super) fn write_done(&mut self, msg_id: u32) {
        self.writes.retain(|(m, _)| *m != msg_id);
    }

    /// Whether new packets wait: responses, or initiated operations.
    pub(super) fn has_data(&self) -> bool {
        !(self.respq.is_empty() && self.sendq.is_empty())
    }

    /// The message number of the operation whose packet would go next, for
    /// ordering against the session's messages (posting order).
    pub(super) fn next_msg_id(&self) -> Option<u32> {
        self.ops.get(*self.sendq.front()?).map(|s| s.msg_id)
    }

    /// The message number of the fenced operation at the head of the
    /// queue, if one is there and none of its packets went yet (§8.6).
    pub(super) fn fence_at(&self) -> Option<u32> {
        if self.fenced == 0 {
            return None;
        }
        let st = self.ops.get(*self.sendq.front()?)?;
        (st.fence && st.next_off == 0 && st.unacked == 0 && !st.all_sent).then_some(st.msg_id)
    }

    /// Whether a fenced operation is in `ops` (§8.6).
    pub(super) fn any_fenced(&self) -> bool {
        self.fenced != 0
    }

    /// Whether an operation posted before message `msg_id` has not
    /// completed (its answer, or an acknowledgement, is still to come).
    pub(super) fn any_before(&self, msg_id: u32) -> bool {
        self.ops
            .iter()
            .any(|(_, s)| wire::seq_diff(s.msg_id, msg_id) < 0)
    }

    /// Whether responses we owe as target wait to go.
    pub(super) fn has_responses(&self) -> bool {
        !self.respq.is_empty()
    }

    /// The next response packet, at most `max_payload` bytes of payload.
    pub(super) fn next_response(&mut self, max_payload: u32) -> Option<PktKind> {
        let id = *self.respq.front()?;
        let Some(r) = self.resps.get_mut(id) else {
            self.respq.pop_front();
            return None;
        };
        let off = r.next_off;
        let n = match r.kind {
            RespKind::Read { .. } => (r.len - off).min(max_payload),
            // Status only, or one datagram of fetched values (§8.4).
            RespKind::Write | RespKind::Atomic { .. } => 0,
        };
        r.next_off += n;
        if r.next_off >= r.len || !matches!(r.kind, RespKind::Read { .. }) {
            r.all_sent = true;
            self.respq.pop_front();
        }
        r.unacked += 1;
        Some(PktKind::Resp {
            id,
            offset: off,
            len: n as u16,
        })
    }

    /// The next packet of the oldest operation with one to send.
    pub(super) fn next_op_packet(&mut self, max_payload: u32) -> Option<PktKind> {
        let op = *self.sendq.front()?;
        let Some(st) = self.ops.get_mut(op) else {
            self.sendq.pop_front();
            return None;
        };
        let off = st.next_off;
        let n = match st.kind {
            RmaKind::Write => (st.len - off).min(max_payload),
            // A request, or operands in one datagram.
            RmaKind::Read | RmaKind::Atomic { .. } => 0,
        };
        st.next_off += n;
        if st.next_off >= st.len || st.kind != RmaKind::Write {
            st.all_sent = true;
            self.sendq.pop_front();
        }
        st.unacked += 1;
        Some(PktKind::Rma {
            op,
            offset: off,
            len: n as u16,
        })
    }

    /// A packet of operation `op` was acknowledged.
    pub(super) fn op_acked<P>(&mut self, op: RmaId, sh: &mut Shared<P>) {
        if let Some(st) = self.ops.get_mut(op) {
            st.unacked = st.unacked.saturating_sub(1);
            if st.is_done() {
                self.finish(op, sh);
            }
        }
    }

    /// A packet of response `id` was acknowledged: forget it once all were.
    pub(super) fn resp_acked(&mut self, id: RespId) {
        if let Some(r) = self.resps.get_mut(id) {
            r.unacked = r.unacked.saturating_sub(1);
            if r.all_sent && r.unacked == 0 {
                self.resps.remove(id);
            }
        }
    }

    /// Owe the peer a response to its operation `msg_id`.
    pub(super) fn respond(&mut self, msg_id: u32, status: u8, len: u32, kind: RespKind) {
        let id = self.resps.insert(RespState {
            kind,
            msg_id,
            status,
            len,
            next_off: 0,
            unacked: 0,
            all_sent: false,
        });
        self.respq.push_back(id);
    }

    /// The waiting operation `msg_id`.
    fn waiting_op(&self, msg_id: u32) -> Option<RmaId> {
        self.waiting
            .iter()
            .copied()
            .find(|&op| self.ops.get(op).is_some_and(|s| s.msg_id == msg_id))
    }

    /// An answer to one of our operations arrived in order (§8.2–§8.4):
    /// place what it carries and complete the operation once whole.
    pub(super) fn on_answer<P>(
        &mut self,
        ty: PacketType,
        r: &RmaExt,
        payload: Bytes<'_>,
        bufs: &mut impl RecvBuffers,
        sh: &mut Shared<P>,
    ) {
        let Some(op) = self.waiting_op(r.msg_id) else {
            sh.stats.dropped += 1;
            return;
        };
        let Some(st) = self.ops.get_mut(op) else {
            return;
        };
        let status = RmaStatus::of_code(r.status);
        let outcome = match (ty, st.kind) {
            (PacketType::RmaResp, RmaKind::Write) => Some(status),
            (PacketType::ReadResp, RmaKind::Read) if status.is_err() => Some(status),
            (PacketType::ReadResp, RmaKind::Read) => {
                // Only bytes inside what we asked for (the decoder checked
                // the segment against the response's own total).
                let end = (r.offset as usize).saturating_add(payload.len());
                if end <= st.len as usize {
                    let token = st.token;
                    payload.for_each(0, payload.len(), |off, piece| {
                        bufs.rma_result(token, r.offset as usize + off, piece);
                    });
                    st.received = st.received.saturating_add(payload.len() as u32);
                }
                (st.received >= st.len).then_some(Ok(()))
            }
            (PacketType::AtomicResp, RmaKind::Atomic { result_len, .. }) => {
                if status.is_ok() && payload.len() == result_len {
                    let token = st.token;
                    payload.for_each(0, result_len, |off, piece| {
                        bufs.rma_result(token, off, piece);
                    });
                    Some(Ok(()))
                } else {
                    Some(status.and(Err(RmaStatus::Invalid)))
                }
            }
            // An answer of another kind than the operation: a broken peer.
            _ => Some(Err(RmaStatus::Invalid)),
        };
        let Some(outcome) = outcome else { return };
        st.outcome = Some(outcome);
        if let Some(pos) = self.waiting.iter().position(|&x| x == op) {
            self.waiting.remove(pos);
        }
        if st.is_done() {
            self.finish(op, sh);
        }
    }

    /// Report `op` with its outcome and free it.
    fn finish<P>(&mut self, op: RmaId, sh: &mut Shared<P>) {
        let Some(st) = self.ops.remove(op) else {
            return;
        };
        sh.sends -= 1;
        self.fenced -= usize::from(st.fence);
        let error = match st.outcome {
            Some(Err(e)) => Some(OpError::from(e)),
            _ => None,
        };
        sh.events.complete(st.completion(error));
        if let Some(b) = st.copy {
            sh.injects.give_back(b);
        }
    }

    /// The session failed: every operation completes with `reason`;
    /// responses owed are dropped. Returns the operations failed.
    pub(super) fn fail_all<P>(
        mut self,
        reason: OpError,
        events: &mut Events<P>,
        injects: &mut InjectStore,
    ) -> usize {
        let mut ids: Vec<(RmaId, u32)> = self.ops.iter().map(|(id, s)| (id, s.msg_id)).collect();
        ids.sort_by_key(|&(_, m)| m);
        for &(id, _) in &ids {
            if let Some(st) = self.ops.remove(id) {
                events.complete(st.completion(Some(reason)));
                if let Some(b) = st.copy {
                    injects.give_back(b);
                }
            }
        }
        ids.len()
    }

    /// Encode packet `kind` (an operation's or a response's) into `buf`
    /// after header `h`; returns the body length, for the session to seal
    /// (CRC, or its key when authenticated: PROTOCOL.md §11.3), or `None`
    /// if its state is gone.
    pub(super) fn encode(
        &self,
        kind: PktKind,
        mut h: Header,
        buf: &mut [u8],
        bufs: &mut impl SendBuffers,
    ) -> Option<usize> {
        let mut ext = RmaExt::default();
        let n;
        match kind {
            PktKind::Rma { op, offset, len } => {
                let st = self.ops.get(op)?;
                n = usize::from(len);
                ext.msg_id = st.msg_id;
                ext.key = st.key;
                ext.addr = st.addr;
                // The initiator waits for the answer, which carries the ack.
                h.flags |= wf::AR;
                match st.kind {
                    RmaKind::Write => {
                        h.ty = PacketType::Write as u8;
                        ext.total_len = st.len;
                        ext.offset = offset;
                        if let Some(d) = st.data {
                            h.flags |= wf::CQ_DATA;
                            ext.data = d;
                        }
                    }
                    RmaKind::Read => {
                        h.ty = PacketType::ReadReq as u8;
                        ext.total_len = st.len;
                    }
                    RmaKind::Atomic {
                        op,
                        datatype,
                        result_len,
                    } => {
                        h.ty = PacketType::Atomic as u8;
                        ext.total_len = result_len as u32;
                        ext.op = op;
                        ext.datatype = datatype;
                    }
                }
                let payload_len = if st.kind == RmaKind::Write {
                    n
                } else {
                    st.copy.as_ref().map_or(0, Vec::len)
                };
                h.payload_len = payload_len as u16;
                let dst = &mut buf[wire::RMA_HDR_LEN..wire::RMA_HDR_LEN + payload_len];
                match st.copy.as_ref() {
                    Some(c) if st.kind == RmaKind::Write => {
                        let o = offset as usize;
                        dst.copy_from_slice(&c[o..o + n]);
                    }
                    Some(c) => dst.copy_from_slice(c),
                    None if payload_len > 0 => bufs.read(st.token, offset as usize, dst),
                    None => {}
                }
                wire::encode_header(buf, &h);
                wire::encode_rma_ext(buf, &ext);
                Some(wire::RMA_HDR_LEN + payload_len)
            }
            PktKind::Resp { id, offset, len } => {
                let r = self.resps.get(id)?;
                ext.msg_id = r.msg_id;
                ext.status = r.status;
                ext.total_len = r.len;
                ext.offset = offset;
                n = match &r.kind {
                    RespKind::Write => {
                        h.ty = PacketType::RmaResp as u8;
                        ext.total_len = 0;
                        0
                    }
                    RespKind::Read { key, addr } => {
                        h.ty = PacketType::ReadResp as u8;
                        let n = usize::from(len);
                        let dst = &mut buf[wire::RMA_HDR_LEN..wire::RMA_HDR_LEN + n];
                        match bufs.rma_read(*key, addr.wrapping_add(u64::from(offset)), dst) {
                            Ok(()) => n,
                            // The memory went away since the check (§8.3):
                            // this segment fails the read at the initiator.
                            Err(why) => {
                                ext.status = RmaStatus::code(Err(why));
                                0
                            }
                        }
                    }
                    RespKind::Atomic { result } => {
                        h.ty = PacketType::AtomicResp as u8;
                        let n = result.len();
                        buf[wire::RMA_HDR_LEN..wire::RMA_HDR_LEN + n].copy_from_slice(result);
                        n
                    }
                };
                h.payload_len = n as u16;
                wire::encode_header(buf, &h);
                wire::encode_rma_ext(buf, &ext);
                Some(wire::RMA_HDR_LEN + n)
            }
            _ => None,
        }
    }
}

impl<P: Copy> Session<P> {
    /// Queue RMA operation `op` (the caller checked its limits). Opens the
    /// session if it is idle.
    pub(crate) fn post_rma(&mut self, now: Instant, op: &RmaOp<'_, P>, sh: &mut Shared<P>) {
        let (len, copy) = match (op.kind, op.payload) {
            (_, Payload::Inject(b)) => (b.len(), Some(sh.injects.copy_of(b))),
            (_, Payload::Buffer { len }) => (len, None),
        };
        let msg_id = self.next_msg_id;
        self.next_msg_id = self.next_msg_id.wrapping_add(1);
        let st = RmaState {
            token: op.token,
            kind: op.kind,
            key: op.key,
            addr: op.addr,
            len: len as u32,
            data: op.data,
            msg_id,
            next_off: 0,
            unacked: 0,
            all_sent: false,
            received: 0,
            outcome: None,
            copy,
            fence: op.fence,
        };
        sh.sends += 1;
        let rma = &mut self.q().rma;
        rma.fenced += usize::from(op.fence);
        let id = rma.ops.insert(st);
        rma.sendq.push_back(id);
        rma.waiting.push_back(id);
        self.idle_at = Instant::NEVER;
        if self.is_idle() {
            self.start_handshake(now, sh);
        }
        self.mark_ready(&mut sh.schedule);
    }
}
