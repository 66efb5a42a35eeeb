//! Unexpected messages (fi_msg(3), fi_tagged(3)): messages that arrived
//! before a receive matching them was posted, queued in arrival order per
//! kind (untagged, tagged). An eager message's data is buffered here (a
//! second copy, bounded by `Config::unexpected_budget` bytes in total and
//! `Config::unexpected_peer_budget` per peer); beyond those it is kept as
//! its header only and its data fetched when a receive matches, like a
//! rendezvous request, which is only a queue entry (PROTOCOL.md §6.3,
//! §6.5). Entries are bounded by `Config::unexpected_max` in total and
//! `Config::unexpected_peer_max` per peer: beyond them the session refuses
//! the message (§5.4).

use std::collections::{HashMap, VecDeque};

use super::super::peers::PeerId;
use super::super::pull::Offer;
use super::super::seam::MsgInfo;
use super::placement::Dest;
use crate::api::{Config, TagMatch};
use crate::slab::{FxBuild, Slab, slab_key};
use crate::wire::{Bytes, flags as wf};

slab_key!(
    /// A message in the [`Unexpected`] store.
    UnexpId
);

/// An unexpected message (eager data buffered, or a rendezvous request).
#[derive(Debug)]
pub(super) struct Unexp<P> {
    pub(super) info: MsgInfo<P>,
    /// The sender's session when it arrived: a CTS or DONE for it goes only
    /// to that session.
    pub(super) sess: u32,
    pub(super) buf: Vec<u8>,
    pub(super) received: u32,
    /// Every byte has arrived (eager).
    pub(super) complete: bool,
    /// Only its header is here: its data comes after a CTS (a rendezvous
    /// request, or a deferred eager message).
    pub(super) rndv: bool,
    /// An eager message kept as its header only, over budget (§6.5).
    pub(super) deferred: bool,
    /// A rendezvous request's pull offer (§6.7; empty: none).
    pub(super) offer: Offer,
    /// Reserved by FI_PEEK | FI_CLAIM with this key.
    pub(super) claimed: Option<u64>,
    /// A receive took it (or FI_DISCARD dropped it) while its data was
    /// still arriving: where the data goes once complete.
    pub(super) attached: Option<Dest>,
    /// Bytes counted against the budget.
    cost: usize,
}

/// The unexpected messages and their two queues.
#[derive(Debug)]
pub(super) struct Unexpected<P> {
    store: Slab<UnexpId, Unexp<P>>,
    msg: VecDeque<UnexpId>,
    tagged: VecDeque<UnexpId>,
    /// Bytes buffered now, and the most ever.
    bytes: usize,
    bytes_max: usize,
    budget: usize,
    max_count: usize,
    peer_budget: usize,
    peer_max: usize,
    /// Bytes buffered and entries stored per peer.
    per_peer: HashMap<PeerId, PeerUse, FxBuild>,
    /// Eager messages ever kept as their header only.
    deferred_total: u64,
}

/// What one peer's unexpected messages take.
#[derive(Clone, Copy, Debug, Default)]
struct PeerUse {
    bytes: usize,
    count: usize,
}

impl<P: Copy + Eq> Unexpected<P> {
    pub(super) fn new(cfg: &Config) -> Self {
        Unexpected {
            store: Slab::default(),
            msg: VecDeque::new(),
            tagged: VecDeque::new(),
            bytes: 0,
            bytes_max: 0,
            budget: cfg.unexpected_budget,
            max_count: cfg.unexpected_max,
            peer_budget: cfg.unexpected_peer_budget,
            peer_max: cfg.unexpected_peer_max,
            per_peer: HashMap::default(),
            deferred_total: 0,
        }
    }

    /// Eager messages kept as their header only, since the start.
    pub(super) fn deferred_total(&self) -> u64 {
        self.deferred_total
    }

    /// Messages stored (queued, or taken by a receive and still arriving).
    pub(super) fn len(&self) -> usize {
        self.store.len()
    }

    /// Bytes buffered now.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// The most bytes ever buffered at once.
    pub(super) fn bytes_max(&self) -> usize {
        self.bytes_max
    }

    /// Queue message `info`, which arrived in session `sess` with its first
    /// `payload`, if the budget allows.
    /// An eager message whose data does not fit the budgets is admitted
    /// as its header only (`deferred`). `None`: no room even for that.
    pub(super) fn admit(&mut self, info: MsgInfo<P>, sess: u32, payload: Bytes) -> Option<UnexpId> {
        let used = self.per_peer.get(&info.peer).copied().unwrap_or_default();
        if self.store.len() >= self.max_count || used.count >= self.peer_max {
            return None;
        }
        let eager = info.hflags & wf::RNDV == 0;
        let size = info.total as usize;
        let fits = self.bytes + size <= self.budget && used.bytes + size <= self.peer_budget;
        let deferred = eager && !fits;
        Some(self.store_message(info, sess, payload, deferred))
    }

