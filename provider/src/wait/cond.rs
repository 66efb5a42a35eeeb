//! FI_WAIT_MUTEX_COND (fi_cq(3), fi_poll(3)): a pthread mutex and condition
//! variable that the application may wait on itself — `fi_control(FI_GETWAIT)`
//! hands out their addresses as `struct fi_mutex_cond` — and that our own
//! blocking reads wait on. They live in boxes, at fixed addresses, until
//! the queue closes.
//!
//! The mutex is recursive: an application that holds it while it calls
//! `fi_trywait` or a read (which may queue completions and so signal the
//! condition under the mutex) does not deadlock against itself.

use std::cell::UnsafeCell;
use std::io;
use std::time::Duration;

use crate::sys::fi_mutex_cond;

pub struct MutexCond {
    mutex: Box<UnsafeCell<libc::pthread_mutex_t>>,
    cond: Box<UnsafeCell<libc::pthread_cond_t>>,
}

// SAFETY: pthread mutexes and condition variables are made to be shared
// between threads; we only touch them through the pthread calls.
unsafe impl Send for MutexCond {}
// SAFETY: as above.
unsafe impl Sync for MutexCond {}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

impl MutexCond {
    pub fn new() -> io::Result<MutexCond> {
        let m = MutexCond {
            mutex: Box::new(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER)),
            cond: Box::new(UnsafeCell::new(libc::PTHREAD_COND_INITIALIZER)),
        };
        // SAFETY: the attribute objects are initialised before use and
        // destroyed after; mutex and cond point at our boxes.
        unsafe {
            let mut ma: libc::pthread_mutexattr_t = std::mem::zeroed();
            check(libc::pthread_mutexattr_init(&mut ma))?;
            check(libc::pthread_mutexattr_settype(
                &mut ma,
                libc::PTHREAD_MUTEX_RECURSIVE,
            ))?;
            let r = check(libc::pthread_mutex_init(m.mutex.get(), &ma));
            libc::pthread_mutexattr_destroy(&mut ma);
            r?;
            // Timed waits measure CLOCK_MONOTONIC (wall-clock steps would
            // stretch or cut them).
            let mut ca: libc::pthread_condattr_t = std::mem::zeroed();
            check(libc::pthread_condattr_init(&mut ca))?;
            check(libc::pthread_condattr_setclock(
                &mut ca,
                libc::CLOCK_MONOTONIC,
            ))?;
            let r = check(libc::pthread_cond_init(m.cond.get(), &ca));
            libc::pthread_condattr_destroy(&mut ca);
            r?;
        }
        Ok(m)
    }

    /// What FI_GETWAIT returns.
    pub fn fi(&self) -> fi_mutex_cond {
        fi_mutex_cond {
            mutex: self.mutex.get(),
            cond: self.cond.get(),
        }
    }

    /// Wake every thread waiting on the condition (under the mutex, so a
    /// waiter that checked under it before waiting cannot miss this).
    pub fn notify(&self) {
        // SAFETY: initialised in new(); lock/broadcast/unlock pair up.
        unsafe {
            libc::pthread_mutex_lock(self.mutex.get());
            libc::pthread_cond_broadcast(self.cond.get());
            libc::pthread_mutex_unlock(self.mutex.get());
        }
    }

    /// Wait for a notification, at most `limit`.
    pub fn wait(&self, limit: Duration) {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a valid timespec; CLOCK_MONOTONIC always exists.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
        let nanos = now.tv_nsec as u64 + u64::from(limit.subsec_nanos());
        let deadline = libc::timespec {
            tv_sec: now.tv_sec
                + limit.as_secs().min(1 << 30) as libc::time_t
                + (nanos / 1_000_000_000) as libc::time_t,
            tv_nsec: (nanos % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: initialised in new(); the mutex is held around the wait,
        // as pthread_cond_timedwait requires.
        unsafe {
            libc::pthread_mutex_lock(self.mutex.get());
            libc::pthread_cond_timedwait(self.cond.get(), self.mutex.get(), &deadline);
            libc::pthread_mutex_unlock(self.mutex.get());
        }
    }
}

impl Drop for MutexCond {
    fn drop(&mut self) {
        // SAFETY: nobody else can hold them now: the queue is closing.
        unsafe {
            libc::pthread_cond_destroy(self.cond.get());
            libc::pthread_mutex_destroy(self.mutex.get());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_notify_wakes_a_waiter_and_waits_time_out() {
        let m = Arc::new(MutexCond::new().unwrap());
        let t = std::time::Instant::now();
        m.wait(Duration::from_millis(20));
        assert!(t.elapsed() >= Duration::from_millis(15));
        let m2 = m.clone();
        let h = std::thread::spawn(move || {
            let t = std::time::Instant::now();
            m2.wait(Duration::from_secs(5));
            t.elapsed()
        });
        // Notify until the waiter is out (a notify before it waits is lost).
        while !h.is_finished() {
            m.notify();
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(h.join().unwrap() < Duration::from_secs(4));
        // Recursive: notify while holding the mutex does not deadlock.
        let fi = m.fi();
        // SAFETY: the mutex is initialised and ours.
        unsafe { libc::pthread_mutex_lock(fi.mutex) };
        m.notify();
        // SAFETY: as above.
        unsafe { libc::pthread_mutex_unlock(fi.mutex) };
    }
}
