//! Wire format: encoding and checked decoding of datagrams (PROTOCOL.md §2).
//!
//! Every datagram is `common header (32 B) ‖ extension ‖ payload ‖ CRC-32C (4 B)`,
//! all integers little-endian. Decoding validates length, version, type and the
//! CRC before anything else looks at the bytes, so the engine only ever sees
//! well-formed packets.

use crate::crc::crc32c;

mod rma;
pub use rma::{
    MAX_ATOMIC_BYTES, RMA_EXT_LEN, RMA_HDR_LEN, RMA_OVERHEAD, RmaExt, encode_rma_ext,
    ends_read_response, is_rma, status,
};
pub mod auth;
pub mod bulk;
pub mod pack;

pub use auth::HandshakeExt;

/// Protocol version carried in byte 0.
pub const VERSION: u8 = 1;
/// Size of the common header.
pub const COMMON_LEN: usize = 32;
/// Size of the DATA extension.
pub const DATA_EXT_LEN: usize = 32;
/// Size of the control extension (HELLO, HELLO_ACK, RESET, CTS, DONE).
pub const CTRL_EXT_LEN: usize = 8;
/// Size of the trailing CRC-32C.
pub const TRAILER_LEN: usize = 4;
/// Bytes before the payload of a DATA packet.
pub const DATA_HDR_LEN: usize = COMMON_LEN + DATA_EXT_LEN;
/// Per-packet overhead of a DATA packet (header + trailer).
pub const DATA_OVERHEAD: usize = DATA_HDR_LEN + TRAILER_LEN;
/// Largest pull offer a request-to-send carries (PROTOCOL.md §6.7).
pub const MAX_PULL_OFFER: usize = 1024;
/// Largest control packet.
pub const MAX_CTRL_LEN: usize = COMMON_LEN + CTRL_EXT_LEN + TRAILER_LEN;

/// Packet types (byte 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum PacketType {
    /// Opens a session: carries the sender's session id and incarnation.
    Hello = 1,
    /// Answers HELLO: both session ids are now known to both sides.
    HelloAck = 2,
    /// "I do not know the session you addressed": the receiver reset or restarted.
    Reset = 3,
    /// Acknowledgement only (no sequence number consumed).
    Ack = 4,
    /// A message segment, or a rendezvous request-to-send (first packet, no payload).
    Data = 5,
    /// Rendezvous clear-to-send: the receiver matched the message.
    Cts = 6,
    /// Delivery notice for FI_DELIVERY_COMPLETE.
    Done = 7,
    /// The sender's endpoint is closing: its final acknowledgement, then the
    /// session ends (PROTOCOL.md §4.5).
    Close = 8,
    /// RMA: a segment of an RMA write (§8.2).
    Write = 9,
    /// RMA: read request (§8.3).
    ReadReq = 10,
    /// RMA: a segment of a read's data, or its failure (§8.3).
    ReadResp = 11,
    /// RMA: an atomic operation and its operands (§8.4).
    Atomic = 12,
    /// RMA: an atomic's status and fetched values (§8.4).
    AtomicResp = 13,
    /// RMA: a write's status (§8.2).
    RmaResp = 14,
    /// Answer to an authenticated HELLO that must prove it is fresh: the
    /// responder's incarnation and a cookie to echo (PROTOCOL.md §11.5).
    Challenge = 16,
    /// The receiver keeps an eager message's header only, over its memory
    /// budget: the sender holds the data until a CTS fetches it (§6.5).
    Defer = 17,
    /// Several whole small eager messages, one record each, each standing
    /// for a DATA packet with its own sequence number (§6.8).
    Pack = 32,
}

