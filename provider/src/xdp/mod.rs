//! The AF_XDP data path behind [`crate::datapath::DataPath`].
//!
//! - [`port`]: one AF_XDP socket (`ofi-xdp-link`) on the endpoint's UDP port,
//!   plus the steering program (`ofi-xdp-bpf`), shared by every endpoint of
//!   the process on the same interface, that redirects the port into it.
//! - [`dgram`]: FI_EP_DGRAM: one libfabric message = one UDP datagram, the
//!   payload exactly the application's bytes (so a kernel UDP socket can be
//!   the peer), unreliable, no tags.
//! - [`rdm`]: FI_EP_RDM through the reliability engine (`ofi-xdp-reliability`).

pub mod dgram;
pub mod port;
pub mod rdm;

use crate::abi::Result;
use crate::datapath::{DataPath, OpenArgs};
use crate::sys::FI_EP_RDM;

/// Open the data path for an endpoint being enabled.
pub fn open(args: &OpenArgs) -> Result<Box<dyn DataPath>> {
    let port = port::Port::open(args)?;
    if args.ep_type == FI_EP_RDM {
        Ok(Box::new(rdm::Rdm::new(port, args)))
    } else {
        Ok(Box::new(dgram::Dgram::new(port, args)))
    }
}

/// Copy `src` into the scatter list `iov` starting at byte `offset`;
/// returns the bytes copied (bounded by the list's capacity).
///
/// # Safety
/// Every `(addr, len)` in `iov` must be writable application memory, as
/// fi_recv(3) requires until the receive completes.
pub unsafe fn scatter(iov: &[(usize, usize)], mut offset: usize, mut src: &[u8]) -> usize {
    let mut done = 0;
    for &(base, len) in iov {
        if src.is_empty() {
            break;
        }
        if offset >= len {
            offset -= len;
            continue;
        }
        let n = (len - offset).min(src.len());
        // SAFETY: within the application's buffer per the caller.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), (base + offset) as *mut u8, n) };
        src = &src[n..];
        done += n;
        offset = 0;
    }
    done
}

/// Copy bytes from the gather list `iov`, starting at byte `offset`, into
/// `dst` (zero-filling anything past the list's end).
///
/// # Safety
/// Every `(addr, len)` in `iov` must be readable application memory, as
/// fi_send(3) requires until the send completes.
pub unsafe fn gather(iov: &[(usize, usize)], mut offset: usize, dst: &mut [u8]) {
    let mut at = 0;
    for &(base, len) in iov {
        if at == dst.len() {
            break;
        }
        if offset >= len {
            offset -= len;
            continue;
        }
        let n = (len - offset).min(dst.len() - at);
        // SAFETY: within the application's buffer per the caller.
        unsafe {
            std::ptr::copy_nonoverlapping((base + offset) as *const u8, dst[at..].as_mut_ptr(), n)
        };
        at += n;
        offset = 0;
    }
    dst[at..].fill(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scatter_gather_across_iovs() {
        let mut a = [0u8; 3];
        let mut b = [0u8; 5];
        let iov = [(a.as_mut_ptr() as usize, 3), (b.as_mut_ptr() as usize, 5)];
        // SAFETY: iov points at the two local arrays.
        let n = unsafe { scatter(&iov, 2, &[1, 2, 3, 4, 5, 6, 7, 8]) };
        assert_eq!(n, 6);
        assert_eq!(a, [0, 0, 1]);
        assert_eq!(b, [2, 3, 4, 5, 6]);
        let mut out = [9u8; 7];
        // SAFETY: as above.
        unsafe { gather(&iov, 1, &mut out) };
        assert_eq!(out, [0, 1, 2, 3, 4, 5, 6]);
        let mut tail = [9u8; 4];
        // SAFETY: as above.
        unsafe { gather(&iov, 6, &mut tail) };
        assert_eq!(tail, [5, 6, 0, 0]);
    }
}
