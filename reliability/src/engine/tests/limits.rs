//! Limits and sizes: inject, queue lengths, MAX_MSG_SIZE, and datagram
//! sizes negotiated per peer (PROTOCOL.md §2.3, §4.1).

use super::*;

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
            fence: false,
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
    let mut s = pair_with(15, |i| Config {
        tx_queue_len: 2,
        rx_queue_len: 1,
        ..cfg(i)
    });
    let now = s.now;
    let op = |token| SendOp {
        token,
        dst: 1usize,
        payload: Payload::Buffer { len: 0 },
        tag: None,
        data: None,
        level: CompletionLevel::Transmit,
        fence: false,
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
        fence: false,
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

/// Eager messages over the unexpected budget are kept as their header only
/// and fetched when a receive matches (PROTOCOL.md §6.5): memory stays
/// within the budget, nothing is refused, and a later message that matches
/// a posted receive is not held up behind them (the refusal that deadlocked
/// MPI programs with low limits).
#[test]
fn over_budget_eager_messages_wait_at_their_sender() {
    for (loss, seed) in [(0.0, 1), (0.1, 2), (0.1, 3)] {
        let f = Faults {
            loss,
            dup: loss / 2.0,
            jitter: Nanos::from_micros(if loss > 0.0 { 30 } else { 0 }),
            mtu: 1472,
            ..Faults::default()
        };
        let budget = 12_000;
        let mut s = Sim::new(vec![Buffers::default(), Buffers::default()], f, seed, |i| {
            Config {
                unexpected_budget: budget,
                unexpected_peer_budget: budget,
                ..cfg(i)
            }
        });
        // 30 unexpected messages of 5000 B (4 segments each) to tag 1, then
        // one to tag 2 whose receive is posted.
        for i in 0..30u64 {
            send(&mut s, 0, 1, i, pattern(5000, i as u8), Some(1));
        }
        send(&mut s, 0, 1, 99, pattern(777, 99), Some(2));
        recv(
            &mut s,
            1,
            99,
            777,
            None,
            Some(TagMatch { tag: 2, ignore: 0 }),
        );
        let limit = s.now + Nanos::from_millis(200);
        s.run_until(limit, |s| {
            s.nodes[1].engine.poll_event().is_some_and(
                |e| matches!(e, Event::Completion(c) if c.token == 99 && c.error.is_none()),
            )
        });
        assert_eq!(s.nodes[1].app.recv[&99], pattern(777, 99), "held up");
        let st = s.nodes[1].engine.stats();
        assert!(st.deferred > 0 && st.rnr_sent == 0, "{st:?}");
        assert!(st.unexpected_bytes_max <= budget as u64);
        // Sends of deferred messages are not complete: the receiver does
        // not have their data.
        let done: Vec<u64> = completions(&mut s, 0).iter().map(|c| c.token).collect();
        assert!(done.len() < 31, "{done:?}");
        for i in 0..30u64 {
            recv(
                &mut s,
                1,
                i,
                5000,
                None,
                Some(TagMatch { tag: 1, ignore: 0 }),
            );
        }
        run(&mut s);
        let c = completions(&mut s, 1);
        assert_eq!(c.len(), 30);
        for c in &c {
            assert_eq!(c.error, None);
            assert_eq!(s.nodes[1].app.recv[&c.token], pattern(5000, c.token as u8));
            assert_eq!(c.data, c.token, "matched in order");
        }
        let sent = completions(&mut s, 0);
        assert_eq!(done.len() + sent.len(), 31);
        assert!(sent.iter().all(|c| c.error.is_none()));
    }
}
