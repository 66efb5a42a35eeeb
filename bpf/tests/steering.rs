//! The steering program on a real veth pair between two namespaces (needs
//! root). The program is attached to host `b`; traffic comes from host `a`.

#![allow(clippy::unwrap_used)] // tests may unwrap: a failed step is a failed test

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::time::Duration;

use common::*;
use ofi_xdp_bpf::{AttachMode, BpfError, Counters, Steering, XdpAction};
use ofi_xdp_testhosts::{Host, HostPair};

const STEERED_PORT: u16 = 47_001;
const OTHER_PORT: u16 = 47_002;
const WAIT: Duration = Duration::from_secs(3);

fn attach(host: &Host, mode: AttachMode) -> Steering {
    let ifname = host.ifname().to_string();
    host.run(move || Steering::attach(&ifname, mode))
        .unwrap_or_else(|e| panic!("attach {mode}: {e}"))
}

/// Pair with the program attached to `b` and STEERED_PORT mapped to slot 0
/// (no socket in the slot).
fn setup(mode: AttachMode) -> (HostPair, Steering) {
    let pair = HostPair::new().unwrap();
    let mut steering = attach(&pair.b, mode);
    steering.steer_port(STEERED_PORT, 0).unwrap();
    assert_eq!(steering.mode(), mode);
    assert!(xdp_attached(&pair.b), "ip link shows no XDP program");
    (pair, steering)
}

fn ping(from: &Host, to: &str) {
    let mut cmd = from.command("ping");
    if to.contains(':') {
        cmd.arg("-6");
    }
    let out = cmd
        .args(["-c", "2", "-i", "0.2", "-W", "2", to])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ping {to} failed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

fn passthrough(mode: AttachMode) {
    let (pair, steering) = setup(mode);
    let (a, b) = (&pair.a, &pair.b);
    let base = steering.counters().unwrap();

    ping(a, &b.ipv4().to_string());
    ping(a, &b.ipv6().to_string());

    // TCP: connect, send, echo back.
    let listener = b.run(|| TcpListener::bind(SocketAddr::new(b.ipv4().into(), 0)).unwrap());
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0u8; 5];
        s.read_exact(&mut buf).unwrap();
        s.write_all(&buf).unwrap();
    });
    let mut client = a.run(|| TcpStream::connect_timeout(&addr, WAIT).unwrap());
    client.set_read_timeout(Some(WAIT)).unwrap();
    client.write_all(b"hello").unwrap();
    let mut echo = [0u8; 5];
    client.read_exact(&mut echo).unwrap();
    assert_eq!(&echo, b"hello");
    server.join().unwrap();

    // UDP to a port not in the map reaches the kernel socket (v4 and v6).
    for dst in [
        SocketAddr::new(b.ipv4().into(), OTHER_PORT),
        SocketAddr::new(b.ipv6().into(), OTHER_PORT),
    ] {
        let rx = b.run(|| UdpSocket::bind(dst).unwrap());
        rx.set_read_timeout(Some(WAIT)).unwrap();
        let bind_any: SocketAddr = if dst.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }
            .parse()
            .unwrap();
        a.run(|| {
            UdpSocket::bind(bind_any)
                .unwrap()
                .send_to(b"not ours", dst)
                .unwrap()
        });
        let mut buf = [0u8; 32];
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"not ours");
    }

    let delta = steering.counters().unwrap().since(&base);
    // ≥ 2 pings ×2 families, TCP handshake + data, 2 UDP datagrams.
    assert!(delta.passed >= 10, "{delta}");
    assert_eq!(delta.steered, 0, "{delta}");
    assert_eq!(delta.malformed, 0, "{delta}");
    assert_eq!(delta.no_socket, 0, "{delta}");
    assert_eq!(delta.fault_dropped, 0, "{delta}");
}

#[test]
fn passthrough_generic() {
    passthrough(AttachMode::Generic);
}

#[test]
fn passthrough_native() {
    passthrough(AttachMode::Native);
}

