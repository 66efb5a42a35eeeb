//! Instructions per 64-byte message on the userspace small-message path, counted by callgrind,
//! against the budget committed in `xtask/instruction-budget.toml`.
//!
//! Wall time on a shared 2-core machine swings by tens of percent from one run to the next;
//! the instructions a deterministic program executes do not. The driver
//! (`provider/examples/small_message_path.rs`) plays a 64-byte tagged ping-pong between two
//! engines in memory, with the provider's framing, in virtual time and with fixed seeds. Each
//! row (a feature on or off) runs twice under callgrind, with no measured round trips and with
//! 2000 of them after the same warm-up: the difference, divided by the messages, is one
//! message's cost, with start-up, the handshake and one-off allocations cancelled.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::steps::{project_root, run, target_dir};

/// The committed budget: one `row = instructions` line per row of the driver.
pub const BUDGET_FILE: &str = "xtask/instruction-budget.toml";
/// Measured round trips per row (two messages each).
const ROUNDS: u64 = 2000;
/// A row more than this fraction over its budget fails the check.
const OVER_BUDGET: f64 = 0.03;
/// A row more than this fraction under its budget gets a note: lower the budget.
const UNDER_BUDGET: f64 = 0.10;

/// One row's figure.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    /// The driver's name for the row (`default`, `auth`, …).
    pub name: String,
    /// What the row turns on or off.
    pub about: String,
    /// Instructions per 64-byte message, both ends together.
    pub per_message: u64,
}

/// `cargo xtask bench instructions`: the table, with the budget beside it when the file reads.
pub fn bench() -> Result<(), String> {
    let rows = measure()?;
    let budget = read_budget(&project_root().join(BUDGET_FILE)).ok();
    print!("{}", table(&rows, budget.as_deref()));
    Ok(())
}

/// The step of `cargo xtask test`: fails when a row is more than 3 % over its
/// budget (or has none), and says when one is well under it. On a CPU other
/// than the one the budget was counted on ([`cpu_identity`]) it prints the
/// figures and says why it does not judge them: glibc's string functions and
/// AWS-LC's AES pick their code by the CPU's features, so the same program
/// executes other instructions there.
pub fn check() -> Result<(), String> {
    let rows = measure()?;
    let path = project_root().join(BUDGET_FILE);
    let budget = read_budget(&path)?;
    print!("{}", table(&rows, Some(&budget)));
    let here = cpu_identity();
    match read_budget_cpu(&path)? {
        Some(counted_on) if counted_on != here => {
            eprintln!(
                "xtask: the budget was counted on a CPU with `{counted_on}`, this one has \
                 `{here}`: its figures are shown, not judged (the code glibc and AWS-LC run \
                 depends on the CPU's features); count anew with `cargo xtask bench \
                 instructions` and commit the budget with `cpu = \"{here}\"` to judge them here"
            );
            return Ok(());
        }
        Some(_) => {}
        None => {
            return Err(format!(
                "{}: no `cpu = \"…\"` line (the CPU the figures were counted on); this one is \
                 `{here}`",
                path.display()
            ));
        }
    }
    let verdict = judge(&rows, &budget);
    for note in &verdict.notes {
        eprintln!("xtask: {note}");
    }
    if verdict.failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "instructions per message over budget ({BUDGET_FILE}):\n  {}\n\
             if the growth is deliberate, raise the budget in a commit of its own that says why",
            verdict.failures.join("\n  ")
        ))
    }
}

/// Builds the driver, then counts every row it lists (two callgrind runs each, run in
/// parallel on the machine's cores: instruction counts do not depend on load).
pub fn measure() -> Result<Vec<Measured>, String> {
    valgrind_present()?;
    let driver = build_driver()?;
    let listing = Command::new(&driver)
        .arg("--rows")
        .output()
        .map_err(|e| format!("cannot run {}: {e}", driver.display()))?;
    let rows: Vec<(String, String)> = String::from_utf8_lossy(&listing.stdout)
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(n, a)| (n.to_owned(), a.to_owned()))
        .collect();
    if rows.is_empty() {
        return Err(format!("{} --rows listed no rows", driver.display()));
    }
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut results: Vec<Result<u64, String>> = Vec::new();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some((name, _)) = rows.get(i) else { break };
                        done.push((i, per_message(&driver, name)));
                    }
                    done
                })
            })
            .collect();
        let mut all: Vec<(usize, Result<u64, String>)> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect();
        all.sort_by_key(|(i, _)| *i);
        results = all.into_iter().map(|(_, r)| r).collect();
    });
    if results.len() != rows.len() {
        return Err("a measuring thread panicked".into());
    }
    rows.into_iter()
        .zip(results)
        .map(|((name, about), r)| {
            Ok(Measured {
                name,
                about,
                per_message: r?,
            })
        })
        .collect()
}

