//! Manual progress (fi_domain(3) FI_PROGRESS_MANUAL): data moves only inside
//! the application's calls, and a read of a CQ, counter or EQ progresses
//! the endpoints (and, for an EQ, listening endpoints) bound to it. A
//! [`ProgressSet`] is that binding; what it drives is anything that can run
//! a [`Progress`] pass. A [`Queue`] is what wait sets and poll sets see of
//! their members (fi_poll(3)).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::abi::lock;
use crate::datapath::WaitState;
use crate::wait::SignalsHeld;
use crate::wait_obj::WaitObj;

/// Something a CQ, counter or EQ read progresses.
pub trait Progress: Send + Sync {
    /// One progress pass, delivering what completed to the bound queues.
    fn progress(&self);
    /// What it needs before its application may block (fi_trywait).
    fn wait_state(&self) -> WaitState;
    /// The fds that become readable when a datagram arrives for it,
    /// appended to `out`; false if it cannot name them
    /// ([`crate::datapath::DataPath::arrival_fds`]).
    fn arrival_fds(&self, out: &mut Vec<std::os::fd::RawFd>) -> bool {
        let _ = out;
        false
    }
}

/// What can end a blocked read's sleep (besides its own wait object): a
/// datagram arriving on one of `arrival_fds`, or a protocol timer that
/// [`Watched::wait_state`] names.
pub trait Watched {
    /// Appends the fds that become readable when a datagram arrives; false
    /// if some cannot be named (then the sleeper wakes periodically).
    fn arrival_fds(&self, out: &mut Vec<std::os::fd::RawFd>) -> bool;
    /// `Busy` if there is work now, else the soonest timer.
    fn wait_state(&self) -> WaitState;
}

impl<T: Progress + ?Sized + 'static> Watched for ProgressSet<T> {
    fn arrival_fds(&self, out: &mut Vec<std::os::fd::RawFd>) -> bool {
        ProgressSet::arrival_fds(self, out)
    }
    fn wait_state(&self) -> WaitState {
        ProgressSet::wait_state(self)
    }
}

/// The members of a wait set, watched together.
impl Watched for Vec<Arc<dyn Queue>> {
    fn arrival_fds(&self, out: &mut Vec<std::os::fd::RawFd>) -> bool {
        self.iter().all(|q| q.arrival_fds(out))
    }
    fn wait_state(&self) -> WaitState {
        WaitState::all(self.iter().map(|q| q.wait_state()))
    }
}

/// The endpoints whose progress reading a CQ or counter drives.
/// Copy-on-write: binding replaces the list, and a read runs the passes over
/// a snapshot without this lock held, since endpoints lock their own state
/// and then push into CQs (lock order endpoint → CQ) and binding may happen
/// concurrently. Every change gives the list a new `version`, unique in the
/// process, by which a thread finds the snapshot it took last time (the
/// `snapshots` module below): an unchanged set costs a read one atomic load
/// instead of a lock and a reference count (each a locked instruction, on
/// every `fi_cq_read` of an application that polls).
pub struct ProgressSet<T: ?Sized> {
    members: Mutex<Arc<Vec<Weak<T>>>>,
    version: AtomicU64,
}

impl<T: ?Sized> Default for ProgressSet<T> {
    fn default() -> Self {
        ProgressSet {
            members: Mutex::default(),
            version: AtomicU64::new(snapshots::next_version()),
        }
    }
}

