//! ABI check: every `#[repr(C)]` mirror in `xdp_fi::sys` has the size and
//! field offsets the libfabric headers give it, and every constant has the
//! header's value. A C program generated from the same list is compiled
//! with `cc` and its output compared line by line, against two ABIs: the
//! 1.17 headers in /usr/include/rdma, and the 2.1 headers of Debian 13's
//! libfabric-dev (downloaded and cached, see `debian/mod.rs`), where the
//! structs 2.x extended must keep our fields as their prefix
//! (`sys::layout::EXTENDED_IN_2`). `XDP_LIBFABRIC2_INCLUDE` names further
//! 2.x include directories to check (`:`-separated), e.g. a source tree's
//! `include/`.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

mod debian;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use xdp_fi::sys::layout::{
    CHANGED_IN_2, EXTENDED_IN_2, LayoutItem, rust_constants, rust_constants_2, rust_layout,
    rust_layout_2,
};

/// The ABI a header tree carries.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Abi {
    V1,
    V2,
}

/// One expected output line of the C program: `name value`, where an
/// extended struct's size only has to be at least ours.
struct Fact {
    /// The printf producing the line.
    c: String,
    key: String,
    value: u64,
    at_least: bool,
}

fn facts(abi: Abi) -> Vec<Fact> {
    let extended = |st: &str| abi == Abi::V2 && EXTENDED_IN_2.iter().any(|(s, _)| *s == st);
    let mut layout: Vec<LayoutItem> = rust_layout();
    let mut constants = rust_constants();
    if abi == Abi::V2 {
        // The 2.x mirror's size replaces the 1.17 one.
        let mirrored: Vec<&str> = rust_layout_2().iter().map(|(s, _, _)| *s).collect();
        layout.retain(|(st, f, _)| f.is_some() || !mirrored.contains(st));
        layout.extend(rust_layout_2());
        constants.retain(|(name, _)| CHANGED_IN_2.iter().all(|(n, _)| n != name));
        constants.extend(rust_constants_2());
    }
    let mut v = Vec::new();
    for (st, field, value) in layout {
        v.push(match field {
            None => Fact {
                c: format!("printf(\"{st} sizeof %zu\\n\", sizeof(struct {st}));"),
                key: format!("{st} sizeof"),
                value: value as u64,
                at_least: extended(st),
            },
            Some(f) => Fact {
                c: format!("printf(\"{st} {f} %zu\\n\", offsetof(struct {st}, {f}));"),
                key: format!("{st} {f}"),
                value: value as u64,
                at_least: false,
            },
        });
    }
    for (name, value) in constants {
        v.push(Fact {
            c: format!("printf(\"{name} %llu\\n\", (unsigned long long)({name}));"),
            key: name.to_owned(),
            // C prints (unsigned long long)value: two's complement for negatives.
            value: value as u64,
            at_least: false,
        });
    }
    v
}

fn c_program(facts: &[Fact]) -> String {
    let mut c = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include <rdma/fabric.h>\n#include <rdma/fi_domain.h>\n\
         #include <rdma/fi_endpoint.h>\n#include <rdma/fi_eq.h>\n#include <rdma/fi_cm.h>\n#include <rdma/fi_tagged.h>\n\
         #include <rdma/fi_rma.h>\n#include <rdma/fi_atomic.h>\n#include <rdma/fi_errno.h>\n\
         #include <rdma/fi_collective.h>\n\
         #include <rdma/providers/fi_prov.h>\n#include <rdma/providers/fi_log.h>\n\
         int main(void) {\n",
    );
    for f in facts {
        writeln!(c, "{}", f.c).unwrap();
    }
    c.push_str("return 0;\n}\n");
    c
}

/// Compiles the program against the headers under `include` (the system's
/// when `None`) and compares its output with `facts`.
fn check(include: Option<&Path>, abi: Abi) {
    let facts = facts(abi);
    let dir = tempdir(abi);
    let src = dir.join("layout.c");
    let bin = dir.join("layout");
    std::fs::write(&src, c_program(&facts)).unwrap();
    let mut cc = Command::new("cc");
    // 2.x marks what it deprecated with `#pragma GCC warning`: expected here.
    cc.args(["-Wall", "-Wno-cpp", "-o"]).arg(&bin).arg(&src);
    if let Some(inc) = include {
        cc.arg("-I").arg(inc);
    }
    let out = cc.output().expect("run cc");
    assert!(
        out.status.success(),
        "cc against {include:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(&bin).output().expect("run layout program");
    assert!(out.status.success());
    let c_lines: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(c_lines.len(), facts.len());
    let diffs: Vec<String> = c_lines
        .iter()
        .zip(&facts)
        .filter(|(c, f)| {
            let Some(value) = c
                .strip_prefix(&f.key)
                .and_then(|v| v.trim().parse::<u64>().ok())
            else {
                return true;
            };
            if f.at_least {
                value < f.value
            } else {
                value != f.value
            }
        })
        .map(|(c, f)| {
            let rel = if f.at_least { ">=" } else { "==" };
            format!("C: {c}   Rust: {} {rel} {}", f.key, f.value)
        })
        .collect();
    assert!(
        diffs.is_empty(),
        "layout mismatches against {include:?} ({abi:?}):\n{}",
        diffs.join("\n")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mirrors_match_the_libfabric_1_17_headers() {
    check(None, Abi::V1);
}

/// Debian 13's libfabric-dev: libfabric 2.1.
#[test]
fn mirrors_match_the_libfabric_2_headers() {
    let root = debian::unpacked(&["libfabric-dev"]);
    let include = root.join("usr/include");
    assert!(
        include.join("rdma/fabric.h").exists(),
        "{} has no rdma/fabric.h",
        include.display()
    );
    check(Some(&include), Abi::V2);
    for extra in std::env::var("XDP_LIBFABRIC2_INCLUDE")
        .unwrap_or_default()
        .split(':')
        .filter(|s| !s.is_empty())
    {
        check(Some(Path::new(extra)), Abi::V2);
    }
}

fn tempdir(abi: Abi) -> PathBuf {
    let d = std::env::temp_dir().join(format!("xdp-layout-{abi:?}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}
