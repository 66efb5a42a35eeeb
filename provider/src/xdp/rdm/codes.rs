//! The engine's words in libfabric's: completion flags, error codes of
//! failed operations and refused posts, and the completion level a send's
//! flags ask for.

use ofi_xdp_reliability as rel;

use crate::abi::Errno;
use crate::sys::*;

/// The fi_cq(3) flags of an engine completion.
pub(super) fn fabric_flags(f: rel::Flags) -> u64 {
    let mut o = 0;
    for (e, fl) in [
        (rel::Flags::SEND, FI_SEND),
        (rel::Flags::RECV, FI_RECV),
        (rel::Flags::MSG, FI_MSG),
        (rel::Flags::TAGGED, FI_TAGGED),
        (rel::Flags::REMOTE_CQ_DATA, FI_REMOTE_CQ_DATA),
        (rel::Flags::MULTI_RECV, FI_MULTI_RECV),
        (rel::Flags::RMA, FI_RMA),
        (rel::Flags::ATOMIC, FI_ATOMIC),
        (rel::Flags::READ, FI_READ),
        (rel::Flags::WRITE, FI_WRITE),
        (rel::Flags::REMOTE_WRITE, FI_REMOTE_WRITE),
        // PEEK, CLAIM and DISCARD stay inside: fi_cq(3) defines none of them
        // as a completion flag (FI_CLAIM only for FI_BUFFERED_RECV).
    ] {
        if f.contains(e) {
            o |= fl;
        }
    }
    o
}

/// The fi_cq(3) error code of a failed operation.
pub(super) fn op_errno(e: rel::OpError) -> libc::c_int {
    match e {
        rel::OpError::Truncated => FI_ETRUNC,
        rel::OpError::Canceled => FI_ECANCELED,
        rel::OpError::NoMessage => FI_ENOMSG,
        rel::OpError::PeerUnreachable => FI_EHOSTUNREACH,
        rel::OpError::PeerRestarted | rel::OpError::PeerReset | rel::OpError::PeerClosed => {
            libc::ECONNRESET
        }
        // The target refused an RMA or atomic (PROTOCOL.md §8.5).
        rel::OpError::RemoteKey => FI_EKEYREJECTED,
        rel::OpError::RemoteRange | rel::OpError::RemoteAccess => FI_EACCES,
        rel::OpError::RemoteInvalid => FI_EOPNOTSUPP,
    }
}

/// A refused post as fi_msg(3) ERRORS says: -FI_EAGAIN when out of
/// resources, -FI_EINVAL for what can never be sent.
pub(super) fn post_errno(e: rel::PostError) -> Errno {
    match e {
        rel::PostError::QueueFull | rel::PostError::TooManyPeers => Errno::AGAIN,
        rel::PostError::TooLarge | rel::PostError::Invalid => Errno::INVAL,
    }
}

/// The completion level of a send (fi_cq(3), "Completion event semantics").
/// FI_DELIVERY_COMPLETE and FI_TRANSMIT_COMPLETE are honoured as asked;
/// FI_MATCH_COMPLETE (fi_tagged(3): matched or discarded at the target) by
/// delivery complete, which comes after the match.
/// Otherwise — FI_INJECT_COMPLETE or no level, the provider's default — a
/// send of at most `inject_size` bytes is inject complete: it is copied and
/// completes at once, as the libfabric programmer's guide describes ("a
/// provider can meet the requirement for inject complete by copying the
/// application's buffer into a network buffer"), and the engine still
/// retransmits the copy until the peer acknowledges it. Larger sends complete
/// when acknowledged (transmit complete), which is stronger than asked.
pub(super) fn completion_level(flags: u64, len: usize, inject_size: usize) -> rel::CompletionLevel {
    if flags & (FI_DELIVERY_COMPLETE | FI_MATCH_COMPLETE) != 0 {
        rel::CompletionLevel::Delivery
    } else if flags & FI_TRANSMIT_COMPLETE != 0 || len > inject_size {
        rel::CompletionLevel::Transmit
    } else {
        rel::CompletionLevel::Inject
    }
}
