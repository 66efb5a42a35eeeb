//! The matcher: where messages from every peer meet the application's
//! receives (PROTOCOL.md §6; fi_msg(3), fi_tagged(3)). It owns the posted
//! receives, the unexpected messages, peek/claim/discard, multi-recv
//! placement and release, and the receive side of rendezvous (when to send
//! a CTS, §6.3) and of delivery-complete (when to send DONE, §6.4).
//!
//! Sessions hand it messages in stream order; it answers through the
//! [`Sessions`] seam (`super::seam`) and never sees a session's state.

mod placement;
mod posted;
mod unexpected;

pub(crate) use placement::Placement;

use placement::Dest;
use posted::{Posted, RecvId};
use unexpected::{UnexpId, Unexpected};

use super::events::{Events, msg_flags};
use super::peers::PeerId;
use super::pull::{Offer, PullCounts};
use super::seam::{Control, Incoming, MsgInfo, Sessions};
use crate::api::{
    Completion, Config, Flags, OpError, PeekMode, PostError, RecvBuffers, RecvOp, TagMatch,
};
use crate::wire::{Bytes, flags as wf};

/// Posted receives and unexpected messages, engine-wide.
#[derive(Debug)]
pub(crate) struct Matcher<P> {
    posted: Posted<P>,
    unexpected: Unexpected<P>,
    /// Most receives posted at once (`fi_rx_attr::size`).
    rx_queue_len: usize,
    /// Single-copy rendezvous pulls (§6.7).
    pulls: PullCounts,
}

impl<P: Copy + Eq> Matcher<P> {
    pub(crate) fn new(cfg: &Config) -> Self {
        Matcher {
            posted: Posted::default(),
            unexpected: Unexpected::new(cfg),
            rx_queue_len: cfg.rx_queue_len,
            pulls: PullCounts::default(),
        }
    }

    /// Receives posted and not yet completed.
    pub(crate) fn recvs_posted(&self) -> usize {
        self.posted.len()
    }

    /// Unexpected messages stored.
    pub(crate) fn unexpected_count(&self) -> usize {
        self.unexpected.len()
    }

    /// Eager messages kept as their header only (§6.5), since the start.
    pub(crate) fn deferred(&self) -> u64 {
        self.unexpected.deferred_total()
    }

    /// Rendezvous messages pulled, and pull offers that fell back (§6.7).
    pub(crate) fn pull_counts(&self) -> PullCounts {
        self.pulls
    }

    /// Bytes of unexpected data buffered now, and the most ever.
    pub(crate) fn unexpected_bytes(&self) -> (usize, usize) {
        (self.unexpected.bytes(), self.unexpected.bytes_max())
    }

    // ------------------------------------------------------------------
    // The application's side
    // ------------------------------------------------------------------

    /// Post receive `op`: first against the unexpected queue (fi_tagged(3):
    /// in arrival order; a multi-recv buffer takes as many as fit), then
    /// queued.
    pub(crate) fn post_recv(
        &mut self,
        op: RecvOp<P>,
        events: &mut Events<P>,
        sessions: &mut impl Sessions<P>,
        bufs: &mut impl RecvBuffers,
    ) -> Result<(), PostError> {
        if self.posted.len() >= self.rx_queue_len {
            return Err(PostError::QueueFull);
        }
        if op.multi_recv.is_some() && op.len == 0 {
            return Err(PostError::Invalid);
        }
        let recv = self.posted.add(&op);
        let tagged = op.tag.is_some();
        while let Some(msg) = self.unexpected.find(tagged, op.src, op.tag, None) {
            self.unexpected.unqueue(msg);
            if !self.deliver_unexpected(msg, recv, events, sessions, bufs) {
                return Ok(());
            }
        }
        self.posted.enqueue(recv, tagged);
        Ok(())
    }

    /// fi_cancel of the queued receive `token` ([`Posted::cancel`]).
    pub(crate) fn cancel_recv(&mut self, token: u64, events: &mut Events<P>) -> bool {
        self.posted.cancel(token, events)
    }

