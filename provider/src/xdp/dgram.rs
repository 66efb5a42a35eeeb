//! FI_EP_DGRAM over the endpoint's port: each message is one UDP datagram whose
//! payload is exactly the application's bytes. Unreliable (fi_endpoint(3)
//! FI_EP_DGRAM), but not needlessly so: a datagram that arrives before its
//! receive is posted waits, copied, in a bounded backlog (as one waits in a
//! kernel UDP socket's receive buffer, which `udp`-provider applications
//! count on: fabtests' fi_ubertest answers a flood's end marker once and
//! hangs if that answer is lost), and is dropped only when the backlog is
//! full (the receive queue's depth, `rx_attr->size` through [`OpenArgs`], or 1 MiB:
//! `BACKLOG_BYTES`). Sends are
//! copied into a UMEM frame at post time, so they complete at once
//! (FI_INJECT_COMPLETE semantics); the TX kick happens per send unless the
//! application passes FI_MORE. Sends to our own address are looped back
//! here (AF_XDP cannot loop back); peers on this host are reached through
//! the port's kernel UDP socket.
//!
//! The DGRAM entry with our header (PROTO_XDP_DGRAM) puts 16 bytes before
//! the application's: magic "XDPG", version 1, flags (bit 0: remote CQ
//! data), two zero bytes, the data (u64, little-endian). Datagrams
//! without it are dropped there. With FI_MSG_PREFIX the header travels in
//! the application's prefix space: received, the whole datagram is placed
//! at the start of the buffer, header in the prefix, and the completion's
//! length counts the prefix (fi_getinfo(3): a message without application
//! data is then one of at most `msg_prefix_size` bytes).

use std::collections::VecDeque;

use super::pass_clock::PassClock;
use super::port::{Port, link_err};
use super::published::{self, Published};
use crate::abi::{Errno, Result};
use crate::addr::XdpAddr;
use crate::datapath::{
    Completion, CompletionError, DataPath, Direction, DpCompletion, OpenArgs, Peek, RxOp, TxOp,
    gather, scatter,
};
use crate::sys::*;

/// Datagrams taken off the RX ring per progress pass.
const RX_BATCH: usize = 64;

/// Bytes they may hold in all: a few times a kernel UDP socket's default
/// receive buffer (net.core.rmem_default, 208 KiB), which counts per
/// datagram more than its payload.
const BACKLOG_BYTES: usize = 1 << 20;

/// The header of PROTO_XDP_DGRAM (module docs).
const HDR_LEN: usize = 16;
const HDR_MAGIC: [u8; 4] = *b"XDPG";
const HDR_VERSION: u8 = 1;
const HDR_CQ_DATA: u8 = 1;

fn encode_header(b: &mut [u8], data: Option<u64>) {
    b[0..4].copy_from_slice(&HDR_MAGIC);
    b[4] = HDR_VERSION;
    b[5] = if data.is_some() { HDR_CQ_DATA } else { 0 };
    b[6..8].fill(0);
    b[8..16].copy_from_slice(&data.unwrap_or(0).to_le_bytes());
}

/// The remote CQ data a header carries (`Some(None)`: none); `None` when
/// the datagram does not start with our header.
fn decode_header(b: &[u8]) -> Option<Option<u64>> {
    if b.len() < HDR_LEN || b[0..4] != HDR_MAGIC || b[4] != HDR_VERSION || b[5] & !HDR_CQ_DATA != 0
    {
        return None;
    }
    let mut d = [0u8; 8];
    d.copy_from_slice(&b[8..16]);
    Some((b[5] & HDR_CQ_DATA != 0).then_some(u64::from_le_bytes(d)))
}

/// How an endpoint's datagrams carry its messages.
#[derive(Clone, Copy, Debug)]
struct Framing {
    /// Our header first (PROTO_XDP_DGRAM).
    header: bool,
    /// FI_MSG_PREFIX bytes at the start of every buffer (0 or HDR_LEN).
    prefix: usize,
}

