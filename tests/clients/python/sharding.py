"""Sharding through Sluice with PyMySQL, which runs with autocommit off by default, so
every statement is inside a transaction: reads no key decides, a transaction writing on
both shards and reading its own writes back, rolled back, then committed. Prints one
JSON document; the Rust test checks it."""

import argparse
import json

import pymysql

p = argparse.ArgumentParser()
for name in ("host", "user", "password", "database"):
    p.add_argument(f"--{name}")
p.add_argument("--port", type=int)
p.add_argument("--ids", help="one id on each shard, comma-separated")
a = p.parse_args()
x, y = (int(v) for v in a.ids.split(","))

c = pymysql.connect(
    host=a.host, port=a.port, user=a.user, password=a.password, database=a.database
)
out = {"autocommit": c.get_autocommit()}
cur = c.cursor()
cur.execute("SELECT COUNT(*), MAX(id) FROM orders")
out["count"] = list(cur.fetchone())
cur.execute("SELECT id FROM orders WHERE v LIKE %s", ("o%",))
out["ids"] = sorted(r[0] for r in cur.fetchall())
c.commit()

for id_ in (x, y):
    cur.execute("UPDATE orders SET v = 'py' WHERE id = %s", (id_,))
cur.execute("SELECT id FROM orders WHERE v = 'py' ORDER BY id LIMIT 10")
out["own_writes"] = [r[0] for r in cur.fetchall()]
c.rollback()
cur.execute("SELECT COUNT(*) FROM orders WHERE v = 'py'")
out["after_rollback"] = cur.fetchone()[0]
c.commit()

for id_ in (x, y):
    cur.execute("UPDATE orders SET v = 'py' WHERE id = %s", (id_,))
c.commit()
cur.execute("SELECT id FROM orders WHERE v = 'py' ORDER BY id LIMIT 10")
out["committed"] = [r[0] for r in cur.fetchall()]
c.commit()
c.close()
print(json.dumps(out))
