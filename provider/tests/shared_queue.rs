//! Several processes of one user on one interface queue (ranks sharing a
//! node on a NIC without flow steering): each endpoint joins the queue's
//! AF_XDP group (`XDP_SHARED_UMEM`) instead of falling back to the kernel
//! UDP path. Pairs of `tests/c/pingpong.c` run at once, the servers in
//! host `b`, the clients in host `a`, so every host has several members on
//! its one queue; each endpoint's closing line (its path counts) says what
//! carried its datagrams.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::path::PathBuf;
use std::process::{Child, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use ofi_xdp_testhosts::skip::skip;
use ofi_xdp_testhosts::{Host, HostPair};

mod common;
use common::{compile, wait_running, work_dir};

/// Anti-hang bound for one pair.
const LIMIT: Duration = Duration::from_secs(60);

/// One ping-pong pair in flight.
struct Pingpong {
    name: String,
    server: Child,
    client: Child,
}

fn rendezvous(pair: &HostPair) -> PathBuf {
    let dir = work_dir().join(format!("rv-shared-{}", pair.a.netns()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs the program as user nobody, with the capabilities an AF_XDP
/// endpoint needs (as root's processes have them): another user on the
/// same host.
const AS_NOBODY: [&str; 6] = [
    "--reuid=65534",
    "--regid=65534",
    "--clear-groups",
    "--inh-caps=+net_raw,+net_admin,+bpf,+sys_admin,+ipc_lock",
    "--ambient-caps=+net_raw,+net_admin,+bpf,+sys_admin,+ipc_lock",
    "--",
];

fn spawn(
    host: &Host,
    peer: &Host,
    role: &str,
    (rv, name, ms): (&str, &str, u32),
    env: &[(&str, &str)],
) -> Child {
    spawn_as(host, peer, role, (rv, name, ms), env, false)
}

/// As [`spawn`]; `nobody`: as another user ([`AS_NOBODY`]).
fn spawn_as(
    host: &Host,
    peer: &Host,
    role: &str,
    (rv, name, ms): (&str, &str, u32),
    env: &[(&str, &str)],
    nobody: bool,
) -> Child {
    let mut cmd = if nobody {
        let mut c = host.command("setpriv");
        c.args(AS_NOBODY).arg(compile("pingpong"));
        c
    } else {
        host.command(compile("pingpong"))
    };
    cmd.arg(host.ifname())
        .arg(host.ipv4().to_string())
        .arg(peer.ipv4().to_string())
        .args([role, rv, name, &ms.to_string()])
        .env("FI_PROVIDER_PATH", work_dir())
        .env("FI_LOG_LEVEL", "info")
        .env_remove("FI_PROVIDER")
        .env_remove("FI_XDP_IFACE")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Starts pair `name`: its client pings for `ms` milliseconds.
fn start(pair: &HostPair, name: &str, ms: u32) -> Pingpong {
    start_with(pair, name, ms, &[])
}

/// As [`start`], both processes with `env`.
fn start_with(pair: &HostPair, name: &str, ms: u32, env: &[(&str, &str)]) -> Pingpong {
    let rv = rendezvous(pair).to_string_lossy().into_owned();
    Pingpong {
        name: name.to_owned(),
        server: spawn(&pair.b, &pair.a, "server", (&rv, name, 0), env),
        client: spawn(&pair.a, &pair.b, "client", (&rv, name, ms), env),
    }
}

/// Waits until both endpoints of pair `name` are enabled (in their queues'
/// groups) and have published their addresses, at most [`LIMIT`]: on a
/// loaded machine processes start seconds apart, so a test that needs an
/// endpoint to be in its group by some point waits for it instead of
/// sleeping.
fn wait_open(pair: &HostPair, name: &str) {
    let dir = rendezvous(pair);
    let t0 = std::time::Instant::now();
    while !["server", "client"]
        .iter()
        .all(|role| dir.join(format!("{name}.{role}.addr")).exists())
    {
        assert!(
            t0.elapsed() < LIMIT,
            "pair {name} never opened its endpoints"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits for `child` at most [`LIMIT`] (then kills it, by pid).
fn wait(child: Child) -> Output {
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(LIMIT) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            // SAFETY: killing the process we spawned, by its pid.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("process {pid} still running after {LIMIT:?}: a hang");
        }
    }
}

/// What one endpoint's closing line says.
#[derive(Debug, PartialEq, Eq)]
struct Paths {
    af_xdp_rx: u64,
    af_xdp_tx: u64,
    kernel_remote: u64,
}

/// The endpoint closing lines of `log` ("port P closed: R datagrams
/// received and T sent through AF_XDP (...), ... (L from this host, K from
/// other hosts)"); a kernel-path endpoint's line has no AF_XDP figures.
fn closing_lines(log: &str) -> Vec<Result<Paths, String>> {
    log.lines()
        .filter(|l| l.contains(": port ") && l.contains(" closed: "))
        .map(|l| {
            let text = l.split(" closed: ").nth(1).unwrap_or("");
            let num = |s: &str| s.trim().parse::<u64>().ok();
            let mut words = text.split(' ');
            let rx = words.next().and_then(num);
            let tx = text
                .split(" and ")
                .nth(1)
                .and_then(|t| t.split(' ').next())
                .and_then(num);
            let remote = l
                .find(" from other hosts")
                .and_then(|at| l[..at].rsplit(", ").next())
                .and_then(num);
            match (text.contains("through AF_XDP"), rx, tx, remote) {
                (true, Some(af_xdp_rx), Some(af_xdp_tx), Some(kernel_remote)) => Ok(Paths {
                    af_xdp_rx,
                    af_xdp_tx,
                    kernel_remote,
                }),
                _ => Err(l.to_owned()),
            }
        })
        .collect()
}

/// Both processes of `p` passed, and each endpoint's inter-host datagrams
/// went through AF_XDP; the client's one-way latency (µs) and both logs.
fn finish(p: Pingpong) -> (f64, String) {
    finish_on(p, true)
}

/// As [`finish`]; the path checked only when `af_xdp`.
fn finish_on(p: Pingpong, af_xdp: bool) -> (f64, String) {
    let client = wait(p.client);
    let server = wait(p.server);
    let text = |o: &Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    let (c, s) = (text(&client), text(&server));
    let name = &p.name;
    assert!(client.status.success(), "client {name}:\n{c}\nserver:\n{s}");
    assert!(server.status.success(), "server {name}:\n{s}\nclient:\n{c}");
    for (who, log) in [("client", &c), ("server", &s)]
        .into_iter()
        .filter(|_| af_xdp)
    {
        for l in log
            .lines()
            .filter(|l| l.contains("AF_XDP group") || l.contains("died"))
        {
            println!("{who} {name}: {}", l.rsplit("> ").next().unwrap_or(l));
        }
        let lines = closing_lines(log);
        assert_eq!(lines.len(), 1, "{who} {name}: one endpoint:\n{log}");
        match &lines[0] {
            Ok(paths) => {
                assert!(
                    paths.af_xdp_rx > 0 && paths.af_xdp_tx > 0 && paths.kernel_remote == 0,
                    "{who} {name}: {paths:?}\n{log}"
                );
            }
            Err(line) => panic!("{who} {name} not on AF_XDP: {line}\n{log}"),
        }
    }
    let latency = c
        .lines()
        .find_map(|l| {
            let rest = l.strip_prefix(&format!("pingpong {name}: "))?;
            rest.split(", ").nth(1)?.split(' ').next()?.parse().ok()
        })
        .unwrap_or_else(|| panic!("client {name} printed no figures:\n{c}"));
    (latency, c + &s)
}

/// The UDP ports the steering program on `host`'s interface steers.
fn steered_ports(host: &Host) -> Vec<(u16, u32)> {
    use ofi_xdp_bpf::inspect;
    host.run(|| {
        let ifindex = ofi_xdp_link::ethtool::ifindex(host.ifname()).unwrap();
        let iface = inspect::interfaces()
            .unwrap()
            .into_iter()
            .find(|i| i.ifindex == ifindex)
            .unwrap();
        let (_, id) = iface.programs[0];
        let program = inspect::program(id).unwrap().unwrap();
        inspect::SteeringMaps::open(&program)
            .unwrap()
            .ports()
            .unwrap()
    })
}

/// Whether this kernel lets processes join a queue's group; the tests of
/// sharing skip themselves on older ones (the fallback to the kernel path
/// there is `c_suite`'s `c_data_rdm_two_processes_one_interface`).
fn kernel_shares() -> bool {
    let ok = ofi_xdp_link::group::kernel_lets_members_join();
    if !ok {
        skip("this kernel cannot share a queue's rings between processes (Linux 6.4+)");
    }
    ok
}

fn test_pair() -> HostPair {
    let pair = HostPair::new().expect("test hosts");
    wait_running(&pair);
    pair
}

/// Four pairs at once: four members in each host's queue group, every
/// endpoint's traffic to the other host through AF_XDP.
#[test]
fn four_processes_per_host_share_the_queue() {
    if !kernel_shares() {
        return;
    }
    let pair = test_pair();
    let pairs: Vec<Pingpong> = (0..4)
        .map(|i| start(&pair, &format!("p{i}"), 500))
        .collect();
    for p in pairs {
        finish(p);
    }
}

/// More processes on a queue than a group held before its size could be
/// chosen (8): with `FI_XDP_QUEUE_MEMBERS=10` ten pairs at once, every
/// endpoint's traffic to the other host through AF_XDP.
#[test]
fn ten_processes_per_host_share_the_queue_in_a_larger_group() {
    if !kernel_shares() {
        return;
    }
    let pair = test_pair();
    // All twenty endpoints open before the first ping, so that the pairs
    // overlap however far apart their processes start.
    let env = [("FI_XDP_QUEUE_MEMBERS", "10"), ("PINGPONG_ALL_OPEN", "20")];
    let pairs: Vec<Pingpong> = (0..10)
        .map(|i| start_with(&pair, &format!("g{i}"), 300, &env))
        .collect();
    let logs: Vec<String> = pairs.into_iter().map(|p| finish(p).1).collect();
    let created = logs
        .iter()
        .flat_map(|l| l.lines())
        .filter(|l| l.contains("AF_XDP group of 10 created"))
        .count();
    assert_eq!(created, 2, "one group of ten per host");
}

/// A member SIGKILLed mid-run (one process on each host) hangs nobody: the
/// other pairs finish on AF_XDP, and a new pair joins the groups the dead
/// were members of while one of the others still runs.
#[test]
fn a_killed_member_hangs_nobody_and_a_newcomer_joins() {
    if !kernel_shares() {
        return;
    }
    let pair = test_pair();
    let mut victim = start(&pair, "victim", 10_000);
    let short = start(&pair, "short", 1500);
    // Long enough to outlive the rest on a loaded machine: the newcomer
    // must find it still a member to join through.
    let mut long = start(&pair, "long", 20_000);
    // Every one of them a member before the victim dies (their processes
    // may start seconds apart), and the victim pinging for a while.
    for name in ["victim", "short", "long"] {
        wait_open(&pair, name);
    }
    std::thread::sleep(Duration::from_millis(300));
    victim.server.kill().unwrap();
    victim.client.kill().unwrap();
    let _ = victim.server.wait();
    let _ = victim.client.wait();
    finish(short);
    assert!(
        long.client.try_wait().unwrap().is_none(),
        "the long pair ended before the newcomer started (a machine this slow \
         needs a longer pair)"
    );
    let (_, logs) = finish(start(&pair, "newcomer", 300));
    assert_eq!(
        logs.matches("joined the AF_XDP group").count(),
        2,
        "the newcomer did not join on both hosts:\n{logs}"
    );
    // The victims' ports were unsteered when their entries were taken
    // over or tidied; the short pair's and the newcomer's when they closed:
    // only the long pair's port is left on each host.
    for h in [&pair.a, &pair.b] {
        assert_eq!(steered_ports(h).len(), 1, "{h:?}: {:?}", steered_ports(h));
    }
    finish(long);
}

/// Another user's endpoints on the queues our user's groups hold neither
/// join nor disturb them: they run on the kernel UDP path and say why,
/// while our pair stays on AF_XDP.
#[test]
fn another_users_endpoints_get_the_kernel_path() {
    if !kernel_shares() {
        return;
    }
    use std::os::unix::fs::PermissionsExt as _;
    let pair = test_pair();
    // Long enough to outlive theirs on a loaded machine, and holding the
    // queues before theirs start.
    let mut ours = start(&pair, "ours", 20_000);
    wait_open(&pair, "ours");
    let dir = rendezvous(&pair);
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let rv = dir.to_string_lossy().into_owned();
    let theirs = Pingpong {
        name: "theirs".to_owned(),
        server: spawn_as(&pair.b, &pair.a, "server", (&rv, "theirs", 0), &[], true),
        client: spawn_as(&pair.a, &pair.b, "client", (&rv, "theirs", 300), &[], true),
    };
    let (_, logs) = finish_on(theirs, false);
    let closing: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains(": port ") && l.contains(" closed: "))
        .collect();
    assert_eq!(closing.len(), 2, "{logs}");
    assert!(
        closing.iter().all(|l| l.contains("kernel UDP path only")),
        "{logs}"
    );
    assert_eq!(
        logs.matches("was loaded by user 0, not by us (65534)")
            .count(),
        2,
        "no reason given:\n{logs}"
    );
    assert!(
        ours.client.try_wait().unwrap().is_none(),
        "our pair ended before theirs (a machine this slow needs a longer pair)"
    );
    finish(ours);
}

/// Ranks of a user other than root (with the capabilities AF_XDP needs,
/// as a launcher would grant them) share the queue as well: the program
/// their first process attached is adopted and its UMEM joined by the
/// others of the same user.
#[test]
fn another_users_ranks_share_among_themselves() {
    if !kernel_shares() {
        return;
    }
    use std::os::unix::fs::PermissionsExt as _;
    let pair = test_pair();
    let dir = rendezvous(&pair);
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let rv = dir.to_string_lossy().into_owned();
    // Both pairs open before either pings: they overlap however far apart
    // their processes start.
    let env = [("PINGPONG_ALL_OPEN", "4")];
    let start_nobody = |name: &str| Pingpong {
        name: name.to_owned(),
        server: spawn_as(&pair.b, &pair.a, "server", (&rv, name, 0), &env, true),
        client: spawn_as(&pair.a, &pair.b, "client", (&rv, name, 800), &env, true),
    };
    let pairs = [start_nobody("n0"), start_nobody("n1")];
    let logs: String = pairs.into_iter().map(|p| finish(p).1).collect();
    assert_eq!(
        logs.matches("joined the AF_XDP group").count(),
        2,
        "one process per host should have joined:\n{logs}"
    );
}

/// 64-byte one-way latency of one pair alone, then of four pairs at once
/// (each rank with a partner on the other host) sharing each host's queue,
/// then of the same four pairs on the kernel UDP path (what all but the
/// first rank of a host used to get), in one run: figures for
/// docs/performance.md. With fewer cores than the eight busy-polling
/// processes, the four-pair figures mostly measure CPU sharing.
#[test]
#[ignore = "measurement: run with --ignored"]
fn latency_one_pair_vs_four() {
    if !kernel_shares() {
        return;
    }
    let pair = test_pair();
    let (one, _) = finish(start(&pair, "alone", 2000));
    // The group's own cost, without CPU sharing: one pair among three idle
    // members per host (endpoints enabled, their processes asleep waiting
    // for a partner that never comes).
    let rv = rendezvous(&pair).to_string_lossy().into_owned();
    let mut idle: Vec<Child> = (0..3)
        .flat_map(|i| {
            let (a, b) = (format!("idle-a{i}"), format!("idle-b{i}"));
            [
                spawn(&pair.a, &pair.b, "client", (&rv, &a, 0), &[]),
                spawn(&pair.b, &pair.a, "server", (&rv, &b, 0), &[]),
            ]
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    let (among_idle, logs) = finish(start(&pair, "among-idle", 2000));
    assert_eq!(logs.matches("joined the AF_XDP group").count(), 2, "{logs}");
    for c in &mut idle {
        c.kill().unwrap();
        let _ = c.wait();
    }
    let four = |tag: &str, env: &[(&str, &str)], af_xdp: bool| -> Vec<f64> {
        let pairs: Vec<Pingpong> = (0..4)
            .map(|i| start_with(&pair, &format!("{tag}{i}"), 2000, env))
            .collect();
        pairs.into_iter().map(|p| finish_on(p, af_xdp).0).collect()
    };
    let shared = four("q", &[], true);
    let kernel = four("k", &[("FI_XDP_KERNEL_PATH", "1")], false);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "64 B one-way latency ({cores} cores): 1 pair {one:.2} us; 1 pair among 3 idle group \
         members per host {among_idle:.2} us ({:.2} x); 4 pairs sharing the AF_XDP \
         queues {shared:.1?} us (mean {:.1}, {:.1} x one pair); 4 pairs on the kernel UDP path \
         {kernel:.1?} us (mean {:.1}, {:.1} x one pair)",
        among_idle / one,
        mean(&shared),
        mean(&shared) / one,
        mean(&kernel),
        mean(&kernel) / one
    );
}
