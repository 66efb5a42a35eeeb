//! # ofi-xdp-reliability — a sans-IO reliable-datagram engine with libfabric messaging
//!
//! The engine turns an unreliable datagram link (UDP frames in AF_XDP UMEM) into
//! reliable, ordered (`FI_ORDER_SAS`) message delivery with the receive-side
//! semantics of libfabric's `fi_msg(3)`/`fi_tagged(3)`: tagged and untagged
//! queues, tag/ignore matching, directed receive, an unexpected queue with a
//! memory budget, `FI_PEEK`/`FI_CLAIM`/`FI_DISCARD`, cancel, remote CQ data,
//! inject, `FI_MULTI_RECV`, truncation, and completion levels. The wire format
//! is specified in `PROTOCOL.md`.
//!
//! It does no I/O (after quinn-proto): no sockets, clocks, threads or global
//! state. Time ([`Instant`]) and randomness ([`Config::seed`],
//! [`Config::incarnation`]) are passed in, so runs are reproducible.
//!
//! ## Driving it
//!
//! ```
//! use ofi_xdp_reliability::*;
//! # struct App; impl SendBuffers for App { fn read(&mut self, _: u64, _: usize, d: &mut [u8]) { d.fill(7) } }
//! # impl RecvBuffers for App { fn write(&mut self, _: u64, _: usize, _: &[u8]) {} }
//! let mut a: Engine<u32> = Engine::new(Config { incarnation: 1, seed: 1, ..Config::default() });
//! let mut b: Engine<u32> = Engine::new(Config { incarnation: 2, seed: 2, ..Config::default() });
//! let mut app = App;
//! let now = Instant(0);
//! b.post_recv(RecvOp { token: 1, len: 64, src: None, tag: None, multi_recv: None }, &mut app).unwrap();
//! a.post_send(now, SendOp { token: 9, dst: 2, payload: Payload::Buffer { len: 16 }, tag: None,
//!     data: None, level: CompletionLevel::Transmit, fence: false }).unwrap();
//! let mut frame = [0u8; 1472];
//! // The link: move datagrams both ways until nothing is left to send.
//! loop {
//!     let mut moved = false;
//!     while let Some(t) = a.poll_transmit(now, &mut frame, &mut app) {
//!         b.handle_datagram(now, 1, &frame[..t.len], &mut app); moved = true;
//!     }
//!     while let Some(t) = b.poll_transmit(now, &mut frame, &mut app) {
//!         a.handle_datagram(now, 2, &frame[..t.len], &mut app); moved = true;
//!     }
//!     if !moved { break }
//! }
//! assert!(matches!(b.poll_event(), Some(Event::Completion(c)) if c.token == 1 && c.len == 16));
//! # a.handle_timeout(Instant(1_000_000_000));
//! ```
//!
//! Inputs: [`Engine::post_send`], [`Engine::post_recv`], [`Engine::cancel_recv`],
//! [`Engine::peek`], [`Engine::claim`], [`Engine::handle_datagram`],
//! [`Engine::handle_timeout`]. Outputs, pulled: [`Engine::poll_transmit`] (until
//! `None` after each input), [`Engine::poll_timeout`] (when to call
//! `handle_timeout` next), [`Engine::poll_event`] (completions).
//!
//! ## Copies
//!
//! One copy per direction. Sends name their buffer by a token; at every
//! (re)transmission the engine asks [`SendBuffers::read`] for the bytes of one
//! segment, written straight into the caller's frame, then computes the CRC over
//! the frame. On receive, [`RecvBuffers::write`] copies payload from the
//! received frame straight into the matched receive buffer. Exceptions, each a
//! second copy and each bounded: inject payloads (copied at post time, bounded
//! by [`Config::inject_budget`]), unexpected eager messages (buffered until a
//! receive matches, bounded by [`Config::unexpected_budget`]; messages above
//! [`Config::eager_limit`] use rendezvous and are never buffered), and packets
//! that arrive out of order (held until the gap fills, bounded by
//! [`Config::reorder_budget`]).
//!
//! Between processes of one host a rendezvous message can take no copy
//! through the engine at all: [`SendBuffers::pull_offer`] lets the request
//! carry what the receiver needs to copy the message out of the sender's
//! memory itself, and [`RecvBuffers::pull`] does that copy (PROTOCOL.md
//! §6.7); the engine only decides when, and falls back to sending the data
//! when the pull fails.
//!
//! ## Peers
//!
//! Peers are named by a caller-chosen key `P: Copy + Eq + Hash`. The key of a
//! remote address must be stable for the engine's lifetime (use one key per
//! remote address, e.g. an index into the provider's own address table,
//! whether or not the address is in the application's AV; completions carry
//! it back as the message's source). State is created on first use and costs
//! [`IDLE_PEER_BYTES`] bytes per idle peer.
//!
//! Sending to oneself works by feeding the engine its own datagrams (with
//! `from` = the key it sent to): the two directions of a peer are independent.
//!
//! Limits: [`MAX_MSG_SIZE`] = 1 GiB per message.
//!
//! ## Inside
//!
//! [`Engine`] is a thin router over one session per peer (handshake,
//! sequence numbers, acks, retransmission, reordering, and the sends queued
//! to that peer) and one matcher (posted and unexpected receives, multi-recv,
//! the receive side of rendezvous and delivery-complete); in-order messages
//! go up from a session to the matcher, control and messages still to come
//! go down. `README.md` draws the rooms. With the `sim` feature, `sim`
//! runs engines over a deterministic simulated network (tests, fuzzing,
//! benchmarks).

#![forbid(unsafe_op_in_unsafe_fn)]

mod api;
pub mod cm;
mod crc;
mod engine;
mod rma;
mod rng;
#[cfg(any(test, feature = "sim"))]
pub mod sim;
mod slab;
mod time;
pub mod wire;

pub use api::*;
pub use crc::crc32c;
pub use engine::{DirectMessage, DirectRefused, Engine};
pub use rma::{Access, MAX_ATOMIC_BYTES, RmaKind, RmaOp, RmaStatus};
#[cfg(any(test, feature = "sim"))]
pub use rng::SplitMix64;
pub use slab::{FxBuild, FxHasher};
pub use time::{Instant, Nanos};

/// Bytes of engine state per idle peer with a `u64` key: the peer record plus
/// its hash-map entry (key + index). Checked by a test.
pub const IDLE_PEER_BYTES: usize = engine::idle_peer_bytes::<u64>();

/// Bytes of the queue block an active peer adds on the heap (the deques'
/// buffers come on top and grow with the traffic in flight: 32 bytes per
/// packet in flight and 8 bytes per reorder slot).
pub const ACTIVE_PEER_EXTRA_BYTES: usize = engine::active_peer_block_bytes::<u64>();
