//! Sends of this process that a process on the same host may be copying out
//! of our memory right now: a rendezvous request offered for pulling
//! (reliability/PROTOCOL.md §6.7), not yet complete.
//!
//! Two things ask about them. A CQ or counter read that keeps finding
//! nothing yields the CPU (FI_XDP_YIELD, `idle.rs`), for hosts with more
//! polling processes than cores; while such a send is out a thread alone on
//! its CPU yields far less often, because each yield's system call
//! measurably slowed the other process's copy (`docs/performance.md`, "Two
//! processes on one host"). And a receiver pulling one of them may ask us
//! to copy part of it into its buffer ourselves (`xdp/port/local/help.rs`):
//! we copy only from the buffers of sends offered to that receiver, so a
//! receiver cannot make us hand it anything else of ours.

use std::net::SocketAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Offered sends of this process not yet complete.
static OUTSTANDING: AtomicUsize = AtomicUsize::new(0);
/// Their buffers: (start, end, the send's number, its destination).
static BUFFERS: Mutex<Vec<(usize, usize, u64, SocketAddr)>> = Mutex::new(Vec::new());
static NEXT: AtomicU64 = AtomicU64::new(1);

/// Held by a send offered for pulling while it is outstanding.
#[derive(Debug)]
pub struct Offered(u64);

impl Offered {
    /// Counts one more offered send, with buffers `iov` (address, length),
    /// to the endpoint at `to`, until dropped.
    pub fn begin(iov: &[(usize, usize)], to: SocketAddr) -> Offered {
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        let mut b = BUFFERS.lock().unwrap_or_else(|e| e.into_inner());
        b.extend(
            iov.iter()
                .map(|&(at, n)| (at, at.saturating_add(n), id, to)),
        );
        OUTSTANDING.fetch_add(1, Ordering::Relaxed);
        Offered(id)
    }
}

impl Drop for Offered {
    fn drop(&mut self) {
        let mut b = BUFFERS.lock().unwrap_or_else(|e| e.into_inner());
        b.retain(|&(_, _, id, _)| id != self.0);
        OUTSTANDING.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Whether a send of this process is offered for pulling now.
pub fn outstanding() -> bool {
    OUTSTANDING.load(Ordering::Relaxed) > 0
}

/// Whether the `len` bytes at `at` lie inside one buffer of a send offered
/// now to the endpoint at `to`.
pub fn covers(to: SocketAddr, at: usize, len: usize) -> bool {
    let Some(end) = at.checked_add(len) else {
        return false;
    };
    let b = BUFFERS.lock().unwrap_or_else(|e| e.into_inner());
    b.iter()
        .any(|&(s, e, _, dest)| dest == to && s <= at && end <= e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_covers_while_held() {
        // (Other tests of this process may hold some too: only ours is
        // known, at addresses no real buffer has.)
        let base = usize::MAX - (1 << 20);
        let to = SocketAddr::from(([127, 0, 0, 9], 9));
        let other = SocketAddr::from(([127, 0, 0, 9], 10));
        let a = Offered::begin(&[(base, 4096), (base + 8192, 100)], to);
        assert!(outstanding());
        assert!(covers(to, base, 4096));
        assert!(covers(to, base + 10, 50));
        assert!(covers(to, base + 8192, 100));
        assert!(!covers(other, base, 4096), "offered to another endpoint");
        assert!(!covers(to, base + 4000, 200), "across two buffers");
        assert!(!covers(to, base + 8192, 101), "past the end");
        assert!(!covers(to, usize::MAX - 10, 20), "wraps");
        drop(a);
        assert!(!covers(to, base, 1));
    }
}
