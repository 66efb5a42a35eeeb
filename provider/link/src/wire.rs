//! Ethernet + IPv4/IPv6 + UDP framing, done entirely in software.
//!
//! veth (and copy-mode AF_XDP in general) gives us no checksum offload, so
//! every checksum the wire needs is computed here:
//! - IPv4 header checksum (RFC 791 §3.1, computed as in RFC 1071),
//! - UDP checksum over the pseudo-header (RFC 768 for IPv4, optional there:
//!   zero means "not computed"; RFC 8200 §8.1 for IPv6, mandatory).
//!
//! Encoding writes headers in front of a payload that is already in place in
//! the frame (the caller wrote it there), so a datagram costs exactly one copy
//! of the payload in userspace.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Ethernet II header length (no VLAN tag on transmit).
pub const ETH_HLEN: usize = 14;
/// IPv4 header length without options (we never send options).
pub const IPV4_HLEN: usize = 20;
/// IPv6 fixed header length.
pub const IPV6_HLEN: usize = 40;
/// UDP header length.
pub const UDP_HLEN: usize = 8;

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const ETHERTYPE_VLAN: u16 = 0x8100;
const IPPROTO_UDP: u8 = 17;
/// TTL / hop limit we send with (RFC 1700 default).
const DEFAULT_TTL: u8 = 64;

/// A 48-bit Ethernet address.
pub type MacAddr = [u8; 6];

/// Where a datagram comes from or goes to: the full link-level address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LinkAddr {
    /// Ethernet address.
    pub mac: MacAddr,
    /// IP address (v4 or v6; must match the link's local family).
    pub ip: IpAddr,
    /// UDP port.
    pub port: u16,
}

impl std::fmt::Display for LinkAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let m = self.mac;
        let sock = std::net::SocketAddr::new(self.ip, self.port);
        write!(
            f,
            "{sock} ({:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x})",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

/// Bytes of headers in front of the payload for a given IP family.
pub fn header_len(ip: &IpAddr) -> usize {
    match ip {
        IpAddr::V4(_) => ETH_HLEN + IPV4_HLEN + UDP_HLEN,
        IpAddr::V6(_) => ETH_HLEN + IPV6_HLEN + UDP_HLEN,
    }
}

/// Why a frame could not be decoded as one of our UDP datagrams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Shorter than the headers it claims.
    Truncated,
    /// Not IPv4/IPv6, not UDP, a fragment, or a header field out of range.
    Unsupported,
    /// A length field disagrees with the frame.
    BadLength,
    /// IPv4 header or UDP checksum does not verify.
    BadChecksum,
}

/// Why a frame could not be encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncodeError {
    /// Source and destination are different IP families.
    FamilyMismatch,
    /// Headers plus payload do not fit the buffer or the 16-bit length fields.
    TooLong,
}

/// Options for encoding.
#[derive(Clone, Copy, Debug)]
pub struct EncodeOptions {
    /// Compute the UDP checksum for IPv4 (RFC 768 allows zero = none).
    /// IPv6 always gets one (RFC 8200 §8.1).
    pub udp_checksum_ipv4: bool,
    /// IPv4 identification field (RFC 6864: any value for atomic datagrams;
    /// we still vary it to help packet captures).
    pub ipv4_id: u16,
    /// The ECN field (RFC 3168 §5): 0 Not-ECT, [`ECT0`] for a sender that
    /// reacts to congestion marks.
    pub ecn: u8,
}

/// ECN codepoint ECT(0): ECN-capable transport (RFC 3168 §5).
pub const ECT0: u8 = 0b10;
/// ECN codepoint CE: congestion experienced (RFC 3168 §5).
pub const CE: u8 = 0b11;

/// One's-complement sum of `data` as big-endian 16-bit words, added to
/// `sum` (RFC 1071 §4.1). Returns an unfolded 32-bit accumulator (congruent
/// to the 16-bit sum; finish with [`fold_complement`], or pass it on).
///
/// Sums eight bytes at a time with end-around carry: the one's-complement
/// sum is independent of the word size as long as it is a multiple of 16
/// bits (RFC 1071 §2 (C), "parallel summation"). The bytewise loop it
/// replaced was a quarter of the sender's CPU time at 1 MiB transfers.
pub fn ones_complement_add(sum: u32, data: &[u8]) -> u32 {
    let mut acc = u64::from(sum);
    let add = |acc: u64, w: u64| {
        let (s, carry) = acc.overflowing_add(w);
        s + u64::from(carry)
    };
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        acc = add(acc, u64::from_be_bytes(b));
    }
    let mut pairs = words.remainder().chunks_exact(2);
    for c in &mut pairs {
        acc = add(acc, u64::from(u16::from_be_bytes([c[0], c[1]])));
    }
    if let [last] = pairs.remainder() {
        acc = add(acc, u64::from(*last) << 8);
    }
    // 64 → 32 bits, end-around carry twice (the first may carry out).
    let folded = (acc & 0xffff_ffff) + (acc >> 32);
    ((folded & 0xffff_ffff) + (folded >> 32)) as u32
}

