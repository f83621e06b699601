// Sharding through Sluice with mysql2 (which negotiates CLIENT_DEPRECATE_EOF): a read
// no key decides (text and prepared), a prepared read by key, a refused shape, and the session going on.
// Prints one JSON document; the Rust test checks it.
const mysql = require('mysql2/promise');

const arg = (name) => process.argv[process.argv.indexOf(`--${name}`) + 1];

(async () => {
  const c = await mysql.createConnection({
    host: arg('host'),
    port: Number(arg('port')),
    user: arg('user'),
    password: arg('password'),
    database: arg('database'),
  });
  const out = {};
  const [rows] = await c.query("SELECT id, v FROM orders WHERE v LIKE 'o%'");
  out.ids = rows.map((r) => r.id).sort((a, b) => a - b);
  const [counted] = await c.query('SELECT COUNT(*) AS n, MAX(id) AS top FROM orders');
  out.count = Number(counted[0].n);
  out.top = counted[0].top;
  const [prepared] = await c.execute('SELECT id FROM orders WHERE v LIKE ?', ['o%']);
  out.prepared_ids = prepared.map((r) => r.id).sort((a, b) => a - b);
  const [byKey] = await c.execute('SELECT v FROM orders WHERE id = ?', [7]);
  out.by_key = byKey.map((r) => r.v);
  try {
    await c.query('SELECT v FROM orders ORDER BY id');
    out.refused = null;
  } catch (e) {
    out.refused = { errno: e.errno, sqlState: e.sqlState, message: e.message };
  }
  const [after] = await c.query('SELECT 2 AS x');
  out.after = after[0].x;
  await c.end();
  console.log(JSON.stringify(out));
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
