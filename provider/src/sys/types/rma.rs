//! `rdma/fi_rma.h`: `fi_ops_rma`, `struct fi_rma_iov`, `struct fi_rma_ioc`,
//! `struct fi_msg_rma`.

use libc::{c_void, iovec, size_t, ssize_t};

use super::*;

#[repr(C)]
pub struct fi_rma_iov {
    pub addr: u64,
    pub len: size_t,
    pub key: u64,
}

#[repr(C)]
pub struct fi_rma_ioc {
    pub addr: u64,
    pub count: size_t,
    pub key: u64,
}

#[repr(C)]
pub struct fi_msg_rma {
    pub msg_iov: *const iovec,
    pub desc: *mut *mut c_void,
    pub iov_count: size_t,
    pub addr: fi_addr_t,
    pub rma_iov: *const fi_rma_iov,
    pub rma_iov_count: size_t,
    pub context: *mut c_void,
    pub data: u64,
}

#[repr(C)]
pub struct fi_ops_rma {
    pub size: size_t,
    pub read: Option<
        unsafe extern "C" fn(
            *mut fid_ep,
            *mut c_void,
            size_t,
            *mut c_void,
            fi_addr_t,
            u64,
            u64,
            *mut c_void,
        ) -> ssize_t,
    >,
    pub readv: Option<
        unsafe extern "C" fn(
            *mut fid_ep,
            *const iovec,
            *mut *mut c_void,
            size_t,
            fi_addr_t,
            u64,
            u64,
            *mut c_void,
        ) -> ssize_t,
    >,
    pub readmsg: Option<unsafe extern "C" fn(*mut fid_ep, *const fi_msg_rma, u64) -> ssize_t>,
    pub write: Option<
        unsafe extern "C" fn(
            *mut fid_ep,
            *const c_void,
            size_t,
            *mut c_void,
            fi_addr_t,
            u64,
            u64,
            *mut c_void,
        ) -> ssize_t,
    >,
    pub writev: Option<
        unsafe extern "C" fn(
            *mut fid_ep,
            *const iovec,
            *mut *mut c_void,
            size_t,
            fi_addr_t,
            u64,
            u64,
            *mut c_void,
        ) -> ssize_t,
    >,
    pub writemsg: Option<unsafe extern "C" fn(*mut fid_ep, *const fi_msg_rma, u64) -> ssize_t>,
    pub inject: Option<
        unsafe extern "C" fn(*mut fid_ep, *const c_void, size_t, fi_addr_t, u64, u64) -> ssize_t,
    >,
    pub writedata: Option<
        unsafe extern "C" fn(
            *mut fid_ep,
            *const c_void,
            size_t,
            *mut c_void,
            u64,
            fi_addr_t,
            u64,
            u64,
            *mut c_void,
        ) -> ssize_t,
    >,
    pub injectdata: Option<
        unsafe extern "C" fn(
            *mut fid_ep,
            *const c_void,
            size_t,
            u64,
            fi_addr_t,
            u64,
            u64,
        ) -> ssize_t,
    >,
}
