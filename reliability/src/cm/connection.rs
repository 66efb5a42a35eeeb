//! One connected endpoint's side of a connection (PROTOCOL.md §9.2–8.4):
//! connecting or accepting, connected, disconnected. Sans-IO like the
//! engine: messages go in with [`Connection::handle`], datagrams come out
//! of [`Connection::poll_transmit`], timers through
//! [`Connection::poll_timeout`] / [`Connection::handle_timeout`], and what
//! the application must hear about (fi_cm(3) events) from
//! [`Connection::poll_event`].
//!
//! The data of a connection travels in an engine session between the two
//! endpoints' addresses; this machine only decides who that peer is and
//! when the connection begins and ends. `A` is the caller's address type
//! (the provider's socket address).

use std::collections::VecDeque;

use super::wire::{self, CM_DATA_SIZE, CmMsg, CmType, MAX_CM_LEN};
use crate::time::{Instant, Nanos};

/// Retransmission times of CM messages.
#[derive(Clone, Copy, Debug)]
pub struct CmTiming {
    /// First retransmission timeout (doubles up to `rto_max`).
    pub rto_initial: Nanos,
    pub rto_max: Nanos,
    /// How long a CONN_REQ or an ACCEPT is repeated without an answer
    /// before the attempt fails (FI_ETIMEDOUT).
    pub give_up: Nanos,
}

impl Default for CmTiming {
    fn default() -> Self {
        CmTiming {
            rto_initial: Nanos::from_millis(20),
            rto_max: Nanos::from_secs(1),
            give_up: Nanos::from_secs(30),
        }
    }
}

/// DISCONNECT is repeated at most this many times without its ack: the
/// peer may be gone, and the connection is over for us either way.
const DISCONNECT_TRIES: u32 = 8;

/// The other endpoint of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peer<A> {
    pub addr: A,
    pub incarnation: u32,
    /// Link-layer address it stated (all zero: not stated).
    pub link: [u8; 6],
}

/// Why a connection attempt failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The listener refused (fi_reject; its data), or nobody listens at
    /// the address (an ICMP port unreachable; no data): FI_ECONNREFUSED.
    Refused(Vec<u8>),
    /// No answer within [`CmTiming::give_up`]: FI_ETIMEDOUT.
    TimedOut,
}

/// What the application hears about (fi_cm(3), fi_eq(3)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CmEvent<A> {
    /// FI_CONNECTED, with the accepting side's data on the connecting side.
    Connected { peer: Peer<A>, param: Vec<u8> },
    /// The attempt failed (an error entry on the EQ).
    Failed(Failure),
    /// FI_SHUTDOWN: the connection is over (either side disconnected, or the
    /// peer was lost). Reported once per connection.
    Shutdown,
}

/// Where a connection stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Neither connect nor accept yet.
    Idle,
    /// CONN_REQ sent, waiting for ACCEPT or REJECT.
    Connecting,
    /// ACCEPT sent, waiting for CONFIRM (or the peer's data).
    Accepting,
    Connected,
    /// Over: disconnected, refused or failed. fi_connect may be called only
    /// once in an endpoint's lifetime (fi_cm(3)), so there is no way back.
    Closed,
}

/// Misuse of the calls (the provider maps it to -FI_EINVAL / -FI_EOPBADSTATE).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmError {
    /// Connection data longer than [`CM_DATA_SIZE`].
    TooLarge,
    /// Not possible in this phase (a second connect, accept after connect…).
    State,
}

/// A message queued for transmission.
#[derive(Clone, Debug)]
struct Out<A> {
    to: A,
    ty: CmType,
    dst_id: u32,
    param: Vec<u8>,
}

#[derive(Debug)]
pub struct Connection<A> {
    id: u32,
    incarnation: u32,
    link: [u8; 6],
    timing: CmTiming,
    phase: Phase,
    /// Connecting: the listener's address.
    listener: Option<A>,
    peer: Option<Peer<A>>,
    remote_id: u32,
    /// Our CONN_REQ / ACCEPT data, kept for retransmission.
    param: Vec<u8>,
    rto: Nanos,
    retx_at: Instant,
    give_up_at: Instant,
    disconnect_tries: u32,
    shutdown_reported: bool,
    outbox: VecDeque<Out<A>>,
    events: VecDeque<CmEvent<A>>,
}

