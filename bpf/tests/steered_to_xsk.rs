//! The steered path end to end at the level of this crate: a minimal AF_XDP
//! socket (copy mode, RX only, written here over libc — the real link lives in
//! provider/link) sits in `XSKMAP[0]`; UDP to the steered port lands in its RX
//! ring and is counted as steered, and never reaches a kernel socket on the
//! same port. Unsteering the port hands the traffic back to the kernel.

#![allow(clippy::unwrap_used)] // tests may unwrap: a failed step is a failed test

mod common;

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use common::wait_counters;
use ofi_xdp_bpf::{AttachMode, Steering};
use ofi_xdp_testhosts::HostPair;

const PORT: u16 = 47_011;
const FRAMES: u32 = 64;
const FRAME_SIZE: u32 = 2048;
/// Ethernet + IPv4 (no options) + UDP.
const HEADERS: usize = 14 + 20 + 8;

/// An mmap'd region, unmapped on drop.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

impl Mapping {
    fn new(fd: RawFd, len: usize, offset: u64) -> io::Result<Mapping> {
        let flags = if fd < 0 {
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS
        } else {
            libc::MAP_SHARED | libc::MAP_POPULATE
        };
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                offset as libc::off_t,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            ptr: ptr.cast(),
            len,
        })
    }

    fn u32_at(&self, offset: u64) -> &AtomicU32 {
        assert!(offset as usize + 4 <= self.len);
        unsafe { &*(self.ptr.add(offset as usize) as *const AtomicU32) }
    }
}

// SAFETY: the mapping is plain shared memory; ring indices are accessed
// through atomics.
unsafe impl Send for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// AF_XDP socket bound in copy mode to queue 0, fill ring stocked with every
/// UMEM frame, RX ring mapped.
struct RxSocket {
    rx: Mapping,
    rx_off: libc::xdp_ring_offset,
    _fill: Mapping,
    umem: Mapping,
    fd: OwnedFd,
}

