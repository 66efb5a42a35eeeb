//! Datagrams sprayed over several paths of different delay (PROTOCOL.md
//! §4.6, §5.3): reordering by the paths' skew is the normal case, not loss;
//! loss on one path, or a path that dies, costs retransmissions and
//! nothing else.

use super::*;
use crate::sim::{Multipath, Path};

/// A path of one-way `latency_us` µs carrying 10 Gbit/s towards each node.
fn path(latency_us: u64) -> Path {
    Path {
        latency: Nanos::from_micros(latency_us),
        jitter: Nanos::from_micros(1),
        rate: 1_250_000_000,
        ..Path::default()
    }
}

/// What a bulk transfer cost.
#[derive(Debug)]
#[allow(dead_code)] // printed
struct Figures {
    datagrams: u64,
    retransmits: u64,
    fast_retransmits: u64,
    timeouts: u64,
    cwnd_reductions: u64,
    /// Packets the receiver got twice: every one a retransmission that was
    /// not needed (the network duplicates nothing here).
    duplicates: u64,
    virtual_us: u64,
}

/// Node 0 sends `count` messages of `len` bytes to node 1, its datagrams
/// sprayed over `paths` with 8 entropy values; every message arrives once
/// and intact, and every operation completes without error.
fn bulk(paths: Vec<Path>, count: u64, len: usize, seed: u64) -> (Sim<Buffers>, Figures) {
    let mut s = sim(2, Faults::default(), seed);
    s.multipath = Some(Multipath { paths, entropy: 8 });
    for t in 0..count {
        recv(&mut s, 1, t, len, None, None);
        send(&mut s, 0, 1, t, pattern(len, t as u8), None);
    }
    let start = s.now;
    let limit = s.now + Nanos::from_secs(60);
    let mut sent = 0;
    let mut got = 0;
    let done = s.run_until(limit, |s| {
        for c in completions(s, 0) {
            assert_eq!(c.error, None, "send {c:?}");
            sent += 1;
        }
        for c in completions(s, 1) {
            assert_eq!(c.error, None, "recv {c:?}");
            assert_eq!(c.len, len);
            got += 1;
        }
        sent == count && got == count
    });
    assert!(done, "{sent} sends, {got} receives of {count} completed");
    let virtual_us = s.now.since(start).0 / 1_000;
    // Nothing more: no message twice, no late error.
    let quiet = s.now + Nanos::from_secs(1);
    s.run_until(quiet, |_| false);
    assert!(s.events(0).is_empty() && s.events(1).is_empty());
    for t in 0..count {
        assert!(
            s.nodes[1].app.recv[&t] == pattern(len, t as u8),
            "message {t}"
        );
    }
    let tx = s.nodes[0].engine.stats();
    let rx = s.nodes[1].engine.stats();
    let f = Figures {
        datagrams: tx.tx_datagrams,
        retransmits: tx.retransmits,
        fast_retransmits: tx.fast_retransmits,
        timeouts: tx.timeouts,
        cwnd_reductions: tx.cwnd_reductions,
        duplicates: rx.duplicates,
        virtual_us,
    };
    (s, f)
}

/// 2 and 4 paths, the slowest 4× the fastest, nothing lost: the transfer
/// completes with (almost) no retransmission and no window cut for loss.
/// Three later packets selectively acknowledged (the rule before time-based
/// detection) retransmitted here again and again.
#[test]
fn skewed_paths_without_loss_retransmit_next_to_nothing() {
    for (name, paths) in [
        ("2 paths 10/40 µs", vec![path(10), path(40)]),
        (
            "4 paths 10/20/30/40 µs",
            vec![path(10), path(20), path(30), path(40)],
        ),
    ] {
        for seed in [1, 2, 3] {
            let (s, f) = bulk(paths.clone(), 128, 32 * 1024, seed);
            println!("{name}, seed {seed}: {f:?}, paths {:?}", s.path_counts);
            assert!(
                s.path_counts.iter().all(|p| p.sent > 100),
                "{:?}",
                s.path_counts
            );
            assert_eq!(f.timeouts, 0);
            // Spurious retransmissions while the reordering window learns
            // the skew: well under one per hundred datagrams.
            assert!(f.retransmits * 100 <= f.datagrams, "{f:?}");
            assert_eq!(f.duplicates, f.retransmits);
        }
    }
}

/// One path of two loses 5 %: every message arrives once and intact, the
/// losses found by time rather than by the retransmission timeout.
#[test]
fn loss_on_one_path_delivers_everything_once() {
    let lossy = Path {
        loss: 0.05,
        ..path(40)
    };
    for seed in [1, 2, 3] {
        let (s, f) = bulk(vec![path(10), lossy], 128, 32 * 1024, seed);
        println!(
            "5 % loss on the 40 µs path, seed {seed}: {f:?}, paths {:?}",
            s.path_counts
        );
        let lost = s.path_counts[1].lost;
        assert!(lost > 50, "{:?}", s.path_counts);
        assert!(f.retransmits >= lost / 2, "{f:?}");
        assert!(f.fast_retransmits > 5 * f.timeouts, "{f:?}");
    }
}

/// The slower of two paths dies a quarter into the transfer and never
/// comes back: every message still arrives once, nothing fails.
#[test]
fn a_path_dying_mid_run_fails_nothing() {
    for seed in [1, 2, 3] {
        let dying = Path {
            dies_at: Instant(1_000_000),
            ..path(40)
        };
        let (s, f) = bulk(vec![path(10), dying], 128, 32 * 1024, seed);
        println!(
            "40 µs path dead from 1 ms, seed {seed}: {f:?}, paths {:?}",
            s.path_counts
        );
        assert!(s.path_counts[1].lost > 100, "{:?}", s.path_counts);
    }
}
