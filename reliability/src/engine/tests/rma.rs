//! RMA and atomics (PROTOCOL.md §8) through the simulated network: data
//! placed and read back intact, remote CQ data, refusals that leave the
//! target's memory untouched, atomics executed exactly once under loss,
//! duplication and reordering, and ordering with messages.

use super::*;
use crate::sim::memory::{ATOMIC_ADD, ATOMIC_CSWAP, DATATYPE_U64, Region};

const KEY: u64 = 0xC0DE;
const BASE: u64 = 0x1000_0000;

fn region(s: &mut Sim<Buffers>, at: usize, key: u64, len: usize, access: Access) {
    let r = Region {
        base: BASE,
        bytes: vec![0; len],
        access,
    };
    s.nodes[at].app.mem.regions.insert(key, r);
}

fn mem(s: &Sim<Buffers>, at: usize, key: u64) -> &[u8] {
    &s.nodes[at].app.mem.regions[&key].bytes
}

fn write(s: &mut Sim<Buffers>, from: usize, to: usize, token: u64, addr: u64, data: Vec<u8>) {
    write_with(
        s,
        (from, to),
        token,
        addr,
        data,
        None,
        CompletionLevel::Delivery,
    );
}

/// A write with remote CQ data `cq_data`, complete at `level`.
fn write_with(
    s: &mut Sim<Buffers>,
    (from, to): (usize, usize),
    token: u64,
    addr: u64,
    bytes: Vec<u8>,
    cq_data: Option<u64>,
    level: CompletionLevel,
) {
    let len = bytes.len();
    s.nodes[from].app.send.insert(token, bytes);
    let now = s.now;
    let op = RmaOp {
        token,
        dst: to,
        kind: RmaKind::Write,
        key: KEY,
        addr,
        payload: Payload::Buffer { len },
        data: cq_data,
        level,
        fence: false,
    };
    s.nodes[from].engine.post_rma(now, op).unwrap();
}

fn read(s: &mut Sim<Buffers>, from: usize, to: usize, token: u64, addr: u64, len: usize) {
    s.nodes[from].app.mem.results.insert(token, vec![0; len]);
    let now = s.now;
    let op = RmaOp {
        token,
        dst: to,
        kind: RmaKind::Read,
        key: KEY,
        addr,
        payload: Payload::Buffer { len },
        data: None,
        level: CompletionLevel::Delivery,
        fence: false,
    };
    s.nodes[from].engine.post_rma(now, op).unwrap();
}

fn atomic(s: &mut Sim<Buffers>, from: usize, token: u64, op: u8, operands: &[u8], fetch: bool) {
    let result_len = if fetch {
        if op == ATOMIC_CSWAP {
            operands.len() / 2
        } else {
            operands.len()
        }
    } else {
        0
    };
    s.nodes[from]
        .app
        .mem
        .results
        .insert(token, vec![0; result_len]);
    let now = s.now;
    let rop = RmaOp {
        token,
        dst: 1 - from,
        kind: RmaKind::Atomic {
            op,
            datatype: DATATYPE_U64,
            result_len,
        },
        key: KEY,
        addr: BASE,
        payload: Payload::Inject(operands),
        data: None,
        level: CompletionLevel::Delivery,
        fence: false,
    };
    s.nodes[from].engine.post_rma(now, rop).unwrap();
}

fn lossy() -> Faults {
    Faults {
        loss: 0.1,
        dup: 0.1,
        jitter: Nanos::from_micros(40),
        ..Faults::default()
    }
}

