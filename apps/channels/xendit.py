"""Xendit (docs/channels.md): PHP pay-ins through the Invoice API, payouts through the Payouts API.

Plain `requests` on the documented endpoints (why not xendit-python: docs/channels.md). Auth is HTTP Basic with the
channel's secret key as the user name; the API root is XENDIT_API_BASE_URL (a channel's own api_base_url only where
CHANNEL_API_BASE_URL_OVERRIDE allows it: development and the tests' emulator).

  GET  /v2/invoices?external_id=&limit=&last_invoice_id=   an invoice opened before for the order (its create's
                                     answer lost) is reused; every page read (a bare array: a full page may go on)
  POST /v2/invoices                  external_id = platform_order_no, expiry = the order's expire_at
  GET  /v2/invoices/{id}
  POST /invoices/{id}/expire!        the loser of two racing first openings expires its own invoice
  POST /v2/payouts                   Idempotency-key = platform_order_no (a retry: the same payout, or 409)
  GET  /v2/payouts/{id}, GET /v2/payouts?reference_id=&limit=&after_id=   ({"data": [...], "has_more": ...}, every
                                     page read until has_more is false)
  GET  /payouts_channels?currency=    when a payout channel is configured: our bank codes' channel codes must be
                                     among Xendit's (XenditPayoutAdapter.configuration_check)
  POST /refunds                      invoice_id = the paid invoice, reference_id = refund_no, Idempotency-key =
                                     refund_no (a retry: the same refund, or 409 when the reference_id was used)
  GET  /refunds/{id}, GET /refunds?invoice_id=&limit=&after_id=   ({"data": [...], "has_more": ...}: the refunds of
                                     the invoice, every page read, ours matched by reference_id)

Which disbursement is ours: the one our Idempotency-key created, learnt from the create's answer (or, after 409,
the only one of our reference_id, amount and currency). Until then nothing read back is applied to the order. A list
not read to its end answers "unknown", never "none" (apps.channels.lookups).

Webhooks (apps.channels.views) only say "look again": the object is re-read from the API with the channel's key
before anything moves, and the result enters through the same payout and collection services as the sandbox's
outcomes (registered with apps.channels.registry).
"""

import hmac
import json
import logging
from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils import timezone

from apps.channels.amounts import major_units, minor_units
from apps.channels.base import (
    LookupUnknown,
    PayinAdapter,
    PayinState,
    PaymentStart,
    PayoutAdapter,
    PayoutState,
    RefundRuleDefault,
    RefundState,
    UpstreamDeclined,
    UpstreamRejected,
    UpstreamUnavailable,
)
from apps.channels.lookups import LOOKUP_PAGE_SIZE, LOOKUP_PAGES, every_page
from apps.channels.models import BankCode, Channel, UpstreamPayin
from apps.channels.registry import (
    payin_handlers,
    payout_handlers,
    register_payin,
    register_payout,
)
from apps.channels.upstream_http import upstream_call

logger = logging.getLogger(__name__)

ADAPTER = "xendit"

# Our bank codes (apps.channels.services.SEED_BANK_CODES) → Xendit's PH payout channel codes (Payout Coverage; checked
# against Xendit's own GET /payouts_channels whenever a payout channel is configured: configuration_check below).
PAYOUT_CHANNEL_CODES = {
    "BDO": "PH_BDO", "BPI": "PH_BPI", "MBTC": "PH_MET", "LBP": "PH_LBP", "PNB": "PH_PNB", "SECB": "PH_SEC",
    "UBP": "PH_UBP", "RCBC": "PH_RCBC", "CBC": "PH_CBC", "GCASH": "PH_GCASH", "MAYA": "PH_PAYMAYA",
    "GRABPAY": "PH_GRABPAY",
}

INVOICE_OUTCOMES = {"PENDING": "pending", "PAID": "paid", "SETTLED": "paid", "EXPIRED": "expired"}
PAYOUT_OUTCOMES = {"ACCEPTED": "pending", "REQUESTED": "pending", "LOCKED": "pending", "SUCCEEDED": "paid",
                   "FAILED": "failed", "CANCELLED": "failed", "REVERSED": "returned"}
