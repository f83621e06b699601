//! The response scanner, fed arbitrary bytes in arbitrary pieces, must never panic,
//! never claim more bytes than it was given, and make progress or ask for more.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sluice_wire::tracker::{RequestSpan, ResponseKind, ResponseTracker, Scanner};
use sluice_wire::CapabilityFlags;

fuzz_target!(|data: &[u8]| {
    let Some((&control, bytes)) = data.split_first() else { return };
    let kind = match control % 7 {
        0 => ResponseKind::Query,
        1 => ResponseKind::Execute { cursor: false },
        2 => ResponseKind::Execute { cursor: true },
        3 => ResponseKind::Prepare,
        4 => ResponseKind::Fetch,
        5 => ResponseKind::FieldList,
        _ => ResponseKind::Single,
    };
    let caps = if control & 0x80 != 0 { CapabilityFlags::DEPRECATE_EOF } else { 0 };
    let piece = (control as usize >> 3 & 0xf) + 1;
    let mut scanner = Scanner::new(ResponseTracker::new(kind, CapabilityFlags(caps)), 1);
    let mut done = 0;
    let mut fed = 0;
    while fed < bytes.len() {
        fed = (fed + piece).min(bytes.len());
        loop {
            match scanner.scan(&bytes[done..fed]) {
                Ok((n, event)) => {
                    assert!(done + n <= fed);
                    done += n;
                    if event.is_none() || done == fed {
                        break;
                    }
                }
                Err(_) => return,
            }
        }
    }
    let mut span = RequestSpan::new(0);
    if let Ok((n, _)) = span.scan(bytes) {
        assert!(n <= bytes.len());
    }
});
