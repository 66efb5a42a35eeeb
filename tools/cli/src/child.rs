//! Child processes the tools start: never left running behind us.

use std::process::Child;

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
