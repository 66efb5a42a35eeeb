//! Debian kernel packages: find the newest `linux-image-<series>.*-amd64` in the configured apt
//! sources, download it with `apt-get download` and unpack it with `dpkg-deb -x` into a cache
//! directory (nothing is installed into the host), then read its config and resolve the modules
//! the guest needs.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::{command_output, run_checked};

/// A kernel series we boot. Adding a kernel = adding an entry here (see README.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Series {
    /// `6.1`, `6.12`: what `--kernel` accepts and what names logs.
    pub name: &'static str,
    /// The Debian suite carrying the series when the system's apt sources do not: it is read
    /// through a private apt state under the cache (`apt-get -o Dir::…`), so the system's apt
    /// configuration is never touched.
    pub suite: Option<&'static str>,
}

/// The kernels we promise: Debian bookworm's 6.1 and the 6.12 that bookworm carries in
/// bookworm-security/backports; and Debian trixie-backports' 6.18, the first of these whose
/// virtio_net offers AF_XDP zero-copy (`--nic virtio`).
pub const SERIES: &[Series] = &[
    Series {
        name: "6.1",
        suite: None,
    },
    Series {
        name: "6.12",
        suite: None,
    },
    Series {
        name: "6.18",
        suite: Some("trixie-backports"),
    },
];

/// The Debian archive every suite comes from, and the keyring its releases are signed with
/// (debian-archive-keyring).
const DEBIAN_ARCHIVE: &str = "http://deb.debian.org/debian";
const DEBIAN_KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";

/// `apt-get`/`apt-cache` for `series`: the system's apt, or a private state in `cache` reading
/// only the series' suite.
fn apt(program: &str, series: &Series, cache: &Path) -> Result<Command, String> {
    let mut cmd = Command::new(program);
    let Some(suite) = series.suite else {
        return Ok(cmd);
    };
    let state = cache.join(format!("apt-{suite}"));
    let lists = state.join("lists");
    let archives = state.join("archives");
    for d in [lists.join("partial"), archives.join("partial")] {
        fs::create_dir_all(&d).map_err(|e| format!("creating {}: {e}", d.display()))?;
    }
    let sources = state.join("sources.list");
    fs::write(
        &sources,
        format!("deb [signed-by={DEBIAN_KEYRING}] {DEBIAN_ARCHIVE} {suite} main\n"),
    )
    .map_err(|e| format!("writing {}: {e}", sources.display()))?;
    let opt = |k: &str, v: &Path| format!("{k}={}", v.display());
    cmd.args([
        "-o",
        &opt("Dir::Etc::SourceList", &sources),
        "-o",
        "Dir::Etc::SourceParts=/nonexistent",
        "-o",
        &opt("Dir::State::Lists", &lists),
        "-o",
        &opt("Dir::Cache", &state),
        "-o",
        &opt("Dir::Cache::Archives", &archives),
    ]);
    Ok(cmd)
}

impl Series {
    /// Looks up `--kernel` values.
    pub fn by_name(name: &str) -> Option<&'static Series> {
        SERIES.iter().find(|s| s.name == name)
    }

    /// `linux-image-6.1.`: every plain image of the series starts with this (the trailing dot
    /// keeps `6.1` from matching `6.12`).
    fn package_prefix(&self) -> String {
        format!("linux-image-{}.", self.name)
    }

    /// Whether `package` is the plain signed amd64 image of this series: `linux-image-6.1.0-56-amd64`,
    /// `linux-image-6.12.117+deb12-amd64`; not the `-dbg`, `-unsigned`, `-cloud-`, `-rt-` flavours.
    pub fn is_plain_image(&self, package: &str) -> bool {
        let Some(rest) = package.strip_prefix(&self.package_prefix()) else {
            return false;
        };
        let Some(version) = rest.strip_suffix("-amd64") else {
            return false;
        };
        // What remains is the ABI version: digits, dots, dashes and a `+debNN` tag at most.
        !version.is_empty()
            && version
                .split(|c: char| !c.is_ascii_alphabetic())
                .all(|word| word.is_empty() || word == "deb")
    }
}

