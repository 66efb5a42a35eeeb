//! What an entry offers: the provider's fixed attributes (capabilities,
//! flags, limits, versions) and one candidate `fi_info` per interface and
//! endpoint type before the hints narrow it ([`base`]).

use std::ffi::CString;
use std::net::SocketAddr;

use libc::c_int;

use crate::addr::{AddrFormat, XdpAddr};
use crate::ifaces::Iface;
use crate::params::Config;
use crate::sys::*;

/// Fabric name: every Ethernet segment reachable over AF_XDP is one fabric
/// from libfabric's point of view (domains are interfaces).
pub const FABRIC_NAME: &str = "xdp";
/// Provider version reported in `fabric_attr->prov_version`.
pub const PROVIDER_VERSION: u32 = fi_version(0, 1);
/// The newest libfabric API whose headers and man pages the provider
/// follows: libfabric 2.6. Between 1.17 (Debian 12, which it is built
/// against) and this, getinfo answers each version as its fi_getinfo(3)
/// says ([`V2`], [`AUTH_KEY_ATTRS`]).
pub const API_VERSION_MAX: u32 = fi_version(2, 6);
/// From 2.0 on (fi_getinfo(3), fi_domain(3), fi_endpoint(3) of 2.x):
/// FI_MR_BASIC and FI_MR_SCALABLE are no modes, only (deprecated) mr_mode
/// bits; `progress` (the former `data_progress`) covers control and data
/// and may be FI_PROGRESS_CONTROL_UNIFIED; `max_group_id` exists; an input
/// `mem_tag_format` below FI_TAG_MAX_FORMAT names a tag format.
pub const V2: u32 = fi_version(2, 0);
/// From 1.20 on (ABI 1.7): `domain_attr->max_ep_auth_key` exists.
pub const AUTH_KEY_ATTRS: u32 = fi_version(1, 20);

/// The API version to state in `fi_provider::fi_version` to a core of
/// version `core` (its `fi_version()`): that core's own, up to the newest we
/// follow. The core hands getinfo no version above what we state
/// (fi_getinfo_ in src/fabric.c of 1.17 and 2.x: "Provider %s fi_version
/// %d.%d < requested"), and no version above its own, so every entry
/// describes an ABI the core really has.
pub const fn stated_version(core: u32) -> u32 {
    if core < API_VERSION_MAX {
        core
    } else {
        API_VERSION_MAX
    }
}

/// `max_ep_auth_key` (fi_domain(3), 1.20 and later): keys an endpoint of
/// `ep_type` can hold. RDM holds one job key (its `auth_key`); per-AV keys
/// (FI_AV_AUTH_KEY) are not offered, and DGRAM and MSG take no key.
pub fn max_ep_auth_key(ep_type: c_int) -> usize {
    usize::from(ep_type == FI_EP_RDM)
}

/// Capabilities we implement, per endpoint type. Secondary capabilities in
/// `DEFAULT_SECONDARY` are always returned.
pub const RDM_CAPS: u64 = FI_MSG
    | FI_TAGGED
    | FI_RMA
    | FI_ATOMIC
    | FI_READ
    | FI_WRITE
    | FI_REMOTE_READ
    | FI_REMOTE_WRITE
    | FI_RMA_EVENT
    | FI_FENCE
    | FI_SEND
    | FI_RECV
    | FI_SOURCE
    | FI_SOURCE_ERR
    | FI_DIRECTED_RECV
    | FI_MULTI_RECV
    | FI_LOCAL_COMM
    | FI_REMOTE_COMM
    | FI_SHARED_AV;
pub const DGRAM_CAPS: u64 = FI_MSG
    | FI_SEND
    | FI_RECV
    | FI_SOURCE
    | FI_SOURCE_ERR
    | FI_LOCAL_COMM
    | FI_REMOTE_COMM
    | FI_SHARED_AV;
/// Capabilities granted only to hints that name them: FI_SOURCE_ERR turns
/// receives from sources outside the AV into error completions
/// (fi_cq(3)), which an application that did not ask for it would take
/// for failures.
pub const ONLY_WHEN_ASKED: u64 = FI_SOURCE_ERR;

