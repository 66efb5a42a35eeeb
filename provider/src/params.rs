//! Provider parameters (fi_param_define / fi_param_get, fi_prov.h). The core
//! derives the environment variable from the provider name: parameter
//! `iface` of provider `xdp` is `FI_XDP_IFACE`; `fi_info -e` lists them all.

use std::ffi::{CStr, CString};

use libc::{c_char, c_int, c_void, size_t};

use crate::auth_key::{JobKey, KeySetting};
use crate::sys::{FI_PARAM_BOOL, FI_PARAM_INT, FI_PARAM_SIZE_T, FI_PARAM_STRING, ffi, fi_provider};

/// How the steering program is attached (bpf loader, XDP_FLAGS_*_MODE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachMode {
    /// SKB ("generic") mode: works on every driver; measured faster than
    /// native on veth (4.5 against 5.0 µs RTT p50, ofi-xdp-link README),
    /// hence the default.
    Generic,
    /// Driver ("native") mode.
    Native,
}

/// Whether to ask for AF_XDP zero-copy (XDP_ZEROCOPY) when binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZeroCopy {
    /// Try zero-copy, fall back to copy mode (veth never supports it).
    Auto,
    /// Fail if zero-copy is unavailable.
    Required,
    /// Always copy mode.
    Off,
}

/// Whether segments of large transfers take the kernel's UDP offloads
/// (`xdp/port/bulk.rs`, PROTOCOL.md §2.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BulkPath {
    /// Where the endpoint's AF_XDP socket copies every frame (copy mode) or
    /// it has none (kernel UDP path): there the kernel's 64 KiB batches
    /// beat one frame at a time.
    Auto,
    /// Also in zero-copy mode.
    On,
    /// Never: every datagram through the endpoint's own port.
    Off,
}