FINAL_INVOICE_STATUSES = ("PAID", "SETTLED", "EXPIRED")
# Refund statuses (Refund API); a CANCELLED refund gave nothing back.
REFUND_OUTCOMES = {"PENDING": "pending", "SUCCEEDED": "succeeded", "FAILED": "failed", "CANCELLED": "failed"}
# The reasons Xendit's Refund API takes (CreateRefund.reason); the merchant's free text is kept with us.
REFUND_REASONS = ("FRAUDULENT", "DUPLICATE", "REQUESTED_BY_CUSTOMER", "CANCELLATION", "OTHERS")

# Xendit's refund rules by the invoice's payment_channel (docs/channels.md, "Refund rules", with their sources): no
# refunds of QR Ph payments nor, in the Philippines, of PayLater ones through the API; cards within six months of the
# charge; any other payment in parts, with no window of our own (Xendit refuses at create what its partner does not
# take: the refund then fails and its amount comes back). RefundRule rows override these.
REFUND_RULES = (
    RefundRuleDefault(method="QRPH", refundable=False, partial=False),
    RefundRuleDefault(method="BILLEASE", refundable=False, partial=False),
    RefundRuleDefault(method="CASHALO", refundable=False, partial=False),
    RefundRuleDefault(method="CREDIT_CARD", window_days=180),
)

_AMOUNT = "\x00amount\x00"


def payout_channel_code(bank_code: str) -> str:
    return PAYOUT_CHANNEL_CODES.get(bank_code, f"PH_{bank_code}")


def xendit_payout_channel_codes(channel: Channel) -> set[str]:
    """The channel codes Xendit pays out to in the channel's currency, from its list (GET /payouts_channels)."""
    answer = XenditClient(channel).call("GET", "/payouts_channels", params={"currency": channel.currency_id})
    if not isinstance(answer, list):
        raise UpstreamUnavailable("xendit GET /payouts_channels: not a list of channels")
    return {str(found.get("channel_code", "")) for found in answer
            if isinstance(found, dict) and found.get("currency") == channel.currency_id}


def _wire_json(payload: dict) -> bytes:
    """JSON with `amount` written as the exact decimal number (json cannot write a Decimal, and a float may not
    hold 0.01 steps exactly)."""
    amount = payload.get("amount")
    text = json.dumps({**payload, "amount": _AMOUNT} if isinstance(amount, Decimal) else payload)
    if isinstance(amount, Decimal):
        text = text.replace(json.dumps(_AMOUNT), format(amount, "f"), 1)
    return text.encode()


class XenditClient:
    """The documented endpoints with one channel's credentials; errors as UpstreamUnavailable / UpstreamRejected."""

    def __init__(self, channel: Channel):
        # A channel's own API root only where the deployment allows it (CHANNEL_API_BASE_URL_OVERRIDE): in production
        # the key goes to Xendit's documented root whatever a channel row says.
        own = channel.api_base_url if settings.CHANNEL_API_BASE_URL_OVERRIDE else ""
        self.base_url = (own or settings.XENDIT_API_BASE_URL).rstrip("/")
        self.auth = (channel.secret_key, "")

    def call(self, method: str, path: str, *, payload: dict | None = None, params: dict | None = None,
             headers: dict | None = None):
        body = upstream_call(upstream="xendit", method=method, base_url=self.base_url, path=path, auth=self.auth,
                             data=_wire_json(payload) if payload is not None else None, params=params, headers=headers,
                             error_code=lambda body: body.get("error_code", "") if isinstance(body, dict) else "")
        return body


def _parse_time(value) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None  # the order's paid_at is then when we learnt it


