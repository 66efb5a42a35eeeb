//! Single-copy rendezvous (PROTOCOL.md §6.7) through the simulated network
//! with a fake `process_vm_readv` ([`PullHost`]): pulled messages, the
//! fallback to CTS when a pull fails, loss and duplication of the control
//! messages, and the sender dying before the pull.

use super::*;
use crate::sim::{PullHost, Sim};

/// Two nodes on one simulated host: both offer and pull.
fn same_host(faults: Faults, seed: u64) -> (Sim<Buffers>, PullHost) {
    let mut s = sim(2, faults, seed);
    let host = PullHost::default();
    for (i, n) in s.nodes.iter_mut().enumerate() {
        n.app.host = Some(host.clone());
        n.app.pid = 1000 + i as u32;
    }
    (s, host)
}

fn send_level(s: &mut Sim<Buffers>, token: u64, data: Vec<u8>, level: CompletionLevel) {
    let len = data.len();
    s.nodes[0].app.send.insert(token, data);
    let now = s.now;
    let op = SendOp {
        token,
        dst: 1,
        payload: Payload::Buffer { len },
        tag: Some(token),
        data: None,
        level,
        fence: false,
    };
    s.nodes[0].engine.post_send(now, op).unwrap();
}

const SIZES: [usize; 4] = [64 * 1024 + 1, 100_000, 1 << 20, 3 << 20];

/// Payload bytes that crossed the simulated network.
fn payload_bytes(s: &Sim<Buffers>) -> u64 {
    s.counts.delivered_bytes
}

#[test]
fn rendezvous_messages_are_pulled_posted_or_unexpected() {
    let (mut s, _host) = same_host(Faults::default(), 1);
    // Half the receives posted first, half after the requests arrived.
    for (i, &n) in SIZES.iter().enumerate() {
        if i % 2 == 0 {
            recv(&mut s, 1, i as u64, n, None, Some(tag(i)));
        }
        let level = if i == 1 {
            CompletionLevel::Delivery
        } else {
            CompletionLevel::Transmit
        };
        send_level(&mut s, i as u64, pattern(n, i as u8), level);
    }
    run(&mut s);
    for (i, &n) in SIZES.iter().enumerate() {
        if i % 2 == 1 {
            recv(&mut s, 1, i as u64, n, None, Some(tag(i)));
        }
    }
    run(&mut s);
    let total: usize = SIZES.iter().sum();
    assert!(
        payload_bytes(&s) < (total / 100) as u64,
        "the data did not cross the network"
    );
    let c1 = completions(&mut s, 1);
    assert_eq!(c1.len(), SIZES.len());
    for c in &c1 {
        let i = c.token as usize;
        assert_eq!((c.error, c.len, c.tag), (None, SIZES[i], i as u64));
        assert_eq!(s.nodes[1].app.recv[&c.token], pattern(SIZES[i], i as u8));
    }
    let c0 = completions(&mut s, 0);
    assert_eq!(c0.len(), SIZES.len());
    assert!(c0.iter().all(|c| c.error.is_none()));
    let st = s.nodes[1].engine.stats();
    assert_eq!((st.pulls, st.pull_fallbacks), (SIZES.len() as u64, 0));
}

fn tag(i: usize) -> TagMatch {
    TagMatch {
        tag: i as u64,
        ignore: 0,
    }
}

#[test]
fn pulled_message_truncated_like_any_other() {
    let (mut s, _host) = same_host(Faults::default(), 2);
    recv(&mut s, 1, 7, 80_000, None, Some(tag(7)));
    send_level(&mut s, 7, pattern(200_000, 3), CompletionLevel::Delivery);
    run(&mut s);
    let c1 = completions(&mut s, 1);
    assert_eq!(c1.len(), 1);
    assert_eq!(c1[0].error, Some(OpError::Truncated));
    assert_eq!((c1[0].len, c1[0].olen), (80_000, 120_000));
    assert_eq!(s.nodes[1].app.recv[&7], pattern(200_000, 3)[..80_000]);
    let c0 = completions(&mut s, 0);
    assert_eq!((c0.len(), c0[0].error, c0[0].len), (1, None, 200_000));
    assert_eq!(s.nodes[1].engine.stats().pulls, 1);
}

/// Posts a receive for each of [`SIZES`] at node 1, then sends each from
/// node 0 at `level`, runs, and checks that every message arrived whole
/// and every send completed without error.
fn every_size_arrives(s: &mut Sim<Buffers>, level: CompletionLevel) {
    for (i, &n) in SIZES.iter().enumerate() {
        recv(s, 1, i as u64, n, None, Some(tag(i)));
        send_level(s, i as u64, pattern(n, i as u8), level);
    }
    run(s);
    let c1 = completions(s, 1);
    assert_eq!(c1.len(), SIZES.len());
    for c in &c1 {
        let i = c.token as usize;
        assert_eq!((c.error, c.len), (None, SIZES[i]));
        assert_eq!(s.nodes[1].app.recv[&c.token], pattern(SIZES[i], i as u8));
    }
    let c0 = completions(s, 0);
    assert_eq!(c0.len(), SIZES.len());
    assert!(c0.iter().all(|c| c.error.is_none()));
}

