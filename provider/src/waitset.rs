//! Wait sets (fi_poll(3) fi_wait_open, fi_wait): one wait object for many
//! CQs, counters and EQs, opened with `wait_obj = FI_WAIT_SET` and the
//! set in `wait_set`. Every member signals the set's object when something
//! is queued on it; `fi_wait` drives progress of all members (manual
//! progress: nothing is queued otherwise) and returns once one has events.
//! The set's own object is FI_WAIT_UNSPEC, FD (an epoll fd with the
//! members' endpoints' sockets, so a thread blocked on it wakes when
//! datagrams arrive), MUTEX_COND or YIELD.

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use libc::{c_int, c_void};

use crate::abi::{Errno, Result, guard_int, lock};
use crate::datapath::WaitState;
use crate::fabric::Fabric;
use crate::idle::SpinBeforeSleep;
use crate::object::{self, FidObject, Refs, obj};
use crate::progress::{Queue, Watched, sleep_between_passes};
use crate::sys::*;
use crate::wait_obj::WaitObj;

pub struct WaitSet {
    /// CQs, counters and EQs opened with this set.
    pub refs: Refs,
    pub fabric: Arc<Fabric>,
    pub obj: WaitObj,
    members: Mutex<Vec<Weak<dyn Queue>>>,
    /// What each fi_wait does before it sleeps (FI_XDP_WAIT_SPIN_US).
    spin: SpinBeforeSleep,
}

impl WaitSet {
    /// A member queued something.
    pub fn notify(&self) {
        self.obj.notify();
    }

    /// A queue opened with this set joins it (the queue holds a reference
    /// on the set, counted in `refs`, until it closes).
    pub fn join(&self, q: Weak<dyn Queue>) {
        lock(&self.members).push(q);
    }

    /// A member closes.
    pub fn leave(&self, q: &Weak<dyn Queue>) {
        lock(&self.members).retain(|m| !Weak::ptr_eq(m, q) && m.strong_count() > 0);
        self.refs.put();
    }

    fn live(&self) -> Vec<Arc<dyn Queue>> {
        lock(&self.members)
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// One progress pass over every member of `members`; whether one has
    /// events.
    fn progress(members: &[Arc<dyn Queue>], report: bool) -> bool {
        members.iter().for_each(|m| m.run_progress());
        // Every member is asked (a counter's change is reported once).
        members
            .iter()
            .fold(false, |any, m| m.has_events(report) | any)
    }

    /// fi_wait: until a member has events (0), or -FI_ETIMEDOUT after
    /// `timeout` ms (negative: no limit). A POSIX signal ends the wait
    /// early with -FI_EAGAIN, as for fi_cq_sread.
    pub fn wait(&self, timeout: c_int) -> Result<()> {
        let deadline =
            (timeout >= 0).then(|| Instant::now() + Duration::from_millis(timeout as u64));
        // A signal landing during a pass is delivered in the next wait.
        let held = self.obj.hold_signals();
        let mut spin = self.spin.clone();
        loop {
            let members = self.live();
            if Self::progress(&members, true) {
                return Ok(());
            }
            let left = match deadline {
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => return Err(Errno(FI_ETIMEDOUT)),
                },
                None => None,
            };
            if spin.keep_polling() {
                continue;
            }
            self.obj.settle(false);
            // Until a member queues something, a datagram arrives for one of
            // their endpoints, or the soonest of their timers. (What was
            // queued between the pass and the reset left no notification
            // behind: `ready` looks once more before sleeping.)
            let auto = members.iter().any(|m| m.auto_progress());
            let watched: &[&dyn Watched] = &[&members];
            let ready = || members.iter().any(|m| m.has_events(false));
            if let Err(e) = sleep_between_passes(&self.obj, watched, auto, left, &held, &ready)
                && e.kind() == std::io::ErrorKind::Interrupted
            {
                return Err(Errno::AGAIN);
            }
        }
    }

    /// fi_trywait on the set (fi_poll(3)): -FI_EAGAIN while a member has
    /// events or an endpoint has work now; else the set's fd is reset with
    /// its timer armed for the soonest protocol timer. A MUTEX_COND set is
    /// signalled only by completions, which manual progress produces only
    /// inside our calls, so blocking on it is safe only when a progress
    /// thread drives every member (FI_PROGRESS_AUTO).
    pub fn trywait(&self) -> Result<()> {
        let members = self.live();
        if Self::progress(&members, false) {
            return Err(Errno::AGAIN);
        }
        if self.obj.kind() == FI_WAIT_MUTEX_COND && !members.iter().all(|m| m.auto_progress()) {
            return Err(Errno::AGAIN);
        }
        match members.wait_state() {
            WaitState::Busy => Err(Errno::AGAIN),
            WaitState::Idle { timer } => {
                self.obj.arm(timer);
                Ok(())
            }
        }
    }
}

#[repr(C)]
pub struct WaitSetObj {
    pub fid: fid_wait,
    pub inner: Arc<WaitSet>,
}

