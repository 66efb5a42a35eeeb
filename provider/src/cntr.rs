//! Completion counters (fi_cntr(3)). Reads drive progress on the bound
//! endpoints, like CQ reads (manual progress). `fi_cntr_wait` blocks on the
//! counter's wait object ([`WaitObj`]: UNSPEC, FD, MUTEX_COND, YIELD or a
//! wait set's) in short slices, driving progress in between.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use libc::{c_int, c_void};

use crate::abi::{self, Errno, guard_int, guard_value, lock};
use crate::datapath::WaitState;
use crate::domain::Domain;
use crate::ep::Endpoint;
use crate::idle::{IdleReads, SpinBeforeSleep};
use crate::object::{self, FidObject, Refs, obj};
use crate::progress::{ProgressSet, Queue, Watched, sleep_between_passes};
use crate::sys::*;
use crate::wait::SignalsHeld;
use crate::wait_obj::WaitObj;

pub struct Cntr {
    /// Endpoints bound to this counter.
    pub refs: Refs,
    pub domain: Arc<Domain>,
    pub wait: WaitObj,
    value: AtomicU64,
    errors: AtomicU64,
    /// (value, errors) as last reported by fi_poll / fi_wait or set by
    /// fi_cntr_set/add (fi_poll(3): a counter has events when they changed).
    checkpoint: Mutex<(u64, u64)>,
    /// This counter as a member of its wait set (FI_WAIT_SET), to leave it.
    member: OnceLock<Weak<dyn Queue>>,
    progress: ProgressSet<Endpoint>,
    /// Bound to a registration (fi_mr_bind): reads also progress every
    /// endpoint of the domain, through which peers' operations arrive.
    pub counts_registrations: std::sync::atomic::AtomicBool,
    /// The value `fi_cntr_read` last returned: a read that returns it again
    /// found nothing new.
    last_read: AtomicU64,
    /// Reads that find nothing new lead to a sched_yield (FI_XDP_YIELD,
    /// `idle.rs`), as for a CQ: an application polling a counter on a
    /// shared CPU lets the process it waits for run.
    idle: IdleReads,
}

impl Cntr {
    pub fn add(&self, n: u64) {
        self.value.fetch_add(n, Ordering::AcqRel);
        self.wait.notify();
    }
    pub fn add_err(&self, n: u64) {
        self.errors.fetch_add(n, Ordering::AcqRel);
        self.wait.notify();
    }
    fn now(&self) -> (u64, u64) {
        (
            self.value.load(Ordering::Acquire),
            self.errors.load(Ordering::Acquire),
        )
    }
    /// The application set or added to the counter (fi_poll(3)).
    fn checkpoint_now(&self) {
        *lock(&self.checkpoint) = self.now();
    }
    /// Whether endpoints' sockets must join the wait fd (FI_WAIT_FD).
    pub fn wants_wait_fd(&self) -> bool {
        self.wait.wants_fds()
    }
    pub fn add_wait_fd(&self, fd: RawFd) {
        self.wait.add_fd(fd);
    }
    pub fn remove_wait_fd(&self, fd: RawFd) {
        self.wait.remove_fd(fd);
    }
    /// fi_trywait on the counter: drive progress; -FI_EAGAIN if that
    /// changed the counter or an endpoint has work now, else the wait fd
    /// is reset and armed for the endpoints' next protocol timer.
    pub fn trywait(&self) -> abi::Result<()> {
        let before = self.now();
        self.run_progress();
        self.wait.settle(false);
        if self.now() != before {
            return Err(Errno::AGAIN);
        }
        self.wait
            .try_arm(self.domain.auto_progress(), || self.progress.wait_state())
    }
    pub fn attach(&self, ep: Weak<Endpoint>) {
        self.progress.attach(ep);
    }
    pub fn detach(&self, ep: &Weak<Endpoint>) {
        self.progress.detach(ep);
    }
    pub fn run_progress(&self) {
        self.progress.run();
        if self.counts_registrations.load(Ordering::Relaxed) {
            self.domain.endpoints.run();
        }
    }
}

impl crate::datapath::memory::RemoteCounter for Cntr {
    fn add(&self, n: u64) {
        Cntr::add(self, n);
    }
}

