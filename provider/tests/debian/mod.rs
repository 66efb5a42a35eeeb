//! Debian 13 (trixie) for the tests that check the provider against
//! libfabric 2.x: its packages unpacked with `dpkg-deb -x` (the 2.1
//! headers of libfabric-dev, for `layout.rs`), and a root file system made
//! with `mmdebstrap` (for `trixie.rs`). Both read trixie through a private
//! apt state under `target/trixie/` (`apt-get -o Dir::…`), so the host's
//! apt configuration is never touched, and both are cached there, keyed by
//! their package list. Without network access on a first run they fail
//! with the command that failed: a check that cannot run is not a pass.

#![allow(dead_code)] // each test binary uses its own subset

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

pub const SUITE: &str = "trixie";
const ARCHIVE: &str = "http://deb.debian.org/debian";
const KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";
/// Written last into a complete cache entry, so an interrupted one is redone.
const DONE: &str = ".complete";
/// Network operations are tried this often before the test fails.
const ATTEMPTS: u32 = 3;

/// One download or unpack at a time within a test binary (apt locks its
/// state; cargo runs test binaries one after another).
static LOCK: Mutex<()> = Mutex::new(());

/// `target/trixie`, shared by every profile and test binary.
pub fn cache_dir() -> PathBuf {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent().unwrap_or(tmp).join(SUITE)
}

/// `name` with a cache key: the sorted package list, so a changed list
/// makes a new entry.
fn keyed(name: &str, packages: &[&str]) -> PathBuf {
    let mut sorted = packages.to_vec();
    sorted.sort_unstable();
    cache_dir().join(format!("{name}-{SUITE}-{}", sorted.join("+")))
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd:?} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn retried(what: &str, mut f: impl FnMut() -> Result<(), String>) {
    let mut last = String::new();
    for attempt in 1..=ATTEMPTS {
        match f() {
            Ok(()) => return,
            Err(e) => {
                eprintln!("{what}: attempt {attempt} of {ATTEMPTS} failed: {e}");
                last = e;
                std::thread::sleep(std::time::Duration::from_secs(2 * u64::from(attempt)));
            }
        }
    }
    panic!(
        "{what} failed {ATTEMPTS} times; Debian's archive ({ARCHIVE}) must be reachable \
         the first time (the result is cached under {}):\n{last}",
        cache_dir().display()
    );
}

/// `apt-get` reading only trixie's main, with its state under the cache.
fn apt_get() -> Command {
    let state = cache_dir().join(format!("apt-{SUITE}"));
    let lists = state.join("lists");
    let archives = state.join("archives");
    for d in [lists.join("partial"), archives.join("partial")] {
        fs::create_dir_all(&d).unwrap();
    }
    let sources = state.join("sources.list");
    fs::write(
        &sources,
        format!("deb [signed-by={KEYRING}] {ARCHIVE} {SUITE} main\n"),
    )
    .unwrap();
    let opt = |k: &str, v: &Path| format!("{k}={}", v.display());
    let mut cmd = Command::new("apt-get");
    cmd.args(["-q", "-o"])
        .arg(opt("Dir::Etc::SourceList", &sources))
        .args(["-o", "Dir::Etc::SourceParts=/nonexistent", "-o"])
        .arg(opt("Dir::State::Lists", &lists))
        .arg("-o")
        .arg(opt("Dir::Cache", &state))
        .arg("-o")
        .arg(opt("Dir::Cache::Archives", &archives));
    cmd
}

/// Trixie's `packages`, unpacked into one directory (nothing installed):
/// e.g. `usr/include/rdma` of libfabric-dev.
pub fn unpacked(packages: &[&str]) -> PathBuf {
    let dir = keyed("unpacked", packages);
    if dir.join(DONE).exists() {
        return dir;
    }
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if dir.join(DONE).exists() {
        return dir;
    }
    let debs = cache_dir().join("debs");
    let _ = fs::remove_dir_all(&debs);
    fs::create_dir_all(&debs).unwrap();
    retried(&format!("apt-get update ({SUITE})"), || {
        run(apt_get().arg("update"))
    });
    retried(&format!("apt-get download {}", packages.join(" ")), || {
        run(apt_get().arg("download").args(packages).current_dir(&debs))
    });
    let _ = fs::remove_dir_all(&dir);
    for deb in fs::read_dir(&debs).unwrap() {
        let deb = deb.unwrap().path();
        run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&dir)).unwrap();
    }
    fs::remove_dir_all(&debs).unwrap();
    fs::write(dir.join(DONE), packages.join("\n")).unwrap();
    dir
}

/// A trixie root file system with `packages` installed (Debian's essential
/// set and their dependencies: `mmdebstrap --variant=essential`).
pub fn root(packages: &[&str]) -> PathBuf {
    let dir = keyed("root", packages);
    if dir.join(DONE).exists() {
        return dir;
    }
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if dir.join(DONE).exists() {
        return dir;
    }
    let t0 = std::time::Instant::now();
    eprintln!("making a {SUITE} root in {} (mmdebstrap)", dir.display());
    retried(&format!("mmdebstrap {SUITE}"), || {
        let _ = fs::remove_dir_all(&dir);
        run(Command::new("mmdebstrap")
            .args(["--quiet", "--variant=essential", "--mode=root"])
            .arg(format!("--include={}", packages.join(",")))
            .arg(SUITE)
            .arg(&dir)
            .arg(ARCHIVE))
    });
    eprintln!("{SUITE} root made in {:.0} s", t0.elapsed().as_secs_f64());
    fs::write(dir.join(DONE), packages.join("\n")).unwrap();
    dir
}
