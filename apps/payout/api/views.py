from drf_spectacular.utils import extend_schema

from apps.common.api.schema import signed_request_schema
from apps.common.api.serializers import OrderLookupRequestSerializer
from apps.common.errors import ApiError, ErrorCode
from apps.merchants.api.base import SignedAPIView
from apps.payout.api.serializers import PayoutCreateRequestSerializer, PayoutCreateSerializer, PayoutQuerySerializer
from apps.payout.selectors import payout_create_data, payout_for_merchant, payout_query_data
from apps.payout.services import payout_create


class PayoutCreateView(SignedAPIView):
    """POST /openapi/v1/payout/create (docs/api.md, "Endpoints"): freezes amount + fee; APPROVED, FROZEN or a replay."""

    @extend_schema(**signed_request_schema(
        "payout_create", PayoutCreateRequestSerializer, PayoutCreateSerializer,
        example_request={"mch_order_no": "po-1", "product_code": "PHP_PAYOUT", "amount": 25000, "currency": "PHP",
                         "payee_name": "Juan dela Cruz", "payee_account": "0012345678", "bank_code": "GCASH"},
        example_data={"platform_order_no": "PO20261125b7e1c0d9a8f6e5d4c3b2a19f8e7d6c5b", "mch_order_no": "po-1",
                      "amount": 25000, "fee": 1000, "currency": "PHP", "status": "APPROVED",
                      "review_required": False}))
    def post(self, request):
        params = self.validated(PayoutCreateRequestSerializer)
        payout = payout_create(merchant=self.signed.merchant, **params)
        return self.answer(payout_create_data(payout))


class PayoutQueryView(SignedAPIView):
    """POST /openapi/v1/payout/query (docs/api.md, "Endpoints"): platform_order_no wins when both numbers are sent."""

    @extend_schema(**signed_request_schema(
        "payout_query", OrderLookupRequestSerializer, PayoutQuerySerializer,
        example_request={"platform_order_no": "PO20261125b7e1c0d9a8f6e5d4c3b2a19f8e7d6c5b"},
        example_data={"platform_order_no": "PO20261125b7e1c0d9a8f6e5d4c3b2a19f8e7d6c5b", "mch_order_no": "po-1",
                      "amount": 25000, "fee": 1000, "currency": "PHP", "status": "SUCCESS",
                      "finished_at": 1764060125}))
    def post(self, request):
        params = self.validated(OrderLookupRequestSerializer)
        payout = payout_for_merchant(merchant_id=self.signed.merchant.pk,
                                     platform_order_no=params.get("platform_order_no"),
                                     mch_order_no=params.get("mch_order_no"))
        if payout is None:
            raise ApiError(ErrorCode.ORDER_NOT_FOUND, "payout order not found.")
        return self.answer(payout_query_data(payout))
