//! `ofi-xdp stream-bench`: streaming bandwidth and message rate as users measure them — a window
//! of tagged messages in flight, with the semantics of libfabric's `fi_rdm_tagged_bw` (see
//! `stream_bw.c`) — for `xdp`, `tcp` and `udp;ofi_rxd`, beside the raw AF_XDP link's one-way
//! packet rate, at MTU 1500 and 9000, in alternating rounds between the same two test hosts.
//! With `--ops write,read` the same cases also run as windows of RMA writes and reads, with the
//! semantics of `fi_rma_bw -o write` / `-o read`.
//!
//! The machines are shared and noisy: every ratio is taken within a round (both sides measured
//! seconds apart) and the median over rounds is reported with its range, as `provider-bench`
//! does for latency.

pub mod paths;
mod plot;
mod table;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ofi_xdp_testhosts::{Host, HostPair};

use crate::c_program::CProgram;
use crate::child::{ChildGuard, wait_output};
use crate::pingpong::Measured;

pub use table::Results;

/// The test program, compiled against the installed libfabric when the benchmark starts.
const SOURCE: &str = include_str!("stream_bw.c");

/// Mebibytes one bandwidth run moves by default (at least [`MIN_WINDOWS`] windows): long
/// enough that the start-up and the final acknowledgement do not count, short enough for many
/// rounds. The message-rate run sends [`RATE_MESSAGES_PER_MIB`] messages per mebibyte of it.
const MIB_PER_RUN: usize = 48;
const MIN_WINDOWS: usize = 8;
const RATE_MESSAGES_PER_MIB: usize = 2_000;
/// Datagrams of one raw-link rate burst.
const LINK_BURST: u64 = 300_000;
/// One run that takes longer than this has hung: both processes are ended.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);
/// Control ports of successive runs (a fresh one each time, as TIME_WAIT may hold the last).
const CONTROL_PORT_BASE: u16 = 47_610;
const CONTROL_PORTS: u16 = 200;

/// How a case moves its data (`stream_bw.c`'s `-o`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Op {
    /// Tagged messages, as `fi_rdm_tagged_bw` sends them.
    Tagged,
    /// RMA writes into the receiver's registered buffer, as `fi_rma_bw -o write`.
    Write,
    /// RMA reads from the receiver's registered buffer, as `fi_rma_bw -o read`.
    Read,
}

impl Op {
    /// The name `stream_bw.c`'s `-o` takes and the CSV carries.
    pub fn name(self) -> &'static str {
        match self {
            Op::Tagged => "tagged",
            Op::Write => "write",
            Op::Read => "read",
        }
    }
}

/// One measured case: operation, message size and window (messages in flight).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Case {
    pub op: Op,
    pub bytes: usize,
    pub window: u32,
}

impl Case {
    /// The message-rate case: 64 B tagged messages, a window of 64.
    pub const RATE: Case = Case::tagged(64, 64);

    /// A case of tagged messages.
    pub const fn tagged(bytes: usize, window: u32) -> Case {
        Case {
            op: Op::Tagged,
            bytes,
            window,
        }
    }

    /// Messages of one run of `mib` mebibytes' worth.
    fn iterations(self, mib: usize) -> usize {
        if self == Case::RATE {
            return RATE_MESSAGES_PER_MIB * mib;
        }
        let window = self.window as usize;
        ((mib << 20) / self.bytes).max(window * MIN_WINDOWS)
    }

    /// "1 MiB w16" for tagged messages, "write 1 MiB w16" for RMA.
    pub fn label(self) -> String {
        let sized = format!("{} w{}", fmt_bytes(self.bytes), self.window);
        match self.op {
            Op::Tagged => sized,
            op => format!("{} {sized}", op.name()),
        }
    }
}

/// The bandwidth cases: for every operation (in the order given, each once) every size with
/// every window, then — when tagged messages are among them — the message-rate case.
pub fn cases(ops: &[Op], sizes: &[usize], windows: &[u32]) -> Vec<Case> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for &op in ops {
        if seen.contains(&op) {
            continue;
        }
        seen.push(op);
        for &bytes in sizes {
            out.extend(windows.iter().map(|&window| Case { op, bytes, window }));
        }
    }
    if seen.contains(&Op::Tagged) {
        out.push(Case::RATE);
    }
    out
}

