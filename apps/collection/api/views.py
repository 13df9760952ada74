from drf_spectacular.utils import extend_schema

from apps.collection.api.serializers import (PAY_QUERY_FIELDS, PayCreateRequestSerializer, PayCreateSerializer,
                                             PayQuerySerializer, RefundCreateRequestSerializer,
                                             RefundQueryRequestSerializer, RefundSerializer, pay_create_data,
                                             pay_query_data, refund_data)
from apps.collection.refunds import refund_create, refund_with_totals
from apps.collection.selectors import collection_order_for_merchant, refund_for_merchant
from apps.collection.services import collection_create
from apps.common.api.schema import signed_request_schema
from apps.common.api.serializers import OrderLookupRequestSerializer
from apps.common.errors import ApiError, ErrorCode
from apps.merchants.api.base import SignedAPIView


class PayCreateView(SignedAPIView):
    """POST /openapi/v1/pay/create (docs/api.md, "Endpoints"): a CREATED order with its pay_url, or the replayed one."""

    @extend_schema(**signed_request_schema(
        "pay_create", PayCreateRequestSerializer, PayCreateSerializer,
        example_request={"mch_order_no": "demo-1", "product_code": "PHP_COLLECT_D1", "amount": 10000, "currency": "PHP",
                         "subject": "Demo order", "return_url": "https://example.com/thanks", "attach": "cart=42"},
        example_data={"platform_order_no": "C20261125083012Xk3Pq9Rt2Vw7Yz4M", "mch_order_no": "demo-1",
                      "pay_url": "http://127.0.0.1:8000/pay/9xQ2vR7kLm3pT8wZ1yB4nC6dF0gH5jK-",
                      "amount": 10000, "currency": "PHP", "expire_at": 1764060600, "status": "CREATED"}))
    def post(self, request):
        params = self.validated(PayCreateRequestSerializer)
        order = collection_create(merchant=self.signed.merchant, **params)
        return self.answer(pay_create_data(order))


class PayQueryView(SignedAPIView):
    """POST /openapi/v1/pay/query (docs/api.md, "Endpoints"): platform_order_no wins when both numbers are sent."""

    @extend_schema(**signed_request_schema(
        "pay_query", OrderLookupRequestSerializer, PayQuerySerializer, example_request={"mch_order_no": "demo-1"},
        example_data={"platform_order_no": "C20261125083012Xk3Pq9Rt2Vw7Yz4M", "mch_order_no": "demo-1",
                      "amount": 10000, "currency": "PHP", "status": "SUCCESS", "paid_at": 1764060123,
                      "attach": "cart=42"}))
    def post(self, request):
        params = self.validated(OrderLookupRequestSerializer)
        order = collection_order_for_merchant(merchant_id=self.signed.merchant.pk,
                                              platform_order_no=params.get("platform_order_no"),
                                              mch_order_no=params.get("mch_order_no"), fields=PAY_QUERY_FIELDS)
        if order is None:
            raise ApiError(ErrorCode.ORDER_NOT_FOUND, "collection order not found.")
        return self.answer(pay_query_data(order))


_REFUND_EXAMPLE = {"mch_refund_no": "rf-1", "refund_no": "R20261125091500Hq4Zt8Lm2Xc6Vb1N", "mch_order_no": "demo-1",
                   "platform_order_no": "C20261125083012Xk3Pq9Rt2Vw7Yz4M", "currency": "PHP", "amount": 3000,
                   "status": "PROCESSING", "created_at": 1764062100, "refunded_total": 3000, "refundable": 7000}


class RefundCreateView(SignedAPIView):
    """POST /openapi/v1/refund/create (docs/api.md, "Refunds"): holds the amount; PROCESSING, or the replayed one."""

    @extend_schema(**signed_request_schema(
        "refund_create", RefundCreateRequestSerializer, RefundSerializer,
        example_request={"mch_order_no": "demo-1", "mch_refund_no": "rf-1", "amount": 3000,
                         "reason": "returned goods"},
        example_data=_REFUND_EXAMPLE))
    def post(self, request):
        params = self.validated(RefundCreateRequestSerializer)
        refund = refund_create(merchant=self.signed.merchant, **params)
        return self.answer(refund_data(refund))


class RefundQueryView(SignedAPIView):
    """POST /openapi/v1/refund/query (docs/api.md, "Refunds"): refund_no wins when both numbers are sent."""

    @extend_schema(**signed_request_schema(
        "refund_query", RefundQueryRequestSerializer, RefundSerializer, example_request={"mch_refund_no": "rf-1"},
        example_data={**_REFUND_EXAMPLE, "status": "SUCCESS", "finished_at": 1764062103}))
    def post(self, request):
        params = self.validated(RefundQueryRequestSerializer)
        refund = refund_for_merchant(merchant_id=self.signed.merchant.pk, refund_no=params.get("refund_no"),
                                     mch_refund_no=params.get("mch_refund_no"))
        if refund is None:
            raise ApiError(ErrorCode.ORDER_NOT_FOUND, "refund not found.")
        return self.answer(refund_data(refund_with_totals(refund)))
