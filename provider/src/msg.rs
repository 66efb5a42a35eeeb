//! Data operations (fi_msg(3), fi_tagged(3)): argument validation and the
//! ops tables. Everything a caller can get wrong is checked here, before
//! the endpoint state is looked at, and reported as documented: -FI_EINVAL
//! for invalid arguments (NULL buffers with a length, too many iovs, an
//! fi_addr_t not in the AV, an inject larger than inject_size),
//! -FI_EBADFLAGS for unsupported flags, -FI_ENOAV without an AV,
//! -FI_EOPBADSTATE before fi_enable. Valid operations go to the data path.
//! RMA and atomics are not offered: their tables return -FI_ENOSYS.

use std::sync::atomic::Ordering;

use crate::probe::{self, Stage};
use libc::{c_int, c_void, iovec, size_t, ssize_t};

use crate::abi::{Errno, Result, guard_ssize, lock};
use crate::datapath::{Iov, Payload, Peek, RxOp, TxOp};
use crate::ep::{Endpoint, ep_of};
use crate::getinfo::{IOV_LIMIT, RX_OP_FLAGS, TX_OP_FLAGS};
use crate::sys::*;

/// Flags a send may carry (fi_msg(3) "FLAGS").
const SEND_FLAGS: u64 = TX_OP_FLAGS | FI_MORE;
/// Flags a receive may carry; FI_PEEK/FI_CLAIM/FI_DISCARD are not supported.
const RECV_FLAGS: u64 = RX_OP_FLAGS | FI_MORE;

struct Send {
    iov: Iov,
    dest: fi_addr_t,
    context: usize,
    tag: Option<u64>,
    data: Option<u64>,
    flags: u64,
    /// fi_inject / fi_injectdata: copy now, never report success.
    inject_call: bool,
}

struct Recv {
    iov: Iov,
    src: fi_addr_t,
    context: usize,
    tag: Option<(u64, u64)>,
    flags: u64,
    peek: Peek,
}

/// FI_PEEK / FI_CLAIM / FI_DISCARD of an fi_trecvmsg (fi_tagged(3)); they
/// share bits with capabilities, so they are only read here.
fn peek_of(flags: u64) -> Result<(Peek, u64)> {
    let p = match (
        flags & FI_PEEK != 0,
        flags & FI_CLAIM != 0,
        flags & FI_DISCARD != 0,
    ) {
        (false, false, false) => Peek::None,
        (true, false, false) => Peek::Peek,
        (true, true, false) => Peek::PeekClaim,
        (true, false, true) => Peek::PeekDiscard,
        (false, true, false) => Peek::Claim,
        (false, true, true) => Peek::ClaimDiscard,
        _ => return Err(Errno::BADFLAGS),
    };
    Ok((p, flags & !(FI_PEEK | FI_CLAIM | FI_DISCARD)))
}

/// # Safety
/// `iov` must be NULL or `count` readable iovecs.
unsafe fn iovs(iov: *const iovec, count: size_t) -> Result<Iov> {
    if count > IOV_LIMIT || (iov.is_null() && count > 0) {
        return Err(Errno::INVAL);
    }
    if count == 0 {
        return Ok(Iov::empty());
    }
    // SAFETY: per caller.
    let v = unsafe { std::slice::from_raw_parts(iov, count) };
    if let [i] = v {
        return one(i.iov_base, i.iov_len);
    }
    v.iter()
        .map(|i| {
            if i.iov_base.is_null() && i.iov_len > 0 {
                Err(Errno::INVAL)
            } else {
                Ok((i.iov_base as usize, i.iov_len))
            }
        })
        .collect::<Result<Vec<_>>>()
        .map(Iov::Many)
}

fn one(buf: *const c_void, len: size_t) -> Result<Iov> {
    if buf.is_null() && len > 0 {
        return Err(Errno::INVAL);
    }
    Ok(Iov::One((buf as usize, len)))
}

