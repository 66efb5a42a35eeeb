//! The time an idle progress pass goes by. A pass needs the time to see
//! whether a protocol timer is due (retransmission, delayed ack: 50 µs and
//! more), and an exact one for what it receives and sends (RTT samples,
//! send times). Reading CLOCK_MONOTONIC costs ≈ 90 ns on the VMs we measure
//! on — a third of an idle `fi_cq_read` — so a pass that receives and sends
//! nothing reuses the last reading while the CPU's time-stamp counter says
//! little time has passed since: timers then fire at most a couple of
//! microseconds late, and nothing the engine times is late.

use ofi_xdp_reliability::Instant as RelInstant;

use super::monotonic_ns;

/// Time-stamp counter ticks within which the last reading stands: ≈ 1–4 µs
/// at the 1–4 GHz of current CPUs.
const GATE_TICKS: u64 = 1 << 12;

/// Passes in a row on one reading at most, whatever the counter says (a
/// counter that stopped or was not there would otherwise freeze time).
const MAX_REUSE: u32 = 64;

/// A monotonic clock from the endpoint's opening, read exactly or reused.
pub struct PassClock {
    /// [`monotonic_ns`] when the endpoint opened: the engine's time zero.
    epoch_ns: u64,
    /// The last reading.
    last: RelInstant,
    /// The counter when [`PassClock::recent`] last read the clock, and how
    /// many of its calls reused a reading since.
    last_tick: u64,
    reused: u32,
}

impl PassClock {
    pub fn new() -> PassClock {
        PassClock {
            epoch_ns: monotonic_ns(),
            last: RelInstant(0),
            last_tick: tick(),
            reused: 0,
        }
    }

    /// Nanoseconds of the epoch on CLOCK_MONOTONIC.
    pub fn epoch_ns(&self) -> u64 {
        self.epoch_ns
    }

    /// The time now, read.
    pub fn read(&self) -> RelInstant {
        RelInstant(monotonic_ns().saturating_sub(self.epoch_ns))
    }

    /// The time now, read; later [`PassClock::recent`] calls may reuse it.
    /// (The counter is not read here: this is on the path of every
    /// datagram received, and reading it costs a third of the clock here.)
    pub fn exact(&mut self) -> RelInstant {
        self.last = self.read();
        self.last
    }

    /// The time now to within [`GATE_TICKS`]: the last reading when the
    /// counter moved less than that since the last reading this call made
    /// (never later than the true time, so a timer it finds due is due).
    pub fn recent(&mut self) -> RelInstant {
        let now = tick();
        // A counter that went backwards (another CPU's) wraps to a large
        // value: read then.
        if now.wrapping_sub(self.last_tick) < GATE_TICKS && self.reused < MAX_REUSE {
            self.reused += 1;
            return self.last;
        }
        self.last_tick = now;
        self.reused = 0;
        self.exact()
    }
}

/// The CPU's time-stamp counter; where there is none, a value that always
/// looks far from the last (every pass reads the clock).
#[cfg(target_arch = "x86_64")]
fn tick() -> u64 {
    // SAFETY: RDTSC exists on every x86-64 CPU and has no side effects.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
fn tick() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(GATE_TICKS, std::sync::atomic::Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reused_reading_is_never_later_than_the_clock_and_never_goes_back() {
        let mut c = PassClock::new();
        let mut prev = c.exact();
        for _ in 0..10_000 {
            let r = c.recent();
            assert!(r >= prev);
            assert!(r <= c.read());
            prev = r;
        }
    }

    #[test]
    fn time_moves_on_even_when_every_pass_reuses() {
        let mut c = PassClock::new();
        let first = c.exact();
        std::thread::sleep(std::time::Duration::from_millis(2));
        // At most MAX_REUSE passes stand on the old reading.
        let moved = (0..=MAX_REUSE).map(|_| c.recent()).any(|t| t > first);
        assert!(moved);
    }
}
