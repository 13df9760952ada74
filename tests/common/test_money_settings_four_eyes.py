"""Four eyes on every setting that moves money : in the admin, one person alone, a superuser too, only asks for the
change; the requester cannot approve it; a staff member of another role cannot; a second person with the setting's role
approves it and only then does it take effect, audited with both names. Secrets never appear in clear on the request
pages or in the audit trail."""

import json
from dataclasses import dataclass
from typing import Callable

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.test import Client

from apps.channels.models import BankCode, Channel
from apps.channels.services import channel_credentials_set
from apps.common.models import AuditLog, StaffRequest
from apps.common.staff_requests import StaffRequestRefused, staff_request_approve
from apps.currencies.models import Currency
from apps.merchants.models import MerchantCurrency, Product
from apps.payout.models import DenyListedAccount
from tests.channels.xendit_emulator import XenditEmulator
from tests.merchants.test_admin import _empty_inlines
from tests.support.four_eyes import approval_form, staff_account
from tests.support.staff import admin_login

pytestmark = pytest.mark.django_db

REAL_SECRET, REAL_TOKEN = "xnd_production_RealPlatformKey111", "real-callback-token-222"
ATTACKER_SECRET, ATTACKER_TOKEN = "xnd_development_AttackerOwnKey333", "attacker-callback-token-444"
REQUESTS = "/admin/common/staffrequest/"


@pytest.fixture
def xendit(settings):
    """Xendit (the emulator) as the deployment's API root: a new payout channel is checked against its payout channel
    list with the key typed (docs/channels.md, "Configuring Xendit")."""
    emulator = XenditEmulator(secret_key=ATTACKER_SECRET).start()
    settings.XENDIT_API_BASE_URL = emulator.url
    yield emulator
    emulator.stop()


@pytest.fixture
def world(bootstrapped, merchant, settings, xendit):
    settings.PLATFORM_ENVIRONMENT = "live"
    channel = Channel.objects.create(code="XENDIT_PHP_PAYIN", name="Xendit PHP pay-in", adapter="xendit",
                                     direction="payin", currency_id="PHP")
    channel_credentials_set(channel=channel, secret_key=REAL_SECRET, callback_token=REAL_TOKEN)
    BankCode.objects.filter(currency_id="PHP", code="GCASH").update(is_active=False)
    deny = DenyListedAccount.objects.create(payee_account="0099990000", currency_id="PHP", reason="mule account")
    return {"channel": channel, "merchant": merchant, "deny": deny,
            "bank": BankCode.objects.get(currency_id="PHP", code="GCASH"),
            "product": Product.objects.filter(kind="payout", currency_id="PHP").first(),
            "threshold": MerchantCurrency.objects.get(merchant=merchant.merchant, currency_id="PHP")}


def channel_form(channel, **overrides) -> dict:
    data = {"code": channel.code, "name": channel.name, "adapter": channel.adapter, "direction": channel.direction,
            "currency": channel.currency_id, "is_active": "on", "priority": str(channel.priority),
            "weight": str(channel.weight), "bank_codes": json.dumps(channel.bank_codes),
            "api_base_url": channel.api_base_url, "secret_key": "", "callback_token": "",
            "change_reason": "ticket 4711"}
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


def product_form(product, **overrides) -> dict:
    data = {"fee_fixed": str(product.fee_fixed), "fee_rate_bps": str(product.fee_rate_bps),
            "min_amount": str(product.min_amount), "max_amount": str(product.max_amount), "is_active": "on",
            "change_reason": "price list 2027"}
    data.update(overrides)
    return data


def merchant_form(merchant, *, inline: dict | None = None, **overrides) -> dict:
    data = _empty_inlines(merchant)
    m = merchant.merchant
    data.update({"name": m.name, "is_active": "on", "collection_callback_url": m.collection_callback_url,
                 "payout_callback_url": m.payout_callback_url, "change_reason": "merchant's request, ticket 9"})
    data.update(inline or {})
    data.update(overrides)
    return data


@dataclass
class Case:
    name: str
    kind: str
    permission: str  # the second person's role
    url: Callable[[dict], str]
    data: Callable[[dict], dict]
    read: Callable[[dict], object]
    expected: object


def _channel(w):
    return Channel.objects.get(pk=w["channel"].pk)


