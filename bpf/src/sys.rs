//! Raw `bpf(2)` commands that aya 0.14 has no public API for: walking and
//! detaching BPF links, and opening pinned objects of any kind. Each builds
//! the `union bpf_attr` member it needs as a zeroed buffer (the kernel
//! requires every byte past the fields it knows to be zero) with the field
//! offsets of `<linux/bpf.h>`.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

// `enum bpf_cmd` values from <linux/bpf.h>.
const BPF_OBJ_GET: libc::c_long = 7;
const BPF_PROG_GET_FD_BY_ID: libc::c_long = 13;
const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
const BPF_LINK_GET_FD_BY_ID: libc::c_long = 30;
const BPF_LINK_GET_NEXT_ID: libc::c_long = 31;
const BPF_LINK_DETACH: libc::c_long = 34;

/// `BPF_LINK_TYPE_XDP` in `enum bpf_link_type`.
pub const BPF_LINK_TYPE_XDP: u32 = 6;

/// `bpf(cmd, attr, sizeof attr)`; the return value when non-negative.
fn bpf(cmd: libc::c_long, attr: &mut [u64]) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a valid, writable buffer of the size passed; every
    // pointer the callers put into it refers to memory that outlives the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr.as_mut_ptr(),
            std::mem::size_of_val(attr),
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// Writes a u32 at byte `offset` of a `bpf_attr` buffer.
fn put_u32(attr: &mut [u64], offset: usize, value: u32) {
    let word = &mut attr[offset / 8];
    let mut bytes = word.to_ne_bytes();
    bytes[offset % 8..offset % 8 + 4].copy_from_slice(&value.to_ne_bytes());
    *word = u64::from_ne_bytes(bytes);
}

/// Reads a u32 at byte `offset` of a `bpf_attr` buffer.
fn get_u32(attr: &[u64], offset: usize) -> u32 {
    let bytes = attr[offset / 8].to_ne_bytes();
    let mut v = [0u8; 4];
    v.copy_from_slice(&bytes[offset % 8..offset % 8 + 4]);
    u32::from_ne_bytes(v)
}

fn owned(rc: libc::c_long) -> OwnedFd {
    // SAFETY: the command returned a new file descriptor that we now own.
    unsafe { OwnedFd::from_raw_fd(rc as RawFd) }
}

/// `BPF_LINK_GET_NEXT_ID`: the next link id after `start`, `None` at the end.
pub fn link_next_id(start: u32) -> io::Result<Option<u32>> {
    // `struct { __u32 start_id; __u32 next_id; __u32 open_flags; }`
    let mut attr = [0u64; 2];
    put_u32(&mut attr, 0, start);
    match bpf(BPF_LINK_GET_NEXT_ID, &mut attr) {
        Ok(_) => Ok(Some(get_u32(&attr, 4))),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `BPF_PROG_GET_FD_BY_ID`.
pub fn prog_fd_by_id(id: u32) -> io::Result<OwnedFd> {
    // `struct { __u32 prog_id; __u32 next_id; __u32 open_flags; }`
    let mut attr = [0u64; 2];
    put_u32(&mut attr, 0, id);
    bpf(BPF_PROG_GET_FD_BY_ID, &mut attr).map(owned)
}

/// `BPF_LINK_GET_FD_BY_ID`.
pub fn link_fd_by_id(id: u32) -> io::Result<OwnedFd> {
    let mut attr = [0u64; 2];
    put_u32(&mut attr, 0, id);
    bpf(BPF_LINK_GET_FD_BY_ID, &mut attr).map(owned)
}

/// What `BPF_OBJ_GET_INFO_BY_FD` tells about a link (`struct bpf_link_info`:
/// type, id, prog_id, then a union aligned to 8 bytes whose `xdp` member is
/// the interface index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkInfo {
    pub link_type: u32,
    pub id: u32,
    pub prog_id: u32,
    /// The attached interface for an XDP link (0 once detached).
    pub xdp_ifindex: u32,
}

pub fn link_info(fd: BorrowedFd<'_>) -> io::Result<LinkInfo> {
    let mut info = [0u64; 12];
    // `struct { __u32 bpf_fd; __u32 info_len; __aligned_u64 info; }`
    let mut attr = [0u64; 2];
    put_u32(&mut attr, 0, fd.as_raw_fd() as u32);
    put_u32(&mut attr, 4, std::mem::size_of_val(&info) as u32);
    attr[1] = info.as_mut_ptr() as u64;
    bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr)?;
    Ok(LinkInfo {
        link_type: get_u32(&info, 0),
        id: get_u32(&info, 4),
        prog_id: get_u32(&info, 8),
        xdp_ifindex: get_u32(&info, 16),
    })
}

/// `BPF_LINK_DETACH` (Linux 5.9+): the link stays, but its program leaves the
/// hook, whoever else holds or pins the link.
pub fn link_detach(fd: BorrowedFd<'_>) -> io::Result<()> {
    let mut attr = [0u64; 1];
    put_u32(&mut attr, 0, fd.as_raw_fd() as u32);
    bpf(BPF_LINK_DETACH, &mut attr).map(|_| ())
}

/// `BPF_OBJ_GET`: opens the object pinned at `path` on a BPF filesystem.
pub fn obj_get(path: &Path) -> io::Result<OwnedFd> {
    use std::os::unix::ffi::OsStrExt as _;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // `struct { __aligned_u64 pathname; __u32 bpf_fd; __u32 file_flags; }`
    let mut attr = [0u64; 2];
    attr[0] = c_path.as_ptr() as u64;
    bpf(BPF_OBJ_GET, &mut attr).map(owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_fields_land_at_their_offsets() {
        let mut attr = [0u64; 2];
        put_u32(&mut attr, 0, 1);
        put_u32(&mut attr, 4, 2);
        put_u32(&mut attr, 8, 3);
        assert_eq!(get_u32(&attr, 0), 1);
        assert_eq!(get_u32(&attr, 4), 2);
        assert_eq!(get_u32(&attr, 8), 3);
        assert_eq!(get_u32(&attr, 12), 0);
    }
}
