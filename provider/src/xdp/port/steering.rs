//! The steering program's registry: one attachment per interface, shared
//! by every endpoint of this process there (and adopted from another
//! process of the same user that attached it first), with the queues this
//! process's sockets are bound to.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use ofi_xdp_bpf::{AttachMode as BpfMode, Steering};
use ofi_xdp_link::ntuple;

use super::open::XskError::{self, Busy, Failed};
use crate::abi::{Errno, lock};
use crate::params::AttachMode;
use crate::sys::*;
use crate::xdp_warn;

pub(super) struct Shared {
    pub(super) steering: Steering,
    /// Queues this process's sockets are bound to on the interface, once
    /// per socket.
    pub(super) queues: Vec<u32>,
}

type Registry = Mutex<HashMap<String, Weak<Mutex<Shared>>>>;

fn registry() -> &'static Registry {
    static R: OnceLock<Registry> = OnceLock::new();
    R.get_or_init(Registry::default)
}

/// The steering program on `ifname`, attached on first use.
pub(super) fn steering_for(
    ifname: &str,
    mode: AttachMode,
) -> std::result::Result<Arc<Mutex<Shared>>, XskError> {
    let mut reg = lock(registry());
    if let Some(s) = reg.get(ifname).and_then(Weak::upgrade) {
        return Ok(s);
    }
    let preferred = match mode {
        AttachMode::Generic => BpfMode::Generic,
        AttachMode::Native => BpfMode::Native,
    };
    let steering = attach_or_adopt(ifname, preferred)?;
    let s = Arc::new(Mutex::new(Shared {
        steering,
        queues: Vec::new(),
    }));
    reg.insert(ifname.to_owned(), Arc::downgrade(&s));
    Ok(s)
}

/// Attaches our steering program to `ifname`, or, where another process
/// holds the hook with our program loaded by our user (another rank of the
/// job), shares it; or says why not (Busy: the kernel UDP path).
///
/// The holder may be exiting (a rank killed): its program detaches between
/// our attach being refused and our taking its link, and adopting then
/// finds nothing. So a refused adoption is followed by another attach, a
/// few times.
fn attach_or_adopt(ifname: &str, preferred: BpfMode) -> std::result::Result<Steering, XskError> {
    const ATTEMPTS: u32 = 3;
    let mut refused = String::new();
    for _ in 0..ATTEMPTS {
        match Steering::attach_any(ifname, preferred) {
            Ok(s) => {
                crate::xdp_info!(
                    FI_LOG_EP_CTRL,
                    "{ifname}: steering program attached in {:?} mode",
                    s.mode()
                );
                reap_stale_rules(ifname);
                return Ok(s);
            }
            Err(ofi_xdp_bpf::BpfError::AlreadyAttached { .. }) => match Steering::adopt(ifname) {
                Ok(s) => {
                    crate::xdp_info!(
                        FI_LOG_EP_CTRL,
                        "{ifname}: sharing the steering program another process attached \
                         ({:?} mode)",
                        s.mode()
                    );
                    return Ok(s);
                }
                Err(e) => refused = e.to_string(),
            },
            Err(e) => {
                xdp_warn!(
                    FI_LOG_EP_CTRL,
                    "attaching the XDP steering program to {ifname}: {e}"
                );
                return Err(Failed(Errno(FI_ENODEV)));
            }
        }
    }
    Err(Busy(refused))
}

/// Removes the ntuple rules (and their records) that processes which are
/// gone left on `ifname`: they would steer a port to a queue no socket of
/// theirs listens on any more.
fn reap_stale_rules(ifname: &str) {
    let (Ok(index), Some(netns)) = (
        ofi_xdp_link::ethtool::ifindex(ifname),
        ofi_xdp_epstats::netns_inode(),
    ) else {
        return;
    };
    let table = ntuple::Ethtool {
        ifname: ifname.to_owned(),
    };
    let dir = std::path::Path::new(ntuple::DEFAULT_DIR);
    for (record, outcome) in ntuple::reap_stale(&table, dir, netns, index) {
        match outcome {
            Ok(what) => crate::xdp_info!(
                FI_LOG_EP_CTRL,
                "{record}: its process is gone; {what:?} (record removed)"
            ),
            Err(e) => xdp_warn!(
                FI_LOG_EP_CTRL,
                "{record}: its process is gone, but removing the rule failed: {e}"
            ),
        }
    }
}
