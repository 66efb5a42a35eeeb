//! A UMEM group: the AF_XDP sockets of several processes of one user bound
//! to the same interface queue, sharing one UMEM and its fill and
//! completion rings (`XDP_SHARED_UMEM`, kernel
//! `Documentation/networking/af_xdp.rst`), each with its own RX and TX
//! rings. The group is described by a file in /dev/shm, one per (network
//! namespace, interface, queue, user), mapped by every member:
//!
//! - a robust process-shared mutex (`mutex.rs`) guarding the shared rings'
//!   producer (fill) and consumer (completion) sides and the member table;
//! - the geometry of the UMEM (who joins takes it as the first member set
//!   it, whatever its own configuration says);
//! - the member table: each member's pid and start time (so a reused pid is
//!   not taken for it), and the numbers of its AF_XDP socket and UMEM memfd
//!   descriptors, which a joiner takes with `pidfd_getfd(2)` (`process.rs`);
//! - one mailbox per member (`mailbox.rs`): TX completions are drained from
//!   the shared completion ring by whoever holds the lock, and those of
//!   another member's frames are posted to its mailbox.
//!
//! The UMEM is split: RX chunks first, common to all members (the kernel
//! fills any socket of the queue from the shared fill ring; whoever
//! consumed a frame returns it, to the fill ring or, when that is full, to
//! the group's free RX pool in this file), then one range of TX slots per
//! member table entry, so a member allocates TX frames without asking
//! anyone.
//!
//! The file, `/dev/shm/ofi-xdp-umem-NETNS-PIDNS-IFINDEX-QUEUE-UID`, is
//! created with mode 0600, opened with `O_NOFOLLOW`, and
//! refused unless it belongs to us: another user cannot join (and
//! `pidfd_getfd` needs ptrace rights over the member anyway).

pub(crate) mod mailbox;
pub(crate) mod mutex;
pub(crate) mod process;

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::ring::Mmap;
use mailbox::Mailbox;
use mutex::Locked;

/// Whether this kernel lets a joiner map the group's shared fill and
/// completion rings through its own socket after binding with
/// `XDP_SHARED_UMEM` (Linux 6.4 and later; older kernels refuse the mmap
/// with EBUSY, so their processes beyond a queue's first take the kernel
/// UDP path). A kernel whose release cannot be read is assumed able: the
/// join itself then says.
pub fn kernel_lets_members_join() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .and_then(|r| release_at_least(&r, (6, 4)))
        .unwrap_or(true)
}

/// Whether a `uname -r` string ("6.1.0-56-amd64") names `want` or later;
/// `None` if it does not start with MAJOR.MINOR.
fn release_at_least(release: &str, want: (u32, u32)) -> Option<bool> {
    let mut parts = release.trim().split(['.', '-']);
    let major = parts.next()?.parse::<u32>().ok()?;
    let minor = parts.next()?.parse::<u32>().ok()?;
    Some((major, minor) >= want)
}

/// Members one group file can hold: the size of its member table and of
/// its mailbox array. A group holds as many as its creator chose
/// ([`Geometry::members`], at most this), and its UMEM has that many TX
/// ranges.
pub const MAX_MEMBERS: usize = 64;

/// The group size a creator chooses unless told otherwise: what one queue
/// held before the size could be chosen (24 MiB of UMEM with the provider's
/// defaults; each member more adds its TX range, 2 MiB with them).
pub const DEFAULT_MEMBERS: u32 = 8;

/// Entries of a member's mailbox: at least its TX slots (each in flight at
/// most once).
pub(crate) const MAILBOX_CAP: u32 = 8192;

/// Receive frames the group's free pool holds at most (a UMEM's RX part
/// beyond it stays with the member that made the group).
pub(crate) const RX_POOL_CAP: usize = 32768;

/// "ofixdpg2": the file is initialised, in this layout (g1 had a member
/// table of 8 entries and no [`Geometry::members`]).
const MAGIC: u64 = 0x6f66_6978_6470_6732;

/// Where group files live (tmpfs, gone at reboot).
pub const DEFAULT_DIR: &str = "/dev/shm";

