"""PayMongo (docs/channels.md, "PayMongo"): PHP pay-ins through Checkout Sessions, refunded through its refunds
("PayMongo refunds"), payouts through its transfers (InstaPay / PESONet from our PayMongo wallet).

Plain `requests` on the documented endpoints, as for Xendit. Auth is HTTP Basic with the channel's secret key as the
user name and no password; the API root is PAYMONGO_API_BASE_URL (a channel's own api_base_url only where
CHANNEL_API_BASE_URL_OVERRIDE allows it: development and the tests' emulator). Amounts are integers in centavos on
both sides (PayMongo's smallest unit is our PHP minor unit), so no decimal is written.

  POST /v1/checkout_sessions                 reference_number = platform_order_no, Idempotency-Key = the same
  GET  /v1/checkout_sessions/{id}            the session with its payments[]: the paid state is read here
  POST /v1/checkout_sessions/{id}/expire     the loser of two racing first openings; an expired order's session
  GET  /v2/wallets                           our wallet: the transfers' source_account
  GET  /v2/transfers/receiving_institutions?provider=instapay|pesonet   checked when a channel is configured
  GET  /v2/transfers?reference_number=&limit=&after=   a transfer sent before for the order (its create's answer
                                             lost), every page read until has_more is false
  POST /v2/batch_transfers                   one transfer, reference_number = platform_order_no, Idempotency-Key
  GET  /v2/transfers/{id}
  POST /v1/refunds                           a refund of the session's paid payment: payment_id, amount, reason,
                                             metadata {refund_no, platform_order_no}
  GET  /v1/refunds?payment_id=&limit=&after= the payment's refunds, every page read until has_more is false: ours is
                                             the one whose metadata carries our refund_no

Which transfer is ours: the one the create answered, or the one transfer listed under our reference_number with our
amount, currency and destination account (looked up before every create, so a re-submission never sends twice). A
list not read to its end answers "unknown", never "none" (apps.channels.lookups).
Webhooks (apps.channels.views) are verified by their Paymongo-Signature header, then only say "look again": the
object is re-read from the API with the channel's key before anything moves, and the result enters through the same
payout and collection services as Xendit's (registered with apps.channels.registry).
"""

import hashlib
import hmac
import json
import logging
import time
from datetime import UTC, datetime
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils import timezone

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
from apps.channels.models import Channel, UpstreamPayin
from apps.channels.registry import (
    payin_handlers,
    payout_handlers,
    register_payin,
    register_payout,
)
from apps.channels.submission import one_submission_at_a_time
from apps.channels.upstream_http import upstream_call

logger = logging.getLogger(__name__)

ADAPTER = "paymongo"
CURRENCY = "PHP"  # PayMongo's checkout and transfers take pesos only

CHECKOUT_SESSIONS = "/v1/checkout_sessions"
# E-wallets and QR Ph (docs/channels.md): what the payer may choose on PayMongo's checkout page.
PAYMENT_METHOD_TYPES = ["gcash", "paymaya", "grab_pay", "qrph"]

REFUNDS = "/v1/refunds"
# PayMongo's refund reasons (its Refund Resource); a merchant's reason that is none of them is sent as "others", its
# words in the refund's notes.
REFUND_REASONS = ("duplicate", "fraudulent", "requested_by_customer", "others")
REFUND_NOTES_MAX = 255
# Refund statuses as documented: pending and processing on the way, then succeeded or failed.
REFUND_OUTCOMES = {"pending": "pending", "processing": "pending", "succeeded": "succeeded", "failed": "failed"}
# The webhook events PayMongo sends about refunds; both carry the Payment, whose refunds are then read back.
REFUND_EVENTS = ("payment.refunded", "payment.refund.updated")

# PayMongo's refund rules by payment method (its payment's source type), as its "Refunding transactions" guide states
# them (docs/channels.md, "PayMongo refunds"): days after payment within which a refund is taken, in parts or whole;
# over-the-counter, QR Ph and UnionBank online banking payments are not refunded. A method PayMongo does not list
# (or a payment whose method it did not say) takes the shortest window of a refundable method.
PAYMONGO_REFUND_RULES = (
    RefundRuleDefault(method="card", window_days=60),
    RefundRuleDefault(method="gcash", window_days=180),
    RefundRuleDefault(method="grab_pay", window_days=90),
    RefundRuleDefault(method="paymaya", window_days=365),
    RefundRuleDefault(method="billease", window_days=60),
    RefundRuleDefault(method="dob", window_days=30),
    RefundRuleDefault(method="brankas_bdo", window_days=30),
    RefundRuleDefault(method="brankas_landbank", window_days=30),
    RefundRuleDefault(method="brankas_metrobank", window_days=30),
    RefundRuleDefault(method="dob_ubp", refundable=False),
    RefundRuleDefault(method="qrph", refundable=False),
    RefundRuleDefault(method="7eleven", refundable=False),
    RefundRuleDefault(method="", window_days=30),
)

