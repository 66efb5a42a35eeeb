//! Domain object (fi_domain(3)): one network interface. Parent of AVs, CQs,
//! counters, endpoints and memory regions.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use libc::{c_int, c_void};

use crate::abi::{Errno, Result, guard_int, lock};
use crate::fabric::Fabric;
use crate::getinfo::InfoView;
use crate::ifaces::{self, Iface};
use crate::object::{self, FidObject, Refs, obj};
use crate::sys::*;

pub struct Domain {
    /// Open children (AV, CQ, counter, endpoint, MR) and bound EQs.
    pub refs: Refs,
    pub fabric: Arc<Fabric>,
    pub iface: Iface,
    pub info: InfoView,
    pub cfg: crate::params::Config,
    /// MR keys in use (fi_mr(3): keys are chosen by the application unless
    /// FI_MR_PROV_KEY, and must be unique within the domain).
    pub mr_keys: Mutex<HashSet<u64>>,
    pub eq: Mutex<Option<Arc<crate::eq::Eq>>>,
}

#[repr(C)]
pub struct DomainObj {
    pub fid: fid_domain,
    pub inner: Arc<Domain>,
}

static DOMAIN_FI_OPS: fi_ops = object::fi_ops_of::<DomainObj>(Some(domain_bind), None);
static DOMAIN_OPS: fi_ops_domain = fi_ops_domain {
    size: size_of::<fi_ops_domain>(),
    av_open: Some(crate::av::xdp_av_open),
    cq_open: Some(crate::cq::xdp_cq_open),
    endpoint: Some(crate::ep::xdp_endpoint),
    scalable_ep: Some(domain_scalable_ep),
    cntr_open: Some(crate::cntr::xdp_cntr_open),
    poll_open: Some(domain_poll_open),
    stx_ctx: Some(domain_stx_ctx),
    srx_ctx: Some(domain_srx_ctx),
    query_atomic: Some(domain_query_atomic),
    query_collective: Some(domain_query_collective),
    endpoint2: Some(crate::ep::xdp_endpoint2),
};
static DOMAIN_MR_OPS: fi_ops_mr = fi_ops_mr {
    size: size_of::<fi_ops_mr>(),
    reg: Some(crate::mr::xdp_mr_reg),
    regv: Some(crate::mr::xdp_mr_regv),
    regattr: Some(crate::mr::xdp_mr_regattr),
};

// SAFETY: repr(C), fid_domain first, DOMAIN_FI_OPS in every instance.
unsafe impl FidObject for DomainObj {
    const CLASS: usize = FI_CLASS_DOMAIN;
    const CLOSE: &'static str = "domain close";
    fn fi_ops() -> *const fi_ops {
        &DOMAIN_FI_OPS
    }
    fn refs(&self) -> Option<&Refs> {
        Some(&self.inner.refs)
    }
    fn release(&self) {
        if let Some(eq) = lock(&self.inner.eq).take() {
            eq.refs.put();
        }
        self.inner.fabric.refs.put();
    }
}

/// The domain behind a `fid_domain` pointer.
///
/// # Safety
/// `d` must be NULL or point to a readable fid.
pub unsafe fn domain_of(d: *mut fid_domain) -> Result<Arc<Domain>> {
    // SAFETY: per caller.
    Ok(unsafe { obj::<DomainObj>(d.cast()) }?.inner.clone())
}

