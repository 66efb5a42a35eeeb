//! Link against the system libfabric: the provider calls fi_dupinfo,
//! fi_freeinfo, fi_log and fi_param_* from the core that loaded it.
fn main() {
    println!("cargo:rustc-link-lib=dylib=fabric");
    println!("cargo:rerun-if-changed=build.rs");
}
