//! `ofi-xdp link-pingpong`: raw round-trip latency and one-direction packet
//! rate over the AF_XDP link, beside a kernel UDP socket between the same
//! two namespaces, measured in the same run. This is the physical floor the
//! provider is later compared against.
//!
//! Three roles:
//! - `--server`: in one namespace; serves the link, then (after the client
//!   says so) a kernel UDP socket; echoes pings and counts rate bursts.
//! - `--client`: in the other namespace; measures and prints `RESULT` lines.
//! - `--driver`: creates a test-host pair, runs server and client as child
//!   processes inside the two namespaces (once per attach mode), and prints
//!   one table.
//!
//! Messages (first payload byte): `P` ping (echoed whole), `S` start a rate
//! burst (acked with `s`), `D` burst datagram (counted), `E` end of burst
//! (answered with `e` + count + first-to-last nanoseconds), `K` switch the
//! server to its kernel socket, `Q` quit.

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ofi_xdp_bpf::{AttachMode, Steering};
use ofi_xdp_link::{Link, LinkAddr, LinkConfig};
use ofi_xdp_testhosts::HostPair;

use crate::child::ChildGuard;
use crate::wire::{KernelPath, LinkPath, Path};

const DEFAULT_PORT: u16 = 47_200;
const DEFAULT_KERNEL_PORT: u16 = 47_201;
/// A server with no traffic for this long exits (no orphan spinning forever).
const SERVER_IDLE: Duration = Duration::from_secs(30);
/// How long one ping may take before it counts as lost.
const PING_TIMEOUT: Duration = Duration::from_millis(200);

/// `ofi-xdp link-pingpong`'s options: one of three roles, each with its own.
#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("role").required(true).args(["driver", "server", "client"])))]
pub struct Opts {
    /// Make two test hosts and run a server and a client in them, per attach mode
    #[arg(long)]
    driver: bool,
    /// Answer pings on --ifname until told to stop (or idle for 30 s)
    #[arg(long)]
    server: bool,
    /// Ping the server at --peer-ip from --ifname and print the figures
    #[arg(long)]
    client: bool,
    /// Driver: the attach modes to measure (comma-separated)
    #[arg(long, value_delimiter = ',', default_value = "generic,native")]
    modes: Vec<AttachMode>,
    /// Driver: MTU of the test hosts
    #[arg(long, default_value_t = 1500)]
    mtu: u32,
    /// Server, client: the interface
    #[arg(long, value_name = "IF", required_if_eq_any([("server", "true"), ("client", "true")]))]
    ifname: Option<String>,
    /// Server, client: XDP attach mode
    #[arg(long, default_value = "generic")]
    mode: AttachMode,
    /// Server, client: the link's UDP port
    #[arg(long, default_value_t = DEFAULT_PORT)]
    port: u16,
    /// Server: the kernel UDP socket's port
    #[arg(long, default_value_t = DEFAULT_KERNEL_PORT)]
    kernel_port: u16,
    /// Client: the server's IP address
    #[arg(long, value_name = "IP", required_if_eq("client", "true"))]
    peer_ip: Option<IpAddr>,
    /// Client: the server's link port
    #[arg(long, default_value_t = DEFAULT_PORT)]
    peer_port: u16,
    /// Client: the server's kernel UDP port
    #[arg(long, default_value_t = DEFAULT_KERNEL_PORT)]
    kernel_peer_port: u16,
    /// Client, driver: measure the link only, not the kernel UDP socket beside it
    #[arg(long)]
    no_kernel: bool,
    /// Client: print result lines only, no table
    #[arg(long)]
    no_table: bool,
    /// Client, driver: datagram payload in bytes
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// Client, driver: timed pings
    #[arg(long, default_value_t = 20_000)]
    iters: usize,
    /// Client, driver: pings before the timed ones
    #[arg(long, default_value_t = 1_000)]
    warmup: usize,
    /// Client, driver: datagrams of the packet-rate burst
    #[arg(long, default_value_t = 200_000)]
    rate_count: u64,
}

pub fn main(o: &Opts) -> Result<(), String> {
    if o.driver {
        driver(o)
    } else if o.server {
        server(o)
    } else {
        client(o)
    }
}

