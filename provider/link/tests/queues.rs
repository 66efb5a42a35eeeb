//! Several receive queues (needs root): veth ends with four queues each.
//!
//! With native XDP a frame reaches the receiving end on the queue numbered
//! as the transmit queue it left from, and an AF_XDP socket's copy-mode
//! transmit uses its own queue: four sending links on `b`, bound to queues
//! 0..3, put their datagrams on `a`'s queues 0..3. On `a` one link is bound
//! to queue 1 and a kernel UDP socket holds the same port. The kernel would
//! drop a redirect into the link from any other queue; the steering program
//! passes those frames to the kernel instead (`other_queue`), so every
//! datagram arrives — a quarter through the link, the rest through the UDP
//! socket — and the veth counts no drop.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeSet;
use std::net::{IpAddr, UdpSocket};
use std::time::{Duration, Instant};

use ofi_xdp_bpf::{AttachMode, Steering};
use ofi_xdp_link::{Link, LinkAddr, LinkConfig, LinkError};
use ofi_xdp_testhosts::{Host, HostPair};

const QUEUES: u32 = 4;
const PORT: u16 = 47_301;
const PER_QUEUE: u32 = 200;
const WAIT: Duration = Duration::from_secs(5);

fn open(host: &Host, port: u16, queue: u32) -> Link {
    let mut cfg = LinkConfig::new(host.ifname(), port);
    cfg.ip = Some(IpAddr::V4(host.ipv4()));
    cfg.queue_id = queue;
    cfg.frame_count = 1024;
    cfg.rx_frames = 512;
    cfg.ring_size = 512;
    host.run(move || Link::open(&cfg)).unwrap()
}

/// `ethtool -S` of `host`'s veth: per receive queue, (XDP packets, drops).
fn veth_queue_stats(host: &Host) -> Vec<(u64, u64)> {
    host.queue_stats()
        .unwrap()
        .iter()
        .map(|q| (q.xdp_packets, q.drops))
        .collect()
}

fn every_queue_reaches_the_port(mode: AttachMode) {
    let pair = HostPair::with_queues(1500, QUEUES).unwrap();
    let (a, b) = (&pair.a, &pair.b);
    let mut rx = open(a, PORT, 1);
    let ifname = a.ifname().to_owned();
    let mut steering = a.run(move || Steering::attach(&ifname, mode)).unwrap();
    steering.steer_port(PORT, 0).unwrap();
    steering.set_socket(0, rx.fd(), 1).unwrap();
    let ip = a.ipv4();
    let udp = a.run(move || UdpSocket::bind((ip, PORT))).unwrap();
    udp.set_nonblocking(true).unwrap();
    let before = steering.counters().unwrap();

    let to = LinkAddr {
        mac: a.mac(),
        ip: IpAddr::V4(a.ipv4()),
        port: PORT,
    };
    let mut senders: Vec<Link> = (0..QUEUES)
        .map(|q| open(b, PORT + 1 + q as u16, q))
        .collect();
    let total = (PER_QUEUE * QUEUES) as usize;
    let mut via_link = BTreeSet::new();
    let mut via_kernel = BTreeSet::new();
    let mut buf = [0u8; 64];
    let mut drain =
        |rx: &mut Link, link: &mut BTreeSet<Vec<u8>>, kernel: &mut BTreeSet<Vec<u8>>| {
            let mut n = rx.recv(64, |d| {
                link.insert(d.payload.to_vec());
            });
            while let Ok(len) = udp.recv(&mut buf) {
                kernel.insert(buf[..len].to_vec());
                n += 1;
            }
            n
        };
    for i in 0..PER_QUEUE {
        for (q, tx) in senders.iter_mut().enumerate() {
            let payload = [(q as u32).to_be_bytes(), i.to_be_bytes()].concat();
            loop {
                match tx.send_copy(&to, &payload) {
                    Ok(()) => break,
                    Err(LinkError::NoTxFrame | LinkError::TxRingFull) => {
                        tx.flush().unwrap();
                        tx.reap_completions();
                    }
                    Err(e) => panic!("send: {e}"),
                }
            }
            tx.flush().unwrap();
            tx.reap_completions();
        }
        // Receive as we go (one round of four datagrams at a time), so
        // neither the link's rings nor the socket's buffer is ever the
        // reason for a loss.
        let deadline = Instant::now() + WAIT;
        let want = 4 * (i as usize + 1);
        while via_link.len() + via_kernel.len() < want && Instant::now() < deadline {
            drain(&mut rx, &mut via_link, &mut via_kernel);
        }
    }
    let mut last = Instant::now();
    while via_link.len() + via_kernel.len() < total && last.elapsed() < WAIT {
        if drain(&mut rx, &mut via_link, &mut via_kernel) > 0 {
            last = Instant::now();
        }
    }
    let c = steering.counters().unwrap().since(&before);
    let by_queue = steering.queue_counts().unwrap();
    let veth = veth_queue_stats(a);
    let report = format!(
        "{mode}: link {} kernel {} of {total}; steering {c}; by queue {by_queue:?}; veth \
         (xdp packets, drops) per queue {veth:?}",
        via_link.len(),
        via_kernel.len()
    );
    println!("{report}");
    assert_eq!(via_link.len() + via_kernel.len(), total, "{report}");
    assert!(via_link.is_disjoint(&via_kernel), "{report}");
    // Counted once each: steered into the socket or passed for another queue.
    assert_eq!(c.steered as usize, via_link.len(), "{report}");
    assert_eq!(c.other_queue as usize, via_kernel.len(), "{report}");
    assert_eq!((c.no_socket, c.fault_dropped), (0, 0), "{report}");
    if mode == AttachMode::Native {
        // Native veth: frames land on the sender's transmit queue, so what
        // the link received came from the sender on queue 1.
        assert!(
            via_link.iter().all(|p| p[..4] == 1u32.to_be_bytes()),
            "{report}"
        );
        assert_eq!(via_link.len(), PER_QUEUE as usize, "{report}");
        assert_eq!(
            by_queue,
            vec![u64::from(PER_QUEUE); QUEUES as usize],
            "{report}"
        );
        for (q, (packets, drops)) in veth.iter().enumerate() {
            assert!(*packets >= u64::from(PER_QUEUE), "queue {q}: {report}");
            assert_eq!(*drops, 0, "queue {q}: {report}");
        }
    }
}