/// Orders package names by their numbers: `6.1.0-56` after `6.1.0-9`, `6.12.117+deb12` after
/// `6.12.100+deb12`.
pub fn version_key(package: &str) -> Vec<u64> {
    package
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.parse().ok())
        .collect()
}

/// The newest plain image of `series` that `apt-cache` knows, running `apt-get update` once if
/// the package lists have none.
pub fn newest_package(series: &Series, cache: &Path) -> Result<String, String> {
    if let Some(found) = search_apt(series, cache)? {
        return Ok(found);
    }
    eprintln!(
        "vm-tests: no {} image in the apt lists; running apt-get update{}",
        series.name,
        series
            .suite
            .map(|s| format!(" for {s} (a private apt state)"))
            .unwrap_or_default()
    );
    run_checked(apt("apt-get", series, cache)?.args(["update", "-q"]))?;
    search_apt(series, cache)?.ok_or_else(|| {
        format!(
            "no package {}*-amd64 in the configured apt sources (apt-cache search found none)",
            series.package_prefix()
        )
    })
}

fn search_apt(series: &Series, cache: &Path) -> Result<Option<String>, String> {
    let pattern = format!("^{}", series.package_prefix().replace('.', "\\."));
    let out = command_output(apt("apt-cache", series, cache)?.args([
        "search",
        "--names-only",
        &pattern,
    ]))?;
    Ok(out
        .lines()
        .filter_map(|line| line.split(" - ").next())
        .map(str::trim)
        .filter(|name| series.is_plain_image(name))
        .max_by_key(|name| version_key(name))
        .map(str::to_owned))
}

/// An unpacked kernel package.
#[derive(Debug)]
pub struct KernelTree {
    pub package: String,
    /// `uname -r` of the kernel: the directory name under `lib/modules`.
    pub release: String,
    pub vmlinuz: PathBuf,
    pub modules_dir: PathBuf,
    pub config: BTreeMap<String, String>,
}

/// Marker file written after a complete unpack, so an interrupted unpack is redone.
const UNPACKED_MARKER: &str = ".unpacked";

/// Makes `series` available under `cache`: the newest package from apt, or, when apt cannot be
/// asked (offline), the newest one already unpacked there.
pub fn obtain(series: &Series, cache: &Path) -> Result<KernelTree, String> {
    let package = match newest_package(series, cache) {
        Ok(p) => p,
        Err(apt_error) => newest_cached(series, cache)?.ok_or(apt_error)?,
    };
    let dir = cache.join(&package);
    if !dir.join(UNPACKED_MARKER).exists()
        && let Err(download_error) = download_and_unpack(series, &package, cache, &dir)
    {
        // A newer package is listed but cannot be fetched (offline): an older one already in
        // the cache still tests the series.
        let cached = newest_cached(series, cache)?.ok_or(download_error.clone())?;
        eprintln!("vm-tests: {download_error}; using the cached {cached}");
        return open_tree(&cached, &cache.join(&cached));
    }
    open_tree(&package, &dir)
}

fn newest_cached(series: &Series, cache: &Path) -> Result<Option<String>, String> {
    let Ok(entries) = fs::read_dir(cache) else {
        return Ok(None);
    };
    Ok(entries
        .filter_map(Result::ok)
        .filter(|e| e.path().join(UNPACKED_MARKER).exists())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| series.is_plain_image(name))
        .max_by_key(|name| version_key(name)))
}

