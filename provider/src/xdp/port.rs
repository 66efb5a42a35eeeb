//! One endpoint's I/O: its AF_XDP socket with the steering entry, and the
//! kernel UDP socket that reserves its (IP, port).
//!
//! - **AF_XDP**, the fast path, carries frames to and from other hosts. The
//!   steering program is attached once per interface (a second bpf_link on
//!   the same interface would be refused): the first process attaches it,
//!   later processes of the same user adopt it (`Steering::adopt`, holding
//!   its bpf_link so it stays while any of them runs), and every endpoint
//!   shares it: each binds a queue (`FI_XDP_QUEUE`, or the first its process
//!   does not use), takes XSKMAP slot `queue * SOCKETS_PER_QUEUE + member`
//!   recording that queue, and maps its UDP port to it. Dropping the
//!   [`Port`] unsteers the port and empties the slot; the program detaches
//!   when the last process holding it closes its last port there.
//! - **Which queue a datagram arrives on** is the NIC's choice (RSS hashes
//!   the flow; on veth the sender's transmit queue decides). The kernel
//!   drops a redirect into a socket of another queue, so the steering
//!   program passes such frames to the kernel (counted as `other_queue`)
//!   and the kernel UDP socket below receives them: nothing is lost, but
//!   those datagrams cost a system call each. Where the driver takes ntuple
//!   rules (`ofi_xdp_link::ntuple`), the endpoint installs one sending its
//!   (IP, port) to its queue, removed when the port closes; rules a killed
//!   process left are removed when the program is next attached here.
//! - **The kernel UDP socket** carries datagrams for peers on this host
//!   (their IP is one of ours): an AF_XDP frame to our own address would
//!   leave on the wire and never come back. When no AF_XDP queue can be had
//!   — another user's socket or program on the interface, a full or
//!   unjoinable UMEM group (`port/open.rs`) — the endpoint runs on this
//!   socket alone: slower, but the same protocol and wire format, and its
//!   port is not steered, so the kernel delivers its datagrams.
//!   FI_XDP_KERNEL_PATH=1 asks for that.
//! - **The bulk path** (`bulk`): segments of large transfers to other
//!   hosts go in 64 KiB batches through the kernel's UDP offloads, to a
//!   second socket of the peer that the steering program leaves to the
//!   kernel (PROTOCOL.md §2.5), where AF_XDP would copy frame by frame.
//! - **Shared memory** (`local`) carries the engine's datagrams (RDM,
//!   MSG) to and from peers on this host whose area we can open; the
//!   kernel socket stays for the others (FI_XDP_LOCAL_SHM=0: for all).
//! - **Which of these a peer's datagrams take** is its route (`route`),
//!   decided once and kept with the peer, not per datagram; the steering
//!   program's registry is `steering`.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex, OnceLock};

use ofi_xdp_bpf::AttachMode as BpfMode;
use ofi_xdp_link::ntuple::InstalledRule;
use ofi_xdp_link::{IfAddrKind, Link, LinkAddr, LinkError, LinkStats, TxFrame};

use crate::abi::{Errno, Result, lock};
use crate::addr::XdpAddr;
use crate::datapath::OpenArgs;
use crate::params::BulkPath;
use crate::sys::*;
use crate::wait::Epoll;
use crate::xdp_warn;

mod bulk;
mod hops;
mod kernel;
pub(super) mod local;
mod open;
mod route;
mod steering;

use bulk::Bulk;
pub use bulk::BulkCounts;
use hops::Hops;
use kernel::*;
use local::LocalPath;
use open::XskError::{Busy, Failed};
use open::*;
pub use route::{Route, Way};
use steering::{Shared, steering_for};

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

/// The AF_XDP half of a port: the socket and its steering entry.
struct Xsk {
    link: Link,
    shared: Arc<Mutex<Shared>>,
    /// The interface queue the socket is bound to.
    queue: u32,
    /// Receive queues the interface has.
    queues: u32,
    slot: u32,
    port: u16,
    /// The ntuple rule sending our port to `queue`, when the driver took one.
    rule: Option<InstalledRule>,
}

impl Drop for Xsk {
    fn drop(&mut self) {
        // The rule goes first: from then on RSS spreads our port again, and
        // the program still passes what lands elsewhere to the kernel.
        self.rule = None;
        let mut s = lock(&self.shared);
        let _ = s.steering.unsteer_port(self.port);
        let _ = s.steering.clear_socket(self.slot);
        // One entry per socket: another endpoint of ours may share the queue.
        if let Some(i) = s.queues.iter().position(|q| *q == self.queue) {
            s.queues.swap_remove(i);
        }
    }
}

/// Where an endpoint's datagrams go, as its port knows it (for its
/// statistics file).
pub struct PortIdentity {
    /// `Some((queue, XSKMAP slot))` on the AF_XDP path, `None` on the kernel UDP path.
    pub af_xdp: Option<(u32, u32)>,
}

