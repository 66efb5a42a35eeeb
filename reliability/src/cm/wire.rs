//! Connection-management datagrams (PROTOCOL.md §9.1): the common header,
//! a 16-byte CM extension, the application's connection data, the CRC-32C.

use crate::wire::{self, COMMON_LEN, Header, TRAILER_LEN, VERSION, WireError};

/// Bytes of application data a CM message carries at most (fi_cm(3)
/// `FI_OPT_CM_DATA_SIZE`).
pub const CM_DATA_SIZE: usize = 256;
/// Size of the CM extension.
pub const CM_EXT_LEN: usize = 16;
/// Bytes before the connection data.
pub const CM_HDR_LEN: usize = COMMON_LEN + CM_EXT_LEN;
/// Largest CM datagram.
pub const MAX_CM_LEN: usize = CM_HDR_LEN + CM_DATA_SIZE + TRAILER_LEN;

/// CM packet types (byte 1), inside the range 24–31 kept for connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum CmType {
    /// Connecting endpoint → listener: asks for a connection (FI_CONNREQ).
    ConnReq = 24,
    /// Accepting endpoint → connecting endpoint: the connection is accepted
    /// and this is the address to talk to from now on.
    Accept = 25,
    /// Listener → connecting endpoint: the request was refused.
    Reject = 26,
    /// Connecting endpoint → accepting endpoint: the accept arrived.
    Confirm = 27,
    /// Either side: the connection is over (fi_shutdown, fi_close).
    Disconnect = 28,
    /// Answers DISCONNECT.
    DisconnectAck = 29,
}

impl CmType {
    fn from_u8(v: u8) -> Option<CmType> {
        Some(match v {
            24 => CmType::ConnReq,
            25 => CmType::Accept,
            26 => CmType::Reject,
            27 => CmType::Confirm,
            28 => CmType::Disconnect,
            29 => CmType::DisconnectAck,
            _ => return None,
        })
    }
}

/// First and last packet type of the connection-management range.
pub const CM_TYPES: std::ops::RangeInclusive<u8> = 24..=31;

/// Whether a datagram (its first bytes suffice) claims to be a CM packet:
/// the receive path routes those here and the rest to the engine.
#[inline]
pub fn is_cm(first: &[u8]) -> bool {
    first.len() >= 2 && first[0] == VERSION && CM_TYPES.contains(&first[1])
}

/// A CM message: who sends it to whom (connection ids) and what it carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmMsg<'a> {
    pub ty: CmType,
    /// The sender's connection id (0 in REJECT: a listener has none).
    pub src_id: u32,
    /// The receiver's connection id (0 in CONN_REQ: not known yet).
    pub dst_id: u32,
    /// The sending endpoint's incarnation (PROTOCOL.md §1).
    pub incarnation: u32,
    /// The sender's link-layer address (all zero: not stated), so that the
    /// receiver need not resolve it before answering.
    pub link: [u8; 6],
    /// Application data (fi_connect / fi_accept / fi_reject `param`).
    pub param: &'a [u8],
}

/// Encode `m` into `buf` (at least [`CM_HDR_LEN`] + data + 4 bytes);
/// returns the datagram length. `m.param` longer than [`CM_DATA_SIZE`] is
/// cut to it (callers refuse longer data before, fi_cm(3)).
pub fn encode(buf: &mut [u8], m: &CmMsg<'_>) -> usize {
    let param = &m.param[..m.param.len().min(CM_DATA_SIZE)];
    let h = Header {
        ty: m.ty as u8,
        src_sess: m.src_id,
        dst_sess: m.dst_id,
        payload_len: param.len() as u16,
        ..Header::default()
    };
    wire::encode_header(buf, &h);
    let e = &mut buf[COMMON_LEN..CM_HDR_LEN];
    e[0..4].copy_from_slice(&m.incarnation.to_le_bytes());
    e[4..8].fill(0);
    e[8..14].copy_from_slice(&m.link);
    e[14..16].fill(0);
    buf[CM_HDR_LEN..CM_HDR_LEN + param.len()].copy_from_slice(param);
    wire::seal(buf, CM_HDR_LEN + param.len())
}