/// Folds an accumulator to 16 bits and complements it (RFC 1071 §4.1).
pub fn fold_complement(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// RFC 1071 Internet checksum of `data`.
pub fn internet_checksum(data: &[u8]) -> u16 {
    fold_complement(ones_complement_add(0, data))
}

fn pseudo_header_sum(src: &IpAddr, dst: &IpAddr, udp_len: usize) -> u32 {
    let mut sum = 0u32;
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            // RFC 768: src, dst, zero, protocol, UDP length.
            sum = ones_complement_add(sum, &s.octets());
            sum = ones_complement_add(sum, &d.octets());
            sum = ones_complement_add(sum, &[0, IPPROTO_UDP]);
            sum = ones_complement_add(sum, &(udp_len as u16).to_be_bytes());
        }
        _ => {
            // RFC 8200 §8.1: src, dst, 32-bit length, 3 zero bytes, next header.
            let s = to_v6(src);
            let d = to_v6(dst);
            sum = ones_complement_add(sum, &s.octets());
            sum = ones_complement_add(sum, &d.octets());
            sum = ones_complement_add(sum, &(udp_len as u32).to_be_bytes());
            sum = ones_complement_add(sum, &[0, 0, 0, IPPROTO_UDP]);
        }
    }
    sum
}

fn to_v6(ip: &IpAddr) -> Ipv6Addr {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => *v6,
    }
}

/// UDP checksum of `udp` (header with its checksum field zeroed, plus
/// payload). Returns the value to put on the wire: a computed zero is sent
/// as 0xffff (RFC 768, RFC 8200 §8.1).
pub fn udp_checksum(src: &IpAddr, dst: &IpAddr, udp: &[u8]) -> u16 {
    let sum = ones_complement_add(pseudo_header_sum(src, dst, udp.len()), udp);
    match fold_complement(sum) {
        0 => 0xffff,
        c => c,
    }
}

/// Writes Ethernet + IP + UDP headers into `frame[..header_len]` for a
/// payload of `payload_len` bytes already at `frame[header_len..]`.
/// Returns the total frame length.
pub fn encode_headers(
    frame: &mut [u8],
    src: &LinkAddr,
    dst: &LinkAddr,
    payload_len: usize,
    opts: &EncodeOptions,
) -> Result<usize, EncodeError> {
    let hlen = header_len(&src.ip);
    if header_len(&dst.ip) != hlen {
        return Err(EncodeError::FamilyMismatch);
    }
    let total = hlen + payload_len;
    let udp_len = UDP_HLEN + payload_len;
    if total > frame.len() || udp_len > usize::from(u16::MAX) {
        return Err(EncodeError::TooLong);
    }
    let frame = &mut frame[..total];

    // Ethernet II.
    frame[0..6].copy_from_slice(&dst.mac);
    frame[6..12].copy_from_slice(&src.mac);
    let (ethertype, l4_off) = match src.ip {
        IpAddr::V4(_) => (ETHERTYPE_IPV4, ETH_HLEN + IPV4_HLEN),
        IpAddr::V6(_) => (ETHERTYPE_IPV6, ETH_HLEN + IPV6_HLEN),
    };
    frame[12..14].copy_from_slice(&ethertype.to_be_bytes());

    match (src.ip, dst.ip) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            if IPV4_HLEN + udp_len > usize::from(u16::MAX) {
                return Err(EncodeError::TooLong);
            }
            write_ipv4(&mut frame[ETH_HLEN..l4_off], s, d, udp_len, opts);
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            write_ipv6(&mut frame[ETH_HLEN..l4_off], s, d, udp_len, opts.ecn);
        }
        _ => return Err(EncodeError::FamilyMismatch),
    }

    // UDP (RFC 768).
    let udp = &mut frame[l4_off..];
    udp[0..2].copy_from_slice(&src.port.to_be_bytes());
    udp[2..4].copy_from_slice(&dst.port.to_be_bytes());
    udp[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    udp[6..8].copy_from_slice(&[0, 0]);
    let csum = if src.ip.is_ipv6() || opts.udp_checksum_ipv4 {
        udp_checksum(&src.ip, &dst.ip, udp)
    } else {
        0
    };
    udp[6..8].copy_from_slice(&csum.to_be_bytes());
    Ok(total)
}

