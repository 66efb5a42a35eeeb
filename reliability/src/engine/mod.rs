//! The engine: per-peer sessions and reliability, messaging semantics, timers.
//!
//! Layout of this file, top to bottom: internal state types; the public
//! [`Engine`] API (posting, input, output, timers); the handshake; the
//! reliability layer (acks, retransmission); the messaging layer (matching,
//! unexpected queue, rendezvous, multi-recv); failure handling.

mod peers;

use std::collections::VecDeque;
use std::hash::Hash;

use crate::api::*;
use crate::rng::SplitMix64;
use crate::slab::Slab;

use crate::time::{Instant, Nanos};
use crate::wire::{self, Bytes, CtrlExt, DataExt, Header, Packet, PacketType, flags as wf};
use peers::{PeerId, PeerTable};

type Idx = u32;

/// Fixed bookkeeping cost charged per reordered packet against the budget.
const REORDER_OVERHEAD: usize = 64;
/// At most this many RESET replies wait for transmission; more are dropped.
const MAX_PENDING_RESETS: usize = 64;
/// Duplicate-ack threshold for fast retransmission (RFC 5681 §3.2 uses 3).
const DUP_THRESH: usize = 3;
/// Copies of each CLOSE notice: it is sent once and never retransmitted (the
/// endpoint is going away), so a second copy makes losing it rare.
const CLOSE_COPIES: usize = 2;
/// Smallest datagram (`Config::mtu`) an engine works with, or believes a
/// peer accepts: room for a DATA header, some payload and the CRC.
const MIN_MTU: usize = 128;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Conn {
    Idle,
    HelloSent,
    Established,
}

/// RTT estimator and RTO, RFC 6298 §2.
#[derive(Clone, Copy, Debug)]
struct Rtt {
    srtt: u64,
    rttvar: u64,
    /// Current RTO including back-off.
    rto: u64,
    sampled: bool,
}

impl Rtt {
    fn new(cfg: &Config) -> Self {
        Rtt {
            srtt: 0,
            rttvar: 0,
            rto: cfg.rto_initial.0,
            sampled: false,
        }
    }

    /// RFC 6298 §2.2/2.3 with alpha = 1/8, beta = 1/4, K = 4; clamped (§2.4, 2.5).
    fn sample(&mut self, r: u64, cfg: &Config) {
        if self.sampled {
            let diff = self.srtt.abs_diff(r);
            self.rttvar = (3 * self.rttvar + diff) / 4;
            self.srtt = (7 * self.srtt + r) / 8;
        } else {
            self.srtt = r;
            self.rttvar = r / 2;
            self.sampled = true;
        }
        self.rto = (self.srtt + (4 * self.rttvar).max(1_000)).clamp(cfg.rto_min.0, cfg.rto_max.0);
    }

    /// Forget the back-off (the peer answered).
    fn reset_backoff(&mut self, cfg: &Config) {
        self.rto = if self.sampled {
            (self.srtt + (4 * self.rttvar).max(1_000)).clamp(cfg.rto_min.0, cfg.rto_max.0)
        } else {
            cfg.rto_initial.0
        };
    }

    /// RFC 6298 §5.5: back off the timer.
    fn backoff(&mut self, cfg: &Config) {
        self.rto = (self.rto.saturating_mul(2))
            .min(cfg.rto_max.0)
            .max(cfg.rto_min.0);
    }
}

/// Something a sent packet carried, enough to rebuild it for retransmission.
#[derive(Clone, Copy, Debug)]
enum PktKind {
    Data {
        op: Idx,
        offset: u32,
        len: u16,
        first: bool,
    },
    Ctrl(Ctrl),
}

/// Sequenced control messages.
#[derive(Clone, Copy, Debug)]
enum Ctrl {
    Cts {
        msg_id: u32,
        max_len: u32,
        discard: bool,
    },
    Done {
        msg_id: u32,
    },
}

#[derive(Clone, Copy, Debug)]
struct SentPkt {
    kind: PktKind,
    sent_at: Instant,
    retries: u16,
    sacked: bool,
    /// Karn's algorithm: no RTT sample from retransmitted packets.
    retransmitted: bool,
    fast_done: bool,
    rtx_queued: bool,
}

/// An out-of-order packet held until the hole before it fills (a second copy).
#[derive(Debug)]
struct Stored {
    ty: PacketType,
    flags: u16,
    data: DataExt,
    ctrl: CtrlExt,
    payload: Vec<u8>,
}

/// Where the bytes of a message being received go.
#[derive(Clone, Copy, Debug)]
enum Dest {
    Posted { recv: Idx, base: usize, cap: usize },
    Unexp(Idx),
    Drop,
}

/// Matching information of an incoming message.
#[derive(Clone, Copy, Debug)]
struct MsgInfo {
    peer: PeerId,
    msg_id: u32,
    total: u32,
    tag: u64,
    data: u64,
    hflags: u16,
}

/// A message partly received.
#[derive(Clone, Copy, Debug)]
struct RxMsg {
    info: MsgInfo,
    /// Bytes the sender will send (eager: total; rendezvous: accepted length).
    expect: u32,
    received: u32,
    dest: Dest,
}

/// Queue storage of an active peer, released when the peer is quiescent.
#[derive(Debug, Default)]
struct Queues {
    /// Sent, not cumulatively acked; index i = sequence `una + i`.
    inflight: VecDeque<SentPkt>,
    /// Sequence numbers to retransmit.
    rtx: VecDeque<u32>,
    /// Control messages waiting for a sequence number.
    ctrl: VecDeque<Ctrl>,
    /// Send ops with packets still to emit, in posting order (FI_ORDER_SAS).
    sendq: VecDeque<Idx>,
    /// Rendezvous ops cleared to send their data.
    rndv_ready: VecDeque<Idx>,
    /// Ops waiting for a CTS or a DONE.
    waiting: Vec<Idx>,
    /// Out-of-order packets; index i = sequence `expected + 1 + i`.
    reorder: VecDeque<Option<Box<Stored>>>,
    /// Messages being received from this peer.
    rx_msgs: Vec<RxMsg>,
}

impl Queues {
    fn quiescent(&self) -> bool {
        self.inflight.is_empty()
            && self.rtx.is_empty()
            && self.ctrl.is_empty()
            && self.sendq.is_empty()
            && self.rndv_ready.is_empty()
            && self.waiting.is_empty()
            && self.reorder.is_empty()
            && self.rx_msgs.is_empty()
    }

    /// Whether sequenced packets wait to go out: retransmissions, or new
    /// packets (control, rendezvous data, messages) if `window` allows.
    fn has_output(&self, window: usize) -> bool {
        !self.rtx.is_empty()
            || (self.inflight.len() < window
                && !(self.ctrl.is_empty() && self.rndv_ready.is_empty() && self.sendq.is_empty()))
    }
}

/// Packets a peer may have in flight from us: our configured window, or
/// less if the peer advertised less (its `window` field).
fn send_window(ours: u16, peers: u16) -> usize {
    usize::from(ours.min(peers))
}

/// Per-peer state. Kept small: an idle peer costs `size_of::<Peer<P>>()` plus
/// its hash-map entry; queues live in `q` only while the peer is active.
#[derive(Debug)]
struct Peer<P> {
    key: P,
    conn: Conn,
    in_ready: bool,
    in_timers: bool,
    send_hello: bool,
    send_hello_ack: bool,
    ack_now: bool,
    rnr_pending: bool,
    /// After a receiver-not-ready wait only the oldest packet is resent; the
    /// rest follow once it is acknowledged.
    rnr_probe: bool,
    local_sess: u32,
    remote_sess: u32,
    remote_inc: u32,
    /// Largest datagram the peer accepts (HELLO/HELLO_ACK word b, §2.3),
    /// at most our own `cfg.mtu`: DATA to it is segmented to fit.
    peer_mtu: usize,
    hello_retries: u32,
    /// TX: next sequence number to assign.
    next_seq: u32,
    /// TX: oldest unacknowledged sequence number.
    una: u32,
    /// TX: next message id.
    next_msg_id: u32,
    /// RX: next in-order sequence number expected.
    expected: u32,
    /// RX: in-order packets not yet acknowledged.
    rx_unacked: u32,
    peer_window: u16,
    rtt: Rtt,
    rto_at: Instant,
    ack_at: Instant,
    rnr_until: Instant,
    idle_at: Instant,
    q: Option<Box<Queues>>,
}

impl<P> Peer<P> {
    fn new(key: P, cfg: &Config) -> Self {
        Peer {
            key,
            conn: Conn::Idle,
            in_ready: false,
            in_timers: false,
            send_hello: false,
            send_hello_ack: false,
            ack_now: false,
            rnr_pending: false,
            rnr_probe: false,
            local_sess: 0,
            remote_sess: 0,
            remote_inc: 0,
            peer_mtu: cfg.mtu,
            hello_retries: 0,
            next_seq: 0,
            una: 0,
            next_msg_id: 0,
            expected: 0,
            rx_unacked: 0,
            peer_window: cfg.window,
            rtt: Rtt::new(cfg),
            rto_at: Instant::NEVER,
            ack_at: Instant::NEVER,
            rnr_until: Instant::NEVER,
            idle_at: Instant::NEVER,
            q: None,
        }
    }

    fn q(&mut self) -> &mut Queues {
        self.q.get_or_insert_with(Box::default)
    }

    fn next_deadline(&self) -> Instant {
        self.rto_at
            .min(self.ack_at)
            .min(self.rnr_until)
            .min(self.idle_at)
    }
}

/// A send operation in progress.
#[derive(Debug)]
struct SendState {
    token: u64,
    peer: PeerId,
    len: u32,
    /// Bytes that will be sent: `len`, or for rendezvous what the CTS accepted.
    send_len: u32,
    tag: u64,
    data: u64,
    /// Wire flags TAGGED | CQ_DATA | DC | RNDV | AR.
    hflags: u16,
    msg_id: u32,
    next_off: u32,
    unacked: u32,
    rts_sent: bool,
    await_cts: bool,
    all_sent: bool,
    done_rcvd: bool,
    /// Inject complete: report it when its last packet is first sent, and
    /// never again (not even an error: the application has its completion).
    complete_on_send: bool,
    /// Its successful completion has been reported (inject complete).
    reported: bool,
    inject: Option<Vec<u8>>,
}

impl SendState {
    /// Inject complete and already reported: the application has its
    /// completion, only the peer's ack is outstanding.
    fn reported_early(&self) -> bool {
        self.reported
    }
}

#[derive(Clone, Copy, Debug)]
struct Multi {
    min_free: usize,
    used: usize,
    inflight: u32,
    retired: bool,
}

