//! Whether memory offered for remote access is there to be accessed: the
//! process's mappings as `/proc/self/maps` lists them (proc(5)).
//!
//! A peer's write, read or atomic is copied into or out of registered
//! memory by this process, in its progress, with a plain copy. Memory that
//! is not mapped, or mapped without the access the registration grants (a
//! string literal registered for FI_REMOTE_WRITE), would fault the process
//! that registered it when a peer uses the key; an RDMA provider's
//! registration fails the same way, at `fi_mr_reg` (the kernel refuses to
//! pin such pages). So `fi_mr_reg` asks here first. Memory unmapped while
//! registered is the application's error (fi_mr(3): registered buffers stay
//! valid until the registration is closed). Registrations from NULL name
//! the whole address space and are exempt: their copies go through
//! `process_vm_readv(2)` / `process_vm_writev(2)` (`super::memory`).

use std::fs::File;
use std::io::Read;
use std::os::fd::AsRawFd;

/// One mapping: `[start, end)` and whether it is readable and writable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Mapping {
    start: usize,
    end: usize,
    read: bool,
    write: bool,
}

/// Whether every byte of `ranges` (address, length) is mapped with the
/// access asked (`read`, `write`). `None` when the mappings cannot be read
/// (no `/proc`): the caller does not refuse memory it cannot judge.
///
/// Each mapping is asked for with the `PROCMAP_QUERY` ioctl (Linux 6.11+,
/// a few microseconds); older kernels have the whole list read (≈ 100 µs in
/// a process that loaded libfabric's providers).
pub fn grant(ranges: &[(usize, usize)], read: bool, write: bool) -> Option<bool> {
    let mut file = File::open("/proc/self/maps").ok()?;
    let asked = |file: &File| -> Result<bool, ()> {
        let mut all = true;
        for &(at, len) in ranges {
            all &= covered(at, len, read, write, |addr| query(file, addr))?;
        }
        Ok(all)
    };
    if let Ok(v) = asked(&file) {
        return Some(v);
    }
    let mut text = String::new();
    file.read_to_string(&mut text).ok()?;
    let maps: Vec<Mapping> = text.lines().filter_map(parse_line).collect();
    let find = |addr: usize| {
        Ok(maps
            .iter()
            .find(|m| m.start <= addr && addr < m.end)
            .copied())
    };
    Some(
        ranges
            .iter()
            .all(|&(at, len)| covered(at, len, read, write, find) == Ok(true)),
    )
}

/// `struct procmap_query` (linux/fs.h, Linux 6.11).
#[repr(C)]
#[derive(Default)]
struct ProcmapQuery {
    size: u64,
    query_flags: u64,
    query_addr: u64,
    vma_start: u64,
    vma_end: u64,
    vma_flags: u64,
    vma_page_size: u64,
    vma_offset: u64,
    inode: u64,
    dev_major: u32,
    dev_minor: u32,
    vma_name_size: u32,
    build_id_size: u32,
    vma_name_addr: u64,
    build_id_addr: u64,
}

/// `_IOWR('f', 17, struct procmap_query)`.
const PROCMAP_QUERY: libc::c_ulong = (3 << 30)
    | ((std::mem::size_of::<ProcmapQuery>() as libc::c_ulong) << 16)
    | ((b'f' as libc::c_ulong) << 8)
    | 17;
const PROCMAP_QUERY_VMA_READABLE: u64 = 0x01;
const PROCMAP_QUERY_VMA_WRITABLE: u64 = 0x02;

/// The mapping that holds `addr` (`Ok(None)`: none does), asked of the
/// kernel; `Err` when it does not know the query (before Linux 6.11).
fn query(maps: &File, addr: usize) -> Result<Option<Mapping>, ()> {
    let mut q = ProcmapQuery {
        size: std::mem::size_of::<ProcmapQuery>() as u64,
        query_addr: addr as u64,
        ..ProcmapQuery::default()
    };
    // SAFETY: `q` is a procmap_query of the size it states, asking for no
    // name or build id (their sizes are 0), on our /proc/self/maps.
    let rc = unsafe { libc::ioctl(maps.as_raw_fd(), PROCMAP_QUERY as _, &mut q) };
    if rc == 0 {
        return Ok(Some(Mapping {
            start: q.vma_start as usize,
            end: q.vma_end as usize,
            read: q.vma_flags & PROCMAP_QUERY_VMA_READABLE != 0,
            write: q.vma_flags & PROCMAP_QUERY_VMA_WRITABLE != 0,
        }));
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::ENOENT) => Ok(None),
        _ => Err(()),
    }
}

