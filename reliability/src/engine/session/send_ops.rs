//! The send operations a session carries to its peer (fi_send, fi_tsend,
//! fi_inject, …) in posting order (`FI_ORDER_SAS`): their segmentation into
//! DATA packets (PROTOCOL.md §6.1), the sender's side of rendezvous (RTS,
//! then data once the CTS comes, §6.3) and of delivery-complete (§6.4), and
//! their completions.
//!
//! The session owns them because everything that happens to a send is
//! per-peer: its packets take the session's sequence numbers, are
//! retransmitted from its window, acknowledged by its peer, and fail with
//! its session.

use std::cmp::Reverse;
use std::collections::VecDeque;

use super::super::events::{Events, send_completion};
use super::super::inject::InjectStore;
use super::super::shared::Shared;
use super::Session;
use super::sender::PktKind;
use crate::api::{Completion, CompletionLevel, OpError, SendBuffers, SendOp};
use crate::slab::{Slab, slab_key};
use crate::time::Instant;
use crate::wire::{self, flags as wf};

slab_key!(
    /// A send operation in its session's [`SendOps`].
    OpId
);

/// A send operation in progress.
#[derive(Debug)]
pub(super) struct SendState {
    pub(super) token: u64,
    /// Message length.
    pub(super) len: u32,
    /// Bytes that will be sent: `len`, or for rendezvous what the CTS accepted.
    send_len: u32,
    pub(super) tag: u64,
    pub(super) data: u64,
    /// Wire flags TAGGED | CQ_DATA | DC | RNDV | AR.
    pub(super) hflags: u16,
    pub(super) msg_id: u32,
    /// Offset of the next segment to send.
    next_off: u32,
    /// Packets sent and not acknowledged.
    unacked: u32,
    rts_sent: bool,
    await_cts: bool,
    all_sent: bool,
    done_rcvd: bool,
    /// Inject complete: report it when its last packet is first sent, and
    /// never again (not even an error: the application has its completion).
    complete_on_send: bool,
    /// Its successful completion has been reported (inject complete).
    reported: bool,
    /// The receiver kept only its header (DEFER): its data goes again when
    /// a CTS fetches it (§6.5).
    deferred: bool,
    /// Every packet acknowledged, but under HOLD: it completes once an ack
    /// without HOLD shows no DEFER for it is coming (§6.5).
    held: bool,
    /// The engine's copy of an injected payload.
    pub(super) inject: Option<Vec<u8>>,
    /// FI_FENCE: its first packet waits for every earlier operation (§8.6).
    fence: bool,
}

impl SendState {
    /// Copies the message's bytes from `offset` into `dst` (all of it):
    /// from the engine's copy of an injected payload, or through `bufs`
    /// from the application's buffer.
    pub(super) fn read_payload(&self, offset: usize, dst: &mut [u8], bufs: &mut impl SendBuffers) {
        if let Some(b) = self.inject.as_ref() {
            dst.copy_from_slice(&b[offset..offset + dst.len()]);
        } else if !dst.is_empty() {
            bufs.read(self.token, offset, dst);
        }
    }

    /// Complete: every packet acknowledged, no CTS awaited, and the DONE
    /// received if it asked for one.
    fn is_done(&self) -> bool {
        self.all_sent
            && self.unacked == 0
            && !self.await_cts
            && (self.hflags & wf::DC == 0 || self.done_rcvd)
    }

    /// The completion of this send, successful or failed with `error`.
    fn completion<P>(&self, error: Option<OpError>) -> Completion<P> {
        send_completion(self.token, self.hflags, self.len as usize, error)
    }
}

/// A session's send operations and the queues that order them.
#[derive(Debug, Default)]
pub(super) struct SendOps {
    store: Slab<OpId, SendState>,
    /// Ops with packets still to emit, in posting order (FI_ORDER_SAS).
    sendq: VecDeque<OpId>,
    /// Rendezvous ops cleared to send their data.
    rndv_ready: VecDeque<OpId>,
    /// Ops waiting for a CTS or a DONE.
    waiting: Vec<OpId>,
    /// Ops acknowledged under HOLD (§6.5).
    held: Vec<OpId>,
    /// Fenced ops in the store: while there are none, no fence is looked
    /// for (§8.6), so a message without FI_FENCE pays nothing for it.
    fenced: usize,
}

impl SendOps {
    /// No operation left.
    pub(super) fn is_empty(&self) -> bool {
        self.store.is_empty()
            && self.sendq.is_empty()
            && self.rndv_ready.is_empty()
            && self.waiting.is_empty()
            && self.held.is_empty()
    }

