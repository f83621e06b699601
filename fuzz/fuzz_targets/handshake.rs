//! Connection-phase parsers must return errors, never panic, on any input.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sluice_wire::handshake::{ChangeUser, HandshakeResponse, InitialHandshake};
use sluice_wire::response::{terminator_status, ErrPacket, OkPacket};
use sluice_wire::CapabilityFlags;

fuzz_target!(|data: &[u8]| {
    let _ = InitialHandshake::parse(data);
    if let Ok(r) = HandshakeResponse::parse(data) {
        // What parses must serialize and parse back to the same thing.
        assert_eq!(HandshakeResponse::parse(&r.payload()).as_ref(), Ok(&r));
    }
    let caps = CapabilityFlags(u32::from_le_bytes([
        data.first().copied().unwrap_or(0),
        data.get(1).copied().unwrap_or(0),
        data.get(2).copied().unwrap_or(0),
        data.get(3).copied().unwrap_or(0),
    ]));
    let _ = ChangeUser::parse(data, caps);
    let _ = OkPacket::parse(data);
    let _ = ErrPacket::parse(data);
    let _ = terminator_status(data);
    let _ = sluice_wire::auth::parse_auth_switch(data);
});
