//! The kernel UDP socket's settings and the errors the network reports on
//! it: its receive buffer, and ICMP port unreachable (a peer's process is
//! gone).

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

use crate::sys::*;
use crate::xdp_warn;

/// Receive buffer we ask for on the kernel UDP socket. The default
/// (net.core.rmem_default, ≈ 208 KiB) holds about a dozen jumbo datagrams,
/// far below an RDM window, and with manual progress the socket fills
/// whenever the application is busy elsewhere.
pub(super) const KERNEL_RCVBUF: libc::c_int = 8 << 20;

/// Raise the socket's receive buffer to [`KERNEL_RCVBUF`]: SO_RCVBUFFORCE
/// (we hold CAP_NET_ADMIN) passes net.core.rmem_max; plain SO_RCVBUF,
/// capped by it, is the fallback (socket(7)).
pub(super) fn grow_receive_buffer(udp: &UdpSocket) {
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
        if set_int_option(udp, libc::SOL_SOCKET, opt, KERNEL_RCVBUF).is_ok() {
            return;
        }
    }
}

/// setsockopt(2) of an `int` option.
pub(super) fn set_int_option(
    udp: &UdpSocket,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: setsockopt with a valid fd and a c_int option value.
    let rc = unsafe {
        libc::setsockopt(
            udp.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Full-size datagrams the UDP socket's receive buffer holds. The kernel
/// charges each its buffer's true size: for a jumbo datagram a
/// power-of-two allocation plus the skb, against the doubled value
/// SO_RCVBUF reports (socket(7)).
pub(super) fn kernel_rx_capacity(udp: &UdpSocket, max_payload: usize) -> Option<usize> {
    let mut v: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt with a valid fd, a c_int buffer and its length.
    let rc = unsafe {
        libc::getsockopt(
            udp.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 || v <= 0 {
        return None;
    }
    let truesize = (max_payload + 128).next_power_of_two() + 768;
    Some(v as usize / truesize)
}

/// Ask the kernel to queue ICMP errors for our datagrams on the socket's
/// error queue (ip(7) IP_RECVERR, ipv6(7) IPV6_RECVERR), unconnected as it is.
pub(super) fn report_icmp_errors(udp: &UdpSocket, v6: bool) {
    let (level, name) = if v6 {
        (libc::SOL_IPV6, libc::IPV6_RECVERR)
    } else {
        (libc::SOL_IP, libc::IP_RECVERR)
    };
    if let Err(e) = set_int_option(udp, level, name, 1) {
        xdp_warn!(
            FI_LOG_EP_CTRL,
            "IP_RECVERR: {e}; dead peers are found by retries only"
        );
    }
}

/// Runs one send on the kernel UDP socket, again (a few times) while it
/// fails with an error an ICMP message left pending on the socket: with
/// IP_RECVERR the kernel also reports each such error to the next call
/// that sends (ip(7)), failing it unsent, so that a flood of forged port
/// unreachables would fail every send. The failed call consumed the error
/// (the copy on the error queue stays for [`read_refused`]), so the next
/// try goes out unless another came meanwhile. A peer that is really gone
/// is found as before: no acknowledgement, then the error queue.
pub(super) fn retry_icmp_errors<T>(mut send: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    const TRIES: usize = 4;
    let mut r = send();
    for _ in 1..TRIES {
        match &r {
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ECONNREFUSED | libc::EHOSTUNREACH | libc::ENETUNREACH)
                ) =>
            {
                r = send();
            }
            _ => break,
        }
    }
    r
}

/// One entry of the socket's error queue: `Ok(Some(dst))` for a port
/// unreachable (ECONNREFUSED) about a datagram to `dst`, `Ok(None)` for
/// another error, `Err` when the queue is empty.
pub(super) fn read_refused(udp: &UdpSocket) -> io::Result<Option<SocketAddr>> {
    let mut data = [0u8; 64];
    let mut refused = false;
    let flags = libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT;
    let (_, dst) = recv_msg(udp, &mut data, flags, |level, ty, cmsg_data| {
        let is_err = (level == libc::SOL_IP && ty == libc::IP_RECVERR)
            || (level == libc::SOL_IPV6 && ty == libc::IPV6_RECVERR);
        if is_err {
            // SAFETY: an IP_RECVERR/IPV6_RECVERR control message starts
            // with a sock_extended_err (ip(7)).
            let ee = unsafe { cmsg_data.cast::<libc::sock_extended_err>().read_unaligned() };
            refused |= ee.ee_errno == libc::ECONNREFUSED as u32;
        }
    })?;
    Ok(dst.filter(|_| refused))
}

/// One recvmsg(2) on `udp` into `buf` with `flags`: how many bytes came
/// (the datagram's length, which may exceed `buf`'s when MSG_TRUNC cut
/// it) and the address in `msg_name`, each control message handed to
/// `on_cmsg` as (level, type, a pointer to its data).
pub(super) fn recv_msg(
    udp: &UdpSocket,
    buf: &mut [u8],
    flags: libc::c_int,
    mut on_cmsg: impl FnMut(libc::c_int, libc::c_int, *const u8),
) -> io::Result<(usize, Option<SocketAddr>)> {
    // SAFETY: sockaddr_storage is plain old data; all-zero is valid.
    let mut name: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut control = [0u64; 64];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: an all-zero msghdr is valid; pointers are filled in below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = (&mut name as *mut libc::sockaddr_storage).cast();
    msg.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = size_of_val(&control);
    // SAFETY: msg points at live buffers of the stated sizes.
    let n = unsafe { libc::recvmsg(udp.as_raw_fd(), &mut msg, flags) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: walking the control messages recvmsg just wrote, with the
    // kernel's CMSG macros.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            let h = &*c;
            on_cmsg(h.cmsg_level, h.cmsg_type, libc::CMSG_DATA(c).cast_const());
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, socket_addr_of(&name, msg.msg_namelen)))
}

/// The address recvmsg(2) wrote into `name` (`len` bytes of it).
fn socket_addr_of(name: &libc::sockaddr_storage, len: libc::socklen_t) -> Option<SocketAddr> {
    // SAFETY: sockaddr_storage is plain old data, read as bytes within its size.
    let bytes = unsafe {
        std::slice::from_raw_parts(
            (name as *const libc::sockaddr_storage).cast::<u8>(),
            (len as usize).min(size_of::<libc::sockaddr_storage>()),
        )
    };
    crate::addr::decode_any(bytes).map(|(a, _)| a.socket_addr())
}
