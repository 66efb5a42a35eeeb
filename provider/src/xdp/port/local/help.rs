//! A pull both processes copy: the receiver of a large message from a local
//! peer copies it out of the sender's memory with `process_vm_readv`
//! (`xdp/rdm/cma.rs`), and meanwhile asks the sender, through the slot the
//! sender writes to in the receiver's area, to copy the other end of it with
//! `process_vm_writev`. The sender is usually spinning in its own progress
//! loop waiting for that very send to complete, so its CPU is free: two
//! cores copy a megabyte in about half the time of one
//! (`docs/performance.md`, "Two processes on one host").
//!
//! The request is one cache line of the slot header ([`HelpLine`]): the
//! message cut into chunks, and one word `claim` = generation (32 bits),
//! `lo` and `hi` (16 bits each). The receiver takes chunks from the front
//! (`lo += 1`), the sender from the back (`hi -= 1`), each with a
//! compare-and-swap that also checks the generation, so neither copies a
//! chunk the other took, and a sender that read an older request's
//! addresses cannot take a chunk of a newer one. Once `lo == hi` nothing is
//! left to take; the receiver then waits until the sender counted every
//! chunk it took as done (`done`), and only then completes the receive: no
//! write of the sender's can land in a buffer the application got back.
//! A chunk the sender could not copy sets [`FAILED`]: the pull fails as a
//! whole and the engine's fallback sends the data through the rings.
//!
//! Who may write where: the sender writes only what the receiver asked for,
//! into the process that owns the area (it is that process's memory the
//! kernel checks the writes against), and only while that process lives
//! ([`Target::write`] asks its pidfd before each chunk, so a pid number
//! reused after the owner died is not written to). The receiver waits for
//! a sender that has taken a chunk only while that sender lives.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes per chunk: large enough that a chunk's system call is a small
/// part of its copy, small enough that a megabyte splits finely.
pub const CHUNK: usize = 64 << 10;
/// Set in `done` when the sender failed to copy a chunk it took.
const FAILED: u64 = 1 << 63;
/// Chunks one request covers at most (`lo` and `hi` are 16 bits).
pub const MAX_CHUNKS: usize = u16::MAX as usize;

/// The request's cache line in a slot header (64 bytes).
#[repr(C)]
pub struct HelpLine {
    claim: AtomicU64,
    done: AtomicU64,
    /// The sender's address of the message's byte 0.
    src: AtomicU64,
    /// The receiver's address of byte 0.
    dst: AtomicU64,
    /// Bytes in all.
    len: AtomicU64,
    _pad: [u64; 3],
}

const _: () = assert!(size_of::<HelpLine>() == 64);

fn pack(generation: u32, lo: u16, hi: u16) -> u64 {
    u64::from(generation) << 32 | u64::from(lo) << 16 | u64::from(hi)
}

fn unpack(w: u64) -> (u32, u16, u16) {
    ((w >> 32) as u32, (w >> 16) as u16, w as u16)
}

/// Chunk `i`'s (offset, length) in a message of `len` bytes.
fn chunk(i: u16, len: usize) -> (usize, usize) {
    let at = usize::from(i) * CHUNK;
    (at, CHUNK.min(len.saturating_sub(at)))
}

/// What a receiver's [`HelpLine::pull`] did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Pulled {
    /// Every byte arrived.
    pub ok: bool,
    /// Chunks the sender copied.
    pub by_sender: u64,
}

