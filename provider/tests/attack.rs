//! An attacker on the segment (PROTOCOL.md §11): three test hosts on one
//! bridge; `fi_pingpong -c` runs between hosts 0 and 1 with a job key
//! while host 2 — seeing every frame to and from host 0 through a tap on
//! its bridge port — spoofs host 1's IP address and UDP port and injects,
//! as fast as it can, one kind of attack per test: forged DATA, forged
//! ACKs (receiver-not-ready), forged HELLOs, forged CLOSE and RESET on the
//! live session's ids, ICMP port unreachable about host 1, and replays of
//! every datagram it captured; and forged DATA from host 1's IP but other
//! UDP source ports, which a receiver takes as host 1's session by the ids
//! it names (PROTOCOL.md §4.6) and must reject all the same. Each must change nothing: the transfer
//! completes with its data verified, no session is lost, and every
//! datagram host 0's engine received was either host 1's or counted as
//! rejected.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use ofi_xdp_reliability::wire::{self as rw, CtrlExt, Header, PacketType, flags};
use ofi_xdp_testhosts::{Host, RawPort, Segment};

mod common;
use common::{one_at_a_time, remove_shm_leftovers, spawn_collected, work_dir};

/// Frames the attacker injects between looks at what it captured.
const BURST: usize = 64;

/// The job key both endpoints get (hex, as `FI_XDP_AUTH_KEY` takes it).
const KEY: &str = "00112233445566778899aabbccddeeff0123456789abcdef";

/// What the attacker injects.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Attack {
    Data,
    /// DATA from other source ports than host 1's (path entropy's).
    DataOtherPorts,
    Ack,
    Hello,
    Close,
    Reset,
    Icmp,
    Replay,
}

/// Ethernet / IPv4 / UDP offsets of a frame without VLAN tag.
const UDP_PAYLOAD: usize = 14 + 20 + 8;

/// What the attacker learnt from one captured datagram host 1 → host 0.
#[derive(Clone, Copy)]
struct Sniffed {
    h0_port: u16,
    h1_port: u16,
    src_sess: u32,
    dst_sess: u32,
}

fn sniff(frame: &[u8], h0: &Host, h1: &Host) -> Option<Sniffed> {
    if frame.len() < UDP_PAYLOAD + 32 || frame[12..14] != [0x08, 0x00] || frame[23] != 17 {
        return None;
    }
    if frame[26..30] != h1.ipv4().octets() || frame[30..34] != h0.ipv4().octets() {
        return None;
    }
    let u = &frame[34..];
    let p = &frame[UDP_PAYLOAD..];
    if p[0] != rw::VERSION || p[1] == PacketType::Hello as u8 {
        return None;
    }
    let rd = |o: usize| u32::from_le_bytes([p[o], p[o + 1], p[o + 2], p[o + 3]]);
    Some(Sniffed {
        h1_port: u16::from_be_bytes([u[0], u[1]]),
        h0_port: u16::from_be_bytes([u[2], u[3]]),
        src_sess: rd(4),
        dst_sess: rd(8),
    })
}