impl PacketType {
    /// The type of byte 1 of a datagram, if it is one.
    #[inline]
    pub fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            1 => Self::Hello,
            2 => Self::HelloAck,
            3 => Self::Reset,
            4 => Self::Ack,
            5 => Self::Data,
            6 => Self::Cts,
            7 => Self::Done,
            8 => Self::Close,
            9 => Self::Write,
            10 => Self::ReadReq,
            11 => Self::ReadResp,
            12 => Self::Atomic,
            13 => Self::AtomicResp,
            14 => Self::RmaResp,
            16 => Self::Challenge,
            17 => Self::Defer,
            32 => Self::Pack,
            _ => return None,
        })
    }

    /// Whether this type consumes a sequence number (is reliable).
    #[inline]
    pub fn is_sequenced(self) -> bool {
        matches!(self, Self::Data | Self::Cts | Self::Done | Self::Defer) || rma::is_rma(self)
    }

    /// Whether an authenticated datagram of this type is sealed with the
    /// job's handshake key (outside any session) rather than a session key
    /// (PROTOCOL.md §11.2).
    #[inline]
    pub fn is_handshake(self) -> bool {
        matches!(
            self,
            Self::Hello | Self::HelloAck | Self::Reset | Self::Challenge
        )
    }
}

/// Header flag bits (bytes 2..4).
pub mod flags {
    /// The ack/window/sack fields are valid.
    pub const ACK: u16 = 1 << 0;
    /// Receiver-not-ready: the packet `ack` was refused, retry after a delay.
    pub const RNR: u16 = 1 << 1;
    /// DATA: first packet of a message (carries matching information).
    pub const FIRST: u16 = 1 << 2;
    /// DATA: the message uses rendezvous (FIRST packet = RTS, no payload).
    pub const RNDV: u16 = 1 << 3;
    /// DATA: message is tagged (tag field is meaningful for matching).
    pub const TAGGED: u16 = 1 << 4;
    /// DATA: message carries remote CQ data.
    pub const CQ_DATA: u16 = 1 << 5;
    /// DATA: sender wants a DONE notice (FI_DELIVERY_COMPLETE).
    pub const DC: u16 = 1 << 6;
    /// CTS: the receiver discarded the message (FI_DISCARD): send no data.
    pub const DISCARD: u16 = 1 << 7;
    /// DATA: ack requested — the sender reports the message's completion
    /// when it is acknowledged, so the receiver acknowledges the end of the
    /// message at once instead of delaying it (PROTOCOL.md §5.2).
    pub const AR: u16 = 1 << 8;
    /// CTS: the receiver copied the message itself from the sender's
    /// memory with the pull offer of its request-to-send (PROTOCOL.md
    /// §6.7): send no data, the message is placed (delivered).
    pub const PULLED: u16 = 1 << 9;
    /// The datagram ends in an authentication trailer (nonce and tag)
    /// instead of the CRC-32C (PROTOCOL.md §11).
    pub const AUTH: u16 = 1 << 12;
    /// With AUTH, on DATA: the payload is encrypted (PROTOCOL.md §11.3).
    pub const ENC: u16 = 1 << 13;
    /// ACK fields: a packet the acknowledged range covers arrived with the
    /// IP ECN codepoint CE (congestion experienced, RFC 3168; §12.3).
    pub const ECE: u16 = 1 << 14;
    /// ACK fields: a DEFER notice of the sender is not yet acknowledged, so
    /// this ack does not yet prove an eager message was kept (§6.5).
    pub const HOLD: u16 = 1 << 15;
    /// All defined bits (10–11 are reserved).
    pub const ALL: u16 = ((1 << 10) - 1) | AUTH | ENC | ECE | HOLD;
}

/// Why a datagram was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireError {
    /// Shorter than its type requires.
    Truncated,
    /// Unknown version.
    Version,
    /// Unknown packet type.
    Type,
    /// CRC mismatch: corrupted in transit.
    Checksum,
    /// Fields inconsistent (payload length, unknown flags, offsets beyond total).
    Malformed,
    /// The authentication tag does not verify (PROTOCOL.md §11).
    Auth,
}

