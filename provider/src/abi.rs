//! Helpers shared by every `extern "C"` entry point: the fabric errno type,
//! panic containment (a provider runs inside someone else's process and must
//! never unwind into C), out-pointers and error entries. The objects behind
//! `fid`s live in [`crate::object`].

use std::panic::{AssertUnwindSafe, catch_unwind};

use libc::{c_int, c_void, ssize_t};

use crate::sys::*;

/// A positive fabric errno (fi_errno(3)); entry points return its negation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Errno(pub c_int);

impl Errno {
    pub const INVAL: Errno = Errno(FI_EINVAL);
    pub const NOSYS: Errno = Errno(FI_ENOSYS);
    pub const NODATA: Errno = Errno(FI_ENODATA);
    pub const BUSY: Errno = Errno(FI_EBUSY);
    pub const NOMEM: Errno = Errno(FI_ENOMEM);
    pub const AGAIN: Errno = Errno(FI_EAGAIN);
    pub const BADFLAGS: Errno = Errno(FI_EBADFLAGS);
    pub const TOOSMALL: Errno = Errno(FI_ETOOSMALL);
    pub const OPNOTSUPP: Errno = Errno(FI_EOPNOTSUPP);
    pub const OPBADSTATE: Errno = Errno(FI_EOPBADSTATE);
    pub const AVAIL: Errno = Errno(FI_EAVAIL);
    pub const NOCQ: Errno = Errno(FI_ENOCQ);
    pub const NOAV: Errno = Errno(FI_ENOAV);
    pub const NOEQ: Errno = Errno(FI_ENOEQ);
    pub const DOMAIN: Errno = Errno(FI_EDOMAIN);
    pub const OTHER: Errno = Errno(FI_EOTHER);

    /// Map an OS errno (from a failed syscall) to a fabric errno: the classic
    /// fabric errnos alias the OS values.
    pub fn from_os(err: &std::io::Error) -> Errno {
        Errno(err.raw_os_error().unwrap_or(FI_EOTHER))
    }

    pub fn negated(self) -> c_int {
        -self.0
    }
}

pub type Result<T> = core::result::Result<T, Errno>;

fn report_panic(what: &str) {
    crate::xdp_warn!(FI_LOG_CORE, "panic caught in {what}; returning -FI_EOTHER");
}

/// Run an `int`-returning entry point: Ok(v) → v, Err(e) → -e, panic → -FI_EOTHER.
pub fn guard_int(what: &str, f: impl FnOnce() -> Result<c_int>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => e.negated(),
        Err(_) => {
            report_panic(what);
            -FI_EOTHER
        }
    }
}

/// Same as [`guard_int`] for `ssize_t` entry points.
pub fn guard_ssize(what: &str, f: impl FnOnce() -> Result<ssize_t>) -> ssize_t {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => -(e.0 as ssize_t),
        Err(_) => {
            report_panic(what);
            -(FI_EOTHER as ssize_t)
        }
    }
}

/// Run an entry point whose C return type has no error channel (pointers,
/// counters): a panic yields `fallback`.
pub fn guard_value<T>(what: &str, fallback: T, f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(_) => {
            report_panic(what);
            fallback
        }
    }
}

/// Write `v` through an out-pointer, refusing NULL.
///
/// # Safety
/// `p` must be NULL or valid for a write of `T`.
pub unsafe fn write_out<T>(p: *mut T, v: T) -> Result<()> {
    if p.is_null() {
        return Err(Errno::INVAL);
    }
    // SAFETY: non-NULL and valid per the caller.
    unsafe { p.write(v) };
    Ok(())
}

/// Write an error entry (`fi_cq_err_entry`, `fi_eq_err_entry`) for an
/// application that asked for API `api`. Before 1.5 the structs ended
/// before `err_data_size` (libfabric's `fi_cq_err_entry_1_0` and
/// `fi_eq_err_entry_1_0`, which its 1.0 ABI entry points still use), so such
/// an application's buffer is only that long: write just the prefix.
///
/// # Safety
/// `dst` must be non-NULL and valid for a write of the struct its API has.
pub unsafe fn write_err_entry<T: Copy>(dst: *mut T, entry: &T, api: u32, prefix_1_0: usize) {
    let len = if api >= fi_version(1, 5) {
        size_of::<T>()
    } else {
        prefix_1_0.min(size_of::<T>())
    };
    // SAFETY: `dst` holds at least `len` bytes (caller); `entry` is a T.
    unsafe {
        std::ptr::copy_nonoverlapping((entry as *const T).cast::<u8>(), dst.cast::<u8>(), len)
    };
}

/// Keep `data` in `slot` until the next readerr (the fi_cq(3)/fi_eq(3)
/// compatibility note) and return where it lives (NULL when empty).
pub fn hold_err_data(slot: &mut Vec<u8>, data: Vec<u8>) -> (*mut c_void, usize) {
    *slot = data;
    let p = if slot.is_empty() {
        std::ptr::null_mut()
    } else {
        slot.as_mut_ptr().cast()
    };
    (p, slot.len())
}

/// Where a readerr's `err_data` goes: into the application's buffer
/// (`user`: its `err_data` and `err_data_size`), when an application of
/// API 1.5+ supplies one, truncated to its size; otherwise into provider
/// storage through `hold` ([`hold_err_data`]). Returns the entry's
/// `err_data` and `err_data_size`.
///
/// # Safety
/// With API 1.5+, a non-NULL `user.0` must be writable for `user.1` bytes.
pub unsafe fn place_err_data(
    api: u32,
    user: (*mut c_void, usize),
    data: Vec<u8>,
    hold: impl FnOnce(Vec<u8>) -> (*mut c_void, usize),
) -> (*mut c_void, usize) {
    let (buf, len) = user;
    if api < fi_version(1, 5) || buf.is_null() || len == 0 {
        return hold(data);
    }
    let n = len.min(data.len());
    // SAFETY: the caller's buffer holds `len` bytes (caller).
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), buf.cast::<u8>(), n) };
    (buf, n)
}

/// Lock a mutex, recovering the data if a panicking thread poisoned it (the
/// panic itself was already reported as an error to its caller).
pub fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
