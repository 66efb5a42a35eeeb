//! Opening and ending sessions (PROTOCOL.md §4): HELLO / HELLO_ACK, the
//! checks every session packet passes (§4.2), RESET (§4.3), and with
//! authentication the freshness of a HELLO and CHALLENGE (§11.5).

use super::super::shared::Shared;
use super::rtt::Rtt;
use super::{Conn, MIN_MTU, Session};
use crate::api::OpError;
use crate::time::{Instant, Nanos};
use crate::wire::{Header, Packet};

/// What an authenticated HELLO is (§11.5), judged before it touches anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HelloVerdict {
    /// A new session (or the first) from this peer: proceed.
    Accept,
    /// A copy of the HELLO of the established session: answer HELLO_ACK.
    Duplicate,
    /// An older HELLO of the peer's incarnation than one already accepted.
    Replay,
    /// From an incarnation other than the one we know (or from a peer we
    /// know no incarnation of), without a valid cookie: a restart, a first
    /// contact, or a replay of another incarnation's or another address's
    /// HELLO, which only a fresh cookie tells apart. Answer CHALLENGE.
    Challenge,
}

/// What to do with a session packet (ACK, DATA, CTS, DONE, CLOSE), §4.2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    Accept,
    Drop,
    /// Addressed to a session of ours that no longer exists: drop it and
    /// tell the sender (§4.3).
    DropAndReset,
}

impl<P: Copy> Session<P> {
    /// Open a session (§4.1): a new local id, HELLO until answered.
    pub(super) fn start_handshake(&mut self, now: Instant, sh: &mut Shared<P>) {
        self.local_sess = sh.sessions.fresh(&mut sh.rng, self.id, self.local_sess);
        self.conn = Conn::HelloSent;
        self.send_hello = true;
        self.hello_retries = 0;
        self.rtt = Rtt::new(&sh.cfg);
        self.rto_at = now + Nanos(self.rtt.rto());
        self.arm_timers(&mut sh.schedule);
        self.mark_ready(&mut sh.schedule);
    }

    /// The session is open: the peer's id and incarnation are known, both
    /// streams start at sequence 0. `peer_mtu` is word b of the peer's HELLO
    /// or HELLO_ACK (0 = not stated: assume our own MTU), `features` its
    /// `sack` field (§4.1: what else the peer accepts).
    fn establish(
        &mut self,
        remote_sess: u32,
        remote_inc: u32,
        (peer_mtu, features): (u32, u64),
        sh: &mut Shared<P>,
    ) {
        let mtu = sh.cfg.mtu as u32;
        if remote_inc != self.remote_inc {
            // Another incarnation: its handshake counters start afresh.
            self.peer_hello_next = 0;
        }
        self.remote_sess = remote_sess;
        self.remote_inc = remote_inc;
        self.peer_mtu = match peer_mtu {
            0 => mtu,
            m => m.clamp(MIN_MTU as u32, mtu),
        };
        self.peer_packs = features & crate::wire::pack::features::PACK != 0;
        self.peer_bulk_port = crate::wire::bulk::features::port(features);
        self.peer_any_port = features & crate::wire::ANY_PORT != 0;
        self.conn = Conn::Established;
        self.keys = sh
            .auth
            .as_ref()
            .map(|a| Box::new(a.session_keys(remote_inc, self.local_sess, remote_sess)));
        // With authentication only a verified HELLO or HELLO_ACK gets here.
        self.key_shown |= self.keys.is_some();
        self.cookie = [0; 16];
        self.rto_at = Instant::NEVER;
        self.next_seq = 0;
        self.una = 0;
        self.expected = 0;
        self.rx_unacked = 0;
        self.peer_window = sh.cfg.window;
        self.hello_retries = 0;
        self.mark_ready(&mut sh.schedule);
    }

    /// A HELLO opening a session other than the established one: the peer
    /// restarted (new incarnation) or dropped our session (same one). The
    /// old session must fail with the error returned before
    /// [`Session::on_hello`] (what was in flight is lost).
    pub(crate) fn superseded_by(&self, hello: &Packet<'_>) -> Option<OpError> {
        if !self.is_established() || self.remote_sess == hello.hdr.src_sess {
            return None;
        }
        Some(if hello.ctrl.a != self.remote_inc {
            OpError::PeerRestarted
        } else {
            OpError::PeerReset
        })
    }

    /// The incarnation we know the peer by (0: none).
    pub(crate) fn known_incarnation(&self) -> u32 {
        self.remote_inc
    }

    /// An authenticated HELLO from incarnation `inc`, session `sess`, with
    /// handshake counter `counter` (§11.5); `cookie_ok` tells whether it
    /// echoes a cookie of ours bound to [`Session::known_incarnation`].
    pub(crate) fn judge_hello(
        &self,
        inc: u32,
        sess: u32,
        counter: u64,
        cookie_ok: impl FnOnce(u32) -> bool,
    ) -> HelloVerdict {
        if self.is_established() && self.remote_sess == sess && self.remote_inc == inc {
            HelloVerdict::Duplicate
        } else if self.remote_inc != 0 && inc == self.remote_inc {
            if counter >= self.peer_hello_next {
                HelloVerdict::Accept
            } else {
                HelloVerdict::Replay
            }
        } else if cookie_ok(self.remote_inc) {
            HelloVerdict::Accept
        } else {
            HelloVerdict::Challenge
        }
    }

