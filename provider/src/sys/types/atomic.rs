//! `rdma/fi_atomic.h`: `fi_ops_atomic`, `struct fi_ioc` (`fabric.h`),
//! `struct fi_msg_atomic`, `struct fi_atomic_attr`.

use libc::{c_int, c_void, size_t, ssize_t};

use super::*;

#[repr(C)]
pub struct fi_ioc {
    pub addr: *mut c_void,
    pub count: size_t,
}

#[repr(C)]
pub struct fi_msg_atomic {
    pub msg_iov: *const fi_ioc,
    pub desc: *mut *mut c_void,
    pub iov_count: size_t,
    pub addr: fi_addr_t,
    pub rma_iov: *const fi_rma_ioc,
    pub rma_iov_count: size_t,
    pub datatype: c_int,
    pub op: c_int,
    pub context: *mut c_void,
    pub data: u64,
}

#[repr(C)]
pub struct fi_atomic_attr {
    pub count: size_t,
    pub size: size_t,
}

/// The slots take `struct fi_ioc` and `struct fi_msg_atomic` pointers as
/// `void *` (the same in the C ABI); the entry points cast them.
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
