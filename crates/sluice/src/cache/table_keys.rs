//! What the cache knows of each table's key: its single-column primary key, learnt from
//! the server's `information_schema` when a read of the table is first filled. Entries
//! and writes whose rows that key decides are invalidated by key value (generations.rs).

use super::RowSet;
use crate::binlog::rows::ColumnValue;
use crate::classify::keys::canon::{self, Canon, KeyType};
use crate::classify::keys::{self, key_values, KeyColumn, Keys, Value};
use crate::classify::sql::{code_token, is_one_of, literal_template, Lexer, TableRef};
use parking_lot::{Mutex, RwLock};
use sluice_wire::statement::Bound;
use std::collections::HashMap;
use std::sync::Arc;

/// Tables remembered; past this many, everything learnt is forgotten and learnt again.
const MAX_TABLES: usize = 100_000;

/// Character sets in which a printable ASCII value is the same bytes in a statement, in
/// a row image and to the server's comparison.
const ASCII_CHARSETS: &[&str] = &["ascii", "latin1", "utf8", "utf8mb3", "utf8mb4"];

/// A table's primary key column, as invalidation keys rows by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableKey {
    /// Lowercase, as statements' identifiers are compared.
    pub column: String,
    /// Among the table's columns, from 0: what binlog row images are read by.
    pub position: usize,
    pub key_type: KeyType,
    pub signed: bool,
    /// Columns of the table: a binlog table map with another count describes another
    /// layout (altered since), whose images are not read by key.
    pub columns: usize,
    /// Writes through Sluice naming rows by this key may change others: a trigger may
    /// change the key of the row it fires for, and another unique key may decide which
    /// rows `REPLACE` and `ON DUPLICATE KEY UPDATE` change.
    pub triggers: bool,
    pub other_unique: bool,
    /// What prepared statements' texts say of the key, so that each is lexed once.
    pub prepared: Shapes,
    /// What text reads say of the key, by their literal templates
    /// ([`crate::classify::sql::literal_template`]), so that each template is lexed once.
    pub texts: Shapes,
}

/// How many prepared statements' shapes a table remembers; past it they are forgotten.
const MAX_SHAPES: usize = 1024;

/// What a statement says of the key, apart from bound values.
#[derive(Clone)]
struct Shape {
    /// The values that decide its rows (`?` as parameters); `None`: none do.
    values: Option<Vec<Value>>,
    /// `REPLACE` or `ON DUPLICATE KEY UPDATE`.
    conflicts: bool,
}

/// Shapes by prepared statement text or text template (shared: an execute takes one
/// without a copy). `None`: a template whose shape can't stand for its texts.
#[derive(Default)]
pub struct Shapes(Mutex<ShapeMap>);

type ShapeMap = HashMap<Box<[u8]>, Option<Arc<Shape>>, ahash::RandomState>;

impl Shapes {
    /// The shape kept under `key`, else the one `work_out` gives, kept (the lock is not
    /// held while it works).
    fn get_or_work_out(
        &self,
        key: &[u8],
        work_out: impl FnOnce() -> Option<Arc<Shape>>,
    ) -> Option<Arc<Shape>> {
        if let Some(kept) = self.0.lock().get(key) {
            return kept.clone();
        }
        let shape = work_out();
        let mut shapes = self.0.lock();
        if shapes.len() >= MAX_SHAPES {
            shapes.clear();
        }
        shapes.insert(key.into(), shape.clone());
        shape
    }
}

impl std::fmt::Debug for Shapes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} prepared shapes", self.0.lock().len())
    }
}

impl Clone for Shapes {
    fn clone(&self) -> Self {
        Shapes::default()
    }
}

/// A cache of derived facts: two keys are the same whatever they remember.
impl PartialEq for Shapes {
    fn eq(&self, _: &Shapes) -> bool {
        true
    }
}

impl Eq for Shapes {}

impl TableKey {
    /// The key as `classify::keys` looks for it in a statement.
    pub fn column_of<'a>(&'a self, t: &'a TableRef) -> KeyColumn<'a> {
        KeyColumn {
            schema: &t.schema,
            table: &t.table,
            column: &self.column,
            position: Some(self.position),
        }
    }

