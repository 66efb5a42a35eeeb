//! The stress simulation: many messages among 8 endpoints under 10%
//! loss, 5% duplication, reordering and 1% corruption, checking exactly-once,
//! intact, in-order (per sender, receiver and queue) delivery, one completion
//! per operation, bounded unexpected memory, and reproducibility from the seed.
//! Beside the messages, RMA writes, reads and atomics (PROTOCOL.md §8) run
//! on the same streams: reads return the last write posted before them,
//! every fetch-and-add runs once and in posting order, and operations on an
//! unknown key fail at the initiator.
//! It runs three times: as described; "attacked" — with packet
//! authentication, a bottleneck link with a queue (drop-tail and ECN
//! marking) in front of every endpoint, and an attacker replaying, mangling
//! and forging datagrams at a third of the delivered rate; and "sprayed" —
//! attacked, and every datagram sprayed over four paths of 5 to 20 µs one
//! way by eight entropy values per session that the engine picks
//! (PROTOCOL.md §4.6), so that reordering by the paths' skew is the normal
//! case (congestion control is on in all three). A path that dies is
//! `engine/tests/multipath.rs`'s: here, under 10 % loss and the attacker, a
//! dead path's values can still cost a session its retry limit (the full
//! run lost one at ~300,000 messages with the slowest path dead).
//!
//! Default: a small count (`cargo test --release -p ofi-xdp-reliability`).
//! Full run (1,000,000 messages, sizes up to 4 MiB), see README.md:
//! `SIM_MESSAGES=1000000 cargo test --release -p ofi-xdp-reliability --test sim_stress -- --nocapture`
//! (`SIM_VARIANT=plain`, `attacked` or `sprayed` runs one of the three).

#![allow(clippy::unwrap_used)] // a test may unwrap: a panic is its verdict

use std::collections::HashMap;

use ofi_xdp_reliability::sim::memory::{ATOMIC_ADD, DATATYPE_U64, Memory, Region};
use ofi_xdp_reliability::sim::{
    Adversary, AdversaryConfig, Bottleneck, Faults, Multipath, Path, Sim,
};
use ofi_xdp_reliability::*;

