//! Receive: [`Link::recv`] takes a batch off the RX ring, decodes each
//! frame (anything that is not UDP to our IP and port is counted and
//! recycled), hands the datagram to the caller in place, and tops the fill
//! ring up again — without it the kernel has nowhere to receive into.

use std::io;
use std::os::fd::AsRawFd;
use std::time::Duration;

use super::{BURST, Link};
use crate::error::LinkError;
use crate::wire::{self, LinkAddr};

/// Most chunks one received frame may span: the kernel builds a
/// multi-buffer frame from at most MAX_SKB_FRAGS (17) fragments besides its
/// head; anything longer is dropped as malformed.
const MAX_RX_PIECES: usize = 18;

/// What `classify` finds: payload offset and length, source, CE.
type Classified = (usize, usize, LinkAddr, bool);

/// One received datagram, as handed to the [`Link::recv`] callback. Its
/// frames go back to the fill ring when the callback returns.
#[derive(Debug)]
pub struct RxDatagram<'a> {
    /// Sender MAC, IP and UDP port.
    pub src: LinkAddr,
    /// UDP payload, in place in the UMEM — or, for a datagram that arrived
    /// in several chunks, gathered into a link buffer; with
    /// [`crate::LinkConfig::rx_pieces`] only its first piece (read `pieces`).
    pub payload: &'a [u8],
    /// The UDP payload in order, in place: one piece (`payload`) unless the
    /// datagram arrived in several chunks and the link hands them over as
    /// they are ([`crate::LinkConfig::rx_pieces`]).
    pub pieces: &'a [&'a [u8]],
    /// Its IP header said CE: congestion experienced on the way (RFC 3168).
    pub ce: bool,
}

