//! The C test suite (tests/c/*.c), run through the real libfabric loader.
//!
//! Each C program is compiled with `cc` against /usr/include/rdma and
//! linked with -lfabric; the provider is the cdylib cargo built next to this
//! test binary, copied as `libxdp-fi.so` into a private directory named by
//! FI_PROVIDER_PATH. Programs run inside a fresh test-host namespace (one
//! veth end, addressed), so the provider sees exactly one usable interface
//! and nothing can reach a network outside the pair.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::path::Path;
use std::process::{Command, Output};

use ofi_xdp_testhosts::{Host, HostPair, ImpairedPair, Impairment, LeafSpine, Routed};

mod common;
use common::{
    assert_passed, chunks_copied_by_senders, cma_counts, compile, failure_digest, local_paths,
    remote_paths, remove_shm_leftovers, spawn_collected, wait_running, work_dir, xsk_counts,
};

fn run_in(host: &Host, peer: &Host, bin: &Path, extra: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = host.command(bin);
    cmd.arg(host.ifname())
        .arg(host.ipv4().to_string())
        .arg(peer.ipv4().to_string())
        .args(extra);
    cmd.env("FI_PROVIDER_PATH", work_dir())
        .env_remove("FI_PROVIDER")
        .env_remove("FI_XDP_IFACE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run C test")
}

/// Compile and run one C program in a new namespace pair, on host `a`.
fn run_c_test(name: &str) {
    let bin = compile(name);
    let pair = HostPair::new().expect("test hosts");
    wait_running(&pair);
    let out = run_in(&pair.a, &pair.b, &bin, &[], &[]);
    assert_passed(name, &out);
}

#[test]
fn c_getinfo() {
    run_c_test("getinfo");
}

#[test]
fn c_getinfo_without_usable_interface_logs_why() {
    let bin = compile("getinfo");
    let pair = HostPair::new().expect("test hosts");
    pair.a
        .ip(&["link", "set", pair.a.ifname(), "down"])
        .unwrap();
    let out = run_in(
        &pair.a,
        &pair.b,
        &bin,
        &["expect-none"],
        &[("FI_LOG_LEVEL", "warn")],
    );
    assert_passed("getinfo(no interface)", &out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("xdp provider unavailable"),
        "no log line saying why:\n{stderr}"
    );
}

#[test]
fn c_getinfo_without_capabilities_logs_why() {
    let bin = compile("getinfo");
    let pair = HostPair::new().expect("test hosts");
    wait_running(&pair);
    // Enter the namespace as root, then drop every capability for the test.
    let mut cmd = pair.a.command("setpriv");
    cmd.args([
        "--inh-caps=-all",
        "--ambient-caps=-all",
        "--bounding-set=-all",
        "--",
    ])
    .arg(&bin)
    .arg(pair.a.ifname())
    .arg(pair.a.ipv4().to_string())
    .arg(pair.b.ipv4().to_string())
    .arg("expect-none")
    .env("FI_PROVIDER_PATH", work_dir())
    .env("FI_LOG_LEVEL", "warn");
    let out = cmd.output().unwrap();
    assert_passed("getinfo(no capabilities)", &out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("missing capabilities"),
        "no log line saying why:\n{stderr}"
    );
}

#[test]
fn c_objects() {
    run_c_test("objects");
}

#[test]
fn c_av() {
    run_c_test("av");
}

#[test]
fn c_queues() {
    run_c_test("queues");
}

/// Poll sets, wait sets (UNSPEC, FD, MUTEX_COND, YIELD) and FI_WAIT_MUTEX_COND
/// queues driving manual progress.
#[test]
fn c_waits() {
    run_c_test("waits");
}

/// A named AV shared by two processes (created, attached with FI_READ,
/// map_addr, removals seen across, mode 0600, gone with its creator).
#[test]
fn c_shared_av() {
    run_c_test("shared_av");
}

#[test]
fn c_mr() {
    run_c_test("mr");
}

#[test]
fn c_msg_args() {
    run_c_test("msg_args");
}

/// `name` (rma.c, atomic.c) with the mr_mode argument `mode`.
fn run_rma_test(name: &str, mode: &str) {
    let bin = compile(name);
    let pair = HostPair::new().expect("test hosts");
    wait_running(&pair);
    let out = run_in(&pair.a, &pair.b, &bin, &[mode], &[]);
    assert_passed(name, &out);
}

/// rma.c and atomic.c under each registration mode (xt_rma.h): provider
/// keys with offsets (what modern applications get), provider keys with
/// virtual addresses (FI_MR_BASIC), requested keys with offsets.
#[test]
fn c_rma_provider_keys() {
    run_rma_test("rma", "prov");
}

#[test]
fn c_rma_basic_virtual_addresses() {
    run_rma_test("rma", "basic");
}

#[test]
fn c_rma_requested_keys() {
    run_rma_test("rma", "requested");
}

#[test]
fn c_atomic_provider_keys() {
    run_rma_test("atomic", "prov");
}

#[test]
fn c_atomic_basic_virtual_addresses() {
    run_rma_test("atomic", "basic");
}

#[test]
fn c_atomic_requested_keys() {
    run_rma_test("atomic", "requested");
}

/// op_flags.c: every flag of every *msg data call, accepted and honoured
/// or refused with -FI_EBADFLAGS, under two registration modes.
#[test]
fn c_op_flags_provider_keys() {
    run_rma_test("op_flags", "prov");
}

#[test]
fn c_op_flags_basic_virtual_addresses() {
    run_rma_test("op_flags", "basic");
}

/// Run `data.c` as server in `a` and client in `b` (or alone as `self`).
fn run_data(ep: &str) {
    run_data_env(ep, &[]);
}

fn run_data_env(ep: &str, env: &[(&str, &str)]) {
    run_data_with(ep, env, &[], &[], Where::TwoHosts, 1500);
}

/// Where the data test's client runs relative to its server.
#[derive(PartialEq)]
enum Where {
    /// In the other namespace: AF_XDP frames over the veth pair.
    TwoHosts,
    /// In the server's namespace, on the same interface and address.
    SameHost,
}

/// The data test with `env` for both processes, plus `server_env` and
/// `client_env` for one of them, on test hosts with `mtu`.
fn run_data_with(
    ep: &str,
    env: &[(&str, &str)],
    server_env: &[(&str, &str)],
    client_env: &[(&str, &str)],
    at: Where,
    mtu: u32,
) {
    let pair = HostPair::with_mtu(mtu).expect("test hosts");
    wait_running(&pair);
    let client_host = if at == Where::SameHost {
        &pair.a
    } else {
        &pair.b
    };
    let (client, server) = data_between(&pair.a, client_host, ep, env, server_env, client_env);
    if env.iter().any(|(k, _)| *k == "FI_XDP_FAULT_DROP") {
        let log = String::from_utf8_lossy(&client.stderr);
        assert!(
            log.contains("dropping one in"),
            "fault injection not applied:\n{log}"
        );
    }
    if at == Where::SameHost {
        // The second process joined the first one's queue (a UMEM group)
        // instead of falling back to the kernel path — where the kernel
        // lets it (Linux 6.4+); before, it falls back and says so.
        let logs = format!(
            "{}{}",
            String::from_utf8_lossy(&client.stderr),
            String::from_utf8_lossy(&server.stderr)
        );
        let fell_back = logs.contains("uses the kernel UDP path");
        assert_eq!(
            fell_back,
            !ofi_xdp_link::group::kernel_lets_members_join(),
            "{logs}"
        );
    }
}

