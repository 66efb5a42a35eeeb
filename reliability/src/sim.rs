//! Deterministic network simulation for tests, fuzzing and benchmarks.
//!
//! N endpoints (keys `0..N`) exchange datagrams over a simulated network with
//! virtual time and seeded faults: loss, duplication, reordering (latency
//! jitter), corruption, temporary partitions; optionally a bottleneck link
//! in front of every node with a queue that drops or ECN-marks
//! ([`Bottleneck`]), several paths between nodes that datagrams are sprayed
//! over, each with its own delay, loss and rate, and which may fail
//! ([`Multipath`]), and an attacker that replays, mangles and forges
//! datagrams ([`Adversary`]). Time advances only by stepping
//! to the next wake-up (the earliest datagram arrival or engine timer), so a
//! run is a pure function of its seed. A node can be restarted: its engine is
//! replaced by a fresh one with a new incarnation, and its datagrams still in
//! the network are purged (PROTOCOL.md §4.4: datagram lifetime < restart time).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::api::{Config, Event, RecvBuffers, SendBuffers};

pub mod memory;
use crate::engine::Engine;
use crate::rng::SplitMix64;
use crate::time::{Instant, Nanos};

mod adversary;
pub use adversary::{Adversary, AdversaryConfig, AdversaryCounts};

/// How far behind the first datagram of a joined read ([`Faults::coalesce`])
/// the others of its flow may be due.
pub const JOIN_WINDOW: Nanos = Nanos(50_000);

/// The link into each node: `rate` bytes per second behind a FIFO queue of
/// `queue` bytes (a switch port); datagrams that find it full are dropped,
/// and those that find more than `ecn_threshold` bytes queued are marked CE
/// (as a switch with ECN marking does, RFC 3168).
#[derive(Clone, Copy, Debug)]
pub struct Bottleneck {
    /// Bytes per second.
    pub rate: u64,
    /// Queue capacity in bytes.
    pub queue: usize,
    /// Mark CE above this many queued bytes; `None`: never mark.
    pub ecn_threshold: Option<usize>,
}

/// Fault knobs, probabilities in [0, 1].
#[derive(Clone, Copy, Debug)]
pub struct Faults {
    /// Probability a datagram is lost.
    pub loss: f64,
    /// Probability a datagram is delivered twice.
    pub dup: f64,
    /// Probability one byte of a datagram is flipped.
    pub corrupt: f64,
    /// Base one-way latency.
    pub latency: Nanos,
    /// Extra uniformly random delay in [0, jitter): reorders datagrams.
    pub jitter: Nanos,
    /// Link MTU: longer datagrams are dropped (as a switch drops oversized frames).
    pub mtu: usize,
    /// Probability a datagram is handed over in pieces, cut at random points
    /// (as AF_XDP multi-buffer delivers one per UMEM chunk):
    /// [`Engine::handle_datagram_pieces`].
    pub split: f64,
    /// A bottleneck link in front of every node.
    pub bottleneck: Option<Bottleneck>,
    /// Probability a datagram is joined with the later ones of its flow
    /// (same sender and receiver) due within [`JOIN_WINDOW`] of it into one
    /// read, as the kernel's UDP receive offload joins what one poll of
    /// the NIC brings on the bulk path (PROTOCOL.md §2.5): while they are
    /// as long as the first, and one shorter ends the read. The read
    /// arrives with the first; the receiver cuts it back with
    /// [`crate::wire::bulk::Segments`]; how they were sent plays no part.
    pub coalesce: f64,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            loss: 0.0,
            dup: 0.0,
            corrupt: 0.0,
            latency: Nanos::from_micros(5),
            jitter: Nanos(0),
            mtu: usize::MAX,
            split: 0.0,
            bottleneck: None,
            coalesce: 0.0,
        }
    }
}

