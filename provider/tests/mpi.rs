//! Open MPI over the provider: `tests/mpi/mpi_check.c` built with `mpicc`
//! and launched with `mpirun` using the `cm` PML and the `ofi` MTL, the way
//! MPI users select a libfabric provider; and `tests/mpi/mpi_onesided.c`
//! (one-sided MPI) with the `rdma` one-sided component over the `ofi` BTL,
//! which maps MPI_Put / MPI_Get / MPI_Accumulate / MPI_Fetch_and_op /
//! MPI_Compare_and_swap onto the provider's RMA and atomics. Ranks run in
//! test-host network namespaces, so nothing leaves the veth pair.
//!
//! The same programs under MPICH (the `ch4:ofi` device, `FI_PROVIDER=xdp`)
//! when `OFI_XDP_MPICH` names an MPICH installation built so: Debian's
//! `mpich` uses `ch4:ucx`, so none is installed here, and the MPICH tests
//! say they are skipped without one (README, "MPI", says how to build it).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use ofi_xdp_testhosts::skip::skip;
use ofi_xdp_testhosts::{Host, HostPair, ImpairedPair, Impairment};

mod common;
use common::{
    TWO_SIDED, local_paths, one_at_a_time, remote_paths, remove_shm_leftovers, wait_running,
    work_dir,
};

/// Longest one mpirun may take (a hang must fail the test, not CI).
const MPIRUN_TIMEOUT: &str = "240";

fn mpi_check() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| mpicc("mpi_check")).clone()
}

fn mpi_dead_rank() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| mpicc("mpi_dead_rank")).clone()
}

fn mpi_onesided() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| mpicc("mpi_onesided")).clone()
}

/// Build `tests/mpi/<name>.c` with Open MPI's mpicc.
fn mpicc(name: &str) -> PathBuf {
    build_with(Path::new("mpicc"), name, name)
}

/// Build `tests/mpi/<name>.c` with the compiler wrapper `mpicc` as
/// `work_dir()/<bin>`.
fn build_with(mpicc: &Path, name: &str, bin: &str) -> PathBuf {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/mpi/{name}.c"));
    let bin = work_dir().join(bin);
    let out = Command::new(mpicc)
        .args(["-Wall", "-O1", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "run {} (xtask installs openmpi-bin and libopenmpi-dev): {e}",
                mpicc.display()
            )
        });
    assert!(
        out.status.success(),
        "{} failed:\n{}",
        mpicc.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    bin
}

/// Point-to-point as [`TWO_SIDED`], one-sided through the `rdma`
/// component on the `ofi` BTL on xdp (its default mode: one-sided only).
const ONE_SIDED: &[&str] = &[
    "--mca",
    "pml",
    "cm",
    "--mca",
    "mtl",
    "ofi",
    "--mca",
    "opal_common_ofi_provider_include",
    "xdp",
    "--mca",
    "btl",
    "ofi,self",
    "--mca",
    "osc",
    "rdma",
];

/// `mpirun` inside `pair.a`'s namespace with Open MPI selecting the xdp
/// provider through `mca`; `ranks` is the command line after the MCA
/// options.
fn mpirun(pair: &HostPair, mca: &[&str], ranks: &[String]) -> Output {
    mpirun_on(&pair.a, mca, ranks)
}

/// `mpirun` inside `host`'s namespace (see [`mpirun`]).
fn mpirun_on(host: &Host, mca: &[&str], ranks: &[String]) -> Output {
    mpirun_with(host, mca, ranks, &[])
}

/// [`mpirun_on`] with more environment (pass each name with `-x` in `mca`).
///
/// One mpirun at a time: each starts up to eight busy-polling ranks, and
/// several at once on a small machine starve ranks of the CPU for seconds,
/// which a peer timeout then takes for a dead peer.
fn mpirun_with(host: &Host, mca: &[&str], ranks: &[String], env: &[(&str, &str)]) -> Output {
    let _turn = one_at_a_time("mpi");
    let ifname = host.ifname();
    let mut cmd = host.command("timeout");
    cmd.arg(MPIRUN_TIMEOUT)
        .arg("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe"])
        .args(["-x", "FI_PROVIDER_PATH", "-x", "FI_LOG_LEVEL"])
        .args(mca)
        .args(ranks)
        .env("FI_PROVIDER_PATH", work_dir())
        .env("FI_LOG_LEVEL", "warn")
        // Ranks in the other namespace reach mpirun's PMIx server and its
        // out-of-band channel over the veth pair, not over loopback.
        .env("PMIX_MCA_ptl_tcp_remote_connections", "1")
        .env("PMIX_MCA_ptl_tcp_if_include", ifname)
        .env("OMPI_MCA_oob_tcp_if_include", ifname)
        .envs(env.iter().copied());
    cmd.output()
        .expect("run mpirun (xtask installs openmpi-bin)")
}

