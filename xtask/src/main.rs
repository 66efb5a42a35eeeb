//! `cargo xtask …` — the project's one entry point for people and CI.
//!
//! Every subcommand first makes sure the system packages in `xtask/apt-packages.txt` are
//! installed (`apt-get update` + `apt-get install` of the missing ones), so a fresh machine
//! needs nothing done by hand. See README.md for what each command is for.

mod deps;
mod steps;

use std::process::ExitCode;

const USAGE: &str = "\
usage: cargo xtask <command> [args]

commands:
  deps                      install the Debian packages the project needs (only the missing ones)
  build                     build libxdp-fi.so into target/libfabric/ and the tools
  demo                      the main job: two test hosts, fi_pingpong over xdp beside tcp
  test                      the whole test suite (what CI runs)
  bench link|engine|provider|incast|latency-path  print benchmark tables (figures, not tests)
  vm-test [--kernel 6.1|6.12|all] [--shell]  the end-to-end suite inside QEMU on Debian kernels
  sim-full                  the full 1,000,000-message engine simulation
  fuzz [seconds]            bounded-time fuzzing of the engine's input surfaces
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((command, rest)) = args.split_first() else {
        eprint!("{USAGE}");
        return ExitCode::FAILURE;
    };
    let result = match command.as_str() {
        "deps" => deps::ensure_installed(),
        "build" => deps::ensure_installed().and_then(|()| steps::build()),
        "demo" => deps::ensure_installed().and_then(|()| steps::demo()),
        "test" => deps::ensure_installed().and_then(|()| steps::test()),
        "bench" => deps::ensure_installed().and_then(|()| steps::bench(rest)),
        "vm-test" => deps::ensure_installed().and_then(|()| steps::vm_test(rest)),
        "sim-full" => steps::sim_full(),
        "fuzz" => steps::fuzz(rest),
        "help" | "-h" | "--help" => {
            print!("{USAGE}");
            Ok(())
        }
        other => Err(format!("unknown command `{other}`\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}