impl Queue for Cntr {
    fn run_progress(&self) {
        Cntr::run_progress(self);
    }
    fn has_events(&self, report: bool) -> bool {
        let now = self.now();
        let mut seen = lock(&self.checkpoint);
        let changed = *seen != now;
        if changed && report {
            *seen = now;
        }
        changed
    }
    fn wait_state(&self) -> WaitState {
        self.progress.wait_state()
    }
    fn arrival_fds(&self, out: &mut Vec<std::os::fd::RawFd>) -> bool {
        self.progress.arrival_fds(out)
    }
    fn auto_progress(&self) -> bool {
        self.domain.auto_progress()
    }
}

#[repr(C)]
pub struct CntrObj {
    pub fid: fid_cntr,
    pub inner: Arc<Cntr>,
}

static CNTR_FI_OPS: fi_ops = object::fi_ops_of::<CntrObj>(None, Some(cntr_control));
static CNTR_OPS: fi_ops_cntr = fi_ops_cntr {
    size: size_of::<fi_ops_cntr>(),
    read: Some(cntr_read),
    readerr: Some(cntr_readerr),
    add: Some(cntr_add),
    set: Some(cntr_set),
    wait: Some(cntr_wait),
    adderr: Some(cntr_adderr),
    seterr: Some(cntr_seterr),
};

// SAFETY: repr(C), fid_cntr first, CNTR_FI_OPS in every instance.
unsafe impl FidObject for CntrObj {
    const CLASS: usize = FI_CLASS_CNTR;
    const CLOSE: &'static str = "cntr close";
    fn fi_ops() -> *const fi_ops {
        &CNTR_FI_OPS
    }
    fn refs(&self) -> Option<&Refs> {
        Some(&self.inner.refs)
    }
    fn release(&self) {
        if let (Some(set), Some(me)) = (self.inner.wait.set(), self.inner.member.get()) {
            set.leave(me);
        }
        self.inner.domain.refs.put();
    }
}

/// `fi_ops_domain::cntr_open`.
pub unsafe extern "C" fn xdp_cntr_open(
    domain: *mut fid_domain,
    attr: *mut fi_cntr_attr,
    cntr: *mut *mut fid_cntr,
    context: *mut c_void,
) -> c_int {
    guard_int("fi_cntr_open", || {
        // SAFETY: validated by domain_of.
        let domain = unsafe { crate::domain::domain_of(domain) }?;
        if cntr.is_null() {
            return Err(Errno::INVAL);
        }
        // SAFETY: attr NULL (defaults, fi_cntr(3)) or valid.
        let (events, wait_obj, wait_set, flags) = match unsafe { attr.as_ref() } {
            Some(a) => (a.events, a.wait_obj, a.wait_set, a.flags),
            None => (FI_CNTR_EVENTS_COMP, FI_WAIT_NONE, std::ptr::null_mut(), 0),
        };
        if events != FI_CNTR_EVENTS_COMP {
            return Err(Errno::INVAL);
        }
        if flags != 0 {
            return Err(Errno::BADFLAGS);
        }
        // SAFETY: wait_set is NULL or the application's wait set (fi_cntr(3)).
        let wait = unsafe { crate::waitset::wait_obj_of(wait_obj, wait_set) }?;
        let inner = Arc::new(Cntr {
            refs: Refs::default(),
            domain: domain.clone(),
            wait,
            value: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            checkpoint: Mutex::new((0, 0)),
            member: OnceLock::new(),
            progress: ProgressSet::default(),
            counts_registrations: Default::default(),
            last_read: AtomicU64::new(0),
            idle: IdleReads::new(domain.cfg.yield_when_idle),
        });
        if let Some(set) = inner.wait.set() {
            let me: Weak<dyn Queue> = Arc::downgrade(&inner) as Weak<dyn Queue>;
            set.join(me.clone());
            let _ = inner.member.set(me);
        }
        let o = CntrObj {
            fid: fid_cntr {
                fid: object::header::<CntrObj>(context),
                ops: object::ops_ptr(&CNTR_OPS),
            },
            inner,
        };
        // SAFETY: `cntr` was checked non-NULL above.
        unsafe { object::open(cntr, Some(&domain.refs), o) }.map(|_| 0)
    })
}

unsafe extern "C" fn cntr_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    guard_int("cntr control", || {
        // SAFETY: validated by obj().
        let o = unsafe { obj::<CntrObj>(f) }?;
        match command {
            FI_GETWAITOBJ => {
                // SAFETY: arg is an enum fi_wait_obj *.
                unsafe { abi::write_out(arg.cast::<c_int>(), o.inner.wait.kind()) }?;
                Ok(0)
            }
            // SAFETY: arg's type per fi_cntr(3) for the counter's wait object.
            FI_GETWAIT => unsafe { o.inner.wait.getwait(arg) }.map(|_| 0),
            _ => Err(Errno::NOSYS),
        }
    })
}

