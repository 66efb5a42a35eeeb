//! `rdma/fi_eq.h`: wait sets, poll sets, event queues, completion queues and counters.

use libc::{c_char, c_int, c_void, size_t, ssize_t};

use super::*;

#[repr(C)]
pub struct fi_wait_attr {
    pub wait_obj: c_int,
    pub flags: u64,
}

#[repr(C)]
pub struct fi_ops_wait {
    pub size: size_t,
    pub wait: Option<unsafe extern "C" fn(waitset: *mut fid_wait, timeout: c_int) -> c_int>,
}

#[repr(C)]
pub struct fid_wait {
    pub fid: fid,
    pub ops: *mut fi_ops_wait,
}

#[repr(C)]
pub struct fi_poll_attr {
    pub flags: u64,
}

#[repr(C)]
pub struct fi_ops_poll {
    pub size: size_t,
    pub poll: Option<
        unsafe extern "C" fn(
            pollset: *mut fid_poll,
            context: *mut *mut c_void,
            count: c_int,
        ) -> c_int,
    >,
    pub poll_add: Option<
        unsafe extern "C" fn(pollset: *mut fid_poll, event_fid: *mut fid, flags: u64) -> c_int,
    >,
    pub poll_del: Option<
        unsafe extern "C" fn(pollset: *mut fid_poll, event_fid: *mut fid, flags: u64) -> c_int,
    >,
}

#[repr(C)]
pub struct fid_poll {
    pub fid: fid,
    pub ops: *mut fi_ops_poll,
}

#[repr(C)]
pub struct fi_eq_attr {
    pub size: size_t,
    pub flags: u64,
    pub wait_obj: c_int,
    pub signaling_vector: c_int,
    pub wait_set: *mut fid_wait,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_eq_entry {
    pub fid: fid_t,
    pub context: *mut c_void,
    pub data: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_eq_err_entry {
    pub fid: fid_t,
    pub context: *mut c_void,
    pub data: u64,
    pub err: c_int,
    pub prov_errno: c_int,
    pub err_data: *mut c_void,
    pub err_data_size: size_t,
}

#[repr(C)]
pub struct fi_eq_cm_entry {
    pub fid: fid_t,
    pub info: *mut fi_info,
    // followed by a flexible `uint8_t data[]`
}

#[repr(C)]
pub struct fi_ops_eq {
    pub size: size_t,
    pub read: Option<
        unsafe extern "C" fn(
            eq: *mut fid_eq,
            event: *mut u32,
            buf: *mut c_void,
            len: size_t,
            flags: u64,
        ) -> ssize_t,
    >,
    pub readerr: Option<
        unsafe extern "C" fn(eq: *mut fid_eq, buf: *mut fi_eq_err_entry, flags: u64) -> ssize_t,
    >,
    pub write: Option<
        unsafe extern "C" fn(
            eq: *mut fid_eq,
            event: u32,
            buf: *const c_void,
            len: size_t,
            flags: u64,
        ) -> ssize_t,
    >,
    pub sread: Option<
        unsafe extern "C" fn(
            eq: *mut fid_eq,
            event: *mut u32,
            buf: *mut c_void,
            len: size_t,
            timeout: c_int,
            flags: u64,
        ) -> ssize_t,
    >,
    pub strerror: Option<
        unsafe extern "C" fn(
            eq: *mut fid_eq,
            prov_errno: c_int,
            err_data: *const c_void,
            buf: *mut c_char,
            len: size_t,
        ) -> *const c_char,
    >,
}

#[repr(C)]
pub struct fid_eq {
    pub fid: fid,
    pub ops: *mut fi_ops_eq,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_cq_entry {
    pub op_context: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_cq_msg_entry {
    pub op_context: *mut c_void,
    pub flags: u64,
    pub len: size_t,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_cq_data_entry {
    pub op_context: *mut c_void,
    pub flags: u64,
    pub len: size_t,
    pub buf: *mut c_void,
    pub data: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_cq_tagged_entry {
    pub op_context: *mut c_void,
    pub flags: u64,
    pub len: size_t,
    pub buf: *mut c_void,
    pub data: u64,
    pub tag: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_cq_err_entry {
    pub op_context: *mut c_void,
    pub flags: u64,
    pub len: size_t,
    pub buf: *mut c_void,
    pub data: u64,
    pub tag: u64,
    pub olen: size_t,
    pub err: c_int,
    pub prov_errno: c_int,
    pub err_data: *mut c_void,
    pub err_data_size: size_t,
}

#[repr(C)]
pub struct fi_cq_attr {
    pub size: size_t,
    pub flags: u64,
    pub format: c_int,
    pub wait_obj: c_int,
    pub signaling_vector: c_int,
    pub wait_cond: c_int,
    pub wait_set: *mut fid_wait,
}

#[repr(C)]
pub struct fi_ops_cq {
    pub size: size_t,
    pub read:
        Option<unsafe extern "C" fn(cq: *mut fid_cq, buf: *mut c_void, count: size_t) -> ssize_t>,
    pub readfrom: Option<
        unsafe extern "C" fn(
            cq: *mut fid_cq,
            buf: *mut c_void,
            count: size_t,
            src_addr: *mut fi_addr_t,
        ) -> ssize_t,
    >,
    pub readerr: Option<
        unsafe extern "C" fn(cq: *mut fid_cq, buf: *mut fi_cq_err_entry, flags: u64) -> ssize_t,
    >,
    pub sread: Option<
        unsafe extern "C" fn(
            cq: *mut fid_cq,
            buf: *mut c_void,
            count: size_t,
            cond: *const c_void,
            timeout: c_int,
        ) -> ssize_t,
    >,
    pub sreadfrom: Option<
        unsafe extern "C" fn(
            cq: *mut fid_cq,
            buf: *mut c_void,
            count: size_t,
            src_addr: *mut fi_addr_t,
            cond: *const c_void,
            timeout: c_int,
        ) -> ssize_t,
    >,
    pub signal: Option<unsafe extern "C" fn(cq: *mut fid_cq) -> c_int>,
    pub strerror: Option<
        unsafe extern "C" fn(
            cq: *mut fid_cq,
            prov_errno: c_int,
            err_data: *const c_void,
            buf: *mut c_char,
            len: size_t,
        ) -> *const c_char,
    >,
}

#[repr(C)]
pub struct fid_cq {
    pub fid: fid,
    pub ops: *mut fi_ops_cq,
}

#[repr(C)]
pub struct fi_cntr_attr {
    pub events: c_int,
    pub wait_obj: c_int,
    pub wait_set: *mut fid_wait,
    pub flags: u64,
}

#[repr(C)]
pub struct fi_ops_cntr {
    pub size: size_t,
    pub read: Option<unsafe extern "C" fn(cntr: *mut fid_cntr) -> u64>,
    pub readerr: Option<unsafe extern "C" fn(cntr: *mut fid_cntr) -> u64>,
    pub add: Option<unsafe extern "C" fn(cntr: *mut fid_cntr, value: u64) -> c_int>,
    pub set: Option<unsafe extern "C" fn(cntr: *mut fid_cntr, value: u64) -> c_int>,
    pub wait:
        Option<unsafe extern "C" fn(cntr: *mut fid_cntr, threshold: u64, timeout: c_int) -> c_int>,
    pub adderr: Option<unsafe extern "C" fn(cntr: *mut fid_cntr, value: u64) -> c_int>,
    pub seterr: Option<unsafe extern "C" fn(cntr: *mut fid_cntr, value: u64) -> c_int>,
}

#[repr(C)]
pub struct fid_cntr {
    pub fid: fid,
    pub ops: *mut fi_ops_cntr,
}
