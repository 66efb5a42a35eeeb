//! Data operations (fi_msg(3), fi_tagged(3)): argument validation, and the
//! macros that generate the `extern "C"` entry points of the ops tables
//! ([`data_calls!`], [`enosys_calls!`]) from one line each.
//!
//! Everything a caller can get wrong is checked here, before the endpoint
//! state is looked at, and reported as documented: -FI_EINVAL for invalid
//! arguments (NULL buffers with a length, too many iovs, an fi_addr_t not in
//! the AV, an inject larger than inject_size), -FI_EBADFLAGS for unsupported
//! flags, -FI_ENOAV without an AV, -FI_EOPBADSTATE before fi_enable. Valid
//! operations go to the data path as a [`TxOp`] or [`RxOp`].

use std::sync::atomic::Ordering;

use crate::probe::{self, Stage};
use libc::{c_void, iovec, size_t, ssize_t};

use crate::abi::{Errno, Result};
use crate::datapath::{Iov, Payload, Peek, RxOp, TxOp};
use crate::ep::{ConnPhase, Endpoint};
use crate::getinfo::{IOV_LIMIT, RX_OP_FLAGS, TX_OP_FLAGS};
use crate::sys::*;

/// Flags a send may carry (fi_msg(3) "FLAGS"): completion levels,
/// FI_INJECT, remote CQ data, FI_MORE; FI_FENCE with the capability
/// ([`with_fence`]). FI_MULTICAST needs a capability not offered.
pub(super) const SEND_FLAGS: u64 = TX_OP_FLAGS | FI_MORE;
/// A tagged send's (fi_tagged(3) "FLAGS"): a send's, and FI_MATCH_COMPLETE
/// (honoured as delivery complete, which follows the match).
const TSEND_FLAGS: u64 = SEND_FLAGS | FI_MATCH_COMPLETE;
/// Flags a receive may carry (fi_msg(3) "FLAGS"): FI_TRANSMIT_COMPLETE
/// lets a receive complete once the provider has processed it, which ours
/// do anyway (the data is in place when they complete). FI_PEEK / FI_CLAIM
/// / FI_DISCARD only through fi_trecvmsg ([`Recv::tmsg`]): on fi_recvmsg
/// they are for FI_BUFFERED_RECV endpoints, which are not offered.
const RECV_FLAGS: u64 = RX_OP_FLAGS | FI_MORE | FI_TRANSMIT_COMPLETE;
/// `allowed`, and FI_FENCE (fi_msg(3), fi_rma(3), fi_atomic(3)) on RDM and
/// MSG endpoints: the operation starts once everything posted before it to
/// the same peer has completed (reliability/PROTOCOL.md §8.6). FI_FENCE is a
/// secondary capability (fi_getinfo(3)) those entries always report, so it
/// is honoured whatever caps the endpoint was opened with: Sandia
/// OpenSHMEM asks fi_getinfo for it, then opens its endpoints with caps
/// that leave it out, and fences its signalling atomics.
pub(super) fn with_fence(e: &Endpoint, allowed: u64) -> u64 {
    if e.ep_type != FI_EP_DGRAM {
        allowed | FI_FENCE
    } else {
        allowed
    }
}

/// Refuse with -FI_EBADFLAGS, naming them at warn, the bits of `flags`
/// outside `allowed` for operation `what` (fi_msg(3), fi_rma(3),
/// fi_atomic(3) "RETURN VALUE").
pub(super) fn check_flags(what: &str, flags: u64, allowed: u64) -> Result<()> {
    match flags & !allowed {
        0 => Ok(()),
        bad => Err(refuse(what, bad)),
    }
}

/// -FI_EBADFLAGS for flags `bad` of operation `what`, named at warn.
fn refuse(what: &str, bad: u64) -> Errno {
    crate::xdp_warn!(
        FI_LOG_EP_DATA,
        "{what}: flag {} not supported (-FI_EBADFLAGS)",
        flag_names(bad)
    );
    Errno::BADFLAGS
}

