//! The ethtool ioctl (`SIOCETHTOOL`, include/uapi/linux/ethtool.h): one
//! command struct handed to the driver through `ifreq.ifr_data`. Used for
//! the interface's queue count (`ETHTOOL_GCHANNELS`), its driver's name
//! (`ETHTOOL_GDRVINFO`) and, in
//! [`crate::ntuple`], for flow steering rules (`ETHTOOL_*RXCLS*`).
//!
//! Like the rest of the crate this acts on the calling thread's network
//! namespace (the ioctl goes through a socket made by that thread).

use std::io;
use std::os::fd::AsRawFd;

use crate::iface::dgram_socket;

const SIOCETHTOOL: libc::c_ulong = 0x8946;
/// `ETHTOOL_GCHANNELS`: the queue (channel) counts.
const ETHTOOL_GCHANNELS: u32 = 0x3c;
/// `ETHTOOL_GDRVINFO`: the driver's name and version.
const ETHTOOL_GDRVINFO: u32 = 0x3;

/// `struct ifreq` with its union used as `ifr_data` (a pointer).
#[repr(C)]
struct IfReqData {
    name: [u8; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

/// Runs one ethtool command on `ifname`: `cmd` points at the command struct,
/// whose first `u32` is the command number (ethtool.h). The driver reads and
/// writes it in place.
///
/// # Safety
/// `cmd` must point at a live, writable struct of the size the command's
/// number implies (and, for commands with a trailing array, of the length
/// the struct announces).
pub(crate) unsafe fn ioctl(ifname: &str, cmd: *mut libc::c_void) -> io::Result<()> {
    let bytes = ifname.as_bytes();
    if bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
    }
    let sock = dgram_socket()?;
    let mut ifr = IfReqData {
        name: [0; libc::IFNAMSIZ],
        data: cmd,
        _pad: [0; 16],
    };
    ifr.name[..bytes.len()].copy_from_slice(bytes);
    // SAFETY: ifr is a valid ifreq whose data pointer the caller vouches for.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), SIOCETHTOOL, &mut ifr as *mut IfReqData) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The index of `ifname` in the calling thread's network namespace.
pub fn ifindex(ifname: &str) -> io::Result<u32> {
    let name =
        std::ffi::CString::new(ifname).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `name` is a valid NUL-terminated string.
    match unsafe { libc::if_nametoindex(name.as_ptr()) } {
        0 => Err(io::Error::last_os_error()),
        index => Ok(index),
    }
}

/// `struct ethtool_channels` (ethtool.h).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Channels {
    cmd: u32,
    pub max_rx: u32,
    pub max_tx: u32,
    pub max_other: u32,
    pub max_combined: u32,
    pub rx_count: u32,
    pub tx_count: u32,
    pub other_count: u32,
    pub combined_count: u32,
}

impl Channels {
    /// Receive queues in use: combined channels plus RX-only ones (a
    /// channel is a queue pair or a lone queue, ethtool(8) `-l`).
    pub fn rx_queues(&self) -> u32 {
        self.combined_count.saturating_add(self.rx_count)
    }
}

/// The interface's channel counts (`ethtool -l`). Drivers without
/// `get_channels` answer `EOPNOTSUPP`: treat those as one queue.
pub fn channels(ifname: &str) -> io::Result<Channels> {
    let mut c = Channels {
        cmd: ETHTOOL_GCHANNELS,
        ..Channels::default()
    };
    // SAFETY: GCHANNELS reads and writes one struct ethtool_channels.
    unsafe { ioctl(ifname, (&mut c as *mut Channels).cast())? };
    Ok(c)
}

/// `struct ethtool_drvinfo` (ethtool.h).
#[repr(C)]
struct DrvInfo {
    cmd: u32,
    driver: [u8; 32],
    version: [u8; 32],
    fw_version: [u8; 32],
    bus_info: [u8; 32],
    erom_version: [u8; 32],
    reserved2: [u8; 12],
    n_priv_flags: u32,
    n_stats: u32,
    testinfo_len: u32,
    eedump_len: u32,
    regdump_len: u32,
}

/// The name of `ifname`'s driver (`ethtool -i`), e.g. "veth", "virtio_net".
pub fn driver(ifname: &str) -> io::Result<String> {
    // SAFETY: DrvInfo is plain old data; all-zero is valid.
    let mut d: DrvInfo = unsafe { std::mem::zeroed() };
    d.cmd = ETHTOOL_GDRVINFO;
    // SAFETY: GDRVINFO reads and writes one struct ethtool_drvinfo.
    unsafe { ioctl(ifname, (&mut d as *mut DrvInfo).cast())? };
    let end = d
        .driver
        .iter()
        .position(|b| *b == 0)
        .unwrap_or(d.driver.len());
    Ok(String::from_utf8_lossy(&d.driver[..end]).into_owned())
}

/// How many receive queues `ifname` has, as its driver reports them; 1 when
/// it cannot say (no `get_channels`).
pub fn rx_queue_count(ifname: &str) -> io::Result<u32> {
    match channels(ifname) {
        Ok(c) => Ok(c.rx_queues().max(1)),
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Ok(1),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_ethtool_h() {
        // struct ethtool_channels: nine __u32.
        assert_eq!(size_of::<Channels>(), 36);
        // struct ifreq is 40 bytes on 64-bit Linux; ifr_data at offset 16.
        assert_eq!(size_of::<IfReqData>(), 40);
        assert_eq!(std::mem::offset_of!(IfReqData, data), 16);
        // struct ethtool_drvinfo: the command, five 32-byte names, 12
        // reserved bytes, five __u32.
        assert_eq!(size_of::<DrvInfo>(), 196);
    }

    #[test]
    fn rx_queues_counts_combined_and_rx_only() {
        let c = Channels {
            combined_count: 4,
            rx_count: 2,
            ..Channels::default()
        };
        assert_eq!(c.rx_queues(), 6);
    }

    #[test]
    fn loopback_has_one_queue_or_says_why() {
        // lo has no get_channels: one queue.
        assert_eq!(rx_queue_count("lo").unwrap(), 1);
        assert!(channels("no-such-if0").is_err());
        assert!(driver("no-such-if0").is_err());
    }
}
