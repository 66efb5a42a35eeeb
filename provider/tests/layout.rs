//! ABI check: every `#[repr(C)]` mirror in `xdp_fi::sys` has the size and
//! field offsets the libfabric 1.17 headers give it, and every constant has
//! the header's value. A C program generated from the same list is compiled
//! with `cc` against /usr/include/rdma and its output compared line by line.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::fmt::Write as _;
use std::process::Command;

use xdp_fi::sys::layout::{rust_constants, rust_layout};

fn c_program() -> String {
    let mut c = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include <rdma/fabric.h>\n#include <rdma/fi_domain.h>\n\
         #include <rdma/fi_endpoint.h>\n#include <rdma/fi_eq.h>\n#include <rdma/fi_cm.h>\n#include <rdma/fi_tagged.h>\n\
         #include <rdma/fi_rma.h>\n#include <rdma/fi_atomic.h>\n#include <rdma/fi_errno.h>\n\
         #include <rdma/fi_collective.h>\n\
         #include <rdma/providers/fi_prov.h>\n#include <rdma/providers/fi_log.h>\n\
         int main(void) {\n",
    );
    for (st, field, _) in rust_layout() {
        match field {
            None => writeln!(c, "printf(\"{st} sizeof %zu\\n\", sizeof(struct {st}));").unwrap(),
            Some(f) => writeln!(
                c,
                "printf(\"{st} {f} %zu\\n\", offsetof(struct {st}, {f}));"
            )
            .unwrap(),
        }
    }
    for (name, _) in rust_constants() {
        writeln!(
            c,
            "printf(\"{name} %llu\\n\", (unsigned long long)({name}));"
        )
        .unwrap();
    }
    c.push_str("return 0;\n}\n");
    c
}

fn rust_side() -> Vec<String> {
    let mut v = Vec::new();
    for (st, field, value) in rust_layout() {
        match field {
            None => v.push(format!("{st} sizeof {value}")),
            Some(f) => v.push(format!("{st} {f} {value}")),
        }
    }
    for (name, value) in rust_constants() {
        // C prints (unsigned long long)value: two's complement for negatives.
        v.push(format!("{name} {}", value as u64));
    }
    v
}

#[test]
fn mirrors_match_the_c_headers() {
    let dir = tempdir();
    let src = format!("{dir}/layout.c");
    let bin = format!("{dir}/layout");
    std::fs::write(&src, c_program()).unwrap();
    let cc = Command::new("cc")
        .args(["-Wall", "-o", &bin, &src])
        .output()
        .expect("run cc");
    assert!(
        cc.status.success(),
        "cc failed:\n{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let out = Command::new(&bin).output().expect("run layout program");
    assert!(out.status.success());
    let c_lines: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let r_lines = rust_side();
    assert_eq!(c_lines.len(), r_lines.len());
    let diffs: Vec<String> = c_lines
        .iter()
        .zip(&r_lines)
        .filter(|(c, r)| c != r)
        .map(|(c, r)| format!("C: {c}   Rust: {r}"))
        .collect();
    assert!(diffs.is_empty(), "layout mismatches:\n{}", diffs.join("\n"));
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempdir() -> String {
    let d = std::env::temp_dir().join(format!("xdp-layout-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.to_string_lossy().into_owned()
}
