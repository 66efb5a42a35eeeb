//! `ofi-xdp local-bench`: two processes on one host (one test namespace, one address, two
//! ports), Debian's `fi_pingpong` over `xdp` — whose endpoints then talk through shared
//! memory — beside libfabric's own `shm` provider, `tcp`, and `xdp` with its shared-memory
//! path off (FI_XDP_LOCAL_SHM=0: the kernel UDP socket it used before), `xdp` without
//! its single copy of large messages (FI_XDP_LOCAL_CMA=0: every byte through the rings), and
//! `xdp` whose receiver copies a large message alone (FI_XDP_LOCAL_SHARED_PULL=0: the sender
//! does not copy its share), and `xdp` without direct messages (FI_XDP_LOCAL_DIRECT=0: small
//! messages through the protocol's datagrams in the rings), and `xdp+auth` (a job key:
//! authenticated datagrams, direct messages once the handshake verified).
//! 64 B latency and 1 MiB bandwidth, in interleaved rounds; ratios within a round, as
//! `provider-bench`. Beside them, what a progress call that finds nothing costs each path
//! (`idle_read.c`: CPU time per empty `fi_cq_read`, `xdp` without its sched_yield after
//! many empty reads, FI_XDP_YIELD=0, which would measure the scheduler instead).

use std::collections::BTreeMap;
use std::time::Duration;

use ofi_xdp_testhosts::HostPair;

use ofi_xdp_testhosts::Host;

use crate::c_program::CProgram;
use crate::compare::{AUTHENTICATED, BENCH_KEY};
use crate::fi_pingpong::{self, Row, Run};
use crate::stats::{ratios, spread};

/// One path measured: its name, the provider, extra environment.
type Path = (
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
);

/// The paths measured, in the order of each round.
const PATHS: [Path; 8] = [
    ("xdp", "xdp", &[]),
    ("shm", "shm", &[]),
    ("tcp", "tcp", &[]),
    ("xdp kernel socket", "xdp", &[("FI_XDP_LOCAL_SHM", "0")]),
    ("xdp rings only", "xdp", &[("FI_XDP_LOCAL_CMA", "0")]),
    (
        "xdp one copier",
        "xdp",
        &[("FI_XDP_LOCAL_SHARED_PULL", "0")],
    ),
    ("xdp no direct", "xdp", &[("FI_XDP_LOCAL_DIRECT", "0")]),
    // With a job key: authenticated datagrams, direct messages once the
    // handshake verified (PROTOCOL.md §11.8).
    (AUTHENTICATED, "xdp", &[("FI_XDP_AUTH_KEY", BENCH_KEY)]),
];

fn pingpong(provider: &str, sizes: &str, iterations: u32) -> Run {
    Run {
        provider: provider.to_owned(),
        endpoint: "rdm".to_owned(),
        mode: "tagged".to_owned(),
        sizes: sizes.to_owned(),
        iterations: Some(iterations),
        check: false,
        timeout: Duration::from_secs(300),
    }
}

/// The idle-read program, compiled at run time.
const IDLE_READ: &str = include_str!("idle_read.c");
/// Empty reads per timed run (the program times five and keeps the best).
const IDLE_READS: &str = "500000";