impl<A: Copy + Eq> Connection<A> {
    /// `id`: this side's random non-zero connection id; `incarnation` and
    /// `link`: what our messages state about us.
    pub fn new(id: u32, incarnation: u32, link: [u8; 6], timing: CmTiming) -> Self {
        Connection {
            id: id.max(1),
            incarnation,
            link,
            timing,
            phase: Phase::Idle,
            listener: None,
            peer: None,
            remote_id: 0,
            param: Vec::new(),
            rto: timing.rto_initial,
            retx_at: Instant::NEVER,
            give_up_at: Instant::NEVER,
            disconnect_tries: 0,
            shutdown_reported: false,
            outbox: VecDeque::new(),
            events: VecDeque::new(),
        }
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The connected (or accepting) peer.
    pub fn peer(&self) -> Option<Peer<A>> {
        self.peer
    }

    /// Whether engine datagrams from `from` belong to this connection: only
    /// the peer's, once it is known (before, nobody's).
    #[inline]
    pub fn admits(&self, from: A) -> bool {
        self.peer.is_some_and(|p| p.addr == from)
            && matches!(self.phase, Phase::Accepting | Phase::Connected)
    }

    /// fi_connect: send CONN_REQ to `listener` and keep sending it until
    /// it is answered or [`CmTiming::give_up`] passes.
    pub fn connect(&mut self, now: Instant, listener: A, param: &[u8]) -> Result<(), CmError> {
        if param.len() > CM_DATA_SIZE {
            return Err(CmError::TooLarge);
        }
        if self.phase != Phase::Idle {
            return Err(CmError::State);
        }
        self.phase = Phase::Connecting;
        self.listener = Some(listener);
        self.param = param.to_vec();
        self.arm(now);
        self.queue(listener, CmType::ConnReq, 0, true);
        Ok(())
    }

    /// fi_accept of the request `remote_id` from `peer`: send ACCEPT from
    /// our own address until the peer confirms (or sends data).
    pub fn accept(
        &mut self,
        now: Instant,
        peer: Peer<A>,
        remote_id: u32,
        param: &[u8],
    ) -> Result<(), CmError> {
        if param.len() > CM_DATA_SIZE {
            return Err(CmError::TooLarge);
        }
        if self.phase != Phase::Idle {
            return Err(CmError::State);
        }
        self.phase = Phase::Accepting;
        self.peer = Some(peer);
        self.remote_id = remote_id;
        self.param = param.to_vec();
        self.arm(now);
        self.queue(peer.addr, CmType::Accept, remote_id, true);
        Ok(())
    }

    /// fi_shutdown: the connection ends now. A connected (or accepting)
    /// peer is told with DISCONNECT, repeated until acknowledged; the local
    /// FI_SHUTDOWN is reported as for a disconnect by the peer (what the
    /// tcp and verbs providers do). Returns whether a connection ended.
    pub fn shutdown(&mut self, now: Instant) -> bool {
        match self.phase {
            Phase::Connected | Phase::Accepting => {
                self.phase = Phase::Closed;
                self.disconnect_tries = 1;
                self.rto = self.timing.rto_initial;
                self.retx_at = now + self.rto;
                self.give_up_at = Instant::NEVER;
                self.send_disconnect();
                self.report_shutdown();
                true
            }
            Phase::Connecting | Phase::Idle => {
                self.phase = Phase::Closed;
                self.retx_at = Instant::NEVER;
                false
            }
            Phase::Closed => false,
        }
    }

    /// The endpoint is closing: a still connected peer gets DISCONNECT
    /// twice (nothing can be repeated after this), like the engine's CLOSE.
    pub fn close(&mut self, now: Instant) {
        let pending = self.phase == Phase::Closed && self.disconnect_tries > 0;
        if self.shutdown(now) || pending {
            self.send_disconnect();
        }
        self.retx_at = Instant::NEVER;
    }

    /// The engine lost the peer's session (unreachable, restarted, closed):
    /// the connection is over.
    pub fn peer_lost(&mut self) {
        if matches!(self.phase, Phase::Connected | Phase::Accepting) {
            self.phase = Phase::Closed;
            self.retx_at = Instant::NEVER;
            self.report_shutdown();
        }
    }

    /// The network refused our datagrams to `to` (ICMP port unreachable):
    /// while connecting to it, nobody listens there.
    pub fn refused(&mut self, to: A) {
        if self.phase == Phase::Connecting && self.listener == Some(to) {
            self.fail(Failure::Refused(Vec::new()));
        }
    }

    /// Engine traffic from `from` arrived: while accepting, the peer's data
    /// proves it has our ACCEPT even if its CONFIRM was lost.
    pub fn peer_traffic(&mut self, from: A) {
        if self.phase == Phase::Accepting && self.admits(from) {
            self.established(Vec::new());
        }
    }

    /// A CM message from `from` (§9.3).
    pub fn handle(&mut self, from: A, m: &CmMsg<'_>) {
        if m.dst_id != self.id {
            return;
        }
        let from_peer = self
            .peer
            .is_some_and(|p| p.addr == from && m.src_id == self.remote_id);
        match (m.ty, self.phase) {
            (CmType::Accept, Phase::Connecting) if m.src_id != 0 => {
                self.peer = Some(Peer {
                    addr: from,
                    incarnation: m.incarnation,
                    link: m.link,
                });
                self.remote_id = m.src_id;
                self.queue(from, CmType::Confirm, m.src_id, false);
                self.established(m.param.to_vec());
            }
            // Our CONFIRM was lost: the peer repeats its ACCEPT.
            (CmType::Accept, Phase::Connected) if from_peer => {
                self.queue(from, CmType::Confirm, m.src_id, false);
            }
            (CmType::Reject, Phase::Connecting) if self.listener == Some(from) => {
                self.fail(Failure::Refused(m.param.to_vec()));
            }
            (CmType::Confirm, Phase::Accepting) if from_peer => self.established(Vec::new()),
            (CmType::Disconnect, _) if from_peer => {
                self.queue(from, CmType::DisconnectAck, m.src_id, false);
                // The peer had our ACCEPT (its CONFIRM was lost): the
                // connection was set up before it ended.
                if self.phase == Phase::Accepting {
                    self.established(Vec::new());
                }
                self.peer_lost();
            }
            (CmType::DisconnectAck, Phase::Closed) if from_peer => {
                self.disconnect_tries = 0;
                self.retx_at = Instant::NEVER;
            }
            _ => {}
        }
    }

    /// When [`Connection::handle_timeout`] has work next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        (self.retx_at != Instant::NEVER).then_some(self.retx_at)
    }

