//! The AF_XDP socket: UMEM registration, ring set-up, bind, and the
//! TX/RX/completion/fill data path.
//!
//! Set-up follows `Documentation/networking/af_xdp.rst`: `socket(AF_XDP)`,
//! `setsockopt(XDP_UMEM_REG)`, ring sizes (`XDP_UMEM_FILL_RING`,
//! `XDP_UMEM_COMPLETION_RING`, `XDP_RX_RING`, `XDP_TX_RING`),
//! `getsockopt(XDP_MMAP_OFFSETS)`, mmap of the four rings, `bind`.

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use crate::error::LinkError;
use crate::frames::FramePool;
use crate::iface::{self, IfaceInfo};
use crate::ring::{Mmap, Ring};
use crate::wire::{self, EncodeOptions, LinkAddr};

/// Bytes the kernel reserves in front of received packet data in each
/// frame (`XDP_PACKET_HEADROOM`, include/uapi/linux/bpf.h).
pub const XDP_PACKET_HEADROOM: u32 = 256;

/// Largest burst handled per ring operation.
pub const BURST: usize = 64;

/// How to bind the socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BindPreference {
    /// Let the kernel try zero-copy and fall back to copy mode (bind with
    /// neither `XDP_ZEROCOPY` nor `XDP_COPY`); [`Link::bind_mode`] reports
    /// which one it picked.
    #[default]
    Auto,
    /// Require zero-copy (`XDP_ZEROCOPY`); fail if the driver lacks it.
    ZeroCopy,
    /// Force copy mode (`XDP_COPY`).
    Copy,
}

/// The mode the socket was bound in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindMode {
    /// Driver DMA straight into the UMEM.
    ZeroCopy,
    /// The kernel copies between its buffers and the UMEM.
    Copy,
}

impl std::fmt::Display for BindMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BindMode::ZeroCopy => "zero-copy",
            BindMode::Copy => "copy",
        })
    }
}

/// Configuration of one [`Link`].
#[derive(Clone, Debug)]
pub struct LinkConfig {
    /// Interface to bind (in the calling thread's network namespace).
    pub ifname: String,
    /// Queue index to bind; the XDP program must redirect this queue's
    /// packets to this socket (a redirect to a socket bound to another queue
    /// is dropped by the kernel).
    pub queue_id: u32,
    /// Local UDP port: our source port, and the only destination port
    /// accepted on receive.
    pub port: u16,
    /// Local IP; `None` = the interface's first IPv4 address, else its first
    /// IPv6 address.
    pub ip: Option<IpAddr>,
    /// Frame (UMEM chunk) size: 2048 or 4096.
    pub frame_size: u32,
    /// Total frames in the UMEM.
    pub frame_count: u32,
    /// How many of them serve receive (the rest serve transmit).
    pub rx_frames: u32,
    /// Size of each of the four rings (power of two).
    pub ring_size: u32,
    /// Zero-copy / copy choice.
    pub bind: BindPreference,
    /// Compute UDP checksums for IPv4 (IPv6 always has them).
    pub udp_checksum_ipv4: bool,
    /// Verify IPv4 header and UDP checksums on receive.
    pub verify_checksums: bool,
    /// Try huge pages for the UMEM (falls back to normal pages).
    pub huge_pages: bool,
    /// When a full-MTU frame does not fit one chunk, bind with `XDP_USE_SG`
    /// (multi-buffer, Linux 6.6+) so datagrams up to the MTU span several
    /// chunks; without it (or on older kernels) datagrams are limited to one
    /// chunk.
    pub multi_buffer: bool,
    /// Hand a datagram that arrived in several chunks over in its chunks
    /// ([`RxDatagram::pieces`]) instead of gathering it into one buffer
    /// first. For callers that read `pieces`; ignored with
    /// `verify_checksums` (the UDP checksum needs the datagram whole).
    pub rx_pieces: bool,
    /// Mark sent datagrams ECN-capable (ECT(0), RFC 3168), for a sender
    /// whose congestion control reacts to CE marks.
    pub ecn_capable: bool,
}

impl LinkConfig {
    /// Defaults: queue 0, 4096 frames of 2048 bytes split evenly, rings of
    /// 2048, automatic bind mode, checksums computed and verified.
    pub fn new(ifname: impl Into<String>, port: u16) -> Self {
        Self {
            ifname: ifname.into(),
            queue_id: 0,
            port,
            ip: None,
            frame_size: 2048,
            frame_count: 4096,
            rx_frames: 2048,
            ring_size: 2048,
            bind: BindPreference::Auto,
            udp_checksum_ipv4: true,
            verify_checksums: true,
            huge_pages: false,
            multi_buffer: false,
            rx_pieces: false,
            ecn_capable: false,
        }
    }

    fn validate(&self) -> Result<(), LinkError> {
        let bad = |m: &str| Err(LinkError::Config(m.to_owned()));
        if self.frame_size != 2048 && self.frame_size != 4096 {
            return bad("frame_size must be 2048 or 4096");
        }
        if !self.ring_size.is_power_of_two() || self.ring_size < 64 {
            return bad("ring_size must be a power of two >= 64");
        }
        if self.frame_count < 2 || self.rx_frames == 0 || self.rx_frames >= self.frame_count {
            return bad("need 0 < rx_frames < frame_count");
        }
        if u64::from(self.frame_count) * u64::from(self.frame_size) > 1 << 34 {
            return bad("UMEM larger than 16 GiB");
        }
        Ok(())
    }
}

/// A transmit frame, named by its UMEM address. `Copy` on purpose: the
/// reliability engine stores it (or just [`TxFrame::addr`]) and may rebuild
/// it with [`TxFrame::from_addr`]; every [`Link`] method validates the state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TxFrame(u64);

