//! Tests of the event decoder, with events built the way a server writes them.

use super::*;

mod images;

/// Builds events the way a server writes them.
struct Builder {
    crc32: bool,
}

impl Builder {
    fn event(&self, kind: u8, timestamp: u32, flags: u16, body: &[u8]) -> Vec<u8> {
        let size = HEADER_LEN + body.len() + if self.crc32 { CHECKSUM_LEN } else { 0 };
        let mut e = Vec::with_capacity(size);
        e.extend_from_slice(&timestamp.to_le_bytes());
        e.push(kind);
        e.extend_from_slice(&1u32.to_le_bytes());
        e.extend_from_slice(&(size as u32).to_le_bytes());
        e.extend_from_slice(&1000u32.to_le_bytes());
        e.extend_from_slice(&flags.to_le_bytes());
        e.extend_from_slice(body);
        if self.crc32 {
            let c = crc32fast::hash(&e);
            e.extend_from_slice(&c.to_le_bytes());
        }
        e
    }

    /// A MariaDB 10.11 format description; `table_map_post` and `rows_post` let
    /// tests mimic old servers' 4-byte table ids.
    fn fde_with(&self, version: &str, table_map_post: u8, rows_post: u8) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&4u16.to_le_bytes());
        let mut v = [0u8; 50];
        v[..version.len()].copy_from_slice(version.as_bytes());
        body.extend_from_slice(&v);
        body.extend_from_slice(&0u32.to_le_bytes());
        body.push(HEADER_LEN as u8);
        let mut post = vec![0u8; 171];
        post[usize::from(kind::QUERY) - 1] = 13;
        post[usize::from(kind::ROTATE) - 1] = 8;
        post[usize::from(kind::TABLE_MAP) - 1] = table_map_post;
        for k in kind::WRITE_ROWS_V1..=kind::DELETE_ROWS_V1 {
            post[usize::from(k) - 1] = rows_post;
        }
        for k in kind::WRITE_ROWS_V2..=kind::DELETE_ROWS_V2 {
            post[usize::from(k) - 1] = 10;
        }
        // As MySQL 8 has it, for tests of its events.
        post[usize::from(kind::PARTIAL_UPDATE_ROWS) - 1] = 10;
        post[usize::from(kind::GTID) - 1] = 19;
        post[usize::from(kind::QUERY_COMPRESSED) - 1] = 13;
        for k in kind::WRITE_ROWS_COMPRESSED_FIRST..=kind::WRITE_ROWS_COMPRESSED_LAST {
            post[usize::from(k) - 1] = if k < 169 { 10 } else { 8 };
        }
        body.extend_from_slice(&post);
        body.push(if self.crc32 {
            CHECKSUM_CRC32
        } else {
            CHECKSUM_OFF
        });
        // The format description always has the 4-byte slot; built by hand here
        // because it is filled even when the algorithm is off.
        let size = HEADER_LEN + body.len() + CHECKSUM_LEN;
        let mut e = Vec::new();
        e.extend_from_slice(&0u32.to_le_bytes());
        e.push(kind::FORMAT_DESCRIPTION);
        e.extend_from_slice(&1u32.to_le_bytes());
        e.extend_from_slice(&(size as u32).to_le_bytes());
        e.extend_from_slice(&0u32.to_le_bytes());
        e.extend_from_slice(&0u16.to_le_bytes());
        e.extend_from_slice(&body);
        let c = if self.crc32 {
            crc32fast::hash(&e)
        } else {
            0xdead_beef
        };
        e.extend_from_slice(&c.to_le_bytes());
        e
    }

    fn fde(&self) -> Vec<u8> {
        self.fde_with("10.11.19-MariaDB-log", 8, 8)
    }

    /// A map of one INT column.
    fn table_map(&self, id: u64, schema: &str, table: &str) -> Vec<u8> {
        self.table_map_of(id, schema, table, &[1, 3, 0, 0])
    }

    /// A map with this column part (count, types, metadata, null bitmap).
    fn table_map_of(&self, id: u64, schema: &str, table: &str, columns: &[u8]) -> Vec<u8> {
        let mut b = id.to_le_bytes()[..6].to_vec();
        b.extend_from_slice(&1u16.to_le_bytes());
        b.push(schema.len() as u8);
        b.extend_from_slice(schema.as_bytes());
        b.push(0);
        b.push(table.len() as u8);
        b.extend_from_slice(table.as_bytes());
        b.push(0);
        b.extend_from_slice(columns);
        self.event(kind::TABLE_MAP, 100, 0, &b)
    }

    /// One row of the INT 5 (for updates, a before image that does not parse).
    fn rows(&self, kind: u8, id: u64, stmt_end: bool) -> Vec<u8> {
        self.rows_of(kind, id, stmt_end, &[], &[1, 0xff, 0, 5, 0, 0, 0])
    }

    /// A rows event with this body (from the column count on) and, in v2 events, this
    /// extra data.
    fn rows_of(&self, kind: u8, id: u64, stmt_end: bool, extra: &[u8], body: &[u8]) -> Vec<u8> {
        let mut b = id.to_le_bytes()[..6].to_vec();
        b.extend_from_slice(&u16::from(stmt_end).to_le_bytes());
        if (kind::WRITE_ROWS_V2..=kind::DELETE_ROWS_V2).contains(&kind) {
            b.extend_from_slice(&(extra.len() as u16 + 2).to_le_bytes());
            b.extend_from_slice(extra);
        }
        b.extend_from_slice(body);
        self.event(kind, 101, 0, &b)
    }

    fn query(&self, schema: &str, sql: &str) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&7u32.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.push(schema.len() as u8);
        b.extend_from_slice(&0u16.to_le_bytes());
        let status = [0u8, 0, 0, 0, 0]; // Q_FLAGS2_CODE and its value
        b.extend_from_slice(&(status.len() as u16).to_le_bytes());
        b.extend_from_slice(&status);
        b.extend_from_slice(schema.as_bytes());
        b.push(0);
        b.extend_from_slice(sql.as_bytes());
        self.event(kind::QUERY, 102, 0, &b)
    }

    fn xid(&self) -> Vec<u8> {
        self.event(kind::XID, 103, 0, &42u64.to_le_bytes())
    }

    fn gtid(&self, seq: u64, domain: u32, flags: u8) -> Vec<u8> {
        let mut b = seq.to_le_bytes().to_vec();
        b.extend_from_slice(&domain.to_le_bytes());
        b.push(flags);
        b.extend_from_slice(&[0; 6]);
        self.event(kind::GTID, 99, 0, &b)
    }

    fn rotate(&self, file: &str, pos: u64, flags: u16) -> Vec<u8> {
        let mut b = pos.to_le_bytes().to_vec();
        b.extend_from_slice(file.as_bytes());
        self.event(kind::ROTATE, 0, flags, &b)
    }
}

