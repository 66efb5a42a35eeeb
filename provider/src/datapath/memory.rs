//! Registered memory as RMA targets see it (fi_mr(3)): the domain's table
//! of registrations by key, the check every remote operation passes before
//! a byte is touched — key, range, access (fi_rma(3), fi_atomic(3)) — and
//! the copies into and out of the application's registered buffers.
//!
//! The MR objects (`crate::mr`) fill the table; the data path reads it in
//! its progress, when the target executes an operation.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use libc::c_int;
use ofi_xdp_reliability::{Access, RmaStatus};

use super::atomics;
use super::iov::{gather, scatter};
use crate::abi::lock;
use crate::sys::*;

/// A counter a registration is bound to (fi_mr_bind with FI_REMOTE_READ /
/// FI_REMOTE_WRITE, FI_RMA_EVENT): the counter object, seen from below.
pub trait RemoteCounter: Send + Sync {
    fn add(&self, n: u64);
}

/// One registration.
pub struct Region {
    /// The application's buffers as (address, length), concatenated.
    pub ranges: Vec<(usize, usize)>,
    /// Bytes of all ranges.
    pub len: u64,
    /// The address initiators give for the region's first byte: its
    /// virtual address (FI_MR_VIRT_ADDR), or the registration's `offset`.
    pub iova: u64,
    /// FI_REMOTE_READ | FI_REMOTE_WRITE as registered.
    pub access: u64,
    /// Its one range starts at NULL: the address space itself, not buffers the
    /// application allocated (MPICH registers a dynamic window as NULL and
    /// UINTPTR_MAX bytes and attaches memory to it later, MPI_Win_attach).
    /// An initiator may name any address in it, mapped or not, so its
    /// copies go through `process_vm_readv`/`process_vm_writev` on this
    /// process, which fail (EFAULT) where a plain copy would fault.
    pub from_null: bool,
    /// Counters bound to it, with the events they count.
    pub counters: Mutex<Vec<(u64, Arc<dyn RemoteCounter>)>>,
}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Region")
            .field("ranges", &self.ranges)
            .field("iova", &self.iova)
            .field("access", &self.access)
            .finish_non_exhaustive()
    }
}

impl Region {
    /// The offset of `[addr, addr + len)` in the region, if it lies inside.
    fn offset_of(&self, addr: u64, len: u64) -> Option<usize> {
        let off = addr.checked_sub(self.iova)?;
        (off.checked_add(len)? <= self.len).then_some(off as usize)
    }

    /// Whether the registration grants `access`.
    fn grants(&self, access: Access) -> bool {
        (!access.contains(Access::READ) || self.access & FI_REMOTE_READ != 0)
            && (!access.contains(Access::WRITE) || self.access & FI_REMOTE_WRITE != 0)
    }
}

/// A domain's registrations by key.
#[derive(Debug, Default)]
pub struct Registry {
    regions: RwLock<HashMap<u64, Arc<Region>>>,
    /// Held around every atomic's read-modify-write: atomic with respect to
    /// each other (fi_atomic(3)), whichever endpoint's progress runs them.
    atomics: Mutex<()>,
}

impl Registry {
    /// Add `region` under `key`; gives it back if the key is taken.
    pub fn insert(&self, key: u64, region: Region) -> Result<(), Region> {
        let mut t = self.regions.write().unwrap_or_else(|e| e.into_inner());
        if t.contains_key(&key) {
            return Err(region);
        }
        t.insert(key, Arc::new(region));
        Ok(())
    }

    /// Whether `key` is registered.
    pub fn contains(&self, key: u64) -> bool {
        let t = self.regions.read().unwrap_or_else(|e| e.into_inner());
        t.contains_key(&key)
    }

    /// Bind `counter` to count `events` (FI_REMOTE_READ / FI_REMOTE_WRITE)
    /// on registration `key`; false if there is none.
    pub fn bind(&self, key: u64, events: u64, counter: Arc<dyn RemoteCounter>) -> bool {
        let t = self.regions.read().unwrap_or_else(|e| e.into_inner());
        let Some(r) = t.get(&key) else { return false };
        lock(&r.counters).push((events, counter));
        true
    }

