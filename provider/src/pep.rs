//! Passive endpoints (fi_endpoint(3) fi_passive_ep, fi_cm(3) fi_listen,
//! fi_reject) and the connection requests they hand out (fi_eq(3)
//! FI_CONNREQ, `fi_info::handle`).
//!
//! A passive endpoint is a kernel UDP socket bound to its address (it
//! reserves the port and is what `fi_getname` names) and the listening
//! half of the connection protocol (reliability/PROTOCOL.md §9,
//! `cm::Listener`). Connection requests are small and rare, so they take
//! the kernel path: the steering program does not redirect this port, and
//! the socket joins the bound EQ's wait object, so a reader blocked in
//! `fi_eq_sread` wakes when one arrives. Each request becomes an FI_CONNREQ
//! event whose `info->handle` is a [`ConnReqObj`]; `fi_endpoint` with that
//! info opens the accepting endpoint (its own address), `fi_accept` or
//! `fi_reject` consumes the handle.
//!
//! An active endpoint may take over a passive endpoint's address
//! (`fi_info::handle` = the passive endpoint, fi_endpoint(3)): it gets the
//! socket, and the passive endpoint is left without one.

use std::collections::HashSet;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use libc::{c_int, c_void, size_t};
use ofi_xdp_reliability::Instant as CmInstant;
use ofi_xdp_reliability::cm::{self, Listener};

use crate::abi::{Errno, Result, guard_int, lock};
use crate::addr::{AddrFormat, XdpAddr};
use crate::datapath::{ConnRequest, WaitState};
use crate::eq::{Eq, OwnedInfo};
use crate::fabric::Fabric;
use crate::getinfo::InfoView;
use crate::object::{self, FidObject, obj};
use crate::progress::Progress;
use crate::sys::*;

/// Connection requests reported and not yet accepted or rejected, at most
/// (fi_cm(3) backlog; FI_BACKLOG changes it).
const DEFAULT_BACKLOG: usize = 128;

pub struct Pep {
    pub fabric: Arc<Fabric>,
    /// The fi_info it was opened with (a copy): the template of every
    /// FI_CONNREQ info.
    info: OwnedInfo,
    format: AddrFormat,
    /// The `fid_pep` the application holds, for events.
    fid: AtomicUsize,
    me: Weak<Pep>,
    epoch: std::time::Instant,
    state: Mutex<PepState>,
}

// SAFETY: `info` is our own fi_dupinfo copy, only read (to copy it) under
// no other thread's writes; everything else is Send + Sync.
unsafe impl Send for Pep {}
// SAFETY: as above.
unsafe impl Sync for Pep {}

struct PepState {
    local: XdpAddr,
    /// `None` once an active endpoint took the address over.
    socket: Option<UdpSocket>,
    listening: bool,
    eq: Option<Arc<Eq>>,
    listener: Listener<SocketAddr>,
    buf: Vec<u8>,
}