fn write_ipv4(h: &mut [u8], src: Ipv4Addr, dst: Ipv4Addr, udp_len: usize, opts: &EncodeOptions) {
    let total_len = (IPV4_HLEN + udp_len) as u16;
    h[0] = 0x45; // version 4, IHL 5 words (RFC 791 §3.1)
    h[1] = opts.ecn & 0b11; // DSCP 0, ECN (RFC 3168 §5)
    h[2..4].copy_from_slice(&total_len.to_be_bytes());
    h[4..6].copy_from_slice(&opts.ipv4_id.to_be_bytes());
    h[6..8].copy_from_slice(&0x4000u16.to_be_bytes()); // DF, offset 0
    h[8] = DEFAULT_TTL;
    h[9] = IPPROTO_UDP;
    h[10..12].copy_from_slice(&[0, 0]);
    h[12..16].copy_from_slice(&src.octets());
    h[16..20].copy_from_slice(&dst.octets());
    let c = internet_checksum(&h[..IPV4_HLEN]);
    h[10..12].copy_from_slice(&c.to_be_bytes());
}

fn write_ipv6(h: &mut [u8], src: Ipv6Addr, dst: Ipv6Addr, udp_len: usize, ecn: u8) {
    // Version 6, traffic class DSCP 0 and ECN (RFC 8200 §3, RFC 3168 §5),
    // flow label 0.
    let first = 0x6000_0000u32 | (u32::from(ecn & 0b11) << 20);
    h[0..4].copy_from_slice(&first.to_be_bytes());
    h[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    h[6] = IPPROTO_UDP;
    h[7] = DEFAULT_TTL;
    h[8..24].copy_from_slice(&src.octets());
    h[24..40].copy_from_slice(&dst.octets());
}

/// A decoded UDP datagram: addresses and where its payload sits in the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decoded {
    /// Sender (MAC, IP, UDP port).
    pub src: LinkAddr,
    /// Destination IP.
    pub dst_ip: IpAddr,
    /// Destination UDP port.
    pub dst_port: u16,
    /// Offset of the UDP payload in the frame.
    pub payload_offset: usize,
    /// Length of the UDP payload (from the UDP length field; trailing
    /// Ethernet padding excluded).
    pub payload_len: usize,
    /// The IP header's ECN field (RFC 3168 §5; [`CE`]: a router on the way
    /// was congested).
    pub ecn: u8,
}

