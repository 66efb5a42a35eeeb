//! The four AF_XDP rings (kernel `Documentation/networking/af_xdp.rst`,
//! "Rings"): single-producer/single-consumer queues shared with the kernel
//! through mmap. Each has a producer index, a consumer index and a flags word
//! (`XDP_RING_NEED_WAKEUP`), followed by a power-of-two array of descriptors.
//!
//! Indices are free-running `u32`s; the slot is `index & mask`. The side that
//! writes descriptors publishes them with a release store of its index; the
//! other side reads that index with acquire before touching descriptors (the
//! kernel uses `smp_load_acquire`/`smp_store_release` on its side).

use std::io;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

/// An `mmap`ed region, unmapped on drop.
pub(crate) struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory; access is synchronised by the ring
// protocol and by `&mut` on the owning structures.
unsafe impl Send for Mmap {}

impl Mmap {
    /// Maps `len` bytes of `fd` at page offset `offset` (a ring).
    pub(crate) fn ring(fd: RawFd, len: usize, offset: u64) -> io::Result<Self> {
        // SAFETY: plain mmap call; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                offset as libc::off_t,
            )
        };
        Self::from_raw(p, len)
    }

    /// Maps `len` bytes of file `fd` from its start, shared with every
    /// process mapping it (a group file: not populated; a UMEM memfd:
    /// `populate`, as the kernel pins it at registration anyway).
    pub(crate) fn shared_file(fd: RawFd, len: usize, populate: bool) -> io::Result<Self> {
        let flags = libc::MAP_SHARED | if populate { libc::MAP_POPULATE } else { 0 };
        // SAFETY: plain mmap call; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                0,
            )
        };
        Self::from_raw(p, len)
    }

    /// Anonymous private memory (the UMEM).
    pub(crate) fn anonymous(len: usize) -> io::Result<Self> {
        // SAFETY: anonymous mmap; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        Self::from_raw(p, len)
    }

    fn from_raw(p: *mut libc::c_void, len: usize) -> io::Result<Self> {
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave NULL"))?;
        Ok(Self { ptr, len })
    }

    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: we own this mapping and nothing refers to it after drop.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// One ring of descriptors of type `T` (`u64` for fill/completion,
/// `libc::xdp_desc` for RX/TX).
pub(crate) struct Ring<T> {
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    descs: NonNull<T>,
    mask: u32,
    size: u32,
    /// Our copy of the producer index (authoritative when we produce).
    cached_prod: u32,
    /// Our copy of the consumer index (authoritative when we consume).
    cached_cons: u32,
    _map: Mmap,
}

// SAFETY: the raw pointers point into `_map`, which moves with the ring.
unsafe impl<T: Send> Send for Ring<T> {}

impl<T: Copy> Ring<T> {
    /// Maps a ring of `size` entries (a power of two) at `pgoff` using the
    /// offsets the kernel reported (`getsockopt(XDP_MMAP_OFFSETS)`).
    pub(crate) fn map(
        fd: RawFd,
        off: &libc::xdp_ring_offset,
        size: u32,
        pgoff: u64,
    ) -> io::Result<Self> {
        let len = off.desc as usize + size as usize * size_of::<T>();
        let map = Mmap::ring(fd, len, pgoff)?;
        let base = map.as_ptr();
        let at = |o: u64| -> io::Result<NonNull<u8>> {
            if o as usize >= len {
                return Err(io::Error::other("XDP_MMAP_OFFSETS out of range"));
            }
            // SAFETY: `o < len`, inside the mapping.
            NonNull::new(unsafe { base.add(o as usize) })
                .ok_or_else(|| io::Error::other("null ring pointer"))
        };
        let producer: NonNull<AtomicU32> = at(off.producer)?.cast();
        let consumer: NonNull<AtomicU32> = at(off.consumer)?.cast();
        let flags: NonNull<AtomicU32> = at(off.flags)?.cast();
        let descs: NonNull<T> = at(off.desc)?.cast();
        // SAFETY: the kernel initialised the indices; reading them is fine.
        let (p, c) = unsafe {
            (
                producer.as_ref().load(Ordering::Acquire),
                consumer.as_ref().load(Ordering::Acquire),
            )
        };
        Ok(Self {
            producer,
            consumer,
            flags,
            descs,
            mask: size - 1,
            size,
            cached_prod: p,
            cached_cons: c,
            _map: map,
        })
    }

