//! Manual progress (fi_domain(3) FI_PROGRESS_MANUAL): data moves only inside
//! the application's calls, and a read of a CQ or counter progresses the
//! endpoints bound to it. A [`ProgressSet`] is that binding; what it drives
//! is anything that can run a [`Progress`] pass (an endpoint).

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::abi::lock;
use crate::datapath::WaitState;

/// Something a CQ or counter read progresses.
pub trait Progress {
    /// One progress pass, delivering what completed to the bound queues.
    fn progress(&self);
    /// What it needs before its application may block (fi_trywait).
    fn wait_state(&self) -> WaitState;
}

/// The endpoints whose progress reading a CQ or counter drives.
/// Copy-on-write: a read takes a snapshot by cloning an `Arc` (no allocation on the hot path)
/// and runs the passes without this lock held, since endpoints lock their own state and then
/// push into CQs (lock order endpoint → CQ) and binding may happen concurrently.
pub struct ProgressSet<T>(Mutex<Arc<Vec<Weak<T>>>>);

impl<T> Default for ProgressSet<T> {
    fn default() -> Self {
        ProgressSet(Mutex::default())
    }
}

impl<T: Progress> ProgressSet<T> {
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
}
