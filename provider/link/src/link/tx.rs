//! Transmit: a caller takes a [`TxFrame`], writes the payload into it once
//! ([`Link::tx_payload_mut`]), and [`Link::send`] adds the headers and
//! queues it (one descriptor per chunk with multi-buffer); [`Link::flush`]
//! kicks the kernel, [`Link::reap_completions`] takes back what it sent.

use std::io;
use std::os::fd::AsRawFd;

use super::{BURST, Link};
use crate::error::LinkError;
use crate::frames::FrameError;
use crate::wire::{self, LinkAddr};

/// A transmit frame, named by its UMEM address. `Copy`, so a stale handle
/// can exist: every [`Link`] method checks the frame's state first, so
/// using one is an error ([`LinkError::Frame`]), never a write into memory
/// the kernel owns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TxFrame(u64);

impl Link {
    /// Allocates a TX frame (reaping completions first if none is free).
    pub fn alloc_tx(&mut self) -> Option<TxFrame> {
        if self.umem.pool.tx_free() == 0 {
            self.reap_completions();
        }
        self.umem.pool.alloc_tx().map(TxFrame)
    }

    /// The payload area of a TX frame ([`Link::max_payload`] bytes, right
    /// after the headers): write the datagram's payload here, once.
    pub fn tx_payload_mut(&mut self, frame: TxFrame) -> Result<&mut [u8], LinkError> {
        self.umem.pool.check_submit(frame.0)?;
        let (hl, max) = (self.header_len, self.max_payload);
        self.umem
            .slice_mut(frame.0, hl + max)
            .map(|s| &mut s[hl..])
            .ok_or(LinkError::Frame(FrameError::OutOfRange))
    }

    /// Writes the headers for `payload_len` bytes (already in
    /// [`Link::tx_payload_mut`]) to `to`, and queues the frame on the TX ring.
    /// It goes on the wire at the next [`Link::flush`]. The frame stays the
    /// caller's until [`Link::release_tx`], which may follow at once.
    pub fn send(
        &mut self,
        frame: TxFrame,
        to: &LinkAddr,
        payload_len: usize,
    ) -> Result<(), LinkError> {
        self.send_from_port(frame, to, payload_len, self.local.port)
    }

    /// [`Link::send`] with UDP source port `source_port` instead of the
    /// socket's own: routers that spread flows over equal-cost paths by a
    /// hash of addresses and ports take a path per source port.
    pub fn send_from_port(
        &mut self,
        frame: TxFrame,
        to: &LinkAddr,
        payload_len: usize,
        source_port: u16,
    ) -> Result<(), LinkError> {
        self.umem.pool.check_submit(frame.0)?;
        if payload_len > self.max_payload {
            return Err(LinkError::PayloadTooLarge {
                len: payload_len,
                max: self.max_payload,
            });
        }
        if to.ip.is_ipv4() != self.local.ip.is_ipv4() {
            return Err(LinkError::FamilyMismatch);
        }
        if self.tx.free() < self.descs_for(self.header_len + payload_len) {
            return Err(LinkError::TxRingFull);
        }
        self.opts.ipv4_id = self.opts.ipv4_id.wrapping_add(1);
        let (mut local, opts, hl) = (self.local, self.opts, self.header_len);
        local.port = source_port;
        let buf = self
            .umem
            .slice_mut(frame.0, hl + payload_len)
            .ok_or(LinkError::Frame(FrameError::OutOfRange))?;
        let len =
            wire::encode_headers(buf, &local, to, payload_len, &opts).map_err(|e| match e {
                wire::EncodeError::FamilyMismatch => LinkError::FamilyMismatch,
                wire::EncodeError::TooLong => LinkError::PayloadTooLarge {
                    len: payload_len,
                    max: self.max_payload,
                },
            })?;
        self.push_tx(frame.0, len as u32)?;
        self.stats.tx_bytes += payload_len as u64;
        Ok(())
    }

    /// TX descriptors a frame of `len` bytes takes: one per chunk.
    fn descs_for(&self, len: usize) -> u32 {
        (len as u32).div_ceil(self.frame_size).max(1)
    }

    /// Queues one frame: a descriptor per chunk it covers, all but the last
    /// flagged `XDP_PKT_CONTD` (af_xdp.rst, "XDP_USE_SG"). The caller checked
    /// that the TX ring has room for all of them.
    fn push_tx(&mut self, addr: u64, len: u32) -> Result<(), LinkError> {
        self.umem.pool.submitted(addr)?;
        let fs = self.frame_size;
        let n = len.div_ceil(fs).max(1);
        for i in 0..n {
            let chunk_len = (len - i * fs).min(fs);
            let more = i + 1 < n;
            self.tx.write(
                i,
                libc::xdp_desc {
                    addr: addr + u64::from(i * fs),
                    len: chunk_len,
                    options: if more { libc::XDP_PKT_CONTD } else { 0 },
                },
            );
        }
        self.tx.submit(n);
        self.stats.tx_packets += 1;
        Ok(())
    }

