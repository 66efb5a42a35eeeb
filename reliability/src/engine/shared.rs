//! Engine-wide state that the sessions' methods touch besides their own:
//! the configuration, the generator of session ids, the event queue,
//! statistics, the schedule, the inject store, and the totals that budgets
//! are checked against. Each is its own type; this is only where they meet.

use super::auth::EngineAuth;
use super::events::Events;
use super::inject::InjectStore;
use super::schedule::Schedule;
use super::session::RxShare;
use super::sessions_index::SessionIndex;
use crate::api::{Config, Stats};
use crate::rng::SplitMix64;

#[derive(Debug)]
pub(crate) struct Shared<P> {
    pub(crate) cfg: Config,
    /// Draws each new session's local id (PROTOCOL.md §4.1).
    pub(crate) rng: SplitMix64,
    pub(crate) events: Events<P>,
    pub(crate) stats: Stats,
    pub(crate) schedule: Schedule,
    pub(crate) injects: InjectStore,
    /// Bytes of out-of-order packets all sessions hold (`Config::reorder_budget`).
    pub(crate) reorder_bytes: usize,
    /// Send operations posted and not completed, over all sessions
    /// (`Config::tx_queue_len`).
    pub(crate) sends: usize,
    /// Keys and counters of packet authentication (PROTOCOL.md §11), if on.
    pub(crate) auth: Option<EngineAuth>,
    /// Bytes a DATA packet adds to its payload: header and CRC, or header
    /// and authentication trailer.
    pub(crate) data_overhead: usize,
    /// The peers sending to us now, among whom our capacity is shared (§12.1).
    pub(crate) rx_share: RxShare,
    /// Whose session each local session id is (PROTOCOL.md §4.6).
    pub(crate) sessions: SessionIndex,
}

impl<P> Shared<P> {
    pub(crate) fn new(cfg: Config) -> Self {
        let mut rng = SplitMix64::new(cfg.seed ^ u64::from(cfg.incarnation).rotate_left(32));
        let auth = cfg
            .auth
            .as_ref()
            .map(|a| EngineAuth::new(a, cfg.incarnation, &mut rng));
        let data_overhead = if auth.is_some() {
            crate::wire::auth::DATA_OVERHEAD
        } else {
            crate::wire::DATA_OVERHEAD
        };
        Shared {
            cfg,
            rng,
            events: Events::default(),
            stats: Stats::default(),
            schedule: Schedule::default(),
            injects: InjectStore::default(),
            reorder_bytes: 0,
            sends: 0,
            auth,
            data_overhead,
            rx_share: RxShare::default(),
            sessions: SessionIndex::default(),
        }
    }

    /// The window we grant a peer (§12.1): our capacity shared among the
    /// peers sending to us, or without congestion control our window.
    #[inline]
    pub(crate) fn grant(&self) -> u16 {
        let cfg = &self.cfg;
        if !cfg.congestion {
            return cfg.window;
        }
        let capacity = if cfg.rx_capacity == 0 {
            usize::from(cfg.window)
        } else {
            cfg.rx_capacity
        };
        self.rx_share.grant(capacity, cfg.window)
    }
}