#[derive(Debug)]
struct Recv<P> {
    token: u64,
    cap: usize,
    src: Option<P>,
    tag: Option<TagMatch>,
    multi: Option<Multi>,
}

/// An unexpected message (eager data buffered, or a rendezvous request).
#[derive(Debug)]
struct Unexp {
    info: MsgInfo,
    /// The sender's session when it arrived (CTS/DONE only go to that session).
    sess: u32,
    buf: Vec<u8>,
    received: u32,
    complete: bool,
    rndv: bool,
    claimed: Option<u64>,
    /// A receive matched while the data was still arriving.
    attached: Option<Dest>,
    cost: usize,
}

/// The sans-IO reliability engine. `P` is the caller's peer key.
#[derive(Debug)]
pub struct Engine<P> {
    cfg: Config,
    rng: SplitMix64,
    peers: PeerTable<P, Peer<P>>,
    sends: Slab<SendState>,
    recvs: Slab<Recv<P>>,
    unexp: Slab<Unexp>,
    posted_msg: VecDeque<Idx>,
    posted_tagged: VecDeque<Idx>,
    unexp_msg: VecDeque<Idx>,
    unexp_tagged: VecDeque<Idx>,
    ready: VecDeque<PeerId>,
    timers: Vec<PeerId>,
    /// RESET replies and CLOSE notices: control packets sent once, outside
    /// any session's queues.
    oneshots: VecDeque<(P, Header, CtrlExt)>,
    events: VecDeque<Event<P>>,
    stats: Stats,
    injects: InjectStore,
    unexp_bytes: usize,
    reorder_bytes: usize,
}

fn msg_flags(hflags: u16) -> Flags {
    let mut f = if hflags & wf::TAGGED != 0 {
        Flags::TAGGED
    } else {
        Flags::MSG
    };
    if hflags & wf::CQ_DATA != 0 {
        f |= Flags::REMOTE_CQ_DATA;
    }
    f
}

