//! OpenSHMEM over the provider: Sandia OpenSHMEM (SOS) built with its OFI
//! transport against the system's libfabric, and its unit tests
//! (`modules/tests-sos/test/unit`, what SOS's `make check` runs) launched
//! with `SHMEM_OFI_PROVIDER=xdp`, PEs split between the two test hosts —
//! every put, get, atomic and signal crosses the veth pair as the
//! provider's RMA and atomics.
//!
//! SOS is not in Debian: `OFI_XDP_SOS` names an SOS source tree (release
//! 1.5.x, `autogen.sh` run, the `modules/tests-sos` submodule present;
//! README, "OpenSHMEM", says how to get one). Each configuration is built
//! out of tree under `OFI_XDP_SOS_BUILD` (default `target/sos`) as
//! `build-<name>` and rebuilt only as `make` finds needed. Without
//! `OFI_XDP_SOS` the tests say they are skipped. `OFI_XDP_SOS_TESTS` (unit
//! test names, space-separated) runs only those.
//!
//! SOS finds its PEs through PMIx, which Open MPI's `mpirun` serves (as for
//! `tests/mpi.rs`): `make check` runs each unit test through a launcher
//! script (`TEST_RUNNER`) that starts half the PEs in one host's namespace
//! and half in the other's.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::process::Command;

use ofi_xdp_testhosts::HostPair;

mod common;
use common::{one_at_a_time, wait_running, work_dir};

/// Longest one unit test may run, seconds (a hang must fail that test, not
/// the suite). `bigget` (1 000 gets of 16 MiB per PE) takes about three
/// minutes at the provider's bulk rate on a busy two-core machine.
const TEST_TIMEOUT: u32 = 300;

/// The SOS source tree, or `None` after saying the tests are skipped.
fn sos_src() -> Option<PathBuf> {
    let src = std::env::var_os("OFI_XDP_SOS").map(PathBuf::from);
    match src {
        Some(p) if p.join("configure").exists() && p.join("modules/tests-sos/test").exists() => {
            Some(p)
        }
        _ => {
            ofi_xdp_testhosts::skip::skip(
                "OFI_XDP_SOS does not name a Sandia OpenSHMEM source tree with `configure` (run \
                 autogen.sh) and modules/tests-sos (README, \"OpenSHMEM\")",
            );
            None
        }
    }
}

/// Where the builds go.
fn build_root() -> PathBuf {
    std::env::var_os("OFI_XDP_SOS_BUILD")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/sos"))
}

