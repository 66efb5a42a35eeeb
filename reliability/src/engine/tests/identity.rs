//! A session is found by the session id its datagrams name (PROTOCOL.md
//! §4.6), not by their UDP source port: a caller that resolves peers the
//! way the provider does keeps one session with a peer whose datagrams come
//! from many source ports (path entropy), through loss and retransmission.

use super::*;
use crate::rng::SplitMix64;
use crate::wire::{PacketType, named_session};

/// Endpoint ports: the peer key is the UDP port a datagram came from
/// unless its header names a session.
const A: u16 = 1000;
const B: u16 = 2000;

/// The peer of a datagram that arrived from `src_port` at `engine`: the
/// session it names, if that is one of ours, else its source. (Both
/// endpoints share one IP here, so the provider's IP check always holds.)
fn resolve(engine: &Engine<u16>, datagram: &[u8], src_port: u16) -> u16 {
    named_session(datagram)
        .and_then(|s| engine.peer_of_session(s))
        .unwrap_or(src_port)
}

/// Datagrams queued on a lossy link: (to B?, source port, bytes).
type Wire = Vec<(bool, u16, Vec<u8>)>;

/// Everything `e` wants to send, onto `wire`, each from one of `paths`
/// source ports (the first its own) where the peer takes that (§4.6) but
/// handshakes, which carry its address.
fn emit(
    e: &mut Engine<u16>,
    app: &mut Buffers,
    now: Instant,
    (own, to_b, paths): (u16, bool, u16),
    rng: &mut SplitMix64,
    wire: &mut Wire,
) {
    let mut frame = vec![0u8; e.config().mtu];
    while let Some(t) = e.poll_transmit(now, &mut frame, app) {
        let d = frame[..t.len].to_vec();
        let handshake = [PacketType::Hello as u8, PacketType::HelloAck as u8].contains(&d[1]);
        let port = match rng.next_u64() % u64::from(paths) {
            _ if handshake || !e.peer_takes_any_port(t.dst) => own,
            0 => own,
            i => 50_000 + i as u16,
        };
        wire.push((to_b, port, d));
    }
}

/// Two engines that state ANY_PORT (or not), A sending messages to B with
/// `loss` percent of datagrams lost; returns whether each took the other's
/// any-port feature.
fn run_pair(seed: u64, loss: u64, any_port: bool) -> (bool, bool) {
    let mut rng = SplitMix64::new(seed);
    let mut a: Engine<u16> = Engine::new(Config { any_port, ..cfg(0) });
    let mut b: Engine<u16> = Engine::new(Config { any_port, ..cfg(1) });
    let (mut app_a, mut app_b) = (Buffers::default(), Buffers::default());
    let mut now = Instant(0);
    let sizes = [0usize, 10, 1400, 3000, 70_000, 200_000];
    for (i, &len) in sizes.iter().enumerate() {
        let token = i as u64;
        app_b.recv.insert(100 + token, vec![0; len]);
        let op = RecvOp {
            token: 100 + token,
            len,
            src: Some(A),
            tag: None,
            multi_recv: None,
        };
        b.post_recv(op, &mut app_b).unwrap();
        app_a.send.insert(token, pattern(len, i as u8));
        let op = SendOp {
            token,
            dst: B,
            payload: Payload::Buffer { len },
            tag: None,
            data: Some(token),
            level: CompletionLevel::Delivery,
            fence: false,
        };
        a.post_send(now, op).unwrap();
    }
    let (mut sent, mut received) = (Vec::new(), Vec::new());
    for _ in 0..2_000_000 {
        let mut wire = Wire::new();
        emit(&mut a, &mut app_a, now, (A, true, 4), &mut rng, &mut wire);
        emit(&mut b, &mut app_b, now, (B, false, 4), &mut rng, &mut wire);
        for (to_b, port, d) in wire {
            if rng.next_u64() % 100 < loss {
                continue;
            }
            if to_b {
                let from = resolve(&b, &d, port);
                b.handle_datagram(now, from, &d, &mut app_b);
            } else {
                let from = resolve(&a, &d, port);
                a.handle_datagram(now, from, &d, &mut app_a);
            }
        }
        now = now + Nanos(20_000);
        a.handle_timeout(now);
        b.handle_timeout(now);
        while let Some(Event::Completion(c)) = a.poll_event() {
            sent.push(c);
        }
        while let Some(Event::Completion(c)) = b.poll_event() {
            received.push(c);
        }
        if sent.len() == sizes.len() && received.len() == sizes.len() {
            break;
        }
    }
    assert_eq!(sent.len(), sizes.len(), "sends complete");
    assert!(sent.iter().all(|c| c.error.is_none()), "{sent:?}");
    assert_eq!(received.len(), sizes.len(), "messages delivered");
    for (i, c) in received.iter().enumerate() {
        assert_eq!(c.error, None);
        assert_eq!(c.token, 100 + i as u64, "in order");
        assert_eq!(c.src, Some(A), "the source is the endpoint's address");
        assert_eq!(app_b.recv[&c.token], pattern(sizes[i], i as u8));
    }
    // One session each way: no peer state for any entropy port.
    assert_eq!(a.peer_count(), 1);
    assert_eq!(b.peer_count(), 1);
    (a.peer_takes_any_port(B), b.peer_takes_any_port(A))
}

#[test]
fn a_session_is_found_by_its_id_from_any_source_port() {
    assert_eq!(run_pair(1, 0, true), (true, true));
}

/// A peer that does not state ANY_PORT (one that knows sessions by source
/// address) is sent to from the endpoint's own port only.
#[test]
fn without_any_port_the_source_port_stays() {
    assert_eq!(run_pair(4, 5, false), (false, false));
}

#[test]
fn varying_source_ports_survive_loss_and_retransmission() {
    run_pair(2, 5, true);
    run_pair(3, 20, true);
}

#[test]
fn a_stale_or_unknown_session_id_names_no_peer() {
    let mut a: Engine<u16> = Engine::new(cfg(0));
    let mut app = Buffers::default();
    let now = Instant(0);
    app.send.insert(1, vec![1]);
    let op = SendOp {
        token: 1,
        dst: B,
        payload: Payload::Buffer { len: 1 },
        tag: None,
        data: None,
        level: CompletionLevel::Transmit,
        fence: false,
    };
    a.post_send(now, op).unwrap();
    let mut frame = vec![0u8; a.config().mtu];
    let t = a.poll_transmit(now, &mut frame, &mut app).unwrap();
    let hello = crate::wire::decode(&frame[..t.len]).unwrap();
    // HELLO names no session of the receiver's; our own id is known
    // while the HELLO is outstanding.
    assert_eq!(named_session(&frame[..t.len]), None);
    let ours = hello.hdr.src_sess;
    assert_eq!(a.peer_of_session(ours), Some(B));
    assert_eq!(a.peer_of_session(ours.wrapping_add(1)), None);
    // The peer is unreachable: the session ends and its id with it.
    assert!(a.peer_unreachable(now, B));
    assert_eq!(a.peer_of_session(ours), None);
}
