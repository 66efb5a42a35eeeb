//! An endpoint's doorbell: a Unix datagram socket in the abstract namespace
//! (unix(7); scoped to the network namespace, gone with its last
//! descriptor, so a killed process leaves nothing behind), named like the
//! endpoint's area. It is one of the fds the endpoint's wait fd watches;
//! a sender rings it only when the reader said it is about to sleep, so a
//! reader that is polling costs its senders no system call.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::linux::net::SocketAddrExt as _;
use std::os::unix::net::{SocketAddr, UnixDatagram};

fn address(name: &str) -> io::Result<SocketAddr> {
    SocketAddr::from_abstract_name(name.as_bytes())
}

/// Our doorbell (bound) and the socket we ring others' with.
pub struct Doorbell {
    bell: UnixDatagram,
    ringer: UnixDatagram,
}

impl Doorbell {
    pub fn bind(name: &str) -> io::Result<Doorbell> {
        let bell = UnixDatagram::bind_addr(&address(name)?)?;
        bell.set_nonblocking(true)?;
        let ringer = UnixDatagram::unbound()?;
        ringer.set_nonblocking(true)?;
        Ok(Doorbell { bell, ringer })
    }

    pub fn fd(&self) -> RawFd {
        self.bell.as_raw_fd()
    }

    /// Empties our doorbell (the rings it holds have done their job).
    pub fn drain(&self) {
        let mut b = [0u8; 8];
        for _ in 0..64 {
            if self.bell.recv(&mut b).is_err() {
                return;
            }
        }
    }

    /// Whether an endpoint is bound to the doorbell `name`: its process
    /// has it open until it exits (a zombie's descriptors are closed
    /// already, unlike its pid). Costs three system calls.
    pub fn is_bound(name: &str) -> bool {
        let Ok(a) = address(name) else {
            return false;
        };
        let Ok(s) = UnixDatagram::unbound() else {
            return true;
        };
        match s.connect_addr(&a) {
            Err(e) => e.raw_os_error() != Some(libc::ECONNREFUSED),
            Ok(()) => true,
        }
    }

    /// Rings the doorbell `name`. A full one (EAGAIN) is rung already; a
    /// missing one belongs to a reader that is gone: either way nothing
    /// to do.
    pub fn ring(&self, name: &str) {
        if let Ok(a) = address(name) {
            let _ = self.ringer.send_to_addr(&[1], &a);
        }
    }
}
