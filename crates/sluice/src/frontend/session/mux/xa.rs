//! A transaction that reaches a second shard (`[sharding] cross_shard = "xa"`, see
//! `crate::shard::xa`): the connection of each shard it used stays with the session,
//! parked while the session works on another; the first shard's transaction is a plain
//! one, each further shard's an XA branch started before its first statement there.
//! COMMIT and ROLLBACK are done here over all of them, and what would end or split one
//! branch alone (an implicit commit, a savepoint) is refused.

use super::*;
use crate::backend::PooledConn;
use crate::classify::sql;
use crate::router::Member;
use crate::shard::xa::{xid, DECISIONS};
use crate::shard::Shards;
use std::sync::Arc;

/// The shards of a transaction over several, besides the connection the session holds.
pub(in crate::frontend::session) struct Spread {
    gtrid: String,
    /// The shard the transaction began on: a plain transaction, where the decision is
    /// recorded.
    coordinator: usize,
    /// Shards with an XA branch, begun or about to be.
    branches: Vec<usize>,
    parked: Vec<Parked>,
}

struct Parked {
    shard: usize,
    conn: PooledConn,
    member: Option<Arc<Member>>,
}

/// One shard's connection at the end of the transaction.
struct Branch {
    shard: usize,
    conn: PooledConn,
    xa: bool,
    prepared: bool,
}

/// First words of statements that commit implicitly, or would act on one branch only.
const ENDS_OR_SPLITS: &[&[u8]] = &[
    b"ALTER",
    b"ANALYZE",
    b"BEGIN",
    b"CACHE",
    b"CHANGE",
    b"CREATE",
    b"DROP",
    b"FLUSH",
    b"GRANT",
    b"INSTALL",
    b"LOCK",
    b"OPTIMIZE",
    b"PURGE",
    b"RELEASE",
    b"RENAME",
    b"REPAIR",
    b"RESET",
    b"REVOKE",
    b"SAVEPOINT",
    b"START",
    b"TRUNCATE",
    b"UNINSTALL",
    b"UNLOCK",
    b"XA",
];

/// What a statement does to a transaction over several shards.
enum Ending {
    Commit,
    Rollback,
    /// Refused: it would end or split one branch only.
    Refused,
    Neither,
}

fn ending(text: &[u8]) -> Ending {
    let word = sql::first_word(text);
    let has = |w: &[u8]| super::shard::contains_word(text, w);
    match word.as_slice() {
        b"COMMIT" | b"ROLLBACK" if has(b"CHAIN") || has(b"RELEASE") || has(b"TO") => {
            Ending::Refused
        }
        b"COMMIT" => Ending::Commit,
        b"ROLLBACK" => Ending::Rollback,
        b"CREATE" | b"DROP" if has(b"TEMPORARY") => Ending::Neither,
        b"SET" if has(b"AUTOCOMMIT") => Ending::Refused,
        w if ENDS_OR_SPLITS.contains(&w) => Ending::Refused,
        _ => Ending::Neither,
    }
}

/// A command Sluice sends on a branch's connection; a lost connection is marked broken.
async fn exec(conn: &mut PooledConn, sql: &str) -> Result<(), ErrPacket> {
    let mut payload = Vec::with_capacity(sql.len() + 1);
    payload.push(Command::Query as u8);
    payload.extend_from_slice(sql.as_bytes());
    match conn.simple_command(&payload).await {
        Ok(_) => Ok(()),
        Err(failed) => Err(conn.answer_for(failed)),
    }
}

/// The server's error, saying that the whole transaction was rolled back.
fn rolled_back(err: ErrPacket, shard: &str) -> ErrPacket {
    let state = String::from_utf8_lossy(&err.state).into_owned();
    ErrPacket::new(
        err.code,
        &state,
        format!(
            "{} (shard '{shard}'; Sluice rolled back the transaction on every shard)",
            err.message
        ),
    )
}

