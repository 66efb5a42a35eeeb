//! `ofi-xdp demo` and `ofi-xdp provider-bench`: Debian's `fi_pingpong` over the `xdp` provider
//! beside libfabric's own `tcp` (and `udp;ofi_rxd`) providers, between the same two test hosts,
//! in one run. The machines are shared and noisy, so the benchmark prints ratios next to the
//! absolute figures: ratios measured in one run are what the targets compare.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use ofi_xdp_testhosts::HostPair;

use crate::fi_pingpong::{self, Row, Run};
use crate::pingpong::Measured;
use crate::stats::{ratios, spread};

/// The providers the demo shows side by side: ours first, the baseline second.
const DEMO_PROVIDERS: [&str; 2] = ["xdp", "tcp"];

/// MTU of the benchmark's veth pair, for every provider alike: jumbo frames, as HPC Ethernet
/// fabrics run them. Our RDM datagrams then span three 4 KiB UMEM chunks through AF_XDP
/// multi-buffer (Linux 6.6+; an older kernel falls back to one chunk, ≈ 3.8 KB, per datagram).
/// The bench attaches generic XDP (native XDP on veth refuses MTUs above ~3506 without a
/// multi-buffer program). `tcp` gets the same MTU, though over veth it moves 64 KiB TSO segments
/// whatever the MTU.
const BENCH_MTU: u32 = 9000;

/// Checks that `fi_pingpong` exists and that `FI_PROVIDER_PATH` holds our provider.
fn preflight() -> Result<(), String> {
    if !fi_pingpong::available() {
        return Err("fi_pingpong not found: run `cargo xtask deps` (package libfabric-bin)".into());
    }
    let dir = std::env::var_os("FI_PROVIDER_PATH")
        .map(PathBuf::from)
        .ok_or(
            "FI_PROVIDER_PATH is not set: run through `cargo xtask demo`, or set it to the \
         directory holding libxdp-fi.so (`cargo xtask build` makes target/libfabric/)",
        )?;
    if !dir.join("libxdp-fi.so").is_file() {
        return Err(format!(
            "{} has no libxdp-fi.so: run `cargo xtask build`",
            dir.display()
        ));
    }
    Ok(())
}

fn pingpong(provider: &str, sizes: &str, iterations: u32, check: bool) -> Run {
    Run {
        provider: provider.to_owned(),
        endpoint: "rdm".to_owned(),
        mode: "tagged".to_owned(),
        sizes: sizes.to_owned(),
        iterations: Some(iterations),
        check,
        timeout: Duration::from_secs(300),
    }
}

/// `ofi-xdp demo`'s options.
#[derive(clap::Args)]
pub struct DemoOpts {
    /// fi_pingpong's -S: a size in bytes, or `all`
    #[arg(long, default_value = "all")]
    sizes: String,
    /// fi_pingpong's -I: iterations per size
    #[arg(long, default_value_t = 100)]
    iters: u32,
}

/// `ofi-xdp demo [--sizes all] [--iters 100]`: fi_pingpong with data checking over `xdp` and
/// over `tcp`, printed side by side.
pub fn demo(o: &DemoOpts) -> Result<(), String> {
    let sizes = o.sizes.clone();
    let iterations = o.iters;
    preflight()?;
    // The benchmark's hosts: jumbo frames for every provider.
    let pair = HostPair::with_mtu(BENCH_MTU).map_err(|e| format!("creating test hosts: {e}"))?;
    println!("test hosts (MTU {BENCH_MTU}): {} <-> {}", pair.a, pair.b);
    let mut tables = Vec::new();
    let mut failures = Vec::new();
    for provider in DEMO_PROVIDERS {
        println!("fi_pingpong -p {provider} -e rdm -m tagged -c -S {sizes} -I {iterations} …");
        match fi_pingpong::run(&pair, &pingpong(provider, &sizes, iterations, true), &[]) {
            Ok(rows) => tables.push((provider, rows)),
            Err(e) => {
                eprintln!("{e}");
                failures.push(provider);
                tables.push((provider, Vec::new()));
            }
        }
    }
    print_side_by_side(&tables);
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!("fi_pingpong failed over: {}", failures.join(", ")))
    }
}

