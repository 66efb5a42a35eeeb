//! Public types of remote memory access (fi_rma(3), fi_atomic(3)): the
//! operations an initiator posts ([`RmaOp`]), the rights a target checks
//! ([`Access`]) and why it refuses ([`RmaStatus`]). Target memory is the
//! caller's: the engine reaches it through the RMA methods of
//! [`crate::RecvBuffers`] and [`crate::SendBuffers`], called from its
//! progress, so an operation runs at the target when the target's
//! application drives progress (PROTOCOL.md §8).

use crate::api::{CompletionLevel, Payload};
use crate::wire::status;

pub use crate::wire::MAX_ATOMIC_BYTES;

/// What an RMA operation does at the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RmaKind {
    /// fi_write and friends: the payload goes to `[addr, addr + len)`.
    Write,
    /// fi_read and friends: `len` bytes come back, delivered through
    /// [`crate::RecvBuffers::rma_result`] with the op's token.
    Read,
    /// fi_atomic, fi_fetch_atomic, fi_compare_atomic: `op` and `datatype`
    /// are the caller's codes (`enum fi_op`, `enum fi_datatype`), passed to
    /// the target's [`crate::RecvBuffers::rma_atomic`] untouched; the
    /// payload holds the operands (then, for compare operations, the
    /// compare values); `result_len` bytes of old values come back through
    /// [`crate::RecvBuffers::rma_result`] (0: no fetch).
    Atomic {
        op: u8,
        datatype: u8,
        result_len: usize,
    },
}

/// An RMA or atomic operation to post with [`crate::Engine::post_rma`].
#[derive(Clone, Copy, Debug)]
pub struct RmaOp<'a, P> {
    /// Caller's identifier, unique among its outstanding sends *and* RMA
    /// operations (one namespace: [`crate::SendBuffers::read`] serves both).
    pub token: u64,
    /// Target peer.
    pub dst: P,
    pub kind: RmaKind,
    /// Target registration key.
    pub key: u64,
    /// Target address, as the target's registration mode names it.
    pub addr: u64,
    /// Write: the bytes to write (a caller buffer read with the token, or a
    /// copy); atomics: always a copy of the operands; read: `Buffer { len }`
    /// with the length to read.
    pub payload: Payload<'a>,
    /// Remote CQ data for the target (fi_writedata; writes only).
    pub data: Option<u64>,
    /// Every RMA operation completes when the target's response arrives
    /// (the target executed it: delivery complete, which satisfies every
    /// level fi_cq(3) defines); `Inject` with a copied payload only lets
    /// the caller reuse its buffer at once.
    pub level: CompletionLevel,
    /// FI_FENCE (fi_rma(3), fi_atomic(3)): the operation starts only once
    /// every operation posted before it to the same peer has completed —
    /// RMA and atomics answered, messages acknowledged (PROTOCOL.md §8.6).
    /// Operations posted after it go after it, as always. Messages take
    /// the same flag ([`crate::SendOp::fence`]).
    pub fence: bool,
}

/// Access rights an operation needs of the target's registration
/// (`FI_REMOTE_READ`, `FI_REMOTE_WRITE`); an atomic with fetch needs both.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Access(pub u8);

impl Access {
    pub const READ: Access = Access(1);
    pub const WRITE: Access = Access(2);

    /// Whether all rights in `o` are included.
    pub fn contains(self, o: Access) -> bool {
        self.0 & o.0 == o.0
    }
}

impl core::ops::BitOr for Access {
    type Output = Access;
    fn bitor(self, o: Access) -> Access {
        Access(self.0 | o.0)
    }
}

/// Why a target refused an operation (the initiator's completion error;
/// the provider maps it to an errno). The target's memory is untouched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RmaStatus {
    /// No registration has this key.
    UnknownKey,
    /// The range is not inside the registration.
    OutOfRange,
    /// The registration does not allow the access.
    NoAccess,
    /// The target cannot execute it (an atomic operation or datatype it
    /// does not know, lengths that do not fit them).
    Invalid,
}

impl RmaStatus {
    /// The wire's status byte (PROTOCOL.md §8.5).
    pub(crate) fn code(r: Result<(), RmaStatus>) -> u8 {
        match r {
            Ok(()) => status::OK,
            Err(RmaStatus::UnknownKey) => status::KEY,
            Err(RmaStatus::OutOfRange) => status::RANGE,
            Err(RmaStatus::NoAccess) => status::ACCESS,
            Err(RmaStatus::Invalid) => status::INVALID,
        }
    }

    /// The status byte of a response, read back.
    pub(crate) fn of_code(code: u8) -> Result<(), RmaStatus> {
        match code {
            status::OK => Ok(()),
            status::KEY => Err(RmaStatus::UnknownKey),
            status::RANGE => Err(RmaStatus::OutOfRange),
            status::ACCESS => Err(RmaStatus::NoAccess),
            _ => Err(RmaStatus::Invalid),
        }
    }
}