#[test]
fn writes_then_reads_come_back_intact() {
    for (seed, faults) in [(1, Faults::default()), (2, lossy())] {
        let mut s = sim(2, faults, seed);
        let size = 3 << 20;
        region(&mut s, 1, KEY, size, Access::READ | Access::WRITE);
        let sizes = [0usize, 1, 1400, 65536, 1 << 20];
        let mut at = 0u64;
        for (i, &n) in sizes.iter().enumerate() {
            write(&mut s, 0, 1, 10 + i as u64, BASE + at, pattern(n, i as u8));
            at += n as u64;
        }
        // Posted after the writes: reads see them (FI_ORDER_RAW).
        let mut at = 0u64;
        for (i, &n) in sizes.iter().enumerate() {
            read(&mut s, 0, 1, 20 + i as u64, BASE + at, n);
            at += n as u64;
        }
        run(&mut s);
        let done = completions(&mut s, 0);
        assert_eq!(done.len(), 2 * sizes.len(), "seed {seed}");
        assert!(done.iter().all(|c| c.error.is_none()), "{done:?}");
        for c in &done {
            let want = if c.token < 20 {
                Flags::RMA | Flags::WRITE
            } else {
                Flags::RMA | Flags::READ
            };
            assert_eq!(c.flags, want);
        }
        let mut at = 0usize;
        for (i, &n) in sizes.iter().enumerate() {
            assert_eq!(&mem(&s, 1, KEY)[at..at + n], &pattern(n, i as u8)[..]);
            assert_eq!(
                s.nodes[0].app.mem.results[&(20 + i as u64)],
                pattern(n, i as u8)
            );
            at += n;
        }
        // The target's application saw nothing: no CQ data was asked for.
        assert!(completions(&mut s, 1).is_empty());
        assert_eq!(s.nodes[1].app.mem.executed.len(), 2 * sizes.len());
        // Each range was checked once, not once per segment (in memory
        // registered from NULL a check probes every page).
        assert_eq!(s.nodes[1].app.mem.checks, 2 * sizes.len());
    }
}

/// How long a window of `n` transfers of `len` bytes from node 0 to node 1
/// (writes) or from node 1 to node 0 (reads) takes, from posting to the
/// last completion, and the datagrams each node sent.
fn window_of(s: &mut Sim<Buffers>, kind: RmaKind, n: u64, len: usize) -> (Nanos, u64, u64) {
    let t0 = s.now;
    let before = (
        s.nodes[0].engine.stats().tx_datagrams,
        s.nodes[1].engine.stats().tx_datagrams,
    );
    for i in 0..n {
        let addr = BASE + i * len as u64;
        match kind {
            RmaKind::Read => read(s, 0, 1, i, addr, len),
            _ => write(s, 0, 1, i, addr, pattern(len, i as u8)),
        }
    }
    let limit = s.now + Nanos::from_secs(60);
    let mut done = 0;
    s.run_until(limit, |s| {
        done += completions(s, 0).len();
        done as u64 >= n
    });
    assert_eq!(done as u64, n, "{kind:?}");
    (
        s.now.since(t0),
        s.nodes[0].engine.stats().tx_datagrams - before.0,
        s.nodes[1].engine.stats().tx_datagrams - before.1,
    )
}

