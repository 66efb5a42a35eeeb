//! FI_EP_RDM: reliable, ordered (FI_ORDER_SAS) messages through the sans-IO
//! reliability engine, whose datagrams travel over the AF_XDP link.
//!
//! The engine names buffers by token: [`SendSide`]/[`RecvSide`] map a token
//! to the application's iov, so payload is copied once per direction
//! (application buffer ↔ UMEM frame). Peers are engine keys `u32`: indices
//! into a table of addresses, stable for the endpoint's lifetime. Sending
//! to ourselves feeds our own datagrams straight back into the engine.

use std::collections::HashMap;

use ofi_xdp_link::LinkError;
use ofi_xdp_reliability as rel;
use rel::{Engine, Event, Instant as RelInstant};

use super::peers::Peers;
use super::port::{Port, link_err};
use super::published::{self, Published};
use crate::abi::{Errno, Result};
use crate::datapath::{
    Completion, CompletionError, DataPath, Direction, DpCompletion, Iov, OpenArgs, Payload, Peek,
    RxOp, TxOp, WaitState, contiguous, gather, scatter,
};
use crate::probe::{self, Stage};
use crate::sys::*;
use crate::xdp_warn;

const RX_BATCH: usize = 64;
/// Datagrams sent per progress pass at most (then the next pass continues).
const TX_BATCH: usize = 256;
/// Datagrams written to the TX ring between two kicks. The kernel copies a
/// frame out of the UMEM when kicked: kicking while the frames we just wrote
/// are still in this core's cache, instead of after writing a whole window of
/// them (megabytes, evicted by then), measured ≈ 10 % more bandwidth for
/// 1 MiB messages (medians of alternating runs). 32 is also what one
/// copy-mode `sendto` sends at most (TX_BATCH_SIZE in net/xdp/xsk.c).
const KICK_EVERY: usize = 32;
/// Rounds of `transmit` spent sending CLOSE notices when the endpoint closes:
/// enough for thousands of peers; peers beyond that find out by their own
/// retry limit.
const MAX_CLOSE_ROUNDS: usize = 64;

struct SendState {
    context: usize,
    iov: Iov,
    report: bool,
}

struct RecvState {
    context: usize,
    iov: Iov,
    report: bool,
    multi: bool,
}

/// Operations by token. Tokens are ours (a counter), so the fast hash.
type TokenMap<V> = HashMap<u64, V, rel::FxBuild>;

struct SendSide<'a>(&'a TokenMap<SendState>);
struct RecvSide<'a>(&'a TokenMap<RecvState>);

impl rel::SendBuffers for SendSide<'_> {
    fn read(&mut self, token: u64, offset: usize, dst: &mut [u8]) {
        match self.0.get(&token) {
            // SAFETY: the send's buffers stay valid until its completion,
            // which the engine reports only after its last read.
            Some(s) => unsafe { gather(&s.iov, offset, dst) },
            None => dst.fill(0),
        }
    }
}

impl rel::RecvBuffers for RecvSide<'_> {
    fn write(&mut self, token: u64, offset: usize, src: &[u8]) {
        if let Some(r) = self.0.get(&token) {
            // SAFETY: the receive's buffers stay valid until its completion.
            unsafe { scatter(&r.iov, offset, src) };
        }
    }
}

pub struct Rdm {
    port: Port,
    engine: Engine<u32>,
    peers: Peers,
    self_key: u32,
    sends: TokenMap<SendState>,
    recvs: TokenMap<RecvState>,
    next_token: u64,
    /// [`monotonic_ns`] when the endpoint opened: the engine's time zero.
    epoch_ns: u64,
    min_multi_recv: usize,
    /// FI_XDP_LINGER_MS.
    linger: std::time::Duration,
    /// Engine timeouts seen by the last [`Rdm::check_refused`].
    timeouts_seen: u64,
    /// Datagrams dropped because their source was new and the address table
    /// full ([`MAX_PEER_ADDRS`]).
    unknown_sources_dropped: u64,
    /// The statistics file `ofi-xdp status` reads.
    published: Published,
}