# A submission makes at most 2 * LOOKUP_PAGES + 2 HTTP calls (the lookup's pages, wallets, create; the lookup's pages
# again after a refusal): its lease outlives them all.
SUBMISSION_LEASE_CALLS = 2 * LOOKUP_PAGES + 3

# InstaPay's per-transfer limit, PHP 50,000 in centavos; above it a transfer goes by PESONet (same or next banking day).
INSTAPAY_LIMIT = 5_000_000
PROVIDERS = ("instapay", "pesonet")

# Our bank codes (apps.channels.services.SEED_BANK_CODES) → the receiving institution's BIC, PayMongo's institution
# code. Checked against GET /v2/transfers/receiving_institutions when a payout channel is configured
# (paymongo_configuration_problems): a code mapped to a BIC PayMongo does not list is refused there, not at the first
# live payout. GRABPAY is not mapped (no InstaPay/PESONet receiving institution): such a payout is refused here.
RECEIVING_INSTITUTIONS = {
    "BDO": "BNORPHMMXXX", "BPI": "BOPIPHMMXXX", "MBTC": "MBTCPHMMXXX", "LBP": "TLBPPHMMXXX", "PNB": "PNBMPHMMXXX",
    "SECB": "SETCPHMMXXX", "UBP": "UBPHPHMMXXX", "RCBC": "RCBCPHMMXXX", "CBC": "CHBKPHMMXXX",
    "GCASH": "GXCHPHM2XXX", "MAYA": "PAPHPHM1XXX",
}

# Transfer statuses as documented: pending (InstaPay: up to 20 minutes; PESONet: a day), succeeded, failed ("safe to
# retry": for us the order fails and the merchant may send a new one).
TRANSFER_OUTCOMES = {"pending": "pending", "succeeded": "paid", "failed": "failed"}


def receiving_institution(bank_code: str) -> str | None:
    return RECEIVING_INSTITUTIONS.get(bank_code)


def transfer_provider(amount: int) -> str:
    """InstaPay up to its limit, PESONet above it (PayMongo routes by the provider we name)."""
    return "instapay" if amount <= INSTAPAY_LIMIT else "pesonet"


def _fields(obj) -> dict:
    """A resource's fields: JSON:API `attributes`, or the object itself where PayMongo answers flat (the transfers in
    a batch answer, as its Transfer Resource page shows them)."""
    if not isinstance(obj, dict):
        return {}
    attributes = obj.get("attributes")
    return attributes if isinstance(attributes, dict) else obj


class PayMongoClient:
    """The documented endpoints with one channel's credentials; errors as UpstreamUnavailable / UpstreamRejected."""

    def __init__(self, channel: Channel, *, secret_key: str | None = None):
        # A channel's own API root only where the deployment allows it (CHANNEL_API_BASE_URL_OVERRIDE): in production
        # the key goes to PayMongo's documented root whatever a channel row says.
        own = channel.api_base_url if settings.CHANNEL_API_BASE_URL_OVERRIDE else ""
        self.base_url = (own or settings.PAYMONGO_API_BASE_URL).rstrip("/")
        self.auth = (channel.secret_key if secret_key is None else secret_key, "")

    def call(self, method: str, path: str, *, payload: dict | None = None, params: dict | None = None,
             headers: dict | None = None):
        body = upstream_call(upstream="paymongo", method=method, base_url=self.base_url, path=path, auth=self.auth,
                             data=json.dumps(payload).encode() if payload is not None else None, params=params, headers=headers,
                             error_code=_error_code)
        if not isinstance(body, dict):
            raise UpstreamUnavailable(f"paymongo {method} {path}: not a JSON object")
        return body


def _error_code(body) -> str:
    """PayMongo's error envelope: {"errors": [{"code", "detail", "source"?}]}."""
    errors = body.get("errors") if isinstance(body, dict) else None
    if isinstance(errors, list) and errors and isinstance(errors[0], dict):
        return str(errors[0].get("code", ""))
    return ""


def _amount(value) -> int:
    """PayMongo's amount (an integer in centavos) as ours; anything else is a refused answer, never a crash."""
    if isinstance(value, bool) or not isinstance(value, (int, Decimal)) or value != int(value):
        raise UpstreamRejected(f"paymongo amount {value!r} is not a whole number of centavos", status=400)
    return int(value)


def _time(value) -> datetime | None:
    """PayMongo's timestamps are Unix seconds (ISO 8601 strings accepted too)."""
    if value in (None, ""):
        return None
    try:
        if isinstance(value, (int, Decimal)):
            return datetime.fromtimestamp(int(value), tz=UTC)
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except (ValueError, OverflowError, OSError):
        return None  # the order's paid_at is then when we learnt it


