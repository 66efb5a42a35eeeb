//! One sender's single-producer single-consumer ring of datagrams in shared
//! memory: a byte array of records and two free-running byte counters,
//! `head` (the writer's: bytes published) and `tail` (the reader's: bytes
//! consumed).
//!
//! A record is an 8-byte header (payload length, little-endian u32; its
//! [`Kind`], little-endian u32) and the payload, padded to 8 bytes. A
//! record never wraps: when it would not fit before the end of the array
//! the writer leaves a
//! wrap marker (length [`WRAP`]) there and starts again at offset 0, so the
//! reader hands every payload up as one slice, without copying it.
//!
//! The other side of a ring is another process: every counter and length
//! read from the shared memory is checked before use. A reader that finds
//! something impossible (head more than the ring ahead of tail, a record
//! longer than what is left or than the largest datagram) drops everything
//! published so far and counts it: the engine retransmits, as after loss
//! on the network. A writer publishes `head` only after its record is
//! complete, so a writer killed half-way through leaves nothing visible.

use std::sync::atomic::{AtomicU64, Ordering};

/// What a record carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A datagram of the protocol, as it would come from the network
    /// (kind word 0: what every writer before direct messages wrote).
    Datagram,
    /// A whole message handed to the reader's matcher without the
    /// protocol's session (PROTOCOL.md §6.9; `rdm/direct.rs` says its
    /// layout).
    Message,
}

impl Kind {
    fn word(self) -> u32 {
        match self {
            Kind::Datagram => 0,
            Kind::Message => 1,
        }
    }

    fn of(word: u32) -> Option<Kind> {
        match word {
            0 => Some(Kind::Datagram),
            1 => Some(Kind::Message),
            _ => None,
        }
    }
}

/// Bytes of a record's header.
pub const RECORD_HEADER: usize = 8;
/// Bytes of a cache line (x86-64, and the common line of other CPUs).
const CACHE_LINE: usize = 64;
/// Ask the CPU to bring the line at `p` into its caches, without waiting
/// for it and without any fault (a hint: dropped for an address without a
/// page).
#[inline]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 neither reads into a register nor faults, whatever
    // the address.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The length that marks "continue at offset 0".
const WRAP: u32 = u32::MAX;

fn padded(len: usize) -> usize {
    (RECORD_HEADER + len).next_multiple_of(8)
}

/// Why a push did not happen.
#[derive(Debug, PartialEq, Eq)]
pub enum PushError {
    /// Not enough room until the reader catches up.
    Full,
    /// Longer than any record this ring holds.
    TooLong,
}

/// The writer's own copies of the counters: `head` as it published it
/// (never re-read from the shared memory, which the reader could have
/// scribbled on) and `tail` as it last read it; and where it goes back to
/// the array's start when it can.
#[derive(Debug)]
pub struct Writer {
    pub head: u64,
    tail: u64,
    /// The offset a record may not cross while the reader has consumed the
    /// array's start (the array's length: none).
    wrap_at: usize,
}

impl Writer {
    /// Go back to the array's start instead of crossing `offset` whenever
    /// the reader has consumed everything (and the record fits before the
    /// writer).
    ///
    /// Why: a writer that always runs to the array's end walks its reader
    /// through the whole ring, megabytes of lines neither side has in its
    /// caches, and pays the first lap's page allocations and faults in the
    /// first megabytes of any exchange; request and reply traffic keeps
    /// the ring all but empty, so it can stay in the first `offset` bytes.
    /// A stream that keeps the reader behind still has the whole ring
    /// (the early wrap needs the start consumed). The reader needs nothing
    /// new: a wrap marker may stand anywhere. Pinned `fi_pingpong -S 64`
    /// on one host, `-I 10000`: 0.47–0.48 → 0.38–0.39 µs per transfer
    /// (`docs/performance.md`).
    pub fn wrap_early_at(&mut self, offset: usize) {
        self.wrap_at = offset;
    }
}

/// Where [`Ring::place`] put the next record: behind a wrap marker of
/// `skip` bytes (0: none), `need` bytes with its header and padding.
#[derive(Debug, PartialEq, Eq)]
pub struct Placement {
    skip: u64,
    need: u64,
}