/// One of several equal-cost paths between every two nodes (a spine of a
/// leaf–spine fabric): its own one-way delay, jitter, loss and rate.
#[derive(Clone, Copy, Debug)]
pub struct Path {
    /// One-way latency.
    pub latency: Nanos,
    /// Extra uniformly random delay in [0, jitter).
    pub jitter: Nanos,
    /// Probability a datagram taking it is lost.
    pub loss: f64,
    /// Bytes per second it carries towards each node (datagrams queue
    /// behind each other, none dropped); 0: no limit.
    pub rate: u64,
    /// From this time on it loses every datagram (a failed link);
    /// `Instant::NEVER`: never.
    pub dies_at: Instant,
}

impl Default for Path {
    fn default() -> Self {
        Path {
            latency: Nanos::from_micros(5),
            jitter: Nanos(0),
            loss: 0.0,
            rate: 0,
            dies_at: Instant::NEVER,
        }
    }
}

/// Several paths between every two nodes, chosen per datagram as a router
/// doing ECMP chooses: by a hash of the flow and its UDP source port. The
/// datagrams of each flow `src` → `dst` take `entropy` source ports in turn,
/// or with `by_engine` the one the engine picked ([`crate::Transmit::path`],
/// [`crate::Config::paths`]; PROTOCOL.md §4.6); value `i` takes path
/// `hash(src, dst, i) % paths.len()`. A path's
/// latency and jitter replace [`Faults::latency`] and [`Faults::jitter`];
/// its loss comes on top of [`Faults::loss`]; the other faults apply as
/// without paths.
#[derive(Clone, Debug, Default)]
pub struct Multipath {
    /// The paths.
    pub paths: Vec<Path>,
    /// Source ports per flow, taken in turn; at least 1.
    pub entropy: u16,
    /// Each datagram takes the value its engine picked instead.
    pub by_engine: bool,
}

/// What one path carried.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathCounts {
    /// Datagrams that took it.
    pub sent: u64,
    /// Of which it lost (its loss, or dead).
    pub lost: u64,
}

#[derive(Debug)]
struct InFlight {
    at: Instant,
    order: u64,
    src: usize,
    dst: usize,
    ce: bool,
    bytes: Vec<u8>,
}

impl PartialEq for InFlight {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.order) == (o.at, o.order)
    }
}
impl Eq for InFlight {}
impl PartialOrd for InFlight {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for InFlight {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.order).cmp(&(o.at, o.order))
    }
}

/// A simulated endpoint: an engine and the application's buffers.
#[derive(Debug)]
pub struct Node<A> {
    /// The engine.
    pub engine: Engine<usize>,
    /// The application (buffer store).
    pub app: A,
}

/// The simulated network.
#[derive(Debug)]
pub struct Sim<A> {
    /// Endpoints, indexed by key.
    pub nodes: Vec<Node<A>>,
    /// Current virtual time.
    pub now: Instant,
    /// Fault knobs (may be changed between steps).
    pub faults: Faults,
    rng: SplitMix64,
    queue: BinaryHeap<Reverse<InFlight>>,
    order: u64,
    /// Pairs (a, b) that cannot reach each other until the given time.
    partitions: Vec<(usize, usize, Instant)>,
    frame: Vec<u8>,
    /// When each node's bottleneck link is free again.
    busy_until: Vec<Instant>,
    /// Datagrams sent, lost, duplicated and corrupted by the network.
    pub counts: NetCounts,
    /// The attacker, if any (set it between steps).
    pub adversary: Option<Adversary>,
    /// Several paths between nodes, if any (set it between steps).
    pub multipath: Option<Multipath>,
    /// What each of the paths carried.
    pub path_counts: Vec<PathCounts>,
    /// Each flow's next entropy value, by `src * nodes + dst`.
    turns: Vec<u16>,
    /// When each path is free again towards each node.
    path_busy: Vec<Vec<Instant>>,
}