/// The data test's server on `server_host` and its client on
/// `client_host`, both passing; their outputs (client, server).
fn data_between(
    server_host: &Host,
    client_host: &Host,
    ep: &str,
    env: &[(&str, &str)],
    server_env: &[(&str, &str)],
    client_env: &[(&str, &str)],
) -> (Output, Output) {
    let bin = compile("data");
    let rv = work_dir().join(format!(
        "rv-{ep}-{}-{}",
        server_host.netns(),
        client_host.netns()
    ));
    std::fs::create_dir_all(&rv).unwrap();
    let rv_s = rv.to_string_lossy().into_owned();
    let server = {
        let mut cmd = server_host.command(&bin);
        cmd.arg(server_host.ifname())
            .arg(server_host.ipv4().to_string())
            .arg(client_host.ipv4().to_string());
        cmd.args(["server", &rv_s, ep])
            .env("FI_PROVIDER_PATH", work_dir())
            .env("FI_LOG_LEVEL", "warn")
            .envs(env.iter().copied())
            .envs(server_env.iter().copied());
        cmd.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        spawn_collected(&mut cmd)
    };
    let mut all_client_env = vec![("FI_LOG_LEVEL", "warn")];
    all_client_env.extend_from_slice(env);
    all_client_env.extend_from_slice(client_env);
    let client = run_in(
        client_host,
        server_host,
        &bin,
        &["client", &rv_s, ep],
        &all_client_env,
    );
    let server = server.join().unwrap();
    if !client.status.success() {
        eprintln!("data server: {}", failure_digest(&server.stderr));
    }
    assert_passed("data client", &client);
    assert_passed("data server", &server);
    let _ = std::fs::remove_dir_all(&rv);
    (client, server)
}

/// Run `tests/c/<name>.c` as `server` in `a` and `client` in `b` (argv:
/// <iface> <local IP> <peer IP> <role> <rendezvous dir>), each with its
/// own extra environment; both must pass.
fn run_pair(name: &str, server_env: &[(&str, &str)], client_env: &[(&str, &str)]) {
    run_pair_at(name, server_env, client_env, Where::TwoHosts);
}

/// [`run_pair`] with the client `at` the other host or the server's;
/// their outputs (client, server).
fn run_pair_at(
    name: &str,
    server_env: &[(&str, &str)],
    client_env: &[(&str, &str)],
    at: Where,
) -> (Output, Output) {
    let bin = compile(name);
    let pair = HostPair::new().expect("test hosts");
    wait_running(&pair);
    let client_host = if at == Where::SameHost {
        &pair.a
    } else {
        &pair.b
    };
    let rv = work_dir().join(format!("rv-{name}-{}", pair.a.netns()));
    std::fs::create_dir_all(&rv).unwrap();
    let rv_s = rv.to_string_lossy().into_owned();
    let server = {
        let mut cmd = pair.a.command(&bin);
        cmd.arg(pair.a.ifname())
            .arg(pair.a.ipv4().to_string())
            .arg(client_host.ipv4().to_string())
            .args(["server", &rv_s])
            .env("FI_PROVIDER_PATH", work_dir())
            .env("FI_LOG_LEVEL", "warn")
            .env_remove("FI_PROVIDER")
            .envs(server_env.iter().copied())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        spawn_collected(&mut cmd)
    };
    let mut env = vec![("FI_LOG_LEVEL", "warn")];
    env.extend_from_slice(client_env);
    let client = run_in(client_host, &pair.a, &bin, &["client", &rv_s], &env);
    let server = server.join().unwrap();
    if !client.status.success() {
        eprintln!(
            "server stdout:\n{}\nserver: {}",
            String::from_utf8_lossy(&server.stdout),
            failure_digest(&server.stderr)
        );
    }
    assert_passed(&format!("{name} client"), &client);
    assert_passed(&format!("{name} server"), &server);
    let _ = std::fs::remove_dir_all(&rv);
    (client, server)
}

/// The connected-endpoint test with both processes on one host: the
/// connection's datagrams go through shared memory (the listening endpoint
/// is a plain UDP socket without an area, so connection requests take the
/// kernel socket).
#[test]
fn c_msg_ep_one_host() {
    let info = [("FI_LOG_LEVEL", "info")];
    let client_env = [("FI_XDP_PEER_TIMEOUT", "2"), ("FI_LOG_LEVEL", "info")];
    let (client, server) = run_pair_at("msg_ep", &info, &client_env, Where::SameHost);
    for (who, out) in [("client", &client), ("server", &server)] {
        let log = String::from_utf8_lossy(&out.stderr);
        let paths = local_paths(&log);
        assert!(
            paths.iter().any(|(_, shm)| *shm > 0),
            "{who}: nothing through shared memory: {paths:?}\n{log}"
        );
    }
}

/// Connected endpoints (FI_EP_MSG), the programmer's guide way: listen,
/// connect, accept, ping-pong with data checks, shutdown; a rejected
/// request, a connect to nobody (refused) and to a silent port (timed out,
/// FI_XDP_PEER_TIMEOUT=2), and a peer that closes without fi_shutdown.
#[test]
fn c_msg_ep() {
    run_pair("msg_ep", &[], &[("FI_XDP_PEER_TIMEOUT", "2")]);
}

/// The same with a job key on both sides: the connection's session
/// datagrams are authenticated as RDM's are (the connection messages are not).
#[test]
fn c_msg_ep_authenticated() {
    let key = ("FI_XDP_AUTH_KEY", AUTH_KEY);
    run_pair("msg_ep", &[key], &[("FI_XDP_PEER_TIMEOUT", "2"), key]);
}

/// Connected endpoints with path entropy (FI_XDP_PATHS=4) and a job key:
/// the connection admits its peer's session datagrams from any source
/// port (the connection messages keep the endpoint's own).
#[test]
fn c_msg_ep_paths_authenticated() {
    let key = ("FI_XDP_AUTH_KEY", AUTH_KEY);
    let paths = ("FI_XDP_PATHS", "4");
    run_pair(
        "msg_ep",
        &[key, paths],
        &[("FI_XDP_PEER_TIMEOUT", "2"), key, paths],
    );
}

/// FI_PROGRESS_AUTO: a receiver that makes no libfabric call for 3 s still
/// answers a rendezvous and acknowledges it; a MUTEX_COND CQ's waiter is
/// woken by the progress thread.
#[test]
fn c_auto_progress() {
    run_pair("auto_progress", &[], &[]);
}

/// DGRAM with our header: FI_MSG_PREFIX and remote CQ data between hosts.
#[test]
fn c_dgram_prefix() {
    run_pair("dgram_prefix", &[], &[]);
}

/// FI_SOURCE_ERR: a receive from outside the AV is an FI_EADDRNOTAVAIL
/// entry carrying the source's address (RDM and DGRAM, between hosts).
#[test]
fn c_source_err() {
    run_pair("source_err", &[], &[]);
}

/// The same with path entropy (FI_XDP_PATHS=4): the address reported is
/// the sender's endpoint address, whatever source ports its datagrams had.
#[test]
fn c_source_err_paths() {
    let paths = [("FI_XDP_PATHS", "4")];
    run_pair("source_err", &paths, &paths);
}