/// Nanoseconds of CPU per empty `fi_cq_read` over `provider` on `host`.
fn idle_read(
    prog: &CProgram,
    host: &Host,
    provider: &str,
    env: &[(&str, &str)],
) -> Result<f64, String> {
    let out = host
        .command(&prog.exe)
        .args([provider, &host.ipv4().to_string(), "47600", IDLE_READS])
        .env("FI_XDP_YIELD", "0")
        .envs(env.iter().copied())
        .output()
        .map_err(|e| format!("idle_read: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("ns_per_read ")?.trim().parse().ok())
        .ok_or_else(|| {
            format!(
                "idle_read -p {provider}: no figure ({})",
                String::from_utf8_lossy(&out.stderr).trim()
            )
        })
}

/// `ofi-xdp local-bench`'s options.
#[derive(clap::Args)]
pub struct Opts {
    /// Rounds, each measuring every path once
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Iterations of the 64 B ping-pong
    #[arg(long, default_value_t = 10_000)]
    iters: u32,
    /// Iterations of the bandwidth ping-pong
    #[arg(long, default_value_t = 200)]
    big_iters: u32,
    /// The bandwidth size: 1 MiB, or e.g. either side of the eager limit (65536 / 65537)
    #[arg(long, default_value_t = 1 << 20)]
    big_size: usize,
    /// The test host's MTU
    #[arg(long, default_value_t = 9000)]
    mtu: u32,
}

/// `ofi-xdp local-bench [--rounds 3] [--iters 10000] [--big-iters 200] [--big-size 1048576]
/// [--mtu 9000]`.
pub fn main(o: &Opts) -> Result<(), String> {
    let (rounds, iterations, big_iterations) = (o.rounds, o.iters, o.big_iters);
    let big_size = o.big_size;
    let big_label = if big_size == 1 << 20 {
        "1 MiB".to_owned()
    } else {
        format!("{big_size} B")
    };
    let mtu = o.mtu;
    if rounds == 0 {
        return Err("--rounds must be at least 1".into());
    }
    if !fi_pingpong::available() {
        return Err("fi_pingpong not found: run `cargo xtask deps` (package libfabric-bin)".into());
    }
    let idle_prog = CProgram::build("idle_read", IDLE_READ)?;
    let pair = HostPair::with_mtu(mtu).map_err(|e| format!("creating test hosts: {e}"))?;
    let host = &pair.a;
    let measure = |provider: &str, env: &[(&str, &str)], size: &str, iters| {
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let done = fi_pingpong::run_between(host, host, &pingpong(provider, size, iters), &env)?;
        done.rows
            .into_iter()
            .next()
            .ok_or_else(|| format!("fi_pingpong -p {provider} printed no row"))
    };
    let mut small: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut big: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut idle: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for round in 1..=rounds {
        eprintln!("local-bench: round {round} of {rounds}");
        for (name, provider, env) in PATHS {
            let r: Row = measure(provider, env, "64", iterations)?;
            small.entry(name).or_default().push(r.usec_per_xfer);
            let r: Row = measure(provider, env, &big_size.to_string(), big_iterations)?;
            big.entry(name).or_default().push(r.mb_per_sec);
            idle.entry(name)
                .or_default()
                .push(idle_read(&idle_prog, host, provider, env)?);
        }
    }
    let s = |p: &str| small.get(p).cloned().unwrap_or_default();
    let b = |p: &str| big.get(p).cloned().unwrap_or_default();
    let i = |p: &str| idle.get(p).cloned().unwrap_or_default();
    println!(
        "\nfi_pingpong -e rdm -m tagged, both processes in one test host ({host}, MTU {mtu}); \
         {rounds} rounds: median [min - max]"
    );
    println!(
        "{:<20} {:>26} {:>26} {:>26}",
        "path",
        "64 B us/xfer",
        format!("{big_label} MB/s"),
        "empty fi_cq_read ns"
    );
    for (name, _, _) in PATHS {
        println!(
            "{name:<20} {:>26} {:>26} {:>26}",
            spread(&s(name)),
            spread(&b(name)),
            spread(&i(name))
        );
    }
    println!("\nratios within each round, median [min - max] (targets in parentheses)");
    // (bandwidth rather than latency, numerator, denominator, target)
    let rows: [(bool, &str, &str, &str); 14] = [
        (false, "xdp", "shm", "(target <= 1.50)"),
        (true, "xdp", "shm", "(target >= 1.00)"),
        (false, "xdp", "tcp", ""),
        (true, "xdp", "tcp", ""),
        (false, "xdp", "xdp kernel socket", ""),
        (true, "xdp", "xdp kernel socket", ""),
        (true, "xdp", "xdp rings only", ""),
        (true, "xdp rings only", "shm", ""),
        (true, "xdp", "xdp one copier", ""),
        (true, "xdp one copier", "shm", ""),
        (false, "xdp", "xdp no direct", ""),
        (false, "xdp no direct", "shm", ""),
        (false, AUTHENTICATED, "xdp", "(target <= 1.15)"),
        (true, AUTHENTICATED, "xdp", "(target >= 0.80)"),
    ];
    for (bandwidth, num, den, target) in rows {
        let (what, r) = if bandwidth {
            (format!("{big_label} bandwidth"), ratios(&b(num), &b(den)))
        } else {
            ("64 B latency".to_owned(), ratios(&s(num), &s(den)))
        };
        let label = format!("{what} {num} / {den}");
        let line = format!("  {label:<38} {}  {target}", spread(&r));
        println!("{}", line.trim_end());
    }
    let label = "empty fi_cq_read xdp / shm";
    println!("  {label:<38} {}", spread(&ratios(&i("xdp"), &i("shm"))));
    Ok(())
}