/// What one [`Ring::pop`] pass saw.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct PopCounts {
    /// Records handed up.
    pub datagrams: u64,
    /// Times the ring held something impossible (everything published
    /// until then was dropped).
    pub malformed: u64,
}

/// A view of one ring: its two counters and its data (`cap` bytes, a power
/// of two, a multiple of 8). It does not own the memory.
pub struct Ring {
    head: *const AtomicU64,
    tail: *const AtomicU64,
    data: *mut u8,
    cap: usize,
}

// SAFETY: the ring is memory shared with another process anyway; a `Ring`
// is used by the one thread that holds the port's lock.
unsafe impl Send for Ring {}

impl Ring {
    /// # Safety
    /// `head` and `tail` point at live 8-aligned counters and `data` at
    /// `cap` live bytes (8-aligned), all valid for as long as the `Ring`
    /// is used; `cap` is a power of two ≥ 64.
    pub unsafe fn new(
        head: *const AtomicU64,
        tail: *const AtomicU64,
        data: *mut u8,
        cap: usize,
    ) -> Ring {
        Ring {
            head,
            tail,
            data,
            cap,
        }
    }

    fn head(&self) -> &AtomicU64 {
        // SAFETY: valid for our lifetime (Ring::new).
        unsafe { &*self.head }
    }

    fn tail(&self) -> &AtomicU64 {
        // SAFETY: valid for our lifetime (Ring::new).
        unsafe { &*self.tail }
    }

    /// Longest payload a record can have: half the ring, so that a record
    /// and a wrap marker always fit once the reader has caught up.
    pub fn max_record(&self) -> usize {
        self.cap / 2 - RECORD_HEADER
    }

    /// Reader, polling: whether the reader has consumed everything
    /// published ([`Ring::is_empty`]), asking the CPU meanwhile for the
    /// first lines of where the next record will start.
    ///
    /// Why: a poll that looks at `head` alone finds a record in two cache
    /// misses one after the other — `head`, then the record it announces,
    /// which the loop had no reason to load before. Prefetching the
    /// record's first lines on every poll (hits while nothing changes;
    /// they hold a small message's whole record) lets both misses, once
    /// the writer's stores invalidate them, go out together. A prefetch,
    /// unlike a load, never faults: the writer allocates its ring's pages
    /// as it reaches them, and touching one before (a hole of the /dev/shm
    /// file) would allocate it — or raise SIGBUS with /dev/shm full.
    /// Pinned `fi_pingpong -S 64` on one host: 0.78–0.79 → 0.61–0.63 µs
    /// per transfer (`docs/performance.md`).
    #[inline]
    pub fn poll_empty(&self) -> bool {
        let tail = self.tail().load(Ordering::Relaxed);
        let pos = tail as usize & (self.cap - 1);
        prefetch(self.data.wrapping_add(pos));
        if pos + CACHE_LINE < self.cap {
            prefetch(self.data.wrapping_add(pos + CACHE_LINE));
        }
        self.head().load(Ordering::Acquire) == tail
    }

    /// Whether the reader has consumed everything published.
    pub fn is_empty(&self) -> bool {
        self.head().load(Ordering::Acquire) == self.tail().load(Ordering::Acquire)
    }

    /// Writer: where to continue from when taking the ring over (a
    /// previous writer may have left anything there). It wraps at the
    /// array's end only; see [`Writer::wrap_early_at`].
    pub fn writer_start(&self) -> Writer {
        let (head, tail) = (
            self.head().load(Ordering::Acquire),
            self.tail().load(Ordering::Acquire),
        );
        let wrap_at = self.cap;
        if head.wrapping_sub(tail) > self.cap as u64 || !head.is_multiple_of(8) {
            // Nothing sane is published: start where the reader is.
            self.head().store(tail, Ordering::Release);
            return Writer {
                head: tail,
                tail,
                wrap_at,
            };
        }
        Writer {
            head,
            tail,
            wrap_at,
        }
    }

