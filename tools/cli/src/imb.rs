//! `ofi-xdp imb-bench`: Intel MPI Benchmarks (IMB-MPI1) under Open MPI, as MPI users measure a
//! fabric: PingPong (one message in flight: latency, and bandwidth of a single message) and
//! Uniband (a window of messages in flight), one rank in each of two test hosts, over the
//! `xdp` provider beside `tcp` through the same `pml cm` + `mtl ofi` path, at MTU 1500 and
//! 9000, in alternating rounds; prints the medians and the xdp/tcp ratios.
//!
//! IMB is not packaged by Debian: build it from its sources (github.com/intel/mpi-benchmarks,
//! `make CC=mpicc CXX=mpicxx CXXFLAGS=-DOMPI_SKIP_MPICXX IMB-MPI1`) and pass the binary with
//! `--imb`. Without it the benchmark says so and does nothing (CI has no copy).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ofi_xdp_testhosts::HostPair;

use crate::child::{ChildGuard, wait_output};
use crate::stats::{ratios, spread};

/// `ofi-xdp imb-bench`'s options.
#[derive(clap::Args)]
pub struct Opts {
    /// The IMB-MPI1 binary (Intel MPI Benchmarks, built with Open MPI's mpicc); without it
    /// the command says it is skipped
    #[arg(long, value_name = "PATH/IMB-MPI1")]
    imb: Option<PathBuf>,
    /// Rounds, each running every provider once
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// MTUs of the test hosts (comma-separated)
    #[arg(long, value_delimiter = ',', default_value = "1500,9000")]
    mtus: Vec<u32>,
    /// Providers (comma-separated)
    #[arg(long, value_delimiter = ',', default_value = "xdp,tcp")]
    providers: Vec<String>,
    /// Message sizes in bytes (comma-separated)
    #[arg(long, value_delimiter = ',', default_value = "8,65536,1048576,4194304")]
    sizes: Vec<usize>,
}

/// Largest message whose PingPong latency (rather than bandwidth) the table shows.
const SMALL: usize = 4096;

/// Longest one mpirun may take before the round counts as failed.
const RUN_TIMEOUT: Duration = Duration::from_secs(300);

/// The IMB benchmarks run, and the column each reports.
const BENCHMARKS: [(&str, Figure); 3] = [
    ("PingPong", Figure::Latency),
    ("PingPong", Figure::Bandwidth),
    ("Uniband", Figure::Bandwidth),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Figure {
    /// `t[usec]` of PingPong: half the round trip.
    Latency,
    /// Mbytes/sec (IMB's MB are 10^6 bytes).
    Bandwidth,
}

impl Figure {
    fn unit(self) -> &'static str {
        match self {
            Figure::Latency => "us",
            Figure::Bandwidth => "MB/s",
        }
    }
}

/// One row of an IMB table: message size, and the time and bandwidth columns.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Row {
    bytes: usize,
    usec: Option<f64>,
    mb_per_s: f64,
}

/// The rows of benchmark `name` in IMB's output. PingPong rows are
/// `#bytes #repetitions t[usec] Mbytes/sec`; Uniband rows are
/// `#bytes #repetitions Mbytes/sec Msg/sec`.
fn parse_table(out: &str, name: &str) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut inside = false;
    for line in out.lines() {
        let t = line.trim();
        if t.starts_with("# Benchmarking") {
            inside = t.split_whitespace().nth(2) == Some(name);
            continue;
        }
        if !inside || t.starts_with('#') || t.is_empty() {
            continue;
        }
        let f: Vec<f64> = t.split_whitespace().map_while(|w| w.parse().ok()).collect();
        let row = match (name, f.as_slice()) {
            ("PingPong", [bytes, _, usec, mb, ..]) => Row {
                bytes: *bytes as usize,
                usec: Some(*usec),
                mb_per_s: *mb,
            },
            ("Uniband", [bytes, _, mb, ..]) => Row {
                bytes: *bytes as usize,
                usec: None,
                mb_per_s: *mb,
            },
            _ => continue,
        };
        rows.push(row);
    }
    rows
}

