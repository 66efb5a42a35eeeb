//! Error paths: unsupported mode, fallback between modes, missing
//! capabilities (a re-executed child with an empty capability bounding set).

#![allow(clippy::unwrap_used)] // tests may unwrap: a failed step is a failed test

use ofi_xdp_bpf::{AttachMode, BpfError, Steering};
use ofi_xdp_testhosts::HostPair;

const CHILD_ENV: &str = "OFI_XDP_BPF_NOCAPS_CHILD";

#[test]
fn loopback_has_no_native_mode_and_attach_any_falls_back() {
    let pair = HostPair::new().unwrap();
    let err = pair
        .a
        .run(|| Steering::attach("lo", AttachMode::Native))
        .unwrap_err();
    assert!(matches!(err, BpfError::ModeUnsupported { .. }), "{err}");
    assert!(
        err.to_string().contains("generic"),
        "message should suggest the other mode: {err}"
    );
    let steering = pair
        .a
        .run(|| Steering::attach_any("lo", AttachMode::Native))
        .unwrap();
    assert_eq!(steering.mode(), AttachMode::Generic);
}

#[test]
fn attach_any_falls_back_when_the_mtu_is_too_large_for_native() {
    let pair = HostPair::with_mtu(9000).unwrap();
    let ifname = pair.b.ifname().to_string();
    let steering = pair
        .b
        .run(move || Steering::attach_any(&ifname, AttachMode::Native))
        .unwrap();
    assert_eq!(steering.mode(), AttachMode::Generic);
}

#[test]
fn attach_any_keeps_the_preferred_mode_when_it_works() {
    let pair = HostPair::new().unwrap();
    let ifname = pair.b.ifname().to_string();
    let steering = pair
        .b
        .run(move || Steering::attach_any(&ifname, AttachMode::Native))
        .unwrap();
    assert_eq!(steering.mode(), AttachMode::Native);
}

/// Child side: prints the error of an attach without capabilities.
#[test]
fn nocaps_child_entry() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    match Steering::attach("lo", AttachMode::Generic) {
        Ok(_) => println!("RESULT attached"),
        Err(e @ BpfError::PermissionDenied { .. }) => println!("RESULT permission-denied: {e}"),
        Err(e) => println!("RESULT other: {e}"),
    }
}

#[test]
fn missing_capabilities_are_reported_as_such() {
    let exe = std::env::current_exe().unwrap();
    // uid 0 but no capabilities at all: an empty bounding set survives exec.
    let out = std::process::Command::new("setpriv")
        .args(["--bounding-set=-all", "--inh-caps=-all", "--"])
        .arg(exe)
        .args([
            "--exact",
            "nocaps_child_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("RESULT permission-denied"),
        "stdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
