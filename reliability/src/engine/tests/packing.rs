//! PACK datagrams (PROTOCOL.md §6.8): a window of small messages goes in
//! fewer datagrams and arrives exactly as it would one by one — in order,
//! each matched, truncated, deferred, refused or retransmitted on its own —
//! under loss, duplication, reordering, corruption and splitting; PACKs
//! that are malformed are dropped and counted, never acted upon.

use super::*;
use crate::wire::pack::{self, RECORD_LEN, Record};
use crate::wire::{self, Header, PacketType, flags as wf};

/// Tag of message `i`: alternately tagged (Some) and untagged (None).
fn tag_of(i: u64) -> Option<u64> {
    i.is_multiple_of(2).then_some(1000 + i)
}

fn len_of(i: u64) -> usize {
    [0, 1, 64, 200, 7, 64][i as usize % 6]
}

/// Sends `n` small messages 0 → 1 with receives posted (before the sends if
/// `posted_first`, else after the sends have arrived) and checks each
/// arrived once, in order, intact, with its tag and CQ data.
fn window_of_small(s: &mut Sim<Buffers>, n: u64, posted_first: bool) {
    let post = |s: &mut Sim<Buffers>| {
        for i in 0..n {
            let tag = tag_of(i).map(|t| TagMatch { tag: t, ignore: 0 });
            recv(s, 1, i, 200, None, tag);
        }
    };
    if posted_first {
        post(s);
    }
    for i in 0..n {
        send(s, 0, 1, i, pattern(len_of(i), i as u8), tag_of(i));
    }
    run(s);
    if !posted_first {
        post(s);
        run(s);
    }
    let c = completions(s, 1);
    assert_eq!(c.len() as u64, n, "{c:?}");
    for c in &c {
        let i = c.token;
        assert_eq!(c.error, None, "{c:?}");
        assert_eq!((c.len, c.data), (len_of(i), i), "{c:?}");
        assert_eq!(c.tag, tag_of(i).unwrap_or(0));
        assert_eq!(
            s.nodes[1].app.recv[&i][..len_of(i)],
            pattern(len_of(i), i as u8)[..]
        );
    }
    let sent = completions(s, 0);
    assert_eq!(sent.len() as u64, n);
    assert!(sent.iter().all(|c| c.error.is_none()), "{sent:?}");
}

#[test]
fn a_window_of_small_messages_goes_packed() {
    for posted_first in [true, false] {
        let mut s = sim(2, Faults::default(), 1);
        window_of_small(&mut s, 64, posted_first);
        let (tx, rx) = (s.nodes[0].engine.stats(), s.nodes[1].engine.stats());
        assert!(
            tx.packs_sent > 0 && tx.packed_sent > 2 * tx.packs_sent,
            "{tx:?}"
        );
        assert_eq!(
            (rx.packs_received, rx.packed_received),
            (tx.packs_sent, tx.packed_sent)
        );
        assert!(tx.tx_datagrams < 40, "{tx:?}");
        assert_eq!(rx.corrupt + rx.dropped + rx.duplicates, 0, "{rx:?}");
    }
}

#[test]
fn packed_messages_survive_every_fault() {
    for seed in 0..12 {
        let f = Faults {
            loss: 0.1,
            dup: 0.1,
            corrupt: 0.03,
            jitter: Nanos::from_micros(40),
            split: 0.3,
            mtu: 1472,
            ..Faults::default()
        };
        let mut s = sim(2, f, seed);
        window_of_small(&mut s, 200, seed % 2 == 0);
        let tx = s.nodes[0].engine.stats();
        assert!(tx.packs_sent > 0 && tx.retransmits > 0, "{tx:?}");
    }
}