/// The same with both processes on one host (shared-memory path for RDM).
#[test]
fn c_source_err_one_host() {
    run_pair_at("source_err", &[], &[], Where::SameHost);
}

/// One side on its kernel UDP socket (FI_XDP_KERNEL_PATH), the other on
/// AF_XDP: the two paths interoperate. In RDM both directions carry data;
/// in DGRAM the client sends, so its kernel-sent datagrams (with the partial
/// checksum veth passes on) reach an AF_XDP receiver.
#[test]
fn c_data_rdm_kernel_path_peer() {
    let kernel = [("FI_XDP_KERNEL_PATH", "1")];
    run_data_with("rdm", &[], &kernel, &[], Where::TwoHosts, 1500);
}

/// Path entropy (FI_XDP_PATHS=4, PROTOCOL.md §4.6) between two hosts: each
/// side's session datagrams come from four source ports, and FI_SOURCE,
/// directed receives and every data check see the peer's own address.
#[test]
fn c_data_rdm_paths() {
    let paths = [("FI_XDP_PATHS", "4")];
    run_data_with("rdm", &paths, &[], &[], Where::TwoHosts, 1500);
}

/// The same to a peer on its kernel UDP socket, which receives the
/// datagrams from the varying source ports (it sends from its socket's).
#[test]
fn c_data_rdm_paths_kernel_path_peer() {
    let paths = [("FI_XDP_PATHS", "4")];
    let kernel = [("FI_XDP_KERNEL_PATH", "1")];
    run_data_with("rdm", &paths, &kernel, &[], Where::TwoHosts, 1500);
}

#[test]
fn c_data_dgram_kernel_path_sender() {
    let kernel = [("FI_XDP_KERNEL_PATH", "1")];
    run_data_with("dgram", &[], &[], &kernel, Where::TwoHosts, 1500);
}

/// Two processes on one interface and address (two MPI ranks on a node):
/// the second joins the first one's AF_XDP queue (a UMEM group), and the
/// two reach each other through the kernel, since a frame to our own
/// address would leave on the wire.
#[test]
fn c_data_rdm_two_processes_one_interface() {
    run_data_with("rdm", &[], &[], &[], Where::SameHost, 1500);
}

// Two processes in one host (namespace), on one address, different ports:
// the engine's datagrams between them go through shared memory, not the
// kernel UDP socket. Each closing line (FI_LOG_LEVEL=info) says which path
// carried what.

/// The data test's two processes in host `a`, with `env`; asserts that
/// shared memory, not the kernel socket, carried what they sent each other.
fn data_one_host(env: &[(&str, &str)]) -> (Output, Output) {
    let pair = HostPair::new().expect("test hosts");
    wait_running(&pair);
    let mut all = vec![("FI_LOG_LEVEL", "info")];
    all.extend_from_slice(env);
    let (client, server) = data_between(&pair.a, &pair.a, "rdm", &all, &[], &[]);
    for (who, out) in [("client", &client), ("server", &server)] {
        let log = String::from_utf8_lossy(&out.stderr);
        let paths = local_paths(&log);
        println!("{who}: (kernel from this host, shared memory) per port: {paths:?}");
        assert!(!paths.is_empty(), "{who}: no closing line:\n{log}");
        for (kernel, shm) in &paths {
            assert_eq!(
                *kernel, 0,
                "{who}: local datagrams took the kernel socket:\n{log}"
            );
            assert!(*shm > 0, "{who}: nothing through shared memory:\n{log}");
        }
    }
    (client, server)
}

/// The whole RDM data test (tagged and untagged, 0 B to 16 MiB, inject,
/// multi-recv, truncation, cancel, FI_SOURCE) between two processes of one
/// host, over shared memory.
#[test]
fn c_data_rdm_one_host_shared_memory() {
    let (client, server) = data_one_host(&[]);
    // Its small sends went as direct messages (PROTOCOL.md §6.9).
    for (who, out) in [("client", &client), ("server", &server)] {
        let log = String::from_utf8_lossy(&out.stderr);
        let direct = common::direct_messages(&log);
        println!("{who}: direct messages (sent, received): {direct:?}");
        let (sent, received) = direct.unwrap_or_default();
        assert!(
            sent > 0 && received > 0,
            "{who}: no direct messages:\n{log}"
        );
    }
}

/// The same with a job key: the datagrams in the rings are authenticated,
/// and once each pair's handshake verified small sends go as direct
/// messages still (PROTOCOL.md §6.9).
#[test]
fn c_data_rdm_one_host_authenticated() {
    let (client, server) = data_one_host(&[("FI_XDP_AUTH_KEY", AUTH_KEY)]);
    for (who, out) in [("client", &client), ("server", &server)] {
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(
            log.contains("packet authentication on"),
            "{who}: no key:\n{log}"
        );
        let (sent, received) = common::direct_messages(&log).unwrap_or_default();
        println!("{who}: direct messages (sent, received): ({sent}, {received})");
        assert!(
            sent > 0 && received > 0,
            "{who}: no direct messages:\n{log}"
        );
    }
}

/// The same with direct messages off: every message through the
/// protocol's datagrams in the rings.
#[test]
fn c_data_rdm_one_host_without_direct_messages() {
    let (client, server) = data_one_host(&[("FI_XDP_LOCAL_DIRECT", "0")]);
    for out in [&client, &server] {
        let log = String::from_utf8_lossy(&out.stderr);
        assert_eq!(common::direct_messages(&log), None, "{log}");
    }
}

/// On one host, a receiver blocked in poll() on its CQ's fd (after
/// fi_trywait) wakes for a message that arrives through shared memory
/// (its doorbell).
#[test]
fn c_data_rdm_one_host_wait_fd() {
    data_one_host(&[("XT_WAIT_FD", "1")]);
}

/// On one host, a peer that dies without closing: there is no ICMP on the
/// shared-memory path, its process is looked for instead, and the next
/// send fails with FI_EHOSTUNREACH within seconds.
#[test]
fn c_data_rdm_one_host_peer_dies() {
    let pair = HostPair::new().expect("test hosts");
    wait_running(&pair);
    data_between(&pair.a, &pair.a, "rdm", &[("XT_PEER_DIES", "1")], &[], &[]);
    remove_shm_leftovers(&pair.a);
}

/// On one host, a sender that dies with a large message offered for a
/// single copy, before the receiver posts its receive: the pull from the
/// dead process fails and nothing answers the fallback, so the receive ends
/// in an error completion (FI_EHOSTUNREACH) within seconds instead of
/// hanging or completing with bytes nobody sent.
#[test]
fn c_data_rdm_one_host_sender_dies_with_offer() {
    let pair = HostPair::new().expect("test hosts");
    wait_running(&pair);
    let env = [("XT_SENDER_DIES_WITH_OFFER", "1"), ("FI_LOG_LEVEL", "info")];
    let (_, server) = data_between(&pair.a, &pair.a, "rdm", &env, &[], &[]);
    remove_shm_leftovers(&pair.a);
    let log = String::from_utf8_lossy(&server.stderr);
    // The receiver tried the pull and fell back (it does not know the
    // sender is gone until the pull says so); the fallback's datagrams
    // then found the peer gone.
    let (pulls, fallbacks) = cma_counts(&log).unwrap_or_else(|| panic!("no closing line:\n{log}"));
    assert_eq!((pulls, fallbacks), (0, 1), "server (pulls, fallbacks)");
}