def session_state(session: dict) -> PayinState:
    """A checkout session as a PayinState: 'paid' once one of its payments is `paid` (its amount and currency are
    what was paid), 'expired' when the session expired unpaid, else 'pending' (`active`)."""
    attributes = _fields(session)
    paid = [_fields(p) for p in attributes.get("payments") or [] if _fields(p).get("status") == "paid"]
    status = str(attributes.get("status", "")).lower()
    if paid:
        payment = paid[0]
        return PayinState(outcome="paid", reference=str(session.get("id", "")),
                          platform_order_no=str(attributes.get("reference_number") or ""),
                          amount=_amount(payment.get("amount")), currency=str(payment.get("currency", "")),
                          upstream_status="PAID", paid_at=_time(payment.get("paid_at")),
                          payment_method=payment_method(payment))
    items = attributes.get("line_items") or []
    total = sum(_amount(_fields(item).get("amount")) * _amount(_fields(item).get("quantity", 1)) for item in items)
    currency = str(_fields(items[0]).get("currency", "")) if items else ""
    return PayinState(outcome="expired" if status == "expired" else "pending", reference=str(session.get("id", "")),
                      platform_order_no=str(attributes.get("reference_number") or ""), amount=total,
                      currency=currency, upstream_status=status.upper())


def payment_method(payment: dict) -> str:
    """How the payer paid, as PayMongo names the payment's source type ("gcash", "card", "paymaya", "dob", "7eleven");
    "" when the payment does not say."""
    source = _fields(payment).get("source")
    return str(source.get("type") or "") if isinstance(source, dict) else ""


def paid_payment(session: dict) -> dict:
    """The session's paid payment (the one a refund gives back; "refunded" once given back whole), {} when it has
    none."""
    for payment in _fields(session).get("payments") or []:
        if _fields(payment).get("status") in ("paid", "refunded"):
            return payment
    return {}


def _failure_reason(fields: dict, status: str) -> str:
    """Why PayMongo failed a refund or a transfer: its failure code, else its message, else its status."""
    return str(fields.get("failure_code") or fields.get("failed_code") or fields.get("failure_message") or status)


def refund_state_of(refund: dict) -> RefundState:
    """A refund PayMongo listed, as a RefundState: pending and processing wait, succeeded and failed are final; its
    amount in centavos (UpstreamRejected when it is not a whole number of them)."""
    fields = _fields(refund)
    status = str(fields.get("status", "")).lower()
    outcome = REFUND_OUTCOMES.get(status, "pending")
    reason = _failure_reason(fields, status) if outcome == "failed" else ""
    return RefundState(outcome=outcome, reference=str(refund.get("id", "")), fail_reason=f"paymongo: {reason}"
                       if reason else "", amount=_amount(fields.get("amount")),
                       currency=str(fields.get("currency") or CURRENCY))


def refund_reason(reason: str) -> str:
    """PayMongo's reason value for a merchant's reason: the value itself when it is one, else "others"."""
    value = reason.strip().lower()
    return value if value in REFUND_REASONS else "others"


def transfer_state(transfer: dict) -> PayoutState:
    fields = _fields(transfer)
    status = str(fields.get("status", "")).lower()
    outcome = TRANSFER_OUTCOMES.get(status, "pending")
    reason = _failure_reason(fields, status) if outcome == "failed" else ""
    return PayoutState(outcome=outcome, reference=str(transfer.get("id", "")), upstream_status=status.upper(),
                       fail_reason=reason, amount=_amount(fields.get("amount")),
                       currency=str(fields.get("currency", "")))


def _require_php(currency: str) -> None:
    if currency != CURRENCY:
        raise UpstreamRejected(f"paymongo takes {CURRENCY} only, not {currency}", status=400,
                               error_code="currency_not_supported")


