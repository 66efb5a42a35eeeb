//! Virtual time. The engine never reads a clock: every entry point takes `now`.

use core::ops::{Add, Sub};

/// A point in time, in nanoseconds since an arbitrary epoch chosen by the caller
/// (the provider uses `CLOCK_MONOTONIC`, tests use a virtual clock starting at 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(pub u64);

/// A span of time in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Nanos(pub u64);

impl Nanos {
    /// `n` microseconds.
    pub const fn from_micros(n: u64) -> Self {
        Nanos(n * 1_000)
    }
    /// `n` milliseconds.
    pub const fn from_millis(n: u64) -> Self {
        Nanos(n * 1_000_000)
    }
    /// `n` seconds.
    pub const fn from_secs(n: u64) -> Self {
        Nanos(n * 1_000_000_000)
    }
}

impl Instant {
    /// The far future: used as "no deadline".
    pub const NEVER: Instant = Instant(u64::MAX);

    /// Time elapsed since `earlier`, zero if `earlier` is later.
    #[inline]
    pub fn since(self, earlier: Instant) -> Nanos {
        Nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Nanos> for Instant {
    type Output = Instant;
    #[inline]
    fn add(self, d: Nanos) -> Instant {
        Instant(self.0.saturating_add(d.0))
    }
}

impl Sub<Instant> for Instant {
    type Output = Nanos;
    #[inline]
    fn sub(self, o: Instant) -> Nanos {
        self.since(o)
    }
}
