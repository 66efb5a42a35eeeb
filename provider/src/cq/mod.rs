//! Completion queue (fi_cq(3), libfabric 1.17 semantics).
//!
//! Completions are kept in one ordered queue, successes and errors alike:
//! - `fi_cq_read` returns successful entries from the head, stopping before
//!   the first error; with an error at the head it returns -FI_EAVAIL, with
//!   nothing queued -FI_EAGAIN ("RETURN VALUES").
//! - `fi_cq_readerr` removes the oldest error entry (1 on success,
//!   -FI_EAGAIN if none); `err_data` is copied into the caller's buffer when
//!   it supplies one and the fabric API is ≥ 1.5, else it points at a
//!   provider-owned buffer valid until the next readerr ("err_data").
//! - Every read first runs one progress pass over the endpoints bound to
//!   this CQ (manual progress, fi_domain(3) FI_PROGRESS_MANUAL).
//! - The queue grows instead of overrunning: FI_EOVERRUN never happens.
//!
//! The queue and entry formats are in `queue.rs`; what a blocked reader
//! waits on is its [`WaitObj`] (FI_WAIT_NONE, UNSPEC, FD, MUTEX_COND,
//! YIELD, or a wait set's).

use std::mem::offset_of;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use libc::{c_char, c_int, c_void, size_t, ssize_t};

use crate::abi::{self, Errno, Result, guard_int, guard_ssize, guard_value};
use crate::biased_lock::BiasedLock;
use crate::datapath::{Completion, CompletionError, WaitState};
use crate::domain::Domain;
use crate::ep::Endpoint;
use crate::idle::{IdleReads, SpinBeforeSleep};
use crate::object::{self, FidObject, Refs, obj};
use crate::progress::{ProgressSet, Queue, sleep_between_passes};
use crate::sys::*;
use crate::wait_obj::WaitObj;

mod queue;

use queue::write_entry;
pub use queue::{CompletionQueue, entry_size};

pub struct Cq {
    /// Endpoints bound to this CQ (one per direction) and counters/waits.
    pub refs: Refs,
    pub domain: Arc<Domain>,
    pub format: c_int,
    wait_cond: c_int,
    /// Biased to the application's thread (`biased_lock.rs`).
    state: BiasedLock<CompletionQueue>,
    /// How many entries `state` holds, stored under its lock by every
    /// change: a read of an empty CQ (what a polling application does
    /// most) looks here instead of taking the lock. Missing an entry
    /// pushed meanwhile is the same as that entry arriving a moment later.
    queued: AtomicUsize,
    signaled: AtomicBool,
    /// Reads that find nothing lead to a sched_yield (FI_XDP_YIELD,
    /// `idle.rs`).
    idle: IdleReads,
    /// What sread blocks on and what a queued completion signals.
    pub wait: WaitObj,
    /// This CQ as a member of its wait set (FI_WAIT_SET), to leave it.
    member: OnceLock<Weak<dyn Queue>>,
    /// Endpoints whose progress a read of this CQ drives.
    progress: ProgressSet<Endpoint>,
}

impl Cq {
    /// Queue a completion (called by endpoints during progress).
    pub fn push(&self, c: Completion) {
        self.change(|q| q.push(c));
        // FI_WAIT_FD / MUTEX_COND / a wait set: the application may block
        // on the object itself.
        self.wait.notify();
    }

    /// Whether endpoints' sockets must join this CQ's wait fd: only for
    /// FI_WAIT_FD (its own or its wait set's), since watching an AF_XDP
    /// socket costs every packet a wake-up (`Port::wait_fd`). Other
    /// blocking reads find arrivals by their progress passes instead.
    pub fn wants_wait_fd(&self) -> bool {
        self.wait.wants_fds()
    }

    /// An enabled endpoint's socket joins the wait fd (FI_WAIT_FD).
    pub fn add_wait_fd(&self, fd: RawFd) {
        self.wait.add_fd(fd);
    }

    pub fn remove_wait_fd(&self, fd: RawFd) {
        self.wait.remove_fd(fd);
    }

