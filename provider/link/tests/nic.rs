//! The link on two real NICs with several queues (needs root, and
//! `OFI_XDP_TEST_NICS="eth0 eth1"`: the VM suite's `--nic virtio` runs set
//! it; without it every test here says it was skipped and passes).
//!
//! Host `a` has the steering program attached natively, its link bound to
//! queue 1 in zero-copy mode, and a kernel UDP socket on the same port. The
//! NICs spread flows over the queues by their hash (RSS on a real NIC; in the VM
//! suite the host's multi-queue tap, which picks a queue per flow), so:
//! - datagrams from many source ports arrive on every queue, and all are
//!   received: those on queue 1 by the link, straight from the driver into
//!   the UMEM, the others by the kernel socket (`other_queue`);
//! - a source port whose flow lands on queue 1 carries every payload size
//!   through zero-copy receive (and zero-copy transmit on `b`), intact.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeSet;
use std::net::{IpAddr, UdpSocket};
use std::time::{Duration, Instant};

use ofi_xdp_bpf::{AttachMode, Steering};
use ofi_xdp_link::{BindMode, BindPreference, Link, LinkAddr, LinkConfig, LinkError};
use ofi_xdp_testhosts::skip::skip;
use ofi_xdp_testhosts::{Host, HostPair, nics};

const PORT: u16 = 47_401;
const QUEUE: u32 = 1;
const WAIT: Duration = Duration::from_secs(10);

/// The NIC pair, or `None` (and a line saying so) without `OFI_XDP_TEST_NICS`.
fn nic_pair(mtu: u32) -> Option<HostPair> {
    if nics::from_env().is_none() {
        skip(format!(
            "no NICs ({} unset); the VM suite's --nic runs set it",
            nics::NICS_ENV
        ));
        return None;
    }
    let pair = HostPair::with_mtu(mtu).unwrap();
    assert!(pair.on_nics());
    Some(pair)
}

fn open(host: &Host, port: u16, queue: u32, f: impl FnOnce(&mut LinkConfig)) -> Link {
    let mut cfg = LinkConfig::new(host.ifname(), port);
    cfg.ip = Some(IpAddr::V4(host.ipv4()));
    cfg.queue_id = queue;
    cfg.frame_size = 4096;
    cfg.frame_count = 1024;
    cfg.rx_frames = 512;
    cfg.ring_size = 256;
    f(&mut cfg);
    host.run(move || Link::open(&cfg)).unwrap()
}

/// `a`'s receiving side: the zero-copy link on queue 1 behind a natively
/// attached program, and a kernel socket on the same port.
struct Receiver {
    link: Link,
    steering: Steering,
    udp: UdpSocket,
}

fn receiver(a: &Host) -> Receiver {
    let ifname = a.ifname().to_owned();
    let mut steering = a
        .run(move || Steering::attach(&ifname, AttachMode::Native))
        .unwrap();
    let link = open(a, PORT, QUEUE, |c| c.bind = BindPreference::ZeroCopy);
    println!(
        "FIGURE zero-copy bind: {} queue {QUEUE}: {} mode, XDP {} mode, max payload {}",
        a.ifname(),
        link.bind_mode(),
        steering.mode(),
        link.max_payload()
    );
    assert_eq!(link.bind_mode(), BindMode::ZeroCopy);
    steering.steer_port(PORT, 0).unwrap();
    steering.set_socket(0, link.fd(), QUEUE).unwrap();
    Receiver {
        link,
        steering,
        udp: kernel_socket(a),
    }
}

/// The kernel UDP socket on `a`'s port, with a receive buffer for a burst
/// from every sender at once (as the provider sizes its own, SO_RCVBUFFORCE:
/// the default ~208 KB holds only some 60 datagrams of virtio_net's
/// truesize, and the rest would be dropped by the socket, not the queues).
fn kernel_socket(a: &Host) -> UdpSocket {
    let ip = a.ipv4();
    let udp = a.run(move || UdpSocket::bind((ip, PORT))).unwrap();
    udp.set_nonblocking(true).unwrap();
    let size: libc::c_int = 8 << 20;
    // SAFETY: setsockopt on a socket we own, reading one c_int.
    let rc = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&udp),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            (&raw const size).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
    udp
}