/// The UMEM's layout, set by the member that registered it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Geometry {
    pub frame_size: u32,
    /// Chunks in the UMEM.
    pub frame_count: u32,
    /// The first `rx_frames` chunks serve receive, for every member.
    pub rx_frames: u32,
    /// Chunks per TX slot (multi-buffer).
    pub slot_chunks: u32,
    /// TX slots of each member.
    pub tx_per_member: u32,
    /// Entries of the shared fill and completion rings.
    pub ring_size: u32,
    /// The UMEM was bound with `XDP_USE_SG`.
    pub multi_buffer: u32,
    /// Members the group holds (its UMEM's TX ranges), at most
    /// [`MAX_MEMBERS`].
    pub members: u32,
}

impl Geometry {
    /// Bytes of the UMEM.
    pub fn umem_len(&self) -> u64 {
        u64::from(self.frame_count) * u64::from(self.frame_size)
    }

    /// The member (table index) owning TX slot `slot` (counted from the
    /// first TX slot).
    pub fn member_of_tx_slot(&self, slot: u32) -> Option<usize> {
        let m = (slot / self.tx_per_member.max(1)) as usize;
        (m < self.capacity()).then_some(m)
    }

    /// Entries of the member table this group uses.
    pub fn capacity(&self) -> usize {
        (self.members as usize).min(MAX_MEMBERS)
    }
}

/// One entry of the member table.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Member {
    /// 0: free.
    pub pid: i32,
    /// The member's AF_XDP socket, in its process.
    pub xsk_fd: i32,
    /// Its UMEM memfd, in its process.
    pub umem_fd: i32,
    /// Its UDP port (steered to its socket), for reclaiming.
    pub port: u32,
    /// Its process's start time (see `process::alive`).
    pub start_time: u64,
}

#[repr(C)]
struct Header {
    magic: AtomicU64,
    mutex: libc::pthread_mutex_t,
    geometry: Geometry,
    members: [Member; MAX_MEMBERS],
    /// Members found dead and removed.
    reclaimed: u64,
    /// RX frames dead members may have taken with them (their RX ring and
    /// what they held unreturned), an upper bound.
    stranded_rx: u64,
}

/// Where the mailboxes start, then the free RX pool.
fn mailboxes_at() -> usize {
    size_of::<Header>().next_multiple_of(64)
}

fn rx_pool_at() -> usize {
    mailboxes_at() + MAX_MEMBERS * Mailbox::bytes(MAILBOX_CAP)
}

/// Bytes of a group file.
fn file_len() -> usize {
    rx_pool_at() + 64 + RX_POOL_CAP * 8
}

/// A group as [`Group::summary`] finds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSummary {
    /// Each member's pid and whether its process still runs.
    pub members: Vec<(i32, bool)>,
    /// Members the group holds at most (its creator's choice).
    pub capacity: usize,
    pub reclaimed: u64,
    pub stranded_rx: u64,
    pub rx_pooled: u32,
}

/// A member that was found dead and removed from the table (its port and
/// table index: the caller unsteers the port and empties the XSKMAP slot
/// if they still point at it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reclaimed {
    pub index: usize,
    pub member: Member,
}

/// The group file of one queue, mapped.
pub struct Group {
    map: Mmap,
    path: PathBuf,
    _file: File,
}

// SAFETY: the mapping is shared memory whose guarded parts are only touched
// under the robust mutex, and the mailboxes through atomics.
unsafe impl Send for Group {}
unsafe impl Sync for Group {}

impl Group {
    /// The group file of (network namespace `netns`, interface `ifindex`,
    /// `queue`) for our user and PID namespace in `dir`, created (and
    /// initialised) if absent. The PID namespace is part of the name
    /// because members are told apart by pid: processes of another PID
    /// namespace sharing this /dev/shm make a group of their own (and find
    /// the queue busy) instead of taking our members for dead.
    pub fn open(dir: &Path, netns: u64, ifindex: u32, queue: u32) -> io::Result<Group> {
        let path = dir.join(format!("{}{ifindex}-{queue}-{}", prefix(netns), uid()));
        Group::open_path(&path)
    }