    /// fi_trywait (fi_poll(3)) for this CQ: drive progress; -FI_EAGAIN if
    /// completions are ready or an endpoint has work now. Otherwise reset
    /// the wait fd, with its timer armed for the endpoints' next protocol
    /// timer, so that blocking on it is safe: the peer may be waiting for
    /// our retransmission or ack, which only a progress call sends.
    ///
    /// A MUTEX_COND CQ is signalled only by completions, which manual
    /// progress produces only inside our calls: blocking on it is safe only
    /// when a progress thread drives the endpoints (FI_PROGRESS_AUTO).
    pub fn trywait(&self) -> Result<()> {
        self.run_progress();
        // Drain before looking: a completion pushed after this point
        // leaves the fd readable.
        self.wait.settle(false);
        if !self.state.lock().is_empty() {
            return Err(Errno::AGAIN);
        }
        self.wait
            .try_arm(self.domain.auto_progress(), || self.progress.wait_state())
    }

    /// Register an endpoint whose progress reads of this CQ drive.
    pub fn attach(&self, ep: Weak<Endpoint>) {
        self.progress.attach(ep);
    }

    /// Forget an endpoint (on endpoint close).
    pub fn detach(&self, ep: &Weak<Endpoint>) {
        self.progress.detach(ep);
    }

    /// One manual-progress pass over the bound endpoints. Runs without the
    /// CQ lock held: endpoints push completions into us while progressing.
    pub fn run_progress(&self) {
        self.progress.run();
    }

    /// Bytes of one entry in this CQ's format.
    pub fn entry_size(&self) -> usize {
        entry_size(self.format)
    }

    /// Non-blocking read of up to `count` successful completions, in order.
    pub fn read_into(&self, count: usize, out: impl FnMut(usize, &Completion)) -> Result<usize> {
        if self.queued() == 0 {
            // fi_cq(3) "RETURN VALUES": nothing queued.
            return Err(Errno::AGAIN);
        }
        self.change(|q| q.read_into(count, out))
    }

    fn take_error(&self) -> Option<(Completion, CompletionError)> {
        self.change(CompletionQueue::take_error)
    }

    /// `f` on the queue under its lock, then its new length into `queued`.
    fn change<R>(&self, f: impl FnOnce(&mut CompletionQueue) -> R) -> R {
        let mut q = self.state.lock();
        let r = f(&mut q);
        self.queued.store(q.len(), Ordering::Release);
        r
    }

    fn queued(&self) -> usize {
        self.queued.load(Ordering::Acquire)
    }

    fn head_is_error(&self) -> bool {
        self.state.lock().head_is_error()
    }
}

