"""Payouts by hand (docs/portal.md, "Payouts by hand"): a batch of one or more payout rows asked for by a merchant's
maker (finance, or an owner), approved by an owner independent of the maker (the merchant's own maker-checker;
docs/portal.md, "Maker-checker and independence") or rejected by an owner, then each row created through
`payout_create` exactly as the API's payout/create would (its own `mch_order_no`: a replay is answered from the
stored order, so nothing is ever created twice).

`actor` is the signed-in merchant user's membership: `.user`, `.merchant` (every lookup is scoped to it), `.role`.
"""

import csv
import hashlib
import io
import logging
import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Callable

from django.core.exceptions import ObjectDoesNotExist
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from apps.channels.routing import order_route
from apps.channels.selectors import bank_code_active
from apps.common import audit
from apps.common.errors import DomainError, ErrorCode
from apps.common.independence import maker_checker_refusal
from apps.common.orders import replay_or_conflict
from apps.common.step_up import second_factor_confirm
from apps.payout_batches.models import LIVE, PayoutBatch, PayoutBatchRow
from apps.merchants.models import Merchant, MerchantProduct, Product
from apps.payout.api.serializers import PayoutCreateRequestSerializer
from apps.payout.selectors import payout_for_merchant
from apps.payout.services import payout_create

logger = logging.getLogger(__name__)

OWNER, FINANCE = "owner", "finance"
MAKER_ROLES = (FINANCE, OWNER)
CHECKER_ROLES = (OWNER,)
MAX_ROWS = 500
MAX_FILE_BYTES = 256 * 1024
COLUMNS = ("mch_order_no", "amount", "currency", "payee_name", "payee_account", "bank_code")
OPTIONAL_COLUMNS = ("product_code", "attach")
FIELDS = ("mch_order_no", "product_code", "amount", "currency", "payee_name", "payee_account", "bank_code", "attach")


class BatchRefused(PermissionError):
    """The role, the batch's state or the maker-checker rule does not allow it; nothing changed."""


class BatchNotFound(LookupError):
    """No such batch of this merchant (another merchant's batch is not found too)."""


@dataclass
class RowCheck:
    """One row as given and what checking it found: `code` "" (fine) or the error code of docs/api.md, "Error codes"
    with `msg`."""

    line: int
    values: dict
    params: dict | None = None
    code: str = ""
    msg: str = ""
    note: str = ""  # e.g. the payout that exists already with these parameters (a replay)

    @property
    def ok(self) -> bool:
        return not self.code


@dataclass
class BatchInvalid(ValueError):
    """Rows that cannot be asked for; nothing was stored. `problem` is about the file as a whole."""

    rows: list[RowCheck] = field(default_factory=list)
    problem: str = ""

    def __str__(self) -> str:
        return self.problem or f"{sum(not row.ok for row in self.rows)} of {len(self.rows)} rows have errors"


@dataclass
class BatchCreated:
    batch: PayoutBatch
    replayed: bool  # the same file (or the same single payout) was asked for already: that batch, nothing new


def _require(actor, roles: tuple[str, ...], what: str) -> None:
    if actor.role not in roles:
        raise BatchRefused(f"Only {' or '.join(roles)} users may {what}; you are {actor.role}.")
    _require_active(actor.merchant.pk)


def _require_active(merchant_id: int) -> None:
    """A disabled merchant sends no payouts by hand, as its signed API calls get 1105: payout_create itself does not
    look (the API's authentication does), so these services do, at asking, deciding and creating."""
    if not Merchant.objects.filter(pk=merchant_id, is_active=True).exists():
        raise BatchRefused("Your merchant account is disabled: no payouts can be sent (1105). Contact us.")


# --- checking rows ------------------------------------------------------------------------------------------------


def _default_product(merchant: Merchant, currency: str) -> str:
    """The merchant's payout product for the currency when it has exactly one (the CSV may leave product_code out)."""
    codes = list(MerchantProduct.objects.filter(merchant=merchant, is_enabled=True, product__is_active=True,
                                                product__kind=Product.Kind.PAYOUT, product__currency_id=currency)
                 .values_list("product__code", flat=True)[:2])
    return codes[0] if len(codes) == 1 else ""


