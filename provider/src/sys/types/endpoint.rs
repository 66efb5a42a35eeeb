//! `rdma/fi_endpoint.h`: the endpoint object, `fi_ops_ep`, `fi_msg` and `fi_ops_msg`.

use libc::{c_int, c_void, iovec, size_t, ssize_t};

use super::*;

#[repr(C)]
pub struct fi_msg {
    pub msg_iov: *const iovec,
    pub desc: *mut *mut c_void,
    pub iov_count: size_t,
    pub addr: fi_addr_t,
    pub context: *mut c_void,
    pub data: u64,
}

#[repr(C)]
pub struct fi_ops_ep {
    pub size: size_t,
    pub cancel: Option<unsafe extern "C" fn(fid: fid_t, context: *mut c_void) -> ssize_t>,
    pub getopt: Option<
        unsafe extern "C" fn(
            fid: fid_t,
            level: c_int,
            optname: c_int,
            optval: *mut c_void,
            optlen: *mut size_t,
        ) -> c_int,
    >,
    pub setopt: Option<
        unsafe extern "C" fn(
            fid: fid_t,
            level: c_int,
            optname: c_int,
            optval: *const c_void,
            optlen: size_t,
        ) -> c_int,
    >,
    pub tx_ctx: Option<
        unsafe extern "C" fn(
            sep: *mut fid_ep,
            index: c_int,
            attr: *mut fi_tx_attr,
            tx_ep: *mut *mut fid_ep,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub rx_ctx: Option<
        unsafe extern "C" fn(
            sep: *mut fid_ep,
            index: c_int,
            attr: *mut fi_rx_attr,
            rx_ep: *mut *mut fid_ep,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub rx_size_left: Option<unsafe extern "C" fn(ep: *mut fid_ep) -> ssize_t>,
    pub tx_size_left: Option<unsafe extern "C" fn(ep: *mut fid_ep) -> ssize_t>,
}

#[repr(C)]
pub struct fi_ops_msg {
    pub size: size_t,
    pub recv: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *mut c_void,
            len: size_t,
            desc: *mut c_void,
            src_addr: fi_addr_t,
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
            context: *mut c_void,
        ) -> ssize_t,
    >,
    pub recvmsg:
        Option<unsafe extern "C" fn(ep: *mut fid_ep, msg: *const fi_msg, flags: u64) -> ssize_t>,
    pub send: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            len: size_t,
            desc: *mut c_void,
            dest_addr: fi_addr_t,
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
            context: *mut c_void,
        ) -> ssize_t,
    >,
    pub sendmsg:
        Option<unsafe extern "C" fn(ep: *mut fid_ep, msg: *const fi_msg, flags: u64) -> ssize_t>,
    pub inject: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            len: size_t,
            dest_addr: fi_addr_t,
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
        ) -> ssize_t,
    >,
}

#[repr(C)]
pub struct fid_ep {
    pub fid: fid,
    pub ops: *mut fi_ops_ep,
    pub cm: *mut fi_ops_cm,
    pub msg: *mut fi_ops_msg,
    pub rma: *mut fi_ops_rma,
    pub tagged: *mut fi_ops_tagged,
    pub atomic: *mut fi_ops_atomic,
    pub collective: *mut fi_ops_collective,
}

#[repr(C)]
pub struct fid_pep {
    pub fid: fid,
    pub ops: *mut fi_ops_ep,
    pub cm: *mut fi_ops_cm,
}
