//! XDP steering program and its loader.
//!
//! `src/steer.bpf.c` (compiled by `build.rs` with clang, embedded below) parses
//! Ethernet (+ one VLAN tag), IPv4/IPv6 and UDP, and redirects frames whose UDP
//! destination port is in a port→slot map into `XSKMAP[slot]` when they
//! arrived on the queue that slot's socket is bound to (the kernel drops a
//! redirect into a socket of another queue). Everything else — frames of our
//! ports on other queues included, counted as `other_queue` — goes to the
//! kernel with `XDP_PASS`. See `README.md` for what is counted as
//! malformed.
//!
//! [`Steering`] loads the program with aya, attaches it through a `bpf_link`
//! (created here with `BPF_LINK_CREATE`, never the netlink fallback, so the
//! program detaches when the link fd is closed — on [`Drop`] or when the
//! process exits) and gives access to the maps. [`inspect`] finds the
//! program and reads its maps from another process (`ofi-xdp status`), and
//! removes what a killed process left (`ofi-xdp cleanup`).

mod adopt;
mod error;
pub mod inspect;
mod netlink;
mod sys;

pub use error::BpfError;
use error::{attach_error, errno_in, load_error, map_error};

use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::str::FromStr;

use aya::maps::{Array, HashMap, MapData, PerCpuArray, PerCpuValues, XskMap};
use aya::programs::Xdp;
use aya::{Ebpf, EbpfLoader};

/// The clang-built ELF object (see `build.rs`).
static STEER_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/steer.bpf.o"));

/// Name of the XDP program (the C function) inside the object; the kernel
/// reports it as the program's name, which is how other processes find it.
pub const PROGRAM_NAME: &str = "ofi_xdp_steer";

/// The steering program's ELF object, as clang built it: for loaders other
/// than this crate (`ip link set dev IF xdp obj FILE sec xdp`).
pub fn object() -> &'static [u8] {
    STEER_OBJECT
}

/// Per-CPU counter indices; must match `enum counter` in the C source.
const COUNTER_STEERED: u32 = 0;
const COUNTER_PASSED: u32 = 1;
const COUNTER_MALFORMED: u32 = 2;
const COUNTER_NO_SOCKET: u32 = 3;
const COUNTER_FAULT_DROPPED: u32 = 4;
const COUNTER_OTHER_QUEUE: u32 = 5;
/// Number of counters (`CNT_MAX` in the C source).
const COUNTER_COUNT: u32 = 6;

/// Index of the fault-injection divisor in the `config` array map.
const CONFIG_DROP_ONE_IN: u32 = 0;

/// Maximum number of UDP ports in the port map (`MAX_PORTS` in the C source).
pub const MAX_PORTS: u32 = 256;

/// Receive queues counted one by one in [`Steering::queue_counts`]
/// (`MAX_QUEUES` in the C source); frames of higher queues count in the last.
pub const MAX_QUEUES: u32 = 64;

// Constants from <linux/bpf.h> / <linux/if_link.h> for the raw syscalls below
// (aya 0.14 has no public API for them).
const BPF_PROG_TEST_RUN: libc::c_long = 10;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_XDP: u32 = 37;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// How the XDP program is attached to the interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttachMode {
    /// Driver (native) mode: runs in the driver's receive path before an skb
    /// exists. On veth it requires the peer's MTU to fit one page (~3.5 KB).
    Native,
    /// Generic (SKB) mode: runs in the core stack after the skb is built. Works
    /// on every interface.
    Generic,
}

impl AttachMode {
    fn flags(self) -> u32 {
        match self {
            AttachMode::Native => XDP_FLAGS_DRV_MODE,
            AttachMode::Generic => XDP_FLAGS_SKB_MODE,
        }
    }
}

impl FromStr for AttachMode {
    type Err = BpfError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "native" | "driver" | "drv" => Ok(AttachMode::Native),
            "generic" | "skb" => Ok(AttachMode::Generic),
            _ => Err(BpfError::InvalidMode(s.to_string())),
        }
    }
}

impl fmt::Display for AttachMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AttachMode::Native => "native",
            AttachMode::Generic => "generic",
        })
    }
}