fn valgrind_present() -> Result<(), String> {
    match Command::new("valgrind").arg("--version").output() {
        Ok(out) if out.status.success() => Ok(()),
        _ => Err(
            "valgrind is not installed: `cargo xtask deps` installs it (Debian package \
                  `valgrind`, listed in xtask/apt-packages.txt)"
                .into(),
        ),
    }
}

fn build_driver() -> Result<PathBuf, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "--release",
        "-p",
        "ofi-xdp-provider",
        "--example",
        "small_message_path",
    ]);
    run(cmd)?;
    Ok(target_dir()
        .join("release")
        .join("examples")
        .join("small_message_path"))
}

/// Instructions per message of one row: the two runs' difference over the messages.
fn per_message(driver: &Path, row: &str) -> Result<u64, String> {
    let base = instructions(driver, row, 0)?;
    let full = instructions(driver, row, ROUNDS)?;
    let messages = 2 * ROUNDS;
    let extra = full.checked_sub(base).ok_or_else(|| {
        format!(
            "row {row}: {ROUNDS} round trips counted fewer instructions ({full}) than none ({base})"
        )
    })?;
    Ok((extra + messages / 2) / messages)
}

/// Instructions the driver executes for `row` with `rounds` measured round trips.
fn instructions(driver: &Path, row: &str, rounds: u64) -> Result<u64, String> {
    let out = Command::new("valgrind")
        .args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
        .arg(driver)
        .arg(row)
        .arg(rounds.to_string())
        .output()
        .map_err(|e| format!("cannot run valgrind: {e}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!(
            "{} {row} {rounds} under callgrind failed ({}):\n{stderr}",
            driver.display(),
            out.status
        ));
    }
    collected(&stderr).ok_or_else(|| format!("no `Collected :` line from callgrind:\n{stderr}"))
}

/// The total callgrind prints at exit: `==123== Collected : 16547176`.
fn collected(stderr: &str) -> Option<u64> {
    stderr.lines().find_map(|l| {
        let (_, n) = l.split_once("Collected :")?;
        n.trim().parse().ok()
    })
}

/// What of this CPU decides which code the driver runs: its vendor, and the
/// features glibc's memcpy/memset and AWS-LC's AES-GCM choose by (from
/// `/proc/cpuinfo`; valgrind passes them through its CPUID).
pub fn cpu_identity() -> String {
    const FEATURES: [&str; 14] = [
        "sse4_2",
        "avx",
        "avx2",
        "avx512f",
        "avx512bw",
        "avx512vl",
        "erms",
        "fsrm",
        "bmi2",
        "adx",
        "aes",
        "pclmulqdq",
        "vaes",
        "vpclmulqdq",
    ];
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| {
        info.lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == name).then(|| v.trim().to_owned())
            })
            .unwrap_or_default()
    };
    let flags = field("flags");
    let have: Vec<&str> = FEATURES
        .iter()
        .copied()
        .filter(|f| flags.split_whitespace().any(|g| g == *f))
        .collect();
    format!("{} {}", field("vendor_id"), have.join(" "))
}

/// The budget file's `cpu = "…"` line: the [`cpu_identity`] its figures were counted on.
fn read_budget_cpu(path: &Path) -> Result<Option<String>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(budget_cpu(&text))
}

fn budget_cpu(text: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let (k, v) = line.split('#').next()?.split_once('=')?;
        let v = v.trim();
        (k.trim() == "cpu" && v.len() >= 2 && v.starts_with('"') && v.ends_with('"'))
            .then(|| v[1..v.len() - 1].to_owned())
    })
}

/// The budget file: `name = instructions` lines (the `cpu = "…"` line is read on its
/// own), `#` comments (a TOML subset), in order.
pub fn read_budget(path: &Path) -> Result<Vec<(String, u64)>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    parse_budget(&text).map_err(|e| format!("{}: {e}", path.display()))
}

fn parse_budget(text: &str) -> Result<Vec<(String, u64)>, String> {
    let mut rows = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() || line.split_once('=').is_some_and(|(k, _)| k.trim() == "cpu") {
            continue;
        }
        let parsed = line.split_once('=').and_then(|(k, v)| {
            let k = k.trim().trim_matches('"');
            let v: u64 = v.trim().replace('_', "").parse().ok()?;
            (!k.is_empty()).then(|| (k.to_owned(), v))
        });
        match parsed {
            Some(row) => rows.push(row),
            None => return Err(format!("line {}: not `name = instructions`", n + 1)),
        }
    }
    Ok(rows)
}

/// What the check found: failures, and notes that do not fail it.
#[derive(Debug, Default, PartialEq)]
struct Verdict {
    failures: Vec<String>,
    notes: Vec<String>,
}

