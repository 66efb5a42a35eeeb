//! The connection of a connected endpoint (FI_EP_MSG) below the seam: the
//! CM state machine (`ofi_xdp_reliability::cm`, reliability/PROTOCOL.md §9)
//! on the endpoint's own port. The connection's data is an ordinary engine
//! session with the peer, run by [`super::rdm::Rdm`]; this part decides
//! who the peer is, sends and receives the CM datagrams, and turns the
//! machine's events into [`ConnEvent`]s. Engine datagrams from anyone but
//! the peer are not admitted.

use std::net::SocketAddr;
use std::time::Duration;

use ofi_xdp_reliability::cm::{self, CmEvent, CmTiming, Connection, Failure, Peer};
use ofi_xdp_reliability::{Instant, Nanos};

use super::port::Port;
use crate::abi::{Errno, Result};
use crate::addr::XdpAddr;
use crate::datapath::{ConnEvent, ConnRequest, OpenArgs};
use crate::sys::*;

/// How often a connection being set up wants a progress pass.
const SETUP_POLL: Duration = Duration::from_millis(1);

pub struct Connected {
    cm: Connection<SocketAddr>,
    /// Where fi_connect sent its request (with the MAC resolved).
    listener: Option<XdpAddr>,
}

/// A random non-zero connection id.
fn random_id() -> u32 {
    let mut b = [0u8; 4];
    // SAFETY: getrandom writes at most 4 bytes into `b`.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), 4, 0) };
    let v = u32::from_ne_bytes(b);
    if n == 4 && v != 0 {
        v
    } else {
        std::process::id().rotate_left(13) ^ 0x5844_4d53
    }
}

fn peer_addr(p: &Peer<SocketAddr>) -> XdpAddr {
    XdpAddr {
        ip: p.addr.ip(),
        port: p.addr.port(),
        mac: (p.link != [0; 6]).then_some(p.link),
        incarnation: p.incarnation,
    }
}

impl Connected {
    pub fn new(args: &OpenArgs) -> Connected {
        let timing = CmTiming {
            // A connection attempt waits as long as an engine operation
            // waits for a silent peer (FI_XDP_PEER_TIMEOUT).
            give_up: Nanos::from_secs(u64::from(args.cfg.peer_timeout_secs.max(1))),
            ..CmTiming::default()
        };
        Connected {
            cm: Connection::new(
                random_id(),
                args.local.incarnation,
                args.local.mac.unwrap_or_default(),
                timing,
            ),
            listener: None,
        }
    }

    /// Whether an engine datagram from `src` belongs to the connection.
    #[inline]
    pub fn admits(&mut self, src: &XdpAddr) -> bool {
        let sa = src.socket_addr();
        if !self.cm.admits(sa) {
            return false;
        }
        self.cm.peer_traffic(sa);
        true
    }

    pub fn connect(&mut self, now: Instant, to: XdpAddr, param: &[u8]) -> Result<()> {
        self.cm
            .connect(now, to.socket_addr(), param)
            .map_err(cm_errno)?;
        self.listener = Some(to);
        Ok(())
    }

    pub fn accept(&mut self, now: Instant, req: &ConnRequest, param: &[u8]) -> Result<()> {
        let peer = Peer {
            addr: req.from.socket_addr(),
            incarnation: req.from.incarnation,
            link: req.from.mac.unwrap_or_default(),
        };
        self.cm.accept(now, peer, req.id, param).map_err(cm_errno)?;
        Ok(())
    }

    pub fn shutdown(&mut self, now: Instant) {
        self.cm.shutdown(now);
    }

    /// The endpoint closes: tell a connected peer (twice, not repeated).
    pub fn close(&mut self, now: Instant) {
        self.cm.close(now);
    }

    /// The engine lost the peer's session.
    pub fn peer_lost(&mut self, who: &XdpAddr) {
        if self.cm.peer().is_some_and(|p| p.addr == who.socket_addr()) {
            self.cm.peer_lost();
        }
    }

    /// A CM datagram from `src`.
    pub fn on_datagram(&mut self, src: &XdpAddr, bytes: &[u8]) {
        if let Ok(m) = cm::decode(bytes) {
            self.cm.handle(src.socket_addr(), &m);
        }
    }

    /// When [`Connected::run`] has timer work next, from `now`. While a
    /// connection is being set up, at most 1 ms: its answer arrives on our
    /// socket, and a thread blocked on a wait object that does not watch
    /// it (an EQ's) must come back to look.
    pub fn timer(&self, now: Instant) -> Option<Duration> {
        let t = self
            .cm
            .poll_timeout()
            .map(|t| Duration::from_nanos(t.since(now).0));
        match self.cm.phase() {
            cm::Phase::Connecting | cm::Phase::Accepting => {
                Some(t.map_or(SETUP_POLL, |t| t.min(SETUP_POLL)))
            }
            _ => t,
        }
    }

    /// Whether CM datagrams wait to be sent.
    pub fn wants_transmit(&self) -> bool {
        self.cm.wants_transmit()
    }

    /// Run due timers (a connect refused by ICMP is found here) and send
    /// what the machine has queued.
    pub fn run(&mut self, now: Instant, port: &mut Port) {
        if self.cm.poll_timeout().is_some_and(|t| t <= now) {
            if self.cm.phase() == cm::Phase::Connecting {
                let cm = &mut self.cm;
                port.take_refused(|sa| cm.refused(sa));
            }
            self.cm.handle_timeout(now);
        }
        self.transmit(port);
    }

    /// Send the queued CM datagrams; one lost here is repeated by its timer.
    pub fn transmit(&mut self, port: &mut Port) {
        while self.cm.wants_transmit() {
            let Some(b) = port.alloc_tx() else { break };
            let out = match port.tx_payload_mut(b) {
                Some(buf) => self.cm.poll_transmit(buf),
                None => None,
            };
            let Some((to, len)) = out else {
                port.release_tx(b);
                break;
            };
            // The peer's MAC as it stated it; the listener's as resolved.
            let dest = self
                .cm
                .peer()
                .filter(|p| p.addr == to)
                .map(|p| peer_addr(&p))
                .or(self.listener.filter(|l| l.socket_addr() == to))
                .unwrap_or_else(|| XdpAddr::from_socket(to));
            if let Err(e) = port.send(b, &dest, len) {
                crate::xdp_debug!(FI_LOG_EP_CTRL, "CM datagram to {to}: {e}");
            }
        }
        let _ = port.flush();
    }

    /// The next connection event.
    pub fn poll_event(&mut self) -> Option<ConnEvent> {
        Some(match self.cm.poll_event()? {
            CmEvent::Connected { peer, param } => ConnEvent::Connected {
                peer: peer_addr(&peer),
                param,
            },
            CmEvent::Failed(Failure::Refused(param)) => ConnEvent::Failed {
                err: FI_ECONNREFUSED,
                param,
            },
            CmEvent::Failed(Failure::TimedOut) => ConnEvent::Failed {
                err: FI_ETIMEDOUT,
                param: Vec::new(),
            },
            CmEvent::Shutdown => ConnEvent::Shutdown,
        })
    }
}

/// fi_cm(3): data longer than FI_OPT_CM_DATA_SIZE, or a second connect /
/// accept, is -FI_EINVAL.
fn cm_errno(e: cm::CmError) -> Errno {
    match e {
        cm::CmError::TooLarge | cm::CmError::State => Errno::INVAL,
    }
}
