//! Fabric object (fi_fabric(3)): parent of domains, EQs and wait sets.

use std::sync::Arc;

use libc::{c_int, c_void};

use crate::abi::{Errno, Result, guard_int};
use crate::object::{self, FidObject, Refs, obj};
use crate::sys::*;

pub struct Fabric {
    /// Open domains and EQs.
    pub refs: Refs,
    pub api_version: u32,
}

#[repr(C)]
pub struct FabricObj {
    pub fid: fid_fabric,
    pub inner: Arc<Fabric>,
}

static FABRIC_FI_OPS: fi_ops = object::fi_ops_of::<FabricObj>(None, None);
static FABRIC_OPS: fi_ops_fabric = fi_ops_fabric {
    size: size_of::<fi_ops_fabric>(),
    domain: Some(crate::domain::xdp_domain),
    passive_ep: Some(fabric_passive_ep),
    eq_open: Some(crate::eq::xdp_eq_open),
    wait_open: Some(fabric_wait_open),
    trywait: Some(fabric_trywait),
    domain2: Some(crate::domain::xdp_domain2),
};

// SAFETY: repr(C), fid_fabric first, FABRIC_FI_OPS installed in every instance.
unsafe impl FidObject for FabricObj {
    const CLASS: usize = FI_CLASS_FABRIC;
    const CLOSE: &'static str = "fabric close";
    fn fi_ops() -> *const fi_ops {
        &FABRIC_FI_OPS
    }
    fn refs(&self) -> Option<&Refs> {
        Some(&self.inner.refs)
    }
    /// A fabric has no parent.
    fn release(&self) {}
}

/// `fi_provider::fabric` (fi_fabric(3)).
pub unsafe extern "C" fn xdp_fabric(
    attr: *mut fi_fabric_attr,
    fabric: *mut *mut fid_fabric,
    context: *mut c_void,
) -> c_int {
    guard_int("fi_fabric", || {
        // SAFETY: attr is NULL or valid.
        let a = unsafe { attr.as_ref() }.ok_or(Errno::INVAL)?;
        if fabric.is_null() {
            return Err(Errno::INVAL);
        }
        // SAFETY: fabric_attr->name is NULL or a C string.
        if !unsafe { crate::getinfo::fabric_name_ok(a.name) } {
            return Err(Errno::NODATA);
        }
        let inner = Arc::new(Fabric {
            refs: Refs::default(),
            api_version: a.api_version,
        });
        let o = FabricObj {
            fid: fid_fabric {
                fid: object::header::<FabricObj>(context),
                ops: object::ops_ptr(&FABRIC_OPS),
                api_version: a.api_version,
            },
            inner,
        };
        // SAFETY: `fabric` was checked non-NULL above.
        unsafe { object::open(fabric, None, o) }.map(|_| 0)
    })
}

/// The fabric behind a `fid_fabric` pointer.
///
/// # Safety
/// `f` must be NULL or point to a readable fid.
pub unsafe fn fabric_of(f: *mut fid_fabric) -> Result<Arc<Fabric>> {
    // SAFETY: per caller.
    Ok(unsafe { obj::<FabricObj>(f.cast()) }?.inner.clone())
}

/// FI_EP_MSG is not offered, so there are no passive endpoints.
unsafe extern "C" fn fabric_passive_ep(
    _: *mut fid_fabric,
    _: *mut fi_info,
    _: *mut *mut fid_pep,
    _: *mut c_void,
) -> c_int {
    -FI_ENOSYS
}

/// Wait sets are not offered (CQs support FI_WAIT_NONE/UNSPEC/YIELD/FD).
unsafe extern "C" fn fabric_wait_open(
    _: *mut fid_fabric,
    _: *mut fi_wait_attr,
    _: *mut *mut fid_wait,
) -> c_int {
    -FI_ENOSYS
}

/// fi_trywait(3): for each CQ, drive progress and return -FI_EAGAIN if it
/// has completions; otherwise its wait fd is reset and the caller may block
/// on it. Other objects (counters, EQs) have no FD wait object: -FI_EINVAL.
unsafe extern "C" fn fabric_trywait(
    fabric: *mut fid_fabric,
    fids: *mut *mut fid,
    count: c_int,
) -> c_int {
    guard_int("fi_trywait", || {
        // SAFETY: validated by fabric_of.
        let _ = unsafe { fabric_of(fabric) }?;
        let n = usize::try_from(count).map_err(|_| Errno::INVAL)?;
        if fids.is_null() && n > 0 {
            return Err(Errno::INVAL);
        }
        for i in 0..n {
            // SAFETY: fids holds count fid pointers (fi_trywait(3)).
            let f = unsafe { *fids.add(i) };
            // SAFETY: validated by obj().
            let cq = unsafe { obj::<crate::cq::CqObj>(f) }?;
            cq.inner.trywait()?;
        }
        Ok(0)
    })
}
