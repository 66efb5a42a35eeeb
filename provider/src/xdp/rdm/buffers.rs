//! The buffers the engine reaches by token while it runs (PROTOCOL.md §6,
//! §8): an RDM endpoint's sends and receives (the application's iovs,
//! copied once per direction to and from network frames), its RMA results
//! (a read's data, an atomic's fetched values) and, as RMA target, the
//! domain's registered memory and the remote accesses executed in a pass.

use std::collections::HashMap;

use ofi_xdp_reliability as rel;

use super::cma::Cma;
use crate::datapath::offered::Offered;
use crate::datapath::{Iov, Registry, gather, scatter};

pub(super) struct SendState {
    pub(super) context: usize,
    pub(super) iov: Iov,
    pub(super) report: bool,
    /// A rendezvous whose receiver is on this host: its request offers it
    /// for pulling (PROTOCOL.md §6.7); counted while the send is out.
    pub(super) offer: Option<Offered>,
}

pub(super) struct RecvState {
    pub(super) context: usize,
    pub(super) iov: Iov,
    pub(super) report: bool,
    pub(super) multi: bool,
}

/// Operations by token. Tokens are ours (a counter), so the fast hash.
pub(super) type TokenMap<V> = HashMap<u64, V, rel::FxBuild>;

/// Send buffers by token, (as RMA target) the registered memory a read's
/// response is copied from, and what makes pull offers (off: `None`).
pub(super) struct SendSide<'a>(
    pub(super) &'a TokenMap<SendState>,
    pub(super) &'a Registry,
    pub(super) Option<&'a Cma>,
);
/// Receive buffers by token, RMA results by token (reads, fetches), and
/// (as RMA target) the registered memory writes and atomics go to.
/// Remote accesses executed in the pass (key, access) are noted in the
/// fourth: FI_RMA_EVENT counters count them after it. The fifth pulls
/// offered messages (off: `None`).
pub(super) struct RecvSide<'a>(
    pub(super) &'a TokenMap<RecvState>,
    pub(super) &'a TokenMap<Iov>,
    pub(super) &'a Registry,
    pub(super) &'a mut Vec<(u64, rel::Access)>,
    pub(super) Option<&'a Cma>,
);

impl rel::SendBuffers for SendSide<'_> {
    fn read(&mut self, token: u64, offset: usize, dst: &mut [u8]) {
        match self.0.get(&token) {
            // SAFETY: the send's buffers stay valid until its completion,
            // which the engine reports only after its last read.
            Some(s) => unsafe { gather(&s.iov, offset, dst) },
            None => dst.fill(0),
        }
    }

    fn rma_read(
        &mut self,
        key: u64,
        addr: u64,
        dst: &mut [u8],
    ) -> std::result::Result<(), rel::RmaStatus> {
        self.1.read(key, addr, dst)
    }

    fn pull_offer(&mut self, token: u64, dst: &mut [u8]) -> usize {
        match (self.2, self.0.get(&token)) {
            (Some(cma), Some(s)) if s.offer.is_some() => cma.offer(&s.iov, dst),
            _ => 0,
        }
    }
}

impl rel::RecvBuffers for RecvSide<'_> {
    fn write(&mut self, token: u64, offset: usize, src: &[u8]) {
        if let Some(r) = self.0.get(&token) {
            // SAFETY: the receive's buffers stay valid until its completion.
            unsafe { scatter(&r.iov, offset, src) };
        }
    }

    fn rma_check(
        &mut self,
        key: u64,
        addr: u64,
        len: u64,
        access: rel::Access,
    ) -> std::result::Result<(), rel::RmaStatus> {
        self.2.admits(key, addr, len, access)
    }

    fn rma_write(
        &mut self,
        key: u64,
        addr: u64,
        src: &[u8],
    ) -> std::result::Result<(), rel::RmaStatus> {
        self.2.write(key, addr, src)
    }

    fn rma_atomic(
        &mut self,
        key: u64,
        addr: u64,
        op: u8,
        datatype: u8,
        operands: &[u8],
        result: &mut [u8],
    ) -> std::result::Result<(), rel::RmaStatus> {
        let (op, datatype) = (libc::c_int::from(op), libc::c_int::from(datatype));
        self.2.atomic(key, addr, op, datatype, operands, result)
    }

    fn rma_remote_done(&mut self, key: u64, access: rel::Access) {
        self.3.push((key, access));
    }

    fn rma_result(&mut self, token: u64, offset: usize, src: &[u8]) {
        if let Some(iov) = self.1.get(&token) {
            // SAFETY: a read's or fetch's result buffers stay valid until
            // its completion (fi_rma(3), fi_atomic(3)); the engine writes
            // only inside the length posted.
            unsafe { scatter(iov, offset, src) };
        }
    }

    fn pull(&mut self, token: u64, offset: usize, len: usize, offer: &[u8]) -> bool {
        match (self.4, self.0.get(&token)) {
            (Some(cma), Some(r)) => cma.pull(&r.iov, offset, len, offer),
            _ => false,
        }
    }
}
