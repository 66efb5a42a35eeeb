//! The data path without libfabric: two endpoints' data paths in two test-host
//! namespaces exchange messages directly through `DataPath`.
#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::{Duration, Instant};

use ofi_xdp_testhosts::{Host, HostPair};
use xdp_fi::addr::XdpAddr;
use xdp_fi::datapath::{DataPath, Direction, DpCompletion, OpenArgs, Payload, RxOp, TxOp};
use xdp_fi::params::Config;
use xdp_fi::sys::{FI_EP_DGRAM, FI_EP_RDM};

struct Side {
    dp: Box<dyn DataPath>,
    addr: XdpAddr,
    _sock: std::net::UdpSocket,
}

fn open(host: &Host, ep_type: i32, incarnation: u32) -> Side {
    host.run(|| {
        let iface = xdp_fi::ifaces::list()
            .unwrap()
            .into_iter()
            .find(|i| i.name == host.ifname())
            .unwrap();
        let sock = std::net::UdpSocket::bind((host.ipv4(), 0)).unwrap();
        let port = sock.local_addr().unwrap().port();
        let addr = XdpAddr {
            ip: host.ipv4().into(),
            port,
            mac: Some(host.mac()),
            incarnation,
        };
        let cfg = Config::default();
        // What the endpoint passes: one datagram's payload (tx_attr->inject_size).
        let inject_size = xdp_fi::getinfo::max_datagram_payload(&iface, false, &cfg);
        let args = OpenArgs {
            iface,
            ep_type,
            local: addr,
            cfg,
            inject_size,
            min_multi_recv: 1500,
            dgram_header: false,
            msg_prefix: 0,
            socket: sock.try_clone().ok().map(std::sync::Arc::new),
            memory: Default::default(),
            auth_key: None,
        };
        let dp = xdp_fi::xdp::open(&args).unwrap();
        Side {
            dp,
            addr,
            _sock: sock,
        }
    })
}

fn wait_for(sides: &mut [&mut Side], want: usize, got: &mut Vec<DpCompletion>) {
    let t0 = Instant::now();
    while got.len() < want {
        for s in sides.iter_mut() {
            s.dp.progress(&mut |c| got.push(c));
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "timed out with {got:?}"
        );
    }
}

fn exchange(ep_type: i32, len: usize) {
    exchange_with(ep_type, len, false)
}

fn exchange_with(ep_type: i32, len: usize, inject: bool) {
    let pair = HostPair::new().unwrap();
    let mut a = open(&pair.a, ep_type, 11);
    let mut b = open(&pair.b, ep_type, 22);
    let mut rbuf = vec![0u8; len + 16];
    let data: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
    // An injected send's buffer is the caller's again once the post returns.
    let mut inject_buf = data.clone();
    b.dp.post_recv(RxOp {
        src: None,
        iov: vec![(rbuf.as_mut_ptr() as usize, rbuf.len())].into(),
        tag: None,
        context: 2,
        flags: 0,
        multi_recv: false,
        report: true,
        peek: Default::default(),
    })
    .unwrap();
    a.dp.post_send(TxOp {
        dest: b.addr,
        dest_fi_addr: 0,
        payload: if inject {
            Payload::Inject(vec![(inject_buf.as_ptr() as usize, len)].into())
        } else {
            Payload::Iov(vec![(data.as_ptr() as usize, len)].into())
        },
        tag: None,
        data: None,
        context: 1,
        flags: 0,
        report: !inject,
    })
    .unwrap();
    inject_buf.fill(0xee);
    let mut got = Vec::new();
    // The receive, and the send's completion (reported, or unreported but
    // still counted for counters).
    let done = |got: &[DpCompletion]| {
        got.iter().any(|c| c.completion.op_context == 2)
            && got.iter().any(|c| matches!(c.dir, Direction::Tx))
    };
    let t0 = Instant::now();
    while !done(&got) {
        for s in [&mut a, &mut b] {
            s.dp.progress(&mut |c| got.push(c));
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "timed out with {got:?}"
        );
    }
    for c in &got {
        assert!(c.completion.error.is_none(), "{c:?}");
    }
    let rx = got.iter().find(|c| c.completion.op_context == 2).unwrap();
    assert_eq!(rx.completion.len, len);
    assert_eq!(&rbuf[..len], &data[..]);
    assert_eq!(rx.src.map(|s| s.socket_addr()), Some(a.addr.socket_addr()));
}

#[test]
fn dgram_one_message() {
    exchange(FI_EP_DGRAM, 1000);
}

#[test]
fn rdm_one_message() {
    exchange(FI_EP_RDM, 1000);
}

#[test]
fn rdm_large_message() {
    exchange(FI_EP_RDM, 1 << 20);
}

#[test]
fn rdm_inject() {
    exchange_with(FI_EP_RDM, 64, true);
}

#[test]
fn dgram_inject() {
    exchange_with(FI_EP_DGRAM, 64, true);
}

/// Sends to our own address complete (and are reported to counters) even
/// when no CQ entry was requested.
#[test]
fn rdm_self_unreported_sends_complete() {
    let pair = HostPair::new().unwrap();
    let mut a = open(&pair.a, FI_EP_RDM, 5);
    let data = [7u8; 64];
    let mut rbufs = vec![vec![0u8; 128]; 4];
    for (i, rb) in rbufs.iter_mut().enumerate() {
        a.dp.post_recv(RxOp {
            src: None,
            iov: vec![(rb.as_mut_ptr() as usize, rb.len())].into(),
            tag: None,
            context: 100 + i,
            flags: 0,
            multi_recv: false,
            report: true,
            peek: Default::default(),
        })
        .unwrap();
    }
    for i in 0..4 {
        a.dp.post_send(TxOp {
            dest: a.addr,
            dest_fi_addr: 0,
            payload: Payload::Iov(vec![(data.as_ptr() as usize, 64)].into()),
            tag: None,
            data: None,
            context: i,
            flags: 0,
            report: i % 2 == 1,
        })
        .unwrap();
    }
    let mut got = Vec::new();
    wait_for(&mut [&mut a], 8, &mut got);
    let tx = got
        .iter()
        .filter(|c| c.dir == xdp_fi::datapath::Direction::Tx)
        .count();
    assert_eq!(tx, 4, "{got:?}");
}
