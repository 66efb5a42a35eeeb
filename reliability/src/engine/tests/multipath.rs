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

/// How each datagram's entropy value is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Spray {
    /// In turn, by the caller (the engine knows nothing of paths).
    InTurn,
    /// By the engine, passing over values that lost lately (§4.6).
    ByEngine,
}

/// Node 0 sends `count` messages of `len` bytes to node 1, its datagrams
/// sprayed over `paths` with 8 entropy values; every message arrives once
/// and intact, and every operation completes without error.
fn bulk(
    paths: Vec<Path>,
    spray: Spray,
    count: u64,
    len: usize,
    seed: u64,
) -> (Sim<Buffers>, Figures) {
    let by_engine = spray == Spray::ByEngine;
    let mut s = Sim::new(
        vec![Buffers::default(), Buffers::default()],
        Faults::default(),
        seed,
        |i| Config {
            paths: if by_engine { 8 } else { 1 },
            ..cfg(i)
        },
    );
    s.multipath = Some(Multipath {
        paths,
        entropy: 8,
        by_engine,
    });
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
            let (s, f) = bulk(paths.clone(), Spray::InTurn, 128, 32 * 1024, seed);
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
        let (s, f) = bulk(vec![path(10), lossy], Spray::InTurn, 128, 32 * 1024, seed);
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
/// comes back: every message still arrives once, nothing fails. Taking
/// the values in turn regardless, the transfer crawls on retransmission
/// timeouts (≈ 13 s); with the engine passing over values that lost
/// lately it keeps mostly to the live path (≈ 0.1 s).
#[test]
fn a_path_dying_mid_run_fails_nothing() {
    for seed in [1, 2, 3] {
        let dying = Path {
            dies_at: Instant(1_000_000),
            ..path(40)
        };
        let paths = vec![path(10), dying];
        let (s, in_turn) = bulk(paths.clone(), Spray::InTurn, 128, 32 * 1024, seed);
        println!(
            "40 µs path dead from 1 ms, values in turn, seed {seed}: {in_turn:?}, paths {:?}",
            s.path_counts
        );
        assert!(s.path_counts[1].lost > 100, "{:?}", s.path_counts);
        let dead_path_sent = s.path_counts[1].sent;
        let (s, avoiding) = bulk(paths, Spray::ByEngine, 128, 32 * 1024, seed);
        println!(
            "40 µs path dead from 1 ms, values by the engine, seed {seed}: {avoiding:?}, paths {:?}",
            s.path_counts
        );
        // The dead path's values are tried again only after an RTO or more.
        assert!(
            s.path_counts[1].sent * 3 < dead_path_sent,
            "{:?}",
            s.path_counts
        );
        assert!(
            avoiding.virtual_us * 20 < in_turn.virtual_us,
            "{avoiding:?}"
        );
    }
}

/// Spread by the engine over four paths of different delay, one losing
/// 5 %: every message once, few retransmissions beside the losses.
#[test]
fn the_engine_passes_over_a_lossy_path() {
    let lossy = Path {
        loss: 0.05,
        ..path(25)
    };
    for seed in [1, 2, 3] {
        let paths = vec![path(10), path(20), lossy, path(40)];
        let (s, f) = bulk(paths, Spray::ByEngine, 128, 32 * 1024, seed);
        println!(
            "4 paths by the engine, 5 % loss on one, seed {seed}: {f:?}, paths {:?}",
            s.path_counts
        );
        assert!(s.path_counts[2].lost > 0);
    }
}
