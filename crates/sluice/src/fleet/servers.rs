//! Coordination through the servers themselves, which every deployment has: what
//! MariaDB MaxScale's cooperative monitoring does. An instance's slot (its share of the
//! session ids) and its duties are named locks (`GET_LOCK`) it holds on a majority of
//! the running servers, each on a connection of its own that it keeps open: two
//! instances can't both hold a majority, and a dead instance's locks go with its
//! connections. Membership, the shared runtime state and the messages between
//! instances are rows in the `sluice` schema on the writer, which replication carries to
//! the others (so they survive a failover); every instance reads the new ones every
//! `fleet.poll`.

use super::{MemberInfo, RouterSource, SLOTS};
use crate::auth::BackendCredentials;
use crate::backend::BackendConn;
use crate::error::Failed;
use crate::router::{Health, Member};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

const SCHEMA: [&str; 4] = [
    "CREATE DATABASE IF NOT EXISTS sluice",
    "CREATE TABLE IF NOT EXISTS sluice.fleet_member (fleet VARCHAR(64) NOT NULL, slot \
     SMALLINT UNSIGNED NOT NULL, info TEXT NOT NULL, seen TIMESTAMP(6) NOT NULL, \
     PRIMARY KEY (fleet, slot)) ENGINE=InnoDB",
    "CREATE TABLE IF NOT EXISTS sluice.fleet_log (id BIGINT UNSIGNED NOT NULL \
     AUTO_INCREMENT PRIMARY KEY, fleet VARCHAR(64) NOT NULL, origin SMALLINT UNSIGNED NOT \
     NULL, at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), body TEXT NOT NULL) \
     ENGINE=InnoDB",
    "CREATE TABLE IF NOT EXISTS sluice.fleet_state (fleet VARCHAR(64) NOT NULL, name \
     VARCHAR(191) NOT NULL, body TEXT NOT NULL, at TIMESTAMP(6) NOT NULL, PRIMARY KEY \
     (fleet, name)) ENGINE=InnoDB",
];

/// How long the log keeps a message: far longer than any instance takes to read it.
const KEEP_LOG: &str = "INTERVAL 10 MINUTE";

pub struct Servers {
    /// `fleet.name`: instances of other fleets on the same servers share nothing.
    fleet: String,
    router: RouterSource,
    creds: Arc<BackendCredentials>,
    poll: Duration,
    holds: tokio::sync::Mutex<Holds>,
    table: tokio::sync::Mutex<Table>,
}

/// The locks held, one connection per server that holds them.
#[derive(Default)]
struct Holds {
    slot: Option<u32>,
    /// By server name.
    conns: HashMap<String, BackendConn>,
    /// Each duty with the servers it is held on.
    duties: HashMap<String, BTreeSet<String>>,
}

/// The connection to the writer that reads and writes the tables.
#[derive(Default)]
struct Table {
    conn: Option<(String, BackendConn)>,
    /// The last log row read (None: not read yet).
    last: Option<u64>,
    /// Why the tables can't be used, as last logged.
    broken: Option<String>,
}

impl Servers {
    /// A fleet's slot lock: its name, then the slot (`GET_LOCK` names are 64 characters
    /// at most, which `fleet.name`'s 32 leave room for).
    fn slot_lock(&self, slot: u32) -> String {
        format!("sluice.{}.slot.{slot}", self.fleet)
    }

    fn duty_lock(&self, duty: &str) -> String {
        format!("sluice.{}.duty.{duty}", self.fleet)
    }
}

/// A text as an SQL literal whatever the session's `sql_mode` (no escapes to get wrong).
fn literal(text: &str) -> String {
    if text.is_empty() {
        return "''".into();
    }
    let hex: String = text.bytes().map(|b| format!("{b:02x}")).collect();
    format!("CONVERT(X'{hex}' USING utf8mb4)")
}

async fn rows(
    c: &mut BackendConn,
    sql: &str,
    timeout: Duration,
) -> Result<Vec<Vec<Option<Vec<u8>>>>, String> {
    match tokio::time::timeout(timeout, c.query_rows(sql)).await {
        Ok(Ok(rows)) => Ok(rows),
        Ok(Err(Failed::Answered(e))) => Err(format!("{}: {}", c.server.name, e.message)),
        Ok(Err(Failed::Broken(e))) => Err(format!("{}: {e}", c.server.name)),
        Err(_) => Err(format!("{}: no answer within {timeout:?}", c.server.name)),
    }
}

