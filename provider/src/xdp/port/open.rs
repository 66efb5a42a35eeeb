//! Opening a port's AF_XDP half: the link's configuration from the
//! endpoint's, the queue it binds (and the ntuple rule steering its port
//! there, where the driver takes one), and why it may fall back to the
//! kernel path.

use std::net::SocketAddr;
use std::sync::Mutex;

use ofi_xdp_bpf::Steering;
use ofi_xdp_link::group::{self, Group};
use ofi_xdp_link::ntuple::{self, FlowRule, InstalledRule};
use ofi_xdp_link::{
    BindPreference, BusyPoll, GroupJoin, Link, LinkConfig, LinkError, SharedOpen, Tidy,
};

use crate::abi::{Errno, lock};
use crate::datapath::OpenArgs;
use crate::params::ZeroCopy;
use crate::sys::*;
use crate::xdp_warn;

use super::*;

/// Why the AF_XDP half could not be opened.
pub(super) enum XskError {
    /// The queue or the XDP hook is taken: run on the kernel path.
    Busy(String),
    /// Anything else: the endpoint cannot be enabled.
    Failed(Errno),
}
use XskError::{Busy, Failed};

pub(super) fn open_xsk(args: &OpenArgs) -> std::result::Result<Xsk, XskError> {
    let cfg = &args.cfg;
    let ifname = &args.iface.name;
    let lc = link_config(args)?;
    let shared = steering_for(ifname, cfg.attach_mode)?;
    if cfg.fault_drop_one_in > 0 {
        let seed = u64::from(args.local.incarnation) << 16 | u64::from(args.local.port);
        lock(&shared)
            .steering
            .set_fault_injection(cfg.fault_drop_one_in, seed)
            .map_err(|e| {
                xdp_warn!(FI_LOG_EP_CTRL, "fault injection: {e}");
                Failed(Errno::OTHER)
            })?;
        xdp_warn!(
            FI_LOG_EP_CTRL,
            "{ifname}: dropping one in {} received frames (FI_XDP_FAULT_DROP)",
            cfg.fault_drop_one_in
        );
    }
    let queues = ofi_xdp_link::ethtool::rx_queue_count(ifname).unwrap_or(1);
    let mut lc = lc;
    // Before Linux 6.4 no process can join (the shared rings cannot be
    // mapped after bind): a group of one, not TX ranges nobody will use.
    lc.group_members = if group::kernel_lets_members_join() {
        cfg.queue_members
            .unwrap_or_else(|| queue_members_for(online_cpus(), queues))
    } else {
        1
    };
    let (link, group) = bind_a_queue(&lc, args.iface.index, cfg.queue, queues, &shared)?;
    let queue = link.queue();
    let (mode, attach) = (link.bind_mode(), lock(&shared).steering.mode());
    crate::xdp_info!(
        FI_LOG_EP_CTRL,
        "{ifname}: AF_XDP socket on queue {queue} of {queues}, bound in {mode} mode, XDP \
         attached in {attach} mode, port {}",
        args.local.port
    );
    match link.busy_polling() {
        Ok(true) => crate::xdp_info!(
            FI_LOG_EP_CTRL,
            "{ifname}: busy polling ({} us, budget {}); the interface's \
             napi_defer_hard_irqs and gro_flush_timeout keep its interrupts off meanwhile",
            cfg.busy_poll_usecs,
            cfg.busy_poll_budget
        ),
        Ok(false) => {}
        Err(why) => xdp_warn!(
            FI_LOG_EP_CTRL,
            "{ifname}: FI_XDP_BUSY_POLL asked, but the kernel refused {why}; polling as usual"
        ),
    }
    let rule = steer_to_queue(args, queue, queues);
    let slot = xskmap_slot(queue, group.as_ref().map_or(0, |g| g.member as u32))?;
    {
        let mut s = lock(&shared);
        s.steering.set_socket(slot, link.fd(), queue).map_err(|e| {
            xdp_warn!(FI_LOG_EP_CTRL, "XSKMAP: {e}");
            Failed(Errno::OTHER)
        })?;
        s.steering.steer_port(args.local.port, slot).map_err(|e| {
            xdp_warn!(FI_LOG_EP_CTRL, "port map: {e}");
            Failed(Errno::OTHER)
        })?;
        s.queues.push(queue);
    }
    Ok(Xsk {
        link,
        shared,
        queue,
        queues,
        slot,
        port: args.local.port,
        rule,
    })
}