/// Decodes an Ethernet (optionally one 802.1Q tag) / IPv4 or IPv6 / UDP
/// frame of `frame_len` bytes of which the start, `head`, is at hand: all
/// of it, or a multi-buffer frame's first chunk. The headers must lie in
/// `head`; lengths are checked against `frame_len`. With
/// `verify_checksums`, the IPv4 header checksum and a non-zero UDP checksum
/// are checked (IPv6 requires a UDP checksum); the UDP checksum covers the
/// whole datagram, so `head` must then be all of it (else `Unsupported`).
///
/// A UDP checksum field holding only the folded pseudo-header sum is
/// accepted: that is a CHECKSUM_PARTIAL datagram of a kernel socket on this
/// host whose checksum offload was never completed — veth passes them on,
/// and the kernel trusts them on its own receive path.
pub fn decode_head(
    head: &[u8],
    frame_len: usize,
    verify_checksums: bool,
) -> Result<Decoded, DecodeError> {
    if head.len() > frame_len || (verify_checksums && head.len() != frame_len) {
        return Err(DecodeError::Unsupported);
    }
    let frame = head;
    let mut off = ETH_HLEN;
    let eth = frame.get(..ETH_HLEN).ok_or(DecodeError::Truncated)?;
    let mut src_mac = [0u8; 6];
    src_mac.copy_from_slice(&eth[6..12]);
    let mut ethertype = u16::from_be_bytes([eth[12], eth[13]]);
    if ethertype == ETHERTYPE_VLAN {
        let tag = frame.get(off..off + 4).ok_or(DecodeError::Truncated)?;
        ethertype = u16::from_be_bytes([tag[2], tag[3]]);
        off += 4;
    }
    let (src_ip, dst_ip, l4_off, l4_end, ecn) = match ethertype {
        ETHERTYPE_IPV4 => decode_ipv4(frame, frame_len, off, verify_checksums)?,
        ETHERTYPE_IPV6 => decode_ipv6(frame, frame_len, off)?,
        _ => return Err(DecodeError::Unsupported),
    };
    if l4_end - l4_off < UDP_HLEN {
        return Err(DecodeError::Truncated);
    }
    let udp = frame
        .get(l4_off..l4_off + UDP_HLEN)
        .ok_or(DecodeError::Truncated)?;
    let src_port = u16::from_be_bytes([udp[0], udp[1]]);
    let dst_port = u16::from_be_bytes([udp[2], udp[3]]);
    let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    if udp_len < UDP_HLEN || udp_len > l4_end - l4_off {
        return Err(DecodeError::BadLength);
    }
    let wire_csum = u16::from_be_bytes([udp[6], udp[7]]);
    if verify_checksums {
        let required = dst_ip.is_ipv6();
        if wire_csum != 0 || required {
            let pseudo = pseudo_header_sum(&src_ip, &dst_ip, udp_len);
            // `head` is the whole frame here (checked above).
            let udp = frame
                .get(l4_off..l4_off + udp_len)
                .ok_or(DecodeError::Truncated)?;
            let sum = ones_complement_add(pseudo, udp);
            // Summing a correct datagram including its checksum gives 0xffff,
            // i.e. a folded complement of zero.
            if fold_complement(sum) != 0 && wire_csum != !fold_complement(pseudo) {
                return Err(DecodeError::BadChecksum);
            }
        }
    }
    Ok(Decoded {
        src: LinkAddr {
            mac: src_mac,
            ip: src_ip,
            port: src_port,
        },
        dst_ip,
        dst_port,
        payload_offset: l4_off + UDP_HLEN,
        payload_len: udp_len - UDP_HLEN,
        ecn,
    })
}

/// Source, destination, UDP offset and end, ECN field.
type IpParts = (IpAddr, IpAddr, usize, usize, u8);

fn decode_ipv4(
    frame: &[u8],
    frame_len: usize,
    off: usize,
    verify: bool,
) -> Result<IpParts, DecodeError> {
    let h = frame
        .get(off..off + IPV4_HLEN)
        .ok_or(DecodeError::Truncated)?;
    if h[0] >> 4 != 4 {
        return Err(DecodeError::Unsupported);
    }
    let ihl = usize::from(h[0] & 0x0f) * 4;
    if ihl < IPV4_HLEN {
        return Err(DecodeError::BadLength);
    }
    let full = frame.get(off..off + ihl).ok_or(DecodeError::Truncated)?;
    let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
    if total < ihl || off + total > frame_len {
        return Err(DecodeError::BadLength);
    }
    // More-fragments flag or a non-zero offset: a fragment (RFC 791 §3.2).
    let frag = u16::from_be_bytes([h[6], h[7]]);
    if frag & 0x3fff != 0 || h[9] != IPPROTO_UDP {
        return Err(DecodeError::Unsupported);
    }
    if verify && internet_checksum(full) != 0 {
        return Err(DecodeError::BadChecksum);
    }
    let src = Ipv4Addr::new(h[12], h[13], h[14], h[15]);
    let dst = Ipv4Addr::new(h[16], h[17], h[18], h[19]);
    Ok((src.into(), dst.into(), off + ihl, off + total, h[1] & 0b11))
}

fn decode_ipv6(frame: &[u8], frame_len: usize, off: usize) -> Result<IpParts, DecodeError> {
    let h = frame
        .get(off..off + IPV6_HLEN)
        .ok_or(DecodeError::Truncated)?;
    if h[0] >> 4 != 6 {
        return Err(DecodeError::Unsupported);
    }
    // Extension headers are not supported: our peers never send them.
    if h[6] != IPPROTO_UDP {
        return Err(DecodeError::Unsupported);
    }
    let plen = usize::from(u16::from_be_bytes([h[4], h[5]]));
    let start = off + IPV6_HLEN;
    if start + plen > frame_len {
        return Err(DecodeError::BadLength);
    }
    let mut s = [0u8; 16];
    s.copy_from_slice(&h[8..24]);
    let mut d = [0u8; 16];
    d.copy_from_slice(&h[24..40]);
    Ok((
        Ipv6Addr::from(s).into(),
        Ipv6Addr::from(d).into(),
        start,
        start + plen,
        (h[1] >> 4) & 0b11,
    ))
}