@register_payin
class PayMongoPayinAdapter(PayinAdapter):
    name = ADAPTER
    is_sandbox = False

    @staticmethod
    def configuration_check(*, channel: Channel) -> None:
        paymongo_configuration_check(channel=channel)

    def start_payment(self, *, order) -> PaymentStart:
        """The order's checkout session, opened on the first call and recorded (UpstreamPayin); later calls reuse it.
        The create carries Idempotency-Key = platform_order_no, so a create whose answer was lost (timeout) and is
        sent again gets the same session back."""
        opened = UpstreamPayin.objects.filter(platform_order_no=order.platform_order_no).first()
        if opened is None:
            _require_php(order.currency_id)
            attributes = {
                "line_items": [{"name": order.subject or f"Order {order.mch_order_no}", "amount": order.amount,
                                "currency": order.currency_id, "quantity": 1}],
                "payment_method_types": PAYMENT_METHOD_TYPES,
                "reference_number": order.platform_order_no,
                "description": order.subject or f"Order {order.mch_order_no}",
                "send_email_receipt": False, "show_description": True, "show_line_items": True,
                "metadata": {"platform_order_no": order.platform_order_no},
            }
            if order.return_url.startswith(("https://", "http://")):
                attributes["success_url"] = attributes["cancel_url"] = order.return_url
            client = PayMongoClient(order.channel)
            session = client.call("POST", CHECKOUT_SESSIONS, payload={"data": {"attributes": attributes}},
                                  headers={"Idempotency-Key": order.platform_order_no}).get("data") or {}
            reference, url = str(session.get("id", "")), str(_fields(session).get("checkout_url", ""))
            if not reference or not url:
                raise UpstreamUnavailable("paymongo POST /v1/checkout_sessions: no id or checkout_url in the answer")
            opened, _ = UpstreamPayin.objects.get_or_create(
                platform_order_no=order.platform_order_no,
                defaults={"channel": order.channel, "reference": reference, "redirect_url": url})
            if opened.reference != reference:
                # Two first openings at once both created a session (PayMongo did not take them as one key): the
                # first recorded is the one shown; this one is expired at once so no one can pay the order twice.
                try:
                    client.call("POST", f"{CHECKOUT_SESSIONS}/{reference}/expire")
                except (UpstreamUnavailable, UpstreamRejected) as exc:
                    logger.warning("pay-in %s: duplicate checkout session %s not expired (%s)", order, reference, exc)
        return PaymentStart(upstream_reference=opened.reference, redirect_url=opened.redirect_url)

    def payin_state(self, *, order, reference: str, channel=None) -> PayinState:
        """The session read back. A session still open after our order expired is expired upstream first (PayMongo
        sessions outlive our orders), so that no payer pays an expired order later; PayMongo refuses to expire one
        with a paid or ongoing payment, which is then read again and reported as it is."""
        client = PayMongoClient(channel or order.channel)
        state = session_state(client.call("GET", f"{CHECKOUT_SESSIONS}/{reference}").get("data") or {})
        if state.outcome == "pending" and order.expire_at <= timezone.now():
            try:
                client.call("POST", f"{CHECKOUT_SESSIONS}/{reference}/expire")
            except UpstreamRejected as exc:
                logger.info("pay-in %s: session %s not expired upstream (%s)", order, reference, exc.error_code)
            state = session_state(client.call("GET", f"{CHECKOUT_SESSIONS}/{reference}").get("data") or {})
        return state

    # --- refunds (docs/channels.md, "PayMongo refunds") ---

    takes_refunds = True
    refund_rules = PAYMONGO_REFUND_RULES
    # The session read, the refund list's pages, the create.
    refund_calls = LOOKUP_PAGES + 2

    def start_refund(self, *, refund) -> str:
        """POST /v1/refunds for the paid payment of the order's checkout session, our refund_no in its metadata.
        PayMongo documents no idempotency key for refunds, so the payment's refunds are read first (every page) and
        one carrying our refund_no is taken for this one: a submission whose answer was lost is never sent twice.
        The hand-off (refunds._refund_send) holds the refund's submission lease around this, so no other worker creates
        it meanwhile."""
        client, payment_id = self._refund_payment(refund, lookup=False)
        found = self._refund_ours(refund, client, payment_id)
        if found:
            return str(found.get("id", ""))
        attributes = {"amount": refund.amount, "payment_id": payment_id, "reason": refund_reason(refund.reason),
                      "metadata": {"refund_no": refund.refund_no,
                                   "platform_order_no": refund.order.platform_order_no}}
        if refund.reason:
            attributes["notes"] = refund.reason[:REFUND_NOTES_MAX]
        created = client.call("POST", REFUNDS, payload={"data": {"attributes": attributes}}).get("data") or {}
        if not created.get("id"):
            # Taken or not, its id is not known: the sweep's lookup by refund_no finds it, or finds none.
            raise UpstreamUnavailable("paymongo POST /v1/refunds: no id in the answer")
        return str(created["id"])

    def refund_state(self, *, refund) -> RefundState:
        """The refund of ours among the payment's refunds, every page read: 'missing' only when the whole list was
        read and none carries our refund_no; LookupUnknown when it cannot be read to its end."""
        client, payment_id = self._refund_payment(refund, lookup=True)
        found = self._refund_ours(refund, client, payment_id)
        return refund_state_of(found) if found else RefundState(outcome="missing")

    @staticmethod
    def _refund_payment(refund, *, lookup: bool) -> tuple[PayMongoClient, str]:
        """The client of the channel the payment was taken on (UpstreamPayin.channel, whatever the order's channel
        is now) and the id of its checkout session's paid payment. A session that cannot be read or shows no paid
        payment leaves the refund where it is (UpstreamUnavailable; LookupUnknown for a lookup): our order was
        credited from that payment, so its absence is PayMongo's answer being incomplete, never a refusal."""
        unknown = LookupUnknown if lookup else UpstreamUnavailable
        opened = (UpstreamPayin.objects.select_related("channel")
                  .filter(platform_order_no=refund.order.platform_order_no).first())
        if opened is None:
            raise unknown(f"refund {refund.refund_no}: no PayMongo checkout session recorded for its order")
        client = PayMongoClient(opened.channel)
        try:
            session = client.call("GET", f"{CHECKOUT_SESSIONS}/{opened.reference}").get("data") or {}
        except UpstreamRejected as exc:
            raise unknown(f"refund {refund.refund_no}: session {opened.reference} not readable ({exc})") from None
        payment_id = str(paid_payment(session).get("id") or "")
        if not payment_id:
            logger.error("refund %s: checkout session %s shows no paid payment", refund.refund_no, opened.reference)
            raise unknown(f"refund {refund.refund_no}: session {opened.reference} shows no paid payment")
        return client, payment_id

    @staticmethod
    def _refund_ours(refund, client: PayMongoClient, payment_id: str) -> dict:
        """The one refund of the payment carrying our refund_no, or {} when every page was read and none does. One
        with our refund_no but another amount, or two of them, are ambiguous: LookupUnknown, an operator is told."""
        ours = [r for r in refunds_listed(client, payment_id=payment_id)
                if str((_fields(r).get("metadata") or {}).get("refund_no") or "") == refund.refund_no]
        if len(ours) == 1:
            try:
                amount = _amount(_fields(ours[0]).get("amount"))
            except UpstreamRejected:
                amount = None
            if amount == refund.amount:
                return ours[0]
        if ours:
            listed = ", ".join(f"{r.get('id')} {_fields(r).get('amount')} {_fields(r).get('status')}" for r in ours)
            logger.error("refund %s (%s): PayMongo lists %s under its refund_no; none is taken for it: an operator "
                         "must check them in PayMongo's dashboard", refund.refund_no, refund.amount, listed)
            raise LookupUnknown(f"refund {refund.refund_no}: {len(ours)} PayMongo refunds carry its refund_no")
        return {}


