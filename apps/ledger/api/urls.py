from django.urls import path

from apps.ledger.api.views import BalanceView

urlpatterns = [path("balance", BalanceView.as_view(), name="balance")]
