//! `ofi-xdp cleanup`: removes what a process using the provider left behind
//! when it was killed, and nothing else.
//!
//! The provider attaches its steering program through a `bpf_link` held by
//! the process, so the kernel detaches it when the process dies, however it
//! dies. What can outlive a process, and is removed here:
//!
//! - our steering program attached through **netlink** (by an older loader,
//!   or by hand with `ip link set dev IF xdp obj …`): it stays on the
//!   interface until removed. Removed when no process holds the program.
//! - a **`bpf_link`** of ours kept alive by a pin on a BPF filesystem:
//!   detached when no process holds the link.
//! - **pins** of our programs and links (and of maps of our programs) that
//!   no process holds.
//! - **statistics files** of endpoints whose process is gone.
//! - **shared-memory areas** (`/dev/shm/ofi-xdp-local-*`, the rings that
//!   endpoints on one host exchange datagrams through) whose owner is gone;
//!   the provider itself removes those of its own network namespace when an
//!   endpoint opens; a sweep of the whole host (no `--netns`, no `--dev`)
//!   also removes those named after namespaces that no longer exist.
//! - **ntuple rules** steering an endpoint's port to its queue, whose
//!   record names a process that is gone (`ofi_xdp_link::ntuple`): removed
//!   when the driver still holds exactly that rule, the record with it.
//! - **AF_XDP group files** (`ofi_xdp_link::group`) of this namespace and
//!   user whose every member is gone (the last member to leave removes the
//!   file; killed ones cannot), and, in a whole-host sweep, the user's
//!   abandoned group files of namespaces that no longer exist.
//!
//! Every leftover is a [`Leftover`], each kind with the same two questions:
//! is it ours, and is its owner gone.
//! Programs that are not ours are never touched; programs of ours that a
//! live process holds are in use and left alone.

use std::collections::HashMap;

use ofi_xdp_bpf::inspect::{self, Hook, ObjectKind, Pin};
use ofi_xdp_link::group::{self, Group};
use ofi_xdp_link::ntuple::{self, RuleRecord};

use crate::host;
use crate::status::{self, Scope};

/// Something a dead process left, that can be removed.
enum Leftover {
    /// Our program attached through netlink, held by no process.
    NetlinkProgram {
        ifname: String,
        ifindex: u32,
        hook: Hook,
        prog_id: u32,
    },
    /// A `bpf_link` of ours held by no process (only its pin keeps it).
    PinnedLink {
        ifname: String,
        link_id: u32,
        prog_id: u32,
    },
    /// A pin of one of our objects that no process holds.
    Pin(Pin),
    /// The statistics file of an endpoint whose process is gone.
    StatsFile { path: std::path::PathBuf, pid: u32 },
    /// The shared-memory area of an endpoint whose process is gone.
    LocalArea { path: std::path::PathBuf, pid: u32 },
    /// An ntuple rule whose owner is gone (with its record), on an
    /// interface where `keep` are the locations of live owners' rules.
    NtupleRule { record: RuleRecord, keep: Vec<u32> },
    /// A queue's AF_XDP group file whose members are all gone.
    GroupFile(std::path::PathBuf),
}

impl Leftover {
    fn describe(&self) -> String {
        match self {
            Leftover::NetlinkProgram {
                ifname,
                hook,
                prog_id,
                ..
            } => format!(
                "{ifname}: {hook} XDP program {prog_id} ({}), attached through netlink, \
                 no process holds it",
                ofi_xdp_bpf::PROGRAM_NAME
            ),
            Leftover::PinnedLink {
                ifname,
                link_id,
                prog_id,
            } => {
                format!("{ifname}: bpf_link {link_id} of XDP program {prog_id}, kept only by a pin")
            }
            Leftover::Pin(p) => format!("pinned {:?} {} at {}", p.kind, p.id, p.path.display()),
            Leftover::StatsFile { path, pid } => {
                format!("endpoint statistics {} (pid {pid} is gone)", path.display())
            }
            Leftover::NtupleRule { record, .. } => format!("{record} (the process is gone)"),
            Leftover::GroupFile(path) => {
                format!("AF_XDP group {} (every member is gone)", path.display())
            }
            Leftover::LocalArea { path, pid } => {
                format!("shared-memory area {} (pid {pid} is gone)", path.display())
            }
        }
    }