    /// Repeat what is unanswered, or give up on it.
    pub fn handle_timeout(&mut self, now: Instant) {
        if now < self.retx_at {
            return;
        }
        match self.phase {
            Phase::Connecting | Phase::Accepting if now >= self.give_up_at => {
                if self.phase == Phase::Accepting {
                    self.phase = Phase::Closed;
                    self.retx_at = Instant::NEVER;
                    self.events.push_back(CmEvent::Failed(Failure::TimedOut));
                } else {
                    self.fail(Failure::TimedOut);
                }
            }
            Phase::Connecting => {
                if let Some(l) = self.listener {
                    self.queue(l, CmType::ConnReq, 0, true);
                }
                self.back_off(now);
            }
            Phase::Accepting => {
                if let Some(p) = self.peer {
                    self.queue(p.addr, CmType::Accept, self.remote_id, true);
                }
                self.back_off(now);
            }
            Phase::Closed
                if self.disconnect_tries > 0 && self.disconnect_tries < DISCONNECT_TRIES =>
            {
                self.disconnect_tries += 1;
                self.send_disconnect();
                self.back_off(now);
            }
            _ => self.retx_at = Instant::NEVER,
        }
    }

    /// Whether a CM datagram waits to be sent.
    pub fn wants_transmit(&self) -> bool {
        !self.outbox.is_empty()
    }

    /// Encode the next CM datagram into `buf` (at least [`MAX_CM_LEN`]
    /// bytes, else nothing); returns its destination and length.
    pub fn poll_transmit(&mut self, buf: &mut [u8]) -> Option<(A, usize)> {
        if buf.len() < MAX_CM_LEN {
            return None;
        }
        let o = self.outbox.pop_front()?;
        let n = wire::encode(
            buf,
            &CmMsg {
                ty: o.ty,
                src_id: self.id,
                dst_id: o.dst_id,
                incarnation: self.incarnation,
                link: self.link,
                param: &o.param,
            },
        );
        Some((o.to, n))
    }

    pub fn poll_event(&mut self) -> Option<CmEvent<A>> {
        self.events.pop_front()
    }

    fn arm(&mut self, now: Instant) {
        self.rto = self.timing.rto_initial;
        self.retx_at = now + self.rto;
        self.give_up_at = now + self.timing.give_up;
    }

    fn back_off(&mut self, now: Instant) {
        self.rto = Nanos((self.rto.0 * 2).min(self.timing.rto_max.0));
        self.retx_at = now + self.rto;
    }

    fn queue(&mut self, to: A, ty: CmType, dst_id: u32, with_param: bool) {
        // One of each kind waiting is enough: a repeat replaces nothing new.
        if self.outbox.iter().any(|o| o.ty == ty && o.to == to) {
            return;
        }
        let param = if with_param {
            self.param.clone()
        } else {
            Vec::new()
        };
        self.outbox.push_back(Out {
            to,
            ty,
            dst_id,
            param,
        });
    }

    fn send_disconnect(&mut self) {
        if let Some(p) = self.peer {
            self.outbox.push_back(Out {
                to: p.addr,
                ty: CmType::Disconnect,
                dst_id: self.remote_id,
                param: Vec::new(),
            });
        }
    }

    fn established(&mut self, param: Vec<u8>) {
        let Some(peer) = self.peer else { return };
        self.phase = Phase::Connected;
        self.retx_at = Instant::NEVER;
        self.give_up_at = Instant::NEVER;
        self.param = Vec::new();
        self.events.push_back(CmEvent::Connected { peer, param });
    }

    fn fail(&mut self, why: Failure) {
        self.phase = Phase::Closed;
        self.retx_at = Instant::NEVER;
        self.give_up_at = Instant::NEVER;
        self.events.push_back(CmEvent::Failed(why));
    }

    fn report_shutdown(&mut self) {
        if !self.shutdown_reported {
            self.shutdown_reported = true;
            self.events.push_back(CmEvent::Shutdown);
        }
    }
}