    /// A peer's operation with `events` executed on `key`: its counters count it.
    pub fn count(&self, key: u64, events: u64) {
        let region = {
            let t = self.regions.read().unwrap_or_else(|e| e.into_inner());
            t.get(&key).cloned()
        };
        if let Some(r) = region {
            for (e, c) in lock(&r.counters).iter() {
                if e & events != 0 {
                    c.add(1);
                }
            }
        }
    }

    pub fn remove(&self, key: u64) {
        let mut t = self.regions.write().unwrap_or_else(|e| e.into_inner());
        t.remove(&key);
    }

    /// Whether an RMA operation on `[addr, addr + len)` of `key` may run:
    /// the range lies inside, the registration grants `access`, and in the
    /// address space (a region from NULL) it is also memory — the initiator
    /// hears of an address nothing is mapped at. (The copies that follow
    /// need no such probe: in a region from NULL they fail where nothing is.)
    pub fn admits(&self, key: u64, addr: u64, len: u64, access: Access) -> Result<(), RmaStatus> {
        let (region, off) = self.check(key, addr, len, access)?;
        if region.from_null && !mapped(off, len as usize) {
            return Err(RmaStatus::OutOfRange);
        }
        Ok(())
    }

    /// The region of `key` and the offset of `[addr, addr + len)` in it, if
    /// the range lies inside and the registration grants `access`.
    fn check(
        &self,
        key: u64,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<(Arc<Region>, usize), RmaStatus> {
        let region = {
            let t = self.regions.read().unwrap_or_else(|e| e.into_inner());
            t.get(&key).cloned().ok_or(RmaStatus::UnknownKey)?
        };
        let off = region.offset_of(addr, len).ok_or(RmaStatus::OutOfRange)?;
        if !region.grants(access) {
            return Err(RmaStatus::NoAccess);
        }
        Ok((region, off))
    }

    /// Copy `src` to `addr` of `key` (a write's segment) if it lies inside
    /// and, in a region from NULL, is mapped writable; else the write fails
    /// (its initiator's completion says so) and is logged.
    pub fn write(&self, key: u64, addr: u64, src: &[u8]) -> Result<(), RmaStatus> {
        let (r, off) = self.check(key, addr, src.len() as u64, Access::WRITE)?;
        if put(&r, off, src) {
            return Ok(());
        }
        crate::xdp_warn!(
            FI_LOG_EP_DATA,
            "RMA write of {} bytes to address {addr:#x} (key {key}, registered from NULL): \
             not mapped writable here, the write fails",
            src.len()
        );
        Err(RmaStatus::OutOfRange)
    }

    /// Copy `addr` of `key` into `dst` (a read's response); fails if it
    /// does not lie inside (the registration was closed meanwhile) or, in
    /// a region from NULL, is not mapped (unmapped since the check).
    pub fn read(&self, key: u64, addr: u64, dst: &mut [u8]) -> Result<(), RmaStatus> {
        let (r, off) = self.check(key, addr, dst.len() as u64, Access::READ)?;
        if get(&r, off, dst) {
            Ok(())
        } else {
            Err(RmaStatus::OutOfRange)
        }
    }

    /// Execute an atomic (PROTOCOL.md §8.4): `op` on `datatype` at `addr`
    /// of `key` with the wire's `payload`, old values into `result`.
    pub fn atomic(
        &self,
        key: u64,
        addr: u64,
        op: c_int,
        datatype: c_int,
        payload: &[u8],
        result: &mut [u8],
    ) -> Result<(), RmaStatus> {
        let (form, count, operands, compare) =
            atomics::lengths(op, datatype, payload, result.len()).ok_or(RmaStatus::Invalid)?;
        let size = atomics::datatype_size(datatype).ok_or(RmaStatus::Invalid)?;
        let access = match form {
            atomics::Form::Plain => Access::WRITE,
            _ if op == FI_ATOMIC_READ => Access::READ,
            _ => Access::READ | Access::WRITE,
        };
        let bytes = count * size;
        let (r, off) = self.check(key, addr, bytes as u64, access)?;
        let mut target = vec![0u8; bytes];
        let _serial = lock(&self.atomics);
        if !get(&r, off, &mut target) {
            return Err(RmaStatus::OutOfRange);
        }
        atomics::execute(op, datatype, &mut target, operands, compare, result);
        if op != FI_ATOMIC_READ && !put(&r, off, &target) {
            return Err(RmaStatus::OutOfRange);
        }
        Ok(())
    }
}

/// Copy `src` into region `r` at `off` (checked against it); false if the
/// region is from NULL and that memory is not mapped writable.
fn put(r: &Region, off: usize, src: &[u8]) -> bool {
    if r.from_null {
        return this_process_copy(off, src.as_ptr().cast_mut(), src.len(), true);
    }
    // SAFETY: registered buffers stay valid and writable while registered
    // (fi_mr(3)); the range was checked against them.
    unsafe { scatter(&r.ranges, off, src) };
    true
}

/// Copy region `r` at `off` (checked against it) into `dst`; false if the
/// region is from NULL and that memory is not mapped.
fn get(r: &Region, off: usize, dst: &mut [u8]) -> bool {
    if r.from_null {
        return this_process_copy(off, dst.as_mut_ptr(), dst.len(), false);
    }
    // SAFETY: as for `put`, readable while registered.
    unsafe { gather(&r.ranges, off, dst) };
    true
}

/// Whether every page of `[at, at + len)` in this process is mapped
/// readable: one byte of each read with process_vm_readv(2), up to
/// `PROBES` pages a call (an RMA operation into a region from NULL spans a
/// few; what the copy later finds unwritable is logged and dropped there).
fn mapped(at: usize, len: usize) -> bool {
    const PAGE: usize = 4096;
    const PROBES: usize = 1024;
    let Some(end) = at.checked_add(len) else {
        return false;
    };
    let mut scratch = [0u8; PROBES];
    let mut remote: Vec<libc::iovec> = Vec::with_capacity(PROBES);
    let mut page = at;
    while page < end {
        remote.clear();
        while page < end && remote.len() < PROBES {
            remote.push(libc::iovec {
                iov_base: page as *mut libc::c_void,
                iov_len: 1,
            });
            page = (page / PAGE + 1) * PAGE;
        }
        let local = libc::iovec {
            iov_base: scratch.as_mut_ptr().cast(),
            iov_len: remote.len(),
        };
        // SAFETY: `local` is our scratch buffer, as long as the probes;
        // the kernel checks `remote` itself.
        let n = unsafe {
            libc::process_vm_readv(
                libc::getpid(),
                &local,
                1,
                remote.as_ptr(),
                remote.len() as libc::c_ulong,
                0,
            )
        };
        if usize::try_from(n) != Ok(remote.len()) {
            return false;
        }
    }
    true
}

/// `len` bytes between our buffer `ours` and address `at` of this
/// process's address space (a region from NULL: the offset is the
/// address), written there (`to_address`) or read from there, through
/// process_vm_writev(2)/process_vm_readv(2): where nothing is mapped (or,
/// for a write, nothing writable) they fail with EFAULT instead of faulting.
fn this_process_copy(at: usize, ours: *mut u8, len: usize, to_address: bool) -> bool {
    if len == 0 {
        return true;
    }
    let local = libc::iovec {
        iov_base: ours.cast(),
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: at as *mut libc::c_void,
        iov_len: len,
    };
    // SAFETY: `local` is the caller's buffer of `len` bytes; the kernel
    // checks `remote` itself and copies only where it is mapped.
    let n = unsafe {
        let pid = libc::getpid();
        if to_address {
            libc::process_vm_writev(pid, &local, 1, &remote, 1, 0)
        } else {
            libc::process_vm_readv(pid, &local, 1, &remote, 1, 0)
        }
    };
    usize::try_from(n) == Ok(len)
}