    fn prod(&self) -> &AtomicU32 {
        // SAFETY: points into our live mapping, naturally aligned by the kernel.
        unsafe { self.producer.as_ref() }
    }

    fn cons(&self) -> &AtomicU32 {
        // SAFETY: as above.
        unsafe { self.consumer.as_ref() }
    }

    /// `XDP_RING_NEED_WAKEUP` is set: the kernel wants a syscall to make
    /// progress on this ring (af_xdp.rst, "XDP_USE_NEED_WAKEUP").
    pub(crate) fn needs_wakeup(&self) -> bool {
        // SAFETY: as above.
        let f = unsafe { self.flags.as_ref() }.load(Ordering::Relaxed);
        f & libc::XDP_RING_NEED_WAKEUP != 0
    }

    pub(crate) fn size(&self) -> u32 {
        self.size
    }

    /// Re-reads both indices from the shared ring: for a ring several
    /// processes produce into (fill) or consume from (completion) in turn,
    /// under the group's lock, where our cached view may be stale.
    pub(crate) fn resync(&mut self) {
        self.cached_prod = self.prod().load(Ordering::Acquire);
        self.cached_cons = self.cons().load(Ordering::Acquire);
    }

    /// Free slots as of now, for a producer shared between processes (a
    /// cheap look before taking their lock).
    pub(crate) fn free_hint(&self) -> u32 {
        let used = self
            .prod()
            .load(Ordering::Relaxed)
            .wrapping_sub(self.cons().load(Ordering::Relaxed));
        self.size.saturating_sub(used)
    }

    /// Whether the ring holds entries, as of now (a cheap look before
    /// taking a lock).
    pub(crate) fn looks_nonempty(&self) -> bool {
        self.prod().load(Ordering::Acquire) != self.cons().load(Ordering::Relaxed)
    }

    // ---- producer side (fill, TX) ----

    /// Free slots we may produce into.
    pub(crate) fn free(&mut self) -> u32 {
        let used = self.cached_prod.wrapping_sub(self.cached_cons);
        if used < self.size {
            return self.size - used;
        }
        self.cached_cons = self.cons().load(Ordering::Acquire);
        self.size - self.cached_prod.wrapping_sub(self.cached_cons)
    }

    /// Writes one descriptor; publish with [`Ring::submit`]. The caller has
    /// checked [`Ring::free`].
    pub(crate) fn write(&mut self, i: u32, v: T) {
        let slot = (self.cached_prod.wrapping_add(i) & self.mask) as usize;
        // SAFETY: slot <= mask < size, inside the descriptor array.
        unsafe { self.descs.as_ptr().add(slot).write(v) };
    }

    /// Publishes `n` descriptors written with [`Ring::write`].
    pub(crate) fn submit(&mut self, n: u32) {
        self.cached_prod = self.cached_prod.wrapping_add(n);
        self.prod().store(self.cached_prod, Ordering::Release);
    }

    /// Entries produced but not yet consumed by the kernel (fresh read).
    pub(crate) fn outstanding(&mut self) -> u32 {
        self.cached_cons = self.cons().load(Ordering::Acquire);
        self.cached_prod.wrapping_sub(self.cached_cons)
    }

    // ---- consumer side (RX, completion) ----

    /// Entries available to consume (refreshes from the kernel when our
    /// cached view is empty).
    pub(crate) fn available(&mut self) -> u32 {
        let n = self.cached_prod.wrapping_sub(self.cached_cons);
        if n > 0 {
            return n;
        }
        self.cached_prod = self.prod().load(Ordering::Acquire);
        self.cached_prod.wrapping_sub(self.cached_cons)
    }

    /// Reads descriptor `i` past the consumer index (`i < available()`).
    pub(crate) fn read(&self, i: u32) -> T {
        let slot = (self.cached_cons.wrapping_add(i) & self.mask) as usize;
        // SAFETY: slot < size; the acquire load in `available` ordered the
        // kernel's write of this descriptor before our read.
        unsafe { self.descs.as_ptr().add(slot).read() }
    }

    /// Gives `n` consumed slots back to the kernel.
    pub(crate) fn release(&mut self, n: u32) {
        self.cached_cons = self.cached_cons.wrapping_add(n);
        self.cons().store(self.cached_cons, Ordering::Release);
    }
}
