//! Bulk datagrams (PROTOCOL.md §2.5): the segments of large transfers, which
//! an endpoint may send to its peer's bulk port instead of its own port, so
//! that both kernels move them in 64 KiB batches (UDP segmentation offload on
//! send, receive offload on the way in) where the AF_XDP path would copy
//! every frame on its own. The datagrams are the protocol's, unchanged; only
//! the port they are addressed to differs, and what the kernel delivers is
//! cut back into them here ([`Segments`]).

use super::{COMMON_LEN, PacketType};

/// HELLO / HELLO_ACK feature bits (§4.1) about the bulk port.
pub mod features {
    /// The sender of this HELLO or HELLO_ACK takes bulk datagrams on the UDP
    /// port in [`PORT_SHIFT`]`..+16` of the same field.
    pub const BULK: u64 = 1 << 1;
    /// Where the bulk port sits in the feature field.
    pub const PORT_SHIFT: u32 = 16;

    /// The feature bits stating `port` (none for port 0).
    pub fn encode(port: u16) -> u64 {
        match port {
            0 => 0,
            p => BULK | (u64::from(p) << PORT_SHIFT),
        }
    }

    /// The bulk port a peer's feature field states (0: none).
    pub fn port(features: u64) -> u16 {
        if features & BULK == 0 {
            return 0;
        }
        (features >> PORT_SHIFT) as u16
    }
}

/// Offset of `total_len` in the DATA and RMA extensions (§2.2, §8.1).
const TOTAL_LEN_AT: usize = COMMON_LEN + 4;

/// The length of the transfer `datagram` is a segment of, when it carries
/// message or RMA payload: a DATA, WRITE or READ_RESP packet. `None` for
/// every other packet (control, acknowledgements, atomics, PACK), which stay
/// on the endpoint's own port. Reads the header only; a sender asks this of
/// the datagrams it built itself.
pub fn transfer_len(datagram: &[u8]) -> Option<u32> {
    let ty = *datagram.get(1)?;
    let carries_payload = ty == PacketType::Data as u8
        || ty == PacketType::Write as u8
        || ty == PacketType::ReadResp as u8;
    if !carries_payload {
        return None;
    }
    let b = datagram.get(TOTAL_LEN_AT..TOTAL_LEN_AT + 4)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// The datagrams of one receive of coalesced segments: the kernel's receive
/// offload (udp(7) `UDP_GRO`) joins datagrams of one flow into one read and
/// states their size; every one is `seg` bytes but the last, which may be
/// shorter. How the sender batched them does not matter: a read may hold
/// parts of several sends, or a send arrive in several reads. A `seg` of 0
/// (no size stated: nothing was joined) yields the whole read as one.
pub struct Segments<'a> {
    rest: &'a [u8],
    seg: usize,
}

impl<'a> Segments<'a> {
    pub fn new(read: &'a [u8], seg: usize) -> Segments<'a> {
        let seg = if seg == 0 { read.len() } else { seg };
        Segments { rest: read, seg }
    }
}

impl<'a> Iterator for Segments<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.rest.is_empty() {
            return None;
        }
        let n = self.seg.min(self.rest.len());
        let (one, rest) = self.rest.split_at(n);
        self.rest = rest;
        Some(one)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{self, DataExt, Header};

    fn data(total_len: u32, payload: usize) -> Vec<u8> {
        let mut buf = vec![0u8; wire::DATA_HDR_LEN + payload + wire::TRAILER_LEN];
        let h = Header {
            ty: PacketType::Data as u8,
            payload_len: payload as u16,
            ..Default::default()
        };
        wire::encode_header(&mut buf, &h);
        wire::encode_data_ext(
            &mut buf,
            &DataExt {
                total_len,
                ..Default::default()
            },
        );
        buf
    }

    #[test]
    fn the_bulk_port_round_trips_through_the_feature_field() {
        assert_eq!(features::port(features::encode(0)), 0);
        assert_eq!(features::encode(0), 0);
        for p in [1u16, 4791, 65535] {
            let f = features::encode(p) | crate::wire::pack::features::PACK;
            assert_eq!(features::port(f), p);
        }
        // A port without the bit is not stated.
        assert_eq!(features::port(4791 << features::PORT_SHIFT), 0);
    }

    #[test]
    fn segments_of_data_and_rma_payload_have_a_transfer_length() {
        assert_eq!(transfer_len(&data(1 << 20, 1400)), Some(1 << 20));
        let mut ack = vec![0u8; wire::COMMON_LEN + wire::TRAILER_LEN];
        wire::encode_header(
            &mut ack,
            &Header {
                ty: PacketType::Ack as u8,
                ..Default::default()
            },
        );
        assert_eq!(transfer_len(&ack), None);
        let mut write = data(5000, 100);
        write[1] = PacketType::Write as u8;
        assert_eq!(transfer_len(&write), Some(5000));
        write[1] = PacketType::ReadResp as u8;
        assert_eq!(transfer_len(&write), Some(5000));
        write[1] = PacketType::Atomic as u8;
        assert_eq!(transfer_len(&write), None);
        assert_eq!(transfer_len(&[]), None);
        assert_eq!(transfer_len(&[1, 5, 0]), None);
    }

    #[test]
    fn a_coalesced_read_splits_at_the_stated_size_whatever_was_sent_together() {
        let read: Vec<u8> = (0..10u8).collect();
        let parts: Vec<&[u8]> = Segments::new(&read, 4).collect();
        assert_eq!(parts, [&[0, 1, 2, 3][..], &[4, 5, 6, 7], &[8, 9]]);
        let whole: Vec<&[u8]> = Segments::new(&read, 0).collect();
        assert_eq!(whole, [&read[..]]);
        assert_eq!(Segments::new(&[], 4).count(), 0);
        let bigger: Vec<&[u8]> = Segments::new(&read, 64).collect();
        assert_eq!(bigger, [&read[..]]);
    }
}
