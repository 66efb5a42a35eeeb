//! `getinfo`: describe what the provider offers on this host, honouring the
//! application's hints (fi_getinfo(3)).
//!
//! One entry per usable interface (domain name = interface name) and
//! endpoint type (FI_EP_RDM first, then FI_EP_DGRAM). Entries are built in
//! Rust-owned memory and copied with `fi_dupinfo`, so the core can free them
//! with `fi_freeinfo`. `fabric_attr->prov_name` stays NULL: the core fills
//! it in (a non-NULL value would be treated as a layered provider's base).

use std::ffi::{CStr, CString};
use std::net::SocketAddr;
use std::ptr::null_mut;

use libc::{c_char, c_int, c_void};

use crate::abi::{Errno, Result, guard_int};
use crate::addr::{self, AddrFormat, XdpAddr};
use crate::ifaces::{self, Iface};
use crate::params::Config;
use crate::sys::*;
use crate::{xdp_info, xdp_warn};

/// Fabric name: every Ethernet segment reachable over AF_XDP is one fabric
/// from libfabric's point of view (domains are interfaces).
pub const FABRIC_NAME: &str = "xdp";
/// Provider version reported in `fabric_attr->prov_version`.
pub const PROVIDER_VERSION: u32 = fi_version(0, 1);
/// The libfabric API version we are built against. The 1.17 core refuses
/// providers whose fi_version is newer than itself (ofi_register_provider).
pub const API_VERSION: u32 = fi_version(1, 17);

/// Capabilities we implement, per endpoint type. Secondary capabilities in
/// [`DEFAULT_SECONDARY`] are always returned.
pub const RDM_CAPS: u64 = FI_MSG
    | FI_TAGGED
    | FI_SEND
    | FI_RECV
    | FI_SOURCE
    | FI_DIRECTED_RECV
    | FI_MULTI_RECV
    | FI_LOCAL_COMM
    | FI_REMOTE_COMM;
pub const DGRAM_CAPS: u64 = FI_MSG | FI_SEND | FI_RECV | FI_SOURCE | FI_LOCAL_COMM | FI_REMOTE_COMM;
const TX_CAPS: u64 = FI_MSG | FI_TAGGED | FI_SEND;
const RX_CAPS: u64 = FI_MSG | FI_TAGGED | FI_RECV | FI_SOURCE | FI_DIRECTED_RECV | FI_MULTI_RECV;
const DOMAIN_CAPS: u64 = FI_LOCAL_COMM | FI_REMOTE_COMM;
const DEFAULT_SECONDARY: u64 = FI_LOCAL_COMM | FI_REMOTE_COMM;

/// Operation flags an endpoint accepts in tx/rx `op_flags`.
pub const TX_OP_FLAGS: u64 = FI_COMPLETION
    | FI_INJECT
    | FI_INJECT_COMPLETE
    | FI_TRANSMIT_COMPLETE
    | FI_DELIVERY_COMPLETE
    | FI_REMOTE_CQ_DATA;
pub const RX_OP_FLAGS: u64 = FI_COMPLETION | FI_MULTI_RECV;

/// Bytes of each UDP payload reserved for our protocol header (the
/// reliability engine's header must fit; DGRAM sends a small one too).
pub const PROTO_HEADER_RESERVE: usize = 64;
/// Largest RDM message (segmented by the engine).
pub const RDM_MAX_MSG: usize = 1 << 30;
/// Queue depths advertised in tx/rx attributes.
pub const TX_SIZE: usize = 1024;
pub const RX_SIZE: usize = 1024;
pub const IOV_LIMIT: usize = 4;
/// Tag format: all 64 bits usable (FI_TAG_GENERIC, fi_endpoint(3)).
pub const MEM_TAG_FORMAT: u64 = 0xAAAA_AAAA_AAAA_AAAA;
/// Provider-specific protocol id of the RDM wire protocol.
pub const PROTO_XDP_RDM: u32 = FI_PROV_SPECIFIC | 0x5844;
pub const PROTO_VERSION: u32 = 1;
/// Bytes of err_data a CQ error entry may carry.
pub const MAX_ERR_DATA: usize = 64;

