//! `ofi-xdp-vm-tests guest-probe`: runs inside the guest and reports, by trying them, the
//! kernel features the provider's behaviour depends on. The host prints the result per kernel
//! (and README.md's kernel table is filled from it), so "what each kernel lacks" is measured,
//! not assumed from version numbers.

use std::io;
use std::mem::size_of;

/// `struct sockaddr_xdp` (include/uapi/linux/if_xdp.h).
#[repr(C)]
struct SockaddrXdp {
    family: u16,
    flags: u16,
    ifindex: u32,
    queue_id: u32,
    shared_umem_fd: u32,
}

/// `XDP_USE_SG` (if_xdp.h, Linux 6.6): multi-buffer AF_XDP.
const XDP_USE_SG: u16 = 1 << 4;
/// `BPF_F_XDP_HAS_FRAGS` (bpf.h, Linux 5.18): an XDP program that understands multi-buffer frames.
const BPF_F_XDP_HAS_FRAGS: u32 = 1 << 5;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_TYPE_XDP: u32 = 6;

/// The head of `union bpf_attr` for `BPF_PROG_LOAD` (bpf.h), up to `prog_flags`.
#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
}

/// One probe's answer: `yes`, or `no(<why>)`.
fn verdict(result: Result<(), io::Error>) -> String {
    match result {
        Ok(()) => "yes".to_owned(),
        Err(e) => format!("no({})", errno_name(&e)),
    }
}

fn errno_name(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EINVAL) => "EINVAL".to_owned(),
        Some(libc::EPERM) => "EPERM".to_owned(),
        Some(libc::EAFNOSUPPORT) => "EAFNOSUPPORT".to_owned(),
        Some(libc::EOPNOTSUPP) => "EOPNOTSUPP".to_owned(),
        Some(n) => format!("errno{n}"),
        None => e.to_string().replace(' ', "_"),
    }
}

/// An `AF_XDP` socket, closed on drop.
struct XskFd(libc::c_int);

impl Drop for XskFd {
    fn drop(&mut self) {
        // SAFETY: we own this descriptor and close it once.
        unsafe { libc::close(self.0) };
    }
}

fn xsk_socket() -> Result<XskFd, io::Error> {
    // SAFETY: plain socket(2) call with constant arguments.
    let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW, 0) };
    if fd < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(XskFd(fd))
    }
}

/// Multi-buffer AF_XDP: `bind` checks the flags before it looks the device up, so with
/// interface index 0 a kernel that knows `XDP_USE_SG` answers `ENODEV` and one that does not
/// answers `EINVAL` (net/xdp/xsk.c, `xsk_bind`).
fn probe_use_sg() -> Result<(), io::Error> {
    let sock = xsk_socket()?;
    let addr = SockaddrXdp {
        family: u16::try_from(libc::AF_XDP).unwrap_or(44),
        flags: XDP_USE_SG,
        ifindex: 0,
        queue_id: 0,
        shared_umem_fd: 0,
    };
    let len = u32::try_from(size_of::<SockaddrXdp>()).unwrap_or(16);
    // SAFETY: `addr` is a valid sockaddr_xdp of `len` bytes that outlives the call.
    let rc = unsafe { libc::bind(sock.0, (&raw const addr).cast(), len) };
    let err = io::Error::last_os_error();
    match (rc, err.raw_os_error()) {
        (0, _) | (_, Some(libc::ENODEV)) => Ok(()),
        _ => Err(err),
    }
}

/// Loads `r0 = XDP_PASS; exit` as an XDP program with `prog_flags`.
fn probe_xdp_prog(prog_flags: u32) -> Result<(), io::Error> {
    // BPF_MOV64_IMM(BPF_REG_0, XDP_PASS=2); BPF_EXIT_INSN()
    let insns: [u64; 2] = [
        u64::from_le_bytes([0xb7, 0x00, 0, 0, 2, 0, 0, 0]),
        u64::from_le_bytes([0x95, 0x00, 0, 0, 0, 0, 0, 0]),
    ];
    let license = c"GPL";
    let attr = ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_XDP,
        insn_cnt: 2,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        prog_flags,
        ..ProgLoadAttr::default()
    };
    // SAFETY: bpf(2) reads `size_of::<ProgLoadAttr>()` bytes of `attr`, whose pointers refer to
    // `insns` and `license`, both alive for the call; the kernel zero-checks the rest.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_LOAD,
            &raw const attr,
            size_of::<ProgLoadAttr>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the syscall returned a new descriptor that we own.
    unsafe { libc::close(i32::try_from(fd).unwrap_or(-1)) };
    Ok(())
}

/// The probe line: `key=value` words.
pub fn report() -> String {
    let words = [
        ("af_xdp", verdict(xsk_socket().map(drop))),
        ("xdp_prog", verdict(probe_xdp_prog(0))),
        (
            "xdp_frags_prog",
            verdict(probe_xdp_prog(BPF_F_XDP_HAS_FRAGS)),
        ),
        ("xsk_multi_buffer", verdict(probe_use_sg())),
    ];
    words
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_layout_matches_bpf_h() {
        // prog_flags sits at offset 44 of union bpf_attr (bpf.h).
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, prog_flags), 44);
        assert_eq!(size_of::<SockaddrXdp>(), 16);
    }

    #[test]
    fn report_has_every_key() {
        let r = report();
        for k in [
            "af_xdp=",
            "xdp_prog=",
            "xdp_frags_prog=",
            "xsk_multi_buffer=",
        ] {
            assert!(r.contains(k), "{r}");
        }
    }
}
