#!/usr/bin/env node
// Compatibility check for Sluice with a real Node.js driver (mysql2, promise API).
//
// Runs a fixed scenario against one server (MariaDB directly, or Sluice in front of it)
// and prints ONE canonical JSON document (sorted keys) of everything the driver observed.
// Run it once directly and once through the proxy: the two documents must be equal.
//
// Nothing that legitimately differs between two runs is recorded: no connection or
// thread ids, no server version, no times, no random data, and database names are masked.
//
// Usage:
//   node compat.js --host H --port P --user U --password PW --database DB
//                  [--ssl-ca FILE] [--user2 U2 --password2 PW2]
//                  [--scenario full|sha2|tracking|kill|rowcount]
//
// Exit status: 0 when the scenario ran; 1 on an unexpected exception (printed to stderr).
'use strict';

const crypto = require('node:crypto');
const fs = require('node:fs');
const mysql = require('mysql2/promise');
const mysqlPackage = require('mysql2/package.json');

// Server status bits that describe the session and must survive a proxy unchanged:
// IN_TRANS, AUTOCOMMIT, MORE_RESULTS_EXISTS, NO_BACKSLASH_ESCAPES. Others (e.g.
// QUERY_WAS_SLOW, SESSION_STATE_CHANGED) depend on timing or on the server link.
const STABLE_STATUS = 0x0001 | 0x0002 | 0x0008 | 0x0200;

// Values longer than this are recorded by length and SHA-1 only.
const INLINE_LIMIT = 256;

const STREAM_ROWS = 100000;

function parseArgs(argv) {
  const spec = {
    host: '127.0.0.1',
    port: null,
    user: null,
    password: '',
    database: null,
    'ssl-ca': null,
    user2: null,
    password2: '',
    scenario: 'full',
  };
  const args = { ...spec };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (!arg.startsWith('--')) throw new Error(`unexpected argument: ${arg}`);
    let name = arg.slice(2);
    let value;
    const eq = name.indexOf('=');
    if (eq >= 0) {
      value = name.slice(eq + 1);
      name = name.slice(0, eq);
    } else {
      value = argv[++i];
    }
    if (!(name in spec)) throw new Error(`unknown option --${name}`);
    if (value === undefined) throw new Error(`--${name} needs a value`);
    args[name] = value;
  }
  for (const required of ['port', 'user', 'database']) {
    if (args[required] === null) throw new Error(`--${required} is required`);
  }
  args.port = Number(args.port);
  if (!['full', 'sha2', 'tracking', 'kill', 'rowcount'].includes(args.scenario)) {
    throw new Error(`unknown scenario ${args.scenario}`);
  }
  return args;
}

// n deterministic pseudo-random bytes: AES-128-CTR over zeros, keyed by the seed.
function detBytes(n, seed) {
  const key = crypto.createHash('sha256').update(seed).digest();
  const cipher = crypto.createCipheriv('aes-128-ctr', key.subarray(0, 16), key.subarray(16, 32));
  return Buffer.concat([cipher.update(Buffer.alloc(n)), cipher.final()]);
}

function sha1(data) {
  return crypto.createHash('sha1').update(data).digest('hex');
}

// Recursively sorts object keys so that JSON.stringify gives one canonical text.
function canonical(value) {
  if (Array.isArray(value)) return value.map(canonical);
  if (value && typeof value === 'object') {
    const out = {};
    for (const key of Object.keys(value).sort()) out[key] = canonical(value[key]);
    return out;
  }
  return value;
}

class Recorder {
  constructor(databases) {
    this.databases = databases.filter(Boolean);
  }

