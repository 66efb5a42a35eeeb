//! The acknowledgement policy (PROTOCOL.md §5.2): immediate, delayed,
//! piggybacked on the reply, and the AR flag.

use super::*;

#[test]
fn zero_ack_delay_acks_on_next_transmit_without_timers() {
    let c = |i| Config {
        ack_delay: Nanos(0),
        ..cfg(i)
    };
    let mut a: Engine<u32> = Engine::new(c(0));
    let mut b: Engine<u32> = Engine::new(c(1));
    let mut bufs = Buffers::default();
    bufs.recv.insert(1, vec![0; 8]);
    b.post_recv(
        RecvOp {
            token: 1,
            len: 8,
            src: None,
            tag: None,
            multi_recv: None,
        },
        &mut bufs,
    )
    .unwrap();
    let op = SendOp {
        token: 1,
        dst: 1,
        payload: Payload::Inject(b"12345678"),
        tag: None,
        data: None,
        level: CompletionLevel::Transmit,
        fence: false,
    };
    a.post_send(Instant(0), op).unwrap();
    let mut f = [0u8; 1472];
    let now = Instant(0);
    // Never call handle_timeout: datagrams alone must complete the exchange.
    for _ in 0..10 {
        while let Some(t) = a.poll_transmit(now, &mut f, &mut bufs) {
            b.handle_datagram(now, 0, &f[..t.len], &mut bufs);
        }
        while let Some(t) = b.poll_transmit(now, &mut f, &mut bufs) {
            a.handle_datagram(now, 1, &f[..t.len], &mut bufs);
        }
    }
    assert!(
        matches!(a.poll_event(), Some(Event::Completion(c)) if c.token == 1 && c.error.is_none())
    );
}

/// `ack_message_end_at_once`: mid-message segments wait (for `ack_every` or
/// the delay), the segment that ends the message is acknowledged by the very
/// next `poll_transmit`, so the send completes without any timer firing.
#[test]
fn message_end_acked_at_once_mid_message_segments_wait() {
    let c = |i| Config {
        ack_delay: Nanos::from_secs(1),
        ack_every: 16,
        ack_message_end_at_once: true,
        ..cfg(i)
    };
    let mut a: Engine<u32> = Engine::new(c(0));
    let mut b: Engine<u32> = Engine::new(c(1));
    let mut bufs = Buffers::default();
    let msg = pattern(4000, 3); // three segments at mtu 1472
    bufs.send.insert(1, msg.clone());
    bufs.recv.insert(1, vec![0; 4000]);
    b.post_recv(
        RecvOp {
            token: 1,
            len: 4000,
            src: None,
            tag: None,
            multi_recv: None,
        },
        &mut bufs,
    )
    .unwrap();
    let op = SendOp {
        token: 1,
        dst: 1,
        payload: Payload::Buffer { len: 4000 },
        tag: None,
        data: None,
        level: CompletionLevel::Transmit,
        fence: false,
    };
    let now = Instant(0);
    a.post_send(now, op).unwrap();
    let mut f = [0u8; 1472];
    // Session set-up (HELLO / HELLO_ACK) until the first DATA segment.
    let mut segments = Vec::new();
    for _ in 0..10 {
        while let Some(t) = a.poll_transmit(now, &mut f, &mut bufs) {
            segments.push(f[..t.len].to_vec());
        }
        for d in segments.drain(..) {
            b.handle_datagram(now, 0, &d, &mut bufs);
        }
        let mut acks = 0;
        while let Some(t) = b.poll_transmit(now, &mut f, &mut bufs) {
            a.handle_datagram(now, 1, &f[..t.len], &mut bufs);
            acks += 1;
        }
        if acks == 0 {
            break;
        }
    }
    // Everything a had is delivered; if the message is complete at b, its
    // last segment was acknowledged at once and a's send completed.
    assert!(
        matches!(b.poll_event(), Some(Event::Completion(c)) if c.token == 1 && c.error.is_none())
    );
    assert_eq!(bufs.recv[&1], msg);
    assert!(
        matches!(a.poll_event(), Some(Event::Completion(c)) if c.token == 1 && c.error.is_none())
    );
}

/// A send of `len` bytes from the caller's buffer `token`, to engine 1.
fn buffer_send(token: u64, len: usize) -> SendOp<'static, u32> {
    SendOp {
        token,
        dst: 1,
        payload: Payload::Buffer { len },
        tag: None,
        data: None,
        level: CompletionLevel::Transmit,
        fence: false,
    }
}

