//! The shared-memory path to endpoints on this host (same network
//! namespace): the engine's datagrams, unchanged, through a ring per
//! sender in the receiver's area ([`area`]), instead of the kernel UDP
//! socket. The engine keeps its protocol (ordering, acknowledgements,
//! retransmission, dead-peer detection), so this "link" only has to be
//! fast: no system call per datagram either way, none to poll an idle
//! endpoint (its rings are checked in memory), and a doorbell ([`doorbell`])
//! rung only for a reader that said it is about to sleep.
//!
//! Who may use it: the area file is mode 0600 and a sender refuses one
//! that is not its own user's, so only processes of the same user share
//! rings. A peer whose area cannot be opened (another user's, an older
//! build's, a full /dev/shm, none at all) is reached through the kernel
//! socket as before: said once at `info`, retried now and then.
//!
//! Besides datagrams a ring carries direct messages (PROTOCOL.md §6.9):
//! small messages an RDM endpoint hands to its peer's matcher without the
//! session, when nothing of the session could be overtaken. This path only
//! carries them, as records of their own kind, and lets the reader say
//! whether it takes them ([`LocalPath::take_direct`]).

mod area;
mod doorbell;
mod help;
mod peers;
mod ring;

use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};

use area::{Area, Outbound, SendError};
pub use area::{Writers, pid_alive};
use doorbell::Doorbell;
use help::Target;
pub use help::{CHUNK as HELP_CHUNK, MAX_CHUNKS as HELP_MAX_CHUNKS};
use peers::LocalPeers;
pub use ring::Kind;

use crate::sys::*;

/// Sends to a peer without an area between two attempts to open it.
const REOPEN_EVERY: u32 = 256;
/// The reader looks for senders that were killed (one system call per
/// sender) at most this often, when it is about to sleep.
const SWEEP_EVERY_NS: u64 = 1_000_000_000;

/// What the shared-memory path carried, for [`super::PathCounts`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LocalCounts {
    /// Records (datagrams and direct messages) received from our rings.
    pub rx: u64,
    /// Records written to peers' rings.
    pub tx: u64,
    /// Impossible things found in our rings (what they held was dropped).
    pub malformed: u64,
    /// Datagrams not sent because the peer's ring was full (the engine
    /// retransmits them).
    pub ring_full: u64,
    /// Chunks of peers' pulls of our sends that we copied for them
    /// ([`help`]).
    pub helped: u64,
}

enum Peer {
    Open {
        out: Outbound,
        bell: String,
        /// Written to since the last [`LocalPath::flush`].
        dirty: bool,
        /// The area owner's process, once it first asked for help with a
        /// pull (`None` inside: no pidfd to be had, do not help).
        target: Option<Option<Target>>,
    },
    /// No area to write to: the kernel socket carries this peer's
    /// datagrams; another try after `retry_in` more sends (said at `info`
    /// the first time only).
    Absent { retry_in: u32 },
}

/// One endpoint's shared-memory path: its own area and doorbell, and the
/// areas of the local peers it sends to.
pub struct LocalPath {
    area: Area,
    bell: Doorbell,
    netns: u64,
    me: SocketAddr,
    max_len: usize,
    peers: LocalPeers<Peer>,
    /// Peers written to since the last [`LocalPath::flush`].
    dirty: Vec<SocketAddr>,
    counts: LocalCounts,
    swept_ns: AtomicU64,
}

impl LocalPath {
    /// The path of the endpoint at `me`, receiving datagrams of up to
    /// `max_len` bytes; `None` (said at `info`) where shared memory is not
    /// available: the kernel socket carries local traffic then.
    pub fn open(me: SocketAddr, max_len: usize) -> Option<LocalPath> {
        let netns = ofi_xdp_epstats::netns_inode()?;
        let name = area::name(netns, me);
        // The doorbell first: binding it is what makes the name ours (no
        // live endpoint holds it), and it marks the area as alive.
        let opened = Doorbell::bind(&name).and_then(|bell| Ok((Area::create(&name)?, bell)));
        let reaped = area::reap_stale(netns);
        if reaped > 0 {
            crate::xdp_info!(
                FI_LOG_EP_CTRL,
                "removed {reaped} shared-memory area(s) of endpoints that are gone from /dev/shm"
            );
        }
        match opened {
            Ok((area, bell)) => Some(LocalPath {
                area,
                bell,
                netns,
                me,
                max_len,
                peers: LocalPeers::default(),
                dirty: Vec::new(),
                counts: LocalCounts::default(),
                swept_ns: AtomicU64::new(0),
            }),
            Err(e) => {
                crate::xdp_info!(
                    FI_LOG_EP_CTRL,
                    "{me}: no shared-memory area /dev/shm/{name} ({e}): peers on this host \
                     reach us through the kernel UDP socket"
                );
                None
            }
        }
    }

