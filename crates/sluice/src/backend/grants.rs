//! The privileges a pooled connection logged in with. The server gives a connection its
//! account's global privileges (and its default role's) at login and keeps them for the
//! connection's life, so a connection pooled before a `GRANT` or `REVOKE` would give a
//! session that starts after it other rights than a new direct connection gets. Each
//! pooled connection notes its account's grants right after its login; a session takes
//! those of its own start and runs only on connections that logged in with them.

use super::conn::BackendConn;
use super::pool::PooledConn;
use crate::error::{BackendError, Failed};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::time::Instant;

/// An account's grants as one read saw them: a digest of `SHOW GRANTS`, and when the
/// read began (what orders two reads of one account).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grants {
    digest: u64,
    read_at: Instant,
}

impl Grants {
    /// Whether a connection that logged in with `self` gives a session the rights of
    /// `want`: the same grants, or grants read since (a session that began before a
    /// change may go on with the new rights; see OPERATIONS).
    pub fn serves(&self, want: &Grants) -> bool {
        self.digest == want.digest || self.read_at >= want.read_at
    }
}

/// The latest read of each account's grants on one server, shared by its sessions: a
/// session that starts after the read began needs no read of its own.
#[derive(Default)]
pub struct GrantsWatch {
    latest: Mutex<HashMap<String, Grants>>,
    /// One read of an account's grants at a time: sessions that start while one runs
    /// wait for it and share the next one rather than each reading.
    turns: Mutex<HashMap<String, std::sync::Arc<tokio::sync::Mutex<()>>>>,
}

impl GrantsWatch {
    /// `user`'s grants as a read begun at or after `since` saw them.
    pub fn since(&self, user: &str, since: Instant) -> Option<Grants> {
        self.latest
            .lock()
            .get(user)
            .filter(|g| g.read_at >= since)
            .copied()
    }

    /// The turn to read `user`'s grants, waited for.
    async fn turn(&self, user: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let turn = self
            .turns
            .lock()
            .entry(user.to_owned())
            .or_default()
            .clone();
        turn.lock_owned().await
    }

    fn note(&self, user: &str, grants: Grants) {
        let mut latest = self.latest.lock();
        match latest.get_mut(user) {
            Some(g) if g.read_at >= grants.read_at => {}
            Some(g) => *g = grants,
            None => {
                latest.insert(user.to_owned(), grants);
            }
        }
    }
}

/// The server's error for `SHOW GRANTS` of an account that no longer exists.
const ER_NONEXISTING_GRANT: u16 = 1141;

impl BackendConn {
    /// Reads the grants of the account this connection logged in as (`user`), notes
    /// them for its server, and returns them; `None` when the server can't tell.
    pub async fn read_grants(&mut self, user: &str) -> Result<Option<Grants>, BackendError> {
        let read_at = Instant::now();
        let mut h = std::collections::hash_map::DefaultHasher::new();
        match self.query_rows("SHOW GRANTS").await {
            Ok(rows) => rows.hash(&mut h),
            // Dropped: grants no session that starts now has.
            Err(Failed::Answered(e)) if e.code == ER_NONEXISTING_GRANT => e.code.hash(&mut h),
            Err(Failed::Broken(e)) => return Err(e),
            Err(Failed::Answered(e)) => {
                tracing::debug!(server = %self.server.name, err = %e, "grants unreadable: connections are not told apart by them");
                return Ok(None);
            }
        }
        let grants = Grants {
            digest: h.finish(),
            read_at,
        };
        self.server.grants.note(user, grants);
        Ok(Some(grants))
    }
}

impl PooledConn {
    /// Whether this connection gives a session that started at `started`, with the
    /// grants `want` (`None` for its first statement), its rights; `want` is set when
    /// unset. The grants of the session's start are those of a read begun after it
    /// (one of this account's on the server, or this connection's own).
    pub async fn fits_grants(
        &mut self,
        user: &str,
        started: Instant,
        want: &mut Option<Grants>,
    ) -> Result<bool, BackendError> {
        let Some(have) = self.grants else {
            return Ok(true);
        };
        if want.is_none() {
            *want = match self.server.grants.since(user, started) {
                Some(now) => Some(now),
                None if have.read_at >= started => Some(have),
                None => {
                    let server = self.server.clone();
                    let _turn = server.grants.turn(user).await;
                    // A read that began while this one waited answers for it too.
                    match server.grants.since(user, started) {
                        Some(now) => Some(now),
                        None => self.read_grants(user).await?,
                    }
                }
            };
        }
        Ok(want.is_none_or(|w| have.serves(&w)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn reads_are_ordered_by_when_they_began() {
        let t0 = Instant::now();
        let at = |ms: u64, digest: u64| Grants {
            digest,
            read_at: t0 + Duration::from_millis(ms),
        };
        let watch = GrantsWatch::default();
        watch.note("u", at(10, 1));
        // A read that began earlier but ended later does not replace the newer one.
        watch.note("u", at(5, 2));
        assert_eq!(watch.since("u", t0), Some(at(10, 1)));
        assert_eq!(watch.since("u", t0 + Duration::from_millis(11)), None);
        assert_eq!(watch.since("other", t0), None);
        watch.note("u", at(20, 3));
        assert_eq!(
            watch.since("u", t0 + Duration::from_millis(11)),
            Some(at(20, 3))
        );

        // A connection serves a session with the same grants, or grants read since.
        assert!(at(1, 7).serves(&at(30, 7)));
        assert!(!at(1, 7).serves(&at(30, 8)), "logged in before the change");
        assert!(
            at(40, 8).serves(&at(30, 7)),
            "a session that began before it"
        );
    }
}
