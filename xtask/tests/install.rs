//! Installing the provider like any libfabric provider (needs root): the Debian package and
//! `cargo xtask install`, each on a machine that has only Debian's libfabric, then used with
//! no `FI_*` variable by `fi_info`, `fi_pingpong`, `man` and Open MPI, then removed without
//! a trace.
//!
//! The "fresh machine" is this one seen through a private mount namespace
//! (`unshare --mount`) in which `/usr`, `/etc` and `/var` are overlays whose upper layers
//! live on a tmpfs of the namespace's own: `dpkg -i` writes the real paths and the real dpkg
//! database, yet nothing reaches the machine, and tests running in parallel see nothing of
//! it. The upper layers also show exactly what an installation leaves behind after its
//! removal. (A VM guest would prove less: the vm-tests image is a busybox initramfs without
//! dpkg or Debian's package database.) The test hosts' network namespaces carry the traffic.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::process::Command;

use ofi_xdp_testhosts::HostPair;
use xtask::package::{self, Artifacts};
use xtask::{install, libfabric};

fn artifacts() -> Artifacts {
    let a = Artifacts::built();
    a.check()
        .unwrap_or_else(|e| panic!("{e} (cargo xtask test builds first)"));
    a
}

fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("xtask-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A two-rank MPI program: rank 0 sends 100 tagged messages to rank 1 and gets each back.
const MPI_PROGRAM: &str = r#"
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int rank, size, i, v = 0, bad = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (i = 0; i < 100; i++) {
        if (rank == 0) {
            MPI_Send(&i, 1, MPI_INT, 1, i, MPI_COMM_WORLD);
            MPI_Recv(&v, 1, MPI_INT, 1, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            bad += v != i + 1;
        } else if (rank == 1) {
            MPI_Recv(&v, 1, MPI_INT, 0, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            v += 1;
            MPI_Send(&v, 1, MPI_INT, 0, i, MPI_COMM_WORLD);
        }
    }
    printf("mpi rank %d of %d: %d bad\n", rank, size, bad);
    MPI_Finalize();
    return bad != 0;
}
"#;

fn mpi_program(dir: &Path) -> PathBuf {
    let src = dir.join("pingpong.c");
    std::fs::write(&src, MPI_PROGRAM).unwrap();
    let bin = dir.join("mpi_pingpong");
    let out = Command::new("mpicc")
        .arg("-o")
        .arg(&bin)
        .arg(&src)
        .output()
        .expect("run mpicc (cargo xtask deps installs libopenmpi-dev)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    bin
}

/// The lines between `=== name` and the next marker in the script's output.
fn section(out: &str, name: &str) -> String {
    let marker = format!("=== {name}");
    let mut lines = out.lines().skip_while(|l| *l != marker);
    assert!(lines.next().is_some(), "no section {name}:\n{out}");
    lines
        .take_while(|l| !l.starts_with("=== "))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn package_and_xtask_install_work_without_fi_variables_and_leave_nothing_behind() {
    let art = artifacts();
    let work = scratch("install");
    let deb = package::build_deb(&art, &work).unwrap();

    // The package depends on the libfabric release it was built against.
    let control = Command::new("dpkg-deb")
        .args(["-f"])
        .arg(&deb)
        .arg("Depends")
        .output()
        .unwrap();
    let depends = String::from_utf8_lossy(&control.stdout);
    let version = libfabric::package_version("libfabric1").unwrap();
    let built_against = package::libfabric_release(&version);
    assert!(
        depends.contains(&format!("libfabric1 (>= {built_against})")),
        "Depends: {depends}"
    );

    let pair = HostPair::new().unwrap();
    let mpi = mpi_program(&work);
    let port = 23000 + std::process::id() % 20000;
    let port2 = port + 1;
    let (a, b) = (pair.a.netns(), pair.b.netns());
    let server_ip = pair.a.ipv4();
    let xtask = env!("CARGO_BIN_EXE_xtask");
    let target_env = std::env::var("CARGO_TARGET_DIR")
        .map(|d| format!("CARGO_TARGET_DIR={d}"))
        .unwrap_or_default();
    let m = work.join("m");
    std::fs::create_dir_all(&m).unwrap();
    let (m, deb, mpi) = (m.display(), deb.display(), mpi.display());
    let script = format!(
        r#"set -e
mount -t tmpfs ofi-xdp-test {m}
for d in /usr /etc /var; do
  mkdir -p {m}/upper$d {m}/work$d
  mount -t overlay overlay -o lowerdir=$d,upperdir={m}/upper$d,workdir={m}/work$d $d
done
E="env -i PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root"
# fi_pingpong PORT: a fresh control port per run (the last connection's TIME_WAIT holds it).
pingpong() {{
  ip netns exec {a} $E timeout 60 fi_pingpong -p xdp -e rdm -I 20 -S 1024 -B $1 -P $1 > {m}/server.out 2>&1 &
  s=$!
  for i in $(seq 100); do
    ip netns exec {a} ss -Hltn "sport = :$1" | grep -q . && break
    sleep 0.1
  done
  ip netns exec {b} $E timeout 60 fi_pingpong -p xdp -e rdm -I 20 -S 1024 -B $1 -P $1 {server_ip}
  wait $s
  cat {m}/server.out
}}
leftovers() {{
  find {m}/upper/usr {m}/upper/etc -not -type d
}}
echo "=== dpkg -i"
dpkg -i {deb}
echo "=== fi_info"
ip netns exec {a} $E fi_info -p xdp
echo "=== man"
$E MANWIDTH=80 man -P cat fi_xdp
echo "=== pingpong"
pingpong {port}
echo "=== mpi"
ip netns exec {a} $E timeout 120 mpirun --allow-run-as-root --oversubscribe \
  --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include xdp --mca btl self -np 2 {mpi}
echo "=== purge"
dpkg --purge ofi-xdp
echo "=== after purge"
ip netns exec {a} $E fi_info -p xdp 2>&1 || echo "no xdp provider"
echo "=== leftovers after purge"
leftovers
echo "=== xtask install"
$E {target_env} {xtask} install --no-build
echo "=== fi_info after xtask install"
ip netns exec {a} $E fi_info -p xdp
echo "=== man after xtask install"
$E MANWIDTH=80 man -P cat fi_xdp
echo "=== pingpong after xtask install"
pingpong {port2}
echo "=== xtask uninstall"
$E {target_env} {xtask} uninstall
echo "=== leftovers after uninstall"
leftovers
echo "=== end"
"#
    );
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .output()
        .expect("run unshare (util-linux)");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let all = format!("{stdout}\n=== stderr\n{stderr}");

    assert!(section(&all, "fi_info").contains("provider: xdp"), "{all}");
    let man = section(&all, "man");
    assert!(man.contains("fi_xdp - The AF_XDP Fabric Provider"), "{man}");
    assert!(
        man.contains("RUNTIME PARAMETERS") && man.contains("FI_XDP_IFACE"),
        "{man}"
    );
    for name in ["pingpong", "pingpong after xtask install"] {
        let pp = section(&all, name);
        // fi_pingpong prints one result row per side: "1k  20 …  usec/xfer …".
        assert_eq!(
            pp.lines().filter(|l| l.starts_with("1k ")).count(),
            2,
            "{name}:\n{all}"
        );
    }
    let mpi = section(&all, "mpi");
    assert!(
        mpi.contains("mpi rank 0 of 2: 0 bad") && mpi.contains("mpi rank 1 of 2: 0 bad"),
        "{all}"
    );
    assert!(
        section(&all, "after purge").contains("no xdp provider"),
        "{all}"
    );
    assert_eq!(section(&all, "leftovers after purge").trim(), "", "{all}");
    assert!(
        section(&all, "fi_info after xtask install").contains("provider: xdp"),
        "{all}"
    );
    assert!(
        section(&all, "man after xtask install").contains("fi_xdp - The AF_XDP Fabric Provider"),
        "{all}"
    );
    assert_eq!(
        section(&all, "leftovers after uninstall").trim(),
        "",
        "{all}"
    );

    // Nothing of it reached this machine.
    assert!(libfabric::package_version(package::PACKAGE).is_err());
    assert!(
        !libfabric::provider_dir()
            .unwrap()
            .join("libxdp-fi.so")
            .exists()
    );
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn xtask_install_with_a_prefix_is_undone_by_uninstall() {
    let art = artifacts();
    let prefix = scratch("prefix");
    let t = install::install(&art, Some(&prefix)).unwrap();
    assert!(t.provider.ends_with("lib/libfabric/libxdp-fi.so") && t.provider.is_file());
    assert!(t.tool.is_file() && t.man_page.is_file());

    // man renders the installed page from the prefix's manual tree.
    let out = Command::new("man")
        .arg("-M")
        .arg(prefix.join("share/man"))
        .args(["-P", "cat", "fi_xdp"])
        .env("MANWIDTH", "80")
        .output()
        .unwrap();
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(
        page.contains("SUPPORTED FEATURES") && page.contains("FI_XDP_QUEUE"),
        "{page}"
    );

    // Installing again over an installation is fine; uninstall removes it all.
    install::install(&art, Some(&prefix)).unwrap();
    install::uninstall(Some(&prefix)).unwrap();
    let left: Vec<_> = std::fs::read_dir(&prefix)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert!(
        install::uninstall(Some(&prefix)).is_err(),
        "nothing to uninstall twice"
    );
    std::fs::remove_dir(&prefix).unwrap();
}
