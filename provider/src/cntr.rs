//! Completion counters (fi_cntr(3)). Reads drive progress on the bound
//! endpoints, like CQ reads (manual progress).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use libc::{c_int, c_void};

use crate::abi::{self, Errno, guard_int, guard_value};
use crate::domain::Domain;
use crate::ep::Endpoint;
use crate::object::{self, FidObject, Refs, obj};
use crate::progress::ProgressSet;
use crate::sys::*;

pub struct Cntr {
    /// Endpoints bound to this counter.
    pub refs: Refs,
    pub domain: Arc<Domain>,
    pub wait_obj: c_int,
    value: AtomicU64,
    errors: AtomicU64,
    progress: ProgressSet<Endpoint>,
}

impl Cntr {
    pub fn add(&self, n: u64) {
        self.value.fetch_add(n, Ordering::AcqRel);
    }
    pub fn add_err(&self, n: u64) {
        self.errors.fetch_add(n, Ordering::AcqRel);
    }
    pub fn attach(&self, ep: Weak<Endpoint>) {
        self.progress.attach(ep);
    }
    pub fn detach(&self, ep: &Weak<Endpoint>) {
        self.progress.detach(ep);
    }
    pub fn run_progress(&self) {
        self.progress.run();
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
        let (events, wait_obj, flags) = match unsafe { attr.as_ref() } {
            Some(a) => (a.events, a.wait_obj, a.flags),
            None => (FI_CNTR_EVENTS_COMP, FI_WAIT_NONE, 0),
        };
        if events != FI_CNTR_EVENTS_COMP {
            return Err(Errno::INVAL);
        }
        if flags != 0 {
            return Err(Errno::BADFLAGS);
        }
        let wait_obj = match wait_obj {
            w @ (FI_WAIT_NONE | FI_WAIT_UNSPEC | FI_WAIT_YIELD) => w,
            FI_WAIT_FD | FI_WAIT_MUTEX_COND | FI_WAIT_SET | FI_WAIT_POLLFD => {
                return Err(Errno::NOSYS);
            }
            _ => return Err(Errno::INVAL),
        };
        let inner = Arc::new(Cntr {
            refs: Refs::default(),
            domain: domain.clone(),
            wait_obj,
            value: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            progress: ProgressSet::default(),
        });
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
                unsafe { abi::write_out(arg.cast::<c_int>(), o.inner.wait_obj) }?;
                Ok(0)
            }
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
                o.inner.run_progress();
                o.inner.value.load(Ordering::Acquire)
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
    with_cntr("fi_cntr_add", c, |k| k.add(value))
}
unsafe extern "C" fn cntr_set(c: *mut fid_cntr, value: u64) -> c_int {
    with_cntr("fi_cntr_set", c, |k| {
        k.value.store(value, Ordering::Release)
    })
}
unsafe extern "C" fn cntr_adderr(c: *mut fid_cntr, value: u64) -> c_int {
    with_cntr("fi_cntr_adderr", c, |k| k.add_err(value))
}
unsafe extern "C" fn cntr_seterr(c: *mut fid_cntr, value: u64) -> c_int {
    with_cntr("fi_cntr_seterr", c, |k| {
        k.errors.store(value, Ordering::Release)
    })
}

/// fi_cntr_wait: drive progress until the counter reaches `threshold`,
/// an error is counted (-FI_EAVAIL) or `timeout` ms pass (-FI_ETIMEDOUT).
unsafe extern "C" fn cntr_wait(c: *mut fid_cntr, threshold: u64, timeout: c_int) -> c_int {
    guard_int("fi_cntr_wait", || {
        // SAFETY: validated by obj().
        let o = unsafe { obj::<CntrObj>(c.cast()) }?;
        let k = &o.inner;
        if k.wait_obj == FI_WAIT_NONE {
            return Err(Errno::INVAL);
        }
        let errs = k.errors.load(Ordering::Acquire);
        let deadline =
            (timeout >= 0).then(|| Instant::now() + Duration::from_millis(timeout as u64));
        loop {
            k.run_progress();
            if k.value.load(Ordering::Acquire) >= threshold {
                return Ok(0);
            }
            if k.errors.load(Ordering::Acquire) != errs {
                return Err(Errno::AVAIL);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(Errno(FI_ETIMEDOUT));
            }
            std::thread::yield_now();
        }
    })
}
