//! A session with a connection of its own that changes its default schema, by a text
//! `USE` or by `COM_INIT_DB`: what it runs next is counted under the new schema and its
//! tables (analytics, and so the advisor and traces), as the server runs it there.

use crate::support::wire::RawConn;
use crate::support::{
    admin_json, fresh_database, shared_server, wait_until, Config, Sluice, NATIVE_PASSWORD,
    NATIVE_USER,
};
use serde_json::Value;
use std::time::Duration;

const TOKEN: &str = "schema-t0ken";
const COM_INIT_DB: u8 = 0x02;

/// The digest of `text`, once analytics has it.
fn digest(admin: &str, text: &str) -> Value {
    let mut found = Value::Null;
    let seen = wait_until(Duration::from_secs(10), || {
        let all = admin_json(admin, TOKEN, "/v1/digests?sort=count&limit=100");
        found = (all["digests"].as_array().unwrap().iter())
            .find(|d| d["text"] == text)
            .cloned()
            .unwrap_or(Value::Null);
        !found.is_null()
    });
    assert!(seen, "no digest {text:?}");
    found
}

#[test]
fn a_dedicated_session_is_counted_in_the_schema_it_moved_to() {
    let server = shared_server();
    for (db, table) in [
        ("dschema_a", "ta"),
        ("dschema_b", "tb"),
        ("dschema_c", "tc"),
    ] {
        fresh_database(server, db);
        server
            .execute(&format!("CREATE TABLE {db}.{table} (id INT PRIMARY KEY)"))
            .unwrap();
    }
    let config = Config::for_server(server)
        .pool("multiplex", false)
        .admin(TOKEN);
    let admin = config.admin_address().unwrap();
    let sluice = Sluice::start(&config);
    let mut c = RawConn::login(
        sluice.addr(),
        NATIVE_USER,
        NATIVE_PASSWORD,
        Some("dschema_a"),
    )
    .unwrap_or_else(|e| panic!("{e:?}\n{}", sluice.log()));
    c.query_rows("SELECT COUNT(*) FROM ta");
    c.query("USE `dschema_b`").unwrap().expect_ok();
    c.query_rows("SELECT COUNT(*) FROM tb");
    c.command(COM_INIT_DB, b"dschema_c").unwrap().expect_ok();
    c.query_rows("SELECT COUNT(*) FROM tc");
    // A USE the server refuses leaves the schema where it was.
    let refused = c.query("USE dschema_nowhere").unwrap();
    assert_eq!(refused.expect_err().code, 1049);
    assert_eq!(
        c.query_rows("SELECT DATABASE()")[0][0].as_deref(),
        Some("dschema_c")
    );

    for (text, schema, table) in [
        ("SELECT COUNT(*) FROM ta", "dschema_a", "dschema_a.ta"),
        ("SELECT COUNT(*) FROM tb", "dschema_b", "dschema_b.tb"),
        ("SELECT COUNT(*) FROM tc", "dschema_c", "dschema_c.tc"),
        ("SELECT DATABASE()", "dschema_c", ""),
    ] {
        let d = digest(&admin, text);
        assert_eq!(d["schema"], schema, "{d:#}");
        if !table.is_empty() {
            assert_eq!(d["tables"], serde_json::json!([table]), "{d:#}");
        }
    }
}
