//! Where the bytes of a message being received go: a posted receive (at an
//! offset, for multi-recv), the unexpected store, or nowhere (discarded).

use super::posted::RecvId;
use super::unexpected::UnexpId;

/// Where a message's bytes go. Opaque outside the matcher: a session keeps
/// it with the message's [`super::super::seam::Incoming`] record and hands
/// it back with each segment.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Placement(pub(super) Dest);

#[derive(Clone, Copy, Debug)]
pub(super) enum Dest {
    /// Into posted receive `recv`, from `base` in its buffer, at most `cap` bytes.
    Posted {
        recv: RecvId,
        base: usize,
        cap: usize,
    },
    /// Into the buffer of unexpected message `UnexpId`.
    Unexpected(UnexpId),
    /// Nowhere: the message was discarded (FI_DISCARD) while still arriving.
    Drop,
}
