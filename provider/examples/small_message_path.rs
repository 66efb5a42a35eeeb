//! The userspace small-message path with no kernel, deterministic, for
//! counting its instructions: `cargo xtask bench instructions` runs it under
//! callgrind and prints instructions per 64-byte message, with every feature
//! the session negotiates on and off; `cargo xtask test` fails when a row
//! grows past its budget in `xtask/instruction-budget.toml`
//! (docs/performance.md, "Instructions per message").
//!
//! Two reliability engines back to back in memory play `fi_pingpong -e rdm
//! -m tagged -S 64`: one 64-byte injected tagged message at a time each way,
//! so every message is its own datagram and its ack rides on the reply. Each
//! datagram also takes the provider's per-datagram userspace work on the
//! AF_XDP path that needs no socket: Ethernet/IPv4/UDP headers written in
//! front of the engine's datagram in the frame (`ofi_xdp_link::wire`,
//! options as `provider/src/xdp/port/open.rs` sets them for RDM), and parsed
//! and checked against the local address on receipt, and the datagram's
//! peer found by the session it names (`provider/src/xdp/peers.rs`,
//! PROTOCOL.md §4.6). Each side's progress
//! pass runs in the order of `provider/src/xdp/rdm.rs`: receive, due timers,
//! transmit, events; a post is followed by a transmit, as there. Frames go
//! from one side to the other in place (what the kernel or NIC does between
//! the two is not userspace work); time is virtual and every seed fixed, so
//! two runs execute the same instructions.
//!
//! `small_message_path --rows` lists the rows (name, tab, what it is);
//! `small_message_path ROW ROUNDS` runs [`WARM_UP_ROUNDS`] round trips to
//! open the session and settle its state, then `ROUNDS` more. The
//! difference of the instruction counts of `ROUNDS` = 0 and `ROUNDS` = K,
//! divided by the 2K messages, is the cost of one message: start-up, the
//! handshake and one-off allocations cancel.

#![allow(clippy::unwrap_used)] // a measurement driver, not library code

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr};

use ofi_xdp_link::LinkAddr;
use ofi_xdp_link::wire::{self, EncodeOptions};
use ofi_xdp_reliability::wire::named_session;
use ofi_xdp_reliability::{
    AuthConfig, CompletionLevel, Config, Engine, Event, Flags, Instant, Nanos, Payload,
    RecvBuffers, RecvOp, SendBuffers, SendOp, TagMatch,
};

/// Message length: `fi_pingpong -S 64`.
const MSG_LEN: usize = 64;
/// Round trips before the measured ones: the handshake (HELLO and its
/// answer, with a job key the challenge too), the congestion window's
/// first growth and every buffer's first allocation fall in them.
const WARM_UP_ROUNDS: u64 = 200;
/// Link MTU of the test hosts' veth pair and of most Ethernet.
const LINK_MTU: u32 = 1500;
/// UMEM frame size (`FI_XDP_FRAME_SIZE`'s default).
const FRAME_SIZE: usize = 4096;
/// Frames on the wire at once, both directions (a ping-pong has one or two).
const WIRE_FRAMES: usize = 8;
/// The tag of every message.
const TAG: u64 = 7;
/// Virtual time between two progress passes.
const PASS: Nanos = Nanos::from_micros(1);
/// A round trip that has not completed after this many passes is a bug.
const MAX_PASSES: u32 = 64;

/// What a row turns on or off, starting from the shipped defaults.
struct Setup {
    engine: Config,
    /// `FI_XDP_ECN`: datagrams marked ECN-capable (ECT(0)).
    ecn: bool,
}

/// One row of the table: a name, what it is, how it changes [`Setup`].
struct Row {
    name: &'static str,
    about: &'static str,
    apply: fn(&mut Setup),
}

/// A job key of the length `FI_XDP_AUTH_KEY` asks for (16 bytes or more).
const JOB_KEY: &[u8] = b"instruction-count job key";

