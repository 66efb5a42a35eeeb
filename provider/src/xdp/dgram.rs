//! FI_EP_DGRAM over the AF_XDP link: each message is one UDP datagram whose
//! payload is exactly the application's bytes. Unreliable (fi_endpoint(3)
//! FI_EP_DGRAM): a datagram with no posted receive is dropped. Sends are
//! copied into a UMEM frame at post time, so they complete at once
//! (FI_INJECT_COMPLETE semantics); the TX kick happens per send unless the
//! application passes FI_MORE. Sends to our own address are looped back
//! here (AF_XDP cannot loop back).

use std::collections::VecDeque;

use ofi_xdp_link::RxAction;

use super::port::{Port, link_err};
use crate::abi::{Errno, Result};
use crate::addr::XdpAddr;
use crate::cq::{Completion, CompletionError};
use crate::datapath::{DataPath, Direction, DpCompletion, OpenArgs, Payload, RxOp, TxOp};
use crate::sys::*;

/// Datagrams taken off the RX ring per progress pass.
const RX_BATCH: usize = 64;

pub struct Dgram {
    port: Port,
    local: XdpAddr,
    recvs: VecDeque<RxOp>,
    loopback: VecDeque<(XdpAddr, Vec<u8>)>,
    done: Vec<DpCompletion>,
    /// Datagrams that arrived with no receive posted (dropped).
    pub dropped: u64,
}

impl Dgram {
    pub fn new(port: Port, args: &OpenArgs) -> Dgram {
        Dgram {
            port,
            local: args.local,
            recvs: VecDeque::new(),
            loopback: VecDeque::new(),
            done: Vec::new(),
            dropped: 0,
        }
    }

    fn tx_done(&mut self, op: &TxOp, len: usize) {
        self.done.push(DpCompletion {
            dir: Direction::Tx,
            completion: Completion {
                op_context: op.context,
                flags: FI_SEND | FI_MSG,
                len,
                ..Default::default()
            },
            src: None,
            report: op.report,
        });
    }

    /// Match one arriving datagram with the oldest posted receive.
    fn deliver(
        recvs: &mut VecDeque<RxOp>,
        done: &mut Vec<DpCompletion>,
        dropped: &mut u64,
        src: XdpAddr,
        data: &[u8],
    ) {
        let Some(r) = recvs.pop_front() else {
            *dropped += 1;
            return;
        };
        let cap: usize = r.iov.iter().map(|(_, l)| *l).sum();
        // SAFETY: the receive's buffers stay valid until its completion.
        let n = unsafe { super::scatter(&r.iov, 0, data) };
        let error = (data.len() > cap).then(|| CompletionError {
            err: FI_ETRUNC,
            prov_errno: FI_ETRUNC,
            olen: data.len() - cap,
            err_data: Vec::new(),
        });
        done.push(DpCompletion {
            dir: Direction::Rx,
            completion: Completion {
                op_context: r.context,
                flags: FI_RECV | FI_MSG,
                len: n,
                buf: r.iov.first().map(|(b, _)| *b).unwrap_or(0),
                error,
                ..Default::default()
            },
            src: Some(src),
            report: r.report,
        });
    }
}

impl DataPath for Dgram {
    fn post_send(&mut self, op: TxOp) -> Result<()> {
        let len = op.payload.len();
        if len > self.port.link.max_payload() {
            return Err(Errno::INVAL);
        }
        if op.dest.socket_addr() == self.local.socket_addr() {
            let bytes = match &op.payload {
                Payload::Owned(b) => b.clone(),
                Payload::Iov(iov) => {
                    let mut b = vec![0u8; len];
                    // SAFETY: the send's buffers are valid for this call.
                    unsafe { super::gather(iov, 0, &mut b) };
                    b
                }
            };
            self.loopback.push_back((self.local, bytes));
            self.tx_done(&op, len);
            return Ok(());
        }
        let to = self.port.link_addr(&op.dest)?;
        let link = &mut self.port.link;
        let frame = match link.alloc_tx() {
            Some(f) => f,
            None => {
                let _ = link.flush();
                link.reap_completions();
                link.alloc_tx().ok_or(Errno::AGAIN)?
            }
        };
        let filled = link.tx_payload_mut(frame).map(|buf| match &op.payload {
            Payload::Owned(b) => buf[..len].copy_from_slice(b),
            // SAFETY: the send's buffers are valid for this call.
            Payload::Iov(iov) => unsafe { super::gather(iov, 0, &mut buf[..len]) },
        });
        let sent = filled.and_then(|()| match link.send(frame, &to, len) {
            Err(ofi_xdp_link::LinkError::TxRingFull) => {
                let _ = link.flush();
                link.reap_completions();
                link.send(frame, &to, len)
            }
            r => r,
        });
        let _ = link.release_tx(frame);
        sent.map_err(|e| link_err("dgram send", e))?;
        if op.flags & FI_MORE == 0 {
            link.flush().map_err(|e| link_err("TX kick", e))?;
        }
        self.tx_done(&op, len);
        Ok(())
    }

    fn post_recv(&mut self, op: RxOp) -> Result<()> {
        if op.multi_recv || op.peek != crate::datapath::Peek::None {
            return Err(Errno::BADFLAGS);
        }
        self.recvs.push_back(op);
        Ok(())
    }

    fn progress(&mut self, out: &mut dyn FnMut(DpCompletion)) {
        let Dgram {
            port,
            recvs,
            done,
            dropped,
            loopback,
            ..
        } = self;
        while !recvs.is_empty() {
            let Some((src, bytes)) = loopback.pop_front() else {
                break;
            };
            Self::deliver(recvs, done, dropped, src, &bytes);
        }
        let mut learnt = Vec::new();
        port.link.recv(RX_BATCH, |d| {
            let src = XdpAddr::from_link(&d.src);
            learnt.push(d.src);
            Self::deliver(recvs, done, dropped, src, d.payload);
            RxAction::Consume
        });
        for a in &learnt {
            port.learn(a);
        }
        let _ = port.link.flush();
        port.link.reap_completions();
        for c in done.drain(..) {
            out(c);
        }
    }

    fn cancel(&mut self, context: usize) -> bool {
        let Some(i) = self.recvs.iter().position(|r| r.context == context) else {
            return false;
        };
        let Some(r) = self.recvs.remove(i) else {
            return false;
        };
        self.done.push(DpCompletion {
            dir: Direction::Rx,
            completion: Completion {
                op_context: r.context,
                flags: FI_RECV | FI_MSG,
                error: Some(CompletionError {
                    err: FI_ECANCELED,
                    prov_errno: FI_ECANCELED,
                    ..Default::default()
                }),
                ..Default::default()
            },
            src: None,
            report: true,
        });
        true
    }

    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.port.link.fd())
    }

    fn set_min_multi_recv(&mut self, _bytes: usize) {}
}
