//! What an endpoint publishes about itself for `ofi-xdp status`: its
//! identity and counters in a statistics file in shared memory
//! (`ofi-xdp-epstats`: one aligned store per counter, no system call on the
//! data path), removed when the endpoint closes — or, if its process is
//! killed, by the first endpoint of the user's next process on the host.
//!
//! Publishing is best effort: an endpoint that cannot create its file (no
//! `/dev/shm`, a read-only one, a full one) works as before and says so at
//! `info` level. The figures are refreshed at most every
//! [`REFRESH_NS`] from the progress pass, so a status reader sees them
//! move while the endpoint runs without the data path paying for it.

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};

use ofi_xdp_epstats::{DEFAULT_DIR, DataPath as PathKind, Identity, Writer};
use ofi_xdp_link::LinkStats;
use ofi_xdp_reliability::Stats;

use crate::datapath::OpenArgs;
use crate::sys::FI_LOG_EP_CTRL;
use crate::xdp::port::{PathCounts, PortIdentity};

/// Longest a published figure lags behind the endpoint's own (10 ms).
pub const REFRESH_NS: u64 = 10_000_000;

/// Endpoints of this process, numbered as their files are named.
static NEXT_ENDPOINT: AtomicU32 = AtomicU32::new(0);

/// One endpoint's statistics file (or nothing, when it could not be made).
pub struct Published {
    writer: Option<Writer>,
    /// When the figures are next due ([`Published::due`]).
    next_ns: u64,
}

impl Published {
    /// Creates the file for an endpoint of `kind` (`rdm` / `dgram`) with
    /// `counters` (`gauges` names those that are levels, not counts).
    pub fn open(
        args: &OpenArgs,
        kind: &str,
        port: PortIdentity,
        counters: &[&str],
        gauges: &[&str],
    ) -> Published {
        let identity = Identity {
            endpoint: kind.to_owned(),
            path: if port.af_xdp.is_some() {
                PathKind::AfXdp
            } else {
                PathKind::KernelUdp
            },
            ifname: args.iface.name.clone(),
            ifindex: args.iface.index,
            address: args.local.socket_addr().to_string(),
            queue: port.af_xdp.map(|(q, _)| q),
            slot: port.af_xdp.map(|(_, s)| s),
        };
        let n = NEXT_ENDPOINT.fetch_add(1, Ordering::Relaxed);
        // The files of this user's ranks that were killed stay in tmpfs
        // until someone removes them: the first endpoint of each process
        // does, so a node's /dev/shm does not fill with them job after job.
        static SWEEP: std::sync::Once = std::sync::Once::new();
        SWEEP.call_once(|| {
            let gone = ofi_xdp_epstats::remove_dead(Path::new(DEFAULT_DIR));
            if gone > 0 {
                crate::xdp_info!(
                    FI_LOG_EP_CTRL,
                    "removed {gone} statistics files of killed processes from {DEFAULT_DIR}"
                );
            }
        });
        let writer = match Writer::create(Path::new(DEFAULT_DIR), n, &identity, counters, gauges) {
            Ok(w) => Some(w),
            Err(e) => {
                crate::xdp_info!(
                    FI_LOG_EP_CTRL,
                    "endpoint statistics for ofi-xdp status not published in {DEFAULT_DIR}: {e}"
                );
                None
            }
        };
        Published { writer, next_ns: 0 }
    }

    /// Whether the figures are due at monotonic time `now_ns`; if so, the
    /// next refresh is [`REFRESH_NS`] later.
    pub fn due(&mut self, now_ns: u64) -> bool {
        if self.writer.is_none() || now_ns < self.next_ns {
            return false;
        }
        self.next_ns = now_ns + REFRESH_NS;
        true
    }

    /// Stores `values`, in the order of the names given to [`Published::open`].
    pub fn set_all(&self, values: impl IntoIterator<Item = u64>) {
        if let Some(w) = &self.writer {
            for (i, v) in values.into_iter().enumerate() {
                w.set(i, v);
            }
        }
    }
}

/// The AF_XDP link's counters every endpoint publishes (zero on the kernel
/// UDP path), then what its kernel UDP socket received: from this host, and
/// from other hosts (on the AF_XDP path: datagrams that arrived on another
/// receive queue than the socket's), then what shared memory carried to and
/// from peers on this host, then the bulk path's datagrams and the reads
/// and sends that carried them (`port/bulk.rs`).
const LINK_COUNTERS: [&str; 17] = [
    "link_rx_packets",
    "link_tx_packets",
    "link_rx_malformed",
    "link_tx_kicks",
    "link_fill_ring_empty",
    "kernel_rx_dropped",
    "kernel_rx_ring_full",
    "udp_socket_rx_local",
    "udp_socket_rx_remote",
    "shm_rx",
    "shm_tx",
    "shm_rx_malformed",
    "shm_tx_ring_full",
    "bulk_rx",
    "bulk_rx_reads",
    "bulk_tx",
    "bulk_tx_sends",
];

