//! Row images from a real MariaDB primary: the key column's values the reader reports
//! for inserts, updates (key kept and key changed), deletes and a multi-statement
//! transaction, with binlog_row_image FULL and MINIMAL, behind columns of every common
//! type, for an INT, a BIGINT UNSIGNED and a VARCHAR key.

use sluice::binlog::rows::{types, ColumnValue, RowImages};
use sluice::binlog::{BinlogConfig, Change};
use sluice::config::Secret;

use crate::binlog::{replication_account, Reader};
use crate::support::{fresh_database, shared_server};

const SCHEMA: &str = "binlog_rows";

/// Every column before the key: definition, a non-NULL value, and the type the table
/// map reports for it.
const COLUMNS: &[(&str, &str, u8)] = &[
    ("c_tiny TINYINT", "-1", types::TINY),
    ("c_small SMALLINT", "-32768", types::SHORT),
    ("c_medium MEDIUMINT", "-8388608", types::INT24),
    ("c_int INT", "-2147483648", types::LONG),
    (
        "c_big BIGINT UNSIGNED",
        "18446744073709551615",
        types::LONGLONG,
    ),
    ("c_float FLOAT", "1.5", types::FLOAT),
    ("c_double DOUBLE", "2.25", types::DOUBLE),
    (
        "c_dec DECIMAL(20,6)",
        "-12345678901234.123456",
        types::NEWDECIMAL,
    ),
    ("c_dec0 DECIMAL(65,30)", "1.5", types::NEWDECIMAL),
    ("c_date DATE", "'2024-02-29'", types::DATE),
    (
        "c_dt DATETIME(3)",
        "'2024-02-29 12:34:56.789'",
        types::DATETIME2,
    ),
    ("c_dt0 DATETIME", "'2024-02-29 12:34:56'", types::DATETIME2),
    (
        "c_ts TIMESTAMP(6) NULL",
        "'2024-02-29 12:34:56.123456'",
        types::TIMESTAMP2,
    ),
    ("c_time TIME(2)", "'-838:59:59.99'", types::TIME2),
    ("c_year YEAR", "2024", types::YEAR),
    ("c_char CHAR(10)", "'ab  '", types::STRING),
    ("c_char_long CHAR(100)", "'long'", types::STRING),
    ("c_binary BINARY(4)", "'b'", types::STRING),
    ("c_vc VARCHAR(10)", "'varchar'", types::VARCHAR),
    ("c_vc300 VARCHAR(300)", "REPEAT('v', 300)", types::VARCHAR),
    ("c_bit BIT(13)", "b'1010101010101'", types::BIT),
    ("c_bit1 BIT(1)", "b'1'", types::BIT),
    ("c_enum ENUM('a','b','c')", "'b'", types::ENUM),
    ("c_set SET('x','y','z')", "'x,z'", types::SET),
    ("c_text TEXT", "REPEAT('t', 1000)", types::BLOB),
    ("c_blob BLOB", "REPEAT(x'00ff', 600)", types::BLOB),
    ("c_mblob MEDIUMBLOB", "'m'", types::BLOB),
    ("c_json JSON", "'{\"a\": [1, 2]}'", types::BLOB),
    ("c_point POINT", "POINT(1, 2)", types::GEOMETRY),
    (
        "c_uuid UUID",
        "'123e4567-e89b-12d3-a456-426655440000'",
        types::STRING,
    ),
    ("c_inet6 INET6", "'::1'", types::STRING),
    (
        "c_vc_z VARCHAR(50) COMPRESSED",
        "'compressed'",
        types::VARCHAR_COMPRESSED,
    ),
    (
        "c_blob_z BLOB COMPRESSED",
        "REPEAT('z', 100)",
        types::BLOB_COMPRESSED,
    ),
];

/// A key as the test writes it and expects it back.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    Int(i128),
    Str(Vec<u8>),
}