def _minor(value, minor_unit: int) -> int:
    """Xendit's amount in our minor units; one that is not a whole number of them is a refused answer (reported by
    the webhook and by reconciliation), never a crash of the whole run."""
    try:
        return minor_units(value if isinstance(value, (int, Decimal)) else Decimal(str(value)), minor_unit)
    except (ArithmeticError, TypeError, ValueError):
        raise UpstreamRejected(f"xendit amount {value!r} is not a whole number of minor units", status=400) from None


def invoice_state(invoice: dict, *, minor_unit: int) -> PayinState:
    status = str(invoice.get("status", "")).upper()
    # How the payer paid: the channel ("GCASH", "QRPH", "BPI") where the invoice names one, which is what Xendit's
    # refund rules follow, else the method ("EWALLET", "QR_CODE").
    method = str(invoice.get("payment_channel") or invoice.get("payment_method") or "")[:32]
    return PayinState(outcome=INVOICE_OUTCOMES.get(status, "pending"), reference=str(invoice.get("id", "")),
                      platform_order_no=str(invoice.get("external_id", "")),
                      amount=_minor(invoice.get("amount", 0), minor_unit),
                      currency=str(invoice.get("currency", "")),
                      upstream_status=status, paid_at=_parse_time(invoice.get("paid_at")), payment_method=method)


def refund_state_of(obj: dict, *, minor_unit: int) -> RefundState:
    status = str(obj.get("status", "")).upper()
    outcome = REFUND_OUTCOMES.get(status, "pending")
    reason = str(obj.get("failure_code") or status) if outcome == "failed" else ""
    return RefundState(outcome=outcome, reference=str(obj.get("id", "")), fail_reason=reason,
                       amount=_minor(obj.get("amount", 0), minor_unit), currency=str(obj.get("currency", "")))


def refund_reason(reason: str) -> str:
    """The merchant's reason in Xendit's words: one of its values when the text names it ("duplicate",
    "requested by customer"), REQUESTED_BY_CUSTOMER when empty, else OTHERS."""
    named = "_".join(reason.upper().replace("-", " ").split())
    if named in REFUND_REASONS:
        return named
    return "OTHERS" if reason.strip() else "REQUESTED_BY_CUSTOMER"


def payout_state_of(obj: dict, *, minor_unit: int) -> PayoutState:
    status = str(obj.get("status", "")).upper()
    outcome = PAYOUT_OUTCOMES.get(status, "pending")
    reason = str(obj.get("failure_code") or status) if outcome == "failed" else ""
    return PayoutState(outcome=outcome, reference=str(obj.get("id", "")), upstream_status=status, fail_reason=reason,
                       amount=_minor(obj.get("amount", 0), minor_unit), currency=str(obj.get("currency", "")))


def _matching(listed: list[dict], *, field: str, value: str, where: str) -> list[dict]:
    """The listed objects whose `field` is our reference, matched here since a list may ignore the filter; one that
    does not show the field cannot be told apart from ours: LookupUnknown."""
    ours = []
    for obj in listed:
        if field not in obj:
            raise LookupUnknown(f"{where}: {obj.get('id')} shows no {field}")
        if str(obj.get(field) or "") == value:
            ours.append(obj)
    return ours


def _listed(client: XenditClient, path: str, *, filters: dict, field: str, value: str) -> list[dict]:
    """Every object a Xendit list ({"data": [...], "has_more": ...}) answers under `filters`, each page read (`limit`,
    the `after_id` cursor, until has_more is false: apps.channels.lookups), and those whose `field` is `value`.
    LookupUnknown when it cannot be read to its end."""

    def page(cursor: str | None):
        params = {**filters, "limit": LOOKUP_PAGE_SIZE}
        if cursor:
            params["after_id"] = cursor
        answer = client.call("GET", path, params=params)
        if not isinstance(answer, dict):
            return answer, None
        more = answer.get("has_more")
        return answer.get("data"), more if isinstance(more, bool) else None

    where = f"xendit GET {path}"
    return _matching(every_page(where=where, page=page), field=field, value=value, where=where)


