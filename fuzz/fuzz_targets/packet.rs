//! Reassembly must respect its size limit and round-trip what it accepts.
#![no_main]
use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use sluice_wire::packet::{take_packet, write_packet};

fuzz_target!(|data: &[u8]| {
    let mut buf = BytesMut::from(data);
    while let Ok(Some(p)) = take_packet(&mut buf, 1 << 20) {
        assert!(p.payload.len() <= 1 << 20);
        let mut out = BytesMut::new();
        write_packet(&mut out, p.seq, &p.payload);
        let again = take_packet(&mut out, 1 << 20).unwrap().unwrap();
        assert_eq!(again.payload, p.payload);
    }
});
