//! CRC-32C (Castagnoli), the integrity check of every datagram (PROTOCOL.md §2).
//!
//! Parameters: polynomial 0x1EDC6F41 (reflected 0x82F63B78), initial value
//! 0xFFFF_FFFF, reflected input and output, final XOR 0xFFFF_FFFF — the same
//! CRC as iSCSI (RFC 3720 §12.1) and SCTP (RFC 4960 appendix B). Uses the SSE4.2
//! `crc32` instruction when the CPU has it, a slicing-by-8 table otherwise.

const POLY: u32 = 0x82F6_3B78;

const fn make_tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut s = 1;
    while s < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[s - 1][i];
            t[s][i] = (prev >> 8) ^ t[0][(prev & 0xFF) as usize];
            i += 1;
        }
        s += 1;
    }
    t
}

static TABLES: [[u32; 256]; 8] = make_tables();

fn update_table(crc: u32, data: &[u8]) -> u32 {
    let mut c = crc;
    let (chunks, rest) = data.as_chunks::<8>();
    for ch in chunks {
        let lo = u32::from_le_bytes([ch[0], ch[1], ch[2], ch[3]]) ^ c;
        let hi = u32::from_le_bytes([ch[4], ch[5], ch[6], ch[7]]);
        c = TABLES[7][(lo & 0xFF) as usize]
            ^ TABLES[6][((lo >> 8) & 0xFF) as usize]
            ^ TABLES[5][((lo >> 16) & 0xFF) as usize]
            ^ TABLES[4][(lo >> 24) as usize]
            ^ TABLES[3][(hi & 0xFF) as usize]
            ^ TABLES[2][((hi >> 8) & 0xFF) as usize]
            ^ TABLES[1][((hi >> 16) & 0xFF) as usize]
            ^ TABLES[0][(hi >> 24) as usize];
    }
    for &b in rest {
        c = (c >> 8) ^ TABLES[0][((c ^ u32::from(b)) & 0xFF) as usize];
    }
    c
}

/// Bytes per lane of the 3-way interleaved hardware CRC.
#[cfg(target_arch = "x86_64")]
const LANE: usize = 128;

/// Tables of the linear map "advance the CRC register over LANE zero bytes",
/// one per register byte: combining three lanes computed in parallel needs it
/// (CRC is affine: crc(s, A‖B) = shift_|B|(crc(s, A)) ^ crc(0, B)).
#[cfg(target_arch = "x86_64")]
fn shift_tables() -> &'static [[u32; 256]; 4] {
    static T: std::sync::OnceLock<Box<[[u32; 256]; 4]>> = std::sync::OnceLock::new();
    T.get_or_init(|| {
        let zeros = [0u8; LANE];
        let mut t = Box::new([[0u32; 256]; 4]);
        for (k, row) in t.iter_mut().enumerate() {
            for (b, v) in row.iter_mut().enumerate() {
                *v = update_table((b as u32) << (8 * k), &zeros);
            }
        }
        t
    })
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn shift_lane(t: &[[u32; 256]; 4], x: u32) -> u32 {
    t[0][(x & 0xFF) as usize]
        ^ t[1][((x >> 8) & 0xFF) as usize]
        ^ t[2][((x >> 16) & 0xFF) as usize]
        ^ t[3][(x >> 24) as usize]
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
fn update_sse42(crc: u32, data: &[u8]) -> u32 {
    use core::arch::x86_64::{_mm_crc32_u8, _mm_crc32_u64};
    let mut crc = crc;
    let mut data = data;
    if data.len() >= 3 * LANE {
        // The crc32 instruction has a latency of 3 cycles and a throughput of
        // 1: three independent lanes keep it busy.
        let t = shift_tables();
        while data.len() >= 3 * LANE {
            let (blk, rest) = data.split_at(3 * LANE);
            let (l1, l23) = blk.split_at(LANE);
            let (l2, l3) = l23.split_at(LANE);
            let (c1, c2, c3) = (
                l1.as_chunks::<8>().0,
                l2.as_chunks::<8>().0,
                l3.as_chunks::<8>().0,
            );
            let (mut a, mut b, mut c) = (u64::from(crc), 0u64, 0u64);
            for ((x, y), z) in c1.iter().zip(c2).zip(c3) {
                a = _mm_crc32_u64(a, u64::from_le_bytes(*x));
                b = _mm_crc32_u64(b, u64::from_le_bytes(*y));
                c = _mm_crc32_u64(c, u64::from_le_bytes(*z));
            }
            let ab = shift_lane(t, a as u32) ^ b as u32;
            crc = shift_lane(t, ab) ^ c as u32;
            data = rest;
        }
    }
    let (chunks, rest) = data.as_chunks::<8>();
    let mut c = u64::from(crc);
    for ch in chunks {
        c = _mm_crc32_u64(c, u64::from_le_bytes(*ch));
    }
    let mut c = c as u32;
    for &b in rest {
        c = _mm_crc32_u8(c, b);
    }
    c
}

/// Continue a CRC-32C over `data` (`crc` is the raw register, not finalised:
/// start from `!0`, finish with `!`).
#[inline]
pub(crate) fn update(crc: u32, data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU supports SSE4.2, checked just above.
            return unsafe { update_sse42(crc, data) };
        }
    }
    update_table(crc, data)
}

/// CRC-32C of `data`.
#[inline]
pub fn crc32c(data: &[u8]) -> u32 {
    !update(!0, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_inputs_agree() {
        let data: Vec<u8> = (0..20_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for n in [2303, 2304, 2305, 4096, 4164, 9000, 20_000] {
            assert_eq!(crc32c(&data[..n]), !update_table(!0, &data[..n]), "n = {n}");
        }
    }

    #[test]
    fn check_value() {
        // The standard check value of CRC-32C ("123456789").
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(!update_table(!0, b"123456789"), 0xE306_9283);
    }

    #[test]
    fn hw_and_table_agree() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3 + (i >> 8)) as u8).collect();
        for n in [0, 1, 7, 8, 9, 63, 64, 65, 767, 768, 769, 999, 1000] {
            assert_eq!(crc32c(&data[..n]), !update_table(!0, &data[..n]));
            let half = update(!0, &data[..n / 2]);
            assert_eq!(!update(half, &data[n / 2..n]), crc32c(&data[..n]));
        }
    }
}
