//! fi_atomic(3): not offered (no FI_ATOMIC capability), so every slot
//! returns -FI_ENOSYS; `fi_query_atomic` (domain) says the same. Offering
//! atomics means generating these entry points as [`super::msg`] does — one
//! [`super::post::data_calls!`] line each — and mirroring `struct fi_ioc`
//! and `struct fi_msg_atomic`.

use libc::{c_int, c_void};

use super::post::{Buf, Ctx, Desc, Descs, RecvBuf, enosys_calls};
use crate::sys::*;

/// `struct fi_ioc *` and `struct fi_msg_atomic *` (not mirrored while
/// atomics are not offered).
type Ioc = *const c_void;
type Msg = *const c_void;
type ResultIoc = *mut c_void;
type ResultDescs = *mut *mut c_void;
/// enum fi_datatype, enum fi_op.
type Datatype = c_int;
type Op = c_int;

enosys_calls! {
    atomic(Buf, usize, Desc, fi_addr_t, u64, u64, Datatype, Op, Ctx);
    atomicv(Ioc, Descs, usize, fi_addr_t, u64, u64, Datatype, Op, Ctx);
    atomicmsg(Msg, u64);
    inject_atomic(Buf, usize, fi_addr_t, u64, u64, Datatype, Op);
    fetch_atomic(Buf, usize, Desc, RecvBuf, Desc, fi_addr_t, u64, u64, Datatype, Op, Ctx);
    fetch_atomicv(Ioc, Descs, usize, ResultIoc, ResultDescs, usize, fi_addr_t, u64, u64, Datatype, Op, Ctx);
    fetch_atomicmsg(Msg, ResultIoc, ResultDescs, usize, u64);
    compare_atomic(Buf, usize, Desc, Buf, Desc, RecvBuf, Desc, fi_addr_t, u64, u64, Datatype, Op, Ctx);
    compare_atomicv(Ioc, Descs, usize, Ioc, Descs, usize, ResultIoc, ResultDescs, usize, fi_addr_t, u64, u64, Datatype, Op, Ctx);
    compare_atomicmsg(Msg, Ioc, Descs, usize, ResultIoc, ResultDescs, usize, u64);
    /// fi_atomicvalid and friends: no (datatype, op) pair is valid.
    valid(Datatype, Op, *mut usize) -> c_int;
}

pub static ATOMIC_OPS: fi_ops_atomic = fi_ops_atomic {
    size: size_of::<fi_ops_atomic>(),
    write: Some(atomic),
    writev: Some(atomicv),
    writemsg: Some(atomicmsg),
    inject: Some(inject_atomic),
    readwrite: Some(fetch_atomic),
    readwritev: Some(fetch_atomicv),
    readwritemsg: Some(fetch_atomicmsg),
    compwrite: Some(compare_atomic),
    compwritev: Some(compare_atomicv),
    compwritemsg: Some(compare_atomicmsg),
    writevalid: Some(valid),
    readwritevalid: Some(valid),
    compwritevalid: Some(valid),
};
