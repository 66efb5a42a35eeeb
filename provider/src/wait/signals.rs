//! POSIX signals during a blocking read. fi_cq(3) (and fi_eq(3),
//! fi_wait(3)): a blocking call returns -FI_EAGAIN when "the calling thread
//! is signaled". Our blocking calls alternate progress passes with short
//! waits, and a signal that lands during a pass interrupts no system call:
//! it would be handled and forgotten, and the call would block on. So the
//! calling thread holds asynchronous signals while it runs a pass and waits
//! with `ppoll` and its own mask: a signal that came during the pass is
//! delivered inside the wait, which then ends with EINTR.
//!
//! Only fd-based waits do this: a condition variable's wait cannot be
//! interrupted, and holding signals around it would delay the
//! application's handlers for as long as the call blocks.

/// The calling thread's asynchronous signals held until this drops (or
/// nothing held, [`SignalsHeld::none`]).
pub struct SignalsHeld {
    /// The thread's mask before: the one to wait with, and to restore.
    before: Option<libc::sigset_t>,
}

/// Signals the kernel raises for a fault of the thread itself: they cannot
/// wait (blocked, a fault kills the process), so they are never held.
const SYNCHRONOUS: [libc::c_int; 6] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGTRAP,
    libc::SIGSYS,
];

impl SignalsHeld {
    /// Hold every asynchronous signal of the calling thread.
    pub fn hold() -> SignalsHeld {
        // SAFETY: sigset_t is plain data, initialised by sigfillset /
        // pthread_sigmask before it is read.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut before: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            for s in SYNCHRONOUS {
                libc::sigdelset(&mut all, s);
            }
            if libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut before) != 0 {
                return SignalsHeld::none();
            }
            SignalsHeld {
                before: Some(before),
            }
        }
    }

    /// Nothing held: waits see signals only while they block.
    pub fn none() -> SignalsHeld {
        SignalsHeld { before: None }
    }

    /// The mask to wait with (`ppoll`'s), if signals are held.
    pub fn wait_mask(&self) -> Option<&libc::sigset_t> {
        self.before.as_ref()
    }
}

impl Drop for SignalsHeld {
    fn drop(&mut self) {
        if let Some(before) = &self.before {
            // SAFETY: `before` is the mask pthread_sigmask gave us. A signal
            // still pending is delivered now, as the call returns.
            unsafe {
                libc::pthread_sigmask(libc::SIG_SETMASK, before, std::ptr::null_mut());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocked(sig: libc::c_int) -> bool {
        // SAFETY: a query of the calling thread's mask.
        unsafe {
            let mut now: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut now);
            libc::sigismember(&now, sig) == 1
        }
    }

    #[test]
    fn holds_asynchronous_signals_until_dropped() {
        assert!(!blocked(libc::SIGUSR1));
        {
            let held = SignalsHeld::hold();
            assert!(blocked(libc::SIGUSR1) && blocked(libc::SIGINT));
            assert!(!blocked(libc::SIGSEGV), "a fault signal is never held");
            let mask = held.wait_mask().expect("held");
            // SAFETY: a valid sigset_t.
            assert_eq!(unsafe { libc::sigismember(mask, libc::SIGUSR1) }, 0);
        }
        assert!(!blocked(libc::SIGUSR1));
        assert!(SignalsHeld::none().wait_mask().is_none());
    }

    extern "C" fn ignore(_: libc::c_int) {}

    /// The race this exists for: a signal that arrives between two waits
    /// (here: before the first) still ends the next wait, at once.
    #[test]
    fn a_signal_held_during_a_pass_interrupts_the_next_wait() {
        // SAFETY: installs a handler that does nothing, for SIGUSR2 (no
        // other test of this crate uses it).
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = ignore as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut());
        }
        let fd = super::super::FdWait::new().expect("eventfd");
        let held = SignalsHeld::hold();
        // SAFETY: signals the calling thread, whose handler is installed.
        unsafe { libc::pthread_kill(libc::pthread_self(), libc::SIGUSR2) };
        let t0 = std::time::Instant::now();
        let r = fd.wait(std::time::Duration::from_secs(5), held.wait_mask());
        let kind = r.expect_err("the wait was interrupted").kind();
        assert_eq!(kind, std::io::ErrorKind::Interrupted);
        assert!(t0.elapsed() < std::time::Duration::from_secs(2));
    }
}
