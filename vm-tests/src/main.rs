//! `ofi-xdp-vm-tests`: boots Debian's distribution kernels in QEMU and runs the end-to-end suite
//! inside them, over veth pairs in the VM. Driven by `cargo xtask vm-test`; see README.md.
//!
//! Exit status: 0 every suite passed (or skipped with a reason), 1 a suite failed, 2 the VM
//! could not be built, booted or finished (timeout, kernel panic, missing tools).

mod artifacts;
mod guest;
mod image;
mod kernel;
mod nic_scripts;
mod nics;
mod plan;
mod probe;
mod qemu;
mod results;
mod util;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use std::{env, fs};

use artifacts::{Artifacts, CPrograms, PROVIDER_INSTALLED_NAME, Workspace};
use guest::{CC_STANDIN, LIB_SH, PINGPONG, PREBUILT_DIR, Plan, RUN_ALL, SMOKE, Suite};
use image::Image;
use kernel::{KernelTree, SERIES, Series};
use plan::plan_suites;
use qemu::{Accel, Ending, VmConfig};
use results::{Report, Status};

const USAGE: &str = "\
usage: ofi-xdp-vm-tests [options]    (normally: cargo xtask vm-test [options])

  --kernel 6.1|6.12|6.18|all
                           which Debian kernel(s) to boot (default: all = 6.1 and 6.12; 6.18,
                           from trixie-backports, only when named or with --nic)
  --nic virtio             give the guest two virtio-net NICs with 4 queue pairs each (joined by
                           a bridge in a host namespace of this run) and run the NIC suites over
                           them instead of the veth suites: AF_XDP zero-copy, native XDP, several
                           queues, busy polling (see README.md)
  --shell                  boot to an interactive busybox shell instead of running the suite
                           (leave with `exit`, or Ctrl-A X)
  --no-build               do not run cargo: only the built-in suites (VM smoke test)
  --suite TEXT             run only suites whose name contains TEXT (repeatable; the smoke
                           test always runs)
  --accel auto|kvm|tcg     QEMU accelerator (default auto: KVM when it works, else TCG)
  --timeout SECONDS        whole-VM limit, boot to power-off (default 2400)
  --suite-timeout SECONDS  per-suite limit inside the guest (default 900)
  --test-threads N         --test-threads for the Rust test binaries (default 1)
  --memory SIZE            guest memory (default 2G)
  --smp N                  guest CPUs (default 2)
";

struct Options {
    kernels: Vec<&'static Series>,
    /// `--nic virtio`: the NIC topology and suites.
    nic: bool,
    shell: bool,
    build: bool,
    suite_filters: Vec<String>,
    accel: Option<Accel>,
    timeout: Duration,
    suite_timeout: u64,
    test_threads: u32,
    memory: String,
    smp: u32,
}

/// The kernels `all` means: those of the Debian release we support (6.18 comes from a later
/// release's backports and is booted only when named, or for `--nic virtio`).
fn promised_series() -> Vec<&'static Series> {
    SERIES.iter().filter(|s| s.suite.is_none()).collect()
}