/// The size of a UMEM group this process creates, unless
/// `FI_XDP_QUEUE_MEMBERS` says: one rank per CPU spread over the
/// interface's receive queues (as [`bind_a_queue`] spreads them, a queue of
/// its own first) needs `cpus / queues` per queue, and never fewer than
/// the [`group::DEFAULT_MEMBERS`] a queue held before the size was
/// chosen. Each member costs the group's creator a TX range of UMEM.
fn queue_members_for(cpus: u32, queues: u32) -> u32 {
    cpus.div_ceil(queues.max(1))
        .clamp(group::DEFAULT_MEMBERS, crate::params::MAX_QUEUE_MEMBERS)
}

/// CPUs online (1 if the system will not say).
fn online_cpus() -> u32 {
    // SAFETY: sysconf has no memory effects.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    u32::try_from(n).ok().filter(|n| *n > 0).unwrap_or(1)
}

/// Sockets that may share one queue (one UMEM group): each process's
/// socket on `queue` takes XSKMAP slot `queue * SOCKETS_PER_QUEUE + member`
/// (its index in the group's member table), so processes sharing the
/// steering program never pick the same slot without having to agree on it.
pub(super) const SOCKETS_PER_QUEUE: u32 = group::MAX_MEMBERS as u32;

/// What members of our queue's group that are gone left in the steering
/// program, cleared under the group's lock ([`Tidy`]): the XSKMAP slots of
/// free member entries and the ports steered to them, and the ports the
/// previous occupant of our entry steered to our slot.
fn tidy_steering(steering: &mut Steering, ifname: &str, queue: u32, tidy: &Tidy) {
    let slot = |m: usize| xskmap_slot(queue, m as u32).ok();
    for s in tidy.free.iter().filter_map(|m| slot(*m)) {
        let _ = steering.clear_socket(s);
    }
    for s in tidy
        .free
        .iter()
        .chain([&tidy.ours])
        .filter_map(|m| slot(*m))
    {
        match steering.unsteer_slot(s) {
            Ok(ports) if !ports.is_empty() => crate::xdp_info!(
                FI_LOG_EP_CTRL,
                "{ifname}: ports {ports:?} of endpoints that are gone no longer steered \
                 (XSKMAP slot {s})"
            ),
            Ok(_) => {}
            Err(e) => xdp_warn!(FI_LOG_EP_CTRL, "{ifname}: unsteering slot {s}: {e}"),
        }
    }
}

/// Says at `info` that members of the group died, when some were found.
fn log_reclaimed(ifname: &str, queue: u32, group: &SharedOpen) {
    let (dead, stranded) = group.reclaim_counts;
    if !group.reclaimed.is_empty() {
        crate::xdp_info!(
            FI_LOG_EP_CTRL,
            "{ifname}: queue {queue}: {} member(s) of the AF_XDP group died; {dead} so far, \
             up to {stranded} receive frames stranded with them",
            group.reclaimed.len()
        );
    }
}

/// The XSKMAP slot of member `member` of `queue`'s group.
fn xskmap_slot(queue: u32, member: u32) -> std::result::Result<u32, XskError> {
    let slot = queue * SOCKETS_PER_QUEUE + member;
    if member >= SOCKETS_PER_QUEUE || slot >= Steering::MAX_SLOTS {
        return Err(Busy(format!(
            "queue {queue} is beyond the {} queues the steering program's XSKMAP serves",
            Steering::MAX_SLOTS / SOCKETS_PER_QUEUE
        )));
    }
    Ok(slot)
}

