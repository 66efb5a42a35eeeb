//! The UMEM: the memory the kernel and we exchange frames through, and who
//! owns each frame of it right now ([`FramePool`]). Frame data is reached
//! only through [`Umem::slice`] / [`Umem::slice_mut`], bounds-checked; the
//! caller checks ownership with the pool first, so the kernel is not using
//! a frame we read or write.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::frames::FramePool;
use crate::ring::Mmap;

pub(crate) struct Umem {
    mem: Mmap,
    pub(crate) pool: FramePool,
}

impl Umem {
    /// `frame_count` chunks of `frame_size` bytes, the first `rx_frames` for
    /// receive, the rest grouped into TX slots of `slot_chunks` chunks.
    pub(crate) fn new(
        frame_count: u32,
        rx_frames: u32,
        frame_size: u32,
        slot_chunks: u32,
    ) -> io::Result<Umem> {
        let len = frame_count as usize * frame_size as usize;
        Ok(Umem {
            mem: Mmap::anonymous(len)?,
            pool: FramePool::new(frame_count, rx_frames, frame_size, slot_chunks),
        })
    }

    /// As [`Umem::new`], in a memfd (so other processes of a UMEM group can
    /// map it): the memory and the memfd.
    pub(crate) fn new_memfd(
        frame_count: u32,
        rx_frames: u32,
        frame_size: u32,
        slot_chunks: u32,
    ) -> io::Result<(Umem, OwnedFd)> {
        let len = frame_count as usize * frame_size as usize;
        // SAFETY: memfd_create with a NUL-terminated name; result checked.
        let fd = unsafe { libc::memfd_create(c"ofi-xdp-umem".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: ftruncate on our memfd.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let umem = Umem::from_memfd(&fd, frame_count, rx_frames, frame_size, slot_chunks)?;
        Ok((umem, fd))
    }

    /// The UMEM in memfd `fd` (another member's, taken with `pidfd_getfd`).
    pub(crate) fn from_memfd(
        fd: &OwnedFd,
        frame_count: u32,
        rx_frames: u32,
        frame_size: u32,
        slot_chunks: u32,
    ) -> io::Result<Umem> {
        let len = frame_count as usize * frame_size as usize;
        Ok(Umem {
            mem: Mmap::shared_file(fd.as_raw_fd(), len, true)?,
            pool: FramePool::new(frame_count, rx_frames, frame_size, slot_chunks),
        })
    }

    /// Start and length of the memory, for `XDP_UMEM_REG`.
    pub(crate) fn region(&self) -> (u64, u64) {
        (self.mem.as_ptr() as u64, self.mem.len() as u64)
    }

    /// `len` bytes at UMEM address `addr`, if in bounds.
    pub(crate) fn slice(&self, addr: u64, len: usize) -> Option<&[u8]> {
        let start = usize::try_from(addr).ok()?;
        if start.checked_add(len)? > self.mem.len() {
            return None;
        }
        // SAFETY: in bounds of the mapping; the caller owns the frame (the
        // pool says so), so the kernel is not writing it.
        Some(unsafe { std::slice::from_raw_parts(self.mem.as_ptr().add(start), len) })
    }

    /// As [`Umem::slice`], writable.
    pub(crate) fn slice_mut(&mut self, addr: u64, len: usize) -> Option<&mut [u8]> {
        let start = usize::try_from(addr).ok()?;
        if start.checked_add(len)? > self.mem.len() {
            return None;
        }
        // SAFETY: in bounds; the caller owns this frame (checked by the
        // pool), so the kernel is not reading or writing it, and `&mut self`
        // makes this the only slice of it.
        Some(unsafe { std::slice::from_raw_parts_mut(self.mem.as_ptr().add(start), len) })
    }
}