    /// FI_PEEK (| FI_CLAIM or | FI_DISCARD) against the unexpected queue:
    /// a completion for `token` describing the message, or FI_ENOMSG.
    pub(crate) fn peek(
        &mut self,
        token: u64,
        src: Option<P>,
        tag: Option<TagMatch>,
        mode: PeekMode,
        events: &mut Events<P>,
        sessions: &mut impl Sessions<P>,
    ) {
        let tagged = tag.is_some();
        let base = Flags::RECV | Flags::PEEK | if tagged { Flags::TAGGED } else { Flags::MSG };
        let Some(msg) = self.unexpected.find(tagged, src, tag, None) else {
            events.complete(Completion {
                token,
                flags: base,
                len: 0,
                buf_offset: 0,
                data: 0,
                // No message: report the tag that was asked for.
                tag: tag.map_or(0, |t| t.tag),
                src: None,
                error: Some(OpError::NoMessage),
                olen: 0,
            });
            return;
        };
        let Some(info) = self.unexpected.get(msg).map(|u| u.info) else {
            return;
        };
        let mut flags = base | msg_flags(info.hflags);
        match mode {
            PeekMode::Peek => {}
            PeekMode::Claim { key } => {
                flags |= Flags::CLAIM;
                if let Some(u) = self.unexpected.get_mut(msg) {
                    u.claimed = Some(key);
                }
            }
            PeekMode::Discard => {
                flags |= Flags::DISCARD;
                self.unexpected.unqueue(msg);
                self.discard_unexpected(msg, sessions);
            }
        }
        events.complete(Completion {
            token,
            flags,
            len: info.total as usize,
            buf_offset: 0,
            data: info.data,
            tag: info.tag,
            src: Some(info.from),
            error: None,
            olen: 0,
        });
    }

    /// FI_CLAIM (| FI_DISCARD) of the message claimed with `key`.
    pub(crate) fn claim(
        &mut self,
        op: RecvOp<P>,
        key: u64,
        discard: bool,
        events: &mut Events<P>,
        sessions: &mut impl Sessions<P>,
        bufs: &mut impl RecvBuffers,
    ) -> Result<(), PostError> {
        let Some(msg) = self.unexpected.find_claimed(key) else {
            return Err(PostError::Invalid);
        };
        self.unexpected.unqueue(msg);
        if discard {
            let Some(info) = self.unexpected.get(msg).map(|u| u.info) else {
                return Err(PostError::Invalid);
            };
            self.discard_unexpected(msg, sessions);
            events.complete(Completion {
                token: op.token,
                flags: Flags::RECV | Flags::CLAIM | Flags::DISCARD | msg_flags(info.hflags),
                len: 0,
                buf_offset: 0,
                data: info.data,
                tag: info.tag,
                src: Some(info.from),
                error: None,
                olen: 0,
            });
            return Ok(());
        }
        if self.posted.len() >= self.rx_queue_len {
            // Put it back: the caller retries after progress.
            self.unexpected.requeue_front(msg);
            return Err(PostError::QueueFull);
        }
        let recv = self.posted.add(&RecvOp {
            src: None,
            multi_recv: None,
            ..op
        });
        self.deliver_unexpected(msg, recv, events, sessions, bufs);
        Ok(())
    }

    // ------------------------------------------------------------------
    // The sessions' side (in stream order)
    // ------------------------------------------------------------------

    /// The first packet of message `info` from a session whose remote id is
    /// `sess` (§6.2): into the first matching posted receive, else queued as
    /// unexpected. False refuses it (no receive and no room: §5.4).
    pub(crate) fn message_start(
        &mut self,
        info: MsgInfo<P>,
        sess: u32,
        payload: Bytes,
        events: &mut Events<P>,
        sessions: &mut impl Sessions<P>,
        bufs: &mut impl RecvBuffers,
    ) -> bool {
        if self.place_in_posted(info, payload, events, sessions, bufs) {
            return true;
        }
        let Some(msg) = self.unexpected.admit(info, sess, payload) else {
            return false;
        };
        let Some(u) = self.unexpected.get(msg) else {
            return true;
        };
        if u.deferred {
            // Over budget: its header is queued, its data stays with the
            // sender until a receive matches (§6.5).
            let msg_id = info.msg_id;
            sessions.send_control(info.peer, Control::Defer { msg_id });
        } else if !u.rndv && !u.complete {
            let m = Incoming {
                info,
                expect: info.total,
                received: u.received,
                placement: Placement(Dest::Unexpected(msg)),
                rndv_data: false,
            };
            sessions.expect(info.peer, m);
        }
        true
    }

