//! The steps behind each `cargo xtask` command: thin wrappers over cargo and the project's
//! own binaries, so that what CI runs and what a person runs are the same commands.

use std::path::{Path, PathBuf};
use std::process::Command;

use ofi_xdp_testhosts::skip;

/// The workspace root (the parent of this crate's directory).
pub fn project_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// Cargo's target directory, honouring `CARGO_TARGET_DIR`.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => project_root().join("target"),
    }
}

/// Where `cargo xtask build` puts the provider under the name libfabric's loader looks for.
pub fn provider_dir() -> PathBuf {
    target_dir().join("libfabric")
}

/// Runs a command from the project root, failing with the command line when it fails.
/// Prints how long it took.
pub fn run(mut cmd: Command) -> Result<(), String> {
    cmd.current_dir(project_root());
    let line = format!("{cmd:?}");
    let t0 = std::time::Instant::now();
    let status = cmd
        .status()
        .map_err(|e| format!("cannot start {line}: {e}"))?;
    let took = crate::progress::elapsed(t0.elapsed());
    if status.success() {
        eprintln!("xtask: done in {took}: {}", short(&line));
        Ok(())
    } else {
        Err(format!("{line} failed ({status}) after {took}"))
    }
}

/// A command line without its quoting, cut to a line's width.
fn short(line: &str) -> String {
    let plain: String = line.chars().filter(|c| *c != '"').collect();
    match plain.char_indices().nth(100) {
        Some((i, _)) => format!("{}…", &plain[..i]),
        None => plain,
    }
}

fn cargo(args: &[&str]) -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.args(args);
    cmd
}

/// Builds the provider and the tools in release mode and installs the provider as
/// `target/libfabric/libxdp-fi.so` (cargo cannot put a hyphen in a library's file name).
pub fn build() -> Result<(), String> {
    run(cargo(&[
        "build",
        "--release",
        "-p",
        "ofi-xdp-provider",
        "-p",
        "ofi-xdp-tools",
    ]))?;
    let built = target_dir().join("release").join("libxdp_fi.so");
    let dir = provider_dir();
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let installed = place_library(&built, &dir)?;
    eprintln!(
        "xtask: provider installed as {} (use FI_PROVIDER_PATH={})",
        installed.display(),
        dir.display()
    );
    Ok(())
}

/// Builds the provider with the `probes` feature (cycle counts along the small-message path)
/// in a target directory of its own, so the normal build is not rebuilt after it; returns the
/// directory holding it as `libxdp-fi.so`, for FI_PROVIDER_PATH.
fn build_with_probes() -> Result<PathBuf, String> {
    let target = target_dir().join("probes");
    let target_arg = target.display().to_string();
    run(cargo(&[
        "build",
        "--release",
        "-p",
        "ofi-xdp-provider",
        "--lib",
        "--features",
        "probes",
        "--target-dir",
        &target_arg,
    ]))?;
    let dir = target.join("libfabric");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let built = target.join("release").join("libxdp_fi.so");
    place_library(&built, &dir)?;
    Ok(dir)
}

/// Puts `built` into `dir` as `libxdp-fi.so`, beside and renamed over the
/// old one ([`crate::package::place`]): another run's tests, in the same
/// tree, may be running with the old one.
fn place_library(built: &Path, dir: &Path) -> Result<PathBuf, String> {
    let installed = dir.join("libxdp-fi.so");
    crate::package::place(built, &installed, 0o755)?;
    Ok(installed)
}

/// The project's tool binary, built by [`build`].
fn tool() -> Command {
    let mut cmd = Command::new(target_dir().join("release").join("ofi-xdp"));
    cmd.env("FI_PROVIDER_PATH", provider_dir());
    cmd
}

/// The main job: two test hosts, traffic over the xdp provider beside the tcp provider.
pub fn demo() -> Result<(), String> {
    require_root("demo")?;
    build()?;
    let mut cmd = tool();
    cmd.arg("demo");
    run(cmd)
}

