//! Single-copy rendezvous (PROTOCOL.md §6.7): a request-to-send may carry
//! a **pull offer**, bytes that let a receiver on the same host copy the
//! message straight out of the sender's buffer (the provider does it with
//! `process_vm_readv`, as libfabric's `shm` provider does with CMA). The
//! engine never reads another process itself (it is sans-IO): it asks the
//! caller's [`SendBuffers::pull_offer`] for the offer when it builds an RTS,
//! and, when the RTS matches a receive, the caller's [`RecvBuffers::pull`]
//! to copy. A pull that worked is answered CTS|PULLED (the sender completes,
//! no data follows); one that failed is answered by the ordinary CTS, so the
//! data comes through the link and nothing is lost.

use crate::api::{RecvBuffers, SendBuffers};
use crate::wire::{Bytes, MAX_PULL_OFFER};

/// A pull offer as it arrived (a request-to-send's payload), kept until a
/// receive matches: at most [`MAX_PULL_OFFER`] bytes; empty = none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Offer(Vec<u8>);

impl Offer {
    /// The offer in a request-to-send's payload (empty: none).
    pub(crate) fn from_payload(payload: Bytes<'_>) -> Offer {
        if payload.is_empty() || payload.len() > MAX_PULL_OFFER {
            return Offer::default();
        }
        Offer(payload.to_vec())
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.0
    }
}

/// Pulls attempted by the matcher, for [`crate::Stats`].
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PullCounts {
    /// Messages the receiver copied itself.
    pub(crate) pulls: u64,
    /// Offers whose pull failed (the data came after a CTS instead).
    pub(crate) fallbacks: u64,
}

impl PullCounts {
    /// Copy `len` bytes of the offered message into receive `token` at
    /// `offset` through the caller. True: every byte is there.
    pub(crate) fn pull(
        &mut self,
        bufs: &mut impl RecvBuffers,
        token: u64,
        offset: usize,
        len: usize,
        offer: &Offer,
    ) -> bool {
        let ok = bufs.pull(token, offset, len, offer.bytes());
        if ok {
            self.pulls += 1;
        } else {
            self.fallbacks += 1;
        }
        ok
    }
}

/// The pull offer of rendezvous send `token`, written into a
/// request-to-send's payload room `dst`; its length (0: none). An offer
/// longer than the room (or than [`MAX_PULL_OFFER`]) is not sent.
pub(crate) fn write_offer(bufs: &mut impl SendBuffers, token: u64, dst: &mut [u8]) -> usize {
    let room = dst.len().min(MAX_PULL_OFFER);
    let n = bufs.pull_offer(token, &mut dst[..room]);
    if n > room { 0 } else { n }
}