/// Largest payload one datagram can carry on `iface` with `cfg`'s frames:
/// bounded by the MTU and by a UMEM frame (no multi-buffer), as the link
/// computes it, less our protocol's header reserve.
pub fn max_datagram_payload(iface: &Iface, v6: bool, cfg: &Config) -> usize {
    let family: std::net::IpAddr = if v6 {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    };
    let clamp = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    ofi_xdp_link::max_payload(clamp(cfg.frame_size), clamp(iface.mtu), &family)
        .saturating_sub(PROTO_HEADER_RESERVE)
}

/// Whether a hints `prov_name` asks for us (utility providers' layered
/// names such as "xdp;^ofi_rxd" are refused earlier: [`OFI_CORE_PROV_ONLY`]).
fn names_us(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b"xdp")
}

/// libfabric's internal getinfo flag (`include/ofi.h`): a utility provider
/// (ofi_rxd, ofi_rxm) asks core providers for endpoints to layer on. We do
/// not offer any, as libfabric 1.18+ keeps utility providers off efa, psm3,
/// cxi, shm and ucx: our RDM endpoints are native, and "xdp;ofi_rxd" (rxd
/// over our DGRAM) would be listed before them, so applications that take
/// the first entry matching "xdp" (Open MPI's mtl_ofi_provider_include) would
/// get the slower emulation.
const OFI_CORE_PROV_ONLY: u64 = 1 << 59;

/// What a caller asked for through node/service/flags and hints addresses.
#[derive(Default, Debug)]
struct Wanted {
    src: Option<SocketAddr>,
    dest: Option<SocketAddr>,
}

fn opt_cstr<'a>(p: *const c_char) -> Result<Option<&'a str>> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: the core passes NUL-terminated strings (or NULL).
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map(Some)
        .map_err(|_| Errno::NODATA)
}

/// # Safety
/// `p` must be NULL or valid for `len` bytes.
unsafe fn addr_from_raw(p: *const c_void, len: usize) -> Option<XdpAddr> {
    if p.is_null() || len == 0 {
        return None;
    }
    // SAFETY: per caller.
    let b = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) };
    addr::decode_any(b).map(|(a, _)| a)
}

/// Work out source/destination from node, service, FI_SOURCE and hints, the
/// way the udp/tcp providers do: with FI_SOURCE (or without a node) node and
/// service name the local address, otherwise the peer.
fn wanted(
    node: Option<&str>,
    service: Option<&str>,
    flags: u64,
    hints: Option<&fi_info>,
) -> Result<Wanted> {
    let mut w = Wanted::default();
    if let Some(h) = hints {
        // SAFETY: hints addresses are valid for their stated lengths.
        unsafe {
            if !h.src_addr.is_null() {
                w.src = Some(
                    addr_from_raw(h.src_addr, h.src_addrlen)
                        .ok_or(Errno::NODATA)?
                        .socket_addr(),
                );
            }
            if !h.dest_addr.is_null() {
                w.dest = Some(
                    addr_from_raw(h.dest_addr, h.dest_addrlen)
                        .ok_or(Errno::NODATA)?
                        .socket_addr(),
                );
            }
        }
    }
    if node.is_some() || service.is_some() {
        let numeric = flags & FI_NUMERICHOST != 0;
        let sa = addr::resolve(node, service, numeric).ok_or_else(|| {
            xdp_info!(
                FI_LOG_CORE,
                "cannot resolve node {node:?} service {service:?}"
            );
            Errno::NODATA
        })?;
        if flags & FI_SOURCE != 0 || node.is_none() {
            w.src = Some(sa);
        } else {
            w.dest = Some(sa);
        }
    }
    Ok(w)
}

/// Everything that differs between two entries.
struct Entry<'a> {
    iface: &'a Iface,
    ep_type: c_int,
    format: AddrFormat,
    src: SocketAddr,
    dest: Option<SocketAddr>,
}

/// Rust-owned storage for one fi_info before `fi_dupinfo` copies it.
struct Owned {
    info: fi_info,
    tx: fi_tx_attr,
    rx: fi_rx_attr,
    ep: fi_ep_attr,
    dom: fi_domain_attr,
    fab: fi_fabric_attr,
    dom_name: CString,
    fab_name: CString,
    src: Vec<u8>,
    dest: Vec<u8>,
}

fn zeroed<T>() -> T {
    // SAFETY: only used for the plain-data C attribute structs above, for
    // which all-zero (NULL pointers, 0 values) is valid.
    unsafe { std::mem::zeroed() }
}

