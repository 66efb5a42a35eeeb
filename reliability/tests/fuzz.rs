//! Stable-toolchain fuzzing (cargo-fuzz needs nightly): a bounded-time,
//! structure-aware random search over the decoder and the engine.
//!
//! Inputs are real datagrams captured from a session between two engines,
//! mutated (bit flips, truncation, extension, and field-level rewrites of
//! type, flags, sessions, sequence/ack numbers, message ids, offsets and
//! lengths) and, for most of them, re-sealed with a correct CRC so they reach
//! the protocol logic instead of stopping at the checksum. Checks: no panic,
//! memory stays within the configured budgets, and RMA (PROTOCOL.md §8)
//! never touches registered memory outside the range the target accepted.
//!
//! Default: about 2 s. Longer: `FUZZ_SECS=600 cargo test --release -p
//! ofi-xdp-reliability --test fuzz -- --nocapture` (`FUZZ_SEED` picks the seed).

#![allow(clippy::unwrap_used)] // a test may unwrap: a panic is its verdict

use std::time::{Duration, Instant as WallClock};

use ofi_xdp_reliability::sim::memory::{ATOMIC_ADD, DATATYPE_U64, Memory, Region};
use ofi_xdp_reliability::wire::{self, COMMON_LEN, TRAILER_LEN};
use ofi_xdp_reliability::*;

/// The target's one registered region: key, base address, length.
const KEY: u64 = 0xC0DE;
const BASE: u64 = 0x7000_0000;
const REGION: usize = 300_000;

/// Whether `[addr, addr + len)` lies inside the registered region.
fn inside(key: u64, addr: u64, len: usize) -> bool {
    key == KEY && addr >= BASE && addr + len as u64 <= BASE + REGION as u64
}

struct Bufs;
impl SendBuffers for Bufs {
    fn read(&mut self, token: u64, offset: usize, dst: &mut [u8]) {
        for (i, b) in dst.iter_mut().enumerate() {
            *b = (token as usize + offset + i) as u8;
        }
    }

    fn rma_read(&mut self, key: u64, addr: u64, dst: &mut [u8]) -> Result<(), RmaStatus> {
        assert!(inside(key, addr, dst.len()), "RMA read outside the region");
        dst.fill(0x5A);
        Ok(())
    }
}

/// Receive buffers that check every write lies inside the posted length,
/// and registered memory that checks every RMA access lies inside it.
struct CheckedRecv {
    lens: std::collections::HashMap<u64, usize>,
    mem: Memory,
}

fn checked_recv() -> CheckedRecv {
    let mut mem = Memory::default();
    let region = Region {
        base: BASE,
        bytes: vec![0; REGION],
        access: Access::READ | Access::WRITE,
    };
    mem.regions.insert(KEY, region);
    CheckedRecv {
        lens: Default::default(),
        mem,
    }
}
impl RecvBuffers for CheckedRecv {
    fn write(&mut self, token: u64, offset: usize, src: &[u8]) {
        let len = self
            .lens
            .get(&token)
            .copied()
            .expect("write to a receive that is not posted");
        assert!(offset + src.len() <= len, "write beyond the posted buffer");
    }

