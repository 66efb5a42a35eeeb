//! The reordering buffer of a session's receive stream (PROTOCOL.md §5.2):
//! packets that arrived after a gap, held (a second copy) until the gap
//! fills, within `Config::reorder_budget` over all sessions.

use std::collections::VecDeque;

use crate::wire::{Bytes, CtrlExt, DataExt, Packet, PacketType, RmaExt};

/// Fixed bookkeeping cost charged per held packet against the budget.
const REORDER_OVERHEAD: usize = 64;

/// A sequenced packet, as the receive stream processes it in order.
#[derive(Clone, Copy, Debug)]
pub(super) struct InOrder<'a> {
    pub(super) ty: PacketType,
    pub(super) flags: u16,
    pub(super) data: DataExt,
    pub(super) ctrl: CtrlExt,
    pub(super) rma: RmaExt,
    pub(super) payload: Bytes<'a>,
}

impl<'a> InOrder<'a> {
    pub(super) fn of(pkt: &Packet<'a>) -> Self {
        InOrder {
            ty: pkt.ty,
            flags: pkt.hdr.flags,
            data: pkt.data,
            ctrl: pkt.ctrl,
            rma: pkt.rma,
            payload: pkt.payload,
        }
    }
}

/// An out-of-order packet held until the hole before it fills.
#[derive(Debug)]
pub(super) struct Held {
    ty: PacketType,
    flags: u16,
    data: DataExt,
    ctrl: CtrlExt,
    rma: RmaExt,
    payload: Vec<u8>,
}

impl Held {
    /// The packet, to process in order now.
    pub(super) fn in_order(&self) -> InOrder<'_> {
        InOrder {
            ty: self.ty,
            flags: self.flags,
            data: self.data,
            ctrl: self.ctrl,
            rma: self.rma,
            payload: Bytes::One(&self.payload),
        }
    }

    fn cost(&self) -> usize {
        self.payload.len() + REORDER_OVERHEAD
    }
}

/// What became of a packet offered to [`ReorderBuffer::hold`].
pub(super) enum Hold {
    Held,
    /// Already held.
    Duplicate,
    /// The budget is used up: dropped (the sender retransmits).
    NoRoom,
}

/// Held packets; slot i is sequence number `expected + 1 + i`.
#[derive(Debug, Default)]
pub(super) struct ReorderBuffer {
    slots: VecDeque<Option<Box<Held>>>,
}

impl ReorderBuffer {
    pub(super) fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Hold `pkt` in `slot`, counting its bytes in `held_bytes` (all
    /// sessions' total) unless that would pass `budget`.
    pub(super) fn hold(
        &mut self,
        slot: usize,
        pkt: &Packet<'_>,
        held_bytes: &mut usize,
        budget: usize,
    ) -> Hold {
        let cost = pkt.payload.len() + REORDER_OVERHEAD;
        if self.slots.len() <= slot {
            self.slots.resize_with(slot + 1, || None);
        }
        if self.slots[slot].is_some() {
            Hold::Duplicate
        } else if *held_bytes + cost <= budget {
            self.slots[slot] = Some(Box::new(Held {
                ty: pkt.ty,
                flags: pkt.hdr.flags,
                data: pkt.data,
                ctrl: pkt.ctrl,
                rma: pkt.rma,
                payload: pkt.payload.to_vec(),
            }));
            *held_bytes += cost;
            Hold::Held
        } else {
            Hold::NoRoom
        }
    }

    /// `expected` moved on by one: the packet held for the new `expected`,
    /// if any, its bytes no longer counted in `held_bytes`.
    pub(super) fn advance(&mut self, held_bytes: &mut usize) -> Option<Box<Held>> {
        let held = self.slots.pop_front()??;
        *held_bytes -= held.cost();
        Some(held)
    }

    /// Drop everything held (receiver-not-ready, §5.4; or the session ended).
    pub(super) fn clear(&mut self, held_bytes: &mut usize) {
        for held in self.slots.drain(..).flatten() {
            *held_bytes -= held.cost();
        }
    }

    /// The selective-ack bitmap (§2.1): bit i set = sequence
    /// `expected + 1 + i` is held.
    pub(super) fn sack(&self) -> u64 {
        let mut sack = 0u64;
        for (i, s) in self.slots.iter().take(64).enumerate() {
            if s.is_some() {
                sack |= 1 << i;
            }
        }
        sack
    }
}