/// `fi_ops_fabric::domain` (fi_domain(3)).
pub unsafe extern "C" fn xdp_domain(
    fabric: *mut fid_fabric,
    info: *mut fi_info,
    dom: *mut *mut fid_domain,
    context: *mut c_void,
) -> c_int {
    guard_int("fi_domain", || {
        // SAFETY: validated by fabric_of / InfoView::read.
        let fabric = unsafe { crate::fabric::fabric_of(fabric) }?;
        let info = unsafe { InfoView::read(info) }?;
        if dom.is_null() {
            return Err(Errno::INVAL);
        }
        let name = info.domain_name.clone().ok_or(Errno::INVAL)?;
        let iface = ifaces::list()
            .map_err(|e| Errno::from_os(&e))?
            .into_iter()
            .find(|i| i.name == name && i.usable())
            .ok_or_else(|| {
                crate::xdp_warn!(FI_LOG_DOMAIN, "domain {name}: no such usable interface");
                Errno::NODATA
            })?;
        let inner = Arc::new(Domain {
            refs: Refs::default(),
            fabric: fabric.clone(),
            iface,
            info,
            cfg: crate::params::Config::load(),
            mr_keys: Mutex::new(HashSet::new()),
            eq: Mutex::new(None),
        });
        let o = DomainObj {
            fid: fid_domain {
                fid: object::header::<DomainObj>(context),
                ops: object::ops_ptr(&DOMAIN_OPS),
                mr: object::ops_ptr(&DOMAIN_MR_OPS),
            },
            inner,
        };
        // SAFETY: `dom` was checked non-NULL above.
        unsafe { object::open(dom, Some(&fabric.refs), o) }.map(|_| 0)
    })
}

/// `fi_ops_fabric::domain2`: only flags = 0 is defined in 1.17.
pub unsafe extern "C" fn xdp_domain2(
    fabric: *mut fid_fabric,
    info: *mut fi_info,
    dom: *mut *mut fid_domain,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    if flags != 0 {
        return -FI_EBADFLAGS;
    }
    // SAFETY: same contract as xdp_domain.
    unsafe { xdp_domain(fabric, info, dom, context) }
}

/// fi_domain_bind: an EQ for asynchronous MR events (FI_REG_MR). Our
/// registrations complete synchronously, so the EQ is held but unused.
unsafe extern "C" fn domain_bind(f: *mut fid, bfid: *mut fid, flags: u64) -> c_int {
    guard_int("domain bind", || {
        // SAFETY: validated by obj().
        let d = unsafe { obj::<DomainObj>(f) }?;
        // SAFETY: validated by obj().
        let eq = unsafe { obj::<crate::eq::EqObj>(bfid) }?;
        const FI_REG_MR: u64 = 1 << 59;
        if flags & !FI_REG_MR != 0 {
            return Err(Errno::BADFLAGS);
        }
        if !Arc::ptr_eq(&eq.inner.fabric, &d.inner.fabric) {
            return Err(Errno::INVAL);
        }
        let mut slot = lock(&d.inner.eq);
        if slot.is_some() {
            return Err(Errno::INVAL);
        }
        eq.inner.refs.get();
        *slot = Some(eq.inner.clone());
        Ok(0)
    })
}

/// Scalable endpoints are not offered (ep_attr tx/rx_ctx_cnt = 1).
unsafe extern "C" fn domain_scalable_ep(
    _: *mut fid_domain,
    _: *mut fi_info,
    _: *mut *mut fid_ep,
    _: *mut c_void,
) -> c_int {
    -FI_ENOSYS
}
/// Poll sets are not offered.
unsafe extern "C" fn domain_poll_open(
    _: *mut fid_domain,
    _: *mut fi_poll_attr,
    _: *mut *mut fid_poll,
) -> c_int {
    -FI_ENOSYS
}
/// Shared transmit contexts are not offered (max_ep_stx_ctx = 0).
unsafe extern "C" fn domain_stx_ctx(
    _: *mut fid_domain,
    _: *mut fi_tx_attr,
    _: *mut *mut c_void,
    _: *mut c_void,
) -> c_int {
    -FI_ENOSYS
}
/// Shared receive contexts are not offered (max_ep_srx_ctx = 0).
unsafe extern "C" fn domain_srx_ctx(
    _: *mut fid_domain,
    _: *mut fi_rx_attr,
    _: *mut *mut fid_ep,
    _: *mut c_void,
) -> c_int {
    -FI_ENOSYS
}
/// No FI_ATOMIC capability.
unsafe extern "C" fn domain_query_atomic(
    _: *mut fid_domain,
    _: c_int,
    _: c_int,
    _: *mut c_void,
    _: u64,
) -> c_int {
    -FI_ENOSYS
}
/// No FI_COLLECTIVE capability.
unsafe extern "C" fn domain_query_collective(
    _: *mut fid_domain,
    _: c_int,
    _: *mut c_void,
    _: u64,
) -> c_int {
    -FI_ENOSYS
}
