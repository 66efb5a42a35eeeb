//! Two test hosts joined through a forwarding host that impairs what it
//! forwards: drops, duplicates, corrupts, reorders and delays UDP datagrams
//! at set rates, from a seeded generator — the impairment element of a real
//! path, like the UEC reference provider's impairment shim.
//!
//! `a` ↔ forwarder ↔ `b`, each link a veth pair; the forwarder is a
//! namespace (`oxt-<pid>-<n>-f`) in which a thread of this process moves
//! every frame between its two interfaces through `AF_PACKET` sockets, so
//! `a` and `b` share one Ethernet segment and subnet (ARP and neighbour
//! discovery pass unimpaired; both hosts have TX checksum offload off, so
//! kernel sockets' frames carry complete checksums). A userspace forwarder because the element
//! must impair what AF_XDP sends: copy-mode AF_XDP transmit bypasses the
//! sender's qdisc, and kernels without `sch_netem` (this project's test
//! machines have none) have no qdisc to impair with anyway.
//!
//! Like netem: `loss`, `duplicate` and `corrupt` (one bit flipped anywhere
//! after the Ethernet header) are independent per datagram; `delay` delays
//! every datagram, except a `reorder` fraction sent at once — ahead of the
//! delayed ones.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::raw::{RawPort, enter_netns};
use crate::{
    Host, configure, delete_netns, new_netns, next_ids, topology_mac, veth_to, wait_running,
};

/// What the forwarder does to UDP datagrams (fractions in [0, 1]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Impairment {
    /// Dropped.
    pub loss: f64,
    /// Forwarded twice.
    pub duplicate: f64,
    /// One random bit flipped.
    pub corrupt: f64,
    /// Sent at once, overtaking the delayed ones (needs `delay`).
    pub reorder: f64,
    /// Added to every datagram's way.
    pub delay: Duration,
    /// Seed of the generator that decides.
    pub seed: u64,
}

impl Impairment {
    /// 5 % loss, 2 % duplication, 1 % corruption, 25 % reordered, 1 ms delay.
    pub fn harsh(seed: u64) -> Impairment {
        Impairment {
            loss: 0.05,
            duplicate: 0.02,
            corrupt: 0.01,
            reorder: 0.25,
            delay: Duration::from_millis(1),
            seed,
        }
    }
}

/// What the forwarder did to the UDP datagrams it saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ForwarderCounts {
    pub udp: u64,
    pub dropped: u64,
    pub duplicated: u64,
    pub corrupted: u64,
    pub reordered: u64,
    /// Frames of other kinds, forwarded untouched (ARP, ICMP, …).
    pub other: u64,
}

#[derive(Default)]
struct Counters {
    udp: AtomicU64,
    dropped: AtomicU64,
    duplicated: AtomicU64,
    corrupted: AtomicU64,
    reordered: AtomicU64,
    other: AtomicU64,
}

/// Two hosts joined through an impairing forwarder. Removed on drop.
#[derive(Debug)]
pub struct ImpairedPair {
    pub a: Host,
    pub b: Host,
    forwarder_ns: String,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    stop: AtomicBool,
    impairment: Mutex<Impairment>,
    counters: Counters,
}

impl core::fmt::Debug for Shared {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Shared(..)")
    }
}

impl ImpairedPair {
    /// `a` and `b` joined through a forwarder applying `imp`, links with MTU `mtu`.
    pub fn new(mtu: u32, imp: Impairment) -> io::Result<ImpairedPair> {
        let (pid, k) = next_ids();
        let x = (pid.wrapping_mul(37).wrapping_add(k) % 256) as u8;
        let names: Vec<String> = ["a", "b", "f"]
            .iter()
            .map(|s| format!("oxt-{pid}-{k}-{s}"))
            .collect();
        let mut created = Vec::new();
        let r = (|| {
            let mut hosts = Vec::new();
            for ns in &names {
                new_netns(ns)?;
                created.push(ns.clone());
            }
            let f = &names[2];
            for (i, side) in ['a', 'b'].into_iter().enumerate() {
                let mac = topology_mac((pid, k), x, 0x20, i);
                let (ifname, fport) = veth_to((pid, k), side, (&names[i], f), mac, mtu)?;
                crate::ip(&["-n", f, "link", "set", &fport, "promisc", "on", "up"])?;
                let v4 = Ipv4Addr::new(198, 19, x, 200 + i as u8);
                let v6 = Ipv6Addr::new(0xfd6f, 0x6678, 0x6472, u16::from(x), 0, 0, 0, i as u16 + 1);
                let host = Host::new(names[i].clone(), ifname, (v4, v6), mac, mtu);
                configure(&host)?;
                hosts.push(host);
            }
            for h in &hosts {
                wait_running(h)?;
                // The forwarder copies frames as they are: a kernel socket's
                // checksums must be complete in them, not left to an
                // offload that the copy would skip.
                let out = h
                    .command("ethtool")
                    .args(["-K", h.ifname(), "tx", "off"])
                    .output()?;
                if !out.status.success() {
                    return Err(io::Error::other(format!(
                        "ethtool -K {} tx off: {}",
                        h.ifname(),
                        String::from_utf8_lossy(&out.stderr)
                    )));
                }
            }
            Ok(hosts)
        })();
        let hosts = match r {
            Ok(h) => h,
            Err(e) => {
                delete_netns(&created);
                return Err(e);
            }
        };
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            impairment: Mutex::new(imp),
            counters: Counters::default(),
        });
        let mut hosts = hosts.into_iter();
        let (Some(a), Some(b)) = (hosts.next(), hosts.next()) else {
            delete_netns(&created);
            return Err(io::Error::other("hosts missing"));
        };
        let ports = [format!("ox{pid}.{k}A"), format!("ox{pid}.{k}B")];
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let sh = shared.clone();
        let fns = names[2].clone();
        let thread = std::thread::Builder::new()
            .name("impair-fwd".into())
            .spawn(move || {
                let sockets = enter_netns(&fns)
                    .and_then(|()| Ok([RawPort::bind(&ports[0])?, RawPort::bind(&ports[1])?]));
                match sockets {
                    Ok(s) => {
                        let _ = ready_tx.send(Ok(()));
                        forward(s, &sh);
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                }
            })?;
        let ready = ready_rx
            .recv()
            .map_err(|_| io::Error::other("forwarder thread died"))
            .and_then(|r| r);
        let pair = ImpairedPair {
            a,
            b,
            forwarder_ns: names[2].clone(),
            shared,
            thread: Some(thread),
        };
        ready?;
        Ok(pair)
    }

    /// Change the impairment (the generator is re-seeded with its seed).
    pub fn set(&self, imp: Impairment) {
        if let Ok(mut i) = self.shared.impairment.lock() {
            *i = imp;
        }
    }

    /// What the forwarder did so far.
    pub fn counts(&self) -> ForwarderCounts {
        let c = &self.shared.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ForwarderCounts {
            udp: l(&c.udp),
            dropped: l(&c.dropped),
            duplicated: l(&c.duplicated),
            corrupted: l(&c.corrupted),
            reordered: l(&c.reordered),
            other: l(&c.other),
        }
    }

    /// Names of every namespace, for checks that they are gone after drop.
    pub fn netns_names(&self) -> [String; 3] {
        [
            self.a.netns().to_owned(),
            self.b.netns().to_owned(),
            self.forwarder_ns.clone(),
        ]
    }
}

