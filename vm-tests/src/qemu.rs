//! Running QEMU: picks KVM when it actually works, else TCG; streams the guest console to the
//! terminal and a log file; enforces a boot deadline and an overall deadline (killing the QEMU
//! process it started, by PID); recognises kernel panics.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use crate::guest::MARK;
use crate::nics::HostNetwork;

pub const QEMU: &str = "qemu-system-x86_64";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    Kvm,
    Tcg,
}

impl Accel {
    pub fn name(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }
}

/// Whether KVM really runs a VCPU here: `/dev/kvm` opens, and QEMU started with KVM and a
/// stopped CPU (`-S`) stays up. Some hosts (nested, sandboxed) expose `/dev/kvm` but QEMU
/// aborts setting MSRs; those get TCG. A guest that then hangs under KVM is caught by the boot
/// deadline, which retries with TCG.
pub fn kvm_usable() -> bool {
    if OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_err()
    {
        return false;
    }
    let Ok(mut child) = Command::new(QEMU)
        .args([
            "-machine",
            "q35,accel=kvm",
            "-cpu",
            "host",
            "-m",
            "64M",
            "-S",
        ])
        .args([
            "-display",
            "none",
            "-serial",
            "none",
            "-monitor",
            "none",
            "-nodefaults",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    else {
        return false;
    };
    let deadline = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return false; // exited by itself: KVM setup failed
        }
        thread::sleep(Duration::from_millis(50));
    }
    kill(&mut child);
    true
}

/// Ends the QEMU process we started (our own child, by its PID) and reaps it.
fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

pub struct VmConfig<'a> {
    pub kernel: &'a Path,
    pub initrd: &'a Path,
    pub accel: Accel,
    pub memory: &'a str,
    pub smp: u32,
    pub append: String,
    /// The second serial port (ttyS1): result markers land here.
    pub results: &'a Path,
    pub log: &'a Path,
    pub shell: bool,
    /// From start until the guest's BOOTED marker.
    pub boot_timeout: Duration,
    /// From start until QEMU exits.
    pub timeout: Duration,
    /// Two virtio-net NICs through the host side of `--nic virtio` (QEMU then runs inside
    /// its namespace); none otherwise.
    pub nics: Option<&'a HostNetwork>,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Ending {
    /// QEMU exited by itself (the guest powered off or rebooted).
    Exited { code: Option<i32> },
    /// The guest never printed BOOTED in time; QEMU was killed.
    BootTimeout,
    /// The deadline passed; QEMU was killed.
    Timeout,
}

#[derive(Debug)]
pub struct VmRun {
    pub ending: Ending,
    pub panic: Option<String>,
    /// Seconds from QEMU start to the BOOTED marker, as seen by the host.
    pub boot_seconds: Option<f64>,
    pub total_seconds: f64,
}

fn qemu_command(cfg: &VmConfig) -> Command {
    let mut cmd = match cfg.nics {
        Some(net) => net.wrap(QEMU),
        None => Command::new(QEMU),
    };
    let machine = format!("q35,accel={}", cfg.accel.name());
    let cpu = match cfg.accel {
        Accel::Kvm => "host",
        Accel::Tcg => "max",
    };
    cmd.args(["-machine", &machine, "-cpu", cpu, "-m", cfg.memory])
        .args(["-smp", &cfg.smp.to_string()])
        // No default devices: in particular no NIC, so the guest cannot reach any network but
        // the veth pairs it makes itself (and, with `--nic`, the bridge of a namespace of
        // ours).
        .args([
            "-nodefaults",
            "-no-user-config",
            "-no-reboot",
            "-display",
            "none",
        ])
        .arg("-kernel")
        .arg(cfg.kernel)
        .arg("-initrd")
        .arg(cfg.initrd)
        .args(["-append", &cfg.append]);
    if let Some(net) = cfg.nics {
        cmd.args(net.qemu_args());
    }
    if cfg.shell {
        // Console on the terminal with QEMU's monitor multiplexed (Ctrl-A X quits, Ctrl-A C
        // toggles the monitor).
        cmd.args(["-serial", "mon:stdio"]);
    } else {
        cmd.args(["-serial", "stdio", "-monitor", "none"]);
    }
    cmd.arg("-serial")
        .arg(format!("file:{}", cfg.results.display()));
    cmd
}