    /// The group file at `path` (for tests: any directory).
    pub fn open_path(path: &Path) -> io::Result<Group> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)?;
        let meta = file.metadata()?;
        // SAFETY: geteuid cannot fail.
        let uid = unsafe { libc::geteuid() };
        if meta.uid() != uid || meta.mode() & 0o077 != 0 || !meta.file_type().is_file() {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{} belongs to user {} with mode {:o}, not to us ({uid}) with 0600",
                    path.display(),
                    meta.uid(),
                    meta.mode() & 0o7777
                ),
            ));
        }
        let fd = file.as_raw_fd();
        // Initialisation under flock(2): released if we die meanwhile.
        flock(fd, libc::LOCK_EX)?;
        let r = Self::map_initialised(fd, &file);
        let _ = flock(fd, libc::LOCK_UN);
        Ok(Group {
            map: r?,
            path: path.to_owned(),
            _file: file,
        })
    }

    fn map_initialised(fd: RawFd, file: &File) -> io::Result<Mmap> {
        let len = file_len();
        let size = file.metadata()?.len();
        if size != 0 && size != len as u64 {
            return Err(io::Error::other(format!(
                "group file of {size} bytes, expected {len} (another version of ofi-xdp)"
            )));
        }
        if size == 0 {
            file.set_len(len as u64)?;
        }
        let map = Mmap::shared_file(fd, len, false)?;
        // SAFETY: the mapping is at least a Header long and page aligned.
        let header = unsafe { &*map.as_ptr().cast::<Header>() };
        if header.magic.load(Ordering::Acquire) != MAGIC {
            // Fresh (zero) file, or one whose creator died before the end:
            // (re)initialise; nobody else uses it (we hold the flock and no
            // process takes the mutex before the magic is set).
            // SAFETY: the mutex field is in our mapping.
            unsafe { mutex::init(std::ptr::addr_of!(header.mutex).cast_mut())? };
            header.magic.store(MAGIC, Ordering::Release);
        }
        Ok(map)
    }

    /// The group files of network namespace `netns` and our user in `dir`.
    pub fn files(dir: &Path, netns: u64) -> Vec<PathBuf> {
        Group::all_files(dir)
            .into_iter()
            .filter(|(ns, _)| *ns == netns)
            .map(|(_, p)| p)
            .collect()
    }

    /// Every group file of our user and PID namespace in `dir`, with the
    /// network namespace its name gives.
    pub fn all_files(dir: &Path) -> Vec<(u64, PathBuf)> {
        let suffix = format!("-{}", uid());
        let pidns = pid_ns();
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter_map(|p| {
                let name = p.file_name()?.to_str()?;
                let netns = name
                    .strip_prefix(NAME_START)?
                    .split('-')
                    .next()?
                    .parse()
                    .ok()?;
                let ours = name.starts_with(&prefix_in(netns, pidns)) && name.ends_with(&suffix);
                ours.then_some((netns, p))
            })
            .collect()
    }

    /// The interface index and queue this file's name says it is for.
    pub fn ifindex_queue(path: &Path) -> Option<(u32, u32)> {
        let name = path.file_name()?.to_str()?;
        let mut fields = name.rsplit('-');
        let _uid = fields.next()?;
        let queue = fields.next()?.parse().ok()?;
        let ifindex = fields.next()?.parse().ok()?;
        Some((ifindex, queue))
    }

    /// What `ofi-xdp status` shows of the group: its members (pid, alive),
    /// the dead ones reclaimed so far, the receive frames they may have
    /// stranded, and those waiting in the free pool.
    pub fn summary(&self) -> io::Result<GroupSummary> {
        let guard = self.lock()?;
        let (reclaimed, stranded_rx) = guard.reclaim_counts();
        Ok(GroupSummary {
            members: guard
                .members()
                .iter()
                .filter(|m| m.pid != 0)
                .map(|m| (m.pid, process::alive(m.pid, m.start_time)))
                .collect(),
            capacity: guard.geometry().capacity(),
            reclaimed,
            stranded_rx,
            rx_pooled: self.rx_pooled_hint(),
        })
    }

    /// No member of the group lives: every process in its table is gone
    /// (killed, since a member that leaves removes itself). Its file is a
    /// leftover.
    pub fn abandoned(&self) -> io::Result<bool> {
        let guard = self.lock()?;
        Ok(guard
            .members()
            .iter()
            .all(|m| m.pid == 0 || !process::alive(m.pid, m.start_time)))
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn header(&self) -> *mut Header {
        self.map.as_ptr().cast()
    }

    /// Member `index`'s mailbox.
    pub(crate) fn mailbox(&self, index: usize) -> Mailbox<'_> {
        let at = mailboxes_at() + index * Mailbox::bytes(MAILBOX_CAP);
        // SAFETY: `at` + the mailbox's bytes is within the mapping (file_len),
        // 64-byte aligned, and lives as long as `self`.
        unsafe { Mailbox::at(self.map.as_ptr().add(at), MAILBOX_CAP) }
    }

    /// How many free RX frames the group's pool holds, as of now (a cheap
    /// look before taking the lock).
    pub(crate) fn rx_pooled_hint(&self) -> u32 {
        self.rx_pool_count().load(Ordering::Relaxed)
    }

    fn rx_pool_count(&self) -> &AtomicU32 {
        // SAFETY: in the mapping (file_len), 64-byte aligned.
        unsafe { &*self.map.as_ptr().add(rx_pool_at()).cast::<AtomicU32>() }
    }

    fn rx_pool_entry(&self, i: usize) -> *mut u64 {
        // SAFETY: callers pass i < RX_POOL_CAP: in the mapping.
        unsafe {
            self.map
                .as_ptr()
                .add(rx_pool_at() + 64 + i * 8)
                .cast::<u64>()
        }
    }

    /// Takes the lock; a holder's death is repaired by the caller through
    /// [`GroupGuard::owner_died`].
    pub fn lock(&self) -> io::Result<GroupGuard<'_>> {
        let header = self.header();
        // SAFETY: the mutex was initialised (magic set) and is in our mapping.
        let how = unsafe { mutex::lock(std::ptr::addr_of_mut!((*header).mutex))? };
        Ok(GroupGuard {
            group: self,
            owner_died: how == Locked::OwnerDied,
        })
    }
}