/// Counters of the steering program, summed over all CPUs. Every frame the
/// program sees bumps exactly one of them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counters {
    /// Redirected into an AF_XDP socket.
    pub steered: u64,
    /// Handed to the kernel untouched (not ours, or well-formed but not UDP to
    /// a steered port).
    pub passed: u64,
    /// Truncated or inconsistent headers; handed to the kernel, never steered.
    pub malformed: u64,
    /// Port matched but `XSKMAP[slot]` had no socket; handed to the kernel.
    pub no_socket: u64,
    /// Port matched and dropped by fault injection.
    pub fault_dropped: u64,
    /// Port matched, but the frame arrived on another queue than the one
    /// the slot's socket is bound to; handed to the kernel, where the
    /// endpoint's UDP socket on the same port receives it.
    pub other_queue: u64,
}

impl Counters {
    /// Sum of all counters: the number of frames the program has seen.
    pub fn total(&self) -> u64 {
        self.steered
            + self.passed
            + self.malformed
            + self.no_socket
            + self.fault_dropped
            + self.other_queue
    }

    /// Per-field difference `self - earlier` (saturating), for tests and
    /// statistics that look at what happened between two reads.
    pub fn since(&self, earlier: &Counters) -> Counters {
        Counters {
            steered: self.steered.saturating_sub(earlier.steered),
            passed: self.passed.saturating_sub(earlier.passed),
            malformed: self.malformed.saturating_sub(earlier.malformed),
            no_socket: self.no_socket.saturating_sub(earlier.no_socket),
            fault_dropped: self.fault_dropped.saturating_sub(earlier.fault_dropped),
            other_queue: self.other_queue.saturating_sub(earlier.other_queue),
        }
    }
}

impl fmt::Display for Counters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "steered={} other_queue={} passed={} malformed={} no_socket={} fault_dropped={}",
            self.steered,
            self.other_queue,
            self.passed,
            self.malformed,
            self.no_socket,
            self.fault_dropped
        )
    }
}

/// XDP verdicts (`enum xdp_action` in <linux/bpf.h>), as returned by
/// [`Steering::test_run`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpAction {
    Aborted,
    Drop,
    Pass,
    Tx,
    Redirect,
    /// A value this crate does not know.
    Other(u32),
}

impl From<u32> for XdpAction {
    fn from(v: u32) -> Self {
        match v {
            0 => XdpAction::Aborted,
            1 => XdpAction::Drop,
            2 => XdpAction::Pass,
            3 => XdpAction::Tx,
            4 => XdpAction::Redirect,
            other => XdpAction::Other(other),
        }
    }
}

/// True when the effective capability set has CAP_BPF (39) or CAP_SYS_ADMIN
/// (21); read from /proc so no capability crate is needed.
pub(crate) fn has_bpf_capability() -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return true; // cannot tell: do not claim a missing capability
    };
    let Some(hex) = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .map(str::trim)
    else {
        return true;
    };
    let Ok(caps) = u64::from_str_radix(hex, 16) else {
        return true;
    };
    caps & ((1 << 39) | (1 << 21)) != 0
}

/// Raises RLIMIT_MEMLOCK to infinity when allowed. Kernels ≥ 5.11 charge BPF
/// maps to the memory cgroup instead, so failure here is not an error: a real
/// shortage shows up at map creation and is reported there.
fn raise_memlock_limit() {
    let unlimited = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit reads a valid, initialised rlimit struct.
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &unlimited) };
    if rc != 0 {
        // Not privileged to raise the hard limit: raise the soft one to it.
        let mut cur = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into a valid rlimit struct.
        if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut cur) } == 0 {
            cur.rlim_cur = cur.rlim_max;
            // SAFETY: as above.
            unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &cur) };
        }
    }
}

fn ifindex_of(ifname: &str) -> Result<u32, BpfError> {
    let name = std::ffi::CString::new(ifname)
        .map_err(|_| BpfError::InterfaceNotFound(ifname.to_string()))?;
    // SAFETY: `name` is a valid NUL-terminated string.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if index == 0 {
        return Err(BpfError::InterfaceNotFound(ifname.to_string()));
    }
    Ok(index)
}