/// The names of the operation flags in `bits` (`|`-separated; unknown
/// bits in hex), for log lines.
pub(super) fn flag_names(bits: u64) -> String {
    const NAMES: &[(u64, &str)] = &[
        (FI_TAGGED, "FI_TAGGED"),
        (FI_MULTICAST, "FI_MULTICAST"),
        (FI_MULTI_RECV, "FI_MULTI_RECV"),
        (FI_REMOTE_CQ_DATA, "FI_REMOTE_CQ_DATA"),
        (FI_MORE, "FI_MORE"),
        (FI_PEEK, "FI_PEEK"),
        (FI_TRIGGER, "FI_TRIGGER"),
        (FI_FENCE, "FI_FENCE"),
        (FI_COMPLETION, "FI_COMPLETION"),
        (FI_INJECT, "FI_INJECT"),
        (FI_INJECT_COMPLETE, "FI_INJECT_COMPLETE"),
        (FI_TRANSMIT_COMPLETE, "FI_TRANSMIT_COMPLETE"),
        (FI_DELIVERY_COMPLETE, "FI_DELIVERY_COMPLETE"),
        (FI_AFFINITY, "FI_AFFINITY"),
        (FI_COMMIT_COMPLETE, "FI_COMMIT_COMPLETE"),
        (FI_MATCH_COMPLETE, "FI_MATCH_COMPLETE"),
        (FI_DISCARD, "FI_DISCARD"),
        (FI_CLAIM, "FI_CLAIM"),
    ];
    let mut names: Vec<String> = NAMES
        .iter()
        .filter(|(b, _)| bits & b != 0)
        .map(|(_, n)| (*n).to_owned())
        .collect();
    let rest = NAMES.iter().fold(bits, |r, (b, _)| r & !b);
    if rest != 0 {
        names.push(format!("{rest:#x}"));
    }
    names.join("|")
}

/// Argument types of the data calls, as their man pages name them: a
/// send's buffer, a receive's buffer, a memory descriptor (accepted, never
/// needed: fi_mr(3)), an iov's descriptors, the operation's context, an iov.
pub(super) type Buf = *const c_void;
pub(super) type RecvBuf = *mut c_void;
pub(super) type Desc = *mut c_void;
pub(super) type Descs = *mut *mut c_void;
pub(super) type Ctx = *mut c_void;
pub(super) type Iovs = *const iovec;

/// A send as one entry point describes it.
pub(super) struct Send {
    iov: Iov,
    dest: fi_addr_t,
    context: usize,
    tag: Option<u64>,
    data: Option<u64>,
    /// The flags argument of fi_sendmsg / fi_tsendmsg; the other calls use
    /// the endpoint's default transmit flags (fi_endpoint(3) FI_SETOPSFLAG).
    flags: Option<u64>,
    /// fi_inject / fi_injectdata: copy now, never report success.
    inject_call: bool,
}

impl Send {
    /// fi_send, fi_sendv, fi_tsend, …: `iov` to `dest`, reported with `context`.
    pub(super) fn new(iov: Iov, dest: fi_addr_t, context: *mut c_void) -> Send {
        Send {
            iov,
            dest,
            context: context as usize,
            tag: None,
            data: None,
            flags: None,
            inject_call: false,
        }
    }

    /// fi_inject, fi_tinject, …: no context, no success completion.
    pub(super) fn inject(iov: Iov, dest: fi_addr_t) -> Send {
        Send {
            inject_call: true,
            ..Send::new(iov, dest, std::ptr::null_mut())
        }
    }

    /// The fi_tagged(3) form.
    pub(super) fn tagged(self, tag: u64) -> Send {
        Send {
            tag: Some(tag),
            ..self
        }
    }

    /// fi_senddata, fi_injectdata, …: remote CQ data (FI_REMOTE_CQ_DATA).
    pub(super) fn data(self, data: u64) -> Send {
        Send {
            data: Some(data),
            ..self
        }
    }

