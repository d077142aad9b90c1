"""Django 5.2 (its own mysql backend over PyMySQL installed as MySQLdb) against the demo-like
schema: `migrate` of Django's own apps (auth, contenttypes: unlisted tables, so they live in the
schema's default datanode), `showmigrations`, `inspectdb` of the four demo tables, ORM CRUD on
unmanaged models over the sharded `orders`, its ER child `order_item`, the global `country` and
the table-per-shard `ledger` (create, `save()` of a fetched row, which assigns every column, the
unchanged shard key included; filter, order, aggregate, delete), and a nested
`transaction.atomic()` (a savepoint) rolled back inside a committed outer one. Prints the
transcript of every answer as JSON."""

import io
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pymysql  # noqa: E402

# Django's mysql backend asks for mysqlclient >= 2.2.1; PyMySQL stands in for it (no C build).
pymysql.version_info = (2, 2, 1, "final", 0)
pymysql.install_as_MySQLdb()

import django  # noqa: E402
from django.conf import settings  # noqa: E402
from sqlalchemy import create_engine  # noqa: E402

import models  # noqa: E402
from transcript import Transcript, connection, url  # noqa: E402

# Django's tables of `migrate auth contenttypes`, children before parents (for the drops).
DJANGO_TABLES = (
    "auth_user_user_permissions",
    "auth_user_groups",
    "auth_group_permissions",
    "auth_permission",
    "auth_group",
    "auth_user",
    "django_content_type",
    "django_migrations",
)


def configure(args):
    settings.configure(
        DATABASES={
            "default": {
                "ENGINE": "django.db.backends.mysql",
                "NAME": args.db,
                "USER": args.user,
                "PASSWORD": args.password,
                "HOST": args.host,
                "PORT": str(args.port),
                "OPTIONS": {"charset": "utf8mb4"},
            }
        },
        INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "django_shop"],
        USE_TZ=False,
        DEFAULT_AUTO_FIELD="django.db.models.AutoField",
    )
    django.setup()


def command(*args, **options):
    """A management command's output (what its user reads)."""
    from django.core.management import call_command

    out = io.StringIO()
    call_command(*args, stdout=out, stderr=out, no_color=True, **options)
    return out.getvalue().splitlines()


