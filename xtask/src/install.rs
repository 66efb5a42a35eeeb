//! `cargo xtask install [--prefix DIR]` and `cargo xtask uninstall [--prefix DIR]`.
//!
//! Without a prefix the provider goes where the installed libfabric looks for DL providers
//! (found by asking libfabric, see `libfabric::provider_dir`), so `fi_info -p xdp` finds it
//! with no `FI_PROVIDER_PATH`; the tool and the page go under `/usr/local`, where local
//! installations belong. With `--prefix DIR` everything goes under DIR
//! (`DIR/lib/libfabric/libxdp-fi.so`, then `FI_PROVIDER_PATH=DIR/lib/libfabric`).
//!
//! Install records what it created (files, and directories that did not exist) in a
//! manifest; uninstall removes exactly that, the manifest included, so nothing is left.

use std::path::{Path, PathBuf};

use crate::libfabric;
use crate::package::{Artifacts, place_binary};

/// Where each file of an installation goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Targets {
    pub provider: PathBuf,
    pub tool: PathBuf,
    pub man_page: PathBuf,
    pub manifest: PathBuf,
}

impl Targets {
    pub fn for_prefix(prefix: Option<&Path>) -> Result<Targets, String> {
        Ok(match prefix {
            None => {
                let local = Path::new("/usr/local");
                Targets {
                    provider: libfabric::provider_dir()?.join("libxdp-fi.so"),
                    tool: local.join("bin/ofi-xdp"),
                    man_page: local.join("share/man/man7/fi_xdp.7.gz"),
                    manifest: local.join("share/ofi-xdp/installed-files"),
                }
            }
            Some(p) => Targets {
                provider: p.join("lib/libfabric/libxdp-fi.so"),
                tool: p.join("bin/ofi-xdp"),
                man_page: p.join("share/man/man7/fi_xdp.7.gz"),
                manifest: p.join("share/ofi-xdp/installed-files"),
            },
        })
    }

    fn files(&self) -> [&Path; 4] {
        [&self.provider, &self.tool, &self.man_page, &self.manifest]
    }
}

/// Directories missing on the way to `files`, outermost first.
fn missing_dirs(files: &[&Path]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for f in files {
        let mut chain: Vec<PathBuf> = f
            .ancestors()
            .skip(1)
            .take_while(|d| !d.as_os_str().is_empty() && !d.exists())
            .map(Path::to_path_buf)
            .collect();
        chain.reverse();
        for d in chain {
            if !out.contains(&d) {
                out.push(d);
            }
        }
    }
    out
}

/// Installs `artifacts` (see the module documentation).
pub fn install(artifacts: &Artifacts, prefix: Option<&Path>) -> Result<Targets, String> {
    artifacts.check()?;
    let t = Targets::for_prefix(prefix)?;
    for f in t.files() {
        if let Some(package) = libfabric::owning_package(f) {
            return Err(format!(
                "{} belongs to the Debian package {package}: remove it first \
                 (dpkg --purge {package}) or install with --prefix",
                f.display()
            ));
        }
    }
    // Installing over an earlier installation keeps the directories it created.
    let mut created: Vec<PathBuf> = std::fs::read_to_string(&t.manifest)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("dir "))
        .map(PathBuf::from)
        .collect();
    for d in missing_dirs(&t.files()) {
        if !created.contains(&d) {
            created.push(d);
        }
    }
    let page = std::env::temp_dir().join(format!("fi_xdp.7.{}", std::process::id()));
    crate::man::render(&artifacts.man_source, &page)?;
    if let Some(dir) = t.man_page.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let gz = crate::man::gzip(&page, &t.man_page);
    let _ = std::fs::remove_file(&page);
    gz?;
    place_binary(&artifacts.provider, &t.provider, 0o644)?;
    place_binary(&artifacts.tool, &t.tool, 0o755)?;
    let mut manifest = String::new();
    for d in &created {
        manifest.push_str(&format!("dir {}\n", d.display()));
    }
    for f in [&t.provider, &t.tool, &t.man_page] {
        manifest.push_str(&format!("file {}\n", f.display()));
    }
    if let Some(dir) = t.manifest.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    std::fs::write(&t.manifest, manifest)
        .map_err(|e| format!("cannot write {}: {e}", t.manifest.display()))?;
    Ok(t)
}

/// Removes what [`install`] recorded in the manifest under `prefix`, then the manifest and
/// the directories install created (when empty).
pub fn uninstall(prefix: Option<&Path>) -> Result<Vec<PathBuf>, String> {
    let t = Targets::for_prefix(prefix)?;
    let text = std::fs::read_to_string(&t.manifest).map_err(|e| {
        format!(
            "no installation by `cargo xtask install` here ({}: {e})",
            t.manifest.display()
        )
    })?;
    let mut removed = Vec::new();
    let mut dirs = Vec::new();
    for line in text.lines() {
        match line.split_once(' ') {
            Some(("file", path)) => {
                let path = PathBuf::from(path);
                match std::fs::remove_file(&path) {
                    Ok(()) => removed.push(path),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(format!("cannot remove {}: {e}", path.display())),
                }
            }
            Some(("dir", path)) => dirs.push(PathBuf::from(path)),
            _ => {
                return Err(format!(
                    "{}: unexpected line {line:?}",
                    t.manifest.display()
                ));
            }
        }
    }
    std::fs::remove_file(&t.manifest)
        .map_err(|e| format!("cannot remove {}: {e}", t.manifest.display()))?;
    removed.push(t.manifest.clone());
    // Innermost first; a directory something else has since put files in stays.
    for d in dirs.iter().rev() {
        if std::fs::remove_dir(d).is_ok() {
            removed.push(d.clone());
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_layout() {
        let t = Targets::for_prefix(Some(Path::new("/opt/x"))).unwrap();
        assert_eq!(
            t.provider,
            PathBuf::from("/opt/x/lib/libfabric/libxdp-fi.so")
        );
        assert_eq!(
            t.man_page,
            PathBuf::from("/opt/x/share/man/man7/fi_xdp.7.gz")
        );
    }

    #[test]
    fn missing_dirs_are_listed_outermost_first_once() {
        let base = std::env::temp_dir().join(format!("xtask-md-{}", std::process::id()));
        let a = base.join("a/b/f1");
        let b = base.join("a/c/f2");
        let dirs = missing_dirs(&[&a, &b]);
        assert_eq!(dirs[0], base);
        assert_eq!(dirs.len(), 4, "{dirs:?}");
    }
}