/// Datagrams each path delivered, for the statistics file and the closing
/// log line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathCounts {
    /// Through the kernel UDP socket, from peers on this host.
    pub kernel_local: u64,
    /// Through the kernel UDP socket, from other hosts: on the AF_XDP path
    /// these arrived on another receive queue than the socket's (the
    /// steering program's `other_queue`).
    pub kernel_remote: u64,
    /// Through shared memory, from peers on this host.
    pub shm_rx: u64,
    /// Into peers' shared memory.
    pub shm_tx: u64,
    /// Records in our rings that were malformed (dropped).
    pub shm_malformed: u64,
    /// Datagrams not sent because a peer's ring was full (retransmitted).
    pub shm_ring_full: u64,
    /// Direct messages in our rings that we did not take (malformed, or
    /// sent while we took none): dropped.
    pub direct_refused: u64,
    /// The bulk path's datagrams and system calls.
    pub bulk: BulkCounts,
}

/// What came in for an endpoint.
pub enum Arrival<'a> {
    /// A datagram, as its pieces in order; `ce`: its IP header said
    /// congestion experienced (RFC 3168).
    Datagram { pieces: &'a [&'a [u8]], ce: bool },
    /// A direct message from a peer on this host (PROTOCOL.md §6.9), as its
    /// record in our ring.
    Message(&'a [u8]),
}

/// Where one outgoing datagram is built: a UMEM frame, (kernel path) the
/// port's scratch buffer, or the slot behind the bulk path's batch, where
/// the last datagram went (`bulk.rs`).
#[derive(Clone, Copy, Debug)]
pub enum TxBuf {
    Frame(TxFrame),
    Scratch,
    Bulk,
}

/// While AF_XDP or shared memory carries the traffic, the kernel socket
/// (peers that reach us no other way) is polled every this many passes: a
/// syscall per pass would be the largest cost of a small message, and at
/// every 64th pass (as it was) its ≈ 1 µs was still a tenth of an empty
/// `fi_cq_read` (47 → 42 ns with 1024) and a stall a waiting reply could
/// land in. A first datagram through it is seen within 1024 passes (tens
/// of µs of spinning, or at once by a sleeping reader, whose wait includes
/// the socket); after one, [`KERNEL_BUSY_PASSES`] passes poll it each time.
const KERNEL_POLL_EVERY: u32 = 1024;
/// Passes between two kicks and reaps of the AF_XDP TX ring while nothing
/// was sent through it lately ([`Port::flush`]).
const XSK_IDLE_FLUSH_EVERY: u32 = 64;
/// After the kernel socket carried a datagram, it is polled on every pass
/// for this many passes (a same-host peer is talking to us).
const KERNEL_BUSY_PASSES: u32 = 1 << 16;
/// Flushes after an AF_XDP send that still kick and reap when nothing more
/// was sent (a kick the kernel refused for now, completions still coming).
const XSK_BUSY_FLUSHES: u32 = 64;
/// Passes between two looks at the clock for the periodic re-check of next
/// hops ([`Port::recheck_routes`]).
const ROUTE_CHECK_EVERY: u32 = 1 << 14;
/// Largest datagram taken from a shared-memory ring: the engine's largest.
const LOCAL_MAX_DATAGRAM: usize = u16::MAX as usize;

pub struct Port {
    xsk: Option<Xsk>,
    udp: UdpSocket,
    /// Rings in shared memory to and from peers on this host (engine
    /// endpoints only).
    local: Option<LocalPath>,
    /// Segments of large transfers through the kernel's UDP offloads
    /// (engine endpoints, where `FI_XDP_BULK_PATH` says so).
    bulk: Option<Bulk>,
    /// The last datagram went to the bulk path: the next is built in its
    /// batch's slot ([`TxBuf::Bulk`]).
    bulk_next: bool,
    /// Every address of this host (network namespace): peers there are
    /// reached through shared memory or the kernel socket.
    local_ips: Vec<IpAddr>,
    max_payload: usize,
    /// MACs learnt from received frames or the neighbour table.
    macs: HashMap<SocketAddr, [u8; 6]>,
    /// Remote peers whose MAC is not known yet (their datagrams came in
    /// through the kernel socket, from another queue), with how many sends
    /// to them went through the kernel socket meanwhile.
    unresolved: HashMap<SocketAddr, u32>,
    /// Remote IPs' next hops as the kernel routes them (`port/hops.rs`).
    hops: Hops,
    /// Moves on whenever something peers' routes are decided from changes
    /// (`port/route.rs`); routes kept from an older epoch are decided again.
    route_epoch: u32,
    scratch: Vec<u8>,
    rx_buf: Vec<u8>,
    pass: u32,
    kernel_busy: u32,
    /// Flushes left that kick the AF_XDP TX ring and reap its completions
    /// whether or not anything was sent through it (reset by every AF_XDP
    /// send): a same-host conversation, which sends nothing through it,
    /// skips both on most passes (see [`Port::flush`]).
    xsk_busy: u32,
    /// Both sockets' readiness as one fd, for FI_WAIT_FD (AF_XDP path
    /// only; made by the first [`Port::wait_fd`]).
    epoll: OnceLock<Epoll>,
    counts: PathCounts,
    /// For the log lines: the interface and our port.
    ifname: String,
    local_port: u16,
}

