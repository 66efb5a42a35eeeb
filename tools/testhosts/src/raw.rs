//! Raw Ethernet access to a test host's interface (`AF_PACKET`): send
//! frames exactly as given, and see every frame the interface receives —
//! what an attacker on the segment does, and what the impairing forwarder
//! moves.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// A raw socket on one interface, non-blocking, with 16 MiB of buffers.
#[derive(Debug)]
pub struct RawPort {
    fd: OwnedFd,
    /// Also report frames the interface sends (a tap on a bridge port:
    /// what the bridge sends a host leaves through its port).
    outgoing: bool,
}

/// Move this thread into network namespace `name`.
pub(crate) fn enter_netns(name: &str) -> io::Result<()> {
    let f = std::fs::File::open(format!("/run/netns/{name}"))?;
    // SAFETY: setns on an open namespace file descriptor, for this thread.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl RawPort {
    /// A raw socket on interface `ifname` of namespace `netns` (the socket
    /// stays bound to it whichever thread uses it afterwards).
    pub fn open(netns: &str, ifname: &str) -> io::Result<RawPort> {
        let (netns, ifname) = (netns.to_owned(), ifname.to_owned());
        std::thread::scope(|s| {
            s.spawn(|| {
                enter_netns(&netns)?;
                RawPort::bind(&ifname)
            })
            .join()
            .map_err(|_| io::Error::other("raw socket thread panicked"))?
        })
    }

    /// A raw socket on interface `name` of the calling thread's namespace.
    pub(crate) fn bind(name: &str) -> io::Result<RawPort> {
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: plain socket(2).
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                i32::from(proto),
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a new socket we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let cname = std::ffi::CString::new(name).map_err(io::Error::other)?;
        // SAFETY: a NUL-terminated name.
        let index = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        if index == 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: zeroed sockaddr_ll is valid; fields set below.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = index as i32;
        // SAFETY: bind with a valid sockaddr_ll of its size.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        // Room for bursts (a 1 MiB message is a burst of frames).
        let bytes: libc::c_int = 16 << 20;
        for opt in [libc::SO_RCVBUFFORCE, libc::SO_SNDBUFFORCE] {
            // SAFETY: setsockopt with an int option value.
            unsafe {
                libc::setsockopt(
                    fd.as_raw_fd(),
                    libc::SOL_SOCKET,
                    opt,
                    (&bytes as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                );
            }
        }
        Ok(RawPort {
            fd,
            outgoing: false,
        })
    }

    /// A tap: [`RawPort::try_recv`] also reports the frames the interface
    /// sends out.
    pub(crate) fn seeing_outgoing(mut self) -> Self {
        self.outgoing = true;
        self
    }

    pub(crate) fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// Send `frame` (Ethernet header onwards) as it is. A frame the
    /// interface cannot take is lost, as on a wire.
    pub fn send(&self, frame: &[u8]) {
        // SAFETY: frame is valid for reads of its length.
        unsafe {
            libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0);
        }
    }

    /// One frame the interface received (or, on a tap, sent), if any is
    /// waiting: its length in `buf`.
    pub fn try_recv(&self, buf: &mut [u8]) -> Option<usize> {
        loop {
            // SAFETY: zeroed sockaddr_ll is valid output space.
            let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            // SAFETY: buf and from are valid for writes of their sizes.
            let n = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    0,
                    (&mut from as *mut libc::sockaddr_ll).cast(),
                    &mut len,
                )
            };
            if n < 0 {
                return None;
            }
            if from.sll_pkttype == libc::PACKET_OUTGOING && !self.outgoing {
                continue;
            }
            return Some(n as usize);
        }
    }

    /// Like [`RawPort::try_recv`], waiting at most `timeout`.
    pub fn recv(&self, buf: &mut [u8], timeout: Duration) -> Option<usize> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(n) = self.try_recv(buf) {
                return Some(n);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            let mut p = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut p, 1, left.as_millis().clamp(1, 100) as i32) };
        }
    }
}
