from django.urls import path

from apps.collection.api.views import PayCreateView, PayQueryView, RefundCreateView, RefundQueryView

urlpatterns = [
    path("pay/create", PayCreateView.as_view(), name="pay-create"),
    path("pay/query", PayQueryView.as_view(), name="pay-query"),
    path("refund/create", RefundCreateView.as_view(), name="refund-create"),
    path("refund/query", RefundQueryView.as_view(), name="refund-query"),
]
