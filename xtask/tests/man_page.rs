//! `fi_xdp(7)` cannot drift from the provider: every parameter `fi_info -e` lists for the
//! provider is documented in the page's RUNTIME PARAMETERS, and the page documents no
//! parameter the provider does not define; the page has the sections of libfabric's own
//! provider pages and converts with pandoc.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use xtask::man;

/// The directory holding `libxdp-fi.so`: FI_PROVIDER_PATH (set by `cargo xtask test`), else
/// what `cargo xtask build` makes.
fn provider_dir() -> PathBuf {
    let dir = std::env::var_os("FI_PROVIDER_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(xtask::steps::provider_dir);
    assert!(
        dir.join("libxdp-fi.so").is_file(),
        "{} has no libxdp-fi.so: run `cargo xtask build` (or through `cargo xtask test`)",
        dir.display()
    );
    dir
}

/// The `FI_XDP_*` variables `fi_info -e` lists (`# FI_XDP_IFACE: String`).
fn listed_by_fi_info() -> BTreeSet<String> {
    let out = Command::new("fi_info")
        .arg("-e")
        .env("FI_PROVIDER_PATH", provider_dir())
        .env_remove("FI_PROVIDER")
        .output()
        .expect("run fi_info (libfabric-bin)");
    // fi_info prints a NUL inside some values: read it as bytes, lossily.
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("# FI_XDP_"))
        .filter_map(|l| l.split_once(':'))
        .map(|(name, _)| format!("FI_XDP_{name}"))
        .collect()
}

fn page_source() -> String {
    std::fs::read_to_string(man::source()).unwrap()
}

#[test]
fn runtime_parameters_match_fi_info_both_ways() {
    let listed = listed_by_fi_info();
    assert!(
        listed.len() >= 10,
        "fi_info -e listed only {listed:?}: provider not loaded?"
    );
    let documented_list = man::documented_parameters(&page_source());
    let documented: BTreeSet<String> = documented_list.iter().cloned().collect();
    assert_eq!(
        documented.len(),
        documented_list.len(),
        "a parameter is documented twice"
    );
    let undocumented: Vec<_> = listed.difference(&documented).collect();
    let unknown: Vec<_> = documented.difference(&listed).collect();
    assert!(
        undocumented.is_empty() && unknown.is_empty(),
        "fi_xdp(7) RUNTIME PARAMETERS out of date: missing {undocumented:?}, \
         not defined by the provider {unknown:?}"
    );
}

#[test]
fn page_has_the_sections_of_a_libfabric_provider_page_and_converts() {
    let md = page_source();
    let headings: Vec<&str> = md.lines().filter_map(|l| l.strip_prefix("# ")).collect();
    let wanted = [
        "NAME",
        "OVERVIEW",
        "SUPPORTED FEATURES",
        "LIMITATIONS",
        "RUNTIME PARAMETERS",
        "PERFORMANCE",
        "SEE ALSO",
    ];
    let mut at = 0;
    for w in wanted {
        let i = headings
            .iter()
            .position(|h| *h == w)
            .unwrap_or_else(|| panic!("no section {w} in {headings:?}"));
        assert!(i >= at, "{w} out of order in {headings:?}");
        at = i;
    }
    let out = std::env::temp_dir().join(format!("fi_xdp.7.test.{}", std::process::id()));
    man::render(&man::source(), &out).unwrap();
    let troff = std::fs::read_to_string(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    assert!(
        troff.contains(".TH \"fi_xdp\" \"7\""),
        "{}",
        &troff[..400.min(troff.len())]
    );
    assert!(troff.contains(".SH RUNTIME PARAMETERS"));
}