    fn remove(&self) -> Result<(), String> {
        match self {
            Leftover::NetlinkProgram {
                ifindex,
                hook,
                prog_id,
                ..
            } => inspect::detach_netlink(*ifindex, *hook, *prog_id).map_err(|e| e.to_string()),
            Leftover::PinnedLink { link_id, .. } => {
                inspect::detach_link(*link_id).map_err(|e| e.to_string())
            }
            Leftover::Pin(p) => inspect::unpin(p).map_err(|e| e.to_string()),
            Leftover::StatsFile { path, .. }
            | Leftover::GroupFile(path)
            | Leftover::LocalArea { path, .. } => match std::fs::remove_file(path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.to_string()),
                _ => Ok(()),
            },
            Leftover::NtupleRule { record, keep } => {
                // The interface, by the index the record names: gone with
                // its rules, or renamed since.
                if let Some(ifname) = ifname_of(record.ifindex) {
                    let table = ntuple::Ethtool { ifname };
                    ntuple::remove_rule(&table, record, keep).map_err(|e| e.to_string())?;
                }
                record.remove().map_err(|e| e.to_string())
            }
        }
    }
}

/// What cleanup found: leftovers to remove, and what it leaves alone (why).
struct Findings {
    leftovers: Vec<Leftover>,
    kept: Vec<String>,
    refused: Vec<String>,
}

fn find(scope: &Scope) -> Result<Findings, String> {
    let mut f = Findings {
        leftovers: Vec::new(),
        kept: Vec::new(),
        refused: Vec::new(),
    };
    let mut detached_links = Vec::new();
    for (iface, attached) in status::attachments(scope)? {
        for a in attached {
            let Some(p) = &a.program else { continue };
            let what = format!(
                "{}: {} XDP program {} ({})",
                iface.name, a.hook, p.id, p.name
            );
            if !p.ours {
                f.refused.push(format!("{what}: not ours, left alone"));
                continue;
            }
            if !a.holders.is_empty() {
                let pids: Vec<String> = a.holders.iter().map(|p| host::describe_pid(*p)).collect();
                f.kept
                    .push(format!("{what}: in use by {}", pids.join(", ")));
                continue;
            }
            match a.link {
                Some(link) => {
                    detached_links.push(link.id);
                    f.leftovers.push(Leftover::PinnedLink {
                        ifname: iface.name.clone(),
                        link_id: link.id,
                        prog_id: p.id,
                    })
                }
                None => f.leftovers.push(Leftover::NetlinkProgram {
                    ifname: iface.name.clone(),
                    ifindex: iface.ifindex,
                    hook: a.hook,
                    prog_id: p.id,
                }),
            }
        }
    }
    if scope.dev.is_none() {
        find_pins(&mut f, &detached_links)?;
    }
    find_rules(&mut f, scope);
    find_groups(&mut f);
    for e in status::stale_endpoint_files(scope) {
        if scope.wants(&e.identity.ifname) {
            f.leftovers.push(Leftover::StatsFile {
                path: e.file,
                pid: e.pid,
            });
        }
    }
    if scope.dev.is_none() {
        f.leftovers.extend(stale_local_areas());
    }
    if scope.dev.is_none() && scope.netns.is_none() {
        gone_namespaces_files(&mut f);
    }
    Ok(f)
}

