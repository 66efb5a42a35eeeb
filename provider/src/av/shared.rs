//! Named address vectors shared by the processes of one host (fi_av(3)
//! `name`, `map_addr`, FI_READ; FI_SHARED_AV).
//!
//! The table lives in POSIX shared memory, `/dev/shm/ofi-xdp-av.<name>`,
//! created with mode 0600 by the first process that opens the name
//! without FI_READ and removed when that process closes it. Every process
//! maps it whole:
//!
//! ```text
//! header (64 B) | fi_addr_t[capacity] | entry[capacity]
//! ```
//!
//! - header: magic, version, address format and AV type (openers must
//!   agree), capacity, `len` (slots used; slots are never reused, so an
//!   fi_addr_t keeps naming the same peer), `removed` (a generation bumped
//!   by every fi_av_remove);
//! - `fi_addr_t[i]` is the fi_addr_t of slot `i` (`i`, or FI_ADDR_NOTAVAIL
//!   once removed): `map_addr` points there, so a process that attached
//!   read-only can find what another inserted (`map_addr[0]` is the first
//!   address's fi_addr_t); fi_addr_t values are slot indices, the same in
//!   every process whatever its `map_addr`;
//! - entry: a state word (empty, valid, removed) and the address in the
//!   native format (`addr.rs`, 32 bytes).
//!
//! Writers serialise on `flock(2)` of the shared-memory fd; an entry is
//! filled before its state turns valid and before `len` covers it
//! (release stores), so readers never see half an address.
//!
//! A creator killed with SIGKILL cannot remove the name. So that a later
//! job does not inherit its addresses, every opener holds a shared
//! open-file-description lock (`F_OFD_SETLK`, fcntl(2); independent of the
//! writers' `flock`) on byte [`ATTACHED`] for as long as it has the table
//! open; the kernel drops it when the process dies. An initialised table
//! nobody holds that lock on is stale: the next opener removes the name
//! (and, unless FI_READ, creates a fresh table).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use libc::c_int;

use crate::abi::{Errno, Result};
use crate::addr::{XDP_ADDR_LEN, XdpAddr};
use crate::sys::*;

const MAGIC: u64 = u64::from_le_bytes(*b"OFIXDPAV");
const VERSION: u32 = 1;
const HEADER: usize = 64;
const ENTRY: usize = 8 + XDP_ADDR_LEN;
/// Slots a shared AV holds at least (its size cannot change once other
/// processes map it; `attr->count` asks for more).
const MIN_CAPACITY: usize = 1024;
/// Slots a shared AV holds at most: `attr->count` is a hint, and the
/// table is mapped whole by every process (48 MiB at this size).
const MAX_CAPACITY: usize = 1 << 20;
/// Longest name we accept (shm_open names are file names).
const MAX_NAME: usize = 200;

/// The byte every opener holds a shared lock on while it has the table
/// open (see the module comment).
const ATTACHED: libc::off_t = 1;

/// Entry states (an untouched entry is 0: empty).
const VALID: u32 = 1;
const REMOVED: u32 = 2;

#[repr(C)]
struct Header {
    magic: AtomicU64,
    version: u32,
    format: u32,
    av_type: u32,
    capacity: u32,
    len: AtomicU64,
    removed: AtomicU64,
}

pub struct SharedTable {
    fd: OwnedFd,
    base: *mut u8,
    size: usize,
    capacity: usize,
    writable: bool,
    /// Set when this process created the name: it removes it at close.
    created: Option<CString>,
}

// SAFETY: the mapping is shared memory accessed only through atomics and
// word-sized reads/writes under the writers' lock; the pointer itself is
// never handed out mutably to two owners.
unsafe impl Send for SharedTable {}
// SAFETY: as above.
unsafe impl Sync for SharedTable {}

