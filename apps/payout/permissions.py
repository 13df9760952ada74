"""The payout staff groups and their permissions; created by the initial migration and kept after every migrate/flush."""

GROUPS = {
    # Review queue: see it and the orders, approve or reject, keep the deny list.
    "Risk reviewer": ["review_payout", "view_payout", "view_payoutreviewqueue", "view_denylistedaccount",
                      "add_denylistedaccount", "change_denylistedaccount"],
    # Operations: see the orders, ask for and approve (someone else's) reversals and balance adjustments
    # (four eyes: apps.common.staff_requests).
    "Payout operations": ["reverse_payout", "view_payout", "ledger.adjust_balance", "common.view_staffrequest",
                          "operations.view_operationsoverview"],
}


def payout_groups_ensure(apps) -> None:
    """Idempotent: each group exists with at least its permissions ("codename" of the payout app or
    "app_label.codename"). `apps`: a historical or the live registry."""
    from django.contrib.auth.management import create_permissions
    from django.db.models import Q

    wanted = [(name.split(".", 1) if "." in name else ("payout", name)) for names in GROUPS.values() for name in names]
    for label in {label for label, _ in wanted}:
        try:
            app_config = apps.get_app_config(label)
        except LookupError:
            continue
        if not getattr(app_config, "models_module", None):
            app_config.models_module = True  # a migration-state stub: let create_permissions see its models
        create_permissions(app_config, apps=apps, verbosity=0)  # normally created only after all migrations ran
    group_model = apps.get_model("auth", "Group")
    permission_model = apps.get_model("auth", "Permission")
    for name, codenames in GROUPS.items():
        group, _ = group_model.objects.get_or_create(name=name)
        match = Q(pk__in=[])
        for codename in codenames:
            label, code = codename.split(".", 1) if "." in codename else ("payout", codename)
            match |= Q(content_type__app_label=label, codename=code)
        group.permissions.add(*permission_model.objects.filter(match))


# --- staff users with a named role (management command create_staff) -----------------------------------------

# Role name on the command line -> the group it joins; "admin" is a superuser (every permission, no group).
STAFF_ROLES = {"operator": "Payout operations", "risk-reviewer": "Risk reviewer", "admin": None}


def staff_create(*, username: str, role: str, password: str, email: str = ""):
    """A staff user (admin login) with one named role; the password is validated by AUTH_PASSWORD_VALIDATORS and
    stored hashed. ValueError on bad input: unknown role, invalid or taken username, weak password."""
    from django.apps import apps as registry
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.contrib.auth.password_validation import validate_password
    from django.core.exceptions import ValidationError
    from django.core.validators import validate_email
    from django.db import IntegrityError, transaction

    from apps.common import audit

    user_model = get_user_model()
    if role not in STAFF_ROLES:
        raise ValueError(f"unknown role {role!r}: one of {', '.join(STAFF_ROLES)}")
    try:
        user_model.username_validator(username)
        if email:
            validate_email(email)
    except ValidationError as exc:
        raise ValueError(" ".join(exc.messages)) from None
    user = user_model(username=username, email=email, is_staff=True, is_superuser=role == "admin")
    try:
        validate_password(password, user=user)
    except ValidationError as exc:
        raise ValueError("password refused: " + " ".join(exc.messages)) from None
    user.set_password(password)
    group_name = STAFF_ROLES[role]
    try:
        with transaction.atomic(durable=True):
            if user_model.objects.filter(username=username).exists():
                raise ValueError(f"user {username!r} already exists")
            user.save()
            if group_name:
                if not Group.objects.filter(name=group_name).exists():
                    payout_groups_ensure(registry)
                user.groups.add(Group.objects.get(name=group_name))
            audit.record(actor=None, actor_label="cli", action="staff.create", obj=user,
                         new={"username": username, "email": email, "role": role})
    except IntegrityError:  # created by someone else between the check and the insert
        raise ValueError(f"user {username!r} already exists") from None
    return user