/// Engines 0 and 1 configured by `c`, their session opened by a one-packet
/// message, with a `len`-byte message (token 1) ready to send from 0 and a
/// receive buffer for it at 1 (not posted: an unexpected message is fine).
fn opened_pair(c: impl Fn(usize) -> Config, len: usize) -> (Engine<u32>, Engine<u32>, Buffers) {
    let mut a: Engine<u32> = Engine::new(c(0));
    let mut b: Engine<u32> = Engine::new(c(1));
    let mut bufs = Buffers::default();
    bufs.send.insert(1, pattern(len, 5));
    bufs.send.insert(2, pattern(8, 6));
    bufs.recv.insert(1, vec![0; len]);
    let now = Instant(0);
    a.post_send(now, buffer_send(2, 8)).unwrap();
    let mut f = [0u8; 1472];
    for _ in 0..4 {
        while let Some(t) = a.poll_transmit(now, &mut f, &mut bufs) {
            b.handle_datagram(now, 0, &f[..t.len], &mut bufs);
        }
        while let Some(t) = b.poll_transmit(now, &mut f, &mut bufs) {
            a.handle_datagram(now, 1, &f[..t.len], &mut bufs);
        }
    }
    assert!(matches!(a.poll_event(), Some(Event::Completion(c)) if c.token == 2));
    (a, b, bufs)
}

/// With `ack_message_end_at_once`, a lone mid-message segment is not
/// acknowledged by the next `poll_transmit` (it waits for more or the delay).
#[test]
fn mid_message_segment_waits_for_more() {
    let c = |i| Config {
        ack_delay: Nanos::from_secs(1),
        ack_every: 16,
        ack_message_end_at_once: true,
        ..cfg(i)
    };
    let (mut a, mut b, mut bufs) = opened_pair(c, 4000);
    let (now, mut f) = (Instant(0), [0u8; 1472]);
    a.post_send(now, buffer_send(1, 4000)).unwrap();
    let t = a.poll_transmit(now, &mut f, &mut bufs).unwrap();
    b.handle_datagram(now, 0, &f[..t.len], &mut bufs);
    assert!(
        b.poll_transmit(now, &mut f, &mut bufs).is_none(),
        "a mid-message segment was acknowledged at once"
    );
}

/// A receiver that grants a peer fewer packets than `ack_every` (its ring
/// shared among many senders, §12.1) acknowledges by half of its grant:
/// the sender, out of window, would otherwise wait for `ack_delay`.
#[test]
fn a_small_grant_is_acknowledged_by_its_half() {
    let c = |i| Config {
        ack_delay: Nanos::from_secs(1),
        ack_every: 16,
        ack_message_end_at_once: true,
        congestion: true,
        rx_capacity: 8,
        ..cfg(i)
    };
    // b grants a 8 packets.
    let (mut a, mut b, mut bufs) = opened_pair(c, 20_000);
    let (now, mut f) = (Instant(0), [0u8; 1472]);
    a.post_send(now, buffer_send(1, 20_000)).unwrap();
    for n in 1..=4 {
        let t = a.poll_transmit(now, &mut f, &mut bufs).unwrap();
        b.handle_datagram(now, 0, &f[..t.len], &mut bufs);
        let acked = b.poll_transmit(now, &mut f, &mut bufs).is_some();
        assert_eq!(acked, n == 4, "after {n} mid-message segments");
    }
}

/// The provider's ack policy (`ack_message_end_at_once`, mid-message acks
/// every 16 packets or after 200 µs) under loss, duplication, corruption and
/// reordering: every message of every size still arrives intact and every
/// send completes.
#[test]
fn message_end_ack_policy_under_loss() {
    let f = Faults {
        loss: 0.1,
        dup: 0.05,
        corrupt: 0.01,
        jitter: Nanos::from_micros(30),
        ..Faults::default()
    };
    let mut s = Sim::new(vec![Buffers::default(), Buffers::default()], f, 21, |i| {
        Config {
            ack_message_end_at_once: true,
            ack_delay: Nanos::from_micros(200),
            ..cfg(i)
        }
    });
    let sizes = [0usize, 1, 1500, 20_000, 64 * 1024 + 1, 300_000, 1 << 20];
    for (i, &n) in sizes.iter().enumerate() {
        recv(&mut s, 1, i as u64, n, None, None);
        send(&mut s, 0, 1, 100 + i as u64, pattern(n, i as u8), None);
    }
    run(&mut s);
    let c1 = completions(&mut s, 1);
    assert_eq!(c1.len(), sizes.len());
    for c in &c1 {
        let i = c.token as usize;
        assert_eq!(c.error, None);
        assert_eq!(s.nodes[1].app.recv[&(i as u64)], pattern(sizes[i], i as u8));
    }
    let c0 = completions(&mut s, 0);
    assert_eq!(c0.len(), sizes.len());
    assert!(c0.iter().all(|c| c.error.is_none()));
}

