//! Posting RMA and atomic operations (fi_rma(3), fi_atomic(3);
//! PROTOCOL.md §8). The operation joins its peer's session, which carries
//! it in posting order with the messages to that peer
//! (`session/rma_ops.rs`); the target executes it in its own progress
//! (`session/rma_target.rs`).

use std::hash::Hash;

use super::Engine;
use crate::api::{MAX_MSG_SIZE, Payload, PostError};
use crate::rma::{MAX_ATOMIC_BYTES, RmaKind, RmaOp};
use crate::time::Instant;
use crate::wire::{DATA_HDR_LEN, RMA_HDR_LEN};

impl<P: Copy + Eq + Hash> Engine<P> {
    /// Bytes of an RMA packet besides its payload: the RMA header and the
    /// trailer, a CRC or (authenticated) a nonce and tag, as for DATA.
    fn rma_overhead(&self) -> usize {
        self.shared.data_overhead - DATA_HDR_LEN + RMA_HDR_LEN
    }

    /// Post an RMA read or write or an atomic. It completes (an event with
    /// its token, flags `RMA|WRITE`, `RMA|READ`, `ATOMIC|WRITE` or
    /// `ATOMIC|READ`) when the target's answer arrives: the target executed
    /// it, or refused it (`crate::OpError::Remote`, its memory untouched).
    ///
    /// Errors: [`PostError::QueueFull`] as for sends (the limit counts sends
    /// and RMA operations together) or when inject storage is used up;
    /// [`PostError::TooLarge`] beyond [`MAX_MSG_SIZE`], an injected write
    /// beyond `inject_size`, atomic operands or results beyond
    /// [`MAX_ATOMIC_BYTES`] (or beyond one datagram of this MTU);
    /// [`PostError::Invalid`] for a read with a payload, an atomic whose
    /// operands are not a copy, or remote CQ data on anything but a write.
    pub fn post_rma(&mut self, now: Instant, op: RmaOp<'_, P>) -> Result<(), PostError> {
        let cfg = &self.shared.cfg;
        let (len, copy) = match op.payload {
            Payload::Buffer { len } => (len, None),
            Payload::Inject(b) => (b.len(), Some(b)),
        };
        if len > MAX_MSG_SIZE {
            return Err(PostError::TooLarge);
        }
        match op.kind {
            RmaKind::Write => {
                if copy.is_some_and(|b| b.len() > cfg.inject_size) {
                    return Err(PostError::TooLarge);
                }
            }
            RmaKind::Read => {
                if copy.is_some() || op.data.is_some() {
                    return Err(PostError::Invalid);
                }
            }
            RmaKind::Atomic { result_len, .. } => {
                if copy.is_none() || op.data.is_some() {
                    return Err(PostError::Invalid);
                }
                if len > MAX_ATOMIC_BYTES
                    || result_len > MAX_ATOMIC_BYTES
                    || cfg.mtu < self.rma_overhead() + len.max(result_len)
                {
                    return Err(PostError::TooLarge);
                }
            }
        }
        if let Some(b) = copy
            && self.shared.injects.bytes() + b.len() > cfg.inject_budget
        {
            return Err(PostError::QueueFull);
        }
        if self.shared.sends >= cfg.tx_queue_len {
            return Err(PostError::QueueFull);
        }
        let peer = self.peer_for(op.dst)?;
        self.peers[peer].post_rma(now, &op, &mut self.shared);
        Ok(())
    }
}