/// The capabilities an endpoint type can have (those of
/// [`ONLY_WHEN_ASKED`] included); `None` for a type we do not offer.
pub fn caps_of(ep_type: libc::c_int) -> Option<u64> {
    match ep_type {
        FI_EP_RDM => Some(RDM_CAPS),
        FI_EP_DGRAM => Some(DGRAM_CAPS),
        FI_EP_MSG => Some(MSG_CAPS),
        _ => None,
    }
}
/// Connected endpoints: what RDM offers, to one peer (the connection is
/// an engine session like any RDM peer's, so messages, RMA and atomics run
/// as they do there). FI_SOURCE and FI_DIRECTED_RECV are for
/// connectionless endpoints (fi_getinfo(3)), and named AVs with them.
pub const MSG_CAPS: u64 = RDM_CAPS & !(FI_SOURCE | FI_SOURCE_ERR | FI_DIRECTED_RECV | FI_SHARED_AV);
/// FI_FENCE: on the transmits of RDM and MSG endpoints (ep/post.rs `with_fence`).
pub(super) const TX_CAPS: u64 =
    FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_SEND | FI_READ | FI_WRITE | FI_FENCE;
pub(super) const RX_CAPS: u64 = FI_MSG
    | FI_TAGGED
    | FI_RMA
    | FI_ATOMIC
    | FI_RECV
    | FI_REMOTE_READ
    | FI_REMOTE_WRITE
    | FI_RMA_EVENT
    | FI_SOURCE
    | FI_SOURCE_ERR
    | FI_DIRECTED_RECV
    | FI_MULTI_RECV;
/// FI_SHARED_AV: named AVs shared by the processes of a host (av/shared.rs).
pub(super) const DOMAIN_CAPS: u64 = FI_LOCAL_COMM | FI_REMOTE_COMM | FI_SHARED_AV;
/// FI_FENCE (a secondary capability, fi_getinfo(3)) costs nothing until a
/// transfer carries the flag, so RDM and MSG entries report it unasked and
/// their endpoints honour the flag whatever caps they were opened with.
pub(super) const DEFAULT_SECONDARY: u64 = FI_LOCAL_COMM | FI_REMOTE_COMM | FI_FENCE;

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
/// The same protocol with connection management (reliability/PROTOCOL.md
/// §9): FI_EP_MSG.
pub const PROTO_XDP_MSG: u32 = FI_PROV_SPECIFIC | 0x584D;
/// FI_EP_DGRAM with a 16-byte header before the application's bytes
/// (`xdp/dgram.rs`): remote CQ data, and FI_MSG_PREFIX (the header lives
/// in the application's prefix space).
pub const PROTO_XDP_DGRAM: u32 = FI_PROV_SPECIFIC | 0x5847;
/// The prefix FI_MSG_PREFIX asks of DGRAM buffers: the header above.
pub const DGRAM_PREFIX_SIZE: usize = 16;
pub const PROTO_VERSION: u32 = 1;

/// The wire protocol of an entry of `ep_type` (`header`: a DGRAM entry
/// with our header rather than plain UDP); `None` for a type we do not
/// offer.
fn protocol_of(ep_type: c_int, header: bool) -> Option<u32> {
    match ep_type {
        FI_EP_RDM => Some(PROTO_XDP_RDM),
        FI_EP_MSG => Some(PROTO_XDP_MSG),
        FI_EP_DGRAM if header => Some(PROTO_XDP_DGRAM),
        FI_EP_DGRAM => Some(FI_PROTO_UDP),
        _ => None,
    }
}

/// Whether an endpoint of `ep_type` speaks `protocol` (an info's
/// `ep_attr->protocol` given to fi_endpoint; unspecified: its default):
/// that of one of the type's entries.
pub fn speaks(ep_type: c_int, protocol: u32) -> bool {
    protocol == FI_PROTO_UNSPEC
        || [false, true]
            .into_iter()
            .any(|header| protocol_of(ep_type, header) == Some(protocol))
}

/// Ordering of an RDM endpoint (fi_endpoint(3) "msg_order"), from
/// PROTOCOL.md §8.6: operations from one initiator to one target travel in
/// posting order on one stream and execute there in that order, so sends
/// stay in order, and reads and writes (RMA or atomic) come after earlier
/// writes, reads after earlier reads, and sends after earlier writes. Not
/// write-after-read (a read's data is copied when its response is sent,
/// and again at a retransmission) nor anything after a send (a large
/// message's data arrives after its rendezvous).
pub const RDM_ORDER: u64 = FI_ORDER_SAS
    | FI_ORDER_RAR
    | FI_ORDER_RAW
    | FI_ORDER_WAW
    | FI_ORDER_SAW
    | FI_ORDER_RMA_RAR
    | FI_ORDER_RMA_RAW
    | FI_ORDER_RMA_WAW
    | FI_ORDER_ATOMIC_RAR
    | FI_ORDER_ATOMIC_RAW
    | FI_ORDER_ATOMIC_WAW;

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