  mask(text) {
    if (typeof text !== 'string') return text ?? null;
    let out = text;
    for (const db of this.databases) {
      out = out.split(`'${db}.`).join("'<db>.").split(`\`${db}\``).join('`<db>`');
    }
    // The host in "Access denied for user 'u'@'host'" is where the server saw the
    // client come from, which a proxy changes.
    return out.replace(/('[^']*'@)'[^']*'/g, "$1'<host>'");
  }

  maskDb(db) {
    return this.databases.includes(db) ? '<db>' : db;
  }

  // A typed, canonical form of one value as the driver returned it.
  value(v) {
    if (v === null || v === undefined) return null;
    if (typeof v === 'boolean') return v;
    if (typeof v === 'number') return Number.isFinite(v) ? v : { number: String(v) };
    if (typeof v === 'bigint') return { bigint: v.toString() };
    if (typeof v === 'string') {
      if (v.length <= INLINE_LIMIT) return v;
      const raw = Buffer.from(v, 'utf8');
      return { str_chars: [...v].length, str_len: raw.length, sha1: sha1(raw) };
    }
    if (Buffer.isBuffer(v)) {
      if (v.length <= INLINE_LIMIT) return { bytes: v.toString('hex') };
      return { bytes_len: v.length, sha1: sha1(v) };
    }
    if (v instanceof Date) {
      return { date: Number.isNaN(v.getTime()) ? 'invalid' : v.toISOString() };
    }
    if (typeof v === 'object') return { json: JSON.stringify(canonical(v)) };
    throw new TypeError(`no canonical form for ${typeof v}: ${v}`);
  }

  row(row) {
    return Array.isArray(row) ? row.map((v) => this.value(v)) : this.value(row);
  }

  fields(fields) {
    if (!fields) return null;
    return fields.map((f) => ({
      name: f.name,
      org_name: f.orgName,
      table: f.table,
      org_table: f.orgTable,
      db: this.maskDb(f.schema),
      type: f.columnType,
      length: f.columnLength,
      charset: f.characterSet,
      flags: f.flags,
      decimals: f.decimals,
      extended_type: f.extendedTypeName ?? null,
      extended_format: f.extendedFormat ?? null,
    }));
  }

  header(h) {
    return {
      affected_rows: h.affectedRows,
      insert_id: this.value(h.insertId),
      info: h.info || null,
      status: h.serverStatus & STABLE_STATUS,
      warnings: h.warningStatus,
      changed_rows: h.changedRows ?? null,
    };
  }

  // One result: either an OK header or rows with their column metadata.
  result(rows, fields) {
    if (rows && !Array.isArray(rows) && rows.constructor.name === 'ResultSetHeader') {
      return { ok: this.header(rows) };
    }
    return { fields: this.fields(fields), rows: rows.map((r) => this.row(r)) };
  }

  // [rows, fields] as returned by query()/execute(), with several results when the
  // statement produced them (multi-statements, CALL).
  results([rows, fields]) {
    const multi =
      Array.isArray(rows) &&
      rows.length > 0 &&
      (Array.isArray(rows[0]) || rows[0]?.constructor?.name === 'ResultSetHeader') &&
      Array.isArray(fields) &&
      fields.length === rows.length &&
      fields.some((f) => Array.isArray(f) || f === undefined);
    if (!multi) return [this.result(rows, fields)];
    return rows.map((r, i) => this.result(r, fields[i]));
  }

  error(err) {
    if (err.errno === undefined && err.sqlState === undefined) throw err;
    return {
      code: err.code ?? null,
      errno: err.errno ?? null,
      sql_state: err.sqlState ?? null,
      sql_message: this.mask(err.sqlMessage ?? null),
    };
  }
}

class Scenario {
  constructor(args) {
    this.args = args;
    this.rec = new Recorder([args.database]);
    this.open = [];
  }

  options(extra = {}) {
    const a = this.args;
    const opts = {
      host: a.host,
      port: a.port,
      user: a.user,
      password: a.password,
      database: a.database,
      supportBigNumbers: true,
      bigNumberStrings: true,
      timezone: 'Z',
      // Arrays keep column order and duplicate names, as the server sent them.
      rowsAsArray: true,
      connectTimeout: 30000,
      ...extra,
    };
    if (a['ssl-ca']) {
      opts.ssl = {
        ca: fs.readFileSync(a['ssl-ca']),
        rejectUnauthorized: true,
        // The test certificates name the loopback host loosely; the CA check is what counts.
        checkServerIdentity: () => undefined,
      };
    }
    return opts;
  }

  async connect(extra = {}) {
    const conn = await mysql.createConnection(this.options(extra));
    this.open.push(conn);
    await conn.query("SET time_zone = '+00:00'");
    return conn;
  }

  async closeAll() {
    for (const conn of this.open.splice(0)) {
      try {
        await conn.end();
      } catch {
        conn.destroy();
      }
    }
  }

  async tryError(fn) {
    try {
      const res = await fn();
      return { unexpected_success: res === undefined ? null : this.rec.results(res) };
    } catch (err) {
      return this.rec.error(err);
    }
  }

  // -- sections ------------------------------------------------------------

  // What the handshake left behind.
  async connectInfo() {
    const [[[autocommit, charset, collation]]] = await this.conn.query(
      'SELECT @@autocommit, @@character_set_client, @@collation_connection',
    );
    return {
      tls: this.args['ssl-ca']
        ? Boolean(this.conn.connection.stream && this.conn.connection.stream.encrypted)
        : null,
      autocommit,
      charset,
      collation,
    };
  }