def row_check(*, merchant: Merchant, line: int, values: dict, defaults: dict | None = None) -> RowCheck:
    """The checks of payout/create in the order of docs/api.md, "Checks, in order", without creating anything: formats
    (1000), an mch_order_no already used (replay, or 2001), currency (1001), product (1002), amount (1003), bank code
    (2006). The balance (2003) is checked when the payout is created."""
    check = RowCheck(line=line, values=values)
    # empty = absent (docs/api.md, "Field formats")
    data = {name: value for name, value in values.items() if value not in (None, "")}
    if not data.get("product_code") and isinstance(data.get("currency"), str):
        defaults = {} if defaults is None else defaults  # one query per currency of a file, not per row
        if data["currency"] not in defaults:
            defaults[data["currency"]] = _default_product(merchant, data["currency"])
        data["product_code"] = defaults[data["currency"]] or values.get("product_code", "")
    if isinstance(data.get("amount"), str) and re.fullmatch(r"[0-9]{1,16}", data["amount"]):
        data["amount"] = int(data["amount"])
    serializer = PayoutCreateRequestSerializer(data=data)
    if not serializer.is_valid():
        name, errors = next(iter(serializer.errors.items()))
        if name == "product_code" and "product_code" not in values:
            return _fail(check, ErrorCode.PRODUCT_NOT_AVAILABLE, "product_code: you have more than one payout "
                                                                 "product for this currency (or none): name it.")
        words = "must be an integer of minor units (digits only)." if name == "amount" and isinstance(
            data.get("amount"), str) else errors[0]
        return _fail(check, ErrorCode.INVALID_REQUEST, f"{name}: {words}")
    params = dict(serializer.validated_data)
    check.params = params
    existing = payout_for_merchant(merchant_id=merchant.pk, mch_order_no=params["mch_order_no"])
    if existing is not None:
        try:
            replay_or_conflict(existing, stored=_payout_params(existing), request=params)
        except DomainError as exc:
            return _fail(check, exc.error, exc.msg)
        check.note = (f"exists already as {existing.platform_order_no} ({existing.status}): it will not be "
                      "created again")
        return check
    try:
        order_route(merchant_id=merchant.pk, kind=Product.Kind.PAYOUT, currency=params["currency"],
                    product_code=params["product_code"], amount=params["amount"])
        if bank_code_active(currency=params["currency"], code=params["bank_code"]) is None:
            raise DomainError(ErrorCode.UNKNOWN_BANK_CODE,
                              f"bank_code {params['bank_code']} is not in the {params['currency']} bank code table.")
    except DomainError as exc:
        return _fail(check, exc.error, exc.msg)
    return check


def _payout_params(payout) -> dict:
    """The parameters of payout/create a stored payout was made with: a row is that payout only when all are equal
    (the API's replay rule, apps.common.orders.replay_or_conflict)."""
    return {"product_code": payout.product.code, "amount": payout.amount, "currency": payout.currency_id,
            "payee_name": payout.payee_name, "payee_account": payout.payee_account, "bank_code": payout.bank_code,
            "attach": payout.attach}


def _fail(check: RowCheck, error: ErrorCode, msg: str) -> RowCheck:
    check.code, check.msg = error.code, msg
    return check


def rows_check(*, merchant: Merchant, rows: list[tuple[int, dict]], batch: PayoutBatch | None = None) -> list[RowCheck]:
    """Each row checked (row_check), plus: an mch_order_no twice in the file, or held by another live batch, is 2001."""
    defaults: dict = {}
    checks = [row_check(merchant=merchant, line=line, values=values, defaults=defaults) for line, values in rows]
    seen: dict[str, int] = {}
    numbers = [check.params["mch_order_no"] for check in checks if check.params]
    held = dict(PayoutBatchRow.objects.filter(merchant=merchant, claimed=True, mch_order_no__in=numbers)
                .exclude(batch=batch).values_list("mch_order_no", "batch_id"))
    for check in checks:
        if not check.params:
            continue
        number = check.params["mch_order_no"]
        if number in seen and check.ok:
            _fail(check, ErrorCode.DUPLICATE_ORDER, f"mch_order_no {number} is on line {seen[number]} too.")
        elif number in held and check.ok:
            _fail(check, ErrorCode.DUPLICATE_ORDER, f"mch_order_no {number} is in batch #{held[number]} already.")
        seen.setdefault(number, check.line)
    return checks


