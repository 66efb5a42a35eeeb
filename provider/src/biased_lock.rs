//! A lock that the one application thread using an object takes without a
//! locked instruction: the endpoint's state and the CQ's queue.
//!
//! Every data call takes the endpoint's lock, and a completion the CQ's:
//! with `std::sync::Mutex` each is a `lock cmpxchg` and an `xchg`, and
//! each of those waits for the core's store buffer to drain — on the
//! latency path right after stores that need cache lines the peer process
//! holds (the shared-memory rings). A build whose endpoint lock used no
//! locked instruction took 0.35–0.36 µs per 64 B transfer on one host
//! against 0.37–0.38 (`docs/performance.md`). Almost always one thread
//! takes these locks: the application's (an MPI rank's progress loop). The
//! others are ours — an endpoint's progress helper, which steps in only
//! after the application has made no call for a while (`ep/helper.rs`).
//!
//! So the lock is *biased* to the first thread that takes it, as JVMs bias
//! object monitors: the owner announces itself with a plain store and
//! enters unless another thread has announced itself (Dekker's mutual
//! exclusion). Dekker needs a full fence between each side's store and its
//! load; the owner's side has only a compiler fence, and the other side
//! supplies both fences with `membarrier(2)`
//! (`MEMBARRIER_CMD_PRIVATE_EXPEDITED`: every running thread of the
//! process passes a full barrier before it returns) — the asymmetric fence
//! of liburcu and Folly. That costs the other side a few microseconds, paid
//! only by the helper's rare passes.
//!
//! A second application thread taking the lock (an application that uses
//! the object from several threads: FI_THREAD_SAFE allows it) revokes the
//! bias for good: from then on the lock is a plain mutex plus one load.
//! Objects whose domain runs a progress thread (FI_PROGRESS_AUTO: the
//! thread takes the locks all the time) and processes where `membarrier`
//! is refused (an old kernel, a seccomp filter) get unbiased locks from
//! the start.

use std::cell::{Cell, UnsafeCell};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering, compiler_fence};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// `owner` before any thread took the lock.
const NO_OWNER: usize = 0;
/// `owner` once the bias was revoked, or when it never may be biased.
const UNBIASED: usize = usize::MAX;

/// A mutual exclusion lock around a `T`, biased to the first thread that
/// takes it (see the module's documentation).
pub struct BiasedLock<T> {
    /// The thread the lock is biased to (`pthread_self`), [`NO_OWNER`] or
    /// [`UNBIASED`].
    owner: AtomicUsize,
    /// The owner holds the lock, or is about to look whether it may.
    owner_in: AtomicBool,
    /// Another thread holds the lock, or waits for the owner to leave.
    other_in: AtomicBool,
    /// Orders the other threads among themselves (and the owner, when it
    /// finds one of them in).
    others: Mutex<()>,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a guard, and guards exclude
// each other (see `lock`); T itself must be sendable between threads.
unsafe impl<T: Send> Sync for BiasedLock<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for BiasedLock<T> {}

/// Holds a [`BiasedLock`] until dropped.
pub struct Guard<'a, T> {
    lock: &'a BiasedLock<T>,
    /// The mutex, when the lock was taken through it (else the owner's
    /// fast path).
    others: Option<MutexGuard<'a, ()>>,
}

