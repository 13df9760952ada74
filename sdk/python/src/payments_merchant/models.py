"""Typed results of the API (docs/api.md, "Endpoints"). Each keeps the `data` object it was read from in `raw`, so
fields a newer platform adds are not lost."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@dataclass(frozen=True, slots=True)
class Balance:
    currency: str
    available: int
    settling: int
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Balance:
        return cls(currency=data["currency"], available=data["available"], settling=data["settling"], raw=data)


@dataclass(frozen=True, slots=True)
class Currency:
    code: str
    name: str
    symbol: str
    minor_unit: int
    active: bool
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Currency:
        return cls(code=data["code"], name=data["name"], symbol=data["symbol"], minor_unit=data["minor_unit"],
                   active=data["active"], raw=data)


@dataclass(frozen=True, slots=True)
class PayOrder:
    """`pay/create`: the new order (or the original one, for an identical repeated create)."""

    platform_order_no: str
    mch_order_no: str
    pay_url: str
    amount: int
    currency: str
    expire_at: int
    status: str
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> PayOrder:
        return cls(platform_order_no=data["platform_order_no"], mch_order_no=data["mch_order_no"],
                   pay_url=data["pay_url"], amount=data["amount"], currency=data["currency"],
                   expire_at=data["expire_at"], status=data["status"], raw=data)


@dataclass(frozen=True, slots=True)
class PayQueryResult:
    """`pay/query`: `paid_at` on SUCCESS, `attach` when set."""

    platform_order_no: str
    mch_order_no: str
    amount: int
    currency: str
    status: str
    paid_at: int | None = None
    attach: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> PayQueryResult:
        return cls(platform_order_no=data["platform_order_no"], mch_order_no=data["mch_order_no"],
                   amount=data["amount"], currency=data["currency"], status=data["status"],
                   paid_at=_int_or_none(data.get("paid_at")), attach=_str_or_none(data.get("attach")), raw=data)


@dataclass(frozen=True, slots=True)
class PayoutOrder:
    """`payout/create`: APPROVED, or FROZEN with `review_required` (or the original order on a replay)."""

    platform_order_no: str
    mch_order_no: str
    amount: int
    fee: int
    currency: str
    status: str
    review_required: bool
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> PayoutOrder:
        return cls(platform_order_no=data["platform_order_no"], mch_order_no=data["mch_order_no"],
                   amount=data["amount"], fee=data["fee"], currency=data["currency"], status=data["status"],
                   review_required=bool(data.get("review_required", False)), raw=data)


@dataclass(frozen=True, slots=True)
class PayoutQueryResult:
    """`payout/query`: `finished_at` once terminal, `reversed_at` if reversed, `fail_reason` on failure."""

    platform_order_no: str
    mch_order_no: str
    amount: int
    fee: int
    currency: str
    status: str
    finished_at: int | None = None
    reversed_at: int | None = None
    fail_reason: str | None = None
    attach: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> PayoutQueryResult:
        return cls(platform_order_no=data["platform_order_no"], mch_order_no=data["mch_order_no"],
                   amount=data["amount"], fee=data["fee"], currency=data["currency"], status=data["status"],
                   finished_at=_int_or_none(data.get("finished_at")),
                   reversed_at=_int_or_none(data.get("reversed_at")),
                   fail_reason=_str_or_none(data.get("fail_reason")), attach=_str_or_none(data.get("attach")),
                   raw=data)


@dataclass(frozen=True, slots=True)
class Refund:
    """`refund/create` and `refund/query`: the refund, and its order's `refunded_total` (refunds not FAILED, this one
    included) and `refundable` as they are now; `finished_at` once terminal, `fail_reason` on FAILED."""

    mch_refund_no: str
    refund_no: str
    mch_order_no: str
    platform_order_no: str
    currency: str
    amount: int
    status: str
    created_at: int
    refunded_total: int
    refundable: int
    finished_at: int | None = None
    fail_reason: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Refund:
        return cls(mch_refund_no=data["mch_refund_no"], refund_no=data["refund_no"],
                   mch_order_no=data["mch_order_no"], platform_order_no=data["platform_order_no"],
                   currency=data["currency"], amount=data["amount"], status=data["status"],
                   created_at=data["created_at"], refunded_total=data["refunded_total"],
                   refundable=data["refundable"], finished_at=_int_or_none(data.get("finished_at")),
                   fail_reason=_str_or_none(data.get("fail_reason")), raw=data)


@dataclass(frozen=True, slots=True)
class CallbackEventPage:
    """`callbacks/list`: one page of events, newest first; `next_cursor` is None on the last page. Each event is
    the platform's object as sent (`event_id`, `type`, `status`, `attempts`, `body`, ...; docs/api.md, "Callback
    events: list and re-send")."""

    events: list[Mapping[str, Any]]
    next_cursor: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> CallbackEventPage:
        return cls(events=list(data["events"]), next_cursor=_str_or_none(data.get("next_cursor")), raw=data)


@dataclass(frozen=True, slots=True)
class Statement:
    """`statement` (JSON): one day and currency; `accounts` with `opening` and `closing` per account, `movements`
    in posting order, and the platform's signature over the CSV's digest (`verify_statement`). `final` is False for
    today's provisional statement (its `closing_time` is when it was built); keep the final one, asked for after
    the day's close."""

    merchant_no: str
    currency: str
    date: str
    time_zone: str
    accounts: list[Mapping[str, Any]]
    movements: list[Mapping[str, Any]]
    digest: str
    key_version: int
    signature: str
    final: bool | None = None  # None: a platform that does not say
    closing_time: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Statement:
        return cls(merchant_no=data["merchant_no"], currency=data["currency"], date=data["date"],
                   time_zone=data["time_zone"], accounts=list(data["accounts"]), movements=list(data["movements"]),
                   digest=data["digest"], key_version=data["key_version"], signature=data["signature"],
                   final=data.get("final"), closing_time=data.get("closing_time"), raw=data)

    def closing(self, account: str = "available") -> int:
        return int(next(item["closing"] for item in self.accounts if item["account"] == account))

    def opening(self, account: str = "available") -> int:
        return int(next(item["opening"] for item in self.accounts if item["account"] == account))
