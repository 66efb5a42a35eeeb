//! XDP through rtnetlink (rtnetlink(7), `IFLA_XDP` in `<linux/if_link.h>`):
//! which program each interface of this network namespace runs, in which
//! mode — what `ip link` shows — and removing a program attached through
//! netlink, which, unlike a `bpf_link`, outlives the process that attached it.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const NLMSG_HDRLEN: usize = 16;
const IFINFOMSG_LEN: usize = 16;
const RTA_HDRLEN: usize = 4;
const NLA_F_NESTED: u16 = 1 << 15;

const IFLA_IFNAME: u16 = 3;
const IFLA_XDP: u16 = 43;
const IFLA_EXT_MASK: u16 = 29;
const RTEXT_FILTER_SKIP_STATS: u32 = 1 << 3;

const IFLA_XDP_FD: u16 = 1;
const IFLA_XDP_ATTACHED: u16 = 2;
const IFLA_XDP_FLAGS: u16 = 3;
const IFLA_XDP_PROG_ID: u16 = 4;
const IFLA_XDP_DRV_PROG_ID: u16 = 5;
const IFLA_XDP_SKB_PROG_ID: u16 = 6;
const IFLA_XDP_HW_PROG_ID: u16 = 7;
const IFLA_XDP_EXPECTED_FD: u16 = 8;

const XDP_ATTACHED_DRV: u8 = 1;
const XDP_ATTACHED_SKB: u8 = 2;
const XDP_ATTACHED_HW: u8 = 3;

const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
const XDP_FLAGS_HW_MODE: u32 = 1 << 3;
const XDP_FLAGS_REPLACE: u32 = 1 << 4;

/// Where on an interface an XDP program runs (`XDP_ATTACHED_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Hook {
    /// Driver (native) mode.
    Native,
    /// Generic (SKB) mode.
    Generic,
    /// Offloaded to the NIC.
    Offload,
}

impl Hook {
    fn flag(self) -> u32 {
        match self {
            Hook::Native => XDP_FLAGS_DRV_MODE,
            Hook::Generic => XDP_FLAGS_SKB_MODE,
            Hook::Offload => XDP_FLAGS_HW_MODE,
        }
    }
}

impl std::fmt::Display for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Hook::Native => "native",
            Hook::Generic => "generic",
            Hook::Offload => "offload",
        })
    }
}

/// One interface of the calling thread's network namespace and the XDP
/// programs it runs (at most one per hook).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceXdp {
    pub ifindex: u32,
    pub name: String,
    /// `(hook, program id)`, in hook order.
    pub programs: Vec<(Hook, u32)>,
}

/// A NETLINK_ROUTE socket.
fn route_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call; the result is checked.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: socket(2) returned a new descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