fn parse_options(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        kernels: promised_series(),
        nic: false,
        shell: false,
        build: true,
        suite_filters: Vec::new(),
        accel: None,
        // Under TCG on a loaded two-core host the C suite alone took 553 s and the whole
        // guest 994 s (under KVM: about 310 s and 11 min): limits that catch a hang, not a
        // slow emulator.
        timeout: Duration::from_secs(2400),
        suite_timeout: 900,
        test_threads: 1,
        memory: "2G".to_owned(),
        smp: 2,
    };
    let mut it = args.iter();
    let mut kernel_given = false;
    while let Some(arg) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value\n{USAGE}"))
        };
        let number = |name: &str, v: String| {
            v.parse::<u64>()
                .map_err(|_| format!("{name}: `{v}` is not a number"))
        };
        match arg.as_str() {
            "--kernel" => {
                let v = value("--kernel")?;
                kernel_given = true;
                o.kernels = if v == "all" {
                    promised_series()
                } else {
                    let known: Vec<&str> = SERIES.iter().map(|s| s.name).collect();
                    vec![Series::by_name(&v).ok_or_else(|| {
                        format!("unknown kernel `{v}`; known: {} or all", known.join(", "))
                    })?]
                };
            }
            "--nic" => match value("--nic")?.as_str() {
                "virtio" => o.nic = true,
                "none" => o.nic = false,
                other => return Err(format!("--nic: `{other}` is not virtio or none")),
            },
            "--shell" => o.shell = true,
            "--no-build" => o.build = false,
            "--suite" => o.suite_filters.push(value("--suite")?),
            "--accel" => {
                o.accel = match value("--accel")?.as_str() {
                    "auto" => None,
                    "kvm" => Some(Accel::Kvm),
                    "tcg" => Some(Accel::Tcg),
                    other => return Err(format!("--accel: `{other}` is not auto, kvm or tcg")),
                }
            }
            "--timeout" => {
                o.timeout = Duration::from_secs(number("--timeout", value("--timeout")?)?)
            }
            "--suite-timeout" => {
                o.suite_timeout = number("--suite-timeout", value("--suite-timeout")?)?
            }
            "--test-threads" => {
                o.test_threads = u32::try_from(number("--test-threads", value("--test-threads")?)?)
                    .map_err(|_| "--test-threads: too large".to_owned())?
            }
            "--memory" => o.memory = value("--memory")?,
            "--smp" => {
                o.smp = u32::try_from(number("--smp", value("--smp")?)?)
                    .map_err(|_| "--smp: too large".to_owned())?
            }
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown option `{other}`\n{USAGE}")),
        }
    }
    // The NIC suites are about zero-copy: by default on the first series whose virtio_net
    // offers it.
    if o.nic && !kernel_given {
        o.kernels = SERIES
            .iter()
            .filter(|s| s.name == nics::ZERO_COPY_SERIES)
            .collect();
    }
    if o.shell && o.kernels.len() > 1 {
        if kernel_given {
            return Err("--shell boots one kernel: pick it with --kernel 6.1 or 6.12".to_owned());
        }
        o.kernels.truncate(1);
    }
    Ok(o)
}

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some(GUEST_PROBE) {
        match args.get(1..) {
            Some([flag, nic]) if flag == "--nic" => println!("{}", probe::nic_report(nic)),
            _ => println!("{}", probe::report()),
        }
        return ExitCode::SUCCESS;
    }
    let options = match parse_options(&args) {
        Ok(o) => o,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    match run(&options) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("vm-tests: {message}");
            ExitCode::from(2)
        }
    }
}

/// How one kernel's run ended, for the final summary and the exit status.
struct KernelOutcome {
    series: &'static str,
    ok: bool,
    infra_failure: bool,
    /// The guest kernel panicked because a CPU spun in it (soft lockup):
    /// the run is repeated once (see [`run`]).
    locked_up: bool,
}

/// Directories the guest's init mounts a file system over (`guest.rs`): a checkout or target
/// directory below one of them would be hidden in the guest, since the image mirrors the host's
/// absolute paths.
const GUEST_MOUNT_POINTS: [&str; 4] = ["/proc", "/sys", "/dev", "/run"];

fn check_mirrorable(dir: &std::path::Path) -> Result<(), String> {
    match GUEST_MOUNT_POINTS
        .iter()
        .find(|mount| dir.starts_with(mount))
    {
        Some(mount) => Err(format!(
            "{} is below {mount}, which the guest mounts over: move the checkout (or \
             CARGO_TARGET_DIR) elsewhere",
            dir.display()
        )),
        None => Ok(()),
    }
}

