//! `ofi-xdp link-demo`: two test hosts, the steering program on one, a few
//! datagrams through the AF_XDP link, what arrived, the XDP counters, and
//! teardown (everything is removed on drop, also on error).

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use ofi_xdp_bpf::{AttachMode, Steering};
use ofi_xdp_link::{Link, LinkConfig};
use ofi_xdp_testhosts::HostPair;

const PORT_A: u16 = 47_300;
const PORT_B: u16 = 47_301;
const UNSTEERED_PORT: u16 = 47_302;

/// `ofi-xdp link-demo`'s options.
#[derive(clap::Args)]
pub struct Opts {
    /// XDP attach mode: generic or native
    #[arg(long, default_value = "generic")]
    mode: AttachMode,
    /// Datagrams to send
    #[arg(long, default_value_t = 5)]
    count: usize,
}

pub fn main(o: &Opts) -> Result<(), String> {
    let (mode, count) = (o.mode, o.count);

    let pair = HostPair::new().map_err(|e| format!("creating test hosts: {e}"))?;
    println!("test hosts (network namespaces joined by a veth pair):");
    println!(
        "  a: {} {} {} {}",
        pair.a.netns(),
        pair.a.ifname(),
        pair.a.ipv4(),
        pair.a.ipv6()
    );
    println!(
        "  b: {} {} {} {}",
        pair.b.netns(),
        pair.b.ifname(),
        pair.b.ipv4(),
        pair.b.ipv6()
    );

    // Receiver on b: AF_XDP socket plus the steering program (PORT_B -> slot 0).
    let b_if = pair.b.ifname().to_string();
    let (mut rx, steering) = pair.b.run(move || -> Result<(Link, Steering), String> {
        let link = Link::open(&LinkConfig::new(&b_if, PORT_B)).map_err(|e| e.to_string())?;
        let mut s = Steering::attach(&b_if, mode).map_err(|e| e.to_string())?;
        s.steer_port(PORT_B, 0).map_err(|e| e.to_string())?;
        s.set_socket(0, link.fd(), 0).map_err(|e| e.to_string())?;
        Ok((link, s))
    })?;
    println!(
        "b: XDP program attached in {} mode; AF_XDP socket {} bound in {} mode on queue 0",
        steering.mode(),
        rx.local_addr(),
        rx.bind_mode()
    );

    // Sender on a: its own AF_XDP socket; b's MAC from the neighbour table.
    let a_if = pair.a.ifname().to_string();
    let b_ip = pair.b.ipv4().into();
    let (mut tx, to) = pair.a.run(move || -> Result<_, String> {
        let link = Link::open(&LinkConfig::new(&a_if, PORT_A)).map_err(|e| e.to_string())?;
        let to = link
            .resolve_peer(b_ip, PORT_B, Duration::from_secs(3))
            .map_err(|e| e.to_string())?;
        Ok((link, to))
    })?;
    println!(
        "a: AF_XDP socket {} ({} mode) sending to {to}",
        tx.local_addr(),
        tx.bind_mode()
    );

    let before = steering.counters().map_err(|e| e.to_string())?;
    for i in 0..count {
        let msg = format!("hello #{i} from {} over AF_XDP", tx.local_addr().ip);
        tx.send_copy(&to, msg.as_bytes())
            .map_err(|e| e.to_string())?;
    }
    tx.flush().map_err(|e| e.to_string())?;

    println!("arrived at b:");
    let mut got = 0;
    let start = Instant::now();
    while got < count && start.elapsed() < Duration::from_secs(3) {
        got += rx.recv(64, |d| {
            println!(
                "  {} bytes from {}: {:?}",
                d.payload.len(),
                d.src,
                String::from_utf8_lossy(d.payload)
            );
        });
        if got < count {
            rx.wait_readable(Duration::from_millis(20))
                .map_err(|e| e.to_string())?;
        }
    }

    // Ordinary traffic still reaches the kernel: a datagram to another port.
    let a_ip = pair.a.ipv4();
    let b_ip4 = pair.b.ipv4();
    let kernel_b = pair
        .b
        .run(move || UdpSocket::bind(SocketAddr::from((b_ip4, UNSTEERED_PORT))))
        .map_err(|e| e.to_string())?;
    kernel_b
        .set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(|e| e.to_string())?;
    let kernel_a = pair
        .a
        .run(move || UdpSocket::bind(SocketAddr::from((a_ip, 0))))
        .map_err(|e| e.to_string())?;
    kernel_a
        .send_to(
            b"plain kernel UDP",
            SocketAddr::from((b_ip4, UNSTEERED_PORT)),
        )
        .map_err(|e| e.to_string())?;
    let mut buf = [0u8; 64];
    match kernel_b.recv_from(&mut buf) {
        Ok((n, from)) => println!(
            "kernel socket on b port {UNSTEERED_PORT} got {:?} from {from} (passed by XDP)",
            String::from_utf8_lossy(&buf[..n])
        ),
        Err(e) => println!("kernel socket on b got nothing: {e}"),
    }

    let c = steering
        .counters()
        .map_err(|e| e.to_string())?
        .since(&before);
    println!("XDP counters on b: {c}");
    let st = rx.stats().map_err(|e| e.to_string())?;
    println!(
        "link on b: rx {} datagrams / {} bytes, malformed {}, bad checksum {}, kernel rx_dropped {}",
        st.rx_packets, st.rx_bytes, st.rx_malformed, st.rx_bad_checksum, st.kernel.rx_dropped
    );
    drop(tx);
    drop(rx);
    drop(steering);
    drop(pair);
    println!("torn down: program detached, namespaces and veth removed");
    if got == count {
        Ok(())
    } else {
        Err(format!("only {got} of {count} datagrams arrived"))
    }
}
