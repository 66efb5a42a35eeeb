//! Endpoint object (fi_endpoint(3), fi_cm(3)): FI_EP_RDM and FI_EP_DGRAM.
//!
//! An endpoint gets its address when it is opened: a kernel UDP socket is
//! bound to (interface IP, port) and kept open for the endpoint's lifetime,
//! which reserves the port (nobody else on the host can take it) and makes
//! `fi_getname` truthful before `fi_enable`. Packets for the port are
//! steered to our AF_XDP socket by the XDP program before the kernel sees
//! them. The data operations live in [`crate::msg`]; the data path behind
//! them, opened by `fi_enable`, in [`crate::xdp`], across the seam
//! [`crate::datapath`].

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use libc::{c_int, c_void, size_t, ssize_t};

use crate::abi::{Errno, Result, guard_int, guard_ssize, lock};
use crate::addr::{AddrFormat, XdpAddr};
use crate::av::Av;
use crate::cntr::Cntr;
use crate::cq::Cq;
use crate::datapath::{self, DataPath, Direction, DpCompletion, WaitState};
use crate::domain::Domain;
use crate::eq::Eq;
use crate::getinfo::{self, InfoView};
use crate::object::{self, FidObject, obj};
use crate::progress::Progress;
use crate::sys::*;

/// Default FI_OPT_MIN_MULTI_RECV: one maximum datagram payload.
pub const DEFAULT_MIN_MULTI_RECV: usize = 1500;

/// A CQ binding: the queue and whether FI_SELECTIVE_COMPLETION was given.
#[derive(Clone)]
pub struct CqBinding {
    pub cq: Arc<Cq>,
    pub selective: bool,
}

pub struct EpState {
    pub enabled: bool,
    pub tx_cq: Option<CqBinding>,
    pub rx_cq: Option<CqBinding>,
    pub av: Option<Arc<Av>>,
    pub eq: Option<Arc<Eq>>,
    pub send_cntr: Option<Arc<Cntr>>,
    pub recv_cntr: Option<Arc<Cntr>>,
    pub min_multi_recv: usize,
    pub local: XdpAddr,
    /// Holds the UDP port reservation (see module docs).
    pub port_socket: Option<UdpSocket>,
    pub core: Option<Box<dyn DataPath>>,
    /// Completions of the current progress pass, kept between passes so a pass does not
    /// allocate.
    pub pass_done: Vec<DpCompletion>,
}

pub struct Endpoint {
    pub domain: Arc<Domain>,
    pub ep_type: c_int,
    pub caps: u64,
    pub format: AddrFormat,
    /// Largest fi_inject / FI_INJECT payload (tx_attr->inject_size).
    pub inject_size: usize,
    /// Largest message (ep_attr->max_msg_size).
    pub max_msg_size: usize,
    pub me: Weak<Endpoint>,
    /// Default operation flags (fi_endpoint(3) FI_SETOPSFLAG), outside the
    /// state lock: every data call reads them, fi_control rarely sets them.
    pub tx_op_flags: AtomicU64,
    pub rx_op_flags: AtomicU64,
    pub state: Mutex<EpState>,
}

impl Progress for Endpoint {
    /// One progress pass of the data path, routing its completions to the
    /// bound CQs and counters (called from CQ/counter reads).
    fn progress(&self) {
        let mut st = lock(&self.state);
        let mut done = std::mem::take(&mut st.pass_done);
        let Some(core) = st.core.as_mut() else { return };
        core.progress(&mut |c| done.push(c));
        for c in done.drain(..) {
            self.route(&st, c);
        }
        st.pass_done = done;
    }

    /// What the data path needs before the application may block
    /// (fi_trywait); an endpoint not enabled needs nothing.
    fn wait_state(&self) -> WaitState {
        lock(&self.state)
            .core
            .as_ref()
            .map_or(WaitState::Idle { timer: None }, |c| c.wait_state())
    }
}

