//! `#[repr(C)]` mirrors of the libfabric 1.17 structs the provider implements
//! or reads, one file per header. Field order and types follow
//! `/usr/include/rdma/*.h` exactly; `tests/layout.rs` compiles a C program
//! against those headers and compares every size and offset listed in
//! [`super::layout::rust_layout`].
//!
//! Names keep the C spelling on purpose so a reader can grep the headers.

#![allow(non_camel_case_types)]

mod atomic;
mod cm;
mod collective;
mod domain;
mod endpoint;
mod eq;
mod fabric;
mod prov;
mod rma;
mod tagged;

pub use atomic::*;
pub use cm::*;
pub use collective::*;
pub use domain::*;
pub use endpoint::*;
pub use eq::*;
pub use fabric::*;
pub use prov::*;
pub use rma::*;
pub use tagged::*;
