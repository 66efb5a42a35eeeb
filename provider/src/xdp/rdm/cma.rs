//! Single-copy rendezvous between endpoints on this host (PROTOCOL.md
//! §6.7): a request-to-send to a peer reached through shared memory
//! carries a pull offer — our pid, our pid namespace, a cookie, and the
//! send buffer's (address, length) list — and the receiver copies the
//! message straight into its receive buffer with one `process_vm_readv`
//! (cross-memory attach, as libfabric's `shm` provider does), instead of
//! the three copies and CRCs of the datagrams through the rings. The engine
//! decides when; this file builds offers and executes pulls. A pull of
//! [`SHARED_FROM`] bytes or more is shared: the sender copies chunks from
//! the end while we copy from the front (`port/local/help.rs`).
//!
//! A receiver pulls only from a process that writes to its shared-memory
//! area (a sender of its user that reached it through shared memory; or
//! itself): an offer that came from anywhere else — a forged request from
//! the network naming some local process — is not acted on.
//!
//! A pull fails (and the engine falls back to a CTS: the data comes
//! through the rings) when the kernel refuses it (EPERM: another user,
//! Yama ptrace restrictions, a non-dumpable sender; ESRCH: the sender is
//! gone; EFAULT), reads short, or when the cookie read with the data is
//! not the sender's: then the pid was reused by another process, whose
//! bytes are overwritten by the fallback's.

use std::cell::RefCell;

use super::super::port::local::{HELP_CHUNK, HELP_MAX_CHUNKS, Writers, pid_alive};
use crate::datapath::Iov;
use crate::datapath::iov::pieces;

/// Offer layout version (PROTOCOL.md §6.7).
const VERSION: u8 = 1;
/// Bytes before the segment list.
const HEAD: usize = 32;
/// Bytes per (address, length) segment.
const SEGMENT: usize = 16;
/// Senders remembered as refused by the kernel (EPERM) at most.
const MAX_DENIED: usize = 1024;
/// Messages from this long on are copied by both processes when the sender
/// can help (`port/local/help.rs`): below it the sender's share would be a
/// chunk at most, begun a pass after the receiver's.
const SHARED_FROM: usize = 4 * HELP_CHUNK;

/// This process's identity as a pull source and target.
pub(super) struct Cma {
    pid: u32,
    /// The processes writing to our area: the only ones we pull from.
    writers: Writers,
    /// Inode of /proc/self/ns/pid: a receiver in another pid namespace
    /// would read some other process by our pid, so it does not try.
    pidns: u64,
    /// A random value at a fixed address: the receiver reads it with the
    /// data, and a mismatch means the pid now names another process.
    cookie: Box<u64>,
    /// Offer a cookie address nothing is mapped at, so the kernel faults
    /// after copying the data (tests of the fallback after a short read).
    bad_cookie: bool,
    /// Senders the kernel refused to let us read (EPERM: Yama's
    /// ptrace_scope, a non-dumpable sender): their messages take the
    /// rings without another try.
    denied: RefCell<Vec<u32>>,
    /// Ask senders to copy part of large pulls (FI_XDP_LOCAL_SHARED_PULL).
    shared: bool,
    /// Chunks of our pulls the senders copied (shared pulls).
    by_senders: std::cell::Cell<u64>,
}

impl Cma {
    /// `None` where this process cannot tell its pid namespace.
    pub(super) fn new(writers: Writers, shared: bool) -> Option<Cma> {
        let pidns = ofi_xdp_epstats::pidns_inode()?;
        let mut cookie = [0u8; 8];
        // SAFETY: getrandom writes at most 8 bytes into `cookie`.
        let _ = unsafe { libc::getrandom(cookie.as_mut_ptr().cast(), 8, 0) };
        Some(Cma {
            pid: std::process::id(),
            writers,
            pidns,
            cookie: Box::new(u64::from_ne_bytes(cookie) | 1),
            bad_cookie: std::env::var("OFI_XDP_TEST_CMA_FAULT").is_ok_and(|v| v == "1"),
            denied: RefCell::new(Vec::new()),
            shared,
            by_senders: std::cell::Cell::new(0),
        })
    }

