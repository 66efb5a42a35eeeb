//! `ofi-xdp paths-bench`: one stream across a leaf–spine fabric with many equal-cost paths.
//! Every leaf–spine link is shaped to the same rate (`LeafSpine::shape`), so the fabric, not
//! the hosts' CPUs, bounds a run; one `fi_rdm_tagged_bw`-style stream (1 MiB messages, a window
//! of 16, `stream_bw.c`) runs from the host under leaf 1 to the host under leaf 0 for `xdp` as
//! configured by default, for `xdp` with each of several `FI_XDP_PATHS` values (path entropy,
//! fi_xdp(7)) and the bulk path off (path entropy spreads what AF_XDP sends; the bulk path
//! sends from one port), and for `tcp` (one 5-tuple: one spine), in interleaved rounds. Printed per run: the rate, its ratio to one spine's shaped
//! rate, the packets leaf 1 sent to each spine (how ECMP spread the data) and, for `xdp`, the
//! sender's retransmissions (its engine's closing statistics, `FI_LOG_LEVEL=info`). Then a
//! run in which a spine goes down in the middle, as the receiver's rate in 100 ms buckets.
//!
//! A benchmark: it reports figures, it asserts none.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ofi_xdp_testhosts::{Host, LeafSpine};

use super::{Case, Tool};
use crate::stats::spread;

/// The stream: 1 MiB tagged messages, 16 in flight.
const CASE: Case = Case::tagged(1 << 20, 16);
/// The queue each shaped link holds before it drops: a few round trips of the fabric at the
/// rate, not so much that latency grows without bound.
const SHAPED_QUEUE: Duration = Duration::from_millis(5);
/// The failover run: a spine goes down this long after the run starts.
const FAIL_AFTER: Duration = Duration::from_millis(1500);
/// Width of the failover run's buckets.
const BUCKET: Duration = Duration::from_millis(100);

/// `ofi-xdp paths-bench`'s options.
#[derive(clap::Args)]
pub struct Opts {
    /// Rounds, each running every path setting once
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Spines of the fabric (2 or 4)
    #[arg(long, default_value_t = 2)]
    spines: usize,
    /// The rate every leaf–spine link is shaped to, each way, in Mbit/s
    #[arg(long, default_value_t = 200)]
    rate_mbit: u64,
    /// FI_XDP_PATHS values to run xdp with (comma-separated)
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    paths: Vec<u32>,
    /// MiB each run moves
    #[arg(long, default_value_t = 48)]
    mib_per_run: usize,
    /// Leave out the run with a spine going down in its middle
    #[arg(long)]
    no_failover: bool,
}

/// One run's figures.
struct Figures {
    mb_per_s: f64,
    /// Packets leaf 1 sent to each spine during the run.
    per_spine: Vec<u64>,
    /// The sender's engine: retransmits, fast retransmits, timeouts (`xdp` only).
    retransmissions: Option<[u64; 3]>,
}

