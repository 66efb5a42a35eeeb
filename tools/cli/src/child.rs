//! Child processes the tools start: never left running behind us.

use std::io::Read;
use std::process::Child;
use std::time::{Duration, Instant};

/// Ends a child we started (by its PID) if it is still running, and reaps it, when dropped —
/// also when the tool fails half-way.
pub struct ChildGuard(pub Child);

impl ChildGuard {
    /// True once the child has exited (or can no longer be waited for).
    pub fn exited(&mut self) -> bool {
        !matches!(self.0.try_wait(), Ok(None))
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// What a finished child printed, and whether it exited with success.
pub struct Output {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Waits for the child until `deadline`, then kills it; collects its output. `what` names
/// the program in errors.
pub fn wait_output(mut guard: ChildGuard, deadline: Instant, what: &str) -> Result<Output, String> {
    let child = &mut guard.0;
    // Read the pipes on threads so a chatty child cannot block on a full pipe.
    let stdout = child.stdout.take().map(reader);
    let stderr = child.stderr.take().map(reader);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("waiting for {what}: {e}")),
        }
    };
    let collect = |h: Option<std::thread::JoinHandle<String>>| {
        h.and_then(|h| h.join().ok()).unwrap_or_default()
    };
    let (stdout, stderr) = (collect(stdout), collect(stderr));
    match status {
        Some(status) => Ok(Output {
            success: status.success(),
            stdout,
            stderr,
        }),
        None => Err(format!(
            "{what} did not finish in time; killed\n{stdout}{stderr}"
        )),
    }
}

fn reader(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}
