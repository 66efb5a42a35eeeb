//! The steps behind `cargo xtask …` (see `main.rs`), as a library so that the tests of
//! packaging and installation call the same code the commands run.

pub mod deps;
pub mod fabtests;
pub mod figures;
pub mod install;
pub mod instructions;
pub mod libfabric;
pub mod man;
pub mod package;
pub mod progress;
pub mod steps;
