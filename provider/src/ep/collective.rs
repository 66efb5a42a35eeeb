//! Collective operations (fi_collective(3)): not offered. FI_COLLECTIVE is
//! never granted, but libfabric's inline `fi_barrier`, `fi_allreduce` and
//! the others call through the endpoint's collective table without asking:
//! a table of calls that return -FI_ENOSYS keeps such a call from
//! dereferencing NULL in the application.

use libc::c_int;

use super::post::{Buf, Ctx, Desc, Descs, RecvBuf, enosys_calls};
use crate::sys::*;

enosys_calls! {
    no_barrier(fi_addr_t, Ctx);
    no_broadcast(RecvBuf, usize, Desc, fi_addr_t, fi_addr_t, c_int, u64, Ctx);
    /// alltoall, allgather.
    no_result(Buf, usize, Desc, RecvBuf, Desc, fi_addr_t, c_int, u64, Ctx);
    /// allreduce, reduce_scatter.
    no_reduce_to_all(Buf, usize, Desc, RecvBuf, Desc, fi_addr_t, c_int, c_int, u64, Ctx);
    no_reduce(Buf, usize, Desc, RecvBuf, Desc, fi_addr_t, fi_addr_t, c_int, c_int, u64, Ctx);
    /// scatter, gather.
    no_rooted(Buf, usize, Desc, RecvBuf, Desc, fi_addr_t, fi_addr_t, c_int, u64, Ctx);
    no_msg(Buf, RecvBuf, Descs, usize, u64);
    no_barrier2(fi_addr_t, u64, Ctx);
}

pub static COLLECTIVE_OPS_NOSYS: fi_ops_collective = fi_ops_collective {
    size: size_of::<fi_ops_collective>(),
    barrier: Some(no_barrier),
    broadcast: Some(no_broadcast),
    alltoall: Some(no_result),
    allreduce: Some(no_reduce_to_all),
    allgather: Some(no_result),
    reduce_scatter: Some(no_reduce_to_all),
    reduce: Some(no_reduce),
    scatter: Some(no_rooted),
    gather: Some(no_rooted),
    msg: Some(no_msg),
    barrier2: Some(no_barrier2),
};