/// The shm_open name for an AV name: `/ofi-xdp-av.<name>`, every byte
/// outside `[A-Za-z0-9._-]` written `%XX` (fi_av(3) puts no limit on the
/// characters of a name — MPICH's end in a newline — and the file name
/// must stay one plain name: no `/`, no NUL). -FI_EINVAL for an empty name
/// or one whose file name would be longer than [`MAX_NAME`].
fn shm_name(name: &str) -> Result<CString> {
    let mut file = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"._-".contains(&b) {
            file.push(char::from(b));
        } else {
            file.push_str(&format!("%{b:02X}"));
        }
    }
    if name.is_empty() || file.len() > MAX_NAME {
        crate::xdp_warn!(
            FI_LOG_AV,
            "AV name {name:?}: empty or too long (at most {MAX_NAME} bytes once \
             bytes other than [A-Za-z0-9._-] are written %XX)"
        );
        return Err(Errno::INVAL);
    }
    CString::new(format!("/ofi-xdp-av.{file}")).map_err(|_| Errno::INVAL)
}

fn os_err(what: &str, e: io::Error) -> Errno {
    crate::xdp_warn!(FI_LOG_AV, "shared AV: {what}: {e}");
    Errno::from_os(&e)
}

fn size_for(capacity: usize) -> usize {
    HEADER + capacity * (8 + ENTRY)
}

impl SharedTable {
    /// Open (or, unless `read_only`, create) the shared table `name` for
    /// `format`/`av_type` with room for at least `count` addresses.
    pub fn open(
        name: &str,
        read_only: bool,
        format: u32,
        av_type: c_int,
        count: usize,
    ) -> Result<SharedTable> {
        let shm = shm_name(name)?;
        // A stale table is removed at most once per attempt; the second
        // attempt then creates (or, read-only, finds nothing).
        for _ in 0..3 {
            match Self::open_once(&shm, read_only, format, av_type, count)? {
                Some(t) => return Ok(t),
                None => continue,
            }
        }
        crate::xdp_warn!(FI_LOG_AV, "shared AV {shm:?}: keeps turning stale");
        Err(Errno::AGAIN)
    }