/// CLOCK_MONOTONIC in nanoseconds. Read on every progress pass and every
/// send: one vDSO call, without `std::time::Instant`'s `Duration`
/// arithmetic, which measured about as much again (≈ 110 against 60 cycles).
pub(super) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always
    // exists, so the call cannot fail (a zero time would only look early).
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// One-line summary of a datagram of ours for FI_LOG_LEVEL=debug traces:
/// type, session ids, sequence and ack numbers (PROTOCOL.md common header).
fn trace(dir: &str, key: u32, d: &[u8]) {
    if d.len() >= 20 && crate::log::enabled(FI_LOG_DEBUG, FI_LOG_EP_DATA) {
        let rd = |i: usize| u32::from_le_bytes([d[i], d[i + 1], d[i + 2], d[i + 3]]);
        crate::xdp_debug!(
            FI_LOG_EP_DATA,
            "{dir} peer {key}: type {} src_sess {:#x} dst_sess {:#x} seq {} ack {} len {}",
            d[1],
            rd(4),
            rd(8),
            rd(12),
            rd(16),
            d.len()
        );
    }
}

fn fabric_flags(f: rel::Flags) -> u64 {
    let mut o = 0;
    for (e, fl) in [
        (rel::Flags::SEND, FI_SEND),
        (rel::Flags::RECV, FI_RECV),
        (rel::Flags::MSG, FI_MSG),
        (rel::Flags::TAGGED, FI_TAGGED),
        (rel::Flags::REMOTE_CQ_DATA, FI_REMOTE_CQ_DATA),
        (rel::Flags::MULTI_RECV, FI_MULTI_RECV),
        // PEEK, CLAIM and DISCARD stay inside: fi_cq(3) defines none of them
        // as a completion flag (FI_CLAIM only for FI_BUFFERED_RECV).
    ] {
        if f.contains(e) {
            o |= fl;
        }
    }
    o
}

fn op_errno(e: rel::OpError) -> libc::c_int {
    match e {
        rel::OpError::Truncated => FI_ETRUNC,
        rel::OpError::Canceled => FI_ECANCELED,
        rel::OpError::NoMessage => FI_ENOMSG,
        rel::OpError::PeerUnreachable => FI_EHOSTUNREACH,
        rel::OpError::PeerRestarted | rel::OpError::PeerReset | rel::OpError::PeerClosed => {
            libc::ECONNRESET
        }
    }
}

/// Sends and receives an endpoint accepts before -FI_EAGAIN. Far above the
/// advertised tx/rx `size`: MPI posts every receive an application asks for,
/// retrying on -FI_EAGAIN with progress, so two ranks that each pre-post more
/// receives than we accept, before either sends, wait for each other for
/// ever (10,000 MPI_Irecv each way did). Each costs memory only while posted.
const MAX_POSTED: usize = 1 << 20;

/// Unexpected messages an endpoint buffers before it refuses the next
/// (receiver not ready), and their bytes (eager messages only: those above
/// 64 KiB wait at the sender by rendezvous). With FI_ORDER_SAS nothing
/// overtakes a refused message, so a limit can deadlock a correct MPI
/// program: rank 1 sends 10,000 small messages, then a "ready" message that
/// rank 0 waits for before it posts any receive. The engine's defaults (8,192
/// messages, 16 MiB) did; tcp buffers without a limit. These bound memory at
/// about what such a program itself holds in its send buffers.
const MAX_UNEXPECTED: usize = 1 << 20;
const UNEXPECTED_BUDGET: usize = 1 << 30;

fn post_errno(e: rel::PostError) -> Errno {
    match e {
        rel::PostError::QueueFull | rel::PostError::TooManyPeers => Errno::AGAIN,
        rel::PostError::TooLarge | rel::PostError::Invalid => Errno::INVAL,
    }
}