/// What one figure is: benchmark, column, message size.
type Key = (&'static str, Figure, usize);

/// Figures of one provider at one MTU: one value per round for each [`Key`].
#[derive(Default)]
struct Samples(Vec<(Key, Vec<f64>)>);

impl Samples {
    fn push(&mut self, key: Key, v: f64) {
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some((_, vs)) => vs.push(v),
            None => self.0.push((key, vec![v])),
        }
    }

    fn get(&self, key: Key) -> &[f64] {
        self.0
            .iter()
            .find(|(k, _)| *k == key)
            .map_or(&[], |(_, v)| v.as_slice())
    }
}

pub fn main(o: &Opts) -> Result<(), String> {
    let imb = o.imb.clone().unwrap_or_default();
    if imb.as_os_str().is_empty() || !imb.is_file() {
        println!(
            "imb-bench: skipped: no IMB-MPI1 binary (--imb); Intel MPI Benchmarks are not \
             packaged by Debian, build them from github.com/intel/mpi-benchmarks (see \
             docs/performance.md)"
        );
        return Ok(());
    }
    let rounds = o.rounds;
    let (mtus, providers, sizes) = (o.mtus.clone(), o.providers.clone(), o.sizes.clone());
    let msglen = write_msglen(&sizes)?;
    let mut failures = Vec::new();
    for &mtu in &mtus {
        let pair = HostPair::with_mtu(mtu).map_err(|e| format!("creating test hosts: {e}"))?;
        eprintln!(
            "imb-bench: test hosts (MTU {mtu}): {} <-> {}",
            pair.a, pair.b
        );
        let mut samples: Vec<Samples> = providers.iter().map(|_| Samples::default()).collect();
        for round in 1..=rounds {
            for (p, provider) in providers.iter().enumerate() {
                eprintln!("imb-bench: MTU {mtu}, round {round} of {rounds}: {provider}");
                match run_imb(&pair, &imb, provider, &msglen) {
                    Ok(out) => {
                        for (name, figure) in BENCHMARKS {
                            for row in parse_table(&out, name) {
                                let v = match figure {
                                    Figure::Latency => row.usec,
                                    Figure::Bandwidth => Some(row.mb_per_s),
                                };
                                if let Some(v) = v {
                                    samples[p].push((name, figure, row.bytes), v);
                                }
                            }
                        }
                    }
                    Err(e) => {
                        eprintln!("{e}");
                        failures.push(format!("MTU {mtu} {provider} round {round}"));
                    }
                }
            }
        }
        print_table(mtu, rounds, &providers, &sizes, &samples);
    }
    let _ = std::fs::remove_file(&msglen);
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!("runs that failed: {}", failures.join("; ")))
    }
}

fn print_table(mtu: u32, rounds: usize, providers: &[String], sizes: &[usize], s: &[Samples]) {
    println!(
        "\nIMB-MPI1 under Open MPI (pml cm, mtl ofi), one rank per test host, MTU {mtu}; \
         {rounds} rounds, median [min - max]"
    );
    let mut header = format!("{:<24}", "benchmark");
    for p in providers {
        header += &format!("{p:>30}");
    }
    println!("{header}");
    for key in shown(sizes) {
        let (name, figure, size) = key;
        let mut line = format!(
            "{:<24}",
            format!("{name} {} {}", label(size), figure.unit())
        );
        for p in s {
            line += &format!("{:>30}", spread(p.get(key)));
        }
        println!("{line}");
    }
    if providers.len() >= 2 {
        println!(
            "ratios {} / {} within each round, median [min - max]:",
            providers[0], providers[1]
        );
        for key in shown(sizes) {
            let (name, figure, size) = key;
            let r = ratios(s[0].get(key), s[1].get(key));
            println!(
                "  {:<22}{:>30}",
                format!("{name} {} {}", label(size), figure.unit()),
                spread(&r)
            );
        }
    }
}

