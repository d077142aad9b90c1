"""What every Python client program of the suite shares: where to connect, and a transcript of
every observable answer, printed as canonical JSON so that the Rust test can compare the run
against Shoal with the run against one plain MariaDB.

Connection: CLIENT_HOST, CLIENT_PORT, CLIENT_USER, CLIENT_PASSWORD, CLIENT_DB (environment), or
the same as --host/--port/--user/--password/--db arguments.
"""

import argparse
import datetime
import decimal
import json
import os
import sys


def connection():
    p = argparse.ArgumentParser()
    for name in ("host", "port", "user", "password", "db"):
        p.add_argument("--" + name, default=os.environ.get("CLIENT_" + name.upper()))
    args = p.parse_args()
    missing = [k for k, v in vars(args).items() if v is None]
    if missing:
        sys.exit("missing connection settings: " + ", ".join(missing))
    return args


def url(args, driver="mysql+pymysql"):
    return (
        f"{driver}://{args.user}:{args.password}@{args.host}:{args.port}/{args.db}"
        "?charset=utf8mb4"
    )


def plain(value):
    """A JSON-able value that prints the same whatever server produced it."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or hasattr(value, "_mapping"):
        return [plain(v) for v in value]
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (datetime.date, datetime.datetime, datetime.time)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def describe_error(e):
    """`ERROR <code>: <message>` of a server error however a library wraps it."""
    orig = getattr(e, "orig", None) or e
    args = getattr(orig, "args", ())
    if len(args) >= 2 and isinstance(args[0], int):
        return f"ERROR {args[0]}: {args[1]}"
    return f"{type(orig).__name__}: {orig}"


class Transcript:
    """Steps in order, each with its answer or the error it ended with; a failed step does not
    stop the scenario, so that one run shows every step that differs."""

    def __init__(self):
        self.steps = []

    def step(self, name, fn):
        try:
            result = plain(fn())
        except Exception as e:  # noqa: BLE001 - every failure is an answer to record
            result = {"error": describe_error(e)}
        self.steps.append({"step": name, "result": result})
        return result

    def dump(self):
        # One step a line: the Rust test's diff then names the steps that differ.
        lines = [json.dumps(s, sort_keys=True, ensure_ascii=False) for s in self.steps]
        sys.stdout.write("[\n" + ",\n".join(lines) + "\n]\n")
