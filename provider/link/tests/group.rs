//! Sockets sharing one queue's UMEM (`XDP_SHARED_UMEM`) on a veth pair
//! (needs root): members of a group in host `b` each receive their own
//! port's datagrams and send theirs, TX completions drained by one member
//! reach the frame's owner, and a member that leaves makes room for a new
//! one. (Members here live in one process; the provider's tests run them
//! in several.)

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use ofi_xdp_bpf::{AttachMode, Steering};
use ofi_xdp_link::group::Group;
use ofi_xdp_link::{GroupJoin, Link, LinkAddr, LinkConfig, LinkError};
use ofi_xdp_testhosts::skip::skip;
use ofi_xdp_testhosts::{Host, HostPair};

const PORT_A: u16 = 47_201;
const PORTS_B: [u16; 3] = [47_202, 47_203, 47_204];
const WAIT: Duration = Duration::from_secs(5);

/// Whether this kernel lets members map the shared rings (Linux 6.4+);
/// the tests skip themselves, saying so, on older ones.
fn kernel_shares() -> bool {
    let ok = ofi_xdp_link::group::kernel_lets_members_join();
    if !ok {
        skip("this kernel cannot share a queue's rings between sockets (Linux 6.4+)");
    }
    ok
}

fn group_file(pair: &HostPair) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ofi-xdp-link-group-{}", pair.b.netns()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("queue0")
}

fn config(host: &Host, port: u16, ip: IpAddr) -> LinkConfig {
    let mut cfg = LinkConfig::new(host.ifname(), port);
    cfg.ip = Some(ip);
    cfg.frame_count = 1024;
    cfg.rx_frames = 512;
    cfg.ring_size = 64;
    cfg
}

fn member(pair: &HostPair, port: u16) -> (Link, ofi_xdp_link::SharedOpen) {
    let cfg = config(&pair.b, port, pair.b.ipv4().into());
    let path = group_file(pair);
    pair.b
        .run(move || Link::open_shared(&cfg, Group::open_path(&path).unwrap(), |_| {}))
        .unwrap()
}

fn resolve(from: &Host, link: &mut Link, ip: IpAddr, port: u16) -> LinkAddr {
    from.run(move || link.resolve_peer(ip, port, WAIT)).unwrap()
}