fn post_send(e: &Endpoint, s: Send) -> Result<ssize_t> {
    probe::at(Stage::SendCalled);
    if s.flags & !SEND_FLAGS != 0 {
        return Err(Errno::BADFLAGS);
    }
    if s.data.is_some() && e.ep_type != FI_EP_RDM {
        // Remote CQ data needs our RDM header (cq_data_size = 0 on DGRAM).
        return Err(Errno::BADFLAGS);
    }
    let len: usize = s.iov.iter().map(|(_, l)| *l).sum();
    if len > e.max_msg_size {
        return Err(Errno::INVAL);
    }
    let inject = s.inject_call || s.flags & FI_INJECT != 0;
    if inject && len > e.inject_size {
        return Err(Errno::INVAL);
    }
    let mut st = lock(&e.state);
    let av = st.av.as_ref().ok_or(Errno::NOAV)?;
    let dest = av.lookup(s.dest).ok_or(Errno::INVAL)?;
    if !st.enabled {
        return Err(Errno::OPBADSTATE);
    }
    let payload = if inject {
        Payload::Inject(s.iov)
    } else {
        Payload::Iov(s.iov)
    };
    let selective = st.tx_cq.as_ref().is_some_and(|b| b.selective);
    let report = !s.inject_call && (!selective || s.flags & FI_COMPLETION != 0);
    let core = st.core.as_mut().ok_or(Errno::OPBADSTATE)?;
    core.post_send(TxOp {
        dest,
        dest_fi_addr: s.dest,
        payload,
        tag: s.tag,
        data: s.data,
        context: s.context,
        flags: s.flags,
        report,
    })?;
    Ok(0)
}

fn post_recv(e: &Endpoint, r: Recv) -> Result<ssize_t> {
    probe::at(Stage::RecvCalled);
    if r.flags & !RECV_FLAGS != 0 {
        return Err(Errno::BADFLAGS);
    }
    let multi = r.flags & FI_MULTI_RECV != 0;
    if multi && (e.caps & FI_MULTI_RECV == 0 || r.iov.len() != 1) {
        return Err(Errno::INVAL);
    }
    if r.peek != Peek::None && (r.tag.is_none() || multi) {
        return Err(Errno::BADFLAGS);
    }
    let mut st = lock(&e.state);
    let src = if r.src == FI_ADDR_UNSPEC || e.caps & FI_DIRECTED_RECV == 0 {
        None
    } else {
        let av = st.av.as_ref().ok_or(Errno::NOAV)?;
        Some((av.lookup(r.src).ok_or(Errno::INVAL)?, r.src))
    };
    if !st.enabled {
        return Err(Errno::OPBADSTATE);
    }
    let selective = st.rx_cq.as_ref().is_some_and(|b| b.selective);
    let report = !selective || r.flags & FI_COMPLETION != 0;
    let core = st.core.as_mut().ok_or(Errno::OPBADSTATE)?;
    core.post_recv(RxOp {
        src,
        iov: r.iov,
        tag: r.tag,
        context: r.context,
        flags: r.flags,
        multi_recv: multi,
        // Peek results and claims always complete (fi_tagged(3)).
        report: report || r.peek != Peek::None,
        peek: r.peek,
    })?;
    Ok(0)
}

fn tx_flags(e: &Endpoint) -> u64 {
    e.tx_op_flags.load(Ordering::Relaxed)
}
fn rx_flags(e: &Endpoint) -> u64 {
    e.rx_op_flags.load(Ordering::Relaxed)
}

// ------------------------------------------------------------ fi_ops_msg

unsafe extern "C" fn msg_recv(
    ep: *mut fid_ep,
    buf: *mut c_void,
    len: size_t,
    _desc: *mut c_void,
    src_addr: fi_addr_t,
    context: *mut c_void,
) -> ssize_t {
    guard_ssize("fi_recv", || {
        // SAFETY: validated by ep_of.
        let e = unsafe { ep_of(ep) }?;
        let iov = one(buf, len)?;
        post_recv(
            e,
            Recv {
                iov,
                src: src_addr,
                context: context as usize,
                tag: None,
                flags: rx_flags(e),
                peek: Peek::None,
            },
        )
    })
}

unsafe extern "C" fn msg_recvv(
    ep: *mut fid_ep,
    iov: *const iovec,
    _desc: *mut *mut c_void,
    count: size_t,
    src_addr: fi_addr_t,
    context: *mut c_void,
) -> ssize_t {
    guard_ssize("fi_recvv", || {
        // SAFETY: validated by ep_of; iov per fi_msg(3).
        let e = unsafe { ep_of(ep) }?;
        let iov = unsafe { iovs(iov, count) }?;
        post_recv(
            e,
            Recv {
                iov,
                src: src_addr,
                context: context as usize,
                tag: None,
                flags: rx_flags(e),
                peek: Peek::None,
            },
        )
    })
}