    fn rma_check(
        &mut self,
        key: u64,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<(), RmaStatus> {
        self.mem.check(key, addr, len, access)
    }

    fn rma_write(&mut self, key: u64, addr: u64, src: &[u8]) -> Result<(), RmaStatus> {
        assert!(inside(key, addr, src.len()), "RMA write outside the region");
        self.mem.write(key, addr, src)
    }

    fn rma_atomic(
        &mut self,
        key: u64,
        addr: u64,
        op: u8,
        datatype: u8,
        operands: &[u8],
        result: &mut [u8],
    ) -> Result<(), RmaStatus> {
        self.mem.atomic(key, addr, op, datatype, operands, result)
    }

    fn rma_result(&mut self, token: u64, offset: usize, src: &[u8]) {
        // Our own operations' results: inside what each asked for.
        let len = self.mem.results.get(&token).map_or(0, Vec::len);
        assert!(offset + src.len() <= len, "RMA result beyond the buffer");
    }
}

fn cfg(i: u32, auth: bool) -> Config {
    Config {
        incarnation: i,
        seed: u64::from(i),
        auth: auth.then(|| AuthConfig {
            key: b"the fuzzed job's key".to_vec(),
            encrypt: i.is_multiple_of(2),
        }),
        unexpected_budget: 256 << 10,
        reorder_budget: 256 << 10,
        unexpected_max: 64,
        max_peers: 16,
        ..Config::default()
    }
}

/// Run a session 0 → 1 with varied traffic and capture what 0 sent.
fn capture(auth: bool) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let mut a: Engine<u32> = Engine::new(cfg(1, auth));
    let mut b: Engine<u32> = Engine::new(cfg(2, auth));
    let mut rb = checked_recv();
    let mut to_b = Vec::new();
    let mut to_a = Vec::new();
    let sizes = [0usize, 5, 1500, 4000, 70_000, 200_000];
    for (i, &len) in sizes.iter().enumerate() {
        let tag = (i % 2 == 0).then_some(i as u64);
        let level = if i == 3 {
            CompletionLevel::Delivery
        } else {
            CompletionLevel::Transmit
        };
        a.post_send(
            Instant(0),
            SendOp {
                token: i as u64,
                dst: 2,
                payload: Payload::Buffer { len },
                tag,
                data: Some(9),
                level,
                fence: false,
            },
        )
        .unwrap();
        rb.lens.insert(100 + i as u64, len);
        b.post_recv(
            RecvOp {
                token: 100 + i as u64,
                len,
                src: None,
                tag: tag.map(|t| TagMatch { tag: t, ignore: 0 }),
                multi_recv: None,
            },
            &mut rb,
        )
        .unwrap();
    }
    // RMA 1 → 2: writes (one with CQ data), reads, atomics with and
    // without fetch, and one refused (unknown key).
    let rma = [
        (RmaKind::Write, KEY, 0usize, 3000usize, Some(5u64)),
        (RmaKind::Write, KEY, 4000, 100_000, None),
        (RmaKind::Read, KEY, 0, 5000, None),
        (RmaKind::Write, KEY + 9, 0, 10, None),
    ];
    for (i, &(kind, key, at, len, data)) in rma.iter().enumerate() {
        let token = 50 + i as u64;
        rb.mem.results.insert(token, vec![0; len]);
        let op = RmaOp {
            token,
            dst: 2,
            kind,
            key,
            addr: BASE + at as u64,
            payload: Payload::Buffer { len },
            data,
            level: CompletionLevel::Delivery,
            fence: false,
        };
        a.post_rma(Instant(0), op).unwrap();
    }
    for (t, fetch) in [(60u64, true), (61, false)] {
        rb.mem.results.insert(t, vec![0; 8]);
        let kind = RmaKind::Atomic {
            op: ATOMIC_ADD,
            datatype: DATATYPE_U64,
            result_len: if fetch { 8 } else { 0 },
        };
        let op = RmaOp {
            token: t,
            dst: 2,
            kind,
            key: KEY,
            addr: BASE,
            payload: Payload::Inject(&[1, 0, 0, 0, 0, 0, 0, 0]),
            data: None,
            level: CompletionLevel::Delivery,
            fence: false,
        };
        a.post_rma(Instant(0), op).unwrap();
    }
    let mut frame = vec![0u8; 1472];
    let mut now = Instant(0);
    for _ in 0..10_000 {
        let mut moved = false;
        while let Some(t) = a.poll_transmit(now, &mut frame, &mut Bufs) {
            to_b.push(frame[..t.len].to_vec());
            b.handle_datagram(now, 1, &frame[..t.len], &mut rb);
            moved = true;
        }
        while let Some(t) = b.poll_transmit(now, &mut frame, &mut Bufs) {
            to_a.push(frame[..t.len].to_vec());
            a.handle_datagram(now, 2, &frame[..t.len], &mut rb);
            moved = true;
        }
        if !moved {
            match a.poll_timeout().into_iter().chain(b.poll_timeout()).min() {
                Some(t) => {
                    now = t;
                    a.handle_timeout(now);
                    b.handle_timeout(now);
                }
                None => break,
            }
        }
    }
    (to_b, to_a)
}

