//! Memory registration (fi_mr(3)). The provider copies through UMEM frames,
//! so registration is bookkeeping: FI_MR_LOCAL is never required and
//! `desc` arguments are accepted but not needed. What a registration does
//! is make memory reachable by peers' RMA and atomics: it enters the
//! domain's `Registry` under its key with its remote access rights.
//!
//! Keys and addresses follow the domain's mr_mode (fi_mr(3) "MEMORY
//! REGISTRATION MODES"): with FI_MR_PROV_KEY (or FI_MR_BASIC, a mode up to
//! API 1.x and a mere deprecated bit from 2.0) the provider
//! picks the key — the requested one if it is free, else an unused one —
//! without it the key is the application's `requested_key`, unique in the
//! domain (-FI_ENOKEY otherwise); with FI_MR_VIRT_ADDR (only granted with
//! FI_MR_BASIC) peers address the region by its virtual address, else by a
//! 0-based offset (the registration's `offset` argument, 0 in 1.17, names
//! its first byte).
//! `fi_mr_bind` takes counters (FI_RMA_EVENT: they count peers'
//! operations on the registration); endpoints are never bound (no
//! FI_MR_ENDPOINT). `fi_mr_enable` and `fi_mr_refresh` succeed: a
//! registration is usable at once and holds virtual addresses, never
//! pinned pages.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use libc::{c_int, c_void, iovec, size_t};

use crate::abi::{Errno, Result, guard_int, lock};
use crate::datapath::memory::Region;
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
    /// Counters bound with fi_mr_bind (referenced until the MR closes).
    pub counters: Mutex<Vec<Arc<crate::cntr::Cntr>>>,
}

#[repr(C)]
pub struct MrObj {
    pub fid: fid_mr,
    pub inner: Mr,
}

static MR_FI_OPS: fi_ops = object::fi_ops_of::<MrObj>(Some(mr_bind), Some(mr_control));

/// fi_mr_bind (fi_mr(3)): a counter that counts peers' RMA and atomics on
/// this registration (FI_REMOTE_READ, FI_REMOTE_WRITE; FI_RMA_EVENT).
/// Endpoints are not bound to registrations (no FI_MR_ENDPOINT): -FI_ENOSYS.
unsafe extern "C" fn mr_bind(f: *mut fid, bfid: *mut fid, flags: u64) -> c_int {
    guard_int("fi_mr_bind", || {
        // SAFETY: validated by obj().
        let m = unsafe { obj::<MrObj>(f) }?;
        // SAFETY: bfid NULL or a readable fid (fi_mr(3)).
        let class = unsafe { bfid.as_ref() }.ok_or(Errno::INVAL)?.fclass;
        if class != FI_CLASS_CNTR {
            return Err(Errno::NOSYS);
        }
        // SAFETY: validated by obj().
        let k = unsafe { obj::<crate::cntr::CntrObj>(bfid) }?.inner.clone();
        let events = FI_REMOTE_READ | FI_REMOTE_WRITE;
        if flags == 0 || flags & !events != 0 {
            return Err(Errno::BADFLAGS);
        }
        if !Arc::ptr_eq(&k.domain, &m.inner.domain) {
            return Err(Errno::DOMAIN);
        }
        k.refs.get();
        if !m.inner.domain.memory.bind(m.inner.key, flags, k.clone()) {
            k.refs.put();
            return Err(Errno::INVAL);
        }
        k.counts_registrations
            .store(true, std::sync::atomic::Ordering::Relaxed);
        lock(&m.inner.counters).push(k);
        Ok(0)
    })
}

/// fi_mr_enable (FI_ENABLE) and fi_mr_refresh (FI_REFRESH): nothing to do
/// (see the module docs); other commands are not defined for MRs.
unsafe extern "C" fn mr_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    guard_int("mr control", || {
        // SAFETY: validated by obj().
        unsafe { obj::<MrObj>(f) }?;
        match command {
            FI_ENABLE => Ok(0),
            FI_REFRESH => {
                // SAFETY: FI_REFRESH's argument is an fi_mr_modify
                // (fi_mr_refresh builds it), or NULL.
                let m = unsafe { arg.cast::<fi_mr_modify>().as_ref() }.ok_or(Errno::INVAL)?;
                let (iov, count) = (m.attr.mr_iov, m.attr.iov_count);
                if count > crate::getinfo::IOV_LIMIT || (count > 0 && iov.is_null()) {
                    return Err(Errno::INVAL);
                }
                Ok(0)
            }
            _ => Err(Errno::NOSYS),
        }
    })
}