impl<P: Copy + Eq + Hash> Engine<P> {
    /// A new engine. `cfg.mtu` is raised to at least 128 and `cfg.window`
    /// clamped to 1..=4096.
    pub fn new(mut cfg: Config) -> Self {
        cfg.mtu = cfg.mtu.clamp(MIN_MTU, 65535);
        cfg.window = cfg.window.clamp(1, 4096);
        cfg.inject_size = cfg.inject_size.min(cfg.eager_limit);
        let rng = SplitMix64::new(cfg.seed ^ u64::from(cfg.incarnation).rotate_left(32));
        Engine {
            cfg,
            rng,
            peers: PeerTable::new(),
            sends: Slab::default(),
            recvs: Slab::default(),
            unexp: Slab::default(),
            posted_msg: VecDeque::new(),
            posted_tagged: VecDeque::new(),
            unexp_msg: VecDeque::new(),
            unexp_tagged: VecDeque::new(),
            ready: VecDeque::new(),
            timers: Vec::new(),
            oneshots: VecDeque::new(),
            events: VecDeque::new(),
            stats: Stats::default(),
            injects: InjectStore::default(),
            unexp_bytes: 0,
            reorder_bytes: 0,
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Counters and gauges.
    pub fn stats(&self) -> Stats {
        let mut s = self.stats;
        s.unexpected_bytes = self.unexp_bytes as u64;
        s.reorder_bytes = self.reorder_bytes as u64;
        s
    }

    /// Number of peers with state.
    pub fn peer_count(&self) -> usize {
        self.peers.len()
    }

    /// Send operations posted and not yet completed.
    pub fn sends_outstanding(&self) -> usize {
        self.sends.len()
    }

    /// Whether every send still outstanding to peer `pi` was already
    /// reported complete (and at least one is).
    fn only_reported_sends_to(&self, pi: PeerId) -> bool {
        let mut any = false;
        for oi in self.sends.indices() {
            if let Some(st) = self.sends.get(oi)
                && st.peer == pi
            {
                if !st.reported_early() {
                    return false;
                }
                any = true;
            }
        }
        any
    }

    /// Sends already completed to the application (inject complete, or
    /// never reported) whose data the peer has not acknowledged yet: the
    /// engine still owns their retransmission, so closing now could lose them.
    pub fn sends_unacked_after_completion(&self) -> usize {
        self.sends
            .indices()
            .filter(|&i| self.sends.get(i).is_some_and(SendState::reported_early))
            .count()
    }

    /// Receive operations posted and not yet completed.
    pub fn recvs_posted(&self) -> usize {
        self.recvs.len()
    }

    /// Unexpected messages queued (not yet matched).
    pub fn unexpected_count(&self) -> usize {
        self.unexp.len()
    }

    /// Internal state of the session with `peer`, for diagnostics (format unstable).
    pub fn debug_peer(&self, peer: P) -> Option<String>
    where
        P: core::fmt::Debug,
    {
        let pi = self.peers.get(peer)?;
        let ops: Vec<&SendState> = self
            .sends
            .indices()
            .filter_map(|i| self.sends.get(i))
            .filter(|s| s.peer == pi)
            .take(4)
            .collect();
        let msgs = self.peers[pi]
            .q
            .as_ref()
            .map(|q| q.rx_msgs.len())
            .unwrap_or(0);
        Some(format!(
            "{:?}\n  first send ops: {ops:?}\n  messages being received: {msgs}",
            self.peers[pi]
        ))
    }

    /// Largest payload of one DATA packet with the configured MTU.
    pub fn max_payload(&self) -> usize {
        self.cfg.mtu - wire::DATA_OVERHEAD
    }

    // ------------------------------------------------------------------
    // Posting
    // ------------------------------------------------------------------

    /// Post a send (fi_send/fi_tsend/fi_senddata/fi_inject/fi_sendmsg).
    ///
    /// Errors: [`PostError::QueueFull`] when `tx_queue_len` sends are outstanding
    /// or the inject storage is used up; [`PostError::TooLarge`] beyond
    /// [`MAX_MSG_SIZE`] / `inject_size`.
    pub fn post_send(&mut self, now: Instant, op: SendOp<'_, P>) -> Result<(), PostError> {
        let (len, inject) = match op.payload {
            Payload::Buffer { len } => (len, None),
            Payload::Inject(b) => (b.len(), Some(b)),
        };
        if len > MAX_MSG_SIZE {
            return Err(PostError::TooLarge);
        }
        if let Some(b) = inject {
            if b.len() > self.cfg.inject_size {
                return Err(PostError::TooLarge);
            }
            if self.injects.bytes + b.len() > self.cfg.inject_budget {
                return Err(PostError::QueueFull);
            }
        }
        if self.sends.len() >= self.cfg.tx_queue_len {
            return Err(PostError::QueueFull);
        }
        let pi = self.peer_for(op.dst)?;
        let rndv = inject.is_none() && len > self.cfg.eager_limit;
        let mut hflags = 0;
        if op.tag.is_some() {
            hflags |= wf::TAGGED;
        }
        if op.data.is_some() {
            hflags |= wf::CQ_DATA;
        }
        if op.level == CompletionLevel::Delivery {
            hflags |= wf::DC;
        }
        if rndv {
            hflags |= wf::RNDV;
        }
        // FI_INJECT_COMPLETE with our own copy: the buffer is free now, and
        // the completion is reported once the whole message has gone to the
        // network (`emit_new`), not before — with manual progress a message
        // still waiting for its session must not look sent.
        let complete_on_send = inject.is_some() && op.level == CompletionLevel::Inject;
        let inject = inject.map(|b| self.injects.copy_of(b));
        if !complete_on_send {
            // The completion waits for the peer's ack: ask for it promptly.
            hflags |= wf::AR;
        }
        let peer = &mut self.peers[pi];
        let msg_id = peer.next_msg_id;
        peer.next_msg_id = peer.next_msg_id.wrapping_add(1);
        let st = SendState {
            token: op.token,
            peer: pi,
            len: len as u32,
            send_len: len as u32,
            tag: op.tag.unwrap_or(0),
            data: op.data.unwrap_or(0),
            hflags,
            msg_id,
            next_off: 0,
            unacked: 0,
            rts_sent: false,
            await_cts: false,
            all_sent: false,
            done_rcvd: false,
            complete_on_send,
            reported: false,
            inject,
        };
        let oi = self.sends.insert(st);
        let peer = &mut self.peers[pi];
        let q = peer.q();
        q.sendq.push_back(oi);
        if rndv || hflags & wf::DC != 0 {
            q.waiting.push(oi);
        }
        peer.idle_at = Instant::NEVER;
        if peer.conn == Conn::Idle {
            self.start_handshake(pi, now);
        }
        self.mark_ready(pi);
        Ok(())
    }

    /// Post a receive (fi_recv/fi_trecv/fi_recvmsg). If a queued unexpected
    /// message matches, its data is copied into the buffer now through `bufs`
    /// (that is the second copy of the unexpected path).
    pub fn post_recv(
        &mut self,
        op: RecvOp<P>,
        bufs: &mut impl RecvBuffers,
    ) -> Result<(), PostError> {
        if self.recvs.len() >= self.cfg.rx_queue_len {
            return Err(PostError::QueueFull);
        }
        if op.multi_recv.is_some() && op.len == 0 {
            return Err(PostError::Invalid);
        }
        let ri = self.recvs.insert(Recv {
            token: op.token,
            cap: op.len,
            src: op.src,
            tag: op.tag,
            multi: op.multi_recv.map(|min_free| Multi {
                min_free,
                used: 0,
                inflight: 0,
                retired: false,
            }),
        });
        let tagged = op.tag.is_some();
        // Match queued unexpected messages first (fi_tagged(3): posted receives
        // are matched against the unexpected queue before being queued).
        while let Some(ui) = self.find_unexp(tagged, op.src, op.tag, None) {
            self.remove_unexp_from_queue(ui);
            let multi_left = self.deliver_unexp(ui, ri, bufs);
            if !multi_left {
                return Ok(());
            }
        }
        if tagged {
            self.posted_tagged.push_back(ri);
        } else {
            self.posted_msg.push_back(ri);
        }
        Ok(())
    }

    /// Cancel a posted receive (fi_cancel). Returns false when no posted receive
    /// has this token (already matched or completed). The cancelled receive
    /// completes with [`OpError::Canceled`]; a multi-recv buffer with messages
    /// still arriving into it is released when they complete.
    pub fn cancel_recv(&mut self, token: u64) -> bool {
        for tagged in [false, true] {
            let q = if tagged {
                &self.posted_tagged
            } else {
                &self.posted_msg
            };
            let pos = q
                .iter()
                .position(|&ri| self.recvs.get(ri).is_some_and(|r| r.token == token));
            let Some(pos) = pos else { continue };
            let q = if tagged {
                &mut self.posted_tagged
            } else {
                &mut self.posted_msg
            };
            let Some(ri) = q.remove(pos) else { continue };
            let inflight = self.recvs.get(ri).and_then(|r| r.multi).map(|m| m.inflight);
            match inflight {
                Some(n) if n > 0 => {
                    if let Some(m) = self.recvs.get_mut(ri).and_then(|r| r.multi.as_mut()) {
                        m.retired = true;
                    }
                }
                _ => {
                    let multi = inflight.is_some();
                    self.recvs.remove(ri);
                    let mut flags = Flags::RECV | if tagged { Flags::TAGGED } else { Flags::MSG };
                    if multi {
                        flags |= Flags::MULTI_RECV;
                    }
                    self.push_completion(Completion {
                        token,
                        flags,
                        len: 0,
                        buf_offset: 0,
                        data: 0,
                        tag: 0,
                        src: None,
                        error: Some(OpError::Canceled),
                        olen: 0,
                    });
                }
            }
            return true;
        }
        false
    }

    /// FI_PEEK (with FI_CLAIM or FI_DISCARD) against the unexpected queue. The
    /// result is an event for `token`: a completion with flags PEEK (|CLAIM or
    /// |DISCARD) describing the message (len, tag, data, source), or an error
    /// completion [`OpError::NoMessage`] (FI_ENOMSG).
    pub fn peek(&mut self, token: u64, src: Option<P>, tag: Option<TagMatch>, mode: PeekMode) {
        let tagged = tag.is_some();
        let found = self.find_unexp(tagged, src, tag, None);
        let base = Flags::RECV | Flags::PEEK | if tagged { Flags::TAGGED } else { Flags::MSG };
        let Some(ui) = found else {
            self.push_completion(Completion {
                token,
                flags: base,
                len: 0,
                buf_offset: 0,
                data: 0,
                // No message: report the tag that was asked for.
                tag: tag.map_or(0, |t| t.tag),
                src: None,
                error: Some(OpError::NoMessage),
                olen: 0,
            });
            return;
        };
        let Some(u) = self.unexp.get(ui) else { return };
        let info = u.info;
        let mut flags = base | msg_flags(info.hflags);
        match mode {
            PeekMode::Peek => {}
            PeekMode::Claim { key } => {
                flags |= Flags::CLAIM;
                if let Some(u) = self.unexp.get_mut(ui) {
                    u.claimed = Some(key);
                }
            }
            PeekMode::Discard => {
                flags |= Flags::DISCARD;
                self.remove_unexp_from_queue(ui);
                self.discard_unexp(ui);
            }
        }
        let c = Completion {
            token,
            flags,
            len: info.total as usize,
            buf_offset: 0,
            data: info.data,
            tag: info.tag,
            src: Some(self.source(&info)),
            error: None,
            olen: 0,
        };
        self.push_completion(c);
    }

    /// Receive (or, with `discard`, drop) the message claimed earlier by
    /// [`Engine::peek`] with [`PeekMode::Claim`] and `key` (FI_CLAIM,
    /// FI_CLAIM | FI_DISCARD). `op.src`/`op.tag` are ignored: the claim names the
    /// message. Returns [`PostError::Invalid`] when no message is claimed by `key`.
    pub fn claim(
        &mut self,
        op: RecvOp<P>,
        key: u64,
        discard: bool,
        bufs: &mut impl RecvBuffers,
    ) -> Result<(), PostError> {
        let ui = self
            .unexp_msg
            .iter()
            .chain(self.unexp_tagged.iter())
            .copied()
            .find(|&ui| self.unexp.get(ui).is_some_and(|u| u.claimed == Some(key)));
        let Some(ui) = ui else {
            return Err(PostError::Invalid);
        };
        self.remove_unexp_from_queue(ui);
        if discard {
            let Some(info) = self.unexp.get(ui).map(|u| u.info) else {
                return Err(PostError::Invalid);
            };
            self.discard_unexp(ui);
            let c = Completion {
                token: op.token,
                flags: Flags::RECV | Flags::CLAIM | Flags::DISCARD | msg_flags(info.hflags),
                len: 0,
                buf_offset: 0,
                data: info.data,
                tag: info.tag,
                src: Some(self.source(&info)),
                error: None,
                olen: 0,
            };
            self.push_completion(c);
            return Ok(());
        }
        if self.recvs.len() >= self.cfg.rx_queue_len {
            // Put it back: the caller retries after progress.
            self.requeue_unexp_front(ui);
            return Err(PostError::QueueFull);
        }
        let ri = self.recvs.insert(Recv {
            token: op.token,
            cap: op.len,
            src: None,
            tag: op.tag,
            multi: None,
        });
        self.deliver_unexp(ui, ri, bufs);
        Ok(())
    }

    /// Whether [`Engine::poll_transmit`] may have a datagram to produce: a
    /// control packet is queued or a peer has something ready. When false it
    /// would return `None`, so callers can skip preparing a buffer.
    pub fn wants_transmit(&self) -> bool {
        !self.oneshots.is_empty() || !self.ready.is_empty()
    }

    /// Next event, if any.
    pub fn poll_event(&mut self) -> Option<Event<P>> {
        self.events.pop_front()
    }

    /// The endpoint is closing (`fi_close`): queue a CLOSE notice, carrying
    /// our final acknowledgement, for every peer with a session, and end those
    /// sessions (PROTOCOL.md §4.5). The peer completes what we acknowledged
    /// and fails the rest at once instead of retransmitting until its retry
    /// limit. Outstanding operations are discarded without completions, as
    /// `fi_endpoint(3)` says of `fi_close`. Drain `poll_transmit` afterwards to
    /// send the notices; the engine is not meant to be used after that.
    pub fn close(&mut self) {
        for pi in self.peers.ids() {
            let p = &self.peers[pi];
            if p.conn != Conn::Established {
                continue;
            }
            let hdr = self.acking_header(p, PacketType::Close);
            let ctrl = CtrlExt {
                a: self.cfg.incarnation,
                b: 0,
            };
            for _ in 0..CLOSE_COPIES {
                self.oneshots.push_back((p.key, hdr, ctrl));
            }
            self.fail_peer(pi, OpError::Canceled);
        }
        self.events.clear();
    }

    /// The network reports nobody listening at `peer` (an ICMP port
    /// unreachable for a datagram we sent it): its process is gone. Fail
    /// what depends on it now rather than at the retry limit (PROTOCOL.md
    /// §5.3). Ignored for a peer we have no session or handshake with.
    pub fn peer_unreachable(&mut self, peer: P) {
        let Some(pi) = self.lookup(peer) else {
            return;
        };
        if self.peers[pi].conn != Conn::Idle {
            self.fail_peer(pi, OpError::PeerUnreachable);
        }
    }

    // ------------------------------------------------------------------
    // Input
    // ------------------------------------------------------------------

    /// Feed one received datagram (our header onwards: the caller strips
    /// Ethernet/IP/UDP). `from` is the sender's key: completions of its
    /// messages carry it as their source. Payload of matched messages is
    /// written into receive buffers through `bufs`.
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        from: P,
        datagram: &[u8],
        bufs: &mut impl RecvBuffers,
    ) {
        self.handle_decoded(now, from, wire::decode(datagram), bufs);
    }

    /// [`Engine::handle_datagram`] for a datagram that arrived in several
    /// buffers (AF_XDP multi-buffer), in order: their concatenation is the
    /// datagram. Its payload is copied from the pieces where they are.
    pub fn handle_datagram_pieces(
        &mut self,
        now: Instant,
        from: P,
        pieces: &[&[u8]],
        bufs: &mut impl RecvBuffers,
    ) {
        self.handle_decoded(now, from, wire::decode_pieces(pieces), bufs);
    }

    fn handle_decoded(
        &mut self,
        now: Instant,
        from: P,
        decoded: Result<Packet<'_>, wire::WireError>,
        bufs: &mut impl RecvBuffers,
    ) {
        self.stats.rx_datagrams += 1;
        let pkt = match decoded {
            Ok(p) => p,
            Err(_) => {
                self.stats.corrupt += 1;
                return;
            }
        };
        match pkt.ty {
            PacketType::Hello => self.on_hello(now, from, &pkt),
            PacketType::HelloAck => self.on_hello_ack(now, from, &pkt),
            PacketType::Reset => self.on_reset(from, &pkt),
            _ => self.on_session_packet(now, from, &pkt, bufs),
        }
    }

    /// Fire due timers: retransmission timeouts, delayed acks, the end of
    /// receiver-not-ready waits, idle release.
    pub fn handle_timeout(&mut self, now: Instant) {
        let mut i = 0;
        while i < self.timers.len() {
            let pi = self.timers[i];
            let p = &self.peers[pi];
            if p.next_deadline() <= now {
                self.fire_timers(pi, now);
            }
            let p = &mut self.peers[pi];
            if p.next_deadline() == Instant::NEVER {
                p.in_timers = false;
                self.timers.swap_remove(i);
            } else {
                i += 1;
            }
        }
    }

    /// The earliest time `handle_timeout` has work, if any.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let t = self
            .timers
            .iter()
            .map(|&pi| self.peers[pi].next_deadline())
            .min()?;
        (t != Instant::NEVER).then_some(t)
    }

    // ------------------------------------------------------------------
    // Output
    // ------------------------------------------------------------------

    /// Produce the next datagram into `buf`, which must be at least
    /// [`Config::mtu`] bytes long (a shorter buffer yields nothing); at most
    /// `mtu` bytes of it are used. Payload is copied
    /// from send buffers through `bufs` — once per transmission. Call until it
    /// returns `None` after every input.
    pub fn poll_transmit(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        bufs: &mut impl SendBuffers,
    ) -> Option<Transmit<P>> {
        // Every frame must be able to hold the largest packet: a retransmission
        // rebuilds a packet at the size it was first sent with.
        if buf.len() < self.cfg.mtu {
            return None;
        }
        let buf = &mut buf[..self.cfg.mtu];
        if let Some((dst, hdr, ctrl)) = self.oneshots.pop_front() {
            let len = encode_ctrl(buf, &hdr, &ctrl);
            self.stats.tx_datagrams += 1;
            if hdr.ty == PacketType::Reset as u8 {
                self.stats.resets_sent += 1;
            }
            return Some(Transmit { dst, len });
        }
        while let Some(&pi) = self.ready.front() {
            if let Some(len) = self.emit(pi, now, buf, bufs) {
                if !self.may_emit(pi, now) {
                    // That was its last for now: off the list, so that
                    // wants_transmit is false and the caller kicks at once.
                    self.ready.pop_front();
                    self.peers[pi].in_ready = false;
                } else if self.ready.len() > 1 {
                    self.ready.rotate_left(1);
                }
                self.stats.tx_datagrams += 1;
                return Some(Transmit {
                    dst: self.peers[pi].key,
                    len,
                });
            }
            self.ready.pop_front();
            self.peers[pi].in_ready = false;
        }
        None
    }

