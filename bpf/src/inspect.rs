//! The steering program seen from another process: which interfaces run an
//! XDP program and which of those programs are ours, the program's maps
//! opened by id (ports steered, counters), the `bpf_link`s holding XDP
//! programs, objects pinned on BPF filesystems, and the processes holding
//! each BPF object open — what `ofi-xdp status` shows and `ofi-xdp cleanup`
//! acts on, in the manner of `bpftool prog show` and `xdp-loader status`.
//!
//! A program is recognised as ours by its name ([`PROGRAM_NAME`]), its type
//! (XDP) and its maps: it must use maps named `xsks`, `ports`, `counters` and
//! `config`, as `steer.bpf.c` defines them. Objects are found by their kernel
//! ids (`BPF_*_GET_NEXT_ID`, `BPF_*_GET_FD_BY_ID`), which needs
//! `CAP_SYS_ADMIN`.

use std::collections::HashMap as StdHashMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use aya::maps::{Array, HashMap, Map, MapData, MapInfo, PerCpuArray};
use aya::programs::loaded_programs;

pub use crate::netlink::{Hook, InterfaceXdp};
use crate::{BpfError, CONFIG_DROP_ONE_IN, COUNTER_COUNT, Counters, PROGRAM_NAME, sys};

/// The maps a program must use to be recognised as ours.
const OUR_MAPS: [&str; 4] = ["xsks", "ports", "counters", "config"];

/// `BPF_PROG_TYPE_XDP`.
const BPF_PROG_TYPE_XDP: u32 = 6;

/// Every interface of the calling thread's network namespace and the XDP
/// programs it runs, per hook.
pub fn interfaces() -> Result<Vec<InterfaceXdp>, BpfError> {
    crate::netlink::interfaces().map_err(|source| BpfError::Syscall {
        what: "listing interfaces (RTM_GETLINK)",
        source,
    })
}

/// A loaded BPF program, as `BPF_OBJ_GET_INFO_BY_FD` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    pub id: u32,
    /// The name given at load time (at most 15 bytes).
    pub name: String,
    /// SHA of the instructions, as `bpftool` prints it.
    pub tag: u64,
    /// When it was loaded (our loader attaches right after loading).
    pub loaded_at: Option<SystemTime>,
    /// The user that loaded it.
    pub uid: Option<u32>,
    /// Names of the maps it uses, by map id.
    pub maps: Vec<(u32, String)>,
    /// The ofi-xdp steering program (by name, type and maps).
    pub ours: bool,
}

/// The loaded program with `id`, `None` when there is none (any more).
pub fn program(id: u32) -> Result<Option<Program>, BpfError> {
    for info in loaded_programs() {
        let info = info.map_err(|e| BpfError::Load(format!("listing BPF programs: {e}")))?;
        if info.id() != id {
            continue;
        }
        let name = info.name_as_str().unwrap_or("").to_owned();
        let map_ids = info
            .map_ids()
            .map_err(|e| BpfError::Load(format!("reading the maps of program {id}: {e}")))?
            .unwrap_or_default();
        let maps: Vec<(u32, String)> = map_ids
            .into_iter()
            .map(|map_id| {
                let map_name = MapInfo::from_id(map_id)
                    .ok()
                    .and_then(|m| m.name_as_str().map(str::to_owned))
                    .unwrap_or_default();
                (map_id, map_name)
            })
            .collect();
        let ours = name == PROGRAM_NAME
            && info.program_type() as u32 == BPF_PROG_TYPE_XDP
            && OUR_MAPS
                .iter()
                .all(|wanted| maps.iter().any(|(_, n)| n == wanted));
        return Ok(Some(Program {
            id,
            name,
            tag: info.tag(),
            loaded_at: info.loaded_at(),
            uid: info.created_by_uid(),
            maps,
            ours,
        }));
    }
    Ok(None)
}

/// The maps of one of our steering programs, opened by id from any process.
pub struct SteeringMaps {
    ports: HashMap<MapData, u32, u32>,
    counters: PerCpuArray<MapData, u64>,
    config: Array<MapData, u32>,
    xsk_queues: Array<MapData, u32>,
    rx_queues: PerCpuArray<MapData, u64>,
}

