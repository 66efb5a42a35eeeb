//! The seam between the libfabric objects and the data path (phase 2).
//!
//! An enabled endpoint owns one `Box<dyn DataPath>`, created by [`open`]
//! from `fi_enable`. The endpoint validates every libfabric call (flags,
//! iov limits, addresses resolved through the AV, FI_INJECT marking,
//! completion selection) and hands the data path ready-to-run operations;
//! the data path reports completions back from [`DataPath::progress`],
//! which CQ/counter reads call (manual progress, DESIGN.md "Progress").
//!
//! Threading: the endpoint keeps the data path behind its state `Mutex`, so
//! implementations are single-threaded (`Send`, not `Sync`).
//!
//! Planned implementation: `FI_EP_DGRAM` directly over the AF_XDP link
//! (`ofi-xdp-link`), `FI_EP_RDM` through the reliability engine
//! (`ofi-xdp-reliability`), both steered by the XDP program (`ofi-xdp-bpf`);
//! sends to the endpoint's own address are looped back in the provider
//! (AF_XDP cannot loop back).

use crate::abi::Result;
use crate::addr::XdpAddr;
use crate::cq::Completion;
use crate::ifaces::Iface;
use crate::params::Config;
use crate::sys::fi_addr_t;

/// An operation's buffers as (address, length). Nearly every operation has
/// one, kept inline: no allocation per operation on the latency path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Iov {
    One((usize, usize)),
    Many(Vec<(usize, usize)>),
}

impl Iov {
    /// No buffers (a zero-length operation).
    pub fn empty() -> Iov {
        Iov::Many(Vec::new())
    }
}

impl std::ops::Deref for Iov {
    type Target = [(usize, usize)];
    fn deref(&self) -> &[(usize, usize)] {
        match self {
            Iov::One(b) => std::slice::from_ref(b),
            Iov::Many(v) => v,
        }
    }
}

impl From<Vec<(usize, usize)>> for Iov {
    fn from(v: Vec<(usize, usize)>) -> Iov {
        match v[..] {
            [b] => Iov::One(b),
            _ => Iov::Many(v),
        }
    }
}

/// Where the bytes of an operation live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    /// The application's buffers as (address, length); valid until the
    /// operation's completion is reported.
    Iov(Iov),
    /// FI_INJECT, fi_inject*: the application's buffers, but valid only until
    /// the posting call returns (the caller may reuse them at once,
    /// fi_msg(3)). The data path copies what it keeps before returning.
    Inject(Iov),
}

impl Payload {
    /// The buffers as (address, length).
    pub fn iov(&self) -> &[(usize, usize)] {
        match self {
            Payload::Iov(v) | Payload::Inject(v) => v,
        }
    }
    pub fn len(&self) -> usize {
        self.iov().iter().map(|(_, l)| *l).sum()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Copy an operation's buffers. Only for the application's iov inside the
/// posting call, while the caller guarantees its buffers (fi_msg(3)).
pub fn gather_iov(iov: &[(usize, usize)]) -> Vec<u8> {
    let mut b = vec![0u8; iov.iter().map(|(_, l)| *l).sum()];
    // SAFETY: the caller's buffers hold their lengths until the posting
    // call returns (fi_msg(3)); we are inside that call.
    unsafe { crate::xdp::gather(iov, 0, &mut b) };
    b
}

/// The bytes of `iov` as one slice: the application's buffer itself when it
/// is in one piece (no copy: the caller copies what it keeps), else a
/// gathered copy.
///
/// # Safety
/// Only inside the posting call, while the caller guarantees its buffers
/// (fi_msg(3)); the slice must not outlive that call.
pub unsafe fn contiguous(iov: &[(usize, usize)]) -> std::borrow::Cow<'_, [u8]> {
    match iov {
        [] => std::borrow::Cow::Borrowed(&[]),
        // SAFETY: the caller guarantees the buffer for this call (above);
        // the endpoint checked that a non-empty buffer is not NULL.
        [(addr, len)] if *addr != 0 => std::borrow::Cow::Borrowed(unsafe {
            std::slice::from_raw_parts(*addr as *const u8, *len)
        }),
        _ => std::borrow::Cow::Owned(gather_iov(iov)),
    }
}

/// A validated transmit operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxOp {
    pub dest: XdpAddr,
    pub dest_fi_addr: fi_addr_t,
    pub payload: Payload,
    /// `Some` for tagged sends.
    pub tag: Option<u64>,
    /// Remote CQ data (FI_REMOTE_CQ_DATA), `Some` for senddata/injectdata.
    pub data: Option<u64>,
    pub context: usize,
    /// Effective operation flags (FI_INJECT, FI_*_COMPLETE, FI_MORE, …).
    pub flags: u64,
    /// Report a successful completion (false with FI_SELECTIVE_COMPLETION
    /// and no FI_COMPLETION, or for fi_inject). Errors are always reported.
    pub report: bool,
}