thread_local! {
    /// Set in the provider's own threads: they never revoke a bias.
    static PROVIDER_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// Marks the calling thread as one of the provider's (a progress helper or
/// thread): its taking a lock neither biases the lock to it nor revokes a
/// bias to the application's thread.
pub fn mark_provider_thread() {
    PROVIDER_THREAD.with(|p| p.set(true));
}

/// Whether the calling thread is one of the provider's (a thread-local
/// look-up: only off the owner's path).
fn provider_thread() -> bool {
    PROVIDER_THREAD.with(Cell::get)
}

impl<T> BiasedLock<T> {
    /// A lock around `value`; `biased` false makes it a plain mutex for
    /// good (FI_PROGRESS_AUTO).
    pub fn new(value: T, biased: bool) -> BiasedLock<T> {
        let owner = if biased && membarrier_registered() {
            NO_OWNER
        } else {
            UNBIASED
        };
        BiasedLock {
            owner: AtomicUsize::new(owner),
            owner_in: AtomicBool::new(false),
            other_in: AtomicBool::new(false),
            others: Mutex::new(()),
            value: UnsafeCell::new(value),
        }
    }

    /// Waits for and takes the lock.
    #[inline]
    pub fn lock(&self) -> Guard<'_, T> {
        let me = this_thread();
        let owner = self.owner.load(Ordering::Relaxed);
        if owner == me || (owner == NO_OWNER && !provider_thread() && self.adopt(me)) {
            // Dekker's announcement; the fence the load needs after the
            // store is the other side's membarrier (module documentation).
            self.owner_in.store(true, Ordering::Relaxed);
            compiler_fence(Ordering::SeqCst);
            if !self.other_in.load(Ordering::Acquire) && self.owner.load(Ordering::Relaxed) == me {
                return Guard {
                    lock: self,
                    others: None,
                };
            }
            // Another thread is in, or the bias was revoked: queue behind
            // it as they do.
            self.owner_in.store(false, Ordering::Release);
            return self.lock_as_other(false);
        }
        let revoke = !matches!(owner, NO_OWNER | UNBIASED) && !provider_thread();
        self.lock_as_other(revoke)
    }

    /// The first thread to take the lock becomes its owner (one locked
    /// instruction, once).
    #[cold]
    fn adopt(&self, me: usize) -> bool {
        match self
            .owner
            .compare_exchange(NO_OWNER, me, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => true,
            Err(now) => now == me,
        }
    }

    /// Any thread but the owner (and the owner that found one of them in):
    /// through the mutex, then past the owner.
    #[cold]
    fn lock_as_other(&self, revoke: bool) -> Guard<'_, T> {
        let others = self.others.lock().unwrap_or_else(|e| e.into_inner());
        if self.owner.load(Ordering::Relaxed) != UNBIASED {
            if revoke {
                self.owner.store(UNBIASED, Ordering::Relaxed);
            }
            self.other_in.store(true, Ordering::Relaxed);
            // Now the owner either sees `other_in` (and the revocation) or
            // its `owner_in` is visible here.
            membarrier();
            while self.owner_in.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
        } else {
            // Unbiased since before this thread took the mutex. An owner
            // that read its bias before a revocation and announced itself
            // after it sees the revocation (that revoker's membarrier) and
            // queues on the mutex.
            while self.owner_in.load(Ordering::Acquire) {
                std::hint::spin_loop();
            }
        }
        Guard {
            lock: self,
            others: Some(others),
        }
    }

    /// Whether the lock is biased to a thread now (tests).
    #[cfg(test)]
    fn biased(&self) -> bool {
        !matches!(self.owner.load(Ordering::Relaxed), NO_OWNER | UNBIASED)
    }
}

impl<T> Drop for Guard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        if self.others.is_some() {
            self.lock.other_in.store(false, Ordering::Release);
            // The mutex is released after this, by the field's drop.
        } else {
            self.lock.owner_in.store(false, Ordering::Release);
        }
    }
}

impl<T> Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard excludes every other (`BiasedLock::lock`).
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: this guard excludes every other (`BiasedLock::lock`).
        unsafe { &mut *self.lock.value.get() }
    }
}

/// The calling thread, as a number no other live thread has (never 0 or
/// usize::MAX: `pthread_self` is the address of the thread's descriptor).
#[inline]
fn this_thread() -> usize {
    // SAFETY: pthread_self has no preconditions.
    unsafe { libc::pthread_self() as usize }
}

/// `MEMBARRIER_CMD_PRIVATE_EXPEDITED` and its registration (linux/membarrier.h).
const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

