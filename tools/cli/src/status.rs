//! `ofi-xdp status [--watch [SECS]]`: per interface of this network
//! namespace, the XDP program it runs and whether it is ours, how it is
//! attached and by which process, which UDP ports it steers into which
//! XSKMAP slot (and queue), its counters, the endpoints' own figures
//! from their statistics files, and the AF_XDP groups sharing a queue's
//! UMEM (members, dead ones, receive frames stranded and pooled) — in the
//! manner of `xdp-loader status` and `ethtool -S`. With `--watch` it refreshes and adds rates per second;
//! with `--json` it prints the same as JSON (schema in tools/cli/README.md).

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
#[derive(clap::Args)]
pub struct Scope {
    /// Act in the named network namespace (/run/netns/NAME), as `ip netns exec` does
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
    /// Only this interface
    #[arg(long, value_name = "IFNAME")]
    pub dev: Option<String>,
    /// Where the endpoints' statistics files are
    #[arg(long, value_name = "DIR", default_value = epstats::DEFAULT_DIR)]
    pub stats_dir: PathBuf,
}

impl Scope {
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

impl Snapshot {
    /// The endpoints whose interface is not among those shown (their
    /// statistics file names an interface out of scope or gone).
    fn unlisted_endpoints(&self) -> impl Iterator<Item = &EndpointStats> {
        self.endpoints.iter().filter(|e| {
            !self
                .interfaces
                .iter()
                .any(|(i, _)| i.ifindex == e.identity.ifindex)
        })
    }
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
    let unlisted: Vec<&EndpointStats> = snap.unlisted_endpoints().collect();
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
        for (name, now, then) in program_counters(c, then) {
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

/// The steering program's counters by name: now, and at the previous look.
fn program_counters(c: Counters, then: Option<Counters>) -> [(&'static str, u64, Option<u64>); 6] {
    [
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
    ]
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

/// `ofi-xdp status`'s options.
#[derive(clap::Args)]
pub struct Opts {
    #[command(flatten)]
    scope: Scope,
    /// Refresh every SECS seconds (1 when not given, at least 0.1), with rates per second
    #[arg(long, value_name = "SECS", num_args = 0..=1, default_missing_value = "1",
          value_parser = watch_period)]
    watch: Option<f64>,
    /// With --watch: stop after N screens
    #[arg(long, value_name = "N", requires = "watch")]
    count: Option<u64>,
    /// Print one JSON document (schema: tools/cli/README.md) instead of text; with --watch,
    /// one document per line
    #[arg(long)]
    json: bool,
}

fn watch_period(v: &str) -> Result<f64, String> {
    match v.parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs >= 0.1 => Ok(secs),
        _ => Err("a period of at least 0.1 s".into()),
    }
}

/// `ofi-xdp status [--watch [SECS]] [--count N] [--json] [--netns NAME] [--dev IFNAME]
/// [--stats-dir DIR]`
pub fn main(o: &Opts) -> Result<(), String> {
    let (scope, watch, count) = (&o.scope, o.watch, o.count);
    scope.enter()?;
    let Some(period) = watch else {
        let snap = snapshot(scope)?;
        if o.json {
            println!("{}", json(&snap, None));
        } else {
            print!("{}", render(&snap, None));
        }
        return Ok(());
    };
    let tty = std::io::stdout().is_terminal();
    let mut previous: Option<Snapshot> = None;
    let mut shown = 0u64;
    loop {
        let snap = snapshot(scope)?;
        let before = previous.as_ref().map(|p| Before {
            snap: p,
            secs: snap.taken.duration_since(p.taken).as_secs_f64(),
        });
        let stamp = host::utc(std::time::SystemTime::now());
        if o.json {
            println!("{}", json(&snap, before.as_ref()));
        } else if tty {
            let body = render(&snap, before.as_ref());
            // Clear the screen and home the cursor (ECMA-48 ED and CUP).
            print!("\x1b[H\x1b[2J{stamp} (every {period} s; Ctrl-C ends)\n\n{body}");
        } else {
            let body = render(&snap, before.as_ref());
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

/// `status --json`: the snapshot as one JSON document, in the schema of
/// tools/cli/README.md (`ofi-xdp-status` version 1).
fn json(snap: &Snapshot, before: Option<&Before<'_>>) -> serde_json::Value {
    use serde_json::{Value, json};
    let rate = |now: u64, then: Option<u64>| -> Value {
        match (before, then) {
            (Some(b), Some(t)) if b.secs > 0.0 => json!(now.saturating_sub(t) as f64 / b.secs),
            _ => Value::Null,
        }
    };
    let unix = |t: std::time::SystemTime| {
        t.duration_since(std::time::UNIX_EPOCH)
            .map_or(Value::Null, |d| json!(d.as_secs()))
    };
    let process = |pid: u32| json!({ "pid": pid, "command": host::comm(pid) });
    let endpoint = |e: &EndpointStats| {
        let id = &e.identity;
        let mut counters = serde_json::Map::new();
        for (name, value, gauge) in &e.values {
            let then = before.and_then(|b| b.endpoint_value(&e.file, name));
            let r = if *gauge {
                Value::Null
            } else {
                rate(*value, then)
            };
            counters.insert(
                name.clone(),
                json!({ "value": value, "gauge": gauge, "rate_per_s": r }),
            );
        }
        json!({
            "type": id.endpoint,
            "address": id.address,
            "path": match id.path {
                DataPath::AfXdp => "af_xdp",
                DataPath::KernelUdp => "kernel_udp",
            },
            "queue": id.queue,
            "slot": id.slot,
            "pid": e.pid,
            "alive": e.alive(),
            "file": e.file.display().to_string(),
            "counters": counters,
        })
    };
    let program = |iface: &InterfaceXdp, a: &Attached| {
        let p = a.program.as_ref();
        let mut counters = serde_json::Map::new();
        if let Some(c) = a.counters {
            let then = before.and_then(|b| b.counters(iface.ifindex, a.prog_id));
            for (name, now, then) in program_counters(c, then) {
                counters.insert(
                    name.to_owned(),
                    json!({ "value": now, "rate_per_s": rate(now, then) }),
                );
            }
        }
        json!({
            "hook": a.hook.to_string(),
            "id": a.prog_id,
            "name": p.map(|p| p.name.clone()),
            "ours": p.is_some_and(|p| p.ours),
            "tag": p.map(|p| format!("{:016x}", p.tag)),
            "attached_through": if a.link.is_some() { "bpf_link" } else { "netlink" },
            "link_id": a.link.map(|l| l.id),
            "holders": a.holders.iter().map(|pid| process(*pid)).collect::<Vec<_>>(),
            "loaded_unix": p.and_then(|p| p.loaded_at).map_or(Value::Null, unix),
            "uid": p.and_then(|p| p.uid),
            "maps_error": a.error,
            "ports": a.ports.iter().map(|(port, slot, queue)| {
                json!({ "port": port, "slot": slot, "queue": queue })
            }).collect::<Vec<_>>(),
            "counters": counters,
            "frames_by_rx_queue": a.queue_counts,
            "fault_one_in": a.fault_one_in,
        })
    };
    let interfaces: Vec<Value> = snap
        .interfaces
        .iter()
        .map(|(iface, attached)| {
            let here = |ifindex: u32| ifindex == iface.ifindex;
            json!({
                "name": iface.name,
                "ifindex": iface.ifindex,
                "programs": attached.iter().map(|a| program(iface, a)).collect::<Vec<_>>(),
                "endpoints": snap.endpoints.iter()
                    .filter(|e| here(e.identity.ifindex))
                    .map(endpoint)
                    .collect::<Vec<_>>(),
                "ntuple_rules": snap.rules.iter().filter(|r| here(r.ifindex)).map(|r| json!({
                    "rule": r.rule.to_string(),
                    "location": r.location,
                    "pid": r.pid,
                    "alive": r.alive(),
                })).collect::<Vec<_>>(),
                "af_xdp_groups": snap.groups.iter().filter(|g| here(g.0)).map(|(_, queue, g)| {
                    match g {
                        Ok(g) => json!({
                            "queue": queue,
                            "members": g.members.iter()
                                .map(|(pid, alive)| json!({ "pid": pid, "alive": alive }))
                                .collect::<Vec<_>>(),
                            "capacity": g.capacity,
                            "died": g.reclaimed,
                            "stranded_rx": g.stranded_rx,
                            "rx_pooled": g.rx_pooled,
                            "error": null,
                        }),
                        Err(e) => json!({ "queue": queue, "error": e }),
                    }
                }).collect::<Vec<_>>(),
            })
        })
        .collect();
    let unlisted: Vec<Value> = snap.unlisted_endpoints().map(endpoint).collect();
    json!({
        "schema": "ofi-xdp-status",
        "version": 1,
        "time_unix": unix(std::time::SystemTime::now()),
        "interval_s": before.map(|b| b.secs),
        "interfaces": interfaces,
        "endpoints_on_other_interfaces": unlisted,
        "stats_files_elsewhere": snap.elsewhere,
        "unreadable_stats_files": snap.stats_errors,
    })
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
