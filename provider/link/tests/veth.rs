//! The link on a real veth pair between two namespaces (needs root).
//!
//! Host `a` sends through its AF_XDP link; host `b` has the steering program
//! attached (native or generic) with our port mapped to its AF_XDP socket.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use ofi_xdp_bpf::{AttachMode, Counters, Steering};
use ofi_xdp_link::{BindMode, Link, LinkAddr, LinkConfig, LinkError};
use ofi_xdp_testhosts::{Host, HostPair};

const PORT_A: u16 = 47_101;
const PORT_B: u16 = 47_102;
const WAIT: Duration = Duration::from_secs(5);

/// MTU large enough that one 2048-byte frame, not the MTU, bounds the payload.
const MTU: u32 = 2000;

struct Receiver {
    link: Link,
    steering: Steering,
}

fn open_link(host: &Host, port: u16, ip: IpAddr) -> Link {
    open_link_with(host, port, ip, |_| {})
}

fn open_link_with(host: &Host, port: u16, ip: IpAddr, f: impl FnOnce(&mut LinkConfig)) -> Link {
    let mut cfg = LinkConfig::new(host.ifname(), port);
    cfg.ip = Some(ip);
    cfg.frame_count = 1024;
    cfg.rx_frames = 512;
    cfg.ring_size = 512;
    f(&mut cfg);
    host.run(move || Link::open(&cfg)).unwrap()
}

fn receiver(host: &Host, mode: AttachMode, ip: IpAddr) -> Receiver {
    receiver_with(host, mode, open_link(host, PORT_B, ip))
}

fn receiver_with(host: &Host, mode: AttachMode, link: Link) -> Receiver {
    let ifname = host.ifname().to_string();
    let mut steering = host.run(move || Steering::attach(&ifname, mode)).unwrap();
    steering.steer_port(PORT_B, 0).unwrap();
    steering.set_socket(0, link.fd(), 0).unwrap();
    Receiver { link, steering }
}

/// Peer address of `to` as seen from `from`, resolved by `from`'s link
/// through the kernel neighbour table inside `from`'s namespace.
fn resolve(from: &Host, link: &mut Link, ip: IpAddr, port: u16) -> LinkAddr {
    from.run(move || link.resolve_peer(ip, port, WAIT)).unwrap()
}

/// Ethernet + IP + UDP header bytes in front of a payload from `ip`.
fn header_len(ip: IpAddr) -> usize {
    14 + if ip.is_ipv4() { 20 } else { 40 } + 8
}

fn payload(size: usize, tag: u32) -> Vec<u8> {
    let mut p: Vec<u8> = (0..size)
        .map(|i| (i as u32).wrapping_mul(31).wrapping_add(tag) as u8)
        .collect();
    let t = tag.to_be_bytes();
    for (d, s) in p.iter_mut().zip(t) {
        *d = s;
    }
    p
}

/// Receives until `want` datagrams arrived or nothing came for `WAIT`.
fn collect(rx: &mut Link, want: usize, out: &mut Vec<(LinkAddr, Vec<u8>)>) {
    let mut last = Instant::now();
    while out.len() < want && last.elapsed() < WAIT {
        let n = rx.recv(64, |d| {
            out.push((d.src, d.payload.to_vec()));
        });
        if n > 0 {
            last = Instant::now();
        } else {
            rx.wait_readable(Duration::from_millis(20)).unwrap();
        }
    }
}

/// Sends every payload and returns what arrived: each datagram's payload
/// (its pieces joined) and how many pieces it came in.
fn send_all(
    tx: &mut Link,
    to: &LinkAddr,
    payloads: &[Vec<u8>],
    rx: &mut Link,
) -> Vec<(Vec<u8>, usize)> {
    let mut got = Vec::new();
    let mut sent = 0;
    for chunk in payloads.chunks(32) {
        for p in chunk {
            loop {
                match tx.send_copy(to, p) {
                    Ok(()) => break,
                    Err(LinkError::NoTxFrame | LinkError::TxRingFull) => {
                        tx.flush().unwrap();
                        tx.reap_completions();
                    }
                    Err(e) => panic!("send: {e}"),
                }
            }
        }
        sent += chunk.len();
        tx.flush().unwrap();
        tx.reap_completions();
        // Pace by the receiver: the next chunk leaves only once this one has arrived, so a
        // slow receiver (TCG in vm-tests; native veth's 256-entry ring) is never overrun and
        // a missing datagram means a real loss, reported by the caller's count.
        let deadline = Instant::now() + WAIT;
        while got.len() < sent && Instant::now() < deadline {
            rx.recv(64, |d| {
                got.push((d.pieces.concat(), d.pieces.len()));
            });
            if got.len() < sent {
                rx.wait_readable(Duration::from_millis(2)).unwrap();
            }
        }
    }
    got
}

