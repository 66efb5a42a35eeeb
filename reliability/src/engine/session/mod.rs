//! A session: everything the engine keeps about one peer (PROTOCOL.md §4–5).
//! Its state and methods are split by room:
//!
//! - `handshake.rs`: HELLO / HELLO_ACK / RESET, which packets a session admits (§4);
//! - `sender.rs`: the window in flight, acks, SACK, loss detection, RTO, RNR wait (§5.1, §5.3, §5.4);
//! - `rack.rs`: time-based loss detection, RACK (RFC 8985, §5.3);
//! - `paths.rs`: which entropy value each datagram takes, passing over lossy ones (§4.6);
//! - `receiver.rs`: duplicates, reordering, in-order delivery up to the matcher, the ack policy, refusals (§5.2, §5.4);
//! - `transmit.rs`: the next packet to send, and encoding it;
//! - `send_ops.rs`: the send operations queued to this peer, their segmentation and completions (§6.1, §6.3, §6.4);
//! - `rma_ops.rs`, `rma_target.rs`: RMA and atomics to and from this peer, initiator and target (§8);
//! - `rtt.rs`: the RTT estimator (RFC 6298); `reorder.rs`: the reordering buffer.
//!
//! An idle session is small (`IDLE_PEER_BYTES`): its queues live in a heap
//! block only while the peer is active, released after `Config::idle_release`.

mod congestion;
mod grant;
mod handshake;
mod packing;
mod paths;
mod rack;
mod receiver;
mod reorder;
mod rma_ops;
mod rma_target;
mod rtt;
mod send_ops;
mod sender;
mod transmit;

use std::collections::VecDeque;

pub(crate) use grant::RxShare;
pub(crate) use handshake::{Admission, HelloVerdict};

use super::auth::{Cookie, Reject, SessionKeys};
use super::events::Events;
use super::peers::PeerId;
use super::schedule::{Listed, Schedule};
use super::seam::{Control, Incoming, Sessions};
use super::shared::Shared;
use crate::api::{Config, OpError};
use crate::time::{Instant, Nanos};
use crate::wire;
use congestion::Congestion;
use paths::PathView;
use rack::Rack;
use reorder::ReorderBuffer;
use rma_ops::RmaOps;
use rtt::Rtt;
use send_ops::SendOps;
use sender::SentPkt;

/// Smallest datagram (`Config::mtu`) an engine works with, or believes a
/// peer accepts: room for a DATA header, some payload and the CRC.
pub(crate) const MIN_MTU: usize = 128;

/// Session states (§4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Conn {
    Idle,
    HelloSent,
    Established,
}

/// Queue storage of an active session, released when it is quiescent.
#[derive(Debug)]
struct Queues<P> {
    /// Sent, not cumulatively acked; index i = sequence `una + i`.
    inflight: VecDeque<SentPkt>,
    /// Sequence numbers to retransmit.
    rtx: VecDeque<u32>,
    /// Control messages waiting for a sequence number.
    ctrl: VecDeque<Control>,
    /// Send operations to this peer.
    ops: SendOps,
    /// RMA operations to this peer, and responses owed to it (§8).
    rma: RmaOps,
    /// Out-of-order packets received.
    reorder: ReorderBuffer,
    /// Messages being received from this peer.
    incoming: Vec<Incoming<P>>,
    /// The congestion window of what we send (§12.2).
    cc: Congestion,
    /// Time-based loss detection of what we send (§5.3).
    rack: Rack,
    /// The entropy values our datagrams take (§4.6).
    paths: PathView,
}

impl<P> Default for Queues<P> {
    fn default() -> Self {
        Queues {
            inflight: VecDeque::new(),
            rtx: VecDeque::new(),
            ctrl: VecDeque::new(),
            ops: SendOps::default(),
            rma: RmaOps::default(),
            reorder: ReorderBuffer::default(),
            incoming: Vec::new(),
            cc: Congestion::default(),
            rack: Rack::default(),
            paths: PathView::default(),
        }
    }
}

impl<P> Queues<P> {
    fn quiescent(&self) -> bool {
        self.sends_nothing() && self.reorder.is_empty() && self.incoming.is_empty()
    }

