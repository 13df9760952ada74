from drf_spectacular.utils import extend_schema

from apps.callbacks.api.serializers import (CallbackResendDataSerializer, CallbacksListDataSerializer,
                                            CallbacksListRequestSerializer, CallbacksResendRequestSerializer,
                                            callback_resend_data, callbacks_list_data, created_range)
from apps.callbacks.resend import callback_resend_by_merchant
from apps.callbacks.selectors import callback_events_for_merchant
from apps.common.api.schema import signed_request_schema
from apps.merchants.api.base import SignedAPIView

EXAMPLE_BODY = {"platform_order_no": "C20261125083012Xk3Pq9Rt2Vw7Yz4M", "mch_order_no": "demo-1", "amount": 10000,
                "currency": "PHP", "status": "SUCCESS", "paid_at": 1764060123, "attach": "cart=42", "key_version": 1,
                "timestamp": 1764060124, "nonce": "8c1f0e9a2b7d4c3e9f1a2b3c4d5e6f70", "sign_type": "RSA2",
                "sign": "<base64 signature by the platform key of key_version>"}
EXAMPLE_EVENT = {
    "event_id": 42, "type": "collection.success", "platform_order_no": "C20261125083012Xk3Pq9Rt2Vw7Yz4M",
    "status": "dead", "created_at": 1764060123, "delivered_at": None, "next_attempt_at": None, "attempts_count": 9,
    "last_error": "connection failed: Connection refused",
    "attempts": [{"number": 9, "started_at": 1764220000, "finished_at": 1764220000, "http_status": None,
                  "success": False, "error": "connection failed: Connection refused", "duration_ms": 3,
                  "key_version": 1, "manual": False}],
    "body": EXAMPLE_BODY,
}


class CallbacksListView(SignedAPIView):
    """POST /openapi/v1/callbacks/list: the merchant's callback events, newest first, with attempts and last body."""

    @extend_schema(**signed_request_schema(
        "callbacks_list", CallbacksListRequestSerializer, CallbacksListDataSerializer,
        example_request={"status": "dead", "limit": 20},
        example_data={"events": [EXAMPLE_EVENT], "next_cursor": "Y2IxOjQy"}))
    def post(self, request):
        params = self.validated(CallbacksListRequestSerializer)
        events, has_more = callback_events_for_merchant(
            merchant_id=self.signed.merchant.pk, limit=params["limit"], platform_order_no=params.get("platform_order_no"),
            type=params.get("type"), status=params.get("status"), before_id=params.get("cursor"),
            **created_range(params))
        return self.answer(callbacks_list_data(events, has_more))


class CallbacksResendView(SignedAPIView):
    """POST /openapi/v1/callbacks/resend: one extra attempt at one of the merchant's dead or delivered events."""

    @extend_schema(**signed_request_schema(
        "callbacks_resend", CallbacksResendRequestSerializer, CallbackResendDataSerializer,
        example_request={"event_id": 42},
        example_data={"event_id": 42, "type": "collection.success", "platform_order_no": EXAMPLE_EVENT[
            "platform_order_no"], "status": "pending", "attempts_count": 9, "next_attempt_at": 1764300000}))
    def post(self, request):
        params = self.validated(CallbacksResendRequestSerializer)
        event = callback_resend_by_merchant(merchant=self.signed.merchant, **params)
        return self.answer(callback_resend_data(event))