/// "4 KiB", "1 MiB", "64 B".
pub fn fmt_bytes(n: usize) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} B"),
    }
}

/// One run's figures, as the sender printed them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub mb_per_s: f64,
    pub msgs_per_s: f64,
}

impl Sample {
    /// Parses `RESULT bytes=… window=… iters=… secs=… mb_per_s=… msgs_per_s=…`.
    fn parse(text: &str) -> Option<Sample> {
        let line = text.lines().find(|l| l.starts_with("RESULT "))?;
        let field = |key: &str| -> Option<f64> {
            line.split_whitespace()
                .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))?
                .parse()
                .ok()
        };
        Some(Sample {
            mb_per_s: field("mb_per_s")?,
            msgs_per_s: field("msgs_per_s")?,
        })
    }
}

/// `ofi-xdp stream-bench`'s options.
#[derive(clap::Args)]
pub struct Opts {
    /// Rounds, each running every provider and case once
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// MTUs of the test hosts (comma-separated)
    #[arg(long, value_delimiter = ',', default_value = "1500,9000")]
    mtus: Vec<u32>,
    /// Providers (comma-separated); one may carry environment settings for its runs after a
    /// colon, several separated by `+`, e.g. `xdp,xdp:FI_XDP_PACK=0,tcp`
    #[arg(long, value_delimiter = ',', default_value = "xdp,tcp,udp;ofi_rxd")]
    providers: Vec<String>,
    /// Message sizes in bytes (comma-separated)
    #[arg(long, value_delimiter = ',', default_value = "4096,65536,1048576")]
    sizes: Vec<usize>,
    /// Messages in flight (comma-separated)
    #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
    windows: Vec<u32>,
    /// Operations (comma-separated), each its own set of cases in the same rounds: `tagged`
    /// messages (fi_rdm_tagged_bw), RMA `write` and `read` (fi_rma_bw -o write / -o read)
    #[arg(long, value_delimiter = ',', default_value = "tagged")]
    ops: Vec<Op>,
    /// Where the SVG plots and the CSV go
    #[arg(long, value_name = "DIR", default_value = ".")]
    out: PathBuf,
    /// MiB each run moves
    #[arg(long, default_value_t = MIB_PER_RUN)]
    mib_per_run: usize,
    /// Leave out the raw link's packet rate
    #[arg(long)]
    no_link: bool,
    /// Only the 64 B window 64 message rate
    #[arg(long)]
    only_rate: bool,
    /// Verify every message's data (a test, not a benchmark)
    #[arg(long)]
    check: bool,
}

/// `ofi-xdp stream-bench`: see the module documentation.
pub fn main(o: &Opts) -> Result<(), String> {
    let rounds = o.rounds;
    if rounds == 0 {
        return Err("--rounds must be at least 1".into());
    }
    let (mtus, providers) = (o.mtus.clone(), o.providers.clone());
    let (sizes, windows) = (o.sizes.clone(), o.windows.clone());
    if windows.contains(&0) || sizes.contains(&0) {
        return Err("--sizes and --windows must be positive".into());
    }
    let out_dir = o.out.clone();
    std::fs::create_dir_all(&out_dir)
        .map_err(|e| format!("cannot create {}: {e}", out_dir.display()))?;
    let mut tool = Tool::build()?;
    tool.check = o.check;
    tool.mib = o.mib_per_run;
    if tool.mib == 0 {
        return Err("--mib-per-run must be at least 1".into());
    }
    let cases = if o.only_rate {
        vec![Case::RATE]
    } else {
        cases(&o.ops, &sizes, &windows)
    };

    let mut all = Vec::new();
    let mut failures = Vec::new();
    for &mtu in &mtus {
        let pair = HostPair::with_mtu(mtu).map_err(|e| format!("creating test hosts: {e}"))?;
        eprintln!(
            "stream-bench: test hosts (MTU {mtu}): {} <-> {}",
            pair.a, pair.b
        );
        let mut results = Results::new(mtu, &providers, &cases);
        let started = Instant::now();
        for round in 1..=rounds {
            eprintln!(
                "stream-bench: MTU {mtu}, round {round} of {rounds} ({:.0} s in)",
                started.elapsed().as_secs_f64()
            );
            if !o.no_link {
                match link_rate(mtu) {
                    Ok(pps) => results.link_pps.push(pps),
                    Err(e) => failures.push(format!("MTU {mtu} raw link: {e}")),
                }
            }
            for &case in &cases {
                for provider in &providers {
                    match tool.run((&pair.a, &pair.b), provider, case, &[]) {
                        Ok(run) => results.record(provider, case, round, run.sample),
                        Err(e) => {
                            eprintln!("{e}");
                            failures.push(format!("MTU {mtu} {provider} {}", case.label()));
                        }
                    }
                }
            }
        }
        results.print(rounds);
        let svg = out_dir.join(format!("stream-mtu{mtu}.svg"));
        std::fs::write(&svg, plot::bandwidth(&results))
            .map_err(|e| format!("{}: {e}", svg.display()))?;
        println!("plot: {}", svg.display());
        all.push(results);
    }
    let csv = out_dir.join(format!("stream-{}.csv", stamp()));
    let text: String = std::iter::once(table::CSV_HEADER.to_owned())
        .chain(all.iter().map(Results::csv_rows))
        .collect();
    std::fs::write(&csv, text).map_err(|e| format!("{}: {e}", csv.display()))?;
    println!("every figure of every round (CSV): {}", csv.display());
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!("runs that failed: {}", failures.join("; ")))
    }
}