    /// Direct message `info` (PROTOCOL.md §6.9), whole in `payload`, from a
    /// peer on this host: into the first matching posted receive, else
    /// queued as unexpected — never refused or deferred, since its sender
    /// has completed it already.
    pub(crate) fn message_direct(
        &mut self,
        info: MsgInfo<P>,
        payload: Bytes,
        events: &mut Events<P>,
        sessions: &mut impl Sessions<P>,
        bufs: &mut impl RecvBuffers,
    ) {
        if !self.place_in_posted(info, payload, events, sessions, bufs) {
            self.unexpected.admit_direct(info, payload);
        }
    }

    /// Message `info` into the first matching posted receive, if there is
    /// one: its first `payload` written there (eager), or a CTS for it
    /// (rendezvous). Whether one matched.
    fn place_in_posted(
        &mut self,
        info: MsgInfo<P>,
        payload: Bytes,
        events: &mut Events<P>,
        sessions: &mut impl Sessions<P>,
        bufs: &mut impl RecvBuffers,
    ) -> bool {
        let tagged = info.hflags & wf::TAGGED != 0;
        let Some((pos, recv)) = self.posted.find(&info) else {
            return false;
        };
        let (base, cap) = self
            .posted
            .place(recv, Some(pos), tagged, info.total as usize);
        let dest = Dest::Posted { recv, base, cap };
        if info.hflags & wf::RNDV != 0 {
            let offer = Offer::from_payload(payload);
            self.clear_to_send(info, cap, dest, &offer, events, sessions, bufs);
        } else {
            self.write(dest, 0, payload, bufs);
            let counts = (info.total, payload.len() as u32);
            self.begin(info, counts, dest, false, events, sessions, bufs);
        }
        true
    }

    /// Whether direct messages may come now (§6.9): the unexpected store
    /// has room for those already on their way.
    pub(crate) fn has_room_for_direct(&self) -> bool {
        self.unexpected.has_room_for_direct()
    }

    /// A later segment of a message: its bytes go where `placement` says.
    pub(crate) fn segment(
        &mut self,
        placement: Placement,
        offset: u32,
        payload: Bytes,
        bufs: &mut impl RecvBuffers,
    ) {
        self.write(placement.0, offset, payload, bufs);
        if let Dest::Unexpected(msg) = placement.0
            && let Some(u) = self.unexpected.get_mut(msg)
        {
            u.received += payload.len() as u32;
        }
    }

    /// Every byte of message `m` has arrived.
    pub(crate) fn message_received(
        &mut self,
        m: Incoming<P>,
        events: &mut Events<P>,
        sessions: &mut impl Sessions<P>,
        bufs: &mut impl RecvBuffers,
    ) {
        match m.placement.0 {
            Dest::Posted { recv, base, cap } => {
                self.posted.complete(recv, base, cap, &m.info, None, events);
                self.delivered(&m.info, None, sessions);
            }
            Dest::Unexpected(msg) => {
                let Some(u) = self.unexpected.get_mut(msg) else {
                    return;
                };
                u.complete = true;
                let Some(attached) = u.attached else {
                    return;
                };
                let Some(u) = self.unexpected.take(msg) else {
                    return;
                };
                if let Dest::Posted { recv, base, cap } = attached {
                    self.copy_out(&u.buf, recv, base, cap, bufs);
                    self.posted.complete(recv, base, cap, &u.info, None, events);
                }
                self.delivered(&u.info, Some(u.sess), sessions);
            }
            Dest::Drop => self.delivered(&m.info, None, sessions),
        }
    }