    /// One attempt of [`SharedTable::open`]; `None` when the existing table
    /// was stale and has been removed.
    fn open_once(
        shm: &CString,
        read_only: bool,
        format: u32,
        av_type: c_int,
        count: usize,
    ) -> Result<Option<SharedTable>> {
        let shm = shm.clone();
        let capacity = count.clamp(MIN_CAPACITY, MAX_CAPACITY);
        // SAFETY: plain syscall with a valid C string; result checked.
        let created_fd = (!read_only).then(|| unsafe {
            libc::shm_open(
                shm.as_ptr(),
                libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                0o600,
            )
        });
        let (fd, created) = match created_fd {
            Some(fd) if fd >= 0 => (fd, true),
            Some(_) if io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST) => {
                return Err(os_err("shm_open", io::Error::last_os_error()));
            }
            _ => {
                let flags = if read_only {
                    libc::O_RDONLY
                } else {
                    libc::O_RDWR
                };
                // SAFETY: as above.
                let fd = unsafe { libc::shm_open(shm.as_ptr(), flags | libc::O_CLOEXEC, 0) };
                if fd < 0 {
                    let e = io::Error::last_os_error();
                    // fi_av(3) FI_READ: "the AV must exist".
                    return Err(if e.raw_os_error() == Some(libc::ENOENT) {
                        Errno::INVAL
                    } else {
                        os_err("shm_open", e)
                    });
                }
                (fd, false)
            }
        };
        // SAFETY: a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        if !created && remove_if_stale(&fd, &shm, read_only)? {
            return Ok(None);
        }
        // Held until `fd` closes (with the table, or with the process).
        match ofd_lock(&fd, libc::F_RDLCK) {
            Ok(()) => {}
            // Another opener found it stale and is removing it: look again.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EACCES)) => {
                return Ok(None);
            }
            Err(e) => return Err(os_err("attaching (F_OFD_SETLK)", e)),
        }
        let size = if created {
            let size = size_for(capacity);
            // SAFETY: our fd; the size fits off_t.
            if unsafe { libc::ftruncate(fd.as_raw_fd(), size as libc::off_t) } != 0 {
                let e = io::Error::last_os_error();
                // SAFETY: remove what we just created.
                unsafe { libc::shm_unlink(shm.as_ptr()) };
                return Err(os_err("ftruncate", e));
            }
            size
        } else {
            existing_size(&fd, &shm)?
        };
        let prot = if read_only {
            libc::PROT_READ
        } else {
            libc::PROT_READ | libc::PROT_WRITE
        };
        // SAFETY: mapping `size` bytes of our shared-memory fd.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                prot,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            if created {
                // SAFETY: remove what we just created.
                unsafe { libc::shm_unlink(shm.as_ptr()) };
            }
            return Err(os_err("mmap", e));
        }
        let mut t = SharedTable {
            fd,
            base: base.cast(),
            size,
            capacity,
            writable: !read_only,
            created: created.then_some(shm),
        };
        if created {
            t.init(format, av_type, capacity);
        } else {
            t.capacity = t.check(format, av_type)?;
        }
        Ok(Some(t))
    }

    fn header(&self) -> &Header {
        // SAFETY: the mapping starts with a Header (at least HEADER bytes,
        // page aligned) for as long as `self` lives.
        unsafe { &*self.base.cast::<Header>() }
    }

    fn init(&mut self, format: u32, av_type: c_int, capacity: usize) {
        // SAFETY: we created the mapping and nobody else uses it before the
        // magic is stored (last, with release ordering).
        unsafe {
            let h = self.base.cast::<Header>();
            (*h).version = VERSION;
            (*h).format = format;
            (*h).av_type = av_type as u32;
            (*h).capacity = capacity as u32;
            for i in 0..capacity {
                self.fi_addr_slot(i).write(FI_ADDR_NOTAVAIL);
            }
        }
        self.header().magic.store(MAGIC, Ordering::Release);
    }

    /// An existing table: wait (briefly) for its creator to initialise it,
    /// then check that it is ours and matches. Returns its capacity.
    fn check(&self, format: u32, av_type: c_int) -> Result<usize> {
        for _ in 0..1000 {
            if self.header().magic.load(Ordering::Acquire) == MAGIC {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let h = self.header();
        let capacity = h.capacity as usize;
        if h.magic.load(Ordering::Acquire) != MAGIC
            || h.version != VERSION
            || size_for(capacity) > self.size
        {
            crate::xdp_warn!(FI_LOG_AV, "shared AV: not an ofi-xdp address vector");
            return Err(Errno::INVAL);
        }
        if h.format != format || h.av_type != av_type as u32 {
            crate::xdp_warn!(
                FI_LOG_AV,
                "shared AV: opened with another address format or type"
            );
            return Err(Errno::INVAL);
        }
        Ok(capacity)
    }

    /// Whether this process may insert and remove (not FI_READ).
    pub fn writable(&self) -> bool {
        self.writable
    }

    /// `map_addr` (fi_av(3)): the fi_addr_t array.
    pub fn map_addr(&self) -> *mut libc::c_void {
        self.fi_addr_slot(0).cast()
    }

    fn fi_addr_slot(&self, i: usize) -> *mut u64 {
        // SAFETY: within the mapping for i < capacity (callers check).
        unsafe { self.base.add(HEADER).cast::<u64>().add(i) }
    }

    fn entry(&self, i: usize) -> *mut u8 {
        // SAFETY: within the mapping for i < capacity (callers check).
        unsafe { self.base.add(HEADER + self.capacity * 8 + i * ENTRY) }
    }

    fn state(&self, i: usize) -> &AtomicU32 {
        // SAFETY: entries start on 8-byte boundaries inside the mapping.
        unsafe { &*self.entry(i).cast::<AtomicU32>() }
    }

    /// Slots used, and the removal generation.
    pub fn version(&self) -> (usize, u64) {
        let h = self.header();
        (
            (h.len.load(Ordering::Acquire) as usize).min(self.capacity),
            h.removed.load(Ordering::Acquire),
        )
    }

    /// The address in slot `i`, if valid.
    pub fn get(&self, i: usize) -> Option<XdpAddr> {
        if i >= self.capacity || self.state(i).load(Ordering::Acquire) != VALID {
            return None;
        }
        let mut b = [0u8; XDP_ADDR_LEN];
        // SAFETY: the address bytes follow the 8-byte state word.
        unsafe {
            std::ptr::copy_nonoverlapping(self.entry(i).add(8), b.as_mut_ptr(), XDP_ADDR_LEN)
        };
        XdpAddr::from_bytes(&b)
    }

    fn locked<T>(&self, f: impl FnOnce() -> T) -> Result<T> {
        if !self.writable {
            // fi_av(3) FI_READ: read-only access.
            return Err(Errno::OPNOTSUPP);
        }
        // SAFETY: our fd; flock blocks until the lock is ours.
        if unsafe { libc::flock(self.fd.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(os_err("flock", io::Error::last_os_error()));
        }
        let r = f();
        // SAFETY: releases the lock taken above.
        unsafe { libc::flock(self.fd.as_raw_fd(), libc::LOCK_UN) };
        Ok(r)
    }

    /// Append `a`; its slot index (-FI_ENOSPC when full).
    pub fn insert(&self, a: &XdpAddr) -> Result<usize> {
        self.locked(|| {
            let h = self.header();
            let i = h.len.load(Ordering::Acquire) as usize;
            if i >= self.capacity {
                return Err(Errno(FI_ENOSPC));
            }
            let bytes = a.to_bytes();
            // SAFETY: slot i is unused (i >= len) and ours under the lock.
            unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.entry(i).add(8), XDP_ADDR_LEN);
                self.fi_addr_slot(i).write(i as u64);
            }
            self.state(i).store(VALID, Ordering::Release);
            h.len.store(i as u64 + 1, Ordering::Release);
            Ok(i)
        })?
    }

    /// Remove slot `i`; whether it was valid.
    pub fn remove(&self, i: usize) -> Result<bool> {
        self.locked(|| {
            if i >= self.capacity || self.state(i).load(Ordering::Acquire) != VALID {
                return false;
            }
            self.state(i).store(REMOVED, Ordering::Release);
            // SAFETY: slot i exists; written under the lock.
            unsafe { self.fi_addr_slot(i).write(FI_ADDR_NOTAVAIL) };
            self.header().removed.fetch_add(1, Ordering::AcqRel);
            true
        })
    }
}

