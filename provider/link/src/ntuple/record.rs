//! Who owns a flow steering rule: a record file per rule, so that rules of
//! a process that died (SIGKILL, a crash) are found and removed by the next
//! endpoint on the interface and by `ofi-xdp cleanup`. A driver's rule
//! carries no owner; the record names the process (pid and start time, so a
//! reused pid is told apart), the interface (network namespace inode and
//! index) and the rule, and a rule is removed only when the record's
//! process is gone *and* the driver still holds exactly that rule.
//!
//! Format (version 1), `<dir>/<pid>-<n>.rule`, text lines `key value`:
//!
//! ```text
//! ofi-xdp-ntuple-rule 1
//! pid 4242
//! starttime 123456          field 22 of /proc/<pid>/stat
//! netns 4026531840          inode of the owner's /proc/self/ns/net
//! ifname eth0
//! ifindex 2
//! dst 198.18.0.1:40213      the UDP destination the rule matches
//! queue 1                   the receive queue it sends them to
//! location 1023             its place in the driver's table; `any` while
//!                           the driver is still picking one
//! ```
//!
//! Written under a hidden temporary name and renamed into place, so a
//! reader never sees half a record.

use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use ofi_xdp_epstats::{netns_inode, process_starttime};

use super::rxnfc::FlowRule;

/// Where records live: `/run` is tmpfs (gone at reboot, like the rules of
/// most drivers) and shared by the host's network namespaces.
pub const DEFAULT_DIR: &str = "/run/ofi-xdp/ntuple";

const MAGIC: &str = "ofi-xdp-ntuple-rule 1";

/// Records made by this process, numbered as their files are named.
static NEXT_RECORD: AtomicU32 = AtomicU32::new(0);

/// One rule's owner and identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleRecord {
    pub file: PathBuf,
    pub pid: u32,
    pub starttime: u64,
    pub netns: u64,
    pub ifname: String,
    pub ifindex: u32,
    pub rule: FlowRule,
    /// `None` while the driver picks the location (`RX_CLS_LOC_ANY`).
    pub location: Option<u32>,
}

impl RuleRecord {
    /// A record of the calling process for `rule` on `ifname`/`ifindex`
    /// (in the calling thread's network namespace), to be written in `dir`.
    pub fn ours(dir: &Path, ifname: &str, ifindex: u32, rule: FlowRule) -> io::Result<RuleRecord> {
        let pid = std::process::id();
        let n = NEXT_RECORD.fetch_add(1, Ordering::Relaxed);
        Ok(RuleRecord {
            file: dir.join(format!("{pid}-{n}.rule")),
            pid,
            starttime: process_starttime(pid).ok_or_else(|| not_found("/proc/self/stat"))?,
            netns: netns_inode().ok_or_else(|| not_found("/proc/self/ns/net"))?,
            ifname: ifname.to_owned(),
            ifindex,
            rule,
            location: None,
        })
    }

    /// True while the owning process runs (same pid, same start time).
    pub fn alive(&self) -> bool {
        process_starttime(self.pid) == Some(self.starttime)
    }

    fn text(&self) -> String {
        let location = self
            .location
            .map_or_else(|| "any".to_owned(), |l| l.to_string());
        format!(
            "{MAGIC}\npid {}\nstarttime {}\nnetns {}\nifname {}\nifindex {}\ndst {}\nqueue {}\n\
             location {location}\n",
            self.pid,
            self.starttime,
            self.netns,
            self.ifname,
            self.ifindex,
            self.rule.dst,
            self.rule.queue
        )
    }

