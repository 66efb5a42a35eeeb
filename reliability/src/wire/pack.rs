//! PACK datagrams (PROTOCOL.md §6.8): several whole small eager messages
//! back to back in one datagram, each a record that stands for one DATA
//! packet with its own sequence number. Packing saves the per-datagram work
//! (header, CRC or seal, one frame, one kick, the receiver's per-datagram
//! path) a window of small sends otherwise pays once per message.
//!
//! Record layout (all little-endian), then `len` bytes of message:
//!
//! | offset | size | field |
//! | ---: | ---: | --- |
//! | 0 | 2 | `flags`: FIRST (always), TAGGED, CQ_DATA, DC, AR |
//! | 2 | 2 | `len`: the message length (= its payload) |
//! | 4 | 4 | `msg_id` |
//! | 8 | 8 | `tag` |
//! | 16 | 8 | `data` |

use super::{Bytes, DataExt, WireError, flags};

/// Size of a record header.
pub const RECORD_LEN: usize = 24;

/// Flags a record may carry: those of a whole eager message (§6.8).
pub const RECORD_FLAGS: u16 = flags::FIRST | flags::TAGGED | flags::CQ_DATA | flags::DC | flags::AR;

/// Flags the PACK datagram's common header may carry: its ack fields' and
/// its seal's (the message flags are per record).
pub const PACK_FLAGS: u16 = flags::ACK | flags::AUTH | flags::ENC | flags::ECE | flags::HOLD;

/// HELLO / HELLO_ACK `sack` field (unused there otherwise): feature bits
/// the sender accepts (§4.1). Bit 0: PACK datagrams.
pub mod features {
    /// The sender of this HELLO or HELLO_ACK accepts PACK datagrams.
    pub const PACK: u64 = 1 << 0;
}

/// One record's header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Record {
    /// Message flags ([`RECORD_FLAGS`]).
    pub flags: u16,
    /// Message length.
    pub len: u16,
    /// Message number.
    pub msg_id: u32,
    /// Tag.
    pub tag: u64,
    /// Remote CQ data.
    pub data: u64,
}

impl Record {
    /// Write the record header into `buf[..RECORD_LEN]`.
    pub fn encode(&self, buf: &mut [u8]) {
        let b = &mut buf[..RECORD_LEN];
        b[0..2].copy_from_slice(&self.flags.to_le_bytes());
        b[2..4].copy_from_slice(&self.len.to_le_bytes());
        b[4..8].copy_from_slice(&self.msg_id.to_le_bytes());
        b[8..16].copy_from_slice(&self.tag.to_le_bytes());
        b[16..24].copy_from_slice(&self.data.to_le_bytes());
    }

    fn read(b: &[u8; RECORD_LEN]) -> Self {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[8..16]);
        let tag = u64::from_le_bytes(w);
        w.copy_from_slice(&b[16..24]);
        Record {
            flags: u16::from_le_bytes([b[0], b[1]]),
            len: u16::from_le_bytes([b[2], b[3]]),
            msg_id: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            tag,
            data: u64::from_le_bytes(w),
        }
    }

    /// The DATA extension of the packet this record stands for.
    pub fn data_ext(&self) -> DataExt {
        DataExt {
            msg_id: self.msg_id,
            total_len: u32::from(self.len),
            offset: 0,
            tag: self.tag,
            data: self.data,
        }
    }
}

/// The records of a PACK payload, in order, with their messages' bytes.
/// Yields nothing more after the first malformed record; check the whole
/// payload with [`validate`] before acting on any record.
pub struct Records<'a> {
    body: Bytes<'a>,
    at: usize,
}

impl<'a> Records<'a> {
    pub fn new(body: Bytes<'a>) -> Self {
        Records { body, at: 0 }
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<(Record, Bytes<'a>), WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        let left = self.body.len().checked_sub(self.at)?;
        if left == 0 {
            return None;
        }
        let mut h = [0u8; RECORD_LEN];
        if left < RECORD_LEN {
            self.at = self.body.len();
            return Some(Err(WireError::Malformed));
        }
        self.body.sub(self.at, RECORD_LEN).copy_to(&mut h);
        let r = Record::read(&h);
        let len = usize::from(r.len);
        if left - RECORD_LEN < len || r.flags & !RECORD_FLAGS != 0 || r.flags & flags::FIRST == 0 {
            self.at = self.body.len();
            return Some(Err(WireError::Malformed));
        }
        let payload = self.body.sub(self.at + RECORD_LEN, len);
        self.at += RECORD_LEN + len;
        Some(Ok((r, payload)))
    }
}

/// The number of records of a PACK payload, or `Err` if any is malformed
/// (truncated, unknown or missing flags) or there is none: such a datagram
/// is dropped whole (§6.8).
pub fn validate(body: Bytes<'_>) -> Result<usize, WireError> {
    let mut n = 0;
    for r in Records::new(body) {
        r?;
        n += 1;
    }
    if n == 0 {
        Err(WireError::Malformed)
    } else {
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(recs: &[(Record, &[u8])]) -> Vec<u8> {
        let mut v = Vec::new();
        for (r, p) in recs {
            let mut h = [0u8; RECORD_LEN];
            r.encode(&mut h);
            v.extend_from_slice(&h);
            v.extend_from_slice(p);
        }
        v
    }

    fn rec(msg_id: u32, len: u16) -> Record {
        Record {
            flags: flags::FIRST | flags::TAGGED,
            len,
            msg_id,
            tag: 0x55 + u64::from(msg_id),
            data: 7,
        }
    }

    #[test]
    fn records_roundtrip() {
        let b = body(&[(rec(1, 3), b"abc"), (rec(2, 0), b""), (rec(3, 2), b"xy")]);
        assert_eq!(validate(Bytes::One(&b)), Ok(3));
        let got: Vec<_> = Records::new(Bytes::One(&b))
            .map(|r| r.map(|(h, p)| (h.msg_id, p.to_vec())))
            .collect();
        assert_eq!(
            got,
            vec![
                Ok((1, b"abc".to_vec())),
                Ok((2, Vec::new())),
                Ok((3, b"xy".to_vec()))
            ]
        );
    }

    #[test]
    fn every_truncation_and_bad_flag_is_refused() {
        let b = body(&[(rec(1, 3), b"abc"), (rec(2, 2), b"xy")]);
        let whole_first = RECORD_LEN + 3;
        for n in 0..b.len() {
            let v = validate(Bytes::One(&b[..n]));
            if n == whole_first {
                assert_eq!(v, Ok(1));
            } else {
                assert_eq!(v, Err(WireError::Malformed), "cut at {n}");
            }
        }
        for bad in [0, flags::RNDV | flags::FIRST, flags::FIRST | flags::ACK] {
            let mut r = rec(1, 1);
            r.flags = bad;
            assert!(validate(Bytes::One(&body(&[(r, b"z")]))).is_err());
        }
    }

    #[test]
    fn records_read_across_pieces() {
        let b = body(&[(rec(1, 5), b"hello"), (rec(2, 4), b"pack")]);
        for cut in 0..b.len() {
            let pieces = [&b[..cut], &b[cut..]];
            let bytes = Bytes::Pieces {
                pieces: &pieces,
                skip: 0,
                len: b.len(),
            };
            let got: Vec<_> = Records::new(bytes)
                .map(|r| r.map(|(h, p)| (h.msg_id, p.to_vec())))
                .collect();
            assert_eq!(
                got,
                vec![Ok((1, b"hello".to_vec())), Ok((2, b"pack".to_vec()))]
            );
        }
    }
}
