//! `rdma/fabric.h`: `struct fid`, `fi_ops`, `fi_info` and its attributes, the fabric object.

use libc::{c_char, c_int, c_void, size_t};

use super::*;

pub type fi_addr_t = u64;
pub type fid_t = *mut fid;

#[repr(C)]
pub struct fi_ops {
    pub size: size_t,
    pub close: Option<unsafe extern "C" fn(fid: *mut fid) -> c_int>,
    pub bind: Option<unsafe extern "C" fn(fid: *mut fid, bfid: *mut fid, flags: u64) -> c_int>,
    pub control:
        Option<unsafe extern "C" fn(fid: *mut fid, command: c_int, arg: *mut c_void) -> c_int>,
    pub ops_open: Option<
        unsafe extern "C" fn(
            fid: *mut fid,
            name: *const c_char,
            flags: u64,
            ops: *mut *mut c_void,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub tostr:
        Option<unsafe extern "C" fn(fid: *const fid, buf: *mut c_char, len: size_t) -> c_int>,
    pub ops_set: Option<
        unsafe extern "C" fn(
            fid: *mut fid,
            name: *const c_char,
            flags: u64,
            ops: *mut c_void,
            context: *mut c_void,
        ) -> c_int,
    >,
}

/// Every fabric interface descriptor starts with this (fabric.h).
#[repr(C)]
pub struct fid {
    pub fclass: size_t,
    pub context: *mut c_void,
    pub ops: *mut fi_ops,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_tx_attr {
    pub caps: u64,
    pub mode: u64,
    pub op_flags: u64,
    pub msg_order: u64,
    pub comp_order: u64,
    pub inject_size: size_t,
    pub size: size_t,
    pub iov_limit: size_t,
    pub rma_iov_limit: size_t,
    pub tclass: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_rx_attr {
    pub caps: u64,
    pub mode: u64,
    pub op_flags: u64,
    pub msg_order: u64,
    pub comp_order: u64,
    pub total_buffered_recv: size_t,
    pub size: size_t,
    pub iov_limit: size_t,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_ep_attr {
    pub type_: c_int,
    pub protocol: u32,
    pub protocol_version: u32,
    pub max_msg_size: size_t,
    pub msg_prefix_size: size_t,
    pub max_order_raw_size: size_t,
    pub max_order_war_size: size_t,
    pub max_order_waw_size: size_t,
    pub mem_tag_format: u64,
    pub tx_ctx_cnt: size_t,
    pub rx_ctx_cnt: size_t,
    pub auth_key_size: size_t,
    pub auth_key: *mut u8,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_domain_attr {
    pub domain: *mut fid_domain,
    pub name: *mut c_char,
    pub threading: c_int,
    pub control_progress: c_int,
    pub data_progress: c_int,
    pub resource_mgmt: c_int,
    pub av_type: c_int,
    pub mr_mode: c_int,
    pub mr_key_size: size_t,
    pub cq_data_size: size_t,
    pub cq_cnt: size_t,
    pub ep_cnt: size_t,
    pub tx_ctx_cnt: size_t,
    pub rx_ctx_cnt: size_t,
    pub max_ep_tx_ctx: size_t,
    pub max_ep_rx_ctx: size_t,
    pub max_ep_stx_ctx: size_t,
    pub max_ep_srx_ctx: size_t,
    pub cntr_cnt: size_t,
    pub mr_iov_limit: size_t,
    pub caps: u64,
    pub mode: u64,
    pub auth_key: *mut u8,
    pub auth_key_size: size_t,
    pub max_err_data: size_t,
    pub mr_cnt: size_t,
    pub tclass: u32,
}

/// `struct fi_domain_attr` as libfabric 2.0 (ABI 1.8) lays it out: the
/// 1.17 fields, then `max_ep_auth_key` (ABI 1.7, libfabric 1.20) and
/// `max_group_id` (ABI 1.8, libfabric 2.0). Only a core of that ABI or newer
/// allocates the tail: it may be read or written only when the application
/// asked for version 1.20 (2.0) or later, which that core alone accepts
/// (fi_getinfo(3) refuses versions newer than the library). libfabric 2.5
/// appends `max_cntr_value` and `max_err_cntr_value`, which we neither read
/// nor write (see getinfo).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_domain_attr_2 {
    pub v1: fi_domain_attr,
    pub max_ep_auth_key: size_t,
    pub max_group_id: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_fabric_attr {
    pub fabric: *mut fid_fabric,
    pub name: *mut c_char,
    pub prov_name: *mut c_char,
    pub prov_version: u32,
    pub api_version: u32,
}

#[repr(C)]
pub struct fi_info {
    pub next: *mut fi_info,
    pub caps: u64,
    pub mode: u64,
    pub addr_format: u32,
    pub src_addrlen: size_t,
    pub dest_addrlen: size_t,
    pub src_addr: *mut c_void,
    pub dest_addr: *mut c_void,
    pub handle: fid_t,
    pub tx_attr: *mut fi_tx_attr,
    pub rx_attr: *mut fi_rx_attr,
    pub ep_attr: *mut fi_ep_attr,
    pub domain_attr: *mut fi_domain_attr,
    pub fabric_attr: *mut fi_fabric_attr,
    pub nic: *mut c_void,
}

#[repr(C)]
pub struct fi_context {
    pub internal: [*mut c_void; 4],
}

#[repr(C)]
pub struct fi_context2 {
    pub internal: [*mut c_void; 8],
}

#[repr(C)]
pub struct fi_ops_fabric {
    pub size: size_t,
    pub domain: Option<
        unsafe extern "C" fn(
            fabric: *mut fid_fabric,
            info: *mut fi_info,
            dom: *mut *mut fid_domain,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub passive_ep: Option<
        unsafe extern "C" fn(
            fabric: *mut fid_fabric,
            info: *mut fi_info,
            pep: *mut *mut fid_pep,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub eq_open: Option<
        unsafe extern "C" fn(
            fabric: *mut fid_fabric,
            attr: *mut fi_eq_attr,
            eq: *mut *mut fid_eq,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub wait_open: Option<
        unsafe extern "C" fn(
            fabric: *mut fid_fabric,
            attr: *mut fi_wait_attr,
            waitset: *mut *mut fid_wait,
        ) -> c_int,
    >,
    pub trywait: Option<
        unsafe extern "C" fn(fabric: *mut fid_fabric, fids: *mut *mut fid, count: c_int) -> c_int,
    >,
    pub domain2: Option<
        unsafe extern "C" fn(
            fabric: *mut fid_fabric,
            info: *mut fi_info,
            dom: *mut *mut fid_domain,
            flags: u64,
            context: *mut c_void,
        ) -> c_int,
    >,
}

#[repr(C)]
pub struct fid_fabric {
    pub fid: fid,
    pub ops: *mut fi_ops_fabric,
    pub api_version: u32,
}
