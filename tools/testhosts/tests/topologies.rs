//! Segments (hosts on a bridge) and impaired pairs (hosts joined through an
//! impairing forwarder), on real namespaces (needs root).

#![allow(clippy::unwrap_used)] // tests may unwrap

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use ofi_xdp_testhosts::skip::skip;
use ofi_xdp_testhosts::{Host, ImpairedPair, Impairment, LeafSpine, Routed, Segment, our_netns};

/// One ICMP echo from `from` to `to`'s IPv4 address is answered.
fn assert_pings(from: &Host, to: &Host) {
    assert_pings_ip(from, &to.ipv4().to_string(), "-4");
}

/// The same to `to`'s IPv6 address.
fn assert_pings6(from: &Host, to: &Host) {
    assert_pings_ip(from, &to.ipv6().to_string(), "-6");
}

fn assert_pings_ip(from: &Host, ip: &str, family: &str) {
    let out = from
        .command("ping")
        .args([family, "-c", "1", "-W", "2", ip])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// `n` UDP flows from `from` to `to` over IPv4, one datagram each from a
/// source port of its own (so ECMP hashes each anew), every one received.
fn udp_flows(from: &Host, to: &Host, n: u64) {
    let rx = to.run(|| UdpSocket::bind((to.ipv4(), 0)).unwrap());
    rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let dst = rx.local_addr().unwrap();
    for _ in 0..n {
        let tx = from.run(|| UdpSocket::bind((from.ipv4(), 0)).unwrap());
        tx.send_to(b"flow", dst).unwrap();
    }
    let mut buf = [0u8; 16];
    for _ in 0..n {
        rx.recv_from(&mut buf).unwrap();
    }
}

/// A tap on host 0's bridge port sees what host 1 sends it; a frame
/// written by host 2's raw port, spoofing host 1's addresses, reaches host
/// 0's UDP socket as if host 1 had sent it.
#[test]
fn tap_sees_and_raw_port_spoofs() {
    let seg = Segment::new(3, 1500).unwrap();
    let (h0, h1, h2) = (&seg.hosts[0], &seg.hosts[1], &seg.hosts[2]);
    for h in [h1, h2] {
        // Kernel sockets' frames must carry complete checksums to be replayed.
        h.command("ethtool")
            .args(["-K", h.ifname(), "tx", "off"])
            .output()
            .unwrap();
    }
    let rx = h0.run(|| UdpSocket::bind((h0.ipv4(), 7100)).unwrap());
    rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let tap = seg.tap(0).unwrap();
    let tx = h1.run(|| UdpSocket::bind((h1.ipv4(), 7101)).unwrap());
    tx.send_to(b"genuine", (h0.ipv4(), 7100)).unwrap();
    let mut buf = [0u8; 64];
    let (n, from) = rx.recv_from(&mut buf).unwrap();
    assert_eq!(
        (&buf[..n], from),
        (&b"genuine"[..], SocketAddr::from((h1.ipv4(), 7101)))
    );
    // The tap saw the frame (after any ARP).
    let mut frame = vec![0u8; 2048];
    let captured = loop {
        let n = tap
            .recv(&mut frame, Duration::from_secs(2))
            .expect("tap saw nothing");
        if frame[..n].ends_with(b"genuine") {
            break frame[..n].to_vec();
        }
    };
    // Replayed from host 2: host 0 cannot tell.
    h2.raw_port().unwrap().send(&captured);
    let (n, from) = rx.recv_from(&mut buf).unwrap();
    assert_eq!(
        (&buf[..n], from),
        (&b"genuine"[..], SocketAddr::from((h1.ipv4(), 7101)))
    );
}

#[test]
fn segment_hosts_reach_each_other_and_vanish_on_drop() {
    let seg = Segment::new(4, 9000).unwrap();
    let names = seg.netns_names();
    for h in &seg.hosts[1..] {
        assert_pings(&seg.hosts[0], h);
        assert_eq!(h.mtu(), 9000);
    }
    drop(seg);
    let left = our_netns();
    assert!(names.iter().all(|n| !left.contains(n)), "{left:?}");
}

/// Hosts behind a router are in different subnets, reach each other over
/// both families through it (a route lookup names the router as the
/// gateway, and the ICMP echo's TTL arrives one less), and the topology
/// vanishes on drop — also when the creating closure panics.
#[test]
fn routed_hosts_reach_each_other_through_the_router_and_vanish_on_drop() {
    let net = Routed::new(3, 1500).unwrap();
    let names = net.netns_names();
    let (h0, h2) = (&net.hosts[0], &net.hosts[2]);
    assert_ne!(h0.ipv4().octets()[3] & 0xc0, h2.ipv4().octets()[3] & 0xc0);
    for h in &net.hosts[1..] {
        assert_pings(h, &net.hosts[0]);
        assert_pings6(h, h0);
    }
    let route = h0.ip(&["route", "get", &h2.ipv4().to_string()]).unwrap();
    let gw = net.gateway_of(0, false).unwrap().to_string();
    assert!(route.contains(&format!("via {gw} ")), "{route}");
    let ttl = h0
        .command("ping")
        .args(["-c", "1", "-W", "2", &h2.ipv4().to_string()])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&ttl.stdout);
    assert!(out.contains("ttl=63"), "one router on the way: {out}");
    drop(net);
    let left = our_netns();
    assert!(names.iter().all(|n| !left.contains(n)), "{left:?}");

    let mut inner = Vec::new();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let net = Routed::new(2, 1500).unwrap();
        inner = net.netns_names();
        panic!("test failure inside");
    }));
    assert!(r.is_err());
    let left = our_netns();
    assert!(
        !inner.is_empty() && inner.iter().all(|n| !left.contains(n)),
        "{left:?}"
    );
}