impl Endpoint {
    /// Deliver one completion per fi_cq(3)/fi_cntr(3): success entries only
    /// if requested, errors always; counters count both.
    fn route(&self, st: &EpState, mut c: DpCompletion) {
        let (cq, cntr) = match c.dir {
            Direction::Tx => (&st.tx_cq, &st.send_cntr),
            Direction::Rx => (&st.rx_cq, &st.recv_cntr),
        };
        let failed = c.completion.error.is_some();
        crate::xdp_debug!(
            FI_LOG_EP_DATA,
            "completion {:?} ctx {:#x} len {} report {} error {:?}",
            c.dir,
            c.completion.op_context,
            c.completion.len,
            c.report,
            c.completion.error
        );
        if let Some(k) = cntr {
            if failed { k.add_err(1) } else { k.add(1) }
        }
        if let Some(b) = cq
            && (failed || c.report)
        {
            c.completion.src = match (&c.src, &st.av) {
                (Some(a), Some(av)) if self.caps & FI_SOURCE != 0 => {
                    av.reverse(a).unwrap_or(FI_ADDR_NOTAVAIL)
                }
                _ => FI_ADDR_NOTAVAIL,
            };
            b.cq.push(c.completion);
        }
    }

    /// fi_close: stop the data path (no completion may arrive afterwards)
    /// and give back every binding and the domain reference.
    fn close(&self) {
        {
            let mut st = lock(&self.state);
            if wants_wait_fd(&st)
                && let Some(fd) = st.core.as_ref().and_then(|c| c.wait_fd().ok().flatten())
            {
                for b in [&st.tx_cq, &st.rx_cq].into_iter().flatten() {
                    b.cq.remove_wait_fd(fd);
                }
            }
            st.core = None;
            st.port_socket = None;
            let me = self.me.clone();
            for b in [st.tx_cq.take(), st.rx_cq.take()].into_iter().flatten() {
                b.cq.detach(&me);
                b.cq.refs.put();
            }
            for k in [st.send_cntr.take(), st.recv_cntr.take()]
                .into_iter()
                .flatten()
            {
                k.detach(&me);
                k.refs.put();
            }
            if let Some(av) = st.av.take() {
                av.refs.put();
            }
            if let Some(eq) = st.eq.take() {
                eq.refs.put();
            }
        }
        self.domain.refs.put();
    }

    fn enable(&self) -> Result<()> {
        let mut st = lock(&self.state);
        if st.enabled {
            return Ok(());
        }
        if st.av.is_none() {
            return Err(Errno::NOAV);
        }
        // fi_endpoint(3) fi_enable: transmit and receive need a CQ or a
        // counter to report to.
        if (st.tx_cq.is_none() && st.send_cntr.is_none())
            || (st.rx_cq.is_none() && st.recv_cntr.is_none())
        {
            return Err(Errno::NOCQ);
        }
        let args = datapath::OpenArgs {
            iface: self.domain.iface.clone(),
            ep_type: self.ep_type,
            local: st.local,
            cfg: self.domain.cfg.clone(),
            inject_size: getinfo::max_datagram_payload(
                &self.domain.iface,
                st.local.ip.is_ipv6(),
                &self.domain.cfg,
            ),
            min_multi_recv: st.min_multi_recv,
            socket: st
                .port_socket
                .as_ref()
                .and_then(|s| s.try_clone().ok())
                .map(Arc::new),
        };
        let core = crate::xdp::open(&args)?;
        // CQs with FI_WAIT_FD wake up when our socket has data.
        if wants_wait_fd(&st)
            && let Some(fd) = core.wait_fd()?
        {
            for b in [&st.tx_cq, &st.rx_cq].into_iter().flatten() {
                b.cq.add_wait_fd(fd);
            }
        }
        st.core = Some(core);
        st.enabled = true;
        Ok(())
    }
}

#[repr(C)]
pub struct EpObj {
    pub fid: fid_ep,
    pub inner: Arc<Endpoint>,
}