def payouts_listed(client: XenditClient, *, reference_id: str) -> list[dict]:
    """Every payout Xendit lists under `reference_id`, matched on it here too."""
    return _listed(client, "/v2/payouts", filters={"reference_id": reference_id}, field="reference_id",
                   value=reference_id)


def refunds_listed(client: XenditClient, *, invoice_id: str, reference_id: str) -> list[dict]:
    """The refunds of the invoice whose reference_id is ours. The Refund API lists by invoice_id (it documents no
    reference_id filter): ours are matched here."""
    return _listed(client, "/refunds", filters={"invoice_id": invoice_id}, field="reference_id", value=reference_id)


def invoices_listed(client: XenditClient, *, external_id: str) -> list[dict]:
    """Every invoice Xendit lists under `external_id`, each page read. The Invoice API answers a bare JSON array with
    no "more" flag, and documents `limit` (up to 100) and the `last_invoice_id` cursor: a page as long as the limit
    may have a next one, a shorter page is the last, and a page longer than the limit says nothing (LookupUnknown)."""

    def page(cursor: str | None):
        params = {"external_id": external_id, "limit": LOOKUP_PAGE_SIZE}
        if cursor:
            params["last_invoice_id"] = cursor
        answer = client.call("GET", "/v2/invoices", params=params)
        if not isinstance(answer, list) or len(answer) > LOOKUP_PAGE_SIZE:
            return answer, None
        return answer, len(answer) == LOOKUP_PAGE_SIZE

    where = "xendit GET /v2/invoices"
    return _matching(every_page(where=where, page=page), field="external_id", value=external_id, where=where)


