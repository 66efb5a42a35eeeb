//! fi_cm(3) on active endpoints: fi_getname / fi_setname for every type,
//! and for connected endpoints (FI_EP_MSG) fi_connect, fi_accept,
//! fi_shutdown and fi_getpeer. The connection itself runs below the seam
//! (`xdp/connected.rs`); its events reach the endpoint's EQ from
//! `super::Endpoint::conn_event`. Connectionless endpoints have no
//! connection: those calls return -FI_ENOSYS there, as fi_listen,
//! fi_reject and fi_join do everywhere on an active endpoint.

use libc::{c_int, c_void, size_t};
use ofi_xdp_reliability::cm::CM_DATA_SIZE;

use super::{ConnPhase, Endpoint, EpObj, reserve_port};
use crate::abi::{Errno, Result, guard_int};
use crate::object::obj;
use crate::sys::*;

pub(super) static CM_OPS: fi_ops_cm = fi_ops_cm {
    size: size_of::<fi_ops_cm>(),
    setname: Some(ep_setname),
    getname: Some(ep_getname),
    getpeer: Some(ep_getpeer),
    connect: Some(ep_connect),
    listen: Some(cm_enosys::listen),
    accept: Some(ep_accept),
    reject: Some(cm_enosys::reject),
    shutdown: Some(ep_shutdown),
    join: Some(cm_enosys::join),
};

/// Copy an address out as fi_getname / fi_getpeer do (fi_cm(3)): truncate
/// and return -FI_ETOOSMALL, with the needed size, if the buffer is short.
///
/// # Safety
/// `addrlen` must be NULL or valid; `addr` NULL or `*addrlen` bytes.
pub unsafe fn copy_name(bytes: &[u8], addr: *mut c_void, addrlen: *mut size_t) -> Result<c_int> {
    if addrlen.is_null() {
        return Err(Errno::INVAL);
    }
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
}

/// fi_getopt(FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE): the most connection
/// data fi_connect / fi_accept / fi_reject carry (reliability/PROTOCOL.md
/// §9.1); other options of a connection-only object are -FI_ENOPROTOOPT.
///
/// # Safety
/// `optval` NULL or a `size_t`; `optlen` NULL or valid.
pub unsafe fn cm_data_size_opt(
    level: c_int,
    optname: c_int,
    optval: *mut c_void,
    optlen: *mut size_t,
) -> Result<c_int> {
    if level != FI_OPT_ENDPOINT || optname != FI_OPT_CM_DATA_SIZE {
        return Err(Errno(FI_ENOPROTOOPT));
    }
    if optval.is_null() || optlen.is_null() {
        return Err(Errno::INVAL);
    }
    // SAFETY: optlen non-NULL; optval holds *optlen bytes.
    unsafe {
        if *optlen < size_of::<size_t>() {
            return Err(Errno::TOOSMALL);
        }
        optval.cast::<size_t>().write_unaligned(CM_DATA_SIZE);
        *optlen = size_of::<size_t>();
    }
    Ok(0)
}

