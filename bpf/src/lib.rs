//! See the crate README / docs/ARCHITECTURE.md.
