//! Unit tests of the engine through the simulated network.

use crate::sim::{Buffers, Faults, Sim};
use crate::*;

fn cfg(i: usize) -> Config {
    Config {
        incarnation: 100 + i as u32,
        seed: 7 + i as u64,
        ..Config::default()
    }
}

fn sim(n: usize, faults: Faults, seed: u64) -> Sim<Buffers> {
    Sim::new(
        (0..n).map(|_| Buffers::default()).collect(),
        faults,
        seed,
        cfg,
    )
}

/// One node per entry of `mtus` (its `Config::mtu`), on a link that drops
/// datagrams above `link_mtu` and loses `loss` of the rest.
fn sim_with_mtus(mtus: &[usize], link_mtu: usize, loss: f64, seed: u64) -> Sim<Buffers> {
    let f = Faults {
        mtu: link_mtu,
        loss,
        ..Faults::default()
    };
    let apps = mtus.iter().map(|_| Buffers::default()).collect();
    Sim::new(apps, f, seed, |i| Config {
        mtu: mtus[i],
        ..cfg(i)
    })
}

fn pattern(len: usize, salt: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt) ^ (i >> 8) as u8)
        .collect()
}

fn send(s: &mut Sim<Buffers>, from: usize, to: usize, token: u64, data: Vec<u8>, tag: Option<u64>) {
    let len = data.len();
    s.nodes[from].app.send.insert(token, data);
    let now = s.now;
    s.nodes[from]
        .engine
        .post_send(
            now,
            SendOp {
                token,
                dst: to,
                payload: Payload::Buffer { len },
                tag,
                data: Some(token),
                level: CompletionLevel::Transmit,
            },
        )
        .unwrap();
}

fn recv(
    s: &mut Sim<Buffers>,
    at: usize,
    token: u64,
    len: usize,
    src: Option<usize>,
    tag: Option<TagMatch>,
) {
    s.nodes[at].app.recv.insert(token, vec![0; len]);
    let node = &mut s.nodes[at];
    node.engine
        .post_recv(
            RecvOp {
                token,
                len,
                src,
                tag,
                multi_recv: None,
            },
            &mut node.app,
        )
        .unwrap();
}

fn completions(s: &mut Sim<Buffers>, i: usize) -> Vec<Completion<usize>> {
    s.events(i)
        .into_iter()
        .filter_map(|e| match e {
            Event::Completion(c) => Some(c),
            _ => None,
        })
        .collect()
}

fn run(s: &mut Sim<Buffers>) {
    let limit = s.now + Nanos::from_secs(60);
    s.run_until(limit, |_| false);
}

/// Two endpoints with a session: one 10-byte message 0 → 1 delivered and
/// its completions drained.
fn established(seed: u64) -> Sim<Buffers> {
    let mut s = sim(2, Faults::default(), seed);
    recv(&mut s, 1, 1, 10, None, None);
    send(&mut s, 0, 1, 1, pattern(10, 0), None);
    run(&mut s);
    assert_eq!(completions(&mut s, 0)[0].error, None);
    completions(&mut s, 1);
    s
}

#[test]
fn send_recv_untagged_and_tagged() {
    let mut s = sim(2, Faults::default(), 1);
    recv(&mut s, 1, 1, 100, None, None);
    recv(
        &mut s,
        1,
        2,
        100,
        None,
        Some(TagMatch {
            tag: 0x50,
            ignore: 0x0F,
        }),
    );
    send(&mut s, 0, 1, 10, pattern(40, 1), Some(0x5A));
    send(&mut s, 0, 1, 11, pattern(30, 2), None);
    run(&mut s);
    let c1 = completions(&mut s, 1);
    assert_eq!(c1.len(), 2);
    let t = c1.iter().find(|c| c.token == 2).unwrap();
    assert_eq!(t.len, 40);
    assert_eq!(t.tag, 0x5A);
    assert!(
        t.flags
            .contains(Flags::RECV | Flags::TAGGED | Flags::REMOTE_CQ_DATA)
    );
    assert_eq!(t.data, 10);
    assert_eq!(t.src, Some(0));
    assert_eq!(&s.nodes[1].app.recv[&2][..40], &pattern(40, 1)[..]);
    assert_eq!(&s.nodes[1].app.recv[&1][..30], &pattern(30, 2)[..]);
    let c0 = completions(&mut s, 0);
    assert_eq!(c0.len(), 2);
    assert!(
        c0.iter()
            .all(|c| c.error.is_none() && c.flags.contains(Flags::SEND))
    );
}

