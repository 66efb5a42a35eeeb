//! Shared by the integration tests that run programs through the real
//! libfabric loader (`c_suite.rs`, `mpi.rs`, `shared_queue.rs`, `trixie.rs`,
//! …).

#![allow(dead_code)] // each test binary uses its own subset

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};

use ofi_xdp_testhosts::HostPair;

/// target/<profile>/ (this binary lives in target/<profile>/deps/).
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

/// A private directory holding the provider as `libxdp-fi.so` (point
/// FI_PROVIDER_PATH at it) and the programs the tests compile.
pub fn work_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("xdp-fi-ctests-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // `cargo test` refreshes deps/libxdp_fi.so but does not always
        // re-uplift it to target/<profile>/: take the newer of the two.
        let newest = [
            profile_dir().join("deps/libxdp_fi.so"),
            profile_dir().join("libxdp_fi.so"),
        ]
        .into_iter()
        .filter_map(|p| {
            std::fs::metadata(&p)
                .and_then(|m| m.modified())
                .ok()
                .map(|t| (t, p))
        })
        .max_by_key(|(t, _)| *t);
        let (_, lib) = newest.expect("cdylib libxdp_fi.so not found next to the test binary");
        std::fs::copy(&lib, dir.join("libxdp-fi.so")).unwrap();
        dir
    })
}