def csv_rows(data: bytes) -> list[tuple[int, dict]]:
    """(line, {column: text}) of a CSV file: UTF-8 (a BOM is allowed), a header naming the columns, at most MAX_ROWS
    rows. BatchInvalid(problem=...) when the file itself is unusable. Values are kept as written (docs/api.md, "Field
    formats": no trimming; a stray space is a 1000 on its row)."""
    if len(data) > MAX_FILE_BYTES:
        raise BatchInvalid(problem=f"The file is larger than {MAX_FILE_BYTES // 1024} KB; split it.")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise BatchInvalid(problem="The file is not UTF-8 text; save it as CSV UTF-8.") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
        if not header:
            raise BatchInvalid(problem="The file is empty.")
        header = [name.strip().lower() for name in header]
        missing = [name for name in COLUMNS if name not in header]
        unknown = [name for name in header if name not in COLUMNS + OPTIONAL_COLUMNS]
        if missing or unknown or len(set(header)) != len(header):
            raise BatchInvalid(problem=f"The first line must name the columns: {', '.join(COLUMNS)} (and optionally "
                                       f"{', '.join(OPTIONAL_COLUMNS)})"
                                       + (f"; missing {', '.join(missing)}" if missing else "")
                                       + (f"; unknown {', '.join(unknown)}" if unknown else "")
                                       + ("; a column is named twice" if len(set(header)) != len(header) else "") + ".")
        rows = []
        for values in reader:
            if not any(value.strip() for value in values):
                continue  # blank lines (a trailing newline, Excel's empty rows)
            if len(values) != len(header):
                raise BatchInvalid(problem=f"Line {reader.line_num} has {len(values)} values; the header names "
                                           f"{len(header)} columns.")
            rows.append((reader.line_num, dict(zip(header, values))))
            if len(rows) > MAX_ROWS:
                raise BatchInvalid(problem=f"At most {MAX_ROWS} payouts per file; split it.")
    except csv.Error as exc:
        raise BatchInvalid(problem=f"Line {reader.line_num}: not valid CSV ({exc}).") from None
    if not rows:
        raise BatchInvalid(problem="The file has a header but no payouts.")
    return rows


# --- asking for a batch -------------------------------------------------------------------------------------------


def payout_batch_from_csv(*, actor, file_name: str, data: bytes, note: str = "") -> BatchCreated:
    """A CSV file as a batch waiting for an owner; the same file again is the same batch (unless rejected)."""
    _require(actor, MAKER_ROLES, "ask for payouts")
    digest = hashlib.sha256(data).hexdigest()
    existing = _live_batch_of_file(merchant=actor.merchant, digest=digest)
    if existing is not None:
        return BatchCreated(existing, replayed=True)
    return _batch_create(actor=actor, rows=csv_rows(data), source=PayoutBatch.Source.CSV,
                         file_name=file_name[:255], digest=digest, note=note)


def payout_batch_single(*, actor, values: dict, note: str = "") -> BatchCreated:
    """One payout as a batch of one row waiting for an owner. The same mch_order_no again, with the same
    parameters, while its batch is live, is that batch."""
    _require(actor, MAKER_ROLES, "ask for payouts")
    rows = [(1, values)]
    if (existing := _same_request(actor=actor, rows=rows, source=PayoutBatch.Source.FORM, digest="")) is not None:
        return BatchCreated(existing, replayed=True)
    return _batch_create(actor=actor, rows=rows, source=PayoutBatch.Source.FORM, file_name="", digest="", note=note)


def _same_row(row: PayoutBatchRow, values: dict) -> bool:
    return all(str(getattr(row, name)) == str(values.get(name) or "") for name in FIELDS
               if name != "product_code" or values.get("product_code"))


def _live_batch_of_file(*, merchant: Merchant, digest: str) -> PayoutBatch | None:
    return PayoutBatch.objects.filter(merchant=merchant, file_sha256=digest, status__in=LIVE).first()


def _batch_create(*, actor, rows: list[tuple[int, dict]], source: str, file_name: str, digest: str,
                  note: str) -> BatchCreated:
    checks = rows_check(merchant=actor.merchant, rows=rows)
    if not all(check.ok for check in checks):
        # The same request, committed by a concurrent upload since this one looked (its rows now hold the numbers).
        if (existing := _same_request(actor=actor, rows=rows, source=source, digest=digest)) is not None:
            return BatchCreated(existing, replayed=True)
        raise BatchInvalid(rows=checks)
    try:
        return BatchCreated(_batch_insert(actor=actor, checks=checks, source=source, file_name=file_name,
                                          digest=digest, note=note), replayed=False)
    except IntegrityError:
        # A concurrent upload of the same file, or of another batch claiming one of these mch_order_no, committed
        # first: that batch, or the rows' errors as they are now.
        if (existing := _same_request(actor=actor, rows=rows, source=source, digest=digest)) is not None:
            return BatchCreated(existing, replayed=True)
        raise BatchInvalid(rows=rows_check(merchant=actor.merchant, rows=rows)) from None


