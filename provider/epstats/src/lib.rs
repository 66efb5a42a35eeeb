//! Per-endpoint statistics files: what a process using the provider
//! publishes about each endpoint, so that `ofi-xdp status` can show figures
//! that only the endpoint knows (retransmissions, and the like) from another
//! process, at no cost to the data path: the counters live in a shared
//! mapping the endpoint updates with plain stores, and the reader maps it.
//!
//! # Format (version 1)
//!
//! One file per endpoint, `<dir>/<pid>-<n>.stats` (`n` counts the process's
//! endpoints), `dir` being [`DEFAULT_DIR`]. The file is
//! `values + 8 × counters` bytes long, rounded up to a page:
//!
//! - Bytes `0..values`: a header of UTF-8 text lines `key value`, ended by a
//!   NUL byte, written once before the file appears under its name:
//!
//!   ```text
//!   ofi-xdp-endpoint-stats 1
//!   pid 4242                      process id
//!   starttime 123456              field 22 of /proc/<pid>/stat (tells a reused pid apart)
//!   netns 4026531840              inode of /proc/self/ns/net
//!   pidns 4026531836              inode of /proc/self/ns/pid (what `pid` is relative to)
//!   ifname eth0
//!   ifindex 2
//!   endpoint rdm                  rdm | dgram
//!   path af_xdp                   af_xdp | kernel_udp
//!   address 192.0.2.1:47000       what fi_getname names, as IP:port
//!   queue 0                       AF_XDP queue (absent on the kernel path)
//!   slot 0                        XSKMAP slot (absent on the kernel path)
//!   counters rx_datagrams tx_datagrams retransmits …
//!   gauges unexpected_bytes …     the names in `counters` that are levels, not counts
//!   values 4096                   byte offset of the first value, a multiple of 8
//!   ```
//!
//!   Unknown keys are ignored, so later versions can add some.
//! - From `values` on: one native-endian `u64` per name in `counters`, in
//!   that order, 8-byte aligned. The endpoint stores each with a single
//!   aligned 8-byte write (a relaxed atomic store), so a reader never sees a
//!   torn value; counters only grow.
//!
//! The writer builds the file under a hidden temporary name and renames it
//! into place, so a reader never sees a half-written header; it removes the
//! file when the endpoint closes. A file whose process is gone was left by a
//! process that was killed: the next process of its user (and pid
//! namespace) to publish one removes it ([`remove_dead`]), and so does
//! `ofi-xdp cleanup`.

use std::fs::File;
use std::io::{self, Write as _};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Where endpoints publish their statistics: tmpfs (gone at reboot),
/// writable by unprivileged ranks, and one per container like the processes
/// it describes.
pub const DEFAULT_DIR: &str = "/dev/shm/ofi-xdp";

/// First line of a version-1 file.
const MAGIC: &str = "ofi-xdp-endpoint-stats 1";

/// Offset of the values: the header has a page of its own.
const VALUES_OFFSET: usize = 4096;

/// Which way an endpoint's datagrams go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataPath {
    /// An AF_XDP socket fed by the steering program.
    AfXdp,
    /// The endpoint's kernel UDP socket.
    KernelUdp,
}

impl DataPath {
    fn as_str(self) -> &'static str {
        match self {
            DataPath::AfXdp => "af_xdp",
            DataPath::KernelUdp => "kernel_udp",
        }
    }
}

/// What an endpoint says about itself in its header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// `rdm` or `dgram`.
    pub endpoint: String,
    pub path: DataPath,
    pub ifname: String,
    pub ifindex: u32,
    /// `IP:port`.
    pub address: String,
    /// AF_XDP queue and XSKMAP slot (AF_XDP path only).
    pub queue: Option<u32>,
    pub slot: Option<u32>,
}

/// One endpoint's file, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointStats {
    pub file: PathBuf,
    pub pid: u32,
    pub starttime: u64,
    /// Inode of the endpoint's network namespace.
    pub netns: u64,
    /// Inode of its process's pid namespace (files of older builds have
    /// none).
    pub pidns: Option<u64>,
    pub identity: Identity,
    /// `(name, value, is_gauge)` in the file's order.
    pub values: Vec<(String, u64, bool)>,
}

impl EndpointStats {
    /// True while the process that wrote the file runs (same pid, same start).
    pub fn alive(&self) -> bool {
        process_starttime(self.pid) == Some(self.starttime)
    }