static EP_FI_OPS: fi_ops = object::fi_ops_of::<EpObj>(Some(ep_bind), Some(ep_control));
static EP_OPS: fi_ops_ep = fi_ops_ep {
    size: size_of::<fi_ops_ep>(),
    cancel: Some(ep_cancel),
    getopt: Some(ep_getopt),
    setopt: Some(ep_setopt),
    tx_ctx: Some(ep_tx_ctx),
    rx_ctx: Some(ep_rx_ctx),
    rx_size_left: Some(ep_size_left),
    tx_size_left: Some(ep_size_left),
};
static CM_OPS: fi_ops_cm = fi_ops_cm {
    size: size_of::<fi_ops_cm>(),
    setname: Some(ep_setname),
    getname: Some(ep_getname),
    getpeer: Some(cm_getpeer),
    connect: Some(cm_connect),
    listen: Some(cm_listen),
    accept: Some(cm_accept),
    reject: Some(cm_reject),
    shutdown: Some(cm_shutdown),
    join: Some(cm_join),
};

// SAFETY: repr(C), fid_ep first, EP_FI_OPS in every instance.
unsafe impl FidObject for EpObj {
    const CLASS: usize = FI_CLASS_EP;
    const CLOSE: &'static str = "ep close";
    fn fi_ops() -> *const fi_ops {
        &EP_FI_OPS
    }
    /// Nothing refers to an endpoint: it always closes (fi_endpoint(3)
    /// fi_close discards outstanding operations).
    fn release(&self) {
        self.inner.close();
    }
}

/// The endpoint behind a `fid_ep` pointer.
///
/// # Safety
/// `ep` must be NULL or point to a readable fid.
pub unsafe fn ep_of<'a>(ep: *mut fid_ep) -> Result<&'a Endpoint> {
    // SAFETY: per caller.
    Ok(&unsafe { obj::<EpObj>(ep.cast()) }?.inner)
}

fn random_u32() -> u32 {
    let mut b = [0u8; 4];
    // SAFETY: getrandom writes at most 4 bytes into `b`.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), 4, 0) };
    if n == 4 {
        u32::from_ne_bytes(b).max(1)
    } else {
        // Fallback: time and pid are unique enough for an incarnation.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(1);
        (t ^ std::process::id().rotate_left(16)).max(1)
    }
}

/// Reserve (ip, port) with a kernel UDP socket; port 0 picks a free one.
fn reserve_port(sa: SocketAddr) -> Result<(UdpSocket, u16)> {
    let s = UdpSocket::bind(sa).map_err(|e| {
        crate::xdp_warn!(FI_LOG_EP_CTRL, "cannot reserve UDP {sa}: {e}");
        Errno::from_os(&e)
    })?;
    let port = s.local_addr().map_err(|e| Errno::from_os(&e))?.port();
    Ok((s, port))
}