static WAIT_FI_OPS: fi_ops = object::fi_ops_of::<WaitSetObj>(None, Some(wait_control));
static WAIT_OPS: fi_ops_wait = fi_ops_wait {
    size: size_of::<fi_ops_wait>(),
    wait: Some(wait_wait),
};

// SAFETY: repr(C), fid_wait first, WAIT_FI_OPS in every instance.
unsafe impl FidObject for WaitSetObj {
    const CLASS: usize = FI_CLASS_WAIT;
    const CLOSE: &'static str = "wait set close";
    fn fi_ops() -> *const fi_ops {
        &WAIT_FI_OPS
    }
    /// fi_poll(3): a wait set with queues still opened on it is busy.
    fn refs(&self) -> Option<&Refs> {
        Some(&self.inner.refs)
    }
    fn release(&self) {
        self.inner.fabric.refs.put();
    }
}

/// The wait set a queue's attributes name (`wait_obj = FI_WAIT_SET`,
/// `wait_set`), with a reference taken for the queue; -FI_EINVAL without
/// one.
///
/// # Safety
/// `ws` must be NULL or point to a readable fid.
pub unsafe fn member_of(ws: *mut fid_wait) -> Result<Arc<WaitSet>> {
    // SAFETY: per the caller.
    let s = unsafe { obj::<WaitSetObj>(ws.cast()) }?.inner.clone();
    s.refs.get();
    Ok(s)
}

/// `fi_ops_fabric::wait_open`.
pub unsafe extern "C" fn xdp_wait_open(
    fabric: *mut fid_fabric,
    attr: *mut fi_wait_attr,
    waitset: *mut *mut fid_wait,
) -> c_int {
    guard_int("fi_wait_open", || {
        // SAFETY: validated by fabric_of.
        let fabric = unsafe { crate::fabric::fabric_of(fabric) }?;
        // SAFETY: attr is NULL or valid.
        let a = unsafe { attr.as_ref() }.ok_or(Errno::INVAL)?;
        if waitset.is_null() {
            return Err(Errno::INVAL);
        }
        if a.flags != 0 {
            return Err(Errno::BADFLAGS);
        }
        let obj = match a.wait_obj {
            // A set of sets, or of nothing, makes no sense.
            FI_WAIT_SET | FI_WAIT_NONE => return Err(Errno::INVAL),
            k => WaitObj::new(k, None)?,
        };
        let inner = Arc::new(WaitSet {
            refs: Refs::default(),
            fabric: fabric.clone(),
            obj,
            members: Mutex::default(),
            spin: SpinBeforeSleep::new(&crate::params::Config::load()),
        });
        let o = WaitSetObj {
            fid: fid_wait {
                fid: object::header::<WaitSetObj>(std::ptr::null_mut()),
                ops: object::ops_ptr(&WAIT_OPS),
            },
            inner,
        };
        // SAFETY: `waitset` was checked non-NULL above.
        unsafe { object::open(waitset, Some(&fabric.refs), o) }.map(|_| 0)
    })
}

/// fi_control on a wait set: FI_GETWAIT, FI_GETWAITOBJ.
unsafe extern "C" fn wait_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    guard_int("wait set control", || {
        // SAFETY: validated by obj().
        let w = &unsafe { obj::<WaitSetObj>(f) }?.inner;
        match command {
            // SAFETY: arg's type per fi_poll(3) for the set's wait object.
            FI_GETWAIT => unsafe { w.obj.getwait(arg) }.map(|_| 0),
            FI_GETWAITOBJ => {
                // SAFETY: arg is an enum fi_wait_obj *.
                unsafe { crate::abi::write_out(arg.cast::<c_int>(), w.obj.kind()) }.map(|_| 0)
            }
            _ => Err(Errno::NOSYS),
        }
    })
}

unsafe extern "C" fn wait_wait(ws: *mut fid_wait, timeout: c_int) -> c_int {
    guard_int("fi_wait", || {
        // SAFETY: validated by obj().
        let w = &unsafe { obj::<WaitSetObj>(ws.cast()) }?.inner;
        w.wait(timeout).map(|_| 0)
    })
}

/// fi_trywait of a wait set (from the fabric's trywait).
///
/// # Safety
/// `f` must be a readable fid of class FI_CLASS_WAIT.
pub unsafe fn trywait(f: *mut fid) -> Result<()> {
    // SAFETY: per the caller.
    unsafe { obj::<WaitSetObj>(f) }?.inner.trywait()
}

/// The wait object a CQ, counter or EQ is opened with: `kind` from its
/// attributes, and for FI_WAIT_SET the set named by `set` (referenced for
/// as long as the queue lives).
///
/// # Safety
/// `set` must be NULL or point to a readable fid.
pub unsafe fn wait_obj_of(kind: c_int, set: *mut fid_wait) -> Result<WaitObj> {
    if kind == FI_WAIT_SET {
        // SAFETY: per the caller.
        let s = unsafe { member_of(set) }?;
        WaitObj::new(kind, Some(s))
    } else {
        WaitObj::new(kind, None)
    }
}
