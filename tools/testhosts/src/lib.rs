//! Test hosts: pairs of network namespaces joined by a veth pair; several
//! hosts on one bridged segment ([`Segment`]); hosts in their own subnets
//! behind a router ([`Routed`]) or under the leaves of a leaf–spine fabric
//! ([`LeafSpine`]); two hosts joined through a forwarding host
//! that impairs what it forwards ([`ImpairedPair`]).
//!
//! Everything is created with the `ip` command (iproute2) under names that
//! embed the creating process's PID and a per-process counter, and removed on
//! [`Drop`] — also when a test panics, since `Drop` runs during unwinding. A
//! best-effort reaper removes leftovers of processes that died without
//! unwinding (SIGKILL, abort) whenever a new pair is created.
//!
//! With [`nics::NICS_ENV`] set, pairs are made of two real NICs moved into
//! the namespaces instead of a veth pair (`nics.rs`).
//!
//! Addresses live only inside the namespaces: IPv4 from 198.18.0.0/15 (RFC
//! 2544, reserved for benchmarking, never routed) as a /30 per pair, and IPv6
//! from the ULA prefix fd6f:6678:6470::/48 (RFC 4193) as a /64 per pair. Both
//! namespaces have loopback up and no route out, so no packet can leave them.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::fs::File;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

mod impair;
mod leafspine;
mod raw;
mod routed;
mod segment;

pub use impair::{ForwarderCounts, ImpairedPair, Impairment};
pub use leafspine::{LeafSpine, MAX_HOSTS_PER_LEAF, SPINE_COUNTS};
pub use raw::RawPort;
pub use routed::{MAX_ROUTED_HOSTS, Routed};
pub use segment::Segment;
pub mod nics;
pub mod skip;

/// Prefix of every namespace we create: `oxt-<pid>-<n>-<a|b>`.
const NETNS_PREFIX: &str = "oxt-";
/// Prefix of every veth we create: `ox<pid>.<n><a|b>` (≤ 15 bytes, IFNAMSIZ-1).
const VETH_PREFIX: &str = "ox";
/// Where `ip netns add` puts its bind mounts.
const NETNS_RUN_DIR: &str = "/run/netns";
/// Per-process counter: only its value mod 10000 appears in interface names.
pub(crate) static NEXT_PAIR: AtomicU32 = AtomicU32::new(0);
/// Names fit IFNAMSIZ with a 7-digit PID and a 4-digit counter.
pub(crate) const COUNTER_MODULUS: u32 = 10_000;

/// One end of a [`HostPair`]: a network namespace holding one veth end.
#[derive(Debug, Clone)]
pub struct Host {
    netns: String,
    ifname: String,
    ipv4: Ipv4Addr,
    ipv6: Ipv6Addr,
    mac: [u8; 6],
    mtu: u32,
    /// IPv4 prefix length: [`Host::IPV4_PREFIX_LEN`] in a pair, wider on a segment.
    prefix4: u8,
}

/// Two network namespaces joined by one veth pair, both ends up and addressed.
/// Removed on drop.
#[derive(Debug)]
pub struct HostPair {
    pub a: Host,
    pub b: Host,
    /// Set when the pair is made of real NICs ([`nics`]).
    nics: Option<nics::Lease>,
}

impl Host {
    /// Name of the network namespace (as in `ip netns list`).
    pub fn netns(&self) -> &str {
        &self.netns
    }

    /// Name of this host's veth end (inside its namespace).
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// IPv4 address of the veth end (prefix length [`Host::IPV4_PREFIX_LEN`]).
    pub fn ipv4(&self) -> Ipv4Addr {
        self.ipv4
    }

    /// IPv6 ULA address of the veth end (prefix length [`Host::IPV6_PREFIX_LEN`]).
    pub fn ipv6(&self) -> Ipv6Addr {
        self.ipv6
    }

    /// MAC address of the veth end (locally administered, set at creation).
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// MTU of the veth end.
    pub fn mtu(&self) -> u32 {
        self.mtu
    }

    pub const IPV4_PREFIX_LEN: u8 = 30;
    pub const IPV6_PREFIX_LEN: u8 = 64;

