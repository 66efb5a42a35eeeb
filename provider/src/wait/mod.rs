//! What a thread blocks on while it waits for completions, counter changes
//! or events: the kinds of wait object, which `crate::wait_obj` puts
//! together as the wait object of a CQ, counter, EQ or wait set (the
//! libfabric objects; nothing here refers to them).
//!
//! - `fd.rs`: [`Epoll`], [`FdWait`] (FI_WAIT_FD, and the private object of
//!   FI_WAIT_UNSPEC) and [`Waiters`], the count of blocked threads;
//! - `cond.rs`: [`MutexCond`] (FI_WAIT_MUTEX_COND);
//! - `signals.rs`: [`SignalsHeld`], POSIX signals held during the progress
//!   passes of a blocking read, so that one landing there still ends it.

mod cond;
mod fd;
mod signals;

pub use cond::MutexCond;
pub use fd::{Epoll, FdWait, Waiters, Waiting, poll_readable};
pub use signals::SignalsHeld;