/// A lock of `kind` on the [`ATTACHED`] byte.
fn attached_byte(kind: c_int) -> libc::flock {
    // SAFETY: an all-zero flock is a valid starting value.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = ATTACHED;
    fl.l_len = 1;
    fl
}

/// Takes (without waiting) an open-file-description lock of `kind` on the
/// [`ATTACHED`] byte of `fd`.
fn ofd_lock(fd: &OwnedFd, kind: c_int) -> io::Result<()> {
    let fl = attached_byte(kind);
    // SAFETY: our fd and a valid flock; F_OFD_SETLK does not block.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_OFD_SETLK, &fl) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether some process holds the attach lock of the object behind `fd`
/// (asked without taking a lock, so it works on a read-only descriptor).
fn has_users(fd: &OwnedFd) -> io::Result<bool> {
    let mut fl = attached_byte(libc::F_WRLCK);
    // SAFETY: our fd and a valid flock the kernel fills in.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_OFD_GETLK, &mut fl) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fl.l_type != libc::F_UNLCK as libc::c_short)
}

/// Whether the existing table behind `fd` was left by processes that are
/// all gone (initialised, and nobody holds the attach lock); if so, its
/// name is removed (when it still names this object) and `true` returned.
///
/// A read-only opener does not remove anything: for it a stale table is a
/// table that does not exist (fi_av(3) FI_READ: "the AV must exist").
fn remove_if_stale(fd: &OwnedFd, shm: &CString, read_only: bool) -> Result<bool> {
    // A creator takes the attach lock right after creating, before it
    // sizes and initialises the table: an uninitialised table may be
    // someone's fresh one, so only an initialised one can be stale.
    if !initialised(fd) {
        return Ok(false);
    }
    if read_only {
        return match has_users(fd) {
            Ok(true) => Ok(false),
            Ok(false) => {
                crate::xdp_warn!(
                    FI_LOG_AV,
                    "shared AV {shm:?}: left by processes that are all gone (FI_READ needs a live one)"
                );
                Err(Errno::INVAL)
            }
            Err(e) => Err(os_err("checking for users (F_OFD_GETLK)", e)),
        };
    }
    match ofd_lock(fd, libc::F_WRLCK) {
        Ok(()) => {}
        Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EACCES)) => {
            return Ok(false);
        }
        Err(e) => return Err(os_err("checking for users (F_OFD_SETLK)", e)),
    }
    let path = format!("/dev/shm{}", shm.to_string_lossy());
    let same = match (std::fs::metadata(&path), fd_identity(fd)) {
        (Ok(m), Some(ours)) => {
            use std::os::unix::fs::MetadataExt;
            (m.dev(), m.ino()) == ours
        }
        _ => false,
    };
    if same {
        crate::xdp_info!(
            FI_LOG_AV,
            "shared AV {shm:?}: every process that had it open is gone; starting afresh"
        );
        // SAFETY: a valid C string naming the stale object.
        unsafe { libc::shm_unlink(shm.as_ptr()) };
    }
    // Whether or not we removed it, the name is worth another look.
    Ok(true)
}

