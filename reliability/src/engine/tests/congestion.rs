//! Congestion control (PROTOCOL.md §12) in virtual time: incasts of 4 and 8
//! senders streaming 1 MiB messages to one receiver behind a bottleneck
//! link with a queue (drop-tail, and with ECN marking), against one sender
//! alone. Printed with `-- --nocapture`.

use super::*;
use crate::sim::Bottleneck;

/// Link rate: 10 Gbit/s.
const RATE: u64 = 1_250_000_000;
const MSG: usize = 1 << 20;

struct Outcome {
    /// Bytes per second over the whole run.
    aggregate: f64,
    /// Each sender's bytes per second (its bytes over its own duration).
    per_sender: Vec<f64>,
    /// Retransmitted datagrams over datagrams sent, after each sender's
    /// first message (the window has settled).
    settled_rtx: f64,
    queue_drops: u64,
}

/// Where the queue in front of the receiver is.
#[derive(Clone, Copy, Debug)]
enum Queue {
    /// The receiver's own ring (`RING` datagrams), which it grants from.
    Ring,
    /// A switch port with a 256 KB buffer, drop-tail.
    DropTail,
    /// The same, marking CE above 64 KB.
    Ecn,
}

/// The receiver's ring, datagrams.
const RING: usize = 64;

fn incast(senders: usize, msgs: usize, queue: Queue, congestion: bool) -> Outcome {
    let n = senders + 1;
    let (bytes, ecn_threshold) = match queue {
        Queue::Ring => (RING * 9000, None),
        Queue::DropTail => (256 << 10, None),
        Queue::Ecn => (256 << 10, Some(64 << 10)),
    };
    let f = Faults {
        latency: Nanos::from_micros(5),
        mtu: 9000,
        bottleneck: Some(Bottleneck {
            rate: RATE,
            queue: bytes,
            ecn_threshold,
        }),
        ..Faults::default()
    };
    let mut s = Sim::new((0..n).map(|_| Buffers::default()).collect(), f, 11, |i| {
        Config {
            mtu: 9000,
            congestion,
            rx_capacity: if matches!(queue, Queue::Ring) {
                RING
            } else {
                0
            },
            ..cfg(i)
        }
    });
    let rx = senders;
    let mut token = 0u64;
    for src in 0..senders {
        for m in 0..msgs {
            token += 1;
            let tag = Some(TagMatch {
                tag: (src * 1000 + m) as u64,
                ignore: 0,
            });
            recv(&mut s, rx, token, MSG, Some(src), tag);
            send(
                &mut s,
                src,
                rx,
                token,
                pattern(MSG, token as u8),
                Some((src * 1000 + m) as u64),
            );
        }
    }
    let start = s.now;
    let mut first_done = vec![None; senders];
    let mut last_done = vec![start; senders];
    let mut done = 0;
    let mut sent_at_settle = vec![(0u64, 0u64); senders];
    let limit = s.now + Nanos::from_secs(30);
    while done < senders * msgs {
        assert!(s.now < limit, "stuck at {done}");
        if !s.step() {
            break;
        }
        for src in 0..senders {
            for c in completions(&mut s, src) {
                assert_eq!(c.error, None);
                done += 1;
                last_done[src] = s.now;
                if first_done[src].is_none() {
                    first_done[src] = Some(s.now);
                    let st = s.nodes[src].engine.stats();
                    sent_at_settle[src] = (st.tx_datagrams, st.retransmits);
                }
            }
        }
        completions(&mut s, rx);
    }
    let per_sender = (0..senders)
        .map(|i| (msgs * MSG) as f64 / (last_done[i].since(start).0 as f64 / 1e9))
        .collect();
    let end = last_done.iter().max().copied().unwrap_or(start);
    let (mut sent, mut rtx) = (0, 0);
    for (i, &(tx0, rtx0)) in sent_at_settle.iter().enumerate() {
        let st = s.nodes[i].engine.stats();
        sent += st.tx_datagrams - tx0;
        rtx += st.retransmits - rtx0;
    }
    Outcome {
        aggregate: (senders * msgs * MSG) as f64 / (end.since(start).0 as f64 / 1e9),
        per_sender,
        settled_rtx: rtx as f64 / sent.max(1) as f64,
        queue_drops: s.counts.queue_drops,
    }
}

fn show(name: &str, o: &Outcome) -> (f64, f64) {
    let max = o.per_sender.iter().cloned().fold(0.0, f64::max);
    let min = o.per_sender.iter().cloned().fold(f64::MAX, f64::min);
    println!(
        "{name:34} aggregate {:6.0} MB/s  per sender {:5.0}..{:5.0} MB/s (max/min {:.2})  \
         retransmitted after settling {:.3} %  queue drops {}",
        o.aggregate / 1e6,
        min / 1e6,
        max / 1e6,
        max / min,
        o.settled_rtx * 100.0,
        o.queue_drops
    );
    (o.aggregate, max / min)
}

#[test]
fn incast_converges_to_a_fair_share_without_a_retransmission_storm() {
    for queue in [Queue::Ring, Queue::DropTail, Queue::Ecn] {
        let one = incast(1, 16, queue, true);
        show(&format!("1 sender, {queue:?}"), &one);
        for senders in [4, 8] {
            let o = incast(senders, 16 / senders * 2, queue, true);
            let (aggregate, spread) = show(&format!("{senders} senders, {queue:?}"), &o);
            assert!(
                aggregate >= 0.95 * one.aggregate,
                "aggregate below one sender's"
            );
            assert!(spread <= 2.0, "unfair");
            assert!(o.settled_rtx < 0.01, "retransmission storm");
        }
        // Without congestion control, for comparison.
        let o = incast(8, 4, queue, false);
        show(&format!("8 senders, {queue:?}, no congestion control"), &o);
    }
}
