//! One interface over the two datagram paths the benchmark compares: the
//! AF_XDP link and a kernel UDP socket. Both are driven by busy polling, so
//! the comparison is between the data paths, not between wakeup mechanisms.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use ofi_xdp_link::{Link, LinkAddr, LinkError};

/// How long a send may wait for TX room before giving up.
const SEND_STALL: Duration = Duration::from_secs(2);

/// A datagram path polled without blocking.
pub trait Path {
    /// Peer address type.
    type Addr: Copy + std::fmt::Debug;
    /// Hands every datagram available now (up to a burst) to `f`.
    fn recv_batch(&mut self, f: &mut dyn FnMut(Self::Addr, &[u8])) -> Result<usize, String>;
    /// Queues (link) or sends (kernel) one datagram, waiting for room.
    fn send_to(&mut self, to: Self::Addr, data: &[u8]) -> Result<(), String>;
    /// Pushes queued datagrams out.
    fn flush(&mut self) -> Result<(), String>;
}

/// The AF_XDP link.
pub struct LinkPath {
    pub link: Link,
}

impl Path for LinkPath {
    type Addr = LinkAddr;

    fn recv_batch(&mut self, f: &mut dyn FnMut(LinkAddr, &[u8])) -> Result<usize, String> {
        Ok(self.link.recv(64, |d| f(d.src, d.payload)))
    }

    fn send_to(&mut self, to: LinkAddr, data: &[u8]) -> Result<(), String> {
        let start = Instant::now();
        loop {
            match self.link.send_copy(&to, data) {
                Ok(()) => return Ok(()),
                Err(LinkError::NoTxFrame | LinkError::TxRingFull) => {
                    self.flush()?;
                    if start.elapsed() > SEND_STALL {
                        return Err("link TX stalled: no completions for 2 s".into());
                    }
                }
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    fn flush(&mut self) -> Result<(), String> {
        self.link.flush().map_err(|e| e.to_string())?;
        self.link.reap_completions();
        Ok(())
    }
}

/// A kernel UDP socket in non-blocking mode.
pub struct KernelPath {
    pub sock: UdpSocket,
    buf: Vec<u8>,
}

impl KernelPath {
    pub fn new(sock: UdpSocket) -> io::Result<Self> {
        sock.set_nonblocking(true)?;
        Ok(Self {
            sock,
            buf: vec![0; 65536],
        })
    }
}

impl Path for KernelPath {
    type Addr = SocketAddr;

    fn recv_batch(&mut self, f: &mut dyn FnMut(SocketAddr, &[u8])) -> Result<usize, String> {
        let mut n = 0;
        while n < 64 {
            match self.sock.recv_from(&mut self.buf) {
                Ok((len, from)) => {
                    f(from, &self.buf[..len]);
                    n += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // ICMP errors surfacing on the socket (e.g. ECONNREFUSED
                // while the peer is not listening yet) are not fatal.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => break,
                Err(e) => return Err(format!("recv_from: {e}")),
            }
        }
        Ok(n)
    }

    fn send_to(&mut self, to: SocketAddr, data: &[u8]) -> Result<(), String> {
        let start = Instant::now();
        loop {
            match self.sock.send_to(data, to) {
                Ok(_) => return Ok(()),
                Err(e)
                    if e.kind() == io::ErrorKind::WouldBlock
                        || e.raw_os_error() == Some(libc::ENOBUFS)
                        || e.kind() == io::ErrorKind::ConnectionRefused =>
                {
                    if start.elapsed() > SEND_STALL {
                        return Err(format!("send_to stalled: {e}"));
                    }
                    std::hint::spin_loop();
                }
                Err(e) => return Err(format!("send_to: {e}")),
            }
        }
    }

    fn flush(&mut self) -> Result<(), String> {
        Ok(())
    }
}