    /// Whether a binlog table map of `columns` columns, the key's of `type_byte`, still
    /// describes the table as learnt.
    pub fn matches_map(&self, columns: usize, type_byte: Option<u8>) -> bool {
        const INTEGERS: &[u8] = &[1, 2, 3, 8, 9];
        // VARCHAR, VAR_STRING, STRING (CHAR).
        const STRINGS: &[u8] = &[15, 253, 254];
        let types = match self.key_type {
            KeyType::Integer => INTEGERS,
            KeyType::Ci | KeyType::Binary => STRINGS,
        };
        columns == self.columns && type_byte.is_some_and(|t| types.contains(&t))
    }

    /// A row image's value of the key, canonical; `None` when it decides nothing.
    pub fn image_value(&self, v: &ColumnValue) -> Option<Canon> {
        match (self.key_type, v) {
            (KeyType::Integer, v) => v.integer(self.signed).map(Canon::Int),
            (KeyType::Ci, ColumnValue::Bytes(b)) => canon::ci(b),
            _ => None,
        }
    }
}

/// Each table's key as learnt: `None` for a table without one invalidation can use.
#[derive(Default)]
pub struct TableKeys {
    known: RwLock<HashMap<TableRef, Option<Arc<TableKey>>, ahash::RandomState>>,
}

impl TableKeys {
    /// The outer `None`: not learnt yet.
    pub fn get(&self, t: &TableRef) -> Option<Option<Arc<TableKey>>> {
        self.known.read().get(t).cloned()
    }

    /// The query that describes `t` for [`Self::learn`]: one row, one JSON object.
    /// `None` for a name that can't be quoted whatever the session's SQL mode (it then
    /// has no key).
    pub fn query(t: &TableRef) -> Option<String> {
        let plain = |s: &str| !s.is_empty() && !s.contains(['\'', '\\', '\0']);
        if !plain(&t.schema) || !plain(&t.table) {
            return None;
        }
        let (s, n) = (&t.schema, &t.table);
        Some(format!(
            "SELECT JSON_OBJECT('namesakes', (SELECT COUNT(*) FROM \
             information_schema.SCHEMATA WHERE LOWER(SCHEMA_NAME) = '{s}') * (SELECT \
             COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = '{s}' AND \
             LOWER(TABLE_NAME) = '{n}'), \
             'columns', (SELECT COUNT(*) FROM information_schema.COLUMNS \
             WHERE TABLE_SCHEMA = '{s}' AND TABLE_NAME = '{n}'), 'keys', (SELECT \
             JSON_ARRAYAGG(JSON_ARRAY(k.INDEX_NAME, LOWER(k.COLUMN_NAME), c.ORDINAL_POSITION, \
             c.DATA_TYPE, c.COLUMN_TYPE, c.CHARACTER_SET_NAME)) FROM \
             information_schema.STATISTICS k JOIN information_schema.COLUMNS c ON \
             c.TABLE_SCHEMA = k.TABLE_SCHEMA AND c.TABLE_NAME = k.TABLE_NAME AND \
             c.COLUMN_NAME = k.COLUMN_NAME WHERE k.TABLE_SCHEMA = '{s}' AND \
             k.TABLE_NAME = '{n}' AND k.NON_UNIQUE = 0), 'triggers', (SELECT COUNT(*) FROM \
             information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = '{s}' AND \
             EVENT_OBJECT_TABLE = '{n}'))"
        ))
    }

    /// Records the answer to [`Self::query`] (`None`: it failed or was never asked):
    /// anything unreadable is a table without a usable key.
    pub fn learn(&self, t: &TableRef, answer: Option<&[u8]>) {
        let key = answer.and_then(parse).map(Arc::new);
        let mut known = self.known.write();
        if known.len() >= MAX_TABLES {
            known.clear();
        }
        known.insert(t.clone(), key);
    }

    /// DDL may have changed these tables' keys or layout.
    pub fn forget<'a>(&self, tables: impl IntoIterator<Item = &'a TableRef>) {
        let mut known = self.known.write();
        for t in tables {
            known.remove(t);
        }
    }

    pub fn forget_all(&self) {
        self.known.write().clear();
    }
}

