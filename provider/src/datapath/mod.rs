//! The seam between the libfabric objects and the data path.
//!
//! Above it, the objects (`ep`, `cq`, `cntr`, …) validate every libfabric
//! call — flags, iov limits, addresses resolved through the AV, FI_INJECT
//! marking, completion selection — and hand the data path ready-to-run
//! operations ([`TxOp`], [`RxOp`]). Below it, an implementation of
//! [`DataPath`] (the AF_XDP one is `crate::xdp`, which the endpoint opens
//! in `fi_enable`) moves the bytes ([`iov`]: one copy per direction) and
//! reports a [`DpCompletion`] per finished operation from
//! [`DataPath::progress`], which CQ and counter reads call (manual progress,
//! fi_domain(3) FI_PROGRESS_MANUAL).
//!
//! This module owns every type that crosses the seam, so the data path
//! needs nothing from the objects above it: it learns what it may not
//! exceed (inject size, its socket, its configuration) from [`OpenArgs`].
//!
//! Threading: the endpoint keeps its data path behind its state `Mutex`, so
//! implementations are single-threaded (`Send`, not `Sync`).

pub mod atomics;
mod completion;
mod conn;
pub mod iov;
pub mod mappings;
pub mod memory;
pub mod offered;
mod op;
mod rma;

pub use completion::{Completion, CompletionError, Direction, DpCompletion};
pub use conn::{ConnEvent, ConnRequest};
pub use iov::{Iov, Payload, contiguous, gather, gather_iov, scatter};
pub use memory::Registry;
pub use op::{Peek, RxOp, TxOp};
pub use rma::{RmaKind, RmaOp};

use crate::abi::Result;
use crate::addr::XdpAddr;
use crate::ifaces::Iface;
use crate::params::Config;

/// What a data path is opened with, from the endpoint being enabled.
#[derive(Debug, Clone)]
pub struct OpenArgs {
    pub iface: Iface,
    pub ep_type: libc::c_int,
    /// Our address (IP, reserved UDP port, MAC, incarnation).
    pub local: XdpAddr,
    pub cfg: Config,
    /// Largest payload of a send that may complete as soon as it is copied
    /// (`tx_attr->inject_size`: one datagram's payload on this interface).
    pub inject_size: usize,
    /// Depth of the receive queue (`rx_attr->size`): how many datagrams a
    /// DGRAM endpoint keeps for receives not posted yet.
    pub rx_size: usize,
    pub min_multi_recv: usize,
    /// The kernel UDP socket that reserved `local`'s port (`None`: the data
    /// path binds one itself).
    pub socket: Option<std::sync::Arc<std::net::UdpSocket>>,
    /// The domain's registered memory: what RMA and atomics from peers
    /// may reach (fi_mr(3)).
    pub memory: std::sync::Arc<Registry>,
    /// FI_EP_DGRAM with our header (remote CQ data) instead of plain UDP.
    pub dgram_header: bool,
    /// FI_MSG_PREFIX: bytes at the start of every send and receive buffer
    /// that are the provider's (the DGRAM header goes there); 0 without.
    pub msg_prefix: usize,
    /// The job key of packet authentication (RDM), if the job has one.
    pub auth_key: Option<crate::auth_key::JobKey>,
}

impl OpenArgs {
    /// Whether the endpoint runs the reliability engine (FI_EP_RDM, and
    /// FI_EP_MSG, whose connection is an engine session to one peer).
    pub fn reliable(&self) -> bool {
        self.ep_type == crate::sys::FI_EP_RDM || self.ep_type == crate::sys::FI_EP_MSG
    }
}

/// A running data path: one AF_XDP socket plus protocol state.
pub trait DataPath: Send {
    /// Queue a send; -FI_EAGAIN when out of resources (fi_msg(3) ERRORS).
    fn post_send(&mut self, op: TxOp) -> Result<()>;
    /// Queue a receive; -FI_EAGAIN when out of resources.
    fn post_recv(&mut self, op: RxOp) -> Result<()>;
    /// Queue an RMA or atomic operation (fi_rma(3), fi_atomic(3));
    /// -FI_EAGAIN when out of resources. Data paths without RMA: -FI_ENOSYS.
    fn post_rma(&mut self, op: RmaOp) -> Result<()> {
        let _ = op;
        Err(crate::abi::Errno::NOSYS)
    }
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
    /// The fds that become readable when a datagram arrives for this data
    /// path (its AF_XDP socket, kernel UDP socket, shared-memory doorbell),
    /// appended to `out`, for a blocking read that polls them only while it
    /// sleeps (no epoll: a socket in an epoll set costs every packet a
    /// wake-up). False when it cannot name them: then the reader must wake
    /// periodically to run passes.
    fn arrival_fds(&self, out: &mut Vec<std::os::fd::RawFd>) -> bool {
        let _ = out;
        false
    }
    /// For fi_trywait (fi_poll(3)): after a progress pass, may the
    /// application block on the wait fd, and until when at the latest?
    fn wait_state(&self) -> WaitState {
        WaitState::Idle { timer: None }
    }
    /// fi_connect (connected endpoints only): ask the listener at `to` for
    /// a connection, with `param` (at most the CM data size).
    fn connect(&mut self, _to: XdpAddr, _param: &[u8]) -> Result<()> {
        Err(crate::abi::Errno::NOSYS)
    }
    /// fi_accept of `req` (connected endpoints only).
    fn accept(&mut self, _req: &ConnRequest, _param: &[u8]) -> Result<()> {
        Err(crate::abi::Errno::NOSYS)
    }
    /// fi_shutdown: end the connection; posted receives complete through
    /// `out` with FI_ECANCELED before this returns (fi_cm(3)).
    fn shutdown(&mut self, _out: &mut dyn FnMut(DpCompletion)) -> Result<()> {
        Err(crate::abi::Errno::NOSYS)
    }
    /// The next event of the connection, after a progress pass or a call
    /// above.
    fn poll_conn(&mut self) -> Option<ConnEvent> {
        None
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

impl WaitState {
    /// What several data paths need together: `Busy` if one is, else the
    /// soonest of their timers (stops at the first `Busy`).
    pub fn all(states: impl IntoIterator<Item = WaitState>) -> WaitState {
        let mut soonest: Option<std::time::Duration> = None;
        for s in states {
            match s {
                WaitState::Busy => return WaitState::Busy,
                WaitState::Idle { timer: Some(d) } => {
                    soonest = Some(soonest.map_or(d, |s| s.min(d)));
                }
                WaitState::Idle { timer: None } => {}
            }
        }
        WaitState::Idle { timer: soonest }
    }
}