#[test]
fn large_messages_under_loss_eager_and_rendezvous() {
    let f = Faults {
        loss: 0.1,
        dup: 0.05,
        corrupt: 0.01,
        jitter: Nanos::from_micros(30),
        split: 0.5,
        ..Faults::default()
    };
    let mut s = sim(2, f, 2);
    let sizes = [
        0usize,
        1,
        1400,
        1500,
        20_000,
        64 * 1024,
        64 * 1024 + 1,
        300_000,
        2 << 20,
    ];
    for (i, &n) in sizes.iter().enumerate() {
        recv(&mut s, 1, i as u64, n, None, None);
        send(&mut s, 0, 1, 100 + i as u64, pattern(n, i as u8), None);
    }
    run(&mut s);
    let c1 = completions(&mut s, 1);
    assert_eq!(c1.len(), sizes.len());
    for (k, c) in c1.iter().enumerate() {
        // SAS: matched (and for same-size-class completing) in order.
        let i = c.token as usize;
        assert_eq!(c.error, None);
        assert_eq!(c.len, sizes[i]);
        assert_eq!(c.data, 100 + i as u64, "completion {k}");
        assert_eq!(s.nodes[1].app.recv[&(i as u64)], pattern(sizes[i], i as u8));
    }
    assert_eq!(completions(&mut s, 0).len(), sizes.len());
    let st = s.nodes[0].engine.stats();
    assert!(st.retransmits > 0);
    assert!(s.nodes[1].engine.stats().corrupt > 0 || s.counts.corrupted == 0);
}

#[test]
fn unexpected_then_receive_and_truncation() {
    let mut s = sim(2, Faults::default(), 3);
    send(&mut s, 0, 1, 1, pattern(5000, 3), None); // eager, unexpected, segmented
    send(&mut s, 0, 1, 2, pattern(100_000, 4), None); // rendezvous, unexpected
    send(&mut s, 0, 1, 3, pattern(50, 5), None);
    run(&mut s);
    assert_eq!(s.nodes[1].engine.unexpected_count(), 3);
    assert!(completions(&mut s, 1).is_empty());
    recv(&mut s, 1, 10, 5000, None, None);
    recv(&mut s, 1, 11, 60_000, None, None); // truncates the rendezvous message
    recv(&mut s, 1, 12, 10, None, None); // truncates
    run(&mut s);
    let c = completions(&mut s, 1);
    assert_eq!(c.len(), 3);
    let by = |t| c.iter().find(|c| c.token == t).unwrap();
    assert_eq!(by(10).error, None);
    assert_eq!(s.nodes[1].app.recv[&10], pattern(5000, 3));
    assert_eq!(by(11).error, Some(OpError::Truncated));
    assert_eq!(by(11).olen, 40_000);
    assert_eq!(by(11).len, 60_000);
    assert_eq!(s.nodes[1].app.recv[&11], pattern(100_000, 4)[..60_000]);
    assert_eq!(by(12).error, Some(OpError::Truncated));
    assert_eq!(by(12).olen, 40);
    assert_eq!(s.nodes[1].app.recv[&12], pattern(50, 5)[..10]);
    assert_eq!(completions(&mut s, 0).len(), 3);
    assert_eq!(s.nodes[1].engine.stats().unexpected_bytes, 0);
}

#[test]
fn directed_receive_and_any_source() {
    let mut s = sim(3, Faults::default(), 4);
    recv(&mut s, 2, 1, 64, Some(1), None);
    recv(&mut s, 2, 2, 64, None, None);
    send(&mut s, 0, 2, 10, pattern(8, 0), None);
    run(&mut s);
    send(&mut s, 1, 2, 11, pattern(8, 1), None);
    run(&mut s);
    let c = completions(&mut s, 2);
    assert_eq!(c.len(), 2);
    assert_eq!(c.iter().find(|c| c.token == 1).unwrap().src.unwrap(), 1);
    assert_eq!(c.iter().find(|c| c.token == 2).unwrap().src.unwrap(), 0);
}

#[test]
fn multi_recv_places_successively_and_releases() {
    let mut s = sim(2, Faults::default(), 5);
    s.nodes[1].app.recv.insert(1, vec![0; 1000]);
    let node = &mut s.nodes[1];
    node.engine
        .post_recv(
            RecvOp {
                token: 1,
                len: 1000,
                src: None,
                tag: None,
                multi_recv: Some(300),
            },
            &mut node.app,
        )
        .unwrap();
    for i in 0..4 {
        send(&mut s, 0, 1, i, pattern(200, i as u8), None);
    }
    run(&mut s);
    let c = completions(&mut s, 1);
    assert_eq!(c.len(), 4, "{c:?}");
    for (i, c) in c.iter().enumerate() {
        assert_eq!(c.token, 1);
        assert_eq!(c.buf_offset, i * 200);
        assert_eq!(c.len, 200);
        // 1000 - 800 = 200 < 300 after the 4th: released on it.
        assert_eq!(c.flags.contains(Flags::MULTI_RECV), i == 3);
        assert_eq!(
            s.nodes[1].app.recv[&1][i * 200..(i + 1) * 200],
            pattern(200, i as u8)[..]
        );
    }
    assert_eq!(s.nodes[1].engine.recvs_posted(), 0);
}

