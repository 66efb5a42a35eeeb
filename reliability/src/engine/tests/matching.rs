//! Messaging through the simulated network: untagged and tagged, eager and
//! rendezvous, the unexpected queue, truncation, directed receives,
//! multi-recv, peek/claim/discard, delivery complete, send to self
//! (PROTOCOL.md §6; fi_msg(3), fi_tagged(3)).

use super::*;

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
    multi_recv(&mut s, 1, 1, 1000, 300);
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
                fence: false,
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