/// What the network did.
#[derive(Clone, Copy, Debug, Default)]
pub struct NetCounts {
    /// Datagrams handed to the network.
    pub sent: u64,
    /// Lost (random or partition).
    pub lost: u64,
    /// Duplicated.
    pub duplicated: u64,
    /// Corrupted.
    pub corrupted: u64,
    /// Delivered.
    pub delivered: u64,
    /// Of the lost, dropped by a full bottleneck queue.
    pub queue_drops: u64,
    /// Marked CE by a bottleneck queue.
    pub ce_marked: u64,
    /// Bytes delivered to each node (the bottleneck's throughput).
    pub delivered_bytes: u64,
    /// Delivered in one read after an earlier datagram of their flow
    /// ([`Faults::coalesce`]).
    pub joined: u64,
}

impl<A: SendBuffers + RecvBuffers> Sim<A> {
    /// A network of `apps.len()` nodes; node i gets `config(i)`.
    pub fn new(
        apps: Vec<A>,
        faults: Faults,
        seed: u64,
        mut config: impl FnMut(usize) -> Config,
    ) -> Self {
        let mut mtu = 0;
        let nodes = apps
            .into_iter()
            .enumerate()
            .map(|(i, app)| {
                let cfg = config(i);
                mtu = mtu.max(cfg.mtu);
                Node {
                    engine: Engine::new(cfg),
                    app,
                }
            })
            .collect();
        Sim {
            nodes,
            now: Instant(0),
            faults,
            rng: SplitMix64::new(seed),
            queue: BinaryHeap::new(),
            order: 0,
            partitions: Vec::new(),
            frame: vec![0; mtu.max(128)],
            busy_until: Vec::new(),
            counts: NetCounts::default(),
            adversary: None,
            multipath: None,
            path_counts: Vec::new(),
            turns: Vec::new(),
            path_busy: Vec::new(),
        }
    }

