//! `rdma/fi_atomic.h`: `fi_ops_atomic`.

use libc::{c_int, c_void, size_t, ssize_t};

use super::*;

/// Atomics are not implemented (see [`fi_ops_rma`]). Slots are typed as
/// "any function of the endpoint" with the real arity so the C caller's
/// arguments land in registers the callee ignores.
#[repr(C)]
pub struct fi_ops_atomic {
    pub size: size_t,
    pub write: Option<
        unsafe extern "C" fn(
            *mut fid_ep,
            *const c_void,
            size_t,
            *mut c_void,
            fi_addr_t,
            u64,
            u64,
            c_int,
            c_int,
            *mut c_void,
        ) -> ssize_t,
    >,
    pub writev: Option<
        unsafe extern "C" fn(
            *mut fid_ep,
            *const c_void,
            *mut *mut c_void,
            size_t,
            fi_addr_t,
            u64,
            u64,
            c_int,
            c_int,
            *mut c_void,
        ) -> ssize_t,
    >,
    pub writemsg: Option<unsafe extern "C" fn(*mut fid_ep, *const c_void, u64) -> ssize_t>,
    pub inject: Option<
        unsafe extern "C" fn(
            *mut fid_ep,
            *const c_void,
            size_t,
            fi_addr_t,
            u64,
            u64,
            c_int,
            c_int,
        ) -> ssize_t,
    >,
    pub readwrite: Option<
        unsafe extern "C" fn(
            *mut fid_ep,
            *const c_void,
            size_t,
            *mut c_void,
            *mut c_void,
            *mut c_void,
            fi_addr_t,
            u64,
            u64,
            c_int,
            c_int,
            *mut c_void,
        ) -> ssize_t,
    >,
    pub readwritev: Option<
        unsafe extern "C" fn(
            *mut fid_ep,
            *const c_void,
            *mut *mut c_void,
            size_t,
            *mut c_void,
            *mut *mut c_void,
            size_t,
            fi_addr_t,
            u64,
            u64,
            c_int,
            c_int,
            *mut c_void,
        ) -> ssize_t,
    >,
    pub readwritemsg: Option<
        unsafe extern "C" fn(
            *mut fid_ep,
            *const c_void,
            *mut c_void,
            *mut *mut c_void,
            size_t,
            u64,
        ) -> ssize_t,
    >,
    pub compwrite: Option<
        unsafe extern "C" fn(
            *mut fid_ep,
            *const c_void,
            size_t,
            *mut c_void,
            *const c_void,
            *mut c_void,
            *mut c_void,
            *mut c_void,
            fi_addr_t,
            u64,
            u64,
            c_int,
            c_int,
            *mut c_void,
        ) -> ssize_t,
    >,
    pub compwritev: Option<
        unsafe extern "C" fn(
            *mut fid_ep,
            *const c_void,
            *mut *mut c_void,
            size_t,
            *const c_void,
            *mut *mut c_void,
            size_t,
            *mut c_void,
            *mut *mut c_void,
            size_t,
            fi_addr_t,
            u64,
            u64,
            c_int,
            c_int,
            *mut c_void,
        ) -> ssize_t,
    >,
    pub compwritemsg: Option<
        unsafe extern "C" fn(
            *mut fid_ep,
            *const c_void,
            *const c_void,
            *mut *mut c_void,
            size_t,
            *mut c_void,
            *mut *mut c_void,
            size_t,
            u64,
        ) -> ssize_t,
    >,
    pub writevalid: Option<unsafe extern "C" fn(*mut fid_ep, c_int, c_int, *mut size_t) -> c_int>,
    pub readwritevalid:
        Option<unsafe extern "C" fn(*mut fid_ep, c_int, c_int, *mut size_t) -> c_int>,
    pub compwritevalid:
        Option<unsafe extern "C" fn(*mut fid_ep, c_int, c_int, *mut size_t) -> c_int>,
}
