//! `ofi-xdp status [--watch [SECS]]`: per interface of this network
//! namespace, the XDP program it runs and whether it is ours, how it is
//! attached and by which process, which UDP ports it steers into which
//! XSKMAP slot (and queue), its counters, the endpoints' own figures
//! from their statistics files, and the AF_XDP groups sharing a queue's
//! UMEM (members, dead ones, receive frames stranded and pooled) — in the
//! manner of `xdp-loader status` and `ethtool -S`. With `--watch` it refreshes and adds rates per second.

use std::fmt::Write as _;
use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use ofi_xdp_bpf::Counters;
use ofi_xdp_bpf::inspect::{self, Hook, InterfaceXdp, ObjectKind, Program, SteeringMaps, XdpLink};
use ofi_xdp_link::group::{self, Group, GroupSummary};
use ofi_xdp_tools::epstats::{self, DataPath, EndpointStats};

use crate::host;

/// Options shared by `status` and `cleanup`.
pub struct Scope {
    pub netns: Option<String>,
    pub dev: Option<String>,
    pub stats_dir: PathBuf,
}

impl Scope {
    /// Takes `--netns NAME`, `--dev IFNAME` and `--stats-dir DIR` out of
    /// `args`, leaving the rest.
    pub fn take(args: &mut Vec<String>) -> Result<Scope, String> {
        let mut take = |key: &str| -> Result<Option<String>, String> {
            let Some(i) = args.iter().position(|a| a == key) else {
                return Ok(None);
            };
            if i + 1 >= args.len() {
                return Err(format!("{key} needs a value"));
            }
            let v = args.remove(i + 1);
            args.remove(i);
            Ok(Some(v))
        };
        Ok(Scope {
            netns: take("--netns")?,
            dev: take("--dev")?,
            stats_dir: take("--stats-dir")?
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(epstats::DEFAULT_DIR)),
        })
    }

    /// Enters the namespace asked for (before any socket is made).
    pub fn enter(&self) -> Result<(), String> {
        match &self.netns {
            Some(name) => host::enter_netns(name),
            None => Ok(()),
        }
    }

    pub fn wants(&self, ifname: &str) -> bool {
        self.dev.as_deref().is_none_or(|d| d == ifname)
    }
}

/// One XDP program on one hook of an interface.
pub struct Attached {
    pub hook: Hook,
    pub prog_id: u32,
    /// `None` when the program went away while we looked.
    pub program: Option<Program>,
    /// The `bpf_link` holding it, `None` for a netlink attachment.
    pub link: Option<XdpLink>,
    /// Processes holding the link (or, for a netlink attachment, the program).
    pub holders: Vec<u32>,
    /// Our program's maps, read: `(UDP port, XSKMAP slot, the slot's queue)`.
    pub ports: Vec<(u16, u32, u32)>,
    pub counters: Option<Counters>,
    /// Frames of steered ports by the receive queue they arrived on.
    pub queue_counts: Vec<u64>,
    pub fault_one_in: u32,
    /// Why the maps could not be read.
    pub error: Option<String>,
}

/// What one look at the host found.
pub struct Snapshot {
    pub taken: Instant,
    pub interfaces: Vec<(InterfaceXdp, Vec<Attached>)>,
    pub endpoints: Vec<EndpointStats>,
    pub elsewhere: usize,
    pub stats_errors: Vec<String>,
    /// Records of the ntuple rules endpoints installed in this namespace.
    pub rules: Vec<ofi_xdp_link::ntuple::RuleRecord>,
    /// The AF_XDP groups of this namespace and user: (interface index,
    /// queue, what the group file holds, or why it could not be read).
    pub groups: Vec<(u32, u32, Result<GroupSummary, String>)>,
}

/// Every XDP program on the interfaces in scope, and how each is held.
pub fn attachments(scope: &Scope) -> Result<Vec<(InterfaceXdp, Vec<Attached>)>, String> {
    let interfaces = inspect::interfaces().map_err(|e| e.to_string())?;
    let links = inspect::xdp_links().map_err(|e| e.to_string())?;
    let holders = inspect::holders();
    let mut out = Vec::new();
    for iface in interfaces.into_iter().filter(|i| scope.wants(&i.name)) {
        let mut attached = Vec::new();
        for &(hook, prog_id) in &iface.programs {
            let program = inspect::program(prog_id).map_err(|e| e.to_string())?;
            let link = links
                .iter()
                .find(|l| l.prog_id == prog_id && l.ifindex == iface.ifindex)
                .copied();
            let held = match link {
                Some(l) => holders.get(&(ObjectKind::Link, l.id)),
                None => holders.get(&(ObjectKind::Program, prog_id)),
            };
            let mut a = Attached {
                hook,
                prog_id,
                program,
                link,
                holders: held.cloned().unwrap_or_default(),
                ports: Vec::new(),
                counters: None,
                queue_counts: Vec::new(),
                fault_one_in: 0,
                error: None,
            };
            if let Some(p) = a.program.as_ref().filter(|p| p.ours) {
                match SteeringMaps::open(p).and_then(|m| read_maps(&m, &mut a)) {
                    Ok(()) => {}
                    Err(e) => a.error = Some(e.to_string()),
                }
            }
            attached.push(a);
        }
        out.push((iface, attached));
    }
    Ok(out)
}

