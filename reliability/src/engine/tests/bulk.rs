//! The bulk path (PROTOCOL.md §2.5): the port a peer states in its
//! handshake, and large transfers that arrive as the kernel's receive
//! offload hands them over — several datagrams joined in one read, cut back
//! at the stated size — intact under loss, duplication and reordering.

use super::*;

fn with_bulk_port(port: u16) -> impl FnMut(usize) -> Config {
    move |i| Config {
        bulk_port: if i == 1 { port } else { 0 },
        ..cfg(i)
    }
}

#[test]
fn each_side_learns_the_bulk_port_the_other_stated() {
    let mut s = pair_with(1, with_bulk_port(4791));
    assert_eq!(s.nodes[0].engine.peer_bulk_port(1), None, "no session yet");
    recv(&mut s, 1, 1, 10, None, None);
    send(&mut s, 0, 1, 1, pattern(10, 0), None);
    run(&mut s);
    assert_eq!(s.nodes[0].engine.peer_bulk_port(1), Some(4791));
    // Node 0 stated none: node 1 sends it everything on its own port.
    assert_eq!(s.nodes[1].engine.peer_bulk_port(0), None);
    // Nor does anyone learn a port from a peer it has no session with.
    assert_eq!(s.nodes[0].engine.peer_bulk_port(7), None);
}

#[test]
fn large_transfers_read_in_joined_datagrams_arrive_intact() {
    let mut joined = 0;
    for seed in 0..6 {
        let faults = Faults {
            loss: 0.05,
            dup: 0.05,
            // Datagrams join when they are due together: without jitter a
            // window sent at once arrives at once; with it, rarely.
            jitter: Nanos::from_micros(30 * (seed % 2)),
            mtu: 1472,
            // Every read joins what of its flow is due: whole windows of
            // segments, cut back at the first one's size.
            coalesce: 1.0,
            ..Faults::default()
        };
        let mut s = sim(2, faults, seed);
        let sizes = [0usize, 1, 1400, 1500, 65_536, 300_001, 1 << 20];
        for (i, &n) in sizes.iter().enumerate() {
            recv(&mut s, 1, i as u64, n, None, None);
            send(&mut s, 0, 1, i as u64, pattern(n, i as u8), None);
        }
        run(&mut s);
        let sent = completions(&mut s, 0);
        assert_eq!(sent.len(), sizes.len(), "seed {seed}");
        assert!(sent.iter().all(|c| c.error.is_none()), "{sent:?}");
        let got = completions(&mut s, 1);
        assert_eq!(got.len(), sizes.len(), "seed {seed}");
        for c in &got {
            let n = sizes[c.token as usize];
            assert_eq!((c.error, c.len), (None, n), "{c:?}");
            assert_eq!(
                s.nodes[1].app.recv[&c.token][..n],
                pattern(n, c.token as u8)[..]
            );
        }
        let rx = s.nodes[1].engine.stats();
        assert_eq!(rx.corrupt, 0, "{rx:?}");
        joined += s.counts.joined;
    }
    assert!(joined > 1000, "{joined} datagrams joined");
}