    /// Writes (or rewrites) the record, atomically.
    pub fn write(&self) -> io::Result<()> {
        let dir = self.file.parent().ok_or_else(|| not_found("record dir"))?;
        std::fs::create_dir_all(dir)?;
        let name = self
            .file
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| not_found("record name"))?;
        let tmp = dir.join(format!(".{name}.tmp"));
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(self.text().as_bytes())?;
        drop(f);
        std::fs::rename(&tmp, &self.file)
    }

    /// Removes the record file (a missing one is fine).
    pub fn remove(&self) -> io::Result<()> {
        match std::fs::remove_file(&self.file) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Parses a record file's text.
    pub fn parse(file: &Path, text: &str) -> Result<RuleRecord, String> {
        let mut lines = text.lines();
        if lines.next() != Some(MAGIC) {
            return Err("not an ofi-xdp ntuple rule record (version 1)".into());
        }
        let fields: Vec<(&str, &str)> = lines.filter_map(|l| l.split_once(' ')).collect();
        let get = |k: &str| {
            fields
                .iter()
                .find(|(key, _)| *key == k)
                .map(|(_, v)| v.trim())
                .ok_or_else(|| format!("no {k}"))
        };
        let num =
            |k: &str| -> Result<u64, String> { get(k)?.parse().map_err(|_| format!("bad {k}")) };
        let small = |k: &str| -> Result<u32, String> {
            u32::try_from(num(k)?).map_err(|_| format!("bad {k}"))
        };
        Ok(RuleRecord {
            file: file.to_owned(),
            pid: small("pid")?,
            starttime: num("starttime")?,
            netns: num("netns")?,
            ifname: get("ifname")?.to_owned(),
            ifindex: small("ifindex")?,
            rule: FlowRule {
                dst: get("dst")?.parse().map_err(|_| "bad dst".to_owned())?,
                queue: small("queue")?,
            },
            location: match get("location")? {
                "any" => None,
                _ => Some(small("location")?),
            },
        })
    }

    /// Every record in `dir` (unreadable ones as `Err(file, why)`).
    pub fn list(dir: &Path) -> Vec<Result<RuleRecord, (PathBuf, String)>> {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        let mut out: Vec<_> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "rule"))
            .map(|p| match std::fs::read_to_string(&p) {
                Ok(t) => RuleRecord::parse(&p, &t).map_err(|e| (p, e)),
                Err(e) => Err((p, e.to_string())),
            })
            .collect();
        out.sort_by(|a, b| file_of(a).cmp(file_of(b)));
        out
    }
}

fn file_of(r: &Result<RuleRecord, (PathBuf, String)>) -> &Path {
    match r {
        Ok(rec) => &rec.file,
        Err((p, _)) => p,
    }
}

fn not_found(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("{what} unreadable"))
}

impl std::fmt::Display for RuleRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = self.location.map_or_else(
            || "location pending".to_owned(),
            |l| format!("location {l}"),
        );
        write!(
            f,
            "{}: ntuple rule {} ({at}) of pid {}",
            self.ifname, self.rule, self.pid
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ofi-xdp-ntuple-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn records_round_trip_and_know_their_owner() {
        let dir = temp_dir("roundtrip");
        let rule = FlowRule {
            dst: "198.18.0.1:40213".parse().unwrap(),
            queue: 1,
        };
        let mut rec = RuleRecord::ours(&dir, "eth0", 2, rule).unwrap();
        rec.write().unwrap();
        rec.location = Some(1023);
        rec.write().unwrap();
        let listed = RuleRecord::list(&dir);
        assert_eq!(listed.len(), 1);
        let back = listed[0].as_ref().unwrap();
        assert_eq!(back, &rec);
        assert!(back.alive());
        let mut dead = back.clone();
        dead.starttime += 1; // a reused pid
        assert!(!dead.alive());
        assert!(rec.to_string().contains("location 1023"), "{rec}");
        rec.remove().unwrap();
        rec.remove().unwrap();
        assert!(RuleRecord::list(&dir).is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn pending_and_bad_records() {
        let p = Path::new("/x/1-0.rule");
        let text = format!(
            "{MAGIC}\npid 1\nstarttime 2\nnetns 3\nifname e\nifindex 4\ndst [::1]:9\nqueue 5\n\
             location any\n"
        );
        let r = RuleRecord::parse(p, &text).unwrap();
        assert_eq!(r.location, None);
        assert_eq!(r.rule.queue, 5);
        assert!(RuleRecord::parse(p, "something else\n").is_err());
        assert!(RuleRecord::parse(p, &text.replace("queue 5", "queue x")).is_err());
    }
}