fn run(o: &Options) -> Result<ExitCode, String> {
    check_host_tools()?;
    let ws = Workspace::load()?;
    for dir in [&ws.root, &ws.target_dir] {
        check_mirrorable(dir)?;
    }
    let out_dir = ws.target_dir.join("vm-tests");
    let cache = out_dir.join("cache");
    fs::create_dir_all(&cache).map_err(|e| format!("{}: {e}", cache.display()))?;
    let build_start = Instant::now();
    let artifacts = if o.build {
        artifacts::build(&ws)?
    } else {
        Artifacts::default()
    };
    let c_programs = if o.build {
        artifacts::compile_c_programs(&ws, &out_dir.join("c-programs"))?
    } else {
        CPrograms::default()
    };
    eprintln!(
        "vm-tests: {} test executables, provider library: {}, built in {:.0} s",
        artifacts.tests.len(),
        artifacts
            .provider_lib
            .as_deref()
            .map_or("not built yet".into(), |p| p.display().to_string()),
        build_start.elapsed().as_secs_f64()
    );
    let suites = plan_suites(o, &artifacts);

    let accel = match o.accel {
        Some(a) => a,
        None if qemu::kvm_usable() => Accel::Kvm,
        None => Accel::Tcg,
    };
    let mut outcomes = Vec::new();
    for series in &o.kernels {
        let inputs = Inputs {
            artifacts: &artifacts,
            c_programs: &c_programs,
            suites: &suites,
        };
        let mut outcome = run_kernel(o, series, &cache, &out_dir, &inputs, accel)?;
        if outcome.locked_up && !o.shell {
            // Seen once in many runs, in a suite (bpf/steering) unchanged since it last
            // passed: a guest CPU spun in the kernel for 40 minutes under TCG, whose emulated
            // SMP has had such bugs (see the tsc=unstable note). The trace is kept; the
            // series runs once more, and a second lockup fails it.
            let log = out_dir.join(format!("{}.log", series.name));
            let kept = out_dir.join(format!("{}.lockup.log", series.name));
            let _ = fs::copy(&log, &kept);
            eprintln!(
                "vm-tests: kernel {}: the guest kernel locked up (its console is kept in {}); \
                 running the series once more",
                series.name,
                kept.display()
            );
            outcome = run_kernel(o, series, &cache, &out_dir, &inputs, accel)?;
        }
        outcomes.push(outcome);
    }
    if o.shell {
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!();
    for k in &outcomes {
        eprintln!(
            "vm-tests: kernel {}: {}",
            k.series,
            if k.ok { "PASS" } else { "FAIL" }
        );
    }
    Ok(if outcomes.iter().any(|k| k.infra_failure) {
        ExitCode::from(2)
    } else if outcomes.iter().all(|k| k.ok) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn check_host_tools() -> Result<(), String> {
    let needed = [
        (qemu::QEMU, "qemu-system-x86"),
        ("busybox", "busybox-static"),
        ("ip", "iproute2"),
        ("apt-get", "apt"),
        ("dpkg-deb", "dpkg"),
        ("ldd", "libc-bin"),
    ];
    let missing: Vec<String> = needed
        .iter()
        .filter(|(tool, _)| util::which(tool).is_none())
        .map(|(tool, package)| format!("{tool} (Debian package {package})"))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "missing host tools: {}; `cargo xtask deps` installs them",
            missing.join(", ")
        ))
    }
}

/// The subcommand `/init` runs (this binary, copied into the guest) to report kernel features.
const GUEST_PROBE: &str = "guest-probe";

/// Where the guest finds the provider (`FI_PROVIDER_PATH`).
const GUEST_PROVIDER_DIR: &str = "/usr/lib/ofi-xdp";

/// Modules the guest loads: veth for the test hosts; bridge for N ranks through a bridge
/// (optional: the suite still runs without it).
const GUEST_MODULES: &[(&str, bool)] = &[
    ("veth", true),
    ("bridge", false),
    // Raw Ethernet sockets: the impairing forwarder of the test hosts.
    ("af_packet", false),
    // The token-bucket qdisc: the leaf–spine fabric's shaped links.
    ("sch_tbf", false),
];
/// With `--nic virtio`, also the virtio PCI transport and the virtio-net driver.
const NIC_MODULES: &[(&str, bool)] = &[("virtio_pci", true), ("virtio_net", true)];

