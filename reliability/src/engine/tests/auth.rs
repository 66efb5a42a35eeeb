//! Packet authentication (PROTOCOL.md §11): authenticated sessions, the
//! CHALLENGE round, keys that differ, and an attacker who replays, mangles
//! and forges datagrams — checked to change nothing.

use super::*;
use crate::sim::{Adversary, AdversaryConfig};
use crate::wire::PacketType;

fn auth() -> Option<AuthConfig> {
    Some(AuthConfig {
        key: b"job key: sixteen bytes or more".to_vec(),
        encrypt: true,
    })
}

fn auth_sim(n: usize, faults: Faults, seed: u64) -> Sim<Buffers> {
    Sim::new(
        (0..n).map(|_| Buffers::default()).collect(),
        faults,
        seed,
        |i| Config {
            auth: auth(),
            ..cfg(i)
        },
    )
}

/// What an engine counts as rejected or dropped without effect (a HELLO
/// that must prove it is fresh draws a CHALLENGE and nothing else).
fn rejected(s: &Stats) -> u64 {
    s.corrupt + s.auth_rejected + s.replayed + s.unauthenticated + s.dropped + s.challenges_sent
}

#[test]
fn authenticated_messages_both_ways_under_faults() {
    for encrypt in [true, false] {
        let f = Faults {
            loss: 0.1,
            dup: 0.05,
            corrupt: 0.02,
            jitter: Nanos::from_micros(30),
            split: 0.3,
            mtu: 1472,
            ..Faults::default()
        };
        let mut s = Sim::new(vec![Buffers::default(), Buffers::default()], f, 3, |i| {
            Config {
                auth: Some(AuthConfig {
                    encrypt,
                    ..auth().unwrap()
                }),
                ..cfg(i)
            }
        });
        for (i, len) in [0usize, 10, 1400, 5000, 200_000].into_iter().enumerate() {
            let t = i as u64;
            recv(
                &mut s,
                1,
                t,
                len,
                None,
                Some(TagMatch { tag: t, ignore: 0 }),
            );
            recv(&mut s, 0, t, len, None, None);
            send(&mut s, 0, 1, t, pattern(len, 1), Some(t));
            send(&mut s, 1, 0, t, pattern(len, 2), None);
        }
        run(&mut s);
        for node in 0..2 {
            let c = completions(&mut s, node);
            assert_eq!(c.len(), 10, "encrypt {encrypt} node {node}: {c:?}");
            assert!(c.iter().all(|c| c.error.is_none()), "{c:?}");
            for t in 0..5u64 {
                let len = [0usize, 10, 1400, 5000, 200_000][t as usize];
                let salt = if node == 1 { 1 } else { 2 };
                assert_eq!(s.nodes[node].app.recv[&t], pattern(len, salt));
            }
            let st = s.nodes[node].engine.stats();
            // Corruption is caught by the tag now: counted as rejected.
            assert!(st.auth_rejected > 0 && st.replayed > 0, "{st:?}");
        }
    }
}

#[test]
fn first_hello_draws_a_challenge_unless_the_incarnation_is_known() {
    for known in [false, true] {
        let mut s = auth_sim(2, Faults::default(), 4);
        if known {
            for (a, b) in [(0, 1), (1, 0)] {
                let inc = s.nodes[b].engine.config().incarnation;
                s.nodes[a].engine.peer_incarnation(b, inc).unwrap();
            }
        }
        recv(&mut s, 1, 1, 10, None, None);
        send(&mut s, 0, 1, 1, pattern(10, 0), None);
        run(&mut s);
        assert_eq!(completions(&mut s, 0)[0].error, None);
        assert_eq!(completions(&mut s, 1).len(), 1);
        let challenges = s.nodes[1].engine.stats().challenges_sent;
        assert_eq!(challenges, u64::from(!known));
    }
}

