//! fi_cm(3) on connectionless endpoints: fi_getname and fi_setname; the
//! connection calls do not apply and return -FI_ENOSYS.

use libc::{c_int, c_void, size_t};

use super::{EpObj, reserve_port};
use crate::abi::{Errno, guard_int, lock};
use crate::object::obj;
use crate::sys::*;

pub(super) static CM_OPS: fi_ops_cm = fi_ops_cm {
    size: size_of::<fi_ops_cm>(),
    setname: Some(ep_setname),
    getname: Some(ep_getname),
    getpeer: Some(cm_getpeer),
    connect: Some(cm_connect),
    listen: Some(cm_listen),
    accept: Some(cm_accept),
    reject: Some(cm_reject),
    shutdown: Some(cm_shutdown),
    join: Some(cm_join),
};

/// fi_getname (fi_cm(3)): our address in the endpoint's format; truncates
/// and returns -FI_ETOOSMALL (with the needed size) if the buffer is short.
unsafe extern "C" fn ep_getname(f: fid_t, addr: *mut c_void, addrlen: *mut size_t) -> c_int {
    guard_int("fi_getname", || {
        // SAFETY: validated by obj().
        let e = &unsafe { obj::<EpObj>(f) }?.inner;
        if addrlen.is_null() {
            return Err(Errno::INVAL);
        }
        let bytes = e.format.encode(&lock(&e.state).local);
        // SAFETY: addrlen non-NULL; addr holds *addrlen bytes.
        unsafe {
            let room = *addrlen;
            *addrlen = bytes.len();
            if room < bytes.len() || addr.is_null() {
                if !addr.is_null() {
                    std::ptr::copy_nonoverlapping(bytes.as_ptr(), addr.cast::<u8>(), room);
                }
                return Err(Errno::TOOSMALL);
            }
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), addr.cast::<u8>(), bytes.len());
        }
        Ok(0)
    })
}

/// fi_setname: choose our IP/port before fi_enable (the port is
/// re-reserved; our MAC and incarnation are kept).
unsafe extern "C" fn ep_setname(f: fid_t, addr: *mut c_void, addrlen: size_t) -> c_int {
    guard_int("fi_setname", || {
        // SAFETY: validated by obj().
        let e = &unsafe { obj::<EpObj>(f) }?.inner;
        if addr.is_null() || addrlen == 0 {
            return Err(Errno::INVAL);
        }
        // SAFETY: addr holds addrlen bytes.
        let b = unsafe { std::slice::from_raw_parts(addr.cast::<u8>(), addrlen) };
        let (a, _) = crate::addr::decode_any(b).ok_or(Errno::INVAL)?;
        let mut st = lock(&e.state);
        if st.enabled {
            return Err(Errno::OPBADSTATE);
        }
        if !e.domain.iface.has_ip(&a.ip) || !e.format.fits(&a.ip) {
            return Err(Errno::INVAL);
        }
        if a.socket_addr() != st.local.socket_addr() {
            st.port_socket = None;
            let (s, port) = reserve_port(a.socket_addr())?;
            st.port_socket = Some(s);
            st.local.ip = a.ip;
            st.local.port = port;
        }
        Ok(0)
    })
}

// Connection management does not apply to connectionless endpoints.
unsafe extern "C" fn cm_getpeer(_: *mut fid_ep, _: *mut c_void, _: *mut size_t) -> c_int {
    -FI_ENOSYS
}
unsafe extern "C" fn cm_connect(
    _: *mut fid_ep,
    _: *const c_void,
    _: *const c_void,
    _: size_t,
) -> c_int {
    -FI_ENOSYS
}
unsafe extern "C" fn cm_listen(_: *mut fid_pep) -> c_int {
    -FI_ENOSYS
}
unsafe extern "C" fn cm_accept(_: *mut fid_ep, _: *const c_void, _: size_t) -> c_int {
    -FI_ENOSYS
}
unsafe extern "C" fn cm_reject(_: *mut fid_pep, _: fid_t, _: *const c_void, _: size_t) -> c_int {
    -FI_ENOSYS
}
unsafe extern "C" fn cm_shutdown(_: *mut fid_ep, _: u64) -> c_int {
    -FI_ENOSYS
}
unsafe extern "C" fn cm_join(
    _: *mut fid_ep,
    _: *const c_void,
    _: u64,
    _: *mut *mut c_void,
    _: *mut c_void,
) -> c_int {
    -FI_ENOSYS
}
