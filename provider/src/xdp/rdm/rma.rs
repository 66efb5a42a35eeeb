//! RMA and atomics on an RDM endpoint (fi_rma(3), fi_atomic(3)): posting an
//! initiator's operation to the engine (PROTOCOL.md §8), and the buffers
//! the engine reaches for them — the operation's own (a write's source
//! through [`super::SendSide`], a read's or fetch's result through
//! [`super::RecvSide`]) and, as target, the domain's registered memory.

use ofi_xdp_reliability as rel;

use super::{Rdm, SendState, post_errno};
use crate::abi::Result;
use crate::datapath::atomics::Form;
use crate::datapath::{
    Completion, Direction, DpCompletion, Iov, Payload, RmaKind, RmaOp, contiguous,
};
use crate::sys::*;

impl Rdm {
    /// Queue `op`: its bytes are read from the application's buffers at
    /// transmission (writes) or copied now (inject writes, atomics'
    /// operands), its result lands in `op.result`; it completes when the
    /// target answers (delivery complete, which satisfies every completion
    /// level the caller may ask for, fi_cq(3)).
    pub(super) fn post_rma_op(&mut self, op: RmaOp) -> Result<()> {
        let now = self.now();
        let dst = self.dest_key(&op.dest)?;
        let token = self.token();
        let (kind, copy) = match op.kind {
            RmaKind::Write => (rel::RmaKind::Write, matches!(op.local, Payload::Inject(_))),
            RmaKind::Read => (rel::RmaKind::Read, false),
            RmaKind::Atomic {
                op: code,
                datatype,
                form,
            } => {
                let result_len = if form == Form::Plain {
                    0
                } else {
                    op.result.iter().map(|(_, l)| *l).sum()
                };
                let kind = rel::RmaKind::Atomic {
                    op: u8::try_from(code).unwrap_or(u8::MAX),
                    datatype: u8::try_from(datatype).unwrap_or(u8::MAX),
                    result_len,
                };
                (kind, true)
            }
        };
        {
            // SAFETY: inside the posting call, the buffers are valid; the
            // engine copies what it keeps now.
            let mut bytes = copy.then(|| unsafe { contiguous(op.local.iov()) }.into_owned());
            if let Some(b) = bytes.as_mut() {
                // Compare operations: the compare values follow the operands.
                // SAFETY: as above.
                b.extend_from_slice(&unsafe { contiguous(&op.compare) });
            }
            let len = match op.kind {
                RmaKind::Read => op.result.iter().map(|(_, l)| *l).sum(),
                _ => op.local.len(),
            };
            let payload = match &bytes {
                Some(b) => rel::Payload::Inject(b),
                None => rel::Payload::Buffer { len },
            };
            let rop = rel::RmaOp {
                token,
                dst,
                kind,
                key: op.key,
                addr: op.addr,
                payload,
                data: op.data,
                level: rel::CompletionLevel::Delivery,
                fence: op.flags & FI_FENCE != 0,
            };
            self.engine.post_rma(now, rop).map_err(post_errno)?;
        }
        // Its context (and a write's source, re-read at retransmission) for
        // the completion — or the error, reported even for an inject.
        let source = match op.local {
            Payload::Iov(iov) if op.kind == RmaKind::Write => iov,
            _ => Iov::empty(),
        };
        self.sends.insert(
            token,
            SendState {
                context: op.context,
                iov: source,
                report: op.report,
                offer: None,
            },
        );
        if !op.result.is_empty() {
            self.results.insert(token, op.result);
        }
        if op.flags & FI_MORE == 0 {
            self.transmit(now);
        }
        Ok(())
    }
}

impl Rdm {
    /// Report the peers' RMA and atomics executed here since the last
    /// pass, one per operation, for the FI_REMOTE_READ / FI_REMOTE_WRITE
    /// counters of the endpoint and of the registration (FI_RMA_EVENT).
    pub(super) fn report_remote(&mut self, out: &mut dyn FnMut(DpCompletion)) {
        for (key, access) in self.remote.drain(..) {
            let mut flags = 0;
            if access.contains(rel::Access::READ) {
                flags |= FI_REMOTE_READ;
            }
            if access.contains(rel::Access::WRITE) {
                flags |= FI_REMOTE_WRITE;
            }
            out(DpCompletion {
                dir: Direction::Remote { key },
                completion: Completion {
                    flags,
                    ..Completion::default()
                },
                src: None,
                report: false,
            });
        }
    }
}
