//! The Rust side of the ABI check: every mirrored struct's size and every
//! field's offset, named the way C names them, plus the constants. The test
//! `tests/layout.rs` turns the same list into a C program compiled against
//! `/usr/include/rdma` and compares the two outputs line by line.

use core::mem::{offset_of, size_of};

use super::consts::*;
use super::types::*;

/// One layout fact: `(C struct name, C field name or None for sizeof, value)`.
pub type LayoutItem = (&'static str, Option<&'static str>, usize);

macro_rules! layout {
    ($out:ident; $( $st:ident { $( $rf:ident $(as $cf:literal)? ),* $(,)? } )* ) => {
        $(
            $out.push((stringify!($st), None, size_of::<$st>()));
            $(
                $out.push((
                    stringify!($st),
                    Some(layout!(@name $rf $($cf)?)),
                    offset_of!($st, $rf),
                ));
            )*
        )*
    };
    (@name $rf:ident $cf:literal) => { $cf };
    (@name $rf:ident) => { stringify!($rf) };
}

/// Sizes and offsets of every mirrored struct, as Rust lays them out.
pub fn rust_layout() -> Vec<LayoutItem> {
    let mut v: Vec<LayoutItem> = Vec::new();
    layout!(v;
        fi_ops { size, close, bind, control, ops_open, tostr, ops_set }
        fid { fclass, context, ops }
        fi_tx_attr { caps, mode, op_flags, msg_order, comp_order, inject_size, size, iov_limit, rma_iov_limit, tclass }
        fi_rx_attr { caps, mode, op_flags, msg_order, comp_order, total_buffered_recv, size, iov_limit }
        fi_ep_attr { type_ as "type", protocol, protocol_version, max_msg_size, msg_prefix_size,
            max_order_raw_size, max_order_war_size, max_order_waw_size, mem_tag_format,
            tx_ctx_cnt, rx_ctx_cnt, auth_key_size, auth_key }
        fi_domain_attr { domain, name, threading, control_progress, data_progress, resource_mgmt,
            av_type, mr_mode, mr_key_size, cq_data_size, cq_cnt, ep_cnt, tx_ctx_cnt, rx_ctx_cnt,
            max_ep_tx_ctx, max_ep_rx_ctx, max_ep_stx_ctx, max_ep_srx_ctx, cntr_cnt, mr_iov_limit,
            caps, mode, auth_key, auth_key_size, max_err_data, mr_cnt, tclass }
        fi_fabric_attr { fabric, name, prov_name, prov_version, api_version }
        fi_info { next, caps, mode, addr_format, src_addrlen, dest_addrlen, src_addr, dest_addr,
            handle, tx_attr, rx_attr, ep_attr, domain_attr, fabric_attr, nic }
        fi_context { internal }
        fi_context2 { internal }
        fi_ops_fabric { size, domain, passive_ep, eq_open, wait_open, trywait, domain2 }
        fid_fabric { fid, ops, api_version }
        fi_provider { version, fi_version, context, name, getinfo, fabric, cleanup }
        fi_av_attr { type_ as "type", rx_ctx_bits, count, ep_per_node, name, map_addr, flags }
        fi_ops_av { size, insert, insertsvc, insertsym, remove, lookup, straddr, av_set }
        fid_av { fid, ops }
        fid_mr { fid, mem_desc, key }
        fi_mr_attr { mr_iov, iov_count, access, offset, requested_key, context, auth_key_size,
            auth_key, iface, device }
        fi_mr_modify { flags, attr }
        fi_ops_domain { size, av_open, cq_open, endpoint, scalable_ep, cntr_open, poll_open,
            stx_ctx, srx_ctx, query_atomic, query_collective, endpoint2 }
        fi_ops_mr { size, reg, regv, regattr }
        fid_domain { fid, ops, mr }
        fi_msg { msg_iov, desc, iov_count, addr, context, data }
        fi_ops_ep { size, cancel, getopt, setopt, tx_ctx, rx_ctx, rx_size_left, tx_size_left }
        fi_ops_msg { size, recv, recvv, recvmsg, send, sendv, sendmsg, inject, senddata, injectdata }
        fid_ep { fid, ops, cm, msg, rma, tagged, atomic, collective }
        fi_ops_collective { size, barrier, broadcast, alltoall, allreduce, allgather,
            reduce_scatter, reduce, scatter, gather, msg, barrier2 }
        fid_pep { fid, ops, cm }
        fi_ops_cm { size, setname, getname, getpeer, connect, listen, accept, reject, shutdown, join }
        fi_msg_tagged { msg_iov, desc, iov_count, addr, tag, ignore, context, data }
        fi_rma_iov { addr, len, key }
        fi_rma_ioc { addr, count, key }
        fi_msg_rma { msg_iov, desc, iov_count, addr, rma_iov, rma_iov_count, context, data }
        fi_ioc { addr, count }
        fi_msg_atomic { msg_iov, desc, iov_count, addr, rma_iov, rma_iov_count, datatype, op, context, data }
        fi_atomic_attr { count, size }
        fi_ops_tagged { size, recv, recvv, recvmsg, send, sendv, sendmsg, inject, senddata, injectdata }
        fi_ops_rma { size, read, readv, readmsg, write, writev, writemsg, inject, writedata, injectdata }
        fi_ops_atomic { size, write, writev, writemsg, inject, readwrite, readwritev, readwritemsg,
            compwrite, compwritev, compwritemsg, writevalid, readwritevalid, compwritevalid }
        fi_wait_attr { wait_obj, flags }
        fi_ops_wait { size, wait }
        fid_wait { fid, ops }
        fi_poll_attr { flags }
        fi_ops_poll { size, poll, poll_add, poll_del }
        fid_poll { fid, ops }
        fi_eq_attr { size, flags, wait_obj, signaling_vector, wait_set }
        fi_eq_entry { fid, context, data }
        fi_eq_err_entry { fid, context, data, err, prov_errno, err_data, err_data_size }
        fi_eq_cm_entry { fid, info }
        fi_mutex_cond { mutex, cond }
        fi_ops_eq { size, read, readerr, write, sread, strerror }
        fid_eq { fid, ops }
        fi_cq_entry { op_context }
        fi_cq_msg_entry { op_context, flags, len }
        fi_cq_data_entry { op_context, flags, len, buf, data }
        fi_cq_tagged_entry { op_context, flags, len, buf, data, tag }
        fi_cq_err_entry { op_context, flags, len, buf, data, tag, olen, err, prov_errno, err_data, err_data_size }
        fi_cq_attr { size, flags, format, wait_obj, signaling_vector, wait_cond, wait_set }
        fi_ops_cq { size, read, readfrom, readerr, sread, sreadfrom, signal, strerror }
        fid_cq { fid, ops }
        fi_cntr_attr { events, wait_obj, wait_set, flags }
        fi_ops_cntr { size, read, readerr, add, set, wait, adderr, seterr }
        fid_cntr { fid, ops }
    );
    v
}