fn base(e: &Entry<'_>, version: u32, cfg: &Config) -> Box<Owned> {
    let rdm = e.ep_type == FI_EP_RDM;
    let caps = if rdm { RDM_CAPS } else { DGRAM_CAPS };
    let payload = max_datagram_payload(e.iface, e.src.is_ipv6(), cfg);
    let mut o = Box::new(Owned {
        info: zeroed(),
        tx: zeroed(),
        rx: zeroed(),
        ep: zeroed(),
        dom: zeroed(),
        fab: zeroed(),
        dom_name: crate::params::cstring(&e.iface.name),
        fab_name: crate::params::cstring(FABRIC_NAME),
        src: Vec::new(),
        dest: Vec::new(),
    });
    o.info.caps = caps;
    o.info.mode = 0;
    o.info.addr_format = e.format.code();

    o.tx.caps = caps & TX_CAPS;
    o.tx.msg_order = if rdm { FI_ORDER_SAS } else { FI_ORDER_NONE };
    o.tx.comp_order = FI_ORDER_NONE;
    o.tx.inject_size = payload;
    o.tx.size = TX_SIZE;
    o.tx.iov_limit = IOV_LIMIT;
    o.tx.rma_iov_limit = 0;

    o.rx.caps = caps & RX_CAPS;
    o.rx.msg_order = o.tx.msg_order;
    o.rx.comp_order = FI_ORDER_NONE;
    o.rx.size = RX_SIZE;
    o.rx.iov_limit = IOV_LIMIT;

    o.ep.type_ = e.ep_type;
    o.ep.protocol = if rdm { PROTO_XDP_RDM } else { FI_PROTO_UDP };
    o.ep.protocol_version = PROTO_VERSION;
    o.ep.max_msg_size = if rdm { RDM_MAX_MSG } else { payload };
    o.ep.mem_tag_format = if rdm { MEM_TAG_FORMAT } else { 0 };
    o.ep.tx_ctx_cnt = 1;
    o.ep.rx_ctx_cnt = 1;

    o.dom.threading = FI_THREAD_SAFE;
    // Control operations (AV insert, MR registration, binds) complete
    // synchronously; data transfers progress only inside our calls.
    o.dom.control_progress = FI_PROGRESS_AUTO;
    o.dom.data_progress = FI_PROGRESS_MANUAL;
    o.dom.resource_mgmt = FI_RM_ENABLED;
    o.dom.av_type = FI_AV_UNSPEC;
    o.dom.mr_mode = if version < fi_version(1, 5) {
        FI_MR_SCALABLE
    } else {
        0
    };
    o.dom.mr_key_size = 8;
    o.dom.cq_data_size = if rdm { 8 } else { 0 };
    o.dom.cq_cnt = 1024;
    // One AF_XDP socket per interface queue without shared UMEM, and the
    // endpoint binds FI_XDP_QUEUE: one endpoint per domain per process.
    o.dom.ep_cnt = 1;
    o.dom.tx_ctx_cnt = 1;
    o.dom.rx_ctx_cnt = 1;
    o.dom.max_ep_tx_ctx = 1;
    o.dom.max_ep_rx_ctx = 1;
    o.dom.cntr_cnt = 1024;
    o.dom.mr_iov_limit = IOV_LIMIT;
    o.dom.caps = DOMAIN_CAPS;
    o.dom.max_err_data = MAX_ERR_DATA;
    o.dom.mr_cnt = 1 << 16;

    o.fab.prov_version = PROVIDER_VERSION;
    o.fab.api_version = version;

    let local = XdpAddr {
        ip: e.src.ip(),
        port: e.src.port(),
        mac: e.iface.mac,
        incarnation: 0,
    };
    o.src = e.format.encode(&local);
    if let Some(d) = e.dest {
        o.dest = e.format.encode(&XdpAddr::from_socket(d));
    }
    o
}

