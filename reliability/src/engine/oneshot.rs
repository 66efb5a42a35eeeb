//! Control packets sent once, outside any session's queues: RESET replies
//! (PROTOCOL.md §4.3), CLOSE notices (§4.5) and CHALLENGEs (§11.5). None is
//! retransmitted. Each is encoded (and sealed) when it is queued, so a
//! CLOSE can use the keys of the session it ends.

use std::collections::VecDeque;

use super::auth::{Cookie, EngineAuth};
use crate::api::{Stats, Transmit};
use crate::wire::{self, CtrlExt, HandshakeExt, Header, PacketType, flags as wf};

/// At most this many RESET replies and CHALLENGEs wait for transmission;
/// more are dropped (each answers a datagram: a flood must not grow this).
const MAX_PENDING_REPLIES: usize = 64;
/// Copies of each CLOSE notice: it is sent once and never retransmitted (the
/// endpoint is going away), so copies make losing it rare. It often carries
/// the closer's only ack of what it received last (a job's final message,
/// completed at its sender on injection): lost, the sender retransmits into
/// a closed port and gives the peer up. At 5 % independent loss two copies
/// are both lost once in 400 closes, three once in 8000.
pub(crate) const CLOSE_COPIES: usize = 3;
/// The longest datagram queued here.
pub(crate) const ONESHOT_MAX: usize = wire::auth::MAX_CTRL_LEN;

/// One encoded datagram.
#[derive(Debug)]
struct Oneshot<P> {
    to: P,
    len: u8,
    reply: bool,
    bytes: [u8; ONESHOT_MAX],
}

/// RESET replies, CHALLENGEs and CLOSE notices waiting for `poll_transmit`, to peer `P`.
#[derive(Debug)]
pub(crate) struct Oneshots<P> {
    queue: VecDeque<Oneshot<P>>,
    replies: usize,
}

impl<P> Default for Oneshots<P> {
    fn default() -> Self {
        Oneshots {
            queue: VecDeque::new(),
            replies: 0,
        }
    }
}

/// The body of a handshake packet (header, control and, authenticated, the
/// handshake extension), sealed with the handshake key or a CRC.
pub(crate) fn handshake_datagram(
    buf: &mut [u8],
    mut h: Header,
    c: &CtrlExt,
    hs: &HandshakeExt,
    auth: Option<&mut EngineAuth>,
) -> usize {
    match auth {
        None => wire::encode_ctrl(buf, &h, c),
        Some(a) => {
            h.flags |= wf::AUTH;
            let n = wire::ctrl_body(buf, &h, c);
            hs.write(buf);
            a.seal_handshake(buf, n + wire::auth::HS_EXT_LEN)
        }
    }
}

impl<P: Copy> Oneshots<P> {
    /// Whether nothing waits.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Queue a datagram `encode` writes (and returns the length of).
    fn push(&mut self, to: P, reply: bool, encode: impl FnOnce(&mut [u8]) -> usize) {
        let mut bytes = [0u8; ONESHOT_MAX];
        let len = encode(&mut bytes);
        if reply {
            self.replies += 1;
        }
        self.queue.push_back(Oneshot {
            to,
            len: len as u8,
            reply,
            bytes,
        });
    }

    fn replies_full(&self) -> bool {
        self.replies >= MAX_PENDING_REPLIES
    }

    /// Answer a datagram of type `ty` from `to`, addressed to a session we
    /// do not have (`src_sess`, `dst_sess` are its ids), with a RESET
    /// (§4.3). RESET and CLOSE are never answered (a second copy of a
    /// CLOSE finds the session already gone), nor is a packet without a
    /// session id to address. Authenticated, it names the incarnation we
    /// know `to` by (`to_inc`, 0 if none), so it cannot be reflected to
    /// another endpoint (§11.4).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn reset(
        &mut self,
        to: P,
        ty: PacketType,
        src_sess: u32,
        dst_sess: u32,
        incarnation: u32,
        to_inc: u32,
        auth: Option<&mut EngineAuth>,
    ) {
        let unanswered = matches!(ty, PacketType::Reset | PacketType::Close);
        if unanswered || src_sess == 0 || self.replies_full() {
            return;
        }
        let hdr = Header {
            ty: PacketType::Reset as u8,
            dst_sess: src_sess,
            ..Default::default()
        };
        let ctrl = CtrlExt {
            a: incarnation,
            b: dst_sess,
        };
        let hs = HandshakeExt {
            dst_inc: to_inc,
            ..HandshakeExt::default()
        };
        self.push(to, true, |b| handshake_datagram(b, hdr, &ctrl, &hs, auth));
    }

    /// A CHALLENGE to the HELLO from `to` (incarnation `peer_inc`, session
    /// `peer_sess`): our incarnation, our datagram limit and a cookie
    /// (§11.5). Returns whether it was queued.
    pub(crate) fn challenge(
        &mut self,
        to: P,
        peer_inc: u32,
        peer_sess: u32,
        ctrl: CtrlExt,
        cookie: Cookie,
        auth: &mut EngineAuth,
    ) -> bool {
        if self.replies_full() {
            return false;
        }
        let hdr = Header {
            ty: PacketType::Challenge as u8,
            dst_sess: peer_sess,
            ..Default::default()
        };
        let hs = HandshakeExt {
            dst_inc: peer_inc,
            reserved: 0,
            cookie,
        };
        self.push(to, true, |b| {
            handshake_datagram(b, hdr, &ctrl, &hs, Some(auth))
        });
        true
    }

    /// A CLOSE notice to `to`, [`CLOSE_COPIES`] times; `encode` writes one
    /// copy (§4.5).
    pub(crate) fn close(&mut self, to: P, mut encode: impl FnMut(&mut [u8]) -> usize) {
        for _ in 0..CLOSE_COPIES {
            self.push(to, false, &mut encode);
        }
    }

    /// Copy the next one into `buf` (at least [`ONESHOT_MAX`] long).
    pub(crate) fn transmit(&mut self, buf: &mut [u8], stats: &mut Stats) -> Option<Transmit<P>> {
        let o = self.queue.pop_front()?;
        let len = usize::from(o.len);
        buf[..len].copy_from_slice(&o.bytes[..len]);
        if o.reply {
            self.replies -= 1;
        }
        stats.tx_datagrams += 1;
        match PacketType::from_u8(o.bytes[1]) {
            Some(PacketType::Reset) => stats.resets_sent += 1,
            Some(PacketType::Challenge) => stats.challenges_sent += 1,
            _ => {}
        }
        Some(Transmit {
            dst: o.to,
            len,
            path: 0,
        })
    }
}
