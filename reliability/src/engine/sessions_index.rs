//! Our local session ids and whose they are: a datagram names the session
//! it belongs to by its `dst_sess` (PROTOCOL.md §4.6), so the caller finds
//! its peer from the header, whichever UDP source port it came from.

use std::cell::Cell;
use std::collections::HashMap;

use super::peers::PeerId;
use crate::rng::SplitMix64;
use crate::slab::FxBuild;

/// Local session id → peer, for every session that has one (HELLO_SENT or
/// ESTABLISHED). Ids are unique among the engine's sessions: a new one is
/// drawn again until it is. Keys are our own random ids, so the fast
/// hasher is safe: forged ids are only looked up, never inserted.
#[derive(Debug, Default)]
pub(crate) struct SessionIndex {
    by_id: HashMap<u32, PeerId, FxBuild>,
    /// The last id found and its peer (id 0: none): traffic comes in runs
    /// of one session, and a ping-pong has only one; this skips the hash.
    last: Cell<(u32, Option<PeerId>)>,
}

impl SessionIndex {
    /// A new local session id for `peer`, replacing `old` (0: none).
    pub(crate) fn fresh(&mut self, rng: &mut SplitMix64, peer: PeerId, old: u32) -> u32 {
        self.remove(old);
        loop {
            let id = rng.nonzero_u32();
            if let std::collections::hash_map::Entry::Vacant(e) = self.by_id.entry(id) {
                e.insert(peer);
                return id;
            }
        }
    }

    /// `id` (0: none) is no session's any more.
    pub(crate) fn remove(&mut self, id: u32) {
        if id != 0 {
            self.by_id.remove(&id);
            if self.last.get().0 == id {
                self.last.set((0, None));
            }
        }
    }

    /// The peer whose session has local id `id`.
    #[inline]
    pub(crate) fn get(&self, id: u32) -> Option<PeerId> {
        let (last, peer) = self.last.get();
        if last == id && id != 0 {
            return peer;
        }
        let peer = self.by_id.get(&id).copied();
        if peer.is_some() {
            self.last.set((id, peer));
        }
        peer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_forgotten_when_replaced() {
        let mut ix = SessionIndex::default();
        let mut rng = SplitMix64::new(7);
        let a = ix.fresh(&mut rng, PeerId::for_test(0), 0);
        let b = ix.fresh(&mut rng, PeerId::for_test(1), 0);
        assert_ne!(a, b);
        assert_eq!(ix.get(a), Some(PeerId::for_test(0)));
        let a2 = ix.fresh(&mut rng, PeerId::for_test(0), a);
        assert_eq!(ix.get(a), None, "the replaced id names no session");
        assert_eq!(ix.get(a2), Some(PeerId::for_test(0)));
        ix.remove(b);
        assert_eq!(ix.get(b), None);
        // The cached last id is forgotten with it.
        assert_eq!(ix.get(a2), Some(PeerId::for_test(0)));
        ix.remove(a2);
        assert_eq!(ix.get(a2), None);
        ix.remove(0);
        assert_eq!(ix.get(0), None);
    }
}
