//! Two engines back to back in memory: messages per second and nanoseconds per
//! message, end to end (post send → datagram → match → copy → completion on
//! both sides, acks flowing back), including the one real copy per direction
//! and the CRC-32C of every datagram.
//!
//! `cargo bench -p ofi-xdp-reliability --bench engine` (`BENCH_MSGS` sets the
//! count of the 8-byte run; the others scale from it). The last rows run
//! the same messages without packet authentication, with it (AES-GCM, the
//! payload as associated data) and with the payload encrypted too
//! (PROTOCOL.md §11), and print the cost ratios. The first row is a
//! ping-pong of single 64-byte messages (`fi_pingpong`'s pattern): the
//! engine's share of a small message's one-way time.

#![allow(clippy::unwrap_used)] // a benchmark, not library code

use std::hint::black_box;
use std::time::Instant as Wall;

use ofi_xdp_reliability::*;

struct SendBuf(Vec<u8>);
impl SendBuffers for SendBuf {
    fn read(&mut self, _token: u64, offset: usize, dst: &mut [u8]) {
        dst.copy_from_slice(&self.0[offset..offset + dst.len()]);
    }
}

struct RecvBuf {
    bufs: Vec<Vec<u8>>,
}
impl RecvBuffers for RecvBuf {
    fn write(&mut self, token: u64, offset: usize, src: &[u8]) {
        let n = self.bufs.len();
        let b = &mut self.bufs[token as usize % n];
        b[offset..offset + src.len()].copy_from_slice(src);
    }
}

/// CPU time of this thread in ns (Linux `/proc/thread-self/schedstat`, first
/// field): on a shared machine wall time includes time other processes ran.
fn cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// Seconds of this thread's CPU since `cpu0` ([`cpu_ns`]), or the wall
/// time `wall_secs` where the kernel does not say.
fn cpu_secs_since(cpu0: Option<u64>, wall_secs: f64) -> f64 {
    match (cpu0, cpu_ns()) {
        (Some(a), Some(b)) => (b - a) as f64 / 1e9,
        _ => wall_secs,
    }
}

