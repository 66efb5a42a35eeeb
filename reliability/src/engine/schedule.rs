//! Which sessions have work: the ready list (something to transmit) and the
//! timer list (a deadline armed). Both keep each peer at most once; the
//! session carries its own [`Listed`] marks, so adding is O(1).
//!
//! The ready list is exact for [`crate::Engine::wants_transmit`]: a session
//! leaves it as soon as it has nothing more to send, and whatever gives it
//! output again puts it back (the simulator asserts that no datagram hides
//! behind a `false`).

use std::collections::VecDeque;

use super::peers::PeerId;
use crate::time::Instant;

/// Which of the schedule's lists a session is on.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Listed {
    ready: bool,
    timers: bool,
}

/// The ready list and the timer list.
#[derive(Debug, Default)]
pub(crate) struct Schedule {
    /// Sessions that may have a datagram to send, served round-robin.
    ready: VecDeque<PeerId>,
    /// Sessions with an armed deadline.
    timers: Vec<PeerId>,
}

impl Schedule {
    /// Put session `id` on the ready list, unless it is there.
    #[inline]
    pub(crate) fn mark_ready(&mut self, id: PeerId, listed: &mut Listed) {
        if !listed.ready {
            listed.ready = true;
            self.ready.push_back(id);
        }
    }

    /// Put session `id` on the timer list if it has a `deadline`, unless it is there.
    #[inline]
    pub(crate) fn arm(&mut self, id: PeerId, listed: &mut Listed, deadline: Instant) {
        if !listed.timers && deadline != Instant::NEVER {
            listed.timers = true;
            self.timers.push(id);
        }
    }

    /// Whether any session is on the ready list.
    #[inline]
    pub(crate) fn any_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// The session whose turn it is to transmit.
    #[inline]
    pub(crate) fn first_ready(&self) -> Option<PeerId> {
        self.ready.front().copied()
    }

    /// The first ready session has nothing more to send: off the list.
    #[inline]
    pub(crate) fn unready_first(&mut self, listed: &mut Listed) {
        self.ready.pop_front();
        listed.ready = false;
    }

    /// The first ready session sent one datagram and has more: the next
    /// session's turn.
    #[inline]
    pub(crate) fn rotate_ready(&mut self) {
        if self.ready.len() > 1 {
            self.ready.rotate_left(1);
        }
    }

    /// The `i`-th session on the timer list.
    #[inline]
    pub(crate) fn timer(&self, i: usize) -> Option<PeerId> {
        self.timers.get(i).copied()
    }

    /// Take the `i`-th session off the timer list (it has no deadline left);
    /// the last one takes its place.
    #[inline]
    pub(crate) fn disarm(&mut self, i: usize, listed: &mut Listed) {
        listed.timers = false;
        self.timers.swap_remove(i);
    }

    /// Sessions on the timer list.
    pub(crate) fn timers(&self) -> impl Iterator<Item = PeerId> + '_ {
        self.timers.iter().copied()
    }
}
