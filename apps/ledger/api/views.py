from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema

from apps.common.api.schema import signed_request_schema
from apps.common.errors import ApiError, ErrorCode
from apps.currencies.selectors import currency_get
from apps.ledger.api.serializers import (BalanceRequestSerializer, BalanceSerializer, StatementRequestSerializer,
                                         StatementSerializer)
from apps.ledger.selectors import merchant_balances
from apps.ledger.services import statement_read
from apps.ledger.statements import statement_data
from apps.merchants.api.base import SignedAPIView
from apps.merchants.models import MerchantCurrency


class BalanceView(SignedAPIView):
    """POST /openapi/v1/balance: one currency per call; `frozen` is never shown (docs/api.md, "Endpoints")."""

    @extend_schema(**signed_request_schema(
        "balance", BalanceRequestSerializer, BalanceSerializer, example_request={"currency": "PHP"},
        example_data={"currency": "PHP", "available": 10000000, "settling": 0}))
    def post(self, request):
        params = self.validated(BalanceRequestSerializer)
        currency = currency_get(params["currency"])
        if currency is None:
            raise ApiError(ErrorCode.CURRENCY_NOT_AVAILABLE, f"currency {params['currency']} is not known.")
        balances = merchant_balances(merchant_id=self.signed.merchant.pk, currency=currency.code)
        return self.answer({"currency": currency.code, "available": balances["available"],
                            "settling": balances["settling"]})


STATEMENT_EXAMPLE = {
    "merchant_no": "M10000001", "currency": "PHP", "date": "2026-11-24", "time_zone": "Asia/Manila",
    "closing_time": "2026-11-25T00:00:00+08:00", "final": True,
    "accounts": [{"account": "available", "opening": 150000, "closing": 150000},
                 {"account": "settling", "opening": 0, "closing": 9900},
                 {"account": "frozen", "opening": 0, "closing": 0}],
    "movements": [{"time": "2026-11-24T09:15:02+08:00", "kind": "collection.success", "cause": "C20261124000000001",
                   "account": "settling", "amount": 9900, "balance": 9900}],
    "digest": "<SHA-256 hex of the CSV body>", "key_version": 1, "sign_type": "RSA2",
    "signature": "<base64 RSA2 signature of the platform key>",
}


def _statement_schema() -> dict:
    schema = signed_request_schema("statement", StatementRequestSerializer, StatementSerializer,
                                   example_request={"date": "2026-11-24", "currency": "PHP"},
                                   example_data=STATEMENT_EXAMPLE)
    responses = schema.pop("responses")
    schema["responses"] = {(200, "application/json"): responses.pop(200),
                           (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description=(
                               "format=csv: the signed CSV (docs/api.md, Statements)")),
                           **responses}
    return schema


class StatementView(SignedAPIView):
    """POST /openapi/v1/statement: the merchant's signed statement of one day and currency (docs/api.md,
    "Statements")."""

    @extend_schema(**_statement_schema())
    def post(self, request):
        params = self.validated(StatementRequestSerializer)
        merchant = self.signed.merchant
        currency = currency_get(params["currency"])
        # The merchant's currency: enabled now or once (its history stays readable), else 1001 as on balance.
        if currency is None or not MerchantCurrency.objects.filter(merchant=merchant, currency=currency).exists():
            raise ApiError(ErrorCode.CURRENCY_NOT_AVAILABLE,
                           f"currency {params['currency']} is not a currency of this merchant.")
        statement = statement_read(merchant=merchant, currency=currency.code, day=params["date"])
        if params["format"] == "csv":
            response = HttpResponse(statement.csv_text, content_type="text/csv; charset=utf-8")
            response["Content-Disposition"] = (f'attachment; filename="statement-{merchant.merchant_no}-'
                                               f'{currency.code}-{statement.date.isoformat()}.csv"')
            return response
        return self.answer(statement_data(statement))
