//! `cargo xtask fabtests --src DIR [--libfabric PREFIX] [--mtu N] [--one-host] [--complex [FILE]] [-- runfabtests.sh options]`:
//! libfabric's own test suite (fabtests) against the provider, between two
//! test hosts, or (`--one-host`) with server and client in one test host,
//! where RDM endpoints talk through shared memory (direct messages,
//! single-copy pulls).
//!
//! fabtests are not in Debian, so they are built from a libfabric source
//! tree the caller provides (its `fabtests/` folder), in a copy under
//! `target/fabtests/<fabtests version>/`: `autogen.sh` if the tree has no
//! `configure`, then `configure --with-libfabric=/usr` (Debian's
//! libfabric, so release 1.17 on Debian 12), `make install`. With
//! `--libfabric PREFIX` they are built against the libfabric installed
//! under PREFIX instead (a 2.x release built from its sources outside the
//! repository, e.g. `configure --prefix=PREFIX && make install`), and run
//! with that library: `PREFIX/lib` first on `LD_LIBRARY_PATH`,
//! `PREFIX/bin` first on `PATH`, the provider from `FI_PROVIDER_PATH` as
//! always. Before the tests, `fi_info -p xdp` of the library they run
//! with must list the provider in a test host (a library that does not
//! load it fails there, with the library's warnings).
//!
//! Two test hosts (network namespaces joined by veth, removed afterwards)
//! run libfabric's `runfabtests.sh`, which starts each side through
//! `ssh HOST …`: `xtask/fabtests/ssh` stands in for ssh and runs the
//! command in the namespace holding HOST's address. Without a source tree
//! the command says why it skips (CI has no network to fetch one).
//!
//! Without options after `--` it runs the `short` set (which holds
//! `fi_rma_bw -e rdm -o write|read|writedata` and `fi_rdm_atomic -o all`)
//! and `functional`, less the tests in `EXCLUDED`, and for fabtests 2.x
//! `EXCLUDED_FROM_2` (said why when it runs); anything after `--` is passed to runfabtests.sh instead (e.g.
//! `-- -t unit`, `-- -t short -e msg`).
//!
//! `--complex` runs fabtests' fi_ubertest instead, which needs a
//! configuration per provider and has none for xdp: ours is
//! `xtask/fabtests/ubertest.xdp` (or FILE). Each of its entries runs as a
//! run of its own (`runfabtests.sh -t complex -u ENTRY`), because
//! fi_ubertest keeps about 7 MB per test it has run, whatever the provider
//! (measured with `tcp` too), and a whole configuration in one process
//! would exhaust the machine's memory. A Notrun counts as a failure there:
//! it means the configuration was refused.

use std::path::{Path, PathBuf};
use std::process::Command;

use ofi_xdp_testhosts::{Host, HostPair};

use crate::steps::{self, project_root, provider_dir, target_dir};

/// Tests the default run leaves out, and why: a test's own fault, or a
/// documented difference of the provider's (fi_xdp(7)).
const EXCLUDED: &[(&str, &str)] = &[
    (
        "fi_multi_mr",
        "waits with fi_cntr_wait on counters opened with FI_WAIT_NONE, which fi_cntr(3) \
         calls invalid (the provider answers -FI_EINVAL)",
    ),
    (
        "fi_msg_sockets",
        "expects an accepted FI_EP_MSG endpoint's fi_getname to give the listener's \
         address, as TCP sockets do; an accepted xdp endpoint has its own UDP port and \
         fi_getname gives that (fi_xdp(7))",
    ),
];

/// Tests fabtests 2.x's default run also leaves out, and why.
const EXCLUDED_FROM_2: &[(&str, &str)] = &[(
    "fi_rdm_rma_trigger",
    "asks for FI_TRIGGER, which the provider does not offer (fi_getinfo answers \
     -FI_ENODATA, fi_xdp(7)); fabtests 2.x's client then waits on its out-of-band \
     socket for a server that stopped there and fails, where fabtests 1.17 reports \
     the test as not run",
)];