fn stamp() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The compiled test program and how the benchmark runs it.
struct Tool {
    prog: CProgram,
    next_port: std::cell::Cell<u16>,
    /// Verify every message's contents (`-c`).
    check: bool,
    /// Mebibytes per bandwidth run.
    mib: usize,
}

impl Tool {
    fn build() -> Result<Tool, String> {
        Ok(Tool {
            prog: CProgram::build("stream_bw", SOURCE)?,
            next_port: std::cell::Cell::new(0),
            check: false,
            mib: MIB_PER_RUN,
        })
    }

    fn port(&self) -> u16 {
        let n = self.next_port.get();
        self.next_port.set((n + 1) % CONTROL_PORTS);
        CONTROL_PORT_BASE + n
    }

    /// One run: the receiver (RMA target) in `receiver`, the sender (RMA initiator) in
    /// `sender`; the sender's figures and what it wrote to stderr.
    /// `spec` is a provider name, optionally followed by `:NAME=VALUE+NAME=VALUE…`,
    /// environment settings for both processes; `more_env` is added to them.
    fn run(
        &self,
        (receiver, sender): (&Host, &Host),
        spec: &str,
        case: Case,
        more_env: &[(&str, &str)],
    ) -> Result<Run, String> {
        let (provider, mut env) = provider_env(spec);
        env.extend_from_slice(more_env);
        let port = self.port().to_string();
        let (bytes, window) = (case.bytes.to_string(), case.window.to_string());
        let iters = case.iterations(self.mib).to_string();
        // Tagged runs keep the program's default, so their command line is as it always was.
        let op = (case.op != Op::Tagged).then_some(["-o", case.op.name()]);
        let command = |host: &Host| {
            let mut cmd = host.command(&self.prog.exe);
            cmd.args(["-p", provider, "-S", &bytes, "-W", &window, "-I", &iters])
                .args(["-P", &port])
                .args(self.check.then_some("-c"))
                .args(op.iter().flatten())
                .envs(env.iter().copied())
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            cmd
        };
        let deadline = Instant::now() + RUN_TIMEOUT;
        let spawn = |mut cmd: Command| -> Result<ChildGuard, String> {
            cmd.spawn()
                .map(ChildGuard)
                .map_err(|e| format!("cannot start {}: {e}", self.prog.exe.display()))
        };
        let what = format!("{provider} {} at MTU {}", case.label(), receiver.mtu());
        let receiver_child = spawn(command(receiver))?;
        let mut sender_cmd = command(sender);
        sender_cmd.arg(receiver.ipv4().to_string());
        let sender = wait_output(spawn(sender_cmd)?, deadline, "the stream sender")?;
        let receiver = wait_output(receiver_child, deadline, "the stream receiver")?;
        if !sender.success || !receiver.success {
            return Err(format!(
                "{what} failed\n--- sender ---\n{}{}\n--- receiver ---\n{}{}",
                sender.stdout, sender.stderr, receiver.stdout, receiver.stderr
            ));
        }
        let sample =
            Sample::parse(&sender.stdout).ok_or_else(|| format!("{what}: no RESULT line"))?;
        Ok(Run {
            sample,
            sender_stderr: sender.stderr,
        })
    }
}