impl HelpLine {
    /// Receiver: copies the `len` bytes at the sender's `src` to our `dst`,
    /// asking the sender to copy chunks from the end while `copy(offset, n)`
    /// copies them from the front. `sender_alive` is asked while waiting
    /// for the sender's last chunks. One request per line at a time (the
    /// caller holds the endpoint's lock while it pulls).
    pub fn pull(
        &self,
        src: u64,
        dst: u64,
        len: usize,
        mut copy: impl FnMut(usize, usize) -> bool,
        sender_alive: impl Fn() -> bool,
    ) -> Pulled {
        let Ok(chunks) = u16::try_from(len.div_ceil(CHUNK)) else {
            return Pulled::default();
        };
        let (last_gen, _, _) = unpack(self.claim.load(Ordering::Relaxed));
        let generation = last_gen.wrapping_add(1);
        self.src.store(src, Ordering::Relaxed);
        self.dst.store(dst, Ordering::Relaxed);
        self.len.store(len as u64, Ordering::Relaxed);
        self.done.store(0, Ordering::Relaxed);
        // Publishes the addresses with it (the sender loads it Acquire).
        let mut w = pack(generation, 0, chunks);
        self.claim.store(w, Ordering::Release);
        let mut ok = true;
        loop {
            let (g, lo, hi) = unpack(w);
            if lo >= hi || g != generation {
                break;
            }
            // Failed once: take the rest so the sender stops, copy nothing.
            let take = if ok {
                pack(g, lo + 1, hi)
            } else {
                pack(g, hi, hi)
            };
            match self
                .claim
                .compare_exchange(w, take, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    if ok {
                        let (at, n) = chunk(lo, len);
                        ok = copy(at, n);
                    }
                    w = take;
                }
                Err(now) => w = now,
            }
        }
        // Chunks [hi, chunks) are the sender's.
        let (_, _, hi) = unpack(w);
        let theirs = u64::from(chunks.saturating_sub(hi));
        let mut spins = 0u32;
        loop {
            let d = self.done.load(Ordering::Acquire);
            if d & !FAILED >= theirs {
                ok &= d & FAILED == 0;
                break;
            }
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(1 << 14) && !sender_alive() {
                // It died holding a chunk: nothing more will come.
                ok = false;
                break;
            }
            if spins > 1 << 10 {
                // Its copy is taking long: it may be waiting for this CPU
                // (more processes than cores).
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        Pulled {
            ok,
            by_sender: theirs,
        }
    }

    /// Sender: copies chunks of the request on this line from the end
    /// while there are any left, with `copy(src, dst, n)`, and counts each
    /// as done (or failed). Returns the chunks it copied.
    pub fn help(&self, mut copy: impl FnMut(u64, u64, usize) -> bool) -> u64 {
        let mut copied = 0;
        let mut w = self.claim.load(Ordering::Acquire);
        loop {
            let (g, lo, hi) = unpack(w);
            if lo >= hi {
                return copied;
            }
            // The request's addresses, read after its claim word (Acquire):
            // if the receiver has moved on to another request since, the
            // swap below fails on the generation.
            let src = self.src.load(Ordering::Relaxed);
            let dst = self.dst.load(Ordering::Relaxed);
            let len = usize::try_from(self.len.load(Ordering::Relaxed)).unwrap_or(0);
            let take = pack(g, lo, hi - 1);
            match self
                .claim
                .compare_exchange(w, take, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    let (at, n) = chunk(hi - 1, len);
                    // The line is another process's memory: addresses that
                    // wrap are refused, not computed.
                    let ok = match (src.checked_add(at as u64), dst.checked_add(at as u64)) {
                        (Some(s), Some(d)) => n > 0 && copy(s, d, n),
                        _ => false,
                    };
                    if !ok {
                        self.done.fetch_or(FAILED, Ordering::Release);
                    }
                    self.done.fetch_add(1, Ordering::Release);
                    copied += 1;
                    w = take;
                }
                Err(now) => w = now,
            }
        }
    }

    /// Whether a request has chunks left to take (the sender's cheap look
    /// on each pass).
    pub fn wants_help(&self) -> bool {
        let (_, lo, hi) = unpack(self.claim.load(Ordering::Relaxed));
        lo < hi
    }
}

/// The process a sender's help writes into: an area's owner, held by a
/// pidfd opened while its area was open to us.
pub struct Target {
    pid: libc::pid_t,
    pidfd: OwnedFd,
    /// The kernel refused to let us write into it (EPERM: Yama's
    /// ptrace_scope, a non-dumpable process): do not help it again.
    refused: std::cell::Cell<bool>,
}

impl Target {
    /// `None` where the kernel has no pidfds (before Linux 5.3) or the
    /// process is gone: no help then, the receiver copies alone.
    pub fn open(pid: u32) -> Option<Target> {
        let pid = libc::pid_t::try_from(pid).ok().filter(|p| *p > 0)?;
        // SAFETY: plain system call; the result is checked and owned below.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        let fd = i32::try_from(fd).ok().filter(|fd| *fd >= 0)?;
        Some(Target {
            pid,
            // SAFETY: a new descriptor nobody else owns.
            pidfd: unsafe { OwnedFd::from_raw_fd(fd) },
            refused: std::cell::Cell::new(false),
        })
    }

    /// The process the pidfd names still runs (signal 0 sends nothing).
    fn alive(&self) -> bool {
        // SAFETY: plain system call on our pidfd, no signal info.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.pidfd.as_raw_fd(),
                0,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
        rc == 0
    }