    /// Runs `f` on a fresh thread that has joined this host's network namespace
    /// (a thread's network namespace is per-thread, see setns(2)), and returns
    /// its result. Sockets created inside `f` belong to the namespace and keep
    /// belonging to it when used from other threads afterwards.
    ///
    /// # Panics
    /// Panics if the namespace cannot be joined (see [`Host::try_run`]), and
    /// re-raises a panic of `f`.
    pub fn run<R: Send, F: FnOnce() -> R + Send>(&self, f: F) -> R {
        match self.try_run(f) {
            Ok(r) => r,
            Err(e) => panic!("cannot enter network namespace {}: {e}", self.netns),
        }
    }

    /// Like [`Host::run`], but returns an error when the namespace cannot be
    /// joined instead of panicking.
    pub fn try_run<R: Send, F: FnOnce() -> R + Send>(&self, f: F) -> io::Result<R> {
        let ns_file = File::open(Path::new(NETNS_RUN_DIR).join(&self.netns))?;
        std::thread::scope(|scope| {
            let worker = std::thread::Builder::new()
                .name(format!("netns {}", self.netns))
                .spawn_scoped(scope, move || -> io::Result<R> {
                    // SAFETY: setns on a valid namespace fd; affects this thread only.
                    let rc = unsafe { libc::setns(ns_file.as_raw_fd(), libc::CLONE_NEWNET) };
                    if rc != 0 {
                        return Err(io::Error::last_os_error());
                    }
                    Ok(f())
                })?;
            match worker.join() {
                Ok(result) => result,
                Err(panic) => std::panic::resume_unwind(panic),
            }
        })
    }

    /// A `Command` that runs `program` inside this host's namespace (through
    /// `ip netns exec`). Add arguments as usual.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new(ip_program());
        cmd.args(["netns", "exec"]).arg(&self.netns).arg(program);
        cmd
    }

    /// A raw socket on this host's interface: frames sent as given, every
    /// frame the interface receives seen.
    pub fn raw_port(&self) -> io::Result<RawPort> {
        RawPort::open(&self.netns, &self.ifname)
    }

    /// Runs `ip <args>` inside this namespace (`ip -n <netns> <args>`) and
    /// fails with its stderr when it fails.
    pub fn ip(&self, args: &[&str]) -> io::Result<String> {
        let mut full: Vec<&str> = vec!["-n", &self.netns];
        full.extend_from_slice(args);
        ip(&full)
    }
}

/// What a veth end's receive queue counted (`ethtool -S`, veth's per-queue
/// statistics: filled only while native XDP runs on the end).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Frames the XDP program ran on.
    pub xdp_packets: u64,
    /// Frames redirected (into an AF_XDP socket).
    pub xdp_redirect: u64,
    /// Frames dropped: `drops` (a redirect that failed included) plus
    /// `xdp_drops`.
    pub drops: u64,
}

impl Host {
    /// Per receive queue of this host's veth end, what it counted so far.
    pub fn queue_stats(&self) -> io::Result<Vec<QueueStats>> {
        let out = self
            .command("ethtool")
            .args(["-S", &self.ifname])
            .output()?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "ethtool -S {}: {}",
                self.ifname,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(parse_queue_stats(&String::from_utf8_lossy(&out.stdout)))
    }
}

/// `rx_queue_<n>_<name>: <value>` lines of `ethtool -S` on a veth end.
fn parse_queue_stats(text: &str) -> Vec<QueueStats> {
    let mut queues: Vec<QueueStats> = Vec::new();
    for line in text.lines() {
        let Some((key, value)) = line.trim().split_once(": ") else {
            continue;
        };
        let Some(rest) = key.strip_prefix("rx_queue_") else {
            continue;
        };
        let Some((n, name)) = rest.split_once('_') else {
            continue;
        };
        let (Ok(n), Ok(v)) = (n.parse::<usize>(), value.trim().parse::<u64>()) else {
            continue;
        };
        if queues.len() <= n {
            queues.resize(n + 1, QueueStats::default());
        }
        let q = &mut queues[n];
        match name {
            "xdp_packets" => q.xdp_packets = v,
            "xdp_redirect" => q.xdp_redirect = v,
            "drops" | "xdp_drops" => q.drops += v,
            _ => {}
        }
    }
    queues
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{} {} {} {}",
            self.netns,
            self.ifname,
            self.ipv4,
            self.ipv6,
            format_mac(&self.mac)
        )
    }
}