impl Session {
    /// With a transaction over several shards open: COMMIT and ROLLBACK are done here
    /// (`Some`, the session going on or not), statements that would end or split one
    /// branch only are refused; `None` for the others.
    pub(super) async fn spread_statement(
        &mut self,
        shards: &Shards,
        text: &[u8],
    ) -> Result<Option<bool>, SessionError> {
        if self.backing.muxed().spread.is_none() {
            return Ok(None);
        }
        let commit = match ending(text) {
            Ending::Neither => return Ok(None),
            Ending::Refused => {
                let err = super::shard::not_yet(
                    "a statement that ends or splits a transaction over several shards \
                     (COMMIT or ROLLBACK it first)",
                );
                let seq = self.client.skip_packet().await?;
                self.client.write_err(seq, &err).await?;
                return Ok(Some(true));
            }
            Ending::Commit => true,
            Ending::Rollback => false,
        };
        let seq = self.client.skip_packet().await?;
        let result = self.end_spread(shards, commit).await;
        let mux = self.backing.muxed_mut();
        let status = StatusFlags(mux.status.0 & !StatusFlags::IN_TRANS);
        mux.status = status;
        // What its statements wrote is stale once it ends, before the client hears so.
        if let Some(c) = self.cache.as_mut() {
            c.wrote(Some(Vec::new()), status);
        }
        match result {
            Ok(()) => {
                let ok = OkPacket {
                    status,
                    ..Default::default()
                };
                self.client.write_ok(seq, &ok).await?;
            }
            Err(err) => self.client.write_err(seq, &err).await?,
        }
        Ok(Some(true))
    }

    /// The transaction the session holds on `from` goes on on `to` as well: `from`'s
    /// connection is parked, and `to`'s is the one parked there or, the first time, a
    /// new one whose XA branch begins before the statement.
    pub(super) fn spread_to(&mut self, shards: &Shards, from: usize, to: usize) {
        let held = self
            .backing
            .take_conn()
            .expect("a transaction holds its connection");
        let member = self.member.take();
        let mux = self.backing.muxed_mut();
        let spread = mux.spread.get_or_insert_with(|| {
            Box::new(Spread {
                gtrid: shards.xa.gtrid(from),
                coordinator: from,
                branches: Vec::new(),
                parked: Vec::new(),
            })
        });
        spread.parked.push(Parked {
            shard: from,
            conn: held,
            member,
        });
        match spread.parked.iter().position(|p| p.shard == to) {
            Some(i) => {
                let p = spread.parked.swap_remove(i);
                self.backing.hold(p.conn);
                self.member = p.member;
            }
            None => {
                spread.branches.push(to);
                let start = format!("XA START {}", xid(&spread.gtrid, to));
                mux.deferred_begin = Some(start.into_bytes().into());
            }
        }
        self.switch_shard(shards, from, to);
        self.publish();
    }

    /// The XA branch about to begin on the connection just leased could not: the
    /// transaction ends on every shard, as a transaction the server rolls back does.
    pub(super) async fn spread_failed(&mut self, shards: &Shards) {
        if self.backing.muxed().spread.is_some() {
            if let Err(err) = self.end_spread(shards, false).await {
                tracing::debug!(%err, "rolling back a transaction over several shards");
            }
            let mux = self.backing.muxed_mut();
            mux.status = StatusFlags(mux.status.0 & !StatusFlags::IN_TRANS);
            let status = mux.status;
            if let Some(c) = self.cache.as_mut() {
                c.wrote(Some(Vec::new()), status);
            }
        }
    }

    /// After a statement: when the server ended the first shard's transaction (rolled
    /// back by a deadlock, or lost with its server), the other shards' branches are
    /// rolled back too, as the server rolls back the whole of one transaction.
    pub(in crate::frontend::session) async fn check_spread(&mut self, shards: &Shards) {
        let mux = self.backing.muxed();
        let Some(spread) = &mux.spread else {
            return;
        };
        let on_coordinator = mux.shard.unwrap_or(shards.map.default_shard()) == spread.coordinator;
        let ended = self
            .backing
            .conn()
            .is_none_or(|b| !b.status.in_transaction() || b.is_broken());
        if on_coordinator && ended {
            tracing::debug!("first shard's transaction ended: rolling back the others");
            self.spread_failed(shards).await;
        }
    }