/// The whole test suite, as CI runs it: formatting, lints, documentation, the workspace's
/// tests (unit, simulation, veth, provider C suite) and the VM suite on the oldest kernel we
/// promise.
pub fn test() -> Result<(), String> {
    use crate::progress::step;
    require_root("test")?;
    step("formatting (cargo fmt --check)", || {
        run(cargo(&["fmt", "--all", "--", "--check"]))
            .map_err(|e| format!("{e}\nrun `cargo fmt --all` to fix the formatting"))
    })?;
    step("lints (cargo clippy)", || {
        run(cargo(&[
            "clippy",
            "--workspace",
            "--all-targets",
            "--release",
            "--",
            "-D",
            "warnings",
        ]))
    })?;
    step("documentation (cargo doc, warnings denied)", || {
        // A broken or private intra-doc link is a newcomer's dead end.
        let mut doc = cargo(&["doc", "--workspace", "--no-deps", "--release"]);
        doc.env("RUSTDOCFLAGS", "-D warnings");
        run(doc)
    })?;
    step("build the provider and the tools", build)?;
    step(
        "instructions per 64 B message (callgrind) within xtask/instruction-budget.toml",
        crate::instructions::check,
    )?;
    let before = testhost_netns()?;
    // Tests whose prerequisite is missing here record themselves in this file
    // (`ofi_xdp_testhosts::skip`); the summary ends the run.
    let skip_log = target_dir().join("skipped-tests.log");
    let _ = std::fs::remove_file(&skip_log);
    let tests = step("the workspace's tests (cargo test --workspace)", || {
        let mut tests = cargo(&["test", "--workspace", "--release"]);
        tests.env("FI_PROVIDER_PATH", provider_dir());
        tests.env(skip::SKIP_LOG_ENV, &skip_log);
        run(tests)
    });
    let ran = tests.and_then(|()| leftover_check(&before)).and_then(|()| {
        step("the VM suite on Linux 6.1", || {
            vm_test(&["--kernel".into(), "6.1".into()])
        })
    });
    eprintln!(
        "xtask: the workspace's tests: {} (the VM suite lists its own above)",
        skip::summary(&skip::read_log(&skip_log))
    );
    ran
}

/// Fails when a test of this run left a network namespace of ours behind: cleanup on drop is
/// part of what the suite asserts. Test-host namespaces are named `oxt-<pid>-<n>-<a|b>`; one
/// whose creating process is gone is a leftover (a live PID is another run still in
/// progress). Those that existed before the run (`before`: left by an earlier, killed run,
/// on this host or in this container) are not this run's.
fn leftover_check(before: &[String]) -> Result<(), String> {
    let leftovers: Vec<String> = testhost_netns()?
        .into_iter()
        .filter(|name| !before.contains(name))
        .filter(|name| {
            name.strip_prefix(TESTHOST_PREFIX)
                .and_then(|rest| rest.split('-').next())
                .is_some_and(|pid| !Path::new("/proc").join(pid).exists())
        })
        .collect();
    if leftovers.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "tests left network namespaces behind: {}",
            leftovers.join(", ")
        ))
    }
}

/// The test-host namespaces that exist now (`ip netns list`).
fn testhost_netns() -> Result<Vec<String>, String> {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map_err(|e| format!("cannot run `ip netns list`: {e}"))?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| name.starts_with(TESTHOST_PREFIX))
        .map(str::to_owned)
        .collect())
}

/// Prefix of every namespace the test-hosts library creates (`oxt-<pid>-<n>-<a|b>`).
const TESTHOST_PREFIX: &str = "oxt-";

