//! The bulk path (PROTOCOL.md §2.5): segments of large transfers through
//! the kernel's UDP offloads instead of one AF_XDP frame each.
//!
//! In copy mode AF_XDP costs a kernel copy and a descriptor per frame (about
//! 0.6 Mpps on veth at MTU 1500), while the kernel itself moves UDP in
//! 64 KiB batches: a send with `UDP_SEGMENT` (udp(7), GSO) crosses the
//! stack once and is cut into datagrams as late as possible (by the NIC, or
//! not at all on veth), and a socket with `UDP_GRO` takes such a batch back
//! in one read with the size of its datagrams. So an endpoint opens a second
//! UDP socket, its bulk port, which the steering program does not steer
//! (the kernel delivers it), and states it in its handshake; a peer sends
//! it the segments of transfers of at least `FI_XDP_BULK_MIN` bytes, from
//! its own UDP socket (so they come from its own address, which is how we
//! know the peer), batched per destination. The datagrams are the
//! protocol's, unchanged: sequence numbers, acks, retransmission,
//! authentication and completions are the engine's as on any path.

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};

use ofi_xdp_link::LinkError;
use ofi_xdp_reliability::wire::bulk::Segments;

use super::kernel::{grow_receive_buffer, recv_msg, retry_icmp_errors, set_int_option};
use crate::sys::FI_LOG_EP_DATA;
use crate::xdp_warn;

/// Most datagrams one send hands the kernel (`UDP_MAX_SEGMENTS` of Linux
/// before 6.9; newer ones take 128).
const MAX_SEGMENTS: usize = 64;
/// Most bytes one send hands the kernel: a UDP datagram's length field
/// bounds the batch (65,507 payload bytes over IPv4).
const MAX_BATCH_BYTES: usize = 65_000;
/// Largest read the receive offload hands up (a GRO batch is at most 64 KiB).
const MAX_READ: usize = 1 << 16;
/// After a bulk datagram arrived, the bulk socket is read on every pass for
/// this many passes (a syscall each); otherwise as rarely as the kernel
/// socket (`KERNEL_POLL_EVERY`), or when a sleeping reader's poll says so.
const BUSY_PASSES: u32 = 1 << 16;

/// What the bulk path carried, for the statistics and the closing log line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BulkCounts {
    /// Datagrams sent to peers' bulk ports.
    pub tx_datagrams: u64,
    /// System calls that sent them.
    pub tx_sends: u64,
    /// Datagrams received on our bulk port.
    pub rx_datagrams: u64,
    /// Reads that received them.
    pub rx_reads: u64,
}

/// Datagrams to one destination waiting to leave in one send: every one
/// `seg` bytes but the last, which may be shorter (udp(7) `UDP_SEGMENT`).
/// `buf[..len]` holds them; behind them is room for one more datagram of
/// the largest size, the slot the engine builds the next one in when it
/// is likely to join them ([`Bulk::slot`]), so that it is not copied.
struct Batch {
    buf: Vec<u8>,
    len: usize,
    to: Option<SocketAddr>,
    /// `to`, encoded once per destination for sendmsg.
    name: Vec<u8>,
    seg: usize,
    count: usize,
    /// The last datagram was shorter than `seg`: nothing more fits.
    ended: bool,
}

impl Batch {
    fn takes(&self, to: SocketAddr, len: usize) -> bool {
        self.count == 0
            || (self.to == Some(to)
                && !self.ended
                && len <= self.seg
                && self.count < MAX_SEGMENTS
                && self.len + len <= MAX_BATCH_BYTES)
    }

    /// Takes the `n` bytes in the slot (`buf[len..]`) as its next datagram.
    fn commit(&mut self, to: SocketAddr, n: usize) {
        if self.count == 0 {
            if self.to != Some(to) {
                self.name = crate::addr::encode_sockaddr(&to);
                self.to = Some(to);
            }
            self.seg = n;
        }
        self.ended = n < self.seg;
        self.len += n;
        self.count += 1;
    }

    fn clear(&mut self) {
        self.len = 0;
        self.count = 0;
        self.ended = false;
    }