/// Whether the bulk path (`bulk.rs`) moves large transfers faster than
/// this AF_XDP socket: where the socket copies every frame, unless the
/// steering program runs natively on veth. A veth peer hands its
/// segmentation-offload batches over whole, and veth's native XDP path
/// cuts them into frames again for the program: measured on veth at
/// MTU 1500, 1 MiB window 16, 0.19 GB/s through the bulk path against
/// 0.32 without it there, while in generic mode (our default) 1.0-2.0
/// against 0.4. (A NIC's native path sees wire frames, which the kernel
/// joins after the program passed them.)
fn bulk_beats_af_xdp(x: &Xsk, ifname: &str) -> bool {
    if x.link.bind_mode() != ofi_xdp_link::BindMode::Copy {
        return false;
    }
    let native = lock(&x.shared).steering.mode() == BpfMode::Native;
    !(native && ofi_xdp_link::ethtool::driver(ifname).is_ok_and(|d| d == "veth"))
}

/// The bytes of `b` when it is a UMEM frame, else the port's scratch
/// buffer (the kernel path's; a bulk slot is `bulk.rs`'s: the callers
/// that meet one look there first).
fn frame_or_scratch<'a>(
    b: TxBuf,
    xsk: &'a mut Option<Xsk>,
    scratch: &'a mut [u8],
) -> std::result::Result<&'a mut [u8], LinkError> {
    match (b, xsk) {
        (TxBuf::Frame(f), Some(x)) => x.link.tx_payload_mut(f),
        _ => Ok(scratch),
    }
}

/// A datagram's sender as either path saw it (a MAC only from AF_XDP).
fn sender(ip: IpAddr, port: u16, mac: Option<[u8; 6]>) -> XdpAddr {
    XdpAddr {
        ip,
        port,
        mac,
        incarnation: 0,
    }
}