    /// 0, up to three random cut points in `0..=len` (sorted; empty pieces
    /// allowed), and `len`: the bounds of the pieces a datagram is split into.
    fn cuts(&mut self, len: usize) -> Vec<usize> {
        let n = 1 + (self.rng.next_u64() % 3) as usize;
        let mut c: Vec<usize> = (0..n)
            .map(|_| (self.rng.next_u64() % (len as u64 + 1)) as usize)
            .collect();
        c.push(0);
        c.push(len);
        c.sort_unstable();
        c
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    /// Cut `a` ↔ `b` for `d` from now.
    pub fn partition(&mut self, a: usize, b: usize, d: Nanos) {
        self.partitions.push((a, b, self.now + d));
    }

    fn partitioned(&self, a: usize, b: usize) -> bool {
        self.partitions
            .iter()
            .any(|&(x, y, until)| self.now < until && ((x, y) == (a, b) || (x, y) == (b, a)))
    }

    /// Replace node `i`'s engine with a fresh one (a restarted process) and
    /// purge its datagrams from the network.
    pub fn restart(&mut self, i: usize, cfg: Config) {
        self.restart_with(i, cfg, true);
    }

    /// Like [`Sim::restart`]; with `purge_inbound` false, datagrams already on
    /// their way *to* node i (addressed to the dead incarnation) still arrive.
    pub fn restart_with(&mut self, i: usize, cfg: Config, purge_inbound: bool) {
        self.nodes[i].engine = Engine::new(cfg);
        let q = std::mem::take(&mut self.queue);
        self.queue = q
            .into_iter()
            .filter(|Reverse(d)| d.src != i && (!purge_inbound || d.dst != i))
            .collect();
    }

    /// Close node `i`'s endpoint ([`Engine::close`]): its CLOSE notices go
    /// out, then it is cut off from every node for good (the process is gone).
    pub fn close(&mut self, i: usize) {
        self.nodes[i].engine.close();
        self.flush();
        for j in 0..self.nodes.len() {
            if j != i {
                self.partition(i, j, Nanos::from_secs(1 << 20));
            }
        }
    }

    /// Lose whatever node `i` has to transmit right now.
    pub fn discard_output(&mut self, i: usize) {
        let now = self.now;
        let node = &mut self.nodes[i];
        while node
            .engine
            .poll_transmit(now, &mut self.frame, &mut node.app)
            .is_some()
        {}
    }

    /// The path the next datagram `src` → `dst` takes, if there are paths:
    /// the sender's next entropy value, hashed with the flow (ECMP).
    fn pick_path(&mut self, src: usize, dst: usize, picked: u16) -> Option<usize> {
        let mp = self.multipath.as_ref()?;
        let n = self.nodes.len();
        if mp.paths.is_empty() || src >= n || dst >= n {
            return None;
        }
        if self.turns.len() < n * n {
            self.turns.resize(n * n, 0);
        }
        let flow = src * n + dst;
        let value = if mp.by_engine {
            picked
        } else {
            self.turns[flow]
        };
        self.turns[flow] = (value + 1) % mp.entropy.max(1);
        let key = ((src as u64) << 40) ^ ((dst as u64) << 20) ^ u64::from(value);
        let hash = SplitMix64::new(key).next_u64();
        let p = (hash % mp.paths.len() as u64) as usize;
        if self.path_counts.len() < mp.paths.len() {
            self.path_counts
                .resize(mp.paths.len(), PathCounts::default());
        }
        self.path_counts[p].sent += 1;
        Some(p)
    }

    /// Through path `p` towards `dst`, entered at `at`, for `len` bytes:
    /// when it comes out, or `None` if the path lost it.
    fn through_path(&mut self, p: usize, dst: usize, at: Instant, len: usize) -> Option<Instant> {
        let path = self.multipath.as_ref()?.paths[p];
        if self.now >= path.dies_at || self.chance(path.loss) {
            self.path_counts[p].lost += 1;
            return None;
        }
        let mut out = at + path.latency;
        if path.rate > 0 {
            if self.path_busy.len() <= p {
                self.path_busy.resize(p + 1, Vec::new());
            }
            let busy = &mut self.path_busy[p];
            if busy.len() <= dst {
                busy.resize(dst + 1, Instant(0));
            }
            let serialize = (len as u128 * 1_000_000_000).div_ceil(u128::from(path.rate)) as u64;
            busy[dst] = out.max(busy[dst]) + Nanos(serialize);
            out = busy[dst];
        }
        Some(out)
    }

    fn send(&mut self, src: usize, dst: usize, picked: u16, bytes: &[u8]) {
        self.counts.sent += 1;
        let path = self.pick_path(src, dst, picked);
        if dst >= self.nodes.len()
            || bytes.len() > self.faults.mtu
            || self.partitioned(src, dst)
            || self.chance(self.faults.loss)
        {
            self.counts.lost += 1;
            return;
        }
        let copies = if self.chance(self.faults.dup) {
            self.counts.duplicated += 1;
            2
        } else {
            1
        };
        for _ in 0..copies {
            let mut b = bytes.to_vec();
            if !b.is_empty() && self.chance(self.faults.corrupt) {
                self.counts.corrupted += 1;
                let i = (self.rng.next_u64() % b.len() as u64) as usize;
                let bit = 1u8 << (self.rng.next_u64() % 8);
                b[i] ^= bit;
            }
            let mut at = self.now + self.faults.latency;
            let mut max_jitter = self.faults.jitter;
            if let Some(p) = path {
                let Some(out) = self.through_path(p, dst, self.now, b.len()) else {
                    self.counts.lost += 1;
                    continue;
                };
                at = out;
                max_jitter = self
                    .multipath
                    .as_ref()
                    .map_or(Nanos(0), |m| m.paths[p].jitter);
            }
            let jitter = if max_jitter.0 > 0 {
                self.rng.next_u64() % max_jitter.0
            } else {
                0
            };
            let mut ce = false;
            if let Some(link) = self.faults.bottleneck {
                match self.through_bottleneck(link, dst, at, b.len()) {
                    Some((out, mark)) => (at, ce) = (out, mark),
                    None => {
                        self.counts.lost += 1;
                        self.counts.queue_drops += 1;
                        continue;
                    }
                }
            }
            at = at + Nanos(jitter);
            self.order += 1;
            self.queue.push(Reverse(InFlight {
                at,
                order: self.order,
                src,
                dst,
                ce,
                bytes: b,
            }));
        }
    }

    /// A datagram of `len` bytes reaches node `dst`'s bottleneck at `at`:
    /// when it leaves it and whether it is marked CE, or `None` if the
    /// queue has no room.
    fn through_bottleneck(
        &mut self,
        link: Bottleneck,
        dst: usize,
        at: Instant,
        len: usize,
    ) -> Option<(Instant, bool)> {
        if self.busy_until.len() <= dst {
            self.busy_until.resize(dst + 1, Instant(0));
        }
        let start = at.max(self.busy_until[dst]);
        let rate = u128::from(link.rate.max(1));
        let queued = (u128::from(start.since(at).0) * rate / 1_000_000_000) as usize;
        if queued + len > link.queue {
            return None;
        }
        let ce = link.ecn_threshold.is_some_and(|k| queued > k);
        if ce {
            self.counts.ce_marked += 1;
        }
        let serialize = (len as u128 * 1_000_000_000).div_ceil(rate) as u64;
        self.busy_until[dst] = start + Nanos(serialize);
        Some((self.busy_until[dst], ce))
    }

    /// Flush every node's transmissions into the network.
    pub fn flush(&mut self) {
        for i in 0..self.nodes.len() {
            loop {
                let now = self.now;
                let mut frame = std::mem::take(&mut self.frame);
                let node = &mut self.nodes[i];
                // The provider skips its transmit pass when this is false:
                // it must never hide a datagram (Engine::wants_transmit).
                let wanted = node.engine.wants_transmit();
                let t = node.engine.poll_transmit(now, &mut frame, &mut node.app);
                assert!(
                    wanted || t.is_none(),
                    "node {i}: poll_transmit produced a datagram after wants_transmit said no"
                );
                match t {
                    Some(t) => {
                        self.send(i, t.dst, t.path, &frame[..t.len]);
                        self.frame = frame;
                    }
                    None => {
                        self.frame = frame;
                        break;
                    }
                }
            }
        }
    }

    /// One step: flush transmissions, then advance time to the next wake-up and
    /// process it (deliveries due, timers due). Returns false when nothing is
    /// left to happen (no datagram in flight, no timer armed).
    pub fn step(&mut self) -> bool {
        self.flush();
        let next_net = self.queue.peek().map(|Reverse(d)| d.at);
        let next_timer = self
            .nodes
            .iter()
            .filter_map(|n| n.engine.poll_timeout())
            .min();
        let next = match (next_net, next_timer) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => return false,
        };
        if next > self.now {
            self.now = next;
        }
        while self.queue.peek().is_some_and(|Reverse(d)| d.at <= self.now) {
            let Some(Reverse(d)) = self.queue.pop() else {
                break;
            };
            if !d.ce && self.chance(self.faults.coalesce) {
                self.deliver_coalesced(d);
                continue;
            }
            self.counts.delivered += 1;
            self.counts.delivered_bytes += d.bytes.len() as u64;
            let now = self.now;
            self.attack(&d);
            if d.ce {
                let node = &mut self.nodes[d.dst];
                node.engine
                    .handle_datagram_marked(now, d.src, &[&d.bytes], true, &mut node.app);
                continue;
            }
            if self.chance(self.faults.split) {
                let cuts = self.cuts(d.bytes.len());
                let pieces: Vec<&[u8]> = cuts.windows(2).map(|w| &d.bytes[w[0]..w[1]]).collect();
                let node = &mut self.nodes[d.dst];
                node.engine
                    .handle_datagram_pieces(now, d.src, &pieces, &mut node.app);
                continue;
            }
            let node = &mut self.nodes[d.dst];
            node.engine
                .handle_datagram(now, d.src, &d.bytes, &mut node.app);
        }
        let now = self.now;
        for n in &mut self.nodes {
            if n.engine.poll_timeout().is_some_and(|t| t <= now) {
                n.engine.handle_timeout(now);
            }
        }
        true
    }

