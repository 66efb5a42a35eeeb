//! Memory registration (fi_mr(3)). The provider copies through UMEM frames,
//! so registration is bookkeeping: FI_MR_LOCAL is never required and
//! `desc` arguments are accepted but not needed. Keys are the application's
//! `requested_key` (no FI_MR_PROV_KEY) and must be unique in the domain.

use std::sync::Arc;

use libc::{c_int, c_void, iovec, size_t};

use crate::abi::{Errno, Result, guard_int, lock};
use crate::domain::Domain;
use crate::object::{self, FidObject, obj};
use crate::sys::*;

const ACCESS: u64 = FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;

pub struct Mr {
    pub domain: Arc<Domain>,
    pub key: u64,
    pub access: u64,
    /// Registered ranges as (address, length).
    pub ranges: Vec<(usize, usize)>,
}

#[repr(C)]
pub struct MrObj {
    pub fid: fid_mr,
    pub inner: Mr,
}

static MR_FI_OPS: fi_ops = object::fi_ops_of::<MrObj>(None, None);

// SAFETY: repr(C), fid_mr first, MR_FI_OPS in every instance.
unsafe impl FidObject for MrObj {
    const CLASS: usize = FI_CLASS_MR;
    const CLOSE: &'static str = "mr close";
    fn fi_ops() -> *const fi_ops {
        &MR_FI_OPS
    }
    /// Nothing refers to a registration: it always closes, freeing its key.
    fn release(&self) {
        lock(&self.inner.domain.mr_keys).remove(&self.inner.key);
        self.inner.domain.refs.put();
    }
}

/// Register `ranges`; the common body of reg/regv/regattr.
#[allow(clippy::too_many_arguments)]
///
/// # Safety
/// `fid` NULL or a readable fid; `mr` NULL or writable.
unsafe fn register(
    fid: *mut fid,
    ranges: Vec<(usize, usize)>,
    access: u64,
    offset: u64,
    requested_key: u64,
    flags: u64,
    mr: *mut *mut fid_mr,
    context: *mut c_void,
) -> Result<c_int> {
    // SAFETY: per caller; registrations are made against a domain.
    let domain = unsafe { obj::<crate::domain::DomainObj>(fid) }?
        .inner
        .clone();
    if mr.is_null() {
        return Err(Errno::INVAL);
    }
    if flags != 0 {
        return Err(Errno::BADFLAGS);
    }
    if access & !ACCESS != 0 {
        return Err(Errno::INVAL);
    }
    if ranges.len() > crate::getinfo::IOV_LIMIT {
        return Err(Errno::INVAL);
    }
    // Offsets only matter for FI_MR_VIRT_ADDR-less RMA, which we lack.
    let _ = offset;
    if !lock(&domain.mr_keys).insert(requested_key) {
        return Err(Errno(FI_ENOKEY));
    }
    let parent = domain.clone();
    let o = MrObj {
        fid: fid_mr {
            fid: object::header::<MrObj>(context),
            mem_desc: std::ptr::null_mut(),
            key: requested_key,
        },
        inner: Mr {
            domain,
            key: requested_key,
            access,
            ranges,
        },
    };
    // SAFETY: `mr` was checked non-NULL above.
    let p = unsafe { object::open(mr, Some(&parent.refs), o) }?;
    // The local descriptor is the MR itself (fi_mr_desc); never required.
    // SAFETY: p is freshly allocated and not yet used by the application,
    // which gets control back only when this call returns.
    unsafe { (*p).fid.mem_desc = p.cast() };
    Ok(0)
}

/// # Safety
/// `iov` NULL or `count` readable iovecs.
unsafe fn ranges_of(iov: *const iovec, count: size_t) -> Result<Vec<(usize, usize)>> {
    if count == 0 || iov.is_null() {
        return Err(Errno::INVAL);
    }
    // SAFETY: per caller.
    let v = unsafe { std::slice::from_raw_parts(iov, count) };
    Ok(v.iter().map(|i| (i.iov_base as usize, i.iov_len)).collect())
}

/// `fi_ops_mr::reg`.
pub unsafe extern "C" fn xdp_mr_reg(
    fid: *mut fid,
    buf: *const c_void,
    len: size_t,
    access: u64,
    offset: u64,
    requested_key: u64,
    flags: u64,
    mr: *mut *mut fid_mr,
    context: *mut c_void,
) -> c_int {
    guard_int("fi_mr_reg", || {
        if buf.is_null() && len > 0 {
            return Err(Errno::INVAL);
        }
        // SAFETY: forwarded contract.
        unsafe {
            register(
                fid,
                vec![(buf as usize, len)],
                access,
                offset,
                requested_key,
                flags,
                mr,
                context,
            )
        }
    })
}

/// `fi_ops_mr::regv`.
pub unsafe extern "C" fn xdp_mr_regv(
    fid: *mut fid,
    iov: *const iovec,
    count: size_t,
    access: u64,
    offset: u64,
    requested_key: u64,
    flags: u64,
    mr: *mut *mut fid_mr,
    context: *mut c_void,
) -> c_int {
    guard_int("fi_mr_regv", || {
        // SAFETY: forwarded contract.
        let r = unsafe { ranges_of(iov, count) }?;
        // SAFETY: forwarded contract.
        unsafe { register(fid, r, access, offset, requested_key, flags, mr, context) }
    })
}

/// `fi_ops_mr::regattr`: host memory only (no FI_HMEM capability).
pub unsafe extern "C" fn xdp_mr_regattr(
    fid: *mut fid,
    attr: *const fi_mr_attr,
    flags: u64,
    mr: *mut *mut fid_mr,
) -> c_int {
    guard_int("fi_mr_regattr", || {
        // SAFETY: attr NULL or valid.
        let a = unsafe { attr.as_ref() }.ok_or(Errno::INVAL)?;
        if a.iface != FI_HMEM_SYSTEM {
            return Err(Errno::NOSYS);
        }
        if a.auth_key_size != 0 {
            return Err(Errno::INVAL);
        }
        // SAFETY: attr's iov array per fi_mr(3).
        let r = unsafe { ranges_of(a.mr_iov, a.iov_count) }?;
        // SAFETY: forwarded contract.
        unsafe {
            register(
                fid,
                r,
                a.access,
                a.offset,
                a.requested_key,
                flags,
                mr,
                a.context,
            )
        }
    })
}
