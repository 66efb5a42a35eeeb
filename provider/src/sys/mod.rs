//! Hand-written mirrors of the parts of the libfabric 1.17 C ABI the provider
//! implements: structs ([`types`]), constants ([`consts`]) and the core
//! functions a provider calls ([`ffi`]). [`layout`] lists every mirrored size
//! and offset so `tests/layout.rs` can compare them with the C headers.

#![allow(clippy::type_complexity)]

pub mod consts;
pub mod ffi;
#[doc(hidden)]
pub mod layout;
pub mod types;

pub use consts::*;
pub use types::*;
