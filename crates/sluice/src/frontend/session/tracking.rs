//! The client's own session tracking under multiplexing. Sluice's connections report
//! every change (`session_track_system_variables='*'`, schema, state change); a client
//! gets in its OK packets only what its own `session_track_*` settings (the server's
//! defaults, or what it set) would have given it, and reads its own values back.
//!
//! A statement that names a `session_track_*` variable runs with the connection set to
//! the client's settings, so that what it reads, and the OK the server writes for it,
//! are the client's; afterwards the client's new settings are read and the connection
//! tracks everything again. Any other OK is filtered (`wire::session_track::filter_ok`).

use super::mux::Mux;
use crate::backend::BackendConn;
use crate::error::{BackendError, Failed, RefusedAsNone, SessionError};
use bytes::BytesMut;
use sluice_wire::packet::{write_packet, HEADER_LEN};
use sluice_wire::session_track::{filter_ok, FullOk};
use sluice_wire::ProtocolError;

/// The OK packet (with its header) the client gets instead of the connection's, for a
/// client that negotiated session tracking. `None`: the packet goes through as it is
/// (no allocation on that path).
pub(super) fn for_client(
    mux: &Mux,
    seq: u8,
    payload: &[u8],
    ok: &FullOk<'_>,
) -> Result<Option<Vec<u8>>, ProtocolError> {
    let Some(settings) = mux.tracking.as_ref().filter(|_| !mux.own_tracking) else {
        return Ok(None);
    };
    if settings.passes(ok) {
        return Ok(None);
    }
    let filtered = filter_ok(payload, settings)?;
    let mut out = BytesMut::with_capacity(filtered.len() + HEADER_LEN);
    write_packet(&mut out, seq, &filtered);
    Ok(Some(out.to_vec()))
}

/// Before a statement: the session starts with the server's defaults, and a statement
/// that names a `session_track_*` variable gets the connection with the client's own
/// settings. The error is for the client (the connection is then dropped).
pub(super) async fn enter(
    backend: &mut BackendConn,
    mux: &mut Mux,
    names_tracking: bool,
) -> Result<(), Failed<BackendError>> {
    // Cleared here too: a statement whose connection was lost never reached `leave`.
    mux.own_tracking = false;
    if mux.tracking.is_none() {
        // Shared with the connection (and so with every session that starts on the
        // server's defaults) until the client sets its own.
        mux.tracking = backend.tracking_defaults.clone();
    }
    if !names_tracking {
        return Ok(());
    }
    let Some(t) = mux.tracking.as_ref() else {
        return Ok(());
    };
    let set = format!(
        "SET SESSION session_track_system_variables={}, session_track_schema={}, \
         session_track_state_change={}",
        quote(&t.system_variables),
        on_off(t.schema),
        on_off(t.state_change),
    );
    let answer = backend.simple_query(&set).await;
    mux.own_tracking = answer.is_ok();
    answer.map(drop)
}

/// After a statement that ran with the client's settings or changed them (a procedure
/// may): learns the client's settings and makes the connection track everything again.
/// Returns whether the session must keep the connection: a `session_track_transaction_info`
/// other than the server's default stays on it, as the client's.
pub(super) async fn leave(backend: &mut BackendConn, mux: &mut Mux) -> Result<bool, SessionError> {
    mux.own_tracking = false;
    let settings = backend.tracking_settings().await.refused_as_none()?;
    // Not readable: the connection stays the session's, as the server left it.
    let Some(settings) = settings.flatten() else {
        return Ok(true);
    };
    let keep = backend.tracking_defaults.as_ref().is_none_or(|d| {
        !d.transaction_info
            .eq_ignore_ascii_case(&settings.transaction_info)
    });
    mux.tracking = Some(std::sync::Arc::new(settings));
    backend.track_everything().await?;
    Ok(keep)
}

fn on_off(on: bool) -> &'static str {
    if on {
        "ON"
    } else {
        "OFF"
    }
}

/// A string literal whatever the session's `sql_mode` (no backslash escapes relied on).
fn quote(value: &[u8]) -> String {
    let text = String::from_utf8_lossy(value);
    if text.contains(['\'', '\\']) {
        let hex: String = value.iter().map(|b| format!("{b:02x}")).collect();
        return format!("X'{hex}'");
    }
    format!("'{text}'")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_are_safe() {
        assert_eq!(quote(b"autocommit,time_zone"), "'autocommit,time_zone'");
        assert_eq!(quote(b"a'b"), "X'612762'");
    }
}
