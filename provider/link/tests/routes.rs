//! Routes: a peer behind a router is addressed to the router's MAC, as the
//! kernel's route names it, and its datagrams arrive through the router
//! (needs root).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::net::IpAddr;
use std::time::{Duration, Instant};

use ofi_xdp_bpf::{AttachMode, Steering};
use ofi_xdp_link::{Link, LinkConfig, LinkError, route_get};
use ofi_xdp_testhosts::{Host, HostPair, Routed};

const PORT_A: u16 = 47_201;
const PORT_B: u16 = 47_202;
const WAIT: Duration = Duration::from_secs(5);

fn open_link(host: &Host, port: u16, ip: IpAddr) -> Link {
    let mut cfg = LinkConfig::new(host.ifname(), port);
    cfg.ip = Some(ip);
    cfg.frame_count = 256;
    cfg.rx_frames = 128;
    cfg.ring_size = 128;
    host.run(move || Link::open(&cfg)).unwrap()
}

/// `f` on `link` inside `h`'s namespace (route and neighbour lookups are
/// the calling thread's namespace's).
fn with<R: Send>(h: &Host, link: &mut Link, f: impl FnOnce(&mut Link) -> R + Send) -> R {
    h.run(move || f(link))
}

/// The router's MAC on host `h`'s subnet: `testhosts` gives a veth's far
/// end its host's MAC with the top bit of the last byte set.
fn router_mac(h: &Host) -> [u8; 6] {
    let mut m = h.mac();
    m[5] |= 0x80;
    m
}

fn through_the_router(v6: bool) {
    let net = Routed::new(2, 1500).unwrap();
    let (a, b) = (&net.hosts[0], &net.hosts[1]);
    let ip = |h: &Host| -> IpAddr { if v6 { h.ipv6().into() } else { h.ipv4().into() } };
    let (ip_a, ip_b) = (ip(a), ip(b));
    let gw = net.gateway_of(0, v6).unwrap();
    let route = a.run(move || route_get(ip_b)).unwrap();
    assert_eq!(route.gateway, Some(gw));
    assert_eq!(route.next_hop(ip_b), gw);

    let mut rx = open_link(b, PORT_B, ip_b);
    let ifname = b.ifname().to_string();
    let mut steering = b
        .run(move || Steering::attach(&ifname, AttachMode::Generic))
        .unwrap();
    steering.steer_port(PORT_B, 0).unwrap();
    steering.set_socket(0, rx.fd(), 0).unwrap();

    let mut tx = open_link(a, PORT_A, ip_a);
    let to = with(a, &mut tx, |l| l.resolve_peer(ip_b, PORT_B, WAIT)).unwrap();
    assert_eq!(to.mac, router_mac(a), "frames go to the router");
    assert_eq!(to.ip, ip_b, "the IP header names the peer");
    assert_eq!(with(a, &mut tx, |l| l.next_hop(ip_b)).unwrap(), gw);

    let n = 100;
    for i in 0..n {
        loop {
            match tx.send_copy(&to, &[i as u8; 100]) {
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
    let mut got = Vec::new();
    let deadline = Instant::now() + WAIT;
    while got.len() < n && Instant::now() < deadline {
        rx.recv(64, |d| got.push((d.src, d.payload.to_vec())));
        rx.wait_readable(Duration::from_millis(5)).unwrap();
        tx.reap_completions();
    }
    assert_eq!(got.len(), n, "every datagram arrives through the router");
    for (src, _) in &got {
        assert_eq!((src.ip, src.port), (ip_a, PORT_A));
        assert_eq!(src.mac, router_mac(b), "the router forwarded it");
    }
    assert_eq!(rx.stats().unwrap().rx_bad_checksum, 0);
}

#[test]
fn peer_behind_a_router_ipv4() {
    through_the_router(false);
}

#[test]
fn peer_behind_a_router_ipv6() {
    through_the_router(true);
}

/// Without a route (a pair has none beyond its subnet) the next hop is an
/// error naming the kernel's answer, at once.
#[test]
fn no_route_is_an_error() {
    let pair = HostPair::new().unwrap();
    let a = &pair.a;
    let mut link = open_link(a, PORT_A, a.ipv4().into());
    let far: IpAddr = "198.51.100.7".parse().unwrap();
    let e = a.run(|| route_get(far)).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENETUNREACH), "{e}");
    let started = Instant::now();
    let e = with(a, &mut link, |l| l.resolve_peer(far, PORT_B, WAIT)).unwrap_err();
    assert!(matches!(e, LinkError::Route(_)), "{e}");
    assert!(started.elapsed() < Duration::from_secs(1));
    let b_ip = IpAddr::from(pair.b.ipv4());
    let on_link = with(a, &mut link, |l| l.next_hop(b_ip)).unwrap();
    assert_eq!(on_link, IpAddr::from(pair.b.ipv4()));
}