/// A table with its key after [`COLUMNS`], and six keys, as SQL and as read back.
struct Keyed {
    table: &'static str,
    definition: &'static str,
    key_type: u8,
    signed: bool,
    keys: [(&'static str, Key); 6],
}

fn keyed_tables() -> Vec<Keyed> {
    let int = |v: i128| Key::Int(v);
    let text = |v: &str| Key::Str(v.as_bytes().to_vec());
    vec![
        Keyed {
            table: "by_int",
            definition: "id INT PRIMARY KEY",
            key_type: types::LONG,
            signed: true,
            keys: [
                ("-2147483648", int(-2_147_483_648)),
                ("-1", int(-1)),
                ("7", int(7)),
                ("2147483647", int(2_147_483_647)),
                ("1000", int(1000)),
                ("0", int(0)),
            ],
        },
        Keyed {
            table: "by_bigint",
            definition: "id BIGINT UNSIGNED PRIMARY KEY",
            key_type: types::LONGLONG,
            signed: false,
            keys: [
                ("18446744073709551615", int(u64::MAX.into())),
                ("18446744073709551614", int((u64::MAX - 1).into())),
                ("9223372036854775808", int(1 << 63)),
                ("0", int(0)),
                ("18446744073709551613", int((u64::MAX - 2).into())),
                ("1", int(1)),
            ],
        },
        Keyed {
            table: "by_varchar",
            // utf8mb4: up to 400 bytes, a two-byte length in images.
            definition: "k VARCHAR(100) PRIMARY KEY",
            key_type: types::VARCHAR,
            signed: false,
            keys: [
                ("'alpha'", text("alpha")),
                // Whatever the client's character set: hex of the UTF-8 bytes.
                ("_utf8mb4 x'62c3a9746120'", text("b\u{e9}ta ")),
                ("''", text("")),
                ("REPEAT('w', 100)", text(&"w".repeat(100))),
                ("_utf8mb4 x'f09f9880'", text("\u{1f600}")),
                ("'x'", text("x")),
            ],
        },
    ]
}

fn key_name(t: &Keyed) -> &str {
    t.definition.split(' ').next().unwrap_or_default()
}

/// A full row: every column's value, then the key.
fn row(key: &str) -> String {
    let values: Vec<&str> = COLUMNS.iter().map(|c| c.1).collect();
    format!("({}, {key})", values.join(", "))
}

/// Statements and the keys (by index into `keys`) their images hold at the key. The
/// first five log FULL images, the others MINIMAL ones: a before image holds the key
/// only, an after image the columns set, an insert's image the columns given.
fn steps(t: &Keyed) -> Vec<(String, Vec<usize>)> {
    let (table, key) = (t.table, key_name(t));
    let k = |i: usize| t.keys[i].0;
    let minimal = "SET SESSION binlog_row_image = MINIMAL;";
    vec![
        (
            format!(
                "BEGIN; INSERT INTO {table} VALUES {}, {}, {}; \
                 INSERT INTO {table} ({key}) VALUES ({}); COMMIT",
                row(k(0)),
                row(k(1)),
                row(k(2)),
                k(3)
            ),
            vec![0, 1, 2, 3],
        ),
        (
            format!(
                "UPDATE {table} SET c_vc = 'changed' WHERE {key} IN ({}, {})",
                k(0),
                k(1)
            ),
            vec![0, 0, 1, 1],
        ),
        (
            format!("UPDATE {table} SET {key} = {} WHERE {key} = {}", k(4), k(2)),
            vec![2, 4],
        ),
        (
            format!("DELETE FROM {table} WHERE {key} IN ({}, {})", k(0), k(3)),
            vec![0, 3],
        ),
        (
            format!(
                "BEGIN; INSERT INTO {table} VALUES {}; \
                 UPDATE {table} SET {key} = {} WHERE {key} = {}; \
                 DELETE FROM {table} WHERE {key} = {}; COMMIT",
                row(k(5)),
                k(2),
                k(5),
                k(1)
            ),
            vec![5, 5, 2, 1],
        ),
        (
            format!("{minimal} INSERT INTO {table} VALUES {}", row(k(0))),
            vec![0],
        ),
        // The after image holds c_vc only.
        (
            format!(
                "{minimal} UPDATE {table} SET c_vc = 'm' WHERE {key} = {}",
                k(0)
            ),
            vec![0],
        ),
        (
            format!(
                "{minimal} UPDATE {table} SET {key} = {} WHERE {key} = {}",
                k(3),
                k(0)
            ),
            vec![0, 3],
        ),
        (
            format!("{minimal} DELETE FROM {table} WHERE {key} = {}", k(3)),
            vec![3],
        ),
        (
            format!("{minimal} INSERT INTO {table} ({key}) VALUES ({})", k(1)),
            vec![1],
        ),
        (
            format!(
                "{minimal} DELETE FROM {table} WHERE {key} IN ({}, {}, {})",
                k(1),
                k(2),
                k(4)
            ),
            vec![1, 2, 4],
        ),
    ]
}

/// The images of `table` in a batch's changes.
fn images_of<'a>(changes: &'a [Change], table: &str) -> &'a RowImages {
    let found = changes.iter().find_map(|c| match c {
        Change::Rows { table: t, rows, .. } if t == table => Some(rows),
        _ => None,
    });
    match found {
        Some(Some(rows)) => rows,
        other => panic!("no images of {table} in {changes:?}: {other:?}"),
    }
}