/// The interface of a server or client (clap requires it for those roles).
fn ifname(o: &Opts) -> Result<String, String> {
    o.ifname
        .clone()
        .ok_or_else(|| "--ifname is required".into())
}

/// Opens the link on `ifname`, attaches the steering program and steers
/// `port` into the link's socket.
pub fn open_steered(ifname: &str, port: u16, mode: AttachMode) -> Result<(Link, Steering), String> {
    let mut cfg = LinkConfig::new(ifname, port);
    // The provider's UMEM layout: 4 KiB chunks, datagrams above one chunk (jumbo frames)
    // spread over several (multi-buffer), so the floor is measured as the provider runs.
    cfg.frame_size = 4096;
    cfg.multi_buffer = true;
    cfg.frame_count = 4096;
    cfg.rx_frames = 2048;
    cfg.ring_size = 2048;
    let link = Link::open(&cfg).map_err(|e| format!("opening the link on {ifname}: {e}"))?;
    let mut steering = Steering::attach(ifname, mode)
        .map_err(|e| format!("attaching XDP ({mode}) to {ifname}: {e}"))?;
    steering
        .steer_port(port, 0)
        .and_then(|()| steering.set_socket(0, link.fd(), 0))
        .map_err(|e| format!("steering port {port}: {e}"))?;
    Ok((link, steering))
}

// ------------------------------------------------------------------ server

/// What the server loop ended with.
#[derive(PartialEq, Eq)]
enum Served {
    SwitchToKernel,
    Quit,
    Idle,
}

fn serve<P: Path>(p: &mut P) -> Result<Served, String> {
    let mut count = 0u64;
    let mut first: Option<Instant> = None;
    let mut last: Option<Instant> = None;
    let mut replies: Vec<(P::Addr, Vec<u8>)> = Vec::with_capacity(64);
    let mut ended = None;
    let mut idle_since = Instant::now();
    loop {
        let n = p.recv_batch(&mut |from, data| match data.first() {
            Some(b'P') => replies.push((from, data.to_vec())),
            Some(b'D') => {
                let now = Instant::now();
                count += 1;
                first.get_or_insert(now);
                last = Some(now);
            }
            Some(b'S') => {
                count = 0;
                first = None;
                last = None;
                replies.push((from, b"s".to_vec()));
            }
            Some(b'E') => {
                let span = match (first, last) {
                    (Some(f), Some(l)) => l.duration_since(f).as_nanos() as u64,
                    _ => 0,
                };
                let mut r = b"e".to_vec();
                r.extend_from_slice(&count.to_be_bytes());
                r.extend_from_slice(&span.to_be_bytes());
                replies.push((from, r));
            }
            Some(b'K') => ended = Some(Served::SwitchToKernel),
            Some(b'Q') => ended = Some(Served::Quit),
            _ => {}
        })?;
        for (to, r) in replies.drain(..) {
            p.send_to(to, &r)?;
        }
        if n > 0 {
            p.flush()?;
            idle_since = Instant::now();
        } else if idle_since.elapsed() > SERVER_IDLE {
            return Ok(Served::Idle);
        }
        if let Some(e) = ended.take() {
            return Ok(e);
        }
    }
}

fn server(o: &Opts) -> Result<(), String> {
    let ifname = ifname(o)?;
    let (port, kport, mode) = (o.port, o.kernel_port, o.mode);
    let (link, steering) = open_steered(&ifname, port, mode)?;
    let local_ip = link.local_addr().ip;
    let kernel = UdpSocket::bind(SocketAddr::new(local_ip, kport))
        .map_err(|e| format!("binding kernel UDP {local_ip}:{kport}: {e}"))?;
    eprintln!(
        "server: {} bound in {} mode, XDP {}, kernel UDP on port {kport}",
        link.local_addr(),
        link.bind_mode(),
        steering.mode()
    );
    println!("READY");
    let mut lp = LinkPath { link };
    if serve(&mut lp)? != Served::SwitchToKernel {
        return Ok(());
    }
    // Detach first, so the kernel path is measured without our program.
    drop(lp);
    drop(steering);
    let mut kp = KernelPath::new(kernel).map_err(|e| e.to_string())?;
    serve(&mut kp)?;
    Ok(())
}

// ------------------------------------------------------------------ client

