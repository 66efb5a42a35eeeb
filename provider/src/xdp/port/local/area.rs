//! An endpoint's inbound shared-memory area: a file in /dev/shm (mode
//! 0600, so only its user opens it) named by the network namespace, IP and
//! UDP port of the endpoint that reads it, holding one [`Ring`] per local
//! sender.
//!
//! Layout (all integers native-endian, both sides are on one host):
//!
//! | offset | what |
//! |---|---|
//! | 0 | header: magic, version, owner pid, state (live / gone), the reader's "about to sleep" flag, bitmap of slots in use, whether the reader takes direct messages now |
//! | 4096 | [`SLOTS`] slot headers of 256 bytes: state (writer pid, ready, closed), sender address, `head` and `tail` on their own cache lines, and a line for a pull the writer may help copy ([`HelpLine`]) |
//! | [`RINGS_AT`] | [`SLOTS`] rings of [`RING_BYTES`] |
//!
//! The file is sparse: a ring's pages are allocated (fallocate) by its
//! writer, so an area costs memory only for the peers that talk to it, and
//! a full /dev/shm is an error rather than a SIGBUS on a store. A writer
//! allocates its ring by [`STAGE`]s as it first writes into them, not all
//! of it when it claims the slot: allocating 2 MiB (zeroing 512 pages) took
//! ≈ 0.5 ms here, paid by the first message between two endpoints in each
//! direction. It claims a slot only while /dev/shm has room for the whole
//! ring; a stage it cannot allocate later (/dev/shm filled up meanwhile)
//! fails that write like a full ring, and from then on the writer goes
//! back to its ring's start instead of crossing into that stage, once its
//! reader has consumed everything: the ring shrinks to the stages it has
//! (a record longer than those never fits, and the engine gives that peer
//! up). A writer never moves to another ring with records still unread in
//! its own (which could reorder them).
//!
//! A slot's state is 0 when free. A writer claims it with a CAS to its pid,
//! writes its address, then marks it ready and sets its bit in the bitmap.
//! On close it marks it closed; the reader frees a closed slot once drained.
//! A writer that was killed is found by its pid ([`pid_alive`]): the reader
//! closes its slot, or the writer's successor at the same address takes it
//! over. An owner holds its doorbell (bound before the area is made): one
//! that was killed is found by that doorbell, which nobody holds any more
//! ([`Doorbell::is_bound`], [`reap_stale`]).

use std::ffi::CString;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::doorbell::Doorbell;
use super::help::HelpLine;
use super::ring::{Kind, Ring, Writer};

/// Senders one area takes; more fall back to the kernel socket.
pub const SLOTS: usize = 128;
/// Bytes of one sender's ring: a window of 256 datagrams of up to 8 KiB.
pub const RING_BYTES: usize = 2 << 20;
/// What a writer allocates of its ring at a time, from its start.
const STAGE: usize = 64 << 10;
const HEADER_BYTES: usize = 4096;
const SLOT_BYTES: usize = 256;
/// Where the rings start.
pub const RINGS_AT: usize = HEADER_BYTES + SLOTS * SLOT_BYTES;
/// The area's size.
pub const AREA_BYTES: usize = RINGS_AT + SLOTS * RING_BYTES;

const MAGIC: u64 = u64::from_le_bytes(*b"OFIXDPL\0");
/// Bumped whenever the layout changes: an area of another version is not
/// used (its peer falls back to the kernel socket). 2: the help line.
/// 3: record kinds and direct messages (PROTOCOL.md §6.9).
const VERSION: u32 = 3;

/// The area's owner is reading it.
pub const LIVE: u32 = 1;
/// The owner closed it, or a successor at its address replaced it.
pub const GONE: u32 = 2;

const READY: u64 = 1 << 32;
const CLOSED: u64 = 1 << 33;
const PID_MASK: u64 = 0xffff_ffff;

#[repr(C)]
struct Header {
    magic: AtomicU64,
    version: AtomicU32,
    owner_pid: AtomicU32,
    state: AtomicU32,
    /// The reader's "about to sleep" flag (0 awake, 1 sleeping, 2 rung).
    sleeping: AtomicU32,
    active: [AtomicU64; SLOTS / 64],
    /// 1 while the reader takes direct messages (records of kind
    /// [`Kind::Message`]); 0 and its writers send datagrams only. On the
    /// cache line of `state`, which every send reads anyway.
    direct: AtomicU32,
}

#[repr(C)]
struct SlotHeader {
    state: AtomicU64,
    addr: [AtomicU64; 3],
    _pad0: [u64; 4],
    head: AtomicU64,
    _pad1: [u64; 7],
    tail: AtomicU64,
    _pad2: [u64; 7],
    help: HelpLine,
}

const _: () = assert!(size_of::<Header>() <= HEADER_BYTES);
const _: () = assert!(size_of::<SlotHeader>() == SLOT_BYTES);