impl Pep {
    fn now(&self) -> CmInstant {
        CmInstant(u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }

    fn fid(&self) -> *mut fid {
        self.fid.load(Ordering::Acquire) as *mut fid
    }

    /// fi_endpoint with `info->handle` = this passive endpoint: the active
    /// endpoint takes its socket and address (fi_endpoint(3)).
    pub fn surrender(&self) -> Option<(UdpSocket, XdpAddr)> {
        let mut st = lock(&self.state);
        let s = st.socket.take()?;
        if st.listening
            && let Some(eq) = &st.eq
        {
            let me: Weak<dyn Progress> = self.me.clone();
            eq.detach(&me, Some(s.as_raw_fd()));
        }
        st.listening = false;
        Some((s, st.local))
    }

    /// The address, for getinfo hints whose `handle` is this endpoint.
    pub fn address(&self) -> XdpAddr {
        lock(&self.state).local
    }

    /// An FI_CONNREQ info for `req`: the passive endpoint's info with the
    /// connecting endpoint as destination, our IP with port 0 as source
    /// (the accepting endpoint gets a port of its own), and the request's
    /// handle.
    fn request_info(
        &self,
        local: &XdpAddr,
        handle: *mut fid,
        req: &ConnRequest,
    ) -> Result<OwnedInfo> {
        // SAFETY: `info` is a valid fi_info copy of ours.
        let p = unsafe { ffi::fi_dupinfo(self.info.0) };
        if p.is_null() {
            return Err(Errno::NOMEM);
        }
        let owned = OwnedInfo(p);
        let src = XdpAddr {
            port: 0,
            incarnation: 0,
            ..*local
        };
        // SAFETY: `p` is a fresh fi_dupinfo result; its addresses are
        // malloc'd (fi_freeinfo frees them with free()), so they are
        // replaced with malloc'd copies.
        unsafe {
            replace_addr(
                &mut (*p).src_addr,
                &mut (*p).src_addrlen,
                &self.format.encode(&src),
            )?;
            replace_addr(
                &mut (*p).dest_addr,
                &mut (*p).dest_addrlen,
                &self.format.encode(&req.from),
            )?;
            (*p).handle = handle;
        }
        Ok(owned)
    }
}

/// Put a malloc'd copy of `bytes` in an fi_info address field.
///
/// # Safety
/// `field` must be NULL or a malloc'd pointer owned by the fi_info.
unsafe fn replace_addr(field: &mut *mut c_void, len: &mut size_t, bytes: &[u8]) -> Result<()> {
    // SAFETY: per the caller (free(NULL) is allowed).
    unsafe { libc::free(*field) };
    *field = std::ptr::null_mut();
    *len = 0;
    // SAFETY: plain allocation of bytes.len() bytes, checked below.
    let m = unsafe { libc::malloc(bytes.len()) };
    if m.is_null() {
        return Err(Errno::NOMEM);
    }
    // SAFETY: `m` holds bytes.len() bytes.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), m.cast::<u8>(), bytes.len()) };
    *field = m;
    *len = bytes.len();
    Ok(())
}

impl Progress for Pep {
    /// Take in connection requests; report new ones; send refusals.
    fn progress(&self) {
        let now = self.now();
        let mut st = lock(&self.state);
        if !st.listening {
            return;
        }
        let PepState {
            socket,
            listener,
            buf,
            ..
        } = &mut *st;
        let Some(sock) = socket.as_ref() else { return };
        for _ in 0..64 {
            match sock.recv_from(buf) {
                Ok((n, from)) => {
                    if let Ok(m) = cm::decode(&buf[..n]) {
                        listener.handle(now, from, &m);
                    }
                }
                Err(_) => break,
            }
        }
        let mut out = [0u8; cm::MAX_CM_LEN];
        while let Some((to, n)) = listener.poll_transmit(&mut out) {
            let _ = sock.send_to(&out[..n], to);
        }
        let mut reqs = Vec::new();
        while let Some(r) = st.listener.poll_request() {
            reqs.push(r);
        }
        let local = st.local;
        let eq = st.eq.clone();
        drop(st);
        let Some(eq) = eq else { return };
        for r in reqs {
            let req = ConnRequest {
                from: XdpAddr {
                    ip: r.from.ip(),
                    port: r.from.port(),
                    mac: (r.link != [0; 6]).then_some(r.link),
                    incarnation: r.incarnation,
                },
                id: r.id,
                param: r.param,
            };
            let data = req.param.clone();
            let handle = ConnReqObj::register(req.clone(), self.me.clone());
            match self.request_info(&local, handle, &req) {
                Ok(info) => eq.push_cm(FI_CONNREQ, self.fid(), Some(info), &data),
                Err(e) => {
                    drop(take_request(handle));
                    crate::xdp_warn!(
                        FI_LOG_EP_CTRL,
                        "connection request from {}: {e:?}",
                        req.from
                    );
                }
            }
        }
    }

    fn wait_state(&self) -> WaitState {
        WaitState::Idle { timer: None }
    }