    /// Write the offer for send buffers `iov` into `dst`; its length, 0
    /// when it does not fit.
    pub(super) fn offer(&self, iov: &[(usize, usize)], dst: &mut [u8]) -> usize {
        let n = HEAD + SEGMENT * iov.len();
        let Ok(count) = u16::try_from(iov.len()) else {
            return 0;
        };
        let Some(out) = dst.get_mut(..n) else {
            return 0;
        };
        out[0] = VERSION;
        out[1] = 0;
        out[2..4].copy_from_slice(&count.to_le_bytes());
        out[4..8].copy_from_slice(&self.pid.to_le_bytes());
        out[8..16].copy_from_slice(&self.pidns.to_le_bytes());
        // The first page is never mapped (vm.mmap_min_addr): EFAULT.
        let cookie_addr = if self.bad_cookie {
            8
        } else {
            &*self.cookie as *const u64 as u64
        };
        out[16..24].copy_from_slice(&cookie_addr.to_le_bytes());
        out[24..32].copy_from_slice(&self.cookie.to_le_bytes());
        for (i, &(addr, len)) in iov.iter().enumerate() {
            let at = HEAD + SEGMENT * i;
            out[at..at + 8].copy_from_slice(&(addr as u64).to_le_bytes());
            out[at + 8..at + 16].copy_from_slice(&(len as u64).to_le_bytes());
        }
        n
    }

    /// Copy the first `len` bytes offered by `offer` into receive buffers
    /// `iov` from byte `offset` on, with one `process_vm_readv` (or, for a
    /// large one, shared with the sender: [`Cma::pull_shared`]). True when
    /// every byte (and the sender's cookie) arrived.
    pub(super) fn pull(&self, iov: &Iov, offset: usize, len: usize, offer: &[u8]) -> bool {
        let Some(o) = Offer::parse(offer) else {
            return false;
        };
        if o.pidns != self.pidns || o.pid == 0 || o.pid > i32::MAX as u32 {
            return false;
        }
        let stranger = o.pid != self.pid && !self.writers.has(o.pid);
        if stranger || self.denied.borrow().contains(&o.pid) {
            return false;
        }
        let mut got = 0u64;
        let mut local = sub_iov(iov, offset, len);
        let mut remote = o.segments(len);
        if sum(&local) != len || sum(&remote) != len {
            return false;
        }
        if let Some(ok) = self.pull_shared(&o, &local, &remote, len) {
            return ok;
        }
        local.push(libc::iovec {
            iov_base: (&mut got as *mut u64).cast(),
            iov_len: 8,
        });
        remote.push(libc::iovec {
            iov_base: o.cookie_addr as *mut libc::c_void,
            iov_len: 8,
        });
        if local.len() > 1024 || remote.len() > 1024 {
            // IOV_MAX: more segments than one call takes.
            return false;
        }
        let n = self.read(o.pid, &local, &remote);
        n == Some(len + 8) && got == o.cookie
    }

    /// Chunks of our pulls that the senders copied, so far.
    pub(super) fn by_senders(&self) -> u64 {
        self.by_senders.get()
    }

    /// A pull the sender helps copy (`port/local/help.rs`): for a message
    /// of at least [`SHARED_FROM`] bytes in one piece on each side, from a
    /// sender with one slot in our area. `None`: not for this one (copy
    /// it alone).
    fn pull_shared(
        &self,
        o: &Offer,
        local: &[libc::iovec],
        remote: &[libc::iovec],
        len: usize,
    ) -> Option<bool> {
        let ([l], [r]) = (local, remote) else {
            return None;
        };
        if !self.shared || len < SHARED_FROM || len.div_ceil(HELP_CHUNK) > HELP_MAX_CHUNKS {
            return None;
        }
        let line = self.writers.help_line(o.pid)?;
        let (dst, src) = (l.iov_base as u64, r.iov_base as u64);
        let piece = |base: u64, at: usize, n: usize| libc::iovec {
            // An offer's address comes from another process: a wrapped one
            // is refused by the kernel (EFAULT), never a panic here.
            iov_base: base.wrapping_add(at as u64) as *mut libc::c_void,
            iov_len: n,
        };
        let pulled = line.pull(
            src,
            dst,
            len,
            |at, n| self.read(o.pid, &[piece(dst, at, n)], &[piece(src, at, n)]) == Some(n),
            || pid_alive(o.pid),
        );
        self.by_senders
            .set(self.by_senders.get() + pulled.by_sender);
        // The cookie last: what we read came from the sender we think.
        let mut got = 0u64;
        let cookie = [libc::iovec {
            iov_base: (&mut got as *mut u64).cast(),
            iov_len: 8,
        }];
        let at = [libc::iovec {
            iov_base: o.cookie_addr as *mut libc::c_void,
            iov_len: 8,
        }];
        Some(pulled.ok && self.read(o.pid, &cookie, &at) == Some(8) && got == o.cookie)
    }