fn judge(rows: &[Measured], budget: &[(String, u64)]) -> Verdict {
    let mut v = Verdict::default();
    for row in rows {
        let Some(&(_, limit)) = budget.iter().find(|(n, _)| *n == row.name) else {
            v.failures.push(format!(
                "{}: {} instructions, and no budget: add `{} = {}`",
                row.name, row.per_message, row.name, row.per_message
            ));
            continue;
        };
        let ratio = row.per_message as f64 / limit.max(1) as f64;
        if ratio > 1.0 + OVER_BUDGET {
            v.failures.push(format!(
                "{}: {} instructions per message, budget {limit} ({:+.1} %, more than {:.0} % over)",
                row.name,
                row.per_message,
                (ratio - 1.0) * 100.0,
                OVER_BUDGET * 100.0
            ));
        } else if ratio < 1.0 - UNDER_BUDGET {
            v.notes.push(format!(
                "{}: {} instructions per message, budget {limit} ({:+.1} %): consider lowering the budget",
                row.name,
                row.per_message,
                (ratio - 1.0) * 100.0
            ));
        }
    }
    for (name, _) in budget {
        if !rows.iter().any(|r| r.name == *name) {
            v.failures.push(format!(
                "{name}: in the budget but not measured (the driver has no such row): remove it"
            ));
        }
    }
    v
}

/// The table as Markdown (docs/performance.md takes it as printed).
fn table(rows: &[Measured], budget: Option<&[(String, u64)]>) -> String {
    let base = rows
        .iter()
        .find(|r| r.name == "default")
        .map(|r| r.per_message);
    let mut out = String::from(
        "| row | what | instructions per 64 B message | against default | budget |\n\
         | --- | --- | ---: | ---: | ---: |\n",
    );
    for r in rows {
        let against = match base {
            Some(b) if r.name != "default" => {
                let d = r.per_message as i64 - b as i64;
                format!("{d:+} ({:+.1} %)", d as f64 * 100.0 / b.max(1) as f64)
            }
            _ => "–".into(),
        };
        let limit = budget
            .and_then(|b| b.iter().find(|(n, _)| *n == r.name))
            .map_or("–".into(), |(_, l)| l.to_string());
        out.push_str(&format!(
            "| {} | {} | {} | {against} | {limit} |\n",
            r.name, r.about, r.per_message
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, per_message: u64) -> Measured {
        Measured {
            name: name.into(),
            about: String::new(),
            per_message,
        }
    }

    #[test]
    fn reads_callgrinds_total() {
        let stderr = "==1== Callgrind\n==1== Events    : Ir\n==1== Collected : 16547176\n==1== I   refs:      16,547,176\n";
        assert_eq!(collected(stderr), Some(16_547_176));
        assert_eq!(collected("==1== nothing\n"), None);
    }

    #[test]
    fn parses_the_budget_file() {
        let text = "# comment\n\ndefault = 3_700  # as shipped\n\"auth\"=5400\n";
        assert_eq!(
            parse_budget(text),
            Ok(vec![("default".into(), 3700), ("auth".into(), 5400)])
        );
        assert!(parse_budget("default 3700\n").is_err());
        assert!(parse_budget("default = many\n").is_err());
    }

    #[test]
    fn the_budget_names_the_cpu_it_was_counted_on() {
        let text = "# c\ncpu = \"AuthenticAMD avx2 aes\"\ndefault = 3\n";
        assert_eq!(budget_cpu(text).as_deref(), Some("AuthenticAMD avx2 aes"));
        assert_eq!(parse_budget(text), Ok(vec![("default".to_string(), 3)]));
        assert_eq!(budget_cpu("default = 3\n"), None);
        let committed = std::fs::read_to_string(project_root().join(BUDGET_FILE)).unwrap();
        assert!(budget_cpu(&committed).is_some());
        assert!(cpu_identity().contains(' '));
    }

    #[test]
    fn the_committed_budget_parses() {
        let rows = read_budget(&project_root().join(BUDGET_FILE)).unwrap();
        assert!(rows.iter().any(|(n, _)| n == "default"));
    }

    #[test]
    fn fails_beyond_three_percent_and_notes_well_under() {
        let budget = vec![("default".to_string(), 1000), ("auth".to_string(), 2000)];
        // 3 % over passes; 3.1 % fails.
        let v = judge(&[row("default", 1030), row("auth", 2000)], &budget);
        assert_eq!(v, Verdict::default());
        let v = judge(&[row("default", 1031), row("auth", 2000)], &budget);
        assert_eq!(v.failures.len(), 1);
        assert!(v.failures[0].contains("budget 1000"), "{v:?}");
        // More than 10 % under: a note, not a failure.
        let v = judge(&[row("default", 899), row("auth", 2000)], &budget);
        assert!(v.failures.is_empty());
        assert!(v.notes[0].contains("consider lowering"), "{v:?}");
    }

    #[test]
    fn a_row_without_budget_or_a_budget_without_row_fails() {
        let budget = vec![("default".to_string(), 1000), ("gone".to_string(), 5)];
        let v = judge(&[row("default", 1000), row("new", 7)], &budget);
        assert_eq!(v.failures.len(), 2, "{v:?}");
    }

    #[test]
    fn the_table_compares_with_the_default_row() {
        let t = table(&[row("default", 1000), row("auth", 1500)], None);
        assert!(t.contains("| auth |  | 1500 | +500 (+50.0 %) | – |"), "{t}");
    }
}