impl SteeringMaps {
    /// Opens the maps of `program`, which must be ours.
    pub fn open(program: &Program) -> Result<SteeringMaps, BpfError> {
        if !program.ours {
            return Err(BpfError::NotOurs {
                id: program.id,
                name: program.name.clone(),
            });
        }
        let map_by_name = |name: &str| -> Result<Map, BpfError> {
            let id = program
                .maps
                .iter()
                .find(|(_, n)| n == name)
                .map(|(id, _)| *id)
                .ok_or_else(|| BpfError::NotOurs {
                    id: program.id,
                    name: program.name.clone(),
                })?;
            let data = MapData::from_id(id)
                .map_err(|e| crate::map_error("opening a map of the program by id", e))?;
            Map::from_map_data(data).map_err(|e| crate::map_error("opening a map by id", e))
        };
        let ports = HashMap::try_from(map_by_name("ports")?)
            .map_err(|e| crate::map_error("opening the port map", e))?;
        let counters: PerCpuArray<MapData, u64> =
            PerCpuArray::try_from(map_by_name("counters")?)
                .map_err(|e| crate::map_error("opening the counters", e))?;
        let config = Array::try_from(map_by_name("config")?)
            .map_err(|e| crate::map_error("opening the config map", e))?;
        let xsk_queues = Array::try_from(map_by_name("xsk_queues")?)
            .map_err(|e| crate::map_error("opening the socket queue map", e))?;
        let rx_queues = PerCpuArray::try_from(map_by_name("rx_queues")?)
            .map_err(|e| crate::map_error("opening the per-queue counters", e))?;
        if counters.len() != COUNTER_COUNT {
            return Err(BpfError::Load(format!(
                "program {} has {} counters, this tool knows {COUNTER_COUNT}: \
                 it was built from another version of steer.bpf.c",
                program.id,
                counters.len()
            )));
        }
        Ok(SteeringMaps {
            ports,
            counters,
            config,
            xsk_queues,
            rx_queues,
        })
    }

    /// The counters, summed over all CPUs.
    pub fn counters(&self) -> Result<Counters, BpfError> {
        crate::read_counters(&self.counters)
    }

    /// Frames of steered ports by the receive queue they arrived on
    /// (as [`crate::Steering::queue_counts`]).
    pub fn queue_counts(&self) -> Result<Vec<u64>, BpfError> {
        crate::read_queue_counts(&self.rx_queues)
    }

    /// The queue the socket in XSKMAP `slot` was bound to, as its owner
    /// recorded it.
    pub fn slot_queue(&self, slot: u32) -> Result<u32, BpfError> {
        self.xsk_queues
            .get(&slot, 0)
            .map_err(|e| crate::map_error("reading the socket queue map", e))
    }

    /// `(UDP port, XSKMAP slot)` of every steered port, by port.
    pub fn ports(&self) -> Result<Vec<(u16, u32)>, BpfError> {
        let mut out = Vec::new();
        for entry in self.ports.iter() {
            let (port, slot) = entry.map_err(|e| crate::map_error("reading the port map", e))?;
            out.push((u16::try_from(port).unwrap_or(u16::MAX), slot));
        }
        out.sort_unstable();
        Ok(out)
    }

    /// The fault-injection rate (drop one in N steered frames; 0 = off).
    pub fn fault_injection(&self) -> Result<u32, BpfError> {
        self.config
            .get(&CONFIG_DROP_ONE_IN, 0)
            .map_err(|e| crate::map_error("reading the fault-injection rate", e))
    }
}

/// A `bpf_link` attaching an XDP program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XdpLink {
    pub id: u32,
    pub prog_id: u32,
    /// 0 once the link is detached (it lives on while held or pinned).
    pub ifindex: u32,
}

/// Every XDP `bpf_link` on the system (links are not per network namespace;
/// an interface index is meaningful in the namespace of its interface).
pub fn xdp_links() -> Result<Vec<XdpLink>, BpfError> {
    let syscall = |what: &'static str| move |source| BpfError::Syscall { what, source };
    let mut out = Vec::new();
    let mut id = 0;
    while let Some(next) = sys::link_next_id(id).map_err(syscall("BPF_LINK_GET_NEXT_ID"))? {
        id = next;
        // A link may go away between the two calls.
        let Ok(fd) = sys::link_fd_by_id(id) else {
            continue;
        };
        let info = sys::link_info(fd.as_fd()).map_err(syscall("reading a link's info"))?;
        if info.link_type == sys::BPF_LINK_TYPE_XDP {
            out.push(XdpLink {
                id,
                prog_id: info.prog_id,
                ifindex: info.xdp_ifindex,
            });
        }
    }
    Ok(out)
}

/// Detaches the program of XDP link `id` from its interface
/// (`BPF_LINK_DETACH`), whoever holds or pins the link.
pub fn detach_link(id: u32) -> Result<(), BpfError> {
    let fd = sys::link_fd_by_id(id).map_err(|source| BpfError::Syscall {
        what: "opening the link by id",
        source,
    })?;
    sys::link_detach(fd.as_fd()).map_err(|source| BpfError::Syscall {
        what: "detaching the link (BPF_LINK_DETACH)",
        source,
    })
}