/// The provider's configuration, read from `FI_XDP_*` each time an object
/// that needs it is created (so tests can vary it per process).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Restrict the provider to this interface (`None`: every usable one).
    pub iface: Option<String>,
    /// NIC queue the AF_XDP socket binds to (`None`: the first free one).
    pub queue: Option<u32>,
    /// Install an ntuple rule steering the endpoint's (IP, port) to its
    /// queue on multi-queue interfaces whose driver takes such rules.
    pub ntuple: bool,
    /// Busy polling on the AF_XDP socket: `SO_BUSY_POLL` µs (0 = off).
    pub busy_poll_usecs: u32,
    /// `SO_BUSY_POLL_BUDGET` when busy polling.
    pub busy_poll_budget: u16,
    /// UDP port of the first endpoint (0: pick a free one per endpoint).
    pub port: u16,
    /// Frames in each endpoint's UMEM.
    pub umem_frames: usize,
    /// UMEM frame (chunk) size, 2048 or 4096.
    pub frame_size: usize,
    /// Descriptors per AF_XDP ring.
    pub ring_size: usize,
    /// Processes (AF_XDP sockets) the UMEM group of one interface queue
    /// holds when this process creates it (`None`: by the host's CPUs and the
    /// interface's receive queues, `xdp/port/open.rs`), 1 to
    /// [`MAX_QUEUE_MEMBERS`].
    pub queue_members: Option<u32>,
    pub attach_mode: AttachMode,
    pub zerocopy: ZeroCopy,
    /// Yield the CPU when a CQ read finds nothing.
    pub yield_when_idle: bool,
    /// How long a blocking read (fi_cq_sread, fi_cntr_wait, fi_wait) keeps
    /// polling before it sleeps, when its thread has its CPU to itself
    /// (µs; 0 = sleep at once).
    pub wait_spin_us: u32,
    /// Testing aid: the XDP program drops one in this many steered frames
    /// (0 = off).
    pub fault_drop_one_in: u32,
    /// Seconds without any acknowledgement before a peer's operations fail
    /// (FI_EHOSTUNREACH). Long: with manual progress a healthy peer may
    /// compute for minutes without calling into libfabric.
    pub peer_timeout_secs: u32,
    /// Longest `fi_close` of an RDM endpoint waits for peers to acknowledge
    /// sends that were already reported complete (inject complete).
    pub linger_ms: u32,
    /// Run endpoints on their kernel UDP socket instead of AF_XDP.
    pub kernel_path: bool,
    /// Engine datagrams to peers on this host through shared memory
    /// instead of the kernel UDP socket.
    pub local_shm: bool,
    /// Rendezvous messages between endpoints on this host copied once,
    /// by the receiver, with `process_vm_readv` (PROTOCOL.md §6.7).
    pub local_cma: bool,
    /// Such a copy of 256 KiB or more is shared with the sender, which
    /// copies chunks from the end with `process_vm_writev` while the
    /// receiver copies from the front (`xdp/port/local/help.rs`).
    pub local_shared_pull: bool,
    /// Small sends between RDM endpoints on this host go as direct
    /// messages, handed to the peer's matcher without the session's
    /// per-datagram work, while nothing of the session could be overtaken
    /// (PROTOCOL.md §6.9).
    pub local_direct: bool,
    /// RDM datagrams up to the interface MTU through AF_XDP multi-buffer
    /// (jumbo frames) when a full frame does not fit one UMEM frame.
    pub multi_buffer: bool,
    /// The job key for packet authentication when the application gives
    /// none (`FI_XDP_AUTH_KEY`, `FI_XDP_AUTH_KEY_FILE`).
    pub auth_key: KeySetting,
    /// Authenticated: encrypt DATA payloads too (confidentiality; it costs
    /// more CPU than authenticating them in the clear, PROTOCOL.md §11.3).
    pub auth_encrypt: bool,
    /// Congestion control (PROTOCOL.md §12).
    pub congestion: bool,
    /// Congestion control's delay signal: its floor in µs (0 = off).
    pub cc_delay_us: u32,
    /// Mark datagrams ECN-capable and react to CE marks (AF_XDP path).
    pub ecn: bool,
    /// Pack several small messages to one peer into one datagram when they
    /// wait together (PROTOCOL.md §6.8).
    pub pack: bool,
    /// An RDM endpoint whose application has not driven progress for this
    /// long while its protocol has work (a retransmission, an ack) gets a
    /// pass from a helper thread (0 = never).
    pub progress_ms: u32,
    /// Segments of large transfers through the kernel's UDP offloads.
    pub bulk_path: BulkPath,
    /// Transfers of at least this many bytes take the bulk path; `None`:
    /// [`default_bulk_min`] of the datagram size.
    pub bulk_min: Option<usize>,
    /// Source ports per session of RDM and MSG endpoints' AF_XDP datagrams
    /// (path entropy, PROTOCOL.md §4.6), 1 to [`MAX_PATHS`]; 1: the
    /// endpoint's own port only.
    pub paths: u16,
}

/// Most source ports a session's datagrams take (`FI_XDP_PATHS`).
pub const MAX_PATHS: u16 = 256;

impl Default for Config {
    fn default() -> Self {
        Config {
            iface: None,
            queue: None,
            ntuple: true,
            busy_poll_usecs: 0,
            busy_poll_budget: 64,
            port: 0,
            umem_frames: 4096,
            frame_size: 4096,
            ring_size: 256,
            queue_members: None,
            attach_mode: AttachMode::Generic,
            zerocopy: ZeroCopy::Auto,
            yield_when_idle: true,
            wait_spin_us: 50,
            fault_drop_one_in: 0,
            peer_timeout_secs: 300,
            linger_ms: 1000,
            kernel_path: false,
            local_shm: true,
            local_cma: true,
            local_shared_pull: true,
            local_direct: true,
            multi_buffer: true,
            auth_key: KeySetting::None,
            auth_encrypt: false,
            congestion: true,
            cc_delay_us: 0,
            ecn: true,
            pack: true,
            progress_ms: 10,
            bulk_path: BulkPath::Auto,
            bulk_min: None,
            paths: 1,
        }
    }
}

struct ParamDef {
    name: &'static CStr,
    ty: c_int,
    help: &'static CStr,
}