/// The tests the default run leaves out of fabtests `version`.
fn excluded(version: Option<&str>) -> Vec<(&'static str, &'static str)> {
    let major = version
        .and_then(|v| v.split('.').next())
        .and_then(|m| m.parse::<u32>().ok());
    let mut out = EXCLUDED.to_vec();
    if major.is_some_and(|m| m >= 2) {
        out.extend_from_slice(EXCLUDED_FROM_2);
    }
    out
}

/// What the command was given.
struct Args {
    src: Option<PathBuf>,
    /// Install prefix of the libfabric to build and run against (`/usr`
    /// without it).
    libfabric: Option<PathBuf>,
    mtu: u32,
    one_host: bool,
    /// fi_ubertest with this configuration.
    complex: Option<PathBuf>,
    suite: Vec<String>,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut a = Args {
        src: None,
        libfabric: None,
        mtu: 1500,
        one_host: false,
        complex: None,
        suite: Vec::new(),
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--src" => a.src = Some(it.next().ok_or("--src needs a directory")?.into()),
            "--libfabric" => {
                a.libfabric = Some(it.next().ok_or("--libfabric needs a prefix")?.into());
            }
            "--mtu" => {
                let v = it.next().ok_or("--mtu needs a number")?;
                a.mtu = v.parse().map_err(|_| format!("--mtu {v}: not a number"))?;
            }
            "--one-host" => a.one_host = true,
            "--complex" => {
                let ours = project_root().join("xtask/fabtests/ubertest.xdp");
                a.complex = Some(match it.clone().next() {
                    Some(f) if !f.starts_with("--") => {
                        it.next();
                        f.into()
                    }
                    _ => ours,
                });
            }
            "--" => {
                a.suite = it.cloned().collect();
                break;
            }
            other => return Err(format!("fabtests: unexpected argument `{other}`")),
        }
    }
    Ok(a)
}

/// The libfabric fabtests are built and run against: Debian's (`/usr`),
/// or one installed under a prefix (`--libfabric`).
struct Library {
    prefix: PathBuf,
    /// Its `lib` (or `lib64`) directory, put on `LD_LIBRARY_PATH` when not
    /// the system's.
    libdir: Option<PathBuf>,
}

impl Library {
    fn system() -> Self {
        Self {
            prefix: "/usr".into(),
            libdir: None,
        }
    }

    /// The libfabric installed under `prefix`: its header and library must
    /// be there.
    fn at(prefix: &Path) -> Result<Self, String> {
        let prefix = std::fs::canonicalize(prefix)
            .map_err(|e| format!("--libfabric {}: {e}", prefix.display()))?;
        let header = prefix.join("include/rdma/fabric.h");
        if !header.exists() {
            return Err(format!(
                "--libfabric {}: no {} (give the prefix libfabric was installed to)",
                prefix.display(),
                header.display()
            ));
        }
        let libdir = ["lib64", "lib"]
            .iter()
            .map(|d| prefix.join(d))
            .find(|d| d.join("libfabric.so").exists())
            .ok_or_else(|| format!("--libfabric {}: no lib/libfabric.so", prefix.display()))?;
        Ok(Self {
            prefix,
            libdir: Some(libdir),
        })
    }

    /// `PATH` with this library's `bin` first, then `dirs`.
    fn path(&self, dirs: &[&Path]) -> String {
        let mut parts: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        if self.libdir.is_some() {
            parts.insert(0, self.prefix.join("bin").display().to_string());
        }
        parts.push(std::env::var("PATH").unwrap_or_default());
        parts.join(":")
    }

    /// Point `cmd` at this library: `PATH` (with `dirs`) and, for one under
    /// a prefix, `LD_LIBRARY_PATH`.
    fn apply(&self, cmd: &mut Command, dirs: &[&Path]) {
        cmd.env("PATH", self.path(dirs));
        if let Some(libdir) = &self.libdir {
            let mut ld = libdir.display().to_string();
            if let Ok(old) = std::env::var("LD_LIBRARY_PATH") {
                ld = format!("{ld}:{old}");
            }
            cmd.env("LD_LIBRARY_PATH", ld);
        }
    }
}

