//! Hand-written mirrors of the parts of the libfabric C ABI the provider
//! implements: structs ([`types`]), constants ([`consts`]) and the core
//! functions a provider calls ([`ffi`]). The mirrors are the 1.17 ABI, which
//! libfabric 2.x keeps as a prefix of the structs it extended; what 2.x added
//! that we read or write is mirrored beside them (`fi_domain_attr_2`, the 2.x
//! constants). [`layout`] lists every mirrored size and offset so
//! `tests/layout.rs` can compare them with the 1.17 and the 2.x C headers.

#![allow(clippy::type_complexity)]

pub mod consts;
pub mod ffi;
#[doc(hidden)]
pub mod layout;
pub mod types;

pub use consts::*;
pub use types::*;