    /// Connection requests arrive on the listening socket.
    fn arrival_fds(&self, out: &mut Vec<std::os::fd::RawFd>) -> bool {
        use std::os::fd::AsRawFd as _;
        if let Some(s) = lock(&self.state).socket.as_ref() {
            out.push(s.as_raw_fd());
        }
        true
    }
}

/// A connection request handed to the application as `info->handle`
/// (class FI_CLASS_CONNREQ). Consumed by fi_accept or fi_reject; until
/// then it is listed in `live_requests`, so that a stale or forged
/// handle is refused instead of dereferenced.
#[repr(C)]
pub struct ConnReqObj {
    pub fid: fid,
    pub req: ConnRequest,
    pub pep: Weak<Pep>,
}

static CONNREQ_FI_OPS: fi_ops = object::fi_ops_of::<ConnReqObj>(None, None);

// SAFETY: repr(C), `fid` first, CONNREQ_FI_OPS in every instance.
unsafe impl FidObject for ConnReqObj {
    const CLASS: usize = FI_CLASS_CONNREQ;
    const CLOSE: &'static str = "connreq close";
    fn fi_ops() -> *const fi_ops {
        &CONNREQ_FI_OPS
    }
    /// fi_close on a handle (not required by fi_cm(3)) forgets it.
    fn release(&self) {
        lock(live_requests()).remove(&(self as *const ConnReqObj as usize));
    }
}

fn live_requests() -> &'static Mutex<HashSet<usize>> {
    static LIVE: OnceLock<Mutex<HashSet<usize>>> = OnceLock::new();
    LIVE.get_or_init(Mutex::default)
}

impl ConnReqObj {
    fn register(req: ConnRequest, pep: Weak<Pep>) -> *mut fid {
        let p = Box::into_raw(Box::new(ConnReqObj {
            fid: object::header::<ConnReqObj>(std::ptr::null_mut()),
            req,
            pep,
        }));
        lock(live_requests()).insert(p as usize);
        p.cast()
    }
}

/// The request behind a live handle (a copy), and its passive endpoint.
pub fn peek_request(handle: *mut fid) -> Option<(ConnRequest, Weak<Pep>)> {
    let live = lock(live_requests());
    if !live.contains(&(handle as usize)) {
        return None;
    }
    // SAFETY: listed handles are live boxes of ours (removed before free).
    let o = unsafe { &*(handle as *const ConnReqObj) };
    Some((o.req.clone(), o.pep.clone()))
}

/// Consume a live handle: the request, and its passive endpoint.
pub fn take_request(handle: *mut fid) -> Option<(ConnRequest, Weak<Pep>)> {
    if !lock(live_requests()).remove(&(handle as usize)) {
        return None;
    }
    // SAFETY: it was listed, so it is a live box of ours, and no longer
    // reachable through the list.
    let o = unsafe { Box::from_raw(handle.cast::<ConnReqObj>()) };
    Some((o.req, o.pep))
}

/// fi_accept consumed `req`: its repeats are absorbed from now on.
pub fn accepted(pep: &Weak<Pep>, req: &ConnRequest) {
    if let Some(p) = pep.upgrade() {
        let now = p.now();
        lock(&p.state)
            .listener
            .accepted(now, req.from.socket_addr(), req.id);
    }
}

#[repr(C)]
pub struct PepObj {
    pub fid: fid_pep,
    pub inner: Arc<Pep>,
}

static PEP_FI_OPS: fi_ops = object::fi_ops_of::<PepObj>(Some(pep_bind), Some(pep_control));
static PEP_EP_OPS: fi_ops_ep = fi_ops_ep {
    size: size_of::<fi_ops_ep>(),
    cancel: Some(pep_cancel),
    getopt: Some(pep_getopt),
    setopt: Some(pep_setopt),
    tx_ctx: Some(crate::ep::ep_tx_ctx),
    rx_ctx: Some(crate::ep::ep_rx_ctx),
    rx_size_left: Some(crate::ep::ep_size_left),
    tx_size_left: Some(crate::ep::ep_size_left),
};
static PEP_CM_OPS: fi_ops_cm = fi_ops_cm {
    size: size_of::<fi_ops_cm>(),
    setname: Some(pep_setname),
    getname: Some(pep_getname),
    getpeer: Some(crate::ep::cm_enosys::getpeer),
    connect: Some(crate::ep::cm_enosys::connect),
    listen: Some(pep_listen),
    accept: Some(crate::ep::cm_enosys::accept),
    reject: Some(pep_reject),
    shutdown: Some(crate::ep::cm_enosys::shutdown),
    join: Some(crate::ep::cm_enosys::join),
};