impl HostPair {
    /// Creates two namespaces joined by a veth pair with MTU 1500.
    pub fn new() -> io::Result<HostPair> {
        Self::with_mtu(1500)
    }

    /// Creates two namespaces joined by a veth pair with the given MTU on both
    /// ends. Native-mode XDP on veth needs MTU ≤ ~3500 (one page per frame).
    ///
    /// Each end has one queue: every frame then arrives on rx queue 0, where
    /// AF_XDP sockets bind by default.
    pub fn with_mtu(mtu: u32) -> io::Result<HostPair> {
        Self::with_queues(mtu, 1)
    }

    /// Like [`HostPair::with_mtu`], with `queues` receive and transmit
    /// queues on each end. With native XDP attached to an end, a frame
    /// arrives on the receive queue numbered as the transmit queue the peer
    /// sent it from (veth_xmit keeps the skb's queue mapping): an AF_XDP
    /// socket's copy-mode transmit uses its own queue, the kernel's stack
    /// one picked by the flow's hash.
    ///
    /// With [`nics::NICS_ENV`] set, the pair is made of those two NICs
    /// instead, with the queues they have.
    pub fn with_queues(mtu: u32, queues: u32) -> io::Result<HostPair> {
        reap_stale();
        if let Some(nics) = nics::from_env() {
            return nics::pair(mtu, nics);
        }
        let pid = std::process::id();
        let n = NEXT_PAIR.fetch_add(1, Ordering::Relaxed) % COUNTER_MODULUS;
        let names = Names::new(pid, n);
        let addr = Addressing::new(pid, n);

        // Build into a guard first so a failure half-way removes what exists.
        let mut guard = PairGuard {
            netns: Vec::new(),
            veth_in_root: None,
        };
        for ns in [&names.netns_a, &names.netns_b] {
            add_netns(ns)?;
            guard.netns.push(ns.clone());
        }
        let mac_a = addr.mac(0);
        let mac_b = addr.mac(1);
        // Create both ends directly inside their namespaces, so nothing ever
        // appears in the caller's namespace. The queue count is explicit
        // (veth defaults to one per CPU), so tests know where frames land.
        guard.veth_in_root = Some(names.veth_a.clone());
        add_veth(
            (&names.veth_a, &names.netns_a, mac_a),
            (&names.veth_b, &names.netns_b, mac_b),
            mtu,
            queues,
        )?;
        guard.veth_in_root = None;

        let a = Host {
            netns: names.netns_a,
            ifname: names.veth_a,
            ipv4: addr.ipv4(0),
            ipv6: addr.ipv6(0),
            mac: mac_a,
            mtu,
            prefix4: Host::IPV4_PREFIX_LEN,
        };
        let b = Host {
            netns: names.netns_b,
            ifname: names.veth_b,
            ipv4: addr.ipv4(1),
            ipv6: addr.ipv6(1),
            mac: mac_b,
            mtu,
            prefix4: Host::IPV4_PREFIX_LEN,
        };
        for host in [&a, &b] {
            configure(host)?;
        }
        for host in [&a, &b] {
            wait_running(host)?;
        }
        // Everything exists: ownership moves to the HostPair's Drop.
        guard.netns.clear();
        Ok(HostPair { a, b, nics: None })
    }

    /// Bound on waiting for a new veth's carrier (it takes a linkwatch round, well under 1 s).
    pub const CARRIER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

    /// The other end of `host`'s veth (`a` for `b`, `b` for `a`).
    pub fn peer_of(&self, host: &Host) -> &Host {
        if host.netns == self.a.netns {
            &self.b
        } else {
            &self.a
        }
    }

    /// True when the pair is made of real NICs ([`nics::NICS_ENV`]), not a
    /// veth pair: tests of veth's own behaviour skip themselves.
    pub fn on_nics(&self) -> bool {
        self.nics.is_some()
    }

    /// Namespaces of the pair, for checks that they are gone after drop.
    pub fn netns_names(&self) -> [String; 2] {
        [self.a.netns.clone(), self.b.netns.clone()]
    }
}