fn assert_ranks_passed(out: &Output, program: &str, ranks: usize) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "mpirun failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    for r in 0..ranks {
        let line = format!("{program} rank {r} of {ranks}: 0 failures");
        assert!(stdout.contains(&line), "no '{line}':\n{stdout}\n{stderr}");
    }
    stderr
}

/// One rank on each host: every message crosses the veth pair through
/// AF_XDP.
#[test]
fn mpi_two_hosts() {
    let bin = mpi_check().display().to_string();
    let pair = HostPair::new().expect("test hosts");
    wait_running(&pair);
    let ranks: Vec<String> = ["-np", "1", &bin, ":", "-np", "1", "ip", "netns", "exec"]
        .iter()
        .map(|s| (*s).to_owned())
        .chain([pair.b.netns().to_owned(), bin.clone()])
        .collect();
    let stderr = assert_ranks_passed(&mpirun(&pair, TWO_SIDED, &ranks), "mpi_check", 2);
    assert!(
        !stderr.contains("kernel UDP path"),
        "a rank fell back to the kernel path:\n{stderr}"
    );
}

/// Three ranks on one host and interface (ranks sharing a node): the
/// first creates the queue's AF_XDP group, the others join it (none runs
/// on the kernel UDP path where the kernel lets them share: Linux 6.4+),
/// and all reach each other through shared memory (each port's closing
/// line, at info, says what carried its datagrams).
#[test]
fn mpi_three_ranks_one_host() {
    let bin = mpi_check().display().to_string();
    let pair = HostPair::new().expect("test hosts");
    wait_running(&pair);
    let ranks = vec!["-np".to_owned(), "3".to_owned(), bin];
    let out = mpirun_with(&pair.a, TWO_SIDED, &ranks, &[("FI_LOG_LEVEL", "info")]);
    let stderr = assert_ranks_passed(&out, "mpi_check", 3);
    assert_eq!(
        stderr.contains("uses the kernel UDP path"),
        !ofi_xdp_link::group::kernel_lets_members_join(),
        "{stderr}"
    );
    let paths = local_paths(&stderr);
    println!("(kernel from this host, shared memory) per port: {paths:?}");
    assert!(
        paths.iter().all(|(kernel, _)| *kernel == 0),
        "local datagrams took the kernel socket: {paths:?}"
    );
    assert!(
        paths.iter().filter(|(_, shm)| *shm > 0).count() >= 3,
        "fewer than three ports received through shared memory: {paths:?}"
    );
}

/// `hosts` ranks of `bin`, the first in `pair.a`, the rest in `pair.b`.
fn ranks_on(pair: &HostPair, bin: &str, in_a: usize, in_b: usize) -> Vec<String> {
    let n = |k: usize| k.to_string();
    let mut v = vec!["-np".to_owned(), n(in_a), bin.to_owned()];
    if in_b > 0 {
        v.extend([":", "-np", &n(in_b), "ip", "netns", "exec"].map(str::to_owned));
        v.extend([pair.b.netns().to_owned(), bin.to_owned()]);
    }
    v
}

/// One-sided MPI, one rank per host: every put, get and atomic crosses
/// the veth pair as the provider's RMA (the BTL's endpoint is the second
/// on its interface in each process, beside the MTL's: it joins the MTL
/// endpoint's queue group).
#[test]
fn mpi_one_sided_two_hosts() {
    one_sided(1, 1);
}

/// One-sided MPI on four ranks, two per host.
#[test]
fn mpi_one_sided_four_ranks() {
    one_sided(2, 2);
}