    /// fi_sendmsg: the message's iov, address, context and (with
    /// FI_REMOTE_CQ_DATA) data, and the call's own flags.
    ///
    /// # Safety
    /// `msg` must be NULL or a readable `struct fi_msg` whose iov array
    /// holds `iov_count` entries.
    pub(super) unsafe fn msg(msg: *const fi_msg, flags: u64) -> Result<Send> {
        // SAFETY: per the caller.
        let m = unsafe { msg.as_ref() }.ok_or(Errno::INVAL)?;
        // SAFETY: per the caller.
        let iov = unsafe { iovs(m.msg_iov, m.iov_count) }?;
        Ok(Send::new(iov, m.addr, m.context).given(flags, m.data))
    }

    /// fi_tsendmsg: as [`Send::msg`], with the message's tag.
    ///
    /// # Safety
    /// `msg` must be NULL or a readable `struct fi_msg_tagged` whose iov
    /// array holds `iov_count` entries.
    pub(super) unsafe fn tmsg(msg: *const fi_msg_tagged, flags: u64) -> Result<Send> {
        // SAFETY: per the caller.
        let m = unsafe { msg.as_ref() }.ok_or(Errno::INVAL)?;
        // SAFETY: per the caller.
        let iov = unsafe { iovs(m.msg_iov, m.iov_count) }?;
        Ok(Send::new(iov, m.addr, m.context)
            .tagged(m.tag)
            .given(flags, m.data))
    }

    /// A *msg call's own flags, and its message's data when they include
    /// FI_REMOTE_CQ_DATA.
    fn given(self, flags: u64, data: u64) -> Send {
        Send {
            flags: Some(flags),
            data: (flags & FI_REMOTE_CQ_DATA != 0).then_some(data),
            ..self
        }
    }

    /// The operation's flags: the call's own, or the endpoint's defaults
    /// with what the call implies (an inject asks for no completion; a
    /// senddata carries FI_REMOTE_CQ_DATA).
    fn flags(&self, e: &Endpoint) -> u64 {
        tx_flags(e, self.flags, self.inject_call, self.data.is_some())
    }
}

/// A transmit call's flags: its own (the *msg calls), or the endpoint's
/// defaults with what the call implies (an inject asks for no completion;
/// a call with data carries FI_REMOTE_CQ_DATA).
pub(super) fn tx_flags(e: &Endpoint, given: Option<u64>, inject_call: bool, data: bool) -> u64 {
    if let Some(f) = given {
        return f;
    }
    let mut f = e.tx_op_flags.load(Ordering::Relaxed);
    if inject_call {
        f &= !FI_COMPLETION;
    }
    if data {
        f |= FI_REMOTE_CQ_DATA;
    }
    f
}

/// The common tail of every transmit call: resolve `dest` through the AV,
/// check the endpoint is enabled, decide whether success is reported
/// (never for inject calls; with FI_SELECTIVE_COMPLETION only with
/// FI_COMPLETION), and hand the operation to the data path through `post`.
pub(super) fn post_tx(
    e: &Endpoint,
    dest: fi_addr_t,
    flags: u64,
    inject_call: bool,
    post: impl FnOnce(&mut dyn crate::datapath::DataPath, crate::addr::XdpAddr, Reporting) -> Result<()>,
) -> Result<ssize_t> {
    let mut st = e.state.lock();
    let addr = if e.ep_type == FI_EP_MSG {
        // fi_cm(3): no data before FI_CONNECTED; the address argument of a
        // connected endpoint's transfer is ignored.
        match (st.conn, st.peer) {
            (ConnPhase::Connected, Some(p)) => p,
            _ => return Err(Errno(FI_ENOTCONN)),
        }
    } else {
        let av = st.av.as_ref().ok_or(Errno::NOAV)?;
        av.lookup(dest).ok_or(Errno::INVAL)?
    };
    if !st.enabled {
        return Err(Errno::OPBADSTATE);
    }
    let selective = st.tx_cq.as_ref().is_some_and(|b| b.selective);
    let reporting = Reporting {
        report: !inject_call && (!selective || flags & FI_COMPLETION != 0),
        send_counted: st.send_cntr.is_some(),
    };
    let core = st.core.as_mut().ok_or(Errno::OPBADSTATE)?;
    post(core.as_mut(), addr, reporting)?;
    Ok(0)
}