    /// COMMIT of the transaction over several shards, Sluice's own (a split insert's).
    pub(super) async fn commit_spread(&mut self, shards: &Shards) -> Result<(), ErrPacket> {
        self.end_spread(shards, true).await
    }

    /// Commits or rolls back the transaction on every shard it used, and gives their
    /// connections back.
    async fn end_spread(&mut self, shards: &Shards, commit: bool) -> Result<(), ErrPacket> {
        let mux = self.backing.muxed_mut();
        let spread = mux.spread.take().expect("checked by the caller");
        let wrote = std::mem::take(&mut mux.trx_wrote);
        mux.deferred_begin = None;
        let current = mux.shard.unwrap_or(shards.map.default_shard());
        let mut branches: Vec<Branch> = spread
            .parked
            .into_iter()
            .map(|p| (p.shard, p.conn))
            .chain(self.backing.take_conn().map(|c| (current, c)))
            .map(|(shard, conn)| Branch {
                shard,
                conn,
                xa: spread.branches.contains(&shard),
                prepared: false,
            })
            .collect();
        self.member = None;
        let names = shards.map.names();
        let result = if !commit {
            rollback_all(&spread.gtrid, &mut branches).await;
            Ok(())
        } else if !wrote {
            one_phase(&spread.gtrid, &mut branches, names).await
        } else {
            shards.xa.begin_commit(&spread.gtrid);
            let r = two_phase(&spread.gtrid, spread.coordinator, &mut branches, names).await;
            shards.xa.end_commit(&spread.gtrid);
            r
        };
        for mut b in branches {
            if b.conn.is_broken() {
                continue;
            }
            // Its reads on that shard's replicas must see what it committed there.
            if result.is_ok() && commit && wrote && shards.routers[b.shard].splits() {
                match b.conn.query_scalar("SELECT @@last_gtid").await {
                    Ok(Some(gtid)) => self.note_shard_gtid(shards, b.shard, &gtid),
                    Ok(None) | Err(Failed::Answered(_)) => {}
                    Err(Failed::Broken(_)) => b.conn.mark_broken(),
                }
            }
            b.conn.release();
        }
        self.publish();
        result
    }
}

/// Nothing was written: each shard commits on its own.
async fn one_phase(
    gtrid: &str,
    branches: &mut [Branch],
    names: &[String],
) -> Result<(), ErrPacket> {
    for i in 0..branches.len() {
        let b = &mut branches[i];
        let x = xid(gtrid, b.shard);
        let done = if b.xa {
            match exec(&mut b.conn, &format!("XA END {x}")).await {
                Ok(()) => exec(&mut b.conn, &format!("XA COMMIT {x} ONE PHASE")).await,
                Err(e) => Err(e),
            }
        } else {
            exec(&mut b.conn, "COMMIT").await
        };
        if let Err(err) = done {
            let shard = names[branches[i].shard].clone();
            rollback_all(gtrid, &mut branches[i + 1..]).await;
            return Err(rolled_back(err, &shard));
        }
    }
    Ok(())
}

