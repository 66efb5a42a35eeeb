//! The wait object of a CQ, counter or EQ (`wait_obj` in fi_cq(3),
//! fi_cntr(3), fi_eq(3)), and of a wait set (fi_poll(3)): what its blocking
//! calls (sread, fi_cntr_wait, fi_wait) block on, what is signalled when
//! something is queued, and what FI_GETWAIT hands the application.
//!
//! | wait_obj | blocks on | FI_GETWAIT |
//! | --- | --- | --- |
//! | NONE | — (blocking calls are invalid) | -FI_ENOSYS |
//! | UNSPEC | a private [`FdWait`] (no endpoint sockets) | -FI_ENOSYS |
//! | FD | an [`FdWait`] with the bound endpoints' sockets | `int` fd |
//! | MUTEX_COND | a [`MutexCond`] | `struct fi_mutex_cond` |
//! | YIELD | `sched_yield` between progress passes | -FI_ENOSYS |
//! | SET | the wait set's own object | the set's (on the set) |
//!
//! With manual progress nothing is queued while nobody calls us, so every
//! blocking call blocks in short slices and drives progress in between;
//! only an FD object watches the endpoints' sockets, so that a thread
//! blocked on the fd itself wakes when datagrams arrive.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use libc::{c_int, c_void};

use crate::abi::{self, Errno, Result};
use crate::datapath::WaitState;
use crate::sys::*;
use crate::wait::{FdWait, MutexCond, SignalsHeld, Waiters, Waiting};
use crate::waitset::WaitSet;

enum Inner {
    None,
    Yield,
    Fd(FdWait),
    Cond(MutexCond),
    Set(Arc<WaitSet>),
}

pub struct WaitObj {
    kind: c_int,
    inner: Inner,
    /// Threads blocked in a blocking call right now.
    waiters: Waiters,
}

impl WaitObj {
    /// The object for `kind` (`set`: the wait set of FI_WAIT_SET).
    /// FI_WAIT_POLLFD is not offered (-FI_ENOSYS); unknown kinds are
    /// -FI_EINVAL.
    pub fn new(kind: c_int, set: Option<Arc<WaitSet>>) -> Result<WaitObj> {
        let io = |e: io::Error| Errno::from_os(&e);
        let inner = match kind {
            FI_WAIT_NONE => Inner::None,
            FI_WAIT_YIELD => Inner::Yield,
            FI_WAIT_UNSPEC | FI_WAIT_FD => Inner::Fd(FdWait::new().map_err(io)?),
            FI_WAIT_MUTEX_COND => Inner::Cond(MutexCond::new().map_err(io)?),
            FI_WAIT_SET => Inner::Set(set.ok_or(Errno::INVAL)?),
            FI_WAIT_POLLFD => return Err(Errno::NOSYS),
            _ => return Err(Errno::INVAL),
        };
        Ok(WaitObj {
            kind,
            inner,
            waiters: Waiters::default(),
        })
    }

    /// FI_WAIT_* as opened (FI_GETWAITOBJ).
    pub fn kind(&self) -> c_int {
        self.kind
    }

    /// Whether blocking calls are allowed (not FI_WAIT_NONE).
    pub fn can_block(&self) -> bool {
        self.kind != FI_WAIT_NONE
    }

    /// The wait set this object belongs to (FI_WAIT_SET).
    pub fn set(&self) -> Option<&Arc<WaitSet>> {
        match &self.inner {
            Inner::Set(s) => Some(s),
            _ => None,
        }
    }

    /// Something was queued: wake whoever may be waiting. An FD object is
    /// always signalled (the application may block on the fd itself); the
    /// private UNSPEC one only while a thread is blocked in a call (a
    /// syscall per completion otherwise).
    pub fn notify(&self) {
        match &self.inner {
            Inner::Fd(w) if self.kind == FI_WAIT_FD || self.waiters.any() => w.notify(),
            Inner::Cond(c) => c.notify(),
            Inner::Set(s) => s.notify(),
            _ => {}
        }
    }

    /// fi_cq_signal and the like: wake a blocked thread unconditionally.
    pub fn signal(&self) {
        match &self.inner {
            Inner::Fd(w) => w.notify(),
            Inner::Cond(c) => c.notify(),
            Inner::Set(s) => s.obj.signal(),
            _ => {}
        }
    }

