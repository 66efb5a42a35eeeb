//! `getinfo`: describe what the provider offers on this host, honouring the
//! application's hints (fi_getinfo(3)).
//!
//! One entry per usable interface (domain name = interface name) and
//! endpoint type: FI_EP_RDM first, then FI_EP_DGRAM (plain UDP, then with
//! our header: remote CQ data and FI_MSG_PREFIX — first when the hints'
//! mode offers FI_MSG_PREFIX), then FI_EP_MSG. Entries are built in
//! Rust-owned memory and copied with `fi_dupinfo`, so the core can free them
//! with `fi_freeinfo`. `fabric_attr->prov_name` stays NULL: the core fills
//! it in (a non-NULL value would be treated as a layered provider's base).
//!
//! - this file: the entry point, node/service/hints addresses, the list;
//! - `attrs.rs`: the attributes we offer, a candidate entry per interface;
//! - `hints.rs`: narrowing or refusing a candidate by the hints.

use std::ffi::CStr;
use std::net::SocketAddr;
use std::ptr::null_mut;

use libc::{c_char, c_int, c_void};

mod attrs;
mod hints;

pub use attrs::{
    API_VERSION_MAX, AUTH_KEY_ATTRS, DGRAM_PREFIX_SIZE, FABRIC_NAME, IOV_LIMIT, ONLY_WHEN_ASKED,
    PROTO_XDP_DGRAM, PROVIDER_VERSION, RDM_MAX_MSG, RX_OP_FLAGS, RX_SIZE, TX_OP_FLAGS, V2, caps_of,
    max_datagram_payload, speaks, stated_version,
};

use attrs::{Entry, Owned, base};
use hints::apply_hints;

use crate::abi::{Errno, Result, guard_int};
use crate::addr::{self, AddrFormat, XdpAddr};
use crate::auth_key::JobKey;
use crate::ifaces::{self, Iface};
use crate::params::Config;
use crate::sys::*;
use crate::{xdp_info, xdp_warn};

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
    /// hints->handle: a passive endpoint of ours whose address the entries
    /// take (fi_endpoint(3)), or a live connection request.
    handle: Option<*mut fid>,
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

/// Longest address read from an application: every format we decode
/// (sockaddrs, ours, FI_ADDR_STR text) is far shorter.
const MAX_ADDR_LEN: usize = 1024;