impl Drop for ImpairedPair {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        delete_netns(&self.netns_names());
    }
}

/// A frame waiting to be sent out of port `out` at `at`.
struct Pending {
    at: Instant,
    order: u64,
    out: usize,
    frame: Vec<u8>,
}

impl PartialEq for Pending {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.order) == (o.at, o.order)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Pending {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.order).cmp(&(o.at, o.order))
    }
}

/// SplitMix64, for the impairment decisions.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && ((self.next() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
}

/// Whether an Ethernet frame carries UDP over IPv4 or IPv6.
fn is_udp(f: &[u8]) -> bool {
    match f.get(12..14) {
        Some([0x08, 0x00]) => f.get(23) == Some(&17),
        Some([0x86, 0xdd]) => f.get(20) == Some(&17),
        _ => false,
    }
}

/// The forwarder's loop: until told to stop, move frames between the two
/// ports, impairing UDP ones.
fn forward(ports: [RawPort; 2], sh: &Shared) {
    let mut current = Impairment::default();
    let mut rng = Rng(0);
    let mut queue: BinaryHeap<Reverse<Pending>> = BinaryHeap::new();
    let mut order = 0u64;
    let mut buf = vec![0u8; 65536];
    let c = &sh.counters;
    while !sh.stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        while queue.peek().is_some_and(|Reverse(p)| p.at <= now) {
            if let Some(Reverse(p)) = queue.pop() {
                ports[p.out].send(&p.frame);
            }
        }
        let wait = queue.peek().map_or(10, |Reverse(p)| {
            p.at.saturating_duration_since(now).as_millis().min(10) as i32
        });
        let mut fds = [0, 1].map(|i| libc::pollfd {
            fd: ports[i].fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        // SAFETY: two valid pollfds.
        unsafe { libc::poll(fds.as_mut_ptr(), 2, wait) };
        if let Ok(imp) = sh.impairment.lock()
            && *imp != current
        {
            current = *imp;
            rng = Rng(current.seed);
        }
        for (i, port) in ports.iter().enumerate() {
            while let Some(n) = port.try_recv(&mut buf) {
                let frame = &buf[..n];
                let out = 1 - i;
                let now = Instant::now();
                order += 1;
                if !is_udp(frame) {
                    c.other.fetch_add(1, Ordering::Relaxed);
                    ports[out].send(frame);
                    continue;
                }
                c.udp.fetch_add(1, Ordering::Relaxed);
                if rng.chance(current.loss) {
                    c.dropped.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                let copies = if rng.chance(current.duplicate) {
                    c.duplicated.fetch_add(1, Ordering::Relaxed);
                    2
                } else {
                    1
                };
                for _ in 0..copies {
                    let mut f = frame.to_vec();
                    if rng.chance(current.corrupt) && f.len() > 14 {
                        let bit = 14 * 8 + (rng.next() % ((f.len() as u64 - 14) * 8)) as usize;
                        f[bit / 8] ^= 1 << (bit % 8);
                        c.corrupted.fetch_add(1, Ordering::Relaxed);
                    }
                    let at = if !current.delay.is_zero() && rng.chance(current.reorder) {
                        c.reordered.fetch_add(1, Ordering::Relaxed);
                        now
                    } else {
                        now + current.delay
                    };
                    order += 1;
                    queue.push(Reverse(Pending {
                        at,
                        order,
                        out,
                        frame: f,
                    }));
                }
            }
        }
    }
}