/// On one host, the client streams 64 KiB messages to the server, which the
/// test kills (SIGKILL) mid-stream: the client's sends in flight fail (no
/// hang). The server starts again at the same address (a new incarnation
/// replaces the dead one's shared-memory area) and the client reaches it.
#[test]
fn c_data_rdm_one_host_peer_killed_and_restarted() {
    let bin = compile("data");
    let pair = HostPair::new().expect("test hosts");
    wait_running(&pair);
    let host = &pair.a;
    let rv = work_dir().join(format!("rv-restart-{}", host.netns()));
    std::fs::create_dir_all(&rv).unwrap();
    let rv_s = rv.to_string_lossy().into_owned();
    let env = [
        ("XT_RESTART", "1"),
        ("FI_LOG_LEVEL", "info"),
        ("FI_PROVIDER_PATH", work_dir().to_str().unwrap()),
    ];
    let server = |restarted: bool| {
        let mut cmd = host.command(&bin);
        cmd.arg(host.ifname())
            .arg(host.ipv4().to_string())
            .arg(host.ipv4().to_string())
            .args(["server", &rv_s, "rdm"])
            .envs(env)
            .env("FI_XDP_PORT", "40123")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        if restarted {
            cmd.env("XT_RESTARTED", "1");
        }
        cmd.spawn().unwrap()
    };
    let mut first = server(false);
    let client = {
        let mut cmd = host.command(&bin);
        cmd.arg(host.ifname())
            .arg(host.ipv4().to_string())
            .arg(host.ipv4().to_string())
            .args(["client", &rv_s, "rdm"])
            .envs(env)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        spawn_collected(&mut cmd)
    };
    let streaming = rv.join("client.streaming");
    for _ in 0..400 {
        if streaming.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(streaming.exists(), "the client never streamed");
    first.kill().unwrap(); // SIGKILL
    first.wait().unwrap();
    let second = server(true);
    let client = client.join().unwrap();
    let second = second.wait_with_output().unwrap();
    if !client.status.success() {
        eprintln!("restarted server: {}", failure_digest(&second.stderr));
    }
    assert_passed("client", &client);
    assert_passed("restarted server", &second);
    let out = String::from_utf8_lossy(&client.stdout);
    assert!(out.contains("error completion after"), "{out}");
    assert!(out.contains("restarted peer reached"), "{out}");
    // The new incarnation took the traffic through shared memory too.
    let log = String::from_utf8_lossy(&second.stderr);
    let paths = local_paths(&log);
    assert!(
        !paths.is_empty() && paths.iter().all(|(k, shm)| *k == 0 && *shm > 0),
        "{paths:?}\n{log}"
    );
    let _ = std::fs::remove_dir_all(&rv);
    remove_shm_leftovers(host);
}

/// FI_XDP_LOCAL_SHM=0: local peers use the kernel socket as before.
#[test]
fn c_data_rdm_one_host_without_shared_memory() {
    let pair = HostPair::new().expect("test hosts");
    wait_running(&pair);
    let env = [("FI_LOG_LEVEL", "info"), ("FI_XDP_LOCAL_SHM", "0")];
    let (client, _) = data_between(&pair.a, &pair.a, "rdm", &env, &[], &[]);
    let log = String::from_utf8_lossy(&client.stderr);
    assert!(
        log.contains(" closed: ") && !log.contains("through shared memory"),
        "{log}"
    );
}

/// Large messages between two processes of one host (sizes around the
/// eager limit, 1 and 16 MiB both ways, unexpected, gather/scatter,
/// truncation, delivery complete), data verified: `env` for both; the
/// (pulls, fallbacks) of (client, server) from their closing lines.
fn large_one_host(env: &[(&str, &str)]) -> [(u64, u64); 2] {
    let (counts, helped) = large_one_host_shared(env);
    println!("chunks of pulls copied by the senders: {helped}");
    counts
}

/// [`large_one_host`], and the chunks of both sides' pulls that the
/// senders copied.
fn large_one_host_shared(env: &[(&str, &str)]) -> ([(u64, u64); 2], u64) {
    let mut all = vec![("XT_LARGE", "1")];
    all.extend_from_slice(env);
    let (client, server) = data_one_host(&all);
    let mut helped = 0;
    let counts = [client, server].map(|out| {
        let log = String::from_utf8_lossy(&out.stderr);
        helped += chunks_copied_by_senders(&log).unwrap_or(0);
        cma_counts(&log).unwrap_or_else(|| panic!("no closing line:\n{log}"))
    });
    (counts, helped)
}

/// The receiver copies each rendezvous message once from the sender's
/// memory (process_vm_readv, PROTOCOL.md §6.7): 4 sizes above the eager
/// limit each way, then 4 more messages to the server; nothing falls back.
#[test]
fn c_data_rdm_one_host_large_messages_single_copy() {
    let [client, server] = large_one_host(&[]);
    assert_eq!(client, (4, 0), "client (pulls, fallbacks)");
    assert_eq!(server, (8, 0), "server (pulls, fallbacks)");
}

/// A pull that fails (here: the offers name an address that faults, so
/// process_vm_readv copies the data, then reads short) falls back to the
/// rings: every message still arrives intact.
#[test]
fn c_data_rdm_one_host_large_messages_pull_fails() {
    let [client, server] = large_one_host(&[("OFI_XDP_TEST_CMA_FAULT", "1")]);
    assert_eq!(client, (0, 4), "client (pulls, fallbacks)");
    assert_eq!(server, (0, 8), "server (pulls, fallbacks)");
}

/// FI_XDP_LOCAL_CMA=0: no offers, the data goes through the rings.
#[test]
fn c_data_rdm_one_host_large_messages_without_cma() {
    let counts = large_one_host(&[("FI_XDP_LOCAL_CMA", "0")]);
    assert_eq!(counts, [(0, 0); 2]);
}

/// Jumbo frames (MTU 9000): RDM datagrams of up to 9 KB span three UMEM
/// frames through AF_XDP multi-buffer (Linux 6.6+; older kernels fall back
/// to one frame per datagram). With loss, so retransmissions of
/// multi-frame datagrams are covered too.
#[test]
fn c_data_rdm_jumbo_frames() {
    let loss = [("FI_XDP_FAULT_DROP", "50")];
    run_data_with("rdm", &loss, &[], &[], Where::TwoHosts, 9000);
}

/// A jumbo peer and one that takes one frame per datagram (multi-buffer off,
/// as on a kernel before 6.6): the size each states in its HELLO keeps the
/// jumbo side's datagrams within what the other can receive (without it
/// every large message is lost until the peer times out).
#[test]
fn c_data_rdm_jumbo_frames_one_frame_peer() {
    let one_frame = [("FI_XDP_MULTI_BUFFER", "0")];
    run_data_with("rdm", &[], &one_frame, &[], Where::TwoHosts, 9000);
}

#[test]
fn c_data_rdm() {
    run_data("rdm");
}

/// The whole RDM data test with the XDP program dropping one in 50 of the
/// frames each side receives: the engine's retransmission must hide it.
#[test]
fn c_data_rdm_with_loss() {
    run_data_env("rdm", &[("FI_XDP_FAULT_DROP", "50")]);
}

/// The RDM data test with IPv6 `struct sockaddr_in6` addresses: no MAC in
/// the address, so the first send resolves it through neighbour discovery.
#[test]
fn c_data_rdm_sockaddr_in6() {
    run_data_env("rdm", &[("XT_FORMAT", "in6")]);
}

/// DGRAM with `struct sockaddr_in` (MAC through ARP).
#[test]
fn c_data_dgram_sockaddr_in() {
    run_data_env("dgram", &[("XT_FORMAT", "in")]);
}

/// FI_THREAD_SAFE: a receiving thread and a sending thread on one RDM
/// endpoint (sending to itself), 5000 messages.
#[test]
fn c_data_rdm_two_threads() {
    let bin = compile("data");
    let pair = HostPair::new().expect("test hosts");
    wait_running(&pair);
    let out = run_in(
        &pair.a,
        &pair.b,
        &bin,
        &["self", "/nonexistent", "rdm"],
        &[("XT_THREADS", "1")],
    );
    assert_passed("data two threads", &out);
}

/// A peer that stays silent longer than FI_XDP_PEER_TIMEOUT (1 s here):
/// the send fails with FI_EHOSTUNREACH through fi_cq_readerr.
#[test]
fn c_data_rdm_silent_peer() {
    run_data_env(
        "rdm",
        &[
            ("XT_SILENT", "1"),
            ("XT_EXPECT_UNREACHABLE", "1"),
            ("FI_XDP_PEER_TIMEOUT", "1"),
            // A peer that truly never progresses (a hung process): without
            // the progress helper, which would otherwise answer for it.
            ("FI_XDP_PROGRESS_MS", "0"),
        ],
    );
}

/// A peer that closes its endpoint with the client's send in flight: the
/// send fails with FI_ECONNRESET at once (the close notice), not after the
/// 300 s peer timeout.
#[test]
fn c_data_rdm_peer_closes() {
    run_data_env("rdm", &[("XT_PEER_CLOSES", "1")]);
}

/// A peer that dies without closing (as if killed): the client's next
/// send fails with FI_EHOSTUNREACH within seconds, from the ICMP port
/// unreachable its datagram draws, not after the 300 s peer timeout.
#[test]
fn c_data_rdm_peer_dies() {
    let pair = HostPair::new().expect("test hosts");
    wait_running(&pair);
    data_between(&pair.a, &pair.b, "rdm", &[("XT_PEER_DIES", "1")], &[], &[]);
    remove_shm_leftovers(&pair.a);
}

/// The RDM data test with an FI_WAIT_FD receive CQ; at its end the server
/// blocks in poll() on the CQ's fd until the client's message wakes it.
#[test]
fn c_data_rdm_wait_fd() {
    run_data_env("rdm", &[("XT_WAIT_FD", "1")]);
}

#[test]
fn c_data_dgram() {
    run_data("dgram");
}

#[test]
fn c_data_self() {
    let bin = compile("data");
    let pair = HostPair::new().expect("test hosts");
    wait_running(&pair);
    for ep in ["rdm", "dgram"] {
        let out = run_in(&pair.a, &pair.b, &bin, &["self", "/nonexistent", ep], &[]);
        assert_passed("data self", &out);
        // The same with FI_SELECTIVE_COMPLETION on both CQs (and, for RDM,
        // a multi-recv buffer whose release must still be reported).
        let out = run_in(
            &pair.a,
            &pair.b,
            &bin,
            &["self", "/nonexistent", ep],
            &[("XT_SELECTIVE", "1")],
        );
        assert_passed("data self selective", &out);
        // fi_cq_sread on an FI_CQ_COND_THRESHOLD CQ with cond = (void *)4.
        let out = run_in(
            &pair.a,
            &pair.b,
            &bin,
            &["self", "/nonexistent", ep],
            &[("XT_THRESHOLD", "1")],
        );
        assert_passed("data self sread threshold", &out);
    }
}

/// Debian's fi_pingpong between the two namespaces over `xdp`, with data
/// checking (-c) over all sizes (-S all): the server in `a`, the client in `b`.
fn pingpong(args: &[&str]) {
    pingpong_on(1500, args);
}

fn pingpong_on(mtu: u32, args: &[&str]) {
    let pair = HostPair::with_mtu(mtu).expect("test hosts");
    wait_running(&pair);
    pingpong_between(&pair.a, &pair.b, args, &[]);
}

/// fi_pingpong's server on `a`, its client on `b`, with `env` for both;
/// the client's table.
fn pingpong_between(a: &Host, b: &Host, args: &[&str], env: &[(&str, &str)]) -> String {
    let (server, client) = pingpong_outputs(a, b, args, env, env);
    let table = String::from_utf8_lossy(&client.stdout).into_owned();
    assert_no_peer_lost("fi_pingpong", &[&client, &server]);
    table
}

/// fi_pingpong's server on `a` with `server_env`, its client on `b` with
/// `client_env`, both passing with a result table; their outputs (server,
/// client).
fn pingpong_outputs(
    a: &Host,
    b: &Host,
    args: &[&str],
    server_env: &[(&str, &str)],
    client_env: &[(&str, &str)],
) -> (Output, Output) {
    let _ = work_dir();
    let both = |cmd: &mut Command| {
        common::fi_pingpong_all(cmd);
        cmd.args(args)
            .env("FI_PROVIDER_PATH", work_dir())
            .env_remove("FI_PROVIDER")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
    };
    let mut s = a.command("env");
    both(&mut s);
    s.envs(server_env.iter().copied());
    let server = spawn_collected(&mut s);
    // Give the server time to listen on its control port.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut c = b.command("env");
    both(&mut c);
    c.envs(client_env.iter().copied());
    // `-6`: fi_pingpong over IPv6 (its control connection too).
    if args.contains(&"-6") {
        c.arg(a.ipv6().to_string());
    } else {
        c.arg(a.ipv4().to_string());
    }
    let client = c.output().unwrap();
    let server = server.join().unwrap();
    if !server.status.success() {
        eprintln!("client: {}", failure_digest(&client.stderr));
    }
    assert_passed(&format!("fi_pingpong server {args:?}"), &server);
    assert_passed(&format!("fi_pingpong client {args:?}"), &client);
    let table = String::from_utf8_lossy(&client.stdout);
    let sizes = if args.contains(&"-S") { 1 } else { 2 };
    assert!(table.lines().count() > sizes, "no results:\n{table}");
    (server, client)
}

/// Every size through jumbo (multi-buffer) datagrams.
#[test]
fn pingpong_rdm_tagged_jumbo_frames() {
    pingpong_on(9000, &["-e", "rdm", "-m", "tagged"]);
}

#[test]
fn pingpong_rdm_msg() {
    pingpong(&["-e", "rdm", "-m", "msg"]);
}

#[test]
fn pingpong_rdm_tagged() {
    pingpong(&["-e", "rdm", "-m", "tagged"]);
}

#[test]
fn pingpong_dgram() {
    pingpong(&["-e", "dgram"]);
}

/// Two hosts in different subnets joined by a router (`Routed`): the
/// client's getinfo finds the interface its route to the server leaves by,
/// and every datagram goes through AF_XDP to the router's MAC — each
/// side's AF_XDP socket received no more than the other's sent (a datagram
/// sent through the kernel socket would arrive there too), and none came
/// through the kernel socket.
fn pingpong_routed(args: &[&str]) {
    let net = Routed::new(2, 1500).expect("routed test hosts");
    pingpong_through_routers(&net.hosts[0], &net.hosts[1], args);
}

/// fi_pingpong between `a` and `b`, hosts of a routed topology, every
/// datagram through AF_XDP (see [`pingpong_routed`]).
fn pingpong_through_routers(a: &Host, b: &Host, args: &[&str]) {
    pingpong_through_routers_with(a, b, args, &[]);
}

/// [`pingpong_through_routers`] with `env` for both sides.
fn pingpong_through_routers_with(a: &Host, b: &Host, args: &[&str], env: &[(&str, &str)]) {
    let mut env = env.to_vec();
    env.push(("FI_LOG_LEVEL", "info"));
    let (server, client) = pingpong_outputs(a, b, args, &env, &env);
    assert_no_peer_lost("fi_pingpong", &[&client, &server]);
    let counts = |o: &Output| {
        let log = String::from_utf8_lossy(&o.stderr);
        let xsk = xsk_counts(&log);
        assert!(!xsk.is_empty(), "no AF_XDP closing line:\n{log}");
        for (af_xdp, from_other_hosts) in remote_paths(&log) {
            assert!(
                af_xdp && from_other_hosts == 0,
                "kernel socket used:\n{log}"
            );
        }
        xsk.iter().fold((0, 0), |(r, t), (rx, tx)| (r + rx, t + tx))
    };
    let (s_rx, s_tx) = counts(&server);
    let (c_rx, c_tx) = counts(&client);
    println!("AF_XDP datagrams: server {s_rx} in, {s_tx} out; client {c_rx} in, {c_tx} out");
    assert!(s_rx > 0 && c_rx > 0, "both sides received through AF_XDP");
    assert!(
        s_rx <= c_tx && c_rx <= s_tx,
        "every datagram was sent through AF_XDP"
    );
}

#[test]
fn routed_pingpong_rdm_tagged() {
    pingpong_routed(&["-e", "rdm", "-m", "tagged"]);
}

#[test]
fn routed_pingpong_rdm_msg() {
    pingpong_routed(&["-e", "rdm", "-m", "msg"]);
}

/// The same across a leaf–spine fabric (`LeafSpine`: leaf, spine, leaf;
/// the leaves' routes have both spines as next hops).
#[test]
fn leaf_spine_pingpong_rdm_tagged() {
    let net = LeafSpine::new(1, 1500).expect("leaf-spine test hosts");
    pingpong_through_routers(&net.hosts[0], &net.hosts[1], &["-e", "rdm", "-m", "tagged"]);
}

/// Packets leaf `l` of `net` sent on its link to each spine: what its
/// hosts sent across the fabric, by the spine their flow hashed to.
fn leaf_uplinks_tx(net: &LeafSpine, l: usize) -> [u64; 2] {
    let tx = net.uplink_tx_packets(l).expect("leaf uplink counters");
    [tx[0], tx[1]]
}

/// Path entropy (FI_XDP_PATHS=4, PROTOCOL.md §4.6) across the leaf–spine
/// fabric: each session's datagrams leave from four source ports, which the
/// leaves' ECMP hash spreads over both spines, and the receivers find the
/// session by its ids. fi_pingpong of 64 B messages (its TCP control
/// connection then carries a few dozen packets against thousands of
/// datagrams), every datagram through AF_XDP. A flow with one source port
/// takes one spine per direction; here at least one direction must put a
/// twentieth of its packets on each spine (four ports of one session all
/// hash to one spine with probability 1/8 per direction, so up to three
/// runs, each with new session ids).
#[test]
fn leaf_spine_pingpong_rdm_tagged_paths() {
    let net = LeafSpine::new(1, 1500).expect("leaf-spine test hosts");
    let mut spread = false;
    for _ in 0..3 {
        let before = [leaf_uplinks_tx(&net, 0), leaf_uplinks_tx(&net, 1)];
        pingpong_through_routers_with(
            &net.hosts[0],
            &net.hosts[1],
            &["-e", "rdm", "-m", "tagged", "-S", "64", "-I", "4000"],
            &[("FI_XDP_PATHS", "4")],
        );
        let after = [leaf_uplinks_tx(&net, 0), leaf_uplinks_tx(&net, 1)];
        let sent: Vec<[u64; 2]> = (0..2)
            .map(|l| [0, 1].map(|s| after[l][s] - before[l][s]))
            .collect();
        println!(
            "packets per spine, from leaf 0: {:?}, from leaf 1: {:?}",
            sent[0], sent[1]
        );
        spread = sent
            .iter()
            .any(|d| d[0] + d[1] >= 4000 && d.iter().all(|&n| n * 20 >= d[0] + d[1]));
        if spread {
            break;
        }
    }
    assert!(spread, "no direction used both spines");
}

/// The same with the data checks of `tests/c/data.c` (FI_SOURCE, directed
/// receives, multi-recv, rendezvous, RDM over several endpoints).
#[test]
fn leaf_spine_data_rdm_paths() {
    let net = LeafSpine::new(1, 1500).expect("leaf-spine test hosts");
    let paths = [("FI_XDP_PATHS", "4")];
    data_between(&net.hosts[0], &net.hosts[1], "rdm", &paths, &[], &[]);
}

#[test]
fn routed_pingpong_rdm_tagged_ipv6() {
    pingpong_routed(&["-e", "rdm", "-m", "tagged", "-6"]);
}

/// FI_EP_MSG: the connection's requests and its data across the router.
#[test]
fn routed_pingpong_msg_ep() {
    pingpong_routed(&["-e", "msg"]);
}

#[test]
fn routed_pingpong_dgram() {
    pingpong_routed(&["-e", "dgram"]);
}

/// A route that changes while fi_pingpong runs is followed: once a
/// fifteenth of the run's round trips' worth of the client's datagrams went
/// through the router, its default route moves to another address of the
/// router (the same MAC, a new next hop), and the next periodic re-check
/// (about a second) logs the new next hop; the datagrams take the kernel
/// socket until the kernel has resolved it, then AF_XDP again. Nothing is
/// lost.
///
/// The run should last about six seconds wherever it runs: its round trips
/// are counted from the speed of a short run first (the VM suite's emulated
/// CPU is hundreds of times slower than the host: a count that fits the
/// host runs past fi_pingpong's 120 s there). A machine whose load lifts
/// between the two runs can still end the run before the re-check: then the
/// route moves back in a run twice as long, up to three runs.
#[test]
fn routed_pingpong_follows_a_new_gateway() {
    let net = Routed::new(2, 1500).expect("routed test hosts");
    let b = &net.hosts[1];
    let Some(std::net::IpAddr::V4(gw)) = net.gateway_of(1, false) else {
        panic!("no gateway")
    };
    let new_gw = std::net::Ipv4Addr::from(u32::from(gw) - 1);
    let router_port = net.router_ifname(1).unwrap();
    ofi_xdp_testhosts::ip(&[
        "-n",
        net.router_netns(),
        "addr",
        "add",
        &format!("{new_gw}/26"),
        "dev",
        &router_port,
    ])
    .unwrap();
    let forwarded = || {
        let out = std::process::Command::new("ip")
            .args(["netns", "exec", net.router_netns(), "cat"])
            .arg(format!(
                "/sys/class/net/{router_port}/statistics/rx_packets"
            ))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse::<u64>()
            .unwrap_or(0)
    };
    // Every run between these two hosts on its own control port: the one
    // before may still hold its address (TIME_WAIT). Not the range of
    // `common::fi_pingpong_all`, which the other tests of this process use.
    let mut runs = 0;
    let mut ports = || {
        runs += 1;
        let p = (40000 + std::process::id() % 10000 + runs).to_string();
        ["-B".to_owned(), p.clone(), "-P".to_owned(), p]
    };
    let env = [("FI_LOG_LEVEL", "info")];
    for (attempt, (from, to)) in [(gw, new_gw), (new_gw, gw), (gw, new_gw)]
        .into_iter()
        .enumerate()
    {
        let usec = pingpong_usec_per_xfer(&net.hosts[0], b, &ports());
        // Two transfers a round trip: about six seconds, longer each time.
        let iters = (((3e6 / usec) as u64) << attempt).clamp(3_000, 300_000);
        let trigger = iters / 15;
        let iters_s = iters.to_string();
        println!(
            "{usec:.1} µs a transfer: {iters} round trips, the route moves to {to} after \
             {trigger} datagrams"
        );
        let ports = ports();
        let mut args = vec!["-e", "rdm", "-m", "tagged", "-S", "64", "-I", &iters_s];
        args.extend(ports.iter().map(String::as_str));
        let started = std::time::Instant::now();
        let (server, client) = std::thread::scope(|s| {
            s.spawn(|| {
                // Once the client's datagrams flow (its next hop resolved).
                let (t0, before) = (std::time::Instant::now(), forwarded());
                while forwarded().saturating_sub(before) < trigger && t0.elapsed().as_secs() < 60 {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                b.ip(&["route", "replace", "default", "via", &to.to_string()])
                    .unwrap();
            });
            pingpong_outputs(&net.hosts[0], b, &args, &env, &env)
        });
        println!("ran {:?}", started.elapsed());
        let log = String::from_utf8_lossy(&client.stderr);
        for l in log
            .lines()
            .filter(|l| l.contains("next hop") || l.contains(" closed: "))
        {
            println!("{l}");
        }
        assert_no_peer_lost("fi_pingpong", &[&client, &server]);
        let (new, old) = (format!("next hop {to} "), format!("(was {from} "));
        if !log.lines().any(|l| l.contains(&new) && l.contains(&old)) {
            println!("the run ended before the next hop was checked again");
            continue;
        }
        // A few datagrams took the kernel socket while the kernel resolved
        // the new next hop; the rest AF_XDP.
        let sent = log
            .lines()
            .find_map(|l| {
                let at = l.find("tx_datagrams: ")? + "tx_datagrams: ".len();
                l[at..].split(',').next()?.parse::<u64>().ok()
            })
            .expect("engine stats");
        let through_xsk: u64 = xsk_counts(&log).iter().map(|(_, tx)| tx).sum();
        assert!(
            through_xsk < sent && sent - through_xsk <= 1000,
            "{sent} sent, {through_xsk} through AF_XDP"
        );
        return;
    }
    panic!("three runs ended before the new next hop was logged");
}

/// Microseconds one 64 B tagged transfer (half a round trip) takes between
/// `b` and `a`: the `usec/xfer` column of a short fi_pingpong run on the
/// control port `ports` (`-B`, `-P`).
fn pingpong_usec_per_xfer(a: &Host, b: &Host, ports: &[String]) -> f64 {
    let mut args = vec!["-e", "rdm", "-m", "tagged", "-S", "64", "-I", "500"];
    args.extend(ports.iter().map(String::as_str));
    let (_, client) = pingpong_outputs(a, b, &args, &[], &[]);
    let table = String::from_utf8_lossy(&client.stdout);
    let mut lines = table.lines().skip_while(|l| !l.contains("usec/xfer"));
    let header = lines.next().expect("fi_pingpong's table");
    let column = header
        .split_whitespace()
        .position(|c| c == "usec/xfer")
        .unwrap();
    lines
        .next()
        .and_then(|row| row.split_whitespace().nth(column)?.parse::<f64>().ok())
        .filter(|u| *u > 0.0)
        .unwrap_or_else(|| panic!("no usec/xfer in:\n{table}"))
}

/// `fi_info -n <host in another subnet>` lists our interface when the
/// kernel routes there through it; without a route it is -FI_ENODATA
/// (-61), as before.
#[test]
fn routed_fi_info_answers_for_another_subnet() {
    let net = Routed::new(2, 1500).expect("routed test hosts");
    let (a, b) = (&net.hosts[0], &net.hosts[1]);
    let fi_info = |h: &Host, node: String| {
        h.command("fi_info")
            .args(["-p", "xdp", "-t", "FI_EP_RDM", "-n", &node])
            .env("FI_PROVIDER_PATH", work_dir())
            .env_remove("FI_PROVIDER")
            .output()
            .unwrap()
    };
    for node in [b.ipv4().to_string(), b.ipv6().to_string()] {
        let out = fi_info(a, node.clone());
        assert_passed(&format!("fi_info -n {node}"), &out);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(a.ifname()), "{node}: {text}");
    }
    let pair = HostPair::new().expect("test hosts");
    wait_running(&pair);
    let out = fi_info(&pair.a, "198.51.100.7".into());
    assert!(!out.status.success(), "no route, no entry");
    let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("-61"), "{text}");
}

