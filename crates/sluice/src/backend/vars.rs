//! Session variables that differ from a fresh connection's: what a multiplexed session
//! set, and what each of its connections holds.

/// Tracked session variables, name → value as the server reports them, in name order.
/// A session sets a handful, and most sessions one (a driver's `SET autocommit`): they
/// are packed in one buffer, each as its name's length (2 bytes), its name, its value's
/// length (4 bytes) and its value. One allocation for them all, where a vector of boxed
/// pairs made three for the first (227 bytes for `autocommit`); and a lease compares
/// and copies them as one slice.
#[derive(Clone, Default, PartialEq, Eq, Debug)]
pub struct Vars(Vec<u8>);

/// Where a variable's record is in the buffer, and its parts.
struct Record<'a> {
    at: usize,
    end: usize,
    name: &'a [u8],
    value: &'a [u8],
}

/// The records of `buf`, in order.
fn records(buf: &[u8]) -> impl Iterator<Item = Record<'_>> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let rest = buf.get(at..).filter(|r| !r.is_empty())?;
        let name_len = usize::from(u16::from_le_bytes([rest[0], rest[1]]));
        let name = &rest[2..2 + name_len];
        let v = 2 + name_len;
        let value_len = u32::from_le_bytes(rest[v..v + 4].try_into().expect("4 bytes")) as usize;
        let value = &rest[v + 4..v + 4 + value_len];
        let record = Record {
            at,
            end: at + v + 4 + value_len,
            name,
            value,
        };
        at = record.end;
        Some(record)
    })
}

impl Vars {
    pub const fn new() -> Vars {
        Vars(Vec::new())
    }

    /// The record named `name`, or where it would go.
    fn find(&self, name: &[u8]) -> Result<Record<'_>, usize> {
        for r in records(&self.0) {
            match r.name.cmp(name) {
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Equal => return Ok(r),
                std::cmp::Ordering::Greater => return Err(r.at),
            }
        }
        Err(self.0.len())
    }

    pub fn get(&self, name: impl AsRef<[u8]>) -> Option<&[u8]> {
        self.find(name.as_ref()).ok().map(|r| r.value)
    }

    pub fn contains_key(&self, name: impl AsRef<[u8]>) -> bool {
        self.find(name.as_ref()).is_ok()
    }

    /// Sets `name` to `value`. Names are variable names (at most 64 bytes on a server;
    /// longer ones are cut at 65,535) and values up to 4 GiB.
    pub fn insert(&mut self, name: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        let name = name.as_ref();
        let name = &name[..name.len().min(usize::from(u16::MAX))];
        let value = value.as_ref();
        let value = &value[..value.len().min(u32::MAX as usize)];
        let (at, end) = match self.find(name) {
            Ok(r) => (r.at, r.end),
            Err(at) => (at, at),
        };
        let mut record = Vec::with_capacity(6 + name.len() + value.len());
        record.extend_from_slice(&(name.len() as u16).to_le_bytes());
        record.extend_from_slice(name);
        record.extend_from_slice(&(value.len() as u32).to_le_bytes());
        record.extend_from_slice(value);
        if self.0.is_empty() {
            // Exactly its size: most sessions set one variable and no other.
            self.0 = record;
        } else {
            self.0.splice(at..end, record);
        }
    }

    pub fn remove(&mut self, name: impl AsRef<[u8]>) {
        if let Ok(r) = self.find(name.as_ref()) {
            let (at, end) = (r.at, r.end);
            self.0.drain(at..end);
        }
    }

    pub fn clear(&mut self) {
        self.0.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// In name order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        records(&self.0).map(|r| (r.name, r.value))
    }
}

impl<K: AsRef<[u8]>, V: AsRef<[u8]>> FromIterator<(K, V)> for Vars {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(pairs: I) -> Vars {
        let mut vars = Vars::new();
        for (k, v) in pairs {
            vars.insert(k, v);
        }
        vars
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Box<[u8]> {
        s.as_bytes().into()
    }

    #[test]
    fn kept_in_name_order_one_value_per_name() {
        let mut v = Vars::new();
        v.insert("sql_mode", "''");
        v.insert(b("autocommit"), b("0"));
        v.insert("time_zone", "'+00:00'");
        v.insert("autocommit", "1");
        let names: Vec<&[u8]> = v.iter().map(|(k, _)| k).collect();
        assert_eq!(names, [&b"autocommit"[..], b"sql_mode", b"time_zone"]);
        assert_eq!(v.get("autocommit"), Some(&b"1"[..]));
        assert_eq!(v.get("sql_mode"), Some(&b"''"[..]));
        assert!(v.contains_key(b"sql_mode"));
        v.remove("sql_mode");
        v.remove("not_set");
        assert_eq!((v.iter().count(), v.get("sql_mode")), (2, None));
        let same: Vars = [("time_zone", "'+00:00'"), ("autocommit", "1")]
            .into_iter()
            .collect();
        assert_eq!(v, same);
        // A longer value in place of a shorter, and an empty one.
        v.insert("autocommit", "OFF");
        v.insert("time_zone", "");
        let all: Vec<(&[u8], &[u8])> = v.iter().collect();
        assert_eq!(
            all,
            [(&b"autocommit"[..], &b"OFF"[..]), (b"time_zone", b"")]
        );
        assert_eq!(v.get("time_zone"), Some(&b""[..]));
        v.clear();
        assert!(v.is_empty() && v.get("autocommit").is_none());
    }

    #[test]
    fn one_variable_is_one_allocation_of_its_size() {
        let mut v = Vars::new();
        v.insert("autocommit", "0");
        assert_eq!(v.0.capacity(), 2 + 10 + 4 + 1);
    }
}
