//! Registered memory of a simulated node, the RMA target the engine reaches
//! through the RMA methods of [`crate::RecvBuffers`] / [`crate::SendBuffers`]:
//! regions by key, the results that come back to initiators, and a log of
//! executed remote operations so tests can count executions.
//!
//! Atomics here are a small reference set on little-endian `u64` lanes
//! (the provider implements all of fi_atomic(3)): [`ATOMIC_ADD`] adds,
//! [`ATOMIC_CSWAP`] swaps lanes equal to their compare values.

use std::collections::HashMap;

use crate::rma::{Access, RmaStatus};

/// Simulated atomic operation: lane-wise wrapping add.
pub const ATOMIC_ADD: u8 = 0;
/// Simulated atomic operation: compare and swap (operands are the new
/// values, then the compare values).
pub const ATOMIC_CSWAP: u8 = 1;
/// The only simulated datatype: `u64`.
pub const DATATYPE_U64: u8 = 0;

/// The RMA target and result methods of [`crate::RecvBuffers`], for an impl
/// block of a type whose field `$mem` is a [`Memory`].
#[macro_export]
macro_rules! rma_target_in {
    ($mem:ident) => {
        fn rma_check(
            &mut self,
            key: u64,
            addr: u64,
            len: u64,
            access: $crate::Access,
        ) -> Result<(), $crate::RmaStatus> {
            self.$mem.checks += 1;
            self.$mem.check(key, addr, len, access)
        }

        fn rma_write(&mut self, key: u64, addr: u64, src: &[u8]) -> Result<(), $crate::RmaStatus> {
            self.$mem.write(key, addr, src)
        }

        fn rma_atomic(
            &mut self,
            key: u64,
            addr: u64,
            op: u8,
            datatype: u8,
            operands: &[u8],
            result: &mut [u8],
        ) -> Result<(), $crate::RmaStatus> {
            self.$mem.atomic(key, addr, op, datatype, operands, result)
        }

        fn rma_remote_done(&mut self, key: u64, access: $crate::Access) {
            self.$mem.executed.push((key, access));
        }

        fn rma_result(&mut self, token: u64, offset: usize, src: &[u8]) {
            self.$mem.result(token, offset, src);
        }
    };
}

/// A registered region: its bytes start at address `base`.
#[derive(Debug, Clone)]
pub struct Region {
    pub base: u64,
    pub bytes: Vec<u8>,
    pub access: Access,
}

/// A node's registered memory and its RMA results.
#[derive(Debug, Default)]
pub struct Memory {
    /// Regions by key.
    pub regions: HashMap<u64, Region>,
    /// Results by operation token (reads' data, atomics' fetched values),
    /// sized by the test when it posts.
    pub results: HashMap<u64, Vec<u8>>,
    /// Executed remote operations, in order: (key, access).
    pub executed: Vec<(u64, Access)>,
    /// Addresses a write cannot copy to although the range check admits
    /// them, as memory registered from NULL that is mapped read-only.
    pub unwritable: Vec<std::ops::Range<u64>>,
    /// Addresses a read's response cannot copy from although the check
    /// admitted them (unmapped since, in memory registered from NULL).
    pub unreadable: Vec<std::ops::Range<u64>>,
    /// Range checks asked for (`rma_check`): one per operation.
    pub checks: usize,
}

/// Whether `[addr, addr + len)` overlaps any of `ranges`.
fn touches(ranges: &[std::ops::Range<u64>], addr: u64, len: usize) -> bool {
    let end = addr.saturating_add(len as u64);
    ranges.iter().any(|u| u.start < end && addr < u.end)
}

impl Memory {
    /// The bytes of `[addr, addr + len)` of `key` if allowed for `access`.
    pub fn check(&self, key: u64, addr: u64, len: u64, access: Access) -> Result<(), RmaStatus> {
        let r = self.regions.get(&key).ok_or(RmaStatus::UnknownKey)?;
        let end = addr.checked_add(len).ok_or(RmaStatus::OutOfRange)?;
        if addr < r.base || end > r.base + r.bytes.len() as u64 {
            return Err(RmaStatus::OutOfRange);
        }
        if !r.access.contains(access) {
            return Err(RmaStatus::NoAccess);
        }
        Ok(())
    }

    fn slice(&mut self, key: u64, addr: u64, len: usize) -> Option<&mut [u8]> {
        let r = self.regions.get_mut(&key)?;
        let at = usize::try_from(addr.checked_sub(r.base)?).ok()?;
        r.bytes.get_mut(at..at.checked_add(len)?)
    }

    pub fn write(&mut self, key: u64, addr: u64, src: &[u8]) -> Result<(), RmaStatus> {
        if touches(&self.unwritable, addr, src.len()) {
            return Err(RmaStatus::OutOfRange);
        }
        let d = self
            .slice(key, addr, src.len())
            .ok_or(RmaStatus::OutOfRange)?;
        d.copy_from_slice(src);
        Ok(())
    }

    pub fn read(&mut self, key: u64, addr: u64, dst: &mut [u8]) -> Result<(), RmaStatus> {
        if touches(&self.unreadable, addr, dst.len()) {
            return Err(RmaStatus::OutOfRange);
        }
        let s = self
            .slice(key, addr, dst.len())
            .ok_or(RmaStatus::OutOfRange)?;
        dst.copy_from_slice(s);
        Ok(())
    }

    pub fn atomic(
        &mut self,
        key: u64,
        addr: u64,
        op: u8,
        datatype: u8,
        operands: &[u8],
        result: &mut [u8],
    ) -> Result<(), RmaStatus> {
        let lanes = match op {
            ATOMIC_ADD => operands.len(),
            ATOMIC_CSWAP => operands.len() / 2,
            _ => return Err(RmaStatus::Invalid),
        };
        if datatype != DATATYPE_U64
            || !lanes.is_multiple_of(8)
            || (op == ATOMIC_CSWAP && !operands.len().is_multiple_of(16))
            || (!result.is_empty() && result.len() != lanes)
        {
            return Err(RmaStatus::Invalid);
        }
        let access = if result.is_empty() {
            Access::WRITE
        } else {
            Access::READ | Access::WRITE
        };
        self.check(key, addr, lanes as u64, access)?;
        let mem = self.slice(key, addr, lanes).ok_or(RmaStatus::OutOfRange)?;
        let word = |b: &[u8], i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[i * 8..i * 8 + 8]);
            u64::from_le_bytes(w)
        };
        for i in 0..lanes / 8 {
            let old = word(mem, i);
            let new = match op {
                ATOMIC_ADD => old.wrapping_add(word(operands, i)),
                _ if old == word(&operands[lanes..], i) => word(operands, i),
                _ => old,
            };
            if !result.is_empty() {
                result[i * 8..i * 8 + 8].copy_from_slice(&old.to_le_bytes());
            }
            mem[i * 8..i * 8 + 8].copy_from_slice(&new.to_le_bytes());
        }
        Ok(())
    }

    pub fn result(&mut self, token: u64, offset: usize, src: &[u8]) {
        if let Some(b) = self.results.get_mut(&token)
            && let Some(d) = b.get_mut(offset..offset + src.len())
        {
            d.copy_from_slice(src);
        }
    }
}