impl Drop for HostPair {
    fn drop(&mut self) {
        if let Some(lease) = &mut self.nics {
            lease.release();
        }
        // Deleting a namespace destroys the veth end inside it, and destroying
        // one veth end destroys its peer.
        for ns in [&self.a.netns, &self.b.netns] {
            if let Err(e) = ip(&["netns", "delete", ns]) {
                eprintln!("testhosts: could not delete netns {ns}: {e}");
            }
        }
    }
}

/// Removes half-built state when `HostPair::with_mtu` fails.
struct PairGuard {
    netns: Vec<String>,
    veth_in_root: Option<String>,
}

impl Drop for PairGuard {
    fn drop(&mut self) {
        if let Some(veth) = &self.veth_in_root {
            // Exists only if `ip link add` half-failed; ignore "not found".
            let _ = ip(&["link", "delete", veth]);
        }
        for ns in &self.netns {
            let _ = ip(&["netns", "delete", ns]);
        }
    }
}

/// A veth pair `name_a` (in `ns_a`, MAC `mac_a`) ↔ `name_b` (in `ns_b`,
/// MAC `mac_b`), both ends created directly in their namespaces, one queue
/// each (see [`HostPair::with_mtu`]), MTU `mtu`.
pub(crate) fn add_veth(
    (name_a, ns_a, mac_a): (&str, &str, [u8; 6]),
    (name_b, ns_b, mac_b): (&str, &str, [u8; 6]),
    mtu: u32,
    queues: u32,
) -> io::Result<()> {
    let mtu = mtu.to_string();
    let queues = queues.max(1).to_string();
    // One end's settings: its address, MTU, queues each way, namespace.
    let end = |mac: &str, ns: &str| {
        [
            "address",
            mac,
            "mtu",
            &mtu,
            "numtxqueues",
            &queues,
            "numrxqueues",
            &queues,
            "netns",
            ns,
        ]
        .map(str::to_owned)
    };
    let mut args = vec!["link".to_owned(), "add".into(), name_a.into()];
    args.extend(end(&format_mac(&mac_a), ns_a));
    args.extend(["type", "veth", "peer", "name", name_b].map(str::to_owned));
    args.extend(end(&format_mac(&mac_b), ns_b));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ip(&args).map(|_| ())
}

/// A new namespace of ours named `name`, loopback up (see [`add_netns`]).
pub(crate) fn new_netns(name: &str) -> io::Result<()> {
    add_netns(name)?;
    ip(&["-n", name, "link", "set", "lo", "up"]).map(|_| ())
}

/// Deletes namespaces, reporting failures on stderr (for `Drop`s).
pub(crate) fn delete_netns<'a>(names: impl IntoIterator<Item = &'a String>) {
    for ns in names {
        if let Err(e) = ip(&["netns", "delete", ns]) {
            eprintln!("testhosts: could not delete netns {ns}: {e}");
        }
    }
}

/// Host `letter` of topology (`pid`, `k`): its veth end `ox<pid>.<k><letter>`
/// in `host_ns` with MAC `mac`, and the other end `ox<pid>.<k><LETTER>` (the
/// same MAC with the top bit of its last byte set) in `other_ns`. Returns
/// both names.
pub(crate) fn veth_to(
    (pid, k): (u32, u32),
    letter: char,
    (host_ns, other_ns): (&str, &str),
    mac: [u8; 6],
    mtu: u32,
) -> io::Result<(String, String)> {
    let ifname = format!("{VETH_PREFIX}{pid}.{k}{letter}");
    let other = format!("{VETH_PREFIX}{pid}.{k}{}", letter.to_ascii_uppercase());
    let mut other_mac = mac;
    other_mac[5] |= 0x80;
    add_veth(
        (&ifname, host_ns, mac),
        (&other, other_ns, other_mac),
        mtu,
        1,
    )?;
    Ok((ifname, other))
}

/// A locally administered MAC for host `i` of topology (`pid`, `k`), `x`
/// its addressing byte and `tag` the kind of topology.
pub(crate) fn topology_mac((pid, k): (u32, u32), x: u8, tag: u8, i: usize) -> [u8; 6] {
    [0x02, (pid >> 8) as u8, pid as u8, k as u8, x, tag + i as u8]
}

