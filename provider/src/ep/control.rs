//! Controlling an endpoint: fi_control (FI_ENABLE, FI_GETOPSFLAG,
//! FI_SETOPSFLAG) and the fi_ops_ep table (fi_endpoint(3)): fi_cancel,
//! fi_getopt / fi_setopt, and the scalable-endpoint slots, which are not
//! offered.

use std::sync::atomic::Ordering;

use libc::{c_int, c_void, size_t, ssize_t};

use super::EpObj;
use crate::abi::{Errno, guard_int, guard_ssize};
use crate::getinfo;
use crate::object::obj;
use crate::sys::*;

pub(super) static EP_OPS: fi_ops_ep = fi_ops_ep {
    size: size_of::<fi_ops_ep>(),
    cancel: Some(ep_cancel),
    getopt: Some(ep_getopt),
    setopt: Some(ep_setopt),
    tx_ctx: Some(ep_tx_ctx),
    rx_ctx: Some(ep_rx_ctx),
    rx_size_left: Some(ep_size_left),
    tx_size_left: Some(ep_size_left),
};

/// fi_control on an endpoint: FI_ENABLE, FI_GETOPSFLAG, FI_SETOPSFLAG.
pub(super) unsafe extern "C" fn ep_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    guard_int("ep control", || {
        // SAFETY: validated by obj().
        let e = &unsafe { obj::<EpObj>(f) }?.inner;
        match command {
            FI_ENABLE => e.enable().map(|_| 0),
            FI_GETOPSFLAG | FI_SETOPSFLAG => {
                let p = arg.cast::<u64>();
                if p.is_null() {
                    return Err(Errno::INVAL);
                }
                // SAFETY: arg is a uint64_t * per fi_endpoint(3).
                let v = unsafe { *p };
                let dir = v & (FI_TRANSMIT | FI_RECV);
                if dir != FI_TRANSMIT && dir != FI_RECV {
                    return Err(Errno::INVAL);
                }
                let (slot, allowed) = if dir == FI_TRANSMIT {
                    (&e.tx_op_flags, getinfo::TX_OP_FLAGS)
                } else {
                    (&e.rx_op_flags, getinfo::RX_OP_FLAGS)
                };
                if command == FI_GETOPSFLAG {
                    // SAFETY: as above.
                    unsafe { *p = slot.load(Ordering::Relaxed) | dir };
                } else {
                    let flags = v & !dir;
                    if flags & !allowed != 0 {
                        return Err(Errno::BADFLAGS);
                    }
                    slot.store(flags, Ordering::Relaxed);
                }
                Ok(0)
            }
            _ => Err(Errno::NOSYS),
        }
    })
}

/// fi_cancel: 0 if a queued receive was cancelled (its FI_ECANCELED error
/// completion follows), -FI_ENOENT otherwise.
unsafe extern "C" fn ep_cancel(f: fid_t, context: *mut c_void) -> ssize_t {
    guard_ssize("fi_cancel", || {
        // SAFETY: validated by obj().
        let e = &unsafe { obj::<EpObj>(f) }?.inner;
        let mut st = e.state.lock();
        let found = st
            .core
            .as_mut()
            .is_some_and(|core| core.cancel(context as usize));
        if found { Ok(0) } else { Err(Errno(FI_ENOENT)) }
    })
}

/// fi_getopt: FI_OPT_ENDPOINT / FI_OPT_MIN_MULTI_RECV (size_t), and
/// FI_OPT_CM_DATA_SIZE (size_t) on connected endpoints.
unsafe extern "C" fn ep_getopt(
    f: fid_t,
    level: c_int,
    optname: c_int,
    optval: *mut c_void,
    optlen: *mut size_t,
) -> c_int {
    guard_int("fi_getopt", || {
        // SAFETY: validated by obj().
        let e = &unsafe { obj::<EpObj>(f) }?.inner;
        if level != FI_OPT_ENDPOINT {
            return Err(Errno(FI_ENOPROTOOPT));
        }
        if optval.is_null() || optlen.is_null() {
            return Err(Errno::INVAL);
        }
        match optname {
            // SAFETY: optval/optlen checked non-NULL, per fi_endpoint(3).
            FI_OPT_CM_DATA_SIZE if e.ep_type == FI_EP_MSG => unsafe {
                super::cm_data_size_opt(level, optname, optval, optlen)
            },
            FI_OPT_MIN_MULTI_RECV => {
                // SAFETY: optlen non-NULL.
                if unsafe { *optlen } < size_of::<size_t>() {
                    return Err(Errno::TOOSMALL);
                }
                let v = e.state.lock().min_multi_recv;
                // SAFETY: optval holds a size_t (checked length).
                unsafe {
                    optval.cast::<size_t>().write_unaligned(v);
                    *optlen = size_of::<size_t>();
                }
                Ok(0)
            }
            _ => Err(Errno(FI_ENOPROTOOPT)),
        }
    })
}

unsafe extern "C" fn ep_setopt(
    f: fid_t,
    level: c_int,
    optname: c_int,
    optval: *const c_void,
    optlen: size_t,
) -> c_int {
    guard_int("fi_setopt", || {
        // SAFETY: validated by obj().
        let e = &unsafe { obj::<EpObj>(f) }?.inner;
        if level != FI_OPT_ENDPOINT {
            return Err(Errno(FI_ENOPROTOOPT));
        }
        match optname {
            FI_OPT_MIN_MULTI_RECV => {
                if optval.is_null() || optlen < size_of::<size_t>() {
                    return Err(Errno::INVAL);
                }
                // SAFETY: optval holds a size_t (checked length).
                let v = unsafe { optval.cast::<size_t>().read_unaligned() };
                let mut st = e.state.lock();
                st.min_multi_recv = v;
                if let Some(core) = st.core.as_mut() {
                    core.set_min_multi_recv(v);
                }
                Ok(0)
            }
            _ => Err(Errno(FI_ENOPROTOOPT)),
        }
    })
}

/// No scalable endpoints: tx/rx contexts cannot be created.
pub(crate) unsafe extern "C" fn ep_tx_ctx(
    _: *mut fid_ep,
    _: c_int,
    _: *mut fi_tx_attr,
    _: *mut *mut fid_ep,
    _: *mut c_void,
) -> c_int {
    -FI_ENOSYS
}
pub(crate) unsafe extern "C" fn ep_rx_ctx(
    _: *mut fid_ep,
    _: c_int,
    _: *mut fi_rx_attr,
    _: *mut *mut fid_ep,
    _: *mut c_void,
) -> c_int {
    -FI_ENOSYS
}
/// fi_rx/tx_size_left are deprecated (fi_endpoint(3)) and not implemented.
pub(crate) unsafe extern "C" fn ep_size_left(_: *mut fid_ep) -> ssize_t {
    -(FI_ENOSYS as ssize_t)
}