/// A read's response moves as a write's segments do (PROTOCOL.md §8.2,
/// §8.3): on a link whose round trip is longer than the window takes to
/// send (MTU 1500) and on one it fills (9000), a window of sixteen 1 MiB
/// reads keeps as much in flight as sixteen writes, so it takes as long,
/// in as many datagrams: segments of the same size, acknowledged alike —
/// nothing in the engine makes reads slower (`fi_rma_bw -o read`).
#[test]
fn a_window_of_reads_takes_as_long_as_one_of_writes() {
    for mtu in [1472, 8972] {
        let faults = Faults {
            latency: Nanos::from_micros(100),
            bottleneck: Some(crate::sim::Bottleneck {
                rate: 2_000_000_000,
                queue: 8 << 20,
                ecn_threshold: None,
            }),
            ..Faults::default()
        };
        let mut s = Sim::new(
            vec![Buffers::default(), Buffers::default()],
            faults,
            mtu as u64,
            |i| Config { mtu, ..cfg(i) },
        );
        let len = 1 << 20;
        region(&mut s, 1, KEY, 16 * len, Access::READ | Access::WRITE);
        // The session is up and the congestion windows open both ways.
        window_of(&mut s, RmaKind::Write, 16, len);
        window_of(&mut s, RmaKind::Read, 16, len);
        let (wt, w_init, w_target) = window_of(&mut s, RmaKind::Write, 16, len);
        let (rt, r_init, r_target) = window_of(&mut s, RmaKind::Read, 16, len);
        let (wt, rt) = (wt.0 as f64, rt.0 as f64);
        assert!(
            (rt - wt).abs() <= 0.02 * wt,
            "MTU {mtu}: reads {rt} ns, writes {wt} ns"
        );
        // The data's datagrams: the writer's segments, the target's responses.
        let (w_data, r_data) = (w_init as f64, r_target as f64);
        assert!(
            (r_data - w_data).abs() <= 0.01 * w_data,
            "MTU {mtu}: {r_data} response datagrams, {w_data} write segments"
        );
        // Acknowledgements (and requests, answers) the other way: few beside them.
        assert!(
            r_init * 8 < r_target && w_target * 8 < w_init,
            "{r_init} {w_target}"
        );
        for i in 0..16u64 {
            assert_eq!(s.nodes[0].app.mem.results[&i], pattern(len, i as u8));
        }
    }
}

#[test]
fn write_with_data_reports_at_the_target() {
    let mut s = sim(2, Faults::default(), 3);
    region(&mut s, 1, KEY, 4096, Access::WRITE);
    let (bytes, level) = (pattern(3000, 1), CompletionLevel::Transmit);
    write_with(&mut s, (0, 1), 1, BASE + 8, bytes, Some(0xDA7A), level);
    run(&mut s);
    let at_target = completions(&mut s, 1);
    assert_eq!(at_target.len(), 1);
    let c = at_target[0];
    assert_eq!(
        c.flags,
        Flags::RMA | Flags::REMOTE_WRITE | Flags::REMOTE_CQ_DATA
    );
    assert_eq!((c.data, c.len, c.src), (0xDA7A, 3000, Some(0)));
    assert_eq!(&mem(&s, 1, KEY)[8..3008], &pattern(3000, 1)[..]);
    assert_eq!(completions(&mut s, 0)[0].error, None);
}

