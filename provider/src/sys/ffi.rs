//! libfabric core functions a dynamically loaded provider may call. The
//! exported symbols were checked with `nm -D libfabric.so.1` (1.17):
//! `fi_dupinfo@@FABRIC_1.3`, `fi_freeinfo@@FABRIC_1.3`, `fi_log@@FABRIC_1.0`,
//! `fi_log_enabled@@FABRIC_1.0`, `fi_param_define@@FABRIC_1.0`,
//! `fi_param_get@@FABRIC_1.0`, `fi_strerror@@FABRIC_1.0`, `fi_version@@FABRIC_1.0`;
//! libfabric 2.x keeps all of them (the newer `fi_dupinfo@@FABRIC_1.8` beside
//! `fi_dupinfo@FABRIC_1.3`, which converts from the 1.3 ABI). Linking against
//! `-lfabric` binds the default (`@@`) versions. Declarations follow
//! `rdma/fabric.h`, `rdma/providers/fi_prov.h` and `rdma/providers/fi_log.h`.

use libc::{c_char, c_int, c_void};

use super::types::{fi_info, fi_provider};

unsafe extern "C" {
    pub fn fi_dupinfo(info: *const fi_info) -> *mut fi_info;
    pub fn fi_freeinfo(info: *mut fi_info);
    pub fn fi_strerror(errnum: c_int) -> *const c_char;
    pub fn fi_version() -> u32;
    pub fn fi_log_enabled(prov: *const fi_provider, level: c_int, subsys: c_int) -> c_int;
    pub fn fi_log(
        prov: *const fi_provider,
        level: c_int,
        subsys: c_int,
        func: *const c_char,
        line: c_int,
        fmt: *const c_char,
        ...
    );
    pub fn fi_param_define(
        provider: *const fi_provider,
        param_name: *const c_char,
        type_: c_int,
        help_string_fmt: *const c_char,
        ...
    ) -> c_int;
    pub fn fi_param_get(
        provider: *mut fi_provider,
        param_name: *const c_char,
        value: *mut c_void,
    ) -> c_int;
}
