//! Event queue (fi_eq(3)): control-path events — connection management of
//! connected endpoints (FI_CONNREQ, FI_CONNECTED, FI_SHUTDOWN and their
//! error entries), asynchronous AV insertion (FI_AV_COMPLETE), and
//! application writes (fi_eq_write).
//!
//! Connections progress like data (manual progress): a read of the EQ runs
//! one pass over the listening endpoints and connected endpoints bound to
//! it, and a blocking read (fi_eq_sread) keeps doing so while it waits on
//! the EQ's wait object ([`WaitObj`]; a listening endpoint's socket joins
//! it, so an arriving connection request wakes the reader).

use std::collections::VecDeque;
use std::mem::offset_of;
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use libc::{c_char, c_int, c_void, size_t, ssize_t};

use crate::abi::{self, Errno, guard_int, guard_ssize, guard_value, lock};
use crate::datapath::WaitState;
use crate::fabric::Fabric;
use crate::object::{self, FidObject, Refs, obj};
use crate::progress::{Progress, ProgressSet, Queue};
use crate::sys::*;
use crate::wait_obj::WaitObj;

pub enum EqEvent {
    Event {
        event: u32,
        bytes: Vec<u8>,
        /// An `fi_info` the entry hands over to the application (FI_CONNREQ):
        /// freed here if the event is never read.
        info: Option<OwnedInfo>,
    },
    Error {
        entry: fi_eq_err_entry,
        err_data: Vec<u8>,
    },
}

/// An `fi_info` allocated by `fi_dupinfo`, owned until handed over.
pub struct OwnedInfo(pub *mut fi_info);

impl OwnedInfo {
    /// Hand the info to the application (it frees it with fi_freeinfo).
    fn hand_over(mut self) {
        self.0 = std::ptr::null_mut();
    }
}

impl Drop for OwnedInfo {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: allocated by fi_dupinfo and not handed over.
            unsafe { ffi::fi_freeinfo(self.0) };
        }
    }
}

// SAFETY: the raw pointers inside fi_eq_err_entry are opaque application
// values (fid, context) that we only copy back out; an OwnedInfo is ours
// alone until handed over.
unsafe impl Send for EqEvent {}

/// Longest a blocked reader sleeps between progress passes while connected
/// endpoints are bound: connection messages arrive on their sockets, which
/// the EQ does not watch (that would cost every data packet a wake-up).
const SLICE_WITH_ENDPOINTS: Duration = Duration::from_millis(1);
/// Longest a blocked reader sleeps otherwise (listening sockets and queued
/// events wake it).
const SLICE: Duration = Duration::from_millis(100);

pub struct Eq {
    /// Domains, AVs and endpoints bound to this EQ.
    pub refs: Refs,
    pub fabric: Arc<Fabric>,
    queue: Mutex<EqState>,
    pub wait: WaitObj,
    /// Listening and connected endpoints whose connections a read drives.
    progress: ProgressSet<dyn Progress>,
    /// How many connected endpoints are bound (they shorten the waits).
    endpoints: std::sync::atomic::AtomicUsize,
    /// This EQ as a member of its wait set (FI_WAIT_SET), to leave it.
    member: OnceLock<Weak<dyn Queue>>,
    /// Opened with FI_WRITE: the application may fi_eq_write (fi_eq(3)).
    writable: bool,
}

/// Largest event fi_eq_write takes: an application's own notices are small,
/// and the bytes are copied into the queue.
const MAX_WRITE: usize = 1 << 20;

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
        self.wait.notify();
    }

    /// A listening endpoint (`fd`: its socket, which joins the wait
    /// object if it has an fd set) or a connected endpoint (`fd` None)
    /// binds: reads drive it. What the wait object does not watch shortens
    /// the blocking reads' sleeps instead.
    pub fn attach(&self, p: Weak<dyn Progress>, fd: Option<RawFd>) {
        self.progress.attach(p);
        let watched = fd.is_some_and(|fd| self.wait.add_fd_always(fd));
        if !watched {
            self.endpoints
                .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        }
    }

    /// It closes (or its socket goes elsewhere).
    pub fn detach(&self, p: &Weak<dyn Progress>, fd: Option<RawFd>) {
        self.progress.detach(p);
        match fd {
            Some(fd) if self.wait.has_fds() => self.wait.remove_fd(fd),
            _ => {
                let _ = self.endpoints.fetch_update(
                    std::sync::atomic::Ordering::AcqRel,
                    std::sync::atomic::Ordering::Acquire,
                    |v| v.checked_sub(1),
                );
            }
        }
    }

    /// One pass over the listening and connected endpoints bound here.
    pub fn run_progress(&self) {
        self.progress.run();
    }

    fn is_empty(&self) -> bool {
        lock(&self.queue).events.is_empty()
    }

    /// fi_trywait on the EQ: drive progress; -FI_EAGAIN if events are
    /// queued or an endpoint has work now; else the wait fd is reset and
    /// armed for the endpoints' next timer (while a connection is being set
    /// up, at most 1 ms ahead: its messages arrive on a socket the fd does
    /// not watch).
    pub fn trywait(&self) -> abi::Result<()> {
        self.run_progress();
        self.wait.settle(false);
        if !self.is_empty() {
            return Err(Errno::AGAIN);
        }
        self.wait.try_arm(false, || self.progress.wait_state())
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
            info: None,
        });
    }

    /// Queue a connection-management event (fi_eq(3) `fi_eq_cm_entry`:
    /// FI_CONNREQ, FI_CONNECTED, FI_SHUTDOWN) about `fid`, with `info`
    /// (FI_CONNREQ only, handed to the reader) and the peer's connection
    /// data after the entry.
    pub fn push_cm(&self, event: u32, fid: *mut fid, info: Option<OwnedInfo>, data: &[u8]) {
        let e = fi_eq_cm_entry {
            fid,
            info: info.as_ref().map_or(std::ptr::null_mut(), |i| i.0),
        };
        // SAFETY: fi_eq_cm_entry is plain data (two pointers).
        let head = unsafe {
            std::slice::from_raw_parts(
                (&e as *const fi_eq_cm_entry).cast::<u8>(),
                size_of::<fi_eq_cm_entry>(),
            )
        };
        let mut bytes = head.to_vec();
        bytes.extend_from_slice(data);
        self.push(EqEvent::Event { event, bytes, info });
    }

    /// Queue an error entry about `fid` with the peer's data as err_data
    /// (a refused connection carries fi_reject's data, fi_cm(3)).
    pub fn push_error_data(&self, fid: *mut fid, context: *mut c_void, err: c_int, data: Vec<u8>) {
        self.push(EqEvent::Error {
            entry: fi_eq_err_entry {
                fid,
                context,
                data: 0,
                err,
                prov_errno: err,
                err_data: std::ptr::null_mut(),
                err_data_size: 0,
            },
            err_data: data,
        });
    }
}

