//! `ofi-xdp status` and `ofi-xdp cleanup` against real programs on test
//! hosts (needs root): the provider's program while `fi_pingpong` runs, and
//! after both sides are killed; our program attached through netlink (which
//! outlives its process) and a foreign program; endpoint statistics files.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use ofi_xdp_testhosts::{Host, HostPair};
use ofi_xdp_tools::epstats::{DataPath, Identity, Writer};

const EXE: &str = env!("CARGO_BIN_EXE_ofi-xdp");

fn ofi_xdp(args: &[&str]) -> Output {
    Command::new(EXE).args(args).output().expect("run ofi-xdp")
}

fn stdout_of(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn status(host: &Host) -> String {
    stdout_of(&ofi_xdp(&["status", "--netns", host.netns()]))
}

/// The value of counter `name` in the first counters block of `text`.
fn counter(text: &str, name: &str) -> u64 {
    text.lines()
        .map(str::split_whitespace)
        .find_map(|mut w| (w.next() == Some(name)).then(|| w.next()?.parse().ok())?)
        .unwrap_or_else(|| panic!("no counter {name} in:\n{text}"))
}

/// Whether `ip link` shows an XDP program on the host's interface.
fn ip_link_shows_xdp(host: &Host) -> bool {
    host.ip(&["link", "show", "dev", host.ifname()])
        .unwrap()
        .contains("xdp")
}

/// The directory holding `libxdp-fi.so`: FI_PROVIDER_PATH (set by `cargo
/// xtask test`), else what `cargo xtask build` makes.
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

/// A long `fi_pingpong -p xdp` on `host`, killed with SIGKILL when dropped.
struct Pingpong(Child);

impl Pingpong {
    fn start(host: &Host, port: &str, server: Option<&Host>) -> Pingpong {
        let mut cmd = host.command("fi_pingpong");
        cmd.args(["-p", "xdp", "-e", "rdm", "-m", "tagged", "-S", "64"])
            .args(["-I", "100000000", "-B", port, "-P", port])
            .env("FI_PROVIDER_PATH", provider_dir())
            .env_remove("FI_PROVIDER")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(s) = server {
            cmd.arg(s.ipv4().to_string());
        }
        Pingpong(cmd.spawn().expect("run fi_pingpong (libfabric-bin)"))
    }

    fn kill9(&mut self) {
        // Child::kill sends SIGKILL to the pid we started (`ip netns exec`
        // execs fi_pingpong in place).
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Pingpong {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Whether a TCP socket listens on `port` in the host's namespace (`/proc/net/tcp` of a thread
/// inside it: state 0A is LISTEN; no `ss` in the VM guest).
fn listening(host: &Host, port: &str) -> bool {
    let port: u16 = port.parse().unwrap();
    let table = host.run(|| std::fs::read_to_string("/proc/thread-self/net/tcp").unwrap());
    table.lines().skip(1).any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() > 3 && f[1].ends_with(&format!(":{port:04X}")) && f[3] == "0A"
    })
}

#[test]
fn status_shows_the_program_ports_and_moving_counters_and_nothing_after_kill_9() {
    let pair = HostPair::new().unwrap();
    let port = (21000 + std::process::id() % 20000).to_string();
    let mut server = Pingpong::start(&pair.a, &port, None);
    // The client fails at once if the server's control port is not listening yet.
    let t0 = Instant::now();
    while !listening(&pair.a, &port) {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "fi_pingpong server never listened"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut client = Pingpong::start(&pair.b, &port, Some(&pair.a));

    // Wait until traffic flows through the server's program.
    let t0 = Instant::now();
    let first = loop {
        let s = status(&pair.a);
        if s.contains("(ours)")
            && s.contains("UDP port")
            && counter(&s, "steered") > 100
            && s.contains("endpoint rdm")
            && counter(&s, "rx_datagrams") > 100
        {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "no steered traffic on a:\n{s}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(first.contains("generic mode: program"), "{first}");
    assert!(first.contains("ofi_xdp_steer (ours)"), "{first}");
    assert!(first.contains("attached through bpf_link"), "{first}");
    assert!(
        first.contains("(fi_pingpong)"),
        "held by the server:\n{first}"
    );
    assert!(first.contains("-> XSKMAP slot 0"), "{first}");
    // The server's queue group (it made it; nobody joined).
    assert!(
        first.contains("AF_XDP group on queue 0: 1 member(s)"),
        "{first}"
    );
    assert!(first.contains("loaded 20"), "{first}");
    // The server's own statistics file (the provider publishes it): its
    // endpoint on the AF_XDP path, with the engine's and the link's figures.
    assert!(
        first.contains(&format!("endpoint rdm {}:", pair.a.ipv4()))
            && first.contains("on AF_XDP queue 0 slot 0"),
        "{first}"
    );
    assert!(counter(&first, "link_rx_packets") > 0, "{first}");

    // --watch: two screens a moment apart, the second with rates.
    let watched = stdout_of(&ofi_xdp(&[
        "status",
        "--netns",
        pair.a.netns(),
        "--watch",
        "0.3",
        "--count",
        "2",
    ]));
    let screens: Vec<&str> = watched.split("--- ").filter(|s| !s.is_empty()).collect();
    assert_eq!(screens.len(), 2, "{watched}");
    let (before, after) = (
        counter(screens[0], "steered"),
        counter(screens[1], "steered"),
    );
    assert!(after > before, "steered did not move: {before} -> {after}");
    assert!(
        screens[1].contains("/s"),
        "rates on the second screen:\n{watched}"
    );

    server.kill9();
    client.kill9();
    for h in [&pair.a, &pair.b] {
        let cleaned = stdout_of(&ofi_xdp(&["cleanup", "--netns", h.netns()]));
        assert!(!cleaned.contains("failed"), "{cleaned}");
        assert!(!ip_link_shows_xdp(h), "XDP program left on {h}");
        let after = status(h);
        assert!(
            after.contains(&format!("{} (ifindex", h.ifname())) && !after.contains("(ours)"),
            "{after}"
        );
    }
}

/// Attaches our `steer.bpf.o` through netlink with ip-link(8), as an operator (or an old
/// loader) would: it stays after `ip` exits.
fn attach_ours_with_ip(host: &Host) {
    let dir = std::env::temp_dir().join(format!("ofi-xdp-status-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("steer.bpf.o");
    std::fs::write(&path, ofi_xdp_bpf::object()).unwrap();
    let path = path.display().to_string();
    host.ip(&[
        "link",
        "set",
        "dev",
        host.ifname(),
        "xdpgeneric",
        "obj",
        &path,
        "sec",
        "xdp",
    ])
    .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Loads a two-instruction XDP program named `foreign_pass` (`r0 = XDP_PASS; exit`,
/// `BPF_PROG_LOAD`) — someone else's program — and attaches it to the host's interface
/// through netlink (`RTM_SETLINK` with `IFLA_XDP_FD`, generic mode), where it stays after
/// its fd is closed. No compiler needed (the VM guest has none).
fn attach_foreign_program(host: &Host) {
    let insns: [u64; 2] = [
        u64::from_le_bytes([0xb7, 0, 0, 0, 2, 0, 0, 0]), // mov64 r0, 2 (XDP_PASS)
        u64::from_le_bytes([0x95, 0, 0, 0, 0, 0, 0, 0]), // exit
    ];
    let license = c"GPL";
    // union bpf_attr, prog load: prog_type, insn_cnt, insns, license, log_level, log_size,
    // log_buf, kern_version, prog_flags, prog_name[16] (offset 48).
    let mut attr = [0u8; 128];
    attr[0..4].copy_from_slice(&6u32.to_ne_bytes()); // BPF_PROG_TYPE_XDP
    attr[4..8].copy_from_slice(&2u32.to_ne_bytes());
    attr[8..16].copy_from_slice(&(insns.as_ptr() as u64).to_ne_bytes());
    attr[16..24].copy_from_slice(&(license.as_ptr() as u64).to_ne_bytes());
    attr[48..60].copy_from_slice(b"foreign_pass");
    // SAFETY: attr points at buffers that outlive the call.
    let fd = unsafe { libc::syscall(libc::SYS_bpf, 5, attr.as_ptr(), attr.len()) };
    assert!(
        fd >= 0,
        "BPF_PROG_LOAD: {}",
        std::io::Error::last_os_error()
    );
    let fd = fd as i32;
    let ifname = host.ifname().to_owned();
    host.run(move || {
        let name = std::ffi::CString::new(ifname).unwrap();
        // SAFETY: valid C string.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        assert_ne!(ifindex, 0);
        let attr = |kind: u16, data: &[u8]| {
            let mut a = ((4 + data.len()) as u16).to_ne_bytes().to_vec();
            a.extend_from_slice(&kind.to_ne_bytes());
            a.extend_from_slice(data);
            a.resize(a.len().next_multiple_of(4), 0);
            a
        };
        let mut nest = attr(1, &fd.to_ne_bytes()); // IFLA_XDP_FD
        nest.extend(attr(3, &(1u32 << 1).to_ne_bytes())); // IFLA_XDP_FLAGS = SKB_MODE
        let mut msg = vec![0u8; 32]; // nlmsghdr + ifinfomsg
        msg[4..6].copy_from_slice(&libc::RTM_SETLINK.to_ne_bytes());
        let flags = (libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16;
        msg[6..8].copy_from_slice(&flags.to_ne_bytes());
        msg[20..24].copy_from_slice(&(ifindex as i32).to_ne_bytes());
        msg.extend(attr(43 | (1 << 15), &nest)); // IFLA_XDP, nested
        let len = msg.len() as u32;
        msg[0..4].copy_from_slice(&len.to_ne_bytes());
        // SAFETY: plain socket calls on buffers that outlive them.
        unsafe {
            let sock = libc::socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_ROUTE);
            assert!(sock >= 0);
            assert_eq!(
                libc::send(sock, msg.as_ptr().cast(), msg.len(), 0),
                msg.len() as isize
            );
            let mut reply = [0u8; 1024];
            let n = libc::recv(sock, reply.as_mut_ptr().cast(), reply.len(), 0);
            assert!(n >= 20);
            let err = i32::from_ne_bytes(reply[16..20].try_into().unwrap());
            assert_eq!(err, 0, "RTM_SETLINK: errno {}", -err);
            libc::close(sock);
        }
    });
    // SAFETY: the program fd we loaded; the attachment keeps the program.
    unsafe { libc::close(fd) };
}

#[test]
fn cleanup_removes_our_netlink_program_and_refuses_a_foreign_one() {
    let pair = HostPair::new().unwrap();
    attach_ours_with_ip(&pair.a);
    attach_foreign_program(&pair.b);

    let a = status(&pair.a);
    assert!(a.contains("ofi_xdp_steer (ours)"), "{a}");
    assert!(a.contains("attached through netlink"), "{a}");
    assert!(a.contains("held by no process"), "{a}");
    let b = status(&pair.b);
    assert!(b.contains("foreign_pass (not ours)"), "{b}");

    // Asked to clean the foreign program's interface: refused, kept.
    let out = ofi_xdp(&[
        "cleanup",
        "--netns",
        pair.b.netns(),
        "--dev",
        pair.b.ifname(),
    ]);
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("refused:") && text.contains("not ours"),
        "{text}"
    );
    assert!(
        ip_link_shows_xdp(&pair.b),
        "the foreign program was removed"
    );
    // A sweep of the whole namespace leaves it too, and says so. The sweep
    // rightly removes other things too: files of killed processes of an
    // earlier namespace with the same inode number (the kernel reuses
    // them), as the one planted here: the test looks at what it made.
    let b_ns = pair.b.run(ofi_xdp_tools::epstats::netns_inode).unwrap();
    let earlier = PathBuf::from(format!("/dev/shm/ofi-xdp-local-{b_ns}-198.18.0.2-9999"));
    fake_area(&earlier, dead_pid());
    let text = stdout_of(&ofi_xdp(&["cleanup", "--netns", pair.b.netns()]));
    let earlier_left = earlier.exists();
    let _ = std::fs::remove_file(&earlier);
    assert!(!earlier_left, "{text}");
    let foreign = format!("{}: generic XDP program", pair.b.ifname());
    let about_foreign: Vec<&str> = text.lines().filter(|l| l.contains(&foreign)).collect();
    assert!(
        about_foreign.len() == 1
            && about_foreign[0].starts_with("refused: ")
            && about_foreign[0].contains("(foreign_pass): not ours, left alone"),
        "{text}"
    );
    assert!(ip_link_shows_xdp(&pair.b));

    // Ours, attached through netlink by a process long gone: removed.
    let dry = stdout_of(&ofi_xdp(&[
        "cleanup",
        "--netns",
        pair.a.netns(),
        "--dry-run",
    ]));
    assert!(dry.contains("would remove:"), "{dry}");
    assert!(ip_link_shows_xdp(&pair.a), "--dry-run removed it");
    let text = stdout_of(&ofi_xdp(&["cleanup", "--netns", pair.a.netns()]));
    assert!(
        text.contains("removed:") && text.contains("attached through netlink"),
        "{text}"
    );
    assert!(!ip_link_shows_xdp(&pair.a), "our program is still attached");
    pair.b
        .ip(&["link", "set", "dev", pair.b.ifname(), "xdpgeneric", "off"])
        .unwrap();
}

#[test]
fn endpoint_statistics_files_are_shown_and_stale_ones_cleaned() {
    let dir = std::env::temp_dir().join(format!("ofi-xdp-epstats-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let identity = Identity {
        endpoint: "rdm".into(),
        path: DataPath::AfXdp,
        ifname: "lo".into(),
        ifindex: 1,
        address: "127.0.0.1:47999".into(),
        queue: Some(0),
        slot: Some(3),
    };
    let live = Writer::create(
        &dir,
        0,
        &identity,
        &["retransmits", "unexpected_bytes"],
        &["unexpected_bytes"],
    )
    .unwrap();
    live.set(0, 17);
    live.set(1, 4096);
    // The same endpoint's file as a killed process would leave it: a pid
    // that no longer runs.
    let dead_pid = dead_pid();
    let text = std::fs::read(live.path()).unwrap();
    let me = format!("pid {}\n", std::process::id());
    let header_end = text.iter().position(|b| *b == 0).unwrap();
    let header = String::from_utf8(text[..header_end].to_vec()).unwrap();
    let mut stale = header
        .replace(&me, &format!("pid {dead_pid}\n"))
        .into_bytes();
    stale.resize(text.len(), 0);
    stale[4096..].copy_from_slice(&text[4096..]);
    let stale_path = ofi_xdp_tools::epstats::file_path(&dir, dead_pid, 0);
    std::fs::write(&stale_path, &stale).unwrap();

    let dir_arg = dir.display().to_string();
    let shown = stdout_of(&ofi_xdp(&[
        "status",
        "--dev",
        "lo",
        "--stats-dir",
        &dir_arg,
    ]));
    assert!(
        shown.contains("endpoint rdm 127.0.0.1:47999 on AF_XDP queue 0 slot 3"),
        "{shown}"
    );
    assert!(
        shown.contains("retransmits") && shown.contains("17"),
        "{shown}"
    );
    assert!(shown.contains(&format!("pid {dead_pid} gone")), "{shown}");

    let cleaned = stdout_of(&ofi_xdp(&[
        "cleanup",
        "--dev",
        "lo",
        "--stats-dir",
        &dir_arg,
    ]));
    assert!(
        cleaned.contains("removed: endpoint statistics"),
        "{cleaned}"
    );
    assert!(!stale_path.exists());
    assert!(live.path().exists(), "a live endpoint's file was removed");
    drop(live);
    let _ = std::fs::remove_dir_all(&dir);
}

/// SIGKILL an endpoint holding all the provider makes on a four-queue
/// interface — the steering program (native), the AF_XDP socket on queue
/// 2, its statistics file, and, on drivers that take them, an ntuple rule
/// with its record — and nothing is left that a new endpoint cannot clean
/// up: the program went with the process (bpf_link), a new endpoint binds
/// the same queue on AF_XDP (not the kernel path) and reaps rule records of
/// the dead (veth takes no rules, so there are none here: the unit tests of
/// `ofi_xdp_link::ntuple` drive that path, and README.md has the check for
/// NICs that take rules), and `ofi-xdp cleanup` removes the statistics file
/// and the killed endpoint's AF_XDP group file.
#[test]
fn sigkill_leaves_nothing_a_new_endpoint_cannot_clean_up() {
    let pair = HostPair::with_queues(1500, 4).unwrap();
    let port = (22000 + std::process::id() % 20000).to_string();
    let env = [
        ("FI_XDP_QUEUE", "2"),
        ("FI_XDP_ATTACH_MODE", "native"),
        ("FI_LOG_LEVEL", "info"),
    ];
    let start = |host: &Host, server: Option<&Host>, log: &Path| {
        let mut cmd = host.command("fi_pingpong");
        cmd.args(["-p", "xdp", "-e", "rdm", "-m", "tagged", "-S", "64"])
            .args(["-I", "100000000", "-B", &port, "-P", &port])
            .env("FI_PROVIDER_PATH", provider_dir())
            .env_remove("FI_PROVIDER")
            .envs(env)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap());
        if let Some(s) = server {
            cmd.arg(s.ipv4().to_string());
        }
        Pingpong(cmd.spawn().expect("run fi_pingpong (libfabric-bin)"))
    };
    let logs = std::env::temp_dir().join(format!("ofi-xdp-sigkill-{}", std::process::id()));
    std::fs::create_dir_all(&logs).unwrap();
    let run = |round: u32| -> (Pingpong, Pingpong, String) {
        let log = logs.join(format!("server-{round}.log"));
        let server = start(&pair.a, None, &log);
        let t0 = Instant::now();
        while !listening(&pair.a, &port) {
            assert!(t0.elapsed() < Duration::from_secs(10), "no server");
            std::thread::sleep(Duration::from_millis(50));
        }
        let client = start(
            &pair.b,
            Some(&pair.a),
            &logs.join(format!("client-{round}.log")),
        );
        let t0 = Instant::now();
        loop {
            let s = status(&pair.a);
            if s.contains("(ours)") && counter(&s, "steered") > 50 {
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(20), "no traffic:\n{s}");
            std::thread::sleep(Duration::from_millis(100));
        }
        let server_log = std::fs::read_to_string(&log).unwrap();
        (server, client, server_log)
    };

    let (mut server, mut client, first_log) = run(1);
    assert!(
        first_log.contains("AF_XDP socket on queue 2 of 4"),
        "{first_log}"
    );
    assert!(status(&pair.a).contains("queue 2"));
    server.kill9();
    client.kill9();
    assert!(
        !ip_link_shows_xdp(&pair.a),
        "the killed server's program stayed"
    );

    // The record of a rule a killed endpoint left, as on a NIC that takes
    // rules (veth takes none, so the record is planted): status marks it.
    let left = dead_rule_record(&pair.a, &port);
    let s = status(&pair.a);
    assert!(s.contains("(gone: `ofi-xdp cleanup` removes it)"), "{s}");

    // A new endpoint on the same queue: bound on AF_XDP, not pushed to the
    // kernel path by anything the dead one held, and it reaps the record
    // (there is no rule left on the device: veth says EOPNOTSUPP).
    let (mut server, mut client, second_log) = run(2);
    assert!(
        !left.exists(),
        "the new endpoint left the dead rule's record"
    );
    assert!(
        second_log.contains("AF_XDP socket on queue 2 of 4")
            && !second_log.contains("uses the kernel UDP path"),
        "{second_log}"
    );
    let s = status(&pair.a);
    assert!(!s.contains("(gone: `ofi-xdp cleanup` removes it)"), "{s}");
    server.kill9();
    client.kill9();
    // Without a new endpoint, `ofi-xdp cleanup` removes such a record.
    let left = dead_rule_record(&pair.a, &port);
    for h in [&pair.a, &pair.b] {
        let cleaned = stdout_of(&ofi_xdp(&["cleanup", "--netns", h.netns()]));
        assert!(!cleaned.contains("failed"), "{cleaned}");
        assert!(!ip_link_shows_xdp(h), "XDP program left on {h}");
        if std::ptr::eq(h, &pair.a) {
            assert!(cleaned.contains("ntuple rule"), "{cleaned}");
        }
        // The killed endpoint's AF_XDP group file (its queue's UMEM group,
        // every member gone).
        assert!(
            cleaned.contains("AF_XDP group") && cleaned.contains("every member is gone"),
            "{cleaned}"
        );
    }
    assert!(!left.exists(), "cleanup left the dead rule's record");
    let _ = std::fs::remove_dir_all(&logs);
}

/// Writes, in `host`'s namespace, the record of an ntuple rule steering
/// `port` to queue 2 whose owner is gone; returns the record's file.
fn dead_rule_record(host: &Host, port: &str) -> PathBuf {
    use ofi_xdp_link::ntuple::{DEFAULT_DIR, FlowRule, RuleRecord};
    let dst = std::net::SocketAddr::new(host.ipv4().into(), port.parse().unwrap());
    let ifname = host.ifname().to_owned();
    host.run(move || {
        let name = std::ffi::CString::new(ifname.clone()).unwrap();
        // SAFETY: a valid NUL-terminated name.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        assert_ne!(ifindex, 0, "{ifname}");
        let rule = FlowRule { dst, queue: 2 };
        let mut rec = RuleRecord::ours(Path::new(DEFAULT_DIR), &ifname, ifindex, rule).unwrap();
        rec.pid = u32::MAX - 1; // beyond pid_max: no such process
        rec.location = Some(1023);
        std::fs::create_dir_all(DEFAULT_DIR).unwrap();
        rec.write().unwrap();
        rec.file
    })
}

/// A shared-memory area as the provider writes its start (magic, layout
/// version, owner pid), for an owner that is gone.
fn fake_area(path: &Path, owner: u32) {
    let mut head = Vec::from(*b"OFIXDPL\0");
    head.extend_from_slice(&1u32.to_ne_bytes());
    head.extend_from_slice(&owner.to_ne_bytes());
    std::fs::write(path, head).unwrap();
}

/// A pid that no longer runs.
fn dead_pid() -> u32 {
    let mut gone = Command::new(EXE)
        .arg("help")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    pid
}

/// Processes killed in a test host (or a container) leave their areas and
/// group files in /dev/shm, and once the namespace is gone no endpoint of
/// it can tidy them up: a whole-host `ofi-xdp cleanup` removes those, and
/// leaves a live namespace's alone (its next endpoint's business).
#[test]
fn cleanup_removes_files_of_namespaces_that_are_gone() {
    use ofi_xdp_link::group::{DEFAULT_DIR, Group};
    // The kernel hands a freed namespace number to the next namespace made
    // (a guest reuses it at once), so a dropped test host's number may be
    // live again by the time cleanup looks: name the gone namespace by a
    // number no namespace ever has, between the kernel's fixed ones
    // (0xEFFFFFFx) and its dynamic range (from 0xF0000000).
    let gone_ns: u64 = 0xF000_0000 - 0x100;
    let alive = HostPair::new().unwrap();
    let alive_ns = alive.a.run(ofi_xdp_tools::epstats::netns_inode).unwrap();
    let owner = dead_pid();
    let gone_area = PathBuf::from(format!("/dev/shm/ofi-xdp-local-{gone_ns}-198.18.0.1-9999"));
    let live_area = PathBuf::from(format!("/dev/shm/ofi-xdp-local-{alive_ns}-198.18.0.1-9999"));
    fake_area(&gone_area, owner);
    fake_area(&live_area, owner);
    // A group nobody is a member of, as its last killed member leaves it.
    let group = Group::open(Path::new(DEFAULT_DIR), gone_ns, 2, 0).unwrap();
    let group_path = group.path().to_path_buf();
    drop(group);

    let empty_stats = std::env::temp_dir().join(format!("ofi-xdp-nostats-{}", std::process::id()));
    std::fs::create_dir_all(&empty_stats).unwrap();
    let cleaned = ofi_xdp(&["cleanup", "--stats-dir", &empty_stats.display().to_string()]);
    let text = stdout_of(&cleaned);
    let (area_left, live_left, group_left) =
        (gone_area.exists(), live_area.exists(), group_path.exists());
    for p in [&gone_area, &live_area, &group_path] {
        let _ = std::fs::remove_file(p);
    }
    let _ = std::fs::remove_dir_all(&empty_stats);
    assert!(!area_left, "the gone namespace's area stayed:\n{text}");
    assert!(
        !group_left,
        "the gone namespace's group file stayed:\n{text}"
    );
    assert!(live_left, "a live namespace's area was removed:\n{text}");
}

/// Checks `v` against the `ofi-xdp status --json` schema of README.md: every documented key,
/// with its type (`null` where the schema allows it).
fn check_status_schema(v: &serde_json::Value) {
    use serde_json::Value;
    let int = |v: &Value, k: &str| assert!(v[k].is_u64(), "{k} not an integer in {v}");
    let int_or_null = |v: &Value, k: &str| assert!(v[k].is_u64() || v[k].is_null(), "{k}: {v}");
    let string = |v: &Value, k: &str| assert!(v[k].is_string(), "{k} not a string in {v}");
    let str_or_null = |v: &Value, k: &str| assert!(v[k].is_string() || v[k].is_null(), "{k}: {v}");
    let boolean = |v: &Value, k: &str| assert!(v[k].is_boolean(), "{k} not a boolean in {v}");
    let array = |v: &Value, k: &str| -> Vec<Value> {
        v[k].as_array()
            .unwrap_or_else(|| panic!("{k} not an array in {v}"))
            .clone()
    };
    let one_of = |v: &Value, k: &str, allowed: &[&str]| {
        assert!(
            v[k].as_str().is_some_and(|s| allowed.contains(&s)),
            "{k} not one of {allowed:?} in {v}"
        )
    };
    let rate = |c: &Value| assert!(c["rate_per_s"].is_number() || c["rate_per_s"].is_null());
    let endpoint = |e: &Value| {
        one_of(e, "type", &["rdm", "dgram"]);
        string(e, "address");
        one_of(e, "path", &["af_xdp", "kernel_udp"]);
        int_or_null(e, "queue");
        int_or_null(e, "slot");
        int(e, "pid");
        boolean(e, "alive");
        string(e, "file");
        for c in e["counters"]
            .as_object()
            .expect("endpoint counters")
            .values()
        {
            int(c, "value");
            boolean(c, "gauge");
            rate(c);
        }
    };
    assert_eq!(v["schema"], "ofi-xdp-status");
    assert_eq!(v["version"], 1);
    int(v, "time_unix");
    assert!(v["interval_s"].is_number() || v["interval_s"].is_null());
    int(v, "stats_files_elsewhere");
    assert!(
        array(v, "unreadable_stats_files")
            .iter()
            .all(Value::is_string)
    );
    array(v, "endpoints_on_other_interfaces")
        .iter()
        .for_each(endpoint);
    for i in array(v, "interfaces") {
        string(&i, "name");
        int(&i, "ifindex");
        for p in array(&i, "programs") {
            one_of(&p, "hook", &["native", "generic", "offload"]);
            int(&p, "id");
            str_or_null(&p, "name");
            boolean(&p, "ours");
            str_or_null(&p, "tag");
            one_of(&p, "attached_through", &["bpf_link", "netlink"]);
            int_or_null(&p, "link_id");
            for h in array(&p, "holders") {
                int(&h, "pid");
                str_or_null(&h, "command");
            }
            int_or_null(&p, "loaded_unix");
            int_or_null(&p, "uid");
            str_or_null(&p, "maps_error");
            for port in array(&p, "ports") {
                int(&port, "port");
                int(&port, "slot");
                int(&port, "queue");
            }
            for c in p["counters"]
                .as_object()
                .expect("program counters")
                .values()
            {
                int(c, "value");
                rate(c);
            }
            assert!(array(&p, "frames_by_rx_queue").iter().all(Value::is_u64));
            int(&p, "fault_one_in");
        }
        array(&i, "endpoints").iter().for_each(endpoint);
        for r in array(&i, "ntuple_rules") {
            string(&r, "rule");
            int_or_null(&r, "location");
            int(&r, "pid");
            boolean(&r, "alive");
        }
        for g in array(&i, "af_xdp_groups") {
            int(&g, "queue");
            if g["error"].is_null() {
                for m in array(&g, "members") {
                    assert!(m["pid"].is_i64() && m["alive"].is_boolean(), "{m}");
                }
                for k in ["capacity", "died", "stranded_rx", "rx_pooled"] {
                    int(&g, k);
                }
            } else {
                string(&g, "error");
            }
        }
    }
}

/// `status --json`, twice a moment apart (`--watch`): our program attached through netlink
/// and an endpoint's statistics file on the same interface, in the documented schema, with
/// what the text shows and a rate on the second document.
#[test]
fn status_json_follows_the_documented_schema() {
    let pair = HostPair::new().unwrap();
    attach_ours_with_ip(&pair.a);
    let dir = std::env::temp_dir().join(format!("ofi-xdp-json-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (ns, ifname, ip) = (
        pair.a.netns().to_owned(),
        pair.a.ifname().to_owned(),
        pair.a.ipv4(),
    );
    let dir_arg = dir.display().to_string();
    // The statistics file records the namespace of the thread that writes it.
    let out = pair.a.run(move || {
        let name = std::ffi::CString::new(ifname.clone()).unwrap();
        // SAFETY: a valid NUL-terminated name.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        let identity = Identity {
            endpoint: "rdm".into(),
            path: DataPath::AfXdp,
            ifname,
            ifindex,
            address: format!("{ip}:47999"),
            queue: Some(0),
            slot: Some(0),
        };
        let w = Writer::create(
            &dir,
            0,
            &identity,
            &["retransmits", "unexpected_bytes"],
            &["unexpected_bytes"],
        )
        .unwrap();
        w.set(0, 17);
        w.set(1, 4096);
        let args = ["status", "--netns", &ns, "--stats-dir", &dir_arg, "--json"];
        let out = ofi_xdp(&[&args[..], &["--watch", "0.2", "--count", "2"]].concat());
        drop(w);
        let _ = std::fs::remove_dir_all(&dir);
        out
    });
    let text = stdout_of(&out);
    let docs: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(docs.len(), 2, "{text}");
    for d in &docs {
        check_status_schema(d);
    }
    let (first, second) = (&docs[0], &docs[1]);
    assert!(first["interval_s"].is_null() && second["interval_s"].is_number());
    let iface = first["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == pair.a.ifname())
        .unwrap_or_else(|| panic!("{first}"));
    let program = &iface["programs"][0];
    assert_eq!(program["name"], "ofi_xdp_steer", "{program}");
    assert_eq!(program["ours"], true);
    assert_eq!(program["attached_through"], "netlink");
    assert_eq!(
        program["counters"].as_object().unwrap().len(),
        6,
        "{program}"
    );
    let endpoint = &iface["endpoints"][0];
    assert_eq!(endpoint["pid"], std::process::id());
    assert_eq!(endpoint["alive"], true);
    assert_eq!(endpoint["counters"]["retransmits"]["value"], 17);
    assert_eq!(endpoint["counters"]["unexpected_bytes"]["gauge"], true);
    let later = second["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == pair.a.ifname())
        .unwrap();
    let retransmits = &later["endpoints"][0]["counters"]["retransmits"];
    assert_eq!(retransmits["rate_per_s"], 0.0, "{retransmits}");
    assert!(later["programs"][0]["counters"]["steered"]["rate_per_s"].is_number());
    let _ = ofi_xdp(&["cleanup", "--netns", pair.a.netns()]);
}
