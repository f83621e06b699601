#!/usr/bin/env python3
"""Compatibility check for Sluice with a real Python driver (PyMySQL).

Runs a fixed scenario against one server (MariaDB directly, or Sluice in front of it)
and prints ONE canonical JSON document (sorted keys) of everything the driver observed.
Run it once directly and once through the proxy: the two documents must be equal.

Nothing that legitimately differs between two runs is recorded: no connection or thread
ids, no server version, no times, no random data, and the database name is masked.

Usage:
  compat.py --host H --port P --user U --password PW --database DB
            [--ssl-ca FILE] [--scenario full|sha2]

Exit status: 0 when the scenario ran; 1 on an unexpected exception (printed to stderr).
"""

import argparse
import datetime
import decimal
import hashlib
import importlib.metadata
import json
import re
import sys
import traceback

import pymysql
import pymysql.cursors
from pymysql.constants import CLIENT, SERVER_STATUS

# Server status bits that describe the session and must survive a proxy unchanged.
# Others (e.g. QUERY_WAS_SLOW, SESSION_STATE_CHANGED) can depend on timing or on how
# the proxy talks to the server, so they are left out.
STABLE_STATUS = (
    SERVER_STATUS.SERVER_STATUS_IN_TRANS
    | SERVER_STATUS.SERVER_STATUS_AUTOCOMMIT
    | SERVER_STATUS.SERVER_MORE_RESULTS_EXISTS
    | SERVER_STATUS.SERVER_STATUS_NO_BACKSLASH_ESCAPES
)

# Values longer than this are recorded by length and SHA-1 only.
INLINE_LIMIT = 256

STREAM_ROWS = 100_000


def det_bytes(n, seed):
    """n deterministic pseudo-random bytes (SHA-256 in counter mode)."""
    out = bytearray()
    counter = 0
    prefix = seed.encode()
    while len(out) < n:
        out += hashlib.sha256(prefix + counter.to_bytes(8, "little")).digest()
        counter += 1
    return bytes(out[:n])


class Recorder:
    """Turns driver results into JSON-friendly values, masking the database name."""

    def __init__(self, database):
        self.database = database

    def mask(self, text):
        if not isinstance(text, str) or not self.database:
            return text
        text = text.replace(f"'{self.database}.", "'<db>.").replace(f"`{self.database}`", "`<db>`")
        # The host in "Access denied for user 'u'@'host'" is where the server saw the
        # client come from, which a proxy changes.
        return re.sub(r"('[^']*'@)'[^']*'", r"\1'<host>'", text)

    def value(self, v):
        """A typed, canonical form of one value as the driver returned it."""
        if v is None or isinstance(v, bool):
            return v
        if isinstance(v, int):
            return v
        if isinstance(v, float):
            return {"float": repr(v)}
        if isinstance(v, decimal.Decimal):
            return {"decimal": str(v)}
        if isinstance(v, datetime.datetime):
            return {"datetime": v.isoformat()}
        if isinstance(v, datetime.date):
            return {"date": v.isoformat()}
        if isinstance(v, datetime.timedelta):
            return {"timedelta_us": (v.days * 86400 + v.seconds) * 1_000_000 + v.microseconds}
        if isinstance(v, datetime.time):
            return {"time": v.isoformat()}
        if isinstance(v, (bytes, bytearray)):
            if len(v) <= INLINE_LIMIT:
                return {"bytes": bytes(v).hex()}
            return {"bytes_len": len(v), "sha1": hashlib.sha1(v).hexdigest()}
        if isinstance(v, str):
            if len(v) <= INLINE_LIMIT:
                return v
            raw = v.encode("utf-8")
            return {"str_chars": len(v), "str_len": len(raw), "sha1": hashlib.sha1(raw).hexdigest()}
        if isinstance(v, (set, frozenset)):
            return {"set": sorted(v)}
        raise TypeError(f"no canonical form for {type(v).__name__}: {v!r}")

    def rows(self, rows):
        return [[self.value(v) for v in row] for row in rows]

    def fields(self, cursor):
        """Column metadata as sent by the server (name, types, lengths, flags)."""
        result = cursor._result
        if result is None or not getattr(result, "fields", None):
            return None
        return [
            {
                "name": f.name,
                "org_name": f.org_name,
                "table": f.table_name,
                "org_table": f.org_table,
                "db": self.mask_db(f.db),
                "type": f.type_code,
                "length": f.length,
                "charset": f.charsetnr,
                "flags": f.flags,
                "scale": f.scale,
            }
            for f in result.fields
        ]

    def mask_db(self, db):
        if isinstance(db, bytes):
            db = db.decode("utf-8")
        return "<db>" if db == self.database else db

    def result(self, cursor, rows=None):
        """One result: metadata, rows (fetched unless given), counts and warnings."""
        if rows is None:
            rows = cursor.fetchall() if cursor.description else None
        res = cursor._result
        return {
            "fields": self.fields(cursor),
            "rows": self.rows(rows) if rows is not None else None,
            "rowcount": cursor.rowcount,
            "warnings": cursor.warning_count,
            "info": (
                self.mask(res.message.decode("utf-8", "replace"))
                if res is not None and res.message
                else None
            ),
        }

    def all_results(self, cursor):
        """Every result of a multi-result response, following nextset()."""
        out = [self.result(cursor)]
        while cursor.nextset():
            out.append(self.result(cursor))
        return out

    def error(self, exc):
        code = exc.args[0] if exc.args else None
        message = exc.args[1] if len(exc.args) > 1 else None
        return {"class": type(exc).__name__, "code": code, "message": self.mask(message)}


