"""The settings audit trail (docs/staff-access.md): django-pghistory's database triggers write an event row
for every insert, update and delete of a tracked model (merchants, apps, keys, products, fees, thresholds,
currencies, channels, bank codes, the deny list; staff users, their roles and permissions: apps.common.models),
whatever path made the change: the admin, a service, a command, a shell, raw SQL. Who made it comes from the
pghistory context of the transaction: the admin user (middleware below), or the command and its operator
(apps.common.management.json_command). Event tables are append-only: a trigger refuses UPDATE and DELETE
(PGHISTORY_APPEND_ONLY, and the append_only_guard of apps/common/migrations/0005 and 0006)."""

import functools
import getpass
import os
from typing import Any

import pghistory
from django.contrib.auth import get_user_model
from django.db import models
from django.db.backends.postgresql.base import Cursor as ClientBindingCursor
from django.db.backends.postgresql.base import ServerBindingCursor
from pghistory import constants as pghistory_constants
from pghistory import runtime as pghistory_runtime
from pghistory.middleware import HistoryMiddleware

# The models that carry a settings history (each gets a <Model>Event model in its own app); filled by @tracked.
TRACKED_MODELS: list[type[models.Model]] = []


def tracked(*, exclude: tuple[str, ...] = ()):
    """Class decorator: record every insert, update and delete of this model with its who and when. `exclude`:
    fields kept out of the trail (secrets)."""

    def decorate(model: type[models.Model]) -> type[models.Model]:
        model = pghistory.track(pghistory.InsertEvent(), pghistory.UpdateEvent(), pghistory.DeleteEvent(),
                                exclude=list(exclude) or None,
                                meta={"verbose_name": f"{model._meta.verbose_name} change",
                                      "verbose_name_plural": f"{model._meta.verbose_name} history"})(model)
        TRACKED_MODELS.append(model)
        return model

    return decorate


def tracked_elsewhere(tracked_model: type[models.Model], *trackers, model_name: str, fields: list[str],
                      verbose_name: str, obj_field=pghistory_constants.UNSET) -> type[models.Model]:
    """The event model of a model we do not own (django.contrib.auth's), created in apps.common: `tracked_model` is a
    proxy of it in apps.common, so its triggers, like the event table, are in our migrations, not Django's. `fields`: what is
    kept, named one by one, so a field added to the model later (a secret) stays out until someone adds it here."""
    event_model = pghistory.create_event_model(
        tracked_model, *(trackers or (pghistory.InsertEvent(), pghistory.UpdateEvent(), pghistory.DeleteEvent())),
        fields=fields, obj_field=obj_field, model_name=model_name, app_label="common", abstract=False,
        meta={"verbose_name": f"{verbose_name} change", "verbose_name_plural": f"{verbose_name} history"})
    TRACKED_MODELS.append(tracked_model._meta.concrete_model)  # a proxy: its model's objects are the tracked ones
    return event_model


class HistoryAwareCursor(ServerBindingCursor):
    """The connection's cursor when parameters are bound on the server (DATABASE_PREPARED_STATEMENTS,
    docs/performance.md): inside a pghistory context, Django's client-side binding cursor instead. pghistory puts
    `SELECT set_config(...);` in front of every statement of its context (the admin's writes, commands, staff-request
    approvals): two commands in one execute, which PostgreSQL refuses with parameters bound on the server. Decided
    per cursor, and Django opens one per statement; the API and the pay page run no context."""

    def __new__(cls, *args, **kwargs):
        if hasattr(pghistory_runtime._tracker, "value"):  # inside pghistory.context (its thread-local)
            return ClientBindingCursor(*args, **kwargs)
        return super().__new__(cls)


def use_history_aware_cursor(sender, connection, **kwargs) -> None:
    """connection_created receiver (apps.common.apps): a connection that binds on the server gets HistoryAwareCursor."""
    if connection.settings_dict["OPTIONS"].get("server_side_binding"):
        connection.connection.cursor_factory = HistoryAwareCursor


class AdminHistoryContext(HistoryMiddleware):
    """The pghistory context (the user's id and username, the URL) around every admin request that writes; other
    requests (the signed API, the pay page) run without one, at no cost."""

    def __call__(self, request):
        if not request.path_info.startswith(admin_prefix()):
            return self.get_response(request)
        return super().__call__(request)

    def get_context(self, request) -> dict[str, Any]:
        context = super().get_context(request)
        user = getattr(request, "user", None)
        if getattr(user, "pk", None):
            context["username"] = user.get_username()
        return context