/// `fi_ops_domain::endpoint`.
pub unsafe extern "C" fn xdp_endpoint(
    domain: *mut fid_domain,
    info: *mut fi_info,
    ep: *mut *mut fid_ep,
    context: *mut c_void,
) -> c_int {
    guard_int("fi_endpoint", || {
        // SAFETY: validated by domain_of / InfoView::read.
        let domain = unsafe { crate::domain::domain_of(domain) }?;
        let info = unsafe { InfoView::read(info) }?;
        if ep.is_null() {
            return Err(Errno::INVAL);
        }
        let ours = match info.ep_type {
            FI_EP_RDM => getinfo::RDM_CAPS,
            FI_EP_DGRAM => getinfo::DGRAM_CAPS,
            _ => return Err(Errno::INVAL),
        };
        if info.caps & !ours != 0 {
            return Err(Errno::INVAL);
        }
        if info
            .domain_name
            .as_deref()
            .is_some_and(|n| n != domain.iface.name)
        {
            return Err(Errno::INVAL);
        }
        let caps = if info.caps == 0 { ours } else { info.caps };
        let ip = match info.src {
            Some(a) if !a.ip.is_unspecified() => {
                if !domain.iface.has_ip(&a.ip) {
                    return Err(Errno::INVAL);
                }
                a.ip
            }
            _ => domain
                .iface
                .ip(info.src.map(|a| a.ip.is_ipv6()))
                .ok_or(Errno::INVAL)?,
        };
        if !info.format.fits(&ip) {
            return Err(Errno::INVAL);
        }
        let port = info
            .src
            .map(|a| a.port)
            .filter(|p| *p != 0)
            .unwrap_or(domain.cfg.port);
        let (sock, port) = reserve_port(SocketAddr::new(ip, port))?;
        let local = XdpAddr {
            ip,
            port,
            mac: domain.iface.mac,
            incarnation: random_u32(),
        };
        let payload = getinfo::max_datagram_payload(&domain.iface, ip.is_ipv6(), &domain.cfg);
        let inner = Arc::new_cyclic(|me| Endpoint {
            domain: domain.clone(),
            ep_type: info.ep_type,
            caps,
            format: info.format,
            inject_size: payload,
            max_msg_size: if info.ep_type == FI_EP_RDM {
                getinfo::RDM_MAX_MSG
            } else {
                payload
            },
            me: me.clone(),
            tx_op_flags: AtomicU64::new(info.tx_op_flags),
            rx_op_flags: AtomicU64::new(info.rx_op_flags),
            state: Mutex::new(EpState {
                enabled: false,
                tx_cq: None,
                rx_cq: None,
                av: None,
                eq: None,
                send_cntr: None,
                recv_cntr: None,
                min_multi_recv: DEFAULT_MIN_MULTI_RECV,
                local,
                port_socket: Some(sock),
                core: None,
                pass_done: Vec::new(),
            }),
        });
        let rdm = info.ep_type == FI_EP_RDM;
        let o = EpObj {
            fid: fid_ep {
                fid: object::header::<EpObj>(context),
                ops: object::ops_ptr(&EP_OPS),
                cm: object::ops_ptr(&CM_OPS),
                msg: if rdm {
                    object::ops_ptr(&crate::msg::MSG_OPS_RDM)
                } else {
                    object::ops_ptr(&crate::msg::MSG_OPS_DGRAM)
                },
                rma: object::ops_ptr(&crate::msg::RMA_OPS),
                tagged: if rdm {
                    object::ops_ptr(&crate::msg::TAGGED_OPS)
                } else {
                    object::ops_ptr(&crate::msg::TAGGED_OPS_NOSYS)
                },
                atomic: object::ops_ptr(&crate::msg::ATOMIC_OPS),
                // No FI_COLLECTIVE capability; the collective table is not mirrored.
                collective: std::ptr::null_mut(),
            },
            inner,
        };
        // SAFETY: `ep` was checked non-NULL above.
        unsafe { object::open(ep, Some(&domain.refs), o) }.map(|_| 0)
    })
}

/// `fi_ops_domain::endpoint2`: flags must be 0 in 1.17.
pub unsafe extern "C" fn xdp_endpoint2(
    domain: *mut fid_domain,
    info: *mut fi_info,
    ep: *mut *mut fid_ep,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    if flags != 0 {
        return -FI_EBADFLAGS;
    }
    // SAFETY: same contract as xdp_endpoint.
    unsafe { xdp_endpoint(domain, info, ep, context) }
}

/// Whether a CQ bound to the endpoint waits on an fd (FI_WAIT_FD): only
/// then does the data path's wait fd exist and join it.
fn wants_wait_fd(st: &EpState) -> bool {
    [&st.tx_cq, &st.rx_cq]
        .into_iter()
        .flatten()
        .any(|b| b.cq.wants_wait_fd())
}

