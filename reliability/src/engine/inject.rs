//! Copies of injected payloads (fi_inject, FI_INJECT, inject complete): the
//! bytes they hold, counted against `Config::inject_budget`, and a few
//! buffers kept from acknowledged ones — a ping-pong of small messages then
//! allocates nothing per message.

/// Buffers the store keeps for reuse, and the largest it keeps (so at most
/// 256 KiB stay allocated).
const SPARE_INJECT_BUFFERS: usize = 64;
const SPARE_INJECT_CAPACITY: usize = 4096;

/// The engine's copies of injected payloads.
#[derive(Debug, Default)]
pub(crate) struct InjectStore {
    bytes: usize,
    spare: Vec<Vec<u8>>,
}

impl InjectStore {
    /// Bytes of injected payload held now.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// A copy of `b`, in a reused buffer when one is spare.
    pub(crate) fn copy_of(&mut self, b: &[u8]) -> Vec<u8> {
        self.bytes += b.len();
        let mut v = self.spare.pop().unwrap_or_default();
        v.clear();
        v.extend_from_slice(b);
        v
    }

    /// The copy is no longer needed (its message was acknowledged or failed).
    pub(crate) fn give_back(&mut self, v: Vec<u8>) {
        self.bytes -= v.len();
        if self.spare.len() < SPARE_INJECT_BUFFERS && v.capacity() <= SPARE_INJECT_CAPACITY {
            self.spare.push(v);
        }
    }
}
