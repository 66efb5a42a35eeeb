//! The provider in a Debian 13 (trixie) userland: libfabric 2.1's core and
//! tools, the provider built on this (Debian 12) host. A trixie root made
//! from Debian's packages (`debian/mod.rs`: mmdebstrap, cached under
//! `target/trixie/`) runs in each of two test hosts (network namespaces);
//! its programs see the provider bind-mounted at [`PROVIDER_DIR`] and the
//! host's /proc, /sys (the namespace's) and /dev, in a mount namespace of
//! their own, so nothing of the host or the cached root changes.
//!
//! - `fi_info -p xdp` lists RDM, DGRAM and MSG endpoints under 2.1;
//! - trixie's own `fi_pingpong -c -S all` passes for `-e rdm -m msg`,
//!   `-e rdm -m tagged` and `-e dgram`;
//! - the C data suite (`tests/c/data.c`), built inside the root with its
//!   gcc against the 2.1 headers and asking for API 2.1, passes for RDM
//!   and DGRAM between the hosts and to itself;
//! - Open MPI 5.0.7 of the root runs `tests/mpi/mpi_check.c` (two-sided,
//!   the `cm` PML on the `ofi` MTL) and `tests/mpi/mpi_onesided.c` (the
//!   `rdma` one-sided component on the `ofi` BTL, which carries the
//!   two-sided traffic too), one rank in each host, and `mpi_check` with
//!   four ranks (one in a host, three in the other);
//! - interoperation: one side on this host's libfabric 1.17, the other in
//!   the trixie root on 2.1, each way (fi_pingpong, and the data suite).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

mod common;
mod debian;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use common::{assert_passed, compile, failure_digest, wait_running, work_dir};
use ofi_xdp_testhosts::{Host, HostPair};

/// What the root holds besides Debian's essential set: libfabric 2.1 and
/// its tools, Open MPI 5.0.7, a compiler with libfabric's and Open MPI's
/// headers for programs built inside it, and mount(8) for MPI ranks that
/// enter the other test host.
pub const PACKAGES: &[&str] = &[
    "libfabric1",
    "libfabric-bin",
    "libfabric-dev",
    "openmpi-bin",
    "libopenmpi-dev",
    "gcc",
    "libc6-dev",
    "mount",
];

/// Where programs in the root find the provider (FI_PROVIDER_PATH).
const PROVIDER_DIR: &str = "/opt/ofi-xdp";

fn root() -> &'static PathBuf {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        let root = debian::root(PACKAGES);
        std::fs::create_dir_all(root.join(PROVIDER_DIR.trim_start_matches('/'))).unwrap();
        std::fs::create_dir_all(root.join("run/netns")).unwrap();
        root
    })
}

/// Which libfabric a side of a test runs on.
#[derive(Clone, Copy, Debug)]
enum Side {
    /// This host's (Debian 12, libfabric 1.17).
    Host,
    /// The trixie root's (libfabric 2.1).
    Trixie,
}

/// `program` in `host`'s namespace on `side`'s userland, finding the
/// provider through FI_PROVIDER_PATH.
fn command(host: &Host, side: Side, program: &str) -> Command {
    match side {
        Side::Host => {
            let mut cmd = host.command(program);
            cmd.env("FI_PROVIDER_PATH", work_dir());
            cmd
        }
        Side::Trixie => {
            // `ip netns exec` gives the command a mount namespace of its
            // own (with the namespace's /sys): the mounts end with it.
            let script = format!(
                "set -e; R={root}; mount --make-rprivate /; \
                 mount -t proc proc $R/proc; mount --rbind /sys $R/sys; \
                 mount --rbind /dev $R/dev; mount --bind {provider} $R{PROVIDER_DIR}; \
                 mount --rbind /run/netns $R/run/netns; \
                 exec chroot $R \"$@\"",
                root = root().display(),
                provider = work_dir().display(),
            );
            let mut cmd = host.command("sh");
            cmd.args(["-c", &script, "sh", program])
                .env("FI_PROVIDER_PATH", PROVIDER_DIR);
            cmd
        }
    }
}

fn pair() -> HostPair {
    let pair = HostPair::new().expect("test hosts");
    wait_running(&pair);
    pair
}

#[test]
fn trixie_libfabric_is_2_1() {
    let pair = pair();
    let out = command(&pair.a, Side::Trixie, "fi_info")
        .arg("--version")
        .output()
        .unwrap();
    assert_passed("fi_info --version", &out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("libfabric: 2.1"), "{text}");
}