CASES = [
    Case("channel credentials", StaffRequest.Kind.CHANNEL_SETTING, "channels.change_channel",
         lambda w: f"/admin/channels/channel/{w['channel'].pk}/change/",
         lambda w: channel_form(w["channel"], secret_key=ATTACKER_SECRET, callback_token=ATTACKER_TOKEN),
         lambda w: (_channel(w).secret_key, _channel(w).callback_token), (ATTACKER_SECRET, ATTACKER_TOKEN)),
    Case("channel API root", StaffRequest.Kind.CHANNEL_SETTING, "channels.change_channel",
         lambda w: f"/admin/channels/channel/{w['channel'].pk}/change/",
         lambda w: channel_form(w["channel"], api_base_url="https://upstream.attacker.example"),
         lambda w: _channel(w).api_base_url, "https://upstream.attacker.example"),
    Case("which channel serves a currency", StaffRequest.Kind.CHANNEL_SETTING, "channels.change_channel",
         lambda w: f"/admin/channels/channel/{w['channel'].pk}/change/",
         lambda w: channel_form(w["channel"], currency="IDR"), lambda w: _channel(w).currency_id, "IDR"),
    Case("channel activation", StaffRequest.Kind.CHANNEL_SETTING, "channels.change_channel",
         lambda w: f"/admin/channels/channel/{w['channel'].pk}/change/",
         lambda w: channel_form(w["channel"], is_active=None), lambda w: _channel(w).is_active, False),
    Case("draining a channel", StaffRequest.Kind.CHANNEL_SETTING, "channels.change_channel",
         lambda w: f"/admin/channels/channel/{w['channel'].pk}/change/",
         lambda w: channel_form(w["channel"], is_draining="on"), lambda w: _channel(w).is_draining, True),
    Case("which amounts a channel serves", StaffRequest.Kind.CHANNEL_SETTING, "channels.change_channel",
         lambda w: f"/admin/channels/channel/{w['channel'].pk}/change/",
         lambda w: channel_form(w["channel"], max_amount="100000"), lambda w: _channel(w).max_amount, 100_000),
    Case("a new channel", StaffRequest.Kind.CHANNEL_SETTING, "channels.change_channel",
         lambda w: "/admin/channels/channel/add/",
         lambda w: channel_form(w["channel"], code="XENDIT_PHP_PAYOUT", direction="payout", priority="1",
                                secret_key=ATTACKER_SECRET, callback_token=ATTACKER_TOKEN),
         lambda w: Channel.objects.filter(code="XENDIT_PHP_PAYOUT").exists(), True),
    Case("bank code activation", StaffRequest.Kind.BANK_CODE_SETTING, "channels.change_bankcode",
         lambda w: f"/admin/channels/bankcode/{w['bank'].pk}/change/",
         lambda w: {"currency": "PHP", "code": "GCASH", "name": "GCash", "kind": "ewallet", "is_active": "on",
                    "change_reason": "wallet back online"},
         lambda w: BankCode.objects.get(pk=w["bank"].pk).is_active, True),
    Case("product fee", StaffRequest.Kind.PRODUCT_SETTING, "merchants.change_product",
         lambda w: f"/admin/merchants/product/{w['product'].pk}/change/",
         lambda w: product_form(w["product"], fee_fixed="0", fee_rate_bps="0"),
         lambda w: (lambda p: (p.fee_fixed, p.fee_rate_bps))(Product.objects.get(pk=w["product"].pk)), (0, 0)),
    Case("product limit", StaffRequest.Kind.PRODUCT_SETTING, "merchants.change_product",
         lambda w: f"/admin/merchants/product/{w['product'].pk}/change/",
         lambda w: product_form(w["product"], max_amount="99999999999"),
         lambda w: Product.objects.get(pk=w["product"].pk).max_amount, 99999999999),
    Case("review threshold", StaffRequest.Kind.MERCHANT_SETTING, "merchants.change_merchant",
         lambda w: f"/admin/merchants/merchant/{w['merchant'].merchant.pk}/change/",
         lambda w: merchant_form(w["merchant"], inline={"currencies-0-payout_review_threshold": "999999999",
                                                        "currencies-0-payout_dual_approval_threshold": "999999999"}),
         lambda w: (lambda t: (t.payout_review_threshold, t.payout_dual_approval_threshold))(
             MerchantCurrency.objects.get(pk=w["threshold"].pk)), (999999999, 999999999)),
    Case("merchant callback URL", StaffRequest.Kind.MERCHANT_SETTING, "merchants.change_merchant",
         lambda w: f"/admin/merchants/merchant/{w['merchant'].merchant.pk}/change/",
         lambda w: merchant_form(w["merchant"], payout_callback_url="https://attacker.example/cb"),
         lambda w: type(w["merchant"].merchant).objects.get(pk=w["merchant"].merchant.pk).payout_callback_url,
         "https://attacker.example/cb"),
    Case("deny-list removal", StaffRequest.Kind.DENY_LIST_SETTING, "payout.change_denylistedaccount",
         lambda w: f"/admin/payout/denylistedaccount/{w['deny'].pk}/change/",
         lambda w: {"reason": "mule account", "is_active": "", "change_reason": "cleared by the bank"},
         lambda w: DenyListedAccount.objects.get(pk=w["deny"].pk).is_active, False),
    Case("currency activation", StaffRequest.Kind.CURRENCY_SETTING, "currencies.change_currency",
         lambda w: "/admin/currencies/currency/PHP/change/",
         lambda w: {"name": "Philippine Peso", "symbol": "\u20b1", "active": "", "change_reason": "sunset"},
         lambda w: Currency.objects.get(pk="PHP").active, False),
]


