from django.urls import path

from apps.ledger.api.views import BalanceView, StatementView

urlpatterns = [path("balance", BalanceView.as_view(), name="balance"),
               path("statement", StatementView.as_view(), name="statement")]
