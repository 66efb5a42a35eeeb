//! `#[repr(C)]` mirrors of the libfabric 1.17 structs the provider implements
//! or reads. Field order and types follow `/usr/include/rdma/*.h` exactly;
//! `tests/layout.rs` compiles a C program against those headers and compares
//! every size and offset listed in [`super::layout::RUST_LAYOUT`].
//!
//! Names keep the C spelling on purpose so a reader can grep the headers.

#![allow(non_camel_case_types)]

use libc::{c_char, c_int, c_void, iovec, size_t, ssize_t};

pub type fi_addr_t = u64;
pub type fid_t = *mut fid;

// ---------------------------------------------------------------- fabric.h

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

// ------------------------------------------------------------ fi_prov.h

#[repr(C)]
pub struct fi_provider {
    pub version: u32,
    pub fi_version: u32,
    pub context: fi_context,
    pub name: *const c_char,
    pub getinfo: Option<
        unsafe extern "C" fn(
            version: u32,
            node: *const c_char,
            service: *const c_char,
            flags: u64,
            hints: *const fi_info,
            info: *mut *mut fi_info,
        ) -> c_int,
    >,
    pub fabric: Option<
        unsafe extern "C" fn(
            attr: *mut fi_fabric_attr,
            fabric: *mut *mut fid_fabric,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub cleanup: Option<unsafe extern "C" fn()>,
}

// ------------------------------------------------------------ fi_domain.h

#[repr(C)]
pub struct fi_av_attr {
    pub type_: c_int,
    pub rx_ctx_bits: c_int,
    pub count: size_t,
    pub ep_per_node: size_t,
    pub name: *const c_char,
    pub map_addr: *mut c_void,
    pub flags: u64,
}

#[repr(C)]
pub struct fi_ops_av {
    pub size: size_t,
    pub insert: Option<
        unsafe extern "C" fn(
            av: *mut fid_av,
            addr: *const c_void,
            count: size_t,
            fi_addr: *mut fi_addr_t,
            flags: u64,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub insertsvc: Option<
        unsafe extern "C" fn(
            av: *mut fid_av,
            node: *const c_char,
            service: *const c_char,
            fi_addr: *mut fi_addr_t,
            flags: u64,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub insertsym: Option<
        unsafe extern "C" fn(
            av: *mut fid_av,
            node: *const c_char,
            nodecnt: size_t,
            service: *const c_char,
            svccnt: size_t,
            fi_addr: *mut fi_addr_t,
            flags: u64,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub remove: Option<
        unsafe extern "C" fn(
            av: *mut fid_av,
            fi_addr: *mut fi_addr_t,
            count: size_t,
            flags: u64,
        ) -> c_int,
    >,
    pub lookup: Option<
        unsafe extern "C" fn(
            av: *mut fid_av,
            fi_addr: fi_addr_t,
            addr: *mut c_void,
            addrlen: *mut size_t,
        ) -> c_int,
    >,
    pub straddr: Option<
        unsafe extern "C" fn(
            av: *mut fid_av,
            addr: *const c_void,
            buf: *mut c_char,
            len: *mut size_t,
        ) -> *const c_char,
    >,
    pub av_set: Option<
        unsafe extern "C" fn(
            av: *mut fid_av,
            attr: *mut c_void,
            av_set: *mut *mut c_void,
            context: *mut c_void,
        ) -> c_int,
    >,
}

#[repr(C)]
pub struct fid_av {
    pub fid: fid,
    pub ops: *mut fi_ops_av,
}

#[repr(C)]
pub struct fid_mr {
    pub fid: fid,
    pub mem_desc: *mut c_void,
    pub key: u64,
}

#[repr(C)]
pub struct fi_mr_attr {
    pub mr_iov: *const iovec,
    pub iov_count: size_t,
    pub access: u64,
    pub offset: u64,
    pub requested_key: u64,
    pub context: *mut c_void,
    pub auth_key_size: size_t,
    pub auth_key: *mut u8,
    pub iface: c_int,
    pub device: u64,
}

#[repr(C)]
pub struct fi_ops_domain {
    pub size: size_t,
    pub av_open: Option<
        unsafe extern "C" fn(
            domain: *mut fid_domain,
            attr: *mut fi_av_attr,
            av: *mut *mut fid_av,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub cq_open: Option<
        unsafe extern "C" fn(
            domain: *mut fid_domain,
            attr: *mut fi_cq_attr,
            cq: *mut *mut fid_cq,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub endpoint: Option<
        unsafe extern "C" fn(
            domain: *mut fid_domain,
            info: *mut fi_info,
            ep: *mut *mut fid_ep,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub scalable_ep: Option<
        unsafe extern "C" fn(
            domain: *mut fid_domain,
            info: *mut fi_info,
            sep: *mut *mut fid_ep,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub cntr_open: Option<
        unsafe extern "C" fn(
            domain: *mut fid_domain,
            attr: *mut fi_cntr_attr,
            cntr: *mut *mut fid_cntr,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub poll_open: Option<
        unsafe extern "C" fn(
            domain: *mut fid_domain,
            attr: *mut fi_poll_attr,
            pollset: *mut *mut fid_poll,
        ) -> c_int,
    >,
    pub stx_ctx: Option<
        unsafe extern "C" fn(
            domain: *mut fid_domain,
            attr: *mut fi_tx_attr,
            stx: *mut *mut c_void,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub srx_ctx: Option<
        unsafe extern "C" fn(
            domain: *mut fid_domain,
            attr: *mut fi_rx_attr,
            rx_ep: *mut *mut fid_ep,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub query_atomic: Option<
        unsafe extern "C" fn(
            domain: *mut fid_domain,
            datatype: c_int,
            op: c_int,
            attr: *mut c_void,
            flags: u64,
        ) -> c_int,
    >,
    pub query_collective: Option<
        unsafe extern "C" fn(
            domain: *mut fid_domain,
            coll: c_int,
            attr: *mut c_void,
            flags: u64,
        ) -> c_int,
    >,
    pub endpoint2: Option<
        unsafe extern "C" fn(
            domain: *mut fid_domain,
            info: *mut fi_info,
            ep: *mut *mut fid_ep,
            flags: u64,
            context: *mut c_void,
        ) -> c_int,
    >,
}

#[repr(C)]
pub struct fi_ops_mr {
    pub size: size_t,
    pub reg: Option<
        unsafe extern "C" fn(
            fid: *mut fid,
            buf: *const c_void,
            len: size_t,
            access: u64,
            offset: u64,
            requested_key: u64,
            flags: u64,
            mr: *mut *mut fid_mr,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub regv: Option<
        unsafe extern "C" fn(
            fid: *mut fid,
            iov: *const iovec,
            count: size_t,
            access: u64,
            offset: u64,
            requested_key: u64,
            flags: u64,
            mr: *mut *mut fid_mr,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub regattr: Option<
        unsafe extern "C" fn(
            fid: *mut fid,
            attr: *const fi_mr_attr,
            flags: u64,
            mr: *mut *mut fid_mr,
        ) -> c_int,
    >,
}

#[repr(C)]
pub struct fid_domain {
    pub fid: fid,
    pub ops: *mut fi_ops_domain,
    pub mr: *mut fi_ops_mr,
}

// ------------------------------------------------------------ fi_endpoint.h

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
    pub collective: *mut c_void,
}

#[repr(C)]
pub struct fid_pep {
    pub fid: fid,
    pub ops: *mut fi_ops_ep,
    pub cm: *mut fi_ops_cm,
}

// ------------------------------------------------------------ fi_cm.h

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

// ------------------------------------------------------------ fi_tagged.h

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

// ------------------------------------------------------------ fi_rma.h

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

// ------------------------------------------------------------ fi_atomic.h

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

// ------------------------------------------------------------ fi_eq.h

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