/// What the application will see of a transmit's completion.
#[derive(Clone, Copy, Debug)]
pub(super) struct Reporting {
    /// A successful completion goes to the CQ (not for fi_inject, nor with
    /// FI_SELECTIVE_COMPLETION and no FI_COMPLETION). Errors always do.
    pub report: bool,
    /// A counter is bound to the endpoint's sends (FI_SEND).
    pub send_counted: bool,
}

/// The flags a send goes with. fi_inject and its kin report no completion
/// (fi_msg(3), fi_tagged(3)), so an FI_DELIVERY_COMPLETE or
/// FI_TRANSMIT_COMPLETE they take from the endpoint's op_flags is seen by
/// nobody — but paid for: the receiver answers every such message with an
/// ack at once and a DONE. MPICH puts FI_DELIVERY_COMPLETE in its op_flags
/// and sends small messages with fi_tinjectdata: its 8-byte ping-pong took
/// 4.4 µs with the level kept, 2.0 without. Only a counter bound to FI_SEND
/// could tell the levels apart (it counts the completion), and then it stands.
fn send_flags(flags: u64, inject_call: bool, reporting: Reporting) -> u64 {
    if inject_call && !reporting.send_counted {
        flags & !(FI_DELIVERY_COMPLETE | FI_TRANSMIT_COMPLETE)
    } else {
        flags
    }
}

/// A receive as one entry point describes it.
pub(super) struct Recv {
    iov: Iov,
    src: fi_addr_t,
    context: usize,
    tag: Option<(u64, u64)>,
    /// The flags argument of fi_recvmsg / fi_trecvmsg; the other calls use
    /// the endpoint's default receive flags.
    flags: Option<u64>,
    peek: Peek,
}

impl Recv {
    /// fi_recv, fi_recvv, fi_trecv, …: into `iov` from `src`
    /// (FI_ADDR_UNSPEC: anyone), reported with `context`.
    pub(super) fn new(iov: Iov, src: fi_addr_t, context: *mut c_void) -> Recv {
        Recv {
            iov,
            src,
            context: context as usize,
            tag: None,
            flags: None,
            peek: Peek::None,
        }
    }

    /// The fi_tagged(3) form: tags matching `tag` outside the `ignore` bits.
    pub(super) fn tagged(self, tag: u64, ignore: u64) -> Recv {
        Recv {
            tag: Some((tag, ignore)),
            ..self
        }
    }

    /// fi_recvmsg.
    ///
    /// # Safety
    /// As for [`Send::msg`].
    pub(super) unsafe fn msg(msg: *const fi_msg, flags: u64) -> Result<Recv> {
        // SAFETY: per the caller.
        let m = unsafe { msg.as_ref() }.ok_or(Errno::INVAL)?;
        // SAFETY: per the caller.
        let iov = unsafe { iovs(m.msg_iov, m.iov_count) }?;
        Ok(Recv {
            flags: Some(flags),
            ..Recv::new(iov, m.addr, m.context)
        })
    }

    /// fi_trecvmsg, the one call that may carry FI_PEEK / FI_CLAIM /
    /// FI_DISCARD.
    ///
    /// # Safety
    /// As for [`Send::tmsg`].
    pub(super) unsafe fn tmsg(msg: *const fi_msg_tagged, flags: u64) -> Result<Recv> {
        // SAFETY: per the caller.
        let m = unsafe { msg.as_ref() }.ok_or(Errno::INVAL)?;
        // SAFETY: per the caller.
        let iov = unsafe { iovs(m.msg_iov, m.iov_count) }?;
        let (peek, flags) = peek_of(flags)?;
        // fi_tagged(3) FI_CLAIM: the message is claimed through the
        // struct fi_context the application supplies (with FI_PEEK it
        // receives the claim); there is none to use without one.
        if matches!(peek, Peek::PeekClaim | Peek::Claim | Peek::ClaimDiscard) && m.context.is_null()
        {
            return Err(Errno::INVAL);
        }
        Ok(Recv {
            flags: Some(flags),
            peek,
            ..Recv::new(iov, m.addr, m.context).tagged(m.tag, m.ignore)
        })
    }
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
        _ => {
            let all = FI_PEEK | FI_CLAIM | FI_DISCARD;
            return Err(refuse("tagged receive (together)", all));
        }
    };
    Ok((p, flags & !(FI_PEEK | FI_CLAIM | FI_DISCARD)))
}