async fn exec(c: &mut BackendConn, sql: &str, timeout: Duration) -> Result<(), String> {
    rows(c, sql, timeout).await.map(|_| ())
}

fn text(v: &Option<Vec<u8>>) -> String {
    v.as_deref()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_default()
}

/// `GET_LOCK(name, 0)` said yes.
async fn lock(c: &mut BackendConn, name: &str, timeout: Duration) -> bool {
    let sql = format!("SELECT GET_LOCK('{name}', 0)");
    matches!(rows(c, &sql, timeout).await, Ok(r) if r.first().and_then(|r| r.first()).map(text).as_deref() == Some("1"))
}

async fn unlock(c: &mut BackendConn, name: &str, timeout: Duration) {
    let _ = exec(c, &format!("DO RELEASE_LOCK('{name}')"), timeout).await;
}

impl Servers {
    pub fn new(
        fleet: &str,
        router: RouterSource,
        creds: Arc<BackendCredentials>,
        poll: Duration,
    ) -> Servers {
        Servers {
            fleet: fleet.to_owned(),
            router,
            creds,
            poll,
            holds: Default::default(),
            table: Default::default(),
        }
    }

    fn timeout(&self) -> Duration {
        (self.router)().monitor.timeout
    }

    /// The servers not known to be down: a lone server is never checked (nothing to
    /// fail over to), and is running for this purpose.
    fn running(&self) -> Vec<Arc<Member>> {
        (self.router)()
            .members
            .iter()
            .filter(|m| m.state.load().health != Health::Down)
            .cloned()
            .collect()
    }

    async fn connect(&self, m: &Member) -> Option<BackendConn> {
        let params = crate::monitor::params();
        let connect = BackendConn::connect(m.pool.server.clone(), &self.creds, &params, None);
        match tokio::time::timeout(self.timeout(), connect).await {
            Ok(Ok(c)) => Some(c),
            _ => None,
        }
    }

    /// The slot held, taking the lowest free one when none is: its lock on a majority of
    /// the running servers, asked in configuration order as every instance asks, so
    /// that one that misses a lock gives up as soon as a majority is out of reach.
    pub async fn claim(&self) -> Option<u32> {
        let mut holds = self.holds.lock().await;
        if holds.slot.is_some() {
            return holds.slot;
        }
        let running = self.running();
        if running.is_empty() {
            return None;
        }
        let need = running.len() / 2 + 1;
        let timeout = self.timeout();
        let mut conns: Vec<(String, BackendConn)> = Vec::new();
        for m in &running {
            if let Some(c) = self.connect(m).await {
                conns.push((m.name().to_owned(), c));
            }
        }
        if conns.len() < need {
            return None;
        }
        for slot in 0..SLOTS {
            let name = self.slot_lock(slot);
            let mut got = Vec::new();
            let count = conns.len();
            for (i, (_, c)) in conns.iter_mut().enumerate() {
                if got.len() + (count - i) < need {
                    break;
                }
                if lock(c, &name, timeout).await {
                    got.push(i);
                }
            }
            if got.len() >= need {
                for (i, (server, mut c)) in conns.into_iter().enumerate() {
                    if got.contains(&i) {
                        holds.conns.insert(server, c);
                    } else {
                        unlock(&mut c, &name, timeout).await;
                    }
                }
                holds.slot = Some(slot);
                return Some(slot);
            }
            for i in got {
                unlock(&mut conns[i].1, &name, timeout).await;
            }
        }
        None
    }

    /// Keeps the slot's locks (and the duties') on every running server, taking them
    /// again where a connection was lost; says whether a majority still holds it.
    pub async fn keep(&self) -> bool {
        let mut holds = self.holds.lock().await;
        let Some(slot) = holds.slot else {
            return false;
        };
        let timeout = self.timeout();
        let running = self.running();
        let mut alive = HashMap::new();
        for m in &running {
            let name = m.name().to_owned();
            let kept = match holds.conns.remove(&name) {
                Some(mut c) => exec(&mut c, "DO 1", timeout).await.is_ok().then_some(c),
                None => None,
            };
            match kept {
                Some(c) => {
                    alive.insert(name, c);
                }
                None => {
                    for servers in holds.duties.values_mut() {
                        servers.remove(&name);
                    }
                    if let Some(mut c) = self.connect(m).await {
                        if lock(&mut c, &self.slot_lock(slot), timeout).await {
                            alive.insert(name, c);
                        }
                    }
                }
            }
        }
        holds.conns = alive;
        holds.conns.len() > running.len() / 2
    }