/// `bpf(BPF_LINK_CREATE)` for an XDP program on `ifindex`. Closing the returned
/// fd detaches the program (the link is not pinned).
fn xdp_link_create(prog_fd: RawFd, ifindex: u32, flags: u32) -> io::Result<OwnedFd> {
    // union bpf_attr, `link_create` member: prog_fd, target_ifindex,
    // attach_type, flags, then zeroed unions. The kernel requires every byte
    // past the fields it knows to be zero.
    let mut attr = [0u32; 16];
    attr[0] = prog_fd as u32;
    attr[1] = ifindex;
    attr[2] = BPF_XDP;
    attr[3] = flags;
    // SAFETY: attr is a valid buffer of the size passed; the kernel only reads it.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_LINK_CREATE,
            attr.as_ptr(),
            std::mem::size_of_val(&attr),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: on success the syscall returns a new fd we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(rc as RawFd) })
}

/// The loaded steering program attached to one interface.
///
/// Dropping it closes the `bpf_link`, which detaches the program; the kernel
/// does the same if the process dies, so no program outlives its owner.
pub struct Steering {
    // Field order matters for Drop: the link goes first (detach), then the maps
    // and program (unload).
    link: OwnedFd,
    xsks: XskMap<MapData>,
    xsk_queues: Array<MapData, u32>,
    rx_queues: PerCpuArray<MapData, u64>,
    ports: HashMap<MapData, u32, u32>,
    counters: PerCpuArray<MapData, u64>,
    config: Array<MapData, u32>,
    rng: PerCpuArray<MapData, u64>,
    /// The loaded object; `None` when the program was attached by another
    /// process and adopted ([`Steering::adopt`]).
    ebpf: Option<Ebpf>,
    ifname: String,
    ifindex: u32,
    mode: AttachMode,
}

impl fmt::Debug for Steering {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Steering")
            .field("ifname", &self.ifname)
            .field("ifindex", &self.ifindex)
            .field("mode", &self.mode)
            .field("link_fd", &self.link.as_raw_fd())
            .finish()
    }
}

impl Steering {
    /// Size of the XSKMAP: valid slots are `0..MAX_SLOTS`.
    pub const MAX_SLOTS: u32 = 4096;

    /// Loads the steering program and attaches it to `ifname` in `mode`.
    ///
    /// The port map starts empty (everything is passed) and fault injection
    /// is off.
    pub fn attach(ifname: &str, mode: AttachMode) -> Result<Steering, BpfError> {
        let ifindex = ifindex_of(ifname)?;
        raise_memlock_limit();

        let mut ebpf = EbpfLoader::new()
            .load(STEER_OBJECT)
            .map_err(|e| load_error("loading the BPF object (creating its maps)", &e))?;
        let program: &mut Xdp = ebpf
            .program_mut(PROGRAM_NAME)
            .ok_or_else(|| BpfError::Load(format!("program {PROGRAM_NAME} missing in object")))?
            .try_into()
            .map_err(|e| load_error("looking up the XDP program", &e))?;
        program
            .load()
            .map_err(|e| load_error("loading the XDP program (verifier)", &e))?;
        let prog_fd = program
            .fd()
            .map_err(|e| load_error("getting the program fd", &e))?
            .as_fd()
            .as_raw_fd();

        let xsks: XskMap<MapData> = take_map(&mut ebpf, "xsks")?;
        let xsk_queues = take_map(&mut ebpf, "xsk_queues")?;
        let rx_queues = take_map(&mut ebpf, "rx_queues")?;
        let ports = take_map(&mut ebpf, "ports")?;
        let counters: PerCpuArray<MapData, u64> = take_map(&mut ebpf, "counters")?;
        let config = take_map(&mut ebpf, "config")?;
        let rng = take_map(&mut ebpf, "rng")?;
        // The C and Rust sides share sizes by convention: check them here so
        // a mismatch is a clear load error, not out-of-range slots later.
        if xsks.len() != Steering::MAX_SLOTS || counters.len() != COUNTER_COUNT {
            return Err(BpfError::Load(format!(
                "BPF object and loader disagree: xsks has {} slots (loader: {}), \
                 counters has {} entries (loader: {COUNTER_COUNT})",
                xsks.len(),
                Steering::MAX_SLOTS,
                counters.len()
            )));
        }
        // Attach last: nothing after this can fail, so an error never leaves
        // a half-configured program on the interface.
        let link = xdp_link_create(prog_fd, ifindex, mode.flags())
            .map_err(|e| attach_error(ifname, mode, e))?;
        Ok(Steering {
            link,
            xsks,
            xsk_queues,
            rx_queues,
            ports,
            counters,
            config,
            rng,
            ebpf: Some(ebpf),
            ifname: ifname.to_string(),
            ifindex,
            mode,
        })
    }