@functools.cache
def admin_prefix() -> str:
    """The admin's path ("/admin/") as the URLconf routes it, to match against request.path_info; worked out once:
    this runs on every request. Never request.path or a bare reverse(): both carry the request's SCRIPT_NAME, which a
    WSGI server may take from a client's header, so a prefix worked out during one request could miss every later
    admin request of the worker and switch off the second factor for all of them. path_info is what the
    URLconf resolves: no SCRIPT_NAME reaches the admin without starting with this."""
    from django.urls import get_script_prefix, reverse

    return "/" + reverse("admin:index")[len(get_script_prefix()):]


def command_context(*, command: str, operator: str | None = None):
    """The pghistory context of a management command: the command's name and who ran it (--operator, else the OS
    user; a shell on the server is already the highest authority, so this names rather than authenticates)."""
    return pghistory.context(command=command, operator=operator or os_user())


def os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container's)
        return f"uid {os.getuid()}"


def event_who(event) -> str:
    """Who made the change an event row records, in words."""
    metadata = (event.pgh_context.metadata if event.pgh_context_id else None) or {}
    if metadata.get("staff_request"):  # applied by a second person's approval (apps.common.staff_requests)
        return (f"{metadata.get('username')} (approved request #{metadata['staff_request']} of "
                f"{metadata.get('requested_by')})")
    if metadata.get("username"):
        return metadata["username"]
    if metadata.get("user"):
        user = get_user_model().objects.filter(pk=metadata["user"]).first()
        return user.get_username() if user else f"user #{metadata['user']}"
    if metadata.get("command"):
        return f"{metadata.get('operator') or '?'} (manage.py {metadata['command']})"
    return "unknown (outside the application)"


def event_model_of(tracked_model: type[models.Model]) -> type[models.Model]:
    """The event model of a tracked model (a membership table's has no pgh_obj: its rows are the grants)."""
    from pghistory.core import event_models

    [event_model] = event_models(tracks_model=tracked_model, include_missing_pgh_obj=True)
    return event_model


# A staff user's event saying only that the password changed (apps.common.models.UserEvent): the hash is never kept.
PASSWORD_SET = "password_set"

# A membership or grant event (UserGroupEvent, ...): which relation it is, in a reviewer's words.
GRANT_RELATIONS = {"group": "groups", "permission": "permissions"}


def grant_relations(event_model) -> list[str]:
    """The two relations of a membership or grant event: the holder (user or group), then what it was granted."""
    return [f.name for f in event_model._meta.concrete_fields if f.is_relation and not f.name.startswith("pgh_")]


def grant_words(event) -> str:
    """A membership or grant event in words: "rita: groups + Risk reviewer" (granted), "... - ..." (revoked),
    "Risk reviewer: permissions + payout.review_payout". Names are read now (a list prefetches them: see
    StaffGrantHistoryAdmin); a deleted user, group or permission shows as its number."""
    holder_field, granted_field = grant_relations(type(event))
    sign = "+" if event.pgh_label == "grant" else "\u2212"
    return (f"{_related_name(event, holder_field)}: {GRANT_RELATIONS[granted_field]} {sign} "
            f"{_related_name(event, granted_field)}")


def _related_name(event, field: str) -> str:
    related_model = event._meta.get_field(field).related_model
    try:
        obj = getattr(event, field)  # prefetched in a list; None there when the row is gone
    except related_model.DoesNotExist:
        obj = None
    if obj is None:
        return f"{related_model._meta.verbose_name} #{getattr(event, f'{field}_id')}"
    if related_model._meta.label == "auth.Permission":
        return f"{obj.content_type.app_label}.{obj.codename}"
    return obj.get_username() if hasattr(obj, "get_username") else str(obj)


def event_changes(event) -> dict[str, tuple[Any, Any]]:
    """{field: (old, new)} of an event row against the previous event of the same object (an insert: old None; a
    delete: new None)."""
    fields = [f.attname for f in event._meta.concrete_fields if not f.attname.startswith("pgh_") and f.attname != "id"]
    new = {name: getattr(event, name) for name in fields}
    if event.pgh_label == PASSWORD_SET:
        return {"password": ("(not kept)", "(changed; not kept)")}
    previous = (type(event).objects.filter(pgh_obj_id=event.pgh_obj_id, pgh_id__lt=event.pgh_id)
                .exclude(pgh_label=PASSWORD_SET).order_by("-pgh_id").first())
    old = {name: getattr(previous, name) for name in fields} if previous else {}
    if event.pgh_label == "delete":
        return {name: (value, None) for name, value in new.items()}
    return {name: (old.get(name), value) for name, value in new.items() if not previous or old.get(name) != value}

