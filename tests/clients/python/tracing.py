"""PyMySQL statements carrying a sqlcommenter traceparent, as an application traced with
OpenTelemetry sends them: one per trace id given, each a parametrized read whose comment
names the caller's span. Prints one JSON document: the rows each read returned."""

import argparse
import json

import pymysql


def main():
    p = argparse.ArgumentParser()
    for name in ("host", "user", "password", "database", "span"):
        p.add_argument("--" + name, required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--trace", action="append", required=True)
    args = p.parse_args()
    conn = pymysql.connect(
        host=args.host,
        port=args.port,
        user=args.user,
        password=args.password,
        database=args.database,
        autocommit=True,
    )
    rows = []
    with conn.cursor() as c:
        for i, trace in enumerate(args.trace):
            traceparent = f"00-{trace}-{args.span}-01"
            # sqlcommenter appends its comment, values URL-encoded (nothing to encode here).
            c.execute(
                "SELECT v FROM t WHERE id = %s "
                f"/*db_driver='pymysql',traceparent='{traceparent}'*/",
                (1 + i % 2,),
            )
            rows.append([str(v) for v in c.fetchone()])
    conn.close()
    print(json.dumps({"rows": rows}))


if __name__ == "__main__":
    main()