    // ------------------------------------------------------------------
    // Internals: peers, readiness, timers
    // ------------------------------------------------------------------

    fn peer_for(&mut self, key: P) -> Result<PeerId, PostError> {
        if let Some(pi) = self.lookup(key) {
            return Ok(pi);
        }
        if self.peers.len() >= self.cfg.max_peers {
            return Err(PostError::TooManyPeers);
        }
        let cfg = &self.cfg;
        Ok(self.peers.insert(key, |_| Peer::new(key, cfg)))
    }

    #[inline]
    fn lookup(&mut self, key: P) -> Option<PeerId> {
        self.peers.lookup(key)
    }

    fn mark_ready(&mut self, pi: PeerId) {
        let p = &mut self.peers[pi];
        if !p.in_ready {
            p.in_ready = true;
            self.ready.push_back(pi);
        }
    }

    fn arm_timers(&mut self, pi: PeerId) {
        let p = &mut self.peers[pi];
        if !p.in_timers && p.next_deadline() != Instant::NEVER {
            p.in_timers = true;
            self.timers.push(pi);
        }
    }

    fn push_completion(&mut self, c: Completion<P>) {
        self.events.push_back(Event::Completion(c));
    }

    fn source(&self, info: &MsgInfo) -> P {
        self.peers[info.peer].key
    }

    fn fire_timers(&mut self, pi: PeerId, now: Instant) {
        let p = &mut self.peers[pi];
        if p.ack_at <= now {
            p.ack_at = Instant::NEVER;
            p.ack_now = true;
            self.mark_ready(pi);
        }
        let p = &mut self.peers[pi];
        if p.rnr_until <= now {
            // The receiver-not-ready wait is over: probe with the refused packet.
            p.rnr_until = Instant::NEVER;
            p.rnr_probe = true;
            let una = p.una;
            let q = p.q();
            q.rtx.clear();
            for s in q.inflight.iter_mut() {
                s.rtx_queued = false;
            }
            if let Some(s) = q.inflight.front_mut() {
                s.rtx_queued = true;
                q.rtx.push_back(una);
            }
            p.rto_at = now + Nanos(p.rtt.rto);
            self.mark_ready(pi);
        }
        let p = &self.peers[pi];
        if p.rto_at <= now {
            self.on_rto(pi, now);
        }
        let p = &mut self.peers[pi];
        if p.idle_at <= now {
            p.idle_at = Instant::NEVER;
            let idle = p.q.as_ref().is_none_or(|q| q.quiescent())
                && p.rnr_until == Instant::NEVER
                && p.rto_at == Instant::NEVER
                && !p.send_hello
                && !p.send_hello_ack
                && !p.ack_now
                && p.ack_at == Instant::NEVER;
            if idle {
                p.q = None;
            }
        }
    }

    /// Retransmission timeout (RFC 6298 §5.4–5.7).
    fn on_rto(&mut self, pi: PeerId, now: Instant) {
        let cfg_retries = self.cfg.max_retries;
        let p = &mut self.peers[pi];
        p.rto_at = Instant::NEVER;
        self.stats.timeouts += 1;
        match p.conn {
            Conn::Idle => {}
            Conn::HelloSent => {
                p.hello_retries += 1;
                if p.hello_retries > cfg_retries {
                    self.fail_peer(pi, OpError::PeerUnreachable);
                    return;
                }
                p.rtt.backoff(&self.cfg);
                p.send_hello = true;
                p.rto_at = now + Nanos(p.rtt.rto);
                self.mark_ready(pi);
            }
            Conn::Established => {
                let rto = Nanos(p.rtt.rto);
                let una = p.una;
                let q = p.q();
                let Some(front) = q.inflight.front_mut() else {
                    return;
                };
                front.retries = front.retries.saturating_add(1);
                if u32::from(front.retries) > cfg_retries {
                    if !self.only_reported_sends_to(pi) {
                        self.fail_peer(pi, OpError::PeerUnreachable);
                        return;
                    }
                    // Nobody waits on this peer: everything outstanding to
                    // it was reported complete (inject complete), so giving
                    // up would lose it silently. Keep retrying every
                    // rto_max until it answers, closes, or is reported
                    // unreachable (a peer may compute for a long time
                    // without calling us, as manual progress allows).
                    self.stats.patient_retries += 1;
                }
                let p = &mut self.peers[pi];
                let Some(q) = p.q.as_mut() else {
                    return;
                };
                // Resend what has been outstanding for a whole RTO (at least the
                // oldest). Selective acks are forgotten: the receiver may have
                // reneged (RFC 2018 §8; RFC 6675 §5.1 does the same).
                for (i, s) in q.inflight.iter_mut().enumerate() {
                    s.sacked = false;
                    if s.rtx_queued {
                        continue;
                    }
                    if i == 0 || s.sent_at + rto <= now {
                        s.rtx_queued = true;
                        q.rtx.push_back(una.wrapping_add(i as u32));
                    }
                }
                p.rtt.backoff(&self.cfg);
                p.rto_at = now + Nanos(p.rtt.rto);
                self.mark_ready(pi);
            }
        }
    }

    // ------------------------------------------------------------------
    // Handshake (PROTOCOL.md §4)
    // ------------------------------------------------------------------

    fn start_handshake(&mut self, pi: PeerId, now: Instant) {
        let sess = self.rng.nonzero_u32();
        let p = &mut self.peers[pi];
        p.local_sess = sess;
        p.conn = Conn::HelloSent;
        p.send_hello = true;
        p.hello_retries = 0;
        p.rtt = Rtt::new(&self.cfg);
        p.rto_at = now + Nanos(p.rtt.rto);
        self.arm_timers(pi);
        self.mark_ready(pi);
    }

    /// `peer_mtu`: word b of the peer's HELLO or HELLO_ACK (0 = not stated:
    /// assume our own MTU, as before the field existed).
    fn establish(&mut self, pi: PeerId, remote_sess: u32, remote_inc: u32, peer_mtu: u32) {
        let w = self.cfg.window;
        let mtu = self.cfg.mtu;
        let p = &mut self.peers[pi];
        p.remote_sess = remote_sess;
        p.remote_inc = remote_inc;
        p.peer_mtu = match peer_mtu {
            0 => mtu,
            m => (m as usize).clamp(MIN_MTU, mtu),
        };
        p.conn = Conn::Established;
        p.rto_at = Instant::NEVER;
        p.next_seq = 0;
        p.una = 0;
        p.expected = 0;
        p.rx_unacked = 0;
        p.peer_window = w;
        p.hello_retries = 0;
        self.mark_ready(pi);
    }

    fn on_hello(&mut self, now: Instant, from: P, pkt: &Packet<'_>) {
        let s = pkt.hdr.src_sess;
        let inc = pkt.ctrl.a;
        let mtu = pkt.ctrl.b;
        if s == 0 {
            self.stats.dropped += 1;
            return;
        }
        let Ok(pi) = self.peer_for(from) else {
            self.stats.dropped += 1;
            return;
        };
        let p = &self.peers[pi];
        match p.conn {
            Conn::Established if p.remote_sess == s => {}
            Conn::Established => {
                // A new session from this peer: it restarted (new incarnation) or
                // dropped our session. What was in flight is lost (issue 3).
                let reason = if inc != p.remote_inc {
                    OpError::PeerRestarted
                } else {
                    OpError::PeerReset
                };
                self.fail_peer(pi, reason);
                let sess = self.rng.nonzero_u32();
                self.peers[pi].local_sess = sess;
                self.establish(pi, s, inc, mtu);
            }
            Conn::HelloSent => self.establish(pi, s, inc, mtu),
            Conn::Idle => {
                let sess = self.rng.nonzero_u32();
                self.peers[pi].local_sess = sess;
                self.establish(pi, s, inc, mtu);
            }
        }
        let p = &mut self.peers[pi];
        p.send_hello_ack = true;
        p.idle_at = Instant::NEVER;
        let _ = now;
        self.mark_ready(pi);
    }

    fn on_hello_ack(&mut self, _now: Instant, from: P, pkt: &Packet<'_>) {
        let Some(pi) = self.lookup(from) else {
            self.stats.dropped += 1;
            return;
        };
        let p = &self.peers[pi];
        if p.conn == Conn::HelloSent && pkt.hdr.dst_sess == p.local_sess && pkt.hdr.src_sess != 0 {
            self.establish(pi, pkt.hdr.src_sess, pkt.ctrl.a, pkt.ctrl.b);
        } else {
            self.stats.dropped += 1;
        }
    }

    fn on_reset(&mut self, from: P, pkt: &Packet<'_>) {
        let Some(pi) = self.lookup(from) else {
            self.stats.dropped += 1;
            return;
        };
        let p = &self.peers[pi];
        let ours = p.conn != Conn::Idle && pkt.hdr.dst_sess == p.local_sess;
        let about_current = p.conn == Conn::HelloSent || pkt.ctrl.b == p.remote_sess;
        if ours && about_current {
            let reason = if p.remote_inc != 0 && pkt.ctrl.a != p.remote_inc {
                OpError::PeerRestarted
            } else {
                OpError::PeerReset
            };
            self.fail_peer(pi, reason);
        } else {
            self.stats.dropped += 1;
        }
    }

    /// Answer a packet addressed to a session we do not have (PROTOCOL.md §4.3).
    fn queue_reset(&mut self, to: P, pkt: &Packet<'_>) {
        // RESET and CLOSE are never answered (a second copy of a CLOSE finds
        // the session already gone).
        let unanswered = matches!(pkt.ty, PacketType::Reset | PacketType::Close);
        if unanswered || pkt.hdr.src_sess == 0 || self.pending_resets() >= MAX_PENDING_RESETS {
            return;
        }
        let hdr = Header {
            ty: PacketType::Reset as u8,
            dst_sess: pkt.hdr.src_sess,
            ..Default::default()
        };
        let ctrl = CtrlExt {
            a: self.cfg.incarnation,
            b: pkt.hdr.dst_sess,
        };
        self.oneshots.push_back((to, hdr, ctrl));
    }

    fn pending_resets(&self) -> usize {
        self.oneshots
            .iter()
            .filter(|(_, h, _)| h.ty == PacketType::Reset as u8)
            .count()
    }

    // ------------------------------------------------------------------
    // Reliability layer (PROTOCOL.md §5)
    // ------------------------------------------------------------------

