//! Address vector (fi_av(3)): FI_AV_TABLE and FI_AV_MAP. Both hand out
//! the slot index as fi_addr_t (allowed for MAP: the value is opaque).
//! Slots are never reused after fi_av_remove, so a stale fi_addr_t can
//! never silently address a different peer.
//!
//! A named AV (`attr->name`, FI_SHARED_AV) keeps its slots in shared
//! memory (`shared.rs`), where every process of the host that opens the
//! name sees them; this process's table is then a cache of it, brought up
//! to date whenever the shared one has grown or lost an address.

mod shared;

use shared::SharedTable;

use std::collections::HashMap;
use std::ffi::CStr;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, RwLock};

use libc::{c_char, c_int, c_void, size_t};

use crate::abi::{Errno, Result, guard_int, guard_value, lock};
use crate::addr::{self, AddrFormat, XdpAddr};
use crate::domain::Domain;
use crate::object::{self, FidObject, Refs, obj};
use crate::sys::*;

#[derive(Default)]
struct Table {
    slots: Vec<Option<XdpAddr>>,
    by_sock: HashMap<SocketAddr, usize>,
    /// The shared table's (len, removal generation) this cache reflects.
    synced: (usize, u64),
}

pub struct Av {
    /// Endpoints bound to this AV.
    pub refs: Refs,
    pub domain: Arc<Domain>,
    pub av_type: c_int,
    pub format: AddrFormat,
    /// Opened with FI_EVENT: insertions complete through the bound EQ.
    asynchronous: bool,
    table: RwLock<Table>,
    eq: Mutex<Option<Arc<crate::eq::Eq>>>,
    /// A named AV's shared table.
    shared: Option<SharedTable>,
}

impl Av {
    /// Bring the cache up to date with the shared table (named AVs): new
    /// slots are appended; after a removal anywhere, everything is re-read.
    fn sync(&self) {
        let Some(sh) = &self.shared else { return };
        let now = sh.version();
        if self.table.read().unwrap_or_else(|e| e.into_inner()).synced == now {
            return;
        }
        let mut t = self.table.write().unwrap_or_else(|e| e.into_inner());
        if now.1 != t.synced.1 {
            t.slots.clear();
            t.by_sock.clear();
        }
        for i in t.slots.len()..now.0 {
            let a = sh.get(i);
            if let Some(a) = a {
                t.by_sock.insert(a.socket_addr(), i);
            }
            t.slots.push(a);
        }
        t.synced = now;
    }

    /// The peer behind `fi_addr`, if inserted and not removed.
    pub fn lookup(&self, fi_addr: fi_addr_t) -> Option<XdpAddr> {
        self.sync();
        let t = self.table.read().unwrap_or_else(|e| e.into_inner());
        usize::try_from(fi_addr)
            .ok()
            .and_then(|i| t.slots.get(i).copied().flatten())
    }

    /// Reverse lookup for FI_SOURCE: the fi_addr of a peer (by IP and UDP
    /// port; an incarnation of 0 on either side matches any).
    pub fn reverse(&self, a: &XdpAddr) -> Option<fi_addr_t> {
        self.sync();
        let t = self.table.read().unwrap_or_else(|e| e.into_inner());
        let i = *t.by_sock.get(&a.socket_addr())?;
        let stored = t.slots.get(i).copied().flatten()?;
        (stored.incarnation == 0 || a.incarnation == 0 || stored.incarnation == a.incarnation)
            .then_some(i as fi_addr_t)
    }

    /// Insert one decoded address, returning its fi_addr (`None`: a full
    /// shared table).
    pub fn insert_one(&self, a: XdpAddr) -> Option<fi_addr_t> {
        if let Some(sh) = &self.shared {
            let i = sh.insert(&a).ok()?;
            self.sync();
            return Some(i as fi_addr_t);
        }
        let mut t = self.table.write().unwrap_or_else(|e| e.into_inner());
        let i = t.slots.len();
        t.slots.push(Some(a));
        t.by_sock.insert(a.socket_addr(), i);
        Some(i as fi_addr_t)
    }

    fn remove_one(&self, fi_addr: fi_addr_t) -> bool {
        let Ok(i) = usize::try_from(fi_addr) else {
            return false;
        };
        if let Some(sh) = &self.shared {
            let removed = sh.remove(i).unwrap_or(false);
            self.sync();
            return removed;
        }
        let mut t = self.table.write().unwrap_or_else(|e| e.into_inner());
        let Some(Some(a)) = t.slots.get(i).copied() else {
            return false;
        };
        t.slots[i] = None;
        if t.by_sock.get(&a.socket_addr()) == Some(&i) {
            t.by_sock.remove(&a.socket_addr());
        }
        true
    }
}

