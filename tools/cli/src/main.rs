//! `ofi-xdp`: command-line tools for people.
//!
//! Subcommands:
//! - `link-pingpong` — raw AF_XDP link latency and packet rate beside a kernel
//!   UDP socket (the project's physical floor); `--driver` does it all.
//! - `link-demo` — send a few datagrams through the XDP program and the link
//!   between two test hosts, print what arrived and the counters.
//! - `demo` — Debian's `fi_pingpong` over the `xdp` provider beside `tcp`.
//! - `provider-bench` — the provider's latency and bandwidth beside `tcp`, `udp;ofi_rxd` and
//!   the raw link floor, with the ratios the targets compare.
//! - `stream-bench` — streaming bandwidth and message rate with a window of messages in flight,
//!   beside `tcp`, `udp;ofi_rxd` and the raw link, at MTU 1500 and 9000; RMA writes and reads
//!   too with `--ops tagged,write,read`.
//! - `paths-bench` — one stream across a shaped leaf–spine fabric: `xdp` with several
//!   `FI_XDP_PATHS` beside `tcp`, the spread over the spines, and a spine failing mid-run.
//! - `latency-path` — cycles per step of the small-message path (provider built with the
//!   `probes` feature).
//! - `local-bench` — two processes on one host: `xdp` (shared memory) beside `shm`, `tcp`,
//!   `xdp` on its kernel socket and `xdp` without its single copy of large messages.
//! - `incast` — 4 and 8 senders to one receiver over `xdp` and `tcp`: aggregate and
//!   per-sender throughput, retransmissions.
//! - `status` — the steering program on each interface, its ports and counters, the
//!   endpoints' own figures (`--watch` refreshes).
//! - `cleanup` — removes what a killed process left (programs attached through netlink,
//!   pinned links and objects, statistics files), never anything that is not ours.
//! - `completions` — a shell completion script.
//!
//! The command line is clap's: `ofi-xdp COMMAND --help` lists a command's options.

mod c_program;
mod child;
mod cleanup;
mod compare;
mod demo;
mod fi_pingpong;
mod host;
mod imb;
mod incast;
mod incast_settle;
mod live_netns;
mod local_bench;
mod pingpong;
mod stats;
mod status;
mod stream;
mod wire;

use clap::{Parser, Subcommand};

/// Tools for people running or developing the xdp libfabric provider.
#[derive(Parser)]
#[command(
    name = "ofi-xdp",
    version,
    after_help = "All need root (network namespaces, XDP, AF_XDP, reading BPF objects by id)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Per interface: our XDP program (mode, id, load time, the process holding it), steered
    /// UDP ports -> XSKMAP slots, counters, and each endpoint's statistics
    Status(status::Opts),
    /// Remove what a killed process left: our programs attached through netlink or kept by a
    /// pinned link, pins, stale statistics files, areas, rule records and AF_XDP group files;
    /// never a program that is not ours
    Cleanup(cleanup::Opts),
    /// Raw AF_XDP link round-trip latency and packet rate beside kernel UDP (try: --driver)
    LinkPingpong(pingpong::Opts),
    /// A few datagrams through XDP steering and the AF_XDP link between two test namespaces
    LinkDemo(demo::Opts),
    /// fi_pingpong -p xdp beside -p tcp between two test hosts (needs FI_PROVIDER_PATH)
    Demo(compare::DemoOpts),
    /// 64 B latency and 1 MiB bandwidth of xdp beside tcp, udp;ofi_rxd and the raw link
    /// floor, in interleaved rounds
    ProviderBench(compare::BenchOpts),
    /// Streaming bandwidth (a window of tagged messages in flight, as fi_rdm_tagged_bw) and
    /// 64 B message rate of xdp beside tcp, udp;ofi_rxd and the raw link, at MTU 1500 and
    /// 9000; RMA writes and reads too with `--ops tagged,write,read` (as fi_rma_bw); tables,
    /// ratios, SVG plots and a CSV
    StreamBench(stream::Opts),
    /// One 1 MiB window-16 stream across a leaf–spine fabric whose links are shaped to one
    /// rate: xdp with several FI_XDP_PATHS beside tcp, the rate as a multiple of one spine's,
    /// packets per spine, retransmissions; then a spine going down mid-run, in 100 ms buckets
    PathsBench(stream::paths::Opts),
    /// Where a 64 B ping-pong's userspace time goes, in cycles per step (a provider built with
    /// the probes feature: cargo xtask bench latency-path)
    LatencyPath(compare::LatencyOpts),
    /// Intel MPI Benchmarks (PingPong, Uniband) under Open MPI, one rank per test host, xdp
    /// beside tcp at MTU 1500 and 9000
    ImbBench(imb::Opts),
    /// Two processes on one host: 64 B latency and 1 MiB bandwidth of xdp (shared memory)
    /// beside shm, tcp, and xdp's other local paths (kernel socket, rings only, receiver-only
    /// copies, no direct messages, a job key)
    LocalBench(local_bench::Opts),
    /// N senders stream 1 MiB messages to one receiver on a bridge, xdp beside tcp
    Incast(incast::Opts),
    /// Print a completion script for SHELL (e.g. `ofi-xdp completions bash >
    /// /etc/bash_completion.d/ofi-xdp`)
    Completions {
        #[arg(value_name = "SHELL")]
        shell: clap_complete::Shell,
    },
}

fn main() {
    let cli = Cli::parse();
    let (name, result) = match &cli.command {
        Command::Status(o) => ("status", status::main(o)),
        Command::Cleanup(o) => ("cleanup", cleanup::main(o)),
        Command::LinkPingpong(o) => ("link-pingpong", pingpong::main(o)),
        Command::LinkDemo(o) => ("link-demo", demo::main(o)),
        Command::Demo(o) => ("demo", compare::demo(o)),
        Command::ProviderBench(o) => ("provider-bench", compare::bench(o)),
        Command::StreamBench(o) => ("stream-bench", stream::main(o)),
        Command::PathsBench(o) => ("paths-bench", stream::paths::main(o)),
        Command::LatencyPath(o) => ("latency-path", compare::latency_path(o)),
        Command::ImbBench(o) => ("imb-bench", imb::main(o)),
        Command::LocalBench(o) => ("local-bench", local_bench::main(o)),
        Command::Incast(o) => ("incast", incast::main(o)),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            let mut cmd = Cli::command();
            clap_complete::generate(*shell, &mut cmd, "ofi-xdp", &mut std::io::stdout());
            ("completions", Ok(()))
        }
    };
    if let Err(e) = result {
        eprintln!("ofi-xdp {name}: {e}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn completions_know_the_commands_and_options() {
        let mut out = Vec::new();
        clap_complete::generate(
            clap_complete::Shell::Bash,
            &mut Cli::command(),
            "ofi-xdp",
            &mut out,
        );
        let script = String::from_utf8(out).unwrap();
        assert!(script.contains("link-pingpong") && script.contains("--stats-dir"));
    }
}