#[test]
fn authenticated_packs_under_faults() {
    for encrypt in [true, false] {
        let f = Faults {
            loss: 0.1,
            dup: 0.05,
            corrupt: 0.02,
            jitter: Nanos::from_micros(30),
            split: 0.3,
            ..Faults::default()
        };
        let mut s = Sim::new(vec![Buffers::default(), Buffers::default()], f, 4, |i| {
            Config {
                auth: Some(AuthConfig {
                    key: b"job key: sixteen bytes or more".to_vec(),
                    encrypt,
                }),
                ..cfg(i)
            }
        });
        window_of_small(&mut s, 100, true);
        assert!(s.nodes[1].engine.stats().packs_received > 0);
    }
}

/// A peer that does not accept PACK (its handshake does not say so, as an
/// older one) never gets one; and one that does not pack sends plain DATA.
#[test]
fn no_pack_to_a_peer_that_did_not_ask() {
    for off in [0, 1] {
        let mut s = pair_with(2, |i| Config {
            pack: i != off,
            ..cfg(i)
        });
        window_of_small(&mut s, 32, true);
        assert_eq!(s.nodes[0].engine.stats().packs_sent, 0);
        assert_eq!(s.nodes[1].engine.stats().packs_received, 0);
    }
}

/// Small messages around large ones (eager segmented, rendezvous) keep
/// their order; only whole small messages are packed.
#[test]
fn mixed_with_large_messages_in_order() {
    for seed in 0..4 {
        let f = Faults {
            loss: if seed > 1 { 0.05 } else { 0.0 },
            jitter: Nanos::from_micros(20),
            mtu: 1472,
            ..Faults::default()
        };
        let mut s = sim(2, f, seed);
        let lens = [10, 20, 5000, 30, 40, 100_000, 1, 2, 3, 70_000, 4, 5];
        for (i, &len) in lens.iter().enumerate() {
            recv(&mut s, 1, i as u64, len, None, None);
        }
        for (i, &len) in lens.iter().enumerate() {
            send(&mut s, 0, 1, i as u64, pattern(len, i as u8), None);
        }
        run(&mut s);
        // Untagged receives posted in order: receive i holding message i
        // is the order (a rendezvous message completes after those behind
        // it, when its data has come).
        let mut c = completions(&mut s, 1);
        c.sort_by_key(|c| c.token);
        assert_eq!(c.len(), lens.len());
        for (i, c) in c.iter().enumerate() {
            let i = i as u64;
            assert_eq!((c.token, c.error, c.data), (i, None, i));
            assert_eq!(s.nodes[1].app.recv[&i], pattern(lens[i as usize], i as u8));
        }
        assert!(s.nodes[0].engine.stats().packs_sent > 0);
    }
}

#[test]
fn packed_into_a_multi_recv_buffer_and_truncated() {
    let mut s = sim(2, Faults::default(), 5);
    multi_recv(&mut s, 1, 100, 1000, 300);
    // Tagged messages into short receives: truncated.
    for i in 0..4 {
        recv(&mut s, 1, i, 10, None, Some(TagMatch { tag: 9, ignore: 0 }));
    }
    for i in 0..4u64 {
        send(&mut s, 0, 1, i, pattern(200, i as u8), None);
        send(&mut s, 0, 1, 10 + i, pattern(50, i as u8), Some(9));
    }
    run(&mut s);
    assert!(s.nodes[0].engine.stats().packs_sent > 0);
    let c = completions(&mut s, 1);
    let multi: Vec<_> = c.iter().filter(|c| c.token == 100).collect();
    assert_eq!(multi.len(), 4);
    for (i, c) in multi.iter().enumerate() {
        assert_eq!((c.buf_offset, c.len), (i * 200, 200));
        assert_eq!(c.flags.contains(Flags::MULTI_RECV), i == 3);
        let got = &s.nodes[1].app.recv[&100][i * 200..(i + 1) * 200];
        assert_eq!(got, &pattern(200, i as u8)[..]);
    }
    let short: Vec<_> = c.iter().filter(|c| c.token < 4).collect();
    assert_eq!(short.len(), 4);
    for c in short {
        assert_eq!((c.error, c.olen), (Some(OpError::Truncated), 40));
        assert_eq!(c.data, 10 + c.token, "matched in order");
    }
}