fn as_key(value: &ColumnValue, signed: bool) -> Key {
    match value {
        ColumnValue::Bytes(b) => Key::Str(b.clone()),
        other => Key::Int(other.integer(signed).unwrap_or_else(|| panic!("{other:?}"))),
    }
}

#[test]
fn key_values_of_row_images_are_the_rows_written() {
    let db = shared_server();
    fresh_database(db, SCHEMA);
    replication_account(db, "binlog_rows", "binlog_rows_pw");
    let columns: Vec<&str> = COLUMNS.iter().map(|c| c.0).collect();
    let tables = keyed_tables();
    for t in &tables {
        db.execute(&format!(
            "CREATE TABLE {SCHEMA}.{} ({}, {}) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
            t.table,
            columns.join(", "),
            t.definition
        ))
        .unwrap_or_else(|e| panic!("creating {}: {e:#}", t.table));
    }
    let mut cfg = BinlogConfig::new("binlog_rows", Secret("binlog_rows_pw".into()));
    cfg.server_id = 4_000_000_005;
    let reader = Reader::start(db, cfg);
    reader.expect_up();

    let key = COLUMNS.len();
    for t in &tables {
        for (i, (sql, expected)) in steps(t).into_iter().enumerate() {
            db.execute(&format!("USE {SCHEMA}; {sql};"))
                .unwrap_or_else(|e| panic!("{sql}: {e:#}"));
            let (_, batch) = reader.next_batch(SCHEMA);
            let images = images_of(&batch.changes, t.table);
            assert_eq!(images.column_count(), key + 1, "{sql}");
            assert_eq!(images.column_type(key), Some(t.key_type), "{sql}");
            let values = images
                .values(key)
                .unwrap_or_else(|| panic!("{sql}: no key values"));
            // Only the FULL steps and the MINIMAL insert of a whole row log c_tiny.
            let whole = i <= 5;
            assert_eq!(
                images.values(0).is_some(),
                whole,
                "{sql}: c_tiny in the images"
            );
            let mut got: Vec<Key> = values.iter().map(|v| as_key(v, t.signed)).collect();
            let mut want: Vec<Key> = expected.iter().map(|&k| t.keys[k].1.clone()).collect();
            got.sort();
            want.sort();
            assert_eq!(got, want, "{}: {sql}", t.table);
            if i == 0 {
                check_columns(images);
            }
        }
    }
    reader.stop();
}

