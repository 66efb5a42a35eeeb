//! FI_EP_MSG: what a connected endpoint's RDM data path adds — connect,
//! accept, the connection's events, and the end of the connection
//! (fi_cm(3); the protocol is reliability/PROTOCOL.md §9).

use ofi_xdp_reliability as rel;
use rel::Event;

use super::Rdm;
use crate::abi::{Errno, Result};
use crate::addr::XdpAddr;
use crate::datapath::{ConnEvent, ConnRequest, DpCompletion};

impl Rdm {
    /// fi_connect: the connection's first request goes out now.
    pub(super) fn conn_connect(&mut self, to: XdpAddr, param: &[u8]) -> Result<()> {
        let mut to = to;
        // The listener's MAC, resolved now, outside the progress loop.
        if let Some(mac) = self.port.resolve(&to)? {
            to.mac = Some(mac);
        }
        let now = self.now();
        let c = self.conn.as_mut().ok_or(Errno::NOSYS)?;
        c.connect(now, to, param)?;
        c.transmit(&mut self.port);
        Ok(())
    }

    /// fi_accept of `req`: the acceptance goes out now.
    pub(super) fn conn_accept(&mut self, req: &ConnRequest, param: &[u8]) -> Result<()> {
        let now = self.now();
        let mut from = req.from;
        // The request carries the peer's own MAC; frames go to its next
        // hop's (a router's, when it is behind one).
        if let Some(mac) = self.port.resolve(&from)? {
            from.mac = Some(mac);
        }
        let req = ConnRequest {
            from,
            ..req.clone()
        };
        let c = self.conn.as_mut().ok_or(Errno::NOSYS)?;
        c.accept(now, &req, param)?;
        c.transmit(&mut self.port);
        Ok(())
    }

    /// The connection's next event for the EQ.
    pub(super) fn conn_poll(&mut self) -> Option<ConnEvent> {
        let ev = self.conn.as_mut()?.poll_event()?;
        if ev == ConnEvent::Shutdown {
            // As the tcp provider flushes its queues when a connection
            // ends: receives still posted will never be matched.
            self.cancel_receives();
        }
        Some(ev)
    }

    /// fi_shutdown of a connected endpoint (fi_cm(3)): what was reported
    /// sent is delivered first (as on close), posted receives complete
    /// with FI_ECANCELED through `out`, the session ends with CLOSE
    /// (PROTOCOL.md §4.5) and the peer hears DISCONNECT (§9.3); other
    /// outstanding operations are discarded, as fi_cm(3) allows.
    pub(super) fn disconnect(&mut self, out: &mut dyn FnMut(DpCompletion)) {
        self.linger(out);
        self.cancel_receives();
        while let Some(ev) = self.engine.poll_event() {
            if let Event::Completion(c) = ev
                && let Some(d) = self.completion(c)
            {
                out(d);
            }
        }
        let now = self.close_sessions();
        if let Some(c) = self.conn.as_mut() {
            c.shutdown(now);
            c.transmit(&mut self.port);
        }
    }

    /// Every posted receive completes with FI_ECANCELED (at the next
    /// drain of the engine's events): the connection they were for is over.
    fn cancel_receives(&mut self) {
        let tokens: Vec<u64> = self.recvs.keys().copied().collect();
        for t in tokens {
            self.engine.cancel_recv(t);
        }
    }
}