/// `mpi_onesided` with `in_a` ranks in one host and `in_b` in the other.
fn one_sided(in_a: usize, in_b: usize) {
    let bin = mpi_onesided().display().to_string();
    let pair = HostPair::new().expect("test hosts");
    wait_running(&pair);
    let ranks = ranks_on(&pair, &bin, in_a, in_b);
    let out = mpirun(&pair, ONE_SIDED, &ranks);
    assert_ranks_passed(&out, "mpi_onesided", in_a + in_b);
}

/// One rank on each side of the impairment element (5 % loss, 2 %
/// duplication, 1 % corruption, reordering, 1 ms delay): the suite passes
/// and no session is lost.
#[test]
fn mpi_two_hosts_impaired() {
    let bin = mpi_check().display().to_string();
    let seed = u64::from(std::process::id());
    let pair = ImpairedPair::new(9000, Impairment::harsh(seed)).expect("impaired test hosts");
    let ranks: Vec<String> = ["-np", "1", &bin, ":", "-np", "1", "ip", "netns", "exec"]
        .iter()
        .map(|s| (*s).to_owned())
        .chain([pair.b.netns().to_owned(), bin.clone()])
        .collect();
    let stderr = assert_ranks_passed(&mpirun_on(&pair.a, TWO_SIDED, &ranks), "mpi_check", 2);
    assert!(!stderr.contains(" lost: "), "a session was lost:\n{stderr}");
    println!("forwarder: {:?}", pair.counts());
}

/// Eight ranks, four on each host: a node's worth of ranks on each side,
/// every pair exchanging verified messages. Every rank's datagrams from
/// the other host arrive through AF_XDP (the four ranks of a host share
/// its queue), none through the kernel socket, and those from its own
/// host through shared memory (each port's closing line, at info, says).
#[test]
fn mpi_eight_ranks_two_hosts() {
    let bin = mpi_check().display().to_string();
    let pair = HostPair::new().expect("test hosts");
    wait_running(&pair);
    let ranks = ranks_on(&pair, &bin, 4, 4);
    let out = mpirun_with(&pair.a, TWO_SIDED, &ranks, &[("FI_LOG_LEVEL", "info")]);
    let stderr = assert_ranks_passed(&out, "mpi_check", 8);
    let remote = remote_paths(&stderr);
    let local = local_paths(&stderr);
    println!("(AF_XDP, from other hosts through the kernel) per port: {remote:?}");
    println!("(kernel from this host, shared memory) per port: {local:?}");
    assert_eq!(remote.len(), 8, "one closing line per rank:\n{stderr}");
    assert!(
        local.iter().all(|(kernel, shm)| *kernel == 0 && *shm > 0),
        "a rank's same-host datagrams took the kernel socket: {local:?}"
    );
    if ofi_xdp_link::group::kernel_lets_members_join() {
        assert!(
            remote
                .iter()
                .all(|(af_xdp, kernel)| *af_xdp && *kernel == 0),
            "a rank's datagrams from the other host took the kernel path: {remote:?}"
        );
    }
}

/// Four ranks on one host, none elsewhere.
#[test]
fn mpi_four_ranks_one_host() {
    let bin = mpi_check().display().to_string();
    let pair = HostPair::new().expect("test hosts");
    wait_running(&pair);
    let ranks = ranks_on(&pair, &bin, 4, 0);
    assert_ranks_passed(&mpirun(&pair, TWO_SIDED, &ranks), "mpi_check", 4);
}