/// The link's configuration for this endpoint; the queue is set by
/// [`bind_a_queue`].
pub(super) fn link_config(args: &OpenArgs) -> std::result::Result<LinkConfig, XskError> {
    let cfg = &args.cfg;
    let mut lc = LinkConfig::new(args.iface.name.clone(), args.local.port);
    lc.ip = Some(args.local.ip);
    lc.frame_size = u32::try_from(cfg.frame_size).map_err(|_| Failed(Errno::INVAL))?;
    lc.frame_count = u32::try_from(cfg.umem_frames).map_err(|_| Failed(Errno::INVAL))?;
    lc.rx_frames = lc.frame_count / 2;
    lc.ring_size = u32::try_from(cfg.ring_size).map_err(|_| Failed(Errno::INVAL))?;
    // Jumbo frames for the engine's endpoints (RDM, MSG) only: their datagram size is internal (segments,
    // negotiated per peer in HELLO), while a DGRAM endpoint's max_msg_size is
    // promised by fi_getinfo before any socket exists, so it stays at what
    // one frame holds on every kernel.
    lc.multi_buffer = cfg.multi_buffer && args.reliable();
    // The engine takes such a datagram in its chunks (one copy, straight
    // into the receive buffer: one userspace copy per direction).
    lc.rx_pieces = args.reliable();
    // The engine's congestion control reacts to CE marks (PROTOCOL.md §12.3):
    // say so to routers and switches (RFC 3168 ECT(0)).
    lc.ecn_capable = cfg.ecn && cfg.congestion && args.reliable();
    // The engine's datagrams (RDM, MSG; connection management too) carry a CRC-32C over header and payload
    // (reliability/PROTOCOL.md), checked end to end, so over IPv4 they go
    // without the optional UDP checksum (RFC 768: zero = none) — one
    // pass over every payload less on each side. IPv6 keeps it
    // (mandatory, RFC 8200 §8.1), and so do DGRAM datagrams, whose
    // payload is the application's own.
    lc.udp_checksum_ipv4 = !args.reliable();
    // For the same reason they do not verify UDP checksums on receive: the
    // CRC-32C already covers what they would (IPv6 peers always send them).
    lc.verify_checksums = !args.reliable();
    lc.bind = match cfg.zerocopy {
        ZeroCopy::Auto => BindPreference::Auto,
        ZeroCopy::Required => BindPreference::ZeroCopy,
        ZeroCopy::Off => BindPreference::Copy,
    };
    lc.busy_poll = (cfg.busy_poll_usecs > 0).then_some(BusyPoll {
        usecs: cfg.busy_poll_usecs,
        budget: cfg.busy_poll_budget,
    });
    Ok(lc)
}

/// Binds the socket to `wanted` (FI_XDP_QUEUE), or else to the first of the
/// interface's `queues` that no socket of this process uses and that the
/// kernel gives us, or else to one our process uses already: in the
/// queue's UMEM group (created, or joined when other endpoints of our user
/// use the queue), with what the group told. A queue of its own first: a
/// group's members share its receive frames and lock.
pub(super) fn bind_a_queue(
    lc: &LinkConfig,
    ifindex: u32,
    wanted: Option<u32>,
    queues: u32,
    shared: &Mutex<Shared>,
) -> std::result::Result<(Link, Option<SharedOpen>), XskError> {
    let ifname = &lc.ifname;
    let candidates: Vec<u32> = match wanted {
        Some(q) => vec![q],
        None => {
            let used = lock(shared).queues.clone();
            let (ours, free): (Vec<u32>, Vec<u32>) = (0..queues).partition(|q| used.contains(q));
            free.into_iter().chain(ours).collect()
        }
    };
    let mut lc = lc.clone();
    let mut busy = Vec::new();
    for q in candidates {
        lc.queue_id = q;
        match open_in_group(&lc, ifindex, shared) {
            Ok(l) => return Ok(l),
            Err(e @ (LinkError::QueueBusy { .. } | LinkError::ShareRefused { .. })) => {
                busy.push(e.to_string())
            }
            Err(e) => {
                return Err(Failed(link_err(&format!("opening AF_XDP on {ifname}"), e)));
            }
        }
    }
    Err(Busy(busy.join("; ")))
}