macro_rules! consts {
    ($($name:ident),* $(,)?) => {
        vec![$((stringify!($name), $name as i128)),*]
    };
}

/// Every constant whose value the test checks against the C headers.
pub fn rust_constants() -> Vec<(&'static str, i128)> {
    consts![
        FI_MAJOR_VERSION,
        FI_MINOR_VERSION,
        FI_NAME_MAX,
        FI_PROV_SPECIFIC,
        FI_MSG,
        FI_RMA,
        FI_TAGGED,
        FI_ATOMIC,
        FI_MULTICAST,
        FI_COLLECTIVE,
        FI_READ,
        FI_WRITE,
        FI_RECV,
        FI_SEND,
        FI_TRANSMIT,
        FI_REMOTE_READ,
        FI_REMOTE_WRITE,
        FI_MULTI_RECV,
        FI_REMOTE_CQ_DATA,
        FI_MORE,
        FI_PEEK,
        FI_TRIGGER,
        FI_FENCE,
        FI_PRIORITY,
        FI_COMPLETION,
        FI_EVENT,
        FI_INJECT,
        FI_INJECT_COMPLETE,
        FI_TRANSMIT_COMPLETE,
        FI_DELIVERY_COMPLETE,
        FI_AFFINITY,
        FI_COMMIT_COMPLETE,
        FI_MATCH_COMPLETE,
        FI_AV_USER_ID,
        FI_HMEM,
        FI_VARIABLE_MSG,
        FI_SOURCE_ERR,
        FI_LOCAL_COMM,
        FI_REMOTE_COMM,
        FI_SHARED_AV,
        FI_PROV_ATTR_ONLY,
        FI_NUMERICHOST,
        FI_RMA_EVENT,
        FI_SOURCE,
        FI_NAMED_RX_CTX,
        FI_DIRECTED_RECV,
        FI_CLAIM,
        FI_DISCARD,
        FI_SELECTIVE_COMPLETION,
        FI_SYNC_ERR,
        FI_CONTEXT,
        FI_MSG_PREFIX,
        FI_ASYNC_IOV,
        FI_RX_CQ_DATA,
        FI_LOCAL_MR,
        FI_NOTIFY_FLAGS_ONLY,
        FI_RESTRICTED_COMP,
        FI_CONTEXT2,
        FI_BUFFERED_RECV,
        FI_FORMAT_UNSPEC,
        FI_SOCKADDR,
        FI_SOCKADDR_IN,
        FI_SOCKADDR_IN6,
        FI_ADDR_STR,
        FI_ADDR_UNSPEC,
        FI_ADDR_NOTAVAIL,
        FI_KEY_NOTAVAIL,
        FI_AV_UNSPEC,
        FI_AV_MAP,
        FI_AV_TABLE,
        FI_MR_UNSPEC,
        FI_MR_BASIC,
        FI_MR_SCALABLE,
        FI_MR_LOCAL,
        FI_MR_RAW,
        FI_MR_VIRT_ADDR,
        FI_MR_ALLOCATED,
        FI_MR_PROV_KEY,
        FI_MR_MMU_NOTIFY,
        FI_MR_RMA_EVENT,
        FI_MR_ENDPOINT,
        FI_MR_HMEM,
        FI_PROGRESS_UNSPEC,
        FI_PROGRESS_AUTO,
        FI_PROGRESS_MANUAL,
        FI_THREAD_UNSPEC,
        FI_THREAD_SAFE,
        FI_THREAD_FID,
        FI_THREAD_DOMAIN,
        FI_THREAD_COMPLETION,
        FI_THREAD_ENDPOINT,
        FI_RM_UNSPEC,
        FI_RM_DISABLED,
        FI_RM_ENABLED,
        FI_ORDER_NONE,
        FI_ORDER_SAW,
        FI_ORDER_SAS,
        FI_ORDER_STRICT,
        FI_ORDER_DATA,
        FI_REFRESH,
        FI_ORDER_RAR,
        FI_ORDER_RAW,
        FI_ORDER_RAS,
        FI_ORDER_WAR,
        FI_ORDER_WAW,
        FI_ORDER_WAS,
        FI_ORDER_SAR,
        FI_ORDER_RMA_RAR,
        FI_ORDER_RMA_RAW,
        FI_ORDER_RMA_WAR,
        FI_ORDER_RMA_WAW,
        FI_ORDER_ATOMIC_RAR,
        FI_ORDER_ATOMIC_RAW,
        FI_ORDER_ATOMIC_WAR,
        FI_ORDER_ATOMIC_WAW,
        FI_INT8,
        FI_UINT8,
        FI_INT16,
        FI_UINT16,
        FI_INT32,
        FI_UINT32,
        FI_INT64,
        FI_UINT64,
        FI_FLOAT,
        FI_DOUBLE,
        FI_FLOAT_COMPLEX,
        FI_DOUBLE_COMPLEX,
        FI_LONG_DOUBLE,
        FI_LONG_DOUBLE_COMPLEX,
        FI_INT128,
        FI_UINT128,
        FI_MIN,
        FI_MAX,
        FI_SUM,
        FI_PROD,
        FI_LOR,
        FI_LAND,
        FI_BOR,
        FI_BAND,
        FI_LXOR,
        FI_BXOR,
        FI_ATOMIC_READ,
        FI_ATOMIC_WRITE,
        FI_CSWAP,
        FI_CSWAP_NE,
        FI_CSWAP_LE,
        FI_CSWAP_LT,
        FI_CSWAP_GE,
        FI_CSWAP_GT,
        FI_MSWAP,
        FI_FETCH_ATOMIC,
        FI_COMPARE_ATOMIC,
        FI_EKEYREJECTED,
        FI_EP_UNSPEC,
        FI_EP_MSG,
        FI_EP_DGRAM,
        FI_EP_RDM,
        FI_PROTO_UNSPEC,
        FI_PROTO_UDP,
        FI_CLASS_UNSPEC,
        FI_CLASS_FABRIC,
        FI_CLASS_DOMAIN,
        FI_CLASS_EP,
        FI_CLASS_SEP,
        FI_CLASS_RX_CTX,
        FI_CLASS_SRX_CTX,
        FI_CLASS_TX_CTX,
        FI_CLASS_STX_CTX,
        FI_CLASS_PEP,
        FI_CLASS_INTERFACE,
        FI_CLASS_AV,
        FI_CLASS_MR,
        FI_CLASS_EQ,
        FI_CLASS_CQ,
        FI_CLASS_CNTR,
        FI_CLASS_WAIT,
        FI_CLASS_POLL,
        FI_CLASS_CONNREQ,
        FI_GETFIDFLAG,
        FI_SETFIDFLAG,
        FI_GETOPSFLAG,
        FI_SETOPSFLAG,
        FI_ALIAS,
        FI_GETWAIT,
        FI_ENABLE,
        FI_BACKLOG,
        FI_GETWAITOBJ,
        FI_PARAM_STRING,
        FI_PARAM_INT,
        FI_PARAM_BOOL,
        FI_PARAM_SIZE_T,
        FI_WAIT_NONE,
        FI_WAIT_UNSPEC,
        FI_WAIT_SET,
        FI_WAIT_FD,
        FI_WAIT_MUTEX_COND,
        FI_WAIT_YIELD,
        FI_WAIT_POLLFD,
        FI_NOTIFY,
        FI_CONNREQ,
        FI_CONNECTED,
        FI_SHUTDOWN,
        FI_MR_COMPLETE,
        FI_AV_COMPLETE,
        FI_CQ_FORMAT_UNSPEC,
        FI_CQ_FORMAT_CONTEXT,
        FI_CQ_FORMAT_MSG,
        FI_CQ_FORMAT_DATA,
        FI_CQ_FORMAT_TAGGED,
        FI_CQ_COND_NONE,
        FI_CQ_COND_THRESHOLD,
        FI_CNTR_EVENTS_COMP,
        FI_OPT_ENDPOINT,
        FI_OPT_MIN_MULTI_RECV,
        FI_OPT_CM_DATA_SIZE,
        FI_HMEM_SYSTEM,
        FI_SUCCESS,
        FI_EPERM,
        FI_ENOENT,
        FI_EINTR,
        FI_EIO,
        FI_E2BIG,
        FI_EBADF,
        FI_EAGAIN,
        FI_ENOMEM,
        FI_EACCES,
        FI_EFAULT,
        FI_EBUSY,
        FI_ENODEV,
        FI_EINVAL,
        FI_EMFILE,
        FI_ENOSPC,
        FI_ENOSYS,
        FI_ENOMSG,
        FI_ENODATA,
        FI_EOVERFLOW,
        FI_EMSGSIZE,
        FI_ENOPROTOOPT,
        FI_EOPNOTSUPP,
        FI_EADDRINUSE,
        FI_EADDRNOTAVAIL,
        FI_ENETDOWN,
        FI_ENETUNREACH,
        FI_ECANCELED,
        FI_ETIMEDOUT,
        FI_EALREADY,
        FI_EHOSTUNREACH,
        FI_ECONNABORTED,
        FI_ECONNRESET,
        FI_EISCONN,
        FI_ENOTCONN,
        FI_ECONNREFUSED,
        FI_ERRNO_OFFSET,
        FI_EOTHER,
        FI_ETOOSMALL,
        FI_EOPBADSTATE,
        FI_EAVAIL,
        FI_EBADFLAGS,
        FI_ENOEQ,
        FI_EDOMAIN,
        FI_ENOCQ,
        FI_ECRC,
        FI_ETRUNC,
        FI_ENOKEY,
        FI_ENOAV,
        FI_EOVERRUN,
        FI_ENORX,
        FI_LOG_WARN,
        FI_LOG_TRACE,
        FI_LOG_INFO,
        FI_LOG_DEBUG,
        FI_LOG_CORE,
        FI_LOG_FABRIC,
        FI_LOG_DOMAIN,
        FI_LOG_EP_CTRL,
        FI_LOG_EP_DATA,
        FI_LOG_AV,
        FI_LOG_CQ,
        FI_LOG_EQ,
        FI_LOG_MR,
        FI_LOG_CNTR,
    ]
}

