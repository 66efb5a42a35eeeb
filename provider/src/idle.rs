//! What a CQ or counter read that finds nothing does with the CPU
//! (FI_XDP_YIELD), and what a blocking read does before it sleeps
//! (FI_XDP_WAIT_SPIN_US, [`SpinBeforeSleep`]).
//!
//! An application polling `fi_cq_read` (or `fi_cntr_read`) for a reply —
//! an MPI rank in `MPI_Wait` — spins: on a core of its own that is the
//! fastest way to see the reply. On a host with more polling processes than
//! cores (ranks per node above the core count, or a rank sharing its core
//! with a build) the process it waits for may be waiting for this CPU, so
//! past a number of empty reads each further one calls `sched_yield`.
//!
//! How many: a yield costs ≈ 0.4 µs here when nothing else wants the CPU
//! and delays a reply that lands meanwhile, so a thread alone on its CPU
//! spins `SPIN_ALONE` empty reads first (≈ 60 µs). A thread that shares
//! its CPU gains nothing by spinning that long: every other polling
//! process on that CPU then also spins 60 µs before its turn ends, and a
//! reply waits for all of them (four pairs of ranks on two cores: 64 B
//! one-way ≈ 230 µs, `docs/performance.md`). So a thread that was switched
//! out — by its last yield, or preempted since — counts as sharing its CPU
//! and yields after `SPIN_SHARED` empty reads; one whose next yield
//! switches to nobody counts as alone again. Whether a yield switched is
//! the thread's involuntary context-switch count (`getrusage(2)`
//! `RUSAGE_THREAD`, `ru_nivcsw`: a `sched_yield` that runs another task
//! counts there), read once per yield (≈ 0.3 µs).
//!
//! The reads counted are the thread's, over every CQ and counter it
//! reads: a thread that polls a busy receive CQ and an idle send CQ in
//! turn is not idle, and does not yield. The target of RMA reads sends
//! their data from its progress and its CQ gets nothing for them
//! (fi_rma(3): the target is not notified), so counting completions only
//! had it yield, and read its context switches, on every read while it
//! streamed responses, where the initiator of writes, which moves the data
//! the other way, restarts its spin at each write's completion. The end of
//! each read's response counts for the target as that completion does for
//! the initiator ([`note_read_served`]): both yield alike, by the rule
//! above (`docs/performance.md`, "Large messages: the bulk path").
//!
//! While a send of this process is offered to a peer on this host for
//! pulling (`datapath::offered`), a thread alone on its CPU yields only
//! every `YIELD_EVERY_WHILE_OFFERED`-th read past its spin: the reply
//! comes when the peer's copy ends, and each yield's system call slowed
//! that copy (`docs/performance.md`, "Two processes on one host").

use std::cell::Cell;
use std::time::{Duration, Instant};

use crate::datapath::offered;
use crate::params::Config;

/// The reads of one CQ or counter, as they count towards its readers'
/// yields.
pub struct IdleReads {
    /// FI_XDP_YIELD.
    enabled: bool,
}

impl IdleReads {
    pub fn new(enabled: bool) -> IdleReads {
        IdleReads { enabled }
    }

    /// A read found something: the thread's next empty read starts a new
    /// spin.
    #[inline]
    pub fn found(&self) {
        if self.enabled {
            let _ = THREAD.try_with(|t| {
                t.empty_reads.set(0);
                t.served.set(false);
            });
        }
    }

    /// A read found nothing: yield the CPU if the thread's spin is over.
    /// Whether it yielded.
    pub fn found_nothing(&self) -> bool {
        // One thread-local lookup per empty read: in a shared library each
        // is a call (`__tls_get_addr`).
        self.enabled && THREAD.try_with(ThreadReads::found_nothing).unwrap_or(false)
    }
}

/// This thread's progress pass sent the end of a read's response, as the
/// read's target: its next read that finds nothing starts a new spin, as a
/// read that finds a completion does ([`IdleReads::found`]).
#[inline]
pub fn note_read_served() {
    let _ = THREAD.try_with(|t| t.served.set(true));
}