def _same_request(*, actor, rows: list[tuple[int, dict]], source: str, digest: str) -> PayoutBatch | None:
    """The live batch this very request made already: the same file, or the same single payout."""
    if digest:
        return _live_batch_of_file(merchant=actor.merchant, digest=digest)
    if source == PayoutBatch.Source.FORM:
        row = (PayoutBatchRow.objects.filter(merchant=actor.merchant, claimed=True,
                                             mch_order_no=rows[0][1].get("mch_order_no") or "")
               .select_related("batch").first())
        if row is not None and row.batch.source == PayoutBatch.Source.FORM and _same_row(row, rows[0][1]):
            return row.batch
    return None


@transaction.atomic(durable=True)
def _batch_insert(*, actor, checks: list[RowCheck], source: str, file_name: str, digest: str,
                  note: str) -> PayoutBatch:
    batch = PayoutBatch.objects.create(merchant=actor.merchant, source=source, file_name=file_name,
                                       file_sha256=digest, row_count=len(checks), note=note[:255],
                                       created_by=actor.user)
    PayoutBatchRow.objects.bulk_create([
        PayoutBatchRow(batch=batch, merchant=actor.merchant, line=check.line,
                       **{name: check.params.get(name, "") for name in FIELDS})
        for check in checks])
    totals: dict[str, int] = {}
    for check in checks:
        totals[check.params["currency"]] = totals.get(check.params["currency"], 0) + check.params["amount"]
    audit.record(actor=actor.user, action="payout_batch.create", obj=batch,
                 new={"merchant_no": actor.merchant.merchant_no, "source": source, "rows": len(checks),
                      "totals": totals, "file_sha256": digest, "file_name": file_name})
    return batch


# --- deciding -------------------------------------------------------------------------------------------------


def _locked_batch(*, actor, batch_id: int) -> PayoutBatch:
    batch = PayoutBatch.objects.select_for_update().filter(pk=batch_id, merchant=actor.merchant).first()
    if batch is None:
        raise BatchNotFound(f"No batch #{batch_id}.")
    return batch


def _decidable(*, actor, batch_id: int) -> PayoutBatch:
    batch = PayoutBatch.objects.filter(pk=batch_id, merchant=actor.merchant).first()
    if batch is None:
        raise BatchNotFound(f"No batch #{batch_id}.")
    _check_decision(actor, batch)
    return batch


# Why a person may not approve payouts now (user id -> the words, "" when they may), registered from above: the
# portal's cooling-off after a person's access was recovered (docs/portal.md, "Cooling-off"), since whoever took an
# account over would send the merchant's money at once.
APPROVER_HOLDS: list[Callable[[int], str]] = []


def payout_approver_hold_register(hold: Callable[[int], str]) -> None:
    """Called once from an AppConfig.ready()."""
    if hold not in APPROVER_HOLDS:
        APPROVER_HOLDS.append(hold)


def _require_not_cooling_off(actor) -> None:
    """Before anything else of an approval: the holds registered above (the portal's cooling-off)."""
    for hold in APPROVER_HOLDS:
        refusal = hold(actor.user.pk)
        if refusal:
            raise BatchRefused(refusal)


def _check_decision(actor, batch: PayoutBatch) -> None:
    if batch.status != PayoutBatch.Status.PENDING:
        raise BatchRefused(f"Batch #{batch.pk} is {batch.get_status_display().lower()} already"
                           + (f" (by {batch.decided_by.get_username()})" if batch.decided_by_id else "") + ".")
    _maker_still_may_ask(batch)
    _checker_independent(actor, batch)


def _maker_still_may_ask(batch: PayoutBatch) -> None:
    """A waiting batch lives only as long as its maker's right to ask for it, as an invite does (docs/portal.md,
    "Maker-checker and independence"): a maker switched off, or moved to a role that cannot ask, leaves a batch that
    can only be rejected."""
    try:
        maker = batch.created_by.merchant_user  # the maker's membership (apps.portal), read through the relation
    except ObjectDoesNotExist:
        maker = None
    if (maker is None or maker.merchant_id != batch.merchant_id or not maker.is_active
            or not batch.created_by.is_active or maker.role not in MAKER_ROLES):
        raise BatchRefused(f"{batch.created_by.get_username()}, who asked for this batch, can no longer ask for "
                           "payouts (switched off, or another role): it cannot be approved. Reject it, and ask "
                           "again as a person who may.")