impl<T: Progress + ?Sized + 'static> ProgressSet<T> {
    /// Register an endpoint (on bind). Once: an endpoint bound with
    /// `FI_TRANSMIT | FI_RECV` (or a counter for several events) binds once
    /// per flag, and a second entry would run two passes per read.
    pub fn attach(&self, ep: Weak<T>) {
        let mut set = lock(&self.members);
        if !set.iter().any(|w| w.ptr_eq(&ep)) {
            Arc::make_mut(&mut set).push(ep);
            self.version
                .store(snapshots::next_version(), Ordering::Release);
        }
    }

    /// Forget an endpoint (on endpoint close), and any that are gone.
    pub fn detach(&self, ep: &Weak<T>) {
        let mut set = lock(&self.members);
        Arc::make_mut(&mut set).retain(|w| !w.ptr_eq(ep) && w.strong_count() > 0);
        self.version
            .store(snapshots::next_version(), Ordering::Release);
    }

    /// The list as it is now, and its version.
    fn snapshot(&self) -> (u64, Arc<Vec<Weak<T>>>) {
        let set = lock(&self.members);
        // Under the lock: a change stores its version before unlocking.
        (self.version.load(Ordering::Relaxed), Arc::clone(&set))
    }

    /// What the registered endpoints need before their application may
    /// block: `Busy` if any has work now, else the soonest timer.
    pub fn wait_state(&self) -> WaitState {
        let (_, snapshot) = self.snapshot();
        WaitState::all(
            snapshot
                .iter()
                .filter_map(Weak::upgrade)
                .map(|ep| ep.wait_state()),
        )
    }

    /// The fds that become readable when a datagram arrives for any
    /// registered endpoint, appended to `out`; false if one cannot name
    /// them.
    pub fn arrival_fds(&self, out: &mut Vec<std::os::fd::RawFd>) -> bool {
        let (_, snapshot) = self.snapshot();
        snapshot
            .iter()
            .filter_map(Weak::upgrade)
            .all(|ep| ep.arrival_fds(out))
    }

    /// One manual-progress pass over the registered endpoints.
    ///
    /// The thread's snapshot holds the endpoints themselves, not weak
    /// references: upgrading one and dropping it again are two locked
    /// instructions per endpoint per pass (an empty `fi_cq_read` went from
    /// 53 to 47 ns without them, `docs/performance.md`, "Small messages skip
    /// the session"). A closed endpoint leaves the set (a new version), and its
    /// shell — data path, bindings and references already given back by
    /// `fi_close` — lives on in an old snapshot until the thread replaces
    /// it or exits (a thread keeps at most `snapshots::KEPT`).
    pub fn run(&self) {
        let pass = |members: &Vec<Arc<T>>| {
            for ep in members {
                ep.progress();
            }
        };
        if snapshots::with(self.version.load(Ordering::Acquire), pass) {
            return;
        }
        let (version, members) = self.snapshot();
        let members: Arc<Vec<Arc<T>>> =
            Arc::new(members.iter().filter_map(Weak::upgrade).collect());
        pass(&members);
        snapshots::keep(version, members);
    }

    /// Whether nothing is registered (any more).
    pub fn is_empty(&self) -> bool {
        lock(&self.members).iter().all(|w| w.strong_count() == 0)
    }
}

/// A blocking call's wait (fi_cq_sread, fi_cntr_wait, fi_wait on a wait
/// set) between two progress passes over `sets`, at most `left`. Progress
/// is ours to drive, so the thread must wake for whatever a pass would act
/// on: a datagram arriving for an endpoint (its sockets and doorbell are
/// polled directly, only while we sleep: in an epoll set they would cost
/// every packet a wake-up), the endpoints' next protocol timer, and a
/// notification of `wait` (a completion another thread pushed,
/// fi_cq_signal). Where an endpoint cannot name its fds, or `wait` is not
/// an fd, or a progress thread runs the endpoints (`auto_progress`), or a
/// socket reports an error condition nobody has read yet, it wakes every
/// `POLL_SLICE` instead.
///
/// The thread counts as blocked on `wait` (notified by completions that
/// are queued) only here, not during the call's passes: a completion its
/// own passes queue needs no wake-up (each would cost an eventfd write,
/// and the next sleep a read). One queued before it counted left none, so
/// `ready` (what the call waits for) is asked once more first; if it holds
/// there is no sleep.
pub fn sleep_between_passes(
    wait: &WaitObj,
    sets: &[&dyn Watched],
    auto_progress: bool,
    left: Option<Duration>,
    held: &SignalsHeld,
    ready: &dyn Fn() -> bool,
) -> std::io::Result<()> {
    /// Longest sleep when nothing is due: what no fd announces (a dead
    /// local peer's process, found by looking) is still seen.
    const MAX_SLEEP: Duration = Duration::from_millis(50);
    /// The periodic wake-up where fds cannot be polled.
    const POLL_SLICE: Duration = Duration::from_micros(200);
    let _waiting = wait.enter();
    if ready() {
        return Ok(());
    }
    let cap = |d: Duration| left.map_or(d, |l| l.min(d));
    let own = match wait.own_fd() {
        Some(fd) if !auto_progress => fd,
        _ => return wait.wait(cap(POLL_SLICE), held),
    };
    let mut fds = vec![own];
    if !sets.iter().all(|s| s.arrival_fds(&mut fds)) {
        return wait.wait(cap(POLL_SLICE), held);
    }
    let soonest = match WaitState::all(sets.iter().map(|s| s.wait_state())) {
        WaitState::Busy => {
            std::thread::yield_now();
            return Ok(());
        }
        WaitState::Idle { timer } => timer.map_or(MAX_SLEEP, |t| t.min(MAX_SLEEP)),
    };
    if crate::wait::poll_readable(&fds, cap(soonest), held.wait_mask())? {
        return Ok(());
    }
    // Only an error condition (an ICMP error queued on a UDP socket until
    // the endpoint reads it, after its next retransmission timeout): poll
    // again now would return at once, so wake periodically meanwhile.
    wait.wait(cap(POLL_SLICE), held)
}