fn download_and_unpack(
    series: &Series,
    package: &str,
    cache: &Path,
    dir: &Path,
) -> Result<(), String> {
    let downloads = cache.join("debs");
    fs::create_dir_all(&downloads).map_err(|e| format!("creating {}: {e}", downloads.display()))?;
    eprintln!("vm-tests: apt-get download {package}");
    let t0 = std::time::Instant::now();
    run_checked(
        apt("apt-get", series, cache)?
            .args(["download", "-q", package])
            .current_dir(&downloads),
    )?;
    let deb = fs::read_dir(&downloads)
        .map_err(|e| format!("reading {}: {e}", downloads.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("{package}_")) && n.ends_with(".deb"))
        })
        .ok_or_else(|| {
            format!(
                "apt-get download left no {package}_*.deb in {}",
                downloads.display()
            )
        })?;
    if dir.exists() {
        fs::remove_dir_all(dir).map_err(|e| format!("removing {}: {e}", dir.display()))?;
    }
    eprintln!("vm-tests: dpkg-deb -x {}", deb.display());
    run_checked(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(dir))?;
    eprintln!(
        "vm-tests: {package} downloaded and unpacked in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    fs::write(dir.join(UNPACKED_MARKER), package).map_err(|e| format!("writing marker: {e}"))?;
    // The unpacked tree is all we use; the .deb would only double the cache's size.
    fs::remove_file(&deb).map_err(|e| format!("removing {}: {e}", deb.display()))?;
    Ok(())
}

fn open_tree(package: &str, dir: &Path) -> Result<KernelTree, String> {
    // Packages of merged-/usr releases (trixie on) put modules under usr/lib.
    let modules_root = ["lib/modules", "usr/lib/modules"]
        .iter()
        .map(|d| dir.join(d))
        .find(|d| d.is_dir())
        .unwrap_or_else(|| dir.join("lib/modules"));
    let release = fs::read_dir(&modules_root)
        .map_err(|e| format!("{}: {e}", modules_root.display()))?
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .next()
        .ok_or_else(|| format!("{package} holds no lib/modules/<release>"))?;
    let vmlinuz = dir.join(format!("boot/vmlinuz-{release}"));
    if !vmlinuz.exists() {
        return Err(format!("{package} holds no {}", vmlinuz.display()));
    }
    let config_path = dir.join(format!("boot/config-{release}"));
    let config_text =
        fs::read_to_string(&config_path).map_err(|e| format!("{}: {e}", config_path.display()))?;
    Ok(KernelTree {
        package: package.to_owned(),
        modules_dir: modules_root.join(&release),
        release,
        vmlinuz,
        config: parse_config(&config_text),
    })
}

/// `CONFIG_X=y` lines; `# CONFIG_X is not set` lines are simply absent from the map.
pub fn parse_config(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter(|l| l.starts_with("CONFIG_"))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.trim_matches('"').to_owned()))
        .collect()
}

/// Kernel options the suite depends on, with what must hold. Missing ones stop the run before
/// booting, with the option named.
pub const REQUIRED_CONFIG: &[(&str, &str)] = &[
    ("CONFIG_BPF_SYSCALL", "y"),
    ("CONFIG_XDP_SOCKETS", "y"),
    ("CONFIG_NET_NS", "y"),
    ("CONFIG_VETH", "y|m"),
    ("CONFIG_DEVTMPFS", "y"),
    ("CONFIG_BLK_DEV_INITRD", "y"),
    ("CONFIG_SERIAL_8250_CONSOLE", "y"),
];

/// Options that change what runs or how fast, printed for the record.
pub const NOTED_CONFIG: &[&str] = &[
    "CONFIG_BPF_JIT",
    "CONFIG_BPF_JIT_ALWAYS_ON",
    "CONFIG_DEBUG_INFO_BTF",
    "CONFIG_XDP_SOCKETS_DIAG",
    "CONFIG_BRIDGE",
    "CONFIG_IPV6",
    "CONFIG_MODULE_COMPRESS_XZ",
    "CONFIG_MODULE_COMPRESS_ZSTD",
];

