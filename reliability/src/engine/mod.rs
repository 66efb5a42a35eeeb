//! The engine: a thin router between the caller and two kinds of room.
//!
//! - [`session`]: one [`Session`] per peer (PROTOCOL.md §4–5): handshake,
//!   sequence numbers and acks, SACK, RTO, window and receiver-not-ready,
//!   reordering, and the send operations queued to that peer with their
//!   segmentation and completions.
//! - [`matcher`]: one [`Matcher`] for the engine (§6): posted and
//!   unexpected queues, peek/claim/discard, multi-recv, and the receive side
//!   of rendezvous and delivery-complete.
//!
//! They meet at the seam ([`seam`]): in-order messages go up from a session
//! to the matcher; control (CTS, DONE) and the messages still to arrive go
//! down. The router decodes datagrams, finds the peer ([`peers`]), passes
//! each input to the room it belongs to, and serves the outputs: datagrams
//! from the ready sessions and one-shot packets ([`oneshot`]), deadlines
//! ([`schedule`]) and events ([`events`]).

mod auth;
mod direct;
mod events;
mod inject;
mod matcher;
mod oneshot;
mod peers;
mod pull;
mod rma;
mod schedule;
mod seam;
mod session;
mod sessions_index;
mod shared;
#[cfg(test)]
mod tests;

use std::hash::Hash;

pub use direct::{DirectMessage, DirectRefused};

use crate::api::*;
use crate::time::Instant;
use crate::wire::{self, Packet, PacketType, flags as wf};
use auth::{HelloId, Reject};
use events::Events;
use matcher::Matcher;
use oneshot::Oneshots;
use peers::{PeerId, PeerTable};
use schedule::Schedule;
use seam::{Control, Incoming, Sessions};
use session::{Admission, HelloVerdict, MIN_MTU, Session};
use shared::Shared;

/// The sans-IO reliability engine. `P` is the caller's peer key.
#[derive(Debug)]
pub struct Engine<P> {
    peers: PeerTable<P, Session<P>>,
    matcher: Matcher<P>,
    oneshots: Oneshots<P>,
    shared: Shared<P>,
}