impl Rdm {
    pub fn new(port: Port, args: &OpenArgs) -> Rdm {
        let mut seed = [0u8; 8];
        // SAFETY: getrandom writes at most 8 bytes into `seed`.
        let _ = unsafe { libc::getrandom(seed.as_mut_ptr().cast(), 8, 0) };
        let default_window = rel::Config::default().window;
        let cfg = rel::Config {
            mtu: port.max_payload(),
            incarnation: args.local.incarnation,
            seed: u64::from_ne_bytes(seed),
            inject_size: args.inject_size.max(rel::Config::default().inject_size),
            // The packet that ends a message (and every control packet) is
            // acknowledged at the end of the progress pass that received it,
            // not on a later timer: with manual progress the application may
            // not call us again for a long time (fi_pingpong blocks on its
            // socket after its last receive) and the peer would retransmit
            // until it gives up. Segments in the middle of a message are
            // acknowledged every `ack_every` (16) packets, or by the end of
            // the message, or after `ack_delay` if the pass of a later call
            // finds that due: while the rest of the message is on its way the
            // receiver keeps calling (it waits for that completion), and each
            // ack costs the sender a received frame and the receiver a TX
            // kick. Acks still coalesce: at most one per RX batch.
            ack_message_end_at_once: true,
            ack_delay: rel::Nanos::from_micros(200),
            // Peers are processes polling on shared CPUs: a descheduled
            // receiver (a scheduler tick is 1-4 ms) must not look like loss.
            // Real loss is repaired by fast retransmit long before this.
            rto_min: rel::Nanos::from_millis(10),
            // Consecutive timeouts of one packet before the peer is declared
            // unreachable: back-off reaches rto_max (1 s) after ~7 of them,
            // so this is about FI_XDP_PEER_TIMEOUT seconds.
            max_retries: args
                .cfg
                .peer_timeout_secs
                .saturating_add(7)
                .min(u32::from(u16::MAX) - 1),
            rto_max: rel::Nanos::from_secs(1),
            // Never more packets in flight to us than our fill ring holds
            // (jumbo datagrams take several frames each): beyond it a peer's
            // burst meets an empty fill ring whenever we are slow to run, and
            // the kernel drops what the window allowed.
            window: port.rx_capacity().map_or(default_window, |c| {
                c.clamp(16, usize::from(default_window)) as u16
            }),
            tx_queue_len: MAX_POSTED,
            rx_queue_len: MAX_POSTED,
            unexpected_max: MAX_UNEXPECTED,
            unexpected_budget: UNEXPECTED_BUDGET,
            ..rel::Config::default()
        };
        let mut peers = Peers::default();
        let self_key = peers.key(&args.local);
        let published = Published::open(
            args,
            "rdm",
            port.identity(),
            &published::RDM_COUNTERS,
            &published::RDM_GAUGES,
        );
        Rdm {
            port,
            engine: Engine::new(cfg),
            peers,
            self_key,
            sends: TokenMap::default(),
            recvs: TokenMap::default(),
            next_token: 1,
            epoch_ns: monotonic_ns(),
            min_multi_recv: args.min_multi_recv,
            linger: std::time::Duration::from_millis(u64::from(args.cfg.linger_ms)),
            timeouts_seen: 0,
            unknown_sources_dropped: 0,
            published,
        }
    }

    fn now(&self) -> RelInstant {
        RelInstant(monotonic_ns().saturating_sub(self.epoch_ns))
    }

    fn token(&mut self) -> u64 {
        let t = self.next_token;
        self.next_token += 1;
        t
    }