/// Frames that must be counted as malformed, sent from `a` to `b`'s MAC and
/// aimed at the steered port.
fn malformed_frames(pair: &HostPair) -> Vec<(&'static str, Vec<u8>)> {
    let (a, b) = (&pair.a, &pair.b);
    let e4 = eth(b.mac(), a.mac(), None, ETH_P_IP);
    let e6 = eth(b.mac(), a.mac(), None, ETH_P_IPV6);
    let v4 = V4::udp(a.ipv4(), b.ipv4());
    let good_udp = udp(1234, STEERED_PORT, None, b"payload!");
    let full_v4 = ipv4(v4, &good_udp);
    vec![
        ("truncated VLAN tag", {
            let mut f = eth(b.mac(), a.mac(), None, ETH_P_8021Q);
            f.extend_from_slice(&[0x00, 0x07]); // TCI only, no inner ethertype
            f
        }),
        ("truncated IPv4 header", cat(&[&e4, &full_v4[..12]])),
        (
            "IPv4 IHL 4",
            cat(&[&e4, &ipv4(V4 { ihl: 4, ..v4 }, &good_udp)]),
        ),
        (
            "IPv4 IHL 0",
            cat(&[&e4, &ipv4(V4 { ihl: 0, ..v4 }, &good_udp)]),
        ),
        (
            "IPv4 options (IHL 6)",
            cat(&[&e4, &ipv4(V4 { ihl: 6, ..v4 }, &good_udp)]),
        ),
        (
            "IPv4 total length > frame",
            cat(&[
                &e4,
                &ipv4(
                    V4 {
                        total_len: Some(200),
                        ..v4
                    },
                    &good_udp,
                ),
            ]),
        ),
        (
            "IPv4 total length < header",
            cat(&[
                &e4,
                &ipv4(
                    V4 {
                        total_len: Some(12),
                        ..v4
                    },
                    &good_udp,
                ),
            ]),
        ),
        (
            "truncated UDP header",
            cat(&[&e4, &ipv4(v4, &good_udp[..6])]),
        ),
        (
            "UDP length > packet",
            cat(&[
                &e4,
                &ipv4(v4, &udp(1234, STEERED_PORT, Some(100), b"payload!")),
            ]),
        ),
        (
            "UDP length < 8",
            cat(&[
                &e4,
                &ipv4(v4, &udp(1234, STEERED_PORT, Some(4), b"payload!")),
            ]),
        ),
        (
            "truncated IPv6 header",
            cat(&[&e6, &ipv6(a.ipv6(), b.ipv6(), 17, None, &good_udp)[..30]]),
        ),
        (
            "IPv6 payload length > frame",
            cat(&[&e6, &ipv6(a.ipv6(), b.ipv6(), 17, Some(300), &good_udp)]),
        ),
        (
            "truncated UDP in IPv6",
            cat(&[&e6, &ipv6(a.ipv6(), b.ipv6(), 17, None, &good_udp[..4])]),
        ),
        (
            "VLAN + IPv4 IHL 6",
            cat(&[
                &eth(b.mac(), a.mac(), Some(ETH_P_8021Q), ETH_P_IP),
                &ipv4(V4 { ihl: 6, ..v4 }, &good_udp),
            ]),
        ),
    ]
}

/// Well-formed frames and the counter each must land in.
/// Picks the counter a frame must land in.
type Which = fn(&Counters) -> u64;

