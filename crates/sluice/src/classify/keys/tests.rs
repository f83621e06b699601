use super::*;

const ID: KeyColumn = KeyColumn {
    schema: "shop",
    table: "orders",
    column: "id",
    position: None,
};

fn keys(sql: &str) -> Keys {
    key_values(sql.as_bytes(), Some("shop"), &ID).0
}

fn sets_key(sql: &str) -> bool {
    key_values(sql.as_bytes(), Some("shop"), &ID).1
}

fn n(v: &str) -> Value {
    Value::Number(v.into())
}

fn s(v: &str) -> Value {
    Value::Str(v.as_bytes().to_vec())
}

fn values(v: Vec<Value>) -> Keys {
    Keys::Values(v)
}

#[test]
fn equality_and_in_decide_reads() {
    assert_eq!(
        keys("SELECT * FROM orders WHERE id = 5"),
        values(vec![n("5")])
    );
    assert_eq!(
        keys("select c from orders where 5=id"),
        values(vec![n("5")])
    );
    assert_eq!(
        keys("SELECT c FROM orders WHERE id IN (1, -2, '3', NULL)"),
        values(vec![n("1"), n("-2"), s("3"), Value::Null])
    );
    assert_eq!(
        keys("SELECT c FROM shop.orders o WHERE o.id = 7 AND c > 3 ORDER BY c LIMIT 1"),
        values(vec![n("7")])
    );
    assert_eq!(
        keys("SELECT c FROM `orders` AS o WHERE c > 3 && (o.id = 1) FOR UPDATE"),
        values(vec![n("1")])
    );
    assert_eq!(
        keys("SELECT c FROM orders WHERE ((id = 'a''b' AND c = 1))"),
        values(vec![s("a'b")])
    );
    assert_eq!(
        keys("SELECT c FROM orders WHERE shop.orders.id = _utf8mb4'x'"),
        values(vec![s("x")])
    );
    assert_eq!(
        keys("SELECT c FROM orders WHERE id = TRUE;"),
        values(vec![n("1")])
    );
}

#[test]
fn parameters_are_numbered_over_the_whole_statement() {
    assert_eq!(
        keys("SELECT ?, c FROM orders WHERE c = ? AND id IN (?, ?) LIMIT ?"),
        values(vec![Value::Param(2), Value::Param(3)])
    );
    assert_eq!(
        keys("INSERT INTO orders (c, id) VALUES (?, ?), (?, ?)"),
        values(vec![Value::Param(1), Value::Param(3)])
    );
}

#[test]
fn what_the_key_does_not_decide_is_any() {
    for sql in [
        "SELECT * FROM orders",
        "SELECT * FROM orders WHERE id = 5 OR c = 1",
        "SELECT * FROM orders WHERE id > 5",
        "SELECT * FROM orders WHERE id = 5 + 1",
        "SELECT * FROM orders WHERE id = c",
        "SELECT * FROM orders WHERE id <=> 5",
        "SELECT * FROM orders WHERE NOT id = 5",
        "SELECT * FROM orders WHERE id = 5 || c = 1",
        "SELECT * FROM orders WHERE id = x'05'",
        "SELECT * FROM orders WHERE id = \"5\"",
        "SELECT * FROM orders WHERE other_id = 5",
        "SELECT * FROM orders WHERE id(5) = 5",
        "SELECT * FROM orders o JOIN items i ON i.o = o.id WHERE o.id = 5",
        "SELECT * FROM orders, items WHERE id = 5",
        "SELECT * FROM items WHERE id = 5",
        "SELECT * FROM other.orders WHERE id = 5",
        "SELECT * FROM (SELECT * FROM orders) x WHERE id = 5",
        "SELECT * FROM orders WHERE id = 5 UNION SELECT * FROM orders",
        "SELECT * FROM orders WHERE id = 5 AND c IN (SELECT c FROM orders)",
        "SELECT (SELECT MAX(c) FROM orders), c FROM orders WHERE id = 5",
        "SELECT * FROM orders WHERE id = 5; SELECT 1",
        "UPDATE orders o JOIN items i ON i.o = o.id SET c = 1 WHERE o.id = 5",
        "DELETE o FROM orders o WHERE o.id = 5",
        "DELETE FROM orders USING orders JOIN items WHERE orders.id = 5",
        "INSERT INTO orders VALUES (1, 2)",
        "INSERT INTO orders (c) VALUES (1)",
        "INSERT INTO orders (id, c) VALUES (1 + 1, 2)",
        "INSERT INTO orders (id, c) SELECT id, c FROM items",
        "INSERT INTO orders SET c = 1",
        "CALL p(5)",
    ] {
        assert_eq!(keys(sql), Keys::Any, "{sql}");
    }
}

#[test]
fn an_and_of_between_or_case_is_not_a_conjunct() {
    // `c BETWEEN -5 AND (id = 5)` holds for rows of any id.
    assert_eq!(
        keys("SELECT * FROM orders WHERE c BETWEEN -5 AND id = 5"),
        Keys::Any
    );
    assert_eq!(
        keys("SELECT * FROM orders WHERE c BETWEEN 1 AND 5 AND id = 5"),
        values(vec![n("5")])
    );
    assert_eq!(
        keys("SELECT * FROM orders WHERE CASE WHEN c THEN 1 ELSE 0 AND id = 5 END"),
        Keys::Any
    );
    assert_eq!(
        keys("SELECT * FROM orders WHERE CASE c WHEN 1 THEN 1 END AND id = 5"),
        values(vec![n("5")])
    );
}