/// [`decode_head`] of a whole frame (the unit tests' form).
#[cfg(test)]
fn decode(frame: &[u8], verify_checksums: bool) -> Result<Decoded, DecodeError> {
    decode_head(frame, frame.len(), verify_checksums)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 1071 §3 worked example: bytes 00 01 f2 03 f4 f5 f6 f7 sum to
    /// 0x2ddf0, folded 0xddf2; the checksum is its complement.
    #[test]
    fn rfc1071_example() {
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(
            fold_complement(ones_complement_add(0, &data)),
            fold_complement(0x2ddf0)
        );
        assert_eq!(internet_checksum(&data), !0xddf2);
    }

    /// The 8-byte-word sum equals the plain RFC 1071 16-bit-word sum for
    /// every length and alignment, chained or not.
    #[test]
    fn wide_sum_matches_16_bit_reference() {
        fn reference(mut sum: u32, data: &[u8]) -> u16 {
            let mut chunks = data.chunks_exact(2);
            for c in &mut chunks {
                sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
                sum = (sum & 0xffff) + (sum >> 16);
            }
            if let [last] = chunks.remainder() {
                sum += u32::from(*last) << 8;
            }
            while sum > 0xffff {
                sum = (sum & 0xffff) + (sum >> 16);
            }
            !(sum as u16)
        }
        let mut x = 0x1234_5678u32;
        let data: Vec<u8> = (0..4000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect();
        for len in (0..70).chain([1471, 1472, 3771, 3772, 4000]) {
            for start in [0, 1, 3] {
                let d = &data[start..start + len.min(data.len() - start)];
                assert_eq!(
                    fold_complement(ones_complement_add(0, d)),
                    reference(0, d),
                    "len {len} start {start}"
                );
                let split = (d.len() / 2) & !1;
                let chained =
                    ones_complement_add(ones_complement_add(0xfffe, &d[..split]), &d[split..]);
                assert_eq!(fold_complement(chained), reference(0xfffe, d));
            }
        }
        assert_eq!(fold_complement(ones_complement_add(0, &[0xff; 64])), 0);
    }

    /// The widely reproduced IPv4 header example (192.168.0.1 → 192.168.0.199,
    /// total length 0x73, TTL 64, UDP): checksum 0xb861.
    #[test]
    fn ipv4_header_known_vector() {
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(internet_checksum(&h), 0xb861);
        h[10..12].copy_from_slice(&0xb861u16.to_be_bytes());
        assert_eq!(internet_checksum(&h), 0);
    }

    /// The defining property on an odd-length payload (RFC 1071 §2(A), odd
    /// byte padded with zero): the receiver's sum over the pseudo-header and
    /// the datagram including the checksum folds to 0xffff.
    #[test]
    fn udp_checksum_verifies_odd_length() {
        let src: IpAddr = Ipv4Addr::new(10, 0, 0, 1).into();
        let dst: IpAddr = Ipv4Addr::new(10, 0, 0, 2).into();
        let mut udp = vec![
            0x30, 0x39, 0x00, 0x35, 0, 0, 0, 0, b'h', b'e', b'l', b'l', b'o',
        ];
        let len = udp.len() as u16;
        udp[4..6].copy_from_slice(&len.to_be_bytes());
        let c = udp_checksum(&src, &dst, &udp);
        udp[6..8].copy_from_slice(&c.to_be_bytes());
        let sum = ones_complement_add(pseudo_header_sum(&src, &dst, udp.len()), &udp);
        assert_eq!(fold_complement(sum), 0);
    }

    /// Hand-computed UDP checksum: 10.0.0.1:1 → 10.0.0.2:2, empty payload.
    /// Pseudo: 0a00+0001+0a00+0002+0011+0008 = 0x141c; UDP: 0001+0002+0008
    /// = 0x000b; total 0x1427 → checksum !0x1427 = 0xebd8.
    #[test]
    fn udp_checksum_hand_vector() {
        let src: IpAddr = Ipv4Addr::new(10, 0, 0, 1).into();
        let dst: IpAddr = Ipv4Addr::new(10, 0, 0, 2).into();
        let udp = [0x00, 0x01, 0x00, 0x02, 0x00, 0x08, 0, 0];
        assert_eq!(udp_checksum(&src, &dst, &udp), 0xebd8);
    }

    fn addrs(v6: bool) -> (LinkAddr, LinkAddr) {
        let (s, d): (IpAddr, IpAddr) = if v6 {
            (
                "fd00::1".parse().expect("addr"),
                "fd00::2".parse().expect("addr"),
            )
        } else {
            (
                Ipv4Addr::new(10, 1, 2, 3).into(),
                Ipv4Addr::new(10, 1, 2, 4).into(),
            )
        };
        (
            LinkAddr {
                mac: [2, 0, 0, 0, 0, 1],
                ip: s,
                port: 4791,
            },
            LinkAddr {
                mac: [2, 0, 0, 0, 0, 2],
                ip: d,
                port: 5000,
            },
        )
    }

    #[test]
    fn roundtrip_all_sizes_both_families() {
        for v6 in [false, true] {
            for csum in [false, true] {
                let (src, dst) = addrs(v6);
                let hl = header_len(&src.ip);
                for len in [0usize, 1, 2, 3, 63, 64, 1000, 1472] {
                    let mut f = vec![0u8; hl + len];
                    for (i, b) in f[hl..].iter_mut().enumerate() {
                        *b = (i * 7 + len) as u8;
                    }
                    let opts = EncodeOptions {
                        udp_checksum_ipv4: csum,
                        ipv4_id: 7,
                        ecn: 0,
                    };
                    let n = encode_headers(&mut f, &src, &dst, len, &opts).expect("encode");
                    assert_eq!(n, hl + len);
                    let d = decode(&f, true).expect("decode");
                    assert_eq!(d.src, src);
                    assert_eq!(d.dst_ip, dst.ip);
                    assert_eq!(d.dst_port, dst.port);
                    assert_eq!(d.payload_offset, hl);
                    assert_eq!(d.payload_len, len);
                    let udp_csum = u16::from_be_bytes([f[hl - 2], f[hl - 1]]);
                    assert_eq!(udp_csum == 0, !v6 && !csum);
                }
            }
        }
    }

    /// The ECN field is written as asked and read back, IPv4 and IPv6,
    /// with the IPv4 header checksum still right.
    #[test]
    fn ecn_field_roundtrip() {
        for v6 in [false, true] {
            let (src, dst) = addrs(v6);
            let hl = header_len(&src.ip);
            for ecn in [0, ECT0, CE] {
                let mut f = vec![0u8; hl + 10];
                let opts = EncodeOptions {
                    udp_checksum_ipv4: true,
                    ipv4_id: 3,
                    ecn,
                };
                encode_headers(&mut f, &src, &dst, 10, &opts).expect("encode");
                assert_eq!(decode(&f, true).expect("decode").ecn, ecn);
            }
        }
    }

    /// The first chunk of a multi-buffer frame decodes like the whole frame
    /// when its headers are in it; lengths are checked against the whole.
    #[test]
    fn head_of_a_frame_decodes_like_the_frame() {
        for v6 in [false, true] {
            let (src, dst) = addrs(v6);
            let hl = header_len(&src.ip);
            let len = 9000 - hl;
            let mut f = vec![0u8; hl + len];
            let opts = EncodeOptions {
                udp_checksum_ipv4: true,
                ipv4_id: 1,
                ecn: 0,
            };
            encode_headers(&mut f, &src, &dst, len, &opts).expect("encode");
            let whole = decode(&f, false).expect("decode");
            for cut in [hl, hl + 1, 3840, f.len()] {
                assert_eq!(
                    decode_head(&f[..cut], f.len(), false),
                    Ok(whole),
                    "cut {cut}"
                );
            }
            // Headers cut short, a frame shorter than its IP length says, and
            // checksums that would need the rest.
            assert!(decode_head(&f[..hl - 1], f.len(), false).is_err());
            assert_eq!(
                decode_head(&f[..hl], f.len() - 1, false),
                Err(DecodeError::BadLength)
            );
            assert!(decode_head(&f[..hl], f.len(), true).is_err());
        }
    }

    /// A frame with UDP checksum and a 32-byte payload; the header length.
    fn checksummed_frame(src: &LinkAddr, dst: &LinkAddr) -> (Vec<u8>, usize) {
        let hl = header_len(&src.ip);
        let mut f = vec![0xabu8; hl + 32];
        let opts = EncodeOptions {
            udp_checksum_ipv4: true,
            ipv4_id: 1,
            ecn: 0,
        };
        encode_headers(&mut f, src, dst, 32, &opts).expect("encode");
        (f, hl)
    }

    #[test]
    fn corruption_is_detected() {
        for v6 in [false, true] {
            let (src, dst) = addrs(v6);
            let (mut f, hl) = checksummed_frame(&src, &dst);
            f[hl + 5] ^= 0x10;
            assert_eq!(decode(&f, true), Err(DecodeError::BadChecksum));
            assert!(decode(&f, false).is_ok());
        }
    }

    /// A CHECKSUM_PARTIAL datagram (a local kernel sender over veth) holds
    /// the folded pseudo-header sum: accepted; any other value is not.
    #[test]
    fn partial_checksum_of_a_local_kernel_sender_is_accepted() {
        for v6 in [false, true] {
            let (src, dst) = addrs(v6);
            let (mut f, hl) = checksummed_frame(&src, &dst);
            let partial = !fold_complement(pseudo_header_sum(&src.ip, &dst.ip, UDP_HLEN + 32));
            f[hl - 2..hl].copy_from_slice(&partial.to_be_bytes());
            assert!(decode(&f, true).is_ok());
            f[hl - 2..hl].copy_from_slice(&partial.wrapping_add(1).to_be_bytes());
            assert_eq!(decode(&f, true), Err(DecodeError::BadChecksum));
        }
    }

    #[test]
    fn malformed_frames_are_rejected() {
        let (src, dst) = addrs(false);
        let hl = header_len(&src.ip);
        let mut f = vec![0u8; hl + 10];
        let opts = EncodeOptions {
            udp_checksum_ipv4: true,
            ipv4_id: 1,
            ecn: 0,
        };
        encode_headers(&mut f, &src, &dst, 10, &opts).expect("encode");
        for cut in 0..hl {
            assert!(decode(&f[..cut], true).is_err(), "cut at {cut}");
        }
        let mut g = f.clone();
        g[ETH_HLEN] = 0x44; // IHL 4 words
        assert_eq!(decode(&g, false), Err(DecodeError::BadLength));
        let mut g = f.clone();
        g[hl - 4..hl - 2].copy_from_slice(&500u16.to_be_bytes()); // UDP length too big
        assert_eq!(decode(&g, false), Err(DecodeError::BadLength));
        let mut g = f.clone();
        g[ETH_HLEN + 6] = 0x20; // more fragments
        assert_eq!(decode(&g, false), Err(DecodeError::Unsupported));
        let mut g = f;
        g[12] = 0x08;
        g[13] = 0x06; // ARP
        assert_eq!(decode(&g, false), Err(DecodeError::Unsupported));
    }

    #[test]
    fn vlan_tag_is_skipped_and_padding_ignored() {
        let (src, dst) = addrs(false);
        let hl = header_len(&src.ip);
        let mut f = vec![0u8; hl + 3];
        f[hl..].copy_from_slice(b"abc");
        let opts = EncodeOptions {
            udp_checksum_ipv4: true,
            ipv4_id: 1,
            ecn: 0,
        };
        encode_headers(&mut f, &src, &dst, 3, &opts).expect("encode");
        let mut tagged = f[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x05]);
        tagged.extend_from_slice(&f[12..]);
        tagged.extend_from_slice(&[0u8; 20]); // Ethernet minimum-size padding
        let d = decode(&tagged, true).expect("decode");
        assert_eq!(d.payload_len, 3);
        assert_eq!(&tagged[d.payload_offset..d.payload_offset + 3], b"abc");
    }

    #[test]
    fn family_mismatch_and_too_long() {
        let (src, _) = addrs(false);
        let (_, dst6) = addrs(true);
        let mut f = vec![0u8; 200];
        let opts = EncodeOptions {
            udp_checksum_ipv4: false,
            ipv4_id: 0,
            ecn: 0,
        };
        assert_eq!(
            encode_headers(&mut f, &src, &dst6, 0, &opts),
            Err(EncodeError::FamilyMismatch)
        );
        let (src, dst) = addrs(false);
        assert_eq!(
            encode_headers(&mut f, &src, &dst, 200, &opts),
            Err(EncodeError::TooLong)
        );
    }
}