    /// Attaches in `preferred` mode, or in the other mode when the interface
    /// cannot take `preferred` (driver without XDP support, MTU too large for
    /// native). Fails with [`BpfError::NoModeWorks`] carrying both errors when
    /// neither mode works; other errors (permissions, missing interface, a
    /// program already attached) are returned as they are. Check
    /// [`Steering::mode`] for the mode obtained.
    pub fn attach_any(ifname: &str, preferred: AttachMode) -> Result<Steering, BpfError> {
        let first = match Steering::attach(ifname, preferred) {
            Ok(steering) => return Ok(steering),
            Err(e) if e.is_mode_problem() => e,
            Err(e) => return Err(e),
        };
        let other = match preferred {
            AttachMode::Native => AttachMode::Generic,
            AttachMode::Generic => AttachMode::Native,
        };
        match Steering::attach(ifname, other) {
            Ok(steering) => Ok(steering),
            Err(second) => {
                let (native, generic) = match preferred {
                    AttachMode::Native => (first, second),
                    AttachMode::Generic => (second, first),
                };
                Err(BpfError::NoModeWorks {
                    ifname: ifname.to_string(),
                    native: Box::new(native),
                    generic: Box::new(generic),
                })
            }
        }
    }

    /// The mode the program was attached in.
    pub fn mode(&self) -> AttachMode {
        self.mode
    }

    /// Interface index the program is attached to.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Interface name the program was attached to.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// Steers UDP datagrams to `udp_port` (host byte order) into `XSKMAP[slot]`.
    /// Replaces an earlier mapping of the same port.
    pub fn steer_port(&mut self, udp_port: u16, slot: u32) -> Result<(), BpfError> {
        check_slot(slot)?;
        self.ports
            .insert(u32::from(udp_port), slot, 0)
            .map_err(|e| map_error("adding the port to the port map", e))
    }

    /// Stops steering `udp_port`; its datagrams go to the kernel again.
    /// Removing a port that is not steered is not an error.
    pub fn unsteer_port(&mut self, udp_port: u16) -> Result<(), BpfError> {
        match self.ports.remove(&u32::from(udp_port)) {
            Ok(()) => Ok(()),
            Err(e) if errno_in(&e) == Some(libc::ENOENT) => Ok(()),
            Err(e) => Err(map_error("removing the port from the port map", e)),
        }
    }

    /// Stops steering every port mapped to `slot` (a slot taken over from
    /// a member that is gone); the ports it unsteered.
    pub fn unsteer_slot(&mut self, slot: u32) -> Result<Vec<u16>, BpfError> {
        let mut ports = Vec::new();
        for entry in self.ports.iter() {
            let (port, s) = entry.map_err(|e| map_error("reading the port map", e))?;
            if s == slot {
                ports.push(u16::try_from(port).unwrap_or(u16::MAX));
            }
        }
        for p in &ports {
            self.unsteer_port(*p)?;
        }
        Ok(ports)
    }

    /// Puts the AF_XDP socket `xsk_fd`, bound to this interface's `queue`,
    /// into `XSKMAP[slot]`. Frames of the slot's ports are redirected into it
    /// only when they arrive on `queue`; on other queues they go to the
    /// kernel (counted as [`Counters::other_queue`]).
    pub fn set_socket(&mut self, slot: u32, xsk_fd: RawFd, queue: u32) -> Result<(), BpfError> {
        check_slot(slot)?;
        // The queue first: the program never sees the socket with a stale one.
        self.xsk_queues
            .set(slot, queue, 0)
            .map_err(|e| map_error("recording the socket's queue", e))?;
        self.xsks
            .set(slot, xsk_fd, 0)
            .map_err(|e| map_error("putting the AF_XDP socket into the XSKMAP", e))
    }

    /// Empties `XSKMAP[slot]`. Clearing an empty slot is not an error.
    pub fn clear_socket(&mut self, slot: u32) -> Result<(), BpfError> {
        check_slot(slot)?;
        match self.xsks.unset(slot) {
            Ok(()) => Ok(()),
            Err(e) if errno_in(&e) == Some(libc::ENOENT) => Ok(()),
            Err(e) => Err(map_error("clearing the XSKMAP slot", e)),
        }
    }