impl TxFrame {
    /// The frame's UMEM address (byte offset of the frame start).
    pub fn addr(self) -> u64 {
        self.0
    }
    /// Rebuilds a handle from an address obtained with [`TxFrame::addr`].
    pub fn from_addr(addr: u64) -> Self {
        Self(addr)
    }
}

/// A received frame the caller holds, named by its UMEM address plus where
/// the payload sits. `Copy`: keep it as long as needed, give it back with
/// [`Link::release_rx`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RxFrame {
    addr: u64,
    payload_offset: u32,
    payload_len: u32,
}

impl RxFrame {
    /// UMEM address of the packet data (as the RX ring reported it).
    pub fn addr(self) -> u64 {
        self.addr
    }
    /// Payload length in bytes.
    pub fn payload_len(self) -> usize {
        self.payload_len as usize
    }
}

/// The largest UDP payload a link with `frame_size` chunks sends from `ip`
/// on an interface with `mtu`: received frames start XDP_PACKET_HEADROOM
/// into the chunk, so what we send must fit the peer's chunk that way, and
/// the MTU.
pub fn max_payload(frame_size: u32, mtu: u32, ip: &IpAddr) -> usize {
    let by_frame = (frame_size.saturating_sub(XDP_PACKET_HEADROOM) as usize)
        .saturating_sub(wire::header_len(ip));
    by_frame.min(payload_within_mtu(mtu, ip))
}

/// The largest UDP payload of an `mtu`-byte IP packet from `ip`.
fn payload_within_mtu(mtu: u32, ip: &IpAddr) -> usize {
    (mtu as usize).saturating_sub(wire::header_len(ip) - wire::ETH_HLEN)
}

/// Chunks per TX slot so that a frame of `frame_len` bytes fits one slot
/// (a power of two, at most 16: the kernel takes at most MAX_SKB_FRAGS + 1
/// descriptors per packet).
fn slot_chunks(frame_len: u32, frame_size: u32) -> u32 {
    frame_len
        .div_ceil(frame_size)
        .next_power_of_two()
        .clamp(1, 16)
}

/// What [`Link::classify`] finds: payload offset and length, source, CE.
type Classified = (usize, usize, LinkAddr, bool);

/// Most chunks one received frame may span: the kernel builds a
/// multi-buffer frame from at most MAX_SKB_FRAGS (17) fragments besides its
/// head; anything longer is dropped as malformed.
const MAX_RX_PIECES: usize = 18;

/// One received datagram, as handed to the [`Link::recv`] callback.
#[derive(Debug)]
pub struct RxDatagram<'a> {
    /// Handle to keep if the callback returns [`RxAction::Hold`]. `None` for
    /// a datagram that arrived in several chunks (multi-buffer): its chunks
    /// are recycled once the callback returns, and `Hold` acts as `Consume`.
    pub frame: Option<RxFrame>,
    /// Sender MAC, IP and UDP port.
    pub src: LinkAddr,
    /// UDP payload, in place in the UMEM — or, for a datagram that arrived
    /// in several chunks, gathered into a link buffer; with
    /// [`LinkConfig::rx_pieces`] only its first piece (read `pieces`).
    pub payload: &'a [u8],
    /// The UDP payload in order, in place: one piece (`payload`) unless the
    /// datagram arrived in several chunks and the link hands them over as
    /// they are ([`LinkConfig::rx_pieces`]).
    pub pieces: &'a [&'a [u8]],
    /// Its IP header said CE: congestion experienced on the way (RFC 3168).
    pub ce: bool,
}

/// What the [`Link::recv`] callback does with a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxAction {
    /// Done with it: the frame goes straight back to the fill ring.
    Consume,
    /// Keep the frame; the caller returns it later with [`Link::release_rx`].
    Hold,
}

/// Kernel-side socket statistics (`getsockopt(XDP_STATISTICS)`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XdpStatistics {
    /// Dropped for other reasons than invalid descriptors (e.g. frame too large).
    pub rx_dropped: u64,
    /// Invalid RX descriptors.
    pub rx_invalid_descs: u64,
    /// Invalid TX descriptors.
    pub tx_invalid_descs: u64,
    /// Dropped because the RX ring was full.
    pub rx_ring_full: u64,
    /// Times the kernel found the fill ring empty.
    pub rx_fill_ring_empty_descs: u64,
    /// Times the kernel found the TX ring empty on a wakeup.
    pub tx_ring_empty_descs: u64,
}

/// Link statistics: userspace counters plus the kernel's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Datagrams delivered to the caller.
    pub rx_packets: u64,
    /// Payload bytes delivered to the caller.
    pub rx_bytes: u64,
    /// Frames received that were not a well-formed UDP datagram to our port
    /// and IP (never shown to the caller).
    pub rx_malformed: u64,
    /// Frames whose IPv4 header or UDP checksum failed.
    pub rx_bad_checksum: u64,
    /// Descriptors submitted to the TX ring (retransmissions included).
    pub tx_packets: u64,
    /// Payload bytes submitted.
    pub tx_bytes: u64,
    /// TX completions reaped.
    pub tx_completions: u64,
    /// `sendto` wakeups issued.
    pub tx_kicks: u64,
    /// Refills that found the fill ring completely drained by the kernel.
    pub fill_ring_empty: u64,
    /// Completion/RX descriptors naming an address in the wrong state (a bug
    /// somewhere; counted, never trusted).
    pub bad_descs: u64,
    /// The kernel's view.
    pub kernel: XdpStatistics,
}