/// Removes program `prog_id` from `hook` of interface `ifindex` (in the
/// calling thread's network namespace), where it was attached through
/// netlink. The kernel removes it only if it is still that program, so a
/// program attached by someone else meanwhile is left alone.
pub fn detach_netlink(ifindex: u32, hook: Hook, prog_id: u32) -> Result<(), BpfError> {
    let prog = sys::prog_fd_by_id(prog_id).map_err(|source| BpfError::Syscall {
        what: "opening the program by id",
        source,
    })?;
    crate::netlink::detach(ifindex, hook, prog.as_raw_fd()).map_err(|source| BpfError::Syscall {
        what: "removing the XDP program (RTM_SETLINK)",
        source,
    })
}

/// Kinds of BPF objects a file descriptor or a pin can refer to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectKind {
    Program,
    Map,
    Link,
}

/// The BPF object behind file descriptor `fd` of process `pid` (from
/// `/proc/<pid>/fd` and `fdinfo`), `None` for anything else.
pub fn object_of_fd(pid: &str, fd: &str) -> Option<(ObjectKind, u32)> {
    let proc = Path::new("/proc").join(pid);
    let target = std::fs::read_link(proc.join("fd").join(fd)).ok()?;
    let (kind, key) = match target.to_str()? {
        "anon_inode:bpf-prog" => (ObjectKind::Program, "prog_id:"),
        "anon_inode:bpf-map" => (ObjectKind::Map, "map_id:"),
        "anon_inode:bpf_link" => (ObjectKind::Link, "link_id:"),
        _ => return None,
    };
    let info = std::fs::read_to_string(proc.join("fdinfo").join(fd)).ok()?;
    let id = info
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().parse().ok())?;
    Some((kind, id))
}

/// Every process (but this one) holding a BPF object open, by object.
pub fn holders() -> StdHashMap<(ObjectKind, u32), Vec<u32>> {
    let me = std::process::id();
    let mut out: StdHashMap<(ObjectKind, u32), Vec<u32>> = StdHashMap::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in procs.flatten() {
        let name = entry.file_name();
        let Some(pid_text) = name.to_str() else {
            continue;
        };
        let Ok(pid) = pid_text.parse::<u32>() else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let fd_name = fd.file_name();
            if let Some(object) = fd_name.to_str().and_then(|f| object_of_fd(pid_text, f)) {
                let pids = out.entry(object).or_default();
                if !pids.contains(&pid) {
                    pids.push(pid);
                }
            }
        }
    }
    out
}

/// An object pinned on a BPF filesystem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin {
    pub path: PathBuf,
    pub kind: ObjectKind,
    pub id: u32,
}

/// Mount points of BPF filesystems in this mount namespace.
fn bpffs_mounts() -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    // mountinfo(5): "... mount-point ... - fstype source options".
    text.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            (right.split_whitespace().next()? == "bpf")
                .then(|| left.split_whitespace().nth(4).map(PathBuf::from))?
        })
        .collect()
}

/// Every object pinned on the BPF filesystems mounted in this mount
/// namespace (`BPF_OBJ_GET` of each file).
pub fn pins() -> Vec<Pin> {
    let mut out = Vec::new();
    let mut dirs = bpffs_mounts();
    dirs.dedup();
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => dirs.push(path),
                Ok(t) if t.is_file() => {
                    if let Some((kind, id)) = pinned_object(&path) {
                        out.push(Pin { path, kind, id });
                    }
                }
                _ => {}
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

fn pinned_object(path: &Path) -> Option<(ObjectKind, u32)> {
    let fd = sys::obj_get(path).ok()?;
    object_of_fd("self", &fd.as_raw_fd().to_string())
}

/// Removes a pin (the object goes when nothing else holds it).
pub fn unpin(pin: &Pin) -> io::Result<()> {
    std::fs::remove_file(&pin.path)
}

/// Every loaded program that is ours, wherever it is attached (or not).
pub fn our_programs() -> Result<Vec<Program>, BpfError> {
    let mut ids = Vec::new();
    for info in loaded_programs() {
        let info = info.map_err(|e| BpfError::Load(format!("listing BPF programs: {e}")))?;
        if info.name_as_str() == Some(PROGRAM_NAME) {
            ids.push(info.id());
        }
    }
    let mut out = Vec::new();
    for id in ids {
        if let Some(p) = program(id)?.filter(|p| p.ours) {
            out.push(p);
        }
    }
    Ok(out)
}
