//! `rdma/fi_rma.h`: `fi_ops_rma`.

use libc::{c_void, iovec, size_t, ssize_t};

use super::*;

/// RMA is not implemented; the table is mirrored so every slot can point at
/// a function returning -FI_ENOSYS. Arguments beyond `ep` are never read, so
/// the slots use the real C signatures only for the ABI.
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
    pub readmsg: Option<unsafe extern "C" fn(*mut fid_ep, *const c_void, u64) -> ssize_t>,
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
    pub writemsg: Option<unsafe extern "C" fn(*mut fid_ep, *const c_void, u64) -> ssize_t>,
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