/// Tools the tests call, copied with their libraries when the host has them.
const REQUIRED_TOOLS: &[&str] = &["ip"];
const OPTIONAL_TOOLS: &[&str] = &[
    "tc",
    "bridge",
    "ethtool",
    "ping",
    "bpftool",
    "setpriv",
    "prlimit",
    "fi_info",
    "fi_pingpong",
];

/// What goes into every kernel's image.
struct Inputs<'a> {
    artifacts: &'a Artifacts,
    c_programs: &'a CPrograms,
    suites: &'a [Suite],
}

fn build_image(
    dir: &Path,
    tree: &KernelTree,
    inputs: &Inputs,
    shell: bool,
    nic: bool,
) -> Result<Image, String> {
    let (artifacts, suites) = (inputs.artifacts, inputs.suites);
    let mut image = Image::create(dir)?;
    let busybox = util::which("busybox").ok_or("busybox not found")?;
    if !image::shared_libraries(&busybox)?.is_empty() {
        return Err(format!(
            "{} is dynamically linked; install busybox-static",
            busybox.display()
        ));
    }
    // /init's interpreter line names /bin/busybox.
    image.add_host_file(&busybox, false)?;
    image.symlink(Path::new("/bin/busybox"), &busybox)?;
    for d in [
        "/proc", "/sys", "/dev", "/run", "/tmp", "/root", "/etc", "/var/run",
    ] {
        image.ensure_dir(Path::new(d))?;
    }
    image.write_file(
        Path::new("/etc/passwd"),
        b"root:x:0:0:root:/root:/bin/sh\n",
        0o644,
    )?;
    image.write_file(Path::new("/etc/group"), b"root:x:0:\n", 0o644)?;
    image.write_file(
        Path::new("/etc/hosts"),
        b"127.0.0.1 localhost\n::1 localhost\n",
        0o644,
    )?;
    let mut tools = Vec::new();
    for tool in REQUIRED_TOOLS {
        let path = util::which(tool).ok_or_else(|| format!("host has no `{tool}`"))?;
        image.add_with_libraries(&path, false)?;
        tools.push(((*tool).to_owned(), path));
    }
    for tool in OPTIONAL_TOOLS {
        if let Some(path) = util::which(tool) {
            image.add_with_libraries(&path, false)?;
            tools.push(((*tool).to_owned(), path));
        }
    }
    for t in &artifacts.tests {
        image.add_with_libraries(&t.path, true)?;
        image.ensure_dir(&t.package_dir)?;
    }
    for b in &artifacts.bins {
        image.add_with_libraries(b, true)?;
    }
    for lib in &artifacts.provider_files {
        image.add_with_libraries(lib, true)?;
    }
    if let Some(lib) = &artifacts.provider_lib {
        let installed = Path::new(GUEST_PROVIDER_DIR).join(PROVIDER_INSTALLED_NAME);
        image.symlink(&installed, lib)?;
    }
    for (src, contents) in &inputs.c_programs.sources {
        image.write_file(src, contents, 0o644)?;
    }
    for (hash, program) in &inputs.c_programs.programs {
        image.add_with_libraries(program, false)?;
        image.symlink(&Path::new(PREBUILT_DIR).join(hash), program)?;
    }
    image.write_file(
        Path::new(CC_STANDIN),
        guest::cc_standin_script().as_bytes(),
        0o755,
    )?;
    let mut wanted = GUEST_MODULES.to_vec();
    if nic {
        wanted.extend_from_slice(NIC_MODULES);
    }
    let modules = tree.resolve_modules(&wanted)?;
    let mut module_paths = Vec::new();
    for m in &modules {
        let guest = PathBuf::from(format!("/lib/modules/{}/{}.ko", tree.release, m.name));
        image.write_file(&guest, &m.contents, 0o644)?;
        module_paths.push(guest);
    }
    let me = env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    image.add_with_libraries(&me, true)?;
    let guest_nics = if nic {
        nics::GUEST_NICS
            .iter()
            .map(|n| ((*n).to_owned(), nics::QUEUES))
            .collect()
    } else {
        Vec::new()
    };
    let plan = Plan {
        probe: Some(vec![me.display().to_string(), GUEST_PROBE.to_owned()]),
        modules: module_paths,
        shell,
        nic_probe: nic.then(|| {
            vec![
                me.display().to_string(),
                GUEST_PROBE.to_owned(),
                "--nic".to_owned(),
                nics::GUEST_NICS[0].to_owned(),
            ]
        }),
        nics: guest_nics,
    };
    image.write_file(
        Path::new("/init"),
        guest::init_script(&plan).as_bytes(),
        0o755,
    )?;
    image.write_file(Path::new(LIB_SH), guest::lib_sh(&tools).as_bytes(), 0o644)?;
    image.write_file(
        Path::new(RUN_ALL),
        guest::run_all_script(suites).as_bytes(),
        0o755,
    )?;
    image.write_file(Path::new(SMOKE), guest::smoke_script().as_bytes(), 0o755)?;
    image.write_file(
        Path::new(PINGPONG),
        guest::pingpong_script(GUEST_PROVIDER_DIR).as_bytes(),
        0o755,
    )?;
    if nic {
        let scripts = [
            (
                nic_scripts::NIC_FACTS,
                nic_scripts::facts_script(nics::GUEST_NICS),
            ),
            (
                nic_scripts::NIC_PINGPONG,
                nic_scripts::pingpong_script(nics::GUEST_NICS, GUEST_PROVIDER_DIR),
            ),
            (
                nic_scripts::NIC_BENCH,
                nic_scripts::bench_script(nics::GUEST_NICS, GUEST_PROVIDER_DIR, nics::QUEUES),
            ),
        ];
        for (path, text) in scripts {
            image.write_file(Path::new(path), text.as_bytes(), 0o755)?;
        }
    }
    Ok(image)
}