def staff_with(username: str, permission: str) -> User:
    user = staff_account(username, superuser=False)
    app_label, codename = permission.split(".")
    user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    return User.objects.get(pk=user.pk)  # a fresh permission cache


def approve_in_admin(user: User, request: StaffRequest, reason: str = "checked against the ticket") -> str:
    client = admin_login(Client(), user)
    response = client.post(REQUESTS, approval_form(client, [request.pk], reason=reason), follow=True)
    return " ".join(str(m) for m in response.context["messages"])


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_one_person_alone_cannot_change_a_money_setting(client, world, case):
    root = staff_account("root")
    admin_login(client, root)
    before = case.read(world)
    assert before != case.expected

    response = client.post(case.url(world), case.data(world))
    assert response.status_code == 302, (response.context["adminform"].form.errors if response.context else "")
    assert case.read(world) == before  # asked for, not done
    request = StaffRequest.objects.get(status=StaffRequest.Status.PENDING)
    assert (request.kind, request.requested_by) == (case.kind, root)

    # The requester, a superuser, cannot approve it: not in the admin, not through the service.
    message = approve_in_admin(root, request)
    assert "a second person must decide it" in message
    with pytest.raises(StaffRequestRefused):
        staff_request_approve(request_id=request.pk, approver=root, reason="mine")
    # Nor can a staff member whose role is another (balance adjustments): the request is not even in their list.
    otto = staff_with("otto", "ledger.adjust_balance")
    assert "approved" not in approve_in_admin(otto, request).lower()
    assert f"{REQUESTS}{request.pk}/change/" not in admin_login(Client(), otto).get(REQUESTS).content.decode()
    with pytest.raises(StaffRequestRefused, match="may not approve"):
        staff_request_approve(request_id=request.pk, approver=otto, reason="not mine to decide")
    request.refresh_from_db()
    assert request.status == StaffRequest.Status.PENDING and case.read(world) == before

    second = staff_with("second", case.permission)
    assert "approved" in approve_in_admin(second, request).lower()
    request.refresh_from_db()
    assert (request.status, request.decided_by) == (StaffRequest.Status.APPROVED, second)
    assert case.read(world) == case.expected
    effect = AuditLog.objects.filter(actor=second).exclude(action__startswith="staff_request").latest("id")
    assert f"request #{request.pk} by root, approved by second" in effect.reason
    assert AuditLog.objects.filter(action="staff_request.create", actor=root, object_id=str(request.pk)).exists()

    # Secrets never in clear: the request pages, the audit rows, the payload.
    root_pages = [client.get(REQUESTS), client.get(f"{REQUESTS}{request.pk}/change/"),
                  client.get("/admin/common/auditlog/")]
    for page in root_pages:
        assert page.status_code == 200
        text = page.content.decode()
        assert ATTACKER_SECRET not in text and ATTACKER_TOKEN not in text and REAL_SECRET not in text
    stored = str(request.payload) + str(list(AuditLog.objects.values_list("old", "new", "reason")))
    assert ATTACKER_SECRET not in stored and ATTACKER_TOKEN not in stored


