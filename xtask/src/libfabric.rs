//! Facts about the libfabric installed on this machine, read from libfabric itself: where it
//! looks for DL providers by default, and which Debian package (and version) provides it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The directory the installed libfabric searches for `lib<name>-fi.so` providers when
/// `FI_PROVIDER_PATH` is not set. libfabric states the default it was built with (its
/// `PROVDLDIR`) in the help of its `provider_path` parameter, which `fi_info -e` prints:
/// `# FI_PROVIDER_PATH: String` then `… (default: /usr/lib/x86_64-linux-gnu/libfabric)`.
pub fn provider_dir() -> Result<PathBuf, String> {
    let out = Command::new("fi_info")
        .arg("-e")
        .env_remove("FI_PROVIDER_PATH")
        .env_remove("FI_PROVIDER")
        .output()
        .map_err(|e| format!("cannot run fi_info (package libfabric-bin): {e}"))?;
    parse_provider_dir(&String::from_utf8_lossy(&out.stdout)).ok_or_else(|| {
        "fi_info -e does not state the default of FI_PROVIDER_PATH: cannot tell where this \
         libfabric looks for providers (use --prefix and FI_PROVIDER_PATH)"
            .to_owned()
    })
}

fn parse_provider_dir(help: &str) -> Option<PathBuf> {
    let mut lines = help
        .lines()
        .skip_while(|l| !l.starts_with("# FI_PROVIDER_PATH:"));
    lines.next()?;
    let description = lines.next()?;
    let default = description.rsplit_once("(default: ")?.1.strip_suffix(')')?;
    let dir = PathBuf::from(default.trim());
    dir.is_absolute().then_some(dir)
}

/// The Debian package owning `path` (`dpkg -S`), trying the path as given, its canonical
/// form and its other spelling across the merged `/usr` (`/lib/…` and `/usr/lib/…`).
pub fn owning_package(path: &Path) -> Option<String> {
    let mut candidates = vec![path.to_path_buf()];
    if let Ok(real) = path.canonicalize() {
        candidates.push(real);
    }
    for p in candidates.clone() {
        let text = p.display().to_string();
        match text.strip_prefix("/usr") {
            Some(rest) => candidates.push(PathBuf::from(rest)),
            None => candidates.push(PathBuf::from(format!("/usr{text}"))),
        }
    }
    candidates.iter().find_map(|p| {
        let out = Command::new("dpkg").arg("-S").arg(p).output().ok()?;
        if !out.status.success() {
            return None;
        }
        // `libfabric1:amd64: /usr/lib/x86_64-linux-gnu/libfabric.so.1`
        let line = String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()?
            .to_owned();
        let (owner, _) = line.split_once(": ")?;
        let first = owner.split(',').next()?.trim();
        Some(first.split(':').next()?.to_owned())
    })
}

/// The installed version of Debian package `package` (`dpkg-query -W`).
pub fn package_version(package: &str) -> Result<String, String> {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f=${Version}", package])
        .output()
        .map_err(|e| format!("cannot run dpkg-query: {e}"))?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if out.status.success() && !version.is_empty() {
        Ok(version)
    } else {
        Err(format!("package {package} is not installed"))
    }
}

/// This machine's Debian architecture (`dpkg --print-architecture`).
pub fn architecture() -> Result<String, String> {
    let out = Command::new("dpkg")
        .arg("--print-architecture")
        .output()
        .map_err(|e| format!("cannot run dpkg: {e}"))?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_default_from_the_parameter_help() {
        let help = "# FI_PROVIDER: String\n# x\n\n# FI_PROVIDER_PATH: String\n\
                    # Search for providers in specific path. (default: /usr/lib/x86_64-linux-gnu/libfabric)\n";
        assert_eq!(
            parse_provider_dir(help),
            Some(PathBuf::from("/usr/lib/x86_64-linux-gnu/libfabric"))
        );
        assert_eq!(
            parse_provider_dir("# FI_PROVIDER_PATH: String\n# no default\n"),
            None
        );
        assert_eq!(parse_provider_dir(""), None);
    }
}
