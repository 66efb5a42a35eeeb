//! A member's mailbox: the TX completions of its frames that another member
//! drained from the shared completion ring. Written only under the group's
//! lock (one producer at a time), read by the member alone without it: a
//! single-producer single-consumer ring of UMEM addresses in the group file.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// A view of one mailbox in the mapped group file.
pub(crate) struct Mailbox<'a> {
    head: &'a AtomicU32,
    tail: &'a AtomicU32,
    entries: &'a [AtomicU64],
}

impl<'a> Mailbox<'a> {
    /// Bytes one mailbox of `cap` entries takes (64-byte aligned).
    pub(crate) const fn bytes(cap: u32) -> usize {
        64 + cap as usize * 8
    }

    /// The mailbox at `p`.
    ///
    /// # Safety
    /// `p` is 64-byte aligned and [`Mailbox::bytes`]`(cap)` bytes from it
    /// are shared memory living for `'a`; `cap` is a power of two.
    pub(crate) unsafe fn at(p: *mut u8, cap: u32) -> Mailbox<'a> {
        // SAFETY: per the caller; atomics have no invalid bit patterns.
        unsafe {
            Mailbox {
                head: &*p.cast::<AtomicU32>(),
                tail: &*p.add(4).cast::<AtomicU32>(),
                entries: std::slice::from_raw_parts(p.add(64).cast::<AtomicU64>(), cap as usize),
            }
        }
    }

    fn mask(&self) -> u32 {
        self.entries.len() as u32 - 1
    }

    /// Posts `addr` (the group's lock held). `false`: full, dropped.
    pub(crate) fn post(&self, addr: u64) -> bool {
        let head = self.head.load(Ordering::Relaxed);
        let tail = self.tail.load(Ordering::Acquire);
        if head.wrapping_sub(tail) >= self.entries.len() as u32 {
            return false;
        }
        self.entries[(head & self.mask()) as usize].store(addr, Ordering::Relaxed);
        self.head.store(head.wrapping_add(1), Ordering::Release);
        true
    }

    /// Whether something waits (a cheap look, no lock).
    pub(crate) fn is_empty(&self) -> bool {
        self.head.load(Ordering::Acquire) == self.tail.load(Ordering::Relaxed)
    }

    /// Hands every waiting address to `f` (by the mailbox's member only).
    pub(crate) fn drain(&self, mut f: impl FnMut(u64)) -> usize {
        let head = self.head.load(Ordering::Acquire);
        let mut tail = self.tail.load(Ordering::Relaxed);
        let n = head.wrapping_sub(tail) as usize;
        while tail != head {
            f(self.entries[(tail & self.mask()) as usize].load(Ordering::Relaxed));
            tail = tail.wrapping_add(1);
        }
        self.tail.store(tail, Ordering::Release);
        n
    }

    /// Empties it (the group's lock held, its member gone or new).
    pub(crate) fn reset(&self) {
        self.tail
            .store(self.head.load(Ordering::Relaxed), Ordering::Release);
    }
}
