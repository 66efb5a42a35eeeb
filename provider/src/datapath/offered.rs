//! Sends of this process that a process on the same host may be copying out
//! of our memory right now: a rendezvous request offered for pulling
//! (reliability/PROTOCOL.md §6.7), not yet complete. A CQ or counter read
//! that keeps finding nothing yields the CPU (FI_XDP_YIELD, `idle.rs`), for
//! hosts with more polling processes than cores; while such a send is out a
//! thread alone on its CPU yields far less often, because each yield's
//! system call measurably slowed the other process's copy
//! (`docs/performance.md`, "Two processes on one host").

use std::sync::atomic::{AtomicUsize, Ordering};

/// Offered sends of this process not yet complete.
static OUTSTANDING: AtomicUsize = AtomicUsize::new(0);

/// Held by a send offered for pulling while it is outstanding.
#[derive(Debug)]
pub struct Offered(());

impl Offered {
    /// Counts one more offered send until dropped.
    pub fn begin() -> Offered {
        OUTSTANDING.fetch_add(1, Ordering::Relaxed);
        Offered(())
    }
}

impl Drop for Offered {
    fn drop(&mut self) {
        OUTSTANDING.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Whether a send of this process is offered for pulling now.
pub fn outstanding() -> bool {
    OUTSTANDING.load(Ordering::Relaxed) > 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_while_held() {
        // (Other tests of this process may hold some too: only ours is
        // known.)
        let a = Offered::begin();
        assert!(outstanding());
        drop(a);
    }
}
