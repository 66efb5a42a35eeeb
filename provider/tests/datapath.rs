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
    open_with(host, ep_type, incarnation, Config::default())
}

fn open_with(host: &Host, ep_type: i32, incarnation: u32, cfg: Config) -> Side {
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
        // What the endpoint passes: one datagram's payload (tx_attr->inject_size).
        let inject_size = xdp_fi::getinfo::max_datagram_payload(&iface, false, &cfg);
        let args = OpenArgs {
            iface,
            ep_type,
            local: addr,
            cfg,
            inject_size,
            rx_size: xdp_fi::getinfo::RX_SIZE,
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

/// Posts `buf` as a plain receive (any source, untagged, reported) with
/// `context`.
fn post_recv_into(side: &mut Side, buf: &mut [u8], context: usize) {
    side.dp
        .post_recv(RxOp {
            src: None,
            iov: vec![(buf.as_mut_ptr() as usize, buf.len())].into(),
            tag: None,
            context,
            flags: 0,
            multi_recv: false,
            report: true,
            peek: Default::default(),
        })
        .unwrap();
}

/// Posts an untagged send of `payload` to `dest` with `context`.
fn post_send_to(side: &mut Side, dest: XdpAddr, payload: Payload, context: usize, report: bool) {
    side.dp
        .post_send(TxOp {
            dest,
            dest_fi_addr: 0,
            payload,
            tag: None,
            data: None,
            context,
            flags: 0,
            report,
        })
        .unwrap();
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
    send_and_check(&mut a, &mut b, len, inject);
}

/// Sends `len` bytes from `a` to `b` and checks they arrived intact, from `a`.
fn send_and_check(a: &mut Side, b: &mut Side, len: usize, inject: bool) {
    let mut rbuf = vec![0u8; len + 16];
    let data: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
    // An injected send's buffer is the caller's again once the post returns.
    let mut inject_buf = data.clone();
    post_recv_into(b, &mut rbuf, 2);
    let payload = if inject {
        Payload::Inject(vec![(inject_buf.as_ptr() as usize, len)].into())
    } else {
        Payload::Iov(vec![(data.as_ptr() as usize, len)].into())
    };
    post_send_to(a, b.addr, payload, 1, !inject);
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
        for s in [&mut *a, &mut *b] {
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

/// Counter `name` of `side`'s statistics file (endpoints publish them every
/// 10 ms of progress).
fn published(side: &mut Side, name: &str) -> u64 {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(30) {
        side.dp.progress(&mut |_| {});
    }
    let address = side.addr.socket_addr().to_string();
    ofi_xdp_epstats::read_dir(std::path::Path::new(ofi_xdp_epstats::DEFAULT_DIR))
        .into_iter()
        .filter_map(Result::ok)
        .find(|e| e.pid == std::process::id() && e.identity.address == address)
        .and_then(|e| e.value(name))
        .unwrap()
}

/// On veth AF_XDP copies every frame: the segments of transfers of
/// `FI_XDP_BULK_MIN` bytes and more go to the receiver's bulk port in
/// batches through the kernel's UDP offloads (PROTOCOL.md §2.5), smaller
/// messages through AF_XDP; `FI_XDP_BULK_PATH=off` keeps all on AF_XDP.
#[test]
fn rdm_large_messages_take_the_bulk_path_in_copy_mode() {
    use xdp_fi::params::BulkPath;
    for (path, bulk) in [(BulkPath::Auto, true), (BulkPath::Off, false)] {
        let pair = HostPair::new().unwrap();
        let cfg = Config {
            bulk_path: path,
            ..Config::default()
        };
        let mut a = open_with(&pair.a, FI_EP_RDM, 11, cfg.clone());
        let mut b = open_with(&pair.b, FI_EP_RDM, 22, cfg.clone());
        let small_tx = published(&mut a, "link_tx_packets");
        // veth at MTU 1500: 16 KiB and more go bulk.
        let min = xdp_fi::params::default_bulk_min(1472);
        for len in [64, 1 << 20, 100_003, min, min - 1] {
            send_and_check(&mut a, &mut b, len, false);
        }
        let through_xsk = published(&mut a, "link_tx_packets") - small_tx;
        let (tx, sends) = (
            published(&mut a, "bulk_tx"),
            published(&mut a, "bulk_tx_sends"),
        );
        let (rx, reads) = (
            published(&mut b, "bulk_rx"),
            published(&mut b, "bulk_rx_reads"),
        );
        let report = format!(
            "{path:?}: {tx} bulk datagrams sent in {sends} sends, {rx} received in {reads} \
             reads, {through_xsk} through AF_XDP"
        );
        println!("{report}");
        if bulk {
            // 1 MiB + 100,003 B + 16 KiB in 1,404-byte segments, each
            // retransmission counted again.
            assert!(tx > ((1 << 20) + 100_003 + min as u64) / 1404, "{report}");
            assert!(rx >= tx * 9 / 10 && rx <= tx, "{report}");
            assert!(sends * 8 < tx && reads * 4 < rx, "not batched: {report}");
            // The small messages, the message just below the threshold and
            // the handshake went through AF_XDP.
            assert!(through_xsk > 12, "{report}");
        } else {
            assert_eq!((tx, rx), (0, 0), "{report}");
        }
    }
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
        post_recv_into(&mut a, rb, 100 + i);
    }
    for i in 0..4 {
        let payload = Payload::Iov(vec![(data.as_ptr() as usize, 64)].into());
        let to = a.addr;
        post_send_to(&mut a, to, payload, i, i % 2 == 1);
    }
    let mut got = Vec::new();
    wait_for(&mut [&mut a], 8, &mut got);
    let tx = got
        .iter()
        .filter(|c| c.dir == xdp_fi::datapath::Direction::Tx)
        .count();
    assert_eq!(tx, 4, "{got:?}");
}

/// Several receive queues (veth with four, native XDP). The server's socket
/// takes queue 0; four client endpoints of one process take queues 0..3
/// (each the first its process does not use yet) and transmit from them, so
/// on veth their frames arrive on the server's queues 0..3. Queue 0's are
/// redirected into the server's AF_XDP socket; the steering program passes
/// the others to the kernel (`other_queue`), and the server's kernel UDP
/// socket receives them. Every message arrives intact, every frame of the
/// server's port was counted on one of the two paths, and veth dropped none.
#[test]
fn rdm_peers_on_every_queue_reach_an_endpoint_on_one() {
    const QUEUES: u32 = 4;
    const PER_CLIENT: usize = 40;
    let pair = HostPair::with_queues(1500, QUEUES).unwrap();
    let cfg = Config {
        attach_mode: xdp_fi::params::AttachMode::Native,
        ..Config::default()
    };
    let mut server = open_with(&pair.a, FI_EP_RDM, 1, cfg.clone());
    let mut clients: Vec<Side> = (0..QUEUES)
        .map(|i| open_with(&pair.b, FI_EP_RDM, 10 + i, cfg.clone()))
        .collect();
    // Sizes from one datagram to several (segmented) ones.
    let size = |c: usize, i: usize| 1 + (c * 7919 + i * 1031) % 9000;
    let message = |c: usize, i: usize| -> Vec<u8> {
        (0..size(c, i))
            .map(|k| (k * 31 + c * 7 + i) as u8)
            .collect()
    };
    let total = QUEUES as usize * PER_CLIENT;
    let mut rbufs = vec![vec![0u8; 9100]; total];
    for (k, rb) in rbufs.iter_mut().enumerate() {
        post_recv_into(&mut server, rb, 1000 + k);
    }
    let payloads: Vec<Vec<Vec<u8>>> = (0..QUEUES as usize)
        .map(|c| (0..PER_CLIENT).map(|i| message(c, i)).collect())
        .collect();
    let to = server.addr;
    for (c, side) in clients.iter_mut().enumerate() {
        for (i, p) in payloads[c].iter().enumerate() {
            let payload = Payload::Iov(vec![(p.as_ptr() as usize, p.len())].into());
            post_send_to(side, to, payload, c * PER_CLIENT + i, true);
        }
    }
    let mut got = Vec::new();
    let t0 = Instant::now();
    let rx_done = |g: &[DpCompletion]| g.iter().filter(|c| c.dir == Direction::Rx).count();
    let tx_done = |g: &[DpCompletion]| g.iter().filter(|c| c.dir == Direction::Tx).count();
    while rx_done(&got) < total || tx_done(&got) < total {
        server.dp.progress(&mut |c| got.push(c));
        for s in clients.iter_mut() {
            s.dp.progress(&mut |c| got.push(c));
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "timed out: {} received, {} sent of {total}",
            rx_done(&got),
            tx_done(&got)
        );
    }
    // Every message intact, and from the client that sent it.
    let by_sender: Vec<XdpAddr> = clients.iter().map(|s| s.addr).collect();
    let mut seen = std::collections::BTreeSet::new();
    for c in got.iter().filter(|c| c.dir == Direction::Rx) {
        assert!(c.completion.error.is_none(), "{c:?}");
        let buf = &rbufs[c.completion.op_context - 1000][..c.completion.len];
        let src = c.src.unwrap().socket_addr();
        let client = by_sender
            .iter()
            .position(|a| a.socket_addr() == src)
            .unwrap();
        let i = payloads[client]
            .iter()
            .position(|p| p[..] == *buf)
            .unwrap_or_else(|| panic!("message from client {client} not one it sent"));
        assert!(
            seen.insert((client, i)),
            "client {client} message {i} twice"
        );
    }
    assert_eq!(seen.len(), total);
    // Counters: the server's frames arrived on all four queues; those on
    // queue 0 were steered, the rest passed to the kernel socket; veth
    // dropped nothing.
    let ifindex = pair
        .a
        .run(|| ofi_xdp_link::ethtool::ifindex(pair.a.ifname()))
        .unwrap();
    let (counters, by_queue) = pair.a.run(|| {
        let iface = ofi_xdp_bpf::inspect::interfaces()
            .unwrap()
            .into_iter()
            .find(|i| i.ifindex == ifindex)
            .unwrap();
        let (_, id) = iface.programs[0];
        let program = ofi_xdp_bpf::inspect::program(id).unwrap().unwrap();
        let maps = ofi_xdp_bpf::inspect::SteeringMaps::open(&program).unwrap();
        (maps.counters().unwrap(), maps.queue_counts().unwrap())
    });
    let drops: u64 = pair.a.queue_stats().unwrap().iter().map(|q| q.drops).sum();
    // The server's own figures, from its statistics file (refreshed every
    // 10 ms by progress): what its kernel socket received from other hosts.
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(30) {
        server.dp.progress(&mut |_| {});
    }
    let mine = ofi_xdp_epstats::read_dir(std::path::Path::new(ofi_xdp_epstats::DEFAULT_DIR))
        .into_iter()
        .filter_map(Result::ok)
        .find(|e| e.pid == std::process::id() && e.identity.address == to.socket_addr().to_string())
        .unwrap();
    let value = |name: &str| mine.value(name).unwrap();
    let report = format!(
        "server steering {counters}; by queue {by_queue:?}; veth drops {drops}; server endpoint: \
         {} through AF_XDP, {} through its UDP socket from other hosts, {} retransmits",
        value("link_rx_packets"),
        value("udp_socket_rx_remote"),
        value("retransmits")
    );
    println!("{report}");
    assert_eq!(by_queue.len(), QUEUES as usize, "{report}");
    assert!(by_queue.iter().all(|n| *n > 0), "{report}");
    assert!(counters.steered > 0 && counters.other_queue > 0, "{report}");
    assert_eq!(counters.steered, by_queue[0], "{report}");
    assert_eq!(
        counters.other_queue,
        by_queue[1..].iter().sum::<u64>(),
        "{report}"
    );
    assert_eq!(
        (counters.no_socket, counters.fault_dropped),
        (0, 0),
        "{report}"
    );
    assert_eq!(drops, 0, "{report}");
    // Each steered frame reached the AF_XDP socket, each passed one the
    // kernel socket: none lost on the way.
    assert_eq!(value("link_rx_packets"), counters.steered, "{report}");
    assert_eq!(
        value("udp_socket_rx_remote"),
        counters.other_queue,
        "{report}"
    );
}

/// The bulk path between several peers: one sender's segments to two
/// receivers alternate (the engine serves its peers in turn), so its batch
/// changes destination datagram by datagram; one receiver takes batches
/// from two senders at once. Every message arrives whole and once.
#[test]
fn rdm_bulk_transfers_to_and_from_several_peers_arrive_whole() {
    use ofi_xdp_testhosts::Segment;
    let seg = Segment::new(3, 1500).unwrap();
    let mut sides: Vec<Side> = (0..3)
        .map(|i| open(&seg.hosts[i], FI_EP_RDM, 40 + i as u32))
        .collect();
    // (sender, receiver, length): host 0 to hosts 1 and 2 interleaved,
    // host 1 to host 2 beside it.
    let plan: Vec<(usize, usize, usize)> = (0..6)
        .flat_map(|i| {
            let len = [1 << 20, 100_003, 40_000][i % 3];
            [
                (0, 1 + i % 2, len),
                (0, 2 - i % 2, len / 2 + 1),
                (1, 2, len),
            ]
        })
        .collect();
    let payload = |k: usize| -> Vec<u8> {
        (0..plan[k].2)
            .map(|b| (b * 13 + k * 101 + (b >> 10)) as u8)
            .collect()
    };
    let payloads: Vec<Vec<u8>> = (0..plan.len()).map(payload).collect();
    let mut rbufs: Vec<Vec<u8>> = plan.iter().map(|_| vec![0u8; (1 << 20) + 16]).collect();
    for (k, &(_, to, _)) in plan.iter().enumerate() {
        post_recv_into(&mut sides[to], &mut rbufs[k], 1000 + k);
    }
    for (k, &(from, to, len)) in plan.iter().enumerate() {
        let payload = Payload::Iov(vec![(payloads[k].as_ptr() as usize, len)].into());
        let dest = sides[to].addr;
        post_send_to(&mut sides[from], dest, payload, k, true);
    }
    let mut got = Vec::new();
    let t0 = Instant::now();
    let count = |g: &[DpCompletion], d: Direction| g.iter().filter(|c| c.dir == d).count();
    while count(&got, Direction::Rx) < plan.len() || count(&got, Direction::Tx) < plan.len() {
        for s in sides.iter_mut() {
            s.dp.progress(&mut |c| got.push(c));
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "timed out with {} received, {} sent of {}",
            count(&got, Direction::Rx),
            count(&got, Direction::Tx),
            plan.len()
        );
    }
    let mut seen = std::collections::BTreeSet::new();
    for c in got.iter().filter(|c| c.dir == Direction::Rx) {
        assert!(c.completion.error.is_none(), "{c:?}");
        let buf = &rbufs[c.completion.op_context - 1000][..c.completion.len];
        let k = payloads
            .iter()
            .position(|p| p[..] == *buf)
            .unwrap_or_else(|| panic!("a {}-byte message nobody sent", buf.len()));
        assert!(seen.insert(k), "message {k} twice");
        let from = c.src.unwrap().socket_addr();
        assert_eq!(from, sides[plan[k].0].addr.socket_addr(), "message {k}");
    }
    assert_eq!(seen.len(), plan.len());
    let tx: Vec<u64> = (0..2)
        .map(|i| published(&mut sides[i], "bulk_tx"))
        .collect();
    let rx = published(&mut sides[2], "bulk_rx");
    assert!(tx[0] > 1000 && tx[1] > 1000 && rx > 1000, "{tx:?} {rx}");
}