/// fi_getname (fi_cm(3)): our address in the endpoint's format.
unsafe extern "C" fn ep_getname(f: fid_t, addr: *mut c_void, addrlen: *mut size_t) -> c_int {
    guard_int("fi_getname", || {
        // SAFETY: validated by obj().
        let e = &unsafe { obj::<EpObj>(f) }?.inner;
        let bytes = e.format.encode(&e.state.lock().local);
        // SAFETY: per fi_cm(3).
        unsafe { copy_name(&bytes, addr, addrlen) }
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
        let mut st = e.state.lock();
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

/// The connected endpoint behind `ep` (-FI_ENOSYS for connectionless ones).
///
/// # Safety
/// `ep` must be NULL or point to a readable fid.
unsafe fn msg_ep<'a>(ep: *mut fid_ep) -> Result<&'a Endpoint> {
    // SAFETY: per the caller.
    let e = unsafe { super::ep_of(ep) }?;
    if e.ep_type != FI_EP_MSG {
        return Err(Errno::NOSYS);
    }
    Ok(e)
}

/// fi_cm(3) connection data: at most FI_OPT_CM_DATA_SIZE bytes
/// (-FI_EINVAL beyond, as the tcp provider answers).
///
/// # Safety
/// `param` must hold `len` bytes if non-NULL.
unsafe fn cm_data<'a>(param: *const c_void, len: size_t) -> Result<&'a [u8]> {
    if len > CM_DATA_SIZE || (param.is_null() && len > 0) {
        return Err(Errno::INVAL);
    }
    if len == 0 {
        return Ok(&[]);
    }
    // SAFETY: per the caller.
    Ok(unsafe { std::slice::from_raw_parts(param.cast::<u8>(), len) })
}

/// fi_connect: ask the listener at `addr` (in the endpoint's format) for a
/// connection; FI_CONNECTED or an error entry follows on the EQ. Enables
/// the endpoint if needed; only once per endpoint (fi_cm(3)).
unsafe extern "C" fn ep_connect(
    ep: *mut fid_ep,
    addr: *const c_void,
    param: *const c_void,
    paramlen: size_t,
) -> c_int {
    guard_int("fi_connect", || {
        // SAFETY: validated by msg_ep.
        let e = unsafe { msg_ep(ep) }?;
        // SAFETY: param per fi_cm(3).
        let data = unsafe { cm_data(param, paramlen) }?;
        if addr.is_null() {
            return Err(Errno::INVAL);
        }
        // SAFETY: fi_cm(3): one address of the endpoint's format.
        let bytes =
            unsafe { crate::av::addr_at(addr.cast::<u8>(), crate::addr::addr_len_hint(e.format)) };
        let (to, _) = crate::addr::decode_any(bytes).ok_or(Errno::INVAL)?;
        e.enable()?;
        let mut st = e.state.lock();
        if st.conn != ConnPhase::Idle || st.conn_req.is_some() {
            return Err(Errno::INVAL);
        }
        st.core
            .as_mut()
            .ok_or(Errno::OPBADSTATE)?
            .connect(to, data)?;
        st.conn = ConnPhase::Connecting;
        Ok(0)
    })
}

/// fi_accept: accept the connection request the endpoint was opened for
/// (`info->handle`); FI_CONNECTED follows on the EQ once the connecting
/// side confirms. Enables the endpoint if needed.
unsafe extern "C" fn ep_accept(ep: *mut fid_ep, param: *const c_void, paramlen: size_t) -> c_int {
    guard_int("fi_accept", || {
        // SAFETY: validated by msg_ep.
        let e = unsafe { msg_ep(ep) }?;
        // SAFETY: param per fi_cm(3).
        let data = unsafe { cm_data(param, paramlen) }?;
        e.enable()?;
        let mut st = e.state.lock();
        let handle = st.conn_req.ok_or(Errno::INVAL)?;
        if st.conn != ConnPhase::Idle {
            return Err(Errno::INVAL);
        }
        // Still live: not rejected meanwhile.
        let (req, pep) = crate::pep::peek_request(handle as *mut fid).ok_or(Errno::INVAL)?;
        st.core
            .as_mut()
            .ok_or(Errno::OPBADSTATE)?
            .accept(&req, data)?;
        drop(crate::pep::take_request(handle as *mut fid));
        crate::pep::accepted(&pep, &req);
        st.conn_req = None;
        st.conn = ConnPhase::Accepting;
        Ok(0)
    })
}

/// fi_shutdown: end the connection. Posted receives complete with
/// FI_ECANCELED before this returns; FI_SHUTDOWN is reported on the EQ
/// (here, and on the peer's side when it hears of it, fi_cm(3)).
unsafe extern "C" fn ep_shutdown(ep: *mut fid_ep, flags: u64) -> c_int {
    guard_int("fi_shutdown", || {
        // SAFETY: validated by msg_ep.
        let e = unsafe { msg_ep(ep) }?;
        if flags != 0 {
            return Err(Errno::BADFLAGS);
        }
        e.shutdown().map(|_| 0)
    })
}

/// fi_getpeer: the connected peer's address (-FI_ENOTCONN before
/// FI_CONNECTED).
unsafe extern "C" fn ep_getpeer(ep: *mut fid_ep, addr: *mut c_void, addrlen: *mut size_t) -> c_int {
    guard_int("fi_getpeer", || {
        // SAFETY: validated by msg_ep.
        let e = unsafe { msg_ep(ep) }?;
        let peer = e.state.lock().peer.ok_or(Errno(FI_ENOTCONN))?;
        let bytes = e.format.encode(&peer);
        // SAFETY: per fi_cm(3).
        unsafe { copy_name(&bytes, addr, addrlen) }
    })
}

/// Connection-management slots that do not apply to an object: fi_listen
/// and fi_reject belong to passive endpoints, fi_join to multicast (not
/// offered), and fi_connect, fi_accept, fi_shutdown, fi_getpeer to
/// connected active endpoints.
pub mod cm_enosys {
    use libc::{c_int, c_void, size_t};

    use crate::sys::*;

    pub unsafe extern "C" fn getpeer(_: *mut fid_ep, _: *mut c_void, _: *mut size_t) -> c_int {
        -FI_ENOSYS
    }
    pub unsafe extern "C" fn connect(
        _: *mut fid_ep,
        _: *const c_void,
        _: *const c_void,
        _: size_t,
    ) -> c_int {
        -FI_ENOSYS
    }
    pub unsafe extern "C" fn listen(_: *mut fid_pep) -> c_int {
        -FI_ENOSYS
    }
    pub unsafe extern "C" fn accept(_: *mut fid_ep, _: *const c_void, _: size_t) -> c_int {
        -FI_ENOSYS
    }
    pub unsafe extern "C" fn reject(
        _: *mut fid_pep,
        _: fid_t,
        _: *const c_void,
        _: size_t,
    ) -> c_int {
        -FI_ENOSYS
    }
    pub unsafe extern "C" fn shutdown(_: *mut fid_ep, _: u64) -> c_int {
        -FI_ENOSYS
    }
    pub unsafe extern "C" fn join(
        _: *mut fid_ep,
        _: *const c_void,
        _: u64,
        _: *mut *mut c_void,
        _: *mut c_void,
    ) -> c_int {
        -FI_ENOSYS
    }
}