def _listed(client: PayMongoClient, path: str, *, field: str, value: str) -> list[dict]:
    """Every object PayMongo lists under `field`=`value`, each page read (`limit`, the `after` cursor, until
    `has_more` is false: apps.channels.lookups) and matched on `field` here too, since a list that ignores the filter
    answers every object of the account. LookupUnknown when the list cannot be read to its end, or when a listed
    object does not show `field` (it cannot be told apart from ours)."""

    def page(cursor: str | None):
        params = {field: value, "limit": LOOKUP_PAGE_SIZE}
        if cursor:
            params["after"] = cursor
        answer = client.call("GET", path, params=params)
        more = answer.get("has_more")
        return answer.get("data"), more if isinstance(more, bool) else None

    where = f"paymongo GET {path}"
    ours = []
    for obj in every_page(where=where, page=page):
        fields = _fields(obj)
        if field not in fields:
            raise LookupUnknown(f"{where}: {obj.get('id')} shows no {field}")
        if str(fields.get(field) or "") == value:
            ours.append(obj)
    return ours


def refunds_listed(client: PayMongoClient, *, payment_id: str) -> list[dict]:
    """Every refund PayMongo lists for the payment."""
    return _listed(client, REFUNDS, field="payment_id", value=payment_id)


def transfers_listed(client: PayMongoClient, *, reference_number: str) -> list[dict]:
    """Every transfer PayMongo lists under `reference_number`."""
    return _listed(client, "/v2/transfers", field="reference_number", value=reference_number)


