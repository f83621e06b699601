//! The decoder keeping row images: per table and transaction, v1 and v2 events, and
//! what it does not keep.

use super::*;
use crate::binlog::rows::tests::{body, image, map_bytes};
use crate::binlog::rows::{types, ColumnValue, MAX_GROUP_IMAGE_BYTES, MAX_TABLE_IMAGE_BYTES};

/// (id INT, name VARCHAR(20)) as a table map's column part.
fn id_name() -> Vec<u8> {
    map_bytes(&[(types::LONG, &[]), (types::VARCHAR, &[20, 0])])
}

fn id_name_row(id: u32, name: &[u8]) -> Vec<u8> {
    let mut named = vec![name.len() as u8];
    named.extend_from_slice(name);
    image(&[Some(&id.to_le_bytes()), Some(&named)])
}

#[test]
fn row_images_of_a_transaction_are_kept_per_table() {
    for b in [CRC, PLAIN] {
        let mut d = decoder(&b);
        let (one, two, three) = (
            id_name_row(1, b"a"),
            id_name_row(2, b"b"),
            id_name_row(3, b"c"),
        );
        let renamed = id_name_row(2, b"bb");
        let batches: Vec<Batch> = [
            b.gtid(7, 0, 0),
            b.table_map_of(70, "shop", "orders", &id_name()),
            b.rows_of(
                kind::WRITE_ROWS_V1,
                70,
                true,
                &[],
                &body(2, &[0, 1], None, &[one, two.clone()]),
            ),
            b.table_map_of(71, "shop", "stock", &id_name()),
            // v2 with extra data (MySQL's partition info) before the images.
            b.rows_of(
                kind::UPDATE_ROWS_V2,
                71,
                true,
                &[1, 2, 0, 0],
                &body(2, &[0, 1], Some(&[0, 1]), &[two, renamed]),
            ),
            b.table_map_of(72, "shop", "orders", &id_name()),
            b.rows_of(
                kind::DELETE_ROWS_V2,
                72,
                true,
                &[],
                &body(2, &[0], None, &[image(&[Some(&9u32.to_le_bytes())])]),
            ),
            b.table_map_of(72, "shop", "orders", &id_name()),
            b.rows_of(
                kind::WRITE_ROWS_V2,
                72,
                true,
                &[],
                &body(2, &[0, 1], None, &[three]),
            ),
            b.xid(),
        ]
        .iter()
        .filter_map(|e| d.feed(e).unwrap().1.batch)
        .collect();
        assert_eq!(batches.len(), 1);
        let changes = &batches[0].changes;
        assert_eq!(
            names(changes.clone()),
            vec![rows("shop", "orders"), rows("shop", "stock")]
        );
        assert_eq!(key_values(&changes[0], 0), Some(vec![1, 2, 9, 3]));
        assert_eq!(key_values(&changes[1], 0), Some(vec![2, 2]));
        let Change::Rows {
            rows: Some(stock), ..
        } = &changes[1]
        else {
            panic!("{changes:?}");
        };
        assert_eq!(stock.column_count(), 2);
        assert_eq!(stock.column_type(1), Some(types::VARCHAR));
        assert_eq!(
            stock.values(1),
            Some(vec![
                ColumnValue::Bytes(b"b".to_vec()),
                ColumnValue::Bytes(b"bb".to_vec())
            ])
        );
        // The delete's image lacks the name: no values for it over the transaction.
        let Change::Rows {
            rows: Some(orders), ..
        } = &changes[0]
        else {
            panic!("{changes:?}");
        };
        assert_eq!(orders.values(1), None);
    }
}