@register_payin
class XenditPayinAdapter(PayinAdapter):
    name = ADAPTER
    is_sandbox = False

    def start_payment(self, *, order) -> PaymentStart:
        """The order's invoice, opened on the first call and recorded (UpstreamPayin); later calls reuse it."""
        opened = UpstreamPayin.objects.filter(platform_order_no=order.platform_order_no).first()
        if opened is None:
            invoice = self._invoice_opened_before(order)
            if invoice is not None:
                opened, _ = UpstreamPayin.objects.get_or_create(
                    platform_order_no=order.platform_order_no,
                    defaults={"channel": order.channel, "reference": invoice["id"],
                              "redirect_url": invoice["invoice_url"]})
        if opened is None:
            seconds_left = int((order.expire_at - timezone.now()).total_seconds())
            payload = {"external_id": order.platform_order_no,
                       "amount": major_units(order.amount, order.currency.minor_unit),
                       "currency": order.currency_id, "description": order.subject or f"Order {order.mch_order_no}",
                       # Xendit expires the invoice when our order expires (its minimum is one second).
                       "invoice_duration": max(1, seconds_left)}
            if order.return_url.startswith(("https://", "http://")):
                payload["success_redirect_url"] = payload["failure_redirect_url"] = order.return_url
            client = XenditClient(order.channel)
            invoice = client.call("POST", "/v2/invoices", payload=payload)
            opened, _ = UpstreamPayin.objects.get_or_create(
                platform_order_no=order.platform_order_no,
                defaults={"channel": order.channel, "reference": invoice["id"], "redirect_url": invoice["invoice_url"]})
            if opened.reference != invoice["id"]:
                # Two first openings at once (the task after pay/create and the payer) both created one: the first
                # recorded is the one shown; this one is expired at once so that no one can pay the order twice.
                try:
                    client.call("POST", f"/invoices/{invoice['id']}/expire!")
                except (UpstreamUnavailable, UpstreamRejected) as exc:
                    logger.warning("pay-in %s: duplicate invoice %s not expired (%s); it expires with the order",
                                   order, invoice["id"], exc)
        return PaymentStart(upstream_reference=opened.reference, redirect_url=opened.redirect_url)

    @staticmethod
    def _invoice_opened_before(order) -> dict | None:
        """The order's open invoice at Xendit if an earlier create reached it but its answer was lost (timeout): the
        Invoice API takes no idempotency key, so the external_id is looked up before creating another one, every page
        read (invoices_listed). LookupUnknown when the list cannot be read to its end: no second invoice is opened."""
        for invoice in invoices_listed(XenditClient(order.channel), external_id=order.platform_order_no):
            try:
                state = invoice_state(invoice, minor_unit=order.currency.minor_unit)
            except UpstreamRejected:
                continue  # not one we could have opened
            if (state.amount, state.currency) == (order.amount, order.currency_id) and state.outcome != "expired":
                return invoice
        return None

    def payin_state(self, *, order, reference: str, channel=None) -> PayinState:
        invoice = XenditClient(channel or order.channel).call("GET", f"/v2/invoices/{reference}")
        return invoice_state(invoice, minor_unit=order.currency.minor_unit)

    # --- refunds (docs/channels.md, "Xendit refunds") ---

    takes_refunds = True
    refund_rules = REFUND_RULES
    refund_calls = 1 + LOOKUP_PAGES  # the create, then the list's pages after a refusal

    def start_refund(self, *, refund) -> str:
        """POST /refunds of the paid invoice with reference_id and Idempotency-key = refund_no: a retry after a lost
        answer gets the same refund back. A refusal (4xx) is final only when Xendit holds no refund of our
        reference_id: a 409 (the reference_id or key was used) or a refusal of a re-submission whose first attempt
        arrived returns the refund Xendit has."""
        client = XenditClient(refund.channel)
        payload = {"invoice_id": self._invoice_id(refund), "reference_id": refund.refund_no,
                   "amount": major_units(refund.amount, refund.currency.minor_unit), "currency": refund.currency_id,
                   "reason": refund_reason(refund.reason)}
        try:
            created = client.call("POST", "/refunds", payload=payload, headers={"Idempotency-key": refund.refund_no})
        except UpstreamRejected as exc:
            try:
                found = refunds_listed(client, invoice_id=payload["invoice_id"], reference_id=refund.refund_no)
            except UpstreamDeclined as lookup:
                raise UpstreamUnavailable(str(lookup)) from None
            if not found and (exc.status == 409 or exc.error_code == "DUPLICATE_ERROR"):
                # The key or reference_id was used, so a refund of ours exists; the list may lag its create.
                raise UpstreamUnavailable(f"refund {refund.refund_no}: duplicate at xendit but not listed yet")
            if not found:
                logger.warning("refund %s refused by xendit: %s", refund.refund_no, exc.error_code or exc)
                raise UpstreamRejected(f"refused upstream: {exc.error_code or exc.status}", status=exc.status,
                                       error_code=exc.error_code) from None
            created = found[0]
        self._check(refund, created)
        return str(created["id"])

    def refund_state(self, *, refund) -> RefundState:
        """The refund of our reference_id among the invoice's (every page read): 'missing' only when the list was read
        whole and none is ours; LookupUnknown when it could not be."""
        client = XenditClient(refund.channel)
        found = refunds_listed(client, invoice_id=self._invoice_id(refund), reference_id=refund.refund_no)
        if not found:
            return RefundState(outcome="missing")
        if len(found) > 1:  # Xendit keeps a reference_id to one refund; two say we cannot tell which
            raise LookupUnknown(f"refund {refund.refund_no}: {len(found)} refunds of its reference_id at xendit")
        self._check(refund, found[0])
        return refund_state_of(found[0], minor_unit=refund.currency.minor_unit)

    @staticmethod
    def _invoice_id(refund) -> str:
        """The invoice that paid the order (its upstream reference when paid): the refund goes back through it."""
        return refund.order.upstream_reference or (
            UpstreamPayin.objects.filter(platform_order_no=refund.order.platform_order_no)
            .values_list("reference", flat=True).first() or "")

    @staticmethod
    def _check(refund, obj: dict) -> None:
        """A refund of our reference_id with another amount or currency is not applied to ours: a person looks."""
        try:
            same = (_minor(obj.get("amount", 0), refund.currency.minor_unit), str(obj.get("currency", ""))) == (
                refund.amount, refund.currency_id)
        except UpstreamRejected:
            same = False
        if not same:
            logger.error("refund %s: xendit's refund %s of its reference_id says %s %s; nothing applied",
                         refund.refund_no, obj.get("id"), obj.get("amount"), obj.get("currency"))
            raise UpstreamUnavailable(f"refund {refund.refund_no}: xendit's {obj.get('id')} differs in amount")