/// The unexpected store fills in the middle of a PACK: the record that does
/// not fit is refused (RNR) and the rest of the datagram dropped; all
/// arrive, in order, once receives are posted. With a byte budget instead,
/// messages are deferred and fetched (§6.5), FI_DISCARD drops one.
#[test]
fn refused_and_deferred_records() {
    for (max, budget) in [(5usize, usize::MAX), (usize::MAX, 300)] {
        let mut s = pair_with(6, |i| Config {
            unexpected_peer_max: max,
            unexpected_max: max,
            unexpected_budget: budget.min(16 << 20),
            unexpected_peer_budget: budget.min(16 << 20),
            ..cfg(i)
        });
        for i in 0..30u64 {
            send(&mut s, 0, 1, i, pattern(64, i as u8), Some(3));
        }
        let limit = s.now + Nanos::from_millis(5);
        s.run_until(limit, |_| false);
        let st = s.nodes[1].engine.stats();
        if max < 30 {
            assert!(st.rnr_sent > 0 && st.packs_received > 0, "{st:?}");
        } else {
            assert!(st.deferred > 0, "{st:?}");
        }
        let tm = Some(TagMatch { tag: 3, ignore: 0 });
        s.nodes[1].engine.peek(500, None, tm, PeekMode::Discard);
        for i in 1..30u64 {
            recv(&mut s, 1, i, 64, None, tm);
        }
        run(&mut s);
        let c = completions(&mut s, 1);
        assert_eq!(c.len(), 30, "{c:?}");
        assert!(c[0].flags.contains(Flags::DISCARD));
        for c in &c[1..] {
            assert_eq!(c.error, None);
            assert_eq!(c.data, c.token, "in order");
            assert_eq!(s.nodes[1].app.recv[&c.token], pattern(64, c.token as u8));
        }
        let sent = completions(&mut s, 0);
        assert_eq!(sent.len(), 30);
        assert!(sent.iter().all(|c| c.error.is_none()));
    }
}

/// Delivery complete and inject complete per packed message.
#[test]
fn completion_levels_per_record() {
    let mut s = sim(2, Faults::default(), 8);
    let now = s.now;
    for i in 0..8u64 {
        let payload = pattern(32, i as u8);
        s.nodes[0].app.send.insert(i, payload.clone());
        let level = [
            CompletionLevel::Delivery,
            CompletionLevel::Transmit,
            CompletionLevel::Inject,
        ][i as usize % 3];
        let op = SendOp {
            token: i,
            dst: 1,
            payload: if i % 2 == 0 {
                Payload::Inject(&payload)
            } else {
                Payload::Buffer { len: 32 }
            },
            tag: None,
            data: Some(i),
            level,
            fence: false,
        };
        s.nodes[0].engine.post_send(now, op).unwrap();
    }
    run(&mut s);
    assert!(s.nodes[0].engine.stats().packs_sent > 0);
    // Delivery-complete sends (0, 3, 6) wait for their receives.
    let mut done: Vec<u64> = completions(&mut s, 0).iter().map(|c| c.token).collect();
    done.sort();
    assert_eq!(done, vec![1, 2, 4, 5, 7]);
    for i in 0..8 {
        recv(&mut s, 1, i, 32, None, None);
    }
    run(&mut s);
    let mut done: Vec<u64> = completions(&mut s, 0).iter().map(|c| c.token).collect();
    done.sort();
    assert_eq!(done, vec![0, 3, 6]);
    for c in completions(&mut s, 1) {
        assert_eq!(s.nodes[1].app.recv[&c.token], pattern(32, c.data as u8));
    }
}