/// The real-path impairment element: the hosts joined through a forwarder
/// dropping 5 %, duplicating 2 %, corrupting 1 %, reordering 25 % and
/// delaying 1 ms (`Impairment::harsh`), with the job key or without. The
/// engine must lose no session: every run passes, and no side logs a lost
/// peer. By default fi_pingpong runs 2 iterations per size (at 5 % loss a
/// window stays a few packets, so the megabyte sizes take seconds each);
/// `IMPAIRED_ITERS=10` runs fi_pingpong's own count.
fn impaired(mtu: u32) -> ImpairedPair {
    let seed = u64::from(std::process::id());
    ImpairedPair::new(mtu, Impairment::harsh(seed)).expect("impaired test hosts")
}

fn impaired_iters() -> String {
    std::env::var("IMPAIRED_ITERS").unwrap_or_else(|_| "2".into())
}

/// No side logged a lost session. A peer that closed (its CLOSE notice,
/// PROTOCOL.md §4.5, logged at info as `lost: PeerClosed`, e.g. at the end
/// of an FI_EP_MSG connection) lost nothing.
fn assert_no_peer_lost(what: &str, outs: &[&Output]) {
    for o in outs {
        let log = String::from_utf8_lossy(&o.stderr);
        assert!(
            !log.lines()
                .any(|l| l.contains(" lost: ") && !l.contains(" lost: PeerClosed")),
            "{what}: a session was lost\n{log}"
        );
    }
}