/// A blocking read's polling before it sleeps (FI_XDP_WAIT_SPIN_US).
///
/// `fi_cq_sread`, `fi_cntr_wait` and `fi_wait` sleep in the kernel until a
/// datagram arrives for one of their endpoints; the sleep and the wake-up
/// cost each reply ≈ 10 µs here (64 B `fi_rdm_tagged_pingpong` between two
/// test hosts: 15–20 µs per transfer with `-c sread` against 3–4 with `-c
/// spin`, `docs/performance.md` "Blocking reads"). So a blocking call first keeps making progress passes, up to
/// its budget, and sleeps only if nothing came by then — as the kernel's
/// busy polling of sockets does (`SO_BUSY_POLL`).
///
/// Only a thread with its CPU to itself polls: one that shares it would
/// keep the process it waits for off that CPU (an incast: nine processes
/// on two cores, all waiting in `fi_cq_sread`). Whether it shares is found
/// once per call, the first time it would sleep, by a yield (the rule of
/// the empty reads above: a yield that switched to another task, or a
/// preemption since the last yield, means sharing) — unless yielding is
/// off (`FI_XDP_YIELD=0`: the cores are dedicated), which counts as alone.
#[derive(Clone, Debug)]
pub struct SpinBeforeSleep {
    budget: Duration,
    /// Whether to ask if the CPU is shared (else it counts as not).
    probe: bool,
    /// The end of the polling, once it started.
    until: Option<Instant>,
}

impl SpinBeforeSleep {
    /// For one blocking call, as `cfg` says (FI_XDP_WAIT_SPIN_US 0: sleep
    /// at once).
    pub fn new(cfg: &Config) -> SpinBeforeSleep {
        SpinBeforeSleep {
            budget: Duration::from_micros(u64::from(cfg.wait_spin_us)),
            probe: cfg.yield_when_idle,
            until: None,
        }
    }

    /// Asked where the call would sleep: whether to make another pass
    /// instead.
    pub fn keep_polling(&mut self) -> bool {
        if self.budget.is_zero() {
            return false;
        }
        let now = Instant::now();
        if let Some(until) = self.until {
            std::hint::spin_loop();
            return now < until;
        }
        if self.probe && shares_cpu_now() {
            self.budget = Duration::ZERO;
            return false;
        }
        self.until = Some(now + self.budget);
        true
    }
}

/// Yield once, and say whether this thread shares its CPU.
fn shares_cpu_now() -> bool {
    THREAD
        .try_with(|t| {
            t.yield_cpu();
            t.sharing_cpu()
        })
        .unwrap_or(true)
}

/// Past the spin, how often a read yields while a send of ours is offered
/// for pulling and this thread has its CPU to itself: every ≈ 8 µs of
/// reads, so a peer that shares our core still runs soon, instead of every
/// read.
const YIELD_EVERY_WHILE_OFFERED: u32 = 64;

/// Empty reads in a row before a thread alone on its CPU yields. An idle
/// read takes ≈ 120 ns here (`ofi-xdp local-bench`, "empty fi_cq_read"),
/// so this is ≈ 60 µs: longer than a small reply takes to come back (with
/// 64, one wait for a 64-byte reply in five still yielded; with 512, one
/// in two hundred), and nothing against a scheduler time slice.
const SPIN_ALONE: u32 = 512;

/// Empty reads in a row before a thread that shares its CPU yields
/// (≈ 0.5 µs: a reply already on its way). Four pairs of ranks on two
/// cores, 64 B one-way: 21–28 µs with 4, 25–35 with 16, 85 with 64, 22
/// with 0 (`latency_one_pair_vs_four` in `tests/shared_queue.rs`).
const SPIN_SHARED: u32 = 4;

thread_local! {
    static THREAD: ThreadReads = const {
        ThreadReads {
            empty_reads: Cell::new(0),
            served: Cell::new(false),
            last_yield: Cell::new(None),
        }
    };
}

/// What a thread's reads have seen, over every CQ and counter it reads.
struct ThreadReads {
    /// Reads in a row that found nothing.
    empty_reads: Cell<u32>,
    /// A read's response ended since the last read ([`note_read_served`]).
    served: Cell<bool>,
    /// Involuntary context switches at the last yield, and whether that
    /// count had grown since the yield before (`None` before the first
    /// yield).
    last_yield: Cell<Option<(i64, bool)>>,
}