#[repr(C)]
pub struct AvObj {
    pub fid: fid_av,
    pub inner: Arc<Av>,
}

static AV_FI_OPS: fi_ops = object::fi_ops_of::<AvObj>(Some(av_bind), None);
static AV_OPS: fi_ops_av = fi_ops_av {
    size: size_of::<fi_ops_av>(),
    insert: Some(av_insert),
    insertsvc: Some(av_insertsvc),
    insertsym: Some(av_insertsym),
    remove: Some(av_remove),
    lookup: Some(av_lookup),
    straddr: Some(av_straddr),
    av_set: Some(av_set),
};

// SAFETY: repr(C), fid_av first, AV_FI_OPS in every instance.
unsafe impl FidObject for AvObj {
    const CLASS: usize = FI_CLASS_AV;
    const CLOSE: &'static str = "av close";
    fn fi_ops() -> *const fi_ops {
        &AV_FI_OPS
    }
    fn refs(&self) -> Option<&Refs> {
        Some(&self.inner.refs)
    }
    fn release(&self) {
        if let Some(eq) = lock(&self.inner.eq).take() {
            eq.refs.put();
        }
        self.inner.domain.refs.put();
    }
}

/// `fi_ops_domain::av_open`.
pub unsafe extern "C" fn xdp_av_open(
    domain: *mut fid_domain,
    attr: *mut fi_av_attr,
    av: *mut *mut fid_av,
    context: *mut c_void,
) -> c_int {
    guard_int("fi_av_open", || {
        // SAFETY: validated by domain_of.
        let domain = unsafe { crate::domain::domain_of(domain) }?;
        // SAFETY: attr NULL or valid.
        let a = unsafe { attr.as_ref() }.ok_or(Errno::INVAL)?;
        if av.is_null() {
            return Err(Errno::INVAL);
        }
        let av_type = match a.type_ {
            FI_AV_UNSPEC => FI_AV_TABLE,
            t @ (FI_AV_MAP | FI_AV_TABLE) => t,
            _ => return Err(Errno::INVAL),
        };
        if domain.info.av_type != FI_AV_UNSPEC && domain.info.av_type != av_type {
            return Err(Errno::INVAL);
        }
        if a.rx_ctx_bits != 0 {
            // No scalable endpoints, so no receive-context bits.
            return Err(Errno::INVAL);
        }
        const FI_SYMMETRIC: u64 = 1 << 59;
        if a.flags & !(FI_EVENT | FI_SYMMETRIC | FI_READ) != 0 {
            return Err(Errno::BADFLAGS);
        }
        let read_only = a.flags & FI_READ != 0;
        let shared = if a.name.is_null() {
            // fi_av(3) FI_READ: "An AV opened for read-only access must be named".
            if read_only {
                return Err(Errno::INVAL);
            }
            None
        } else {
            // SAFETY: a non-NULL name is a C string (fi_av(3)).
            let name = unsafe { CStr::from_ptr(a.name) }
                .to_str()
                .map_err(|_| Errno::INVAL)?;
            let t =
                SharedTable::open(name, read_only, domain.info.format.code(), av_type, a.count)?;
            // fi_av(3): with a name and map_addr 0, the map_addr in use is
            // returned through the attributes.
            if a.map_addr.is_null() {
                // SAFETY: attr is the application's, writable (checked non-NULL).
                unsafe { (*attr).map_addr = t.map_addr() };
            }
            Some(t)
        };
        let inner = Arc::new(Av {
            refs: Refs::default(),
            domain: domain.clone(),
            av_type,
            format: domain.info.format,
            asynchronous: a.flags & FI_EVENT != 0,
            table: RwLock::default(),
            eq: Mutex::new(None),
            shared,
        });
        let o = AvObj {
            fid: fid_av {
                fid: object::header::<AvObj>(context),
                ops: object::ops_ptr(&AV_OPS),
            },
            inner,
        };
        // SAFETY: `av` was checked non-NULL above.
        unsafe { object::open(av, Some(&domain.refs), o) }.map(|_| 0)
    })
}

