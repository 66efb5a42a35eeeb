//! The job key of packet authentication (`reliability/PROTOCOL.md` §11):
//! from libfabric's `auth_key` (endpoint attribute, else domain attribute),
//! else from `FI_XDP_AUTH_KEY` (hex) or `FI_XDP_AUTH_KEY_FILE` (the file's
//! bytes). Every endpoint of a job must have the same key; without one the
//! protocol runs unauthenticated, as an endpoint with another key cannot
//! talk to it.

/// Fewest bytes a job key may have: it is the secret, 128 bits at least.
pub const MIN_KEY_LEN: usize = 16;
/// The longest key taken: a key is tens of bytes; a larger `auth_key_size`
/// is a mistake, refused before its bytes are read.
pub const MAX_KEY_LEN: usize = 4096;

/// A job key. Its `Debug` shows only its length (configurations are logged).
#[derive(Clone, PartialEq, Eq)]
pub struct JobKey(Vec<u8>);

impl std::fmt::Debug for JobKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "JobKey(<{} bytes>)", self.0.len())
    }
}

impl JobKey {
    /// `bytes` as a key, if long enough.
    pub fn new(bytes: &[u8]) -> Result<JobKey, String> {
        if bytes.len() < MIN_KEY_LEN {
            return Err(format!(
                "a job key needs at least {MIN_KEY_LEN} bytes, not {}",
                bytes.len()
            ));
        }
        Ok(JobKey(bytes.to_vec()))
    }

    /// A key written in hexadecimal (an optional `0x`, whitespace ignored).
    pub fn from_hex(text: &str) -> Result<JobKey, String> {
        let t: String = text.split_whitespace().collect();
        let t = t.strip_prefix("0x").unwrap_or(&t);
        if !t.len().is_multiple_of(2) {
            return Err("an odd number of hex digits".into());
        }
        let bytes = (0..t.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&t[i..i + 2], 16))
            .collect::<Result<Vec<u8>, _>>()
            .map_err(|_| "not hexadecimal".to_owned())?;
        JobKey::new(&bytes)
    }

    /// The key in a file: all its bytes.
    pub fn from_file(path: &str) -> Result<JobKey, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
        JobKey::new(&bytes)
    }

    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
}

/// Where an endpoint's key comes from, as the parameters say.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum KeySetting {
    /// No key: unauthenticated.
    #[default]
    None,
    Key(JobKey),
    /// A key was given and is unusable: endpoints refuse to open rather
    /// than run unauthenticated.
    Bad(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_keys_and_their_limits() {
        let k = JobKey::from_hex("0x00112233 44556677 8899aabb ccddeeff").unwrap();
        assert_eq!(k.bytes()[15], 0xff);
        assert!(JobKey::from_hex("0011").is_err(), "too short");
        assert!(
            JobKey::from_hex("00112233445566778899aabbccddeef").is_err(),
            "odd"
        );
        assert!(JobKey::from_hex("zz112233445566778899aabbccddeeff").is_err());
        assert_eq!(format!("{k:?}"), "JobKey(<16 bytes>)");
    }
}