const CRC: Builder = Builder { crc32: true };
const PLAIN: Builder = Builder { crc32: false };

/// A table's rows changed, images aside.
fn rows(schema: &str, table: &str) -> Change {
    Change::Rows {
        schema: schema.into(),
        table: table.into(),
        rows: None,
    }
}

/// The changes with their row images left out, for tests about which tables changed.
fn names(changes: Vec<Change>) -> Vec<Change> {
    changes
        .into_iter()
        .map(|c| match c {
            Change::Rows { schema, table, .. } => Change::Rows {
                schema,
                table,
                rows: None,
            },
            other => other,
        })
        .collect()
}

fn decoder(b: &Builder) -> Decoder {
    let mut d = Decoder::new();
    d.feed(&b.rotate("mariadb-bin.000001", 4, ARTIFICIAL_F))
        .unwrap();
    d.feed(&b.fde()).unwrap();
    d
}

/// Feeds events, returning every batch delivered, row images left out.
fn feed_all(d: &mut Decoder, events: &[Vec<u8>]) -> Vec<Batch> {
    events
        .iter()
        .filter_map(|e| d.feed(e).unwrap().1.batch)
        .map(|b| Batch {
            changes: names(b.changes),
            ..b
        })
        .collect()
}

#[test]
fn crc32_matches_the_standard_check_value() {
    assert_eq!(crc32fast::hash(b"123456789"), 0xcbf4_3926);
    assert_eq!(crc32fast::hash(b""), 0);
}