    /// Gives a TX frame back; it returns to the free pool once every
    /// submission of it has completed.
    pub fn release_tx(&mut self, frame: TxFrame) -> Result<(), LinkError> {
        Ok(self.umem.pool.release_tx(frame.0)?)
    }

    /// Allocate, copy `payload`, send, release: one call per datagram for
    /// callers that have the payload in a buffer already (the tools'
    /// ping-pong and the tests).
    pub fn send_copy(&mut self, to: &LinkAddr, payload: &[u8]) -> Result<(), LinkError> {
        if payload.len() > self.max_payload {
            return Err(LinkError::PayloadTooLarge {
                len: payload.len(),
                max: self.max_payload,
            });
        }
        let f = self.alloc_tx().ok_or(LinkError::NoTxFrame)?;
        let r = self
            .tx_payload_mut(f)
            .map(|buf| buf[..payload.len()].copy_from_slice(payload))
            .and_then(|()| self.send(f, to, payload.len()));
        self.release_tx(f)?;
        r
    }

    /// Wakes the kernel to transmit what is queued, when it asked for it
    /// (`need_wakeup`; always the case in copy mode, where `sendto` does the
    /// transmit work, at most 32 descriptors per call — hence the loop).
    /// Busy polling calls once more even when not asked: the call runs the
    /// driver's poll, which sends and completes in our context.
    pub fn flush(&mut self) -> Result<(), LinkError> {
        if self.busy_poll {
            self.watch_busy_tx();
        }
        let mut busy_kick = self.busy_poll;
        for _ in 0..(self.tx.size() / 16).max(8) {
            if self.tx.outstanding() == 0 {
                return Ok(());
            }
            if !self.tx.needs_wakeup() && !std::mem::take(&mut busy_kick) {
                return Ok(());
            }
            self.stats.tx_kicks += 1;
            // SAFETY: sendto with no buffer is the documented TX kick.
            let rc = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            if rc < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    // More to send (copy-mode batch limit): go again.
                    Some(libc::EAGAIN) => continue,
                    // Transient: the driver/skb path is busy or out of
                    // buffers; what is left goes out on the next flush.
                    Some(libc::EBUSY) | Some(libc::ENOBUFS) => return Ok(()),
                    _ => return Err(LinkError::io("sendto (TX kick)", e)),
                }
            }
        }
        Ok(())
    }

    /// A preferred busy poll (`SO_PREFER_BUSY_POLL`) runs the NAPI of the
    /// socket's receive queue, and the kernel then skips the driver wakeup
    /// a TX kick would make (`xsk_no_wakeup`). A driver that transmits only
    /// from its TX NAPI never sends our frames then: virtio_net in zero-copy
    /// (Linux 6.18) left a ping-pong's first datagram queued for ever. If
    /// frames wait in the TX ring with no completion for `BUSY_TX_STALL`,
    /// stop preferring busy polling on this socket: kicks wake the driver
    /// again, and receives still busy-poll (`SO_BUSY_POLL` stays).
    fn watch_busy_tx(&mut self) {
        const BUSY_TX_STALL: std::time::Duration = std::time::Duration::from_millis(100);
        let done = self.stats.tx_completions;
        if self.tx.outstanding() == 0 || done != self.busy_tx_watch.0 {
            self.busy_tx_watch = (done, None);
            return;
        }
        let since = *self
            .busy_tx_watch
            .1
            .get_or_insert_with(std::time::Instant::now);
        if since.elapsed() < BUSY_TX_STALL || self.stats.busy_poll_tx_stalls > 0 {
            return;
        }
        self.stats.busy_poll_tx_stalls += 1;
        let off: libc::c_int = 0;
        // SAFETY: setsockopt with a valid fd and a c_int option value.
        unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PREFER_BUSY_POLL,
                (&off as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }

    /// Reaps the TX completions; returns how many frames (datagrams) they
    /// completed.
    pub fn reap_completions(&mut self) -> usize {
        if self.membership.is_some() {
            return self.reap_shared();
        }
        let mut total = 0;
        loop {
            let n = self.comp.available().min(BURST as u32);
            if n == 0 {
                return total;
            }
            for i in 0..n {
                let addr = self.comp.read(i);
                let base = self.umem.pool.base(addr);
                // A multi-chunk frame completes one descriptor per chunk, all
                // at once; its first chunk (the slot start) stands for it.
                if addr != base && self.multi_buffer {
                    continue;
                }
                if self.umem.pool.completed(base).is_err() {
                    self.stats.bad_descs += 1;
                }
                self.stats.tx_completions += 1;
                total += 1;
            }
            self.comp.release(n);
        }
    }
}