/// `ofi-xdp paths-bench`: see the module documentation.
pub fn main(o: &Opts) -> Result<(), String> {
    if o.rounds == 0 || o.mib_per_run == 0 || o.rate_mbit == 0 {
        return Err("--rounds, --mib-per-run and --rate-mbit must be at least 1".into());
    }
    if o.paths.iter().any(|&p| !(1..=256).contains(&p)) {
        return Err("--paths takes values 1 to 256 (fi_xdp(7) FI_XDP_PATHS)".into());
    }
    let mut tool = Tool::build()?;
    tool.mib = o.mib_per_run;
    let net = LeafSpine::with_spines(1, o.spines, 1500)
        .map_err(|e| format!("creating the leaf-spine fabric: {e}"))?;
    net.shape(o.rate_mbit * 1_000_000, SHAPED_QUEUE)
        .map_err(|e| format!("shaping the fabric: {e}"))?;
    let (receiver, sender) = (&net.hosts[0], &net.hosts[1]);
    let spine_mb_per_s = o.rate_mbit as f64 / 8.0;
    eprintln!(
        "paths-bench: {} spines, every link shaped to {} Mbit/s ({spine_mb_per_s:.1} MB/s); \
         {sender} -> {receiver}",
        o.spines, o.rate_mbit
    );
    // FI_XDP_PATHS spreads what AF_XDP sends; large messages take the bulk path (the
    // kernel's UDP segmentation, one source port) by default: the paths runs turn it off.
    let mut specs: Vec<String> = vec!["xdp".into()];
    specs.extend(
        o.paths
            .iter()
            .map(|p| format!("xdp:FI_XDP_PATHS={p}+FI_XDP_BULK_PATH=off")),
    );
    specs.push("tcp".into());

    let mut table: Vec<(usize, String, Result<Figures, String>)> = Vec::new();
    for round in 1..=o.rounds {
        eprintln!("paths-bench: round {round} of {}", o.rounds);
        for spec in &specs {
            let r = one_run(&tool, &net, (receiver, sender), spec);
            if let Err(e) = &r {
                eprintln!("{e}");
            }
            table.push((round, label(spec), r));
        }
    }
    print_runs(&table, spine_mb_per_s, o.spines);
    let labels: Vec<String> = specs.iter().map(|s| label(s)).collect();
    print_summary(&table, &labels, spine_mb_per_s);

    let mut failed = table.iter().filter(|(_, _, r)| r.is_err()).count();
    if !o.no_failover {
        let paths = o.paths.iter().copied().max().unwrap_or(1).max(2);
        if let Err(e) = failover(&tool, &net, paths) {
            eprintln!("failover run: {e}");
            failed += 1;
        }
    }
    if failed == 0 {
        Ok(())
    } else {
        Err(format!("{failed} runs failed"))
    }
}

/// One run of `spec` from `sender` to `receiver` with the uplink counters around it.
fn one_run(
    tool: &Tool,
    net: &LeafSpine,
    hosts: (&Host, &Host),
    spec: &str,
) -> Result<Figures, String> {
    let counters = || {
        net.uplink_tx_packets(1)
            .map_err(|e| format!("leaf 1 counters: {e}"))
    };
    let xdp = spec.starts_with("xdp");
    let log: &[(&str, &str)] = if xdp {
        &[("FI_LOG_LEVEL", "info")]
    } else {
        &[]
    };
    let before = counters()?;
    let run = tool.run(hosts, spec, CASE, log)?;
    let after = counters()?;
    Ok(Figures {
        mb_per_s: run.sample.mb_per_s,
        per_spine: after
            .iter()
            .zip(&before)
            .map(|(a, b)| a.saturating_sub(*b))
            .collect(),
        retransmissions: xdp.then(|| retransmissions(&run.sender_stderr)),
    })
}

/// Retransmits, fast retransmits and timeouts in the closing log lines of the endpoints
/// (`rdm endpoint closed: engine Stats { …, retransmits: N, fast_retransmits: N,
/// timeouts: N, … }`), summed.
fn retransmissions(log: &str) -> [u64; 3] {
    let mut sum = [0u64; 3];
    for line in log
        .lines()
        .filter(|l| l.contains("endpoint closed: engine"))
    {
        for (i, key) in ["retransmits", "fast_retransmits", "timeouts"]
            .iter()
            .enumerate()
        {
            sum[i] += field(line, key).unwrap_or(0);
        }
    }
    sum
}