pub struct Dgram {
    port: Port,
    framing: Framing,
    local: XdpAddr,
    recvs: VecDeque<RxOp>,
    /// Datagrams that came before a receive for them, oldest first.
    backlog: Backlog,
    done: Vec<DpCompletion>,
    /// Datagrams dropped: the backlog was full, or (with our header) the
    /// header was not there.
    pub dropped: u64,
    /// The statistics file `ofi-xdp status` reads.
    published: Published,
    /// When its figures are due (a pass reads no other time).
    clock: PassClock,
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
            clock: PassClock::new(),
            port,
            framing: Framing {
                header: args.dgram_header,
                prefix: args.msg_prefix.min(HDR_LEN),
            },
            local: args.local,
            recvs: VecDeque::new(),
            backlog: Backlog::new(args.rx_size),
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

    /// One arriving datagram: into the oldest posted receive if there is
    /// one and nothing came before it, else into the backlog (or dropped
    /// when that is full). A datagram without the header its framing
    /// needs is dropped at once.
    fn arrive(
        recvs: &mut VecDeque<RxOp>,
        backlog: &mut Backlog,
        done: &mut Vec<DpCompletion>,
        dropped: &mut u64,
        framing: Framing,
        src: XdpAddr,
        datagram: &[u8],
    ) {
        if framing.header && decode_header(datagram).is_none() {
            *dropped += 1;
            return;
        }
        if backlog.is_empty()
            && let Some(r) = recvs.pop_front()
        {
            Self::place(r, done, framing, src, datagram);
        } else if !backlog.push(src, datagram) {
            *dropped += 1;
        }
    }

    /// Hand backlogged datagrams to posted receives, oldest first.
    fn drain_backlog(&mut self) {
        while !self.recvs.is_empty() {
            let Some((src, bytes)) = self.backlog.pop() else {
                break;
            };
            if let Some(r) = self.recvs.pop_front() {
                Self::place(r, &mut self.done, self.framing, src, &bytes);
            }
        }
    }

    /// Place one datagram (its header checked by [`Self::arrive`]) in
    /// receive `r`.
    fn place(
        r: RxOp,
        done: &mut Vec<DpCompletion>,
        framing: Framing,
        src: XdpAddr,
        datagram: &[u8],
    ) {
        let (data, cq_data) = match framing.header.then(|| decode_header(datagram)) {
            // With FI_MSG_PREFIX the header goes into the prefix space.
            Some(Some(cq_data)) => (&datagram[HDR_LEN - framing.prefix..], cq_data),
            _ => (datagram, None),
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
        let flags = FI_RECV | FI_MSG | cq_data.map_or(0, |_| FI_REMOTE_CQ_DATA);
        done.push(DpCompletion {
            dir: Direction::Rx,
            completion: Completion {
                op_context: r.context,
                flags,
                len: n,
                buf: r.iov.first().map(|(b, _)| *b).unwrap_or(0),
                data: cq_data.unwrap_or(0),
                error,
                ..Default::default()
            },
            src: Some(src),
            report: r.report,
        });
    }
}

/// Write `op`'s datagram into `dst` (header, then the application's bytes
/// after its prefix); returns its length.
fn build(f: Framing, op: &TxOp, dst: &mut [u8]) -> usize {
    let hdr = if f.header { HDR_LEN } else { 0 };
    let n = op.payload.len().saturating_sub(f.prefix);
    if f.header {
        encode_header(&mut dst[..HDR_LEN], op.data);
    }
    // SAFETY: the send's buffers are valid for this call.
    unsafe { gather(op.payload.iov(), f.prefix, &mut dst[hdr..hdr + n]) };
    hdr + n
}

impl DataPath for Dgram {
    fn post_send(&mut self, op: TxOp) -> Result<()> {
        let len = op.payload.len();
        let hdr = if self.framing.header { HDR_LEN } else { 0 };
        let wire = len.saturating_sub(self.framing.prefix) + hdr;
        if wire > self.port.max_payload() {
            return Err(Errno::INVAL);
        }
        if op.dest.socket_addr() == self.local.socket_addr() {
            let mut bytes = vec![0u8; wire];
            build(self.framing, &op, &mut bytes);
            let Dgram {
                recvs,
                backlog,
                done,
                dropped,
                framing,
                local,
                ..
            } = self;
            Self::arrive(recvs, backlog, done, dropped, *framing, *local, &bytes);
            self.tx_done(&op, len);
            return Ok(());
        }
        let mut to = op.dest;
        to.mac = self.port.resolve(&op.dest)?;
        let framing = self.framing;
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
        let n = build(framing, &op, dst);
        port.send(buf, &to, n)
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
        self.drain_backlog();
        Ok(())
    }

