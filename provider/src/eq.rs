//! Event queue (fi_eq(3)): control-path events. Used here for asynchronous
//! AV insertion (FI_AV_COMPLETE) and application writes (fi_eq_write).

use std::collections::VecDeque;
use std::mem::offset_of;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use libc::{c_char, c_int, c_void, size_t, ssize_t};

use crate::abi::{self, Errno, guard_int, guard_ssize, guard_value, lock};
use crate::fabric::Fabric;
use crate::object::{self, FidObject, Refs, obj};
use crate::sys::*;

pub enum EqEvent {
    Event {
        event: u32,
        bytes: Vec<u8>,
    },
    Error {
        entry: fi_eq_err_entry,
        err_data: Vec<u8>,
    },
}

// SAFETY: the raw pointers inside fi_eq_err_entry are opaque application
// values (fid, context) that we only copy back out.
unsafe impl Send for EqEvent {}

pub struct Eq {
    /// Domains, AVs and endpoints bound to this EQ.
    pub refs: Refs,
    pub fabric: Arc<Fabric>,
    queue: Mutex<EqState>,
    cond: Condvar,
}

#[derive(Default)]
struct EqState {
    events: VecDeque<EqEvent>,
    /// Provider-owned err_data of the last readerr (fi_eq(3) compatibility
    /// note: valid until the next read).
    last_err_data: Vec<u8>,
}

impl Eq {
    /// Queue an event and wake blocked readers.
    pub fn push(&self, ev: EqEvent) {
        lock(&self.queue).events.push_back(ev);
        self.cond.notify_all();
    }

    /// Queue an error entry about `fid` (fi_eq_readerr), with `data` and
    /// the positive fabric errno `err`.
    pub fn push_error(&self, fid: *mut fid, context: *mut c_void, data: u64, err: c_int) {
        self.push(EqEvent::Error {
            entry: fi_eq_err_entry {
                fid,
                context,
                data,
                err,
                prov_errno: err,
                err_data: std::ptr::null_mut(),
                err_data_size: 0,
            },
            err_data: Vec::new(),
        });
    }

    /// Queue a standard `fi_eq_entry` event.
    pub fn push_entry(&self, event: u32, fid: *mut fid, context: *mut c_void, data: u64) {
        let e = fi_eq_entry { fid, context, data };
        // SAFETY: fi_eq_entry is plain data.
        let bytes = unsafe {
            std::slice::from_raw_parts(
                (&e as *const fi_eq_entry).cast::<u8>(),
                size_of::<fi_eq_entry>(),
            )
        };
        self.push(EqEvent::Event {
            event,
            bytes: bytes.to_vec(),
        });
    }
}

#[repr(C)]
pub struct EqObj {
    pub fid: fid_eq,
    pub inner: Arc<Eq>,
}

static EQ_FI_OPS: fi_ops = object::fi_ops_of::<EqObj>(None, Some(eq_control));
static EQ_OPS: fi_ops_eq = fi_ops_eq {
    size: size_of::<fi_ops_eq>(),
    read: Some(eq_read),
    readerr: Some(eq_readerr),
    write: Some(eq_write),
    sread: Some(eq_sread),
    strerror: Some(eq_strerror),
};

// SAFETY: repr(C), fid_eq first, EQ_FI_OPS in every instance.
unsafe impl FidObject for EqObj {
    const CLASS: usize = FI_CLASS_EQ;
    const CLOSE: &'static str = "eq close";
    fn fi_ops() -> *const fi_ops {
        &EQ_FI_OPS
    }
    fn refs(&self) -> Option<&Refs> {
        Some(&self.inner.refs)
    }
    fn release(&self) {
        self.inner.fabric.refs.put();
    }
}

/// `fi_ops_fabric::eq_open`.
pub unsafe extern "C" fn xdp_eq_open(
    fabric: *mut fid_fabric,
    attr: *mut fi_eq_attr,
    eq: *mut *mut fid_eq,
    context: *mut c_void,
) -> c_int {
    guard_int("fi_eq_open", || {
        // SAFETY: validated by fabric_of.
        let fabric = unsafe { crate::fabric::fabric_of(fabric) }?;
        // SAFETY: attr is NULL or valid.
        let a = unsafe { attr.as_ref() }.ok_or(Errno::INVAL)?;
        if eq.is_null() {
            return Err(Errno::INVAL);
        }
        if a.flags & !FI_WRITE != 0 {
            return Err(Errno::BADFLAGS);
        }
        match a.wait_obj {
            FI_WAIT_NONE | FI_WAIT_UNSPEC | FI_WAIT_YIELD => {}
            // FD, mutex/cond and wait-set objects are not offered.
            _ => return Err(Errno::NOSYS),
        }
        let inner = Arc::new(Eq {
            refs: Refs::default(),
            fabric: fabric.clone(),
            queue: Mutex::default(),
            cond: Condvar::new(),
        });
        let o = EqObj {
            fid: fid_eq {
                fid: object::header::<EqObj>(context),
                ops: object::ops_ptr(&EQ_OPS),
            },
            inner,
        };
        // SAFETY: `eq` was checked non-NULL above.
        unsafe { object::open(eq, Some(&fabric.refs), o) }.map(|_| 0)
    })
}