/// Apply the hints to a candidate: refuse it (`Err(reason)`) or narrow it
/// to what was asked for. Checks follow fi_getinfo(3) and the attribute
/// sections of fi_endpoint(3) / fi_domain(3) / fi_fabric(3).
fn apply_hints(o: &mut Owned, h: &fi_info, version: u32) -> std::result::Result<(), String> {
    let ours = o.info.caps;
    if h.caps != 0 {
        if h.caps & !ours != 0 {
            return Err(format!("caps {:#x} not supported", h.caps & !ours));
        }
        o.info.caps = h.caps | (ours & DEFAULT_SECONDARY);
    }
    // We require no mode bits, so any hints->mode is acceptable (mode is
    // what the application can do for us, fi_getinfo(3) "Mode").
    o.info.mode = 0;

    // SAFETY (all derefs below): attribute pointers in hints are NULL or
    // valid, as fi_getinfo(3) requires.
    if let Some(tx) = unsafe { h.tx_attr.as_ref() } {
        if tx.caps & !ours != 0 {
            return Err("tx caps".into());
        }
        if tx.msg_order & !o.tx.msg_order != 0 {
            return Err(format!("tx msg_order {:#x}", tx.msg_order));
        }
        if tx.comp_order & !o.tx.comp_order != 0 {
            return Err("tx comp_order".into());
        }
        if tx.inject_size > o.tx.inject_size {
            return Err(format!(
                "inject_size {} > {}",
                tx.inject_size, o.tx.inject_size
            ));
        }
        if tx.size > o.tx.size || tx.iov_limit > o.tx.iov_limit || tx.rma_iov_limit > 0 {
            return Err("tx size/iov_limit".into());
        }
        if tx.op_flags & !TX_OP_FLAGS != 0 {
            return Err(format!("tx op_flags {:#x}", tx.op_flags & !TX_OP_FLAGS));
        }
        o.tx.op_flags = tx.op_flags;
        if tx.caps != 0 {
            o.tx.caps = tx.caps;
        }
        if tx.msg_order != 0 {
            o.tx.msg_order = tx.msg_order;
        }
    }
    if let Some(rx) = unsafe { h.rx_attr.as_ref() } {
        if rx.caps & !ours != 0 {
            return Err("rx caps".into());
        }
        if rx.msg_order & !o.rx.msg_order != 0 {
            return Err(format!("rx msg_order {:#x}", rx.msg_order));
        }
        if rx.comp_order & !o.rx.comp_order != 0 {
            return Err("rx comp_order".into());
        }
        if rx.size > o.rx.size || rx.iov_limit > o.rx.iov_limit {
            return Err("rx size/iov_limit".into());
        }
        if rx.op_flags & !RX_OP_FLAGS != 0 {
            return Err(format!("rx op_flags {:#x}", rx.op_flags & !RX_OP_FLAGS));
        }
        o.rx.op_flags = rx.op_flags;
        if rx.caps != 0 {
            o.rx.caps = rx.caps;
        }
        if rx.msg_order != 0 {
            o.rx.msg_order = rx.msg_order;
        }
    }
    // Narrow the directional caps to the primary caps finally granted.
    o.tx.caps &= o.info.caps | !(FI_MSG | FI_TAGGED);
    o.rx.caps &= o.info.caps | !(FI_MSG | FI_TAGGED);

    if let Some(ep) = unsafe { h.ep_attr.as_ref() } {
        if ep.type_ != FI_EP_UNSPEC && ep.type_ != o.ep.type_ {
            return Err("ep type".into());
        }
        if ep.protocol != FI_PROTO_UNSPEC && ep.protocol != o.ep.protocol {
            return Err("protocol".into());
        }
        if ep.max_msg_size > o.ep.max_msg_size {
            return Err(format!(
                "max_msg_size {} > {}",
                ep.max_msg_size, o.ep.max_msg_size
            ));
        }
        if ep.msg_prefix_size > 0 {
            return Err("msg_prefix_size".into());
        }
        if ep.tx_ctx_cnt > 1 || ep.rx_ctx_cnt > 1 {
            return Err("scalable endpoints / shared contexts are not supported".into());
        }
        if ep.auth_key_size != 0 || !ep.auth_key.is_null() {
            return Err("auth_key is not supported".into());
        }
        if ep.mem_tag_format != 0 && o.ep.type_ == FI_EP_RDM {
            o.ep.mem_tag_format = ep.mem_tag_format;
        }
    }
    if let Some(d) = unsafe { h.domain_attr.as_ref() } {
        if let Some(n) = unsafe { d.name.as_ref() } {
            // SAFETY: non-NULL name is a C string.
            let n = unsafe { CStr::from_ptr(n) };
            if n != o.dom_name.as_c_str() {
                return Err("domain name".into());
            }
        }
        match d.threading {
            FI_THREAD_UNSPEC => {}
            FI_THREAD_SAFE | FI_THREAD_FID | FI_THREAD_DOMAIN | FI_THREAD_COMPLETION
            | FI_THREAD_ENDPOINT => {
                // We are thread safe, which satisfies every weaker model;
                // report the model asked for, as fi_domain(3) allows.
                o.dom.threading = d.threading;
            }
            t => return Err(format!("threading {t}")),
        }
        match d.control_progress {
            FI_PROGRESS_UNSPEC => {}
            FI_PROGRESS_AUTO | FI_PROGRESS_MANUAL => o.dom.control_progress = d.control_progress,
            p => return Err(format!("control_progress {p}")),
        }
        match d.data_progress {
            FI_PROGRESS_UNSPEC | FI_PROGRESS_MANUAL => {}
            FI_PROGRESS_AUTO => {
                return Err("FI_PROGRESS_AUTO data progress is not supported".into());
            }
            p => return Err(format!("data_progress {p}")),
        }
        match d.resource_mgmt {
            FI_RM_UNSPEC => {}
            FI_RM_ENABLED | FI_RM_DISABLED => o.dom.resource_mgmt = d.resource_mgmt,
            r => return Err(format!("resource_mgmt {r}")),
        }
        match d.av_type {
            FI_AV_UNSPEC => {}
            FI_AV_MAP | FI_AV_TABLE => o.dom.av_type = d.av_type,
            a => return Err(format!("av_type {a}")),
        }
        if version < fi_version(1, 5) && (d.mr_mode == FI_MR_BASIC || d.mr_mode == FI_MR_SCALABLE) {
            o.dom.mr_mode = d.mr_mode;
        }
        // Since 1.5 mr_mode lists what the application supports; we require
        // no bit, so every value is acceptable and we report 0.
        if d.cq_data_size > o.dom.cq_data_size {
            return Err("cq_data_size".into());
        }
        if d.mr_key_size > o.dom.mr_key_size {
            return Err("mr_key_size".into());
        }
        if d.max_ep_tx_ctx > 1
            || d.max_ep_rx_ctx > 1
            || d.max_ep_stx_ctx > 0
            || d.max_ep_srx_ctx > 0
        {
            return Err("shared/scalable contexts".into());
        }
        if d.mr_iov_limit > o.dom.mr_iov_limit {
            return Err("mr_iov_limit".into());
        }
        if d.caps & !DOMAIN_CAPS != 0 {
            return Err(format!("domain caps {:#x}", d.caps & !DOMAIN_CAPS));
        }
        if d.auth_key_size != 0 || !d.auth_key.is_null() {
            return Err("auth_key is not supported".into());
        }
        if d.max_err_data > o.dom.max_err_data {
            return Err("max_err_data".into());
        }
    }
    if let Some(f) = unsafe { h.fabric_attr.as_ref() } {
        if let Some(n) = unsafe { f.name.as_ref() } {
            // SAFETY: non-NULL name is a C string.
            if unsafe { CStr::from_ptr(n) } != o.fab_name.as_c_str() {
                return Err("fabric name".into());
            }
        }
        if let Some(n) = unsafe { f.prov_name.as_ref() } {
            // SAFETY: non-NULL name is a C string.
            let name = unsafe { CStr::from_ptr(n) };
            if !names_us(name.to_bytes()) {
                return Err(format!("provider name {name:?}"));
            }
        }
    }
    Ok(())
}

