//! FI_EP_RDM: reliable, ordered (FI_ORDER_SAS) messages through the sans-IO
//! reliability engine, whose datagrams travel over the AF_XDP link. A
//! connected endpoint (FI_EP_MSG) is the same with one peer, chosen by its
//! connection (`super::connected`).
//!
//! The engine names buffers by token: `SendSide`/`RecvSide` map a token
//! to the application's iov, so payload is copied once per direction
//! (application buffer ↔ UMEM frame). Peers are engine keys `u32`: indices
//! into a table of addresses, stable for the endpoint's lifetime. Sending
//! to ourselves feeds our own datagrams straight back into the engine.

// What the engine reaches by token (`buffers.rs`); the engine's flags and
// errors in libfabric's terms (`codes.rs`); FI_EP_MSG's connection
// (`connection.rs`); RMA and atomics (`rma.rs`).
mod buffers;
mod cma;
mod codes;
mod connection;
mod direct;
mod rma;

use std::sync::Arc;

use ofi_xdp_link::LinkError;
use ofi_xdp_reliability as rel;
use rel::{Engine, Event, Instant as RelInstant};

use buffers::{RecvSide, RecvState, SendSide, SendState, TokenMap};
use cma::Cma;
use codes::{completion_level, fabric_flags, op_errno, post_errno};
use direct::Direct;