/// AF_XDP group files of this network namespace and user with no live
/// member.
fn find_groups(f: &mut Findings) {
    let Some(netns) = ofi_xdp_epstats::netns_inode() else {
        return;
    };
    let dir = std::path::Path::new(group::DEFAULT_DIR);
    for path in Group::files(dir, netns) {
        match Group::open_path(&path).and_then(|g| g.abandoned()) {
            Ok(true) => f.leftovers.push(Leftover::GroupFile(path)),
            Ok(false) => f
                .kept
                .push(format!("AF_XDP group {}: in use", path.display())),
            Err(e) => f
                .refused
                .push(format!("AF_XDP group {}: {e}", path.display())),
        }
    }
}

/// Start of a shared-memory area (provider/src/xdp/port/local/area.rs):
/// magic, layout version (u32), owner pid (u32).
const AREA_MAGIC: &[u8; 8] = b"OFIXDPL\0";

/// The shared-memory areas in /dev/shm of endpoints of this network
/// namespace (`ofi-xdp-local-<netns inode>-…`) whose owner process is gone:
/// a sweep of one namespace leaves other namespaces' areas alone, as it
/// does their programs and groups.
fn stale_local_areas() -> Vec<Leftover> {
    let Some(netns) = ofi_xdp_epstats::netns_inode() else {
        return Vec::new();
    };
    let prefix = format!("ofi-xdp-local-{netns}-");
    dead_owners_areas(|name| name.starts_with(&prefix))
}

/// The areas whose file name `wanted` and whose owner process is gone.
fn dead_owners_areas(wanted: impl Fn(&str) -> bool) -> Vec<Leftover> {
    let Ok(dir) = std::fs::read_dir("/dev/shm") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in dir.flatten() {
        let path = entry.path();
        let ours = entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with("ofi-xdp-local-") && wanted(n));
        if !ours {
            continue;
        }
        let mut head = [0u8; 16];
        let read = std::fs::File::open(&path)
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head));
        if read.is_err() || &head[..8] != AREA_MAGIC {
            continue;
        }
        let pid = u32::from_ne_bytes([head[12], head[13], head[14], head[15]]);
        if ofi_xdp_epstats::process_starttime(pid).is_none() {
            found.push(Leftover::LocalArea { path, pid });
        }
    }
    found
}

/// Areas and AF_XDP group files named after network namespaces that no
/// longer exist (test hosts, containers gone while a process in them was
/// killed): no endpoint of theirs can ever open again and tidy them up.
/// Only in a whole-host sweep, only when we may read the tasks' namespaces
/// (root), and only files whose owner process (areas) or every member
/// (groups) is gone as well.
fn gone_namespaces_files(f: &mut Findings) {
    let Some(live) = crate::live_netns::live_netns() else {
        f.kept.push(
            "files of namespaces that may be gone: the processes' namespaces are not \
             readable here (run as root to sweep them)"
                .to_owned(),
        );
        return;
    };
    let gone = |name: &str| {
        crate::live_netns::netns_of_area_name(name).is_some_and(|ns| !live.contains(&ns))
    };
    f.leftovers.extend(dead_owners_areas(gone));
    let dir = std::path::Path::new(group::DEFAULT_DIR);
    for (netns, path) in Group::all_files(dir) {
        if live.contains(&netns) {
            continue;
        }
        if let Ok(true) = Group::open_path(&path).and_then(|g| g.abandoned()) {
            f.leftovers.push(Leftover::GroupFile(path));
        }
    }
}

/// The name of the interface with `ifindex` in this network namespace.
fn ifname_of(ifindex: u32) -> Option<String> {
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: if_indextoname writes at most IF_NAMESIZE bytes into buf.
    let name = unsafe { libc::if_indextoname(ifindex, buf.as_mut_ptr()) };
    if name.is_null() {
        return None;
    }
    // SAFETY: on success buf holds a NUL-terminated name.
    let name = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) };
    Some(name.to_string_lossy().into_owned())
}

