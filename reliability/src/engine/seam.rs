//! The seam between the sessions (per peer: reliable, ordered packet
//! streams, PROTOCOL.md §4–5) and the matcher (engine-wide: receives and
//! messages, §6). Only the values here cross it.
//!
//! Up, in stream order: a session hands the matcher each message's first
//! packet ([`MsgInfo`] and payload; the matcher places it or refuses it,
//! §5.4) and the segments that follow (their bytes go where the
//! [`Placement`] of the message's [`Incoming`] record says). Down: the
//! matcher's decisions for the peer — a CTS or DONE to send ([`Control`],
//! §6.3, §6.4) and the rest of a message to expect ([`Incoming`]) — through
//! the [`Sessions`] trait, which also answers whether a peer's session is
//! still the one a queued message came in.

pub(crate) use super::matcher::Placement;
use super::peers::PeerId;

/// Matching information of an incoming message: the fields of its FIRST
/// packet (§2.2, §6.2) and who sent it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MsgInfo<P> {
    pub(crate) peer: PeerId,
    /// The sender's key: a directed receive names it, completions report it.
    pub(crate) from: P,
    pub(crate) msg_id: u32,
    pub(crate) total: u32,
    pub(crate) tag: u64,
    pub(crate) data: u64,
    /// Wire flags TAGGED | CQ_DATA | DC | RNDV.
    pub(crate) hflags: u16,
}

/// A sequenced control message the matcher asks a session to send.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Control {
    /// Clear-to-send for rendezvous message `msg_id`: send `max_len` bytes
    /// of it, or (`discard`) none (§6.3), or none because the receiver
    /// copied those bytes itself with the sender's pull offer (`pulled`,
    /// §6.7).
    Cts {
        msg_id: u32,
        max_len: u32,
        discard: bool,
        pulled: bool,
    },
    /// Message `msg_id` was placed or discarded (§6.4).
    Done { msg_id: u32 },
    /// Eager message `msg_id` is kept as its header only (over the memory
    /// budget): its sender holds the data until a CTS fetches it (§6.5).
    Defer { msg_id: u32 },
}

/// A message whose bytes are still arriving: the session counts them in, the
/// matcher says where they go.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Incoming<P> {
    pub(crate) info: MsgInfo<P>,
    /// Bytes the sender will send (eager: all; rendezvous: what the CTS accepted).
    pub(crate) expect: u32,
    pub(crate) received: u32,
    pub(crate) placement: Placement,
    /// Its bytes come in DATA packets flagged RNDV (sent after a CTS:
    /// rendezvous, or the fetch of a deferred message), not as eager
    /// segments — after a DEFER both may arrive for one message (§6.5).
    pub(crate) rndv_data: bool,
}

impl<P> Incoming<P> {
    /// Whether every byte the sender will send has arrived.
    #[inline]
    pub(crate) fn is_complete(&self) -> bool {
        self.received >= self.expect
    }
}

/// What the matcher asks of, and hands down to, the sessions.
pub(crate) trait Sessions<P> {
    /// Whether `peer`'s session is established and, with `sess`, is still
    /// the one whose remote id is `sess` (the one a queued message came in).
    fn is_current(&self, peer: PeerId, sess: Option<u32>) -> bool;
    /// Send `c` on `peer`'s stream.
    fn send_control(&mut self, peer: PeerId, c: Control);
    /// The rest of message `m` will come from `peer`.
    fn expect(&mut self, peer: PeerId, m: Incoming<P>);
}
