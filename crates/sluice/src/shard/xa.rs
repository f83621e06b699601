//! Transactions over several shards as MariaDB XA transactions (docs/ARCHITECTURE.md,
//! "Transactions over several shards"). The first shard a transaction used keeps a plain
//! transaction, the coordinator; each further shard runs an XA branch. COMMIT prepares
//! every branch, then commits the coordinator's transaction with a row of
//! [`DECISIONS`] in it (the decision is that row: it commits with the coordinator or
//! not at all), then commits the branches. A crash in between leaves branches prepared
//! on their servers; recovery commits those whose decision row exists and rolls back
//! the others.
//!
//! The transaction id names the Sluice instance (so one never resolves another's), the
//! process (so a running process skips its own commits in flight) and the coordinator
//! shard (where the decision is looked up).

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};

/// The table decisions are recorded in, on every shard.
pub const DECISIONS: &str = "sluice.xa_decision";

/// Creates [`DECISIONS`] where it is missing.
pub const CREATE_DECISIONS: [&str; 2] = [
    "CREATE DATABASE IF NOT EXISTS sluice",
    "CREATE TABLE IF NOT EXISTS sluice.xa_decision (\
     gtrid VARBINARY(64) NOT NULL PRIMARY KEY, \
     decided_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP) ENGINE=InnoDB",
];

const PREFIX: &str = "sluice";

/// The cross-shard transactions of this process.
pub struct Coordinator {
    /// A hash of the instance name, as it appears in ids.
    instance: String,
    /// Distinguishes this process from earlier ones of the same instance.
    boot: String,
    next: AtomicU64,
    /// Transactions between their first prepare and their last commit: recovery
    /// leaves them alone.
    in_flight: parking_lot::Mutex<HashSet<String>>,
}

/// One prepared branch found on a server, in this instance's format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    pub gtrid: String,
    pub bqual: String,
    pub coordinator: usize,
}

impl Coordinator {
    pub fn new(instance: &str) -> Coordinator {
        let boot = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        Coordinator {
            instance: hash(instance),
            boot: format!("{boot:x}"),
            next: AtomicU64::new(1),
            in_flight: parking_lot::Mutex::new(HashSet::new()),
        }
    }

    /// A new transaction id whose decision lives on shard `coordinator`.
    pub fn gtrid(&self, coordinator: usize) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        format!("{PREFIX}:{}:{}:{coordinator}:{n}", self.instance, self.boot)
    }

    pub fn begin_commit(&self, gtrid: &str) {
        self.in_flight.lock().insert(gtrid.to_owned());
    }

    pub fn end_commit(&self, gtrid: &str) {
        self.in_flight.lock().remove(gtrid);
    }

    pub fn in_flight(&self, gtrid: &str) -> bool {
        self.in_flight.lock().contains(gtrid)
    }

    /// The `LIKE` pattern of this instance's ids (any process).
    pub fn own_pattern(&self) -> String {
        format!("{PREFIX}:{}:%", self.instance)
    }

    /// A row of `XA RECOVER` (formatID, gtrid_length, bqual_length, data) if it is a
    /// branch of this instance.
    pub fn parse_recovered(&self, row: &[Option<Vec<u8>>]) -> Option<Prepared> {
        let (instance, prepared) = parse_any(row)?;
        (instance == self.instance).then_some(prepared)
    }

    /// The `LIKE` pattern of an instance's ids, by its hashed name.
    pub fn pattern_of(instance: &str) -> String {
        format!("{PREFIX}:{instance}:%")
    }
}

/// An instance name as the transaction ids carry it.
pub fn hash(instance: &str) -> String {
    format!(
        "{:08x}",
        crate::classify::sql::fnv1a(instance.as_bytes()) as u32
    )
}