/// The common header (PROTOCOL.md §2.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header {
    /// Packet type.
    pub ty: u8,
    /// Flag bits, see [`flags`].
    pub flags: u16,
    /// Sender's session id for this peer pair (0 = none yet).
    pub src_sess: u32,
    /// Session id the sender believes the receiver uses (0 = unknown).
    pub dst_sess: u32,
    /// Sequence number (sequenced types only).
    pub seq: u32,
    /// Cumulative ack: the next sequence number the sender expects.
    pub ack: u32,
    /// Receive window in packets beyond `ack`.
    pub window: u16,
    /// Payload length (DATA only).
    pub payload_len: u16,
    /// Selective ack: bit i set = packet `ack + 1 + i` was received.
    pub sack: u64,
}

/// The DATA extension.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DataExt {
    /// Per-session message number of the sender.
    pub msg_id: u32,
    /// Message length in bytes.
    pub total_len: u32,
    /// Offset of this segment's payload in the message.
    pub offset: u32,
    /// Tag (tagged messages).
    pub tag: u64,
    /// Remote CQ data.
    pub data: u64,
}

/// The control extension: two type-specific words.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtrlExt {
    /// HELLO/HELLO_ACK/RESET: incarnation; CTS/DONE: msg_id.
    pub a: u32,
    /// RESET: the unknown session; CTS: accepted length.
    pub b: u32,
}

/// Received bytes, in one piece or spread over the buffers their datagram
/// arrived in (AF_XDP multi-buffer: one per UMEM chunk). The engine copies
/// them out piece by piece, so such a datagram is never gathered first
/// (one userspace copy per direction).
#[derive(Clone, Copy, Debug)]
pub enum Bytes<'a> {
    One(&'a [u8]),
    /// `len` bytes from `skip` bytes into the concatenation of `pieces`.
    Pieces {
        pieces: &'a [&'a [u8]],
        skip: usize,
        len: usize,
    },
}

impl<'a> Bytes<'a> {
    pub fn len(&self) -> usize {
        match self {
            Bytes::One(b) => b.len(),
            Bytes::Pieces { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Hands `f` the bytes `from..from + n` (clamped to the length) in
    /// order, as (offset from `from`, piece).
    pub fn for_each(&self, from: usize, n: usize, mut f: impl FnMut(usize, &'a [u8])) {
        let end = from.saturating_add(n).min(self.len());
        if from >= end {
            return;
        }
        match *self {
            Bytes::One(b) => f(0, &b[from..end]),
            Bytes::Pieces { pieces, skip, .. } => {
                // Absolute positions in the concatenation of `pieces`.
                let (want, stop) = (skip + from, skip + end);
                let mut at = 0;
                for p in pieces {
                    let (lo, hi) = (at, at + p.len());
                    at = hi;
                    if hi <= want {
                        continue;
                    }
                    if lo >= stop {
                        break;
                    }
                    let (a, b) = (want.max(lo), stop.min(hi));
                    if a < b {
                        f(a - want, &p[a - lo..b - lo]);
                    }
                }
            }
        }
    }

    /// Copies the first `dst.len()` bytes (at most all of them) into `dst`;
    /// returns how many.
    pub fn copy_to(&self, dst: &mut [u8]) -> usize {
        let mut n = 0;
        self.for_each(0, dst.len(), |off, p| {
            dst[off..off + p.len()].copy_from_slice(p);
            n = off + p.len();
        });
        n
    }

    /// The `len` bytes from `from` (clamped to the length).
    pub fn sub(&self, from: usize, len: usize) -> Bytes<'a> {
        let from = from.min(self.len());
        let len = len.min(self.len() - from);
        match *self {
            Bytes::One(b) => Bytes::One(&b[from..from + len]),
            Bytes::Pieces { pieces, skip, .. } => Bytes::Pieces {
                pieces,
                skip: skip + from,
                len,
            },
        }
    }

    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.len()];
        self.copy_to(&mut v);
        v
    }
}

impl PartialEq for Bytes<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.to_vec() == other.to_vec()
    }
}

