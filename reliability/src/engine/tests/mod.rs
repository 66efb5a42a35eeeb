//! Unit tests of the engine through the simulated network (`crate::sim`),
//! one file per area; this file holds the helpers they share.

mod acks;
mod auth;
mod bulk;
mod congestion;
mod direct;
mod identity;
mod limits;
mod matching;
mod multipath;
mod packing;
mod pull;
mod rma;
mod sessions;

use crate::sim::{Buffers, Faults, Sim};
use crate::*;

fn cfg(i: usize) -> Config {
    Config {
        incarnation: 100 + i as u32,
        seed: 7 + i as u64,
        ..Config::default()
    }
}

fn sim(n: usize, faults: Faults, seed: u64) -> Sim<Buffers> {
    Sim::new(
        (0..n).map(|_| Buffers::default()).collect(),
        faults,
        seed,
        cfg,
    )
}

/// Two nodes on a link without faults, each configured by `config`.
fn pair_with(seed: u64, config: impl FnMut(usize) -> Config) -> Sim<Buffers> {
    Sim::new(
        vec![Buffers::default(), Buffers::default()],
        Faults::default(),
        seed,
        config,
    )
}

/// One node per entry of `mtus` (its `Config::mtu`), on a link that drops
/// datagrams above `link_mtu` and loses `loss` of the rest.
fn sim_with_mtus(mtus: &[usize], link_mtu: usize, loss: f64, seed: u64) -> Sim<Buffers> {
    let f = Faults {
        mtu: link_mtu,
        loss,
        ..Faults::default()
    };
    let apps = mtus.iter().map(|_| Buffers::default()).collect();
    Sim::new(apps, f, seed, |i| Config {
        mtu: mtus[i],
        ..cfg(i)
    })
}

fn pattern(len: usize, salt: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt) ^ (i >> 8) as u8)
        .collect()
}

fn send(s: &mut Sim<Buffers>, from: usize, to: usize, token: u64, data: Vec<u8>, tag: Option<u64>) {
    let len = data.len();
    s.nodes[from].app.send.insert(token, data);
    let now = s.now;
    s.nodes[from]
        .engine
        .post_send(
            now,
            SendOp {
                token,
                dst: to,
                payload: Payload::Buffer { len },
                tag,
                data: Some(token),
                level: CompletionLevel::Transmit,
                fence: false,
            },
        )
        .unwrap();
}

fn recv(
    s: &mut Sim<Buffers>,
    at: usize,
    token: u64,
    len: usize,
    src: Option<usize>,
    tag: Option<TagMatch>,
) {
    post_recv(s, at, token, len, (src, tag), None);
}

/// An untagged multi-recv buffer of `len` bytes from anyone, retired once
/// less than `min_free` is left (fi_msg(3) FI_MULTI_RECV).
fn multi_recv(s: &mut Sim<Buffers>, at: usize, token: u64, len: usize, min_free: usize) {
    post_recv(s, at, token, len, (None, None), Some(min_free));
}

fn post_recv(
    s: &mut Sim<Buffers>,
    at: usize,
    token: u64,
    len: usize,
    (src, tag): (Option<usize>, Option<TagMatch>),
    multi_recv: Option<usize>,
) {
    s.nodes[at].app.recv.insert(token, vec![0; len]);
    let node = &mut s.nodes[at];
    let op = RecvOp {
        token,
        len,
        src,
        tag,
        multi_recv,
    };
    node.engine.post_recv(op, &mut node.app).unwrap();
}

fn completions(s: &mut Sim<Buffers>, i: usize) -> Vec<Completion<usize>> {
    s.events(i)
        .into_iter()
        .filter_map(|e| match e {
            Event::Completion(c) => Some(c),
            _ => None,
        })
        .collect()
}

fn run(s: &mut Sim<Buffers>) {
    let limit = s.now + Nanos::from_secs(60);
    s.run_until(limit, |_| false);
}

/// Two endpoints with a session: one 10-byte message 0 → 1 delivered and
/// its completions drained.
fn established(seed: u64) -> Sim<Buffers> {
    let mut s = sim(2, Faults::default(), seed);
    recv(&mut s, 1, 1, 10, None, None);
    send(&mut s, 0, 1, 1, pattern(10, 0), None);
    run(&mut s);
    assert_eq!(completions(&mut s, 0)[0].error, None);
    completions(&mut s, 1);
    s
}
