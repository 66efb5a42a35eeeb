//! Applying an application's hints to a candidate entry: refuse what we
//! lack, narrow what was asked for (fi_getinfo(3) and the attribute sections
//! of fi_endpoint(3), fi_domain(3), fi_fabric(3)).

use std::ffi::CStr;

use super::attrs::*;
use crate::sys::*;

/// `caps` with the primary modifiers it implies, out of `ours`: "If no
/// modifiers are specified for an applicable capability, all relevant
/// modifiers are assumed" (fi_getinfo(3), "Capabilities"). They are
/// spelled out in the answer, as libfabric's own providers do, because
/// applications read them back: fabtests 2.x bind an endpoint counter for
/// peers' RMA with `info->caps & (FI_REMOTE_WRITE | FI_REMOTE_READ)`.
fn with_implied_modifiers(caps: u64, ours: u64) -> u64 {
    const MSG_DIRECTIONS: u64 = FI_SEND | FI_RECV;
    const RMA_DIRECTIONS: u64 = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
    let mut out = caps;
    if caps & (FI_MSG | FI_TAGGED) != 0 && caps & MSG_DIRECTIONS == 0 {
        out |= ours & MSG_DIRECTIONS;
    }
    if caps & (FI_RMA | FI_ATOMIC) != 0 && caps & RMA_DIRECTIONS == 0 {
        out |= ours & RMA_DIRECTIONS;
    }
    out
}

