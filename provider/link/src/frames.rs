//! Frame allocator: who owns each UMEM frame.
//!
//! The UMEM is an array of equal, power-of-two sized frames addressed by
//! their byte offset (the "address" the rings carry). Frames `[0, rx_frames)`
//! serve receive (they circulate between the fill ring, the RX ring and the
//! caller); the rest serve transmit. Keeping the two pools apart means a
//! sender holding many frames for retransmission can never starve the fill
//! ring, and vice versa.
//!
//! With multi-buffer (a datagram larger than one chunk, `XDP_USE_SG`), a TX
//! "frame" is a slot of several consecutive chunks (a power of two of them):
//! the datagram is written contiguously and handed to the kernel as one
//! descriptor per chunk. RX frames stay single chunks: the kernel fills them
//! one by one from the fill ring.
//!
//! A TX frame goes back to the free pool only when both are true: every
//! submission of it was reported by the completion ring, and the caller
//! released it. The caller may release a frame as soon as it is queued: the
//! kernel still reads it until the completion ring returns it.

/// Ownership state of one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// In a free pool.
    Free,
    /// Given to the kernel through the fill ring.
    Fill,
    /// Received: being handed to the caller (during the `recv` callback).
    RxHeld,
    /// A transmit frame: `in_flight` submissions not yet completed; `held`
    /// while the caller has not released it.
    Tx { in_flight: u16, held: bool },
}

/// Why a frame operation was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The address is outside the UMEM.
    OutOfRange,
    /// The frame is not in a state that allows this operation (e.g. releasing
    /// a frame twice, sending a frame that was not allocated for TX).
    WrongState,
    /// A TX frame address that is not the start of a frame.
    Misaligned,
}

/// The ownership table and the two free lists.
#[derive(Debug)]
pub(crate) struct FramePool {
    /// log2 of the chunk (RX frame) size.
    shift: u32,
    /// log2 of the TX slot size (chunk size times chunks per slot).
    tx_shift: u32,
    rx_frames: u32,
    /// First byte after the RX frames: where the TX slots start.
    rx_end: u64,
    state: Vec<State>,
    rx_free: Vec<u32>,
    tx_free: Vec<u32>,
    /// The RX frames are shared with other processes (a UMEM group): the
    /// kernel may hand us a frame another member put on the fill ring, so a
    /// received frame need not be `Fill` in our table.
    shared_rx: bool,
}

impl FramePool {
    /// `frame_count` chunks of `frame_size` bytes (a power of two), the
    /// first `rx_frames` of which serve receive; the chunks after them are
    /// grouped into TX slots of `slot_chunks` (a power of two) consecutive
    /// chunks, and chunks left over at the end are not used.
    pub fn new(frame_count: u32, rx_frames: u32, frame_size: u32, slot_chunks: u32) -> Self {
        debug_assert!(frame_size.is_power_of_two() && slot_chunks.is_power_of_two());
        let rx_frames = rx_frames.min(frame_count);
        let shift = frame_size.trailing_zeros();
        let tx_shift = shift + slot_chunks.trailing_zeros();
        let tx_slots = (frame_count - rx_frames) >> slot_chunks.trailing_zeros();
        let total = rx_frames + tx_slots;
        // Pop order: lowest index first (purely cosmetic, helps debugging).
        let rx_free = (0..rx_frames).rev().collect();
        let tx_free = (rx_frames..total).rev().collect();
        Self {
            shift,
            tx_shift,
            rx_frames,
            rx_end: u64::from(rx_frames) << shift,
            state: vec![State::Free; total as usize],
            rx_free,
            tx_free,
            shared_rx: false,
        }
    }

    /// In a UMEM group: receive frames are common to all members (see
    /// `shared_rx`); `prime` says whether ours start free (the member that
    /// created the group puts them on the fill ring) or with the others.
    /// TX slots `first..first + count` (counted from the first TX slot) are
    /// ours; the others belong to other members.
    pub fn join_group(&mut self, prime: bool, first: u32, count: u32) {
        self.shared_rx = true;
        if !prime {
            self.rx_free.clear();
        }
        let (lo, hi) = (self.rx_frames + first, self.rx_frames + first + count);
        self.tx_free.retain(|&i| (lo..hi).contains(&i));
    }

    /// The TX slot (counted from the first) holding `addr`, `None` for an
    /// RX frame.
    pub fn tx_slot_of(&self, addr: u64) -> Option<u32> {
        if addr < self.rx_end {
            return None;
        }
        u32::try_from((addr - self.rx_end) >> self.tx_shift).ok()
    }

    /// Frame index holding `addr` (any byte offset inside the frame: the RX
    /// ring reports the address of the packet data, past the headroom).
    fn index(&self, addr: u64) -> Result<usize, FrameError> {
        let i = if addr < self.rx_end {
            addr >> self.shift
        } else {
            u64::from(self.rx_frames) + ((addr - self.rx_end) >> self.tx_shift)
        };
        let i = usize::try_from(i).map_err(|_| FrameError::OutOfRange)?;
        if i < self.state.len() {
            Ok(i)
        } else {
            Err(FrameError::OutOfRange)
        }
    }

