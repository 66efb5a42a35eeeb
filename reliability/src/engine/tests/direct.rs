//! Direct messages (PROTOCOL.md §6.9): matched like any message, kept as
//! unexpected whatever the budgets, and sent only while nothing of the
//! session could be overtaken.

use super::*;

fn direct(s: &mut Sim<Buffers>, from: usize, to: usize, tag: Option<u64>, payload: &[u8]) {
    let node = &mut s.nodes[to];
    let m = DirectMessage {
        tag,
        data: Some(payload.len() as u64),
        payload,
    };
    node.engine.receive_direct(from, m, &mut node.app).unwrap();
}

fn tag(t: u64) -> Option<TagMatch> {
    Some(TagMatch { tag: t, ignore: 0 })
}

#[test]
fn a_direct_message_completes_a_posted_receive() {
    let mut s = sim(2, Faults::default(), 1);
    recv(&mut s, 1, 7, 100, Some(0), tag(5));
    direct(&mut s, 0, 1, Some(5), &pattern(64, 3));
    let c = completions(&mut s, 1);
    assert_eq!(c.len(), 1);
    let c = c[0];
    assert_eq!((c.token, c.len, c.tag, c.data), (7, 64, 5, 64));
    assert_eq!((c.src, c.error), (Some(0), None));
    assert!(
        c.flags
            .contains(Flags::RECV | Flags::TAGGED | Flags::REMOTE_CQ_DATA)
    );
    assert_eq!(&s.nodes[1].app.recv[&7][..64], &pattern(64, 3)[..]);
    // Nothing went on the wire: no session was needed.
    assert_eq!(s.nodes[1].engine.stats().rx_datagrams, 0);
}

#[test]
fn unexpected_direct_messages_are_kept_whatever_the_budgets() {
    let mut s = pair_with(2, |i| Config {
        unexpected_budget: 1000,
        unexpected_peer_budget: 500,
        ..cfg(i)
    });
    assert!(s.nodes[1].engine.takes_direct());
    for i in 0..20u8 {
        direct(&mut s, 0, 1, Some(1), &pattern(100, i));
    }
    // Past half the budget the receiver asks for no more.
    assert!(!s.nodes[1].engine.takes_direct());
    assert_eq!(s.nodes[1].engine.stats().deferred, 0);
    for i in 0..20u64 {
        recv(&mut s, 1, i, 100, None, tag(1));
    }
    let c = completions(&mut s, 1);
    assert_eq!(c.len(), 20);
    for (i, c) in c.iter().enumerate() {
        assert_eq!((c.token, c.len, c.error), (i as u64, 100, None));
        assert_eq!(s.nodes[1].app.recv[&c.token], pattern(100, i as u8));
    }
    assert!(s.nodes[1].engine.takes_direct());
}

#[test]
fn nothing_unacknowledged_in_the_session_may_be_overtaken() {
    let mut s = sim(2, Faults::default(), 3);
    assert!(s.nodes[0].engine.may_send_direct(1), "no session yet");
    recv(&mut s, 1, 1, 10, None, None);
    send(&mut s, 0, 1, 1, pattern(10, 0), None);
    assert!(!s.nodes[0].engine.may_send_direct(1), "a send queued");
    run(&mut s);
    assert!(
        s.nodes[0].engine.may_send_direct(1),
        "everything acknowledged"
    );
    // A rendezvous request acknowledged but its data not yet asked for
    // is still a send of the session.
    send(&mut s, 0, 1, 2, pattern(100_000, 1), None);
    let limit = s.now + Nanos::from_millis(5);
    s.run_until(limit, |_| false);
    assert!(!s.nodes[0].engine.may_send_direct(1));
    recv(&mut s, 1, 2, 100_000, None, None);
    run(&mut s);
    assert!(s.nodes[0].engine.may_send_direct(1));
}