/// Boots and waits for the end. With `shell`, the terminal is handed to the guest and there is
/// no deadline.
pub fn run(cfg: &VmConfig) -> Result<VmRun, String> {
    let mut cmd = qemu_command(cfg);
    eprintln!("vm-tests: {}", describe(&cmd));
    let start = Instant::now();
    if cfg.shell {
        let status = cmd
            .status()
            .map_err(|e| format!("cannot run {QEMU}: {e} (install qemu-system-x86)"))?;
        return Ok(VmRun {
            ending: Ending::Exited {
                code: status.code(),
            },
            panic: None,
            boot_seconds: None,
            total_seconds: start.elapsed().as_secs_f64(),
        });
    }
    let mut log = File::create(cfg.log).map_err(|e| format!("{}: {e}", cfg.log.display()))?;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {QEMU}: {e} (install qemu-system-x86)"))?;
    let events = stream(&mut child)?;
    let mut booted = None;
    let mut panic = None;
    let mut early_stderr = Vec::new();
    let ending = loop {
        let now = Instant::now();
        let elapsed = now - start;
        if booted.is_none() && elapsed > cfg.boot_timeout {
            kill(&mut child);
            break Ending::BootTimeout;
        }
        if elapsed > cfg.timeout {
            kill(&mut child);
            break Ending::Timeout;
        }
        match events.recv_timeout(Duration::from_millis(250)) {
            Ok(Event::Output(bytes)) => {
                let _ = io::stdout().write_all(&bytes);
                let _ = io::stdout().flush();
                let _ = log.write_all(&strip_cr(&bytes));
            }
            Ok(Event::Line(line)) => {
                if booted.is_none() && line.contains(MARK) && line.contains("BOOTED") {
                    booted = Some(start.elapsed().as_secs_f64());
                }
                if let Some(step) = progress_step(&line) {
                    // A line per step with the time since QEMU started, beside the console.
                    eprintln!(
                        "vm-tests: [{:>6.1} s] {step}",
                        start.elapsed().as_secs_f64()
                    );
                }
                if panic.is_none() && is_panic_line(&line) {
                    panic = Some(line);
                }
            }
            Ok(Event::Stderr(bytes)) => {
                let _ = io::stderr().write_all(&bytes);
                let _ = log.write_all(&bytes);
                if booted.is_none() && cfg.accel == Accel::Kvm {
                    early_stderr.extend_from_slice(&bytes);
                    if kvm_gave_up(&early_stderr) {
                        // The vCPU is stopped for good: no need to wait
                        // for the boot deadline before retrying with TCG.
                        kill(&mut child);
                        break Ending::BootTimeout;
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                let status = child
                    .wait()
                    .map_err(|e| format!("waiting for {QEMU}: {e}"))?;
                break Ending::Exited {
                    code: status.code(),
                };
            }
        }
    };
    // Drain what the reader threads still hold so the log is complete.
    while let Ok(event) = events.try_recv() {
        if let Event::Output(bytes) | Event::Stderr(bytes) = event {
            let _ = log.write_all(&strip_cr(&bytes));
        }
    }
    let _ = log.flush();
    Ok(VmRun {
        ending,
        panic,
        boot_seconds: booted,
        total_seconds: start.elapsed().as_secs_f64(),
    })
}

/// The guest's marker lines that end a step (booted, a suite's result, done), without the
/// marker, for the host's progress lines.
fn progress_step(line: &str) -> Option<&str> {
    let at = line.find(MARK)?;
    let rest = line[at + MARK.len()..].trim();
    ["BOOTED", "RESULT", "DONE"]
        .iter()
        .any(|k| rest.starts_with(k))
        .then_some(rest)
}

fn describe(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// What the kernel prints when it dies. With `panic=-1` it then reboots at once, which
/// `-no-reboot` turns into QEMU exiting.
pub fn is_panic_line(line: &str) -> bool {
    line.contains("Kernel panic - not syncing")
        || line.contains("end Kernel panic")
        || line.contains("BUG: kernel NULL pointer")
}

/// The panic `softlockup_panic=1` causes: a CPU that did not schedule for twice
/// `watchdog_thresh`.
pub fn is_lockup_panic(line: &str) -> bool {
    line.contains("softlockup: hung tasks")
}

fn strip_cr(bytes: &[u8]) -> Vec<u8> {
    bytes.iter().copied().filter(|&b| b != b'\r').collect()
}

enum Event {
    Output(Vec<u8>),
    Line(String),
    Stderr(Vec<u8>),
}

/// Reader threads for QEMU's stdout (the console) and stderr. The channel disconnects when
/// both pipes close, i.e. when QEMU is gone.
fn stream(child: &mut Child) -> Result<Receiver<Event>, String> {
    let (tx, rx) = mpsc::channel();
    let mut stdout = child.stdout.take().ok_or("qemu stdout not captured")?;
    let mut stderr = child.stderr.take().ok_or("qemu stderr not captured")?;
    let tx_err = tx.clone();
    thread::spawn(move || {
        let mut buf = [0u8; 8192];
        let mut line = Vec::new();
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            let chunk = &buf[..n];
            if tx.send(Event::Output(chunk.to_vec())).is_err() {
                break;
            }
            for &b in chunk {
                if b == b'\n' {
                    let text = String::from_utf8_lossy(&line).trim_end().to_owned();
                    let _ = tx.send(Event::Line(text));
                    line.clear();
                } else {
                    line.push(b);
                }
            }
        }
    });
    thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stderr.read(&mut buf) {
            if n == 0 || tx_err.send(Event::Stderr(buf[..n].to_vec())).is_err() {
                break;
            }
        }
    });
    Ok(rx)
}

