//! The loader's errors, and how a system call's or aya's failure becomes
//! one: each says what to do about it.

use std::io;

use super::{AttachMode, has_bpf_capability};

/// Errors of the loader. Messages say what to do about them.
#[derive(Debug, thiserror::Error)]
pub enum BpfError {
    #[error(
        "permission denied while {action}: loading and attaching XDP programs needs \
         CAP_BPF and CAP_NET_ADMIN (or CAP_SYS_ADMIN); run as root or grant them \
         with `setcap cap_bpf,cap_net_admin+ep <binary>` ({source})"
    )]
    PermissionDenied {
        action: &'static str,
        #[source]
        source: io::Error,
    },
    #[error(
        "interface {0:?} not found; check the name with `ip link` (in the right network \
         namespace)"
    )]
    InterfaceNotFound(String),
    #[error(
        "{mode} XDP mode is not supported on {ifname} ({source}); try the other mode \
         (native needs driver support; generic works on every interface)"
    )]
    ModeUnsupported {
        mode: AttachMode,
        ifname: String,
        #[source]
        source: io::Error,
    },
    #[error(
        "cannot attach native XDP to {ifname}: its MTU (or its veth peer's) is too large \
         for single-buffer XDP; lower it (e.g. `ip link set dev {ifname} mtu 1500` on both \
         ends) or use generic mode ({source})"
    )]
    MtuTooLarge {
        ifname: String,
        #[source]
        source: io::Error,
    },
    #[error(
        "the driver of {ifname} refused native XDP ({source}): drivers refuse a program without \
         multi-buffer support when a full-MTU frame does not fit one page (virtio_net: \
         \"MTU too large to enable XDP without frags\") or while offloads XDP cannot run with \
         are on; lower the MTU or use generic mode"
    )]
    NativeRefused {
        ifname: String,
        #[source]
        source: io::Error,
    },
    #[error(
        "interface {ifname} already has an XDP program attached ({source}); remove it with \
         `ip link set dev {ifname} xdp off` (or stop the process that owns it)"
    )]
    AlreadyAttached {
        ifname: String,
        #[source]
        source: io::Error,
    },
    #[error(
        "this kernel cannot attach XDP through a bpf_link ({source}); Linux 5.9 or newer \
         is required so that the program detaches when the process exits"
    )]
    NoBpfLink {
        #[source]
        source: io::Error,
    },
    #[error(
        "the kernel refused to create the BPF maps ({source}) although CAP_BPF/CAP_SYS_ADMIN \
         is present; on kernels before 5.11 that means RLIMIT_MEMLOCK is too low: raise it \
         (`ulimit -l unlimited`, or LimitMEMLOCK=infinity for a service) or run with \
         CAP_SYS_RESOURCE"
    )]
    Memlock {
        #[source]
        source: io::Error,
    },
    #[error("neither XDP mode could be attached to {ifname}: native: {native}; generic: {generic}")]
    NoModeWorks {
        ifname: String,
        native: Box<BpfError>,
        generic: Box<BpfError>,
    },
    #[error("loading the XDP program failed: {0}")]
    Load(String),
    #[error("{what} failed: {source}")]
    Syscall {
        what: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("{what} failed: {detail}")]
    Map { what: &'static str, detail: String },
    #[error("XSKMAP slot {slot} is out of range (0..{max})")]
    SlotOutOfRange { slot: u32, max: u32 },
    #[error("unknown XDP attach mode {0:?}; use \"native\" or \"generic\" (also \"skb\")")]
    InvalidMode(String),
    #[error("frame of {0} bytes is outside what BPF_PROG_TEST_RUN accepts (14..=3500)")]
    BadTestFrame(usize),
    #[error("BPF program {id} ({name:?}) is not the ofi-xdp steering program")]
    NotOurs { id: u32, name: String },
    #[error("the XDP program on {ifname} cannot be shared with this process: {why}")]
    NotAdoptable { ifname: String, why: String },
}

