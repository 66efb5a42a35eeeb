//! `rdma/fi_collective.h`: `fi_ops_collective`. Pointer arguments the
//! provider never reads (buffers, descriptors, the collective message) are
//! typed as `c_void`; enums are `c_int`, as C passes them.

use libc::{c_int, c_void, size_t, ssize_t};

use super::*;

#[repr(C)]
pub struct fi_ops_collective {
    pub size: size_t,
    pub barrier: Option<unsafe extern "C" fn(*mut fid_ep, fi_addr_t, *mut c_void) -> ssize_t>,
    pub broadcast: Option<
        unsafe extern "C" fn(
            *mut fid_ep,
            *mut c_void,
            size_t,
            *mut c_void,
            fi_addr_t,
            fi_addr_t,
            c_int,
            u64,
            *mut c_void,
        ) -> ssize_t,
    >,
    pub alltoall: Option<ResultFn>,
    pub allreduce: Option<ReduceFn>,
    pub allgather: Option<ResultFn>,
    pub reduce_scatter: Option<ReduceFn>,
    pub reduce: Option<
        unsafe extern "C" fn(
            *mut fid_ep,
            *const c_void,
            size_t,
            *mut c_void,
            *mut c_void,
            *mut c_void,
            fi_addr_t,
            fi_addr_t,
            c_int,
            c_int,
            u64,
            *mut c_void,
        ) -> ssize_t,
    >,
    pub scatter: Option<RootedFn>,
    pub gather: Option<RootedFn>,
    pub msg: Option<
        unsafe extern "C" fn(
            *mut fid_ep,
            *const c_void,
            *mut c_void,
            *mut *mut c_void,
            size_t,
            u64,
        ) -> ssize_t,
    >,
    pub barrier2: Option<unsafe extern "C" fn(*mut fid_ep, fi_addr_t, u64, *mut c_void) -> ssize_t>,
}

/// alltoall, allgather: `(ep, buf, count, desc, result, result_desc,
/// coll_addr, datatype, flags, context)`.
pub type ResultFn = unsafe extern "C" fn(
    *mut fid_ep,
    *const c_void,
    size_t,
    *mut c_void,
    *mut c_void,
    *mut c_void,
    fi_addr_t,
    c_int,
    u64,
    *mut c_void,
) -> ssize_t;

/// allreduce, reduce_scatter: as [`ResultFn`] with an `op` after the
/// datatype.
pub type ReduceFn = unsafe extern "C" fn(
    *mut fid_ep,
    *const c_void,
    size_t,
    *mut c_void,
    *mut c_void,
    *mut c_void,
    fi_addr_t,
    c_int,
    c_int,
    u64,
    *mut c_void,
) -> ssize_t;

/// scatter, gather: as [`ResultFn`] with a `root_addr` after `coll_addr`.
pub type RootedFn = unsafe extern "C" fn(
    *mut fid_ep,
    *const c_void,
    size_t,
    *mut c_void,
    *mut c_void,
    *mut c_void,
    fi_addr_t,
    fi_addr_t,
    c_int,
    u64,
    *mut c_void,
) -> ssize_t;