#[test]
fn engines_with_other_keys_or_none_never_talk() {
    for other in [
        Some(AuthConfig {
            key: b"another job's key, 16+ bytes".to_vec(),
            encrypt: true,
        }),
        None,
    ] {
        let mut s = pair_with(5, |i| Config {
            auth: if i == 0 { auth() } else { other.clone() },
            max_retries: 3,
            ..cfg(i)
        });
        recv(&mut s, 1, 1, 10, None, None);
        send(&mut s, 0, 1, 1, pattern(10, 0), None);
        run(&mut s);
        assert_eq!(
            completions(&mut s, 0)[0].error,
            Some(OpError::PeerUnreachable)
        );
        assert!(completions(&mut s, 1).is_empty());
        let st = s.nodes[1].engine.stats();
        assert_eq!(
            st.auth_rejected + st.unauthenticated,
            st.rx_datagrams,
            "{st:?}"
        );
    }
}

/// Three endpoints exchange messages of all kinds, endpoint 2 restarts
/// midway; run once quietly and once with an attacker injecting two
/// datagrams for every one delivered. The completions and their virtual
/// times must be the same, and every injected datagram counted as rejected.
#[test]
fn adversary_changes_nothing() {
    /// (token, node, virtual time, failed because node 2 restarted).
    type Done = (u64, usize, u64, bool);
    fn scenario(adversary: bool) -> (Vec<Done>, Vec<Stats>, u64) {
        // Without congestion control: the replies a replay draws (a
        // HELLO_ACK to a copy of a HELLO, CHALLENGEs, RESETs) change the
        // order datagrams leave in within one instant, and with it the
        // share of the receive window each ack grants (§12.1), hence the
        // timing. Correctness under attack with congestion control is what
        // `sim_stress` checks.
        let mut s = Sim::new(
            (0..3).map(|_| Buffers::default()).collect(),
            Faults::default(),
            6,
            |i| Config {
                auth: auth(),
                congestion: false,
                ..cfg(i)
            },
        );
        if adversary {
            s.adversary = Some(Adversary::new(AdversaryConfig {
                rate: 2.0,
                ..AdversaryConfig::default()
            }));
        }
        let mut digest = Vec::new();
        let mut token = 1u64;
        for round in 0..6u64 {
            if round == 3 {
                // A new incarnation of node 2: datagrams of the old one
                // remain in the attacker's memory.
                s.restart(
                    2,
                    Config {
                        incarnation: 900,
                        seed: 900,
                        auth: auth(),
                        congestion: false,
                        ..cfg(2)
                    },
                );
            }
            for from in 0..3 {
                for to in 0..3 {
                    let len = [0usize, 100, 3000, 70_000][(token % 4) as usize];
                    recv(
                        &mut s,
                        to,
                        token,
                        len,
                        Some(from),
                        Some(TagMatch {
                            tag: token,
                            ignore: 0,
                        }),
                    );
                    send(
                        &mut s,
                        from,
                        to,
                        token,
                        pattern(len, token as u8),
                        Some(token),
                    );
                    token += 1;
                }
            }
            run(&mut s);
            for node in 0..3 {
                for e in s.events(node) {
                    if let Event::Completion(c) = e {
                        // Sends to the old incarnation of node 2 fail.
                        let restarted = matches!(c.error, Some(OpError::PeerRestarted));
                        assert!(
                            c.error.is_none() || (round == 3 && restarted),
                            "round {round} node {node}: {c:?}"
                        );
                        digest.push((c.token, node, s.now.0, restarted));
                    } else if round != 3 {
                        panic!("round {round} node {node} adversary {adversary}: {e:?}");
                    }
                }
            }
        }
        let stats = s.nodes.iter().map(|n| n.engine.stats()).collect();
        let injected = s.adversary.as_ref().map_or(0, |a| a.counts.total());
        (digest, stats, injected)
    }
    // Replies to replays (a HELLO_ACK to a copy of a HELLO, CHALLENGEs,
    // RESETs) may change the order datagrams leave in within one instant,
    // so completions are compared as a set, each with its virtual time.
    let (mut quiet, quiet_stats, _) = scenario(false);
    let (mut attacked, stats, injected) = scenario(true);
    quiet.sort_unstable();
    attacked.sort_unstable();
    if let Some(i) = (0..quiet.len().min(attacked.len())).find(|&i| quiet[i] != attacked[i]) {
        panic!(
            "the attacker changed what completed, or when: #{i} {:?} against {:?}",
            quiet[i], attacked[i]
        );
    }
    assert_eq!(quiet.len(), attacked.len());
    assert!(injected > 1000, "{injected}");
    let rejected_more: u64 =
        stats.iter().map(rejected).sum::<u64>() - quiet_stats.iter().map(rejected).sum::<u64>();
    assert!(
        rejected_more >= injected,
        "{injected} injected, {rejected_more} rejected: {stats:?}"
    );
}