/// fi_av_bind: an EQ for asynchronous (FI_EVENT) insertion.
unsafe extern "C" fn av_bind(f: *mut fid, bfid: *mut fid, flags: u64) -> c_int {
    guard_int("av bind", || {
        // SAFETY: validated by obj().
        let av = unsafe { obj::<AvObj>(f) }?;
        // SAFETY: validated by obj().
        let eq = unsafe { obj::<crate::eq::EqObj>(bfid) }?;
        if flags != 0 {
            return Err(Errno::BADFLAGS);
        }
        if !Arc::ptr_eq(&eq.inner.fabric, &av.inner.domain.fabric) {
            return Err(Errno::INVAL);
        }
        let mut slot = lock(&av.inner.eq);
        if slot.is_some() {
            return Err(Errno::INVAL);
        }
        eq.inner.refs.get();
        *slot = Some(eq.inner.clone());
        Ok(0)
    })
}

/// Insert decoded results; reports per fi_av(3) "RETURN VALUES": the number
/// inserted (sync), or 0 and an FI_AV_COMPLETE event (FI_EVENT).
///
/// # Safety
/// `fi_addr` NULL or `results.len()` entries; with FI_SYNC_ERR `context` is
/// an `int[results.len()]`.
unsafe fn finish_insert(
    o: &AvObj,
    results: Vec<Option<XdpAddr>>,
    fi_addr: *mut fi_addr_t,
    flags: u64,
    context: *mut c_void,
) -> Result<c_int> {
    if flags & !(FI_MORE | FI_SYNC_ERR) != 0 {
        return Err(Errno::BADFLAGS);
    }
    if o.inner.shared.as_ref().is_some_and(|s| !s.writable()) {
        // Opened with FI_READ.
        return Err(Errno::OPNOTSUPP);
    }
    let eq = if o.inner.asynchronous {
        Some(lock(&o.inner.eq).clone().ok_or(Errno::NOEQ)?)
    } else {
        None
    };
    let mut failed = Vec::new();
    for (i, r) in results.iter().enumerate() {
        let v = r.and_then(|a| o.inner.insert_one(a));
        if v.is_none() {
            failed.push(i);
        }
        let v = v.unwrap_or(FI_ADDR_NOTAVAIL);
        // SAFETY: per caller.
        unsafe {
            if !fi_addr.is_null() {
                fi_addr.add(i).write(v);
            }
            if flags & FI_SYNC_ERR != 0 && !context.is_null() {
                context
                    .cast::<c_int>()
                    .add(i)
                    .write(if v != FI_ADDR_NOTAVAIL { 0 } else { FI_EINVAL });
            }
        }
    }
    match eq {
        Some(eq) => {
            let fid = &o.fid as *const fid_av as *mut fid;
            // fi_av(3) FI_EVENT: "one EQ error entry generated for each
            // failed address insertion" (its index in `data`), "followed by
            // one non-error event" with the number inserted.
            for &i in &failed {
                eq.push_error(fid, context, i as u64, FI_EINVAL);
            }
            let ok = results.len() - failed.len();
            eq.push_entry(FI_AV_COMPLETE, fid, context, ok as u64);
            Ok(0)
        }
        None => Ok((results.len() - failed.len()) as c_int),
    }
}

unsafe extern "C" fn av_insert(
    av: *mut fid_av,
    addr: *const c_void,
    count: size_t,
    fi_addr: *mut fi_addr_t,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    guard_int("fi_av_insert", || {
        // SAFETY: validated by obj().
        let o = unsafe { obj::<AvObj>(av.cast()) }?;
        if addr.is_null() && count > 0 {
            return Err(Errno::INVAL);
        }
        let stride = addr::addr_len_hint(o.inner.format);
        let mut results = Vec::with_capacity(count.min(1 << 20));
        let mut off = 0usize;
        for _ in 0..count {
            // SAFETY: fi_av_insert(3): `addr` holds `count` addresses of the
            // AV's format, each of the size its first bytes announce.
            let b = unsafe { addr_at(addr.cast::<u8>().add(off), stride) };
            results.push(
                addr::decode_any(b)
                    .map(|(a, _)| a)
                    .filter(|a| o.inner.format.fits(&a.ip)),
            );
            off += b.len();
        }
        // SAFETY: caller contract of fi_av_insert.
        unsafe { finish_insert(o, results, fi_addr, flags, context) }
    })
}