fn run_kernel(
    o: &Options,
    series: &'static Series,
    cache: &Path,
    out_dir: &Path,
    inputs: &Inputs,
    accel: Accel,
) -> Result<KernelOutcome, String> {
    let (artifacts, suites) = (inputs.artifacts, inputs.suites);
    let infra = |message: String| {
        eprintln!("vm-tests: kernel {}: {message}", series.name);
        Ok(KernelOutcome {
            series: series.name,
            ok: false,
            infra_failure: true,
            locked_up: false,
        })
    };
    let prep_start = Instant::now();
    let tree = match kernel::obtain(series, cache) {
        Ok(t) => t,
        Err(e) => return infra(e),
    };
    let config = match tree.check_config() {
        Ok(c) => c,
        Err(e) => return infra(e),
    };
    eprintln!(
        "vm-tests: kernel {}: {} ({})",
        series.name, tree.package, tree.release
    );
    eprintln!("vm-tests: kernel {}: {config}", series.name);
    // A --nic run's files beside the plain run's, not over them.
    let run_name = format!("{}{}", series.name, if o.nic { "-nic" } else { "" });
    let stage = out_dir.join(format!("image-{run_name}"));
    let image = match build_image(&stage, &tree, inputs, o.shell, o.nic) {
        Ok(i) => i,
        Err(e) => return infra(e),
    };
    let initrd = out_dir.join(format!("initramfs-{run_name}.cpio"));
    let size = image.write_cpio(&initrd)?;
    eprintln!(
        "vm-tests: kernel {}: initramfs {} MiB from {}, prepared in {:.1} s",
        series.name,
        size / (1 << 20),
        image.root().display(),
        prep_start.elapsed().as_secs_f64()
    );

    let log = out_dir.join(format!("{run_name}.log"));
    let host_network = if o.nic {
        match nics::HostNetwork::create() {
            Ok(n) => Some(n),
            Err(e) => return infra(format!("creating the NICs' host side: {e}")),
        }
    } else {
        None
    };
    if let Some(n) = &host_network {
        eprintln!("vm-tests: {}", n.describe());
    }
    let results_file = qemu::results_path(&log);
    let _ = fs::remove_file(&results_file);
    // tsc=unstable: under TCG the vCPUs' TSCs drift apart, and a 6.12 guest that trusted its TSC
    // at boot later marked it unstable under load; flipping sched_clock's static key then
    // patches kernel text on a running SMP guest, which TCG got wrong (an int3 Oops in
    // sched_clock_cpu, seen once). 6.1 marks the TSC unstable at boot by itself.
    // softlockup_panic: a CPU stuck in the kernel (a 6.1 guest once spun in a suite for 40
    // minutes, printing only "soft lockup" lines) panics instead, so the run ends at once and
    // the panic's stack dump, printed whatever the console level, says where it spun.
    // watchdog_thresh=60 (a lockup after 120 s, not 20) so a host that stalls the whole VM
    // for a while is not taken for one.
    let append = "console=ttyS0 panic=-1 oops=panic softlockup_panic=1 watchdog_thresh=60 \
                  mitigations=off tsc=unstable rdinit=/init"
        .to_owned();
    let mut cfg = VmConfig {
        kernel: &tree.vmlinuz,
        initrd: &initrd,
        accel,
        memory: &o.memory,
        smp: o.smp,
        append,
        results: &results_file,
        log: &log,
        shell: o.shell,
        boot_timeout: boot_timeout(accel),
        timeout: o.timeout,
        nics: host_network.as_ref(),
    };
    let mut vm = qemu::run(&cfg)?;
    if accel == Accel::Kvm && o.accel.is_none() && vm.ending == Ending::BootTimeout {
        eprintln!("vm-tests: the guest did not boot under KVM; retrying with TCG");
        cfg.accel = Accel::Tcg;
        cfg.boot_timeout = boot_timeout(Accel::Tcg);
        vm = qemu::run(&cfg)?;
    }
    if o.shell {
        return Ok(KernelOutcome {
            series: series.name,
            ok: true,
            infra_failure: false,
            locked_up: false,
        });
    }

    let console = fs::read(&log)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let marker_text = fs::read(&results_file)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let mut report = results::parse_markers(&marker_text);
    if report.booted.is_none() {
        // ttyS1 missing or empty: the console carries the same markers.
        report = results::parse_markers(&console);
    }
    results::attach_notes(&mut report, &console);

    let mut problems = Vec::new();
    match &vm.ending {
        Ending::BootTimeout => problems.push(format!(
            "the guest did not reach /init within {} s",
            cfg.boot_timeout.as_secs()
        )),
        Ending::Timeout => problems.push(format!(
            "timed out after {} s (QEMU killed)",
            o.timeout.as_secs()
        )),
        Ending::Exited { code } if *code != Some(0) => {
            problems.push(format!("QEMU exited with {code:?}"))
        }
        Ending::Exited { .. } => {}
    }
    if let Some(p) = &vm.panic {
        problems.push(format!("kernel panic: {p}"));
    }
    if !report.done && problems.is_empty() {
        problems.push("the guest powered off without finishing the suite".to_owned());
    }
    problems.extend(
        report
            .module_failures
            .iter()
            .map(|m| format!("insmod failed: {m}")),
    );

    print_summary(
        series, &tree, cfg.accel, &vm, &report, suites, artifacts, &log,
    );
    let suites_ok = suites_ok(&report, suites, artifacts);
    if !problems.is_empty() {
        eprintln!("vm-tests: kernel {}: last console lines:", series.name);
        eprintln!("{}", qemu::log_tail(&log, 40));
        for p in &problems {
            eprintln!("vm-tests: kernel {}: FAILED: {p}", series.name);
        }
    }
    Ok(KernelOutcome {
        series: series.name,
        ok: problems.is_empty() && suites_ok,
        infra_failure: !problems.is_empty(),
        locked_up: vm.panic.as_deref().is_some_and(qemu::is_lockup_panic),
    })
}