impl Queue for Cq {
    fn run_progress(&self) {
        Cq::run_progress(self);
    }
    fn has_events(&self, _report: bool) -> bool {
        self.queued() > 0
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
pub struct CqObj {
    pub fid: fid_cq,
    pub inner: Arc<Cq>,
}

static CQ_FI_OPS: fi_ops = object::fi_ops_of::<CqObj>(None, Some(cq_control));
static CQ_OPS: fi_ops_cq = fi_ops_cq {
    size: size_of::<fi_ops_cq>(),
    read: Some(cq_read),
    readfrom: Some(cq_readfrom),
    readerr: Some(cq_readerr),
    sread: Some(cq_sread),
    sreadfrom: Some(cq_sreadfrom),
    signal: Some(cq_signal),
    strerror: Some(cq_strerror),
};

// SAFETY: repr(C), fid_cq first, CQ_FI_OPS in every instance.
unsafe impl FidObject for CqObj {
    const CLASS: usize = FI_CLASS_CQ;
    const CLOSE: &'static str = "cq close";
    fn fi_ops() -> *const fi_ops {
        &CQ_FI_OPS
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

/// `fi_ops_domain::cq_open`.
pub unsafe extern "C" fn xdp_cq_open(
    domain: *mut fid_domain,
    attr: *mut fi_cq_attr,
    cq: *mut *mut fid_cq,
    context: *mut c_void,
) -> c_int {
    guard_int("fi_cq_open", || {
        // SAFETY: validated by domain_of.
        let domain = unsafe { crate::domain::domain_of(domain) }?;
        // SAFETY: attr is NULL or valid.
        let a = unsafe { attr.as_ref() }.ok_or(Errno::INVAL)?;
        if cq.is_null() {
            return Err(Errno::INVAL);
        }
        if a.flags & !FI_AFFINITY != 0 {
            return Err(Errno::BADFLAGS);
        }
        let format = match a.format {
            FI_CQ_FORMAT_UNSPEC => FI_CQ_FORMAT_CONTEXT,
            f @ (FI_CQ_FORMAT_CONTEXT | FI_CQ_FORMAT_MSG | FI_CQ_FORMAT_DATA
            | FI_CQ_FORMAT_TAGGED) => f,
            _ => return Err(Errno::INVAL),
        };
        // fi_cq(3) wait_cond: "ignored if wait_obj is set to FI_WAIT_NONE".
        let wait_cond = if a.wait_obj == FI_WAIT_NONE {
            FI_CQ_COND_NONE
        } else if a.wait_cond == FI_CQ_COND_NONE || a.wait_cond == FI_CQ_COND_THRESHOLD {
            a.wait_cond
        } else {
            return Err(Errno::INVAL);
        };
        // SAFETY: wait_set is NULL or the application's wait set (fi_cq(3)).
        let wait = unsafe { crate::waitset::wait_obj_of(a.wait_obj, a.wait_set) }?;
        let inner = Arc::new(Cq {
            wait,
            member: OnceLock::new(),
            refs: Refs::default(),
            domain: domain.clone(),
            format,
            wait_cond,
            state: BiasedLock::new(CompletionQueue::default(), !domain.auto_progress()),
            queued: AtomicUsize::new(0),
            signaled: AtomicBool::new(false),
            idle: IdleReads::new(domain.cfg.yield_when_idle),
            progress: ProgressSet::default(),
        });
        if let Some(set) = inner.wait.set() {
            let me: Weak<dyn Queue> = Arc::downgrade(&inner) as Weak<dyn Queue>;
            set.join(me.clone());
            let _ = inner.member.set(me);
        }
        let o = CqObj {
            fid: fid_cq {
                fid: object::header::<CqObj>(context),
                ops: object::ops_ptr(&CQ_OPS),
            },
            inner,
        };
        // SAFETY: `cq` was checked non-NULL above.
        unsafe { object::open(cq, Some(&domain.refs), o) }.map(|_| 0)
    })
}

unsafe extern "C" fn cq_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    guard_int("cq control", || {
        // SAFETY: validated by obj().
        let o = unsafe { obj::<CqObj>(f) }?;
        match command {
            FI_GETWAITOBJ => {
                // SAFETY: arg is an enum fi_wait_obj *.
                unsafe { abi::write_out(arg.cast::<c_int>(), o.inner.wait.kind()) }?;
                Ok(0)
            }
            // SAFETY: arg's type per fi_cq(3) for the CQ's wait object.
            FI_GETWAIT => unsafe { o.inner.wait.getwait(arg) }.map(|_| 0),
            _ => Err(Errno::NOSYS),
        }
    })
}

/// Shared body of read/readfrom.
///
/// # Safety
/// `buf` must hold `count` entries; `src` NULL or `count` fi_addr_t.
unsafe fn read_common(
    cq: *mut fid_cq,
    buf: *mut c_void,
    count: size_t,
    src: *mut fi_addr_t,
    want_src: bool,
) -> Result<ssize_t> {
    // SAFETY: validated by obj().
    let o = unsafe { obj::<CqObj>(cq.cast()) }?;
    if count > 0 && buf.is_null() {
        return Err(Errno::INVAL);
    }
    // readfrom without room for addresses reads like fi_cq_read (as the
    // tcp provider does), rather than failing a read that can succeed.
    let want_src = want_src && !src.is_null();
    o.inner.run_progress();
    let format = o.inner.format;
    let n = o.inner.read_into(count, |i, c| {
        // SAFETY: i < count; buffers sized by the caller.
        unsafe {
            write_entry(format, buf, i, c);
            if want_src {
                src.add(i).write(c.src);
            }
        }
    });
    if o.inner.wait.kind() == FI_WAIT_FD && o.inner.queued() == 0 {
        // Nothing left: the fd must not stay readable (level-triggered).
        o.inner.wait.settle(false);
    }
    match n {
        Ok(n) => {
            crate::probe::at(crate::probe::Stage::Read);
            o.inner.idle.found();
            Ok(n as ssize_t)
        }
        Err(Errno::AGAIN) => {
            // Nothing yet: the application will poll again at once. When
            // that keeps happening, give the CPU away first, so that on a
            // host with more polling processes than cores the peer we wait
            // for gets to run now instead of at the end of our time slice
            // (`idle.rs`: after how many reads, and how often then).
            o.inner.idle.found_nothing();
            Err(Errno::AGAIN)
        }
        Err(e) => Err(e),
    }
}

unsafe extern "C" fn cq_read(cq: *mut fid_cq, buf: *mut c_void, count: size_t) -> ssize_t {
    // SAFETY: forwarded contract.
    guard_ssize("fi_cq_read", || unsafe {
        read_common(cq, buf, count, std::ptr::null_mut(), false)
    })
}

unsafe extern "C" fn cq_readfrom(
    cq: *mut fid_cq,
    buf: *mut c_void,
    count: size_t,
    src_addr: *mut fi_addr_t,
) -> ssize_t {
    // SAFETY: forwarded contract.
    guard_ssize("fi_cq_readfrom", || unsafe {
        read_common(cq, buf, count, src_addr, true)
    })
}

unsafe extern "C" fn cq_readerr(cq: *mut fid_cq, buf: *mut fi_cq_err_entry, flags: u64) -> ssize_t {
    guard_ssize("fi_cq_readerr", || {
        // SAFETY: validated by obj().
        let o = unsafe { obj::<CqObj>(cq.cast()) }?;
        if buf.is_null() {
            return Err(Errno::INVAL);
        }
        // fi_cq(3) defines no readerr flags; like libfabric's own CQs, the
        // argument is ignored rather than failing the read.
        let _ = flags;
        let (c, e) = o.inner.take_error().ok_or(Errno::AGAIN)?;
        let api = o.inner.domain.fabric.api_version;
        // Only a 1.5+ entry has err_data_size, and with it a user buffer.
        let user = if api >= fi_version(1, 5) {
            // SAFETY: buf is non-NULL and, for API 1.5+, has these fields.
            unsafe { ((*buf).err_data, (*buf).err_data_size) }
        } else {
            (std::ptr::null_mut(), 0)
        };
        // SAFETY: `user` is the application's err_data buffer and its size.
        let (err_data, err_data_size) = unsafe {
            abi::place_err_data(api, user, e.err_data, |d| {
                o.inner.state.lock().hold_err_data(d)
            })
        };
        let entry = fi_cq_err_entry {
            op_context: c.op_context as *mut c_void,
            flags: c.flags,
            len: c.len,
            buf: c.buf as *mut c_void,
            data: c.data,
            tag: c.tag,
            olen: e.olen,
            err: e.err,
            prov_errno: e.prov_errno,
            err_data,
            err_data_size,
        };
        // SAFETY: buf is non-NULL and holds the entry of the caller's API.
        unsafe {
            abi::write_err_entry(buf, &entry, api, offset_of!(fi_cq_err_entry, err_data_size))
        };
        Ok(1)
    })
}

/// Blocking read: keeps driving progress while it waits (manual progress
/// means nobody else will), until a completion, an error at the head, the
/// threshold, fi_cq_signal or the timeout (ms, negative = infinite).
///
/// # Safety
/// As for [`read_common`]; `cond` is a value (a threshold), never dereferenced.
unsafe fn sread_common(
    cq: *mut fid_cq,
    buf: *mut c_void,
    count: size_t,
    src: *mut fi_addr_t,
    want_src: bool,
    cond: *const c_void,
    timeout: c_int,
) -> Result<ssize_t> {
    // SAFETY: validated by obj().
    let o = unsafe { obj::<CqObj>(cq.cast()) }?;
    let q = &o.inner;
    if !q.wait.can_block() {
        // fi_cq(3): sread is invalid on a CQ without a wait object.
        return Err(Errno::INVAL);
    }
    // Nowhere to put entries: fail now, not after the wait (which, with no
    // timeout, might never end).
    if count > 0 && buf.is_null() {
        return Err(Errno::INVAL);
    }
    let threshold = if q.wait_cond == FI_CQ_COND_THRESHOLD {
        // fi_cq(3) fi_cq_sread: with FI_CQ_COND_THRESHOLD "the cond field
        // is interpreted as a size_t threshold value" — the pointer's value
        // itself, never something it points to (libfabric's own CQs read
        // `(size_t) cond` too). At most `count` entries can be returned.
        (cond as usize).clamp(1, count.max(1))
    } else {
        1
    };
    let deadline = (timeout >= 0).then(|| Instant::now() + Duration::from_millis(timeout as u64));
    // A signal landing during a pass is delivered in the next wait.
    let held = q.wait.hold_signals();
    let mut spin = SpinBeforeSleep::new(&q.domain.cfg);
    let ready = || q.queued() >= threshold || q.head_is_error();
    loop {
        q.run_progress();
        if ready() {
            // SAFETY: forwarded contract.
            return unsafe { read_common(cq, buf, count, src, want_src) };
        }
        if q.signaled.swap(false, Ordering::AcqRel) {
            return Err(Errno::AGAIN);
        }
        if let Some(d) = deadline
            && Instant::now() >= d
        {
            // Return what is there even below the threshold (the
            // condition is only an optimisation, fi_cq(3)).
            // SAFETY: forwarded contract.
            return unsafe { read_common(cq, buf, count, src, want_src) };
        }
        if spin.keep_polling() {
            continue;
        }
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        match sleep_between_passes(
            &q.wait,
            &[&q.progress],
            q.domain.auto_progress(),
            left,
            &held,
            &ready,
        ) {
            // "If the timeout expires or the calling thread is signaled and
            // no data is available ..., returns -FI_EAGAIN" (fi_cq(3)).
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
                q.run_progress();
                // SAFETY: forwarded contract.
                return unsafe { read_common(cq, buf, count, src, want_src) };
            }
            _ => {}
        }
        // The eventfd has done its job; an FI_WAIT_FD one stays readable
        // while completions are queued (level-triggered, as read_common keeps it).
        q.wait.settle(q.queued() > 0);
    }
}

unsafe extern "C" fn cq_sread(
    cq: *mut fid_cq,
    buf: *mut c_void,
    count: size_t,
    cond: *const c_void,
    timeout: c_int,
) -> ssize_t {
    // SAFETY: forwarded contract.
    guard_ssize("fi_cq_sread", || unsafe {
        sread_common(cq, buf, count, std::ptr::null_mut(), false, cond, timeout)
    })
}

unsafe extern "C" fn cq_sreadfrom(
    cq: *mut fid_cq,
    buf: *mut c_void,
    count: size_t,
    src_addr: *mut fi_addr_t,
    cond: *const c_void,
    timeout: c_int,
) -> ssize_t {
    // SAFETY: forwarded contract.
    guard_ssize("fi_cq_sreadfrom", || unsafe {
        sread_common(cq, buf, count, src_addr, true, cond, timeout)
    })
}

/// fi_cq_signal: wake a thread blocked in sread (it returns -FI_EAGAIN).
unsafe extern "C" fn cq_signal(cq: *mut fid_cq) -> c_int {
    guard_int("fi_cq_signal", || {
        // SAFETY: validated by obj().
        let o = unsafe { obj::<CqObj>(cq.cast()) }?;
        if !o.inner.wait.can_block() {
            return Err(Errno::INVAL);
        }
        o.inner.signaled.store(true, Ordering::Release);
        o.inner.wait.signal();
        Ok(0)
    })
}

/// fi_cq_strerror: our prov_errno values are fabric errnos.
unsafe extern "C" fn cq_strerror(
    _cq: *mut fid_cq,
    prov_errno: c_int,
    _err_data: *const c_void,
    buf: *mut c_char,
    len: size_t,
) -> *const c_char {
    guard_value("fi_cq_strerror", c"unknown error".as_ptr(), || {
        // SAFETY: fi_strerror returns a static string; buf per fi_cq(3).
        unsafe { crate::eq::strerror_into(ffi::fi_strerror(prov_errno.abs()), buf, len) }
    })
}
