//! The MySQL/MariaDB client/server protocol as Sluice needs it: bytes in, bytes out.
//!
//! No sockets, no runtime, no configuration. The proxy frames packets with [`packet`],
//! negotiates sessions with [`handshake`] and [`auth`], reads the few fields its decisions
//! need with [`response`] and [`statement`] (prepare-OK, execute), and finds where a command's response ends with [`tracker`]
//! without ever decoding a row.

pub mod auth;
pub mod command;
pub mod digest;
pub mod flags;
pub mod handshake;
pub mod lenenc;
pub mod packet;
pub mod response;
pub mod resultset;
pub mod session_track;
pub mod statement;
pub mod tracker;

pub use flags::{CapabilityFlags, StatusFlags};

/// Why a byte sequence is not a valid protocol message.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProtocolError {
    #[error("packet truncated while reading {0}")]
    Truncated(&'static str),
    #[error("malformed {0}")]
    Malformed(&'static str),
    #[error("packet of {len} bytes exceeds the limit of {limit} bytes")]
    TooLarge { len: usize, limit: usize },
    #[error("unexpected sequence id {got}, expected {expected}")]
    Sequence { got: u8, expected: u8 },
}