impl KernelTree {
    /// Checks [`REQUIRED_CONFIG`]; returns a one-line summary of the noted options.
    pub fn check_config(&self) -> Result<String, String> {
        let mut missing = Vec::new();
        for (option, allowed) in REQUIRED_CONFIG {
            let value = self.config.get(*option).map(String::as_str).unwrap_or("n");
            if !allowed.split('|').any(|a| a == value) {
                missing.push(format!("{option}={value} (need {allowed})"));
            }
        }
        if !missing.is_empty() {
            return Err(format!("{} lacks {}", self.package, missing.join(", ")));
        }
        let noted: Vec<String> = REQUIRED_CONFIG
            .iter()
            .map(|(o, _)| *o)
            .chain(NOTED_CONFIG.iter().copied())
            .map(|o| {
                format!(
                    "{o}={}",
                    self.config.get(o).map(String::as_str).unwrap_or("n")
                )
            })
            .collect();
        Ok(noted.join(" "))
    }

    /// Module files for `wanted` and their dependencies, in load order (dependencies first).
    /// Built-in modules are left out; a wanted module that exists nowhere is an error when
    /// `required`, else skipped with a note.
    pub fn resolve_modules(&self, wanted: &[(&str, bool)]) -> Result<Vec<ModuleFile>, String> {
        let index = self.module_index()?;
        let builtin = self.builtin_modules();
        let mut order = Vec::new();
        for (name, required) in wanted {
            let name = normalize_module_name(name);
            if builtin.contains_key(&name) {
                continue;
            }
            if !index.contains_key(&name) {
                if *required {
                    return Err(format!("{} has no module {name}", self.package));
                }
                eprintln!(
                    "vm-tests: {} has no module {name}; skipping it",
                    self.package
                );
                continue;
            }
            self.visit(&name, &index, &builtin, &mut order, 0)?;
        }
        Ok(order)
    }

    fn visit(
        &self,
        name: &str,
        index: &HashMap<String, PathBuf>,
        builtin: &HashMap<String, ()>,
        order: &mut Vec<ModuleFile>,
        depth: usize,
    ) -> Result<(), String> {
        if depth > 32 {
            return Err(format!("module dependency loop at {name}"));
        }
        if builtin.contains_key(name) || order.iter().any(|m| m.name == name) {
            return Ok(());
        }
        let path = index
            .get(name)
            .ok_or_else(|| format!("{}: missing module dependency {name}", self.package))?;
        let bytes = read_module(path)?;
        for dep in module_depends(&bytes) {
            self.visit(&dep, index, builtin, order, depth + 1)?;
        }
        order.push(ModuleFile {
            name: name.to_owned(),
            contents: bytes,
        });
        Ok(())
    }

    fn module_index(&self) -> Result<HashMap<String, PathBuf>, String> {
        let mut index = HashMap::new();
        let mut stack = vec![self.modules_dir.join("kernel")];
        while let Some(dir) = stack.pop() {
            let entries = fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            for entry in entries.filter_map(Result::ok) {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else if let Some(name) = module_name_of(&path) {
                    index.insert(name, path);
                }
            }
        }
        Ok(index)
    }