/// fi_ep_bind (fi_endpoint(3) "fi_ep_bind"): CQs (FI_TRANSMIT/FI_RECV,
/// optionally FI_SELECTIVE_COMPLETION), one AV, counters (FI_SEND/FI_RECV),
/// one EQ. Only before fi_enable.
unsafe extern "C" fn ep_bind(f: *mut fid, bfid: *mut fid, flags: u64) -> c_int {
    guard_int("fi_ep_bind", || {
        // SAFETY: validated by obj().
        let e = &unsafe { obj::<EpObj>(f) }?.inner;
        if bfid.is_null() {
            return Err(Errno::INVAL);
        }
        // SAFETY: non-NULL fid from the application.
        let class = unsafe { (*bfid).fclass };
        let mut st = lock(&e.state);
        if st.enabled {
            return Err(Errno::OPBADSTATE);
        }
        match class {
            FI_CLASS_CQ => {
                // SAFETY: validated by obj().
                let cq = unsafe { obj::<crate::cq::CqObj>(bfid) }?.inner.clone();
                if flags & !(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION) != 0
                    || flags & (FI_TRANSMIT | FI_RECV) == 0
                {
                    return Err(Errno::BADFLAGS);
                }
                if !Arc::ptr_eq(&cq.domain, &e.domain) {
                    return Err(Errno::DOMAIN);
                }
                if (flags & FI_TRANSMIT != 0 && st.tx_cq.is_some())
                    || (flags & FI_RECV != 0 && st.rx_cq.is_some())
                {
                    return Err(Errno::INVAL);
                }
                let b = CqBinding {
                    cq: cq.clone(),
                    selective: flags & FI_SELECTIVE_COMPLETION != 0,
                };
                if flags & FI_TRANSMIT != 0 {
                    cq.refs.get();
                    cq.attach(e.me.clone());
                    st.tx_cq = Some(b.clone());
                }
                if flags & FI_RECV != 0 {
                    cq.refs.get();
                    cq.attach(e.me.clone());
                    st.rx_cq = Some(b);
                }
                Ok(0)
            }
            FI_CLASS_AV => {
                // SAFETY: validated by obj().
                let av = unsafe { crate::av::av_of(bfid) }?;
                if flags != 0 {
                    return Err(Errno::BADFLAGS);
                }
                if !Arc::ptr_eq(&av.domain, &e.domain) {
                    return Err(Errno::DOMAIN);
                }
                if st.av.is_some() {
                    return Err(Errno::INVAL);
                }
                av.refs.get();
                st.av = Some(av);
                Ok(0)
            }
            FI_CLASS_CNTR => {
                // SAFETY: validated by obj().
                let k = unsafe { obj::<crate::cntr::CntrObj>(bfid) }?.inner.clone();
                if flags & !(FI_SEND | FI_RECV) != 0 || flags == 0 {
                    // Only send/receive events exist without RMA.
                    return Err(Errno::BADFLAGS);
                }
                if !Arc::ptr_eq(&k.domain, &e.domain) {
                    return Err(Errno::DOMAIN);
                }
                if (flags & FI_SEND != 0 && st.send_cntr.is_some())
                    || (flags & FI_RECV != 0 && st.recv_cntr.is_some())
                {
                    return Err(Errno::INVAL);
                }
                if flags & FI_SEND != 0 {
                    k.refs.get();
                    k.attach(e.me.clone());
                    st.send_cntr = Some(k.clone());
                }
                if flags & FI_RECV != 0 {
                    k.refs.get();
                    k.attach(e.me.clone());
                    st.recv_cntr = Some(k);
                }
                Ok(0)
            }
            FI_CLASS_EQ => {
                // SAFETY: validated by obj().
                let eq = unsafe { obj::<crate::eq::EqObj>(bfid) }?.inner.clone();
                if flags != 0 {
                    return Err(Errno::BADFLAGS);
                }
                if !Arc::ptr_eq(&eq.fabric, &e.domain.fabric) {
                    return Err(Errno::INVAL);
                }
                if st.eq.is_some() {
                    return Err(Errno::INVAL);
                }
                eq.refs.get();
                st.eq = Some(eq);
                Ok(0)
            }
            _ => Err(Errno::INVAL),
        }
    })
}

/// fi_control on an endpoint: FI_ENABLE, FI_GETOPSFLAG, FI_SETOPSFLAG.
unsafe extern "C" fn ep_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    guard_int("ep control", || {
        // SAFETY: validated by obj().
        let e = &unsafe { obj::<EpObj>(f) }?.inner;
        match command {
            FI_ENABLE => e.enable().map(|_| 0),
            FI_GETOPSFLAG | FI_SETOPSFLAG => {
                let p = arg.cast::<u64>();
                if p.is_null() {
                    return Err(Errno::INVAL);
                }
                // SAFETY: arg is a uint64_t * per fi_endpoint(3).
                let v = unsafe { *p };
                let dir = v & (FI_TRANSMIT | FI_RECV);
                if dir != FI_TRANSMIT && dir != FI_RECV {
                    return Err(Errno::INVAL);
                }
                let (slot, allowed) = if dir == FI_TRANSMIT {
                    (&e.tx_op_flags, getinfo::TX_OP_FLAGS)
                } else {
                    (&e.rx_op_flags, getinfo::RX_OP_FLAGS)
                };
                if command == FI_GETOPSFLAG {
                    // SAFETY: as above.
                    unsafe { *p = slot.load(Ordering::Relaxed) | dir };
                } else {
                    let flags = v & !dir;
                    if flags & !allowed != 0 {
                        return Err(Errno::BADFLAGS);
                    }
                    slot.store(flags, Ordering::Relaxed);
                }
                Ok(0)
            }
            _ => Err(Errno::NOSYS),
        }
    })
}

