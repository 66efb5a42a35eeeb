//! Stateless CHALLENGE cookies (PROTOCOL.md §11.5): an endpoint that must
//! know a HELLO is fresh answers it with a cookie computed from the HELLO's
//! identity and the current epoch under its private cookie key, keeps no
//! state, and accepts a HELLO that echoes a cookie of this or the previous
//! epoch. Only a holder of the job key can echo it (the echo is inside the
//! authenticated HELLO), only within two epochs, and only while we still
//! know the peer by the incarnation we knew it by when we issued it (so a
//! recorded cookie-bearing HELLO is worthless once it has been accepted).

use aws_lc_rs::hmac;

use crate::time::Instant;

/// An epoch is 2^30 ns (about 1.07 s): a cookie is good for one to two.
const EPOCH_SHIFT: u32 = 30;

/// Cookie bytes.
pub(crate) type Cookie = [u8; 16];

/// What a cookie is bound to: the HELLO's incarnation and session, ours,
/// the incarnation we know the peer by (0: none), and the address it came
/// from (a hash of our key for it): a cookie-bearing HELLO replayed from
/// another address does not verify.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bound {
    pub(crate) peer_inc: u32,
    pub(crate) peer_sess: u32,
    pub(crate) own_inc: u32,
    pub(crate) known_inc: u32,
    pub(crate) from: u64,
}

fn compute(key: &hmac::Key, epoch: u64, b: Bound) -> Cookie {
    let mut m = [0u8; 32];
    m[24..32].copy_from_slice(&b.from.to_le_bytes());
    m[..8].copy_from_slice(&epoch.to_le_bytes());
    m[8..12].copy_from_slice(&b.peer_inc.to_le_bytes());
    m[12..16].copy_from_slice(&b.peer_sess.to_le_bytes());
    m[16..20].copy_from_slice(&b.own_inc.to_le_bytes());
    m[20..24].copy_from_slice(&b.known_inc.to_le_bytes());
    let t = hmac::sign(key, &m);
    let mut c = [0u8; 16];
    c.copy_from_slice(&t.as_ref()[..16]);
    c
}

/// The cookie for a HELLO bound to `b`.
pub(crate) fn issue(key: &hmac::Key, now: Instant, b: Bound) -> Cookie {
    compute(key, now.0 >> EPOCH_SHIFT, b)
}

/// Whether `cookie` was issued for `b` in this or the previous epoch.
pub(crate) fn valid(key: &hmac::Key, now: Instant, b: Bound, cookie: &Cookie) -> bool {
    let epoch = now.0 >> EPOCH_SHIFT;
    [epoch, epoch.wrapping_sub(1)].iter().any(|&e| {
        let want = compute(key, e, b);
        // Compared without an early exit.
        want.iter()
            .zip(cookie)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_for_two_epochs_and_only_for_its_hello() {
        let k = hmac::Key::new(hmac::HMAC_SHA256, b"k");
        let t0 = Instant(5 << EPOCH_SHIFT);
        let b = |peer_inc, peer_sess, known_inc| Bound {
            peer_inc,
            peer_sess,
            own_inc: 3,
            known_inc,
            from: 77,
        };
        let c = issue(&k, t0, b(1, 2, 4));
        assert!(valid(&k, t0, b(1, 2, 4), &c));
        assert!(valid(&k, Instant(6 << EPOCH_SHIFT), b(1, 2, 4), &c));
        assert!(!valid(&k, Instant(7 << EPOCH_SHIFT), b(1, 2, 4), &c));
        assert!(!valid(&k, t0, b(1, 9, 4), &c));
        assert!(!valid(&k, t0, b(9, 2, 4), &c));
        assert!(!valid(&k, t0, b(1, 2, 1), &c));
        let elsewhere = Bound {
            from: 78,
            ..b(1, 2, 4)
        };
        assert!(!valid(&k, t0, elsewhere, &c));
        let other = hmac::Key::new(hmac::HMAC_SHA256, b"other");
        assert!(!valid(&other, t0, b(1, 2, 4), &c));
    }
}
