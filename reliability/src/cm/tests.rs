//! Connection set-up and tear-down between a connecting endpoint (`C`), a
//! listener (`L`) and an accepting endpoint (`S`), over a lossy little
//! network of three addresses.

use super::*;
use crate::time::{Instant, Nanos};

const C: u8 = 1;
const L: u8 = 2;
const S: u8 = 3;

/// Datagrams in flight, as (from, to, bytes).
type Net = Vec<(u8, u8, Vec<u8>)>;

fn conn(id: u32) -> Connection<u8> {
    Connection::new(
        id,
        id * 10,
        [id as u8; 6],
        CmTiming {
            give_up: Nanos::from_secs(2),
            ..CmTiming::default()
        },
    )
}

fn drain_conn(c: &mut Connection<u8>, me: u8, net: &mut Net) {
    let mut buf = [0u8; MAX_CM_LEN];
    while let Some((to, n)) = c.poll_transmit(&mut buf) {
        net.push((me, to, buf[..n].to_vec()));
    }
}

fn drain_listener(l: &mut Listener<u8>, net: &mut Net) {
    let mut buf = [0u8; MAX_CM_LEN];
    while let Some((to, n)) = l.poll_transmit(&mut buf) {
        net.push((L, to, buf[..n].to_vec()));
    }
}