/// fi_cancel: 0 if a queued receive was cancelled (its FI_ECANCELED error
/// completion follows), -FI_ENOENT otherwise.
unsafe extern "C" fn ep_cancel(f: fid_t, context: *mut c_void) -> ssize_t {
    guard_ssize("fi_cancel", || {
        // SAFETY: validated by obj().
        let e = &unsafe { obj::<EpObj>(f) }?.inner;
        let mut st = lock(&e.state);
        let found = st
            .core
            .as_mut()
            .is_some_and(|core| core.cancel(context as usize));
        if found { Ok(0) } else { Err(Errno(FI_ENOENT)) }
    })
}

/// fi_getopt: FI_OPT_ENDPOINT / FI_OPT_MIN_MULTI_RECV (size_t).
unsafe extern "C" fn ep_getopt(
    f: fid_t,
    level: c_int,
    optname: c_int,
    optval: *mut c_void,
    optlen: *mut size_t,
) -> c_int {
    guard_int("fi_getopt", || {
        // SAFETY: validated by obj().
        let e = &unsafe { obj::<EpObj>(f) }?.inner;
        if level != FI_OPT_ENDPOINT {
            return Err(Errno(FI_ENOPROTOOPT));
        }
        if optval.is_null() || optlen.is_null() {
            return Err(Errno::INVAL);
        }
        match optname {
            FI_OPT_MIN_MULTI_RECV => {
                // SAFETY: optlen non-NULL.
                if unsafe { *optlen } < size_of::<size_t>() {
                    return Err(Errno::TOOSMALL);
                }
                let v = lock(&e.state).min_multi_recv;
                // SAFETY: optval holds a size_t (checked length).
                unsafe {
                    optval.cast::<size_t>().write_unaligned(v);
                    *optlen = size_of::<size_t>();
                }
                Ok(0)
            }
            _ => Err(Errno(FI_ENOPROTOOPT)),
        }
    })
}

unsafe extern "C" fn ep_setopt(
    f: fid_t,
    level: c_int,
    optname: c_int,
    optval: *const c_void,
    optlen: size_t,
) -> c_int {
    guard_int("fi_setopt", || {
        // SAFETY: validated by obj().
        let e = &unsafe { obj::<EpObj>(f) }?.inner;
        if level != FI_OPT_ENDPOINT {
            return Err(Errno(FI_ENOPROTOOPT));
        }
        match optname {
            FI_OPT_MIN_MULTI_RECV => {
                if optval.is_null() || optlen < size_of::<size_t>() {
                    return Err(Errno::INVAL);
                }
                // SAFETY: optval holds a size_t (checked length).
                let v = unsafe { optval.cast::<size_t>().read_unaligned() };
                let mut st = lock(&e.state);
                st.min_multi_recv = v;
                if let Some(core) = st.core.as_mut() {
                    core.set_min_multi_recv(v);
                }
                Ok(0)
            }
            _ => Err(Errno(FI_ENOPROTOOPT)),
        }
    })
}

