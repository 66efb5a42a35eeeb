//! The AF_XDP data path behind [`crate::datapath::DataPath`]. It sits
//! below the libfabric objects and uses only the seam's types
//! ([`crate::datapath`]); the endpoint opens it in `fi_enable`.
//!
//! - [`port`]: one AF_XDP socket (`ofi-xdp-link`) on the endpoint's UDP port,
//!   plus the steering program (`ofi-xdp-bpf`), shared by every endpoint of
//!   the process on the same interface, that redirects the port into it.
//! - [`dgram`]: FI_EP_DGRAM: one libfabric message = one UDP datagram, the
//!   payload exactly the application's bytes (so a kernel UDP socket can be
//!   the peer), unreliable, no tags.
//! - [`rdm`]: FI_EP_RDM through the reliability engine (`ofi-xdp-reliability`),
//!   and FI_EP_MSG: the same with one peer, chosen by its connection
//!   (`connected`).
//! - `published`: each endpoint's identity and counters in a statistics file
//!   that `ofi-xdp status` reads from another process.

mod connected;
pub mod dgram;
mod entropy;
mod pass_clock;
mod peers;
pub mod port;
mod published;
pub mod rdm;

use crate::abi::Result;
use crate::datapath::{DataPath, OpenArgs};

/// CLOCK_MONOTONIC in nanoseconds. Read on every progress pass and every
/// send: one vDSO call, without `std::time::Instant`'s `Duration`
/// arithmetic, which measured about as much again (≈ 110 against 60 cycles).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always
    // exists, so the call cannot fail (a zero time would only look early).
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// Start the data path for an endpoint being enabled: an AF_XDP socket on
/// the endpoint's interface and queue (or, when that is taken, the kernel
/// UDP socket alone), the steering program, and (RDM, MSG) the
/// reliability engine.
pub fn open(args: &OpenArgs) -> Result<Box<dyn DataPath>> {
    let port = port::Port::open(args)?;
    if args.reliable() {
        Ok(Box::new(rdm::Rdm::new(port, args)))
    } else {
        Ok(Box::new(dgram::Dgram::new(port, args)))
    }
}