def test_a_credential_swap_by_one_superuser_is_only_a_request(client, world):
    """One superuser replacing a Xendit channel's secret key and callback token with their own test account's in one
    admin edit, to 'pay' an invoice there, changes nothing: the channel keeps the
    platform's key, and a webhook carrying the attacker's token is refused."""
    root = staff_account("root")
    admin_login(client, root)
    channel = world["channel"]
    response = client.post(f"/admin/channels/channel/{channel.pk}/change/",
                           channel_form(channel, secret_key=ATTACKER_SECRET, callback_token=ATTACKER_TOKEN))
    assert response.status_code == 302
    channel.refresh_from_db()
    assert (channel.secret_key, channel.callback_token) == (REAL_SECRET, REAL_TOKEN)
    webhook = Client().post(f"/channels/xendit/{channel.code}/webhook", {"id": "inv_attacker", "status": "PAID"},
                            content_type="application/json", headers={"x-callback-token": ATTACKER_TOKEN})
    assert webhook.status_code == 403
    request = StaffRequest.objects.get()
    assert "secret key replaced" in request.summary and "callback token replaced" in request.summary
    with pytest.raises(StaffRequestRefused, match="a second person"):
        staff_request_approve(request_id=request.pk, approver=root, reason="swap back later")
    assert not AuditLog.objects.filter(action__startswith="channel.").exists()


def test_a_request_for_a_setting_changed_since_is_refused_at_approval(client, world):
    root = staff_account("root")
    admin_login(client, root)
    channel = world["channel"]
    client.post(f"/admin/channels/channel/{channel.pk}/change/", channel_form(channel, priority="7"))
    first = StaffRequest.objects.get()
    client.post(f"/admin/channels/channel/{channel.pk}/change/", channel_form(channel, is_active=None))
    second_request = StaffRequest.objects.exclude(pk=first.pk).get()
    second = staff_with("second", "channels.change_channel")
    staff_request_approve(request_id=second_request.pk, approver=second, reason="ok")
    with pytest.raises(StaffRequestRefused, match="changed since this request was made"):
        staff_request_approve(request_id=first.pk, approver=second, reason="ok")
    channel.refresh_from_db()
    assert (channel.priority, channel.is_active) == (100, False)
    assert StaffRequest.objects.get(pk=first.pk).status == StaffRequest.Status.PENDING  # reject it, ask again


def test_an_invalid_change_is_refused_at_approval_and_nothing_moves(client, world, settings):
    root = staff_account("root")
    admin_login(client, root)
    channel = world["channel"]
    client.post(f"/admin/channels/channel/{channel.pk}/change/", channel_form(channel, api_base_url="https://x.example"))
    settings.CHANNEL_API_BASE_URL_OVERRIDE = False  # production: the API root is the upstream's own
    with pytest.raises(StaffRequestRefused, match="CHANNEL_API_BASE_URL_OVERRIDE"):
        staff_request_approve(request_id=StaffRequest.objects.get().pk,
                              approver=staff_with("second", "channels.change_channel"), reason="ok")
    channel.refresh_from_db()
    assert channel.api_base_url == ""


def test_saving_without_a_change_or_without_a_reason_asks_for_nothing(client, world):
    admin_login(client, staff_account("root"))
    channel = world["channel"]
    response = client.post(f"/admin/channels/channel/{channel.pk}/change/", channel_form(channel), follow=True)
    assert "Nothing changed" in response.content.decode()
    response = client.post(f"/admin/channels/channel/{channel.pk}/change/", channel_form(channel, priority="1",
                                                                                          change_reason=""))
    assert response.status_code == 200 and "change_reason" in response.context["adminform"].form.errors
    assert not StaffRequest.objects.exists()


def test_adding_to_the_deny_list_stays_immediate(client, world):
    admin_login(client, staff_account("root"))
    response = client.post("/admin/payout/denylistedaccount/add/", {
        "payee_account": "0011112222", "currency": "PHP", "reason": "fraud report", "is_active": "on"})
    assert response.status_code == 302
    assert DenyListedAccount.objects.filter(payee_account="0011112222", is_active=True).exists()
    assert not StaffRequest.objects.exists()


# --- staff accounts: an accomplice account is not a second person (docs/staff-access.md) ---------------------------