fn boot_timeout(accel: Accel) -> Duration {
    match accel {
        Accel::Kvm => Duration::from_secs(60),
        Accel::Tcg => Duration::from_secs(240),
    }
}

fn suites_ok(report: &Report, suites: &[Suite], artifacts: &Artifacts) -> bool {
    artifacts.broken.is_empty()
        && suites.iter().all(|s| {
            report
                .suites
                .iter()
                .any(|r| r.name == s.name && r.status.is_ok())
        })
}

#[allow(clippy::too_many_arguments)]
fn print_summary(
    series: &Series,
    tree: &KernelTree,
    accel: Accel,
    vm: &qemu::VmRun,
    report: &Report,
    suites: &[Suite],
    artifacts: &Artifacts,
    log: &Path,
) {
    let suite_seconds: u64 = report.suites.iter().map(|s| s.seconds).sum();
    eprintln!();
    eprintln!(
        "vm-tests: ===== kernel {} ({}, {}) under {} =====",
        series.name,
        tree.package,
        tree.release,
        accel.name()
    );
    eprintln!(
        "vm-tests: boot to /init {} (guest uptime {} s), suites {} s, VM total {:.1} s; log {}",
        vm.boot_seconds
            .map_or("never".to_owned(), |b| format!("{b:.1} s")),
        report
            .booted
            .as_ref()
            .and_then(|b| b.get("uptime"))
            .map_or("?", String::as_str),
        suite_seconds,
        vm.total_seconds,
        log.display()
    );
    if !report.features.is_empty() {
        let features: Vec<String> = report
            .features
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        eprintln!(
            "vm-tests: kernel features (probed in the guest): {}",
            features.join(" ")
        );
    }
    for s in suites {
        match report.suites.iter().find(|r| r.name == s.name) {
            Some(r) => {
                eprintln!("  {:<8} {:>5} s  {}", r.status.label(), r.seconds, r.name);
                const MAX_NOTES: usize = 12;
                for n in r.notes.iter().take(MAX_NOTES) {
                    eprintln!("                    {n}");
                }
                if r.notes.len() > MAX_NOTES {
                    eprintln!(
                        "                    ... {} more in the log",
                        r.notes.len() - MAX_NOTES
                    );
                }
                for k in &r.skipped {
                    eprintln!("                    skipped: {k}");
                }
            }
            None => eprintln!(
                "  {:<8} {:>5}    {} (no result: the VM ended first)",
                "MISSING", "-", s.name
            ),
        }
    }
    for t in &artifacts.tests {
        if let Some(why) = artifacts::not_in_vm(t) {
            eprintln!("  {:<8} {:>5}    {}: {why}", "NOT-RUN", "-", t.suite_name());
        }
    }
    let skipped: usize = report.suites.iter().map(|r| r.skipped.len()).sum();
    eprintln!(
        "vm-tests: kernel {}: {skipped} test(s) skipped in the guest (listed above under their \
         suite){}",
        series.name,
        if suites.iter().any(|s| s.argv.iter().any(|a| a == "--skip")) {
            "; tests left out by `--skip` filters are counted as \"filtered out\" (plan.rs says why)"
        } else {
            ""
        }
    );
    for (package, error) in &artifacts.broken {
        eprintln!(
            "  {:<8} {:>5}    {package}: {error}",
            Status::Fail.label(),
            "-"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernels(args: &[&str]) -> Vec<&'static str> {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        let o = parse_options(&args).unwrap_or_else(|e| panic!("{e}"));
        o.kernels.iter().map(|s| s.name).collect()
    }

    #[test]
    fn all_is_the_promised_kernels_and_nic_runs_boot_the_zero_copy_one() {
        assert_eq!(kernels(&[]), ["6.1", "6.12"]);
        assert_eq!(kernels(&["--kernel", "all"]), ["6.1", "6.12"]);
        assert_eq!(kernels(&["--kernel", "6.18"]), ["6.18"]);
        assert_eq!(kernels(&["--nic", "virtio"]), [nics::ZERO_COPY_SERIES]);
        assert_eq!(kernels(&["--nic", "virtio", "--kernel", "6.12"]), ["6.12"]);
    }
}
