#!/usr/bin/env python3
"""The differential test's Connector/C client.

Runs statements as server-side prepared statements (binary protocol) through MariaDB
Connector/C, by way of the Python `mariadb` package, and prints what came back, so that the
differential test (tests/src/differential/capi.rs) can compare the oracle's answers with Shoal's
as a C client sees them. Multi-statement texts run over the text protocol on a connection with
CLIENT_MULTI_STATEMENTS, every result read in turn.

    differential_capi.py HOST PORT USER PASSWORD DATABASE TIMEOUT_SECONDS < requests > answers

One JSON object per line each way. A request: {"sql": "...", "params": [p, ...], "txn": b}
(with "txn" true, run with autocommit off and committed after), or {"multi": "...", "txn": b}
(a multi-statement text), where p is
null, {"int": n}, {"dec": "12.50"} (decimal.Decimal), {"str": "..."}, {"date": "YYYY-MM-DD"}
(datetime.date, sent as MYSQL_TYPE_DATE) or {"datetime": "YYYY-MM-DD hh:mm:ss"}
(datetime.datetime, MYSQL_TYPE_DATETIME). An answer: {"columns": [[name, schema, table,
org_table], ...], "rows": [[cell, ...], ...], "affected": n} with each cell null or its
canonical text, or {"error": {"code": n, "message": "..."}} when Connector/C or the server
failed the statement (the client's own errors, such as 2057, included). A multi-statement
text's answer: {"results": [answer, ...], "error": null or {"code": n, "message": "..."}}, the
results in order and the error that ended the text (the statements after it do not run).
"""

import datetime
import decimal
import json
import sys

import mariadb
from mariadb.constants import CLIENT, STATUS


def param(p):
    if p is None:
        return None
    (kind, v), = p.items()
    if kind == "int":
        return int(v)
    if kind == "dec":
        return decimal.Decimal(v)
    if kind == "str":
        return v
    if kind == "date":
        return datetime.date.fromisoformat(v)
    if kind == "datetime":
        return datetime.datetime.fromisoformat(v)
    raise ValueError(f"unknown parameter kind {kind}")


def cell(v):
    """One value as text: the same rendering for both sides of a comparison."""
    if v is None:
        return None
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", "replace")
    if isinstance(v, datetime.datetime):
        return v.isoformat(" ")
    if isinstance(v, (datetime.date, datetime.time)):
        return v.isoformat()
    return str(v)


def connect(args):
    host, port, user, password, database, timeout = args
    return mariadb.connect(
        host=host,
        port=int(port),
        user=user,
        password=password,
        database=database,
        autocommit=True,
        client_flag=CLIENT.MULTI_STATEMENTS,
        read_timeout=int(timeout),
        write_timeout=int(timeout),
    )


def run(conn, req):
    if req.get("txn"):
        # Inside a transaction: autocommit off (Connector/C sends SET autocommit=0), the
        # statement, then COMMIT and autocommit back on.
        conn.autocommit = False
        try:
            return run_one(conn, req)
        finally:
            conn.commit()
            conn.autocommit = True
    return run_one(conn, req)


def run_one(conn, req):
    if "multi" in req:
        return run_multi(conn, req["multi"])
    cur = conn.cursor(prepared=True)
    try:
        cur.execute(req["sql"], tuple(param(p) for p in req.get("params", [])))
        return answer_of(cur)
    finally:
        close(cur)


def answer_of(cur):
    """The cursor's current result: its rows, or the affected rows of a statement without."""
    answer = {"columns": [], "rows": [], "affected": 0}
    if cur.description:
        meta = cur.metadata
        answer["columns"] = [
            [d[0], meta["schema"][i], meta["table"][i], meta["org_table"][i]]
            for i, d in enumerate(cur.description)
        ]
        answer["rows"] = [[cell(v) for v in row] for row in cur.fetchall()]
    else:
        answer["affected"] = max(cur.rowcount, 0)
    return answer


def close(cur):
    try:
        cur.close()
    except mariadb.Error:
        pass


def next_result(conn, cur):
    """Moves `cur` to the text's next result, or returns False after the last one.

    nextset() would call mysql_next_result(), but Connector/Python returns None both at the end
    of the text and when mysql_next_result() fails, dropping the server's error (the one that
    ends a text in the middle). So the next result is read as execute() reads the first one:
    when the server announced more results (SERVER_MORE_RESULTS_EXIST), Connector/C's
    db_read_query_result, which raises the server's error.
    """
    if not conn.server_status & STATUS.MORE_RESULTS_EXIST:
        return False
    cur._readresponse()
    cur._initresult()
    return True


def run_multi(conn, sql):
    """Every result of a multi-statement text, then the error that ended it, if any."""
    results = []
    cur = conn.cursor()
    try:
        cur.execute(sql)
        results.append(answer_of(cur))
        while next_result(conn, cur):
            results.append(answer_of(cur))
        return {"results": results, "error": None}
    except mariadb.Error as e:
        if (e.errno or 0) >= 2000:
            # The client's own error (a lost or timed-out connection): the caller reconnects.
            raise
        # The statements before the error are answered; the error ends the text.
        error = {"code": e.errno or 0, "message": str(e)}
        return {"results": results, "error": error}
    finally:
        close(cur)


def main():
    args = sys.argv[1:]
    if len(args) != 6:
        sys.exit(__doc__)
    conn = connect(args)
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        try:
            out = run(conn, req)
        except mariadb.Error as e:
            out = {"error": {"code": e.errno or 0, "message": str(e)}}
            # A lost or timed-out connection: go on with a fresh one.
            try:
                conn.ping()
            except mariadb.Error:
                try:
                    conn.close()
                except mariadb.Error:
                    pass
                conn = connect(args)
        print(json.dumps(out), flush=True)
    conn.close()


if __name__ == "__main__":
    main()
