"""The settings audit trail (django-pghistory, apps.common.history): every change to a money setting, by whatever
path (the admin, a command, a service, raw SQL), leaves an event row with who, when, old and new; the audit tables
refuse UPDATE and DELETE in the database itself."""

import io
import json

import pghistory
import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction

from apps.common import audit
from apps.common.history import TRACKED_MODELS, event_changes, event_model_of, event_who, os_user
from apps.common.models import AuditLog
from apps.currencies.models import Currency
from apps.merchants.models import MerchantCurrency, MerchantKey
from apps.payout.models import DenyListedAccount
from tests.merchants.test_admin import _empty_inlines
from tests.support.four_eyes import approve_last_request
from tests.support.staff import admin_login

pytestmark = pytest.mark.django_db



def history(obj):
    """The event rows of one object, oldest first."""
    event_model = event_model_of(type(obj))
    return list(event_model.objects.filter(pgh_obj_id=obj.pk).select_related("pgh_context").order_by("pgh_id"))


@pytest.fixture
def root_client(client, db):
    admin_login(client, User.objects.create_superuser("root", password="pw"))
    return client


def test_every_money_setting_is_tracked():
    tracked = {model._meta.label for model in TRACKED_MODELS}
    assert tracked >= {"merchants.Merchant", "merchants.App", "merchants.MerchantKey", "merchants.Product",
                       "merchants.MerchantCurrency", "merchants.MerchantProduct", "merchants.PlatformKey",
                       "currencies.Currency", "channels.Channel", "channels.BankCode", "payout.DenyListedAccount"}


def test_a_change_in_the_admin_records_who_old_and_new(root_client, merchant):
    threshold = MerchantCurrency.objects.get(merchant=merchant.merchant, currency_id="PHP")
    before = threshold.payout_review_threshold
    data = _empty_inlines(merchant)
    data.update({"name": "Acme", "is_active": "on", "collection_callback_url": "", "payout_callback_url": "",
                 "change_reason": "merchant's risk review"})
    data["currencies-0-payout_review_threshold"] = "123456"
    response = root_client.post(f"/admin/merchants/merchant/{merchant.merchant.pk}/change/", data)
    assert response.status_code == 302
    request = approve_last_request()  # four eyes: the change is made by the approval, naming both people

    change = history(threshold)[-1]
    assert change.pgh_label == "update"
    assert event_who(change) == f"second-root (approved request #{request.pk} of root)"
    assert change.pgh_context.metadata["requested_by"] == "root"
    assert event_changes(change) == {"payout_review_threshold": (before, 123456)}

    page = root_client.get(f"/admin/merchants/merchantcurrencyevent/?pgh_obj={threshold.pk}")
    assert page.status_code == 200
    text = page.content.decode()
    assert "second-root (approved request" in text and f"{before} \u2192 123456" in text


def test_the_deny_list_added_and_lifted_in_the_admin_is_in_the_trail_with_the_account_masked(root_client, bootstrapped):
    response = root_client.post("/admin/payout/denylistedaccount/add/", {
        "payee_account": "0099990000", "currency": "PHP", "reason": "mule account", "is_active": "on"})
    assert response.status_code == 302
    entry = DenyListedAccount.objects.get(payee_account="0099990000")
    response = root_client.post(f"/admin/payout/denylistedaccount/{entry.pk}/change/", {
        "reason": "cleared by the bank", "is_active": "", "change_reason": "bank confirmed"})
    assert response.status_code == 302
    assert DenyListedAccount.objects.get(pk=entry.pk).is_active  # lifting is a request (four eyes)
    request = approve_last_request()
    added, lifted = history(entry)
    assert (added.pgh_label, lifted.pgh_label) == ("insert", "update")
    assert event_who(added) == "root"
    assert event_who(lifted) == f"second-root (approved request #{request.pk} of root)"
    assert event_changes(lifted) == {"reason": ("mule account", "cleared by the bank"), "is_active": (True, False)}
    assert event_changes(added)["payee_account"] == (None, "0099990000")

    for url in ["/admin/payout/denylistedaccountevent/", f"/admin/payout/denylistedaccountevent/{added.pk}/change/"]:
        page = root_client.get(url).content.decode()
        assert "\u2022\u2022\u2022\u20220000" in page and "0099990000" not in page, url


