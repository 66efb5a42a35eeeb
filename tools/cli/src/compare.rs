//! `ofi-xdp demo` and `ofi-xdp provider-bench`: Debian's `fi_pingpong` over the `xdp` provider
//! beside libfabric's own `tcp` (and `udp;ofi_rxd`) providers, between the same two test hosts,
//! in one run. The machines are shared and noisy, so the benchmark prints ratios next to the
//! absolute figures: ratios measured in one run are what the targets compare.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use ofi_xdp_testhosts::HostPair;

use crate::args::Args;
use crate::fi_pingpong::{self, Row, Run};
use crate::pingpong::Measured;

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

/// `ofi-xdp demo [--sizes all] [--iters 100]`: fi_pingpong with data checking over `xdp` and
/// over `tcp`, printed side by side.
pub fn demo(args: &[String]) -> Result<(), String> {
    let a = Args::parse(args, &[])?;
    let sizes: String = a.get("sizes", "all".to_owned())?;
    let iterations: u32 = a.get("iters", 100)?;
    preflight()?;
    let pair = HostPair::new().map_err(|e| format!("creating test hosts: {e}"))?;
    println!("test hosts: {} <-> {}", pair.a, pair.b);
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

/// `ofi-xdp provider-bench [--iters 10000] [--big-iters 200]`: the figures issue 4's targets
/// compare — 64-byte latency of xdp against tcp and against the raw link floor, 1 MiB
/// bandwidth of xdp against tcp — all measured in one run between the same test hosts.
pub fn bench(args: &[String]) -> Result<(), String> {
    let a = Args::parse(args, &[])?;
    let iterations: u32 = a.get("iters", 10_000)?;
    let big_iterations: u32 = a.get("big-iters", 200)?;
    preflight()?;
    let floor = link_floor()?;
    let pair = HostPair::with_mtu(BENCH_MTU).map_err(|e| format!("creating test hosts: {e}"))?;
    let measure = |provider: &str, size: &str, iters: u32| -> Result<Row, String> {
        let rows = fi_pingpong::run(&pair, &pingpong(provider, size, iters, false), &[])?;
        rows.into_iter()
            .next()
            .ok_or_else(|| format!("fi_pingpong -p {provider} printed no row"))
    };
    let small: Vec<(&str, Result<Row, String>)> = ["xdp", "tcp", "udp;ofi_rxd"]
        .into_iter()
        .map(|p| (p, measure(p, "64", iterations)))
        .collect();
    let big: Vec<(&str, Result<Row, String>)> = ["xdp", "tcp"]
        .into_iter()
        .map(|p| (p, measure(p, "1048576", big_iterations)))
        .collect();

    println!(
        "\nfi_pingpong -e rdm -m tagged between two test hosts (one run, same hosts, MTU {BENCH_MTU})"
    );
    println!("{:<28} {:>12} {:>12}", "path", "us/xfer", "MB/s");
    let floor_one_way_us = floor.p50_ns as f64 / 2000.0;
    println!(
        "{:<28} {:>12.2} {:>12}",
        "raw link floor (RTT p50 / 2)", floor_one_way_us, "-"
    );
    for (label, results) in [("64 B", &small), ("1 MiB", &big)] {
        for (provider, row) in results {
            match row {
                Ok(r) => println!(
                    "{:<28} {:>12.2} {:>12.2}",
                    format!("{provider}, {label}"),
                    r.usec_per_xfer,
                    r.mb_per_sec
                ),
                Err(e) => println!("{:<28} failed: {e}", format!("{provider}, {label}")),
            }
        }
    }
    let get = |results: &[(&str, Result<Row, String>)], p: &str| {
        results
            .iter()
            .find(|(name, _)| *name == p)
            .and_then(|(_, r)| r.as_ref().ok())
            .cloned()
    };
    println!("\nratios (targets from issue 4)");
    if let (Some(x), Some(t)) = (get(&small, "xdp"), get(&small, "tcp")) {
        println!(
            "  64 B latency xdp / tcp          {:>6.2}  (target <= 0.50)",
            x.usec_per_xfer / t.usec_per_xfer
        );
    }
    if let Some(x) = get(&small, "xdp") {
        println!(
            "  64 B latency xdp / link floor   {:>6.2}  (target <= 1.50)",
            x.usec_per_xfer / floor_one_way_us
        );
    }
    if let (Some(x), Some(t)) = (get(&big, "xdp"), get(&big, "tcp")) {
        println!(
            "  1 MiB bandwidth xdp / tcp       {:>6.2}  (target >= 1.00)",
            x.mb_per_sec / t.mb_per_sec
        );
    }
    let failed: Vec<String> = small
        .iter()
        .chain(big.iter())
        .filter_map(|(p, r)| r.as_ref().err().map(|_| (*p).to_owned()))
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("some runs failed: {}", failed.join(", ")))
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