#[test]
fn impaired_pingpong_rdm_msg() {
    let pair = impaired(9000);
    let iters = impaired_iters();
    let args = ["-e", "rdm", "-m", "msg", "-I", &iters];
    pingpong_between(&pair.a, &pair.b, &args, &[("FI_LOG_LEVEL", "warn")]);
    println!("forwarder: {:?}", pair.counts());
}

#[test]
fn impaired_pingpong_rdm_tagged_authenticated() {
    let pair = impaired(9000);
    let iters = impaired_iters();
    let args = ["-e", "rdm", "-m", "tagged", "-I", &iters];
    let env = [("FI_LOG_LEVEL", "warn"), ("FI_XDP_AUTH_KEY", AUTH_KEY)];
    pingpong_between(&pair.a, &pair.b, &args, &env);
    println!("forwarder: {:?}", pair.counts());
}

#[test]
fn impaired_data_rdm() {
    let pair = impaired(1500);
    let (c, s) = data_between(&pair.a, &pair.b, "rdm", &[], &[], &[]);
    assert_no_peer_lost("data rdm", &[&c, &s]);
    println!("forwarder: {:?}", pair.counts());
}

#[test]
fn impaired_data_rdm_authenticated() {
    let pair = impaired(9000);
    let env = [("FI_XDP_AUTH_KEY", AUTH_KEY)];
    let (c, s) = data_between(&pair.a, &pair.b, "rdm", &env, &[], &[]);
    assert_no_peer_lost("data rdm with a key", &[&c, &s]);
    println!("forwarder: {:?}", pair.counts());
}