    /// Start address of the frame containing `addr`.
    pub fn base(&self, addr: u64) -> u64 {
        if addr < self.rx_end {
            (addr >> self.shift) << self.shift
        } else {
            self.rx_end + (((addr - self.rx_end) >> self.tx_shift) << self.tx_shift)
        }
    }

    fn addr(&self, i: u32) -> u64 {
        if i < self.rx_frames {
            u64::from(i) << self.shift
        } else {
            self.rx_end + (u64::from(i - self.rx_frames) << self.tx_shift)
        }
    }

    /// Bytes of one TX slot.
    pub fn tx_slot_size(&self) -> u64 {
        1 << self.tx_shift
    }

    /// Takes a free RX frame to put on the fill ring.
    pub fn take_for_fill(&mut self) -> Option<u64> {
        let i = self.rx_free.pop()?;
        self.state[i as usize] = State::Fill;
        Some(self.addr(i))
    }

    /// The kernel returned `addr` through the RX ring: the caller now owns it.
    pub fn received(&mut self, addr: u64) -> Result<(), FrameError> {
        let i = self.index(addr)?;
        let ours = self.state[i] == State::Fill;
        let from_another = self.shared_rx && self.state[i] == State::Free && addr < self.rx_end;
        if !ours && !from_another {
            return Err(FrameError::WrongState);
        }
        self.state[i] = State::RxHeld;
        Ok(())
    }

    /// The caller is done with a received frame.
    pub fn release_rx(&mut self, addr: u64) -> Result<(), FrameError> {
        let i = self.index(addr)?;
        if self.state[i] != State::RxHeld {
            return Err(FrameError::WrongState);
        }
        self.state[i] = State::Free;
        self.rx_free.push(i as u32);
        Ok(())
    }

    /// Allocates a TX frame for the caller.
    pub fn alloc_tx(&mut self) -> Option<u64> {
        let i = self.tx_free.pop()?;
        self.state[i as usize] = State::Tx {
            in_flight: 0,
            held: true,
        };
        Some(self.addr(i))
    }

    /// Index of a TX frame, which callers name by its start address.
    fn tx_index(&self, addr: u64) -> Result<usize, FrameError> {
        if self.base(addr) != addr {
            return Err(FrameError::Misaligned);
        }
        self.index(addr)
    }

    /// Checks that the caller may submit `addr` (allocated, not released).
    pub fn check_submit(&self, addr: u64) -> Result<(), FrameError> {
        let i = self.tx_index(addr)?;
        match self.state[i] {
            State::Tx {
                in_flight,
                held: true,
            } if in_flight < u16::MAX => Ok(()),
            _ => Err(FrameError::WrongState),
        }
    }

    /// Records one submission of `addr` to the TX ring.
    pub fn submitted(&mut self, addr: u64) -> Result<(), FrameError> {
        self.check_submit(addr)?;
        let i = self.tx_index(addr)?;
        if let State::Tx { in_flight, held } = self.state[i] {
            self.state[i] = State::Tx {
                in_flight: in_flight + 1,
                held,
            };
        }
        Ok(())
    }

    /// The completion ring reported one submission of `addr` as done.
    pub fn completed(&mut self, addr: u64) -> Result<(), FrameError> {
        let i = self.index(addr)?;
        match self.state[i] {
            State::Tx { in_flight, held } if in_flight > 0 => {
                self.set_tx(i, in_flight - 1, held);
                Ok(())
            }
            _ => Err(FrameError::WrongState),
        }
    }

    /// The caller is done with a TX frame; it returns to the pool once no
    /// submission is outstanding.
    pub fn release_tx(&mut self, addr: u64) -> Result<(), FrameError> {
        let i = self.tx_index(addr)?;
        match self.state[i] {
            State::Tx {
                in_flight,
                held: true,
            } => {
                self.set_tx(i, in_flight, false);
                Ok(())
            }
            _ => Err(FrameError::WrongState),
        }
    }

    fn set_tx(&mut self, i: usize, in_flight: u16, held: bool) {
        if in_flight == 0 && !held {
            self.state[i] = State::Free;
            self.tx_free.push(i as u32);
        } else {
            self.state[i] = State::Tx { in_flight, held };
        }
    }

    /// Free RX frames (not on the fill ring, not held).
    pub fn rx_free(&self) -> usize {
        self.rx_free.len()
    }

    /// Free TX frames.
    pub fn tx_free(&self) -> usize {
        self.tx_free.len()
    }