@register_payout
class PayMongoPayoutAdapter(PayoutAdapter):
    name = ADAPTER
    is_sandbox = False
    send_calls = 2 * LOOKUP_PAGES + 2  # the lookup's pages, wallets, create, the lookup's pages again

    @staticmethod
    def configuration_check(*, channel: Channel) -> None:
        paymongo_configuration_check(channel=channel)

    def start_disbursement(self, *, payout) -> str:
        """submit_transfer; a definite refusal fails the payout (frozen funds back), as a failure notice would."""
        try:
            return self.submit_transfer(payout=payout)
        except UpstreamRejected as exc:
            logger.warning("payout %s refused by paymongo: %s", payout, exc.error_code or exc)
            payout_handlers().result(platform_order_no=payout.platform_order_no, outcome="failed",
                                     fail_reason=f"refused upstream: {exc.error_code or exc.status}")
            return ""  # nothing was disbursed; the order is FAILED

    def submit_transfer(self, *, payout) -> str:
        """Send the payout as one transfer, or find the one sent before; returns its id.

        Raises UpstreamRejected only when PayMongo definitely did not take it (it refused the create, and no transfer
        of ours is listed under our reference_number), and UpstreamUnavailable when that is not known (timeout, 5xx,
        our key refused, two transfers that may be ours): the first may move the order to another channel, the
        second never may. Before every create the transfers listed under our reference_number are asked for, so a
        re-submission after a lost answer binds the first transfer instead of sending a second one, whether or not
        PayMongo honours the Idempotency-Key header it is also given."""
        _require_php(payout.currency_id)
        bic = receiving_institution(payout.bank_code)
        if bic is None:  # nothing is sent: a definite refusal
            raise UpstreamRejected(f"bank code {payout.bank_code} is no PayMongo receiving institution", status=400,
                                   error_code="receiving_institution_not_supported")
        client = PayMongoClient(payout.channel)
        with one_submission_at_a_time(payout.platform_order_no, calls=SUBMISSION_LEASE_CALLS):
            found = self._ours(payout, client, bic)
            if found:
                return found
            return self._create(payout, client, bic)

    def _create(self, payout, client: PayMongoClient, bic: str) -> str:
        transfer = {
            "source_account": self._source_account(client),
            "destination_account": {"number": payout.payee_account, "name": payout.payee_name, "bic": bic},
            "amount": payout.amount, "currency": payout.currency_id, "provider": transfer_provider(payout.amount),
            "reference_number": payout.platform_order_no, "purpose": "Disbursement",
            "description": f"Payout {payout.mch_order_no}", "metadata": {"platform_order_no": payout.platform_order_no},
        }
        try:
            answer = client.call("POST", "/v2/batch_transfers", payload={"data": {"attributes": {"transfers": [
                transfer]}}}, headers={"Idempotency-Key": payout.platform_order_no})
        except UpstreamRejected as exc:
            if exc.status == 404:  # Money Movement not enabled on the account: our configuration (refused as a whole)
                raise UpstreamDeclined(f"paymongo POST /v2/batch_transfers: HTTP 404 {exc.error_code}") from None
            # A refusal of a re-submission proves nothing about the first submission (its answer may have been
            # lost): the order fails only when PayMongo lists no transfer of ours.
            try:
                found = self._ours(payout, client, bic)
            except UpstreamDeclined as lookup:
                # The lookup after the refusal was declined; that says nothing of whether a transfer of ours exists.
                raise UpstreamUnavailable(str(lookup)) from None
            if found:
                return found
            raise
        return self._created_id(answer, payout)

    @staticmethod
    def _created_id(answer: dict, payout) -> str:
        """The transfer of ours in the batch answer ({"data": {"id": "batch_tr_...", "transfers": [...]}}, as the
        Transfer Resource page shows it; under `attributes` too, as community SDKs read it)."""
        data = answer.get("data") or {}
        transfers = data.get("transfers") if isinstance(data, dict) else None
        if transfers is None:
            transfers = _fields(data).get("transfers")
        for transfer in transfers or []:
            if str(_fields(transfer).get("reference_number", "")) == payout.platform_order_no and transfer.get("id"):
                return str(transfer["id"])
        # Taken, but its id not in the answer: the next re-submission finds it by reference_number.
        raise UpstreamUnavailable("paymongo POST /v2/batch_transfers: no transfer of ours in the answer")

    def _ours(self, payout, client: PayMongoClient, bic: str) -> str:
        """The id of the one transfer listed under our reference_number with our amount, currency and destination
        account, or "" when every page was read and there is none; two or more are ambiguous (UpstreamUnavailable: the
        order stays PROCESSING without a reference, an operator is told), and so is a list not read to its end
        (LookupUnknown, from transfers_listed)."""
        ours = []
        for transfer in transfers_listed(client, reference_number=payout.platform_order_no):
            fields = _fields(transfer)
            destination = fields.get("destination_account") or {}
            try:
                amount = _amount(fields.get("amount"))
            except UpstreamRejected:
                raise LookupUnknown(f"payout {payout}: transfer {transfer.get('id')} of its reference_number has an "
                                    f"amount that cannot be read") from None
            if (amount, str(fields.get("currency", "")), str(destination.get("number", "")),
                    str(destination.get("bic", ""))) == (payout.amount, payout.currency_id, payout.payee_account, bic):
                ours.append(transfer)
        if len(ours) > 1:
            ids = ", ".join(f"{t.get('id')} {_fields(t).get('status')}" for t in ours)
            logger.error("payout %s: %d PayMongo transfers carry its reference_number, amount and account (%s): "
                         "none is taken for ours; an operator must check them in PayMongo's dashboard",
                         payout, len(ours), ids)
            raise UpstreamUnavailable(f"payout {payout}: {len(ours)} transfers of its reference_number")
        return str(ours[0].get("id", "")) if ours else ""

    @staticmethod
    def _source_account(client: PayMongoClient) -> dict:
        """Our PayMongo wallet's account ({number, name, bic}): the documented source_account of every transfer."""
        wallets = [_fields(w) for w in client.call("GET", "/v2/wallets").get("data") or []]
        usable = [w for w in wallets if str(w.get("currency", CURRENCY)) == CURRENCY
                  and str(w.get("status", "activated")) == "activated" and isinstance(w.get("source_account"), dict)]
        if len(usable) != 1:
            raise UpstreamUnavailable(f"paymongo GET /v2/wallets: {len(usable)} activated {CURRENCY} wallets, "
                                      f"expected one")
        account = usable[0]["source_account"]
        return {"number": str(account.get("number", "")), "name": str(account.get("name", "")),
                "bic": str(account.get("bic", ""))}

    def disbursement_lookup(self, *, payout) -> PayoutState:
        """Any transfer listed under our reference_number, whatever its amount or account: the failover's question
        (docs/channels.md, "Failover"). 'missing' only when every page was read and none is ours; LookupUnknown when
        the list could not be read to its end."""
        ours = transfers_listed(PayMongoClient(payout.channel), reference_number=payout.platform_order_no)
        if not ours:
            return PayoutState(outcome="missing")
        return PayoutState(outcome="pending", reference=str(ours[0].get("id", "")),
                           upstream_status=str(_fields(ours[0]).get("status", "")).upper())

    def payout_state(self, *, payout) -> PayoutState:
        """The state of the transfer bound to the order (its upstream_reference); 'missing' before that is known."""
        if not payout.upstream_reference:
            return PayoutState(outcome="missing")
        found = PayMongoClient(payout.channel).call("GET", f"/v2/transfers/{payout.upstream_reference}")
        return transfer_state(found.get("data") or {})