    /// No packet, control message, send or RMA operation of ours is
    /// queued, in flight or unacknowledged.
    fn sends_nothing(&self) -> bool {
        self.inflight.is_empty()
            && self.rtx.is_empty()
            && self.ctrl.is_empty()
            && self.ops.is_empty()
            && self.rma.is_empty()
    }

    /// Whether sequenced packets wait to go out: retransmissions, or new
    /// packets (control, rendezvous data, messages) if `window` allows.
    fn has_output(&self, window: usize) -> bool {
        !self.rtx.is_empty() || (self.inflight.len() < window && self.has_new())
    }

    /// Whether new packets wait: control, responses, or messages and RMA
    /// operations — none of those while a fenced one waits (§8.6): it is
    /// the next in posting order, everything else queued follows it.
    fn has_new(&self) -> bool {
        !self.ctrl.is_empty()
            || self.rma.has_responses()
            || ((self.ops.has_data() || self.rma.has_data()) && self.fence_holds().is_none())
    }

    /// The message number of the fenced message or RMA operation next in
    /// posting order while an operation posted before it has not
    /// completed (FI_FENCE, §8.6).
    pub(super) fn fence_holds(&self) -> Option<u32> {
        if !self.rma.any_fenced() && !self.ops.any_fenced() {
            return None;
        }
        let f = match (self.rma.next_msg_id(), self.ops.next_msg_id()) {
            (Some(r), m) if m.is_none_or(|m| wire::seq_diff(r, m) < 0) => self.rma.fence_at(),
            _ => self.ops.fence_at(),
        }?;
        (self.rma.any_before(f) || self.ops.any_before(f)).then_some(f)
    }
}

/// The session with one peer.
#[derive(Debug)]
pub(crate) struct Session<P> {
    key: P,
    id: PeerId,
    listed: Listed,
    conn: Conn,
    send_hello: bool,
    send_hello_ack: bool,
    ack_now: bool,
    /// A DATA packet arrived marked CE: the next ack carries ECE (§12.3).
    ce_echo: bool,
    /// DEFER notices we sent that the peer has not acknowledged: while
    /// any is, our acks carry HOLD (§6.5).
    defers_unacked: u32,
    rnr_pending: bool,
    /// After a receiver-not-ready wait only the oldest packet is resent; the
    /// rest follow once it is acknowledged.
    rnr_probe: bool,
    local_sess: u32,
    remote_sess: u32,
    remote_inc: u32,
    /// Largest datagram the peer accepts (HELLO/HELLO_ACK word b, §2.3),
    /// at most our own `Config::mtu`: DATA to it is segmented to fit.
    peer_mtu: u32,
    /// The peer accepts PACK datagrams (its HELLO/HELLO_ACK said so, §6.8).
    peer_packs: bool,
    /// The UDP port where the peer takes bulk datagrams (its HELLO/HELLO_ACK
    /// said so, §2.5); 0: none.
    peer_bulk_port: u16,
    /// The peer finds sessions by their ids (its HELLO/HELLO_ACK said so,
    /// §4.6): our datagrams to it may leave from any source port.
    peer_any_port: bool,
    hello_retries: u32,
    /// The entropy value of the datagram emitted last (§4.6).
    tx_path: u16,
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
    /// The receive window the peer advertised.
    peer_window: u16,
    rtt: Rtt,
    /// Deadlines (§7): retransmission, loss by reordering (RACK), delayed
    /// ack, end of a receiver-not-ready wait, idle release.
    rto_at: Instant,
    lost_at: Instant,
    ack_at: Instant,
    rnr_until: Instant,
    idle_at: Instant,
    q: Option<Box<Queues<P>>>,
    /// Authenticated sessions: the keys of both directions (PROTOCOL.md §11.2).
    keys: Option<Box<SessionKeys>>,
    /// One past the handshake counter of the peer's last HELLO or HELLO_ACK
    /// accepted from incarnation `remote_inc` (0: none): an older one is a
    /// replay (§11.5). Kept when the session ends, as `remote_inc` is.
    peer_hello_next: u64,
    /// The cookie of the peer's CHALLENGE, echoed in our HELLO (§11.5).
    cookie: Cookie,
    /// Retransmission timeouts since the last datagram from the peer: an
    /// ICMP error is believed (with authentication) only after two (§11.7).
    silent_rtos: u8,
    /// When the first of those timeouts fired: the peer has been silent at
    /// least since then (meaningful while `silent_rtos > 0`).
    silent_since: Instant,
    /// The last epoch in which DATA came from the peer (§12.1).
    rx_epoch: u32,
    /// With authentication: a handshake of the peer's at this address
    /// verified, so it holds the job key. Kept when the session ends: its
    /// direct messages are taken still (§11.8).
    key_shown: bool,
}