    /// Copies our `n` bytes at `src` to the target's `dst`; true when all
    /// arrived.
    pub fn write(&self, src: u64, dst: u64, n: usize) -> bool {
        if !self.alive() {
            return false;
        }
        let local = libc::iovec {
            iov_base: src as *mut libc::c_void,
            iov_len: n,
        };
        let remote = libc::iovec {
            iov_base: dst as *mut libc::c_void,
            iov_len: n,
        };
        // SAFETY: `local` is the sender's own send buffer, offered for
        // pulling and valid until the send completes, which waits for this
        // request's end; the kernel checks `remote` against the target's
        // address space.
        let w = unsafe { libc::process_vm_writev(self.pid, &local, 1, &remote, 1, 0) };
        if w < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM) {
            self.refused.set(true);
        }
        usize::try_from(w).is_ok_and(|w| w == n)
    }

    /// The kernel refused a write into this process.
    pub fn refused(&self) -> bool {
        self.refused.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line() -> Box<HelpLine> {
        Box::new(HelpLine {
            claim: AtomicU64::new(0),
            done: AtomicU64::new(0),
            src: AtomicU64::new(0),
            dst: AtomicU64::new(0),
            len: AtomicU64::new(0),
            _pad: [0; 3],
        })
    }

    /// Copies between two buffers of this process through the same
    /// addresses the real copy would use.
    fn memcpy(src: u64, dst: u64, n: usize) -> bool {
        // SAFETY: the tests pass addresses inside live, disjoint buffers.
        unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, n) };
        true
    }

    fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 13 + i / 4093) as u8).collect()
    }

    /// Alone (no sender helping), the receiver copies every chunk itself.
    #[test]
    fn a_receiver_alone_copies_everything() {
        let l = line();
        let src = pattern(5 * CHUNK + 123);
        let mut dst = vec![0u8; src.len()];
        let (s, d) = (src.as_ptr() as u64, dst.as_mut_ptr() as u64);
        let p = l.pull(
            s,
            d,
            src.len(),
            |at, n| memcpy(s + at as u64, d + at as u64, n),
            || true,
        );
        assert_eq!(
            p,
            Pulled {
                ok: true,
                by_sender: 0
            }
        );
        assert_eq!(dst, src);
        assert!(!l.wants_help());
        assert_eq!(l.help(|_, _, _| panic!("nothing left")), 0);
    }

    /// A sender thread helping while the receiver copies: every byte
    /// arrives exactly once, whoever copied it, over many requests.
    #[test]
    fn both_sides_copy_and_meet() {
        let l: &'static HelpLine = Box::leak(line());
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let helper = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    if l.wants_help() {
                        n += l.help(memcpy);
                    }
                    std::hint::spin_loop();
                }
                n
            })
        };
        let mut by_sender = 0;
        for round in 0..300 {
            let len = 1 + (round * 7919) % (17 * CHUNK);
            let src = pattern(len + round);
            let mut dst = vec![0u8; len];
            let (s, d) = (src.as_ptr() as u64 + round as u64, dst.as_mut_ptr() as u64);
            let p = l.pull(
                s,
                d,
                len,
                |at, n| memcpy(s + at as u64, d + at as u64, n),
                || true,
            );
            assert!(p.ok, "round {round}");
            by_sender += p.by_sender;
            assert_eq!(dst, src[round..], "round {round}");
        }
        stop.store(true, Ordering::Relaxed);
        assert_eq!(helper.join().unwrap(), by_sender);
        println!("{by_sender} chunks copied by the helper");
    }

    /// A chunk the sender fails fails the pull; one the receiver fails
    /// stops it taking more, and the sender finds nothing left.
    #[test]
    fn a_failed_chunk_fails_the_pull() {
        let l = line();
        let len = 4 * CHUNK;
        // The sender takes the last chunk before the receiver starts:
        // arrange it by publishing through a first pull that the "sender"
        // interleaves with (its copy runs inside the receiver's first).
        let mut first = true;
        let p = l.pull(
            0,
            0,
            len,
            |_, _| {
                if first {
                    first = false;
                    assert_eq!(l.help(|_, _, _| false), 3, "the sender takes the rest");
                }
                true
            },
            || true,
        );
        assert_eq!(
            p,
            Pulled {
                ok: false,
                by_sender: 3
            }
        );
        let p = l.pull(0, 0, len, |_, _| false, || true);
        assert_eq!(
            p,
            Pulled {
                ok: false,
                by_sender: 0
            }
        );
        assert!(!l.wants_help());
    }

    /// A sender that took a chunk and died does not hang the receiver.
    #[test]
    fn a_dead_helper_is_not_waited_for() {
        let l = line();
        let mut first = true;
        let p = l.pull(
            0,
            0,
            3 * CHUNK,
            |_, _| {
                if first {
                    first = false;
                    // Take the last chunk as a sender would, and never
                    // finish it.
                    let w = l.claim.load(Ordering::Acquire);
                    let (g, lo, hi) = unpack(w);
                    l.claim.store(pack(g, lo, hi - 1), Ordering::Release);
                }
                true
            },
            || false,
        );
        assert_eq!(
            p,
            Pulled {
                ok: false,
                by_sender: 1
            }
        );
    }
}