/// Apply the hints to a candidate: refuse it (`Err(reason)`) or narrow it
/// to what was asked for. Checks follow fi_getinfo(3) and the attribute
/// sections of fi_endpoint(3) / fi_domain(3) / fi_fabric(3).
pub(super) fn apply_hints(
    o: &mut Owned,
    h: &fi_info,
    version: u32,
) -> std::result::Result<(), String> {
    // What the entry grants only when asked for is not in its caps yet.
    let ours = o.info.caps | (caps_of(o.ep.type_).unwrap_or(0) & ONLY_WHEN_ASKED);
    if h.caps != 0 {
        if h.caps & !ours != 0 {
            return Err(format!("caps {:#x} not supported", h.caps & !ours));
        }
        // fi_getinfo(3): FI_SOURCE_ERR "must be paired with FI_SOURCE".
        if h.caps & FI_SOURCE_ERR != 0 && h.caps & FI_SOURCE == 0 {
            return Err("FI_SOURCE_ERR without FI_SOURCE".into());
        }
        o.info.caps = with_implied_modifiers(h.caps, ours) | (ours & DEFAULT_SECONDARY);
    }
    // We require no mode bits, so any hints->mode is acceptable (mode is
    // what the application can do for us, fi_getinfo(3) "Mode"). One is
    // used when offered: FI_MSG_PREFIX on DGRAM with our header, which then
    // lives in the application's prefix space.
    o.info.mode = 0;
    if o.ep.protocol == PROTO_XDP_DGRAM && h.mode & FI_MSG_PREFIX != 0 {
        o.info.mode = FI_MSG_PREFIX;
        o.tx.mode = FI_MSG_PREFIX;
        o.rx.mode = FI_MSG_PREFIX;
        o.ep.msg_prefix_size = DGRAM_PREFIX_SIZE;
    }

    // SAFETY (all derefs below): attribute pointers in hints are NULL or
    // valid, as fi_getinfo(3) requires.
    if let Some(tx) = unsafe { h.tx_attr.as_ref() } {
        if tx.caps & !ours != 0 {
            return Err("tx caps".into());
        }
        if tx.msg_order & !o.tx.msg_order != 0 {
            return Err(format!("tx msg_order {:#x}", tx.msg_order));
        }
        if tx.comp_order & !o.tx.comp_order != 0 {
            return Err("tx comp_order".into());
        }
        if tx.inject_size > o.tx.inject_size {
            return Err(format!(
                "inject_size {} > {}",
                tx.inject_size, o.tx.inject_size
            ));
        }
        if tx.size > o.tx.size
            || tx.iov_limit > o.tx.iov_limit
            || tx.rma_iov_limit > o.tx.rma_iov_limit
        {
            return Err("tx size/iov_limit".into());
        }
        if tx.op_flags & !TX_OP_FLAGS != 0 {
            return Err(format!("tx op_flags {:#x}", tx.op_flags & !TX_OP_FLAGS));
        }
        o.tx.op_flags = tx.op_flags;
        if tx.caps != 0 {
            o.tx.caps = tx.caps;
        }
        if tx.msg_order != 0 {
            o.tx.msg_order = tx.msg_order;
        }
    }
    if let Some(rx) = unsafe { h.rx_attr.as_ref() } {
        if rx.caps & !ours != 0 {
            return Err("rx caps".into());
        }
        if rx.msg_order & !o.rx.msg_order != 0 {
            return Err(format!("rx msg_order {:#x}", rx.msg_order));
        }
        if rx.comp_order & !o.rx.comp_order != 0 {
            return Err("rx comp_order".into());
        }
        if rx.size > o.rx.size || rx.iov_limit > o.rx.iov_limit {
            return Err("rx size/iov_limit".into());
        }
        if rx.op_flags & !RX_OP_FLAGS != 0 {
            return Err(format!("rx op_flags {:#x}", rx.op_flags & !RX_OP_FLAGS));
        }
        o.rx.op_flags = rx.op_flags;
        if rx.caps != 0 {
            o.rx.caps = rx.caps;
        }
        if rx.msg_order != 0 {
            o.rx.msg_order = rx.msg_order;
        }
    }
    // Narrow the directional caps to the primary caps finally granted.
    o.tx.caps &= o.info.caps | !(FI_MSG | FI_TAGGED);
    o.rx.caps &= o.info.caps | !(FI_MSG | FI_TAGGED);

    if let Some(ep) = unsafe { h.ep_attr.as_ref() } {
        if ep.type_ != FI_EP_UNSPEC && ep.type_ != o.ep.type_ {
            return Err("ep type".into());
        }
        if ep.protocol != FI_PROTO_UNSPEC && ep.protocol != o.ep.protocol {
            return Err("protocol".into());
        }
        if ep.max_msg_size > o.ep.max_msg_size {
            return Err(format!(
                "max_msg_size {} > {}",
                ep.max_msg_size, o.ep.max_msg_size
            ));
        }
        if ep.max_order_raw_size > o.ep.max_order_raw_size
            || ep.max_order_war_size > o.ep.max_order_war_size
            || ep.max_order_waw_size > o.ep.max_order_waw_size
        {
            return Err("max_order_*_size".into());
        }
        if ep.msg_prefix_size > o.ep.msg_prefix_size {
            return Err("msg_prefix_size".into());
        }
        if ep.tx_ctx_cnt > 1 || ep.rx_ctx_cnt > 1 {
            return Err("scalable endpoints / shared contexts are not supported".into());
        }
        if ep.auth_key_size != 0 || !ep.auth_key.is_null() {
            o.ep_key = auth_key(o, ep.auth_key, ep.auth_key_size)?;
        }
        if version >= V2 && ep.mem_tag_format > FI_TAG_CCL && ep.mem_tag_format < FI_TAG_MAX_FORMAT
        {
            // fi_endpoint(3) of 2.x: values below FI_TAG_MAX_FORMAT name a
            // format; FI_TAG_BITS, FI_TAG_MPI and FI_TAG_CCL are defined.
            return Err(format!("mem_tag_format {:#x}", ep.mem_tag_format));
        }
        // Before 2.0 a bit pattern; from 2.0 also FI_TAG_MPI or FI_TAG_CCL,
        // echoed as chosen: both constrain FI_TAG_BITS, which our matching
        // (tag and ignore bits) implements.
        if ep.mem_tag_format != 0 && o.ep.type_ == FI_EP_RDM {
            o.ep.mem_tag_format = ep.mem_tag_format;
        }
    }
    if let Some(d) = unsafe { h.domain_attr.as_ref() } {
        if let Some(n) = unsafe { d.name.as_ref() } {
            // SAFETY: non-NULL name is a C string.
            let n = unsafe { CStr::from_ptr(n) };
            if n != o.dom_name.as_c_str() {
                return Err("domain name".into());
            }
        }
        match d.threading {
            FI_THREAD_UNSPEC => {}
            FI_THREAD_SAFE | FI_THREAD_FID | FI_THREAD_DOMAIN | FI_THREAD_COMPLETION
            | FI_THREAD_ENDPOINT => {
                // We are thread safe, which satisfies every weaker model;
                // report the model asked for, as fi_domain(3) allows.
                o.dom.threading = d.threading;
            }
            t => return Err(format!("threading {t}")),
        }
        match d.control_progress {
            FI_PROGRESS_UNSPEC => {}
            FI_PROGRESS_AUTO | FI_PROGRESS_MANUAL => o.dom.control_progress = d.control_progress,
            p => return Err(format!("control_progress {p}")),
        }
        // FI_PROGRESS_AUTO: the domain then runs a progress thread
        // (progress_thread.rs), which also sets up connections; manual
        // progress stays the default. From 2.0 this field is `progress`,
        // for control and data alike (fi_domain(3)), and may be
        // FI_PROGRESS_CONTROL_UNIFIED: manual progress, with the
        // application serialising control calls, which our thread-safe
        // control calls allow; reported as asked, like threading.
        match d.data_progress {
            FI_PROGRESS_UNSPEC => {}
            FI_PROGRESS_AUTO | FI_PROGRESS_MANUAL => o.dom.data_progress = d.data_progress,
            FI_PROGRESS_CONTROL_UNIFIED if version >= V2 => o.dom.data_progress = d.data_progress,
            p => return Err(format!("data_progress {p}")),
        }
        match d.resource_mgmt {
            FI_RM_UNSPEC => {}
            FI_RM_ENABLED | FI_RM_DISABLED => o.dom.resource_mgmt = d.resource_mgmt,
            r => return Err(format!("resource_mgmt {r}")),
        }
        match d.av_type {
            FI_AV_UNSPEC => {}
            FI_AV_MAP | FI_AV_TABLE => o.dom.av_type = d.av_type,
            a => return Err(format!("av_type {a}")),
        }
        // The two modes of libfabric before 1.5 keep their meaning up to
        // 1.x; from 2.0 they are deprecated mr_mode bits (fi_domain(3)),
        // which we need not, and do not, honour.
        if version < V2 && (d.mr_mode == FI_MR_BASIC || d.mr_mode == FI_MR_SCALABLE) {
            o.dom.mr_mode = d.mr_mode;
        }
        // Since 1.5 mr_mode lists what the application supports; we require
        // no bit, so every value is acceptable. If it supports provider
        // keys we pick them (fi_mr(3)): applications that do often request
        // one key for every registration (fabtests' FT_MR_KEY). Addresses
        // are 0-based offsets, never virtual addresses (FI_MR_VIRT_ADDR
        // only through FI_MR_BASIC): peers need not exchange them, and
        // fabtests' fi_multi_mr, which writes to offset 0, works.
        else if version >= fi_version(1, 5) {
            o.dom.mr_mode = d.mr_mode & FI_MR_PROV_KEY;
        }
        if d.cq_data_size > o.dom.cq_data_size {
            return Err("cq_data_size".into());
        }
        if d.mr_key_size > o.dom.mr_key_size {
            return Err("mr_key_size".into());
        }
        if d.max_ep_tx_ctx > 1
            || d.max_ep_rx_ctx > 1
            || d.max_ep_stx_ctx > 0
            || d.max_ep_srx_ctx > 0
        {
            return Err("shared/scalable contexts".into());
        }
        if d.mr_iov_limit > o.dom.mr_iov_limit {
            return Err("mr_iov_limit".into());
        }
        if d.caps & !DOMAIN_CAPS != 0 {
            return Err(format!("domain caps {:#x}", d.caps & !DOMAIN_CAPS));
        }
        if d.auth_key_size != 0 || !d.auth_key.is_null() {
            o.dom_key = auth_key(o, d.auth_key, d.auth_key_size)?;
        }
        if d.max_err_data > o.dom.max_err_data {
            return Err("max_err_data".into());
        }
        if version >= AUTH_KEY_ATTRS {
            // SAFETY: hints asking for `version` are written against that
            // version's headers (fi_getinfo(3) "version"), or allocated by
            // the core (fi_allocinfo, or its conversion of older ABIs),
            // which accepts only versions up to its own: either way the
            // struct has the tail of ABI 1.7, and from 2.0 that of ABI 1.8
            // (fi_domain_attr_2).
            let d2 = unsafe { &*std::ptr::from_ref(d).cast::<fi_domain_attr_2>() };
            if d2.max_ep_auth_key > o.max_ep_auth_key {
                return Err(format!("max_ep_auth_key {}", d2.max_ep_auth_key));
            }
            // fi_av(3) peer groups: none (max_group_id 0).
            if version >= V2 && d2.max_group_id != 0 {
                return Err(format!("max_group_id {}", d2.max_group_id));
            }
        }
    }
    if let Some(f) = unsafe { h.fabric_attr.as_ref() } {
        if let Some(n) = unsafe { f.name.as_ref() } {
            // SAFETY: non-NULL name is a C string.
            if unsafe { CStr::from_ptr(n) } != o.fab_name.as_c_str() {
                return Err("fabric name".into());
            }
        }
        if let Some(n) = unsafe { f.prov_name.as_ref() } {
            // SAFETY: non-NULL name is a C string.
            let name = unsafe { CStr::from_ptr(n) };
            if !names_us(name.to_bytes()) {
                return Err(format!("provider name {name:?}"));
            }
        }
    }
    Ok(())
}