def test_a_command_records_the_command_and_who_ran_it(merchant, rsa_keys):
    from apps.common import signing
    from apps.merchants.services import merchant_key_add

    merchant_key_add(merchant_no=merchant.merchant_no,
                     public_key_pem=signing.public_key_to_pem(rsa_keys[1].public_key()))
    call_command("revoke_merchant_key", merchant.merchant_no, "1", stdout=io.StringIO())
    key = MerchantKey.objects.get(merchant=merchant.merchant, version=1)
    revoked = history(key)[-1]
    assert revoked.pgh_label == "update"
    assert event_who(revoked) == f"{os_user()} (manage.py revoke_merchant_key)"
    assert revoked.pgh_context.metadata["operator"] == os_user()
    [(field, (old, new))] = event_changes(revoked).items()
    assert (field, old) == ("revoked_at", None) and new is not None


def test_a_change_by_a_service_or_by_hand_in_the_database_is_recorded_all_the_same(db):
    from apps.merchants.services import product_defaults_ensure

    # Not through bootstrap: its command context would hold for this test's one transaction.
    php = Currency.objects.create(code="PHP", name="Philippine peso", symbol="\u20b1", minor_unit=2)
    [product, *_] = product_defaults_ensure(currency=php)  # a service
    assert [event.pgh_label for event in history(product)] == ["insert"]
    with connection.cursor() as cursor:  # a console session: no application, no context
        cursor.execute("UPDATE merchants_product SET fee_fixed = fee_fixed + 7 WHERE id = %s", [product.pk])
    change = history(product)[-1]
    assert event_changes(change) == {"fee_fixed": (product.fee_fixed, product.fee_fixed + 7)}
    assert event_who(change).startswith("unknown")

    Currency.objects.filter(code="PHP").update(active=False)  # a queryset update, no save() and no signal
    assert event_changes(history(php)[-1]) == {"active": (True, False)}
    product_defaults_ensure(currency=php)  # idempotent: nothing changes, nothing recorded
    assert [event.pgh_label for event in history(product)] == ["insert", "update"]


def test_audit_rows_cannot_be_updated_or_deleted_in_the_database(merchant):
    audit.record(actor=None, action="test.row", obj=merchant.merchant, new={"x": 1})
    change = history(merchant.merchant)[-1]
    statements = [
        ("UPDATE common_auditlog SET actor_label = 'someone else'", []),
        ("DELETE FROM common_auditlog", []),
        ("UPDATE merchants_merchantevent SET name = 'forged' WHERE pgh_id = %s", [change.pgh_id]),
        ("DELETE FROM merchants_merchantevent WHERE pgh_id = %s", [change.pgh_id]),
    ]
    for sql, params in statements:
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(sql, params)
    assert AuditLog.objects.filter(action="test.row").exists()
    assert history(merchant.merchant)[-1].name == change.name


