//! Key derivation (PROTOCOL.md §11.2): one job key, and from it with
//! HKDF-SHA256 (RFC 5869) the keys the protocol uses — the handshake key
//! every endpoint of the job shares, a key per session and direction bound
//! to both endpoints' incarnations and session ids (so each source has its
//! own keys and a datagram of one session or incarnation never verifies in
//! another), and each endpoint's private cookie key.

use aws_lc_rs::hkdf::{self, HKDF_SHA256, KeyType, Prk};
use aws_lc_rs::hmac;

use crate::wire::auth::{KEY_LEN, Key};

/// The HKDF salt: names the protocol and its version.
const SALT: &[u8] = b"ofi-xdp reliable datagram v1";

struct Len(usize);

impl KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

/// The job key after HKDF-Extract: what every other key is expanded from.
pub(crate) struct JobKeys {
    prk: Prk,
}

impl core::fmt::Debug for JobKeys {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("JobKeys(..)")
    }
}

impl JobKeys {
    pub(crate) fn new(job_key: &[u8]) -> Self {
        JobKeys {
            prk: hkdf::Salt::new(HKDF_SHA256, SALT).extract(job_key),
        }
    }

    fn expand(&self, info: &[&[u8]], out: &mut [u8]) {
        // Fails only for outputs longer than 255 hash lengths.
        let ok = self
            .prk
            .expand(info, Len(out.len()))
            .and_then(|okm| okm.fill(out));
        debug_assert!(ok.is_ok());
    }

    fn aes_key(&self, info: &[&[u8]]) -> Key {
        let mut k = [0u8; KEY_LEN];
        self.expand(info, &mut k);
        Key::new(&k)
    }

    /// The key of handshake packets (HELLO, HELLO_ACK, RESET, CHALLENGE).
    pub(crate) fn handshake(&self) -> Key {
        self.aes_key(&[b"handshake"])
    }

    /// The key of the session direction from (`src_inc`, `src_sess`) to
    /// (`dst_inc`, `dst_sess`).
    pub(crate) fn session(&self, src_inc: u32, dst_inc: u32, src_sess: u32, dst_sess: u32) -> Key {
        self.aes_key(&[
            b"session",
            &src_inc.to_le_bytes(),
            &dst_inc.to_le_bytes(),
            &src_sess.to_le_bytes(),
            &dst_sess.to_le_bytes(),
        ])
    }

    /// The key an endpoint makes its CHALLENGE cookies with; `secret` is
    /// its own (random) and never leaves it.
    pub(crate) fn cookie(&self, own_inc: u32, secret: u64) -> hmac::Key {
        let mut k = [0u8; 32];
        self.expand(
            &[b"cookie", &own_inc.to_le_bytes(), &secret.to_le_bytes()],
            &mut k,
        );
        hmac::Key::new(hmac::HMAC_SHA256, &k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::auth::{NonceField, open, seal};

    #[test]
    fn directions_and_sessions_have_distinct_keys() {
        let j = JobKeys::new(b"a job key of some length");
        let a = j.session(1, 2, 10, 20);
        let same = j.session(1, 2, 10, 20);
        let reverse = j.session(2, 1, 20, 10);
        let other_inc = j.session(3, 2, 10, 20);
        let mut buf = [0u8; 64];
        buf[1] = crate::wire::PacketType::Ack as u8;
        let n = seal(&a, &mut buf, 32, NonceField::Session(0));
        assert!(open(&same, &mut buf[..n].to_vec(), false).is_ok());
        assert!(open(&reverse, &mut buf[..n].to_vec(), false).is_err());
        assert!(open(&other_inc, &mut buf[..n].to_vec(), false).is_err());
        let other_job = JobKeys::new(b"another job key").session(1, 2, 10, 20);
        assert!(open(&other_job, &mut buf[..n].to_vec(), false).is_err());
    }
}
