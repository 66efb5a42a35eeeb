//! `cargo xtask package`: a Debian package built with `dpkg-deb` (no other tool needed) that
//! installs the provider where the installed libfabric looks for DL providers, the
//! `ofi-xdp` tool and `fi_xdp(7)`, and depends on the libfabric release it was built against.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::libfabric;
use crate::steps::target_dir;

/// The package's name.
pub const PACKAGE: &str = "ofi-xdp";

/// What goes into an installation: the built provider and tool, and the page's source.
#[derive(Debug, Clone)]
pub struct Artifacts {
    /// `libxdp_fi.so` as cargo built it.
    pub provider: PathBuf,
    /// The `ofi-xdp` binary.
    pub tool: PathBuf,
    /// `docs/man/fi_xdp.7.md`.
    pub man_source: PathBuf,
}

impl Artifacts {
    /// What `cargo xtask build` leaves in the release target directory.
    pub fn built() -> Artifacts {
        let release = target_dir().join("release");
        Artifacts {
            provider: release.join("libxdp_fi.so"),
            tool: release.join("ofi-xdp"),
            man_source: crate::man::source(),
        }
    }

    /// Fails with what to run when something is missing.
    pub fn check(&self) -> Result<(), String> {
        for p in [&self.provider, &self.tool, &self.man_source] {
            if !p.is_file() {
                return Err(format!(
                    "{} is missing: run `cargo xtask build`",
                    p.display()
                ));
            }
        }
        Ok(())
    }
}

/// Where each file goes, relative to the root of an installation.
pub struct Layout {
    pub provider: PathBuf,
    pub tool: PathBuf,
    pub man_page: PathBuf,
}

impl Layout {
    /// The package's layout: the provider in libfabric's provider directory, the rest under
    /// `/usr` (paths without the leading `/`).
    pub fn debian(provider_dir: &Path) -> Layout {
        Layout {
            provider: provider_dir
                .strip_prefix("/")
                .unwrap_or(provider_dir)
                .join("libxdp-fi.so"),
            tool: PathBuf::from("usr/bin/ofi-xdp"),
            man_page: PathBuf::from("usr/share/man/man7/fi_xdp.7.gz"),
        }
    }
}

fn io_err(what: &str, path: &Path) -> impl FnOnce(std::io::Error) -> String {
    let text = format!("{what} {}", path.display());
    move |e| format!("{text}: {e}")
}

/// Copies `from` to `to` with `mode`, creating `to`'s directory. The copy
/// is made beside `to` and renamed over it: copying onto an installed
/// library would rewrite the pages every process running with it has
/// mapped, and they die of SIGBUS.
pub fn place(from: &Path, to: &Path, mode: u32) -> Result<(), String> {
    replace_with(from, to, mode, |_| Ok(()))
}

/// [`place`] for a binary, without its debugging sections, as Debian installs binaries
/// (`strip --strip-debug`: symbol names stay, so backtraces still name functions).
pub fn place_binary(from: &Path, to: &Path, mode: u32) -> Result<(), String> {
    replace_with(from, to, mode, |fresh| {
        let status = Command::new("strip")
            .args(["--strip-debug", "--remove-section=.comment"])
            .arg(fresh)
            .status()
            .map_err(|e| format!("cannot run strip (binutils): {e}"))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("strip {} failed ({status})", fresh.display()))
        }
    })
}

/// Copies `from` to a hidden file beside `to`, gives it `mode`, lets
/// `finish` work on it, then renames it over `to` (atomic: a process
/// that has the old file open or mapped keeps the old file). The hidden
/// file is removed on any failure.
fn replace_with(
    from: &Path,
    to: &Path,
    mode: u32,
    finish: impl FnOnce(&Path) -> Result<(), String>,
) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = to.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io_err("cannot create", dir))?;
    let name = to
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let fresh = dir.join(format!(".{name}.{}", std::process::id()));
    let r = std::fs::copy(from, &fresh)
        .map_err(io_err("cannot copy to", &fresh))
        .and_then(|_| {
            std::fs::set_permissions(&fresh, std::fs::Permissions::from_mode(mode))
                .map_err(io_err("cannot set the mode of", &fresh))
        })
        .and_then(|()| finish(&fresh))
        .and_then(|()| std::fs::rename(&fresh, to).map_err(io_err("cannot rename onto", to)));
    if r.is_err() {
        let _ = std::fs::remove_file(&fresh);
    }
    r
}

/// The shared libraries `elf` names itself (`DT_NEEDED`, from `readelf -d`).
fn needed(elf: &Path) -> Result<Vec<String>, String> {
    let out = Command::new("readelf")
        .arg("-d")
        .arg(elf)
        .output()
        .map_err(|e| format!("cannot run readelf (binutils): {e}"))?;
    if !out.status.success() {
        return Err(format!("readelf -d {} failed", elf.display()));
    }
    // ` 0x0000000000000001 (NEEDED)  Shared library: [libc.so.6]`
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| Some(l.split_once('[')?.1.split_once(']')?.0.to_owned()))
        .collect())
}

