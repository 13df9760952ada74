from django.urls import path

from apps.callbacks.api.views import CallbacksListView, CallbacksResendView

urlpatterns = [
    path("callbacks/list", CallbacksListView.as_view(), name="callbacks-list"),
    path("callbacks/resend", CallbacksResendView.as_view(), name="callbacks-resend"),
]