/// The version fabtests' `configure.ac` states (`AC_INIT([fabtests], [V], …)`).
fn fabtests_version(tree: &Path) -> Option<String> {
    let text = std::fs::read_to_string(tree.join("configure.ac")).ok()?;
    let init = text.lines().find(|l| l.starts_with("AC_INIT("))?;
    let version = init.split('[').nth(2)?.split(']').next()?;
    Some(version.to_owned())
}

/// Build fabtests from `src` (a libfabric source tree) against `lib` into
/// `target/fabtests/<version>/install`, unless already built from both.
/// The tree is copied first (`…/src`): the caller's checkout is never
/// written to, and one that was configured in place (which an out-of-tree
/// build refuses) is cleaned in the copy.
fn build(src: &Path, lib: &Library) -> Result<PathBuf, String> {
    let tree = src.join("fabtests");
    let from = std::fs::canonicalize(&tree).map_err(|e| format!("{}: {e}", tree.display()))?;
    let version = fabtests_version(&from).unwrap_or_else(|| "unknown".into());
    let root = target_dir().join("fabtests").join(&version);
    let (copy, install) = (root.join("src"), root.join("install"));
    let runner = install.join("bin").join("runfabtests.sh");
    let stamp = root.join("built-from");
    let origin = format!("{}\n{}", from.display(), lib.prefix.display());
    let done = std::fs::read_to_string(&stamp).is_ok_and(|s| s.trim() == origin);
    if done && runner.exists() {
        return Ok(install);
    }
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).map_err(|e| format!("{}: {e}", root.display()))?;
    let mut cp = Command::new("cp");
    cp.arg("-a").arg(&from).arg(&copy);
    run_in(cp, &root)?;
    if copy.join("config.status").exists() {
        let mut clean = Command::new("make");
        clean.arg("distclean");
        run_in(clean, &copy)?;
    }
    if !copy.join("configure").exists() {
        run_in(Command::new("./autogen.sh"), &copy)?;
    }
    let mut configure = Command::new("./configure");
    configure
        .arg(format!("--prefix={}", install.display()))
        .arg(format!("--with-libfabric={}", lib.prefix.display()));
    lib.apply(&mut configure, &[]);
    run_in(configure, &copy)?;
    let mut make = Command::new("make");
    make.args(["-j2", "install"]);
    lib.apply(&mut make, &[]);
    run_in(make, &copy)?;
    std::fs::write(&stamp, origin.as_bytes()).map_err(|e| format!("{}: {e}", stamp.display()))?;
    Ok(install)
}

/// `fi_info -p xdp` of `lib` in `host`: the provider must load in that
/// library before its tests mean anything. Prints the library's version
/// line.
fn check_loads(host: &Host, lib: &Library) -> Result<(), String> {
    let fi_info = match &lib.libdir {
        Some(_) => lib.prefix.join("bin/fi_info"),
        None => "fi_info".into(),
    };
    let mut version = host.command(&fi_info);
    version.arg("--version");
    lib.apply(&mut version, &[]);
    let out = version
        .output()
        .map_err(|e| format!("cannot start {}: {e}", fi_info.display()))?;
    print!("{}", String::from_utf8_lossy(&out.stdout));
    let mut info = host.command(&fi_info);
    info.args(["-p", "xdp"])
        .env("FI_PROVIDER_PATH", provider_dir())
        .env("FI_LOG_LEVEL", "warn");
    lib.apply(&mut info, &[]);
    let out = info
        .output()
        .map_err(|e| format!("cannot start {}: {e}", fi_info.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if out.status.success() && text.contains("provider: xdp") {
        return Ok(());
    }
    Err(format!(
        "{} -p xdp (libfabric under {}) does not list the provider:\n{text}{}",
        fi_info.display(),
        lib.prefix.display(),
        String::from_utf8_lossy(&out.stderr)
    ))
}

/// Run `cmd` in `dir`, failing with its command line when it fails.
fn run_in(mut cmd: Command, dir: &Path) -> Result<(), String> {
    cmd.current_dir(dir);
    let line = format!("{cmd:?} in {}", dir.display());
    let status = cmd
        .status()
        .map_err(|e| format!("cannot start {line}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{line} failed ({status})"))
    }
}

/// Where and how runfabtests.sh runs: the fabtests installed, the library
/// they run with, and the test hosts' MTU and number.
struct Run<'a> {
    install: &'a Path,
    lib: &'a Library,
    mtu: u32,
    one_host: bool,
}