/// The value of ` key: N` (a whole field name, not the end of a longer one) in a `Debug` line.
fn field(line: &str, key: &str) -> Option<u64> {
    let at = line
        .match_indices(&format!("{key}: "))
        .find(|&(i, _)| i > 0 && matches!(line.as_bytes()[i - 1], b' ' | b'{'))?
        .0;
    line[at + key.len() + 2..]
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// "xdp paths=2 bulk off" for `xdp:FI_XDP_PATHS=2+FI_XDP_BULK_PATH=off`.
fn label(spec: &str) -> String {
    let Some((provider, env)) = spec.split_once(':') else {
        return spec.to_owned();
    };
    let mut out = provider.to_owned();
    for kv in env.split('+') {
        match kv.split_once('=') {
            Some(("FI_XDP_PATHS", n)) => out.push_str(&format!(" paths={n}")),
            Some(("FI_XDP_BULK_PATH", v)) => out.push_str(&format!(" bulk {v}")),
            _ => out.push_str(&format!(" {kv}")),
        }
    }
    out
}

fn print_runs(table: &[(usize, String, Result<Figures, String>)], spine: f64, spines: usize) {
    println!();
    println!("paths-bench: 1 MiB w16 tagged stream, leaf 1 -> leaf 0, one spine = {spine:.1} MB/s");
    let per_spine: Vec<String> = (0..spines).map(|s| format!("spine{s}")).collect();
    let header = per_spine.join(" / ");
    let w = header.len();
    println!(
        "{:>5}  {:<20} {:>8} {:>7}  {header:>w$}  {:>22}",
        "round", "path", "MB/s", "x spine", "retx / fast / timeouts"
    );
    for (round, spec, r) in table {
        match r {
            Ok(f) => {
                let counts: Vec<String> = f.per_spine.iter().map(u64::to_string).collect();
                let retx = f
                    .retransmissions
                    .map_or("-".into(), |[r, fa, t]| format!("{r} / {fa} / {t}"));
                println!(
                    "{round:>5}  {spec:<20} {:>8.1} {:>7.2}  {:>w$}  {retx:>22}",
                    f.mb_per_s,
                    f.mb_per_s / spine,
                    counts.join(" / "),
                );
            }
            Err(_) => println!("{round:>5}  {spec:<20} {:>8}", "failed"),
        }
    }
}

fn print_summary(
    table: &[(usize, String, Result<Figures, String>)],
    labels: &[String],
    spine: f64,
) {
    println!();
    println!("median [range] over rounds, as a multiple of one spine's rate:");
    for spec in labels {
        let ratios: Vec<f64> = table
            .iter()
            .filter(|(_, s, _)| s == spec)
            .filter_map(|(_, _, r)| r.as_ref().ok())
            .map(|f| f.mb_per_s / spine)
            .collect();
        println!("  {spec:<20} {}", spread(&ratios));
    }
}

/// A run of `xdp` with `paths` paths in which the spine carrying most of the data goes down
/// [`FAIL_AFTER`] in; the receiver's rate per [`BUCKET`] (its interface's received bytes).
fn failover(tool: &Tool, net: &LeafSpine, paths: u32) -> Result<(), String> {
    let (receiver, sender) = (&net.hosts[0], &net.hosts[1]);
    let spec = format!("xdp:FI_XDP_PATHS={paths}+FI_XDP_BULK_PATH=off");
    let stop = AtomicBool::new(false);
    let before = net
        .uplink_tx_packets(1)
        .map_err(|e| format!("leaf 1 counters: {e}"))?;
    let (run, samples, failed) = std::thread::scope(|s| {
        let sampler = s.spawn(|| receiver.try_run(|| sample_rx_bytes(receiver.ifname(), &stop)));
        let failer = s.spawn(|| {
            std::thread::sleep(FAIL_AFTER);
            // The spine that carried the most so far: the failure that hurts.
            let now = net.uplink_tx_packets(1).unwrap_or_default();
            let spine = (0..now.len())
                .max_by_key(|&i| now[i].saturating_sub(before.get(i).copied().unwrap_or(0)))
                .unwrap_or(0);
            let at = Instant::now();
            net.spine_down(spine).map(|()| (spine, at))
        });
        let run = tool.run((receiver, sender), &spec, CASE, &[("FI_LOG_LEVEL", "info")]);
        stop.store(true, Ordering::Relaxed);
        let samples = sampler.join();
        let failed = failer.join();
        (run, samples, failed)
    });
    let (spine, down_at) = match failed {
        Ok(Ok(f)) => f,
        Ok(Err(e)) => return Err(format!("taking a spine down: {e}")),
        Err(_) => return Err("the failing thread panicked".into()),
    };
    net.spine_up(spine)
        .map_err(|e| format!("bringing spine {spine} back: {e}"))?;
    let run = run?;
    let samples = match samples {
        Ok(Ok(s)) => s?,
        _ => return Err("the sampling thread failed".into()),
    };
    let [r, fa, t] = retransmissions(&run.sender_stderr);
    println!();
    println!(
        "failover: {spec}, spine {spine} down {:.1} s into the run: {:.1} MB/s overall, \
         retransmits {r}, fast {fa}, timeouts {t}",
        FAIL_AFTER.as_secs_f64(),
        run.sample.mb_per_s
    );
    // Per bucket: its end relative to the spine going down, MB/s.
    let buckets: Vec<(f64, f64)> = samples
        .windows(2)
        .map(|w| {
            let ((t0, b0), (t1, b1)) = (w[0], w[1]);
            let rel = t1.saturating_duration_since(down_at).as_secs_f64()
                - down_at.saturating_duration_since(t1).as_secs_f64();
            let secs = t1.duration_since(t0).as_secs_f64();
            (rel, b1.saturating_sub(b0) as f64 / secs / 1e6)
        })
        .collect();
    let mean = |from: f64, to: f64| {
        let v: Vec<f64> = buckets
            .iter()
            .filter(|(t, _)| (from..to).contains(t))
            .map(|&(_, r)| r)
            .collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    println!(
        "received: {:.1} MB/s in the second before, {:.1} MB/s from 0.5 s after to the end",
        mean(-1.0, 0.0),
        mean(0.5, f64::INFINITY)
    );
    println!("{:>8}  {:>8}", "t (s)", "MB/s");
    for (t, r) in buckets.iter().filter(|(t, _)| (-1.0..2.05).contains(t)) {
        println!("{t:>8.1}  {r:>8.1}");
    }
    println!("(t: end of the bucket, relative to the spine going down; -1 s to +2 s shown)");
    Ok(())
}

/// The bytes `ifname` received, every [`BUCKET`] until `stop`; run in the interface's
/// namespace (`/proc/thread-self/net/dev` is the calling thread's namespace's). Leading
/// samples before the stream starts and trailing ones after it ends are dropped.
fn sample_rx_bytes(ifname: &str, stop: &AtomicBool) -> Result<Vec<(Instant, u64)>, String> {
    let mut v = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        v.push((Instant::now(), rx_bytes(ifname)?));
        std::thread::sleep(BUCKET);
    }
    v.push((Instant::now(), rx_bytes(ifname)?));
    let moved = |w: &[(Instant, u64)]| w[1].1.saturating_sub(w[0].1) > 64 << 10;
    let first = v.windows(2).position(moved).unwrap_or(0);
    let last = v.windows(2).rposition(moved).map_or(v.len(), |i| i + 2);
    Ok(v[first..last].to_vec())
}

/// `ifname`'s received bytes from `/proc/thread-self/net/dev`.
fn rx_bytes(ifname: &str) -> Result<u64, String> {
    let text = std::fs::read_to_string("/proc/thread-self/net/dev")
        .map_err(|e| format!("/proc/thread-self/net/dev: {e}"))?;
    text.lines()
        .find_map(|l| {
            let (name, rest) = l.split_once(':')?;
            (name.trim() == ifname).then(|| rest.split_whitespace().next()?.parse().ok())?
        })
        .ok_or_else(|| format!("{ifname} not in /proc/thread-self/net/dev"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_closing_statistics() {
        let log = "libfabric:1:xdp:ep_data:x():1: rdm endpoint closed: engine Stats { \
                   rx_datagrams: 10, tx_datagrams: 20, corrupt: 0, duplicates: 1, dropped: 0, \
                   retransmits: 7, fast_retransmits: 3, timeouts: 2, rnr_sent: 0 }\n\
                   other line retransmits: 100\n";
        assert_eq!(retransmissions(log), [7, 3, 2]);
        assert_eq!(field("Stats { retransmits: 5 }", "retransmits"), Some(5));
        assert_eq!(field("Stats { fast_retransmits: 5 }", "retransmits"), None);
    }
}