def _checker_independent(actor, batch: PayoutBatch) -> None:
    """The merchant's maker-checker (docs/portal.md, "Maker-checker and independence"): the approver is another
    person than the maker, by the one independence rule: not the maker, not an account the maker controls (invited,
    granted a role), not one that controls the maker, and not one controlled by the same third account."""
    if refusal := maker_checker_refusal(maker=batch.created_by, checker_user=actor.user, what="batch"):
        raise BatchRefused(refusal)


def batch_checker_problem(*, actor, batch: PayoutBatch) -> str:
    """Why this owner may not approve this batch under the maker-checker rule ("" when they may): for the page."""
    try:
        _maker_still_may_ask(batch)
        _checker_independent(actor, batch)
    except BatchRefused as exc:
        return str(exc)
    return ""


def payout_batch_approve(*, actor, batch_id: int, otp_code: str) -> PayoutBatch:
    """An owner independent of the maker approves a waiting batch, with a fresh code of their authenticator. Decided
    under the batch's row lock: of two approvals at once, one approves and the other is told it was approved already.
    The payouts are then created by payout_batch_process (the caller runs it, after this commits)."""
    _require(actor, CHECKER_ROLES, "approve payouts")
    _require_not_cooling_off(actor)
    _decidable(actor=actor, batch_id=batch_id)
    second_factor_confirm(user=actor.user, code=otp_code)  # committed on its own: a wrong code is counted
    return _approve(actor=actor, batch_id=batch_id)


@transaction.atomic(durable=True)
def _approve(*, actor, batch_id: int) -> PayoutBatch:
    batch = _locked_batch(actor=actor, batch_id=batch_id)
    _check_decision(actor, batch)
    now = timezone.now()
    batch.status, batch.decided_by, batch.decided_at, batch.progress_at = (
        PayoutBatch.Status.APPROVED, actor.user, now, now)
    batch.save(update_fields=["status", "decided_by", "decided_at", "progress_at"])
    audit.record(actor=actor.user, action="payout_batch.approve", obj=batch,
                 new={"status": batch.status, "rows": batch.row_count,
                      "maker": batch.created_by.get_username()})
    return batch


@transaction.atomic(durable=True)
def payout_batch_reject(*, actor, batch_id: int, reason: str) -> PayoutBatch:
    """An owner rejects a waiting batch (the maker may withdraw their own this way too): nothing is created, and its
    rows' mch_order_no are free again."""
    if actor.role not in CHECKER_ROLES:  # a disabled merchant's owner may still reject: it moves nothing
        raise BatchRefused(f"Only owner users may reject payouts; you are {actor.role}.")
    reason = (reason or "").strip()
    if not reason:
        raise BatchRefused("Say why you reject it (the maker reads it).")
    batch = _locked_batch(actor=actor, batch_id=batch_id)
    if batch.status != PayoutBatch.Status.PENDING:
        raise BatchRefused(f"Batch #{batch.pk} is {batch.get_status_display().lower()} already.")
    batch.status, batch.decided_by, batch.decided_at, batch.decision_reason = (
        PayoutBatch.Status.REJECTED, actor.user, timezone.now(), reason)
    batch.save(update_fields=["status", "decided_by", "decided_at", "decision_reason"])
    batch.rows.update(claimed=False, status=PayoutBatchRow.Status.FAILED, error_msg="batch rejected")
    audit.record(actor=actor.user, action="payout_batch.reject", obj=batch, new={"status": batch.status},
                 reason=reason)
    return batch


# --- creating the payouts ----------------------------------------------------------------------------------------


def payout_batch_process(*, batch_id: int) -> PayoutBatch:
    """Create the payouts of an approved batch, one row at a time, each in payout_create's own transaction, then
    record the row's result in a second one. Safe to run again, and twice at once (a crash, the sweep): a row's
    payout is found again by its mch_order_no (payout_create replays it), never created twice."""
    batch = PayoutBatch.objects.select_related("merchant").get(pk=batch_id)
    if batch.status != PayoutBatch.Status.APPROVED:
        return batch
    for row in batch.rows.filter(status=PayoutBatchRow.Status.PENDING).order_by("line"):
        _row_run(batch=batch, row=row)
    return _finish(batch_id=batch_id)