/// One measured path.
#[derive(Debug, Clone)]
pub struct Measured {
    pub label: String,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub mean_ns: u64,
    pub lost_pings: u64,
    pub tx_pps: f64,
    pub rx_pps: f64,
    pub delivered: f64,
}

impl Measured {
    fn result_line(&self) -> String {
        format!(
            "RESULT|{}|{}|{}|{}|{}|{:.0}|{:.0}|{:.6}",
            self.label,
            self.p50_ns,
            self.p99_ns,
            self.mean_ns,
            self.lost_pings,
            self.tx_pps,
            self.rx_pps,
            self.delivered
        )
    }

    pub fn parse(line: &str) -> Option<Self> {
        let f: Vec<&str> = line.strip_prefix("RESULT|")?.split('|').collect();
        if f.len() != 8 {
            return None;
        }
        Some(Self {
            label: f[0].to_string(),
            p50_ns: f[1].parse().ok()?,
            p99_ns: f[2].parse().ok()?,
            mean_ns: f[3].parse().ok()?,
            lost_pings: f[4].parse().ok()?,
            tx_pps: f[5].parse().ok()?,
            rx_pps: f[6].parse().ok()?,
            delivered: f[7].parse().ok()?,
        })
    }
}

/// Waits for a datagram whose first byte is `kind` from the peer, polling.
fn wait_for<P: Path>(p: &mut P, kind: u8, timeout: Duration) -> Result<Option<Vec<u8>>, String> {
    let start = Instant::now();
    let mut got = None;
    while got.is_none() && start.elapsed() < timeout {
        p.recv_batch(&mut |_, d| {
            if got.is_none() && d.first() == Some(&kind) {
                got = Some(d.to_vec());
            }
        })?;
    }
    Ok(got)
}

/// Pings until the server answers (it may still be starting or switching).
fn await_server<P: Path>(p: &mut P, peer: P::Addr, size: usize) -> Result<(), String> {
    let start = Instant::now();
    let mut msg = vec![0u8; size.max(9)];
    msg[0] = b'P';
    while start.elapsed() < Duration::from_secs(10) {
        p.send_to(peer, &msg)?;
        p.flush()?;
        if wait_for(p, b'P', Duration::from_millis(50))?.is_some() {
            // Drain stragglers of earlier attempts.
            let _ = wait_for(p, 0xff, Duration::from_millis(20))?;
            return Ok(());
        }
    }
    Err(format!("server {peer:?} does not answer"))
}

fn percentile(sorted: &[u64], pct: usize) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[(sorted.len() * pct / 100).min(sorted.len() - 1)]
}

fn ping_pong<P: Path>(
    p: &mut P,
    peer: P::Addr,
    size: usize,
    warmup: usize,
    iters: usize,
) -> Result<(Vec<u64>, u64), String> {
    let mut msg = vec![0u8; size.max(9)];
    msg[0] = b'P';
    let mut rtts = Vec::with_capacity(iters);
    let mut lost = 0;
    for i in 0..(warmup + iters) as u64 {
        msg[1..9].copy_from_slice(&i.to_be_bytes());
        let t0 = Instant::now();
        p.send_to(peer, &msg)?;
        p.flush()?;
        let mut done = false;
        while !done {
            p.recv_batch(&mut |_, d| {
                if d.len() >= 9 && d[0] == b'P' && d[1..9] == i.to_be_bytes() {
                    done = true;
                }
            })?;
            if !done && t0.elapsed() > PING_TIMEOUT {
                lost += 1;
                break;
            }
        }
        if done && i >= warmup as u64 {
            rtts.push(t0.elapsed().as_nanos() as u64);
        }
    }
    Ok((rtts, lost))
}