#[test]
fn a_direct_message_after_a_session_message_matches_after_it() {
    let mut s = sim(2, Faults::default(), 4);
    // A rendezvous request, acknowledged, waits at the receiver as
    // unexpected. (Its sender would not go direct yet, the send being
    // outstanding; what is acknowledged is matched, which is what makes
    // even that safe.)
    send(&mut s, 0, 1, 1, pattern(100_000, 1), Some(9));
    run(&mut s);
    assert!(!s.nodes[0].engine.may_send_direct(1));
    direct(&mut s, 0, 1, Some(9), &pattern(64, 2));
    // Two receives for that tag take them in the order they were sent.
    recv(&mut s, 1, 10, 100_000, None, tag(9));
    recv(&mut s, 1, 11, 100_000, None, tag(9));
    run(&mut s);
    let mut c = completions(&mut s, 1);
    c.sort_by_key(|c| c.token);
    assert_eq!(c.len(), 2);
    assert_eq!((c[0].token, c[0].len), (10, 100_000));
    assert_eq!((c[1].token, c[1].len), (11, 64));
}

/// The job key of these tests.
const KEY: &[u8] = b"job key: sixteen bytes or more";

/// Node `i`'s configuration with job key `key` (none: no authentication).
fn keyed(i: usize, key: Option<&[u8]>) -> Config {
    Config {
        auth: key.map(|k| AuthConfig {
            key: k.to_vec(),
            encrypt: false,
        }),
        ..cfg(i)
    }
}

/// With a job key the first message to a peer goes through the session,
/// whose handshake proves the key both ways; then small messages go
/// direct, and the receiver takes them.
#[test]
fn authenticated_engines_go_direct_once_the_handshake_verified() {
    let mut s = pair_with(5, |i| keyed(i, Some(KEY)));
    assert!(
        !s.nodes[0].engine.may_send_direct(1),
        "no session: the peer has not shown the key"
    );
    assert!(s.nodes[1].engine.takes_direct());
    recv(&mut s, 1, 1, 10, None, tag(3));
    send(&mut s, 0, 1, 1, pattern(10, 0), Some(3));
    assert!(!s.nodes[0].engine.may_send_direct(1), "handshake under way");
    run(&mut s);
    assert!(
        s.nodes[0].engine.may_send_direct(1),
        "handshake verified, all acknowledged"
    );
    // The receiver's side of the session was opened by our verified HELLO:
    // it may answer direct too.
    assert!(s.nodes[1].engine.may_send_direct(0));
    recv(&mut s, 1, 2, 100, None, tag(3));
    direct(&mut s, 0, 1, Some(3), &pattern(64, 1));
    let c = completions(&mut s, 1);
    assert_eq!(c.len(), 2);
    assert_eq!((c[1].token, c[1].len, c[1].error), (2, 64, None));
    assert_eq!(&s.nodes[1].app.recv[&2][..64], &pattern(64, 1)[..]);
    assert_eq!(s.nodes[1].engine.stats().unauthenticated, 0);
}

/// A process of the same user without the job key (or with another)
/// writing direct messages into a keyed endpoint's channel: none is taken,
/// each is counted. Its own engine would not send them: it has no session
/// with the keyed peer (its HELLO does not verify there).
#[test]
fn direct_messages_from_a_peer_without_the_key_are_dropped_and_counted() {
    let another: &[u8] = b"another job's key, as long";
    for (name, other) in [("no key", None), ("another key", Some(another))] {
        let mut s = pair_with(6, |i| keyed(i, if i == 1 { Some(KEY) } else { other }));
        recv(&mut s, 1, 1, 100, None, tag(3));
        // It tries the session first: nothing verifies at the keyed end.
        send(&mut s, 0, 1, 1, pattern(10, 0), Some(3));
        let limit = s.now + Nanos::from_millis(50);
        s.run_until(limit, |_| false);
        for i in 0..5u8 {
            let m = DirectMessage {
                tag: Some(3),
                data: None,
                payload: &pattern(64, i),
            };
            let node = &mut s.nodes[1];
            assert_eq!(
                node.engine.receive_direct(0, m, &mut node.app),
                Err(DirectRefused::Unauthenticated),
                "{name}"
            );
        }
        assert!(
            completions(&mut s, 1).is_empty(),
            "{name}: nothing delivered"
        );
        assert!(s.nodes[1].engine.stats().unauthenticated >= 5, "{name}");
    }
}