impl<P: Copy> Session<P> {
    pub(crate) fn new(key: P, id: PeerId, cfg: &Config) -> Self {
        Session {
            key,
            id,
            listed: Listed::default(),
            conn: Conn::Idle,
            send_hello: false,
            send_hello_ack: false,
            ack_now: false,
            ce_echo: false,
            defers_unacked: 0,
            rnr_pending: false,
            rnr_probe: false,
            local_sess: 0,
            remote_sess: 0,
            remote_inc: 0,
            peer_mtu: cfg.mtu as u32,
            peer_packs: false,
            peer_bulk_port: 0,
            peer_any_port: false,
            hello_retries: 0,
            tx_path: 0,
            next_seq: 0,
            una: 0,
            next_msg_id: 0,
            expected: 0,
            rx_unacked: 0,
            peer_window: cfg.window,
            rtt: Rtt::new(cfg),
            rto_at: Instant::NEVER,
            lost_at: Instant::NEVER,
            ack_at: Instant::NEVER,
            rnr_until: Instant::NEVER,
            idle_at: Instant::NEVER,
            q: None,
            keys: None,
            peer_hello_next: 0,
            cookie: [0; 16],
            silent_rtos: 0,
            silent_since: Instant::NEVER,
            rx_epoch: 0,
            key_shown: false,
        }
    }

    /// The caller's key of this peer.
    pub(crate) fn key(&self) -> P {
        self.key
    }

    /// The entropy value of the datagram emitted last (§4.6).
    pub(crate) fn tx_path(&self) -> u16 {
        self.tx_path
    }

    pub(crate) fn is_idle(&self) -> bool {
        self.conn == Conn::Idle
    }

    /// The peer's bulk port (§2.5) while the session is established; 0: none.
    pub(crate) fn bulk_port(&self) -> u16 {
        if self.is_established() {
            self.peer_bulk_port
        } else {
            0
        }
    }

    pub(crate) fn takes_any_port(&self) -> bool {
        self.is_established() && self.peer_any_port
    }

    pub(crate) fn is_established(&self) -> bool {
        self.conn == Conn::Established
    }

    /// Whether the peer has shown in this session that it has the session
    /// open too: it acknowledged a packet of ours or sent us one in
    /// sequence. (A responder's HELLO_ACK could be lost; what it sends
    /// direct before the peer has it would be refused, §11.8.)
    pub(crate) fn peer_has_it_open(&self) -> bool {
        self.is_established() && (self.una != 0 || self.expected != 0)
    }

    /// With authentication: whether the peer at this address has shown us
    /// the job key (a verified handshake, now or in an earlier session).
    pub(crate) fn holds_the_key(&self) -> bool {
        self.key_shown
    }

    /// Established and, with `sess`, still the session whose remote id is `sess`.
    pub(crate) fn is_current(&self, sess: Option<u32>) -> bool {
        self.is_established() && sess.is_none_or(|s| s == self.remote_sess)
    }

    /// Send `c` on this session's stream (from the matcher).
    pub(crate) fn queue_control(&mut self, c: Control, schedule: &mut Schedule) {
        if matches!(c, Control::Defer { .. }) {
            self.defers_unacked += 1;
        }
        self.q().ctrl.push_back(c);
        self.mark_ready(schedule);
    }

    /// The rest of message `m` will come on this session.
    pub(crate) fn expect(&mut self, m: Incoming<P>) {
        self.q().incoming.push(m);
    }