    /// The peer's incarnation is `inc` (from its address): our HELLO binds
    /// it (§11.4). Ignored while a session is open.
    pub(crate) fn set_peer_incarnation(&mut self, inc: u32) {
        if !self.is_established() && inc != 0 && inc != self.remote_inc {
            self.remote_inc = inc;
            self.peer_hello_next = 0;
        }
    }

    /// A CHALLENGE to our HELLO (§11.5): the peer's incarnation and a cookie
    /// to echo; send HELLO again at once. Other CHALLENGEs are dropped.
    pub(crate) fn on_challenge(&mut self, pkt: &Packet<'_>, sh: &mut Shared<P>) {
        let ours = self.conn == Conn::HelloSent
            && pkt.hdr.dst_sess == self.local_sess
            && pkt.hs.dst_inc == sh.cfg.incarnation
            && pkt.ctrl.a != 0;
        if !ours {
            sh.stats.dropped += 1;
            return;
        }
        if pkt.ctrl.a != self.remote_inc {
            self.remote_inc = pkt.ctrl.a;
            self.peer_hello_next = 0;
        }
        self.cookie = pkt.hs.cookie;
        self.send_hello = true;
        self.mark_ready(&mut sh.schedule);
    }

    /// Record the handshake counter of the peer's HELLO or HELLO_ACK that
    /// was accepted (authenticated only).
    fn note_hello_counter(&mut self, counter: Option<u64>) {
        if let Some(c) = counter {
            self.peer_hello_next = self.peer_hello_next.max(c.saturating_add(1));
        }
    }

    /// A HELLO (source id non-zero): answer HELLO_ACK, establishing the
    /// session first unless it is a duplicate of the established one.
    /// `counter`: its handshake counter, when authenticated.
    pub(crate) fn on_hello(
        &mut self,
        hello: &Packet<'_>,
        counter: Option<u64>,
        sh: &mut Shared<P>,
    ) {
        let (sess, inc) = (hello.hdr.src_sess, hello.ctrl.a);
        let mtu = (hello.ctrl.b, hello.hdr.sack);
        match self.conn {
            Conn::Established => {}
            Conn::HelloSent => self.establish(sess, inc, mtu, sh),
            Conn::Idle => {
                self.local_sess = sh.sessions.fresh(&mut sh.rng, self.id, self.local_sess);
                self.establish(sess, inc, mtu, sh);
            }
        }
        self.note_hello_counter(counter);
        self.send_hello_ack = true;
        self.idle_at = Instant::NEVER;
        self.mark_ready(&mut sh.schedule);
    }

    /// A HELLO_ACK: establishes our HELLO's session, else it is dropped.
    /// Authenticated (`counter`), it must name our incarnation.
    pub(crate) fn on_hello_ack(
        &mut self,
        pkt: &Packet<'_>,
        counter: Option<u64>,
        sh: &mut Shared<P>,
    ) {
        let bound = counter.is_none() || pkt.hs.dst_inc == sh.cfg.incarnation;
        if self.conn == Conn::HelloSent
            && pkt.hdr.dst_sess == self.local_sess
            && pkt.hdr.src_sess != 0
            && bound
        {
            let mtu = (pkt.ctrl.b, pkt.hdr.sack);
            self.establish(pkt.hdr.src_sess, pkt.ctrl.a, mtu, sh);
            self.note_hello_counter(counter);
        } else {
            sh.stats.dropped += 1;
        }
    }

    /// A RESET about our current session (or our HELLO): the peer lost it;
    /// the session fails with the error returned. `None`: not ours, dropped.
    ///
    /// While our HELLO is outstanding we have sent nothing else on the
    /// session, and a peer answers a HELLO with a HELLO_ACK or a CHALLENGE,
    /// never a RESET: a RESET then answers a datagram we did not send as
    /// such (our HELLO mangled into a session packet's shape on the way, or
    /// a forger's copy), which the peer, having no session to verify it
    /// with, could not tell from ours (§4.3). Only a RESET from another
    /// incarnation than the one our HELLO is bound to — the peer restarted
    /// — ends the handshake; the HELLO's retransmissions carry it on.
    pub(crate) fn reset_by(&self, pkt: &Packet<'_>) -> Option<OpError> {
        let ours = self.conn != Conn::Idle && pkt.hdr.dst_sess == self.local_sess;
        let restarted = self.remote_inc != 0 && pkt.ctrl.a != self.remote_inc;
        let about_current = match self.conn {
            Conn::HelloSent => restarted,
            _ => pkt.ctrl.b == self.remote_sess,
        };
        if !(ours && about_current) {
            return None;
        }
        Some(if restarted {
            OpError::PeerRestarted
        } else {
            OpError::PeerReset
        })
    }

    /// §4.2: only the established session's packets are accepted. One
    /// addressed to a session of ours that no longer exists gets a RESET
    /// (while our HELLO is outstanding we stay quiet).
    pub(crate) fn admits(&self, hdr: &Header) -> Admission {
        let ok = self.conn == Conn::Established
            && hdr.dst_sess == self.local_sess
            && hdr.src_sess == self.remote_sess;
        if ok {
            Admission::Accept
        } else if self.conn == Conn::Idle
            || (self.conn == Conn::Established && hdr.dst_sess != self.local_sess)
        {
            Admission::DropAndReset
        } else {
            Admission::Drop
        }
    }
}