impl Eq for Bytes<'_> {}

/// A decoded, verified packet borrowing its payload from the datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<'a> {
    /// Decoded type.
    pub ty: PacketType,
    /// Common header.
    pub hdr: Header,
    /// DATA extension (zero for other types).
    pub data: DataExt,
    /// Control extension (zero for other types).
    pub ctrl: CtrlExt,
    /// RMA extension (RMA types only, §8).
    pub rma: RmaExt,
    /// Handshake extension of an authenticated HELLO, HELLO_ACK, RESET or
    /// CHALLENGE (zero otherwise, §11.4).
    pub hs: HandshakeExt,
    /// Payload (DATA and RMA types).
    pub payload: Bytes<'a>,
}

#[inline]
fn rd16(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
#[inline]
fn rd32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}
#[inline]
fn rd64(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(a)
}

/// HELLO / HELLO_ACK feature bit (§4.1): the sender finds a datagram's
/// session by the ids it carries ([`named_session`], §4.6), so the datagrams
/// of a session may reach it from any UDP source port.
pub const ANY_PORT: u64 = 1 << 2;

/// The session of ours a datagram names (PROTOCOL.md §4.6): its `dst_sess`
/// when non-zero, for every type but connection management (whose ids are
/// connections', §9). `None`: HELLO (no session yet) or not a datagram of
/// this protocol; the sender is known by its address then. Read before any
/// check: the engine verifies the datagram once its peer is found.
#[inline]
pub fn named_session(first: &[u8]) -> Option<u32> {
    if first.len() < COMMON_LEN || first[0] != VERSION || (24..=31).contains(&first[1]) {
        return None;
    }
    let s = rd32(first, 8);
    (s != 0).then_some(s)
}

/// Decode and verify a datagram.
#[inline]
pub fn decode(buf: &[u8]) -> Result<Packet<'_>, WireError> {
    if buf.len() < COMMON_LEN + TRAILER_LEN {
        return Err(WireError::Truncated);
    }
    if rd16(buf, 2) & flags::AUTH != 0 {
        // Sealed with a key, not a CRC: a receiver without one cannot
        // verify it.
        return Err(WireError::Auth);
    }
    let body_end = buf.len() - TRAILER_LEN;
    if crc32c(&buf[..body_end]) != rd32(buf, body_end) {
        return Err(WireError::Checksum);
    }
    parse(&buf[..body_end.min(MAX_HDR_LEN)], body_end, |a, b| {
        Bytes::One(&buf[a..b])
    })
}

/// Parse the body of an authenticated datagram whose tag verified
/// ([`auth::open`]): the same checks as [`decode`] but no CRC, which the
/// tag subsumes (PROTOCOL.md §11). `body` ends where the nonce field began.
#[inline]
pub fn decode_authenticated(body: &[u8]) -> Result<Packet<'_>, WireError> {
    if body.len() < COMMON_LEN {
        return Err(WireError::Truncated);
    }
    if rd16(body, 2) & flags::AUTH == 0 {
        return Err(WireError::Malformed);
    }
    parse(&body[..body.len().min(MAX_HDR_LEN)], body.len(), |a, b| {
        Bytes::One(&body[a..b])
    })
}

