//! Tests that cannot run here say so: [`skip`] records the test and the
//! reason, and the test returns.
//!
//! libtest has no run-time skip (`#[ignore]` is decided at compile time), so
//! a test whose prerequisite is missing (a kernel feature, NICs, an MPICH
//! build) returns early and libtest counts it as passed. [`skip`] makes that
//! visible twice: a `SKIPPED <test>: <reason>` line written straight to
//! stderr (not through libtest's output capture, so it shows in every run,
//! the VM guest's console included), and a `<test>\t<reason>` line appended
//! to the file named by [`SKIP_LOG_ENV`] when it is set, from which `cargo
//! xtask test` prints how many tests were skipped and why.

use std::fmt::Display;
use std::io::Write as _;
use std::path::Path;

/// Names the file [`skip`] appends its records to (set by `cargo xtask test`).
pub const SKIP_LOG_ENV: &str = "OFI_XDP_SKIP_LOG";

/// What starts the stderr line of a skipped test (the VM suite looks for it).
pub const SKIPPED: &str = "SKIPPED ";

/// Records that the calling test is skipped, and why. Call it from the
/// test's own thread (libtest names it after the test), then return.
pub fn skip(reason: impl Display) {
    let log = std::env::var_os(SKIP_LOG_ENV);
    skip_to(
        &mut std::io::stderr(),
        log.as_deref().map(Path::new),
        reason,
    );
}

/// [`skip`], its line to `out` (stderr; the helper's own test keeps it, or
/// the VM suite, which collects those lines, would list a skip that is none),
/// recording to `log` if given.
fn skip_to(out: &mut impl std::io::Write, log: Option<&Path>, reason: impl Display) {
    let test = current_test();
    let reason = reason.to_string().replace(['\n', '\t'], " ");
    // One write per line: lines of tests running at once do not interleave.
    let line = format!("{SKIPPED}{test}: {reason}\n");
    let _ = out.write_all(line.as_bytes());
    if let Some(log) = log {
        let record = format!("{test}\t{reason}\n");
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .and_then(|mut f| f.write_all(record.as_bytes()));
        if let Err(e) = appended {
            let _ = writeln!(
                std::io::stderr(),
                "cannot record the skip in {}: {e}",
                log.display()
            );
        }
    }
}

/// `<test binary>::<test>`: the executable's name without cargo's hash, and
/// the thread's name (libtest runs each test on a thread named after it).
fn current_test() -> String {
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .map(|stem| match stem.rsplit_once('-') {
            Some((name, hash)) if hash.chars().all(|c| c.is_ascii_hexdigit()) => name.to_owned(),
            _ => stem,
        })
        .unwrap_or_default();
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("?");
    format!("{binary}::{test}")
}

/// The records in a skip log: (test, reason) pairs, in the order written.
pub fn read_log(path: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(t, r)| (t.to_owned(), r.to_owned()))
        .collect()
}

/// A summary of skip records for people: how many, and each reason with the
/// tests it kept from running.
pub fn summary(records: &[(String, String)]) -> String {
    let mut by_reason: Vec<(&str, Vec<&str>)> = Vec::new();
    for (test, reason) in records {
        match by_reason.iter_mut().find(|(r, _)| r == reason) {
            Some((_, tests)) => tests.push(test),
            None => by_reason.push((reason, vec![test])),
        }
    }
    let mut out = format!("{} test(s) skipped", records.len());
    for (reason, tests) in by_reason {
        out.push_str(&format!("\n  {} skipped: {reason}", tests.len()));
        for t in tests {
            out.push_str(&format!("\n    {t}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_reach_the_log_and_the_summary_groups_them() {
        let log = std::env::temp_dir().join(format!("ofi-xdp-skip-test-{}", std::process::id()));
        let _ = std::fs::remove_file(&log);
        let mut lines = Vec::new();
        skip_to(&mut lines, Some(&log), "no widget\tat all");
        skip_to(&mut lines, Some(&log), "no widget\tat all");
        let records = read_log(&log);
        let _ = std::fs::remove_file(&log);
        let me =
            "ofi_xdp_testhosts::skip::tests::records_reach_the_log_and_the_summary_groups_them";
        assert_eq!(records.len(), 2);
        assert!(records[0].0.ends_with(me), "{records:?}");
        assert_eq!(records[0].1, "no widget at all");
        let lines = String::from_utf8(lines).unwrap();
        assert_eq!(lines.lines().count(), 2);
        assert!(lines.starts_with(SKIPPED) && lines.contains(me), "{lines}");
        let s = summary(&records);
        assert!(
            s.starts_with("2 test(s) skipped\n  2 skipped: no widget at all"),
            "{s}"
        );
    }
}