/// What the first step's images hold in the other columns: three full rows, then one
/// of NULLs.
fn check_columns(images: &RowImages) {
    let types: Vec<_> = (0..COLUMNS.len()).map(|i| images.column_type(i)).collect();
    let expected: Vec<_> = COLUMNS.iter().map(|c| Some(c.2)).collect();
    assert_eq!(types, expected);
    for (i, (definition, _, _)) in COLUMNS.iter().enumerate() {
        let values = images
            .values(i)
            .unwrap_or_else(|| panic!("{definition}: no values"));
        assert_eq!(values.len(), 4, "{definition}");
        assert_eq!(values[3], ColumnValue::Null, "{definition}");
    }
    let first = |name: &str| {
        let at = COLUMNS
            .iter()
            .position(|c| c.0.starts_with(name))
            .expect("a column");
        images.values(at).expect("values")[0].clone()
    };
    let int = |name: &str, signed: bool| first(name).integer(signed);
    assert_eq!(int("c_tiny", true), Some(-1));
    assert_eq!(int("c_small", true), Some(-32768));
    assert_eq!(int("c_medium", true), Some(-8_388_608));
    assert_eq!(int("c_medium", false), Some(8_388_608));
    assert_eq!(int("c_int", true), Some(-2_147_483_648));
    assert_eq!(int("c_big", false), Some(u64::MAX.into()));
    // A CHAR's trailing spaces are not in images, nor a BINARY's zero padding.
    assert_eq!(first("c_char "), ColumnValue::Bytes(b"ab".to_vec()));
    assert_eq!(first("c_char_long"), ColumnValue::Bytes(b"long".to_vec()));
    assert_eq!(first("c_binary"), ColumnValue::Bytes(b"b".to_vec()));
    assert_eq!(first("c_vc "), ColumnValue::Bytes(b"varchar".to_vec()));
    assert_eq!(first("c_vc300"), ColumnValue::Bytes(vec![b'v'; 300]));
    for other in ["c_year", "c_enum", "c_bit ", "c_dec ", "c_json", "c_vc_z"] {
        assert_eq!(first(other), ColumnValue::Other, "{other}");
    }
}

#[test]
fn minimal_inserts_hold_a_generated_key_but_not_a_default_one() {
    let db = shared_server();
    let schema = "binlog_rows_minimal";
    fresh_database(db, schema);
    replication_account(db, "binlog_rows_min", "binlog_rows_min_pw");
    db.execute(&format!(
        "USE {schema};\n\
         CREATE TABLE generated (v VARCHAR(10), d INT DEFAULT 5, \
           id INT AUTO_INCREMENT PRIMARY KEY);\n\
         CREATE TABLE defaulted (v VARCHAR(10), k INT NOT NULL DEFAULT 7 PRIMARY KEY);"
    ))
    .expect("creating the tables");
    let mut cfg = BinlogConfig::new("binlog_rows_min", Secret("binlog_rows_min_pw".into()));
    cfg.server_id = 4_000_000_006;
    let reader = Reader::start(db, cfg);
    reader.expect_up();
    let minimal = "SET SESSION binlog_row_image = MINIMAL";

    db.execute(&format!(
        "USE {schema}; {minimal}; INSERT INTO generated (v) VALUES ('a'), ('b')"
    ))
    .expect("inserting");
    let (_, batch) = reader.next_batch(schema);
    let images = images_of(&batch.changes, "generated");
    let ids = images
        .values(2)
        .expect("the generated key is in the images");
    let ids: Vec<_> = ids.iter().map(|v| v.integer(true)).collect();
    assert_eq!(ids, [Some(1), Some(2)]);
    assert_eq!(images.values(1), None, "the defaulted column is not");

    db.execute(&format!(
        "USE {schema}; {minimal}; INSERT INTO defaulted (v) VALUES ('a')"
    ))
    .expect("inserting");
    let (_, batch) = reader.next_batch(schema);
    let images = images_of(&batch.changes, "defaulted");
    assert_eq!(
        images.values(1),
        None,
        "the key took its default: not in the image"
    );
    assert_eq!(
        images.values(0),
        Some(vec![ColumnValue::Bytes(b"a".to_vec())])
    );
    reader.stop();
}
