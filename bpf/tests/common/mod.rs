//! Frame builders and helpers shared by the steering tests.
#![allow(dead_code, clippy::unwrap_used)]

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use ofi_xdp_bpf::{Counters, Steering};

pub const ETH_P_IP: u16 = 0x0800;
pub const ETH_P_IPV6: u16 = 0x86DD;
pub const ETH_P_ARP: u16 = 0x0806;
pub const ETH_P_8021Q: u16 = 0x8100;
pub const ETH_P_8021AD: u16 = 0x88A8;

/// Ethernet header (+ optional VLAN tag with TPID `vlan`).
pub fn eth(dst: [u8; 6], src: [u8; 6], vlan: Option<u16>, ethertype: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(64);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    if let Some(tpid) = vlan {
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&7u16.to_be_bytes()); // VID 7, PCP 0
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

/// RFC 1071 checksum.
pub fn checksum(data: &[u8]) -> u16 {
    let mut sum = 0u32;
    for chunk in data.chunks(2) {
        let word = if chunk.len() == 2 {
            u16::from_be_bytes([chunk[0], chunk[1]])
        } else {
            u16::from_be_bytes([chunk[0], 0])
        };
        sum += u32::from(word);
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// IPv4 header fields a test may want to break.
#[derive(Clone, Copy)]
pub struct V4 {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub ihl: u8,
    pub total_len: Option<u16>, // None = correct
    pub frag_off: u16,
    pub protocol: u8,
}

impl V4 {
    pub fn udp(src: Ipv4Addr, dst: Ipv4Addr) -> V4 {
        V4 {
            src,
            dst,
            ihl: 5,
            total_len: None,
            frag_off: 0x4000, // DF
            protocol: 17,
        }
    }
}

/// IPv4 header (with `ihl` words, options zero-filled) followed by `payload`.
pub fn ipv4(h: V4, payload: &[u8]) -> Vec<u8> {
    let hlen = usize::from(h.ihl.max(5)) * 4;
    let total = h.total_len.unwrap_or((hlen + payload.len()) as u16);
    let mut ip = vec![0u8; hlen];
    ip[0] = 0x40 | (h.ihl & 0x0f);
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[6..8].copy_from_slice(&h.frag_off.to_be_bytes());
    ip[8] = 64;
    ip[9] = h.protocol;
    ip[12..16].copy_from_slice(&h.src.octets());
    ip[16..20].copy_from_slice(&h.dst.octets());
    let c = checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    ip.extend_from_slice(payload);
    ip
}

/// IPv6 header (next header UDP unless `next` says otherwise) + payload.
pub fn ipv6(src: Ipv6Addr, dst: Ipv6Addr, next: u8, plen: Option<u16>, payload: &[u8]) -> Vec<u8> {
    let mut ip = vec![0u8; 40];
    ip[0] = 0x60;
    let plen = plen.unwrap_or(payload.len() as u16);
    ip[4..6].copy_from_slice(&plen.to_be_bytes());
    ip[6] = next;
    ip[7] = 64;
    ip[8..24].copy_from_slice(&src.octets());
    ip[24..40].copy_from_slice(&dst.octets());
    ip.extend_from_slice(payload);
    ip
}

/// UDP header (checksum 0 = none, allowed for IPv4) + payload; `len` overrides
/// the length field.
pub fn udp(sport: u16, dport: u16, len: Option<u16>, payload: &[u8]) -> Vec<u8> {
    let mut u = Vec::with_capacity(8 + payload.len());
    u.extend_from_slice(&sport.to_be_bytes());
    u.extend_from_slice(&dport.to_be_bytes());
    let l = len.unwrap_or((8 + payload.len()) as u16);
    u.extend_from_slice(&l.to_be_bytes());
    u.extend_from_slice(&0u16.to_be_bytes());
    u.extend_from_slice(payload);
    u
}

pub fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// Sends raw Ethernet frames out of `ifname` with an AF_PACKET socket. Must be
/// called on a thread inside the namespace that holds `ifname`.
pub fn send_raw(ifname: &str, frames: &[Vec<u8>]) -> io::Result<()> {
    let cname = std::ffi::CString::new(ifname).map_err(io::Error::other)?;
    let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
    if ifindex == 0 {
        return Err(io::Error::last_os_error());
    }
    // Protocol 0: this socket sends only and never receives.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut result = Ok(());
    for frame in frames {
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_ifindex = ifindex as i32;
        sll.sll_halen = 6;
        sll.sll_addr[..6].copy_from_slice(&frame[..6]);
        let rc = unsafe {
            libc::sendto(
                fd,
                frame.as_ptr().cast(),
                frame.len(),
                0,
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if rc < 0 {
            result = Err(io::Error::last_os_error());
            break;
        }
    }
    unsafe { libc::close(fd) };
    result
}

/// Polls the counters until `done(delta since base)` holds or `timeout` passes;
/// returns the last delta.
pub fn wait_counters(
    steering: &Steering,
    base: &Counters,
    timeout: Duration,
    done: impl Fn(&Counters) -> bool,
) -> Counters {
    let start = Instant::now();
    loop {
        let delta = steering.counters().unwrap().since(base);
        if done(&delta) || start.elapsed() > timeout {
            return delta;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// True when `ip link show` in the namespace reports an XDP program on `ifname`.
pub fn xdp_attached(host: &ofi_xdp_testhosts::Host) -> bool {
    let out = host
        .ip(&["-d", "link", "show", "dev", host.ifname()])
        .unwrap();
    out.contains("prog/xdp") || out.contains(" xdp")
}

/// Whether the program is gone from `host`'s interface within a second of
/// its last holder letting go: the test process's other threads fork
/// children, and a child holds a copy of every descriptor (the bpf_link's
/// too) from its fork until its exec closes them, so the detach that
/// closing the link means can come a moment later.
pub fn xdp_detached_soon(host: &ofi_xdp_testhosts::Host) -> bool {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(1);
    loop {
        if !xdp_attached(host) {
            return true;
        }
        if std::time::Instant::now() > until {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