    /// One `process_vm_readv` from `pid`: the bytes read (`None`: refused;
    /// EPERM is remembered).
    fn read(&self, pid: u32, local: &[libc::iovec], remote: &[libc::iovec]) -> Option<usize> {
        // SAFETY: callers pass `local` inside the receive's buffers
        // (fi_msg(3): valid until its completion, which comes after this)
        // or a local of theirs; the kernel checks `remote` against the
        // sender's address space.
        let n = unsafe {
            libc::process_vm_readv(
                pid as libc::pid_t,
                local.as_ptr(),
                local.len() as libc::c_ulong,
                remote.as_ptr(),
                remote.len() as libc::c_ulong,
                0,
            )
        };
        if n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM) {
            self.deny(pid);
        }
        usize::try_from(n).ok()
    }

    /// The kernel will not let us read `pid`: say so once, and stop trying.
    fn deny(&self, pid: u32) {
        let mut d = self.denied.borrow_mut();
        if d.len() < MAX_DENIED {
            d.push(pid);
        }
        crate::xdp_info!(
            crate::sys::FI_LOG_EP_DATA,
            "process_vm_readv from pid {pid} refused (EPERM: ptrace restrictions such as Yama's \
             ptrace_scope, or a non-dumpable sender): its large messages take the shared-memory \
             rings"
        );
    }
}

/// The fields of a pull offer (PROTOCOL.md §6.7).
struct Offer<'a> {
    pid: u32,
    pidns: u64,
    cookie_addr: u64,
    cookie: u64,
    list: &'a [u8],
}