#[test]
fn failed_pull_falls_back_to_the_link() {
    let (mut s, _host) = same_host(Faults::default(), 3);
    s.nodes[1].app.pull_fails = true;
    every_size_arrives(&mut s, CompletionLevel::Delivery);
    let st = s.nodes[1].engine.stats();
    assert_eq!((st.pulls, st.pull_fallbacks), (0, SIZES.len() as u64));
    assert!(payload_bytes(&s) >= SIZES.iter().sum::<usize>() as u64);
}

#[test]
fn pulls_survive_loss_and_duplication() {
    let f = Faults {
        loss: 0.2,
        dup: 0.2,
        corrupt: 0.02,
        jitter: Nanos::from_micros(30),
        split: 0.5,
        ..Faults::default()
    };
    for seed in 10..16 {
        let (mut s, _host) = same_host(f, seed);
        every_size_arrives(&mut s, CompletionLevel::Transmit);
        // Each message pulled exactly once, whatever was duplicated.
        let st = s.nodes[1].engine.stats();
        assert_eq!((st.pulls, st.pull_fallbacks), (SIZES.len() as u64, 0));
        assert_eq!(s.nodes[1].app.pulls_tried, SIZES.len() as u64);
    }
}

#[test]
fn sender_dead_before_the_pull_fails_the_receive() {
    let (mut s, host) = same_host(Faults::default(), 4);
    send_level(&mut s, 1, pattern(1 << 20, 1), CompletionLevel::Transmit);
    run(&mut s);
    // The request is queued unexpected; then the sender's process dies.
    host.kill(1000);
    s.partition(0, 1, Nanos::from_secs(1 << 20));
    recv(&mut s, 1, 1, 1 << 20, None, Some(tag(1)));
    run(&mut s);
    let c1 = completions(&mut s, 1);
    assert_eq!(c1.len(), 1);
    assert_eq!(c1[0].error, Some(OpError::PeerUnreachable));
    let st = s.nodes[1].engine.stats();
    assert_eq!((st.pulls, st.pull_fallbacks), (0, 1));
}

#[test]
fn no_offer_without_a_host() {
    // The default: no pull offers, the data crosses the link (§6.3).
    let mut s = sim(2, Faults::default(), 5);
    recv(&mut s, 1, 1, 1 << 20, None, None);
    send(&mut s, 0, 1, 1, pattern(1 << 20, 9), None);
    run(&mut s);
    assert_eq!(completions(&mut s, 1)[0].error, None);
    assert_eq!(s.nodes[1].app.recv[&1], pattern(1 << 20, 9));
    assert_eq!(s.nodes[1].app.pulls_tried, 0);
}

#[test]
fn offers_travel_sealed_with_authentication() {
    // With a job key the request (and its offer) is encrypted and
    // authenticated like any payload, CTS|PULLED like any CTS (§11.3).
    let f = Faults {
        loss: 0.05,
        dup: 0.05,
        ..Faults::default()
    };
    let mut s = Sim::new((0..2).map(|_| Buffers::default()).collect(), f, 6, |i| {
        Config {
            auth: Some(AuthConfig {
                key: b"job key: sixteen bytes or more".to_vec(),
                encrypt: true,
            }),
            ..cfg(i)
        }
    });
    let host = PullHost::default();
    for (i, n) in s.nodes.iter_mut().enumerate() {
        n.app.host = Some(host.clone());
        n.app.pid = 1000 + i as u32;
    }
    every_size_arrives(&mut s, CompletionLevel::Delivery);
    let st = s.nodes[1].engine.stats();
    assert_eq!((st.pulls, st.pull_fallbacks), (SIZES.len() as u64, 0));
    assert_eq!(st.auth_rejected, 0);
}

#[test]
fn multi_recv_buffer_takes_pulled_messages_at_their_offsets() {
    let (mut s, _host) = same_host(Faults::default(), 7);
    let len = 3 << 20;
    multi_recv(&mut s, 1, 1, len, 1 << 20);
    // 1 MiB, 1 MiB, then 1.5 MiB of which the 1 MiB left fits (truncated,
    // and the buffer released: less than 1 MiB would be left).
    let sizes = [1 << 20, 1 << 20, 3 << 19];
    for (i, &n) in sizes.iter().enumerate() {
        send(&mut s, 0, 1, 10 + i as u64, pattern(n, i as u8), None);
    }
    run(&mut s);
    let c = completions(&mut s, 1);
    assert_eq!(c.len(), 3, "{c:?}");
    for (i, c) in c.iter().enumerate() {
        let at = i << 20;
        assert_eq!((c.token, c.buf_offset, c.len), (1, at, 1 << 20));
        assert_eq!(
            s.nodes[1].app.recv[&1][at..at + (1 << 20)],
            pattern(sizes[i], i as u8)[..1 << 20]
        );
        assert_eq!(c.flags.contains(Flags::MULTI_RECV), i == 2);
    }
    assert_eq!(c[2].error, Some(OpError::Truncated));
    assert_eq!(s.nodes[1].engine.stats().pulls, 3);
    assert!(completions(&mut s, 0).iter().all(|c| c.error.is_none()));
}