/// A row of `XA RECOVER` if it is a branch of any Sluice instance: that instance (as
/// [`hash`] gives it) and the branch.
pub fn parse_any(row: &[Option<Vec<u8>>]) -> Option<(String, Prepared)> {
    let number = |i: usize| -> Option<usize> {
        std::str::from_utf8(row.get(i)?.as_deref()?)
            .ok()?
            .parse()
            .ok()
    };
    if number(0)? != 1 {
        return None;
    }
    let (glen, blen) = (number(1)?, number(2)?);
    let data = row.get(3)?.as_deref()?;
    // The lengths are the server's text: a sum that overflows could wrap to the data's
    // length and cut it past its end.
    if glen.checked_add(blen) != Some(data.len()) {
        return None;
    }
    let gtrid = std::str::from_utf8(&data[..glen]).ok()?;
    let bqual = std::str::from_utf8(&data[glen..]).ok()?;
    let mut parts = gtrid.split(':');
    if parts.next()? != PREFIX {
        return None;
    }
    let instance = parts.next()?.to_owned();
    let _boot = parts.next()?;
    let coordinator = parts.next()?.parse().ok()?;
    Some((
        instance,
        Prepared {
            gtrid: gtrid.to_owned(),
            bqual: bqual.to_owned(),
            coordinator,
        },
    ))
}

/// The XID of shard `shard`'s branch of `gtrid` as XA statements write it. Ids are made
/// of letters, digits and colons only: no quoting needed.
pub fn xid(gtrid: &str, shard: usize) -> String {
    format!("'{gtrid}','{shard}'")
}

/// The instance name when `[sharding] instance` is not set: this host and the first
/// address Sluice listens on.
pub fn default_instance(listen: Option<&str>) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    format!("{}/{}", host.trim(), listen.unwrap_or(""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(format: &str, gtrid: &str, bqual: &str) -> Vec<Option<Vec<u8>>> {
        vec![
            Some(format.as_bytes().to_vec()),
            Some(gtrid.len().to_string().into_bytes()),
            Some(bqual.len().to_string().into_bytes()),
            Some(format!("{gtrid}{bqual}").into_bytes()),
        ]
    }

    #[test]
    fn recovery_knows_its_own_branches_only() {
        let ours = Coordinator::new("host/127.0.0.1:3306");
        let other = Coordinator::new("host/127.0.0.1:3307");
        let gtrid = ours.gtrid(2);
        let found = ours.parse_recovered(&row("1", &gtrid, "1")).unwrap();
        assert_eq!(
            found,
            Prepared {
                gtrid: gtrid.clone(),
                bqual: "1".into(),
                coordinator: 2
            }
        );
        assert_eq!(other.parse_recovered(&row("1", &gtrid, "1")), None);
        assert_eq!(ours.parse_recovered(&row("2", &gtrid, "1")), None);
        assert_eq!(ours.parse_recovered(&row("1", "app-xid", "b")), None);
        // A restarted process of the same instance recovers the earlier one's.
        let again = Coordinator::new("host/127.0.0.1:3306");
        assert!(again.parse_recovered(&row("1", &gtrid, "1")).is_some());
        assert!(gtrid.len() <= 64);
        assert!(gtrid.starts_with(&ours.own_pattern()[..ours.own_pattern().len() - 1]));
    }

    /// Found by the `response` fuzz target: lengths whose sum overflows.
    #[test]
    fn lengths_past_the_data_are_no_branch() {
        let max = usize::MAX.to_string();
        let rows = [
            ["1", max.as_str(), "3", "-"],
            ["1", max.as_str(), "2", "-"],
            ["1", "1", max.as_str(), "-"],
            ["1", "5", "0", "-"],
        ];
        for r in rows {
            let row: Vec<Option<Vec<u8>>> = r.iter().map(|v| Some(v.as_bytes().to_vec())).collect();
            assert_eq!(parse_any(&row), None, "{r:?}");
        }
    }

    #[test]
    fn ids_are_unique_and_commits_in_flight_are_known() {
        let c = Coordinator::new("x");
        let (a, b) = (c.gtrid(0), c.gtrid(0));
        assert_ne!(a, b);
        c.begin_commit(&a);
        assert!(c.in_flight(&a) && !c.in_flight(&b));
        c.end_commit(&a);
        assert!(!c.in_flight(&a));
        assert_eq!(xid(&a, 3), format!("'{a}','3'"));
    }
}