/// A job key (hex) for the authenticated runs.
const AUTH_KEY: &str = "f00dfeedcafebeef0123456789abcdef";
// Several receive queues: veth ends with four queues each and native XDP,
// where a frame arrives on the queue numbered as the one its sender's
// socket transmitted from. Endpoints bound to different queues then receive
// each other's frames on a queue that is not their socket's: the steering
// program passes those to the kernel, and the endpoint's kernel UDP socket
// takes them. veth has no ntuple rules, so each endpoint says so at info.

/// What one closing line (`… port P closed: …`) says about a port's paths.
#[derive(Debug)]
struct PathLine {
    af_xdp: u64,
    queue: u32,
    from_other_hosts: u64,
}

fn path_lines(log: &str) -> Vec<PathLine> {
    let number_after = |line: &str, key: &str| -> Option<u64> {
        let at = line.find(key)? + key.len();
        line[at..]
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    log.lines()
        .filter(|l| l.contains(" closed: ") && l.contains("through AF_XDP"))
        .filter_map(|l| {
            let rx = l.split(" closed: ").nth(1)?;
            Some(PathLine {
                af_xdp: rx.split(' ').next()?.parse().ok()?,
                queue: u32::try_from(number_after(l, "(queue ")?).ok()?,
                from_other_hosts: {
                    let at = l.find(" from other hosts")?;
                    l[..at].rsplit(", ").next()?.trim().parse().ok()?
                },
            })
        })
        .collect()
}

/// Runs `run` on a four-queue pair with native XDP and info logs, then
/// checks what both sides logged and that neither veth end dropped a frame.
fn on_four_queues(
    server_queue: Option<&str>,
    client_queue: Option<&str>,
    run: impl FnOnce(&HostPair, &[(&str, &str)], &[(&str, &str)]) -> (Output, Output),
) -> (Vec<PathLine>, Vec<PathLine>) {
    let pair = HostPair::with_queues(1500, 4).expect("test hosts");
    let base = [("FI_XDP_ATTACH_MODE", "native"), ("FI_LOG_LEVEL", "info")];
    fn with_queue<'a>(base: &[(&'a str, &'a str)], q: Option<&'a str>) -> Vec<(&'a str, &'a str)> {
        let mut env = base.to_vec();
        if let Some(q) = q {
            env.push(("FI_XDP_QUEUE", q));
        }
        env
    }
    let (server, client) = run(
        &pair,
        &with_queue(&base, server_queue),
        &with_queue(&base, client_queue),
    );
    let (slog, clog) = (
        String::from_utf8_lossy(&server.stderr).into_owned(),
        String::from_utf8_lossy(&client.stderr).into_owned(),
    );
    for log in [&slog, &clog] {
        assert!(
            log.contains("no ntuple rule") && log.contains("through the kernel UDP socket"),
            "veth takes no ntuple rule, and the log must say so:\n{log}"
        );
    }
    // Printed, not asserted: a veth queue drops frames when its receiver
    // falls behind on a loaded machine (seen with 40 tests beside this
    // one). What must hold is that the data arrived whole and in its
    // queue's socket, which the callers' checks say.
    for h in [&pair.a, &pair.b] {
        let stats = h.queue_stats().unwrap();
        println!("{}: per-queue {stats:?}", h.ifname());
    }
    let (s, c) = (path_lines(&slog), path_lines(&clog));
    println!("server paths {s:?}\nclient paths {c:?}");
    assert!(
        !s.is_empty() && !c.is_empty(),
        "no path lines:\n{slog}\n{clog}"
    );
    (s, c)
}