/// A PACK with a valid CRC but a malformed record list, built by hand: the
/// whole datagram is dropped and counted, nothing is delivered, the session
/// goes on.
#[test]
fn malformed_packs_are_dropped_and_counted() {
    let mut s = established(9);
    recv(&mut s, 1, 50, 64, None, None);
    let (src, dst) = session_ids(&mut s);
    let rec = |len: u16, flags: u16| Record {
        flags,
        len,
        msg_id: 1,
        tag: 0,
        data: 0,
    };
    let mut bodies: Vec<Vec<u8>> = Vec::new();
    // Truncated record header, record longer than the datagram, flags not
    // allowed, no FIRST, no record at all.
    for (r, extra) in [
        (rec(4, wf::FIRST), 2usize),
        (rec(40, wf::FIRST), 4),
        (rec(4, wf::FIRST | wf::RNDV), 4),
        (rec(4, wf::TAGGED), 4),
    ] {
        let mut b = vec![0u8; RECORD_LEN + extra];
        r.encode(&mut b);
        let mut two = b.clone();
        let mut first = vec![0u8; RECORD_LEN + 4];
        rec(4, wf::FIRST).encode(&mut first);
        two.splice(0..0, first);
        bodies.push(b);
        bodies.push(two);
    }
    bodies.push(Vec::new());
    bodies.push(vec![0u8; 3]);
    let n = bodies.len() as u64;
    for (k, body) in bodies.into_iter().enumerate() {
        let h = Header {
            ty: PacketType::Pack as u8,
            flags: 0,
            src_sess: src,
            dst_sess: dst,
            seq: 1,
            payload_len: body.len() as u16,
            ..Header::default()
        };
        let mut buf = vec![0u8; wire::COMMON_LEN + body.len() + wire::TRAILER_LEN];
        wire::encode_header(&mut buf, &h);
        buf[wire::COMMON_LEN..wire::COMMON_LEN + body.len()].copy_from_slice(&body);
        wire::seal(&mut buf, wire::COMMON_LEN + body.len());
        let now = s.now;
        let node = &mut s.nodes[1];
        node.engine.handle_datagram(now, 0, &buf, &mut node.app);
        // Also every truncation of it, and a wrong payload length.
        for cut in 0..buf.len() {
            node.engine
                .handle_datagram(now, 0, &buf[..cut], &mut node.app);
        }
        assert_eq!(node.engine.stats().packed_received, 0, "body {k}");
    }
    let st = s.nodes[1].engine.stats();
    assert!(st.corrupt >= n, "{st:?}");
    assert!(completions(&mut s, 1).is_empty());
    // The session still works.
    send(&mut s, 0, 1, 2, pattern(64, 2), None);
    run(&mut s);
    assert_eq!(completions(&mut s, 1)[0].token, 50);
}

/// Random bytes after a valid PACK header with a valid CRC never panic.
#[test]
fn random_pack_bodies_never_panic() {
    let mut s = established(10);
    recv(&mut s, 1, 50, 64, None, None);
    let (src, dst) = session_ids(&mut s);
    let mut rng = crate::rng::SplitMix64::new(77);
    for _ in 0..2000 {
        let len = (rng.next_u64() % 200) as usize;
        let mut body: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        if len >= 2 && rng.next_u64().is_multiple_of(2) {
            // Mostly well-formed flags, so records get parsed further.
            body[0] = (wf::FIRST | wf::TAGGED) as u8;
            body[1] = 0;
        }
        let h = Header {
            ty: PacketType::Pack as u8,
            flags: wf::ACK,
            src_sess: src,
            dst_sess: dst,
            seq: (rng.next_u64() % 8) as u32,
            ack: 0,
            payload_len: len as u16,
            ..Header::default()
        };
        let mut buf = vec![0u8; wire::COMMON_LEN + len + wire::TRAILER_LEN];
        wire::encode_header(&mut buf, &h);
        buf[wire::COMMON_LEN..wire::COMMON_LEN + len].copy_from_slice(&body);
        wire::seal(&mut buf, wire::COMMON_LEN + len);
        let now = s.now;
        let node = &mut s.nodes[1];
        node.engine.handle_datagram(now, 0, &buf, &mut node.app);
    }
    let _ = pack::validate(wire::Bytes::One(&[]));
}