#[test]
fn writes_by_key() {
    assert_eq!(
        keys("UPDATE orders SET c = c + 1 WHERE id = 9"),
        values(vec![n("9")])
    );
    assert_eq!(
        keys("UPDATE LOW_PRIORITY orders o SET o.c = 1 WHERE o.id IN (1,2) LIMIT 2"),
        values(vec![n("1"), n("2")])
    );
    assert_eq!(
        keys("DELETE FROM orders WHERE id = ? ORDER BY c"),
        values(vec![Value::Param(0)])
    );
    assert_eq!(
        keys("INSERT IGNORE INTO shop.orders (id, c) VALUES (1, 'x'), (2, 'y,z')"),
        values(vec![n("1"), n("2")])
    );
    assert_eq!(
        keys("REPLACE orders (c, `ID`) VALUE (f(1, 2), 3)"),
        values(vec![n("3")])
    );
    assert_eq!(
        keys("INSERT INTO orders SET c = 1, id = 4 ON DUPLICATE KEY UPDATE c = 2"),
        values(vec![n("4")])
    );
    assert_eq!(
        keys("INSERT INTO orders (id) VALUES (4) ON DUPLICATE KEY UPDATE c = c + 1"),
        values(vec![n("4")])
    );
}

#[test]
fn rows_without_a_column_list_need_the_keys_position() {
    let second = KeyColumn {
        position: Some(1),
        ..ID
    };
    let sql = b"INSERT INTO orders VALUES ('a', 5), ('b', ?)";
    assert_eq!(
        key_values(sql, Some("shop"), &second).0,
        values(vec![n("5"), Value::Param(0)])
    );
    assert_eq!(key_values(sql, Some("shop"), &ID).0, Keys::Any);
}

#[test]
fn assigning_the_key_is_reported() {
    assert!(sets_key("UPDATE orders SET c = 1, id = 7 WHERE id = 5"));
    assert!(sets_key("UPDATE orders o SET o.id = 7 WHERE o.id = 5"));
    assert!(!sets_key("UPDATE orders SET c = 1 WHERE id = 5"));
    assert!(sets_key(
        "INSERT INTO orders (id) VALUES (4) ON DUPLICATE KEY UPDATE id = 5"
    ));
    assert!(!sets_key(
        "INSERT INTO orders (id) VALUES (4) ON DUPLICATE KEY UPDATE c = 5"
    ));
}

#[test]
fn escapes_and_comments() {
    assert_eq!(
        keys("SELECT /* id = 1 */ c FROM orders -- x\n WHERE id = 'a\\'b'"),
        values(vec![s("a'b")])
    );
    assert_eq!(
        keys("SELECT c FROM orders WHERE id = /*!50000 6 */"),
        values(vec![n("6")])
    );
}

#[test]
fn every_prefix_of_a_statement_is_answered_without_a_panic() {
    for sql in [
        "SELECT c FROM shop.orders AS o WHERE ((o.id IN (1, ?, 'x') AND c BETWEEN 1 AND 2)) \
         ORDER BY c LIMIT ?",
        "INSERT INTO orders (c, id) VALUES (f(1, 2), ?), ('a', -3) ON DUPLICATE KEY UPDATE id = 1",
        "UPDATE orders o SET o.id = 7, c = CASE WHEN a AND b THEN 1 END WHERE o.id = 5",
        "DELETE QUICK FROM orders WHERE id = _latin1'x' && c <=> NULL",
        "INSERT INTO orders SET c = 1, id = 4 ON DUPLICATE KEY UPDATE c = 2",
    ] {
        for end in 0..=sql.len() {
            let _ = key_values(&sql.as_bytes()[..end], Some("shop"), &ID);
            let _ = key_values(&sql.as_bytes()[..end], None, &ID);
        }
    }
}

#[test]
fn multi_row_inserts_are_cut_where_their_rows_are() {
    let sql = "INSERT INTO orders (v, id) VALUES ('a,(b)', 1), ( 'c', 2 ) ,('d',3) \
               ON DUPLICATE KEY UPDATE v = VALUES(v)";
    let cut = insert_rows(sql.as_bytes(), Some("shop"), &ID).unwrap();
    let text = |r: &Range<usize>| &sql[r.clone()];
    assert_eq!(text(&cut.head), "INSERT INTO orders (v, id) VALUES ");
    let rows: Vec<(&str, Value)> = cut.rows.iter().map(|(r, v)| (text(r), v.clone())).collect();
    assert_eq!(
        rows,
        vec![
            ("('a,(b)', 1)", n("1")),
            ("( 'c', 2 )", n("2")),
            ("('d',3)", n("3"))
        ]
    );
    assert_eq!(text(&cut.tail), " ON DUPLICATE KEY UPDATE v = VALUES(v)");
    // Without a column list, by the key's known position; a trailing `;` is not kept.
    let at_0 = KeyColumn {
        position: Some(0),
        ..ID
    };
    let sql = "insert into shop.orders values (7, 'x'),(8, 'y');";
    let cut = insert_rows(sql.as_bytes(), None, &at_0).unwrap();
    assert_eq!(cut.rows.len(), 2);
    assert_eq!(&sql[cut.tail.clone()], "");
    for not_split in [
        "INSERT INTO orders (v, id) VALUES ('a', 1) RETURNING id",
        "INSERT INTO orders (v, id) SELECT v, id FROM other",
        "INSERT INTO orders (v, id) VALUES ('a', 1 + 1)",
        "INSERT INTO orders SET id = 1, v = 'a'",
        "INSERT INTO other (id) VALUES (1), (2)",
        "UPDATE orders SET v = 'a' WHERE id = 1",
    ] {
        assert_eq!(
            insert_rows(not_split.as_bytes(), Some("shop"), &ID),
            None,
            "{not_split}"
        );
    }
}
