"""mycli's start-up completion refresh against the demo-like schema: every refresher of
mycli.packages.completion.completion_refresher (databases, schemata, tables and columns, indexed
columns, foreign keys, enum values, users, functions, procedures, character sets, collations,
SHOW candidates) run in mycli's order over mycli's own SQLExecute connection, each filling a
mycli SQLCompleter, then the completions mycli would offer. mycli swallows (logs) a failing
refresh query; the transcript records those logged errors as part of the step. Prints the
transcript of every answer as JSON."""

import logging
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from prompt_toolkit.document import Document  # noqa: E402
from sqlalchemy import create_engine, text  # noqa: E402

from mycli.packages.completion.completion_refresher import CompletionRefresher  # noqa: E402
from mycli.packages.execution.sql_execute import SQLExecute  # noqa: E402
from mycli.packages.completion.sql_completer import SQLCompleter  # noqa: E402

import models  # noqa: E402
from transcript import Transcript, connection, url  # noqa: E402

# Schemas every MariaDB has besides the client's: a sharded Shoal shows its logical schemas
# only, so the transcript keeps the schemas both can hold.
KEPT_SCHEMAS = ("shop", "information_schema")


class Errors(logging.Handler):
    """mycli's logged errors (a refresh query it gave up on)."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.seen = []

    def emit(self, record):
        self.seen.append(record.getMessage())


def main():
    args = connection()
    t = Transcript()
    engine = create_engine(url(args), pool_size=1)

    def reset():
        with engine.begin() as conn:
            models.drop_all(conn)
        models.build().create_all(engine)
        with engine.begin() as conn:
            # An enum column, so that the enum refresher has something to find.
            conn.execute(text("ALTER TABLE orders ADD COLUMN channel ENUM('web','shop','phone') NULL"))
        return "created"

    t.step("create the demo tables (SQLAlchemy)", reset)

    errors = Errors()
    logging.getLogger("mycli").addHandler(errors)
    executor = SQLExecute(
        database=args.db,
        user=args.user,
        password=args.password,
        host=args.host,
        port=int(args.port),
        socket=None,
        character_set="utf8mb4",
        local_infile=False,
        ssl=None,
    )
    t.step("server_info species", lambda: str(executor.server_info.species.name) if executor.server_info else None)

    completer = SQLCompleter(smart_completion=True)

    def refresh(name, fn, show):
        def run():
            errors.seen.clear()
            fn(completer, executor)
            return {"completions": show(), "logged errors": list(errors.seen)}

        t.step(f"refresher {name}", run)

    meta = completer.dbmetadata
    shows = {
        "databases": lambda: sorted(d for d in completer.databases if d in KEPT_SCHEMAS),
        "schemata": lambda: completer.dbname,
        "tables": lambda: {
            tb: sorted(cols)
            for tb, cols in sorted(meta["tables"].get(args.db, {}).items())
            if tb in models.TABLES
        },
        "indexed_columns": lambda: {
            tb: sorted(cols) for tb, cols in sorted(meta.get("indexed_columns", {}).get(args.db, {}).items())
        },
        "foreign_keys": lambda: sorted(
            list(r) for r in meta.get("foreign_keys", {}).get(args.db, {}).get("relations", [])
        ),
        "enum_values": lambda: {
            f"{tb}.{col}": vals
            for tb, cols in sorted(meta.get("enum_values", {}).get(args.db, {}).items())
            for col, vals in sorted(cols.items())
        },
        # The reference's accounts are not Shoal's: whether the query answered is the answer.
        "users": lambda: bool(completer.users),
        "functions": lambda: sorted(meta["functions"].get(args.db, {})),
        "procedures": lambda: sorted(meta.get("procedures", {}).get(args.db, {})),
        "character_sets": lambda: "utf8mb4" in completer.character_sets,
        "collations": lambda: "utf8mb4_general_ci" in completer.collations,
        "special_commands": lambda: len(completer.special_commands) > 0,
        "show_commands": lambda: sorted(completer.show_items)[:10],
    }
    for name, fn in CompletionRefresher.refreshers.items():
        refresh(name, fn, shows.get(name, lambda: None))

    def complete(sql):
        doc = Document(text=sql, cursor_position=len(sql))
        return sorted({c.text.strip("`") for c in completer.get_completions(doc, None)})

    t.step("complete `SELECT * FROM ` (tables)", lambda: [c for c in complete("SELECT * FROM ") if c in models.TABLES])
    columns = ("id", "user_id", "status", "amount", "country_code", "channel")
    t.step(
        "complete `SELECT * FROM orders WHERE ` (columns)",
        lambda: [c for c in complete("SELECT * FROM orders WHERE ") if c in columns],
    )
    t.step("SELECT NOW() answers (executor.now)", lambda: executor.now() is not None)
    t.step("connection id answers", lambda: executor.get_connection_id() not in (None, -1))
    executor.close()

    def drop():
        with engine.begin() as conn:
            models.drop_all(conn)
        return "dropped"

    t.step("drop the demo tables", drop)
    t.dump()


if __name__ == "__main__":
    main()