fn cstr<'a>(p: *const c_char) -> Option<&'a str> {
    // SAFETY: callers pass NUL-terminated strings or NULL.
    (!p.is_null())
        .then(|| unsafe { CStr::from_ptr(p) }.to_str().ok())
        .flatten()
}

/// fi_av_insertsvc: `node` an IP address or host name, `service` a UDP
/// port, as for getinfo (the udp/tcp providers' convention).
unsafe extern "C" fn av_insertsvc(
    av: *mut fid_av,
    node: *const c_char,
    service: *const c_char,
    fi_addr: *mut fi_addr_t,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    guard_int("fi_av_insertsvc", || {
        // SAFETY: validated by obj().
        let o = unsafe { obj::<AvObj>(av.cast()) }?;
        let (Some(node), Some(service)) = (cstr(node), cstr(service)) else {
            return Err(Errno::INVAL);
        };
        let r = addr::resolve(Some(node), Some(service), false)
            .map(XdpAddr::from_socket)
            .filter(|a| o.inner.format.fits(&a.ip));
        // SAFETY: caller contract of fi_av_insertsvc (one address).
        unsafe { finish_insert(o, vec![r], fi_addr, flags, context) }
    })
}

/// Most addresses one fi_av_insertsym names (nodes × services): a million.
const MAX_INSERTSYM: usize = 1 << 20;

/// fi_av_insertsym: `nodecnt` consecutive IP addresses from `node`, each
/// with `svccnt` consecutive ports from `service`.
unsafe extern "C" fn av_insertsym(
    av: *mut fid_av,
    node: *const c_char,
    nodecnt: size_t,
    service: *const c_char,
    svccnt: size_t,
    fi_addr: *mut fi_addr_t,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    guard_int("fi_av_insertsym", || {
        // SAFETY: validated by obj().
        let o = unsafe { obj::<AvObj>(av.cast()) }?;
        let (Some(node), Some(service)) = (cstr(node), cstr(service)) else {
            return Err(Errno::INVAL);
        };
        let base = addr::resolve(Some(node), Some(service), true).ok_or(Errno::INVAL)?;
        // The names must exist: node addresses that do not run past the
        // last address, ports that do not run past 65535 (checked below),
        // and no more than an AV can sensibly hold.
        let total = nodecnt.checked_mul(svccnt).ok_or(Errno::INVAL)?;
        let last = nodecnt.saturating_sub(1);
        let nodes_fit = match base.ip() {
            IpAddr::V4(v4) => u32::try_from(last)
                .ok()
                .and_then(|l| u32::from(v4).checked_add(l))
                .is_some(),
            IpAddr::V6(v6) => u128::from(v6).checked_add(last as u128).is_some(),
        };
        if total > MAX_INSERTSYM || !nodes_fit {
            return Err(Errno::INVAL);
        }
        let mut results = Vec::with_capacity(total);
        for n in 0..nodecnt {
            let ip = match base.ip() {
                IpAddr::V4(v4) => IpAddr::V4((u32::from(v4).wrapping_add(n as u32)).into()),
                IpAddr::V6(v6) => IpAddr::V6((u128::from(v6).wrapping_add(n as u128)).into()),
            };
            for s in 0..svccnt {
                let port = u16::try_from(usize::from(base.port()) + s).map_err(|_| Errno::INVAL)?;
                results.push(
                    Some(XdpAddr::from_socket(SocketAddr::new(ip, port)))
                        .filter(|a| o.inner.format.fits(&a.ip)),
                );
            }
        }
        // SAFETY: caller contract of fi_av_insertsym.
        unsafe { finish_insert(o, results, fi_addr, flags, context) }
    })
}

/// fi_av_remove: every address must be valid, else -FI_EINVAL (those
/// before the bad one stay removed).
unsafe extern "C" fn av_remove(
    av: *mut fid_av,
    fi_addr: *mut fi_addr_t,
    count: size_t,
    flags: u64,
) -> c_int {
    guard_int("fi_av_remove", || {
        // SAFETY: validated by obj().
        let o = unsafe { obj::<AvObj>(av.cast()) }?;
        if flags != 0 {
            return Err(Errno::BADFLAGS);
        }
        if fi_addr.is_null() && count > 0 {
            return Err(Errno::INVAL);
        }
        if o.inner.shared.as_ref().is_some_and(|s| !s.writable()) {
            // Opened with FI_READ.
            return Err(Errno::OPNOTSUPP);
        }
        for i in 0..count {
            // SAFETY: fi_addr holds count entries.
            let a = unsafe { *fi_addr.add(i) };
            if !o.inner.remove_one(a) {
                return Err(Errno::INVAL);
            }
        }
        Ok(0)
    })
}