    /// Hand every datagram the engine has ready to the link (our own are
    /// fed straight back), then kick the TX ring once and reap completions.
    /// Called from progress and right after posting, so a send leaves even
    /// if the application does not call progress again soon (fi_pingpong
    /// waits on its out-of-band socket right after fi_inject).
    /// Returns whether the engine had nothing more to send.
    fn transmit(&mut self, now: RelInstant) -> bool {
        let mut loop_back: Vec<Vec<u8>> = Vec::new();
        let mut drained = false;
        let mut built = false;
        {
            let Rdm {
                port,
                engine,
                peers,
                sends,
                self_key,
                ..
            } = self;
            for n in 0..TX_BATCH {
                if n > 0
                    && n % KICK_EVERY == 0
                    && let Err(e) = port.flush()
                {
                    xdp_warn!(FI_LOG_EP_DATA, "TX kick: {e}");
                }
                // Most passes have nothing to send: skip taking a frame then
                // (it is on the latency path of every receive and post).
                if !engine.wants_transmit() {
                    drained = true;
                    break;
                }
                let Some(buf) = port.alloc_tx() else { break };
                let t = match port.tx_payload_mut(buf) {
                    Some(b) => engine.poll_transmit(now, b, &mut SendSide(sends)),
                    None => None,
                };
                let Some(t) = t else {
                    port.release_tx(buf);
                    drained = true;
                    break;
                };
                probe::at(Stage::Built);
                built = true;
                if t.dst == *self_key {
                    if let Some(b) = port.tx_payload_mut(buf) {
                        loop_back.push(b[..t.len].to_vec());
                    }
                    port.release_tx(buf);
                    continue;
                }
                let Some(to) = peers.addrs.get(t.dst as usize).copied() else {
                    port.release_tx(buf);
                    continue;
                };
                if let Some(b) = port.tx_payload_mut(buf) {
                    trace("tx", t.dst, &b[..t.len]);
                }
                match port.send(buf, &to, t.len) {
                    // No room (ring or socket buffer full) or no MAC yet:
                    // lost like a dropped packet, the engine retransmits.
                    Ok(()) | Err(LinkError::TxRingFull | LinkError::NoTxFrame) => {}
                    Err(e) => {
                        let _ = link_err("rdm send", e);
                    }
                }
            }
            if built {
                probe::at(Stage::Kicked);
            }
            if let Err(e) = port.flush() {
                xdp_warn!(FI_LOG_EP_DATA, "TX kick: {e}");
            }
        }
        for d in loop_back {
            let Rdm {
                engine,
                recvs,
                self_key,
                ..
            } = self;
            engine.handle_datagram(now, *self_key, &d, &mut RecvSide(recvs));
        }
        drained
    }

    fn completion(&mut self, c: rel::Completion<u32>) -> Option<DpCompletion> {
        let flags = fabric_flags(c.flags);
        let recv = c.flags.contains(rel::Flags::RECV);
        let (context, report, base) = if recv {
            let r = self.recvs.get(&c.token)?;
            let found = (r.context, r.report, r.iov.first().map(|x| x.0).unwrap_or(0));
            // A multi-recv buffer lives on until the completion that carries
            // FI_MULTI_RECV (fi_msg(3)); cancellation also ends it.
            let release =
                !r.multi || flags & FI_MULTI_RECV != 0 || c.error == Some(rel::OpError::Canceled);
            if release {
                self.recvs.remove(&c.token);
            }
            // The release of a multi-recv buffer is always reported, even
            // where receive completions are suppressed (fi_msg(3) FI_MULTI_RECV).
            (found.0, found.1 || flags & FI_MULTI_RECV != 0, found.2)
        } else {
            match self.sends.remove(&c.token) {
                Some(s) => (s.context, s.report, 0),
                // Injected sends keep no state; their success is never reported.
                None => (0, false, 0),
            }
        };
        let error = c.error.map(|e| CompletionError {
            err: op_errno(e),
            prov_errno: op_errno(e),
            olen: c.olen,
            err_data: Vec::new(),
        });
        // Unreported successes still reach the endpoint: counters count
        // every completed operation (fi_cntr(3)); the CQ gets only reported ones.
        Some(DpCompletion {
            dir: if recv { Direction::Rx } else { Direction::Tx },
            completion: Completion {
                op_context: context,
                flags,
                len: c.len,
                // A peek copies no data, which fi_tagged(3) says with a NULL buf.
                buf: if recv && !c.flags.contains(rel::Flags::PEEK) {
                    base + c.buf_offset
                } else {
                    0
                },
                data: c.data,
                tag: c.tag,
                src: FI_ADDR_NOTAVAIL,
                error,
            },
            src: c
                .src
                .and_then(|peer| self.peers.addrs.get(peer as usize).copied()),
            report,
        })
    }
}