/// One line per size: latency and bandwidth of each provider.
fn print_side_by_side(tables: &[(&str, Vec<Row>)]) {
    let mut sizes: Vec<u64> = tables
        .iter()
        .flat_map(|(_, rows)| rows.iter().map(|r| r.bytes))
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    print!("\n{:>10}", "bytes");
    for (provider, _) in tables {
        print!(
            " {:>14} {:>12}",
            format!("{provider} us/xfer"),
            format!("{provider} MB/s")
        );
    }
    println!();
    for size in sizes {
        print!("{size:>10}");
        for (_, rows) in tables {
            match rows.iter().find(|r| r.bytes == size) {
                Some(r) => print!(" {:>14.2} {:>12.2}", r.usec_per_xfer, r.mb_per_sec),
                None => print!(" {:>14} {:>12}", "-", "-"),
            }
        }
        println!();
    }
}

/// `ofi-xdp provider-bench [--iters 10000] [--big-iters 200] [--rounds 5] [--csv FILE]`: the
/// figures the provider's performance targets compare — 64-byte latency of xdp against tcp and
/// against the raw link floor,
/// 1 MiB bandwidth of xdp against tcp — all measured in one run between the same test hosts.
///
/// `ofi-xdp provider-bench`'s options.
#[derive(clap::Args)]
pub struct BenchOpts {
    /// Rounds, each measuring every path once
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Iterations of the 64 B ping-pong
    #[arg(long, default_value_t = 10_000)]
    iters: u32,
    /// Iterations of the 1 MiB ping-pong
    #[arg(long, default_value_t = 200)]
    big_iters: u32,
    /// Also write every figure of every round to FILE (CSV)
    #[arg(long, value_name = "FILE")]
    csv: Option<String>,
}

/// The machines are shared and a single run swings by ±30 %, so the run is made of `rounds`
/// rounds, each measuring every path once, one after the other (in the order
/// `round_order` gives). Each ratio is taken within a round (both sides measured one after the
/// other, seconds apart) and the median over the rounds is reported, with
/// the range beside it. `--csv FILE` also writes every figure of every round there (one row per
/// path and round), for plotting, and prints the path.
pub fn bench(o: &BenchOpts) -> Result<(), String> {
    let (iterations, big_iterations, rounds) = (o.iters, o.big_iters, o.rounds);
    if rounds == 0 {
        return Err("--rounds must be at least 1".into());
    }
    preflight()?;
    let pair = HostPair::with_mtu(BENCH_MTU).map_err(|e| format!("creating test hosts: {e}"))?;
    let measure = |path: &str, size: &str, iters: u32| -> Result<Row, String> {
        // `xdp+auth`: the xdp provider with a job key (packet authentication).
        let (provider, env) = match path {
            AUTHENTICATED => (
                "xdp",
                vec![("FI_XDP_AUTH_KEY".to_owned(), BENCH_KEY.to_owned())],
            ),
            p => (p, Vec::new()),
        };
        let rows = fi_pingpong::run(&pair, &pingpong(provider, size, iters, false), &env)?;
        rows.into_iter()
            .next()
            .ok_or_else(|| format!("fi_pingpong -p {provider} printed no row"))
    };
    let csv = o.csv.clone();
    let mut r = Rounds::default();
    let start = std::time::Instant::now();
    for round in 1..=rounds {
        eprintln!(
            "provider-bench: round {round} of {rounds} (started {:.0} s in)",
            start.elapsed().as_secs_f64()
        );
        r.floor_us.push(link_floor()?.p50_ns as f64 / 2000.0);
        for p in round_order(&SMALL_PROVIDERS, round) {
            let row = measure(p, "64", iterations)?;
            r.small.entry(p).or_default().push(row.usec_per_xfer);
        }
        for p in round_order(&BIG_PROVIDERS, round) {
            let row = measure(p, "1048576", big_iterations)?;
            r.big_us.entry(p).or_default().push(row.usec_per_xfer);
            r.big_mbs.entry(p).or_default().push(row.mb_per_sec);
        }
    }
    eprintln!(
        "provider-bench: {rounds} rounds in {:.0} s",
        start.elapsed().as_secs_f64()
    );
    r.print(rounds);
    if let Some(path) = csv {
        std::fs::write(&path, r.csv()).map_err(|e| format!("--csv {path}: {e}"))?;
        println!("\nevery figure of every round (CSV, for plotting): {path}");
    }
    Ok(())
}

/// `ofi-xdp latency-path`'s options.
#[derive(clap::Args)]
pub struct LatencyOpts {
    /// Ping-pong iterations
    #[arg(long, default_value_t = 20_000)]
    iters: u32,
    /// Both processes in one test host (the shared-memory path)
    #[arg(long)]
    local: bool,
}