    /// Takes (or keeps) `duty` on a majority of all the servers (not only those this
    /// instance sees running: two instances partitioned from different servers would
    /// each find a majority of their own); false: another instance holds it, or too few
    /// servers answer. Held until released or lost.
    pub async fn hold_duty(&self, duty: &str) -> bool {
        let mut holds = self.holds.lock().await;
        let timeout = self.timeout();
        let all = (self.router)().members.len();
        let name = self.duty_lock(duty);
        let Holds { conns, duties, .. } = &mut *holds;
        let on = duties.entry(duty.to_owned()).or_default();
        for (server, c) in conns.iter_mut() {
            if !on.contains(server) && lock(c, &name, timeout).await {
                on.insert(server.clone());
            }
        }
        if on.len() > all / 2 {
            return true;
        }
        for server in std::mem::take(on) {
            if let Some(c) = conns.get_mut(&server) {
                unlock(c, &name, timeout).await;
            }
        }
        false
    }

    /// Ends the holds: the locks go with the connections.
    pub async fn leave(&self) {
        *self.holds.lock().await = Holds::default();
    }

    /// The connection to the writer, opened (and the tables made) when there is none
    /// or the writer moved. None: no writer now, or the tables can't be used.
    async fn writer_conn<'a>(&self, table: &'a mut Table) -> Option<&'a mut BackendConn> {
        let writer = (self.router)().writer()?;
        let timeout = self.timeout();
        if table.conn.as_ref().is_some_and(|(w, _)| w != writer.name()) {
            table.conn = None;
        }
        if table.conn.is_none() {
            let mut c = self.connect(&writer).await?;
            let mut made = Ok(());
            for sql in SCHEMA {
                made = exec(&mut c, sql, timeout).await;
                if made.is_err() {
                    break;
                }
            }
            let max = match made {
                Ok(()) => rows(
                    &mut c,
                    "SELECT COALESCE(MAX(id), 0) FROM sluice.fleet_log",
                    timeout,
                )
                .await
                .map(|r| {
                    r.first()
                        .and_then(|r| r.first())
                        .map(text)
                        .unwrap_or_default()
                }),
                Err(e) => Err(e),
            };
            let max: u64 = match max {
                Ok(m) => m.parse().unwrap_or(0),
                Err(e) => {
                    if table.broken.as_ref() != Some(&e) {
                        tracing::warn!(error = %e, "the fleet's tables on the writer can't be used: runtime changes stay on this instance, and peers are not listed (the monitor account needs ALL on sluice.*)");
                        table.broken = Some(e);
                    }
                    return None;
                }
            };
            table.broken = None;
            // A new writer may lack the last rows read on the old one: what it logs
            // next takes their ids.
            table.last = Some(table.last.map_or(max, |l| l.min(max)));
            table.conn = Some((writer.name().to_owned(), c));
        }
        table.conn.as_mut().map(|(_, c)| c)
    }

    /// Runs `sql` on the writer; the connection is dropped on failure.
    async fn on_writer(&self, sql: &str) -> Result<Vec<Vec<Option<Vec<u8>>>>, String> {
        let mut table = self.table.lock().await;
        let timeout = self.timeout();
        let Some(c) = self.writer_conn(&mut table).await else {
            return Err("no writer to keep the fleet's state on".into());
        };
        let result = rows(c, sql, timeout).await;
        if result.is_err() {
            table.conn = None;
        }
        result
    }

    /// Writes this instance's row.
    pub async fn register(&self, me: &MemberInfo) -> Result<(), String> {
        let info = serde_json::to_string(me).map_err(|e| e.to_string())?;
        let sql = format!(
            "INSERT INTO sluice.fleet_member (fleet, slot, info, seen) VALUES ({}, {}, {}, \
             NOW(6)) ON DUPLICATE KEY UPDATE info = VALUES(info), seen = VALUES(seen)",
            literal(&self.fleet),
            me.slot,
            literal(&info)
        );
        self.on_writer(&sql).await.map(|_| ())
    }

    /// Every instance that ever registered, with how long ago it was last heard of and
    /// whether its slot's lock is held on the writer now.
    pub async fn members(&self) -> Result<Vec<MemberInfo>, String> {
        let sql = format!(
            "SELECT info, TIMESTAMPDIFF(MICROSECOND, seen, NOW(6)) DIV 1000, \
             IS_USED_LOCK(CONCAT({}, slot)) IS NOT NULL FROM sluice.fleet_member \
             WHERE fleet = {} ORDER BY slot",
            literal(&format!("sluice.{}.slot.", self.fleet)),
            literal(&self.fleet)
        );
        let rows = self.on_writer(&sql).await?;
        Ok(rows
            .iter()
            .filter_map(|r| {
                let mut m: MemberInfo = serde_json::from_str(&text(r.first()?)).ok()?;
                m.last_contact_ms = text(r.get(1)?).parse().ok();
                m.live = text(r.get(2)?) == "1";
                Some(m)
            })
            .collect())
    }

    /// Writes a message (`body`, as [`super::message::Seal`] made it) to the log, and
    /// to the shared state under `state_key`.
    pub async fn send(
        &self,
        origin: u32,
        body: &str,
        state_key: Option<&str>,
    ) -> Result<(), String> {
        if let Some(key) = state_key {
            let sql = format!(
                "INSERT INTO sluice.fleet_state (fleet, name, body, at) VALUES ({}, {}, {}, \
                 NOW(6)) ON DUPLICATE KEY UPDATE body = VALUES(body), at = VALUES(at)",
                literal(&self.fleet),
                literal(key),
                literal(body)
            );
            self.on_writer(&sql).await?;
        }
        let sql = format!(
            "INSERT INTO sluice.fleet_log (fleet, origin, body) VALUES ({}, {}, {})",
            literal(&self.fleet),
            origin,
            literal(body)
        );
        self.on_writer(&sql).await.map(|_| ())
    }

    /// The messages logged since the last call, as written, waiting `fleet.poll` first
    /// (but no longer than `wait`).
    pub async fn next(&self, wait: Duration) -> Vec<Vec<u8>> {
        tokio::time::sleep(self.poll.min(wait)).await;
        let mut table = self.table.lock().await;
        let timeout = self.timeout();
        if self.writer_conn(&mut table).await.is_none() {
            return Vec::new();
        }
        let (Some(last), Some((_, c))) = (table.last, table.conn.as_mut()) else {
            return Vec::new();
        };
        let sql = format!(
            "SELECT id, IF(fleet = {}, body, NULL) FROM sluice.fleet_log WHERE id > {last} \
             ORDER BY id LIMIT 1000",
            literal(&self.fleet)
        );
        let read = rows(c, &sql, timeout).await;
        let Ok(read) = read else {
            table.conn = None;
            return Vec::new();
        };
        let mut out = Vec::new();
        for r in &read {
            if let Some(id) = r.first().map(text).and_then(|t| t.parse::<u64>().ok()) {
                table.last = Some(id);
            }
            // Another fleet's message (NULL) is passed over.
            if let Some(Some(body)) = r.get(1) {
                out.push(body.clone());
            }
        }
        out
    }

    /// The shared state entries, as written: the changes that last set them.
    pub async fn state(&self) -> Result<Vec<Vec<u8>>, String> {
        let rows = self
            .on_writer(&format!(
                "SELECT body FROM sluice.fleet_state WHERE fleet = {} ORDER BY at",
                literal(&self.fleet)
            ))
            .await?;
        Ok(rows
            .into_iter()
            .filter_map(|r| r.into_iter().next().flatten())
            .collect())
    }

    /// Forgets what no instance needs any more: log rows every instance has read, and
    /// instances gone for a day.
    pub async fn prune(&self) {
        let _ = self
            .on_writer(&format!(
                "DELETE FROM sluice.fleet_log WHERE at < NOW(6) - {KEEP_LOG}"
            ))
            .await;
        let _ = self
            .on_writer("DELETE FROM sluice.fleet_member WHERE seen < NOW(6) - INTERVAL 1 DAY")
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_need_no_escapes() {
        assert_eq!(literal(""), "''");
        assert_eq!(literal("a'\\"), "CONVERT(X'61275c' USING utf8mb4)");
    }
}