impl Receiver {
    /// Takes what arrived on either path within `wait`: (through the link,
    /// through the kernel socket), each datagram's payload.
    fn collect(&mut self, want: usize, wait: Duration) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
        let (mut link, mut kernel) = (Vec::new(), Vec::new());
        let mut buf = vec![0u8; 65536];
        let deadline = Instant::now() + wait;
        while link.len() + kernel.len() < want && Instant::now() < deadline {
            self.link.recv(64, |d| link.push(d.pieces.concat()));
            while let Ok(n) = self.udp.recv(&mut buf) {
                kernel.push(buf[..n].to_vec());
            }
        }
        (link, kernel)
    }
}

/// Datagrams from 64 source ports (kernel sockets on `b`) reach `a` on
/// every queue the NIC picks for them, and every one is received.
#[test]
fn flows_on_every_queue_are_received() {
    let Some(pair) = nic_pair(3000) else { return };
    let mut rx = receiver(&pair.a);
    let before = rx.steering.counters().unwrap();
    let to = (pair.a.ipv4(), PORT);
    let bip = pair.b.ipv4();
    let senders: Vec<UdpSocket> = pair.b.run(move || {
        (0..64)
            .map(|_| UdpSocket::bind((bip, 0)).unwrap())
            .collect()
    });
    let mut sent = BTreeSet::new();
    for round in 0u32..4 {
        for (k, s) in senders.iter().enumerate() {
            let payload = [(k as u32).to_be_bytes(), round.to_be_bytes()].concat();
            s.send_to(&payload, to).unwrap();
            sent.insert(payload);
        }
    }
    let (link, kernel) = rx.collect(sent.len(), WAIT);
    let c = rx.steering.counters().unwrap().since(&before);
    let by_queue = rx.steering.queue_counts().unwrap();
    let report = format!(
        "link {} kernel {} of {}; steering {c}; frames by RX queue {by_queue:?}",
        link.len(),
        kernel.len(),
        sent.len()
    );
    println!("FIGURE {report}");
    let got: BTreeSet<Vec<u8>> = link.iter().chain(&kernel).cloned().collect();
    assert_eq!(got, sent, "{report}");
    assert_eq!(c.steered as usize, link.len(), "{report}");
    assert_eq!(c.other_queue as usize, kernel.len(), "{report}");
    assert!(
        by_queue.iter().filter(|n| **n > 0).count() >= 2,
        "no spread over the queues: {report}"
    );
    assert!(
        !link.is_empty(),
        "no flow hashed to queue {QUEUE}: {report}"
    );
}

/// A source port whose flow the NIC puts on queue 1: found by sending a probe
/// from kernel sockets on `b` until one reaches the link (the others reach
/// the kernel socket).
fn port_to_queue_1(pair: &HostPair, rx: &mut Receiver) -> u16 {
    let to = (pair.a.ipv4(), PORT);
    let bip = pair.b.ipv4();
    let mut lost = 0;
    for port in 47_500u16..47_628 {
        let s = pair.b.run(move || UdpSocket::bind((bip, port)));
        let Ok(s) = s else { continue };
        s.send_to(b"probe", to).unwrap();
        let (link, kernel) = rx.collect(1, Duration::from_secs(2));
        if !link.is_empty() {
            return port;
        }
        lost += usize::from(kernel.is_empty());
    }
    panic!("no source port in 47500..47628 hashes to queue {QUEUE} ({lost} probes lost)");
}