/// Everything that differs between two entries.
pub(super) struct Entry<'a> {
    pub(super) iface: &'a Iface,
    pub(super) ep_type: c_int,
    /// DGRAM with our header (PROTO_XDP_DGRAM) instead of plain UDP.
    pub(super) header: bool,
    pub(super) format: AddrFormat,
    pub(super) src: SocketAddr,
    pub(super) dest: Option<SocketAddr>,
}

/// Rust-owned storage for one fi_info before `fi_dupinfo` copies it.
pub(super) struct Owned {
    pub(super) info: fi_info,
    pub(super) tx: fi_tx_attr,
    pub(super) rx: fi_rx_attr,
    pub(super) ep: fi_ep_attr,
    pub(super) dom: fi_domain_attr,
    pub(super) fab: fi_fabric_attr,
    pub(super) dom_name: CString,
    pub(super) fab_name: CString,
    pub(super) src: Vec<u8>,
    pub(super) dest: Vec<u8>,
    /// The job key asked for in the hints' endpoint and domain attributes
    /// (packet authentication), echoed in the entry.
    pub(super) ep_key: Vec<u8>,
    pub(super) dom_key: Vec<u8>,
    /// `domain_attr->max_ep_auth_key`, written to entries for API 1.20+.
    pub(super) max_ep_auth_key: usize,
}

pub(super) fn zeroed<T>() -> T {
    // SAFETY: only used for the plain-data C attribute structs above, for
    // which all-zero (NULL pointers, 0 values) is valid.
    unsafe { std::mem::zeroed() }
}

pub(super) fn base(e: &Entry<'_>, version: u32, cfg: &Config) -> Box<Owned> {
    // RDM and MSG run the reliability engine; DGRAM is plain UDP.
    let rdm = e.ep_type != FI_EP_DGRAM;
    let caps = caps_of(e.ep_type).unwrap_or(0);
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
        ep_key: Vec::new(),
        dom_key: Vec::new(),
        max_ep_auth_key: max_ep_auth_key(e.ep_type),
    });
    o.info.caps = caps & !ONLY_WHEN_ASKED;
    o.info.mode = 0;
    o.info.addr_format = e.format.code();

    o.tx.caps = caps & TX_CAPS;
    o.tx.msg_order = if rdm { RDM_ORDER } else { FI_ORDER_NONE };
    o.tx.comp_order = FI_ORDER_NONE;
    o.tx.inject_size = payload;
    o.tx.size = TX_SIZE;
    o.tx.iov_limit = IOV_LIMIT;
    // One remote segment per RMA or atomic (fi_msg_rma, fi_msg_atomic).
    o.tx.rma_iov_limit = usize::from(rdm);

    o.rx.caps = o.info.caps & RX_CAPS;
    o.rx.msg_order = o.tx.msg_order;
    o.rx.comp_order = FI_ORDER_NONE;
    o.rx.size = RX_SIZE;
    o.rx.iov_limit = IOV_LIMIT;

    o.ep.type_ = e.ep_type;
    o.ep.protocol = protocol_of(e.ep_type, e.header).unwrap_or(FI_PROTO_UNSPEC);
    o.ep.protocol_version = PROTO_VERSION;
    o.ep.max_msg_size = if rdm { RDM_MAX_MSG } else { payload };
    // The order above holds for operations of any size (one stream);
    // write-after-read is not ordered.
    let rma_order = if rdm { RDM_MAX_MSG } else { 0 };
    o.ep.max_order_raw_size = rma_order;
    o.ep.max_order_waw_size = rma_order;
    o.ep.max_order_war_size = 0;
    o.ep.mem_tag_format = if rdm { MEM_TAG_FORMAT } else { 0 };
    o.ep.tx_ctx_cnt = 1;
    o.ep.rx_ctx_cnt = 1;

    o.dom.threading = FI_THREAD_SAFE;
    // Control operations (AV insert, MR registration, binds) complete
    // synchronously; data transfers progress only inside our calls. A
    // connection (MSG) is set up by messages, which progress inside the
    // application's calls too (EQ reads drive them).
    o.dom.control_progress = if e.ep_type == FI_EP_MSG {
        FI_PROGRESS_MANUAL
    } else {
        FI_PROGRESS_AUTO
    };
    o.dom.data_progress = FI_PROGRESS_MANUAL;
    o.dom.resource_mgmt = FI_RM_ENABLED;
    o.dom.av_type = FI_AV_UNSPEC;
    o.dom.mr_mode = if version < fi_version(1, 5) {
        FI_MR_SCALABLE
    } else {
        0
    };
    o.dom.mr_key_size = 8;
    o.dom.cq_data_size = if rdm || e.header { 8 } else { 0 };
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