/// Run `cmd` in `dir`, its output to `dir/<log>`; panics with the log's
/// tail when it fails.
fn run_logged(dir: &Path, log: &str, cmd: &mut Command) {
    let file = std::fs::File::create(dir.join(log)).unwrap();
    let status = cmd
        .current_dir(dir)
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .status()
        .unwrap_or_else(|e| panic!("run {cmd:?}: {e}"));
    if !status.success() {
        let text = std::fs::read_to_string(dir.join(log)).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(30).collect();
        panic!(
            "{cmd:?} failed ({status}) in {}:\n{}",
            dir.display(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
}

/// SOS configured with `options` in `build_root()/build-<name>`, its
/// library and unit tests built.
fn build(src: &Path, name: &str, options: &[&str]) -> PathBuf {
    let _turn = one_at_a_time("sos-build");
    let dir = build_root().join(format!("build-{name}"));
    std::fs::create_dir_all(&dir).unwrap();
    if !dir.join("Makefile").exists() {
        run_logged(
            &dir,
            "configure.log",
            Command::new(src.join("configure"))
                // SOS's OFI transport on the system libfabric; PMIx as
                // Open MPI's mpirun serves it (Debian's libpmix-dev).
                .args([
                    "--with-ofi=/usr",
                    "--with-pmix=/usr/lib/x86_64-linux-gnu/pmix2",
                    "--disable-fortran",
                ])
                .args(options),
        );
    }
    let jobs = format!(
        "-j{}",
        std::thread::available_parallelism().map_or(2, |n| n.get())
    );
    run_logged(&dir, "make.log", Command::new("make").arg(&jobs));
    // The unit tests, built without running them.
    run_logged(
        &dir,
        "make-tests.log",
        Command::new("make").args([
            &jobs,
            "-C",
            "modules/tests-sos/test/unit",
            "check",
            "TESTS=",
        ]),
    );
    dir
}

/// A launcher for `make check`'s TEST_RUNNER: `mpirun` in `pair.a`'s
/// namespace starting `np` PEs of the program it is given, the first half
/// there and the rest in `pair.b`'s, with SOS on the xdp provider.
fn launcher(pair: &HostPair, np: usize) -> PathBuf {
    let in_a = np / 2;
    let in_b = np - in_a;
    let ifname = pair.a.ifname();
    let path = work_dir().join(format!("shmem-launch-{}-{np}", pair.a.netns()));
    let script = format!(
        "#!/bin/sh\n\
         # {np} PEs of \"$@\": {in_a} in {a}, {in_b} in {b}.\n\
         export FI_PROVIDER_PATH={provider}\n\
         export SHMEM_OFI_PROVIDER=xdp\n\
         export FI_LOG_LEVEL=warn\n\
         export PMIX_MCA_ptl_tcp_remote_connections=1\n\
         export PMIX_MCA_ptl_tcp_if_include={ifname}\n\
         export OMPI_MCA_oob_tcp_if_include={ifname}\n\
         exec ip netns exec {a} timeout {TEST_TIMEOUT} mpirun --allow-run-as-root \
         --oversubscribe --bind-to none \
         -x FI_PROVIDER_PATH -x SHMEM_OFI_PROVIDER -x FI_LOG_LEVEL \
         -np {in_a} \"$@\" : -np {in_b} ip netns exec {b} \"$@\"\n",
        a = pair.a.netns(),
        b = pair.b.netns(),
        provider = work_dir().display(),
    );
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// The counts automake's test harness prints (`# PASS: n` …).
#[derive(Debug, Default)]
struct Summary {
    total: u32,
    pass: u32,
    fail: u32,
    other: u32,
}

fn summary(log: &str) -> Summary {
    let count = |what: &str| {
        log.lines()
            .filter_map(|l| l.strip_prefix(&format!("# {what}:")))
            .filter_map(|n| n.trim().parse::<u32>().ok())
            .next_back()
            .unwrap_or(0)
    };
    Summary {
        total: count("TOTAL"),
        pass: count("PASS"),
        fail: count("FAIL") + count("ERROR"),
        other: count("SKIP") + count("XFAIL") + count("XPASS"),
    }
}

/// SOS built as `name` (configure `options`): its unit tests with `np` PEs
/// across the two hosts, each test must pass.
fn unit_tests(name: &str, options: &[&str], np: usize) {
    let Some(src) = sos_src() else { return };
    let dir = build(&src, name, options);
    let _turn = one_at_a_time("mpi");
    let pair = HostPair::new().expect("test hosts");
    wait_running(&pair);
    let run = launcher(&pair, np);
    let unit = dir.join("modules/tests-sos/test/unit");
    let only = std::env::var("OFI_XDP_SOS_TESTS").ok();
    let mut make = Command::new("make");
    make.args(["-k", "check"])
        .arg(format!("TEST_RUNNER={}", run.display()))
        .arg(format!("NPROCS={np}"))
        .current_dir(&unit);
    if let Some(tests) = &only {
        make.arg(format!("TESTS={tests}"));
    }
    let out = make.output().expect("run make check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let s = summary(&stdout);
    let failed: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("FAIL:") || l.starts_with("ERROR:"))
        .collect();
    println!("SOS {name}, {np} PEs: {s:?}; failed: {failed:?}");
    let expected = only
        .as_ref()
        .map_or(100, |t| t.split_whitespace().count() as u32 - 1);
    assert!(s.total > expected, "too few unit tests ran:\n{stdout}");
    assert!(
        s.fail == 0 && s.pass + s.other == s.total,
        "SOS {name} unit tests over xdp with {np} PEs: {s:?}, failed: {failed:#?}\n\
         (each test's output: {}/<test>.log)",
        unit.display()
    );
}

/// Default build: FI_MR_SCALABLE-style registration (provider keys,
/// offsets), SOS's own fence for put-with-signal.
#[test]
fn shmem_unit_tests_2_pes() {
    unit_tests("scalable", &[], 2);
}

#[test]
fn shmem_unit_tests_4_pes() {
    unit_tests("scalable", &[], 4);
}

/// `--enable-ofi-mr=basic`: FI_MR_BASIC (virtual addresses).
#[test]
fn shmem_unit_tests_basic_mr_2_pes() {
    unit_tests("basic", &["--enable-ofi-mr=basic"], 2);
}

#[test]
fn shmem_unit_tests_basic_mr_4_pes() {
    unit_tests("basic", &["--enable-ofi-mr=basic"], 4);
}

/// `--enable-ofi-fence`: SOS asks for the FI_FENCE capability and fences
/// its signalling atomics after puts.
#[test]
fn shmem_unit_tests_fence_2_pes() {
    unit_tests("scalable-fence", &["--enable-ofi-fence"], 2);
}

#[test]
fn shmem_unit_tests_fence_4_pes() {
    unit_tests("scalable-fence", &["--enable-ofi-fence"], 4);
}

#[test]
fn shmem_unit_tests_basic_mr_fence_2_pes() {
    unit_tests(
        "basic-fence",
        &["--enable-ofi-mr=basic", "--enable-ofi-fence"],
        2,
    );
}

#[test]
fn shmem_unit_tests_basic_mr_fence_4_pes() {
    unit_tests(
        "basic-fence",
        &["--enable-ofi-mr=basic", "--enable-ofi-fence"],
        4,
    );
}
