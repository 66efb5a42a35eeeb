//! Constants from the libfabric 1.17 headers, and those libfabric 2.x added
//! (values checked against both sets of C headers by `tests/layout.rs`, see
//! [`super::layout::rust_constants`] and [`super::layout::CHANGED_IN_2`]).

#![allow(missing_docs)]

use libc::c_int;

pub const fn fi_version(major: u32, minor: u32) -> u32 {
    (major << 16) | minor
}
pub const fn fi_major(v: u32) -> u32 {
    v >> 16
}
pub const fn fi_minor(v: u32) -> u32 {
    v & 0xffff
}

pub const FI_MAJOR_VERSION: u32 = 1;
pub const FI_MINOR_VERSION: u32 = 17;
pub const FI_NAME_MAX: usize = 64;

pub const FI_PROV_SPECIFIC: u32 = 1 << 31;

// Capabilities / operation flags (fabric.h)
pub const FI_MSG: u64 = 1 << 1;
pub const FI_RMA: u64 = 1 << 2;
pub const FI_TAGGED: u64 = 1 << 3;
pub const FI_ATOMIC: u64 = 1 << 4;
pub const FI_MULTICAST: u64 = 1 << 5;
pub const FI_COLLECTIVE: u64 = 1 << 6;
pub const FI_READ: u64 = 1 << 8;
pub const FI_WRITE: u64 = 1 << 9;
pub const FI_RECV: u64 = 1 << 10;
pub const FI_SEND: u64 = 1 << 11;
pub const FI_TRANSMIT: u64 = FI_SEND;
pub const FI_REMOTE_READ: u64 = 1 << 12;
pub const FI_REMOTE_WRITE: u64 = 1 << 13;
pub const FI_MULTI_RECV: u64 = 1 << 16;
pub const FI_REMOTE_CQ_DATA: u64 = 1 << 17;
pub const FI_MORE: u64 = 1 << 18;
pub const FI_PEEK: u64 = 1 << 19;
pub const FI_TRIGGER: u64 = 1 << 20;
pub const FI_FENCE: u64 = 1 << 21;
pub const FI_PRIORITY: u64 = 1 << 22;
pub const FI_COMPLETION: u64 = 1 << 24;
pub const FI_EVENT: u64 = FI_COMPLETION;
pub const FI_INJECT: u64 = 1 << 25;
pub const FI_INJECT_COMPLETE: u64 = 1 << 26;
pub const FI_TRANSMIT_COMPLETE: u64 = 1 << 27;
pub const FI_DELIVERY_COMPLETE: u64 = 1 << 28;
pub const FI_AFFINITY: u64 = 1 << 29;
pub const FI_COMMIT_COMPLETE: u64 = 1 << 30;
pub const FI_MATCH_COMPLETE: u64 = 1 << 31;
pub const FI_AV_USER_ID: u64 = 1 << 41;
pub const FI_HMEM: u64 = 1 << 47;
pub const FI_VARIABLE_MSG: u64 = 1 << 48;
pub const FI_SOURCE_ERR: u64 = 1 << 50;
pub const FI_LOCAL_COMM: u64 = 1 << 51;
pub const FI_REMOTE_COMM: u64 = 1 << 52;
pub const FI_SHARED_AV: u64 = 1 << 53;
pub const FI_PROV_ATTR_ONLY: u64 = 1 << 54;
pub const FI_NUMERICHOST: u64 = 1 << 55;
pub const FI_RMA_EVENT: u64 = 1 << 56;
pub const FI_SOURCE: u64 = 1 << 57;
pub const FI_NAMED_RX_CTX: u64 = 1 << 58;
pub const FI_DIRECTED_RECV: u64 = 1 << 59;
pub const FI_CLAIM: u64 = 1 << 59;
pub const FI_DISCARD: u64 = 1 << 58;
/// fi_bind flag (fabric.h).
pub const FI_SELECTIVE_COMPLETION: u64 = 1 << 59;
/// fi_av_insert flag (fi_domain.h).
pub const FI_SYNC_ERR: u64 = 1 << 58;