// SAFETY: repr(C), fid_pep first, PEP_FI_OPS in every instance.
unsafe impl FidObject for PepObj {
    const CLASS: usize = FI_CLASS_PEP;
    const CLOSE: &'static str = "pep close";
    fn fi_ops() -> *const fi_ops {
        &PEP_FI_OPS
    }
    fn release(&self) {
        let p = &self.inner;
        let mut st = lock(&p.state);
        if let Some(eq) = st.eq.take() {
            if st.listening {
                let me: Weak<dyn Progress> = p.me.clone();
                eq.detach(&me, st.socket.as_ref().map(|s| s.as_raw_fd()));
            }
            eq.refs.put();
        }
        st.socket = None;
        st.listening = false;
        drop(st);
        p.fabric.refs.put();
    }
}

/// The passive endpoint behind `f`.
///
/// # Safety
/// `f` must be NULL or point to a readable fid.
pub unsafe fn pep_of<'a>(f: *const fid) -> Result<&'a Arc<Pep>> {
    // SAFETY: per the caller.
    Ok(&unsafe { obj::<PepObj>(f) }?.inner)
}

/// `fi_ops_fabric::passive_ep`.
pub unsafe extern "C" fn xdp_passive_ep(
    fabric: *mut fid_fabric,
    info: *mut fi_info,
    pep: *mut *mut fid_pep,
    context: *mut c_void,
) -> c_int {
    guard_int("fi_passive_ep", || {
        // SAFETY: validated by fabric_of / InfoView::read.
        let fabric = unsafe { crate::fabric::fabric_of(fabric) }?;
        let view = unsafe { InfoView::read(info) }?;
        if pep.is_null() {
            return Err(Errno::INVAL);
        }
        if view.ep_type != FI_EP_MSG {
            return Err(Errno::INVAL);
        }
        let ifaces = crate::ifaces::list().map_err(|e| Errno::from_os(&e))?;
        let iface = ifaces
            .iter()
            .filter(|i| i.usable())
            .find(|i| match (&view.domain_name, &view.src) {
                (Some(n), _) => *n == i.name,
                (None, Some(a)) if !a.ip.is_unspecified() => i.has_ip(&a.ip),
                (None, _) => true,
            })
            .ok_or(Errno::NODATA)?;
        let ip = match view.src {
            Some(a) if !a.ip.is_unspecified() => a.ip,
            _ => iface
                .ip(view.src.map(|a| a.ip.is_ipv6()))
                .ok_or(Errno::INVAL)?,
        };
        if !iface.has_ip(&ip) || !view.format.fits(&ip) {
            return Err(Errno::INVAL);
        }
        let port = view.src.map_or(0, |a| a.port);
        let (sock, port) = crate::ep::reserve_port(SocketAddr::new(ip, port))?;
        sock.set_nonblocking(true).map_err(|e| Errno::from_os(&e))?;
        // SAFETY: `info` is a valid fi_info (InfoView::read checked it).
        let copy = unsafe { ffi::fi_dupinfo(info) };
        if copy.is_null() {
            return Err(Errno::NOMEM);
        }
        // The template must name its domain: the accepting side opens
        // fi_domain with the FI_CONNREQ info.
        let name = crate::params::cstring(&iface.name);
        // SAFETY: copy is our fresh fi_dupinfo result.
        unsafe {
            if !(*copy).domain_attr.is_null() && (*(*copy).domain_attr).name.is_null() {
                (*(*copy).domain_attr).name = libc::strdup(name.as_ptr());
            }
        }
        let local = XdpAddr {
            ip,
            port,
            mac: iface.mac,
            incarnation: 0,
        };
        let inner = Arc::new_cyclic(|me| Pep {
            fabric: fabric.clone(),
            info: OwnedInfo(copy),
            format: view.format,
            fid: AtomicUsize::new(0),
            me: me.clone(),
            epoch: std::time::Instant::now(),
            state: Mutex::new(PepState {
                local,
                socket: Some(sock),
                listening: false,
                eq: None,
                listener: Listener::new(DEFAULT_BACKLOG),
                buf: vec![0; 1 << 16],
            }),
        });
        let o = PepObj {
            fid: fid_pep {
                fid: object::header::<PepObj>(context),
                ops: object::ops_ptr(&PEP_EP_OPS),
                cm: object::ops_ptr(&PEP_CM_OPS),
            },
            inner: inner.clone(),
        };
        // SAFETY: `pep` was checked non-NULL above.
        let p = unsafe { object::open(pep, Some(&fabric.refs), o) }?;
        inner.fid.store(p as usize, Ordering::Release);
        Ok(0)
    })
}