    /// `peer`'s session failed with `reason`: its messages still arriving
    /// (`incoming`) fail the receives they were placed in, and its queued
    /// rendezvous requests can no longer be served.
    pub(crate) fn peer_failed(
        &mut self,
        peer: PeerId,
        incoming: Vec<Incoming<P>>,
        reason: OpError,
        events: &mut Events<P>,
    ) {
        for m in incoming {
            match m.placement.0 {
                Dest::Posted { recv, base, cap } => {
                    self.posted
                        .complete(recv, base, cap, &m.info, Some(reason), events)
                }
                Dest::Unexpected(msg) => {
                    self.unexpected.unqueue(msg);
                    if let Some(u) = self.unexpected.take(msg)
                        && let Some(Dest::Posted { recv, base, cap }) = u.attached
                    {
                        self.posted
                            .complete(recv, base, cap, &u.info, Some(reason), events);
                    }
                }
                Dest::Drop => {}
            }
        }
        for msg in self.unexpected.rendezvous_from(peer) {
            self.unexpected.unqueue(msg);
            self.unexpected.take(msg);
        }
    }

    // ------------------------------------------------------------------
    // Placement
    // ------------------------------------------------------------------

    /// Message `info` now has a destination: complete it if nothing more
    /// comes (`received` of `expect` bytes), else expect the rest.
    #[allow(clippy::too_many_arguments)]
    fn begin(
        &mut self,
        info: MsgInfo<P>,
        (expect, received): (u32, u32),
        dest: Dest,
        rndv_data: bool,
        events: &mut Events<P>,
        sessions: &mut impl Sessions<P>,
        bufs: &mut impl RecvBuffers,
    ) {
        let m = Incoming {
            info,
            expect,
            received,
            placement: Placement(dest),
            rndv_data,
        };
        if m.is_complete() {
            self.message_received(m, events, sessions, bufs);
        } else {
            sessions.expect(info.peer, m);
        }
    }

    /// Rendezvous request `info` matched a receive that takes `cap` bytes at
    /// `dest`: with a pull offer, copy what fits from the sender's memory
    /// and answer CTS|PULLED (§6.7); otherwise, or if the pull fails, a CTS
    /// for what fits (§6.3), then expect that many bytes.
    #[allow(clippy::too_many_arguments)]
    fn clear_to_send(
        &mut self,
        info: MsgInfo<P>,
        cap: usize,
        dest: Dest,
        offer: &Offer,
        events: &mut Events<P>,
        sessions: &mut impl Sessions<P>,
        bufs: &mut impl RecvBuffers,
    ) {
        let expect = (info.total as usize).min(cap) as u32;
        let pulled = if expect > 0
            && !offer.is_empty()
            && let Dest::Posted { recv, base, .. } = dest
            && let Some(token) = self.posted.token(recv)
        {
            self.pulls.pull(bufs, token, base, expect as usize, offer)
        } else {
            false
        };
        sessions.send_control(
            info.peer,
            Control::Cts {
                msg_id: info.msg_id,
                max_len: expect,
                discard: false,
                pulled,
            },
        );
        if pulled {
            // Placed: the receive completes now (truncated as §6.2 says if
            // `cap` was short). CTS|PULLED tells the sender it is delivered,
            // so no DONE follows.
            if let Dest::Posted { recv, base, cap } = dest {
                self.posted.complete(recv, base, cap, &info, None, events);
            }
            return;
        }
        self.begin(info, (expect, 0), dest, true, events, sessions, bufs);
    }

