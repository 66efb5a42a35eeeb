//! `rdma/fi_tagged.h`: `fi_msg_tagged` and `fi_ops_tagged`.

use libc::{c_void, iovec, size_t, ssize_t};

use super::*;

#[repr(C)]
pub struct fi_msg_tagged {
    pub msg_iov: *const iovec,
    pub desc: *mut *mut c_void,
    pub iov_count: size_t,
    pub addr: fi_addr_t,
    pub tag: u64,
    pub ignore: u64,
    pub context: *mut c_void,
    pub data: u64,
}

#[repr(C)]
pub struct fi_ops_tagged {
    pub size: size_t,
    pub recv: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *mut c_void,
            len: size_t,
            desc: *mut c_void,
            src_addr: fi_addr_t,
            tag: u64,
            ignore: u64,
            context: *mut c_void,
        ) -> ssize_t,
    >,
    pub recvv: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            iov: *const iovec,
            desc: *mut *mut c_void,
            count: size_t,
            src_addr: fi_addr_t,
            tag: u64,
            ignore: u64,
            context: *mut c_void,
        ) -> ssize_t,
    >,
    pub recvmsg: Option<
        unsafe extern "C" fn(ep: *mut fid_ep, msg: *const fi_msg_tagged, flags: u64) -> ssize_t,
    >,
    pub send: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            len: size_t,
            desc: *mut c_void,
            dest_addr: fi_addr_t,
            tag: u64,
            context: *mut c_void,
        ) -> ssize_t,
    >,
    pub sendv: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            iov: *const iovec,
            desc: *mut *mut c_void,
            count: size_t,
            dest_addr: fi_addr_t,
            tag: u64,
            context: *mut c_void,
        ) -> ssize_t,
    >,
    pub sendmsg: Option<
        unsafe extern "C" fn(ep: *mut fid_ep, msg: *const fi_msg_tagged, flags: u64) -> ssize_t,
    >,
    pub inject: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            len: size_t,
            dest_addr: fi_addr_t,
            tag: u64,
        ) -> ssize_t,
    >,
    pub senddata: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            len: size_t,
            desc: *mut c_void,
            data: u64,
            dest_addr: fi_addr_t,
            tag: u64,
            context: *mut c_void,
        ) -> ssize_t,
    >,
    pub injectdata: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            len: size_t,
            data: u64,
            dest_addr: fi_addr_t,
            tag: u64,
        ) -> ssize_t,
    >,
}