/// A session that ended (here the peer's CLOSE) leaves the peer known to
/// hold the key: what it sent direct before it saw the end is still taken.
#[test]
fn a_peer_that_showed_the_key_stays_trusted_after_its_session_ends() {
    let mut s = pair_with(7, |i| keyed(i, Some(KEY)));
    recv(&mut s, 1, 1, 10, None, None);
    send(&mut s, 0, 1, 1, pattern(10, 0), None);
    run(&mut s);
    s.nodes[0].engine.close();
    run(&mut s);
    recv(&mut s, 1, 2, 100, None, None);
    direct(&mut s, 0, 1, None, &pattern(64, 9));
    let c = completions(&mut s, 1);
    assert!(
        c.iter()
            .any(|c| c.token == 2 && c.len == 64 && c.error.is_none())
    );
}

/// Seeded mixes of direct messages and messages through a lossy,
/// duplicating, reordering session, received by receives posted before and
/// after: each message lands in the receive of its rank (FI_ORDER_SAS), so
/// going direct whenever the engine allows never overtakes the session.
#[test]
fn direct_and_session_messages_keep_their_order_under_faults() {
    const N: u64 = 600;
    const ROOM: usize = 100_000;
    for seed in 1..=4u64 {
        let f = Faults {
            loss: 0.05,
            dup: 0.02,
            jitter: Nanos::from_micros(40),
            ..Faults::default()
        };
        let mut s = sim(2, f, seed);
        let mut rng = crate::SplitMix64::new(seed);
        let sizes = [0usize, 8, 64, 1000, 5000, 70_000];
        let (mut posted, mut direct_sent) = (0u64, 0u64);
        for i in 0..N {
            // Receives come at random, some before their message, some
            // just after (a rendezvous waits for its receive).
            let upto = (i + rng.next_u64() % 4).saturating_sub(1).min(N);
            while posted < upto {
                recv(&mut s, 1, posted, ROOM, None, tag(4));
                posted += 1;
            }
            let len = sizes[(rng.next_u64() % sizes.len() as u64) as usize];
            let data = pattern(len, i as u8);
            if len <= 64 && rng.next_u64().is_multiple_of(2) && s.nodes[0].engine.may_send_direct(1)
            {
                direct(&mut s, 0, 1, Some(4), &data);
                direct_sent += 1;
            } else {
                send(&mut s, 0, 1, 1000 + i, data, Some(4));
            }
            if rng.next_u64().is_multiple_of(3) {
                // A pause long enough for the session to settle, often.
                let limit = s.now + Nanos::from_millis(2);
                s.run_until(limit, |s| s.nodes[0].engine.may_send_direct(1));
            } else {
                for _ in 0..(rng.next_u64() % 8) {
                    s.step();
                }
            }
        }
        while posted < N {
            recv(&mut s, 1, posted, ROOM, None, tag(4));
            posted += 1;
        }
        run(&mut s);
        let got = completions(&mut s, 1);
        assert_eq!(got.len() as u64, N, "seed {seed}");
        for c in &got {
            assert_eq!(c.error, None, "seed {seed}");
            let want = pattern(c.len, c.token as u8);
            assert_eq!(
                &s.nodes[1].app.recv[&c.token][..c.len],
                &want[..],
                "seed {seed}: receive {} holds another message",
                c.token
            );
        }
        assert!(
            direct_sent > 20,
            "seed {seed}: only {direct_sent} went direct"
        );
    }
}