/// ntuple rule records of this network namespace: those of processes that
/// are gone are leftovers, the others in use.
fn find_rules(f: &mut Findings, scope: &Scope) {
    let Some(netns) = ofi_xdp_epstats::netns_inode() else {
        return;
    };
    let here: Vec<RuleRecord> = RuleRecord::list(std::path::Path::new(ntuple::DEFAULT_DIR))
        .into_iter()
        .filter_map(Result::ok)
        .filter(|r| r.netns == netns && scope.wants(&r.ifname))
        .collect();
    for r in &here {
        if r.alive() {
            f.kept
                .push(format!("{r}: in use by {}", host::describe_pid(r.pid)));
            continue;
        }
        let keep = here
            .iter()
            .filter(|o| o.ifindex == r.ifindex && o.alive())
            .filter_map(|o| o.location)
            .collect();
        f.leftovers.push(Leftover::NtupleRule {
            record: r.clone(),
            keep,
        });
    }
}

/// Pins of our programs, of links of our programs and of our programs'
/// maps, that no process holds (a pin of a link detached above included).
fn find_pins(f: &mut Findings, detached_links: &[u32]) -> Result<(), String> {
    let pins = inspect::pins();
    if pins.is_empty() {
        return Ok(());
    }
    let ours = inspect::our_programs().map_err(|e| e.to_string())?;
    let links = inspect::xdp_links().map_err(|e| e.to_string())?;
    let holders: HashMap<(ObjectKind, u32), Vec<u32>> = inspect::holders();
    let is_our_prog = |id: u32| ours.iter().any(|p| p.id == id);
    for pin in pins {
        let mine = match pin.kind {
            ObjectKind::Program => is_our_prog(pin.id),
            ObjectKind::Link => links
                .iter()
                .any(|l| l.id == pin.id && is_our_prog(l.prog_id)),
            ObjectKind::Map => ours
                .iter()
                .any(|p| p.maps.iter().any(|(id, _)| *id == pin.id)),
        };
        if !mine {
            continue;
        }
        let held = holders
            .get(&(pin.kind, pin.id))
            .is_some_and(|h| !h.is_empty());
        if held && !(pin.kind == ObjectKind::Link && detached_links.contains(&pin.id)) {
            f.kept.push(format!(
                "pinned {:?} {} at {}: in use",
                pin.kind,
                pin.id,
                pin.path.display()
            ));
            continue;
        }
        f.leftovers.push(Leftover::Pin(pin));
    }
    Ok(())
}

/// `ofi-xdp cleanup`'s options.
#[derive(clap::Args)]
pub struct Opts {
    #[command(flatten)]
    scope: Scope,
    /// Say what would be removed, remove nothing
    #[arg(long)]
    dry_run: bool,
}

/// `ofi-xdp cleanup [--dry-run] [--netns NAME] [--dev IFNAME] [--stats-dir DIR]`
pub fn main(o: &Opts) -> Result<(), String> {
    let (scope, dry_run) = (&o.scope, o.dry_run);
    scope.enter()?;
    let f = find(scope)?;
    for k in &f.kept {
        println!("kept: {k}");
    }
    for r in &f.refused {
        println!("refused: {r}");
    }
    let mut failed = Vec::new();
    for l in &f.leftovers {
        if dry_run {
            println!("would remove: {}", l.describe());
            continue;
        }
        match l.remove() {
            Ok(()) => println!("removed: {}", l.describe()),
            Err(e) => {
                println!("failed: {}: {e}", l.describe());
                failed.push(l.describe());
            }
        }
    }
    if f.leftovers.is_empty() {
        println!("nothing left behind to remove");
    }
    if !failed.is_empty() {
        return Err(format!("{} leftovers could not be removed", failed.len()));
    }
    // Asked about one interface whose program is not ours: say no loudly.
    if scope.dev.is_some() && !f.refused.is_empty() {
        return Err(format!(
            "refusing to remove a program that is not ours: {}",
            f.refused.join("; ")
        ));
    }
    Ok(())
}
