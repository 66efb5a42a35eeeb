//! Reading the guest's result markers (see `guest.rs` for the protocol) and the test harness's
//! own summary lines out of the console log.

use std::collections::BTreeMap;

use crate::guest::MARK;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Pass,
    Skip,
    Fail,
    Timeout,
}

impl Status {
    fn parse(s: &str) -> Self {
        match s {
            "pass" => Status::Pass,
            "skip" => Status::Skip,
            "timeout" => Status::Timeout,
            _ => Status::Fail,
        }
    }

    pub fn is_ok(self) -> bool {
        matches!(self, Status::Pass | Status::Skip)
    }

    pub fn label(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Skip => "SKIP",
            Status::Fail => "FAIL",
            Status::Timeout => "TIMEOUT",
        }
    }
}

#[derive(Debug, Clone)]
pub struct SuiteResult {
    pub name: String,
    pub status: Status,
    pub seconds: u64,
    /// `test result: ...` lines and skip notices the suite printed.
    pub notes: Vec<String>,
    /// `<test>: <reason>` of each test that said it was skipped
    /// (`ofi_xdp_testhosts::skip`: a prerequisite this guest lacks).
    pub skipped: Vec<String>,
}

/// What starts the line of a skipped test (`ofi_xdp_testhosts::skip::SKIPPED`).
pub const SKIPPED: &str = "SKIPPED ";

/// What the markers say about one boot.
#[derive(Debug, Default)]
pub struct Report {
    pub booted: Option<BTreeMap<String, String>>,
    /// What the guest probe found the kernel supports.
    pub features: BTreeMap<String, String>,
    pub started: Vec<String>,
    pub suites: Vec<SuiteResult>,
    pub done: bool,
    pub module_failures: Vec<String>,
}

/// `key=value` words after the marker's keyword.
fn fields(rest: &str) -> BTreeMap<String, String> {
    rest.split_whitespace()
        .filter_map(|w| w.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// Parses the markers in `text` (the ttyS1 results file, or the console log as a fallback).
pub fn parse_markers(text: &str) -> Report {
    let mut report = Report::default();
    for line in text.lines() {
        let line = line.trim_matches(|c: char| c == '\r' || c.is_whitespace());
        let Some(pos) = line.find(MARK) else { continue };
        let rest = &line[pos + MARK.len()..];
        let mut words = rest.split_whitespace();
        let keyword = words.next().unwrap_or_default();
        let f = fields(rest);
        match keyword {
            "BOOTED" => report.booted = Some(f),
            "FEATURES" => report.features = f,
            "START" => report.started.extend(f.get("suite").cloned()),
            "RESULT" => report.suites.push(SuiteResult {
                name: f.get("suite").cloned().unwrap_or_default(),
                status: Status::parse(f.get("status").map(String::as_str).unwrap_or("")),
                seconds: f.get("seconds").and_then(|s| s.parse().ok()).unwrap_or(0),
                notes: Vec::new(),
                skipped: Vec::new(),
            }),
            "MODULE" => report.module_failures.push(rest.trim().to_owned()),
            "DONE" => report.done = true,
            _ => {}
        }
    }
    report
}

/// Attaches to each suite the noteworthy lines of the console between its START and RESULT:
/// the harness's `test result:` summary, and any other line that says something was skipped;
/// and, apart, every test that said it was skipped ([`SKIPPED`], anywhere in a line: with one
/// test thread libtest has printed `test NAME ... ` before it).
pub fn attach_notes(report: &mut Report, console: &str) {
    let mut current: Option<String> = None;
    let mut notes: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut skipped: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in console.lines() {
        let line = line.trim_end_matches('\r');
        if let Some(pos) = line.find(MARK) {
            let rest = &line[pos + MARK.len()..];
            let f = fields(rest);
            if rest.trim_start().starts_with("START") {
                current = f.get("suite").cloned();
            } else if rest.trim_start().starts_with("RESULT") {
                current = None;
            }
            continue;
        }
        let Some(suite) = &current else { continue };
        if let Some(pos) = line.find(SKIPPED) {
            skipped
                .entry(suite.clone())
                .or_default()
                .push(line[pos + SKIPPED.len()..].trim().to_owned());
            continue;
        }
        let lower = line.to_ascii_lowercase();
        if line.starts_with("test result:")
            || line.starts_with("FIGURE ")
            || lower.contains("skip")
            || line.contains("panicked at")
        {
            notes
                .entry(suite.clone())
                .or_default()
                .push(line.trim().to_owned());
        }
    }
    for s in &mut report.suites {
        if let Some(n) = notes.remove(&s.name) {
            s.notes = n;
        }
        if let Some(k) = skipped.remove(&s.name) {
            s.skipped = k;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "noise\r\n\
        OFI-XDP-VM BOOTED kernel=6.1.0-56-amd64 uptime=2.91\r\n\
        OFI-XDP-VM FEATURES af_xdp=yes xsk_multi_buffer=no(EINVAL)\r\n\
        OFI-XDP-VM START suite=bpf/lib\r\n\
        running 2 tests\r\n\
        test a ... ok\r\n\
        skipped multi-buffer: kernel 6.1 lacks XDP_USE_SG\r\n\
        test b ... SKIPPED group::b: this kernel cannot share (Linux 6.4+)\r\n\
        ok\r\n\
        test result: ok. 2 passed; 0 failed\r\n\
        OFI-XDP-VM RESULT suite=bpf/lib status=pass rc=0 seconds=4\r\n\
        OFI-XDP-VM START suite=smoke\r\n\
        OFI-XDP-VM RESULT suite=smoke status=timeout rc=137 seconds=300\r\n\
        [   12.1] some kernel line OFI-XDP-VM DONE uptime=9\r\n";

    #[test]
    fn markers() {
        let mut r = parse_markers(LOG);
        assert_eq!(
            r.booted
                .as_ref()
                .and_then(|b| b.get("kernel"))
                .map(String::as_str),
            Some("6.1.0-56-amd64")
        );
        assert_eq!(
            r.features.get("xsk_multi_buffer").map(String::as_str),
            Some("no(EINVAL)")
        );
        assert_eq!(r.suites.len(), 2);
        assert_eq!(r.suites[0].status, Status::Pass);
        assert_eq!(r.suites[0].seconds, 4);
        assert_eq!(r.suites[1].status, Status::Timeout);
        assert!(r.done);
        attach_notes(&mut r, LOG);
        assert_eq!(r.suites[0].notes.len(), 2);
        assert!(r.suites[0].notes[0].contains("XDP_USE_SG"));
        assert_eq!(
            r.suites[0].skipped,
            ["group::b: this kernel cannot share (Linux 6.4+)"]
        );
    }

    #[test]
    fn unknown_status_is_failure() {
        let r = parse_markers("OFI-XDP-VM RESULT suite=x status=weird rc=3 seconds=1\n");
        assert_eq!(r.suites[0].status, Status::Fail);
        assert!(!r.done);
    }
}