unsafe extern "C" fn msg_recvmsg(ep: *mut fid_ep, msg: *const fi_msg, flags: u64) -> ssize_t {
    guard_ssize("fi_recvmsg", || {
        // SAFETY: validated by ep_of; msg NULL or valid.
        let e = unsafe { ep_of(ep) }?;
        let m = unsafe { msg.as_ref() }.ok_or(Errno::INVAL)?;
        let iov = unsafe { iovs(m.msg_iov, m.iov_count) }?;
        post_recv(
            e,
            Recv {
                iov,
                src: m.addr,
                context: m.context as usize,
                tag: None,
                flags,
                peek: Peek::None,
            },
        )
    })
}

unsafe extern "C" fn msg_send(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: size_t,
    _desc: *mut c_void,
    dest_addr: fi_addr_t,
    context: *mut c_void,
) -> ssize_t {
    guard_ssize("fi_send", || {
        // SAFETY: validated by ep_of.
        let e = unsafe { ep_of(ep) }?;
        let iov = one(buf, len)?;
        let flags = tx_flags(e);
        post_send(
            e,
            Send {
                iov,
                dest: dest_addr,
                context: context as usize,
                tag: None,
                data: None,
                flags,
                inject_call: false,
            },
        )
    })
}

unsafe extern "C" fn msg_sendv(
    ep: *mut fid_ep,
    iov: *const iovec,
    _desc: *mut *mut c_void,
    count: size_t,
    dest_addr: fi_addr_t,
    context: *mut c_void,
) -> ssize_t {
    guard_ssize("fi_sendv", || {
        // SAFETY: validated by ep_of; iov per fi_msg(3).
        let e = unsafe { ep_of(ep) }?;
        let iov = unsafe { iovs(iov, count) }?;
        let flags = tx_flags(e);
        post_send(
            e,
            Send {
                iov,
                dest: dest_addr,
                context: context as usize,
                tag: None,
                data: None,
                flags,
                inject_call: false,
            },
        )
    })
}

unsafe extern "C" fn msg_sendmsg(ep: *mut fid_ep, msg: *const fi_msg, flags: u64) -> ssize_t {
    guard_ssize("fi_sendmsg", || {
        // SAFETY: validated by ep_of; msg NULL or valid.
        let e = unsafe { ep_of(ep) }?;
        let m = unsafe { msg.as_ref() }.ok_or(Errno::INVAL)?;
        let iov = unsafe { iovs(m.msg_iov, m.iov_count) }?;
        let data = (flags & FI_REMOTE_CQ_DATA != 0).then_some(m.data);
        post_send(
            e,
            Send {
                iov,
                dest: m.addr,
                context: m.context as usize,
                tag: None,
                data,
                flags,
                inject_call: false,
            },
        )
    })
}

unsafe extern "C" fn msg_inject(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: size_t,
    dest_addr: fi_addr_t,
) -> ssize_t {
    guard_ssize("fi_inject", || {
        // SAFETY: validated by ep_of.
        let e = unsafe { ep_of(ep) }?;
        let iov = one(buf, len)?;
        let flags = tx_flags(e) & !FI_COMPLETION;
        post_send(
            e,
            Send {
                iov,
                dest: dest_addr,
                context: 0,
                tag: None,
                data: None,
                flags,
                inject_call: true,
            },
        )
    })
}

unsafe extern "C" fn msg_senddata(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: size_t,
    _desc: *mut c_void,
    data: u64,
    dest_addr: fi_addr_t,
    context: *mut c_void,
) -> ssize_t {
    guard_ssize("fi_senddata", || {
        // SAFETY: validated by ep_of.
        let e = unsafe { ep_of(ep) }?;
        let iov = one(buf, len)?;
        let flags = tx_flags(e) | FI_REMOTE_CQ_DATA;
        post_send(
            e,
            Send {
                iov,
                dest: dest_addr,
                context: context as usize,
                tag: None,
                data: Some(data),
                flags,
                inject_call: false,
            },
        )
    })
}

unsafe extern "C" fn msg_injectdata(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: size_t,
    data: u64,
    dest_addr: fi_addr_t,
) -> ssize_t {
    guard_ssize("fi_injectdata", || {
        // SAFETY: validated by ep_of.
        let e = unsafe { ep_of(ep) }?;
        let iov = one(buf, len)?;
        let flags = (tx_flags(e) & !FI_COMPLETION) | FI_REMOTE_CQ_DATA;
        post_send(
            e,
            Send {
                iov,
                dest: dest_addr,
                context: 0,
                tag: None,
                data: Some(data),
                flags,
                inject_call: true,
            },
        )
    })
}