/// A CQ, counter or EQ as a wait set or poll set sees it (fi_poll(3)).
pub trait Queue: Send + Sync {
    /// One progress pass over what its reads drive.
    fn run_progress(&self);
    /// Whether the application has something to read: a CQ or EQ that is
    /// not empty, a counter whose value or error count changed since it
    /// was last reported (`report`: this call reports it, fi_poll(3)).
    fn has_events(&self, report: bool) -> bool;
    /// What its endpoints need before the application may block.
    fn wait_state(&self) -> WaitState;
    /// Whether a progress thread drives its endpoints (FI_PROGRESS_AUTO):
    /// then a thread blocked on its wait object wakes without calling us.
    fn auto_progress(&self) -> bool;
    /// The fds that become readable when a datagram arrives for one of its
    /// endpoints ([`ProgressSet::arrival_fds`]); false if one cannot name
    /// them.
    fn arrival_fds(&self, out: &mut Vec<std::os::fd::RawFd>) -> bool;
}

/// Each thread's last few progress-set snapshots, by version. They hold
/// `Weak` references, which keep an endpoint's allocation but not the
/// endpoint: one closed since stays closed (its upgrade fails) and is
/// dropped when it would be.
mod snapshots {
    use std::any::Any;
    use std::cell::RefCell;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// Progress sets one thread reads in turn: `fi_pingpong` a TX and an RX
    /// CQ, an MPI rank a CQ and a counter or two.
    const KEPT: usize = 4;

    type Kept = (u64, Arc<dyn Any + Send + Sync>);

    thread_local! {
        static KEPT_HERE: RefCell<(Vec<Kept>, usize)> = const { RefCell::new((Vec::new(), 0)) };
    }

    /// A version no set in this process has had: a snapshot is found by its
    /// version alone, whatever set (or set at the same address) it came from.
    pub fn next_version() -> u64 {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        NEXT.fetch_add(1, Ordering::Relaxed)
    }

    /// Runs `f` over this thread's snapshot of `version`; false if it has
    /// none.
    pub fn with<M: Any>(version: u64, f: impl FnOnce(&M)) -> bool {
        // Not at all while the thread's locals are being destroyed (a read
        // from another library's thread-exit handler): the caller then
        // takes a fresh snapshot.
        KEPT_HERE
            .try_with(|k| {
                // A pass that reads another set meanwhile only borrows too.
                let Ok(kept) = k.try_borrow() else {
                    return false;
                };
                match kept.0.iter().find(|(v, _)| *v == version) {
                    Some((_, m)) => match m.downcast_ref::<M>() {
                        Some(m) => {
                            f(m);
                            true
                        }
                        None => false,
                    },
                    None => false,
                }
            })
            .unwrap_or(false)
    }

    /// Keeps `members` as this thread's snapshot of `version`, in place of
    /// the oldest kept.
    pub fn keep<M: Any + Send + Sync>(version: u64, members: Arc<M>) {
        let _ = KEPT_HERE.try_with(|k| {
            let Ok(mut kept) = k.try_borrow_mut() else {
                return;
            };
            let (list, next) = &mut *kept;
            let entry: Kept = (version, members);
            if list.len() < KEPT {
                list.push(entry);
            } else {
                list[*next] = entry;
                *next = (*next + 1) % KEPT;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[derive(Default)]
    struct Passes(AtomicUsize);

    impl Progress for Passes {
        fn progress(&self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
        fn wait_state(&self) -> WaitState {
            WaitState::Idle { timer: None }
        }
    }

    #[test]
    fn an_endpoint_bound_for_two_events_runs_one_pass_per_read() {
        let set = ProgressSet::<Passes>::default();
        let ep = Arc::new(Passes::default());
        // fi_ep_bind(ep, cq, FI_TRANSMIT | FI_RECV) attaches it per flag.
        set.attach(Arc::downgrade(&ep));
        set.attach(Arc::downgrade(&ep));
        set.run();
        assert_eq!(ep.0.load(Ordering::Relaxed), 1);
        set.detach(&Arc::downgrade(&ep));
        assert!(set.is_empty());
    }

    #[test]
    fn a_read_sees_every_bind_and_close_since_its_last() {
        let set = ProgressSet::<Passes>::default();
        let (a, b) = (Arc::new(Passes::default()), Arc::new(Passes::default()));
        set.attach(Arc::downgrade(&a));
        set.run(); // takes the snapshot
        set.run(); // reuses it
        set.attach(Arc::downgrade(&b));
        set.run();
        set.detach(&Arc::downgrade(&a));
        set.run();
        let runs = |p: &Passes| p.0.load(Ordering::Relaxed);
        assert_eq!((runs(&a), runs(&b)), (3, 2));
        // Another set's snapshots do not stand in for this one's.
        let other = ProgressSet::<Passes>::default();
        other.attach(Arc::downgrade(&a));
        other.run();
        set.run();
        assert_eq!((runs(&a), runs(&b)), (4, 3));
    }
}
