//! Facts about this host the status and cleanup commands print: network
//! namespaces, process names, wall-clock times.

use std::os::fd::AsRawFd;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Moves this (still single-threaded) process into the named network
/// namespace, as `ip netns exec NAME` would (`/run/netns/NAME`, ip-netns(8)).
pub fn enter_netns(name: &str) -> Result<(), String> {
    if name.contains('/') || name.is_empty() {
        return Err(format!("--netns {name:?}: not a namespace name"));
    }
    let path = format!("/run/netns/{name}");
    let file = std::fs::File::open(&path).map_err(|e| format!("--netns {name}: {path}: {e}"))?;
    // SAFETY: setns(2) on a namespace fd we hold open.
    if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(format!(
            "--netns {name}: setns: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// `pid (command)`, the command from `/proc/<pid>/comm`.
pub fn describe_pid(pid: u32) -> String {
    match comm(pid) {
        Some(comm) => format!("pid {pid} ({comm})"),
        None => format!("pid {pid}"),
    }
}

/// The command of process `pid` (`/proc/<pid>/comm`), if it runs.
pub fn comm(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|c| c.trim().to_owned())
}

/// `YYYY-MM-DD HH:MM:SS UTC` (civil date from days since the epoch, after
/// H. Hinnant's `civil_from_days`).
pub fn utc(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// How long ago `t` was, to the second: `3h 02m 05s ago`.
pub fn ago(t: SystemTime) -> String {
    let d = SystemTime::now()
        .duration_since(t)
        .unwrap_or(Duration::ZERO)
        .as_secs();
    match d {
        0..60 => format!("{d}s ago"),
        60..3600 => format!("{}m {:02}s ago", d / 60, d % 60),
        _ => format!("{}h {:02}m {:02}s ago", d / 3600, d % 3600 / 60, d % 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(UNIX_EPOCH), "1970-01-01 00:00:00 UTC");
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400 + 3_661); // 2000-02-29
        assert_eq!(utc(t), "2000-02-29 01:01:01 UTC");
        let t = UNIX_EPOCH + Duration::from_secs(1_767_225_599);
        assert_eq!(utc(t), "2025-12-31 23:59:59 UTC");
    }

    #[test]
    fn ago_scales() {
        let now = SystemTime::now();
        assert!(ago(now).ends_with("s ago"));
        assert!(ago(now - Duration::from_secs(3725)).starts_with("1h 02m"));
    }

    #[test]
    fn netns_names_are_checked() {
        assert!(enter_netns("../x").is_err());
        assert!(enter_netns("").is_err());
    }
}