#[test]
fn refused_operations_fail_at_the_initiator_and_touch_nothing() {
    let mut s = sim(2, lossy(), 4);
    region(&mut s, 1, KEY, 4096, Access::READ);
    region(&mut s, 1, KEY + 1, 4096, Access::WRITE);
    let before = mem(&s, 1, KEY).to_vec();
    // Unknown key, beyond the end (a large write whose first segments
    // would fit), below the start, no write right, no read right.
    let bad = |key: u64, addr: u64, len: usize| (key, addr, len);
    let writes = [
        bad(77, BASE, 10),
        bad(KEY + 1, BASE + 4000, 100_000),
        bad(KEY + 1, BASE - 1, 10),
        bad(KEY, BASE, 10),
    ];
    for (i, &(key, addr, len)) in writes.iter().enumerate() {
        let token = 1 + i as u64;
        s.nodes[0].app.send.insert(token, vec![0xAB; len]);
        let now = s.now;
        let op = RmaOp {
            token,
            dst: 1,
            kind: RmaKind::Write,
            key,
            addr,
            payload: Payload::Buffer { len },
            data: Some(1),
            level: CompletionLevel::Delivery,
            fence: false,
        };
        s.nodes[0].engine.post_rma(now, op).unwrap();
    }
    s.nodes[0].app.mem.results.insert(9, vec![0; 8]);
    let now = s.now;
    let op = RmaOp {
        token: 9,
        dst: 1,
        kind: RmaKind::Read,
        key: KEY + 1,
        addr: BASE,
        payload: Payload::Buffer { len: 8 },
        data: None,
        level: CompletionLevel::Delivery,
        fence: false,
    };
    s.nodes[0].engine.post_rma(now, op).unwrap();
    // An atomic with fetch on a region without the read right.
    let now = s.now;
    let op = RmaOp {
        token: 10,
        dst: 1,
        kind: RmaKind::Atomic {
            op: ATOMIC_ADD,
            datatype: DATATYPE_U64,
            result_len: 8,
        },
        key: KEY + 1,
        addr: BASE,
        payload: Payload::Inject(&[1, 0, 0, 0, 0, 0, 0, 0]),
        data: None,
        level: CompletionLevel::Delivery,
        fence: false,
    };
    s.nodes[0].engine.post_rma(now, op).unwrap();
    run(&mut s);
    let mut errs: Vec<(u64, Option<OpError>)> = completions(&mut s, 0)
        .iter()
        .map(|c| (c.token, c.error))
        .collect();
    errs.sort_by_key(|e| e.0);
    let remote = |e: RmaStatus| Some(OpError::from(e));
    assert_eq!(
        errs,
        vec![
            (1, remote(RmaStatus::UnknownKey)),
            (2, remote(RmaStatus::OutOfRange)),
            (3, remote(RmaStatus::OutOfRange)),
            (4, remote(RmaStatus::NoAccess)),
            (9, remote(RmaStatus::NoAccess)),
            (10, remote(RmaStatus::NoAccess)),
        ]
    );
    assert_eq!(mem(&s, 1, KEY), &before[..]);
    assert!(mem(&s, 1, KEY + 1).iter().all(|&b| b == 0));
    assert!(
        completions(&mut s, 1).is_empty(),
        "no CQ data for a refused write"
    );
    assert!(s.nodes[1].app.mem.executed.is_empty());
    // The session is still good.
    if let Some(r) = s.nodes[1].app.mem.regions.get_mut(&KEY) {
        r.access = Access::READ | Access::WRITE;
    }
    write(&mut s, 0, 1, 20, BASE, vec![5; 16]);
    run(&mut s);
    assert_eq!(completions(&mut s, 0)[0].error, None);
    assert_eq!(&mem(&s, 1, KEY)[..16], &[5; 16]);
}

/// A 64 KiB region at node 1 and, for an operation of 20 000 bytes from
/// its start (several segments), a page in the middle of it.
fn region_and_a_page_within(s: &mut Sim<Buffers>) -> std::ops::Range<u64> {
    region(s, 1, KEY, 64 << 10, Access::READ | Access::WRITE);
    BASE + 8192..BASE + 12288
}

/// The outcome of node 0's one completed operation.
fn only_outcome(s: &mut Sim<Buffers>) -> Option<OpError> {
    let done = completions(s, 0);
    assert_eq!(done.len(), 1, "{done:?}");
    done[0].error
}

/// A write whose range was admitted but one segment of which cannot be
/// copied (memory registered from NULL and mapped read-only at the target)
/// fails at its initiator; the session carries on.
#[test]
fn write_failing_mid_way_fails_at_the_initiator() {
    let mut s = sim(2, lossy(), 6);
    let page = region_and_a_page_within(&mut s);
    s.nodes[1].app.mem.unwritable.push(page);
    let (bytes, level) = (vec![0xAB; 20_000], CompletionLevel::Delivery);
    write_with(&mut s, (0, 1), 1, BASE, bytes, Some(7), level);
    run(&mut s);
    let failed = Some(OpError::from(RmaStatus::OutOfRange));
    assert_eq!(only_outcome(&mut s), failed);
    assert!(
        completions(&mut s, 1).is_empty(),
        "no CQ data for a failed write"
    );
    assert!(s.nodes[1].app.mem.executed.is_empty());
    // The next write, elsewhere, succeeds on the same session.
    write(&mut s, 0, 1, 2, BASE + 32768, vec![5; 3000]);
    run(&mut s);
    assert_eq!(only_outcome(&mut s), None);
    assert_eq!(&mem(&s, 1, KEY)[32768..35768], &[5; 3000][..]);
}