/// `fi_info -p xdp` of libfabric 2.1 (which asks for API 2.1) lists our
/// three endpoint types.
#[test]
fn trixie_fi_info_lists_rdm_dgram_msg() {
    let pair = pair();
    let out = command(&pair.a, Side::Trixie, "fi_info")
        .args(["-p", "xdp"])
        .env("FI_LOG_LEVEL", "warn")
        .output()
        .unwrap();
    assert_passed("fi_info -p xdp", &out);
    let text = String::from_utf8_lossy(&out.stdout);
    for ep in ["FI_EP_RDM", "FI_EP_DGRAM", "FI_EP_MSG"] {
        assert!(text.contains(&format!("type: {ep}")), "no {ep}:\n{text}");
    }
    assert!(text.contains(&format!("domain: {}", pair.a.ifname())));
}

/// fi_pingpong with data checking over all sizes, its server on `server`'s
/// userland in `pair.a`, its client on `client`'s in `pair.b`: each side's
/// own fi_pingpong (1.17's or 2.1's).
fn pingpong(server: Side, client: Side, args: &[&str]) {
    let pair = pair();
    let both = |cmd: &mut Command| {
        common::fi_pingpong_all(cmd);
        cmd.args(args)
            .env("FI_LOG_LEVEL", "warn")
            .env_remove("FI_PROVIDER")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
    };
    let mut s = command(&pair.a, server, "env");
    both(&mut s);
    let s = s.spawn().unwrap();
    // Give the server time to listen on its control port.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let mut c = command(&pair.b, client, "env");
    both(&mut c);
    let c = c.arg(pair.a.ipv4().to_string()).output().unwrap();
    let s = s.wait_with_output().unwrap();
    assert_passed(&format!("fi_pingpong server ({server:?}) {args:?}"), &s);
    assert_passed(&format!("fi_pingpong client ({client:?}) {args:?}"), &c);
    let table = String::from_utf8_lossy(&c.stdout);
    assert!(table.lines().count() > 3, "no results:\n{table}");
    for o in [&s, &c] {
        let log = String::from_utf8_lossy(&o.stderr);
        assert!(!log.contains(" lost: "), "a session was lost:\n{log}");
    }
}

#[test]
fn trixie_pingpong_rdm_msg() {
    pingpong(Side::Trixie, Side::Trixie, &["-e", "rdm", "-m", "msg"]);
}

#[test]
fn trixie_pingpong_rdm_tagged() {
    pingpong(Side::Trixie, Side::Trixie, &["-e", "rdm", "-m", "tagged"]);
}

#[test]
fn trixie_pingpong_dgram() {
    pingpong(Side::Trixie, Side::Trixie, &["-e", "dgram"]);
}

/// A server on libfabric 1.17 (this host) and a client on 2.1 (trixie).
#[test]
fn interop_pingpong_1_17_server_2_1_client() {
    pingpong(Side::Host, Side::Trixie, &["-e", "rdm", "-m", "tagged"]);
}

/// A server on libfabric 2.1 (trixie) and a client on 1.17 (this host).
#[test]
fn interop_pingpong_2_1_server_1_17_client() {
    pingpong(Side::Trixie, Side::Host, &["-e", "rdm", "-m", "msg"]);
}

/// `tests/c/<name>.c` built inside the root (trixie's gcc, libfabric 2.1
/// headers and library) asking for API 2.1; its path inside the root.
fn compile_in_root(host: &Host, name: &str) -> String {
    static BUILT: OnceLock<std::sync::Mutex<Vec<String>>> = OnceLock::new();
    let built = BUILT.get_or_init(Default::default);
    let mut built = built.lock().unwrap_or_else(|e| e.into_inner());
    let bin = format!("{PROVIDER_DIR}/{name}-trixie");
    if built.contains(&bin) {
        return bin;
    }
    // The sources go where the root sees them: beside the provider.
    let src = work_dir().join("c-src");
    std::fs::create_dir_all(&src).unwrap();
    let tests_c = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c");
    for f in std::fs::read_dir(&tests_c).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, src.join(f.file_name().unwrap())).unwrap();
    }
    let out = command(host, Side::Trixie, "gcc")
        // 2.x marks what it deprecated (`#pragma GCC warning`, attributes).
        .args(["-Wall", "-Wno-unused-function", "-Wno-cpp"])
        .args(["-Wno-deprecated-declarations", "-g", "-O1"])
        .arg("-DXT_VERSION=FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION)")
        .args(["-o", &bin, &format!("{PROVIDER_DIR}/c-src/{name}.c")])
        .args(["-lfabric", "-lpthread"])
        .output()
        .unwrap();
    assert_passed(&format!("gcc {name}.c in the trixie root"), &out);
    built.push(bin.clone());
    bin
}