/// `ofi-xdp latency-path [--iters 20000] [--local]`: `fi_pingpong -S 64` over a provider built
/// with the `probes` feature (`cargo xtask bench latency-path` builds one and points
/// FI_PROVIDER_PATH at it), printing each side's mean cycles from a datagram's arrival to each
/// step up to the TX kick of its answer — the part of the one-way latency the raw link does
/// not have. With `--local` both processes run in one test host (the shared-memory path).
pub fn latency_path(o: &LatencyOpts) -> Result<(), String> {
    let (iterations, local) = (o.iters, o.local);
    preflight()?;
    let pair = HostPair::with_mtu(BENCH_MTU).map_err(|e| format!("creating test hosts: {e}"))?;
    let client = if local { &pair.a } else { &pair.b };
    let run = pingpong("xdp", "64", iterations, false);
    let done = fi_pingpong::run_between(&pair.a, client, &run, &[])?;
    if let Some(row) = done.rows.first() {
        let hosts = if local {
            "one test host"
        } else {
            "two test hosts"
        };
        println!(
            "fi_pingpong -p xdp -e rdm -m tagged -S 64 -I {iterations}, {hosts}: {:.2} us/xfer",
            row.usec_per_xfer
        );
    }
    let mut found = false;
    for (side, stderr) in [
        ("server", &done.server_stderr),
        ("client", &done.client_stderr),
    ] {
        let Some(start) = stderr.find(PROBES_HEADER) else {
            continue;
        };
        found = true;
        let table: String = stderr[start..]
            .lines()
            .skip(1)
            .take_while(|l| !l.trim().is_empty())
            .map(|l| format!("{l}\n"))
            .collect();
        println!("\n{side}:\n{table}");
    }
    if found {
        Ok(())
    } else {
        Err(
            "no probe table in fi_pingpong's output: the provider in FI_PROVIDER_PATH was \
             not built with the `probes` feature (use `cargo xtask bench latency-path`)"
                .into(),
        )
    }
}

/// What the provider prints before its probe table (provider/src/xdp/rdm.rs).
const PROBES_HEADER: &str = "ofi-xdp probes (rdm endpoint):";

/// The 64-byte latency runs: ours, the baseline, and the other baseline users compare with;
/// and ours with packet authentication.
const SMALL_PROVIDERS: [&str; 4] = ["xdp", "tcp", "udp;ofi_rxd", AUTHENTICATED];
/// The 1 MiB bandwidth runs: the target compares `xdp` with `tcp`, and with itself
/// authenticated.
const BIG_PROVIDERS: [&str; 3] = ["xdp", "tcp", AUTHENTICATED];

/// The order `paths` are measured in, in round `round` (from 1): `xdp+auth` just before `xdp`
/// and `tcp` just after it, so that the paths each ratio compares run one after the other,
/// seconds apart; reversed in even rounds, so that a drift of the shared machine's load within
/// a round (a neighbour's build starting) counts against each side of a ratio in turn rather
/// than always against the later one.
fn round_order<'a>(paths: &[&'a str], round: usize) -> Vec<&'a str> {
    let mut v: Vec<&str> = paths
        .iter()
        .copied()
        .filter(|p| *p != AUTHENTICATED)
        .collect();
    if paths.contains(&AUTHENTICATED) {
        let at = v.iter().position(|p| *p == "xdp").unwrap_or(0);
        v.insert(at, AUTHENTICATED);
    }
    if round.is_multiple_of(2) {
        v.reverse();
    }
    v
}
/// The path name of the xdp provider with a job key.
pub(crate) const AUTHENTICATED: &str = "xdp+auth";
/// The job key of the authenticated runs (hex, FI_XDP_AUTH_KEY).
pub(crate) const BENCH_KEY: &str = "6a6f62206b657920666f722074686520626563686d61726b";

/// Every figure of every round, in round order.
#[derive(Default)]
struct Rounds {
    floor_us: Vec<f64>,
    small: std::collections::BTreeMap<&'static str, Vec<f64>>,
    big_us: std::collections::BTreeMap<&'static str, Vec<f64>>,
    big_mbs: std::collections::BTreeMap<&'static str, Vec<f64>>,
}

impl Rounds {
    fn series<'a>(m: &'a std::collections::BTreeMap<&'static str, Vec<f64>>, p: &str) -> &'a [f64] {
        m.get(p).map_or(&[], Vec::as_slice)
    }