impl Link {
    /// Hands up to `max` (at most 64 per call) received datagrams to `f`, then tops
    /// the fill ring up. Frames that are not UDP to our IP and port are
    /// counted and recycled without reaching `f`. A datagram that arrived in
    /// several chunks (multi-buffer) is handed over in them
    /// ([`crate::LinkConfig::rx_pieces`]) or gathered into one buffer first.
    pub fn recv<F>(&mut self, max: usize, mut f: F) -> usize
    where
        F: FnMut(RxDatagram<'_>),
    {
        let avail = self.rx.available();
        if avail == 0 {
            self.refill();
            self.wake_rx_if_needed();
            return 0;
        }
        let max = max.min(BURST);
        let (mut i, mut seen, mut delivered) = (0u32, 0usize, 0usize);
        while i < avail && seen < max {
            let d = self.rx.read(i);
            seen += 1;
            if d.options & libc::XDP_PKT_CONTD == 0 {
                i += 1;
                delivered += usize::from(self.deliver_single(d, &mut f));
                continue;
            }
            // The kernel publishes all descriptors of a packet at once, so its
            // last one (no CONTD) is already in the ring.
            let Some(last) =
                (i..avail).find(|&j| self.rx.read(j).options & libc::XDP_PKT_CONTD == 0)
            else {
                if i == 0 && avail == self.rx.size() {
                    // A full ring of one unterminated packet can never
                    // complete: drop it rather than stall receive for good.
                    self.drop_descs(0, avail);
                    i = avail;
                }
                break;
            };
            delivered += usize::from(if self.rx_pieces {
                self.deliver_pieces(i, last, &mut f)
            } else {
                self.deliver_gathered(i, last, &mut f)
            });
            i = last + 1;
        }
        self.rx.release(i);
        self.refill();
        delivered
    }

    /// One datagram in one chunk: handed over in place.
    fn deliver_single<F>(&mut self, d: libc::xdp_desc, f: &mut F) -> bool
    where
        F: FnMut(RxDatagram<'_>),
    {
        if self.umem.pool.received(d.addr).is_err() {
            self.stats.bad_descs += 1;
            return false;
        }
        let bytes = self.umem.slice(d.addr, d.len as usize).unwrap_or(&[]);
        let (off, len, src, ce) = match self.classify(bytes, bytes.len()) {
            Ok(c) => c,
            Err(bad_csum) => {
                self.count_bad(bad_csum);
                let _ = self.umem.pool.release_rx(d.addr);
                return false;
            }
        };
        self.stats.rx_packets += 1;
        self.stats.rx_bytes += len as u64;
        let payload = self.umem.slice(d.addr + off as u64, len).unwrap_or(&[]);
        f(RxDatagram {
            src,
            payload,
            pieces: &[payload],
            ce,
        });
        let _ = self.umem.pool.release_rx(d.addr);
        true
    }

    /// One datagram in RX descriptors `first..=last` (multi-buffer): copied
    /// into `self.gather`, its chunks recycled at once.
    fn deliver_gathered<F>(&mut self, first: u32, last: u32, f: &mut F) -> bool
    where
        F: FnMut(RxDatagram<'_>),
    {
        let mut gather = std::mem::take(&mut self.gather);
        gather.clear();
        let mut ok = true;
        for j in first..=last {
            let d = self.rx.read(j);
            if self.umem.pool.received(d.addr).is_err() {
                self.stats.bad_descs += 1;
                ok = false;
                continue;
            }
            match self.umem.slice(d.addr, d.len as usize) {
                Some(b) if ok => gather.extend_from_slice(b),
                _ => ok = false,
            }
            let _ = self.umem.pool.release_rx(d.addr);
        }
        let mut delivered = false;
        if ok {
            match self.classify(&gather, gather.len()) {
                Ok((off, len, src, ce)) => match gather.get(off..off + len) {
                    Some(payload) => {
                        self.stats.rx_packets += 1;
                        self.stats.rx_bytes += len as u64;
                        delivered = true;
                        f(RxDatagram {
                            src,
                            payload,
                            pieces: &[payload],
                            ce,
                        });
                    }
                    None => self.stats.rx_malformed += 1,
                },
                Err(bad_csum) => self.count_bad(bad_csum),
            }
        } else {
            self.stats.rx_malformed += 1;
        }
        self.gather = gather;
        delivered
    }

    /// One datagram in RX descriptors `first..=last` (multi-buffer), handed
    /// over in its chunks ([`crate::LinkConfig::rx_pieces`]): the headers are read
    /// from the first, the UDP payload is the rest of the first and all of
    /// the others (cut at the UDP length). The chunks are recycled once the
    /// callback returns.
    fn deliver_pieces<F>(&mut self, first: u32, last: u32, f: &mut F) -> bool
    where
        F: FnMut(RxDatagram<'_>),
    {
        let n = (last - first + 1) as usize;
        if n > MAX_RX_PIECES {
            self.drop_descs(first, last + 1);
            return false;
        }
        let mut descs = [(0u64, 0usize); MAX_RX_PIECES];
        let mut ok = true;
        for (k, j) in (first..=last).enumerate() {
            let d = self.rx.read(j);
            if self.umem.pool.received(d.addr).is_err() {
                self.stats.bad_descs += 1;
                ok = false;
            }
            descs[k] = (d.addr, d.len as usize);
        }
        let total: usize = descs[..n].iter().map(|&(_, len)| len).sum();
        // The headers must lie in the first chunk (decode_head checks), so
        // the payload starts there.
        let verdict = if ok {
            let head = self.umem.slice(descs[0].0, descs[0].1).unwrap_or(&[]);
            self.classify(head, total)
        } else {
            Err(false)
        };
        if let Ok((off, len, src, ce)) = verdict {
            let mut pieces: [&[u8]; MAX_RX_PIECES] = [&[]; MAX_RX_PIECES];
            // Chunk k's share of the payload: what lies within
            // [off, off + len) of the frame.
            let (mut at, mut count) = (0usize, 0usize);
            for &(addr, dlen) in &descs[..n] {
                let lo = off.max(at).min(at + dlen);
                let hi = (off + len).min(at + dlen).max(lo);
                if hi > lo
                    && let Some(b) = self.umem.slice(addr + (lo - at) as u64, hi - lo)
                {
                    pieces[count] = b;
                    count += 1;
                }
                at += dlen;
            }
            f(RxDatagram {
                src,
                payload: pieces[0],
                pieces: &pieces[..count],
                ce,
            });
        }
        for &(addr, _) in &descs[..n] {
            let _ = self.umem.pool.release_rx(addr);
        }
        match verdict {
            Ok((_, len, _, _)) => {
                self.stats.rx_packets += 1;
                self.stats.rx_bytes += len as u64;
                true
            }
            Err(bad_csum) => {
                self.count_bad(bad_csum);
                false
            }
        }
    }

    /// Recycles RX descriptors `first..end` unread, counted as malformed.
    fn drop_descs(&mut self, first: u32, end: u32) {
        for j in first..end {
            let d = self.rx.read(j);
            if self.umem.pool.received(d.addr).is_ok() {
                let _ = self.umem.pool.release_rx(d.addr);
            } else {
                self.stats.bad_descs += 1;
            }
        }
        self.stats.rx_malformed += 1;
    }

    fn count_bad(&mut self, bad_csum: bool) {
        if bad_csum {
            self.stats.rx_bad_checksum += 1;
        } else {
            self.stats.rx_malformed += 1;
        }
    }

    /// Decodes a received frame of `frame_len` bytes, of which `head` (all
    /// of it, or a multi-buffer frame's first chunk) holds the headers, into
    /// (payload offset, payload length, sender, marked CE); `Err(true)` =
    /// bad checksum, `Err(false)` = anything else that is not for us.
    fn classify(&self, head: &[u8], frame_len: usize) -> Result<Classified, bool> {
        let d = wire::decode_head(head, frame_len, self.verify)
            .map_err(|e| e == wire::DecodeError::BadChecksum)?;
        if d.dst_port != self.local.port || d.dst_ip != self.local.ip {
            return Err(false);
        }
        Ok((d.payload_offset, d.payload_len, d.src, d.ecn == wire::CE))
    }

    /// Tops the fill ring up from the free RX frames (receive silently stops
    /// when it runs dry). Returns how many frames were added.
    pub(super) fn refill(&mut self) -> usize {
        if self.membership.is_some() {
            return self.refill_shared();
        }
        let free = self.fill.free();
        if free == self.fill.size() {
            self.stats.fill_ring_empty += 1;
        }
        let n = free.min(self.umem.pool.rx_free() as u32);
        for i in 0..n {
            if let Some(addr) = self.umem.pool.take_for_fill() {
                self.fill.write(i, addr);
            }
        }
        if n > 0 {
            self.fill.submit(n);
        }
        n as usize
    }

    /// Calls into the socket when the kernel asked (`need_wakeup` on the
    /// fill ring), or always when busy polling: the call runs the driver's
    /// receive poll in our context.
    fn wake_rx_if_needed(&mut self) {
        if self.busy_poll || self.fill.needs_wakeup() {
            // SAFETY: zero-length non-blocking recvfrom is the documented RX
            // wakeup (af_xdp.rst, XDP_USE_NEED_WAKEUP); errors are harmless.
            unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    std::ptr::null_mut(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                );
            }
        }
    }

    /// Blocks in `poll()` until the RX ring has entries or `timeout` passes.
    /// Returns whether it is readable.
    pub fn wait_readable(&mut self, timeout: Duration) -> Result<bool, LinkError> {
        if self.rx.available() > 0 {
            return Ok(true);
        }
        self.refill();
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: poll on one valid pollfd.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(false);
            }
            return Err(LinkError::io("poll", e));
        }
        Ok(self.rx.available() > 0)
    }
}