/// Run runfabtests.sh with `suite` between two test hosts of `run.mtu` (or,
/// `run.one_host`, both sides in the first), once `fi_info` of the library
/// lists the provider there; fails if a test failed.
fn run_suite(run: &Run, suite: &[String]) -> Result<(), String> {
    let (install, one_host) = (run.install, run.one_host);
    let pair = HostPair::with_mtu(run.mtu).map_err(|e| format!("test hosts: {e}"))?;
    // Kernel-built UDP on veth leaves checksums partial, which our receive
    // check refuses (docs/ARCHITECTURE.md "Checksums"); the fabtests'
    // out-of-band sockets are TCP, unaffected.
    for h in [&pair.a, &pair.b] {
        let mut cmd = h.command("ethtool");
        cmd.args(["-K", h.ifname(), "tx", "off"]);
        let _ = cmd.output();
    }
    check_loads(&pair.a, run.lib)?;
    let a = pair.a.ipv4().to_string();
    // One host: the client runs beside the server, at the same address.
    let b = if one_host {
        a.clone()
    } else {
        pair.b.ipv4().to_string()
    };
    let hosts = if one_host {
        format!("{a}={}", pair.a.netns())
    } else {
        format!("{a}={} {b}={}", pair.a.netns(), pair.b.netns())
    };
    let bin = install.join("bin");
    let ssh_dir = project_root().join("xtask").join("fabtests");
    let mut cmd = Command::new(bin.join("runfabtests.sh"));
    cmd.arg("-p").arg(&bin).args(["-T", "120"]);
    cmd.args(suite).args(["xdp", &a, &b]);
    run.lib.apply(&mut cmd, &[&ssh_dir, &bin]);
    cmd.env("XTASK_FABTESTS_HOSTS", hosts)
        .env("FI_PROVIDER_PATH", provider_dir())
        .current_dir(&bin);
    let out = cmd
        .output()
        .map_err(|e| format!("cannot start runfabtests.sh: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    print!("{text}");
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    // runfabtests.sh exits non-zero when a test failed; a complex test
    // prints "Fail [failed/total]", and Notrun when its configuration
    // was refused.
    let complex = suite.iter().any(|s| s == "complex");
    let failed = |l: &str| {
        let l = l.trim_end();
        l.ends_with(": Fail")
            || l.contains("Fail [")
            || (complex && l.ends_with("Notrun") && l.contains("fi_ubertest"))
    };
    if !out.status.success() || text.lines().any(failed) {
        return Err(format!("runfabtests.sh {suite:?}: a test failed"));
    }
    Ok(())
}

/// `cargo xtask fabtests`.
pub fn fabtests(args: &[String]) -> Result<(), String> {
    let a = parse(args)?;
    let Some(src) = a.src.filter(|s| s.join("fabtests").is_dir()) else {
        eprintln!(
            "xtask: fabtests skipped: no libfabric source tree given (--src DIR, a checkout \
             of the public libfabric repository holding fabtests/: release 1.17 for Debian's \
             libfabric, or the release installed under --libfabric PREFIX). They are not \
             packaged by Debian and are built from those sources, which CI has no network \
             to fetch."
        );
        return Ok(());
    };
    let lib = match &a.libfabric {
        Some(prefix) => Library::at(prefix)?,
        None => Library::system(),
    };
    crate::progress::step("build the provider", steps::build)?;
    let install = crate::progress::step("build fabtests", || build(&src, &lib))?;
    let run = Run {
        install: &install,
        lib: &lib,
        mtu: a.mtu,
        one_host: a.one_host,
    };
    if let Some(config) = &a.complex {
        return run_complex(&run, config);
    }
    let suites: Vec<Vec<String>> = if a.suite.is_empty() {
        let version = fabtests_version(&src.join("fabtests"));
        let left_out = excluded(version.as_deref());
        let excluded: Vec<&str> = left_out.iter().map(|(t, _)| *t).collect();
        for (t, why) in &left_out {
            eprintln!("xtask: fabtests: leaving out {t}: it {why}");
        }
        ["short", "functional"]
            .iter()
            .map(|s| {
                let set = ["-t", s, "-e", &excluded.join(",")];
                set.iter().map(|a| (*a).to_owned()).collect()
            })
            .collect()
    } else {
        vec![a.suite]
    };
    for suite in suites {
        crate::progress::step(&format!("runfabtests.sh {}", suite.join(" ")), || {
            run_suite(&run, &suite)
        })?;
    }
    Ok(())
}

/// The top-level `{ … }` entries of a fi_ubertest configuration, in order
/// (the format's comments start with `#` and hold no braces in ours).
fn config_entries(text: &str) -> Vec<&str> {
    let (mut depth, mut start, mut out) = (0usize, 0usize, Vec::new());
    for (i, c) in text.char_indices() {
        match c {
            '{' => {
                if depth == 0 {
                    start = i;
                }
                depth += 1;
            }
            '}' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    out.push(&text[start..=i]);
                }
            }
            _ => {}
        }
    }
    out
}