/// Moves datagrams between two engines until neither has any, recording
/// every one (source, bytes).
fn pump(e: &mut [Engine<usize>; 2], now: Instant, log: &mut Vec<(usize, Vec<u8>)>) {
    let mut b = Buffers::default();
    let mut frame = vec![0u8; 2048];
    loop {
        let mut moved = false;
        for i in 0..2 {
            while let Some(t) = e[i].poll_transmit(now, &mut frame, &mut b) {
                log.push((i, frame[..t.len].to_vec()));
                e[1 - i].handle_datagram(now, i, &frame[..t.len], &mut b);
                moved = true;
            }
        }
        if !moved {
            return;
        }
    }
}

fn engine(i: usize, inc: u32) -> Engine<usize> {
    Engine::new(Config {
        incarnation: inc,
        seed: u64::from(inc),
        auth: auth(),
        // Acks leave with the next transmission: `pump` runs no timers.
        ack_delay: Nanos(0),
        ..cfg(i)
    })
}

fn post(e: &mut Engine<usize>, now: Instant, dst: usize, token: u64) {
    let op = SendOp {
        token,
        dst,
        payload: Payload::Inject(b"x"),
        tag: None,
        data: None,
        level: CompletionLevel::Transmit,
        fence: false,
    };
    e.post_send(now, op).unwrap();
}

/// A HELLO recorded from an earlier incarnation of a peer (or an earlier
/// session of its current one) replayed while a newer session is
/// established draws a CHALLENGE (or is dropped) and tears nothing down; a
/// forged CLOSE or RESET, and a replayed one, do nothing either.
#[test]
fn replayed_handshakes_and_forged_endings_tear_nothing_down() {
    let t = Instant(1_000_000);
    let mut old_log = Vec::new();
    let mut e = [engine(0, 11), engine(1, 22)];
    post(&mut e[0], t, 1, 1);
    pump(&mut e, t, &mut old_log);
    // Node 0 closes (CLOSE recorded), then restarts as incarnation 33.
    e[0].close();
    pump(&mut e, t, &mut old_log);
    e[0] = engine(0, 33);
    let mut log = Vec::new();
    post(&mut e[0], t, 1, 2);
    pump(&mut e, t, &mut log);
    while e[1].poll_event().is_some() {}
    let peers_lost = e[1].stats().peers_lost;
    let established = |e: &Engine<usize>| e.debug_peer(0).unwrap_or_default();
    let before = established(&e[1]);
    // Every datagram node 0's first incarnation ever sent, replayed.
    let mut b = Buffers::default();
    for (src, bytes) in old_log.iter().chain(log.iter()) {
        if *src == 0 {
            e[1].handle_datagram(t, 0, bytes, &mut b);
        }
    }
    let st = e[1].stats();
    assert_eq!(st.peers_lost, peers_lost, "a replay ended a session");
    assert!(st.challenges_sent >= 1, "{st:?}");
    // The session is the same one: node 0 can still send on it.
    let mut sink = Vec::new();
    let mut frame = vec![0u8; 2048];
    while let Some(t2) = e[1].poll_transmit(t, &mut frame, &mut b) {
        e[0].handle_datagram(t, 1, &frame[..t2.len], &mut b);
        sink.push(t2.len);
    }
    assert_eq!(
        e[0].stats().peers_lost,
        0,
        "a reply to a replay hurt node 0"
    );
    post(&mut e[0], t, 1, 3);
    let mut log = Vec::new();
    pump(&mut e, t, &mut log);
    assert!(
        e[1].debug_peer(0)
            .unwrap_or_default()
            .contains("Established")
    );
    assert!(before.contains("Established"));
    let mut got = 0;
    while let Some(ev) = e[0].poll_event() {
        if let Event::Completion(c) = ev {
            assert_eq!(c.error, None);
            got += 1;
        }
    }
    assert_eq!(got, 2, "both sends of the new incarnation completed");
    // A forged RESET and CLOSE on the live session's ids.
    let mut forged = log[0].1.clone();
    forged[1] = PacketType::Close as u8;
    e[1].handle_datagram(t, 0, &forged, &mut b);
    forged[1] = PacketType::Reset as u8;
    e[1].handle_datagram(t, 0, &forged, &mut b);
    assert_eq!(e[1].stats().peers_lost, peers_lost);
}