/// A fresh (pid, counter) for names and addresses.
pub(crate) fn next_ids() -> (u32, u32) {
    reap_stale();
    let n = NEXT_PAIR.fetch_add(1, Ordering::Relaxed) % COUNTER_MODULUS;
    (std::process::id(), n)
}

/// `ip netns add`, retried a few times: concurrent first uses of /run/netns
/// by several processes (iproute2 makes it a shared mount on first use) can
/// fail transiently.
fn add_netns(name: &str) -> io::Result<()> {
    let mut attempt = 0;
    loop {
        match ip(&["netns", "add", name]) {
            Ok(_) => return Ok(()),
            Err(e) if attempt < 3 && e.kind() == io::ErrorKind::Other => {
                attempt += 1;
                // A half-created entry would make the retry fail with EEXIST.
                let _ = ip(&["netns", "delete", name]);
                std::thread::sleep(std::time::Duration::from_millis(20 * attempt));
            }
            Err(e) => return Err(e),
        }
    }
}

pub(crate) fn configure(host: &Host) -> io::Result<()> {
    host.ip(&["link", "set", "lo", "up"])?;
    // nodad: the address is usable at once (no ~1 s duplicate detection).
    host.ip(&[
        "addr",
        "add",
        &format!("{}/{}", host.ipv4, host.prefix4),
        "dev",
        &host.ifname,
    ])?;
    host.ip(&[
        "-6",
        "addr",
        "add",
        &format!("{}/{}", host.ipv6, Host::IPV6_PREFIX_LEN),
        "dev",
        &host.ifname,
        "nodad",
    ])?;
    host.ip(&["link", "set", &host.ifname, "up"])?;
    Ok(())
}

struct Names {
    netns_a: String,
    netns_b: String,
    veth_a: String,
    veth_b: String,
}

impl Names {
    fn new(pid: u32, n: u32) -> Names {
        Names {
            netns_a: format!("{NETNS_PREFIX}{pid}-{n}-a"),
            netns_b: format!("{NETNS_PREFIX}{pid}-{n}-b"),
            veth_a: format!("{VETH_PREFIX}{pid}.{n}a"),
            veth_b: format!("{VETH_PREFIX}{pid}.{n}b"),
        }
    }
}

impl Host {
    /// A host of ours: namespace `netns`, interface `ifname` (already in
    /// it), addresses and MTU as given.
    pub(crate) fn new(
        netns: String,
        ifname: String,
        (ipv4, ipv6): (Ipv4Addr, Ipv6Addr),
        mac: [u8; 6],
        mtu: u32,
    ) -> Host {
        Host {
            netns,
            ifname,
            ipv4,
            ipv6,
            mac,
            mtu,
            prefix4: 24,
        }
    }
}

/// Per-pair addresses derived from the PID and counter, so parallel pairs
/// have distinct addresses in logs and captures (the namespaces are isolated
/// anyway).
struct Addressing {
    index: u32,
    pid: u32,
}

impl Addressing {
    fn new(pid: u32, n: u32) -> Addressing {
        Addressing {
            index: pid.wrapping_mul(31).wrapping_add(n),
            pid,
        }
    }

    /// 198.18.0.0/15 holds 32768 /30 subnets; hosts are .1 and .2 of one.
    fn ipv4(&self, side: u32) -> Ipv4Addr {
        let subnet = self.index % 32_768;
        let base = u32::from(Ipv4Addr::new(198, 18, 0, 0)) + subnet * 4;
        Ipv4Addr::from(base + 1 + side)
    }

    /// `fd6f:6678:6470:<subnet>::1` / `::2` — a ULA /64 per pair.
    fn ipv6(&self, side: u32) -> Ipv6Addr {
        let subnet = (self.index % 65_536) as u16;
        Ipv6Addr::new(0xfd6f, 0x6678, 0x6470, subnet, 0, 0, 0, 1 + side as u16)
    }

    /// `02:<pid 24 bits>:<index 8 bits>:<side>` — locally administered unicast.
    fn mac(&self, side: u8) -> [u8; 6] {
        let p = self.pid.to_be_bytes();
        let i = (self.index & 0x7f) as u8;
        [0x02, p[1], p[2], p[3], i, 0x0a + side]
    }
}