impl<P: Copy + Eq + Hash> Engine<P> {
    /// A new engine. `cfg.mtu` is raised to at least 128 and `cfg.window`
    /// clamped to 1..=4096.
    pub fn new(mut cfg: Config) -> Self {
        cfg.mtu = cfg.mtu.clamp(MIN_MTU, 65535);
        cfg.window = cfg.window.clamp(1, 4096);
        cfg.inject_size = cfg.inject_size.min(cfg.eager_limit);
        Engine {
            peers: PeerTable::new(),
            matcher: Matcher::new(&cfg),
            oneshots: Oneshots::default(),
            shared: Shared::new(cfg),
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.shared.cfg
    }

    /// Counters and gauges.
    pub fn stats(&self) -> Stats {
        let mut s = self.shared.stats;
        let (unexpected, unexpected_max) = self.matcher.unexpected_bytes();
        s.unexpected_bytes = unexpected as u64;
        s.unexpected_bytes_max = unexpected_max as u64;
        s.reorder_bytes = self.shared.reorder_bytes as u64;
        s.deferred = self.matcher.deferred();
        let pulls = self.matcher.pull_counts();
        s.pulls = pulls.pulls;
        s.pull_fallbacks = pulls.fallbacks;
        s
    }

    /// Number of peers with state.
    pub fn peer_count(&self) -> usize {
        self.peers.len()
    }

    /// Send operations posted and not yet completed.
    pub fn sends_outstanding(&self) -> usize {
        self.shared.sends
    }

    /// Sends the application counts done whose data the peer has not
    /// acknowledged yet — reported complete (inject complete), or injected
    /// (fi_inject: no completion at all) and maybe not even sent, queued
    /// behind the windows. The engine alone holds them, so closing now
    /// would lose them: an endpoint closing keeps its protocol running
    /// until this is 0 (for a bounded time).
    pub fn sends_owed_at_close(&self) -> usize {
        self.peers.iter().map(Session::sends_owed).sum()
    }

    /// Packets sent to `peer` and not yet acknowledged, if its session is
    /// established and it accepts PACK datagrams (PROTOCOL.md §6.8) from
    /// us: a caller that posts small sends while some are already on their
    /// way may leave them for its next transmit pass, which packs them.
    pub fn packing_in_flight(&mut self, peer: P) -> Option<usize> {
        let id = self.peers.lookup(peer)?;
        self.peers[id].packing_in_flight(&self.shared.cfg)
    }

    /// Receive operations posted and not yet completed.
    pub fn recvs_posted(&self) -> usize {
        self.matcher.recvs_posted()
    }

    /// Unexpected messages queued (not yet matched).
    pub fn unexpected_count(&self) -> usize {
        self.matcher.unexpected_count()
    }

    /// Internal state of the session with `peer`, for diagnostics (format unstable).
    pub fn debug_peer(&self, peer: P) -> Option<String>
    where
        P: core::fmt::Debug,
    {
        Some(self.peers[self.peers.get(peer)?].describe())
    }

    /// The UDP port where `peer` takes bulk datagrams, as its handshake
    /// stated (PROTOCOL.md §2.5); `None` when it stated none or no session is
    /// established.
    pub fn peer_bulk_port(&self, peer: P) -> Option<u16> {
        let port = self.peers[self.peers.get(peer)?].bulk_port();
        (port != 0).then_some(port)
    }

    /// The peer whose session has local id `local_sess` (HELLO_SENT or
    /// established), or `None`: what a datagram's `dst_sess` names
    /// (PROTOCOL.md §4.6). A caller that receives datagrams whose UDP
    /// source port is not the sender's address (path entropy) finds their
    /// peer with this; it must still check that the datagram came from
    /// that peer's IP address.
    #[inline]
    pub fn peer_of_session(&self, local_sess: u32) -> Option<P> {
        let id = self.shared.sessions.get(local_sess)?;
        Some(self.peers[id].key())
    }

    /// Whether the session with `peer` is established and the peer said in
    /// its handshake that it finds sessions by their ids (feature ANY_PORT,
    /// PROTOCOL.md §4.6): then the session's datagrams other than
    /// handshakes may leave from any UDP source port.
    pub fn peer_takes_any_port(&self, peer: P) -> bool {
        self.peers
            .get(peer)
            .is_some_and(|id| self.peers[id].takes_any_port())
    }

    /// Largest payload of one DATA packet with the configured MTU.
    pub fn max_payload(&self) -> usize {
        self.shared.cfg.mtu - self.shared.data_overhead
    }

    /// Whether datagrams are authenticated (PROTOCOL.md §11).
    pub fn authenticated(&self) -> bool {
        self.shared.auth.is_some()
    }

    /// `peer`'s incarnation is `incarnation` (its native address carries
    /// it): with authentication our HELLO is bound to it, so the peer can
    /// accept it without a CHALLENGE round trip (PROTOCOL.md §11.5). Without
    /// this, the first HELLO to a peer draws a CHALLENGE. Ignored while a
    /// session with `peer` is open, and for incarnation 0 (unknown).
    pub fn peer_incarnation(&mut self, peer: P, incarnation: u32) -> Result<(), PostError> {
        let id = self.peer_for(peer)?;
        self.peers[id].set_peer_incarnation(incarnation);
        Ok(())
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
        let cfg = &self.shared.cfg;
        if len > MAX_MSG_SIZE {
            return Err(PostError::TooLarge);
        }
        if let Some(b) = inject {
            if b.len() > cfg.inject_size {
                return Err(PostError::TooLarge);
            }
            if self.shared.injects.bytes() + b.len() > cfg.inject_budget {
                return Err(PostError::QueueFull);
            }
        }
        if self.shared.sends >= cfg.tx_queue_len {
            return Err(PostError::QueueFull);
        }
        let peer = self.peer_for(op.dst)?;
        self.peers[peer].post_send(now, &op, len, inject, &mut self.shared);
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
        let (matcher, events, mut down) = self.matcher();
        matcher.post_recv(op, events, &mut down, bufs)
    }

    /// Cancel a posted receive (fi_cancel). Returns false when no posted receive
    /// has this token (already matched or completed). The cancelled receive
    /// completes with [`OpError::Canceled`]; a multi-recv buffer with messages
    /// still arriving into it is released when they complete.
    pub fn cancel_recv(&mut self, token: u64) -> bool {
        self.matcher.cancel_recv(token, &mut self.shared.events)
    }

    /// FI_PEEK (with FI_CLAIM or FI_DISCARD) against the unexpected queue. The
    /// result is an event for `token`: a completion with flags PEEK (|CLAIM or
    /// |DISCARD) describing the message (len, tag, data, source), or an error
    /// completion [`OpError::NoMessage`] (FI_ENOMSG).
    pub fn peek(&mut self, token: u64, src: Option<P>, tag: Option<TagMatch>, mode: PeekMode) {
        let (matcher, events, mut down) = self.matcher();
        matcher.peek(token, src, tag, mode, events, &mut down);
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
        let (matcher, events, mut down) = self.matcher();
        matcher.claim(op, key, discard, events, &mut down, bufs)
    }

    /// Whether [`Engine::poll_transmit`] may have a datagram to produce: a
    /// control packet is queued or a peer has something ready. When false it
    /// would return `None`, so callers can skip preparing a buffer.
    pub fn wants_transmit(&self) -> bool {
        !self.oneshots.is_empty() || self.shared.schedule.any_ready()
    }

    /// Next event, if any.
    pub fn poll_event(&mut self) -> Option<Event<P>> {
        self.shared.events.pop()
    }

    /// The endpoint is closing (`fi_close`): queue a CLOSE notice, carrying
    /// our final acknowledgement, for every peer with a session, and end those
    /// sessions (PROTOCOL.md §4.5). The peer completes what we acknowledged
    /// and fails the rest at once instead of retransmitting until its retry
    /// limit. Outstanding operations are discarded without completions, as
    /// `fi_endpoint(3)` says of `fi_close`. Drain `poll_transmit` afterwards to
    /// send the notices; the engine is not meant to be used after that.
    pub fn close(&mut self) {
        for peer in self.peers.ids() {
            let session = &mut self.peers[peer];
            if !session.is_established() {
                continue;
            }
            let cfg = &self.shared.cfg;
            let hdr = session.acking_header(PacketType::Close, self.shared.grant());
            let ctrl = wire::CtrlExt {
                a: cfg.incarnation,
                b: 0,
            };
            // Each copy sealed on its own (its own nonce counter).
            self.oneshots.close(session.key(), |b| {
                let n = wire::ctrl_body(b, &hdr, &ctrl);
                session.seal(b, n)
            });
            self.fail_peer(peer, OpError::Canceled);
        }
        self.shared.events.clear();
    }

    /// The network reports nobody listening at `peer` (an ICMP port
    /// unreachable for a datagram we sent it): its process is gone. Fail
    /// what depends on it now rather than at the retry limit (PROTOCOL.md
    /// §5.3). Ignored for a peer we have no session or handshake with.
    ///
    /// With authentication it is believed only once the peer has been
    /// silent for two retransmission timeouts and `Config::icmp_silence`:
    /// an ICMP message cannot be authenticated, and a forged one must not
    /// end a session whose peer still answers (PROTOCOL.md §11.7); one
    /// not believed is counted (`Stats::unauthenticated`).
    ///
    /// Returns whether it ended the session (at most once per session: a
    /// flood of such messages is no flood of failures or log lines).
    pub fn peer_unreachable(&mut self, now: Instant, peer: P) -> bool {
        let Some(id) = self.peers.lookup(peer) else {
            return false;
        };
        let session = &self.peers[id];
        if session.is_idle() {
            return false;
        }
        let silence = self.shared.cfg.icmp_silence;
        if session.believes_icmp(self.shared.auth.is_some(), now, silence) {
            self.fail_peer(id, OpError::PeerUnreachable);
            true
        } else {
            self.shared.stats.unauthenticated += 1;
            false
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
        if self.shared.auth.is_some() {
            return self.handle_sealed(now, from, &[datagram], false, bufs);
        }
        self.handle_decoded(now, from, wire::decode(datagram), false, bufs);
    }

    /// [`Engine::handle_datagram_pieces`] for a datagram whose IP header
    /// carried the ECN codepoint CE (`ce`, RFC 3168): a router or switch
    /// on the way was congested (PROTOCOL.md §12.3).
    pub fn handle_datagram_marked(
        &mut self,
        now: Instant,
        from: P,
        pieces: &[&[u8]],
        ce: bool,
        bufs: &mut impl RecvBuffers,
    ) {
        if self.shared.auth.is_some() {
            return self.handle_sealed(now, from, pieces, ce, bufs);
        }
        let decoded = match pieces {
            [one] => wire::decode(one),
            _ => wire::decode_pieces(pieces),
        };
        self.handle_decoded(now, from, decoded, ce, bufs);
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
        if self.shared.auth.is_some() {
            return self.handle_sealed(now, from, pieces, false, bufs);
        }
        self.handle_decoded(now, from, wire::decode_pieces(pieces), false, bufs);
    }

    fn handle_decoded(
        &mut self,
        now: Instant,
        from: P,
        decoded: Result<Packet<'_>, wire::WireError>,
        ce: bool,
        bufs: &mut impl RecvBuffers,
    ) {
        self.shared.stats.rx_datagrams += 1;
        let pkt = match decoded {
            Ok(pkt) => pkt,
            Err(wire::WireError::Auth) => {
                // Sealed with a key; we have none.
                self.shared.stats.unauthenticated += 1;
                return;
            }
            Err(_) => {
                self.shared.stats.corrupt += 1;
                return;
            }
        };
        match pkt.ty {
            PacketType::Hello => self.on_hello(now, from, &pkt, None),
            PacketType::HelloAck => self.on_hello_ack(from, &pkt, None),
            PacketType::Reset => self.on_reset(from, &pkt),
            PacketType::Challenge => self.shared.stats.dropped += 1,
            _ => self.on_session_packet(now, from, &pkt, ce, bufs),
        }
    }

    /// An authenticated engine's input (PROTOCOL.md §11.6): the datagram is
    /// gathered into one buffer, its tag verified and payload decrypted in
    /// place, and only then does it reach the handlers; anything that does
    /// not verify, or was seen before, is counted and dropped untouched.
    fn handle_sealed(
        &mut self,
        now: Instant,
        from: P,
        pieces: &[&[u8]],
        ce: bool,
        bufs: &mut impl RecvBuffers,
    ) {
        self.shared.stats.rx_datagrams += 1;
        let Some(auth) = self.shared.auth.as_mut() else {
            return;
        };
        let mut buf = std::mem::take(&mut auth.scratch);
        buf.clear();
        for p in pieces {
            buf.extend_from_slice(p);
        }
        self.handle_sealed_in(now, from, &mut buf, ce, bufs);
        if let Some(auth) = self.shared.auth.as_mut() {
            auth.scratch = buf;
        }
    }

    fn handle_sealed_in(
        &mut self,
        now: Instant,
        from: P,
        buf: &mut [u8],
        ce: bool,
        bufs: &mut impl RecvBuffers,
    ) {
        let stats = &mut self.shared.stats;
        if buf.len() < wire::COMMON_LEN || buf[0] != wire::VERSION {
            stats.corrupt += 1;
            return;
        }
        if u16::from_le_bytes([buf[2], buf[3]]) & wf::AUTH == 0 {
            stats.unauthenticated += 1;
            return;
        }
        let Some(ty) = PacketType::from_u8(buf[1]) else {
            stats.corrupt += 1;
            return;
        };
        if ty.is_handshake() {
            let Some(auth) = self.shared.auth.as_ref() else {
                return;
            };
            let Ok((body, counter)) = auth.open_handshake(buf) else {
                self.shared.stats.auth_rejected += 1;
                return;
            };
            let Ok(pkt) = wire::decode_authenticated(&buf[..body]) else {
                self.shared.stats.corrupt += 1;
                return;
            };
            match ty {
                PacketType::Hello => self.on_hello(now, from, &pkt, Some(counter)),
                PacketType::HelloAck => self.on_hello_ack(from, &pkt, Some(counter)),
                PacketType::Reset => self.on_reset(from, &pkt),
                _ => self.on_challenge(from, &pkt),
            }
            return;
        }
        // A session packet: its session's key verifies it. The ids it
        // names are read before verification only to find that session.
        let rd = |o: usize| u32::from_le_bytes([buf[o], buf[o + 1], buf[o + 2], buf[o + 3]]);
        let hdr = wire::Header {
            ty: buf[1],
            src_sess: rd(4),
            dst_sess: rd(8),
            ..Default::default()
        };
        let admission = self
            .peers
            .lookup(from)
            .map(|p| (p, self.peers[p].admits(&hdr)));
        let peer = match admission {
            Some((peer, Admission::Accept)) => peer,
            Some((_, Admission::Drop)) => {
                self.shared.stats.dropped += 1;
                return;
            }
            Some((peer, Admission::DropAndReset)) => {
                self.reset_unknown(from, ty, &hdr, self.peers[peer].known_incarnation());
                return;
            }
            None => {
                self.reset_unknown(from, ty, &hdr, 0);
                return;
            }
        };
        let body = match self.peers[peer].open_sealed(buf) {
            Ok(body) => body,
            Err(Reject::Forged) => {
                self.shared.stats.auth_rejected += 1;
                return;
            }
            Err(Reject::Replayed) => {
                self.shared.stats.replayed += 1;
                return;
            }
        };
        match wire::decode_authenticated(&buf[..body]) {
            Ok(pkt) => self.on_session_packet(now, from, &pkt, ce, bufs),
            Err(_) => self.shared.stats.corrupt += 1,
        }
    }

    /// Fire due timers: retransmission timeouts, losses found by time
    /// (RACK), delayed acks, the end of receiver-not-ready waits, idle release.
    pub fn handle_timeout(&mut self, now: Instant) {
        let mut i = 0;
        while let Some(peer) = self.shared.schedule.timer(i) {
            if self.peers[peer].next_deadline() <= now
                && let Some(reason) = self.peers[peer].fire_timers(now, &mut self.shared)
            {
                self.fail_peer(peer, reason);
            }
            let session = &mut self.peers[peer];
            if session.next_deadline() == Instant::NEVER {
                self.shared.schedule.disarm(i, session.listed());
            } else {
                i += 1;
            }
        }
    }

    /// The earliest time `handle_timeout` has work, if any.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let t = self
            .shared
            .schedule
            .timers()
            .map(|peer| self.peers[peer].next_deadline())
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
        let mtu = self.shared.cfg.mtu;
        if buf.len() < mtu {
            return None;
        }
        let buf = &mut buf[..mtu];
        if let Some(t) = self.oneshots.transmit(buf, &mut self.shared.stats) {
            return Some(t);
        }
        while let Some(peer) = self.shared.schedule.first_ready() {
            let session = &mut self.peers[peer];
            if let Some(len) = session.emit(now, buf, bufs, &mut self.shared) {
                if !session.may_emit(now, &self.shared.cfg) {
                    // That was its last for now: off the list, so that
                    // wants_transmit is false and the caller kicks at once.
                    self.shared.schedule.unready_first(session.listed());
                } else {
                    self.shared.schedule.rotate_ready();
                }
                self.shared.stats.tx_datagrams += 1;
                return Some(Transmit {
                    dst: session.key(),
                    len,
                    path: session.tx_path(),
                });
            }
            self.shared.schedule.unready_first(session.listed());
        }
        None
    }

    // ------------------------------------------------------------------
    // Routing
    // ------------------------------------------------------------------

    /// The matcher, with what it needs when the application calls it: the
    /// event queue, and the sessions through the seam.
    fn matcher(&mut self) -> (&mut Matcher<P>, &mut Events<P>, Downlink<'_, P>) {
        let Engine {
            peers,
            matcher,
            shared,
            ..
        } = self;
        let down = Downlink {
            peers,
            schedule: &mut shared.schedule,
        };
        (matcher, &mut shared.events, down)
    }

    /// The peer of `key`, given state on first use.
    fn peer_for(&mut self, key: P) -> Result<PeerId, PostError> {
        if let Some(id) = self.peers.lookup(key) {
            return Ok(id);
        }
        if self.peers.len() >= self.shared.cfg.max_peers {
            return Err(PostError::TooManyPeers);
        }
        let cfg = &self.shared.cfg;
        Ok(self.peers.insert(key, |id| Session::new(key, id, cfg)))
    }

    /// HELLO (PROTOCOL.md §4.1): opens a session, replacing one the peer
    /// no longer has. Authenticated (`counter`), it must first prove it is
    /// meant for this incarnation of ours and is not a replay (§11.5).
    fn on_hello(&mut self, now: Instant, from: P, pkt: &Packet<'_>, counter: Option<u64>) {
        if pkt.hdr.src_sess == 0 {
            self.shared.stats.dropped += 1;
            return;
        }
        if let (Some(counter), Some(auth)) = (counter, self.shared.auth.as_ref()) {
            let hello = HelloId::new(pkt.ctrl.a, pkt.hdr.src_sess, &from);
            let cookie_ok = |known| auth.cookie_valid(now, hello, known, &pkt.hs.cookie);
            let verdict = if pkt.hs.dst_inc != self.shared.cfg.incarnation || hello.inc == 0 {
                // Meant for an incarnation of ours it does not know (0),
                // or for a predecessor of ours.
                HelloVerdict::Challenge
            } else {
                match self.peers.lookup(from) {
                    // A first contact must prove it comes from where it
                    // says, like one from an unknown incarnation.
                    None if cookie_ok(0) => HelloVerdict::Accept,
                    None => HelloVerdict::Challenge,
                    Some(p) => self.peers[p].judge_hello(hello.inc, hello.sess, counter, cookie_ok),
                }
            };
            match verdict {
                HelloVerdict::Accept => {}
                HelloVerdict::Duplicate => {
                    // Answered (our HELLO_ACK may have been lost), and
                    // counted: a replay looks the same.
                    self.shared.stats.replayed += 1;
                }
                HelloVerdict::Replay => {
                    self.shared.stats.replayed += 1;
                    return;
                }
                HelloVerdict::Challenge => {
                    self.challenge(now, from, hello);
                    return;
                }
            }
        }
        let Ok(peer) = self.peer_for(from) else {
            self.shared.stats.dropped += 1;
            return;
        };
        if let Some(reason) = self.peers[peer].superseded_by(pkt) {
            self.fail_peer(peer, reason);
        }
        self.peers[peer].on_hello(pkt, counter, &mut self.shared);
    }

    /// A session packet from `from` for a session we do not have: dropped,
    /// answered with a RESET (§4.3) that names the incarnation we know the
    /// sender by, `known` (0: none; §11.4).
    fn reset_unknown(&mut self, from: P, ty: PacketType, hdr: &wire::Header, known: u32) {
        self.shared.stats.dropped += 1;
        let inc = self.shared.cfg.incarnation;
        let (src, dst) = (hdr.src_sess, hdr.dst_sess);
        self.oneshots
            .reset(from, ty, src, dst, inc, known, self.shared.auth.as_mut());
    }

    /// Answer `hello` with a CHALLENGE (§11.5): stateless, at most a bounded
    /// number queued.
    fn challenge(&mut self, now: Instant, from: P, hello: HelloId) {
        let cfg = &self.shared.cfg;
        let ctrl = wire::CtrlExt {
            a: cfg.incarnation,
            b: cfg.mtu as u32,
        };
        let known = self
            .peers
            .lookup(from)
            .map_or(0, |p| self.peers[p].known_incarnation());
        let Some(auth) = self.shared.auth.as_mut() else {
            return;
        };
        let cookie = auth.cookie(now, hello, known);
        if !self
            .oneshots
            .challenge(from, hello.inc, hello.sess, ctrl, cookie, auth)
        {
            self.shared.stats.dropped += 1;
        }
    }

    fn on_hello_ack(&mut self, from: P, pkt: &Packet<'_>, counter: Option<u64>) {
        match self.peers.lookup(from) {
            Some(peer) => self.peers[peer].on_hello_ack(pkt, counter, &mut self.shared),
            None => self.shared.stats.dropped += 1,
        }
    }

    /// CHALLENGE (§11.5): our HELLO must echo a cookie.
    fn on_challenge(&mut self, from: P, pkt: &Packet<'_>) {
        match self.peers.lookup(from) {
            Some(peer) => self.peers[peer].on_challenge(pkt, &mut self.shared),
            None => self.shared.stats.dropped += 1,
        }
    }

    /// RESET (§4.3): the peer lost our session. Authenticated, it must
    /// name us (or no one) and not come from our own incarnation: a RESET
    /// we sent, reflected back to us, is not about our session (§11.5).
    fn on_reset(&mut self, from: P, pkt: &Packet<'_>) {
        let own = self.shared.cfg.incarnation;
        let authenticated = pkt.hdr.flags & wf::AUTH != 0;
        if authenticated && (pkt.ctrl.a == own || (pkt.hs.dst_inc != 0 && pkt.hs.dst_inc != own)) {
            self.shared.stats.dropped += 1;
            return;
        }
        let reason = self
            .peers
            .lookup(from)
            .and_then(|peer| Some((peer, self.peers[peer].reset_by(pkt)?)));
        match reason {
            Some((peer, reason)) => self.fail_peer(peer, reason),
            None => self.shared.stats.dropped += 1,
        }
    }

    /// ACK, DATA, CTS, DONE and CLOSE: checked against the peer's session
    /// (§4.2), then acknowledgement fields to its sender half and sequenced
    /// packets to its receiver half.
    fn on_session_packet(
        &mut self,
        now: Instant,
        from: P,
        pkt: &Packet<'_>,
        ce: bool,
        bufs: &mut impl RecvBuffers,
    ) {
        let admission = match self.peers.lookup(from) {
            Some(peer) => Ok((peer, self.peers[peer].admits(&pkt.hdr))),
            None => Err(()),
        };
        let peer = match admission {
            Ok((peer, Admission::Accept)) => peer,
            Ok((_, Admission::Drop)) => {
                self.shared.stats.dropped += 1;
                return;
            }
            Ok((_, Admission::DropAndReset)) | Err(()) => {
                self.shared.stats.dropped += 1;
                let (src, dst) = (pkt.hdr.src_sess, pkt.hdr.dst_sess);
                let inc = self.shared.cfg.incarnation;
                self.oneshots.reset(from, pkt.ty, src, dst, inc, 0, None);
                return;
            }
        };
        if pkt.hdr.flags & wf::ACK != 0 {
            self.peers[peer].on_ack(now, &pkt.hdr, &mut self.shared);
        }
        if pkt.ty == PacketType::Close {
            // Its final ack has completed what it received (above); the rest
            // of the session can never complete (§4.5).
            self.shared.stats.closes_received += 1;
            self.fail_peer(peer, OpError::PeerClosed);
            return;
        }
        if ce && matches!(pkt.ty, PacketType::Data | PacketType::Pack) {
            // Congestion experienced on the way: echo it (§12.3).
            self.shared.stats.ecn_marked += 1;
            self.peers[peer].echo_ce(&mut self.shared);
        }
        let (session, shared, matcher) =
            (&mut self.peers[peer], &mut self.shared, &mut self.matcher);
        if pkt.ty == PacketType::Pack {
            session.on_pack(now, pkt, shared, matcher, bufs);
        } else if pkt.ty.is_sequenced() {
            session.on_sequenced(now, pkt, shared, matcher, bufs);
        }
    }

    /// Tear down the session with `peer`: every operation that depended on
    /// it completes with `reason` (sends first, then the receives its
    /// messages were arriving into); the peer returns to Idle (a later send
    /// opens a new session).
    fn fail_peer(&mut self, peer: PeerId, reason: OpError) {
        let shared = &mut self.shared;
        shared.stats.peers_lost += 1;
        shared.events.peer_lost(self.peers[peer].key(), reason);
        let incoming = self.peers[peer].fail(reason, shared);
        self.matcher
            .peer_failed(peer, incoming, reason, &mut shared.events);
    }
}

/// The sessions as the matcher sees them when the application (not a
/// session) calls it: post_recv, peek, claim.
struct Downlink<'a, P> {
    peers: &'a mut PeerTable<P, Session<P>>,
    schedule: &'a mut Schedule,
}

impl<P: Copy + Eq + Hash> Sessions<P> for Downlink<'_, P> {
    fn is_current(&self, peer: PeerId, sess: Option<u32>) -> bool {
        self.peers[peer].is_current(sess)
    }

    fn send_control(&mut self, peer: PeerId, c: Control) {
        self.peers[peer].queue_control(c, self.schedule);
    }

    fn expect(&mut self, peer: PeerId, m: Incoming<P>) {
        self.peers[peer].expect(m);
    }
}

/// Bytes per idle peer: the session record, plus its slot in the peer table.
pub const fn idle_peer_bytes<P>() -> usize {
    session::idle_bytes::<P>() + peers::map_slot_bytes::<P>()
}

/// Bytes of the queue block an active peer adds (heap, plus the deques' own buffers).
pub const fn active_peer_block_bytes<P>() -> usize {
    session::active_block_bytes::<P>()
}