impl ThreadReads {
    fn found_nothing(&self) -> bool {
        if self.served.replace(false) {
            // As a completion found: a new spin starts.
            self.empty_reads.set(0);
            return false;
        }
        let empty = self.empty_reads.get();
        // (Wraps after 2^32 reads: that only delays one yield.)
        self.empty_reads.set(empty.wrapping_add(1));
        let sharing = self.sharing_cpu();
        if empty < spin_limit(sharing) {
            return false;
        }
        let due =
            sharing || !offered::outstanding() || empty.is_multiple_of(YIELD_EVERY_WHILE_OFFERED);
        if due {
            self.yield_cpu();
        }
        due
    }

    /// Whether this thread was last seen sharing its CPU.
    fn sharing_cpu(&self) -> bool {
        self.last_yield.get().is_some_and(|(_, shared)| shared)
    }

    /// Give the CPU away, and note whether this thread shares it.
    fn yield_cpu(&self) {
        std::thread::yield_now();
        if let Some(now) = involuntary_switches() {
            self.last_yield
                .set(Some(after_yield(self.last_yield.get(), now)));
        }
    }
}

/// Empty reads in a row after which a thread yields.
fn spin_limit(sharing_cpu: bool) -> u32 {
    if sharing_cpu { SPIN_SHARED } else { SPIN_ALONE }
}

/// The state after a yield that found the count of involuntary switches at
/// `now`: sharing if it grew since the last yield.
fn after_yield(last: Option<(i64, bool)>, now: i64) -> (i64, bool) {
    (now, last.is_some_and(|(before, _)| now > before))
}

