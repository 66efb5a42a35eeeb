//! The RMA and atomic packets (PROTOCOL.md §8): WRITE, READ_REQ, READ_RESP,
//! ATOMIC, ATOMIC_RESP and RMA_RESP share one 40-byte extension after the
//! common header, so every one of them names its operation (`msg_id`), the
//! remote region (`key`, `addr`) and its byte range (`total_len`, `offset`).

use super::{Bytes, COMMON_LEN, Header, PacketType, WireError, rd32, rd64};

/// Size of the RMA extension.
pub const RMA_EXT_LEN: usize = 40;
/// Bytes before the payload of an RMA packet.
pub const RMA_HDR_LEN: usize = COMMON_LEN + RMA_EXT_LEN;
/// Per-packet overhead of an RMA packet (header + CRC trailer).
pub const RMA_OVERHEAD: usize = RMA_HDR_LEN + super::TRAILER_LEN;
/// Largest operand payload of one ATOMIC packet (operands, then compare
/// values), and largest result an ATOMIC_RESP carries: an atomic travels in
/// one datagram each way (§8.4).
pub const MAX_ATOMIC_BYTES: usize = 1024;

/// Status byte of a response (§8.5): 0 = executed.
pub mod status {
    /// Executed.
    pub const OK: u8 = 0;
    /// No registration has this key.
    pub const KEY: u8 = 1;
    /// The range is not inside the registration.
    pub const RANGE: u8 = 2;
    /// The registration does not allow this access.
    pub const ACCESS: u8 = 3;
    /// The target cannot execute it (unknown atomic operation or datatype,
    /// lengths that do not fit them).
    pub const INVALID: u8 = 4;
    /// Largest defined value.
    pub const MAX: u8 = INVALID;
}

/// The RMA extension (§8.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RmaExt {
    /// The operation: the initiator's message number (responses repeat the
    /// request's).
    pub msg_id: u32,
    /// WRITE, READ_REQ, READ_RESP: bytes of the whole transfer; ATOMIC,
    /// ATOMIC_RESP: bytes of the result (0 for an atomic without fetch).
    pub total_len: u32,
    /// WRITE, READ_RESP: offset of this payload in the transfer.
    pub offset: u32,
    /// ATOMIC: the operation (`enum fi_op`).
    pub op: u8,
    /// ATOMIC: the datatype (`enum fi_datatype`).
    pub datatype: u8,
    /// Responses: [`status`].
    pub status: u8,
    /// Target's registration key.
    pub key: u64,
    /// Target address (as the registration's mode names it).
    pub addr: u64,
    /// WRITE with CQ_DATA: remote CQ data.
    pub data: u64,
}

/// Whether `ty` is one of this section's types.
pub fn is_rma(ty: PacketType) -> bool {
    matches!(
        ty,
        PacketType::Write
            | PacketType::ReadReq
            | PacketType::ReadResp
            | PacketType::Atomic
            | PacketType::AtomicResp
            | PacketType::RmaResp
    )
}

/// Whether `datagram` (one this side built) is the READ_RESP that ends its
/// read's response (§8.3): its payload reaches `total_len` — the last
/// segment, or the one packet of a refusal or a zero-length read. Reads
/// the headers only.
pub fn ends_read_response(datagram: &[u8]) -> bool {
    if datagram.len() < RMA_HDR_LEN || datagram[1] != PacketType::ReadResp as u8 {
        return false;
    }
    let payload = u64::from(super::rd16(datagram, 22));
    let total = u64::from(rd32(datagram, COMMON_LEN + 4));
    let offset = u64::from(rd32(datagram, COMMON_LEN + 8));
    offset + payload >= total
}

/// Write the RMA extension into `buf[COMMON_LEN..RMA_HDR_LEN]`.
pub fn encode_rma_ext(buf: &mut [u8], r: &RmaExt) {
    let b = &mut buf[COMMON_LEN..RMA_HDR_LEN];
    b[0..4].copy_from_slice(&r.msg_id.to_le_bytes());
    b[4..8].copy_from_slice(&r.total_len.to_le_bytes());
    b[8..12].copy_from_slice(&r.offset.to_le_bytes());
    b[12] = r.op;
    b[13] = r.datatype;
    b[14] = r.status;
    b[15] = 0;
    b[16..24].copy_from_slice(&r.key.to_le_bytes());
    b[24..32].copy_from_slice(&r.addr.to_le_bytes());
    b[32..40].copy_from_slice(&r.data.to_le_bytes());
}

