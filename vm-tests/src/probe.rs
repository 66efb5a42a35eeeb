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
        Some(libc::EBUSY) => "EBUSY".to_owned(),
        Some(libc::ENOENT) => "ENOENT".to_owned(),
        Some(libc::ENOMEM) => "ENOMEM".to_owned(),
        Some(libc::ENODEV) => "ENODEV".to_owned(),
        Some(n) => format!("errno{n}"),
        None => e.to_string().replace(' ', "_"),
    }
}

/// A socket descriptor, closed on drop.
struct SocketFd(libc::c_int);

impl Drop for SocketFd {
    fn drop(&mut self) {
        // SAFETY: we own this descriptor and close it once.
        unsafe { libc::close(self.0) };
    }
}

fn xsk_socket() -> Result<SocketFd, io::Error> {
    // SAFETY: plain socket(2) call with constant arguments.
    let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW, 0) };
    if fd < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(SocketFd(fd))
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

/// Page-aligned anonymous memory for a UMEM (`XDP_UMEM_REG` refuses anything else), unmapped
/// on drop.
struct Umem {
    ptr: *mut libc::c_void,
    len: usize,
}

impl Umem {
    fn new(len: usize) -> Result<Umem, io::Error> {
        // SAFETY: an anonymous private mapping; the result is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Umem { ptr, len })
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: the mapping made in new(), unmapped once.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// An AF_XDP socket with a small UMEM and its rings set up, ready for `bind`.
fn xsk_with_umem(umem: &Umem) -> Result<SocketFd, io::Error> {
    let sock = xsk_socket()?;
    let reg = libc::xdp_umem_reg {
        addr: umem.ptr as u64,
        len: umem.len as u64,
        chunk_size: 4096,
        headroom: 0,
        flags: 0,
        tx_metadata_len: 0,
    };
    let set = |name: libc::c_int, value: *const libc::c_void, len: usize| {
        // SAFETY: setsockopt reads `len` bytes at `value`, which the callers below point at
        // live values of that size.
        let rc = unsafe {
            libc::setsockopt(
                sock.0,
                libc::SOL_XDP,
                name,
                value,
                u32::try_from(len).unwrap_or(0),
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    };
    set(
        libc::XDP_UMEM_REG,
        (&raw const reg).cast(),
        size_of::<libc::xdp_umem_reg>(),
    )?;
    let entries: u32 = 64;
    for ring in [
        libc::XDP_UMEM_FILL_RING,
        libc::XDP_UMEM_COMPLETION_RING,
        libc::XDP_RX_RING,
        libc::XDP_TX_RING,
    ] {
        set(ring, (&raw const entries).cast(), size_of::<u32>())?;
    }
    Ok(sock)
}

/// Binds an AF_XDP socket to `ifname` queue `queue` with `flags` (`XDP_ZEROCOPY`, …): what the
/// driver answers is what the provider would get.
fn probe_bind(ifname: &str, queue: u32, flags: u16) -> Result<(), io::Error> {
    let name =
        std::ffi::CString::new(ifname).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: a valid NUL-terminated name.
    let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if ifindex == 0 {
        return Err(io::Error::last_os_error());
    }
    let umem = Umem::new(64 * 4096)?;
    let sock = xsk_with_umem(&umem)?;
    let addr = SockaddrXdp {
        family: u16::try_from(libc::AF_XDP).unwrap_or(44),
        flags,
        ifindex,
        queue_id: queue,
        shared_umem_fd: 0,
    };
    let len = u32::try_from(size_of::<SockaddrXdp>()).unwrap_or(16);
    // The previous probe's socket leaves the queue a moment after it is closed (the kernel
    // releases its pool from a work queue): EBUSY until then.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    loop {
        // SAFETY: `addr` is a valid sockaddr_xdp of `len` bytes that outlives the call.
        let rc = unsafe { libc::bind(sock.0, (&raw const addr).cast(), len) };
        if rc == 0 {
            break;
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EBUSY) || std::time::Instant::now() > deadline {
            return Err(e);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    drop(sock);
    drop(umem);
    Ok(())
}

/// Generic netlink (linux/genetlink.h) and the `netdev` family (linux/netdev.h, Linux 6.3+):
/// what XDP features a device advertises, as the kernel itself keeps them.
mod netdev_genl {
    use std::io;

    const NETLINK_GENERIC: libc::c_int = 16;
    const GENL_ID_CTRL: u16 = 0x10;
    const CTRL_CMD_GETFAMILY: u8 = 3;
    const CTRL_ATTR_FAMILY_ID: u16 = 1;
    const CTRL_ATTR_FAMILY_NAME: u16 = 2;
    const NETDEV_CMD_DEV_GET: u8 = 1;
    const NETDEV_A_DEV_IFINDEX: u16 = 1;
    const NETDEV_A_DEV_XDP_FEATURES: u16 = 3;
    const NETDEV_A_DEV_XDP_ZC_MAX_SEGS: u16 = 4;
    const NLMSG_ERROR: u16 = 2;

    /// `enum netdev_xdp_act` bits, by name.
    pub const XDP_ACT: [(u64, &str); 7] = [
        (1, "basic"),
        (2, "redirect"),
        (4, "ndo-xmit"),
        (8, "xsk-zerocopy"),
        (16, "hw-offload"),
        (32, "rx-sg"),
        (64, "ndo-xmit-sg"),
    ];

    fn attr(buf: &mut Vec<u8>, kind: u16, data: &[u8]) {
        let len = 4 + data.len();
        buf.extend_from_slice(&u16::try_from(len).unwrap_or(0).to_ne_bytes());
        buf.extend_from_slice(&kind.to_ne_bytes());
        buf.extend_from_slice(data);
        buf.resize(buf.len().next_multiple_of(4), 0);
    }

    /// One request (`nlmsghdr` + `genlmsghdr` + attributes), one reply's attributes.
    fn request(family: u16, cmd: u8, attrs: &[(u16, &[u8])]) -> io::Result<Vec<(u16, Vec<u8>)>> {
        let mut body = vec![cmd, 1, 0, 0];
        for (k, d) in attrs {
            attr(&mut body, *k, d);
        }
        let mut msg = Vec::new();
        msg.extend_from_slice(&u32::try_from(16 + body.len()).unwrap_or(0).to_ne_bytes());
        msg.extend_from_slice(&family.to_ne_bytes());
        msg.extend_from_slice(&1u16.to_ne_bytes()); // NLM_F_REQUEST
        msg.extend_from_slice(&[0; 8]); // seq, pid
        msg.extend_from_slice(&body);
        // SAFETY: plain socket call, checked.
        let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW, NETLINK_GENERIC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let sock = super::SocketFd(fd);
        // SAFETY: sends `msg` (to the kernel: no address needed on a netlink socket).
        if unsafe { libc::send(sock.0, msg.as_ptr().cast(), msg.len(), 0) } < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut reply = vec![0u8; 8192];
        // SAFETY: receives into `reply`, at most its length.
        let n = unsafe { libc::recv(sock.0, reply.as_mut_ptr().cast(), reply.len(), 0) };
        let n = usize::try_from(n).map_err(|_| io::Error::last_os_error())?;
        let reply = &reply[..n];
        if reply.len() < 20 {
            return Err(io::Error::other("short netlink reply"));
        }
        if u16::from_ne_bytes([reply[4], reply[5]]) == NLMSG_ERROR {
            let code = i32::from_ne_bytes([reply[16], reply[17], reply[18], reply[19]]);
            return Err(io::Error::from_raw_os_error(-code));
        }
        let mut out = Vec::new();
        let mut at = 20;
        while at + 4 <= reply.len() {
            let len = usize::from(u16::from_ne_bytes([reply[at], reply[at + 1]]));
            let kind = u16::from_ne_bytes([reply[at + 2], reply[at + 3]]) & 0x3fff;
            if len < 4 || at + len > reply.len() {
                break;
            }
            out.push((kind, reply[at + 4..at + len].to_vec()));
            at += len.next_multiple_of(4);
        }
        Ok(out)
    }

    /// `(xdp-features, xdp-zc-max-segs)` of the device with `ifindex`.
    pub fn xdp_features(ifindex: u32) -> io::Result<(u64, u32)> {
        let fam = request(
            GENL_ID_CTRL,
            CTRL_CMD_GETFAMILY,
            &[(CTRL_ATTR_FAMILY_NAME, b"netdev\0")],
        )?;
        let id = fam
            .iter()
            .find(|(k, d)| *k == CTRL_ATTR_FAMILY_ID && d.len() >= 2)
            .map(|(_, d)| u16::from_ne_bytes([d[0], d[1]]))
            .ok_or_else(|| io::Error::other("no netdev family (Linux 6.3+)"))?;
        let dev = request(
            id,
            NETDEV_CMD_DEV_GET,
            &[(NETDEV_A_DEV_IFINDEX, &ifindex.to_ne_bytes())],
        )?;
        let get = |kind: u16| dev.iter().find(|(k, _)| *k == kind).map(|(_, d)| d.clone());
        let features = get(NETDEV_A_DEV_XDP_FEATURES)
            .and_then(|d| {
                d.get(..8)
                    .map(|b| u64::from_ne_bytes(b.try_into().unwrap_or([0; 8])))
            })
            .unwrap_or(0);
        let segs = get(NETDEV_A_DEV_XDP_ZC_MAX_SEGS)
            .and_then(|d| {
                d.get(..4)
                    .map(|b| u32::from_ne_bytes(b.try_into().unwrap_or([0; 4])))
            })
            .unwrap_or(0);
        Ok((features, segs))
    }
}

/// What the kernel says the device offers (`netdev` genetlink): the XDP feature names joined
/// by `,`, and the zero-copy multi-buffer segment limit.
fn xdp_features(ifindex: u32) -> String {
    match netdev_genl::xdp_features(ifindex) {
        Ok((bits, segs)) => {
            let names: Vec<&str> = netdev_genl::XDP_ACT
                .iter()
                .filter(|(b, _)| bits & b != 0)
                .map(|(_, n)| *n)
                .collect();
            format!("{} xdp_zc_max_segs={segs}", names.join(","))
        }
        Err(e) => format!("unknown({})", errno_name(&e)),
    }
}

/// The NIC probe line for `ifname`: its driver, the XDP features the kernel says it offers,
/// and what AF_XDP binds it accepts on queue 1 (zero-copy alone, with multi-buffer, copy).
pub fn nic_report(ifname: &str) -> String {
    let driver = std::fs::read_link(format!("/sys/class/net/{ifname}/device/driver"))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "unknown".to_owned());
    let zc = libc::XDP_ZEROCOPY | libc::XDP_USE_NEED_WAKEUP;
    let name = std::ffi::CString::new(ifname).unwrap_or_default();
    // SAFETY: a valid NUL-terminated name.
    let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
    [
        ("nic", ifname.to_owned()),
        ("driver", driver),
        ("xdp_features", xdp_features(ifindex)),
        ("xsk_zerocopy_q1", verdict(probe_bind(ifname, 1, zc))),
        (
            "xsk_zerocopy_multi_buffer_q1",
            verdict(probe_bind(ifname, 1, zc | XDP_USE_SG)),
        ),
        (
            "xsk_copy_q1",
            verdict(probe_bind(ifname, 1, libc::XDP_COPY)),
        ),
    ]
    .iter()
    .map(|(k, v)| format!("{k}={v}"))
    .collect::<Vec<_>>()
    .join(" ")
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