/// The completion level of a send (fi_cq(3), "Completion event semantics").
/// FI_DELIVERY_COMPLETE and FI_TRANSMIT_COMPLETE are honoured as asked.
/// Otherwise — FI_INJECT_COMPLETE or no level, the provider's default — a
/// send of at most `inject_size` bytes is inject complete: it is copied and
/// completes at once, as the libfabric programmer's guide describes ("a
/// provider can meet the requirement for inject complete by copying the
/// application's buffer into a network buffer"), and the engine still
/// retransmits the copy until the peer acknowledges it. Larger sends complete
/// when acknowledged (transmit complete), which is stronger than asked.
fn completion_level(flags: u64, len: usize, inject_size: usize) -> rel::CompletionLevel {
    if flags & FI_DELIVERY_COMPLETE != 0 {
        rel::CompletionLevel::Delivery
    } else if flags & FI_TRANSMIT_COMPLETE != 0 || len > inject_size {
        rel::CompletionLevel::Transmit
    } else {
        rel::CompletionLevel::Inject
    }
}

impl DataPath for Rdm {
    fn post_send(&mut self, op: TxOp) -> Result<()> {
        let now = self.now();
        let dst = self.peers.key(&op.dest);
        if dst != self.self_key {
            // Resolve the MAC now, outside the progress loop.
            let a = self.peers.addrs[dst as usize];
            if let Some(mac) = self.port.resolve(&a)? {
                self.peers.addrs[dst as usize].mac = Some(mac);
            }
        }
        let level = completion_level(op.flags, op.payload.len(), self.engine.config().inject_size);
        // An injected or inject-complete send is copied into the engine: it
        // retransmits from its copy after the caller has reused the buffer.
        let injected = matches!(op.payload, Payload::Inject(_));
        let copied = injected || level == rel::CompletionLevel::Inject;
        let token = self.token();
        {
            // SAFETY: we are inside the posting call (the engine copies now).
            let bytes = copied.then(|| unsafe { contiguous(op.payload.iov()) });
            let payload = match &bytes {
                Some(b) => rel::Payload::Inject(b),
                None => rel::Payload::Buffer {
                    len: op.payload.len(),
                },
            };
            let r = self.engine.post_send(
                now,
                rel::SendOp {
                    token,
                    dst,
                    payload,
                    tag: op.tag,
                    data: op.data,
                    level,
                },
            );
            r.map_err(post_errno)?;
            probe::at(Stage::SendPosted);
        }
        // Keep the operation's context for its completion — or its error,
        // reported even without FI_COMPLETION. fi_inject has none to keep.
        let state = match op.payload {
            Payload::Inject(_) => op.report.then(|| (Iov::empty(), true)),
            Payload::Iov(_) if copied => Some((Iov::empty(), op.report)),
            Payload::Iov(iov) => Some((iov, op.report)),
        };
        if let Some((iov, report)) = state {
            self.sends.insert(
                token,
                SendState {
                    context: op.context,
                    iov,
                    report,
                },
            );
        }
        if op.flags & FI_MORE == 0 {
            self.transmit(now);
        }
        Ok(())
    }

