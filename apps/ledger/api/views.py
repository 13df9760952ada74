from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from apps.common.api.envelope import envelope
from apps.common.api.schema import signed_request_schema
from apps.common.errors import ApiError, ErrorCode
from apps.currencies.selectors import currency_get
from apps.ledger.api.serializers import BalanceRequestSerializer, BalanceSerializer
from apps.ledger.selectors import merchant_balances
from apps.merchants.api.base import SignedAPIView


class BalanceView(SignedAPIView):
    """POST /openapi/v1/balance: one currency per call; `frozen` is never shown (interface §4.1)."""

    @extend_schema(**signed_request_schema(
        "balance", BalanceRequestSerializer, BalanceSerializer, example_request={"currency": "PHP"},
        example_data={"currency": "PHP", "available": 10000000, "settling": 0}))
    def post(self, request):
        params = self.validated(BalanceRequestSerializer)
        currency = currency_get(params["currency"])
        if currency is None:
            raise ApiError(ErrorCode.CURRENCY_NOT_AVAILABLE, f"currency {params['currency']} is not known.")
        balances = merchant_balances(merchant_id=self.signed.merchant.pk, currency=currency.code)
        return Response(envelope({"currency": currency.code, "available": balances["available"],
                                  "settling": balances["settling"]}))