unsafe extern "C" fn eq_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    guard_int("eq control", || {
        // SAFETY: validated by obj().
        let _ = unsafe { obj::<EqObj>(f) }?;
        match command {
            // No OS-level wait object to hand out (FD/mutex-cond not implemented).
            FI_GETWAIT => Err(Errno::NOSYS),
            FI_GETWAITOBJ => {
                // SAFETY: arg is an enum fi_wait_obj * per fi_eq(3).
                unsafe { abi::write_out(arg.cast::<c_int>(), FI_WAIT_UNSPEC) }?;
                Ok(0)
            }
            _ => Err(Errno::NOSYS),
        }
    })
}

/// fi_eq_read: -FI_EAGAIN when empty, -FI_EAVAIL when an error is at the
/// head, -FI_ETOOSMALL when `len` cannot hold the event; FI_PEEK leaves it.
unsafe extern "C" fn eq_read(
    eq: *mut fid_eq,
    event: *mut u32,
    buf: *mut c_void,
    len: size_t,
    flags: u64,
) -> ssize_t {
    guard_ssize("fi_eq_read", || {
        // SAFETY: validated by obj().
        let o = unsafe { obj::<EqObj>(eq.cast()) }?;
        // SAFETY: pointers checked inside.
        unsafe { read_locked(&mut lock(&o.inner.queue), event, buf, len, flags) }
    })
}

/// # Safety
/// `event` and `buf` must be NULL or valid for their sizes.
unsafe fn read_locked(
    st: &mut EqState,
    event: *mut u32,
    buf: *mut c_void,
    len: size_t,
    flags: u64,
) -> abi::Result<ssize_t> {
    if flags & !FI_PEEK != 0 {
        return Err(Errno::BADFLAGS);
    }
    match st.events.front() {
        None => Err(Errno::AGAIN),
        Some(EqEvent::Error { .. }) => Err(Errno::AVAIL),
        Some(EqEvent::Event { event: ev, bytes }) => {
            if event.is_null() || (buf.is_null() && !bytes.is_empty()) {
                return Err(Errno::INVAL);
            }
            if len < bytes.len() {
                return Err(Errno::TOOSMALL);
            }
            // SAFETY: non-NULL and large enough per the checks above.
            unsafe {
                *event = *ev;
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), bytes.len());
            }
            let n = bytes.len() as ssize_t;
            if flags & FI_PEEK == 0 {
                st.events.pop_front();
            }
            Ok(n)
        }
    }
}

/// fi_eq_readerr: returns the error entry at the head (its size on success)
/// or -FI_EAGAIN. err_data follows the fi_eq(3)/fi_cq(3) rules: copied into
/// the caller's buffer if it supplied one (API ≥ 1.5), else a provider-owned
/// buffer valid until the next read.
unsafe extern "C" fn eq_readerr(eq: *mut fid_eq, buf: *mut fi_eq_err_entry, flags: u64) -> ssize_t {
    guard_ssize("fi_eq_readerr", || {
        // SAFETY: validated by obj().
        let o = unsafe { obj::<EqObj>(eq.cast()) }?;
        if buf.is_null() {
            return Err(Errno::INVAL);
        }
        if flags & !FI_PEEK != 0 {
            return Err(Errno::BADFLAGS);
        }
        let api = o.inner.fabric.api_version;
        let mut st = lock(&o.inner.queue);
        let Some(EqEvent::Error { .. }) = st.events.front() else {
            return Err(Errno::AGAIN);
        };
        let Some(EqEvent::Error { entry, err_data }) = (if flags & FI_PEEK != 0 {
            None
        } else {
            st.events.pop_front()
        }) else {
            // FI_PEEK: report without consuming.
            if let Some(EqEvent::Error { entry, .. }) = st.events.front() {
                let mut e = *entry;
                e.err_data = std::ptr::null_mut();
                e.err_data_size = 0;
                // SAFETY: buf checked non-NULL, holding the caller's API's entry.
                unsafe { abi::write_err_entry(buf, &e, api, ERR_ENTRY_1_0) };
            }
            return Ok(err_entry_len(api) as ssize_t);
        };
        let mut e = entry;
        // Only a 1.5+ entry has err_data_size, and with it a user buffer.
        let user = if api >= fi_version(1, 5) {
            // SAFETY: buf is non-NULL and, for API 1.5+, has these fields.
            unsafe { ((*buf).err_data, (*buf).err_data_size) }
        } else {
            (std::ptr::null_mut(), 0)
        };
        // SAFETY: `user` is the application's err_data buffer and its size.
        (e.err_data, e.err_data_size) = unsafe {
            abi::place_err_data(api, user, err_data, |d| {
                abi::hold_err_data(&mut st.last_err_data, d)
            })
        };
        // SAFETY: buf is non-NULL and holds the entry of the caller's API.
        unsafe { abi::write_err_entry(buf, &e, api, ERR_ENTRY_1_0) };
        Ok(err_entry_len(api) as ssize_t)
    })
}