    /// The value of counter `name`.
    pub fn value(&self, name: &str) -> Option<u64> {
        self.values
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, v, _)| *v)
    }
}

/// Field 22 of `/proc/<pid>/stat` (start time in clock ticks since boot).
pub fn process_starttime(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count
    // fields after its closing parenthesis (field 3 is the first).
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(22 - 3)?.parse().ok()
}

/// Inode of this process's pid namespace.
pub fn pidns_inode() -> Option<u64> {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata("/proc/self/ns/pid").ok().map(|m| m.ino())
}

/// Inode of the calling thread's network namespace.
pub fn netns_inode() -> Option<u64> {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata("/proc/thread-self/ns/net")
        .or_else(|_| std::fs::metadata("/proc/self/ns/net"))
        .ok()
        .map(|m| m.ino())
}

fn page_rounded(len: usize) -> usize {
    len.div_ceil(4096) * 4096
}

/// A shared read-only or read-write mapping of a whole file.
struct Mapping {
    ptr: *mut libc::c_void,
    len: usize,
}

impl Mapping {
    fn new(file: &File, len: usize, writable: bool) -> io::Result<Mapping> {
        let prot = if writable {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        };
        // SAFETY: a fresh shared mapping of `len` bytes of an open file; the
        // kernel picks the address. Checked for MAP_FAILED below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping { ptr, len })
    }

    /// The 8-byte value at byte `offset` (a multiple of 8 inside the mapping).
    fn slot(&self, offset: usize) -> Option<&AtomicU64> {
        if !offset.is_multiple_of(8) || offset + 8 > self.len {
            return None;
        }
        // SAFETY: in bounds and 8-byte aligned (the mapping is page aligned);
        // every access to the file's values goes through atomics, and atomic
        // loads of a read-only mapping are sound (std::sync::atomic docs).
        Some(unsafe { &*(self.ptr.cast::<u8>().add(offset).cast::<AtomicU64>()) })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

// SAFETY: the mapping is only reached through atomics.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

/// The statistics file of process `pid`'s `n`-th endpoint in `dir`.
pub fn file_path(dir: &Path, pid: u32, n: u32) -> PathBuf {
    dir.join(format!("{pid}-{n}.stats"))
}

/// An endpoint's statistics file, open for updates; removed on drop.
pub struct Writer {
    path: PathBuf,
    map: Mapping,
    count: usize,
}

impl Writer {
    /// Creates `<dir>/<pid>-<n>.stats` for an endpoint with `counters`
    /// (`gauges` names those that are levels). Creates `dir` (mode 1777, as
    /// /tmp: every user's ranks write there) when missing.
    pub fn create(
        dir: &Path,
        n: u32,
        identity: &Identity,
        counters: &[&str],
        gauges: &[&str],
    ) -> io::Result<Writer> {
        if !dir.is_dir() {
            std::fs::create_dir_all(dir)?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o1777))?;
        }
        let pid = std::process::id();
        let header = header_text(pid, identity, counters, gauges)?;
        let tmp = dir.join(format!(".{pid}-{n}.tmp"));
        let path = file_path(dir, pid, n);
        let len = page_rounded(VALUES_OFFSET + 8 * counters.len());
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o644)
            .open(&tmp)?;
        file.write_all(header.as_bytes())?;
        file.write_all(&[0])?;
        file.set_len(len as u64)?;
        let map = Mapping::new(&file, len, true)?;
        std::fs::rename(&tmp, &path)?;
        Ok(Writer {
            path,
            map,
            count: counters.len(),
        })
    }

    /// Sets counter `index` (the order given to [`Writer::create`]).
    pub fn set(&self, index: usize, value: u64) {
        if index < self.count
            && let Some(v) = self.map.slot(VALUES_OFFSET + 8 * index)
        {
            v.store(value, Ordering::Relaxed);
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn header_text(pid: u32, id: &Identity, counters: &[&str], gauges: &[&str]) -> io::Result<String> {
    let word = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_graphic());
    if !counters.iter().chain(gauges).all(|n| word(n)) || !word(&id.ifname) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "names must be single words",
        ));
    }
    let mut h = format!(
        "{MAGIC}\npid {pid}\nstarttime {}\nnetns {}\npidns {}\nifname {}\nifindex {}\n\
         endpoint {}\npath {}\naddress {}\n",
        process_starttime(pid).unwrap_or(0),
        netns_inode().unwrap_or(0),
        pidns_inode().unwrap_or(0),
        id.ifname,
        id.ifindex,
        id.endpoint,
        id.path.as_str(),
        id.address
    );
    if let Some(q) = id.queue {
        h.push_str(&format!("queue {q}\n"));
    }
    if let Some(s) = id.slot {
        h.push_str(&format!("slot {s}\n"));
    }
    h.push_str(&format!(
        "counters {}\ngauges {}\nvalues {VALUES_OFFSET}\n",
        counters.join(" "),
        gauges.join(" ")
    ));
    if h.len() >= VALUES_OFFSET {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "header longer than a page",
        ));
    }
    Ok(h)
}

