"""SQLAlchemy 2 (PyMySQL) against the demo-like schema: DDL through the connection, Inspector,
MetaData.reflect, ORM CRUD with a relationship orders -> order_items (same user_id), a rollback
that must leave no trace, a savepoint, joins with ORDER BY, aggregates per user, the global and
the table-per-shard tables. Prints the transcript of every answer as JSON."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sqlalchemy import and_, create_engine, func, inspect, select, text, update  # noqa: E402
from sqlalchemy.orm import DeclarativeBase, Session, foreign, joinedload, relationship  # noqa: E402

import models  # noqa: E402
from transcript import Transcript, connection, url  # noqa: E402

METADATA = models.build()


class Base(DeclarativeBase):
    metadata = METADATA


class Country(Base):
    __table__ = METADATA.tables["country"]


class OrderItem(Base):
    __table__ = METADATA.tables["order_item"]


class Order(Base):
    __table__ = METADATA.tables["orders"]
    # Items live with their order (same user_id): joining on both keeps the join in one shard.
    items = relationship(
        OrderItem,
        primaryjoin=lambda: and_(
            Order.id == foreign(OrderItem.order_id), Order.user_id == foreign(OrderItem.user_id)
        ),
        order_by=lambda: OrderItem.id,
        cascade="all, delete-orphan",
    )


class Ledger(Base):
    __table__ = METADATA.tables["ledger"]


def ours(names):
    """The scenario's tables among a listing (other tests' tables may share the database)."""
    return sorted(n for n in names if n in models.TABLES or n == "alembic_version")


def column_info(c):
    return {
        "name": c["name"],
        "type": str(c["type"]),
        "nullable": c["nullable"],
        "default": c.get("default"),
        "autoincrement": c.get("autoincrement"),
    }


def main():
    t = Transcript()
    engine = create_engine(url(connection()), pool_size=2)

    def reset():
        with engine.begin() as conn:
            models.drop_all(conn)

    t.step("drop tables", reset)
    t.step("create_all", lambda: METADATA.create_all(engine))
    t.step("create_all again (checks has_table)", lambda: METADATA.create_all(engine))

    with engine.connect() as conn:
        t.step("SELECT DATABASE()", lambda: conn.exec_driver_sql("SELECT DATABASE()").scalar())
        t.step(
            "has_table",
            lambda: {n: inspect(conn).has_table(n) for n in models.TABLES + ("nope",)},
        )

    insp = inspect(engine)
    t.step("inspector.get_table_names", lambda: ours(insp.get_table_names()))
    for name in sorted(models.TABLES):
        t.step(f"get_columns {name}", lambda: [column_info(c) for c in insp.get_columns(name)])
        t.step(f"get_pk_constraint {name}", lambda: insp.get_pk_constraint(name)["constrained_columns"])
        t.step(
            f"get_indexes {name}",
            lambda: sorted(
                (i["name"], i["column_names"], bool(i["unique"])) for i in insp.get_indexes(name)
            ),
        )
        t.step(
            f"get_foreign_keys {name}",
            lambda: sorted(
                (fk["constrained_columns"], fk["referred_table"], fk["referred_columns"])
                for fk in insp.get_foreign_keys(name)
            ),
        )

    def reflect():
        md = __import__("sqlalchemy").MetaData()
        md.reflect(engine, only=list(models.TABLES))
        return {
            name: [(c.name, str(c.type), c.primary_key) for c in table.columns]
            for name, table in sorted(md.tables.items())
        }

    t.step("MetaData.reflect", reflect)

    def seed():
        with Session(engine) as s:
            s.add_all(Country(code=c, name=n) for c, n in models.COUNTRIES)
            for oid, user, status, amount, cc in models.ORDERS:
                o = Order(id=oid, user_id=user, status=status, amount=amount, country_code=cc)
                o.items = [
                    OrderItem(id=i, order_id=oid, user_id=u, sku=sku, qty=q)
                    for i, o2, u, sku, q in models.ITEMS
                    if o2 == oid
                ]
                s.add(o)
            s.add_all(
                Ledger(id=i, day=d, account=a, amount=m) for i, d, a, m in models.LEDGER
            )
            s.commit()
        return "committed"

    t.step("ORM seed (add_all, commit)", seed)

    def counts():
        with engine.connect() as conn:
            return {
                n: conn.execute(select(func.count()).select_from(METADATA.tables[n])).scalar()
                for n in sorted(models.TABLES)
            }

    t.step("counts after seed", counts)

    with Session(engine) as s:
        t.step(
            "session.get(Order, 5) with items (lazy load)",
            lambda: (lambda o: [o.id, o.user_id, o.status, o.amount, [(i.id, i.sku) for i in o.items]])(
                s.get(Order, 5)
            ),
        )
        t.step(
            "orders of user 3 (routed by key)",
            lambda: [
                (o.id, o.status)
                for o in s.scalars(select(Order).where(Order.user_id == 3).order_by(Order.id))
            ],
        )

        def update():
            o = s.get(Order, 6)
            o.status = "done"
            o.amount = o.amount + 1
            s.commit()
            s.expire_all()
            o = s.get(Order, 6)
            return [o.status, o.amount]

        t.step("update one order (commit)", update)

        def save_every_column():
            # Django's save(): every column by the primary key, the unchanged shard key too.
            o = s.get(Order, 6)
            r = s.execute(
                update(Order)
                .where(Order.id == 6)
                .values(user_id=o.user_id, status="saved", amount=o.amount, country_code=o.country_code)
            )
            s.commit()
            s.expire_all()
            o = s.get(Order, 6)
            return [r.rowcount, o.user_id, o.status]

        t.step("UPDATE of every column, the unchanged shard key included (Django's save)", save_every_column)

        def delete_item():
            o = s.get(Order, 7)
            o.items.remove(o.items[0])
            s.commit()
            return [i.id for i in s.get(Order, 7).items]

        t.step("delete an item through the relationship (delete-orphan)", delete_item)

        def delete_order():
            s.delete(s.get(Order, 8))
            s.commit()
            return s.scalars(select(func.count()).select_from(OrderItem).where(OrderItem.order_id == 8)).one()

        t.step("delete an order with its items (cascade)", delete_order)

    def rollback():
        with Session(engine) as s:
            s.add(Order(id=100, user_id=4, status="new", amount="1.00", country_code="fr"))
            s.add(OrderItem(id=1000, order_id=100, user_id=4, sku="sku-x", qty=1))
            s.get(Order, 1).status = "void"
            s.execute(text("UPDATE ledger SET amount = amount + 100"))
            s.flush()
            seen = s.scalar(select(func.count()).select_from(Order))
            s.rollback()
            return {"count inside": seen}

    t.step("rollback of inserts, an update and a scattered update", rollback)
    t.step("counts after rollback", counts)
    def no_trace():
        with Session(engine) as s:
            return {
                "order 1 status": s.scalar(select(Order.status).where(Order.id == 1)),
                "order 100": s.scalar(select(func.count()).select_from(Order).where(Order.id == 100)),
                "ledger total": s.scalar(select(func.sum(Ledger.amount))),
            }

    t.step("no trace of the rolled-back work", no_trace)

    def savepoint():
        with Session(engine) as s:
            s.add(Order(id=101, user_id=5, status="new", amount="2.00"))
            s.flush()
            nested = s.begin_nested()
            s.add(Order(id=102, user_id=6, status="new", amount="3.00"))
            s.flush()
            nested.rollback()
            s.commit()
        with Session(engine) as s:
            return s.scalars(select(Order.id).where(Order.id > 100).order_by(Order.id)).all()

    t.step("savepoint rolled back inside a committed transaction", savepoint)

    def cleanup():
        # Whatever the savepoint step left, the next steps see the seeded rows only.
        with engine.begin() as conn:
            return conn.execute(Order.__table__.delete().where(Order.id > 100)).rowcount >= 0

    t.step("delete the savepoint step's orders", cleanup)

    with Session(engine) as s:
        t.step(
            "join orders/items ORDER BY",
            lambda: s.execute(
                select(Order.id, Order.user_id, OrderItem.sku, OrderItem.qty)
                .join(Order.items)
                .order_by(Order.id, OrderItem.id)
            ).all(),
        )
        t.step(
            "joinedload(Order.items) ORDER BY id",
            lambda: [
                (o.id, [i.id for i in o.items])
                for o in s.scalars(select(Order).options(joinedload(Order.items)).order_by(Order.id)).unique()
            ],
        )
        t.step(
            "aggregate per user",
            lambda: s.execute(
                select(Order.user_id, func.count(), func.sum(Order.amount), func.max(Order.status))
                .group_by(Order.user_id)
                .order_by(Order.user_id)
            ).all(),
        )
        t.step(
            "aggregate per user with labels, ORDER BY the label",
            lambda: s.execute(
                select(Order.user_id.label("u"), func.sum(OrderItem.qty).label("qty"))
                .join(Order.items)
                .group_by(Order.user_id)
                .order_by(text("qty DESC"), text("u"))
            ).all(),
        )
        t.step(
            "join with the global table",
            lambda: s.execute(
                select(Order.id, Country.name)
                .join(Country, Order.country_code == Country.code)
                .where(Order.user_id.in_([1, 2, 3]))
                .order_by(Order.id)
            ).all(),
        )
        t.step(
            "outer join with the global table",
            lambda: s.execute(
                select(Order.id, Country.name)
                .outerjoin(Country, Order.country_code == Country.code)
                .order_by(Order.id)
            ).all(),
        )
        t.step(
            "ledger per account over 2024 (table-per-shard)",
            lambda: s.execute(
                select(Ledger.account, func.count(), func.sum(Ledger.amount))
                .where(Ledger.day.between("2024-01-01", "2024-12-31"))
                .group_by(Ledger.account)
                .order_by(Ledger.account)
            ).all(),
        )
        t.step(
            "ledger rows (no ORDER BY: sorted here)",
            lambda: sorted(s.execute(select(Ledger.id, Ledger.day, Ledger.amount)).all()),
        )
        t.step(
            "distinct statuses",
            lambda: sorted(s.scalars(select(Order.status).distinct()).all()),
        )
        t.step(
            "paged orders (LIMIT/OFFSET)",
            lambda: s.scalars(select(Order.id).order_by(Order.amount.desc(), Order.id).limit(4).offset(2)).all(),
        )

    t.step("drop_all", lambda: METADATA.drop_all(engine))
    t.step("inspector after drop_all", lambda: ours(inspect(engine).get_table_names()))
    t.step("has_table after drop_all", lambda: {n: inspect(engine).has_table(n) for n in models.TABLES})

    def read(sql):
        with engine.connect() as conn:
            return conn.exec_driver_sql(sql).all()

    # The errors name the logical schema, as one server would (never a datanode's database).
    t.step("SELECT from a dropped sharded table", lambda: read("SELECT * FROM orders"))
    t.step("SELECT from a dropped global table", lambda: read("SELECT * FROM country"))
    t.step("SELECT from a table that never existed", lambda: read("SELECT * FROM no_such_table"))
    engine.dispose()
    t.dump()


if __name__ == "__main__":
    main()