/// Our program's ports (with each slot's queue), counters and fault rate.
fn read_maps(m: &SteeringMaps, a: &mut Attached) -> Result<(), ofi_xdp_bpf::BpfError> {
    a.ports = m
        .ports()?
        .into_iter()
        .map(|(port, slot)| Ok((port, slot, m.slot_queue(slot)?)))
        .collect::<Result<_, ofi_xdp_bpf::BpfError>>()?;
    a.counters = Some(m.counters()?);
    a.queue_counts = m.queue_counts()?;
    a.fault_one_in = m.fault_injection()?;
    Ok(())
}

fn snapshot(scope: &Scope) -> Result<Snapshot, String> {
    let interfaces = attachments(scope)?;
    let netns = epstats::netns_inode();
    let mut endpoints = Vec::new();
    let mut stats_errors = Vec::new();
    let mut elsewhere = 0;
    for r in epstats::read_dir(&scope.stats_dir) {
        match r {
            Ok(e) if Some(e.netns) == netns && scope.wants(&e.identity.ifname) => endpoints.push(e),
            Ok(_) => elsewhere += 1,
            Err(e) => stats_errors.push(e),
        }
    }
    let rules = ofi_xdp_link::ntuple::RuleRecord::list(std::path::Path::new(
        ofi_xdp_link::ntuple::DEFAULT_DIR,
    ))
    .into_iter()
    .filter_map(Result::ok)
    .filter(|r| Some(r.netns) == netns && scope.wants(&r.ifname))
    .collect();
    let dir = std::path::Path::new(group::DEFAULT_DIR);
    let groups = netns
        .map(|ns| Group::files(dir, ns))
        .unwrap_or_default()
        .into_iter()
        .filter_map(|path| {
            let (ifindex, queue) = Group::ifindex_queue(&path)?;
            let summary = Group::open_path(&path)
                .and_then(|g| g.summary())
                .map_err(|e| e.to_string());
            Some((ifindex, queue, summary))
        })
        .collect();
    Ok(Snapshot {
        taken: Instant::now(),
        interfaces,
        endpoints,
        elsewhere,
        stats_errors,
        rules,
        groups,
    })
}

/// Rates between two looks: the previous snapshot and the seconds between.
struct Before<'a> {
    snap: &'a Snapshot,
    secs: f64,
}

impl Before<'_> {
    fn counters(&self, ifindex: u32, prog_id: u32) -> Option<Counters> {
        self.snap
            .interfaces
            .iter()
            .filter(|(i, _)| i.ifindex == ifindex)
            .flat_map(|(_, a)| a.iter())
            .find(|a| a.prog_id == prog_id)
            .and_then(|a| a.counters)
    }

    fn endpoint_value(&self, file: &std::path::Path, name: &str) -> Option<u64> {
        self.snap
            .endpoints
            .iter()
            .find(|e| e.file == file)
            .and_then(|e| e.value(name))
    }

    fn rate(&self, now: u64, then: Option<u64>) -> String {
        match then {
            Some(t) if self.secs > 0.0 => {
                format!("{:.0}/s", now.saturating_sub(t) as f64 / self.secs)
            }
            _ => String::new(),
        }
    }
}