/// The session ids node 0 uses towards node 1 (src, dst), read from the
/// engine's wire output.
fn session_ids(s: &mut Sim<Buffers>) -> (u32, u32) {
    send(s, 0, 1, 1000, pattern(1, 0), None);
    let now = s.now;
    let mut frame = vec![0u8; 65536];
    let node = &mut s.nodes[0];
    let t = node
        .engine
        .poll_transmit(now, &mut frame, &mut node.app)
        .unwrap();
    let p = wire::decode(&frame[..t.len]).unwrap();
    (p.hdr.src_sess, p.hdr.dst_sess)
}

/// What a caller asks before leaving a small send for its next transmit
/// pass: packets in flight to a peer that accepts PACK, none otherwise.
#[test]
fn packing_in_flight_counts_only_towards_peers_that_pack() {
    for pack in [true, false] {
        let mut s = pair_with(3, |i| Config { pack, ..cfg(i) });
        assert_eq!(
            s.nodes[0].engine.packing_in_flight(1),
            None,
            "no session yet"
        );
        recv(&mut s, 1, 1, 10, None, None);
        send(&mut s, 0, 1, 1, pattern(10, 0), None);
        run(&mut s);
        let idle = s.nodes[0].engine.packing_in_flight(1);
        assert_eq!(idle, pack.then_some(0));
        send(&mut s, 0, 1, 2, pattern(10, 0), None);
        s.flush();
        assert_eq!(s.nodes[0].engine.packing_in_flight(1), pack.then_some(1));
    }
}

/// An incast of small messages behind a slow bottleneck that marks ECN and
/// drops what its queue cannot hold: PACKs count against the windows record
/// by record, congestion control reacts (window reductions), the
/// receiver's grant shares its ring, and every message arrives once, in
/// order per sender.
#[test]
fn packed_incast_behind_a_congested_bottleneck() {
    use crate::sim::Bottleneck;
    let senders = 4;
    let f = Faults {
        mtu: 1472,
        bottleneck: Some(Bottleneck {
            rate: 2_000_000,
            queue: 6 << 10,
            ecn_threshold: Some(2 << 10),
        }),
        ..Faults::default()
    };
    let n = senders + 1;
    let mut s = Sim::new((0..n).map(|_| Buffers::default()).collect(), f, 12, |i| {
        Config {
            mtu: 1472,
            rx_capacity: 32,
            ..cfg(i)
        }
    });
    let rx = senders;
    let per = 300u64;
    for src in 0..senders {
        for m in 0..per {
            let token = src as u64 * 10_000 + m;
            recv(&mut s, rx, token, 64, Some(src), None);
            send(&mut s, src, rx, token, pattern(64, token as u8), None);
        }
    }
    run(&mut s);
    let c = completions(&mut s, rx);
    assert_eq!(c.len() as u64, senders as u64 * per);
    for c in &c {
        assert_eq!(c.error, None);
        assert_eq!(c.data, c.token, "in order per sender");
        assert_eq!(
            s.nodes[rx].app.recv[&c.token][..],
            pattern(64, c.token as u8)[..]
        );
    }
    let tx: Vec<Stats> = (0..senders).map(|i| s.nodes[i].engine.stats()).collect();
    assert!(tx.iter().all(|t| t.packs_sent > 0), "{tx:?}");
    let reductions: u64 = tx.iter().map(|t| t.cwnd_reductions).sum();
    assert!(reductions > 0, "{tx:?}");
    for i in 0..senders {
        assert_eq!(completions(&mut s, i).len() as u64, per);
    }
}