#[test]
fn peek_claim_discard() {
    let mut s = sim(2, Faults::default(), 6);
    send(&mut s, 0, 1, 1, pattern(10, 1), Some(7));
    send(&mut s, 0, 1, 2, pattern(20, 2), Some(8));
    send(&mut s, 0, 1, 3, pattern(30, 3), Some(9));
    run(&mut s);
    let tm = |t| Some(TagMatch { tag: t, ignore: 0 });
    s.nodes[1].engine.peek(50, None, tm(99), PeekMode::Peek);
    s.nodes[1].engine.peek(51, None, tm(8), PeekMode::Peek);
    s.nodes[1]
        .engine
        .peek(52, None, tm(8), PeekMode::Claim { key: 77 });
    s.nodes[1].engine.peek(53, None, tm(9), PeekMode::Discard);
    let c = completions(&mut s, 1);
    assert_eq!(c[0].error, Some(OpError::NoMessage));
    assert_eq!((c[1].len, c[1].tag, c[1].data), (20, 8, 2));
    assert!(c[2].flags.contains(Flags::CLAIM));
    assert!(c[3].flags.contains(Flags::DISCARD));
    // Claimed: a normal receive does not see it.
    recv(&mut s, 1, 60, 100, None, tm(8));
    assert!(completions(&mut s, 1).is_empty());
    s.nodes[1].app.recv.insert(61, vec![0; 100]);
    let node = &mut s.nodes[1];
    node.engine
        .claim(
            RecvOp {
                token: 61,
                len: 100,
                src: None,
                tag: tm(8),
                multi_recv: None,
            },
            77,
            false,
            &mut node.app,
        )
        .unwrap();
    let c = completions(&mut s, 1);
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].token, 61);
    assert_eq!(s.nodes[1].app.recv[&61][..20], pattern(20, 2)[..]);
    assert_eq!(s.nodes[1].engine.unexpected_count(), 1); // tag 7 remains
    assert!(s.nodes[1].engine.cancel_recv(60));
    let c = completions(&mut s, 1);
    assert_eq!(c[0].error, Some(OpError::Canceled));
    assert!(!s.nodes[1].engine.cancel_recv(60));
}

#[test]
fn receiver_not_ready_then_recovers() {
    let mut s = Sim::new(
        vec![Buffers::default(), Buffers::default()],
        Faults::default(),
        7,
        |i| Config {
            unexpected_budget: 10_000,
            unexpected_max: 4,
            ..cfg(i)
        },
    );
    for i in 0..20 {
        send(&mut s, 0, 1, i, pattern(3000, i as u8), None);
    }
    let limit = s.now + Nanos::from_millis(50);
    s.run_until(limit, |_| false);
    assert!(s.nodes[1].engine.stats().rnr_sent > 0);
    assert!(s.nodes[1].engine.stats().unexpected_bytes_max <= 10_000);
    for i in 0..20 {
        recv(&mut s, 1, 100 + i, 3000, None, None);
    }
    run(&mut s);
    let c = completions(&mut s, 1);
    assert_eq!(c.len(), 20);
    for c in &c {
        let i = c.token - 100;
        assert_eq!(c.data, i, "order");
        assert_eq!(s.nodes[1].app.recv[&c.token], pattern(3000, i as u8));
    }
    assert_eq!(completions(&mut s, 0).len(), 20);
}

#[test]
fn unreachable_peer_fails_sends() {
    let mut s = sim(2, Faults::default(), 8);
    s.partition(0, 1, Nanos::from_secs(3600));
    send(&mut s, 0, 1, 1, pattern(10, 0), None);
    run(&mut s);
    let c = completions(&mut s, 0);
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].error, Some(OpError::PeerUnreachable));
    // After established, too.
    let mut s = sim(2, Faults::default(), 9);
    recv(&mut s, 1, 1, 10, None, None);
    send(&mut s, 0, 1, 1, pattern(10, 0), None);
    run(&mut s);
    assert_eq!(completions(&mut s, 0)[0].error, None);
    s.partition(0, 1, Nanos::from_secs(3600));
    send(&mut s, 0, 1, 2, pattern(10, 0), None);
    run(&mut s);
    assert_eq!(
        completions(&mut s, 0)[0].error,
        Some(OpError::PeerUnreachable)
    );
}

#[test]
fn short_partition_is_survived() {
    let mut s = established(10);
    s.partition(0, 1, Nanos::from_millis(300));
    for i in 0..5 {
        recv(&mut s, 1, 10 + i, 2000, None, None);
        send(&mut s, 0, 1, 10 + i, pattern(2000, i as u8), None);
    }
    run(&mut s);
    assert_eq!(
        completions(&mut s, 0)
            .iter()
            .filter(|c| c.error.is_none())
            .count(),
        5
    );
    assert_eq!(completions(&mut s, 1).len(), 5);
}

#[test]
fn restart_is_detected_and_nothing_stale_delivered() {
    let mut s = established(11);
    // Messages in flight (unexpected at 1), then 1 restarts.
    send(&mut s, 0, 1, 2, pattern(200_000, 0), None); // rendezvous: waits for CTS
    for _ in 0..3 {
        s.step();
    }
    s.restart(
        1,
        Config {
            incarnation: 999,
            seed: 99,
            ..Config::default()
        },
    );
    send(&mut s, 0, 1, 3, pattern(10, 3), None);
    run(&mut s);
    let c = completions(&mut s, 0);
    assert_eq!(c.len(), 2);
    assert!(
        c.iter().all(|c| c.error == Some(OpError::PeerRestarted)),
        "{c:?}"
    );
    // The new incarnation saw nothing of the old session.
    assert_eq!(s.nodes[1].engine.unexpected_count(), 0);
    // New traffic works both ways.
    recv(&mut s, 1, 5, 10, None, None);
    send(&mut s, 0, 1, 4, pattern(10, 4), None);
    run(&mut s);
    assert_eq!(completions(&mut s, 0)[0].error, None);
    assert_eq!(completions(&mut s, 1)[0].data, 4);
}