// Mode bits
pub const FI_CONTEXT: u64 = 1 << 59;
pub const FI_MSG_PREFIX: u64 = 1 << 58;
pub const FI_ASYNC_IOV: u64 = 1 << 57;
pub const FI_RX_CQ_DATA: u64 = 1 << 56;
pub const FI_LOCAL_MR: u64 = 1 << 55;
pub const FI_NOTIFY_FLAGS_ONLY: u64 = 1 << 54;
pub const FI_RESTRICTED_COMP: u64 = 1 << 53;
pub const FI_CONTEXT2: u64 = 1 << 52;
pub const FI_BUFFERED_RECV: u64 = 1 << 51;

// Address formats
pub const FI_FORMAT_UNSPEC: u32 = 0;
pub const FI_SOCKADDR: u32 = 1;
pub const FI_SOCKADDR_IN: u32 = 2;
pub const FI_SOCKADDR_IN6: u32 = 3;
pub const FI_ADDR_STR: u32 = 9;

pub const FI_ADDR_UNSPEC: u64 = u64::MAX;
pub const FI_ADDR_NOTAVAIL: u64 = u64::MAX;
pub const FI_KEY_NOTAVAIL: u64 = u64::MAX;

// enum fi_av_type
pub const FI_AV_UNSPEC: c_int = 0;
pub const FI_AV_MAP: c_int = 1;
pub const FI_AV_TABLE: c_int = 2;

// mr_mode bits
pub const FI_MR_UNSPEC: c_int = 0;
pub const FI_MR_BASIC: c_int = 1;
pub const FI_MR_SCALABLE: c_int = 2;
pub const FI_MR_LOCAL: c_int = 1 << 2;
pub const FI_MR_RAW: c_int = 1 << 3;
pub const FI_MR_VIRT_ADDR: c_int = 1 << 4;
pub const FI_MR_ALLOCATED: c_int = 1 << 5;
pub const FI_MR_PROV_KEY: c_int = 1 << 6;
pub const FI_MR_MMU_NOTIFY: c_int = 1 << 7;
pub const FI_MR_RMA_EVENT: c_int = 1 << 8;
pub const FI_MR_ENDPOINT: c_int = 1 << 9;
pub const FI_MR_HMEM: c_int = 1 << 10;

// enum fi_progress
pub const FI_PROGRESS_UNSPEC: c_int = 0;
pub const FI_PROGRESS_AUTO: c_int = 1;
pub const FI_PROGRESS_MANUAL: c_int = 2;

// enum fi_threading
pub const FI_THREAD_UNSPEC: c_int = 0;
pub const FI_THREAD_SAFE: c_int = 1;
pub const FI_THREAD_FID: c_int = 2;
pub const FI_THREAD_DOMAIN: c_int = 3;
pub const FI_THREAD_COMPLETION: c_int = 4;
pub const FI_THREAD_ENDPOINT: c_int = 5;

// enum fi_resource_mgmt
pub const FI_RM_UNSPEC: c_int = 0;
pub const FI_RM_DISABLED: c_int = 1;
pub const FI_RM_ENABLED: c_int = 2;

// msg_order bits
pub const FI_ORDER_NONE: u64 = 0;
pub const FI_ORDER_RAR: u64 = 1 << 0;
pub const FI_ORDER_RAW: u64 = 1 << 1;
pub const FI_ORDER_RAS: u64 = 1 << 2;
pub const FI_ORDER_WAR: u64 = 1 << 3;
pub const FI_ORDER_WAW: u64 = 1 << 4;
pub const FI_ORDER_WAS: u64 = 1 << 5;
pub const FI_ORDER_SAR: u64 = 1 << 6;
pub const FI_ORDER_SAW: u64 = 1 << 7;
pub const FI_ORDER_SAS: u64 = 1 << 8;
pub const FI_ORDER_STRICT: u64 = 0x1ff;
pub const FI_ORDER_DATA: u64 = 1 << 16;
pub const FI_ORDER_RMA_RAR: u64 = 1 << 32;
pub const FI_ORDER_RMA_RAW: u64 = 1 << 33;
pub const FI_ORDER_RMA_WAR: u64 = 1 << 34;
pub const FI_ORDER_RMA_WAW: u64 = 1 << 35;
pub const FI_ORDER_ATOMIC_RAR: u64 = 1 << 36;
pub const FI_ORDER_ATOMIC_RAW: u64 = 1 << 37;
pub const FI_ORDER_ATOMIC_WAR: u64 = 1 << 38;
pub const FI_ORDER_ATOMIC_WAW: u64 = 1 << 39;