/// DGRAM endpoints carry plain UDP payloads: no remote CQ data.
unsafe extern "C" fn nosys_senddata(
    _: *mut fid_ep,
    _: *const c_void,
    _: size_t,
    _: *mut c_void,
    _: u64,
    _: fi_addr_t,
    _: *mut c_void,
) -> ssize_t {
    -(FI_ENOSYS as ssize_t)
}
unsafe extern "C" fn nosys_injectdata(
    _: *mut fid_ep,
    _: *const c_void,
    _: size_t,
    _: u64,
    _: fi_addr_t,
) -> ssize_t {
    -(FI_ENOSYS as ssize_t)
}

pub static MSG_OPS_RDM: fi_ops_msg = fi_ops_msg {
    size: size_of::<fi_ops_msg>(),
    recv: Some(msg_recv),
    recvv: Some(msg_recvv),
    recvmsg: Some(msg_recvmsg),
    send: Some(msg_send),
    sendv: Some(msg_sendv),
    sendmsg: Some(msg_sendmsg),
    inject: Some(msg_inject),
    senddata: Some(msg_senddata),
    injectdata: Some(msg_injectdata),
};

pub static MSG_OPS_DGRAM: fi_ops_msg = fi_ops_msg {
    size: size_of::<fi_ops_msg>(),
    recv: Some(msg_recv),
    recvv: Some(msg_recvv),
    recvmsg: Some(msg_recvmsg),
    send: Some(msg_send),
    sendv: Some(msg_sendv),
    sendmsg: Some(msg_sendmsg),
    inject: Some(msg_inject),
    senddata: Some(nosys_senddata),
    injectdata: Some(nosys_injectdata),
};

// ------------------------------------------------------------ fi_ops_tagged

unsafe extern "C" fn tagged_recv(
    ep: *mut fid_ep,
    buf: *mut c_void,
    len: size_t,
    _desc: *mut c_void,
    src_addr: fi_addr_t,
    tag: u64,
    ignore: u64,
    context: *mut c_void,
) -> ssize_t {
    guard_ssize("fi_trecv", || {
        // SAFETY: validated by ep_of.
        let e = unsafe { ep_of(ep) }?;
        let iov = one(buf, len)?;
        post_recv(
            e,
            Recv {
                iov,
                src: src_addr,
                context: context as usize,
                tag: Some((tag, ignore)),
                flags: rx_flags(e),
                peek: Peek::None,
            },
        )
    })
}

unsafe extern "C" fn tagged_recvv(
    ep: *mut fid_ep,
    iov: *const iovec,
    _desc: *mut *mut c_void,
    count: size_t,
    src_addr: fi_addr_t,
    tag: u64,
    ignore: u64,
    context: *mut c_void,
) -> ssize_t {
    guard_ssize("fi_trecvv", || {
        // SAFETY: validated by ep_of; iov per fi_tagged(3).
        let e = unsafe { ep_of(ep) }?;
        let iov = unsafe { iovs(iov, count) }?;
        post_recv(
            e,
            Recv {
                iov,
                src: src_addr,
                context: context as usize,
                tag: Some((tag, ignore)),
                flags: rx_flags(e),
                peek: Peek::None,
            },
        )
    })
}

unsafe extern "C" fn tagged_recvmsg(
    ep: *mut fid_ep,
    msg: *const fi_msg_tagged,
    flags: u64,
) -> ssize_t {
    guard_ssize("fi_trecvmsg", || {
        // SAFETY: validated by ep_of; msg NULL or valid.
        let e = unsafe { ep_of(ep) }?;
        let m = unsafe { msg.as_ref() }.ok_or(Errno::INVAL)?;
        let iov = unsafe { iovs(m.msg_iov, m.iov_count) }?;
        let (peek, flags) = peek_of(flags)?;
        post_recv(
            e,
            Recv {
                iov,
                src: m.addr,
                context: m.context as usize,
                tag: Some((m.tag, m.ignore)),
                flags,
                peek,
            },
        )
    })
}

