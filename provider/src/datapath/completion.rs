//! What the data path reports: one [`DpCompletion`] per finished operation,
//! carrying the [`Completion`] a CQ stores (fi_cq(3) entry fields, and the
//! `fi_cq_err_entry` fields of a failed one).

use libc::c_int;

use crate::addr::XdpAddr;
use crate::sys::fi_addr_t;

/// Error details of a failed operation (fi_cq_err_entry).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompletionError {
    /// Positive fabric errno.
    pub err: c_int,
    pub prov_errno: c_int,
    /// Bytes that did not fit the receive buffer (FI_ETRUNC).
    pub olen: usize,
    pub err_data: Vec<u8>,
}

/// One completion as the data path reports it and a CQ queues it. Pointers
/// are stored as integers: they are the application's opaque values, never
/// dereferenced.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Completion {
    pub op_context: usize,
    pub flags: u64,
    pub len: usize,
    pub buf: usize,
    pub data: u64,
    pub tag: u64,
    /// Source fi_addr for fi_cq_readfrom (FI_ADDR_NOTAVAIL if unknown); the
    /// endpoint fills it in from [`DpCompletion::src`].
    pub src: fi_addr_t,
    pub error: Option<CompletionError>,
}

/// Which side of the endpoint an operation belongs to: its CQ and counter.
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