fn counters(s: &Steering) -> Counters {
    s.counters().unwrap()
}

fn all_sizes_arrive_intact(mode: AttachMode, v6: bool) {
    let pair = HostPair::with_mtu(MTU).unwrap();
    let (ip_a, ip_b): (IpAddr, IpAddr) = if v6 {
        (pair.a.ipv6().into(), pair.b.ipv6().into())
    } else {
        (pair.a.ipv4().into(), pair.b.ipv4().into())
    };
    let mut r = receiver(&pair.b, mode, ip_b);
    let mut tx = open_link(&pair.a, PORT_A, ip_a);
    assert_eq!(tx.bind_mode(), BindMode::Copy, "veth never does zero-copy");
    let to = resolve(&pair.a, &mut tx, ip_b, PORT_B);
    assert_eq!(to.mac, pair.b.mac());

    let max = tx.max_payload();
    // One 2048-byte frame, less XDP headroom and headers.
    assert_eq!(max, 2048 - 256 - header_len(ip_a));
    let sizes: Vec<usize> = if v6 {
        (0..=max).step_by(7).chain([max]).collect()
    } else {
        (0..=max).collect()
    };
    let payloads: Vec<Vec<u8>> = sizes.iter().map(|&s| payload(s, s as u32)).collect();
    let before = counters(&r.steering);
    let got: Vec<Vec<u8>> = send_all(&mut tx, &to, &payloads, &mut r.link)
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    let delta = counters(&r.steering).since(&before);

    assert_eq!(got.len(), payloads.len(), "all datagrams arrive ({mode})");
    // Veth keeps order on one queue; still, compare as a multiset keyed by size.
    let mut by_len: HashMap<usize, &Vec<u8>> = HashMap::new();
    for p in &got {
        assert!(
            by_len.insert(p.len(), p).is_none(),
            "duplicate of size {}",
            p.len()
        );
    }
    for p in &payloads {
        assert_eq!(
            by_len.get(&p.len()),
            Some(&p),
            "payload of {} bytes intact",
            p.len()
        );
    }
    assert_eq!(delta.steered, payloads.len() as u64, "counters: {delta}");
    let stats = r.link.stats().unwrap();
    assert_eq!(stats.rx_malformed + stats.rx_bad_checksum, 0);
    assert_eq!(stats.kernel.rx_dropped, 0);

    // One byte more than a frame holds is refused, not truncated.
    let too_big = vec![0u8; max + 1];
    assert!(matches!(
        tx.send_copy(&to, &too_big),
        Err(LinkError::PayloadTooLarge { .. })
    ));
    drop(r);
    drop(tx);
}

#[test]
fn all_sizes_generic_ipv4() {
    all_sizes_arrive_intact(AttachMode::Generic, false);
}

#[test]
fn all_sizes_native_ipv4() {
    all_sizes_arrive_intact(AttachMode::Native, false);
}

#[test]
fn sizes_generic_ipv6() {
    all_sizes_arrive_intact(AttachMode::Generic, true);
}

#[test]
fn sizes_native_ipv6() {
    all_sizes_arrive_intact(AttachMode::Native, true);
}

