//! A [`Link`] in its queue's UMEM group ([`crate::group`]): opening by
//! creating the group or joining it with `XDP_SHARED_UMEM`, and the shared
//! fill and completion rings, used under the group's lock.
//!
//! A joiner takes a live member's AF_XDP socket and UMEM memfd with
//! `pidfd_getfd(2)`, binds its own socket with `XDP_SHARED_UMEM` to the
//! same interface queue (the kernel then shares the member's buffer pool:
//! its UMEM, fill ring and completion ring; af_xdp.rst, "XDP_SHARED_UMEM
//! bind flag"), closes the member's socket again (so a member that exits
//! is released) and maps the shared fill and completion rings through its
//! own socket (allowed after bind since Linux 6.4).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::open::{getsockopt, group_tx_slots, setsockopt};
use super::{BURST, Link, LinkStats};
use crate::config::{BindMode, LinkConfig, max_payload, payload_within_mtu};
use crate::error::LinkError;
use crate::group::{Geometry, Group, Member, Reclaimed, process};
use crate::ring::Ring;
use crate::umem::Umem;
use crate::wire::EncodeOptions;

/// A link's place in its group.
pub(crate) struct Membership {
    group: Group,
    index: usize,
    geometry: Geometry,
}

/// How a link entered its queue's UMEM group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupJoin {
    /// No live member: this link registered the UMEM.
    Created,
    /// Through the socket of the member in process `pid`.
    Joined { pid: i32 },
}

/// What [`Link::open_shared`] tells besides the link.
#[derive(Debug)]
pub struct SharedOpen {
    /// Our index in the member table (an XSKMAP slot per member is the
    /// caller's business).
    pub member: usize,
    pub how: GroupJoin,
    /// Members found dead on the way in (what they kept per member is
    /// among [`Tidy::free`]).
    pub reclaimed: Vec<Reclaimed>,
    /// Dead members so far and the RX frames they may have stranded (an
    /// upper bound).
    pub reclaim_counts: (u64, u64),
}

/// The member table as [`Link::open_shared`] leaves it, handed to its
/// caller's `tidy` while the group's lock is still held: what the caller
/// keeps per member (an XSKMAP slot, the ports steered there) may be
/// cleared for `free` entries — no other process can take one meanwhile —
/// and for `ours` (what its previous occupant left).
#[derive(Debug)]
pub struct Tidy {
    pub ours: usize,
    pub free: Vec<usize>,
}

impl Link {
    /// Opens a socket on `cfg`'s queue in the queue's UMEM `group`: joins
    /// it when a member lives, else creates it (a fresh UMEM in a memfd).
    /// [`LinkError::QueueBusy`]: the queue is taken outside the group (by
    /// another user, or another program); [`LinkError::ShareRefused`]: the
    /// group exists and cannot be joined. `tidy` runs under the group's
    /// lock once we are in ([`Tidy`]).
    pub fn open_shared(
        cfg: &LinkConfig,
        group: Group,
        tidy: impl FnOnce(Tidy),
    ) -> Result<(Link, SharedOpen), LinkError> {
        let share_err = |why: String| LinkError::ShareRefused {
            ifname: cfg.ifname.clone(),
            queue: cfg.queue_id,
            why,
        };
        let me = process::own_pid();
        let started = process::start_time(me).unwrap_or(0);
        let (mut link, open, geometry) = {
            let mut guard = group
                .lock()
                .map_err(|e| share_err(format!("locking {}: {e}", group.path().display())))?;
            let reclaimed = guard.reclaim_dead(cfg.ring_size);
            // Before a new group's reset clears them.
            let reclaim_counts = guard.reclaim_counts();
            let (link, index, how, geometry) = match guard.live_member() {
                None => {
                    let mut link = Link::open_with(cfg, Some(cfg.group_members))?;
                    let g = link.geometry(cfg);
                    guard.reset(g);
                    // The fill ring is primed; the other RX frames are the
                    // group's, not ours to keep.
                    while guard.rx_pool_room() > 0
                        && let Some(addr) = link.umem.pool.take_for_fill()
                    {
                        guard.park_rx(addr);
                    }
                    let m = link.member_entry(me, started);
                    let index = guard
                        .add(m)
                        .ok_or_else(|| share_err("no free entry".into()))?;
                    (link, index, GroupJoin::Created, g)
                }
                Some(through) => {
                    let g = guard.geometry();
                    let placeholder = Member {
                        pid: me,
                        xsk_fd: -1,
                        umem_fd: -1,
                        port: u32::from(cfg.port),
                        start_time: started,
                    };
                    let index = guard.add(placeholder).ok_or_else(|| {
                        share_err(if crate::group::kernel_lets_members_join() {
                            format!(
                                "all {} members are taken (the size its first member chose); \
                                 run fewer processes per queue or choose a larger group",
                                g.members
                            )
                        } else {
                            "this kernel cannot share a queue's rings between processes (Linux \
                             6.4+)"
                                .to_owned()
                        })
                    })?;
                    match Link::join_through(cfg, &through, &g) {
                        Ok(link) => {
                            guard.update(index, link.member_entry(me, started));
                            (link, index, GroupJoin::Joined { pid: through.pid }, g)
                        }
                        Err(e) => {
                            guard.remove(index);
                            return Err(e);
                        }
                    }
                }
            };
            let free = guard
                .members()
                .iter()
                .take(geometry.capacity())
                .enumerate()
                .filter(|(_, m)| m.pid == 0)
                .map(|(i, _)| i)
                .collect();
            tidy(Tidy { ours: index, free });
            let open = SharedOpen {
                member: index,
                how,
                reclaimed,
                reclaim_counts,
            };
            (link, open, geometry)
        };
        let first = open.member as u32 * geometry.tx_per_member;
        link.umem.pool.join_group(
            open.how == GroupJoin::Created,
            first,
            geometry.tx_per_member,
        );
        link.membership = Some(Membership {
            group,
            index: open.member,
            geometry,
        });
        Ok((link, open))
    }

