//! Direct messages to and from RDM endpoints on this host (PROTOCOL.md
//! §6.9): a small send whose completion is due once it is copied
//! (FI_INJECT_COMPLETE, the level of every send up to `inject_size` that
//! asks for no other) goes as one record of its own kind into the peer's
//! shared-memory ring, and the peer hands it to its matcher, skipping the
//! session's per-datagram work (header, CRC, sequence and acknowledgement,
//! the retransmission queue) on both sides. The engine says when the
//! session could be overtaken ([`rel::Engine::may_send_direct`]); then,
//! and for anything else, the message goes as datagrams.
//!
//! A record's layout after the ring's record header (native-endian, both
//! sides are on one host): flags (u32: 1 tagged, 2 remote CQ data), a
//! reserved u32 (0), the tag (u64), the CQ data (u64), then the message.

use ofi_xdp_reliability as rel;

use super::{Rdm, SendState};
use crate::datapath::{Iov, Payload, TxOp};
use crate::sys::*;

/// Bytes before a direct message's payload.
const HEADER: usize = 24;
const TAGGED: u32 = 1;
const CQ_DATA: u32 = 2;
/// Pieces of a send pushed into the ring without gathering them first
/// (the header is one more).
const MAX_PIECES: usize = 4;

/// The record header of a message with `tag` and `data`.
fn header(tag: Option<u64>, data: Option<u64>) -> [u8; HEADER] {
    let flags = if tag.is_some() { TAGGED } else { 0 } | if data.is_some() { CQ_DATA } else { 0 };
    let mut h = [0u8; HEADER];
    h[..4].copy_from_slice(&flags.to_ne_bytes());
    h[8..16].copy_from_slice(&tag.unwrap_or(0).to_ne_bytes());
    h[16..].copy_from_slice(&data.unwrap_or(0).to_ne_bytes());
    h
}

/// The message in a record; `None` when it is not one (too short, flags
/// or reserved bits nobody defined).
fn parse(record: &[u8]) -> Option<rel::DirectMessage<'_>> {
    let (h, payload) = record.split_at_checked(HEADER)?;
    let word = |i: usize| {
        h.get(i..i + 4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_ne_bytes)
    };
    let long = |i: usize| {
        h.get(i..i + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_ne_bytes)
    };
    let flags = word(0)?;
    if flags & !(TAGGED | CQ_DATA) != 0 || word(4)? != 0 {
        return None;
    }
    Some(rel::DirectMessage {
        tag: (flags & TAGGED != 0).then_some(long(8)?),
        data: (flags & CQ_DATA != 0).then_some(long(16)?),
        payload,
    })
}

/// An endpoint's direct messages.
#[derive(Debug, Default)]
pub(super) struct Direct {
    /// FI_XDP_LOCAL_DIRECT, an RDM endpoint (not FI_EP_MSG). With a job
    /// key the engine admits direct messages only between endpoints that
    /// showed each other the key ([`rel::Engine::may_send_direct`],
    /// [`rel::Engine::receive_direct`]).
    pub(super) on: bool,
    /// What our area last told our writers: whether we take them.
    taking: bool,
    pub(super) sent: u64,
    pub(super) received: u64,
}

impl Direct {
    /// Direct messages on (`on`) or off; our writers are told by the first
    /// [`Rdm::offer_direct`].
    pub(super) fn new(on: bool) -> Direct {
        Direct {
            on,
            ..Direct::default()
        }
    }
}

impl Rdm {
    /// Sends `op` (to peer `dst`, `len` bytes, completing at `level`) as a
    /// direct message if it may go so; whether it went.
    pub(super) fn send_direct(
        &mut self,
        op: &TxOp,
        dst: u32,
        len: usize,
        level: rel::CompletionLevel,
    ) -> bool {
        if !self.direct.on
            || level != rel::CompletionLevel::Inject
            || dst == self.self_key
            || len > self.engine.config().inject_size
            || !self.engine.may_send_direct(dst)
        {
            return false;
        }
        let Some(route) = self.peers.route(dst, &self.port).filter(|r| r.by_shm()) else {
            return false;
        };
        let h = header(op.tag, op.data);
        let iov = op.payload.iov();
        let sent = if iov.len() <= MAX_PIECES {
            let mut pieces: [&[u8]; MAX_PIECES + 1] = [&[]; MAX_PIECES + 1];
            pieces[0] = &h;
            for (p, &(addr, l)) in pieces[1..].iter_mut().zip(iov) {
                if l > 0 {
                    // SAFETY: inside the posting call the application's
                    // buffers are valid; the endpoint checked that a
                    // non-empty one is not NULL.
                    *p = unsafe { std::slice::from_raw_parts(addr as *const u8, l) };
                }
            }
            self.port
                .send_message(&op.dest, route, &pieces[..=iov.len()])
        } else {
            // SAFETY: as above.
            let whole = unsafe { crate::datapath::contiguous(iov) };
            self.port.send_message(&op.dest, route, &[&h, &whole])
        };
        if !sent {
            return false;
        }
        if op.flags & FI_MORE == 0 {
            self.port.flush_local();
        }
        self.direct.sent += 1;
        // Completions as for the same send through the session: every
        // send completes (counters count them all, fi_cntr(3)); its CQ
        // entry is reported as asked, an fi_inject's never.
        let token = self.token();
        let report = match op.payload {
            Payload::Inject(_) => op.report.then_some(true),
            Payload::Iov(_) => Some(op.report),
        };
        if let Some(report) = report {
            self.sends.insert(
                token,
                SendState {
                    context: op.context,
                    iov: Iov::empty(),
                    report,
                    offer: None,
                },
            );
        }
        self.engine.direct_sent(token, op.tag.is_some(), len);
        true
    }

    /// After a pass: tell our writers whether we take direct messages now
    /// (not while the unexpected store is half full, §6.9).
    pub(super) fn offer_direct(&mut self) {
        let take = self.direct.on && self.engine.takes_direct();
        if take != self.direct.taking {
            self.direct.taking = take;
            self.port.take_direct(take);
        }
    }
}

/// Direct message `record` from peer `key` (in our ring) to the engine's
/// matcher; false (the port counts it refused) when it is no message, or
/// the engine refused it ([`rel::DirectRefused`]: with a job key, a peer
/// that never showed it; no room for another peer).
pub(super) fn deliver(
    engine: &mut rel::Engine<u32>,
    key: u32,
    record: &[u8],
    bufs: &mut super::RecvSide<'_>,
) -> bool {
    parse(record).is_some_and(|m| engine.receive_direct(key, m, bufs).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_says_what_it_carries() {
        let mut r = header(Some(7), None).to_vec();
        r.extend_from_slice(b"hi");
        let m = parse(&r).expect("a message");
        assert_eq!((m.tag, m.data, m.payload), (Some(7), None, &b"hi"[..]));
        let r = header(None, Some(9));
        let m = parse(&r).expect("an empty message");
        assert_eq!((m.tag, m.data, m.payload.len()), (None, Some(9), 0));
    }

    #[test]
    fn records_that_are_no_message_are_refused() {
        assert!(parse(&[0u8; HEADER - 1]).is_none());
        let mut r = header(None, None);
        r[0] = 4;
        assert!(parse(&r).is_none(), "a flag nobody defined");
        let mut r = header(None, None);
        r[5] = 1;
        assert!(parse(&r).is_none(), "reserved bits");
    }
}
