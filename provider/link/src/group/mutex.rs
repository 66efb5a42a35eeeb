//! A process-shared, robust pthread mutex living in shared memory
//! (pthread_mutexattr_setpshared(3), pthread_mutexattr_setrobust(3)): when a
//! holder dies (SIGKILL included) the next `lock` returns `EOWNERDEAD`
//! instead of hanging; we then mark it consistent and tell the caller, who
//! repairs what the dead holder may have left half done.

use std::io;

/// Initialises the mutex at `m` (memory of a shared mapping no process uses
/// yet).
///
/// # Safety
/// `m` points to writable memory of at least `size_of::<pthread_mutex_t>()`
/// bytes that no thread is using as a mutex.
pub(crate) unsafe fn init(m: *mut libc::pthread_mutex_t) -> io::Result<()> {
    // SAFETY: attr is initialised by pthread_mutexattr_init before use and
    // destroyed after; `m` is valid per the caller.
    unsafe {
        let mut attr: libc::pthread_mutexattr_t = std::mem::zeroed();
        check(libc::pthread_mutexattr_init(&mut attr))?;
        let r = (|| {
            check(libc::pthread_mutexattr_setpshared(
                &mut attr,
                libc::PTHREAD_PROCESS_SHARED,
            ))?;
            check(libc::pthread_mutexattr_setrobust(
                &mut attr,
                libc::PTHREAD_MUTEX_ROBUST,
            ))?;
            check(libc::pthread_mutex_init(m, &attr))
        })();
        libc::pthread_mutexattr_destroy(&mut attr);
        r
    }
}

/// How a lock was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Locked {
    /// The usual way.
    Clean,
    /// Its previous holder died holding it (`EOWNERDEAD`): now consistent
    /// again; what it guards may be half updated.
    OwnerDied,
}

/// Locks the mutex at `m`.
///
/// # Safety
/// `m` points to a mutex initialised by [`init`], in a live mapping.
pub(crate) unsafe fn lock(m: *mut libc::pthread_mutex_t) -> io::Result<Locked> {
    // SAFETY: per the caller.
    match unsafe { libc::pthread_mutex_lock(m) } {
        0 => Ok(Locked::Clean),
        libc::EOWNERDEAD => {
            // SAFETY: we hold it (EOWNERDEAD returns with the lock held).
            check(unsafe { libc::pthread_mutex_consistent(m) })?;
            Ok(Locked::OwnerDied)
        }
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

/// Locks the mutex at `m` if it is free now; `None` when another holds it.
///
/// # Safety
/// As for [`lock`].
pub(crate) unsafe fn try_lock(m: *mut libc::pthread_mutex_t) -> io::Result<Option<Locked>> {
    // SAFETY: per the caller.
    match unsafe { libc::pthread_mutex_trylock(m) } {
        0 => Ok(Some(Locked::Clean)),
        libc::EBUSY => Ok(None),
        libc::EOWNERDEAD => {
            // SAFETY: we hold it (EOWNERDEAD returns with the lock held).
            check(unsafe { libc::pthread_mutex_consistent(m) })?;
            Ok(Some(Locked::OwnerDied))
        }
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

/// Unlocks the mutex at `m`, which we hold.
///
/// # Safety
/// As for [`lock`], and the calling thread holds the mutex.
pub(crate) unsafe fn unlock(m: *mut libc::pthread_mutex_t) {
    // SAFETY: per the caller.
    unsafe { libc::pthread_mutex_unlock(m) };
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}