/// Decode the extension of an RMA packet of type `ty` whose body is
/// `body_end` bytes (`buf` holds at least its first [`RMA_HDR_LEN`]), and
/// check the lengths its type allows (§8.1).
pub(super) fn parse_rma<'a>(
    ty: PacketType,
    buf: &[u8],
    hdr: &Header,
    body_end: usize,
    payload: impl FnOnce(usize, usize) -> Bytes<'a>,
) -> Result<(RmaExt, Bytes<'a>), WireError> {
    if body_end < RMA_HDR_LEN {
        return Err(WireError::Truncated);
    }
    let plen = usize::from(hdr.payload_len);
    if body_end - RMA_HDR_LEN != plen {
        return Err(WireError::Malformed);
    }
    if buf[COMMON_LEN + 15] != 0 {
        return Err(WireError::Malformed);
    }
    let r = RmaExt {
        msg_id: rd32(buf, 32),
        total_len: rd32(buf, 36),
        offset: rd32(buf, 40),
        op: buf[44],
        datatype: buf[45],
        status: buf[46],
        key: rd64(buf, 48),
        addr: rd64(buf, 56),
        data: rd64(buf, 64),
    };
    let in_range = u64::from(r.offset) + plen as u64 <= u64::from(r.total_len);
    let ok = match ty {
        // Segments of a transfer: inside it.
        PacketType::Write => in_range && r.status == 0,
        PacketType::ReadResp => in_range && r.status <= status::MAX,
        // Requests and notices carry no payload.
        PacketType::ReadReq => plen == 0 && r.offset == 0 && r.status == 0,
        PacketType::RmaResp => plen == 0 && r.offset == 0 && r.status <= status::MAX,
        // An atomic's operands, and its result, fit in one datagram.
        PacketType::Atomic => {
            plen <= MAX_ATOMIC_BYTES
                && r.total_len as usize <= MAX_ATOMIC_BYTES
                && r.offset == 0
                && r.status == 0
        }
        PacketType::AtomicResp => {
            r.offset == 0
                && r.status <= status::MAX
                && (plen == r.total_len as usize || (plen == 0 && r.status != status::OK))
        }
        _ => false,
    };
    if !ok {
        return Err(WireError::Malformed);
    }
    Ok((r, payload(RMA_HDR_LEN, body_end)))
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use super::*;

    fn packet(ty: PacketType, r: &RmaExt, payload: &[u8]) -> Vec<u8> {
        let mut buf = vec![0u8; RMA_OVERHEAD + payload.len()];
        let h = Header {
            ty: ty as u8,
            flags: flags::ACK,
            src_sess: 1,
            dst_sess: 2,
            seq: 3,
            payload_len: payload.len() as u16,
            ..Default::default()
        };
        encode_header(&mut buf, &h);
        encode_rma_ext(&mut buf, r);
        buf[RMA_HDR_LEN..RMA_HDR_LEN + payload.len()].copy_from_slice(payload);
        seal(&mut buf, RMA_HDR_LEN + payload.len());
        buf
    }

    #[test]
    fn the_last_segment_of_a_read_response_is_known_by_its_headers() {
        let seg = |ty, total_len, offset, n: usize| {
            let r = RmaExt {
                msg_id: 1,
                total_len,
                offset,
                ..Default::default()
            };
            packet(ty, &r, &vec![7u8; n])
        };
        assert!(!ends_read_response(&seg(
            PacketType::ReadResp,
            3000,
            0,
            1400
        )));
        assert!(!ends_read_response(&seg(
            PacketType::ReadResp,
            3000,
            1400,
            1400
        )));
        assert!(ends_read_response(&seg(
            PacketType::ReadResp,
            3000,
            2800,
            200
        )));
        // A refusal, a zero-length read: one packet without payload.
        assert!(ends_read_response(&seg(PacketType::ReadResp, 0, 0, 0)));
        // The write's last segment is not a read's.
        assert!(!ends_read_response(&seg(
            PacketType::Write,
            3000,
            2800,
            200
        )));
        assert!(!ends_read_response(&[]));
    }

    #[test]
    fn write_roundtrip_whole_and_in_pieces() {
        let r = RmaExt {
            msg_id: 7,
            total_len: 100,
            offset: 40,
            key: 0xABCD,
            addr: 0x7000_1000,
            data: 99,
            ..Default::default()
        };
        let buf = packet(PacketType::Write, &r, b"0123456789");
        let p = decode(&buf).unwrap();
        assert_eq!(p.ty, PacketType::Write);
        assert_eq!(p.rma, r);
        assert_eq!(p.payload.to_vec(), b"0123456789");
        for cut in 0..buf.len() {
            let pieces = [&buf[..cut], &buf[cut..]];
            let q = decode_pieces(&pieces).unwrap();
            assert_eq!(q.rma, r, "cut at {cut}");
            assert_eq!(q.payload.to_vec(), b"0123456789");
        }
    }

    #[test]
    fn inconsistent_lengths_are_malformed() {
        let seg = RmaExt {
            total_len: 5,
            offset: 0,
            ..Default::default()
        };
        // Payload beyond the transfer.
        assert!(decode(&packet(PacketType::Write, &seg, b"123456")).is_err());
        // A request with payload.
        assert!(decode(&packet(PacketType::ReadReq, &seg, b"1")).is_err());
        // A status out of range.
        let bad = RmaExt { status: 9, ..seg };
        assert!(decode(&packet(PacketType::RmaResp, &bad, b"")).is_err());
        // Atomic operands beyond one datagram's worth.
        let big = vec![0u8; MAX_ATOMIC_BYTES + 1];
        assert!(decode(&packet(PacketType::Atomic, &RmaExt::default(), &big)).is_err());
        // A fetch result whose length differs from what was asked.
        let fetch = RmaExt {
            total_len: 8,
            ..Default::default()
        };
        assert!(decode(&packet(PacketType::AtomicResp, &fetch, b"1234")).is_err());
        assert!(decode(&packet(PacketType::AtomicResp, &fetch, b"12345678")).is_ok());
    }

    #[test]
    fn every_bit_flip_is_detected() {
        let r = RmaExt {
            total_len: 8,
            op: 3,
            datatype: 9,
            key: 1,
            addr: 2,
            ..Default::default()
        };
        let buf = packet(PacketType::Atomic, &r, b"abcdefgh");
        for i in 0..buf.len() * 8 {
            let mut b = buf.clone();
            b[i / 8] ^= 1 << (i % 8);
            assert!(decode(&b).is_err(), "flip of bit {i} not detected");
        }
    }
}