@register_payout
class XenditPayoutAdapter(PayoutAdapter):
    name = ADAPTER
    is_sandbox = False
    send_calls = LOOKUP_PAGES + 2  # create, then the list's pages after a 409 or a refusal

    def start_disbursement(self, *, payout) -> str:
        """POST /v2/payouts with Idempotency-key = platform_order_no; returns the disbursement bound to that key, the
        only one that counts for the order (docs/channels.md, "Which disbursement is ours"). A retry after a lost
        answer gets the same payout back (Xendit: same key and body → the first attempt's payout), or 409
        DUPLICATE_ERROR, which proves the key was used: then the one disbursement of our reference_id, amount and
        currency is ours, and two or more are refused as ambiguous (retried, logged for an operator). A definite
        refusal fails the payout (frozen funds back), as a failure notice would, unless Xendit holds a payout that
        may be ours."""
        client = XenditClient(payout.channel)
        payload = {"reference_id": payout.platform_order_no, "channel_code": payout_channel_code(payout.bank_code),
                   "channel_properties": {"account_holder_name": payout.payee_name,
                                          "account_number": payout.payee_account},
                   "amount": major_units(payout.amount, payout.currency.minor_unit), "currency": payout.currency_id,
                   "description": f"Payout {payout.mch_order_no}"}
        try:
            created = client.call("POST", "/v2/payouts", payload=payload,
                                  headers={"Idempotency-key": payout.platform_order_no})
        except UpstreamRejected as exc:
            try:
                return self._refused(payout, exc)
            except UpstreamDeclined as lookup:
                # The lookup after the refusal was declined; that says nothing of whether our payout exists.
                raise UpstreamUnavailable(str(lookup)) from None
        return str(created["id"])

    def _refused(self, payout, exc: UpstreamRejected) -> str:
        """Xendit refused the POST: a 409 (the key was used) binds the one disbursement of ours, any other refusal
        fails the payout only when Xendit holds no payout that may be ours."""
        if exc.status == 409 or exc.error_code == "DUPLICATE_ERROR":
            found = self._candidates(payout)
            if len(found) == 1:
                return found[0].reference
            if not found:  # Xendit's list may lag its create: asked again at the next re-submission
                raise UpstreamUnavailable(f"payout {payout}: duplicate at Xendit but not found by reference_id")
            raise self._unbound(payout, found, "duplicate at Xendit") from None
        # A refusal of a re-submission does not prove the first submission never arrived (its answer may have
        # been lost): fail the order only when Xendit has no payout that may be ours, else the money would
        # leave twice; and take none of them for ours, since no key proves which one it is.
        found = self._candidates(payout)
        if found:
            raise self._unbound(payout, found, f"re-submission refused ({exc.error_code or exc.status})") from None
        logger.warning("payout %s refused by xendit: %s", payout, exc.error_code or exc)
        payout_handlers().result(platform_order_no=payout.platform_order_no, outcome="failed",
                                 fail_reason=f"refused upstream: {exc.error_code or exc.status}")
        return ""  # nothing was disbursed; the order is FAILED

    @staticmethod
    def configuration_check(*, channel: Channel) -> None:
        """Before a payout channel is configured (apps.channels.services.channel_upstream_check): every active bank
        code of its currency must map to a channel code Xendit lists for that currency, so that an unknown code is
        refused here and not by the first live payout to it. ValidationError naming the unknown codes, or saying that
        Xendit could not be asked (nothing is configured then). A channel without a secret key is not asked: it
        cannot pay out anything (every call is refused 401 and retried, never failed)."""
        if not channel.secret_key:
            return
        try:
            known = xendit_payout_channel_codes(channel)
        except (UpstreamUnavailable, UpstreamRejected) as exc:
            raise ValidationError(f"Xendit's payout channel list could not be read ({exc}): check the secret key and "
                                  f"the API root, then ask again; nothing was changed.") from None
        bank_codes = BankCode.objects.filter(currency_id=channel.currency_id, is_active=True).order_by("code")
        unknown = [f"{bank.code} → {payout_channel_code(bank.code)}" for bank in bank_codes
                   if payout_channel_code(bank.code) not in known]
        if unknown:
            raise ValidationError(
                f"Xendit does not list these channel codes for {channel.currency_id} payouts (GET /payouts_channels): "
                f"{', '.join(unknown)}. Correct PAYOUT_CHANNEL_CODES in apps/channels/xendit.py or deactivate those "
                f"bank codes, then ask again; nothing was changed.")

    @staticmethod
    def _unbound(payout, found: list[PayoutState], why: str) -> UpstreamUnavailable:
        """No disbursement is provably bound to our key: the order stays PROCESSING without a reference (nothing
        read back is applied to it), the sweeper submits it again and an operator is told."""
        logger.error("payout %s: %s and %d disbursements carry its reference_id, amount and currency (%s): none is "
                     "taken for ours; an operator must check them in Xendit's dashboard", payout, why, len(found),
                     ", ".join(f"{state.reference} {state.upstream_status}" for state in found))
        return UpstreamUnavailable(f"payout {payout}: {why}; {len(found)} disbursements of its reference_id, none "
                                   f"bound to its idempotency key")

    def _candidates(self, payout) -> list[PayoutState]:
        """Every disbursement listed under our reference_id with our amount and currency (reference_id need not be
        unique at Xendit; the payout object does not show the idempotency key it was created with), every page read
        (payouts_listed: LookupUnknown when the list cannot be read to its end)."""
        states = []
        for obj in payouts_listed(XenditClient(payout.channel), reference_id=payout.platform_order_no):
            try:
                state = payout_state_of(obj, minor_unit=payout.currency.minor_unit)
            except UpstreamRejected:
                # Of our reference_id: it may be ours, whatever it says of its amount.
                raise LookupUnknown(f"payout {payout}: disbursement {obj.get('id')} of its reference_id has an amount "
                                    f"that cannot be read") from None
            if (state.amount, state.currency) == (payout.amount, payout.currency_id):
                states.append(state)
        return states

    def disbursement_lookup(self, *, payout) -> PayoutState:
        """Any disbursement listed under our reference_id, whatever its amount: 'missing' only when every page was
        read and none is ours; LookupUnknown when the list could not be read to its end."""
        found = payouts_listed(XenditClient(payout.channel), reference_id=payout.platform_order_no)
        if not found:
            return PayoutState(outcome="missing")
        return PayoutState(outcome="pending", reference=str(found[0].get("id", "")),
                           upstream_status=str(found[0].get("status", "")))

    def payout_state(self, *, payout) -> PayoutState:
        """The state of the disbursement bound to the order (its upstream_reference); 'missing' before that is
        known: whatever else carries our reference_id is not applied (payout_upstream_apply)."""
        if not payout.upstream_reference:
            return PayoutState(outcome="missing")
        found = XenditClient(payout.channel).call("GET", f"/v2/payouts/{payout.upstream_reference}")
        return payout_state_of(found, minor_unit=payout.currency.minor_unit)