def _row_run(*, batch: PayoutBatch, row: PayoutBatchRow) -> None:
    params = {name: getattr(row, name) for name in FIELDS if name != "mch_order_no"}
    try:
        _require_active(batch.merchant_id)  # disabled after the approval: the rows not created yet are not
    except BatchRefused as exc:
        _row_record(row_id=row.pk, payout=None, error=(ErrorCode.MERCHANT_DISABLED.code, str(exc)))
        return
    try:
        payout = payout_create(merchant=batch.merchant, mch_order_no=row.mch_order_no, **params)
    except DomainError as exc:
        _row_record(row_id=row.pk, payout=None, error=(exc.error.code, exc.msg))
        return
    except Exception as exc:  # noqa: BLE001 - one row's unexpected failure is that row's result, not the batch's
        logger.exception("payout batch %s row %s failed", batch.pk, row.line)
        _row_record(row_id=row.pk, payout=None,
                    error=(ErrorCode.INTERNAL_ERROR.code, f"internal error ({type(exc).__name__}); not created"))
        return
    _row_record(row_id=row.pk, payout=payout, error=None)


@transaction.atomic(durable=True)
def _row_record(*, row_id: int, payout, error: tuple[str, str] | None) -> None:
    row = PayoutBatchRow.objects.select_for_update().select_related("batch").get(pk=row_id)
    if row.status == PayoutBatchRow.Status.CREATED:
        return  # a concurrent processor recorded the payout: it stands
    if error is not None:
        # A concurrent processor's create may have committed after this one failed its checks (2003 once the
        # other froze the money): the payout exists, and that is this row's result.
        payout = payout_for_merchant(merchant_id=row.merchant_id, mch_order_no=row.mch_order_no)
    now = timezone.now()
    if payout is not None and (different := _differences(payout, row)):
        # Another order holds this number (the API made it after the row was asked for): never this row's payout.
        payout, error = None, (ErrorCode.DUPLICATE_ORDER.code, (
            f"An order with mch_order_no {row.mch_order_no} already exists with different details "
            f"({', '.join(different)}): this row's payout was not created."))
    if payout is not None:
        # Replayed: the order existed before the owner approved (the API, or an earlier batch), not made by this one.
        replayed = payout.created_at < row.batch.decided_at
        row.status, row.payout, row.replayed, row.error_code, row.error_msg = (
            PayoutBatchRow.Status.CREATED, payout, replayed, "", "")
    else:
        row.status, row.error_code, row.error_msg = PayoutBatchRow.Status.FAILED, error[0], error[1]
    row.finished_at = now
    row.save(update_fields=["status", "payout", "replayed", "error_code", "error_msg", "finished_at"])
    PayoutBatch.objects.filter(pk=row.batch_id).update(progress_at=now)


def _differences(payout, row: PayoutBatchRow) -> list[str]:
    """The fields in which a stored payout differs from the row (none: the row's own payout, created or replayed)."""
    return sorted(name for name, value in _payout_params(payout).items() if getattr(row, name) != value)


@transaction.atomic(durable=True)
def _finish(*, batch_id: int) -> PayoutBatch:
    batch = PayoutBatch.objects.select_for_update().get(pk=batch_id)
    if batch.status == PayoutBatch.Status.APPROVED and not batch.rows.filter(
            status=PayoutBatchRow.Status.PENDING).exists():
        counts = {status: batch.rows.filter(status=status).count()
                  for status in (PayoutBatchRow.Status.CREATED, PayoutBatchRow.Status.FAILED)}
        batch.status, batch.finished_at = PayoutBatch.Status.DONE, timezone.now()
        batch.save(update_fields=["status", "finished_at"])
        audit.record(actor=None, actor_label="system", action="payout_batch.done", obj=batch,
                     new={"created": counts["CREATED"], "failed": counts["FAILED"]})
    return batch


def payout_batches_resume(*, idle_seconds: int = 120) -> list[int]:
    """The sweep: approved batches whose processing stopped (a worker or request lost mid-batch) are processed
    again; rows already done are skipped, a row's payout is found by its mch_order_no."""
    cutoff = timezone.now() - timedelta(seconds=idle_seconds)
    ids = list(PayoutBatch.objects.filter(Q(progress_at__lt=cutoff) | Q(progress_at__isnull=True),
                                          status=PayoutBatch.Status.APPROVED).values_list("pk", flat=True))
    for batch_id in ids:
        payout_batch_process(batch_id=batch_id)
    return ids