/// # Safety
/// `p` must be NULL or valid for `len` bytes (only read if `len` is at most
/// [`MAX_ADDR_LEN`]).
unsafe fn addr_from_raw(p: *const c_void, len: usize) -> Option<XdpAddr> {
    if p.is_null() || len == 0 || len > MAX_ADDR_LEN {
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
    if let Some(h) = hints
        && !h.handle.is_null()
    {
        // SAFETY: a non-NULL hints->handle is a fid (fi_getinfo(3)).
        match unsafe { (*h.handle).fclass } {
            FI_CLASS_PEP => {
                // SAFETY: as above; pep_of checks it is ours.
                let a = unsafe { crate::pep::address_of(h.handle) }.ok_or(Errno::NODATA)?;
                w.src = Some(a.socket_addr());
                w.handle = Some(h.handle);
            }
            FI_CLASS_CONNREQ if crate::pep::peek_request(h.handle).is_some() => {
                w.handle = Some(h.handle);
            }
            _ => {}
        }
    }
    if let Some(h) = hints {
        // SAFETY: hints addresses are valid for their stated lengths.
        unsafe {
            if !h.src_addr.is_null() && w.handle.is_none() {
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

/// The kernel's route to a destination no interface holds on its subnets
/// (`ip route get`); `None` when it has none (-FI_ENODATA for it then).
fn routed_by(dest: std::net::IpAddr) -> Option<ofi_xdp_link::Route> {
    ofi_xdp_link::route_get(dest)
        .inspect_err(|e| xdp_info!(FI_LOG_CORE, "no route to {dest}: {e}"))
        .ok()
}

/// The local address for a destination reached through `route`: the one
/// asked for, else the source the kernel would pick when it is on `iface`.
fn routed_src(
    route: &ofi_xdp_link::Route,
    iface: &Iface,
    asked: &Option<SocketAddr>,
    picked: std::net::IpAddr,
) -> std::net::IpAddr {
    match route.pref_src {
        Some(p)
            if asked.is_none_or(|s| s.ip().is_unspecified())
                && iface.has_ip(&p)
                && p.is_ipv4() == picked.is_ipv4() =>
        {
            p
        }
        _ => picked,
    }
}

/// Copy a candidate into core-owned memory, for an application that asked
/// for API `version`.
fn dup(o: &mut Owned, version: u32) -> Result<*mut fi_info> {
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
    (o.ep.auth_key, o.ep.auth_key_size) = key_ptr(&mut o.ep_key);
    (o.dom.auth_key, o.dom.auth_key_size) = key_ptr(&mut o.dom_key);
    o.info.next = null_mut();
    // SAFETY: every pointer in `o.info` refers to live memory in `o`.
    let p = unsafe { ffi::fi_dupinfo(&o.info) };
    if p.is_null() {
        return Err(Errno::NOMEM);
    }
    // fi_dupinfo (bound to its 1.3 ABI, which every core keeps) copies the
    // 1.17 attributes into the core's own, newer ones zeroed: 0 for
    // max_group_id (no peer groups) and 2.5's counter limits (the full
    // range, fi_domain(3)). max_ep_auth_key is ours to say.
    if version >= AUTH_KEY_ATTRS {
        // SAFETY: the core accepted `version`, so it is 1.20 or newer and
        // its fi_domain_attr has the ABI 1.7 tail (fi_domain_attr_2).
        unsafe {
            let d = (*p).domain_attr.cast::<fi_domain_attr_2>();
            if let Some(d) = d.as_mut() {
                d.max_ep_auth_key = o.max_ep_auth_key;
            }
        }
    }
    Ok(p)
}

/// An `auth_key` attribute's pointer and size for `key` (NULL when empty).
fn key_ptr(key: &mut [u8]) -> (*mut u8, usize) {
    if key.is_empty() {
        (null_mut(), 0)
    } else {
        (key.as_mut_ptr(), key.len())
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
    // (endpoint type, DGRAM with our header)
    let prefix_first = hints.is_some_and(|h| h.mode & FI_MSG_PREFIX != 0);
    let dgrams: &[(c_int, bool)] = if prefix_first {
        &[(FI_EP_DGRAM, true), (FI_EP_DGRAM, false)]
    } else {
        &[(FI_EP_DGRAM, false), (FI_EP_DGRAM, true)]
    };
    let kinds: Vec<(c_int, bool)> = match hints
        .and_then(|h| unsafe { h.ep_attr.as_ref() })
        .map(|e| e.type_)
    {
        None | Some(FI_EP_UNSPEC) => {
            [&[(FI_EP_RDM, false)], dgrams, &[(FI_EP_MSG, false)]].concat()
        }
        Some(FI_EP_RDM) => vec![(FI_EP_RDM, false)],
        Some(FI_EP_DGRAM) => dgrams.to_vec(),
        Some(FI_EP_MSG) => vec![(FI_EP_MSG, false)],
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
    // The kernel's route to the destination, asked once and only when an
    // interface does not hold it on one of its subnets.
    let mut route = None;
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
        let src_ip = match &w.dest {
            Some(d) if !iface.on_link(&d.ip()) && !iface.has_ip(&d.ip()) => {
                let r = route.get_or_insert_with(|| routed_by(d.ip()));
                match r {
                    Some(r) if r.oif == iface.index => routed_src(r, iface, &w.src, src_ip),
                    _ => continue,
                }
            }
            _ => src_ip,
        };
        if !format.fits(&src_ip) {
            continue;
        }
        let port = w
            .src
            .map(|s| s.port())
            .filter(|p| *p != 0)
            .unwrap_or(cfg.port);
        for &(ep_type, header) in &kinds {
            let e = Entry {
                iface,
                ep_type,
                header,
                format,
                src: SocketAddr::new(src_ip, port),
                dest: w.dest,
            };
            let mut o = base(&e, version, &cfg);
            if ep_type == FI_EP_MSG {
                o.info.handle = w.handle.unwrap_or(null_mut());
            }
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
            let p = dup(&mut o, version)?;
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
        // Any version up to the newest we follow (the core passes none
        // above what we stated), and 0.x, which no release had: MPICH 4
        // lists providers with version 0 before it asks again with its
        // own (and libfabric's own providers answer it). 0.x is answered
        // as the oldest API, 1.0 (pre-1.5 mr_mode among it).
        if version > API_VERSION_MAX {
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
    /// domain_attr->mr_mode: how registrations name keys and addresses.
    pub mr_mode: c_int,
    /// `ep_attr->protocol`.
    pub protocol: u32,
    /// FI_MSG_PREFIX among the modes the application accepted.
    pub msg_prefix: bool,
    /// `domain_attr->data_progress` / `control_progress`.
    pub data_progress: c_int,
    pub control_progress: c_int,
    /// `fi_info::handle`: a connection request (FI_CONNREQ) or a passive
    /// endpoint whose address an active endpoint takes over.
    pub handle: usize,
    /// The job key of packet authentication: the endpoint attribute's,
    /// else the domain attribute's (fi_endpoint(3), fi_domain(3) auth_key).
    pub auth_key: Option<JobKey>,
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
        let key = |k: *const u8, n: usize| -> Result<Option<JobKey>> {
            if k.is_null() || n == 0 {
                return Ok(None);
            }
            if n > crate::auth_key::MAX_KEY_LEN {
                crate::xdp_warn!(FI_LOG_CORE, "auth_key: {n} bytes, more than a key");
                return Err(Errno::INVAL);
            }
            // SAFETY: auth_key points to auth_key_size bytes (fi_endpoint(3)).
            let bytes = unsafe { std::slice::from_raw_parts(k, n) };
            JobKey::new(bytes).map(Some).map_err(|e| {
                crate::xdp_warn!(FI_LOG_CORE, "auth_key: {e}");
                Errno::INVAL
            })
        };
        let ep_key = match ep {
            Some(e) => key(e.auth_key, e.auth_key_size)?,
            None => None,
        };
        let dom_key = match dom {
            Some(d) => key(d.auth_key, d.auth_key_size)?,
            None => None,
        };
        // A source address given must be one we can read (a length that
        // fits no format is a mistake, not "any address").
        // SAFETY: src_addr valid for src_addrlen.
        let src = unsafe { addr_from_raw(i.src_addr, i.src_addrlen) };
        if !i.src_addr.is_null() && i.src_addrlen != 0 && src.is_none() {
            return Err(Errno::INVAL);
        }
        Ok(InfoView {
            auth_key: ep_key.or(dom_key),
            caps: i.caps,
            ep_type: ep.map(|e| e.type_).unwrap_or(FI_EP_UNSPEC),
            format,
            src,
            domain_name,
            tx_op_flags: tx.map(|t| t.op_flags).unwrap_or(0),
            rx_op_flags: rx.map(|r| r.op_flags).unwrap_or(0),
            threading: dom.map(|d| d.threading).unwrap_or(FI_THREAD_UNSPEC),
            av_type: dom.map(|d| d.av_type).unwrap_or(FI_AV_UNSPEC),
            mr_mode: dom.map(|d| d.mr_mode).unwrap_or(0),
            handle: i.handle as usize,
            protocol: ep.map(|e| e.protocol).unwrap_or(FI_PROTO_UNSPEC),
            msg_prefix: (i.mode | tx.map_or(0, |t| t.mode) | rx.map_or(0, |r| r.mode))
                & FI_MSG_PREFIX
                != 0,
            data_progress: dom.map_or(FI_PROGRESS_UNSPEC, |d| d.data_progress),
            control_progress: dom.map_or(FI_PROGRESS_UNSPEC, |d| d.control_progress),
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
    use super::attrs::*;
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
            header: false,
            format: AddrFormat::Xdp,
            src: "10.9.0.1:0".parse().unwrap(),
            dest: None,
        };
        let cfg = Config::default();
        let mut h: fi_info = zeroed();
        h.caps = FI_MSG | FI_TRIGGER;
        let mut o = base(&e, API, &cfg);
        assert!(apply_hints(&mut o, &h, API).is_err());
        h.caps = FI_MSG | FI_RMA | FI_ATOMIC;
        let mut o = base(&e, API, &cfg);
        apply_hints(&mut o, &h, API).unwrap();
        assert_eq!(o.info.caps & (FI_RMA | FI_ATOMIC), FI_RMA | FI_ATOMIC);
        // fi_getinfo(3): no modifier given means all relevant ones, and
        // the answer says so; given ones narrow.
        let rma_directions = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
        assert_eq!(
            o.info.caps & (FI_SEND | FI_RECV | rma_directions),
            FI_SEND | FI_RECV | rma_directions
        );
        h.caps = FI_MSG | FI_RMA | FI_RMA_EVENT | FI_WRITE;
        let mut o = base(&e, API, &cfg);
        apply_hints(&mut o, &h, API).unwrap();
        assert_eq!(o.info.caps & rma_directions, FI_WRITE);
        h.caps = FI_TAGGED;
        let mut o = base(&e, API, &cfg);
        apply_hints(&mut o, &h, API).unwrap();
        assert_eq!(
            o.info.caps,
            FI_TAGGED | FI_SEND | FI_RECV | DEFAULT_SECONDARY
        );
        let mut d: fi_domain_attr = zeroed();
        d.data_progress = FI_PROGRESS_AUTO;
        h.domain_attr = &mut d;
        let mut o = base(&e, API, &cfg);
        apply_hints(&mut o, &h, API).unwrap();
        assert_eq!(
            o.dom.data_progress, FI_PROGRESS_AUTO,
            "a progress thread when asked"
        );
        let mut shared_ctx: fi_domain_attr = zeroed();
        shared_ctx.max_ep_stx_ctx = 1;
        h.domain_attr = &mut shared_ctx;
        let mut o = base(&e, API, &cfg);
        assert!(apply_hints(&mut o, &h, API).is_err(), "no shared contexts");
    }

    const API: u32 = fi_version(1, 17);
    const API_2: u32 = fi_version(2, 1);

    fn rdm(i: &Iface) -> Entry<'_> {
        Entry {
            iface: i,
            ep_type: FI_EP_RDM,
            header: false,
            format: AddrFormat::Xdp,
            src: "10.9.0.1:0".parse().unwrap(),
            dest: None,
        }
    }

    /// The candidate for `e` narrowed by `h` for API `version`.
    fn answer(e: &Entry<'_>, h: &fi_info, version: u32) -> std::result::Result<Box<Owned>, String> {
        let mut o = base(e, version, &Config::default());
        apply_hints(&mut o, h, version).map(|()| o)
    }

    /// `answer` for hints with domain attributes `d` (of the 2.x ABI).
    fn with_domain(
        e: &Entry<'_>,
        d: &mut fi_domain_attr_2,
        version: u32,
    ) -> std::result::Result<Box<Owned>, String> {
        let mut h: fi_info = zeroed();
        h.domain_attr = &mut d.v1;
        answer(e, &h, version)
    }

    /// `answer` for hints with endpoint attributes `ep`.
    fn with_ep(
        e: &Entry<'_>,
        ep: &mut fi_ep_attr,
        version: u32,
    ) -> std::result::Result<Box<Owned>, String> {
        let mut h: fi_info = zeroed();
        h.ep_attr = ep;
        answer(e, &h, version)
    }

    #[test]
    fn stated_version_is_the_cores_up_to_ours() {
        assert_eq!(stated_version(fi_version(1, 17)), fi_version(1, 17));
        assert_eq!(stated_version(fi_version(1, 22)), fi_version(1, 22));
        assert_eq!(stated_version(fi_version(2, 1)), fi_version(2, 1));
        assert_eq!(stated_version(fi_version(2, 6)), API_VERSION_MAX);
        assert_eq!(stated_version(fi_version(2, 7)), API_VERSION_MAX);
        assert_eq!(stated_version(fi_version(3, 0)), API_VERSION_MAX);
    }

    #[test]
    fn mr_basic_and_scalable_are_modes_only_before_2_0() {
        let i = iface();
        let mut d: fi_domain_attr_2 = zeroed();
        for legacy in [FI_MR_BASIC, FI_MR_SCALABLE] {
            d.v1.mr_mode = legacy;
            let mut mode = |v| with_domain(&rdm(&i), &mut d, v).unwrap().dom.mr_mode;
            assert_eq!(mode(API), legacy);
            assert_eq!(mode(API_2), 0);
        }
        d.v1.mr_mode = FI_MR_BASIC | FI_MR_PROV_KEY | FI_MR_LOCAL;
        for v in [API, API_2] {
            let o = with_domain(&rdm(&i), &mut d, v).unwrap();
            assert_eq!(o.dom.mr_mode, FI_MR_PROV_KEY);
        }
    }

    #[test]
    fn unified_progress_from_2_0() {
        let i = iface();
        let mut d: fi_domain_attr_2 = zeroed();
        d.v1.data_progress = FI_PROGRESS_CONTROL_UNIFIED;
        assert!(with_domain(&rdm(&i), &mut d, API).is_err());
        let o = with_domain(&rdm(&i), &mut d, API_2).unwrap();
        assert_eq!(o.dom.data_progress, FI_PROGRESS_CONTROL_UNIFIED);
        d.v1.data_progress = FI_PROGRESS_AUTO;
        let o = with_domain(&rdm(&i), &mut d, API_2).unwrap();
        assert_eq!(o.dom.data_progress, FI_PROGRESS_AUTO);
    }

    #[test]
    fn tag_formats_from_2_0() {
        let i = iface();
        let mut ep: fi_ep_attr = zeroed();
        ep.mem_tag_format = 3;
        // Before 2.0: two tag bits; from 2.0: no defined format.
        let o = with_ep(&rdm(&i), &mut ep, API).unwrap();
        assert_eq!(o.ep.mem_tag_format, 3);
        assert!(with_ep(&rdm(&i), &mut ep, API_2).is_err());
        for format in [FI_TAG_MPI, FI_TAG_CCL] {
            ep.mem_tag_format = format;
            let o = with_ep(&rdm(&i), &mut ep, API_2).unwrap();
            assert_eq!(o.ep.mem_tag_format, format);
        }
        ep.mem_tag_format = FI_TAG_BITS;
        let o = with_ep(&rdm(&i), &mut ep, API_2).unwrap();
        assert_eq!(o.ep.mem_tag_format, MEM_TAG_FORMAT);
    }

    #[test]
    fn capabilities_2_x_added_are_not_offered() {
        let i = iface();
        let mut h: fi_info = zeroed();
        for cap in [
            FI_TAGGED_DIRECTED_RECV,
            FI_EXACT_DIRECTED_RECV,
            FI_TAGGED_MULTI_RECV,
        ] {
            h.caps = FI_TAGGED | cap;
            assert!(answer(&rdm(&i), &h, API_2).is_err(), "{cap:#x}");
            assert_eq!(RDM_CAPS & cap, 0);
        }
    }

    #[test]
    fn auth_key_attributes_of_1_20() {
        let i = iface();
        let mut d: fi_domain_attr_2 = zeroed();
        d.max_ep_auth_key = 1;
        let o = with_domain(&rdm(&i), &mut d, API_2);
        assert!(o.is_ok(), "RDM holds one key");
        let mut dgram = rdm(&i);
        dgram.ep_type = FI_EP_DGRAM;
        let o = with_domain(&dgram, &mut d, API_2);
        assert!(o.is_err(), "DGRAM holds none");
        d.max_ep_auth_key = 2;
        assert!(with_domain(&rdm(&i), &mut d, API_2).is_err());
        d.max_ep_auth_key = 0;
        d.max_group_id = 1;
        let o = with_domain(&rdm(&i), &mut d, API_2);
        assert!(o.is_err(), "no peer groups");
        d.max_group_id = 0;
        d.v1.auth_key_size = FI_AV_AUTH_KEY;
        let why = with_domain(&rdm(&i), &mut d, API_2).err().unwrap();
        assert!(why.contains("FI_AV_AUTH_KEY"), "{why}");
    }
}