/// Prepare every XA branch, record the decision in the coordinator's transaction and
/// commit it, then commit the branches. Up to the coordinator's commit any failure
/// rolls everything back; after it, a branch that can't be committed now stays
/// prepared for recovery, and the client is told the transaction committed.
async fn two_phase(
    gtrid: &str,
    coordinator: usize,
    branches: &mut [Branch],
    names: &[String],
) -> Result<(), ErrPacket> {
    for i in 0..branches.len() {
        if !branches[i].xa {
            continue;
        }
        let b = &mut branches[i];
        let x = xid(gtrid, b.shard);
        let prepared = match exec(&mut b.conn, &format!("XA END {x}")).await {
            Ok(()) => exec(&mut b.conn, &format!("XA PREPARE {x}")).await,
            Err(e) => Err(e),
        };
        match prepared {
            Ok(()) => b.prepared = true,
            Err(err) => {
                let shard = names[b.shard].clone();
                rollback_all(gtrid, branches).await;
                return Err(rolled_back(err, &shard));
            }
        }
    }
    let Some(c) = branches.iter().position(|b| b.shard == coordinator) else {
        rollback_all(gtrid, branches).await;
        return Err(ErrPacket::new(
            code::ER_ERROR_DURING_COMMIT,
            "HY000",
            "Sluice: the first shard of a transaction over several shards lost its \
             connection; the transaction was rolled back on every shard",
        ));
    };
    let record = format!("INSERT INTO {DECISIONS} (gtrid) VALUES ('{gtrid}')");
    if let Err(err) = exec(&mut branches[c].conn, &record).await {
        rollback_all(gtrid, branches).await;
        return Err(rolled_back(err, &names[coordinator]));
    }
    if let Err(err) = exec(&mut branches[c].conn, "COMMIT").await {
        if branches[c].conn.is_broken() {
            // Committed there or not, the decision row says which; recovery finishes
            // the prepared branches accordingly.
            return Err(ErrPacket::new(
                code::ER_ERROR_DURING_COMMIT,
                "HY000",
                format!(
                    "Sluice: lost shard '{}' during COMMIT of a transaction over several \
                     shards; the other shards follow whatever it did",
                    names[coordinator]
                ),
            ));
        }
        rollback_all(gtrid, branches).await;
        return Err(rolled_back(err, &names[coordinator]));
    }
    for b in branches.iter_mut().filter(|b| b.prepared) {
        let x = xid(gtrid, b.shard);
        if let Err(err) = exec(&mut b.conn, &format!("XA COMMIT {x}")).await {
            tracing::warn!(
                shard = names[b.shard],
                gtrid,
                %err,
                "a committed transaction's branch stays prepared until recovery commits it"
            );
        }
    }
    Ok(())
}

/// Rolls back every branch, whatever state it is in; errors only mean there was nothing
/// left to roll back (the server did already), or the connection is gone with it.
async fn rollback_all(gtrid: &str, branches: &mut [Branch]) {
    for b in branches.iter_mut() {
        if b.conn.is_broken() {
            continue;
        }
        let x = xid(gtrid, b.shard);
        if !b.xa {
            let _ = exec(&mut b.conn, "ROLLBACK").await;
            continue;
        }
        if !b.prepared {
            let _ = exec(&mut b.conn, &format!("XA END {x}")).await;
        }
        let _ = exec(&mut b.conn, &format!("XA ROLLBACK {x}")).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_ends_or_splits_a_transaction_over_several_shards() {
        assert!(matches!(ending(b"COMMIT"), Ending::Commit));
        assert!(matches!(ending(b"commit work"), Ending::Commit));
        assert!(matches!(ending(b"ROLLBACK"), Ending::Rollback));
        for refused in [
            "COMMIT AND CHAIN",
            "ROLLBACK RELEASE",
            "ROLLBACK TO SAVEPOINT a",
            "SAVEPOINT a",
            "CREATE TABLE t (a INT)",
            "TRUNCATE t",
            "SET autocommit = 1",
            "BEGIN",
            "XA END 'x'",
            "LOCK TABLES t WRITE",
        ] {
            assert!(
                matches!(ending(refused.as_bytes()), Ending::Refused),
                "{refused}"
            );
        }
        for goes_on in [
            "SELECT 1",
            "INSERT INTO t VALUES (1)",
            "CREATE TEMPORARY TABLE t (a INT)",
            "SET @a = 1",
        ] {
            assert!(
                matches!(ending(goes_on.as_bytes()), Ending::Neither),
                "{goes_on}"
            );
        }
    }
}
