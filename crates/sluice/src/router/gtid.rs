//! MariaDB GTID positions (`domain-server-sequence`, comma-separated, one per domain):
//! what a session's last write was, what a replica has applied, and whether one
//! position includes another. Only sequence numbers per domain are compared, as
//! `MASTER_GTID_WAIT` does.

use std::collections::BTreeMap;
use std::fmt;

/// A position: for each replication domain, the last GTID's server id and sequence.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GtidPos(BTreeMap<u32, (u32, u64)>);

impl GtidPos {
    /// Parses `0-1-42,1-2-7`; empty text is the empty position. `None` on bad text.
    pub fn parse(text: &str) -> Option<GtidPos> {
        let mut pos = BTreeMap::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let mut it = part.splitn(3, '-');
            let domain = it.next()?.parse().ok()?;
            let server = it.next()?.parse().ok()?;
            let seq = it.next()?.parse().ok()?;
            pos.insert(domain, (server, seq));
        }
        Some(GtidPos(pos))
    }

    /// The position of one GTID.
    pub fn of(domain: u32, server: u32, seq: u64) -> GtidPos {
        GtidPos(BTreeMap::from([(domain, (server, seq))]))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Each domain and the sequence number of its last GTID.
    pub fn sequences(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.0.iter().map(|(d, (_, seq))| (*d, *seq))
    }

    /// The sequence number of `domain`'s last GTID, if it has one.
    pub fn sequence(&self, domain: u32) -> Option<u64> {
        self.0.get(&domain).map(|(_, seq)| *seq)
    }

    /// The server id of `domain`'s last GTID, if it has one.
    pub fn server(&self, domain: u32) -> Option<u32> {
        self.0.get(&domain).map(|(server, _)| *server)
    }

    /// Takes, per domain, the earlier of the two; a domain only one has is kept.
    pub fn meet(&mut self, other: &GtidPos) {
        for (d, (server, seq)) in &other.0 {
            let e = self.0.entry(*d).or_insert((*server, *seq));
            if *seq < e.1 {
                *e = (*server, *seq);
            }
        }
    }

    /// Keeps of this position only what `limit` reaches: per domain, the earlier of the
    /// two; a domain `limit` lacks is dropped.
    pub fn cap(&mut self, limit: &GtidPos) {
        self.0.retain(|d, e| match limit.0.get(d) {
            None => false,
            Some(l) => {
                if l.1 < e.1 {
                    *e = *l;
                }
                true
            }
        });
    }

    /// Whether every domain of `other` is at or past its sequence here.
    pub fn includes(&self, other: &GtidPos) -> bool {
        other
            .0
            .iter()
            .all(|(d, (_, seq))| self.0.get(d).is_some_and(|(_, s)| s >= seq))
    }

    /// Takes, per domain, the later of the two.
    pub fn merge(&mut self, other: &GtidPos) {
        for (d, (server, seq)) in &other.0 {
            let e = self.0.entry(*d).or_insert((*server, *seq));
            if *seq > e.1 {
                *e = (*server, *seq);
            }
        }
    }

    /// Sum of sequence numbers: orders replicas of one primary by how much they got.
    pub fn total(&self) -> u64 {
        self.0.values().map(|(_, s)| *s).sum()
    }
}

impl fmt::Display for GtidPos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (d, (server, seq))) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{d}-{server}-{seq}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cap_lowers_and_drops_but_never_adds() {
        let pos = |t: &str| GtidPos::parse(t).unwrap();
        let mut p = pos("0-1-100,1-1-5,2-1-7");
        p.cap(&pos("0-2-98,1-2-9,3-2-4"));
        assert_eq!(p, pos("0-2-98,1-1-5"));
    }

    #[test]
    fn parse_compare_merge() {
        let a = GtidPos::parse("0-1-42,1-2-7").unwrap();
        assert_eq!(a.to_string(), "0-1-42,1-2-7");
        assert!(a.includes(&GtidPos::parse("0-1-40").unwrap()));
        assert!(a.includes(&GtidPos::parse("").unwrap()));
        assert!(!a.includes(&GtidPos::parse("0-1-43").unwrap()));
        assert!(!a.includes(&GtidPos::parse("2-1-1").unwrap()));
        let mut b = GtidPos::parse("0-3-50").unwrap();
        b.merge(&a);
        assert_eq!(b.to_string(), "0-3-50,1-2-7");
        assert_eq!(b.total(), 57);
        assert!(GtidPos::parse("0-1").is_none());
        assert!(GtidPos::parse("x-1-2").is_none());
    }
}