    /// Which processes write to our area (see [`Writers`]).
    pub fn writers(&self) -> Writers {
        self.area.writers()
    }

    pub fn counts(&self) -> LocalCounts {
        self.counts
    }

    /// Datagrams of `len` bytes one sender's ring holds.
    pub fn ring_capacity(len: usize) -> usize {
        area::RING_BYTES / (ring::RECORD_HEADER + len).next_multiple_of(8)
    }

    /// The doorbell, for the endpoint's wait fd.
    pub fn fd(&self) -> RawFd {
        self.bell.fd()
    }

    /// Sends `payload` to the local peer `to` through its ring: `None` when
    /// it has no area we can use (the caller sends through the kernel
    /// socket), `Some(false)` when its ring is full (lost like a dropped
    /// frame: the engine retransmits). `ring`: where the peer's entry was
    /// last found (any value at first), kept up to date here.
    pub fn send(&mut self, to: SocketAddr, ring: &mut usize, payload: &[u8]) -> Option<bool> {
        self.push(to, ring, Kind::Datagram, &[payload])
    }

    /// Sends a direct message (its pieces, concatenated) to the local peer
    /// `to`; false when it did not go (no area, ring full, or the peer
    /// takes no direct messages now): the caller sends it as datagrams.
    /// `ring` as for [`LocalPath::send`].
    pub fn send_message(&mut self, to: SocketAddr, ring: &mut usize, message: &[&[u8]]) -> bool {
        self.push(to, ring, Kind::Message, message) == Some(true)
    }

    fn push(
        &mut self,
        to: SocketAddr,
        ring: &mut usize,
        kind: Kind,
        payload: &[&[u8]],
    ) -> Option<bool> {
        for _ in 0..2 {
            *ring = match self.peers.find(*ring, &to) {
                Some(i) => i,
                None => {
                    let p = self.open_peer(to, true);
                    self.peers.insert(to, p)
                }
            };
            let peer = self.peers.at_mut(*ring)?;
            let (out, dirty) = match peer {
                Peer::Open { out, dirty, .. } => (out, dirty),
                Peer::Absent { retry_in } => {
                    *retry_in = retry_in.saturating_sub(1);
                    if *retry_in > 0 {
                        return None;
                    }
                    // Try again, quietly; still absent: back off again.
                    let again = self.open_peer(to, false);
                    self.peers.insert(to, again);
                    continue;
                }
            };
            let sent = match kind {
                Kind::Datagram => out.send(payload),
                Kind::Message => out.send_message(payload),
            };
            match sent {
                Ok(()) => {
                    if !*dirty {
                        *dirty = true;
                        self.dirty.push(to);
                    }
                    self.counts.tx += 1;
                    return Some(true);
                }
                Err(SendError::Full) => {
                    self.counts.ring_full += 1;
                    return Some(false);
                }
                Err(SendError::Refused) => return Some(false),
                // Closed or replaced (a new incarnation at that address):
                // open it again by name.
                Err(SendError::Stale) => {
                    self.peers.remove(&to);
                }
            }
        }
        None
    }

    /// After a batch of sends: rings the doorbell of each peer written to
    /// that said it is about to sleep.
    pub fn flush(&mut self) {
        if self.dirty.is_empty() {
            return;
        }
        area::fence();
        for to in self.dirty.drain(..) {
            if let Some(Peer::Open {
                out, bell, dirty, ..
            }) = self.peers.get_mut(&to)
            {
                *dirty = false;
                if out.must_ring() {
                    self.bell.ring(bell);
                }
            }
        }
    }

    fn open_peer(&self, to: SocketAddr, say: bool) -> Peer {
        let name = area::name(self.netns, to);
        match Outbound::open(&name, self.me) {
            Ok(out) => Peer::Open {
                out,
                bell: name,
                dirty: false,
                target: None,
            },
            Err(e) => {
                if say {
                    crate::xdp_info!(
                        FI_LOG_EP_DATA,
                        "{}: no shared memory with {to} ({e}): the kernel UDP socket carries our \
                     datagrams to it",
                        self.me
                    );
                }
                Peer::Absent {
                    retry_in: REOPEN_EVERY,
                }
            }
        }
    }