/// A read whose range was admitted but part of which cannot be copied
/// when its response goes out (unmapped since, in memory registered from
/// NULL) fails at its initiator instead of returning stale bytes.
#[test]
fn read_failing_mid_way_fails_at_the_initiator() {
    let mut s = sim(2, lossy(), 7);
    let page = region_and_a_page_within(&mut s);
    s.nodes[1].app.mem.unreadable.push(page);
    read(&mut s, 0, 1, 1, BASE, 20_000);
    run(&mut s);
    let failed = Some(OpError::from(RmaStatus::OutOfRange));
    assert_eq!(only_outcome(&mut s), failed);
    // The next read, elsewhere, succeeds on the same session.
    s.nodes[1].app.mem.regions.get_mut(&KEY).unwrap().bytes[32768..32778].fill(9);
    read(&mut s, 0, 1, 2, BASE + 32768, 10);
    run(&mut s);
    assert_eq!(only_outcome(&mut s), None);
    assert_eq!(s.nodes[0].app.mem.results[&2], vec![9; 10]);
}

#[test]
fn atomics_run_exactly_once_under_loss_duplication_and_reordering() {
    let faults = Faults {
        loss: 0.2,
        dup: 0.3,
        jitter: Nanos::from_micros(100),
        ..Faults::default()
    };
    let mut s = sim(2, faults, 5);
    region(&mut s, 1, KEY, 16, Access::READ | Access::WRITE);
    let n = 400u64;
    for t in 0..n {
        // Fetch-and-add 1 on lane 0, add 2 without fetch on lane 1.
        let mut ops = [0u8; 16];
        ops[0] = 1;
        ops[8] = 2;
        atomic(&mut s, 0, t, ATOMIC_ADD, &ops, t % 2 == 0);
    }
    run(&mut s);
    let done = completions(&mut s, 0);
    assert_eq!(done.len(), n as usize);
    assert!(done.iter().all(|c| c.error.is_none()));
    let lane = |b: &[u8], i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
    assert_eq!(lane(mem(&s, 1, KEY), 0), n);
    assert_eq!(lane(mem(&s, 1, KEY), 1), 2 * n);
    // The fetched old values are what the execution order gives: op t saw t.
    for t in (0..n).step_by(2) {
        let r = &s.nodes[0].app.mem.results[&t];
        assert_eq!(lane(r, 0), t, "op {t}");
        assert_eq!(lane(r, 1), 2 * t);
    }
    assert_eq!(s.nodes[1].app.mem.executed.len(), n as usize);
    assert!(s.nodes[1].engine.stats().duplicates > 0);
}

#[test]
fn compare_and_swap_fetches_and_swaps_only_on_match() {
    let mut s = sim(2, Faults::default(), 6);
    region(&mut s, 1, KEY, 8, Access::READ | Access::WRITE);
    let mut ops = [0u8; 16];
    ops[0] = 7; // swap in 7 if the value is 0
    atomic(&mut s, 0, 1, ATOMIC_CSWAP, &ops, true);
    ops[0] = 9; // no swap: the value is 7 now
    atomic(&mut s, 0, 2, ATOMIC_CSWAP, &ops, true);
    run(&mut s);
    assert!(
        completions(&mut s, 0)
            .iter()
            .all(|c| c.error.is_none() && c.flags == Flags::ATOMIC | Flags::READ)
    );
    assert_eq!(s.nodes[0].app.mem.results[&1][0], 0);
    assert_eq!(s.nodes[0].app.mem.results[&2][0], 7);
    assert_eq!(mem(&s, 1, KEY)[0], 7);
}