/// An ICMP error about a peer that still answers is not believed with
/// authentication on, nor once it has missed two retransmission timeouts
/// (a peer starved of the CPU for a moment); once it has been silent for
/// `Config::icmp_silence` it is (PROTOCOL.md §11.7).
#[test]
fn icmp_is_believed_only_from_a_silent_peer() {
    let mut s = auth_sim(2, Faults::default(), 8);
    recv(&mut s, 1, 1, 10, None, None);
    send(&mut s, 0, 1, 1, pattern(10, 0), None);
    run(&mut s);
    completions(&mut s, 0);
    for _ in 0..100 {
        assert!(!s.nodes[0].engine.peer_unreachable(s.now, 1));
    }
    assert_eq!(s.nodes[0].engine.stats().peers_lost, 0);
    s.partition(0, 1, Nanos::from_secs(3600));
    send(&mut s, 0, 1, 2, pattern(10, 0), None);
    let timeouts = s.nodes[0].engine.stats().timeouts;
    let limit = s.now + Nanos::from_millis(150);
    s.run_until(limit, |_| false);
    assert!(s.nodes[0].engine.stats().timeouts >= timeouts + 2);
    assert!(!s.nodes[0].engine.peer_unreachable(s.now, 1));
    assert!(completions(&mut s, 0).is_empty(), "silent for 150 ms only");
    assert_eq!(s.nodes[0].engine.stats().peers_lost, 0);
    let limit = s.now + Config::default().icmp_silence;
    s.run_until(limit, |_| false);
    assert!(completions(&mut s, 0).is_empty());
    assert!(s.nodes[0].engine.peer_unreachable(s.now, 1));
    let c = completions(&mut s, 0);
    assert_eq!(c[0].error, Some(OpError::PeerUnreachable));
    assert!(
        !s.nodes[0].engine.peer_unreachable(s.now, 1),
        "a session ends once"
    );
}

/// A HELLO whose type byte a corrupting link (or a forger who saw it)
/// turned into a session packet's reaches a peer that has no such session
/// and cannot verify it: its RESET names the incarnation the HELLO was
/// bound to. The opener, which sent nothing but its HELLO on that session,
/// ignores it (only a restarted peer's RESET ends a handshake) and the
/// handshake goes on. Seen through a real impairing path: the session was
/// reset before it began.
#[test]
fn a_reset_drawn_by_a_mangled_hello_does_not_end_the_handshake() {
    for known in [true, false] {
        let t = Instant(1_000_000);
        let mut e = [engine(0, 11), engine(1, 22)];
        if known {
            e[0].peer_incarnation(1, 22).unwrap();
        }
        post(&mut e[0], t, 1, 1);
        let mut b = Buffers::default();
        let mut frame = vec![0u8; 2048];
        let len = e[0].poll_transmit(t, &mut frame, &mut b).unwrap().len;
        assert_eq!(frame[1], PacketType::Hello as u8);
        let mut mangled = frame[..len].to_vec();
        mangled[1] = PacketType::Data as u8;
        e[1].handle_datagram(t, 0, &mangled, &mut b);
        let mut replies = 0;
        while let Some(r) = e[1].poll_transmit(t, &mut frame, &mut b) {
            e[0].handle_datagram(t, 1, &frame[..r.len], &mut b);
            replies += 1;
        }
        assert_eq!(replies, 1, "the peer answers with a RESET");
        assert_eq!(
            e[0].stats().peers_lost,
            0,
            "known {known}: the RESET ended it"
        );
        // The HELLO's retransmission opens the session; the send completes.
        let later = e[0].poll_timeout().expect("the HELLO is retransmitted");
        e[0].handle_timeout(later);
        let mut log = Vec::new();
        pump(&mut e, later, &mut log);
        let mut errors = Vec::new();
        while let Some(ev) = e[0].poll_event() {
            if let Event::Completion(c) = ev {
                errors.push(c.error);
            }
        }
        assert_eq!(errors, vec![None], "known {known}");
    }
}
