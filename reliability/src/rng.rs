//! Seeded pseudo-random numbers (SplitMix64). The engine takes its seed from
//! [`crate::Config::seed`]; it never reads an entropy source itself.

/// SplitMix64 generator (Steele, Lea, Flood 2014): tiny, fast, good enough for
/// session identifiers, which only need to differ between sessions.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A random non-zero `u32` (zero means "unknown session" on the wire).
    pub fn nonzero_u32(&mut self) -> u32 {
        loop {
            let v = (self.next_u64() >> 32) as u32;
            if v != 0 {
                return v;
            }
        }
    }
}