fn wellformed_frames(pair: &HostPair) -> Vec<(&'static str, Vec<u8>, Which)> {
    let (a, b) = (&pair.a, &pair.b);
    let v4 = V4::udp(a.ipv4(), b.ipv4());
    let steered = udp(1234, STEERED_PORT, None, b"payload!");
    let other = udp(1234, OTHER_PORT, None, b"payload!");
    let no_socket: Which = |c| c.no_socket;
    let passed: Which = |c| c.passed;
    vec![
        (
            "IPv4 UDP steered",
            cat(&[&eth(b.mac(), a.mac(), None, ETH_P_IP), &ipv4(v4, &steered)]),
            no_socket,
        ),
        (
            "802.1Q IPv4 UDP steered",
            cat(&[
                &eth(b.mac(), a.mac(), Some(ETH_P_8021Q), ETH_P_IP),
                &ipv4(v4, &steered),
            ]),
            no_socket,
        ),
        (
            "802.1ad IPv6 UDP steered",
            cat(&[
                &eth(b.mac(), a.mac(), Some(ETH_P_8021AD), ETH_P_IPV6),
                &ipv6(a.ipv6(), b.ipv6(), 17, None, &steered),
            ]),
            no_socket,
        ),
        (
            "IPv6 UDP steered",
            cat(&[
                &eth(b.mac(), a.mac(), None, ETH_P_IPV6),
                &ipv6(a.ipv6(), b.ipv6(), 17, None, &steered),
            ]),
            no_socket,
        ),
        (
            "IPv4 UDP padded to 60 bytes",
            {
                let mut f = cat(&[
                    &eth(b.mac(), a.mac(), None, ETH_P_IP),
                    &ipv4(v4, &udp(1, STEERED_PORT, None, b"")),
                ]);
                f.resize(60, 0);
                f
            },
            no_socket,
        ),
        (
            "IPv4 UDP other port",
            cat(&[&eth(b.mac(), a.mac(), None, ETH_P_IP), &ipv4(v4, &other)]),
            passed,
        ),
        (
            "IPv4 fragment to steered port",
            cat(&[
                &eth(b.mac(), a.mac(), None, ETH_P_IP),
                &ipv4(
                    V4 {
                        frag_off: 0x2000,
                        ..v4
                    },
                    &steered,
                ),
            ]),
            passed,
        ),
        (
            "IPv4 TCP",
            cat(&[
                &eth(b.mac(), a.mac(), None, ETH_P_IP),
                &ipv4(V4 { protocol: 6, ..v4 }, &steered),
            ]),
            passed,
        ),
        (
            "IPv6 hop-by-hop header",
            cat(&[
                &eth(b.mac(), a.mac(), None, ETH_P_IPV6),
                &ipv6(a.ipv6(), b.ipv6(), 0, None, &steered),
            ]),
            passed,
        ),
        (
            "ARP-typed frame",
            cat(&[&eth(b.mac(), a.mac(), None, ETH_P_ARP), &[0u8; 28]]),
            passed,
        ),
    ]
}

/// Parser matrix through BPF_PROG_TEST_RUN: one frame at a time, exact
/// counter deltas (frames never touch the wire).
#[test]
fn parser_matrix_via_test_run() {
    let (pair, steering) = setup(AttachMode::Generic);
    for (name, frame) in malformed_frames(&pair) {
        let before = steering.counters().unwrap();
        assert_eq!(
            steering.test_run(&frame).unwrap(),
            XdpAction::Pass,
            "{name}"
        );
        let d = steering.counters().unwrap().since(&before);
        // Background traffic (IPv6 ND/MLD) may add to `passed` only.
        assert_eq!(
            (d.malformed, d.no_socket, d.steered),
            (1, 0, 0),
            "{name}: {d}"
        );
    }
    for (name, frame, which) in wellformed_frames(&pair) {
        let before = steering.counters().unwrap();
        assert_eq!(
            steering.test_run(&frame).unwrap(),
            XdpAction::Pass,
            "{name}"
        );
        let d = steering.counters().unwrap().since(&before);
        assert_eq!(which(&d), 1, "{name}: {d}");
        assert_eq!((d.malformed, d.steered), (0, 0), "{name}: {d}");
    }
    // A 14-byte frame with nothing after the Ethernet header is not IP: passed.
    let before = steering.counters().unwrap();
    let bare = eth(pair.b.mac(), pair.a.mac(), None, 0x88B5);
    assert_eq!(steering.test_run(&bare).unwrap(), XdpAction::Pass);
    assert_eq!(steering.counters().unwrap().since(&before).malformed, 0);
}

