//! Opening a [`Link`] (`Documentation/networking/af_xdp.rst`):
//! `socket(AF_XDP)`, `setsockopt(XDP_UMEM_REG)`, ring sizes
//! (`XDP_UMEM_FILL_RING`, `XDP_UMEM_COMPLETION_RING`, `XDP_RX_RING`,
//! `XDP_TX_RING`), `getsockopt(XDP_MMAP_OFFSETS)`, mmap of the four rings,
//! `bind`, and `getsockopt(XDP_OPTIONS)` for the mode the kernel chose.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use super::{Link, LinkStats};
use crate::config::{
    BindMode, BindPreference, LinkConfig, XDP_PACKET_HEADROOM, max_payload, payload_within_mtu,
    slot_chunks,
};
use crate::error::LinkError;
use crate::iface;
use crate::ring::Ring;
use crate::umem::Umem;
use crate::wire::{self, EncodeOptions, LinkAddr};

pub(super) fn setsockopt<T>(fd: RawFd, name: libc::c_int, val: &T) -> io::Result<()> {
    // SAFETY: passes a pointer to a `T` of the size the option expects.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_XDP,
            name,
            (val as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `T` must be a plain C struct for which all-zero bytes are valid.
pub(super) fn getsockopt<T: Copy>(fd: RawFd, name: libc::c_int) -> io::Result<(T, usize)> {
    // SAFETY: only used with libc's plain-old-data XDP structs.
    let mut val: T = unsafe { std::mem::zeroed() };
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `val`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_XDP,
            name,
            (&mut val as *mut T).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok((val, len as usize))
    }
}

/// Makes sure `needed` bytes may be locked: raises the soft limit to the
/// hard one, or to unlimited if we may. Returns the limit in force.
fn raise_memlock(needed: u64) -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain getrlimit into our struct.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) } != 0 {
        return 0;
    }
    if lim.rlim_cur == libc::RLIM_INFINITY || lim.rlim_cur >= needed {
        return lim.rlim_cur;
    }
    let unlimited = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: plain setrlimit; needs CAP_SYS_RESOURCE to raise the hard limit.
    if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &unlimited) } == 0 {
        return libc::RLIM_INFINITY;
    }
    let to_hard = libc::rlimit {
        rlim_cur: lim.rlim_max,
        rlim_max: lim.rlim_max,
    };
    // SAFETY: raising the soft limit up to the hard limit is always allowed.
    if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &to_hard) } == 0 {
        return lim.rlim_max;
    }
    lim.rlim_cur
}

/// TX slots of each member of a UMEM group made with `cfg`: a quarter of
/// what the configuration's TX part holds alone (the provider releases a
/// TX frame as soon as it is queued, so it needs about a TX and a
/// completion ring's worth), at least two rings' worth, at most what a
/// mailbox holds. A ring's worth of slots of `chunks` chunks is the ring's
/// size over `chunks`: in multi-buffer mode every chunk of a datagram takes
/// a descriptor of its own (the kernel's AF_XDP documentation,
/// "Multi-Buffer Support"). Counting a slot per descriptor made a jumbo
/// group's UMEM hold four times what its rings can use: at MTU 9000, 72 MiB
/// pinned per queue with the provider's rings of 256 (24 MiB now), 1 GiB
/// with rings of 4096 (populated at ~0.8 s per group made).
pub(crate) fn group_tx_slots(cfg: &LinkConfig, chunks: u32) -> u32 {
    let chunks = chunks.max(1);
    let alone = cfg.frame_count.saturating_sub(cfg.rx_frames) / chunks;
    (alone / 4)
        .max(2 * cfg.ring_size / chunks)
        .min(crate::group::MAILBOX_CAP)
}

impl Link {
    /// Opens and binds an AF_XDP socket as configured, and primes the fill
    /// ring. Must run in the network namespace that owns the interface.
    ///
    /// The XDP program is not loaded here: the caller attaches its own
    /// (`ofi-xdp-bpf`) and puts [`Link::fd`] into its XSKMAP.
    pub fn open(cfg: &LinkConfig) -> Result<Self, LinkError> {
        Link::open_with(cfg, None)
    }