fn link_values(l: Option<&LinkStats>, c: PathCounts) -> [u64; LINK_COUNTERS.len()] {
    let [a, b, d, e, f, g, h] = l.map_or([0; 7], |l| {
        [
            l.rx_packets,
            l.tx_packets,
            l.rx_malformed,
            l.tx_kicks,
            l.fill_ring_empty,
            l.kernel.rx_dropped,
            l.kernel.rx_ring_full,
        ]
    });
    [
        a,
        b,
        d,
        e,
        f,
        g,
        h,
        c.kernel_local,
        c.kernel_remote,
        c.shm_rx,
        c.shm_tx,
        c.shm_malformed,
        c.shm_ring_full,
        c.bulk.rx_datagrams,
        c.bulk.rx_reads,
        c.bulk.tx_datagrams,
        c.bulk.tx_sends,
    ]
}

/// An RDM endpoint's figures: the engine's [`Stats`], datagrams from sources
/// it could not take, then the link's.
pub const RDM_COUNTERS: [&str; 27 + LINK_COUNTERS.len()] = [
    "rx_datagrams",
    "tx_datagrams",
    "corrupt",
    "duplicates",
    "dropped",
    "retransmits",
    "fast_retransmits",
    "timeouts",
    "rnr_sent",
    "rnr_received",
    "resets_sent",
    "peers_lost",
    "closes_received",
    "patient_retries",
    "auth_rejected",
    "unauthenticated",
    "replayed",
    "challenges_sent",
    "deferred",
    "ecn_marked",
    "cwnd_reductions",
    "unknown_sources_dropped",
    "unexpected_bytes",
    "unexpected_bytes_max",
    "reorder_bytes",
    "shm_cma_pulls",
    "shm_cma_fallbacks",
    LINK_COUNTERS[0],
    LINK_COUNTERS[1],
    LINK_COUNTERS[2],
    LINK_COUNTERS[3],
    LINK_COUNTERS[4],
    LINK_COUNTERS[5],
    LINK_COUNTERS[6],
    LINK_COUNTERS[7],
    LINK_COUNTERS[8],
    LINK_COUNTERS[9],
    LINK_COUNTERS[10],
    LINK_COUNTERS[11],
    LINK_COUNTERS[12],
    LINK_COUNTERS[13],
    LINK_COUNTERS[14],
    LINK_COUNTERS[15],
    LINK_COUNTERS[16],
];

/// Which of [`RDM_COUNTERS`] are levels rather than counts.
pub const RDM_GAUGES: [&str; 3] = ["unexpected_bytes", "unexpected_bytes_max", "reorder_bytes"];

/// The values of [`RDM_COUNTERS`], in order.
pub fn rdm_values(
    e: &Stats,
    unknown_sources_dropped: u64,
    l: Option<&LinkStats>,
    c: PathCounts,
) -> Vec<u64> {
    let mut v = vec![
        e.rx_datagrams,
        e.tx_datagrams,
        e.corrupt,
        e.duplicates,
        e.dropped,
        e.retransmits,
        e.fast_retransmits,
        e.timeouts,
        e.rnr_sent,
        e.rnr_received,
        e.resets_sent,
        e.peers_lost,
        e.closes_received,
        e.patient_retries,
        e.auth_rejected,
        e.unauthenticated,
        e.replayed,
        e.challenges_sent,
        e.deferred,
        e.ecn_marked,
        e.cwnd_reductions,
        unknown_sources_dropped,
        e.unexpected_bytes,
        e.unexpected_bytes_max,
        e.reorder_bytes,
        e.pulls,
        e.pull_fallbacks,
    ];
    v.extend(link_values(l, c));
    v
}

/// A DGRAM endpoint's figures: datagrams dropped (found no receive and
/// no room in the backlog, or lacked the header their framing needs),
/// then the link's.
pub const DGRAM_COUNTERS: [&str; 1 + LINK_COUNTERS.len()] = [
    "rx_dropped",
    LINK_COUNTERS[0],
    LINK_COUNTERS[1],
    LINK_COUNTERS[2],
    LINK_COUNTERS[3],
    LINK_COUNTERS[4],
    LINK_COUNTERS[5],
    LINK_COUNTERS[6],
    LINK_COUNTERS[7],
    LINK_COUNTERS[8],
    LINK_COUNTERS[9],
    LINK_COUNTERS[10],
    LINK_COUNTERS[11],
    LINK_COUNTERS[12],
    LINK_COUNTERS[13],
    LINK_COUNTERS[14],
    LINK_COUNTERS[15],
    LINK_COUNTERS[16],
];

/// The values of [`DGRAM_COUNTERS`], in order.
pub fn dgram_values(rx_dropped: u64, l: Option<&LinkStats>, c: PathCounts) -> Vec<u64> {
    let mut v = vec![rx_dropped];
    v.extend(link_values(l, c));
    v
}