fn render(snap: &Snapshot, before: Option<&Before<'_>>) -> String {
    let mut o = String::new();
    for (iface, attached) in &snap.interfaces {
        if attached.is_empty() {
            let _ = writeln!(
                o,
                "{} (ifindex {}): no XDP program",
                iface.name, iface.ifindex
            );
        } else {
            let _ = writeln!(o, "{} (ifindex {})", iface.name, iface.ifindex);
        }
        for a in attached {
            render_program(&mut o, iface, a, snap, before);
        }
        let on_iface: Vec<&EndpointStats> = snap
            .endpoints
            .iter()
            .filter(|e| e.identity.ifindex == iface.ifindex)
            .collect();
        render_endpoints(&mut o, &on_iface, before);
        for r in snap.rules.iter().filter(|r| r.ifindex == iface.ifindex) {
            let at = r.location.map_or_else(
                || "location pending".to_owned(),
                |l| format!("location {l}"),
            );
            let owner = if r.alive() {
                host::describe_pid(r.pid)
            } else {
                format!("pid {} (gone: `ofi-xdp cleanup` removes it)", r.pid)
            };
            let _ = writeln!(o, "  ntuple rule {} at {at}, {owner}", r.rule);
        }
        for (_, queue, g) in snap.groups.iter().filter(|g| g.0 == iface.ifindex) {
            render_group(&mut o, *queue, g);
        }
    }
    let unlisted: Vec<&EndpointStats> = snap
        .endpoints
        .iter()
        .filter(|e| {
            !snap
                .interfaces
                .iter()
                .any(|(i, _)| i.ifindex == e.identity.ifindex)
        })
        .collect();
    if !unlisted.is_empty() {
        let _ = writeln!(o, "endpoints on interfaces not listed above:");
        render_endpoints(&mut o, &unlisted, before);
    }
    if snap.elsewhere > 0 {
        let _ = writeln!(
            o,
            "({} more endpoint statistics files belong to other network namespaces or interfaces; \
             see --netns)",
            snap.elsewhere
        );
    }
    for e in &snap.stats_errors {
        let _ = writeln!(o, "unreadable statistics file: {e}");
    }
    o
}

/// One queue's AF_XDP group (several processes sharing its UMEM).
fn render_group(o: &mut String, queue: u32, g: &Result<GroupSummary, String>) {
    let g = match g {
        Ok(g) => g,
        Err(e) => {
            let _ = writeln!(o, "  AF_XDP group on queue {queue}: unreadable: {e}");
            return;
        }
    };
    let pids: Vec<String> = g
        .members
        .iter()
        .map(|(pid, alive)| {
            if *alive {
                pid.to_string()
            } else {
                format!("{pid} (gone: `ofi-xdp cleanup` removes the group when all are)")
            }
        })
        .collect();
    let _ = writeln!(
        o,
        "  AF_XDP group on queue {queue}: {} member(s) of {} (pids {}), {} died so far (up to \
         {} receive frames stranded), {} receive frames pooled",
        g.members.len(),
        g.capacity,
        pids.join(", "),
        g.reclaimed,
        g.stranded_rx,
        g.rx_pooled
    );
}

fn render_program(
    o: &mut String,
    iface: &InterfaceXdp,
    a: &Attached,
    snap: &Snapshot,
    before: Option<&Before<'_>>,
) {
    let Some(p) = &a.program else {
        let _ = writeln!(
            o,
            "  xdp {}: program {} (gone while looking)",
            a.hook, a.prog_id
        );
        return;
    };
    let whose = if p.ours { "ours" } else { "not ours" };
    let _ = writeln!(
        o,
        "  xdp {} mode: program {} {} ({whose}), tag {:016x}",
        a.hook, p.id, p.name, p.tag
    );
    let how = match &a.link {
        Some(l) => format!("attached through bpf_link {}", l.id),
        None => "attached through netlink (stays until removed)".to_owned(),
    };
    let held = if a.holders.is_empty() {
        match a.link {
            Some(_) => "held by no process (pinned)".to_owned(),
            None => "held by no process".to_owned(),
        }
    } else {
        let pids: Vec<String> = a.holders.iter().map(|p| host::describe_pid(*p)).collect();
        format!("held by {}", pids.join(", "))
    };
    let _ = writeln!(o, "    {how}, {held}");
    if let Some(t) = p.loaded_at {
        let uid = p.uid.map(|u| format!(" by uid {u}")).unwrap_or_default();
        let _ = writeln!(o, "    loaded {} ({}){uid}", host::utc(t), host::ago(t));
    }
    if !p.ours {
        return;
    }
    if let Some(e) = &a.error {
        let _ = writeln!(o, "    maps unreadable: {e}");
        return;
    }
    if a.ports.is_empty() {
        let _ = writeln!(o, "    steered UDP ports: none");
    } else {
        let _ = writeln!(o, "    steered UDP ports:");
    }
    for (port, slot, queue) in &a.ports {
        let endpoint = snap.endpoints.iter().find(|e| {
            e.identity.ifindex == iface.ifindex
                && e.identity.slot == Some(*slot)
                && e.identity.address.ends_with(&format!(":{port}"))
        });
        let owner = match endpoint {
            Some(e) => format!(
                " ({} {} endpoint)",
                host::describe_pid(e.pid),
                e.identity.endpoint
            ),
            None => String::new(),
        };
        let _ = writeln!(
            o,
            "      UDP port {port} -> XSKMAP slot {slot} queue {queue}{owner}"
        );
    }
    if let Some(c) = a.counters {
        let then = before.and_then(|b| b.counters(iface.ifindex, p.id));
        let _ = writeln!(o, "    counters:");
        let rows = [
            ("steered", c.steered, then.map(|t| t.steered)),
            ("other_queue", c.other_queue, then.map(|t| t.other_queue)),
            ("passed", c.passed, then.map(|t| t.passed)),
            ("malformed", c.malformed, then.map(|t| t.malformed)),
            ("no_socket", c.no_socket, then.map(|t| t.no_socket)),
            (
                "fault_dropped",
                c.fault_dropped,
                then.map(|t| t.fault_dropped),
            ),
        ];
        for (name, now, then) in rows {
            let rate = before.map(|b| b.rate(now, then)).unwrap_or_default();
            let _ = writeln!(o, "      {name:<16} {now:>14} {rate:>12}");
        }
    }
    if !a.queue_counts.is_empty() {
        let by_queue: Vec<String> = a
            .queue_counts
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(q, n)| format!("{q}:{n}"))
            .collect();
        let _ = writeln!(
            o,
            "    frames of steered ports by RX queue: {}",
            by_queue.join(" ")
        );
    }
    let fault = match a.fault_one_in {
        0 => "off".to_owned(),
        n => format!("drops one in {n} steered frames"),
    };
    let _ = writeln!(o, "    fault injection: {fault}");
}