const ROWS: &[Row] = &[
    Row {
        name: "default",
        about: "as shipped: congestion control, ECN-capable, PACK offered, no job key",
        apply: |_| {},
    },
    Row {
        name: "congestion-off",
        about: "FI_XDP_CC=0 (ECN then off too)",
        apply: |s| {
            s.engine.congestion = false;
            s.ecn = false;
        },
    },
    Row {
        name: "cc-delay-on",
        about: "FI_XDP_CC_DELAY_US=100: congestion control's delay signal on",
        apply: |s| s.engine.cc_delay_floor = Nanos::from_micros(100),
    },
    Row {
        name: "ecn-off",
        about: "FI_XDP_ECN=0",
        apply: |s| s.ecn = false,
    },
    Row {
        name: "pack-off",
        about: "FI_XDP_PACK=0",
        apply: |s| s.engine.pack = false,
    },
    Row {
        name: "auth",
        about: "a job key: every datagram authenticated (AES-128-GCM)",
        apply: |s| {
            s.engine.auth = Some(AuthConfig {
                key: JOB_KEY.to_vec(),
                encrypt: false,
            })
        },
    },
    Row {
        name: "auth-encrypt",
        about: "a job key and FI_XDP_AUTH_ENCRYPT=1: payloads encrypted too",
        apply: |s| {
            s.engine.auth = Some(AuthConfig {
                key: JOB_KEY.to_vec(),
                encrypt: true,
            })
        },
    },
];

/// The engine configuration `provider/src/xdp/rdm.rs` (`Rdm::new`) builds
/// from the provider's default parameters on a 1500-byte link, with a fixed
/// seed instead of a random one.
fn shipped(incarnation: u32) -> Setup {
    let rx_capacity = 256; // the fill ring (`FI_XDP_RING_SIZE`'s default)
    Setup {
        engine: Config {
            mtu: ofi_xdp_link::max_payload(
                FRAME_SIZE as u32,
                LINK_MTU,
                &IpAddr::V4(Ipv4Addr::LOCALHOST),
            ),
            incarnation,
            seed: u64::from(incarnation),
            ack_message_end_at_once: true,
            ack_delay: Nanos::from_micros(200),
            rto_min: Nanos::from_millis(10),
            max_retries: 307,
            rto_max: Nanos::from_secs(1),
            window: 256,
            rx_capacity,
            cc_delay_floor: Nanos(0),
            ..Config::default()
        },
        ecn: true,
    }
}

/// Send buffers: every send here is injected, so the engine never reads one.
struct NoSendBuffers;
impl SendBuffers for NoSendBuffers {
    fn read(&mut self, _token: u64, _offset: usize, _dst: &mut [u8]) {
        unreachable!("every send is injected")
    }
}

/// The application's one receive buffer (a ping-pong has one receive posted).
struct RecvBuffer([u8; MSG_LEN]);
impl RecvBuffers for RecvBuffer {
    fn write(&mut self, _token: u64, offset: usize, src: &[u8]) {
        self.0[offset..offset + src.len()].copy_from_slice(src);
    }
}

/// Frames between the two sides: written by the sender, read in place by
/// the receiver.
struct Wire {
    frames: Vec<Vec<u8>>,
    next: usize,
    /// Frames waiting for side 0 and side 1: (frame, length).
    queued: [VecDeque<(usize, usize)>; 2],
}

impl Wire {
    fn new() -> Wire {
        Wire {
            frames: vec![vec![0u8; FRAME_SIZE]; WIRE_FRAMES],
            next: 0,
            queued: [
                VecDeque::with_capacity(WIRE_FRAMES),
                VecDeque::with_capacity(WIRE_FRAMES),
            ],
        }
    }
}

