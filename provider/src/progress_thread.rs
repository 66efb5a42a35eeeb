//! FI_PROGRESS_AUTO (fi_domain(3)): when the application asks for it, its
//! domain runs one thread that drives every enabled endpoint of the domain,
//! so data moves, acknowledgements leave and connections are set up while
//! the application computes without calling libfabric.
//!
//! The thread sleeps on an [`FdWait`] holding the endpoints' sockets (a
//! datagram wakes it), an eventfd (endpoints joining or leaving, the
//! domain closing) and a timerfd armed for the endpoints' next protocol
//! timer (retransmission, delayed ack). Nothing of this exists in a domain
//! that did not ask: manual progress (the default) costs nothing more.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::abi::lock;
use crate::datapath::WaitState;
use crate::ep::Endpoint;
use crate::progress::ProgressSet;
use crate::sys::*;
use crate::wait::FdWait;

/// Longest the thread sleeps without a reason to wake (a safety net).
const MAX_SLEEP: Duration = Duration::from_millis(100);

struct Shared {
    endpoints: ProgressSet<Endpoint>,
    wait: FdWait,
    stop: AtomicBool,
}

pub struct ProgressThread {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl ProgressThread {
    /// Start the thread for a domain (on `name` for the logs).
    pub fn start(name: &str) -> std::io::Result<ProgressThread> {
        let shared = Arc::new(Shared {
            endpoints: ProgressSet::default(),
            wait: FdWait::new()?,
            stop: AtomicBool::new(false),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("xdp-progress-{name}"))
            .spawn(move || {
                crate::biased_lock::mark_provider_thread();
                run(&s)
            })?;
        crate::xdp_info!(
            FI_LOG_DOMAIN,
            "{name}: progress thread started (FI_PROGRESS_AUTO)"
        );
        Ok(ProgressThread {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// An endpoint was enabled: drive it, and wake when `fd` (its data
    /// path's wait fd) is readable.
    pub fn attach(&self, ep: Weak<Endpoint>, fd: Option<RawFd>) {
        self.shared.endpoints.attach(ep);
        if let Some(fd) = fd {
            self.shared.wait.add(fd);
        }
        self.shared.wait.notify();
    }

    /// The endpoint closes.
    pub fn detach(&self, ep: &Weak<Endpoint>, fd: Option<RawFd>) {
        if let Some(fd) = fd {
            self.shared.wait.remove(fd);
        }
        self.shared.endpoints.detach(ep);
    }

    /// Stop the thread and wait for it (the domain closes).
    pub fn stop(&self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.wait.notify();
        if let Some(t) = lock(&self.thread).take() {
            let _ = t.join();
        }
    }
}

impl Drop for ProgressThread {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(s: &Shared) {
    while !s.stop.load(Ordering::Acquire) {
        // A panic in one pass must not end progress for good (nor reach
        // the application: this thread is ours).
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.endpoints.run())).is_err() {
            crate::xdp_warn!(FI_LOG_DOMAIN, "panic in a progress pass; continuing");
        }
        s.wait.drain();
        match s.endpoints.wait_state() {
            WaitState::Busy => std::thread::yield_now(),
            WaitState::Idle { timer } => {
                let limit = timer.map_or(MAX_SLEEP, |t| t.min(MAX_SLEEP));
                s.wait.arm(Some(limit));
                let _ = s.wait.wait(limit, None);
            }
        }
    }
}