  async schema() {
    const c = this.conn;
    const statements = [
      'DROP PROCEDURE IF EXISTS compatjs_two',
      'DROP TABLE IF EXISTS compatjs_types, compatjs_params, compatjs_tx, compatjs_big, ' +
        'compatjs_digits, compatjs_uniq',
      `CREATE TABLE compatjs_types (
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
      ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
      `CREATE TABLE compatjs_params (
        id INT NOT NULL AUTO_INCREMENT PRIMARY KEY,
        i INT, bi BIGINT, bu BIGINT UNSIGNED, d DOUBLE, de DECIMAL(20,6),
        dt DATE, dtm DATETIME(3), s VARCHAR(64) CHARACTER SET utf8mb4, b VARBINARY(64),
        js JSON, flag TINYINT(1)
      ) ENGINE=InnoDB`,
      'CREATE TABLE compatjs_tx (id INT PRIMARY KEY, v VARCHAR(16)) ENGINE=InnoDB',
      'CREATE TABLE compatjs_big (id INT PRIMARY KEY, b LONGBLOB) ENGINE=InnoDB',
      'CREATE TABLE compatjs_digits (d INT PRIMARY KEY) ENGINE=InnoDB',
      'CREATE TABLE compatjs_uniq (id INT PRIMARY KEY, k VARCHAR(8) UNIQUE) ENGINE=InnoDB',
      `CREATE PROCEDURE compatjs_two(IN k INT)
       BEGIN
         SELECT k AS k, 'first' AS which;
         SELECT id, i, s FROM compatjs_params WHERE id <= k ORDER BY id;
       END`,
    ];
    const out = [];
    for (const sql of statements) {
      const [res] = await c.query(sql);
      // DROP ... IF EXISTS warns only when the object was missing: not recorded.
      out.push({ affected_rows: res.affectedRows });
    }
    out.push(
      this.rec.results(
        await c.query(
          'SELECT TABLE_NAME, ENGINE, TABLE_COLLATION FROM information_schema.TABLES ' +
            "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME LIKE 'compatjs\\_%' ORDER BY TABLE_NAME",
        ),
      ),
    );
    return out;
  }

  async types() {
    const c = this.conn;
    const out = {};
    const [ins] = await c.query(
      `INSERT INTO compatjs_types VALUES
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
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)`,
    );
    out.insert = this.rec.header(ins);
    out.text = this.rec.results(await c.query('SELECT * FROM compatjs_types ORDER BY id'));
    // The same rows in the binary protocol (server-side prepared statement).
    out.binary = this.rec.results(await c.execute('SELECT * FROM compatjs_types ORDER BY id'));
    out.binary_by_id = [];
    for (const id of [1, 2, 3]) {
      out.binary_by_id.push(
        this.rec.results(await c.execute('SELECT * FROM compatjs_types WHERE id = ?', [id])),
      );
    }
    out.as_text = this.rec.results(
      await c.query(
        'SELECT id, CAST(dtm AS CHAR), CAST(tm AS CHAR), HEX(bt), CAST(de AS CHAR), ' +
          'CHAR_LENGTH(vc), LENGTH(vc), HEX(vc) FROM compatjs_types ORDER BY id',
      ),
    );
    const exprs =
      "SELECT 1 + 1 AS two, 'x' AS s, NULL AS n, 1.5 AS dec_lit, 2.5e0 AS dbl_lit, " +
      'CAST(18446744073709551615 AS UNSIGNED) AS umax, -0.000001 AS tiny, ' +
      "CAST('2001-02-03' AS DATE) AS d, TIMESTAMP'2001-02-03 04:05:06.5' AS ts, " +
      "CAST('1:02:03.25' AS TIME(2)) AS t, X'41FF' AS hex, b'101' AS bits, " +
      "JSON_OBJECT('k', 1, 'l', JSON_ARRAY(1, 'two')) AS jo";
    out.expressions_text = this.rec.results(await c.query(exprs));
    out.expressions_binary = this.rec.results(await c.execute(exprs));
    return out;
  }

  async prepared() {
    const c = this.conn;
    const out = {};
    const insert =
      'INSERT INTO compatjs_params (i, bi, bu, d, de, dt, dtm, s, b, js, flag) ' +
      'VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)';
    const paramSets = [
      [
        1,
        '9223372036854775807',
        '18446744073709551615',
        1.5,
        '1234.5',
        '2020-01-02',
        new Date(Date.UTC(2020, 0, 2, 3, 4, 5, 678)),
        'plain',
        Buffer.from('0001ff', 'hex'),
        '{"k": [1, 2]}',
        true,
      ],
      [
        -2,
        BigInt('-9223372036854775808'),
        0,
        -0.25,
        '-0.000001',
        new Date(Date.UTC(1999, 11, 31)),
        '2038-01-19 03:14:07.999',
        'it\'s "quoted" \\ ünï 🦀',
        Buffer.alloc(0),
        { a: null, b: 'x' },
        false,
      ],
      [null, null, null, null, null, null, null, null, null, null, null],
      [
        2147483647,
        42,
        7,
        1e-300,
        '99999999999999.999999',
        '2000-02-29',
        '2000-02-29 12:00:00',
        '',
        Buffer.from([0, 39, 34, 92, 26]),
        '[]',
        0,
      ],
    ];
    out.inserts = [];
    for (const params of paramSets) {
      const [res] = await c.execute(insert, params);
      out.inserts.push(this.rec.header(res));
    }
    out.select_binary = this.rec.results(
      await c.execute('SELECT * FROM compatjs_params WHERE id >= ? ORDER BY id', [1]),
    );
    out.select_text = this.rec.results(await c.query('SELECT * FROM compatjs_params ORDER BY id'));
    // Parameters used in expressions: types the server infers from the bound values.
    out.echo = this.rec.results(
      await c.execute('SELECT ? AS a, ? AS b, ? AS c, ? AS d, ? AS e, ? IS NULL AS f', [
        7,
        'text',
        Buffer.from('abc'),
        2.5,
        new Date(Date.UTC(2001, 1, 3, 4, 5, 6)),
        null,
      ]),
    );
    // Explicit prepare: metadata, several executions, close.
    const stmt = await c.prepare('SELECT id, s FROM compatjs_params WHERE id = ? OR s = ?');
    out.explicit = {
      params: stmt.statement.parameters.length,
      columns: this.rec.fields(stmt.statement.columns),
      runs: [],
    };
    for (const params of [
      [1, ''],
      [2, 'nope'],
      [99, null],
    ]) {
      out.explicit.runs.push(this.rec.results(await stmt.execute(params)));
    }
    await stmt.close();
    out.after_close = this.rec.results(
      await c.execute('SELECT COUNT(*) AS n FROM compatjs_params'),
    );
    out.wrong_param_count = await this.tryError(() => c.execute('SELECT ? + ?', [1]));
    out.prepare_error = await this.tryError(() =>
      c.execute('SELECT * FROM compatjs_missing WHERE id = ?', [1]),
    );
    out.rowcount_update = this.rec.results(
      await c.execute('UPDATE compatjs_params SET i = i WHERE id <= ?', [2]),
    );
    out.in_text_with_placeholders = this.rec.results(
      await c.query('SELECT ? AS a, ? AS b, ?? AS col FROM compatjs_params WHERE id = 1', [
        "o'reilly",
        Buffer.from([1, 2]),
        'id',
      ]),
    );
    return out;
  }

  async transactions() {
    const a = this.conn;
    const b = await this.connect();
    const seenByB = async () =>
      (await b.query('SELECT id, v FROM compatjs_tx ORDER BY id'))[0].map((r) => this.rec.row(r));
    const out = {};
    await a.beginTransaction();
    const [ins] = await a.query("INSERT INTO compatjs_tx VALUES (1, 'committed')");
    out.status_in_transaction = this.rec.header(ins).status;
    out.other_before_commit = await seenByB();
    await a.commit();
    out.other_after_commit = await seenByB();

    await a.beginTransaction();
    await a.query("INSERT INTO compatjs_tx VALUES (2, 'rolled back')");
    await a.execute('UPDATE compatjs_tx SET v = ? WHERE id = ?', ['changed', 1]);
    out.own_before_rollback = this.rec.results(
      await a.query('SELECT id, v FROM compatjs_tx ORDER BY id'),
    );
    await a.rollback();
    out.own_after_rollback = this.rec.results(
      await a.query('SELECT id, v FROM compatjs_tx ORDER BY id'),
    );
    out.other_after_rollback = await seenByB();

    await a.query('SET autocommit = 0');
    const [ins2] = await a.execute('INSERT INTO compatjs_tx VALUES (?, ?)', [3, 'no autocommit']);
    out.status_autocommit_off = this.rec.header(ins2).status;
    out.other_autocommit_off = await seenByB();
    await a.query('COMMIT');
    out.other_after_commit_statement = await seenByB();
    const [set] = await a.query('SET autocommit = 1');
    out.status_autocommit_on = this.rec.header(set).status;
    await b.end();
    this.open = this.open.filter((x) => x !== b);
    return out;
  }

  async errors() {
    const c = this.conn;
    await c.query("INSERT INTO compatjs_uniq VALUES (1, 'one')");
    const cases = {
      duplicate_key_query: () => c.query("INSERT INTO compatjs_uniq VALUES (2, 'one')"),
      duplicate_key_execute: () => c.execute('INSERT INTO compatjs_uniq VALUES (?, ?)', [1, 'uno']),
      syntax: () => c.query('SELEC 1 FROM'),
      syntax_prepare: () => c.execute('SELEC ? FROM', [1]),
      unknown_table: () => c.query('SELECT * FROM compatjs_no_such_table'),
      unknown_column: () => c.query('SELECT no_such_column FROM compatjs_uniq'),
      data_too_long: () =>
        c.execute('INSERT INTO compatjs_uniq VALUES (?, ?)', [3, 'much too long']),
      division_strict: () => c.query("INSERT INTO compatjs_uniq VALUES (1/0, 'zero')"),
      signal: () =>
        c.query(
          "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'raised by compat', MYSQL_ERRNO = 1644",
        ),
    };
    const out = {};
    for (const [name, fn] of Object.entries(cases)) {
      out[name] = await this.tryError(fn);
      // The session must be usable right after an error.
      const [[[n]]] = await c.query('SELECT COUNT(*) FROM compatjs_uniq');
      out[name].after = n;
    }
    return out;
  }

  async warnings() {
    const c = this.conn;
    const out = {};
    out.division = this.rec.results(await c.query('SELECT 1/0 AS q'));
    out.division_warnings = this.rec.results(await c.query('SHOW WARNINGS'));
    const [res] = await c.query(
      "UPDATE compatjs_tx SET v = 'far too long for v' WHERE id = 1 AND 0",
    );
    out.update_header = this.rec.header(res);
    const [ins] = await c.query(
      "INSERT IGNORE INTO compatjs_uniq VALUES (1, 'dup'), (7, 'far too long')",
    );
    out.insert_ignore = this.rec.header(ins);
    out.insert_ignore_warnings = this.rec.results(await c.query('SHOW WARNINGS'));
    out.execute_warning = this.rec.results(
      await c.execute('SELECT CAST(? AS SIGNED) AS c', ['12abc']),
    );
    out.ping = (await c.ping()) ?? null;
    // The id the handshake gave is the one the session reads, and finds itself by.
    const [[[cid]]] = await c.query({ sql: 'SELECT CONNECTION_ID()', rowsAsArray: true });
    out.connection_id_is_the_handshakes = Number(cid) === c.threadId;
    const [own] = await c.query({
      sql: 'SELECT ID FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID()',
      rowsAsArray: true,
    });
    out.own_processlist_row = own.map(([id]) => Number(id) === c.threadId);
    const [[[db]]] = await c.query('SELECT DATABASE()');
    out.database_is_given = db === this.args.database;
    return out;
  }

  async large() {
    const c = this.conn;
    const out = {};
    const blob = detBytes(5 * 1024 * 1024, 'compatjs-5mb');
    const [ins] = await c.execute('INSERT INTO compatjs_big VALUES (?, ?)', [1, blob]);
    out.insert_5mb_execute = { affected_rows: ins.affectedRows, sent_sha1: sha1(blob) };
    const [ins2] = await c.query('INSERT INTO compatjs_big VALUES (?, ?)', [2, blob]);
    out.insert_5mb_query = { affected_rows: ins2.affectedRows };
    out.select_5mb_text = this.rec.results(
      await c.query('SELECT id, b, LENGTH(b), SHA1(b) FROM compatjs_big ORDER BY id'),
    );
    out.select_5mb_binary = this.rec.results(
      await c.execute('SELECT id, b, LENGTH(b), SHA1(b) FROM compatjs_big WHERE id = ?', [1]),
    );
    // Past 16 MiB a packet is split in several; only tried when the server accepts it.
    const [[[big]]] = await c.query('SELECT @@max_allowed_packet >= 64 * 1024 * 1024');
    if (Number(big)) {
      const huge = detBytes(17 * 1024 * 1024 + 3, 'compatjs-17mb');
      const [ins3] = await c.execute('INSERT INTO compatjs_big VALUES (?, ?)', [3, huge]);
      out.insert_17mb = { affected_rows: ins3.affectedRows, sent_sha1: sha1(huge) };
      out.select_17mb_binary = this.rec.results(
        await c.execute('SELECT id, b, LENGTH(b), SHA1(b) FROM compatjs_big WHERE id = ?', [3]),
      );
      out.select_17mb_text = this.rec.results(
        await c.query('SELECT id, b, LENGTH(b), SHA1(b) FROM compatjs_big WHERE id = 3'),
      );
    } else {
      out.beyond_16mb = 'skipped: server max_allowed_packet below 64M';
    }
    return out;
  }

  async multipleStatements() {
    const c = await this.connect({ multipleStatements: true });
    const out = {};
    out.mixed = this.rec.results(
      await c.query(
        "SELECT 1 AS a; SELECT 'x' AS b, 2 AS c UNION ALL SELECT 'y', 3; " +
          'UPDATE compatjs_tx SET v = v WHERE id < 0; ' +
          "INSERT INTO compatjs_tx VALUES (20, 'multi'); " +
          'SELECT COUNT(*) AS n FROM compatjs_tx',
      ),
    );
    out.error_in_middle = await this.tryError(() =>
      c.query('SELECT 1 AS first; SELECT * FROM compatjs_no_such_table; SELECT 3'),
    );
    out.after_error = this.rec.results(await c.query("SELECT 'still usable' AS s"));
    await c.end();
    this.open = this.open.filter((x) => x !== c);
    return out;
  }

  async procedure() {
    const c = this.conn;
    return {
      call_text: this.rec.results(await c.query('CALL compatjs_two(?)', [3])),
      call_binary: this.rec.results(await c.execute('CALL compatjs_two(?)', [2])),
      after: this.rec.results(await c.query("SELECT 'after call' AS s")),
    };
  }

  async changeUser() {
    const c = this.conn;
    const out = {};
    await c.query('SET @compatjs_v = 42');
    await c.changeUser({ database: 'information_schema' });
    const [[[db, v]]] = await c.query('SELECT DATABASE(), @compatjs_v');
    out.to_information_schema = { database: db, variable_after: this.rec.value(v) };
    // Prepared statements do not survive COM_CHANGE_USER; the driver prepares again.
    out.execute_after = this.rec.results(await c.execute('SELECT ? + 1 AS n', [1]));
    await c.changeUser({ database: this.args.database });
    const [[[back]]] = await c.query('SELECT DATABASE()');
    out.back = back === this.args.database;
    if (this.args.user2) {
      await c.changeUser({
        user: this.args.user2,
        password: this.args.password2,
        database: this.args.database,
      });
      const [[[who]]] = await c.query('SELECT SUBSTRING_INDEX(CURRENT_USER(), "@", 1)');
      out.user2 = { user: who === this.args.user2 };
      await c.changeUser({
        user: this.args.user,
        password: this.args.password,
        database: this.args.database,
      });
      const [[[who2]]] = await c.query('SELECT SUBSTRING_INDEX(CURRENT_USER(), "@", 1)');
      out.user_back = { user: who2 === this.args.user };
    }
    out.wrong_password = await this.tryError(async () => {
      const other = await this.connect();
      try {
        await other.changeUser({ user: this.args.user, password: `${this.args.password}-wrong` });
      } finally {
        other.destroy();
        this.open = this.open.filter((x) => x !== other);
      }
    });
    await c.query("SET time_zone = '+00:00'");
    return out;
  }

  async reset() {
    const c = this.conn;
    const out = { available: typeof c.reset === 'function' };
    if (!out.available) return out;
    await c.query('SET @compatjs_r = 1, autocommit = 0');
    await c.query('CREATE TEMPORARY TABLE compatjs_tmp (x INT)');
    await c.query("SET time_zone = '+05:00'");
    await c.reset();
    const [[row]] = await c.query(
      'SELECT @compatjs_r AS r, @@autocommit AS ac, @@time_zone AS tz, DATABASE() = ? AS same_db',
      [this.args.database],
    );
    out.after = this.rec.row(row);
    out.temp_table = await this.tryError(() => c.query('SELECT * FROM compatjs_tmp'));
    out.execute_after = this.rec.results(await c.execute('SELECT ? * 2 AS n', [21]));
    await c.query("SET time_zone = '+00:00'");
    return out;
  }

  async pool() {
    const pool = mysql.createPool({
      ...this.options(),
      connectionLimit: 3,
      waitForConnections: true,
    });
    try {
      const queries = [];
      for (let i = 0; i < 12; i++) {
        const q =
          i % 2 === 0
            ? pool.query('SELECT ? AS n, SLEEP(0.01) AS s, DATABASE() = ? AS same_db', [
                i,
                this.args.database,
              ])
            : pool.execute('SELECT ? AS n, COUNT(*) AS rows_in_tx FROM compatjs_tx', [i]);
        queries.push(q.then((res) => this.rec.results(res)));
      }
      const out = { concurrent: await Promise.all(queries) };
      const conn = await pool.getConnection();
      try {
        await conn.beginTransaction();
        await conn.query("INSERT INTO compatjs_tx VALUES (30, 'pooled')");
        await conn.commit();
      } finally {
        conn.release();
      }
      out.after_pooled_commit = this.rec.results(
        await pool.query('SELECT id, v FROM compatjs_tx WHERE id = 30'),
      );
      return out;
    } finally {
      await pool.end();
    }
  }

  async streaming() {
    const c = this.conn;
    const digits = [];
    for (let i = 0; i < 10; i++) digits.push(`(${i})`);
    await c.query(`INSERT INTO compatjs_digits VALUES ${digits.join(',')}`);
    const sql =
      'SELECT a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 10000 * f.d AS n, ' +
      "CONCAT('r', a.d, b.d, c.d, e.d, f.d) AS tag " +
      'FROM compatjs_digits a, compatjs_digits b, compatjs_digits c, compatjs_digits e, ' +
      'compatjs_digits f ORDER BY n';
    const hash = crypto.createHash('sha1');
    let rows = 0;
    let sum = 0n;
    let fields = null;
    await new Promise((resolve, reject) => {
      // The callback API streams rows as they arrive instead of buffering them.
      const q = c.connection.query(sql);
      q.on('error', reject)
        .on('fields', (f) => {
          fields = f;
        })
        .on('result', (row) => {
          rows += 1;
          sum += BigInt(row[0]);
          hash.update(`${row[0]}:${row[1]};`);
        })
        .on('end', resolve);
    });
    return {
      rows,
      sum: sum.toString(),
      sha1: hash.digest('hex'),
      expected_rows: STREAM_ROWS,
      fields: this.rec.fields(fields),
      next_query: this.rec.results(await c.query("SELECT 'in step' AS s")),
    };
  }
}

async function runFull(args) {
  const s = new Scenario(args);
  try {
    s.conn = await s.connect();
    const out = { connect: await s.connectInfo() };
    for (const name of [
      'schema',
      'types',
      'prepared',
      'transactions',
      'errors',
      'warnings',
      'large',
      'multipleStatements',
      'procedure',
      'changeUser',
      'reset',
      'pool',
      'streaming',
    ]) {
      out[name] = await s[name]();
    }
    return out;
  } finally {
    await s.closeAll();
  }
}

async function runSha2(args) {
  const s = new Scenario(args);
  try {
    const conn = await s.connect();
    return {
      select: s.rec.results(await conn.query('SELECT 1, CURRENT_USER()')),
      select_binary: s.rec.results(await conn.execute('SELECT ?, CURRENT_USER()', [1])),
    };
  } finally {
    await s.closeAll();
  }
}

// Session tracking (mysql2 negotiates CLIENT_SESSION_TRACK): each OK's status, with
// SESSION_STATE_CHANGED, and the state changes the driver decoded, under the server's
// default session_track_* settings and after the client changes them.
const TRACKING_STATUS = STABLE_STATUS | 0x4000 | 0x8000;

async function runTracking(args) {
  const s = new Scenario(args);
  try {
    const conn = await s.connect();
    const out = [];
    for (const sql of [
      'SELECT @@session_track_system_variables, @@session_track_state_change',
      'SET @a = 1',
      'CREATE TEMPORARY TABLE tracked_tmp (i INT)',
      'DROP TEMPORARY TABLE tracked_tmp',
      'SET SESSION sql_mode = ANSI',
      "SET time_zone = '+01:00'",
      `USE ${args.database}`,
      "SET SESSION session_track_system_variables = 'sql_mode'",
      'SELECT @@session_track_system_variables',
      "SET sql_mode = 'TRADITIONAL'",
      "SET time_zone = '+02:00'",
      'SET SESSION session_track_state_change = ON',
      'SET @b = 2',
      'SET SESSION session_track_system_variables = DEFAULT, session_track_state_change = DEFAULT',
      "SET SESSION session_track_system_variables = 'time_zone', session_track_schema = OFF",
      'SELECT @@session_track_system_variables, @@session_track_state_change',
    ]) {
      const [rows] = await conn.query({ sql, rowsAsArray: true });
      if (Array.isArray(rows)) {
        out.push({ sql, rows });
      } else {
        out.push({
          sql,
          status: rows.serverStatus & TRACKING_STATUS,
          state_changes: rows.stateChanges ?? null,
        });
      }
    }
    // A prepared statement reads the client's own settings too.
    const [prepared] = await conn.execute({
      sql: 'SELECT @@session_track_system_variables, @@session_track_schema',
      rowsAsArray: true,
    });
    out.push({ sql: 'execute', rows: prepared });
    return out;
  } finally {
    await s.closeAll();
  }
}

// KILL as drivers' pool code sends it: `KILL n; SELECT 1` in one multi-statement query
// (mysql2's test-pool-disconnect pattern), `PREPARE s FROM 'KILL n'` with `EXECUTE s`,
// and a connection killed while its query runs. What each killed connection's next
// query, or its running one, gets is recorded as the driver reports it.
async function runKill(args) {
  const s = new Scenario(args);
  const idOf = async (conn) => (await conn.query('SELECT CONNECTION_ID()'))[0][0][0];
  const fate = async (conn, sql) => {
    try {
      await conn.query(sql);
      return { unexpected_success: sql };
    } catch (err) {
      // Whether the driver meets the close writing, reading, or before the query (its
      // "closed state" error, with no code) is a matter of timing.
      const lost =
        ['EPIPE', 'ECONNRESET', 'PROTOCOL_CONNECTION_LOST'].includes(err.code) ||
        (err.fatal && err.code === undefined);
      // (A reset rather than a close is the same loss, told by the socket's errno.)
      return {
        code: lost ? 'connection lost' : err.code ?? null,
        errno: lost ? null : err.errno ?? null,
        fatal: err.fatal ?? null,
      };
    }
  };
  try {
    const killer = await s.connect({ multipleStatements: true });
    const out = {};

    const idle = await s.connect();
    const [results] = await killer.query(`KILL ${await idOf(idle)}; SELECT 1 AS one`);
    out.batch = results.map((r) =>
      Array.isArray(r) ? { rows: r } : { affected_rows: r.affectedRows, status: r.serverStatus & STABLE_STATUS },
    );
    out.batch_victim = await fate(idle, 'SELECT 1');

    const unknown = await s.tryError(() => killer.query('KILL 4000000000; SELECT 1'));
    out.batch_unknown_id = unknown;

    const prepared = await s.connect();
    await killer.query(`PREPARE kill_stmt FROM 'KILL ${await idOf(prepared)}'`);
    const [executed] = await killer.query('EXECUTE kill_stmt');
    out.prepared = { affected_rows: executed.affectedRows };
    out.prepared_victim = await fate(prepared, 'SELECT 1');
    await killer.query('DEALLOCATE PREPARE kill_stmt');

    const busy = await s.connect();
    const busyId = await idOf(busy);
    const running = fate(busy, 'SELECT SLEEP(30) AS node_kill');
    // Killed once its query is seen running.
    for (let i = 0; i < 300; i++) {
      const [[[n]]] = await killer.query(
        `SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = 'SELECT SLEEP(30) AS node_kill'`,
      );
      if (Number(n) > 0) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    await killer.query(`KILL ${busyId}; SELECT 2`);
    out.running_victim = await running;
    out.killer_goes_on = (await killer.query('SELECT 3'))[0];
    return out;
  } finally {
    await s.closeAll();
  }
}

// ROW_COUNT() right after autocommit writes (which Sluice may send inside a transaction
// of its own), read as text and through prepared statements: the statement read may
// have been prepared before the write, between it and the read, or with parameters.
async function runRowCount(args) {
  const s = new Scenario(args);
  try {
    const conn = await s.connect();
    await conn.query('CREATE TABLE rc (id INT AUTO_INCREMENT PRIMARY KEY, a INT)');
    const run = async (how, sql, values) => {
      try {
        const got = how === 'execute'
          ? await conn.execute({ sql, values })
          : await conn.query({ sql, values });
        return s.rec.results(got);
      } catch (err) {
        return { error: s.rec.error(err) };
      }
    };
    const out = [];
    for (const [how, write, read, values] of [
      ['query', 'INSERT INTO rc (a) VALUES (1), (2)', 'SELECT ROW_COUNT()'],
      ['execute', 'UPDATE rc SET a = a + 1', 'SELECT ROW_COUNT()'],
      ['execute', 'UPDATE rc SET a = a WHERE id = 1', 'SELECT ROW_COUNT() AS n, ROW_COUNT() * 10'],
      ['query', 'INSERT INTO rc (id, a) VALUES (1, 1)', 'SELECT ROW_COUNT()'],
      ['execute', 'DELETE FROM rc WHERE id = 2', 'SELECT ROW_COUNT() + ?', [5]],
      ['query', 'INSERT INTO rc (a) VALUES (3), (4), (5)', 'SELECT ROW_COUNT() + ?', [1]],
      ['execute', 'REPLACE INTO rc (id, a) VALUES (1, 9)', 'SELECT ROW_COUNT()'],
      ['query', 'UPDATE rc SET a = 0', 'SELECT 1 FROM rc WHERE id = ROW_COUNT()'],
    ]) {
      const wrote = await run(how, write);
      out.push({ write, how, wrote, read, text: await run('query', read, values) });
      await run(how, write);
      out.push({ write, how, read, prepared: await run('execute', read, values) });
    }
    return out;
  } finally {
    await s.closeAll();
  }
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const run = { sha2: runSha2, tracking: runTracking, kill: runKill, rowcount: runRowCount }[args.scenario] ?? runFull;
  const body = await run(args);
  const doc = {
    driver: { name: 'mysql2', version: mysqlPackage.version },
    scenario: args.scenario,
    result: body,
  };
  process.stdout.write(`${JSON.stringify(canonical(doc), null, 1)}\n`);
}

main().catch((err) => {
  process.stderr.write(`${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