/// A rank killed with SIGKILL mid-run (`tests/mpi/mpi_dead_rank.c`), on
/// two hosts (the victim on the second) and on one: rank 0's send to it
/// returns an error once the peer timeout passes instead of hanging, and
/// the other ranks keep exchanging verified messages. Open MPI is told to
/// keep the job running when a rank dies (`orte_enable_recovery`).
#[test]
fn mpi_rank_killed() {
    for (in_a, in_b) in [(2, 2), (4, 0)] {
        let bin = mpi_dead_rank().display().to_string();
        let pair = HostPair::new().expect("test hosts");
        wait_running(&pair);
        let ranks = ranks_on(&pair, &bin, in_a, in_b);
        let mut mca = TWO_SIDED.to_vec();
        mca.extend([
            "--mca",
            "orte_enable_recovery",
            "1",
            "--mca",
            "orte_abort_on_non_zero_status",
            "0",
            "-x",
            "FI_XDP_PEER_TIMEOUT",
        ]);
        let out = mpirun_with(&pair.a, &mca, &ranks, &[("FI_XDP_PEER_TIMEOUT", "10")]);
        // The victim was killed and the others left with _exit: nobody
        // closed an endpoint.
        remove_shm_leftovers(&pair.a);
        remove_shm_leftovers(&pair.b);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let n = in_a + in_b;
        println!("{in_a}+{in_b} ranks:\n{stdout}");
        assert_ne!(
            out.status.code(),
            Some(124),
            "{in_a}+{in_b} ranks: mpirun hung:\n{stdout}\n{stderr}"
        );
        assert!(
            stdout.contains("send to the killed rank returned an error"),
            "{in_a}+{in_b} ranks: rank 0 did not see the error:\n{stdout}\n{stderr}"
        );
        for r in 0..n - 1 {
            let line = format!("mpi_dead_rank rank {r} of {n}: 0 failures");
            assert!(stdout.contains(&line), "no '{line}':\n{stdout}\n{stderr}");
        }
    }
}

/// The installation prefix of an MPICH built with the `ch4:ofi` device
/// (`OFI_XDP_MPICH`), or `None` after saying the MPICH tests are skipped.
fn mpich() -> Option<PathBuf> {
    let prefix = std::env::var_os("OFI_XDP_MPICH").map(PathBuf::from);
    match prefix {
        Some(p) if p.join("bin/mpiexec").exists() => Some(p),
        _ => {
            skip(
                "OFI_XDP_MPICH does not name an MPICH installation built with \
                 --with-device=ch4:ofi (Debian's mpich uses ch4:ucx; README, \"MPI\")",
            );
            None
        }
    }
}

/// `program` under MPICH's `mpiexec` (hydra) in `pair.a`'s namespace,
/// `in_a` ranks there and `in_b` in `pair.b`, with `FI_PROVIDER=xdp`.
/// `MPIR_CVAR_NOLOCAL=1` sends ranks of one host through the provider too
/// (its shared memory), not through MPICH's own. MPICH prints the provider
/// it chose (`MPIR_CVAR_DEBUG_SUMMARY`): it must be ours.
fn mpich_run(prefix: &Path, program: &str, in_a: usize, in_b: usize) {
    let bin = build_with(
        &prefix.join("bin/mpicc"),
        program,
        &format!("{program}-mpich"),
    );
    let bin = bin.display().to_string();
    let pair = HostPair::new().expect("test hosts");
    wait_running(&pair);
    let _turn = one_at_a_time("mpi");
    let mut cmd = pair.a.command("timeout");
    cmd.arg(MPIRUN_TIMEOUT)
        .arg(prefix.join("bin/mpiexec"))
        .args(
            ranks_on(&pair, &bin, in_a, in_b)
                .iter()
                .map(|a| match a.as_str() {
                    "-np" => "-n",
                    a => a,
                }),
        )
        .env("FI_PROVIDER_PATH", work_dir())
        .env("FI_PROVIDER", "xdp")
        .env("FI_LOG_LEVEL", "warn")
        .env("MPIR_CVAR_NOLOCAL", "1")
        .env("MPIR_CVAR_DEBUG_SUMMARY", "1");
    let out = cmd.output().expect("run MPICH's mpiexec");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("libfabric provider: xdp"),
        "MPICH chose another provider:\n{stdout}"
    );
    assert_ranks_passed(&out, program, in_a + in_b);
}

/// MPICH's point-to-point and collectives over the provider, one rank per
/// host, then two per host.
#[test]
fn mpich_two_hosts() {
    let Some(prefix) = mpich() else { return };
    mpich_run(&prefix, "mpi_check", 1, 1);
    mpich_run(&prefix, "mpi_check", 2, 2);
}

/// MPICH's one-sided operations over the provider's RMA and atomics (ch4
/// maps them straight onto fi_write, fi_read and fi_atomic).
#[test]
fn mpich_one_sided() {
    let Some(prefix) = mpich() else { return };
    mpich_run(&prefix, "mpi_onesided", 1, 1);
    mpich_run(&prefix, "mpi_onesided", 2, 2);
}