/// Reads one statistics file.
pub fn read(path: &Path) -> Result<EndpointStats, String> {
    let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let len = file
        .metadata()
        .map_err(|e| format!("{}: {e}", path.display()))?
        .len() as usize;
    let bad = |why: &str| format!("{}: {why}", path.display());
    if len < 8 {
        return Err(bad("too short"));
    }
    let map = Mapping::new(&file, len, false).map_err(|e| format!("{}: {e}", path.display()))?;
    // SAFETY: the mapping holds `len` readable bytes; the header is written
    // before the file gets its name and never changes after.
    let bytes = unsafe { std::slice::from_raw_parts(map.ptr.cast::<u8>(), len) };
    let end = bytes
        .iter()
        .position(|b| *b == 0)
        .ok_or_else(|| bad("no end of header"))?;
    let text = std::str::from_utf8(&bytes[..end]).map_err(|_| bad("header is not UTF-8"))?;
    let mut lines = text.lines();
    if lines.next() != Some(MAGIC) {
        return Err(bad("not a version-1 ofi-xdp statistics file"));
    }
    let fields: Vec<(&str, &str)> = lines
        .filter_map(|l| l.split_once(' ').or(Some((l, ""))))
        .collect();
    let get = |key: &str| fields.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
    let num = |key: &str| -> Result<u64, String> {
        get(key)
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| bad(&format!("no valid `{key}`")))
    };
    let small = |key: &str| -> Result<u32, String> {
        u32::try_from(num(key)?).map_err(|_| bad(&format!("`{key}` out of range")))
    };
    let optional = |key: &str| get(key).and_then(|v| v.trim().parse().ok());
    let path_kind = match get("path") {
        Some("af_xdp") => DataPath::AfXdp,
        Some("kernel_udp") => DataPath::KernelUdp,
        _ => return Err(bad("no valid `path`")),
    };
    let names: Vec<&str> = get("counters").unwrap_or("").split_whitespace().collect();
    let gauges: Vec<&str> = get("gauges").unwrap_or("").split_whitespace().collect();
    let offset = usize::try_from(num("values")?).map_err(|_| bad("`values` out of range"))?;
    let values = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let v = map
                .slot(offset + 8 * i)
                .ok_or_else(|| bad("values beyond the end of the file"))?;
            Ok((
                (*name).to_owned(),
                v.load(Ordering::Relaxed),
                gauges.contains(name),
            ))
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(EndpointStats {
        file: path.to_path_buf(),
        pid: small("pid")?,
        starttime: num("starttime")?,
        netns: num("netns")?,
        pidns: get("pidns").and_then(|v| v.trim().parse().ok()),
        identity: Identity {
            endpoint: get("endpoint").unwrap_or("").to_owned(),
            path: path_kind,
            ifname: get("ifname").unwrap_or("").to_owned(),
            ifindex: small("ifindex")?,
            address: get("address").unwrap_or("").to_owned(),
            queue: optional("queue"),
            slot: optional("slot"),
        },
        values,
    })
}

/// Removes the files in `dir` that processes of this user and pid
/// namespace left behind when killed (the process a file names no longer
/// runs); how many. Left for `ofi-xdp cleanup`: other users' files (the
/// directory is sticky: only a file's owner may remove it), files of
/// another pid namespace sharing the directory (their pids name other
/// processes here, or none), files of older builds (no `pidns`) and files
/// that do not read.
pub fn remove_dead(dir: &Path) -> usize {
    use std::os::unix::fs::MetadataExt as _;
    let Some(pidns) = pidns_inode() else {
        return 0;
    };
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    read_dir(dir)
        .into_iter()
        .flatten()
        .filter(|e| e.pidns == Some(pidns) && !e.alive())
        .filter(|e| std::fs::metadata(&e.file).is_ok_and(|m| m.uid() == uid))
        .filter(|e| std::fs::remove_file(&e.file).is_ok())
        .count()
}