impl Queue for Eq {
    fn run_progress(&self) {
        Eq::run_progress(self);
    }
    fn has_events(&self, _report: bool) -> bool {
        !self.is_empty()
    }
    fn wait_state(&self) -> WaitState {
        self.progress.wait_state()
    }
    fn auto_progress(&self) -> bool {
        false
    }
    fn arrival_fds(&self, out: &mut Vec<std::os::fd::RawFd>) -> bool {
        self.progress.arrival_fds(out)
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
        if let (Some(set), Some(me)) = (self.inner.wait.set(), self.inner.member.get()) {
            set.leave(me);
        }
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
        // SAFETY: wait_set is NULL or the application's wait set (fi_eq(3)).
        let wait = unsafe { crate::waitset::wait_obj_of(a.wait_obj, a.wait_set) }?;
        let inner = Arc::new(Eq {
            refs: Refs::default(),
            fabric: fabric.clone(),
            queue: Mutex::default(),
            wait,
            progress: ProgressSet::default(),
            endpoints: std::sync::atomic::AtomicUsize::new(0),
            member: OnceLock::new(),
            writable: a.flags & FI_WRITE != 0,
        });
        if let Some(set) = inner.wait.set() {
            let me: Weak<dyn Queue> = Arc::downgrade(&inner) as Weak<dyn Queue>;
            set.join(me.clone());
            let _ = inner.member.set(me);
        }
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
        let o = unsafe { obj::<EqObj>(f) }?;
        match command {
            // SAFETY: arg's type per fi_eq(3) for the EQ's wait object.
            FI_GETWAIT => unsafe { o.inner.wait.getwait(arg) }.map(|_| 0),
            FI_GETWAITOBJ => {
                // SAFETY: arg is an enum fi_wait_obj * per fi_eq(3).
                unsafe { abi::write_out(arg.cast::<c_int>(), o.inner.wait.kind()) }?;
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
        o.inner.run_progress();
        // SAFETY: pointers checked inside.
        let r = unsafe { read_locked(&mut lock(&o.inner.queue), event, buf, len, flags) };
        if o.inner.wait.kind() == FI_WAIT_FD && o.inner.is_empty() {
            // Nothing left: the fd must not stay readable (level-triggered).
            o.inner.wait.settle(false);
        }
        r
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
        Some(EqEvent::Event {
            event: ev, bytes, ..
        }) => {
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
            if flags & FI_PEEK == 0
                && let Some(EqEvent::Event {
                    info: Some(info), ..
                }) = st.events.pop_front()
            {
                // The reader owns the FI_CONNREQ info now (fi_eq(3)).
                info.hand_over();
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
        // fi_eq(3): "If the FI_WRITE flag is not set, then the application
        // may not invoke fi_eq_write."
        if !o.inner.writable || (buf.is_null() && len > 0) || len > MAX_WRITE {
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
        o.inner.push(EqEvent::Event {
            event,
            bytes,
            info: None,
        });
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
        let q = &o.inner;
        if !q.wait.can_block() {
            // fi_eq(3): sread is invalid on an EQ without a wait object.
            return Err(Errno::INVAL);
        }
        // Arguments no event could be read into fail now, not after the
        // wait (which, with no timeout, might never end).
        if event.is_null() || (buf.is_null() && len > 0) {
            return Err(Errno::INVAL);
        }
        let deadline =
            (timeout >= 0).then(|| Instant::now() + Duration::from_millis(timeout as u64));
        let _waiting = q.wait.enter();
        // A signal landing during a pass is delivered in the next wait.
        let held = q.wait.hold_signals();
        loop {
            q.run_progress();
            if !q.is_empty() {
                // SAFETY: pointers checked inside.
                let r = unsafe { read_locked(&mut lock(&q.queue), event, buf, len, flags) };
                q.wait.settle(!q.is_empty());
                return r;
            }
            let most = if q.endpoints.load(std::sync::atomic::Ordering::Acquire) > 0 {
                SLICE_WITH_ENDPOINTS
            } else {
                SLICE
            };
            let slice = match deadline {
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => left.min(most),
                    _ => return Err(Errno::AGAIN),
                },
                None => most,
            };
            if let Err(e) = q.wait.wait(slice, &held)
                && e.kind() == std::io::ErrorKind::Interrupted
            {
                return Err(Errno::AGAIN);
            }
            q.wait.settle(false);
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