    /// Delivers `first` and the later datagrams of its flow due within
    /// [`JOIN_WINDOW`] as one read of the receive offload
    /// ([`Faults::coalesce`]), cut back into datagrams as the provider's
    /// bulk path cuts it.
    fn deliver_coalesced(&mut self, first: InFlight) {
        let seg = first.bytes.len();
        let until = self.now + JOIN_WINDOW;
        let mut due = Vec::new();
        while self.queue.peek().is_some_and(|Reverse(d)| d.at <= until) {
            if let Some(Reverse(d)) = self.queue.pop() {
                due.push(d);
            }
        }
        let mut read = first.bytes.clone();
        let mut joined = vec![first];
        let mut rest = Vec::new();
        let mut ended = false;
        for d in due {
            let same_flow = (d.src, d.dst) == (joined[0].src, joined[0].dst);
            if !ended && same_flow && !d.ce && d.bytes.len() <= seg {
                ended = d.bytes.len() < seg;
                read.extend_from_slice(&d.bytes);
                joined.push(d);
            } else {
                rest.push(d);
            }
        }
        // The others arrive when they were due, in order.
        for d in rest {
            self.queue.push(Reverse(d));
        }
        self.counts.joined += joined.len() as u64 - 1;
        for d in &joined {
            self.counts.delivered += 1;
            self.counts.delivered_bytes += d.bytes.len() as u64;
            self.attack(d);
        }
        let (src, dst, now) = (joined[0].src, joined[0].dst, self.now);
        let node = &mut self.nodes[dst];
        for datagram in crate::wire::bulk::Segments::new(&read, seg) {
            node.engine
                .handle_datagram(now, src, datagram, &mut node.app);
        }
    }