/// `auth`: `None` without a job key, `Some(encrypt)` with one.
fn run(
    len: usize,
    mtu: usize,
    total: u64,
    tagged: bool,
    auth: Option<bool>,
) -> (f64, f64, f64, Stats) {
    let cfg = |i| Config {
        incarnation: i,
        seed: u64::from(i),
        mtu,
        window: 512,
        auth: auth.map(|encrypt| AuthConfig {
            key: b"a benchmark's job key".to_vec(),
            encrypt,
        }),
        ..Config::default()
    };
    let mut a: Engine<u32> = Engine::new(cfg(1));
    let mut b: Engine<u32> = Engine::new(cfg(2));
    if auth.is_some() {
        // Each knows the other's incarnation (as from native addresses).
        a.peer_incarnation(2, 2).unwrap();
        b.peer_incarnation(1, 1).unwrap();
    }
    let depth = 256u64;
    let mut sb = SendBuf(vec![0xA5; len]);
    let mut rb = RecvBuf {
        bufs: (0..depth).map(|_| vec![0u8; len]).collect(),
    };
    let mut frame = vec![0u8; mtu];
    let mut now = Instant(0);
    let (mut sent, mut posted, mut recv_done, mut send_done) = (0u64, 0u64, 0u64, 0u64);
    let tag = tagged.then_some(TagMatch { tag: 7, ignore: 0 });
    let start = Wall::now();
    let cpu0 = cpu_ns();
    while recv_done < total || send_done < total {
        while b.recvs_posted() < depth as usize && posted < total {
            b.post_recv(
                RecvOp {
                    token: posted,
                    len,
                    src: None,
                    tag,
                    multi_recv: None,
                },
                &mut rb,
            )
            .unwrap();
            posted += 1;
        }
        while a.sends_outstanding() < depth as usize && sent < total {
            let op = SendOp {
                token: sent,
                dst: 2,
                payload: Payload::Buffer { len },
                tag: tagged.then_some(7),
                data: None,
                level: CompletionLevel::Transmit,
                fence: false,
            };
            a.post_send(now, op).unwrap();
            sent += 1;
        }
        while let Some(t) = a.poll_transmit(now, &mut frame, &mut sb) {
            b.handle_datagram(now, 1, &frame[..t.len], &mut rb);
        }
        while let Some(t) = b.poll_transmit(now, &mut frame, &mut sb) {
            a.handle_datagram(now, 2, &frame[..t.len], &mut rb);
        }
        while let Some(e) = b.poll_event() {
            black_box(e);
            recv_done += 1;
        }
        while let Some(e) = a.poll_event() {
            black_box(e);
            send_done += 1;
        }
        now = now + Nanos::from_micros(1);
        if a.poll_timeout().is_some_and(|t| t <= now) {
            a.handle_timeout(now);
        }
        if b.poll_timeout().is_some_and(|t| t <= now) {
            b.handle_timeout(now);
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu = cpu_secs_since(cpu0, secs);
    assert_eq!(a.stats().retransmits, 0);
    (
        total as f64 / cpu,
        cpu * 1e9 / total as f64,
        secs * 1e9 / total as f64,
        a.stats(),
    )
}

/// A receive for [`ping_pong`]'s next 64-byte message.
fn post_recv_64(me: &mut Engine<u32>, token: u64, rb: &mut RecvBuf) {
    let recv = RecvOp {
        token,
        len: 64,
        src: None,
        tag: Some(TagMatch { tag: 7, ignore: 0 }),
        multi_recv: None,
    };
    me.post_recv(recv, rb).unwrap();
}

/// One side of [`ping_pong`]: post a receive, then inject a reply.
fn post_recv_and_reply(
    me: &mut Engine<u32>,
    peer: u32,
    token: u64,
    rb: &mut RecvBuf,
    now: Instant,
) {
    post_recv_64(me, token, rb);
    let payload = [0x5Au8; 64];
    let op = SendOp {
        token,
        dst: peer,
        payload: Payload::Inject(&payload),
        tag: Some(7),
        data: None,
        level: CompletionLevel::Inject,
        fence: false,
    };
    me.post_send(now, op).unwrap();
}

/// Ping-pong as `fi_pingpong -e rdm -m tagged -S 64` does it: one 64-byte
/// injected tagged message at a time each way, so every message is its own
/// datagram and its ack rides on the reply. Both engines' CPU per round
/// trip: the engine's share of a one-way latency is half of it.
fn ping_pong(rounds: u64) -> f64 {
    let cfg = |i| Config {
        incarnation: i,
        seed: u64::from(i),
        ..Config::default()
    };
    let mut a: Engine<u32> = Engine::new(cfg(1));
    let mut b: Engine<u32> = Engine::new(cfg(2));
    let mut sb = SendBuf(Vec::new());
    let mut rb = RecvBuf {
        bufs: vec![vec![0u8; 64]],
    };
    let mut frame = vec![0u8; 1472];
    let mut now = Instant(0);
    post_recv_64(&mut b, 0, &mut rb);
    post_recv_and_reply(&mut a, 2, 0, &mut rb, now);
    // One hop: `from` transmits its datagram, `to` takes it, and the
    // receive completes (the application then posts and replies).
    let hop = |from: &mut Engine<u32>,
               to: &mut Engine<u32>,
               src: u32,
               rb: &mut RecvBuf,
               frame: &mut [u8],
               sb: &mut SendBuf,
               now: Instant| {
        let mut got = false;
        while let Some(t) = from.poll_transmit(now, frame, sb) {
            to.handle_datagram(now, src, &frame[..t.len], rb);
        }
        while let Some(e) = to.poll_event() {
            got |= matches!(e, Event::Completion(c) if c.flags.contains(Flags::RECV));
        }
        while from.poll_event().is_some() {}
        got
    };
    // The first message opens the session (HELLO and its answer): not timed.
    while !hop(&mut a, &mut b, 1, &mut rb, &mut frame, &mut sb, now) {
        while let Some(t) = b.poll_transmit(now, &mut frame, &mut sb) {
            a.handle_datagram(now, 2, &frame[..t.len], &mut rb);
        }
    }
    post_recv_and_reply(&mut b, 1, 0, &mut rb, now);
    assert!(hop(&mut b, &mut a, 2, &mut rb, &mut frame, &mut sb, now));
    post_recv_and_reply(&mut a, 2, 0, &mut rb, now);
    let cpu0 = cpu_ns();
    let start = Wall::now();
    for r in 1..=rounds {
        now = now + Nanos::from_micros(2);
        assert!(hop(&mut a, &mut b, 1, &mut rb, &mut frame, &mut sb, now));
        post_recv_and_reply(&mut b, 1, r, &mut rb, now);
        now = now + Nanos::from_micros(2);
        assert!(hop(&mut b, &mut a, 2, &mut rb, &mut frame, &mut sb, now));
        if r < rounds {
            post_recv_and_reply(&mut a, 2, r, &mut rb, now);
        }
    }
    let cpu = cpu_secs_since(cpu0, start.elapsed().as_secs_f64());
    assert_eq!(a.stats().retransmits, 0);
    cpu * 1e9 / rounds as f64
}

/// Whether `BENCH_FILTER` is set and `name` does not contain it.
fn filtered_out(name: &str) -> bool {
    std::env::var("BENCH_FILTER").is_ok_and(|f| !name.contains(&f))
}

fn main() {
    let n: u64 = std::env::var("BENCH_MSGS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3_000_000);
    println!(
        "two engines back to back on one thread, end to end (both engines), copies and CRC included"
    );
    println!(
        "rates are per CPU-second of the thread; wall time is shown too (it includes other load)"
    );
    if !filtered_out("ping-pong") {
        let rounds = n / 3;
        let _ = ping_pong(rounds / 10); // warm-up
        let rt = ping_pong(rounds);
        println!(
            "{:40} {rounds:>9} rounds {rt:>8.1} ns per round trip (CPU, both engines; {:.1} ns per one-way)",
            "ping-pong, 64 B tagged injected",
            rt / 2.0
        );
    }
    for (name, len, mtu, count, tagged) in [
        ("8 B, untagged, mtu 1472", 8, 1472, n, false),
        ("8 B, tagged,   mtu 1472", 8, 1472, n, true),
        (
            "4 KiB,         mtu 1472 (3 datagrams)",
            4096,
            1472,
            n / 10,
            false,
        ),
        (
            "4 KiB,         mtu 4164 (1 datagram)",
            4096,
            4096 + 68,
            n / 10,
            false,
        ),
        ("64 KiB,        mtu 1472", 65536, 1472, n / 100, false),
    ] {
        if filtered_out(name) {
            continue;
        }
        let _ = run(len, mtu, count / 10, tagged, None); // warm-up
        let (rate, ns, wall_ns, st) = run(len, mtu, count, tagged, None);
        let gbps = rate * len as f64 * 8.0 / 1e9;
        println!(
            "{name:40} {count:>9} msgs  {:>6.2} M msgs/s  {ns:>8.1} ns/msg (CPU)  {wall_ns:>8.1} ns/msg (wall)  {gbps:>6.2} Gbit/s  ({} datagrams A→B)",
            rate / 1e6,
            st.tx_datagrams
        );
    }
    println!(
        "\nwith packet authentication (AES-128-GCM; payload authenticated, or encrypted too) against without:"
    );
    for (name, len, mtu, count) in [
        ("8 B, mtu 1472", 8, 1472, n / 2),
        ("64 B, mtu 1472", 64, 1472, n / 2),
        ("1 MiB, mtu 8972 (jumbo)", 1 << 20, 8972, n / 3000),
    ] {
        if filtered_out(name) {
            continue;
        }
        let _ = run(len, mtu, count / 10, false, Some(false)); // warm-up
        let (_, plain, _, _) = run(len, mtu, count, false, None);
        let (_, signed, _, _) = run(len, mtu, count, false, Some(false));
        let (_, sealed, _, _) = run(len, mtu, count, false, Some(true));
        println!(
            "{name:28} {count:>9} msgs  {plain:>10.1} ns/msg plain  {signed:>10.1} authenticated ×{:.2}  {sealed:>10.1} encrypted ×{:.2}",
            signed / plain,
            sealed / plain
        );
    }
}
