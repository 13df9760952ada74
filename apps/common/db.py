"""One INSERT for a new model instance, its SQL built once per model: for the hottest write paths only.

`Model.save()` rebuilds and recompiles the INSERT on every call, which on pay/create and payout/create cost more
CPU than the rest of the request's database work. This does what Django's insert compiler does (each field's
`pre_save(add=True)` then `get_db_prep_save`), so defaults, auto_now_add and JSON adapt the same way, and sends
pre_save/post_save (created=True) as save() does when anything listens. Not for models with parents
(multi-table inheritance).
"""

from functools import lru_cache

from django.db import connections, transaction
from django.db.models import Model, signals


@lru_cache(maxsize=32)
def _insert_sql(model: type[Model], alias: str, with_pk: bool) -> tuple[str, tuple, bool]:
    connection = connections[alias]
    meta = model._meta
    fields = tuple(field for field in meta.local_concrete_fields if with_pk or field is not meta.auto_field)
    quote = connection.ops.quote_name
    returning = connection.features.can_return_columns_from_insert
    sql = (f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(field.column) for field in fields)}) "
           f"VALUES ({', '.join(['%s'] * len(fields))})"
           + (f" RETURNING {quote(meta.pk.column)}" if returning else ""))
    return sql, fields, returning


def model_insert(instance: Model) -> Model:
    """INSERT `instance` (not saved before) and set its primary key (or insert the one it was given); returns it."""
    connection = transaction.get_connection()
    model = type(instance)
    sql, fields, returning = _insert_sql(model, connection.alias, instance.pk is not None)
    if signals.pre_save.has_listeners(model):
        signals.pre_save.send(sender=model, instance=instance, raw=False, using=connection.alias, update_fields=None)
    params = [field.get_db_prep_save(field.pre_save(instance, True), connection=connection) for field in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        instance.pk = cursor.fetchone()[0] if returning else cursor.lastrowid
    instance._state.adding = False
    instance._state.db = connection.alias
    if signals.post_save.has_listeners(model):
        signals.post_save.send(sender=model, instance=instance, created=True, update_fields=None, raw=False,
                               using=connection.alias)
    return instance