/// Every statistics file in `dir` (by name), read; unreadable ones as errors.
/// A missing directory holds none.
pub fn read_dir(dir: &Path) -> Vec<Result<EndpointStats, String>> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "stats"))
        .collect();
    paths.sort();
    paths.iter().map(|p| read(p)).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn identity() -> Identity {
        Identity {
            endpoint: "rdm".into(),
            path: DataPath::AfXdp,
            ifname: "eth9".into(),
            ifindex: 9,
            address: "192.0.2.1:47000".into(),
            queue: Some(3),
            slot: Some(1),
        }
    }

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("epstats-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn written_values_are_read_back_live() {
        let dir = temp_dir("rw");
        let w = Writer::create(&dir, 0, &identity(), &["sent", "held"], &["held"]).unwrap();
        w.set(0, 41);
        w.set(1, 7);
        w.set(5, 99); // out of range: ignored
        let r = read(w.path()).unwrap();
        assert_eq!(r.identity, identity());
        assert_eq!(r.pid, std::process::id());
        assert!(r.alive());
        assert_eq!(r.netns, netns_inode().unwrap());
        assert_eq!(
            r.values,
            vec![("sent".into(), 41, false), ("held".into(), 7, true)]
        );
        w.set(0, 42);
        assert_eq!(read(w.path()).unwrap().value("sent"), Some(42));
        let all = read_dir(&dir);
        assert_eq!(all.len(), 1);
        let path = w.path().to_path_buf();
        drop(w);
        assert!(!path.exists(), "removed when the endpoint closes");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn files_of_killed_processes_of_ours_are_removed_and_no_others() {
        let dir = temp_dir("dead");
        let live = Writer::create(&dir, 0, &identity(), &["sent"], &[]).unwrap();
        let pid = std::process::id();
        let start = process_starttime(pid).unwrap();
        let ns = pidns_inode().unwrap();
        // Our pid with another start time: a process that ran here before.
        let file = |name: &str, starttime: u64, pidns: Option<u64>| {
            let mut h = format!(
                "{MAGIC}\npid {pid}\nstarttime {starttime}\nnetns 1\nifindex 1\n\
                 path af_xdp\ncounters a\nvalues {VALUES_OFFSET}\n"
            );
            if let Some(ns) = pidns {
                h.push_str(&format!("pidns {ns}\n"));
            }
            let mut b = h.into_bytes();
            b.resize(VALUES_OFFSET + 8, 0);
            std::fs::write(dir.join(name), b).unwrap();
        };
        file("1-0.stats", start + 1, Some(ns));
        file("2-0.stats", start + 1, Some(ns + 1));
        file("3-0.stats", start + 1, None);
        assert_eq!(remove_dead(&dir), 1);
        assert!(!dir.join("1-0.stats").exists(), "dead, ours: removed");
        for kept in ["2-0.stats", "3-0.stats"] {
            assert!(
                dir.join(kept).exists(),
                "{kept}: another pid namespace, or no pidns"
            );
        }
        assert!(live.path().exists(), "a live endpoint's file stays");
        assert_eq!(read(live.path()).unwrap().pidns, Some(ns));
        drop(live);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn damaged_files_are_errors_not_panics() {
        let dir = temp_dir("bad");
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("1-0.stats");
        for content in [
            &b""[..],
            b"hello\0",
            b"ofi-xdp-endpoint-stats 1\npid x\n\0",
            b"ofi-xdp-endpoint-stats 1\npid 1\nstarttime 1\nnetns 1\nifindex 1\npath af_xdp\ncounters a b\nvalues 8\n",
            b"ofi-xdp-endpoint-stats 1\npid 1\nstarttime 1\nnetns 1\nifindex 1\npath af_xdp\ncounters a b\nvalues 4096\n\0",
        ] {
            std::fs::write(&f, content).unwrap();
            assert!(read(&f).is_err(), "{:?}", String::from_utf8_lossy(content));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn starttime_of_this_process_is_stable() {
        let me = std::process::id();
        assert!(process_starttime(me).is_some());
        assert_eq!(process_starttime(me), process_starttime(me));
        assert_eq!(process_starttime(u32::MAX), None);
    }
}
