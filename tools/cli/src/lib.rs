//! Library side of the `ofi-xdp` tools: what other programs (and the tools'
//! tests) share with the binary.

/// The per-endpoint statistics file (written by the provider).
pub use ofi_xdp_epstats as epstats;
