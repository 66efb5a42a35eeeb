//! `rdma/fi_cm.h`: `fi_ops_cm` (connection management).

use libc::{c_int, c_void, size_t};

use super::*;

#[repr(C)]
pub struct fi_ops_cm {
    pub size: size_t,
    pub setname:
        Option<unsafe extern "C" fn(fid: fid_t, addr: *mut c_void, addrlen: size_t) -> c_int>,
    pub getname:
        Option<unsafe extern "C" fn(fid: fid_t, addr: *mut c_void, addrlen: *mut size_t) -> c_int>,
    pub getpeer: Option<
        unsafe extern "C" fn(ep: *mut fid_ep, addr: *mut c_void, addrlen: *mut size_t) -> c_int,
    >,
    pub connect: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            addr: *const c_void,
            param: *const c_void,
            paramlen: size_t,
        ) -> c_int,
    >,
    pub listen: Option<unsafe extern "C" fn(pep: *mut fid_pep) -> c_int>,
    pub accept: Option<
        unsafe extern "C" fn(ep: *mut fid_ep, param: *const c_void, paramlen: size_t) -> c_int,
    >,
    pub reject: Option<
        unsafe extern "C" fn(
            pep: *mut fid_pep,
            handle: fid_t,
            param: *const c_void,
            paramlen: size_t,
        ) -> c_int,
    >,
    pub shutdown: Option<unsafe extern "C" fn(ep: *mut fid_ep, flags: u64) -> c_int>,
    pub join: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            addr: *const c_void,
            flags: u64,
            mc: *mut *mut c_void,
            context: *mut c_void,
        ) -> c_int,
    >,
}