    fn on_session_packet(
        &mut self,
        now: Instant,
        from: P,
        pkt: &Packet<'_>,
        bufs: &mut impl RecvBuffers,
    ) {
        let Some(pi) = self.lookup(from) else {
            self.stats.dropped += 1;
            self.queue_reset(from, pkt);
            return;
        };
        let p = &self.peers[pi];
        let session_ok = p.conn == Conn::Established
            && pkt.hdr.dst_sess == p.local_sess
            && pkt.hdr.src_sess == p.remote_sess;
        if !session_ok {
            self.stats.dropped += 1;
            // Addressed to a session of ours that no longer exists: tell the
            // sender. (While our HELLO is outstanding we stay quiet.)
            if p.conn == Conn::Idle
                || (p.conn == Conn::Established && pkt.hdr.dst_sess != p.local_sess)
            {
                self.queue_reset(from, pkt);
            }
            return;
        }
        if pkt.hdr.flags & wf::ACK != 0 {
            self.on_ack(pi, now, &pkt.hdr);
            // on_ack may fail the peer (never today), re-check the session.
            if self.peers[pi].conn != Conn::Established {
                return;
            }
        }
        if pkt.ty == PacketType::Close {
            // Its final ack has completed what it received (above); the rest
            // of the session can never complete (PROTOCOL.md §4.5).
            self.stats.closes_received += 1;
            self.fail_peer(pi, OpError::PeerClosed);
            return;
        }
        if pkt.ty.is_sequenced() {
            self.on_sequenced(pi, now, pkt, bufs);
        }
    }

    /// Process the acknowledgement fields of a valid packet.
    fn on_ack(&mut self, pi: PeerId, now: Instant, hdr: &Header) {
        let Engine {
            peers,
            sends,
            cfg,
            events,
            injects,
            stats,
            ..
        } = self;
        let p = &mut peers[pi];
        p.peer_window = hdr.window.max(1);
        let Some(q) = p.q.as_mut() else { return };
        let d = wire::seq_diff(hdr.ack, p.una);
        let mut progressed = false;
        if d > 0 && (d as usize) <= q.inflight.len() {
            let mut sample = None;
            for _ in 0..d {
                let Some(s) = q.inflight.pop_front() else {
                    break;
                };
                if !s.retransmitted {
                    sample = Some(now.since(s.sent_at).0);
                }
                if let PktKind::Data { op, .. } = s.kind
                    && let Some(st) = sends.get_mut(op)
                {
                    st.unacked = st.unacked.saturating_sub(1);
                    if send_done(st) {
                        finish_send(sends, events, injects, q, op);
                    }
                }
            }
            p.una = hdr.ack;
            if let Some(r) = sample {
                p.rtt.sample(r, cfg);
            } else {
                // RFC 6298 §5.7 keeps the backed-off RTO until a valid sample.
            }
            p.rto_at = if q.inflight.is_empty() {
                Instant::NEVER
            } else {
                now + Nanos(p.rtt.rto)
            };
            if p.rnr_probe {
                // The probe got through: resend the rest of the window.
                p.rnr_probe = false;
                let una = p.una;
                for (i, s) in q.inflight.iter_mut().enumerate() {
                    if !s.sacked && !s.rtx_queued {
                        s.rtx_queued = true;
                        q.rtx.push_back(una.wrapping_add(i as u32));
                    }
                }
            }
            if q.inflight.is_empty() {
                p.idle_at = now + cfg.idle_release;
            }
            progressed = true;
        }
        // Selective acks (hints; the receiver may renege on RNR, PROTOCOL.md §5.3).
        // The latest bitmap replaces what earlier ones said, so a receiver that
        // dropped what it had selectively acked (RNR) is believed at once.
        if wire::seq_diff(hdr.ack, p.una) == 0 {
            let mut highest = None;
            for (pos, s) in q.inflight.iter_mut().take(65).enumerate() {
                // Position 0 is `ack` itself: never received, whatever was said before.
                s.sacked = pos > 0 && hdr.sack & (1 << (pos - 1)) != 0;
                if s.sacked {
                    highest = Some(pos);
                }
            }
            if let Some(h) = highest {
                let una = p.una;
                for pos in 0..h.saturating_sub(DUP_THRESH - 1) {
                    let Some(s) = q.inflight.get_mut(pos) else {
                        break;
                    };
                    if !s.sacked && !s.fast_done && !s.rtx_queued {
                        s.fast_done = true;
                        s.rtx_queued = true;
                        q.rtx.push_back(una.wrapping_add(pos as u32));
                        stats.fast_retransmits += 1;
                        progressed = true;
                    }
                }
            }
        }
        if hdr.flags & wf::RNR != 0 && wire::seq_diff(hdr.ack, p.una) == 0 && !q.inflight.is_empty()
        {
            // Receiver-not-ready: it refused packet `ack` and dropped what it held
            // after it. Wait, then go back to `una`.
            stats.rnr_received += 1;
            // The refusal proves the peer alive: it does not count towards the
            // retry limit, and the back-off restarts.
            p.rtt.reset_backoff(cfg);
            for s in q.inflight.iter_mut() {
                s.retries = 0;
                s.sacked = false;
                s.fast_done = false;
                s.rtx_queued = false;
            }
            q.rtx.clear();
            p.rnr_until = now + cfg.rnr_delay;
            p.rto_at = Instant::NEVER;
        }
        // An ack that moved the window lets waiting packets go; with none
        // waiting the peer has nothing to send (and stays off the ready list,
        // so the caller's transmit pass costs nothing).
        if progressed && q.has_output(send_window(cfg.window, p.peer_window)) {
            self.mark_ready(pi);
        }
        self.arm_timers(pi);
    }

    fn on_sequenced(
        &mut self,
        pi: PeerId,
        now: Instant,
        pkt: &Packet<'_>,
        bufs: &mut impl RecvBuffers,
    ) {
        let p = &mut self.peers[pi];
        let d = wire::seq_diff(pkt.hdr.seq, p.expected);
        if d < 0 {
            // Already processed: a duplicate. Re-ack so a lost ack is repaired.
            self.stats.duplicates += 1;
            p.ack_now = true;
            self.mark_ready(pi);
            return;
        }
        if d > 0 {
            let slot = (d - 1) as usize;
            if d as usize >= usize::from(self.cfg.window) {
                self.stats.dropped += 1;
                return;
            }
            let cost = pkt.payload.len() + REORDER_OVERHEAD;
            let q = p.q();
            if q.reorder.len() <= slot {
                q.reorder.resize_with(slot + 1, || None);
            }
            if q.reorder[slot].is_some() {
                self.stats.duplicates += 1;
            } else if self.reorder_bytes + cost <= self.cfg.reorder_budget {
                q.reorder[slot] = Some(Box::new(Stored {
                    ty: pkt.ty,
                    flags: pkt.hdr.flags,
                    data: pkt.data,
                    ctrl: pkt.ctrl,
                    payload: pkt.payload.to_vec(),
                }));
                self.reorder_bytes += cost;
            } else {
                self.stats.dropped += 1;
            }
            // Out of order: acknowledge at once so the sender sees the SACK.
            p.ack_now = true;
            self.mark_ready(pi);
            return;
        }
        // In order.
        if !self.process(
            pi,
            pkt.ty,
            pkt.hdr.flags,
            &pkt.data,
            &pkt.ctrl,
            pkt.payload,
            bufs,
        ) {
            self.refuse(pi);
            return;
        }
        let mut drained = false;
        loop {
            let p = &mut self.peers[pi];
            p.expected = p.expected.wrapping_add(1);
            p.rx_unacked += 1;
            let Some(q) = p.q.as_mut() else { break };
            let Some(slot) = q.reorder.pop_front() else {
                break;
            };
            let Some(st) = slot else { break };
            drained = true;
            self.reorder_bytes -= st.payload.len() + REORDER_OVERHEAD;
            if !self.process(
                pi,
                st.ty,
                st.flags,
                &st.data,
                &st.ctrl,
                Bytes::One(&st.payload),
                bufs,
            ) {
                self.refuse(pi);
                return;
            }
        }
        // A DATA segment with more of its message to come (an RTS has no
        // payload and is not one).
        let mid_message = pkt.ty == PacketType::Data
            && !pkt.payload.is_empty()
            && (pkt.data.offset as usize).saturating_add(pkt.payload.len())
                < pkt.data.total_len as usize;
        // Only a message whose sender waits for this ack to report its
        // completion (AR) needs it now; an injected one's ack can wait for
        // the reply to carry it, or for ack_delay.
        let awaited = pkt.ty != PacketType::Data || pkt.hdr.flags & wf::AR != 0;
        let end_at_once = self.cfg.ack_message_end_at_once && !mid_message && awaited;
        let p = &mut self.peers[pi];
        if drained || end_at_once || p.rx_unacked >= self.cfg.ack_every || self.cfg.ack_delay.0 == 0
        {
            // With no ack delay the ack goes out with the next poll_transmit,
            // i.e. once per batch of received datagrams.
            p.ack_now = true;
            self.mark_ready(pi);
        } else if p.ack_at == Instant::NEVER {
            p.ack_at = now + self.cfg.ack_delay;
            self.arm_timers(pi);
        }
    }

    /// Receiver-not-ready: refuse packet `expected`, drop what was held after it.
    fn refuse(&mut self, pi: PeerId) {
        let p = &mut self.peers[pi];
        if let Some(q) = p.q.as_mut() {
            for st in q.reorder.drain(..).flatten() {
                self.reorder_bytes -= st.payload.len() + REORDER_OVERHEAD;
            }
        }
        p.rnr_pending = true;
        p.ack_now = true;
        self.stats.rnr_sent += 1;
        self.mark_ready(pi);
    }

    /// An unsequenced packet of `ty` in `p`'s session carrying our
    /// acknowledgement (ACK, CLOSE).
    fn acking_header(&self, p: &Peer<P>, ty: PacketType) -> Header {
        let (ack, window, sack) = self.ack_fields(p);
        Header {
            ty: ty as u8,
            flags: wf::ACK,
            src_sess: p.local_sess,
            dst_sess: p.remote_sess,
            ack,
            window,
            sack,
            ..Default::default()
        }
    }

    fn ack_fields(&self, p: &Peer<P>) -> (u32, u16, u64) {
        let mut sack = 0u64;
        if let Some(q) = p.q.as_ref() {
            for (i, s) in q.reorder.iter().take(64).enumerate() {
                if s.is_some() {
                    sack |= 1 << i;
                }
            }
        }
        (p.expected, self.cfg.window, sack)
    }

