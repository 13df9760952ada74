"""Four eyes on the settings that move money (docs/back-office.md, "Four eyes on money settings"): an admin save of a
channel, bank code, currency, product, merchant (its callback URLs, currencies' thresholds, products, apps) or a
deny-list entry does not write the row; it becomes one StaffRequest whose payload is the field diff, and a second
person with the kind's permission applies it in the approval's transaction.

This module is the mechanism only and knows no domain: each domain registers its kind with `setting_change_kind`
from its own staff_requests.py, naming its models and the fields that are secrets. A secret travels in the payload
only as the model stores it (Fernet ciphertext, apps.common.crypto) and is shown as "replaced" or "cleared", never
in clear. A request whose object changed since it was asked for is refused at approval (stale), never merged.
"""

import hashlib
import json
from collections.abc import Callable

from django.core.exceptions import ValidationError
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models

from apps.common import audit
from apps.common.staff_requests import ChangeLine, StaffRequestKind, StaffRequestRefused


def _fields(model: type[models.Model]) -> list[models.Field]:
    """The stored columns a proposal may set: every concrete field but the primary key and the automatic times."""
    return [field for field in model._meta.concrete_fields
            if not field.primary_key and not getattr(field, "auto_now", False)
            and not getattr(field, "auto_now_add", False)]


def _value(obj: models.Model, field: models.Field):
    return json.loads(json.dumps(getattr(obj, field.attname), cls=DjangoJSONEncoder))


def setting_digest(obj: models.Model) -> str:
    """A fingerprint of the whole stored row (secrets included, as ciphertext): equal means nobody changed it."""
    state = {field.attname: _value(obj, field) for field in obj._meta.concrete_fields}
    return hashlib.sha256(json.dumps(state, sort_keys=True, cls=DjangoJSONEncoder).encode()).hexdigest()


def setting_change(*, proposed: models.Model) -> dict | None:
    """One object's part of a payload: what `proposed` (an unsaved instance edited by a form) would change in its
    stored row, or everything it sets when it is new; None when nothing changes."""
    model = type(proposed)
    stored = model.objects.filter(pk=proposed.pk).first() if proposed.pk else None
    fields = _fields(model)
    if stored is None:
        return {"model": model._meta.label_lower, "pk": None, "digest": None, "was": {},
                "set": {field.attname: _value(proposed, field) for field in fields}}
    changed = [field for field in fields if _value(proposed, field) != _value(stored, field)]
    if not changed:
        return None
    return {"model": model._meta.label_lower, "pk": proposed.pk, "digest": setting_digest(stored),
            "was": {field.attname: _value(stored, field) for field in changed},
            "set": {field.attname: _value(proposed, field) for field in changed}}


def _shown(values: dict, secrets: dict[str, str]) -> dict:
    """Values as the audit row records them: a secret only as replaced / cleared."""
    return {secrets.get(name, name): ("replaced" if value else "cleared") if name in secrets else value
            for name, value in values.items()}


def _object_words(model: type[models.Model], change: dict) -> str:
    if change["pk"] is None:
        return f"new {model._meta.verbose_name}"
    obj = model.objects.filter(pk=change["pk"]).first()
    return f"{model._meta.verbose_name} {obj if obj is not None else '#' + str(change['pk'])}"


def _label(model: type[models.Model], name: str, secrets: dict[str, str]) -> str:
    if name in secrets:
        return secrets[name]
    field = next((f for f in model._meta.concrete_fields if f.attname == name), None)
    return str(field.verbose_name) if field is not None else name


def _words(value) -> str:
    """A stored value in full, as the approver reads it: nothing cut, a list as the JSON the form takes."""
    if value is None:
        return "(none)"
    if value == "":
        return "(empty)"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _list_detail(old, new) -> str:
    """What a long list gains and loses, so that one code removed from a hundred is not missed."""
    if not isinstance(old, list) or not isinstance(new, list):
        return ""
    added = [item for item in new if item not in old]
    removed = [item for item in old if item not in new]
    parts = [f"added: {_words(added)[1:-1]}" if added else "", f"removed: {_words(removed)[1:-1]}" if removed else ""]
    return "; ".join(part for part in parts if part) or "same items, another order"


def _secret_words(value) -> str:
    return "set" if value else "(empty)"


def _secret_change(value, *, new_object: bool) -> str:
    if new_object:
        return _secret_words(value)
    return "replaced" if value else "cleared"


