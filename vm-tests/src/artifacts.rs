//! What the guest runs: the workspace's test executables and the provider library, built by
//! invoking cargo (release profile, like `cargo xtask test`, so its build is reused) and found
//! through cargo's JSON messages.

use std::collections::BTreeMap;
use std::env;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

/// Packages whose tests exercise the kernel (XDP, AF_XDP, netns/veth) and so run in the VM, in
/// the order they run. Engine-only packages (`ofi-xdp-reliability`) gain nothing from another
/// kernel and are left to `cargo xtask test`.
pub const SUITE_PACKAGES: &[&str] = &[
    "ofi-xdp-testhosts",
    "ofi-xdp-bpf",
    "ofi-xdp-link",
    "ofi-xdp-provider",
    "ofi-xdp-tools",
];

/// The provider package and its library's installed name (libfabric loads `lib<name>-fi.so`
/// from `FI_PROVIDER_PATH`).
pub const PROVIDER_PACKAGE: &str = "ofi-xdp-provider";
pub const PROVIDER_INSTALLED_NAME: &str = "libxdp-fi.so";

/// The workspace as `cargo metadata` describes it.
pub struct Workspace {
    pub root: PathBuf,
    pub target_dir: PathBuf,
    /// Package name → directory holding its Cargo.toml.
    pub packages: BTreeMap<String, PathBuf>,
}