/// Copy a candidate into core-owned memory.
fn dup(o: &mut Owned) -> Result<*mut fi_info> {
    o.dom.name = o.dom_name.as_ptr().cast_mut();
    o.fab.name = o.fab_name.as_ptr().cast_mut();
    o.fab.prov_name = null_mut();
    o.info.tx_attr = &mut o.tx;
    o.info.rx_attr = &mut o.rx;
    o.info.ep_attr = &mut o.ep;
    o.info.domain_attr = &mut o.dom;
    o.info.fabric_attr = &mut o.fab;
    o.info.src_addr = if o.src.is_empty() {
        null_mut()
    } else {
        o.src.as_mut_ptr().cast()
    };
    o.info.src_addrlen = o.src.len();
    o.info.dest_addr = if o.dest.is_empty() {
        null_mut()
    } else {
        o.dest.as_mut_ptr().cast()
    };
    o.info.dest_addrlen = o.dest.len();
    o.info.next = null_mut();
    // SAFETY: every pointer in `o.info` refers to live memory in `o`.
    let p = unsafe { ffi::fi_dupinfo(&o.info) };
    if p.is_null() {
        Err(Errno::NOMEM)
    } else {
        Ok(p)
    }
}

/// Frees a partially built list on error.
struct List {
    head: *mut fi_info,
    tail: *mut fi_info,
}