    /// Count the calling thread as blocked until the guard drops.
    pub fn enter(&self) -> Waiting<'_> {
        self.waiters.enter()
    }

    /// The fd a reader may poll for this object's notifications (an FD
    /// object's; `None` for the other kinds).
    pub fn own_fd(&self) -> Option<std::os::fd::RawFd> {
        match &self.inner {
            Inner::Fd(w) => Some(w.fd()),
            _ => None,
        }
    }

    /// Hold the calling thread's POSIX signals for a blocking call's
    /// progress passes, if this object's waits can be interrupted (an fd);
    /// [`WaitObj::wait`] then waits with the thread's own mask.
    pub fn hold_signals(&self) -> SignalsHeld {
        match &self.inner {
            Inner::Fd(_) => SignalsHeld::hold(),
            Inner::Set(s) => s.obj.hold_signals(),
            _ => SignalsHeld::none(),
        }
    }

    /// Block for a notification, at most `limit`. `Err(Interrupted)` when
    /// a POSIX signal arrived (the blocking call then returns, fi_cq(3)),
    /// including one that came while `held` held it.
    pub fn wait(&self, limit: Duration, held: &SignalsHeld) -> io::Result<()> {
        match &self.inner {
            Inner::Fd(w) => w.wait(limit, held.wait_mask()),
            Inner::Cond(c) => {
                c.wait(limit);
                Ok(())
            }
            Inner::Set(s) => s.obj.wait(limit, held),
            Inner::Yield => {
                std::thread::yield_now();
                Ok(())
            }
            Inner::None => Ok(()),
        }
    }

    /// After a wake-up: an FD object stays readable while something is
    /// queued (`pending`; level-triggered, as the application sees it);
    /// the private UNSPEC one is reset at once.
    pub fn settle(&self, pending: bool) {
        if let Inner::Fd(w) = &self.inner
            && (self.kind != FI_WAIT_FD || !pending)
        {
            w.drain();
        }
    }

    /// The end of fi_trywait (fi_poll(3)) once nothing is queued:
    /// -FI_EINVAL without a wait object (FI_WAIT_NONE: there is nothing to
    /// block on), -FI_EAGAIN while an endpoint has work now (`state`), and
    /// for a MUTEX_COND object without a progress thread (nothing would
    /// signal it); else the object is armed for the endpoints' next timer.
    pub fn try_arm(&self, auto_progress: bool, state: impl FnOnce() -> WaitState) -> Result<()> {
        if self.kind == FI_WAIT_NONE {
            return Err(Errno::INVAL);
        }
        if self.kind == FI_WAIT_MUTEX_COND && !auto_progress {
            return Err(Errno::AGAIN);
        }
        match state() {
            WaitState::Busy => Err(Errno::AGAIN),
            WaitState::Idle { timer } => {
                self.arm(timer);
                Ok(())
            }
        }
    }

    /// fi_trywait: reset the fd and arm its timer for `timer` (the bound
    /// endpoints' next protocol timer), so that blocking on it is safe.
    pub fn arm(&self, timer: Option<Duration>) {
        if let Inner::Fd(w) = &self.inner {
            w.drain();
            w.arm(timer);
        }
    }

    /// Whether bound endpoints' sockets must join this object: only for
    /// FI_WAIT_FD (here or in the wait set), since an epoll watching an
    /// AF_XDP socket costs every packet a wake-up.
    pub fn wants_fds(&self) -> bool {
        match &self.inner {
            Inner::Set(s) => s.obj.wants_fds(),
            _ => self.kind == FI_WAIT_FD,
        }
    }

    /// A socket joins the fd set (see [`WaitObj::wants_fds`]).
    pub fn add_fd(&self, fd: std::os::fd::RawFd) {
        match &self.inner {
            Inner::Fd(w) => w.add(fd),
            Inner::Set(s) => s.obj.add_fd(fd),
            _ => {}
        }
    }

    /// A listening endpoint's socket joins whatever fd set this object
    /// has (UNSPEC's private one too: a kernel UDP socket costs nothing
    /// while idle); false when it has none.
    pub fn add_fd_always(&self, fd: std::os::fd::RawFd) -> bool {
        match &self.inner {
            Inner::Fd(w) => {
                w.add(fd);
                true
            }
            Inner::Set(s) => s.obj.add_fd_always(fd),
            _ => false,
        }
    }

    /// Whether this object (or its set) has an fd set.
    pub fn has_fds(&self) -> bool {
        match &self.inner {
            Inner::Fd(_) => true,
            Inner::Set(s) => s.obj.has_fds(),
            _ => false,
        }
    }

    pub fn remove_fd(&self, fd: std::os::fd::RawFd) {
        match &self.inner {
            Inner::Fd(w) => w.remove(fd),
            Inner::Set(s) => s.obj.remove_fd(fd),
            _ => {}
        }
    }

    /// FI_GETWAIT (fi_poll(3) fi_control): an `int *` for FI_WAIT_FD, a
    /// `struct fi_mutex_cond *` for FI_WAIT_MUTEX_COND; the others expose
    /// no OS object (-FI_ENOSYS). A member of a wait set is waited on
    /// through the set.
    ///
    /// # Safety
    /// `arg` must be NULL or point to the type above for this object.
    pub unsafe fn getwait(&self, arg: *mut c_void) -> Result<()> {
        match &self.inner {
            // SAFETY: per the caller.
            Inner::Fd(w) if self.kind == FI_WAIT_FD => unsafe {
                abi::write_out(arg.cast::<c_int>(), w.fd())
            },
            // SAFETY: per the caller.
            Inner::Cond(c) => unsafe { abi::write_out(arg.cast::<fi_mutex_cond>(), c.fi()) },
            _ => Err(Errno::NOSYS),
        }
    }
}
