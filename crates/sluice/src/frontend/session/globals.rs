//! A multiplexed session's variables it never set follow the server's globals of its
//! login, as a server session's do: checked once per session on its first connection,
//! then carried to connections that started with other globals.

use super::Session;
use crate::backend::keep_inherited;
use crate::error::BackendError;
use std::sync::Arc;

impl Session {
    /// Before a statement runs on the session's connection: the session's inherited
    /// values and the connection's agree. The session's first connection tells it the
    /// globals of now (a connection opened for it already has them; another one is
    /// asked, and renewed when they moved since it started). Later, a connection that
    /// predates globals seen since is renewed, and a session that started with other
    /// values than the connection's keeps its own, as if it had set them.
    pub(super) async fn align_globals(&mut self) -> Result<(), BackendError> {
        let Some((mux, Some(backend))) = self.backing.mux_and_conn() else {
            return Ok(());
        };
        if globals_match(backend, mux) {
            return Ok(());
        }
        let renew = match &mux.globals {
            Some(_) => backend.globals_stale(),
            None => !backend.fresh && backend.globals_moved().await?,
        };
        if renew {
            tracing::debug!(server = %backend.server.name, "renewing a connection older than the server's globals");
            backend.renew().await?;
        }
        let Some(have) = backend.globals.clone() else {
            return Ok(());
        };
        if let Some(want) = &mux.globals {
            if !Arc::ptr_eq(want, &have) {
                keep_inherited(&mut mux.vars, want, &have);
            }
        }
        mux.globals = Some(have);
        Ok(())
    }
}

/// Whether the connection was opened under the server's global variables the session
/// already took its own from: [`Session::align_globals`] has nothing to do then, and a
/// multiplexed statement checks it before entering that step.
pub(super) fn globals_match(backend: &crate::backend::BackendConn, mux: &super::mux::Mux) -> bool {
    match (&backend.globals, &mux.globals) {
        (None, _) => true,
        (Some(have), Some(want)) => Arc::ptr_eq(have, want),
        (Some(_), None) => false,
    }
}
