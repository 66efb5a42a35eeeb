//! An attacker on the simulated segment: it sees every datagram the network
//! delivers and injects its own — replays of captured datagrams (to their
//! destination, to another node, reflected back to their sender), captured
//! datagrams with bits flipped or cut short, and session-shaped forgeries
//! built on sniffed session ids (re-sealed with a valid CRC, or carrying a
//! made-up authentication trailer) — from the real peer's key (spoofed) or
//! from a third address. Its own generator drives it, so the network's
//! faults are the same with and without it.

use std::collections::VecDeque;

use crate::rng::SplitMix64;
use crate::wire::{self, flags as wf};

/// What the adversary does.
#[derive(Clone, Copy, Debug)]
pub struct AdversaryConfig {
    /// Datagrams injected per datagram the network delivers (may exceed 1).
    pub rate: f64,
    /// Seed of its generator.
    pub seed: u64,
    /// Captured datagrams it remembers (the oldest are forgotten).
    pub memory: usize,
}

impl Default for AdversaryConfig {
    fn default() -> Self {
        AdversaryConfig {
            rate: 0.5,
            seed: 0xBAD,
            memory: 4096,
        }
    }
}

/// Datagrams injected, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AdversaryCounts {
    /// Captured datagrams replayed to their destination, spoofing their source.
    pub replayed: u64,
    /// Replayed to another node.
    pub replayed_elsewhere: u64,
    /// Sent back to their sender as if from their destination.
    pub reflected: u64,
    /// With one to three bits flipped.
    pub flipped: u64,
    /// Cut short.
    pub truncated: u64,
    /// Forged on sniffed session ids.
    pub forged: u64,
    /// Of all the above, sent from the adversary's own (third) address.
    pub from_third: u64,
}

impl AdversaryCounts {
    /// All datagrams injected.
    pub fn total(&self) -> u64 {
        self.replayed
            + self.replayed_elsewhere
            + self.reflected
            + self.flipped
            + self.truncated
            + self.forged
    }
}

/// The attacker.
#[derive(Debug)]
pub struct Adversary {
    cfg: AdversaryConfig,
    rng: SplitMix64,
    captured: VecDeque<(usize, usize, Vec<u8>)>,
    /// What it injected.
    pub counts: AdversaryCounts,
}

impl Adversary {
    /// A new attacker.
    pub fn new(cfg: AdversaryConfig) -> Self {
        Adversary {
            rng: SplitMix64::new(cfg.seed),
            captured: VecDeque::new(),
            cfg,
            counts: AdversaryCounts::default(),
        }
    }

    fn below(&mut self, n: u64) -> u64 {
        self.rng.next_u64() % n.max(1)
    }

    /// It sees a datagram `src` → `dst`.
    pub(crate) fn capture(&mut self, src: usize, dst: usize, bytes: &[u8]) {
        if self.captured.len() >= self.cfg.memory {
            self.captured.pop_front();
        }
        self.captured.push_back((src, dst, bytes.to_vec()));
    }

    /// How many datagrams to inject now.
    pub(crate) fn shots(&mut self) -> u64 {
        let whole = self.cfg.rate.floor() as u64;
        let frac = self.cfg.rate - whole as f64;
        let extra = (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= frac;
        whole + u64::from(extra && frac > 0.0)
    }

    /// One injected datagram among `nodes` nodes: (claimed source, destination, bytes).
    /// The third address is key `nodes`.
    pub(crate) fn attack(&mut self, nodes: usize) -> Option<(usize, usize, Vec<u8>)> {
        if self.captured.is_empty() || nodes == 0 {
            return None;
        }
        let i = self.below(self.captured.len() as u64) as usize;
        let (src, dst, mut b) = self.captured[i].clone();
        let (mut from, mut to) = (src, dst);
        match self.below(6) {
            0 => self.counts.replayed += 1,
            1 => {
                to = self.below(nodes as u64) as usize;
                self.counts.replayed_elsewhere += 1;
            }
            2 => {
                (from, to) = (dst, src);
                self.counts.reflected += 1;
            }
            3 => {
                for _ in 0..=self.below(3) {
                    let bit = self.below(b.len() as u64 * 8) as usize;
                    b[bit / 8] ^= 1 << (bit % 8);
                }
                self.counts.flipped += 1;
            }
            4 => {
                let n = self.below(b.len() as u64) as usize;
                b.truncate(n);
                self.counts.truncated += 1;
            }
            _ => {
                b = self.forge(&b);
                self.counts.forged += 1;
            }
        }
        if self.below(8) == 0 {
            from = nodes;
            self.counts.from_third += 1;
        }
        Some((from, to, b))
    }

    /// A datagram on the sniffed session ids of `seen`: a random type,
    /// flags, sequence and ack fields and payload, sealed with a valid CRC
    /// or, half the time, with flag AUTH and a made-up trailer.
    fn forge(&mut self, seen: &[u8]) -> Vec<u8> {
        let mut ids = [0u8; 8];
        if seen.len() >= 12 {
            ids.copy_from_slice(&seen[4..12]);
        }
        let types = [1u8, 2, 3, 4, 5, 5, 5, 6, 7, 8, 16, 17];
        let ty = types[self.below(types.len() as u64) as usize];
        let payload = if ty == 5 {
            self.below(1500) as usize
        } else {
            0
        };
        let body = match ty {
            4 => wire::COMMON_LEN,
            5 => wire::DATA_HDR_LEN + payload,
            _ => wire::COMMON_LEN + wire::CTRL_EXT_LEN,
        };
        let auth = self.below(2) == 0;
        let mut b = vec![0u8; body + 64];
        for x in b.iter_mut() {
            *x = self.rng.next_u64() as u8;
        }
        b[0] = wire::VERSION;
        b[1] = ty;
        let mut fl = (self.rng.next_u64() as u16) & (wf::ACK | wf::FIRST | wf::TAGGED | wf::RNR);
        if ty == 5 {
            fl |= wf::FIRST;
        }
        if auth {
            fl |= wf::AUTH;
        }
        b[2..4].copy_from_slice(&fl.to_le_bytes());
        b[4..12].copy_from_slice(&ids);
        b[22..24].copy_from_slice(&(payload as u16).to_le_bytes());
        if ty == 5 {
            // A whole message in one packet: the receiver would buffer it.
            b[36..40].copy_from_slice(&(payload as u32).to_le_bytes());
            b[40..44].copy_from_slice(&0u32.to_le_bytes());
        }
        if auth {
            let extra = if ty == 1 || ty == 2 || ty == 3 || ty == 16 {
                wire::auth::HS_EXT_LEN + wire::auth::HANDSHAKE_NONCE_LEN
            } else {
                wire::auth::SESSION_NONCE_LEN
            };
            b.truncate(body + extra + wire::auth::TAG_LEN);
            b
        } else {
            let n = wire::seal(&mut b, body);
            b.truncate(n);
            b
        }
    }
}