/// # Safety
/// `iov` must be NULL or `count` readable iovecs.
pub(super) unsafe fn iovs(iov: *const iovec, count: size_t) -> Result<Iov> {
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

/// One buffer (fi_send, fi_recv, …): NULL only with length 0.
pub(super) fn one(buf: *const c_void, len: size_t) -> Result<Iov> {
    if buf.is_null() && len > 0 {
        return Err(Errno::INVAL);
    }
    Ok(Iov::One((buf as usize, len)))
}

/// Validate a send and hand it to the data path (fi_msg(3), fi_tagged(3)).
pub(super) fn post_send(e: &Endpoint, s: Send) -> Result<ssize_t> {
    probe::at(Stage::SendCalled);
    let flags = s.flags(e);
    let (what, allowed) = match s.tag {
        Some(_) => ("tagged send", TSEND_FLAGS),
        None => ("send", SEND_FLAGS),
    };
    check_flags(what, flags, with_fence(e, allowed))?;
    if s.data.is_some() && e.ep_type == FI_EP_DGRAM && !e.dgram_header {
        // Remote CQ data needs a header: plain UDP has cq_data_size = 0.
        return Err(refuse("send on plain UDP", FI_REMOTE_CQ_DATA));
    }
    let len = payload_len(e, &s.iov)?;
    if len > e.max_msg_size {
        return Err(Errno::INVAL);
    }
    let inject = s.inject_call || flags & FI_INJECT != 0;
    if inject && len > e.inject_size {
        return Err(Errno::INVAL);
    }
    let payload = if inject {
        Payload::Inject(s.iov)
    } else {
        Payload::Iov(s.iov)
    };
    post_tx(e, s.dest, flags, s.inject_call, |core, dest, reporting| {
        core.post_send(TxOp {
            dest,
            dest_fi_addr: s.dest,
            payload,
            tag: s.tag,
            data: s.data,
            context: s.context,
            flags: send_flags(flags, s.inject_call, reporting),
            report: reporting.report,
        })
    })
}

/// The application's bytes of an operation: its buffers less the
/// FI_MSG_PREFIX space, which must come first and in one piece
/// (fi_getinfo(3) FI_MSG_PREFIX); -FI_EINVAL without room for it.
fn payload_len(e: &Endpoint, iov: &Iov) -> Result<usize> {
    let len: usize = iov.iter().map(|(_, l)| *l).sum();
    if e.prefix == 0 {
        return Ok(len);
    }
    match iov.first() {
        Some((_, first)) if *first >= e.prefix => Ok(len - e.prefix),
        _ => Err(Errno::INVAL),
    }
}

/// Validate a receive and hand it to the data path (fi_msg(3), fi_tagged(3)).
pub(super) fn post_recv(e: &Endpoint, r: Recv) -> Result<ssize_t> {
    probe::at(Stage::RecvCalled);
    payload_len(e, &r.iov)?;
    let flags = r
        .flags
        .unwrap_or_else(|| e.rx_op_flags.load(Ordering::Relaxed));
    check_flags("receive", flags, RECV_FLAGS)?;
    let multi = flags & FI_MULTI_RECV != 0;
    if multi && (e.caps & FI_MULTI_RECV == 0 || r.iov.len() != 1) {
        return Err(Errno::INVAL);
    }
    if r.peek != Peek::None && (r.tag.is_none() || multi) {
        return Err(refuse("tagged receive with FI_MULTI_RECV", FI_PEEK));
    }
    let mut st = e.state.lock();
    // A connected endpoint takes receives before it is connected (fi_cm(3)),
    // not after its connection ended.
    if st.conn == ConnPhase::Down {
        return Err(Errno(FI_ENOTCONN));
    }
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
    let report = !selective || flags & FI_COMPLETION != 0;
    let core = st.core.as_mut().ok_or(Errno::OPBADSTATE)?;
    core.post_recv(RxOp {
        src,
        iov: r.iov,
        tag: r.tag,
        context: r.context,
        flags,
        multi_recv: multi,
        // Peek results and claims always complete (fi_tagged(3)).
        report: report || r.peek != Peek::None,
        peek: r.peek,
    })?;
    Ok(0)
}

/// Generates `extern "C"` data-call entry points, one line each:
///
/// ```text
/// name "fi_call" (arguments after the endpoint) => post_send(how the call builds its Send);
/// ```
///
/// Each validates the endpoint, builds the operation (inside `unsafe`: the
/// builders read the application's pointers, which the call's man page
/// requires to be NULL or valid) and posts it, catching panics
/// ([`crate::abi::guard_ssize`]). A new operation family adds its lines to
/// its table's file.
macro_rules! data_calls {
    ($(
        $(#[$attr:meta])*
        $name:ident $cname:literal ($($arg:tt: $ty:ty),* $(,)?) => $post:ident($op:expr);
    )*) => {
        $(
            $(#[$attr])*
            unsafe extern "C" fn $name(
                ep: *mut $crate::sys::fid_ep,
                $($arg: $ty),*
            ) -> ::libc::ssize_t {
                $crate::abi::guard_ssize($cname, || {
                    // SAFETY: ep_of checks that `ep` is one of our endpoints.
                    let e = unsafe { $crate::ep::ep_of(ep) }?;
                    // SAFETY: the pointer arguments are NULL or valid as the
                    // call's man page requires; the builders check for NULL.
                    #[allow(unused_unsafe)]
                    let op = unsafe { $op };
                    $post(e, op)
                })
            }
        )*
    };
}
pub(super) use data_calls;

/// Generates entry points that only return -FI_ENOSYS (an operation the
/// endpoint does not offer), one line each: `name(argument types after the
/// endpoint) [-> return type, default ssize_t];`.
macro_rules! enosys_calls {
    (@ret) => { ::libc::ssize_t };
    (@ret $ret:ty) => { $ret };
    ($(
        $(#[$attr:meta])*
        $name:ident($($ty:ty),* $(,)?) $(-> $ret:ty)?;
    )*) => {
        $(
            $(#[$attr])*
            unsafe extern "C" fn $name(
                _: *mut $crate::sys::fid_ep,
                $(_: $ty),*
            ) -> enosys_calls!(@ret $($ret)?) {
                -($crate::sys::FI_ENOSYS as enosys_calls!(@ret $($ret)?))
            }
        )*
    };
}
pub(super) use enosys_calls;

#[cfg(test)]
mod tests {
    use super::*;

    /// A refusal names every flag it refuses, unknown bits in hex.
    #[test]
    fn refused_flags_are_named() {
        assert_eq!(check_flags("send", FI_INJECT | FI_MORE, SEND_FLAGS), Ok(()));
        assert_eq!(
            check_flags("send", FI_FENCE | FI_INJECT, SEND_FLAGS),
            Err(Errno::BADFLAGS)
        );
        assert_eq!(
            flag_names(FI_FENCE | FI_MATCH_COMPLETE),
            "FI_FENCE|FI_MATCH_COMPLETE"
        );
        assert_eq!(flag_names(FI_CLAIM | (1 << 50)), "FI_CLAIM|0x4000000000000");
    }

    /// An inject call drops the level nobody can see, unless a send
    /// counter would count the completion; other sends keep theirs.
    #[test]
    fn injects_leave_out_a_completion_level_only_a_counter_could_see() {
        let dc = FI_DELIVERY_COMPLETE | FI_REMOTE_CQ_DATA;
        let seen_by = |report, send_counted| Reporting {
            report,
            send_counted,
        };
        assert_eq!(
            send_flags(dc, true, seen_by(false, false)),
            FI_REMOTE_CQ_DATA
        );
        assert_eq!(
            send_flags(FI_TRANSMIT_COMPLETE, true, seen_by(false, false)),
            0
        );
        assert_eq!(send_flags(dc, true, seen_by(false, true)), dc);
        assert_eq!(send_flags(dc, false, seen_by(true, false)), dc);
        assert_eq!(
            send_flags(dc | FI_INJECT, false, seen_by(true, false)),
            dc | FI_INJECT
        );
    }
}