    /// Reads the counters, summed over all CPUs. Safe while traffic flows
    /// (each per-CPU value is read atomically as a u64).
    pub fn counters(&self) -> Result<Counters, BpfError> {
        read_counters(&self.counters)
    }

    /// Frames of steered ports by the receive queue they arrived on
    /// (index = queue; the last entry also counts every higher queue),
    /// summed over all CPUs, without the trailing queues that saw none.
    pub fn queue_counts(&self) -> Result<Vec<u64>, BpfError> {
        read_queue_counts(&self.rx_queues)
    }

    /// Fault injection: drop one port-matched frame in `drop_one_in` (0 = off),
    /// chosen by a per-CPU xorshift64 generator seeded from `seed`, so a run
    /// with the same seed and CPU placement drops the same frames.
    ///
    /// Drops happen before the socket lookup (they model loss on the wire) and
    /// are counted as `fault_dropped`.
    pub fn set_fault_injection(&mut self, drop_one_in: u32, seed: u64) -> Result<(), BpfError> {
        let ncpus =
            aya::util::nr_cpus().map_err(|(what, source)| BpfError::Syscall { what, source })?;
        // One independent, non-zero state per CPU (splitmix64 of seed + cpu).
        let states: Vec<u64> = (0..ncpus as u64)
            .map(|cpu| splitmix64(seed.wrapping_add(cpu)).max(1))
            .collect();
        let values = PerCpuValues::try_from(states).map_err(|e| BpfError::Syscall {
            what: "building per-CPU seeds",
            source: e,
        })?;
        self.rng
            .set(0, values, 0)
            .map_err(|e| map_error("seeding the fault-injection generator", e))?;
        self.config
            .set(CONFIG_DROP_ONE_IN, drop_one_in, 0)
            .map_err(|e| map_error("setting the fault-injection rate", e))
    }

    /// The current fault-injection rate (0 = off).
    pub fn fault_injection(&self) -> Result<u32, BpfError> {
        self.config
            .get(&CONFIG_DROP_ONE_IN, 0)
            .map_err(|e| map_error("reading the fault-injection rate", e))
    }

    /// Runs the loaded program once on `frame` with `BPF_PROG_TEST_RUN` (no
    /// packet is sent anywhere) and returns its verdict. Counters change as
    /// for a real frame. For tests of the parser.
    pub fn test_run(&self, frame: &[u8]) -> Result<XdpAction, BpfError> {
        self.test_run_repeat(frame, 1).map(|(action, _)| action)
    }

    /// Runs the program `repeat` times on `frame` in the kernel and returns
    /// the verdict and the kernel's mean time per run — the program's own
    /// cost per frame, without any driver or socket work.
    pub fn test_run_repeat(
        &self,
        frame: &[u8],
        repeat: u32,
    ) -> Result<(XdpAction, std::time::Duration), BpfError> {
        if !(14..=3500).contains(&frame.len()) {
            return Err(BpfError::BadTestFrame(frame.len()));
        }
        let program: &Xdp = self
            .ebpf
            .as_ref()
            .ok_or_else(|| BpfError::Load("an adopted program is not ours to test-run".into()))?
            .program(PROGRAM_NAME)
            .ok_or_else(|| BpfError::Load(format!("program {PROGRAM_NAME} missing")))?
            .try_into()
            .map_err(|e| load_error("looking up the XDP program", &e))?;
        let prog_fd = program
            .fd()
            .map_err(|e| load_error("getting the program fd", &e))?
            .as_fd()
            .as_raw_fd();
        let mut out = vec![0u8; frame.len() + 256];
        // union bpf_attr, `test` member (offsets from <linux/bpf.h>):
        // 0 prog_fd, 4 retval, 8 data_size_in, 12 data_size_out,
        // 16 data_in, 24 data_out, 32 repeat, 36 duration (ns per run).
        let mut attr = [0u8; 80];
        attr[0..4].copy_from_slice(&(prog_fd as u32).to_ne_bytes());
        attr[8..12].copy_from_slice(&(frame.len() as u32).to_ne_bytes());
        attr[12..16].copy_from_slice(&(out.len() as u32).to_ne_bytes());
        attr[16..24].copy_from_slice(&(frame.as_ptr() as u64).to_ne_bytes());
        attr[24..32].copy_from_slice(&(out.as_mut_ptr() as u64).to_ne_bytes());
        attr[32..36].copy_from_slice(&repeat.max(1).to_ne_bytes());
        // SAFETY: attr describes valid input/output buffers that outlive the call.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_PROG_TEST_RUN,
                attr.as_mut_ptr(),
                attr.len(),
            )
        };
        if rc < 0 {
            return Err(BpfError::Syscall {
                what: "BPF_PROG_TEST_RUN",
                source: io::Error::last_os_error(),
            });
        }
        let field = |at: usize| {
            let mut v = [0u8; 4];
            v.copy_from_slice(&attr[at..at + 4]);
            u32::from_ne_bytes(v)
        };
        Ok((
            XdpAction::from(field(4)),
            std::time::Duration::from_nanos(u64::from(field(36))),
        ))
    }
}

