//! The local peers a [`super::LocalPath`] sends to, by address. Sends come
//! in runs to one peer (a ping-pong has only one), so the last one found is
//! checked first: a comparison instead of hashing the address with the
//! keyed SipHash on every datagram, which kept that lookup on the latency
//! path of every same-host send. A sender that keeps its peers' routes
//! (`port/route.rs`) keeps where each peer's entry is too
//! ([`LocalPeers::find`]), so runs to several peers find theirs at once as
//! well. The map stays keyed SipHash because its keys come from what the
//! engine answers, i.e. from what peers send us.

use std::collections::HashMap;
use std::net::SocketAddr;

pub struct LocalPeers<P> {
    entries: Vec<(SocketAddr, P)>,
    index: HashMap<SocketAddr, usize>,
    /// Where the last lookup found its peer (checked by address, so a
    /// stale position is harmless).
    last: usize,
}

impl<P> Default for LocalPeers<P> {
    fn default() -> Self {
        LocalPeers {
            entries: Vec::new(),
            index: HashMap::new(),
            last: 0,
        }
    }
}

impl<P> LocalPeers<P> {
    pub fn get_mut(&mut self, to: &SocketAddr) -> Option<&mut P> {
        let i = self.find(self.last, to)?;
        self.at_mut(i)
    }

    /// Where `to`'s entry is: at `hint` if it is there (checked by
    /// address, so a stale hint is harmless), else at the last one found,
    /// else as the index says.
    #[inline]
    pub fn find(&mut self, hint: usize, to: &SocketAddr) -> Option<usize> {
        let at = |i: usize| self.entries.get(i).is_some_and(|(a, _)| a == to);
        if at(hint) {
            return Some(hint);
        }
        if !at(self.last) {
            self.last = *self.index.get(to)?;
        }
        Some(self.last)
    }

    /// The entry at `i` (from [`LocalPeers::find`] or [`LocalPeers::insert`]).
    #[inline]
    pub fn at_mut(&mut self, i: usize) -> Option<&mut P> {
        self.entries.get_mut(i).map(|(_, p)| p)
    }

    /// Puts `p` at `to` (replacing what was there) and returns where.
    pub fn insert(&mut self, to: SocketAddr, p: P) -> usize {
        let i = match self.index.get(&to) {
            Some(&i) => {
                if let Some(e) = self.entries.get_mut(i) {
                    e.1 = p;
                }
                i
            }
            None => {
                self.entries.push((to, p));
                let i = self.entries.len() - 1;
                self.index.insert(to, i);
                i
            }
        };
        self.last = i;
        i
    }

    pub fn remove(&mut self, to: &SocketAddr) {
        let Some(i) = self.index.remove(to) else {
            return;
        };
        self.entries.swap_remove(i);
        if let Some((moved, _)) = self.entries.get(i) {
            self.index.insert(*moved, i);
        }
    }

    /// Every peer, with its address.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (SocketAddr, &mut P)> {
        self.entries.iter_mut().map(|(a, p)| (*a, p))
    }

    /// Keeps the peers for which `f` is true.
    pub fn retain(&mut self, mut f: impl FnMut(&SocketAddr, &mut P) -> bool) {
        self.entries.retain_mut(|(a, p)| f(a, p));
        self.index = self
            .entries
            .iter()
            .enumerate()
            .map(|(i, (a, _))| (*a, i))
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn finds_inserts_removes_and_retains() {
        let mut t = LocalPeers::default();
        assert!(t.get_mut(&sa(1)).is_none());
        let one = t.insert(sa(1), 10);
        *t.at_mut(one).unwrap() += 1;
        t.insert(sa(2), 20);
        t.insert(sa(3), 30);
        assert_eq!(t.get_mut(&sa(1)).copied(), Some(11));
        assert_eq!(t.get_mut(&sa(1)).copied(), Some(11), "the cached one");
        t.insert(sa(2), 21);
        assert_eq!(t.get_mut(&sa(2)).copied(), Some(21), "replaced");
        t.remove(&sa(1));
        assert!(t.get_mut(&sa(1)).is_none());
        assert_eq!(t.get_mut(&sa(3)).copied(), Some(30), "moved by the removal");
        assert_eq!(t.get_mut(&sa(2)).copied(), Some(21));
        t.retain(|a, _| *a != sa(2));
        assert!(t.get_mut(&sa(2)).is_none());
        assert_eq!(t.get_mut(&sa(3)).copied(), Some(30));
        t.remove(&sa(9));
        assert_eq!(t.get_mut(&sa(3)).copied(), Some(30));
    }

    #[test]
    fn a_hint_is_taken_only_where_it_holds_its_peer() {
        let mut t = LocalPeers::default();
        let (one, two) = (t.insert(sa(1), 10), t.insert(sa(2), 20));
        assert_eq!(t.find(two, &sa(2)), Some(two));
        assert_eq!(t.find(two, &sa(1)), Some(one), "a wrong hint: looked up");
        assert_eq!(t.find(usize::MAX, &sa(2)), Some(two), "no hint");
        t.remove(&sa(1));
        assert_eq!(t.find(two, &sa(2)), Some(0), "moved by the removal");
        assert_eq!(t.find(0, &sa(1)), None);
    }
}