/// The largest UMEM group `FI_XDP_QUEUE_MEMBERS` may ask for (the group
/// file's member table).
/// Smallest transfer whose segments take the bulk path by default
/// (`FI_XDP_BULK_MIN` unset) with datagrams of `max_payload` bytes: 16 KiB,
/// or three datagrams where those are larger (jumbo frames). Measured on
/// veth (docs/performance.md, "Large messages: the bulk path"): at MTU
/// 1500 the bulk path matched AF_XDP at 16 KiB with one message in flight
/// and moved 2.8 times as much with a window of 16; at MTU 9000 AF_XDP was
/// faster up to 16 KiB (two datagrams), even at 32 KiB (four) with one in
/// flight, and 1.7 times slower there with a window.
pub fn default_bulk_min(max_payload: usize) -> usize {
    (16 << 10).max(3 * max_payload)
}

pub const MAX_QUEUE_MEMBERS: u32 = ofi_xdp_link::group::MAX_MEMBERS as u32;

const PARAMS: &[ParamDef] = &[
    ParamDef {
        name: c"iface",
        ty: FI_PARAM_STRING,
        help: c"Only use this network interface (default: every interface that is up, not loopback, and has an IP address)",
    },
    ParamDef {
        name: c"queue",
        ty: FI_PARAM_INT,
        help: c"NIC receive/transmit queue the AF_XDP socket binds to (default: the first queue no other endpoint of the process uses)",
    },
    ParamDef {
        name: c"ntuple",
        ty: FI_PARAM_BOOL,
        help: c"On interfaces with several receive queues, install an ntuple rule steering the endpoint's UDP port to its queue where the driver takes such rules (default: 1); datagrams that arrive on other queues reach the endpoint through its kernel UDP socket",
    },
    ParamDef {
        name: c"busy_poll",
        ty: FI_PARAM_INT,
        help: c"Busy polling on the AF_XDP socket (SO_PREFER_BUSY_POLL, SO_BUSY_POLL = this many microseconds; Linux 5.11+): progress runs the driver's poll; pair it with the interface's napi_defer_hard_irqs and gro_flush_timeout (default: 0 = off)",
    },
    ParamDef {
        name: c"busy_poll_budget",
        ty: FI_PARAM_INT,
        help: c"Packets one busy poll may process (SO_BUSY_POLL_BUDGET) (default: 64)",
    },
    ParamDef {
        name: c"port",
        ty: FI_PARAM_INT,
        help: c"UDP port for endpoints that are not given one by node/service/src_addr (default: 0 = pick a free port)",
    },
    ParamDef { name: c"umem_frames", ty: FI_PARAM_SIZE_T, help: c"Frames in each endpoint's UMEM (default: 4096)" },
    ParamDef { name: c"frame_size", ty: FI_PARAM_SIZE_T, help: c"UMEM frame size in bytes, 2048 or 4096 (default: 4096)" },
    ParamDef { name: c"ring_size", ty: FI_PARAM_SIZE_T, help: c"Descriptors per AF_XDP ring, a power of two (default: 256: received frames are reused while still in the CPU cache; larger rings hold longer bursts)" },
    ParamDef {
        name: c"queue_members",
        ty: FI_PARAM_SIZE_T,
        help: c"Processes of one user that share an interface queue's AF_XDP socket group (UMEM), 1 to 64; the first process on the queue chooses, each member costs a 2 MiB TX range of UMEM, and endpoints beyond a full group use the kernel UDP socket (default: the host's CPUs divided by the interface's receive queues, at least 8)",
    },
    ParamDef {
        name: c"attach_mode",
        ty: FI_PARAM_STRING,
        help: c"XDP attach mode: generic (SKB) or native (driver) (default: generic, measured faster on veth)",
    },
    ParamDef {
        name: c"zerocopy",
        ty: FI_PARAM_STRING,
        help: c"AF_XDP zero-copy: auto (try, fall back to copy), on (required), off (default: auto)",
    },
    ParamDef {
        name: c"yield",
        ty: FI_PARAM_BOOL,
        help: c"Call sched_yield() when fi_cq_read keeps finding no completion (or fi_cntr_read no change) (the end of a read's response it serves, as RMA target, counts as a completion): after 512 reads in a row on a CPU of its own, after 4 on one it shares, so a peer process sharing the CPU runs (default: 1; set 0 on dedicated cores)",
    },
    ParamDef {
        name: c"wait_spin_us",
        ty: FI_PARAM_INT,
        help: c"A blocking read (fi_cq_sread, fi_cntr_wait, fi_wait) keeps polling this many microseconds before it sleeps, when its thread has its CPU to itself: a reply that comes sooner is seen without a sleep and wake-up (default: 50; 0: sleep at once)",
    },
    ParamDef {
        name: c"peer_timeout",
        ty: FI_PARAM_INT,
        help: c"Seconds a peer may stay silent (no acknowledgement, e.g. computing without calling libfabric) before operations waiting on it fail; data already reported sent (inject complete) is retried for as long as the endpoint lives (default: 300)",
    },
    ParamDef {
        name: c"linger_ms",
        ty: FI_PARAM_INT,
        help: c"Longest fi_close of an RDM endpoint waits for peers to acknowledge sends already reported complete (default: 1000)",
    },
    ParamDef {
        name: c"kernel_path",
        ty: FI_PARAM_BOOL,
        help: c"Run endpoints on a kernel UDP socket instead of AF_XDP: slower, same protocol (default: 0; an endpoint falls back to it by itself when its AF_XDP queue is taken)",
    },
    ParamDef {
        name: c"local_shm",
        ty: FI_PARAM_BOOL,
        help: c"RDM and MSG endpoints exchange datagrams with endpoints of the same user on the same host through shared memory instead of the kernel UDP socket (default: 1)",
    },
    ParamDef {
        name: c"local_cma",
        ty: FI_PARAM_BOOL,
        help: c"Messages above the eager limit between RDM endpoints on the same host (shared-memory path) are copied once, by the receiver, from the sender's memory with process_vm_readv (cross-memory attach); a pull that fails falls back to the shared-memory rings (default: 1)",
    },
    ParamDef {
        name: c"local_shared_pull",
        ty: FI_PARAM_BOOL,
        help: c"A same-host receiver pulling a message of 256 KiB or more asks its sender to copy part of it: the sender, usually spinning on that send's completion, writes chunks from the end into the receive buffer with process_vm_writev while the receiver reads from the front, so two cores copy it (default: 1)",
    },
    ParamDef {
        name: c"local_direct",
        ty: FI_PARAM_BOOL,
        help: c"Small sends (up to the inject size, completing at FI_INJECT_COMPLETE) between RDM endpoints on the same host go as direct messages: one record in the peer's shared-memory ring, handed to its matcher without sequence numbers, acknowledgements or retransmission, whenever nothing the sender sent to that peer through the protocol is still unacknowledged (so ordering holds); with packet authentication only between endpoints whose handshake verified the job key (default: 1)",
    },
    ParamDef {
        name: c"multi_buffer",
        ty: FI_PARAM_BOOL,
        help: c"Jumbo frames: RDM datagrams up to the interface MTU, spread over several UMEM frames (AF_XDP multi-buffer, Linux 6.6+; older kernels fall back to one frame per datagram) (default: 1)",
    },
    ParamDef {
        name: c"auth_key",
        ty: FI_PARAM_STRING,
        help: c"Job key for packet authentication, in hex (at least 16 bytes), when the application passes no auth_key; every endpoint of the job needs the same (default: none, unauthenticated)",
    },
    ParamDef {
        name: c"auth_key_file",
        ty: FI_PARAM_STRING,
        help: c"File whose bytes (at least 16) are the job key, instead of FI_XDP_AUTH_KEY (default: none)",
    },
    ParamDef {
        name: c"auth_encrypt",
        ty: FI_PARAM_BOOL,
        help: c"With a job key, also encrypt message payloads (confidentiality on the wire; costs more CPU than authenticating them in the clear) (default: 0)",
    },
    ParamDef {
        name: c"cc",
        ty: FI_PARAM_BOOL,
        help: c"Congestion control: a receiver shares its ring among the peers sending to it, a sender's window backs off on loss and ECN marks (default: 1)",
    },
    ParamDef {
        name: c"cc_delay_us",
        ty: FI_PARAM_INT,
        help: c"Congestion control's delay signal: shrink the window when the RTT exceeds the smallest seen by more than max(that RTT, this many us) (default: 0 = off: on shared hosts RTT mostly measures scheduling)",
    },
    ParamDef {
        name: c"ecn",
        ty: FI_PARAM_BOOL,
        help: c"Send datagrams ECN-capable (ECT(0)) and slow down on congestion-experienced marks (default: 1)",
    },
    ParamDef {
        name: c"pack",
        ty: FI_PARAM_BOOL,
        help: c"Send several small messages to one peer in one datagram when the application posted them together, if the peer accepts that (default: 1)",
    },
    ParamDef {
        name: c"progress_ms",
        ty: FI_PARAM_INT,
        help: c"When the application has not called into the provider for this long while a retransmission or acknowledgement is due, a helper thread makes the progress (default: 10; 0 = only the application's calls progress)",
    },
    ParamDef {
        name: c"bulk_path",
        ty: FI_PARAM_STRING,
        help: c"Segments of large messages, RMA writes and reads (FI_XDP_BULK_MIN bytes and more) to other hosts go through the kernel's UDP segmentation and receive offloads (64 KiB per system call) instead of one AF_XDP frame each: auto (where AF_XDP runs in copy mode or not at all), on, off (default: auto)",
    },
    ParamDef {
        name: c"bulk_min",
        ty: FI_PARAM_SIZE_T,
        help: c"Smallest transfer, in bytes, whose segments take the bulk path (default: 16384, or three datagrams where those are larger: 26,916 at MTU 9000)",
    },
    ParamDef {
        name: c"paths",
        ty: FI_PARAM_INT,
        help: c"Path entropy: the UDP source ports each session's datagrams through AF_XDP take in turn, passing over those that lost a datagram lately, so that routers spreading flows over equal-cost paths (ECMP) use up to this many paths; 1 to 256. More than 1 reorders datagrams; loss is found by time, not by reordering (default: 1, the endpoint's own port)",
    },
    ParamDef {
        name: c"fault_drop",
        ty: FI_PARAM_INT,
        help: c"Testing aid: drop one in N received frames of ours in the XDP program (default: 0 = off)",
    },
];