    fn post_recv(&mut self, op: RxOp) -> Result<()> {
        let token = self.token();
        let src = op.src.map(|(a, _)| self.peers.key(&a));
        let len = op.iov.iter().map(|(_, l)| *l).sum();
        let tag = op.tag.map(|(tag, ignore)| rel::TagMatch { tag, ignore });
        // fi_tagged(3): a claim is named by the context of the FI_PEEK |
        // FI_CLAIM that reserved the message.
        let key = op.context as u64;
        self.recvs.insert(
            token,
            RecvState {
                context: op.context,
                iov: op.iov,
                report: op.report,
                multi: op.multi_recv,
            },
        );
        let rop = rel::RecvOp {
            token,
            len,
            src,
            tag,
            multi_recv: op.multi_recv.then_some(self.min_multi_recv),
        };
        let mode = match op.peek {
            Peek::Peek => Some(rel::PeekMode::Peek),
            Peek::PeekClaim => Some(rel::PeekMode::Claim { key }),
            Peek::PeekDiscard => Some(rel::PeekMode::Discard),
            Peek::None | Peek::Claim | Peek::ClaimDiscard => None,
        };
        let r = match (mode, op.peek) {
            (Some(mode), _) => {
                self.engine.peek(token, src, tag, mode);
                Ok(())
            }
            (None, Peek::Claim) => self
                .engine
                .claim(rop, key, false, &mut RecvSide(&self.recvs)),
            (None, Peek::ClaimDiscard) => {
                self.engine
                    .claim(rop, key, true, &mut RecvSide(&self.recvs))
            }
            (None, _) => self.engine.post_recv(rop, &mut RecvSide(&self.recvs)),
        };
        if let Err(e) = r {
            self.recvs.remove(&token);
            return Err(post_errno(e));
        }
        probe::at(Stage::RecvPosted);
        // A matched unexpected rendezvous message answers with a CTS now.
        if self.engine.wants_transmit() {
            let now = self.now();
            self.transmit(now);
        }
        Ok(())
    }

    fn progress(&mut self, out: &mut dyn FnMut(DpCompletion)) {
        let now = self.now();
        {
            let Rdm {
                port,
                engine,
                peers,
                recvs,
                unknown_sources_dropped,
                ..
            } = self;
            let mut learnt = Vec::new();
            port.recv(RX_BATCH, |src, pieces| {
                probe::arrived();
                let known = peers.addrs.len();
                let Some(key) = peers.key_of_source(&src) else {
                    *unknown_sources_dropped += 1;
                    return;
                };
                if peers.addrs.len() != known {
                    // A new peer: the port learns its MAC too (no
                    // allocation or second lookup per datagram otherwise).
                    learnt.push(src);
                }
                trace("rx", key, pieces.first().copied().unwrap_or(&[]));
                match pieces {
                    [payload] => engine.handle_datagram(now, key, payload, &mut RecvSide(recvs)),
                    // A jumbo datagram in its UMEM chunks: the engine copies
                    // its payload from them straight into the receive.
                    _ => engine.handle_datagram_pieces(now, key, pieces, &mut RecvSide(recvs)),
                }
                probe::at(Stage::EngineReceived);
            });
            for a in &learnt {
                port.learn(a);
            }
        }
        if self.engine.poll_timeout().is_some_and(|t| t <= now) {
            self.engine.handle_timeout(now);
            self.check_refused();
        }
        self.transmit(now);
        while let Some(ev) = self.engine.poll_event() {
            match ev {
                Event::Completion(c) => {
                    if let Some(d) = self.completion(c) {
                        out(d);
                        probe::at(Stage::Completed);
                    }
                }
                Event::PeerLost { peer, reason } => {
                    let a = self
                        .peers
                        .addrs
                        .get(peer as usize)
                        .map(|a| a.to_string())
                        .unwrap_or_default();
                    let link = self.port.stats_line();
                    let why = format!(
                        "peer {a} lost: {reason:?} (engine {:?}; link {link}; session {})",
                        self.engine.stats(),
                        self.engine.debug_peer(peer).unwrap_or_default()
                    );
                    // A peer closing its endpoint is the normal end of a job.
                    if reason == rel::OpError::PeerClosed {
                        crate::xdp_info!(FI_LOG_EP_DATA, "{why}");
                    } else {
                        xdp_warn!(FI_LOG_EP_DATA, "{why}");
                    }
                }
            }
        }
        if self.published.due(self.epoch_ns + now.0) {
            let link = self.port.link_stats();
            self.published.set_all(published::rdm_values(
                &self.engine.stats(),
                self.unknown_sources_dropped,
                link.as_ref(),
                self.port.path_counts(),
            ));
        }
    }

