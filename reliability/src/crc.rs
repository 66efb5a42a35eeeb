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

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
fn update_sse42(crc: u32, data: &[u8]) -> u32 {
    use core::arch::x86_64::{_mm_crc32_u8, _mm_crc32_u64};
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

/// Continue a CRC-32C over `data` (`crc` is the raw register, not finalised).
#[inline]
fn update(crc: u32, data: &[u8]) -> u32 {
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

/// CRC-32C of the concatenation `a ‖ b`.
#[inline]
pub fn crc32c2(a: &[u8], b: &[u8]) -> u32 {
    !update(update(!0, a), b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_value() {
        // The standard check value of CRC-32C ("123456789").
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(!update_table(!0, b"123456789"), 0xE306_9283);
    }

    #[test]
    fn hw_and_table_agree() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        for n in [0, 1, 7, 8, 9, 63, 64, 65, 999, 1000] {
            assert_eq!(crc32c(&data[..n]), !update_table(!0, &data[..n]));
            assert_eq!(crc32c2(&data[..n / 2], &data[n / 2..n]), crc32c(&data[..n]));
        }
    }
}