impl Group {
    /// Takes the lock if it is free now (the data path: a refill or a reap
    /// that finds it taken is done on a later pass, so no member ever
    /// waits for another — not even for one stopped while holding it).
    pub fn try_lock(&self) -> Option<GroupGuard<'_>> {
        let header = self.header();
        // SAFETY: as in `lock`.
        let how = unsafe { mutex::try_lock(std::ptr::addr_of_mut!((*header).mutex)) };
        how.ok().flatten().map(|how| GroupGuard {
            group: self,
            owner_died: how == Locked::OwnerDied,
        })
    }
}

/// The group's lock held: the member table and geometry may be read and
/// changed.
pub struct GroupGuard<'a> {
    group: &'a Group,
    owner_died: bool,
}

impl Drop for GroupGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: we hold the mutex.
        unsafe { mutex::unlock(std::ptr::addr_of_mut!((*self.group.header()).mutex)) };
    }
}

impl GroupGuard<'_> {
    fn header(&self) -> &Header {
        // SAFETY: we hold the lock, so no one else writes the header.
        unsafe { &*self.group.header() }
    }

    fn header_mut(&mut self) -> &mut Header {
        // SAFETY: as above; `&mut self` makes this the only reference here.
        unsafe { &mut *self.group.header() }
    }

    /// The lock's previous holder died holding it.
    pub fn owner_died(&self) -> bool {
        self.owner_died
    }

    pub fn geometry(&self) -> Geometry {
        self.header().geometry
    }

    /// The member table.
    pub fn members(&self) -> [Member; MAX_MEMBERS] {
        self.header().members
    }

    /// Dead members reclaimed so far and the RX frames they may have
    /// stranded.
    pub fn reclaim_counts(&self) -> (u64, u64) {
        (self.header().reclaimed, self.header().stranded_rx)
    }

    /// Removes the members whose process is gone (their mailbox emptied),
    /// counting what they may have stranded: up to `rx_ring` frames in
    /// their RX ring each.
    pub fn reclaim_dead(&mut self, rx_ring: u32) -> Vec<Reclaimed> {
        let mut out = Vec::new();
        for index in 0..MAX_MEMBERS {
            let m = self.header().members[index];
            if m.pid != 0 && !process::alive(m.pid, m.start_time) {
                out.push(Reclaimed { index, member: m });
                let h = self.header_mut();
                h.members[index] = Member::default();
                h.reclaimed += 1;
                h.stranded_rx += u64::from(rx_ring);
                self.group.mailbox(index).reset();
            }
        }
        out
    }

    /// A live member to join through (after [`GroupGuard::reclaim_dead`]).
    pub fn live_member(&self) -> Option<Member> {
        self.header().members.iter().copied().find(|m| m.pid != 0)
    }

    /// Parks free RX frame `addr` in the group's pool (the fill ring being
    /// full): any member refilling takes it from there, so a member that
    /// stops polling keeps no frame but those in its RX ring. `false`: the
    /// pool is full.
    pub(crate) fn park_rx(&mut self, addr: u64) -> bool {
        let count = self.group.rx_pool_count();
        let n = count.load(Ordering::Relaxed) as usize;
        if n >= RX_POOL_CAP {
            return false;
        }
        // SAFETY: n < RX_POOL_CAP; we hold the lock, the pool's only writer.
        unsafe { self.group.rx_pool_entry(n).write(addr) };
        count.store(n as u32 + 1, Ordering::Relaxed);
        true
    }

    /// A free RX frame from the group's pool.
    pub(crate) fn unpark_rx(&mut self) -> Option<u64> {
        let count = self.group.rx_pool_count();
        let n = (count.load(Ordering::Relaxed) as usize).checked_sub(1)?;
        count.store(n as u32, Ordering::Relaxed);
        // SAFETY: n < RX_POOL_CAP, written by `park_rx` under the lock.
        Some(unsafe { self.group.rx_pool_entry(n).read() })
    }

    /// Room left in the group's RX pool.
    pub(crate) fn rx_pool_room(&self) -> usize {
        RX_POOL_CAP.saturating_sub(self.group.rx_pool_count().load(Ordering::Relaxed) as usize)
    }

    /// Starts a new group (no live member): `g` is the UMEM's layout.
    pub fn reset(&mut self, g: Geometry) {
        self.group.rx_pool_count().store(0, Ordering::Relaxed);
        let h = self.header_mut();
        h.geometry = g;
        h.members = [Member::default(); MAX_MEMBERS];
        h.stranded_rx = 0;
        for i in 0..MAX_MEMBERS {
            self.group.mailbox(i).reset();
        }
    }

    /// Enters `m` in a free table entry; its index, `None` when the group
    /// holds as many as its geometry says.
    pub fn add(&mut self, m: Member) -> Option<usize> {
        let capacity = self.header().geometry.capacity();
        let index = self.header().members[..capacity]
            .iter()
            .position(|e| e.pid == 0)?;
        self.group.mailbox(index).reset();
        self.header_mut().members[index] = m;
        Some(index)
    }

    /// Records member `index`'s port and socket (once bound).
    pub fn update(&mut self, index: usize, m: Member) {
        if let Some(e) = self.header_mut().members.get_mut(index) {
            *e = m;
        }
    }

    /// Removes member `index` (it leaves). The last one out removes the
    /// file, so files of namespaces that are gone do not pile up in
    /// /dev/shm (a process that opened it meanwhile makes its group in the
    /// unlinked file, and the next one finds the queue busy: kernel path).
    pub fn remove(&mut self, index: usize) {
        if let Some(e) = self.header_mut().members.get_mut(index) {
            *e = Member::default();
        }
        if self.header().members.iter().all(|m| m.pid == 0) {
            let _ = std::fs::remove_file(&self.group.path);
        }
    }
}

fn uid() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
}

/// The start of the names of our group files in network namespace `netns`
/// (and our PID namespace).
fn prefix(netns: u64) -> String {
    prefix_in(netns, pid_ns())
}

/// [`prefix`] for PID namespace `pidns` (read once per directory listing).
fn prefix_in(netns: u64, pidns: u64) -> String {
    format!("{NAME_START}{netns}-{pidns}-")
}

/// Our PID namespace's inode (0 if unreadable).
fn pid_ns() -> u64 {
    ofi_xdp_epstats::pidns_inode().unwrap_or(0)
}

/// How every group file's name starts.
const NAME_START: &str = "ofi-xdp-umem-";

fn flock(fd: RawFd, op: libc::c_int) -> io::Result<()> {
    loop {
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(fd, op) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests;
