//! One endpoint's AF_XDP socket and its steering entry.
//!
//! The steering program is attached once per interface per process (a
//! second bpf_link on the same interface would be refused) and shared by
//! every endpoint there: each endpoint takes an XSKMAP slot and maps its
//! UDP port to it. Dropping the [`Port`] unsteers the port and frees the
//! slot; dropping the last one detaches the program.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use ofi_xdp_bpf::{AttachMode as BpfMode, Steering};
use ofi_xdp_link::{BindPreference, Link, LinkAddr, LinkConfig, LinkError};

use crate::abi::{Errno, Result, lock};
use crate::addr::XdpAddr;
use crate::datapath::OpenArgs;
use crate::params::{AttachMode, ZeroCopy};
use crate::sys::*;
use crate::xdp_warn;

struct Shared {
    steering: Steering,
    slots: u64,
}

type Registry = Mutex<HashMap<String, Weak<Mutex<Shared>>>>;

fn registry() -> &'static Registry {
    static R: OnceLock<Registry> = OnceLock::new();
    R.get_or_init(Registry::default)
}

/// The steering program on `ifname`, attached on first use.
fn steering_for(ifname: &str, mode: AttachMode) -> Result<Arc<Mutex<Shared>>> {
    let mut reg = lock(registry());
    if let Some(s) = reg.get(ifname).and_then(Weak::upgrade) {
        return Ok(s);
    }
    let preferred = match mode {
        AttachMode::Generic => BpfMode::Generic,
        AttachMode::Native => BpfMode::Native,
    };
    let steering = Steering::attach_any(ifname, preferred).map_err(|e| {
        xdp_warn!(
            FI_LOG_EP_CTRL,
            "attaching the XDP steering program to {ifname}: {e}"
        );
        Errno(FI_ENODEV)
    })?;
    crate::xdp_info!(
        FI_LOG_EP_CTRL,
        "{ifname}: steering program attached in {:?} mode",
        steering.mode()
    );
    let s = Arc::new(Mutex::new(Shared { steering, slots: 0 }));
    reg.insert(ifname.to_owned(), Arc::downgrade(&s));
    Ok(s)
}

fn link_errno(e: &LinkError) -> Errno {
    match e {
        LinkError::TxRingFull | LinkError::NoTxFrame => Errno::AGAIN,
        LinkError::Permission { .. } => Errno(FI_EPERM),
        LinkError::Memlock { .. } => Errno::NOMEM,
        LinkError::InterfaceNotFound { .. } => Errno(FI_ENODEV),
        LinkError::QueueBusy { .. } => Errno::BUSY,
        LinkError::ZeroCopyUnsupported { .. } | LinkError::Unsupported { .. } => Errno::OPNOTSUPP,
        LinkError::NoAddress { .. } => Errno(FI_EADDRNOTAVAIL),
        LinkError::Config(_) => Errno::INVAL,
        _ => Errno::OTHER,
    }
}

/// Log a link error and turn it into a fabric errno.
pub fn link_err(what: &str, e: LinkError) -> Errno {
    xdp_warn!(FI_LOG_EP_DATA, "{what}: {e}");
    link_errno(&e)
}

pub struct Port {
    pub link: Link,
    shared: Arc<Mutex<Shared>>,
    slot: u32,
    port: u16,
    /// MACs learnt from received frames or the neighbour table.
    macs: HashMap<SocketAddr, [u8; 6]>,
}

