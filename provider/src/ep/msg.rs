//! fi_msg(3): untagged sends and receives. The entry points are generated
//! by [`data_calls!`] from one line each; validation is in
//! [`super::post`].

use super::post::{
    Buf, Ctx, Desc, Descs, Iovs, Recv, RecvBuf, Send, data_calls, enosys_calls, iovs, one,
    post_recv, post_send,
};
use crate::sys::*;

data_calls! {
    recv "fi_recv" (buf: RecvBuf, len: usize, _: Desc, src: fi_addr_t, ctx: Ctx)
        => post_recv(Recv::new(one(buf, len)?, src, ctx));
    recvv "fi_recvv" (iov: Iovs, _: Descs, count: usize, src: fi_addr_t, ctx: Ctx)
        => post_recv(Recv::new(iovs(iov, count)?, src, ctx));
    recvmsg "fi_recvmsg" (msg: *const fi_msg, flags: u64)
        => post_recv(Recv::msg(msg, flags)?);
    send "fi_send" (buf: Buf, len: usize, _: Desc, to: fi_addr_t, ctx: Ctx)
        => post_send(Send::new(one(buf, len)?, to, ctx));
    sendv "fi_sendv" (iov: Iovs, _: Descs, count: usize, to: fi_addr_t, ctx: Ctx)
        => post_send(Send::new(iovs(iov, count)?, to, ctx));
    sendmsg "fi_sendmsg" (msg: *const fi_msg, flags: u64)
        => post_send(Send::msg(msg, flags)?);
    inject "fi_inject" (buf: Buf, len: usize, to: fi_addr_t)
        => post_send(Send::inject(one(buf, len)?, to));
    senddata "fi_senddata" (buf: Buf, len: usize, _: Desc, data: u64, to: fi_addr_t, ctx: Ctx)
        => post_send(Send::new(one(buf, len)?, to, ctx).data(data));
    injectdata "fi_injectdata" (buf: Buf, len: usize, data: u64, to: fi_addr_t)
        => post_send(Send::inject(one(buf, len)?, to).data(data));
}

enosys_calls! {
    /// DGRAM endpoints carry plain UDP payloads: no remote CQ data
    /// (cq_data_size = 0).
    no_senddata(Buf, usize, Desc, u64, fi_addr_t, Ctx);
    no_injectdata(Buf, usize, u64, fi_addr_t);
}

pub static MSG_OPS_RDM: fi_ops_msg = fi_ops_msg {
    size: size_of::<fi_ops_msg>(),
    recv: Some(recv),
    recvv: Some(recvv),
    recvmsg: Some(recvmsg),
    send: Some(send),
    sendv: Some(sendv),
    sendmsg: Some(sendmsg),
    inject: Some(inject),
    senddata: Some(senddata),
    injectdata: Some(injectdata),
};

pub static MSG_OPS_DGRAM: fi_ops_msg = fi_ops_msg {
    senddata: Some(no_senddata),
    injectdata: Some(no_injectdata),
    ..MSG_OPS_RDM
};
