//! `rdma/providers/fi_prov.h`: the `fi_provider` a provider hands the core.

use libc::{c_char, c_int, c_void};

use super::*;

#[repr(C)]
pub struct fi_provider {
    pub version: u32,
    pub fi_version: u32,
    pub context: fi_context,
    pub name: *const c_char,
    pub getinfo: Option<
        unsafe extern "C" fn(
            version: u32,
            node: *const c_char,
            service: *const c_char,
            flags: u64,
            hints: *const fi_info,
            info: *mut *mut fi_info,
        ) -> c_int,
    >,
    pub fabric: Option<
        unsafe extern "C" fn(
            attr: *mut fi_fabric_attr,
            fabric: *mut *mut fid_fabric,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub cleanup: Option<unsafe extern "C" fn()>,
}
