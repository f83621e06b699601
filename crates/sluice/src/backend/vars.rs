//! Session variables that differ from a fresh connection's: what a multiplexed session
//! set, and what each of its connections holds.

/// Tracked session variables, name → value as the server reports them, in name order.
/// A session sets a handful: a sorted vector, which a lease compares and copies in one
/// pass, where a B-tree allocated a 368-byte node for the first (an idle client's
/// `SET autocommit`).
#[derive(Clone, Default, PartialEq, Eq, Debug)]
pub struct Vars(Vec<Var>);

type Var = (Box<[u8]>, Box<[u8]>);

impl Vars {
    pub const fn new() -> Vars {
        Vars(Vec::new())
    }

    fn find(&self, name: &[u8]) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| (**k).cmp(name))
    }

    pub fn get(&self, name: impl AsRef<[u8]>) -> Option<&[u8]> {
        let i = self.find(name.as_ref()).ok()?;
        Some(&self.0[i].1)
    }

    pub fn contains_key(&self, name: impl AsRef<[u8]>) -> bool {
        self.find(name.as_ref()).is_ok()
    }

    /// Sets `name`, returning the value it replaces.
    pub fn insert(&mut self, name: Box<[u8]>, value: Box<[u8]>) -> Option<Box<[u8]>> {
        match self.find(&name) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, value)),
            Err(i) => {
                self.0.insert(i, (name, value));
                None
            }
        }
    }

    pub fn remove(&mut self, name: impl AsRef<[u8]>) -> Option<Box<[u8]>> {
        let i = self.find(name.as_ref()).ok()?;
        Some(self.0.remove(i).1)
    }

    pub fn clear(&mut self) {
        self.0.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// In name order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.0.iter().map(|(k, v)| (&**k, &**v))
    }
}

impl FromIterator<Var> for Vars {
    fn from_iter<I: IntoIterator<Item = Var>>(pairs: I) -> Vars {
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
        assert_eq!(v.insert(b("sql_mode"), b("''")), None);
        assert_eq!(v.insert(b("autocommit"), b("0")), None);
        assert_eq!(v.insert(b("time_zone"), b("'+00:00'")), None);
        assert_eq!(v.insert(b("autocommit"), b("1")), Some(b("0")));
        let names: Vec<&[u8]> = v.iter().map(|(k, _)| k).collect();
        assert_eq!(names, [&b"autocommit"[..], b"sql_mode", b"time_zone"]);
        assert_eq!(v.get("autocommit"), Some(&b"1"[..]));
        assert!(v.contains_key(b"sql_mode"));
        assert_eq!(v.remove("sql_mode"), Some(b("''")));
        assert_eq!((v.iter().count(), v.get("sql_mode")), (2, None));
        let same: Vars = [(b("time_zone"), b("'+00:00'")), (b("autocommit"), b("1"))]
            .into_iter()
            .collect();
        assert_eq!(v, same);
        v.clear();
        assert!(v.is_empty());
    }
}
