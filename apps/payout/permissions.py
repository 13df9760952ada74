"""The payout staff groups and their permissions; created by the initial migration and kept after every migrate/flush."""

GROUPS = {
    # Review queue: see it and the orders, approve or reject, keep the deny list.
    "Risk reviewer": ["review_payout", "view_payout", "view_payoutreviewqueue", "view_denylistedaccount",
                      "add_denylistedaccount", "change_denylistedaccount"],
    # Operations: see the orders and reverse a successful one (admin action / reverse_payout).
    "Payout operations": ["reverse_payout", "view_payout"],
}


def payout_groups_ensure(apps) -> None:
    """Idempotent: each group exists with at least its permissions. `apps`: a historical or the live registry."""
    from django.contrib.auth.management import create_permissions

    app_config = apps.get_app_config("payout")
    if not getattr(app_config, "models_module", None):
        app_config.models_module = True  # a migration-state stub: let create_permissions see its models
    create_permissions(app_config, apps=apps, verbosity=0)  # normally created only after all migrations ran
    group_model = apps.get_model("auth", "Group")
    permission_model = apps.get_model("auth", "Permission")
    for name, codenames in GROUPS.items():
        group, _ = group_model.objects.get_or_create(name=name)
        group.permissions.add(*permission_model.objects.filter(content_type__app_label="payout",
                                                               codename__in=codenames))