/// Whether a hints `prov_name` asks for us (utility providers' layered
/// names such as "xdp;^ofi_rxd" are refused earlier: `OFI_CORE_PROV_ONLY`).
fn names_us(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b"xdp")
}

/// An `auth_key` in the hints: the job key of packet authentication
/// (RDM only: a DGRAM payload is the application's own bytes on the wire).
fn auth_key(o: &Owned, key: *const u8, size: usize) -> std::result::Result<Vec<u8>, String> {
    if o.ep.type_ != FI_EP_RDM {
        return Err("auth_key: only FI_EP_RDM authenticates its datagrams".into());
    }
    use crate::auth_key::{MAX_KEY_LEN, MIN_KEY_LEN};
    if size == FI_AV_AUTH_KEY {
        // fi_domain(3), 1.20 and later: keys per AV entry
        // (fi_av_insert_auth_key), which we do not offer.
        return Err("FI_AV_AUTH_KEY: keys per address vector entry are not offered".into());
    }
    if key.is_null() || !(MIN_KEY_LEN..=MAX_KEY_LEN).contains(&size) {
        return Err(format!(
            "auth_key of {size} bytes: a job key has {MIN_KEY_LEN} to {MAX_KEY_LEN}"
        ));
    }
    // SAFETY: fi_getinfo(3): auth_key points to auth_key_size bytes.
    Ok(unsafe { std::slice::from_raw_parts(key, size) }.to_vec())
}

#[cfg(test)]
mod tests {
    #[test]
    fn provider_name_hints() {
        assert!(super::names_us(b"xdp"));
        assert!(super::names_us(b"XDP"));
        assert!(!super::names_us(b"xdp;^ofi_rxd"));
        assert!(!super::names_us(b"xdp;ofi_rxd"));
        assert!(!super::names_us(b"tcp"));
        assert!(!super::names_us(b""));
    }
}