def pending_request_of(client, world) -> StaffRequest:
    channel = world["channel"]
    client.post(f"/admin/channels/channel/{channel.pk}/change/",
                channel_form(channel, secret_key=ATTACKER_SECRET, callback_token=ATTACKER_TOKEN))
    return StaffRequest.objects.get(status=StaffRequest.Status.PENDING)


def test_an_account_the_requester_created_in_the_admin_cannot_approve(client, world):
    root = staff_account("root")
    admin_login(client, root)
    response = client.post("/admin/auth/user/add/", {"username": "accomplice", "password1": "Tq7-vault-Lorry-58",
                                                     "password2": "Tq7-vault-Lorry-58", "usable_password": "true"})
    assert response.status_code == 302, response.context["adminform"].form.errors
    request = pending_request_of(client, world)
    accomplice = User.objects.get(username="accomplice")
    # Even made superuser by someone else later (here: on the server), the account stays the requester's creation.
    staff_grant_elsewhere(accomplice, is_superuser=True)
    with pytest.raises(StaffRequestRefused, match="root created or changed the account of accomplice"):
        staff_request_approve(request_id=request.pk, approver=User.objects.get(pk=accomplice.pk), reason="ok")
    assert _channel(world).secret_key == REAL_SECRET


def test_an_account_the_approver_created_cannot_ask_them(client, world):
    root = staff_account("root")
    admin_login(client, root)
    response = client.post("/admin/auth/user/add/", {"username": "puppet", "password1": "Tq7-vault-Lorry-58",
                                                     "password2": "Tq7-vault-Lorry-58", "usable_password": "true"})
    assert response.status_code == 302
    puppet = User.objects.get(username="puppet")
    staff_grant_elsewhere(puppet, is_superuser=True)
    admin_login(client, User.objects.get(pk=puppet.pk))
    request = pending_request_of(client, world)
    with pytest.raises(StaffRequestRefused, match="root created or changed the account of puppet"):
        staff_request_approve(request_id=request.pk, approver=root, reason="ok")
    assert _channel(world).secret_key == REAL_SECRET


def test_a_role_or_password_the_requester_gave_disqualifies_the_approver(client, world):
    root = staff_account("root")
    rita = staff_account("rita", superuser=False)
    admin_login(client, root)
    request = pending_request_of(client, world)
    # root makes rita able to approve channel changes: a role grant in the admin
    group = Group.objects.create(name="Channel managers")
    group.permissions.add(Permission.objects.get(codename="change_channel"))
    response = client.post(f"/admin/auth/user/{rita.pk}/change/", user_change_form(rita, groups=[group.pk]))
    assert response.status_code == 302, response.context["adminform"].form.errors if response.context else ""
    rita = User.objects.get(pk=rita.pk)
    assert rita.has_perm("channels.change_channel")
    with pytest.raises(StaffRequestRefused, match="root granted a role or permission to rita"):
        staff_request_approve(request_id=request.pk, approver=rita, reason="ok")

    # a password root set for an existing colleague (then the colleague's second factor deleted: a take-over)
    olga = staff_account("olga")
    response = client.post(f"/admin/auth/user/{olga.pk}/password/", {"password1": "Pw-takeover-77!",
                                                                     "password2": "Pw-takeover-77!",
                                                                     "usable_password": "true"})
    assert response.status_code == 302
    with pytest.raises(StaffRequestRefused, match="root set the password of olga"):
        staff_request_approve(request_id=request.pk, approver=User.objects.get(pk=olga.pk), reason="ok")

    # an independent colleague (made on the server by create_staff) can
    staff_request_approve(request_id=request.pk, approver=staff_account("carol"), reason="ticket checked")
    assert _channel(world).secret_key == ATTACKER_SECRET


def staff_grant_elsewhere(user: User, **flags) -> None:
    import pghistory

    with pghistory.context(command="shell", operator="ops"):
        User.objects.filter(pk=user.pk).update(is_staff=True, **flags)


def user_change_form(user: User, **overrides) -> dict:
    data = {"username": user.username, "first_name": "", "last_name": "", "email": "", "is_active": "on",
            "is_staff": "on", "date_joined_0": user.date_joined.strftime("%Y-%m-%d"),
            "date_joined_1": user.date_joined.strftime("%H:%M:%S"), "initial-date_joined_0": "",
            "initial-date_joined_1": ""}
    data.update({k: v for k, v in overrides.items()})
    return data
