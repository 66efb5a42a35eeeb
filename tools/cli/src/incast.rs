//! `ofi-xdp incast`: many senders stream 1 MiB messages to one receiver at
//! once, test hosts on one bridge (MTU 9000), over `xdp` and over `tcp` side
//! by side: aggregate throughput against one sender alone, each sender's
//! throughput, and the share of datagrams (segments) retransmitted — the
//! figures congestion control is judged by (`reliability/PROTOCOL.md` §12).
//!
//! One process per host runs `incast.c` (compiled here with `cc … -lfabric`):
//! the receiver on host 0, a sender on each other host, all senders starting
//! at the same instant, chosen once every process has said it is set up.
//! Each round runs one sender alone before and after its N-sender runs and
//! compares them with the mean of the two.
//! Retransmissions: for `xdp` the engine statistics the provider logs when an
//! endpoint closes (`FI_LOG_LEVEL=info`), for `tcp` the senders' namespaces'
//! `Tcp: OutSegs RetransSegs` (/proc/net/snmp).

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ofi_xdp_testhosts::{Host, Segment};

use crate::c_program::CProgram;
use crate::child::{ChildGuard, wait_output};
use crate::incast_settle::{self, Sampler};
use crate::stats::{median, spread};

/// The program, compiled at run time.
const SOURCE: &str = include_str!("incast.c");
/// Jumbo frames, as the other provider benchmarks.
const MTU: u32 = 9000;
const PORT: &str = "47700";

/// One run's figures.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Bytes per second over all senders, to the last message received.
    pub aggregate: f64,
    /// Each sender's bytes per second.
    pub per_sender: Vec<f64>,
    /// Datagrams (segments) sent and retransmitted by the senders.
    pub sent: u64,
    pub retransmitted: u64,
    /// The same, counted only once each sender's window had settled
    /// (after its first quarter: `incast_settle`); senders whose counters
    /// could not be sampled that far are left out.
    pub settled_sent: u64,
    pub settled_retransmitted: u64,
}

impl Outcome {
    /// Largest over smallest per-sender throughput.
    pub fn spread(&self) -> f64 {
        let max = self.per_sender.iter().cloned().fold(0.0, f64::max);
        let min = self.per_sender.iter().cloned().fold(f64::MAX, f64::min);
        max / min
    }

    /// Retransmitted, percent of sent.
    pub fn retransmitted_pct(&self) -> f64 {
        100.0 * self.retransmitted as f64 / self.sent.max(1) as f64
    }

    /// Retransmitted once settled, percent of sent once settled.
    pub fn settled_retransmitted_pct(&self) -> f64 {
        100.0 * self.settled_retransmitted as f64 / self.settled_sent.max(1) as f64
    }
}

/// `Tcp:` OutSegs and RetransSegs of `host`'s namespace.
fn tcp_segments(host: &Host) -> (u64, u64) {
    let Ok(out) = host.command("cat").arg("/proc/net/snmp").output() else {
        return (0, 0);
    };
    tcp_fields(&String::from_utf8_lossy(&out.stdout)).unwrap_or((0, 0))
}

/// `Tcp:` OutSegs and RetransSegs of a `/proc/net/snmp` text.
pub fn tcp_fields(text: &str) -> Option<(u64, u64)> {
    let mut tcp = text.lines().filter(|l| l.starts_with("Tcp:"));
    let (names, values) = (tcp.next()?, tcp.next()?);
    let field = |want: &str| {
        names
            .split_whitespace()
            .zip(values.split_whitespace())
            .find(|(n, _)| *n == want)
            .and_then(|(_, v)| v.parse().ok())
    };
    Some((field("OutSegs")?, field("RetransSegs")?))
}