/// Registers the process for expedited private membarriers, once; whether
/// it may use them.
fn membarrier_registered() -> bool {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    *REGISTERED.get_or_init(|| membarrier_cmd(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED))
}

/// A full memory barrier in every running thread of this process.
fn membarrier() {
    if membarrier_cmd(MEMBARRIER_CMD_PRIVATE_EXPEDITED) {
        return;
    }
    // Not expected once registered (a forked child keeps the registration
    // here): register again, which is idempotent, and retry once.
    if membarrier_cmd(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED)
        && membarrier_cmd(MEMBARRIER_CMD_PRIVATE_EXPEDITED)
    {
        return;
    }
    // Refused after it was granted: the owner's side would lack its fence,
    // and two threads could reach the value at once. Stop rather than
    // corrupt it.
    std::process::abort();
}

/// `membarrier(cmd, 0, 0)`; whether it succeeded.
fn membarrier_cmd(cmd: libc::c_int) -> bool {
    // SAFETY: membarrier with a command, no flags and no CPU.
    unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0, 0) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// `threads` threads each add 1 to the guarded value `rounds` times,
    /// and so does the calling thread (the lock's owner, having taken it
    /// first); the first `provider` of them as provider threads. All start
    /// together; a lost update shows as a short total.
    fn hammer(lock: Arc<BiasedLock<u64>>, threads: usize, provider: usize, rounds: u64) -> u64 {
        let start = Arc::new(std::sync::Barrier::new(threads + 1));
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (lock, start) = (lock.clone(), start.clone());
                std::thread::spawn(move || {
                    if t < provider {
                        mark_provider_thread();
                    }
                    start.wait();
                    for _ in 0..rounds {
                        add_one_slowly(&mut lock.lock());
                        pause();
                    }
                })
            })
            .collect();
        start.wait();
        for _ in 0..rounds {
            add_one_slowly(&mut lock.lock());
            pause();
        }
        for h in handles {
            h.join().unwrap();
        }
        *lock.lock()
    }

    /// Read, wait a little, write: two holders at once lose an update.
    fn add_one_slowly(v: &mut u64) {
        let before = *v;
        pause();
        *std::hint::black_box(v) = before + 1;
    }

    /// A little while (between two rounds too, so that others get in).
    fn pause() {
        for _ in 0..64 {
            std::hint::spin_loop();
        }
    }

    #[test]
    fn the_owner_and_a_provider_thread_exclude_each_other_and_keep_the_bias() {
        let lock = Arc::new(BiasedLock::new(0u64, true));
        drop(lock.lock());
        // (Linux 4.16 and later have the expedited membarrier.)
        assert!(lock.biased(), "membarrier refused: the lock is a mutex");
        assert_eq!(hammer(lock.clone(), 1, 1, 20_000), 40_000);
        assert!(lock.biased(), "a provider thread revoked the bias");
    }

    #[test]
    fn a_second_application_thread_revokes_the_bias_and_nothing_is_lost() {
        let lock = Arc::new(BiasedLock::new(0u64, true));
        drop(lock.lock());
        assert_eq!(hammer(lock.clone(), 3, 1, 20_000), 80_000);
        assert!(!lock.biased());
        // And it stays a working lock.
        assert_eq!(hammer(lock.clone(), 2, 0, 1_000), 83_000);
    }

    #[test]
    fn a_child_forked_after_the_registration_can_fence() {
        assert!(membarrier_registered());
        // SAFETY: the child only makes system calls, then _exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            membarrier();
            // SAFETY: ends the child without running the parent's state down.
            unsafe { libc::_exit(0) };
        }
        assert!(pid > 0);
        let mut status = 0;
        // SAFETY: our child, and a valid out-pointer.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "the child's membarrier failed (status {status:#x})"
        );
    }

    #[test]
    fn an_unbiased_lock_is_a_mutex() {
        let lock = Arc::new(BiasedLock::new(0u64, false));
        assert_eq!(hammer(lock.clone(), 2, 1, 20_000), 60_000);
        assert!(!lock.biased());
    }
}