/// [`decode`] for a datagram that arrived in `pieces` (their concatenation
/// is the datagram): the headers are read through a small copy, the CRC runs
/// over the pieces in turn, and the payload stays where it is.
pub fn decode_pieces<'a>(pieces: &'a [&'a [u8]]) -> Result<Packet<'a>, WireError> {
    let total: usize = pieces.iter().map(|p| p.len()).sum();
    if total < COMMON_LEN + TRAILER_LEN {
        return Err(WireError::Truncated);
    }
    let body_end = total - TRAILER_LEN;
    let all = Bytes::Pieces {
        pieces,
        skip: 0,
        len: total,
    };
    let mut fl = [0u8; 4];
    all.copy_to(&mut fl);
    if u16::from_le_bytes([fl[2], fl[3]]) & flags::AUTH != 0 {
        return Err(WireError::Auth);
    }
    let mut crc = !0;
    all.for_each(0, body_end, |_, p| crc = crate::crc::update(crc, p));
    let mut trailer = [0u8; TRAILER_LEN];
    all.for_each(body_end, TRAILER_LEN, |off, p| {
        trailer[off..off + p.len()].copy_from_slice(p)
    });
    if !crc != u32::from_le_bytes(trailer) {
        return Err(WireError::Checksum);
    }
    let mut head = [0u8; MAX_HDR_LEN];
    let n = all.copy_to(&mut head[..body_end.min(MAX_HDR_LEN)]);
    parse(&head[..n], body_end, |a, b| Bytes::Pieces {
        pieces,
        skip: a,
        len: b - a,
    })
}

/// Longest header (common header and extension) of any type.
const MAX_HDR_LEN: usize = if RMA_HDR_LEN > DATA_HDR_LEN {
    RMA_HDR_LEN
} else {
    DATA_HDR_LEN
};

/// The checks and fields after the CRC: `head` is the start of the body (up
/// to [`MAX_HDR_LEN`] bytes), `body_end` its length; `payload(a, b)` gives
/// the body's bytes `a..b`.
pub(crate) fn parse<'a>(
    buf: &[u8],
    body_end: usize,
    payload: impl FnOnce(usize, usize) -> Bytes<'a>,
) -> Result<Packet<'a>, WireError> {
    if buf[0] != VERSION {
        return Err(WireError::Version);
    }
    let ty = PacketType::from_u8(buf[1]).ok_or(WireError::Type)?;
    let hdr = Header {
        ty: buf[1],
        flags: rd16(buf, 2),
        src_sess: rd32(buf, 4),
        dst_sess: rd32(buf, 8),
        seq: rd32(buf, 12),
        ack: rd32(buf, 16),
        window: rd16(buf, 20),
        payload_len: rd16(buf, 22),
        sack: rd64(buf, 24),
    };
    if hdr.flags & !flags::ALL != 0 {
        return Err(WireError::Malformed);
    }
    let mut p = Packet {
        ty,
        hdr,
        data: DataExt::default(),
        ctrl: CtrlExt::default(),
        rma: RmaExt::default(),
        hs: HandshakeExt::default(),
        payload: Bytes::One(&[]),
    };
    if rma::is_rma(ty) {
        (p.rma, p.payload) = rma::parse_rma(ty, buf, &hdr, body_end, payload)?;
        return Ok(p);
    }
    // An authenticated handshake packet carries its handshake extension
    // after the control extension (§11.4).
    let hs_len = if hdr.flags & flags::AUTH != 0 && ty.is_handshake() {
        auth::HS_EXT_LEN
    } else {
        0
    };
    if ty == PacketType::Challenge && hs_len == 0 {
        return Err(WireError::Malformed);
    }
    match ty {
        PacketType::Pack => {
            // The records are checked where they are unpacked (§6.8).
            if hdr.flags & !pack::PACK_FLAGS != 0
                || body_end - COMMON_LEN != usize::from(hdr.payload_len)
            {
                return Err(WireError::Malformed);
            }
            p.payload = payload(COMMON_LEN, body_end);
        }
        PacketType::Ack => {
            if body_end != COMMON_LEN || hdr.payload_len != 0 {
                return Err(WireError::Malformed);
            }
        }
        PacketType::Data => {
            if body_end < DATA_HDR_LEN {
                return Err(WireError::Truncated);
            }
            let plen = usize::from(hdr.payload_len);
            if body_end - DATA_HDR_LEN != plen {
                return Err(WireError::Malformed);
            }
            p.data = DataExt {
                msg_id: rd32(buf, 32),
                total_len: rd32(buf, 36),
                offset: rd32(buf, 40),
                tag: rd64(buf, 48),
                data: rd64(buf, 56),
            };
            // A rendezvous request carries no message data, at most a pull
            // offer (§6.7); other payload lies inside the message.
            let rts = hdr.flags & flags::FIRST != 0 && hdr.flags & flags::RNDV != 0;
            let end = u64::from(p.data.offset) + plen as u64;
            if rts && plen > MAX_PULL_OFFER {
                return Err(WireError::Malformed);
            }
            if !rts && end > u64::from(p.data.total_len) {
                return Err(WireError::Malformed);
            }
            if hdr.flags & flags::FIRST != 0 && p.data.offset != 0 {
                return Err(WireError::Malformed);
            }
            p.payload = payload(DATA_HDR_LEN, body_end);
        }
        _ => {
            if body_end != COMMON_LEN + CTRL_EXT_LEN + hs_len || hdr.payload_len != 0 {
                return Err(WireError::Malformed);
            }
            p.ctrl = CtrlExt {
                a: rd32(buf, 32),
                b: rd32(buf, 36),
            };
            if hs_len != 0 {
                p.hs = HandshakeExt::read(&buf[COMMON_LEN + CTRL_EXT_LEN..body_end]);
            }
        }
    }
    Ok(p)
}

