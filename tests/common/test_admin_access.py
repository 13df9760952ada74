"""Every admin page and action refuses anonymous users (login page) and staff without the permission (403, or
the action is not offered and does nothing).

The URLs come from `admin.site._registry` and each ModelAdmin's `get_urls()`, and the actions from each
ModelAdmin's actions, so a page or action added later is covered without touching this file; a new action
without a row in ACTIONS fails `test_every_admin_action_has_a_permission_test` until one is added.
"""

import re
from datetime import timedelta

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group, Permission, User
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from apps.callbacks.models import CallbackAttempt, CallbackEvent
from apps.channels.models import RefundRule
from apps.collection.refunds import refund_create
from apps.collection.services import collection_create, collection_notify_paid
from apps.common.models import Heartbeat, StaffRequest
from apps.common.staff_requests import KINDS, staff_request_changes, staff_request_changes_digest
from apps.common.staff_signin import new_recovery_codes
from apps.ledger.services import balance_adjust, statements_prepare
from apps.ledger.statements import statement_today
from apps.merchants.models import MerchantKey
from apps.operations.models import OperationsOverview
from apps.payout import services as payout_services
from apps.payout.models import DenyListedAccount, Payout
from tests.conftest import bootstrap_with, make_merchant
from tests.support.built_once import fresh, one_transaction
from tests.support.staff import add_authenticator, admin_login

pytestmark = pytest.mark.django_db
# The world below is built once per module and worker (~2 s): under xdist its tests are spread over the workers like
# any others instead of kept in one (tests/conftest.py, _xdist_group).
BUILT_ONCE_PER_WORKER = True

REGISTRY = sorted(admin.site._registry.items(), key=lambda item: item[0]._meta.label_lower)
LABELS = [model._meta.label_lower for model, _ in REGISTRY]
ADMINS = {model._meta.label_lower: model_admin for model, model_admin in REGISTRY}
MODELS = {model._meta.label_lower: model for model, _ in REGISTRY}
SIGN_IN_TABLES = ("django_session", "auth_user")  # a request's session; last_login
ALL_ACTIONS = sorted((label, name) for label, model_admin in ADMINS.items()
                     for _, name, _ in model_admin._get_base_actions())


# --- a populated platform: at least one object behind every admin page ---------------------------------------

def _refuse_disbursements(patch):
    from apps.channels.sandbox_payout import SandboxPayoutAdapter

    patch.setattr(SandboxPayoutAdapter, "start_disbursement", lambda self, *, payout: "REF-1")


@pytest.fixture(scope="module")
def _world_once(django_db_setup, django_db_blocker, _bootstrap_rows, bootstrap_platform_key, rsa_keys):
    """Built once per module in a transaction of its own; each test runs in a savepoint of it, so what a test writes
    is rolled back before the next (tests/support/built_once.py, docs/testing.md "Built once"). A build per test was
    the largest set-up of the suite: ~2 s for each of the 136 tests on the 2-core host."""
    with one_transaction(django_db_blocker), pytest.MonkeyPatch.context() as patch:
        if not _bootstrap_rows.put_back():  # what the `bootstrapped` fixture does, here once for the module
            _bootstrap_rows.run(lambda: bootstrap_with(bootstrap_platform_key))
        _refuse_disbursements(patch)
        yield _build_world(make_merchant(rsa_keys[0], currencies=("PHP", "USD")))


@pytest.fixture
def world(_world_once, db, monkeypatch):
    """The module's world, each test with copies of its objects (a test may change them) and the sandbox's
    disbursement stubbed as while it was built."""
    _refuse_disbursements(monkeypatch)
    return fresh(_world_once)