/// The Internet checksum (RFC 1071) of `b`.
fn internet_checksum(b: &[u8]) -> u16 {
    let mut sum = 0u32;
    for c in b.chunks(2) {
        sum += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Ethernet and IPv4 headers from `src_mac` to host 0, claiming `src_ip`.
fn eth_ipv4(f: &mut [u8], h0: &Host, src_mac: [u8; 6], src_ip: [u8; 4], proto: u8) {
    let total = (f.len() - 14) as u16;
    f[0..6].copy_from_slice(&h0.mac());
    f[6..12].copy_from_slice(&src_mac);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[6] = 0x40; // DF
    ip[8] = 64;
    ip[9] = proto;
    ip[12..16].copy_from_slice(&src_ip);
    ip[16..20].copy_from_slice(&h0.ipv4().octets());
    let c = internet_checksum(ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
}

/// A frame to host 0 that says it comes from host 1 (IP and port), sent
/// with the attacker's own MAC (UDP checksum 0: none, RFC 768).
fn spoofed(h0: &Host, h1: &Host, att: &Host, s: &Sniffed, dgram: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; UDP_PAYLOAD + dgram.len()];
    eth_ipv4(&mut f, h0, att.mac(), h1.ipv4().octets(), 17);
    let udp = &mut f[34..42];
    udp[0..2].copy_from_slice(&s.h1_port.to_be_bytes());
    udp[2..4].copy_from_slice(&s.h0_port.to_be_bytes());
    udp[4..6].copy_from_slice(&((8 + dgram.len()) as u16).to_be_bytes());
    f[UDP_PAYLOAD..].copy_from_slice(dgram);
    f
}

/// One forged datagram of `kind` on the sniffed session ids: flag AUTH and
/// a made-up trailer (a receiver with a key drops anything else unread).
fn forge(kind: Attack, s: &Sniffed, n: u64) -> Vec<u8> {
    let mut b = vec![0u8; 256];
    let (ty, mut fl, body) = match kind {
        Attack::Data => (
            PacketType::Data,
            flags::ACK | flags::FIRST,
            rw::DATA_HDR_LEN + 64,
        ),
        Attack::Ack => (PacketType::Ack, flags::ACK | flags::RNR, rw::COMMON_LEN),
        Attack::Hello => (PacketType::Hello, 0, rw::COMMON_LEN + rw::CTRL_EXT_LEN + 24),
        Attack::Close => (
            PacketType::Close,
            flags::ACK,
            rw::COMMON_LEN + rw::CTRL_EXT_LEN,
        ),
        _ => (PacketType::Reset, 0, rw::COMMON_LEN + rw::CTRL_EXT_LEN + 24),
    };
    fl |= flags::AUTH;
    let mut h = Header {
        ty: ty as u8,
        flags: fl,
        src_sess: s.src_sess,
        dst_sess: s.dst_sess,
        seq: n as u32,
        ack: (n >> 3) as u32,
        window: 256,
        ..Header::default()
    };
    if kind == Attack::Data {
        h.payload_len = 64;
    }
    if kind == Attack::Reset {
        // About host 0's session with host 1, as host 1 would say it.
        h.src_sess = 0;
        h.dst_sess = s.dst_sess;
    }
    rw::encode_header(&mut b, &h);
    if body >= rw::COMMON_LEN + rw::CTRL_EXT_LEN {
        rw::encode_ctrl_ext(
            &mut b,
            &CtrlExt {
                a: 0x1234_5678,
                b: s.src_sess,
            },
        );
    }
    if kind == Attack::Data {
        b[36..40].copy_from_slice(&64u32.to_le_bytes());
    }
    let nonce = if matches!(kind, Attack::Hello | Attack::Reset) {
        12
    } else {
        8
    };
    for (i, x) in b[body..body + nonce + 16].iter_mut().enumerate() {
        *x = (n as u8).wrapping_mul(31).wrapping_add(i as u8);
    }
    b.truncate(body + nonce + 16);
    b
}

/// An ICMP port unreachable from host 1's address about `quoted` (a
/// captured frame host 0 sent host 1).
fn icmp_unreachable(h0: &Host, h1: &Host, att: &Host, quoted: &[u8]) -> Vec<u8> {
    let q = &quoted[14..14 + 28];
    let mut f = vec![0u8; 14 + 20 + 8 + 28];
    eth_ipv4(&mut f, h0, att.mac(), h1.ipv4().octets(), 1);
    let icmp = &mut f[34..];
    icmp[0] = 3; // destination unreachable
    icmp[1] = 3; // port unreachable
    icmp[8..].copy_from_slice(q);
    let c = internet_checksum(icmp);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    f
}

/// Injects `kind` at host 0 until `stop`, counting what it sent.
fn attacker(
    seg: &Segment,
    kind: Attack,
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
) -> std::thread::JoinHandle<()> {
    let tap = seg.tap(0).unwrap();
    let out: RawPort = seg.hosts[2].raw_port().unwrap();
    let (h0, h1, att) = (
        seg.hosts[0].clone(),
        seg.hosts[1].clone(),
        seg.hosts[2].clone(),
    );
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 65536];
        let mut learnt: Option<Sniffed> = None;
        let mut to_h1: Option<Vec<u8>> = None;
        let mut captured: Vec<Vec<u8>> = Vec::new();
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            while let Some(len) = tap.try_recv(&mut buf) {
                let f = &buf[..len];
                if let Some(s) = sniff(f, &h0, &h1) {
                    learnt = Some(s);
                    if captured.len() < 4096 {
                        captured.push(f.to_vec());
                    }
                } else if f.len() > 42 && f[26..30] == h0.ipv4().octets() && f[23] == 17 {
                    to_h1 = Some(f.to_vec());
                }
            }
            let Some(s) = learnt else {
                std::thread::sleep(Duration::from_millis(1));
                continue;
            };
            for _ in 0..BURST {
                let frame = match kind {
                    Attack::Replay => {
                        let Some(c) = captured.get((n as usize) % captured.len().max(1)) else {
                            break;
                        };
                        // From the attacker's MAC, byte for byte otherwise.
                        let mut c = c.clone();
                        c[6..12].copy_from_slice(&att.mac());
                        c
                    }
                    Attack::Icmp => {
                        let Some(q) = to_h1.as_ref() else { break };
                        icmp_unreachable(&h0, &h1, &att, q)
                    }
                    Attack::DataOtherPorts => {
                        let mut f = spoofed(&h0, &h1, &att, &s, &forge(Attack::Data, &s, n));
                        let port = 49152 + (n % 16384) as u16;
                        f[34..36].copy_from_slice(&port.to_be_bytes());
                        f
                    }
                    k => spoofed(&h0, &h1, &att, &s, &forge(k, &s, n)),
                };
                out.send(&frame);
                n += 1;
            }
            sent.store(n, Ordering::Relaxed);
        }
    })
}