/// The counters of `map` (the program's `counters`), summed over all CPUs.
fn read_counters(map: &PerCpuArray<MapData, u64>) -> Result<Counters, BpfError> {
    let read = |index: u32| -> Result<u64, BpfError> {
        let values = map
            .get(&index, 0)
            .map_err(|e| map_error("reading the counters", e))?;
        Ok(values.iter().fold(0u64, |acc, v| acc.wrapping_add(*v)))
    };
    Ok(Counters {
        steered: read(COUNTER_STEERED)?,
        passed: read(COUNTER_PASSED)?,
        malformed: read(COUNTER_MALFORMED)?,
        no_socket: read(COUNTER_NO_SOCKET)?,
        fault_dropped: read(COUNTER_FAULT_DROPPED)?,
        other_queue: read(COUNTER_OTHER_QUEUE)?,
    })
}

/// The program's `rx_queues` map summed over all CPUs, trailing zeros cut.
fn read_queue_counts(map: &PerCpuArray<MapData, u64>) -> Result<Vec<u64>, BpfError> {
    let mut counts = Vec::with_capacity(MAX_QUEUES as usize);
    for queue in 0..map.len() {
        let values = map
            .get(&queue, 0)
            .map_err(|e| map_error("reading the per-queue counters", e))?;
        counts.push(values.iter().fold(0u64, |acc, v| acc.wrapping_add(*v)));
    }
    while counts.last() == Some(&0) {
        counts.pop();
    }
    Ok(counts)
}

fn take_map<M>(ebpf: &mut Ebpf, name: &'static str) -> Result<M, BpfError>
where
    M: TryFrom<aya::maps::Map, Error = aya::maps::MapError>,
{
    let map = ebpf
        .take_map(name)
        .ok_or_else(|| BpfError::Load(format!("map {name} missing in the BPF object")))?;
    M::try_from(map).map_err(|e| map_error("opening a BPF map", e))
}

fn check_slot(slot: u32) -> Result<(), BpfError> {
    if slot >= Steering::MAX_SLOTS {
        return Err(BpfError::SlotOutOfRange {
            slot,
            max: Steering::MAX_SLOTS,
        });
    }
    Ok(())
}

/// splitmix64 (Steele, Lea, Flood 2014): spreads a seed into a well-mixed
/// 64-bit state.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attach_mode_parses_and_displays() {
        assert_eq!("native".parse::<AttachMode>().unwrap(), AttachMode::Native);
        assert_eq!("SKB".parse::<AttachMode>().unwrap(), AttachMode::Generic);
        assert_eq!(
            "generic".parse::<AttachMode>().unwrap(),
            AttachMode::Generic
        );
        assert!("hw".parse::<AttachMode>().is_err());
        assert_eq!(AttachMode::Native.to_string(), "native");
        assert_eq!(AttachMode::Generic.to_string(), "generic");
    }

    #[test]
    fn steering_and_errors_cross_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Steering>();
        send_sync::<BpfError>();
    }

    #[test]
    fn object_is_embedded() {
        assert!(STEER_OBJECT.starts_with(b"\x7fELF"));
    }

    #[test]
    fn unknown_interface_is_reported() {
        let err = Steering::attach("no-such-if0", AttachMode::Generic).unwrap_err();
        assert!(matches!(err, BpfError::InterfaceNotFound(_)), "{err}");
    }

    #[test]
    fn splitmix_is_nonzero_and_spreads() {
        assert_ne!(splitmix64(0), splitmix64(1));
        assert_ne!(splitmix64(0), 0);
    }
}