fn data_on_four_queues(
    ep: &str,
    server_queue: &str,
    client_queue: &str,
) -> (Vec<PathLine>, Vec<PathLine>) {
    on_four_queues(Some(server_queue), Some(client_queue), |pair, s, c| {
        wait_running(pair);
        let (client, server) = data_between(&pair.a, &pair.b, ep, &[], s, c);
        (server, client)
    })
}

/// Both sockets on queue 2: every frame arrives where its socket is.
#[test]
fn c_data_rdm_four_queues_same_queue() {
    let (server, client) = data_on_four_queues("rdm", "2", "2");
    for p in server.iter().chain(&client) {
        assert_eq!(p.queue, 2, "{p:?}");
        assert_eq!(p.from_other_hosts, 0, "{p:?}");
    }
    assert!(server.iter().chain(&client).any(|p| p.af_xdp > 0));
}

/// Server on queue 1, client on queue 3: the client's frames arrive on the
/// server's queue 3 and go through its kernel socket; the replies, sent
/// from queue 1 (or by the kernel until the server has the client's MAC),
/// arrive anywhere but queue 3 at the client, so they mostly take its
/// kernel socket too. Nothing is lost: the data test's checks pass.
#[test]
fn c_data_rdm_four_queues_crossed() {
    let (server, client) = data_on_four_queues("rdm", "1", "3");
    assert!(
        server.iter().all(|p| p.queue == 1 && p.af_xdp == 0),
        "{server:?}"
    );
    assert!(server.iter().any(|p| p.from_other_hosts > 0), "{server:?}");
    assert!(client.iter().any(|p| p.from_other_hosts > 0), "{client:?}");
}

/// DGRAM has no retransmission: a lost datagram fails the data test.
#[test]
fn c_data_dgram_four_queues_crossed() {
    let (server, _) = data_on_four_queues("dgram", "0", "3");
    assert!(server.iter().any(|p| p.from_other_hosts > 0), "{server:?}");
}

/// fi_pingpong, every size, the server on the first free queue (0), the
/// client on queue 2.
#[test]
fn pingpong_rdm_tagged_four_queues() {
    let (server, client) = on_four_queues(None, Some("2"), |pair, s, c| {
        wait_running(pair);
        pingpong_outputs(&pair.a, &pair.b, &["-e", "rdm", "-m", "tagged"], s, c)
    });
    assert!(server.iter().all(|p| p.queue == 0), "{server:?}");
    assert!(server.iter().any(|p| p.from_other_hosts > 0), "{server:?}");
    assert!(client.iter().all(|p| p.queue == 2), "{client:?}");
}