impl List {
    fn push(&mut self, p: *mut fi_info) {
        if self.head.is_null() {
            self.head = p;
        } else {
            // SAFETY: tail is the last element we appended.
            unsafe { (*self.tail).next = p };
        }
        self.tail = p;
    }
    fn take(&mut self) -> *mut fi_info {
        let h = self.head;
        self.head = null_mut();
        self.tail = null_mut();
        h
    }
}

impl Drop for List {
    fn drop(&mut self) {
        if !self.head.is_null() {
            // SAFETY: a list of fi_dupinfo results.
            unsafe { ffi::fi_freeinfo(self.head) };
        }
    }
}

/// Pure part of getinfo: the candidate entries for this host, in order.
pub fn candidates(
    version: u32,
    node: Option<&str>,
    service: Option<&str>,
    flags: u64,
    hints: Option<&fi_info>,
) -> Result<Vec<*mut fi_info>> {
    if let Err(why) = ifaces::check_privileges() {
        xdp_warn!(
            FI_LOG_CORE,
            "xdp provider unavailable: {why} (AF_XDP needs CAP_NET_RAW, CAP_NET_ADMIN, CAP_BPF)"
        );
        return Err(Errno::NODATA);
    }
    let cfg = Config::load();
    let all = ifaces::list().map_err(|e| {
        xdp_warn!(
            FI_LOG_CORE,
            "xdp provider unavailable: getifaddrs failed: {e}"
        );
        Errno::NODATA
    })?;
    let usable: Vec<&Iface> = all
        .iter()
        .filter(|i| i.usable())
        .filter(|i| cfg.iface.as_deref().is_none_or(|n| n == i.name))
        .collect();
    if usable.is_empty() {
        match &cfg.iface {
            Some(n) => xdp_warn!(
                FI_LOG_CORE,
                "xdp provider unavailable: FI_XDP_IFACE={n} is missing, down, or has no IP address"
            ),
            None => xdp_warn!(
                FI_LOG_CORE,
                "xdp provider unavailable: no interface is up, non-loopback and has an IP address"
            ),
        }
        return Err(Errno::NODATA);
    }
    let w = wanted(node, service, flags, hints)?;
    let hint_format = hints.map(|h| h.addr_format).unwrap_or(FI_FORMAT_UNSPEC);
    let Some(format) = addr::format_for_hint(hint_format) else {
        xdp_info!(FI_LOG_CORE, "addr_format {hint_format:#x} not supported");
        return Err(Errno::NODATA);
    };
    let ep_types: &[c_int] = match hints
        .and_then(|h| unsafe { h.ep_attr.as_ref() })
        .map(|e| e.type_)
    {
        None | Some(FI_EP_UNSPEC) => &[FI_EP_RDM, FI_EP_DGRAM],
        Some(FI_EP_RDM) => &[FI_EP_RDM],
        Some(FI_EP_DGRAM) => &[FI_EP_DGRAM],
        Some(t) => {
            xdp_info!(FI_LOG_CORE, "endpoint type {t} not supported");
            return Err(Errno::NODATA);
        }
    };
    let mut list = List {
        head: null_mut(),
        tail: null_mut(),
    };
    let mut out = Vec::new();
    for iface in usable {
        // Pick the local address: the one asked for, else one of the
        // destination's family (and on its subnet), else the format's family.
        let want_v6 = match (&w.src, &w.dest, format) {
            (Some(s), _, _) if !s.ip().is_unspecified() => Some(s.is_ipv6()),
            (_, Some(d), _) => Some(d.is_ipv6()),
            (_, _, AddrFormat::SockaddrIn) => Some(false),
            (_, _, AddrFormat::SockaddrIn6) => Some(true),
            _ => None,
        };
        let src_ip = match &w.src {
            Some(s) if !s.ip().is_unspecified() => {
                if !iface.has_ip(&s.ip()) {
                    continue;
                }
                s.ip()
            }
            _ => match iface.ip(want_v6) {
                Some(ip) => ip,
                None => continue,
            },
        };
        if let Some(d) = &w.dest
            && !iface.on_link(&d.ip())
            && !iface.has_ip(&d.ip())
        {
            continue;
        }
        if !format.fits(&src_ip) {
            continue;
        }
        let port = w
            .src
            .map(|s| s.port())
            .filter(|p| *p != 0)
            .unwrap_or(cfg.port);
        for &ep_type in ep_types {
            let e = Entry {
                iface,
                ep_type,
                format,
                src: SocketAddr::new(src_ip, port),
                dest: w.dest,
            };
            let mut o = base(&e, version, &cfg);
            if let Some(h) = hints
                && let Err(why) = apply_hints(&mut o, h, version)
            {
                xdp_info!(
                    FI_LOG_CORE,
                    "{} ep_type {ep_type}: hints refused: {why}",
                    iface.name
                );
                continue;
            }
            let p = dup(&mut o)?;
            list.push(p);
            out.push(p);
        }
    }
    if out.is_empty() {
        return Err(Errno::NODATA);
    }
    let _ = list.take();
    Ok(out)
}

