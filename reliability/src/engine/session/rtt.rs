//! Round-trip time estimation and the retransmission timeout, RFC 6298
//! (PROTOCOL.md §5.3).

use crate::api::Config;

/// Smallest RTTVAR term of the RTO (RFC 6298 §2.2–2.3 use the clock
/// granularity G): 1 µs.
const GRANULARITY_NS: u64 = 1_000;

/// The RTT estimator of one session, in nanoseconds.
#[derive(Clone, Copy, Debug)]
pub(super) struct Rtt {
    srtt: u64,
    rttvar: u64,
    /// Current RTO including back-off.
    rto: u64,
    /// Smallest sample (RACK's minimum RTT, RFC 8985 §6.2), 0 before any.
    min: u64,
    sampled: bool,
}

impl Rtt {
    /// Before any sample: `Config::rto_initial` (RFC 6298 §2.1).
    pub(super) fn new(cfg: &Config) -> Self {
        Rtt {
            srtt: 0,
            rttvar: 0,
            rto: cfg.rto_initial.0,
            min: 0,
            sampled: false,
        }
    }

    /// The current retransmission timeout, in nanoseconds.
    #[inline]
    pub(super) fn rto(&self) -> u64 {
        self.rto
    }

    /// The smallest RTT sample, ns; 0 before any.
    #[inline]
    pub(super) fn min(&self) -> u64 {
        self.min
    }

    /// SRTT + 4·RTTVAR, ns: the longest a round trip is expected to take
    /// (the RTO before clamping and back-off); 0 before any sample.
    #[inline]
    pub(super) fn upper(&self) -> u64 {
        self.srtt + 4 * self.rttvar
    }

    /// A measurement `r` (only from packets sent once: Karn's algorithm).
    /// RFC 6298 §2.2–2.3 with alpha = 1/8, beta = 1/4, K = 4; clamped to
    /// [`Config::rto_min`], [`Config::rto_max`] (§2.4, §2.5).
    pub(super) fn sample(&mut self, r: u64, cfg: &Config) {
        if self.sampled {
            let diff = self.srtt.abs_diff(r);
            self.rttvar = (3 * self.rttvar + diff) / 4;
            self.srtt = (7 * self.srtt + r) / 8;
            self.min = self.min.min(r);
        } else {
            self.srtt = r;
            self.rttvar = r / 2;
            self.min = r;
            self.sampled = true;
        }
        self.rto = self.computed(cfg);
    }

    /// Forget the back-off (the peer answered).
    pub(super) fn reset_backoff(&mut self, cfg: &Config) {
        self.rto = if self.sampled {
            self.computed(cfg)
        } else {
            cfg.rto_initial.0
        };
    }

    /// Back off the timer (RFC 6298 §5.5).
    pub(super) fn backoff(&mut self, cfg: &Config) {
        self.rto = (self.rto.saturating_mul(2))
            .min(cfg.rto_max.0)
            .max(cfg.rto_min.0);
    }

    fn computed(&self, cfg: &Config) -> u64 {
        (self.srtt + (4 * self.rttvar).max(GRANULARITY_NS)).clamp(cfg.rto_min.0, cfg.rto_max.0)
    }
}