pub fn cargo() -> Command {
    Command::new(env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

impl Workspace {
    pub fn load() -> Result<Self, String> {
        let out = cargo()
            .args(["metadata", "--format-version", "1", "--no-deps"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "cargo metadata failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let meta: Value = serde_json::from_slice(&out.stdout)
            .map_err(|e| format!("cargo metadata output: {e}"))?;
        let path_of = |key: &str| {
            meta.get(key)
                .and_then(Value::as_str)
                .map(PathBuf::from)
                .ok_or_else(|| format!("cargo metadata has no {key}"))
        };
        let mut packages = BTreeMap::new();
        for p in meta
            .get("packages")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = p.get("name").and_then(Value::as_str);
            let manifest = p
                .get("manifest_path")
                .and_then(Value::as_str)
                .map(Path::new);
            if let (Some(name), Some(dir)) = (name, manifest.and_then(Path::parent)) {
                packages.insert(name.to_owned(), dir.to_owned());
            }
        }
        Ok(Self {
            root: path_of("workspace_root")?,
            target_dir: path_of("target_directory")?,
            packages,
        })
    }
}

/// A test executable for the guest.
#[derive(Debug, Clone)]
pub struct TestExe {
    pub package: String,
    /// `lib` for unit tests, else the integration test's name.
    pub target: String,
    pub path: PathBuf,
    /// The package directory: cargo runs tests from there, so the guest does too.
    pub package_dir: PathBuf,
}

impl TestExe {
    /// `bpf/steering`: how results name this suite.
    pub fn suite_name(&self) -> String {
        let short = self.package.trim_start_matches("ofi-xdp-");
        format!("{short}/{}", self.target)
    }
}

#[derive(Debug, Default)]
pub struct Artifacts {
    pub tests: Vec<TestExe>,
    /// Non-test executables of the suite packages (tests may run them via `CARGO_BIN_EXE_*`).
    pub bins: Vec<PathBuf>,
    pub provider_lib: Option<PathBuf>,
    /// Every copy of the provider library cargo made (deps/ and the profile directory).
    pub provider_files: Vec<PathBuf>,
    /// Packages whose build failed: reported as failed suites, the rest still runs.
    pub broken: Vec<(String, String)>,
}

/// Builds the suite packages present in `ws` and collects their executables. One cargo run for
/// all of them first (cheap after `cargo xtask test`); if it fails, one per package, so a package
/// that does not build breaks only its own suite.
pub fn build(ws: &Workspace) -> Result<Artifacts, String> {
    let present: Vec<&str> = SUITE_PACKAGES
        .iter()
        .copied()
        .filter(|p| ws.packages.contains_key(*p))
        .collect();
    let mut artifacts = Artifacts::default();
    if present.contains(&PROVIDER_PACKAGE) {
        match cargo_json(ws, &["build", "--release", "--lib", "-p", PROVIDER_PACKAGE]) {
            Ok(messages) => collect(ws, &messages, &mut artifacts),
            Err(e) => artifacts.broken.push((PROVIDER_PACKAGE.to_owned(), e)),
        }
    }
    let mut all = vec!["test", "--release", "--no-run"];
    for p in &present {
        all.extend(["-p", p]);
    }
    match cargo_json(ws, &all) {
        Ok(messages) => collect(ws, &messages, &mut artifacts),
        Err(_) => {
            eprintln!("vm-tests: building all suites at once failed; building them one by one");
            for p in &present {
                match cargo_json(ws, &["test", "--release", "--no-run", "-p", p]) {
                    Ok(messages) => collect(ws, &messages, &mut artifacts),
                    Err(e) => artifacts.broken.push(((*p).to_owned(), e)),
                }
            }
        }
    }
    // Stable order: by package as listed in SUITE_PACKAGES, unit tests first.
    artifacts.tests.sort_by_key(|t| {
        let rank = SUITE_PACKAGES.iter().position(|p| *p == t.package);
        (rank, t.target != "lib", t.target.clone())
    });
    artifacts.tests.dedup_by(|a, b| a.path == b.path);
    artifacts.bins.sort();
    artifacts.bins.dedup();
    artifacts.provider_files.sort();
    artifacts.provider_files.dedup();
    Ok(artifacts)
}

/// Runs cargo with `--message-format=json-render-diagnostics` (compiler errors still reach the
/// terminal readably) and returns the JSON messages.
fn cargo_json(ws: &Workspace, args: &[&str]) -> Result<Vec<Value>, String> {
    eprintln!("vm-tests: cargo {}", args.join(" "));
    let t0 = std::time::Instant::now();
    let mut child = cargo()
        .args(args)
        .arg("--message-format=json-render-diagnostics")
        .current_dir(&ws.root)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    let mut messages = Vec::new();
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines() {
            let line = line.map_err(|e| format!("reading cargo output: {e}"))?;
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                messages.push(v);
            }
        }
    }
    let status = child
        .wait()
        .map_err(|e| format!("waiting for cargo: {e}"))?;
    eprintln!(
        "vm-tests: cargo {} took {:.1} s",
        args.first().unwrap_or(&""),
        t0.elapsed().as_secs_f64()
    );
    if status.success() {
        Ok(messages)
    } else {
        Err(format!("cargo {} failed: {status}", args.join(" ")))
    }
}

fn collect(ws: &Workspace, messages: &[Value], artifacts: &mut Artifacts) {
    let package_of_dir: BTreeMap<&Path, &str> = ws
        .packages
        .iter()
        .map(|(name, dir)| (dir.as_path(), name.as_str()))
        .collect();
    for m in messages {
        if m.get("reason").and_then(Value::as_str) != Some("compiler-artifact") {
            continue;
        }
        let Some(dir) = m
            .get("manifest_path")
            .and_then(Value::as_str)
            .and_then(|p| Path::new(p).parent())
        else {
            continue;
        };
        let Some(package) = package_of_dir.get(dir).copied() else {
            continue; // a dependency from crates.io
        };
        if !SUITE_PACKAGES.contains(&package) {
            continue;
        }
        let target = m.get("target");
        let target_name = target
            .and_then(|t| t.get("name"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        let kinds: Vec<&str> = target
            .and_then(|t| t.get("kind"))
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let is_test = m
            .get("profile")
            .and_then(|p| p.get("test"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let executable = m
            .get("executable")
            .and_then(Value::as_str)
            .map(PathBuf::from);
        if let Some(exe) = executable {
            if is_test {
                let kind_is_lib = kinds.iter().any(|k| k.ends_with("lib"));
                artifacts.tests.push(TestExe {
                    package: package.to_owned(),
                    target: if kind_is_lib {
                        "lib".to_owned()
                    } else {
                        target_name.to_owned()
                    },
                    path: exe,
                    package_dir: dir.to_owned(),
                });
            } else {
                artifacts.bins.push(exe);
            }
        } else if package == PROVIDER_PACKAGE && kinds.contains(&"cdylib") && !is_test {
            let libs = m
                .get("filenames")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .filter(|f| f.ends_with(".so"))
                .map(PathBuf::from);
            for lib in libs {
                // Tests look for the copy cargo "uplifts" from deps/ into the profile directory.
                let uplifted = lib
                    .parent()
                    .filter(|d| d.ends_with("deps"))
                    .and_then(Path::parent)
                    .zip(lib.file_name())
                    .map(|(profile, name)| profile.join(name))
                    .filter(|p| p.exists());
                artifacts.provider_lib = Some(uplifted.clone().unwrap_or_else(|| lib.clone()));
                artifacts.provider_files.push(lib);
                artifacts.provider_files.extend(uplifted);
            }
        }
    }
}

/// Test executables that do not run in the VM, with the reason printed in the summary: they
/// test nothing kernel-specific and need what the guest lacks.
pub const NOT_IN_VM: &[(&str, &str, &str)] = &[
    (
        "ofi-xdp-provider",
        "layout",
        "compiles a C program generated at run time (the guest has no compiler); \
         kernel-independent, runs in `cargo xtask test`",
    ),
    (
        "ofi-xdp-provider",
        "attack",
        "floods an authenticated transfer for a minute and a half with forged datagrams; what \
         it tests (the frames, the engine's verdicts) does not depend on the kernel; runs in \
         `cargo xtask test`",
    ),
    (
        "ofi-xdp-tools",
        "stream",
        "compiles the stream benchmark's C program at run time (the guest has no compiler); \
         the data paths it drives are the C suite's; runs in `cargo xtask test`",
    ),
    (
        "ofi-xdp-provider",
        "trixie",
        "runs programs of a Debian 13 root (libfabric 2.1, Open MPI 5.0.7) that mmdebstrap \
         makes from Debian's archive, which the guest can neither reach nor carry; the kernel \
         paths it uses are those of the C suite, which does run there; runs in \
         `cargo xtask test`",
    ),
    (
        "ofi-xdp-provider",
        "mpi",
        "needs Open MPI (mpicc, mpirun, PMIx and their libraries), which the guest image \
         does not carry; the kernel paths it uses are those of the C suite, which does run \
         there; runs in `cargo xtask test`",
    ),
];

/// Why `t` is kept out of the VM, if it is.
pub fn not_in_vm(t: &TestExe) -> Option<&'static str> {
    NOT_IN_VM
        .iter()
        .find(|(package, target, _)| *package == t.package && *target == t.target)
        .map(|(_, _, why)| *why)
}

/// C test programs compiled on the host for the guest's `cc` stand-in (the guest has no
/// compiler; see `guest::cc_standin_script`).
#[derive(Debug, Default)]
pub struct CPrograms {
    /// (SHA-256 of the source, compiled program on the host).
    pub programs: Vec<(String, PathBuf)>,
    /// Every file of the `tests/c` directories as it was compiled (path, contents), mirrored so
    /// the guest hashes the very sources the programs came from even if they change meanwhile.
    pub sources: Vec<(PathBuf, Vec<u8>)>,
}

/// Flags the provider's C suite (`provider/tests/c_suite.rs`) compiles with.
pub const C_FLAGS: &[&str] = &["-Wall", "-Wno-unused-function", "-g", "-O1"];
pub const C_LIBS: &[&str] = &["-lfabric"];

/// Compiles every `tests/c/*.c` of the suite packages into `out`, named by the source's hash.
pub fn compile_c_programs(ws: &Workspace, out: &Path) -> Result<CPrograms, String> {
    let mut result = CPrograms::default();
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    for package in SUITE_PACKAGES {
        let Some(dir) = ws.packages.get(*package) else {
            continue;
        };
        let c_dir = dir.join("tests/c");
        let Ok(entries) = std::fs::read_dir(&c_dir) else {
            continue;
        };
        let mut files: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
        files.sort();
        for src in files {
            let contents = std::fs::read(&src).map_err(|e| format!("{}: {e}", src.display()))?;
            result.sources.push((src.clone(), contents.clone()));
            if src.extension().and_then(|e| e.to_str()) != Some("c") {
                continue;
            }
            // Compile the snapshot, not the live file, which may change while the suite runs.
            let hash = sha256(&contents)?;
            let snapshot_dir = out.join(format!("src-{hash}"));
            std::fs::create_dir_all(&snapshot_dir)
                .map_err(|e| format!("{}: {e}", snapshot_dir.display()))?;
            let file_name = src.file_name().unwrap_or_default();
            let snapshot = snapshot_dir.join(file_name);
            std::fs::write(&snapshot, &contents)
                .map_err(|e| format!("{}: {e}", snapshot.display()))?;
            let program = out.join(&hash);
            let status = Command::new("cc")
                .args(C_FLAGS)
                // Headers next to the source (`#include "xt.h"`) come from its directory.
                .arg("-I")
                .arg(&c_dir)
                .arg("-o")
                .arg(&program)
                .arg(&snapshot)
                .args(C_LIBS)
                .status()
                .map_err(|e| format!("cannot run cc: {e}"))?;
            if status.success() {
                result.programs.push((hash, program));
            } else {
                eprintln!(
                    "vm-tests: cc {} failed; its test fails in the guest",
                    src.display()
                );
            }
        }
    }
    Ok(result)
}

fn sha256(contents: &[u8]) -> Result<String, String> {
    use std::io::Write as _;
    let mut child = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run sha256sum: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(contents)
            .map_err(|e| format!("sha256sum: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("sha256sum: {e}"))?;
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .map(str::to_owned)
        .ok_or_else(|| "sha256sum: no output".to_owned())
}