/// A peer that closes its endpoint (PROTOCOL.md §4.5): what it received
/// completes by the ack in its CLOSE (even though its own ack was lost), what
/// it never received fails with PeerClosed at once, not after the retry limit,
/// and the duplicate copy of the notice is not answered.
#[test]
fn closing_peer_acks_what_it_received_and_fails_the_rest() {
    let mut s = sim(2, Faults::default(), 12);
    recv(&mut s, 1, 1, 10, None, None);
    send(&mut s, 0, 1, 1, pattern(10, 0), None);
    let limit = s.now + Nanos::from_secs(1);
    assert!(s.run_until(limit, |s| s.nodes[1].engine.recvs_posted() == 0));
    s.discard_output(1); // its ack of message 1 is lost
    assert_eq!(s.nodes[0].engine.sends_outstanding(), 1);
    send(&mut s, 0, 1, 2, pattern(2000, 2), None);
    let closed_at = s.now;
    s.close(1);
    run(&mut s);
    let c = completions(&mut s, 0);
    assert_eq!(c.len(), 2, "{c:?}");
    let by_token = |t| c.iter().find(|c| c.token == t).map(|c| c.error);
    assert_eq!(by_token(1), Some(None));
    assert_eq!(by_token(2), Some(Some(OpError::PeerClosed)));
    let st = s.nodes[0].engine.stats();
    assert_eq!(st.closes_received, 1);
    assert_eq!(st.resets_sent, 0);
    assert_eq!(st.timeouts, 0);
    assert!(s.now.since(closed_at) < Nanos::from_millis(100));
    // Closing discards the closer's own operations without completions
    // (fi_endpoint(3), fi_close).
    assert!(completions(&mut s, 1).is_empty());
}

/// An ICMP port unreachable from the provider fails the peer's operations
/// at once; one for a peer we never talked to changes nothing.
#[test]
fn reported_unreachable_peer_fails_at_once() {
    let mut s = established(13);
    s.partition(0, 1, Nanos::from_secs(3600));
    let timeouts = s.nodes[0].engine.stats().timeouts;
    send(&mut s, 0, 1, 2, pattern(10, 0), None);
    // An inject-complete send: reported once sent, and never again.
    let now = s.now;
    s.nodes[0]
        .engine
        .post_send(
            now,
            SendOp {
                token: 3,
                dst: 1,
                payload: Payload::Inject(b"inj"),
                tag: None,
                data: None,
                level: CompletionLevel::Inject,
            },
        )
        .unwrap();
    s.flush();
    let c = completions(&mut s, 0);
    assert!(
        c.len() == 1 && c[0].token == 3 && c[0].error.is_none(),
        "{c:?}"
    );
    assert_eq!(s.nodes[0].engine.sends_unacked_after_completion(), 1);
    s.nodes[0].engine.peer_unreachable(7);
    assert!(completions(&mut s, 0).is_empty());
    s.nodes[0].engine.peer_unreachable(1);
    let c = completions(&mut s, 0);
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0].token, 2);
    assert_eq!(c[0].error, Some(OpError::PeerUnreachable));
    assert_eq!(s.nodes[0].engine.stats().timeouts, timeouts);
}

/// A peer silent for longer than the retry budget (computing without
/// calling us): a transmit-complete send to it fails, but an inject-complete
/// one — already reported to the application — is kept and retried, and
/// arrives once the peer is back.
#[test]
fn silent_peer_keeps_inject_complete_data() {
    let mut s = established(14);
    s.partition(0, 1, Nanos::from_secs(120));
    let now = s.now;
    s.nodes[0].app.send.insert(2, pattern(16, 2));
    s.nodes[0]
        .engine
        .post_send(
            now,
            SendOp {
                token: 2,
                dst: 1,
                payload: Payload::Inject(&pattern(16, 2)),
                tag: None,
                data: Some(2),
                level: CompletionLevel::Inject,
            },
        )
        .unwrap();
    recv(&mut s, 1, 2, 16, None, None);
    let limit = s.now + Nanos::from_secs(300);
    s.run_until(limit, |s| s.nodes[1].engine.recvs_posted() == 0);
    let c0 = completions(&mut s, 0);
    assert_eq!(c0.len(), 1, "{c0:?}");
    assert_eq!(c0[0].error, None);
    assert!(s.nodes[0].engine.stats().patient_retries > 0);
    assert_eq!(s.nodes[0].engine.stats().peers_lost, 0);
    let c1 = completions(&mut s, 1);
    assert_eq!(c1.len(), 1, "{c1:?}");
    assert_eq!(c1[0].data, 2);
    assert_eq!(&s.nodes[1].app.recv[&2][..], &pattern(16, 2)[..]);
    // A transmit-complete send in the same situation fails.
    s.partition(0, 1, Nanos::from_secs(120));
    send(&mut s, 0, 1, 3, pattern(16, 3), None);
    run(&mut s);
    let c0 = completions(&mut s, 0);
    assert_eq!(c0[0].error, Some(OpError::PeerUnreachable));
}