    /// The adversary sees `d` and injects what it will, at once, straight
    /// to the destinations it picks (past the network's faults).
    fn attack(&mut self, d: &InFlight) {
        let Some(adv) = self.adversary.as_mut() else {
            return;
        };
        adv.capture(d.src, d.dst, &d.bytes);
        let nodes = self.nodes.len();
        for _ in 0..adv.shots() {
            let Some((from, to, bytes)) = adv.attack(nodes) else {
                return;
            };
            if let Some(node) = self.nodes.get_mut(to) {
                node.engine
                    .handle_datagram(self.now, from, &bytes, &mut node.app);
            }
        }
    }

    /// Step until `pred` holds or `limit` is reached; returns whether `pred` held.
    pub fn run_until(&mut self, limit: Instant, mut pred: impl FnMut(&mut Self) -> bool) -> bool {
        loop {
            if pred(self) {
                return true;
            }
            if self.now > limit || !self.step() {
                return pred(self);
            }
        }
    }

    /// Drain node `i`'s events.
    pub fn events(&mut self, i: usize) -> Vec<Event<usize>> {
        let mut v = Vec::new();
        while let Some(e) = self.nodes[i].engine.poll_event() {
            v.push(e);
        }
        v
    }
}

/// A simple application buffer store: send buffers and receive buffers by token.
#[derive(Debug, Default)]
pub struct Buffers {
    /// Send buffers.
    pub send: std::collections::HashMap<u64, Vec<u8>>,
    /// Receive buffers.
    pub recv: std::collections::HashMap<u64, Vec<u8>>,
    /// Registered memory (RMA target) and RMA results (initiator).
    pub mem: memory::Memory,
    /// Single-copy rendezvous (PROTOCOL.md §6.7): the simulated host this
    /// node's process runs on. With one, rendezvous sends carry pull
    /// offers and matched offers are pulled from the host.
    pub host: Option<PullHost>,
    /// This node's process id on its host (names its offers).
    pub pid: u32,
    /// Every pull fails (as `process_vm_readv` does under ptrace
    /// restrictions): the engine must fall back to a CTS.
    pub pull_fails: bool,
    /// Pulls attempted through this node.
    pub pulls_tried: u64,
}

