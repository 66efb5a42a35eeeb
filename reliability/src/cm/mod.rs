//! Connection management for connected endpoints (FI_EP_MSG; PROTOCOL.md
//! §9): how a connecting endpoint, a listening one and an accepting one
//! agree on a connection, whose data then travels in an ordinary engine
//! session between the connecting and the accepting endpoint.
//!
//! - [`wire`]: the CM datagrams (packet types 24–29);
//! - [`Connection`]: one endpoint's connection — connect or accept,
//!   connected, disconnected — with its retransmissions;
//! - [`Listener`]: a listening endpoint's requests and refusals.
//!
//! Sans-IO like the engine: time comes in, datagrams and events go out.

mod connection;
mod listener;
pub mod wire;

pub use connection::{CmError, CmEvent, CmTiming, Connection, Failure, Peer, Phase};
pub use listener::{Listener, Request};
pub use wire::{CM_DATA_SIZE, CmMsg, CmType, MAX_CM_LEN, decode, is_cm};

#[cfg(test)]
mod tests;