#[test]
fn rma_keeps_posting_order_with_messages() {
    // A write posted before a send is placed before the send is received
    // (FI_ORDER_SAW), and the read posted after both sees it.
    let mut s = sim(2, lossy(), 8);
    region(&mut s, 1, KEY, 1 << 20, Access::READ | Access::WRITE);
    recv(&mut s, 1, 100, 16, None, None);
    write(&mut s, 0, 1, 1, BASE, pattern(1 << 20, 3));
    send(&mut s, 0, 1, 2, vec![1; 16], None);
    read(&mut s, 0, 1, 3, BASE, 1 << 20);
    let mut seen_write_first = false;
    let limit = s.now + Nanos::from_secs(60);
    s.run_until(limit, |s| {
        if s.nodes[1].app.recv[&100][0] == 1 && !seen_write_first {
            seen_write_first = s.nodes[1].app.mem.regions[&KEY].bytes == pattern(1 << 20, 3);
            assert!(
                seen_write_first,
                "message arrived before the write was placed"
            );
        }
        false
    });
    assert!(seen_write_first);
    assert_eq!(s.nodes[0].app.mem.results[&3], pattern(1 << 20, 3));
    let tokens: Vec<u64> = completions(&mut s, 0).iter().map(|c| c.token).collect();
    assert_eq!(tokens.len(), 3);
}

#[test]
fn rma_fails_with_its_session() {
    let mut s = established(9);
    region(&mut s, 1, KEY, 64, Access::WRITE);
    write(&mut s, 0, 1, 1, BASE, vec![1; 64]);
    // The target restarts before the write reaches it: the new incarnation
    // never executes an operation of its predecessor's session.
    s.restart(
        1,
        Config {
            incarnation: 999,
            ..cfg(1)
        },
    );
    run(&mut s);
    let c = completions(&mut s, 0);
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].error, Some(OpError::PeerRestarted));
    assert!(s.nodes[1].app.mem.executed.is_empty());
}

/// Node 0's operations to node 1 under `faults`: the operations `post`
/// posts, then run step by step. Returns, for each execution at the
/// target (in order), the tokens node 0 had seen complete by then.
fn completed_before_each_execution(
    faults: Faults,
    seed: u64,
    post: impl FnOnce(&mut Sim<Buffers>),
) -> Vec<Vec<u64>> {
    let mut s = sim(2, faults, seed);
    region(&mut s, 1, KEY, 1 << 20, Access::READ | Access::WRITE);
    region(&mut s, 1, KEY + 1, 64, Access::READ | Access::WRITE);
    post(&mut s);
    let mut done = Vec::new();
    let mut seen = Vec::new();
    let limit = s.now + Nanos::from_secs(60);
    while s.now <= limit && s.step() {
        done.extend(completions(&mut s, 0).iter().map(|c| {
            assert_eq!(c.error, None, "{c:?}");
            c.token
        }));
        completions(&mut s, 1);
        while seen.len() < s.nodes[1].app.mem.executed.len() {
            seen.push(done.clone());
        }
    }
    seen
}

/// A fetching add of 1 at node 1's `KEY + 1`, with or without FI_FENCE.
fn fetch_add(s: &mut Sim<Buffers>, token: u64, fence: bool) {
    s.nodes[0].app.mem.results.insert(token, vec![0; 8]);
    let now = s.now;
    let op = RmaOp {
        token,
        dst: 1,
        kind: RmaKind::Atomic {
            op: ATOMIC_ADD,
            datatype: DATATYPE_U64,
            result_len: 8,
        },
        key: KEY + 1,
        addr: BASE,
        payload: Payload::Inject(&[1, 0, 0, 0, 0, 0, 0, 0]),
        data: None,
        level: CompletionLevel::Delivery,
        fence,
    };
    s.nodes[0].engine.post_rma(now, op).unwrap();
}

fn slow_link(loss: f64) -> Faults {
    Faults {
        latency: Nanos::from_micros(100),
        loss,
        ..Faults::default()
    }
}