/// fi_cntr_read has no error channel: an invalid counter reads as 0.
unsafe extern "C" fn cntr_read(c: *mut fid_cntr) -> u64 {
    guard_value("fi_cntr_read", 0, || {
        // SAFETY: validated by obj().
        match unsafe { obj::<CntrObj>(c.cast()) } {
            Ok(o) => {
                let k = &o.inner;
                k.run_progress();
                let v = k.value.load(Ordering::Acquire);
                // A load and a store, not a swap (no locked instruction on
                // the polling path); racing readers only blur the count.
                if k.last_read.load(Ordering::Relaxed) == v {
                    k.idle.found_nothing();
                } else {
                    k.last_read.store(v, Ordering::Relaxed);
                    k.idle.found();
                }
                v
            }
            Err(_) => 0,
        }
    })
}

unsafe extern "C" fn cntr_readerr(c: *mut fid_cntr) -> u64 {
    guard_value("fi_cntr_readerr", 0, || {
        // SAFETY: validated by obj().
        match unsafe { obj::<CntrObj>(c.cast()) } {
            Ok(o) => {
                o.inner.run_progress();
                o.inner.errors.load(Ordering::Acquire)
            }
            Err(_) => 0,
        }
    })
}

fn with_cntr(what: &str, c: *mut fid_cntr, f: impl FnOnce(&Cntr)) -> c_int {
    guard_int(what, || {
        // SAFETY: validated by obj().
        let o = unsafe { obj::<CntrObj>(c.cast()) }?;
        f(&o.inner);
        Ok(0)
    })
}

unsafe extern "C" fn cntr_add(c: *mut fid_cntr, value: u64) -> c_int {
    with_cntr("fi_cntr_add", c, |k| {
        k.add(value);
        k.checkpoint_now();
    })
}
unsafe extern "C" fn cntr_set(c: *mut fid_cntr, value: u64) -> c_int {
    with_cntr("fi_cntr_set", c, |k| {
        k.value.store(value, Ordering::Release);
        k.checkpoint_now();
        k.wait.notify();
    })
}
unsafe extern "C" fn cntr_adderr(c: *mut fid_cntr, value: u64) -> c_int {
    with_cntr("fi_cntr_adderr", c, |k| {
        k.add_err(value);
        k.checkpoint_now();
    })
}
unsafe extern "C" fn cntr_seterr(c: *mut fid_cntr, value: u64) -> c_int {
    with_cntr("fi_cntr_seterr", c, |k| {
        k.errors.store(value, Ordering::Release);
        k.checkpoint_now();
        k.wait.notify();
    })
}

/// fi_cntr_wait: drive progress until the counter reaches `threshold`,
/// an error is counted (-FI_EAVAIL) or `timeout` ms pass (-FI_ETIMEDOUT).
unsafe extern "C" fn cntr_wait(c: *mut fid_cntr, threshold: u64, timeout: c_int) -> c_int {
    guard_int("fi_cntr_wait", || {
        // SAFETY: validated by obj().
        let o = unsafe { obj::<CntrObj>(c.cast()) }?;
        let k = &o.inner;
        if !k.wait.can_block() {
            return Err(Errno::INVAL);
        }
        let errs = k.errors.load(Ordering::Acquire);
        let deadline =
            (timeout >= 0).then(|| Instant::now() + Duration::from_millis(timeout as u64));
        let mut spin = SpinBeforeSleep::new(&k.domain.cfg);
        let reached = || k.value.load(Ordering::Acquire) >= threshold;
        let failed = || k.errors.load(Ordering::Acquire) != errs;
        loop {
            k.run_progress();
            if reached() {
                return Ok(0);
            }
            if failed() {
                return Err(Errno::AVAIL);
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
            let mut sets: Vec<&dyn Watched> = vec![&k.progress];
            if k.counts_registrations.load(Ordering::Relaxed) {
                sets.push(&k.domain.endpoints);
            }
            let auto = k.domain.auto_progress();
            let ready = || reached() || failed();
            let _ = sleep_between_passes(&k.wait, &sets, auto, left, &SignalsHeld::none(), &ready);
            k.wait.settle(false);
        }
    })
}