def _build_world(merchant):
    balance_adjust(merchant_no=merchant.merchant_no, currency="PHP", amount=100_000_000, reason="test funds")
    order = collection_create(merchant=merchant.merchant, mch_order_no="ADM-C1", product_code="PHP_COLLECT_D0",
                              amount=10_000, currency="PHP")
    collection_notify_paid(platform_order_no=order.platform_order_no)
    refund = refund_create(merchant=merchant.merchant, mch_order_no="ADM-C1", mch_refund_no="ADM-R1", amount=1_000)
    event = CallbackEvent.objects.get(platform_order_no=order.platform_order_no)
    CallbackAttempt.objects.create(event=event, number=1, started_at=event.created_at, url="http://127.0.0.1/",
                                   http_status=500, error="boom")
    CallbackEvent.objects.filter(pk=event.pk).update(status=CallbackEvent.Status.DEAD, attempts_count=1)

    def payout(mch_order_no, amount):
        return payout_services.payout_create(merchant=merchant.merchant, mch_order_no=mch_order_no,
                                             product_code="PHP_PAYOUT", amount=amount, currency="PHP",
                                             payee_name="Payee", payee_account="0012345678", bank_code="BDO")

    frozen = payout("ADM-P1", 5_000_000)  # at the review threshold
    paid = payout("ADM-P2", 10_000)
    payout_services.payout_submit(payout_id=paid.pk)
    payout_services.payout_channel_result(platform_order_no=paid.platform_order_no, outcome="paid")
    DenyListedAccount.objects.create(payee_account="0099990000", reason="fraud")
    RefundRule.objects.create(channel=order.channel, method="otc", refundable=False)  # and its trail's event
    group = Group.objects.create(name="Somebody's group")
    someone = User.objects.create_user("someone", password="pw-for-tests-1", is_staff=True)
    someone.groups.add(group)  # a role and a direct permission granted: the staff roles' trail has rows
    someone.user_permissions.add(Permission.objects.get(content_type__app_label="payout", codename="view_payout"))
    add_authenticator(someone)  # second factors: an authenticator and recovery codes
    new_recovery_codes(someone)
    # Today's statement, stored as the daily task would store it once the day is closed.
    statements_prepare(day=statement_today(), now=timezone.now() + timedelta(days=2))
    # A balance adjustment someone asked for, waiting for a second person (four eyes).
    asked = StaffRequest.objects.create(kind=StaffRequest.Kind.BALANCE_ADJUSTMENT, requested_by=someone,
                                        payload={"merchant_no": merchant.merchant_no, "currency": "PHP",
                                                 "amount": 500},
                                        summary="Credit 5.00 PHP", reason="goodwill")
    beat, _ = Heartbeat.objects.update_or_create(name="payout.sweeper", defaults={"beat_at": timezone.now()})
    from apps.portal.models import MerchantUser
    from tests.portal.support import portal_user

    person = MerchantUser.objects.get(user=portal_user(merchant, "owner"))  # a merchant user, with an authenticator
    from apps.portal.refunds import refund_request_create

    refund_request_create(actor=person, platform_order_no=order.platform_order_no, amount=500, reason="damaged")
    return {"auth.user": someone, "portal.merchantuser": person, "payout.payoutreviewqueue": frozen, "common.staffrequest": asked,
            "operations.operationsoverview": OperationsOverview.objects.get(pk=beat.pk),
            "payout.payout": Payout.objects.get(pk=paid.pk), "callbacks.callbackevent": event,
            "merchants.merchantkey": MerchantKey.objects.get(merchant=merchant.merchant),
            "collection.collectionorder": order, "collection.refund": refund}


def target(world, label):
    obj = world.get(label) or MODELS[label]._default_manager.order_by("pk").first()
    assert obj is not None, f"no {label} object for its admin pages: create one in the world fixture"
    return obj


def model_urls(label: str, pk) -> list[str]:
    """Every URL of the ModelAdmin, its path converters filled with the object's pk."""
    app_label, model_name = label.split(".")
    return [f"/admin/{app_label}/{model_name}/" + re.sub(r"<(?:\w+:)?\w+>", str(pk), str(pattern.pattern))
            for pattern in ADMINS[label].get_urls()]


