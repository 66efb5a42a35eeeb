//! The authentication trailer and the handshake extension (PROTOCOL.md §11).
//!
//! A datagram with flag AUTH ends in `nonce field ‖ tag (16 B)` instead of
//! the CRC-32C: AES-128-GCM (NIST SP 800-38D) under the key of its class —
//! a session key per direction for session packets, the job's handshake
//! key for HELLO, HELLO_ACK, RESET and CHALLENGE. The bytes before the
//! payload are associated data; the payload of a DATA packet with flag ENC
//! is encrypted, otherwise it is associated data too. The GCM nonce is
//! carried in the nonce field: an 8-byte counter for session packets (the
//! key is unique to the session and direction), a 4-byte sender salt and
//! an 8-byte counter for handshake packets (one key for the whole job).
//!
//! The AEAD is AWS-LC's through `aws-lc-rs` (constant time; AES-NI, CLMUL
//! and VAES/VPCLMULQDQ with AVX2 or AVX-512 where the CPU has them). The
//! tag subsumes the CRC: a datagram that verifies is intact.

use aws_lc_rs::aead::{AES_128_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};

use super::{COMMON_LEN, CTRL_EXT_LEN, DATA_HDR_LEN, PacketType, WireError, flags};

/// Bytes of the GCM tag.
pub const TAG_LEN: usize = 16;
/// Nonce field of a session packet: the sender's 64-bit counter for the
/// session and direction.
pub const SESSION_NONCE_LEN: usize = 8;
/// Nonce field of a handshake packet: the sender's 32-bit salt, then its
/// 64-bit handshake counter.
pub const HANDSHAKE_NONCE_LEN: usize = 12;
/// Bytes of the handshake extension (§11.4).
pub const HS_EXT_LEN: usize = 24;
/// Per-packet overhead of an authenticated DATA packet (header + trailer).
pub const DATA_OVERHEAD: usize = DATA_HDR_LEN + SESSION_NONCE_LEN + TAG_LEN;
/// Longest authenticated control datagram (a handshake packet).
pub const MAX_CTRL_LEN: usize =
    COMMON_LEN + CTRL_EXT_LEN + HS_EXT_LEN + HANDSHAKE_NONCE_LEN + TAG_LEN;
/// Length of an AES-128 key.
pub const KEY_LEN: usize = 16;

/// The handshake extension of an authenticated HELLO, HELLO_ACK, RESET or
/// CHALLENGE (§11.4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HandshakeExt {
    /// The receiver's incarnation as the sender knows it (0 = unknown).
    pub dst_inc: u32,
    /// Reserved, 0.
    pub reserved: u32,
    /// CHALLENGE: the cookie; HELLO: the cookie echoed (zero if none).
    pub cookie: [u8; 16],
}

impl HandshakeExt {
    pub(crate) fn read(b: &[u8]) -> Self {
        let mut cookie = [0u8; 16];
        cookie.copy_from_slice(&b[8..24]);
        HandshakeExt {
            dst_inc: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            reserved: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            cookie,
        }
    }

    /// Write it at `buf[COMMON_LEN + CTRL_EXT_LEN..]`.
    pub fn write(&self, buf: &mut [u8]) {
        let b = &mut buf[COMMON_LEN + CTRL_EXT_LEN..COMMON_LEN + CTRL_EXT_LEN + HS_EXT_LEN];
        b[0..4].copy_from_slice(&self.dst_inc.to_le_bytes());
        b[4..8].copy_from_slice(&self.reserved.to_le_bytes());
        b[8..24].copy_from_slice(&self.cookie);
    }
}

/// An AES-128-GCM key.
pub struct Key(LessSafeKey);

impl core::fmt::Debug for Key {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Key {
    /// The key of `bytes`.
    pub fn new(bytes: &[u8; KEY_LEN]) -> Self {
        // AES-128 accepts every 16-byte key: the error cannot happen.
        let k = UnboundKey::new(&AES_128_GCM, bytes)
            .unwrap_or_else(|_| unreachable!("AES-128-GCM takes any 16-byte key"));
        Key(LessSafeKey::new(k))
    }
}

/// The nonce field of a datagram: what goes after its body, and the GCM
/// nonce it stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NonceField {
    /// Session packet: the counter of the session's direction.
    Session(u64),
    /// Handshake packet: the sender's salt and handshake counter.
    Handshake { salt: u32, counter: u64 },
}

impl NonceField {
    /// Bytes it takes on the wire.
    #[inline]
    pub fn len(self) -> usize {
        match self {
            NonceField::Session(_) => SESSION_NONCE_LEN,
            NonceField::Handshake { .. } => HANDSHAKE_NONCE_LEN,
        }
    }

    /// Never empty (clippy's companion of `len`).
    #[inline]
    pub fn is_empty(self) -> bool {
        false
    }

    fn write(self, b: &mut [u8]) {
        match self {
            NonceField::Session(c) => b[..8].copy_from_slice(&c.to_le_bytes()),
            NonceField::Handshake { salt, counter } => {
                b[..4].copy_from_slice(&salt.to_le_bytes());
                b[4..12].copy_from_slice(&counter.to_le_bytes());
            }
        }
    }

    fn read(b: &[u8], handshake: bool) -> Self {
        let mut c = [0u8; 8];
        if handshake {
            c.copy_from_slice(&b[4..12]);
            NonceField::Handshake {
                salt: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
                counter: u64::from_le_bytes(c),
            }
        } else {
            c.copy_from_slice(&b[..8]);
            NonceField::Session(u64::from_le_bytes(c))
        }
    }

    /// The 96-bit GCM nonce: the field's bytes, zero-padded for a session
    /// counter.
    fn nonce(self) -> Nonce {
        let mut n = [0u8; NONCE_LEN];
        self.write(&mut n);
        Nonce::assume_unique_for_key(n)
    }
}

