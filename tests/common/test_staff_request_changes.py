"""The approver reads the whole change (docs/back-office.md, "What the approver reads"): every field a staff request
sets, its value now and once approved, on the request list (one line naming every field, credentials first), the
request's page and the approval page, through the real admin pages; a secret only as "replaced", never in clear
and never left out; nothing cut. Approval applies only the change the approver read."""

import json
import re
from html import unescape

import pytest
from django.contrib.auth.models import User
from django.test import Client

from apps.channels.models import Channel
from apps.channels.services import channel_credentials_set
from apps.common import signing
from apps.common.models import AuditLog, StaffRequest
from apps.common.staff_requests import StaffRequestRefused, staff_request_approve, staff_request_create
from apps.merchants.models import MerchantKey
from apps.merchants.services import merchant_key_add
from tests.common.test_money_settings_four_eyes import (ATTACKER_SECRET, ATTACKER_TOKEN, REAL_SECRET, REAL_TOKEN,
                                                        channel_form, xendit)  # noqa: F401 - xendit: a fixture
from tests.support.four_eyes import approval_form, staff_account
from tests.support.staff import admin_login

pytestmark = pytest.mark.django_db

REQUESTS = "/admin/common/staffrequest/"
# A channel name at the model's 128 characters and sixty bank codes: the old one-line summary was cut at 255
# characters inside the list, and the API root and the credentials after it were never shown.
LONG_NAME = "Xendit PHP payouts for the marketplace's instant disbursements, weekend and holiday cover, second " \
            "region fallback route"
OLD_CODES = [f"BANK{index:03d}" for index in range(60)] + ["GCASH"]
NEW_CODES = [code for code in OLD_CODES if code != "GCASH"] + ["MULE_BANK"]


@pytest.fixture
def payout_channel(bootstrapped, settings, xendit):  # noqa: F811 - the fixture imported above
    settings.PLATFORM_ENVIRONMENT = "live"
    settings.CHANNEL_API_BASE_URL_OVERRIDE = True  # the deployment that let the API root be changed
    channel = Channel.objects.create(code="XENDIT_PHP_PAYOUT", name="Xendit PHP payouts", adapter="xendit",
                                     direction="payout", currency_id="PHP", bank_codes=OLD_CODES)
    channel_credentials_set(channel=channel, secret_key=REAL_SECRET, callback_token=REAL_TOKEN)
    return Channel.objects.get(pk=channel.pk)


def page_text(client, url: str) -> str:
    html = client.get(url).content.decode()
    return re.sub(r"\s+", " ", html)


def ask_for_the_long_change(client, channel, xendit_url: str) -> StaffRequest:  # noqa: F811
    response = client.post(f"/admin/channels/channel/{channel.pk}/change/", channel_form(
        channel, name=LONG_NAME, bank_codes=json.dumps(NEW_CODES), api_base_url=xendit_url,
        secret_key=ATTACKER_SECRET, callback_token=ATTACKER_TOKEN))
    assert response.status_code == 302, response.context["adminform"].form.errors if response.context else ""
    return StaffRequest.objects.get(status=StaffRequest.Status.PENDING)


def assert_no_secret(html: str, channel: Channel) -> None:
    for secret in (REAL_SECRET, REAL_TOKEN, ATTACKER_SECRET, ATTACKER_TOKEN, channel.secret_key_encrypted,
                   channel.callback_token_encrypted):
        assert secret not in html


def test_the_approver_reads_every_field_of_a_long_channel_change_with_its_credentials_as_replaced(
        client, payout_channel, xendit):  # noqa: F811
    admin_login(client, staff_account("root"))
    request = ask_for_the_long_change(client, payout_channel, xendit.url)
    approver = admin_login(Client(), staff_account("second-root"))

    listed = page_text(approver, REQUESTS)
    assert ("channel XENDIT_PHP_PAYOUT: secret key replaced, callback token replaced, name, bank codes, "
            "api base url") in listed

    for html in (page_text(approver, f"{REQUESTS}{request.pk}/change/"),
                 re.sub(r"\s+", " ", approver.post(REQUESTS, {"action": "approve_selected",
                                                             "_selected_action": [str(request.pk)]})
                        .content.decode())):
        table = html[html.index(f'id="changes-{request.pk}"'):]
        table = table[:table.index("</table>")]
        rows = {re.sub(r"<[^>]+>", "|", row).strip("| ") for row in re.findall(r"<tr.*?</tr>", table)}
        cells = [[unescape(cell.strip()) for cell in re.split(r"\|+", row) if cell.strip()] for row in rows]
        by_field = {cell[1]: cell for cell in cells if len(cell) > 1}
        assert by_field["name"][2:4] == ["Xendit PHP payouts", LONG_NAME]
        assert by_field["bank codes"][2] == json.dumps(OLD_CODES)
        assert by_field["bank codes"][3] == json.dumps(NEW_CODES)
        assert by_field["bank codes"][4] == 'added: "MULE_BANK"; removed: "GCASH"'
        assert by_field["api base url"][2:4] == ["(empty)", xendit.url]
        assert by_field["secret key"][2:4] == ["set", "replaced"]
        assert by_field["callback token"][2:4] == ["set", "replaced"]
        assert "when asked for" not in table
        assert_no_secret(html, Channel.objects.get(pk=payout_channel.pk))

    # Approved through the page the approver read: everything it showed is applied, and the page keeps it.
    approver.post(REQUESTS, approval_form(approver, [request.pk], reason="checked with the upstream"))
    channel = Channel.objects.get(pk=payout_channel.pk)
    assert (channel.name, channel.bank_codes, channel.api_base_url) == (LONG_NAME, NEW_CODES, xendit.url)
    assert (channel.secret_key, channel.callback_token) == (ATTACKER_SECRET, ATTACKER_TOKEN)
    decided = unescape(page_text(approver, f"{REQUESTS}{request.pk}/change/"))
    assert ">Before<" in decided and ">Approved<" in decided and LONG_NAME in decided
    assert "MULE_BANK" in decided and xendit.url in decided
    assert_no_secret(decided, channel)
    approved = AuditLog.objects.get(action="staff_request.approve")
    assert {line["field"] for line in approved.new["changes"]} == {"name", "bank codes", "api base url",
                                                                    "secret key", "callback token"}
    assert_no_secret(json.dumps(approved.new) + json.dumps(approved.old or {}), channel)