/// One endpoint: its engine, its address, what its link writes into IP
/// headers, and its application's receive buffer.
struct Side {
    index: usize,
    engine: Engine<u32>,
    addr: LinkAddr,
    peer: LinkAddr,
    opts: EncodeOptions,
    header_len: usize,
    rx: RecvBuffer,
    /// Receives completed since the application last looked.
    received: u64,
}

/// The key each side's engine knows its peer by.
const PEER_KEY: u32 = 1;

impl Side {
    fn new(index: usize, row: &Row) -> Side {
        let incarnation = index as u32 + 1;
        let mut setup = shipped(incarnation);
        (row.apply)(&mut setup);
        let addr = |i: u8| LinkAddr {
            mac: [2, 0, 0, 0, 0, i],
            ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, i)),
            port: 7000 + u16::from(i),
        };
        let me = index as u8 + 1;
        // ECN marks only mean something to a sender with congestion
        // control (`provider/src/xdp/port/open.rs`: `ecn_capable`).
        let ecn = if setup.ecn && setup.engine.congestion {
            wire::ECT0
        } else {
            0
        };
        let mut engine = Engine::new(setup.engine);
        if engine.authenticated() {
            // The peer's incarnation, as from its native address.
            let theirs = if index == 0 { 2 } else { 1 };
            engine.peer_incarnation(PEER_KEY, theirs).unwrap();
        }
        Side {
            index,
            engine,
            addr: addr(me),
            peer: addr(3 - me),
            opts: EncodeOptions {
                // RDM datagrams carry a CRC-32C: no UDP checksum over IPv4
                // (provider/src/xdp/port/open.rs).
                udp_checksum_ipv4: false,
                ipv4_id: 0,
                ecn,
            },
            header_len: wire::header_len(&addr(me).ip),
            rx: RecvBuffer([0; MSG_LEN]),
            received: 0,
        }
    }

    /// One progress pass (`Rdm::progress`): take what arrived, fire due
    /// timers, transmit, read events.
    fn progress(&mut self, now: Instant, net: &mut Wire) {
        while let Some((frame, len)) = net.queued[self.index].pop_front() {
            let frame = &net.frames[frame][..len];
            let Ok(d) = wire::decode_head(frame, len, false) else {
                panic!("a frame that does not decode");
            };
            // The link's `classify`: for our address and port only.
            assert!(d.dst_port == self.addr.port && d.dst_ip == self.addr.ip);
            assert_eq!(d.src, self.peer, "a datagram from an unknown source");
            let datagram = &frame[d.payload_offset..d.payload_offset + d.payload_len];
            // `xdp/peers.rs`: the peer of the session the datagram names
            // (PROTOCOL.md §4.6), else the one at its source address.
            let key = named_session(datagram)
                .and_then(|s| self.engine.peer_of_session(s))
                .unwrap_or(PEER_KEY);
            if d.ecn == wire::CE {
                self.engine
                    .handle_datagram_marked(now, key, &[datagram], true, &mut self.rx);
            } else {
                self.engine
                    .handle_datagram(now, key, datagram, &mut self.rx);
            }
        }
        if self.engine.poll_timeout().is_some_and(|t| t <= now) {
            self.engine.handle_timeout(now);
        }
        self.transmit(now, net);
        while let Some(e) = self.engine.poll_event() {
            if let Event::Completion(c) = e {
                assert!(c.error.is_none(), "{c:?}");
                self.received += u64::from(c.flags.contains(Flags::RECV));
            }
        }
    }

    /// `Rdm::transmit`: each datagram into a frame behind the headers'
    /// room, then the headers (`Link::send`).
    fn transmit(&mut self, now: Instant, net: &mut Wire) {
        while self.engine.wants_transmit() {
            let slot = net.next;
            let frame = &mut net.frames[slot];
            let Some(t) =
                self.engine
                    .poll_transmit(now, &mut frame[self.header_len..], &mut NoSendBuffers)
            else {
                break;
            };
            assert_eq!(t.dst, PEER_KEY);
            self.opts.ipv4_id = self.opts.ipv4_id.wrapping_add(1);
            let len = wire::encode_headers(frame, &self.addr, &self.peer, t.len, &self.opts)
                .expect("a datagram that does not fit its frame");
            let to = &mut net.queued[1 - self.index];
            assert!(to.len() < WIRE_FRAMES, "the wire is full");
            to.push_back((slot, len));
            net.next = (slot + 1) % WIRE_FRAMES;
        }
    }

    /// The application: post the next receive, send the next message
    /// (`fi_trecv`, `fi_tinject`), and the transmit that follows a post.
    fn post(&mut self, now: Instant, token: u64, net: &mut Wire) {
        let recv = RecvOp {
            token,
            len: MSG_LEN,
            src: None,
            tag: Some(TagMatch {
                tag: TAG,
                ignore: 0,
            }),
            multi_recv: None,
        };
        self.engine.post_recv(recv, &mut self.rx).unwrap();
        self.send(now, token, net);
    }

    fn send(&mut self, now: Instant, token: u64, net: &mut Wire) {
        let payload = [token as u8; MSG_LEN];
        let op = SendOp {
            token,
            dst: PEER_KEY,
            payload: Payload::Inject(&payload),
            tag: Some(TAG),
            data: None,
            level: CompletionLevel::Inject,
            fence: false,
        };
        self.engine.post_send(now, op).unwrap();
        self.transmit(now, net);
    }
}