#[test]
fn transaction_with_v1_rows_is_one_batch() {
    for b in [CRC, PLAIN] {
        let mut d = decoder(&b);
        let batches = feed_all(
            &mut d,
            &[
                b.gtid(7, 0, 0),
                b.table_map(70, "shop", "orders"),
                b.rows(kind::WRITE_ROWS_V1, 70, true),
                b.table_map(71, "shop", "stock"),
                b.rows(kind::UPDATE_ROWS_V1, 71, true),
                b.table_map(70, "shop", "orders"),
                b.rows(kind::DELETE_ROWS_V1, 70, true),
                b.xid(),
            ],
        );
        assert_eq!(
            batches,
            vec![Batch {
                changes: vec![rows("shop", "orders"), rows("shop", "stock")],
                event_time: 103,
                gtid: Some("0-1-7".into()),
            }],
            "checksum {}",
            b.crc32
        );
    }
}

#[test]
fn v2_rows_and_begin_commit_boundaries() {
    for b in [CRC, PLAIN] {
        let mut d = decoder(&b);
        let batches = feed_all(
            &mut d,
            &[
                b.query("", "BEGIN"),
                b.table_map(5, "a", "t1"),
                b.table_map(6, "b", "t2"),
                b.rows(kind::WRITE_ROWS_V2, 5, false),
                b.rows(kind::UPDATE_ROWS_V2, 6, true),
                b.table_map(6, "b", "t2"),
                b.rows(kind::DELETE_ROWS_V2, 6, true),
                b.query("", "COMMIT"),
            ],
        );
        assert_eq!(batches.len(), 1);
        assert_eq!(batches[0].changes, vec![rows("a", "t1"), rows("b", "t2")]);
        assert_eq!(batches[0].gtid, None);
    }
}

#[test]
fn rows_outside_a_transaction_are_delivered_at_statement_end() {
    let b = CRC;
    let mut d = decoder(&b);
    assert_eq!(
        d.feed(&b.table_map(1, "s", "myisam")).unwrap().1.batch,
        None
    );
    assert_eq!(
        d.feed(&b.rows(kind::WRITE_ROWS_V1, 1, false))
            .unwrap()
            .1
            .batch,
        None
    );
    let batch = d
        .feed(&b.rows(kind::WRITE_ROWS_V1, 1, true))
        .unwrap()
        .1
        .batch
        .unwrap();
    assert_eq!(names(batch.changes), vec![rows("s", "myisam")]);
}

#[test]
fn an_insert_id_variable_is_reported_and_last_insert_id_is_not() {
    let b = CRC;
    let mut d = decoder(&b);
    let mut body = vec![2u8];
    body.extend_from_slice(&1001u64.to_le_bytes());
    let (_, e) = d.feed(&b.event(kind::INTVAR, 100, 0, &body)).unwrap();
    assert_eq!((e.insert_id, e.batch), (Some(1001), None));
    body[0] = 1;
    let (_, e) = d.feed(&b.event(kind::INTVAR, 100, 0, &body)).unwrap();
    assert_eq!(e.insert_id, None);
    assert!(d.feed(&b.event(kind::INTVAR, 100, 0, &[2, 1])).is_err());
}