/// An AF_XDP socket with its UMEM, bound to one interface queue.
///
/// Not thread-safe by design (one per endpoint, driven by its progress
/// thread); it is `Send`.
pub struct Link {
    fill: Ring<u64>,
    comp: Ring<u64>,
    rx: Ring<libc::xdp_desc>,
    tx: Ring<libc::xdp_desc>,
    fd: OwnedFd,
    umem: Mmap,
    pool: FramePool,
    /// Encoded frame length of each TX frame, for [`Link::resend`].
    tx_len: Vec<u32>,
    frame_size: u32,
    /// Bound with `XDP_USE_SG`: TX frames are multi-chunk slots and
    /// received datagrams may span several chunks.
    multi_buffer: bool,
    /// Where a multi-chunk datagram is gathered on receive.
    gather: Vec<u8>,
    /// [`LinkConfig::rx_pieces`], and no checksum to verify.
    rx_pieces: bool,
    header_len: usize,
    max_payload: usize,
    iface: IfaceInfo,
    local: LinkAddr,
    mode: BindMode,
    opts: EncodeOptions,
    verify: bool,
    stats: LinkStats,
}

fn setsockopt<T>(fd: RawFd, name: libc::c_int, val: &T) -> io::Result<()> {
    // SAFETY: passes a pointer to a `T` of the size the option expects.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_XDP,
            name,
            (val as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `T` must be a plain C struct for which all-zero bytes are valid.
fn getsockopt<T: Copy>(fd: RawFd, name: libc::c_int) -> io::Result<(T, usize)> {
    // SAFETY: only used with libc's plain-old-data XDP structs.
    let mut val: T = unsafe { std::mem::zeroed() };
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `val`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_XDP,
            name,
            (&mut val as *mut T).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok((val, len as usize))
    }
}

/// Makes sure `needed` bytes may be locked: raises the soft limit to the
/// hard one, or to unlimited if we may. Returns the limit in force.
fn raise_memlock(needed: u64) -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain getrlimit into our struct.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) } != 0 {
        return 0;
    }
    if lim.rlim_cur == libc::RLIM_INFINITY || lim.rlim_cur >= needed {
        return lim.rlim_cur;
    }
    let unlimited = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: plain setrlimit; needs CAP_SYS_RESOURCE to raise the hard limit.
    if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &unlimited) } == 0 {
        return libc::RLIM_INFINITY;
    }
    let to_hard = libc::rlimit {
        rlim_cur: lim.rlim_max,
        rlim_max: lim.rlim_max,
    };
    // SAFETY: raising the soft limit up to the hard limit is always allowed.
    if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &to_hard) } == 0 {
        return lim.rlim_max;
    }
    lim.rlim_cur
}