    fn progress(&mut self, out: &mut dyn FnMut(DpCompletion)) {
        self.drain_backlog();
        let Dgram {
            port,
            framing,
            recvs,
            backlog,
            done,
            dropped,
            ..
        } = self;
        let mut learnt = Vec::new();
        port.recv(RX_BATCH, |src, pieces, _ce| {
            learnt.push(src);
            match pieces {
                [payload] => Self::arrive(recvs, backlog, done, dropped, *framing, src, payload),
                // Not asked for on DGRAM ports (LinkConfig::rx_pieces).
                _ => Self::arrive(
                    recvs,
                    backlog,
                    done,
                    dropped,
                    *framing,
                    src,
                    &pieces.concat(),
                ),
            }
        });
        for a in &learnt {
            port.learn(a);
        }
        let _ = port.flush();
        for c in done.drain(..) {
            out(c);
        }
        if self
            .published
            .due(self.clock.epoch_ns() + self.clock.recent().0)
        {
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

    fn arrival_fds(&self, out: &mut Vec<std::os::fd::RawFd>) -> bool {
        self.port.arrival_fds(out);
        true
    }

    fn set_min_multi_recv(&mut self, _bytes: usize) {}
}

/// Datagrams waiting for receives, copied out of their frames (a frame of
/// a shared UMEM is not ours to keep), at most `limit` of them (the
/// receive queue's depth) and [`BACKLOG_BYTES`].
struct Backlog {
    queue: VecDeque<(XdpAddr, Vec<u8>)>,
    bytes: usize,
    limit: usize,
}

impl Backlog {
    fn new(limit: usize) -> Backlog {
        Backlog {
            queue: VecDeque::new(),
            bytes: 0,
            limit,
        }
    }

    fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Keep a copy of `datagram`; false (nothing kept) when that would
    /// pass a bound.
    fn push(&mut self, src: XdpAddr, datagram: &[u8]) -> bool {
        if self.queue.len() >= self.limit || self.bytes + datagram.len() > BACKLOG_BYTES {
            return false;
        }
        self.bytes += datagram.len();
        self.queue.push_back((src, datagram.to_vec()));
        true
    }

    fn pop(&mut self) -> Option<(XdpAddr, Vec<u8>)> {
        let (src, bytes) = self.queue.pop_front()?;
        self.bytes -= bytes.len();
        Some((src, bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr() -> XdpAddr {
        XdpAddr {
            ip: std::net::Ipv4Addr::new(198, 18, 0, 1).into(),
            port: 7,
            mac: None,
            incarnation: 1,
        }
    }

    #[test]
    fn backlog_keeps_order_within_its_bounds() {
        let mut b = Backlog::new(1024);
        assert!(b.push(addr(), &[1]));
        assert!(b.push(addr(), &[2, 2]));
        assert_eq!(b.pop().map(|(_, d)| d), Some(vec![1]));
        assert_eq!(b.bytes, 2);
        while b.push(addr(), &[0]) {}
        assert_eq!(b.queue.len(), 1024);
        while b.pop().is_some() {}
        assert_eq!(b.bytes, 0);
        let big = vec![0u8; BACKLOG_BYTES / 2];
        assert!(b.push(addr(), &big));
        assert!(b.push(addr(), &big));
        assert!(!b.push(addr(), &[0]), "the byte bound holds");
    }
}
