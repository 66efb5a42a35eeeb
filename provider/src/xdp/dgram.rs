//! FI_EP_DGRAM over the endpoint's port: each message is one UDP datagram whose
//! payload is exactly the application's bytes. Unreliable (fi_endpoint(3)
//! FI_EP_DGRAM): a datagram with no posted receive is dropped. Sends are
//! copied into a UMEM frame at post time, so they complete at once
//! (FI_INJECT_COMPLETE semantics); the TX kick happens per send unless the
//! application passes FI_MORE. Sends to our own address are looped back
//! here (AF_XDP cannot loop back); peers on this host are reached through
//! the port's kernel UDP socket.

use std::collections::VecDeque;

use super::port::{Port, link_err};
use super::published::{self, Published};
use crate::abi::{Errno, Result};
use crate::addr::XdpAddr;
use crate::datapath::{
    Completion, CompletionError, DataPath, Direction, DpCompletion, OpenArgs, Peek, RxOp, TxOp,
    gather, gather_iov, scatter,
};
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
    /// The statistics file `ofi-xdp status` reads.
    published: Published,
}

impl Dgram {
    pub fn new(port: Port, args: &OpenArgs) -> Dgram {
        let published = Published::open(
            args,
            "dgram",
            port.identity(),
            &published::DGRAM_COUNTERS,
            &[],
        );
        Dgram {
            published,
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
        let n = unsafe { scatter(&r.iov, 0, data) };
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
        if len > self.port.max_payload() {
            return Err(Errno::INVAL);
        }
        if op.dest.socket_addr() == self.local.socket_addr() {
            let bytes = gather_iov(op.payload.iov());
            self.loopback.push_back((self.local, bytes));
            self.tx_done(&op, len);
            return Ok(());
        }
        let mut to = op.dest;
        to.mac = self.port.resolve(&op.dest)?;
        let port = &mut self.port;
        let buf = match port.alloc_tx() {
            Some(b) => b,
            None => {
                let _ = port.flush();
                port.alloc_tx().ok_or(Errno::AGAIN)?
            }
        };
        let Some(dst) = port.tx_payload_mut(buf) else {
            port.release_tx(buf);
            return Err(Errno::AGAIN);
        };
        // SAFETY: the send's buffers are valid for this call.
        unsafe { gather(op.payload.iov(), 0, &mut dst[..len]) };
        port.send(buf, &to, len)
            .map_err(|e| link_err("dgram send", e))?;
        if op.flags & FI_MORE == 0 {
            port.flush().map_err(|e| link_err("TX kick", e))?;
        }
        self.tx_done(&op, len);
        Ok(())
    }

    fn post_recv(&mut self, op: RxOp) -> Result<()> {
        if op.multi_recv || op.peek != Peek::None {
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
        port.recv(RX_BATCH, |src, pieces| {
            learnt.push(src);
            match pieces {
                [payload] => Self::deliver(recvs, done, dropped, src, payload),
                // Not asked for on DGRAM ports (LinkConfig::rx_pieces).
                _ => Self::deliver(recvs, done, dropped, src, &pieces.concat()),
            }
        });
        for a in &learnt {
            port.learn(a);
        }
        let _ = port.flush();
        for c in done.drain(..) {
            out(c);
        }
        if self.published.due(super::rdm::monotonic_ns()) {
            let link = self.port.link_stats();
            self.published.set_all(published::dgram_values(
                self.dropped,
                link.as_ref(),
                self.port.path_counts(),
            ));
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

    fn wait_fd(&self) -> Result<Option<std::os::fd::RawFd>> {
        self.port.wait_fd().map(Some)
    }

    fn set_min_multi_recv(&mut self, _bytes: usize) {}
}