impl Link {
    /// Opens and binds an AF_XDP socket as configured, and primes the fill
    /// ring. Must run in the network namespace that owns the interface.
    ///
    /// The XDP program is not loaded here: the caller attaches its own
    /// (`ofi-xdp-bpf`) and puts [`Link::fd`] into its XSKMAP.
    pub fn open(cfg: &LinkConfig) -> Result<Self, LinkError> {
        cfg.validate()?;
        let iface = iface::iface_info(&cfg.ifname).map_err(|e| match e.raw_os_error() {
            Some(libc::ENODEV) | Some(libc::ENXIO) => LinkError::InterfaceNotFound {
                ifname: cfg.ifname.clone(),
            },
            _ => LinkError::io("reading interface", e),
        })?;
        let ip = match cfg.ip {
            Some(ip) if iface.addrs.contains(&ip) => ip,
            Some(ip) => {
                return Err(LinkError::NoAddress {
                    ifname: cfg.ifname.clone(),
                    wanted: ip.to_string(),
                });
            }
            None => *iface.addrs.first().ok_or_else(|| LinkError::NoAddress {
                ifname: cfg.ifname.clone(),
                wanted: "IPv4 or IPv6".into(),
            })?,
        };
        let local = LinkAddr {
            mac: iface.mac,
            ip,
            port: cfg.port,
        };
        let header_len = wire::header_len(&ip);
        // A full-MTU frame (Ethernet header + MTU) that does not fit one
        // chunk behind the kernel's RX headroom needs multi-buffer.
        let full_frame = iface.mtu.saturating_add(wire::ETH_HLEN as u32);
        let want_sg =
            cfg.multi_buffer && full_frame.saturating_add(XDP_PACKET_HEADROOM) > cfg.frame_size;
        let chunks = if want_sg {
            slot_chunks(full_frame, cfg.frame_size)
        } else {
            1
        };

        // SAFETY: plain socket call, result checked.
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::EAFNOSUPPORT) => LinkError::Unsupported { source: e },
                _ => LinkError::io("socket(AF_XDP)", e),
            });
        }
        // SAFETY: fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let sfd = fd.as_raw_fd();

        let umem_len = cfg.frame_count as usize * cfg.frame_size as usize;
        let umem = if cfg.huge_pages {
            Mmap::anonymous(umem_len, true).or_else(|_| Mmap::anonymous(umem_len, false))
        } else {
            Mmap::anonymous(umem_len, false)
        }
        .map_err(|e| LinkError::io("mmap UMEM", e))?;

        let needed = umem_len as u64 + 4 * u64::from(cfg.ring_size) * 16 + 4 * 4096;
        let limit = raise_memlock(needed);
        let reg = libc::xdp_umem_reg {
            addr: umem.as_ptr() as u64,
            len: umem.len() as u64,
            chunk_size: cfg.frame_size,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        setsockopt(sfd, libc::XDP_UMEM_REG, &reg).map_err(|e| match e.raw_os_error() {
            Some(libc::ENOBUFS) | Some(libc::ENOMEM) | Some(libc::EPERM) => {
                LinkError::Memlock { needed, limit }
            }
            _ => LinkError::io("setsockopt(XDP_UMEM_REG)", e),
        })?;
        let rs = cfg.ring_size;
        for (opt, what) in [
            (libc::XDP_UMEM_FILL_RING, "setsockopt(XDP_UMEM_FILL_RING)"),
            (
                libc::XDP_UMEM_COMPLETION_RING,
                "setsockopt(XDP_UMEM_COMPLETION_RING)",
            ),
            (libc::XDP_RX_RING, "setsockopt(XDP_RX_RING)"),
            (libc::XDP_TX_RING, "setsockopt(XDP_TX_RING)"),
        ] {
            setsockopt(sfd, opt, &rs).map_err(|e| LinkError::io(what, e))?;
        }
        let (off, len) = getsockopt::<libc::xdp_mmap_offsets>(sfd, libc::XDP_MMAP_OFFSETS)
            .map_err(|e| LinkError::io("getsockopt(XDP_MMAP_OFFSETS)", e))?;
        if len != size_of::<libc::xdp_mmap_offsets>() {
            // Pre-5.4 kernels report offsets without the flags word, i.e. no
            // need_wakeup support; we require it.
            return Err(LinkError::Config(
                "kernel lacks XDP_USE_NEED_WAKEUP (Linux 5.4+ required)".into(),
            ));
        }
        let map_err = |what| move |e| LinkError::io(what, e);
        let fill = Ring::map(sfd, &off.fr, rs, libc::XDP_UMEM_PGOFF_FILL_RING)
            .map_err(map_err("mmap fill ring"))?;
        let comp = Ring::map(sfd, &off.cr, rs, libc::XDP_UMEM_PGOFF_COMPLETION_RING)
            .map_err(map_err("mmap completion ring"))?;
        let rx = Ring::map(sfd, &off.rx, rs, libc::XDP_PGOFF_RX_RING as u64)
            .map_err(map_err("mmap RX ring"))?;
        let tx = Ring::map(sfd, &off.tx, rs, libc::XDP_PGOFF_TX_RING as u64)
            .map_err(map_err("mmap TX ring"))?;

        let mut link = Link {
            fill,
            comp,
            rx,
            tx,
            fd,
            umem,
            pool: FramePool::with_tx_slots(cfg.frame_count, cfg.rx_frames, cfg.frame_size, chunks),
            tx_len: vec![0; cfg.frame_count as usize],
            frame_size: cfg.frame_size,
            multi_buffer: false,
            gather: Vec::new(),
            rx_pieces: cfg.rx_pieces && !cfg.verify_checksums,
            header_len,
            max_payload: max_payload(cfg.frame_size, iface.mtu, &ip),
            iface,
            local,
            mode: BindMode::Copy,
            opts: EncodeOptions {
                udp_checksum_ipv4: cfg.udp_checksum_ipv4,
                ipv4_id: 0,
                ecn: if cfg.ecn_capable { wire::ECT0 } else { 0 },
            },
            verify: cfg.verify_checksums,
            stats: LinkStats::default(),
        };
        // Prime the fill ring before binding so the first packets have room.
        link.refill();
        link.stats.fill_ring_empty = 0; // priming an empty ring is not a stall
        if want_sg {
            match link.bind(cfg, libc::XDP_USE_SG) {
                Ok(()) => {
                    link.multi_buffer = true;
                    // Our TX slot and the peer's chunks (it gathers them the
                    // same way) bound the datagram, besides the MTU.
                    let slot = link.pool.tx_slot_size() as usize;
                    link.max_payload =
                        payload_within_mtu(link.iface.mtu, &ip).min(slot - header_len);
                    if !link.rx_pieces {
                        link.gather.reserve(slot);
                    }
                    return Ok(link);
                }
                // Kernels before 6.6 refuse the flag (EINVAL), and so does a
                // zero-copy driver without multi-buffer support (EOPNOTSUPP):
                // one chunk per datagram then.
                Err(LinkError::Config(_) | LinkError::ZeroCopyUnsupported { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        link.bind(cfg, 0)?;
        Ok(link)
    }

    fn bind(&mut self, cfg: &LinkConfig, extra_flags: u16) -> Result<(), LinkError> {
        let mode_flag = match cfg.bind {
            BindPreference::Auto => 0,
            BindPreference::ZeroCopy => libc::XDP_ZEROCOPY,
            BindPreference::Copy => libc::XDP_COPY,
        };
        let sa = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: mode_flag | libc::XDP_USE_NEED_WAKEUP | extra_flags,
            sxdp_ifindex: self.iface.index,
            sxdp_queue_id: cfg.queue_id,
            sxdp_shared_umem_fd: 0,
        };
        // Rebinding a queue right after its previous socket closed can fail
        // with EBUSY while the kernel releases it: retry for a short while.
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            // SAFETY: binding our socket to a properly filled sockaddr_xdp.
            let rc = unsafe {
                libc::bind(
                    self.fd.as_raw_fd(),
                    (&sa as *const libc::sockaddr_xdp).cast(),
                    size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
                )
            };
            if rc == 0 {
                break;
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EBUSY) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Some(libc::EBUSY) => {
                    return Err(LinkError::QueueBusy {
                        ifname: cfg.ifname.clone(),
                        queue: cfg.queue_id,
                    });
                }
                Some(libc::EOPNOTSUPP) if cfg.bind == BindPreference::ZeroCopy => {
                    return Err(LinkError::ZeroCopyUnsupported {
                        ifname: cfg.ifname.clone(),
                    });
                }
                Some(libc::EINVAL) => {
                    return Err(LinkError::Config(format!(
                        "bind to {} queue {} refused (EINVAL): no such queue, or ring/UMEM \
                         settings the driver rejects",
                        cfg.ifname, cfg.queue_id
                    )));
                }
                _ => return Err(LinkError::io("bind(AF_XDP)", e)),
            }
        }
        let (opts, _) = getsockopt::<libc::xdp_options>(self.fd.as_raw_fd(), libc::XDP_OPTIONS)
            .map_err(|e| LinkError::io("getsockopt(XDP_OPTIONS)", e))?;
        self.mode = if opts.flags & libc::XDP_OPTIONS_ZEROCOPY != 0 {
            BindMode::ZeroCopy
        } else {
            BindMode::Copy
        };
        Ok(())
    }

    // ---------------------------------------------------------------- facts

    /// Our MAC, IP and UDP port.
    pub fn local_addr(&self) -> LinkAddr {
        self.local
    }

    /// The mode the kernel bound the socket in.
    pub fn bind_mode(&self) -> BindMode {
        self.mode
    }

    /// The socket descriptor: put it into the XSKMAP, and `poll()` it.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Interface name, index, MAC, MTU, addresses.
    pub fn iface(&self) -> &IfaceInfo {
        &self.iface
    }

    /// Largest UDP payload one datagram may carry on this link: bounded by
    /// one frame (minus `XDP_PACKET_HEADROOM` and headers) and by the MTU.
    pub fn max_payload(&self) -> usize {
        self.max_payload
    }

    /// Full-size datagrams the kernel can receive before we recycle frames:
    /// the fill ring's frames over the chunks one datagram takes. A reliable
    /// sender's window beyond this can only end in drops at the fill ring
    /// when the receiving process is slow to run.
    pub fn rx_capacity(&self) -> usize {
        let frame = self.header_len + self.max_payload + XDP_PACKET_HEADROOM as usize;
        let per_datagram = frame.div_ceil(self.frame_size as usize).max(1);
        (self.fill.size().min(self.pool.rx_frames()) as usize) / per_datagram
    }

    /// Bytes of Ethernet/IP/UDP headers in front of the payload.
    pub fn header_len(&self) -> usize {
        self.header_len
    }

    /// Frame size in bytes.
    pub fn frame_size(&self) -> u32 {
        self.frame_size
    }

    /// Counters, including a fresh read of the kernel's `XDP_STATISTICS`.
    pub fn stats(&mut self) -> Result<LinkStats, LinkError> {
        let (k, _) = getsockopt::<libc::xdp_statistics>(self.fd.as_raw_fd(), libc::XDP_STATISTICS)
            .map_err(|e| LinkError::io("getsockopt(XDP_STATISTICS)", e))?;
        self.stats.kernel = XdpStatistics {
            rx_dropped: k.rx_dropped,
            rx_invalid_descs: k.rx_invalid_descs,
            tx_invalid_descs: k.tx_invalid_descs,
            rx_ring_full: k.rx_ring_full,
            rx_fill_ring_empty_descs: k.rx_fill_ring_empty_descs,
            tx_ring_empty_descs: k.tx_ring_empty_descs,
        };
        Ok(self.stats)
    }

    /// Received frames the caller currently holds.
    pub fn rx_held(&self) -> u32 {
        self.pool.rx_held()
    }

    /// Free TX frames right now (without reaping).
    pub fn tx_free(&self) -> usize {
        self.pool.tx_free()
    }

    /// Resolves a peer's MAC through the kernel neighbour table (triggering
    /// ARP / neighbour discovery when absent, waiting at most `timeout`).
    pub fn resolve_peer(
        &self,
        ip: IpAddr,
        port: u16,
        timeout: Duration,
    ) -> Result<LinkAddr, LinkError> {
        if ip.is_ipv4() != self.local.ip.is_ipv4() {
            return Err(LinkError::FamilyMismatch);
        }
        let mac = iface::resolve_mac(&self.iface, ip, timeout).map_err(LinkError::Neighbour)?;
        Ok(LinkAddr { mac, ip, port })
    }

    // ------------------------------------------------------------------ TX

    /// Allocates a TX frame (reaping completions first if none is free).
    pub fn alloc_tx(&mut self) -> Option<TxFrame> {
        if self.pool.tx_free() == 0 {
            self.reap_completions();
        }
        self.pool.alloc_tx().map(TxFrame)
    }

    fn frame_slice_mut(&mut self, base: u64, len: usize) -> Option<&mut [u8]> {
        let start = usize::try_from(base).ok()?;
        if start.checked_add(len)? > self.umem.len() {
            return None;
        }
        // SAFETY: in bounds of the UMEM; the caller owns this frame (checked
        // by the pool), so the kernel is not reading or writing it.
        Some(unsafe { std::slice::from_raw_parts_mut(self.umem.as_ptr().add(start), len) })
    }

    fn frame_slice(&self, addr: u64, len: usize) -> Option<&[u8]> {
        let start = usize::try_from(addr).ok()?;
        if start.checked_add(len)? > self.umem.len() {
            return None;
        }
        // SAFETY: in bounds; the frame is owned by userspace (RX held).
        Some(unsafe { std::slice::from_raw_parts(self.umem.as_ptr().add(start), len) })
    }

    /// The payload area of a TX frame ([`Link::max_payload`] bytes, right
    /// after the headers): write the datagram's payload here, once.
    pub fn tx_payload_mut(&mut self, frame: TxFrame) -> Result<&mut [u8], LinkError> {
        self.pool.check_submit(frame.0)?;
        let (hl, max) = (self.header_len, self.max_payload);
        self.frame_slice_mut(frame.0, hl + max)
            .map(|s| &mut s[hl..])
            .ok_or(LinkError::Frame(crate::FrameError::OutOfRange))
    }

    /// Writes the headers for `payload_len` bytes (already in
    /// [`Link::tx_payload_mut`]) to `to`, and queues the frame on the TX ring.
    /// It goes on the wire at the next [`Link::flush`]. The frame stays the
    /// caller's until [`Link::release_tx`].
    pub fn send(
        &mut self,
        frame: TxFrame,
        to: &LinkAddr,
        payload_len: usize,
    ) -> Result<(), LinkError> {
        self.pool.check_submit(frame.0)?;
        if payload_len > self.max_payload {
            return Err(LinkError::PayloadTooLarge {
                len: payload_len,
                max: self.max_payload,
            });
        }
        if to.ip.is_ipv4() != self.local.ip.is_ipv4() {
            return Err(LinkError::FamilyMismatch);
        }
        if self.tx.free() < self.descs_for(self.header_len + payload_len) {
            return Err(LinkError::TxRingFull);
        }
        self.opts.ipv4_id = self.opts.ipv4_id.wrapping_add(1);
        let (local, opts, hl) = (self.local, self.opts, self.header_len);
        let buf = self
            .frame_slice_mut(frame.0, hl + payload_len)
            .ok_or(LinkError::Frame(crate::FrameError::OutOfRange))?;
        let len =
            wire::encode_headers(buf, &local, to, payload_len, &opts).map_err(|e| match e {
                wire::EncodeError::FamilyMismatch => LinkError::FamilyMismatch,
                wire::EncodeError::TooLong => LinkError::PayloadTooLarge {
                    len: payload_len,
                    max: self.max_payload,
                },
            })?;
        let idx = (frame.0 / u64::from(self.frame_size)) as usize;
        if let Some(l) = self.tx_len.get_mut(idx) {
            *l = len as u32;
        }
        self.push_tx(frame.0, len as u32)?;
        self.stats.tx_bytes += payload_len as u64;
        Ok(())
    }

    /// Queues the same frame again, unchanged (a retransmission), without
    /// touching its contents. Allowed while the caller holds the frame, even
    /// if an earlier submission has not completed yet.
    pub fn resend(&mut self, frame: TxFrame) -> Result<(), LinkError> {
        self.pool.check_submit(frame.0)?;
        let idx = (frame.0 / u64::from(self.frame_size)) as usize;
        let len = self.tx_len.get(idx).copied().unwrap_or(0);
        if len == 0 {
            return Err(LinkError::Frame(crate::FrameError::WrongState));
        }
        if self.tx.free() < self.descs_for(len as usize) {
            return Err(LinkError::TxRingFull);
        }
        self.push_tx(frame.0, len)?;
        self.stats.tx_bytes += u64::from(len) - self.header_len as u64;
        Ok(())
    }

    /// TX descriptors a frame of `len` bytes takes: one per chunk.
    fn descs_for(&self, len: usize) -> u32 {
        (len as u32).div_ceil(self.frame_size).max(1)
    }

    /// Queues one frame: a descriptor per chunk it covers, all but the last
    /// flagged `XDP_PKT_CONTD` (af_xdp.rst, "XDP_USE_SG"). The caller checked
    /// that the TX ring has room for all of them.
    fn push_tx(&mut self, addr: u64, len: u32) -> Result<(), LinkError> {
        self.pool.submitted(addr)?;
        let fs = self.frame_size;
        let n = len.div_ceil(fs).max(1);
        for i in 0..n {
            let chunk_len = (len - i * fs).min(fs);
            let more = i + 1 < n;
            self.tx.write(
                i,
                libc::xdp_desc {
                    addr: addr + u64::from(i * fs),
                    len: chunk_len,
                    options: if more { libc::XDP_PKT_CONTD } else { 0 },
                },
            );
        }
        self.tx.submit(n);
        self.stats.tx_packets += 1;
        Ok(())
    }

    /// Gives a TX frame back; it returns to the free pool once every
    /// submission of it has completed.
    pub fn release_tx(&mut self, frame: TxFrame) -> Result<(), LinkError> {
        Ok(self.pool.release_tx(frame.0)?)
    }

    /// Whether a frame has submissions the kernel has not completed yet.
    pub fn tx_in_flight(&self, frame: TxFrame) -> bool {
        self.pool.tx_in_flight(frame.0)
    }

    /// Convenience: allocate, copy `payload`, send, release.
    pub fn send_copy(&mut self, to: &LinkAddr, payload: &[u8]) -> Result<(), LinkError> {
        if payload.len() > self.max_payload {
            return Err(LinkError::PayloadTooLarge {
                len: payload.len(),
                max: self.max_payload,
            });
        }
        let f = self.alloc_tx().ok_or(LinkError::NoTxFrame)?;
        let r = self
            .tx_payload_mut(f)
            .map(|buf| buf[..payload.len()].copy_from_slice(payload))
            .and_then(|()| self.send(f, to, payload.len()));
        self.release_tx(f)?;
        r
    }

    /// Wakes the kernel to transmit what is queued, when it asked for it
    /// (`need_wakeup`; always the case in copy mode, where `sendto` does the
    /// transmit work, at most 32 descriptors per call — hence the loop).
    pub fn flush(&mut self) -> Result<(), LinkError> {
        for _ in 0..(self.tx.size() / 16).max(8) {
            if self.tx.outstanding() == 0 || !self.tx.needs_wakeup() {
                return Ok(());
            }
            self.stats.tx_kicks += 1;
            // SAFETY: sendto with no buffer is the documented TX kick.
            let rc = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            if rc < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    // More to send (copy-mode batch limit): go again.
                    Some(libc::EAGAIN) => continue,
                    // Transient: the driver/skb path is busy or out of
                    // buffers; what is left goes out on the next flush.
                    Some(libc::EBUSY) | Some(libc::ENOBUFS) => return Ok(()),
                    _ => return Err(LinkError::io("sendto (TX kick)", e)),
                }
            }
        }
        Ok(())
    }

    /// Reaps the TX completions; returns how many frames (datagrams) they
    /// completed.
    pub fn reap_completions(&mut self) -> usize {
        let mut total = 0;
        loop {
            let n = self.comp.available().min(BURST as u32);
            if n == 0 {
                return total;
            }
            for i in 0..n {
                let addr = self.comp.read(i);
                let base = self.pool.base(addr);
                // A multi-chunk frame completes one descriptor per chunk, all
                // at once; its first chunk (the slot start) stands for it.
                if addr != base && self.multi_buffer {
                    continue;
                }
                if self.pool.completed(base).is_err() {
                    self.stats.bad_descs += 1;
                }
                self.stats.tx_completions += 1;
                total += 1;
            }
            self.comp.release(n);
        }
    }

    // ------------------------------------------------------------------ RX

    /// Hands up to `max` (≤ [`BURST`]) received datagrams to `f`, then tops
    /// the fill ring up. Frames that are not UDP to our IP and port are
    /// counted and recycled without reaching `f`. A datagram that arrived in
    /// several chunks (multi-buffer) is handed over in them
    /// ([`LinkConfig::rx_pieces`]) or gathered into one buffer first.
    pub fn recv<F>(&mut self, max: usize, mut f: F) -> usize
    where
        F: FnMut(RxDatagram<'_>) -> RxAction,
    {
        let avail = self.rx.available();
        if avail == 0 {
            self.refill();
            self.wake_rx_if_needed();
            return 0;
        }
        let max = max.min(BURST);
        let (mut i, mut seen, mut delivered) = (0u32, 0usize, 0usize);
        while i < avail && seen < max {
            let d = self.rx.read(i);
            seen += 1;
            if d.options & libc::XDP_PKT_CONTD == 0 {
                i += 1;
                delivered += usize::from(self.deliver_single(d, &mut f));
                continue;
            }
            // The kernel publishes all descriptors of a packet at once, so its
            // last one (no CONTD) is already in the ring.
            let Some(last) =
                (i..avail).find(|&j| self.rx.read(j).options & libc::XDP_PKT_CONTD == 0)
            else {
                if i == 0 && avail == self.rx.size() {
                    // A full ring of one unterminated packet can never
                    // complete: drop it rather than stall receive for good.
                    self.drop_descs(0, avail);
                    i = avail;
                }
                break;
            };
            delivered += usize::from(if self.rx_pieces {
                self.deliver_pieces(i, last, &mut f)
            } else {
                self.deliver_gathered(i, last, &mut f)
            });
            i = last + 1;
        }
        self.rx.release(i);
        self.refill();
        delivered
    }

    /// One datagram in one chunk: handed over in place.
    fn deliver_single<F>(&mut self, d: libc::xdp_desc, f: &mut F) -> bool
    where
        F: FnMut(RxDatagram<'_>) -> RxAction,
    {
        if self.pool.received(d.addr).is_err() {
            self.stats.bad_descs += 1;
            return false;
        }
        let bytes = self.frame_slice(d.addr, d.len as usize).unwrap_or(&[]);
        let (off, len, src, ce) = match self.classify(bytes, bytes.len()) {
            Ok(c) => c,
            Err(bad_csum) => {
                self.count_bad(bad_csum);
                let _ = self.pool.release_rx(d.addr);
                return false;
            }
        };
        self.stats.rx_packets += 1;
        self.stats.rx_bytes += len as u64;
        let frame = RxFrame {
            addr: d.addr,
            payload_offset: off as u32,
            payload_len: len as u32,
        };
        let payload = self.frame_slice(d.addr + off as u64, len).unwrap_or(&[]);
        let dgram = RxDatagram {
            frame: Some(frame),
            src,
            payload,
            pieces: &[payload],
            ce,
        };
        if f(dgram) == RxAction::Consume {
            let _ = self.pool.release_rx(d.addr);
        }
        true
    }

    /// One datagram in RX descriptors `first..=last` (multi-buffer): copied
    /// into `self.gather`, its chunks recycled at once.
    fn deliver_gathered<F>(&mut self, first: u32, last: u32, f: &mut F) -> bool
    where
        F: FnMut(RxDatagram<'_>) -> RxAction,
    {
        let mut gather = std::mem::take(&mut self.gather);
        gather.clear();
        let mut ok = true;
        for j in first..=last {
            let d = self.rx.read(j);
            if self.pool.received(d.addr).is_err() {
                self.stats.bad_descs += 1;
                ok = false;
                continue;
            }
            match self.frame_slice(d.addr, d.len as usize) {
                Some(b) if ok => gather.extend_from_slice(b),
                _ => ok = false,
            }
            let _ = self.pool.release_rx(d.addr);
        }
        let mut delivered = false;
        if ok {
            match self.classify(&gather, gather.len()) {
                Ok((off, len, src, ce)) => match gather.get(off..off + len) {
                    Some(payload) => {
                        self.stats.rx_packets += 1;
                        self.stats.rx_bytes += len as u64;
                        delivered = true;
                        let _ = f(RxDatagram {
                            frame: None,
                            src,
                            payload,
                            pieces: &[payload],
                            ce,
                        });
                    }
                    None => self.stats.rx_malformed += 1,
                },
                Err(bad_csum) => self.count_bad(bad_csum),
            }
        } else {
            self.stats.rx_malformed += 1;
        }
        self.gather = gather;
        delivered
    }

    /// One datagram in RX descriptors `first..=last` (multi-buffer), handed
    /// over in its chunks ([`LinkConfig::rx_pieces`]): the headers are read
    /// from the first, the UDP payload is the rest of the first and all of
    /// the others (cut at the UDP length). The chunks are recycled once the
    /// callback returns.
    fn deliver_pieces<F>(&mut self, first: u32, last: u32, f: &mut F) -> bool
    where
        F: FnMut(RxDatagram<'_>) -> RxAction,
    {
        let n = (last - first + 1) as usize;
        if n > MAX_RX_PIECES {
            self.drop_descs(first, last + 1);
            return false;
        }
        let mut descs = [(0u64, 0usize); MAX_RX_PIECES];
        let mut ok = true;
        for (k, j) in (first..=last).enumerate() {
            let d = self.rx.read(j);
            if self.pool.received(d.addr).is_err() {
                self.stats.bad_descs += 1;
                ok = false;
            }
            descs[k] = (d.addr, d.len as usize);
        }
        let total: usize = descs[..n].iter().map(|&(_, len)| len).sum();
        // The headers must lie in the first chunk (decode_head checks), so
        // the payload starts there.
        let verdict = if ok {
            let head = self.frame_slice(descs[0].0, descs[0].1).unwrap_or(&[]);
            self.classify(head, total)
        } else {
            Err(false)
        };
        if let Ok((off, len, src, ce)) = verdict {
            let mut pieces: [&[u8]; MAX_RX_PIECES] = [&[]; MAX_RX_PIECES];
            // Chunk k's share of the payload: what lies within
            // [off, off + len) of the frame.
            let (mut at, mut count) = (0usize, 0usize);
            for &(addr, dlen) in &descs[..n] {
                let lo = off.max(at).min(at + dlen);
                let hi = (off + len).min(at + dlen).max(lo);
                if hi > lo
                    && let Some(b) = self.frame_slice(addr + (lo - at) as u64, hi - lo)
                {
                    pieces[count] = b;
                    count += 1;
                }
                at += dlen;
            }
            let _ = f(RxDatagram {
                frame: None,
                src,
                payload: pieces[0],
                pieces: &pieces[..count],
                ce,
            });
        }
        for &(addr, _) in &descs[..n] {
            let _ = self.pool.release_rx(addr);
        }
        match verdict {
            Ok((_, len, _, _)) => {
                self.stats.rx_packets += 1;
                self.stats.rx_bytes += len as u64;
                true
            }
            Err(bad_csum) => {
                self.count_bad(bad_csum);
                false
            }
        }
    }

    /// Recycles RX descriptors `first..end` unread, counted as malformed.
    fn drop_descs(&mut self, first: u32, end: u32) {
        for j in first..end {
            let d = self.rx.read(j);
            if self.pool.received(d.addr).is_ok() {
                let _ = self.pool.release_rx(d.addr);
            } else {
                self.stats.bad_descs += 1;
            }
        }
        self.stats.rx_malformed += 1;
    }

    fn count_bad(&mut self, bad_csum: bool) {
        if bad_csum {
            self.stats.rx_bad_checksum += 1;
        } else {
            self.stats.rx_malformed += 1;
        }
    }

    /// Decodes a received frame of `frame_len` bytes, of which `head` (all
    /// of it, or a multi-buffer frame's first chunk) holds the headers, into
    /// (payload offset, payload length, sender); `Err(true)` = bad checksum,
    /// `Err(false)` = anything else that is not for us.
    /// Payload offset and length, source, and whether the datagram was
    /// marked CE; `Err(bad checksum)` for one that is not ours.
    fn classify(&self, head: &[u8], frame_len: usize) -> Result<Classified, bool> {
        let d = wire::decode_head(head, frame_len, self.verify)
            .map_err(|e| e == wire::DecodeError::BadChecksum)?;
        if d.dst_port != self.local.port || d.dst_ip != self.local.ip {
            return Err(false);
        }
        Ok((d.payload_offset, d.payload_len, d.src, d.ecn == wire::CE))
    }

    /// Payload of a held received frame.
    pub fn rx_payload(&self, frame: RxFrame) -> Result<&[u8], LinkError> {
        if !self.pool.is_rx_held(frame.addr) {
            return Err(LinkError::Frame(crate::FrameError::WrongState));
        }
        self.frame_slice(
            frame.addr + u64::from(frame.payload_offset),
            frame.payload_len(),
        )
        .ok_or(LinkError::Frame(crate::FrameError::OutOfRange))
    }

    /// Returns a held received frame to the fill ring.
    pub fn release_rx(&mut self, frame: RxFrame) -> Result<(), LinkError> {
        self.pool.release_rx(frame.addr)?;
        self.refill();
        Ok(())
    }

    /// Tops the fill ring up from the free RX frames (receive silently stops
    /// when it runs dry). Returns how many frames were added.
    pub fn refill(&mut self) -> usize {
        let free = self.fill.free();
        if free == self.fill.size() {
            self.stats.fill_ring_empty += 1;
        }
        let n = free.min(self.pool.rx_free() as u32);
        for i in 0..n {
            if let Some(addr) = self.pool.take_for_fill() {
                self.fill.write(i, addr);
            }
        }
        if n > 0 {
            self.fill.submit(n);
        }
        n as usize
    }

    fn wake_rx_if_needed(&mut self) {
        if self.fill.needs_wakeup() {
            // SAFETY: zero-length non-blocking recvfrom is the documented RX
            // wakeup (af_xdp.rst, XDP_USE_NEED_WAKEUP); errors are harmless.
            unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    std::ptr::null_mut(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                );
            }
        }
    }

    /// Blocks in `poll()` until the RX ring has entries or `timeout` passes.
    /// Returns whether it is readable.
    pub fn wait_readable(&mut self, timeout: Duration) -> Result<bool, LinkError> {
        if self.rx.available() > 0 {
            return Ok(true);
        }
        self.refill();
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: poll on one valid pollfd.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(false);
            }
            return Err(LinkError::io("poll", e));
        }
        Ok(self.rx.available() > 0)
    }
}