/// Under row-based logging, the statement behind row events names the connection when
/// Sluice sent it (`binlog/origin.rs`); any other statement names none.
#[test]
fn annotations_name_the_connection_sluice_marked() {
    let b = CRC;
    let mut d = decoder(&b);
    d.feed(&b.gtid(9, 2, 0)).unwrap();
    let marked = b.event(
        kind::ANNOTATE_ROWS,
        100,
        0,
        b"/*sluice:4321*/ INSERT INTO t VALUES (1)",
    );
    let (_, a) = d.feed(&marked).unwrap();
    assert_eq!((a.thread, a.batch), (Some(4321), None));
    let plain = b.event(kind::ANNOTATE_ROWS, 100, 0, b"INSERT INTO t VALUES (1)");
    assert_eq!(d.feed(&plain).unwrap().1.thread, None);
}

#[test]
fn standalone_gtid_delivers_the_ddl_at_once() {
    let b = CRC;
    let mut d = decoder(&b);
    let (_, g) = d.feed(&b.gtid(9, 2, GTID_STANDALONE)).unwrap();
    assert_eq!((g.gtid.as_deref(), g.thread), (Some("2-1-9"), None));
    let (_, q) = d
        .feed(&b.query("shop", "ALTER TABLE orders ADD c INT"))
        .unwrap();
    // The connection that ran it, as the statement event names it.
    assert_eq!(q.thread, Some(7));
    let batch = q.batch.unwrap();
    assert_eq!(
        batch,
        Batch {
            changes: vec![Change::Statement {
                schema: Some("shop".into()),
                sql: "ALTER TABLE orders ADD c INT".into()
            }],
            event_time: 102,
            gtid: Some("2-1-9".into()),
        }
    );
}

#[test]
fn statements_inside_a_transaction_wait_for_its_end() {
    let b = CRC;
    let mut d = decoder(&b);
    let batches = feed_all(
        &mut d,
        &[
            b.gtid(1, 0, 0),
            b.query("", "INSERT INTO t VALUES (1)"),
            b.query("", "SAVEPOINT `a`"),
            b.query("", "ROLLBACK TO `a`"),
            b.xid(),
        ],
    );
    assert_eq!(
        batches
            .iter()
            .map(|b| b.changes.clone())
            .collect::<Vec<_>>(),
        vec![vec![Change::Statement {
            schema: None,
            sql: "INSERT INTO t VALUES (1)".into()
        }]]
    );
}

#[test]
fn rollback_delivers_non_transactional_changes_and_empty_groups_nothing() {
    let b = CRC;
    let mut d = decoder(&b);
    let batches = feed_all(
        &mut d,
        &[
            b.query("", "BEGIN"),
            b.table_map(3, "s", "m"),
            b.rows(kind::WRITE_ROWS_V1, 3, true),
            b.query("", "ROLLBACK"),
            b.gtid(2, 0, 0),
            b.xid(),
        ],
    );
    assert_eq!(batches.len(), 1);
    assert_eq!(batches[0].changes, vec![rows("s", "m")]);
}

#[test]
fn xa_transactions_end_at_prepare_and_commit_is_reported() {
    let b = CRC;
    let mut d = decoder(&b);
    let batches = feed_all(
        &mut d,
        &[
            b.gtid(3, 0, 0),
            b.query("", "XA START X'31',X'',1"),
            b.table_map(3, "s", "t"),
            b.rows(kind::WRITE_ROWS_V1, 3, true),
            b.query("", "XA END X'31',X'',1"),
            b.event(kind::XA_PREPARE, 104, 0, &[0; 10]),
            b.gtid(4, 0, 0),
            b.query("", "XA COMMIT X'31',X'',1"),
        ],
    );
    assert_eq!(batches.len(), 2);
    assert_eq!(batches[0].changes, vec![rows("s", "t")]);
    assert!(
        matches!(&batches[1].changes[..], [Change::Statement { sql, .. }] if sql.starts_with("XA COMMIT"))
    );
}