// SAFETY: repr(C), fid_mr first, MR_FI_OPS in every instance.
unsafe impl FidObject for MrObj {
    const CLASS: usize = FI_CLASS_MR;
    const CLOSE: &'static str = "mr close";
    fn fi_ops() -> *const fi_ops {
        &MR_FI_OPS
    }
    /// Nothing refers to a registration: it always closes, freeing its key.
    fn release(&self) {
        self.inner.domain.memory.remove(self.inner.key);
        for c in lock(&self.inner.counters).drain(..) {
            c.refs.put();
        }
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
    // A range from NULL is the address space (`Region::from_null`): alone.
    let from_null = ranges.iter().any(|&(at, len)| at == 0 && len > 0);
    if from_null && ranges.len() > 1 {
        return Err(Errno::INVAL);
    }
    // A range must not run past the end of the address space.
    if ranges
        .iter()
        .any(|&(at, len)| at.checked_add(len).is_none())
    {
        return Err(Errno::INVAL);
    }
    let total = ranges
        .iter()
        .try_fold(0u64, |sum, r| sum.checked_add(r.1 as u64))
        .ok_or(Errno::INVAL)?;
    // Memory a peer may read or write must be mapped so: a peer's access
    // is copied by this process, and would fault it (`mappings`).
    let remote_write = access & FI_REMOTE_WRITE != 0;
    if !from_null
        && access & (FI_REMOTE_READ | FI_REMOTE_WRITE) != 0
        && crate::datapath::mappings::grant(&ranges, true, remote_write) == Some(false)
    {
        return Err(Errno(FI_EFAULT));
    }
    let mode = domain.info.mr_mode;
    // FI_MR_BASIC is a mode up to 1.x only (fi_domain(3) of 2.x).
    let basic = mode == FI_MR_BASIC && domain.fabric.api_version < crate::getinfo::V2;
    let prov_key = basic || mode & FI_MR_PROV_KEY != 0;
    let virt_addr = basic || mode & FI_MR_VIRT_ADDR != 0;
    let region = Region {
        len: total,
        iova: if virt_addr {
            ranges.first().map_or(0, |r| r.0 as u64)
        } else {
            offset
        },
        access,
        from_null,
        ranges: ranges.clone(),
        counters: Mutex::new(Vec::new()),
    };
    // The provider's key is the requested one when it is free (an
    // application may rely on its own keys either way), else the next
    // unused one of the domain's counter.
    let mut key = requested_key;
    let mut region = region;
    while let Err(r) = domain.memory.insert(key, region) {
        if !prov_key {
            return Err(Errno(FI_ENOKEY));
        }
        region = r;
        key = domain.next_mr_key.fetch_add(1, Ordering::Relaxed);
    }
    let parent = domain.clone();
    let o = MrObj {
        fid: fid_mr {
            fid: object::header::<MrObj>(context),
            mem_desc: std::ptr::null_mut(),
            key,
        },
        inner: Mr {
            domain,
            key,
            access,
            ranges,
            counters: Mutex::new(Vec::new()),
        },
    };
    // SAFETY: `mr` was checked non-NULL above.
    let p = match unsafe { object::open(mr, Some(&parent.refs), o) } {
        Ok(p) => p,
        Err(e) => {
            parent.memory.remove(key);
            return Err(e);
        }
    };
    // The local descriptor is the MR itself (fi_mr_desc); never required.
    // SAFETY: p is freshly allocated and not yet used by the application,
    // which gets control back only when this call returns.
    unsafe { (*p).fid.mem_desc = p.cast() };
    Ok(0)
}

/// # Safety
/// `iov` NULL or `count` readable iovecs.
unsafe fn ranges_of(iov: *const iovec, count: size_t) -> Result<Vec<(usize, usize)>> {
    if count == 0 || count > crate::getinfo::IOV_LIMIT || iov.is_null() {
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
        // NULL is a registration too: MPICH registers its dynamic windows
        // as NULL and UINTPTR_MAX bytes, the whole address space, and
        // attaches memory to it later (`Region::from_null`).
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