unsafe extern "C" fn tagged_send(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: size_t,
    _desc: *mut c_void,
    dest_addr: fi_addr_t,
    tag: u64,
    context: *mut c_void,
) -> ssize_t {
    guard_ssize("fi_tsend", || {
        // SAFETY: validated by ep_of.
        let e = unsafe { ep_of(ep) }?;
        let iov = one(buf, len)?;
        let flags = tx_flags(e);
        post_send(
            e,
            Send {
                iov,
                dest: dest_addr,
                context: context as usize,
                tag: Some(tag),
                data: None,
                flags,
                inject_call: false,
            },
        )
    })
}

unsafe extern "C" fn tagged_sendv(
    ep: *mut fid_ep,
    iov: *const iovec,
    _desc: *mut *mut c_void,
    count: size_t,
    dest_addr: fi_addr_t,
    tag: u64,
    context: *mut c_void,
) -> ssize_t {
    guard_ssize("fi_tsendv", || {
        // SAFETY: validated by ep_of; iov per fi_tagged(3).
        let e = unsafe { ep_of(ep) }?;
        let iov = unsafe { iovs(iov, count) }?;
        let flags = tx_flags(e);
        post_send(
            e,
            Send {
                iov,
                dest: dest_addr,
                context: context as usize,
                tag: Some(tag),
                data: None,
                flags,
                inject_call: false,
            },
        )
    })
}

unsafe extern "C" fn tagged_sendmsg(
    ep: *mut fid_ep,
    msg: *const fi_msg_tagged,
    flags: u64,
) -> ssize_t {
    guard_ssize("fi_tsendmsg", || {
        // SAFETY: validated by ep_of; msg NULL or valid.
        let e = unsafe { ep_of(ep) }?;
        let m = unsafe { msg.as_ref() }.ok_or(Errno::INVAL)?;
        let iov = unsafe { iovs(m.msg_iov, m.iov_count) }?;
        let data = (flags & FI_REMOTE_CQ_DATA != 0).then_some(m.data);
        post_send(
            e,
            Send {
                iov,
                dest: m.addr,
                context: m.context as usize,
                tag: Some(m.tag),
                data,
                flags,
                inject_call: false,
            },
        )
    })
}

unsafe extern "C" fn tagged_inject(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: size_t,
    dest_addr: fi_addr_t,
    tag: u64,
) -> ssize_t {
    guard_ssize("fi_tinject", || {
        // SAFETY: validated by ep_of.
        let e = unsafe { ep_of(ep) }?;
        let iov = one(buf, len)?;
        let flags = tx_flags(e) & !FI_COMPLETION;
        post_send(
            e,
            Send {
                iov,
                dest: dest_addr,
                context: 0,
                tag: Some(tag),
                data: None,
                flags,
                inject_call: true,
            },
        )
    })
}

unsafe extern "C" fn tagged_senddata(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: size_t,
    _desc: *mut c_void,
    data: u64,
    dest_addr: fi_addr_t,
    tag: u64,
    context: *mut c_void,
) -> ssize_t {
    guard_ssize("fi_tsenddata", || {
        // SAFETY: validated by ep_of.
        let e = unsafe { ep_of(ep) }?;
        let iov = one(buf, len)?;
        let flags = tx_flags(e) | FI_REMOTE_CQ_DATA;
        post_send(
            e,
            Send {
                iov,
                dest: dest_addr,
                context: context as usize,
                tag: Some(tag),
                data: Some(data),
                flags,
                inject_call: false,
            },
        )
    })
}

unsafe extern "C" fn tagged_injectdata(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: size_t,
    data: u64,
    dest_addr: fi_addr_t,
    tag: u64,
) -> ssize_t {
    guard_ssize("fi_tinjectdata", || {
        // SAFETY: validated by ep_of.
        let e = unsafe { ep_of(ep) }?;
        let iov = one(buf, len)?;
        let flags = (tx_flags(e) & !FI_COMPLETION) | FI_REMOTE_CQ_DATA;
        post_send(
            e,
            Send {
                iov,
                dest: dest_addr,
                context: 0,
                tag: Some(tag),
                data: Some(data),
                flags,
                inject_call: true,
            },
        )
    })
}

pub static TAGGED_OPS: fi_ops_tagged = fi_ops_tagged {
    size: size_of::<fi_ops_tagged>(),
    recv: Some(tagged_recv),
    recvv: Some(tagged_recvv),
    recvmsg: Some(tagged_recvmsg),
    send: Some(tagged_send),
    sendv: Some(tagged_sendv),
    sendmsg: Some(tagged_sendmsg),
    inject: Some(tagged_inject),
    senddata: Some(tagged_senddata),
    injectdata: Some(tagged_injectdata),
};

