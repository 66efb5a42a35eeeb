//! Posted receives (fi_recv, fi_trecv, fi_recvmsg): two queues in posting
//! order, untagged and tagged (fi_tagged(3): tagged messages match only
//! tagged receives), multi-recv buffers that take message after message
//! (fi_msg(3) FI_MULTI_RECV), and their completions.

use std::collections::VecDeque;

use super::super::events::{Events, local_completion, msg_flags};
use super::super::seam::MsgInfo;
use crate::api::{Completion, Flags, OpError, RecvOp, TagMatch};
use crate::slab::{Slab, slab_key};
use crate::wire::flags as wf;

slab_key!(
    /// A posted receive in [`Posted`].
    RecvId
);

/// A FI_MULTI_RECV buffer's state: messages are placed one after the other.
#[derive(Clone, Copy, Debug)]
struct Multi {
    /// Released once less than this is left (FI_OPT_MIN_MULTI_RECV).
    min_free: usize,
    used: usize,
    /// Messages placed in it that are still arriving.
    inflight: u32,
    /// Takes no more messages; released when the last one completes.
    retired: bool,
}

#[derive(Debug)]
struct Recv<P> {
    token: u64,
    cap: usize,
    src: Option<P>,
    tag: Option<TagMatch>,
    multi: Option<Multi>,
}

impl<P: Copy + Eq> Recv<P> {
    /// fi_tagged(3): the source matches (FI_ADDR_UNSPEC takes any) and
    /// `(tag | ignore) == (msg_tag | ignore)`.
    fn matches(&self, info: &MsgInfo<P>) -> bool {
        if let Some(src) = self.src
            && info.from != src
        {
            return false;
        }
        match self.tag {
            Some(t) => t.matches(info.tag),
            None => true,
        }
    }
}

/// The receives posted and not yet completed.
#[derive(Debug)]
pub(super) struct Posted<P> {
    recvs: Slab<RecvId, Recv<P>>,
    msg: VecDeque<RecvId>,
    tagged: VecDeque<RecvId>,
}

impl<P> Default for Posted<P> {
    fn default() -> Self {
        Posted {
            recvs: Slab::default(),
            msg: VecDeque::new(),
            tagged: VecDeque::new(),
        }
    }
}

impl<P: Copy + Eq> Posted<P> {
    /// Receives not yet completed (queued, or taking a message).
    pub(super) fn len(&self) -> usize {
        self.recvs.len()
    }

    /// Store receive `op` (not queued yet: see [`Posted::enqueue`]).
    pub(super) fn add(&mut self, op: &RecvOp<P>) -> RecvId {
        self.recvs.insert(Recv {
            token: op.token,
            cap: op.len,
            src: op.src,
            tag: op.tag,
            multi: op.multi_recv.map(|min_free| Multi {
                min_free,
                used: 0,
                inflight: 0,
                retired: false,
            }),
        })
    }

    /// Queue receive `id` behind the others of its kind.
    pub(super) fn enqueue(&mut self, id: RecvId, tagged: bool) {
        self.queue_mut(tagged).push_back(id);
    }

    fn queue(&self, tagged: bool) -> &VecDeque<RecvId> {
        if tagged { &self.tagged } else { &self.msg }
    }

    fn queue_mut(&mut self, tagged: bool) -> &mut VecDeque<RecvId> {
        if tagged {
            &mut self.tagged
        } else {
            &mut self.msg
        }
    }

    /// The first queued receive, in posting order, that takes message
    /// `info` (§6.2), and its position in its queue.
    pub(super) fn find(&self, info: &MsgInfo<P>) -> Option<(usize, RecvId)> {
        let q = self.queue(info.hflags & wf::TAGGED != 0);
        let pos = q.iter().position(|&id| {
            self.recvs
                .get(id)
                .is_some_and(|r: &Recv<P>| r.matches(info))
        })?;
        Some((pos, q[pos]))
    }

    /// The token of receive `id`.
    pub(super) fn token(&self, id: RecvId) -> Option<u64> {
        self.recvs.get(id).map(|r| r.token)
    }

