//! Restarts under load: 4 endpoints exchange messages over a lossy network;
//! endpoint 2 restarts (a new engine, new incarnation; datagrams already on
//! their way to it still arrive) twice. Checks: every operation completes
//! exactly once; sends fail only towards the restarted peer, with a peer
//! error; nothing is delivered twice; the new incarnation only ever receives
//! messages whose send succeeded (no stale delivery from the old session);
//! traffic flows again afterwards.

#![allow(clippy::unwrap_used)] // a test may unwrap: a panic is its verdict
#![allow(clippy::needless_range_loop)] // node indices are used for several arrays

use std::collections::{HashMap, HashSet};

use ofi_xdp_reliability::sim::{Faults, Sim};
use ofi_xdp_reliability::*;

struct App;
impl SendBuffers for App {
    fn read(&mut self, token: u64, offset: usize, dst: &mut [u8]) {
        for (k, b) in dst.iter_mut().enumerate() {
            *b = (token as usize * 131 + offset + k) as u8;
        }
    }
}
impl RecvBuffers for App {
    fn write(&mut self, _token: u64, _offset: usize, _src: &[u8]) {}
}

const N: usize = 4;

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn cfg(i: usize, generation: u32) -> Config {
    Config {
        incarnation: 1000 * (generation + 1) + i as u32,
        seed: u64::from(generation) * 100 + i as u64,
        ..Config::default()
    }
}