def setting_change_kind(*, models_: tuple[type[models.Model], ...], permission: str,
                        secrets: dict[str, str] | None = None,
                        conflict: Callable[[dict, object], str] = lambda payload, user: "") -> StaffRequestKind:
    """The StaffRequestKind of a domain's settings: `models_` the models its requests may change, `permission` the
    role that both asks and approves, `secrets` {stored field: words} of fields never shown in clear."""
    allowed = {model._meta.label_lower: model for model in models_}
    secrets = secrets or {}

    def model_of(change: dict) -> type[models.Model]:
        if change.get("model") not in allowed:
            raise StaffRequestRefused(f"{change.get('model')!r} is not a setting of this kind.")
        return allowed[change["model"]]

    def stored_of(model: type[models.Model], change: dict) -> models.Model | None:
        if change["pk"] is None:
            return None
        stored = model.objects.filter(pk=change["pk"]).first()
        if stored is None:
            raise StaffRequestRefused(f"no {model._meta.verbose_name} #{change['pk']}")
        return stored

    def describe(payload: dict) -> str:
        """Which fields of which objects, credentials first and named as replaced or cleared; the values are on the
        request page (changes)."""
        if not payload.get("changes"):
            raise StaffRequestRefused("nothing to change.")
        parts = []
        for change in payload["changes"]:
            model = model_of(change)
            stored_of(model, change)
            names = sorted(change["set"], key=lambda name: name not in secrets)
            new_object = change["pk"] is None
            words = ", ".join(f"{secrets[name]} {_secret_change(change['set'][name], new_object=new_object)}"
                              if name in secrets else _label(model, name, secrets) for name in names)
            parts.append(f"{_object_words(model, change)}: {words}")
        return "; ".join(parts)

    def changes(payload: dict) -> list[ChangeLine]:
        """Every field the request sets, its value now and once approved; `asked` when the value now is not the
        one the request was made against (approval then refuses the request as stale)."""
        if not payload.get("changes"):
            raise StaffRequestRefused("nothing to change.")
        lines = []
        for change in payload["changes"]:
            model = model_of(change)
            stored = stored_of(model, change)
            subject = _object_words(model, change)
            for name, value in change["set"].items():
                now = (json.loads(json.dumps(getattr(stored, name), cls=DjangoJSONEncoder))
                       if stored is not None else None)
                was = change["was"].get(name, now)
                moved = stored is not None and was != now
                if name in secrets:
                    lines.append(ChangeLine(
                        subject=subject, field=secrets[name],
                        current=_secret_words(now) if stored is not None else "",
                        new=_secret_change(value, new_object=stored is None),
                        asked=("replaced since" if moved else None)))
                    continue
                lines.append(ChangeLine(
                    subject=subject, field=_label(model, name, secrets), current=_words(now) if stored is not None else "",
                    new=_words(value), detail=_list_detail(now if stored else [], value),
                    asked=_words(was) if moved else None))
            if stored is not None and setting_digest(stored) != change["digest"] and not any(
                    line.asked is not None for line in lines if line.subject == subject):
                lines.append(ChangeLine(subject=subject, field="other fields",
                                        current="changed since the request was made",
                                        new="(not set by this request)", asked="unchanged"))
        return lines

    def apply(*, payload: dict, actor, reason: str) -> dict:
        done = []
        for change in payload["changes"]:
            model = model_of(change)
            if change["pk"] is None:
                obj = model()
            else:
                # Locked, then compared with the row as it was when the change was asked for: a request made
                # against an older state is refused, never applied over someone else's change.
                obj = model.objects.select_for_update().filter(pk=change["pk"]).first()
                if obj is None or setting_digest(obj) != change["digest"]:
                    raise StaffRequestRefused(f"{_object_words(model, change)} changed since this request was "
                                              f"made; reject it and ask again.")
            for name, value in change["set"].items():
                setattr(obj, name, value)
            try:
                obj.full_clean()
            except ValidationError as exc:
                raise StaffRequestRefused("; ".join(exc.messages)) from None
            obj.save()
            audit.record(actor=actor, action=f"{model._meta.model_name}.{'create' if change['pk'] is None else 'change'}",
                         obj=obj, old=_shown(change["was"], secrets), new=_shown(change["set"], secrets),
                         reason=reason)
            done.append(f"{model._meta.model_name} {obj.pk}")
        return {"applied": ", ".join(done)}

    apply.models = models_  # which settings this kind changes (tests/common/test_staff_request_kinds.py)
    return StaffRequestKind(permission=permission, describe=describe, changes=changes, apply=apply, conflict=conflict)