/// Whether the first change of the batch `events` end with kept its images.
fn kept_images(events: &[Vec<u8>]) -> bool {
    let mut d = decoder(&CRC);
    let batches: Vec<Batch> = events
        .iter()
        .filter_map(|e| d.feed(e).unwrap().1.batch)
        .collect();
    match &batches[..] {
        [batch] => matches!(&batch.changes[0], Change::Rows { rows, .. } if rows.is_some()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn row_images_that_are_not_kept() {
    let b = CRC;
    let row = body(2, &[0, 1], None, &[id_name_row(1, b"a")]);
    let map = b.table_map_of(1, "s", "t", &id_name());
    let write = b.rows_of(kind::WRITE_ROWS_V1, 1, true, &[], &row);
    assert!(kept_images(&[map.clone(), write.clone()]));
    // Compressed row events, MySQL's partial JSON updates.
    let mut compressed = 1u64.to_le_bytes()[..6].to_vec();
    compressed.extend_from_slice(&STMT_END_F.to_le_bytes());
    compressed.extend_from_slice(&2u16.to_le_bytes());
    compressed.extend_from_slice(&row);
    for k in [kind::WRITE_ROWS_COMPRESSED_FIRST, kind::PARTIAL_UPDATE_ROWS] {
        let e = b.event(k, 1, 0, &compressed);
        assert!(!kept_images(&[map.clone(), e]), "kind {k}");
    }
    // A table map whose column part does not parse still names its table.
    for cut in 0..id_name().len() - 1 {
        let map = b.table_map_of(1, "s", "t", &id_name()[..cut]);
        assert!(!kept_images(&[map, write.clone()]), "cut {cut}");
    }
    // v2 extra data longer than the event.
    let mut v2 = b.rows_of(kind::WRITE_ROWS_V2, 1, true, &[], &[]);
    let at = HEADER_LEN + 8;
    v2[at..at + 2].copy_from_slice(&200u16.to_le_bytes());
    let n = v2.len() - CHECKSUM_LEN;
    let c = crc32fast::hash(&v2[..n]);
    v2[n..].copy_from_slice(&c.to_le_bytes());
    assert!(!kept_images(&[map.clone(), v2]));
    // Events of a table over the bound drop the table's images for the group.
    let first = b.rows_of(kind::WRITE_ROWS_V1, 1, false, &[], &row);
    for (size, kept) in [
        (MAX_TABLE_IMAGE_BYTES / 4, true),
        (MAX_TABLE_IMAGE_BYTES / 2, false),
    ] {
        let big = b.rows_of(kind::WRITE_ROWS_V1, 1, false, &[], &vec![0; size]);
        let group = [
            b.gtid(1, 0, 0),
            map.clone(),
            first.clone(),
            big.clone(),
            big,
            write.clone(),
            b.xid(),
        ];
        assert_eq!(kept_images(&group), kept, "two events of {size} bytes");
    }
    // The table's layout changed within the group (a statement-based ALTER in a
    // non-transactional group): the images cannot be read with one map.
    let other = b.table_map_of(
        1,
        "s",
        "t",
        &map_bytes(&[(types::LONG, &[]), (types::VARCHAR, &[0, 1])]),
    );
    let group = [b.gtid(1, 0, 0), map, write.clone(), other, write, b.xid()];
    assert!(!kept_images(&group));
}

#[test]
fn a_transaction_keeps_a_bounded_total_of_images() {
    let b = CRC;
    let mut d = decoder(&b);
    let each = MAX_TABLE_IMAGE_BYTES - 1000;
    let tables = MAX_GROUP_IMAGE_BYTES / each + 3;
    let row = body(2, &[0, 1], None, &[id_name_row(1, b"a")]);
    let mut events = vec![b.gtid(1, 0, 0)];
    for t in 0..tables as u64 {
        events.push(b.table_map_of(t, "s", &format!("t{t}"), &id_name()));
        let mut big = row.clone();
        big.resize(each, 0);
        events.push(b.rows_of(kind::WRITE_ROWS_V1, t, true, &[], &big));
    }
    // A small table still fits in what is left.
    events.push(b.table_map_of(99, "s", "small", &id_name()));
    events.push(b.rows_of(kind::WRITE_ROWS_V1, 99, true, &[], &row));
    events.push(b.xid());
    let batch = events
        .iter()
        .filter_map(|e| d.feed(e).unwrap().1.batch)
        .next()
        .unwrap();
    let kept: Vec<bool> = batch
        .changes
        .iter()
        .map(|c| matches!(c, Change::Rows { rows: Some(_), .. }))
        .collect();
    let fit = MAX_GROUP_IMAGE_BYTES / each;
    assert_eq!(kept.len(), tables + 1);
    assert!(kept[..fit].iter().all(|k| *k), "{kept:?}");
    assert!(kept[fit..tables].iter().all(|k| !*k), "{kept:?}");
    assert!(kept[tables], "{kept:?}");
    // The next transaction starts with nothing held.
    let batch = [
        b.gtid(2, 0, 0),
        b.table_map_of(1, "s", "t", &id_name()),
        b.rows_of(kind::WRITE_ROWS_V1, 1, true, &[], &row),
        b.xid(),
    ]
    .iter()
    .filter_map(|e| d.feed(e).unwrap().1.batch)
    .next()
    .unwrap();
    assert_eq!(key_values(&batch.changes[0], 0), Some(vec![1]));
}