#[test]
fn four_byte_table_ids_of_old_servers() {
    let mut tm = 9u32.to_le_bytes().to_vec();
    tm.extend_from_slice(&0u16.to_le_bytes());
    tm.extend_from_slice(&[1, b'd', 0, 1, b't', 0, 1, 3, 0, 0]);
    // A 5.1 server writes no checksum: its format description has no algorithm byte.
    let plain = PLAIN;
    let mut d = Decoder::new();
    let mut fde = plain.fde_with("5.1.73-log", 6, 6);
    fde.truncate(fde.len() - 5);
    let size = fde.len() as u32;
    fde[9..13].copy_from_slice(&size.to_le_bytes());
    d.feed(&fde).unwrap();
    d.feed(&plain.event(kind::TABLE_MAP, 1, 0, &tm)).unwrap();
    let mut rows_ev = 9u32.to_le_bytes().to_vec();
    rows_ev.extend_from_slice(&STMT_END_F.to_le_bytes());
    rows_ev.extend_from_slice(&[1, 0xff, 0, 7, 0, 0, 0]);
    let batch = d
        .feed(&plain.event(kind::WRITE_ROWS_V1, 2, 0, &rows_ev))
        .unwrap()
        .1
        .batch
        .unwrap();
    assert_eq!(key_values(&batch.changes[0], 0), Some(vec![7]));
    assert_eq!(names(batch.changes), vec![rows("d", "t")]);
}

#[test]
fn six_byte_table_ids_above_four_billion() {
    let b = CRC;
    let mut d = decoder(&b);
    let id = (1u64 << 40) + 5;
    d.feed(&b.table_map(id, "s", "big")).unwrap();
    d.feed(&b.table_map(5, "s", "small")).unwrap();
    let batch = d
        .feed(&b.rows(kind::WRITE_ROWS_V1, id, true))
        .unwrap()
        .1
        .batch
        .unwrap();
    // The written table first; the other, mapped but unwritten, counts as cascaded.
    assert_eq!(
        names(batch.changes),
        vec![rows("s", "big"), rows("s", "small")]
    );
}

#[test]
fn rows_for_an_unmapped_table_are_reported_as_unknown_once() {
    let b = CRC;
    let mut d = decoder(&b);
    let batches = feed_all(
        &mut d,
        &[
            b.gtid(1, 0, 0),
            b.rows(kind::WRITE_ROWS_V1, 77, true),
            b.rows(kind::WRITE_ROWS_V1, 78, true),
            b.xid(),
        ],
    );
    assert!(matches!(&batches[0].changes[..], [Change::Unknown { .. }]));
}

/// A delete cascading through a foreign key maps the child table but logs rows of the
/// parent only: the child counts as changed, whole.
#[test]
fn tables_mapped_but_not_written_are_changed_by_a_cascade() {
    let b = CRC;
    let mut d = decoder(&b);
    let batches = feed_all(
        &mut d,
        &[
            b.gtid(1, 0, 0),
            b.table_map(18, "fk", "parent"),
            b.table_map(22, "fk", "child"),
            b.rows(kind::DELETE_ROWS_V1, 18, true),
            b.xid(),
        ],
    );
    assert_eq!(
        batches[0].changes,
        [rows("fk", "parent"), rows("fk", "child")],
        "{batches:?}"
    );
}

#[test]
fn huge_statement_based_transactions_stay_bounded() {
    let b = CRC;
    let mut d = decoder(&b);
    d.feed(&b.gtid(1, 0, 0)).unwrap();
    for i in 0..MAX_STATEMENTS + 50 {
        let (_, out) = d
            .feed(&b.query("s", &format!("INSERT INTO t VALUES ({i})")))
            .unwrap();
        assert_eq!(out.batch, None);
    }
    let batch = d.feed(&b.xid()).unwrap().1.batch.unwrap();
    assert_eq!(batch.changes.len(), MAX_STATEMENTS + 1);
    assert!(matches!(batch.changes.last(), Some(Change::Unknown { .. })));
}