    /// Writer: where the next record of `len` bytes goes, or why it cannot
    /// go now. Nothing is written.
    ///
    /// A record that would cross the writer's early-wrap offset goes to
    /// the array's start instead, behind a wrap marker, when the reader
    /// has consumed everything; otherwise (the reader is behind: a stream)
    /// it continues towards the array's end. (Not when the reader has
    /// consumed only the start: until it passes the marker, the bytes
    /// skipped count as used, and a stream would have only the start.)
    pub fn place(&self, w: &mut Writer, len: usize) -> Result<Placement, PushError> {
        if len > self.max_record() {
            return Err(PushError::TooLong);
        }
        let need = padded(len) as u64;
        let pos = w.head as usize & (self.cap - 1);
        let to_end = (self.cap - pos) as u64;
        // (With the reader drained, the room check says the record fits
        // before the marker: `need` ≤ `pos`.)
        if pos < w.wrap_at
            && pos + need as usize > w.wrap_at
            && self.drained(w)
            && self.room(w, to_end, need)
        {
            return Ok(Placement { skip: to_end, need });
        }
        let skip = if need > to_end { to_end } else { 0 };
        if self.room(w, skip, need) {
            Ok(Placement { skip, need })
        } else {
            Err(PushError::Full)
        }
    }

    /// Whether the reader has consumed everything the writer published
    /// (its counter read again unless it was known to).
    fn drained(&self, w: &mut Writer) -> bool {
        if w.tail != w.head {
            w.tail = self.tail().load(Ordering::Acquire);
        }
        w.tail == w.head
    }

    /// Whether `skip` bytes of wrap and a record of `need` fit before the
    /// reader's counter.
    fn room(&self, w: &mut Writer, skip: u64, need: u64) -> bool {
        let cap = self.cap as u64;
        let head = w.head;
        let fits = |tail: u64| {
            let used = head.wrapping_sub(tail);
            // An impossible reader's counter: nothing fits until it is sane.
            used <= cap && used + skip + need <= cap
        };
        // The reader's counter is read again only when the room we last
        // knew of is used up: it is a cache line the reader keeps writing.
        if fits(w.tail) {
            return true;
        }
        w.tail = self.tail().load(Ordering::Acquire);
        fits(w.tail)
    }

    /// Writer: the end of the furthest bytes of the array that writing at
    /// `p` touches (a wrap marker where the writer is, then the record at
    /// the array's start; else the record where the writer is).
    pub fn placement_end(&self, w: &Writer, p: &Placement) -> usize {
        let pos = w.head as usize & (self.cap - 1);
        if p.skip > 0 {
            (pos + RECORD_HEADER).max(p.need as usize)
        } else {
            pos + p.need as usize
        }
    }

    /// Writer: append a record of `kind` (its pieces, concatenated, `len`
    /// bytes as [`Ring::place`] was told) where `p` says, and publish it.
    pub fn write(&self, w: &mut Writer, p: Placement, kind: Kind, payload: &[&[u8]]) {
        let len: usize = payload.iter().map(|p| p.len()).sum();
        // The copies below stay inside the ring only for what `p` placed.
        assert!(padded(len) as u64 <= p.need, "a record longer than placed");
        let mut at = w.head;
        if p.skip > 0 {
            self.write_header(at, WRAP, 0);
            at += p.skip;
        }
        let pos = at as usize & (self.cap - 1);
        self.write_header(at, len as u32, kind.word());
        let mut off = pos + RECORD_HEADER;
        for piece in payload {
            // SAFETY: pos + RECORD_HEADER + len ≤ cap (`place` found a
            // record of `p.need` bytes fits before the end, and this one
            // is no longer: asserted above); the source is ours.
            unsafe {
                std::ptr::copy_nonoverlapping(piece.as_ptr(), self.data.add(off), piece.len());
            }
            off += piece.len();
        }
        w.head = at + p.need;
        self.head().store(w.head, Ordering::Release);
    }

    /// Writer: [`Ring::place`] then [`Ring::write`].
    #[cfg(test)]
    pub fn push(&self, w: &mut Writer, kind: Kind, payload: &[&[u8]]) -> Result<(), PushError> {
        let len: usize = payload.iter().map(|p| p.len()).sum();
        let p = self.place(w, len)?;
        self.write(w, p, kind, payload);
        Ok(())
    }