/// The same frames on the wire, sent with AF_PACKET from `a`.
fn malformed_on_wire(mode: AttachMode) {
    let (pair, steering) = setup(mode);
    let frames = malformed_frames(&pair);
    let base = steering.counters().unwrap();
    let raw: Vec<Vec<u8>> = frames.iter().map(|(_, f)| f.clone()).collect();
    let ifname = pair.a.ifname().to_string();
    pair.a.run(|| send_raw(&ifname, &raw)).unwrap();
    let n = frames.len() as u64;
    let d = wait_counters(&steering, &base, WAIT, |d| d.malformed >= n);
    assert_eq!(d.malformed, n, "{d}");
    assert_eq!((d.steered, d.no_socket, d.fault_dropped), (0, 0, 0), "{d}");

    let wellformed = wellformed_frames(&pair);
    let base = steering.counters().unwrap();
    let raw: Vec<Vec<u8>> = wellformed.iter().map(|(_, f, _)| f.clone()).collect();
    pair.a.run(|| send_raw(&ifname, &raw)).unwrap();
    let expect_no_socket = wellformed
        .iter()
        .filter(|(_, _, w)| {
            w(&Counters {
                no_socket: 1,
                ..Counters::default()
            }) == 1
        })
        .count() as u64;
    let d = wait_counters(&steering, &base, WAIT, |d| d.no_socket >= expect_no_socket);
    assert_eq!(d.no_socket, expect_no_socket, "{d}");
    assert_eq!(d.malformed, 0, "{d}");
    assert!(
        d.passed >= (wellformed.len() as u64 - expect_no_socket),
        "{d}"
    );
}

#[test]
fn malformed_on_wire_generic() {
    malformed_on_wire(AttachMode::Generic);
}

#[test]
fn malformed_on_wire_native() {
    malformed_on_wire(AttachMode::Native);
}

/// Sends `count` UDP datagrams from `a` to `b:port` in bursts, pacing so no
/// queue overflows, and returns when the program has counted them all (or
/// the wait times out).
fn blast_udp(pair: &HostPair, steering: &Steering, port: u16, count: u64) -> Counters {
    let base = steering.counters().unwrap();
    let dst = SocketAddr::new(pair.b.ipv4().into(), port);
    let tx = pair.a.run(|| UdpSocket::bind("0.0.0.0:0").unwrap());
    let mut sent = 0u64;
    while sent < count {
        let burst = (count - sent).min(100);
        for i in 0..burst {
            tx.send_to(&(sent + i).to_be_bytes(), dst).unwrap();
        }
        sent += burst;
        wait_counters(steering, &base, WAIT, |d| {
            d.no_socket + d.fault_dropped + d.steered >= sent
        });
    }
    steering.counters().unwrap().since(&base)
}