/// Jumbo frames: at MTU 9000 a datagram spans up to three 4 KiB chunks,
/// sent as several TX descriptors and gathered from several RX descriptors
/// (XDP_USE_SG, Linux 6.6+). Older kernels refuse the flag: the link falls
/// back to one chunk per datagram, and the sizes up to that still arrive.
/// `pieces`: the receiver takes multi-chunk datagrams in their chunks
/// (`LinkConfig::rx_pieces`) instead of gathered.
fn jumbo_frames_span_chunks(pieces: bool) {
    let pair = HostPair::with_mtu(9000).unwrap();
    let (ip_a, ip_b): (IpAddr, IpAddr) = (pair.a.ipv4().into(), pair.b.ipv4().into());
    let jumbo = |c: &mut LinkConfig| {
        c.frame_size = 4096;
        c.multi_buffer = true;
    };
    let rx = open_link_with(&pair.b, PORT_B, ip_b, |c| {
        jumbo(c);
        c.rx_pieces = pieces;
        c.verify_checksums = !pieces;
    });
    let mut r = receiver_with(&pair.b, AttachMode::Generic, rx);
    let mut tx = open_link_with(&pair.a, PORT_A, ip_a, jumbo);
    let to = resolve(&pair.a, &mut tx, ip_b, PORT_B);
    let max = tx.max_payload();
    let one_chunk = 4096 - 256 - header_len(ip_a);
    if max == one_chunk {
        eprintln!("this kernel has no AF_XDP multi-buffer: one chunk per datagram");
    } else {
        assert_eq!(max, 9000 - 28, "the MTU bounds the datagram");
        assert_eq!(r.link.max_payload(), max);
    }
    // Every size around the chunk boundaries, and a stride through the rest.
    let mut sizes: Vec<usize> = (0..=max).step_by(61).collect();
    for edge in [
        one_chunk,
        4096 - header_len(ip_a),
        8192 - header_len(ip_a),
        max,
    ] {
        sizes.extend(edge.saturating_sub(3)..=(edge + 3).min(max));
    }
    sizes.sort_unstable();
    sizes.dedup();
    let payloads: Vec<Vec<u8>> = sizes.iter().map(|&s| payload(s, s as u32)).collect();
    let got = send_all(&mut tx, &to, &payloads, &mut r.link);
    assert_eq!(got.len(), payloads.len(), "all datagrams arrive");
    for ((g, n), p) in got.iter().zip(&payloads) {
        assert!(
            g == p,
            "payload of {} bytes intact (got {})",
            p.len(),
            g.len()
        );
        // In pieces, a datagram beyond the first chunk's room comes in
        // more than one; gathered, always in one.
        let spans = p.len() > one_chunk;
        assert_eq!(*n > 1, pieces && spans, "{} bytes in {n} pieces", p.len());
    }
    let stats = r.link.stats().unwrap();
    assert_eq!(
        stats.rx_malformed + stats.rx_bad_checksum + stats.bad_descs,
        0
    );
    assert_eq!(stats.kernel.rx_dropped, 0);
    let tstats = tx.stats().unwrap();
    assert_eq!(
        tstats.tx_completions, tstats.tx_packets,
        "one completion per datagram"
    );
    assert!(matches!(
        tx.send_copy(&to, &vec![0u8; max + 1]),
        Err(LinkError::PayloadTooLarge { .. })
    ));
}

#[test]
fn jumbo_frames_span_chunks_gathered() {
    jumbo_frames_span_chunks(false);
}

#[test]
fn jumbo_frames_span_chunks_in_pieces() {
    jumbo_frames_span_chunks(true);
}

fn lost_with_fault_injection(one_in: u32, n: usize) -> (usize, Counters) {
    let pair = HostPair::new().unwrap();
    let mut r = receiver(&pair.b, AttachMode::Generic, pair.b.ipv4().into());
    r.steering.set_fault_injection(one_in, 0x5eed).unwrap();
    let mut tx = open_link(&pair.a, PORT_A, pair.a.ipv4().into());
    let to = resolve(&pair.a, &mut tx, pair.b.ipv4().into(), PORT_B);
    let payloads: Vec<Vec<u8>> = (0..n as u32).map(|i| payload(64, i)).collect();
    let before = counters(&r.steering);
    let mut got = Vec::new();
    let mut sent = 0u64;
    for chunk in payloads.chunks(32) {
        for p in chunk {
            tx.send_copy(&to, p).unwrap();
        }
        sent += chunk.len() as u64;
        tx.flush().unwrap();
        tx.reap_completions();
        // Wait until the program has seen the whole chunk and every steered
        // datagram has been read, so neither ring overflows.
        let deadline = Instant::now() + WAIT;
        loop {
            r.link.recv(64, |d| {
                got.push(d.payload.to_vec());
            });
            let delta = counters(&r.steering).since(&before);
            let seen = delta.steered + delta.fault_dropped;
            if (seen >= sent && got.len() as u64 >= delta.steered) || Instant::now() > deadline {
                break;
            }
            r.link.wait_readable(Duration::from_millis(2)).unwrap();
        }
    }
    let delta = counters(&r.steering).since(&before);
    // Every datagram that arrived is intact and unique.
    let mut tags: Vec<u32> = got
        .iter()
        .map(|p| {
            let tag = u32::from_be_bytes([p[0], p[1], p[2], p[3]]);
            assert_eq!(p, &payload(64, tag));
            tag
        })
        .collect();
    tags.sort_unstable();
    tags.dedup();
    assert_eq!(tags.len(), got.len(), "no duplicates");
    (n - got.len(), delta)
}