/// Offered send buffers by (pid, token).
type HostMemory = std::collections::HashMap<(u32, u64), Vec<u8>>;

/// A simulated host's memory as seen by a fake `process_vm_readv`: the send
/// buffers its processes offered for pulling, by (pid, token). A process
/// that dies takes its entries with it ([`PullHost::kill`]).
#[derive(Clone, Debug, Default)]
pub struct PullHost(std::sync::Arc<std::sync::Mutex<HostMemory>>);

impl PullHost {
    /// Process `pid` died: its memory can no longer be read.
    pub fn kill(&self, pid: u32) {
        if let Ok(mut m) = self.0.lock() {
            m.retain(|&(p, _), _| p != pid);
        }
    }

    fn offer(&self, pid: u32, token: u64, data: &[u8]) {
        if let Ok(mut m) = self.0.lock() {
            m.insert((pid, token), data.to_vec());
        }
    }

    /// Copies `dst.len()` bytes of `(pid, token)`'s buffer: false (like
    /// ESRCH / EFAULT) when it is gone or shorter.
    fn read(&self, pid: u32, token: u64, dst: &mut [u8]) -> bool {
        let Ok(m) = self.0.lock() else { return false };
        match m.get(&(pid, token)).and_then(|b| b.get(..dst.len())) {
            Some(src) => {
                dst.copy_from_slice(src);
                true
            }
            None => false,
        }
    }
}

impl SendBuffers for Buffers {
    fn read(&mut self, token: u64, offset: usize, dst: &mut [u8]) {
        match self
            .send
            .get(&token)
            .and_then(|b| b.get(offset..offset + dst.len()))
        {
            Some(s) => dst.copy_from_slice(s),
            None => dst.fill(0xEE),
        }
    }

    fn rma_read(&mut self, key: u64, addr: u64, dst: &mut [u8]) -> Result<(), crate::RmaStatus> {
        self.mem.read(key, addr, dst)
    }

    /// The offer: pid and token, 12 bytes.
    fn pull_offer(&mut self, token: u64, dst: &mut [u8]) -> usize {
        let (Some(host), Some(data)) = (&self.host, self.send.get(&token)) else {
            return 0;
        };
        if dst.len() < 12 {
            return 0;
        }
        host.offer(self.pid, token, data);
        dst[..4].copy_from_slice(&self.pid.to_le_bytes());
        dst[4..12].copy_from_slice(&token.to_le_bytes());
        12
    }
}

impl RecvBuffers for Buffers {
    fn write(&mut self, token: u64, offset: usize, src: &[u8]) {
        if let Some(b) = self.recv.get_mut(&token)
            && let Some(d) = b.get_mut(offset..offset + src.len())
        {
            d.copy_from_slice(src);
        }
    }

    fn pull(&mut self, token: u64, offset: usize, len: usize, offer: &[u8]) -> bool {
        self.pulls_tried += 1;
        let (Some(host), Some(pid), Some(from)) = (
            &self.host,
            offer.get(..4).and_then(|b| b.try_into().ok()),
            offer.get(4..12).and_then(|b| b.try_into().ok()),
        ) else {
            return false;
        };
        let dst = self
            .recv
            .get_mut(&token)
            .and_then(|b| b.get_mut(offset..offset + len));
        match dst {
            Some(dst) if !self.pull_fails => {
                host.read(u32::from_le_bytes(pid), u64::from_le_bytes(from), dst)
            }
            _ => false,
        }
    }

    crate::rma_target_in!(mem);
}
