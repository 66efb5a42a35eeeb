//! Retransmissions once the window has settled: an incast starts with
//! every sender's window at its initial size, and the losses while the
//! congestion windows converge (`reliability/PROTOCOL.md` §12) say little
//! about the steady state. A sampler reads each sender's counters while it
//! runs — `xdp`: the endpoint's live statistics file, `tcp`: its
//! namespace's `/proc/<pid>/net/snmp` — so that what was sent and
//! retransmitted after the first quarter of a sender's datagrams can be
//! told from the whole run's.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the counters are read.
const PERIOD: Duration = Duration::from_millis(10);

/// The share of a sender's datagrams after which its window counts as
/// settled.
pub const SETTLED_AFTER: f64 = 0.25;

/// (sent, retransmitted) as a sender's counters said at one instant.
pub type Sample = (u64, u64);

/// Reads every sender's counters every [`PERIOD`] until stopped.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Vec<Vec<Sample>>>>,
}

impl Sampler {
    /// Samples the senders with these pids, counted as `provider` counts.
    pub fn start(provider: &str, pids: Vec<u32>) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let xdp = provider == "xdp";
        let thread = std::thread::spawn(move || {
            let mut series = vec![Vec::new(); pids.len()];
            while !flag.load(Ordering::Relaxed) {
                for (s, pid) in series.iter_mut().zip(&pids) {
                    let now = if xdp {
                        engine_counters(*pid)
                    } else {
                        tcp_counters(*pid)
                    };
                    if let Some(v) = now {
                        s.push(v);
                    }
                }
                std::thread::sleep(PERIOD);
            }
            series
        });
        Sampler {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops sampling: each sender's samples, in time order.
    pub fn finish(mut self) -> Vec<Vec<Sample>> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// What a sender sent and retransmitted after the first sample at which it
/// had sent [`SETTLED_AFTER`] of what it sent in the run, given its
/// counters before the run (`tcp`: its namespace's, from earlier runs) and
/// at its end; `None` when no sample got that far before the counters went
/// away.
pub fn settled(samples: &[Sample], before: Sample, last: Sample) -> Option<Sample> {
    let in_run = last.0.saturating_sub(before.0);
    let mark = before.0 + (in_run as f64 * SETTLED_AFTER) as u64;
    let &(s0, r0) = samples.iter().find(|(s, _)| *s >= mark && *s < last.0)?;
    Some((last.0.saturating_sub(s0), last.1.saturating_sub(r0)))
}

/// `tx_datagrams` and `retransmits` of the endpoint statistics file of
/// process `pid` (its first endpoint).
fn engine_counters(pid: u32) -> Option<Sample> {
    let dir = Path::new(ofi_xdp_epstats::DEFAULT_DIR);
    let stats = ofi_xdp_epstats::read(&ofi_xdp_epstats::file_path(dir, pid, 0)).ok()?;
    Some((stats.value("tx_datagrams")?, stats.value("retransmits")?))
}

/// `Tcp: OutSegs RetransSegs` of process `pid`'s network namespace.
fn tcp_counters(pid: u32) -> Option<Sample> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/net/snmp")).ok()?;
    crate::incast::tcp_fields(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settled_counts_from_the_first_sample_past_a_quarter() {
        let samples = [(0, 0), (10, 4), (30, 6), (60, 7), (100, 7)];
        // A quarter of 100 is 25: counted from (30, 6).
        assert_eq!(settled(&samples, (0, 0), (100, 8)), Some((70, 2)));
        // Counters that did not start at zero: a quarter of 100 past 1000.
        let shifted = [(1000, 50), (1020, 53), (1040, 55), (1100, 55)];
        assert_eq!(settled(&shifted, (1000, 50), (1100, 56)), Some((60, 1)));
        // Nothing sampled between a quarter and the end.
        assert_eq!(settled(&[(0, 0), (100, 3)], (0, 0), (100, 3)), None);
        assert_eq!(settled(&[], (0, 0), (100, 3)), None);
    }
}