    /// Whether [`Engine::emit`] could produce a packet for peer `pi` now. It
    /// may say yes when emit then finds nothing (stale retransmission
    /// entries), never no when emit has something: a peer taken off the ready
    /// list is put back by whatever gives it output again.
    fn may_emit(&self, pi: PeerId, now: Instant) -> bool {
        let p = &self.peers[pi];
        if p.send_hello {
            return true;
        }
        if p.conn != Conn::Established {
            return false;
        }
        if p.send_hello_ack || p.rnr_pending || p.ack_now || p.ack_at <= now {
            return true;
        }
        p.rnr_until == Instant::NEVER
            && p.q
                .as_ref()
                .is_some_and(|q| q.has_output(send_window(self.cfg.window, p.peer_window)))
    }

    /// Build the next packet for peer `pi`, if it has one.
    fn emit(
        &mut self,
        pi: PeerId,
        now: Instant,
        buf: &mut [u8],
        bufs: &mut impl SendBuffers,
    ) -> Option<usize> {
        let inc = self.cfg.incarnation;
        // HELLO and HELLO_ACK state the largest datagram we accept (§2.3).
        let hello = CtrlExt {
            a: inc,
            b: self.cfg.mtu as u32,
        };
        let p = &mut self.peers[pi];
        if p.send_hello {
            p.send_hello = false;
            let h = Header {
                ty: PacketType::Hello as u8,
                src_sess: p.local_sess,
                ..Default::default()
            };
            return Some(encode_ctrl(buf, &h, &hello));
        }
        if p.conn != Conn::Established {
            return None;
        }
        if p.send_hello_ack {
            p.send_hello_ack = false;
            let h = Header {
                ty: PacketType::HelloAck as u8,
                src_sess: p.local_sess,
                dst_sess: p.remote_sess,
                ..Default::default()
            };
            return Some(encode_ctrl(buf, &h, &hello));
        }
        if p.rnr_pending {
            return Some(self.emit_ack(pi, now, buf));
        }
        if p.rnr_until == Instant::NEVER {
            if let Some(len) = self.emit_retransmit(pi, now, buf, bufs) {
                return Some(len);
            }
            if let Some(len) = self.emit_new(pi, now, buf, bufs) {
                return Some(len);
            }
        }
        let p = &self.peers[pi];
        if p.ack_now || p.ack_at <= now {
            return Some(self.emit_ack(pi, now, buf));
        }
        None
    }

    fn emit_ack(&mut self, pi: PeerId, now: Instant, buf: &mut [u8]) -> usize {
        let mut h = self.acking_header(&self.peers[pi], PacketType::Ack);
        let p = &mut self.peers[pi];
        if p.rnr_pending {
            h.flags |= wf::RNR;
            p.rnr_pending = false;
        }
        clear_ack_state(p);
        if p.idle_at == Instant::NEVER && p.q.as_ref().is_none_or(|q| q.quiescent()) {
            p.idle_at = now + self.cfg.idle_release;
            self.arm_timers(pi);
        }
        wire::encode_header(buf, &h);
        wire::seal(buf, wire::COMMON_LEN)
    }

    fn emit_retransmit(
        &mut self,
        pi: PeerId,
        now: Instant,
        buf: &mut [u8],
        bufs: &mut impl SendBuffers,
    ) -> Option<usize> {
        loop {
            let p = &mut self.peers[pi];
            let una = p.una;
            let q = p.q.as_mut()?;
            let seq = q.rtx.pop_front()?;
            let pos = wire::seq_diff(seq, una);
            if pos < 0 {
                continue;
            }
            let Some(s) = q.inflight.get_mut(pos as usize) else {
                continue;
            };
            s.rtx_queued = false;
            if s.sacked {
                continue;
            }
            s.sent_at = now;
            s.retransmitted = true;
            let kind = s.kind;
            self.stats.retransmits += 1;
            return Some(self.build(pi, seq, kind, buf, bufs));
        }
    }

    fn emit_new(
        &mut self,
        pi: PeerId,
        now: Instant,
        buf: &mut [u8],
        bufs: &mut impl SendBuffers,
    ) -> Option<usize> {
        let cfg_window = self.cfg.window;
        let p = &mut self.peers[pi];
        let maxp = (buf.len().min(p.peer_mtu) - wire::DATA_OVERHEAD).min(usize::from(u16::MAX));
        let window = send_window(cfg_window, p.peer_window);
        let q = p.q.as_mut()?;
        if q.inflight.len() >= window {
            return None;
        }
        let kind = if let Some(c) = q.ctrl.pop_front() {
            PktKind::Ctrl(c)
        } else {
            // Rendezvous data first (its message was matched earlier), then new messages.
            let (oi, from_rndv) = if let Some(&oi) = q.rndv_ready.front() {
                (oi, true)
            } else if let Some(&oi) = q.sendq.front() {
                (oi, false)
            } else {
                return None;
            };
            let Some(st) = self.sends.get_mut(oi) else {
                if from_rndv {
                    q.rndv_ready.pop_front();
                } else {
                    q.sendq.pop_front();
                }
                return None;
            };
            let kind;
            if st.hflags & wf::RNDV != 0 && !st.rts_sent {
                // Request-to-send: matching information only (PROTOCOL.md §6.3).
                st.rts_sent = true;
                st.await_cts = true;
                kind = PktKind::Data {
                    op: oi,
                    offset: 0,
                    len: 0,
                    first: true,
                };
                q.sendq.pop_front();
            } else {
                let off = st.next_off;
                let n = (st.send_len - off).min(maxp as u32);
                let first = off == 0 && st.hflags & wf::RNDV == 0;
                st.next_off += n;
                if st.next_off >= st.send_len {
                    st.all_sent = true;
                    if st.complete_on_send && !st.reported {
                        st.reported = true;
                        self.events
                            .push_back(Event::Completion(send_completion(st, None)));
                    }
                    if from_rndv {
                        q.rndv_ready.pop_front();
                    } else {
                        q.sendq.pop_front();
                    }
                }
                kind = PktKind::Data {
                    op: oi,
                    offset: off,
                    len: n as u16,
                    first,
                };
            }
            st.unacked += 1;
            kind
        };
        let seq = p.next_seq;
        p.next_seq = p.next_seq.wrapping_add(1);
        q.inflight.push_back(SentPkt {
            kind,
            sent_at: now,
            retries: 0,
            sacked: false,
            retransmitted: false,
            fast_done: false,
            rtx_queued: false,
        });
        if p.rto_at == Instant::NEVER {
            p.rto_at = now + Nanos(p.rtt.rto);
            self.arm_timers(pi);
        }
        Some(self.build(pi, seq, kind, buf, bufs))
    }

    /// Encode a sequenced packet (first transmission or retransmission).
    fn build(
        &mut self,
        pi: PeerId,
        seq: u32,
        kind: PktKind,
        buf: &mut [u8],
        bufs: &mut impl SendBuffers,
    ) -> usize {
        let (ack, window, sack) = self.ack_fields(&self.peers[pi]);
        let p = &mut self.peers[pi];
        let mut h = Header {
            ty: 0,
            flags: wf::ACK,
            src_sess: p.local_sess,
            dst_sess: p.remote_sess,
            seq,
            ack,
            window,
            payload_len: 0,
            sack,
        };
        clear_ack_state(p);
        match kind {
            PktKind::Ctrl(c) => {
                let mut ext = CtrlExt::default();
                match c {
                    Ctrl::Cts {
                        msg_id,
                        max_len,
                        discard,
                    } => {
                        h.ty = PacketType::Cts as u8;
                        if discard {
                            h.flags |= wf::DISCARD;
                        }
                        ext.a = msg_id;
                        ext.b = max_len;
                    }
                    Ctrl::Done { msg_id } => {
                        h.ty = PacketType::Done as u8;
                        ext.a = msg_id;
                    }
                }
                encode_ctrl(buf, &h, &ext)
            }
            PktKind::Data {
                op,
                offset,
                len,
                first,
            } => {
                h.ty = PacketType::Data as u8;
                let Some(st) = self.sends.get(op) else {
                    // Cannot happen: an op outlives its unacked packets. Send an
                    // empty ack rather than panic.
                    h.ty = PacketType::Ack as u8;
                    h.seq = 0;
                    wire::encode_header(buf, &h);
                    return wire::seal(buf, wire::COMMON_LEN);
                };
                h.flags |= st.hflags;
                if first {
                    h.flags |= wf::FIRST;
                }
                h.payload_len = len;
                let ext = DataExt {
                    msg_id: st.msg_id,
                    total_len: st.len,
                    offset,
                    tag: st.tag,
                    data: st.data,
                };
                wire::encode_header(buf, &h);
                wire::encode_data_ext(buf, &ext);
                let n = usize::from(len);
                let dst = &mut buf[wire::DATA_HDR_LEN..wire::DATA_HDR_LEN + n];
                if let Some(b) = st.inject.as_ref() {
                    let o = offset as usize;
                    dst.copy_from_slice(&b[o..o + n]);
                } else if n > 0 {
                    bufs.read(st.token, offset as usize, dst);
                }
                wire::seal(buf, wire::DATA_HDR_LEN + n)
            }
        }
    }

    // ------------------------------------------------------------------
    // Messaging layer (PROTOCOL.md §6)
    // ------------------------------------------------------------------

    /// Process one in-order sequenced packet. Returns false to refuse it (RNR).
    #[allow(clippy::too_many_arguments)]
    fn process(
        &mut self,
        pi: PeerId,
        ty: PacketType,
        flags: u16,
        data: &DataExt,
        ctrl: &CtrlExt,
        payload: Bytes,
        bufs: &mut impl RecvBuffers,
    ) -> bool {
        match ty {
            PacketType::Data => {
                if flags & wf::FIRST != 0 {
                    let info = MsgInfo {
                        peer: pi,
                        msg_id: data.msg_id,
                        total: data.total_len,
                        tag: data.tag,
                        data: data.data,
                        hflags: flags & (wf::TAGGED | wf::CQ_DATA | wf::DC | wf::RNDV),
                    };
                    self.on_message_start(info, payload, bufs)
                } else {
                    self.on_segment(pi, data, payload, bufs);
                    true
                }
            }
            PacketType::Cts => {
                self.on_cts(pi, ctrl.a, ctrl.b, flags & wf::DISCARD != 0);
                true
            }
            PacketType::Done => {
                self.on_done(pi, ctrl.a);
                true
            }
            _ => true,
        }
    }

    fn recv_matches(&self, r: &Recv<P>, info: &MsgInfo) -> bool {
        if let Some(src) = r.src
            && self.peers[info.peer].key != src
        {
            return false;
        }
        match r.tag {
            Some(t) => t.matches(info.tag),
            None => true,
        }
    }