/// The libfabric 2.x ABI (2.0 to 2.6): every fact of [`rust_layout`] holds
/// there too, except the sizes of the structs 2.x extended at their end
/// ([`EXTENDED_IN_2`]), plus the tail of `fi_domain_attr` that we mirror
/// ([`fi_domain_attr_2`]). `tests/layout.rs` checks this against Debian 13's
/// libfabric-dev (2.1) headers.
pub fn rust_layout_2() -> Vec<LayoutItem> {
    vec![
        (
            "fi_domain_attr",
            Some("max_ep_auth_key"),
            offset_of!(fi_domain_attr_2, max_ep_auth_key),
        ),
        (
            "fi_domain_attr",
            Some("max_group_id"),
            offset_of!(fi_domain_attr_2, max_group_id),
        ),
        ("fi_domain_attr", None, size_of::<fi_domain_attr_2>()),
    ]
}

/// Structs libfabric 2.x extended at their end, and why the provider's
/// 1.17 mirror of the prefix stays correct with a 2.x core or application.
/// Their 2.x size must be at least ours: the checked offsets are a prefix.
pub const EXTENDED_IN_2: &[(&str, &str)] = &[
    (
        "fi_domain_attr",
        "fi_domain_attr_2 mirrors the tail up to max_group_id; 2.5's \
         max_cntr_value and max_err_cntr_value stay 0 (\"the full counter range\", \
         fi_domain(3)) in what we return",
    ),
    (
        "fi_cq_err_entry",
        "we write the fields up to err_data_size; 2.x's fi_cq_readerr sets the new \
         src_addr to FI_ADDR_NOTAVAIL before calling us, as fi_cq(3) asks without \
         FI_AV_AUTH_KEY",
    ),
    (
        "fi_mr_attr",
        "we read the fields up to device; the new ones serve FI_HMEM, FI_MR_DMABUF \
         and sub-registrations, which regattr refuses (iface, flags)",
    ),
    (
        "fi_mr_modify",
        "it ends with an fi_mr_attr (above); FI_REFRESH reads flags and the attr's \
         mr_iov and iov_count only",
    ),
    (
        "fi_ops_av",
        "our table's size field is the 1.17 size, so fi_av_insert_auth_key, \
         fi_av_lookup_auth_key and fi_av_set_user_id see no operation (FI_CHECK_OP) \
         and return -FI_ENOSYS",
    ),
];