def main():
    args = connection()
    t = Transcript()

    # The demo tables come from the schema the Python scenarios share; Django's are dropped so
    # that `migrate` starts from nothing whatever ran before.
    engine = create_engine(url(args), pool_size=1)

    def reset():
        with engine.begin() as conn:
            for name in DJANGO_TABLES:
                conn.exec_driver_sql(f"DROP TABLE IF EXISTS {name}")
            models.drop_all(conn)
        models.build().create_all(engine)

    t.step("drop and create the demo tables (SQLAlchemy)", reset)
    engine.dispose()

    configure(args)
    from django.contrib.auth.models import Group, Permission, User
    from django.contrib.contenttypes.models import ContentType
    from django.db import connection as dj, transaction
    from django.db.models import Count, Max, Q, Sum
    from django_shop.models import Country, Ledger, Order, OrderItem

    t.step("showmigrations before migrate", lambda: command("showmigrations", "auth", "contenttypes"))
    t.step("migrate", lambda: command("migrate", verbosity=1))
    t.step("showmigrations after migrate", lambda: command("showmigrations", "auth", "contenttypes"))
    t.step(
        "django tables (introspection.table_names)",
        lambda: sorted(n for n in dj.introspection.table_names() if n in DJANGO_TABLES + models.TABLES),
    )
    t.step(
        "content types (post_migrate)",
        lambda: list(ContentType.objects.order_by("app_label", "model").values_list("app_label", "model")),
    )
    t.step(
        "permissions of django_shop (post_migrate)",
        lambda: list(
            Permission.objects.filter(content_type__app_label="django_shop")
            .order_by("codename")
            .values_list("codename", "name")
        ),
    )
    t.step("inspectdb of the demo tables", lambda: command("inspectdb", *models.TABLES))

    def auth_user():
        u = User.objects.create_user("ada", "ada@example.org", "s3cret")
        g = Group.objects.create(name="staff")
        u.groups.add(g)
        u.user_permissions.add(Permission.objects.get(codename="view_order"))
        fetched = User.objects.get(username="ada")
        return {
            "password ok": fetched.check_password("s3cret"),
            "groups": list(fetched.groups.values_list("name", flat=True)),
            "has perm": fetched.has_perm("django_shop.view_order"),
        }

    t.step("auth: create_user, group, permission", auth_user)

    def seed():
        Country.objects.bulk_create([Country(code=c, name=n) for c, n in models.COUNTRIES])
        for i, u, s, a, c in models.ORDERS:
            Order.objects.create(id=i, user_id=u, status=s, amount=a, country_code=c)
        OrderItem.objects.bulk_create(
            [OrderItem(id=i, order_id=o, user_id=u, sku=s, qty=q) for i, o, u, s, q in models.ITEMS]
        )
        for i, d, acc, a in models.LEDGER:
            Ledger.objects.create(id=i, day=d, account=acc, amount=a)
        return "seeded"

    t.step("create (objects.create, bulk_create)", seed)

    def counts():
        return {m.__name__: m.objects.count() for m in (Country, Order, OrderItem, Ledger)}

    t.step("counts after create", counts)

    def save_order():
        o = Order.objects.get(pk=5)
        o.status = "done"
        o.amount = "99.99"
        o.save()  # UPDATE orders SET user_id = 6, status = ..., ... WHERE id = 5
        return list(Order.objects.filter(pk=5).values("id", "user_id", "status", "amount"))

    t.step("save() of a fetched order (every column, the shard key unchanged)", save_order)

    def save_ledger():
        row = Ledger.objects.get(pk=3)
        row.amount = "7.25"
        row.save()  # UPDATE ledger SET day = <same>, account = ..., amount = ... WHERE id = 3
        return list(Ledger.objects.filter(pk=3).values("id", "day", "account", "amount"))

    t.step("save() of a fetched ledger row (table-per-shard, the shard key unchanged)", save_ledger)

    def save_country():
        c = Country.objects.get(pk="fr")
        c.name = "France (FR)"
        c.save()
        return list(Country.objects.order_by("code").values_list("code", "name"))

    t.step("save() of a fetched country (global)", save_country)
    t.step(
        "update() of a queryset",
        lambda: [
            Order.objects.filter(user_id=3).update(status="held"),
            list(Order.objects.filter(user_id=3).order_by("id").values_list("id", "status")),
        ],
    )
    t.step(
        "filter on the shard key, order_by",
        lambda: list(Order.objects.filter(user_id=2).order_by("-id").values_list("id", "status", "amount")),
    )
    t.step(
        "filter Q across shards, order_by, slice",
        lambda: list(
            Order.objects.filter(Q(status="paid") | Q(amount__gt=60)).order_by("amount", "id")[1:5].values_list("id", flat=True)
        ),
    )
    t.step(
        "aggregate over all orders",
        lambda: Order.objects.aggregate(n=Count("id"), total=Sum("amount"), top=Max("amount")),
    )
    t.step(
        "values().annotate() per user",
        lambda: list(Order.objects.values("user_id").annotate(n=Count("id"), total=Sum("amount")).order_by("user_id")),
    )
    t.step(
        "select_related item -> order (joined on both keys)",
        lambda: [
            (i.id, i.order.id, i.order.status)
            for i in OrderItem.objects.select_related("order").filter(user_id=4).order_by("id")
        ],
    )
    t.step(
        "filter items through the relation",
        lambda: list(OrderItem.objects.filter(order__status="sent").order_by("id").values_list("id", flat=True)),
    )
    t.step(
        "ledger per account over 2024 (table-per-shard)",
        lambda: list(
            Ledger.objects.filter(day__range=("2024-01-01", "2024-12-31"))
            .values("account")
            .annotate(n=Count("id"), total=Sum("amount"))
            .order_by("account")
        ),
    )
    t.step(
        "ledger rows ordered by day",
        lambda: list(Ledger.objects.order_by("day", "id").values_list("id", "day", "amount")),
    )

    def delete_order():
        n, per_model = Order.objects.filter(pk=16).delete()  # cascades to its items
        return {"deleted": n, "per model": per_model, "counts": counts()}

    t.step("delete() an order with its items (collector cascade)", delete_order)
    t.step("delete() ledger rows before 2024", lambda: Ledger.objects.filter(day__lt="2024-01-01").delete())

    def nested_atomic():
        with transaction.atomic():
            Order.objects.create(id=300, user_id=1, status="new", amount="1.00", country_code="de")
            try:
                with transaction.atomic():  # SAVEPOINT
                    Order.objects.create(id=301, user_id=2, status="new", amount="2.00", country_code="fr")
                    raise RuntimeError("roll the savepoint back")
            except RuntimeError:
                pass
            Order.objects.create(id=302, user_id=3, status="new", amount="3.00", country_code="jp")
        return sorted(Order.objects.filter(id__gte=300).values_list("id", flat=True))

    t.step("nested atomic() rolled back inside a committed one", nested_atomic)

    def failed_atomic():
        try:
            with transaction.atomic():
                Order.objects.create(id=310, user_id=1, status="new", amount="1.00", country_code="de")
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
        return Order.objects.filter(id=310).exists()

    t.step("atomic() rolled back", failed_atomic)
    t.step("delete the atomic steps' orders", lambda: Order.objects.filter(id__gte=300).delete()[0])
    t.step("counts at the end", counts)
    dj.close()

    def drop():
        e = create_engine(url(args), pool_size=1)
        with e.begin() as conn:
            for name in DJANGO_TABLES:
                conn.exec_driver_sql(f"DROP TABLE IF EXISTS {name}")
            models.drop_all(conn)
        e.dispose()
        return "dropped"

    t.step("drop every table", drop)
    t.dump()


if __name__ == "__main__":
    main()