/// Datagrams the interfaces of namespace `ns` received (its veths).
fn received_in(ns: &str) -> u64 {
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", ns, "sh", "-c"])
        .arg("cat /sys/class/net/ox*/statistics/rx_packets")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim().parse::<u64>().ok())
        .sum()
}

/// Hosts under different leaves reach each other over both families
/// through leaf, spine, leaf (TTL 61 on arrival); 64 UDP flows from one
/// to the other (64 source ports) cross both spines (ECMP, hashed on
/// ports); the fabric vanishes on drop.
#[test]
fn leaf_spine_hosts_reach_each_other_over_both_spines() {
    let net = LeafSpine::new(2, 1500).unwrap();
    let names = net.netns_names();
    assert_eq!(net.hosts.len(), 4);
    let (h0, h3) = (&net.hosts[0], &net.hosts[3]);
    assert_eq!((net.leaf_of(0), net.leaf_of(3)), (0, 1));
    assert_pings(h0, &net.hosts[1]);
    let out = h0
        .command("ping")
        .args(["-c", "1", "-W", "2", &h3.ipv4().to_string()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("ttl=61"), "leaf, spine, leaf: {text}");
    assert_pings6(h3, h0);

    let spines = [net.spine_netns(0).unwrap(), net.spine_netns(1).unwrap()];
    let before = spines.map(received_in);
    let n = 64u64;
    udp_flows(h0, h3, n);
    let after = spines.map(received_in);
    let per_spine = [after[0] - before[0], after[1] - before[1]];
    assert!(
        per_spine.iter().all(|&c| c > 0) && per_spine.iter().sum::<u64>() >= n,
        "both spines carry flows: {per_spine:?}"
    );
    drop(net);
    let left = our_netns();
    assert!(names.iter().all(|n| !left.contains(n)), "{left:?}");
}

/// Counts UDP datagrams `n` sent a → b arrive as, with the impairment.
///
/// The receiver binds a port the kernel picks, a new one per call: a fixed
/// port, closed by one call and bound again by the next, can still be held
/// by a child that a test running beside this one is spawning (a child
/// holds a copy of every descriptor from fork until its exec closes the
/// close-on-exec ones), and the second bind fails with `AddrInUse`.
fn udp_through(pair: &ImpairedPair, n: usize) -> (usize, Duration) {
    let rx = pair.b.run(|| UdpSocket::bind((pair.b.ipv4(), 0)).unwrap());
    rx.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    // Room for what arrives while this (shared) machine runs something else.
    let bytes: libc::c_int = 8 << 20;
    // SAFETY: setsockopt with an int option value on our socket.
    unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&rx),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            (&bytes as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    let tx = pair.a.run(|| UdpSocket::bind((pair.a.ipv4(), 0)).unwrap());
    let to = rx.local_addr().unwrap();
    let start = std::time::Instant::now();
    let reader = std::thread::spawn(move || {
        let (mut got, mut first) = (0, None);
        let mut buf = [0u8; 64];
        while rx.recv_from(&mut buf).is_ok() {
            first.get_or_insert_with(|| start.elapsed());
            got += 1;
        }
        (got, first.unwrap_or_default())
    });
    for i in 0..n {
        tx.send_to(&(i as u32).to_le_bytes(), to).unwrap();
        if i % 16 == 15 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    reader.join().unwrap()
}

#[test]
fn forwarder_impairs_udp_at_the_set_rates() {
    let pair = ImpairedPair::new(1500, Impairment::default()).unwrap();
    let names = pair.netns_names();
    assert_pings(&pair.a, &pair.b);
    let (clean, _) = udp_through(&pair, 2000);
    assert_eq!(clean, 2000);
    pair.set(Impairment {
        loss: 0.2,
        duplicate: 0.1,
        corrupt: 0.0,
        reorder: 0.0,
        delay: Duration::from_millis(20),
        seed: 7,
    });
    let (got, first) = udp_through(&pair, 2000);
    let c = pair.counts();
    assert!((320..=480).contains(&c.dropped), "{c:?}");
    assert!((100..=240).contains(&c.duplicated), "{c:?}");
    assert_eq!(got as u64, 2000 - c.dropped + c.duplicated, "{c:?}");
    assert!(first >= Duration::from_millis(15), "not delayed: {first:?}");
    drop(pair);
    let left = our_netns();
    assert!(names.iter().all(|n| !left.contains(n)), "{left:?}");
}

/// Bytes per second one TCP connection from `from` to `to` moves in
/// `secs` seconds (counted at the receiver, after a quarter second of
/// warm-up), and the peer's address it used.
fn tcp_goodput(from: &Host, to: &Host, secs: f64) -> f64 {
    use std::io::{Read, Write};
    use std::time::Instant;
    let listener = to.run(|| std::net::TcpListener::bind((to.ipv4(), 0)).unwrap());
    let addr = listener.local_addr().unwrap();
    let reader = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut buf = vec![0u8; 1 << 16];
        let start = Instant::now();
        let warm = Duration::from_millis(250);
        let (mut counted, mut since) = (0u64, None);
        loop {
            let n = conn.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            if start.elapsed() >= warm {
                since.get_or_insert_with(Instant::now);
                counted += n as u64;
            }
        }
        counted as f64 / since.unwrap().elapsed().as_secs_f64()
    });
    let mut conn = from.run(|| std::net::TcpStream::connect(addr).unwrap());
    let chunk = vec![7u8; 1 << 16];
    let start = Instant::now();
    while start.elapsed().as_secs_f64() < secs + 0.25 {
        conn.write_all(&chunk).unwrap();
    }
    drop(conn);
    reader.join().unwrap()
}