fn fault_injection(mode: AttachMode) {
    let (pair, mut steering) = setup(mode);
    // A kernel socket on the steered port: with no AF_XDP socket in the slot,
    // frames the program lets through are passed to it.
    let rx = pair
        .b
        .run(|| UdpSocket::bind(SocketAddr::new(pair.b.ipv4().into(), STEERED_PORT)).unwrap());
    rx.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    // Room for every datagram of a run (≈ 1 KiB of truesize each) so the
    // count below is not cut by receive-buffer overflow.
    force_rcvbuf(&rx, 8 << 20);
    let drain = |rx: &UdpSocket| {
        let mut n = 0u64;
        let mut buf = [0u8; 16];
        while rx.recv(&mut buf).is_ok() {
            n += 1;
        }
        n
    };

    // Off (the default): nothing dropped, everything reaches the kernel socket.
    assert_eq!(steering.fault_injection().unwrap(), 0);
    let d = blast_udp(&pair, &steering, STEERED_PORT, 500);
    assert_eq!((d.no_socket, d.fault_dropped), (500, 0), "{d}");
    assert_eq!(drain(&rx), 500);

    // 1 in 10 over 2000 datagrams: expect 200, allow ±5 standard deviations
    // (σ = √(2000·0.1·0.9) ≈ 13.4).
    steering.set_fault_injection(10, 0x0F1_5EED).unwrap();
    let d = blast_udp(&pair, &steering, STEERED_PORT, 2000);
    assert_eq!(d.no_socket + d.fault_dropped, 2000, "{d}");
    assert!((133..=267).contains(&d.fault_dropped), "{d}");
    assert_eq!(
        drain(&rx),
        d.no_socket,
        "dropped frames must not reach the kernel either"
    );

    // Unsteered traffic is never dropped by fault injection: 200 datagrams
    // to another port all reach a kernel socket there.
    let other = pair
        .b
        .run(|| UdpSocket::bind(SocketAddr::new(pair.b.ipv4().into(), OTHER_PORT)).unwrap());
    other
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    force_rcvbuf(&other, 8 << 20);
    let base = steering.counters().unwrap();
    let tx = pair.a.run(|| UdpSocket::bind("0.0.0.0:0").unwrap());
    let dst = SocketAddr::new(pair.b.ipv4().into(), OTHER_PORT);
    for i in 0..200u32 {
        tx.send_to(&i.to_be_bytes(), dst).unwrap();
    }
    assert_eq!(drain(&other), 200);
    let d = steering.counters().unwrap().since(&base);
    assert_eq!(d.fault_dropped, 0, "{d}");
    assert!(d.passed >= 200, "{d}");

    // Off again.
    steering.set_fault_injection(0, 1).unwrap();
    let d = blast_udp(&pair, &steering, STEERED_PORT, 300);
    assert_eq!((d.no_socket, d.fault_dropped), (300, 0), "{d}");
    assert_eq!(drain(&rx), 300);
}

#[test]
fn fault_injection_generic() {
    fault_injection(AttachMode::Generic);
}

#[test]
fn fault_injection_native() {
    fault_injection(AttachMode::Native);
}

/// Same seed, same single CPU → same drop pattern (BPF_PROG_TEST_RUN runs on
/// the calling CPU, so pin the thread).
#[test]
fn fault_injection_is_reproducible() {
    let (pair, mut steering) = setup(AttachMode::Generic);
    let frame = cat(&[
        &eth(pair.b.mac(), pair.a.mac(), None, ETH_P_IP),
        &ipv4(
            V4::udp(pair.a.ipv4(), pair.b.ipv4()),
            &udp(1, STEERED_PORT, None, b"x"),
        ),
    ]);
    let pattern = |steering: &mut Steering| -> Vec<bool> {
        steering.set_fault_injection(4, 42).unwrap();
        pin_to_cpu0();
        (0..64)
            .map(|_| steering.test_run(&frame).unwrap() == XdpAction::Drop)
            .collect()
    };
    let first = std::thread::scope(|s| s.spawn(|| pattern(&mut steering)).join().unwrap());
    let second = std::thread::scope(|s| s.spawn(|| pattern(&mut steering)).join().unwrap());
    assert_eq!(first, second);
    let drops = first.iter().filter(|d| **d).count();
    assert!((4..=32).contains(&drops), "{drops} of 64 at 1 in 4");
}

fn force_rcvbuf(sock: &UdpSocket, bytes: i32) {
    use std::os::fd::AsRawFd;
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            (&bytes as *const i32).cast(),
            std::mem::size_of::<i32>() as u32,
        )
    };
    assert_eq!(rc, 0, "SO_RCVBUFFORCE: {}", std::io::Error::last_os_error());
}

