//! Direct messages (PROTOCOL.md §6.9): a whole small message between two
//! endpoints on one host, carried by a lossless, ordered shared-memory ring
//! that the caller owns, handed to the receiver's matcher without a
//! session: no sequence number, acknowledgement or retransmission, since
//! nothing on that path is lost, duplicated or reordered.
//!
//! With authentication (§11.8) a message goes direct only over a session whose
//! authenticated handshake showed that the peer holds the job key, and a
//! receiver takes direct messages only from peers that showed it so: the
//! channel is writable by the processes of our user alone, and the key then
//! keeps apart what it keeps apart on the wire, jobs (a process without the
//! key, or with another, never gets a direct message taken).
//!
//! What keeps the messages of one sender in order (FI_ORDER_SAS) when some
//! go direct and some through the session: a message goes direct only
//! while the session to that peer has nothing queued, in flight or
//! unacknowledged ([`Engine::may_send_direct`]) — every earlier message
//! has then been matched by the receiver (it acknowledges only what it
//! processed in order), and what comes later is behind the direct message
//! in the same ring.

use std::hash::Hash;

use super::Engine;
use super::events::send_completion;
use super::seam::MsgInfo;
use crate::api::RecvBuffers;
use crate::wire::{Bytes, flags as wf};

/// A direct message as it arrived.
#[derive(Clone, Copy, Debug)]
pub struct DirectMessage<'a> {
    /// `Some(tag)` for a tagged message.
    pub tag: Option<u64>,
    /// `Some(data)` with remote CQ data (FI_REMOTE_CQ_DATA).
    pub data: Option<u64>,
    /// The whole message.
    pub payload: &'a [u8],
}

impl DirectMessage<'_> {
    /// The wire flags the same message would carry in a DATA packet.
    fn hflags(&self) -> u16 {
        let mut f = 0;
        if self.tag.is_some() {
            f |= wf::TAGGED;
        }
        if self.data.is_some() {
            f |= wf::CQ_DATA;
        }
        f
    }
}

/// Why [`Engine::receive_direct`] dropped a direct message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirectRefused {
    /// With authentication: its sender never showed us the job key.
    Unauthenticated,
    /// No room for another peer ([`crate::Config::max_peers`]).
    TooManyPeers,
    /// Longer than a message can be.
    TooLarge,
}

impl<P: Copy + Eq + Hash> Engine<P> {
    /// Whether a message to `to` may go direct now: we have no session
    /// with it, or one with no send, RMA or control message queued and no
    /// packet in flight — nothing it sent could be overtaken. With
    /// authentication the session must be open on both sides (its
    /// handshake verified: the peer holds the job key, and the peer
    /// acknowledged or sent a packet in it), so the first message to a
    /// peer goes through the session (PROTOCOL.md §11.8).
    pub fn may_send_direct(&mut self, to: P) -> bool {
        let authenticated = self.shared.auth.is_some();
        match self.peers.lookup(to) {
            Some(id) => {
                let s = &self.peers[id];
                s.sends_nothing() && (!authenticated || s.peer_has_it_open())
            }
            None => !authenticated,
        }
    }

    /// Whether the caller should take direct messages now: only while the
    /// unexpected store has room for what may be on its way (see
    /// [`Engine::receive_direct`]).
    pub fn takes_direct(&self) -> bool {
        self.matcher.has_room_for_direct()
    }

    /// Direct message `m` from `from`: into a matching posted receive, or
    /// queued as unexpected (whatever the budgets: its sender completed it
    /// already; the caller bounds these by refusing them while
    /// [`Engine::takes_direct`] says no). Its completion is an event, as
    /// for any received message. Dropped: with authentication, from a peer
    /// that never showed us the job key in a verified handshake (counted
    /// as `unauthenticated`); or when there is no room for another peer.
    pub fn receive_direct(
        &mut self,
        from: P,
        m: DirectMessage<'_>,
        bufs: &mut impl RecvBuffers,
    ) -> Result<(), DirectRefused> {
        let peer = if self.shared.auth.is_some() {
            // A peer that showed the key has its entry already.
            match self.peers.lookup(from) {
                Some(id) if self.peers[id].holds_the_key() => id,
                _ => {
                    self.shared.stats.unauthenticated += 1;
                    return Err(DirectRefused::Unauthenticated);
                }
            }
        } else {
            self.peer_for(from)
                .map_err(|_| DirectRefused::TooManyPeers)?
        };
        let total = u32::try_from(m.payload.len()).map_err(|_| DirectRefused::TooLarge)?;
        let info = MsgInfo {
            peer,
            from,
            msg_id: 0,
            total,
            tag: m.tag.unwrap_or(0),
            data: m.data.unwrap_or(0),
            hflags: m.hflags(),
        };
        let (matcher, events, mut down) = self.matcher();
        matcher.message_direct(info, Bytes::One(m.payload), events, &mut down, bufs);
        Ok(())
    }

    /// A send the caller delivered direct (token `token`, `len` bytes,
    /// tagged or not) is complete: its completion event, as for a send
    /// through the session (which has one for every send, counted by
    /// fi_cntr(3) whether or not a CQ entry is reported).
    pub fn direct_sent(&mut self, token: u64, tagged: bool, len: usize) {
        let hflags = if tagged { wf::TAGGED } else { 0 };
        self.shared
            .events
            .complete(send_completion(token, hflags, len, None));
    }
}