#[test]
fn send_to_self_loops_back() {
    let mut s = sim(1, Faults::default(), 12);
    recv(&mut s, 0, 1, 5000, None, None);
    send(&mut s, 0, 0, 2, pattern(5000, 9), Some(3));
    recv(
        &mut s,
        0,
        3,
        100_000,
        None,
        Some(TagMatch { tag: 3, ignore: 0 }),
    );
    run(&mut s);
    let c = completions(&mut s, 0);
    assert_eq!(c.len(), 2, "{c:?}");
    assert_eq!(s.nodes[0].app.recv[&3][..5000], pattern(5000, 9)[..]);
}

#[test]
fn delivery_complete_waits_for_match() {
    let mut s = sim(2, Faults::default(), 13);
    s.nodes[0].app.send.insert(1, pattern(10, 1));
    let now = s.now;
    s.nodes[0]
        .engine
        .post_send(
            now,
            SendOp {
                token: 1,
                dst: 1,
                payload: Payload::Buffer { len: 10 },
                tag: None,
                data: None,
                level: CompletionLevel::Delivery,
            },
        )
        .unwrap();
    run(&mut s);
    assert!(completions(&mut s, 0).is_empty(), "acked but not delivered");
    recv(&mut s, 1, 1, 10, None, None);
    run(&mut s);
    assert_eq!(completions(&mut s, 0).len(), 1);
}

