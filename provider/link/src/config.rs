//! What a [`crate::Link`] is opened with ([`LinkConfig`]), how it binds,
//! and the payload size that follows from frame size and MTU.

use std::net::IpAddr;

use crate::error::LinkError;
use crate::wire;

/// Bytes the kernel reserves in front of received packet data in each
/// frame (`XDP_PACKET_HEADROOM`, include/uapi/linux/bpf.h).
pub const XDP_PACKET_HEADROOM: u32 = 256;

/// How to bind the socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BindPreference {
    /// Let the kernel try zero-copy and fall back to copy mode (bind with
    /// neither `XDP_ZEROCOPY` nor `XDP_COPY`); [`crate::Link::bind_mode`] reports
    /// which one it picked.
    #[default]
    Auto,
    /// Require zero-copy (`XDP_ZEROCOPY`); fail if the driver lacks it.
    ZeroCopy,
    /// Force copy mode (`XDP_COPY`).
    Copy,
}

/// The mode the socket was bound in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindMode {
    /// Driver DMA straight into the UMEM.
    ZeroCopy,
    /// The kernel copies between its buffers and the UMEM.
    Copy,
}

impl std::fmt::Display for BindMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BindMode::ZeroCopy => "zero-copy",
            BindMode::Copy => "copy",
        })
    }
}

/// Busy polling on the socket (socket(7) `SO_BUSY_POLL`,
/// `SO_PREFER_BUSY_POLL` and `SO_BUSY_POLL_BUDGET`, Linux 5.11+; af_xdp.rst
/// "XDP_USE_NEED_WAKEUP" and the kernel's napi.rst "Preferred busy
/// polling"): the application's `recvfrom`/`sendto` on the socket run the
/// driver's NAPI poll in its own context, and with the interface's
/// `napi_defer_hard_irqs` and `gro_flush_timeout` set, interrupts stay off
/// while it keeps polling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BusyPoll {
    /// `SO_BUSY_POLL`: how long one busy poll may spin, in µs.
    pub usecs: u32,
    /// `SO_BUSY_POLL_BUDGET`: packets one busy poll may process.
    pub budget: u16,
}

/// Configuration of one [`crate::Link`].
#[derive(Clone, Debug)]
pub struct LinkConfig {
    /// Interface to bind (in the calling thread's network namespace).
    pub ifname: String,
    /// Queue index to bind; the XDP program must redirect this queue's
    /// packets to this socket (a redirect to a socket bound to another queue
    /// is dropped by the kernel).
    pub queue_id: u32,
    /// Local UDP port: our source port, and the only destination port
    /// accepted on receive.
    pub port: u16,
    /// Local IP; `None` = the interface's first IPv4 address, else its first
    /// IPv6 address.
    pub ip: Option<IpAddr>,
    /// Frame (UMEM chunk) size: 2048 or 4096.
    pub frame_size: u32,
    /// Total frames in the UMEM.
    pub frame_count: u32,
    /// How many of them serve receive (the rest serve transmit).
    pub rx_frames: u32,
    /// Size of each of the four rings (power of two).
    pub ring_size: u32,
    /// Zero-copy / copy choice.
    pub bind: BindPreference,
    /// Compute UDP checksums for IPv4 (IPv6 always has them).
    pub udp_checksum_ipv4: bool,
    /// Verify IPv4 header and UDP checksums on receive.
    pub verify_checksums: bool,
    /// When a full-MTU frame does not fit one chunk, bind with `XDP_USE_SG`
    /// (multi-buffer, Linux 6.6+) so datagrams up to the MTU span several
    /// chunks; without it (or on older kernels) datagrams are limited to one
    /// chunk.
    pub multi_buffer: bool,
    /// Hand a datagram that arrived in several chunks over in its chunks
    /// ([`crate::RxDatagram::pieces`]) instead of gathering it into one buffer
    /// first. For callers that read `pieces`; ignored with
    /// `verify_checksums` (the UDP checksum needs the datagram whole).
    pub rx_pieces: bool,
    /// Mark sent datagrams ECN-capable (ECT(0), RFC 3168), for a sender
    /// whose congestion control reacts to CE marks.
    pub ecn_capable: bool,
    /// Busy polling on the socket (`None`: interrupts and `need_wakeup`
    /// kicks only).
    pub busy_poll: Option<BusyPoll>,
    /// Members a queue's UMEM group holds when this link creates it
    /// ([`crate::Link::open_shared`]; a joiner takes the creator's size):
    /// 1 to [`crate::group::MAX_MEMBERS`]. Each costs a TX range of the
    /// UMEM, allocated and pinned by the creator.
    pub group_members: u32,
}

impl LinkConfig {
    /// Defaults: queue 0, 4096 frames of 2048 bytes split evenly, rings of
    /// 2048, automatic bind mode, checksums computed and verified.
    pub fn new(ifname: impl Into<String>, port: u16) -> Self {
        Self {
            ifname: ifname.into(),
            queue_id: 0,
            port,
            ip: None,
            frame_size: 2048,
            frame_count: 4096,
            rx_frames: 2048,
            ring_size: 2048,
            bind: BindPreference::Auto,
            udp_checksum_ipv4: true,
            verify_checksums: true,
            multi_buffer: false,
            rx_pieces: false,
            ecn_capable: false,
            busy_poll: None,
            group_members: crate::group::DEFAULT_MEMBERS,
        }
    }

    pub(crate) fn validate(&self) -> Result<(), LinkError> {
        let bad = |m: &str| Err(LinkError::Config(m.to_owned()));
        if self.frame_size != 2048 && self.frame_size != 4096 {
            return bad("frame_size must be 2048 or 4096");
        }
        if !self.ring_size.is_power_of_two() || self.ring_size < 64 {
            return bad("ring_size must be a power of two >= 64");
        }
        if self.frame_count < 2 || self.rx_frames == 0 || self.rx_frames >= self.frame_count {
            return bad("need 0 < rx_frames < frame_count");
        }
        if u64::from(self.frame_count) * u64::from(self.frame_size) > 1 << 34 {
            return bad("UMEM larger than 16 GiB");
        }
        if self.group_members == 0 || self.group_members as usize > crate::group::MAX_MEMBERS {
            return Err(LinkError::Config(format!(
                "group_members must be 1 to {}",
                crate::group::MAX_MEMBERS
            )));
        }
        Ok(())
    }
}

/// The largest UDP payload a link with `frame_size` chunks sends from `ip`
/// on an interface with `mtu`: received frames start XDP_PACKET_HEADROOM
/// into the chunk, so what we send must fit the peer's chunk that way, and
/// the MTU.
pub fn max_payload(frame_size: u32, mtu: u32, ip: &IpAddr) -> usize {
    let by_frame = (frame_size.saturating_sub(XDP_PACKET_HEADROOM) as usize)
        .saturating_sub(wire::header_len(ip));
    by_frame.min(payload_within_mtu(mtu, ip))
}

/// The largest UDP payload of an `mtu`-byte IP packet from `ip`.
pub fn payload_within_mtu(mtu: u32, ip: &IpAddr) -> usize {
    (mtu as usize).saturating_sub(wire::header_len(ip) - wire::ETH_HLEN)
}

/// Chunks per TX slot so that a frame of `frame_len` bytes fits one slot
/// (a power of two, at most 16: the kernel takes at most MAX_SKB_FRAGS + 1
/// descriptors per packet).
pub(crate) fn slot_chunks(frame_len: u32, frame_size: u32) -> u32 {
    frame_len
        .div_ceil(frame_size)
        .next_power_of_two()
        .clamp(1, 16)
}