#[test]
fn fault_injection_one_in_ten_loses_about_ten_percent() {
    let n = 2000;
    let (lost, delta) = lost_with_fault_injection(10, n);
    // Binomial(2000, 0.1): mean 200, sd ~13.4; ±6 sd.
    assert!((120..=280).contains(&lost), "lost {lost} of {n}: {delta}");
    assert_eq!(delta.fault_dropped, lost as u64, "{delta}");
    assert_eq!(delta.steered, (n - lost) as u64, "{delta}");
}

#[test]
fn fault_injection_off_loses_nothing() {
    let n = 1000;
    let (lost, delta) = lost_with_fault_injection(0, n);
    assert_eq!(lost, 0, "{delta}");
    assert_eq!(delta.fault_dropped, 0);
}

/// Our checksums are accepted by the kernel (which verifies them for a
/// frame that arrives without offload), and kernel-built datagrams decode.
fn interop_with_kernel_udp(v6: bool) {
    let pair = HostPair::new().unwrap();
    let (ip_a, ip_b): (IpAddr, IpAddr) = if v6 {
        (pair.a.ipv6().into(), pair.b.ipv6().into())
    } else {
        (pair.a.ipv4().into(), pair.b.ipv4().into())
    };
    // Link on a → kernel socket on b (no program on b: plain kernel path).
    let kernel_b = pair
        .b
        .run(move || UdpSocket::bind(SocketAddr::new(ip_b, PORT_B)))
        .unwrap();
    kernel_b.set_read_timeout(Some(WAIT)).unwrap();
    let mut tx = open_link(&pair.a, PORT_A, ip_a);
    let to = resolve(&pair.a, &mut tx, ip_b, PORT_B);
    for size in [0usize, 1, 63, 64, 1000, tx.max_payload().min(1472)] {
        let p = payload(size, 9);
        tx.send_copy(&to, &p).unwrap();
        tx.flush().unwrap();
        let mut buf = [0u8; 2048];
        let (n, from) = kernel_b.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], &p[..], "kernel got our datagram of {size} bytes");
        assert_eq!(from, SocketAddr::new(ip_a, PORT_A));
    }
    drop(tx);

    // Kernel socket on a → link on b (steered). veth offers checksum
    // offload, so the kernel leaves UDP checksums partial (pseudo-header
    // only; CHECKSUM_PARTIAL) and our verification would rightly reject
    // them: turn offload off on a, as a real NIC would have filled it in.
    let out = pair
        .a
        .command("ethtool")
        .args(["-K", pair.a.ifname(), "tx", "off"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut r = receiver(&pair.b, AttachMode::Generic, ip_b);
    let kernel_a = pair
        .a
        .run(move || UdpSocket::bind(SocketAddr::new(ip_a, PORT_A)))
        .unwrap();
    let p = payload(300, 77);
    kernel_a.send_to(&p, SocketAddr::new(ip_b, PORT_B)).unwrap();
    let mut got = Vec::new();
    collect(&mut r.link, 1, &mut got);
    let st = r.link.stats().unwrap();
    assert_eq!(got.len(), 1, "{st:?} {}", counters(&r.steering));
    assert_eq!(got[0].1, p);
    assert_eq!(got[0].0.ip, ip_a);
    assert_eq!(got[0].0.port, PORT_A);
    assert_eq!(got[0].0.mac, pair.a.mac());
}

#[test]
fn kernel_accepts_our_checksums_ipv4() {
    interop_with_kernel_udp(false);
}

#[test]
fn kernel_accepts_our_checksums_ipv6() {
    interop_with_kernel_udp(true);
}

/// A TX frame released while its datagram is still queued stays out of the
/// pool until the kernel has sent it: the datagrams all arrive intact,
/// none overwritten by a reuse of its frame.
#[test]
fn released_frames_return_only_after_the_kernel_sent_them() {
    let pair = HostPair::new().unwrap();
    let ip_b: IpAddr = pair.b.ipv4().into();
    let mut r = receiver(&pair.b, AttachMode::Generic, ip_b);
    let mut tx = open_link_with(&pair.a, PORT_A, pair.a.ipv4().into(), |c| {
        c.frame_count = 64;
        c.rx_frames = 32;
    });
    let to = resolve(&pair.a, &mut tx, ip_b, PORT_B);

    let mut frames = Vec::new();
    while let Some(f) = tx.alloc_tx() {
        frames.push(f);
    }
    assert_eq!(frames.len(), 32, "the frames after rx_frames serve TX");
    let payloads: Vec<Vec<u8>> = (0..frames.len() as u32).map(|k| payload(100, k)).collect();
    for (f, p) in frames.iter().zip(&payloads) {
        tx.tx_payload_mut(*f).unwrap()[..p.len()].copy_from_slice(p);
        tx.send(*f, &to, p.len()).unwrap();
        tx.release_tx(*f).unwrap();
    }
    // Queued, not yet kicked (copy mode sends in the kick): nothing is free.
    assert!(tx.alloc_tx().is_none(), "queued frames are not reused");
    assert!(
        matches!(tx.tx_payload_mut(frames[0]), Err(LinkError::Frame(_))),
        "a released frame is refused"
    );
    assert!(tx.release_tx(frames[0]).is_err(), "double release refused");

    tx.flush().unwrap();
    let mut got = Vec::new();
    collect(&mut r.link, payloads.len(), &mut got);
    let got: Vec<Vec<u8>> = got.into_iter().map(|(_, p)| p).collect();
    assert_eq!(got, payloads, "every datagram intact, in order");

    // Sent and completed: the frames are back.
    let start = Instant::now();
    let mut again = 0;
    while again < frames.len() && start.elapsed() < WAIT {
        tx.flush().unwrap();
        while tx.alloc_tx().is_some() {
            again += 1;
        }
    }
    assert_eq!(again, frames.len());
}

#[test]
fn errors_say_what_is_wrong() {
    let pair = HostPair::new().unwrap();
    let e = pair
        .a
        .run(|| Link::open(&LinkConfig::new("no-such-if0", 1)))
        .err()
        .unwrap();
    assert!(matches!(e, LinkError::InterfaceNotFound { .. }), "{e}");
    assert!(e.to_string().contains("not found"));

    let mut cfg = LinkConfig::new(pair.a.ifname(), 1);
    cfg.frame_size = 3000;
    let e = pair.a.run(move || Link::open(&cfg)).err().unwrap();
    assert!(matches!(e, LinkError::Config(_)), "{e}");

    // veth has no zero-copy: forcing it fails with a clear error.
    let mut cfg = LinkConfig::new(pair.a.ifname(), 1);
    cfg.bind = ofi_xdp_link::BindPreference::ZeroCopy;
    let e = pair.a.run(move || Link::open(&cfg)).err().unwrap();
    assert!(matches!(e, LinkError::ZeroCopyUnsupported { .. }), "{e:?}");

    // A second socket on the same queue: busy (after the brief retry).
    let first = open_link(&pair.a, 1, pair.a.ipv4().into());
    let cfg = LinkConfig::new(pair.a.ifname(), 2);
    let e = pair.a.run(move || Link::open(&cfg)).err().unwrap();
    assert!(matches!(e, LinkError::QueueBusy { .. }), "{e:?}");
    drop(first);
    // Right after closing, the queue becomes usable again (EBUSY retried).
    let cfg = LinkConfig::new(pair.a.ifname(), 3);
    pair.a.run(move || Link::open(&cfg)).unwrap();
}