/// Write the common header into `buf[..COMMON_LEN]`.
#[inline]
pub fn encode_header(buf: &mut [u8], h: &Header) {
    let b = &mut buf[..COMMON_LEN];
    b[0] = VERSION;
    b[1] = h.ty;
    b[2..4].copy_from_slice(&h.flags.to_le_bytes());
    b[4..8].copy_from_slice(&h.src_sess.to_le_bytes());
    b[8..12].copy_from_slice(&h.dst_sess.to_le_bytes());
    b[12..16].copy_from_slice(&h.seq.to_le_bytes());
    b[16..20].copy_from_slice(&h.ack.to_le_bytes());
    b[20..22].copy_from_slice(&h.window.to_le_bytes());
    b[22..24].copy_from_slice(&h.payload_len.to_le_bytes());
    b[24..32].copy_from_slice(&h.sack.to_le_bytes());
}

/// Write the DATA extension into `buf[COMMON_LEN..DATA_HDR_LEN]`.
#[inline]
pub fn encode_data_ext(buf: &mut [u8], d: &DataExt) {
    let b = &mut buf[COMMON_LEN..DATA_HDR_LEN];
    b[0..4].copy_from_slice(&d.msg_id.to_le_bytes());
    b[4..8].copy_from_slice(&d.total_len.to_le_bytes());
    b[8..12].copy_from_slice(&d.offset.to_le_bytes());
    b[12..16].copy_from_slice(&0u32.to_le_bytes());
    b[16..24].copy_from_slice(&d.tag.to_le_bytes());
    b[24..32].copy_from_slice(&d.data.to_le_bytes());
}

/// Write the control extension into `buf[COMMON_LEN..COMMON_LEN + CTRL_EXT_LEN]`.
#[inline]
pub fn encode_ctrl_ext(buf: &mut [u8], c: &CtrlExt) {
    let b = &mut buf[COMMON_LEN..COMMON_LEN + CTRL_EXT_LEN];
    b[0..4].copy_from_slice(&c.a.to_le_bytes());
    b[4..8].copy_from_slice(&c.b.to_le_bytes());
}

/// Append the CRC over `buf[..body_len]`; returns the datagram length.
#[inline]
pub fn seal(buf: &mut [u8], body_len: usize) -> usize {
    let c = crc32c(&buf[..body_len]);
    buf[body_len..body_len + TRAILER_LEN].copy_from_slice(&c.to_le_bytes());
    body_len + TRAILER_LEN
}

/// Write the body of a control datagram (HELLO, HELLO_ACK, RESET, CLOSE,
/// CTS, DONE, DEFER: common header and control extension, §2.3); returns
/// its length. The trailer follows: [`seal`] or [`auth::seal`].
#[inline]
pub fn ctrl_body(buf: &mut [u8], h: &Header, c: &CtrlExt) -> usize {
    encode_header(buf, h);
    encode_ctrl_ext(buf, c);
    COMMON_LEN + CTRL_EXT_LEN
}

