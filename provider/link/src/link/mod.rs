//! The AF_XDP socket and what it carries:
//!
//! - this file: [`Link`] itself, what it knows about itself, its counters;
//! - `open.rs`: set-up (`Documentation/networking/af_xdp.rst`): the UMEM,
//!   the four rings, `bind`;
//! - `tx.rs`: transmit — frames, the TX ring, the kick, completions;
//! - `rx.rs`: receive — the RX ring, decoding, the fill ring.

mod group;
mod open;
mod rx;
mod tx;

use std::net::IpAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Duration;

pub use group::{GroupJoin, SharedOpen, Tidy};
pub use rx::RxDatagram;
pub use tx::TxFrame;

use crate::config::{BindMode, XDP_PACKET_HEADROOM};
use crate::error::LinkError;
use crate::iface::{self, IfaceInfo};
use crate::ring::Ring;
use crate::umem::Umem;
use crate::wire::{EncodeOptions, LinkAddr, MacAddr};
use open::getsockopt;

/// Largest burst handled per ring operation.
const BURST: usize = 64;

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
    /// Times busy polling stopped being preferred because the driver did
    /// not transmit from it ([`Link::flush`]): 0 or 1.
    pub busy_poll_tx_stalls: u64,
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
    umem: Umem,
    frame_size: u32,
    /// Bound with `XDP_USE_SG`: TX frames are multi-chunk slots and
    /// received datagrams may span several chunks.
    multi_buffer: bool,
    /// Where a multi-chunk datagram is gathered on receive.
    gather: Vec<u8>,
    /// [`crate::LinkConfig::rx_pieces`], and no checksum to verify.
    rx_pieces: bool,
    header_len: usize,
    max_payload: usize,
    iface: IfaceInfo,
    local: LinkAddr,
    mode: BindMode,
    queue: u32,
    opts: EncodeOptions,
    verify: bool,
    stats: LinkStats,
    /// Busy polling is on: every receive pass that finds the RX ring empty
    /// and every flush call into the socket, which runs the driver's poll.
    busy_poll: bool,
    /// Why busy polling was asked for and is off (the kernel refused an
    /// option).
    busy_poll_error: Option<String>,
    /// Watching for a driver that never transmits while busy polling is
    /// preferred (`tx.rs`): TX completions seen, and since when frames
    /// have waited with no completion.
    busy_tx_watch: (u64, Option<std::time::Instant>),
    /// The UMEM's memfd, when it is one (a UMEM group's): other members
    /// take it from us to join.
    umem_fd: Option<OwnedFd>,
    /// Our place in the queue's UMEM group (`group.rs`), if in one.
    membership: Option<group::Membership>,
}

impl Link {
    /// Our MAC, IP and UDP port.
    pub fn local_addr(&self) -> LinkAddr {
        self.local
    }

    /// The mode the kernel bound the socket in.
    pub fn bind_mode(&self) -> BindMode {
        self.mode
    }

    /// The queue the socket is bound to.
    pub fn queue(&self) -> u32 {
        self.queue
    }

    /// Whether the socket busy-polls (`LinkConfig::busy_poll` asked and the
    /// kernel took every option), or why not when it was asked.
    pub fn busy_polling(&self) -> Result<bool, &str> {
        match &self.busy_poll_error {
            Some(e) => Err(e),
            None => Ok(self.busy_poll),
        }
    }

    /// The socket descriptor: put it into the XSKMAP, and `poll()` it.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
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
        (self.fill.size().min(self.umem.pool.rx_frames()) as usize) / per_datagram
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

    /// A neighbour's MAC if the kernel neighbour table has it now (one
    /// `RTM_GETNEIGH` dump, no resolution started, no waiting). `ip` is a
    /// next hop ([`Link::next_hop`]): a peer on the link, or a router.
    pub fn neighbour(&self, ip: IpAddr) -> Result<Option<MacAddr>, LinkError> {
        iface::neighbour_lookup(self.iface.index, ip).map_err(LinkError::Neighbour)
    }

    /// Whose MAC frames to `ip` carry, as the kernel routes it (one
    /// `RTM_GETROUTE`, [`crate::route_get`]): the gateway of its route, or
    /// `ip` itself when it is on the link. A destination the kernel routes
    /// through another interface, or not at all, is [`LinkError::Route`].
    pub fn next_hop(&self, ip: IpAddr) -> Result<IpAddr, LinkError> {
        if ip.is_ipv4() != self.local.ip.is_ipv4() {
            return Err(LinkError::FamilyMismatch);
        }
        let route = crate::route::route_get(ip).map_err(|e| {
            LinkError::Route(std::io::Error::new(e.kind(), format!("to {ip}: {e}")))
        })?;
        if route.oif != self.iface.index {
            return Err(LinkError::Route(std::io::Error::new(
                std::io::ErrorKind::NetworkUnreachable,
                format!(
                    "the kernel routes {ip} through interface index {}, not {} ({})",
                    route.oif, self.iface.index, self.iface.name
                ),
            )));
        }
        Ok(route.next_hop(ip))
    }

    /// Resolves a peer's link address: its route's next hop
    /// ([`Link::next_hop`]) and that hop's MAC from the kernel neighbour
    /// table (triggering ARP / neighbour discovery when absent, waiting at
    /// most `timeout`). The MAC is the router's for a peer behind one.
    pub fn resolve_peer(
        &self,
        ip: IpAddr,
        port: u16,
        timeout: Duration,
    ) -> Result<LinkAddr, LinkError> {
        let hop = self.next_hop(ip)?;
        let mac = self.resolve_neighbour(hop, timeout)?;
        Ok(LinkAddr { mac, ip, port })
    }

    /// The MAC of `ip` on this link's interface, from the kernel neighbour
    /// table (triggering ARP / neighbour discovery when absent, waiting at
    /// most `timeout`), whatever the routes say: `ip` is taken to be on the
    /// link.
    pub fn resolve_neighbour(&self, ip: IpAddr, timeout: Duration) -> Result<MacAddr, LinkError> {
        iface::resolve_mac(&self.iface, ip, timeout).map_err(LinkError::Neighbour)
    }
}
