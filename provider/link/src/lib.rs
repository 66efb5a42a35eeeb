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
//! The UMEM is `frame_count` chunks of `frame_size` (2048 or 4096) bytes,
//! named by their byte offset ("address"). The first `rx_frames` serve
//! receive, the rest transmit (with multi-buffer, in slots of several
//! consecutive chunks).
//!
//! **Transmit** (one userspace copy):
//! ```text
//! let f = link.alloc_tx()?;                          // TxFrame (Copy)
//! link.tx_payload_mut(f)?[..n].copy_from_slice(..);  // the one copy
//! link.send(f, &peer, n)?;                           // headers + TX ring descriptor(s)
//! link.release_tx(f)?;                               // ours no longer; the kernel's until sent
//! link.flush()?;                                     // sendto kick when need_wakeup
//! link.reap_completions();                           // sent frames back to the pool
//! ```
//! A frame returns to the free pool only after the completion ring reported
//! it **and** the caller released it. Every call checks the frame's state,
//! so a stale handle is an error, never a write into memory the kernel owns.
//!
//! **Receive**:
//! ```text
//! link.recv(64, |d: RxDatagram| {  // d.src (mac, ip, port), d.payload / d.pieces (in place)
//!     ...                          // the frames go back to the fill ring afterwards
//! });
//! ```
//! `recv` refills the fill ring after every batch (receive silently stops
//! when it runs dry) and issues the `need_wakeup` wakeup when the ring is
//! empty. [`Link::wait_readable`] blocks in `poll()`.
//!
//! Peers are [`LinkAddr`] (MAC, IP, UDP port); the MAC is the next hop's:
//! [`Link::resolve_peer`] asks the kernel for its route to the peer's IP
//! ([`route_get`], `RTM_GETROUTE`) and takes the gateway's MAC, or the
//! peer's own when it is on the link, from the kernel neighbour table,
//! triggering resolution when absent.
//!
//! Everything that touches the kernel uses the calling thread's network
//! namespace: open the link (and resolve peers) in the namespace that owns
//! the interface.
//!
//! Files: `config.rs` (what a link is opened with), `link/` (the socket:
//! `open.rs`, `tx.rs`, `rx.rs`; `group.rs`: sharing the UMEM with other
//! processes' links on the queue), `group/` (the shared group file),
//! `umem.rs` and `frames.rs` (the UMEM and
//! who owns each frame), `ring.rs` (the four rings), `wire.rs` (framing and
//! checksums), `iface.rs` (interfaces, addresses, neighbours), `route.rs`
//! (the kernel's route to a destination: output interface and gateway), `ethtool.rs`
//! (the ethtool ioctl: queue counts), `ntuple/` (flow steering rules that
//! send a port to a queue, and who owns them), `error.rs`.

mod config;
mod error;
pub mod ethtool;
mod frames;
pub mod group;
mod iface;
mod link;
pub mod ntuple;
mod ring;
mod route;
mod umem;
pub mod wire;

pub use config::{
    BindMode, BindPreference, BusyPoll, LinkConfig, XDP_PACKET_HEADROOM, max_payload,
    payload_within_mtu,
};
pub use error::LinkError;
pub use frames::FrameError;
pub use iface::{IfAddr, IfAddrKind, addr_rank, if_addrs};
pub use link::{GroupJoin, Link, LinkStats, RxDatagram, SharedOpen, Tidy, TxFrame, XdpStatistics};
pub use route::{Route, route_get};
pub use wire::{LinkAddr, MacAddr};
