//! fi_rma(3): not offered (no FI_RMA capability), so every slot returns
//! -FI_ENOSYS. Offering RMA means generating these entry points as
//! [`super::msg`] does — one [`super::post::data_calls!`] line each, the
//! validation in `super::post` — and mirroring `struct fi_msg_rma`.

use libc::c_void;

use super::post::{Buf, Ctx, Desc, Descs, Iovs, RecvBuf, enosys_calls};
use crate::sys::*;

/// `struct fi_msg_rma *` (not mirrored while RMA is not offered).
type Msg = *const c_void;

enosys_calls! {
    read(RecvBuf, usize, Desc, fi_addr_t, u64, u64, Ctx);
    readv(Iovs, Descs, usize, fi_addr_t, u64, u64, Ctx);
    readmsg(Msg, u64);
    write(Buf, usize, Desc, fi_addr_t, u64, u64, Ctx);
    writev(Iovs, Descs, usize, fi_addr_t, u64, u64, Ctx);
    writemsg(Msg, u64);
    inject_write(Buf, usize, fi_addr_t, u64, u64);
    writedata(Buf, usize, Desc, u64, fi_addr_t, u64, u64, Ctx);
    inject_writedata(Buf, usize, u64, fi_addr_t, u64, u64);
}

pub static RMA_OPS: fi_ops_rma = fi_ops_rma {
    size: size_of::<fi_ops_rma>(),
    read: Some(read),
    readv: Some(readv),
    readmsg: Some(readmsg),
    write: Some(write),
    writev: Some(writev),
    writemsg: Some(writemsg),
    inject: Some(inject_write),
    writedata: Some(writedata),
    injectdata: Some(inject_writedata),
};