    fn cancel(&mut self, context: usize) -> bool {
        let Some(token) = self
            .recvs
            .iter()
            .find(|(_, r)| r.context == context)
            .map(|(t, _)| *t)
        else {
            return false;
        };
        self.engine.cancel_recv(token)
    }

    fn wait_fd(&self) -> Result<Option<std::os::fd::RawFd>> {
        self.port.wait_fd().map(Some)
    }

    fn wait_state(&self) -> WaitState {
        if self.engine.wants_transmit() {
            return WaitState::Busy;
        }
        let timer = self
            .engine
            .poll_timeout()
            .map(|t| std::time::Duration::from_nanos(t.since(self.now()).0));
        match timer {
            Some(d) if d.is_zero() => WaitState::Busy,
            timer => WaitState::Idle { timer },
        }
    }

    fn set_min_multi_recv(&mut self, bytes: usize) {
        self.min_multi_recv = bytes;
    }
}

impl Rdm {
    /// After a retransmission timeout, see whether the network refused
    /// datagrams to a peer (ICMP port unreachable: its process is gone) and
    /// fail its operations now instead of after FI_XDP_PEER_TIMEOUT.
    fn check_refused(&mut self) {
        let timeouts = self.engine.stats().timeouts;
        if timeouts == self.timeouts_seen {
            return;
        }
        self.timeouts_seen = timeouts;
        let Rdm {
            port,
            engine,
            peers,
            ..
        } = self;
        port.take_refused(|sa| {
            if let Some(&key) = peers.by_sock.get(&sa) {
                crate::xdp_info!(FI_LOG_EP_DATA, "{sa}: port unreachable (ICMP)");
                engine.peer_unreachable(key);
            }
        });
    }

    /// Before closing, keep the protocol running until peers have
    /// acknowledged the sends we already reported complete (inject complete:
    /// the application believes them delivered), for at most
    /// FI_XDP_LINGER_MS — like a TCP socket's data draining after close().
    /// Completions that arise meanwhile are discarded, as fi_close discards
    /// outstanding operations (fi_endpoint(3)).
    fn linger(&mut self) {
        let deadline = std::time::Instant::now() + self.linger;
        let mut waited = false;
        while self.engine.sends_unacked_after_completion() > 0 {
            if std::time::Instant::now() >= deadline {
                xdp_warn!(
                    FI_LOG_EP_CTRL,
                    "closing with {} completed sends still unacknowledged after FI_XDP_LINGER_MS",
                    self.engine.sends_unacked_after_completion()
                );
                return;
            }
            if waited {
                std::thread::yield_now();
            }
            waited = true;
            self.progress(&mut |_| {});
        }
    }
}

impl Drop for Rdm {
    fn drop(&mut self) {
        if let Some(table) = probe::report() {
            // Only in a build with the `probes` feature (a benchmark's).
            eprintln!("ofi-xdp probes (rdm endpoint):\n{table}");
        }
        self.linger();
        // Tell every peer we had a session with that we are gone, with our
        // final ack (PROTOCOL.md §4.5): what we received completes at the
        // sender even if our last ack was lost, and what we did not fails
        // there at once instead of after FI_XDP_PEER_TIMEOUT. The TX ring
        // holds a bounded number of frames, so drain in rounds.
        self.engine.close();
        let now = self.now();
        for _ in 0..MAX_CLOSE_ROUNDS {
            if self.transmit(now) {
                break;
            }
        }
        // One line per endpoint for diagnosis (FI_LOG_LEVEL=info).
        let link = self.port.stats_line();
        crate::xdp_info!(
            FI_LOG_EP_DATA,
            "rdm endpoint closed: engine {:?}; link {link}; new sources dropped (table full) {}",
            self.engine.stats(),
            self.unknown_sources_dropped
        );
    }
}