/// Decode and verify a CM datagram: CRC, version, type, no flags, reserved
/// fields zero, length exactly header + data + CRC.
pub fn decode(buf: &[u8]) -> Result<CmMsg<'_>, WireError> {
    if buf.len() < CM_HDR_LEN + TRAILER_LEN {
        return Err(WireError::Truncated);
    }
    let body_end = buf.len() - TRAILER_LEN;
    let rd32 = |o: usize| u32::from_le_bytes([buf[o], buf[o + 1], buf[o + 2], buf[o + 3]]);
    if crate::crc::crc32c(&buf[..body_end]) != rd32(body_end) {
        return Err(WireError::Checksum);
    }
    if buf[0] != VERSION {
        return Err(WireError::Version);
    }
    let ty = CmType::from_u8(buf[1]).ok_or(WireError::Type)?;
    let flags = u16::from_le_bytes([buf[2], buf[3]]);
    let len = usize::from(u16::from_le_bytes([buf[22], buf[23]]));
    let reserved_zero = flags == 0
        && buf[12..22].iter().all(|b| *b == 0)
        && buf[24..32].iter().all(|b| *b == 0)
        && buf[36..40].iter().all(|b| *b == 0)
        && buf[46..48].iter().all(|b| *b == 0);
    if !reserved_zero || len > CM_DATA_SIZE || body_end != CM_HDR_LEN + len {
        return Err(WireError::Malformed);
    }
    let mut link = [0u8; 6];
    link.copy_from_slice(&buf[40..46]);
    Ok(CmMsg {
        ty,
        src_id: rd32(4),
        dst_id: rd32(8),
        incarnation: rd32(32),
        link,
        param: &buf[CM_HDR_LEN..body_end],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(param: &[u8]) -> Vec<u8> {
        let mut buf = vec![0u8; MAX_CM_LEN];
        let n = encode(
            &mut buf,
            &CmMsg {
                ty: CmType::Accept,
                src_id: 7,
                dst_id: 9,
                incarnation: 0xABCD,
                link: [2, 0, 0, 0, 0, 1],
                param,
            },
        );
        buf.truncate(n);
        buf
    }

    #[test]
    fn roundtrip() {
        let b = sample(b"hello");
        assert!(is_cm(&b));
        let m = decode(&b).unwrap();
        assert_eq!(m.ty, CmType::Accept);
        assert_eq!((m.src_id, m.dst_id, m.incarnation), (7, 9, 0xABCD));
        assert_eq!(m.link, [2, 0, 0, 0, 0, 1]);
        assert_eq!(m.param, b"hello");
        assert_eq!(b.len(), CM_HDR_LEN + 5 + TRAILER_LEN);
    }

    #[test]
    fn every_bit_flip_and_truncation_is_caught() {
        let b = sample(&[0x5A; 40]);
        for i in 0..b.len() * 8 {
            let mut c = b.clone();
            c[i / 8] ^= 1 << (i % 8);
            assert!(decode(&c).is_err(), "flip of bit {i}");
        }
        for n in 0..b.len() {
            assert!(decode(&b[..n]).is_err(), "cut to {n}");
        }
    }

    #[test]
    fn data_is_bounded() {
        let b = sample(&[1; CM_DATA_SIZE + 10]);
        assert_eq!(decode(&b).unwrap().param.len(), CM_DATA_SIZE);
    }

    #[test]
    fn engine_packets_are_not_cm() {
        let mut buf = [0u8; wire::MAX_CTRL_LEN];
        let n = wire::encode_ctrl(
            &mut buf,
            &Header {
                ty: wire::PacketType::Hello as u8,
                src_sess: 1,
                ..Header::default()
            },
            &wire::CtrlExt { a: 1, b: 0 },
        );
        assert!(!is_cm(&buf[..n]));
        assert!(decode(&buf[..n]).is_err());
        // And the engine refuses CM packets.
        assert!(wire::decode(&sample(b"x")).is_err());
    }
}