const N: usize = 8;
const CLASS_SHIFT: u32 = 56;
const SRC_SHIFT: u32 = 48;
/// Class 0: untagged (single and multi-recv buffers), class 1: tagged any
/// source, class 2: tagged large (rendezvous), class 3: tagged directed.
const CLASSES: usize = 4;
const SMALL_CAP: usize = 64 * 1024;
const MULTI_CAP: usize = 256 * 1024;
const UNEXPECTED_BUDGET: usize = 192 << 10;
/// RMA: each node registers one region; sender s owns slice s of every
/// target's region (writes and reads) and counter lane s (atomics).
const RMA_KEY: u64 = 0xC0DE;
const RMA_BASE: u64 = 0x4000_0000;
const SLICE: usize = 64 * 1024;
const LANES_AT: usize = N * SLICE;
/// One operation in this many posts is also an RMA operation.
const RMA_EVERY: u64 = 6;

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Content of byte range of the message identified by `id`.
fn fill(id: u64, offset: usize, dst: &mut [u8]) {
    for (k, b) in dst.iter_mut().enumerate() {
        let j = (offset + k) as u64;
        let w = mix(id ^ (j >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        *b = (w >> ((j & 7) * 8)) as u8;
    }
}

fn check(id: u64, data: &[u8]) -> bool {
    let mut tmp = vec![0u8; data.len()];
    fill(id, 0, &mut tmp);
    tmp == data
}

#[derive(Default)]
struct App {
    /// Send token → message id (content seed).
    sends: HashMap<u64, u64>,
    /// Receive token → buffer.
    recvs: HashMap<u64, Vec<u8>>,
    /// Registered memory, and RMA results by token.
    mem: Memory,
}

impl SendBuffers for App {
    fn read(&mut self, token: u64, offset: usize, dst: &mut [u8]) {
        let id = self.sends.get(&token).copied().unwrap_or(0);
        fill(id, offset, dst);
    }

    fn rma_read(&mut self, key: u64, addr: u64, dst: &mut [u8]) -> Result<(), RmaStatus> {
        self.mem.read(key, addr, dst)
    }
}

impl RecvBuffers for App {
    fn write(&mut self, token: u64, offset: usize, src: &[u8]) {
        let b = self
            .recvs
            .get_mut(&token)
            .expect("write to unknown receive");
        b[offset..offset + src.len()].copy_from_slice(src);
    }

    ofi_xdp_reliability::rma_target_in!(mem);
}

/// An RMA operation outstanding, and what its completion must show.
enum RmaCheck {
    /// A write to the initiator's slice of the target.
    Write,
    /// A read of `len` bytes that must equal write `id`'s content.
    Read { dst: usize, id: u64, len: usize },
    /// A fetch-and-add that must have seen `before` (`None`: no fetch).
    Add { before: Option<u64> },
    /// An operation on a key nobody registered: must fail.
    BadKey,
}

/// Per (initiator, target) pair: the last write to its slice, reads of the
/// slice outstanding (no write is posted meanwhile: the provider does not
/// promise write-after-read ordering, FI_ORDER_WAR), adds posted.
#[derive(Default, Clone, Copy)]
struct Pair {
    last_write: Option<(u64, usize)>,
    reads_out: usize,
    adds: u64,
}

/// Post one RMA operation from `s` to `dst`.
fn post_rma(
    sim: &mut Sim<App>,
    rng: &mut Rng,
    node: &mut NodeState,
    pair: &mut Pair,
    s: usize,
    dst: usize,
    id: u64,
) {
    let token = node.next_token;
    node.next_token += 1;
    let slice = RMA_BASE + (s * SLICE) as u64;
    let (kind, key, addr, len, check) = match rng.below(20) {
        0 => (RmaKind::Write, RMA_KEY + 1, slice, 8, RmaCheck::BadKey),
        1..8 if pair.reads_out == 0 => {
            let len = rng.below(SLICE as u64 + 1) as usize;
            pair.last_write = Some((id, len));
            sim.nodes[s].app.sends.insert(token, id);
            (RmaKind::Write, RMA_KEY, slice, len, RmaCheck::Write)
        }
        8..14 if pair.last_write.is_some() => {
            let (wid, wlen) = pair.last_write.unwrap_or_default();
            let len = rng.below(wlen as u64 + 1) as usize;
            pair.reads_out += 1;
            sim.nodes[s].app.mem.results.insert(token, vec![0; len]);
            let check = RmaCheck::Read { dst, id: wid, len };
            (RmaKind::Read, RMA_KEY, slice, len, check)
        }
        _ => {
            let fetch = rng.below(2) == 0;
            let before = fetch.then_some(pair.adds);
            pair.adds += 1;
            sim.nodes[s].app.mem.results.insert(token, vec![0; 8]);
            let kind = RmaKind::Atomic {
                op: ATOMIC_ADD,
                datatype: DATATYPE_U64,
                result_len: if fetch { 8 } else { 0 },
            };
            let lane = RMA_BASE + (LANES_AT + s * 8) as u64;
            (kind, RMA_KEY, lane, 8, RmaCheck::Add { before })
        }
    };
    let one = 1u64.to_le_bytes();
    let payload = match kind {
        RmaKind::Atomic { .. } => Payload::Inject(&one),
        _ => Payload::Buffer { len },
    };
    let now = sim.now;
    let op = RmaOp {
        token,
        dst,
        kind,
        key,
        addr,
        payload,
        data: None,
        level: CompletionLevel::Delivery,
        fence: false,
    };
    assert_eq!(sim.nodes[s].engine.post_rma(now, op), Ok(()));
    node.rma.insert(token, check);
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

struct PostedRecv {
    class: usize,
    seq: u64,
    multi: bool,
}

/// (receive post sequence, offset in the buffer, message index).
type Matched = (u64, usize, u64);

#[derive(Default)]
struct NodeState {
    next_token: u64,
    /// Outstanding sends: token → (dst, class, idx, len).
    sends: HashMap<u64, (usize, usize, u64, usize)>,
    /// Posted receives by token.
    recvs: HashMap<u64, PostedRecv>,
    posted: [usize; CLASSES],
    directed: [usize; N],
    recv_seq: u64,
    /// Per (src, class): (recv post seq, buffer offset, message idx).
    got: HashMap<(usize, usize), Vec<Matched>>,
    /// Outstanding RMA operations by token.
    rma: HashMap<u64, RmaCheck>,
    /// Per target: this node's RMA history with it.
    pairs: [Pair; N],
}

/// The three runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    Plain,
    /// Authentication, bottlenecks, an attacker.
    Attacked,
    /// Attacked, over four paths of different delay.
    Sprayed,
}

struct Outcome {
    digest: u64,
    now: Instant,
    retransmits: u64,
    corrupt: u64,
    duplicates: u64,
    rnr: u64,
    rma_done: u64,
}

fn run(total: u64, max_large: usize, seed: u64, variant: Variant) -> Outcome {
    let attacked = variant != Variant::Plain;
    let faults = Faults {
        loss: 0.10,
        dup: 0.05,
        corrupt: 0.01,
        latency: Nanos::from_micros(5),
        jitter: Nanos::from_micros(40),
        mtu: 1472,
        // A third of the datagrams arrive in pieces, as AF_XDP multi-buffer
        // hands them over.
        split: 0.3,
        // 100 Mbit/s into every endpoint behind a 128 KB queue, marking
        // CE above 32 KB: slow enough that the queues fill.
        bottleneck: attacked.then_some(Bottleneck {
            rate: 12_500_000,
            queue: 128 << 10,
            ecn_threshold: Some(32 << 10),
        }),
        // A fifth are read joined with the later datagrams of their flow,
        // as the bulk path's receive offload hands them over (§2.5).
        coalesce: 0.2,
    };
    let app = || {
        let mut a = App::default();
        let region = Region {
            base: RMA_BASE,
            bytes: vec![0; LANES_AT + N * 8],
            access: Access::READ | Access::WRITE,
        };
        a.mem.regions.insert(RMA_KEY, region);
        a
    };
    let mut sim: Sim<App> = Sim::new((0..N).map(|_| app()).collect(), faults, seed, |i| Config {
        incarnation: 1000 + i as u32,
        seed: seed ^ (i as u64 * 7919),
        unexpected_budget: UNEXPECTED_BUDGET,
        // Half the endpoints use the provider's ack policy (awaited
        // message ends at once, injected ones delayed or piggybacked).
        ack_message_end_at_once: i % 2 == 1,
        auth: attacked.then(|| AuthConfig {
            key: b"the job key of the stress run".to_vec(),
            encrypt: i % 2 == 0,
        }),
        // Sprayed: eight entropy values per session, picked by the engine.
        paths: if variant == Variant::Sprayed { 8 } else { 1 },
        ..Config::default()
    });
    if variant == Variant::Sprayed {
        let path = |us: u64| Path {
            latency: Nanos::from_micros(us),
            jitter: Nanos::from_micros(20),
            ..Path::default()
        };
        sim.multipath = Some(Multipath {
            paths: vec![path(5), path(10), path(15), path(20)],
            entropy: 8,
            by_engine: true,
        });
    }
    if attacked {
        sim.adversary = Some(Adversary::new(AdversaryConfig {
            rate: 0.3,
            seed: seed ^ 0xA77AC,
            ..AdversaryConfig::default()
        }));
    }
    let mut rng = Rng(seed);
    let mut st: Vec<NodeState> = (0..N).map(|_| NodeState::default()).collect();
    // Per (src, dst, class): next message index to send.
    let mut next_idx: HashMap<(usize, usize, usize), u64> = HashMap::new();
    let mut posted_total = 0u64;
    let mut recv_done = 0u64;
    let mut send_done = 0u64;
    let mut rma_done = 0u64;
    let mut digest = 0u64;
    let limit = Instant(3_600_000_000_000);
    let window = 48;
    let mut iter = 0u64;

    let mut last_progress = (0u64, Instant(0));
    let mut last_report = 0u64;
    while recv_done < total || send_done < total || st.iter().any(|n| !n.rma.is_empty()) {
        assert!(
            sim.now < limit,
            "stuck: recv {recv_done} send {send_done} of {total}"
        );
        if recv_done + send_done != last_progress.0 {
            last_progress = (recv_done + send_done, sim.now);
        }
        if total >= 100_000 && recv_done >= last_report + 50_000 {
            last_report = recv_done;
            eprintln!(
                "progress: {recv_done} received, {send_done} sends completed, t = {:?}",
                sim.now
            );
        }
        assert!(
            sim.now.since(last_progress.1) < Nanos::from_secs(30),
            "no progress for 30 s of virtual time: recv {recv_done} send {send_done} of {total}"
        );
        // Senders keep `window` sends outstanding.
        for (s, node) in st.iter_mut().enumerate() {
            while node.sends.len() < window && posted_total < total {
                let dst = rng.below(N as u64) as usize; // includes sending to self
                let r = rng.below(10_000);
                let (class, len) = if r < 5 {
                    (
                        2,
                        64 * 1024 + rng.below(max_large as u64 - 64 * 1024) as usize,
                    )
                } else {
                    let len = match rng.below(100) {
                        0..70 => rng.below(65) as usize,
                        70..95 => 64 + rng.below(4032) as usize,
                        _ => 4096 + rng.below(SMALL_CAP as u64 - 4096 + 1) as usize,
                    };
                    let class = [0, 0, 1, 3][rng.below(4) as usize];
                    (class, len)
                };
                let idx = next_idx.entry((s, dst, class)).or_insert(0);
                let id = ((class as u64) << CLASS_SHIFT)
                    | ((s as u64) << SRC_SHIFT)
                    | ((dst as u64) << 40)
                    | *idx;
                *idx += 1;
                let token = node.next_token;
                node.next_token += 1;
                let tag = (class != 0).then_some(id);
                // Small sends are sometimes injected (the engine keeps a copy
                // and reports them once sent), the provider's default.
                let injected = len <= sim.nodes[s].engine.config().inject_size && rng.below(3) == 0;
                let mut copy = vec![0u8; if injected { len } else { 0 }];
                fill(id, 0, &mut copy);
                let (payload, level) = if injected {
                    (Payload::Inject(&copy), CompletionLevel::Inject)
                } else if rng.below(10) == 0 {
                    (Payload::Buffer { len }, CompletionLevel::Delivery)
                } else {
                    (Payload::Buffer { len }, CompletionLevel::Transmit)
                };
                sim.nodes[s].app.sends.insert(token, id);
                let now = sim.now;
                let r = sim.nodes[s].engine.post_send(
                    now,
                    SendOp {
                        token,
                        dst,
                        payload,
                        tag,
                        data: Some(id),
                        level,
                        fence: false,
                    },
                );
                assert_eq!(r, Ok(()));
                node.sends.insert(token, (dst, class, id, len));
                posted_total += 1;
                if rng.below(RMA_EVERY) == 0 {
                    let mut pair = node.pairs[dst];
                    post_rma(&mut sim, &mut rng, node, &mut pair, s, dst, id);
                    node.pairs[dst] = pair;
                }
            }
        }
        iter += 1;
        if iter == 300 {
            // A temporary partition, shorter than the retry budget: survived.
            sim.partition(1, 2, Nanos::from_millis(150));
        }
        // Receivers keep a few receives posted per class (few, so that the
        // unexpected queue is exercised), and now and then stop posting for a
        // while so that the unexpected budget fills and receiver-not-ready
        // pushes back.
        for (d, node) in st.iter_mut().enumerate() {
            if (sim.now.0 / 5_000_000 + d as u64).is_multiple_of(5) {
                continue;
            }
            let want = [3usize, 3, 1, 0];
            for (class, &want) in want.iter().enumerate().take(3) {
                while node.posted[class] < want {
                    let token = node.next_token;
                    node.next_token += 1;
                    let multi = class == 0 && rng.below(3) == 0;
                    let len = match (class, multi) {
                        (0, true) => MULTI_CAP,
                        (2, _) => max_large,
                        _ => SMALL_CAP,
                    };
                    let tag = (class != 0).then_some(TagMatch {
                        tag: (class as u64) << CLASS_SHIFT,
                        ignore: (1u64 << CLASS_SHIFT) - 1,
                    });
                    sim.nodes[d].app.recvs.insert(token, vec![0; len]);
                    let op = RecvOp {
                        token,
                        len,
                        src: None,
                        tag,
                        multi_recv: multi.then_some(SMALL_CAP),
                    };
                    node.recvs.insert(
                        token,
                        PostedRecv {
                            class,
                            seq: node.recv_seq,
                            multi,
                        },
                    );
                    node.recv_seq += 1;
                    node.posted[class] += 1;
                    let n = &mut sim.nodes[d];
                    n.engine.post_recv(op, &mut n.app).unwrap();
                }
            }
            // Directed receives: one per source.
            for src in 0..N {
                if node.directed[src] == 0 {
                    let token = node.next_token;
                    node.next_token += 1;
                    let tag = Some(TagMatch {
                        tag: 3u64 << CLASS_SHIFT,
                        ignore: (1u64 << CLASS_SHIFT) - 1,
                    });
                    sim.nodes[d].app.recvs.insert(token, vec![0; SMALL_CAP]);
                    node.recvs.insert(
                        token,
                        PostedRecv {
                            class: 3 + src * 10,
                            seq: node.recv_seq,
                            multi: false,
                        },
                    );
                    node.recv_seq += 1;
                    node.directed[src] += 1;
                    let n = &mut sim.nodes[d];
                    let op = RecvOp {
                        token,
                        len: SMALL_CAP,
                        src: Some(src),
                        tag,
                        multi_recv: None,
                    };
                    n.engine.post_recv(op, &mut n.app).unwrap();
                }
            }
        }
        for _ in 0..4 {
            if !sim.step() {
                // Nothing in flight and no timer: let the (virtual) application
                // time pass so that a receiver in a posting pause resumes.
                sim.now = sim.now + Nanos::from_millis(1);
                break;
            }
        }
        // Completions.
        for (i, node) in st.iter_mut().enumerate() {
            for ev in sim.events(i) {
                let Event::Completion(c) = ev else {
                    if let Event::PeerLost { peer, .. } = ev {
                        eprintln!(
                            "{i}: {}",
                            sim.nodes[i].engine.debug_peer(peer).unwrap_or_default()
                        );
                        eprintln!(
                            "{peer}: {}",
                            sim.nodes[peer].engine.debug_peer(i).unwrap_or_default()
                        );
                        let e = &sim.nodes[peer].engine;
                        eprintln!(
                            "STATS {:?} unexp {} recvs {} posted {:?}",
                            e.stats(),
                            e.unexpected_count(),
                            e.recvs_posted(),
                            node.posted
                        );
                    }
                    panic!(
                        "unexpected event {ev:?} at node {i} t={:?} stats {:?}",
                        sim.now,
                        sim.nodes[i].engine.stats()
                    )
                };
                if let Some(want) = node.rma.remove(&c.token) {
                    let app = &mut sim.nodes[i].app;
                    let result = app.mem.results.remove(&c.token).unwrap_or_default();
                    app.sends.remove(&c.token);
                    match want {
                        RmaCheck::BadKey => assert_eq!(c.error, Some(OpError::RemoteKey), "{c:?}"),
                        RmaCheck::Write => {
                            assert_eq!(c.error, None, "write failed: {c:?}");
                            assert_eq!(c.flags, Flags::RMA | Flags::WRITE);
                        }
                        RmaCheck::Read { dst, id, len } => {
                            assert_eq!(c.error, None, "read failed: {c:?}");
                            assert_eq!(c.flags, Flags::RMA | Flags::READ);
                            assert_eq!(result.len(), len);
                            assert!(check(id, &result), "read {i}->{dst} returned other data");
                            node.pairs[dst].reads_out -= 1;
                        }
                        RmaCheck::Add { before } => {
                            assert_eq!(c.error, None, "atomic failed: {c:?}");
                            if let Some(b) = before {
                                assert_eq!(c.flags, Flags::ATOMIC | Flags::READ);
                                assert_eq!(result, b.to_le_bytes(), "fetch-add out of order");
                            }
                        }
                    }
                    digest = mix(digest ^ c.token ^ sim.now.0);
                    rma_done += 1;
                    continue;
                }
                if c.flags.contains(Flags::SEND) {
                    let (_, _, id, len) =
                        node.sends.remove(&c.token).expect("send completed twice");
                    assert_eq!(c.error, None, "send {id:x} failed");
                    assert_eq!(c.len, len);
                    send_done += 1;
                    sim.nodes[i].app.sends.remove(&c.token);
                    continue;
                }
                assert!(c.flags.contains(Flags::RECV));
                assert_eq!(c.error, None, "receive failed: {c:?}");
                let id = c.data;
                let class = (id >> CLASS_SHIFT) as usize;
                let src = ((id >> SRC_SHIFT) & 0xFF) as usize;
                let dst = ((id >> 40) & 0xFF) as usize;
                let idx = id & 0xFF_FFFF_FFFF;
                assert_eq!(dst, i, "misdelivered");
                assert_eq!(c.src, Some(src));
                if class != 0 {
                    assert_eq!(c.tag, id);
                }
                let pr = node
                    .recvs
                    .get(&c.token)
                    .expect("completion for unknown receive");
                let pclass = if pr.class >= 3 { 3 } else { pr.class };
                assert_eq!(pclass, class, "matched into wrong queue");
                if pr.class >= 3 {
                    assert_eq!(
                        (pr.class - 3) / 10,
                        src,
                        "directed receive matched another source"
                    );
                }
                let buf = &sim.nodes[i].app.recvs[&c.token];
                assert!(
                    check(id, &buf[c.buf_offset..c.buf_offset + c.len]),
                    "corrupt data in {id:x}"
                );
                node.got
                    .entry((src, class))
                    .or_default()
                    .push((pr.seq, c.buf_offset, idx));
                digest = mix(digest ^ id ^ ((c.len as u64) << 20) ^ sim.now.0);
                recv_done += 1;
                let release = !pr.multi || c.flags.contains(Flags::MULTI_RECV);
                if release {
                    let pr = node
                        .recvs
                        .remove(&c.token)
                        .unwrap_or_else(|| unreachable!());
                    if pr.class >= 3 {
                        node.directed[(pr.class - 3) / 10] -= 1;
                    } else {
                        node.posted[pr.class] -= 1;
                    }
                    sim.nodes[i].app.recvs.remove(&c.token);
                }
            }
        }
    }
    // Exactly once and in order per (src, dst, class).
    for (d, node) in st.iter_mut().enumerate() {
        for ((src, class), v) in node.got.iter_mut() {
            v.sort_unstable();
            for (k, &(_, _, idx)) in v.iter().enumerate() {
                assert_eq!(
                    idx, k as u64,
                    "order/exactly-once broken for {src}->{d} class {class}"
                );
            }
            assert_eq!(v.len() as u64, next_idx[&(*src, d, *class)]);
        }
    }
    // Every add ran exactly once: each lane holds its sender's count.
    for (d, n) in sim.nodes.iter().enumerate() {
        let bytes = &n.app.mem.regions[&RMA_KEY].bytes;
        for (s, node) in st.iter().enumerate() {
            let at = LANES_AT + s * 8;
            let lane = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
            assert_eq!(lane, node.pairs[d].adds, "adds {s}->{d}");
        }
    }
    let finished_at = sim.now;
    // A send reported complete when it went out (inject complete) is still
    // the engine's until the peer acknowledges it: let those acks arrive.
    let drained = sim.run_until(finished_at + Nanos::from_secs(30), |s| {
        s.nodes.iter().all(|n| n.engine.sends_outstanding() == 0)
    });
    assert!(
        drained,
        "sends still unacknowledged 30 s after the last completion"
    );
    for i in 0..sim.nodes.len() {
        let late = sim.events(i);
        assert!(
            late.is_empty(),
            "node {i}: events after the last completion: {late:?}"
        );
    }
    let mut out = Outcome {
        digest,
        now: finished_at,
        retransmits: 0,
        corrupt: 0,
        duplicates: 0,
        rnr: 0,
        rma_done,
    };
    for n in &sim.nodes {
        let s = n.engine.stats();
        assert!(s.unexpected_bytes_max <= UNEXPECTED_BUDGET as u64);
        assert_eq!(n.engine.sends_outstanding(), 0);
        out.retransmits += s.retransmits;
        out.corrupt += s.corrupt;
        out.duplicates += s.duplicates;
        out.rnr += s.rnr_sent;
    }
    if let Some(adv) = sim.adversary.as_ref() {
        let rejected: u64 = sim
            .nodes
            .iter()
            .map(|n| {
                let s = n.engine.stats();
                s.auth_rejected + s.replayed + s.unauthenticated + s.corrupt
            })
            .sum();
        println!(
            "attacker: {:?}; rejected by the endpoints {rejected}",
            adv.counts
        );
    }
    if variant == Variant::Sprayed {
        println!("paths: {:?}", sim.path_counts);
        assert!(sim.path_counts.iter().all(|p| p.sent > 1000));
    }
    println!(
        "{variant:?}, {total} messages, {} RMA operations: virtual time {:.3} s, retransmits {}, corrupt {}, duplicates {}, rnr {}, net {:?}, digest {:#018x}",
        out.rma_done,
        out.now.0 as f64 / 1e9,
        out.retransmits,
        out.corrupt,
        out.duplicates,
        out.rnr,
        sim.counts,
        out.digest
    );
    for (i, n) in sim.nodes.iter().enumerate() {
        println!("  node {i}: {:?}", n.engine.stats());
    }
    out
}

#[test]
fn eight_endpoints_lossy_network() {
    let total: u64 = std::env::var("SIM_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6_000);
    let max_large = if total >= 100_000 { 4 << 20 } else { 512 << 10 };
    let seed = std::env::var("SIM_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5EED);
    let variant = std::env::var("SIM_VARIANT").unwrap_or_default();
    for v in [Variant::Plain, Variant::Attacked, Variant::Sprayed] {
        if !variant.is_empty() && !format!("{v:?}").eq_ignore_ascii_case(&variant) {
            continue;
        }
        let a = run(total, max_large, seed, v);
        assert!(a.retransmits > 0 && a.corrupt > 0);
        assert!(a.rma_done > total / (2 * RMA_EVERY));
        if v == Variant::Plain {
            // Authenticated, network duplicates are dropped as replays.
            assert!(a.duplicates > 0);
        }
        if total <= 20_000 {
            // Reproducible from the seed.
            let b = run(total, max_large, seed, v);
            assert_eq!((a.digest, a.now), (b.digest, b.now));
        }
    }
}