/// Whether `sql` is DDL, which may change keys, layouts and triggers.
pub fn may_change_keys(sql: &[u8]) -> bool {
    let mut lex = Lexer::new(sql);
    code_token(&mut lex)
        .is_some_and(|t| is_one_of(sql, &t, &["ALTER", "CREATE", "DROP", "RENAME", "TRUNCATE"]))
}

/// The keys of `t` that a read decides its result by, or that a write changes (values
/// of `params` for a prepared statement's `?`); `None` when its rows can't be told that
/// way: the whole table then counts. `t` is the statement's one table as it was
/// resolved: an unqualified name in `sql` is in `t`'s schema (the default schema when
/// it was analysed, or prepared: a prepared statement's names are bound then).
/// A prepared statement (`params` given) is lexed once per table key.
pub fn rows_by_key(
    key: &TableKey,
    t: &TableRef,
    sql: &[u8],
    params: Option<&[Bound]>,
    write: bool,
) -> Option<RowSet> {
    if write && key.triggers {
        return None;
    }
    if let (None, false) = (params, write) {
        if let Some(keys) = text_rows(key, t, sql) {
            return keys.map(|keys| RowSet {
                table: t.clone(),
                keys,
            });
        }
    }
    let (known, fresh);
    let shape: &Shape = match params {
        Some(_) => {
            let work_out = || Some(Arc::new(shape_of(key, t, sql)));
            known = key.prepared.get_or_work_out(sql, work_out)?;
            &known
        }
        None => {
            fresh = shape_of(key, t, sql);
            &fresh
        }
    };
    if write && key.other_unique && shape.conflicts {
        return None;
    }
    let keys = shape
        .values
        .as_ref()?
        .iter()
        .map(|v| canon::canonical(key.key_type, v, params))
        .collect::<Option<Vec<_>>>()?;
    Some(RowSet {
        table: t.clone(),
        keys,
    })
}

/// A text read's key values by its literal template: the template is lexed once per
/// table key, as a prepared statement's text is, and each text of it gives its own
/// literals for the template's `?`s. `None` when the text has no template or its
/// template's shape can't stand for it: the text is then lexed itself. A template's
/// shape is kept only when, for the text it was first seen with, it gives what the text
/// itself gives (a `-` before a number, a literal after a character set's name, are read
/// otherwise as `?`): what the lexer makes of a template does not depend on the values
/// its literals have, only on their kinds, which are part of the template.
fn text_rows(key: &TableKey, t: &TableRef, sql: &[u8]) -> Option<Option<Vec<Canon>>> {
    let template = literal_template(sql)?;
    let literal = |v: &Value| match v {
        Value::Param(i) => template
            .literals
            .get(*i)
            .map(|(kind, span)| keys::literal(*kind, &sql[span.clone()])),
        other => Some(other.clone()),
    };
    let shape = key.texts.get_or_work_out(&template.key, || {
        let by_template = shape_of(key, t, template.text());
        let itself = shape_of(key, t, sql);
        let read_alike = match (&by_template.values, &itself.values) {
            (None, None) => true,
            (Some(values), Some(own)) => {
                values
                    .iter()
                    .map(literal)
                    .collect::<Option<Vec<_>>>()
                    .as_ref()
                    == Some(own)
            }
            _ => false,
        };
        read_alike.then(|| Arc::new(by_template))
    })?;
    let Some(values) = shape.values.as_ref() else {
        return Some(None);
    };
    let keys = values
        .iter()
        .map(|v| canon::canonical(key.key_type, &literal(v)?, None))
        .collect::<Option<Vec<_>>>();
    Some(keys)
}

fn shape_of(key: &TableKey, t: &TableRef, sql: &[u8]) -> Shape {
    let values = match key_values(sql, Some(&t.schema), &key.column_of(t)) {
        (Keys::Values(values), false) => Some(values),
        _ => None,
    };
    Shape {
        values,
        conflicts: key.other_unique && conflicts_decide(sql),
    }
}