impl BpfError {
    /// True for errors that another attach mode might not have.
    pub fn is_mode_problem(&self) -> bool {
        matches!(
            self,
            BpfError::ModeUnsupported { .. }
                | BpfError::MtuTooLarge { .. }
                | BpfError::NativeRefused { .. }
        )
    }
}

/// Finds the OS error code anywhere in an error's source chain.
pub(crate) fn errno_in(err: &(dyn std::error::Error + 'static)) -> Option<i32> {
    let mut cur = Some(err);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<io::Error>()
            && let Some(code) = io.raw_os_error()
        {
            return Some(code);
        }
        cur = e.source();
    }
    None
}

/// Full text of an error and its sources (aya's verifier log lives in the
/// Display of `LoadError`).
pub(crate) fn chain_text(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut cur = err.source();
    while let Some(e) = cur {
        let s = e.to_string();
        if !text.contains(&s) {
            text.push_str(": ");
            text.push_str(&s);
        }
        cur = e.source();
    }
    text
}

/// Maps an aya error from loading the object or its maps to a [`BpfError`].
pub(crate) fn load_error(
    action: &'static str,
    err: &(dyn std::error::Error + 'static),
) -> BpfError {
    match errno_in(err) {
        Some(libc::EPERM) | Some(libc::EACCES) if !has_bpf_capability() => {
            BpfError::PermissionDenied {
                action,
                source: io::Error::from_raw_os_error(libc::EPERM),
            }
        }
        // Before Linux 5.11 BPF memory was charged to RLIMIT_MEMLOCK and an
        // exceeded limit showed up as EPERM even for root.
        Some(code @ (libc::EPERM | libc::ENOMEM)) => BpfError::Memlock {
            source: io::Error::from_raw_os_error(code),
        },
        _ => BpfError::Load(format!("{action}: {}", chain_text(err))),
    }
}

pub(crate) fn map_error(what: &'static str, err: aya::maps::MapError) -> BpfError {
    match errno_in(&err) {
        Some(libc::EPERM) | Some(libc::EACCES) => BpfError::PermissionDenied {
            action: what,
            source: io::Error::from_raw_os_error(libc::EPERM),
        },
        _ => BpfError::Map {
            what,
            detail: chain_text(&err),
        },
    }
}

pub(crate) fn attach_error(ifname: &str, mode: AttachMode, err: io::Error) -> BpfError {
    match err.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => BpfError::PermissionDenied {
            action: "attaching the XDP program",
            source: err,
        },
        Some(libc::ENODEV) => BpfError::InterfaceNotFound(ifname.to_string()),
        Some(libc::EOPNOTSUPP) => BpfError::ModeUnsupported {
            mode,
            ifname: ifname.to_string(),
            source: err,
        },
        // veth refuses native XDP when the peer MTU exceeds one page.
        Some(libc::ERANGE) => BpfError::MtuTooLarge {
            ifname: ifname.to_string(),
            source: err,
        },
        // A program attached through netlink (or another link) is present.
        Some(libc::EBUSY) | Some(libc::EEXIST) => BpfError::AlreadyAttached {
            ifname: ifname.to_string(),
            source: err,
        },
        // A driver's own refusal of native mode (virtio_net: the MTU does
        // not fit a single-buffer program) comes as EINVAL; generic mode
        // may still work, and tells the two cases apart.
        Some(libc::EINVAL) if mode == AttachMode::Native => BpfError::NativeRefused {
            ifname: ifname.to_string(),
            source: err,
        },
        // Kernels before 5.9 do not know BPF_LINK_CREATE for XDP.
        Some(libc::EINVAL) => BpfError::NoBpfLink { source: err },
        _ => BpfError::Syscall {
            what: "attaching the XDP program (BPF_LINK_CREATE)",
            source: err,
        },
    }
}