    /// Whether new DATA packets wait to be sent (rendezvous data or messages).
    pub(super) fn has_data(&self) -> bool {
        !(self.rndv_ready.is_empty() && self.sendq.is_empty())
    }

    /// The message number of the message whose packet
    /// [`SendOps::next_segment`] would emit, for ordering against the
    /// session's RMA operations.
    pub(super) fn next_msg_id(&self) -> Option<u32> {
        let op = *self.rndv_ready.front().or(self.sendq.front())?;
        self.store.get(op).map(|s| s.msg_id)
    }

    /// The message number of the fenced message whose first packet
    /// [`SendOps::next_segment`] would emit, if none of it went yet (§8.6).
    pub(super) fn fence_at(&self) -> Option<u32> {
        if self.fenced == 0 || !self.rndv_ready.is_empty() {
            return None;
        }
        let st = self.store.get(*self.sendq.front()?)?;
        (st.fence && st.next_off == 0 && st.unacked == 0 && !st.rts_sent).then_some(st.msg_id)
    }

    /// Whether a fenced message is in the store (§8.6).
    pub(super) fn any_fenced(&self) -> bool {
        self.fenced != 0
    }

    /// Whether a message posted before message `msg_id` has not completed
    /// (FI_FENCE, PROTOCOL.md §8.6): it is acknowledged, and for delivery
    /// complete or rendezvous its DONE arrived, when it leaves the store.
    pub(super) fn any_before(&self, msg_id: u32) -> bool {
        self.store
            .iter()
            .any(|(_, s)| wire::seq_diff(s.msg_id, msg_id) < 0)
    }

    /// The length of the `i`-th queued message if it could go whole in a
    /// PACK record (§6.8): an eager message none of which was sent, at
    /// most `max` bytes, with no rendezvous data waiting to go before it.
    pub(super) fn packable_len(&self, i: usize, max: u32) -> Option<u16> {
        if !self.rndv_ready.is_empty() {
            return None;
        }
        let st = self.store.get(*self.sendq.get(i)?)?;
        // A fenced message goes alone, once its fence allows (§8.6).
        let whole =
            st.hflags & wf::RNDV == 0 && st.next_off == 0 && st.send_len == st.len && !st.fence;
        if !whole || st.len > max {
            return None;
        }
        u16::try_from(st.len).ok()
    }

    pub(super) fn get(&self, op: OpId) -> Option<&SendState> {
        self.store.get(op)
    }

    /// Whether every op still outstanding was already reported complete
    /// (inject complete), and at least one is.
    pub(super) fn only_reported(&self) -> bool {
        let mut any = false;
        for (_, st) in self.store.iter() {
            if !st.reported {
                return false;
            }
            any = true;
        }
        any
    }

    /// Ops that closing now would lose although the application counts
    /// them done: those reported complete (inject complete), and those
    /// whose payload we copied when they were posted — fi_inject reports no
    /// completion whatever level the endpoint asks (MPICH injects with
    /// FI_DELIVERY_COMPLETE in its op_flags), so its caller moved on at
    /// once. Both go out from our copy, without the application's buffers.
    pub(super) fn owed_count(&self) -> usize {
        self.store
            .iter()
            .filter(|(_, st)| st.reported || st.inject.is_some())
            .count()
    }

    /// The first `n` ops, for diagnostics.
    pub(super) fn first(&self, n: usize) -> Vec<&SendState> {
        self.store.iter().map(|(_, st)| st).take(n).collect()
    }

    /// The next new DATA packet, at most `max_payload` bytes of payload:
    /// rendezvous data first (its message was matched earlier), then the
    /// oldest message's request-to-send (§6.3) or next segment (§6.1). An
    /// inject-complete send reports its completion when its last segment
    /// goes out.
    pub(super) fn next_segment<P>(
        &mut self,
        max_payload: u32,
        events: &mut Events<P>,
    ) -> Option<PktKind> {
        let (op, from_rndv) = if let Some(&op) = self.rndv_ready.front() {
            (op, true)
        } else {
            (*self.sendq.front()?, false)
        };
        let queue = if from_rndv {
            &mut self.rndv_ready
        } else {
            &mut self.sendq
        };
        let Some(st) = self.store.get_mut(op) else {
            queue.pop_front();
            return None;
        };
        let kind;
        if st.hflags & wf::RNDV != 0 && !st.rts_sent {
            // Request-to-send: matching information only.
            st.rts_sent = true;
            st.await_cts = true;
            kind = PktKind::Data {
                op,
                offset: 0,
                len: 0,
                first: true,
                rndv: false,
            };
            self.sendq.pop_front();
        } else {
            let off = st.next_off;
            let n = (st.send_len - off).min(max_payload);
            // Data after a CTS carries RNDV and never FIRST.
            let rndv = from_rndv;
            let first = off == 0 && !rndv;
            st.next_off += n;
            if st.next_off >= st.send_len {
                st.all_sent = true;
                if st.complete_on_send && !st.reported {
                    st.reported = true;
                    events.complete(st.completion(None));
                }
                queue.pop_front();
            }
            kind = PktKind::Data {
                op,
                offset: off,
                len: n as u16,
                first,
                rndv,
            };
        }
        st.unacked += 1;
        Some(kind)
    }