/// `start-end perms offset dev inode [path]`, addresses in hex.
fn parse_line(line: &str) -> Option<Mapping> {
    let mut fields = line.split_ascii_whitespace();
    let (start, end) = fields.next()?.split_once('-')?;
    let perms = fields.next()?.as_bytes();
    Some(Mapping {
        start: usize::from_str_radix(start, 16).ok()?,
        end: usize::from_str_radix(end, 16).ok()?,
        read: perms.first() == Some(&b'r'),
        write: perms.get(1) == Some(&b'w'),
    })
}

/// Whether `[at, at + len)` is covered without a gap by mappings with the
/// access asked, `find` giving the mapping that holds an address.
fn covered(
    at: usize,
    len: usize,
    read: bool,
    write: bool,
    mut find: impl FnMut(usize) -> Result<Option<Mapping>, ()>,
) -> Result<bool, ()> {
    if len == 0 {
        return Ok(true);
    }
    let Some(end) = at.checked_add(len) else {
        return Ok(false);
    };
    let mut next = at;
    while next < end {
        let Some(m) = find(next)? else {
            return Ok(false);
        };
        if (read && !m.read) || (write && !m.write) || m.end <= next {
            return Ok(false);
        }
        next = m.end;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(start: usize, end: usize, perms: &str) -> Mapping {
        parse_line(&format!("{start:x}-{end:x} {perms} 00000000 00:00 0")).unwrap()
    }

    #[test]
    fn lines_parse() {
        let l = "7f3a1c000000-7f3a1c021000 rw-p 00000000 00:00 0        [heap]";
        let got = parse_line(l).unwrap();
        assert_eq!((got.start, got.end), (0x7f3a_1c00_0000, 0x7f3a_1c02_1000));
        assert!(got.read && got.write);
        let ro = parse_line("00400000-00452000 r-xp 00000000 08:02 173521 /usr/bin/dbus").unwrap();
        assert!(ro.read && !ro.write);
        assert_eq!(parse_line("garbage"), None);
    }

    #[test]
    fn coverage_needs_every_byte_with_the_access() {
        let maps = [
            m(0x1000, 0x3000, "rw-p"),
            m(0x3000, 0x4000, "r--p"),
            m(0x5000, 0x6000, "rw-p"),
        ];
        let find = |a: usize| Ok(maps.iter().find(|m| m.start <= a && a < m.end).copied());
        let c = |at, len, write| covered(at, len, true, write, find).unwrap();
        assert!(c(0x1000, 0x2000, true));
        assert!(c(0x1800, 0x2800, false), "across two");
        assert!(!c(0x1800, 0x2800, true), "read-only part");
        assert!(!c(0x3800, 0x2000, false), "a hole");
        assert!(!c(0x6000, 1, false), "past the end");
        assert!(!c(usize::MAX - 1, 4, false), "wraps");
        assert!(c(0x9000, 0, true), "empty");
    }

    #[test]
    fn the_query_agrees_with_the_list() {
        let file = File::open("/proc/self/maps").unwrap();
        let here = 0u8;
        let addr = &here as *const u8 as usize;
        let Ok(asked) = query(&file, addr) else {
            return; // before Linux 6.11: the list alone is used
        };
        let mut text = String::new();
        File::open("/proc/self/maps")
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        let listed = text
            .lines()
            .filter_map(parse_line)
            .find(|m| m.start <= addr && addr < m.end);
        assert_eq!(asked, listed);
        assert_eq!(query(&file, 4096), Ok(None));
    }

    #[test]
    fn this_process_is_judged() {
        let mut stack = [0u8; 64];
        stack[0] = 1;
        let here = (stack.as_ptr() as usize, stack.len());
        assert_eq!(grant(&[here], true, true), Some(true));
        let text = (grant as fn(&[(usize, usize)], bool, bool) -> Option<bool>) as usize;
        assert_eq!(grant(&[(text, 16)], true, true), Some(false));
        assert_eq!(grant(&[(4096, 16)], true, false), Some(false));
    }
}