/// Register every parameter with the core (called from `fi_prov_ini`, after
/// [`crate::log::mark_registered`]).
pub fn define_all() {
    let Some(provider) = crate::log::provider() else {
        return;
    };
    for p in PARAMS {
        // SAFETY: valid provider and NUL-terminated strings; "%s" consumes
        // the one char* argument (help strings are not format strings).
        let rc = unsafe {
            ffi::fi_param_define(
                provider,
                p.name.as_ptr(),
                p.ty,
                c"%s".as_ptr(),
                p.help.as_ptr(),
            )
        };
        if rc != 0 {
            crate::xdp_warn!(
                crate::sys::FI_LOG_CORE,
                "fi_param_define({:?}) failed: {rc}",
                p.name
            );
        }
    }
}

fn env_name(name: &CStr) -> String {
    format!("FI_XDP_{}", name.to_string_lossy().to_uppercase())
}

fn get_str(name: &CStr) -> Option<String> {
    if let Some(provider) = crate::log::provider() {
        let mut v: *mut c_char = std::ptr::null_mut();
        // SAFETY: `v` receives a pointer into the environment (or stays NULL).
        let rc = unsafe {
            ffi::fi_param_get(
                provider,
                name.as_ptr(),
                (&mut v as *mut *mut c_char).cast::<c_void>(),
            )
        };
        if rc != 0 || v.is_null() {
            return None;
        }
        // SAFETY: fi_param_get returned a NUL-terminated string.
        Some(unsafe { CStr::from_ptr(v) }.to_string_lossy().into_owned())
    } else {
        std::env::var(env_name(name)).ok()
    }
}