    fn write_header(&self, at: u64, len: u32, kind: u32) {
        let pos = at as usize & (self.cap - 1);
        let mut h = [0u8; RECORD_HEADER];
        h[..4].copy_from_slice(&len.to_le_bytes());
        h[4..].copy_from_slice(&kind.to_le_bytes());
        // SAFETY: pos is 8-aligned and cap a multiple of 8: 8 bytes fit.
        unsafe { std::ptr::copy_nonoverlapping(h.as_ptr(), self.data.add(pos), RECORD_HEADER) };
    }

    /// A record header's length and kind word.
    fn read_header(&self, pos: usize) -> (u32, u32) {
        let mut h = [0u8; RECORD_HEADER];
        // SAFETY: pos is 8-aligned, below cap (a multiple of 8): 8 bytes fit.
        unsafe { std::ptr::copy_nonoverlapping(self.data.add(pos), h.as_mut_ptr(), RECORD_HEADER) };
        let word = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        (word(0), word(4))
    }

    /// Reader: hand up to `max` published records to `f` with their kind,
    /// each no longer than `max_len` (longer ones, and kinds we do not
    /// know, are malformed), and release their room.
    pub fn pop(&self, max: usize, max_len: usize, mut f: impl FnMut(Kind, &[u8])) -> PopCounts {
        let mut counts = PopCounts::default();
        let head = self.head().load(Ordering::Acquire);
        let mut tail = self.tail().load(Ordering::Relaxed);
        let cap = self.cap as u64;
        let max_len = max_len.min(self.max_record());
        while tail != head && (counts.datagrams as usize) < max {
            let avail = head.wrapping_sub(tail);
            if avail > cap || avail < RECORD_HEADER as u64 || !tail.is_multiple_of(8) {
                counts.malformed += 1;
                tail = head;
                break;
            }
            let pos = tail as usize & (self.cap - 1);
            let (len, kind) = self.read_header(pos);
            let to_end = cap - pos as u64;
            if len == WRAP {
                if to_end > avail {
                    counts.malformed += 1;
                    tail = head;
                    break;
                }
                tail = tail.wrapping_add(to_end);
                continue;
            }
            let need = padded(len as usize) as u64;
            let fits = len as usize <= max_len && need <= avail && need <= to_end;
            let Some(kind) = Kind::of(kind).filter(|_| fits) else {
                counts.malformed += 1;
                tail = head;
                break;
            };
            // SAFETY: pos + 8 + len ≤ cap (need ≤ to_end, checked above).
            let payload = unsafe {
                std::slice::from_raw_parts(self.data.add(pos + RECORD_HEADER), len as usize)
            };
            f(kind, payload);
            counts.datagrams += 1;
            tail = tail.wrapping_add(need);
            // Room goes back as soon as each record is used: a writer
            // waiting for it need not wait for the whole batch.
            self.tail().store(tail, Ordering::Release);
        }
        self.tail().store(tail, Ordering::Release);
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ring over heap memory: counters, then data.
    struct Mem {
        words: Vec<AtomicU64>,
        cap: usize,
    }

    impl Mem {
        fn new(cap: usize) -> Mem {
            Mem {
                words: (0..2 + cap / 8).map(|_| AtomicU64::new(0)).collect(),
                cap,
            }
        }

        /// The ring, and a writer of it that wraps early at `offset`.
        fn ring_wrapping_early_at(&self, offset: usize) -> (Ring, Writer) {
            let r = self.ring();
            let mut w = r.writer_start();
            w.wrap_early_at(offset);
            (r, w)
        }

        fn ring(&self) -> Ring {
            let base = self.words.as_ptr();
            // SAFETY: the vector outlives the ring in every test; data is
            // the words after the two counters.
            unsafe { Ring::new(base, base.add(1), base.add(2) as *mut u8, self.cap) }
        }
    }

    fn collect(r: &Ring, max_len: usize) -> (Vec<Vec<u8>>, PopCounts) {
        let mut got = Vec::new();
        let c = r.pop(usize::MAX, max_len, |k, p| {
            assert_eq!(k, Kind::Datagram);
            got.push(p.to_vec())
        });
        (got, c)
    }

    #[test]
    fn records_keep_their_kind_and_unknown_kinds_are_malformed() {
        let m = Mem::new(256);
        let r = m.ring();
        let mut w = r.writer_start();
        r.push(&mut w, Kind::Datagram, &[b"datagram"]).unwrap();
        r.push(&mut w, Kind::Message, &[b"mess", b"age"]).unwrap();
        let mut got = Vec::new();
        let c = r.pop(usize::MAX, 512, |k, p| got.push((k, p.to_vec())));
        assert_eq!(c.datagrams, 2);
        assert_eq!(
            got,
            vec![
                (Kind::Datagram, b"datagram".to_vec()),
                (Kind::Message, b"message".to_vec())
            ]
        );
        // A kind word nobody defined: dropped with what follows, counted.
        let at = w.head as usize % 256;
        r.push(&mut w, Kind::Datagram, &[b"x"]).unwrap();
        // SAFETY: test memory, in bounds (the kind word of that record).
        unsafe { (m.words.as_ptr().add(2) as *mut u8).add(at + 4).write(7) };
        let (got, c) = collect(&r, 512);
        assert!(got.is_empty());
        assert_eq!(c.malformed, 1);
    }

    #[test]
    fn polling_says_what_is_empty_says_and_allocates_no_page() {
        // The data of a ring in a shared file of holes (as a writer leaves
        // the stages it has not reached): polling must not fault them in.
        const CAP: usize = 1 << 16;
        let file = tempfile_in_shm();
        // SAFETY: a fresh memfd we own; ftruncate leaves it all holes.
        assert_eq!(unsafe { libc::ftruncate(file, CAP as i64) }, 0);
        // SAFETY: a shared mapping of CAP bytes of that file.
        let data = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                CAP,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file,
                0,
            )
        };
        assert_ne!(data, libc::MAP_FAILED);
        let counters = [AtomicU64::new(0), AtomicU64::new(0)];
        // SAFETY: the counters and the mapping outlive the ring.
        let r = unsafe { Ring::new(&counters[0], &counters[1], data.cast(), CAP) };
        for tail in [0, 8, CAP as u64 - 64, CAP as u64 - 8, 5 * CAP as u64] {
            counters[0].store(tail, Ordering::Relaxed);
            counters[1].store(tail, Ordering::Relaxed);
            assert!(r.poll_empty() && r.is_empty());
            counters[0].store(tail + 8, Ordering::Relaxed);
            assert!(!r.poll_empty() && !r.is_empty());
        }
        // SAFETY: an fstat of our fd into a zeroed stat.
        let blocks = unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            assert_eq!(libc::fstat(file, &mut st), 0);
            st.st_blocks
        };
        assert_eq!(blocks, 0, "polling allocated pages of the ring");
        // SAFETY: unmapping and closing what this test made.
        unsafe {
            libc::munmap(data, CAP);
            libc::close(file);
        }
    }

    /// A memfd: tmpfs, as /dev/shm is.
    fn tempfile_in_shm() -> libc::c_int {
        // SAFETY: a NUL-terminated name; no flags.
        let fd = unsafe { libc::memfd_create(c"ring-poll-test".as_ptr(), 0) };
        assert!(fd >= 0);
        fd
    }

    #[test]
    fn a_writer_wrapping_early_stays_at_the_start_while_its_reader_keeps_up() {
        let m = Mem::new(4096);
        let (r, mut w) = m.ring_wrapping_early_at(512);
        for i in 0..1000u32 {
            let p = [i as u8; 100]; // records of 112 bytes
            let place = r.place(&mut w, p.len()).unwrap();
            assert!(
                r.placement_end(&w, &place) <= 512,
                "record {i} went past the early wrap"
            );
            r.write(&mut w, place, Kind::Datagram, &[&p]);
            let (got, c) = collect(&r, 512);
            assert_eq!(got, vec![p.to_vec()], "record {i}");
            assert_eq!(c.malformed, 0);
        }
    }

    #[test]
    fn a_record_longer_than_the_room_before_the_writer_does_not_wrap_early() {
        let m = Mem::new(4096);
        let (r, mut w) = m.ring_wrapping_early_at(512);
        r.push(&mut w, Kind::Datagram, &[&[1u8; 100]]).unwrap();
        assert_eq!(collect(&r, 2048).0.len(), 1);
        // 608 bytes from offset 112: it crosses 512, and at the start it
        // would cover its own wrap marker.
        let big = [2u8; 600];
        r.push(&mut w, Kind::Datagram, &[&big]).unwrap();
        let (got, c) = collect(&r, 2048);
        assert_eq!(got, vec![big.to_vec()]);
        assert_eq!(c.malformed, 0);
    }

    #[test]
    fn a_writer_wrapping_early_still_has_the_whole_ring_for_a_stream() {
        let m = Mem::new(4096);
        let (r, mut w) = m.ring_wrapping_early_at(512);
        // Request and reply first: the writer goes round the start.
        for i in 0..10u8 {
            r.push(&mut w, Kind::Datagram, &[&[i; 100]]).unwrap();
            assert_eq!(collect(&r, 512).0.len(), 1);
        }
        // Then the reader reads nothing: the writer fills the whole ring
        // (less what a wrap at its end leaves unused).
        let mut sent = Vec::new();
        for i in 0u8.. {
            let p = [i; 100];
            if r.push(&mut w, Kind::Datagram, &[&p]).is_err() {
                break;
            }
            sent.push(p.to_vec());
        }
        assert!(sent.len() >= 4096 / 112 - 1, "{} records", sent.len());
        let (got, _) = collect(&r, 512);
        assert_eq!(got, sent);
        // Caught up: back at the start, early, over and over.
        for i in 0..100u8 {
            let p = [i; 100];
            r.push(&mut w, Kind::Datagram, &[&p]).unwrap();
            assert!(w.head as usize % 4096 <= 512);
            assert_eq!(collect(&r, 512).0, vec![p.to_vec()]);
        }
    }

    #[test]
    fn datagrams_come_out_in_order() {
        let m = Mem::new(1024);
        let r = m.ring();
        let mut w = r.writer_start();
        r.push(&mut w, Kind::Datagram, &[b"hello"]).unwrap();
        r.push(&mut w, Kind::Datagram, &[b"wor", b"ld!"]).unwrap();
        r.push(&mut w, Kind::Datagram, &[]).unwrap();
        let (got, c) = collect(&r, 512);
        assert_eq!(got, vec![b"hello".to_vec(), b"world!".to_vec(), vec![]]);
        assert_eq!(c.datagrams, 3);
        assert_eq!(c.malformed, 0);
        assert!(r.is_empty());
    }

    #[test]
    fn wraps_around_many_times() {
        let m = Mem::new(256);
        let r = m.ring();
        let mut w = r.writer_start();
        for i in 0..1000u32 {
            let len = (i as usize * 7) % 100;
            let p: Vec<u8> = (0..len).map(|j| (i as usize + j) as u8).collect();
            r.push(&mut w, Kind::Datagram, &[&p]).unwrap();
            let (got, c) = collect(&r, 512);
            assert_eq!(got, vec![p], "datagram {i}");
            assert_eq!(c.malformed, 0);
        }
        assert!(
            w.head > 256 * 100,
            "the counters ran past the ring many times"
        );
    }

    #[test]
    fn full_ring_refuses_until_read() {
        let m = Mem::new(256);
        let r = m.ring();
        let mut w = r.writer_start();
        let p = [7u8; 56]; // 64 bytes a record
        for _ in 0..4 {
            r.push(&mut w, Kind::Datagram, &[&p]).unwrap();
        }
        assert_eq!(r.push(&mut w, Kind::Datagram, &[&p]), Err(PushError::Full));
        let mut n = 0;
        r.pop(1, 512, |_, _| n += 1);
        assert_eq!(n, 1);
        r.push(&mut w, Kind::Datagram, &[&p]).unwrap();
        let (got, _) = collect(&r, 512);
        assert_eq!(got.len(), 4);
        assert_eq!(
            r.push(&mut w, Kind::Datagram, &[&[0u8; 200]]),
            Err(PushError::TooLong)
        );
    }

    #[test]
    fn a_record_that_does_not_fit_before_the_end_wraps() {
        let m = Mem::new(256);
        let r = m.ring();
        let mut w = r.writer_start();
        r.push(&mut w, Kind::Datagram, &[&[1u8; 100]]).unwrap(); // 112 bytes
        r.push(&mut w, Kind::Datagram, &[&[2u8; 100]]).unwrap(); // 224
        let (got, _) = collect(&r, 512);
        assert_eq!(got.len(), 2);
        // 32 bytes left before the end: this one goes to offset 0.
        r.push(&mut w, Kind::Datagram, &[&[3u8; 100]]).unwrap();
        assert_eq!(w.head, 256 + 112);
        let (got, c) = collect(&r, 512);
        assert_eq!(got, vec![vec![3u8; 100]]);
        assert_eq!(c.malformed, 0);
    }

    #[test]
    fn impossible_counters_are_dropped_and_counted() {
        let m = Mem::new(256);
        let r = m.ring();
        // Head far ahead of tail.
        m.words[0].store(10_000, Ordering::Release);
        let (got, c) = collect(&r, 512);
        assert!(got.is_empty());
        assert_eq!(c.malformed, 1);
        assert!(r.is_empty(), "the reader skipped to head");
        // A writer taking the ring over starts from a sane place.
        let mut w = r.writer_start();
        r.push(&mut w, Kind::Datagram, &[b"ok"]).unwrap();
        assert_eq!(collect(&r, 512).0, vec![b"ok".to_vec()]);
        // Head not a multiple of 8 behind a sane tail.
        m.words[0].store(m.words[1].load(Ordering::Relaxed) + 3, Ordering::Release);
        assert_eq!(collect(&r, 512).1.malformed, 1);
    }

    #[test]
    fn malformed_lengths_are_dropped_and_counted() {
        let m = Mem::new(256);
        let r = m.ring();
        let mut w = r.writer_start();
        r.push(&mut w, Kind::Datagram, &[&[1u8; 40]]).unwrap();
        r.push(&mut w, Kind::Datagram, &[&[2u8; 40]]).unwrap();
        // The first record claims more than was published.
        let start = m.words[1].load(Ordering::Relaxed);
        let pos = start as usize % 256;
        // SAFETY: test memory, in bounds.
        unsafe { (m.words.as_ptr().add(2) as *mut u8).add(pos).write(200) };
        let (got, c) = collect(&r, 512);
        assert!(got.is_empty());
        assert_eq!(c.malformed, 1);
        // Longer than the reader's largest datagram.
        r.push(&mut w, Kind::Datagram, &[&[3u8; 40]]).unwrap();
        let (got, c) = collect(&r, 16);
        assert!(got.is_empty());
        assert_eq!(c.malformed, 1);
        // The ring works on afterwards.
        r.push(&mut w, Kind::Datagram, &[&[4u8; 8]]).unwrap();
        assert_eq!(collect(&r, 512).0, vec![vec![4u8; 8]]);
    }

    #[test]
    fn a_writer_that_died_mid_record_leaves_nothing_visible() {
        let m = Mem::new(256);
        let r = m.ring();
        let mut w = r.writer_start();
        r.push(&mut w, Kind::Datagram, &[b"whole"]).unwrap();
        // The dead writer's half-written record: bytes, but no head store.
        // SAFETY: test memory, in bounds.
        unsafe {
            let data = m.words.as_ptr().add(2) as *mut u8;
            data.add(w.head as usize % 256).write(50);
        }
        let (got, c) = collect(&r, 512);
        assert_eq!(got, vec![b"whole".to_vec()]);
        assert_eq!(c.malformed, 0);
        // Its successor continues from the published head.
        let mut w = r.writer_start();
        r.push(&mut w, Kind::Datagram, &[b"next"]).unwrap();
        assert_eq!(collect(&r, 512).0, vec![b"next".to_vec()]);
    }
}