    /// `round,path,us_per_xfer,mb_per_s`, one row per path and round.
    fn csv(&self) -> String {
        let mut out = String::from("round,path,us_per_xfer,mb_per_s\n");
        let mut row = |round: usize, path: &str, us: f64, mbs: Option<f64>| {
            let mbs = mbs.map(|m| format!("{m:.2}")).unwrap_or_default();
            out.push_str(&format!("{round},{path},{us:.3},{mbs}\n"));
        };
        for (i, us) in self.floor_us.iter().enumerate() {
            row(i + 1, "link floor", *us, None);
        }
        for p in SMALL_PROVIDERS {
            for (i, us) in Self::series(&self.small, p).iter().enumerate() {
                row(i + 1, &format!("{p} 64 B"), *us, None);
            }
        }
        for p in BIG_PROVIDERS {
            let mbs = Self::series(&self.big_mbs, p);
            for (i, us) in Self::series(&self.big_us, p).iter().enumerate() {
                row(i + 1, &format!("{p} 1 MiB"), *us, mbs.get(i).copied());
            }
        }
        out
    }

    fn print(&self, rounds: usize) {
        println!(
            "\nfi_pingpong -e rdm -m tagged between two test hosts (MTU {BENCH_MTU}); {rounds} \
             rounds, every path once per round: median [min - max]"
        );
        println!("{:<28} {:>26} {:>26}", "path", "us/xfer", "MB/s");
        println!(
            "{:<28} {:>26} {:>26}",
            "raw link floor (RTT p50 / 2)",
            spread(&self.floor_us),
            "-"
        );
        for p in SMALL_PROVIDERS {
            let v = Self::series(&self.small, p);
            println!("{:<28} {:>26} {:>26}", format!("{p}, 64 B"), spread(v), "-");
        }
        for p in BIG_PROVIDERS {
            let (us, mbs) = (
                Self::series(&self.big_us, p),
                Self::series(&self.big_mbs, p),
            );
            println!(
                "{:<28} {:>26} {:>26}",
                format!("{p}, 1 MiB"),
                spread(us),
                spread(mbs)
            );
        }
        let small = |p| Self::series(&self.small, p);
        let big = |p| Self::series(&self.big_mbs, p);
        println!("\nratios within each round, median [min - max] (targets in parentheses)");
        println!(
            "  64 B latency xdp / tcp          {}  (target <= 0.50)",
            spread(&ratios(small("xdp"), small("tcp")))
        );
        println!(
            "  64 B latency xdp / link floor   {}  (target <= 1.50)",
            spread(&ratios(small("xdp"), &self.floor_us))
        );
        println!(
            "  1 MiB bandwidth xdp / tcp       {}  (target >= 1.00)",
            spread(&ratios(big("xdp"), big("tcp")))
        );
        println!(
            "  64 B latency xdp+auth / xdp     {}  (target <= 1.15)",
            spread(&ratios(small(AUTHENTICATED), small("xdp")))
        );
        println!(
            "  1 MiB bandwidth xdp+auth / xdp  {}  (target >= 0.80)",
            spread(&ratios(big(AUTHENTICATED), big("xdp")))
        );
    }
}

/// The raw AF_XDP link ping-pong (generic attach, the faster mode on veth) from
/// `ofi-xdp link-pingpong --driver`, run as a child so its test hosts are its own.
fn link_floor() -> Result<Measured, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let out = Command::new(exe)
        .args(["link-pingpong", "--driver", "--modes", "generic"])
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("running link-pingpong: {e}"))?;
    if !out.status.success() {
        return Err(format!("link-pingpong failed: {}", out.status));
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(Measured::parse)
        .find(|m| !m.label.starts_with("kernel"))
        .ok_or_else(|| "link-pingpong printed no link result".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_ratio_compares_neighbours_and_rounds_alternate() {
        assert_eq!(
            round_order(&SMALL_PROVIDERS, 1),
            [AUTHENTICATED, "xdp", "tcp", "udp;ofi_rxd"]
        );
        assert_eq!(
            round_order(&SMALL_PROVIDERS, 2),
            ["udp;ofi_rxd", "tcp", "xdp", AUTHENTICATED]
        );
        assert_eq!(
            round_order(&BIG_PROVIDERS, 3),
            [AUTHENTICATED, "xdp", "tcp"]
        );
    }
}