// DGRAM endpoints have no FI_TAGGED capability.
unsafe extern "C" fn nt_recv(
    _: *mut fid_ep,
    _: *mut c_void,
    _: size_t,
    _: *mut c_void,
    _: fi_addr_t,
    _: u64,
    _: u64,
    _: *mut c_void,
) -> ssize_t {
    -(FI_ENOSYS as ssize_t)
}
unsafe extern "C" fn nt_recvv(
    _: *mut fid_ep,
    _: *const iovec,
    _: *mut *mut c_void,
    _: size_t,
    _: fi_addr_t,
    _: u64,
    _: u64,
    _: *mut c_void,
) -> ssize_t {
    -(FI_ENOSYS as ssize_t)
}
unsafe extern "C" fn nt_msg(_: *mut fid_ep, _: *const fi_msg_tagged, _: u64) -> ssize_t {
    -(FI_ENOSYS as ssize_t)
}
unsafe extern "C" fn nt_send(
    _: *mut fid_ep,
    _: *const c_void,
    _: size_t,
    _: *mut c_void,
    _: fi_addr_t,
    _: u64,
    _: *mut c_void,
) -> ssize_t {
    -(FI_ENOSYS as ssize_t)
}
unsafe extern "C" fn nt_sendv(
    _: *mut fid_ep,
    _: *const iovec,
    _: *mut *mut c_void,
    _: size_t,
    _: fi_addr_t,
    _: u64,
    _: *mut c_void,
) -> ssize_t {
    -(FI_ENOSYS as ssize_t)
}
unsafe extern "C" fn nt_inject(
    _: *mut fid_ep,
    _: *const c_void,
    _: size_t,
    _: fi_addr_t,
    _: u64,
) -> ssize_t {
    -(FI_ENOSYS as ssize_t)
}
unsafe extern "C" fn nt_senddata(
    _: *mut fid_ep,
    _: *const c_void,
    _: size_t,
    _: *mut c_void,
    _: u64,
    _: fi_addr_t,
    _: u64,
    _: *mut c_void,
) -> ssize_t {
    -(FI_ENOSYS as ssize_t)
}
unsafe extern "C" fn nt_injectdata(
    _: *mut fid_ep,
    _: *const c_void,
    _: size_t,
    _: u64,
    _: fi_addr_t,
    _: u64,
) -> ssize_t {
    -(FI_ENOSYS as ssize_t)
}

pub static TAGGED_OPS_NOSYS: fi_ops_tagged = fi_ops_tagged {
    size: size_of::<fi_ops_tagged>(),
    recv: Some(nt_recv),
    recvv: Some(nt_recvv),
    recvmsg: Some(nt_msg),
    send: Some(nt_send),
    sendv: Some(nt_sendv),
    sendmsg: Some(nt_msg),
    inject: Some(nt_inject),
    senddata: Some(nt_senddata),
    injectdata: Some(nt_injectdata),
};

// ------------------------------------------------------------ RMA / atomics: not offered

type Ep = *mut fid_ep;
type V = *mut c_void;
type CV = *const c_void;
type A = fi_addr_t;
const ENOSYS: ssize_t = -(FI_ENOSYS as ssize_t);

unsafe extern "C" fn rma_rw(_: Ep, _: CV, _: size_t, _: V, _: A, _: u64, _: u64, _: V) -> ssize_t {
    ENOSYS
}
unsafe extern "C" fn rma_read(_: Ep, _: V, _: size_t, _: V, _: A, _: u64, _: u64, _: V) -> ssize_t {
    ENOSYS
}
unsafe extern "C" fn rma_v(
    _: Ep,
    _: *const iovec,
    _: *mut V,
    _: size_t,
    _: A,
    _: u64,
    _: u64,
    _: V,
) -> ssize_t {
    ENOSYS
}
unsafe extern "C" fn rma_msg(_: Ep, _: CV, _: u64) -> ssize_t {
    ENOSYS
}
unsafe extern "C" fn rma_inject(_: Ep, _: CV, _: size_t, _: A, _: u64, _: u64) -> ssize_t {
    ENOSYS
}
unsafe extern "C" fn rma_writedata(
    _: Ep,
    _: CV,
    _: size_t,
    _: V,
    _: u64,
    _: A,
    _: u64,
    _: u64,
    _: V,
) -> ssize_t {
    ENOSYS
}
unsafe extern "C" fn rma_injectdata(
    _: Ep,
    _: CV,
    _: size_t,
    _: u64,
    _: A,
    _: u64,
    _: u64,
) -> ssize_t {
    ENOSYS
}