def _all_trigger_names(table: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass AND NOT tgisinternal", [table])
        return "{" + ",".join(row[0] for row in cursor.fetchall()) + "}"


def test_a_session_cannot_switch_the_append_only_rule_off(merchant):
    """pgtrigger's triggers step aside for a session that names them in `pgtrigger.ignore`; the append-only rule must
    not: a forger with the application's database role tries exactly that."""
    audit.record(actor=None, action="test.row", obj=merchant.merchant, new={"x": 1})
    change = history(merchant.merchant)[-1]
    statements = [
        ("common_auditlog", "UPDATE common_auditlog SET actor_label = 'someone else'", []),
        ("common_auditlog", "DELETE FROM common_auditlog", []),
        ("merchants_merchantevent", "UPDATE merchants_merchantevent SET name = 'forged' WHERE pgh_id = %s",
         [change.pgh_id]),
        ("merchants_merchantevent", "DELETE FROM merchants_merchantevent WHERE pgh_id = %s", [change.pgh_id]),
    ]
    for table, sql, params in statements:
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SELECT set_config('pgtrigger.ignore', %s, true)", [_all_trigger_names(table)])
                cursor.execute(sql, params)
    assert AuditLog.objects.filter(action="test.row").exists()
    assert history(merchant.merchant)[-1].name == change.name


def test_who_made_a_settings_change_cannot_be_rewritten_or_erased(merchant):
    """The "who" of a settings event lives in its pghistory context row: rewriting or deleting it would move a change
    onto someone else, or onto nobody."""
    from pghistory.models import Context

    with pghistory.context(user=1, username="rita"):
        MerchantCurrency.objects.filter(merchant=merchant.merchant).update(payout_review_threshold=4_000_000)
    change = history(MerchantCurrency.objects.get(merchant=merchant.merchant, currency_id="PHP"))[-1]
    context = Context.objects.get(pk=change.pgh_context_id)
    forgeries = [
        ("UPDATE pghistory_context SET metadata = '{\"user\": 2, \"username\": \"mallory\"}' WHERE id = %s",
         [context.pk]),
        ("UPDATE pghistory_context SET metadata = metadata - 'username' WHERE id = %s", [context.pk]),
        ("DELETE FROM pghistory_context WHERE id = %s", [context.pk]),
    ]
    for sql, params in forgeries:
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SELECT set_config('pgtrigger.ignore', %s, true)",
                               [_all_trigger_names("pghistory_context")])
                cursor.execute(sql, params)
    assert event_who(history(MerchantCurrency.objects.get(merchant=merchant.merchant, currency_id="PHP"))[-1]) == "rita"
    with pghistory.context(user=1, username="rita"), pghistory.context(url="/admin/x/"):  # nested: adds a key
        MerchantCurrency.objects.filter(merchant=merchant.merchant).update(payout_review_threshold=4_100_000)


def test_every_event_table_is_append_only_in_the_database():
    from pghistory.core import event_models

    with connection.cursor() as cursor:
        cursor.execute("SELECT tgrelid::regclass::text FROM pg_trigger WHERE tgname = 'append_only_guard'")
        protected = {row[0] for row in cursor.fetchall()}
    # Every event model there is, those of membership tables (no pgh_obj) included.
    tables = {event_model._meta.db_table for event_model in event_models()}
    assert tables == {event_model._meta.db_table for model in TRACKED_MODELS
                      for event_model in event_models(tracks_model=model, include_missing_pgh_obj=True)}
    assert {"common_userevent", "common_usergroupevent", "common_userpermissionevent",
            "common_grouppermissionevent"} <= tables
    assert tables and tables | {"common_auditlog", "pghistory_context"} <= protected, (
        "a tracked model's event table lacks the append-only guard: add it to a migration like "
        "apps/common/migrations/0005_append_only_guards.py")


def test_history_pages_are_read_only_even_for_a_superuser(root_client, merchant):
    change = history(merchant.merchant)[-1]
    base = "/admin/merchants/merchantevent/"
    assert root_client.get(base).status_code == 200
    assert root_client.get(f"{base}{change.pgh_id}/change/").status_code == 200
    assert root_client.post(f"{base}{change.pgh_id}/change/", {"name": "forged"}).status_code == 403
    assert root_client.post(f"{base}{change.pgh_id}/delete/", {"post": "yes"}).status_code == 403
    assert root_client.get(f"{base}add/").status_code == 403
    assert history(merchant.merchant)[-1].name == change.name