/// `fi_param_get` of a parameter whose C type is `T` (`FI_PARAM_INT` → `c_int`,
/// `FI_PARAM_SIZE_T` → `size_t`); `None` when unset.
fn param_get<T: Copy + Default>(provider: *mut fi_provider, name: &CStr) -> Option<T> {
    let mut v = T::default();
    // SAFETY: the parameter was defined with the C type `T`, so the core writes exactly a `T`.
    let rc =
        unsafe { ffi::fi_param_get(provider, name.as_ptr(), (&mut v as *mut T).cast::<c_void>()) };
    (rc == 0).then_some(v)
}

fn get_int(name: &CStr) -> Option<i64> {
    if let Some(provider) = crate::log::provider() {
        param_get::<c_int>(provider, name).map(i64::from)
    } else {
        std::env::var(env_name(name)).ok()?.trim().parse().ok()
    }
}

fn get_size(name: &CStr) -> Option<usize> {
    if let Some(provider) = crate::log::provider() {
        param_get::<size_t>(provider, name)
    } else {
        std::env::var(env_name(name)).ok()?.trim().parse().ok()
    }
}

impl Config {
    /// Read the current `FI_XDP_*` settings; bad values are logged and the
    /// default kept (a typo must not make the provider vanish silently).
    pub fn load() -> Config {
        let mut c = Config::default();
        let warn = |what: &str, v: &dyn std::fmt::Display| {
            crate::xdp_warn!(
                crate::sys::FI_LOG_CORE,
                "ignoring invalid FI_XDP_{what}={v}"
            );
        };
        c.iface = get_str(c"iface").filter(|s| !s.is_empty());
        if let Some(q) = get_int(c"queue") {
            match u32::try_from(q) {
                Ok(q) => c.queue = Some(q),
                Err(_) => warn("QUEUE", &q),
            }
        }
        if let Some(v) = get_bool(c"ntuple") {
            c.ntuple = v;
        }
        if let Some(n) = get_int(c"busy_poll") {
            match u32::try_from(n) {
                Ok(n) => c.busy_poll_usecs = n,
                Err(_) => warn("BUSY_POLL", &n),
            }
        }
        if let Some(n) = get_int(c"busy_poll_budget") {
            match u16::try_from(n) {
                Ok(n) if n > 0 => c.busy_poll_budget = n,
                _ => warn("BUSY_POLL_BUDGET", &n),
            }
        }
        if let Some(p) = get_int(c"port") {
            match u16::try_from(p) {
                Ok(p) => c.port = p,
                Err(_) => warn("PORT", &p),
            }
        }
        if let Some(n) = get_size(c"umem_frames") {
            if n >= 64 {
                c.umem_frames = n
            } else {
                warn("UMEM_FRAMES", &n)
            }
        }
        if let Some(n) = get_size(c"frame_size") {
            if n == 2048 || n == 4096 {
                c.frame_size = n
            } else {
                warn("FRAME_SIZE", &n)
            }
        }
        if let Some(n) = get_size(c"ring_size") {
            if n.is_power_of_two() && n >= 64 {
                c.ring_size = n
            } else {
                warn("RING_SIZE", &n)
            }
        }
        if let Some(n) = get_size(c"queue_members") {
            match u32::try_from(n) {
                Ok(n) if (1..=MAX_QUEUE_MEMBERS).contains(&n) => c.queue_members = Some(n),
                _ => warn("QUEUE_MEMBERS", &n),
            }
        }
        if let Some(s) = get_str(c"attach_mode") {
            match s.to_ascii_lowercase().as_str() {
                "generic" | "skb" => c.attach_mode = AttachMode::Generic,
                "native" | "drv" | "driver" => c.attach_mode = AttachMode::Native,
                _ => warn("ATTACH_MODE", &s),
            }
        }
        if let Some(s) = get_str(c"zerocopy") {
            match s.to_ascii_lowercase().as_str() {
                "auto" => c.zerocopy = ZeroCopy::Auto,
                "on" | "1" | "yes" | "required" => c.zerocopy = ZeroCopy::Required,
                "off" | "0" | "no" => c.zerocopy = ZeroCopy::Off,
                _ => warn("ZEROCOPY", &s),
            }
        }
        if let Some(n) = get_int(c"fault_drop") {
            match u32::try_from(n) {
                Ok(n) => c.fault_drop_one_in = n,
                Err(_) => warn("FAULT_DROP", &n),
            }
        }
        if let Some(n) = get_int(c"peer_timeout") {
            match u32::try_from(n) {
                Ok(n) if n > 0 => c.peer_timeout_secs = n,
                _ => warn("PEER_TIMEOUT", &n),
            }
        }
        if let Some(n) = get_int(c"linger_ms") {
            match u32::try_from(n) {
                Ok(n) => c.linger_ms = n,
                Err(_) => warn("LINGER_MS", &n),
            }
        }
        if let Some(v) = get_bool(c"kernel_path") {
            c.kernel_path = v;
        }
        if let Some(v) = get_bool(c"local_shm") {
            c.local_shm = v;
        }
        if let Some(v) = get_bool(c"local_cma") {
            c.local_cma = v;
        }
        if let Some(v) = get_bool(c"local_shared_pull") {
            c.local_shared_pull = v;
        }
        if let Some(v) = get_bool(c"local_direct") {
            c.local_direct = v;
        }
        if let Some(v) = get_bool(c"yield") {
            c.yield_when_idle = v;
        }
        if let Some(n) = get_int(c"wait_spin_us") {
            match u32::try_from(n) {
                Ok(n) => c.wait_spin_us = n,
                Err(_) => warn("WAIT_SPIN_US", &n),
            }
        }
        if let Some(v) = get_bool(c"multi_buffer") {
            c.multi_buffer = v;
        }
        c.auth_key = match (
            get_str(c"auth_key").filter(|s| !s.is_empty()),
            get_str(c"auth_key_file").filter(|s| !s.is_empty()),
        ) {
            (Some(hex), _) => key_setting("AUTH_KEY", JobKey::from_hex(&hex)),
            (None, Some(path)) => key_setting("AUTH_KEY_FILE", JobKey::from_file(&path)),
            (None, None) => KeySetting::None,
        };
        if let Some(v) = get_bool(c"auth_encrypt") {
            c.auth_encrypt = v;
        }
        if let Some(v) = get_bool(c"cc") {
            c.congestion = v;
        }
        if let Some(n) = get_int(c"cc_delay_us") {
            match u32::try_from(n) {
                Ok(n) => c.cc_delay_us = n,
                Err(_) => warn("CC_DELAY_US", &n),
            }
        }
        if let Some(v) = get_bool(c"ecn") {
            c.ecn = v;
        }
        if let Some(v) = get_bool(c"pack") {
            c.pack = v;
        }
        if let Some(s) = get_str(c"bulk_path") {
            match s.to_ascii_lowercase().as_str() {
                "auto" => c.bulk_path = BulkPath::Auto,
                "on" | "1" | "yes" => c.bulk_path = BulkPath::On,
                "off" | "0" | "no" => c.bulk_path = BulkPath::Off,
                _ => warn("BULK_PATH", &s),
            }
        }
        if let Some(n) = get_size(c"bulk_min") {
            c.bulk_min = Some(n);
        }
        if let Some(n) = get_int(c"paths") {
            match u16::try_from(n) {
                Ok(n @ 1..=MAX_PATHS) => c.paths = n,
                _ => warn("PATHS", &n),
            }
        }
        if let Some(n) = get_int(c"progress_ms") {
            match u32::try_from(n) {
                Ok(n) => c.progress_ms = n,
                Err(_) => warn("PROGRESS_MS", &n),
            }
        }
        c
    }
}