    fn on_message_start(
        &mut self,
        info: MsgInfo,
        payload: Bytes,
        bufs: &mut impl RecvBuffers,
    ) -> bool {
        let tagged = info.hflags & wf::TAGGED != 0;
        let rndv = info.hflags & wf::RNDV != 0;
        let q = if tagged {
            &self.posted_tagged
        } else {
            &self.posted_msg
        };
        let pos = q.iter().position(|&ri| {
            self.recvs
                .get(ri)
                .is_some_and(|r| self.recv_matches(r, &info))
        });
        if let Some(pos) = pos {
            let q = if tagged {
                &mut self.posted_tagged
            } else {
                &mut self.posted_msg
            };
            let ri = q[pos];
            let (base, cap) = self.place(ri, Some(pos), tagged, info.total as usize);
            let dest = Dest::Posted {
                recv: ri,
                base,
                cap,
            };
            if rndv {
                let expect = (info.total as usize).min(cap) as u32;
                self.queue_ctrl(
                    info.peer,
                    Ctrl::Cts {
                        msg_id: info.msg_id,
                        max_len: expect,
                        discard: false,
                    },
                );
                self.start_rx(info, expect, dest, bufs);
            } else {
                self.write_dest(dest, 0, payload, bufs);
                self.start_rx_with(info, info.total, payload.len() as u32, dest, bufs);
            }
            return true;
        }
        // Unexpected (fi_msg(3): buffered until a matching receive is posted).
        if self.unexp.len() >= self.cfg.unexpected_max {
            return false;
        }
        let cost = if rndv { 0 } else { info.total as usize };
        if self.unexp_bytes + cost > self.cfg.unexpected_budget {
            return false;
        }
        self.unexp_bytes += cost;
        self.stats.unexpected_bytes_max =
            self.stats.unexpected_bytes_max.max(self.unexp_bytes as u64);
        let mut buf = Vec::new();
        if !rndv {
            buf.resize(info.total as usize, 0);
            payload.copy_to(&mut buf);
        }
        let received = payload.len() as u32;
        let complete = !rndv && received >= info.total;
        let sess = self.peers[info.peer].remote_sess;
        let ui = self.unexp.insert(Unexp {
            info,
            sess,
            buf,
            received,
            complete,
            rndv,
            claimed: None,
            attached: None,
            cost,
        });
        if tagged {
            self.unexp_tagged.push_back(ui);
        } else {
            self.unexp_msg.push_back(ui);
        }
        if !rndv && !complete {
            let m = RxMsg {
                info,
                expect: info.total,
                received,
                dest: Dest::Unexp(ui),
            };
            self.peers[info.peer].q().rx_msgs.push(m);
        }
        true
    }

    /// Reserve space for a message of `total` bytes in receive `ri`; removes a
    /// single receive (or a multi-recv buffer that falls below `min_free`) from
    /// its queue (`pos` when it is queued). Returns (offset in buffer, capacity).
    fn place(&mut self, ri: Idx, pos: Option<usize>, tagged: bool, total: usize) -> (usize, usize) {
        let Some(r) = self.recvs.get_mut(ri) else {
            return (0, 0);
        };
        let cap = r.cap;
        let (base, room, remove) = match r.multi.as_mut() {
            None => (0, cap, true),
            Some(m) => {
                let base = m.used;
                let room = cap - m.used;
                m.used += total.min(room);
                m.inflight += 1;
                if cap - m.used < m.min_free.max(1) {
                    m.retired = true;
                }
                (base, room, m.retired)
            }
        };
        if remove && let Some(pos) = pos {
            let q = if tagged {
                &mut self.posted_tagged
            } else {
                &mut self.posted_msg
            };
            q.remove(pos);
        }
        (base, room)
    }

    fn write_dest(&mut self, dest: Dest, offset: u32, payload: Bytes, bufs: &mut impl RecvBuffers) {
        if payload.is_empty() {
            return;
        }
        match dest {
            Dest::Posted { recv, base, cap } => {
                let off = offset as usize;
                if off >= cap {
                    return;
                }
                let n = payload.len().min(cap - off);
                if let Some(r) = self.recvs.get(recv) {
                    // Piece by piece: a datagram that arrived in several
                    // buffers is copied once, straight into the receive.
                    payload.for_each(0, n, |at, piece| {
                        bufs.write(r.token, base + off + at, piece)
                    });
                }
            }
            Dest::Unexp(ui) => {
                if let Some(u) = self.unexp.get_mut(ui) {
                    let off = offset as usize;
                    if let Some(dst) = u.buf.get_mut(off..off + payload.len()) {
                        payload.copy_to(dst);
                    }
                }
            }
            Dest::Drop => {}
        }
    }

    fn start_rx(&mut self, info: MsgInfo, expect: u32, dest: Dest, bufs: &mut impl RecvBuffers) {
        self.start_rx_with(info, expect, 0, dest, bufs);
    }

    fn start_rx_with(
        &mut self,
        info: MsgInfo,
        expect: u32,
        received: u32,
        dest: Dest,
        bufs: &mut impl RecvBuffers,
    ) {
        let m = RxMsg {
            info,
            expect,
            received,
            dest,
        };
        if received >= expect {
            self.finish_rx(m, bufs);
        } else {
            self.peers[info.peer].q().rx_msgs.push(m);
        }
    }

    fn on_segment(
        &mut self,
        pi: PeerId,
        data: &DataExt,
        payload: Bytes,
        bufs: &mut impl RecvBuffers,
    ) {
        let p = &mut self.peers[pi];
        let Some(q) = p.q.as_mut() else { return };
        let Some(pos) = q.rx_msgs.iter().position(|m| m.info.msg_id == data.msg_id) else {
            self.stats.dropped += 1;
            return;
        };
        let dest = q.rx_msgs[pos].dest;
        q.rx_msgs[pos].received += payload.len() as u32;
        let done = q.rx_msgs[pos].received >= q.rx_msgs[pos].expect;
        let m = if done {
            Some(q.rx_msgs.swap_remove(pos))
        } else {
            None
        };
        self.write_dest(dest, data.offset, payload, bufs);
        if let Some(u) = dest_unexp(dest).and_then(|ui| self.unexp.get_mut(ui)) {
            u.received += payload.len() as u32;
        }
        if let Some(m) = m {
            self.finish_rx(m, bufs);
        }
    }

    /// All bytes of a message arrived.
    fn finish_rx(&mut self, m: RxMsg, bufs: &mut impl RecvBuffers) {
        match m.dest {
            Dest::Posted { recv, base, cap } => {
                self.complete_recv(recv, base, cap, &m.info, None);
                self.delivered(&m.info, None);
            }
            Dest::Unexp(ui) => {
                let Some(u) = self.unexp.get_mut(ui) else {
                    return;
                };
                u.complete = true;
                match u.attached {
                    None => {}
                    Some(Dest::Posted { recv, base, cap }) => {
                        let Some(u) = self.unexp.remove(ui) else {
                            return;
                        };
                        self.unexp_bytes -= u.cost;
                        let n = u.buf.len().min(cap);
                        if n > 0
                            && let Some(r) = self.recvs.get(recv)
                        {
                            bufs.write(r.token, base, &u.buf[..n]);
                        }
                        self.complete_recv(recv, base, cap, &u.info, None);
                        self.delivered(&u.info, Some(u.sess));
                    }
                    Some(_) => {
                        let Some(u) = self.unexp.remove(ui) else {
                            return;
                        };
                        self.unexp_bytes -= u.cost;
                        self.delivered(&u.info, Some(u.sess));
                    }
                }
            }
            Dest::Drop => self.delivered(&m.info, None),
        }
    }

    /// FI_DELIVERY_COMPLETE: tell the sender the message was placed (or discarded).
    fn delivered(&mut self, info: &MsgInfo, sess: Option<u32>) {
        if info.hflags & wf::DC == 0 {
            return;
        }
        let p = &self.peers[info.peer];
        if p.conn != Conn::Established || sess.is_some_and(|s| s != p.remote_sess) {
            return;
        }
        self.queue_ctrl(
            info.peer,
            Ctrl::Done {
                msg_id: info.msg_id,
            },
        );
    }

    fn queue_ctrl(&mut self, pi: PeerId, c: Ctrl) {
        self.peers[pi].q().ctrl.push_back(c);
        self.mark_ready(pi);
    }

    /// Complete a receive (or one message of a multi-recv buffer).
    fn complete_recv(
        &mut self,
        ri: Idx,
        base: usize,
        cap: usize,
        info: &MsgInfo,
        err: Option<OpError>,
    ) {
        let Some(r) = self.recvs.get_mut(ri) else {
            return;
        };
        let token = r.token;
        let mut flags = Flags::RECV | msg_flags(info.hflags);
        let release = match r.multi.as_mut() {
            None => true,
            Some(m) => {
                m.inflight = m.inflight.saturating_sub(1);
                let rel = m.retired && m.inflight == 0;
                if rel {
                    flags |= Flags::MULTI_RECV;
                }
                rel
            }
        };
        if release {
            self.recvs.remove(ri);
        }
        let total = info.total as usize;
        let len = total.min(cap);
        let (error, olen) = match err {
            Some(e) => (Some(e), 0),
            None if total > cap => (Some(OpError::Truncated), total - cap),
            None => (None, 0),
        };
        let c = Completion {
            token,
            flags,
            len,
            buf_offset: base,
            data: info.data,
            tag: info.tag,
            src: Some(self.source(info)),
            error,
            olen,
        };
        self.push_completion(c);
    }

    /// Deliver queued unexpected message `ui` (already removed from its queue)
    /// into receive `ri`. Returns true when `ri` is a multi-recv buffer that can
    /// take more messages and is not yet queued.
    fn deliver_unexp(&mut self, ui: Idx, ri: Idx, bufs: &mut impl RecvBuffers) -> bool {
        let Some(u) = self.unexp.get(ui) else {
            return false;
        };
        let info = u.info;
        let (base, cap) = self.place(ri, None, false, info.total as usize);
        let more = self
            .recvs
            .get(ri)
            .and_then(|r| r.multi)
            .is_some_and(|m| !m.retired);
        let dest = Dest::Posted {
            recv: ri,
            base,
            cap,
        };
        let Some(u) = self.unexp.get_mut(ui) else {
            return more;
        };
        if u.rndv {
            let sess = u.sess;
            let Some(u) = self.unexp.remove(ui) else {
                return more;
            };
            self.unexp_bytes -= u.cost;
            let p = &self.peers[info.peer];
            if p.conn == Conn::Established && p.remote_sess == sess {
                let expect = (info.total as usize).min(cap) as u32;
                self.queue_ctrl(
                    info.peer,
                    Ctrl::Cts {
                        msg_id: info.msg_id,
                        max_len: expect,
                        discard: false,
                    },
                );
                self.start_rx(info, expect, dest, bufs);
            } else {
                // The session that sent the request is gone: its data never comes.
                self.complete_recv(ri, base, cap, &info, Some(OpError::PeerReset));
            }
        } else if u.complete {
            let Some(u) = self.unexp.remove(ui) else {
                return more;
            };
            self.unexp_bytes -= u.cost;
            let n = u.buf.len().min(cap);
            if n > 0
                && let Some(r) = self.recvs.get(ri)
            {
                bufs.write(r.token, base, &u.buf[..n]);
            }
            self.complete_recv(ri, base, cap, &info, None);
            self.delivered(&info, Some(u.sess));
        } else {
            u.attached = Some(dest);
        }
        more
    }