#[test]
fn every_queue_reaches_the_port_native() {
    every_queue_reaches_the_port(AttachMode::Native);
}

/// Generic XDP sees the queue the stack recorded (on veth the peer's
/// transmit queue read as a recorded receive queue, so off by one: queues
/// 0 and 1 both arrive as 0); whatever it is, the kernel's check and the
/// program's agree, so nothing is lost either.
#[test]
fn every_queue_reaches_the_port_generic() {
    every_queue_reaches_the_port(AttachMode::Generic);
}

/// Why the program checks the queue: told that the socket sits on queue 2
/// (it is bound to 1), the program redirects queue 2's frames into it and
/// the kernel drops every one (`xsk_rcv_check`: the frame's queue must be
/// the socket's) — the link and the kernel socket see nothing, and only
/// veth's drop counter knows.
#[test]
fn a_redirect_into_a_socket_of_another_queue_is_dropped() {
    let pair = HostPair::with_queues(1500, QUEUES).unwrap();
    let (a, b) = (&pair.a, &pair.b);
    let mut rx = open(a, PORT, 1);
    let ifname = a.ifname().to_owned();
    let mut steering = a
        .run(move || Steering::attach(&ifname, AttachMode::Native))
        .unwrap();
    steering.steer_port(PORT, 0).unwrap();
    steering.set_socket(0, rx.fd(), 2).unwrap(); // the wrong queue
    let ip = a.ipv4();
    let udp = a.run(move || UdpSocket::bind((ip, PORT))).unwrap();
    udp.set_nonblocking(true).unwrap();
    let to = LinkAddr {
        mac: a.mac(),
        ip: IpAddr::V4(a.ipv4()),
        port: PORT,
    };
    let mut tx = open(b, PORT + 2, 2);
    let before_drops: u64 = veth_queue_stats(a).iter().map(|(_, d)| d).sum();
    for i in 0u32..50 {
        tx.send_copy(&to, &i.to_be_bytes()).unwrap();
        tx.flush().unwrap();
        tx.reap_completions();
    }
    let deadline = Instant::now() + Duration::from_millis(500);
    let (mut link_got, mut kernel_got) = (0, 0);
    let mut buf = [0u8; 16];
    while Instant::now() < deadline {
        link_got += rx.recv(64, |_| {});
        while udp.recv(&mut buf).is_ok() {
            kernel_got += 1;
        }
    }
    let c = steering.counters().unwrap();
    let drops: u64 = veth_queue_stats(a).iter().map(|(_, d)| d).sum::<u64>() - before_drops;
    let report = format!("steering {c}; link {link_got}, kernel {kernel_got}, veth drops {drops}");
    assert_eq!(c.steered, 50, "{report}");
    assert_eq!((link_got, kernel_got), (0, 0), "{report}");
    assert_eq!(drops, 50, "{report}");
}
