//! The libfabric `xdp` provider: kernel-bypass messaging over AF_XDP.
//!
//! Loaded by the stock libfabric core as `libxdp-fi.so` (`FI_PROVIDER_PATH`):
//! the core calls [`fi_prov_ini`], then our `getinfo`/`fabric` entry points.
//! Layout, from the bottom up (each layer imports only those below it; the
//! objects refer to each other as libfabric's objects do):
//!
//! - [`sys`]: `#[repr(C)]` mirrors of the libfabric ABI (checked by tests);
//!   [`abi`]: errno type, panic guards; [`log`], [`params`];
//! - [`addr`], [`ifaces`], [`getinfo`]: addresses, interfaces, what we offer;
//! - the data path: [`datapath`] is the seam (its trait and every type that
//!   crosses it), [`xdp`] the AF_XDP implementation below it; [`wait`]: the
//!   file descriptors a waiting thread blocks on;
//! - the objects, one module each as in libfabric's own providers:
//!   [`fabric`], [`domain`], [`ep`] (with its data-call tables), [`av`],
//!   [`mr`], [`cq`], [`cntr`], [`eq`]; what they share: [`object`] (open /
//!   close of every fid), [`progress`] (manual progress over bound
//!   endpoints), [`idle`] (when a read that finds nothing yields the CPU);
//! - [`probe`]: latency probes (the `probes` feature), used on every layer.

// Every `unsafe extern "C"` entry point's safety contract is the libfabric
// API it implements (the man page named in its doc comment): pointers are
// NULL or valid as that page describes. Repeating it on each is noise.
#![allow(clippy::missing_safety_doc)]

pub mod abi;
pub mod addr;
pub mod auth_key;
pub mod av;
pub mod biased_lock;
pub mod cntr;
pub mod cq;
pub mod datapath;
pub mod domain;
pub mod ep;
pub mod eq;
pub mod fabric;
pub mod getinfo;
pub mod idle;
pub mod ifaces;
pub mod log;
pub mod mr;
pub mod object;
pub mod params;
pub mod pep;
pub mod pollset;
pub mod probe;
pub mod progress;
pub mod progress_thread;
pub mod sys;
pub mod wait;
pub mod wait_obj;
pub mod waitset;
pub mod xdp;

use std::cell::UnsafeCell;
use std::ptr::null_mut;

use sys::{fi_context, fi_provider};

/// The `fi_provider` handed to the core. It must be writable: the core
/// stores its bookkeeping in `context` (fi_prov.h), so a `static` in
/// read-only memory would crash the loader.
pub struct ProviderCell(UnsafeCell<fi_provider>);

// SAFETY: after fi_prov_ini returns, only the core writes (to `context`),
// under its own initialisation lock; we only read the constant fields.
unsafe impl Sync for ProviderCell {}

pub static PROVIDER: ProviderCell = ProviderCell(UnsafeCell::new(fi_provider {
    version: getinfo::PROVIDER_VERSION,
    // Stated for the core that loads us, in fi_prov_ini.
    fi_version: getinfo::API_VERSION_MAX,
    context: fi_context {
        internal: [null_mut(); 4],
    },
    name: c"xdp".as_ptr(),
    getinfo: Some(getinfo::xdp_getinfo),
    fabric: Some(fabric::xdp_fabric),
    cleanup: Some(xdp_cleanup),
}));

/// Pointer to our provider struct, for fi_log / fi_param_* calls.
pub fn provider_ptr() -> *mut fi_provider {
    PROVIDER.0.get()
}

/// Entry point the libfabric core looks up with dlsym (FI_EXT_INI in
/// fi_prov.h). Defines the `FI_XDP_*` parameters and returns the provider.
#[unsafe(no_mangle)]
pub extern "C" fn fi_prov_ini() -> *mut fi_provider {
    abi::guard_value("fi_prov_ini", null_mut(), || {
        // SAFETY: fi_version() has no preconditions; the core reads the
        // provider only after we return it, so nothing reads it meanwhile.
        unsafe {
            (*provider_ptr()).fi_version = getinfo::stated_version(sys::ffi::fi_version());
        }
        log::mark_registered(provider_ptr());
        params::define_all();
        provider_ptr()
    })
}

/// Called by the core at fi_fini: nothing global to release (objects are
/// owned by the application and closed by it).
unsafe extern "C" fn xdp_cleanup() {}
