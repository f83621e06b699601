//! The session's side of routing (multiplexed sessions): where the statement at the
//! front of the client buffer goes — rules and hints first, then the writer for
//! anything but a plain read outside a transaction — the GTID a read must see, the
//! wait for it on a replica, and a rule's statement timeout.

use super::Session;
use crate::classify::effects::Effects;
use crate::classify::facts::TextFacts;
use crate::error::Failed;
use crate::router::gtid::GtidPos;
use crate::router::rules::{is_plain_read, Route, Rules, Statement};
use crate::router::{Member, Router, Target};
use crate::stats::Stats;
use sluice_wire::command::Command;
use sluice_wire::packet::HEADER_LEN;
use sluice_wire::response::ErrPacket;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Where a statement goes and what else a rule asked for.
#[derive(Debug)]
pub(super) struct Routed {
    pub target: Target,
    pub timeout: Option<Duration>,
}

impl Routed {
    const WRITER: Routed = Routed {
        target: Target::Writer,
        timeout: None,
    };
}

impl Session {
    /// Routes the command at the front of the client buffer (`visible` bytes of it are
    /// there). `execute`: the client's id of the statement an execute runs. A rule that
    /// refuses the statement gives its error.
    pub(super) fn route(
        &mut self,
        router: &Router,
        command: Command,
        fx: &Effects,
        visible: usize,
        execute: Option<u32>,
    ) -> Result<Routed, ErrPacket> {
        let rules = router.rules.load();
        if !routes(router, &rules) {
            return Ok(Routed::WRITER);
        }
        let mux = self.backing.muxed();
        let payload = &self.client.rbuf[HEADER_LEN..visible];
        let prepared = execute.and_then(|id| mux.stmt_route(id));
        let s = ToRoute {
            command,
            text: match command {
                Command::Query | Command::StmtPrepare => Some(&payload[1..]),
                Command::StmtExecute => prepared.map(|(t, _)| t),
                _ => None,
            },
            fx,
            prepared_read: prepared.is_some_and(|(_, read)| read),
            // A cursor pins the session: keep pins on the writer.
            cursor: command == Command::StmtExecute
                && payload.get(5).is_some_and(|f| f & 0x07 != 0),
            in_transaction: !mux.autocommits(),
            user: &self.user.name,
            schema: mux.schema.as_deref(),
            client: self.client.peer.ip(),
            home: mux.home.as_ref(),
            last_gtid: mux.last_gtid.as_ref(),
            cached: self.cache.is_some(),
        };
        decide_route(router, &rules, &s, &mut self.text)
    }

    /// Before a read on a replica that must see `need`: waits there up to
    /// `routing.consistency_wait`. False: the replica did not get there in time.
    pub(super) async fn wait_for_gtid(
        &mut self,
        router: &Router,
        member: &Member,
        need: &GtidPos,
    ) -> bool {
        let at = super::traced::mark(&self.stmt);
        let Some(backend) = self.backing.conn_mut() else {
            return false;
        };
        Stats::incr(&router.stats.gtid_waits);
        let secs = router.routing.consistency_wait.as_secs_f64();
        let sql = format!("SELECT MASTER_GTID_WAIT('{need}', {secs:.3})");
        let caught_up = match backend.query_scalar(&sql).await {
            Ok(Some(v)) if v == b"0" => {
                member.note_applied(need);
                true
            }
            Ok(_) | Err(Failed::Answered(_)) => {
                Stats::incr(&router.stats.gtid_wait_timeouts);
                false
            }
            Err(Failed::Broken(e)) => {
                tracing::debug!(error = %e, "GTID wait failed");
                backend.mark_broken();
                false
            }
        };
        if at.is_some() {
            use crate::trace::Value;
            let attributes = vec![
                (
                    "server.address",
                    Value::Str(backend.server.endpoint.to_string()),
                ),
                ("sluice.gtid", Value::Str(need.to_string())),
                ("sluice.gtid.caught_up", Value::Bool(caught_up)),
            ];
            self.stmt.stage("gtid wait", at, attributes);
        }
        caught_up
    }

    /// The statement's OK said which GTID its transaction got: reads after it must
    /// see it.
    pub(super) fn note_gtid(&mut self, router: &Router, gtid: &[u8]) {
        if let Some(pos) = std::str::from_utf8(gtid).ok().and_then(GtidPos::parse) {
            self.note_gtid_pos(router, &pos);
        }
    }

    /// [`Self::note_gtid`], of a position already read.
    pub(super) fn note_gtid_pos(&mut self, router: &Router, pos: &GtidPos) {
        if pos.is_empty() {
            return;
        }
        router.note_write(pos);
        let mux = self.backing.muxed_mut();
        mux.last_gtid
            .get_or_insert_with(GtidPos::default)
            .merge(pos);
    }

    /// Whether the held connection is on the writer (on any synced node when writes
    /// spread over a Galera cluster's nodes).
    pub(super) fn on_writer(&self, router: &Router) -> bool {
        if router.multi_writer() {
            return self.member.as_ref().is_some_and(|m| m.writable());
        }
        match (&self.member, router.writer()) {
            (Some(m), Some(w)) => Arc::ptr_eq(m, &w),
            _ => router.members.len() == 1,
        }
    }
}

/// Whether anything but the writer can be chosen: reads split, or rules to match.
/// Without, routing reads nothing of the statement.
fn routes(router: &Router, rules: &Rules) -> bool {
    router.splits() || !rules.is_empty()
}

