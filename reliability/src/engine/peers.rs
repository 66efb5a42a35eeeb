//! The peer table: the state the engine keeps per remote endpoint, addressed
//! by [`PeerId`], and the map from the caller's peer key to it.

use std::collections::HashMap;
use std::hash::Hash;
use std::ops::{Index, IndexMut};

use crate::slab::FxBuild;

/// A peer's place in the [`PeerTable`]: given on first use, stable for the
/// engine's lifetime (peers are never removed, only their queues released).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PeerId(u32);

impl PeerId {
    #[inline]
    fn index(self) -> usize {
        self.0 as usize
    }

    #[cfg(test)]
    pub(crate) fn for_test(i: u32) -> Self {
        PeerId(i)
    }
}

/// Peers by [`PeerId`], and by the caller's key `P` through a hash map with a
/// one-entry cache in front (traffic comes in runs from the same peer, and a
/// ping-pong has only one).
#[derive(Debug)]
pub(crate) struct PeerTable<P, T> {
    items: Vec<T>,
    by_key: HashMap<P, PeerId, FxBuild>,
    last: Option<(P, PeerId)>,
}

impl<P: Copy + Eq + Hash, T> PeerTable<P, T> {
    pub(crate) fn new() -> Self {
        PeerTable {
            items: Vec::new(),
            by_key: HashMap::default(),
            last: None,
        }
    }

    /// Number of peers with state.
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// The peer of `key`, through the last-peer cache.
    #[inline]
    pub(crate) fn lookup(&mut self, key: P) -> Option<PeerId> {
        if let Some((k, id)) = self.last
            && k == key
        {
            return Some(id);
        }
        let id = *self.by_key.get(&key)?;
        self.last = Some((key, id));
        Some(id)
    }

    /// The peer of `key` without touching the cache.
    pub(crate) fn get(&self, key: P) -> Option<PeerId> {
        self.by_key.get(&key).copied()
    }

    /// Add the state `make(id)` for `key`, a key not yet in the table.
    pub(crate) fn insert(&mut self, key: P, make: impl FnOnce(PeerId) -> T) -> PeerId {
        let id = PeerId(self.items.len() as u32);
        self.items.push(make(id));
        self.by_key.insert(key, id);
        id
    }

    /// Every peer's state, in the order they were added.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.items.iter()
    }

    /// Every peer's id, in the order they were added.
    pub(crate) fn ids(&self) -> impl Iterator<Item = PeerId> + use<P, T> {
        (0..self.items.len() as u32).map(PeerId)
    }
}

impl<P, T> Index<PeerId> for PeerTable<P, T> {
    type Output = T;
    #[inline]
    fn index(&self, id: PeerId) -> &T {
        &self.items[id.index()]
    }
}

impl<P, T> IndexMut<PeerId> for PeerTable<P, T> {
    #[inline]
    fn index_mut(&mut self, id: PeerId) -> &mut T {
        &mut self.items[id.index()]
    }
}

/// Bytes a peer adds to the table besides its state: its hash-map slot (key,
/// id and a control byte).
pub(crate) const fn map_slot_bytes<P>() -> usize {
    core::mem::size_of::<(P, PeerId)>() + 1
}