/// A veth end reports carrier (IFF_RUNNING) a moment after both ends are
/// up; the provider only offers running interfaces, so wait for it.
pub fn wait_running(pair: &HostPair) {
    for h in [&pair.a, &pair.b] {
        let t0 = std::time::Instant::now();
        loop {
            let out = h
                .ip(&["-o", "link", "show", "dev", h.ifname()])
                .unwrap_or_default();
            if out.contains("LOWER_UP") && out.contains("state UP") {
                break;
            }
            assert!(
                t0.elapsed().as_secs() < 10,
                "{} never came up: {out}",
                h.ifname()
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

/// `XDP_LIBFABRIC_PREFIX`: the install prefix of a libfabric built from
/// its sources (e.g. release 2.6) that [`compile`] builds the C programs
/// against, instead of Debian's in /usr.
fn libfabric_prefix() -> Option<PathBuf> {
    std::env::var_os("XDP_LIBFABRIC_PREFIX")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
}

/// Build `tests/c/<name>.c` once per test process. Tests run in parallel
/// and several use the same program: compiling it anew in each would
/// rewrite the file while another test executes it.
pub fn compile(name: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let mut built = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(bin) = built.get(name) {
        return bin.clone();
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(format!("{name}.c"));
    let bin = work_dir().join(name);
    let mut cc = Command::new("cc");
    cc.args(["-Wall", "-Wno-unused-function", "-g", "-O1", "-o"])
        .arg(&bin)
        .arg(&src);
    if let Some(prefix) = libfabric_prefix() {
        // Its headers and library (found at run time through the rpath),
        // asking for its own API version; 2.x marks what it deprecated
        // (`#pragma GCC warning`, attributes).
        let lib = prefix.join("lib");
        cc.arg(format!("-I{}", prefix.join("include").display()))
            .arg(format!("-L{}", lib.display()))
            .arg(format!("-Wl,-rpath,{}", lib.display()))
            .args(["-Wno-cpp", "-Wno-deprecated-declarations"])
            .arg("-DXT_VERSION=FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION)");
    }
    let out = cc.args(["-lfabric", "-lpthread"]).output().expect("run cc");
    assert!(
        out.status.success(),
        "cc {name}.c failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    built.insert(name.to_owned(), bin.clone());
    bin
}

/// From a port's closing line: (datagrams from this host through the
/// kernel socket, datagrams through shared memory).
pub fn local_paths(log: &str) -> Vec<(u64, u64)> {
    closing_lines(log)
        .filter_map(|l| {
            Some((
                number_before(l, " from this host,")?,
                number_before(l, " through shared memory")?,
            ))
        })
        .collect()
}

/// From each port's closing line: whether it had AF_XDP, and how many
/// datagrams from other hosts came through its kernel socket.
pub fn remote_paths(log: &str) -> Vec<(bool, u64)> {
    closing_lines(log)
        .filter_map(|l| {
            Some((
                l.contains(" sent through AF_XDP"),
                number_before(l, " from other hosts")?,
            ))
        })
        .collect()
}

/// From each AF_XDP port's closing line: datagrams received and sent
/// through its AF_XDP socket.
pub fn xsk_counts(log: &str) -> Vec<(u64, u64)> {
    closing_lines(log)
        .filter_map(|l| {
            Some((
                number_before(l, " datagrams received and")?,
                number_before(l, " sent through AF_XDP")?,
            ))
        })
        .collect()
}

/// From the RDM endpoint's closing line (at info level): messages it
/// pulled from a local sender's memory, and pulls that fell back to the
/// rings (PROTOCOL.md §6.7).
pub fn cma_counts(log: &str) -> Option<(u64, u64)> {
    let line = log.lines().find(|l| l.contains("rdm endpoint closed:"))?;
    Some((
        number_after(line, " pulls: ")?,
        number_after(line, " pull_fallbacks: ")?,
    ))
}

/// From the RDM endpoint's closing line (at info level): chunks of the
/// messages it pulled that their senders copied for it (a shared pull,
/// `xdp/port/local/help.rs`).
pub fn chunks_copied_by_senders(log: &str) -> Option<u64> {
    log.lines()
        .find_map(|l| number_after(l, "chunks of our pulls copied by their senders "))
}

/// From the RDM endpoint's closing line (at info level): the direct
/// messages it sent and received (PROTOCOL.md §6.9), summed over its
/// endpoints; `None` where none took part (direct messages off).
pub fn direct_messages(log: &str) -> Option<(u64, u64)> {
    log.lines()
        .filter_map(|l| {
            let sent = number_after(l, "direct messages sent ")?;
            Some((sent, number_after(l, ", received ")?))
        })
        .reduce(|a, b| (a.0 + b.0, a.1 + b.1))
}

/// The number just after the first `key` in `line`.
fn number_after(line: &str, key: &str) -> Option<u64> {
    let rest = &line[line.find(key)? + key.len()..];
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// The ports' closing lines in a log (at info level).
fn closing_lines(log: &str) -> impl Iterator<Item = &str> {
    log.lines().filter(|l| l.contains(" closed: "))
}

/// The number just before the first `key` in `line`.
fn number_before(line: &str, key: &str) -> Option<u64> {
    let at = line.find(key)?;
    line[..at]
        .trim_end()
        .rsplit(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// Removes what endpoints of `host`'s namespace left in /dev/shm when their
/// processes ended without closing them (killed, or `_exit`): their
/// shared-memory areas and the namespace's AF_XDP group files. Call it once
/// they are all gone; the namespace itself goes with the test, and with it
/// the only endpoints that would have tidied these up.
pub fn remove_shm_leftovers(host: &ofi_xdp_testhosts::Host) {
    let Some(netns) = host.run(ofi_xdp_epstats::netns_inode) else {
        return;
    };
    let Ok(dir) = std::fs::read_dir("/dev/shm") else {
        return;
    };
    let ours = [
        format!("ofi-xdp-local-{netns}-"),
        format!("ofi-xdp-umem-{netns}-"),
    ];
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if ours.iter().any(|p| name.starts_with(p.as_str())) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Holds an exclusive lock on `$TMPDIR/ofi-xdp-<what>-tests.lock` until the
/// returned file closes, whichever process the test runs in (cargo test
/// runs one file's tests as threads, nextest as processes): for tests that
/// each load the machine so much that two at once would measure the
/// scheduler, not the provider.
pub fn one_at_a_time(what: &str) -> std::fs::File {
    use std::os::fd::AsRawFd;
    let path = std::env::temp_dir().join(format!("ofi-xdp-{what}-tests.lock"));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap();
    // SAFETY: a valid fd we own; flock blocks until the lock is ours.
    assert_eq!(unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) }, 0);
    file
}

/// A C program's stderr for a failure message: its own lines (failed
/// CHECKs and REQUIREs first, so a report cut after its first lines still
/// shows them), then our provider's log lines; libfabric's core and other
/// providers' lines and the parameter listing (hundreds at
/// FI_LOG_LEVEL=info) are left out.
pub fn failure_digest(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let ours = |l: &&str| {
        !l.starts_with("libfabric:") || (l.contains(":xdp:") && !l.contains("fi_param_get"))
    };
    let failed: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("CHECK failed") || l.contains("REQUIRE failed"))
        .collect();
    let rest: Vec<&str> = text.lines().filter(ours).collect();
    format!(
        "failed checks:\n{}\nlog (libfabric core, other providers and parameters left out):\n{}",
        failed.join("\n"),
        rest.join("\n")
    )
}

/// Open MPI's point-to-point through the `cm` PML and the `ofi` MTL on xdp
/// (Open MPI 4.1 on this host, 5.0 in the Debian 13 root).
pub const TWO_SIDED: &[&str] = &[
    "--mca",
    "pml",
    "cm",
    "--mca",
    "mtl",
    "ofi",
    "--mca",
    "mtl_ofi_provider_include",
    "xdp",
    "--mca",
    "btl",
    "self",
];

/// Adds to `cmd` (an `env` command, so that `timeout` and `fi_pingpong` are
/// found on the userland's PATH) what both sides of a `fi_pingpong -c -S
/// all` run over xdp share: five iterations a size, 120 s at most, one
/// control and data port per test process. The caller adds the endpoint
/// and message type and, for the client, the server's address.
pub fn fi_pingpong_all(cmd: &mut Command) {
    let port = (20000 + std::process::id() % 20000).to_string();
    cmd.args([
        "timeout",
        "120",
        "fi_pingpong",
        "-p",
        "xdp",
        "-c",
        "-S",
        "all",
        "-I",
        "5",
        "-B",
        &port,
        "-P",
        &port,
    ]);
}

/// Fails the test unless `out`, the run of `name`, exited successfully: its
/// stdout, and its log with the lines of the libfabric core and the other
/// providers left out ([`failure_digest`]).
pub fn assert_passed(name: &str, out: &Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "{name} failed ({}):\n{}\nstdout:\n{stdout}",
        out.status,
        failure_digest(&out.stderr)
    );
}

/// Spawns `cmd` and reads its stdout and stderr while it runs, in a
/// thread: a pipe nobody drains until the end fills (64 KiB), and the
/// child, with the provider's progress helper in it, blocks in write(2)
/// holding the endpoint's lock, silent to its peer.
pub fn spawn_collected(
    cmd: &mut std::process::Command,
) -> std::thread::JoinHandle<std::process::Output> {
    let child = cmd.spawn().unwrap();
    std::thread::spawn(move || child.wait_with_output().unwrap())
}