fn render_endpoints(o: &mut String, endpoints: &[&EndpointStats], before: Option<&Before<'_>>) {
    for e in endpoints {
        let id = &e.identity;
        let path = match id.path {
            DataPath::AfXdp => format!(
                "AF_XDP queue {} slot {}",
                id.queue.map(|q| q.to_string()).unwrap_or("?".into()),
                id.slot.map(|s| s.to_string()).unwrap_or("?".into())
            ),
            DataPath::KernelUdp => "kernel UDP path".to_owned(),
        };
        let state = if e.alive() {
            host::describe_pid(e.pid)
        } else {
            format!(
                "pid {} gone: stale file, `ofi-xdp cleanup` removes it",
                e.pid
            )
        };
        let _ = writeln!(
            o,
            "  endpoint {} {} on {path}, {state}",
            id.endpoint, id.address
        );
        for (name, value, gauge) in &e.values {
            let rate = match (before, gauge) {
                (Some(b), false) => b.rate(*value, b.endpoint_value(&e.file, name)),
                _ => String::new(),
            };
            let _ = writeln!(o, "      {name:<22} {value:>14} {rate:>12}");
        }
    }
}

/// `ofi-xdp status [--watch [SECS]] [--count N] [--netns NAME] [--dev IFNAME] [--stats-dir DIR]`
pub fn main(args: &[String]) -> Result<(), String> {
    let mut args = args.to_vec();
    let scope = Scope::take(&mut args)?;
    let mut watch: Option<f64> = None;
    let mut count: Option<u64> = None;
    let mut it = args.iter().peekable();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--watch" => {
                let secs = match it.peek().and_then(|v| v.parse::<f64>().ok()) {
                    Some(s) => {
                        it.next();
                        s
                    }
                    None => 1.0,
                };
                if !(secs.is_finite() && secs >= 0.1) {
                    return Err("--watch takes a period of at least 0.1 s".into());
                }
                watch = Some(secs);
            }
            "--count" => {
                let v = it.next().ok_or("--count needs a value")?;
                count = Some(v.parse().map_err(|e| format!("--count {v:?}: {e}"))?);
            }
            other => return Err(format!("unexpected argument {other:?}")),
        }
    }
    scope.enter()?;
    let Some(period) = watch else {
        print!("{}", render(&snapshot(&scope)?, None));
        return Ok(());
    };
    let tty = std::io::stdout().is_terminal();
    let mut previous: Option<Snapshot> = None;
    let mut shown = 0u64;
    loop {
        let snap = snapshot(&scope)?;
        let before = previous.as_ref().map(|p| Before {
            snap: p,
            secs: snap.taken.duration_since(p.taken).as_secs_f64(),
        });
        let body = render(&snap, before.as_ref());
        let stamp = host::utc(std::time::SystemTime::now());
        if tty {
            // Clear the screen and home the cursor (ECMA-48 ED and CUP).
            print!("\x1b[H\x1b[2J{stamp} (every {period} s; Ctrl-C ends)\n\n{body}");
        } else {
            print!("--- {stamp}\n{body}");
        }
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
        shown += 1;
        if count.is_some_and(|c| shown >= c) {
            return Ok(());
        }
        previous = Some(snap);
        std::thread::sleep(Duration::from_secs_f64(period));
    }
}

/// Endpoint statistics files whose process is gone, from any network namespace: a dead
/// process's file is garbage wherever it ran.
pub fn stale_endpoint_files(scope: &Scope) -> Vec<EndpointStats> {
    epstats::read_dir(&scope.stats_dir)
        .into_iter()
        .flatten()
        .filter(|e| !e.alive())
        .collect()
}