    /// Number of RX frames.
    pub fn rx_frames(&self) -> u32 {
        self.rx_frames
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rx_cycle() {
        let mut p = FramePool::new(8, 4, 2048, 1);
        let mut filled = vec![];
        while let Some(a) = p.take_for_fill() {
            filled.push(a);
        }
        assert_eq!(filled, vec![0, 2048, 4096, 6144]);
        // The RX ring reports the data address, past the headroom.
        p.received(2048 + 256).unwrap();
        assert_eq!(p.received(2048 + 256), Err(FrameError::WrongState));
        p.release_rx(2048 + 256).unwrap();
        assert_eq!(p.release_rx(2048), Err(FrameError::WrongState));
        assert_eq!(p.rx_free(), 1);
        assert_eq!(p.take_for_fill(), Some(2048));
        // TX frames never serve RX.
        assert_eq!(p.received(5 * 2048), Err(FrameError::WrongState));
        assert_eq!(p.received(64 * 2048), Err(FrameError::OutOfRange));
    }

    #[test]
    fn tx_frame_returns_after_completion_and_release() {
        let mut p = FramePool::new(4, 2, 4096, 1);
        let a = p.alloc_tx().unwrap();
        let b = p.alloc_tx().unwrap();
        assert_eq!((a, b), (2 * 4096, 3 * 4096));
        assert_eq!(p.alloc_tx(), None);

        // Completion first, release later.
        p.submitted(a).unwrap();
        p.completed(a).unwrap();
        assert_eq!(p.tx_free(), 0);
        p.release_tx(a).unwrap();
        assert_eq!(p.tx_free(), 1);

        // Release first (as soon as queued), completion later; two
        // submissions of one frame each need their completion.
        p.submitted(b).unwrap();
        p.submitted(b).unwrap();
        p.release_tx(b).unwrap();
        assert_eq!(p.submitted(b), Err(FrameError::WrongState));
        p.completed(b).unwrap();
        assert_eq!(p.tx_free(), 1);
        p.completed(b).unwrap();
        assert_eq!(p.tx_free(), 2);
        assert_eq!(p.completed(b), Err(FrameError::WrongState));
    }

    #[test]
    fn misuse_is_refused() {
        let mut p = FramePool::new(4, 2, 2048, 1);
        assert_eq!(p.submitted(0), Err(FrameError::WrongState));
        assert_eq!(p.release_tx(3 * 2048), Err(FrameError::WrongState));
        assert_eq!(p.submitted(4 * 2048), Err(FrameError::OutOfRange));
        assert_eq!(p.submitted(u64::MAX), Err(FrameError::Misaligned));
        assert_eq!(p.submitted(u64::MAX << 11), Err(FrameError::OutOfRange));
        let a = p.alloc_tx().unwrap();
        p.release_tx(a).unwrap();
        assert_eq!(p.release_tx(a), Err(FrameError::WrongState));
        assert_eq!(p.base(a + 77), a);
        // A TX frame is named by its start: an inner address is refused, so
        // headers + payload can never spill into the next frame.
        let b = p.alloc_tx().unwrap();
        assert_eq!(p.submitted(b + 7), Err(FrameError::Misaligned));
        assert_eq!(p.release_tx(b + 7), Err(FrameError::Misaligned));
        p.submitted(b).unwrap();
    }

    #[test]
    fn a_group_member_takes_frames_others_filled_and_keeps_to_its_tx_range() {
        // 4 RX chunks, 6 TX slots: this member has slots 2..4.
        let mut p = FramePool::new(10, 4, 2048, 1);
        p.join_group(false, 2, 2);
        assert_eq!(p.rx_free(), 0);
        assert_eq!(p.take_for_fill(), None);
        // Another member filled frame 1: we may receive it, once.
        p.received(2048 + 64).unwrap();
        assert_eq!(p.received(2048), Err(FrameError::WrongState));
        p.release_rx(2048).unwrap();
        assert_eq!(p.take_for_fill(), Some(2048));
        // TX frames are ours only.
        let a = p.alloc_tx().unwrap();
        let b = p.alloc_tx().unwrap();
        assert_eq!((a, b), (6 * 2048, 7 * 2048));
        assert_eq!(p.alloc_tx(), None);
        assert_eq!(p.tx_slot_of(a), Some(2));
        assert_eq!(p.tx_slot_of(2048), None);
        // A TX frame is never taken for a received one.
        assert_eq!(p.received(4 * 2048), Err(FrameError::WrongState));
    }

    #[test]
    fn tx_slots_span_several_chunks() {
        // 4 RX chunks, then 10 chunks = 2 slots of 4 (2 chunks unused).
        let mut p = FramePool::new(14, 4, 4096, 4);
        assert_eq!(p.tx_slot_size(), 16384);
        let a = p.alloc_tx().unwrap();
        let b = p.alloc_tx().unwrap();
        assert_eq!((a, b), (4 * 4096, 4 * 4096 + 16384));
        assert_eq!(p.alloc_tx(), None);
        // Any chunk of a slot names the slot; only its start submits.
        assert_eq!(p.base(a + 3 * 4096 + 5), a);
        assert_eq!(p.submitted(a + 4096), Err(FrameError::Misaligned));
        p.submitted(a).unwrap();
        p.completed(a).unwrap();
        p.release_tx(a).unwrap();
        assert_eq!(p.tx_free(), 1);
        // RX chunks are unchanged, and the unused tail is out of range.
        assert_eq!(p.take_for_fill(), Some(0));
        assert_eq!(p.received(12 * 4096), Err(FrameError::OutOfRange));
    }
}
