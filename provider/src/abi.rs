//! Helpers shared by every `extern "C"` entry point: the fabric errno type,
//! panic containment (a provider runs inside someone else's process and must
//! never unwind into C), and checked access to our objects behind `fid`s.

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

/// A Rust object whose memory starts with a libfabric `fid` (its first
/// field, `#[repr(C)]`), so a `*mut fid` handed to us by the application can
/// be turned back into the object after checking it really is one of ours.
///
/// # Safety
/// Implementors must be `#[repr(C)]` with the C `fid_*` struct (itself
/// starting with `struct fid`) as first field, and `OPS` must be the `fi_ops`
/// table installed in every instance.
pub unsafe trait FidObject: Sized {
    const CLASS: usize;
    fn fi_ops() -> *const fi_ops;
}

/// Borrow the object behind `p`, or `-FI_EINVAL` when `p` is NULL or not an
/// object of type `T` created by this provider (checked by class and by the
/// identity of the ops table, so another provider's fid is refused too).
///
/// # Safety
/// `p` must be NULL or point to a readable `struct fid`.
pub unsafe fn obj<'a, T: FidObject>(p: *const fid) -> Result<&'a T> {
    if p.is_null() {
        return Err(Errno::INVAL);
    }
    // SAFETY: the caller promises `p` points to a readable fid.
    let f = unsafe { &*p };
    if f.fclass != T::CLASS || !std::ptr::eq(f.ops as *const fi_ops, T::fi_ops()) {
        return Err(Errno::INVAL);
    }
    // SAFETY: class and ops identity prove `p` was created as a `T` by us.
    Ok(unsafe { &*(p as *const T) })
}

/// Hand a freshly built object to C: box it and return its fid pointer.
pub fn into_raw<T: FidObject>(o: T) -> *mut T {
    Box::into_raw(Box::new(o))
}

/// Reclaim and drop an object previously returned by [`into_raw`].
///
/// # Safety
/// `p` must come from `into_raw::<T>` and not have been freed.
pub unsafe fn free<T: FidObject>(p: *const fid) {
    // SAFETY: guaranteed by the caller.
    drop(unsafe { Box::from_raw(p as *mut T) });
}

/// `fi_close` of an object that others may still reference: `-FI_EBUSY` while `refs(o)` says it
/// is busy (fi_domain(3)/fi_fabric(3): a resource with open children cannot be closed), else
/// `release` gives back the references it holds on its parents and the object is freed.
///
/// # Safety
/// `f` must be NULL or readable as a `fid` (checked by [`obj`]); on success it is freed.
pub unsafe fn close_unless_busy<T: FidObject>(
    f: *mut fid,
    refs: impl FnOnce(&T) -> &Refs,
    release: impl FnOnce(&T),
) -> Result<c_int> {
    // SAFETY: validated by obj() per the caller's promise.
    let o = unsafe { obj::<T>(f) }?;
    if refs(o).busy() {
        return Err(Errno::BUSY);
    }
    release(o);
    // SAFETY: ours (obj() checked class and ops identity) and not busy.
    unsafe { free::<T>(f) };
    Ok(0)
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

/// Count of live references from other objects (children opened from a
/// domain, endpoints bound to a CQ, …): `fi_close` on an object whose count
/// is non-zero returns -FI_EBUSY (fi_domain(3), fi_cq(3), fi_av(3)).
#[derive(Debug, Default)]
pub struct Refs(std::sync::atomic::AtomicUsize);

impl Refs {
    pub fn get(&self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }
    pub fn put(&self) {
        let _ = self.0.fetch_update(
            std::sync::atomic::Ordering::AcqRel,
            std::sync::atomic::Ordering::Acquire,
            |v| v.checked_sub(1),
        );
    }
    pub fn busy(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Acquire) != 0
    }
}

/// Lock a mutex, recovering the data if a panicking thread poisoned it (the
/// panic itself was already reported as an error to its caller).
pub fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

// Slots of `struct fi_ops` for objects that do not support them.
pub unsafe extern "C" fn nosys_bind(_: *mut fid, _: *mut fid, _: u64) -> c_int {
    -FI_ENOSYS
}
pub unsafe extern "C" fn nosys_control(_: *mut fid, _: c_int, _: *mut libc::c_void) -> c_int {
    -FI_ENOSYS
}
pub unsafe extern "C" fn nosys_ops_open(
    _: *mut fid,
    _: *const libc::c_char,
    _: u64,
    _: *mut *mut libc::c_void,
    _: *mut libc::c_void,
) -> c_int {
    -FI_ENOSYS
}
pub unsafe extern "C" fn nosys_tostr(
    _: *const fid,
    _: *mut libc::c_char,
    _: libc::size_t,
) -> c_int {
    -FI_ENOSYS
}
pub unsafe extern "C" fn nosys_ops_set(
    _: *mut fid,
    _: *const libc::c_char,
    _: u64,
    _: *mut libc::c_void,
    _: *mut libc::c_void,
) -> c_int {
    -FI_ENOSYS
}

/// Build a `struct fi_ops` with our close/bind/control and ENOSYS for the rest.
pub const fn fi_ops_with(
    close: unsafe extern "C" fn(*mut fid) -> c_int,
    bind: Option<unsafe extern "C" fn(*mut fid, *mut fid, u64) -> c_int>,
    control: Option<unsafe extern "C" fn(*mut fid, c_int, *mut libc::c_void) -> c_int>,
) -> fi_ops {
    fi_ops {
        size: size_of::<fi_ops>(),
        close: Some(close),
        bind: match bind {
            Some(b) => Some(b),
            None => Some(nosys_bind),
        },
        control: match control {
            Some(c) => Some(c),
            None => Some(nosys_control),
        },
        ops_open: Some(nosys_ops_open),
        tostr: Some(nosys_tostr),
        ops_set: Some(nosys_ops_set),
    }
}

/// `*const T` → `*mut T` for installing static ops tables in C structs;
/// libfabric never writes through these pointers.
pub const fn ops_ptr<T>(t: &'static T) -> *mut T {
    t as *const T as *mut T
}