/// Whether the object behind `fd` holds an initialised table header.
fn initialised(fd: &OwnedFd) -> bool {
    let mut magic = [0u8; 8];
    // SAFETY: reads at most 8 bytes into our buffer.
    let n = unsafe { libc::pread(fd.as_raw_fd(), magic.as_mut_ptr().cast(), 8, 0) };
    n == 8 && u64::from_ne_bytes(magic) == MAGIC
}

/// (device, inode) of `fd`.
fn fd_identity(fd: &OwnedFd) -> Option<(u64, u64)> {
    // SAFETY: an all-zero stat is valid output space.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: our fd, a valid stat buffer.
    (unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } == 0).then_some((st.st_dev, st.st_ino))
}

/// The size of an existing shared-memory object, which must belong to us
/// (our effective user; mode 0600 keeps others out).
fn existing_size(fd: &OwnedFd, shm: &CString) -> Result<usize> {
    // SAFETY: an all-zero stat is valid output space.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: our fd, a valid stat buffer.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(os_err("fstat", io::Error::last_os_error()));
    }
    // SAFETY: plain syscall.
    if st.st_uid != unsafe { libc::geteuid() } {
        crate::xdp_warn!(FI_LOG_AV, "shared AV {shm:?} belongs to another user");
        return Err(Errno(FI_EACCES));
    }
    // A creator may still be sizing it.
    for _ in 0..1000 {
        if st.st_size as usize >= HEADER {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
        // SAFETY: as above.
        unsafe { libc::fstat(fd.as_raw_fd(), &mut st) };
    }
    if (st.st_size as usize) < HEADER {
        return Err(Errno::INVAL);
    }
    Ok(st.st_size as usize)
}