    /// A DATA packet of `op` was acknowledged, under HOLD if `hold`.
    pub(super) fn packet_acked<P>(&mut self, op: OpId, hold: bool, sh: &mut Shared<P>) {
        if let Some(st) = self.store.get_mut(op) {
            st.unacked = st.unacked.saturating_sub(1);
            if st.is_done() {
                // An eager message the peer could still defer waits.
                if hold && st.hflags & wf::RNDV == 0 && !st.deferred {
                    if !st.held {
                        st.held = true;
                        self.held.push(op);
                    }
                } else {
                    self.finish(op, sh);
                }
            }
        }
    }

    /// An ack without HOLD: the sends held back were not deferred.
    pub(super) fn release_held<P>(&mut self, sh: &mut Shared<P>) {
        for op in std::mem::take(&mut self.held) {
            if self.store.get(op).is_some_and(|st| st.held && st.is_done()) {
                self.finish(op, sh);
            }
        }
    }

    /// The peer kept only the header of message `msg_id` (DEFER, §6.5):
    /// stop sending its segments and wait for a CTS to send it again, like
    /// a rendezvous message. Returns false when no op has that message.
    pub(super) fn on_defer(&mut self, msg_id: u32) -> bool {
        let found = self.store.iter().find_map(|(op, st)| {
            (st.msg_id == msg_id && st.hflags & wf::RNDV == 0 && !st.deferred).then_some(op)
        });
        let Some(op) = found else { return false };
        let Some(st) = self.store.get_mut(op) else {
            return false;
        };
        st.deferred = true;
        st.held = false;
        st.await_cts = true;
        st.all_sent = false;
        st.next_off = 0;
        st.send_len = st.len;
        self.sendq.retain(|&x| x != op);
        self.held.retain(|&x| x != op);
        self.waiting.push(op);
        true
    }

    /// A CTS for rendezvous message `msg_id` (§6.3): send `max_len` bytes of
    /// it, or none (`discard`: FI_DISCARD, or CTS|PULLED — the receiver
    /// copied the message itself, §6.7). Returns false when no op awaits it.
    pub(super) fn on_cts<P>(
        &mut self,
        msg_id: u32,
        max_len: u32,
        discard: bool,
        sh: &mut Shared<P>,
    ) -> bool {
        let store = &self.store;
        let found = self.waiting.iter().copied().find(|&op| {
            store
                .get(op)
                .is_some_and(|s| s.msg_id == msg_id && s.await_cts)
        });
        let Some(op) = found else { return false };
        let Some(st) = self.store.get_mut(op) else {
            return false;
        };
        st.await_cts = false;
        st.send_len = if discard { 0 } else { st.len.min(max_len) };
        if discard {
            // Discarded is as delivered as it will get, and pulled is
            // placed: no DONE follows (fi_tagged(3) FI_DISCARD, §6.7).
            st.done_rcvd = true;
        }
        if st.send_len == 0 {
            // Nothing to send: complete once the RTS is acknowledged.
            st.all_sent = true;
            if st.is_done() {
                self.finish(op, sh);
            }
        } else {
            self.rndv_ready.push_back(op);
        }
        true
    }

    /// A DONE for message `msg_id` (§6.4).
    pub(super) fn on_done<P>(&mut self, msg_id: u32, sh: &mut Shared<P>) {
        let store = &self.store;
        let found = self.waiting.iter().copied().find(|&op| {
            store
                .get(op)
                .is_some_and(|s| s.msg_id == msg_id && !s.await_cts && s.hflags & wf::DC != 0)
        });
        let Some(op) = found else { return };
        let Some(st) = self.store.get_mut(op) else {
            return;
        };
        st.done_rcvd = true;
        if st.is_done() {
            self.finish(op, sh);
        }
    }

    /// Complete `op` successfully and free it.
    fn finish<P>(&mut self, op: OpId, sh: &mut Shared<P>) {
        let Some(st) = self.store.remove(op) else {
            return;
        };
        sh.sends -= 1;
        self.fenced -= usize::from(st.fence);
        if (st.deferred || st.hflags & (wf::RNDV | wf::DC) != 0)
            && let Some(pos) = self.waiting.iter().position(|&x| x == op)
        {
            self.waiting.swap_remove(pos);
        }
        if !st.reported {
            sh.events.complete(st.completion(None));
        }
        if let Some(b) = st.inject {
            sh.injects.give_back(b);
        }
    }