/// The figures the table shows: PingPong's latency for small messages and its bandwidth for
/// large ones, Uniband's bandwidth for large ones.
fn shown(sizes: &[usize]) -> impl Iterator<Item = Key> + '_ {
    BENCHMARKS.into_iter().flat_map(move |(name, figure)| {
        sizes
            .iter()
            .filter(move |&&size| (figure == Figure::Latency) == (size <= SMALL))
            .map(move |&size| (name, figure, size))
    })
}

/// "8 B", "64 KiB", "1 MiB".
fn label(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

/// IMB's `-msglen` file: one message size per line.
fn write_msglen(sizes: &[usize]) -> Result<PathBuf, String> {
    let path = std::env::temp_dir().join(format!("ofi-xdp-imb-msglen-{}", std::process::id()));
    let text: String = sizes.iter().map(|s| format!("{s}\n")).collect();
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

/// One mpirun: rank 0 in `pair.a`, rank 1 in `pair.b`, PingPong then Uniband.
fn run_imb(pair: &HostPair, imb: &Path, provider: &str, msglen: &Path) -> Result<String, String> {
    let imb_args = |cmd: &mut Command| {
        cmd.arg(imb)
            .args(["PingPong", "Uniband", "-npmin", "2", "-time", "3"])
            .arg("-msglen")
            .arg(msglen);
    };
    let ifname = pair.a.ifname();
    let mut cmd = pair.a.command("mpirun");
    cmd.args(["--allow-run-as-root", "-x", "FI_PROVIDER_PATH"])
        .args([
            "--mca", "pml", "cm", "--mca", "mtl", "ofi", "--mca", "btl", "self",
        ])
        .args(["--mca", "mtl_ofi_provider_include", provider])
        .args(["-np", "1"]);
    imb_args(&mut cmd);
    cmd.args([":", "-np", "1", "ip", "netns", "exec", pair.b.netns()]);
    imb_args(&mut cmd);
    // Ranks in the other namespace reach mpirun's PMIx server and its out-of-band channel
    // over the veth pair, not over loopback.
    cmd.env("PMIX_MCA_ptl_tcp_remote_connections", "1")
        .env("PMIX_MCA_ptl_tcp_if_include", ifname)
        .env("OMPI_MCA_oob_tcp_if_include", ifname)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd
        .spawn()
        .map(ChildGuard)
        .map_err(|e| format!("cannot start mpirun (openmpi-bin): {e}"))?;
    let out = wait_output(child, Instant::now() + RUN_TIMEOUT, "mpirun")?;
    if !out.success {
        return Err(format!(
            "IMB over {provider} failed:\n{}\n{}",
            out.stdout, out.stderr
        ));
    }
    Ok(out.stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUT: &str = "\
#---------------------------------------------------
# Benchmarking PingPong
# #processes = 2
#---------------------------------------------------
       #bytes #repetitions      t[usec]   Mbytes/sec
            8         1000         4.30         1.86
      1048576           40      1500.00       699.05

#---------------------------------------------------
# Benchmarking Uniband
# #processes = 2
#---------------------------------------------------
       #bytes #repetitions   Mbytes/sec      Msg/sec
      1048576           40       650.00          620
";

    #[test]
    fn reads_pingpong_and_uniband_tables() {
        let pp = parse_table(OUT, "PingPong");
        assert_eq!(pp.len(), 2);
        assert_eq!(pp[0].bytes, 8);
        assert_eq!(pp[0].usec, Some(4.30));
        assert_eq!(pp[1].mb_per_s, 699.05);
        let ub = parse_table(OUT, "Uniband");
        assert_eq!(
            ub,
            vec![Row {
                bytes: 1048576,
                usec: None,
                mb_per_s: 650.0
            }]
        );
    }

    #[test]
    fn labels_sizes() {
        assert_eq!(label(8), "8 B");
        assert_eq!(label(65536), "64 KiB");
        assert_eq!(label(4 << 20), "4 MiB");
    }
}
