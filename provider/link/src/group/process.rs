//! Other processes of the group: whether a member is still alive (its pid
//! and its start time, so a reused pid is not taken for it), and taking a
//! member's file descriptors with `pidfd_open(2)` + `pidfd_getfd(2)` (Linux
//! 5.6+; the caller needs ptrace rights over the member:
//! `PTRACE_MODE_ATTACH_REALCREDS`, i.e. the same user, and under Yama
//! `ptrace_scope` ≥ 1 also CAP_SYS_PTRACE).

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// This process's id.
pub(crate) fn own_pid() -> i32 {
    // SAFETY: getpid cannot fail.
    unsafe { libc::getpid() }
}

/// When `pid` started (field 22 of /proc/PID/stat, in clock ticks since
/// boot), `None` when there is no such process.
pub(crate) fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces:
    // count from the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the process `pid` that started at `started` still runs (a
/// zombie counts as gone: its descriptors are closed).
pub(crate) fn alive(pid: i32, started: u64) -> bool {
    if pid <= 0 {
        return false;
    }
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
        return false;
    };
    let mut fields = rest.split_whitespace();
    let state = fields.next();
    let start = fields.nth(18).and_then(|s| s.parse::<u64>().ok());
    state != Some("Z") && state != Some("X") && start == Some(started)
}

/// A duplicate of descriptor `fd` of process `pid` (our own: `dup`).
pub(crate) fn take_fd(pid: i32, fd: RawFd) -> io::Result<OwnedFd> {
    if pid == own_pid() {
        // SAFETY: fcntl(F_DUPFD_CLOEXEC) on a descriptor number; the result
        // is checked and owned.
        let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
        if dup < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor we own.
        return Ok(unsafe { OwnedFd::from_raw_fd(dup) });
    }
    // SAFETY: plain syscalls with integer arguments; results checked.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if pidfd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pidfd_open returned a new descriptor we own.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) };
    use std::os::fd::AsRawFd as _;
    // SAFETY: as above.
    let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pidfd_getfd returned a new descriptor (close-on-exec) we own.
    Ok(unsafe { OwnedFd::from_raw_fd(got as RawFd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn we_are_alive_and_a_reused_pid_is_not_us() {
        let me = own_pid();
        let t = start_time(me).unwrap();
        assert!(alive(me, t));
        assert!(!alive(me, t + 1));
        assert!(!alive(0, t));
        assert!(start_time(i32::MAX).is_none());
    }

    #[test]
    fn our_own_descriptor_is_duplicated() {
        use std::os::fd::AsRawFd as _;
        let f = std::fs::File::open("/proc/self/stat").unwrap();
        let d = take_fd(own_pid(), f.as_raw_fd()).unwrap();
        assert_ne!(d.as_raw_fd(), f.as_raw_fd());
    }
}