/// FI_FENCE (fi_atomic(3), §8.6): a fenced atomic after a large write runs
/// at the target only once the write has completed at the initiator —
/// while without the fence it follows the write's last segment at once,
/// before the write's answer is back. The operation after the fence waits
/// with it.
#[test]
fn fenced_atomic_waits_for_the_write_before_it() {
    for (seed, loss) in [(11, 0.0), (12, 0.05)] {
        let unfenced = completed_before_each_execution(slow_link(loss), seed, |s| {
            write(s, 0, 1, 1, BASE, pattern(200_000, 1));
            fetch_add(s, 2, false);
        });
        assert_eq!(unfenced.len(), 2, "seed {seed}");
        assert!(!unfenced[1].contains(&1), "seed {seed}: {unfenced:?}");

        let fenced = completed_before_each_execution(slow_link(loss), seed, |s| {
            write(s, 0, 1, 1, BASE, pattern(200_000, 1));
            fetch_add(s, 2, true);
            fetch_add(s, 3, false);
        });
        assert_eq!(fenced.len(), 3, "seed {seed}");
        assert!(fenced[1].contains(&1), "seed {seed}: {fenced:?}");
        assert!(fenced[2].contains(&1), "seed {seed}: {fenced:?}");
    }
}

/// A fenced write waits for a message posted before it to be
/// acknowledged, and a message posted before the fence is not held back by
/// it (§8.6).
#[test]
fn fenced_write_waits_for_the_message_before_it() {
    let seen = completed_before_each_execution(slow_link(0.0), 13, |s| {
        recv(s, 1, 100, 100_000, None, None);
        send(s, 0, 1, 1, pattern(100_000, 2), None);
        let now = s.now;
        s.nodes[0].app.send.insert(2, vec![7; 64]);
        let op = RmaOp {
            token: 2,
            dst: 1,
            kind: RmaKind::Write,
            key: KEY,
            addr: BASE,
            payload: Payload::Buffer { len: 64 },
            data: None,
            level: CompletionLevel::Delivery,
            fence: true,
        };
        s.nodes[0].engine.post_rma(now, op).unwrap();
    });
    assert_eq!(seen.len(), 1);
    assert!(seen[0].contains(&1), "{seen:?}");
}

/// A fence with nothing before it costs nothing: the operation goes at
/// once, and everything completes.
#[test]
fn fence_with_nothing_before_it_goes_at_once() {
    let seen = completed_before_each_execution(slow_link(0.0), 14, |s| {
        fetch_add(s, 1, true);
        fetch_add(s, 2, true);
    });
    assert_eq!(seen, vec![vec![], vec![1]]);
}

/// Node 0 writes 200 000 bytes to node 1, then sends it a message (fenced
/// or not). Returns whether node 0 had seen the write complete when node
/// 1 received the message.
fn write_then_message(fence: bool, seed: u64) -> bool {
    let mut s = sim(2, slow_link(0.0), seed);
    region(&mut s, 1, KEY, 1 << 20, Access::READ | Access::WRITE);
    recv(&mut s, 1, 100, 64, None, None);
    write(&mut s, 0, 1, 1, BASE, pattern(200_000, 1));
    s.nodes[0].app.send.insert(2, pattern(64, 2));
    let now = s.now;
    let op = SendOp {
        token: 2,
        dst: 1,
        payload: Payload::Buffer { len: 64 },
        tag: None,
        data: None,
        level: CompletionLevel::Transmit,
        fence,
    };
    s.nodes[0].engine.post_send(now, op).unwrap();
    let mut write_done = false;
    let limit = s.now + Nanos::from_secs(60);
    while s.now <= limit && s.step() {
        write_done |= completions(&mut s, 0).iter().any(|c| c.token == 1);
        if completions(&mut s, 1).iter().any(|c| c.token == 100) {
            return write_done;
        }
    }
    panic!("the message never arrived");
}

/// FI_FENCE on a message (fi_msg(3), §8.6): it waits for the write before
/// it to complete; without the fence it follows the write at once.
#[test]
fn fenced_message_waits_for_the_write_before_it() {
    assert!(!write_then_message(false, 15));
    assert!(write_then_message(true, 15));
}