/// What routing reads of a statement and its session: gathered by the session from
/// its state, or built by a test.
pub(super) struct ToRoute<'a> {
    pub command: Command,
    /// A query's or prepare's text; an execute's prepared text.
    pub text: Option<&'a [u8]>,
    pub fx: &'a Effects,
    /// An execute's statement is a plain read (decided when it was prepared).
    pub prepared_read: bool,
    /// An execute that opens a cursor.
    pub cursor: bool,
    pub in_transaction: bool,
    pub user: &'a str,
    pub schema: Option<&'a [u8]>,
    pub client: std::net::IpAddr,
    /// The node a session spreading writes over Galera last wrote on.
    pub home: Option<&'a Arc<Member>>,
    /// The session's last write, which its reads must see.
    pub last_gtid: Option<&'a GtidPos>,
    /// The session fills a cache shared with every session.
    pub cached: bool,
}

/// Where a statement goes: rules and hints first, then the writer for anything but a
/// plain read outside a transaction. `text`: what the statement's text says, read here
/// only if nothing decided before a plain-read test (kept for the cache after).
/// `rules`: the router's, as loaded once for the statement.
pub(super) fn decide_route(
    router: &Router,
    rules: &Rules,
    s: &ToRoute<'_>,
    text: &mut TextFacts,
) -> Result<Routed, ErrPacket> {
    if !routes(router, rules) {
        return Ok(Routed::WRITER);
    }
    let decision = match s.text {
        // With no rules, deciding is looking for a hint: one search for "/*".
        Some(t) => rules.decide(&Statement {
            text: t,
            user: s.user,
            schema: s.schema,
            client: s.client,
        }),
        _ => Default::default(),
    };
    if let Some(err) = decision.error {
        Stats::incr(&router.stats.blocked);
        return Err(err);
    }
    let route = match decision.route {
        // A transaction's statements stay together, whatever a rule says.
        _ if s.in_transaction => Route::Writer,
        Some(r) => r,
        None => {
            let read = match s.command {
                Command::Query | Command::StmtPrepare => s
                    .text
                    .is_some_and(|t| is_plain_read(t, s.fx, text.analysis(t))),
                Command::StmtExecute => !s.cursor && s.prepared_read,
                _ => false,
            };
            match read {
                true => Route::Readers,
                false => Route::Writer,
            }
        }
    };
    let target = match route {
        Route::Writer => Target::Writer,
        Route::Group(g) => Target::Group(g),
        Route::Readers => {
            let consistency = decision.consistency.unwrap_or(router.routing.consistency);
            let home = s.home.filter(|_| {
                consistency != crate::router::config::Consistency::None && router.multi_writer()
            });
            match home {
                Some(home) => Target::Node(crate::router::NodeRef(home.clone())),
                None => {
                    let need = router.needed_gtid(consistency, s.last_gtid);
                    // What a read fills the cache with is served to every session: it
                    // must not bring back a row the binlog reader already saw change.
                    Target::Reader {
                        need: match s.cached {
                            true => router.fill_floor(need),
                            false => need,
                        },
                    }
                }
            }
        }
    };
    Ok(Routed {
        target,
        timeout: decision.timeout,
    })
}

/// What a client hears when the server of its open transaction is lost during
/// `statement`: for a statement that can't have committed anything, that the
/// transaction was rolled back and may be retried (SQLSTATE 40001, as for a deadlock);
/// `None` when the outcome is unknown (COMMIT, DDL, a procedure...).
pub(super) fn transaction_lost(statement: &[u8]) -> Option<ErrPacket> {
    let word = crate::classify::sql::first_word(statement);
    let safe = matches!(
        word.as_slice(),
        b"SELECT"
            | b"INSERT"
            | b"UPDATE"
            | b"DELETE"
            | b"REPLACE"
            | b"WITH"
            | b"VALUES"
            | b"TABLE"
            | b"SAVEPOINT"
            | b"DO"
            | b"SHOW"
    );
    safe.then(rolled_back)
}

/// What a client is told when its server was lost inside a transaction that can't have
/// committed: rolled back, may be retried (as after a deadlock).
pub(super) fn rolled_back() -> ErrPacket {
    ErrPacket::new(
        crate::error::code::ER_LOCK_DEADLOCK,
        "40001",
        "Sluice: the server was lost during the transaction, which was rolled back; \
         try restarting transaction",
    )
}

/// Cancels the statement running on `thread_id` of `member` after `after`, with
/// `KILL QUERY` on a connection of its own, unless dropped first. The client gets the
/// server's error 1317, and the session goes on.
pub(super) fn statement_timeout(
    router: &Arc<Router>,
    member: Arc<Member>,
    key: crate::backend::PoolKey,
    thread_id: u32,
    after: Duration,
) -> tokio::task::JoinHandle<()> {
    let router = router.clone();
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        Stats::incr(&router.stats.timeouts);
        match member.pool.lease(&key, None).await {
            Ok(mut c) => {
                let _ = c.query_scalar(&format!("KILL QUERY {thread_id}")).await;
            }
            Err(e) => tracing::warn!(error = %e, "statement timeout: no connection to cancel it"),
        }
    })
}

/// Counts the statement for the member it runs on.
pub(super) fn count(router: &Router, member: &Member, target: &Target) {
    match target {
        Target::Reader { .. } | Target::Node(_) => {
            let on_writer = router
                .writer()
                .is_some_and(|w| std::ptr::eq(w.as_ref(), member));
            if on_writer {
                Stats::incr(&router.stats.reads_to_writer);
            } else {
                Stats::incr(&router.stats.reads_to_readers);
            }
            member.reads.fetch_add(1, Ordering::Relaxed);
        }
        _ => {
            member.writes.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests;
