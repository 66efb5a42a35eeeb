//! Manual progress (fi_domain(3) FI_PROGRESS_MANUAL): data moves only inside
//! the application's calls, and a read of a CQ, counter or EQ progresses
//! the endpoints (and, for an EQ, listening endpoints) bound to it. A
//! [`ProgressSet`] is that binding; what it drives is anything that can run
//! a [`Progress`] pass. A [`Queue`] is what wait sets and poll sets see of
//! their members (fi_poll(3)).

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::abi::lock;
use crate::datapath::WaitState;

/// Something a CQ, counter or EQ read progresses.
pub trait Progress: Send + Sync {
    /// One progress pass, delivering what completed to the bound queues.
    fn progress(&self);
    /// What it needs before its application may block (fi_trywait).
    fn wait_state(&self) -> WaitState;
}

/// The endpoints whose progress reading a CQ or counter drives.
/// Copy-on-write: a read takes a snapshot by cloning an `Arc` (no allocation on the hot path)
/// and runs the passes without this lock held, since endpoints lock their own state and then
/// push into CQs (lock order endpoint → CQ) and binding may happen concurrently.
pub struct ProgressSet<T: ?Sized>(Mutex<Arc<Vec<Weak<T>>>>);

impl<T: ?Sized> Default for ProgressSet<T> {
    fn default() -> Self {
        ProgressSet(Mutex::default())
    }
}

impl<T: Progress + ?Sized> ProgressSet<T> {
    /// Register an endpoint (on bind).
    pub fn attach(&self, ep: Weak<T>) {
        Arc::make_mut(&mut lock(&self.0)).push(ep);
    }

    /// Forget an endpoint (on endpoint close), and any that are gone.
    pub fn detach(&self, ep: &Weak<T>) {
        Arc::make_mut(&mut lock(&self.0)).retain(|w| !w.ptr_eq(ep) && w.strong_count() > 0);
    }

    /// What the registered endpoints need before their application may
    /// block: `Busy` if any has work now, else the soonest timer.
    pub fn wait_state(&self) -> WaitState {
        let snapshot = Arc::clone(&lock(&self.0));
        let mut soonest: Option<Duration> = None;
        for ep in snapshot.iter().filter_map(Weak::upgrade) {
            match ep.wait_state() {
                WaitState::Busy => return WaitState::Busy,
                WaitState::Idle { timer: Some(d) } => {
                    soonest = Some(soonest.map_or(d, |s| s.min(d)));
                }
                WaitState::Idle { timer: None } => {}
            }
        }
        WaitState::Idle { timer: soonest }
    }

    /// One manual-progress pass over the registered endpoints.
    pub fn run(&self) {
        let snapshot = Arc::clone(&lock(&self.0));
        for ep in snapshot.iter().filter_map(Weak::upgrade) {
            ep.progress();
        }
    }

    /// Whether nothing is registered (any more).
    pub fn is_empty(&self) -> bool {
        lock(&self.0).iter().all(|w| w.strong_count() == 0)
    }
}

/// A CQ, counter or EQ as a wait set or poll set sees it (fi_poll(3)).
pub trait Queue: Send + Sync {
    /// One progress pass over what its reads drive.
    fn run_progress(&self);
    /// Whether the application has something to read: a CQ or EQ that is
    /// not empty, a counter whose value or error count changed since it
    /// was last reported (`report`: this call reports it, fi_poll(3)).
    fn has_events(&self, report: bool) -> bool;
    /// What its endpoints need before the application may block.
    fn wait_state(&self) -> WaitState;
    /// Whether a progress thread drives its endpoints (FI_PROGRESS_AUTO):
    /// then a thread blocked on its wait object wakes without calling us.
    fn auto_progress(&self) -> bool;
}