/// The C data test (`tests/c/data.c`) for endpoint type `ep`: its server
/// on `server`'s userland in `pair.a`, its client on `client`'s in
/// `pair.b`, meeting through a rendezvous directory both see.
fn data(server: Side, client: Side, ep: &str) {
    let pair = pair();
    let bin = |side: Side| match side {
        Side::Host => compile("data").display().to_string(),
        Side::Trixie => compile_in_root(&pair.a, "data"),
    };
    // Both programs built before either side starts: the server waits 20 s
    // for its client's address, and building the root's program (gcc in
    // the root, behind the other tests building it at the same moment) can
    // take longer than that on a loaded machine.
    let (server_bin, client_bin) = (bin(server), bin(client));
    let rv_name = format!("rv-trixie-{ep}-{}", pair.a.netns());
    std::fs::create_dir_all(work_dir().join(&rv_name)).unwrap();
    let rv = |side: Side| match side {
        Side::Host => work_dir().join(&rv_name).display().to_string(),
        Side::Trixie => format!("{PROVIDER_DIR}/{rv_name}"),
    };
    let run = |host: &Host, peer: &Host, side: Side, role: &str| {
        let program = if role == "server" {
            &server_bin
        } else {
            &client_bin
        };
        let mut cmd = command(host, side, program);
        cmd.arg(host.ifname())
            .arg(host.ipv4().to_string())
            .arg(peer.ipv4().to_string())
            .args([role, &rv(side), ep])
            .env("FI_LOG_LEVEL", "warn")
            .env_remove("FI_PROVIDER")
            .env_remove("FI_XDP_IFACE")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    };
    let s = run(&pair.a, &pair.b, server, "server").spawn().unwrap();
    let c = run(&pair.b, &pair.a, client, "client").output().unwrap();
    let s = s.wait_with_output().unwrap();
    if !(s.status.success() && c.status.success()) {
        // Both sides' words: a side that fails first often only says the
        // other never answered.
        eprintln!(
            "data client ({client:?}) {ep}: {}",
            failure_digest(&c.stderr)
        );
        eprintln!(
            "data server ({server:?}) {ep}: {}",
            failure_digest(&s.stderr)
        );
    }
    assert_passed(&format!("data server ({server:?}) {ep}"), &s);
    assert_passed(&format!("data client ({client:?}) {ep}"), &c);
}

#[test]
fn trixie_c_data_rdm() {
    data(Side::Trixie, Side::Trixie, "rdm");
}

#[test]
fn trixie_c_data_dgram() {
    data(Side::Trixie, Side::Trixie, "dgram");
}

/// Each endpoint type sending to itself (`data self`).
#[test]
fn trixie_c_data_self() {
    let pair = pair();
    let bin = compile_in_root(&pair.a, "data");
    for ep in ["rdm", "dgram"] {
        let out = command(&pair.a, Side::Trixie, &bin)
            .arg(pair.a.ifname())
            .arg(pair.a.ipv4().to_string())
            .arg(pair.b.ipv4().to_string())
            .args(["self", "/nonexistent", ep])
            .env("FI_LOG_LEVEL", "warn")
            .output()
            .unwrap();
        assert_passed(&format!("data self {ep}"), &out);
    }
}

/// The data suite between a 1.17 server (API 1.17) and a 2.1 client (API
/// 2.1), and the other way round.
#[test]
fn interop_c_data_rdm() {
    data(Side::Host, Side::Trixie, "rdm");
    data(Side::Trixie, Side::Host, "rdm");
}

/// A rank's command: rank 0 runs its arguments after the first as they
/// are, the others in the network namespace the first names, with that
/// namespace's /sys, as `ip netns exec` does (the root's mounts are
/// private to the test command's mount namespace, so nothing propagates;
/// the root has no iproute2;
/// `nsenter` and `unshare` are in its essential set). One application
/// context for both hosts: the mpirun of Debian 13's Open MPI 5.0.7
/// crashes on MPMD (`a : b`) command lines (open-mpi/ompi#13303).
const BY_RANK: &str = "#!/bin/sh\n\
    ns=$1; shift\n\
    [ \"${OMPI_COMM_WORLD_RANK:-0}\" = 0 ] && exec \"$@\"\n\
    exec nsenter --net=/run/netns/$ns unshare --mount --propagation unchanged sh -c \
    'umount -l /sys && mount -t sysfs sysfs /sys && exec \"$@\"' \
    sh \"$@\"\n";