/// Debian packages providing the libraries `elf` needs directly, each with the version to
/// require: for libfabric the release built against ([`libfabric_release`]), for the others
/// the upstream version installed. Paths come from `ldd` (the dynamic loader's own
/// resolution).
fn library_dependencies(elf: &Path) -> Result<Vec<(String, String)>, String> {
    let sonames = needed(elf)?;
    let out = Command::new("ldd")
        .arg(elf)
        .output()
        .map_err(|e| format!("cannot run ldd: {e}"))?;
    if !out.status.success() {
        return Err(format!("ldd {} failed", elf.display()));
    }
    let mut deps = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        // `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)` or `/lib64/ld-linux… (0x…)`
        let (name, path) = match line.split_once("=>") {
            Some((left, right)) => (left.trim(), right.split_whitespace().next()),
            None => {
                let path = line
                    .split_whitespace()
                    .next()
                    .filter(|p| p.starts_with('/'));
                (path.and_then(|p| p.rsplit('/').next()).unwrap_or(""), path)
            }
        };
        let Some(path) = path.filter(|p| p.starts_with('/')) else {
            continue;
        };
        if !sonames.iter().any(|s| s == name) {
            continue; // needed by a library we need, not by us
        }
        let package = libfabric::owning_package(Path::new(path)).ok_or_else(|| {
            format!(
                "no Debian package owns {path}, which {} needs",
                elf.display()
            )
        })?;
        let version = libfabric::package_version(&package)?;
        let version = if package.starts_with("libfabric") {
            libfabric_release(&version).to_owned()
        } else {
            upstream(&version).to_owned()
        };
        if !deps.iter().any(|(p, _)| *p == package) {
            deps.push((package, version));
        }
    }
    Ok(deps)
}

/// The libfabric release of a Debian version of libfabric1, `major.minor`: `1.17` on Debian
/// 12, `2.1` on Debian 13. The provider runs on that release's core and newer ones (it states
/// the core's own API version, up to the newest it follows), so it requires that release, not
/// the package revision it happened to be built with.
pub fn libfabric_release(version: &str) -> &str {
    let upstream = upstream(version);
    match upstream.match_indices('.').nth(1) {
        Some((second_dot, _)) => &upstream[..second_dot],
        None => upstream,
    }
}

/// The upstream part of a Debian version: no epoch, no revision.
fn upstream(version: &str) -> &str {
    let no_epoch = version.split_once(':').map_or(version, |(_, v)| v);
    no_epoch.rsplit_once('-').map_or(no_epoch, |(v, _)| v)
}

/// The `Depends:` field for the packaged binaries.
pub fn depends(artifacts: &Artifacts) -> Result<String, String> {
    let mut all: Vec<(String, String)> = Vec::new();
    for elf in [&artifacts.provider, &artifacts.tool] {
        for (package, version) in library_dependencies(elf)? {
            if !all.iter().any(|(p, _)| *p == package) {
                all.push((package, version));
            }
        }
    }
    if !all.iter().any(|(p, _)| p.starts_with("libfabric")) {
        return Err(format!(
            "{} does not link libfabric: not the provider",
            artifacts.provider.display()
        ));
    }
    all.sort();
    Ok(all
        .iter()
        .map(|(p, v)| format!("{p} (>= {v})"))
        .collect::<Vec<_>>()
        .join(", "))
}