impl Port {
    pub fn open(args: &OpenArgs) -> Result<Port> {
        let udp = match &args.socket {
            Some(s) => s.try_clone(),
            None => UdpSocket::bind(args.local.socket_addr()),
        }
        .and_then(|s| s.set_nonblocking(true).map(|()| s))
        .map_err(|e| {
            xdp_warn!(
                FI_LOG_EP_CTRL,
                "UDP socket {}: {e}",
                args.local.socket_addr()
            );
            Errno::from_os(&e)
        })?;
        if args.reliable() {
            // Only the engine's endpoints read them (Rdm::check_refused); on a DGRAM socket a
            // queued error would fail the next kernel-path send instead.
            report_icmp_errors(&udp, args.local.ip.is_ipv6());
        }
        grow_receive_buffer(&udp);
        let local_ips = ofi_xdp_link::if_addrs()
            .map(|v| {
                v.into_iter()
                    .filter_map(|a| match a.kind {
                        IfAddrKind::Ip { addr, .. } => Some(addr),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_else(|_| vec![args.local.ip]);
        let xsk = if args.cfg.kernel_path {
            crate::xdp_info!(
                FI_LOG_EP_CTRL,
                "{}: port {} on the kernel UDP path (FI_XDP_KERNEL_PATH)",
                args.iface.name,
                args.local.port
            );
            None
        } else {
            match open_xsk(args) {
                Ok(x) => Some(x),
                Err(Busy(why)) => {
                    xdp_warn!(
                        FI_LOG_EP_CTRL,
                        "{}: {why}; port {} uses the kernel UDP path (slower)",
                        args.iface.name,
                        args.local.port
                    );
                    None
                }
                Err(Failed(e)) => return Err(e),
            }
        };
        let max_payload = match &xsk {
            Some(x) => x.link.max_payload(),
            None => ofi_xdp_link::max_payload(
                u32::try_from(args.cfg.frame_size).map_err(|_| Errno::INVAL)?,
                u32::try_from(args.iface.mtu).unwrap_or(u32::MAX),
                &args.local.ip,
            ),
        };
        let local = if args.reliable() && args.cfg.local_shm {
            LocalPath::open(args.local.socket_addr(), LOCAL_MAX_DATAGRAM)
        } else {
            None
        };
        let wants_bulk = match args.cfg.bulk_path {
            BulkPath::Auto => xsk
                .as_ref()
                .is_none_or(|x| bulk_beats_af_xdp(x, &args.iface.name)),
            BulkPath::On => true,
            BulkPath::Off => false,
        };
        let bulk = if args.reliable() && wants_bulk {
            Bulk::open(args.local.ip, max_payload)
                .inspect_err(|e| {
                    xdp_warn!(
                        FI_LOG_EP_CTRL,
                        "bulk socket on {}: {e}; large transfers take the endpoint's own port",
                        args.local.ip
                    )
                })
                .ok()
        } else {
            None
        };
        Ok(Port {
            xsk,
            udp,
            local,
            bulk,
            bulk_next: false,
            local_ips,
            max_payload,
            macs: HashMap::new(),
            unresolved: HashMap::new(),
            hops: Hops::default(),
            route_epoch: 1,
            scratch: vec![0; max_payload],
            rx_buf: vec![0; 1 << 16],
            pass: 0,
            kernel_busy: 0,
            xsk_busy: 0,
            epoll: OnceLock::new(),
            counts: PathCounts::default(),
            ifname: args.iface.name.clone(),
            local_port: args.local.port,
        })
    }

    /// Datagrams each path carried so far.
    pub fn path_counts(&self) -> PathCounts {
        let mut c = self.counts;
        if let Some(l) = &self.local {
            let l = l.counts();
            c.shm_rx = l.rx;
            c.shm_tx = l.tx;
            c.shm_malformed = l.malformed;
            c.shm_ring_full = l.ring_full;
        }
        if let Some(b) = &self.bulk {
            c.bulk = b.counts();
        }
        c
    }

    /// The UDP port where peers may send us bulk datagrams (PROTOCOL.md
    /// §2.5), 0 without the bulk path: the engine states it in its
    /// handshake.
    pub fn bulk_port(&self) -> u16 {
        self.bulk.as_ref().map_or(0, Bulk::port)
    }

    /// Whether we send bulk datagrams to peers that take them.
    pub fn sends_bulk(&self) -> bool {
        self.bulk.is_some()
    }

    /// Sends the datagram in the first `len` bytes of `b` to the bulk port
    /// `bulk_port` of `to` (batched: it leaves at the next [`Port::flush`]
    /// at the latest) and gives `b` back. A peer whose `route` has no bulk
    /// path (one on this host: shared memory beats any socket) takes its
    /// ordinary way ([`Port::send_on`]).
    pub fn send_bulk(
        &mut self,
        b: TxBuf,
        to: &XdpAddr,
        route: &mut Route,
        bulk_port: u16,
        len: usize,
    ) -> std::result::Result<(), LinkError> {
        if !route.bulk {
            return self.send_on(b, to, route, len, None);
        }
        let (dest, peer) = (SocketAddr::new(to.ip, bulk_port), to.socket_addr());
        let Port {
            xsk,
            scratch,
            udp,
            bulk,
            ..
        } = self;
        let Some(bulk) = bulk.as_mut() else {
            return Err(LinkError::NoTxFrame);
        };
        let r = match b {
            // Built where it goes: no copy.
            TxBuf::Bulk => bulk.send_slot(udp, dest, peer, len),
            b => match frame_or_scratch(b, xsk, scratch) {
                Ok(buf) => bulk.send(udp, dest, peer, &buf[..len.min(buf.len())]),
                Err(_) => Err(LinkError::NoTxFrame),
            },
        };
        self.bulk_next = true;
        self.release_tx(b);
        r
    }

    /// A datagram built in the bulk slot ([`TxBuf::Bulk`]) that goes
    /// another way after all (it is not a bulk segment, or to another
    /// peer): copied into a UMEM frame, or (kernel path) the scratch
    /// buffer. `None`: no frame free now (lost like a dropped frame).
    fn out_of_slot(&mut self, len: usize) -> Option<TxBuf> {
        let to = match &mut self.xsk {
            Some(x) => TxBuf::Frame(x.link.alloc_tx()?),
            None => TxBuf::Scratch,
        };
        let Port {
            xsk, scratch, bulk, ..
        } = self;
        let from = bulk.as_ref()?.slot_bytes(len);
        match frame_or_scratch(to, xsk, scratch) {
            Ok(d) if d.len() >= from.len() => {
                d[..from.len()].copy_from_slice(from);
                Some(to)
            }
            _ => {
                self.release_tx(to);
                None
            }
        }
    }

    /// Called before the endpoint's wait fd is slept on: publishes that in
    /// shared memory, so local senders ring our doorbell. Whether a
    /// datagram is waiting already (then do not sleep).
    pub fn prepare_sleep(&self) -> bool {
        self.local.as_ref().is_some_and(|l| l.prepare_sleep())
    }

    /// Largest datagram payload, the same on both paths: what this port's
    /// AF_XDP socket receives (one frame, or the MTU with multi-buffer), or
    /// one frame on the kernel path. RDM states it in its HELLO and sends a
    /// peer no more than the peer stated (PROTOCOL.md §2.3).
    pub fn max_payload(&self) -> usize {
        self.max_payload
    }

    /// Full-size datagrams we can take in before we next run: what the
    /// AF_XDP fill ring holds, or on the kernel path what the UDP socket's
    /// receive buffer holds (`None` if unknown). Beyond it a burst is
    /// dropped whenever we are slow to run, and recovering costs timeouts.
    pub fn rx_capacity(&self) -> Option<usize> {
        match &self.xsk {
            Some(x) => Some(x.link.rx_capacity()),
            None => kernel_rx_capacity(&self.udp, self.max_payload),
        }
    }

    /// Full-size datagrams a local peer's ring in shared memory holds
    /// (`None` without the shared-memory path): a window beyond it fills
    /// the ring whenever the peer is slow to run.
    pub fn local_capacity(&self) -> Option<usize> {
        self.local
            .as_ref()
            .map(|_| LocalPath::ring_capacity(self.max_payload))
    }

    /// A file descriptor that is readable when datagrams wait on any path
    /// (for CQs with FI_WAIT_FD). With AF_XDP or shared memory it is an
    /// epoll instance over the AF_XDP socket, the kernel socket and the
    /// shared-memory doorbell, made on first use: an epoll watching the AF_XDP socket
    /// puts a wake-up (`ep_poll_callback`) into every receive and every TX
    /// completion, which cost 1 MiB fi_pingpong ≈ 15-30 % of its bandwidth,
    /// so endpoints whose CQs never wait on an fd do without it.
    pub fn wait_fd(&self) -> Result<RawFd> {
        if self.xsk.is_none() && self.local.is_none() {
            return Ok(self.udp.as_raw_fd());
        }
        if let Some(e) = self.epoll.get() {
            return Ok(e.as_raw_fd());
        }
        let mut fds = Vec::new();
        self.arrival_fds(&mut fds);
        let ep = Epoll::of(&fds).map_err(|e| {
            xdp_warn!(FI_LOG_EP_CTRL, "epoll: {e}");
            Errno::from_os(&e)
        })?;
        Ok(self.epoll.get_or_init(|| ep).as_raw_fd())
    }

    /// The fds that become readable when a datagram arrives (the AF_XDP
    /// socket, the kernel socket, the shared-memory doorbell), appended to
    /// `out`: what [`Port::wait_fd`] watches, and what a reader polls
    /// directly while it sleeps.
    pub fn arrival_fds(&self, out: &mut Vec<RawFd>) {
        out.extend(self.xsk.as_ref().map(|x| x.link.fd()));
        out.push(self.udp.as_raw_fd());
        out.extend(self.local.as_ref().map(LocalPath::fd));
        out.extend(self.bulk.as_ref().map(Bulk::fd));
    }

    /// The local senders writing to our shared-memory area (`None`
    /// without the shared-memory path).
    pub fn local_writers(&self) -> Option<local::Writers> {
        self.local.as_ref().map(LocalPath::writers)
    }

    fn is_local(&self, ip: &IpAddr) -> bool {
        self.local_ips.contains(ip)
    }

    /// A buffer for one outgoing datagram (`None`: no TX frame free now).
    pub fn alloc_tx(&mut self) -> Option<TxBuf> {
        if self.bulk_next && self.bulk.as_mut().is_some_and(|b| b.slot().is_some()) {
            return Some(TxBuf::Bulk);
        }
        match &mut self.xsk {
            Some(x) => x.link.alloc_tx().map(TxBuf::Frame),
            None => Some(TxBuf::Scratch),
        }
    }

    /// The payload area of `b`, at least [`Port::max_payload`] bytes.
    pub fn tx_payload_mut(&mut self, b: TxBuf) -> Option<&mut [u8]> {
        match b {
            TxBuf::Bulk => self.bulk.as_mut().and_then(Bulk::slot),
            b => frame_or_scratch(b, &mut self.xsk, &mut self.scratch).ok(),
        }
    }

    /// Give `b` back unsent.
    pub fn release_tx(&mut self, b: TxBuf) {
        if let (TxBuf::Frame(f), Some(x)) = (b, &mut self.xsk) {
            let _ = x.link.release_tx(f);
        }
    }

    /// Send the first `len` bytes of `b` to `to` and give `b` back, the way
    /// [`Port::route`] decides now: for senders that keep no routes (DGRAM
    /// endpoints, connection management).
    pub fn send(
        &mut self,
        b: TxBuf,
        to: &XdpAddr,
        len: usize,
    ) -> std::result::Result<(), LinkError> {
        let mut route = self.route(to);
        self.send_on(b, to, &mut route, len, None)
    }

    /// Send the first `len` bytes of `b` to `to` along its `route` (current:
    /// [`Port::route_current`]) and give `b` back. A peer on this host goes
    /// through its ring in shared memory, or the kernel socket while it has
    /// no area we can use; others through AF_XDP to the route's MAC, from
    /// UDP source port `entropy` if given (path entropy, PROTOCOL.md §4.6;
    /// the other paths send from the endpoint's own port). A peer whose MAC
    /// we do not know yet — its datagrams reached us through the kernel
    /// socket, from another receive queue, so no frame told us — is sent to
    /// through the kernel socket too (the kernel resolves it) until the
    /// neighbour table has it.
    pub fn send_on(
        &mut self,
        b: TxBuf,
        to: &XdpAddr,
        route: &mut Route,
        len: usize,
        entropy: Option<u16>,
    ) -> std::result::Result<(), LinkError> {
        self.bulk_next = false;
        let b = match b {
            TxBuf::Bulk => self.out_of_slot(len).ok_or(LinkError::NoTxFrame)?,
            b => b,
        };
        let mac = match route.way {
            Way::Xsk { mac } => Some(mac),
            Way::Kernel { awaiting_mac: true } => self.mac_found(to),
            Way::SharedMemory { .. } | Way::Kernel { .. } => None,
        };
        let r = if let Some(mac) = mac {
            self.send_xsk(b, to, mac, len, entropy)
        } else if let Way::SharedMemory { ring } = &mut route.way
            && let Some(r) = self.send_local(b, to, ring, len)
        {
            r
        } else {
            self.send_kernel(b, to, len)
        };
        self.release_tx(b);
        r
    }

    /// Through the peer's ring in shared memory; `None` when it has none
    /// we can use (the kernel socket carries it then).
    fn send_local(
        &mut self,
        b: TxBuf,
        to: &XdpAddr,
        ring: &mut usize,
        len: usize,
    ) -> Option<std::result::Result<(), LinkError>> {
        let Port {
            xsk,
            scratch,
            local,
            ..
        } = self;
        let local = local.as_mut()?;
        let buf = frame_or_scratch(b, xsk, scratch).ok()?;
        let payload = buf.get(..len)?;
        match local.send(to.socket_addr(), ring, payload)? {
            true => Some(Ok(())),
            // Ring full: lost like a dropped frame.
            false => Some(Err(LinkError::TxRingFull)),
        }
    }

    fn send_kernel(
        &mut self,
        b: TxBuf,
        to: &XdpAddr,
        len: usize,
    ) -> std::result::Result<(), LinkError> {
        self.kernel_busy = KERNEL_BUSY_PASSES;
        let Port {
            xsk, scratch, udp, ..
        } = self;
        let buf = frame_or_scratch(b, xsk, scratch)?;
        let payload = buf.get(..len).ok_or(LinkError::NoTxFrame)?;
        match retry_icmp_errors(|| udp.send_to(payload, to.socket_addr())) {
            Ok(_) => Ok(()),
            // Socket buffer full: lost like a dropped frame.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Err(LinkError::TxRingFull),
            Err(source) => Err(LinkError::Io {
                op: "sendto (kernel UDP path)",
                source,
            }),
        }
    }

    fn send_xsk(
        &mut self,
        b: TxBuf,
        to: &XdpAddr,
        mac: [u8; 6],
        len: usize,
        entropy: Option<u16>,
    ) -> std::result::Result<(), LinkError> {
        let TxBuf::Frame(frame) = b else {
            return Err(LinkError::NoTxFrame);
        };
        let la = LinkAddr {
            mac,
            ip: to.ip,
            port: to.port,
        };
        let Some(x) = self.xsk.as_mut() else {
            return Err(LinkError::NoTxFrame);
        };
        self.xsk_busy = XSK_BUSY_FLUSHES;
        let link = &mut x.link;
        let sport = entropy.unwrap_or_else(|| link.local_addr().port);
        match link.send_from_port(frame, &la, len, sport) {
            Err(LinkError::TxRingFull) => {
                let _ = link.flush();
                link.reap_completions();
                link.send_from_port(frame, &la, len, sport)
            }
            r => r,
        }
    }

    /// Kick the AF_XDP TX ring and reap its completions, and wake local
    /// peers we wrote to that sleep (kernel sends are done when sent).
    ///
    /// The AF_XDP half runs while AF_XDP sends are recent (the last
    /// `XSK_BUSY_FLUSHES` flushes) and on every `XSK_IDLE_FLUSH_EVERY`th
    /// pass otherwise: every progress pass flushes, and on a same-host
    /// conversation (nothing through AF_XDP) the kick check and the reap
    /// were a fixed cost between receiving a message and reporting it.
    /// Frames still in flight are reaped then, or by `alloc_tx` when no
    /// frame is free.
    pub fn flush(&mut self) -> std::result::Result<(), LinkError> {
        let bulk = match self.bulk.as_mut() {
            Some(b) => b.flush(&self.udp),
            None => Ok(()),
        };
        self.kick()?;
        bulk
    }

    /// [`Port::flush`] but for the bulk path's batch, which fills on: what a
    /// transmit loop calls every few datagrams.
    pub fn kick(&mut self) -> std::result::Result<(), LinkError> {
        self.flush_local();
        let Some(x) = self.xsk.as_mut() else {
            return Ok(());
        };
        if self.xsk_busy == 0 && !self.pass.is_multiple_of(XSK_IDLE_FLUSH_EVERY) {
            return Ok(());
        }
        self.xsk_busy = self.xsk_busy.saturating_sub(1);
        let r = x.link.flush();
        x.link.reap_completions();
        r
    }

    /// Hand up to `max` received datagrams per path to `f` with their
    /// sender, each as its payload's pieces in order: one, unless it arrived
    /// in several UMEM chunks on an RDM port (`LinkConfig::rx_pieces`).
    /// MACs of new senders are learnt by [`Port::learn`]. A direct message
    /// in our rings is refused (only [`Port::recv_arrivals`] hands them
    /// up).
    pub fn recv(&mut self, max: usize, mut f: impl FnMut(XdpAddr, &[&[u8]], bool)) {
        self.recv_arrivals(max, |from, a| match a {
            Arrival::Datagram { pieces, ce } => {
                f(from, pieces, ce);
                true
            }
            Arrival::Message(_) => false,
        });
    }

    /// Send the direct message `message` (its pieces, concatenated) to the
    /// local peer `to` along its `route` (PROTOCOL.md §6.9); false when it
    /// did not go (its route is not shared memory, no ring to it, ring
    /// full, or it takes no direct messages now): send it as datagrams then.
    pub fn send_message(&mut self, to: &XdpAddr, route: &mut Route, message: &[&[u8]]) -> bool {
        match (self.local.as_mut(), &mut route.way) {
            (Some(l), Way::SharedMemory { ring }) => {
                l.send_message(to.socket_addr(), ring, message)
            }
            _ => false,
        }
    }

    /// Rings the doorbells of the local peers written to since the last
    /// flush that said they are about to sleep.
    pub fn flush_local(&mut self) {
        if let Some(l) = self.local.as_mut() {
            l.flush();
        }
    }

    /// Whether our local peers may send us direct messages now (§6.9).
    pub fn take_direct(&self, yes: bool) {
        if let Some(l) = &self.local {
            l.take_direct(yes);
        }
    }

    /// [`Port::recv`] with the direct messages in our rings too, each
    /// handed to `f` as it comes (in its ring's order among that sender's
    /// datagrams); `f` returns whether it took it (one it refused is
    /// counted, [`PathCounts::direct_refused`]).
    pub fn recv_arrivals(&mut self, max: usize, mut f: impl FnMut(XdpAddr, Arrival<'_>) -> bool) {
        if let Some(x) = self.xsk.as_mut() {
            x.link.recv(max, |d| {
                let a = Arrival::Datagram {
                    pieces: d.pieces,
                    ce: d.ce,
                };
                f(sender(d.src.ip, d.src.port, Some(d.src.mac)), a);
            });
        }
        // A local peer pulling a send of ours may be waiting for us to copy
        // our share of it (`local/help.rs`): only while one is offered.
        if crate::datapath::offered::outstanding()
            && let Some(l) = self.local.as_mut()
        {
            l.help_pulls();
        }
        // Back from a sleep on the wait fd, the kernel socket may be what
        // woke us: read it at once.
        let mut refused = 0;
        // Our rings are read only while a local peer writes to us (its
        // slot's active bit); otherwise a look at the area's header.
        let woke = self.local.as_mut().is_some_and(|l| {
            !l.quiet()
                && l.recv(max, |from, kind, d| {
                    let one = [d];
                    let a = match kind {
                        local::Kind::Datagram => Arrival::Datagram {
                            pieces: &one,
                            ce: false,
                        },
                        local::Kind::Message => Arrival::Message(d),
                    };
                    let message = kind == local::Kind::Message;
                    if !f(sender(from.ip(), from.port(), None), a) && message {
                        refused += 1;
                    }
                })
        });
        self.counts.direct_refused += refused;
        self.pass = self.pass.wrapping_add(1);
        if self.pass.is_multiple_of(ROUTE_CHECK_EVERY) {
            self.recheck_routes(false);
        }
        // With shared memory or AF_XDP carrying the traffic, the kernel
        // socket is polled now and then only (a system call each time).
        let now_and_then = self.pass.is_multiple_of(KERNEL_POLL_EVERY);
        if let Some(b) = self.bulk.as_mut()
            && b.due(woke || now_and_then)
        {
            b.recv(max, |from, d| {
                let one = [d];
                let a = Arrival::Datagram {
                    pieces: &one,
                    ce: false,
                };
                f(sender(from.ip(), from.port(), None), a);
            });
        }
        let poll_kernel = (self.xsk.is_none() && self.local.is_none())
            || woke
            || self.kernel_busy > 0
            || now_and_then;
        if !poll_kernel {
            return;
        }
        self.kernel_busy = self.kernel_busy.saturating_sub(1);
        for _ in 0..max {
            match self.udp.recv_from(&mut self.rx_buf) {
                Ok((n, from)) => {
                    self.kernel_busy = KERNEL_BUSY_PASSES;
                    if self.local_ips.contains(&from.ip()) {
                        self.counts.kernel_local += 1;
                    } else {
                        self.count_other_queue(from);
                    }
                    // A datagram larger than the buffer arrives truncated
                    // to it; the protocol rejects it.
                    let one = [&self.rx_buf[..n]];
                    let a = Arrival::Datagram {
                        pieces: &one,
                        ce: false,
                    };
                    f(sender(from.ip(), from.port(), None), a);
                }
                Err(_) => break,
            }
        }
    }

    /// A datagram from another host came through the kernel socket: with
    /// AF_XDP that means it arrived on another receive queue than ours
    /// (said once per port at `info`, then counted).
    fn count_other_queue(&mut self, from: SocketAddr) {
        self.counts.kernel_remote += 1;
        if self.counts.kernel_remote == 1
            && let Some(x) = &self.xsk
        {
            crate::xdp_info!(
                FI_LOG_EP_DATA,
                "{}: port {}: datagrams from {from} arrive on another receive queue than \
                 AF_XDP queue {} (of {}): they take the kernel UDP socket",
                self.ifname,
                self.local_port,
                x.queue,
                x.queues
            );
        }
    }

    /// Hand `f` the destination of every datagram the network refused
    /// since the last call: an ICMP port unreachable means nobody listens
    /// there any more (the peer's process is gone). Both paths' sends are
    /// from our port, so the kernel queues the errors on our UDP socket
    /// (IP_RECVERR); reading them costs a syscall, so callers ask only when
    /// a peer stops answering.
    pub fn take_refused(&mut self, mut f: impl FnMut(SocketAddr)) {
        // Local peers reached through shared memory draw no ICMP: their
        // process is looked for instead.
        if let Some(l) = self.local.as_mut() {
            l.take_dead(&mut f);
        }
        for _ in 0..64 {
            match read_refused(&self.udp) {
                Ok(Some(sa)) => f(self
                    .bulk
                    .as_ref()
                    .and_then(|b| b.peer_of(&sa))
                    .unwrap_or(sa)),
                Ok(None) => continue,
                Err(_) => return,
            }
        }
    }

    /// Which path carries this port's datagrams, for the statistics file.
    pub fn identity(&self) -> PortIdentity {
        PortIdentity {
            af_xdp: self.xsk.as_ref().map(|x| (x.queue, x.slot)),
        }
    }

    /// One line for the log: which path carried this port's datagrams.
    fn path_summary(&mut self) -> String {
        let c = self.counts;
        let mut kernel = format!(
            "{} through the kernel UDP socket ({} from this host, {} from other hosts)",
            c.kernel_local + c.kernel_remote,
            c.kernel_local,
            c.kernel_remote
        );
        if let Some(l) = &self.local {
            let l = l.counts();
            kernel.push_str(&format!(
                ", {} through shared memory from this host ({} sent, {} malformed, {} ring full, \
                 {} chunks of peers' pulls copied for them, {} direct messages refused)",
                l.rx, l.tx, l.malformed, l.ring_full, l.helped, c.direct_refused
            ));
        }
        if let Some(b) = &self.bulk {
            let b = b.counts();
            kernel.push_str(&format!(
                ", bulk path on port {}: {} datagrams received in {} reads, {} sent in {} sends",
                self.bulk_port(),
                b.rx_datagrams,
                b.rx_reads,
                b.tx_datagrams,
                b.tx_sends
            ));
        }
        match self.xsk.as_mut() {
            Some(x) => {
                let (rx, tx) = x
                    .link
                    .stats()
                    .map(|s| (s.rx_packets, s.tx_packets))
                    .unwrap_or_default();
                let rule = match &x.rule {
                    Some(r) => format!(
                        ", ntuple rule at location {}",
                        r.location().map_or("?".to_owned(), |l| l.to_string())
                    ),
                    None => String::new(),
                };
                format!(
                    "{rx} datagrams received and {tx} sent through AF_XDP (queue {} of {}, {} \
                     mode{rule}), {kernel}",
                    x.queue,
                    x.queues,
                    x.link.bind_mode()
                )
            }
            None => format!("kernel UDP path only: {kernel}"),
        }
    }

    /// The AF_XDP link's counters (`None` on the kernel UDP path).
    pub fn link_stats(&mut self) -> Option<LinkStats> {
        self.xsk.as_mut().and_then(|x| x.link.stats().ok())
    }

    /// One line for logs: the AF_XDP link's counters, or the path in use.
    pub fn stats_line(&mut self) -> String {
        match self.xsk.as_mut() {
            Some(x) => x.link.stats().map(|s| format!("{s:?}")).unwrap_or_default(),
            None => "kernel UDP path".to_owned(),
        }
    }
}

impl Drop for Port {
    fn drop(&mut self) {
        let summary = self.path_summary();
        crate::xdp_info!(
            FI_LOG_EP_CTRL,
            "{}: port {} closed: {summary}",
            self.ifname,
            self.local_port
        );
    }
}