/// `tx_datagrams` and `retransmits` from the engine statistics the provider
/// logs when an RDM endpoint closes.
fn engine_segments(stderr: &str) -> (u64, u64) {
    let Some(line) = stderr.lines().find(|l| l.contains("rdm endpoint closed")) else {
        return (0, 0);
    };
    let field = |name: &str| {
        line.split(&format!("{name}: "))
            .nth(1)
            .and_then(|rest| rest.split([',', ' ']).next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("tx_datagrams"), field("retransmits"))
}

/// Parses `"<who> bytes <n> usec <t>"` into bytes per second.
fn rate(stdout: &str, who: &str) -> Option<f64> {
    let line = stdout.lines().find(|l| l.starts_with(who))?;
    let w: Vec<&str> = line.split_whitespace().collect();
    let bytes: f64 = w.get(2)?.parse().ok()?;
    let usec: f64 = w.get(4)?.parse().ok()?;
    Some(bytes / (usec / 1e6))
}

/// One incast: `senders` senders of `msgs` messages of `size` bytes each,
/// over `provider`, on `seg` (host 0 receives).
pub fn run(
    bin: &Path,
    seg: &Segment,
    provider: &str,
    senders: usize,
    msgs: u32,
    size: usize,
    env: &[(String, String)],
) -> Result<Outcome, String> {
    let rx = &seg.hosts[0];
    let total = (msgs as usize * senders).to_string();
    let common = |host: &Host| {
        let mut c = host.command(bin);
        c.env("FI_LOG_LEVEL", "info")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    };
    // The receiver first; it says "ready" once it listens.
    let mut server = common(rx);
    server.args([
        "-s",
        provider,
        &rx.ipv4().to_string(),
        PORT,
        &total,
        &size.to_string(),
    ]);
    let mut server = ChildGuard(server.spawn().map_err(|e| format!("incast server: {e}"))?);
    if !says_ready(&mut server) {
        return Err(format!("incast server over {provider} did not start"));
    }
    let before: Vec<(u64, u64)> = seg.hosts[1..=senders].iter().map(tcp_segments).collect();
    let mut clients = Vec::new();
    let mut pids = Vec::new();
    for host in &seg.hosts[1..=senders] {
        let mut c = common(host);
        c.args([
            "-c",
            provider,
            &rx.ipv4().to_string(),
            PORT,
            &msgs.to_string(),
            &size.to_string(),
        ]);
        let child = c.spawn().map_err(|e| format!("incast sender: {e}"))?;
        // `ip netns exec` execs the program: the pid is the sender's.
        pids.push(child.id());
        clients.push(ChildGuard(child));
    }
    // Everyone starts together once everyone is set up: a sender whose
    // set-up ran past a fixed start would have its set-up counted as
    // transfer time, and would not be sending "at once" with the others.
    if let Some(i) = clients.iter_mut().position(|c| !says_ready(c)) {
        let failed = clients.swap_remove(i);
        let done = wait_output(
            failed,
            Instant::now() + Duration::from_secs(10),
            "incast sender",
        )?;
        return Err(format!(
            "incast sender {i} over {provider} did not start: {}",
            done.stderr.trim()
        ));
    }
    let start = (SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        + Duration::from_millis(100))
    .as_nanos()
    .to_string();
    for c in std::iter::once(&mut server).chain(clients.iter_mut()) {
        send_start(c, &start);
    }
    let sampler = Sampler::start(provider, pids);
    let mut finals = Vec::new();
    let mut out = Outcome::default();
    for (i, c) in clients.into_iter().enumerate() {
        let done = wait_output(
            c,
            Instant::now() + Duration::from_secs(300),
            "incast sender",
        )?;
        let r = rate(&done.stdout, "client").ok_or_else(|| {
            format!(
                "incast sender {i} over {provider} failed: {}",
                done.stderr.trim()
            )
        })?;
        out.per_sender.push(r);
        let (sent, rtx) = if provider == "xdp" {
            engine_segments(&done.stderr)
        } else {
            let (s1, r1) = tcp_segments(&seg.hosts[1 + i]);
            (s1 - before[i].0, r1 - before[i].1)
        };
        out.sent += sent;
        out.retransmitted += rtx;
        // The samples are absolute: the engine's from zero, tcp's the
        // namespace's since it was made.
        let base = if provider == "xdp" { (0, 0) } else { before[i] };
        finals.push((base, (base.0 + sent, base.1 + rtx)));
    }
    for (samples, (base, last)) in sampler.finish().iter().zip(finals) {
        if let Some((sent, rtx)) = incast_settle::settled(samples, base, last) {
            out.settled_sent += sent;
            out.settled_retransmitted += rtx;
        }
    }
    let done = wait_output(
        server,
        Instant::now() + Duration::from_secs(60),
        "incast receiver",
    )?;
    out.aggregate = rate(&done.stdout, "server").ok_or_else(|| {
        format!(
            "incast receiver over {provider} failed: {}",
            done.stderr.trim()
        )
    })?;
    Ok(out)
}

/// Reads the child's first line: whether it is "ready".
fn says_ready(child: &mut ChildGuard) -> bool {
    use std::io::BufRead;
    let mut line = String::new();
    // It prints nothing after "ready" until it has its start time, so the
    // reader cannot take more than this line.
    if let Some(out) = child.0.stdout.as_mut() {
        let _ = std::io::BufReader::new(out).read_line(&mut line);
    }
    line.trim() == "ready"
}

/// Sends the start time (CLOCK_REALTIME ns) and closes the child's stdin.
fn send_start(child: &mut ChildGuard, start: &str) {
    use std::io::Write;
    if let Some(mut input) = child.0.stdin.take() {
        let _ = writeln!(input, "{start}");
    }
}

/// `ofi-xdp incast`'s options.
#[derive(clap::Args)]
pub struct Opts {
    /// Rounds, each running every provider alone and with N senders
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Sender counts (comma-separated)
    #[arg(long, value_delimiter = ',', default_value = "4,8")]
    senders: Vec<usize>,
    /// Messages each sender streams
    #[arg(long, default_value_t = 32)]
    msgs: u32,
    /// Message size in bytes
    #[arg(long, default_value_t = 1 << 20)]
    size: usize,
    /// Providers (comma-separated)
    #[arg(long, value_delimiter = ',', default_value = "xdp,tcp")]
    providers: Vec<String>,
}

/// `ofi-xdp incast [--senders 4,8] [--msgs 32] [--size 1048576]
/// [--providers xdp,tcp]`: prints one line per provider and sender count.
pub fn main(o: &Opts) -> Result<(), String> {
    let (msgs, size, rounds) = (o.msgs, o.size, o.rounds);
    let (providers, counts) = (o.providers.clone(), o.senders.clone());
    let most = counts.iter().copied().max().unwrap_or(1);
    let prog = CProgram::build("incast", SOURCE)?;
    let bin = &prog.exe;
    let seg = Segment::new(most + 1, MTU).map_err(|e| format!("creating test hosts: {e}"))?;
    println!(
        "incast: N senders stream {msgs} × {size} B each to one receiver at once, {} test hosts \
         on a bridge (MTU {MTU}); {rounds} rounds, each runs every provider alone and with N \
         senders",
        most + 1
    );
    let mut rows: Vec<Row> = Vec::new();
    let mut failed = Vec::new();
    // One sender alone before and after the N-sender runs of a round: two runs of the same
    // set-up seconds apart differ by 10-30 % on a shared machine, and the ratio's baseline is
    // their mean (their quotient is printed too, as the noise any ratio here carries).
    let mut alone_twice: Vec<(String, f64)> = Vec::new();
    for _ in 0..rounds.max(1) {
        for provider in providers.iter().map(String::as_str) {
            let alone_run =
                |failed: &mut Vec<String>| match run(bin, &seg, provider, 1, msgs, size, &[]) {
                    Ok(o) => Some(o.aggregate),
                    Err(e) => {
                        eprintln!("{e}");
                        failed.push(format!("{provider} alone"));
                        None
                    }
                };
            let Some(before) = alone_run(&mut failed) else {
                continue;
            };
            let mut of_round = Vec::new();
            for &n in &counts {
                match run(bin, &seg, provider, n, msgs, size, &[]) {
                    Ok(o) => of_round.push(Row {
                        provider: provider.to_owned(),
                        senders: n,
                        alone: before,
                        outcome: o,
                    }),
                    Err(e) => {
                        eprintln!("{e}");
                        failed.push(format!("{provider} × {n}"));
                    }
                }
            }
            if let Some(after) = alone_run(&mut failed) {
                alone_twice.push((provider.to_owned(), after / before));
                for r in &mut of_round {
                    r.alone = (before + after) / 2.0;
                }
            }
            rows.extend(of_round);
        }
    }
    print_table(&rows, &providers, &counts);
    for provider in &providers {
        let q: Vec<f64> = alone_twice
            .iter()
            .filter(|(p, _)| p == provider)
            .map(|(_, q)| *q)
            .collect();
        if !q.is_empty() {
            println!(
                "{provider}: one sender alone, after / before the N-sender runs of a round: {}",
                spread(&q)
            );
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("failed: {}", failed.join(", ")))
    }
}

/// One run with N senders, and the single sender's runs of the same round.
struct Row {
    provider: String,
    senders: usize,
    /// Bytes per second of one sender alone, this round (the mean of the runs before and
    /// after; the one before if the one after failed).
    alone: f64,
    outcome: Outcome,
}

/// Medians over the rounds, and the round-by-round ratio of aggregate to
/// one sender alone as "median [min - max]".
fn print_table(rows: &[Row], providers: &[String], counts: &[usize]) {
    println!(
        "{:<6} {:>7} {:>15} {:>11} {:>24} {:>16} {:>13} {:>13}",
        "prov",
        "senders",
        "aggregate MB/s",
        "alone MB/s",
        "aggregate / alone",
        "max/min sender",
        "retransmitted",
        "once settled"
    );
    for provider in providers {
        for &n in counts {
            let of: Vec<&Row> = rows
                .iter()
                .filter(|r| &r.provider == provider && r.senders == n)
                .collect();
            if of.is_empty() {
                continue;
            }
            let med = |f: &dyn Fn(&Row) -> f64| {
                median(&of.iter().map(|r| f(r)).collect::<Vec<_>>()).unwrap_or(f64::NAN)
            };
            let ratio: Vec<f64> = of.iter().map(|r| r.outcome.aggregate / r.alone).collect();
            println!(
                "{provider:<6} {n:>7} {:>15.0} {:>11.0} {:>24} {:>16.2} {:>12.3}% {:>12.3}%",
                med(&|r| r.outcome.aggregate) / 1e6,
                med(&|r| r.alone) / 1e6,
                spread(&ratio),
                med(&|r| r.outcome.spread()),
                med(&|r| r.outcome.retransmitted_pct()),
                med(&|r| r.outcome.settled_retransmitted_pct())
            );
        }
    }
    println!(
        "(medians over the rounds; alone: the mean of one sender's runs before and after the round's \
         N-sender runs; aggregate / alone: median [min - max] of each round's quotient; targets: \
         aggregate / alone >= 1, max/min <= 2, retransmitted once settled < 1 %)"
    );
}