# --- configuration --------------------------------------------------------------------------------------------


def paymongo_configuration_problems(*, channel: Channel, secret_key: str) -> list[str]:
    """What keeps a PayMongo channel from working, asked of PayMongo with the key being configured: a currency other
    than PHP; for payouts, a bank code of ours mapped to a BIC PayMongo does not list as a receiving institution
    (instapay or pesonet), or not exactly one activated PHP wallet to send from. [] when none."""
    if channel.currency_id != CURRENCY:
        return [f"PayMongo serves {CURRENCY} only, not {channel.currency_id}."]
    if channel.direction != Channel.Direction.PAYOUT:
        return []
    from apps.channels.models import BankCode

    client = PayMongoClient(channel, secret_key=secret_key)
    problems = []
    try:
        listed = set()
        for provider in PROVIDERS:
            answer = client.call("GET", "/v2/transfers/receiving_institutions", params={"provider": provider})
            for institution in answer.get("data") or []:
                fields = _fields(institution)
                listed.add(str(fields.get("bic") or institution.get("id") or ""))
        PayMongoPayoutAdapter._source_account(client)
    except (UpstreamUnavailable, UpstreamRejected) as exc:
        return [f"PayMongo could not be asked with this key: {exc}"]
    for code in BankCode.objects.filter(currency_id=CURRENCY, is_active=True).order_by("code").values_list(
            "code", flat=True):
        bic = receiving_institution(code)
        if bic is not None and bic not in listed:
            problems.append(f"bank code {code} is mapped to {bic}, which PayMongo does not list as a receiving "
                            f"institution.")
    return problems


def paymongo_configuration_check(*, channel: Channel) -> None:
    """The adapters' `configuration_check` (apps.channels.services.channel_upstream_check, run by Channel.clean()
    when the channel is asked for and again when it is approved): ValidationError listing the problems. A channel
    without a secret key is not asked, as Xendit's: it cannot move anything."""
    if not channel.secret_key:
        return
    problems = paymongo_configuration_problems(channel=channel, secret_key=channel.secret_key)
    if problems:
        raise ValidationError(problems)


# --- webhooks -------------------------------------------------------------------------------------------------


class WebhookRefused(PermissionError):
    """Missing, malformed, wrong or stale Paymongo-Signature, or an event of the other mode (test/live): nothing is
    read, nothing changes."""


def channel_livemode(channel: Channel) -> bool:
    """A channel is live when its secret key is a live one (sk_live_...); test keys only ever see test-mode events."""
    return channel.secret_key.startswith("sk_live_")


def paymongo_signature_verify(*, header: str, body: bytes, secret: str, livemode: bool,
                              now: float | None = None) -> None:
    """PayMongo's documented check: header `t=<unix seconds>,te=<test signature>,li=<live signature>`; the signature is
    HMAC-SHA256 (hex) of "<t>.<raw body>" keyed with the webhook's secret key; `li` is compared for a live channel,
    `te` for a test one, in constant time. A timestamp more than PAYMONGO_WEBHOOK_TOLERANCE_SECONDS away from our
    clock is refused (a captured webhook replayed later)."""
    if not secret:
        raise WebhookRefused("no webhook secret key stored for the channel")
    parts = {}
    for item in header.split(","):
        key, sep, value = item.strip().partition("=")
        if sep:
            parts[key] = value
    try:
        timestamp = int(parts.get("t", ""))
    except ValueError:
        raise WebhookRefused("Paymongo-Signature without a timestamp") from None
    given = parts.get("li" if livemode else "te", "")
    expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    if not given or not hmac.compare_digest(given.encode(), expected.encode()):
        raise WebhookRefused("Paymongo-Signature does not match")
    if abs((time.time() if now is None else now) - timestamp) > settings.PAYMONGO_WEBHOOK_TOLERANCE_SECONDS:
        raise WebhookRefused(f"Paymongo-Signature timestamp {timestamp} is outside the tolerance")


