"""PyMySQL sessions across a hand-over: each connection sets up its state, the script
prints "ready" and waits for a line on stdin (the test restarts Sluice meanwhile),
then reads the state back through the same connections and prints one JSON document."""

import argparse
import json
import sys

import pymysql


def connect(args, **extra):
    return pymysql.connect(
        host=args.host,
        port=args.port,
        user=args.user,
        password=args.password,
        database=args.database,
        autocommit=True,
        **extra,
    )


def one(conn, sql, params=None):
    with conn.cursor() as c:
        c.execute(sql, params)
        row = c.fetchone()
    return None if row is None else [None if v is None else str(v) for v in row]


def main():
    p = argparse.ArgumentParser()
    for name in ("host", "user", "password", "database"):
        p.add_argument("--" + name, required=True)
    p.add_argument("--port", type=int, required=True)
    args = p.parse_args()

    idle = connect(args, charset="utf8mb4")
    one(idle, "SET @kept = 'across', sql_mode = 'ANSI_QUOTES', time_zone = '+05:00'")
    in_trx = connect(args)
    one(in_trx, "CREATE TABLE IF NOT EXISTS moved (id INT PRIMARY KEY)")
    one(in_trx, "DELETE FROM moved")
    in_trx.begin()
    one(in_trx, "INSERT INTO moved VALUES (1)")
    probe = "SELECT CONNECTION_ID(), @kept, @@sql_mode, @@time_zone, DATABASE(), @@character_set_client"
    before = {"idle": one(idle, probe), "in_trx": one(in_trx, "SELECT CONNECTION_ID()")}

    print("ready", flush=True)
    sys.stdin.readline()

    after = {"idle": one(idle, probe)}
    one(in_trx, "INSERT INTO moved VALUES (2)")
    in_trx.commit()
    after["in_trx"] = one(in_trx, "SELECT CONNECTION_ID()")
    rows = one(in_trx, "SELECT COUNT(*) FROM moved")
    print(json.dumps({"before": before, "after": after, "rows": rows}, sort_keys=True))


if __name__ == "__main__":
    main()