/// Write a whole control datagram (body and CRC); returns its length.
#[inline]
pub fn encode_ctrl(buf: &mut [u8], h: &Header, c: &CtrlExt) -> usize {
    let n = ctrl_body(buf, h, c);
    seal(buf, n)
}

/// Write a whole ACK datagram (common header and CRC); returns its length.
#[inline]
pub fn encode_ack(buf: &mut [u8], h: &Header) -> usize {
    encode_header(buf, h);
    seal(buf, COMMON_LEN)
}

/// Serial-number comparison (RFC 1982 style, 32-bit): signed distance `a - b`.
#[inline]
pub fn seq_diff(a: u32, b: u32) -> i32 {
    a.wrapping_sub(b) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data_packet(payload: &[u8]) -> Vec<u8> {
        let mut buf = vec![0u8; DATA_OVERHEAD + payload.len()];
        let h = Header {
            ty: PacketType::Data as u8,
            flags: flags::ACK | flags::FIRST | flags::TAGGED,
            src_sess: 7,
            dst_sess: 9,
            seq: 42,
            ack: 17,
            window: 64,
            payload_len: payload.len() as u16,
            sack: 0b101,
        };
        encode_header(&mut buf, &h);
        encode_data_ext(
            &mut buf,
            &DataExt {
                msg_id: 3,
                total_len: payload.len() as u32,
                offset: 0,
                tag: 0xABCD,
                data: 5,
            },
        );
        buf[DATA_HDR_LEN..DATA_HDR_LEN + payload.len()].copy_from_slice(payload);
        seal(&mut buf, DATA_HDR_LEN + payload.len());
        buf
    }

    #[test]
    fn roundtrip_data() {
        let buf = data_packet(b"hello");
        let p = decode(&buf).unwrap();
        assert_eq!(p.ty, PacketType::Data);
        assert_eq!(p.hdr.seq, 42);
        assert_eq!(p.hdr.sack, 0b101);
        assert_eq!(p.data.tag, 0xABCD);
        assert_eq!(p.payload, Bytes::One(b"hello"));
    }

    #[test]
    fn every_bit_flip_is_detected() {
        let buf = data_packet(b"some payload bytes");
        for i in 0..buf.len() * 8 {
            let mut b = buf.clone();
            b[i / 8] ^= 1 << (i % 8);
            assert!(decode(&b).is_err(), "flip of bit {i} not detected");
        }
    }

    #[test]
    fn truncations_rejected() {
        let buf = data_packet(b"abc");
        for n in 0..buf.len() {
            assert!(decode(&buf[..n]).is_err());
        }
    }

    #[test]
    fn control_roundtrip() {
        let mut buf = [0u8; MAX_CTRL_LEN];
        let h = Header {
            ty: PacketType::Cts as u8,
            flags: flags::ACK,
            seq: 1,
            ..Default::default()
        };
        encode_header(&mut buf, &h);
        encode_ctrl_ext(&mut buf, &CtrlExt { a: 11, b: 22 });
        let n = seal(&mut buf, COMMON_LEN + CTRL_EXT_LEN);
        let p = decode(&buf[..n]).unwrap();
        assert_eq!(p.ty, PacketType::Cts);
        assert_eq!(p.ctrl, CtrlExt { a: 11, b: 22 });
    }

    /// A rendezvous request carries a pull offer of at most
    /// [`MAX_PULL_OFFER`] bytes whatever `total_len` says (§2.2, §6.7); a
    /// CTS may have flag PULLED; flags 10–11 stay reserved.
    #[test]
    fn pull_offer_and_pulled_flag() {
        let rts = |n: usize, total: u32| {
            let mut buf = vec![0u8; DATA_OVERHEAD + n];
            let h = Header {
                ty: PacketType::Data as u8,
                flags: flags::ACK | flags::FIRST | flags::RNDV,
                payload_len: n as u16,
                ..Default::default()
            };
            encode_header(&mut buf, &h);
            let ext = DataExt {
                total_len: total,
                ..Default::default()
            };
            encode_data_ext(&mut buf, &ext);
            seal(&mut buf, DATA_HDR_LEN + n);
            buf
        };
        assert!(decode(&rts(0, 1 << 20)).is_ok());
        assert_eq!(decode(&rts(48, 1 << 20)).unwrap().payload.len(), 48);
        assert!(decode(&rts(48, 10)).is_ok());
        assert!(decode(&rts(MAX_PULL_OFFER, 1 << 20)).is_ok());
        assert_eq!(
            decode(&rts(MAX_PULL_OFFER + 1, 1 << 20)),
            Err(WireError::Malformed)
        );
        for (bit, ok) in [(flags::PULLED, true), (1 << 10, false), (1 << 11, false)] {
            let mut buf = [0u8; MAX_CTRL_LEN];
            let h = Header {
                ty: PacketType::Cts as u8,
                flags: flags::ACK | bit,
                seq: 1,
                ..Default::default()
            };
            encode_header(&mut buf, &h);
            encode_ctrl_ext(&mut buf, &CtrlExt { a: 1, b: 2 });
            let n = seal(&mut buf, COMMON_LEN + CTRL_EXT_LEN);
            assert_eq!(decode(&buf[..n]).is_ok(), ok, "flag {bit:#x}");
        }
    }

    /// Every way of cutting a datagram in two or three pieces (through the
    /// header, the payload, the CRC trailer; empty pieces too) decodes to
    /// the same packet as the whole, and corruption is still caught.
    #[test]
    fn pieces_decode_like_the_whole() {
        let payload: Vec<u8> = (0..40u8).collect();
        let buf = data_packet(&payload);
        let whole = decode(&buf).unwrap();
        let n = buf.len();
        for a in 0..=n {
            for b in (a..=n).step_by(7).chain([n]) {
                let pieces = [&buf[..a], &buf[a..b], &buf[b..]];
                let p = decode_pieces(&pieces).unwrap();
                assert_eq!(p, whole, "cut at {a}, {b}");
                assert_eq!(p.payload.to_vec(), payload);
                let mut corrupt = buf.clone();
                corrupt[(a + b) / 2 % n] ^= 0x10;
                let pieces = [&corrupt[..a], &corrupt[a..b], &corrupt[b..]];
                assert!(decode_pieces(&pieces).is_err(), "cut at {a}, {b}");
            }
        }
        for k in 0..n {
            assert!(decode_pieces(&[&buf[..k]]).is_err(), "truncated to {k}");
        }
    }

    #[test]
    fn bytes_in_pieces_copy_out_by_range() {
        let pieces: [&[u8]; 4] = [b"abc", b"", b"defg", b"hij"];
        let b = Bytes::Pieces {
            pieces: &pieces,
            skip: 2,
            len: 7,
        };
        assert_eq!(b.to_vec(), b"cdefghi");
        let mut got = Vec::new();
        b.for_each(0, 4, |off, p| got.push((off, p.to_vec())));
        assert_eq!(got, vec![(0, b"c".to_vec()), (1, b"def".to_vec())]);
        got.clear();
        b.for_each(4, 10, |off, p| got.push((off, p.to_vec())));
        assert_eq!(got, vec![(0, b"g".to_vec()), (1, b"hi".to_vec())]);
        let mut short = [0u8; 3];
        assert_eq!(b.copy_to(&mut short), 3);
        assert_eq!(&short, b"cde");
        b.for_each(7, 5, |_, _| panic!("nothing past the end"));
    }

    #[test]
    fn seq_wraps() {
        assert_eq!(seq_diff(1, u32::MAX), 2);
        assert_eq!(seq_diff(u32::MAX, 1), -2);
    }
}