/// fi_pep_bind: the EQ that receives FI_CONNREQ events.
unsafe extern "C" fn pep_bind(f: *mut fid, bfid: *mut fid, flags: u64) -> c_int {
    guard_int("fi_pep_bind", || {
        // SAFETY: validated by obj().
        let p = unsafe { pep_of(f) }?;
        // SAFETY: validated by obj().
        let eq = unsafe { obj::<crate::eq::EqObj>(bfid) }?.inner.clone();
        if flags != 0 {
            return Err(Errno::BADFLAGS);
        }
        if !Arc::ptr_eq(&eq.fabric, &p.fabric) {
            return Err(Errno::INVAL);
        }
        let mut st = lock(&p.state);
        if st.eq.is_some() || st.listening {
            return Err(Errno::INVAL);
        }
        eq.refs.get();
        st.eq = Some(eq);
        Ok(0)
    })
}

/// fi_control on a passive endpoint: FI_BACKLOG (`int *`, fi_endpoint(3)).
unsafe extern "C" fn pep_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    guard_int("pep control", || {
        // SAFETY: validated by obj().
        let p = unsafe { pep_of(f) }?;
        match command {
            FI_BACKLOG => {
                let v = arg.cast::<c_int>();
                if v.is_null() {
                    return Err(Errno::INVAL);
                }
                // SAFETY: arg is an int * per fi_endpoint(3).
                let n = usize::try_from(unsafe { *v }).map_err(|_| Errno::INVAL)?;
                lock(&p.state).listener.set_backlog(n);
                Ok(0)
            }
            _ => Err(Errno::NOSYS),
        }
    })
}

/// fi_listen: start taking connection requests; needs a bound EQ.
unsafe extern "C" fn pep_listen(pep: *mut fid_pep) -> c_int {
    guard_int("fi_listen", || {
        // SAFETY: validated by obj().
        let p = unsafe { pep_of(pep.cast()) }?;
        let mut st = lock(&p.state);
        if st.listening {
            return Ok(0);
        }
        let eq = st.eq.clone().ok_or(Errno::NOEQ)?;
        let fd = st
            .socket
            .as_ref()
            .map(|s| s.as_raw_fd())
            .ok_or(Errno::OPBADSTATE)?;
        st.listening = true;
        drop(st);
        let me: Weak<dyn Progress> = p.me.clone();
        eq.attach(me, Some(fd));
        Ok(0)
    })
}

/// fi_reject: refuse the request with `param` (at most FI_OPT_CM_DATA_SIZE
/// bytes, -FI_EINVAL beyond), which the connecting side receives as the
/// err_data of its FI_ECONNREFUSED entry. Consumes the handle.
unsafe extern "C" fn pep_reject(
    pep: *mut fid_pep,
    handle: fid_t,
    param: *const c_void,
    paramlen: size_t,
) -> c_int {
    guard_int("fi_reject", || {
        // SAFETY: validated by obj().
        let p = unsafe { pep_of(pep.cast()) }?;
        if paramlen > cm::CM_DATA_SIZE || (param.is_null() && paramlen > 0) {
            return Err(Errno::INVAL);
        }
        let (req, owner) = peek_request(handle).ok_or(Errno::INVAL)?;
        if !Weak::ptr_eq(&owner, &Arc::downgrade(p)) {
            return Err(Errno::INVAL);
        }
        let data = if paramlen == 0 {
            &[][..]
        } else {
            // SAFETY: param holds paramlen bytes (fi_cm(3)).
            unsafe { std::slice::from_raw_parts(param.cast::<u8>(), paramlen) }
        };
        let now = p.now();
        let mut st = lock(&p.state);
        st.listener
            .reject(now, req.from.socket_addr(), req.id, data);
        let PepState {
            socket, listener, ..
        } = &mut *st;
        if let Some(sock) = socket.as_ref() {
            let mut out = [0u8; cm::MAX_CM_LEN];
            while let Some((to, n)) = listener.poll_transmit(&mut out) {
                let _ = sock.send_to(&out[..n], to);
            }
        }
        drop(st);
        drop(take_request(handle));
        Ok(0)
    })
}