    /// Send operations the application counts done — reported complete
    /// (inject complete) or injected — whose data this peer has not
    /// acknowledged ([`super::Engine::sends_owed_at_close`]).
    pub(crate) fn sends_owed(&self) -> usize {
        self.q.as_ref().map_or(0, |q| q.ops.owed_count())
    }

    /// Packets we may have in flight: our window, the peer's grant, and
    /// with congestion control the congestion window (§12).
    pub(super) fn send_window(&self, cfg: &Config) -> usize {
        let w = usize::from(cfg.window.min(self.peer_window));
        match self.q.as_ref() {
            Some(q) if cfg.congestion => w.min(q.cc.window()),
            _ => w,
        }
    }

    /// Whether nothing we send to this peer is queued, in flight or
    /// unacknowledged: no packet, control message, send or RMA operation
    /// (PROTOCOL.md §6.9: only then may a message overtake the session).
    pub(crate) fn sends_nothing(&self) -> bool {
        self.q.as_ref().is_none_or(|q| q.sends_nothing())
    }

    fn q(&mut self) -> &mut Queues<P> {
        self.q.get_or_insert_with(Box::default)
    }

    fn mark_ready(&mut self, schedule: &mut Schedule) {
        schedule.mark_ready(self.id, &mut self.listed);
    }

    fn arm_timers(&mut self, schedule: &mut Schedule) {
        let deadline = self.next_deadline();
        schedule.arm(self.id, &mut self.listed, deadline);
    }

    /// The earliest armed deadline, or `Instant::NEVER`.
    pub(crate) fn next_deadline(&self) -> Instant {
        self.rto_at
            .min(self.lost_at)
            .min(self.ack_at)
            .min(self.rnr_until)
            .min(self.idle_at)
    }

    /// Its place on the schedule's lists.
    pub(crate) fn listed(&mut self) -> &mut Listed {
        &mut self.listed
    }

    /// Fire the deadlines due at `now` (§7). Returns the error to fail the
    /// session with when the retry limit is passed.
    pub(crate) fn fire_timers(&mut self, now: Instant, sh: &mut Shared<P>) -> Option<OpError> {
        if self.ack_at <= now {
            self.ack_at = Instant::NEVER;
            self.ack_now = true;
            self.mark_ready(&mut sh.schedule);
        }
        if self.rnr_until <= now {
            self.end_rnr_wait(now, sh);
        }
        if self.lost_at <= now {
            self.on_lost_timer(now, sh);
        }
        if self.rto_at <= now
            && let Some(reason) = self.on_rto(now, sh)
        {
            return Some(reason);
        }
        if self.idle_at <= now {
            self.idle_at = Instant::NEVER;
            let idle = self.q.as_ref().is_none_or(|q| q.quiescent())
                && self.rnr_until == Instant::NEVER
                && self.rto_at == Instant::NEVER
                && self.lost_at == Instant::NEVER
                && !self.send_hello
                && !self.send_hello_ack
                && !self.ack_now
                && self.ack_at == Instant::NEVER;
            if idle {
                self.q = None;
            }
        }
        None
    }

    /// Tear the session down (`reason`): its send operations fail (those
    /// not reported yet) and what it held is dropped; it returns to Idle (a
    /// later send opens a new session). Returns the messages it was
    /// receiving, for the matcher to fail.
    pub(crate) fn fail(&mut self, reason: OpError, sh: &mut Shared<P>) -> Vec<Incoming<P>> {
        let mut incoming = Vec::new();
        if let Some(q) = self.q.take() {
            let q = *q;
            sh.sends -= q
                .ops
                .fail_all(reason, self.next_msg_id, &mut sh.events, &mut sh.injects);
            sh.sends -= q.rma.fail_all(reason, &mut sh.events, &mut sh.injects);
            let mut reorder = q.reorder;
            reorder.clear(&mut sh.reorder_bytes);
            incoming = q.incoming;
        }
        self.conn = Conn::Idle;
        sh.sessions.remove(self.local_sess);
        self.local_sess = 0;
        self.remote_sess = 0;
        self.send_hello = false;
        self.send_hello_ack = false;
        self.ack_now = false;
        self.rnr_pending = false;
        self.rnr_probe = false;
        self.next_seq = 0;
        self.una = 0;
        self.next_msg_id = 0;
        self.expected = 0;
        self.rx_unacked = 0;
        self.rtt = Rtt::new(&sh.cfg);
        self.rto_at = Instant::NEVER;
        self.lost_at = Instant::NEVER;
        self.ack_at = Instant::NEVER;
        self.rnr_until = Instant::NEVER;
        self.idle_at = Instant::NEVER;
        self.keys = None;
        self.cookie = [0; 16];
        self.silent_rtos = 0;
        self.defers_unacked = 0;
        self.ce_echo = false;
        incoming
    }