/// The file name of the area of the endpoint at `addr` in network
/// namespace `netns`.
pub fn name(netns: u64, addr: SocketAddr) -> String {
    format!("ofi-xdp-local-{netns}-{}-{}", addr.ip(), addr.port())
}

fn path(name: &str) -> String {
    format!("/dev/shm/{name}")
}

/// Whether process `pid` exists (kill(2) with signal 0; EPERM: it exists
/// but is another user's).
pub fn pid_alive(pid: u32) -> bool {
    let Ok(p) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if p <= 0 {
        return false;
    }
    // SAFETY: signal 0 only checks for existence.
    let rc = unsafe { libc::kill(p, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

fn my_pid() -> u32 {
    std::process::id()
}

/// An address as three words (family and port, then the 16 bytes of the
/// IP, v4 mapped into v6).
fn encode(a: SocketAddr) -> [u64; 3] {
    let (fam, ip) = match a.ip() {
        IpAddr::V4(v4) => (4u64, v4.to_ipv6_mapped().octets()),
        IpAddr::V6(v6) => (6u64, v6.octets()),
    };
    let hi = u64::from_le_bytes(ip[..8].try_into().unwrap_or_default());
    let lo = u64::from_le_bytes(ip[8..].try_into().unwrap_or_default());
    [fam << 16 | u64::from(a.port()), hi, lo]
}

fn decode(w: [u64; 3]) -> Option<SocketAddr> {
    let mut ip = [0u8; 16];
    ip[..8].copy_from_slice(&w[1].to_le_bytes());
    ip[8..].copy_from_slice(&w[2].to_le_bytes());
    let v6 = std::net::Ipv6Addr::from(ip);
    let port = (w[0] & 0xffff) as u16;
    match w[0] >> 16 {
        4 => Some(SocketAddr::new(IpAddr::V4(v6.to_ipv4_mapped()?), port)),
        6 => Some(SocketAddr::new(IpAddr::V6(v6), port)),
        _ => None,
    }
}

/// A shared mapping of a whole area file.
pub struct Map {
    ptr: *mut u8,
    fd: OwnedFd,
}

// SAFETY: the mapping is process-wide memory; its users synchronise through
// atomics (and the port's lock).
unsafe impl Send for Map {}
// SAFETY: as above; `&Map` only reaches atomics and the rings' raw pointers.
unsafe impl Sync for Map {}

impl Map {
    fn of(fd: OwnedFd) -> io::Result<Map> {
        // SAFETY: a new shared mapping of a file we hold open.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                AREA_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Map {
            ptr: ptr.cast(),
            fd,
        })
    }

    fn header(&self) -> &Header {
        // SAFETY: the mapping is AREA_BYTES long and page-aligned.
        unsafe { &*self.ptr.cast::<Header>() }
    }

    fn slot(&self, i: usize) -> &SlotHeader {
        debug_assert!(i < SLOTS);
        // SAFETY: i < SLOTS: inside the slot table.
        unsafe {
            &*self
                .ptr
                .add(HEADER_BYTES + i * SLOT_BYTES)
                .cast::<SlotHeader>()
        }
    }

    fn ring(&self, i: usize) -> Ring {
        let s = self.slot(i);
        // SAFETY: i < SLOTS: the ring lies inside the mapping, which the
        // Ring does not outlive (its owners hold the Map).
        unsafe {
            Ring::new(
                &s.head,
                &s.tail,
                self.ptr.add(RINGS_AT + i * RING_BYTES),
                RING_BYTES,
            )
        }
    }

    /// Allocates bytes `from..to` of slot `i`'s ring now (ENOSPC here, not
    /// SIGBUS later).
    fn allocate_ring(&self, i: usize, from: usize, to: usize) -> io::Result<()> {
        allocate(&self.fd, RINGS_AT + i * RING_BYTES + from, to - from)
    }

    /// Whether the file system has room for a whole ring more.
    fn has_room_for_ring(&self) -> bool {
        // SAFETY: a zeroed statvfs is a valid out-parameter.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: plain syscall on our fd into a valid struct.
        if unsafe { libc::fstatvfs(self.fd.as_raw_fd(), &mut st) } != 0 {
            return true;
        }
        let free = u128::from(st.f_bavail) * u128::from(st.f_frsize);
        free >= RING_BYTES as u128
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: our own mapping, unmapped once.
        unsafe { libc::munmap(self.ptr.cast(), AREA_BYTES) };
    }
}

fn allocate(fd: &OwnedFd, at: usize, len: usize) -> io::Result<()> {
    let (Ok(at), Ok(len)) = (libc::off_t::try_from(at), libc::off_t::try_from(len)) else {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    };
    // SAFETY: plain syscall on our fd.
    let rc = unsafe { libc::fallocate(fd.as_raw_fd(), 0, at, len) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn open_file(path: &str, flags: libc::c_int) -> io::Result<OwnedFd> {
    let c = CString::new(path).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: a NUL-terminated path; the result is checked and owned below.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            flags | libc::O_RDWR | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o600 as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Refuses a file that is not ours alone: another user's, or one others
/// may read or write (a sender would otherwise hand them our datagrams).
fn check_private(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: an all-zero stat is valid; fstat fills it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd and buffer.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: plain syscall.
    let uid = unsafe { libc::geteuid() };
    if st.st_uid != uid || st.st_mode & 0o077 != 0 {
        return Err(io::Error::from_raw_os_error(libc::EACCES));
    }
    if usize::try_from(st.st_size).ok() != Some(AREA_BYTES) {
        return Err(io::Error::from_raw_os_error(libc::EPROTO));
    }
    Ok(())
}

/// The area this endpoint reads (its owner's side).
pub struct Area {
    /// Shared with the [`Writers`] views handed out.
    map: Arc<Map>,
    path: String,
}

impl Area {
    /// Creates the area `name`. The caller holds the doorbell of that
    /// name (bound: no live endpoint has it), so a file already there was
    /// left by a dead owner at our address (a previous incarnation): it is
    /// marked gone, so its senders reopen by name, and replaced.
    pub fn create(name: &str) -> io::Result<Area> {
        let path = path(name);
        let fd = match open_file(&path, libc::O_CREAT | libc::O_EXCL) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                remove_stale(&path)?;
                open_file(&path, libc::O_CREAT | libc::O_EXCL)?
            }
            Err(e) => return Err(e),
        };
        let made = (|| {
            // The umask may only narrow 0600; make sure of it anyway.
            // SAFETY: plain syscall on our fd.
            if unsafe { libc::fchmod(fd.as_raw_fd(), 0o600) } != 0 {
                return Err(io::Error::last_os_error());
            }
            let len = libc::off_t::try_from(AREA_BYTES)
                .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
            // SAFETY: plain syscall on our fd.
            if unsafe { libc::ftruncate(fd.as_raw_fd(), len) } != 0 {
                return Err(io::Error::last_os_error());
            }
            allocate(&fd, 0, RINGS_AT)?;
            Map::of(fd)
        })();
        let map = match made {
            Ok(m) => m,
            Err(e) => {
                unlink(&path);
                return Err(e);
            }
        };
        let h = map.header();
        h.version.store(VERSION, Ordering::Relaxed);
        h.owner_pid.store(my_pid(), Ordering::Relaxed);
        h.state.store(LIVE, Ordering::Relaxed);
        h.magic.store(MAGIC, Ordering::Release);
        Ok(Area {
            map: Arc::new(map),
            path,
        })
    }

    /// A view of who writes to this area, usable away from the area's
    /// reader (the endpoint's single-copy pulls check it).
    pub fn writers(&self) -> Writers {
        Writers(Arc::clone(&self.map))
    }

    /// Publishes "about to sleep" and tells whether anything is waiting
    /// already (then the caller must not sleep). A sender that publishes
    /// after this sees the flag and rings the doorbell; one that published
    /// before is seen here (both sides order their store before their load
    /// with a full fence).
    pub fn prepare_sleep(&self) -> bool {
        let h = self.map.header();
        h.sleeping.store(1, Ordering::SeqCst);
        std::sync::atomic::fence(Ordering::SeqCst);
        self.pending()
    }

    /// Clears "about to sleep"; whether it was set (the doorbell may hold
    /// rings to drain).
    pub fn wake(&self) -> bool {
        let h = self.map.header();
        h.sleeping.load(Ordering::Relaxed) != 0 && h.sleeping.swap(0, Ordering::AcqRel) != 0
    }

    /// Whether this area's writers may send us direct messages (PROTOCOL.md
    /// §6.9): the reader's choice, changed at any time; a writer sees it
    /// with its next send.
    pub fn take_direct(&self, yes: bool) {
        let h = self.map.header();
        if (h.direct.load(Ordering::Relaxed) == 1) != yes {
            h.direct.store(u32::from(yes), Ordering::Release);
        }
    }

    /// Whether a pass has nothing to do here: no writer holds a slot and
    /// we did not say we were about to sleep. A writer sets its slot's
    /// active bit before its first record, so a quiet area holds nothing; a
    /// writer that starts now is seen by the next pass. (Relaxed: a hint;
    /// [`Area::wake`] and [`Area::recv`] make the ordered reads.)
    #[inline]
    pub fn quiet(&self) -> bool {
        let h = self.map.header();
        h.sleeping.load(Ordering::Relaxed) == 0
            && h.active.iter().all(|w| w.load(Ordering::Relaxed) == 0)
    }

    /// Whether any ring holds a datagram.
    pub fn pending(&self) -> bool {
        self.each_active(|i| !self.map.ring(i).is_empty())
    }

    /// Calls `f` for every slot in use until it returns true.
    fn each_active(&self, mut f: impl FnMut(usize) -> bool) -> bool {
        for (w, word) in self.map.header().active.iter().enumerate() {
            let mut bits = word.load(Ordering::Acquire);
            while bits != 0 {
                let i = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if f(i) {
                    return true;
                }
            }
        }
        false
    }

    /// Hands up to `max` records per sender to `f` with the sender's
    /// address and the record's kind; frees slots whose writer closed and
    /// whose ring is empty. Returns (records, malformed).
    pub fn recv(
        &self,
        max: usize,
        max_len: usize,
        mut f: impl FnMut(SocketAddr, Kind, &[u8]),
    ) -> (u64, u64) {
        let (mut n, mut bad) = (0, 0);
        self.each_active(|i| {
            let s = self.map.slot(i);
            let st = s.state.load(Ordering::Acquire);
            if st & READY == 0 {
                return false;
            }
            let ring = self.map.ring(i);
            if ring.poll_empty() {
                // The common case of a poll: nothing more to read here.
                if st & CLOSED != 0 {
                    self.free(i, st);
                }
                return false;
            }
            let from = decode([
                s.addr[0].load(Ordering::Relaxed),
                s.addr[1].load(Ordering::Relaxed),
                s.addr[2].load(Ordering::Relaxed),
            ]);
            let c = match from {
                Some(from) => ring.pop(max, max_len, |k, d| f(from, k, d)),
                None => {
                    // No address to hand the engine: drop what it sent.
                    let c = ring.pop(usize::MAX, 0, |_, _| {});
                    bad += 1;
                    c
                }
            };
            n += c.datagrams;
            bad += c.malformed;
            if st & CLOSED != 0 && ring.is_empty() {
                self.free(i, st);
            }
            false
        });
        (n, bad)
    }

    fn free(&self, i: usize, st: u64) {
        let h = self.map.header();
        h.active[i / 64].fetch_and(!(1 << (i % 64)), Ordering::AcqRel);
        let _ = self
            .map
            .slot(i)
            .state
            .compare_exchange(st, 0, Ordering::AcqRel, Ordering::Relaxed);
    }

    /// Closes the slots of writers that are gone (a system call per slot
    /// in use: called seldom, before sleeping). Their rings are drained and
    /// the slots freed by [`Area::recv`].
    pub fn sweep_dead_writers(&self) {
        self.each_active(|i| {
            let s = self.map.slot(i);
            let st = s.state.load(Ordering::Acquire);
            if st & READY != 0 && st & CLOSED == 0 && !pid_alive((st & PID_MASK) as u32) {
                let _ =
                    s.state
                        .compare_exchange(st, st | CLOSED, Ordering::AcqRel, Ordering::Relaxed);
            }
            false
        });
    }

    /// The doorbell's state for senders (tests).
    #[cfg(test)]
    fn sleeping(&self) -> u32 {
        self.map.header().sleeping.load(Ordering::SeqCst)
    }
}

/// Which processes hold a slot of an area: the local senders of its owner.
#[derive(Clone)]
pub struct Writers(Arc<Map>);

impl Writers {
    /// Whether process `pid` holds a ready, open slot: it is a sender of
    /// our user on this host that reached us through shared memory.
    pub fn has(&self, pid: u32) -> bool {
        self.slots_of(pid).next().is_some()
    }

    fn slots_of(&self, pid: u32) -> impl Iterator<Item = usize> + '_ {
        (0..SLOTS).filter(move |&i| {
            let st = self.0.slot(i).state.load(Ordering::Acquire);
            st & READY != 0 && st & CLOSED == 0 && (st & PID_MASK) as u32 == pid
        })
    }

    /// The help line of process `pid`'s slot, when it holds exactly one
    /// (with several endpoints writing to us, the one that offered the
    /// message is not known here, and it is that one's passes that look).
    pub fn help_line(&self, pid: u32) -> Option<&HelpLine> {
        let mut slots = self.slots_of(pid);
        let (Some(i), None) = (slots.next(), slots.next()) else {
            return None;
        };
        Some(&self.0.slot(i).help)
    }
}

impl Drop for Area {
    fn drop(&mut self) {
        self.map.header().state.store(GONE, Ordering::Release);
        unlink(&self.path);
    }
}

fn unlink(path: &str) {
    if let Ok(c) = CString::new(path) {
        // SAFETY: a NUL-terminated path.
        unsafe { libc::unlink(c.as_ptr()) };
    }
}

/// Removes the area file at `path`, whose owner is gone, after telling its
/// senders (state gone). Refused for a file that is not ours alone.
fn remove_stale(path: &str) -> io::Result<()> {
    let fd = open_file(path, 0)?;
    check_private(&fd)?;
    if let Ok(map) = Map::of(fd) {
        map.header().state.store(GONE, Ordering::Release);
    }
    unlink(path);
    Ok(())
}

/// Removes the areas of network namespace `netns` whose owners are gone
/// (their doorbell can be bound: nobody holds it), as a killed process
/// leaves them: each holds the rings its senders allocated. Called when an
/// endpoint opens; returns how many it removed.
pub fn reap_stale(netns: u64) -> usize {
    let prefix = format!("ofi-xdp-local-{netns}-");
    let Ok(dir) = std::fs::read_dir("/dev/shm") else {
        return 0;
    };
    let mut removed = 0;
    for entry in dir.flatten() {
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if !name.starts_with(&prefix) {
            continue;
        }
        // Holding its doorbell while we look keeps a new owner out.
        let Ok(_bell) = Doorbell::bind(&name) else {
            continue;
        };
        if remove_stale(&path(&name)).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Orders a batch of sends' `head` stores before the loads of
/// [`Outbound::must_ring`], as the reader's [`Area::prepare_sleep`] orders
/// its flag before its look at the rings: one of the two sides sees the
/// other. One fence per batch, not per datagram: the fence waits for every
/// store of the copies before it to drain.
pub fn fence() {
    std::sync::atomic::fence(Ordering::SeqCst);
}

/// Our side of another endpoint's area: the slot we write to.
pub struct Outbound {
    map: Map,
    slot: usize,
    /// What we stored in the slot's state: if it changes, the slot was
    /// taken from us (the reader thought us dead).
    mine: u64,
    writer: Writer,
    ring: Ring,
    /// Bytes of the ring, from its start, known to be allocated.
    allocated: usize,
    /// Tests: allocating beyond this fails as with /dev/shm full.
    #[cfg(test)]
    allocation_limit: usize,
}

/// Why a datagram did not go into the ring.
#[derive(Debug, PartialEq, Eq)]
pub enum SendError {
    /// Ring full: lost like a dropped frame (the engine retransmits).
    Full,
    /// The area's owner closed it or was replaced, or our slot was taken:
    /// open the area again by name.
    Stale,
    /// A direct message the reader takes none of now (§6.9): send it as
    /// datagrams.
    Refused,
}

impl Outbound {
    /// Opens the area `name` and claims a slot in it for `me`.
    pub fn open(name: &str, me: SocketAddr) -> io::Result<Outbound> {
        let fd = open_file(&path(name), 0)?;
        check_private(&fd)?;
        let map = Map::of(fd)?;
        let h = map.header();
        if h.magic.load(Ordering::Acquire) != MAGIC || h.version.load(Ordering::Acquire) != VERSION
        {
            return Err(io::Error::from_raw_os_error(libc::EPROTO));
        }
        if h.state.load(Ordering::Acquire) != LIVE {
            return Err(io::Error::from_raw_os_error(libc::ECONNREFUSED));
        }
        let (slot, mine, allocated) = claim(&map, me)?;
        let ring = map.ring(slot);
        let mut writer = ring.writer_start();
        // Request and reply traffic stays in the first stage.
        writer.wrap_early_at(STAGE);
        Ok(Outbound {
            map,
            slot,
            mine,
            writer,
            ring,
            allocated,
            #[cfg(test)]
            allocation_limit: usize::MAX,
        })
    }

    /// Appends one datagram and publishes it. A reader about to sleep is
    /// told by [`Outbound::must_ring`] after the batch.
    pub fn send(&mut self, payload: &[&[u8]]) -> Result<(), SendError> {
        self.send_kind(Kind::Datagram, payload)
    }

    /// Appends one direct message (PROTOCOL.md §6.9) and publishes it;
    /// [`SendError::Refused`] while the reader takes none.
    pub fn send_message(&mut self, message: &[&[u8]]) -> Result<(), SendError> {
        if self.map.header().direct.load(Ordering::Acquire) != 1 {
            return Err(SendError::Refused);
        }
        self.send_kind(Kind::Message, message)
    }

    fn send_kind(&mut self, kind: Kind, payload: &[&[u8]]) -> Result<(), SendError> {
        let h = self.map.header();
        if h.state.load(Ordering::Relaxed) != LIVE
            || self.map.slot(self.slot).state.load(Ordering::Relaxed) != self.mine
        {
            return Err(SendError::Stale);
        }
        let len: usize = payload.iter().map(|p| p.len()).sum();
        let place = self
            .ring
            .place(&mut self.writer, len)
            .map_err(|_| SendError::Full)?;
        // The stages this record writes into, allocated as it first reaches
        // them (the start is allocated by the first record).
        let end = self.ring.placement_end(&self.writer, &place);
        if end > self.allocated {
            let to = end.next_multiple_of(STAGE).min(RING_BYTES);
            if self.allocate(to).is_err() {
                // /dev/shm is full: make do with the stages we have, going
                // back to the start (once the reader has consumed
                // everything) instead of crossing into the one we could
                // not have. Until then, like a full ring.
                self.writer.wrap_early_at(self.allocated);
                return Err(SendError::Full);
            }
        }
        self.ring.write(&mut self.writer, place, kind, payload);
        Ok(())
    }

    /// Allocates the ring up to byte `to`.
    fn allocate(&mut self, to: usize) -> io::Result<()> {
        #[cfg(test)]
        if to > self.allocation_limit {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        self.map.allocate_ring(self.slot, self.allocated, to)?;
        self.allocated = to;
        Ok(())
    }

    /// The line on which the area's owner asks us to help copy a pull.
    pub fn help_line(&self) -> &HelpLine {
        &self.map.slot(self.slot).help
    }

    /// The process that owns the area (the one a help copy writes into).
    pub fn owner_pid(&self) -> u32 {
        self.map.header().owner_pid.load(Ordering::Relaxed)
    }

    /// After a batch of [`Outbound::send`]s (and a full fence, see
    /// [`fence`]): whether the reader said it is about to sleep and nobody
    /// rang its doorbell since — then ring it (once per sleep).
    pub fn must_ring(&self) -> bool {
        let h = self.map.header();
        h.sleeping.load(Ordering::SeqCst) == 1
            && h.sleeping
                .compare_exchange(1, 2, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
    }
}

impl Drop for Outbound {
    fn drop(&mut self) {
        // The reader frees the slot once it has drained it.
        let _ = self.map.slot(self.slot).state.compare_exchange(
            self.mine,
            self.mine | CLOSED,
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
    }
}

/// Claims a slot for `me`: our dead predecessor's at the same address if
/// there is one (its ring continues), else a free one. With the bytes of
/// its ring known to be allocated (none of a predecessor's: its writes
/// allocate again what it may not have, a no-op for the rest).
fn claim(map: &Map, me: SocketAddr) -> io::Result<(usize, u64, usize)> {
    if !map.has_room_for_ring() {
        return Err(io::Error::from_raw_os_error(libc::ENOSPC));
    }
    let want = encode(me);
    let pid = u64::from(my_pid());
    for i in 0..SLOTS {
        let s = map.slot(i);
        let st = s.state.load(Ordering::Acquire);
        let addr = [0, 1, 2].map(|k| s.addr[k].load(Ordering::Relaxed));
        if st & READY != 0 && addr == want && !pid_alive((st & PID_MASK) as u32) {
            let mine = pid | READY;
            if s.state
                .compare_exchange(st, mine, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                map.header().active[i / 64].fetch_or(1 << (i % 64), Ordering::AcqRel);
                return Ok((i, mine, 0));
            }
        }
    }
    for i in 0..SLOTS {
        let s = map.slot(i);
        if s.state
            .compare_exchange(0, pid, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            continue;
        }
        if let Err(e) = map.allocate_ring(i, 0, STAGE) {
            s.state.store(0, Ordering::Release);
            return Err(e);
        }
        for (k, w) in want.iter().enumerate() {
            s.addr[k].store(*w, Ordering::Relaxed);
        }
        let mine = pid | READY;
        s.state.store(mine, Ordering::Release);
        map.header().active[i / 64].fetch_or(1 << (i % 64), Ordering::AcqRel);
        return Ok((i, mine, STAGE));
    }
    Err(io::Error::from_raw_os_error(libc::ENOSPC))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unique(tag: &str) -> String {
        static N: AtomicU32 = AtomicU32::new(0);
        format!(
            "ofi-xdp-local-test-{}-{tag}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        )
    }

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, 1], port))
    }

    #[test]
    fn addresses_round_trip() {
        for a in [addr(7), "[fe80::1]:65535".parse().unwrap()] {
            assert_eq!(decode(encode(a)), Some(a));
        }
        assert_eq!(decode([9 << 16, 0, 0]), None);
    }

    #[test]
    fn senders_reach_the_reader_with_their_address() {
        let name = unique("basic");
        let area = Area::create(&name).unwrap();
        let mut a = Outbound::open(&name, addr(1)).unwrap();
        let mut b = Outbound::open(&name, addr(2)).unwrap();
        assert_eq!(a.send(&[b"from a"]), Ok(()));
        assert_eq!(b.send(&[b"from b"]), Ok(()));
        fence();
        assert!(!a.must_ring(), "the reader is not asleep");
        let mut got = Vec::new();
        let (n, bad) = area.recv(64, 1 << 16, |from, _, d| got.push((from, d.to_vec())));
        assert_eq!((n, bad), (2, 0));
        got.sort();
        assert_eq!(
            got,
            vec![(addr(1), b"from a".to_vec()), (addr(2), b"from b".to_vec())]
        );
        // The file is ours alone.
        let meta = std::fs::metadata(path(&name)).unwrap();
        use std::os::unix::fs::MetadataExt as _;
        assert_eq!(meta.mode() & 0o777, 0o600);
        drop(area);
        assert!(!std::path::Path::new(&path(&name)).exists());
        assert_eq!(a.send(&[b"late"]), Err(SendError::Stale));
    }

    /// Bytes the area file has allocated.
    fn allocated_bytes(name: &str) -> u64 {
        use std::os::unix::fs::MetadataExt as _;
        std::fs::metadata(path(name)).unwrap().blocks() * 512
    }

    #[test]
    fn a_writer_allocates_its_ring_as_it_first_writes_into_it() {
        let name = unique("stages");
        let area = Area::create(&name).unwrap();
        let before = allocated_bytes(&name);
        let mut a = Outbound::open(&name, addr(1)).unwrap();
        assert_eq!(allocated_bytes(&name) - before, STAGE as u64);
        let mut next = 0u32;
        // Request and reply: each record read before the next is written.
        // Two rings' worth of bytes, all in the first stage.
        let mut sent = 0u32;
        for _ in 0..2 * RING_BYTES / 1008 {
            assert_eq!(a.send(&[&numbered(sent)]), Ok(()));
            sent += 1;
            read_in_order(&area, &mut next);
        }
        assert_eq!(allocated_bytes(&name) - before, STAGE as u64);
        // A stream its reader falls behind on: read every 1024 records, two
        // laps, every one arriving in order across every stage boundary and
        // the wrap; the whole ring gets allocated.
        for k in 0..2 * RING_BYTES / 1008 {
            assert_eq!(a.send(&[&numbered(sent)]), Ok(()), "record {k}");
            sent += 1;
            if k % 1024 == 1023 {
                read_in_order(&area, &mut next);
            }
        }
        read_in_order(&area, &mut next);
        assert_eq!(next, sent);
        assert_eq!(allocated_bytes(&name) - before, RING_BYTES as u64);
    }

    #[test]
    fn a_writer_that_cannot_allocate_a_stage_makes_do_with_those_it_has() {
        let name = unique("enospc");
        let area = Area::create(&name).unwrap();
        let mut a = Outbound::open(&name, addr(1)).unwrap();
        a.allocation_limit = 3 * STAGE;
        let mut next = 0u32;
        // A stream: three stages fill, the fourth cannot be had.
        let mut sent = 0u32;
        while a.send(&[&numbered(sent)]).is_ok() {
            sent += 1;
        }
        assert_eq!(sent as usize, 3 * STAGE / 1008);
        // Once read, the writer goes on from the start, for several rings'
        // worth, every record in order: a stream finds the ring full where
        // the stage ends until its reader has caught up (as the engine
        // retries), never more.
        read_in_order(&area, &mut next);
        for k in 0..4 * RING_BYTES / 1008 {
            if a.send(&[&numbered(sent)]).is_err() {
                read_in_order(&area, &mut next);
                assert_eq!(a.send(&[&numbered(sent)]), Ok(()), "record {k}");
            }
            sent += 1;
            if k % 32 == 31 {
                read_in_order(&area, &mut next);
            }
        }
        read_in_order(&area, &mut next);
        assert_eq!(next, sent);
        assert_eq!(a.allocated, 3 * STAGE);
    }

    /// Record `i` of a test: 1000 bytes starting with its number.
    fn numbered(i: u32) -> [u8; 1000] {
        let mut d = [0u8; 1000];
        d[..4].copy_from_slice(&i.to_le_bytes());
        d
    }

    /// Reads every record waiting, checking each is the `next` one.
    fn read_in_order(area: &Area, next: &mut u32) {
        area.recv(usize::MAX, 1 << 16, |_, _, d| {
            assert_eq!(d[..4], next.to_le_bytes());
            *next += 1;
        });
    }

    #[test]
    fn direct_messages_go_only_while_the_reader_takes_them() {
        let name = unique("direct");
        let area = Area::create(&name).unwrap();
        let mut a = Outbound::open(&name, addr(1)).unwrap();
        assert_eq!(a.send_message(&[b"early"]), Err(SendError::Refused));
        area.take_direct(true);
        assert_eq!(a.send(&[b"datagram"]), Ok(()));
        assert_eq!(a.send_message(&[b"mess", b"age"]), Ok(()));
        area.take_direct(false);
        assert_eq!(a.send_message(&[b"late"]), Err(SendError::Refused));
        let mut got = Vec::new();
        area.recv(64, 1 << 16, |_, k, d| got.push((k, d.to_vec())));
        assert_eq!(
            got,
            vec![
                (Kind::Datagram, b"datagram".to_vec()),
                (Kind::Message, b"message".to_vec())
            ]
        );
    }

    #[test]
    fn a_sleeping_reader_is_rung_once() {
        let name = unique("sleep");
        let area = Area::create(&name).unwrap();
        let mut a = Outbound::open(&name, addr(1)).unwrap();
        assert!(!area.prepare_sleep());
        a.send(&[b"1"]).unwrap();
        fence();
        assert!(a.must_ring());
        a.send(&[b"2"]).unwrap();
        fence();
        assert!(!a.must_ring(), "rung already");
        assert_eq!(area.sleeping(), 2);
        assert!(area.wake());
        assert!(!area.wake());
        // Something waiting: the reader must not sleep.
        assert!(area.prepare_sleep());
        area.recv(64, 1 << 16, |_, _, _| {});
        assert!(!area.prepare_sleep());
    }

    #[test]
    fn closed_slots_are_freed_and_reused() {
        let name = unique("reuse");
        let area = Area::create(&name).unwrap();
        let mut a = Outbound::open(&name, addr(1)).unwrap();
        a.send(&[b"last words"]).unwrap();
        drop(a);
        let mut got = Vec::new();
        area.recv(64, 1 << 16, |_, _, d| got.push(d.to_vec()));
        assert_eq!(got, vec![b"last words".to_vec()]);
        // The freed slot is the first free one again.
        let b = Outbound::open(&name, addr(2)).unwrap();
        assert_eq!(b.slot, 0);
    }

    #[test]
    fn a_dead_writers_slot_is_closed_or_taken_over() {
        let name = unique("dead");
        let area = Area::create(&name).unwrap();
        let mut a = Outbound::open(&name, addr(1)).unwrap();
        a.send(&[b"before"]).unwrap();
        // Pretend its process died: a pid that cannot exist.
        let dead = READY | 0x7fff_fff0;
        a.map.slot(a.slot).state.store(dead, Ordering::Release);
        std::mem::forget(a);
        // Its successor at the same address continues in the same ring.
        let mut b = Outbound::open(&name, addr(1)).unwrap();
        b.send(&[b"after"]).unwrap();
        let mut got = Vec::new();
        area.recv(64, 1 << 16, |_, _, d| got.push(d.to_vec()));
        assert_eq!(got, vec![b"before".to_vec(), b"after".to_vec()]);
        // Another dead writer, with nobody taking over: swept, drained, freed.
        let c = Outbound::open(&name, addr(2)).unwrap();
        c.map.slot(c.slot).state.store(dead, Ordering::Release);
        let slot = c.slot;
        std::mem::forget(c);
        area.sweep_dead_writers();
        area.recv(64, 1 << 16, |_, _, _| {});
        assert_eq!(area.map.slot(slot).state.load(Ordering::Acquire), 0);
    }

    #[test]
    fn a_stale_area_is_replaced_and_its_senders_told() {
        let name = unique("stale");
        let old = Area::create(&name).unwrap();
        let mut a = Outbound::open(&name, addr(1)).unwrap();
        let new = Area::create(&name).unwrap();
        assert_eq!(a.send(&[b"x"]), Err(SendError::Stale));
        std::mem::forget(old); // its Drop would unlink the new file
        let mut a = Outbound::open(&name, addr(1)).unwrap();
        a.send(&[b"y"]).unwrap();
        let mut n = 0;
        new.recv(64, 1 << 16, |_, _, _| n += 1);
        assert_eq!(n, 1);
    }

    #[test]
    fn senders_refuse_an_area_others_could_read_or_own() {
        use std::os::unix::fs::PermissionsExt as _;
        let name = unique("private");
        let area = Area::create(&name).unwrap();
        let p = path(&name);
        // Readable by others: a sender would hand them our datagrams.
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = Outbound::open(&name, addr(1)).err().unwrap();
        assert_eq!(e.raw_os_error(), Some(libc::EACCES));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(Outbound::open(&name, addr(1)).is_ok());
        // Another user's (when we may give it away: root).
        // SAFETY: plain syscall.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(&p, Some(65534), Some(65534)).unwrap();
            let e = Outbound::open(&name, addr(2)).err().unwrap();
            assert_eq!(e.raw_os_error(), Some(libc::EACCES));
        }
        drop(area);
    }

    #[test]
    fn areas_of_gone_owners_are_reaped() {
        // A namespace number no real one has, so only our files match.
        let netns = u64::MAX - u64::from(std::process::id());
        let live = name(netns, addr(1));
        let dead = name(netns, addr(2));
        let _bell = Doorbell::bind(&live).unwrap();
        let a = Area::create(&live).unwrap();
        std::mem::forget(Area::create(&dead).unwrap()); // killed: no Drop
        assert_eq!(reap_stale(netns), 1);
        assert!(std::path::Path::new(&path(&live)).exists());
        assert!(!std::path::Path::new(&path(&dead)).exists());
        drop(a);
    }
}