unsafe extern "C" fn pep_getname(f: fid_t, addr: *mut c_void, addrlen: *mut size_t) -> c_int {
    guard_int("fi_getname", || {
        // SAFETY: validated by obj().
        let p = unsafe { pep_of(f) }?;
        let bytes = p.format.encode(&p.address());
        // SAFETY: addrlen/addr per fi_cm(3).
        unsafe { crate::ep::copy_name(&bytes, addr, addrlen) }
    })
}

/// fi_setname: move the passive endpoint to another address (before
/// fi_listen), as a socket's bind.
unsafe extern "C" fn pep_setname(f: fid_t, addr: *mut c_void, addrlen: size_t) -> c_int {
    guard_int("fi_setname", || {
        // SAFETY: validated by obj().
        let p = unsafe { pep_of(f) }?;
        if addr.is_null() || addrlen == 0 {
            return Err(Errno::INVAL);
        }
        // SAFETY: addr holds addrlen bytes.
        let b = unsafe { std::slice::from_raw_parts(addr.cast::<u8>(), addrlen) };
        let (a, _) = crate::addr::decode_any(b).ok_or(Errno::INVAL)?;
        let mut st = lock(&p.state);
        if st.listening || st.socket.is_none() {
            return Err(Errno::OPBADSTATE);
        }
        let ip = if a.ip.is_unspecified() {
            st.local.ip
        } else {
            a.ip
        };
        if !p.format.fits(&ip) {
            return Err(Errno::INVAL);
        }
        st.socket = None;
        let (s, port) = crate::ep::reserve_port(SocketAddr::new(ip, a.port))?;
        s.set_nonblocking(true).map_err(|e| Errno::from_os(&e))?;
        st.socket = Some(s);
        st.local.ip = ip;
        st.local.port = port;
        Ok(0)
    })
}

/// fi_getopt: FI_OPT_CM_DATA_SIZE, the most data a connection request
/// carries (fi_endpoint(3)).
unsafe extern "C" fn pep_getopt(
    f: fid_t,
    level: c_int,
    optname: c_int,
    optval: *mut c_void,
    optlen: *mut size_t,
) -> c_int {
    guard_int("fi_getopt", || {
        // SAFETY: validated by obj().
        let _ = unsafe { pep_of(f) }?;
        // SAFETY: pointers per fi_endpoint(3).
        unsafe { crate::ep::cm_data_size_opt(level, optname, optval, optlen) }
    })
}

unsafe extern "C" fn pep_setopt(
    _: fid_t,
    level: c_int,
    _: c_int,
    _: *const c_void,
    _: size_t,
) -> c_int {
    if level != FI_OPT_ENDPOINT {
        return -FI_ENOPROTOOPT;
    }
    -FI_ENOPROTOOPT
}
unsafe extern "C" fn pep_cancel(_: fid_t, _: *mut c_void) -> libc::ssize_t {
    -(FI_ENOSYS as libc::ssize_t)
}

/// For getinfo: the address of the passive endpoint `handle` names, if it
/// is one of ours (msg_sockets-style "reserve an address, then decide").
///
/// # Safety
/// `handle` must be NULL or point to a readable fid.
pub unsafe fn address_of(handle: *mut fid) -> Option<XdpAddr> {
    if handle.is_null() {
        return None;
    }
    // SAFETY: per the caller; obj() checks class and ops identity.
    unsafe { pep_of(handle) }.ok().map(|p| p.address())
}