    /// Whether `id` is a multi-recv buffer that takes more messages.
    pub(super) fn takes_more(&self, id: RecvId) -> bool {
        self.recvs
            .get(id)
            .and_then(|r| r.multi)
            .is_some_and(|m| !m.retired)
    }

    /// Reserve room for a message of `total` bytes in receive `id`. A single
    /// receive, or a multi-recv buffer left with less than `min_free`, leaves
    /// its queue (at `pos` when it is queued). Returns (offset in the buffer,
    /// bytes it takes).
    pub(super) fn place(
        &mut self,
        id: RecvId,
        pos: Option<usize>,
        tagged: bool,
        total: usize,
    ) -> (usize, usize) {
        let Some(r) = self.recvs.get_mut(id) else {
            return (0, 0);
        };
        let cap = r.cap;
        let (base, room, remove) = match r.multi.as_mut() {
            None => (0, cap, true),
            Some(m) => {
                let base = m.used;
                let room = cap - m.used;
                m.used += total.min(room);
                m.inflight += 1;
                if cap - m.used < m.min_free.max(1) {
                    m.retired = true;
                }
                (base, room, m.retired)
            }
        };
        if remove && let Some(pos) = pos {
            self.queue_mut(tagged).remove(pos);
        }
        (base, room)
    }

    /// Complete receive `id` with message `info` placed at `base` (at most
    /// `cap` bytes), or with `err`. A multi-recv buffer completes one message;
    /// the completion that releases it carries FI_MULTI_RECV.
    pub(super) fn complete(
        &mut self,
        id: RecvId,
        base: usize,
        cap: usize,
        info: &MsgInfo<P>,
        err: Option<OpError>,
        events: &mut Events<P>,
    ) {
        let Some(r) = self.recvs.get_mut(id) else {
            return;
        };
        let token = r.token;
        let mut flags = Flags::RECV | msg_flags(info.hflags);
        let release = match r.multi.as_mut() {
            None => true,
            Some(m) => {
                m.inflight = m.inflight.saturating_sub(1);
                let release = m.retired && m.inflight == 0;
                if release {
                    flags |= Flags::MULTI_RECV;
                }
                release
            }
        };
        if release {
            self.recvs.remove(id);
        }
        let total = info.total as usize;
        let (error, olen) = match err {
            Some(e) => (Some(e), 0),
            None if total > cap => (Some(OpError::Truncated), total - cap),
            None => (None, 0),
        };
        events.complete(Completion {
            token,
            flags,
            len: total.min(cap),
            buf_offset: base,
            data: info.data,
            tag: info.tag,
            src: Some(info.from),
            error,
            olen,
        });
    }

    /// fi_cancel of the queued receive `token`: it completes with
    /// FI_ECANCELED, or a multi-recv buffer with messages still arriving
    /// into it takes no more and is released when they complete. False when
    /// no queued receive has this token.
    pub(super) fn cancel(&mut self, token: u64, events: &mut Events<P>) -> bool {
        for tagged in [false, true] {
            let Some(pos) = self
                .queue(tagged)
                .iter()
                .position(|&id| self.recvs.get(id).is_some_and(|r| r.token == token))
            else {
                continue;
            };
            let Some(id) = self.queue_mut(tagged).remove(pos) else {
                continue;
            };
            let inflight = self.recvs.get(id).and_then(|r| r.multi).map(|m| m.inflight);
            match inflight {
                Some(n) if n > 0 => {
                    if let Some(m) = self.recvs.get_mut(id).and_then(|r| r.multi.as_mut()) {
                        m.retired = true;
                    }
                }
                _ => {
                    self.recvs.remove(id);
                    let mut flags = Flags::RECV | if tagged { Flags::TAGGED } else { Flags::MSG };
                    if inflight.is_some() {
                        flags |= Flags::MULTI_RECV;
                    }
                    events.complete(local_completion(token, flags, 0, Some(OpError::Canceled)));
                }
            }
            return true;
        }
        false
    }
}