    /// The session failed: every op completes with `reason`, in posting
    /// order (`next_msg_id` is the id the next message would take), except
    /// those already reported complete.
    pub(super) fn fail_all<P>(
        mut self,
        reason: OpError,
        next_msg_id: u32,
        events: &mut Events<P>,
        injects: &mut InjectStore,
    ) -> usize {
        let mut ops: Vec<(OpId, u32)> = self.store.iter().map(|(op, st)| (op, st.msg_id)).collect();
        ops.sort_by_key(|&(_, msg_id)| Reverse(next_msg_id.wrapping_sub(msg_id)));
        for &(op, _) in &ops {
            let Some(st) = self.store.remove(op) else {
                continue;
            };
            if !st.reported {
                events.complete(st.completion(Some(reason)));
            }
            if let Some(b) = st.inject {
                injects.give_back(b);
            }
        }
        ops.len()
    }
}

impl<P: Copy> Session<P> {
    /// Queue send `op` of `len` bytes (`inject`: the payload to copy now).
    /// The caller has checked the limits. Opens the session if it is idle.
    pub(crate) fn post_send(
        &mut self,
        now: Instant,
        op: &SendOp<'_, P>,
        len: usize,
        inject: Option<&[u8]>,
        sh: &mut Shared<P>,
    ) {
        let rndv = inject.is_none() && len > sh.cfg.eager_limit;
        let mut hflags = 0;
        if op.tag.is_some() {
            hflags |= wf::TAGGED;
        }
        if op.data.is_some() {
            hflags |= wf::CQ_DATA;
        }
        if op.level == CompletionLevel::Delivery {
            hflags |= wf::DC;
        }
        if rndv {
            hflags |= wf::RNDV;
        }
        // FI_INJECT_COMPLETE with our own copy: the buffer is free now, and
        // the completion is reported once the whole message has gone to the
        // network (`next_segment`), not before — with manual progress a
        // message still waiting for its session must not look sent.
        let complete_on_send = inject.is_some() && op.level == CompletionLevel::Inject;
        let inject = inject.map(|b| sh.injects.copy_of(b));
        if !complete_on_send {
            // The completion waits for the peer's ack: ask for it promptly (§5.2).
            hflags |= wf::AR;
        }
        let msg_id = self.next_msg_id;
        self.next_msg_id = self.next_msg_id.wrapping_add(1);
        let st = SendState {
            token: op.token,
            len: len as u32,
            send_len: len as u32,
            tag: op.tag.unwrap_or(0),
            data: op.data.unwrap_or(0),
            hflags,
            msg_id,
            next_off: 0,
            unacked: 0,
            rts_sent: false,
            await_cts: false,
            all_sent: false,
            done_rcvd: false,
            complete_on_send,
            reported: false,
            deferred: false,
            held: false,
            inject,
            fence: op.fence,
        };
        sh.sends += 1;
        let ops = &mut self.q().ops;
        ops.fenced += usize::from(op.fence);
        let op = ops.store.insert(st);
        ops.sendq.push_back(op);
        if hflags & (wf::RNDV | wf::DC) != 0 {
            ops.waiting.push(op);
        }
        self.idle_at = Instant::NEVER;
        if self.is_idle() {
            self.start_handshake(now, sh);
        }
        self.mark_ready(&mut sh.schedule);
    }

    /// A CTS arrived in order (§6.3).
    pub(super) fn on_cts(&mut self, msg_id: u32, max_len: u32, discard: bool, sh: &mut Shared<P>) {
        let Some(q) = self.q.as_mut() else { return };
        if q.ops.on_cts(msg_id, max_len, discard, sh) {
            self.mark_ready(&mut sh.schedule);
        }
    }

    /// A DONE arrived in order (§6.4).
    pub(super) fn on_done(&mut self, msg_id: u32, sh: &mut Shared<P>) {
        if let Some(q) = self.q.as_mut() {
            q.ops.on_done(msg_id, sh);
        }
        // A fenced operation may wait for nothing more (§8.6).
        let window = self.send_window(&sh.cfg);
        if self.q.as_ref().is_some_and(|q| q.has_output(window)) {
            self.mark_ready(&mut sh.schedule);
        }
    }

    /// A DEFER arrived in order (§6.5).
    pub(super) fn on_defer(&mut self, msg_id: u32, sh: &mut Shared<P>) {
        let Some(q) = self.q.as_mut() else { return };
        if !q.ops.on_defer(msg_id) {
            sh.stats.dropped += 1;
        }
    }
}