/// `REPLACE` and `INSERT ... ON DUPLICATE KEY UPDATE` change the rows another unique key
/// collides with.
fn conflicts_decide(sql: &[u8]) -> bool {
    let mut lex = Lexer::new(sql);
    let mut first = true;
    while let Some(t) = code_token(&mut lex) {
        if (first && is_one_of(sql, &t, &["REPLACE"])) || is_one_of(sql, &t, &["DUPLICATE"]) {
            return true;
        }
        first = false;
    }
    false
}

/// A column of a unique index: index, column, ordinal position, data type, column type,
/// character set.
type UniqueColumn = (String, String, usize, String, String, Option<String>);

#[derive(serde::Deserialize)]
struct Described {
    /// Schemas and tables whose names are the learnt one but for case: statements and
    /// row events are matched by lowercase names, so two such tables (or a table whose
    /// name is not all lowercase) could lend one its key's position: no key then.
    namesakes: u64,
    columns: usize,
    keys: Option<Vec<UniqueColumn>>,
    triggers: u64,
}

fn parse(json: &[u8]) -> Option<TableKey> {
    let d: Described = serde_json::from_slice(json).ok()?;
    if d.namesakes != 1 {
        return None;
    }
    let keys = d.keys.unwrap_or_default();
    let primary: Vec<_> = keys.iter().filter(|k| k.0 == "PRIMARY").collect();
    let [(_, column, ordinal, data_type, column_type, charset)] = primary[..] else {
        return None;
    };
    let key_type = match data_type.as_str() {
        "tinyint" | "smallint" | "mediumint" | "int" | "bigint" => KeyType::Integer,
        "char" | "varchar"
            if charset
                .as_deref()
                .is_some_and(|c| ASCII_CHARSETS.contains(&c)) =>
        {
            KeyType::Ci
        }
        _ => return None,
    };
    Some(TableKey {
        column: column.clone(),
        position: ordinal.checked_sub(1)?,
        key_type,
        signed: !column_type.contains("unsigned"),
        columns: d.columns,
        triggers: d.triggers > 0,
        other_unique: keys.len() > 1,
        prepared: Shapes::default(),
        texts: Shapes::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_single_column_primary_key_of_integers_or_ascii_strings() {
        let key = parse(
            br#"{"namesakes": 1, "columns": 4, "keys": [["PRIMARY", "id", 1, "bigint", "bigint(20) unsigned", null]], "triggers": 0}"#,
        )
        .unwrap();
        assert_eq!(
            (key.column.as_str(), key.position, key.key_type, key.signed),
            ("id", 0, KeyType::Integer, false)
        );
        assert!(!key.other_unique && !key.triggers);
        assert!(key.matches_map(4, Some(8)));
        assert!(!key.matches_map(5, Some(8)), "altered since");
        assert!(!key.matches_map(4, Some(15)));
        assert_eq!(
            key.image_value(&ColumnValue::Int {
                raw: u64::MAX,
                width: 8
            }),
            Some(Canon::Int(u64::MAX as i128))
        );

        let key = parse(
            br#"{"namesakes": 1, "columns": 2, "keys": [["PRIMARY", "name", 2, "varchar", "varchar(20)", "utf8mb4"], ["u", "x", 1, "int", "int(11)", null]], "triggers": 1}"#,
        )
        .unwrap();
        assert_eq!((key.position, key.key_type), (1, KeyType::Ci));
        assert!(key.other_unique && key.triggers);
        assert_eq!(
            key.image_value(&ColumnValue::Bytes(b"Ab ".to_vec())),
            Some(Canon::Bytes(b"ab".to_vec()))
        );
    }

    fn int_key(triggers: bool, other_unique: bool) -> TableKey {
        TableKey {
            column: "id".into(),
            position: 0,
            key_type: KeyType::Integer,
            signed: true,
            columns: 3,
            triggers,
            other_unique,
            prepared: Shapes::default(),
            texts: Shapes::default(),
        }
    }

    /// A text read found by its template gives what lexing the text itself gives, for
    /// every text, whichever text of a template came first.
    #[test]
    fn text_reads_by_template_read_as_the_texts_themselves() {
        let t = TableRef {
            schema: "db".into(),
            table: "t".into(),
        };
        let itself = |key: &TableKey, sql: &str| {
            let shape = shape_of(key, &t, sql.as_bytes());
            let values = shape.values?;
            values
                .iter()
                .map(|v| canon::canonical(key.key_type, v, None))
                .collect::<Option<Vec<_>>>()
        };
        let templates = [
            "SELECT c FROM t WHERE id = {a}",
            "SELECT c FROM t WHERE id={a} ",
            "SELECT c FROM t WHERE id IN ({a}, {b}, 7)",
            "SELECT c FROM t WHERE id = '{a}'",
            "SELECT c FROM t WHERE id = -{a}",
            "SELECT c FROM t WHERE id = +{a}",
            "SELECT c FROM t WHERE id = {a} + {b}",
            "SELECT c FROM t WHERE id BETWEEN {a} AND {b}",
            "SELECT c FROM t WHERE id = {a} OR id = {b}",
            "SELECT c FROM t WHERE id = {a} AND c = 'x{b}'",
            "SELECT c FROM t WHERE id = _utf8mb4'{a}'",
            "SELECT c FROM t WHERE id = {a} LIMIT {b}",
            "SELECT c FROM db.t WHERE t.id = {a}",
            "SELECT c FROM t WHERE id = 0x{a}",
            "SELECT c FROM t WHERE id = {a}.0",
            "SELECT c FROM t WHERE id = '{a}abc'",
            "SELECT c FROM t WHERE id = 'O''{a}'",
        ];
        let values = [("5", "6"), ("12", "0"), ("007", "99999999999999999999")];
        for key in [int_key(false, false), ci_key()] {
            for order in [[0, 1, 2], [2, 1, 0]] {
                let key = TableKey {
                    texts: Shapes::default(),
                    ..key.clone()
                };
                for template in templates {
                    for &i in &order {
                        let (a, b) = values[i];
                        let sql = template.replace("{a}", a).replace("{b}", b);
                        let found = rows_by_key(&key, &t, sql.as_bytes(), None, false);
                        assert_eq!(found.map(|r| r.keys), itself(&key, &sql), "{sql}");
                    }
                }
            }
        }
        // One template is lexed once for all its texts.
        let key = int_key(false, false);
        for id in 0..50 {
            let sql = format!("SELECT c FROM t WHERE id = {id}");
            let rows = rows_by_key(&key, &t, sql.as_bytes(), None, false).unwrap();
            assert_eq!(rows.keys, [Canon::Int(id)]);
        }
        assert_eq!(key.texts.0.lock().len(), 1);
        // A template whose `?` reads otherwise than its literal (a negative number) is
        // kept as one that can't stand for its texts, which are each read themselves.
        let negative = int_key(false, false);
        for id in [3, 4] {
            let sql = format!("SELECT c FROM t WHERE id = -{id}");
            let rows = rows_by_key(&negative, &t, sql.as_bytes(), None, false).unwrap();
            assert_eq!(rows.keys, [Canon::Int(-id)]);
        }
        let kept = negative.texts.0.lock();
        assert_eq!(kept.len(), 1);
        assert!(kept.values().all(Option::is_none));
    }

    fn ci_key() -> TableKey {
        TableKey {
            column: "id".into(),
            position: 0,
            key_type: KeyType::Ci,
            signed: false,
            columns: 3,
            triggers: false,
            other_unique: false,
            prepared: Shapes::default(),
            texts: Shapes::default(),
        }
    }

    #[test]
    fn reads_and_writes_by_key() {
        let t = TableRef {
            schema: "db".into(),
            table: "t".into(),
        };
        let by = |key: &TableKey, sql: &str, write: bool| {
            rows_by_key(key, &t, sql.as_bytes(), Some(&[Bound::Int(9)]), write).map(|r| r.keys)
        };
        let k = int_key(false, false);
        let ints = |v: &[i128]| Some(v.iter().map(|&i| Canon::Int(i)).collect::<Vec<_>>());
        assert_eq!(by(&k, "SELECT c FROM t WHERE id = 5", false), ints(&[5]));
        assert_eq!(
            by(&k, "SELECT c FROM t WHERE id IN (1, '2', ?)", false),
            ints(&[1, 2, 9])
        );
        assert_eq!(by(&k, "SELECT c FROM t WHERE id > 5", false), None);
        assert_eq!(by(&k, "SELECT c FROM t WHERE id = 5.5", false), None);
        assert_eq!(by(&k, "UPDATE t SET c = 1 WHERE id = ?", true), ints(&[9]));
        assert_eq!(
            by(&k, "UPDATE t SET id = 6 WHERE id = 5", true),
            None,
            "moves a row"
        );
        assert_eq!(by(&k, "DELETE FROM db.t WHERE id = 3", true), ints(&[3]));
        assert_eq!(
            by(&k, "INSERT INTO t (c, id) VALUES (1, 4), (2, 5)", true),
            ints(&[4, 5])
        );
        assert_eq!(
            by(&k, "INSERT INTO t (c) VALUES (1)", true),
            None,
            "generated"
        );
        assert_eq!(
            by(&k, "REPLACE INTO t (id, c) VALUES (4, 1)", true),
            ints(&[4])
        );
        let unique = int_key(false, true);
        assert_eq!(
            by(&unique, "REPLACE INTO t (id, c) VALUES (4, 1)", true),
            None
        );
        assert_eq!(
            by(
                &unique,
                "INSERT INTO t (id, c) VALUES (4, 1) ON DUPLICATE KEY UPDATE c = 2",
                true
            ),
            None
        );
        assert_eq!(
            by(&unique, "UPDATE t SET c = 1 WHERE id = 2", true),
            ints(&[2])
        );
        assert_eq!(
            by(
                &int_key(true, false),
                "UPDATE t SET c = 1 WHERE id = 2",
                true
            ),
            None
        );
        assert_eq!(
            by(&int_key(true, false), "SELECT c FROM t WHERE id = 2", false),
            ints(&[2])
        );
        // A prepared statement's text is lexed once; its bound values differ each time.
        let ps = b"UPDATE t SET c = 1 WHERE id = ?";
        let k = int_key(false, false);
        for (v, want) in [(Bound::Int(1), 1), (Bound::Int(2), 2)] {
            let rows = rows_by_key(&k, &t, ps, Some(&[v]), true).unwrap();
            assert_eq!(rows.keys, [Canon::Int(want)]);
        }
        assert_eq!(k.prepared.0.lock().len(), 1);
        assert!(may_change_keys(b"/* x */ alter table t add unique (c)"));
        assert!(!may_change_keys(b"UPDATE t SET c = 1"));
    }

    #[test]
    fn other_tables_have_no_key() {
        for json in [
            r#"{"namesakes": 1, "columns": 2, "keys": null, "triggers": 0}"#,
            r#"{"namesakes": 1, "columns": 2, "keys": [["PRIMARY", "a", 1, "int", "int", null], ["PRIMARY", "b", 2, "int", "int", null]], "triggers": 0}"#,
            r#"{"namesakes": 1, "columns": 2, "keys": [["PRIMARY", "a", 1, "varchar", "varchar(5)", "ucs2"]], "triggers": 0}"#,
            r#"{"namesakes": 1, "columns": 2, "keys": [["PRIMARY", "a", 1, "decimal", "decimal(5,0)", null]], "triggers": 0}"#,
            r#"{"namesakes": 1, "columns": 2, "keys": [["u", "a", 1, "int", "int", null]], "triggers": 0}"#,
            r#"{"namesakes": 2, "columns": 2, "keys": [["PRIMARY", "a", 1, "int", "int", null]], "triggers": 0}"#,
            "not json",
        ] {
            assert_eq!(parse(json.as_bytes()), None, "{json}");
        }
        let t = TableRef {
            schema: "db".into(),
            table: "it's".into(),
        };
        assert_eq!(TableKeys::query(&t), None);
        let keys = TableKeys::default();
        keys.learn(&t, None);
        assert_eq!(keys.get(&t), Some(None));
        keys.forget([&t]);
        assert_eq!(keys.get(&t), None);
    }
}