// enum fi_datatype (fi_domain.h)
pub const FI_INT8: c_int = 0;
pub const FI_UINT8: c_int = 1;
pub const FI_INT16: c_int = 2;
pub const FI_UINT16: c_int = 3;
pub const FI_INT32: c_int = 4;
pub const FI_UINT32: c_int = 5;
pub const FI_INT64: c_int = 6;
pub const FI_UINT64: c_int = 7;
pub const FI_FLOAT: c_int = 8;
pub const FI_DOUBLE: c_int = 9;
pub const FI_FLOAT_COMPLEX: c_int = 10;
pub const FI_DOUBLE_COMPLEX: c_int = 11;
pub const FI_LONG_DOUBLE: c_int = 12;
pub const FI_LONG_DOUBLE_COMPLEX: c_int = 13;
pub const FI_INT128: c_int = 14;
pub const FI_UINT128: c_int = 15;

// enum fi_op (fi_domain.h)
pub const FI_MIN: c_int = 0;
pub const FI_MAX: c_int = 1;
pub const FI_SUM: c_int = 2;
pub const FI_PROD: c_int = 3;
pub const FI_LOR: c_int = 4;
pub const FI_LAND: c_int = 5;
pub const FI_BOR: c_int = 6;
pub const FI_BAND: c_int = 7;
pub const FI_LXOR: c_int = 8;
pub const FI_BXOR: c_int = 9;
pub const FI_ATOMIC_READ: c_int = 10;
pub const FI_ATOMIC_WRITE: c_int = 11;
pub const FI_CSWAP: c_int = 12;
pub const FI_CSWAP_NE: c_int = 13;
pub const FI_CSWAP_LE: c_int = 14;
pub const FI_CSWAP_LT: c_int = 15;
pub const FI_CSWAP_GE: c_int = 16;
pub const FI_CSWAP_GT: c_int = 17;
pub const FI_MSWAP: c_int = 18;

// fi_query_atomic flags (fi_atomic.h)
pub const FI_FETCH_ATOMIC: u64 = 1 << 58;
pub const FI_COMPARE_ATOMIC: u64 = 1 << 59;

// enum fi_ep_type
pub const FI_EP_UNSPEC: c_int = 0;
pub const FI_EP_MSG: c_int = 1;
pub const FI_EP_DGRAM: c_int = 2;
pub const FI_EP_RDM: c_int = 3;

// protocols
pub const FI_PROTO_UNSPEC: u32 = 0;
pub const FI_PROTO_UDP: u32 = 5;

// fid classes
pub const FI_CLASS_UNSPEC: usize = 0;
pub const FI_CLASS_FABRIC: usize = 1;
pub const FI_CLASS_DOMAIN: usize = 2;
pub const FI_CLASS_EP: usize = 3;
pub const FI_CLASS_SEP: usize = 4;
pub const FI_CLASS_RX_CTX: usize = 5;
pub const FI_CLASS_SRX_CTX: usize = 6;
pub const FI_CLASS_TX_CTX: usize = 7;
pub const FI_CLASS_STX_CTX: usize = 8;
pub const FI_CLASS_PEP: usize = 9;
pub const FI_CLASS_INTERFACE: usize = 10;
pub const FI_CLASS_AV: usize = 11;
pub const FI_CLASS_MR: usize = 12;
pub const FI_CLASS_EQ: usize = 13;
pub const FI_CLASS_CQ: usize = 14;
pub const FI_CLASS_CNTR: usize = 15;
pub const FI_CLASS_WAIT: usize = 16;
pub const FI_CLASS_POLL: usize = 17;
pub const FI_CLASS_CONNREQ: usize = 18;