    fn builtin_modules(&self) -> HashMap<String, ()> {
        fs::read_to_string(self.modules_dir.join("modules.builtin"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| module_name_of(Path::new(l)))
            .map(|n| (n, ()))
            .collect()
    }
}

/// A module ready for the guest: decompressed, because busybox `insmod` may not decompress.
#[derive(Debug)]
pub struct ModuleFile {
    pub name: String,
    pub contents: Vec<u8>,
}

/// `veth` from `.../veth.ko`, `.../veth.ko.xz`, `.../veth.ko.zst`; `-` and `_` are the same
/// character to modprobe, so names are kept with `_`.
fn module_name_of(path: &Path) -> Option<String> {
    let file = path.file_name()?.to_str()?;
    let stem = [".ko", ".ko.xz", ".ko.zst", ".ko.gz"]
        .iter()
        .find_map(|ext| file.strip_suffix(ext))?;
    Some(normalize_module_name(stem))
}

fn normalize_module_name(name: &str) -> String {
    name.replace('-', "_")
}

fn read_module(path: &Path) -> Result<Vec<u8>, String> {
    let file = path.to_string_lossy();
    let decompressor = if file.ends_with(".xz") {
        Some("xz")
    } else if file.ends_with(".zst") {
        Some("zstd")
    } else if file.ends_with(".gz") {
        Some("gzip")
    } else {
        None
    };
    match decompressor {
        None => fs::read(path).map_err(|e| format!("{file}: {e}")),
        Some(tool) => {
            let out = Command::new(tool)
                .args(["-d", "-c"])
                .arg(path)
                .output()
                .map_err(|e| format!("running {tool} on {file}: {e} (install {tool})"))?;
            if !out.status.success() {
                return Err(format!(
                    "{tool} -d {file}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            Ok(out.stdout)
        }
    }
}

/// The `depends=` entry of a module's `.modinfo` section: NUL-separated `key=value` strings.
pub fn module_depends(module: &[u8]) -> Vec<String> {
    const KEY: &[u8] = b"\0depends=";
    let Some(start) = module.windows(KEY.len()).position(|w| w == KEY) else {
        return Vec::new();
    };
    let value = &module[start + KEY.len()..];
    let end = value.iter().position(|&b| b == 0).unwrap_or(value.len());
    String::from_utf8_lossy(&value[..end])
        .split(',')
        .filter(|s| !s.is_empty())
        .map(normalize_module_name)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_images_only() {
        let s61 = Series::by_name("6.1").unwrap();
        let s612 = Series::by_name("6.12").unwrap();
        assert!(s61.is_plain_image("linux-image-6.1.0-56-amd64"));
        assert!(!s61.is_plain_image("linux-image-6.1.0-56-amd64-dbg"));
        assert!(!s61.is_plain_image("linux-image-6.1.0-56-amd64-unsigned"));
        assert!(!s61.is_plain_image("linux-image-6.1.0-56-cloud-amd64"));
        assert!(!s61.is_plain_image("linux-image-6.1.0-56-rt-amd64"));
        assert!(!s61.is_plain_image("linux-image-6.12.117+deb12-amd64"));
        assert!(s612.is_plain_image("linux-image-6.12.117+deb12-amd64"));
        assert!(!s612.is_plain_image("linux-image-6.12-amd64-signed-template"));
        assert!(!s612.is_plain_image("linux-image-6.12.117+deb12-cloud-amd64"));
    }

    #[test]
    fn newest_by_numbers() {
        let mut names = [
            "linux-image-6.1.0-9-amd64",
            "linux-image-6.1.0-56-amd64",
            "linux-image-6.1.0-47-amd64",
        ];
        names.sort_by_key(|n| version_key(n));
        assert_eq!(names.last(), Some(&"linux-image-6.1.0-56-amd64"));
        assert!(
            version_key("linux-image-6.12.117+deb12-amd64")
                > version_key("linux-image-6.12.100+deb12-amd64")
        );
    }

    #[test]
    fn modinfo_depends() {
        let blob = b"\x7fELF junk\0license=GPL\0depends=page_pool,bridge-x\0vermagic=6.1\0";
        assert_eq!(module_depends(blob), vec!["page_pool", "bridge_x"]);
        assert!(module_depends(b"\0depends=\0name=veth\0").is_empty());
        assert!(module_depends(b"nothing").is_empty());
    }

    #[test]
    fn module_names() {
        assert_eq!(
            module_name_of(Path::new("kernel/drivers/net/veth.ko.xz")).as_deref(),
            Some("veth")
        );
        assert_eq!(
            module_name_of(Path::new("a/nf-nat.ko")).as_deref(),
            Some("nf_nat")
        );
        assert_eq!(module_name_of(Path::new("a/readme.txt")), None);
    }

    #[test]
    fn config_lines() {
        let c = parse_config("# c\nCONFIG_A=y\n# CONFIG_B is not set\nCONFIG_S=\"x\"\n");
        assert_eq!(c.get("CONFIG_A").map(String::as_str), Some("y"));
        assert_eq!(c.get("CONFIG_B"), None);
        assert_eq!(c.get("CONFIG_S").map(String::as_str), Some("x"));
    }
}