def test_a_value_that_moved_since_the_request_is_marked_and_its_approval_refused(client, payout_channel, xendit):  # noqa: F811
    admin_login(client, staff_account("root"))
    request = ask_for_the_long_change(client, payout_channel, xendit.url)
    Channel.objects.filter(pk=payout_channel.pk).update(name="Renamed in the meantime")
    moved = Channel.objects.get(pk=payout_channel.pk)
    approver = admin_login(Client(), staff_account("second-root"))

    html = page_text(approver, f"{REQUESTS}{request.pk}/change/")
    assert "has changed since it was asked for" in html
    assert re.search(r"Renamed in the meantime<div class=\"moved-note\">&#9888; Xendit PHP payouts when asked for",
                     html)

    response = approver.post(REQUESTS, approval_form(approver, [request.pk], reason="looks fine"), follow=True)
    assert "changed since this request was made" in " ".join(str(m) for m in response.context["messages"])
    assert StaffRequest.objects.get(pk=request.pk).status == StaffRequest.Status.PENDING
    after = Channel.objects.get(pk=payout_channel.pk)
    assert (after.name, after.bank_codes, after.api_base_url, after.secret_key_encrypted) == (
        moved.name, moved.bank_codes, moved.api_base_url, moved.secret_key_encrypted)


def test_an_approval_of_a_change_that_reads_otherwise_since_the_page_was_opened_applies_nothing(
        client, merchant, rsa_keys):
    """A key upload read with one key in use; another version is added before the approver submits: the change the
    approver read is no longer the one approval would make."""
    requester, approver_user = staff_account("root"), staff_account("second-root")
    request = staff_request_create(kind=StaffRequest.Kind.MERCHANT_KEY, requested_by=requester, reason="rotation",
                                   payload={"merchant_no": merchant.merchant_no, "public_key_pem": signing.public_key_to_pem(rsa_keys[1].public_key())})
    approver = admin_login(Client(), approver_user)
    form = approval_form(approver, [request.pk], reason="fingerprint checked by phone")
    assert "a new version" in page_text(approver, f"{REQUESTS}{request.pk}/change/")
    merchant_key_add(merchant_no=merchant.merchant_no, public_key_pem=signing.public_key_to_pem(rsa_keys[2].public_key()), actor=requester)
    versions = list(MerchantKey.objects.filter(merchant__merchant_no=merchant.merchant_no).values_list("version",
                                                                                                        flat=True))

    response = approver.post(REQUESTS, form, follow=True)
    assert "read it again before you decide" in " ".join(str(m) for m in response.context["messages"])
    assert StaffRequest.objects.get(pk=request.pk).status == StaffRequest.Status.PENDING
    assert list(MerchantKey.objects.filter(merchant__merchant_no=merchant.merchant_no)
                .values_list("version", flat=True)) == versions
    with pytest.raises(StaffRequestRefused, match="read it again"):
        staff_request_approve(request_id=request.pk, approver=User.objects.get(pk=approver_user.pk), reason="ok",
                              seen="0" * 64)

    # Read again, it is approved.
    approver.post(REQUESTS, approval_form(approver, [request.pk], reason="fingerprint checked by phone"))
    assert StaffRequest.objects.get(pk=request.pk).status == StaffRequest.Status.APPROVED


def test_a_balance_adjustment_shows_the_balance_now_and_the_credit(client, merchant):
    requester, approver_user = staff_account("root"), staff_account("second-root")
    request = staff_request_create(kind=StaffRequest.Kind.BALANCE_ADJUSTMENT, requested_by=requester,
                                   reason="goodwill", payload={"merchant_no": merchant.merchant_no,
                                                               "currency": "PHP", "amount": 12_345})
    html = page_text(admin_login(Client(), approver_user), f"{REQUESTS}{request.pk}/change/")
    assert re.search(r"available balance</th> <td>\u20b10\.00</td> <td><strong>credit \u20b1123\.45</strong>"
                     r"<div class=\"help\">\u20b1123\.45 if approved now</div>", html)


def test_a_debit_above_the_available_balance_says_approval_is_refused(client, merchant):
    request = staff_request_create(kind=StaffRequest.Kind.BALANCE_ADJUSTMENT, requested_by=staff_account("root"),
                                   reason="chargeback", payload={"merchant_no": merchant.merchant_no,
                                                                 "currency": "PHP", "amount": -12_345})
    html = page_text(admin_login(Client(), staff_account("second-root")), f"{REQUESTS}{request.pk}/change/")
    assert "debit \u20b1123.45" in html and "more than the available balance now" in html
    with pytest.raises(ValueError, match="negative"):
        staff_request_approve(request_id=request.pk, approver=User.objects.get(username="second-root"), reason="ok")
    assert StaffRequest.objects.get(pk=request.pk).status == StaffRequest.Status.PENDING
