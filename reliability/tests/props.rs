//! Property tests: tag/ignore/directed matching against a reference model, and
//! multi-recv placement.

#![allow(clippy::unwrap_used)] // a test may unwrap: a panic is its verdict

use std::collections::{BTreeSet, HashMap};

use ofi_xdp_reliability::sim::{Buffers, Faults, Sim};
use ofi_xdp_reliability::*;
use proptest::prelude::*;

const SENDERS: usize = 3;

#[derive(Clone, Debug)]
enum Op {
    /// A receive at node 0: tagged?, tag, ignore, source (None = any).
    Recv {
        tagged: bool,
        tag: u64,
        ignore: u64,
        src: Option<usize>,
    },
    /// A message from `src` (1..=SENDERS) to node 0.
    Msg { src: usize, tagged: bool, tag: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (
            any::<bool>(),
            0u64..4,
            prop_oneof![Just(0u64), Just(1), Just(2), Just(3), Just(u64::MAX)],
            prop::option::of(1usize..=SENDERS)
        )
            .prop_map(|(tagged, tag, ignore, src)| Op::Recv {
                tagged,
                tag,
                ignore,
                src
            }),
        (1usize..=SENDERS, any::<bool>(), 0u64..4).prop_map(|(src, tagged, tag)| Op::Msg {
            src,
            tagged,
            tag
        }),
    ]
}

fn settle(s: &mut Sim<Buffers>) {
    let limit = s.now + Nanos::from_secs(10);
    s.run_until(limit, |_| false);
}

struct ModelRecv {
    token: u64,
    tagged: bool,
    m: TagMatch,
    src: Option<usize>,
}

struct ModelMsg {
    id: u64,
    src: usize,
    tagged: bool,
    tag: u64,
}

fn matches(r: &ModelRecv, m: &ModelMsg) -> bool {
    r.tagged == m.tagged && r.src.is_none_or(|s| s == m.src) && (!r.tagged || r.m.matches(m.tag))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn matching_agrees_with_reference_model(ops in prop::collection::vec(op(), 1..40)) {
        let mut s: Sim<Buffers> = Sim::new(
            (0..=SENDERS).map(|_| Buffers::default()).collect(),
            Faults::default(),
            1,
            |i| Config { incarnation: 10 + i as u32, seed: i as u64, ..Config::default() },
        );
        let mut posted: Vec<ModelRecv> = Vec::new();
        let mut unexpected: Vec<ModelMsg> = Vec::new();
        let mut expect: BTreeSet<(u64, u64)> = BTreeSet::new();
        for (token, op) in (1u64..).zip(ops) {
            match op {
                Op::Recv { tagged, tag, ignore, src } => {
                    let r = ModelRecv { token, tagged, m: TagMatch { tag, ignore }, src };
                    if let Some(pos) = unexpected.iter().position(|m| matches(&r, m)) {
                        expect.insert((token, unexpected.remove(pos).id));
                    } else {
                        posted.push(r);
                    }
                    s.nodes[0].app.recv.insert(token, vec![0; 16]);
                    let n = &mut s.nodes[0];
                    let op = RecvOp { token, len: 16, src, tag: tagged.then_some(TagMatch { tag, ignore }), multi_recv: None };
                    n.engine.post_recv(op, &mut n.app).unwrap();
                }
                Op::Msg { src, tagged, tag } => {
                    let m = ModelMsg { id: token, src, tagged, tag };
                    if let Some(pos) = posted.iter().position(|r| matches(r, &m)) {
                        expect.insert((posted.remove(pos).token, token));
                    } else {
                        unexpected.push(m);
                    }
                    let now = s.now;
                    s.nodes[src].engine.post_send(now, SendOp {
                        token, dst: 0, payload: Payload::Buffer { len: 0 }, tag: tagged.then_some(tag),
                        data: Some(token), level: CompletionLevel::Transmit, fence: false,
                    }).unwrap();
                }
            }
            settle(&mut s);
        }
        let mut got = BTreeSet::new();
        while let Some(e) = s.nodes[0].engine.poll_event() {
            if let Event::Completion(c) = e {
                prop_assert_eq!(c.error, None);
                got.insert((c.token, c.data));
            }
        }
        prop_assert_eq!(got, expect);
        prop_assert_eq!(s.nodes[0].engine.unexpected_count(), unexpected.len());
    }

    #[test]
    fn multi_recv_placement(
        cap in 1usize..4000,
        min_free in 0usize..600,
        sizes in prop::collection::vec(0usize..1500, 1..20),
    ) {
        let mut s: Sim<Buffers> = Sim::new(
            vec![Buffers::default(), Buffers::default()],
            Faults::default(),
            2,
            |i| Config { incarnation: 10 + i as u32, seed: i as u64, ..Config::default() },
        );
        s.nodes[1].app.recv.insert(1, vec![0; cap]);
        let n = &mut s.nodes[1];
        n.engine.post_recv(RecvOp { token: 1, len: cap, src: None, tag: None, multi_recv: Some(min_free) }, &mut n.app).unwrap();
        let mut payloads = HashMap::new();
        for (i, &len) in sizes.iter().enumerate() {
            let data: Vec<u8> = (0..len).map(|k| (k * 7 + i * 13) as u8).collect();
            s.nodes[0].app.send.insert(i as u64, data.clone());
            payloads.insert(i as u64, data);
            let now = s.now;
            s.nodes[0].engine.post_send(now, SendOp {
                token: i as u64, dst: 1, payload: Payload::Buffer { len }, tag: None,
                data: Some(i as u64), level: CompletionLevel::Transmit, fence: false,
            }).unwrap();
        }
        settle(&mut s);
        // Reference model (fi_msg(3) FI_MULTI_RECV, fi_cq(3)): successive
        // messages at increasing offsets; released (flag on the completion that
        // releases it) once less than min_free bytes remain.
        let mut used = 0usize;
        let mut model = Vec::new();
        for (i, &len) in sizes.iter().enumerate() {
            let room = cap - used;
            let take = len.min(room);
            let off = used;
            used += take;
            let released = cap - used < min_free.max(1);
            model.push((i as u64, off, take, len > room, released));
            if released {
                break;
            }
        }
        let mut got = Vec::new();
        while let Some(e) = s.nodes[1].engine.poll_event() {
            if let Event::Completion(c) = e {
                got.push((c.data, c.buf_offset, c.len, c.error == Some(OpError::Truncated), c.flags.contains(Flags::MULTI_RECV)));
                let buf = &s.nodes[1].app.recv[&1];
                let p = &payloads[&c.data];
                prop_assert_eq!(&buf[c.buf_offset..c.buf_offset + c.len], &p[..c.len]);
                if c.error == Some(OpError::Truncated) {
                    prop_assert_eq!(c.olen, p.len() - c.len);
                }
            }
        }
        prop_assert_eq!(got, model.clone());
        let remaining = sizes.len() - model.len();
        prop_assert_eq!(s.nodes[1].engine.unexpected_count(), remaining);
    }
}
