//! Errors that say what to do.

use std::fmt;
use std::io;

use crate::frames::FrameError;

/// Everything that can go wrong opening or driving a [`crate::Link`].
#[derive(Debug)]
#[non_exhaustive]
pub enum LinkError {
    /// No interface of that name in this network namespace.
    InterfaceNotFound {
        /// The name asked for.
        ifname: String,
    },
    /// The interface has no (matching) IP address.
    NoAddress {
        /// Interface name.
        ifname: String,
        /// What was looked for.
        wanted: String,
    },
    /// The kernel refused for lack of privilege.
    Permission {
        /// The step that failed.
        op: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// The kernel has no AF_XDP support (`CONFIG_XDP_SOCKETS`).
    Unsupported {
        /// The OS error.
        source: io::Error,
    },
    /// Registering the UMEM exceeded `RLIMIT_MEMLOCK` and we could not raise it.
    Memlock {
        /// Bytes the UMEM and rings need locked.
        needed: u64,
        /// The soft limit in force (bytes; `u64::MAX` = unlimited).
        limit: u64,
    },
    /// Another socket still owns the queue (also happens for a moment right
    /// after the previous socket on it was closed).
    QueueBusy {
        /// Interface name.
        ifname: String,
        /// Queue index.
        queue: u32,
    },
    /// The queue's UMEM group could not be joined (or made): the member's
    /// descriptors were refused (`pidfd_getfd` needs ptrace rights), the
    /// group is full, or the kernel cannot share the rings.
    ShareRefused {
        /// Interface name.
        ifname: String,
        /// Queue index.
        queue: u32,
        /// Why, for the log.
        why: String,
    },
    /// Zero-copy was required but the driver does not support it (veth never does).
    ZeroCopyUnsupported {
        /// Interface name.
        ifname: String,
    },
    /// An invalid configuration value.
    Config(String),
    /// A frame address that is not in the right state for this call.
    Frame(FrameError),
    /// The TX ring has no free slot: call [`crate::Link::flush`] and
    /// [`crate::Link::reap_completions`], then retry.
    TxRingFull,
    /// No free TX frame: reap completions or release frames first.
    NoTxFrame,
    /// The payload does not fit one frame / the interface MTU.
    PayloadTooLarge {
        /// Requested payload bytes.
        len: usize,
        /// Largest payload this link carries.
        max: usize,
    },
    /// Peer and local address are of different IP families.
    FamilyMismatch,
    /// Peer MAC address could not be resolved.
    Neighbour(io::Error),
    /// The kernel has no route to the peer through this link's interface.
    Route(io::Error),
    /// Any other system call failure, with the step that failed.
    Io {
        /// The step that failed.
        op: &'static str,
        /// The OS error.
        source: io::Error,
    },
}

impl LinkError {
    pub(crate) fn io(op: &'static str, source: io::Error) -> Self {
        match source.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => LinkError::Permission { op, source },
            _ => LinkError::Io { op, source },
        }
    }
}

impl fmt::Display for LinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkError::InterfaceNotFound { ifname } => write!(
                f,
                "interface {ifname:?} not found in this network namespace \
                 (check `ip link`; run inside the namespace that owns it)"
            ),
            LinkError::NoAddress { ifname, wanted } => write!(
                f,
                "interface {ifname:?} has no {wanted} address (add one with `ip addr add`)"
            ),
            LinkError::Permission { op, source } => write!(
                f,
                "{op}: {source}: AF_XDP needs CAP_NET_RAW and CAP_NET_ADMIN (and CAP_BPF to \
                 load the XDP program): run as root or grant them with \
                 `setcap cap_net_raw,cap_net_admin,cap_bpf,cap_ipc_lock+ep <binary>`"
            ),
            LinkError::Unsupported { source } => write!(
                f,
                "AF_XDP sockets are not available ({source}): the kernel needs \
                 CONFIG_XDP_SOCKETS=y (Linux 4.18 or newer)"
            ),
            LinkError::Memlock { needed, limit } => {
                let short = needed.saturating_sub(if *limit == u64::MAX { 0 } else { *limit });
                write!(
                    f,
                    "RLIMIT_MEMLOCK is {limit} bytes but the UMEM and rings need {needed} \
                     bytes locked ({short} more) and the limit could not be raised: run \
                     `ulimit -l unlimited` (or {} KiB) before starting, grant CAP_IPC_LOCK, or \
                     configure fewer/smaller frames",
                    needed.div_ceil(1024)
                )
            }
            LinkError::QueueBusy { ifname, queue } => write!(
                f,
                "queue {queue} of {ifname:?} is busy: another AF_XDP socket is bound to it \
                 (or one was closed a moment ago and the kernel is still releasing it; retry)"
            ),
            LinkError::ShareRefused { ifname, queue, why } => write!(
                f,
                "queue {queue} of {ifname:?} is used by another process of ours, and its \
                 AF_XDP socket cannot be shared: {why}"
            ),
            LinkError::ZeroCopyUnsupported { ifname } => write!(
                f,
                "{ifname:?} does not support zero-copy AF_XDP (veth never does): allow copy mode"
            ),
            LinkError::Config(m) => write!(f, "invalid link configuration: {m}"),
            LinkError::Frame(e) => write!(f, "frame misuse: {e:?}"),
            LinkError::TxRingFull => {
                write!(f, "TX ring full: flush and reap completions, then retry")
            }
            LinkError::NoTxFrame => {
                write!(f, "no free TX frame: reap completions or release frames")
            }
            LinkError::PayloadTooLarge { len, max } => {
                write!(
                    f,
                    "payload of {len} bytes exceeds the link maximum of {max}"
                )
            }
            LinkError::FamilyMismatch => {
                write!(f, "peer and local address are of different IP families")
            }
            LinkError::Neighbour(e) => write!(f, "peer MAC resolution failed: {e}"),
            LinkError::Route(e) => write!(f, "no route through this interface: {e}"),
            LinkError::Io { op, source } => write!(f, "{op}: {source}"),
        }
    }
}

impl std::error::Error for LinkError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LinkError::Permission { source, .. }
            | LinkError::Unsupported { source }
            | LinkError::Io { source, .. }
            | LinkError::Neighbour(source)
            | LinkError::Route(source) => Some(source),
            _ => None,
        }
    }
}

impl From<FrameError> for LinkError {
    fn from(e: FrameError) -> Self {
        LinkError::Frame(e)
    }
}