fn mutate(rng: &mut SplitMix64, src: &[u8]) -> Vec<u8> {
    let mut d = src.to_vec();
    let reseal = !rng.next_u64().is_multiple_of(8);
    for _ in 0..1 + rng.next_u64() % 3 {
        match rng.next_u64() % 11 {
            0 if !d.is_empty() => {
                let i = (rng.next_u64() as usize) % d.len();
                d[i] ^= 1 << (rng.next_u64() % 8);
            }
            1 => d.truncate((rng.next_u64() as usize) % (d.len() + 1)),
            2 => d.extend((0..rng.next_u64() % 64).map(|_| rng.next_u64() as u8)),
            // Field rewrites inside the header / extension (offsets per PROTOCOL.md §2).
            // Types 0–15, or PACK (32, §6.8).
            3 if d.len() > 2 => {
                d[1] = [(rng.next_u64() % 15) as u8, 32][rng.next_u64().is_multiple_of(4) as usize]
            }
            4 if d.len() > 4 => {
                let f = (rng.next_u64() & 0x1FF) as u16;
                d[2..4].copy_from_slice(&f.to_le_bytes());
            }
            5 if d.len() >= 24 => {
                // seq / ack: near or far.
                let o = [12usize, 16][(rng.next_u64() % 2) as usize];
                let v = u32::from_le_bytes([d[o], d[o + 1], d[o + 2], d[o + 3]]);
                let nv = match rng.next_u64() % 3 {
                    0 => v.wrapping_add((rng.next_u64() % 8) as u32),
                    1 => v.wrapping_sub((rng.next_u64() % 8) as u32),
                    _ => rng.next_u64() as u32,
                };
                d[o..o + 4].copy_from_slice(&nv.to_le_bytes());
            }
            6 if d.len() >= 64 => {
                // msg_id / total_len / offset.
                let o = [32usize, 36, 40][(rng.next_u64() % 3) as usize];
                let v = match rng.next_u64() % 3 {
                    0 => 0,
                    1 => rng.next_u64() as u32 % 300_000,
                    _ => rng.next_u64() as u32,
                };
                d[o..o + 4].copy_from_slice(&v.to_le_bytes());
            }
            7 if d.len() >= 24 => {
                let w = (rng.next_u64() % 0x1_0000) as u16;
                d[20..22].copy_from_slice(&w.to_le_bytes());
            }
            8 if d.len() >= 32 => {
                let s = rng.next_u64();
                d[24..32].copy_from_slice(&s.to_le_bytes());
            }
            9 if d.len() >= 72 => {
                // RMA (§8.1): op/datatype/status, key, address — near the
                // region's edges or anywhere.
                let o = [44usize, 48, 56][(rng.next_u64() % 3) as usize];
                let v = match (o, rng.next_u64() % 3) {
                    (44, _) => rng.next_u64() & 0x00FF_FFFF,
                    (48, 0) => KEY,
                    (56, 0) => BASE + REGION as u64 - rng.next_u64() % 5000,
                    (56, 1) => BASE.wrapping_sub(rng.next_u64() % 64),
                    _ => rng.next_u64(),
                };
                let n = if o == 44 { 4 } else { 8 };
                d[o..o + n].copy_from_slice(&v.to_le_bytes()[..n]);
            }
            _ if d.len() >= 24 => {
                // payload_len inconsistent with the datagram.
                let l = (rng.next_u64() % 2000) as u16;
                d[22..24].copy_from_slice(&l.to_le_bytes());
            }
            _ => {}
        }
    }
    if reseal && d.len() >= COMMON_LEN + TRAILER_LEN {
        let n = d.len() - TRAILER_LEN;
        let c = crc32c(&d[..n]);
        d[n..].copy_from_slice(&c.to_le_bytes());
    }
    d
}

#[test]
fn fuzz_decoder_and_engine() {
    fuzz(false);
}

/// The same against authenticated engines: sealed datagrams mutated (most
/// then fail verification, the rest are replays or genuine), fed to a
/// fresh engine that replays the real handshake. No panic, budgets hold.
#[test]
fn fuzz_authenticated_engine() {
    fuzz(true);
}