/// `fi_provider::getinfo`.
pub unsafe extern "C" fn xdp_getinfo(
    version: u32,
    node: *const c_char,
    service: *const c_char,
    flags: u64,
    hints: *const fi_info,
    info: *mut *mut fi_info,
) -> c_int {
    guard_int("getinfo", || {
        crate::log::mark_settled();
        if info.is_null() {
            return Err(Errno::INVAL);
        }
        // SAFETY: out-pointer checked above.
        unsafe { *info = null_mut() };
        if fi_major(version) != 1 || version > API_VERSION {
            xdp_info!(FI_LOG_CORE, "API version {:#x} not supported", version);
            return Err(Errno::NODATA);
        }
        let node = opt_cstr(node)?;
        let service = opt_cstr(service)?;
        // SAFETY: hints is NULL or a valid fi_info.
        let hints = unsafe { hints.as_ref() };
        if flags & OFI_CORE_PROV_ONLY != 0 {
            xdp_info!(
                FI_LOG_CORE,
                "utility providers do not layer over xdp: its RDM endpoints are native"
            );
            return Err(Errno::NODATA);
        }
        let v = candidates(version, node, service, flags, hints)?;
        // SAFETY: the entries were linked in order by candidates().
        unsafe { *info = v.first().copied().unwrap_or(null_mut()) };
        Ok(0)
    })
}

/// Decoded view of an `fi_info` the application hands back to
/// fi_domain/fi_endpoint (it may be our entry or the application's copy).
#[derive(Clone, Debug)]
pub struct InfoView {
    pub caps: u64,
    pub ep_type: c_int,
    pub format: AddrFormat,
    pub src: Option<XdpAddr>,
    pub domain_name: Option<String>,
    pub tx_op_flags: u64,
    pub rx_op_flags: u64,
    pub threading: c_int,
    pub av_type: c_int,
}

impl InfoView {
    /// # Safety
    /// `info` must be NULL or a valid fi_info.
    pub unsafe fn read(info: *const fi_info) -> Result<InfoView> {
        // SAFETY: per caller.
        let i = unsafe { info.as_ref() }.ok_or(Errno::INVAL)?;
        let format = AddrFormat::from_code(i.addr_format).ok_or(Errno::INVAL)?;
        // SAFETY: attribute pointers of a valid fi_info are NULL or valid.
        let (ep, tx, rx, dom) = unsafe {
            (
                i.ep_attr.as_ref(),
                i.tx_attr.as_ref(),
                i.rx_attr.as_ref(),
                i.domain_attr.as_ref(),
            )
        };
        let domain_name = dom
            .and_then(|d| (!d.name.is_null()).then_some(d.name))
            // SAFETY: non-NULL name is a C string.
            .map(|n| unsafe { CStr::from_ptr(n) }.to_string_lossy().into_owned());
        Ok(InfoView {
            caps: i.caps,
            ep_type: ep.map(|e| e.type_).unwrap_or(FI_EP_UNSPEC),
            format,
            // SAFETY: src_addr valid for src_addrlen.
            src: unsafe { addr_from_raw(i.src_addr, i.src_addrlen) },
            domain_name,
            tx_op_flags: tx.map(|t| t.op_flags).unwrap_or(0),
            rx_op_flags: rx.map(|r| r.op_flags).unwrap_or(0),
            threading: dom.map(|d| d.threading).unwrap_or(FI_THREAD_UNSPEC),
            av_type: dom.map(|d| d.av_type).unwrap_or(FI_AV_UNSPEC),
        })
    }
}