#[test]
fn rotate_reports_the_new_file() {
    for b in [CRC, PLAIN] {
        let mut d = decoder(&b);
        let (_, out) = d.feed(&b.rotate("mariadb-bin.000002", 4, 0)).unwrap();
        assert_eq!(out.rotate, Some(("mariadb-bin.000002".into(), 4)));
    }
}

#[test]
fn artificial_events_carry_a_checksum_or_not() {
    // Whatever the file's setting, a fake rotate is read right in both forms.
    for fake in [CRC, PLAIN] {
        let mut d = Decoder::new();
        let (_, out) = d
            .feed(&fake.rotate("mariadb-bin.000009", 1234, ARTIFICIAL_F))
            .unwrap();
        assert_eq!(out.rotate, Some(("mariadb-bin.000009".into(), 1234)));
    }
    let mut d = decoder(&PLAIN);
    let hb = CRC.event(kind::HEARTBEAT, 0, 0, b"mariadb-bin.000001");
    assert_eq!(d.feed(&hb).unwrap().1, Decoded::default());
}

#[test]
fn skipped_and_mariadb_specific_events() {
    let b = CRC;
    let mut d = decoder(&b);
    for kind in [
        kind::ANNOTATE_ROWS,
        kind::BINLOG_CHECKPOINT,
        kind::GTID_LIST,
        kind::STOP + 100,
        kind::HEARTBEAT,
    ] {
        let (h, out) = d.feed(&b.event(kind, 1, 0, b"whatever")).unwrap();
        assert_eq!(h.kind, kind);
        assert_eq!(out, Decoded::default());
    }
    let ignorable = b.event(kind::START_ENCRYPTION, 1, IGNORABLE_F, &[1; 17]);
    assert_eq!(d.feed(&ignorable).unwrap().1, Decoded::default());
    let encrypted = b.event(kind::START_ENCRYPTION, 1, 0, &[1; 17]);
    assert!(matches!(
        d.feed(&encrypted),
        Err(EventError::Unsupported(_))
    ));
}

#[test]
fn incidents_and_compressed_statements_are_unknown_changes() {
    let b = CRC;
    let mut d = decoder(&b);
    let batch = d
        .feed(&b.event(kind::INCIDENT, 5, 0, &[1, 0, 0]))
        .unwrap()
        .1
        .batch
        .unwrap();
    assert!(matches!(&batch.changes[..], [Change::Unknown { .. }]));
    let mut q = b.query("shop", "x");
    q[4] = kind::QUERY_COMPRESSED;
    let n = q.len() - CHECKSUM_LEN;
    let c = crc32fast::hash(&q[..n]);
    q[n..].copy_from_slice(&c.to_le_bytes());
    let batch = d.feed(&q).unwrap().1.batch.unwrap();
    assert!(matches!(
        &batch.changes[..],
        [Change::Unknown { schema: Some(s), .. }] if s == "shop"
    ));
}

#[test]
fn compressed_row_events_name_their_table() {
    let b = CRC;
    let mut d = decoder(&b);
    d.feed(&b.table_map(4, "s", "z")).unwrap();
    // Post-header of 10 bytes (per the format description): table id, flags, and
    // the extra-data length; the row images after it stay compressed.
    let mut body = 4u64.to_le_bytes()[..6].to_vec();
    body.extend_from_slice(&STMT_END_F.to_le_bytes());
    body.extend_from_slice(&2u16.to_le_bytes());
    body.extend_from_slice(&[0x81, 9, 0x78, 0x9c]);
    let batch = d
        .feed(&b.event(kind::WRITE_ROWS_COMPRESSED_FIRST, 1, 0, &body))
        .unwrap()
        .1
        .batch
        .unwrap();
    assert_eq!(names(batch.changes), vec![rows("s", "z")]);
}

