//! `ofi-xdp stream-bench --check` end to end (needs root): windows of tagged messages in
//! flight between two test hosts, every message's contents verified by the receiver, over the
//! `xdp` provider and — as the reference the benchmark compares with — `tcp`, at MTU 1500 and
//! 9000. A window of 1 MiB messages is the streaming case a ping-pong never exercises: many
//! rendezvous transfers in flight at once, received in posting order. The RMA mode
//! (`--ops write,read`) is checked the same way at MTU 1500: what the initiator wrote is what
//! the target holds, and what it read is the target's pattern.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::process::Command;

const EXE: &str = env!("CARGO_BIN_EXE_ofi-xdp");

/// The directory holding `libxdp-fi.so`: FI_PROVIDER_PATH (set by `cargo xtask test`), else
/// what `cargo xtask build` makes.
fn provider_dir() -> PathBuf {
    let dir = std::env::var_os("FI_PROVIDER_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/libfabric"));
    assert!(
        dir.join("libxdp-fi.so").is_file(),
        "{} has no libxdp-fi.so: run `cargo xtask build` (or through `cargo xtask test`)",
        dir.display()
    );
    dir
}

#[test]
fn windows_of_messages_arrive_whole_and_in_order_at_both_mtus() {
    let out_dir = std::env::temp_dir().join(format!("ofi-xdp-stream-test-{}", std::process::id()));
    let out = Command::new(EXE)
        .args([
            "stream-bench",
            "--check",
            "--rounds",
            "1",
            "--mtus",
            "1500,9000",
        ])
        .args([
            "--providers",
            "xdp,tcp",
            "--sizes",
            "4096,1048576",
            "--windows",
            "1,16",
        ])
        .arg("--out")
        .arg(&out_dir)
        .env("FI_PROVIDER_PATH", provider_dir())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for mtu in ["1500", "9000"] {
        assert!(stdout.contains(&format!("MTU {mtu}: a window")), "{stdout}");
        let svg = std::fs::read_to_string(out_dir.join(format!("stream-mtu{mtu}.svg"))).unwrap();
        assert_eq!(svg.matches("<polyline").count(), 4, "{svg}");
    }
    for row in [
        "4 KiB w1 ",
        "4 KiB w16 ",
        "1 MiB w1 ",
        "1 MiB w16 ",
        "64 B w64 ",
    ] {
        let rows = stdout.lines().filter(|l| l.starts_with(row)).count();
        assert_eq!(rows, 2, "{row}:\n{stdout}");
    }
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn rma_writes_and_reads_move_the_data_they_say() {
    let out_dir = std::env::temp_dir().join(format!("ofi-xdp-stream-rma-{}", std::process::id()));
    let out = Command::new(EXE)
        .args(["stream-bench", "--check", "--rounds", "1", "--mtus", "1500"])
        .args(["--providers", "xdp,tcp", "--ops", "write,read"])
        // A few messages each: a window of 4 puts every write and read in a slot of its own.
        .args(["--sizes", "4096,1048576", "--windows", "4"])
        .args(["--mib-per-run", "1", "--no-link"])
        .arg("--out")
        .arg(&out_dir)
        .env("FI_PROVIDER_PATH", provider_dir())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("fi_rma_bw -o write"), "{stdout}");
    for op in ["write", "read"] {
        for size in ["4 KiB", "1 MiB"] {
            let row = format!("{op} {size} w4 ");
            let rows: Vec<&str> = stdout.lines().filter(|l| l.starts_with(&row)).collect();
            assert_eq!(rows.len(), 1, "{row}:\n{stdout}");
            // A figure for both providers ("-" where a run failed).
            assert_eq!(rows[0].matches('[').count(), 2, "{row}:\n{stdout}");
        }
    }
    assert!(!stdout.contains("64 B w64"), "{stdout}");
    let csv = std::fs::read_dir(&out_dir)
        .unwrap()
        .filter_map(Result::ok)
        .find(|e| e.path().extension().is_some_and(|x| x == "csv"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .unwrap();
    assert_eq!(
        csv.lines().filter(|l| l.ends_with(",write")).count(),
        4,
        "{csv}"
    );
    assert_eq!(
        csv.lines().filter(|l| l.ends_with(",read")).count(),
        4,
        "{csv}"
    );
    let _ = std::fs::remove_dir_all(&out_dir);
}

/// `ofi-xdp paths-bench`, one short round without the failover run: it builds its shaped
/// leaf–spine fabric, runs every setting and prints its table (figures, not checked).
#[test]
fn paths_bench_runs_and_prints_its_table() {
    let out = Command::new(EXE)
        .args(["paths-bench", "--rounds", "1", "--paths", "2"])
        .args(["--rate-mbit", "400", "--mib-per-run", "1", "--no-failover"])
        .env("FI_PROVIDER_PATH", provider_dir())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for label in ["xdp ", "xdp paths=2 bulk off ", "tcp "] {
        let row = format!("    1  {label}");
        assert!(
            stdout.lines().any(|l| l.starts_with(&row)),
            "{label}:\n{stdout}"
        );
    }
    assert!(stdout.contains("one spine = 50.0 MB/s"), "{stdout}");
}