/// Size of `fi_eq_err_entry` before libfabric 1.5 added `err_data_size`.
const ERR_ENTRY_1_0: usize = offset_of!(fi_eq_err_entry, err_data_size);

/// What fi_eq_readerr returns: the size of the caller's entry.
fn err_entry_len(api: u32) -> usize {
    if api >= fi_version(1, 5) {
        size_of::<fi_eq_err_entry>()
    } else {
        ERR_ENTRY_1_0
    }
}

/// fi_eq_write: queue an application event; returns the bytes written.
unsafe extern "C" fn eq_write(
    eq: *mut fid_eq,
    event: u32,
    buf: *const c_void,
    len: size_t,
    flags: u64,
) -> ssize_t {
    guard_ssize("fi_eq_write", || {
        // SAFETY: validated by obj().
        let o = unsafe { obj::<EqObj>(eq.cast()) }?;
        if buf.is_null() && len > 0 {
            return Err(Errno::INVAL);
        }
        let bytes = if len == 0 {
            Vec::new()
        } else {
            // SAFETY: buf holds len bytes per fi_eq(3).
            unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) }.to_vec()
        };
        if flags & FI_PEEK != 0 {
            return Err(Errno::BADFLAGS);
        }
        o.inner.push(EqEvent::Event { event, bytes });
        Ok(len as ssize_t)
    })
}

/// fi_eq_sread: blocking read; timeout in milliseconds, negative = forever.
unsafe extern "C" fn eq_sread(
    eq: *mut fid_eq,
    event: *mut u32,
    buf: *mut c_void,
    len: size_t,
    timeout: c_int,
    flags: u64,
) -> ssize_t {
    guard_ssize("fi_eq_sread", || {
        // SAFETY: validated by obj().
        let o = unsafe { obj::<EqObj>(eq.cast()) }?;
        let deadline =
            (timeout >= 0).then(|| Instant::now() + Duration::from_millis(timeout as u64));
        let mut st = lock(&o.inner.queue);
        loop {
            if !st.events.is_empty() {
                // SAFETY: pointers checked inside.
                return unsafe { read_locked(&mut st, event, buf, len, flags) };
            }
            let wait = match deadline {
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => left,
                    _ => return Err(Errno::AGAIN),
                },
                None => Duration::from_secs(1),
            };
            st = o
                .inner
                .cond
                .wait_timeout(st, wait)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    })
}

/// Copy `msg` into `buf` (if any) as a C string, returning the pointer the
/// strerror functions must return.
///
/// # Safety
/// `buf` must be NULL or valid for `len` bytes.
pub unsafe fn strerror_into(msg: *const c_char, buf: *mut c_char, len: size_t) -> *const c_char {
    if buf.is_null() || len == 0 || msg.is_null() {
        return msg;
    }
    // SAFETY: msg is a C string from fi_strerror; buf holds len bytes.
    unsafe {
        let s = std::ffi::CStr::from_ptr(msg).to_bytes();
        let n = s.len().min(len - 1);
        std::ptr::copy_nonoverlapping(s.as_ptr(), buf.cast::<u8>(), n);
        *buf.add(n) = 0;
    }
    buf
}

/// fi_eq_strerror: our prov_errno values are fabric errnos.
unsafe extern "C" fn eq_strerror(
    _eq: *mut fid_eq,
    prov_errno: c_int,
    _err_data: *const c_void,
    buf: *mut c_char,
    len: size_t,
) -> *const c_char {
    guard_value("fi_eq_strerror", c"unknown error".as_ptr(), || {
        // SAFETY: fi_strerror returns a static string; buf per fi_eq(3).
        unsafe { strerror_into(ffi::fi_strerror(prov_errno.abs()), buf, len) }
    })
}
