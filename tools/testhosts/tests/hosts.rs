//! Creates real namespaces (needs root): addresses, reachability, run/command,
//! and cleanup on drop and on panic.

#![allow(clippy::unwrap_used)] // tests may unwrap: a failed step is a failed test

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use ofi_xdp_testhosts::{HostPair, ip, our_netns};

fn link_exists_in_root(name: &str) -> bool {
    std::path::Path::new("/sys/class/net").join(name).exists()
}

#[test]
fn pair_is_addressed_and_reachable() {
    let pair = HostPair::new().unwrap();
    let (a, b) = (&pair.a, &pair.b);
    assert!(a.ifname().len() <= 15);
    assert_ne!(a.netns(), b.netns());
    assert!(
        !link_exists_in_root(a.ifname()),
        "veth must not be in the root namespace"
    );

    // ping over IPv4 and IPv6 from a to b.
    let out = a
        .command("ping")
        .args(["-c", "1", "-W", "2", &b.ipv4().to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = a
        .command("ping")
        .args(["-6", "-c", "1", "-W", "2", &b.ipv6().to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // MAC set at creation is the one the kernel reports.
    let link = a.ip(&["-o", "link", "show", "dev", a.ifname()]).unwrap();
    let mac = a
        .mac()
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(":");
    assert!(link.contains(&mac), "{link} lacks {mac}");
    assert_eq!(pair.peer_of(a).netns(), b.netns());

    // UDP via run(): a socket bound in b receives from a socket in a.
    let rx = b.run(|| UdpSocket::bind(SocketAddr::new(b.ipv4().into(), 0)).unwrap());
    rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let dest = rx.local_addr().unwrap();
    a.run(|| {
        let tx = UdpSocket::bind("0.0.0.0:0").unwrap();
        tx.send_to(b"hello", dest).unwrap();
    });
    let mut buf = [0u8; 16];
    let (n, from) = rx.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"hello");
    assert_eq!(from.ip(), std::net::IpAddr::V4(a.ipv4()));
}

#[test]
fn run_is_inside_the_namespace() {
    let pair = HostPair::new().unwrap();
    let names: Vec<String> = pair.a.run(|| {
        let mut v = Vec::new();
        // if_nametoindex sees this thread's network namespace.
        for name in [pair.a.ifname(), pair.b.ifname()] {
            let c = std::ffi::CString::new(name).unwrap();
            if unsafe { libc::if_nametoindex(c.as_ptr()) } != 0 {
                v.push(name.to_string());
            }
        }
        v
    });
    assert_eq!(names, vec![pair.a.ifname().to_string()]);
}

#[test]
fn drop_removes_everything_even_on_panic() {
    let mut names = Vec::new();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let pair = HostPair::with_mtu(3000).unwrap();
        names.extend(pair.netns_names());
        names.push(pair.a.ifname().to_string());
        assert_eq!(pair.a.mtu(), 3000);
        let mtu = pair
            .b
            .ip(&["-o", "link", "show", "dev", pair.b.ifname()])
            .unwrap();
        assert!(mtu.contains("mtu 3000"), "{mtu}");
        panic!("test panics while the pair exists");
    }));
    assert!(result.is_err());
    let left = our_netns();
    for ns in &names[..2] {
        assert!(!left.contains(ns), "netns {ns} leaked");
    }
    let links = ip(&["-o", "link", "show"]).unwrap();
    assert!(!links.contains(&names[2]), "veth {} leaked", names[2]);
}

#[test]
fn reaper_removes_leftovers_of_dead_processes() {
    // A PID that has certainly exited (reuse within this test is negligible).
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let stale = format!("oxt-{dead}-0-a");
    ip(&["netns", "add", &stale]).unwrap();
    // A live process's namespace must survive the reaper.
    let live = HostPair::new().unwrap();
    assert!(
        !our_netns().contains(&stale),
        "stale netns {stale} not reaped"
    );
    assert!(our_netns().contains(&live.a.netns().to_string()));
}

/// Set in the child process of [`a_predecessors_leftovers_with_our_pid_are_reaped`].
const CHILD_ENV: &str = "OFI_XDP_TESTHOSTS_PID_REUSE_CHILD";

/// A process killed without unwinding leaves `oxt-<its pid>-0-a`, and the
/// kernel gives that PID to a later test process: the later process's first
/// pair must not collide with the leftover (its name is the one it would
/// make). The test re-runs itself as a child that waits until the parent has
/// planted the leftover under the child's PID.
#[test]
fn a_predecessors_leftovers_with_our_pid_are_reaped() {
    if std::env::var_os(CHILD_ENV).is_some() {
        let mut go = String::new();
        std::io::stdin().read_line(&mut go).unwrap();
        let pair = HostPair::new().unwrap();
        assert_eq!(pair.a.netns(), format!("oxt-{}-0-a", std::process::id()));
        return;
    }
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_predecessors_leftovers_with_our_pid_are_reaped",
        ])
        .args(["--nocapture", "--test-threads", "1"])
        .env(CHILD_ENV, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let planted = format!("oxt-{}-0-a", child.id());
    ip(&["netns", "add", &planted]).unwrap();
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let out = child.wait_with_output().unwrap();
    let _ = ip(&["netns", "delete", &planted]);
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