/// Sends `n` datagrams tagged `tag` from `tx` to `to` in bursts of 32,
/// each received by `rx` before the next leaves; how many arrived.
fn exchange(tx: &mut Link, to: &LinkAddr, rx: &mut Link, n: usize, tag: u8) -> usize {
    let mut got = 0;
    for burst in 0..n.div_ceil(32) {
        let k = 32.min(n - burst * 32);
        for i in 0..k {
            let p = [tag, i as u8, 0, 1, 2, 3, 4, 5];
            loop {
                match tx.send_copy(to, &p) {
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
        tx.reap_completions();
        got += count(rx, k, tag);
    }
    got
}

/// Receives on `rx` until `want` datagrams tagged `tag` came or `WAIT`
/// passed without any; their count.
fn count(rx: &mut Link, want: usize, tag: u8) -> usize {
    let (mut got, mut last) = (0, Instant::now());
    while got < want && last.elapsed() < WAIT {
        let n = rx.recv(64, |d| {
            assert_eq!(d.payload[0], tag, "a datagram for another member");
            got += 1;
        });
        if n > 0 {
            last = Instant::now();
        } else {
            rx.wait_readable(Duration::from_millis(10)).unwrap();
        }
    }
    got
}

#[test]
fn members_share_a_queue_each_with_its_port() {
    if !kernel_shares() {
        return;
    }
    let pair = HostPair::new().unwrap();
    let _ = std::fs::remove_file(group_file(&pair));
    let ifname = pair.b.ifname().to_string();
    let mut steering = pair
        .b
        .run(move || Steering::attach(&ifname, AttachMode::Generic))
        .unwrap();
    let mut members = Vec::new();
    for (i, port) in PORTS_B.iter().enumerate() {
        let (link, open) = member(&pair, *port);
        assert_eq!(open.member, i);
        if i == 0 {
            assert_eq!(open.how, GroupJoin::Created);
        } else {
            assert!(matches!(open.how, GroupJoin::Joined { .. }), "{open:?}");
        }
        steering.set_socket(i as u32, link.fd(), 0).unwrap();
        steering.steer_port(*port, i as u32).unwrap();
        members.push(link);
    }
    let a_cfg = config(&pair.a, PORT_A, pair.a.ipv4().into());
    let mut a = pair.a.run(move || Link::open(&a_cfg)).unwrap();
    let mut a_steering = {
        let ifname = pair.a.ifname().to_string();
        pair.a
            .run(move || Steering::attach(&ifname, AttachMode::Generic))
            .unwrap()
    };
    a_steering.set_socket(0, a.fd(), 0).unwrap();
    a_steering.steer_port(PORT_A, 0).unwrap();

    // More datagrams than one member's TX slots, so its frames must come
    // back through completions another member may have drained.
    let n = 400;
    for (i, port) in PORTS_B.iter().enumerate() {
        let ip = pair.b.ipv4().into();
        let port = *port;
        let to = resolve(&pair.a, &mut a, ip, port);
        assert_eq!(
            exchange(&mut a, &to, &mut members[i], n, i as u8),
            n,
            "member {i}"
        );
    }
    let ip_a: IpAddr = pair.a.ipv4().into();
    for (i, m) in members.iter_mut().enumerate() {
        let to = resolve(&pair.b, m, ip_a, PORT_A);
        assert_eq!(
            exchange(m, &to, &mut a, n, 10 + i as u8),
            n,
            "from member {i}"
        );
    }
    for m in &mut members {
        m.reap_completions();
        let s = m.stats().unwrap();
        assert_eq!(s.bad_descs, 0, "{s:?}");
    }
    // A member leaves; a newcomer takes its entry.
    let gone = members.remove(1);
    drop(gone);
    let (link, open) = member(&pair, 47_205);
    assert_eq!(open.member, 1);
    steering.set_socket(1, link.fd(), 0).unwrap();
    steering.steer_port(47_205, 1).unwrap();
    members.insert(1, link);
    let ip = pair.b.ipv4().into();
    let to = resolve(&pair.a, &mut a, ip, 47_205);
    assert_eq!(exchange(&mut a, &to, &mut members[1], 50, 7), 50);
    drop(members);
    let _ = std::fs::remove_dir_all(group_file(&pair).parent().unwrap());
}

/// A member that stops polling while datagrams keep coming for it holds
/// at most its RX ring's frames: the others still receive (the receive
/// frames not in the fill ring wait in the group's pool, not with the
/// member that made the group).
#[test]
fn a_member_that_stops_polling_starves_nobody() {
    if !kernel_shares() {
        return;
    }
    let pair = HostPair::new().unwrap();
    let _ = std::fs::remove_file(group_file(&pair));
    let ifname = pair.b.ifname().to_string();
    let mut steering = pair
        .b
        .run(move || Steering::attach(&ifname, AttachMode::Generic))
        .unwrap();
    let mut members = Vec::new();
    for (i, port) in PORTS_B[..2].iter().enumerate() {
        let (link, _) = member(&pair, *port);
        steering.set_socket(i as u32, link.fd(), 0).unwrap();
        steering.steer_port(*port, i as u32).unwrap();
        members.push(link);
    }
    let a_cfg = config(&pair.a, PORT_A, pair.a.ipv4().into());
    let mut a = pair.a.run(move || Link::open(&a_cfg)).unwrap();
    let ip = pair.b.ipv4().into();
    // Member 0 (the group's maker) never reads: its RX ring fills up
    // (the rest is dropped), taking the fill ring's frames with it.
    let to0 = resolve(&pair.a, &mut a, ip, PORTS_B[0]);
    for i in 0..300u32 {
        loop {
            match a.send_copy(&to0, &i.to_be_bytes()) {
                Ok(()) => break,
                Err(LinkError::NoTxFrame | LinkError::TxRingFull) => {
                    a.flush().unwrap();
                    a.reap_completions();
                }
                Err(e) => panic!("send: {e}"),
            }
        }
        a.flush().unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
    // Member 1 polls (finding nothing), as an idle endpoint's progress
    // does: that tops the drained fill ring up from the group's pool.
    assert_eq!(members[1].recv(64, |_| {}), 0);
    let to1 = resolve(&pair.a, &mut a, ip, PORTS_B[1]);
    assert_eq!(exchange(&mut a, &to1, &mut members[1], 300, 1), 300);
    let s = members[1].stats().unwrap();
    assert_eq!(s.bad_descs, 0, "{s:?}");
    drop(members);
    let _ = std::fs::remove_dir_all(group_file(&pair).parent().unwrap());
}