/// Where the associated data ends: at the payload of a DATA packet whose
/// payload is encrypted, else at the end of the body.
#[inline]
fn aad_end(buf: &[u8], body_len: usize) -> usize {
    let fl = u16::from_le_bytes([buf[2], buf[3]]);
    if buf[1] == PacketType::Data as u8 && fl & flags::ENC != 0 {
        DATA_HDR_LEN.min(body_len)
    } else if buf[1] == PacketType::Pack as u8 && fl & flags::ENC != 0 {
        // Records and their messages are all payload (§6.8).
        COMMON_LEN.min(body_len)
    } else {
        body_len
    }
}

/// Seal the datagram whose body (header, extensions, payload) is
/// `buf[..body_len]`: write the nonce field and the tag after it, and
/// encrypt the payload if the header says ENC. The header must already
/// carry AUTH. Returns the datagram's length.
pub fn seal(key: &Key, buf: &mut [u8], body_len: usize, nonce: NonceField) -> usize {
    let n_end = body_len + nonce.len();
    nonce.write(&mut buf[body_len..n_end]);
    let split = aad_end(buf, body_len);
    let (aad, rest) = buf.split_at_mut(split);
    let in_out = &mut rest[..body_len - split];
    // Sealing fails only for inputs beyond GCM's 2^36-byte limit.
    let tag = key
        .0
        .seal_in_place_separate_tag(nonce.nonce(), Aad::from(&*aad), in_out)
        .map_or([0u8; TAG_LEN], |t| {
            let mut b = [0u8; TAG_LEN];
            b.copy_from_slice(t.as_ref());
            b
        });
    buf[n_end..n_end + TAG_LEN].copy_from_slice(&tag);
    n_end + TAG_LEN
}

/// The nonce field of the authenticated datagram `buf` (of a type sealed
/// with a handshake key if `handshake`), and its body length; `None` when
/// it is too short to hold one.
pub fn nonce_of(buf: &[u8], handshake: bool) -> Option<(NonceField, usize)> {
    let nlen = if handshake {
        HANDSHAKE_NONCE_LEN
    } else {
        SESSION_NONCE_LEN
    };
    let body_len = buf.len().checked_sub(nlen + TAG_LEN)?;
    if body_len < COMMON_LEN {
        return None;
    }
    Some((NonceField::read(&buf[body_len..], handshake), body_len))
}

/// Verify the authenticated datagram `buf` under `key` and decrypt its
/// payload in place. Returns the body length (the bytes a parser reads);
/// [`WireError::Auth`] when the tag does not verify, and then the payload
/// bytes are not to be used.
pub fn open(key: &Key, buf: &mut [u8], handshake: bool) -> Result<usize, WireError> {
    let (nonce, body_len) = nonce_of(buf, handshake).ok_or(WireError::Truncated)?;
    let t_at = body_len + nonce.len();
    let mut tag = [0u8; TAG_LEN];
    tag.copy_from_slice(&buf[t_at..t_at + TAG_LEN]);
    let split = aad_end(buf, body_len);
    let (aad, rest) = buf.split_at_mut(split);
    let in_out = &mut rest[..body_len - split];
    key.0
        .open_in_place_separate_tag(nonce.nonce(), Aad::from(&*aad), &tag, in_out)
        .map_err(|_| WireError::Auth)?;
    Ok(body_len)
}

#[cfg(test)]
mod tests {
    use super::super::{Header, decode_authenticated, encode_header};
    use super::*;

    fn sealed_data(key: &Key, enc: bool, payload: &[u8]) -> Vec<u8> {
        let mut buf = vec![0u8; DATA_OVERHEAD + payload.len()];
        let mut fl = flags::AUTH | flags::FIRST | flags::ACK;
        if enc {
            fl |= flags::ENC;
        }
        let h = Header {
            ty: PacketType::Data as u8,
            flags: fl,
            src_sess: 1,
            dst_sess: 2,
            payload_len: payload.len() as u16,
            ..Default::default()
        };
        encode_header(&mut buf, &h);
        super::super::encode_data_ext(
            &mut buf,
            &super::super::DataExt {
                total_len: payload.len() as u32,
                ..Default::default()
            },
        );
        buf[DATA_HDR_LEN..DATA_HDR_LEN + payload.len()].copy_from_slice(payload);
        let n = seal(
            key,
            &mut buf,
            DATA_HDR_LEN + payload.len(),
            NonceField::Session(9),
        );
        buf.truncate(n);
        buf
    }

    #[test]
    fn sealed_roundtrip_and_every_bit_flip_rejected() {
        let key = Key::new(&[3; KEY_LEN]);
        for enc in [false, true] {
            let payload = b"authenticated payload bytes";
            let dg = sealed_data(&key, enc, payload);
            assert_eq!(
                dg[DATA_HDR_LEN..DATA_HDR_LEN + payload.len()] != payload[..],
                enc,
                "encrypted iff ENC"
            );
            let mut b = dg.clone();
            let body = open(&key, &mut b, false).unwrap();
            let p = decode_authenticated(&b[..body]).unwrap();
            assert_eq!(p.payload.to_vec(), payload);
            for i in 0..dg.len() * 8 {
                let mut b = dg.clone();
                b[i / 8] ^= 1 << (i % 8);
                assert!(open(&key, &mut b, false).is_err(), "flip of bit {i}");
            }
            let other = Key::new(&[4; KEY_LEN]);
            assert_eq!(open(&other, &mut dg.clone(), false), Err(WireError::Auth));
            for n in 0..dg.len() {
                assert!(open(&key, &mut dg[..n].to_vec(), false).is_err());
            }
        }
    }
}