// fi_control commands
pub const FI_GETFIDFLAG: c_int = 0;
pub const FI_SETFIDFLAG: c_int = 1;
pub const FI_GETOPSFLAG: c_int = 2;
pub const FI_SETOPSFLAG: c_int = 3;
pub const FI_ALIAS: c_int = 4;
pub const FI_GETWAIT: c_int = 5;
pub const FI_ENABLE: c_int = 6;
pub const FI_REFRESH: c_int = 14;
pub const FI_BACKLOG: c_int = 7;
pub const FI_GETWAITOBJ: c_int = 16;

// enum fi_param_type
pub const FI_PARAM_STRING: c_int = 0;
pub const FI_PARAM_INT: c_int = 1;
pub const FI_PARAM_BOOL: c_int = 2;
pub const FI_PARAM_SIZE_T: c_int = 3;

// enum fi_wait_obj
pub const FI_WAIT_NONE: c_int = 0;
pub const FI_WAIT_UNSPEC: c_int = 1;
pub const FI_WAIT_SET: c_int = 2;
pub const FI_WAIT_FD: c_int = 3;
pub const FI_WAIT_MUTEX_COND: c_int = 4;
pub const FI_WAIT_YIELD: c_int = 5;
pub const FI_WAIT_POLLFD: c_int = 6;

// EQ events
pub const FI_NOTIFY: u32 = 0;
pub const FI_CONNREQ: u32 = 1;
pub const FI_CONNECTED: u32 = 2;
pub const FI_SHUTDOWN: u32 = 3;
pub const FI_MR_COMPLETE: u32 = 4;
pub const FI_AV_COMPLETE: u32 = 5;

// enum fi_cq_format
pub const FI_CQ_FORMAT_UNSPEC: c_int = 0;
pub const FI_CQ_FORMAT_CONTEXT: c_int = 1;
pub const FI_CQ_FORMAT_MSG: c_int = 2;
pub const FI_CQ_FORMAT_DATA: c_int = 3;
pub const FI_CQ_FORMAT_TAGGED: c_int = 4;

// enum fi_cq_wait_cond
pub const FI_CQ_COND_NONE: c_int = 0;
pub const FI_CQ_COND_THRESHOLD: c_int = 1;

// enum fi_cntr_events
pub const FI_CNTR_EVENTS_COMP: c_int = 0;

// endpoint options (fi_endpoint.h)
pub const FI_OPT_ENDPOINT: c_int = 0;
pub const FI_OPT_MIN_MULTI_RECV: c_int = 0;
pub const FI_OPT_CM_DATA_SIZE: c_int = 1;

// enum fi_hmem_iface
pub const FI_HMEM_SYSTEM: c_int = 0;