/// A counter of the engine statistics the provider logs when an RDM
/// endpoint closes (`FI_LOG_LEVEL=info`).
fn stat(stderr: &str, name: &str) -> u64 {
    let Some(line) = stderr.lines().find(|l| l.contains("rdm endpoint closed")) else {
        return 0;
    };
    line.split(&format!(" {name}: "))
        .nth(1)
        .and_then(|r| r.split([',', ' ']).next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn pingpong(host: &Host, port: &str, server: Option<&Host>) -> Command {
    let mut c = host.command("timeout");
    // A hang fails the test; a flood that leaves the endpoints little CPU
    // on a slow machine must not.
    c.args([
        "240",
        "fi_pingpong",
        "-p",
        "xdp",
        "-e",
        "rdm",
        "-m",
        "tagged",
        "-c",
    ])
    .args(["-S", "1048576", "-I", "20", "-B", port, "-P", port])
    .env("FI_PROVIDER_PATH", work_dir())
    .env("FI_XDP_AUTH_KEY", KEY)
    .env("FI_LOG_LEVEL", "info")
    .env_remove("FI_PROVIDER")
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    if let Some(s) = server {
        c.arg(s.ipv4().to_string());
    }
    c
}

/// What a failed run shows of a log: the provider's lines and the
/// program's own, not libfabric core's variable listing.
fn ours(log: &str) -> String {
    log.lines()
        .filter(|l| !l.starts_with("libfabric:") || l.contains("::xdp:"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn attacked(kind: Attack) {
    // One attack at a time: seven attackers at full rate and fourteen
    // busy-polling endpoints on two cores measure the scheduler (in CI the
    // pingpongs got so little CPU that 20 x 1 MiB outlasted their timeout).
    let _turn = one_at_a_time("attack");
    let seg = Segment::new(3, 1500).unwrap();
    let _ = work_dir();
    let port = (21000 + std::process::id() % 20000).to_string();
    let (h0, h1) = (&seg.hosts[0], &seg.hosts[1]);
    // Its output is read while it runs (`spawn_collected`).
    let server = spawn_collected(&mut pingpong(h0, &port, None));
    std::thread::sleep(Duration::from_millis(300));
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let att = attacker(&seg, kind, stop.clone(), sent.clone());
    let client: Output = pingpong(h1, &port, Some(h0)).output().unwrap();
    let server = server.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    att.join().unwrap();
    let sent = sent.load(Ordering::Relaxed);
    // A pingpong that `timeout` ended closed nothing.
    for h in &seg.hosts[..2] {
        remove_shm_leftovers(h);
    }
    let (s_err, c_err) = (
        String::from_utf8_lossy(&server.stderr),
        String::from_utf8_lossy(&client.stderr),
    );
    assert!(
        server.status.success() && client.status.success(),
        "{kind:?}: fi_pingpong failed ({sent} injected)\nserver ({}): {}\n{}\nclient ({}): {}\n{}",
        server.status,
        String::from_utf8_lossy(&server.stdout),
        ours(&s_err),
        client.status,
        String::from_utf8_lossy(&client.stdout),
        ours(&c_err),
    );
    assert!(sent > 1000, "{kind:?}: the attacker sent only {sent}");
    // A session ended by anything but the peer's own CLOSE is logged as
    // lost (peers_lost also counts our own close at the end).
    for log in [&s_err, &c_err] {
        let lost = log
            .lines()
            .any(|l| l.contains(" lost: ") && !l.contains("lost: PeerClosed"));
        assert!(!lost, "{kind:?}: a session was lost\n{}", ours(log));
    }
    let rejected = [
        "auth_rejected",
        "replayed",
        "unauthenticated",
        "dropped",
        "challenges_sent",
    ]
    .iter()
    .map(|n| stat(&s_err, n))
    .sum::<u64>();
    // Every datagram that reached host 0's engine was host 1's or counted
    // as rejected — none of the injected was taken (at full rate many never
    // reach the engine: the AF_XDP ring overflows, and the kernel counts
    // them). An ICMP message is the kernel's, not a datagram of ours: the
    // engine is only asked about it after a timeout, and must not believe it.
    let received = stat(&s_err, "rx_datagrams");
    let genuine = stat(&c_err, "tx_datagrams");
    assert!(
        received <= genuine + rejected,
        "{kind:?}: {received} received, {genuine} sent by the peer, {rejected} rejected\n{}",
        ours(&s_err)
    );
    if kind != Attack::Icmp {
        assert!(
            rejected >= sent / 20,
            "{kind:?}: {sent} injected, only {rejected} counted as rejected\n{}",
            ours(&s_err)
        );
    }
    if kind == Attack::Replay {
        assert!(stat(&s_err, "replayed") >= rejected / 2, "{}", ours(&s_err));
    }
    println!("{kind:?}: {sent} datagrams injected, {rejected} rejected, transfer verified");
}

#[test]
fn attack_forged_data() {
    attacked(Attack::Data);
}

#[test]
fn attack_forged_data_from_other_ports() {
    attacked(Attack::DataOtherPorts);
}

#[test]
fn attack_forged_acks() {
    attacked(Attack::Ack);
}

#[test]
fn attack_forged_hello() {
    attacked(Attack::Hello);
}

#[test]
fn attack_forged_close() {
    attacked(Attack::Close);
}

#[test]
fn attack_forged_reset() {
    attacked(Attack::Reset);
}

#[test]
fn attack_icmp_port_unreachable() {
    attacked(Attack::Icmp);
}

#[test]
fn attack_replays() {
    attacked(Attack::Replay);
}