#[test]
fn restarts_under_load() {
    let faults = Faults {
        loss: 0.05,
        dup: 0.05,
        corrupt: 0.01,
        latency: Nanos::from_micros(5),
        jitter: Nanos::from_micros(30),
        mtu: 1472,
        // A third of the datagrams arrive in pieces, as AF_XDP multi-buffer
        // hands them over.
        split: 0.3,
        ..Faults::default()
    };
    let seed = std::env::var("SIM_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(42);
    let mut sim: Sim<App> = Sim::new((0..N).map(|_| App).collect(), faults, seed, |i| cfg(i, 0));
    let mut next_token = 1u64;
    // token -> (src, dst)
    let mut sends: HashMap<u64, (usize, usize)> = HashMap::new();
    // Sends posted by an incarnation of node 2 that later died: they vanish with it.
    let mut died: HashSet<u64> = HashSet::new();
    // Generation of node 2 when each send completed.
    let mut fail_gen: HashMap<u64, u32> = HashMap::new();
    let mut send_result: HashMap<u64, Option<OpError>> = HashMap::new();
    let mut received: Vec<HashSet<u64>> = vec![HashSet::new(); N];
    // Messages received by node 2 per generation.
    let mut received_by_gen: Vec<Vec<u64>> = vec![Vec::new(); 3];
    let mut generation = 0u32;
    let mut recv_tokens = 1u64 << 40;
    let mut posted = [0usize; N];
    // Every completion in the order they came: the same seed gives the same digest.
    let mut digest = 0u64;
    for round in 0..20_000u32 {
        if round >= 2800
            && sends
                .keys()
                .all(|t| send_result.contains_key(t) || died.contains(t))
        {
            break;
        }
        if round == 1000 || round == 2000 {
            generation += 1;
            sim.restart_with(2, cfg(2, generation), false);
            for (t, (src, _)) in &sends {
                if *src == 2 && !send_result.contains_key(t) {
                    died.insert(*t);
                }
            }
            posted[2] = 0;
        }
        for s in 0..N {
            if round < 2800 && round % 3 == s as u32 % 3 {
                let dst = (s + 1 + (round as usize / 3 + s) % (N - 1)) % N;
                let token = next_token;
                next_token += 1;
                let len = [0, 10, 3000, 20_000, 0, 10, 3000, 100_000][(token % 8) as usize];
                let now = sim.now;
                sim.nodes[s]
                    .engine
                    .post_send(
                        now,
                        SendOp {
                            token,
                            dst,
                            payload: Payload::Buffer { len },
                            tag: None,
                            data: Some(token),
                            level: CompletionLevel::Transmit,
                            fence: false,
                        },
                    )
                    .unwrap();
                sends.insert(token, (s, dst));
            }
            while posted[s] < 8 {
                let n = &mut sim.nodes[s];
                let op = RecvOp {
                    token: recv_tokens,
                    len: 200_000,
                    src: None,
                    tag: None,
                    multi_recv: None,
                };
                recv_tokens += 1;
                n.engine.post_recv(op, &mut n.app).unwrap();
                posted[s] += 1;
            }
        }
        // The application's own pace: 50 µs of virtual time per round.
        sim.now = sim.now + Nanos::from_micros(50);
        let steps = if round < 2800 { 3 } else { 200 };
        for _ in 0..steps {
            if !sim.step() {
                sim.now = sim.now + Nanos::from_millis(1);
            }
        }
        for i in 0..N {
            for e in sim.events(i) {
                let Event::Completion(c) = e else { continue };
                digest = mix(digest
                    ^ c.token
                    ^ ((i as u64) << 48)
                    ^ (c.error.map_or(0, |e| e as u64 + 1) << 56));
                if c.flags.contains(Flags::SEND) {
                    let (_, dst) = sends[&c.token];
                    assert!(
                        send_result.insert(c.token, c.error).is_none(),
                        "send completed twice"
                    );
                    fail_gen.insert(c.token, generation);
                    if let Some(err) = c.error {
                        assert_eq!(dst, 2, "only sends to the restarted node may fail");
                        assert!(
                            matches!(
                                err,
                                OpError::PeerRestarted
                                    | OpError::PeerReset
                                    | OpError::PeerUnreachable
                            ),
                            "{err:?}"
                        );
                    }
                } else {
                    posted[i] -= 1;
                    if let Some(err) = c.error {
                        // A message being received when its sender's session died.
                        assert!(
                            matches!(err, OpError::PeerRestarted | OpError::PeerReset),
                            "{err:?}"
                        );
                        continue;
                    }
                    let (src, dst) = sends[&c.data];
                    assert_eq!(dst, i);
                    assert_eq!(c.src.unwrap(), src);
                    assert!(received[i].insert(c.data), "delivered twice");
                    if i == 2 {
                        received_by_gen[generation as usize].push(c.data);
                    }
                }
            }
        }
    }
    let limit = sim.now + Nanos::from_secs(30);
    sim.run_until(limit, |_| false);
    for i in 0..N {
        for e in sim.events(i) {
            if let Event::Completion(c) = e
                && c.flags.contains(Flags::SEND)
            {
                assert!(
                    send_result.insert(c.token, c.error).is_none(),
                    "send completed twice"
                );
                fail_gen.insert(c.token, generation);
            }
        }
    }
    for t in sends.keys() {
        assert!(
            send_result.contains_key(t) != died.contains(t),
            "send {t} must complete exactly once"
        );
    }
    // Whatever a new incarnation received was sent successfully: nothing stale.
    // Whatever an incarnation received was sent to it: a send whose message
    // generation g received may only have failed because of a later restart
    // (the sender could not learn it was delivered before g died).
    for g in 1..3 {
        for id in &received_by_gen[g] {
            if send_result[id].is_some() {
                assert!(
                    fail_gen[id] > g as u32,
                    "generation {g} received message {id} of a send that failed in generation {}",
                    fail_gen[id]
                );
            }
        }
        assert!(
            !received_by_gen[g].is_empty(),
            "traffic resumed after restart {g}"
        );
    }
    let failed = send_result.values().filter(|e| e.is_some()).count();
    println!(
        "{} sends, {failed} failed, virtual time {:.3} s, net {:?}, digest {digest:#018x}",
        sends.len(),
        sim.now.0 as f64 / 1e9,
        sim.counts
    );
    for (i, n) in sim.nodes.iter().enumerate() {
        println!("  node {i}: {:?}", n.engine.stats());
    }
    assert!(failed > 0, "the restarts should have failed some sends");
    // Sends between the other nodes all succeeded.
    for (t, (s, d)) in &sends {
        if *s != 2 && *d != 2 {
            assert_eq!(send_result[t], None);
        }
    }
}
