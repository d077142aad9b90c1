"""The demo-like tables as Django models. They are unmanaged (the scenario creates the tables
with tests/clients/python/models.py, the schema every Python scenario shares), so `migrate`
migrates Django's own apps only, as a project over an existing database does.

`OrderItem.order` joins on both `order_id` and `user_id` (a multi-column ForeignObject), so
that a join from an item to its order stays inside one shard, as the layout's ER child rule
means it to."""

from django.db import models


class Country(models.Model):
    code = models.CharField(max_length=2, primary_key=True)
    name = models.CharField(max_length=40)

    class Meta:
        managed = False
        db_table = "country"


class Order(models.Model):
    id = models.IntegerField(primary_key=True)
    user_id = models.IntegerField()
    status = models.CharField(max_length=10)
    amount = models.DecimalField(max_digits=10, decimal_places=2)
    country_code = models.CharField(max_length=2, null=True)

    class Meta:
        managed = False
        db_table = "orders"


class OrderItem(models.Model):
    id = models.IntegerField(primary_key=True)
    order_id = models.IntegerField()
    user_id = models.IntegerField()
    sku = models.CharField(max_length=20)
    qty = models.IntegerField()
    order = models.ForeignObject(
        Order,
        on_delete=models.CASCADE,
        from_fields=["order_id", "user_id"],
        to_fields=["id", "user_id"],
        related_name="items",
    )

    class Meta:
        managed = False
        db_table = "order_item"


class Ledger(models.Model):
    id = models.IntegerField(primary_key=True)
    day = models.DateField()
    account = models.CharField(max_length=20)
    amount = models.DecimalField(max_digits=12, decimal_places=2)

    class Meta:
        managed = False
        db_table = "ledger"