def paymongo_webhook_handle(*, channel: Channel, signature: str, body: bytes) -> dict:
    """A PayMongo webhook for `channel`: signature checked, the event's mode checked against the channel's, then the
    object it names re-read from the API, then the outcome applied through the payout or collection service
    registered for it. A pay-in channel's URL acts on checkout sessions and on a payment's refunds (payment.refunded,
    payment.refund.updated), a payout channel's on transfers only; any other event is acknowledged and changes
    nothing. Returns what was done (for the reply and logs)."""
    livemode = channel_livemode(channel)
    paymongo_signature_verify(header=signature, body=body, secret=channel.callback_token, livemode=livemode)
    try:
        event = json.loads(body, parse_float=Decimal)
    except ValueError:
        raise UpstreamRejected("webhook body is not JSON", status=400) from None
    attributes = _fields(event.get("data")) if isinstance(event, dict) else {}
    if attributes.get("livemode") is not livemode:
        raise WebhookRefused(f"a {'live' if attributes.get('livemode') else 'test'}-mode event for a "
                             f"{'live' if livemode else 'test'} channel")
    kind = str(attributes.get("type", ""))
    resource = attributes.get("data") if isinstance(attributes.get("data"), dict) else {}
    resource_type, resource_id = str(resource.get("type", "")), str(resource.get("id", ""))
    client = PayMongoClient(channel)
    if channel.direction == Channel.Direction.PAYIN and resource_type == "checkout_session" and resource_id:
        session = _reread(client, f"{CHECKOUT_SESSIONS}/{resource_id}")
        state = _readable(session, session_state)
        if state is None:
            return {"event": kind, "object": "checkout_session", "changed": None}
        change = payin_handlers().apply_state(state=state, adapter=ADAPTER)
        return {"event": kind, "object": "checkout_session", "status": state.upstream_status, "changed": change}
    if channel.direction == Channel.Direction.PAYOUT and resource_type == "transfer" and resource_id:
        transfer = _reread(client, f"/v2/transfers/{resource_id}")
        state = _readable(transfer, transfer_state)
        if state is None:
            return {"event": kind, "object": "transfer", "changed": None}
        change = payout_handlers().apply_state(
            platform_order_no=str(_fields(transfer).get("reference_number", "")), state=state, adapter=ADAPTER)
        return {"event": kind, "object": "transfer", "status": state.upstream_status, "changed": change}
    if (channel.direction == Channel.Direction.PAYIN and resource_type == "payment" and kind in REFUND_EVENTS
            and resource_id):
        return {"event": kind, "object": "payment", "refunds": _refunds_apply(client, payment_id=resource_id)}
    logger.info("paymongo webhook for %s: %s (%s) acknowledged, nothing to apply", channel.code, kind, resource_type)
    return {"event": kind, "object": resource_type, "changed": None}


def _refunds_apply(client: PayMongoClient, *, payment_id: str) -> dict[str, str]:
    """A refund event names the payment: its refunds are read back from the API (every page) and each of ours (our
    refund_no in its metadata) that PayMongo says is final enters through refund_channel_result, which changes a
    refund once, takes a repeated answer as a replay and leaves one of another amount unapplied. A refund_no we do
    not hold is another system's: ignored. Returns the status each of ours PayMongo says is final has now, by
    refund_no (PROCESSING: its amount differed)."""
    listed: dict[str, list[dict]] = {}
    for refund in refunds_listed(client, payment_id=payment_id):
        refund_no = str((_fields(refund).get("metadata") or {}).get("refund_no") or "")
        if refund_no:
            listed.setdefault(refund_no, []).append(refund)
    applied = {}
    for refund_no, refunds in listed.items():
        if len(refunds) > 1:
            logger.error("paymongo payment %s: %d refunds carry refund_no %s; none applied, an operator must check "
                         "them", payment_id, len(refunds), refund_no)
            continue
        state = _readable(refunds[0], refund_state_of)
        if state is None or state.outcome not in ("succeeded", "failed"):
            continue
        try:
            done = payin_handlers().refund_result(refund_no=refund_no, outcome=state.outcome,
                                                  fail_reason=state.fail_reason, upstream_reference=state.reference,
                                                  amount=state.amount, currency=state.currency)
        except LookupError:
            logger.info("paymongo refund %s (%s) is no refund of ours; ignored", state.reference, refund_no)
            continue
        applied[refund_no] = str(done.status)
    return applied


def _reread(client: PayMongoClient, path: str) -> dict:
    """The object a webhook names, from PayMongo's API; {} when PayMongo has no such object (not ours: acknowledged)."""
    try:
        return client.call("GET", path).get("data") or {}
    except UpstreamRejected as exc:
        if exc.status == 404:
            return {}
        raise


def _readable(obj: dict, read):
    """The state of an object PayMongo's API returned, or None when it cannot be ours (not pesos, an amount that is no
    whole number of centavos): acknowledged so PayMongo does not retry it, logged."""
    try:
        state = read(obj)
        _require_php(state.currency)
        return state
    except UpstreamRejected as exc:
        logger.warning("paymongo object %s not applied: %s", obj.get("id"), exc)
        return None
