//! Path entropy (PROTOCOL.md §4.6): the UDP source port of each AF_XDP
//! datagram of a session is one of `FI_XDP_PATHS` values of that session,
//! so routers that spread flows over equal-cost paths by a hash of
//! addresses and ports (ECMP) carry the session over several paths. The
//! receiver finds the session by the ids in the header, whatever the port.

use ofi_xdp_reliability::wire::PacketType;

/// First port of the dynamic range (RFC 6335 §6): entropy ports are taken
/// from 49152–65535, where no service listens.
const DYNAMIC_FIRST: u16 = 49152;

/// The source ports of an endpoint's session datagrams.
#[derive(Debug)]
pub(super) struct Entropy {
    /// Values per session (`FI_XDP_PATHS`); 1: the endpoint's own port only.
    paths: u16,
    /// The endpoint's own UDP port: value 0 of every session.
    own: u16,
}

impl Entropy {
    pub(super) fn new(paths: u16, own: u16) -> Self {
        Entropy {
            paths: paths.max(1),
            own,
        }
    }

    /// Whether datagrams may leave from other ports than the endpoint's.
    #[inline]
    pub(super) fn on(&self) -> bool {
        self.paths > 1
    }

    /// The source port of `datagram`, one of a session whose peer takes
    /// any port: handshakes and connection management leave from the
    /// endpoint's own port (they carry its address, §4.6), other datagrams
    /// from the session's value `path`, which the engine picked
    /// (`Transmit::path`: in turn, passing over values that lost lately).
    pub(super) fn source_port(&self, datagram: &[u8], path: u16) -> u16 {
        if datagram.len() < 12 || carries_address(datagram[1]) {
            return self.own;
        }
        let rd = |o: usize| {
            u32::from_le_bytes([
                datagram[o],
                datagram[o + 1],
                datagram[o + 2],
                datagram[o + 3],
            ])
        };
        value(self.own, rd(4), rd(8), path % self.paths)
    }
}

/// Datagram types the receiver learns the sender's address from.
fn carries_address(ty: u8) -> bool {
    ty == PacketType::Hello as u8
        || ty == PacketType::HelloAck as u8
        || ty == PacketType::Reset as u8
        || ty == PacketType::Challenge as u8
        || ofi_xdp_reliability::cm::wire::CM_TYPES.contains(&ty)
}

/// Value `i` of the session (`src_sess`, `dst_sess`): 0 is `own`, the
/// others ports of the dynamic range drawn from a hash of the ids and `i`
/// (SplitMix64's finaliser), fixed for the session's lifetime, so a router
/// hashes each value's datagrams onto one path.
fn value(own: u16, src_sess: u32, dst_sess: u32, i: u16) -> u16 {
    if i == 0 {
        return own;
    }
    let mut z = ((u64::from(src_sess) << 32) | u64::from(dst_sess))
        ^ u64::from(i).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    let port = DYNAMIC_FIRST + (z % u64::from(u16::MAX - DYNAMIC_FIRST + 1)) as u16;
    // Another value than the own port's (the range is even-aligned, so
    // flipping the last bit stays in it).
    if port == own { port ^ 1 } else { port }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn datagram(ty: PacketType, src: u32, dst: u32) -> Vec<u8> {
        let mut d = vec![0u8; 36];
        d[0] = 1;
        d[1] = ty as u8;
        d[4..8].copy_from_slice(&src.to_le_bytes());
        d[8..12].copy_from_slice(&dst.to_le_bytes());
        d
    }

    #[test]
    fn one_path_is_the_own_port() {
        let e = Entropy::new(1, 5000);
        assert!(!e.on());
        for path in 0..4 {
            assert_eq!(e.source_port(&datagram(PacketType::Data, 7, 9), path), 5000);
        }
    }

    #[test]
    fn a_session_takes_the_values_picked_and_handshakes_the_own_port() {
        let e = Entropy::new(4, 5000);
        assert!(e.on());
        let d = datagram(PacketType::Data, 7, 9);
        let ports: Vec<u16> = (0..8).map(|p| e.source_port(&d, p)).collect();
        // Four distinct values, repeated in the same order.
        let mut first: Vec<u16> = ports[..4].to_vec();
        assert_eq!(ports[..4], ports[4..]);
        first.sort_unstable();
        first.dedup();
        assert_eq!(first.len(), 4, "{ports:?}");
        assert!(ports.contains(&5000), "value 0 is the own port");
        assert!(ports.iter().all(|&p| p == 5000 || p >= DYNAMIC_FIRST));
        // Another session has other values.
        let other: Vec<u16> = (0..4)
            .map(|p| e.source_port(&datagram(PacketType::Ack, 8, 9), p))
            .collect();
        assert_ne!(other.iter().filter(|&&p| p != 5000).count(), 0);
        assert!(other.iter().all(|p| *p == 5000 || !ports.contains(p)));
        for ty in [
            PacketType::Hello,
            PacketType::HelloAck,
            PacketType::Reset,
            PacketType::Challenge,
        ] {
            assert_eq!(e.source_port(&datagram(ty, 7, 9), 1), 5000, "{ty:?}");
        }
        assert_eq!(e.source_port(&[1, 5], 1), 5000, "a short datagram");
    }
}