/// This thread's involuntary context switches so far.
fn involuntary_switches() -> Option<i64> {
    // SAFETY: getrusage writes one rusage into `ru`; zeroed is a valid
    // rusage.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid out-pointer.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    (rc == 0).then_some(ru.ru_nivcsw)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spin_config(us: u32, probe: bool) -> Config {
        Config {
            wait_spin_us: us,
            yield_when_idle: probe,
            ..Config::default()
        }
    }

    #[test]
    fn a_blocking_read_polls_for_its_budget_then_sleeps() {
        // No budget: sleep at once.
        assert!(!SpinBeforeSleep::new(&spin_config(0, false)).keep_polling());
        // Dedicated cores (no probe): polls until the budget is spent, and
        // not after it.
        let budget = Duration::from_millis(2);
        let mut spin = SpinBeforeSleep::new(&spin_config(2000, false));
        let start = Instant::now();
        let mut passes = 0u64;
        while spin.keep_polling() {
            passes += 1;
            assert!(start.elapsed() < budget * 50, "polled past its budget");
        }
        assert!(passes > 1);
        assert!(start.elapsed() >= budget);
        assert!(!spin.keep_polling());
    }

    #[test]
    fn a_thread_sharing_its_cpu_sleeps_without_polling() {
        let cpu = current_cpu();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let started = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (stop2, started2) = (stop.clone(), started.clone());
        let busy = std::thread::spawn(move || {
            pin(cpu);
            started2.store(true, std::sync::atomic::Ordering::Release);
            // A neighbour that never gives the CPU away (a build): one
            // that yields in a loop pushes its own deadline ahead on every
            // yield (EEVDF's `yield_task_fair`), so the prober's yield may
            // find it not due and switch to nobody.
            while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
        while !started.load(std::sync::atomic::Ordering::Acquire) {
            std::thread::yield_now();
        }
        let polled = std::thread::spawn(move || {
            pin(cpu);
            // The probe compares with the last yield: make one first, then
            // compute for a few scheduler slices beside the neighbour (a
            // rank between two calls), which preempts this thread.
            let _ = shares_cpu_now();
            let computing = Instant::now();
            while computing.elapsed() < Duration::from_millis(30) {
                std::hint::spin_loop();
            }
            let mut spin = SpinBeforeSleep::new(&spin_config(1_000_000, true));
            spin.keep_polling()
        })
        .join()
        .unwrap();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        busy.join().unwrap();
        assert!(!polled, "a thread sharing its CPU polled before sleeping");
    }

    #[test]
    fn a_spin_of_empty_reads_comes_before_a_yield() {
        // A thread of its own: alone (it never yielded), so the long spin.
        std::thread::spawn(|| {
            // (One spin only: after a yield the thread may count as sharing
            // its CPU with the other tests.)
            let reads = IdleReads::new(true);
            for i in 0..SPIN_ALONE {
                assert!(!reads.found_nothing(), "read {i} of the spin yielded");
            }
            let yielded = reads.found_nothing();
            assert!(yielded || offered::outstanding());
            let off = IdleReads::new(false);
            assert!((0..2 * SPIN_ALONE).all(|_| !off.found_nothing()));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_busy_queue_keeps_its_thread_from_yielding_for_an_idle_one() {
        std::thread::spawn(|| {
            let (busy, idle) = (IdleReads::new(true), IdleReads::new(true));
            for _ in 0..4 * SPIN_ALONE {
                assert!(!idle.found_nothing());
                busy.found();
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_served_read_restarts_the_spin_as_a_completion_does() {
        std::thread::spawn(|| {
            let reads = IdleReads::new(true);
            // An RMA target serving reads: no read of its CQ finds
            // anything, but each response it ends restarts the spin.
            for _ in 0..4 {
                for i in 0..SPIN_ALONE - 1 {
                    assert!(!reads.found_nothing(), "read {i} of the spin yielded");
                }
                note_read_served();
                assert!(
                    !reads.found_nothing(),
                    "the read after a served read yielded"
                );
            }
            // With no more responses, the spin ends as after a completion.
            for i in 0..SPIN_ALONE {
                assert!(!reads.found_nothing(), "read {i} of the spin yielded");
            }
            assert!(reads.found_nothing() || offered::outstanding());
            // A completion clears a served read noted before it.
            note_read_served();
            reads.found();
            THREAD.with(|t| assert!(!t.served.get()));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn sharing_follows_the_last_yield() {
        // The first yield only counts.
        assert_eq!(after_yield(None, 7), (7, false));
        // Switched out since: sharing; then a yield that switched to
        // nobody: alone again.
        assert_eq!(after_yield(Some((7, false)), 9), (9, true));
        assert_eq!(after_yield(Some((9, true)), 9), (9, false));
    }

    /// A yield to a busy thread pinned to the same CPU is seen as sharing
    /// it. (The converse, alone, cannot be arranged in a test: other
    /// processes may run on any CPU.)
    #[test]
    fn a_yield_to_a_busy_neighbour_marks_the_cpu_shared() {
        let cpu = current_cpu();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let started = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (stop2, started2) = (stop.clone(), started.clone());
        let busy = std::thread::spawn(move || {
            pin(cpu);
            started2.store(true, std::sync::atomic::Ordering::Release);
            while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::yield_now();
            }
        });
        // (Starting a thread takes long in an emulated VM.)
        while !started.load(std::sync::atomic::Ordering::Acquire) {
            std::thread::yield_now();
        }
        let shared = std::thread::spawn(move || {
            pin(cpu);
            THREAD.with(|t| {
                assert!(!t.sharing_cpu(), "before any yield");
                // A yield switches only to a task the scheduler finds due
                // (EEVDF: eligible, earliest deadline), so not every one
                // does; some within two seconds must.
                let until = Instant::now() + Duration::from_secs(2);
                while Instant::now() < until {
                    t.yield_cpu();
                    if t.sharing_cpu() {
                        return true;
                    }
                }
                false
            })
        })
        .join()
        .unwrap();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        busy.join().unwrap();
        assert!(shared);
    }

    fn current_cpu() -> usize {
        // SAFETY: sched_getcpu has no preconditions.
        usize::try_from(unsafe { libc::sched_getcpu() }).unwrap_or(0)
    }

    fn pin(cpu: usize) {
        // SAFETY: a zeroed cpu_set_t is empty; CPU_SET stays in bounds for
        // cpu < CPU_SETSIZE.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set);
        }
    }
}