impl Drop for SharedTable {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping of `size` bytes.
        unsafe { libc::munmap(self.base.cast(), self.size) };
        if let Some(name) = &self.created {
            // SAFETY: removes the name we created; other processes keep
            // their mappings.
            unsafe { libc::shm_unlink(name.as_ptr()) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> XdpAddr {
        XdpAddr {
            ip: std::net::Ipv4Addr::new(10, 1, 2, 3).into(),
            port,
            mac: Some([2, 0, 0, 0, 0, 9]),
            incarnation: 77,
        }
    }

    #[test]
    fn two_openers_share_inserts_and_removals() {
        let name = format!("unit-{}", std::process::id());
        let a = SharedTable::open(&name, false, 1, FI_AV_MAP, 0).unwrap();
        let b = SharedTable::open(&name, true, 1, FI_AV_MAP, 0).unwrap();
        assert!(
            SharedTable::open(&name, true, 2, FI_AV_MAP, 0).is_err(),
            "format differs"
        );
        assert_eq!(a.insert(&addr(5)).unwrap(), 0);
        assert_eq!(a.insert(&addr(6)).unwrap(), 1);
        assert_eq!(b.version().0, 2);
        assert_eq!(b.get(1), Some(addr(6)));
        // SAFETY: map_addr points at `capacity` fi_addr_t.
        let map = unsafe { std::slice::from_raw_parts(b.map_addr().cast::<u64>(), 3) };
        assert_eq!(map, [0, 1, FI_ADDR_NOTAVAIL]);
        assert_eq!(b.insert(&addr(7)), Err(Errno::OPNOTSUPP));
        assert!(a.remove(0).unwrap());
        assert_eq!(b.get(0), None);
        assert_eq!(b.version().1, 1);
        drop(a);
        assert!(
            SharedTable::open(&name, true, 1, FI_AV_MAP, 0).is_err(),
            "creator removed it"
        );
        assert!(shm_name("").is_err() && shm_name(&"x".repeat(MAX_NAME + 1)).is_err());
    }

    /// Any name is one plain file name: other bytes are escaped, so names
    /// that differ stay apart.
    #[test]
    fn names_become_plain_file_names() {
        let file = |n: &str| shm_name(n).map(|c| c.into_string().unwrap_or_default());
        assert_eq!(file("job-1.a_b"), Ok("/ofi-xdp-av.job-1.a_b".to_owned()));
        assert_eq!(
            file("FI_NAMED_AV_0\n"),
            Ok("/ofi-xdp-av.FI_NAMED_AV_0%0A".to_owned())
        );
        assert_eq!(file("../x"), Ok("/ofi-xdp-av...%2Fx".to_owned()));
        assert_ne!(file("a%2F"), file("a/"));
        assert_eq!(
            file(&"\n".repeat(MAX_NAME / 3)).map(|f| f.len()),
            Ok(12 + MAX_NAME / 3 * 3)
        );
        assert!(shm_name(&"\n".repeat(MAX_NAME / 3 + 1)).is_err());
    }

    /// A table whose creator died without removing it (SIGKILL; here its
    /// file is left behind by hand) is not inherited by the next opener.
    #[test]
    fn a_table_nobody_has_open_is_started_afresh() {
        let name = format!("unit-stale-{}", std::process::id());
        let a = SharedTable::open(&name, false, 1, FI_AV_MAP, 0).unwrap();
        a.insert(&addr(5)).unwrap();
        // Forget the creator without removing the name, as a killed one.
        let mut a = a;
        a.created = None;
        drop(a);
        assert_eq!(
            SharedTable::open(&name, true, 1, FI_AV_MAP, 0).err(),
            Some(Errno::INVAL),
            "a read-only opener finds no live table"
        );
        let b = SharedTable::open(&name, false, 1, FI_AV_MAP, 0).unwrap();
        assert_eq!(b.version(), (0, 0), "the stale addresses are gone");
        assert!(b.created.is_some(), "the new opener owns the name");
        // While `b` has it open, another opener joins instead.
        let c = SharedTable::open(&name, false, 1, FI_AV_MAP, 0).unwrap();
        b.insert(&addr(6)).unwrap();
        assert_eq!(c.get(0), Some(addr(6)));
        assert!(c.created.is_none());
    }
}
