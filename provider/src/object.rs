//! The life of every libfabric object (fabric, domain, endpoint, AV, CQ,
//! counter, EQ, MR) as the application sees it: a `struct fid` whose first
//! field heads one of our Rust objects.
//!
//! - [`FidObject`]: what an object tells this module — its class, its
//!   `fi_ops` table, who may still refer to it ([`Refs`]) and what it gives
//!   back when it closes.
//! - [`open`]: box a new object, take a reference on its parent and hand
//!   the fid to the application; [`header`] is the `struct fid` it starts
//!   with (class, ops, the application's context).
//! - [`close`]: the `fi_close` of every object: -FI_EBUSY while other
//!   objects still refer to it (fi_domain(3), fi_fabric(3), fi_cq(3),
//!   fi_av(3): a resource with open children or bindings cannot be
//!   closed), otherwise release and free.
//! - [`obj`]: a fid from the application back to our object, checked.

use std::sync::atomic::{AtomicUsize, Ordering};

use libc::{c_char, c_int, c_void, size_t};

use crate::abi::{Errno, Result, guard_int};
use crate::sys::*;

/// A Rust object whose memory starts with a libfabric `fid` (its first
/// field, `#[repr(C)]`), so a `*mut fid` handed to us by the application can
/// be turned back into the object after checking it really is one of ours.
///
/// # Safety
/// Implementors must be `#[repr(C)]` with the C `fid_*` struct (itself
/// starting with `struct fid`) as first field, and [`FidObject::fi_ops`]
/// must be the `fi_ops` table installed in every instance.
pub unsafe trait FidObject: Sized {
    /// `FI_CLASS_*` of the object.
    const CLASS: usize;
    /// What a panic report names when `fi_close` of this object panics.
    const CLOSE: &'static str;
    /// The `fi_ops` table in every instance (its identity proves a fid is ours).
    fn fi_ops() -> *const fi_ops;
    /// Other objects' references to this one (children opened from it,
    /// endpoints bound to it); `None` when nothing can refer to it.
    fn refs(&self) -> Option<&Refs> {
        None
    }
    /// At close: stop what must stop and give back the references this
    /// object holds on others (its parent, objects bound to it).
    fn release(&self);
}

/// The `struct fid` a new object of type `T` starts with.
pub fn header<T: FidObject>(context: *mut c_void) -> fid {
    fid {
        fclass: T::CLASS,
        context,
        ops: T::fi_ops().cast_mut(),
    }
}

/// Hand a new object to the application: take a reference on `parent`
/// (whose close is then refused until this object closes), box the object
/// and write its fid to `out`. Returns the object's address.
///
/// # Safety
/// `out` must be NULL or valid for a write of a pointer.
pub unsafe fn open<T: FidObject, F>(
    out: *mut *mut F,
    parent: Option<&Refs>,
    o: T,
) -> Result<*mut T> {
    if out.is_null() {
        return Err(Errno::INVAL);
    }
    if let Some(r) = parent {
        r.get();
    }
    let p = Box::into_raw(Box::new(o));
    // SAFETY: non-NULL and writable per the caller.
    unsafe { *out = p.cast() };
    Ok(p)
}

/// `fi_ops::close` of every object: -FI_EBUSY while others still refer to
/// it, else [`FidObject::release`] and free it.
///
/// # Safety
/// `f` must be NULL or a readable fid (checked by [`obj`]); on success it
/// is freed.
pub unsafe extern "C" fn close<T: FidObject>(f: *mut fid) -> c_int {
    guard_int(T::CLOSE, || {
        // SAFETY: validated by obj() per the caller's promise.
        let o = unsafe { obj::<T>(f) }?;
        if o.refs().is_some_and(Refs::busy) {
            return Err(Errno::BUSY);
        }
        o.release();
        // SAFETY: created by open::<T> (obj() checked class and ops
        // identity) and, being closed now, no longer used by anyone.
        drop(unsafe { Box::from_raw(f.cast::<T>()) });
        Ok(0)
    })
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

/// Count of live references from other objects (children opened from a
/// domain, endpoints bound to a CQ, …): `fi_close` on an object whose count
/// is non-zero returns -FI_EBUSY (fi_domain(3), fi_cq(3), fi_av(3)).
#[derive(Debug, Default)]
pub struct Refs(AtomicUsize);

impl Refs {
    pub fn get(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }
    pub fn put(&self) {
        let _ = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| v.checked_sub(1));
    }
    pub fn busy(&self) -> bool {
        self.0.load(Ordering::Acquire) != 0
    }
}

// Slots of `struct fi_ops` for objects that do not support them.
unsafe extern "C" fn nosys_bind(_: *mut fid, _: *mut fid, _: u64) -> c_int {
    -FI_ENOSYS
}
unsafe extern "C" fn nosys_control(_: *mut fid, _: c_int, _: *mut c_void) -> c_int {
    -FI_ENOSYS
}
unsafe extern "C" fn nosys_ops_open(
    _: *mut fid,
    _: *const c_char,
    _: u64,
    _: *mut *mut c_void,
    _: *mut c_void,
) -> c_int {
    -FI_ENOSYS
}
unsafe extern "C" fn nosys_tostr(_: *const fid, _: *mut c_char, _: size_t) -> c_int {
    -FI_ENOSYS
}
unsafe extern "C" fn nosys_ops_set(
    _: *mut fid,
    _: *const c_char,
    _: u64,
    _: *mut c_void,
    _: *mut c_void,
) -> c_int {
    -FI_ENOSYS
}

/// The `struct fi_ops` of objects of type `T`: [`close`], the given bind
/// and control, and -FI_ENOSYS for the rest.
pub const fn fi_ops_of<T: FidObject>(
    bind: Option<unsafe extern "C" fn(*mut fid, *mut fid, u64) -> c_int>,
    control: Option<unsafe extern "C" fn(*mut fid, c_int, *mut c_void) -> c_int>,
) -> fi_ops {
    fi_ops {
        size: size_of::<fi_ops>(),
        close: Some(close::<T>),
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
