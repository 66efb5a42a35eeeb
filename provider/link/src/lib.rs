//! # ofi-xdp-link — the AF_XDP link
//!
//! One [`Link`] is one AF_XDP socket bound to one interface queue, with its
//! own UMEM, its four rings, and Ethernet + IPv4/IPv6 + UDP framing done in
//! software. It carries datagrams; it knows nothing of tags, sequence
//! numbers or retransmission policy. The XDP program that steers our UDP
//! port into the socket is loaded by `ofi-xdp-bpf`; put [`Link::fd`] into its
//! XSKMAP.
//!
//! ## Frames and who owns them
//!
//! The UMEM is `frame_count` frames of `frame_size` (2048 or 4096) bytes,
//! named by their byte offset ("address"). The first `rx_frames` serve
//! receive, the rest transmit (see [`FramePool`]).
//!
//! **Transmit** (one userspace copy, retransmission without a copy):
//! ```text
//! let f = link.alloc_tx()?;                       // TxFrame (Copy, = UMEM address)
//! link.tx_payload_mut(f)?[..n].copy_from_slice(..);  // the one copy
//! link.send(f, &peer, n)?;                        // headers + TX ring descriptor
//! link.flush()?;                                  // sendto kick when need_wakeup
//! // later, a retransmission of the very same bytes:
//! link.resend(f)?; link.flush()?;
//! // when the data is acknowledged:
//! link.release_tx(f)?;   // back to the pool once all submissions completed
//! link.reap_completions();
//! ```
//! A frame returns to the free pool only after the completion ring reported
//! every submission of it **and** the caller released it.
//! [`TxFrame::from_addr`] rebuilds a handle from a stored address; every
//! call validates the frame's state, so a stale address is an error, never
//! memory corruption.
//!
//! **Receive**:
//! ```text
//! link.recv(64, |d: RxDatagram| {   // d.src (mac, ip, port), d.payload (in place)
//!     ...; RxAction::Consume        // frame straight back to the fill ring
//!     // or RxAction::Hold: keep d.frame (Some(RxFrame), Copy; None for a
//!     // multi-buffer datagram, gathered and not holdable), read it later with
//!     // link.rx_payload(frame), return it with link.release_rx(frame)
//! });
//! ```
//! `recv` refills the fill ring after every batch (receive silently stops
//! when it runs dry) and issues the `need_wakeup` wakeup when the ring is
//! empty. [`Link::wait_readable`] blocks in `poll()`.
//!
//! Peers are [`LinkAddr`] (MAC, IP, UDP port); [`Link::resolve_peer`] gets the
//! MAC from the kernel neighbour table, triggering resolution when absent.
//!
//! Everything that touches the kernel uses the calling thread's network
//! namespace: open the link (and resolve peers) in the namespace that owns
//! the interface.

mod error;
mod frames;
mod iface;
mod link;
mod ring;
pub mod wire;

pub use error::LinkError;
pub use frames::{FrameError, FramePool};
pub use iface::{
    IfAddr, IfAddrKind, IfaceInfo, addr_rank, if_addrs, iface_info, neighbour_lookup, resolve_mac,
};
pub use link::{
    BURST, BindMode, BindPreference, Link, LinkConfig, LinkStats, RxAction, RxDatagram, RxFrame,
    TxFrame, XDP_PACKET_HEADROOM, XdpStatistics, max_payload,
};
pub use wire::{LinkAddr, MacAddr};
