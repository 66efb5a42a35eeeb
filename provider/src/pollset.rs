//! Poll sets (fi_poll(3) fi_poll_open, fi_poll_add/del, fi_poll): many CQs
//! and counters progressed and checked in one call. `fi_poll` runs one
//! progress pass over each member (manual progress) and returns the
//! contexts of the CQs that are not empty and of the counters whose value
//! or error count changed since they were last reported by fi_poll or set
//! by fi_cntr_set/add.
//!
//! Members are held weakly, as libfabric's own poll sets hold them: a CQ
//! or counter may close while in a set, and then simply leaves it.

use std::sync::{Arc, Mutex, Weak};

use libc::{c_int, c_void};

use crate::abi::{Errno, Result, guard_int, lock};
use crate::domain::Domain;
use crate::object::{self, FidObject, obj};
use crate::progress::Queue;
use crate::sys::*;

struct Member {
    queue: Weak<dyn Queue>,
    /// The fid's context when it was added: what fi_poll returns for it.
    context: usize,
}

pub struct PollSet {
    pub domain: Arc<Domain>,
    members: Mutex<Vec<Member>>,
}

#[repr(C)]
pub struct PollSetObj {
    pub fid: fid_poll,
    pub inner: Arc<PollSet>,
}

static POLL_FI_OPS: fi_ops = object::fi_ops_of::<PollSetObj>(None, None);
static POLL_OPS: fi_ops_poll = fi_ops_poll {
    size: size_of::<fi_ops_poll>(),
    poll: Some(poll_poll),
    poll_add: Some(poll_add),
    poll_del: Some(poll_del),
};

// SAFETY: repr(C), fid_poll first, POLL_FI_OPS in every instance.
unsafe impl FidObject for PollSetObj {
    const CLASS: usize = FI_CLASS_POLL;
    const CLOSE: &'static str = "poll set close";
    fn fi_ops() -> *const fi_ops {
        &POLL_FI_OPS
    }
    fn release(&self) {
        self.inner.domain.refs.put();
    }
}

/// `fi_ops_domain::poll_open`.
pub unsafe extern "C" fn xdp_poll_open(
    domain: *mut fid_domain,
    attr: *mut fi_poll_attr,
    pollset: *mut *mut fid_poll,
) -> c_int {
    guard_int("fi_poll_open", || {
        // SAFETY: validated by domain_of.
        let domain = unsafe { crate::domain::domain_of(domain) }?;
        if pollset.is_null() {
            return Err(Errno::INVAL);
        }
        // SAFETY: attr is NULL (no flags) or valid.
        if unsafe { attr.as_ref() }.is_some_and(|a| a.flags != 0) {
            return Err(Errno::BADFLAGS);
        }
        let o = PollSetObj {
            fid: fid_poll {
                fid: object::header::<PollSetObj>(std::ptr::null_mut()),
                ops: object::ops_ptr(&POLL_OPS),
            },
            inner: Arc::new(PollSet {
                domain: domain.clone(),
                members: Mutex::default(),
            }),
        };
        // SAFETY: `pollset` was checked non-NULL above.
        unsafe { object::open(pollset, Some(&domain.refs), o) }.map(|_| 0)
    })
}

/// The CQ or counter behind `f`, as a member, with its domain.
///
/// # Safety
/// `f` must be NULL or a readable fid.
unsafe fn queue_of(f: *mut fid) -> Result<(Arc<dyn Queue>, Arc<Domain>)> {
    if f.is_null() {
        return Err(Errno::INVAL);
    }
    // SAFETY: non-NULL and readable per the caller.
    match unsafe { (*f).fclass } {
        FI_CLASS_CQ => {
            // SAFETY: validated by obj().
            let cq = unsafe { obj::<crate::cq::CqObj>(f) }?.inner.clone();
            let d = cq.domain.clone();
            Ok((cq, d))
        }
        FI_CLASS_CNTR => {
            // SAFETY: validated by obj().
            let k = unsafe { obj::<crate::cntr::CntrObj>(f) }?.inner.clone();
            let d = k.domain.clone();
            Ok((k, d))
        }
        // fi_poll(3): completion queues and counters.
        _ => Err(Errno::INVAL),
    }
}

unsafe extern "C" fn poll_add(ps: *mut fid_poll, f: *mut fid, flags: u64) -> c_int {
    guard_int("fi_poll_add", || {
        // SAFETY: validated by obj().
        let p = &unsafe { obj::<PollSetObj>(ps.cast()) }?.inner;
        if flags != 0 {
            return Err(Errno::BADFLAGS);
        }
        // SAFETY: f is NULL or a readable fid from the application.
        let (q, d) = unsafe { queue_of(f) }?;
        if !Arc::ptr_eq(&d, &p.domain) {
            return Err(Errno::DOMAIN);
        }
        let weak = Arc::downgrade(&q);
        let mut m = lock(&p.members);
        if !m.iter().any(|e| Weak::ptr_eq(&e.queue, &weak)) {
            m.push(Member {
                queue: weak,
                // SAFETY: f is our readable fid (checked by queue_of).
                context: unsafe { (*f).context } as usize,
            });
        }
        Ok(0)
    })
}

unsafe extern "C" fn poll_del(ps: *mut fid_poll, f: *mut fid, flags: u64) -> c_int {
    guard_int("fi_poll_del", || {
        // SAFETY: validated by obj().
        let p = &unsafe { obj::<PollSetObj>(ps.cast()) }?.inner;
        if flags != 0 {
            return Err(Errno::BADFLAGS);
        }
        // SAFETY: f is NULL or a readable fid from the application.
        let (q, _) = unsafe { queue_of(f) }?;
        let weak = Arc::downgrade(&q);
        let mut m = lock(&p.members);
        let before = m.len();
        m.retain(|e| !Weak::ptr_eq(&e.queue, &weak));
        if m.len() == before {
            return Err(Errno::INVAL);
        }
        Ok(0)
    })
}

/// fi_poll: progress every member; write the contexts of those with events
/// (at most `count`); returns how many.
unsafe extern "C" fn poll_poll(
    ps: *mut fid_poll,
    context: *mut *mut c_void,
    count: c_int,
) -> c_int {
    guard_int("fi_poll", || {
        // SAFETY: validated by obj().
        let p = &unsafe { obj::<PollSetObj>(ps.cast()) }?.inner;
        let room = usize::try_from(count).map_err(|_| Errno::INVAL)?;
        if context.is_null() && room > 0 {
            return Err(Errno::INVAL);
        }
        let members: Vec<(Arc<dyn Queue>, usize)> = {
            let mut m = lock(&p.members);
            m.retain(|e| e.queue.strong_count() > 0);
            m.iter()
                .filter_map(|e| Some((e.queue.upgrade()?, e.context)))
                .collect()
        };
        let mut n = 0;
        for (q, ctx) in &members {
            q.run_progress();
            if n < room && q.has_events(true) {
                // SAFETY: context holds `count` pointers (fi_poll(3)).
                unsafe { *context.add(n) = *ctx as *mut c_void };
                n += 1;
            }
        }
        Ok(n as c_int)
    })
}
