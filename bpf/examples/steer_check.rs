//! Self-check of the steering program on the running kernel, without any
//! network set-up: loads it (so the verifier of this kernel judges it),
//! attaches it to an interface (default `lo`, generic mode), runs a few frames
//! through `BPF_PROG_TEST_RUN` and checks the verdicts and counters.
//!
//! Usage: `steer_check [IFNAME] [native|generic]` (as root). Prints one line
//! per check and `N passed, N failed` at the end; exits non-zero on failure.
//! Used to try the program on other kernels (e.g. in QEMU).

use ofi_xdp_bpf::{AttachMode, Counters, Steering, XdpAction};

const PORT: u16 = 47_100;

fn frame(ethertype: u16, l3: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(l3);
    f
}

fn ipv4_udp(ihl: u8, udp_len: Option<u16>, dport: u16) -> Vec<u8> {
    let hlen = usize::from(ihl.max(5)) * 4;
    let payload = b"check";
    let ulen = udp_len.unwrap_or(8 + payload.len() as u16);
    let total = (hlen + 8 + payload.len()) as u16;
    let mut p = vec![0u8; hlen];
    p[0] = 0x40 | ihl;
    p[2..4].copy_from_slice(&total.to_be_bytes());
    p[8] = 64;
    p[9] = 17;
    p.extend_from_slice(&1234u16.to_be_bytes());
    p.extend_from_slice(&dport.to_be_bytes());
    p.extend_from_slice(&ulen.to_be_bytes());
    p.extend_from_slice(&[0, 0]);
    p.extend_from_slice(payload);
    p
}

fn ipv6_udp(dport: u16) -> Vec<u8> {
    let mut p = vec![0u8; 40];
    p[0] = 0x60;
    p[4..6].copy_from_slice(&13u16.to_be_bytes());
    p[6] = 17;
    p[7] = 64;
    p.extend_from_slice(&1234u16.to_be_bytes());
    p.extend_from_slice(&dport.to_be_bytes());
    p.extend_from_slice(&13u16.to_be_bytes());
    p.extend_from_slice(&[0, 0]);
    p.extend_from_slice(b"check");
    p
}

type Which = fn(&Counters) -> u64;

fn main() {
    let mut args = std::env::args().skip(1);
    let ifname = args.next().unwrap_or_else(|| "lo".to_string());
    let mode = match args.next().map(|m| m.parse::<AttachMode>()) {
        None => AttachMode::Generic,
        Some(Ok(m)) => m,
        Some(Err(e)) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let mut steering = match Steering::attach(&ifname, mode) {
        Ok(s) => s,
        Err(e) => {
            println!("FAIL load+attach on {ifname} ({mode}): {e}");
            println!("0 passed, 1 failed");
            std::process::exit(1);
        }
    };
    println!("ok   load+attach on {ifname} ({mode}), verifier accepted the program");
    let mut passed = 1u32;
    let mut failed = 0u32;
    if let Err(e) = steering.steer_port(PORT, 0) {
        println!("FAIL steer_port: {e}");
        std::process::exit(1);
    }

    let no_socket: Which = |c| c.no_socket;
    let passed_c: Which = |c| c.passed;
    let malformed: Which = |c| c.malformed;
    let fault: Which = |c| c.fault_dropped;
    let mut vlan = vec![0x81, 0x00, 0x00, 0x07, 0x08, 0x00];
    vlan.extend_from_slice(&ipv4_udp(5, None, PORT));
    let checks: Vec<(&str, Vec<u8>, XdpAction, Which)> = vec![
        (
            "IPv4 UDP steered port, empty slot",
            frame(0x0800, &ipv4_udp(5, None, PORT)),
            XdpAction::Pass,
            no_socket,
        ),
        (
            "IPv6 UDP steered port, empty slot",
            frame(0x86DD, &ipv6_udp(PORT)),
            XdpAction::Pass,
            no_socket,
        ),
        (
            "802.1Q IPv4 UDP steered port",
            {
                let mut f = frame(0x8100, &[]);
                f.truncate(12);
                f.extend_from_slice(&vlan);
                f
            },
            XdpAction::Pass,
            no_socket,
        ),
        (
            "IPv4 UDP other port",
            frame(0x0800, &ipv4_udp(5, None, PORT + 1)),
            XdpAction::Pass,
            passed_c,
        ),
        ("ARP", frame(0x0806, &[0u8; 28]), XdpAction::Pass, passed_c),
        (
            "IPv4 IHL 4",
            frame(0x0800, &ipv4_udp(4, None, PORT)),
            XdpAction::Pass,
            malformed,
        ),
        (
            "IPv4 options",
            frame(0x0800, &ipv4_udp(6, None, PORT)),
            XdpAction::Pass,
            malformed,
        ),
        (
            "UDP length > packet",
            frame(0x0800, &ipv4_udp(5, Some(200), PORT)),
            XdpAction::Pass,
            malformed,
        ),
        (
            "truncated IPv4",
            frame(0x0800, &ipv4_udp(5, None, PORT)[..10]),
            XdpAction::Pass,
            malformed,
        ),
        (
            "truncated IPv6",
            frame(0x86DD, &ipv6_udp(PORT)[..20]),
            XdpAction::Pass,
            malformed,
        ),
    ];
    for (name, f, verdict, which) in &checks {
        let before = steering.counters().unwrap_or_default();
        let got = steering.test_run(f);
        let delta = steering.counters().unwrap_or_default().since(&before);
        match got {
            Ok(v) if v == *verdict && which(&delta) == 1 => {
                passed += 1;
                println!("ok   {name}");
            }
            other => {
                failed += 1;
                println!("FAIL {name}: {other:?}, counters moved: {delta}");
            }
        }
    }
    // Fault injection: 1 in 1 drops every matched frame.
    let f = frame(0x0800, &ipv4_udp(5, None, PORT));
    let ok = steering.set_fault_injection(1, 7).is_ok() && {
        let before = steering.counters().unwrap_or_default();
        let v = steering.test_run(&f);
        let delta = steering.counters().unwrap_or_default().since(&before);
        matches!(v, Ok(XdpAction::Drop)) && fault(&delta) == 1
    };
    if ok {
        passed += 1;
        println!("ok   fault injection 1 in 1 drops");
    } else {
        failed += 1;
        println!("FAIL fault injection 1 in 1 drops");
    }
    // The program's own cost per frame (kernel-timed, 100k runs each).
    let _ = steering.set_fault_injection(0, 0);
    for (name, f) in [
        (
            "steered port, empty slot",
            frame(0x0800, &ipv4_udp(5, None, PORT)),
        ),
        (
            "other UDP port",
            frame(0x0800, &ipv4_udp(5, None, PORT + 1)),
        ),
        ("malformed (IHL 6)", frame(0x0800, &ipv4_udp(6, None, PORT))),
    ] {
        if let Ok((_, per_run)) = steering.test_run_repeat(&f, 100_000) {
            println!("cost {name}: {} ns/frame", per_run.as_nanos());
        }
    }
    println!("counters: {}", steering.counters().unwrap_or_default());
    println!("{passed} passed, {failed} failed");
    if failed > 0 {
        std::process::exit(1);
    }
}