fn get_bool(name: &CStr) -> Option<bool> {
    if let Some(provider) = crate::log::provider() {
        let mut v: c_int = 0;
        // SAFETY: BOOL parameters are written as a C int.
        let rc = unsafe {
            ffi::fi_param_get(
                provider,
                name.as_ptr(),
                (&mut v as *mut c_int).cast::<c_void>(),
            )
        };
        (rc == 0).then_some(v != 0)
    } else {
        match std::env::var(env_name(name))
            .ok()?
            .trim()
            .to_ascii_lowercase()
            .as_str()
        {
            "1" | "on" | "yes" | "true" => Some(true),
            "0" | "off" | "no" | "false" => Some(false),
            _ => None,
        }
    }
}

/// Owned C string helper for the tests of this module and others.
pub fn cstring(s: &str) -> CString {
    CString::new(s.replace('\0', "")).unwrap_or_default()
}

/// A key parameter's outcome; a bad key is logged (without the key).
fn key_setting(what: &str, k: Result<JobKey, String>) -> KeySetting {
    match k {
        Ok(k) => KeySetting::Key(k),
        Err(e) => {
            crate::xdp_warn!(crate::sys::FI_LOG_CORE, "FI_XDP_{what}: {e}");
            KeySetting::Bad(e)
        }
    }
}