/// `tests/mpi/<name>.c` built with the root's mpicc (Open MPI 5.0.7); its
/// path inside the root.
fn mpicc_in_root(host: &Host, name: &str) -> String {
    let src = work_dir().join("mpi-src");
    std::fs::create_dir_all(&src).unwrap();
    let file = format!("{name}.c");
    let tests_mpi = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mpi");
    std::fs::copy(tests_mpi.join(&file), src.join(&file)).unwrap();
    let bin = format!("{PROVIDER_DIR}/{name}-trixie");
    let out = command(host, Side::Trixie, "mpicc")
        .args([
            "-Wall",
            "-O1",
            "-o",
            &bin,
            &format!("{PROVIDER_DIR}/mpi-src/{file}"),
        ])
        .output()
        .unwrap();
    assert_passed(&format!("mpicc {file} in the trixie root"), &out);
    bin
}

/// `program` with Open MPI's `mca` options, one rank in each host, mpirun
/// (in the root) in `pair.a`'s namespace.
fn mpirun(program: &str, mca: &[&str]) {
    mpirun_np(program, mca, 2);
}

/// [`mpirun`] with `np` ranks: rank 0 in `pair.a`, the others in
/// `pair.b` (so those reach each other on one host, and rank 0 across).
fn mpirun_np(program: &str, mca: &[&str], np: usize) {
    let _turn = common::one_at_a_time("mpi");
    let pair = pair();
    let bin = mpicc_in_root(&pair.a, program);
    let by_rank = work_dir().join("by-rank");
    std::fs::write(&by_rank, BY_RANK).unwrap();
    std::fs::set_permissions(
        &by_rank,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let ifname = pair.a.ifname();
    let out = command(&pair.a, Side::Trixie, "timeout")
        .args(["240", "mpirun", "--allow-run-as-root", "--oversubscribe"])
        .args(["-x", "FI_PROVIDER_PATH", "-x", "FI_LOG_LEVEL"])
        .args(mca)
        .args(["-np", &np.to_string()])
        .arg(format!("{PROVIDER_DIR}/by-rank"))
        .args([pair.b.netns(), &bin])
        .env("FI_LOG_LEVEL", "warn")
        // The rank in the other namespace reaches mpirun's PMIx server and
        // its out-of-band channel over the veth pair, not over loopback.
        .env("PMIX_MCA_ptl_tcp_remote_connections", "1")
        .env("PMIX_MCA_ptl_tcp_if_include", ifname)
        .env("PRTE_MCA_oob_tcp_if_include", ifname)
        .env("OMPI_MCA_oob_tcp_if_include", ifname)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "mpirun failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    for r in 0..np {
        let line = format!("{program} rank {r} of {np}: 0 failures");
        assert!(stdout.contains(&line), "no '{line}':\n{stdout}\n{stderr}");
    }
    assert!(
        !stderr.contains("kernel UDP path"),
        "a rank fell back to the kernel path:\n{stderr}"
    );
}

/// Point-to-point through the `cm` PML and the `ofi` MTL on xdp.
#[test]
fn trixie_open_mpi_two_sided() {
    mpirun("mpi_check", common::TWO_SIDED);
}

/// The same with four ranks: one in the host, three in the other, which
/// reach each other through shared memory and rank 0 through AF_XDP.
#[test]
fn trixie_open_mpi_four_ranks() {
    mpirun_np("mpi_check", common::TWO_SIDED, 4);
}

/// One-sided MPI through the `rdma` component on the `ofi` BTL on xdp,
/// which in Open MPI 5 carries the point-to-point traffic too (the `ob1`
/// PML, `btl_ofi_mode` 2): under the `cm` PML, 5.0.7's `rdma` component
/// finds no BTL (MPI_Win_create fails with MPI_ERR_WIN), and its `ofi` BTL
/// is one-sided only by default, which leaves `ob1` no path to the peer.
#[test]
fn trixie_open_mpi_one_sided() {
    mpirun(
        "mpi_onesided",
        &[
            "--mca",
            "pml",
            "ob1",
            "--mca",
            "opal_common_ofi_provider_include",
            "xdp",
            "--mca",
            "btl",
            "ofi,self",
            "--mca",
            "btl_ofi_mode",
            "2",
            "--mca",
            "osc",
            "rdma",
        ],
    );
}
