//! The anti-replay window of a session's receive direction (PROTOCOL.md
//! §11.6): a datagram whose nonce counter was seen before, or is older than
//! the window, is rejected (the sliding bitmap of RFC 4303 §3.4.3, kept as
//! a ring of words as RFC 6479 describes).

/// Counters the window remembers below the highest seen. Reordering deeper
/// than this costs a retransmission, never a wrong acceptance.
pub(crate) const WINDOW: u64 = 1024;
const WORDS: usize = (WINDOW / 64) as usize;

/// Which of the last [`WINDOW`] counters were seen.
#[derive(Clone, Debug)]
pub(crate) struct ReplayWindow {
    /// One past the highest counter accepted (0: none yet).
    top: u64,
    bits: [u64; WORDS],
}

impl Default for ReplayWindow {
    fn default() -> Self {
        ReplayWindow {
            top: 0,
            bits: [0; WORDS],
        }
    }
}

impl ReplayWindow {
    #[inline]
    fn slot(c: u64) -> (usize, u64) {
        (((c / 64) % WORDS as u64) as usize, 1 << (c % 64))
    }

    /// Whether counter `c` is new; if so it is marked seen. Call only for a
    /// datagram whose tag verified.
    pub(crate) fn accept(&mut self, c: u64) -> bool {
        if c >= self.top {
            // Clear the words the window slides past, then mark.
            let first_new_word = self.top.div_ceil(64);
            let last_word = c / 64;
            if last_word >= first_new_word {
                let n = (last_word - first_new_word + 1).min(WORDS as u64);
                for k in 0..n {
                    let (w, _) = Self::slot((first_new_word + k) * 64);
                    self.bits[w] = 0;
                }
            }
            let (w, b) = Self::slot(c);
            self.bits[w] |= b;
            self.top = c + 1;
            return true;
        }
        if self.top - c > WINDOW - 64 {
            // Older than the window keeps (its word may already be reused).
            return false;
        }
        let (w, b) = Self::slot(c);
        if self.bits[w] & b != 0 {
            return false;
        }
        self.bits[w] |= b;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_reordered_duplicate_and_old() {
        let mut w = ReplayWindow::default();
        assert!(w.accept(0));
        assert!(!w.accept(0));
        assert!(w.accept(5));
        assert!(w.accept(3));
        assert!(!w.accept(3));
        assert!(!w.accept(5));
        assert!(w.accept(1000));
        assert!(w.accept(900));
        assert!(!w.accept(900));
        // Far ahead: everything before is forgotten and refused as old.
        assert!(w.accept(100_000));
        assert!(!w.accept(1000));
        assert!(!w.accept(99_000));
        assert!(w.accept(99_990));
        assert!(!w.accept(99_990));
    }

    #[test]
    fn matches_a_model_on_a_random_walk() {
        let mut w = ReplayWindow::default();
        let mut seen = std::collections::HashSet::new();
        let mut top = 0u64;
        let mut x = 12345u64;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let c = (top + (x % 300)).saturating_sub(250);
            let got = w.accept(c);
            if got {
                assert!(seen.insert(c), "{c} accepted twice");
                top = top.max(c + 1);
            } else {
                assert!(
                    seen.contains(&c) || top - c > WINDOW - 64,
                    "{c} refused while new and recent (top {top})"
                );
            }
        }
    }
}