/// Used by `fi_fabric` to check the attributes it is given.
///
/// # Safety
/// `name` must be NULL or a NUL-terminated string.
pub unsafe fn fabric_name_ok(name: *const c_char) -> bool {
    if name.is_null() {
        return true;
    }
    // SAFETY: non-NULL C string.
    unsafe { CStr::from_ptr(name) }.to_bytes() == FABRIC_NAME.as_bytes()
}

#[cfg(test)]
mod tests {
    #[test]
    fn provider_name_hints() {
        assert!(super::names_us(b"xdp"));
        assert!(super::names_us(b"XDP"));
        assert!(!super::names_us(b"xdp;^ofi_rxd"));
        assert!(!super::names_us(b"xdp;ofi_rxd"));
        assert!(!super::names_us(b"tcp"));
        assert!(!super::names_us(b""));
    }

    use super::*;

    fn iface() -> Iface {
        Iface {
            name: "veth0".into(),
            index: 3,
            mac: Some([2, 0, 0, 0, 0, 1]),
            mtu: 1500,
            up: true,
            loopback: false,
            addrs: vec![("10.9.0.1".parse().unwrap(), 24)],
            queues: 1,
        }
    }

    #[test]
    fn datagram_payload_is_bounded_by_mtu_and_frame() {
        let mut c = Config::default();
        assert_eq!(
            max_datagram_payload(&iface(), false, &c),
            1500 - 28 - PROTO_HEADER_RESERVE
        );
        c.frame_size = 2048;
        let mut big = iface();
        big.mtu = 9000;
        assert_eq!(
            max_datagram_payload(&big, false, &c),
            2048 - ofi_xdp_link::XDP_PACKET_HEADROOM as usize - 14 - 28 - PROTO_HEADER_RESERVE
        );
    }

    #[test]
    fn wanted_follows_udp_provider_rules() {
        let w = wanted(Some("10.9.0.2"), Some("7000"), 0, None).unwrap();
        assert_eq!(w.dest, Some("10.9.0.2:7000".parse().unwrap()));
        assert_eq!(w.src, None);
        let w = wanted(Some("10.9.0.1"), Some("7000"), FI_SOURCE, None).unwrap();
        assert_eq!(w.src, Some("10.9.0.1:7000".parse().unwrap()));
        let w = wanted(None, Some("7001"), 0, None).unwrap();
        assert_eq!(w.src, Some("0.0.0.0:7001".parse().unwrap()));
        assert!(wanted(Some("nonsense host"), None, FI_NUMERICHOST, None).is_err());
    }

    #[test]
    fn hints_refuse_what_we_lack() {
        let i = iface();
        let e = Entry {
            iface: &i,
            ep_type: FI_EP_RDM,
            format: AddrFormat::Xdp,
            src: "10.9.0.1:0".parse().unwrap(),
            dest: None,
        };
        let cfg = Config::default();
        let mut h: fi_info = zeroed();
        h.caps = FI_MSG | FI_RMA;
        let mut o = base(&e, API, &cfg);
        assert!(apply_hints(&mut o, &h, API).is_err());
        h.caps = FI_TAGGED;
        let mut o = base(&e, API, &cfg);
        apply_hints(&mut o, &h, API).unwrap();
        assert_eq!(o.info.caps, FI_TAGGED | DEFAULT_SECONDARY);
        let mut d: fi_domain_attr = zeroed();
        d.data_progress = FI_PROGRESS_AUTO;
        h.domain_attr = &mut d;
        let mut o = base(&e, API, &cfg);
        assert!(apply_hints(&mut o, &h, API).is_err());
    }

    const API: u32 = API_VERSION;
}