pub fn bench(args: &[String]) -> Result<(), String> {
    require_root("bench")?;
    let which = args.first().map(String::as_str).unwrap_or("all");
    let link = || -> Result<(), String> {
        build()?;
        let mut cmd = tool();
        cmd.args(["link-pingpong", "--driver"]);
        run(cmd)
    };
    let engine = || {
        run(cargo(&[
            "bench",
            "-p",
            "ofi-xdp-reliability",
            "--bench",
            "engine",
        ]))
    };
    let provider = || -> Result<(), String> {
        build()?;
        // Every figure of every round goes to a file whose path the benchmark prints.
        let dir = target_dir().join("bench");
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let csv = dir.join(format!("provider-{stamp}.csv"));
        // --record: the run's rounds go to docs/results/provider.csv, which the documents'
        // figures come from (`cargo xtask figures`).
        let rest = &args[1.min(args.len())..];
        let record = rest.iter().any(|a| a == "--record");
        let mut cmd = tool();
        cmd.arg("provider-bench").arg("--csv").arg(&csv);
        cmd.args(rest.iter().filter(|a| *a != "--record"));
        run(cmd)?;
        if record {
            crate::figures::record(&csv)?;
        }
        Ok(())
    };
    // The tool's benchmark `sub`, given the rest of the arguments.
    let tool_bench = |sub: &str| -> Result<(), String> {
        build()?;
        let mut cmd = tool();
        cmd.arg(sub);
        cmd.args(&args[1.min(args.len())..]);
        run(cmd)
    };
    let incast = || tool_bench("incast");
    // Streaming bandwidth and message rate at MTU 1500 and 9000: tables, ratios, SVG plots
    // and a CSV in target/bench.
    let stream = || -> Result<(), String> {
        build()?;
        let dir = target_dir().join("bench");
        let mut cmd = tool();
        cmd.arg("stream-bench").arg("--out").arg(dir);
        cmd.args(&args[1.min(args.len())..]);
        run(cmd)
    };
    // One stream across a shaped leaf–spine fabric: xdp with several FI_XDP_PATHS beside tcp,
    // the spread over the spines, a spine failing mid-run.
    let paths = || tool_bench("paths-bench");
    // Intel MPI Benchmarks under Open MPI, xdp beside tcp; needs `--imb PATH/IMB-MPI1` (IMB is
    // built from its sources, which CI does not have: without it the step says it is skipped).
    let imb = || tool_bench("imb-bench");
    let latency_path = || -> Result<(), String> {
        build()?;
        let mut cmd = tool();
        cmd.arg("latency-path")
            .env("FI_PROVIDER_PATH", build_with_probes()?);
        cmd.args(&args[1.min(args.len())..]);
        run(cmd)
    };
    // Two processes on one host: xdp's shared-memory path beside libfabric's shm and tcp.
    let local = || tool_bench("local-bench");
    match which {
        "link" => link(),
        "local" => local(),
        "engine" => engine(),
        "provider" => provider(),
        "stream" => stream(),
        "paths" => paths(),
        "latency-path" => latency_path(),
        "incast" => incast(),
        "imb" => imb(),
        // Deterministic counts of the small-message path (xtask/src/instructions.rs).
        "instructions" => crate::instructions::bench(),
        "all" => link()
            .and_then(|()| engine())
            .and_then(|()| provider())
            .and_then(|()| stream())
            .and_then(|()| local())
            .and_then(|()| incast()),
        other => Err(format!(
            "unknown benchmark `{other}` (link, engine, provider, stream, paths, local, incast, imb, latency-path, instructions or all)"
        )),
    }
}

pub fn vm_test(args: &[String]) -> Result<(), String> {
    require_root("vm-test")?;
    let mut cmd = cargo(&["run", "--release", "-p", "ofi-xdp-vm-tests", "--"]);
    cmd.args(args);
    run(cmd)
}

/// The full-size engine simulation: 1,000,000 messages among 8 endpoints, each delivered
/// exactly once.
pub fn sim_full() -> Result<(), String> {
    let mut cmd = cargo(&[
        "test",
        "--release",
        "-p",
        "ofi-xdp-reliability",
        "--test",
        "sim_stress",
        "--",
        "--nocapture",
    ]);
    cmd.env("SIM_MESSAGES", "1000000");
    run(cmd)
}

/// Bounded-time fuzzing of the packet decoder and the engine (stable-toolchain harness).
pub fn fuzz(args: &[String]) -> Result<(), String> {
    let seconds = args.first().map(String::as_str).unwrap_or("60");
    let mut cmd = cargo(&[
        "test",
        "--release",
        "-p",
        "ofi-xdp-reliability",
        "--test",
        "fuzz",
        "--",
        "--nocapture",
    ]);
    cmd.env("FUZZ_SECS", seconds);
    run(cmd)
}

fn require_root(what: &str) -> Result<(), String> {
    if crate::deps::is_root() {
        Ok(())
    } else {
        Err(format!(
            "`cargo xtask {what}` creates network namespaces and attaches XDP programs: run it as root"
        ))
    }
}