/// Sends `count` datagrams as fast as the path takes them; returns (sender
/// rate, receiver rate, fraction delivered).
fn rate<P: Path>(
    p: &mut P,
    peer: P::Addr,
    size: usize,
    count: u64,
) -> Result<(f64, f64, f64), String> {
    // Start: reset the server's counter, retrying until acknowledged.
    let mut acked = false;
    for _ in 0..50 {
        p.send_to(peer, b"S")?;
        p.flush()?;
        if wait_for(p, b's', Duration::from_millis(100))?.is_some() {
            acked = true;
            break;
        }
    }
    if !acked {
        return Err("server did not acknowledge the rate burst".into());
    }
    let mut msg = vec![0u8; size.max(9)];
    msg[0] = b'D';
    let t0 = Instant::now();
    for i in 0..count {
        msg[1..9].copy_from_slice(&i.to_be_bytes());
        p.send_to(peer, &msg)?;
        if i % 32 == 31 {
            p.flush()?;
        }
    }
    p.flush()?;
    let send_secs = t0.elapsed().as_secs_f64();
    // End marker, repeated until the server reports (it may have been lost
    // in an overrun).
    for _ in 0..40 {
        p.send_to(peer, b"E")?;
        p.flush()?;
        if let Some(r) = wait_for(p, b'e', Duration::from_millis(50))?
            && r.len() >= 17
        {
            let got = u64::from_be_bytes(r[1..9].try_into().map_err(|_| "short reply")?);
            let span = u64::from_be_bytes(r[9..17].try_into().map_err(|_| "short reply")?);
            let rx_pps = if span > 0 {
                got.saturating_sub(1) as f64 / (span as f64 / 1e9)
            } else {
                0.0
            };
            return Ok((count as f64 / send_secs, rx_pps, got as f64 / count as f64));
        }
    }
    Err("server did not report the burst".into())
}

fn measure<P: Path>(p: &mut P, peer: P::Addr, label: &str, o: &Opts) -> Result<Measured, String> {
    let (size, iters, warmup, count) = (o.size, o.iters, o.warmup, o.rate_count);
    await_server(p, peer, size)?;
    let (mut rtts, lost) = ping_pong(p, peer, size, warmup, iters)?;
    rtts.sort_unstable();
    let mean = if rtts.is_empty() {
        0
    } else {
        rtts.iter().sum::<u64>() / rtts.len() as u64
    };
    let (tx_pps, rx_pps, delivered) = rate(p, peer, size, count)?;
    Ok(Measured {
        label: label.to_string(),
        p50_ns: percentile(&rtts, 50),
        p99_ns: percentile(&rtts, 99),
        mean_ns: mean,
        lost_pings: lost,
        tx_pps,
        rx_pps,
        delivered,
    })
}

fn client(o: &Opts) -> Result<(), String> {
    let ifname = ifname(o)?;
    let peer_ip = o.peer_ip.ok_or("--peer-ip is required")?;
    let (port, peer_port, kpeer_port, mode) = (o.port, o.peer_port, o.kernel_peer_port, o.mode);
    let (link, steering) = open_steered(&ifname, port, mode)?;
    let local_ip = link.local_addr().ip;
    let peer: LinkAddr = link
        .resolve_peer(peer_ip, peer_port, Duration::from_secs(3))
        .map_err(|e| e.to_string())?;
    let label = format!(
        "AF_XDP link ({} XDP, {} mode)",
        steering.mode(),
        link.bind_mode()
    );
    let mut lp = LinkPath { link };
    let mut results = vec![measure(&mut lp, peer, &label, o)?];
    let stats = lp.link.stats().map_err(|e| e.to_string())?;
    eprintln!("client link stats: {stats:?}");
    eprintln!(
        "client XDP counters: {}",
        steering.counters().map_err(|e| e.to_string())?
    );
    // Hand the server over to its kernel socket.
    for _ in 0..3 {
        lp.send_to(peer, b"K")?;
    }
    lp.flush()?;
    drop(lp);
    drop(steering);
    if !o.no_kernel {
        let sock = UdpSocket::bind(SocketAddr::new(local_ip, 0)).map_err(|e| e.to_string())?;
        let mut kp = KernelPath::new(sock).map_err(|e| e.to_string())?;
        let kpeer = SocketAddr::new(peer_ip, kpeer_port);
        results.push(measure(&mut kp, kpeer, "kernel UDP socket", o)?);
        kp.send_to(kpeer, b"Q")?;
    }
    for r in &results {
        println!("{}", r.result_line());
    }
    if !o.no_table {
        print_table(&results, o.size);
    }
    Ok(())
}

fn fmt_us(ns: u64) -> String {
    format!("{:.1} us", ns as f64 / 1000.0)
}

fn fmt_rate(pps: f64) -> String {
    if pps >= 1e6 {
        format!("{:.2} Mpps", pps / 1e6)
    } else {
        format!("{:.0} kpps", pps / 1e3)
    }
}