/// Exchange datagrams between two engines at `now` until both are silent.
fn pump(a: &mut Engine<u32>, b: &mut Engine<u32>, now: Instant, bufs: &mut Buffers) {
    let mut f = [0u8; 1472];
    loop {
        let mut moved = false;
        while let Some(t) = a.poll_transmit(now, &mut f, bufs) {
            b.handle_datagram(now, 0, &f[..t.len], bufs);
            moved = true;
        }
        while let Some(t) = b.poll_transmit(now, &mut f, bufs) {
            a.handle_datagram(now, 1, &f[..t.len], bufs);
            moved = true;
        }
        if !moved {
            return;
        }
    }
}

fn inject(e: &mut Engine<u32>, now: Instant, token: u64, dst: u32, data: &[u8]) {
    e.post_send(
        now,
        SendOp {
            token,
            dst,
            payload: Payload::Inject(data),
            tag: None,
            data: None,
            level: CompletionLevel::Inject,
            fence: false,
        },
    )
    .unwrap();
}

/// With awaited acks at once (the provider's policy), an injected message,
/// already complete at its sender, is not acknowledged on its own: the reply
/// carries the ack, or the delayed-ack timer sends it (PROTOCOL.md §5.2).
/// All along, `wants_transmit` is false exactly when `poll_transmit` has
/// nothing (the provider skips its transmit pass on it, and kicks as soon as
/// it turns false).
#[test]
fn injected_message_ack_rides_on_the_reply_or_waits_for_delay() {
    let c = |i| Config {
        ack_delay: Nanos::from_micros(200),
        ack_message_end_at_once: true,
        ..cfg(i)
    };
    let mut a: Engine<u32> = Engine::new(c(0));
    let mut b: Engine<u32> = Engine::new(c(1));
    let mut bufs = Buffers::default();
    let mut f = [0u8; 1472];
    let now = Instant(0);
    // Session set-up with a first message: not complete while it waits for
    // the session (the application might stop calling us), complete once
    // sent; its ack goes at its delay.
    inject(&mut a, now, 1, 1, b"hello");
    assert!(a.poll_event().is_none());
    pump(&mut a, &mut b, now, &mut bufs);
    assert!(matches!(a.poll_event(), Some(Event::Completion(c)) if c.token == 1));
    let later = now + Nanos::from_micros(200);
    b.handle_timeout(later);
    pump(&mut a, &mut b, later, &mut bufs);
    assert_eq!(a.sends_outstanding(), 0);
    // Ping: complete at a as soon as it is sent, the data reaches b, b
    // sends no ack.
    assert!(!a.wants_transmit() && !b.wants_transmit());
    inject(&mut a, later, 2, 1, b"ping");
    assert!(a.wants_transmit());
    let t = a.poll_transmit(later, &mut f, &mut bufs).unwrap();
    assert!(!a.wants_transmit(), "the ping was all a had to send");
    assert!(matches!(a.poll_event(), Some(Event::Completion(c)) if c.token == 2));
    b.handle_datagram(later, 0, &f[..t.len], &mut bufs);
    assert!(!b.wants_transmit());
    assert!(b.poll_transmit(later, &mut f, &mut bufs).is_none());
    assert_eq!(a.sends_outstanding(), 1);
    // Pong: it carries b's ack of the ping.
    inject(&mut b, later, 3, 0, b"pong");
    let t = b.poll_transmit(later, &mut f, &mut bufs).unwrap();
    assert!(!b.wants_transmit());
    assert!(b.poll_transmit(later, &mut f, &mut bufs).is_none());
    a.handle_datagram(later, 1, &f[..t.len], &mut bufs);
    assert_eq!(a.sends_outstanding(), 0);
    // Nobody answers the pong: a's ack leaves when its delay is up. The ack
    // of the ping freed a's window, but nothing waits for it.
    assert!(!a.wants_transmit());
    assert!(a.poll_transmit(later, &mut f, &mut bufs).is_none());
    let t_ack = later + Nanos::from_micros(200);
    assert!(a.poll_timeout().is_some_and(|t| t <= t_ack));
    a.handle_timeout(t_ack);
    assert!(a.wants_transmit());
    let t = a.poll_transmit(t_ack, &mut f, &mut bufs).unwrap();
    assert!(!a.wants_transmit());
    b.handle_datagram(t_ack, 0, &f[..t.len], &mut bufs);
    assert_eq!(b.sends_outstanding(), 0);
}