fn format_mac(mac: &[u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Runs `ip <args>`; on failure returns an error carrying the command line and
/// its stderr, or a hint to install iproute2 when `ip` is missing.
pub fn ip(args: &[&str]) -> io::Result<String> {
    let output = run_ip(args).map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            io::Error::new(
                io::ErrorKind::NotFound,
                "the `ip` command (iproute2) is missing: run `cargo xtask deps` \
                 or `apt-get install iproute2`",
            )
        } else {
            io::Error::new(
                e.kind(),
                format!("could not run `ip {}`: {e}", args.join(" ")),
            )
        }
    })?;
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let kind = if stderr.contains("Operation not permitted") {
        io::ErrorKind::PermissionDenied
    } else if stderr.contains("File exists") {
        io::ErrorKind::AlreadyExists
    } else if stderr.contains("Cannot find device")
        || stderr.contains("No such file")
        || stderr.contains("does not exist")
    {
        io::ErrorKind::NotFound
    } else {
        io::ErrorKind::Other
    };
    let hint = if kind == io::ErrorKind::PermissionDenied {
        " (creating namespaces and veths needs root / CAP_NET_ADMIN and CAP_SYS_ADMIN)"
    } else if stderr.contains("BusyBox") {
        " (this is BusyBox's `ip`, which has no netns or veth support: install iproute2)"
    } else {
        ""
    };
    Err(io::Error::new(
        kind,
        format!(
            "`ip {}` failed ({}): {}{hint}",
            args.join(" "),
            output.status,
            stderr.trim()
        ),
    ))
}

fn run_ip(args: &[&str]) -> io::Result<Output> {
    let args: Vec<OsString> = args.iter().map(OsString::from).collect();
    Command::new(ip_program()).args(&args).output()
}

/// The `ip` binary: from PATH, else the usual sbin locations (a PATH without
/// /usr/sbin is common for non-login root shells and CI runners).
pub(crate) fn ip_program() -> &'static Path {
    static IP: OnceLock<PathBuf> = OnceLock::new();
    IP.get_or_init(|| {
        let from_path = std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join("ip"))
                .find(|candidate| candidate.is_file())
        });
        from_path
            .or_else(|| {
                ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]
                    .into_iter()
                    .map(PathBuf::from)
                    .find(|candidate| candidate.is_file())
            })
            .unwrap_or_else(|| PathBuf::from("ip"))
    })
}

/// Names of network namespaces whose name starts with our prefix.
pub fn our_netns() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(NETNS_RUN_DIR) else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| name.starts_with(NETNS_PREFIX))
        .collect()
}

/// PID embedded in one of our namespace names (`oxt-<pid>-<n>-<side>`).
fn netns_pid(name: &str) -> Option<u32> {
    name.strip_prefix(NETNS_PREFIX)?
        .split('-')
        .next()?
        .parse()
        .ok()
}

/// PID embedded in one of our veth names (`ox<pid>.<n><side>`).
fn veth_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(VETH_PREFIX)?;
    let (pid, tail) = rest.split_once('.')?;
    if tail.is_empty() || !tail.ends_with(['a', 'b']) {
        return None;
    }
    pid.parse().ok()
}

fn pid_alive(pid: u32) -> bool {
    // kill(pid, 0) checks existence; EPERM still means it exists.
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 sends nothing.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Removes namespaces and root-namespace veths with our prefix whose creating
/// process is gone. Best effort: errors are ignored (another process may be
/// reaping the same leftovers at the same time).
///
/// A killed process's leftovers carry its PID, and the kernel hands PIDs out
/// again (pid_max is 32768 on small machines): leftovers that carry *our*
/// PID were left by an earlier process that had it, since this process has
/// made nothing before its first call here. They are removed on that first
/// call, or our own names would collide with them.
pub fn reap_stale() {
    static PREDECESSOR_REAPED: std::sync::Once = std::sync::Once::new();
    let me = std::process::id();
    // Inside call_once: a second thread waits here until it is done, so it
    // cannot make a name of ours that this would then delete.
    PREDECESSOR_REAPED.call_once(|| reap_where(|pid| pid == me));
    reap_where(|pid| pid != me && !pid_alive(pid));
}

/// Deletes our namespaces and root-namespace veths whose embedded PID
/// satisfies `stale`.
fn reap_where(stale: impl Fn(u32) -> bool) {
    for ns in our_netns() {
        if netns_pid(&ns).is_some_and(&stale) {
            let _ = ip(&["netns", "delete", &ns]);
        }
    }
    for link in root_links() {
        if veth_pid(&link).is_some_and(&stale) {
            let _ = ip(&["link", "delete", &link]);
        }
    }
}

/// Interface names in the caller's namespace that start with our prefix.
fn root_links() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/sys/class/net") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| name.starts_with(VETH_PREFIX))
        .collect()
}