#[test]
fn inject_copies_and_limits() {
    let mut s = sim(
        2,
        Faults {
            loss: 0.2,
            ..Faults::default()
        },
        14,
    );
    let now = s.now;
    let mut data = pattern(100, 1);
    fn op(token: u64, payload: Payload<'_>) -> SendOp<'_, usize> {
        SendOp {
            token,
            dst: 1,
            payload,
            tag: None,
            data: None,
            level: CompletionLevel::Transmit,
        }
    }
    s.nodes[0]
        .engine
        .post_send(now, op(1, Payload::Inject(&data)))
        .unwrap();
    data.fill(0); // buffer reusable on return
    let big = vec![0u8; 5000];
    assert_eq!(
        s.nodes[0]
            .engine
            .post_send(now, op(2, Payload::Inject(&big))),
        Err(PostError::TooLarge)
    );
    recv(&mut s, 1, 1, 100, None, None);
    run(&mut s);
    // One completion, once acknowledged (the level asked for); the provider
    // leaves it out of the CQ for fi_inject.
    let c = completions(&mut s, 0);
    assert_eq!(c.len(), 1);
    assert_eq!((c[0].token, c[0].error), (1, None));
    assert_eq!(s.nodes[1].app.recv[&1], pattern(100, 1));
}

#[test]
fn queue_limits() {
    let mut s = Sim::new(
        vec![Buffers::default(), Buffers::default()],
        Faults::default(),
        15,
        |i| Config {
            tx_queue_len: 2,
            rx_queue_len: 1,
            ..cfg(i)
        },
    );
    let now = s.now;
    let op = |token| SendOp {
        token,
        dst: 1usize,
        payload: Payload::Buffer { len: 0 },
        tag: None,
        data: None,
        level: CompletionLevel::Transmit,
    };
    s.nodes[0].engine.post_send(now, op(1)).unwrap();
    s.nodes[0].engine.post_send(now, op(2)).unwrap();
    assert_eq!(
        s.nodes[0].engine.post_send(now, op(3)),
        Err(PostError::QueueFull)
    );
    let r = RecvOp {
        token: 1,
        len: 0,
        src: None,
        tag: None,
        multi_recv: None,
    };
    let node = &mut s.nodes[1];
    node.engine.post_recv(r, &mut node.app).unwrap();
    assert_eq!(
        node.engine.post_recv(r, &mut node.app),
        Err(PostError::QueueFull)
    );
    let big = SendOp {
        payload: Payload::Buffer {
            len: MAX_MSG_SIZE + 1,
        },
        ..op(4)
    };
    assert_eq!(
        s.nodes[0].engine.post_send(now, big),
        Err(PostError::TooLarge)
    );
}

#[test]
fn garbage_is_counted_not_fatal() {
    let mut s = sim(2, Faults::default(), 16);
    let mut b = Buffers::default();
    for n in 0..200usize {
        let junk: Vec<u8> = (0..n).map(|i| (i * 7 + n) as u8).collect();
        s.nodes[0]
            .engine
            .handle_datagram(Instant(0), 1, &junk, &mut b);
    }
    assert_eq!(s.nodes[0].engine.stats().corrupt, 200);
}

#[test]
fn idle_peer_memory_is_small() {
    // Documented in README.md: target ≤ 256 bytes per idle peer.
    const { assert!(IDLE_PEER_BYTES <= 256) };
    println!(
        "idle peer: {IDLE_PEER_BYTES} B, active peer queue block: {ACTIVE_PEER_EXTRA_BYTES} B"
    );
    let mut s = sim(2, Faults::default(), 17);
    recv(&mut s, 1, 1, 10, None, None);
    send(&mut s, 0, 1, 1, pattern(10, 0), None);
    run(&mut s);
    // After the idle release the peers hold no queue block (checked via a send
    // that still works afterwards).
    recv(&mut s, 1, 2, 10, None, None);
    send(&mut s, 0, 1, 2, pattern(10, 0), None);
    run(&mut s);
    assert_eq!(completions(&mut s, 1).len(), 2);
}

#[test]
fn engine_is_send() {
    // The provider keeps the engine in a Mutex shared across threads.
    fn send<T: Send>() {}
    send::<Engine<u64>>();
}

#[test]
fn endpoints_with_different_mtus_on_a_jumbo_link() {
    // Each sender segments to its own mtu; receivers take any size up to the link's.
    let mut s = sim_with_mtus(&[1472, 4164, 9000], 9000, 0.05, 18);
    let mut t = 0;
    for from in 0..3 {
        for to in 0..3 {
            t += 1;
            recv(&mut s, to, t, 30_000, Some(from), None);
            send(&mut s, from, to, t, pattern(30_000, t as u8), None);
        }
    }
    run(&mut s);
    for i in 0..3 {
        let c = completions(&mut s, i);
        assert_eq!(c.len(), 6, "node {i}: {c:?}");
        assert!(c.iter().all(|c| c.error.is_none()));
    }
    for to in 0..3 {
        for (tok, buf) in &s.nodes[to].app.recv {
            assert_eq!(buf, &pattern(30_000, *tok as u8));
        }
    }
}

#[test]
fn oversized_datagrams_are_lost_not_misdelivered() {
    // Engines configured above the link MTU get nothing through: the sends
    // fail as unreachable rather than hang or corrupt.
    let mut s = sim_with_mtus(&[9000, 9000], 1500, 0.0, 19);
    recv(&mut s, 1, 1, 20_000, None, None);
    send(&mut s, 0, 1, 1, pattern(20_000, 1), None);
    run(&mut s);
    assert_eq!(
        completions(&mut s, 0)[0].error,
        Some(OpError::PeerUnreachable)
    );
    assert!(completions(&mut s, 1).is_empty());
}

#[test]
fn data_is_segmented_to_what_the_peer_accepts() {
    // PROTOCOL.md §2.3: HELLO and HELLO_ACK state the largest datagram their
    // sender accepts. A 9000-byte engine talking to a 1472-byte one (an
    // AF_XDP socket without multi-buffer) sends it nothing larger, so
    // nothing is lost even though the link drops anything above 1500.
    let mut s = sim_with_mtus(&[9000, 1472], 1500, 0.02, 20);
    for t in 1..=2 {
        let (from, to) = if t == 1 { (0, 1) } else { (1, 0) };
        recv(&mut s, to, t, 50_000, None, None);
        send(&mut s, from, to, t, pattern(50_000, t as u8), None);
    }
    run(&mut s);
    for i in 0..2 {
        let c = completions(&mut s, i);
        assert_eq!(c.len(), 2, "node {i}: {c:?}");
        assert!(c.iter().all(|c| c.error.is_none()), "node {i}: {c:?}");
    }
    assert_eq!(s.nodes[1].app.recv[&1], pattern(50_000, 1));
    assert_eq!(s.nodes[0].app.recv[&2], pattern(50_000, 2));
}

#[test]
fn short_transmit_buffer_yields_nothing() {
    let mut e: Engine<u32> = Engine::new(cfg(0));
    let op = SendOp {
        token: 1,
        dst: 5,
        payload: Payload::Inject(b"x"),
        tag: None,
        data: None,
        level: CompletionLevel::Transmit,
    };
    e.post_send(Instant(0), op).unwrap();
    let mut small = [0u8; 100];
    assert!(
        e.poll_transmit(Instant(0), &mut small, &mut NoBuffers)
            .is_none()
    );
    let mut frame = [0u8; 1472];
    assert!(
        e.poll_transmit(Instant(0), &mut frame, &mut NoBuffers)
            .is_some()
    );
}

#[test]
fn zero_ack_delay_acks_on_next_transmit_without_timers() {
    let c = |i| Config {
        ack_delay: Nanos(0),
        ..cfg(i)
    };
    let mut a: Engine<u32> = Engine::new(c(0));
    let mut b: Engine<u32> = Engine::new(c(1));
    let mut bufs = Buffers::default();
    bufs.recv.insert(1, vec![0; 8]);
    b.post_recv(
        RecvOp {
            token: 1,
            len: 8,
            src: None,
            tag: None,
            multi_recv: None,
        },
        &mut bufs,
    )
    .unwrap();
    let op = SendOp {
        token: 1,
        dst: 1,
        payload: Payload::Inject(b"12345678"),
        tag: None,
        data: None,
        level: CompletionLevel::Transmit,
    };
    a.post_send(Instant(0), op).unwrap();
    let mut f = [0u8; 1472];
    let now = Instant(0);
    // Never call handle_timeout: datagrams alone must complete the exchange.
    for _ in 0..10 {
        while let Some(t) = a.poll_transmit(now, &mut f, &mut bufs) {
            b.handle_datagram(now, 0, &f[..t.len], &mut bufs);
        }
        while let Some(t) = b.poll_transmit(now, &mut f, &mut bufs) {
            a.handle_datagram(now, 1, &f[..t.len], &mut bufs);
        }
    }
    assert!(
        matches!(a.poll_event(), Some(Event::Completion(c)) if c.token == 1 && c.error.is_none())
    );
}

/// `ack_message_end_at_once`: mid-message segments wait (for `ack_every` or
/// the delay), the segment that ends the message is acknowledged by the very
/// next `poll_transmit`, so the send completes without any timer firing.
#[test]
fn message_end_acked_at_once_mid_message_segments_wait() {
    let c = |i| Config {
        ack_delay: Nanos::from_secs(1),
        ack_every: 16,
        ack_message_end_at_once: true,
        ..cfg(i)
    };
    let mut a: Engine<u32> = Engine::new(c(0));
    let mut b: Engine<u32> = Engine::new(c(1));
    let mut bufs = Buffers::default();
    let msg = pattern(4000, 3); // three segments at mtu 1472
    bufs.send.insert(1, msg.clone());
    bufs.recv.insert(1, vec![0; 4000]);
    b.post_recv(
        RecvOp {
            token: 1,
            len: 4000,
            src: None,
            tag: None,
            multi_recv: None,
        },
        &mut bufs,
    )
    .unwrap();
    let op = SendOp {
        token: 1,
        dst: 1,
        payload: Payload::Buffer { len: 4000 },
        tag: None,
        data: None,
        level: CompletionLevel::Transmit,
    };
    let now = Instant(0);
    a.post_send(now, op).unwrap();
    let mut f = [0u8; 1472];
    // Session set-up (HELLO / HELLO_ACK) until the first DATA segment.
    let mut segments = Vec::new();
    for _ in 0..10 {
        while let Some(t) = a.poll_transmit(now, &mut f, &mut bufs) {
            segments.push(f[..t.len].to_vec());
        }
        for d in segments.drain(..) {
            b.handle_datagram(now, 0, &d, &mut bufs);
        }
        let mut acks = 0;
        while let Some(t) = b.poll_transmit(now, &mut f, &mut bufs) {
            a.handle_datagram(now, 1, &f[..t.len], &mut bufs);
            acks += 1;
        }
        if acks == 0 {
            break;
        }
    }
    // Everything a had is delivered; if the message is complete at b, its
    // last segment was acknowledged at once and a's send completed.
    assert!(
        matches!(b.poll_event(), Some(Event::Completion(c)) if c.token == 1 && c.error.is_none())
    );
    assert_eq!(bufs.recv[&1], msg);
    assert!(
        matches!(a.poll_event(), Some(Event::Completion(c)) if c.token == 1 && c.error.is_none())
    );
}

/// With `ack_message_end_at_once`, a lone mid-message segment is not
/// acknowledged by the next `poll_transmit` (it waits for more or the delay).
#[test]
fn mid_message_segment_waits_for_more() {
    let c = |i| Config {
        ack_delay: Nanos::from_secs(1),
        ack_every: 16,
        ack_message_end_at_once: true,
        ..cfg(i)
    };
    let mut a: Engine<u32> = Engine::new(c(0));
    let mut b: Engine<u32> = Engine::new(c(1));
    let mut bufs = Buffers::default();
    bufs.send.insert(1, pattern(4000, 5));
    bufs.send.insert(2, pattern(8, 6));
    bufs.recv.insert(1, vec![0; 4000]);
    let now = Instant(0);
    let send = |token, len| SendOp {
        token,
        dst: 1,
        payload: Payload::Buffer { len },
        tag: None,
        data: None,
        level: CompletionLevel::Transmit,
    };
    // A one-packet message first, to open the session.
    a.post_send(now, send(2, 8)).unwrap();
    let mut f = [0u8; 1472];
    for _ in 0..4 {
        while let Some(t) = a.poll_transmit(now, &mut f, &mut bufs) {
            b.handle_datagram(now, 0, &f[..t.len], &mut bufs);
        }
        while let Some(t) = b.poll_transmit(now, &mut f, &mut bufs) {
            a.handle_datagram(now, 1, &f[..t.len], &mut bufs);
        }
    }
    assert!(matches!(a.poll_event(), Some(Event::Completion(c)) if c.token == 2));
    a.post_send(now, send(1, 4000)).unwrap();
    let t = a.poll_transmit(now, &mut f, &mut bufs).unwrap();
    b.handle_datagram(now, 0, &f[..t.len], &mut bufs);
    assert!(
        b.poll_transmit(now, &mut f, &mut bufs).is_none(),
        "a mid-message segment was acknowledged at once"
    );
}

/// The provider's ack policy (`ack_message_end_at_once`, mid-message acks
/// every 16 packets or after 200 µs) under loss, duplication, corruption and
/// reordering: every message of every size still arrives intact and every
/// send completes.
#[test]
fn message_end_ack_policy_under_loss() {
    let f = Faults {
        loss: 0.1,
        dup: 0.05,
        corrupt: 0.01,
        jitter: Nanos::from_micros(30),
        ..Faults::default()
    };
    let mut s = Sim::new(vec![Buffers::default(), Buffers::default()], f, 21, |i| {
        Config {
            ack_message_end_at_once: true,
            ack_delay: Nanos::from_micros(200),
            ..cfg(i)
        }
    });
    let sizes = [0usize, 1, 1500, 20_000, 64 * 1024 + 1, 300_000, 1 << 20];
    for (i, &n) in sizes.iter().enumerate() {
        recv(&mut s, 1, i as u64, n, None, None);
        send(&mut s, 0, 1, 100 + i as u64, pattern(n, i as u8), None);
    }
    run(&mut s);
    let c1 = completions(&mut s, 1);
    assert_eq!(c1.len(), sizes.len());
    for c in &c1 {
        let i = c.token as usize;
        assert_eq!(c.error, None);
        assert_eq!(s.nodes[1].app.recv[&(i as u64)], pattern(sizes[i], i as u8));
    }
    let c0 = completions(&mut s, 0);
    assert_eq!(c0.len(), sizes.len());
    assert!(c0.iter().all(|c| c.error.is_none()));
}

/// Exchange datagrams between two engines at `now` until both are silent.
fn pump(a: &mut Engine<u32>, b: &mut Engine<u32>, now: Instant, bufs: &mut Buffers) {
    let mut f = [0u8; 1472];
    loop {
        let mut moved = false;
        while let Some(t) = a.poll_transmit(now, &mut f, bufs) {
            b.handle_datagram(now, 0, &f[..t.len], bufs);
            moved = true;
        }
        while let Some(t) = b.poll_transmit(now, &mut f, bufs) {
            a.handle_datagram(now, 1, &f[..t.len], bufs);
            moved = true;
        }
        if !moved {
            return;
        }
    }
}

fn inject(e: &mut Engine<u32>, now: Instant, token: u64, dst: u32, data: &[u8]) {
    e.post_send(
        now,
        SendOp {
            token,
            dst,
            payload: Payload::Inject(data),
            tag: None,
            data: None,
            level: CompletionLevel::Inject,
        },
    )
    .unwrap();
}

/// With awaited acks at once (the provider's policy), an injected message,
/// already complete at its sender, is not acknowledged on its own: the reply
/// carries the ack, or the delayed-ack timer sends it (PROTOCOL.md §5.2).
/// All along, `wants_transmit` is false exactly when `poll_transmit` has
/// nothing (the provider skips its transmit pass on it, and kicks as soon as
/// it turns false).
#[test]
fn injected_message_ack_rides_on_the_reply_or_waits_for_delay() {
    let c = |i| Config {
        ack_delay: Nanos::from_micros(200),
        ack_message_end_at_once: true,
        ..cfg(i)
    };
    let mut a: Engine<u32> = Engine::new(c(0));
    let mut b: Engine<u32> = Engine::new(c(1));
    let mut bufs = Buffers::default();
    let mut f = [0u8; 1472];
    let now = Instant(0);
    // Session set-up with a first message: not complete while it waits for
    // the session (the application might stop calling us), complete once
    // sent; its ack goes at its delay.
    inject(&mut a, now, 1, 1, b"hello");
    assert!(a.poll_event().is_none());
    pump(&mut a, &mut b, now, &mut bufs);
    assert!(matches!(a.poll_event(), Some(Event::Completion(c)) if c.token == 1));
    let later = now + Nanos::from_micros(200);
    b.handle_timeout(later);
    pump(&mut a, &mut b, later, &mut bufs);
    assert_eq!(a.sends_outstanding(), 0);
    // Ping: complete at a as soon as it is sent, the data reaches b, b
    // sends no ack.
    assert!(!a.wants_transmit() && !b.wants_transmit());
    inject(&mut a, later, 2, 1, b"ping");
    assert!(a.wants_transmit());
    let t = a.poll_transmit(later, &mut f, &mut bufs).unwrap();
    assert!(!a.wants_transmit(), "the ping was all a had to send");
    assert!(matches!(a.poll_event(), Some(Event::Completion(c)) if c.token == 2));
    b.handle_datagram(later, 0, &f[..t.len], &mut bufs);
    assert!(!b.wants_transmit());
    assert!(b.poll_transmit(later, &mut f, &mut bufs).is_none());
    assert_eq!(a.sends_outstanding(), 1);
    // Pong: it carries b's ack of the ping.
    inject(&mut b, later, 3, 0, b"pong");
    let t = b.poll_transmit(later, &mut f, &mut bufs).unwrap();
    assert!(!b.wants_transmit());
    assert!(b.poll_transmit(later, &mut f, &mut bufs).is_none());
    a.handle_datagram(later, 1, &f[..t.len], &mut bufs);
    assert_eq!(a.sends_outstanding(), 0);
    // Nobody answers the pong: a's ack leaves when its delay is up. The ack
    // of the ping freed a's window, but nothing waits for it.
    assert!(!a.wants_transmit());
    assert!(a.poll_transmit(later, &mut f, &mut bufs).is_none());
    let t_ack = later + Nanos::from_micros(200);
    assert!(a.poll_timeout().is_some_and(|t| t <= t_ack));
    a.handle_timeout(t_ack);
    assert!(a.wants_transmit());
    let t = a.poll_transmit(t_ack, &mut f, &mut bufs).unwrap();
    assert!(!a.wants_transmit());
    b.handle_datagram(t_ack, 0, &f[..t.len], &mut bufs);
    assert_eq!(b.sends_outstanding(), 0);
}