def requests_for(label: str, pk) -> list[tuple[str, str, dict]]:
    """GET and POST of every URL; on the changelist, a POST of each action on the object."""
    generic_post = {"post": "yes", "apply": "1", "reason": "x", "reversal_amount": "1", "fee_refund": "0",
                    "name": "changed", "is_active": "on"}
    requests = []
    for url in model_urls(label, pk):
        requests += [("get", url, {}), ("post", url, generic_post)]
    changelist = model_urls(label, pk)[0]
    for _, name, _ in ADMINS[label]._get_base_actions():
        requests.append(("post", changelist, {"action": name, "_selected_action": [str(pk)], **generic_post}))
    return requests


def everything() -> dict:
    """Rows inserted, updated or deleted so far in the test's transaction, per table (PostgreSQL's own count,
    pg_stat_xact_user_tables): equal before and after = no write to any table, whatever model or table it would be.
    Signing in moves the session's and the sign-in's tables; nothing else may move."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT relname, n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_xact_user_tables "
                       "WHERE n_tup_ins + n_tup_upd + n_tup_del > 0 AND relname <> ALL(%s)", [list(SIGN_IN_TABLES)])
        return {table: counts for table, *counts in cursor.fetchall()}


def staff(username: str, permissions=()) -> User:
    user = User.objects.create_user(username, password="pw-for-tests-1", is_staff=True)
    user.user_permissions.set(permissions)
    return user


# --- anonymous and staff without any permission -----------------------------------------------------------------

@pytest.mark.parametrize("label", LABELS)
def test_anonymous_is_sent_to_login_from_every_page_and_action(client, world, label):
    pk = target(world, label).pk
    before = everything()
    for method, url, data in requests_for(label, pk):
        response = getattr(client, method)(url, data)
        assert response.status_code == 302, (method, url, response.status_code)
        assert response["Location"].startswith("/admin/login/"), (method, url, response["Location"])
    assert everything() == before


@pytest.mark.parametrize("label", LABELS)
def test_staff_without_permissions_is_refused_every_page_and_action(client, world, label):
    admin_login(client, staff("clerk"))
    pk = target(world, label).pk
    before = everything()
    for method, url, data in requests_for(label, pk):
        response = getattr(client, method)(url, data, follow=True)  # `<pk>/` redirects to the change page
        assert response.status_code == 403, (method, url, response.status_code)
    assert everything() == before


def test_site_pages_send_anonymous_to_login_and_list_nothing_to_staff_without_permissions(client, world):
    site_urls = [reverse("admin:index"), reverse("admin:password_change"), reverse("admin:autocomplete"),
                 reverse("admin:jsi18n")]
    site_urls += [reverse("admin:app_list", kwargs={"app_label": label.split(".")[0]}) for label in LABELS]
    for url in site_urls:
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/admin/login/"), url

    admin_login(client, staff("clerk"))
    index = client.get(reverse("admin:index")).content.decode()
    for label in LABELS:
        assert f'href="/admin/{label.replace(".", "/")}/"' not in index, label
        assert client.get(reverse("admin:app_list", kwargs={"app_label": label.split(".")[0]})).status_code == 404
    response = client.get(reverse("admin:autocomplete"), {"app_label": "merchants", "model_name": "merchantkey",
                                                          "field_name": "merchant", "term": "M"})
    assert response.status_code == 403


# --- each action needs its own permission ------------------------------------------------------------------------

def _reverse_data(world):
    paid = world["payout.payout"]
    return {"apply": "1", "reversal_amount": str(paid.amount), "fee_refund": "0", "reason": "bank return"}


def _seen(request):
    """The digest the approval page sends with its form: the change as the approver read it."""
    return {f"seen_{request.pk}": staff_request_changes_digest(staff_request_changes(request))}


# (model, action) -> (the permissions that gate it, extra form data, "it happened" check)
ACTIONS = {
    ("merchants.merchantkey", "revoke_selected"): (
        ["merchants.change_merchantkey"], lambda w: {},
        lambda w: MerchantKey.objects.get(pk=w["merchants.merchantkey"].pk).revoked_at is not None),
    ("callbacks.callbackevent", "resend"): (
        ["callbacks.change_callbackevent"], lambda w: {},
        lambda w: CallbackEvent.objects.get(pk=w["callbacks.callbackevent"].pk).status == "pending"),
    ("payout.payoutreviewqueue", "approve_selected"): (
        ["payout.review_payout"], lambda w: {"apply": "1", "reason": "payee known"},
        lambda w: Payout.objects.get(pk=w["payout.payoutreviewqueue"].pk).status == "APPROVED"),
    ("payout.payoutreviewqueue", "reject_selected"): (
        ["payout.review_payout"], lambda w: {"apply": "1", "reason": "payee unverified"},
        lambda w: Payout.objects.get(pk=w["payout.payoutreviewqueue"].pk).status == "REJECTED"),
    ("payout.payout", "reverse_selected"): (  # asks for the reversal; a second person approves it
        ["payout.reverse_payout"], _reverse_data,
        lambda w: StaffRequest.objects.filter(kind=StaffRequest.Kind.PAYOUT_REVERSAL).exists()),
    # Deciding needs the permission of the request's kind (a balance adjustment here); every kind's permission
    # is excluded so the action is not even offered, then adjust_balance alone is added back.
    ("common.staffrequest", "approve_selected"): (
        ["ledger.adjust_balance", *sorted({spec.permission for spec in KINDS.values()} - {"ledger.adjust_balance"})],
        lambda w: {"apply": "1", "reason": "checked", **_seen(w["common.staffrequest"])},
        lambda w: StaffRequest.objects.get(pk=w["common.staffrequest"].pk).status == "APPROVED"),
    ("portal.merchantuser", "ask_recovery"): (  # asks for the recovery; a second person approves it
        ["portal.recover_access"], lambda w: {"apply": "1", "reason": "lost phone, called back"},
        lambda w: StaffRequest.objects.filter(kind=StaffRequest.Kind.ACCESS_RECOVERY).exists()),
    ("common.staffrequest", "reject_selected"): (
        ["ledger.adjust_balance", *sorted({spec.permission for spec in KINDS.values()} - {"ledger.adjust_balance"})],
        lambda w: {"apply": "1", "reason": "no ticket"},
        lambda w: StaffRequest.objects.get(pk=w["common.staffrequest"].pk).status == "REJECTED"),
}


def test_every_admin_action_has_a_permission_test():
    custom = {(label, name) for label, name in ALL_ACTIONS if name != "delete_selected"}
    assert custom - set(ACTIONS) == set(), "new admin action: add it to ACTIONS with its permission and effect"


def _permissions_except(codenames: list[str]):
    excluded = [(name.split(".")[0], name.split(".")[1]) for name in codenames]
    permissions = Permission.objects.all()
    for app_label, codename in excluded:
        permissions = permissions.exclude(content_type__app_label=app_label, codename=codename)
    return list(permissions)


@pytest.mark.parametrize("label, action", sorted(ACTIONS), ids=[f"{label}:{name}" for label, name in sorted(ACTIONS)])
def test_action_is_refused_to_staff_with_every_permission_but_its_own(client, world, label, action):
    required, form, happened = ACTIONS[(label, action)]
    user = staff("almost", _permissions_except(required))
    admin_login(client, user)
    obj = target(world, label)
    changelist = model_urls(label, obj.pk)[0]
    page = client.get(changelist)
    assert page.status_code == 403 or f'value="{action}"' not in page.content.decode()  # not offered
    before = everything()
    client.post(changelist, {"action": action, "_selected_action": [str(obj.pk)], **form(world)})
    assert not happened(world)
    assert everything() == before

    # The same user with the permission added does it: the check above can fail.
    user.user_permissions.add(*Permission.objects.filter(
        content_type__app_label=required[0].split(".")[0], codename__in=[name.split(".")[1] for name in required]))
    client.post(changelist, {"action": action, "_selected_action": [str(obj.pk)], **form(world)})
    assert happened(world)


@pytest.mark.parametrize("label", [label for label, name in ALL_ACTIONS if name == "delete_selected"])
def test_delete_is_refused_to_staff_without_the_delete_permission(client, world, label):
    app_label, model_name = label.split(".")
    user = staff("almost", _permissions_except([f"{app_label}.delete_{model_name}"]))
    admin_login(client, user)
    obj = target(world, label)
    before = everything()
    client.post(model_urls(label, obj.pk)[0], {"action": "delete_selected", "_selected_action": [str(obj.pk)],
                                              "post": "yes"})
    response = client.post(f"/admin/{app_label}/{model_name}/{obj.pk}/delete/", {"post": "yes"})
    assert response.status_code == 403
    assert everything() == before


# --- the admin's custom write pages (create merchant, upload key, rotate platform key) ---------------------------

def _merchant_form(world, rsa_keys):
    from apps.common import signing

    return {"name": "Created In Admin", "currencies": ["PHP"],
            "public_key_text": signing.public_key_to_pem(rsa_keys[2].public_key())}


def _key_form(world, rsa_keys):
    from apps.common import signing

    return {"merchant": world["merchants.merchantkey"].merchant.merchant_no, "reason": "merchant ticket 9",
            "public_key_text": signing.public_key_to_pem(rsa_keys[2].public_key())}


# model -> (its add permission, form data, "it happened" check)
ADD_VIEWS = {
    "merchants.merchant": ("add_merchant", _merchant_form,
                           lambda: MODELS["merchants.merchant"].objects.filter(name="Created In Admin").exists()),
    # A staff upload is a request (four eyes): the key exists only after a second person approves it.
    "merchants.merchantkey": ("add_merchantkey", _key_form,
                              lambda: StaffRequest.objects.filter(kind=StaffRequest.Kind.MERCHANT_KEY).exists()),
    "common.staffrequest": ("ledger.adjust_balance",
                            lambda world, keys: {"merchant_no": world["merchants.merchantkey"].merchant.merchant_no,
                                                 "currency": "PHP", "amount": "250", "reason": "goodwill credit"},
                            lambda: StaffRequest.objects.filter(summary__contains="2.50").exists()),
    "merchants.platformkey": ("add_platformkey", lambda world, keys: {},
                              lambda: MODELS["merchants.platformkey"].objects.filter(version=2).exists()),
    # The user admin makes staff accounts only (docs/staff-access.md, "Independence").
    "auth.user": ("add_user", lambda world, keys: {"username": "made-in-admin", "password1": "Tq7-vault-Lorry-58",
                                                    "password2": "Tq7-vault-Lorry-58", "usable_password": "true"},
                  lambda: MODELS["auth.user"].objects.filter(username="made-in-admin", is_staff=True).exists()),
}


@pytest.mark.parametrize("label", sorted(ADD_VIEWS))
def test_custom_add_page_is_refused_to_staff_with_every_permission_but_add(client, world, rsa_keys, label):
    permission, form, happened = ADD_VIEWS[label]
    app_label, model_name = label.split(".")
    permission = permission if "." in permission else f"{app_label}.{permission}"
    user = staff("almost", _permissions_except([permission]))
    admin_login(client, user)
    url = f"/admin/{app_label}/{model_name}/add/"
    before = everything()
    assert client.get(url).status_code == 403
    assert client.post(url, form(world, rsa_keys)).status_code == 403
    assert not happened() and everything() == before

    permission_label, codename = permission.split(".")
    user.user_permissions.add(Permission.objects.get(content_type__app_label=permission_label, codename=codename))
    response = client.post(url, form(world, rsa_keys))
    assert response.status_code == 302, response.content.decode()[:1000]
    assert happened()


def test_every_custom_add_page_has_a_permission_test():
    custom = {label for label, model_admin in ADMINS.items()
              if type(model_admin).__module__.startswith("apps.")
              and type(model_admin).add_view is not admin.ModelAdmin.add_view}
    assert custom - set(ADD_VIEWS) == set(), "new custom add page: add it to ADD_VIEWS with its permission and effect"


# --- what each role finds by following links -------------------------------------------------------------------

NAKED_TIME = re.compile(r"\b\d{1,2}:\d\d(?::\d\d)? ?(?:a\.m\.|p\.m\.)|\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|"
                        r"Dec)[a-z]*\.? \d{1,2}, \d{4}|\b\d{4}-\d\d-\d\d \d\d:\d\d(?::\d\d)?(?![:\d])(?! ?UTC)")


def crawl(client, start: list[str], limit: int = 150) -> dict[str, int]:
    """GET every /admin/ page reachable by links from `start` (no logout, no sorting variants); {url: status}."""
    from html.parser import HTMLParser

    class Links(HTMLParser):
        def __init__(self):
            super().__init__()
            self.found = []

        def handle_starttag(self, tag, attrs):
            href = dict(attrs).get("href") or ""
            if tag == "a" and href.startswith("/admin/") and "/logout/" not in href and "o=" not in href:
                self.found.append(href.split("#")[0])

    statuses, pages, todo = {}, {}, list(start)
    while todo and len(statuses) < limit:
        url = todo.pop(0)
        if url in statuses:
            continue
        response = client.get(url)
        statuses[url] = response.status_code
        if response.status_code == 200 and "html" in response.get("Content-Type", ""):
            pages[url] = response.content.decode()
            parser = Links()
            parser.feed(pages[url])
            todo += [link for link in parser.found if link not in statuses]
    return statuses, pages


@pytest.mark.parametrize("group", ["Risk reviewer", "Payout operations"])
def test_no_link_a_role_is_shown_answers_403_and_every_time_names_its_zone(client, world, group):
    """A reviewer or an operator follows every link the back office shows them: none answers 403 (a page they may
    not see, and a traceback in the log), and no time on any page lacks its zone ("Nov. 25, 2026, 2:52 p.m.")."""
    user = staff(f"crawler-{group.split()[0].lower()}")
    user.groups.set([Group.objects.get(name=group)])
    admin_login(client, user)
    start = ["/admin/", f"/admin/payout/payout/{world['payout.payout'].pk}/change/",
             f"/admin/payout/payoutreviewqueue/{world['payout.payoutreviewqueue'].pk}/decide/",
             f"/admin/common/staffrequest/{world['common.staffrequest'].pk}/change/"]
    statuses, pages = crawl(client, [url for url in start if client.get(url).status_code == 200])
    assert len(pages) > 5, statuses
    assert {url: status for url, status in statuses.items() if status not in (200, 302)} == {}
    naked = {url: NAKED_TIME.findall(re.sub(r"<[^>]+>", " ", page)) for url, page in pages.items()}
    assert {url: found for url, found in naked.items() if found} == {}


def test_the_write_count_sees_a_write_to_any_table_and_a_refused_page_moves_nothing(client, world):
    """The checks above can fail: an update the admin never shows, and an insert, each move the count."""
    admin_login(client, staff("clerk"))
    before = everything()
    assert client.get(reverse("admin:merchants_merchantkey_changelist")).status_code == 403
    assert everything() == before
    MerchantKey.objects.filter(pk=MerchantKey.objects.order_by("pk").first().pk).update(fingerprint="changed")
    assert everything() != before
    moved = everything()
    Group.objects.create(name="written")
    assert everything() != moved