    /// Our index in the queue's UMEM group, if in one.
    pub fn group_member(&self) -> Option<usize> {
        self.membership.as_ref().map(|m| m.index)
    }

    /// The layout of the UMEM this link (a group's creator) registered.
    fn geometry(&self, cfg: &LinkConfig) -> Geometry {
        let chunks = (self.umem.pool.tx_slot_size() / u64::from(self.frame_size)) as u32;
        Geometry {
            frame_size: self.frame_size,
            frame_count: (self.umem.region().1 / u64::from(self.frame_size)) as u32,
            rx_frames: self.umem.pool.rx_frames(),
            slot_chunks: chunks,
            tx_per_member: group_tx_slots(cfg, chunks),
            ring_size: self.fill.size(),
            multi_buffer: u32::from(self.multi_buffer),
            members: cfg.group_members,
        }
    }

    fn member_entry(&self, pid: i32, start_time: u64) -> Member {
        Member {
            pid,
            xsk_fd: self.fd(),
            umem_fd: self.umem_fd.as_ref().map_or(-1, |f| f.as_raw_fd()),
            port: u32::from(self.local.port),
            start_time,
        }
    }

    /// A socket of our own on `through`'s queue, sharing its buffer pool.
    fn join_through(cfg: &LinkConfig, through: &Member, g: &Geometry) -> Result<Link, LinkError> {
        let share_err = |why: String| LinkError::ShareRefused {
            ifname: cfg.ifname.clone(),
            queue: cfg.queue_id,
            why,
        };
        let take = |fd: RawFd, what: &str| {
            process::take_fd(through.pid, fd).map_err(|e| {
                let hint = if e.raw_os_error() == Some(libc::EPERM) {
                    " (pidfd_getfd needs ptrace rights over it: the same user, and with Yama \
                     ptrace_scope >= 1 also CAP_SYS_PTRACE)"
                } else {
                    ""
                };
                share_err(format!(
                    "taking the {what} of process {} with pidfd_getfd: {e}{hint}",
                    through.pid
                ))
            })
        };
        let umem_fd = take(through.umem_fd, "UMEM memfd")?;
        let peer = take(through.xsk_fd, "AF_XDP socket")?;
        let (iface, local, header_len) = Link::local_endpoint(cfg)?;
        // SAFETY: plain socket call, result checked.
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(LinkError::io("socket(AF_XDP)", io::Error::last_os_error()));
        }
        // SAFETY: fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let sfd = fd.as_raw_fd();
        let rs = cfg.ring_size;
        setsockopt(sfd, libc::XDP_RX_RING, &rs)
            .map_err(|e| LinkError::io("setsockopt(XDP_RX_RING)", e))?;
        setsockopt(sfd, libc::XDP_TX_RING, &rs)
            .map_err(|e| LinkError::io("setsockopt(XDP_TX_RING)", e))?;
        let (off, len) = getsockopt::<libc::xdp_mmap_offsets>(sfd, libc::XDP_MMAP_OFFSETS)
            .map_err(|e| LinkError::io("getsockopt(XDP_MMAP_OFFSETS)", e))?;
        if len != size_of::<libc::xdp_mmap_offsets>() {
            return Err(LinkError::Config(
                "kernel lacks XDP_USE_NEED_WAKEUP (Linux 5.4+ required)".into(),
            ));
        }
        let rx = Ring::map(sfd, &off.rx, rs, libc::XDP_PGOFF_RX_RING as u64)
            .map_err(|e| LinkError::io("mmap RX ring", e))?;
        let tx = Ring::map(sfd, &off.tx, rs, libc::XDP_PGOFF_TX_RING as u64)
            .map_err(|e| LinkError::io("mmap TX ring", e))?;
        bind_shared(sfd, iface.index, cfg.queue_id, peer.as_raw_fd())
            .map_err(|e| share_err(format!("bind with XDP_SHARED_UMEM: {e}")))?;
        drop(peer);
        let shared_ring = |pgoff: u64, off: &libc::xdp_ring_offset| {
            Ring::map(sfd, off, g.ring_size, pgoff).map_err(|e| {
                share_err(format!(
                    "mapping the shared fill and completion rings after bind (Linux 6.4+): {e}"
                ))
            })
        };
        let fill = shared_ring(libc::XDP_UMEM_PGOFF_FILL_RING, &off.fr)?;
        let comp = shared_ring(libc::XDP_UMEM_PGOFF_COMPLETION_RING, &off.cr)?;
        let umem = Umem::from_memfd(
            &umem_fd,
            g.frame_count,
            g.rx_frames,
            g.frame_size,
            g.slot_chunks,
        )
        .map_err(|e| LinkError::io("mapping the group's UMEM", e))?;
        let (opts, _) = getsockopt::<libc::xdp_options>(sfd, libc::XDP_OPTIONS)
            .map_err(|e| LinkError::io("getsockopt(XDP_OPTIONS)", e))?;
        let multi_buffer = g.multi_buffer != 0;
        let ip = local.ip;
        let slot = umem.pool.tx_slot_size() as usize;
        let max_payload = if multi_buffer {
            payload_within_mtu(iface.mtu, &ip).min(slot - header_len)
        } else {
            max_payload(g.frame_size, iface.mtu, &ip)
        };
        let rx_pieces = cfg.rx_pieces && !cfg.verify_checksums;
        let mut link = Link {
            fill,
            comp,
            rx,
            tx,
            fd,
            umem,
            frame_size: g.frame_size,
            multi_buffer,
            gather: Vec::new(),
            rx_pieces,
            header_len,
            max_payload,
            iface,
            local,
            mode: if opts.flags & libc::XDP_OPTIONS_ZEROCOPY != 0 {
                BindMode::ZeroCopy
            } else {
                BindMode::Copy
            },
            opts: EncodeOptions {
                udp_checksum_ipv4: cfg.udp_checksum_ipv4,
                ipv4_id: 0,
                ecn: if cfg.ecn_capable {
                    crate::wire::ECT0
                } else {
                    0
                },
            },
            verify: cfg.verify_checksums,
            stats: LinkStats::default(),
            queue: cfg.queue_id,
            busy_poll: false,
            busy_poll_error: None,
            busy_tx_watch: (0, None),
            umem_fd: Some(umem_fd),
            membership: None,
        };
        if multi_buffer && !rx_pieces {
            link.gather.reserve(slot);
        }
        link.start_busy_poll(cfg);
        Ok(link)
    }

    /// [`Link::refill`] in a group: our free RX frames onto the shared fill
    /// ring, under the lock (if free now: else on a later pass).
    pub(super) fn refill_shared(&mut self) -> usize {
        self.refill_in_group(false)
    }

    /// [`Link::refill_shared`]; `wait`: for the lock if taken (leaving),
    /// else skip this pass.
    fn refill_in_group(&mut self, wait: bool) -> usize {
        let Some(m) = &self.membership else {
            return 0;
        };
        // Nothing of ours to give: take frames from the group's pool only
        // when the fill ring has drained a good deal (the kernel has taken
        // them), not on every pass.
        if self.umem.pool.rx_free() == 0
            && (m.group.rx_pooled_hint() == 0 || self.fill.free_hint() < self.fill.size() / 2)
        {
            return 0;
        }
        let guard = if wait {
            m.group.lock().ok()
        } else {
            m.group.try_lock()
        };
        let Some(mut guard) = guard else {
            return 0;
        };
        if guard.owner_died() {
            guard.reclaim_dead(self.rx.size());
        }
        self.fill.resync();
        let free = self.fill.free();
        if free == self.fill.size() {
            self.stats.fill_ring_empty += 1;
        }
        // Ours first, then the group's pool.
        let mut n = 0;
        while n < free {
            let Some(addr) = self.umem.pool.take_for_fill().or_else(|| guard.unpark_rx()) else {
                break;
            };
            self.fill.write(n, addr);
            n += 1;
        }
        if n > 0 {
            self.fill.submit(n);
        }
        // The fill ring is full: what is left goes to the group's pool, so
        // that we hold nothing while we do not poll.
        if self.umem.pool.rx_free() <= guard.rx_pool_room() {
            while let Some(addr) = self.umem.pool.take_for_fill() {
                guard.park_rx(addr);
            }
        }
        n as usize
    }

    /// [`Link::reap_completions`] in a group: the completions other members
    /// posted to our mailbox, then the shared completion ring under the
    /// lock (posting theirs to them).
    pub(super) fn reap_shared(&mut self) -> usize {
        let Some(m) = &self.membership else {
            return 0;
        };
        let mut total = 0;
        let (pool, stats) = (&mut self.umem.pool, &mut self.stats);
        let mut complete = |addr: u64| {
            if pool.completed(addr).is_err() {
                stats.bad_descs += 1;
            }
            stats.tx_completions += 1;
            total += 1;
        };
        let mailbox = m.group.mailbox(m.index);
        if !mailbox.is_empty() {
            mailbox.drain(&mut complete);
        }
        if !self.comp.looks_nonempty() {
            return total;
        }
        let Some(mut guard) = m.group.try_lock() else {
            return total;
        };
        if guard.owner_died() {
            guard.reclaim_dead(self.rx.size());
        }
        self.comp.resync();
        loop {
            let n = self.comp.available().min(BURST as u32);
            if n == 0 {
                break;
            }
            for i in 0..n {
                let addr = self.comp.read(i);
                let base = self.umem.pool.base(addr);
                if addr != base && self.multi_buffer {
                    continue;
                }
                let owner = self
                    .umem
                    .pool
                    .tx_slot_of(base)
                    .and_then(|s| m.geometry.member_of_tx_slot(s));
                match owner {
                    Some(o) if o == m.index => {
                        if self.umem.pool.completed(base).is_err() {
                            self.stats.bad_descs += 1;
                        }
                        self.stats.tx_completions += 1;
                        total += 1;
                    }
                    Some(o) if m.group.mailbox(o).post(base) => {}
                    _ => self.stats.bad_descs += 1,
                }
            }
            self.comp.release(n);
        }
        drop(guard);
        total
    }

    /// Leaves the group: what our RX ring holds and the RX frames we keep
    /// go back to the fill ring (as far as it has room), and our entry is
    /// freed.
    fn leave_group(&mut self) {
        let avail = self.rx.available();
        for i in 0..avail {
            let d = self.rx.read(i);
            if self.umem.pool.received(d.addr).is_ok() {
                let _ = self.umem.pool.release_rx(d.addr);
            }
        }
        self.rx.release(avail);
        self.refill_in_group(true);
        if let Some(m) = &self.membership
            && let Ok(mut guard) = m.group.lock()
        {
            guard.remove(m.index);
        }
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        if self.membership.is_some() {
            self.leave_group();
        }
    }
}

/// `bind(2)` with `XDP_SHARED_UMEM`: the socket shares the buffer pool of
/// `peer` (bound to the same interface and queue). No other flag is allowed
/// with it; the pool's (copy or zero-copy, need_wakeup, multi-buffer) apply.
fn bind_shared(fd: RawFd, ifindex: u32, queue: u32, peer: RawFd) -> io::Result<()> {
    let sa = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: libc::XDP_SHARED_UMEM,
        sxdp_ifindex: ifindex,
        sxdp_queue_id: queue,
        sxdp_shared_umem_fd: peer as u32,
    };
    // SAFETY: binding our socket to a properly filled sockaddr_xdp.
    let rc = unsafe {
        libc::bind(
            fd,
            (&sa as *const libc::sockaddr_xdp).cast(),
            size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
