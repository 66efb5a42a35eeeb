//! Connections across the seam (connected endpoints, fi_cm(3)): the
//! request a listening endpoint hands to the endpoint that accepts it, and
//! what a connected endpoint's data path reports about its connection.

use libc::c_int;

use crate::addr::XdpAddr;

/// A connection request as a listener received it (fi_eq(3) FI_CONNREQ),
/// carried to the accepting endpoint by `fi_info::handle`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnRequest {
    /// The connecting endpoint: its address, MAC and incarnation as stated.
    pub from: XdpAddr,
    /// Its connection id (reliability/PROTOCOL.md §9), answered by fi_accept.
    pub id: u32,
    /// fi_connect's data.
    pub param: Vec<u8>,
}

/// What happened to a connected endpoint's connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConnEvent {
    /// FI_CONNECTED: data now goes to `peer`; `param` is the accepting
    /// side's data (empty on the accepting side).
    Connected { peer: XdpAddr, param: Vec<u8> },
    /// fi_connect or fi_accept failed: an EQ error entry with positive
    /// fabric errno `err` (FI_ECONNREFUSED with fi_reject's data, or
    /// FI_ETIMEDOUT).
    Failed { err: c_int, param: Vec<u8> },
    /// FI_SHUTDOWN: the connection is over.
    Shutdown,
}