/// FI_PEEK / FI_CLAIM / FI_DISCARD on a tagged receive (fi_tagged(3)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Peek {
    /// An ordinary receive.
    #[default]
    None,
    /// FI_PEEK: report whether a matching message has arrived (a completion
    /// describing it, or an error completion with FI_ENOMSG).
    Peek,
    /// FI_PEEK | FI_CLAIM: as Peek, and reserve the message for a later
    /// FI_CLAIM receive with the same context.
    PeekClaim,
    /// FI_PEEK | FI_DISCARD: as Peek, and drop the message.
    PeekDiscard,
    /// FI_CLAIM: receive the message claimed with this context.
    Claim,
    /// FI_CLAIM | FI_DISCARD: drop the message claimed with this context.
    ClaimDiscard,
}

/// A validated receive operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RxOp {
    /// `Some` for directed receives (FI_DIRECTED_RECV).
    pub src: Option<(XdpAddr, fi_addr_t)>,
    pub iov: Iov,
    /// `Some((tag, ignore))` for tagged receives.
    pub tag: Option<(u64, u64)>,
    pub context: usize,
    pub flags: u64,
    /// FI_MULTI_RECV buffer: keep receiving into it until fewer than
    /// `min_multi_recv` bytes remain, then report FI_MULTI_RECV.
    pub multi_recv: bool,
    pub report: bool,
    pub peek: Peek,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Tx,
    Rx,
}

/// A completion produced by the data path. `completion.src` is filled in
/// by the endpoint from `src` (AV reverse lookup for FI_SOURCE).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DpCompletion {
    pub dir: Direction,
    pub completion: Completion,
    pub src: Option<XdpAddr>,
    /// Whether the operation asked for a success completion (copied from
    /// `TxOp::report` / `RxOp::report`); errors are delivered regardless.
    pub report: bool,
}

/// What [`open`] gets from the endpoint.
#[derive(Debug, Clone)]
pub struct OpenArgs {
    pub iface: Iface,
    pub ep_type: libc::c_int,
    /// Our address (IP, reserved UDP port, MAC, incarnation).
    pub local: XdpAddr,
    pub cfg: Config,
    pub caps: u64,
    pub min_multi_recv: usize,
    /// The kernel UDP socket that reserved `local`'s port (`None`: the data
    /// path binds one itself).
    pub socket: Option<std::sync::Arc<std::net::UdpSocket>>,
}

/// A running data path: one AF_XDP socket plus protocol state.
pub trait DataPath: Send {
    /// Queue a send; -FI_EAGAIN when out of resources (fi_msg(3) ERRORS).
    fn post_send(&mut self, op: TxOp) -> Result<()>;
    /// Queue a receive; -FI_EAGAIN when out of resources.
    fn post_recv(&mut self, op: RxOp) -> Result<()>;
    /// One progress pass (drain RX, run timers, flush TX, reap TX
    /// completions, refill the fill ring); report completions through `out`.
    fn progress(&mut self, out: &mut dyn FnMut(DpCompletion));
    /// fi_cancel: if a queued receive with this context exists, remove it
    /// and report it at the next progress as an error completion with
    /// FI_ECANCELED; return whether one was found.
    fn cancel(&mut self, context: usize) -> bool;
    /// FI_OPT_MIN_MULTI_RECV changed.
    fn set_min_multi_recv(&mut self, bytes: usize);
    /// A file descriptor that becomes readable when datagrams arrive (on
    /// the AF_XDP or the kernel UDP socket), for CQs with FI_WAIT_FD. Ask
    /// only for such CQs: it may be made on demand, and watching the socket
    /// costs every packet a wake-up.
    fn wait_fd(&self) -> Result<Option<std::os::fd::RawFd>> {
        Ok(None)
    }
    /// For fi_trywait (fi_poll(3)): after a progress pass, may the
    /// application block on the wait fd, and until when at the latest?
    fn wait_state(&self) -> WaitState {
        WaitState::Idle { timer: None }
    }
}

/// What a data path needs before its application may block (fi_trywait).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitState {
    /// Progress has work now (datagrams waiting for the transmit ring).
    Busy,
    /// Nothing until a datagram arrives or, if `timer` is set, that much
    /// time passes (a retransmission or delayed ack falls due: with manual
    /// progress only the application's next call runs it, and the peer may
    /// be waiting for it).
    Idle { timer: Option<std::time::Duration> },
}

/// Start the data path for an endpoint being enabled: an AF_XDP socket
/// on the endpoint's interface and queue (or, when that is taken, the
/// kernel UDP socket alone), the steering program, and (RDM) the
/// reliability engine. See [`crate::xdp`].
pub fn open(args: &OpenArgs) -> Result<Box<dyn DataPath>> {
    crate::xdp::open(args)
}