/// Prints the comparison table to stderr (stdout carries RESULT lines).
pub fn print_table(results: &[Measured], size: usize) {
    eprintln!();
    eprintln!(
        "link floor: {size}-byte UDP payloads between two namespaces over veth, busy polling"
    );
    eprintln!(
        "{:<40} {:>10} {:>10} {:>10} {:>12} {:>12} {:>10}",
        "path", "RTT p50", "RTT p99", "RTT mean", "send rate", "recv rate", "delivered"
    );
    for r in results {
        eprintln!(
            "{:<40} {:>10} {:>10} {:>10} {:>12} {:>12} {:>9.2}%",
            r.label,
            fmt_us(r.p50_ns),
            fmt_us(r.p99_ns),
            fmt_us(r.mean_ns),
            fmt_rate(r.tx_pps),
            fmt_rate(r.rx_pps),
            r.delivered * 100.0
        );
        if r.lost_pings > 0 {
            eprintln!("  ({} pings lost)", r.lost_pings);
        }
    }
}

// ------------------------------------------------------------------ driver

/// The driver's measuring options, for its client.
fn pass_through(o: &Opts, cmd: &mut Command) {
    cmd.args([
        "--size",
        &o.size.to_string(),
        "--iters",
        &o.iters.to_string(),
    ])
    .args(["--warmup", &o.warmup.to_string()])
    .args(["--rate-count", &o.rate_count.to_string()]);
}

fn driver(o: &Opts) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let (modes, mtu) = (&o.modes, o.mtu);
    let pair = HostPair::with_mtu(mtu).map_err(|e| format!("creating test hosts: {e}"))?;
    eprintln!("test hosts (MTU {mtu}): {} <-> {}", pair.a, pair.b);
    let mut results = Vec::new();
    for (i, mode) in modes.iter().enumerate() {
        let mut srv = pair.b.command(&exe);
        srv.args(["link-pingpong", "--server", "--ifname", pair.b.ifname()])
            .args(["--mode", &mode.to_string()])
            .stdout(Stdio::piped());
        let mut server = ChildGuard(srv.spawn().map_err(|e| format!("starting server: {e}"))?);
        let out = server.0.stdout.take().ok_or("server stdout")?;
        let mut line = String::new();
        BufReader::new(out)
            .read_line(&mut line)
            .map_err(|e| format!("reading server: {e}"))?;
        if line.trim() != "READY" {
            let _ = server.0.wait();
            return Err(format!("server ({mode}) failed to start"));
        }
        let mut cli = pair.a.command(&exe);
        cli.args(["link-pingpong", "--client", "--ifname", pair.a.ifname()])
            .args(["--mode", &mode.to_string()])
            .args(["--peer-ip", &pair.b.ipv4().to_string(), "--no-table"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if i > 0 || o.no_kernel {
            cli.arg("--no-kernel");
        }
        pass_through(o, &mut cli);
        let out = cli.output().map_err(|e| format!("running client: {e}"))?;
        if !out.status.success() {
            return Err(format!("client ({mode}) failed: {}", out.status));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        results.extend(text.lines().filter_map(Measured::parse));
        // The server exits on Q; give it a moment, then the guard ends it.
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(2) {
            if let Ok(Some(_)) = server.0.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    // Kernel row last, as the reference.
    results.sort_by_key(|r| r.label.starts_with("kernel"));
    print_table(&results, o.size);
    for r in &results {
        println!("{}", r.result_line());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_line_roundtrip() {
        let m = Measured {
            label: "x y".into(),
            p50_ns: 1,
            p99_ns: 2,
            mean_ns: 3,
            lost_pings: 4,
            tx_pps: 5.0,
            rx_pps: 6.0,
            delivered: 0.5,
        };
        let p = Measured::parse(&m.result_line()).unwrap();
        assert_eq!((p.label.as_str(), p.p99_ns, p.delivered), ("x y", 2, 0.5));
        assert!(Measured::parse("RESULT|short").is_none());
    }

    #[test]
    fn percentiles() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50), 51);
        assert_eq!(percentile(&v, 99), 100);
        assert_eq!(percentile(&[], 50), 0);
    }
}
