//! The RMA and atomic operations the endpoint hands the data path, already
//! validated (fi_rma(3), fi_atomic(3)): flags checked, the target resolved
//! through the AV, the atomic's (operation, datatype) offered and its
//! lengths within one datagram.

use libc::c_int;

use super::atomics::Form;
use super::iov::{Iov, Payload};
use crate::addr::XdpAddr;

/// What the operation does at the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RmaKind {
    /// fi_write, fi_writedata, fi_inject_write …: `local` goes to the target.
    Write,
    /// fi_read …: the target's bytes come into `result`.
    Read,
    /// fi_atomic, fi_fetch_atomic, fi_compare_atomic: `op` on `datatype`.
    Atomic {
        op: c_int,
        datatype: c_int,
        form: Form,
    },
}

/// A validated RMA or atomic operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RmaOp {
    pub dest: XdpAddr,
    pub kind: RmaKind,
    /// Write: the source (copied now for inject); atomics: the operands
    /// (always copied at post time: at most one datagram); read: empty.
    pub local: Payload,
    /// Compare atomics: the compare values.
    pub compare: Iov,
    /// Read: where the data goes; fetch and compare atomics: where the old
    /// values go. Valid until the operation completes.
    pub result: Iov,
    /// Target registration key and address (as its mr_mode names it).
    pub key: u64,
    pub addr: u64,
    /// Remote CQ data (fi_writedata, FI_REMOTE_CQ_DATA).
    pub data: Option<u64>,
    pub context: usize,
    pub flags: u64,
    /// Report a successful completion (as [`super::TxOp::report`]).
    pub report: bool,
}
