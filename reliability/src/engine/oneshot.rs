//! Control packets sent once, outside any session's queues: RESET replies
//! (PROTOCOL.md §4.3) and CLOSE notices (§4.5). Neither is retransmitted.

use std::collections::VecDeque;

use crate::api::{Stats, Transmit};
use crate::wire::{self, CtrlExt, Header, Packet, PacketType};

/// At most this many RESET replies wait for transmission; more are dropped.
const MAX_PENDING_RESETS: usize = 64;
/// Copies of each CLOSE notice: it is sent once and never retransmitted (the
/// endpoint is going away), so a second copy makes losing it rare.
const CLOSE_COPIES: usize = 2;

/// RESET replies and CLOSE notices waiting for `poll_transmit`, to peer `P`.
#[derive(Debug)]
pub(crate) struct Oneshots<P> {
    queue: VecDeque<(P, Header, CtrlExt)>,
}

impl<P> Default for Oneshots<P> {
    fn default() -> Self {
        Oneshots {
            queue: VecDeque::new(),
        }
    }
}

impl<P: Copy> Oneshots<P> {
    /// Whether nothing waits.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Answer `pkt` from `to`, addressed to a session we do not have, with a
    /// RESET (§4.3). RESET and CLOSE are never answered (a second copy of a
    /// CLOSE finds the session already gone), nor is a packet without a
    /// session id to address.
    pub(crate) fn reset(&mut self, to: P, pkt: &Packet<'_>, incarnation: u32) {
        let unanswered = matches!(pkt.ty, PacketType::Reset | PacketType::Close);
        if unanswered || pkt.hdr.src_sess == 0 || self.pending_resets() >= MAX_PENDING_RESETS {
            return;
        }
        let hdr = Header {
            ty: PacketType::Reset as u8,
            dst_sess: pkt.hdr.src_sess,
            ..Default::default()
        };
        let ctrl = CtrlExt {
            a: incarnation,
            b: pkt.hdr.dst_sess,
        };
        self.queue.push_back((to, hdr, ctrl));
    }

    /// A CLOSE notice to `to` with `hdr` (the session's ids and final ack),
    /// in [`CLOSE_COPIES`] copies (§4.5).
    pub(crate) fn close(&mut self, to: P, hdr: Header, incarnation: u32) {
        let ctrl = CtrlExt {
            a: incarnation,
            b: 0,
        };
        for _ in 0..CLOSE_COPIES {
            self.queue.push_back((to, hdr, ctrl));
        }
    }

    /// Encode the next one into `buf` (at least a control packet long).
    pub(crate) fn transmit(&mut self, buf: &mut [u8], stats: &mut Stats) -> Option<Transmit<P>> {
        let (dst, hdr, ctrl) = self.queue.pop_front()?;
        let len = wire::encode_ctrl(buf, &hdr, &ctrl);
        stats.tx_datagrams += 1;
        if hdr.ty == PacketType::Reset as u8 {
            stats.resets_sent += 1;
        }
        Some(Transmit { dst, len })
    }

    fn pending_resets(&self) -> usize {
        self.queue
            .iter()
            .filter(|(_, h, _)| h.ty == PacketType::Reset as u8)
            .count()
    }
}