    fn datagrams(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// An endpoint's bulk path: its bulk socket and its outgoing batch.
pub(super) struct Bulk {
    /// Our bulk port's socket: the kernel picked the port, on our IP;
    /// `UDP_GRO` on.
    rx_sock: UdpSocket,
    port: u16,
    rx_buf: Vec<u8>,
    busy: u32,
    tx: Batch,
    /// The kernel takes `UDP_SEGMENT` on our socket (false after it said
    /// the route cannot: then one send per datagram).
    gso: bool,
    /// Peers' bulk addresses → their own: an ICMP error about a bulk
    /// datagram names the former (`Port::take_refused`).
    dests: HashMap<SocketAddr, SocketAddr>,
    counts: BulkCounts,
}

impl Bulk {
    /// Opens the bulk socket on `ip` (port picked by the kernel), for
    /// datagrams of at most `max_datagram` bytes.
    pub(super) fn open(ip: std::net::IpAddr, max_datagram: usize) -> io::Result<Bulk> {
        let rx_sock = UdpSocket::bind(SocketAddr::new(ip, 0))?;
        rx_sock.set_nonblocking(true)?;
        set_int_option(&rx_sock, libc::SOL_UDP, libc::UDP_GRO, 1)?;
        grow_receive_buffer(&rx_sock);
        let port = rx_sock.local_addr()?.port();
        Ok(Bulk {
            rx_sock,
            port,
            rx_buf: vec![0; MAX_READ],
            busy: 0,
            tx: Batch {
                buf: vec![0; MAX_BATCH_BYTES + max_datagram],
                len: 0,
                to: None,
                name: Vec::new(),
                seg: 0,
                count: 0,
                ended: false,
            },
            gso: true,
            dests: HashMap::new(),
            counts: BulkCounts::default(),
        })
    }

    /// The port our peers send bulk datagrams to.
    pub(super) fn port(&self) -> u16 {
        self.port
    }

    pub(super) fn fd(&self) -> RawFd {
        self.rx_sock.as_raw_fd()
    }

    pub(super) fn counts(&self) -> BulkCounts {
        self.counts
    }

    /// Where the next datagram is best built: the slot behind the batch,
    /// while the batch could take one more of its size. `None`: build it
    /// elsewhere and hand it to [`Bulk::send`].
    pub(super) fn slot(&mut self) -> Option<&mut [u8]> {
        let b = &mut self.tx;
        let room =
            b.count > 0 && !b.ended && b.count < MAX_SEGMENTS && b.len + b.seg <= MAX_BATCH_BYTES;
        room.then(|| &mut b.buf[b.len..])
    }

    /// The first `n` bytes of the slot, as built.
    pub(super) fn slot_bytes(&self, n: usize) -> &[u8] {
        let b = &self.tx;
        &b.buf[b.len..(b.len + n).min(b.buf.len())]
    }

    /// Queues `datagram` for the bulk port `to` of the peer at `peer`,
    /// sending the batch first when it cannot take it.
    pub(super) fn send(
        &mut self,
        udp: &UdpSocket,
        to: SocketAddr,
        peer: SocketAddr,
        datagram: &[u8],
    ) -> Result<(), LinkError> {
        let n = datagram.len();
        let r = self.make_room(udp, to, n);
        let at = self.tx.len;
        self.tx.buf[at..at + n].copy_from_slice(datagram);
        self.queue(to, peer, n);
        r
    }

    /// Queues the `n` bytes built in the slot ([`Bulk::slot`]) for the
    /// bulk port `to` of the peer at `peer`: in place when the batch takes
    /// them, else after sending the batch (moved to the front then).
    pub(super) fn send_slot(
        &mut self,
        udp: &UdpSocket,
        to: SocketAddr,
        peer: SocketAddr,
        n: usize,
    ) -> Result<(), LinkError> {
        let from = self.tx.len;
        let r = self.make_room(udp, to, n);
        if self.tx.len != from {
            self.tx.buf.copy_within(from..from + n, self.tx.len);
        }
        self.queue(to, peer, n);
        r
    }

    /// Sends the batch if it cannot take `n` more bytes to `to`.
    fn make_room(&mut self, udp: &UdpSocket, to: SocketAddr, n: usize) -> Result<(), LinkError> {
        if self.tx.takes(to, n) {
            Ok(())
        } else {
            self.flush(udp)
        }
    }

    fn queue(&mut self, to: SocketAddr, peer: SocketAddr, n: usize) {
        if self.tx.count == 0 && !self.dests.contains_key(&to) {
            self.dests.insert(to, peer);
        }
        self.tx.commit(to, n);
    }

    /// Sends the batch. A full socket buffer or any other failure loses it
    /// like dropped frames: the engine retransmits.
    pub(super) fn flush(&mut self, udp: &UdpSocket) -> Result<(), LinkError> {
        if self.tx.count == 0 {
            return Ok(());
        }
        let r = if self.gso || self.tx.count == 1 {
            match retry_icmp_errors(|| send_segments(udp, &self.tx)) {
                // The route's device cannot take the offload (no checksum
                // offload, IPsec: udp_send_skb's -EIO): one send per
                // datagram from now on.
                Err(e) if e.raw_os_error() == Some(libc::EIO) && self.tx.count > 1 => {
                    xdp_warn!(
                        FI_LOG_EP_DATA,
                        "UDP_SEGMENT refused ({e}); bulk datagrams go one send each"
                    );
                    self.gso = false;
                    self.send_one_by_one(udp)
                }
                r => {
                    self.counts.tx_sends += 1;
                    r
                }
            }
        } else {
            self.send_one_by_one(udp)
        };
        if r.is_ok() {
            self.counts.tx_datagrams += self.tx.count as u64;
        }
        self.tx.clear();
        r.map_err(|source| match source.kind() {
            io::ErrorKind::WouldBlock => LinkError::TxRingFull,
            _ => LinkError::Io {
                op: "sendmsg (bulk path)",
                source,
            },
        })
    }

    fn send_one_by_one(&mut self, udp: &UdpSocket) -> io::Result<()> {
        let Some(to) = self.tx.to else {
            return Ok(());
        };
        for d in Segments::new(self.tx.datagrams(), self.tx.seg) {
            retry_icmp_errors(|| udp.send_to(d, to))?;
            self.counts.tx_sends += 1;
        }
        Ok(())
    }

    /// The peer a bulk destination belongs to (for ICMP errors).
    pub(super) fn peer_of(&self, bulk: &SocketAddr) -> Option<SocketAddr> {
        self.dests.get(bulk).copied()
    }

    /// Whether this pass should read the bulk socket.
    pub(super) fn due(&self, every_so_often: bool) -> bool {
        self.busy > 0 || every_so_often
    }

    /// Reads up to `max` batches, handing every datagram in them to `f`
    /// with its sender. Returns how many datagrams came.
    pub(super) fn recv(&mut self, max: usize, mut f: impl FnMut(SocketAddr, &[u8])) -> usize {
        self.busy = self.busy.saturating_sub(1);
        let mut n = 0;
        for _ in 0..max {
            let Ok((len, seg, from)) = recv_coalesced(&self.rx_sock, &mut self.rx_buf) else {
                break;
            };
            self.busy = BUSY_PASSES;
            self.counts.rx_reads += 1;
            for d in Segments::new(&self.rx_buf[..len], seg) {
                n += 1;
                f(from, d);
            }
        }
        self.counts.rx_datagrams += n as u64;
        n
    }
}

/// One sendmsg of the whole batch; with more than one datagram, a
/// `UDP_SEGMENT` control message states their size (udp(7)).
fn send_segments(udp: &UdpSocket, b: &Batch) -> io::Result<()> {
    let d = b.datagrams();
    let mut iov = libc::iovec {
        iov_base: d.as_ptr() as *mut libc::c_void,
        iov_len: d.len(),
    };
    // Room for one cmsghdr with a u16, aligned as cmsghdr wants.
    let mut control = [0u64; 4];
    // SAFETY: an all-zero msghdr is valid; pointers are filled in below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = b.name.as_ptr() as *mut libc::c_void;
    msg.msg_namelen = b.name.len() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if b.count > 1 {
        msg.msg_control = control.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE only computes a size.
        msg.msg_controllen = unsafe { libc::CMSG_SPACE(size_of::<u16>() as u32) } as usize;
        // SAFETY: msg_control points at `control`, which is larger than
        // CMSG_SPACE(2) and suitably aligned; CMSG_FIRSTHDR is non-null then.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_UDP;
            (*c).cmsg_type = libc::UDP_SEGMENT;
            (*c).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as usize;
            libc::CMSG_DATA(c)
                .cast::<u16>()
                .write_unaligned(b.seg as u16);
        }
    }
    // SAFETY: msg points at live buffers of the stated sizes.
    let n = unsafe { libc::sendmsg(udp.as_raw_fd(), &msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// One read of the bulk socket: its length, the size of the datagrams the
/// receive offload joined in it (0: one datagram), and the sender.
fn recv_coalesced(s: &UdpSocket, buf: &mut [u8]) -> io::Result<(usize, usize, SocketAddr)> {
    let mut seg = 0usize;
    let (n, from) = recv_msg(s, buf, libc::MSG_DONTWAIT, |level, ty, data| {
        if level == libc::SOL_UDP && ty == libc::UDP_GRO {
            // SAFETY: UDP_GRO's control message carries an int (udp(7)).
            let v = unsafe { data.cast::<libc::c_int>().read_unaligned() };
            seg = usize::try_from(v).unwrap_or(0);
        }
    })?;
    let from = from.ok_or_else(|| io::Error::from(io::ErrorKind::InvalidData))?;
    // A read cut short (MSG_TRUNC) has lost its tail: only whole datagrams
    // before it are handed up; a cut one is rejected by its CRC.
    Ok((n.min(buf.len()), seg, from))
}
