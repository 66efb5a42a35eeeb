//! Library side of the `ofi-xdp` tools: what other programs (and the tools'
//! tests) share with the binary.

pub mod epstats;