use super::connected::Connected;
use super::entropy::Entropy;
use super::pass_clock::PassClock;
use super::peers::{Named, Peers, of_session};
use super::port::{Arrival, Port, link_err};
use super::published::{self, Published};
use crate::abi::{Errno, Result};
use crate::addr::XdpAddr;
use crate::datapath::offered::Offered;
use crate::datapath::{
    Completion, CompletionError, ConnEvent, ConnRequest, DataPath, Direction, DpCompletion, Iov,
    OpenArgs, Payload, Peek, Registry, RmaOp, RxOp, TxOp, WaitState, contiguous,
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
/// A small send posted while this many packets to its peer are already on
/// their way waits for the next progress pass (the application streams a
/// window: it calls progress for completions and acknowledgements right
/// after posting it), which packs what waits into few datagrams
/// (PROTOCOL.md §6.8). Below it, a send goes at once, so one message in
/// flight (ping-pong, request/response) never waits.
const STREAM_DEPTH: usize = 1;
/// Rounds of `transmit` spent sending CLOSE notices when the endpoint closes:
/// enough for thousands of peers; peers beyond that find out by their own
/// retry limit.
const MAX_CLOSE_ROUNDS: usize = 64;

pub struct Rdm {
    port: Port,
    engine: Engine<u32>,
    peers: Peers,
    self_key: u32,
    sends: TokenMap<SendState>,
    recvs: TokenMap<RecvState>,
    /// Where RMA reads' data and atomics' fetched values go, by token.
    results: TokenMap<Iov>,
    /// The domain's registered memory (RMA target).
    memory: Arc<Registry>,
    /// Peers' RMA and atomics executed here since the last report (key,
    /// access), for FI_RMA_EVENT counters.
    remote: Vec<(u64, rel::Access)>,
    next_token: u64,
    /// The engine's time, from when the endpoint opened.
    clock: PassClock,
    min_multi_recv: usize,
    /// FI_XDP_LINGER_MS.
    linger: std::time::Duration,
    /// Engine timeouts seen by the last [`Rdm::check_refused`].
    timeouts_seen: u64,
    /// Datagrams dropped for their source: new while the address table is
    /// full (`MAX_PEER_ADDRS`), not an MSG endpoint's peer, or another IP
    /// than that of the peer whose session they name (PROTOCOL.md §4.6).
    unknown_sources_dropped: u64,
    /// FI_EP_MSG: the connection, which admits engine datagrams from its
    /// peer only.
    conn: Option<Connected>,
    /// The statistics file `ofi-xdp status` reads.
    published: Published,
    /// Single-copy rendezvous with peers on this host (FI_XDP_LOCAL_CMA,
    /// PROTOCOL.md §6.7); `None`: off.
    cma: Option<Cma>,
    /// Direct messages with peers on this host (FI_XDP_LOCAL_DIRECT,
    /// PROTOCOL.md §6.9).
    direct: Direct,
    /// Transfers of at least this many bytes go to peers' bulk ports
    /// (PROTOCOL.md §2.5); 0: our port sends none.
    bulk_min: u32,
    /// Source ports of session datagrams (FI_XDP_PATHS, PROTOCOL.md §4.6).
    entropy: Entropy,
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

/// Sends and receives an endpoint accepts before -FI_EAGAIN. Far above the
/// advertised tx/rx `size`: MPI posts every receive an application asks for,
/// retrying on -FI_EAGAIN with progress, so two ranks that each pre-post more
/// receives than we accept, before either sends, wait for each other for
/// ever (10,000 MPI_Irecv each way did). Each costs memory only while posted.
const MAX_POSTED: usize = 1 << 20;

/// Unexpected messages an endpoint keeps before it refuses the next
/// (receiver not ready). With FI_ORDER_SAS nothing overtakes a refused
/// message, so a low count can deadlock a correct MPI program: rank 1 sends
/// 10,000 small messages, then a "ready" message that rank 0 waits for before
/// it posts any receive (8,192 did). A message whose data does not fit the
/// byte budgets below is kept as its header only (≈ 100 bytes) and its data
/// fetched when a receive matches (PROTOCOL.md §6.5), so bytes no longer
/// need to be high to avoid that deadlock: at most 2^20 entries (2^16 per
/// peer) and 64 MiB of data (8 MiB per peer), where it was 1 GiB — a flood
/// of forged session-shaped datagrams fills a peer's share and no more.
const MAX_UNEXPECTED: usize = 1 << 20;
const MAX_UNEXPECTED_PER_PEER: usize = 1 << 16;
const UNEXPECTED_BUDGET: usize = 64 << 20;
const UNEXPECTED_PEER_BUDGET: usize = 8 << 20;

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
            // Nor more than a local peer's ring in shared memory holds.
            window: port
                .rx_capacity()
                .map_or(usize::from(default_window), |c| c)
                .min(port.local_capacity().unwrap_or(usize::MAX))
                .clamp(16, usize::from(default_window)) as u16,
            // Path entropy (PROTOCOL.md §4.6): the engine picks each
            // datagram's value, passing over values that lost lately.
            paths: args.cfg.paths,
            tx_queue_len: MAX_POSTED,
            rx_queue_len: MAX_POSTED,
            unexpected_max: MAX_UNEXPECTED,
            unexpected_budget: UNEXPECTED_BUDGET,
            unexpected_peer_max: MAX_UNEXPECTED_PER_PEER,
            unexpected_peer_budget: UNEXPECTED_PEER_BUDGET,
            auth: args.auth_key.as_ref().map(|k| rel::AuthConfig {
                key: k.bytes().to_vec(),
                encrypt: args.cfg.auth_encrypt,
            }),
            // What our ring holds is what the peers sending to us share
            // (PROTOCOL.md §12.1).
            congestion: args.cfg.congestion,
            rx_capacity: port.rx_capacity().unwrap_or(0),
            cc_delay_floor: rel::Nanos::from_micros(u64::from(args.cfg.cc_delay_us)),
            pack: args.cfg.pack,
            bulk_port: port.bulk_port(),
            // The receive path finds sessions by their ids (`peers.rs`).
            any_port: true,
            ..rel::Config::default()
        };
        if cfg.auth.is_some() {
            crate::xdp_info!(
                FI_LOG_EP_CTRL,
                "packet authentication on (payload encryption {})",
                if args.cfg.auth_encrypt { "on" } else { "off" }
            );
        }
        // A connected endpoint admits its peer's datagrams only. With a
        // job key the engine lets direct messages flow only between
        // endpoints whose handshake verified (PROTOCOL.md §11.8).
        let direct = Direct::new(
            args.cfg.local_direct && args.ep_type != FI_EP_MSG && port.local_writers().is_some(),
        );
        let mut peers = Peers::default();
        let self_key = peers.key(&args.local);
        let published = Published::open(
            args,
            "rdm",
            port.identity(),
            &published::RDM_COUNTERS,
            &published::RDM_GAUGES,
        );
        // Only with the shared-memory path: it is what finds peers on this
        // host, and the rings are the fallback of a failed pull.
        let cma = port
            .local_writers()
            .filter(|_| args.cfg.local_cma)
            .and_then(|w| Cma::new(w, args.cfg.local_shared_pull));
        let bulk_min = match port.sends_bulk() {
            true => {
                let min = args
                    .cfg
                    .bulk_min
                    .unwrap_or_else(|| crate::params::default_bulk_min(port.max_payload()));
                u32::try_from(min.max(1)).unwrap_or(u32::MAX)
            }
            false => 0,
        };
        let mut rdm = Rdm {
            port,
            engine: Engine::new(cfg),
            peers,
            self_key,
            sends: TokenMap::default(),
            recvs: TokenMap::default(),
            results: TokenMap::default(),
            memory: args.memory.clone(),
            remote: Vec::new(),
            next_token: 1,
            clock: PassClock::new(),
            min_multi_recv: args.min_multi_recv,
            linger: std::time::Duration::from_millis(u64::from(args.cfg.linger_ms)),
            timeouts_seen: 0,
            unknown_sources_dropped: 0,
            conn: (args.ep_type == FI_EP_MSG).then(|| Connected::new(args)),
            published,
            cma,
            direct,
            bulk_min,
            entropy: Entropy::new(args.cfg.paths, args.local.port),
        };
        rdm.offer_direct();
        rdm
    }

    fn now(&self) -> RelInstant {
        self.clock.read()
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
        // The last packet of a read's response went out (we are its target).
        let mut served_read = false;
        {
            let Rdm {
                port,
                engine,
                peers,
                sends,
                memory,
                self_key,
                cma,
                bulk_min,
                entropy,
                ..
            } = self;
            for n in 0..TX_BATCH {
                if n > 0
                    && n % KICK_EVERY == 0
                    && let Err(e) = port.kick()
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
                    Some(b) => {
                        engine.poll_transmit(now, b, &mut SendSide(sends, memory, cma.as_ref()))
                    }
                    None => None,
                };
                let Some(t) = t else {
                    port.release_tx(buf);
                    drained = true;
                    break;
                };
                probe::at(Stage::Built);
                built = true;
                // The datagram's bytes, looked at once for all that follows
                // (each look checks the frame against the pool).
                let Some(b) = port.tx_payload_mut(buf) else {
                    port.release_tx(buf);
                    continue;
                };
                let b = &b[..t.len.min(b.len())];
                if t.dst == *self_key {
                    loop_back.push(b.to_vec());
                    port.release_tx(buf);
                    continue;
                }
                trace("tx", t.dst, b);
                let ends_read = rel::wire::ends_read_response(b);
                // Every segment of a large transfer, retransmissions too
                // (PROTOCOL.md §2.5): one path per transfer keeps its
                // segments in order.
                let bulk_port = if *bulk_min > 0
                    && rel::wire::bulk::transfer_len(b).is_some_and(|n| n >= *bulk_min)
                {
                    engine.peer_bulk_port(t.dst)
                } else {
                    None
                };
                // Path entropy (§4.6), to peers that find sessions by their
                // ids; the bulk socket keeps its port.
                let source_port =
                    (bulk_port.is_none() && entropy.on() && engine.peer_takes_any_port(t.dst))
                        .then(|| entropy.source_port(b, t.path));
                let (Some(to), Some(route)) = (
                    peers.addrs.get(t.dst as usize).copied(),
                    peers.route(t.dst, port),
                ) else {
                    port.release_tx(buf);
                    continue;
                };
                served_read |= ends_read;
                let sent = match bulk_port {
                    Some(p) => port.send_bulk(buf, &to, route, p, t.len),
                    None => port.send_on(buf, &to, route, t.len, source_port),
                };
                match sent {
                    // No room (ring or socket buffer full) or no MAC yet:
                    // lost like a dropped packet, the engine retransmits.
                    Ok(()) | Err(LinkError::TxRingFull | LinkError::NoTxFrame) => {}
                    // An earlier datagram's ICMP port unreachable, reported
                    // by this send on the kernel socket (udp(7),
                    // ECONNREFUSED): the peer's process has gone — at a
                    // job's end, routinely. The engine hears of it from the
                    // ICMP message on the socket's error queue
                    // (`check_refused`); nothing to warn about.
                    Err(LinkError::Io { source, .. })
                        if source.kind() == std::io::ErrorKind::ConnectionRefused =>
                    {
                        crate::xdp_info!(FI_LOG_EP_DATA, "rdm send to {to:?}: {source}");
                    }
                    Err(e) => {
                        let _ = link_err("rdm send", e);
                    }
                }
            }
            if built {
                probe::at(Stage::Kicked);
            }
            if served_read {
                // The target's counterpart of the completion its initiator
                // sees: it has no other (`idle.rs`).
                crate::idle::note_read_served();
            }
            if let Err(e) = port.flush() {
                xdp_warn!(FI_LOG_EP_DATA, "TX kick: {e}");
            }
        }
        for d in loop_back {
            let Rdm {
                engine,
                recvs,
                results,
                memory,
                remote,
                self_key,
                cma,
                ..
            } = self;
            let mut bufs = RecvSide(recvs, results, memory, remote, cma.as_ref());
            engine.handle_datagram(now, *self_key, &d, &mut bufs);
        }
        drained
    }

    fn completion(&mut self, c: rel::Completion<u32>) -> Option<DpCompletion> {
        let flags = fabric_flags(c.flags);
        // A write with remote CQ data, at its target: an entry on the
        // receive CQ without a context (fi_rma(3) FI_REMOTE_CQ_DATA).
        let remote = c.flags.contains(rel::Flags::REMOTE_WRITE);
        let recv = c.flags.contains(rel::Flags::RECV) || remote;
        let (context, report, base) = if remote {
            (0, true, 0)
        } else if recv {
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
            self.results.remove(&c.token);
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

impl Rdm {
    /// The engine key of `dest`, its MAC resolved now (outside the
    /// progress loop) unless it is ourselves.
    fn dest_key(&mut self, dest: &crate::addr::XdpAddr) -> Result<u32> {
        let dst = self.peers.key(dest);
        if dst != self.self_key {
            self.peers.resolve(dst, &mut self.port)?;
        }
        if dest.incarnation != 0 && self.engine.authenticated() {
            // Our native address carries the peer's incarnation: our HELLO
            // binds it and needs no CHALLENGE round trip (PROTOCOL.md §11.5).
            let _ = self.engine.peer_incarnation(dst, dest.incarnation);
        }
        Ok(dst)
    }
}

impl DataPath for Rdm {
    fn post_rma(&mut self, op: RmaOp) -> Result<()> {
        self.post_rma_op(op)
    }

    fn post_send(&mut self, op: TxOp) -> Result<()> {
        let dst = self.dest_key(&op.dest)?;
        let len = op.payload.len();
        let level = completion_level(op.flags, len, self.engine.config().inject_size);
        // A small send to a peer on this host may skip the session (§6.9).
        if self.send_direct(&op, dst, len, level) {
            probe::at(Stage::Kicked);
            return Ok(());
        }
        let now = self.now();
        // An injected or inject-complete send is copied into the engine: it
        // retransmits from its copy after the caller has reused the buffer.
        let injected = matches!(op.payload, Payload::Inject(_));
        let copied = injected || level == rel::CompletionLevel::Inject;
        let token = self.token();
        // Offer it for pulling if it is a rendezvous (not copied, above the
        // eager limit) to a peer on this host (§6.7).
        let offer = self.cma.is_some()
            && !copied
            && len > self.engine.config().eager_limit
            && self
                .peers
                .route(dst, &self.port)
                .is_some_and(|r| r.by_shm());
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
                    fence: op.flags & FI_FENCE != 0,
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
            let offer = offer.then(|| Offered::begin(&iov, op.dest.socket_addr()));
            self.sends.insert(
                token,
                SendState {
                    context: op.context,
                    iov,
                    report,
                    offer,
                },
            );
        }
        if op.flags & FI_MORE == 0 && !self.leave_for_packing(dst, len) {
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
        let mut bufs = RecvSide(
            &self.recvs,
            &self.results,
            &self.memory,
            &mut self.remote,
            self.cma.as_ref(),
        );
        let r = match (mode, op.peek) {
            (Some(mode), _) => {
                self.engine.peek(token, src, tag, mode);
                Ok(())
            }
            (None, Peek::Claim) => self.engine.claim(rop, key, false, &mut bufs),
            (None, Peek::ClaimDiscard) => self.engine.claim(rop, key, true, &mut bufs),
            (None, _) => self.engine.post_recv(rop, &mut bufs),
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
        // Exact once something arrives; otherwise recent enough for timers.
        let mut arrived_at: Option<RelInstant> = None;
        {
            let Rdm {
                port,
                engine,
                peers,
                recvs,
                results,
                memory,
                remote,
                unknown_sources_dropped,
                conn,
                cma,
                clock,
                direct,
                ..
            } = self;
            let mut bufs = RecvSide(recvs, results, memory, remote, cma.as_ref());
            let mut learnt = Vec::new();
            port.recv_arrivals(RX_BATCH, |src, arrival| {
                let (pieces, ce) = match arrival {
                    Arrival::Datagram { pieces, ce } => (pieces, ce),
                    Arrival::Message(record) => {
                        probe::arrived();
                        let taken = direct.on
                            && peers
                                .key_of_source(&src)
                                .is_some_and(|key| direct::deliver(engine, key, record, &mut bufs));
                        direct.received += u64::from(taken);
                        probe::at(Stage::EngineReceived);
                        return taken;
                    }
                };
                probe::arrived();
                let now = *arrived_at.get_or_insert_with(|| clock.exact());
                let first = pieces.first().copied().unwrap_or(&[]);
                if let Some(c) = conn.as_mut()
                    && ofi_xdp_reliability::cm::is_cm(first)
                {
                    match pieces {
                        [one] => c.on_datagram(&src, one),
                        _ => c.on_datagram(&src, &pieces.concat()),
                    }
                    return true;
                }
                let key = match of_session(engine, &peers.addrs, first, &src) {
                    // A datagram of one of our sessions (PROTOCOL.md §4.6),
                    // from whichever source port: its peer is that
                    // session's, and a connected endpoint judges it by
                    // that peer's address (§9.2).
                    Named::Peer(key) => {
                        if let Some(c) = conn.as_mut()
                            && !peers.addrs.get(key as usize).is_some_and(|a| c.admits(a))
                        {
                            *unknown_sources_dropped += 1;
                            return true;
                        }
                        key
                    }
                    // It names a session of ours with another peer.
                    Named::OtherSource => {
                        *unknown_sources_dropped += 1;
                        return true;
                    }
                    Named::None => {
                        if conn.as_mut().is_some_and(|c| !c.admits(&src)) {
                            *unknown_sources_dropped += 1;
                            return true;
                        }
                        let known = peers.addrs.len();
                        let Some(key) = peers.key_of_source(&src) else {
                            *unknown_sources_dropped += 1;
                            return true;
                        };
                        if peers.addrs.len() != known {
                            // A new peer: the port learns its MAC too (no
                            // allocation or second lookup per datagram
                            // otherwise).
                            learnt.push(src);
                        }
                        key
                    }
                };
                trace("rx", key, pieces.first().copied().unwrap_or(&[]));
                match pieces {
                    _ if ce => {
                        // Congestion experienced on the way (RFC 3168).
                        engine.handle_datagram_marked(now, key, pieces, true, &mut bufs)
                    }
                    [payload] => engine.handle_datagram(now, key, payload, &mut bufs),
                    // A jumbo datagram in its UMEM chunks: the engine copies
                    // its payload from them straight into the receive.
                    _ => engine.handle_datagram_pieces(now, key, pieces, &mut bufs),
                }
                probe::at(Stage::EngineReceived);
                true
            });
            for a in &learnt {
                port.learn(a);
            }
        }
        let mut now = arrived_at.unwrap_or_else(|| self.clock.recent());
        if self.engine.poll_timeout().is_some_and(|t| t <= now) {
            now = self.clock.exact();
            self.engine.handle_timeout(now);
            self.check_refused(now);
        }
        if self.engine.wants_transmit() && arrived_at.is_none() {
            // Send times are RTT samples' start.
            now = self.clock.exact();
        }
        self.transmit(now);
        self.report_remote(out);
        if let Some(c) = self.conn.as_mut() {
            c.run(now, &mut self.port);
        }
        while let Some(ev) = self.engine.poll_event() {
            match ev {
                Event::Completion(c) => {
                    if let Some(d) = self.completion(c) {
                        out(d);
                        probe::at(Stage::Completed);
                    }
                }
                Event::PeerLost { peer, reason } => {
                    let lost = self.peers.addrs.get(peer as usize).copied();
                    if let (Some(c), Some(l)) = (self.conn.as_mut(), &lost) {
                        c.peer_lost(l);
                    }
                    let a = lost.map(|a| a.to_string()).unwrap_or_default();
                    let link = self.port.stats_line();
                    // The session's state first: libfabric's log cuts a
                    // message at 1 KiB (`src/log.c`), and the engine's and
                    // link's counters alone fill most of that.
                    let why = format!(
                        "peer {a} lost: {reason:?} (session {}; engine {:?}; link {link})",
                        self.engine.debug_peer(peer).unwrap_or_default(),
                        self.engine.stats()
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
        self.offer_direct();
        if self.published.due(self.clock.epoch_ns() + now.0) {
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

    fn arrival_fds(&self, out: &mut Vec<std::os::fd::RawFd>) -> bool {
        self.port.arrival_fds(out);
        true
    }

    fn wait_state(&self) -> WaitState {
        if self.engine.wants_transmit() || self.conn.as_ref().is_some_and(|c| c.wants_transmit()) {
            return WaitState::Busy;
        }
        let now = self.now();
        let engine = self
            .engine
            .poll_timeout()
            .map(|t| std::time::Duration::from_nanos(t.since(now).0));
        let conn = self.conn.as_ref().and_then(|c| c.timer(now));
        let timer = match (engine, conn) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        match timer {
            Some(d) if d.is_zero() => WaitState::Busy,
            // Local senders ring our doorbell from now on; what they sent
            // before is handled before sleeping.
            _ if self.port.prepare_sleep() => WaitState::Busy,
            timer => WaitState::Idle { timer },
        }
    }

    fn set_min_multi_recv(&mut self, bytes: usize) {
        self.min_multi_recv = bytes;
    }

    fn connect(&mut self, to: XdpAddr, param: &[u8]) -> Result<()> {
        self.conn_connect(to, param)
    }

    fn accept(&mut self, req: &ConnRequest, param: &[u8]) -> Result<()> {
        self.conn_accept(req, param)
    }

    fn shutdown(&mut self, out: &mut dyn FnMut(DpCompletion)) -> Result<()> {
        if self.conn.is_none() {
            return Err(Errno::NOSYS);
        }
        self.disconnect(out);
        Ok(())
    }

    fn poll_conn(&mut self) -> Option<ConnEvent> {
        self.conn_poll()
    }
}

impl Rdm {
    /// Whether a send of `len` bytes just posted to `dst` may wait for the
    /// next progress pass, to go packed with the sends posted after it
    /// ([`STREAM_DEPTH`]). A pass comes from the application's next call,
    /// or at worst from the progress helper (`FI_XDP_PROGRESS_MS`).
    fn leave_for_packing(&mut self, dst: u32, len: usize) -> bool {
        len <= self.engine.config().inject_size
            && self
                .engine
                .packing_in_flight(dst)
                .is_some_and(|n| n >= STREAM_DEPTH)
    }

    /// End every session with CLOSE and its final ack (PROTOCOL.md §4.5)
    /// and transmit them; the TX ring holds a bounded number of frames, so
    /// in rounds. Returns the time it used.
    fn close_sessions(&mut self) -> RelInstant {
        self.engine.close();
        let now = self.now();
        for _ in 0..MAX_CLOSE_ROUNDS {
            if self.transmit(now) {
                break;
            }
        }
        now
    }

    /// After a retransmission timeout, see whether the network refused
    /// datagrams to a peer (ICMP port unreachable: its process is gone) and
    /// fail its operations now instead of after FI_XDP_PEER_TIMEOUT.
    fn check_refused(&mut self, now: RelInstant) {
        let timeouts = self.engine.stats().timeouts;
        if timeouts == self.timeouts_seen {
            return;
        }
        self.timeouts_seen = timeouts;
        // A retransmission: the way to the peer may have changed (a router
        // gone, a new route): look again, soon.
        self.port.recheck_routes(true);
        let Rdm {
            port,
            engine,
            peers,
            ..
        } = self;
        port.take_refused(|sa| {
            // Logged only when it ends the session: forged ones may come by
            // the thousand (counted as `unauthenticated` then).
            if let Some(&key) = peers.by_sock.get(&sa)
                && engine.peer_unreachable(now, key)
            {
                crate::xdp_info!(FI_LOG_EP_DATA, "{sa}: port unreachable (ICMP)");
            }
        });
    }

    /// Before closing, keep the protocol running until peers have
    /// acknowledged the sends the application believes delivered — reported
    /// complete (inject complete), or injected (fi_inject reports nothing)
    /// and perhaps still queued behind the congestion window — for at most
    /// FI_XDP_LINGER_MS, like a TCP socket's data draining after close().
    /// Completions that arise meanwhile are discarded, as fi_close discards
    /// outstanding operations (fi_endpoint(3)).
    fn linger(&mut self, out: &mut dyn FnMut(DpCompletion)) {
        let deadline = std::time::Instant::now() + self.linger;
        let mut waited = false;
        while self.engine.sends_owed_at_close() > 0 {
            if std::time::Instant::now() >= deadline {
                xdp_warn!(
                    FI_LOG_EP_CTRL,
                    "closing with {} completed or injected sends still unacknowledged after FI_XDP_LINGER_MS",
                    self.engine.sends_owed_at_close()
                );
                return;
            }
            if waited {
                std::thread::yield_now();
            }
            waited = true;
            self.progress(out);
        }
    }
}

impl Drop for Rdm {
    fn drop(&mut self) {
        if let Some(table) = probe::report() {
            // Only in a build with the `probes` feature (a benchmark's).
            eprintln!("ofi-xdp probes (rdm endpoint):\n{table}");
        }
        self.linger(&mut |_| {});
        // Tell every peer we had a session with that we are gone, with our
        // final ack (PROTOCOL.md §4.5): what we received completes at the
        // sender even if our last ack was lost, and what we did not fails
        // there at once instead of after FI_XDP_PEER_TIMEOUT.
        let now = self.close_sessions();
        // A connected peer hears DISCONNECT after the session's CLOSE.
        if let Some(c) = self.conn.as_mut() {
            c.close(now);
            c.transmit(&mut self.port);
        }
        // Lines for diagnosis (FI_LOG_LEVEL=info), the engine's first (what
        // tools and tests read). libfabric cuts a log line at 1024 bytes,
        // its newline too, and the engine's and the link's figures together
        // come near that with large counts: a cut line runs into the next.
        let link = self.port.stats_line();
        crate::xdp_info!(
            FI_LOG_EP_DATA,
            "rdm endpoint closed: engine {:?}",
            self.engine.stats()
        );
        crate::xdp_info!(
            FI_LOG_EP_DATA,
            "rdm endpoint: link {link}; new sources dropped (table full) {}",
            self.unknown_sources_dropped
        );
        if let Some(c) = &self.cma {
            crate::xdp_info!(
                FI_LOG_EP_DATA,
                "rdm endpoint: chunks of our pulls copied by their senders {}",
                c.by_senders()
            );
        }
        if self.direct.on {
            crate::xdp_info!(
                FI_LOG_EP_DATA,
                "rdm endpoint: direct messages sent {}, received {}",
                self.direct.sent,
                self.direct.received
            );
        }
    }
}