/// Constants of [`rust_constants`] that libfabric 2.x removed or redefined,
/// and why that is safe: the provider reads them by requested version.
pub const CHANGED_IN_2: &[(&str, &str)] = &[
    ("FI_MAJOR_VERSION", "the headers' own version"),
    ("FI_MINOR_VERSION", "the headers' own version"),
    (
        "FI_PROV_SPECIFIC",
        "2.x keeps the rule (provider-specific values set the top bit) without the name",
    ),
    ("FI_PRIORITY", "removed in 2.0; never offered"),
    ("FI_BUFFERED_RECV", "removed in 2.0; never offered"),
    (
        "FI_VARIABLE_MSG",
        "0 in 2.x; its bit is FI_EXACT_DIRECTED_RECV there, never offered",
    ),
    ("FI_NOTIFY_FLAGS_ONLY", "0 in 2.x; never required"),
    ("FI_RESTRICTED_COMP", "0 in 2.x; never required"),
];

/// Constants only libfabric 2.x defines (checked against its headers).
pub fn rust_constants_2() -> Vec<(&'static str, i128)> {
    consts![
        FI_TAGGED_DIRECTED_RECV,
        FI_TAGGED_MULTI_RECV,
        FI_EXACT_DIRECTED_RECV,
        FI_AV_AUTH_KEY,
        FI_PROGRESS_CONTROL_UNIFIED,
        FI_TAG_BITS,
        FI_TAG_MPI,
        FI_TAG_CCL,
        FI_TAG_MAX_FORMAT,
    ]
}