fn fuzz(auth: bool) {
    let secs: u64 = std::env::var("FUZZ_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    let seed: u64 = std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0xF022);
    let deadline = WallClock::now() + Duration::from_secs(secs);
    let (to_b, to_a) = capture(auth);
    assert!(to_b.len() > 100 && !to_a.is_empty());
    let corpus: Vec<Vec<u8>> = to_b.iter().chain(to_a.iter()).cloned().collect();
    let mut rng = SplitMix64::new(seed);
    let mut iters = 0u64;
    let mut accepted = 0u64;
    // Datagrams the engines took as genuine (authenticated runs).
    let mut verified = 0u64;
    let mut frame = vec![0u8; 9000];
    while WallClock::now() < deadline {
        // A fresh receiver with an established session from peer 1 (replay the
        // real handshake), some receives posted, then a burst of mutants mixed
        // with genuine datagrams, from peer 1 and from unknown sources.
        let mut b: Engine<u32> = Engine::new(cfg(2, auth));
        let mut rb = checked_recv();
        for t in 0..4u64 {
            let len = [0usize, 100, 5000, 100_000][t as usize];
            rb.lens.insert(t, len);
            let multi = (t == 2).then_some(1000);
            b.post_recv(
                RecvOp {
                    token: t,
                    len,
                    src: None,
                    tag: None,
                    multi_recv: multi,
                },
                &mut rb,
            )
            .unwrap();
        }
        let mut now = Instant(0);
        for _ in 0..200 {
            iters += 1;
            let base = &corpus[(rng.next_u64() as usize) % corpus.len()];
            let dg = if rng.next_u64().is_multiple_of(4) {
                base.clone()
            } else {
                mutate(&mut rng, base)
            };
            let r = wire::decode(&dg);
            if r.is_ok() {
                accepted += 1;
            }
            // The same bytes in two pieces (as AF_XDP multi-buffer hands them
            // over) decode to the same packet, or are refused alike.
            let cut = (rng.next_u64() as usize) % (dg.len() + 1);
            let pieces = [&dg[..cut], &dg[cut..]];
            assert_eq!(wire::decode_pieces(&pieces), r, "cut at {cut}");
            let from = if rng.next_u64().is_multiple_of(8) {
                (rng.next_u64() % 40) as u32
            } else {
                1
            };
            if rng.next_u64().is_multiple_of(2) {
                b.handle_datagram_pieces(now, from, &pieces, &mut rb);
            } else {
                b.handle_datagram(now, from, &dg, &mut rb);
            }
            if rng.next_u64().is_multiple_of(4) {
                now = now + Nanos((rng.next_u64() % 50_000_000) + 1);
                b.handle_timeout(now);
            }
            while b.poll_transmit(now, &mut frame, &mut Bufs).is_some() {}
            while let Some(e) = b.poll_event() {
                if let Event::Completion(c) = e
                    && c.flags.contains(Flags::RECV)
                    && (c.token != 2 || c.flags.contains(Flags::MULTI_RECV))
                {
                    // Completed receives are no longer posted: writes to them must stop.
                    rb.lens.remove(&c.token);
                }
            }
            let s = b.stats();
            assert!(s.unexpected_bytes <= 256 << 10);
            assert!(s.reorder_bytes <= 256 << 10);
            assert!(b.peer_count() <= 16);
            assert!(b.unexpected_count() <= 64);
        }
        let s = b.stats();
        let refused = s.auth_rejected + s.unauthenticated + s.corrupt + s.replayed + s.dropped;
        verified += s.rx_datagrams.saturating_sub(refused);
    }
    println!(
        "fuzz (auth {auth}): {iters} datagrams, {accepted} passed the decoder, {verified} verified, seed {seed:#x}"
    );
    if auth {
        // The handshake replayed, and genuine datagrams verified.
        assert!(verified > iters / 200, "{verified} of {iters} verified");
    } else {
        assert!(
            accepted > iters / 4,
            "mutations should mostly reach the engine"
        );
    }
}