pub static RMA_OPS: fi_ops_rma = fi_ops_rma {
    size: size_of::<fi_ops_rma>(),
    read: Some(rma_read),
    readv: Some(rma_v),
    readmsg: Some(rma_msg),
    write: Some(rma_rw),
    writev: Some(rma_v),
    writemsg: Some(rma_msg),
    inject: Some(rma_inject),
    writedata: Some(rma_writedata),
    injectdata: Some(rma_injectdata),
};

unsafe extern "C" fn at_write(
    _: Ep,
    _: CV,
    _: size_t,
    _: V,
    _: A,
    _: u64,
    _: u64,
    _: c_int,
    _: c_int,
    _: V,
) -> ssize_t {
    ENOSYS
}
unsafe extern "C" fn at_writev(
    _: Ep,
    _: CV,
    _: *mut V,
    _: size_t,
    _: A,
    _: u64,
    _: u64,
    _: c_int,
    _: c_int,
    _: V,
) -> ssize_t {
    ENOSYS
}
unsafe extern "C" fn at_inject(
    _: Ep,
    _: CV,
    _: size_t,
    _: A,
    _: u64,
    _: u64,
    _: c_int,
    _: c_int,
) -> ssize_t {
    ENOSYS
}
unsafe extern "C" fn at_readwrite(
    _: Ep,
    _: CV,
    _: size_t,
    _: V,
    _: V,
    _: V,
    _: A,
    _: u64,
    _: u64,
    _: c_int,
    _: c_int,
    _: V,
) -> ssize_t {
    ENOSYS
}
unsafe extern "C" fn at_readwritev(
    _: Ep,
    _: CV,
    _: *mut V,
    _: size_t,
    _: V,
    _: *mut V,
    _: size_t,
    _: A,
    _: u64,
    _: u64,
    _: c_int,
    _: c_int,
    _: V,
) -> ssize_t {
    ENOSYS
}
unsafe extern "C" fn at_readwritemsg(_: Ep, _: CV, _: V, _: *mut V, _: size_t, _: u64) -> ssize_t {
    ENOSYS
}
unsafe extern "C" fn at_compwrite(
    _: Ep,
    _: CV,
    _: size_t,
    _: V,
    _: CV,
    _: V,
    _: V,
    _: V,
    _: A,
    _: u64,
    _: u64,
    _: c_int,
    _: c_int,
    _: V,
) -> ssize_t {
    ENOSYS
}
unsafe extern "C" fn at_compwritev(
    _: Ep,
    _: CV,
    _: *mut V,
    _: size_t,
    _: CV,
    _: *mut V,
    _: size_t,
    _: V,
    _: *mut V,
    _: size_t,
    _: A,
    _: u64,
    _: u64,
    _: c_int,
    _: c_int,
    _: V,
) -> ssize_t {
    ENOSYS
}
unsafe extern "C" fn at_compwritemsg(
    _: Ep,
    _: CV,
    _: CV,
    _: *mut V,
    _: size_t,
    _: V,
    _: *mut V,
    _: size_t,
    _: u64,
) -> ssize_t {
    ENOSYS
}
unsafe extern "C" fn at_valid(_: Ep, _: c_int, _: c_int, _: *mut size_t) -> c_int {
    -FI_ENOSYS
}

pub static ATOMIC_OPS: fi_ops_atomic = fi_ops_atomic {
    size: size_of::<fi_ops_atomic>(),
    write: Some(at_write),
    writev: Some(at_writev),
    writemsg: Some(rma_msg),
    inject: Some(at_inject),
    readwrite: Some(at_readwrite),
    readwritev: Some(at_readwritev),
    readwritemsg: Some(at_readwritemsg),
    compwrite: Some(at_compwrite),
    compwritev: Some(at_compwritev),
    compwritemsg: Some(at_compwritemsg),
    writevalid: Some(at_valid),
    readwritevalid: Some(at_valid),
    compwritevalid: Some(at_valid),
};