/// fi_av_lookup: copies up to `*addrlen` bytes (truncating) and sets
/// `*addrlen` to the full size (fi_av(3)); unknown fi_addr → -FI_EINVAL.
unsafe extern "C" fn av_lookup(
    av: *mut fid_av,
    fi_addr: fi_addr_t,
    addr: *mut c_void,
    addrlen: *mut size_t,
) -> c_int {
    guard_int("fi_av_lookup", || {
        // SAFETY: validated by obj().
        let o = unsafe { obj::<AvObj>(av.cast()) }?;
        if addrlen.is_null() {
            return Err(Errno::INVAL);
        }
        let a = o.inner.lookup(fi_addr).ok_or(Errno::INVAL)?;
        let bytes = o.inner.format.encode(&a);
        // SAFETY: addrlen non-NULL; addr holds *addrlen bytes.
        unsafe {
            let room = *addrlen;
            if !addr.is_null() {
                std::ptr::copy_nonoverlapping(
                    bytes.as_ptr(),
                    addr.cast::<u8>(),
                    room.min(bytes.len()),
                );
            }
            *addrlen = bytes.len();
        }
        Ok(0)
    })
}

/// fi_av_straddr: printable form, truncated to `*len`; `*len` is set to the
/// size needed (including the NUL); returns `buf`.
unsafe extern "C" fn av_straddr(
    av: *mut fid_av,
    addr: *const c_void,
    buf: *mut c_char,
    len: *mut size_t,
) -> *const c_char {
    guard_value("fi_av_straddr", std::ptr::null(), || {
        // SAFETY: validated by obj().
        let Ok(o) = (unsafe { obj::<AvObj>(av.cast()) }) else {
            return std::ptr::null();
        };
        if addr.is_null() || buf.is_null() || len.is_null() {
            return std::ptr::null();
        }
        // SAFETY: addr is one address in the AV's format.
        let full = unsafe { addr_at(addr.cast::<u8>(), addr::addr_len_hint(o.inner.format)) };
        let s = match addr::decode_any(full) {
            Some((a, _)) => a.to_string(),
            None => "fi_addr_xdp://(invalid)".to_owned(),
        };
        // SAFETY: len non-NULL; buf holds *len bytes.
        unsafe {
            let room = *len;
            if room > 0 {
                let k = s.len().min(room - 1);
                std::ptr::copy_nonoverlapping(s.as_ptr(), buf.cast::<u8>(), k);
                *buf.add(k) = 0;
            }
            *len = s.len() + 1;
        }
        buf
    })
}

/// The bytes of the address at `p`: its size is learnt from the first two
/// bytes (our magic, AF_INET or AF_INET6), else `fallback` (the AV format's
/// size). Every accepted format is at least 16 bytes, so reading two bytes
/// is always within the caller's address.
///
/// # Safety
/// `p` must point to one address of the AV's format.
pub(crate) unsafe fn addr_at<'a>(p: *const u8, fallback: usize) -> &'a [u8] {
    // SAFETY: per caller, at least 2 bytes are readable.
    let head = unsafe { std::slice::from_raw_parts(p, 2) };
    let len = match i32::from(u16::from_ne_bytes([head[0], head[1]])) {
        libc::AF_INET => size_of::<libc::sockaddr_in>(),
        libc::AF_INET6 => size_of::<libc::sockaddr_in6>(),
        _ if u16::from_le_bytes([head[0], head[1]]) == 0x5844 => addr::XDP_ADDR_LEN,
        _ => fallback,
    };
    // SAFETY: the address occupies `len` bytes.
    unsafe { std::slice::from_raw_parts(p, len) }
}

/// AV sets are for collectives, which are not offered.
unsafe extern "C" fn av_set(
    _: *mut fid_av,
    _: *mut c_void,
    _: *mut *mut c_void,
    _: *mut c_void,
) -> c_int {
    -FI_ENOSYS
}

/// The AV behind a `fid` (used by endpoint bind).
///
/// # Safety
/// `f` NULL or a readable fid.
pub unsafe fn av_of(f: *mut fid) -> Result<Arc<Av>> {
    // SAFETY: per caller.
    Ok(unsafe { obj::<AvObj>(f) }?.inner.clone())
}
