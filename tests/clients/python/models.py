"""The demo-like schema as SQLAlchemy tables, shared by the SQLAlchemy and Alembic scenarios:
`orders` (sharded by user_id), its ER child `order_item` (same user_id), the global `country`,
and `ledger` (table-per-shard by day). Every key is given explicitly by the scenarios, so the
answers are the same on Shoal and on one MariaDB."""

from sqlalchemy import CHAR, Column, Date, ForeignKey, Integer, MetaData, Numeric, String, Table

TABLES = ("order_item", "orders", "country", "ledger")


def build(with_note=False):
    """A MetaData with the four tables; `with_note` adds the column Alembic's second revision
    brings (`orders.note`)."""
    md = MetaData()
    Table(
        "country",
        md,
        Column("code", CHAR(2), primary_key=True),
        Column("name", String(40), nullable=False),
        mysql_engine="InnoDB",
    )
    extra = [Column("note", String(40), nullable=True)] if with_note else []
    Table(
        "orders",
        md,
        Column("id", Integer, primary_key=True, autoincrement=False),
        Column("user_id", Integer, nullable=False, index=True),
        Column("status", String(10), nullable=False),
        Column("amount", Numeric(10, 2), nullable=False),
        Column("country_code", CHAR(2), nullable=True),
        *extra,
        mysql_engine="InnoDB",
    )
    Table(
        "order_item",
        md,
        Column("id", Integer, primary_key=True, autoincrement=False),
        Column("order_id", Integer, ForeignKey("orders.id"), nullable=False),
        Column("user_id", Integer, nullable=False, index=True),
        Column("sku", String(20), nullable=False),
        Column("qty", Integer, nullable=False),
        mysql_engine="InnoDB",
    )
    Table(
        "ledger",
        md,
        Column("id", Integer, primary_key=True, autoincrement=False),
        Column("day", Date, nullable=False),
        Column("account", String(20), nullable=False),
        Column("amount", Numeric(12, 2), nullable=False),
        mysql_engine="InnoDB",
    )
    return md


def drop_all(conn):
    """Drops the scenario's tables (and Alembic's) one by one with plain DDL, so that every
    scenario starts from an empty schema whatever ran before it."""
    for name in ("alembic_version",) + TABLES:
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS {name}")


COUNTRIES = [("de", "Germany"), ("fr", "France"), ("jp", "Japan")]

# 16 orders of 8 users (every shard twice), each with two items; explicit ids everywhere.
ORDERS = [
    (i, i % 8 + 1, ("new", "paid", "sent")[i % 3], f"{(i * 37) % 100}.{i % 10}0", COUNTRIES[i % 3][0])
    for i in range(1, 17)
]
ITEMS = [
    (i * 10 + k, i, i % 8 + 1, f"sku-{(i * 7 + k) % 5}", k + i % 4) for i in range(1, 17) for k in (1, 2)
]
# Two rows a quarter over 2024-2025 (each of the 8 ledger tables) and two before the start.
LEDGER = [
    (n + 1, f"{2024 + q // 4}-{(q % 4) * 3 + 1:02}-{10 + h:02}", ("cash", "bank")[h], f"{q * 10 + h}.50")
    for n, (q, h) in enumerate((q, h) for q in range(8) for h in (0, 1))
] + [(17, "2023-06-01", "cash", "1.00"), (18, "2023-12-31", "bank", "2.00")]