impl Port {
    pub fn open(args: &OpenArgs) -> Result<Port> {
        let cfg = &args.cfg;
        let mut lc = LinkConfig::new(args.iface.name.clone(), args.local.port);
        lc.queue_id = cfg.queue;
        lc.ip = Some(args.local.ip);
        lc.frame_size = u32::try_from(cfg.frame_size).map_err(|_| Errno::INVAL)?;
        lc.frame_count = u32::try_from(cfg.umem_frames).map_err(|_| Errno::INVAL)?;
        lc.rx_frames = lc.frame_count / 2;
        lc.ring_size = u32::try_from(cfg.ring_size).map_err(|_| Errno::INVAL)?;
        // RDM datagrams carry the engine's CRC-32C over header and payload
        // (reliability/PROTOCOL.md), checked end to end, so over IPv4 they go
        // without the optional UDP checksum (RFC 768: zero = none) — one
        // pass over every payload less on each side. IPv6 keeps it
        // (mandatory, RFC 8200 §8.1), and so do DGRAM datagrams, whose
        // payload is the application's own.
        lc.udp_checksum_ipv4 = args.ep_type != FI_EP_RDM;
        lc.bind = match cfg.zerocopy {
            ZeroCopy::Auto => BindPreference::Auto,
            ZeroCopy::Required => BindPreference::ZeroCopy,
            ZeroCopy::Off => BindPreference::Copy,
        };
        let link = Link::open(&lc)
            .map_err(|e| link_err(&format!("opening AF_XDP on {}", args.iface.name), e))?;
        crate::xdp_info!(
            FI_LOG_EP_CTRL,
            "{}: AF_XDP socket on queue {} bound in {} mode, port {}",
            args.iface.name,
            cfg.queue,
            link.bind_mode(),
            args.local.port
        );
        let shared = steering_for(&args.iface.name, cfg.attach_mode)?;
        if cfg.fault_drop_one_in > 0 {
            let seed = u64::from(args.local.incarnation) << 16 | u64::from(args.local.port);
            lock(&shared)
                .steering
                .set_fault_injection(cfg.fault_drop_one_in, seed)
                .map_err(|e| {
                    xdp_warn!(FI_LOG_EP_CTRL, "fault injection: {e}");
                    Errno::OTHER
                })?;
            xdp_warn!(
                FI_LOG_EP_CTRL,
                "{}: dropping one in {} received frames (FI_XDP_FAULT_DROP)",
                args.iface.name,
                cfg.fault_drop_one_in
            );
        }
        let slot = {
            let mut s = lock(&shared);
            let free = (!s.slots).trailing_zeros();
            if free >= Steering::MAX_SLOTS {
                xdp_warn!(
                    FI_LOG_EP_CTRL,
                    "{}: all {} XSKMAP slots in use",
                    args.iface.name,
                    Steering::MAX_SLOTS
                );
                return Err(Errno::AGAIN);
            }
            s.steering.set_socket(free, link.fd()).map_err(|e| {
                xdp_warn!(FI_LOG_EP_CTRL, "XSKMAP: {e}");
                Errno::OTHER
            })?;
            s.steering.steer_port(args.local.port, free).map_err(|e| {
                xdp_warn!(FI_LOG_EP_CTRL, "port map: {e}");
                Errno::OTHER
            })?;
            s.slots |= 1 << free;
            free
        };
        Ok(Port {
            link,
            shared,
            slot,
            port: args.local.port,
            macs: HashMap::new(),
        })
    }

    /// Remember a peer's MAC (from a received frame).
    pub fn learn(&mut self, a: &LinkAddr) {
        self.macs
            .entry(SocketAddr::new(a.ip, a.port))
            .or_insert(a.mac);
    }

    /// The link-level address of `a`: its own MAC, a learnt one, or the
    /// neighbour table's (resolving it, which may take up to a second the
    /// first time a peer is addressed).
    pub fn link_addr(&mut self, a: &XdpAddr) -> Result<LinkAddr> {
        let sa = a.socket_addr();
        if let Some(mac) = a.mac.or_else(|| self.macs.get(&sa).copied()) {
            return Ok(LinkAddr {
                mac,
                ip: a.ip,
                port: a.port,
            });
        }
        let la = self
            .link
            .resolve_peer(a.ip, a.port, Duration::from_secs(1))
            .map_err(|e| {
                xdp_warn!(FI_LOG_EP_DATA, "no MAC for {sa}: {e}");
                Errno(FI_EHOSTUNREACH)
            })?;
        self.macs.insert(sa, la.mac);
        Ok(la)
    }
}

impl Drop for Port {
    fn drop(&mut self) {
        let mut s = lock(&self.shared);
        let _ = s.steering.unsteer_port(self.port);
        let _ = s.steering.clear_socket(self.slot);
        s.slots &= !(1 << self.slot);
    }
}
