from django.urls import path

from apps.collection.api.views import PayCreateView, PayQueryView

urlpatterns = [
    path("pay/create", PayCreateView.as_view(), name="pay-create"),
    path("pay/query", PayQueryView.as_view(), name="pay-query"),
]