fn send(fd: &OwnedFd, msg: &[u8]) -> io::Result<()> {
    // SAFETY: `msg` is a valid buffer of the given length; the kernel (pid 0)
    // is the default destination of an unbound netlink socket.
    let n = unsafe { libc::send(fd.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn recv(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for writes of its length.
    let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// A netlink request under construction: header, `ifinfomsg`, attributes.
struct Request(Vec<u8>);

impl Request {
    fn new(msg_type: u16, flags: u16, ifindex: i32) -> Request {
        let mut b = vec![0u8; NLMSG_HDRLEN + IFINFOMSG_LEN];
        b[4..6].copy_from_slice(&msg_type.to_ne_bytes());
        b[6..8].copy_from_slice(&(flags | libc::NLM_F_REQUEST as u16).to_ne_bytes());
        b[8..12].copy_from_slice(&1u32.to_ne_bytes()); // sequence number
        // ifinfomsg: family AF_UNSPEC, type 0, index, flags 0, change 0.
        b[NLMSG_HDRLEN + 4..NLMSG_HDRLEN + 8].copy_from_slice(&ifindex.to_ne_bytes());
        Request(b)
    }

    fn attr(&mut self, kind: u16, data: &[u8]) {
        let len = (RTA_HDRLEN + data.len()) as u16;
        self.0.extend_from_slice(&len.to_ne_bytes());
        self.0.extend_from_slice(&kind.to_ne_bytes());
        self.0.extend_from_slice(data);
        while !self.0.len().is_multiple_of(4) {
            self.0.push(0);
        }
    }

    fn finish(mut self) -> Vec<u8> {
        let len = self.0.len() as u32;
        self.0[0..4].copy_from_slice(&len.to_ne_bytes());
        self.0
    }
}

/// Walks the attributes in `data`: `(type without flags, payload)`.
fn attrs(mut data: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if data.len() < RTA_HDRLEN {
            return None;
        }
        let len = usize::from(u16::from_ne_bytes([data[0], data[1]]));
        let kind = u16::from_ne_bytes([data[2], data[3]]) & !NLA_F_NESTED;
        if len < RTA_HDRLEN || len > data.len() {
            return None;
        }
        let payload = &data[RTA_HDRLEN..len];
        data = &data[((len + 3) & !3).min(data.len())..];
        Some((kind, payload))
    })
}

fn u32_of(payload: &[u8]) -> Option<u32> {
    Some(u32::from_ne_bytes(payload.get(..4)?.try_into().ok()?))
}

/// The `IFLA_XDP` nest of one interface: its programs per hook.
fn parse_xdp(nest: &[u8]) -> Vec<(Hook, u32)> {
    let mut attached = 0u8;
    let (mut any, mut drv, mut skb, mut hw) = (0u32, 0u32, 0u32, 0u32);
    for (kind, payload) in attrs(nest) {
        match kind {
            IFLA_XDP_ATTACHED => attached = payload.first().copied().unwrap_or(0),
            IFLA_XDP_PROG_ID => any = u32_of(payload).unwrap_or(0),
            IFLA_XDP_DRV_PROG_ID => drv = u32_of(payload).unwrap_or(0),
            IFLA_XDP_SKB_PROG_ID => skb = u32_of(payload).unwrap_or(0),
            IFLA_XDP_HW_PROG_ID => hw = u32_of(payload).unwrap_or(0),
            _ => {}
        }
    }
    // With one hook in use the kernel reports IFLA_XDP_PROG_ID and the hook;
    // with several (XDP_ATTACHED_MULTI) one id per hook.
    match attached {
        XDP_ATTACHED_DRV => drv = drv.max(any),
        XDP_ATTACHED_SKB => skb = skb.max(any),
        XDP_ATTACHED_HW => hw = hw.max(any),
        _ => {}
    }
    [
        (Hook::Native, drv),
        (Hook::Generic, skb),
        (Hook::Offload, hw),
    ]
    .into_iter()
    .filter(|(_, id)| *id != 0)
    .collect()
}

/// Every interface of the calling thread's network namespace with its XDP
/// programs (`RTM_GETLINK` dump).
pub fn interfaces() -> io::Result<Vec<InterfaceXdp>> {
    let fd = route_socket()?;
    let mut req = Request::new(libc::RTM_GETLINK, libc::NLM_F_DUMP as u16, 0);
    req.attr(IFLA_EXT_MASK, &RTEXT_FILTER_SKIP_STATS.to_ne_bytes());
    send(&fd, &req.finish())?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = recv(&fd, &mut buf)?;
        let mut msgs = &buf[..n];
        while msgs.len() >= NLMSG_HDRLEN {
            let len = u32::from_ne_bytes([msgs[0], msgs[1], msgs[2], msgs[3]]) as usize;
            let kind = u16::from_ne_bytes([msgs[4], msgs[5]]);
            if len < NLMSG_HDRLEN || len > msgs.len() {
                break;
            }
            let body = &msgs[NLMSG_HDRLEN..len];
            match kind {
                k if k == libc::NLMSG_DONE as u16 => return Ok(out),
                k if k == libc::NLMSG_ERROR as u16 => return Err(netlink_error(body)),
                k if k == libc::RTM_NEWLINK && body.len() >= IFINFOMSG_LEN => {
                    let ifindex = i32::from_ne_bytes([body[4], body[5], body[6], body[7]]);
                    let mut iface = InterfaceXdp {
                        ifindex: ifindex as u32,
                        name: String::new(),
                        programs: Vec::new(),
                    };
                    for (attr, payload) in attrs(&body[IFINFOMSG_LEN..]) {
                        match attr {
                            IFLA_IFNAME => {
                                let name = payload.split(|b| *b == 0).next().unwrap_or(&[]);
                                iface.name = String::from_utf8_lossy(name).into_owned();
                            }
                            IFLA_XDP => iface.programs = parse_xdp(payload),
                            _ => {}
                        }
                    }
                    out.push(iface);
                }
                _ => {}
            }
            msgs = &msgs[((len + 3) & !3).min(msgs.len())..];
        }
    }
}

/// The errno carried by an `NLMSG_ERROR` body (0 for an acknowledgement).
fn netlink_error(body: &[u8]) -> io::Error {
    let code = body
        .get(..4)
        .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        .unwrap_or(-libc::EIO);
    io::Error::from_raw_os_error(-code)
}

/// Removes the program attached through netlink on `hook` of `ifindex`,
/// provided it is still the program `expected_prog_fd` refers to
/// (`XDP_FLAGS_REPLACE` with `IFLA_XDP_EXPECTED_FD`, Linux 5.7+): the kernel
/// checks and removes in one step, so a program attached by someone else in
/// between is never removed (`EEXIST`). A program attached through a
/// `bpf_link` cannot be removed this way (`EBUSY`).
pub fn detach(ifindex: u32, hook: Hook, expected_prog_fd: RawFd) -> io::Result<()> {
    let fd = route_socket()?;
    let mut nest = Request(Vec::new());
    nest.attr(IFLA_XDP_FD, &(-1i32).to_ne_bytes());
    nest.attr(
        IFLA_XDP_FLAGS,
        &(hook.flag() | XDP_FLAGS_REPLACE).to_ne_bytes(),
    );
    nest.attr(IFLA_XDP_EXPECTED_FD, &expected_prog_fd.to_ne_bytes());
    let ifindex = i32::try_from(ifindex).map_err(|_| io::Error::from_raw_os_error(libc::ENODEV))?;
    let mut req = Request::new(libc::RTM_SETLINK, libc::NLM_F_ACK as u16, ifindex);
    req.attr(IFLA_XDP | NLA_F_NESTED, &nest.0);
    send(&fd, &req.finish())?;
    let mut buf = vec![0u8; 4096];
    let n = recv(&fd, &mut buf)?;
    if n < NLMSG_HDRLEN + 4 || u16::from_ne_bytes([buf[4], buf[5]]) != libc::NLMSG_ERROR as u16 {
        return Err(io::Error::other("unexpected netlink reply to RTM_SETLINK"));
    }
    let err = netlink_error(&buf[NLMSG_HDRLEN..n]);
    match err.raw_os_error() {
        Some(0) => Ok(()),
        _ => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(kind: u16, data: &[u8]) -> Vec<u8> {
        let mut r = Request(Vec::new());
        r.attr(kind, data);
        r.0
    }

    #[test]
    fn one_hook_reports_its_program() {
        let mut nest = attr(IFLA_XDP_ATTACHED, &[XDP_ATTACHED_SKB]);
        nest.extend(attr(IFLA_XDP_PROG_ID, &42u32.to_ne_bytes()));
        assert_eq!(parse_xdp(&nest), vec![(Hook::Generic, 42)]);
    }

    #[test]
    fn several_hooks_report_one_program_each() {
        let mut nest = attr(IFLA_XDP_ATTACHED, &[4]);
        nest.extend(attr(IFLA_XDP_SKB_PROG_ID, &7u32.to_ne_bytes()));
        nest.extend(attr(IFLA_XDP_DRV_PROG_ID, &9u32.to_ne_bytes()));
        assert_eq!(
            parse_xdp(&nest),
            vec![(Hook::Native, 9), (Hook::Generic, 7)]
        );
    }

    #[test]
    fn nothing_attached_is_empty_and_short_input_is_harmless() {
        assert!(parse_xdp(&attr(IFLA_XDP_ATTACHED, &[0])).is_empty());
        assert!(parse_xdp(&[1, 0]).is_empty());
        assert!(parse_xdp(&[200, 0, 2, 0, 1]).is_empty());
    }

    #[test]
    fn loopback_is_listed() {
        let all = interfaces().unwrap();
        assert!(all.iter().any(|i| i.name == "lo"), "{all:?}");
    }
}
