// mysql2 statements carrying a sqlcommenter traceparent, as an application traced with
// OpenTelemetry sends them: for each trace id given, a text query and a prepared
// statement (whose prepare carries the comment its executes continue). Prints one JSON
// document: the rows each returned.
'use strict';
const mysql = require('mysql2/promise');

function arg(name) {
  const i = process.argv.indexOf('--' + name);
  if (i < 0) throw new Error('missing --' + name);
  return process.argv[i + 1];
}

async function main() {
  const conn = await mysql.createConnection({
    host: arg('host'),
    port: Number(arg('port')),
    user: arg('user'),
    password: arg('password'),
    database: arg('database'),
  });
  const span = arg('span');
  const [queryTrace, executeTrace] = arg('traces').split(',');
  const comment = (trace) => `/*db_driver='mysql2',traceparent='00-${trace}-${span}-01'*/`;
  const [q] = await conn.query(`SELECT v FROM t WHERE id = 1 ${comment(queryTrace)}`);
  const [e] = await conn.execute(`SELECT v FROM t WHERE id = ? ${comment(executeTrace)}`, [2]);
  await conn.end();
  console.log(JSON.stringify({ query: q.map((r) => String(r.v)), execute: e.map((r) => String(r.v)) }));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
