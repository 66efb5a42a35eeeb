//! Compiles `src/steer.bpf.c` into an eBPF ELF object in `OUT_DIR` with clang
//! (`-target bpf -O2 -g`: `-g` emits the BTF that aya needs for BTF-defined
//! maps). The object is embedded by `src/lib.rs` with `include_bytes!`; no
//! prebuilt object is committed.

use std::env;
use std::path::PathBuf;
use std::process::Command;

const SOURCE: &str = "src/steer.bpf.c";

fn main() {
    println!("cargo:rerun-if-changed={SOURCE}");
    println!("cargo:rerun-if-env-changed=CLANG");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let object = out_dir.join("steer.bpf.o");
    let clang = env::var_os("CLANG").unwrap_or_else(|| "clang".into());

    let mut cmd = Command::new(&clang);
    cmd.args(["-target", "bpf", "-O2", "-g", "-Wall", "-Werror"]);
    // The uapi headers (`linux/*.h`) include `asm/types.h`, which Debian puts
    // under the multiarch directory; clang's bpf target does not search it.
    for dir in multiarch_include_dirs() {
        cmd.arg("-I").arg(dir);
    }
    cmd.arg("-c").arg(SOURCE).arg("-o").arg(&object);

    let status = match cmd.status() {
        Ok(status) => status,
        Err(err) => {
            eprintln!(
                "error: could not run `{}` to build the XDP program ({err}).\n\
                 Install the system packages with `cargo xtask deps` \
                 (clang and libbpf-dev), or point the CLANG variable at a clang binary.",
                clang.to_string_lossy()
            );
            std::process::exit(1);
        }
    };
    if !status.success() {
        eprintln!(
            "error: clang failed to compile {SOURCE} ({status}).\n\
             If it says a header such as bpf/bpf_helpers.h or asm/types.h is missing, \
             run `cargo xtask deps` (installs libbpf-dev and the kernel uapi headers)."
        );
        std::process::exit(1);
    }
}

fn multiarch_include_dirs() -> Vec<PathBuf> {
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let triple = match arch.as_str() {
        "x86_64" => "x86_64-linux-gnu",
        "aarch64" => "aarch64-linux-gnu",
        "riscv64" => "riscv64-linux-gnu",
        "powerpc64" => "powerpc64le-linux-gnu",
        "s390x" => "s390x-linux-gnu",
        _ => "",
    };
    let mut dirs = Vec::new();
    if !triple.is_empty() {
        let dir = PathBuf::from("/usr/include").join(triple);
        if dir.is_dir() {
            dirs.push(dir);
        }
    }
    dirs
}
