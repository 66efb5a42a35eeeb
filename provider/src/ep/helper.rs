//! The progress helper of an RDM endpoint: a thread that runs a progress
//! pass when the application has not driven progress for
//! `FI_XDP_PROGRESS_MS`.
//!
//! With manual progress (fi_domain(3) FI_PROGRESS_MANUAL) only the
//! application's calls move data. A reliable protocol needs a little more:
//! a send reported complete once copied (inject complete) may still be
//! lost and need retransmitting, and a peer's retransmission needs an ack.
//! An application that, after its last completion, blocks somewhere else —
//! `fi_pingpong` on its TCP control socket between sizes, an MPI rank in a
//! barrier of another library, or simply computing — would then leave its
//! peer waiting for data only it can resend: through a path that loses 5 %
//! of the datagrams, `fi_pingpong -S all` stalled within a few sizes. So,
//! as providers with a progress thread do, the helper steps in; it takes
//! the same locks as a CQ read (endpoint, then CQ) and delivers completions
//! to the bound queues as such a read would. While the application keeps
//! calling, the helper only looks at the endpoint's count of calls every
//! interval: a pass is made when it did not change over a whole interval
//! (so after one to two intervals without a call).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use super::Endpoint;

/// The running helper of one endpoint.
pub struct Helper {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Helper {
    /// Start the helper of `ep`, which counts the application's progress
    /// calls in `calls`; it wakes every `interval`.
    pub fn start(ep: Weak<Endpoint>, calls: Arc<AtomicU64>, interval: Duration) -> Option<Helper> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("xdp-progress".into())
            .spawn(move || {
                // It takes the endpoint's and CQs' locks only now and then:
                // they stay biased to the application's thread.
                crate::biased_lock::mark_provider_thread();
                let mut seen = calls.load(Ordering::Relaxed);
                while !flag.load(Ordering::Acquire) {
                    std::thread::sleep(interval);
                    let Some(ep) = ep.upgrade() else { return };
                    if flag.load(Ordering::Acquire) {
                        return;
                    }
                    let now = calls.load(Ordering::Relaxed);
                    if now == seen {
                        ep.pass();
                    }
                    seen = now;
                }
            })
            .ok()?;
        Some(Helper {
            stop,
            thread: Some(thread),
        })
    }

    /// Stop the helper and wait for it (it may be finishing a pass).
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
