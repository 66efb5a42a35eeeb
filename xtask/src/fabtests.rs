//! `cargo xtask fabtests --src DIR [--mtu N] [--one-host] [--complex [FILE]] [-- runfabtests.sh options]`:
//! libfabric's own test suite (fabtests) against the provider, between two
//! test hosts, or (`--one-host`) with server and client in one test host,
//! where RDM endpoints talk through shared memory (direct messages,
//! single-copy pulls).
//!
//! fabtests are not in Debian, so they are built from a libfabric source
//! tree the caller provides (its `fabtests/` folder, release 1.17 to match
//! Debian's libfabric), in a copy under `target/fabtests/`: `autogen.sh`
//! if the tree has no `configure`, then `configure --with-libfabric=/usr`,
//! `make install`. Then two test hosts (network namespaces joined by veth,
//! removed afterwards) run libfabric's `runfabtests.sh`, which starts each
//! side through `ssh HOST …`: `xtask/fabtests/ssh` stands in for ssh and runs
//! the command in the namespace holding HOST's address. Without a source
//! tree the command says why it skips (CI has no network to fetch one).
//!
//! Without options after `--` it runs the `short` set (which holds
//! `fi_rma_bw -e rdm -o write|read|writedata` and `fi_rdm_atomic -o all`)
//! and `functional`, less the tests in `EXCLUDED` (said why when it
//! runs); anything after `--` is passed to runfabtests.sh instead (e.g.
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

use ofi_xdp_testhosts::HostPair;

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

/// What the command was given.
struct Args {
    src: Option<PathBuf>,
    mtu: u32,
    one_host: bool,
    /// fi_ubertest with this configuration.
    complex: Option<PathBuf>,
    suite: Vec<String>,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut a = Args {
        src: None,
        mtu: 1500,
        one_host: false,
        complex: None,
        suite: Vec::new(),
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--src" => a.src = Some(it.next().ok_or("--src needs a directory")?.into()),
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

/// Build fabtests from `src` (a libfabric source tree) into
/// `target/fabtests/install`, unless already built from it. The tree is
/// copied first (`target/fabtests/src`): the caller's checkout is never
/// written to, and one that was configured in place (which an out-of-tree
/// build refuses) is cleaned in the copy.
fn build(src: &Path) -> Result<PathBuf, String> {
    let tree = src.join("fabtests");
    let root = target_dir().join("fabtests");
    let (copy, install) = (root.join("src"), root.join("install"));
    let runner = install.join("bin").join("runfabtests.sh");
    let stamp = root.join("built-from");
    let from = std::fs::canonicalize(&tree).map_err(|e| format!("{}: {e}", tree.display()))?;
    let done = std::fs::read_to_string(&stamp).is_ok_and(|s| Path::new(s.trim()) == from);
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
        .arg("--with-libfabric=/usr");
    run_in(configure, &copy)?;
    let mut make = Command::new("make");
    make.args(["-j2", "install"]);
    run_in(make, &copy)?;
    std::fs::write(&stamp, from.to_string_lossy().as_bytes())
        .map_err(|e| format!("{}: {e}", stamp.display()))?;
    Ok(install)
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

/// Run runfabtests.sh with `suite` between two test hosts of `mtu` (or,
/// `one_host`, both sides in the first); fails if a test failed.
fn run_suite(install: &Path, mtu: u32, one_host: bool, suite: &[String]) -> Result<(), String> {
    let pair = HostPair::with_mtu(mtu).map_err(|e| format!("test hosts: {e}"))?;
    // Kernel-built UDP on veth leaves checksums partial, which our receive
    // check refuses (docs/ARCHITECTURE.md "Checksums"); the fabtests'
    // out-of-band sockets are TCP, unaffected.
    for h in [&pair.a, &pair.b] {
        let mut cmd = h.command("ethtool");
        cmd.args(["-K", h.ifname(), "tx", "off"]);
        let _ = cmd.output();
    }
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
    let path = format!(
        "{}:{}:{}",
        ssh_dir.display(),
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new(bin.join("runfabtests.sh"));
    cmd.arg("-p").arg(&bin).args(["-T", "120"]);
    cmd.args(suite).args(["xdp", &a, &b]);
    cmd.env("PATH", path)
        .env("XTASK_FABTESTS_HOSTS", hosts)
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
             of the public libfabric repository, release 1.17, holding fabtests/). They are \
             not packaged by Debian and are built from those sources, which CI has no \
             network to fetch."
        );
        return Ok(());
    };
    crate::progress::step("build the provider", steps::build)?;
    let install = crate::progress::step("build fabtests", || build(&src))?;
    if let Some(config) = &a.complex {
        return run_complex(&install, a.mtu, a.one_host, config);
    }
    let suites: Vec<Vec<String>> = if a.suite.is_empty() {
        let excluded: Vec<&str> = EXCLUDED.iter().map(|(t, _)| *t).collect();
        for (t, why) in EXCLUDED {
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
            run_suite(&install, a.mtu, a.one_host, &suite)
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
fn run_complex(install: &Path, mtu: u32, one_host: bool, config: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(config).map_err(|e| format!("{}: {e}", config.display()))?;
    let entries = config_entries(&text);
    if entries.is_empty() {
        return Err(format!("{}: no entries", config.display()));
    }
    let dir = target_dir().join("fabtests").join("complex");
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
        crate::progress::step(&name, || run_suite(install, mtu, one_host, &suite))?;
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
    fn our_configuration_has_entries() {
        let ours = project_root().join("xtask/fabtests/ubertest.xdp");
        let text = std::fs::read_to_string(ours).unwrap_or_default();
        assert_eq!(config_entries(&text).len(), 7);
    }
}