fn pin_to_cpu0() {
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

#[test]
fn map_api_checks_slots_and_ports() {
    let (pair, mut steering) = setup(AttachMode::Generic);
    assert!(matches!(
        steering.steer_port(1, Steering::MAX_SLOTS),
        Err(BpfError::SlotOutOfRange { .. })
    ));
    assert!(steering.set_socket(Steering::MAX_SLOTS, 0, 0).is_err());
    steering.unsteer_port(STEERED_PORT).unwrap();
    steering.unsteer_port(STEERED_PORT).unwrap(); // idempotent
    steering.clear_socket(3).unwrap(); // empty slot: fine
    // A non-AF_XDP fd is refused by the kernel.
    let plain = UdpSocket::bind("127.0.0.1:0").unwrap();
    use std::os::fd::AsRawFd;
    assert!(steering.set_socket(0, plain.as_raw_fd(), 0).is_err());
    // After unsteering, the port is passed.
    let frame = cat(&[
        &eth(pair.b.mac(), pair.a.mac(), None, ETH_P_IP),
        &ipv4(
            V4::udp(pair.a.ipv4(), pair.b.ipv4()),
            &udp(1, STEERED_PORT, None, b"x"),
        ),
    ]);
    let before = steering.counters().unwrap();
    steering.test_run(&frame).unwrap();
    let d = steering.counters().unwrap().since(&before);
    assert_eq!((d.no_socket, d.steered), (0, 0), "{d}");
    assert_eq!(
        steering.ifindex(),
        pair.b.run(|| {
            let c = std::ffi::CString::new(pair.b.ifname()).unwrap();
            unsafe { libc::if_nametoindex(c.as_ptr()) }
        })
    );
}

#[test]
fn native_refuses_large_veth_mtu_with_clear_error() {
    let pair = HostPair::with_mtu(9000).unwrap();
    let ifname = pair.b.ifname().to_string();
    let err = pair
        .b
        .run(move || Steering::attach(&ifname, AttachMode::Native))
        .unwrap_err();
    assert!(matches!(err, BpfError::MtuTooLarge { .. }), "{err}");
    // Generic mode works at any MTU.
    let ifname = pair.b.ifname().to_string();
    pair.b
        .run(move || Steering::attach(&ifname, AttachMode::Generic))
        .unwrap();
}

#[test]
fn drop_detaches() {
    let pair = HostPair::new().unwrap();
    for mode in [AttachMode::Generic, AttachMode::Native] {
        let steering = attach(&pair.b, mode);
        assert!(xdp_attached(&pair.b), "{mode}");
        // A second program on the same interface is refused, not stacked.
        let ifname = pair.b.ifname().to_string();
        let second = pair.b.run(move || Steering::attach(&ifname, mode));
        assert!(
            matches!(second, Err(BpfError::AlreadyAttached { .. })),
            "{second:?}"
        );
        drop(steering);
        assert!(
            xdp_detached_soon(&pair.b),
            "{mode}: still attached after drop"
        );
    }
}

/// A second user of the interface (another rank of the same user) adopts
/// the attached program instead of failing, shares its maps, and keeps it
/// attached when the first lets go.
#[test]
fn attached_program_is_adopted_and_outlives_its_loader() {
    let pair = HostPair::new().unwrap();
    let mut first = attach(&pair.b, AttachMode::Generic);
    first.steer_port(STEERED_PORT, 5).unwrap();
    let ifname = pair.b.ifname().to_string();
    let mut second = pair
        .b
        .run(move || Steering::adopt(&ifname))
        .unwrap_or_else(|e| panic!("adopt: {e}"));
    assert_eq!(second.mode(), AttachMode::Generic);
    second.steer_port(OTHER_PORT, 6).unwrap();
    drop(first);
    assert!(xdp_attached(&pair.b), "detached while adopted");
    second.unsteer_port(STEERED_PORT).unwrap();
    drop(second);
    assert!(
        xdp_detached_soon(&pair.b),
        "still attached after the last holder"
    );
    // Nothing attached: nothing to adopt.
    let ifname = pair.b.ifname().to_string();
    let none = pair.b.run(move || Steering::adopt(&ifname));
    assert!(
        matches!(none, Err(BpfError::NotAdoptable { .. })),
        "{none:?}"
    );
}