    /// The session's state for diagnostics (format unstable).
    pub(crate) fn describe(&self) -> String
    where
        P: core::fmt::Debug,
    {
        let ops = self.q.as_ref().map(|q| q.ops.first(4)).unwrap_or_default();
        let msgs = self.q.as_ref().map_or(0, |q| q.incoming.len());
        format!("{self:?}\n  first send ops: {ops:?}\n  messages being received: {msgs}")
    }
}

impl<P> Session<P> {
    /// Seal the datagram `buf[..body_len]` of this session: with its key
    /// when authenticated (the header carries AUTH), else with a CRC.
    pub(crate) fn seal(&mut self, buf: &mut [u8], body_len: usize) -> usize {
        match self.keys.as_mut() {
            Some(k) => k.seal(buf, body_len),
            None => crate::wire::seal(buf, body_len),
        }
    }

    /// Flag AUTH if this session's datagrams are authenticated.
    #[inline]
    pub(crate) fn auth_flag(&self) -> u16 {
        if self.keys.is_some() {
            crate::wire::flags::AUTH
        } else {
            0
        }
    }

    /// Verify an authenticated datagram addressed to this session (it
    /// passed [`Session::admits`]) and decrypt it in place: its body length.
    pub(crate) fn open_sealed(&mut self, buf: &mut [u8]) -> Result<usize, Reject> {
        let k = self.keys.as_mut().ok_or(Reject::Forged)?;
        let body = k.open(buf)?;
        self.silent_rtos = 0;
        Ok(body)
    }

    /// Whether an ICMP error about this peer is believed at `now`: always
    /// without authentication; with it, only once the peer has been silent
    /// for two retransmission timeouts and for `silence` since the first
    /// (an ICMP message cannot be authenticated, §11.7).
    pub(crate) fn believes_icmp(&self, authenticated: bool, now: Instant, silence: Nanos) -> bool {
        !authenticated || (self.silent_rtos >= 2 && now.since(self.silent_since) >= silence)
    }
}

/// A session seen through the seam while it hands a message up: what the
/// matcher answers concerns only this peer.
pub(crate) struct OwnSession<'a, P> {
    session: &'a mut Session<P>,
    schedule: &'a mut Schedule,
}

impl<'a, P> OwnSession<'a, P> {
    /// `session` as the seam sees it, and the event queue, out of `sh`.
    fn split(session: &'a mut Session<P>, sh: &'a mut Shared<P>) -> (Self, &'a mut Events<P>) {
        let Shared {
            events, schedule, ..
        } = sh;
        (OwnSession { session, schedule }, events)
    }
}

impl<P: Copy> Sessions<P> for OwnSession<'_, P> {
    fn is_current(&self, peer: PeerId, sess: Option<u32>) -> bool {
        debug_assert_eq!(peer, self.session.id);
        self.session.is_current(sess)
    }

    fn send_control(&mut self, peer: PeerId, c: Control) {
        debug_assert_eq!(peer, self.session.id);
        self.session.queue_control(c, self.schedule);
    }

    fn expect(&mut self, peer: PeerId, m: Incoming<P>) {
        debug_assert_eq!(peer, self.session.id);
        self.session.expect(m);
    }
}

/// Bytes of an idle session with key `P` (the record, without its table slot).
pub(crate) const fn idle_bytes<P>() -> usize {
    core::mem::size_of::<Session<P>>()
}

/// Bytes of the queue block an active session adds (heap, plus the deques'
/// own buffers).
pub(crate) const fn active_block_bytes<P>() -> usize {
    core::mem::size_of::<Queues<P>>()
}