/// No scalable endpoints: tx/rx contexts cannot be created.
unsafe extern "C" fn ep_tx_ctx(
    _: *mut fid_ep,
    _: c_int,
    _: *mut fi_tx_attr,
    _: *mut *mut fid_ep,
    _: *mut c_void,
) -> c_int {
    -FI_ENOSYS
}
unsafe extern "C" fn ep_rx_ctx(
    _: *mut fid_ep,
    _: c_int,
    _: *mut fi_rx_attr,
    _: *mut *mut fid_ep,
    _: *mut c_void,
) -> c_int {
    -FI_ENOSYS
}
/// fi_rx/tx_size_left are deprecated (fi_endpoint(3)) and not implemented.
unsafe extern "C" fn ep_size_left(_: *mut fid_ep) -> ssize_t {
    -(FI_ENOSYS as ssize_t)
}

/// fi_getname (fi_cm(3)): our address in the endpoint's format; truncates
/// and returns -FI_ETOOSMALL (with the needed size) if the buffer is short.
unsafe extern "C" fn ep_getname(f: fid_t, addr: *mut c_void, addrlen: *mut size_t) -> c_int {
    guard_int("fi_getname", || {
        // SAFETY: validated by obj().
        let e = &unsafe { obj::<EpObj>(f) }?.inner;
        if addrlen.is_null() {
            return Err(Errno::INVAL);
        }
        let bytes = e.format.encode(&lock(&e.state).local);
        // SAFETY: addrlen non-NULL; addr holds *addrlen bytes.
        unsafe {
            let room = *addrlen;
            *addrlen = bytes.len();
            if room < bytes.len() || addr.is_null() {
                if !addr.is_null() {
                    std::ptr::copy_nonoverlapping(bytes.as_ptr(), addr.cast::<u8>(), room);
                }
                return Err(Errno::TOOSMALL);
            }
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), addr.cast::<u8>(), bytes.len());
        }
        Ok(0)
    })
}

/// fi_setname: choose our IP/port before fi_enable (the port is
/// re-reserved; our MAC and incarnation are kept).
unsafe extern "C" fn ep_setname(f: fid_t, addr: *mut c_void, addrlen: size_t) -> c_int {
    guard_int("fi_setname", || {
        // SAFETY: validated by obj().
        let e = &unsafe { obj::<EpObj>(f) }?.inner;
        if addr.is_null() || addrlen == 0 {
            return Err(Errno::INVAL);
        }
        // SAFETY: addr holds addrlen bytes.
        let b = unsafe { std::slice::from_raw_parts(addr.cast::<u8>(), addrlen) };
        let (a, _) = crate::addr::decode_any(b).ok_or(Errno::INVAL)?;
        let mut st = lock(&e.state);
        if st.enabled {
            return Err(Errno::OPBADSTATE);
        }
        if !e.domain.iface.has_ip(&a.ip) || !e.format.fits(&a.ip) {
            return Err(Errno::INVAL);
        }
        if a.socket_addr() != st.local.socket_addr() {
            st.port_socket = None;
            let (s, port) = reserve_port(a.socket_addr())?;
            st.port_socket = Some(s);
            st.local.ip = a.ip;
            st.local.port = port;
        }
        Ok(0)
    })
}

// Connection management does not apply to connectionless endpoints.
unsafe extern "C" fn cm_getpeer(_: *mut fid_ep, _: *mut c_void, _: *mut size_t) -> c_int {
    -FI_ENOSYS
}
unsafe extern "C" fn cm_connect(
    _: *mut fid_ep,
    _: *const c_void,
    _: *const c_void,
    _: size_t,
) -> c_int {
    -FI_ENOSYS
}
unsafe extern "C" fn cm_listen(_: *mut fid_pep) -> c_int {
    -FI_ENOSYS
}
unsafe extern "C" fn cm_accept(_: *mut fid_ep, _: *const c_void, _: size_t) -> c_int {
    -FI_ENOSYS
}
unsafe extern "C" fn cm_reject(_: *mut fid_pep, _: fid_t, _: *const c_void, _: size_t) -> c_int {
    -FI_ENOSYS
}
unsafe extern "C" fn cm_shutdown(_: *mut fid_ep, _: u64) -> c_int {
    -FI_ENOSYS
}
unsafe extern "C" fn cm_join(
    _: *mut fid_ep,
    _: *const c_void,
    _: u64,
    _: *mut *mut c_void,
    _: *mut c_void,
) -> c_int {
    -FI_ENOSYS
}