/// Deliver everything in flight, dropping the datagrams `drop` selects.
fn deliver(
    net: &mut Net,
    now: Instant,
    c: &mut Connection<u8>,
    l: &mut Listener<u8>,
    s: &mut Connection<u8>,
    mut drop: impl FnMut(&CmMsg<'_>) -> bool,
) {
    for (from, to, bytes) in std::mem::take(net) {
        let m = decode(&bytes).unwrap();
        if drop(&m) {
            continue;
        }
        match to {
            C => c.handle(from, &m),
            L => l.handle(now, from, &m),
            S => s.handle(from, &m),
            _ => unreachable!(),
        }
    }
}

fn events(c: &mut Connection<u8>) -> Vec<CmEvent<u8>> {
    std::iter::from_fn(|| c.poll_event()).collect()
}

#[test]
fn connect_accept_shutdown_with_loss() {
    let (mut c, mut s, mut l) = (conn(7), conn(9), Listener::new(4));
    let mut net = Net::new();
    let mut now = Instant(0);
    c.connect(now, L, b"hi").unwrap();
    drain_conn(&mut c, C, &mut net);
    // The first CONN_REQ is lost; the retransmission arrives.
    deliver(&mut net, now, &mut c, &mut l, &mut s, |_| true);
    now = now + Nanos::from_millis(25);
    c.handle_timeout(now);
    drain_conn(&mut c, C, &mut net);
    deliver(&mut net, now, &mut c, &mut l, &mut s, |_| false);
    let req = l.poll_request().unwrap();
    assert_eq!((req.from, req.id, req.param.as_slice()), (C, 7, &b"hi"[..]));
    assert_eq!(req.link, [7; 6]);
    // A repeat of the same request is absorbed.
    c.handle_timeout(now + Nanos::from_millis(50));
    drain_conn(&mut c, C, &mut net);
    deliver(&mut net, now, &mut c, &mut l, &mut s, |_| false);
    assert!(l.poll_request().is_none());
    // The accepting endpoint answers; its CONFIRM is lost once.
    l.accepted(now, C, req.id);
    let peer = Peer {
        addr: C,
        incarnation: req.incarnation,
        link: req.link,
    };
    s.accept(now, peer, req.id, b"welcome").unwrap();
    assert!(s.admits(C) && !s.admits(L));
    drain_conn(&mut s, S, &mut net);
    deliver(&mut net, now, &mut c, &mut l, &mut s, |_| false);
    assert_eq!(c.phase(), Phase::Connected);
    let ev = events(&mut c);
    assert!(matches!(&ev[..], [CmEvent::Connected { peer, param }]
        if peer.addr == S && peer.incarnation == 90 && param == b"welcome"));
    drain_conn(&mut c, C, &mut net);
    deliver(&mut net, now, &mut c, &mut l, &mut s, |m| {
        m.ty == CmType::Confirm
    });
    assert_eq!(s.phase(), Phase::Accepting);
    now = now + Nanos::from_millis(25);
    s.handle_timeout(now);
    drain_conn(&mut s, S, &mut net);
    deliver(&mut net, now, &mut c, &mut l, &mut s, |_| false);
    drain_conn(&mut c, C, &mut net);
    deliver(&mut net, now, &mut c, &mut l, &mut s, |_| false);
    assert_eq!(s.phase(), Phase::Connected);
    assert!(matches!(&events(&mut s)[..], [CmEvent::Connected { param, .. }] if param.is_empty()));
    // The connecting side shuts down; the first DISCONNECT is lost.
    assert!(c.shutdown(now));
    assert_eq!(events(&mut c), vec![CmEvent::Shutdown]);
    drain_conn(&mut c, C, &mut net);
    deliver(&mut net, now, &mut c, &mut l, &mut s, |_| true);
    now = now + Nanos::from_millis(25);
    c.handle_timeout(now);
    drain_conn(&mut c, C, &mut net);
    deliver(&mut net, now, &mut c, &mut l, &mut s, |_| false);
    assert_eq!(events(&mut s), vec![CmEvent::Shutdown]);
    drain_conn(&mut s, S, &mut net);
    deliver(&mut net, now, &mut c, &mut l, &mut s, |_| false);
    assert_eq!(c.poll_timeout(), None, "the DISCONNECT_ACK stops repeats");
    // Shutting down again reports nothing more.
    assert!(!s.shutdown(now));
    assert!(events(&mut s).is_empty());
}

#[test]
fn rejected_with_data_and_again_when_repeated() {
    let (mut c, mut s, mut l) = (conn(7), conn(9), Listener::new(4));
    let mut net = Net::new();
    let now = Instant(0);
    c.connect(now, L, &[]).unwrap();
    drain_conn(&mut c, C, &mut net);
    deliver(&mut net, now, &mut c, &mut l, &mut s, |_| false);
    let req = l.poll_request().unwrap();
    l.reject(now, req.from, req.id, b"no");
    drain_listener(&mut l, &mut net);
    // The REJECT is lost; the repeated request is refused again.
    deliver(&mut net, now, &mut c, &mut l, &mut s, |_| true);
    c.handle_timeout(now + Nanos::from_millis(25));
    drain_conn(&mut c, C, &mut net);
    deliver(&mut net, now, &mut c, &mut l, &mut s, |_| false);
    assert!(l.poll_request().is_none());
    drain_listener(&mut l, &mut net);
    deliver(&mut net, now, &mut c, &mut l, &mut s, |_| false);
    assert_eq!(
        events(&mut c),
        vec![CmEvent::Failed(Failure::Refused(b"no".to_vec()))]
    );
    assert_eq!(c.phase(), Phase::Closed);
    assert_eq!(c.connect(now, L, &[]), Err(CmError::State));
}

#[test]
fn nobody_answers_or_nobody_listens() {
    let mut c = conn(7);
    let mut now = Instant(0);
    c.connect(now, L, &[]).unwrap();
    let mut sent = 0;
    let mut buf = [0u8; MAX_CM_LEN];
    while let Some(t) = c.poll_timeout() {
        now = t;
        c.handle_timeout(now);
        while c.poll_transmit(&mut buf).is_some() {
            sent += 1;
        }
    }
    assert_eq!(events(&mut c), vec![CmEvent::Failed(Failure::TimedOut)]);
    assert!(now >= Instant(Nanos::from_secs(2).0) && sent >= 4, "{sent}");
    let mut c = conn(8);
    c.connect(Instant(0), L, &[]).unwrap();
    c.refused(S);
    assert!(events(&mut c).is_empty(), "another address refused");
    c.refused(L);
    assert_eq!(
        events(&mut c),
        vec![CmEvent::Failed(Failure::Refused(Vec::new()))]
    );
}

#[test]
fn accepting_side_takes_peer_data_as_confirmation_and_ignores_strangers() {
    let mut s = conn(9);
    let peer = Peer {
        addr: C,
        incarnation: 1,
        link: [0; 6],
    };
    s.accept(Instant(0), peer, 7, &[]).unwrap();
    s.peer_traffic(L);
    assert_eq!(s.phase(), Phase::Accepting);
    // A DISCONNECT with the wrong ids or from elsewhere changes nothing.
    let mut buf = [0u8; MAX_CM_LEN];
    let n = wire::encode(
        &mut buf,
        &CmMsg {
            ty: CmType::Disconnect,
            src_id: 8,
            dst_id: 9,
            incarnation: 1,
            link: [0; 6],
            param: &[],
        },
    );
    s.handle(C, &decode(&buf[..n]).unwrap());
    s.peer_traffic(C);
    assert_eq!(s.phase(), Phase::Connected);
    assert!(matches!(&events(&mut s)[..], [CmEvent::Connected { .. }]));
    s.peer_lost();
    assert_eq!(events(&mut s), vec![CmEvent::Shutdown]);
    assert!(!s.admits(C));
}

#[test]
fn data_size_and_backlog_are_bounded() {
    let mut c = conn(7);
    assert_eq!(
        c.connect(Instant(0), L, &[0; CM_DATA_SIZE + 1]),
        Err(CmError::TooLarge)
    );
    c.connect(Instant(0), L, &[0; CM_DATA_SIZE]).unwrap();
    let mut l = Listener::new(1);
    let mut buf = [0u8; MAX_CM_LEN];
    for id in [1u32, 2] {
        let n = wire::encode(
            &mut buf,
            &CmMsg {
                ty: CmType::ConnReq,
                src_id: id,
                dst_id: 0,
                incarnation: 1,
                link: [0; 6],
                param: &[],
            },
        );
        l.handle(Instant(0), C, &decode(&buf[..n]).unwrap());
    }
    assert!(l.poll_request().is_some());
    assert!(l.poll_request().is_none(), "beyond the backlog of 1");
}

#[test]
fn a_disconnect_before_the_confirm_still_reports_the_connection_first() {
    let mut s = conn(9);
    let peer = Peer {
        addr: C,
        incarnation: 1,
        link: [0; 6],
    };
    s.accept(Instant(0), peer, 7, &[]).unwrap();
    let mut buf = [0u8; MAX_CM_LEN];
    let (_, n) = s.poll_transmit(&mut buf).unwrap();
    assert_eq!(decode(&buf[..n]).unwrap().ty, CmType::Accept);
    let n = wire::encode(
        &mut buf,
        &CmMsg {
            ty: CmType::Disconnect,
            src_id: 7,
            dst_id: 9,
            incarnation: 1,
            link: [0; 6],
            param: &[],
        },
    );
    s.handle(C, &decode(&buf[..n]).unwrap());
    let ev = events(&mut s);
    assert!(
        matches!(&ev[..], [CmEvent::Connected { .. }, CmEvent::Shutdown]),
        "{ev:?}"
    );
    // The DISCONNECT is acknowledged.
    let (to, n) = s.poll_transmit(&mut buf).unwrap();
    assert_eq!(
        (to, decode(&buf[..n]).unwrap().ty),
        (C, CmType::DisconnectAck)
    );
}
