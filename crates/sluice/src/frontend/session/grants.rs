//! A session has the rights of its start, as a server session has those of its login:
//! it runs only on connections that logged in with them (`backend/grants.rs`). A
//! connection pooled before a `GRANT` or `REVOKE` is closed when a session that started
//! after it is offered it, with every idle connection of the account as old.

use super::Session;
use crate::backend::{Grants, PooledConn};
use crate::error::BackendError;
use std::time::Instant;

impl Session {
    /// Whether the multiplexed session's connection just leased gives it its rights;
    /// when not, the connection is gone and the caller leases another.
    pub(super) async fn mux_grants_fit(&mut self) -> Result<bool, BackendError> {
        let Some((mux, Some(backend))) = self.backing.mux_and_conn() else {
            return Ok(true);
        };
        if grants_serve(backend, mux) {
            return Ok(true);
        }
        let user = mux.key.creds.user.clone();
        if backend
            .fits_grants(&user, mux.started, &mut mux.grants)
            .await?
        {
            return Ok(true);
        }
        let want = mux.grants;
        let stale = self.backing.take_conn().expect("checked");
        self.publish();
        give_up(stale, &user, want);
        Ok(false)
    }
}

/// Whether the connection's grants are known to serve the session's: the usual case,
/// a compare, which every multiplexed statement makes before anything is sent.
pub(super) fn grants_serve(backend: &crate::backend::BackendConn, mux: &super::mux::Mux) -> bool {
    match (backend.grants, mux.grants) {
        (None, _) => true,
        (Some(have), Some(want)) => have.serves(&want),
        (Some(_), None) => false,
    }
}

/// `conn` when a dedicated session that starts at `started` may have it; when not,
/// `None`: it is closed with every idle connection of the account as old.
pub(super) async fn dedicated_fit(
    mut conn: PooledConn,
    user: &str,
    started: Instant,
) -> Result<Option<PooledConn>, BackendError> {
    let mut want = None;
    if conn.fits_grants(user, started, &mut want).await? {
        return Ok(Some(conn));
    }
    give_up(conn, user, want);
    Ok(None)
}

/// Closes `conn`, which logged in with other rights than `want`, and the idle
/// connections of `user` that can't serve `want` either.
fn give_up(mut conn: PooledConn, user: &str, want: Option<Grants>) {
    tracing::debug!(server = %conn.server.name, user, "closing connections that logged in before the account's grants changed");
    conn.mark_broken();
    if let Some(want) = want {
        conn.pool()
            .close_idle_of(user, |c| c.grants.is_some_and(|g| !g.serves(&want)));
    }
}