// Error numbers (fi_errno.h): the classic ones alias errno values, the rest
// start at FI_ERRNO_OFFSET.
pub const FI_SUCCESS: c_int = 0;
pub const FI_EPERM: c_int = libc::EPERM;
pub const FI_ENOENT: c_int = libc::ENOENT;
pub const FI_EINTR: c_int = libc::EINTR;
pub const FI_EIO: c_int = libc::EIO;
pub const FI_E2BIG: c_int = libc::E2BIG;
pub const FI_EBADF: c_int = libc::EBADF;
pub const FI_EAGAIN: c_int = libc::EAGAIN;
pub const FI_ENOMEM: c_int = libc::ENOMEM;
pub const FI_EACCES: c_int = libc::EACCES;
pub const FI_EKEYREJECTED: c_int = libc::EKEYREJECTED;
pub const FI_EFAULT: c_int = libc::EFAULT;
pub const FI_EBUSY: c_int = libc::EBUSY;
pub const FI_ENODEV: c_int = libc::ENODEV;
pub const FI_EINVAL: c_int = libc::EINVAL;
pub const FI_EMFILE: c_int = libc::EMFILE;
pub const FI_ENOSPC: c_int = libc::ENOSPC;
pub const FI_ENOSYS: c_int = libc::ENOSYS;
pub const FI_ENOMSG: c_int = libc::ENOMSG;
pub const FI_ENODATA: c_int = libc::ENODATA;
pub const FI_EOVERFLOW: c_int = libc::EOVERFLOW;
pub const FI_EMSGSIZE: c_int = libc::EMSGSIZE;
pub const FI_ENOPROTOOPT: c_int = libc::ENOPROTOOPT;
pub const FI_EOPNOTSUPP: c_int = libc::EOPNOTSUPP;
pub const FI_EADDRINUSE: c_int = libc::EADDRINUSE;
pub const FI_EADDRNOTAVAIL: c_int = libc::EADDRNOTAVAIL;
pub const FI_ENETDOWN: c_int = libc::ENETDOWN;
pub const FI_ENETUNREACH: c_int = libc::ENETUNREACH;
pub const FI_ECANCELED: c_int = libc::ECANCELED;
pub const FI_ETIMEDOUT: c_int = libc::ETIMEDOUT;
pub const FI_EALREADY: c_int = libc::EALREADY;
pub const FI_EHOSTUNREACH: c_int = libc::EHOSTUNREACH;
pub const FI_ECONNABORTED: c_int = libc::ECONNABORTED;
pub const FI_ECONNRESET: c_int = libc::ECONNRESET;
pub const FI_EISCONN: c_int = libc::EISCONN;
pub const FI_ENOTCONN: c_int = libc::ENOTCONN;
pub const FI_ECONNREFUSED: c_int = libc::ECONNREFUSED;
pub const FI_ERRNO_OFFSET: c_int = 256;
pub const FI_EOTHER: c_int = 256;
pub const FI_ETOOSMALL: c_int = 257;
pub const FI_EOPBADSTATE: c_int = 258;
pub const FI_EAVAIL: c_int = 259;
pub const FI_EBADFLAGS: c_int = 260;
pub const FI_ENOEQ: c_int = 261;
pub const FI_EDOMAIN: c_int = 262;
pub const FI_ENOCQ: c_int = 263;
pub const FI_ECRC: c_int = 264;
pub const FI_ETRUNC: c_int = 265;
pub const FI_ENOKEY: c_int = 266;
pub const FI_ENOAV: c_int = 267;
pub const FI_EOVERRUN: c_int = 268;
pub const FI_ENORX: c_int = 269;

// fi_log.h
pub const FI_LOG_WARN: c_int = 0;
pub const FI_LOG_TRACE: c_int = 1;
pub const FI_LOG_INFO: c_int = 2;
pub const FI_LOG_DEBUG: c_int = 3;

pub const FI_LOG_CORE: c_int = 0;
pub const FI_LOG_FABRIC: c_int = 1;
pub const FI_LOG_DOMAIN: c_int = 2;
pub const FI_LOG_EP_CTRL: c_int = 3;
pub const FI_LOG_EP_DATA: c_int = 4;
pub const FI_LOG_AV: c_int = 5;
pub const FI_LOG_CQ: c_int = 6;
pub const FI_LOG_EQ: c_int = 7;
pub const FI_LOG_MR: c_int = 8;
pub const FI_LOG_CNTR: c_int = 9;

// Added by libfabric 2.x (fabric.h, fi_tagged.h of 2.1 and 2.6). Bit 48
// was FI_VARIABLE_MSG before 2.0 (which 2.x defines as 0): read the bit by
// the version the application asked for.
pub const FI_TAGGED_DIRECTED_RECV: u64 = 1 << 45;
pub const FI_TAGGED_MULTI_RECV: u64 = 1 << 46;
pub const FI_EXACT_DIRECTED_RECV: u64 = 1 << 48;
/// `auth_key_size` value asking for keys per AV entry (fi_domain(3) of
/// 1.20 and later, fi_av(3) `fi_av_insert_auth_key`).
pub const FI_AV_AUTH_KEY: usize = usize::MAX;
pub const FI_PROGRESS_CONTROL_UNIFIED: c_int = 3;
/// `mem_tag_format` on input from 2.0 on is a format (fi_endpoint(3)
/// "mem_tag_format"): values below FI_TAG_MAX_FORMAT name one.
pub const FI_TAG_BITS: u64 = 0;
pub const FI_TAG_MPI: u64 = 1;
pub const FI_TAG_CCL: u64 = 2;
pub const FI_TAG_MAX_FORMAT: u64 = 1 << 16;
