//! `cargo xtask …` — the project's one entry point for people and CI.
//!
//! Every subcommand first makes sure the system packages in `xtask/apt-packages.txt` are
//! installed (`apt-get update` + `apt-get install` of the missing ones), so a fresh machine
//! needs nothing done by hand. See README.md for what each command is for.

use std::path::PathBuf;
use std::process::ExitCode;

use xtask::{deps, fabtests, figures, install, package, progress, steps};

const USAGE: &str = "\
usage: cargo xtask <command> [args]

commands:
  deps                      install the Debian packages the project needs (only the missing ones)
  build                     build libxdp-fi.so into target/libfabric/ and the tools
  demo                      the main job: two test hosts, fi_pingpong over xdp beside tcp
  test                      the whole test suite (what CI runs)
  install [--prefix DIR] [--no-build]
                            build, then install the provider where libfabric looks for
                            providers (no FI_PROVIDER_PATH needed), ofi-xdp and fi_xdp(7)
                            under /usr/local; with --prefix, everything under DIR
  uninstall [--prefix DIR]  remove exactly what install put there
  package                   build target/debian/ofi-xdp_<version>_<arch>.deb (dpkg -i it;
                            dpkg --purge ofi-xdp removes it)
  bench link|engine|provider|stream|paths|local|incast|imb|latency-path|instructions
                     print benchmark tables (figures, not tests); `bench
                     provider|stream|paths|local|incast|imb [--rounds N …]` pass their options
                     on (`bench provider --record`: its rounds into
                     docs/results/provider.csv; `bench imb --imb PATH/IMB-MPI1`: Intel
                     MPI Benchmarks built from source); `bench instructions`:
                     callgrind's instructions per 64 B message, per feature, beside
                     xtask/instruction-budget.toml
  figures [--check]          put the newest run of docs/results/provider.csv (`bench provider
                            --record` appends each run there) into README.md,
                            docs/performance.md and fi_xdp(7); --check: fail if they differ
  vm-test [--kernel 6.1|6.12|all] [--shell]  the end-to-end suite inside QEMU on Debian kernels
  sim-full                  the full 1,000,000-message engine simulation
  fuzz [seconds]            bounded-time fuzzing of the engine's input surfaces
  fabtests --src DIR [--libfabric PREFIX] [--mtu N] [--one-host] [--complex [FILE]] [-- runfabtests.sh options]
                            build libfabric's fabtests from the libfabric source tree DIR
                            (outside the repository; release 1.17 for Debian's libfabric,
                            or --libfabric PREFIX: the release installed there, built from
                            its sources, which the tests then run with) and run them over
                            xdp between two test hosts, or in one (--one-host: shared
                            memory) (default: the short and functional sets; --complex:
                            fi_ubertest with xtask/fabtests/ubertest.xdp or FILE, one entry
                            per run); skipped, saying why, without DIR
";

/// `--prefix DIR` and the flags in `flags`, or an error naming what is not understood.
fn prefix_and_flags(
    args: &[String],
    flags: &[&str],
) -> Result<(Option<PathBuf>, Vec<String>), String> {
    let mut prefix = None;
    let mut seen = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--prefix" => {
                let dir = it.next().ok_or("--prefix needs a directory")?;
                prefix = Some(PathBuf::from(dir));
            }
            f if flags.contains(&f) => seen.push(f.to_owned()),
            other => return Err(format!("unexpected argument `{other}`\n{USAGE}")),
        }
    }
    Ok((prefix, seen))
}

fn install_command(args: &[String]) -> Result<(), String> {
    let (prefix, flags) = prefix_and_flags(args, &["--no-build"])?;
    if !flags.iter().any(|f| f == "--no-build") {
        progress::step("build the provider and the tools", steps::build)?;
    }
    let t = install::install(&package::Artifacts::built(), prefix.as_deref())?;
    for f in [&t.provider, &t.tool, &t.man_page] {
        eprintln!("xtask: installed {}", f.display());
    }
    match &prefix {
        Some(_) => eprintln!(
            "xtask: libfabric finds the provider with FI_PROVIDER_PATH={}",
            t.provider.parent().unwrap_or(&t.provider).display()
        ),
        None => eprintln!("xtask: `fi_info -p xdp` finds it without FI_PROVIDER_PATH"),
    }
    Ok(())
}

fn uninstall_command(args: &[String]) -> Result<(), String> {
    let (prefix, _) = prefix_and_flags(args, &[])?;
    for p in install::uninstall(prefix.as_deref())? {
        eprintln!("xtask: removed {}", p.display());
    }
    Ok(())
}

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
        "install" => deps::ensure_installed().and_then(|()| install_command(rest)),
        "uninstall" => uninstall_command(rest),
        "package" => deps::ensure_installed().and_then(|()| package::package().map(|_| ())),
        "bench" => deps::ensure_installed().and_then(|()| steps::bench(rest)),
        "figures" => figures::figures(rest),
        "vm-test" => deps::ensure_installed().and_then(|()| steps::vm_test(rest)),
        "sim-full" => steps::sim_full(),
        "fuzz" => steps::fuzz(rest),
        "fabtests" => deps::ensure_installed().and_then(|()| fabtests::fabtests(rest)),
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