/// Runs progress passes on `to` (and on `from`, whose acks or handshake
/// answers may be needed) until `to` has received one message.
fn deliver(sides: &mut [Side; 2], to: usize, now: &mut Instant, net: &mut Wire) {
    for _ in 0..MAX_PASSES {
        *now = *now + PASS;
        sides[to].progress(*now, net);
        if sides[to].received > 0 {
            sides[to].received -= 1;
            return;
        }
        sides[1 - to].progress(*now, net);
    }
    panic!("no message after {MAX_PASSES} passes");
}

/// `rounds` round trips after the warm-up; returns the datagrams each side sent.
fn ping_pong(row: &Row, rounds: u64) -> [u64; 2] {
    let mut sides = [Side::new(0, row), Side::new(1, row)];
    let mut net = Wire::new();
    let mut now = Instant(0);
    let [a, b] = &mut sides;
    b.engine
        .post_recv(
            RecvOp {
                token: 0,
                len: MSG_LEN,
                src: None,
                tag: Some(TagMatch {
                    tag: TAG,
                    ignore: 0,
                }),
                multi_recv: None,
            },
            &mut b.rx,
        )
        .unwrap();
    a.post(now, 0, &mut net);
    for token in 1..=WARM_UP_ROUNDS + rounds {
        deliver(&mut sides, 1, &mut now, &mut net);
        sides[1].post(now, token, &mut net);
        deliver(&mut sides, 0, &mut now, &mut net);
        sides[0].post(now, token, &mut net);
    }
    for side in &sides {
        let st = side.engine.stats();
        assert_eq!((st.retransmits, st.timeouts), (0, 0), "{st:?}");
    }
    sides.each_ref().map(|s| s.engine.stats().tx_datagrams)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [flag] if flag == "--rows" => {
            for row in ROWS {
                println!("{}\t{}", row.name, row.about);
            }
        }
        [name, rounds] => {
            let row = ROWS
                .iter()
                .find(|r| r.name == name)
                .unwrap_or_else(|| panic!("no row `{name}` (--rows lists them)"));
            let rounds: u64 = rounds.parse().expect("ROUNDS is a number");
            let [a, b] = ping_pong(row, rounds);
            println!(
                "{name}: {rounds} round trips of {MSG_LEN} B after {WARM_UP_ROUNDS} warm-up ({a} datagrams A→B, {b} B→A)"
            );
        }
        _ => {
            eprintln!("usage: small_message_path --rows | small_message_path ROW ROUNDS");
            std::process::exit(2);
        }
    }
}