/// fi_ubertest with `config`, one run per entry (module docs).
fn run_complex(run: &Run, config: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(config).map_err(|e| format!("{}: {e}", config.display()))?;
    let entries = config_entries(&text);
    if entries.is_empty() {
        return Err(format!("{}: no entries", config.display()));
    }
    let dir = run.install.with_file_name("complex");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for (i, entry) in entries.iter().enumerate() {
        let file = dir.join(format!("entry-{i}.test"));
        std::fs::write(&file, entry).map_err(|e| format!("{}: {e}", file.display()))?;
        // One fi_ubertest run is one "test" to runfabtests.sh, and an
        // entry of hundreds of tests outlasts the 120 s it gives one.
        let suite: Vec<String> = ["-T", "900", "-t", "complex", "-u"]
            .iter()
            .map(|s| (*s).to_owned())
            .chain([file.to_string_lossy().into_owned()])
            .collect();
        let name = format!("fi_ubertest, entry {} of {}", i + 1, entries.len());
        crate::progress::step(&name, || run_suite(run, &suite))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_the_top_level_braces() {
        let text = "#: \"a suite\"\n{\n\tep_type: [\n\t\tFI_EP_RDM,\n\t],\n},\n{ b }\n";
        assert_eq!(
            config_entries(text),
            ["{\n\tep_type: [\n\t\tFI_EP_RDM,\n\t],\n}", "{ b }"]
        );
        assert!(config_entries("# nothing").is_empty());
    }

    #[test]
    fn fabtests_2_leave_out_more() {
        let names = |v| excluded(v).iter().map(|(t, _)| *t).collect::<Vec<_>>();
        assert_eq!(names(Some("1.17.0")), ["fi_multi_mr", "fi_msg_sockets"]);
        assert_eq!(names(None), ["fi_multi_mr", "fi_msg_sockets"]);
        assert_eq!(
            names(Some("2.6.0")),
            ["fi_multi_mr", "fi_msg_sockets", "fi_rdm_rma_trigger"]
        );
    }

    #[test]
    fn the_version_is_autoconfs() {
        let dir = std::env::temp_dir().join(format!("xtask-ftver-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("configure.ac"),
            "dnl x\nAC_INIT([fabtests], [2.6.0], [ofiwg@lists.openfabrics.org])\n",
        )
        .unwrap();
        assert_eq!(fabtests_version(&dir).as_deref(), Some("2.6.0"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn our_configuration_has_entries() {
        let ours = project_root().join("xtask/fabtests/ubertest.xdp");
        let text = std::fs::read_to_string(ours).unwrap_or_default();
        assert_eq!(config_entries(&text).len(), 7);
    }
}