/// The last `lines` lines of the console log, for a failure report.
pub fn log_tail(log: &Path, lines: usize) -> String {
    let text = fs::read(log)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A temporary path next to `log` for the results port.
pub fn results_path(log: &Path) -> PathBuf {
    log.with_extension("results")
}

/// Whether QEMU's stderr says KVM stopped the guest for good: on this kind of
/// nested host KVM fails to emulate an instruction early in boot ("KVM internal
/// error. Suberror: 1 … emulation failure") and QEMU pauses the VM instead of
/// exiting, which otherwise costs the whole boot deadline.
fn kvm_gave_up(stderr: &[u8]) -> bool {
    const SIGN: &[u8] = b"KVM internal error";
    stderr.windows(SIGN.len()).any(|w| w == SIGN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kvm_emulation_failure_is_seen() {
        let err = b"KVM internal error. Suberror: 1\nextra data[0]: 0x1\nemulation failure\n";
        assert!(kvm_gave_up(err));
        assert!(!kvm_gave_up(
            b"qemu-system-x86_64: warning: host doesn't support"
        ));
    }

    #[test]
    fn panics_recognised() {
        assert!(is_panic_line(
            "[    3.1] Kernel panic - not syncing: Attempted to kill init! exitcode=0x00000100"
        ));
        assert!(!is_panic_line("[    3.1] veth: loaded"));
        let lockup = "[  153.2] Kernel panic - not syncing: softlockup: hung tasks";
        assert!(is_panic_line(lockup) && is_lockup_panic(lockup));
        assert!(!is_lockup_panic(
            "[    3.1] Kernel panic - not syncing: Attempted to kill init!"
        ));
    }

    #[test]
    fn progress_lines_are_the_step_markers() {
        let line = format!("[  9.1] {MARK} RESULT suite=bpf/steering status=pass rc=0 seconds=46");
        assert_eq!(
            progress_step(&line),
            Some("RESULT suite=bpf/steering status=pass rc=0 seconds=46")
        );
        assert_eq!(progress_step(&format!("{MARK} START suite=x")), None);
        assert_eq!(progress_step("veth: loaded"), None);
    }

    #[test]
    fn cr_removed() {
        assert_eq!(strip_cr(b"a\r\nb"), b"a\nb");
    }
}