    /// The interface, our address on it and the header length of our
    /// datagrams, as `cfg` asks.
    pub(super) fn local_endpoint(
        cfg: &LinkConfig,
    ) -> Result<(iface::IfaceInfo, LinkAddr, usize), LinkError> {
        cfg.validate()?;
        let iface = iface::iface_info(&cfg.ifname).map_err(|e| match e.raw_os_error() {
            Some(libc::ENODEV) | Some(libc::ENXIO) => LinkError::InterfaceNotFound {
                ifname: cfg.ifname.clone(),
            },
            _ => LinkError::io("reading interface", e),
        })?;
        let ip = match cfg.ip {
            Some(ip) if iface.addrs.contains(&ip) => ip,
            Some(ip) => {
                return Err(LinkError::NoAddress {
                    ifname: cfg.ifname.clone(),
                    wanted: ip.to_string(),
                });
            }
            None => *iface.addrs.first().ok_or_else(|| LinkError::NoAddress {
                ifname: cfg.ifname.clone(),
                wanted: "IPv4 or IPv6".into(),
            })?,
        };
        let local = LinkAddr {
            mac: iface.mac,
            ip,
            port: cfg.port,
        };
        let header_len = wire::header_len(&ip);
        Ok((iface, local, header_len))
    }

    /// As [`Link::open`]; with `tx_members` (a UMEM group's creator), the
    /// UMEM is a memfd holding the RX chunks, then that many TX ranges of
    /// [`group_tx_slots`] slots.
    pub(super) fn open_with(cfg: &LinkConfig, tx_members: Option<u32>) -> Result<Self, LinkError> {
        let (iface, local, header_len) = Link::local_endpoint(cfg)?;
        let ip = local.ip;
        // A full-MTU frame (Ethernet header + MTU) that does not fit one
        // chunk behind the kernel's RX headroom needs multi-buffer.
        let full_frame = iface.mtu.saturating_add(wire::ETH_HLEN as u32);
        let want_sg =
            cfg.multi_buffer && full_frame.saturating_add(XDP_PACKET_HEADROOM) > cfg.frame_size;
        let chunks = if want_sg {
            slot_chunks(full_frame, cfg.frame_size)
        } else {
            1
        };

        // SAFETY: plain socket call, result checked.
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::EAFNOSUPPORT) => LinkError::Unsupported { source: e },
                _ => LinkError::io("socket(AF_XDP)", e),
            });
        }
        // SAFETY: fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let sfd = fd.as_raw_fd();

        let (umem, umem_fd) = match tx_members {
            None => (
                Umem::new(cfg.frame_count, cfg.rx_frames, cfg.frame_size, chunks)
                    .map_err(|e| LinkError::io("mmap UMEM", e))?,
                None,
            ),
            Some(members) => {
                let rx = cfg.rx_frames.min(cfg.frame_count);
                let per = group_tx_slots(cfg, chunks);
                let count = rx + members * per * chunks;
                let (umem, fd) = Umem::new_memfd(count, rx, cfg.frame_size, chunks)
                    .map_err(|e| LinkError::io("UMEM memfd", e))?;
                (umem, Some(fd))
            }
        };
        let (umem_addr, umem_len) = umem.region();

        let needed = umem_len + 4 * u64::from(cfg.ring_size) * 16 + 4 * 4096;
        let limit = raise_memlock(needed);
        let reg = libc::xdp_umem_reg {
            addr: umem_addr,
            len: umem_len,
            chunk_size: cfg.frame_size,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        setsockopt(sfd, libc::XDP_UMEM_REG, &reg).map_err(|e| match e.raw_os_error() {
            Some(libc::ENOBUFS) | Some(libc::ENOMEM) | Some(libc::EPERM) => {
                LinkError::Memlock { needed, limit }
            }
            _ => LinkError::io("setsockopt(XDP_UMEM_REG)", e),
        })?;
        let rs = cfg.ring_size;
        for (opt, what) in [
            (libc::XDP_UMEM_FILL_RING, "setsockopt(XDP_UMEM_FILL_RING)"),
            (
                libc::XDP_UMEM_COMPLETION_RING,
                "setsockopt(XDP_UMEM_COMPLETION_RING)",
            ),
            (libc::XDP_RX_RING, "setsockopt(XDP_RX_RING)"),
            (libc::XDP_TX_RING, "setsockopt(XDP_TX_RING)"),
        ] {
            setsockopt(sfd, opt, &rs).map_err(|e| LinkError::io(what, e))?;
        }
        let (off, len) = getsockopt::<libc::xdp_mmap_offsets>(sfd, libc::XDP_MMAP_OFFSETS)
            .map_err(|e| LinkError::io("getsockopt(XDP_MMAP_OFFSETS)", e))?;
        if len != size_of::<libc::xdp_mmap_offsets>() {
            // Pre-5.4 kernels report offsets without the flags word, i.e. no
            // need_wakeup support; we require it.
            return Err(LinkError::Config(
                "kernel lacks XDP_USE_NEED_WAKEUP (Linux 5.4+ required)".into(),
            ));
        }
        let map_err = |what| move |e| LinkError::io(what, e);
        let fill = Ring::map(sfd, &off.fr, rs, libc::XDP_UMEM_PGOFF_FILL_RING)
            .map_err(map_err("mmap fill ring"))?;
        let comp = Ring::map(sfd, &off.cr, rs, libc::XDP_UMEM_PGOFF_COMPLETION_RING)
            .map_err(map_err("mmap completion ring"))?;
        let rx = Ring::map(sfd, &off.rx, rs, libc::XDP_PGOFF_RX_RING as u64)
            .map_err(map_err("mmap RX ring"))?;
        let tx = Ring::map(sfd, &off.tx, rs, libc::XDP_PGOFF_TX_RING as u64)
            .map_err(map_err("mmap TX ring"))?;

        let mut link = Link {
            fill,
            comp,
            rx,
            tx,
            fd,
            umem,
            frame_size: cfg.frame_size,
            multi_buffer: false,
            gather: Vec::new(),
            rx_pieces: cfg.rx_pieces && !cfg.verify_checksums,
            header_len,
            max_payload: max_payload(cfg.frame_size, iface.mtu, &ip),
            iface,
            local,
            mode: BindMode::Copy,
            opts: EncodeOptions {
                udp_checksum_ipv4: cfg.udp_checksum_ipv4,
                ipv4_id: 0,
                ecn: if cfg.ecn_capable { wire::ECT0 } else { 0 },
            },
            verify: cfg.verify_checksums,
            stats: LinkStats::default(),
            queue: cfg.queue_id,
            busy_poll: false,
            busy_poll_error: None,
            busy_tx_watch: (0, None),
            umem_fd,
            membership: None,
        };
        // Prime the fill ring before binding so the first packets have room.
        link.refill();
        link.stats.fill_ring_empty = 0; // priming an empty ring is not a stall
        if want_sg {
            match link.bind(cfg, libc::XDP_USE_SG) {
                Ok(()) => {
                    link.multi_buffer = true;
                    // Our TX slot and the peer's chunks (it gathers them the
                    // same way) bound the datagram, besides the MTU.
                    let slot = link.umem.pool.tx_slot_size() as usize;
                    link.max_payload =
                        payload_within_mtu(link.iface.mtu, &ip).min(slot - header_len);
                    if !link.rx_pieces {
                        link.gather.reserve(slot);
                    }
                    link.start_busy_poll(cfg);
                    return Ok(link);
                }
                // Kernels before 6.6 refuse the flag (EINVAL), and so does a
                // zero-copy driver without multi-buffer support (EOPNOTSUPP):
                // one chunk per datagram then.
                Err(LinkError::Config(_) | LinkError::ZeroCopyUnsupported { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        link.bind(cfg, 0)?;
        link.start_busy_poll(cfg);
        Ok(link)
    }

    /// Sets the busy-polling options when asked (after `bind`: the socket's
    /// NAPI context comes from the queue it receives on). A kernel that
    /// refuses one (before 5.11: no `SO_PREFER_BUSY_POLL`) leaves the link
    /// working without busy polling, and [`Link::busy_polling`] says why.
    pub(super) fn start_busy_poll(&mut self, cfg: &LinkConfig) {
        let Some(bp) = cfg.busy_poll else { return };
        let fd = self.fd.as_raw_fd();
        let int = |v: u32| libc::c_int::try_from(v).unwrap_or(libc::c_int::MAX);
        let options = [
            (libc::SO_PREFER_BUSY_POLL, 1, "SO_PREFER_BUSY_POLL"),
            (libc::SO_BUSY_POLL, int(bp.usecs), "SO_BUSY_POLL"),
            (
                libc::SO_BUSY_POLL_BUDGET,
                libc::c_int::from(bp.budget),
                "SO_BUSY_POLL_BUDGET",
            ),
        ];
        for (name, value, what) in options {
            // SAFETY: setsockopt with a valid fd and a c_int option value.
            let rc = unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    name,
                    (&value as *const libc::c_int).cast(),
                    size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            if rc != 0 {
                self.busy_poll_error = Some(format!("{what}: {}", io::Error::last_os_error()));
                return;
            }
        }
        self.busy_poll = true;
    }

    fn bind(&mut self, cfg: &LinkConfig, extra_flags: u16) -> Result<(), LinkError> {
        let mode_flag = match cfg.bind {
            BindPreference::Auto => 0,
            BindPreference::ZeroCopy => libc::XDP_ZEROCOPY,
            BindPreference::Copy => libc::XDP_COPY,
        };
        let sa = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: mode_flag | libc::XDP_USE_NEED_WAKEUP | extra_flags,
            sxdp_ifindex: self.iface.index,
            sxdp_queue_id: cfg.queue_id,
            sxdp_shared_umem_fd: 0,
        };
        // Rebinding a queue right after its previous socket closed can fail
        // with EBUSY while the kernel releases it: retry for a short while.
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            // SAFETY: binding our socket to a properly filled sockaddr_xdp.
            let rc = unsafe {
                libc::bind(
                    self.fd.as_raw_fd(),
                    (&sa as *const libc::sockaddr_xdp).cast(),
                    size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
                )
            };
            if rc == 0 {
                break;
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EBUSY) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Some(libc::EBUSY) => {
                    return Err(LinkError::QueueBusy {
                        ifname: cfg.ifname.clone(),
                        queue: cfg.queue_id,
                    });
                }
                Some(libc::EOPNOTSUPP) if cfg.bind == BindPreference::ZeroCopy => {
                    return Err(LinkError::ZeroCopyUnsupported {
                        ifname: cfg.ifname.clone(),
                    });
                }
                Some(libc::EINVAL) => {
                    return Err(LinkError::Config(format!(
                        "bind to {} queue {} refused (EINVAL): no such queue, or ring/UMEM \
                         settings the driver rejects",
                        cfg.ifname, cfg.queue_id
                    )));
                }
                _ => return Err(LinkError::io("bind(AF_XDP)", e)),
            }
        }
        let (opts, _) = getsockopt::<libc::xdp_options>(self.fd.as_raw_fd(), libc::XDP_OPTIONS)
            .map_err(|e| LinkError::io("getsockopt(XDP_OPTIONS)", e))?;
        self.mode = if opts.flags & libc::XDP_OPTIONS_ZEROCOPY != 0 {
            BindMode::ZeroCopy
        } else {
            BindMode::Copy
        };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_member_holds_two_rings_of_descriptors_not_two_rings_of_slots() {
        let mut cfg = LinkConfig::new("eth0", 7000);
        cfg.frame_count = 4096;
        cfg.rx_frames = 2048;
        cfg.ring_size = 2048;
        // One chunk per datagram (MTU 1500): two rings' worth of slots.
        assert_eq!(group_tx_slots(&cfg, 1), 4096);
        // Four chunks per jumbo datagram: each takes four descriptors.
        assert_eq!(group_tx_slots(&cfg, 4), 1024);
        // Never more than a mailbox holds.
        cfg.ring_size = 8192;
        assert_eq!(group_tx_slots(&cfg, 1), crate::group::MAILBOX_CAP);
    }
}