# --- webhooks -------------------------------------------------------------------------------------------------


class WebhookRefused(PermissionError):
    """Wrong or missing x-callback-token: nothing is read, nothing changes."""


def xendit_webhook_handle(*, channel: Channel, token: str, body: bytes) -> dict:
    """A Xendit webhook for `channel`: token compared in constant time, then the object it names re-read from the
    API, then the outcome applied through the payout or collection service registered for it (apps.channels.registry).
    Returns what was done (for the reply and logs)."""
    expected = channel.callback_token
    if not expected or not hmac.compare_digest(token.encode(), expected.encode()):
        raise WebhookRefused(f"webhook for {channel.code}: bad x-callback-token")
    try:
        event = json.loads(body)
    except ValueError:
        raise UpstreamRejected("webhook body is not JSON", status=400) from None
    if not isinstance(event, dict):
        raise UpstreamRejected("webhook body is not an object", status=400)
    client = XenditClient(channel)
    kind = str(event.get("event", ""))
    if kind.startswith("refund."):
        return _refund_webhook(client, channel=channel, event=event)
    if kind.startswith("payout."):
        data = event.get("data") or {}
        payout_id = str(data.get("id", "")) if isinstance(data, dict) else ""
        if not payout_id:
            raise UpstreamRejected("payout webhook without data.id", status=400)
        obj = client.call("GET", f"/v2/payouts/{payout_id}")
        state = _readable(obj, payout_state_of)
        if state is None:
            return {"object": "payout", "status": str(obj.get("status", "")), "changed": None}
        change = payout_handlers().apply_state(platform_order_no=str(obj.get("reference_id", "")), state=state,
                                               adapter=ADAPTER)
        return {"object": "payout", "status": state.upstream_status, "changed": change}
    invoice_id = str(event.get("id", ""))
    if not invoice_id:
        raise UpstreamRejected("invoice webhook without id", status=400)
    invoice = client.call("GET", f"/v2/invoices/{invoice_id}")
    state = _readable(invoice, invoice_state)
    if state is None:
        return {"object": "invoice", "status": str(invoice.get("status", "")), "changed": None}
    change = payin_handlers().apply_state(state=state, adapter=ADAPTER)
    return {"object": "invoice", "status": state.upstream_status, "changed": change}