/// One run's figures and what its sender wrote to stderr (its log).
struct Run {
    sample: Sample,
    sender_stderr: String,
}

/// `xdp:FI_XDP_PACK=0+FI_XDP_CC=0` → (`xdp`, the settings).
fn provider_env(spec: &str) -> (&str, Vec<(&str, &str)>) {
    let Some((provider, settings)) = spec.split_once(':') else {
        return (spec, Vec::new());
    };
    let env = settings
        .split('+')
        .filter_map(|kv| kv.split_once('='))
        .collect();
    (provider, env)
}

/// The raw AF_XDP link's one-way packet rate with datagrams that fill an `mtu`-byte packet
/// (generic attach, as the provider runs on veth), from `ofi-xdp link-pingpong --driver`
/// run as a child so its test hosts are its own.
fn link_rate(mtu: u32) -> Result<f64, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let out = Command::new(exe)
        .args([
            "link-pingpong",
            "--driver",
            "--modes",
            "generic",
            "--no-kernel",
        ])
        .args(["--mtu", &mtu.to_string()])
        .args(["--size", &udp_payload(mtu).to_string()])
        .args(["--iters", "200", "--warmup", "50"])
        .args(["--rate-count", &LINK_BURST.to_string()])
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
        .map(|m| m.rx_pps)
        .ok_or_else(|| "link-pingpong printed no link result".to_owned())
}

/// The UDP payload of a full `mtu`-byte IPv4 packet (the test hosts'
/// addresses are IPv4).
pub fn udp_payload(mtu: u32) -> usize {
    ofi_xdp_link::payload_within_mtu(mtu, &std::net::Ipv4Addr::UNSPECIFIED.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_result_line() {
        let text = "noise\nRESULT bytes=65536 window=16 iters=2000 secs=1.5 mb_per_s=87.38 \
                    msgs_per_s=1333\n";
        let s = Sample::parse(text).unwrap();
        assert_eq!(s.mb_per_s, 87.38);
        assert_eq!(s.msgs_per_s, 1333.0);
        assert!(Sample::parse("RESULT bytes=1\n").is_none());
    }

    #[test]
    fn every_size_with_every_window_then_the_rate_case() {
        let c = cases(&[Op::Tagged], &[4096, 1 << 20], &[1, 16]);
        assert_eq!(c.len(), 5);
        assert_eq!(c[1], Case::tagged(4096, 16));
        assert_eq!(c[4], Case::RATE);
        assert_eq!(c[2].label(), "1 MiB w1");
    }

    #[test]
    fn every_op_is_a_set_of_cases_and_the_rate_case_is_tagged() {
        let c = cases(
            &[Op::Write, Op::Tagged, Op::Write, Op::Read],
            &[1 << 20],
            &[16],
        );
        let labels: Vec<String> = c.iter().map(|c| c.label()).collect();
        assert_eq!(
            labels,
            ["write 1 MiB w16", "1 MiB w16", "read 1 MiB w16", "64 B w64"]
        );
        let rma = cases(&[Op::Write, Op::Read], &[4096], &[1]);
        assert!(!rma.contains(&Case::RATE));
        assert_eq!(rma.len(), 2);
    }

    #[test]
    fn runs_move_enough_data_in_whole_windows() {
        let big = Case::tagged(1 << 20, 64);
        assert_eq!(big.iterations(48), 64 * MIN_WINDOWS);
        let small = Case {
            op: Op::Read,
            bytes: 4096,
            window: 1,
        };
        assert_eq!(small.iterations(48), 48 * 256);
        assert_eq!(Case::RATE.iterations(2), 2 * RATE_MESSAGES_PER_MIB);
    }
}