    /// Deliver unexpected message `msg` (out of its queue) into receive
    /// `recv`. Returns true when `recv` is a multi-recv buffer that takes
    /// more messages (and is not queued yet).
    fn deliver_unexpected(
        &mut self,
        msg: UnexpId,
        recv: RecvId,
        events: &mut Events<P>,
        sessions: &mut impl Sessions<P>,
        bufs: &mut impl RecvBuffers,
    ) -> bool {
        let Some(info) = self.unexpected.get(msg).map(|u| u.info) else {
            return false;
        };
        let (base, cap) = self.posted.place(recv, None, false, info.total as usize);
        let more = self.posted.takes_more(recv);
        let dest = Dest::Posted { recv, base, cap };
        let Some(u) = self.unexpected.get_mut(msg) else {
            return more;
        };
        if u.rndv {
            let Some(u) = self.unexpected.take(msg) else {
                return more;
            };
            if sessions.is_current(info.peer, Some(u.sess)) {
                let offer = u.offer;
                self.clear_to_send(info, cap, dest, &offer, events, sessions, bufs);
            } else {
                // The session that sent the request is gone: its data never comes.
                self.posted
                    .complete(recv, base, cap, &info, Some(OpError::PeerReset), events);
            }
        } else if u.complete {
            let Some(u) = self.unexpected.take(msg) else {
                return more;
            };
            self.copy_out(&u.buf, recv, base, cap, bufs);
            self.posted.complete(recv, base, cap, &info, None, events);
            self.delivered(&info, Some(u.sess), sessions);
        } else {
            u.attached = Some(dest);
        }
        more
    }

    /// FI_DISCARD of unexpected message `msg` (out of its queue). A
    /// rendezvous request is answered CTS|DISCARD; an eager message still
    /// arriving drops the rest when it comes.
    fn discard_unexpected(&mut self, msg: UnexpId, sessions: &mut impl Sessions<P>) {
        let Some(u) = self.unexpected.get_mut(msg) else {
            return;
        };
        if !u.rndv && !u.complete {
            u.attached = Some(Dest::Drop);
            return;
        }
        let Some(u) = self.unexpected.take(msg) else {
            return;
        };
        if !u.rndv {
            self.delivered(&u.info, Some(u.sess), sessions);
        } else if sessions.is_current(u.info.peer, Some(u.sess)) {
            sessions.send_control(
                u.info.peer,
                Control::Cts {
                    msg_id: u.info.msg_id,
                    max_len: 0,
                    discard: true,
                    pulled: false,
                },
            );
        }
    }

    /// Message `info` was placed or discarded: with FI_DELIVERY_COMPLETE its
    /// sender waits for DONE (§6.4), sent only in the session it came in
    /// (`sess`, when it was queued).
    fn delivered(&self, info: &MsgInfo<P>, sess: Option<u32>, sessions: &mut impl Sessions<P>) {
        if info.hflags & wf::DC != 0 && sessions.is_current(info.peer, sess) {
            sessions.send_control(
                info.peer,
                Control::Done {
                    msg_id: info.msg_id,
                },
            );
        }
    }

    /// Copy bytes that arrived at `offset` of a message to where it goes:
    /// piece by piece straight into the receive (a datagram that arrived in
    /// several buffers is copied once), or into the unexpected buffer.
    fn write(&mut self, dest: Dest, offset: u32, payload: Bytes, bufs: &mut impl RecvBuffers) {
        if payload.is_empty() {
            return;
        }
        let off = offset as usize;
        match dest {
            Dest::Posted { recv, base, cap } => {
                if off >= cap {
                    return;
                }
                let n = payload.len().min(cap - off);
                if let Some(token) = self.posted.token(recv) {
                    payload.for_each(0, n, |at, piece| bufs.write(token, base + off + at, piece));
                }
            }
            Dest::Unexpected(msg) => {
                if let Some(u) = self.unexpected.get_mut(msg)
                    && let Some(dst) = u.buf.get_mut(off..off + payload.len())
                {
                    payload.copy_to(dst);
                }
            }
            Dest::Drop => {}
        }
    }

    /// Copy a buffered unexpected message into receive `recv` (the second copy).
    fn copy_out(
        &self,
        buf: &[u8],
        recv: RecvId,
        base: usize,
        cap: usize,
        bufs: &mut impl RecvBuffers,
    ) {
        let n = buf.len().min(cap);
        if n > 0
            && let Some(token) = self.posted.token(recv)
        {
            bufs.write(token, base, &buf[..n]);
        }
    }
}