def _refund_webhook(client: XenditClient, *, channel: Channel, event: dict) -> dict:
    """refund.succeeded / refund.failed: the refund re-read (GET /refunds/{id}); a final one is applied to the refund
    its reference_id names through refund_channel_result, which changes a refund once and never with another amount
    or currency than the refund's; one that is no refund of ours is acknowledged and ignored."""
    data = event.get("data") or {}
    refund_id = str(data.get("id", "")) if isinstance(data, dict) else ""
    if not refund_id:
        raise UpstreamRejected("refund webhook without data.id", status=400)
    obj = client.call("GET", f"/refunds/{refund_id}")
    state = _readable(obj, refund_state_of)
    status = str(obj.get("status", ""))
    if state is None or state.outcome not in ("succeeded", "failed"):
        return {"object": "refund", "status": status, "refund": None}
    try:
        refund = payin_handlers().refund_result(refund_no=str(obj.get("reference_id") or ""), outcome=state.outcome,
                                                fail_reason=state.fail_reason, upstream_reference=state.reference,
                                                amount=state.amount, currency=state.currency)
    except LookupError:  # RefundNotFound: another system's refund on the same Xendit account
        logger.warning("xendit refund %s (reference_id %r) is no refund of ours on %s; ignored", refund_id,
                       obj.get("reference_id"), channel.code)
        return {"object": "refund", "status": status, "refund": None}
    return {"object": "refund", "status": status, "refund": refund.status}


def _readable(obj: dict, read):
    """The state of an object Xendit's API returned, or None when it cannot be ours (a currency we do not have, an
    amount that is no whole number of its minor units): acknowledged, so Xendit does not retry it for a day; logged;
    an order of ours it might concern stays open for reconciliation, which reports it."""
    from apps.currencies.models import Currency

    currency = Currency.objects.filter(code=str(obj.get("currency", ""))).first()
    try:
        if currency is None:
            raise UpstreamRejected(f"currency {obj.get('currency')!r} is not one of ours", status=400)
        return read(obj, minor_unit=currency.minor_unit)
    except UpstreamRejected as exc:
        logger.warning("xendit object %s not applied: %s", obj.get("id"), exc)
        return None
