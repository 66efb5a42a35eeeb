//! Latency probes: where the time goes between a datagram's arrival and the
//! TX kick of the answer the application sends to it (the small-message path
//! of a ping-pong, which the raw link does not have: its `sendto` and kernel
//! work are the same).
//!
//! Compiled in only with the `probes` feature (`cargo xtask bench
//! latency-path` builds a provider with it); without it every function here
//! is empty and inlined away. With it, each [`Stage`] adds the cycles since
//! the last [`arrived`] to its total; [`report`] prints the averages.
//!
//! One path is timed at a time — the last arrival's, until the next kick — so
//! the figures mean something for a ping-pong (each arrival answered before
//! the next comes), not for streaming.

/// The steps of the path, in the order it passes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// The engine has processed the datagram (decoded, acknowledged,
    /// matched, copied into the receive buffer).
    EngineReceived,
    /// Its completion is in the completion queue.
    Completed,
    /// `fi_cq_read` returns it to the application.
    Read,
    /// The application calls to post its next receive.
    RecvCalled,
    /// The receive is posted.
    RecvPosted,
    /// The application calls to send its answer.
    SendCalled,
    /// The engine has the send.
    SendPosted,
    /// The answer's datagram is built in its TX frame.
    Built,
    /// The TX kick (`sendto`) is about to be made.
    Kicked,
}

impl Stage {
    pub const ALL: [Stage; 9] = [
        Stage::EngineReceived,
        Stage::Completed,
        Stage::Read,
        Stage::RecvCalled,
        Stage::RecvPosted,
        Stage::SendCalled,
        Stage::SendPosted,
        Stage::Built,
        Stage::Kicked,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Stage::EngineReceived => "engine received the datagram",
            Stage::Completed => "completion queued",
            Stage::Read => "fi_cq_read returns it",
            Stage::RecvCalled => "application posts a receive",
            Stage::RecvPosted => "receive posted",
            Stage::SendCalled => "application sends",
            Stage::SendPosted => "engine took the send",
            Stage::Built => "datagram built",
            Stage::Kicked => "TX kick",
        }
    }
}

#[cfg(feature = "probes")]
mod imp {
    use super::Stage;
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

    const N: usize = Stage::ALL.len();
    static START: AtomicU64 = AtomicU64::new(0);
    static SUM: [AtomicU64; N] = [const { AtomicU64::new(0) }; N];
    static COUNT: [AtomicU64; N] = [const { AtomicU64::new(0) }; N];

    /// A cycle counter where there is a cheap one, else nanoseconds.
    fn now() -> u64 {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: RDTSC has no preconditions on x86_64.
        #[allow(unused_unsafe)]
        let t = unsafe { core::arch::x86_64::_rdtsc() };
        #[cfg(not(target_arch = "x86_64"))]
        let t = std::time::UNIX_EPOCH
            .elapsed()
            .map_or(0, |d| d.as_nanos() as u64);
        t.max(1)
    }

    pub fn arrived() {
        START.store(now(), Relaxed);
    }

    pub fn at(stage: Stage) {
        let start = START.load(Relaxed);
        if start == 0 {
            return;
        }
        let i = stage as usize;
        SUM[i].fetch_add(now().saturating_sub(start), Relaxed);
        COUNT[i].fetch_add(1, Relaxed);
        if stage == Stage::Kicked {
            START.store(0, Relaxed);
        }
    }

    pub fn report() -> Option<String> {
        let mut out = String::from(
            "stage                            cycles since arrival (mean)   step   passes\n",
        );
        let mut last = 0;
        for s in Stage::ALL {
            let count = COUNT[s as usize].load(Relaxed);
            if count == 0 {
                continue;
            }
            let mean = SUM[s as usize].load(Relaxed) / count;
            out += &format!(
                "{:<32} {:>27} {:>6} {:>8}\n",
                s.name(),
                mean,
                mean as i64 - last as i64,
                count
            );
            last = mean;
        }
        Some(out)
    }
}

#[cfg(not(feature = "probes"))]
mod imp {
    use super::Stage;

    #[inline(always)]
    pub fn arrived() {}

    #[inline(always)]
    pub fn at(_stage: Stage) {}

    pub fn report() -> Option<String> {
        None
    }
}

/// A datagram has arrived: the path starts here.
pub use imp::arrived;
/// The path has reached `stage`.
pub use imp::at;
/// The table of mean cycles per stage, with the `probes` feature.
pub use imp::report;
