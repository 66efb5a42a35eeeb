//! The operations the endpoint hands the data path, already validated
//! (fi_msg(3), fi_tagged(3)): flags checked, addresses resolved through the
//! AV, injection and completion reporting decided.

use super::iov::{Iov, Payload};
use crate::addr::XdpAddr;
use crate::sys::fi_addr_t;

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
