//! Test programs in C that the benchmarks compile when they start, against the installed
//! libfabric, into a directory of their own that goes when the benchmark ends (also when it
//! fails half-way).

use std::path::PathBuf;
use std::process::Command;

/// A compiled program: run `exe` while this lives.
pub struct CProgram {
    dir: PathBuf,
    pub exe: PathBuf,
}

impl CProgram {
    /// Compiles `source` (a whole C file) as `name` with `cc -O2 -Wall … -lfabric`.
    pub fn build(name: &str, source: &str) -> Result<CProgram, String> {
        let dir = std::env::temp_dir().join(format!("ofi-xdp-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let prog = CProgram {
            exe: dir.join(name),
            dir,
        };
        let src = prog.dir.join(format!("{name}.c"));
        std::fs::write(&src, source).map_err(|e| format!("{}: {e}", src.display()))?;
        let out = Command::new("cc")
            .args(["-O2", "-Wall", "-o"])
            .arg(&prog.exe)
            .arg(&src)
            .arg("-lfabric")
            .output()
            .map_err(|e| format!("cannot run cc (package build-essential): {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "compiling {name}.c failed (package libfabric-dev?):\n{}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(prog)
    }
}

impl Drop for CProgram {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
