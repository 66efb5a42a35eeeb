//! File-descriptor waits and the count of blocked readers.
//!
//! - [`Epoll`]: one file descriptor that polls readable when any of its
//!   members does (epoll(7)). A data path uses one to offer both of its
//!   sockets as a single wait fd.
//! - [`FdWait`]: the FI_WAIT_FD object of a CQ, counter, EQ or wait set
//!   (fi_cq(3) "wait_obj"), also what their blocking reads block on for
//!   FI_WAIT_UNSPEC: an [`Epoll`] holding an eventfd (signalled when
//!   something is queued and by `fi_cq_signal`), a timerfd (armed by
//!   `fi_trywait` for the next protocol timer) and the sockets of the bound
//!   endpoints (and listening endpoints).
//! - [`Waiters`]: how many threads are blocked in a read right now.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// An epoll instance watching its members for input.
pub struct Epoll(OwnedFd);

impl Epoll {
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: plain syscall; the result is checked and owned below.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a new descriptor nobody else owns.
        Ok(Epoll(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// An epoll instance over `fds`.
    pub fn of(fds: &[RawFd]) -> io::Result<Epoll> {
        let ep = Epoll::new()?;
        for &fd in fds {
            ep.add(fd)?;
        }
        Ok(ep)
    }

    /// Watch `fd` for input (level-triggered).
    pub fn add(&self, fd: RawFd) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: fd as u64,
        };
        // SAFETY: valid epoll fd and event.
        if unsafe { libc::epoll_ctl(self.0.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Stop watching `fd` (nothing happens if it was not a member).
    pub fn remove(&self, fd: RawFd) {
        // SAFETY: valid epoll fd; a NULL event is allowed for DEL.
        unsafe {
            libc::epoll_ctl(
                self.0.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                fd,
                std::ptr::null_mut(),
            )
        };
    }
}

impl AsRawFd for Epoll {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// FI_WAIT_FD (fi_cq(3) "wait_obj"): an epoll fd holding an eventfd —
/// signalled when completions are queued and by fi_cq_signal — and the
/// AF_XDP sockets of the bound, enabled endpoints, which are readable when
/// datagrams arrive. With manual progress nothing is queued while nobody
/// polls, so the sockets are what wakes a thread blocked on the fd; it must
/// then call fi_cq_read (or fi_trywait first, per fi_trywait(3)).
pub struct FdWait {
    epoll: Epoll,
    evfd: OwnedFd,
    /// Armed by fi_trywait for the endpoints' next protocol timer, so that
    /// an application blocked on the fd wakes to run it.
    timer: OwnedFd,
}

impl FdWait {
    pub fn new() -> io::Result<FdWait> {
        let epoll = Epoll::new()?;
        // SAFETY: plain syscall; the returned fd is owned below.
        let evfd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if evfd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: evfd is a fresh fd we own.
        let evfd = unsafe { OwnedFd::from_raw_fd(evfd) };
        // SAFETY: as above.
        let timer = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if timer < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: timer is a fresh fd we own.
        let timer = unsafe { OwnedFd::from_raw_fd(timer) };
        epoll.add(evfd.as_raw_fd())?;
        epoll.add(timer.as_raw_fd())?;
        Ok(FdWait { epoll, evfd, timer })
    }

    /// The fd an application blocks on (FI_GETWAIT).
    pub fn fd(&self) -> RawFd {
        self.epoll.as_raw_fd()
    }

    /// An enabled endpoint's socket joins the set. A socket that cannot
    /// join is only found by the waiter's periodic progress passes.
    pub fn add(&self, fd: RawFd) {
        let _ = self.epoll.add(fd);
    }

    pub fn remove(&self, fd: RawFd) {
        self.epoll.remove(fd);
    }

    /// Make the fd readable (completions queued, fi_cq_signal).
    pub fn notify(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64 to our eventfd.
        unsafe { libc::write(self.evfd.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Reset the eventfd and the timer (the sockets stay as they are).
    pub fn drain(&self) {
        let mut v: u64 = 0;
        for fd in [&self.evfd, &self.timer] {
            // SAFETY: reads 8 bytes into a valid u64 from our non-blocking
            // eventfd / timerfd.
            unsafe { libc::read(fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
        }
    }

    /// Make the fd readable after `after` (`None`: disarm).
    pub fn arm(&self, after: Option<Duration>) {
        let d = after.unwrap_or_default();
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            // An all-zero value disarms; a due timer gets 1 ns.
            it_value: libc::timespec {
                tv_sec: d.as_secs() as libc::time_t,
                tv_nsec: if after.is_some() && d.is_zero() {
                    1
                } else {
                    d.subsec_nanos() as libc::c_long
                },
            },
        };
        // SAFETY: our timerfd, a valid itimerspec, no old value wanted.
        unsafe { libc::timerfd_settime(self.timer.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
    }

    /// Block until the eventfd or a member socket is readable, or `limit`
    /// passes, with the signal mask `mask` while blocked (`None`: the
    /// thread's own). `Err(Interrupted)` when a signal arrived: ppoll is never
    /// restarted, so a signalled thread gets back to its caller (fi_cq(3)
    /// fi_cq_sread).
    pub fn wait(&self, limit: Duration, mask: Option<&libc::sigset_t>) -> io::Result<()> {
        poll_readable(&[self.fd()], limit, mask).map(|_| ())
    }
}

/// Block until one of `fds` is readable, or `limit` passes, with the
/// signal mask `mask` while blocked (`None`: the thread's own).
/// `Ok(false)` when what ended it was only an error condition (POLLERR):
/// a UDP socket with an ICMP error queued (IP_RECVERR) reports it until
/// the queue is read, so polling it again would return at once.
/// `Err(Interrupted)` when a signal arrived.
pub fn poll_readable(
    fds: &[RawFd],
    limit: Duration,
    mask: Option<&libc::sigset_t>,
) -> io::Result<bool> {
    let mut polled: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ts = libc::timespec {
        tv_sec: limit.as_secs() as libc::time_t,
        tv_nsec: limit.subsec_nanos() as libc::c_long,
    };
    let mask = mask.map_or(std::ptr::null(), |m| m as *const libc::sigset_t);
    // SAFETY: `polled` holds `polled.len()` valid pollfds; a valid timespec,
    // a valid mask or none.
    let r = unsafe { libc::ppoll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, &ts, mask) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let readable = polled.iter().any(|p| p.revents & libc::POLLIN != 0);
    Ok(r == 0 || readable)
}

/// Threads blocked in a read of one queue: only while there are any does a
/// new completion on an FI_WAIT_UNSPEC CQ write the eventfd (a syscall per
/// completion otherwise).
#[derive(Default)]
pub struct Waiters(AtomicU32);

impl Waiters {
    pub fn any(&self) -> bool {
        self.0.load(Ordering::SeqCst) > 0
    }

    /// Count the calling thread until the returned guard drops.
    pub fn enter(&self) -> Waiting<'_> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Waiting(&self.0)
    }
}

/// Counts a thread blocked in a read for as long as it is there.
pub struct Waiting<'a>(&'a AtomicU32);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