def status(conn):
    return conn.server_status & STABLE_STATUS


class Scenario:
    def __init__(self, args):
        self.args = args
        self.rec = Recorder(args.database)
        self.conns = []

    def connect(self, **extra):
        a = self.args
        params = dict(
            host=a.host,
            port=a.port,
            user=a.user,
            password=a.password,
            database=a.database,
            charset="utf8mb4",
            autocommit=True,
            connect_timeout=30,
            read_timeout=300,
            write_timeout=300,
            init_command="SET time_zone = '+00:00'",
        )
        if a.ssl_ca:
            params.update(ssl_ca=a.ssl_ca, ssl_verify_cert=True)
        params.update(extra)
        conn = pymysql.connect(**params)
        self.conns.append(conn)
        return conn

    def close(self):
        for conn in self.conns:
            if conn.open:
                conn.close()

    def run(self):
        self.conn = self.connect()
        out = {
            "connect": self.connect_info(),
            "schema": self.schema(),
            "types": self.types(),
            "charset": self.charset(),
            "params": self.params(),
            "executemany": self.executemany(),
            "rowcount": self.rowcount(),
            "transactions": self.transactions(),
            "autocommit": self.autocommit(),
            "errors": self.errors(),
            "warnings": self.warnings(),
            "large": self.large(),
            "multi_statements": self.multi_statements(),
            "procedure": self.procedure(),
            "session": self.session(),
            "streaming": self.streaming(),
        }
        self.close()
        return out

    # -- sections ----------------------------------------------------------

    def connect_info(self):
        conn = self.conn
        return {
            # PyMySQL also uses TLS unasked when the server offers it; that depends on how
            # the server (or proxy) is set up, so it is recorded only when asked for.
            "tls": conn._sock.__class__.__name__ == "SSLSocket" if self.args.ssl_ca else None,
            "autocommit": conn.get_autocommit(),
            "status": status(conn),
            "charset": conn.character_set_name(),
        }

    def schema(self):
        cur = self.conn.cursor()
        statements = [
            "DROP PROCEDURE IF EXISTS compat_two",
            "DROP TABLE IF EXISTS compat_types, compat_rows, compat_tx, compat_big, "
            "compat_digits, compat_uniq",
            """CREATE TABLE compat_types (
                id INT NOT NULL PRIMARY KEY,
                ti TINYINT, si SMALLINT, mi MEDIUMINT, i INT, bi BIGINT,
                bu BIGINT UNSIGNED,
                de DECIMAL(20,6),
                f FLOAT, d DOUBLE,
                dt DATE, dtm DATETIME(6), tm TIME, ts TIMESTAMP NULL DEFAULT NULL, yr YEAR,
                ch CHAR(10), vc VARCHAR(100) CHARACTER SET utf8mb4, tx TEXT,
                bl BLOB, vb VARBINARY(16),
                js JSON,
                bt BIT(8),
                en ENUM('red','green','blue'),
                st SET('a','b','c')
            ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
            """CREATE TABLE compat_rows (
                id INT NOT NULL AUTO_INCREMENT PRIMARY KEY,
                n INT NOT NULL,
                label VARCHAR(32)
            ) ENGINE=InnoDB""",
            "CREATE TABLE compat_tx (id INT PRIMARY KEY, v VARCHAR(16)) ENGINE=InnoDB",
            "CREATE TABLE compat_big (id INT PRIMARY KEY, b LONGBLOB) ENGINE=InnoDB",
            "CREATE TABLE compat_digits (d INT PRIMARY KEY) ENGINE=InnoDB",
            "CREATE TABLE compat_uniq (id INT PRIMARY KEY, k VARCHAR(8) UNIQUE) ENGINE=InnoDB",
            """CREATE PROCEDURE compat_two(IN k INT)
               BEGIN
                 SELECT k AS k, 'first' AS which;
                 SELECT id, n, label FROM compat_rows WHERE id <= k ORDER BY id;
               END""",
        ]
        results = []
        for sql in statements:
            cur.execute(sql)
            # DROP ... IF EXISTS warns only when the object was missing, which depends on
            # what ran before in this database: warnings are not recorded here.
            results.append({"rowcount": cur.rowcount})
        cur.execute(
            "SELECT TABLE_NAME, ENGINE, TABLE_COLLATION FROM information_schema.TABLES "
            "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME LIKE 'compat\\_%' ORDER BY TABLE_NAME"
        )
        results.append(self.rec.result(cur))
        return results

    def types(self):
        cur = self.conn.cursor()
        cur.execute("""INSERT INTO compat_types VALUES
            (1, 127, -32768, 8388607, -2147483648, 9223372036854775807,
             18446744073709551615, 12345678901234.123456, 1.5, 3.141592653589793,
             '2024-02-29', '2024-02-29 13:14:15.123456', '12:34:56',
             '2024-03-01 00:00:01', 2024,
             'fixed', 'Grüße, мир, 世界 🦀🚀', 'some text', x'000102ff', x'deadbeef',
             '{"a": [1, 2, {"b": null}], "c": "d\\\\u00e9"}',
             b'10100101', 'green', 'a,c'),
            (2, -128, 32767, -8388608, 2147483647, -9223372036854775808,
             0, -99999999999999.999999, -3.25, 1e308,
             '1000-01-01', '9999-12-31 23:59:59.999999', '-838:59:59',
             '1970-01-01 00:00:01', 1901,
             '', '', '', x'', x'',
             '[]', b'00000000', 'red', ''),
            (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
             NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)""")
        inserted = {"rowcount": cur.rowcount, "info": cur._result.message.decode()}
        cur.execute("SELECT * FROM compat_types ORDER BY id")
        table = self.rec.result(cur)
        cur.execute(
            "SELECT 1 + 1 AS two, 'x' AS s, NULL AS n, 1.5 AS dec_lit, 2.5e0 AS dbl_lit, "
            "CAST(18446744073709551615 AS UNSIGNED) AS umax, -0.000001 AS tiny, "
            "CAST('2001-02-03' AS DATE) AS d, TIMESTAMP'2001-02-03 04:05:06.5' AS ts, "
            "CAST('1:02:03.25' AS TIME(2)) AS t, X'41FF' AS hex, b'101' AS bits, "
            "JSON_OBJECT('k', 1, 'l', JSON_ARRAY(1, 'two')) AS jo"
        )
        exprs = self.rec.result(cur)
        cur.execute(
            "SELECT id, HEX(bt), bt + 0, en + 0, FIND_IN_SET('c', st), JSON_EXTRACT(js, '$.a[2].b'), "
            "JSON_VALID(js), UNIX_TIMESTAMP(ts), DAYNAME(dt) FROM compat_types ORDER BY id"
        )
        derived = self.rec.result(cur)
        return {"insert": inserted, "select": table, "expressions": exprs, "derived": derived}

    def charset(self):
        cur = self.conn.cursor()
        cur.execute(
            "SELECT vc, CHAR_LENGTH(vc), LENGTH(vc), HEX(vc), UPPER(vc) "
            "FROM compat_types WHERE id = 1"
        )
        stored = self.rec.result(cur)
        cur.execute("SELECT %s AS echo, CHAR_LENGTH(%s) AS chars", ("ünïcødé ✓ 🎉", "ünïcødé ✓ 🎉"))
        echo = self.rec.result(cur)
        cur.execute(
            "SELECT @@character_set_client, @@character_set_results, @@collation_connection"
        )
        variables = self.rec.result(cur)
        return {"stored": stored, "echo": echo, "variables": variables}

    def params(self):
        cur = self.conn.cursor()
        values = (
            42,
            -(2**63),
            2**64 - 1,
            1.25,
            decimal.Decimal("-1234.500001"),
            'it\'s a "quoted" \\ back\\slash; -- not a comment',
            "Ωμέγα 🦀",
            b"\x00\x01'\"\\\x1a\xff",
            None,
            True,
            datetime.date(2020, 1, 2),
            datetime.datetime(2020, 1, 2, 3, 4, 5, 678900),
            datetime.timedelta(hours=-1, minutes=-2),
        )
        placeholders = ", ".join(["%s"] * len(values))
        cur.execute(f"SELECT {placeholders}", values)
        positional = self.rec.result(cur)
        cur.execute(
            "SELECT %(a)s AS a, %(b)s AS b, %(a)s = %(b)s AS same",
            {"a": "x%y", "b": "x%y"},
        )
        named = self.rec.result(cur)
        cur.execute("INSERT INTO compat_rows (n, label) VALUES (%s, %s)", (7, "it's seven"))
        single = {"rowcount": cur.rowcount, "lastrowid": cur.lastrowid}
        cur.execute("SELECT id, n, label FROM compat_rows WHERE label = %s", ("it's seven",))
        found = self.rec.result(cur)
        cur.execute("SELECT n FROM compat_rows WHERE id IN %s ORDER BY id", ((1, 2, 3),))
        in_list = self.rec.result(cur)
        return {
            "positional": positional,
            "named": named,
            "insert": single,
            "select": found,
            "in_list": in_list,
        }

    def executemany(self):
        cur = self.conn.cursor()
        rows = [(i * 3, f"row-{i:03d}") for i in range(1, 101)]
        cur.executemany("INSERT INTO compat_rows (n, label) VALUES (%s, %s)", rows)
        insert = {"rowcount": cur.rowcount, "lastrowid": cur.lastrowid}
        cur.executemany(
            "UPDATE compat_rows SET n = n + %s WHERE id = %s", [(1, 2), (1, 3), (1, 99999)]
        )
        update = {"rowcount": cur.rowcount}
        cur.execute("SELECT COUNT(*), SUM(n), MIN(id), MAX(id) FROM compat_rows")
        totals = self.rec.result(cur)
        cur.execute("SELECT id, n, label FROM compat_rows ORDER BY id LIMIT 5")
        head = self.rec.result(cur)
        return {"insert": insert, "update": update, "totals": totals, "head": head}

    def rowcount(self):
        cur = self.conn.cursor()
        out = {}
        cur.execute("UPDATE compat_rows SET n = n WHERE id <= 2")
        out["update_unchanged"] = self.rec.result(cur)
        cur.execute("UPDATE compat_rows SET n = n + 1 WHERE id <= 2")
        out["update_changed"] = self.rec.result(cur)
        cur.execute("INSERT INTO compat_rows (n, label) VALUES (1000, 'a'), (1001, 'b')")
        out["insert_two"] = {"rowcount": cur.rowcount, "lastrowid": cur.lastrowid}
        cur.execute(
            "INSERT INTO compat_rows (id, n, label) VALUES (1, 5, 'dup') "
            "ON DUPLICATE KEY UPDATE label = VALUES(label)"
        )
        out["upsert"] = {"rowcount": cur.rowcount, "lastrowid": cur.lastrowid}
        cur.execute("DELETE FROM compat_rows WHERE n >= 1000")
        out["delete"] = {"rowcount": cur.rowcount}
        cur.execute("SELECT ROW_COUNT(), LAST_INSERT_ID()")
        out["functions"] = self.rec.result(cur)
        cur.execute("SELECT id FROM compat_rows WHERE id < 4 ORDER BY id")
        out["select"] = {"rowcount": cur.rowcount, "rows": self.rec.rows(cur.fetchall())}

        # CLIENT_FOUND_ROWS changes the affected-rows count in OK packets: a proxy that
        # shares server connections must honour each client's choice.
        found = self.connect(client_flag=CLIENT.FOUND_ROWS)
        fcur = found.cursor()
        fcur.execute("UPDATE compat_rows SET n = n WHERE id <= 2")
        out["found_rows_update_unchanged"] = {"rowcount": fcur.rowcount}
        cur.execute("UPDATE compat_rows SET n = n WHERE id <= 2")
        out["again_without_found_rows"] = {"rowcount": cur.rowcount}
        found.close()
        return out

    def transactions(self):
        a = self.conn
        b = self.connect()
        ca, cb = a.cursor(), b.cursor()
        out = {}

        def seen_by_b():
            cb.execute("SELECT id, v FROM compat_tx ORDER BY id")
            return self.rec.rows(cb.fetchall())

        ca.execute("BEGIN")
        out["status_after_begin"] = status(a)
        ca.execute("INSERT INTO compat_tx VALUES (1, 'committed')")
        ca.execute("SELECT id, v FROM compat_tx ORDER BY id")
        out["own_view_before_commit"] = self.rec.rows(ca.fetchall())
        out["other_view_before_commit"] = seen_by_b()
        a.commit()
        out["status_after_commit"] = status(a)
        out["other_view_after_commit"] = seen_by_b()

        a.begin()
        ca.execute("INSERT INTO compat_tx VALUES (2, 'rolled back')")
        ca.execute("UPDATE compat_tx SET v = 'changed' WHERE id = 1")
        ca.execute("SELECT id, v FROM compat_tx ORDER BY id")
        out["own_view_before_rollback"] = self.rec.rows(ca.fetchall())
        a.rollback()
        out["status_after_rollback"] = status(a)
        ca.execute("SELECT id, v FROM compat_tx ORDER BY id")
        out["own_view_after_rollback"] = self.rec.rows(ca.fetchall())
        out["other_view_after_rollback"] = seen_by_b()

        ca.execute("START TRANSACTION")
        ca.execute("INSERT INTO compat_tx VALUES (3, 'kept')")
        ca.execute("SAVEPOINT sp1")
        ca.execute("INSERT INTO compat_tx VALUES (4, 'undone')")
        ca.execute("ROLLBACK TO SAVEPOINT sp1")
        ca.execute("COMMIT")
        out["after_savepoint"] = seen_by_b()

        ca.execute("START TRANSACTION READ ONLY")
        out["status_read_only"] = status(a)
        try:
            ca.execute("INSERT INTO compat_tx VALUES (5, 'ro')")
            out["read_only_write"] = "accepted"
        except pymysql.MySQLError as exc:
            out["read_only_write"] = self.rec.error(exc)
        ca.execute("ROLLBACK")
        b.close()
        return out

    def autocommit(self):
        a = self.conn
        b = self.connect()
        ca, cb = a.cursor(), b.cursor()
        out = {}

        def count_b():
            cb.execute("SELECT COUNT(*) FROM compat_tx")
            return cb.fetchone()[0]

        a.autocommit(False)
        out["off"] = {"get_autocommit": a.get_autocommit(), "status": status(a)}
        ca.execute("SELECT @@autocommit")
        out["off"]["variable"] = ca.fetchone()[0]
        ca.execute("INSERT INTO compat_tx VALUES (10, 'implicit')")
        out["off"]["status_after_insert"] = status(a)
        out["off"]["other_before_commit"] = count_b()
        a.commit()
        out["off"]["other_after_commit"] = count_b()
        ca.execute("INSERT INTO compat_tx VALUES (11, 'dropped')")
        a.rollback()
        out["off"]["other_after_rollback"] = count_b()

        a.autocommit(True)
        out["on"] = {"get_autocommit": a.get_autocommit(), "status": status(a)}
        ca.execute("INSERT INTO compat_tx VALUES (12, 'auto')")
        out["on"]["other_immediately"] = count_b()
        ca.execute("SELECT @@autocommit")
        out["on"]["variable"] = ca.fetchone()[0]
        b.close()
        return out

    def errors(self):
        cur = self.conn.cursor()
        cur.execute("INSERT INTO compat_uniq VALUES (1, 'one')")
        cases = {
            "duplicate_key": "INSERT INTO compat_uniq VALUES (2, 'one')",
            "duplicate_primary": "INSERT INTO compat_uniq VALUES (1, 'uno')",
            "syntax": "SELEC 1 FROM",
            "unknown_table": "SELECT * FROM compat_no_such_table",
            "unknown_column": "SELECT no_such_column FROM compat_uniq",
            "division_strict": "INSERT INTO compat_uniq VALUES (1/0, 'zero')",
            "data_too_long": "INSERT INTO compat_uniq VALUES (3, 'much too long for this')",
            "signal": "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'raised by compat', MYSQL_ERRNO = 1644",
        }
        out = {}
        for name, sql in cases.items():
            try:
                cur.execute(sql)
                out[name] = {"unexpected_success": cur.rowcount}
            except pymysql.MySQLError as exc:
                out[name] = self.rec.error(exc)
            # The session must be usable right after an error.
            cur.execute("SELECT COUNT(*) FROM compat_uniq")
            out[name]["after"] = cur.fetchone()[0]
        # An error inside a transaction rolls back the statement, not the transaction.
        self.conn.begin()
        cur.execute("INSERT INTO compat_uniq VALUES (4, 'four')")
        try:
            cur.execute("INSERT INTO compat_uniq VALUES (5, 'four')")
        except pymysql.MySQLError as exc:
            out["in_transaction"] = self.rec.error(exc)
        out["in_transaction"]["status"] = status(self.conn)
        self.conn.commit()
        cur.execute("SELECT id, k FROM compat_uniq ORDER BY id")
        out["final"] = self.rec.rows(cur.fetchall())
        return out

    def warnings(self):
        cur = self.conn.cursor()
        out = {}
        cur.execute("SELECT 1/0 AS q")
        out["division"] = self.rec.result(cur)
        out["division"]["show_warnings"] = self.rec.rows(self.conn.show_warnings())
        cur.execute("SELECT CAST('12abc' AS SIGNED) AS c, CAST('x' AS DOUBLE) AS d")
        out["casts"] = self.rec.result(cur)
        cur.execute("SHOW WARNINGS")
        out["casts"]["show_warnings"] = self.rec.rows(cur.fetchall())
        cur.execute("DROP TABLE IF EXISTS compat_never_existed")
        out["drop_if_exists"] = {"warnings": cur.warning_count}
        cur.execute("SHOW COUNT(*) WARNINGS")
        out["drop_if_exists"]["count"] = cur.fetchone()[0]
        cur.execute("SELECT 1")
        out["clean"] = {"warnings": cur.warning_count}
        return out

    def large(self):
        cur = self.conn.cursor()
        out = {}
        blob = det_bytes(5 * 1024 * 1024, "compat-5mb")
        cur.execute("INSERT INTO compat_big VALUES (%s, %s)", (1, blob))
        out["insert_5mb"] = {"rowcount": cur.rowcount, "sent_sha1": hashlib.sha1(blob).hexdigest()}
        cur.execute("SELECT id, b, LENGTH(b), SHA1(b) FROM compat_big WHERE id = 1")
        out["select_5mb"] = self.rec.result(cur)

        # Past 16 MiB a packet is split in several; only tried when the server accepts it.
        cur.execute("SELECT @@max_allowed_packet >= 64 * 1024 * 1024")
        if cur.fetchone()[0]:
            conn = self.connect(max_allowed_packet=64 * 1024 * 1024)
            big_cur = conn.cursor()
            size = 17 * 1024 * 1024 + 3
            huge = det_bytes(size, "compat-17mb")
            big_cur.execute("INSERT INTO compat_big VALUES (%s, %s)", (2, huge))
            out["insert_17mb"] = {
                "rowcount": big_cur.rowcount,
                "sent_sha1": hashlib.sha1(huge).hexdigest(),
            }
            big_cur.execute("SELECT id, b, LENGTH(b), SHA1(b) FROM compat_big WHERE id = 2")
            out["select_17mb"] = self.rec.result(big_cur)
            big_cur.execute(f"SELECT REPEAT('ab', {9 * 1024 * 1024}) AS r")
            out["server_generated_18mb"] = self.rec.result(big_cur)
            conn.close()
        else:
            out["beyond_16mb"] = "skipped: server max_allowed_packet below 64M"
        return out

    def multi_statements(self):
        conn = self.connect(client_flag=CLIENT.MULTI_STATEMENTS)
        cur = conn.cursor()
        out = {}
        cur.execute(
            "SELECT 1 AS a; SELECT 'x' AS b, 2 AS c UNION ALL SELECT 'y', 3; "
            "UPDATE compat_rows SET n = n WHERE id < 0; "
            "INSERT INTO compat_tx VALUES (20, 'multi'); "
            "SELECT COUNT(*) AS rows_now FROM compat_rows"
        )
        out["mixed"] = self.rec.all_results(cur)
        out["status_after"] = status(conn)
        results = []
        try:
            cur.execute("SELECT 1 AS first; SELECT * FROM compat_no_such_table; SELECT 3")
            results.append(self.rec.result(cur))
            while cur.nextset():
                results.append(self.rec.result(cur))
            out["error_in_middle"] = {"results": results, "error": None}
        except pymysql.MySQLError as exc:
            out["error_in_middle"] = {"results": results, "error": self.rec.error(exc)}
        cur.execute("SELECT 'still usable' AS s")
        out["after_error"] = self.rec.all_results(cur)
        conn.close()
        return out

    def procedure(self):
        cur = self.conn.cursor()
        out = {}
        cur.callproc("compat_two", (3,))
        out["callproc"] = self.rec.all_results(cur)
        cur.execute("SELECT @_compat_two_0")
        out["callproc_variable"] = self.rec.result(cur)
        cur.execute("CALL compat_two(2)")
        out["call"] = self.rec.all_results(cur)
        cur.execute("SELECT 'after call' AS s")
        out["after"] = self.rec.result(cur)
        return out

    def session(self):
        conn = self.conn
        cur = conn.cursor()
        out = {}
        cur.execute("SELECT DATABASE()")
        out["database_is_given"] = cur.fetchone()[0] == self.args.database
        conn.select_db("information_schema")
        cur.execute("SELECT DATABASE()")
        out["after_select_db"] = cur.fetchone()[0]
        cur.execute(
            "SELECT COUNT(*) FROM TABLES "
            "WHERE TABLE_SCHEMA = 'information_schema' AND TABLE_NAME = 'TABLES'"
        )
        out["unqualified_in_information_schema"] = cur.fetchone()[0]
        conn.select_db(self.args.database)
        cur.execute("SELECT DATABASE()")
        out["back"] = cur.fetchone()[0] == self.args.database
        try:
            conn.select_db("compat_no_such_database")
            out["select_db_missing"] = "accepted"
        except pymysql.MySQLError as exc:
            out["select_db_missing"] = self.rec.error(exc)
        # The id the handshake gave is the one the session reads, and finds itself by.
        cur.execute("SELECT CONNECTION_ID()")
        out["connection_id_is_the_handshakes"] = cur.fetchone()[0] == conn.thread_id()
        cur.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID()")
        out["own_processlist_row"] = [r[0] == conn.thread_id() for r in cur.fetchall()]
        out["ping"] = repr(conn.ping(reconnect=False))
        cur.execute("SELECT 'after ping' AS s")
        out["after_ping"] = self.rec.result(cur)
        cur.execute("SET @compat_v = 42, @compat_s = 'kept'")
        cur.execute("SELECT @compat_v, @compat_s")
        out["user_variables"] = self.rec.rows(cur.fetchall())
        cur.execute("SET SESSION sql_mode = 'ANSI_QUOTES,NO_BACKSLASH_ESCAPES'")
        out["status_no_backslash"] = status(conn)
        cur.execute("SELECT @@sql_mode, 'ansi' AS \"quoted\", 'a\\b' AS raw_backslash")
        out["sql_mode"] = self.rec.result(cur)
        # PyMySQL escapes parameters according to the NO_BACKSLASH_ESCAPES status bit.
        cur.execute("SELECT %s AS p", ("back\\slash 'q'",))
        out["escaping_by_status"] = self.rec.result(cur)
        cur.execute("SET SESSION sql_mode = DEFAULT")
        cur.execute("SELECT @@session.time_zone, @@session.autocommit")
        out["variables"] = self.rec.rows(cur.fetchall())
        return out

    def streaming(self):
        cur = self.conn.cursor()
        cur.executemany("INSERT INTO compat_digits VALUES (%s)", [(i,) for i in range(10)])
        query = (
            "SELECT a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 10000 * f.d AS n, "
            "CONCAT('r', a.d, b.d, c.d, e.d, f.d) AS tag "
            "FROM compat_digits a, compat_digits b, compat_digits c, compat_digits e, "
            "compat_digits f ORDER BY n"
        )
        out = {}
        sscur = self.conn.cursor(pymysql.cursors.SSCursor)
        sscur.execute(query)
        digest = hashlib.sha1()
        count = 0
        total = 0
        for n, tag in sscur:
            count += 1
            total += n
            digest.update(f"{n}:{tag};".encode())
        out["full"] = {
            "rows": count,
            "sum": total,
            "sha1": digest.hexdigest(),
            "expected_rows": STREAM_ROWS,
            "fields": self.rec.fields(sscur),
        }
        sscur.close()

        # Abandoning a stream part way: the driver drains the rest on close and the
        # connection must stay in step.
        sscur = self.conn.cursor(pymysql.cursors.SSCursor)
        sscur.execute(query)
        first = sscur.fetchmany(3)
        sscur.close()
        cur.execute("SELECT 'in step' AS s")
        out["abandoned"] = {
            "first": self.rec.rows(first),
            "next_query": self.rec.rows(cur.fetchall()),
        }
        return out


def run_sha2(args):
    """Just connect (the account may use caching_sha2_password) and ask who we are."""
    params = dict(
        host=args.host,
        port=args.port,
        user=args.user,
        password=args.password,
        database=args.database,
        charset="utf8mb4",
        connect_timeout=30,
    )
    if args.ssl_ca:
        params.update(ssl_ca=args.ssl_ca, ssl_verify_cert=True)
    conn = pymysql.connect(**params)
    try:
        cur = conn.cursor()
        cur.execute("SELECT 1, CURRENT_USER()")
        rec = Recorder(args.database)
        return {"select": rec.result(cur)}
    finally:
        conn.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--user", required=True)
    parser.add_argument("--password", default="")
    parser.add_argument("--database", required=True)
    parser.add_argument("--ssl-ca", dest="ssl_ca")
    parser.add_argument("--scenario", default="full", choices=["full", "sha2"])
    args = parser.parse_args()

    try:
        if args.scenario == "sha2":
            body = run_sha2(args)
        else:
            scenario = Scenario(args)
            try:
                body = scenario.run()
            finally:
                scenario.close()
        doc = {
            "driver": {"name": "PyMySQL", "version": importlib.metadata.version("PyMySQL")},
            "scenario": args.scenario,
            "result": body,
        }
        print(json.dumps(doc, sort_keys=True, ensure_ascii=False, indent=1))
    except Exception:  # noqa: BLE001 - report anything unexpected and fail
        traceback.print_exc(file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