/// Every payload size, zero-copy transmit on `b` and zero-copy receive on
/// `a` (the flow on queue 1), each datagram intact.
#[test]
fn every_size_through_zero_copy() {
    let Some(pair) = nic_pair(3000) else { return };
    let mut rx = receiver(&pair.a);
    let src_port = port_to_queue_1(&pair, &mut rx);
    let mut tx = open(&pair.b, src_port, 0, |c| c.bind = BindPreference::ZeroCopy);
    assert_eq!(tx.bind_mode(), BindMode::ZeroCopy);
    let to = LinkAddr {
        mac: pair.a.mac(),
        ip: IpAddr::V4(pair.a.ipv4()),
        port: PORT,
    };
    let max = tx.max_payload().min(rx.link.max_payload());
    let before = rx.steering.counters().unwrap();
    let mut received = 0usize;
    for chunk in (0..=max).collect::<Vec<_>>().chunks(32) {
        let payloads: Vec<Vec<u8>> = chunk
            .iter()
            .map(|&n| (0..n).map(|i| (i * 31 + n) as u8).collect())
            .collect();
        for p in &payloads {
            loop {
                match tx.send_copy(&to, p) {
                    Ok(()) => break,
                    Err(LinkError::NoTxFrame | LinkError::TxRingFull) => {
                        tx.flush().unwrap();
                        tx.reap_completions();
                    }
                    Err(e) => panic!("send: {e}"),
                }
            }
        }
        tx.flush().unwrap();
        let (link, kernel) = rx.collect(payloads.len(), WAIT);
        tx.reap_completions();
        assert!(kernel.is_empty(), "the flow left queue {QUEUE}");
        let got: BTreeSet<Vec<u8>> = link.into_iter().collect();
        let want: BTreeSet<Vec<u8>> = payloads.into_iter().collect();
        assert_eq!(got, want, "sizes {}..={}", chunk[0], chunk[chunk.len() - 1]);
        received += want.len();
    }
    let c = rx.steering.counters().unwrap().since(&before);
    let stats = rx.link.stats().unwrap();
    println!(
        "FIGURE every size 0..={max} through zero-copy: {received} datagrams; steering {c}; \
         receiver {stats:?}"
    );
    assert_eq!(c.steered as usize, received);
    assert_eq!(stats.kernel.rx_dropped, 0);
}

/// Jumbo frames (MTU 9000) on the NICs: AF_XDP multi-buffer. Zero-copy
/// multi-buffer needs the driver to take `XDP_USE_SG` with `XDP_ZEROCOPY`;
/// where it does not, the bind says which mode it got and the test runs the
/// jumbo datagrams in that mode (generic XDP: a single-buffer program cannot
/// be attached natively at this MTU).
#[test]
fn jumbo_frames_through_multi_buffer() {
    let Some(pair) = nic_pair(9000) else { return };
    let a = &pair.a;
    let ifname = a.ifname().to_owned();
    let mut steering = a
        .run(move || Steering::attach_any(&ifname, AttachMode::Native))
        .unwrap();
    let multi = |c: &mut LinkConfig| c.multi_buffer = true;
    let zc = a.run(|| {
        let mut cfg = LinkConfig::new(a.ifname(), PORT);
        cfg.ip = Some(IpAddr::V4(a.ipv4()));
        cfg.queue_id = QUEUE;
        cfg.frame_size = 4096;
        cfg.multi_buffer = true;
        cfg.bind = BindPreference::ZeroCopy;
        Link::open(&cfg).map(|l| (l.bind_mode(), l.max_payload()))
    });
    println!(
        "FIGURE jumbo, zero-copy asked: {zc:?} (XDP {} mode)",
        steering.mode()
    );
    let rx_link = open(a, PORT, QUEUE, multi);
    if rx_link.max_payload() < 8000 {
        skip(format!(
            "this kernel binds no multi-buffer AF_XDP socket (max payload {})",
            rx_link.max_payload()
        ));
        return;
    }
    steering.steer_port(PORT, 0).unwrap();
    steering.set_socket(0, rx_link.fd(), QUEUE).unwrap();
    let mut rx = Receiver {
        link: rx_link,
        steering,
        udp: kernel_socket(a),
    };
    let src_port = port_to_queue_1(&pair, &mut rx);
    let mut tx = open(&pair.b, src_port, 0, multi);
    let to = LinkAddr {
        mac: a.mac(),
        ip: IpAddr::V4(a.ipv4()),
        port: PORT,
    };
    let max = tx.max_payload().min(rx.link.max_payload());
    let sizes: Vec<usize> = (0..=max).step_by(97).chain([max]).collect();
    for n in &sizes {
        let p: Vec<u8> = (0..*n).map(|i| (i * 13 + n) as u8).collect();
        tx.send_copy(&to, &p).unwrap();
        tx.flush().unwrap();
        let (link, kernel) = rx.collect(1, WAIT);
        tx.reap_completions();
        let got: Vec<Vec<u8>> = link.into_iter().chain(kernel).collect();
        assert_eq!(got, vec![p], "size {n}");
    }
    println!(
        "FIGURE jumbo: {} sizes up to {max} intact, receiver bound in {} mode",
        sizes.len(),
        rx.link.bind_mode()
    );
}
