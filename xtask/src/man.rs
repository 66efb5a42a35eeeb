//! The provider's manual page, `fi_xdp(7)`: Markdown in `docs/man/`, converted to troff with
//! pandoc as libfabric converts its own pages (`pandoc -s -t man`).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::steps::project_root;

/// The page's Markdown source.
pub fn source() -> PathBuf {
    project_root().join("docs/man/fi_xdp.7.md")
}

/// Converts `source` to a troff page at `out`, stamped with the date of the source's last
/// commit (so the same source gives the same page) and the project's version.
pub fn render(source: &Path, out: &Path) -> Result<(), String> {
    let mut cmd = Command::new("pandoc");
    cmd.args(["--standalone", "--from=markdown", "--to=man"])
        .arg(format!(
            "--metadata=footer:ofi-xdp {}",
            env!("CARGO_PKG_VERSION")
        ));
    if let Some(date) = last_commit_date(source) {
        cmd.arg(format!("--metadata=date:{date}"));
    }
    cmd.arg(source).arg("-o").arg(out);
    let result = cmd
        .output()
        .map_err(|e| format!("cannot run pandoc (run `cargo xtask deps`): {e}"))?;
    if !result.status.success() {
        return Err(format!(
            "pandoc failed on {}: {}",
            source.display(),
            String::from_utf8_lossy(&result.stderr)
        ));
    }
    Ok(())
}

/// Compresses `page` into `out` as Debian ships man pages (`gzip -9n`: no name or time
/// stamp, so the package is reproducible).
pub fn gzip(page: &Path, out: &Path) -> Result<(), String> {
    let file =
        std::fs::File::create(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let status = Command::new("gzip")
        .args(["-9n", "-c"])
        .arg(page)
        .stdout(file)
        .status()
        .map_err(|e| format!("cannot run gzip: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("gzip {} failed ({status})", page.display()))
    }
}

fn last_commit_date(path: &Path) -> Option<String> {
    let out = Command::new("git")
        .args(["log", "-1", "--format=%cs", "--"])
        .arg(path)
        .current_dir(project_root())
        .output()
        .ok()?;
    let date = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && !date.is_empty()).then_some(date)
}

/// The names of the `FI_XDP_*` variables the page's RUNTIME PARAMETERS section documents
/// (each as a `*FI_XDP_…*` definition term), in order.
pub fn documented_parameters(markdown: &str) -> Vec<String> {
    markdown
        .lines()
        .skip_while(|l| l.trim() != "# RUNTIME PARAMETERS")
        .skip(1)
        .take_while(|l| !l.starts_with("# "))
        .filter_map(|l| l.strip_prefix("*FI_XDP_"))
        .filter_map(|rest| rest.strip_suffix('*'))
        .map(|name| format!("FI_XDP_{name}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_definition_terms_of_its_section_only() {
        let md = "# OVERVIEW\n*FI_XDP_NOT*\n: no\n# RUNTIME PARAMETERS\n\ntext *FI_XDP_X* inline\n\
                  *FI_XDP_IFACE*\n: one\n\n*FI_XDP_RING_SIZE*\n: two\n# PERFORMANCE\n*FI_XDP_NO*\n";
        assert_eq!(
            documented_parameters(md),
            ["FI_XDP_IFACE", "FI_XDP_RING_SIZE"]
        );
    }
}