/// Builds `ofi-xdp_<version>_<arch>.deb` in `out_dir` and returns its path.
pub fn build_deb(artifacts: &Artifacts, out_dir: &Path) -> Result<PathBuf, String> {
    artifacts.check()?;
    let arch = libfabric::architecture()?;
    let version = env!("CARGO_PKG_VERSION");
    let layout = Layout::debian(&libfabric::provider_dir()?);
    let root = out_dir.join(format!("{PACKAGE}-root"));
    if root.exists() {
        std::fs::remove_dir_all(&root).map_err(io_err("cannot empty", &root))?;
    }
    place_binary(&artifacts.provider, &root.join(&layout.provider), 0o644)?;
    place_binary(&artifacts.tool, &root.join(&layout.tool), 0o755)?;
    let page = out_dir.join("fi_xdp.7");
    crate::man::render(&artifacts.man_source, &page)?;
    let man_gz = root.join(&layout.man_page);
    if let Some(dir) = man_gz.parent() {
        std::fs::create_dir_all(dir).map_err(io_err("cannot create", dir))?;
    }
    let gz = crate::man::gzip(&page, &man_gz);
    let _ = std::fs::remove_file(&page);
    gz?;
    let doc = root.join(format!("usr/share/doc/{PACKAGE}/copyright"));
    if let Some(dir) = doc.parent() {
        std::fs::create_dir_all(dir).map_err(io_err("cannot create", dir))?;
    }
    std::fs::write(&doc, copyright()).map_err(io_err("cannot write", &doc))?;

    let installed_kib = dir_size(&root).div_ceil(1024);
    let control = format!(
        "Package: {PACKAGE}\n\
         Version: {version}\n\
         Architecture: {arch}\n\
         Maintainer: ofi-xdp developers <ofi-xdp@example.invalid>\n\
         Installed-Size: {installed_kib}\n\
         Depends: {depends}\n\
         Recommends: libfabric-bin\n\
         Section: net\n\
         Priority: optional\n\
         Description: libfabric provider for kernel-bypass messaging over AF_XDP\n \
         The xdp provider gives MPI and other libfabric applications reliable,\n \
         tagged messaging over ordinary Ethernet NICs through Linux AF_XDP sockets,\n \
         without RDMA hardware. Installed into libfabric's provider directory, it\n \
         is found by fi_info, fi_pingpong and Open MPI without FI_PROVIDER_PATH.\n \
         Includes fi_xdp(7) and the ofi-xdp status and cleanup tool.\n",
        depends = depends(artifacts)?,
    );
    let debian = root.join("DEBIAN");
    std::fs::create_dir_all(&debian).map_err(io_err("cannot create", &debian))?;
    std::fs::write(debian.join("control"), control).map_err(io_err("cannot write", &debian))?;
    std::fs::write(debian.join("md5sums"), md5sums(&root)?)
        .map_err(io_err("cannot write", &debian))?;

    let deb = out_dir.join(format!("{PACKAGE}_{version}_{arch}.deb"));
    let status = Command::new("dpkg-deb")
        .args(["--root-owner-group", "-Zxz", "--build"])
        .arg(&root)
        .arg(&deb)
        .status()
        .map_err(|e| format!("cannot run dpkg-deb: {e}"))?;
    if !status.success() {
        return Err(format!("dpkg-deb --build failed ({status})"));
    }
    std::fs::remove_dir_all(&root).map_err(io_err("cannot remove", &root))?;
    Ok(deb)
}

fn copyright() -> &'static str {
    "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\
     Upstream-Name: ofi-xdp\n\n\
     Files: *\n\
     Copyright: the ofi-xdp developers\n\
     License: MIT or Apache-2.0\n \
     The ofi-xdp sources are dual-licensed under the MIT license and the\n \
     Apache License, Version 2.0 (see /usr/share/common-licenses/Apache-2.0).\n"
}

fn files_under(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn dir_size(root: &Path) -> u64 {
    files_under(root)
        .iter()
        .filter_map(|p| p.metadata().ok())
        .map(|m| m.len())
        .sum()
}

/// `DEBIAN/md5sums`: `md5sum` of every file, with paths relative to the root.
fn md5sums(root: &Path) -> Result<String, String> {
    let mut text = String::new();
    for path in files_under(root) {
        let out = Command::new("md5sum")
            .arg(&path)
            .output()
            .map_err(|e| format!("cannot run md5sum: {e}"))?;
        let sum = String::from_utf8_lossy(&out.stdout);
        let sum = sum.split_whitespace().next().unwrap_or("");
        let rel = path.strip_prefix(root).unwrap_or(&path);
        text.push_str(&format!("{sum}  {}\n", rel.display()));
    }
    Ok(text)
}

/// `cargo xtask package`: build, then the package into `target/debian/`.
pub fn package() -> Result<PathBuf, String> {
    crate::progress::step("build the provider and the tools", crate::steps::build)?;
    let out_dir = target_dir().join("debian");
    std::fs::create_dir_all(&out_dir).map_err(io_err("cannot create", &out_dir))?;
    let deb = crate::progress::step("build the Debian package", || {
        build_deb(&Artifacts::built(), &out_dir)
    })?;
    eprintln!(
        "xtask: {} (install: dpkg -i {0}; remove: dpkg --purge {PACKAGE})",
        deb.display()
    );
    Ok(deb)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_versions() {
        assert_eq!(upstream("2.36-9+deb12u14"), "2.36");
        assert_eq!(upstream("1:2.3-1"), "2.3");
        assert_eq!(upstream("12.2.0-14+deb12u1"), "12.2.0");
        assert_eq!(upstream("5"), "5");
    }

    #[test]
    fn libfabric_releases() {
        assert_eq!(libfabric_release("1.17.0-3"), "1.17");
        assert_eq!(libfabric_release("2.1.0-1.1"), "2.1");
        assert_eq!(libfabric_release("1:2.6.0-1"), "2.6");
        assert_eq!(libfabric_release("2.1"), "2.1");
    }

    #[test]
    fn debian_layout_uses_the_provider_directory() {
        let l = Layout::debian(Path::new("/usr/lib/x86_64-linux-gnu/libfabric"));
        assert_eq!(
            l.provider,
            PathBuf::from("usr/lib/x86_64-linux-gnu/libfabric/libxdp-fi.so")
        );
    }
}
