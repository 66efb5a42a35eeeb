//! Logging through libfabric's `fi_log`, so `FI_LOG_LEVEL`, `FI_LOG_PROV`
//! and `FI_LOG_SUBSYS` behave for `xdp` exactly as for built-in providers
//! (fi_log.h). Before the core has registered us (`fi_prov_ini`), e.g. in
//! Rust unit tests, messages are dropped: the core's log state is not ready.
//!
//! It also keeps the `fi_provider` the core registered, which every call
//! into the core's log and parameter functions names ([`provider`]).

use std::ffi::CString;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, Ordering};

use libc::c_int;

use crate::sys::{ffi, fi_provider};

/// The provider struct handed to the core by `fi_prov_ini`; NULL before.
static REGISTERED: AtomicPtr<fi_provider> = AtomicPtr::new(std::ptr::null_mut());

/// Called from `fi_prov_ini` with the struct it returns: the core is
/// initialised from here on.
pub fn mark_registered(provider: *mut fi_provider) {
    REGISTERED.store(provider, Ordering::Release);
}

/// Our `fi_provider` once libfabric's core has loaded us (fi_log and
/// fi_param_* are usable then); `None` before, e.g. in Rust unit tests.
pub fn provider() -> Option<*mut fi_provider> {
    let p = REGISTERED.load(Ordering::Acquire);
    (!p.is_null()).then_some(p)
}

/// Set by the first `fi_getinfo` that reaches us: libfabric has read its
/// log settings (`fi_log_init`) and applied `FI_LOG_PROV` to us (at
/// registration) by then, and changes neither afterwards, so its answers
/// can be kept.
static SETTLED: AtomicBool = AtomicBool::new(false);

/// Log levels (`FI_LOG_WARN`..=`FI_LOG_DEBUG`) and subsystems (room for
/// fi_log.h's ten) whose answers are kept.
const LEVELS: usize = 4;
const SUBSYSTEMS: usize = 16;

/// `fi_log_enabled`'s answer per level and subsystem once settled: 0 = not
/// asked yet, 1 = no, 2 = yes. Data-path code asks per datagram and per
/// completion; this makes that a load instead of a call into libfabric.
static ANSWERS: [AtomicU8; LEVELS * SUBSYSTEMS] = [const { AtomicU8::new(0) }; LEVELS * SUBSYSTEMS];

/// Called from `fi_getinfo`: see `SETTLED`.
pub fn mark_settled() {
    SETTLED.store(true, Ordering::Release);
}

/// Whether `level`/`subsys` would be printed; lets callers skip formatting.
pub fn enabled(level: c_int, subsys: c_int) -> bool {
    let Some(provider) = provider() else {
        return false;
    };
    let slot = match (usize::try_from(level), usize::try_from(subsys)) {
        (Ok(l), Ok(s)) if l < LEVELS && s < SUBSYSTEMS && SETTLED.load(Ordering::Acquire) => {
            Some(l * SUBSYSTEMS + s)
        }
        _ => None,
    };
    if let Some(answer) = slot.map(|i| ANSWERS[i].load(Ordering::Relaxed))
        && answer != 0
    {
        return answer == 2;
    }
    // SAFETY: `provider` is the fi_provider the core registered.
    let on = unsafe { ffi::fi_log_enabled(provider, level, subsys) } != 0;
    if let Some(i) = slot {
        ANSWERS[i].store(if on { 2 } else { 1 }, Ordering::Relaxed);
    }
    on
}

/// Emit one message (use the `xdp_warn!`/`xdp_info!`/… macros).
pub fn emit(level: c_int, subsys: c_int, func: &str, line: u32, msg: &str) {
    let Some(provider) = provider().filter(|_| enabled(level, subsys)) else {
        return;
    };
    let func = CString::new(func.replace('\0', "?")).unwrap_or_default();
    let msg = CString::new(msg.replace('\0', "?")).unwrap_or_default();
    let saved = std::io::Error::last_os_error().raw_os_error();
    // SAFETY: all pointers are valid NUL-terminated strings; "%s" consumes
    // exactly one char* argument.
    unsafe {
        ffi::fi_log(
            provider,
            level,
            subsys,
            func.as_ptr(),
            line as c_int,
            c"%s\n".as_ptr(),
            msg.as_ptr(),
        );
    }
    // FI_LOG preserves errno around fi_log; so do we.
    if let Some(e) = saved {
        // SAFETY: __errno_location returns this thread's errno slot.
        unsafe { *libc::__errno_location() = e };
    }
}

#[macro_export]
macro_rules! xdp_log {
    ($level:expr, $subsys:expr, $($arg:tt)*) => {
        if $crate::log::enabled($level, $subsys) {
            $crate::log::emit($level, $subsys, module_path!(), line!(), &format!($($arg)*));
        }
    };
}
#[macro_export]
macro_rules! xdp_warn { ($subsys:expr, $($arg:tt)*) => { $crate::xdp_log!($crate::sys::FI_LOG_WARN, $subsys, $($arg)*) }; }
#[macro_export]
macro_rules! xdp_info { ($subsys:expr, $($arg:tt)*) => { $crate::xdp_log!($crate::sys::FI_LOG_INFO, $subsys, $($arg)*) }; }
#[macro_export]
macro_rules! xdp_debug { ($subsys:expr, $($arg:tt)*) => { $crate::xdp_log!($crate::sys::FI_LOG_DEBUG, $subsys, $($arg)*) }; }