/// The socket on `lc`'s queue in the queue's UMEM group; without a group
/// file (no /dev/shm, or the name taken by another user's file), a socket
/// of its own as before groups, which no other process can share.
fn open_in_group(
    lc: &LinkConfig,
    ifindex: u32,
    shared: &Mutex<Shared>,
) -> std::result::Result<(Link, Option<SharedOpen>), LinkError> {
    let netns = ofi_xdp_epstats::netns_inode().unwrap_or(0);
    let dir = std::path::Path::new(group::DEFAULT_DIR);
    let group = match Group::open(dir, netns, ifindex, lc.queue_id) {
        Ok(g) => g,
        Err(e) => {
            crate::xdp_info!(
                FI_LOG_EP_CTRL,
                "{}: queue {}: no AF_XDP group file ({e}); the socket will not be shared \
                 with other processes",
                lc.ifname,
                lc.queue_id
            );
            return Link::open(lc).map(|l| (l, None));
        }
    };
    let (q, ifname) = (lc.queue_id, lc.ifname.as_str());
    let (link, open) = Link::open_shared(lc, group, |tidy| {
        tidy_steering(&mut lock(shared).steering, ifname, q, &tidy)
    })?;
    log_reclaimed(ifname, q, &open);
    match open.how {
        GroupJoin::Created => crate::xdp_info!(
            FI_LOG_EP_CTRL,
            "{}: queue {}: AF_XDP group of {} created (UMEM shared with later processes of \
             this user)",
            lc.ifname,
            lc.queue_id,
            lc.group_members
        ),
        GroupJoin::Joined { pid } => crate::xdp_info!(
            FI_LOG_EP_CTRL,
            "{}: queue {}: joined the AF_XDP group of process {pid} as member {} \
             (XDP_SHARED_UMEM)",
            lc.ifname,
            lc.queue_id,
            open.member
        ),
    }
    Ok((link, Some(open)))
}

/// On an interface with several receive queues, asks the driver to send
/// UDP to our (IP, port) to `queue` (FI_XDP_NTUPLE). Where it cannot, says
/// at `info` what that costs: datagrams RSS puts elsewhere take the kernel
/// socket.
pub(super) fn steer_to_queue(args: &OpenArgs, queue: u32, queues: u32) -> Option<InstalledRule> {
    let ifname = &args.iface.name;
    let port = args.local.port;
    if queues <= 1 {
        return None;
    }
    let elsewhere = format!(
        "datagrams that RSS puts on the other {} receive queues reach port {port} through the \
         kernel UDP socket (slower; counted as other_queue)",
        queues - 1
    );
    if !args.cfg.ntuple {
        crate::xdp_info!(FI_LOG_EP_CTRL, "{ifname}: FI_XDP_NTUPLE=0: {elsewhere}");
        return None;
    }
    let rule = FlowRule {
        dst: SocketAddr::new(args.local.ip, port),
        queue,
    };
    let dir = std::path::Path::new(ntuple::DEFAULT_DIR);
    match ntuple::install(ifname, args.iface.index, rule, dir) {
        Ok(r) => {
            crate::xdp_info!(
                FI_LOG_EP_CTRL,
                "{ifname}: ntuple rule at location {} steers {rule}",
                r.location().map_or("?".to_owned(), |l| l.to_string())
            );
            Some(r)
        }
        Err(e) => {
            let hint = match e.raw_os_error() {
                Some(libc::EOPNOTSUPP) => " (the driver has no flow steering rules)",
                Some(libc::EINVAL) => {
                    " (drivers that have rules take them after `ethtool -K IF ntuple on`)"
                }
                _ => "",
            };
            crate::xdp_info!(
                FI_LOG_EP_CTRL,
                "{ifname}: no ntuple rule for port {port}: {e}{hint}; {elsewhere}"
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_holds_a_queues_share_of_one_rank_per_cpu() {
        assert_eq!(queue_members_for(2, 1), group::DEFAULT_MEMBERS);
        assert_eq!(queue_members_for(16, 1), 16);
        assert_eq!(queue_members_for(128, 8), 16);
        assert_eq!(queue_members_for(130, 8), 17, "rounded up");
        assert_eq!(queue_members_for(64, 64), group::DEFAULT_MEMBERS);
        assert_eq!(queue_members_for(512, 1), crate::params::MAX_QUEUE_MEMBERS);
        assert_eq!(queue_members_for(4, 0), group::DEFAULT_MEMBERS);
    }
}
