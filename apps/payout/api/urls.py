from django.urls import path

from apps.payout.api.views import PayoutCreateView, PayoutQueryView

urlpatterns = [
    path("payout/create", PayoutCreateView.as_view(), name="payout-create"),
    path("payout/query", PayoutQueryView.as_view(), name="payout-query"),
]
