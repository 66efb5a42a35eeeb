//! A listening (passive) endpoint's side of connection setup
//! (PROTOCOL.md §9.2): each new CONN_REQ becomes one connection request
//! for the application (FI_CONNREQ); repeats of it are absorbed, and a
//! refused one is refused again when it is repeated (the REJECT may have
//! been lost). Sans-IO, as [`super::Connection`].

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

use super::wire::{self, CmMsg, CmType, MAX_CM_LEN};
use crate::time::{Instant, Nanos};

/// How long a request is remembered after it was answered (rejected or
/// accepted): longer than a connecting side keeps repeating it.
const REMEMBER: Nanos = Nanos::from_secs(60);

/// A connection request for the application (fi_eq(3) FI_CONNREQ).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request<A> {
    pub from: A,
    /// The connecting side's connection id: fi_accept answers it.
    pub id: u32,
    pub incarnation: u32,
    pub link: [u8; 6],
    pub param: Vec<u8>,
}

#[derive(Debug)]
enum Seen {
    /// Reported, not answered yet.
    Pending,
    /// Refused with this data at that time.
    Rejected(Vec<u8>, Instant),
    /// Accepted at that time (the accepting endpoint answers repeats).
    Accepted(Instant),
}

#[derive(Debug)]
pub struct Listener<A> {
    /// fi_listen(3) backlog: requests reported and not answered at most.
    backlog: usize,
    seen: HashMap<(A, u32), Seen>,
    requests: VecDeque<Request<A>>,
    outbox: VecDeque<(A, u32, Vec<u8>)>,
}

impl<A: Copy + Eq + Hash> Listener<A> {
    pub fn new(backlog: usize) -> Self {
        Listener {
            backlog: backlog.max(1),
            seen: HashMap::new(),
            requests: VecDeque::new(),
            outbox: VecDeque::new(),
        }
    }

    /// fi_control(FI_BACKLOG).
    pub fn set_backlog(&mut self, n: usize) {
        self.backlog = n.max(1);
    }

    /// A datagram for the listener from `from`: only CONN_REQ matters.
    /// Beyond the backlog a new request is dropped; its sender repeats it.
    pub fn handle(&mut self, now: Instant, from: A, m: &CmMsg<'_>) {
        if m.ty != CmType::ConnReq || m.src_id == 0 || m.dst_id != 0 {
            return;
        }
        self.forget_old(now);
        match self.seen.get(&(from, m.src_id)) {
            Some(Seen::Rejected(param, _)) => {
                let param = param.clone();
                self.outbox.push_back((from, m.src_id, param));
            }
            Some(_) => {}
            None => {
                let pending = self
                    .seen
                    .values()
                    .filter(|s| matches!(s, Seen::Pending))
                    .count();
                if pending >= self.backlog {
                    return;
                }
                self.seen.insert((from, m.src_id), Seen::Pending);
                self.requests.push_back(Request {
                    from,
                    id: m.src_id,
                    incarnation: m.incarnation,
                    link: m.link,
                    param: m.param.to_vec(),
                });
            }
        }
    }

    pub fn poll_request(&mut self) -> Option<Request<A>> {
        self.requests.pop_front()
    }

    /// fi_reject: answer the request with REJECT (and its repeats too).
    pub fn reject(&mut self, now: Instant, from: A, id: u32, param: &[u8]) {
        let param = param[..param.len().min(wire::CM_DATA_SIZE)].to_vec();
        self.seen
            .insert((from, id), Seen::Rejected(param.clone(), now));
        self.outbox.push_back((from, id, param));
    }

    /// fi_accept of the request: the accepting endpoint answers from now on.
    pub fn accepted(&mut self, now: Instant, from: A, id: u32) {
        self.seen.insert((from, id), Seen::Accepted(now));
    }

    /// Encode the next REJECT into `buf` (at least [`MAX_CM_LEN`] bytes).
    pub fn poll_transmit(&mut self, buf: &mut [u8]) -> Option<(A, usize)> {
        if buf.len() < MAX_CM_LEN {
            return None;
        }
        let (to, id, param) = self.outbox.pop_front()?;
        let n = wire::encode(
            buf,
            &CmMsg {
                ty: CmType::Reject,
                src_id: 0,
                dst_id: id,
                incarnation: 0,
                link: [0; 6],
                param: &param,
            },
        );
        Some((to, n))
    }

    fn forget_old(&mut self, now: Instant) {
        self.seen.retain(|_, s| match s {
            Seen::Pending => true,
            Seen::Rejected(_, at) | Seen::Accepted(at) => now.since(*at) < REMEMBER,
        });
    }
}