def test_the_history_of_every_tracked_model_is_in_the_admin(root_client, merchant):
    for model in TRACKED_MODELS:
        event_model = event_model_of(model)
        url = f"/admin/{event_model._meta.app_label}/{event_model._meta.model_name}/"
        assert root_client.get(url).status_code == 200, url


def test_create_merchant_output_is_unchanged_by_the_trail(bootstrapped, rsa_keys, tmp_path):
    from apps.common import signing

    pem = tmp_path / "key.pem"
    pem.write_text(signing.public_key_to_pem(rsa_keys[0].public_key()))
    out = io.StringIO()
    call_command("create_merchant", "--name", "Trail Co", "--public-key", str(pem), "--currencies", "PHP", stdout=out)
    printed = json.loads(out.getvalue())
    merchant_no = printed["merchant_no"]
    from apps.merchants.models import Merchant

    created = history(Merchant.objects.get(merchant_no=merchant_no))[0]
    assert created.pgh_label == "insert" and "create_merchant" in event_who(created)


def test_a_tracked_object_page_links_to_its_own_history(root_client, merchant, other_merchant):
    page = root_client.get(f"/admin/merchants/merchant/{merchant.merchant.pk}/change/").content.decode()
    link = f"/admin/merchants/merchantevent/?pgh_obj={merchant.merchant.pk}"
    assert f'href="{link}"' in page
    listed = root_client.get(link).content.decode()
    assert f"merchant #{merchant.merchant.pk}<" in listed and f"merchant #{other_merchant.merchant.pk}<" not in listed
    root = User.objects.get(username="root")
    user_page = root_client.get(f"/admin/auth/user/{root.pk}/change/").content.decode()
    assert f'href="/admin/common/userevent/?pgh_obj={root.pk}"' in user_page  # staff accounts are in the trail
    group = Group.objects.get(name="Risk reviewer")
    group_page = root_client.get(f"/admin/auth/group/{group.pk}/change/")
    assert group_page.status_code == 200 and "historylink" in group_page.content.decode()
    assert "settings-history-link" not in group_page.content.decode()  # an untracked model: no such link


def test_bank_codes_and_channels_edited_in_the_admin_are_in_the_trail_with_who(root_client, bootstrapped):
    from apps.channels.models import BankCode, Channel

    bank = BankCode.objects.get(currency_id="PHP", code="BDO")
    response = root_client.post(f"/admin/channels/bankcode/{bank.pk}/change/", {
        "currency": "PHP", "code": "BDO", "name": "BDO Unibank (renamed)", "kind": bank.kind, "is_active": "",
        "change_reason": "bank merged"})
    assert response.status_code == 302, response.content.decode()[:1500]
    request = approve_last_request()
    change = history(bank)[-1]
    assert event_who(change) == f"second-root (approved request #{request.pk} of root)"
    assert event_changes(change) == {"name": (bank.name, "BDO Unibank (renamed)"), "is_active": (True, False)}

    channel = Channel.objects.filter(currency_id="PHP").order_by("pk").first()
    form = {"code": channel.code, "name": channel.name, "adapter": channel.adapter, "direction": channel.direction,
            "currency": channel.currency_id, "priority": str(channel.priority + 5), "api_base_url": "",
            "change_reason": "route order", **({"is_active": "on"} if channel.is_active else {})}
    response = root_client.post(f"/admin/channels/channel/{channel.pk}/change/", form)
    assert response.status_code == 302, response.content.decode()[:1500]
    request = approve_last_request()
    change = history(channel)[-1]
    assert event_who(change) == f"second-root (approved request #{request.pk} of root)"
    assert event_changes(change) == {"priority": (channel.priority, channel.priority + 5)}
    page = root_client.get(f"/admin/channels/channelevent/?pgh_obj={channel.pk}").content.decode()
    assert "approved request" in page and f"{channel.priority} \u2192 {channel.priority + 5}" in page
