//! Packet authentication (PROTOCOL.md §11): the engine's keys and the
//! checks an authenticated datagram passes before it touches any state.
//!
//! - `keys.rs`: HKDF from the job key to the handshake key, the per-source
//!   per-session keys and the cookie key;
//! - `replay.rs`: each session direction's anti-replay window;
//! - `cookie.rs`: stateless CHALLENGE cookies;
//! - this file: the engine's handshake sealing (salt and counter), and a
//!   session's keys.
//!
//! With authentication off none of this exists: the engine holds `None`
//! and every datagram is CRC-sealed as before.

mod cookie;
mod keys;
mod replay;

pub(crate) use cookie::Cookie;

use aws_lc_rs::hmac;

use crate::api::AuthConfig;
use crate::rng::SplitMix64;
use crate::time::Instant;
use crate::wire::auth::{self as wa, Key, NonceField};
use keys::JobKeys;
use replay::ReplayWindow;

/// The engine's authentication state.
#[derive(Debug)]
pub(crate) struct EngineAuth {
    job: JobKeys,
    handshake: Key,
    cookie: CookieKey,
    /// Our incarnation (bound into cookies and session keys).
    own_inc: u32,
    /// This engine's part of every handshake nonce (§11.3).
    salt: u32,
    /// The next handshake counter: starts at a random value below 2^63 and
    /// only grows, so a peer can tell a newer HELLO of ours from a replay.
    hs_counter: u64,
    /// Encrypt DATA payloads (flag ENC).
    pub(crate) encrypt: bool,
    /// A received datagram is gathered here, verified and decrypted in place.
    pub(crate) scratch: Vec<u8>,
}

struct CookieKey(hmac::Key);

impl core::fmt::Debug for CookieKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("CookieKey(..)")
    }
}

impl EngineAuth {
    pub(crate) fn new(cfg: &AuthConfig, own_inc: u32, rng: &mut SplitMix64) -> Self {
        let job = JobKeys::new(&cfg.key);
        let handshake = job.handshake();
        let cookie = CookieKey(job.cookie(own_inc, rng.next_u64()));
        EngineAuth {
            handshake,
            cookie,
            own_inc,
            salt: rng.nonzero_u32(),
            hs_counter: rng.next_u64() >> 1,
            encrypt: cfg.encrypt,
            scratch: Vec::new(),
            job,
        }
    }

    /// Seal a handshake datagram (body `buf[..body_len]`, header with AUTH).
    pub(crate) fn seal_handshake(&mut self, buf: &mut [u8], body_len: usize) -> usize {
        let nonce = NonceField::Handshake {
            salt: self.salt,
            counter: self.hs_counter,
        };
        self.hs_counter += 1;
        wa::seal(&self.handshake, buf, body_len, nonce)
    }

    /// Verify a handshake datagram in place: its body length and handshake
    /// counter.
    pub(crate) fn open_handshake(&self, buf: &mut [u8]) -> Result<(usize, u64), ()> {
        let Some((NonceField::Handshake { counter, .. }, _)) = wa::nonce_of(buf, true) else {
            return Err(());
        };
        let body = wa::open(&self.handshake, buf, true).map_err(|_| ())?;
        Ok((body, counter))
    }

    /// The keys of the session between us (`own_sess`) and incarnation
    /// `peer_inc` (`peer_sess`).
    pub(crate) fn session_keys(&self, peer_inc: u32, own_sess: u32, peer_sess: u32) -> SessionKeys {
        SessionKeys {
            tx: self
                .job
                .session(self.own_inc, peer_inc, own_sess, peer_sess),
            rx: self
                .job
                .session(peer_inc, self.own_inc, peer_sess, own_sess),
            tx_counter: 0,
            window: ReplayWindow::default(),
        }
    }

    fn bound(&self, hello: HelloId, known_inc: u32) -> cookie::Bound {
        cookie::Bound {
            peer_inc: hello.inc,
            peer_sess: hello.sess,
            own_inc: self.own_inc,
            known_inc,
            from: hello.from,
        }
    }

    /// A cookie for `hello`, from a peer we know by `known_inc` (0: not at all).
    pub(crate) fn cookie(&self, now: Instant, hello: HelloId, known_inc: u32) -> Cookie {
        cookie::issue(&self.cookie.0, now, self.bound(hello, known_inc))
    }

    /// Whether `hello` echoes cookie `c` we issued for it lately, from the
    /// same address, while we knew the peer by the incarnation we know it
    /// by now.
    pub(crate) fn cookie_valid(
        &self,
        now: Instant,
        hello: HelloId,
        known_inc: u32,
        c: &Cookie,
    ) -> bool {
        cookie::valid(&self.cookie.0, now, self.bound(hello, known_inc), c)
    }
}

/// Who a HELLO says it is: its incarnation and session id, and where it
/// came from (a hash of the caller's key for the source address).
#[derive(Clone, Copy, Debug)]
pub(crate) struct HelloId {
    pub(crate) inc: u32,
    pub(crate) sess: u32,
    pub(crate) from: u64,
}

impl HelloId {
    pub(crate) fn new<P: core::hash::Hash>(inc: u32, sess: u32, from: &P) -> Self {
        use core::hash::BuildHasher;
        HelloId {
            inc,
            sess,
            from: crate::slab::FxBuild::default().hash_one(from),
        }
    }
}

/// A session's keys: one per direction, our nonce counter, and the replay
/// window of what we receive.
#[derive(Debug)]
pub(crate) struct SessionKeys {
    tx: Key,
    rx: Key,
    tx_counter: u64,
    window: ReplayWindow,
}

impl SessionKeys {
    /// Seal a datagram of this session (header with AUTH).
    pub(crate) fn seal(&mut self, buf: &mut [u8], body_len: usize) -> usize {
        let n = NonceField::Session(self.tx_counter);
        self.tx_counter += 1;
        wa::seal(&self.tx, buf, body_len, n)
    }

    /// Verify a datagram of this session in place and check it is not a
    /// replay. Its body length, or why it is rejected.
    pub(crate) fn open(&mut self, buf: &mut [u8]) -> Result<usize, Reject> {
        let Some((NonceField::Session(counter), _)) = wa::nonce_of(buf, false) else {
            return Err(Reject::Forged);
        };
        let body = wa::open(&self.rx, buf, false).map_err(|_| Reject::Forged)?;
        if !self.window.accept(counter) {
            return Err(Reject::Replayed);
        }
        Ok(body)
    }
}

/// Why an authenticated datagram was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reject {
    /// The tag did not verify.
    Forged,
    /// Verified, but seen before (or too old to tell).
    Replayed,
}