fn setsockopt<T>(fd: RawFd, opt: i32, value: &T) -> io::Result<()> {
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_XDP,
            opt,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as u32,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl RxSocket {
    /// Must run inside the namespace of `ifname`.
    fn bind(ifname: &str) -> io::Result<RxSocket> {
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let umem = Mapping::new(-1, (FRAMES * FRAME_SIZE) as usize, 0)?;
        let reg = libc::xdp_umem_reg_v1 {
            addr: umem.ptr as u64,
            len: umem.len as u64,
            chunk_size: FRAME_SIZE,
            headroom: 0,
        };
        setsockopt(raw, libc::XDP_UMEM_REG, &reg)?;
        setsockopt(raw, libc::XDP_UMEM_FILL_RING, &FRAMES)?;
        setsockopt(raw, libc::XDP_UMEM_COMPLETION_RING, &FRAMES)?;
        setsockopt(raw, libc::XDP_RX_RING, &FRAMES)?;

        let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::xdp_mmap_offsets>() as u32;
        let rc = unsafe {
            libc::getsockopt(
                raw,
                libc::SOL_XDP,
                libc::XDP_MMAP_OFFSETS,
                (&mut off as *mut libc::xdp_mmap_offsets).cast(),
                &mut len,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }

        let fill = Mapping::new(
            raw,
            off.fr.desc as usize + FRAMES as usize * 8,
            libc::XDP_UMEM_PGOFF_FILL_RING,
        )?;
        for i in 0..FRAMES {
            let slot = unsafe { fill.ptr.add(off.fr.desc as usize + i as usize * 8) as *mut u64 };
            unsafe { slot.write(u64::from(i * FRAME_SIZE)) };
        }
        fill.u32_at(off.fr.producer)
            .store(FRAMES, Ordering::Release);

        let rx = Mapping::new(
            raw,
            off.rx.desc as usize + FRAMES as usize * std::mem::size_of::<libc::xdp_desc>(),
            libc::XDP_PGOFF_RX_RING as u64,
        )?;

        let cname = std::ffi::CString::new(ifname).unwrap();
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        let sxdp = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: libc::XDP_COPY,
            sxdp_ifindex: ifindex,
            sxdp_queue_id: 0,
            sxdp_shared_umem_fd: 0,
        };
        let rc = unsafe {
            libc::bind(
                raw,
                (&sxdp as *const libc::sockaddr_xdp).cast(),
                std::mem::size_of::<libc::sockaddr_xdp>() as u32,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(RxSocket {
            rx,
            rx_off: off.rx,
            _fill: fill,
            umem,
            fd,
        })
    }

    /// Payloads of every frame received so far (consumer index left alone:
    /// the test reads each ring entry once).
    fn received_payloads(&self) -> Vec<Vec<u8>> {
        let produced = self.rx.u32_at(self.rx_off.producer).load(Ordering::Acquire);
        (0..produced.min(FRAMES))
            .map(|i| {
                let desc = unsafe {
                    (self.rx.ptr.add(
                        self.rx_off.desc as usize
                            + i as usize * std::mem::size_of::<libc::xdp_desc>(),
                    ) as *const libc::xdp_desc)
                        .read()
                };
                let frame = unsafe {
                    std::slice::from_raw_parts(
                        self.umem.ptr.add(desc.addr as usize),
                        desc.len as usize,
                    )
                };
                frame[HEADERS.min(frame.len())..].to_vec()
            })
            .collect()
    }
}

fn steered_into_socket(mode: AttachMode) {
    let pair = HostPair::new().unwrap();
    let (a, b) = (&pair.a, &pair.b);
    let ifname = b.ifname().to_string();
    let (mut steering, xsk) = b.run(|| {
        let steering = Steering::attach(&ifname, mode).unwrap();
        let xsk = RxSocket::bind(&ifname).unwrap();
        (steering, xsk)
    });
    steering.set_socket(0, xsk.fd.as_raw_fd(), 0).unwrap();
    steering.steer_port(PORT, 0).unwrap();

    // A kernel socket on the same port must see none of the steered datagrams.
    let dst = SocketAddr::new(b.ipv4().into(), PORT);
    let kernel = b.run(|| UdpSocket::bind(dst).unwrap());
    kernel
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();

    let tx = a.run(|| UdpSocket::bind("0.0.0.0:0").unwrap());
    let base = steering.counters().unwrap();
    const N: u64 = 20;
    for i in 0..N {
        tx.send_to(format!("datagram {i:02}").as_bytes(), dst)
            .unwrap();
    }
    let d = wait_counters(&steering, &base, Duration::from_secs(3), |d| d.steered >= N);
    assert_eq!(d.steered, N, "{d}");
    assert_eq!(
        (d.no_socket, d.malformed, d.fault_dropped),
        (0, 0, 0),
        "{d}"
    );
    let payloads = xsk.received_payloads();
    assert_eq!(payloads.len() as u64, N);
    for (i, p) in payloads.iter().enumerate() {
        assert_eq!(p.as_slice(), format!("datagram {i:02}").as_bytes());
    }
    let mut buf = [0u8; 64];
    assert!(
        kernel.recv(&mut buf).is_err(),
        "a steered datagram reached the kernel"
    );

    // Port unsteered: back to the kernel socket.
    steering.unsteer_port(PORT).unwrap();
    tx.send_to(b"kernel again", dst).unwrap();
    kernel
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let n = kernel.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"kernel again");

    // Slot cleared while the port is steered: no_socket, kernel gets it.
    steering.steer_port(PORT, 0).unwrap();
    steering.clear_socket(0).unwrap();
    let base = steering.counters().unwrap();
    tx.send_to(b"no socket", dst).unwrap();
    let n = kernel.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"no socket");
    let d = steering.counters().unwrap().since(&base);
    assert_eq!((d.no_socket, d.steered), (1, 0), "{d}");
}

/// Fault injection with a socket present: dropped frames never reach the
/// AF_XDP ring, the rest arrive in order.
fn fault_injection_with_socket(mode: AttachMode) {
    let pair = HostPair::new().unwrap();
    let (a, b) = (&pair.a, &pair.b);
    let ifname = b.ifname().to_string();
    let (mut steering, xsk) = b.run(|| {
        let steering = Steering::attach(&ifname, mode).unwrap();
        let xsk = RxSocket::bind(&ifname).unwrap();
        (steering, xsk)
    });
    steering.set_socket(0, xsk.fd.as_raw_fd(), 0).unwrap();
    steering.steer_port(PORT, 0).unwrap();
    steering.set_fault_injection(4, 2024).unwrap();
    let dst = SocketAddr::new(b.ipv4().into(), PORT);
    let tx = a.run(|| UdpSocket::bind("0.0.0.0:0").unwrap());
    let base = steering.counters().unwrap();
    // 60 datagrams fit the 64-frame fill ring even if none is dropped.
    const N: u64 = 60;
    for i in 0..N {
        tx.send_to(format!("datagram {i:02}").as_bytes(), dst)
            .unwrap();
    }
    let d = wait_counters(&steering, &base, Duration::from_secs(3), |d| {
        d.steered + d.fault_dropped >= N
    });
    assert_eq!(d.steered + d.fault_dropped, N, "{d}");
    assert!(d.fault_dropped > 0 && d.steered > 0, "{d}");
    let payloads = xsk.received_payloads();
    assert_eq!(payloads.len() as u64, d.steered);
    // Arrivals are a strictly increasing subsequence of what was sent.
    let numbers: Vec<u64> = payloads
        .iter()
        .map(|p| std::str::from_utf8(&p[9..]).unwrap().parse().unwrap())
        .collect();
    assert!(numbers.windows(2).all(|w| w[0] < w[1]), "{numbers:?}");
}

#[test]
fn fault_injection_with_socket_generic() {
    fault_injection_with_socket(AttachMode::Generic);
}

#[test]
fn fault_injection_with_socket_native() {
    fault_injection_with_socket(AttachMode::Native);
}

#[test]
fn steered_into_socket_generic() {
    steered_into_socket(AttachMode::Generic);
}

#[test]
fn steered_into_socket_native() {
    steered_into_socket(AttachMode::Native);
}