    /// Drop unexpected message `ui` (already out of its queue): FI_DISCARD.
    fn discard_unexp(&mut self, ui: Idx) {
        let Some(u) = self.unexp.get_mut(ui) else {
            return;
        };
        if !u.rndv && !u.complete {
            // Still arriving: the rest is dropped when it comes.
            u.attached = Some(Dest::Drop);
            return;
        }
        let Some(u) = self.unexp.remove(ui) else {
            return;
        };
        self.unexp_bytes -= u.cost;
        let p = &self.peers[u.info.peer];
        let same = p.conn == Conn::Established && p.remote_sess == u.sess;
        if u.rndv {
            if same {
                self.queue_ctrl(
                    u.info.peer,
                    Ctrl::Cts {
                        msg_id: u.info.msg_id,
                        max_len: 0,
                        discard: true,
                    },
                );
            }
        } else {
            self.delivered(&u.info, Some(u.sess));
        }
    }

    fn find_unexp(
        &self,
        tagged: bool,
        src: Option<P>,
        tag: Option<TagMatch>,
        claim: Option<u64>,
    ) -> Option<Idx> {
        let q = if tagged {
            &self.unexp_tagged
        } else {
            &self.unexp_msg
        };
        q.iter().copied().find(|&ui| {
            let Some(u) = self.unexp.get(ui) else {
                return false;
            };
            if u.claimed != claim || u.attached.is_some() {
                return false;
            }
            if let Some(s) = src
                && self.peers[u.info.peer].key != s
            {
                return false;
            }
            tag.is_none_or(|t| t.matches(u.info.tag))
        })
    }

    fn remove_unexp_from_queue(&mut self, ui: Idx) {
        for q in [&mut self.unexp_msg, &mut self.unexp_tagged] {
            if let Some(pos) = q.iter().position(|&x| x == ui) {
                q.remove(pos);
                return;
            }
        }
    }

    fn requeue_unexp_front(&mut self, ui: Idx) {
        let Some(u) = self.unexp.get(ui) else { return };
        if u.info.hflags & wf::TAGGED != 0 {
            self.unexp_tagged.push_front(ui);
        } else {
            self.unexp_msg.push_front(ui);
        }
    }

    fn on_cts(&mut self, pi: PeerId, msg_id: u32, max_len: u32, discard: bool) {
        let Engine {
            peers,
            sends,
            events,
            injects,
            ..
        } = self;
        let p = &mut peers[pi];
        let Some(q) = p.q.as_mut() else { return };
        let found = q.waiting.iter().copied().find(|&oi| {
            sends
                .get(oi)
                .is_some_and(|s| s.msg_id == msg_id && s.await_cts)
        });
        let Some(oi) = found else { return };
        let Some(st) = sends.get_mut(oi) else { return };
        st.await_cts = false;
        st.send_len = if discard { 0 } else { st.len.min(max_len) };
        if st.send_len == 0 {
            st.all_sent = true;
            if send_done(st) {
                finish_send(sends, events, injects, q, oi);
            }
        } else {
            q.rndv_ready.push_back(oi);
        }
        self.mark_ready(pi);
    }

    fn on_done(&mut self, pi: PeerId, msg_id: u32) {
        let Engine {
            peers,
            sends,
            events,
            injects,
            ..
        } = self;
        let p = &mut peers[pi];
        let Some(q) = p.q.as_mut() else { return };
        let found = q.waiting.iter().copied().find(|&oi| {
            sends
                .get(oi)
                .is_some_and(|s| s.msg_id == msg_id && !s.await_cts && s.hflags & wf::DC != 0)
        });
        let Some(oi) = found else { return };
        let Some(st) = sends.get_mut(oi) else { return };
        st.done_rcvd = true;
        if send_done(st) {
            finish_send(sends, events, injects, q, oi);
        }
    }

    // ------------------------------------------------------------------
    // Failure
    // ------------------------------------------------------------------

    /// Tear down the session with peer `pi`: every operation that depended on
    /// it completes with `reason`; the peer returns to Idle (a later send opens
    /// a new session).
    fn fail_peer(&mut self, pi: PeerId, reason: OpError) {
        self.stats.peers_lost += 1;
        let key = self.peers[pi].key;
        self.events.push_back(Event::PeerLost { peer: key, reason });
        // Sends.
        let ops: Vec<Idx> = self
            .sends
            .indices()
            .filter(|&oi| self.sends.get(oi).is_some_and(|s| s.peer == pi))
            .collect();
        for oi in ops {
            let Some(st) = self.sends.remove(oi) else {
                continue;
            };
            // An inject-complete send already reported its completion.
            if !st.reported_early() {
                self.events
                    .push_back(Event::Completion(send_completion(&st, Some(reason))));
            }
            if let Some(b) = st.inject {
                self.injects.give_back(b);
            }
        }
        // Messages being received.
        let q = self.peers[pi].q.take();
        if let Some(q) = q {
            for st in q.reorder.iter().flatten() {
                self.reorder_bytes -= st.payload.len() + REORDER_OVERHEAD;
            }
            for m in q.rx_msgs {
                match m.dest {
                    Dest::Posted { recv, base, cap } => {
                        self.complete_recv(recv, base, cap, &m.info, Some(reason))
                    }
                    Dest::Unexp(ui) => {
                        self.remove_unexp_from_queue(ui);
                        if let Some(u) = self.unexp.remove(ui) {
                            self.unexp_bytes -= u.cost;
                            if let Some(Dest::Posted { recv, base, cap }) = u.attached {
                                self.complete_recv(recv, base, cap, &u.info, Some(reason));
                            }
                        }
                    }
                    Dest::Drop => {}
                }
            }
        }
        // Rendezvous requests from this peer can no longer be served.
        let stale: Vec<Idx> = self
            .unexp
            .indices()
            .filter(|&ui| {
                self.unexp
                    .get(ui)
                    .is_some_and(|u| u.info.peer == pi && u.rndv)
            })
            .collect();
        for ui in stale {
            self.remove_unexp_from_queue(ui);
            self.unexp.remove(ui);
        }
        let cfg = &self.cfg;
        let p = &mut self.peers[pi];
        p.conn = Conn::Idle;
        p.local_sess = 0;
        p.remote_sess = 0;
        p.send_hello = false;
        p.send_hello_ack = false;
        p.ack_now = false;
        p.rnr_pending = false;
        p.rnr_probe = false;
        p.next_seq = 0;
        p.una = 0;
        p.next_msg_id = 0;
        p.expected = 0;
        p.rx_unacked = 0;
        p.rtt = Rtt::new(cfg);
        p.rto_at = Instant::NEVER;
        p.ack_at = Instant::NEVER;
        p.rnr_until = Instant::NEVER;
        p.idle_at = Instant::NEVER;
    }
}

fn dest_unexp(d: Dest) -> Option<Idx> {
    match d {
        Dest::Unexp(ui) => Some(ui),
        _ => None,
    }
}

fn clear_ack_state<P>(p: &mut Peer<P>) {
    p.ack_now = false;
    p.ack_at = Instant::NEVER;
    p.rx_unacked = 0;
}

fn send_done(st: &SendState) -> bool {
    st.all_sent && st.unacked == 0 && !st.await_cts && (st.hflags & wf::DC == 0 || st.done_rcvd)
}

/// Complete send `oi` successfully and free it.
fn finish_send<P>(
    sends: &mut Slab<SendState>,
    events: &mut VecDeque<Event<P>>,
    injects: &mut InjectStore,
    q: &mut Queues,
    oi: Idx,
) {
    let Some(st) = sends.remove(oi) else { return };
    if st.hflags & (wf::RNDV | wf::DC) != 0
        && let Some(pos) = q.waiting.iter().position(|&x| x == oi)
    {
        q.waiting.swap_remove(pos);
    }
    if !st.reported {
        events.push_back(Event::Completion(send_completion(&st, None)));
    }
    if let Some(b) = st.inject {
        injects.give_back(b);
    }
}

/// Copies of injected payloads (fi_inject, FI_INJECT, inject complete): the
/// bytes they hold, counted against `Config::inject_budget`, and a few
/// buffers kept from acknowledged ones — a ping-pong of small messages then
/// allocates nothing per message.
#[derive(Debug, Default)]
struct InjectStore {
    bytes: usize,
    spare: Vec<Vec<u8>>,
}

/// Buffers [`InjectStore`] keeps for reuse, and the largest it keeps (so at
/// most 256 KiB stay allocated).
const SPARE_INJECT_BUFFERS: usize = 64;
const SPARE_INJECT_CAPACITY: usize = 4096;

impl InjectStore {
    fn copy_of(&mut self, b: &[u8]) -> Vec<u8> {
        self.bytes += b.len();
        let mut v = self.spare.pop().unwrap_or_default();
        v.clear();
        v.extend_from_slice(b);
        v
    }

    fn give_back(&mut self, v: Vec<u8>) {
        self.bytes -= v.len();
        if self.spare.len() < SPARE_INJECT_BUFFERS && v.capacity() <= SPARE_INJECT_CAPACITY {
            self.spare.push(v);
        }
    }
}

/// The completion of send `st`, successful or failed with `error`.
fn send_completion<P>(st: &SendState, error: Option<OpError>) -> Completion<P> {
    Completion {
        token: st.token,
        flags: Flags::SEND | msg_flags(st.hflags & wf::TAGGED),
        len: st.len as usize,
        buf_offset: 0,
        data: 0,
        tag: 0,
        src: None,
        error,
        olen: 0,
    }
}

fn encode_ctrl(buf: &mut [u8], h: &Header, c: &CtrlExt) -> usize {
    wire::encode_header(buf, h);
    wire::encode_ctrl_ext(buf, c);
    wire::seal(buf, wire::COMMON_LEN + wire::CTRL_EXT_LEN)
}

/// Bytes per idle peer: the peer record, plus a hash-map slot (key + index + control byte).
pub const fn idle_peer_bytes<P>() -> usize {
    core::mem::size_of::<Peer<P>>() + peers::map_slot_bytes::<P>()
}

/// Bytes of the queue block an active peer adds (heap, plus the deques' own buffers).
pub const fn active_peer_block_bytes() -> usize {
    core::mem::size_of::<Queues>()
}