#[test]
fn corrupted_checksum_is_an_error() {
    let b = CRC;
    let mut d = decoder(&b);
    let mut e = b.query("s", "DROP TABLE t");
    let at = e.len() - 6;
    e[at] ^= 1;
    assert_eq!(
        d.feed(&e).unwrap_err(),
        EventError::Checksum { kind: kind::QUERY }
    );
    let mut fde = b.fde();
    fde[30] ^= 1;
    assert!(matches!(
        Decoder::new().feed(&fde),
        Err(EventError::Checksum { .. })
    ));
}

#[test]
fn truncated_or_inconsistent_input_is_an_error_not_a_panic() {
    for b in [CRC, PLAIN] {
        let events = [
            b.fde(),
            b.rotate("f", 4, 0),
            b.table_map(1, "schema", "table"),
            b.rows(kind::WRITE_ROWS_V2, 1, true),
            b.rows(kind::WRITE_ROWS_V1, 1, true),
            b.query("schema", "BEGIN"),
            b.gtid(1, 1, 0),
            b.xid(),
        ];
        for e in &events {
            for cut in 0..e.len() {
                let mut d = decoder(&b);
                // As sent, with a size field that does not match.
                assert!(d.feed(&e[..cut]).is_err(), "cut {cut} of {e:?}");
                // With a size field that matches but a body too short.
                let mut short = e[..cut.max(HEADER_LEN)].to_vec();
                if short.len() >= HEADER_LEN {
                    let n = short.len() as u32;
                    short[9..13].copy_from_slice(&n.to_le_bytes());
                    if b.crc32 && short.len() >= HEADER_LEN + CHECKSUM_LEN {
                        let at = short.len() - CHECKSUM_LEN;
                        let c = crc32fast::hash(&short[..at]);
                        short[at..].copy_from_slice(&c.to_le_bytes());
                    }
                    let _ = decoder(&b).feed(&short);
                }
            }
        }
    }
}

#[test]
fn bad_format_descriptions_are_refused() {
    let b = CRC;
    let mut fde = b.fde();
    fde[HEADER_LEN] = 3;
    let n = fde.len() - CHECKSUM_LEN;
    let c = crc32fast::hash(&fde[..n]);
    fde[n..].copy_from_slice(&c.to_le_bytes());
    assert!(matches!(
        Decoder::new().feed(&fde),
        Err(EventError::Unsupported(_))
    ));
}

#[test]
fn statement_classification() {
    assert_eq!(classify("BEGIN"), Boundary::Begin);
    assert_eq!(classify("commit"), Boundary::End);
    assert_eq!(classify("ROLLBACK"), Boundary::End);
    assert_eq!(classify("COMMIT /* implicit */"), Boundary::End);
    assert_eq!(classify("ROLLBACK TO `sp`"), Boundary::Ignore);
    assert_eq!(classify("SAVEPOINT `sp`"), Boundary::Ignore);
    assert_eq!(classify("XA END X'31'"), Boundary::Ignore);
    assert_eq!(classify("XA ROLLBACK X'31'"), Boundary::EndWith);
    assert_eq!(classify("TRUNCATE TABLE t"), Boundary::None);
    assert_eq!(classify("BEGIN NOT ATOMIC SELECT 1; END"), Boundary::None);
}

#[test]
fn version_checks() {
    assert!(checksum_aware(b"10.11.19-MariaDB-log\0\0"));
    assert!(checksum_aware(b"5.3.12-MariaDB"));
    assert!(checksum_aware(b"8.0.36"));
    assert!(checksum_aware(b"5.6.1"));
    assert!(!checksum_aware(b"5.6.0-log"));
    assert!(!checksum_aware(b"5.5.62"));
    assert!(!checksum_aware(b""));
}

/// The integers a change's images hold at `position`; None without images or values.
fn key_values(change: &Change, position: usize) -> Option<Vec<i128>> {
    let Change::Rows {
        rows: Some(rows), ..
    } = change
    else {
        return None;
    };
    rows.values(position)?
        .iter()
        .map(|v| v.integer(false))
        .collect()
}