/// With every leaf–spine link shaped to 20 Mbit/s (slow enough for an
/// emulated VM too), one TCP connection across a four-spine fabric (one
/// 5-tuple: one spine) is held to that rate (at most 20 % over, the
/// bucket's burst) yet keeps most of it (at least 60 %: the 50 ms queue is
/// several times the path's bandwidth-delay product, so TCP's sawtooth
/// never drains the link; under an emulated CPU a 5 ms queue let one
/// connection fall to 76 %), and its packets cross one uplink of the leaf.
/// A kernel without the token-bucket qdisc skips it.
#[test]
fn leaf_spine_shaped_links_hold_their_rate() {
    let net = LeafSpine::with_spines(1, 4, 1500).unwrap();
    assert_eq!(net.spines(), 4);
    let rate = 20_000_000u64;
    if let Err(e) = net.shape(rate, Duration::from_millis(50)) {
        if e.to_string().contains("qdisc kind is unknown") {
            skip(format!(
                "this kernel has no token-bucket qdisc (sch_tbf): {e}"
            ));
            return;
        }
        panic!("shaping the fabric's links: {e}");
    }
    let before = net.uplink_tx_packets(0).unwrap();
    let bytes_per_s = tcp_goodput(&net.hosts[0], &net.hosts[1], 2.0);
    let after = net.uplink_tx_packets(0).unwrap();
    let ratio = bytes_per_s * 8.0 / rate as f64;
    println!(
        "TCP at {:.1} Mbit/s: {ratio:.3} of the shaped rate",
        bytes_per_s * 8e-6
    );
    assert!(
        (0.6..=1.2).contains(&ratio),
        "{ratio:.3} of the shaped rate"
    );
    let sent: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    let most = *sent.iter().max().unwrap();
    assert!(
        most * 10 >= sent.iter().sum::<u64>() * 9,
        "one spine: {sent:?}"
    );
}

/// A spine taken down is routed around: every one of 64 UDP flows
/// (64 source ports) arrives, none over it, both families; back up, the
/// flows spread over both spines again.
#[test]
fn leaf_spine_routes_around_a_spine_down() {
    let net = LeafSpine::new(1, 1500).unwrap();
    let (h0, h1) = (&net.hosts[0], &net.hosts[1]);
    let flows = |n: u64| {
        let before = net.uplink_tx_packets(0).unwrap();
        udp_flows(h0, h1, n);
        let after = net.uplink_tx_packets(0).unwrap();
        [after[0] - before[0], after[1] - before[1]]
    };
    let ping6 = || assert_pings6(h1, h0);
    net.spine_down(0).unwrap();
    let per_spine = flows(64);
    assert!(per_spine[0] == 0 && per_spine[1] >= 64, "{per_spine:?}");
    assert_pings(h1, h0);
    ping6();
    net.spine_up(0).unwrap();
    let per_spine = flows(64);
    assert!(per_spine.iter().all(|&c| c > 0), "{per_spine:?}");
    ping6();
    net.spine_down(1).unwrap();
    let per_spine = flows(64);
    assert!(per_spine[1] == 0 && per_spine[0] >= 64, "{per_spine:?}");
    ping6();
}
