//! Installs the Debian packages listed in `xtask/apt-packages.txt` when they are missing.
//!
//! CI starts on a fresh machine with only the Rust toolchain, so nothing may rely on a package
//! installed by hand: every system package the project uses is listed in that file.

use std::path::Path;
use std::process::Command;

use crate::steps::{project_root, run};

/// The file listing one Debian package per line (`#` starts a comment).
const PACKAGE_LIST: &str = "xtask/apt-packages.txt";

/// Installs whatever in the package list is not installed yet; does nothing when all are.
pub fn ensure_installed() -> Result<(), String> {
    let wanted = read_package_list(&project_root().join(PACKAGE_LIST))?;
    let missing: Vec<&str> = wanted
        .iter()
        .map(String::as_str)
        .filter(|name| !is_installed(name))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    eprintln!("xtask: installing missing packages: {}", missing.join(" "));
    let sudo = if is_root() { None } else { Some("sudo") };
    let apt = |args: &[&str]| {
        let mut cmd = match sudo {
            Some(sudo) => {
                let mut c = Command::new(sudo);
                c.arg("apt-get");
                c
            }
            None => Command::new("apt-get"),
        };
        cmd.args(args).env("DEBIAN_FRONTEND", "noninteractive");
        cmd
    };
    run(apt(&["update", "-q"]))?;
    let mut install = apt(&["install", "-y", "-q"]);
    install.args(&missing);
    run(install)
}

fn read_package_list(path: &Path) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(text
        .lines()
        .map(|line| line.split('#').next().unwrap_or("").trim())
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect())
}

/// True when dpkg reports the package as fully installed; `install ok not-installed` and
/// half-configured states count as missing.
fn is_installed(package: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", package])
        .output()
        .map(|out| out.stdout == b"install ok installed")
        .unwrap_or(false)
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { geteuid() == 0 }
}

unsafe extern "C" {
    fn geteuid() -> u32;
}
