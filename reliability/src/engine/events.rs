//! The event queue the caller drains with [`crate::Engine::poll_event`]:
//! completions (fi_cq(3) entries, successful or not) and lost peers.

use std::collections::VecDeque;

use crate::api::{Completion, Event, Flags, OpError};
use crate::wire::flags as wf;

/// Events waiting for the caller, oldest first.
#[derive(Debug)]
pub(crate) struct Events<P>(VecDeque<Event<P>>);

impl<P> Default for Events<P> {
    fn default() -> Self {
        Events(VecDeque::new())
    }
}

impl<P> Events<P> {
    /// An operation completed.
    #[inline]
    pub(crate) fn complete(&mut self, c: Completion<P>) {
        self.0.push_back(Event::Completion(c));
    }

    /// A peer's session was torn down.
    pub(crate) fn peer_lost(&mut self, peer: P, reason: OpError) {
        self.0.push_back(Event::PeerLost { peer, reason });
    }

    /// The oldest event.
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<Event<P>> {
        self.0.pop_front()
    }

    /// Forget every event (the endpoint is closing).
    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }
}

/// The completion of send `token` (`len` bytes; wire flags `hflags`, of
/// which TAGGED counts), successful or failed with `error`.
pub(crate) fn send_completion<P>(
    token: u64,
    hflags: u16,
    len: usize,
    error: Option<OpError>,
) -> Completion<P> {
    local_completion(
        token,
        Flags::SEND | msg_flags(hflags & wf::TAGGED),
        len,
        error,
    )
}

/// A completion that reports nothing from a peer (no data, tag or source):
/// an operation this side started, or a receive that got no message.
pub(crate) fn local_completion<P>(
    token: u64,
    flags: Flags,
    len: usize,
    error: Option<OpError>,
) -> Completion<P> {
    Completion {
        token,
        flags,
        len,
        buf_offset: 0,
        data: 0,
        tag: 0,
        src: None,
        error,
        olen: 0,
    }
}

/// Completion flags of a message with wire flags `hflags`: FI_TAGGED or
/// FI_MSG, and FI_REMOTE_CQ_DATA when it carries data.
pub(crate) fn msg_flags(hflags: u16) -> Flags {
    let mut f = if hflags & wf::TAGGED != 0 {
        Flags::TAGGED
    } else {
        Flags::MSG
    };
    if hflags & wf::CQ_DATA != 0 {
        f |= Flags::REMOTE_CQ_DATA;
    }
    f
}