    /// Copies, for every local peer pulling one of our sends, the chunks
    /// of it that it left for us ([`help`]); how many. For the passes of a
    /// process with a send offered for pulling.
    pub fn help_pulls(&mut self) -> u64 {
        let mut n = 0;
        for (to, p) in self.peers.iter_mut() {
            let Peer::Open { out, target, .. } = p else {
                continue;
            };
            if !out.help_line().wants_help() {
                continue;
            }
            let Some(t) = target.get_or_insert_with(|| Target::open(out.owner_pid())) else {
                continue;
            };
            if t.refused() {
                continue;
            }
            // Only ever out of the buffers of our sends offered to this
            // peer, whatever the line says (a receiver the kernel would not
            // let read us must not get our memory this way either).
            n += out.help_line().help(|src, dst, len| {
                crate::datapath::offered::covers(to, src as usize, len) && t.write(src, dst, len)
            });
        }
        self.counts.helped += n;
        n
    }

    /// Whether our writers may send us direct messages now (§6.9).
    pub fn take_direct(&self, yes: bool) {
        self.area.take_direct(yes);
    }

    /// Whether a pass has nothing to read here (no local peer writes to us,
    /// no sleep to end): a few loads, where [`LocalPath::recv`] walks the
    /// slots.
    #[inline]
    pub fn quiet(&self) -> bool {
        self.area.quiet()
    }

    /// Hands up to `max` records per sender to `f`, with their kind.
    /// Returns whether we had said we were about to sleep (then the
    /// endpoint's other fds may be what woke it).
    pub fn recv(&mut self, max: usize, mut f: impl FnMut(SocketAddr, Kind, &[u8])) -> bool {
        let woke = self.area.wake();
        if woke {
            self.bell.drain();
        }
        let (n, bad) = self
            .area
            .recv(max, self.max_len, |from, k, d| f(from, k, d));
        self.counts.rx += n;
        if bad > 0 {
            self.counts.malformed += bad;
            crate::xdp_info!(
                FI_LOG_EP_DATA,
                "{}: {bad} malformed record(s) in our shared-memory rings dropped",
                self.me
            );
        }
        woke
    }

    /// Says we are about to sleep on the wait fd; whether a datagram is
    /// waiting already (then we must not).
    pub fn prepare_sleep(&self) -> bool {
        let now = crate::xdp::monotonic_ns();
        if now.saturating_sub(self.swept_ns.load(Ordering::Relaxed)) >= SWEEP_EVERY_NS {
            self.swept_ns.store(now, Ordering::Relaxed);
            self.area.sweep_dead_writers();
        }
        self.area.prepare_sleep()
    }

    /// Hands `f` every local peer whose process is gone (as ICMP port
    /// unreachable does for the kernel path), and forgets its area.
    pub fn take_dead(&mut self, mut f: impl FnMut(SocketAddr)) {
        self.peers.retain(|to, p| match p {
            Peer::Open { bell, .. } if !Doorbell::is_bound(bell) => {
                f(*to);
                false
            }
            _ => true,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Addresses no real endpoint of this namespace has (port 0 is never
    /// bound), distinct per test process and test.
    fn addr(n: u8) -> SocketAddr {
        let pid = std::process::id();
        SocketAddr::from(([127, (pid >> 8) as u8, pid as u8, n], 0))
    }

    fn readable(fd: RawFd) -> bool {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut p, 1, 0) == 1 }
    }

    #[test]
    fn two_endpoints_exchange_datagrams_and_wake_each_other() {
        let (a_at, b_at) = (addr(1), addr(2));
        let mut a = LocalPath::open(a_at, 1 << 16).unwrap();
        let mut b = LocalPath::open(b_at, 1 << 16).unwrap();
        let mut ring = usize::MAX;
        assert_eq!(a.send(b_at, &mut ring, b"ping"), Some(true));
        a.flush();
        let mut got = Vec::new();
        b.recv(64, |from, _, d| got.push((from, d.to_vec())));
        assert_eq!(got, vec![(a_at, b"ping".to_vec())]);
        // b is about to sleep: a's next batch rings its doorbell, once.
        assert!(!b.prepare_sleep());
        assert!(!readable(b.fd()));
        assert_eq!(a.send(b_at, &mut ring, b"wake"), Some(true));
        a.flush();
        assert!(readable(b.fd()), "the doorbell rang");
        assert!(b.recv(64, |_, _, _| {}), "b had been about to sleep");
        assert!(!readable(b.fd()), "drained when b ran");
        assert_eq!(b.counts().rx, 2);
        assert_eq!(a.counts().tx, 2);
        // Nobody at c: the kernel socket's job.
        assert_eq!(a.send(addr(3), &mut 0, b"x"), None);
        // b goes away (as if killed: its doorbell closes with it).
        drop(b);
        let mut dead = Vec::new();
        a.take_dead(|sa| dead.push(sa));
        assert_eq!(dead, vec![b_at]);
        assert_eq!(a.send(b_at, &mut ring, b"late"), None, "b's area is gone");
    }
}
