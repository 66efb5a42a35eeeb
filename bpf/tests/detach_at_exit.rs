//! A process that attaches the program and then dies — by `exit()` without
//! running destructors, or by SIGKILL — leaves no XDP program behind: the
//! bpf_link is released with the process's file table.
//!
//! The child is this test binary re-executed inside the namespace (through
//! `ip netns exec`) with `OFI_XDP_BPF_CHILD` set, running only `child_entry`.

#![allow(clippy::unwrap_used)] // tests may unwrap: a failed step is a failed test

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::xdp_attached;
use ofi_xdp_bpf::{AttachMode, Steering};
use ofi_xdp_testhosts::{Host, HostPair};

const CHILD_ENV: &str = "OFI_XDP_BPF_CHILD";

/// Child side. Does nothing in a normal test run. With `OFI_XDP_BPF_CHILD` set
/// to `<ifname>,<mode>,<exit|hang>`: attaches, prints ATTACHED, then exits
/// without dropping the `Steering`, or waits to be killed.
#[test]
fn child_entry() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let parts: Vec<&str> = spec.split(',').collect();
    let (ifname, mode, how) = (parts[0], parts[1].parse::<AttachMode>().unwrap(), parts[2]);
    let steering = Steering::attach(ifname, mode).unwrap();
    // Check from inside while attached (the parent cannot race an exiting child).
    let out = std::process::Command::new("ip")
        .args(["-d", "link", "show", "dev", ifname])
        .output()
        .unwrap();
    let visible = String::from_utf8_lossy(&out.stdout).contains("prog/xdp");
    println!("ATTACHED");
    if how == "exit" {
        std::mem::forget(steering); // no destructor: only the kernel can detach
        std::process::exit(if visible { 0 } else { 4 });
    }
    std::thread::sleep(Duration::from_secs(30));
    drop(steering);
    std::process::exit(3); // never reached when the parent kills us
}

fn wait_detached(host: &Host) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(3) {
        if !xdp_attached(host) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn run_child(host: &Host, mode: AttachMode, how: &str) {
    let exe = std::env::current_exe().unwrap();
    let mut child = host
        .command(exe)
        .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, format!("{},{mode},{how}", host.ifname()))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut attached = false;
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        if line.contains("ATTACHED") {
            attached = true;
            break;
        }
    }
    assert!(attached, "child did not attach ({mode}, {how})");
    if how == "kill" {
        assert!(
            xdp_attached(host),
            "program not visible while the child lives"
        );
        // `ip netns exec` execs the program, so this PID is the test binary.
        let rc = unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        assert_eq!(rc, 0);
    }
    let status = child.wait().unwrap();
    if how == "exit" {
        assert!(
            status.success(),
            "child failed (4 = program not visible): {status}"
        );
    }
    assert!(
        wait_detached(host),
        "XDP program outlived the process ({mode}, {how})"
    );
}

#[test]
fn program_detaches_when_the_process_exits() {
    let pair = HostPair::new().unwrap();
    for mode in [AttachMode::Generic, AttachMode::Native] {
        run_child(&pair.b, mode, "exit");
    }
}

#[test]
fn program_detaches_when_the_process_is_killed() {
    let pair = HostPair::new().unwrap();
    for mode in [AttachMode::Generic, AttachMode::Native] {
        run_child(&pair.b, mode, "kill");
    }
}

#[test]
fn nothing_left_after_the_hosts_drop() {
    let pair = HostPair::new().unwrap();
    let names = pair.netns_names();
    let ifname = pair.b.ifname().to_string();
    let steering = {
        let ifname = ifname.clone();
        pair.b
            .run(move || Steering::attach(&ifname, AttachMode::Generic))
            .unwrap()
    };
    // Drop the hosts while the program is still attached: deleting the
    // namespace removes the veth, which releases the program's attachment.
    drop(pair);
    let netns = ofi_xdp_testhosts::ip(&["netns", "list"]).unwrap();
    for ns in &names {
        assert!(!netns.contains(ns.as_str()), "netns {ns} left behind");
    }
    let links = ofi_xdp_testhosts::ip(&["-o", "link", "show"]).unwrap();
    assert!(!links.contains(&ifname), "veth {ifname} left behind");
    // Dropping the Steering afterwards is harmless.
    drop(steering);
}