impl<'a> Offer<'a> {
    fn parse(b: &'a [u8]) -> Option<Offer<'a>> {
        let u64_at = |i: usize| Some(u64::from_le_bytes(b.get(i..i + 8)?.try_into().ok()?));
        if *b.first()? != VERSION {
            return None;
        }
        let count = usize::from(u16::from_le_bytes(b.get(2..4)?.try_into().ok()?));
        let list = b.get(HEAD..HEAD + SEGMENT * count)?;
        Some(Offer {
            pid: u32::from_le_bytes(b.get(4..8)?.try_into().ok()?),
            pidns: u64_at(8)?,
            cookie_addr: u64_at(16)?,
            cookie: u64_at(24)?,
            list,
        })
    }

    /// The sender's segments holding the first `len` bytes.
    fn segments(&self, mut len: usize) -> Vec<libc::iovec> {
        let mut v = Vec::new();
        for s in self.list.chunks_exact(SEGMENT) {
            if len == 0 {
                break;
            }
            let mut w = [0u8; 8];
            w.copy_from_slice(&s[..8]);
            let addr = u64::from_le_bytes(w);
            w.copy_from_slice(&s[8..]);
            let n = usize::try_from(u64::from_le_bytes(w))
                .unwrap_or(usize::MAX)
                .min(len);
            if n > 0 {
                v.push(libc::iovec {
                    iov_base: addr as *mut libc::c_void,
                    iov_len: n,
                });
            }
            len -= n;
        }
        v
    }
}

/// The pieces of `iov` holding bytes `[offset, offset + len)`.
fn sub_iov(iov: &[(usize, usize)], offset: usize, len: usize) -> Vec<libc::iovec> {
    pieces(iov, offset, len)
        .map(|(addr, n)| libc::iovec {
            iov_base: addr as *mut libc::c_void,
            iov_len: n,
        })
        .collect()
}

fn sum(v: &[libc::iovec]) -> usize {
    v.iter().map(|i| i.iov_len).sum()
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use super::*;
    use crate::xdp::port::local::LocalPath;

    /// A shared-memory path of our own (an address no endpoint has) and
    /// the puller watching its writers.
    fn cma(n: u8) -> (LocalPath, Cma) {
        let pid = std::process::id();
        let at = SocketAddr::from(([127, (pid >> 8) as u8, pid as u8, n], 0));
        let local = LocalPath::open(at, 1 << 16).unwrap();
        let cma = Cma::new(local.writers(), true).unwrap();
        (local, cma)
    }

    fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    /// Gather on the sender (an empty piece too), scatter on the receiver
    /// from an offset, as one process_vm_readv (our own memory here).
    #[test]
    fn pulls_across_pieces_from_an_offset() {
        let (_local, c) = cma(201);
        let src = pattern(300_000);
        let at = src.as_ptr() as usize;
        let send = [(at, 70_000), (at + 70_000, 0), (at + 70_000, 230_000)];
        let mut offer = [0u8; 1024];
        let n = c.offer(&send, &mut offer);
        assert_eq!(n, HEAD + 3 * SEGMENT);
        let mut a = vec![0u8; 100_000];
        let mut b = vec![0u8; 250_000];
        let recv = Iov::Many(vec![
            (a.as_mut_ptr() as usize, a.len()),
            (b.as_mut_ptr() as usize, b.len()),
        ]);
        assert!(c.pull(&recv, 10, 250_000, &offer[..n]));
        let mut got = a[10..].to_vec();
        got.extend_from_slice(&b[..250_000 - (100_000 - 10)]);
        assert_eq!(got, src[..250_000]);
        // An offer that does not fit its room is not made.
        assert_eq!(c.offer(&send, &mut offer[..n - 1]), 0);
    }

    /// A large pull from a sender that writes to our area through one slot
    /// is copied by both: the sender's passes (a thread here) take chunks
    /// from the end; every byte arrives once, whoever copied it.
    #[test]
    fn a_large_pull_is_shared_with_the_sender() {
        let (receiver, c) = cma(203);
        let pid = std::process::id();
        let sender_at = SocketAddr::from(([127, (pid >> 8) as u8, pid as u8, 204], 0));
        let mut sender = LocalPath::open(sender_at, 1 << 16).unwrap();
        let receiver_at = SocketAddr::from(([127, (pid >> 8) as u8, pid as u8, 203], 0));
        // Its first datagram claims its slot in our area.
        assert_eq!(sender.send(receiver_at, &mut 0, b"hello"), Some(true));
        let len = 1 << 20;
        let src = pattern(len + 3);
        let send = [(src.as_ptr() as usize + 3, len)];
        let offered = crate::datapath::offered::Offered::begin(&send, receiver_at);
        let mut offer = [0u8; 1024];
        let n = c.offer(&send, &mut offer);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let helper = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut helped = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    helped += sender.help_pulls();
                }
                helped
            })
        };
        let mut pulls = 0;
        while c.by_senders() == 0 && pulls < 5000 {
            let mut dst = vec![0u8; len];
            let recv = Iov::One((dst.as_mut_ptr() as usize, len));
            assert!(c.pull(&recv, 0, len, &offer[..n]), "pull {pulls}");
            assert!(dst == src[3..], "pull {pulls}: the bytes differ");
            pulls += 1;
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let helped = helper.join().unwrap();
        println!("{pulls} pulls, {helped} chunks copied by the sender");
        assert!(helped > 0, "the sender never helped in {pulls} pulls");
        assert_eq!(helped, c.by_senders());
        drop(offered);
        drop(receiver);
    }

    /// Another pid namespace, a process that does not write to our area,
    /// a cookie that is not the sender's, an offer too short for the
    /// length, a damaged or unknown offer: no pull (the engine falls back).
    #[test]
    fn refuses_offers_it_must_not_act_on() {
        let (_local, c) = cma(202);
        let src = pattern(100_000);
        let send = [(src.as_ptr() as usize, src.len())];
        let mut offer = [0u8; 1024];
        let n = c.offer(&send, &mut offer);
        let mut dst = vec![0u8; 100_000];
        let recv = Iov::One((dst.as_mut_ptr() as usize, dst.len()));
        let with = |f: &dyn Fn(&mut [u8])| {
            let mut o = offer[..n].to_vec();
            f(&mut o);
            o
        };
        assert!(c.pull(&recv, 0, 100_000, &offer[..n]));
        let refused = [
            with(&|o| o[8] ^= 1),                                    // pid namespace
            with(&|o| o[4..8].copy_from_slice(&1u32.to_le_bytes())), // init: not a writer
            with(&|o| o[24] ^= 1),                                   // cookie
            with(&|o| o[0] = 2),                                     // version
        ];
        for o in &refused {
            assert!(!c.pull(&recv, 0, 100_000, o));
        }
        assert!(
            !c.pull(&recv, 0, 100_001, &offer[..n]),
            "longer than offered"
        );
        assert!(
            !c.pull(&recv, 1, 100_000, &offer[..n]),
            "longer than the receive"
        );
        assert!(!c.pull(&recv, 0, 100_000, &offer[..n - 1]), "cut short");
        drop(dst);
    }
}