    /// Queue direct message `info` (PROTOCOL.md §6.9), whole in `payload`,
    /// whatever the budgets say: its sender has completed it, nobody could
    /// send it again. The reader keeps these within bounds by taking direct
    /// messages only while [`Unexpected::has_room_for_direct`].
    pub(super) fn admit_direct(&mut self, info: MsgInfo<P>, payload: Bytes) -> UnexpId {
        self.store_message(info, 0, payload, false)
    }

    /// Whether the store is less than half full, in bytes and in entries:
    /// direct messages sent before their senders see a refusal fit in the
    /// other half (each is small, and a ring holds a bounded number).
    pub(super) fn has_room_for_direct(&self) -> bool {
        self.bytes <= self.budget / 2 && self.store.len() <= self.max_count / 2
    }

    fn store_message(
        &mut self,
        info: MsgInfo<P>,
        sess: u32,
        payload: Bytes,
        deferred: bool,
    ) -> UnexpId {
        let eager = info.hflags & wf::RNDV == 0;
        let rndv = !eager || deferred;
        let cost = if rndv { 0 } else { info.total as usize };
        self.deferred_total += u64::from(deferred);
        self.bytes += cost;
        self.bytes_max = self.bytes_max.max(self.bytes);
        let u = self.per_peer.entry(info.peer).or_default();
        u.bytes += cost;
        u.count += 1;
        let mut buf = Vec::new();
        if !rndv {
            buf.resize(info.total as usize, 0);
            payload.copy_to(&mut buf);
        }
        let received = if rndv { 0 } else { payload.len() as u32 };
        // A deferred eager message's payload is data, not an offer.
        let offer = if eager {
            Offer::default()
        } else {
            Offer::from_payload(payload)
        };
        let id = self.store.insert(Unexp {
            info,
            sess,
            buf,
            received,
            complete: !rndv && received >= info.total,
            rndv,
            deferred,
            offer,
            claimed: None,
            attached: None,
            cost,
        });
        if info.hflags & wf::TAGGED != 0 {
            self.tagged.push_back(id);
        } else {
            self.msg.push_back(id);
        }
        id
    }

    /// The first queued message, in arrival order, of the kind `tagged`
    /// from `src` (any: `None`) matching `tag`, claimed by `claim`.
    pub(super) fn find(
        &self,
        tagged: bool,
        src: Option<P>,
        tag: Option<TagMatch>,
        claim: Option<u64>,
    ) -> Option<UnexpId> {
        let q = if tagged { &self.tagged } else { &self.msg };
        q.iter().copied().find(|&id| {
            let Some(u) = self.store.get(id) else {
                return false;
            };
            if u.claimed != claim || u.attached.is_some() {
                return false;
            }
            if let Some(s) = src
                && u.info.from != s
            {
                return false;
            }
            tag.is_none_or(|t| t.matches(u.info.tag))
        })
    }

    /// The queued message claimed with `key`.
    pub(super) fn find_claimed(&self, key: u64) -> Option<UnexpId> {
        self.msg
            .iter()
            .chain(self.tagged.iter())
            .copied()
            .find(|&id| self.store.get(id).is_some_and(|u| u.claimed == Some(key)))
    }

    /// Rendezvous requests of `peer` (its session failed: they can no longer
    /// be served).
    pub(super) fn rendezvous_from(&self, peer: PeerId) -> Vec<UnexpId> {
        self.store
            .iter()
            .filter(|(_, u)| u.info.peer == peer && u.rndv)
            .map(|(id, _)| id)
            .collect()
    }

    pub(super) fn get(&self, id: UnexpId) -> Option<&Unexp<P>> {
        self.store.get(id)
    }

    pub(super) fn get_mut(&mut self, id: UnexpId) -> Option<&mut Unexp<P>> {
        self.store.get_mut(id)
    }

    /// Take message `id` out of its queue (it stays stored).
    pub(super) fn unqueue(&mut self, id: UnexpId) {
        for q in [&mut self.msg, &mut self.tagged] {
            if let Some(pos) = q.iter().position(|&x| x == id) {
                q.remove(pos);
                return;
            }
        }
    }

    /// Put message `id` back at the head of its queue.
    pub(super) fn requeue_front(&mut self, id: UnexpId) {
        let Some(u) = self.store.get(id) else { return };
        if u.info.hflags & wf::TAGGED != 0 {
            self.tagged.push_front(id);
        } else {
            self.msg.push_front(id);
        }
    }

    /// Remove message `id` (already out of its queue) and release its bytes.
    pub(super) fn take(&mut self, id: UnexpId) -> Option<Unexp<P>> {
        let u = self.store.remove(id)?;
        self.bytes -= u.cost;
        if let Some(p) = self.per_peer.get_mut(&u.info.peer) {
            p.bytes -= u.cost;
            p.count -= 1;
            if p.count == 0 {
                self.per_peer.remove(&u.info.peer);
            }
        }
        Some(u)
    }
}
