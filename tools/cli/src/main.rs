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
//!   beside `tcp`, `udp;ofi_rxd` and the raw link, at MTU 1500 and 9000.
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

mod args;
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

const USAGE: &str = "\
usage: ofi-xdp <command> [options]

commands:
  status          per interface: our XDP program (mode, id, load time, the
                  process holding it), steered UDP ports -> XSKMAP slots,
                  counters, and each endpoint's statistics
                  [--watch [SECS]] [--count N] [--netns NAME] [--dev IFNAME]
                  [--stats-dir DIR]
  cleanup         remove what a killed process left: our programs attached
                  through netlink or kept by a pinned link, pins, stale
                  statistics files; never a program that is not ours
                  [--dry-run] [--netns NAME] [--dev IFNAME] [--stats-dir DIR]
  link-pingpong   raw AF_XDP link round-trip latency and packet rate beside
                  kernel UDP (try: ofi-xdp link-pingpong --driver)
  link-demo       a few datagrams through XDP steering and the AF_XDP link
                  between two test namespaces [--mode generic|native] [--count 5]
  demo            fi_pingpong -p xdp beside -p tcp between two test hosts
                  [--sizes all] [--iters 100]; needs FI_PROVIDER_PATH
  provider-bench  64 B latency and 1 MiB bandwidth of xdp beside tcp,
                  udp;ofi_rxd and the raw link floor, in interleaved rounds
                  [--rounds 5] [--iters 10000] [--big-iters 200]
  stream-bench    streaming bandwidth (a window of tagged messages in flight,
                  as fi_rdm_tagged_bw) and 64 B message rate of xdp beside tcp,
                  udp;ofi_rxd and the raw link's packet rate, at MTU 1500 and
                  9000; prints tables and ratios, writes SVG plots and a CSV
                  [--rounds 3] [--mtus 1500,9000] [--sizes …] [--windows 1,16,64]
                  [--providers xdp,tcp,udp;ofi_rxd] [--out DIR]
  latency-path    where a 64 B ping-pong's userspace time goes, in cycles per
                  step (needs a provider built with the probes feature:
                  cargo xtask bench latency-path) [--iters 20000]
                  [--local: both processes in one test host]
  imb-bench       Intel MPI Benchmarks (PingPong, Uniband) under Open MPI, one
                  rank per test host, xdp beside tcp at MTU 1500 and 9000
                  --imb PATH/IMB-MPI1 [--rounds 3] [--sizes …] [--providers …]
  local-bench     two processes on one host: 64 B latency and 1 MiB bandwidth
                  of xdp (shared memory) beside shm, tcp, xdp on its kernel
                  socket, xdp through its rings only (FI_XDP_LOCAL_CMA=0) and
                  xdp whose receiver copies alone (FI_XDP_LOCAL_SHARED_PULL=0),
                  xdp without direct messages (FI_XDP_LOCAL_DIRECT=0) and
                  xdp with a job key (xdp+auth)
                  [--rounds 3] [--iters 10000] [--big-iters 200]
                  [--big-size 1048576] [--mtu 9000]
  incast          N senders stream 1 MiB messages to one receiver on a bridge,
                  xdp beside tcp [--rounds 3] [--senders 4,8] [--msgs 32] [--providers xdp,tcp]

All need root (network namespaces, XDP, AF_XDP, reading BPF objects by id).";

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let Some((cmd, rest)) = argv.split_first() else {
        eprintln!("{USAGE}");
        std::process::exit(2);
    };
    let result = match cmd.as_str() {
        "link-pingpong" => pingpong::main(rest),
        "link-demo" => demo::main(rest),
        "demo" => compare::demo(rest),
        "provider-bench" => compare::bench(rest),
        "latency-path" => compare::latency_path(rest),
        "incast" => incast::main(rest),
        "local-bench" => local_bench::main(rest),
        "stream-bench" => stream::main(rest),
        "imb-bench" => imb::main(rest),
        "status" => status::main(rest),
        "cleanup" => cleanup::main(rest),
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            Ok(())
        }
        other => Err(format!("unknown command {other:?}\n{USAGE}")),
    };
    if let Err(e) = result {
        eprintln!("ofi-xdp {cmd}: {e}");
        std::process::exit(1);
    }
}
