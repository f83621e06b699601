//! What a server answers that Sluice reads value by value rather than passing on as
//! bytes: column definitions, text rows, OK packets with session state (and their
//! rewriting for clients that track less), whole responses digested for transaction
//! replay, and the values it reads out of rows (GTID positions, `XA RECOVER` rows,
//! session-tracking settings). The first byte picks the flags; the rest is the payload.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sluice::router::gtid::GtidPos;
use sluice::shard::xa;
use sluice_wire::digest::response_digest;
use sluice_wire::response::{set_ok_status, terminator_warnings, OkPacket};
use sluice_wire::resultset::{text_row, text_values, ColumnDef};
use sluice_wire::session_track::{filter_ok, parse_full_ok, translate_ok, Tracking};
use sluice_wire::tracker::ResponseKind;
use sluice_wire::{CapabilityFlags, StatusFlags};

fuzz_target!(|data: &[u8]| {
    let Some((&control, payload)) = data.split_first() else {
        return;
    };
    let flag = |bit: u8| control & bit != 0;

    let _ = ColumnDef::parse(payload, flag(1));
    let _ = terminator_warnings(payload);

    if let Ok(values) = text_values(payload) {
        // A row written back from its values reads as the same values.
        let row = text_row(&values);
        assert_eq!(text_values(&row).as_ref(), Ok(&values));
        // Rows Sluice reads (GTID positions, XA RECOVER, tracking settings) as the
        // code that reads them gets them.
        let owned: Vec<Option<Vec<u8>>> = values.iter().map(|v| v.map(<[u8]>::to_vec)).collect();
        if let Some((instance, _)) = xa::parse_any(&owned) {
            assert!(!instance.contains(':'));
        }
        if let Some(t) = Tracking::from_values(&owned) {
            let _ = t.tracks_variable(b"sql_mode");
        }
    }
    if let Ok(text) = std::str::from_utf8(payload) {
        // What a position prints is what it parsed from.
        if let Some(pos) = GtidPos::parse(text) {
            assert_eq!(GtidPos::parse(&pos.to_string()), Some(pos.clone()));
            assert!(pos.includes(&pos));
        }
    }

    let tracked = parse_full_ok(payload, flag(2));
    if let Ok(ok) = &tracked {
        if flag(2) && !ok.changes.is_empty() {
            assert!(ok.status.contains(StatusFlags::SESSION_STATE_CHANGED));
        }
    }
    let lenenc_info = flag(4);
    if let Ok(out) = translate_ok(payload, lenenc_info) {
        // "no session-state block and the flag cleared", everything else kept.
        let ok = parse_full_ok(payload, true).expect("translated, so it parsed");
        let back = parse_full_ok(&out, lenenc_info).expect("a translated OK parses");
        assert!(!back.status.contains(StatusFlags::SESSION_STATE_CHANGED));
        assert!(back.changes.is_empty());
        assert_eq!(
            (
                back.affected_rows,
                back.last_insert_id,
                back.warnings,
                back.info
            ),
            (ok.affected_rows, ok.last_insert_id, ok.warnings, ok.info)
        );
    }
    let tracking = Tracking {
        system_variables: match control >> 3 & 3 {
            0 => b"*".as_slice(),
            1 => b"autocommit, sql_mode".as_slice(),
            _ => b"".as_slice(),
        }
        .into(),
        schema: flag(0x20),
        state_change: flag(0x40),
        transaction_info: b"OFF".as_slice().into(),
    };
    if let Ok(out) = filter_ok(payload, &tracking) {
        // "The OK packet payload a server with the client's tracking settings writes":
        // it passes as it is, with the same counts and info.
        let ok = parse_full_ok(payload, true).expect("filtered, so it parsed");
        let back = parse_full_ok(&out, true).expect("a filtered OK parses");
        assert!(tracking.passes(&back), "{back:?}");
        assert_eq!(
            (
                back.affected_rows,
                back.last_insert_id,
                back.warnings,
                back.info
            ),
            (ok.affected_rows, ok.last_insert_id, ok.warnings, ok.info)
        );
    }
    let mut rewritten = payload.to_vec();
    let status = StatusFlags(u16::from(control) << 4);
    if set_ok_status(&mut rewritten, status).is_ok() {
        assert_eq!(rewritten.len(), payload.len());
        let back = OkPacket::parse(&rewritten).expect("an OK whose status was set");
        assert_eq!(back.status, status);
    }

    // A whole response (packets with headers) as the client got it.
    let kind = match control >> 5 {
        0 => ResponseKind::Query,
        1 => ResponseKind::Execute { cursor: false },
        2 => ResponseKind::Execute { cursor: true },
        3 => ResponseKind::Prepare,
        4 => ResponseKind::Fetch,
        5 => ResponseKind::FieldList,
        6 => ResponseKind::Single,
        _ => ResponseKind::None,
    };
    let caps = match flag(1) {
        true => CapabilityFlags::DEPRECATE_EOF,
        false => 0,
    };
    let _ = response_digest(payload, kind, CapabilityFlags(caps));
});