/// Waits until `host`'s veth reports carrier (`LOWER_UP`, operstate `UP`). The kernel sets
/// `IFF_RUNNING` a linkwatch round after both ends are up; a pair handed out before that makes
/// whoever looks at the interface flags at once (libfabric providers' getinfo does) see it down.
pub(crate) fn wait_running(host: &Host) -> io::Result<()> {
    let start = std::time::Instant::now();
    loop {
        let line = host.ip(&["-o", "link", "show", "dev", &host.ifname])?;
        if is_running(&line) {
            return Ok(());
        }
        if start.elapsed() > HostPair::CARRIER_TIMEOUT {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "{} in {} has no carrier after {:?}: {line}",
                    host.ifname,
                    host.netns,
                    HostPair::CARRIER_TIMEOUT
                ),
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// True for an `ip -o link show` line of an interface with carrier: flags contain `LOWER_UP`
/// and the operational state is `UP`.
fn is_running(line: &str) -> bool {
    let flags = line
        .split_once('<')
        .and_then(|(_, rest)| rest.split_once('>'))
        .map(|(flags, _)| flags)
        .unwrap_or("");
    flags.split(',').any(|f| f == "LOWER_UP") && line.contains(" state UP ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_ifnamsiz() {
        let names = Names::new(4_194_304, COUNTER_MODULUS - 1);
        assert!(names.veth_a.len() <= 15, "{}", names.veth_a);
        assert_eq!(veth_pid(&names.veth_b), Some(4_194_304));
        assert_eq!(netns_pid(&names.netns_a), Some(4_194_304));
        assert_eq!(veth_pid("oxeth0"), None);
        assert_eq!(netns_pid("other"), None);
    }

    #[test]
    fn addresses_are_in_reserved_ranges() {
        for (pid, n) in [(1, 0), (4_194_304, 9_999), (77_777, 5)] {
            let a = Addressing::new(pid, n);
            let v4 = a.ipv4(1).octets();
            assert_eq!(v4[0], 198);
            assert!(v4[1] == 18 || v4[1] == 19);
            assert_eq!(a.ipv4(0).octets()[3] % 4, 1);
            assert_eq!(a.ipv6(0).segments()[0], 0xfd6f);
            assert_eq!(a.mac(0)[0] & 0x03, 0x02, "locally administered unicast");
        }
    }

    #[test]
    fn reads_veth_queue_statistics() {
        let text = "NIC statistics:\n     peer_ifindex: 2\n     rx_queue_0_xdp_packets: 5\n     \
                    rx_queue_0_drops: 1\n     rx_queue_0_xdp_redirect: 4\n     \
                    rx_queue_1_xdp_drops: 2\n     rx_queue_1_xdp_packets: 7\n";
        assert_eq!(
            parse_queue_stats(text),
            vec![
                QueueStats {
                    xdp_packets: 5,
                    xdp_redirect: 4,
                    drops: 1
                },
                QueueStats {
                    xdp_packets: 7,
                    xdp_redirect: 0,
                    drops: 2
                },
            ]
        );
    }

    #[test]
    fn reads_carrier_from_ip_link_lines() {
        let up = "2: ox1.0a@if2: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP mode DEFAULT";
        let lowerdown = "2: ox1.0a@if2: <NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 1500 qdisc noqueue state LOWERLAYERDOWN mode DEFAULT";
        let dormant = "2: ox1.0a@if2: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state DOWN mode DEFAULT";
        assert!(is_running(up));
        assert!(!is_running(lowerdown));
        assert!(!is_running(dormant));
    }
}
